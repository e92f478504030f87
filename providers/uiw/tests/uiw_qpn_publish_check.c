// uiw_qpn_publish_check.c: a QP that create_qp has not finished making cannot be named.
//
// iw_cm takes a reference on any QP its iw_get_qp() finds by number (rdma_connect of an id
// without a QP passes the caller's qp_num), and only destroy_qp waits for such references. So a
// QP must not be findable until create_qp can no longer fail: its last failable step is copying
// the driver response to the caller, after which a failed create frees the QP under that
// reference.
//
// The response is made to stall: the legacy write() create_qp command gets a response buffer
// whose driver part lies on a page registered with userfaultfd, so uiw.ko's copy waits in the
// fault. Meanwhile rdma_connect names the number that QP will get (allocation is cyclic, so the
// number after a QP created just before); it must fail with EINVAL (no such QP). The page is
// then unmapped and the fault released, so the copy fails (EFAULT) and the create is undone.
// Last, the same id connects with a live QP's number, which must be accepted: the refusal was
// about the number, not the id.
//
// usage: uiw_qpn_publish_check SRC_ADDR DST_ADDR PORT  (needs userfaultfd for kernel faults:
// CAP_SYS_PTRACE, or vm.unprivileged_userfaultfd=1)
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <infiniband/verbs.h>
#include <linux/userfaultfd.h>
#include <poll.h>
#include <pthread.h>
#include <rdma/ib_user_verbs.h>
#include <rdma/rdma_cma.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>

#include "uiw_pair.h"  // die, ok

static struct rdma_event_channel* ch;

static void await_event(enum rdma_cm_event_type want) {
  struct rdma_cm_event* ev;
  struct pollfd p = {.fd = ch->fd, .events = POLLIN};
  if (poll(&p, 1, 10000) != 1) die("no rdma_cm event (waiting for %s)", rdma_event_str(want));
  if (rdma_get_cm_event(ch, &ev)) die("rdma_get_cm_event: %s", strerror(errno));
  enum rdma_cm_event_type got = ev->event;
  int status = ev->status;
  rdma_ack_cm_event(ev);
  if (got != want)
    die("rdma_cm event %s (status %d), want %s", rdma_event_str(got), status, rdma_event_str(want));
}

static void to_sockaddr(const char* text, int port, struct sockaddr_storage* ss) {
  struct sockaddr_in* a = (struct sockaddr_in*)ss;
  struct sockaddr_in6* a6 = (struct sockaddr_in6*)ss;
  memset(ss, 0, sizeof(*ss));
  if (inet_pton(AF_INET, text, &a->sin_addr) == 1) {
    a->sin_family = AF_INET;
    a->sin_port = htons(port);
  } else if (inet_pton(AF_INET6, text, &a6->sin6_addr) == 1) {
    a6->sin6_family = AF_INET6;
    a6->sin6_port = htons(port);
  } else {
    die("not an address: %s", text);
  }
}

// The create_qp write() command whose response the kernel writes at resp.
struct create_qp_req {
  struct ib_uverbs_cmd_hdr hdr;
  struct ib_uverbs_create_qp cmd;
};

struct stalled_create {
  struct ibv_context* ctx;
  struct create_qp_req req;
  ssize_t rc;
  int err;
};

static void* run_create(void* arg) {
  struct stalled_create* s = arg;
  s->rc = write(s->ctx->cmd_fd, &s->req, sizeof(s->req));
  s->err = errno;
  return NULL;
}

static void* await_fault(void* arg) {
  int uffd = *(int*)arg;
  struct uffd_msg msg;
  struct pollfd p = {.fd = uffd, .events = POLLIN};
  if (poll(&p, 1, 10000) != 1) die("create_qp never touched the driver response");
  if (read(uffd, &msg, sizeof(msg)) != sizeof(msg) || msg.event != UFFD_EVENT_PAGEFAULT)
    die("userfaultfd: no page fault event");
  return NULL;
}

static int connect_with(struct rdma_cm_id* id, uint32_t qpn) {
  struct rdma_conn_param p = {.qp_num = qpn, .responder_resources = 1, .initiator_depth = 1};
  return rdma_connect(id, &p) ? errno : 0;
}

