// runtime::PollSet: walks take no lock and never wait; remove() returns only once no walk can
// reach the member, so its caller may free it at once (under ASan/TSan a late walk would be a
// use after free or a race).
#include "runtime/poll_set.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <thread>
#include <vector>

namespace uiw::runtime {
namespace {

using namespace std::chrono_literals;

struct Member {
  static constexpr uint64_t kAlive = 0x616c697665, kFreed = 0xdead;
  uint64_t magic = kAlive;
  int id = 0;
};

std::vector<int> ids(const PollSet<Member>& s) {
  std::vector<int> out;
  s.for_each([&](Member& m) { out.push_back(m.id); });
  return out;
}

TEST(PollSetTest, AddIsOnceAndRemoveTakesItOut) {
  PollSet<Member> s;
  Member a{Member::kAlive, 1}, b{Member::kAlive, 2};
  s.add(&a);
  s.add(&b);
  s.add(&a);
  EXPECT_EQ(ids(s), (std::vector<int>{1, 2}));
  s.remove(&a);
  EXPECT_EQ(ids(s), (std::vector<int>{2}));
  s.remove(&a);
  s.remove(&b);
  EXPECT_TRUE(ids(s).empty());
}

// A walk that is still on a member holds its remove() back; other walks meanwhile go on
// without waiting (for the walk or for the remove).
TEST(PollSetTest, RemoveWaitsForTheWalkOnItAndOtherWalksDoNotWait) {
  PollSet<Member> s;
  Member a{Member::kAlive, 1};
  s.add(&a);
  std::promise<void> inside, leave;
  std::shared_future<void> leave_f = leave.get_future().share();
  auto walker = std::async(std::launch::async, [&] {
    s.for_each([&](Member&) {
      inside.set_value();
      leave_f.wait();
    });
  });
  inside.get_future().wait();
  auto remover = std::async(std::launch::async, [&] { s.remove(&a); });
  EXPECT_EQ(remover.wait_for(100ms), std::future_status::timeout)
      << "remove returned while a walk was on the member";
  auto other = std::async(std::launch::async, [&] { return ids(s).size(); });
  EXPECT_EQ(other.wait_for(2000ms), std::future_status::ready) << "a walk waited";
  leave.set_value();
  EXPECT_EQ(remover.wait_for(2000ms), std::future_status::ready);
  walker.get();
  EXPECT_TRUE(ids(s).empty());
}

// Walkers spin over the set while members come and go and are freed as soon as remove()
// returns: no walk ever meets a freed member.
TEST(PollSetTest, AMemberIsFreedOnlyAfterEveryWalkLeftIt) {
  PollSet<Member> s;
  std::atomic<bool> stop{false};
  std::atomic<long> freed_seen{0}, walks{0};
  std::vector<std::thread> walkers;
  for (int w = 0; w < 2; ++w)
    walkers.emplace_back([&] {
      while (!stop.load()) {
        s.for_each([&](Member& m) {
          if (m.magic != Member::kAlive) freed_seen.fetch_add(1);
        });
        walks.fetch_add(1);
      }
    });
  while (walks.load() == 0) std::this_thread::yield();
  std::vector<Member*> live;
  const long walks_before = walks.load();
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; std::chrono::steady_clock::now() - t0 < 300ms; ++i) {
    auto* m = new Member{Member::kAlive, i};
    s.add(m);
    live.push_back(m);
    if (live.size() > 4) {
      Member* old = live.front();
      live.erase(live.begin());
      s.remove(old);
      old->magic = Member::kFreed;
      delete old;
    }
  }
  stop = true;
  for (auto& t : walkers) t.join();
  EXPECT_EQ(freed_seen.load(), 0);
  EXPECT_GT(walks.load(), walks_before + 100) << "the walks hardly overlapped the updates";
  for (Member* m : live) {
    s.remove(m);
    delete m;
  }
}

}  // namespace
}  // namespace uiw::runtime
