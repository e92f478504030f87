// Test helper: a connected loopback TCP socket pair made with the transport socket helpers.
#pragma once

#include <unistd.h>

#include <utility>

#include "transport/socket_util.h"

namespace uiw::transport::test {

// {client, server} file descriptors (blocking mode), or {-errno, -errno}.
inline std::pair<int, int> loopback_pair() {
  uint16_t port = 0;
  int lfd = tcp_listen("127.0.0.1", 0, &port);
  if (lfd < 0) return {lfd, lfd};
  int c = tcp_connect("127.0.0.1", port, 2000);
  int s = c < 0 ? c : tcp_accept(lfd, 2000);
  close(lfd);
  if (s < 0 && c >= 0) {
    close(c);
    c = s;
  }
  return {c, s};
}

// Owns a socket fd for the duration of a test.
struct Fd {
  int fd = -1;
  explicit Fd(int f) : fd(f) {}
  ~Fd() {
    if (fd >= 0) close(fd);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int release() {
    int f = fd;
    fd = -1;
    return f;
  }
};

}  // namespace uiw::transport::test
