#include "runtime/progress.h"

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <optional>
#include <string>
#include <system_error>

#include "runtime/queue_pair.h"

namespace uiw::runtime {

namespace {

// Edge-triggered: a pass reads until EAGAIN or requeues itself, so every edge is news. A muted
// QP keeps its write and hangup edges.
constexpr uint32_t kWatch = EPOLLIN | EPOLLOUT | EPOLLET | EPOLLRDHUP;
constexpr uint32_t kWatchMuted = EPOLLOUT | EPOLLET | EPOLLRDHUP;

// unlend(false) takes effect this many lend intervals later: long enough for an application
// to post its next request and poll again (tens of us under TCG), short enough for one that
// now spins on memory instead.
constexpr int64_t kLateUnlendIntervals = 5;

// How long may_spin keeps what /proc/loadavg said.
constexpr int64_t kFitKeepNs = 10'000'000;

// The CPUs a cgroup v2 CPU limit (cpu.max "QUOTA PERIOD" of the process's own cgroup) grants,
// rounded up; 0 without a limit or where it cannot be read. A limit leaves the affinity as it
// is, and its throttled threads leave the runnable count (/proc/loadavg) while they wait.
int cgroup_cpu_quota() {
  std::ifstream cgroup("/proc/self/cgroup");
  std::string line;
  while (std::getline(cgroup, line)) {
    if (!line.starts_with("0::")) continue;
    std::ifstream max("/sys/fs/cgroup" + line.substr(3) + "/cpu.max");
    std::string quota;
    long long period = 0;
    if (!(max >> quota >> period) || quota == "max" || period <= 0) return 0;
    char* end;
    const long long q = std::strtoll(quota.c_str(), &end, 10);
    if (*end || q <= 0) return 0;
    return static_cast<int>(std::min<long long>((q + period - 1) / period, CPU_SETSIZE));
  }
  return 0;
}

std::chrono::microseconds env_us(const char* name, std::chrono::microseconds fallback) {
  const char* v = std::getenv(name);
  if (!v || !*v) return fallback;
  char* end;
  const unsigned long us = std::strtoul(v, &end, 10);
  if (*end || us > 1'000'000) return fallback;
  return std::chrono::microseconds(us);
}

bool env_flag(const char* name, bool fallback) {
  const char* v = std::getenv(name);
  if (!v || (v[0] != '0' && v[0] != '1') || v[1]) return fallback;
  return v[0] == '1';
}

}  // namespace

ProgressKnobs ProgressKnobs::from_env() {
  const ProgressKnobs defaults;
  return {env_us("UIW_POLLER_GRACE_US", defaults.poller_grace),
          env_us("UIW_PROGRESS_SPIN_US", defaults.spin),
          env_us("UIW_POLLER_LEND_US", defaults.lend),
          env_flag("UIW_PROGRESS_FOLLOW", defaults.follow),
          env_flag("UIW_PROGRESS_SPIN_ANY_LOAD", defaults.spin_any_load)};
}

Progress::Progress(const ProgressKnobs& knobs)
    : epfd_(epoll_create1(EPOLL_CLOEXEC)),
      doorbell_(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)),
      lease_timer_(timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC)),
      grace_ns_(std::chrono::duration_cast<std::chrono::nanoseconds>(knobs.poller_grace).count()),
      spin_ns_(std::chrono::duration_cast<std::chrono::nanoseconds>(knobs.spin).count()),
      spin_any_load_(knobs.spin_any_load),
      lend_ns_(grace_ns_ > 0
                   ? std::chrono::duration_cast<std::chrono::nanoseconds>(knobs.lend).count()
                   : 0),
      follow_(knobs.follow) {
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = 0;
  if (epfd_ < 0 || doorbell_ < 0 || lease_timer_ < 0 ||
      epoll_ctl(epfd_, EPOLL_CTL_ADD, doorbell_, &ev) != 0) {
    const int err = errno;
    if (lease_timer_ >= 0) close(lease_timer_);
    if (doorbell_ >= 0) close(doorbell_);
    if (epfd_ >= 0) close(epfd_);
    throw std::system_error(err, std::generic_category(), "uiw progress");
  }
  if (spin_ns_ > 0 && !spin_any_load_) loadavg_fd_ = open("/proc/loadavg", O_RDONLY | O_CLOEXEC);
  thread_ = std::thread([this] { run(); });
  // Named for top -H, perf and the tests that watch it (15 characters at most).
  pthread_setname_np(thread_.native_handle(), "uiw-progress");
}

