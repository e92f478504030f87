// PollSet: the members an application's poll walks (the QPs that complete into one CQ), read
// without a lock: an empty ibv_poll_cq must not wait for another thread's poll or for a
// create/destroy. Membership changes are rare (QP creation, RESET, destroy) and may wait.
//
// Read side: a walk enters one of two reader counters (the one the epoch's parity names) and
// then loads the current membership; it never blocks. Update side (one at a time): publish a
// new membership, then flip the epoch twice, waiting each time until the counter the walks
// entered before the flip is empty, then free the old membership. Two flips, because a walk may
// read the epoch before a flip and enter its counter after the wait for that counter ended; it
// then holds the membership published before the next update, whose first wait may be on the
// other counter; the second flip makes every walk that began before the update drain
// (Linux SRCU's two-phase grace period rests on the same argument). Every access is seq_cst:
// a walk's entry and its load of the membership are ordered against an update's publish and
// its reads of the counters.
//
// remove(x) returns only when no walk can still reach x: the caller may then free x.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace uiw::runtime {

template <typename T>
class PollSet {
 public:
  PollSet() : members_(new std::vector<T*>) {}
  ~PollSet() { delete members_.load(); }
  PollSet(const PollSet&) = delete;
  PollSet& operator=(const PollSet&) = delete;

  // f(T&) for each member; f must not add or remove (the update would wait for this walk).
  template <typename F>
  void for_each(F&& f) const {
    const uint32_t side = epoch_.load() & 1;
    readers_[side].fetch_add(1);
    for (T* t : *members_.load()) f(*t);
    readers_[side].fetch_sub(1);
  }

  void add(T* t) {
    update([t](std::vector<T*>& v) {
      if (std::find(v.begin(), v.end(), t) == v.end()) v.push_back(t);
    });
  }
  void remove(T* t) {
    update([t](std::vector<T*>& v) { v.erase(std::remove(v.begin(), v.end(), t), v.end()); });
  }

 private:
  template <typename Change>
  void update(Change&& change) {
    std::lock_guard lock(update_mu_);
    auto next = std::make_unique<std::vector<T*>>(*members_.load());
    change(*next);
    std::unique_ptr<std::vector<T*>> old(members_.exchange(next.release()));
    for (int flip = 0; flip < 2; ++flip) {
      const uint32_t side = epoch_.fetch_add(1) & 1;
      while (readers_[side].load() != 0) std::this_thread::yield();
    }
  }

  std::mutex update_mu_;
  std::atomic<std::vector<T*>*> members_;
  std::atomic<uint32_t> epoch_{0};
  mutable std::atomic<uint32_t> readers_[2] = {0, 0};
};

}  // namespace uiw::runtime
