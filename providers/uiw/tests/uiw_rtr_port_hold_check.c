// uiw_rtr_port_hold_check.c: a user who keeps a handed connect-on-RTR socket cannot shut the
// RTR service of an address for everyone.
//
// The responder's end of a connect-on-RTR connection is a child of the service listener, so it
// sits on the service port (rtr_port) of the address. Its owner may clear SO_REUSEADDR on it and
// keep it after its QP is gone (a dup of the fd the provider holds): in FIN_WAIT2 for as long as
// the other end does not close, in TIME_WAIT for a minute after. The service listener closes
// with its last waiting responder, and the next responder on that address binds the port again:
// TCP refuses a bind that conflicts with a socket without SO_REUSEADDR, so every responder there
// failed (EADDRINUSE) while the socket lasted.
//
// Here one pair of QPs on DEV connects on RTR and verifies a Send, both ends' sockets are
// duplicated and held, the responder's with SO_REUSEADDR off (it must read 1 before: the
// listener's SK_FORCE_REUSE, which binds past every conflict, is not handed over), and the
// responder is destroyed; then a second pair connects on the same address and verifies a Send.
// Runs as any user.
//
// usage: uiw_rtr_port_hold_check DEV RTR_PORT
#include <netinet/in.h>
#include <sys/socket.h>

#include "uiw_pair.h"  // die, ok, open_end, connect_pair, ...

static int sock_port(int fd, int peer) {
  struct sockaddr_storage ss;
  socklen_t len = sizeof(ss);
  if ((peer ? getpeername(fd, (struct sockaddr*)&ss, &len)
            : getsockname(fd, (struct sockaddr*)&ss, &len)) != 0)
    return -1;
  if (ss.ss_family == AF_INET) return ntohs(((struct sockaddr_in*)&ss)->sin_port);
  if (ss.ss_family == AF_INET6) return ntohs(((struct sockaddr_in6*)&ss)->sin6_port);
  return -1;
}

static void send_one(struct end* a, struct end* b, uint8_t seed, const char* what) {
  post_recv(b, 1);
  fill(a, seed);
  connect_pair(a, b);
  if (post_send(a, 2, IBV_WR_SEND, NULL, 0)) die("%s: post Send", what);
  expect_wc(a, 2, IBV_WC_SUCCESS, "Send");
  expect_wc(b, 1, IBV_WC_SUCCESS, "Receive");
  same(a, b, what);
}

int main(int argc, char** argv) {
  if (argc != 3) die("usage: %s DEV RTR_PORT", argv[0]);
  const int service = atoi(argv[2]);
  struct end a, b, c, d;
  open_end(&a, argv[1], 0);
  open_end(&b, argv[1], 0);
  send_one(&a, &b, 1, "first pair");
  ok("first pair connected on RTR, Send verified");

  int held[2] = {-1, -1};  // the responder's end (local port = service), the initiator's
  for (int fd = 0; fd < 1024; ++fd) {
    if (sock_port(fd, 0) == service && held[0] < 0) {
      // The service listener's SK_FORCE_REUSE (SO_REUSEADDR reads 2) stays with the kernel.
      int reuse = -1;
      socklen_t len = sizeof(reuse);
      if (getsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &reuse, &len) || reuse != 1)
        die("the handed socket's SO_REUSEADDR is %d, want 1", reuse);
      const int off = 0;
      if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &off, sizeof(off)))
        die("SO_REUSEADDR off: %s", strerror(errno));
      held[0] = dup(fd);
    } else if (sock_port(fd, 1) == service && held[1] < 0) {
      held[1] = dup(fd);
    }
  }
  if (held[0] < 0 || held[1] < 0) die("the pair's sockets were not found among the fds");
  ok("both ends' sockets held, the responder's on the service port without SO_REUSEADDR");
  // The lower (GID, QPN) initiated (one address here); only the responder goes away, so that
  // its socket's FIN is acknowledged and answered by nobody: it stays in FIN_WAIT2, which has
  // no timeout while a file holds the socket.
  struct end* responder = a.qp->qp_num > b.qp->qp_num ? &a : &b;
  struct end* initiator = responder == &a ? &b : &a;
  close_end(responder);

  open_end(&c, argv[1], 0);
  open_end(&d, argv[1], 0);
  send_one(&c, &d, 2, "second pair");
  ok("a second pair on the same address connected on RTR, Send verified");
  close_end(&c);
  close_end(&d);
  close_end(initiator);
  close(held[0]);
  close(held[1]);
  puts("PASS");
  return 0;
}
