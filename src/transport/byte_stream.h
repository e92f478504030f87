// uiw::transport — lower-layer (LLP) adapters that move the engine's bytes.
//
// The engine is sans-IO: it says "write these iovecs" / "read the next N bytes into
// these iovecs" and the ByteStream does it. Reads are *directed*: the iovecs may point straight
// into registered memory, which is how uiw places payload without a staging copy.
//
// Thread safety: a TcpStream is used by one thread at a time (the owning progress thread). The
// in-memory pipe ends are thread-safe (each end may be driven by a different thread).
#pragma once

#include <sys/uio.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <utility>

namespace uiw::transport {

enum class IoStatus {
  Ok,          // `bytes` moved (> 0, or 0 only when the iovecs had total length 0)
  WouldBlock,  // nothing moved; poll fd() and retry
  Closed,      // read: orderly EOF from the peer (FIN). write/read after our own abort().
  Error,       // connection failed: `err` is a positive errno (ECONNRESET, EPIPE, ...)
};
const char* io_status_name(IoStatus);

struct IoResult {
  IoStatus status;
  size_t bytes;
  int err;  // positive errno when status == Error, else 0
};

// One direction pair of an LLP byte stream (RFC 5044 §3: MPA runs over a reliable, in-order
// byte stream; RFC 5041 §3 for what DDP needs from the LLP).
class ByteStream {
 public:
  virtual ~ByteStream() = default;
  virtual IoResult readv(const struct iovec* iov, int iovcnt) = 0;   // directed read into iov
  virtual IoResult writev(const struct iovec* iov, int iovcnt) = 0;  // MSG_NOSIGNAL for sockets
  // Pollable fd (POLLIN/EPOLLIN). TcpStream: the socket (-1 after abort()). Mem pipe: an eventfd
  // that is readable while readv() or a previously blocked writev() could make progress.
  virtual int fd() const = 0;
  virtual void shutdown_write() = 0;  // graceful half close (FIN); later writev -> Error EPIPE
  virtual void abort() = 0;           // abortive close (RST: SO_LINGER 0); peer sees ECONNRESET
  virtual uint32_t emss() const = 0;  // effective MSS for MULPDU (RFC 5044 §3: TCP_MAXSEG / MTU)
  // Part of what was written is not acknowledged by the peer yet (TCP: SIOCOUTQ). false where
  // the LLP does not tell.
  virtual bool unacknowledged() const { return false; }
};

// A connected TCP socket. Takes ownership of fd (closed in the destructor), sets O_NONBLOCK and
// TCP_NODELAY. readv() uses readv(2); writev() uses sendmsg(MSG_NOSIGNAL | MSG_DONTWAIT).
class TcpStream final : public ByteStream {
 public:
  explicit TcpStream(int fd);
  ~TcpStream() override;
  TcpStream(const TcpStream&) = delete;
  TcpStream& operator=(const TcpStream&) = delete;

  IoResult readv(const struct iovec* iov, int iovcnt) override;
  IoResult writev(const struct iovec* iov, int iovcnt) override;
  int fd() const override { return fd_; }
  void shutdown_write() override;
  // SO_LINGER {1, 0} + close(): the kernel sends RST. fd() is -1 afterwards (remove it from any
  // epoll set before calling), and later readv/writev return Closed.
  void abort() override;
  // getsockopt(TCP_MAXSEG) at call time (it follows PMTU changes); 536 (RFC 879) if unknown.
  uint32_t emss() const override;
  bool unacknowledged() const override;

 private:
  int fd_;
  bool tcp_ = false;  // a TCP socket (tests also run the class over AF_UNIX socket pairs)
};

// In-memory pipe pair for tests. Both ends are thread-safe. max_chunk limits each readv/writev to
// simulate short I/O; capacity bounds the bytes buffered per direction (full -> WouldBlock).
// Destroying an end closes it like close(2) on a socket: the peer reads EOF, and its writes then
// fail with EPIPE. emss() returns 1460 (an Ethernet TCP MSS) unless MemPipeOptions says otherwise.
std::pair<std::unique_ptr<ByteStream>, std::unique_ptr<ByteStream>> make_mem_pipe(
    size_t capacity = 1 << 20, size_t max_chunk = SIZE_MAX);

struct MemPipeOptions {
  size_t capacity = 1 << 20;
  size_t max_chunk = SIZE_MAX;
  uint32_t emss = 1460;
};
std::pair<std::unique_ptr<ByteStream>, std::unique_ptr<ByteStream>> make_mem_pipe(
    const MemPipeOptions&);

}  // namespace uiw::transport
