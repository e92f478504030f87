// uiw_event_flood.c: a local user calls uiw.ko's event methods (kernel-abi/uiw-abi.h) directly,
// N times each, and never reads an event. uverbs queues every event it is handed in an
// allocation of its own (64 bytes) until the owner reads it, so each method must fire only on
// a condition the kernel saw arise (an arm, a state change, an armed limit) and consume it.
// Checked per method: exactly the due events were accepted, the kernel's unreclaimable slab
// (SUnreclaim in /proc/meminfo, readable by any user) grew by less than SLAB_SLACK_KB, and the
// accepted events are then readable (a method that says it fired did fire). Runs as any user;
// prints "PASS" at the end.
//
// Calls: CQ_SIGNAL N unarmed and N/10 after one arm; QP_EVENT, CQ_EVENT and SRQ_EVENT N each,
// shared among their event types.
//
// usage: uiw_event_flood DEV N
#include <rdma/rdma_user_ioctl.h>
#include <sys/ioctl.h>
#include <time.h>

#include "uiw-abi.h"
#include "uiw_pair.h"  // die, ok, open_dev (non-blocking async fd)

// Other kernel activity during a burst (the VM is otherwise idle); 8 MiB is 131072 queued
// events of 64 bytes.
#define SLAB_SLACK_KB 8192

static long sunreclaim_kb(void) {
  FILE* f = fopen("/proc/meminfo", "r");
  char line[256];
  long kb = -1;
  if (!f) die("/proc/meminfo: %s", strerror(errno));
  while (fgets(line, sizeof(line), f))
    if (!strncmp(line, "SUnreclaim:", 11)) sscanf(line + 11, "%ld", &kb);
  fclose(f);
  if (kb < 0) die("no SUnreclaim in /proc/meminfo");
  return kb;
}

// One driver method with an object handle and an optional u32 event type; 0 or errno.
static int method(struct ibv_context* ctx, uint16_t object, uint16_t id, uint16_t handle_attr,
                  uint32_t handle, int type) {
  struct {
    struct ib_uverbs_ioctl_hdr hdr;
    struct ib_uverbs_attr attrs[2];
  } req = {0};
  req.hdr.object_id = object;
  req.hdr.method_id = id;
  req.hdr.num_attrs = type < 0 ? 1 : 2;
  req.hdr.length = sizeof(req.hdr) + req.hdr.num_attrs * sizeof(req.attrs[0]);
  req.attrs[0] = (struct ib_uverbs_attr){
      .attr_id = handle_attr, .flags = UVERBS_ATTR_F_MANDATORY, .data = handle};
  req.attrs[1] = (struct ib_uverbs_attr){.attr_id = UIW_ATTR_EVENT_TYPE,
                                         .len = sizeof(uint32_t),
                                         .flags = UVERBS_ATTR_F_MANDATORY,
                                         .data = (uint32_t)type};
  return ioctl(ctx->cmd_fd, RDMA_VERBS_IOCTL, &req) ? errno : 0;
}

struct flood {
  const char* name;
  uint16_t object, id, handle_attr;
  uint32_t handle;
  int type;    // -1: CQ_SIGNAL (no type attribute)
  long due;    // events the kernel may accept
  int refusal; // errno of a call that is not due
  long share;  // calls, in 1/4 of N: each method gets N calls in all
};

