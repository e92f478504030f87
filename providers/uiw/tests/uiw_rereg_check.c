// uiw_rereg_check: ibv_rereg_mr on uiw between two ends (connect-on-RTR, uiw_pair.h), the peer
// writing into the region: a new translation takes the peer's next Write under the same rkey
// and the old buffer is left alone; access changes while 2000 Writes stream into the region
// lose none of them; a PD change moves the region (the PD it leaves can be freed, the one it
// joins cannot) and back; a region with a bound memory window is refused; removing remote
// write makes the next Write a remote access error (the responder's QP fatal, the buffer
// unchanged).
// Usage: uiw_rereg_check DEV_A GID_A DEV_B GID_B
#include <pthread.h>

#include "uiw_pair.h"

// MW_BIND: bound_window_refused binds a window to the region.
#define RW \
  (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_MW_BIND)
#define STREAMED 2000

struct target {
  struct ibv_mr* mr;
  uint8_t* x;  // the registered buffer, then y
  uint8_t* y;
};

// a writes LEN bytes of pattern `seed` to `to` (an address in b's region) under rkey.
static void write_to(struct end* a, uint64_t id, uint8_t* to, uint32_t rkey, uint8_t seed) {
  fill(a, seed);
  struct ibv_sge s = {.addr = (uintptr_t)a->buf, .length = LEN, .lkey = a->mr->lkey};
  struct ibv_send_wr wr = {.wr_id = id,
                           .sg_list = &s,
                           .num_sge = 1,
                           .opcode = IBV_WR_RDMA_WRITE,
                           .send_flags = IBV_SEND_SIGNALED},
                     *bad;
  wr.wr.rdma.remote_addr = (uintptr_t)to;
  wr.wr.rdma.rkey = rkey;
  if (ibv_post_send(a->qp, &wr, &bad)) die("post Write: %s", strerror(errno));
}

// A Write's data is placed before the responder sees a later Send: a Send after it, received
// by b, proves the Write landed.
static void fence_with_send(struct end* a, struct end* b, uint64_t id) {
  post_recv(b, id);
  if (post_send(a, id, IBV_WR_SEND, NULL, 0)) die("post Send: %s", strerror(errno));
  expect_wc(a, id, IBV_WC_SUCCESS, "fence Send");
  expect_wc(b, id, IBV_WC_SUCCESS, "fence receive");
}

static int holds(const uint8_t* p, uint8_t seed) {
  for (int i = 0; i < LEN; ++i)
    if (p[i] != (uint8_t)(seed + i * 7)) return 0;
  return 1;
}

static void rereg(struct target* t, int flags, struct ibv_pd* pd, uint8_t* addr, int access,
                  const char* what) {
  const uint32_t rkey = t->mr->rkey, lkey = t->mr->lkey;
  int rc = ibv_rereg_mr(t->mr, flags, pd, addr, addr ? LEN : 0, access);
  if (rc) die("%s: ibv_rereg_mr returned %d (errno %s)", what, rc, strerror(errno));
  if (t->mr->rkey != rkey || t->mr->lkey != lkey) die("%s: the keys changed", what);
}

static void translation(struct end* a, struct end* b, struct target* t) {
  write_to(a, 1, t->x, t->mr->rkey, 11);
  expect_wc(a, 1, IBV_WC_SUCCESS, "Write to x");
  fence_with_send(a, b, 2);
  if (!holds(t->x, 11)) die("the Write did not land in x");
  rereg(t, IBV_REREG_MR_CHANGE_TRANSLATION, NULL, t->y, 0, "x -> y");
  if (t->mr->addr != t->y || t->mr->length != LEN) die("ibv_mr addr/length not updated");
  write_to(a, 3, t->y, t->mr->rkey, 22);
  expect_wc(a, 3, IBV_WC_SUCCESS, "Write to y");
  fence_with_send(a, b, 4);
  if (!holds(t->y, 22)) die("the Write after the new translation did not land in y");
  if (!holds(t->x, 11)) die("x changed after it left the region");
  ok("a new translation takes the peer's next Write under the same rkey; the old buffer stays");
}

struct stream {
  struct end* a;
  struct target* t;
  int done;
  int failed;
};

// STREAMED Writes into y, 8 in flight, every completion checked.
static void* stream_writes(void* arg) {
  struct stream* s = arg;
  int posted = 0, completed = 0;
  while (completed < STREAMED) {
    while (posted < STREAMED && posted - completed < 8) {
      write_to(s->a, 100 + posted, s->t->y, s->t->mr->rkey, 33);
      ++posted;
    }
    struct ibv_wc wc = poll_one(s->a, "streamed Write");
    if (wc.status != IBV_WC_SUCCESS) {
      fprintf(stderr, "streamed Write %llu: %s\n", (unsigned long long)wc.wr_id,
              ibv_wc_status_str(wc.status));
      s->failed = 1;
      break;
    }
    ++completed;
  }
  __atomic_store_n(&s->done, 1, __ATOMIC_RELEASE);
  return NULL;
}

