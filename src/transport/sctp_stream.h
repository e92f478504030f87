// SctpStream: the LLP adapter for DDP over SCTP (RFC 5043) on a connected one-to-one SCTP socket
// (SOCK_STREAM, IPPROTO_SCTP), without libsctp: PPIDs and the unordered flag travel in
// sendmsg/recvmsg control messages (SCTP_SNDINFO / SCTP_RCVINFO, RFC 6458 §5.3.4-5.3.5).
//
// It is a ByteStream so runtime::Connection drives it unchanged, with message semantics on both
// sides (the engine Qp must run with ConnParams::llp == Llp::Sctp):
//   writev: the iovecs are ONE message (Qp::tx_pending gives one per call in SCTP mode); it goes
//           out as one unordered DATA chunk sequence (RFC 5043 §10: U=1 on all chunks) with PPID
//           16, or 17 for a Session Control message (engine::sctp_ppid_of). Atomic: all or
//           WouldBlock.
//   readv:  yields whole received messages as records, PPID (be32) | length (be32) | message,
//           which is what Qp::rx_feed takes in SCTP mode. Partial delivery (no MSG_EOR yet) is
//           reassembled here; SCTP notifications are skipped.
//   shutdown_write: SCTP graceful SHUTDOWN (the Qp has already sent its Session Terminate).
//   emss(): the maximum DDP Segment size for ConnParams::mulpdu (RFC 5043 §9).
//
// Thread safety: like TcpStream, one thread at a time.
#pragma once

#include <cstdint>
#include <vector>

#include "transport/byte_stream.h"

namespace uiw::transport {

inline constexpr uint32_t kSctpMaxMessage = 64 * 1024 + 512;  // larger ones are refused

class SctpStream final : public ByteStream {
 public:
  // Takes ownership of a connected one-to-one SCTP socket (closed in the destructor); sets
  // O_NONBLOCK, SCTP_NODELAY (§11.2: untagged segments SHOULD NOT wait for bundling) and
  // SCTP_RECVRCVINFO.
  explicit SctpStream(int fd);
  ~SctpStream() override;
  SctpStream(const SctpStream&) = delete;
  SctpStream& operator=(const SctpStream&) = delete;

  IoResult readv(const struct iovec* iov, int iovcnt) override;
  IoResult writev(const struct iovec* iov, int iovcnt) override;
  int fd() const override { return fd_; }
  void shutdown_write() override;
  void abort() override;  // SO_LINGER {1,0} + close(): an SCTP ABORT
  // RFC 5043 §9: the largest DDP Segment that needs neither IP nor SCTP fragmentation (from
  // SCTP_MAXSEG, the association's fragmentation point), minus the DDP-SSN and room for a SACK
  // to be bundled; at least 516.
  uint32_t emss() const override;

  // Test hooks: messages received/sent, and the PPID of the last one received.
  uint64_t messages_in() const { return msgs_in_; }
  uint64_t messages_out() const { return msgs_out_; }

 private:
  IoResult copy_out(const struct iovec* iov, int iovcnt, size_t* done);
  static IoStatus association_end(const uint8_t* notification, size_t n);

  int fd_;
  std::vector<uint8_t> buf_;          // record header + message being received or copied out
  size_t have_ = 0;                   // message octets in buf_ after the record header
  size_t out_off_ = 0, out_len_ = 0;  // a complete record being copied out
  bool closed_ = false;               // EOF seen while a record was still being copied
  uint64_t msgs_in_ = 0, msgs_out_ = 0;
};

// Host-side helpers (tests, tools; production sockets come from uiw.ko). One-to-one SCTP
// sockets with the DDP Adaptation Layer Indication set (RFC 5043 §5.1, SCTP_ADAPTATION_LAYER),
// equal inbound and outbound stream counts (§8). Each returns an fd (blocking) or -errno.
int sctp_listen(const char* ip, uint16_t port, uint16_t* bound_port);
int sctp_accept(int lfd, int timeout_ms);
int sctp_connect(const char* ip, uint16_t port, int timeout_ms);
// RFC 5043 §11.1: the peer's Adaptation Indication as reported by the
// SCTP_ADAPTATION_INDICATION notification, read from a freshly connected socket that subscribed
// to it (the helpers above do). -ENOMSG when the peer sent none.
int sctp_peer_adaptation(int fd, uint32_t* indication, int timeout_ms);

}  // namespace uiw::transport