int main(int argc, char** argv) {
  if (argc != 4) die("usage: %s SRC_ADDR DST_ADDR PORT", argv[0]);
  struct sockaddr_storage src, dst;
  to_sockaddr(argv[1], 0, &src);
  to_sockaddr(argv[2], atoi(argv[3]), &dst);

  struct rdma_cm_id* id;
  if (!(ch = rdma_create_event_channel())) die("rdma_create_event_channel: %s", strerror(errno));
  if (rdma_create_id(ch, &id, NULL, RDMA_PS_TCP)) die("rdma_create_id: %s", strerror(errno));
  if (rdma_resolve_addr(id, (struct sockaddr*)&src, (struct sockaddr*)&dst, 5000))
    die("rdma_resolve_addr: %s", strerror(errno));
  await_event(RDMA_CM_EVENT_ADDR_RESOLVED);
  if (rdma_resolve_route(id, 5000)) die("rdma_resolve_route: %s", strerror(errno));
  await_event(RDMA_CM_EVENT_ROUTE_RESOLVED);
  printf("id on %s\n", ibv_get_device_name(id->verbs->device));

  struct ibv_context* ctx = id->verbs;
  struct ibv_pd* pd = ibv_alloc_pd(ctx);
  struct ibv_cq* cq = pd ? ibv_create_cq(ctx, 16, NULL, NULL, 0) : NULL;
  if (!cq) die("PD or CQ: %s", strerror(errno));
  struct ibv_qp_init_attr qa = {
      .send_cq = cq,
      .recv_cq = cq,
      .cap = {.max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1},
      .qp_type = IBV_QPT_RC};
  struct ibv_qp* live = ibv_create_qp(pd, &qa);
  if (!live) die("ibv_create_qp: %s", strerror(errno));
  const uint32_t next = live->qp_num + 1;  // what the stalled create is given (cyclic)

  // Page 0 takes the core response, page 1 (userfaultfd, never touched) the driver's.
  const long pg = sysconf(_SC_PAGESIZE);
  uint8_t* pages = mmap(NULL, 2 * pg, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (pages == MAP_FAILED) die("mmap: %s", strerror(errno));
  pages[0] = 0;
  int uffd = (int)syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK);
  if (uffd < 0) die("userfaultfd: %s", strerror(errno));
  struct uffdio_api api = {.api = UFFD_API};
  struct uffdio_register reg = {.range = {.start = (uintptr_t)(pages + pg), .len = pg},
                                .mode = UFFDIO_REGISTER_MODE_MISSING};
  if (ioctl(uffd, UFFDIO_API, &api) || ioctl(uffd, UFFDIO_REGISTER, &reg))
    die("userfaultfd setup: %s", strerror(errno));

  struct stalled_create s = {.ctx = ctx};
  const size_t core = sizeof(struct ib_uverbs_create_qp_resp);
  s.req.hdr.command = IB_USER_VERBS_CMD_CREATE_QP;
  s.req.hdr.in_words = sizeof(s.req) / 4;
  s.req.hdr.out_words = (core + 16) / 4;  // + struct uiw_uresp_create_qp
  s.req.cmd.response = (uintptr_t)(pages + pg - core);
  s.req.cmd.pd_handle = pd->handle;
  s.req.cmd.send_cq_handle = s.req.cmd.recv_cq_handle = cq->handle;
  s.req.cmd.max_send_wr = s.req.cmd.max_recv_wr = 4;
  s.req.cmd.max_send_sge = s.req.cmd.max_recv_sge = 1;
  s.req.cmd.qp_type = IBV_QPT_RC;

  pthread_t faulter, creator;
  pthread_create(&faulter, NULL, await_fault, &uffd);
  pthread_create(&creator, NULL, run_create, &s);
  pthread_join(faulter, NULL);  // create_qp now waits in its response copy
  const int early = connect_with(id, next);
  if (munmap(pages + pg, pg)) die("munmap: %s", strerror(errno));
  close(uffd);  // the fault retries, finds no page: the copy fails
  pthread_join(creator, NULL);
  if (s.rc >= 0 || s.err != EFAULT)
    die("the stalled create_qp ended %zd (%s), not EFAULT: nothing was checked", s.rc,
        strerror(s.err));
  ok("create_qp whose response copy failed returned EFAULT");
  if (early != EINVAL)
    die("rdma_connect with QPN %u while its create_qp was unfinished: %s, want EINVAL (no such "
        "QP)",
        next, early ? strerror(early) : "accepted");
  ok("the number of an unfinished QP is refused (EINVAL)");
  const int rc = connect_with(id, live->qp_num);
  if (rc) die("rdma_connect with the live QP %u: %s", live->qp_num, strerror(rc));
  ok("the same id connects with a live QP's number");

  rdma_destroy_id(id);  // ends the connect attempt before its QP goes
  if (ibv_destroy_qp(live) || ibv_destroy_cq(cq) || ibv_dealloc_pd(pd)) die("teardown");
  rdma_destroy_event_channel(ch);
  puts("PASS");
  return 0;
}
