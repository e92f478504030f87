// Receive queue of posted RecvWrs, private to one QP or shared by several (SRQ).
#pragma once

#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <vector>

#include "engine/types.h"

namespace uiw::engine {

// Thread-safe: the application posts while the progress thread consumes.
class ReceiveQueue {
 public:
  ReceiveQueue(uint32_t capacity, bool shared);
  ReceiveQueue(const ReceiveQueue&) = delete;
  ReceiveQueue& operator=(const ReceiveQueue&) = delete;

  int post(const RecvWr& wr);  // -ENOMEM when full
  // The oldest posted WR into *out (its num_sge SGEs only); false when none is posted.
  bool take(RecvWr* out);
  // Removes every posted WR (flush on QP error; never used for an SRQ, whose WRs outlive a QP).
  std::vector<RecvWr> drain();
  size_t size() const;
  uint32_t capacity() const { return static_cast<uint32_t>(ring_.size()); }
  bool shared() const { return shared_; }
  // SRQ limit (ibv_modify_srq IBV_SRQ_LIMIT): when the count drops below `limit`, on_limit fires
  // once and the limit disarms, as IBV_EVENT_SRQ_LIMIT_REACHED does.
  void arm_limit(uint32_t limit, std::function<void()> on_limit);
  uint32_t limit() const;

 private:
  mutable std::mutex mu_;
  std::vector<RecvWr> ring_;
  size_t head_ = 0;
  size_t count_ = 0;
  const bool shared_;
  uint32_t limit_ = 0;
  std::function<void()> on_limit_;
};

}  // namespace uiw::engine
