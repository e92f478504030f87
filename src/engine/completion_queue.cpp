#include "engine/completion_queue.h"

#include <cerrno>

namespace uiw::engine {

CompletionQueue::CompletionQueue(uint32_t capacity, std::function<void()> notify)
    : ring_(capacity ? capacity : 1), notify_(std::move(notify)) {}

bool CompletionQueue::push(const Completion& c) {
  bool fire = false;
  {
    std::lock_guard lock(mu_);
    if (count_ == ring_.size()) {
      overrun_ = true;
      return false;
    }
    ring_[(head_ + count_) % ring_.size()] = c;
    ++count_;
    // Verbs semantics: a solicited-only arm fires on solicited receives and on any error.
    const bool solicited = (c.flags & kWcSolicited) || c.status != WcStatus::Success;
    if (arm_ == Arm::Any || (arm_ == Arm::Solicited && solicited)) {
      arm_ = Arm::None;
      fire = true;
    }
  }
  if (fire && notify_) notify_();
  return true;
}

size_t CompletionQueue::poll(std::span<Completion> out) {
  std::lock_guard lock(mu_);
  size_t n = 0;
  while (n < out.size() && count_ > 0) {
    out[n++] = ring_[head_];
    head_ = (head_ + 1) % ring_.size();
    --count_;
  }
  return n;
}

void CompletionQueue::arm(bool solicited_only) {
  std::lock_guard lock(mu_);
  // An arm never downgrades a pending "any" request to "solicited only".
  if (arm_ != Arm::Any) arm_ = solicited_only ? Arm::Solicited : Arm::Any;
}

int CompletionQueue::resize(uint32_t capacity) {
  std::lock_guard lock(mu_);
  if (capacity == 0 || capacity < count_) return -EINVAL;
  std::vector<Completion> ring(capacity);
  for (size_t i = 0; i < count_; ++i) ring[i] = ring_[(head_ + i) % ring_.size()];
  ring_.swap(ring);
  head_ = 0;
  return 0;
}

uint32_t CompletionQueue::capacity() const {
  std::lock_guard lock(mu_);
  return static_cast<uint32_t>(ring_.size());
}

size_t CompletionQueue::size() const {
  std::lock_guard lock(mu_);
  return count_;
}

bool CompletionQueue::overrun() const {
  std::lock_guard lock(mu_);
  return overrun_;
}

}  // namespace uiw::engine
