#include "runtime/progress.h"

#include <pthread.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <system_error>

#include "runtime/queue_pair.h"

namespace uiw::runtime {

namespace {

// Edge-triggered: a pass reads until EAGAIN or requeues itself, so every edge is news. A muted
// QP keeps its write and hangup edges.
constexpr uint32_t kWatch = EPOLLIN | EPOLLOUT | EPOLLET | EPOLLRDHUP;
constexpr uint32_t kWatchMuted = EPOLLOUT | EPOLLET | EPOLLRDHUP;

std::chrono::microseconds env_us(const char* name, std::chrono::microseconds fallback) {
  const char* v = std::getenv(name);
  if (!v || !*v) return fallback;
  char* end;
  const unsigned long us = std::strtoul(v, &end, 10);
  if (*end || us > 1'000'000) return fallback;
  return std::chrono::microseconds(us);
}

}  // namespace

ProgressKnobs ProgressKnobs::from_env() {
  const ProgressKnobs defaults;
  return {env_us("UIW_POLLER_GRACE_US", defaults.poller_grace),
          env_us("UIW_PROGRESS_SPIN_US", defaults.spin)};
}

Progress::Progress(const ProgressKnobs& knobs)
    : epfd_(epoll_create1(EPOLL_CLOEXEC)),
      doorbell_(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)),
      grace_ns_(std::chrono::duration_cast<std::chrono::nanoseconds>(knobs.poller_grace).count()),
      spin_ns_(std::chrono::duration_cast<std::chrono::nanoseconds>(knobs.spin).count()) {
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = 0;
  if (epfd_ < 0 || doorbell_ < 0 || epoll_ctl(epfd_, EPOLL_CTL_ADD, doorbell_, &ev) != 0) {
    const int err = errno;
    if (doorbell_ >= 0) close(doorbell_);
    if (epfd_ >= 0) close(epfd_);
    throw std::system_error(err, std::generic_category(), "uiw progress");
  }
  thread_ = std::thread([this] { run(); });
  // Named for top -H, perf and the tests that watch it (15 characters at most).
  pthread_setname_np(thread_.native_handle(), "uiw-progress");
}

Progress::~Progress() {
  stop_ = true;
  ring();
  thread_.join();
  close(doorbell_);
  close(epfd_);
}

int Progress::add(QueuePair* q) {
  std::lock_guard lock(mu_);
  const uint64_t id = next_id_++;
  if (q->fd() >= 0) {
    epoll_event ev{};
    ev.events = kWatch;
    ev.data.u64 = id;
    if (epoll_ctl(epfd_, EPOLL_CTL_ADD, q->fd(), &ev) != 0) return -errno;
  }
  qps_.emplace(id, Entry{q, false, false});
  q->progress_id_ = id;
  queue_locked(id);  // what was posted before the connection came up goes out now
  wake_locked();
  return 0;
}

void Progress::remove(QueuePair* q) {
  std::unique_lock lock(mu_);
  const uint64_t id = q->progress_id_;
  if (id == 0) return;
  if (q->fd() >= 0) epoll_ctl(epfd_, EPOLL_CTL_DEL, q->fd(), nullptr);
  qps_.erase(id);
  q->progress_id_ = 0;
  // From a callback of q's own pass (the engine's event hook) the pass is ours: no wait.
  if (std::this_thread::get_id() != thread_.get_id())
    pass_done_.wait(lock, [&] { return running_ != id; });
}

void Progress::kick(QueuePair* q) {
  std::lock_guard lock(mu_);
  if (q->progress_id_ == 0) return;
  queue_locked(q->progress_id_);
  wake_locked();
}

void Progress::unpoll(QueuePair* q) {
  std::lock_guard lock(mu_);
  auto it = qps_.find(q->progress_id_);
  if (it == qps_.end() || !q->muted()) return;
  unmute_locked(it->first, q);
  wake_locked();
}

// The MOD reports the socket's writability at once (see unmute_locked): the transmit pass a
// muted QP still gets.
bool Progress::mute_locked(uint64_t id, QueuePair* q) {
  epoll_event ev{};
  ev.events = kWatchMuted;
  ev.data.u64 = id;
  if (epoll_ctl(epfd_, EPOLL_CTL_MOD, q->fd(), &ev) != 0) return false;  // still watched
  q->muted_.store(true, std::memory_order_relaxed);
  muted_.push_back(id);
  return true;
}

// EPOLL_CTL_MOD reports what is readable already (ep_modify polls the file and queues the
// event), so nothing that arrived while muted waits for another edge, and the event is judged
// like any other when it comes: a poller back meanwhile mutes the QP again instead of meeting
// a pass that was queued before it polled. Only a failed call queues the pass here.
void Progress::unmute_locked(uint64_t id, QueuePair* q) {
  epoll_event ev{};
  ev.events = kWatch;
  ev.data.u64 = id;
  q->muted_.store(false, std::memory_order_relaxed);
  if (epoll_ctl(epfd_, EPOLL_CTL_MOD, q->fd(), &ev) != 0) queue_locked(id);
}