Progress::~Progress() {
  stop_ = true;
  ring();
  thread_.join();
  if (loadavg_fd_ >= 0) close(loadavg_fd_);
  close(lease_timer_);
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
  if (running_ != id || runner_ != std::this_thread::get_id())
    pass_done_.wait(lock, [&] { return running_ != id; });
}

void Progress::kick(QueuePair* q) {
  std::lock_guard lock(mu_);
  if (q->progress_id_ == 0) return;
  queue_locked(q->progress_id_);
  wake_locked();
}

void Progress::unpoll(QueuePair* q) {
  unlend(true);
  app_at_ns_.store(0, std::memory_order_relaxed);  // it will sleep on a completion event
  if (!q->muted()) return;
  std::lock_guard lock(mu_);
  auto it = qps_.find(q->progress_id_);
  if (it == qps_.end() || !q->muted()) return;
  unmute_locked(it->first, q);
  wake_locked();
}

bool Progress::lent_recently(int64_t now) const {
  return lent_at_ns_.load() > now - grace_ns_;
}

// The lease is the time of the last empty poll; the thread parks while it is within the
// grace. Both sides write their flag before they read the other's (seq_cst): the thread
// parked_ then lent_at_ns_, unlend() lent_at_ns_ then parked_, so either the thread sees the
// lease ended or unlend() sees it parked and rings (or arms the lease timer, which the
// parked thread sleeps on too).
bool Progress::lend() {
  if (lend_ns_ == 0) return false;
  const int64_t now = steady_ns();
  if (lent_at_ns_.load(std::memory_order_relaxed) < now) lent_at_ns_.store(now);
  // Back before a late unlend() took effect: the thread stays parked.
  if (lease_timer_armed_.load(std::memory_order_relaxed) && lease_timer_armed_.exchange(false)) {
    const itimerspec off{};
    timerfd_settime(lease_timer_, 0, &off, nullptr);
  }
  const bool look = now - looked_at_ns_.load(std::memory_order_relaxed) >= lend_ns_;
  if (!look && !has_ready_.load(std::memory_order_relaxed)) return false;
  std::unique_lock lock(mu_, std::try_to_lock);
  if (!lock.owns_lock() || dispatching_ || stop_) return false;
  dispatching_ = true;
  epoll_event evs[16];
  int n = 0;
  if (look) {
    looked_at_ns_.store(now, std::memory_order_relaxed);
    lock.unlock();
    n = epoll_wait(epfd_, evs, 16, 0);
    lock.lock();
  }
  const bool moved = dispatch_locked(lock, evs, n, true);
  dispatching_ = false;
  pass_done_.notify_all();  // the thread may wait to dispatch what its own epoll_wait got
  return moved;
}

void Progress::unlend(bool at_once) {
  if (lent_at_ns_.load(std::memory_order_relaxed) == 0) return;
  lent_at_ns_.store(0);
  if (!parked_.load()) return;
  if (at_once) {
    ring();
    return;
  }
  const int64_t delay = kLateUnlendIntervals * lend_ns_;
  lease_timer_armed_.store(true, std::memory_order_relaxed);
  const itimerspec later{{0, 0}, {delay / 1'000'000'000, delay % 1'000'000'000}};
  timerfd_settime(lease_timer_, 0, &later, nullptr);
}

void Progress::note_app_cpu() {
  if (!follow_) return;
  const int cpu = sched_getcpu();
  if (cpu != app_cpu_.load(std::memory_order_relaxed))
    app_cpu_.store(cpu, std::memory_order_relaxed);
  app_at_ns_.store(steady_ns(), std::memory_order_relaxed);
}

// The thread sets its own affinity; the set it started with (the application's) is its home.
// If binding fails (a cpuset changed under the process) it goes home and stops following.
void Progress::follow_app() {
  if (!following_) return;
  int cpu = app_at_ns_.load(std::memory_order_relaxed) > steady_ns() - grace_ns_
                ? app_cpu_.load(std::memory_order_relaxed)
                : -1;
  if (cpu >= CPU_SETSIZE) cpu = -1;  // beyond what a cpu_set_t names: stay home
  if (cpu == on_cpu_) return;
  cpu_set_t set = home_;
  if (cpu >= 0) {
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
  }
  if (pthread_setaffinity_np(pthread_self(), sizeof set, &set) == 0) {
    on_cpu_ = cpu;
    return;
  }
  following_ = false;
  if (on_cpu_ >= 0) pthread_setaffinity_np(pthread_self(), sizeof home_, &home_);
}

