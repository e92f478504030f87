// Completion queue: a bounded ring of Completions with verbs-style arming.
#pragma once

#include <cstdint>
#include <functional>
#include <mutex>
#include <span>
#include <vector>

#include "engine/types.h"

namespace uiw::engine {

// Thread-safe: the progress thread pushes while the application polls.
class CompletionQueue {
 public:
  // notify is called (without the lock held) when an armed CQ gets a matching completion; it
  // is how the provider fires the completion channel.
  explicit CompletionQueue(uint32_t capacity, std::function<void()> notify = {});
  CompletionQueue(const CompletionQueue&) = delete;
  CompletionQueue& operator=(const CompletionQueue&) = delete;

  // Returns false when the ring is full: the completion is lost and the CQ is in error
  // (RDMAP §8.1.1(10): only streams using this CQ are affected).
  bool push(const Completion& c);
  size_t poll(std::span<Completion> out);
  // ibv_req_notify_cq: the next completion (solicited_only: the next solicited or error
  // completion) fires notify once.
  void arm(bool solicited_only);
  int resize(uint32_t capacity);  // -EINVAL if smaller than the entries now queued
  uint32_t capacity() const;
  size_t size() const;
  bool overrun() const;

 private:
  mutable std::mutex mu_;
  std::vector<Completion> ring_;
  size_t head_ = 0;
  size_t count_ = 0;
  bool overrun_ = false;
  enum class Arm : uint8_t { None, Any, Solicited } arm_ = Arm::None;
  std::function<void()> notify_;
};

}  // namespace uiw::engine
