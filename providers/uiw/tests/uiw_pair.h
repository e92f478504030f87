// uiw_pair.h: the helpers of uiw's verbs test programs (uiw_fail_check.c, uiw_ext_check.c):
// two "ends" (context, PD, CQ, QP, a registered region between guard bytes) in one process,
// connected the way ibv_rc_pingpong connects: INIT, RTR with the peer's QPN and GID, RTS; uiw.ko
// connects them (kernel/uiw_rtr.c). Every helper exits through die() on the first failure; all
// are static inline, so a program need not use each.
#ifndef UIW_PAIR_H
#define UIW_PAIR_H

#include <errno.h>
#include <fcntl.h>
#include <infiniband/verbs.h>
#include <poll.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define GUARD 64
#define LEN 4096
#define GUARD_BYTE 0xa5

static inline void die(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fputs("FAIL: ", stdout);
  vprintf(fmt, ap);
  putchar('\n');
  va_end(ap);
  exit(1);
}

static inline void ok(const char* what) {
  printf("ok: %s\n", what);
}

struct end {
  struct ibv_context* ctx;
  struct ibv_pd* pd;
  struct ibv_cq* cq;      // the QP's send and receive CQ
  struct ibv_cq_ex* cqx;  // the same CQ when made by ibv_create_cq_ex (end_opts.cq_ex)
  struct ibv_srq* srq;    // the QP's receive queue when end_opts.srq_wr > 0
  struct ibv_qp* qp;
  struct ibv_mr* mr;
  uint8_t* region;  // GUARD | LEN (registered) | GUARD
  uint8_t* buf;     // region + GUARD
  union ibv_gid gid;
  int gidx;
};