void Progress::park(std::unique_lock<std::mutex>& lock) {
  sleeping_ = true;  // kick() and add() ring the doorbell
  parked_.store(true);
  const int64_t left = lent_at_ns_.load() - (steady_ns() - grace_ns_);
  lock.unlock();
  follow_app();
  if (left > 0) {
    pollfd fds[2] = {{doorbell_, POLLIN, 0}, {lease_timer_, POLLIN, 0}};
    const timespec ts{left / 1'000'000'000, left % 1'000'000'000};
    if (ppoll(fds, 2, &ts, nullptr) > 0) {
      uint64_t v;
      if (fds[0].revents) [[maybe_unused]]
        ssize_t r = read(doorbell_, &v, sizeof v);
      if (fds[1].revents) {
        lease_timer_armed_.store(false, std::memory_order_relaxed);
        [[maybe_unused]] ssize_t r = read(lease_timer_, &v, sizeof v);
      }
    }
  }
  parked_.store(false);
  lock.lock();
  sleeping_ = false;
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

// No edge announces that the application polled the CQs empty, so a held FIN is looked at
// again on a timer (and by the poller's own empty polls: QueuePair::drive).
void Progress::check_held_locked() {
  const int64_t now = steady_ns();
  if (now - held_at_ns_ < std::max<int64_t>(grace_ns_, 1'000'000)) return;
  for (uint64_t id : held_) queue_locked(id);
  held_.clear();
}

void Progress::queue_locked(uint64_t id) {
  auto it = qps_.find(id);
  if (it == qps_.end() || it->second.queued) return;
  it->second.queued = true;
  ready_.push_back(id);
  has_ready_.store(true, std::memory_order_relaxed);
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

bool runnable_fit(std::string_view loadavg, int cpus) {
  // "0.52 0.58 0.59 3/467 12345": the fourth field counts the runnable threads now.
  size_t at = 0;
  for (int field = 0; field < 3; ++field) {
    at = loadavg.find(' ', at);
    if (at == std::string_view::npos) return false;
    ++at;
  }
  long runnable = 0;
  size_t digits = 0;
  for (; at < loadavg.size() && loadavg[at] >= '0' && loadavg[at] <= '9'; ++at, ++digits) {
    if (runnable > 1'000'000) return false;
    runnable = runnable * 10 + (loadavg[at] - '0');
  }
  if (digits == 0 || at == loadavg.size() || loadavg[at] != '/') return false;
  return runnable <= cpus;
}

bool Progress::may_spin(int64_t now, std::unique_lock<std::mutex>& lock) {
  // Bound to the CPU its application last ran on (follow): a spin there keeps that
  // application, which may wait on memory for the bytes this thread places, off its CPU.
  if (on_cpu_ >= 0) return false;
  if (spin_any_load_) return true;
  if (loadavg_fd_ < 0 || cpus_ <= 0) return false;
  // A ping-pong asks after every message: the answer is kept for a while, so that a thread
  // that does not spin sleeps again without a system call more (a preempted application
  // waits for this thread to leave its CPU).
  if (now - fit_at_ns_ < kFitKeepNs) return fit_;
  fit_at_ns_ = now;
  // pread at offset 0 makes the seq_file print the counts afresh. Not under mu_: kick() and
  // a lender would wait for the system call.
  char text[128];
  lock.unlock();
  const ssize_t n = pread(loadavg_fd_, text, sizeof text, 0);
  lock.lock();
  fit_ = n > 0 && runnable_fit({text, static_cast<size_t>(n)}, cpus_);
  return fit_;
}

void Progress::run() {
  const bool homed = pthread_getaffinity_np(pthread_self(), sizeof home_, &home_) == 0;
  following_ = follow_ && homed;
  cpus_ = homed ? CPU_COUNT(&home_) : 0;
  if (const int quota = cgroup_cpu_quota(); quota > 0) cpus_ = std::min(cpus_, quota);
  epoll_event evs[64];
  std::unique_lock lock(mu_);
  const int grace_ms = static_cast<int>((grace_ns_ + 999'999) / 1'000'000);
  int64_t spin_until = INT64_MIN;  // the end of the current spin
  int64_t moved_at = INT64_MIN;    // steady_ns() at the end of the last pass that moved bytes
  // The last gaps from the end of one such pass to the wakeup of the next (INT64_MAX: none yet)
  int64_t gaps[4] = {INT64_MAX, INT64_MAX, INT64_MAX, INT64_MAX};
  size_t gap_at = 0;
  bool unparked = false;
  while (!stop_) {
    // A poller does the work (lend()): no epoll_wait here, which would wake for its events.
    if (ready_.empty() && lend_ns_ > 0 && lent_recently(steady_ns())) {
      park(lock);
      unparked = true;
      continue;
    }
    // Within the spin after the last traffic it looks again at once, and is not asleep for
    // kick(): whoever queues work needs no doorbell. So after a lease: the poller handed back
    // the QPs it awaits nothing from (QueuePair::handback), which the look unmutes.
    sleeping_ = !unparked && ready_.empty() && (spin_ns_ == 0 || steady_ns() >= spin_until);
    unparked = false;
    // Asleep with muted or held QPs, it still looks at them once per grace period.
    const int timeout = !sleeping_                        ? 0
                        : muted_.empty() && held_.empty() ? -1
                                                          : std::max(grace_ms, 1);
    unbounded_ = timeout < 0;
    lock.unlock();
    if (timeout != 0) follow_app();
    const int n = epoll_wait(epfd_, evs, 64, timeout);
    const int64_t woke = spin_ns_ > 0 ? steady_ns() : 0;
    lock.lock();
    sleeping_ = false;
    unbounded_ = false;
    pass_done_.wait(lock, [&] { return !dispatching_; });  // a lender's passes
    dispatching_ = true;
    const bool moved = dispatch_locked(lock, evs, n, false);
    dispatching_ = false;
    if (moved && spin_ns_ > 0) {
      // The next message is expected within the longest of the last gaps after this pass:
      // the thread looks for twice that, and not at all when messages come further apart
      // than the spin (an idle connection costs no CPU).
      const int64_t now = steady_ns();
      if (moved_at != INT64_MIN) gaps[gap_at++ % std::size(gaps)] = woke - moved_at;
      moved_at = now;
      const int64_t gap = *std::max_element(std::begin(gaps), std::end(gaps));
      const int64_t look = gap <= spin_ns_ ? std::min(spin_ns_, 2 * gap) : 0;
      spin_until = look > 0 && may_spin(now, lock) ? now + look : INT64_MIN;
    }
  }
}

bool Progress::dispatch_locked(std::unique_lock<std::mutex>& lock, const epoll_event* evs, int n,
                               bool lender) {
  const int64_t since = grace_start();
  for (int i = 0; i < n; ++i) {
    const uint64_t id = evs[i].data.u64;
    if (id == 0) {
      // The doorbell is the thread's: a ring for a parked thread must reach it.
      uint64_t v;
      if (!lender) [[maybe_unused]]
        ssize_t r = read(doorbell_, &v, sizeof v);
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
  if (!held_.empty()) check_held_locked();
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
    runner_ = std::this_thread::get_id();
    lock.unlock();
    const std::optional<QueuePair::PassResult> r = q->run_pass(muted, !lender);
    lock.lock();
    running_ = 0;
    pass_done_.notify_all();
    it = qps_.find(id);
    if (it == qps_.end()) continue;  // removed during its pass (from its own callback)
    if (!r) {
      queue_locked(id);  // another thread holds it (a lender does not wait): later
      continue;
    }
    moved |= r->moved;
    if (!r->rx_open) it->second.hup = false;
    if (r->held && std::find(held_.begin(), held_.end(), id) == held_.end()) {
      if (held_.empty()) held_at_ns_ = steady_ns();
      held_.push_back(id);
    }
    // A FIN still unread after a pass that moved bytes: the pass ended on the short read
    // of the data that came with it. (One that moved nothing waits for a kick: the Qp is
    // not reading.)
    if (r->cut_short || (r->moved && it->second.hup)) queue_locked(id);
  }
  has_ready_.store(!ready_.empty(), std::memory_order_relaxed);
  // A lender took the edges it dispatched from the thread's epoll_wait, so what it leaves
  // behind (a pass cut short, which over SCTP is every pass that read a message; a QP another
  // thread held; a QP muted or held that must be looked at again) has no edge left to end an
  // epoll_wait without a timeout, and its poller may now sleep on a completion event: ring a
  // thread asleep so. Parked, or asleep with a timeout, it looks again soon anyway.
  if (lender && unbounded_ && !(ready_.empty() && muted_.empty() && held_.empty())) wake_locked();
  return moved;
}

}  // namespace uiw::runtime