// The start of the grace window: an application that polled after it is still polling. With
// no grace, nobody is.
int64_t Progress::grace_start() const {
  return grace_ns_ > 0 ? steady_ns() - grace_ns_ : INT64_MAX;
}

// A QP polled within the grace that awaits a completion is its poller's: muted, the thread
// leaves the reading to it (any pass for it would read what the poller waits for).
bool Progress::mute_if_polled_locked(uint64_t id, QueuePair* q, int64_t since) {
  return q->mutable_now(since) && mute_locked(id, q);
}

void Progress::check_muted_locked() {
  const int64_t since = grace_start();
  std::erase_if(muted_, [&](uint64_t id) {
    auto it = qps_.find(id);
    if (it == qps_.end() || !it->second.qp->muted()) return true;  // removed, or unmuted already
    if (it->second.qp->mutable_now(since)) return false;
    unmute_locked(id, it->second.qp);
    return true;
  });
}

void Progress::queue_locked(uint64_t id) {
  auto it = qps_.find(id);
  if (it == qps_.end() || it->second.queued) return;
  it->second.queued = true;
  ready_.push_back(id);
}

void Progress::wake_locked() {
  if (!sleeping_) return;  // it looks at ready_ before it sleeps again
  sleeping_ = false;
  ring();
}

void Progress::ring() {
  const uint64_t one = 1;
  [[maybe_unused]] ssize_t n = write(doorbell_, &one, sizeof one);
}

void Progress::run() {
  epoll_event evs[64];
  std::unique_lock lock(mu_);
  const int grace_ms = static_cast<int>((grace_ns_ + 999'999) / 1'000'000);
  int64_t spin_until = INT64_MIN;  // steady_ns() after the last pass that moved bytes, + spin
  while (!stop_) {
    // Within the spin after the last traffic it looks again at once, and is not asleep for
    // kick(): whoever queues work needs no doorbell.
    sleeping_ = ready_.empty() && (spin_ns_ == 0 || steady_ns() >= spin_until);
    // Asleep with muted QPs, it still looks at them once per grace period.
    const int timeout = !sleeping_ ? 0 : muted_.empty() ? -1 : grace_ms;
    lock.unlock();
    const int n = epoll_wait(epfd_, evs, 64, timeout);
    lock.lock();
    sleeping_ = false;
    const int64_t since = grace_start();
    for (int i = 0; i < n; ++i) {
      const uint64_t id = evs[i].data.u64;
      if (id == 0) {
        uint64_t v;
        [[maybe_unused]] ssize_t r = read(doorbell_, &v, sizeof v);
        continue;
      }
      auto it = qps_.find(id);
      if (it == qps_.end()) continue;
      Entry& e = it->second;
      if (e.qp->muted()) {
        // A write edge: a transmit pass. The poller reads, the peer's FIN or reset too: it
        // meets them after the bytes that came before them, whose completions its own poll
        // returns first (a pass here would flush the receives behind them at once). If the
        // poller goes, the unmute's EPOLL_CTL_MOD reports the hang-up again.
        queue_locked(id);
        continue;
      }
      if (evs[i].events & (EPOLLRDHUP | EPOLLHUP | EPOLLERR)) e.hup = true;
      // A read, write or hang-up edge alike: the poller reads, the MOD's event transmits.
      if (mute_if_polled_locked(id, e.qp, since)) continue;
      queue_locked(id);
    }
    if (!muted_.empty()) check_muted_locked();
    // One pass for each QP ready now; those with more to read queue up again behind the rest.
    bool moved = false;
    for (size_t k = ready_.size(); k > 0 && !stop_; --k) {
      const uint64_t id = ready_.front();
      ready_.pop_front();
      auto it = qps_.find(id);
      if (it == qps_.end()) continue;  // removed since it was queued
      it->second.queued = false;
      QueuePair* q = it->second.qp;
      // Read under mu_, which every change of it holds. A pass queued before an application
      // began polling the QP (a kick, a pass cut short) is muted like an edge would be.
      const bool muted = q->muted() || mute_if_polled_locked(id, q, grace_start());
      running_ = id;
      lock.unlock();
      const QueuePair::PassResult r = muted ? q->transmit_pass() : q->pass();
      lock.lock();
      running_ = 0;
      moved |= r.moved;
      pass_done_.notify_all();
      it = qps_.find(id);
      if (it == qps_.end()) continue;  // removed during its pass (from its own callback)
      if (!r.rx_open) it->second.hup = false;
      // A FIN still unread after a pass that moved bytes: the pass ended on the short read
      // of the data that came with it. (One that moved nothing waits for a kick: the Qp is
      // not reading.)
      if (r.cut_short || (r.moved && it->second.hup)) queue_locked(id);
    }
    if (moved && spin_ns_ > 0) spin_until = steady_ns() + spin_ns_;
  }
}

}  // namespace uiw::runtime
