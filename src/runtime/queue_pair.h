// QueuePair: one RC queue pair at run time: the engine Qp and, once connection setup handed
// over a stream, the Connection that moves its bytes, behind one mutex. The provider, the host
// endpoint of the integration tests and benchmarks, and Progress all drive QPs through this
// class, so the code the tests exercise is the code the provider ships.
//
// Thread safety: every method may be called from any thread. One mutex serialises the engine
// and its connection; a pass holds it across socket I/O. Posting does not take it (the engine's
// lock-free posts; posters queue behind each other only), except around a state change. A
// thread that only wants bytes to move (a busy poller, a poster after posting) uses drive(): it
// never waits for a pass another thread is running.
#pragma once

#include <atomic>
#include <cerrno>
#include <climits>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>

#include "engine/qp.h"
#include "runtime/connection.h"
#include "runtime/progress.h"
#include "transport/byte_stream.h"

namespace uiw::runtime {

// Where a QP's connection is. Waiting: no stream yet (sends queue up in the engine); Up: the
// engine runs on its stream; Down: aborted, nothing moves any more.
enum class Link : uint8_t { Waiting, Up, Down };

class QueuePair {
 public:
  explicit QueuePair(const engine::QpConfig& config);  // may throw std::bad_alloc
  ~QueuePair();                                        // leaves its Progress first
  QueuePair(const QueuePair&) = delete;
  QueuePair& operator=(const QueuePair&) = delete;

  // Connection setup is done: start the engine with what it negotiated and move its bytes over
  // s from now on, driven by progress (optional: without one the caller's progress() calls are
  // all there is). 0, or -ECANCELED (s closed) when the QP left Idle meanwhile (aborted).
  // May throw std::bad_alloc.
  int attach(std::unique_ptr<transport::ByteStream> s, const engine::ConnParams& params,
             Progress* progress /* Unowned, must outlive this QueuePair */);

  // The engine's post_send / post_recv (0 or -errno), without waiting for a pass. The bytes
  // move on the next pass.
  int post_send(const engine::SendWr& wr);
  int post_recv(const engine::RecvWr& wr);
  // n send WRs as one post (wr(i) is the i-th, 0 <= i < n), also without waiting for a pass:
  // none (-ENOMEM) when the send queue lacks room for them all. Only posters fill the send
  // queue, one at a time under post_mu_, so the room seen first can only grow meanwhile, and
  // close() and attach() take post_mu_ too, so the QP cannot begin to close or start between
  // two of them. A QP in Error takes them all and flushes them. A WR the engine refuses
  // (engine::Qp::send_refusal, checked for every WR first) refuses the post whole.
  template <typename F>
  int post_send_all(size_t n, F&& wr) {
    std::lock_guard post(post_mu_);
    if (qp_.state() != engine::QpState::Error && qp_.sq_free() < n) return -ENOMEM;
    for (size_t i = 0; i < n; ++i)
      if (const int rc = qp_.send_refusal(wr(i))) return rc;
    for (size_t i = 0; i < n; ++i)
      if (const int rc = post_send_posting(wr(i))) return rc;
    return 0;
  }
  // Calls f(engine::Qp&) under the mutex, and after posters: a look at engine state. It waits
  // for a pass in flight, so posts do not go through it (post_send, post_send_all).
  template <typename F>
  auto with_engine(F&& f) {
    std::lock_guard post(post_mu_);
    std::lock_guard lock(mu_);
    return f(qp_);
  }

  // One pass (Connection::progress): true if bytes moved. Waits for a pass another thread runs.
  bool progress();
  // Progress's pass: what it moved, whether it was cut short (Connection::cut_short), and
  // whether the receive side is still open. Of a muted QP (its poller reads), the transmit
  // half only. Without wait (a lender's pass, Progress::lend), nullopt if another thread holds
  // the QP.
  struct PassResult {
    bool moved = false, cut_short = false, rx_open = false;
    // A FIN held back, the peer's (Connection::eof_held) or ours (Connection::fin_held): a
    // later pass must look again.
    bool held = false;
  };
  std::optional<PassResult> run_pass(bool muted, bool wait);
  // A pass in this thread unless another thread holds the QP: then that thread's pass moves
  // the bytes. After posting (posted), only the transmit half runs here (the send goes out in
  // the poster's sendmsg), and if another thread holds the QP it may be past its transmit
  // step, so the Progress thread's doorbell is rung for one more pass; a poller needs none
  // (what arrives raises a readiness edge of its own). A poller's pass (!posted) of a QP with
  // a Progress thread reads only once Progress muted the QP for it: until then that thread
  // reads for it, and the poller only sends what the QP has left to send (a Write or Send
  // completes when the socket took it, so a poller waiting for those has nothing to read; an
  // empty poll of a QP with nothing to send makes no system call). polled: the CQ an empty
  // poll looked at (nullptr: any of the QP's); a poll of a CQ that awaits nothing from the
  // peer (engine::Qp::awaits_inbound_into) only sends, Progress or not, and marks nothing.
  // True if bytes moved here.
  bool drive(bool posted, const engine::CompletionQueue* polled = nullptr);
  // A poller's drive(false) marks the time (steady clock, ns). Progress mutes a QP polled
  // within its grace that awaits a completion only the peer's bytes bring (engine::Qp::
  // awaits_inbound: the poller waits for it and reads those bytes). unpoll(): the poller is
  // leaving (it will sleep on a completion event). handback(): after a poll that found
  // completions; a muted QP that awaits no more goes back to Progress (its application may now
  // spin on memory for a Write, polling nothing): at once, or while the Progress thread is
  // parked on its poller's lease, when the lease ends (Progress::unlend), unless the poller
  // awaits the peer again by then.
  bool polled_since(int64_t ns) const {
    return polled_at_ns_.load(std::memory_order_relaxed) >= ns;
  }
  bool mutable_now(int64_t ns) const { return polled_since(ns) && qp_.awaits_inbound(); }
  void unpoll();
  void handback() {
    if (muted() && !qp_.awaits_inbound() && !(progress_ && progress_->parked())) unpoll();
  }
  // Progress does not wake for its readability (runtime/progress.h).
  bool muted() const { return muted_.load(std::memory_order_relaxed); }
  // Progress's pass waits for the thread that holds this QP, which reads for it meanwhile.
  bool reader_waiting() const { return reader_waiting_.load(std::memory_order_relaxed); }
  // The Progress an empty poll lends its time to (Progress::lend), once attached.
  Progress* lender_target() const { return link() == Link::Up ? progress_ : nullptr; }
  bool awaits_inbound() const { return qp_.awaits_inbound(); }
  bool awaits_inbound_into(const engine::CompletionQueue& cq) const {
    return qp_.awaits_inbound_into(cq);
  }

