// Progress: one thread per device context that moves the bytes of its QueuePairs, so RDMA
// Reads are answered and one-sided Writes placed with no help from the application. It is
// driven by readiness: a pass touches only the QueuePairs whose socket epoll reported
// (edge-triggered) or that were kicked after posting, each for one bounded pass
// (Connection::progress) in turn. A pass that drained its socket is not run again until an
// edge or a kick asks: another would cost an epoll_wait and a read that can only say EAGAIN.
// One cut short (its read budget spent) goes to the back of the queue for another, since no
// new edge will announce what it left; so does one whose edge carried the peer's FIN while
// its receive side is still open (the FIN came with data, and the short read that took the
// data did not show it). Idle connections cost nothing. A pass that holds the peer's FIN back
// while the QP's CQs hold completions (Connection::kEofHoldNs) is run again once per grace
// period until the FIN is read.
//
// An application thread that busy-polls a CQ for a completion only the peer's bytes bring (a
// posted receive, an unanswered Read: engine::Qp::awaits_inbound) reads its QPs' sockets itself
// (QueuePair::drive from an empty poll). Waking this thread for the same bytes only makes the
// two fight for the QP and, when the CPUs are busy with the pollers, costs a context switch per
// message that preempts one of them (measured in a 2-vCPU VM: ib_send_lat 8 B 206-305 us with,
// 60-70 us without). So such a QP, polled within the poller grace, is muted
// (QueuePair::muted): its socket's readability no longer wakes this thread, its write edges and
// kicks get transmit-only passes; the peer's FIN or reset is the poller's to read too, after
// the bytes before it. Until this thread muted it, a poll does not read it (this thread does),
// and a poll of a CQ no byte from the peer completes into (engine::Qp::awaits_inbound_into: a
// send CQ without a Read in flight; Sends and Writes complete once the socket took them) never
// does: it only sends what its QP has left to send, so with nothing left it makes no system
// call, and it does not count as polling the QP.
// This thread checks every grace period and unmutes the QP once nobody polled it for that long
// or it awaits nothing more; at once on unpoll, or a poll that took its last awaited
// completion (QueuePair::handback). A
// poller that stops polling a QP that still awaits a completion, without arming its CQ (it
// spins on memory for a Write), waits at most one grace period for this thread to take over.
//
// A busy poller that awaits its peer's bytes also lends its time to the whole context (lend(),
// from runtime::poll_driving): an empty poll looks for the context's readiness itself (one
// epoll_wait without a timeout, at most once per lend interval) and runs the passes this
// thread would run: it answers a Read or places a Write on another QP (perftest's servers poll the
// CQ of their rdma_cm exchange while the peer streams into another QP; an MPI rank polls while
// one-sided traffic lands). Meanwhile this thread sleeps on its doorbell alone, so the events
// the poller handles cost no wakeup: that wakeup, a context switch that preempts the spinning
// poller, is what a pass here costs most when the CPUs are busy. A lender's passes never wait
// for a QP another thread holds (that thread moves its bytes). The lease ends when the
// application arms its CQ (unpoll), a few lend intervals after a poll that took completions
// when its QPs await no more from the peer, unless it polls for more by then (unlend: the
// application may now spin on memory, polling nothing; a ping-pong polls again at once), or
// one grace period after the last empty poll; the thread then takes the epoll set back,
// unmutes the QPs that await nothing more and reads what came. A poller reaping only its Send and
// Write completions never lends: it may stop polling at any moment (ib_write_lat polls for each
// Write, then spins on memory).
#pragma once

#include <sched.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <vector>

struct epoll_event;

