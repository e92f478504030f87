// uiw_rtr_race_check.c: two RTR modifies of one QP at once leave nothing behind.
//
// uverbs runs modifies of one QP concurrently (it holds the QP's uobject shared), so two
// threads can both ask uiw.ko to connect one QP on RTR. As the responder, each takes a reference
// on the RTR service listener of its address before it commits; only one may commit, and the
// other must give its reference back, or the listener (a kernel socket on rtr_port) outlives
// every QP. ROUNDS times: a QP in INIT, two threads send the same RTR modify through the raw
// uverbs write() command (as any local user can; the provider would serialise its own calls),
// then the QP goes back to RESET and is destroyed. The caller checks that nothing listens on
// rtr_port afterwards.
//
// usage: uiw_rtr_race_check DEV ROUNDS
#include <pthread.h>
#include <rdma/ib_user_verbs.h>

#include "uiw_pair.h"  // die, ok, open_end, close_end

struct modify_req {
  struct ib_uverbs_cmd_hdr hdr;
  struct ib_uverbs_modify_qp cmd;
};

struct racer {
  struct ibv_context* ctx;
  struct modify_req req;
  pthread_barrier_t* start;
  int err;
};

static void* race(void* arg) {
  struct racer* r = arg;
  pthread_barrier_wait(r->start);
  r->err = write(r->ctx->cmd_fd, &r->req, sizeof(r->req)) < 0 ? errno : 0;
  return NULL;
}

// RTR as the responder: the peer is this QP's own address with a lower QPN (uiw.ko: the lower
// of (GID, QPN) and the peer's initiates, the other listens and waits).
static void rtr_request(struct modify_req* m, const struct end* e) {
  memset(m, 0, sizeof(*m));
  m->hdr.command = IB_USER_VERBS_CMD_MODIFY_QP;
  m->hdr.in_words = sizeof(*m) / 4;
  m->cmd.qp_handle = e->qp->handle;
  m->cmd.attr_mask = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                     IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
  m->cmd.qp_state = IBV_QPS_RTR;
  m->cmd.path_mtu = IBV_MTU_1024;
  m->cmd.dest_qp_num = 1;
  m->cmd.max_dest_rd_atomic = 4;
  m->cmd.min_rnr_timer = 12;
  memcpy(m->cmd.dest.dgid, e->gid.raw, sizeof(m->cmd.dest.dgid));
  m->cmd.dest.sgid_index = (uint8_t)e->gidx;
  m->cmd.dest.hop_limit = 1;
  m->cmd.dest.is_global = 1;
  m->cmd.dest.port_num = 1;
}

int main(int argc, char** argv) {
  if (argc != 3) die("usage: %s DEV ROUNDS", argv[0]);
  const int rounds = atoi(argv[2]);
  int both_ok = 0;
  for (int i = 0; i < rounds; ++i) {
    struct end e;
    open_end(&e, argv[1], 0);
    pthread_barrier_t start;
    pthread_barrier_init(&start, NULL, 2);
    struct racer r[2] = {{.ctx = e.ctx, .start = &start}, {.ctx = e.ctx, .start = &start}};
    pthread_t t[2];
    for (int k = 0; k < 2; ++k) {
      rtr_request(&r[k].req, &e);
      pthread_create(&t[k], NULL, race, &r[k]);
    }
    for (int k = 0; k < 2; ++k) pthread_join(t[k], NULL);
    pthread_barrier_destroy(&start);
    // The second is a repeated RTR of the same connection: both succeed.
    if (r[0].err || r[1].err)
      die("round %d: RTR modifies returned %s and %s", i, strerror(r[0].err), strerror(r[1].err));
    ++both_ok;
    struct ibv_qp_attr reset = {.qp_state = IBV_QPS_RESET};
    if (ibv_modify_qp(e.qp, &reset, IBV_QP_STATE)) die("round %d: RESET: %s", i, strerror(errno));
    close_end(&e);
  }
  printf("ok: %d rounds of two concurrent RTR modifies, both accepted each time\n", both_ok);
  puts("PASS");
  return 0;
}
