#include "engine/receive_queue.h"

#include <algorithm>
#include <cerrno>

namespace uiw::engine {

ReceiveQueue::ReceiveQueue(uint32_t capacity, bool shared)
    : ring_(capacity ? capacity : 1), shared_(shared) {}

namespace {
// A RecvWr carries room for kMaxSge SGEs; a message uses num_sge of them.
void copy_wr(RecvWr* dst, const RecvWr& src) {
  dst->wr_id = src.wr_id;
  dst->num_sge = src.num_sge;
  std::copy_n(src.sg_list, std::min(src.num_sge, kMaxSge), dst->sg_list);
}
}  // namespace

int ReceiveQueue::post(const RecvWr& wr) {
  std::lock_guard lock(mu_);
  if (count_ == ring_.size()) return -ENOMEM;
  size_t tail = head_ + count_;
  if (tail >= ring_.size()) tail -= ring_.size();
  copy_wr(&ring_[tail], wr);
  ++count_;
  return 0;
}

bool ReceiveQueue::take(RecvWr* out) {
  std::function<void()> fire;
  {
    std::lock_guard lock(mu_);
    if (count_ == 0) return false;
    copy_wr(out, ring_[head_]);
    if (++head_ == ring_.size()) head_ = 0;
    --count_;
    if (limit_ != 0 && count_ < limit_) {
      limit_ = 0;
      fire.swap(on_limit_);
    }
  }
  if (fire) fire();
  return true;
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
