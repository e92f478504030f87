// uiw_fail_check: connect-on-RTR with both QPs in one process, then the failure paths whose
// outcome is defined (issue 5), each asserted exactly: the status of every completion, every
// async event on each side (and that no other one comes), the Terminate each side sent and
// received (layer/type/code, M/D/R, the echoed headers; read through uiwdv_query_terminate of
// providers/uiw/uiwdv.h), and guard bytes around every registered region.
//
// The outcomes (RFC 5040 §5.4, §7; RFC 5041 §7): a Send or Write completes when the LLP took it
// (RDMAP §5.5 rule 14), so the requester's WR completes SUCCESS even when the responder refuses
// it; the responder sends a Terminate and its QP is fatal; the Terminate makes the requester's
// QP fatal and flushes what is outstanding (a Read still waiting for its response: FLUSH_ERR);
// every later WR is flushed.
//
//   uiw_fail_check DEV_A GIDX_A DEV_B GIDX_B
//
// QPs are connected the way ibv_rc_pingpong does it: INIT, RTR with the peer's QPN and GID,
// RTS; uiw.ko connects them (kernel/uiw_rtr.c). Prints one "ok: ..." line per check and
// "PASS" at the end; exits 1 at the first failed check.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <infiniband/verbs.h>
#include <link.h>
#include <poll.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../uiwdv.h"
#include "uiw_pair.h"

// uiwdv_query_terminate from the libuiw plugin libibverbs loaded (uiwdv.h).
static uiwdv_query_terminate_fn query_terminate;

static int find_uiw(struct dl_phdr_info* info, size_t size, void* out) {
  (void)size;
  if (!strstr(info->dlpi_name, "libuiw-rdmav")) return 0;
  void* h = dlopen(info->dlpi_name, RTLD_NOW | RTLD_NOLOAD);
  if (h) *(void**)out = dlsym(h, "uiwdv_query_terminate");
  return 1;
}

static void load_uiwdv(void) {
  void* f = NULL;
  dl_iterate_phdr(find_uiw, &f);
  if (!f) die("uiwdv_query_terminate not found in the loaded libuiw");
  query_terminate = (uiwdv_query_terminate_fn)f;
}

static uint32_t be32_at(const uint8_t* p) {
  return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}
static uint64_t be64_at(const uint8_t* p) {
  return (uint64_t)be32_at(p) << 32 | be32_at(p + 4);
}

// The responder sent exactly (layer, etype, ecode) with `flags`, the requester received the same
// Terminate octet for octet, and neither sent/received one the other way.
static struct uiwdv_terminate expect_terminate(struct end* responder, struct end* requester,
                                               uint8_t layer, uint8_t etype, uint8_t ecode,
                                               uint8_t flags, uint8_t ddp_header_len,
                                               const char* what) {
  struct uiwdv_terminate sent, rcvd, none_s, none_r;
  if (query_terminate(responder->qp, &sent, &none_r) ||
      query_terminate(requester->qp, &none_s, &rcvd))
    die("%s: uiwdv_query_terminate failed", what);
  if (!sent.valid || sent.layer != layer || sent.etype != etype || sent.ecode != ecode ||
      sent.flags != flags || sent.ddp_header_len != ddp_header_len)
    die("%s: Terminate sent valid %u layer %u type %u code 0x%02x flags %#x ddp_hdr %u, want "
        "layer %u type %u code 0x%02x flags %#x ddp_hdr %u",
        what, sent.valid, sent.layer, sent.etype, sent.ecode, sent.flags, sent.ddp_header_len,
        layer, etype, ecode, flags, ddp_header_len);
  if (memcmp(&sent, &rcvd, sizeof(sent)))
    die("%s: the requester decoded a different Terminate (layer %u type %u code 0x%02x flags %#x)",
        what, rcvd.layer, rcvd.etype, rcvd.ecode, rcvd.flags);
  if (none_r.valid || none_s.valid) die("%s: a Terminate in the other direction too", what);
  printf("  (%s: Terminate layer %u type %u code 0x%02x M%d D%d R%d, DDP segment length %u)\n",
         what, sent.layer, sent.etype, sent.ecode, !!(sent.flags & UIWDV_TERM_M),
         !!(sent.flags & UIWDV_TERM_D), !!(sent.flags & UIWDV_TERM_R), sent.ddp_segment_length);
  return sent;
}

