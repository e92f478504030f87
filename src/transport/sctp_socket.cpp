// One-to-one SCTP sockets for DDP (RFC 5043) on the host: tests, tools and benchmarks. In
// production uiw.ko creates the association (kernel/uiw_sctp.c) and hands its socket over.
#include <arpa/inet.h>
#include <fcntl.h>
#include <linux/sctp.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "transport/sctp_stream.h"
#include "transport/socket_util.h"
#include "wire/sctp.h"

namespace uiw::transport {

namespace {

constexpr uint16_t kStreams = 1;  // uiw uses one DDP stream per association (RFC 5043 §8)

// RFC 5043 §5.1 / §11.1: the DDP Adaptation Indication in our INIT or INIT-ACK; §8: equal
// inbound and outbound stream counts; the peer's indication is reported as a notification.
int ddp_socket(int family) {
  const int fd = socket(family, SOCK_STREAM | SOCK_CLOEXEC, IPPROTO_SCTP);
  if (fd < 0) return -errno;
  sctp_setadaptation ad{wire::kDdpAdaptationIndication};
  sctp_initmsg im{};
  im.sinit_num_ostreams = kStreams;
  im.sinit_max_instreams = kStreams;
  sctp_event ev{};
  ev.se_type = SCTP_ADAPTATION_INDICATION;
  ev.se_on = 1;
  if (setsockopt(fd, IPPROTO_SCTP, SCTP_ADAPTATION_LAYER, &ad, sizeof ad) != 0 ||
      setsockopt(fd, IPPROTO_SCTP, SCTP_INITMSG, &im, sizeof im) != 0 ||
      setsockopt(fd, IPPROTO_SCTP, SCTP_EVENT, &ev, sizeof ev) != 0) {
    const int e = -errno;
    close(fd);
    return e;
  }
  return fd;
}

}  // namespace

int sctp_listen(const char* ip, uint16_t port, uint16_t* bound_port) {
  sockaddr_storage ss;
  socklen_t len;
  if (int e = make_addr(ip, port, &ss, &len); e < 0) return e;
  const int fd = ddp_socket(ss.ss_family);
  if (fd < 0) return fd;
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (bind(fd, reinterpret_cast<sockaddr*>(&ss), len) != 0 || listen(fd, 16) != 0) {
    const int e = -errno;
    close(fd);
    return e;
  }
  if (bound_port) {
    sockaddr_storage b;
    socklen_t bl = sizeof b;
    getsockname(fd, reinterpret_cast<sockaddr*>(&b), &bl);
    *bound_port = ntohs(b.ss_family == AF_INET ? reinterpret_cast<sockaddr_in*>(&b)->sin_port
                                               : reinterpret_cast<sockaddr_in6*>(&b)->sin6_port);
  }
  return fd;
}

int sctp_accept(int lfd, int timeout_ms) {
  if (int e = wait_fd(lfd, POLLIN, timeout_ms); e < 0) return e;
  const int fd = accept4(lfd, nullptr, nullptr, SOCK_CLOEXEC);
  return fd < 0 ? -errno : fd;
}

int sctp_connect(const char* ip, uint16_t port, int timeout_ms) {
  sockaddr_storage ss;
  socklen_t len;
  if (int e = make_addr(ip, port, &ss, &len); e < 0) return e;
  const int fd = ddp_socket(ss.ss_family);
  if (fd < 0) return fd;
  const int fl = fcntl(fd, F_GETFL);
  fcntl(fd, F_SETFL, fl | O_NONBLOCK);
  int err = 0;
  if (connect(fd, reinterpret_cast<sockaddr*>(&ss), len) != 0) {
    err = errno == EINPROGRESS ? wait_fd(fd, POLLOUT, timeout_ms) : -errno;
    if (err == 0) {
      socklen_t el = sizeof err;
      getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el);
      err = -err;
    }
  }
  if (err < 0) {
    close(fd);
    return err;
  }
  fcntl(fd, F_SETFL, fl);
  return fd;
}

int sctp_peer_adaptation(int fd, uint32_t* indication, int timeout_ms) {
  // The notification precedes any data of the association; peek so data is never consumed.
  if (int e = wait_fd(fd, POLLIN, timeout_ms); e < 0) return e;
  union {
    sctp_notification n;
    uint8_t raw[256];
  } u;
  iovec v{&u, sizeof u};
  msghdr m{};
  m.msg_iov = &v;
  m.msg_iovlen = 1;
  const ssize_t n = recvmsg(fd, &m, MSG_PEEK | MSG_DONTWAIT);
  if (n < 0) return -errno;
  if (!(m.msg_flags & MSG_NOTIFICATION) || static_cast<size_t>(n) < sizeof(sctp_adaptation_event) ||
      u.n.sn_header.sn_type != SCTP_ADAPTATION_INDICATION)
    return -ENOMSG;
  recv(fd, &u, sizeof u, MSG_DONTWAIT);  // consume it
  *indication = u.n.sn_adaptation_event.sai_adaptation_ind;
  return 0;
}

}  // namespace uiw::transport
