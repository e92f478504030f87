// uiw_ext_check: the verbs beyond the core ones (issue 5), each with traffic over connect-on-RTR
// and both QPs in one process, data verified and guard bytes checked:
//  - ibv_fork_init() before anything else, and a fork() child that does not disturb the parent;
//  - ibv_create_cq_ex (IBV_WC_STANDARD_FLAGS) polled with start_poll/next_poll/end_poll and
//    read_*; flags uiw cannot fill are refused with EOPNOTSUPP;
//  - IBV_EVENT_SRQ_LIMIT_REACHED when an armed SRQ drops below its limit, exactly once;
//  - IBV_EVENT_CQ_ERR when completions overrun a CQ, exactly once;
//  - the ibv_wr_* post-send API (ibv_create_qp_ex with send_ops_flags): a batch of Write,
//    inline Send and two-SGE Read, wr_abort, and the errors wr_complete owes (nothing posted);
//  - a parent domain (ibv_alloc_parent_domain) standing in for its PD: MR, CQ (create_cq_ex
//    with the parent domain) and QP on it carry traffic; its PD is busy while it lives.
//
//   uiw_ext_check DEV_A GIDX_A DEV_B GIDX_B
//
// Prints one "ok: ..." line per check and "PASS" at the end; exits 1 at the first failure.
#include <errno.h>
#include <infiniband/verbs.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "uiw_pair.h"

// One completion through the extended API: start_poll (or next_poll) until it has one, within
// 20 s; ENOENT is the only "nothing yet" answer allowed.
static void cqx_expect(struct end* e, int first, uint64_t wr_id, enum ibv_wc_opcode op,
                       uint32_t byte_len, const char* what) {
  struct ibv_poll_cq_attr pa = {0};
  int rc = ENOENT;
  for (int i = 0; i < 20000 && rc == ENOENT; ++i) {
    rc = first ? ibv_start_poll(e->cqx, &pa) : ibv_next_poll(e->cqx);
    // next_poll may find nothing yet within a session; looking again is allowed.
    if (rc == ENOENT) usleep(1000);
  }
  if (rc) die("%s: %s_poll returned %d", what, first ? "start" : "next", rc);
  if (e->cqx->wr_id != wr_id || e->cqx->status != IBV_WC_SUCCESS ||
      ibv_wc_read_opcode(e->cqx) != op || ibv_wc_read_qp_num(e->cqx) != e->qp->qp_num ||
      ibv_wc_read_wc_flags(e->cqx) != 0 || ibv_wc_read_vendor_err(e->cqx) != 0)
    die("%s: wr_id %llu status %s opcode %d qp %u flags %#x, want %llu success %d qp %u 0", what,
        (unsigned long long)e->cqx->wr_id, ibv_wc_status_str(e->cqx->status),
        ibv_wc_read_opcode(e->cqx), ibv_wc_read_qp_num(e->cqx), ibv_wc_read_wc_flags(e->cqx),
        (unsigned long long)wr_id, op, e->qp->qp_num);
  // byte_len is defined for receives and Reads (verbs: "number of bytes transferred").
  if ((op == IBV_WC_RECV || op == IBV_WC_RDMA_READ) && ibv_wc_read_byte_len(e->cqx) != byte_len)
    die("%s: byte_len %u, want %u", what, ibv_wc_read_byte_len(e->cqx), byte_len);
}

// The CQ is empty now: start_poll says ENOENT (and needs no end_poll then).
static void cqx_empty(struct end* e, const char* what) {
  struct ibv_poll_cq_attr pa = {0};
  const int rc = ibv_start_poll(e->cqx, &pa);
  if (rc != ENOENT) die("%s: start_poll on an empty CQ returned %d, want ENOENT", what, rc);
}

static void send_recv(struct end* a, struct end* b, uint64_t id, uint8_t seed, const char* what) {
  post_recv(b, id);
  fill(a, seed);
  if (post_send(a, id + 1, IBV_WR_SEND, NULL, 0)) die("%s: post Send", what);
  expect_wc(a, id + 1, IBV_WC_SUCCESS, what);
  expect_wc(b, id, IBV_WC_SUCCESS, what);
  same(a, b, what);
}

