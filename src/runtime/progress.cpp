#include "runtime/progress.h"

#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <system_error>

#include "runtime/queue_pair.h"

namespace uiw::runtime {

Progress::Progress()
    : epfd_(epoll_create1(EPOLL_CLOEXEC)), doorbell_(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) {
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
    // Edge-triggered: a pass reads until EAGAIN or requeues itself, so every edge is news.
    epoll_event ev{};
    ev.events = EPOLLIN | EPOLLOUT | EPOLLET | EPOLLRDHUP;
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
  while (!stop_) {
    sleeping_ = ready_.empty();
    const int timeout = sleeping_ ? -1 : 0;
    lock.unlock();
    const int n = epoll_wait(epfd_, evs, 64, timeout);
    lock.lock();
    sleeping_ = false;
    for (int i = 0; i < n; ++i) {
      if (evs[i].data.u64 == 0) {
        uint64_t v;
        [[maybe_unused]] ssize_t r = read(doorbell_, &v, sizeof v);
      } else {
        if (evs[i].events & (EPOLLRDHUP | EPOLLHUP | EPOLLERR)) {
          auto it = qps_.find(evs[i].data.u64);
          if (it != qps_.end()) it->second.hup = true;
        }
        queue_locked(evs[i].data.u64);
      }
    }
    // One pass for each QP ready now; those with more to read queue up again behind the rest.
    for (size_t k = ready_.size(); k > 0 && !stop_; --k) {
      const uint64_t id = ready_.front();
      ready_.pop_front();
      auto it = qps_.find(id);
      if (it == qps_.end()) continue;  // removed since it was queued
      it->second.queued = false;
      QueuePair* q = it->second.qp;
      running_ = id;
      lock.unlock();
      const QueuePair::PassResult r = q->pass();
      lock.lock();
      running_ = 0;
      pass_done_.notify_all();
      it = qps_.find(id);
      if (it == qps_.end()) continue;  // removed during its pass (from its own callback)
      if (!r.rx_open) it->second.hup = false;
      // A FIN still unread after a pass that moved bytes: the pass ended on the short read
      // of the data that came with it. (One that moved nothing waits for a kick: the Qp is
      // not reading.)
      if (r.cut_short || (r.moved && it->second.hup)) queue_locked(id);
    }
  }
}

}  // namespace uiw::runtime
