// In-memory ByteStream pair for tests: behaves like a connected TCP socket pair with bounded
// buffers, short I/O, half close, reset and an eventfd for readiness.
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <mutex>
#include <vector>

#include "transport/byte_stream.h"

namespace uiw::transport {

namespace {

// One direction: a ring buffer written by one end and read by the other.
struct Direction {
  std::vector<uint8_t> ring;
  size_t head = 0;           // next byte to read
  size_t size = 0;           // bytes buffered
  bool fin = false;          // the writer shut down (or closed) its side
  bool reader_gone = false;  // the reading end was destroyed or aborted

  size_t space() const { return ring.size() - size; }

  // Copies up to `limit` bytes from iov into the ring.
  size_t put(const struct iovec* iov, int iovcnt, size_t limit) {
    size_t done = 0;
    for (int i = 0; i < iovcnt && done < limit; ++i) {
      const uint8_t* src = static_cast<const uint8_t*>(iov[i].iov_base);
      size_t n = std::min(iov[i].iov_len, limit - done);
      for (size_t off = 0; off < n;) {
        size_t tail = (head + size) % ring.size();
        size_t run = std::min(n - off, ring.size() - tail);
        std::copy_n(src + off, run, ring.data() + tail);
        size += run;
        off += run;
      }
      done += n;
    }
    return done;
  }

  // Copies up to `limit` bytes from the ring into iov.
  size_t get(const struct iovec* iov, int iovcnt, size_t limit) {
    size_t done = 0;
    for (int i = 0; i < iovcnt && done < limit; ++i) {
      uint8_t* dst = static_cast<uint8_t*>(iov[i].iov_base);
      size_t n = std::min(iov[i].iov_len, limit - done);
      for (size_t off = 0; off < n;) {
        size_t run = std::min(n - off, ring.size() - head);
        std::copy_n(ring.data() + head, run, dst + off);
        head = (head + run) % ring.size();
        size -= run;
        off += run;
      }
      done += n;
    }
    return done;
  }

  void discard() {
    head = 0;
    size = 0;
  }
};

struct Shared {
  std::mutex mu;
  Direction dir[2];  // dir[i] is read by end i and written by end 1 - i
  size_t max_chunk;
  uint32_t emss;
  bool reset = false;  // an end aborted: both ends see ECONNRESET
  bool self_closed[2] = {false, false};
  bool write_blocked[2] = {false, false};  // end i's last writev found no space
  bool signaled[2] = {false, false};       // end i's eventfd counter is 1
  int efd[2] = {-1, -1};

  // Caller holds mu. Level-triggered readiness: end i's eventfd is readable exactly while a
  // readv() or a previously blocked writev() on end i would not return WouldBlock.
  void update(int i) {
    if (efd[i] < 0) return;
    const Direction& in = dir[i];
    const Direction& out = dir[1 - i];
    bool ready =
        !self_closed[i] && (reset || in.size > 0 || in.fin ||
                            (write_blocked[i] && (out.space() > 0 || out.reader_gone || out.fin)));
    if (ready == signaled[i]) return;
    uint64_t v = 1;
    ssize_t r = ready ? write(efd[i], &v, sizeof v) : read(efd[i], &v, sizeof v);
    (void)r;  // a non-blocking eventfd with counter 0/1 cannot fail here
    signaled[i] = ready;
  }
  void update_both() {
    update(0);
    update(1);
  }
};

size_t total_length(const struct iovec* iov, int iovcnt) {
  size_t n = 0;
  for (int i = 0; i < iovcnt; ++i) n += iov[i].iov_len;
  return n;
}

class MemPipeEnd final : public ByteStream {
 public:
  MemPipeEnd(std::shared_ptr<Shared> s, int idx) : s_(std::move(s)), i_(idx) {
    s_->efd[i_] = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  }
  ~MemPipeEnd() override {
    std::lock_guard<std::mutex> g(s_->mu);
    // Like close(2) on a socket: the peer reads EOF; its later writes fail with EPIPE.
    if (!s_->self_closed[i_]) {
      s_->self_closed[i_] = true;
      s_->dir[1 - i_].fin = true;
    }
    s_->dir[i_].reader_gone = true;
    s_->dir[i_].discard();
    if (s_->efd[i_] >= 0) close(s_->efd[i_]);
    s_->efd[i_] = -1;
    s_->update(1 - i_);
  }