static void expect_no_terminate(struct end* e, const char* what) {
  struct uiwdv_terminate s, r;
  if (query_terminate(e->qp, &s, &r)) die("%s: uiwdv_query_terminate failed", what);
  if (s.valid || r.valid) die("%s: a Terminate was %s", what, s.valid ? "sent" : "received");
}

// a asks b for `op` naming `rkey`, which b must refuse (wrong key or deregistered MR). Exact
// outcome:
//  - Write: a's WR completes SUCCESS (it completed when TCP took it); b sends DDP / Tagged
//    Buffer / Invalid STag (RFC 5041 §7.2) with M and D: the 14-octet tagged header of the
//    first segment, naming rkey and b's buffer address.
//  - Read: a's WR completes WR_FLUSH_ERR (it waited for a response the Terminate ended); b
//    sends RDMAP / Remote Protection / Invalid STag (RFC 5040 §4.8 Figure 9) with M, D and R:
//    the 18-octet untagged header (QN 1) and the Read Request with source STag rkey.
// Each QP gets exactly one IBV_EVENT_QP_FATAL; neither region nor any guard byte changes; a's
// next WR is flushed.
static void expect_refused_access(struct end* a, struct end* b, enum ibv_wr_opcode op,
                                  uint32_t rkey, const char* what) {
  const int write = op == IBV_WR_RDMA_WRITE;
  uint8_t a_before[LEN], b_before[LEN];
  fill(a, 4);
  fill(b, 9);
  memcpy(a_before, a->buf, LEN);
  memcpy(b_before, b->buf, LEN);
  if (post_send(a, 5, op, b, rkey)) die("%s: post", what);
  expect_wc(a, 5, write ? IBV_WC_SUCCESS : IBV_WC_WR_FLUSH_ERR, what);
  wait_async(b, b->qp, IBV_EVENT_QP_FATAL, what);
  wait_async(a, a->qp, IBV_EVENT_QP_FATAL, what);
  struct uiwdv_terminate t;
  if (write) {
    t = expect_terminate(b, a, 1, 1, 0x00, UIWDV_TERM_M | UIWDV_TERM_D, 14, what);
    // Tagged DDP header (RFC 5041 §4.2): control (T set), RsvdULP, STag at 2, TO at 6.
    if (!(t.ddp_header[0] & 0x80) || be32_at(t.ddp_header + 2) != rkey ||
        be64_at(t.ddp_header + 6) != (uintptr_t)b->buf)
      die("%s: echoed header T %d STag %#x TO %#llx, want tagged STag %#x TO %p", what,
          t.ddp_header[0] >> 7, be32_at(t.ddp_header + 2),
          (unsigned long long)be64_at(t.ddp_header + 6), rkey, (void*)b->buf);
  } else {
    t = expect_terminate(b, a, 0, 1, 0x00, UIWDV_TERM_M | UIWDV_TERM_D | UIWDV_TERM_R, 18, what);
    // Untagged header QN at 6; Read Request (RFC 5040 §4.4): sink STag 0, sink TO 4, size 12,
    // source STag 16, source TO 20.
    if ((t.ddp_header[0] & 0x80) || be32_at(t.ddp_header + 6) != 1 ||
        be32_at(t.rdma_header + 12) != LEN || be32_at(t.rdma_header + 16) != rkey ||
        be64_at(t.rdma_header + 20) != (uintptr_t)b->buf)
      die("%s: echoed QN %u, Read Request size %u source STag %#x TO %#llx; want QN 1, %u, %#x, "
          "%p",
          what, be32_at(t.ddp_header + 6), be32_at(t.rdma_header + 12), be32_at(t.rdma_header + 16),
          (unsigned long long)be64_at(t.rdma_header + 20), LEN, rkey, (void*)b->buf);
  }
  if (memcmp(b_before, b->buf, LEN)) die("%s: the target region changed", what);
  if (memcmp(a_before, a->buf, LEN)) die("%s: the source region changed", what);
  guards_intact(a, what);
  guards_intact(b, what);
  if (post_send(a, 6, IBV_WR_SEND, NULL, 0)) die("%s: post after the Terminate", what);
  expect_wc(a, 6, IBV_WC_WR_FLUSH_ERR, "Send after the Terminate");
  no_async(a, 200, what);
  no_async(b, 0, what);
}

