// uiw_sock_attack.c: what the owner of a connect-on-RTR QP can do with the socket uiw.ko handed
// to its process, run against uiw.ko. Two QPs in one process (uiw_pair.h) connect; then the
// socket of the first one is taken from the fd table and abused as an unprivileged owner may:
// connect(AF_UNSPEC), listen(), accept clients, while the QP is destroyed (mode "destroy") or
// the whole context closed and uiw.ko unloaded by the caller (mode "rmmod": prints READY and
// waits for the file GO_FILE). Each child that the socket accepts is made to change state (the
// client closes) after the QP, or the module, is gone: with uiw's callbacks or sk_user_data
// still on the socket, that ran freed memory or unloaded code in softirq.
//
// Also checked: the handed socket is bound to a privileged port (uiw.ko's connect-on-RTR) but
// loses it on connect(AF_UNSPEC), so its owner can neither listen on nor connect from it; and
// resetting it is a QP fatal event for its QP. Side a (the initiator, the lower GID) or b (the
// responder) is the one whose socket is taken.
//
// usage: uiw_sock_attack DEV_A GIDX_A DEV_B GIDX_B a|b destroy|rmmod [GO_FILE]
#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include "uiw_pair.h"

// The TCP socket in this process whose local address is `gid`'s IPv4 address.
static int find_socket(const union ibv_gid* gid) {
  DIR* d = opendir("/proc/self/fd");
  struct dirent* de;
  int found = -1;
  if (!d) die("opendir /proc/self/fd: %s", strerror(errno));
  while ((de = readdir(d)) && found < 0) {
    int fd = atoi(de->d_name);
    struct sockaddr_in a;
    socklen_t len = sizeof(a);
    int proto = 0;
    socklen_t plen = sizeof(proto);
    if (fd <= 2 || getsockopt(fd, SOL_SOCKET, SO_PROTOCOL, &proto, &plen) ||
        proto != IPPROTO_TCP || getsockname(fd, (struct sockaddr*)&a, &len) ||
        a.sin_family != AF_INET)
      continue;
    if (!memcmp(&a.sin_addr, gid->raw + 12, 4)) found = fd;
  }
  closedir(d);
  return found;
}

static uint16_t local_port(int fd) {
  struct sockaddr_in a;
  socklen_t len = sizeof(a);
  if (getsockname(fd, (struct sockaddr*)&a, &len)) die("getsockname: %s", strerror(errno));
  return ntohs(a.sin_port);
}

// A client of the hijacked listener, and the child the listener accepts for it.
static void connect_client(int lfd, const union ibv_gid* gid, int* client, int* child) {
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(local_port(lfd))};
  memcpy(&a.sin_addr, gid->raw + 12, 4);
  *client = socket(AF_INET, SOCK_STREAM, 0);
  if (*client < 0 || connect(*client, (struct sockaddr*)&a, sizeof(a)))
    die("client connect to the hijacked socket: %s", strerror(errno));
  // The handed socket is non-blocking, and connect() can return before the listener has
  // queued the child (the handshake's last ACK may be handled later, in ksoftirqd): wait.
  struct pollfd p = {.fd = lfd, .events = POLLIN};
  if (poll(&p, 1, 5000) != 1) die("no child on the hijacked socket within 5 s");
  *child = accept(lfd, NULL, NULL);
  if (*child < 0) die("accept on the hijacked socket: %s", strerror(errno));
  if (write(*client, "x", 1) != 1) die("client write: %s", strerror(errno));
}

