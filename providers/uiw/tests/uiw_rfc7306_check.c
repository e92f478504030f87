// uiw_rfc7306_check: RFC 7306 through unmodified verbs between two uiw ends (connect-on-RTR,
// uiw_pair.h): atomic_cap; FetchAdd and CmpSwap with ibv_post_send and the ibv_wr_* API (the
// original values returned, the target updated); Write with Immediate and Send with Immediate
// (one receive each, IBV_WC_WITH_IMM and the value); and the errors: a target not 8-octet
// aligned, a region without IBV_ACCESS_REMOTE_ATOMIC, a region deregistered (the requester's WR
// fails, both QPs get IBV_EVENT_QP_FATAL, the target is unchanged).
// Usage: uiw_rfc7306_check DEV_A GID_A DEV_B GID_B
#include <arpa/inet.h>

#include "uiw_pair.h"

#define WORD 64  // offset of the atomic target in b's region

static uint64_t word_at(const struct end* e, size_t off) {
  uint64_t v;
  memcpy(&v, e->buf + off, sizeof(v));
  return v;
}

static void set_word(struct end* e, size_t off, uint64_t v) {
  memcpy(e->buf + off, &v, sizeof(v));
}

static int post_atomic(struct end* a, uint64_t id, enum ibv_wr_opcode op, uint32_t rkey,
                       uint64_t remote, uint64_t cmp_add, uint64_t swap) {
  struct ibv_sge s = {
      .addr = (uintptr_t)(a->buf + 8 * (id % 64)), .length = 8, .lkey = a->mr->lkey};
  struct ibv_send_wr wr = {.wr_id = id,
                           .sg_list = &s,
                           .num_sge = 1,
                           .opcode = op,
                           .send_flags = IBV_SEND_SIGNALED},
                     *bad;
  wr.wr.atomic.remote_addr = remote;
  wr.wr.atomic.rkey = rkey;
  wr.wr.atomic.compare_add = cmp_add;
  wr.wr.atomic.swap = swap;
  return ibv_post_send(a->qp, &wr, &bad);
}

static struct ibv_mr* atomic_mr(struct end* b, int access) {
  struct ibv_mr* mr = ibv_reg_mr(b->pd, b->buf, LEN, access);
  if (!mr) die("ibv_reg_mr with access 0x%x: %s", access, strerror(errno));
  return mr;
}

static void pair_up(struct end* a, struct end* b, const char** argv, uint64_t send_ops) {
  struct end_opts o = {.send_ops = send_ops};
  open_end_opts(a, argv[1], atoi(argv[2]), o);
  open_end_opts(b, argv[3], atoi(argv[4]), o);
  connect_pair(a, b);
}

static void check_atomic_cap(struct end* a) {
  struct ibv_device_attr da;
  if (ibv_query_device(a->ctx, &da)) die("ibv_query_device: %s", strerror(errno));
  if (da.atomic_cap != IBV_ATOMIC_HCA) die("atomic_cap %d, want IBV_ATOMIC_HCA", da.atomic_cap);
  ok("atomic_cap is IBV_ATOMIC_HCA");
}

static void check_atomics(struct end* a, struct end* b, struct ibv_mr* t) {
  const uint64_t remote = (uintptr_t)(b->buf + WORD);
  set_word(b, WORD, 1000);
  for (uint64_t i = 0; i < 32; ++i) {
    if (post_atomic(a, i, IBV_WR_ATOMIC_FETCH_AND_ADD, t->rkey, remote, 5, 0))
      die("post FetchAdd: %s", strerror(errno));
    struct ibv_wc wc = poll_one(a, "FetchAdd");
    if (wc.status != IBV_WC_SUCCESS || wc.opcode != IBV_WC_FETCH_ADD || wc.byte_len != 8)
      die("FetchAdd %llu: status %s opcode %d byte_len %u", (unsigned long long)i,
          ibv_wc_status_str(wc.status), wc.opcode, wc.byte_len);
    if (word_at(a, 8 * i) != 1000 + 5 * i)
      die("FetchAdd %llu returned %llu", (unsigned long long)i,
          (unsigned long long)word_at(a, 8 * i));
  }
  if (word_at(b, WORD) != 1160)
    die("after 32 FetchAdds of 5: %llu", (unsigned long long)word_at(b, WORD));
  ok("32 FetchAdds return the original values and add");

  if (post_atomic(a, 40, IBV_WR_ATOMIC_CMP_AND_SWP, t->rkey, remote, 1160, 7) ||
      post_atomic(a, 41, IBV_WR_ATOMIC_CMP_AND_SWP, t->rkey, remote, 1160, 9))
    die("post CmpSwap: %s", strerror(errno));
  for (int i = 0; i < 2; ++i) {
    struct ibv_wc wc = poll_one(a, "CmpSwap");
    if (wc.status != IBV_WC_SUCCESS || wc.opcode != IBV_WC_COMP_SWAP)
      die("CmpSwap: status %s opcode %d", ibv_wc_status_str(wc.status), wc.opcode);
  }
  if (word_at(a, 8 * 40) != 1160 || word_at(a, 8 * 41) != 7 || word_at(b, WORD) != 7)
    die("CmpSwap: returned %llu and %llu, target %llu", (unsigned long long)word_at(a, 8 * 40),
        (unsigned long long)word_at(a, 8 * 41), (unsigned long long)word_at(b, WORD));
  ok("CmpSwap swaps on a match only and returns the original value");
  guards_intact(b, "atomics");
}

