// uiw_hostile_server: the rdma_cm server that pyverbs-tests/hostile/ attacks with raw
// MPA/DDP/RDMAP from a plain TCP socket.
//
// For each incoming connection (one at a time, until stdin closes or -c N connections) it
// creates a QP, registers guarded regions (GUARD octets of a known pattern before and after
// each registered range), posts receives into guarded buffers, and accepts with ASCII private
// data that names the regions:  "r0=<stag hex>:<addr hex>:<len> r1=... r2=... r3=... r4=..."
//   r0 remote write + remote read      r1 remote read only
//   r2 local write only (no remote)    r3 remote write, registered in a second PD (foreign)
//   r4 remote write + remote read over the whole address space (implicit ODP: addr 0, length
//      SIZE_MAX; no guards of its own, it covers the others)
// It then prints one line per event on stdout (line-buffered) and, when the connection ends
// (DISCONNECTED, or -t seconds without any event), drains the CQ, checks every guard and
// prints "done <n>". Lines:
//   request pd_len=<n> pd=<hex> ird=<responder_resources> ord=<initiator_depth>
//   regions r0=... (as sent)     established     event <rdma_cm event> status=<n>
//   wc wr_id=<n> status=<n> (<str>) opcode=<n> len=<n> flags=<hex>
//   async <ibv event name>       qp_state=<n>
//   region <name> changed=<octets differing from the fill pattern> first=<offset or -1>
//   guards ok | guard-damage <name> <before|after> offset=<n>
// Usage: uiw_hostile_server -a ADDR -p PORT [-c CONNS] [-t IDLE_SECS] [-i IRD] [-r RECVS]
//        [-R READ_LEN]
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <rdma/rdma_cma.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

enum { GUARD = 256, NREG = 4, RECV_LEN = 1024 };
static const uint8_t kGuardByte = 0xA5;

struct guarded {
  const char* name;
  uint8_t* base;  // GUARD + len + GUARD
  size_t len;
  uint8_t fill;
  struct ibv_mr* mr;
};

static uint8_t* inner(struct guarded* g) {
  return g->base + GUARD;
}

static int guarded_alloc(struct guarded* g, const char* name, size_t len, uint8_t fill) {
  g->name = name;
  g->len = len;
  g->fill = fill;
  g->mr = NULL;
  g->base = aligned_alloc(64, (GUARD * 2 + len + 63) / 64 * 64);
  if (!g->base) return -1;
  memset(g->base, kGuardByte, GUARD * 2 + len);
  memset(inner(g), fill, len);
  return 0;
}

// Prints the region's placement summary and reports guard damage; returns 0 if guards intact.
static int guarded_check(struct guarded* g) {
  size_t changed = 0;
  long first = -1;
  int bad = 0;
  for (size_t i = 0; i < g->len; i++) {
    if (inner(g)[i] != g->fill) {
      if (first < 0) first = (long)i;
      changed++;
    }
  }
  printf("region %s changed=%zu first=%ld\n", g->name, changed, first);
  for (size_t i = 0; i < GUARD; i++) {
    if (g->base[i] != kGuardByte) {
      printf("guard-damage %s before offset=%zu\n", g->name, i);
      bad = 1;
      break;
    }
  }
  for (size_t i = 0; i < GUARD; i++) {
    if (g->base[GUARD + g->len + i] != kGuardByte) {
      printf("guard-damage %s after offset=%zu\n", g->name, i);
      bad = 1;
      break;
    }
  }
  return bad;
}

static int wait_readable(int fd, int ms) {
  struct pollfd p = {.fd = fd, .events = POLLIN};
  return poll(&p, 1, ms);
}

static void set_nonblock(int fd) {
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
}

static void print_qp_state(struct ibv_qp* qp) {
  struct ibv_qp_attr a;
  struct ibv_qp_init_attr ia;
  if (ibv_query_qp(qp, &a, IBV_QP_STATE, &ia) == 0)
    printf("qp_state=%d\n", a.qp_state);
  else
    printf("qp_state=? (%s)\n", strerror(errno));
}

static int drain_cq(struct ibv_cq* cq) {
  struct ibv_wc wc[8];
  int n, total = 0;
  while ((n = ibv_poll_cq(cq, 8, wc)) > 0) {
    for (int i = 0; i < n; i++)
      printf("wc wr_id=%llu status=%d (%s) opcode=%d len=%u flags=%x\n",
             (unsigned long long)wc[i].wr_id, wc[i].status, ibv_wc_status_str(wc[i].status),
             wc[i].opcode, wc[i].byte_len, wc[i].wc_flags);
    total += n;
  }
  return total;
}

static void drain_async(struct ibv_context* ctx) {
  struct ibv_async_event ev;
  while (wait_readable(ctx->async_fd, 0) > 0 && ibv_get_async_event(ctx, &ev) == 0) {
    printf("async %s\n", ibv_event_type_str(ev.event_type));
    ibv_ack_async_event(&ev);
  }
}

struct opts {
  const char* addr;
  const char* port;
  int conns, idle_secs, ird, recvs;
  size_t read_len;
};

