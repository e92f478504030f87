// SctpStream: DDP Segment Chunks and Session Control messages over a one-to-one SCTP socket
// (RFC 5043), with PPID and unordered flag in control messages (RFC 6458 §5.3.4-5.3.5).
#include "transport/sctp_stream.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <linux/sctp.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>

#include "engine/qp.h"
#include "transport/socket_util.h"
#include "wire/bytes.h"
#include "wire/sctp.h"

namespace uiw::transport {

namespace {

IoResult from_errno(int e) {
  if (e == EAGAIN || e == EWOULDBLOCK) return {IoStatus::WouldBlock, 0, 0};
  return {IoStatus::Error, 0, e};
}

// The octet after the DDP-SSN of a message spread over iovecs (0 if the message is shorter).
uint8_t octet_at(const struct iovec* iov, int iovcnt, size_t pos) {
  for (int i = 0; i < iovcnt; ++i) {
    if (pos < iov[i].iov_len) return static_cast<const uint8_t*>(iov[i].iov_base)[pos];
    pos -= iov[i].iov_len;
  }
  return 0;
}

}  // namespace

SctpStream::SctpStream(int fd) : fd_(fd), buf_(engine::kSctpRecordHeader + kSctpMaxMessage) {
  if (fd_ < 0) return;
  int fl = fcntl(fd_, F_GETFL);
  if (fl >= 0) fcntl(fd_, F_SETFL, fl | O_NONBLOCK);
  int one = 1;
  setsockopt(fd_, IPPROTO_SCTP, SCTP_NODELAY, &one, sizeof one);
  setsockopt(fd_, IPPROTO_SCTP, SCTP_RECVRCVINFO, &one, sizeof one);
  // RFC 4960 §6.2 lets a receiver delay its SACK up to 200 ms unless a second packet arrives.
  // A DDP Segment is one message of up to the path MTU (64 KiB on loopback), so a pause of the
  // sender after one message stalled it for the whole delay; a SACK per packet (frequency 1,
  // RFC 6458 §8.1.19) keeps the window moving.
  sctp_sack_info sack{};
  sack.sack_freq = 1;
  setsockopt(fd_, IPPROTO_SCTP, SCTP_DELAYED_SACK, &sack, sizeof sack);
  // The association's end (association_end) is told only by this notification.
  sctp_event ev{};
  ev.se_type = SCTP_ASSOC_CHANGE;
  ev.se_on = 1;
  setsockopt(fd_, IPPROTO_SCTP, SCTP_EVENT, &ev, sizeof ev);
}

SctpStream::~SctpStream() {
  if (fd_ >= 0) close(fd_);
}

IoResult SctpStream::copy_out(const struct iovec* iov, int iovcnt, size_t* done) {
  size_t pos = *done;  // octets already filled, from the first iovec on
  for (int i = 0; i < iovcnt && out_off_ < out_len_; ++i) {
    if (pos >= iov[i].iov_len) {
      pos -= iov[i].iov_len;
      continue;
    }
    const size_t k = std::min(iov[i].iov_len - pos, out_len_ - out_off_);
    std::memcpy(static_cast<uint8_t*>(iov[i].iov_base) + pos, buf_.data() + out_off_, k);
    out_off_ += k;
    *done += k;
    pos = 0;
  }
  return {IoStatus::Ok, *done, 0};
}

// SCTP has no half-close (RFC 4960 §9.2): the side that sends SHUTDOWN never sees its
// socket's receive side shut, so recvmsg keeps saying EAGAIN after the association is gone.
// Its end is told only by an SCTP_ASSOC_CHANGE notification (RFC 6458 §6.1.1; uiw.ko
// subscribes it): SHUTDOWN_COMP is a graceful end (EOF), COMM_LOST / CANT_STR_ASSOC a lost one.
IoStatus SctpStream::association_end(const uint8_t* p, size_t n) {
  sctp_assoc_change ac{};
  if (n < sizeof ac) return IoStatus::Ok;
  std::memcpy(&ac, p, sizeof ac);
  if (ac.sac_type != SCTP_ASSOC_CHANGE) return IoStatus::Ok;
  if (ac.sac_state == SCTP_SHUTDOWN_COMP) return IoStatus::Closed;
  if (ac.sac_state == SCTP_COMM_LOST || ac.sac_state == SCTP_CANT_STR_ASSOC) return IoStatus::Error;
  return IoStatus::Ok;
}

IoResult SctpStream::readv(const struct iovec* iov, int iovcnt) {
  if (fd_ < 0) return {IoStatus::Closed, 0, 0};
  if (iovcnt < 0 || iovcnt > IOV_MAX) return {IoStatus::Error, 0, EINVAL};
  size_t room = 0;
  for (int i = 0; i < iovcnt; ++i) room += iov[i].iov_len;
  if (room == 0) return {IoStatus::Ok, 0, 0};
  size_t done = 0;
  for (;;) {
    if (out_off_ < out_len_) {
      copy_out(iov, iovcnt, &done);
      if (done == room) return {IoStatus::Ok, done, 0};
      continue;
    }
    if (closed_) return done ? IoResult{IoStatus::Ok, done, 0} : IoResult{IoStatus::Closed, 0, 0};
    const size_t hdr = engine::kSctpRecordHeader;
    iovec v{buf_.data() + hdr + have_, buf_.size() - hdr - have_};
    alignas(cmsghdr) uint8_t cbuf[CMSG_SPACE(sizeof(sctp_rcvinfo))];
    msghdr m{};
    m.msg_iov = &v;
    m.msg_iovlen = 1;
    m.msg_control = cbuf;
    m.msg_controllen = sizeof cbuf;
    const ssize_t n = ::recvmsg(fd_, &m, MSG_DONTWAIT);
    if (n < 0) {
      if (errno == EINTR) continue;
      const IoResult r = from_errno(errno);
      return done ? IoResult{IoStatus::Ok, done, 0} : r;
    }
    if (n == 0) {  // the association was shut down (SHUTDOWN; RFC 5043 §6.2 after Terminate)
      closed_ = true;
      continue;
    }
    if (m.msg_flags & MSG_NOTIFICATION) {
      // Not DDP data. Notifications arrive whole (the buffer is far larger than any).
      const IoStatus end = association_end(buf_.data() + hdr + have_, static_cast<size_t>(n));
      if (end == IoStatus::Closed) closed_ = true;
      if (end == IoStatus::Error)
        return done ? IoResult{IoStatus::Ok, done, 0} : IoResult{IoStatus::Error, 0, ECONNRESET};
      continue;
    }
    if (have_ == 0) {
      // The PPID of the message's first piece; partial delivery pieces belong to one message.
      uint32_t ppid = 0;
      for (cmsghdr* c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c)) {
        if (c->cmsg_level == IPPROTO_SCTP && c->cmsg_type == SCTP_RCVINFO) {
          sctp_rcvinfo ri;
          std::memcpy(&ri, CMSG_DATA(c), sizeof ri);
          ppid = ntohl(ri.rcv_ppid);
        }
      }
      wire::store_be32(buf_.data(), ppid);
    }
    have_ += static_cast<size_t>(n);
    if (!(m.msg_flags & MSG_EOR)) {
      // Partial delivery: the rest follows. A message that does not fit is larger than any
      // DDP Segment we accept (RFC 5043 §9: "MUST reject").
      if (hdr + have_ == buf_.size()) return {IoStatus::Error, done, EMSGSIZE};
      continue;
    }
    wire::store_be32(buf_.data() + 4, static_cast<uint32_t>(have_));
    out_off_ = 0;
    out_len_ = hdr + have_;
    have_ = 0;
    ++msgs_in_;
  }
}

