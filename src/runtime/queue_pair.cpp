#include "runtime/queue_pair.h"

#include <cerrno>

#include "runtime/progress.h"

namespace uiw::runtime {

QueuePair::QueuePair(const engine::QpConfig& config) : qp_(config) {}

QueuePair::~QueuePair() {
  leave_progress();
}

int QueuePair::attach(std::unique_ptr<transport::ByteStream> s, const engine::ConnParams& params,
                      Progress* progress) {
  {
    // After a batch in flight (post_send_all): it is posted whole before the QP starts.
    std::lock_guard post(post_mu_);
    std::lock_guard lock(mu_);
    if (qp_.state() != engine::QpState::Idle || conn_) return -ECANCELED;
    const int fd = s->fd();
    conn_ = std::make_unique<Connection>(&qp_, std::move(s));
    qp_.start(params);
    fd_ = fd;
    progress_ = progress;
    link_.store(Link::Up, std::memory_order_release);
  }
  if (!progress) return 0;
  return progress->add(this);
}

// Posting takes mu_ only when the engine says so (a state change, rare): a pass holds mu_
// across its socket reads and writes, and a poster must not wait for those.
int QueuePair::post_send(const engine::SendWr& wr) {
  std::lock_guard post(post_mu_);
  return post_send_posting(wr);
}

int QueuePair::post_send_posting(const engine::SendWr& wr) {
  const int rc = qp_.post_send_concurrent(wr);
  if (rc != -EAGAIN && rc != -ECANCELED) return rc;
  std::lock_guard lock(mu_);
  if (rc == -EAGAIN) return qp_.post_send(wr);
  qp_.flush_late();
  return 0;
}

int QueuePair::post_recv(const engine::RecvWr& wr) {
  const int rc = qp_.post_recv_concurrent(wr);
  if (rc != -EAGAIN && rc != -ECANCELED) return rc;
  std::lock_guard lock(mu_);
  if (rc == -EAGAIN) return qp_.post_recv(wr);
  qp_.flush_late();
  return 0;
}

bool QueuePair::progress() {
  std::lock_guard lock(mu_);
  return conn_ && conn_->progress();
}

std::optional<QueuePair::PassResult> QueuePair::run_pass(bool muted, bool wait) {
  std::unique_lock lock(mu_, std::try_to_lock);
  if (!lock.owns_lock()) {
    if (!wait) return std::nullopt;
    // The holder (a poster, a poller sending) reads for this pass between its writes
    // (Connection::transmit): a std::mutex does not queue its waiters, and a thread that
    // posts many sends takes it again after each one. A muted QP's reading is its poller's.
    if (!muted) reader_waiting_.store(true, std::memory_order_relaxed);
    lock.lock();
    reader_waiting_.store(false, std::memory_order_relaxed);
  }
  if (!conn_) return PassResult{};
  // A muted QP's FIN is its poller's to read, but one the poller holds (Connection::eof_held)
  // stays this thread's to look at again: the poller may leave without a new edge to come.
  if (muted) {
    const bool moved = conn_->transmit_pass();
    return PassResult{moved, conn_->tx_cut(), !conn_->rx_closed(),
                      conn_->eof_held() || conn_->fin_held()};
  }
  const bool moved = conn_->progress();
  return PassResult{moved, conn_->cut_short(), !conn_->rx_closed(),
                    conn_->eof_held() || conn_->fin_held()};
}

bool QueuePair::drive(bool posted, const engine::CompletionQueue* polled) {
  if (link() != Link::Up) return false;
  // A poll of a CQ that no byte from the peer can complete into (a send CQ whose WRs all
  // completed: a Send or Write completes once the socket took it) only sends what is left, and
  // does not count as a poller waiting for the peer: a read there costs a system call between
  // the application's receive and its next post, and finds nothing the application waits for.
  // A closing QP sends its FIN once its queue drained, then awaits the peer's (graceful close,
  // RFC 5041 §6.2.1).
  bool for_inbound =
      !polled || qp_.awaits_inbound_into(*polled) || qp_.state() == engine::QpState::Closing;
  bool tx_only = false;
  if (!posted) {
    if (for_inbound) polled_at_ns_.store(steady_ns(), std::memory_order_relaxed);
    tx_only = !for_inbound || (progress_ && !muted());
  } else if (progress_) {
    progress_->note_app_cpu();
  }
  std::unique_lock lock(mu_, std::try_to_lock);
  if (!lock.owns_lock()) {
    // What was just posted is then not left waiting for a readiness edge.
    if (posted && progress_) progress_->kick(this);
    return false;
  }
  if (!conn_) return false;
  // A Send whose first segments arrived holds a receive no longer in the queue: its poller
  // waits for the rest.
  if (!for_inbound && qp_.rx_message_open_into(*polled)) {
    for_inbound = true;
    polled_at_ns_.store(steady_ns(), std::memory_order_relaxed);
    tx_only = progress_ && !muted();
  }
  // A QP Progress reads for: the poller only sends what is left to send (it has the CPU now,
  // Progress would first need a wakeup), and with nothing left makes no system call. Unless a
  // pass holds the peer's FIN until the CQs are empty (Connection::kEofHoldNs): an empty poll
  // is the moment they may be, and this poller the one that waits for the flushes. Without a
  // Progress thread the poller reads as well while the socket refuses what is left: the peer
  // may be waiting for this side's reads before it reads on.
  // Our FIN held for the peer's ACK (Connection::kFinAckWaitNs) is looked at again by the
  // Progress thread (PassResult::held), handed over once this poll began to hold it; without
  // that thread, by the pollers.
  const bool fin_was_held = conn_->fin_held();
  if (tx_only && !conn_->eof_held()) {
    const bool moved =
        (!qp_.tx_idle() || (!progress_ && fin_was_held)) && conn_->transmit(&reader_waiting_);
    if (!fin_was_held && conn_->fin_held() && progress_) {
      lock.unlock();
      progress_->kick(this);
      return moved;
    }
    if (progress_ || qp_.tx_idle()) return moved;
  }
  // The socket refused the last write: the write that refused raised SOCK_NOSPACE, so the
  // kernel will report the space (EPOLLOUT) and Progress sends then; a write now can only say
  // EAGAIN again.
  if (posted && progress_ && conn_->wants_write()) return false;
  if (posted) return conn_->transmit(&reader_waiting_);
  const bool was_held = conn_->eof_held();
  const bool moved = conn_->progress();
  // A FIN this poll began to hold is handed to the Progress thread's timer too: the poller may
  // arm its CQ and sleep before the FIN may be read, and no edge need come for it again (an
  // SCTP socket tells an association's end once, in the notification this pass consumed).
  // So is the rest of a send queue this pass left on its write budget: no edge announces it
  // either, and this poller may not come back.
  if (((!was_held && conn_->eof_held()) || (!fin_was_held && conn_->fin_held()) ||
       conn_->tx_cut()) &&
      progress_) {
    lock.unlock();
    progress_->kick(this);
  }
  return moved;
}

void QueuePair::unpoll() {
  polled_at_ns_.store(INT64_MIN, std::memory_order_relaxed);
  // Also when not muted: the poller's lease of the context ends (Progress::unlend).
  // Not under mu_ (a pass holds it across socket I/O): progress_ is set before link_ goes Up.
  if (link() != Link::Waiting && progress_) progress_->unpoll(this);
}

void QueuePair::close() {
  Progress* p;
  {
    // After a batch in flight (post_send_all): Closing refuses new WRs, and a batch must not
    // be cut in two by it.
    std::lock_guard post(post_mu_);
    std::lock_guard lock(mu_);
    qp_.close();
    p = progress_;
  }
  if (p) p->kick(this);
}

void QueuePair::abort() {
  leave_progress();  // not under mu_: the Progress thread's pass of this QP takes it
  std::lock_guard lock(mu_);
  link_.store(Link::Down, std::memory_order_release);
  if (conn_)
    conn_->abort();  // flushes every WR with WrFlushErr, resets the stream
  else
    qp_.abort();
}

engine::QpState QueuePair::state() {
  return qp_.state();  // atomic in the engine: no need to wait for a pass
}

bool QueuePair::wants_write() {
  std::lock_guard lock(mu_);
  return conn_ && conn_->wants_write();
}

bool QueuePair::finished() {
  std::lock_guard lock(mu_);
  return conn_ && conn_->finished();
}

void QueuePair::leave_progress() {
  Progress* p;
  {
    std::lock_guard lock(mu_);
    p = progress_;
  }
  if (p) p->remove(this);
}

}  // namespace uiw::runtime