int main(int argc, char** argv) {
  if (argc < 7) die("usage: %s DEV_A GIDX_A DEV_B GIDX_B a|b destroy|rmmod [GO_FILE]", argv[0]);
  const int side_b = !strcmp(argv[5], "b");
  const int rmmod = !strcmp(argv[6], "rmmod");
  if (rmmod && argc < 8) die("rmmod mode needs GO_FILE");
  setvbuf(stdout, NULL, _IOLBF, 0);
  struct end a, b;
  open_end(&a, argv[1], atoi(argv[2]));
  open_end(&b, argv[3], atoi(argv[4]));
  connect_pair(&a, &b);
  post_recv(&b, 1);
  fill(&a, 3);
  if (post_send(&a, 2, IBV_WR_SEND, NULL, 0)) die("post_send: %s", strerror(errno));
  expect_wc(&a, 2, IBV_WC_SUCCESS, "Send");
  expect_wc(&b, 1, IBV_WC_SUCCESS, "Receive");
  same(&a, &b, "Send");
  ok("QPs connected on RTR, one Send verified");

  // The victim end's socket: the initiator's is bound to a privileged source port, the
  // responder's was accepted on the privileged service port.
  struct end* v = side_b ? &b : &a;
  const int fd = find_socket(&v->gid);
  if (fd < 0) die("no TCP socket of %s's address in this process", argv[side_b ? 3 : 1]);
  const uint16_t port = local_port(fd);
  printf("# handed socket of %s: fd %d, local port %u\n", side_b ? "B" : "A", fd, port);
  if (port >= 1024) die("the handed socket is on unprivileged port %u", port);

  // Our own fd to the socket: the provider closes its own when the QP goes.
  const int lfd = dup(fd);
  if (lfd < 0) die("dup: %s", strerror(errno));
  struct sockaddr unspec = {.sa_family = AF_UNSPEC};
  if (connect(lfd, &unspec, sizeof(unspec))) die("connect(AF_UNSPEC): %s", strerror(errno));
  wait_async(v, v->qp, IBV_EVENT_QP_FATAL, "the owner reset its QP's socket");
  // getsockname() still shows the old port after a disconnect; listen() binds again if the
  // socket let go of it, and keeps it otherwise.
  if (listen(lfd, 8)) die("listen on the handed socket: %s", strerror(errno));
  if (local_port(lfd) < 1024)
    die("the hijacked listener kept privileged port %u (was %u)", local_port(lfd), port);
  printf("# listening on port %u (was %u)\n", local_port(lfd), port);
  ok("connect(AF_UNSPEC) (QP fatal) and listen() on the handed socket; its privileged port is gone");

  int client1, child1, client2, child2;
  connect_client(lfd, &v->gid, &client1, &child1);

  if (rmmod) {
    close_end(&a);
    close_end(&b);
    ok("contexts closed with the hijacked listener and a child alive");
    puts("READY");
    struct stat st;
    for (int i = 0; stat(argv[7], &st); ++i) {
      if (i > 3000) die("no %s within 300 s", argv[7]);
      usleep(100000);
    }
  } else {
    if (ibv_destroy_qp(v->qp)) die("ibv_destroy_qp: %s", strerror(errno));
    v->qp = NULL;
    no_async(v, 200, "after destroy");
    ok("QP destroyed with the hijacked listener and a child alive");
  }

  // Destroying the QP shut the socket down (uiw.ko ends the QP's connection, whatever the
  // owner made of it): listen again, for children born after the QP (or uiw.ko) went.
  if (listen(lfd, 8)) die("listen again: %s", strerror(errno));
  if (local_port(lfd) < 1024) die("the listener got privileged port %u", local_port(lfd));
  // State changes of children made before and after the QP (or uiw.ko) went.
  connect_client(lfd, &v->gid, &client2, &child2);
  close(client1);
  close(client2);
  usleep(200000);
  char c;
  if (read(child1, &c, 1) != 1 || read(child2, &c, 1) != 1) die("children lost their byte");
  close(child1);
  close(child2);
  close(lfd);
  usleep(500000);
  ok("children accepted before and after, closed by their clients and by us");
  if (!rmmod) {
    close_end(&a);
    close_end(&b);
  }
  puts("PASS");
  return 0;
}
