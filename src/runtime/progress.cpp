#include "runtime/progress.h"

#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>

namespace uiw::runtime {

Progress::Progress()
    : epfd_(epoll_create1(EPOLL_CLOEXEC)), doorbell_(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) {
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.ptr = nullptr;
  epoll_ctl(epfd_, EPOLL_CTL_ADD, doorbell_, &ev);
  thread_ = std::thread([this] { run(); });
}

Progress::~Progress() {
  stop_ = true;
  kick();
  thread_.join();
  close(doorbell_);
  close(epfd_);
}

int Progress::add(Connection* c) {
  std::lock_guard lock(mu_);
  epoll_event ev{};
  ev.events = EPOLLIN | EPOLLOUT | EPOLLET | EPOLLRDHUP;
  ev.data.ptr = c;
  if (c->fd() >= 0 && epoll_ctl(epfd_, EPOLL_CTL_ADD, c->fd(), &ev) != 0) return -errno;
  conns_.push_back(c);
  kick();
  return 0;
}

void Progress::remove(Connection* c) {
  std::lock_guard lock(mu_);
  if (c->fd() >= 0) epoll_ctl(epfd_, EPOLL_CTL_DEL, c->fd(), nullptr);
  conns_.erase(std::remove(conns_.begin(), conns_.end(), c), conns_.end());
}

void Progress::kick() {
  const uint64_t one = 1;
  [[maybe_unused]] ssize_t n = write(doorbell_, &one, sizeof one);
}

void Progress::run() {
  epoll_event evs[64];
  while (!stop_) {
    // Edge-triggered sockets plus a full pass per wakeup: every connection is driven until it
    // moves no more bytes, so no readiness edge is lost.
    const int n = epoll_wait(epfd_, evs, 64, 100);
    for (int i = 0; i < n; ++i) {
      if (evs[i].data.ptr == nullptr) {
        uint64_t v;
        [[maybe_unused]] ssize_t r = read(doorbell_, &v, sizeof v);
      }
    }
    std::lock_guard lock(mu_);
    for (bool moved = true; moved && !stop_;) {
      moved = false;
      for (Connection* c : conns_) moved |= c->progress();
    }
  }
}

}  // namespace uiw::runtime
