// Progress: one thread per device context that drives its Connections (DESIGN.md, Data path):
// epoll over the sockets plus an eventfd doorbell rung after posting, so RDMA Reads are answered
// and one-sided Writes placed with no help from the application.
#pragma once

#include <atomic>
#include <mutex>
#include <thread>
#include <vector>

#include "runtime/connection.h"

namespace uiw::runtime {

// Thread safety: add/remove/kick may be called from any thread.
class Progress {
 public:
  Progress();
  ~Progress();  // stops and joins the thread
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  int add(Connection* c /* Unowned, must stay until remove() */);
  void remove(Connection* c);  // on return the thread no longer touches c
  void kick();                 // doorbell: run a pass soon (after posting work)

 private:
  void run();
  int epfd_ = -1;
  int doorbell_ = -1;
  std::atomic<bool> stop_{false};
  std::mutex mu_;  // guards conns_; held by the thread during a pass
  std::vector<Connection*> conns_;
  std::thread thread_;
};

}  // namespace uiw::runtime
