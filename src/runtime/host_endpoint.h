// HostEndpoint: one RC queue pair (runtime::QueuePair) with its own memory registry, CQs and
// receive queue, connected over a host TCP socket with MPA negotiated in user space
// (transport::mpa_*). For host tools, benchmarks and tests that run without uiw.ko; the
// provider runs the same QueuePair over the socket uiw.ko hands over.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <span>

#include "engine/qp.h"
#include "runtime/progress.h"
#include "runtime/queue_pair.h"
#include "transport/mpa_negotiate.h"

namespace uiw::runtime {

// Thread safety: post_*, poll_* and progress() may be called from any thread.
class HostEndpoint {
 public:
  // progress_thread: a runtime::Progress thread drives the connection; otherwise the caller
  // does alone (progress()). Either way poll_* moves bytes inline when it finds nothing, as
  // ibv_poll_cq does (runtime::poll_driving): it reads only while a completion into that CQ may
  // wait for the peer's bytes, so without a Progress thread a caller that places the peer's
  // Writes or answers its Reads while polling for nothing else calls progress().
  HostEndpoint(uint32_t qpn, bool progress_thread, uint32_t sq_depth = 1024,
               uint32_t cq_depth = 8192);
  // Driven by a Progress thread shared with other endpoints, as a provider context drives all
  // of its QPs with one.
  HostEndpoint(uint32_t qpn, Progress& shared, uint32_t sq_depth = 1024, uint32_t cq_depth = 8192);
  ~HostEndpoint();
  HostEndpoint(const HostEndpoint&) = delete;
  HostEndpoint& operator=(const HostEndpoint&) = delete;

  // Blocking connection setup: TCP, MPA Request/Reply, then the Qp enters RTS. 0 or -errno.
  int connect(const char* ip, uint16_t port, const transport::MpaConfig& cfg);
  int accept(int listen_fd, const transport::MpaConfig& cfg);

  memory::Stag reg(void* p, size_t len, uint32_t access, int* err = nullptr);
  // Posting, then (as the provider does) a pass in this thread or a kick of the Progress one.
  int post_send(const engine::SendWr& wr);
  int post_recv(const engine::RecvWr& wr);
  size_t poll_send(std::span<engine::Completion> out) { return poll(scq_, out); }
  size_t poll_recv(std::span<engine::Completion> out) { return poll(rcq_, out); }
  bool progress() { return qp_->progress(); }  // one inline pass; false if nothing moved
  // Blocks until the socket is readable (or writable while the Qp has unsent bytes), at most
  // timeout_ms: how a busy-poll loop yields the CPU after spinning without progress.
  void wait_io(int timeout_ms);
  bool busy_poll() const { return !driver_; }
  void close() { qp_->close(); }
  engine::QpState state() { return qp_->state(); }

  QueuePair& queue_pair() { return *qp_; }
  // The engine without the lock: for tests that look at it while nothing drives it.
  engine::Qp& qp() { return qp_->engine_unlocked(); }
  memory::Registry& registry() { return registry_; }
  const transport::MpaResult& mpa() const { return mpa_; }
  // This endpoint's counters (enum uiw_counter), kept as a provider context keeps the page
  // rdma statistic reads, so host tools and the bench pay what the provider pays.
  uint64_t counter(uiw_counter c) {
    return std::atomic_ref<uint64_t>(counters_[c]).load(std::memory_order_relaxed);
  }

 private:
  HostEndpoint(uint32_t qpn, Progress* driver, uint32_t sq_depth, uint32_t cq_depth);
  int finish_setup(int fd, const transport::MpaResult& r, bool initiator);
  size_t poll(engine::CompletionQueue& cq, std::span<engine::Completion> out);

  memory::Registry registry_{4096};
  uint32_t pd_;
  engine::CompletionQueue scq_, rcq_;
  engine::ReceiveQueue rq_{4096, false};
  alignas(64) uint64_t counters_[UIW_CNT_NUM] = {};
  std::unique_ptr<Progress> own_progress_;  // before qp_: the QueuePair leaves it when destroyed
  Progress* driver_ = nullptr;              // own_progress_, a shared one, or none (busy-poll)
  std::unique_ptr<QueuePair> qp_;
  transport::MpaResult mpa_{};
};

}  // namespace uiw::runtime