static void access_under_traffic(struct end* a, struct end* b, struct target* t) {
  struct stream s = {.a = a, .t = t};
  pthread_t th;
  if (pthread_create(&th, NULL, stream_writes, &s)) die("pthread_create");
  int changes = 0;
  while (!__atomic_load_n(&s.done, __ATOMIC_ACQUIRE)) {
    rereg(t, IBV_REREG_MR_CHANGE_ACCESS, NULL, NULL,
          changes & 1 ? RW : RW | IBV_ACCESS_REMOTE_ATOMIC, "access under traffic");
    ++changes;
  }
  pthread_join(th, NULL);
  if (s.failed) die("a streamed Write failed during %d access changes", changes);
  fence_with_send(a, b, 5);
  if (!holds(t->y, 33)) die("the streamed Writes' data is not in y");
  no_async(b, 100, "access changes under traffic");
  char msg[96];
  snprintf(msg, sizeof(msg), "%d Writes streamed through %d access changes, none lost", STREAMED,
           changes);
  ok(msg);
}

static void pd_change(struct end* a, struct end* b, struct target* t) {
  struct ibv_pd* other = ibv_alloc_pd(b->ctx);
  if (!other) die("ibv_alloc_pd");
  rereg(t, IBV_REREG_MR_CHANGE_PD, other, NULL, 0, "to another PD");
  if (t->mr->pd != other) die("ibv_mr pd not updated");
  if (ibv_dealloc_pd(other) != EBUSY) die("the PD holding the region was freed");
  rereg(t, IBV_REREG_MR_CHANGE_PD, b->pd, NULL, 0, "back to the QP's PD");
  if (ibv_dealloc_pd(other)) die("the PD the region left stays busy");
  write_to(a, 6, t->y, t->mr->rkey, 44);
  expect_wc(a, 6, IBV_WC_SUCCESS, "Write after the PD changes");
  fence_with_send(a, b, 7);
  if (!holds(t->y, 44)) die("the Write after the PD changes did not land");
  ok("a PD change moves the region and back");
}

static void bound_window_refused(struct end* b, struct target* t) {
  struct ibv_mw* mw = ibv_alloc_mw(b->pd, IBV_MW_TYPE_1);
  if (!mw) die("ibv_alloc_mw: %s", strerror(errno));
  struct ibv_mw_bind bind = {.wr_id = 8,
                             .send_flags = IBV_SEND_SIGNALED,
                             .bind_info = {.mr = t->mr,
                                           .addr = (uintptr_t)t->y,
                                           .length = 64,
                                           .mw_access_flags = IBV_ACCESS_REMOTE_READ}};
  if (ibv_bind_mw(b->qp, mw, &bind)) die("ibv_bind_mw: %s", strerror(errno));
  expect_wc(b, 8, IBV_WC_SUCCESS, "bind");
  if (ibv_rereg_mr(t->mr, IBV_REREG_MR_CHANGE_TRANSLATION, NULL, t->x, LEN, 0) == 0)
    die("ibv_rereg_mr of a region with a bound window succeeded");
  if (t->mr->addr != t->y) die("a refused rereg changed the ibv_mr");
  if (ibv_dealloc_mw(mw)) die("ibv_dealloc_mw: %s", strerror(errno));
  rereg(t, IBV_REREG_MR_CHANGE_ACCESS, NULL, NULL, RW, "once the window is gone");
  ok("a region with a bound window is refused, then changes once it is gone");
}

static void write_right_removed(struct end* a, struct end* b, struct target* t) {
  memcpy(a->buf, t->y, LEN);  // y as it is now
  rereg(t, IBV_REREG_MR_CHANGE_ACCESS, NULL, NULL, IBV_ACCESS_LOCAL_WRITE, "remote write off");
  write_to(a, 9, t->y, t->mr->rkey, 55);
  wait_async(b, b->qp, IBV_EVENT_QP_FATAL, "the Write without remote write");
  if (!holds(t->y, 44)) die("the refused Write changed y");
  ok("without remote write the next Write is refused and y is unchanged");
}

int main(int argc, const char** argv) {
  if (argc != 5) die("usage: %s DEV_A GID_A DEV_B GID_B", argv[0]);
  struct end a, b;
  open_end(&a, argv[1], atoi(argv[2]));
  open_end(&b, argv[3], atoi(argv[4]));
  connect_pair(&a, &b);
  struct target t = {.x = aligned_alloc(4096, LEN), .y = aligned_alloc(4096, LEN)};
  if (!t.x || !t.y) die("buffers");
  memset(t.x, 0, LEN);
  memset(t.y, 0, LEN);
  t.mr = ibv_reg_mr(b.pd, t.x, LEN, RW);
  if (!t.mr) die("ibv_reg_mr: %s", strerror(errno));
  translation(&a, &b, &t);
  access_under_traffic(&a, &b, &t);
  pd_change(&a, &b, &t);
  bound_window_refused(&b, &t);
  write_right_removed(&a, &b, &t);
  if (ibv_dereg_mr(t.mr)) die("ibv_dereg_mr: %s", strerror(errno));
  free(t.x);
  free(t.y);
  close_end(&a);
  close_end(&b);
  printf("PASS\n");
  return 0;
}