static inline struct ibv_context* open_dev(const char* name) {
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

static inline void guards_intact(const struct end* e, const char* what) {
  for (int i = 0; i < GUARD; ++i)
    if (e->region[i] != GUARD_BYTE || e->buf[LEN + i] != GUARD_BYTE)
      die("%s: guard byte %d around the region was overwritten", what, i);
}

// send_ops != 0: made by ibv_create_qp_ex with those send_ops_flags (the ibv_wr_* API).
static inline struct ibv_qp* make_qp_ex(struct end* e, uint32_t depth, uint64_t send_ops) {
  struct ibv_qp_init_attr_ex ia = {
      .send_cq = e->cq,
      .recv_cq = e->cq,
      .srq = e->srq,
      .cap = {.max_send_wr = depth, .max_recv_wr = depth, .max_send_sge = 2, .max_recv_sge = 1},
      .qp_type = IBV_QPT_RC,
      .comp_mask = IBV_QP_INIT_ATTR_PD,
      .pd = e->pd,
  };
  if (e->srq) ia.cap.max_recv_wr = ia.cap.max_recv_sge = 0;
  struct ibv_qp* qp;
  if (send_ops) {
    ia.comp_mask |= IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
    ia.send_ops_flags = send_ops;
    qp = ibv_create_qp_ex(e->ctx, &ia);
  } else {
    struct ibv_qp_init_attr plain = {.send_cq = ia.send_cq,
                                     .recv_cq = ia.recv_cq,
                                     .srq = ia.srq,
                                     .cap = ia.cap,
                                     .qp_type = ia.qp_type};
    qp = ibv_create_qp(e->pd, &plain);
  }
  if (!qp) die("ibv_create_qp%s: %s", send_ops ? "_ex" : "", strerror(errno));
  struct ibv_qp_attr a = {
      .qp_state = IBV_QPS_INIT,
      .port_num = 1,
      .qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ};
  if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
    die("modify to INIT: %s", strerror(errno));
  return qp;
}

static inline struct ibv_qp* make_qp(struct end* e, uint32_t depth) {
  return make_qp_ex(e, depth, 0);
}

struct end_opts {
  int cq_ex;          // make the CQ with ibv_create_cq_ex (IBV_WC_STANDARD_FLAGS)
  int cqe;            // CQ size (0: 64)
  uint32_t srq_wr;    // > 0: the QP receives from an SRQ of this depth
  uint64_t send_ops;  // != 0: ibv_create_qp_ex with these send_ops_flags (ibv_wr_* API)
};

static inline void open_end_opts(struct end* e, const char* dev, int gidx, struct end_opts o) {
  memset(e, 0, sizeof(*e));
  e->ctx = open_dev(dev);
  e->gidx = gidx;
  if (ibv_query_gid(e->ctx, 1, gidx, &e->gid)) die("%s: no GID %d", dev, gidx);
  e->pd = ibv_alloc_pd(e->ctx);
  const int cqe = o.cqe ? o.cqe : 64;
  if (o.cq_ex) {
    struct ibv_cq_init_attr_ex ca = {.cqe = (uint32_t)cqe, .wc_flags = IBV_WC_STANDARD_FLAGS};
    e->cqx = ibv_create_cq_ex(e->ctx, &ca);
    if (!e->cqx) die("%s: ibv_create_cq_ex: %s", dev, strerror(errno));
    e->cq = ibv_cq_ex_to_cq(e->cqx);
  } else {
    e->cq = ibv_create_cq(e->ctx, cqe, NULL, NULL, 0);
  }
  e->region = malloc(LEN + 2 * GUARD);
  if (!e->pd || !e->cq || !e->region) die("%s: resources", dev);
  if (o.srq_wr) {
    struct ibv_srq_init_attr si = {.attr = {.max_wr = o.srq_wr, .max_sge = 1}};
    e->srq = ibv_create_srq(e->pd, &si);
    if (!e->srq) die("%s: ibv_create_srq: %s", dev, strerror(errno));
  }
  memset(e->region, GUARD_BYTE, LEN + 2 * GUARD);
  e->buf = e->region + GUARD;
  e->mr = ibv_reg_mr(e->pd, e->buf, LEN,
                     IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
  if (!e->mr) die("%s: ibv_reg_mr: %s", dev, strerror(errno));
  e->qp = make_qp_ex(e, 16, o.send_ops);
}

static inline void open_end(struct end* e, const char* dev, int gidx) {
  struct end_opts o = {0};
  open_end_opts(e, dev, gidx, o);
}

// RTR with the peer's QPN and GID, then RTS at once: the connection comes up by itself.
static inline void to_rts(struct end* e, uint32_t dest_qpn, const union ibv_gid* dgid) {
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

static inline void connect_pair(struct end* a, struct end* b) {
  to_rts(a, b->qp->qp_num, &b->gid);
  to_rts(b, a->qp->qp_num, &a->gid);
}

static inline struct ibv_wc poll_one(struct end* e, const char* what) {
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

static inline void expect_wc(struct end* e, uint64_t wr_id, enum ibv_wc_status st,
                             const char* what) {
  struct ibv_wc wc = poll_one(e, what);
  if (wc.wr_id != wr_id || wc.status != st)
    die("%s: completion wr_id %llu status %s (%d), want wr_id %llu status %s", what,
        (unsigned long long)wc.wr_id, ibv_wc_status_str(wc.status), wc.status,
        (unsigned long long)wr_id, ibv_wc_status_str(st));
}

// The next async event of e's context must be `type` on `obj` (the QP, CQ or SRQ it is
// affiliated with; NULL: do not check).
static inline void wait_async(struct end* e, const void* obj, enum ibv_event_type type,
                              const char* what) {
  struct pollfd p = {.fd = e->ctx->async_fd, .events = POLLIN};
  struct ibv_async_event ev;
  for (int i = 0; i < 20; ++i) {
    if (poll(&p, 1, 1000) <= 0) continue;
    if (ibv_get_async_event(e->ctx, &ev)) continue;
    enum ibv_event_type got = ev.event_type;
    const void* on = ev.element.qp;  // a union of pointers: .cq and .srq alias it
    ibv_ack_async_event(&ev);
    if (got != type)
      die("%s: async event %s, want %s", what, ibv_event_type_str(got), ibv_event_type_str(type));
    if (obj && on != obj) die("%s: %s on another object", what, ibv_event_type_str(got));
    return;
  }
  die("%s: no async event %s within 20 s", what, ibv_event_type_str(type));
}

// No async event arrives on e's context within ms.
static inline void no_async(struct end* e, int ms, const char* what) {
  struct pollfd p = {.fd = e->ctx->async_fd, .events = POLLIN};
  struct ibv_async_event ev;
  if (poll(&p, 1, ms) > 0 && !ibv_get_async_event(e->ctx, &ev)) {
    enum ibv_event_type got = ev.event_type;
    ibv_ack_async_event(&ev);
    die("%s: unexpected async event %s", what, ibv_event_type_str(got));
  }
}

static inline void post_recv(struct end* e, uint64_t id) {
  struct ibv_sge s = {.addr = (uintptr_t)e->buf, .length = LEN, .lkey = e->mr->lkey};
  struct ibv_recv_wr wr = {.wr_id = id, .sg_list = &s, .num_sge = 1}, *bad;
  if (e->srq ? ibv_post_srq_recv(e->srq, &wr, &bad) : ibv_post_recv(e->qp, &wr, &bad))
    die("ibv_post_recv: %s", strerror(errno));
}

static inline int post_send(struct end* e, uint64_t id, enum ibv_wr_opcode op,
                            const struct end* peer, uint32_t rkey) {
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

static inline void fill(struct end* e, uint8_t seed) {
  for (int i = 0; i < LEN; ++i) e->buf[i] = (uint8_t)(seed + i * 7);
}

static inline void same(const struct end* a, const struct end* b, const char* what) {
  if (memcmp(a->buf, b->buf, LEN)) die("%s: data differs", what);
  guards_intact(a, what);
  guards_intact(b, what);
}

static inline void close_end(struct end* e) {
  if (e->qp) ibv_destroy_qp(e->qp);
  if (e->srq) ibv_destroy_srq(e->srq);
  if (e->mr) ibv_dereg_mr(e->mr);
  ibv_destroy_cq(e->cq);
  ibv_dealloc_pd(e->pd);
  ibv_close_device(e->ctx);
  free(e->region);
}

#endif  // UIW_PAIR_H
