// uiw_fail_check: connect-on-RTR with both QPs in one process, then the failure paths whose
// outcome is defined (issue 5), each asserted: completion status, async event, and guard
// bytes around every registered region (nothing is ever written outside it).
//
//   uiw_fail_check DEV_A GIDX_A DEV_B GIDX_B
//
// QPs are connected the way ibv_rc_pingpong does it: INIT, RTR with the peer's QPN and GID,
// RTS; uiw.ko connects them (kernel/uiw_rtr.c). Prints one "ok: ..." line per check and
// "PASS" at the end; exits 1 at the first failed check.
#include <errno.h>
#include <fcntl.h>
#include <infiniband/verbs.h>
#include <poll.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define GUARD 64
#define LEN 4096
#define GUARD_BYTE 0xa5

static void die(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fputs("FAIL: ", stdout);
  vprintf(fmt, ap);
  putchar('\n');
  va_end(ap);
  exit(1);
}

static void ok(const char* what) {
  printf("ok: %s\n", what);
}

struct end {
  struct ibv_context* ctx;
  struct ibv_pd* pd;
  struct ibv_cq* cq;
  struct ibv_qp* qp;
  struct ibv_mr* mr;
  uint8_t* region;  // GUARD | LEN (registered) | GUARD
  uint8_t* buf;     // region + GUARD
  union ibv_gid gid;
  int gidx;
};

static struct ibv_context* open_dev(const char* name) {
  int n;
  struct ibv_device** l = ibv_get_device_list(&n);
  struct ibv_context* ctx = NULL;
  for (int i = 0; l && i < n; ++i)
    if (!strcmp(ibv_get_device_name(l[i]), name)) ctx = ibv_open_device(l[i]);
  if (l) ibv_free_device_list(l);
  if (!ctx) die("cannot open %s", name);
  // Non-blocking async fd: wait_async() polls it with a timeout.
  fcntl(ctx->async_fd, F_SETFL, fcntl(ctx->async_fd, F_GETFL) | O_NONBLOCK);
  return ctx;
}

static void guards_intact(const struct end* e, const char* what) {
  for (int i = 0; i < GUARD; ++i)
    if (e->region[i] != GUARD_BYTE || e->buf[LEN + i] != GUARD_BYTE)
      die("%s: guard byte %d around the region was overwritten", what, i);
}

static struct ibv_qp* make_qp(struct end* e, uint32_t depth) {
  struct ibv_qp_init_attr ia = {
      .send_cq = e->cq,
      .recv_cq = e->cq,
      .cap = {.max_send_wr = depth, .max_recv_wr = depth, .max_send_sge = 1, .max_recv_sge = 1},
      .qp_type = IBV_QPT_RC,
  };
  struct ibv_qp* qp = ibv_create_qp(e->pd, &ia);
  if (!qp) die("ibv_create_qp: %s", strerror(errno));
  struct ibv_qp_attr a = {
      .qp_state = IBV_QPS_INIT,
      .port_num = 1,
      .qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ};
  if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
    die("modify to INIT: %s", strerror(errno));
  return qp;
}