static void check_immediates(struct end* a, struct end* b, struct ibv_mr* t) {
  post_recv(b, 100);
  post_recv(b, 101);
  fill(a, 3);
  struct ibv_sge s = {.addr = (uintptr_t)(a->buf + 512), .length = 300, .lkey = a->mr->lkey};
  struct ibv_send_wr wi = {.wr_id = 1,
                           .sg_list = &s,
                           .num_sge = 1,
                           .opcode = IBV_WR_RDMA_WRITE_WITH_IMM,
                           .send_flags = IBV_SEND_SIGNALED,
                           .imm_data = htonl(0x11223344)},
                     ws = wi, *bad;
  wi.wr.rdma.remote_addr = (uintptr_t)(b->buf + 1024);
  wi.wr.rdma.rkey = t->rkey;
  ws.wr_id = 2;
  ws.opcode = IBV_WR_SEND_WITH_IMM;
  ws.imm_data = htonl(0x55667788);
  wi.next = &ws;
  if (ibv_post_send(a->qp, &wi, &bad)) die("post Write/Send with Immediate: %s", strerror(errno));
  expect_wc(a, 1, IBV_WC_SUCCESS, "Write with Immediate");
  expect_wc(a, 2, IBV_WC_SUCCESS, "Send with Immediate");
  struct ibv_wc w1 = poll_one(b, "receive of the Write's immediate");
  struct ibv_wc w2 = poll_one(b, "receive of the Send");
  if (w1.wr_id != 100 || w1.status != IBV_WC_SUCCESS || w1.opcode != IBV_WC_RECV_RDMA_WITH_IMM ||
      !(w1.wc_flags & IBV_WC_WITH_IMM) || w1.imm_data != htonl(0x11223344) || w1.byte_len != 300)
    die("Write with Immediate at the peer: wr_id %llu status %s opcode %d flags 0x%x imm 0x%x len "
        "%u",
        (unsigned long long)w1.wr_id, ibv_wc_status_str(w1.status), w1.opcode, w1.wc_flags,
        ntohl(w1.imm_data), w1.byte_len);
  if (memcmp(b->buf + 1024, a->buf + 512, 300)) die("Write with Immediate: data differs");
  if (w2.wr_id != 101 || w2.status != IBV_WC_SUCCESS || w2.opcode != IBV_WC_RECV ||
      !(w2.wc_flags & IBV_WC_WITH_IMM) || w2.imm_data != htonl(0x55667788) || w2.byte_len != 300)
    die("Send with Immediate at the peer: wr_id %llu status %s opcode %d flags 0x%x imm 0x%x len "
        "%u",
        (unsigned long long)w2.wr_id, ibv_wc_status_str(w2.status), w2.opcode, w2.wc_flags,
        ntohl(w2.imm_data), w2.byte_len);
  if (memcmp(b->buf, a->buf + 512, 300)) die("Send with Immediate: data differs");
  ok("Write and Send with Immediate: one receive each, with the immediate");
  guards_intact(b, "immediates");
}