// Serves one connection request; returns 0 when the connection was handled (whatever it did).
static int serve(struct rdma_event_channel* ch, struct rdma_cm_id* id, const struct opts* o) {
  struct ibv_pd* pd = ibv_alloc_pd(id->verbs);
  struct ibv_pd* pd2 = ibv_alloc_pd(id->verbs);
  struct ibv_cq* cq = ibv_create_cq(id->verbs, 64, NULL, NULL, 0);
  if (!pd || !pd2 || !cq) {
    printf("setup failed: %s\n", strerror(errno));
    return -1;
  }
  struct ibv_qp_init_attr qa = {
      .send_cq = cq,
      .recv_cq = cq,
      .cap = {.max_send_wr = 16, .max_recv_wr = 32, .max_send_sge = 1, .max_recv_sge = 1},
      .qp_type = IBV_QPT_RC,
  };
  if (rdma_create_qp(id, pd, &qa)) {
    printf("rdma_create_qp failed: %s\n", strerror(errno));
    return -1;
  }
  struct guarded reg[NREG];
  static const char* names[NREG] = {"r0", "r1", "r2", "r3"};
  const int access[NREG] = {
      IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
          IBV_ACCESS_REMOTE_ATOMIC,
      IBV_ACCESS_REMOTE_READ, IBV_ACCESS_LOCAL_WRITE,
      IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE};
  char pdata[256];
  int off = 0;
  for (int i = 0; i < NREG; i++) {
    size_t len = i == 1 ? o->read_len : 4096;
    if (guarded_alloc(&reg[i], names[i], len, (uint8_t)(0x11 * (i + 1)))) return -1;
    reg[i].mr = ibv_reg_mr(i == 3 ? pd2 : pd, inner(&reg[i]), len, access[i]);
    if (!reg[i].mr) {
      printf("ibv_reg_mr %s failed: %s\n", names[i], strerror(errno));
      return -1;
    }
    off += snprintf(pdata + off, sizeof pdata - off, "%s%s=%x:%llx:%zu", i ? " " : "", names[i],
                    reg[i].mr->rkey, (unsigned long long)(uintptr_t)inner(&reg[i]), len);
  }
  struct ibv_mr* whole = ibv_reg_mr(pd, NULL, SIZE_MAX,
                                    IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
                                        IBV_ACCESS_REMOTE_READ | IBV_ACCESS_ON_DEMAND);
  if (!whole) {
    printf("ibv_reg_mr r4 (implicit ODP) failed: %s\n", strerror(errno));
    return -1;
  }
  off += snprintf(pdata + off, sizeof pdata - off, " r4=%x:0:%zu", whole->rkey, (size_t)SIZE_MAX);
  // Receive buffers: one guarded area holding o->recvs slots of RECV_LEN.
  struct guarded rb;
  if (guarded_alloc(&rb, "recv", (size_t)o->recvs * RECV_LEN, 0x77)) return -1;
  rb.mr = ibv_reg_mr(pd, inner(&rb), rb.len, IBV_ACCESS_LOCAL_WRITE);
  if (!rb.mr) return -1;
  for (int i = 0; i < o->recvs; i++) {
    struct ibv_sge sge = {.addr = (uintptr_t)inner(&rb) + (size_t)i * RECV_LEN,
                          .length = RECV_LEN, .lkey = rb.mr->lkey};
    struct ibv_recv_wr wr = {.wr_id = (uint64_t)i, .sg_list = &sge, .num_sge = 1}, *bad;
    if (ibv_post_recv(id->qp, &wr, &bad)) {
      printf("ibv_post_recv failed: %s\n", strerror(errno));
      return -1;
    }
  }
  printf("regions %s recv=%d x %d\n", pdata, o->recvs, RECV_LEN);
  struct rdma_conn_param cp = {.private_data = pdata,
                               .private_data_len = (uint8_t)(off + 1),
                               .responder_resources = (uint8_t)o->ird,
                               .initiator_depth = 1};
  if (rdma_accept(id, &cp)) {
    printf("rdma_accept failed: %s\n", strerror(errno));
  } else {
    printf("accepted\n");
  }
  fflush(stdout);

  set_nonblock(id->verbs->async_fd);
  time_t last = time(NULL);
  int ended = 0, completed = 0, n;
  while (!ended && time(NULL) - last < o->idle_secs) {
    if ((n = drain_cq(cq)) > 0) {
      completed += n;
      last = time(NULL);
      print_qp_state(id->qp);
    }
    drain_async(id->verbs);
    fflush(stdout);
    if (wait_readable(ch->fd, 50) <= 0) continue;
    struct rdma_cm_event* ev;
    if (rdma_get_cm_event(ch, &ev)) continue;
    last = time(NULL);
    enum rdma_cm_event_type t = ev->event;
    if (t == RDMA_CM_EVENT_ESTABLISHED)
      printf("established\n");
    else
      printf("event %s status=%d\n", rdma_event_str(t), ev->status);
    rdma_ack_cm_event(ev);
    if (t == RDMA_CM_EVENT_DISCONNECTED || t == RDMA_CM_EVENT_CONNECT_ERROR ||
        t == RDMA_CM_EVENT_UNREACHABLE || t == RDMA_CM_EVENT_REJECTED)
      ended = 1;
  }
  if (!ended) printf("idle %ds\n", o->idle_secs);
  print_qp_state(id->qp);
  rdma_disconnect(id);
  // Flushed completions reach the CQ after the QP enters ERR: wait (up to 1 s) until every
  // posted receive has completed, once each, then a moment more for the async event.
  completed += drain_cq(cq);
  for (int i = 0; i < 20 && completed < o->recvs; i++) {
    usleep(50000);
    completed += drain_cq(cq);
  }
  usleep(50000);
  drain_async(id->verbs);
  print_qp_state(id->qp);
  int bad = 0;
  for (int i = 0; i < NREG; i++) bad |= guarded_check(&reg[i]);
  bad |= guarded_check(&rb);
  if (!bad) printf("guards ok\n");
  fflush(stdout);
  rdma_destroy_qp(id);
  for (int i = 0; i < NREG; i++) {
    ibv_dereg_mr(reg[i].mr);
    free(reg[i].base);
  }
  ibv_dereg_mr(rb.mr);
  ibv_dereg_mr(whole);
  free(rb.base);
  ibv_destroy_cq(cq);
  ibv_dealloc_pd(pd);
  ibv_dealloc_pd(pd2);
  rdma_destroy_id(id);
  return 0;
}