// A receive of the upper half of e's buffer (the lower half is what Writes and Reads use).
static void post_recv_upper(struct end* e, uint64_t id) {
  struct ibv_sge s = {.addr = (uintptr_t)e->buf + LEN / 2, .length = LEN / 2, .lkey = e->mr->lkey};
  struct ibv_recv_wr wr = {.wr_id = id, .sg_list = &s, .num_sge = 1}, *bad;
  if (ibv_post_recv(e->qp, &wr, &bad)) die("ibv_post_recv: %s", strerror(errno));
}

static void expect_wc_len(struct end* e, uint64_t wr_id, enum ibv_wc_opcode op, uint32_t len,
                          const char* what) {
  struct ibv_wc wc = poll_one(e, what);
  if (wc.wr_id != wr_id || wc.status != IBV_WC_SUCCESS || wc.opcode != op ||
      (op == IBV_WC_RECV && wc.byte_len != len))
    die("%s: wr_id %llu status %s opcode %d byte_len %u, want %llu success %d %u", what,
        (unsigned long long)wc.wr_id, ibv_wc_status_str(wc.status), wc.opcode, wc.byte_len,
        (unsigned long long)wr_id, op, len);
}

// Nothing completes on e within ms.
static void no_wc(struct end* e, int ms, const char* what) {
  struct ibv_wc wc;
  for (int i = 0; i < ms; ++i) {
    if (ibv_poll_cq(e->cq, 1, &wc) == 1)
      die("%s: unexpected completion wr_id %llu (%s)", what, (unsigned long long)wc.wr_id,
          ibv_wc_status_str(wc.status));
    usleep(1000);
  }
}

// wr_complete of a batch that must be refused whole with `want`.
static void refused_batch(int got, int want, const char* what) {
  if (got != want)
    die("%s: wr_complete returned %d, want %d (%s)", what, got, want, strerror(want));
}