int main(int argc, char** argv) {
  if (argc != 5) {
    fprintf(stderr, "usage: %s DEV_A GIDX_A DEV_B GIDX_B\n", argv[0]);
    return 2;
  }
  setvbuf(stdout, NULL, _IOLBF, 0);
  struct end a, b;
  struct ibv_wc wc;

  // 0. Every limit ibv_query_device reports is enforced with EINVAL one past it.
  open_end(&a, argv[1], atoi(argv[2]));
  load_uiwdv();  // libibverbs has loaded libuiw now
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
  expect_no_terminate(&a, "good traffic");
  expect_no_terminate(&b, "good traffic");
  no_async(&a, 0, "good traffic");
  no_async(&b, 0, "good traffic");
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

  // 3. RDMA Write with a wrong key (RFC 5041 §7.2, RFC 5040 §7.2): exactly as remote_access().
  expect_refused_access(&a, &b, IBV_WR_RDMA_WRITE, b.mr->rkey ^ 0x5a, "Write with a wrong key");
  ok("wrong rkey Write: SUCCESS locally, DDP Tagged Invalid STag Terminate, nothing written, "
     "QP fatal both sides, later WR flushed");

  // 4. Posting to a QP in ERR: every WR completes with IBV_WC_WR_FLUSH_ERR, no new event.
  struct ibv_qp_attr err = {.qp_state = IBV_QPS_ERR};
  if (ibv_modify_qp(b.qp, &err, IBV_QP_STATE)) die("modify to ERR");
  post_recv(&b, 7);
  expect_wc(&b, 7, IBV_WC_WR_FLUSH_ERR, "Receive posted in ERR");
  if (post_send(&b, 8, IBV_WR_SEND, NULL, 0)) die("post Send in ERR");
  expect_wc(&b, 8, IBV_WC_WR_FLUSH_ERR, "Send posted in ERR");
  no_async(&b, 200, "QP in ERR");
  ok("QP in ERR: posted Send and Receive flushed");
  close_end(&a);
  close_end(&b);

  // 5. A deregistered MR (RFC 5040 §7.2 check 1: the STag is invalid once deregistered), by an
  //    RDMA Write and by an RDMA Read, each on a fresh pair.
  open_end(&a, argv[1], atoi(argv[2]));
  open_end(&b, argv[3], atoi(argv[4]));
  connect_pair(&a, &b);
  uint32_t gone = b.mr->rkey;
  if (ibv_dereg_mr(b.mr)) die("ibv_dereg_mr");
  b.mr = NULL;
  expect_refused_access(&a, &b, IBV_WR_RDMA_WRITE, gone, "Write to a deregistered MR");
  close_end(&a);
  close_end(&b);
  ok("Write to a deregistered MR: SUCCESS locally, Invalid STag Terminate, nothing written");
  open_end(&a, argv[1], atoi(argv[2]));
  open_end(&b, argv[3], atoi(argv[4]));
  connect_pair(&a, &b);
  gone = b.mr->rkey;
  if (ibv_dereg_mr(b.mr)) die("ibv_dereg_mr");
  b.mr = NULL;
  expect_refused_access(&a, &b, IBV_WR_RDMA_READ, gone, "Read from a deregistered MR");
  close_end(&a);
  close_end(&b);
  ok("Read from a deregistered MR: FLUSH_ERR locally, RDMAP Remote Protection Invalid STag "
     "Terminate with the Read Request echoed, sink untouched");

  // 6. Send with no receive posted (iWARP has no RNR retry): the target's DDP finds no
  //    buffer (RFC 5041 §7.1 untagged check 2) and answers with a DDP Untagged "Invalid MSN -
  //    no buffer available" Terminate (RFC 5041 §7.2) echoing the Send's header; the Send
  //    itself completed when TCP took it.
  open_end(&a, argv[1], atoi(argv[2]));
  open_end(&b, argv[3], atoi(argv[4]));
  connect_pair(&a, &b);
  uint8_t before[LEN];
  memcpy(before, b.buf, LEN);
  fill(&a, 5);
  if (post_send(&a, 9, IBV_WR_SEND, NULL, 0)) die("post Send without a receive");
  expect_wc(&a, 9, IBV_WC_SUCCESS, "Send without a receive");
  wait_async(&b, b.qp, IBV_EVENT_QP_FATAL, "target of a Send without a receive");
  wait_async(&a, a.qp, IBV_EVENT_QP_FATAL, "source of a Send without a receive");
  struct uiwdv_terminate t =
      expect_terminate(&b, &a, 1, 2, 0x02, UIWDV_TERM_M | UIWDV_TERM_D, 18, "no receive");
  // Untagged DDP header (RFC 5041 §4.3): control, RsvdULP, QN at 6, MSN at 10, MO at 14.
  if ((t.ddp_header[0] & 0x80) || be32_at(t.ddp_header + 6) != 0 ||
      be32_at(t.ddp_header + 10) != 1 || be32_at(t.ddp_header + 14) != 0)
    die("no receive: echoed header T %d QN %u MSN %u MO %u, want untagged QN 0 MSN 1 MO 0",
        t.ddp_header[0] >> 7, be32_at(t.ddp_header + 6), be32_at(t.ddp_header + 10),
        be32_at(t.ddp_header + 14));
  if (memcmp(before, b.buf, LEN)) die("a Send without a receive changed the target");
  guards_intact(&a, "no receive");
  guards_intact(&b, "no receive");
  if (post_send(&a, 10, IBV_WR_SEND, NULL, 0)) die("post after the Terminate");
  expect_wc(&a, 10, IBV_WC_WR_FLUSH_ERR, "Send after the Terminate");
  no_async(&a, 200, "source after the flush");
  no_async(&b, 0, "target after the flush");
  ok("Send without a posted receive: SUCCESS locally, DDP Untagged no-buffer Terminate (QN 0 "
     "MSN 1), QP fatal both sides, later WR flushed");

  // 7. Send and Receive queue overflow: the WR beyond the granted depth is refused (ENOMEM).
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

  // 8. Destroying a QP with work outstanding: moving it to ERR flushes every WR first.
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

  // 9. A process exiting with a live connection: the kernel closes its socket, with no
  //    Terminate. The peer was connected on RTR, so no rdma_cm can report the end: its QP is
  //    fatal (IBV_EVENT_QP_FATAL) and its posted receive flushed.
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
    fill(&c, 6);
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
  struct end want;  // the child's payload, for comparison
  want.buf = malloc(LEN);
  if (!want.buf) die("malloc");
  fill(&want, 6);
  if (memcmp(want.buf, a.buf, LEN)) die("the exiting child's Send: data differs");
  free(want.buf);
  expect_wc(&a, 21, IBV_WC_WR_FLUSH_ERR, "receive after the peer exited");
  wait_async(&a, a.qp, IBV_EVENT_QP_FATAL, "peer process exited");
  expect_no_terminate(&a, "peer process exited");
  guards_intact(&a, "peer process exited");
  no_async(&a, 200, "peer process exited");
  ok("peer process exited with a live connection: data verified, the posted receive flushed, "
     "QP fatal, no Terminate");
  close_end(&a);
  puts("PASS");
  return 0;
}