IoResult SctpStream::writev(const struct iovec* iov, int iovcnt) {
  if (fd_ < 0) return {IoStatus::Closed, 0, 0};
  if (iovcnt < 0 || iovcnt > IOV_MAX) return {IoStatus::Error, 0, EINVAL};
  size_t total = 0;
  for (int i = 0; i < iovcnt; ++i) total += iov[i].iov_len;
  if (total == 0) return {IoStatus::Ok, 0, 0};
  alignas(cmsghdr) uint8_t cbuf[CMSG_SPACE(sizeof(sctp_sndinfo))] = {};
  msghdr m{};
  m.msg_iov = const_cast<struct iovec*>(iov);
  m.msg_iovlen = static_cast<size_t>(iovcnt);
  m.msg_control = cbuf;
  m.msg_controllen = sizeof cbuf;
  cmsghdr* c = CMSG_FIRSTHDR(&m);
  c->cmsg_level = IPPROTO_SCTP;
  c->cmsg_type = SCTP_SNDINFO;
  c->cmsg_len = CMSG_LEN(sizeof(sctp_sndinfo));
  sctp_sndinfo si{};
  // RFC 5043 §10: "MUST use the Unordered option on all Data Chunks"; §5.2: PPID 16 / 17.
  si.snd_flags = SCTP_UNORDERED;
  si.snd_ppid = htonl(engine::sctp_ppid_of(octet_at(iov, iovcnt, wire::kDdpSsnSize)));
  std::memcpy(CMSG_DATA(c), &si, sizeof si);
  for (;;) {
    // One-to-one SCTP sendmsg takes the whole message or nothing (EAGAIN when the send buffer
    // lacks room), so message boundaries are kept.
    const ssize_t n = ::sendmsg(fd_, &m, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n >= 0) {
      ++msgs_out_;
      return {IoStatus::Ok, static_cast<size_t>(n), 0};
    }
    if (errno != EINTR) return from_errno(errno);
  }
}

void SctpStream::shutdown_write() {
  if (fd_ >= 0) ::shutdown(fd_, SHUT_WR);
}

void SctpStream::abort() {
  abortive_close(fd_);
}

uint32_t SctpStream::emss() const {
  constexpr uint32_t kSackRoom = 16;  // §9: leave room to bundle a SACK (RFC 4960 §3.3.4)
  sctp_assoc_value av{};
  socklen_t len = sizeof av;
  uint32_t seg = 0;
  if (fd_ >= 0 && getsockopt(fd_, IPPROTO_SCTP, SCTP_MAXSEG, &av, &len) == 0 &&
      av.assoc_value > wire::kDdpSsnSize + kSackRoom)
    seg = av.assoc_value - wire::kDdpSsnSize - kSackRoom;
  return std::max<uint32_t>(seg, wire::kSctpMinMaxSegment);
}

}  // namespace uiw::transport