int main(int argc, char** argv) {
  if (argc != 5) {
    fprintf(stderr, "usage: %s DEV_A GIDX_A DEV_B GIDX_B\n", argv[0]);
    return 2;
  }
  setvbuf(stdout, NULL, _IOLBF, 0);
  // rdma-core: ibv_fork_init must come before any other verbs call.
  if (ibv_fork_init()) die("ibv_fork_init: %s", strerror(errno));
  ok("ibv_fork_init before any other verbs call");

  struct end a, b;
  struct end_opts cqx = {.cq_ex = 1};

  // 1. Extended CQs: a flag uiw cannot fill is refused; the standard ones poll correctly.
  open_end_opts(&a, argv[1], atoi(argv[2]), cqx);
  struct ibv_cq_init_attr_ex ts = {
      .cqe = 8, .wc_flags = IBV_WC_STANDARD_FLAGS | IBV_WC_EX_WITH_COMPLETION_TIMESTAMP};
  if (ibv_create_cq_ex(a.ctx, &ts) || errno != EOPNOTSUPP)
    die("create_cq_ex with a completion timestamp not refused with EOPNOTSUPP");
  open_end_opts(&b, argv[3], atoi(argv[4]), cqx);
  cqx_empty(&a, "new CQ");
  post_recv(&b, 1);
  fill(&a, 1);
  connect_pair(&a, &b);
  if (post_send(&a, 2, IBV_WR_SEND, NULL, 0)) die("post Send");
  cqx_expect(&a, 1, 2, IBV_WC_SEND, LEN, "Send via cq_ex");
  ibv_end_poll(a.cqx);
  cqx_expect(&b, 1, 1, IBV_WC_RECV, LEN, "Receive via cq_ex");
  ibv_end_poll(b.cqx);
  same(&a, &b, "Send via cq_ex");
  // Two completions in one poll session: start_poll then next_poll, in posting order.
  fill(&a, 2);
  if (post_send(&a, 3, IBV_WR_RDMA_WRITE, &b, b.mr->rkey)) die("post Write");
  if (post_send(&a, 4, IBV_WR_RDMA_READ, &b, b.mr->rkey)) die("post Read");
  cqx_expect(&a, 1, 3, IBV_WC_RDMA_WRITE, LEN, "Write via cq_ex");
  cqx_expect(&a, 0, 4, IBV_WC_RDMA_READ, LEN, "Read via next_poll");
  if (ibv_next_poll(a.cqx) != ENOENT) die("next_poll after the last completion: not ENOENT");
  ibv_end_poll(a.cqx);
  same(&a, &b, "Write then Read via cq_ex");
  cqx_empty(&a, "drained CQ");
  ok("create_cq_ex: timestamps refused; Send/Receive/Write/Read polled with start/next/end_poll, "
     "data verified");

  // 2. fork() with ibv_fork_init: registered memory is not inherited (MADV_DONTFORK), so the
  //    child touches only its own memory and opens the device list, then exits; meanwhile the
  //    parent writes its registered region (no copy-on-write split under the engine) and its
  //    connection and data path carry on.
  int sync[2];
  if (pipe(sync)) die("pipe");
  pid_t pid = fork();
  if (pid < 0) die("fork: %s", strerror(errno));
  if (pid == 0) {
    uint8_t* mine = malloc(LEN);
    if (!mine) _exit(3);
    memset(mine, 0xee, LEN);
    int n = 0;
    struct ibv_device** l = ibv_get_device_list(&n);
    if (!l || n < 1) _exit(4);
    ibv_free_device_list(l);
    char c;
    if (read(sync[0], &c, 1) != 1) _exit(5);  // the parent has written its region
    _exit(mine[LEN - 1] == 0xee ? 0 : 6);
  }
  fill(&a, 3);  // the parent writes registered memory while the child lives
  if (write(sync[1], "x", 1) != 1) die("pipe");
  int status;
  if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status))
    die("fork child failed (%s %d)", WIFSIGNALED(status) ? "signal" : "exit",
        WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
  send_recv(&a, &b, 10, 3, "Send after fork");
  cqx_empty(&a, "after fork");
  ok("fork(): the child runs and exits cleanly; the parent's traffic is verified after it");
  close_end(&a);
  close_end(&b);

  // 3. SRQ limit: 8 receives posted, limit 4. Four Sends leave 4 (not below the limit): no
  //    event; the fifth leaves 3: IBV_EVENT_SRQ_LIMIT_REACHED on that SRQ, and the limit
  //    disarms (query_srq reads 0, a sixth Send raises nothing).
  struct end_opts with_srq = {.srq_wr = 16};
  open_end(&a, argv[1], atoi(argv[2]));
  open_end_opts(&b, argv[3], atoi(argv[4]), with_srq);
  for (int i = 0; i < 8; ++i) post_recv(&b, 100 + i);
  struct ibv_srq_attr sa = {.srq_limit = 4};
  if (ibv_modify_srq(b.srq, &sa, IBV_SRQ_LIMIT)) die("modify_srq limit: %s", strerror(errno));
  memset(&sa, 0, sizeof(sa));
  if (ibv_query_srq(b.srq, &sa) || sa.srq_limit != 4)
    die("query_srq: limit %u, want 4", sa.srq_limit);
  connect_pair(&a, &b);
  for (int i = 0; i < 4; ++i) {
    if (post_send(&a, 200 + i, IBV_WR_SEND, NULL, 0)) die("post Send");
    expect_wc(&a, 200 + i, IBV_WC_SUCCESS, "Send to the SRQ");
    expect_wc(&b, 100 + i, IBV_WC_SUCCESS, "SRQ receive");
  }
  no_async(&b, 500, "4 receives left, limit 4");
  if (post_send(&a, 204, IBV_WR_SEND, NULL, 0)) die("post Send");
  expect_wc(&a, 204, IBV_WC_SUCCESS, "fifth Send");
  expect_wc(&b, 104, IBV_WC_SUCCESS, "fifth SRQ receive");
  wait_async(&b, b.srq, IBV_EVENT_SRQ_LIMIT_REACHED, "3 receives left, limit 4");
  if (ibv_query_srq(b.srq, &sa) || sa.srq_limit != 0)
    die("query_srq after the event: limit %u, want 0 (disarmed)", sa.srq_limit);
  if (post_send(&a, 205, IBV_WR_SEND, NULL, 0)) die("post Send");
  expect_wc(&a, 205, IBV_WC_SUCCESS, "sixth Send");
  expect_wc(&b, 105, IBV_WC_SUCCESS, "sixth SRQ receive");
  no_async(&b, 500, "after the limit event");
  no_async(&a, 0, "SRQ sender");
  guards_intact(&a, "SRQ");
  guards_intact(&b, "SRQ");
  ok("SRQ limit: no event at the limit, one IBV_EVENT_SRQ_LIMIT_REACHED below it, then disarmed");
  close_end(&a);
  close_end(&b);

  // 4. CQ overrun: a CQ of cqe entries gets cqe + 2 signaled Writes without being polled:
  //    IBV_EVENT_CQ_ERR on that CQ, once; the first cqe completions are there; the Writes
  //    themselves all landed.
  struct end_opts small = {.cqe = 4};
  open_end_opts(&a, argv[1], atoi(argv[2]), small);
  open_end(&b, argv[3], atoi(argv[4]));
  connect_pair(&a, &b);
  const int cqe = a.cq->cqe;
  if (cqe + 2 > 16) die("CQ of %d entries for a request of 4: too large for this test", cqe);
  fill(&a, 7);
  for (int i = 0; i < cqe + 2; ++i)
    if (post_send(&a, 300 + i, IBV_WR_RDMA_WRITE, &b, b.mr->rkey)) die("post Write %d", i);
  wait_async(&a, a.cq, IBV_EVENT_CQ_ERR, "CQ overrun");
  struct ibv_wc wc[32];
  const int got = ibv_poll_cq(a.cq, 32, wc);
  if (got != cqe) die("after the overrun: %d completions, want the CQ's %d", got, cqe);
  for (int i = 0; i < got; ++i)
    if (wc[i].wr_id != (uint64_t)(300 + i) || wc[i].status != IBV_WC_SUCCESS)
      die("completion %d: wr_id %llu status %s", i, (unsigned long long)wc[i].wr_id,
          ibv_wc_status_str(wc[i].status));
  no_async(&a, 500, "after CQ_ERR");
  // A Read completes after the Writes before it reached b (RDMAP §5.5 ordering): then b holds
  // what they carried, and so does a's buffer the Read filled.
  memset(a.buf, 0, LEN);
  if (post_send(&a, 400, IBV_WR_RDMA_READ, &b, b.mr->rkey)) die("post Read");
  // The completion that found the CQ full (wr_id 300 + cqe) is lost. One made after the poll
  // above freed room may still be reported: the CQ stays usable after an overrun (as siw's and
  // rxe's do), so the last Write's completion comes before the Read's or was lost with it.
  struct ibv_wc w = poll_one(&a, "Read after the overrun");
  if (w.wr_id == (uint64_t)(300 + cqe + 1) && w.status == IBV_WC_SUCCESS)
    w = poll_one(&a, "Read after the overrun");
  if (w.wr_id != 400 || w.status != IBV_WC_SUCCESS)
    die("Read after the overrun: completion wr_id %llu status %s, want 400 success",
        (unsigned long long)w.wr_id, ibv_wc_status_str(w.status));
  same(&a, &b, "Read after the overrun");
  fill(&a, 7);  // what the Writes carried
  if (memcmp(a.buf, b.buf, LEN)) die("the Writes before the overrun did not land");
  guards_intact(&a, "CQ overrun");
  guards_intact(&b, "CQ overrun");
  printf("  (CQ of %d entries, %d Writes)\n", cqe, cqe + 2);
  ok("CQ overrun: one IBV_EVENT_CQ_ERR, the CQ's entries intact, data landed");
  close_end(&a);
  close_end(&b);

  // 5. The ibv_wr_* API. A QP made without send_ops_flags has no ibv_qp_ex; operations iWARP
  //    lacks (TSO, IB's Atomic Write; RFC 7306's atomics and immediates are offered) are
  //    refused at create. One batch carries a Write of the lower half, an inline Send
  //    (the caller's buffer is scribbled over right after the call) and a Read of the lower half
  //    back into the upper half through two SGEs in swapped order; they complete in order.
  const uint64_t iwarp_ops = IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_RDMA_WRITE |
                             IBV_QP_EX_WITH_RDMA_READ | IBV_QP_EX_WITH_SEND_WITH_INV;
  struct end_opts wr_api = {.send_ops = iwarp_ops};
  open_end_opts(&a, argv[1], atoi(argv[2]), wr_api);
  open_end(&b, argv[3], atoi(argv[4]));
  if (ibv_qp_to_qp_ex(b.qp)) die("a QP made by ibv_create_qp has an ibv_qp_ex");
  struct ibv_qp_ex* x = ibv_qp_to_qp_ex(a.qp);
  if (!x) die("a QP made with send_ops_flags has no ibv_qp_ex");
  const uint64_t refused_ops[] = {IBV_QP_EX_WITH_TSO, IBV_QP_EX_WITH_ATOMIC_WRITE};
  for (size_t i = 0; i < sizeof(refused_ops) / sizeof(refused_ops[0]); ++i) {
    struct ibv_qp_init_attr_ex bad = {
        .send_cq = a.cq,
        .recv_cq = a.cq,
        .cap = {.max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1},
        .qp_type = IBV_QPT_RC,
        .comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS,
        .pd = a.pd,
        .send_ops_flags = iwarp_ops | refused_ops[i]};
    struct ibv_qp* q = ibv_create_qp_ex(a.ctx, &bad);
    if (q || errno != EOPNOTSUPP)
      die("create_qp_ex with send_ops_flags %#llx: %s, want EOPNOTSUPP",
          (unsigned long long)refused_ops[i], q ? "created" : strerror(errno));
  }
  connect_pair(&a, &b);
  srand(5);
  for (int i = 0; i < LEN; ++i) a.buf[i] = (uint8_t)rand();
  uint8_t lower[LEN / 2];
  memcpy(lower, a.buf, LEN / 2);
  memset(b.buf, 0, LEN);
  post_recv_upper(&b, 500);
  char msg[] = "ibv_wr_send with inline data";
  struct ibv_sge swapped[2] = {
      {.addr = (uintptr_t)a.buf + LEN / 2 + LEN / 4, .length = LEN / 4, .lkey = a.mr->lkey},
      {.addr = (uintptr_t)a.buf + LEN / 2, .length = LEN / 4, .lkey = a.mr->lkey}};
  ibv_wr_start(x);
  x->wr_id = 501;
  x->wr_flags = IBV_SEND_SIGNALED;
  ibv_wr_rdma_write(x, b.mr->rkey, (uintptr_t)b.buf);
  ibv_wr_set_sge(x, a.mr->lkey, (uintptr_t)a.buf, LEN / 2);
  x->wr_id = 502;
  ibv_wr_send(x);
  ibv_wr_set_inline_data(x, msg, sizeof(msg));
  memset(msg, 'x', sizeof(msg) - 1);  // copied already: this must not reach the wire
  x->wr_id = 503;
  ibv_wr_rdma_read(x, b.mr->rkey, (uintptr_t)b.buf);
  ibv_wr_set_sge_list(x, 2, swapped);
  int rc = ibv_wr_complete(x);
  if (rc) die("wr_complete of Write, inline Send, Read: %s", strerror(rc));
  expect_wc_len(&a, 501, IBV_WC_RDMA_WRITE, 0, "wr_rdma_write");
  expect_wc_len(&a, 502, IBV_WC_SEND, 0, "wr_send");
  expect_wc_len(&a, 503, IBV_WC_RDMA_READ, 0, "wr_rdma_read");
  expect_wc_len(&b, 500, IBV_WC_RECV, sizeof(msg), "inline Send received");
  if (memcmp(b.buf, lower, LEN / 2)) die("wr_rdma_write: data differs");
  if (strcmp((const char*)b.buf + LEN / 2, "ibv_wr_send with inline data"))
    die("wr_set_inline_data: received \"%.40s\"", (const char*)b.buf + LEN / 2);
  if (memcmp(a.buf + LEN / 2 + LEN / 4, lower, LEN / 4) ||
      memcmp(a.buf + LEN / 2, lower + LEN / 4, LEN / 4))
    die("wr_rdma_read with a two-SGE list: data differs or in the wrong SGE");
  guards_intact(&a, "wr_* batch");
  guards_intact(&b, "wr_* batch");
  ok("ibv_wr_*: plain QP has no qp_ex; TSO and Atomic Write refused at create; "
     "Write + inline Send + two-SGE Read in one batch completed in order, data verified");

  // wr_abort and refused batches post nothing: no completion, and b's next receive gets the
  // next good Send. Refusals: an operation iWARP lacks (IB's Atomic Write), more SGEs than uiw
  // has, a good Send with a malformed atomic, a wr_set_* before any WR, more WRs than the send
  // queue holds (all or nothing).
  post_recv_upper(&b, 510);
  ibv_wr_start(x);
  x->wr_id = 511;
  ibv_wr_send(x);
  ibv_wr_set_sge(x, a.mr->lkey, (uintptr_t)a.buf, 64);
  ibv_wr_abort(x);
  const uint64_t word = 1;
  ibv_wr_start(x);
  ibv_wr_atomic_write(x, b.mr->rkey, (uintptr_t)b.buf, &word);
  refused_batch(ibv_wr_complete(x), EOPNOTSUPP, "wr_atomic_write");
  struct ibv_sge many[17];
  for (int i = 0; i < 17; ++i)
    many[i] = (struct ibv_sge){.addr = (uintptr_t)a.buf + i, .length = 1, .lkey = a.mr->lkey};
  ibv_wr_start(x);
  ibv_wr_send(x);
  ibv_wr_set_sge_list(x, 17, many);
  refused_batch(ibv_wr_complete(x), EINVAL, "17 SGEs");
  ibv_wr_start(x);  // refused whole: the Send before the atomic whose result SGE is not 8 octets
  x->wr_id = 513;
  ibv_wr_send(x);
  ibv_wr_set_sge(x, a.mr->lkey, (uintptr_t)a.buf, 64);
  ibv_wr_atomic_fetch_add(x, b.mr->rkey, (uintptr_t)b.buf, 1);
  ibv_wr_set_sge(x, a.mr->lkey, (uintptr_t)a.buf, 4);
  refused_batch(ibv_wr_complete(x), EINVAL, "Send + atomic with a 4-octet result SGE");
  ibv_wr_start(x);
  ibv_wr_set_sge(x, a.mr->lkey, (uintptr_t)a.buf, 64);
  ibv_wr_send(x);
  refused_batch(ibv_wr_complete(x), EINVAL, "wr_set_sge before a WR");
  ibv_wr_start(x);
  for (int i = 0; i < 1000; ++i) {
    x->wr_id = 1000 + i;
    ibv_wr_rdma_write(x, b.mr->rkey, (uintptr_t)b.buf);
    ibv_wr_set_sge(x, a.mr->lkey, (uintptr_t)a.buf, 8);
  }
  refused_batch(ibv_wr_complete(x), ENOMEM, "1000 WRs on a 16-deep send queue");
  no_wc(&a, 300, "after wr_abort and refused batches");
  no_wc(&b, 0, "after wr_abort and refused batches");
  struct ibv_data_buf parts[2] = {{.addr = "two ", .length = 4}, {.addr = "parts", .length = 6}};
  ibv_wr_start(x);
  x->wr_id = 512;
  ibv_wr_send(x);
  ibv_wr_set_inline_data_list(x, 2, parts);
  if ((rc = ibv_wr_complete(x))) die("wr_complete after refusals: %s", strerror(rc));
  expect_wc_len(&a, 512, IBV_WC_SEND, 0, "Send after refusals");
  expect_wc_len(&b, 510, IBV_WC_RECV, 10, "the receive left by wr_abort");
  if (strcmp((const char*)b.buf + LEN / 2, "two parts"))
    die("wr_set_inline_data_list: received \"%.20s\"", (const char*)b.buf + LEN / 2);
  guards_intact(&a, "wr_* refusals");
  guards_intact(&b, "wr_* refusals");
  ok("ibv_wr_*: wr_abort and refused batches (EOPNOTSUPP, EINVAL x3, ENOMEM) post nothing; "
     "inline data list sent whole");
  close_end(&a);
  close_end(&b);

  // 6. Parent domain: the MR, the extended CQ and the QP of end a are made on a parent domain
  //    over a's PD; traffic both ways is verified; a's PD cannot go while the parent lives.
  open_end(&a, argv[1], atoi(argv[2]));
  open_end(&b, argv[3], atoi(argv[4]));
  ibv_destroy_qp(a.qp);
  ibv_dereg_mr(a.mr);
  ibv_destroy_cq(a.cq);
  struct ibv_parent_domain_init_attr pda = {.pd = a.pd};
  struct ibv_pd* parent = ibv_alloc_parent_domain(a.ctx, &pda);
  if (!parent) die("ibv_alloc_parent_domain: %s", strerror(errno));
  struct ibv_cq_init_attr_ex pcq = {.cqe = 16,
                                    .wc_flags = IBV_WC_STANDARD_FLAGS,
                                    .comp_mask = IBV_CQ_INIT_ATTR_MASK_PD,
                                    .parent_domain = parent};
  a.cqx = ibv_create_cq_ex(a.ctx, &pcq);
  if (!a.cqx) die("create_cq_ex on a parent domain: %s", strerror(errno));
  a.cq = ibv_cq_ex_to_cq(a.cqx);
  pcq.parent_domain = a.pd;  // a plain PD is not a parent domain
  if (ibv_create_cq_ex(a.ctx, &pcq) || errno != EINVAL)
    die("create_cq_ex with a plain PD as its parent domain not refused with EINVAL");
  struct ibv_pd* own_pd = a.pd;
  a.pd = parent;
  a.mr = ibv_reg_mr(parent, a.buf, LEN,
                    IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
  if (!a.mr) die("ibv_reg_mr on a parent domain: %s", strerror(errno));
  a.qp = make_qp(&a, 16);
  if (a.qp->pd != parent || a.mr->pd != parent) die("QP / MR do not name the parent domain");
  connect_pair(&a, &b);
  send_recv(&a, &b, 600, 11, "Send from a parent domain QP");
  send_recv(&b, &a, 610, 12, "Send to a parent domain QP");
  fill(&b, 13);
  if (post_send(&b, 620, IBV_WR_RDMA_WRITE, &a, a.mr->rkey)) die("post Write");
  expect_wc(&b, 620, IBV_WC_SUCCESS, "Write into a parent domain MR");
  if (post_send(&b, 621, IBV_WR_RDMA_READ, &a, a.mr->rkey)) die("post Read");
  expect_wc(&b, 621, IBV_WC_SUCCESS, "Read of a parent domain MR");
  same(&a, &b, "Write then Read through a parent domain MR");
  if (ibv_dealloc_pd(own_pd) != EBUSY) die("dealloc of a PD under a parent domain: not EBUSY");
  ibv_destroy_qp(a.qp);
  a.qp = NULL;
  ibv_dereg_mr(a.mr);
  a.mr = NULL;
  if (ibv_dealloc_pd(parent)) die("ibv_dealloc_pd(parent domain): %s", strerror(errno));
  a.pd = own_pd;
  ok("parent domain: MR, create_cq_ex and QP on it carry Send/Write/Read, data verified; its PD "
     "is busy meanwhile");
  close_end(&a);
  close_end(&b);
  puts("PASS");
  return 0;
}
