// Connection: moves a Qp's bytes over its lower-layer stream. The one place where engine and
// socket meet (the engine itself never does I/O).
//
// Receive policy: headers and small payloads are read in bulk into a staging buffer (one
// syscall for many small FPDUs, copied out by Qp::rx_feed); once the Qp waits for a payload of
// at least kDirectMin bytes and the staging buffer is empty, the bytes are read straight into
// their destination (Qp::rx_need / rx_commit: the directed read, no copy), with a header
// window of what follows scattered into the staging buffer by the same read. While the FPDUs are
// that large, a staged read takes only kHeaderWindow bytes (the trailer before, the headers
// and the start of the payload), so the rest of each payload goes direct: a bulk read would
// swallow whole FPDUs (TCP over loopback hands over 64 KiB at a time, two 32 KiB FPDUs) and
// leave nothing to direct. Average FPDU size since the last decision picks the mode; with CRC
// the payload is staged for verification anyway, so the window is not used.
//
// Thread safety: none; the caller serialises every call with the Qp's own (runtime::QueuePair
// holds one mutex for both). The Qp is owned by the caller and must outlive the Connection.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "engine/qp.h"
#include "transport/byte_stream.h"

namespace uiw::runtime {

// The steady clock in ns: the time base of the runtime (QueuePair::polled_since, Progress).
int64_t steady_ns();

struct ConnectionStats {
  uint64_t staged_reads = 0, directed_reads = 0, directed_bytes = 0, writes = 0, would_block = 0;
};

class Connection {
 public:
  static constexpr size_t kStageSize = 64 * 1024;
  static constexpr size_t kDirectMin = 4096;
  // Reads per pass: one busy connection cannot starve the transmit side or other connections.
  static constexpr int kRxRounds = 64;
  static constexpr size_t kHeaderWindow = 256;
  // A pass reads again after writing this much: while a peer drains as fast as we write
  // (loopback), the transmit half only ends when the send queue is empty, megabytes later,
  // and a small message that arrived meanwhile (a credit update, an acknowledgement) would
  // wait for the lot. One read that usually finds nothing per 256 KiB written.
  static constexpr size_t kTxBytesPerRead = 256 * 1024;
  // Octets a pass writes at most, as kRxRounds bounds its reads: a connection whose peer drains
  // as fast as we write would otherwise hold its Qp, and the Progress thread, for the whole
  // send queue (gigabytes). The pass ends cut short and the connection is served again after
  // the others.
  static constexpr size_t kTxBytesPerPass = 4 * 1024 * 1024;
  // A graceful end of the peer's stream (its FIN at an FPDU boundary, or an SCTP SHUTDOWN)
  // ends the QP and flushes every posted receive (engine::Qp::rx_eof). While the QP's CQs still
  // hold completions, a pass that reads the FIN leaves it unread for a later pass, at most this
  // long: an application polling a few completions at a time (ibv_rc_pingpong polls two and
  // fails on any error among them) then takes the peer's last messages before their flushes,
  // whoever read them (the Progress thread may read the last bytes and the FIN before the
  // application polls again). An application that never polls still gets its flushes and fatal
  // event. The FIN stays in the socket (a read at end of stream returns 0 again), so waiting
  // costs one read per later pass.
  static constexpr int64_t kEofHoldNs = 1'000'000'000;
  // Our FIN waits until the peer acknowledged what was written before it, at most this long.
  // A FIN that reaches a Linux peer while our last segment still sits in its socket's backlog
  // (the socket busy in a send of the peer's own) is merged into that segment (tcp_add_backlog),
  // and TCP then reports the FIN before the data. siw's close work takes its QP's state lock
  // on the FIN, and its data_ready reads the socket only with a trylock of that lock: our last
  // message would stay unread, the receive it was for flushed. An acknowledged segment has
  // left the backlog and been read. The wait costs one ioctl per pass meanwhile.
  static constexpr int64_t kFinAckWaitNs = 500'000'000;

