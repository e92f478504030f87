#include "runtime/connection.h"

#include <sys/uio.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>

namespace uiw::runtime {

using transport::IoStatus;

int64_t steady_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

Connection::Connection(engine::Qp* qp, std::unique_ptr<transport::ByteStream> stream)
    : qp_(qp), stream_(std::move(stream)), stage_(kStageSize) {}

void Connection::pick_read_size() {
  const engine::QpStats& s = qp_->stats();
  const uint64_t fpdus = s.rx_fpdus - mode_fpdus_;
  if (fpdus == 0) return;  // inside one FPDU: no new evidence
  // An SCTP stream hands out whole messages from its own buffer: there a window saves nothing.
  // With CRC a payload is read into the Qp's FPDU stage and verified there before it is
  // placed (RFC 5044 §4.4), so it is copied either way: more, smaller reads only cost
  // syscalls (measured: CRC-on bandwidth 0.57x instead of 0.72x raw TCP at 1 MiB).
  const engine::ConnParams& p = qp_->params();
  large_fpdus_ =
      p.llp == engine::Llp::Mpa && !p.crc && (s.rx_bytes - mode_bytes_) / fpdus >= kDirectMin;
  mode_bytes_ = s.rx_bytes;
  mode_fpdus_ = s.rx_fpdus;
}

bool Connection::receive() {
  bool moved = false;
  cut_short_ = false;
  int round = 0;
  for (; round < kRxRounds && !rx_closed_; ++round) {
    // What was posted while this pass held the QP (its poster left the sending to the pass)
    // goes out between two reads, not after the whole read budget: a small message (an
    // acknowledgement, a credit update) must not wait behind megabytes of inbound data. Not
    // after the socket refused a write: its EPOLLOUT brings the next pass. A write that failed
    // ended the stream (rx_closed_): nothing more is read.
    if (round > 0 && !blocked_) {
      transmit();
      if (rx_closed_) break;
    }
    if (stage_off_ < stage_len_) {
      const size_t n = qp_->rx_feed({stage_.data() + stage_off_, stage_len_ - stage_off_});
      stage_off_ += n;
      if (n == 0) break;  // the Qp stopped reading (not started)
      if (stage_off_ == stage_len_) pick_read_size();
      moved = true;
      continue;
    }
    const engine::Qp::RxNeed need = qp_->rx_need();
    if (need.len == 0) break;
    const bool direct = need.len >= kDirectMin && qp_->rx_directable();
    if (!direct) qp_->rx_cancel();  // the staged path asks again when it copies
    const size_t stage_want = large_fpdus_ ? kHeaderWindow : stage_.size();
    // A directed read also takes up to a header window of what follows the payload into the
    // stage (the FPDU's trailer and the next headers; the stage is empty here): one system
    // call per large FPDU instead of one for its payload and one for the next headers. Over
    // SCTP a read never crosses a message, so nothing would follow.
    const bool scatter = direct && qp_->params().llp == engine::Llp::Mpa;
    iovec iov[2] = {direct ? iovec{need.dst, need.len} : iovec{stage_.data(), stage_want},
                    iovec{stage_.data(), kHeaderWindow}};
    const transport::IoResult r = stream_->readv(iov, scatter ? 2 : 1);
    if (direct && r.status == IoStatus::Error && r.err == EFAULT) {
      // The kernel could not write the application's page (unmapped, read-only): the bytes
      // stay in the socket, the Qp ends the stream and reads on into its drain.
      qp_->rx_fault();
      moved = true;
      continue;
    }
    if (r.status != IoStatus::Ok) qp_->rx_cancel();
    if (r.status == IoStatus::WouldBlock) break;
    if (r.status == IoStatus::Closed) {
      if (hold_eof()) break;
      eof_held_ = false;
      rx_closed_ = true;
      qp_->rx_eof();
      moved = true;
      break;
    }
    if (r.status == IoStatus::Error) {
      rx_closed_ = true;
      qp_->rx_error(r.err);
      moved = true;
      break;
    }
    moved = true;
    size_t asked;  // what the read could have returned
    stage_off_ = 0;
    if (direct) {
      const size_t placed = std::min(r.bytes, need.len);
      ++stats_.directed_reads;
      stats_.directed_bytes += placed;
      qp_->rx_commit(placed);
      stage_len_ = r.bytes - placed;                   // fed on the next round
      asked = scatter ? need.len + kHeaderWindow : 0;  // SCTP: one message, nothing follows
    } else {
      ++stats_.staged_reads;
      stage_len_ = r.bytes;
      asked = stage_want;
    }
    // A short read drained the socket (a TCP read fills every iovec before it returns less):
    // consume it and stop, instead of paying a readv that can only say EAGAIN (new data raises
    // a new readiness edge) or find the FIN that came with the bytes (left to the next read,
    // so the completions these bytes made reach a poller before the flush).
    if (r.bytes < asked) {
      stage_off_ = stage_len_ ? qp_->rx_feed({stage_.data(), stage_len_}) : 0;
      if (stage_off_ == stage_len_) {
        pick_read_size();
        // An SCTP socket hands out one message per read whatever else is queued: there a
        // short read proves nothing, and the next pass goes on.
        cut_short_ = qp_->params().llp == engine::Llp::Sctp;
        break;
      }
    }
  }
  if (round == kRxRounds) cut_short_ = true;  // the read budget is spent, not the socket
  return moved;
}

bool Connection::hold_eof() {
  const engine::QpState st = qp_->state();
  // Only where rx_eof would flush: an Idle QP only records it, one in Terminate or Error has
  // flushed already.
  if ((st != engine::QpState::Rts && st != engine::QpState::Closing) || !qp_->completions_queued())
    return false;
  const int64_t now = steady_ns();
  if (!eof_held_) {
    eof_held_ = true;
    eof_seen_ns_ = now;
  }
  return now - eof_seen_ns_ < kEofHoldNs;
}

bool Connection::transmit(std::atomic<bool>* reader_waits) {
  return write_out(reader_waits, SIZE_MAX);
}

bool Connection::transmit_pass() {
  tx_left_ = kTxBytesPerPass;
  tx_cut_ = false;
  const bool moved = write_out(nullptr, SIZE_MAX);
  tx_left_ = SIZE_MAX;
  return moved;
}

bool Connection::write_out(std::atomic<bool>* reader_waits, size_t read_every) {
  bool moved = false;
  blocked_ = false;
  size_t since_read = 0;
  // After a failed write or our own shutdown nothing more can go out. The Qp may still hold
  // the rest of a partly written FPDU (it saw the peer's EOF first, so rx_error did not drop
  // it): without this, every pass would retry the write and count as progress, and the
  // progress thread would spin (SCTP refuses sends once the peer's SHUTDOWN arrived).
  while (!tx_shut_) {
    if (tx_left_ == 0) {
      tx_cut_ = true;
      break;
    }
    std::span<const iovec> iov = qp_->tx_pending();
    if (iov.empty()) break;
    // A read for the waiting thread, or the pass's own after read_every bytes; receive()
    // itself transmits between its rounds, and this loop sends what is left after it.
    const bool waited = reader_waits && reader_waits->load(std::memory_order_relaxed) &&
                        reader_waits->exchange(false, std::memory_order_relaxed);
    if ((waited || since_read >= read_every) && !rx_closed_) {
      since_read = 0;
      qp_->tx_commit(0);
      moved |= receive();
      continue;
    }
    const transport::IoResult r = stream_->writev(iov.data(), static_cast<int>(iov.size()));
    if (r.status == IoStatus::WouldBlock) {
      ++stats_.would_block;
      blocked_ = true;
      qp_->tx_commit(0);
      break;
    }
    if (r.status != IoStatus::Ok) {
      // EFAULT: the kernel could not read a source page (unmapped since the WR was posted).
      qp_->tx_commit(0);
      if (!rx_closed_) r.err == EFAULT ? qp_->tx_fault() : qp_->rx_error(r.err);
      rx_closed_ = true;
      tx_shut_ = true;
      return true;
    }
    ++stats_.writes;
    since_read += r.bytes;
    qp_->tx_commit(r.bytes);
    moved = true;
    tx_left_ -= std::min(tx_left_, r.bytes);
  }
  if (!tx_shut_ && qp_->tx_want_shutdown() && qp_->tx_idle() && !hold_fin()) {
    stream_->shutdown_write();
    tx_shut_ = true;
    moved = true;
  }
  return moved;
}

bool Connection::hold_fin() {
  if (!stream_->unacknowledged()) return fin_held_ = false;
  const int64_t now = steady_ns();
  if (!fin_held_) {
    fin_held_ = true;
    fin_held_ns_ = now;
  }
  if (now - fin_held_ns_ < kFinAckWaitNs) return true;
  return fin_held_ = false;
}

bool Connection::progress() {
  tx_left_ = kTxBytesPerPass;
  tx_cut_ = false;
  const bool rx = receive();
  const bool tx = write_out(nullptr, kTxBytesPerRead);
  tx_left_ = SIZE_MAX;
  return rx || tx;
}

void Connection::abort() {
  qp_->abort();
  stream_->abort();
  rx_closed_ = tx_shut_ = true;
}

bool Connection::finished() const {
  return rx_closed_ && (tx_shut_ || qp_->state() == engine::QpState::Error);
}

}  // namespace uiw::runtime