  void close();  // graceful: finish the queued sends, then FIN (the next passes do it)
  void abort();  // flush every WR; the stream is reset. Leaves Progress first.
  engine::QpState state();
  Link link() const { return link_.load(std::memory_order_acquire); }
  int fd() const { return fd_; }  // the stream's descriptor once attached, else -1
  bool wants_write();             // the socket did not take all the engine had
  bool finished();                // both directions closed: nothing more will move

  // Leave the Progress thread (on return it no longer touches this QP): before the QP's
  // owner stops looking, so no completion reaches a CQ after the QP was destroyed.
  void leave_progress();

  // The engine without the mutex: only where no other thread can drive this QP.
  engine::Qp& engine_unlocked() { return qp_; }

 private:
  friend class Progress;

  int post_send_posting(const engine::SendWr& wr);  // post_send, post_mu_ held

  std::mutex post_mu_;  // one poster at a time (taken before mu_, never held across I/O)
  std::mutex mu_;
  engine::Qp qp_;
  std::unique_ptr<Connection> conn_;  // under mu_; set once by attach
  std::atomic<Link> link_{Link::Waiting};
  int fd_ = -1;
  Progress* progress_ = nullptr;  // Unowned; set by attach
  uint64_t progress_id_ = 0;      // Progress's key for this QP (0: not added)
  std::atomic<int64_t> polled_at_ns_{INT64_MIN};
  std::atomic<bool> muted_{false};  // written by Progress under its mutex
  // Progress waits for mu_ to read (run_pass): whoever holds it reads once for it.
  std::atomic<bool> reader_waiting_{false};
};

// An application's poll of cq, as ibv_poll_cq runs it over the QueuePairs that complete into
// it. take() takes what the CQ holds (at most what the caller asked for) and returns how many;
// each_qp(f) calls f(QueuePair&) for every QP of the CQ (under whatever keeps that set stable).
// Found nothing: one pass over the QPs in this thread (drive(false, &cq): it marks those that
// await a completion into cq from the peer's bytes polled, so Progress leaves their reading to
// this poller, and reads those Progress left to it; the others only send), and a second look
// if bytes moved. If a QP of the CQ awaits such a completion, the poller will poll until the
// peer's bytes come: it also does Progress's work for the other QPs of the context meanwhile
// (Progress::lend). A poller that reaps only its Send and Write completions reads and lends
// nothing: it may stop at any moment and spin on memory. Found something: each QP that awaits
// nothing more goes back to Progress (handback), and once no QP of the CQ awaits a completion from
// the peer the lease ends (Progress::unlend). One rule for the provider and the host endpoint.
template <typename Take, typename EachQp>
size_t poll_driving(const engine::CompletionQueue& cq, Take&& take, EachQp&& each_qp) {
  size_t n = take();
  Progress* progress = nullptr;  // the context's: it outlives every QP of the CQ
  bool awaits = false;           // a QP of the CQ awaits a completion only the peer brings
  if (n == 0) {
    bool moved = false;
    each_qp([&](QueuePair& q) {
      moved |= q.drive(false, &cq);
      awaits |= q.awaits_inbound_into(cq);
      if (!progress) progress = q.lender_target();
    });
    // After the walk: a lender's pass may complete into this CQ, or end a QP of it.
    if (!moved && awaits && progress) moved = progress->lend();
    if (moved) n = take();
  }
  if (n > 0) {
    awaits = false;
    each_qp([&](QueuePair& q) {
      q.handback();
      awaits |= q.awaits_inbound();
      if (!progress) progress = q.lender_target();
    });
    if (progress) {
      progress->note_app_cpu();
      if (!awaits) progress->unlend(false);
    }
  }
  return n;
}

}  // namespace uiw::runtime