// The ibv_wr_* API: FetchAdd, Write with Immediate and Send with Immediate in one batch.
static void check_wr_api(const char** argv) {
  struct end a, b;
  pair_up(&a, &b, argv,
          IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD | IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP |
              IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM | IBV_QP_EX_WITH_SEND_WITH_IMM);
  struct ibv_mr* t =
      atomic_mr(&b, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC);
  set_word(&b, WORD, 40);
  post_recv(&b, 7);
  post_recv(&b, 8);
  struct ibv_qp_ex* x = ibv_qp_to_qp_ex(a.qp);
  ibv_wr_start(x);
  x->wr_id = 1;
  x->wr_flags = IBV_SEND_SIGNALED;
  ibv_wr_atomic_fetch_add(x, t->rkey, (uintptr_t)(b.buf + WORD), 2);
  ibv_wr_set_sge(x, a.mr->lkey, (uintptr_t)a.buf, 8);
  x->wr_id = 2;
  ibv_wr_rdma_write_imm(x, t->rkey, (uintptr_t)(b.buf + 256), htonl(77));
  ibv_wr_set_sge(x, a.mr->lkey, (uintptr_t)(a.buf + 64), 16);
  x->wr_id = 3;
  ibv_wr_send_imm(x, htonl(78));
  ibv_wr_set_sge(x, a.mr->lkey, (uintptr_t)(a.buf + 64), 16);
  if (ibv_wr_complete(x)) die("ibv_wr_complete: %s", strerror(errno));
  for (uint64_t i = 1; i <= 3; ++i) expect_wc(&a, i, IBV_WC_SUCCESS, "ibv_wr_* batch");
  struct ibv_wc r1 = poll_one(&b, "ibv_wr_rdma_write_imm at the peer");
  struct ibv_wc r2 = poll_one(&b, "ibv_wr_send_imm at the peer");
  if (word_at(&a, 0) != 40 || word_at(&b, WORD) != 42) die("ibv_wr_atomic_fetch_add: wrong values");
  if (r1.imm_data != htonl(77) || r2.imm_data != htonl(78) || r1.byte_len != 16 ||
      r2.byte_len != 16)
    die("ibv_wr_* immediates: 0x%x len %u, 0x%x len %u", ntohl(r1.imm_data), r1.byte_len,
        ntohl(r2.imm_data), r2.byte_len);
  ok("ibv_wr_atomic_fetch_add, ibv_wr_rdma_write_imm, ibv_wr_send_imm in one batch");
  ibv_dereg_mr(t);
  close_end(&a);
  close_end(&b);
}

// An atomic the responder must refuse: the requester's WR fails, both QPs are fatal, the target
// word and its neighbours are unchanged.
static void check_refused(const char** argv, const char* what, int access, size_t off, int dereg) {
  struct end a, b;
  pair_up(&a, &b, argv, 0);
  struct ibv_mr* t = atomic_mr(&b, access);
  const uint32_t rkey = t->rkey;
  for (size_t i = 0; i < 32; ++i) set_word(&b, 8 * i, 0x5A5A5A5A5A5A5A5Aull);
  if (dereg && ibv_dereg_mr(t)) die("%s: ibv_dereg_mr: %s", what, strerror(errno));
  if (post_atomic(&a, 1, IBV_WR_ATOMIC_FETCH_AND_ADD, rkey, (uintptr_t)(b.buf + off), 1, 0))
    die("%s: post: %s", what, strerror(errno));
  struct ibv_wc wc = poll_one(&a, what);
  if (wc.wr_id != 1 || wc.status == IBV_WC_SUCCESS)
    die("%s: completed with %s", what, ibv_wc_status_str(wc.status));
  wait_async(&a, a.qp, IBV_EVENT_QP_FATAL, what);
  wait_async(&b, b.qp, IBV_EVENT_QP_FATAL, what);
  for (size_t i = 0; i < 32; ++i)
    if (word_at(&b, 8 * i) != 0x5A5A5A5A5A5A5A5Aull)
      die("%s: word %zu of the target changed", what, i);
  guards_intact(&b, what);
  printf("ok: %s: refused (%s), target unchanged\n", what, ibv_wc_status_str(wc.status));
  if (!dereg) ibv_dereg_mr(t);
  close_end(&a);
  close_end(&b);
}

int main(int argc, const char** argv) {
  if (argc != 5) die("usage: %s DEV_A GID_A DEV_B GID_B", argv[0]);
  setvbuf(stdout, NULL, _IOLBF, 0);
  struct end a, b;
  pair_up(&a, &b, argv, 0);
  check_atomic_cap(&a);
  struct ibv_mr* t = atomic_mr(&b, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
                                       IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC);
  check_atomics(&a, &b, t);
  check_immediates(&a, &b, t);
  ibv_dereg_mr(t);
  close_end(&a);
  close_end(&b);
  check_wr_api(argv);
  const int all = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC;
  check_refused(argv, "target not 8-octet aligned", all, WORD + 4, 0);
  check_refused(argv, "region without IBV_ACCESS_REMOTE_ATOMIC",
                IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ, WORD, 0);
  check_refused(argv, "region deregistered", all, WORD, 1);
  puts("PASS");
  return 0;
}