static void open_end(struct end* e, const char* dev, int gidx) {
  memset(e, 0, sizeof(*e));
  e->ctx = open_dev(dev);
  e->gidx = gidx;
  if (ibv_query_gid(e->ctx, 1, gidx, &e->gid)) die("%s: no GID %d", dev, gidx);
  e->pd = ibv_alloc_pd(e->ctx);
  e->cq = ibv_create_cq(e->ctx, 64, NULL, NULL, 0);
  e->region = malloc(LEN + 2 * GUARD);
  if (!e->pd || !e->cq || !e->region) die("%s: resources", dev);
  memset(e->region, GUARD_BYTE, LEN + 2 * GUARD);
  e->buf = e->region + GUARD;
  e->mr = ibv_reg_mr(e->pd, e->buf, LEN,
                     IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
  if (!e->mr) die("%s: ibv_reg_mr: %s", dev, strerror(errno));
  e->qp = make_qp(e, 16);
}

// RTR with the peer's QPN and GID, then RTS at once: the connection comes up by itself.
static void to_rts(struct end* e, uint32_t dest_qpn, const union ibv_gid* dgid) {
  struct ibv_qp_attr a = {.qp_state = IBV_QPS_RTR,
                          .path_mtu = IBV_MTU_1024,
                          .dest_qp_num = dest_qpn,
                          .max_dest_rd_atomic = 4,
                          .min_rnr_timer = 12};
  a.ah_attr.is_global = 1;
  a.ah_attr.grh.dgid = *dgid;
  a.ah_attr.grh.sgid_index = e->gidx;
  a.ah_attr.grh.hop_limit = 1;
  a.ah_attr.port_num = 1;
  if (ibv_modify_qp(e->qp, &a,
                    IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                        IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
    die("modify to RTR: %s", strerror(errno));
  struct ibv_qp_attr r = {
      .qp_state = IBV_QPS_RTS, .timeout = 14, .retry_cnt = 7, .rnr_retry = 7, .max_rd_atomic = 4};
  if (ibv_modify_qp(e->qp, &r,
                    IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                        IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC))
    die("modify to RTS: %s", strerror(errno));
}

static void connect_pair(struct end* a, struct end* b) {
  to_rts(a, b->qp->qp_num, &b->gid);
  to_rts(b, a->qp->qp_num, &a->gid);
}

static struct ibv_wc poll_one(struct end* e, const char* what) {
  struct ibv_wc wc;
  for (int i = 0; i < 20000; ++i) {  // 20 s
    int n = ibv_poll_cq(e->cq, 1, &wc);
    if (n < 0) die("%s: ibv_poll_cq failed", what);
    if (n == 1) return wc;
    usleep(1000);
  }
  die("%s: no completion within 20 s", what);
  return wc;
}

static void expect_wc(struct end* e, uint64_t wr_id, enum ibv_wc_status st, const char* what) {
  struct ibv_wc wc = poll_one(e, what);
  if (wc.wr_id != wr_id || wc.status != st)
    die("%s: completion wr_id %llu status %s (%d), want wr_id %llu status %s", what,
        (unsigned long long)wc.wr_id, ibv_wc_status_str(wc.status), wc.status,
        (unsigned long long)wr_id, ibv_wc_status_str(st));
}

static void wait_async(struct end* e, enum ibv_event_type type, const char* what) {
  struct pollfd p = {.fd = e->ctx->async_fd, .events = POLLIN};
  struct ibv_async_event ev;
  for (int i = 0; i < 20; ++i) {
    if (poll(&p, 1, 1000) <= 0) continue;
    if (ibv_get_async_event(e->ctx, &ev)) continue;
    enum ibv_event_type got = ev.event_type;
    ibv_ack_async_event(&ev);
    if (got == type) return;
    printf("  (%s: async event %s while waiting)\n", what, ibv_event_type_str(got));
  }
  die("%s: no async event %s within 20 s", what, ibv_event_type_str(type));
}

static void post_recv(struct end* e, uint64_t id) {
  struct ibv_sge s = {.addr = (uintptr_t)e->buf, .length = LEN, .lkey = e->mr->lkey};
  struct ibv_recv_wr wr = {.wr_id = id, .sg_list = &s, .num_sge = 1}, *bad;
  if (ibv_post_recv(e->qp, &wr, &bad)) die("ibv_post_recv: %s", strerror(errno));
}

static int post_send(struct end* e, uint64_t id, enum ibv_wr_opcode op, const struct end* peer,
                     uint32_t rkey) {
  struct ibv_sge s = {.addr = (uintptr_t)e->buf, .length = LEN, .lkey = e->mr->lkey};
  struct ibv_send_wr wr = {.wr_id = id,
                           .sg_list = &s,
                           .num_sge = 1,
                           .opcode = op,
                           .send_flags = IBV_SEND_SIGNALED},
                     *bad;
  if (peer) {
    wr.wr.rdma.remote_addr = (uintptr_t)peer->buf;
    wr.wr.rdma.rkey = rkey;
  }
  return ibv_post_send(e->qp, &wr, &bad);
}

static void fill(struct end* e, uint8_t seed) {
  for (int i = 0; i < LEN; ++i) e->buf[i] = (uint8_t)(seed + i * 7);
}

static void same(const struct end* a, const struct end* b, const char* what) {
  if (memcmp(a->buf, b->buf, LEN)) die("%s: data differs", what);
  guards_intact(a, what);
  guards_intact(b, what);
}

static void close_end(struct end* e) {
  if (e->qp) ibv_destroy_qp(e->qp);
  ibv_dereg_mr(e->mr);
  ibv_destroy_cq(e->cq);
  ibv_dealloc_pd(e->pd);
  ibv_close_device(e->ctx);
  free(e->region);
}

int main(int argc, char** argv) {
  if (argc != 5) {
    fprintf(stderr, "usage: %s DEV_A GIDX_A DEV_B GIDX_B\n", argv[0]);
    return 2;
  }
  setvbuf(stdout, NULL, _IOLBF, 0);
  struct end a, b;

  // 0. Every limit ibv_query_device reports is enforced with EINVAL one past it.
  open_end(&a, argv[1], atoi(argv[2]));
  struct ibv_device_attr d;
  if (ibv_query_device(a.ctx, &d)) die("ibv_query_device");
  if (d.max_sge_rd < 2) die("max_sge_rd %d: a Read cannot scatter", d.max_sge_rd);
  struct ibv_qp_init_attr li = {.send_cq = a.cq,
                                .recv_cq = a.cq,
                                .qp_type = IBV_QPT_RC,
                                .cap = {.max_send_wr = 1, .max_recv_wr = 1}};
  struct ibv_qp_init_attr bad_caps[4];
  for (int i = 0; i < 4; ++i) bad_caps[i] = li;
  bad_caps[0].cap.max_send_wr = d.max_qp_wr + 1;
  bad_caps[1].cap.max_recv_wr = d.max_qp_wr + 1;
  bad_caps[2].cap.max_send_sge = d.max_sge + 1;
  bad_caps[3].cap.max_inline_data = 1u << 20;
  for (int i = 0; i < 4; ++i) {
    struct ibv_qp* q = ibv_create_qp(a.pd, &bad_caps[i]);
    if (q || errno != EINVAL)
      die("create_qp beyond limit %d: %s", i, q ? "created" : strerror(errno));
  }
  if (ibv_create_cq(a.ctx, d.max_cqe + 1, NULL, NULL, 0) || errno != EINVAL)
    die("create_cq with max_cqe + 1 not refused with EINVAL");
  struct ibv_srq_init_attr si = {.attr = {.max_wr = d.max_srq_wr + 1, .max_sge = 1}};
  if (ibv_create_srq(a.pd, &si) || errno != EINVAL)
    die("create_srq with max_srq_wr + 1 not refused with EINVAL");
  struct ibv_qp_attr ord = {.max_rd_atomic = d.max_qp_init_rd_atom + 1};
  if (!ibv_modify_qp(a.qp, &ord, IBV_QP_MAX_QP_RD_ATOMIC)) die("ORD above the limit accepted");
  struct ibv_qp_attr ird = {.max_dest_rd_atomic = d.max_qp_rd_atom + 1};
  if (!ibv_modify_qp(a.qp, &ird, IBV_QP_MAX_DEST_RD_ATOMIC)) die("IRD above the limit accepted");
  if (ibv_resize_cq(a.cq, 128) || a.cq->cqe < 128) die("ibv_resize_cq to 128: %s", strerror(errno));
  if (!ibv_resize_cq(a.cq, d.max_cqe + 1)) die("ibv_resize_cq beyond max_cqe accepted");
  printf("  (max_qp_wr %d max_sge %d max_sge_rd %d max_cqe %d max_srq_wr %d ORD %d IRD %d)\n",
         d.max_qp_wr, d.max_sge, d.max_sge_rd, d.max_cqe, d.max_srq_wr, d.max_qp_init_rd_atom,
         d.max_qp_rd_atom);
  ok("limits enforced with EINVAL; resize_cq");
  close_end(&a);

  // 1. Both QPs in one process, connected on RTR; Send, Write, Read verified byte for byte.
  open_end(&a, argv[1], atoi(argv[2]));
  open_end(&b, argv[3], atoi(argv[4]));
  post_recv(&b, 1);
  fill(&a, 1);
  connect_pair(&a, &b);
  if (post_send(&a, 2, IBV_WR_SEND, NULL, 0)) die("post Send");
  expect_wc(&a, 2, IBV_WC_SUCCESS, "Send");
  expect_wc(&b, 1, IBV_WC_SUCCESS, "Receive");
  same(&a, &b, "Send");
  fill(&a, 2);
  if (post_send(&a, 3, IBV_WR_RDMA_WRITE, &b, b.mr->rkey)) die("post Write");
  expect_wc(&a, 3, IBV_WC_SUCCESS, "RDMA Write");
  fill(&b, 3);
  if (post_send(&a, 4, IBV_WR_RDMA_READ, &b, b.mr->rkey)) die("post Read");
  expect_wc(&a, 4, IBV_WC_SUCCESS, "RDMA Read");
  same(&a, &b, "Write then Read");
  ok("connect-on-RTR in one process: Send, Write, Read verified, guards intact");

  // 2. query_qp echoes what the application set.
  struct ibv_qp_attr qa;
  struct ibv_qp_init_attr qi;
  if (ibv_query_qp(a.qp, &qa, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_DEST_QPN, &qi))
    die("ibv_query_qp");
  if (qa.qp_state != IBV_QPS_RTS || qa.timeout != 14 || qa.retry_cnt != 7 ||
      qa.dest_qp_num != b.qp->qp_num || qa.max_rd_atomic != 4 || qa.max_dest_rd_atomic != 4)
    die("query_qp: state %d timeout %u retry %u dest %u ord %u ird %u", qa.qp_state, qa.timeout,
        qa.retry_cnt, qa.dest_qp_num, qa.max_rd_atomic, qa.max_dest_rd_atomic);
  ok("query_qp: RTS, timeout/retry/dest QPN/ORD/IRD as set");

  // 3. Remote access with a wrong key: the target refuses it (RDMAP §5.4 Terminate), nothing is
  //    written, both QPs end in error with IBV_EVENT_QP_FATAL; the next WR is flushed.
  uint8_t before[LEN];
  memcpy(before, b.buf, LEN);
  fill(&a, 4);
  if (post_send(&a, 5, IBV_WR_RDMA_WRITE, &b, b.mr->rkey ^ 0x5a)) die("post bad Write");
  struct ibv_wc wc = poll_one(&a, "Write with a wrong key");
  if (wc.status != IBV_WC_SUCCESS && wc.status != IBV_WC_REM_ACCESS_ERR)
    die("Write with a wrong key completed %s", ibv_wc_status_str(wc.status));
  wait_async(&b, IBV_EVENT_QP_FATAL, "target after a wrong key");
  wait_async(&a, IBV_EVENT_QP_FATAL, "source after the Terminate");
  if (memcmp(before, b.buf, LEN)) die("a Write with a wrong key changed the target region");
  guards_intact(&b, "wrong key");
  if (post_send(&a, 6, IBV_WR_SEND, NULL, 0)) die("post after the Terminate");
  expect_wc(&a, 6, IBV_WC_WR_FLUSH_ERR, "Send after the Terminate");
  printf("  (the Write itself completed %s)\n", ibv_wc_status_str(wc.status));
  ok("wrong rkey: nothing written, QP fatal both sides, later WR flushed");

  // 4. Posting to a QP in ERR: every WR completes with IBV_WC_WR_FLUSH_ERR.
  struct ibv_qp_attr err = {.qp_state = IBV_QPS_ERR};
  if (ibv_modify_qp(b.qp, &err, IBV_QP_STATE)) die("modify to ERR");
  post_recv(&b, 7);
  expect_wc(&b, 7, IBV_WC_WR_FLUSH_ERR, "Receive posted in ERR");
  if (post_send(&b, 8, IBV_WR_SEND, NULL, 0)) die("post Send in ERR");
  expect_wc(&b, 8, IBV_WC_WR_FLUSH_ERR, "Send posted in ERR");
  ok("QP in ERR: posted Send and Receive flushed");
  close_end(&a);
  close_end(&b);

  // 5. Send with no receive posted (iWARP has no RNR retry): the target's DDP finds no
  //    buffer and answers with a Terminate (RFC 5041 §7.2); both QPs go fatal.
  open_end(&a, argv[1], atoi(argv[2]));
  open_end(&b, argv[3], atoi(argv[4]));
  connect_pair(&a, &b);
  memcpy(before, b.buf, LEN);
  if (post_send(&a, 9, IBV_WR_SEND, NULL, 0)) die("post Send without a receive");
  wc = poll_one(&a, "Send without a receive");
  wait_async(&b, IBV_EVENT_QP_FATAL, "target of a Send without a receive");
  wait_async(&a, IBV_EVENT_QP_FATAL, "source of a Send without a receive");
  if (memcmp(before, b.buf, LEN)) die("a Send without a receive changed the target");
  guards_intact(&b, "no receive");
  printf("  (the Send completed %s)\n", ibv_wc_status_str(wc.status));
  ok("Send without a posted receive: Terminate, QP fatal both sides");

  // 6. Send and Receive queue overflow: the WR beyond the granted depth is refused (ENOMEM).
  struct ibv_qp* small = make_qp(&a, 4);
  struct ibv_qp_attr got;
  ibv_query_qp(small, &got, IBV_QP_CAP, &qi);
  struct ibv_qp* keep = a.qp;
  a.qp = small;
  int rc = 0;
  uint32_t n;
  for (n = 0; n < got.cap.max_send_wr + 1 && !rc; ++n)
    rc = post_send(&a, 100 + n, IBV_WR_SEND, NULL, 0);
  if (rc != ENOMEM || n != got.cap.max_send_wr + 1)
    die("SQ overflow: post %u returned %d, want ENOMEM after %u", n, rc, got.cap.max_send_wr);
  struct ibv_sge s = {.addr = (uintptr_t)a.buf, .length = LEN, .lkey = a.mr->lkey};
  struct ibv_recv_wr rw = {.sg_list = &s, .num_sge = 1}, *bad;
  rc = 0;
  for (n = 0; n < got.cap.max_recv_wr + 1 && !rc; ++n) rc = ibv_post_recv(small, &rw, &bad);
  if (rc != ENOMEM || n != got.cap.max_recv_wr + 1)
    die("RQ overflow: post %u returned %d, want ENOMEM after %u", n, rc, got.cap.max_recv_wr);
  ok("SQ and RQ overflow refused with ENOMEM at the granted depth");

  // 7. Destroying a QP with work outstanding: moving it to ERR flushes every WR first.
  if (ibv_modify_qp(small, &err, IBV_QP_STATE)) die("modify small QP to ERR");
  unsigned flushed = 0;
  for (unsigned i = 0; i < got.cap.max_send_wr + got.cap.max_recv_wr; ++i) {
    wc = poll_one(&a, "flush before destroy");
    if (wc.status != IBV_WC_WR_FLUSH_ERR) die("flush: status %s", ibv_wc_status_str(wc.status));
    ++flushed;
  }
  if (ibv_destroy_qp(small)) die("destroy a flushed QP");
  if (ibv_poll_cq(a.cq, 1, &wc) != 0) die("a completion after the flush");
  a.qp = keep;
  printf("  (%u WRs flushed)\n", flushed);
  ok("QP with outstanding work: all WRs flushed, then destroyed");
  close_end(&a);
  close_end(&b);

  // 8. A process exiting with a live connection: the peer sees the connection end; its posted
  //    receive is flushed and the QP is fatal.
  open_end(&a, argv[1], atoi(argv[2]));
  int up[2], down[2];
  if (pipe(up) || pipe(down)) die("pipe");
  pid_t pid = fork();
  if (pid == 0) {
    struct end c;
    uint32_t qpn;
    open_end(&c, argv[3], atoi(argv[4]));
    if (write(up[1], &c.qp->qp_num, 4) != 4 || write(up[1], &c.gid, 16) != 16) _exit(3);
    if (read(down[0], &qpn, 4) != 4) _exit(3);
    to_rts(&c, qpn, &a.gid);
    post_recv(&c, 1);
    if (post_send(&c, 2, IBV_WR_SEND, NULL, 0)) _exit(3);
    poll_one(&c, "child Send");
    _exit(0);  // no cleanup: the kernel closes everything
  }
  uint32_t cqpn;
  union ibv_gid cgid;
  if (read(up[0], &cqpn, 4) != 4 || read(up[0], &cgid, 16) != 16) die("child QPN");
  post_recv(&a, 20);
  post_recv(&a, 21);
  if (write(down[1], &a.qp->qp_num, 4) != 4) die("pipe");
  to_rts(&a, cqpn, &cgid);
  expect_wc(&a, 20, IBV_WC_SUCCESS, "the exiting child's Send");
  int status;
  waitpid(pid, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status)) die("child failed (%d)", status);
  expect_wc(&a, 21, IBV_WC_WR_FLUSH_ERR, "receive after the peer exited");
  ok("peer process exited with a live connection: the posted receive is flushed");
  close_end(&a);
  puts("PASS");
  return 0;
}