static long burst(struct ibv_context* ctx, const struct flood* f, long n) {
  struct timespec t0, t1;
  long accepted = 0, before = sunreclaim_kb(), grown;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  for (long i = 0; i < n; ++i) {
    int rc = method(ctx, f->object, f->id, f->handle_attr, f->handle, f->type);
    if (!rc)
      ++accepted;
    else if (rc != f->refusal)
      die("%s: call %ld returned %s, not %s", f->name, i, strerror(rc), strerror(f->refusal));
  }
  clock_gettime(CLOCK_MONOTONIC, &t1);
  grown = sunreclaim_kb() - before;
  printf("%s: %ld calls in %.1f s, %ld accepted (due %ld), unreclaimable slab %+ld KiB\n", f->name, n,
         (t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9, accepted, f->due, grown);
  if (accepted != f->due) die("%s: %ld events accepted, %ld due", f->name, accepted, f->due);
  if (grown >= SLAB_SLACK_KB) die("%s: unreclaimable slab grew by %ld KiB", f->name, grown);
  return accepted;
}

// An async event method accepts its event once, then refuses it as not due.
static int once(struct ibv_context* ctx, uint16_t object, uint16_t id, uint32_t handle, int type) {
  return !method(ctx, object, id, UIW_ATTR_EVENT_HANDLE, handle, type) &&
         method(ctx, object, id, UIW_ATTR_EVENT_HANDLE, handle, type) == EALREADY;
}

// Read every pending async event without blocking; returns how many were of `type`.
static int drain_async(struct ibv_context* ctx, enum ibv_event_type type) {
  struct ibv_async_event ev;
  int n = 0;
  while (!ibv_get_async_event(ctx, &ev)) {
    if (ev.event_type == type) ++n;
    ibv_ack_async_event(&ev);
  }
  return n;
}

int main(int argc, char** argv) {
  if (argc != 3) die("usage: uiw_event_flood DEV N");
  long n = atol(argv[2]);
  struct ibv_context* ctx = open_dev(argv[1]);
  struct ibv_comp_channel* ch = ibv_create_comp_channel(ctx);
  struct ibv_pd* pd = ibv_alloc_pd(ctx);
  if (!ch || !pd) die("channel/PD: %s", strerror(errno));
  fcntl(ch->fd, F_SETFL, fcntl(ch->fd, F_GETFL) | O_NONBLOCK);
  struct ibv_cq* cq = ibv_create_cq(ctx, 16, NULL, ch, 0);
  struct ibv_srq_init_attr sa = {.attr = {.max_wr = 16, .max_sge = 1, .srq_limit = 4}};
  struct ibv_srq* srq = ibv_create_srq(pd, &sa);
  if (!cq || !srq) die("CQ/SRQ: %s", strerror(errno));
  struct ibv_qp_init_attr qa = {.send_cq = cq, .recv_cq = cq, .srq = srq, .qp_type = IBV_QPT_RC,
                                .cap = {.max_send_wr = 4, .max_send_sge = 1}};
  struct ibv_qp* qp = ibv_create_qp(pd, &qa);
  if (!qp) die("QP: %s", strerror(errno));
  struct ibv_qp_attr init = {.qp_state = IBV_QPS_INIT, .port_num = 1,
                             .qp_access_flags = IBV_ACCESS_REMOTE_WRITE};
  if (ibv_modify_qp(qp, &init, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
    die("QP to INIT: %s", strerror(errno));

  // Completion events: one per arm. Without an arm nothing fires; then one arm, one event.
  struct flood sig = {"CQ_SIGNAL unarmed", UVERBS_OBJECT_CQ, UIW_METHOD_CQ_SIGNAL,
                      UIW_ATTR_CQ_SIGNAL_CQ_HANDLE, cq->handle, -1, 0, EAGAIN, 4};
  burst(ctx, &sig, n);
  if (ibv_req_notify_cq(cq, 0)) die("ibv_req_notify_cq: %s", strerror(errno));
  sig.name = "CQ_SIGNAL after one arm";
  sig.due = 1;
  burst(ctx, &sig, n / 10);
  struct ibv_cq* ev_cq;
  void* ev_ctx;
  if (ibv_get_cq_event(ch, &ev_cq, &ev_ctx) || ev_cq != cq) die("the armed CQ's event is missing");
  ibv_ack_cq_events(cq, 1);
  if (!ibv_get_cq_event(ch, &ev_cq, &ev_ctx)) die("a second completion event was queued");
  ok("one completion event per arm, and it reaches the channel");

  // Async events: each once per condition.
  const struct flood floods[] = {
      {"QP_EVENT QP_FATAL", UVERBS_OBJECT_QP, UIW_METHOD_QP_EVENT, UIW_ATTR_EVENT_HANDLE,
       qp->handle, IBV_EVENT_QP_FATAL, 1, EALREADY, 2},
      {"QP_EVENT QP_LAST_WQE_REACHED", UVERBS_OBJECT_QP, UIW_METHOD_QP_EVENT,
       UIW_ATTR_EVENT_HANDLE, qp->handle, IBV_EVENT_QP_LAST_WQE_REACHED, 1, EALREADY, 1},
      {"QP_EVENT SQ_DRAINED", UVERBS_OBJECT_QP, UIW_METHOD_QP_EVENT, UIW_ATTR_EVENT_HANDLE,
       qp->handle, IBV_EVENT_SQ_DRAINED, 0, EALREADY, 1},
      {"CQ_EVENT CQ_ERR", UVERBS_OBJECT_CQ, UIW_METHOD_CQ_EVENT, UIW_ATTR_EVENT_HANDLE,
       cq->handle, IBV_EVENT_CQ_ERR, 1, EALREADY, 4},
      {"SRQ_EVENT SRQ_LIMIT_REACHED", UVERBS_OBJECT_SRQ, UIW_METHOD_SRQ_EVENT,
       UIW_ATTR_EVENT_HANDLE, srq->handle, IBV_EVENT_SRQ_LIMIT_REACHED, 1, EALREADY, 2},
      {"SRQ_EVENT SRQ_ERR", UVERBS_OBJECT_SRQ, UIW_METHOD_SRQ_EVENT, UIW_ATTR_EVENT_HANDLE,
       srq->handle, IBV_EVENT_SRQ_ERR, 1, EALREADY, 2},
  };
  for (size_t i = 0; i < sizeof(floods) / sizeof(floods[0]); ++i) {
    burst(ctx, &floods[i], n / 4 * floods[i].share);
    int got = drain_async(ctx, (enum ibv_event_type)floods[i].type);
    if (got != floods[i].due) die("%s: %d events read, %ld accepted", floods[i].name, got, floods[i].due);
  }
  ok("each async event once per condition, and what was accepted was delivered");

  // The conditions come back only through the kernel: RESET allows a QP error event again,
  // a new SRQ limit one more limit event.
  struct ibv_qp_attr reset = {.qp_state = IBV_QPS_RESET};
  if (ibv_modify_qp(qp, &reset, IBV_QP_STATE) ||
      ibv_modify_qp(qp, &init, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
    die("QP RESET -> INIT: %s", strerror(errno));
  if (!once(ctx, UVERBS_OBJECT_QP, UIW_METHOD_QP_EVENT, qp->handle, IBV_EVENT_QP_FATAL))
    die("after RESET: not exactly one QP fatal event");
  struct ibv_srq_attr lim = {.srq_limit = 2};
  if (ibv_modify_srq(srq, &lim, IBV_SRQ_LIMIT)) die("ibv_modify_srq: %s", strerror(errno));
  if (!once(ctx, UVERBS_OBJECT_SRQ, UIW_METHOD_SRQ_EVENT, srq->handle, IBV_EVENT_SRQ_LIMIT_REACHED))
    die("after re-arming the SRQ limit: not exactly one limit event");
  if (drain_async(ctx, IBV_EVENT_QP_FATAL) != 1) die("the QP fatal event after RESET is missing");
  ok("RESET and a new SRQ limit allow one more event each");

  ibv_destroy_qp(qp);
  ibv_destroy_srq(srq);
  ibv_destroy_cq(cq);
  ibv_destroy_comp_channel(ch);
  ibv_dealloc_pd(pd);
  ibv_close_device(ctx);
  puts("PASS");
  return 0;
}