namespace uiw::runtime {

class QueuePair;

// The thread's knobs. poller_grace: how long a poll keeps the polled QP muted (see above);
// zero never mutes. spin: the longest the thread keeps looking (epoll_wait without a
// timeout) after a pass that moved bytes before it sleeps; a message that arrives meanwhile
// is read without a wakeup (a context switch, and on a busy machine the wait for a CPU). It
// looks for twice the longest of the last four gaps between such passes, and not at all when
// one of them was longer than spin: an idle or sparse connection costs no CPU beyond its
// passes, and a ping-pong served by this thread alone (an application asleep on completion
// events, or one that only answers Read Requests: perftest's ib_read_lat server) is read by a
// thread that is already running. A steady stream (every pass moves bytes, EPOLLOUT edges
// included) keeps the thread looking for the whole transfer. Zero never spins. A spin starts
// only while every runnable thread of the machine has a CPU of this thread's affinity, or of
// its cgroup's CPU limit if that is lower (/proc/loadavg's running count, runnable_fit; read
// at most once per 10 ms, so a spin may start up to 10 ms after the CPUs filled), unless
// spin_any_load; and never while the thread follows its application onto one CPU: where
// threads already wait for a CPU, a spinning thread keeps one of them (its own application,
// spinning on memory for the very bytes this thread would place) off the CPU it spins on.
//
// lend: how often at most a busy poller looks for the context's readiness (an epoll_wait
// each time); an empty poll in between makes no system call for it. An event waits for the
// poller at most this long, where a wakeup of this thread would cost a context switch (tens
// of us on two busy CPUs, hundreds in the test VM). Zero: pollers never lend, this thread
// does all the context's work.
//
// follow: while the application runs (it posted or reaped completions within the poller
// grace, and has not armed a CQ since), the thread sleeps on the CPU that application thread
// last ran on, so that its wakeup preempts its own application (a switch within one address
// space) rather than whatever runs on the CPU the kernel picks: a wakeup from the softirq of
// a local sender lands on the sender's CPU (a sync wakeup, kernel/sched/fair.c
// wake_affine_idle), preempting the sender. Once the application sleeps the thread may run
// anywhere again.
struct ProgressKnobs {
  std::chrono::microseconds poller_grace{1000};
  std::chrono::microseconds spin{1000};
  std::chrono::microseconds lend{20};
  bool follow = false;
  bool spin_any_load = false;
  // The defaults, or UIW_POLLER_GRACE_US / UIW_PROGRESS_SPIN_US / UIW_POLLER_LEND_US where set
  // (0 to 1000000; another value keeps the default), UIW_PROGRESS_FOLLOW and
  // UIW_PROGRESS_SPIN_ANY_LOAD (0 or 1).
  static ProgressKnobs from_env();
};

// /proc/loadavg's fourth field "R/T": true if R (the runnable threads, the reader included)
// is at most `cpus`; false if the text does not parse.
bool runnable_fit(std::string_view loadavg, int cpus);

// Thread safety: add/remove/kick may be called from any thread. The mutex is never held
// across a pass, so neither a posting thread nor remove() waits for other QPs' traffic.
class Progress {
 public:
  // May throw std::system_error (thread).
  explicit Progress(const ProgressKnobs& knobs = {});
  ~Progress();  // stops and joins the thread
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  // Watches q's socket; q must stay until remove(q). 0 or -errno (epoll_ctl).
  int add(QueuePair* q);
  // On return the thread no longer touches q (it waits for at most q's own current pass).
  void remove(QueuePair* q);
  // Runs a pass of q soon: after an application thread gave it work it could not do itself.
  void kick(QueuePair* q);
  // The application stops polling q (it will sleep on a completion event): watch q again now.
  // Ends the lease too (unlend).
  void unpoll(QueuePair* q);

  // An application thread's poll found nothing: it does this thread's work for now (see
  // above). Never blocks. True if bytes moved.
  bool lend();
  // The application stops polling. At once (it will sleep on a completion event): the thread
  // takes the epoll set back now. Otherwise (a poll took the completions it awaited) a few
  // lend intervals later, unless a poll lends again first: an application that reaps a
  // completion usually posts its next request and polls again at once (ib_read_lat,
  // ib_send_lat), and waking the thread for that moment costs a context switch each time.
  void unlend(bool at_once);
  // The thread sleeps on a poller's lease (lend): it unmutes the QPs that await nothing more
  // when the lease ends.
  bool parked() const { return parked_.load(); }
  // An application thread posted or reaped completions: it runs on this CPU (knob follow).
  void note_app_cpu();

