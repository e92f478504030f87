// TCP socket helpers for host tests, tools and benchmarks.
#include "transport/socket_util.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace uiw::transport {

// Fills an IPv4 or IPv6 socket address from a numeric string.
int make_addr(const char* ip, uint16_t port, sockaddr_storage* ss, socklen_t* len) {
  std::memset(ss, 0, sizeof *ss);
  auto* v4 = reinterpret_cast<sockaddr_in*>(ss);
  auto* v6 = reinterpret_cast<sockaddr_in6*>(ss);
  if (ip && inet_pton(AF_INET, ip, &v4->sin_addr) == 1) {
    v4->sin_family = AF_INET;
    v4->sin_port = htons(port);
    *len = sizeof *v4;
    return 0;
  }
  if (ip && inet_pton(AF_INET6, ip, &v6->sin6_addr) == 1) {
    v6->sin6_family = AF_INET6;
    v6->sin6_port = htons(port);
    *len = sizeof *v6;
    return 0;
  }
  return -EINVAL;
}

// poll() one fd for `events`; 0 ready, -ETIMEDOUT, or -errno.
void abortive_close(int& fd) {
  if (fd < 0) return;
  const linger lg{1, 0};
  setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
  close(fd);
  fd = -1;
}

int wait_fd(int fd, short events, int timeout_ms) {
  pollfd p{fd, events, 0};
  for (;;) {
    int r = poll(&p, 1, timeout_ms);
    if (r > 0) return 0;
    if (r == 0) return -ETIMEDOUT;
    if (errno != EINTR) return -errno;
  }
}

namespace {

int fail_close(int fd, int err) {
  close(fd);
  return err;
}

}  // namespace

int tcp_listen(const char* ip, uint16_t port, uint16_t* bound_port) {
  sockaddr_storage ss;
  socklen_t len;
  if (int e = make_addr(ip, port, &ss, &len); e < 0) return e;
  // Non-blocking so that tcp_accept() never blocks past its timeout if a client goes away
  // between poll() and accept().
  int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return -errno;
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (bind(fd, reinterpret_cast<sockaddr*>(&ss), len) != 0) return fail_close(fd, -errno);
  if (listen(fd, 128) != 0) return fail_close(fd, -errno);
  if (bound_port) {
    sockaddr_storage got;
    socklen_t glen = sizeof got;
    if (getsockname(fd, reinterpret_cast<sockaddr*>(&got), &glen) != 0)
      return fail_close(fd, -errno);
    *bound_port =
        ntohs(got.ss_family == AF_INET ? reinterpret_cast<sockaddr_in*>(&got)->sin_port
                                       : reinterpret_cast<sockaddr_in6*>(&got)->sin6_port);
  }
  return fd;
}

int tcp_accept(int lfd, int timeout_ms) {
  for (;;) {
    if (int e = wait_fd(lfd, POLLIN, timeout_ms); e < 0) return e;
    int fd = accept4(lfd, nullptr, nullptr, SOCK_CLOEXEC);  // blocking mode, see header
    if (fd >= 0) return fd;
    if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR && errno != ECONNABORTED)
      return -errno;
  }
}

int tcp_connect(const char* ip, uint16_t port, int timeout_ms) {
  sockaddr_storage ss;
  socklen_t len;
  if (int e = make_addr(ip, port, &ss, &len); e < 0) return e;
  int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return -errno;
  if (connect(fd, reinterpret_cast<sockaddr*>(&ss), len) != 0) {
    if (errno != EINPROGRESS) return fail_close(fd, -errno);
    if (int e = wait_fd(fd, POLLOUT, timeout_ms); e < 0) return fail_close(fd, e);
    int soerr = 0;
    socklen_t slen = sizeof soerr;
    if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &slen) != 0) return fail_close(fd, -errno);
    if (soerr != 0) return fail_close(fd, -soerr);
  }
  int fl = fcntl(fd, F_GETFL);
  if (fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) != 0) return fail_close(fd, -errno);
  return fd;
}

}  // namespace uiw::transport