  Connection(engine::Qp* qp /* Unowned, must outlive */,
             std::unique_ptr<transport::ByteStream> stream);
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  // One non-blocking, bounded pass: receive what is there (at most kRxRounds reads; what is
  // posted meanwhile goes out between them), then send what the Qp has until the socket is
  // full or kTxBytesPerPass went out, reading again every kTxBytesPerRead. Returns true if any
  // byte moved.
  bool progress();
  // Only the transmit half of a pass (send what the Qp has until the socket is full): what a
  // poster runs after posting. Receiving is left to whoever waits for completions (a poller,
  // the Progress thread): a read here would put a syscall that finds nothing in front of
  // every send on the latency path. Unless reader_waits is set: another thread waits for the
  // Qp to read what arrived (QueuePair::run_pass), and a transmit that writes megabytes, or a
  // poster that takes the Qp again for each of many posts, would keep those bytes unplaced
  // until it stops. Then this thread reads once between two writes (and clears the flag):
  // a small inbound message (ib_send_bw's credit Write) is placed while the bulk goes out.
  bool transmit(std::atomic<bool>* reader_waits = nullptr);
  // The transmit half of a pass, bounded as progress()'s (for a QP whose reading is left to
  // its poller).
  bool transmit_pass();
  // The last pass stopped before the socket said it was drained (its read budget was spent,
  // or SCTP gave one message) or before the Qp had sent all it had (its write budget was
  // spent): run another, since no readiness edge will announce what is
  // left. Otherwise the socket said EAGAIN or gave a short read, or the Qp stopped reading,
  // and new bytes, buffer space or a post raise their own wakeup. One exception: a short read
  // does not show a FIN that came with the data (Progress watches EPOLLRDHUP for that).
  bool cut_short() const { return cut_short_ || tx_cut_; }
  bool tx_cut() const { return tx_cut_; }  // the last pass ended on its write budget
  bool rx_closed() const { return rx_closed_; }
  // The peer's FIN was read and is held back (kEofHoldNs): another pass reads it again.
  bool eof_held() const { return eof_held_; }
  // Our FIN waits for the peer's acknowledgement (kFinAckWaitNs): another pass looks again.
  bool fin_held() const { return fin_held_ && !tx_shut_; }
  void abort();  // the Qp flushes, the stream is reset (RST)

  int fd() const { return stream_->fd(); }
  bool wants_write() const { return blocked_; }  // the Qp has bytes the socket did not take yet
  bool finished() const;  // both directions are closed; nothing more will move
  const ConnectionStats& stats() const { return stats_; }

 private:
  bool receive();
  // transmit(), with a receive() after every read_every bytes written (SIZE_MAX: none), ending
  // cut short once the pass's write budget (tx_left_) is spent.
  bool write_out(std::atomic<bool>* reader_waits, size_t read_every);
  bool hold_eof();        // the FIN just read waits for a later pass (kEofHoldNs)
  bool hold_fin();        // our FIN waits for a later pass (kFinAckWaitNs)
  void pick_read_size();  // after the staging buffer was consumed

  engine::Qp* const qp_;  // Unowned.
  std::unique_ptr<transport::ByteStream> stream_;
  std::vector<uint8_t> stage_;
  size_t stage_off_ = 0, stage_len_ = 0;
  bool large_fpdus_ = false;                  // read kHeaderWindow, not the whole stage
  uint64_t mode_bytes_ = 0, mode_fpdus_ = 0;  // the Qp's counters at the last decision
  bool rx_closed_ = false, tx_shut_ = false, blocked_ = false, cut_short_ = false;
  bool eof_held_ = false;
  bool fin_held_ = false;
  int64_t fin_held_ns_ = 0;  // steady_ns() when our FIN began to wait
  // What the pass under way may still write: every write of the pass counts, those of the
  // transmits its reads make too. SIZE_MAX outside a pass (a poster's transmit()).
  size_t tx_left_ = SIZE_MAX;
  bool tx_cut_ = false;
  int64_t eof_seen_ns_ = 0;  // steady_ns() when a held FIN was first read
  ConnectionStats stats_;
};

}  // namespace uiw::runtime