 private:
  void run();
  // Handles n events of epoll_wait and runs one pass of each ready QP (the caller holds
  // dispatching_). A lender's passes skip QPs another thread holds. True if bytes moved.
  bool dispatch_locked(std::unique_lock<std::mutex>& lock, const ::epoll_event* evs, int n,
                       bool lender);
  // While a poller lends: sleeps on the doorbell alone until the lease may have ended.
  void park(std::unique_lock<std::mutex>& lock);
  bool lent_recently(int64_t now) const;
  // Before it sleeps: onto the application's CPU while that runs, else back home (follow).
  void follow_app();
  // Whether a spin may start now (spin_any_load, or runnable_fit of /proc/loadavg). Called
  // with mu_ held; releases it around a read of the file.
  bool may_spin(int64_t now, std::unique_lock<std::mutex>& lock);
  void queue_locked(uint64_t id);  // requires mu_
  void wake_locked();              // requires mu_: rings the doorbell if the thread sleeps
  void ring();                     // the doorbell: epoll_wait returns
  // Mute/unmute: epoll interest without/with EPOLLIN. Require mu_.
  bool mute_locked(uint64_t id, QueuePair* q);  // false: epoll_ctl failed, still watched
  void unmute_locked(uint64_t id, QueuePair* q);
  void check_muted_locked();    // unmutes the QPs nobody polled within the grace
  void check_held_locked();     // queues the held QPs once the recheck interval passed
  int64_t grace_start() const;  // steady_ns() less the grace; INT64_MAX without one
  bool mute_if_polled_locked(uint64_t id, QueuePair* q, int64_t since);  // requires mu_

  struct Entry {
    QueuePair* qp;  // Unowned.
    bool queued;    // in ready_
    bool hup;       // epoll reported the peer's FIN (or an error) and the pass has not read it
  };
  int epfd_ = -1;
  int doorbell_ = -1;  // eventfd, epoll key 0
  std::atomic<bool> stop_{false};
  std::mutex mu_;
  std::condition_variable pass_done_;
  std::unordered_map<uint64_t, Entry> qps_;  // under mu_, by epoll key
  std::deque<uint64_t> ready_;               // under mu_; may hold keys removed since
  uint64_t next_id_ = 1;                     // under mu_
  uint64_t running_ = 0;                     // under mu_: the key whose pass runs now
  std::thread::id runner_;                   // under mu_: the thread running that pass
  bool dispatching_ = false;                 // under mu_: the thread or a lender dispatches
  std::atomic<bool> has_ready_{false};       // ready_ is not empty (written under mu_)
  // steady_ns() of the last empty poll that lent and of a lender's last epoll_wait; 0: none
  // (the steady clock counts from boot, so every real time is far above a grace or interval).
  std::atomic<int64_t> lent_at_ns_{0};
  std::atomic<int64_t> looked_at_ns_{0};
  std::atomic<bool> parked_{false};  // the thread sleeps on the doorbell alone
  // Ends a lease late (unlend(false)): a timerfd the parked thread also sleeps on; armed_ says
  // so, and lend() disarms it.
  int lease_timer_ = -1;
  std::atomic<bool> lease_timer_armed_{false};
  bool sleeping_ = false;        // under mu_: the thread sleeps (epoll_wait, parked): ring it
  bool unbounded_ = false;       // under mu_: its epoll_wait has no timeout
  std::vector<uint64_t> muted_;  // under mu_; may hold keys removed since
  // Under mu_: QPs whose last pass held the peer's FIN (Connection::kEofHoldNs), passed again
  // once per recheck interval (the grace, at least 1 ms) from held_at_ns_; may hold keys
  // removed since.
  std::vector<uint64_t> held_;
  int64_t held_at_ns_ = 0;
  const int64_t grace_ns_;
  const int64_t spin_ns_;
  const bool spin_any_load_;
  int loadavg_fd_ = -1;  // /proc/loadavg, kept open for pread; -1: never spin on a guess
  int cpus_ = 0;         // the thread's: the CPUs of its affinity when it started
  int64_t fit_at_ns_ = INT64_MIN / 2;  // the thread's: when may_spin last read loadavg_fd_
  bool fit_ = false;                   // the thread's: what it read then
  const int64_t lend_ns_;
  // follow: the CPU an application thread last posted or polled on, and when (0: it sleeps).
  const bool follow_;
  std::atomic<int> app_cpu_{-1};
  std::atomic<int64_t> app_at_ns_{0};
  bool following_ = false;  // the thread's: follow_, and binding works
  cpu_set_t home_{};        // the thread's: the CPUs it started on (cpus_ counts them)
  int on_cpu_ = -1;         // the thread's: the CPU it is bound to, -1 home
  std::thread thread_;
};

}  // namespace uiw::runtime