int main(int argc, char** argv) {
  struct opts o = {.addr = NULL, .port = "7300", .conns = 1000000, .idle_secs = 20, .ird = 1,
                   .recvs = 4, .read_len = 262144};
  int c;
  while ((c = getopt(argc, argv, "a:p:c:t:i:r:R:")) != -1) {
    switch (c) {
      case 'a': o.addr = optarg; break;
      case 'p': o.port = optarg; break;
      case 'c': o.conns = atoi(optarg); break;
      case 't': o.idle_secs = atoi(optarg); break;
      case 'i': o.ird = atoi(optarg); break;
      case 'r': o.recvs = atoi(optarg); break;
      case 'R': o.read_len = strtoul(optarg, NULL, 0); break;
      default:
        fprintf(stderr, "usage: %s -a ADDR [-p PORT] [-c CONNS] [-t IDLE] [-i IRD] [-r RECVS]"
                        " [-R READ_LEN]\n", argv[0]);
        return 2;
    }
  }
  if (!o.addr || o.recvs < 1 || o.recvs > 32) {
    fprintf(stderr, "-a ADDR is required; -r between 1 and 32\n");
    return 2;
  }
  setvbuf(stdout, NULL, _IOLBF, 0);
  struct rdma_event_channel* ch = rdma_create_event_channel();
  struct rdma_cm_id* listen_id;
  struct rdma_addrinfo hints = {.ai_flags = RAI_PASSIVE, .ai_port_space = RDMA_PS_TCP}, *res;
  if (!ch || rdma_create_id(ch, &listen_id, NULL, RDMA_PS_TCP) ||
      rdma_getaddrinfo(o.addr, o.port, &hints, &res) ||
      rdma_bind_addr(listen_id, res->ai_src_addr) || rdma_listen(listen_id, 4)) {
    perror("listen");
    return 1;
  }
  printf("listening %s %s dev=%s\n", o.addr, o.port,
         listen_id->verbs ? ibv_get_device_name(listen_id->verbs->device) : "?");
  // stdin EOF ends the server (the test harness closes it), checked between connections.
  set_nonblock(0);
  for (int n = 0; n < o.conns;) {
    struct pollfd p[2] = {{.fd = ch->fd, .events = POLLIN}, {.fd = 0, .events = POLLIN}};
    if (poll(p, 2, 1000) <= 0) continue;
    if (p[1].revents) {
      char b[64];
      ssize_t r = read(0, b, sizeof b);
      if (r == 0 || (r < 0 && errno != EAGAIN)) break;
    }
    if (!(p[0].revents & POLLIN)) continue;
    struct rdma_cm_event* ev;
    if (rdma_get_cm_event(ch, &ev)) continue;
    if (ev->event != RDMA_CM_EVENT_CONNECT_REQUEST) {
      printf("event %s status=%d (no connection)\n", rdma_event_str(ev->event), ev->status);
      rdma_ack_cm_event(ev);
      continue;
    }
    struct rdma_cm_id* id = ev->id;
    const struct rdma_conn_param* rp = &ev->param.conn;
    printf("request pd_len=%u pd=", rp->private_data_len);
    for (unsigned i = 0; i < rp->private_data_len; i++)
      printf("%02x", ((const uint8_t*)rp->private_data)[i]);
    printf(" ird=%u ord=%u\n", rp->responder_resources, rp->initiator_depth);
    rdma_ack_cm_event(ev);
    serve(ch, id, &o);
    printf("done %d\n", ++n);
    fflush(stdout);
  }
  rdma_destroy_id(listen_id);
  rdma_destroy_event_channel(ch);
  return 0;
}
