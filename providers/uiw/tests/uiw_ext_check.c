// uiw_ext_check: the verbs beyond the core ones (issue 5), each with traffic over connect-on-RTR
// and both QPs in one process, data verified and guard bytes checked:
//  - ibv_fork_init() before anything else, and a fork() child that does not disturb the parent;
//  - ibv_create_cq_ex (IBV_WC_STANDARD_FLAGS) polled with start_poll/next_poll/end_poll and
//    read_*; flags uiw cannot fill are refused with EOPNOTSUPP;
//  - IBV_EVENT_SRQ_LIMIT_REACHED when an armed SRQ drops below its limit, exactly once;
//  - IBV_EVENT_CQ_ERR when completions overrun a CQ, exactly once.
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
  expect_wc(&a, 400, IBV_WC_SUCCESS, "Read after the overrun");
  same(&a, &b, "Read after the overrun");
  fill(&a, 7);  // what the Writes carried
  if (memcmp(a.buf, b.buf, LEN)) die("the Writes before the overrun did not land");
  guards_intact(&a, "CQ overrun");
  guards_intact(&b, "CQ overrun");
  printf("  (CQ of %d entries, %d Writes)\n", cqe, cqe + 2);
  ok("CQ overrun: one IBV_EVENT_CQ_ERR, the CQ's entries intact, data landed");
  close_end(&a);
  close_end(&b);
  puts("PASS");
  return 0;
}