  IoResult readv(const struct iovec* iov, int iovcnt) override {
    std::lock_guard<std::mutex> g(s_->mu);
    Direction& in = s_->dir[i_];
    IoResult r;
    if (s_->self_closed[i_]) {
      r = {IoStatus::Closed, 0, 0};
    } else if (s_->reset) {
      r = {IoStatus::Error, 0, ECONNRESET};
    } else if (total_length(iov, iovcnt) == 0) {
      r = {IoStatus::Ok, 0, 0};
    } else if (in.size > 0) {
      r = {IoStatus::Ok, in.get(iov, iovcnt, std::min(in.size, s_->max_chunk)), 0};
    } else if (in.fin) {
      r = {IoStatus::Closed, 0, 0};
    } else {
      r = {IoStatus::WouldBlock, 0, 0};
    }
    s_->update_both();  // reading freed space: the writer may be unblocked
    return r;
  }

  IoResult writev(const struct iovec* iov, int iovcnt) override {
    std::lock_guard<std::mutex> g(s_->mu);
    Direction& out = s_->dir[1 - i_];
    IoResult r;
    if (s_->self_closed[i_]) {
      r = {IoStatus::Closed, 0, 0};
    } else if (s_->reset) {
      r = {IoStatus::Error, 0, ECONNRESET};
    } else if (out.fin || out.reader_gone) {
      r = {IoStatus::Error, 0, EPIPE};
    } else if (total_length(iov, iovcnt) == 0) {
      r = {IoStatus::Ok, 0, 0};
    } else if (out.space() == 0) {
      s_->write_blocked[i_] = true;
      r = {IoStatus::WouldBlock, 0, 0};
    } else {
      s_->write_blocked[i_] = false;
      r = {IoStatus::Ok, out.put(iov, iovcnt, std::min(out.space(), s_->max_chunk)), 0};
    }
    s_->update_both();
    return r;
  }

  int fd() const override {
    std::lock_guard<std::mutex> g(s_->mu);
    return s_->efd[i_];
  }

  void shutdown_write() override {
    std::lock_guard<std::mutex> g(s_->mu);
    s_->dir[1 - i_].fin = true;
    s_->update_both();
  }

  void abort() override {
    std::lock_guard<std::mutex> g(s_->mu);
    // RST: buffered data in both directions is lost and the peer sees ECONNRESET.
    s_->reset = true;
    s_->self_closed[i_] = true;
    s_->dir[0].discard();
    s_->dir[1].discard();
    s_->update_both();
  }

  uint32_t emss() const override { return s_->emss; }

 private:
  std::shared_ptr<Shared> s_;
  const int i_;
};

}  // namespace

std::pair<std::unique_ptr<ByteStream>, std::unique_ptr<ByteStream>> make_mem_pipe(
    const MemPipeOptions& o) {
  auto s = std::make_shared<Shared>();
  size_t cap = std::max<size_t>(o.capacity, 1);
  s->dir[0].ring.resize(cap);
  s->dir[1].ring.resize(cap);
  s->max_chunk = std::max<size_t>(o.max_chunk, 1);
  s->emss = o.emss;
  std::unique_ptr<ByteStream> a = std::make_unique<MemPipeEnd>(s, 0);
  std::unique_ptr<ByteStream> b = std::make_unique<MemPipeEnd>(s, 1);
  return {std::move(a), std::move(b)};
}

std::pair<std::unique_ptr<ByteStream>, std::unique_ptr<ByteStream>> make_mem_pipe(
    size_t capacity, size_t max_chunk) {
  MemPipeOptions o;
  o.capacity = capacity;
  o.max_chunk = max_chunk;
  return make_mem_pipe(o);
}

}  // namespace uiw::transport
