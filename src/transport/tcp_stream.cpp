// TcpStream: the ByteStream over a connected kernel TCP socket (RFC 5044 §3: MPA's LLP).
#include <fcntl.h>
#include <linux/sockios.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <climits>

#include "transport/byte_stream.h"
#include "transport/socket_util.h"

namespace uiw::transport {

namespace {

size_t total_length(const struct iovec* iov, int iovcnt) {
  size_t n = 0;
  for (int i = 0; i < iovcnt; ++i) n += iov[i].iov_len;
  return n;
}

IoResult from_errno(int e) {
  if (e == EAGAIN || e == EWOULDBLOCK) return {IoStatus::WouldBlock, 0, 0};
  return {IoStatus::Error, 0, e};
}

}  // namespace

const char* io_status_name(IoStatus s) {
  switch (s) {
    case IoStatus::Ok:
      return "Ok";
    case IoStatus::WouldBlock:
      return "WouldBlock";
    case IoStatus::Closed:
      return "Closed";
    case IoStatus::Error:
      return "Error";
  }
  return "?";
}

TcpStream::TcpStream(int fd) : fd_(fd) {
  if (fd_ < 0) return;
  int fl = fcntl(fd_, F_GETFL);
  if (fl >= 0) fcntl(fd_, F_SETFL, fl | O_NONBLOCK);
  // FPDUs are latency-bound messages; the engine already batches FPDUs into one writev, so Nagle
  // would only delay the last segment of every message.
  int one = 1;
  tcp_ = setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) == 0;
}

TcpStream::~TcpStream() {
  if (fd_ >= 0) close(fd_);
}

IoResult TcpStream::readv(const struct iovec* iov, int iovcnt) {
  if (fd_ < 0) return {IoStatus::Closed, 0, 0};
  if (iovcnt < 0 || iovcnt > IOV_MAX) return {IoStatus::Error, 0, EINVAL};
  // A read returning 0 means EOF, so a zero-length request must not reach the kernel.
  if (total_length(iov, iovcnt) == 0) return {IoStatus::Ok, 0, 0};
  struct msghdr msg {};
  msg.msg_iov = const_cast<struct iovec*>(iov);
  msg.msg_iovlen = static_cast<size_t>(iovcnt);
  for (;;) {
    // One buffer (most reads): recv(2), which spares the kernel the iovec import of recvmsg or
    // readv (~0.13 us per call on the bench host, paid by every look of a busy poller).
    // MSG_DONTWAIT: the socket belongs to the application, which may clear O_NONBLOCK.
    ssize_t n = iovcnt == 1 ? ::recv(fd_, iov[0].iov_base, iov[0].iov_len, MSG_DONTWAIT)
                            : ::recvmsg(fd_, &msg, MSG_DONTWAIT);
    if (n > 0) return {IoStatus::Ok, static_cast<size_t>(n), 0};
    if (n == 0) return {IoStatus::Closed, 0, 0};  // FIN: graceful close (RFC 5044 §7.2)
    if (errno != EINTR) return from_errno(errno);
  }
}

IoResult TcpStream::writev(const struct iovec* iov, int iovcnt) {
  if (fd_ < 0) return {IoStatus::Closed, 0, 0};
  if (iovcnt < 0 || iovcnt > IOV_MAX) return {IoStatus::Error, 0, EINVAL};
  if (total_length(iov, iovcnt) == 0) return {IoStatus::Ok, 0, 0};
  struct msghdr msg {};
  msg.msg_iov = const_cast<struct iovec*>(iov);
  msg.msg_iovlen = static_cast<size_t>(iovcnt);
  for (;;) {
    // MSG_NOSIGNAL: a peer reset must become EPIPE here, not SIGPIPE in the application. One
    // buffer (a small FPDU, MpaTx): send(2), without sendmsg's message header and iovec import.
    ssize_t n = iovcnt == 1
                    ? ::send(fd_, iov[0].iov_base, iov[0].iov_len, MSG_NOSIGNAL | MSG_DONTWAIT)
                    : ::sendmsg(fd_, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n >= 0) return {IoStatus::Ok, static_cast<size_t>(n), 0};
    if (errno != EINTR) return from_errno(errno);
  }
}

void TcpStream::shutdown_write() {
  if (fd_ >= 0) ::shutdown(fd_, SHUT_WR);
}

bool TcpStream::unacknowledged() const {
  int n = 0;  // tcp(7): SIOCOUTQ is the bytes not yet acknowledged, sent or not
  if (!tcp_ || fd_ < 0 || ioctl(fd_, SIOCOUTQ, &n) != 0 || n <= 0) return false;
  // A connection that was reset or timed out keeps its count: nothing will acknowledge it.
  tcp_info ti{};
  socklen_t len = sizeof ti;
  return getsockopt(fd_, IPPROTO_TCP, TCP_INFO, &ti, &len) == 0 &&
         (ti.tcpi_state == TCP_ESTABLISHED || ti.tcpi_state == TCP_CLOSE_WAIT);
}

void TcpStream::abort() {
  abortive_close(fd_);
}

uint32_t TcpStream::emss() const {
  int mss = 0;
  socklen_t len = sizeof mss;
  if (fd_ < 0 || getsockopt(fd_, IPPROTO_TCP, TCP_MAXSEG, &mss, &len) != 0 || mss <= 0)
    return 536;  // RFC 879 default MSS
  return static_cast<uint32_t>(mss);
}

}  // namespace uiw::transport
