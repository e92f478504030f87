#include "engine/receive_queue.h"

#include <cerrno>

namespace uiw::engine {

ReceiveQueue::ReceiveQueue(uint32_t capacity, bool shared)
    : ring_(capacity ? capacity : 1), shared_(shared) {}

int ReceiveQueue::post(const RecvWr& wr) {
  std::lock_guard lock(mu_);
  if (count_ == ring_.size()) return -ENOMEM;
  ring_[(head_ + count_) % ring_.size()] = wr;
  ++count_;
  return 0;
}

std::optional<RecvWr> ReceiveQueue::take() {
  std::function<void()> fire;
  std::optional<RecvWr> wr;
  {
    std::lock_guard lock(mu_);
    if (count_ == 0) return std::nullopt;
    wr = ring_[head_];
    head_ = (head_ + 1) % ring_.size();
    --count_;
    if (limit_ != 0 && count_ < limit_) {
      limit_ = 0;
      fire.swap(on_limit_);
    }
  }
  if (fire) fire();
  return wr;
}

std::vector<RecvWr> ReceiveQueue::drain() {
  std::lock_guard lock(mu_);
  std::vector<RecvWr> out;
  out.reserve(count_);
  while (count_ > 0) {
    out.push_back(ring_[head_]);
    head_ = (head_ + 1) % ring_.size();
    --count_;
  }
  return out;
}

size_t ReceiveQueue::size() const {
  std::lock_guard lock(mu_);
  return count_;
}

void ReceiveQueue::arm_limit(uint32_t limit, std::function<void()> on_limit) {
  std::lock_guard lock(mu_);
  limit_ = limit;
  on_limit_ = std::move(on_limit);
}

uint32_t ReceiveQueue::limit() const {
  std::lock_guard lock(mu_);
  return limit_;
}

}  // namespace uiw::engine
