// Registry: every AccessResult path, STag properties, invalidation, PD lifetime, concurrency.
#include "memory/registry.h"

#include <gtest/gtest.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <set>
#include <thread>
#include <vector>

namespace uiw::memory {
namespace {

constexpr uint64_t kIova = 0x7f0000001000ull;
constexpr uint64_t kLen = 4096;

class RegistryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    pd_ = reg_.alloc_pd();
    int err = 1;
    stag_ = reg_.register_region(pd_, buf_.data(), kLen, kIova,
                                 kLocalWrite | kRemoteWrite | kRemoteRead, &err);
    ASSERT_EQ(err, 0);
    ASSERT_NE(stag_, 0u);
  }
  Mapping chk(uint64_t to, uint64_t len, uint32_t access = kRemoteWrite, uint32_t stream = 7) {
    return reg_.check(stag_, pd_, stream, access, to, len);
  }

  Registry reg_;
  std::array<uint8_t, kLen> buf_{};
  uint32_t pd_ = 0;
  Stag stag_ = 0;
};

TEST_F(RegistryTest, OkMapsToHostAddressOfTo) {
  Mapping m = chk(kIova + 100, 16);
  EXPECT_EQ(m.result, AccessResult::Ok);
  EXPECT_EQ(m.host, buf_.data() + 100);
}

TEST_F(RegistryTest, BoundsAtExactEdges) {
  // to == iova and to + len == iova + length are both in bounds (RFC 5041 §7.1 checks 3-4).
  EXPECT_EQ(chk(kIova, kLen).result, AccessResult::Ok);
  EXPECT_EQ(chk(kIova, kLen).host, buf_.data());
  EXPECT_EQ(chk(kIova + kLen - 1, 1).host, buf_.data() + kLen - 1);
  // One byte past either edge fails.
  EXPECT_EQ(chk(kIova, kLen + 1).result, AccessResult::BaseBounds);
  EXPECT_EQ(chk(kIova + kLen, 1).result, AccessResult::BaseBounds);
  EXPECT_EQ(chk(kIova - 1, 1).result, AccessResult::BaseBounds);
  EXPECT_EQ(chk(kIova - 1, 2).result, AccessResult::BaseBounds);
  EXPECT_EQ(chk(0, 1).result, AccessResult::BaseBounds);
  EXPECT_EQ(chk(kIova, kLen).result, AccessResult::Ok);
  EXPECT_EQ(chk(kIova + 1, kLen).result, AccessResult::BaseBounds);
}

TEST_F(RegistryTest, ZeroLengthIsCheckedLikeAnyLength) {
  // The engine skips check() for zero-length tagged segments (RFC 5041 §7.1); check() itself still
  // checks the TO of a zero-length request.
  Mapping end = chk(kIova + kLen, 0);
  EXPECT_EQ(end.result, AccessResult::Ok);
  EXPECT_EQ(end.host, buf_.data() + kLen);
  EXPECT_EQ(chk(kIova + kLen + 1, 0).result, AccessResult::BaseBounds);
  EXPECT_EQ(chk(kIova - 1, 0).result, AccessResult::BaseBounds);
  EXPECT_EQ(chk(kIova, 0, kRemoteAtomic).result, AccessResult::AccessDenied);
}

TEST_F(RegistryTest, ToWrapIsDetectedBeforeBounds) {
  // RFC 5041 §7.1 check 5: the 64-bit sum of TO and length must not wrap.
  EXPECT_EQ(chk(UINT64_MAX - 3, 8).result, AccessResult::ToWrap);
  EXPECT_EQ(chk(kIova, UINT64_MAX).result, AccessResult::ToWrap);
  EXPECT_EQ(chk(UINT64_MAX, 1).result, AccessResult::ToWrap);
  // No wrap, but out of bounds.
  EXPECT_EQ(chk(UINT64_MAX - 3, 3).result, AccessResult::BaseBounds);
  EXPECT_EQ(chk(UINT64_MAX, 0).result, AccessResult::BaseBounds);
}

TEST(RegistryEdge, RegionAtTopOfTaggedOffsetSpace) {
  Registry reg;
  uint32_t pd = reg.alloc_pd();
  std::array<uint8_t, 16> b{};
  int err;
  // iova + length == UINT64_MAX: the last representable end.
  Stag s = reg.register_region(pd, b.data(), 15, UINT64_MAX - 15, kRemoteRead, &err);
  ASSERT_NE(s, 0u);
  EXPECT_EQ(reg.check(s, pd, 0, kRemoteRead, UINT64_MAX - 15, 15).result, AccessResult::Ok);
  EXPECT_EQ(reg.check(s, pd, 0, kRemoteRead, UINT64_MAX - 3, 8).result, AccessResult::ToWrap);
  EXPECT_EQ(reg.check(s, pd, 0, kRemoteRead, UINT64_MAX, 0).host, b.data() + 15);
  // A region whose end would be 2^64 is refused.
  EXPECT_EQ(reg.register_region(pd, b.data(), 16, UINT64_MAX - 15, kRemoteRead, &err), 0u);
  EXPECT_EQ(err, -EINVAL);
}

TEST_F(RegistryTest, InvalidStagPaths) {
  // Key mismatch: same index, every other key.
  for (uint32_t k = 0; k < 256; ++k) {
    Stag other = (stag_ & ~0xffu) | k;
    if (other == stag_) continue;
    ASSERT_EQ(reg_.check(other, pd_, 7, 0, kIova, 1).result, AccessResult::InvalidStag) << k;
  }
  // Index names no registered slot (the table's low index bits are the slot; flip the high ones).
  Stag far = stag_ ^ (0x800000u << 8);
  EXPECT_EQ(reg_.check(far, pd_, 7, 0, kIova, 1).result, AccessResult::InvalidStag);
  Stag next_slot = stag_ ^ (1u << 8);
  EXPECT_EQ(reg_.check(next_slot, pd_, 7, 0, kIova, 1).result, AccessResult::InvalidStag);
  EXPECT_EQ(reg_.check(0, pd_, 7, 0, kIova, 1).result, AccessResult::InvalidStag);
  EXPECT_EQ(reg_.check(0xffffffffu, pd_, 7, 0, kIova, 1).result, AccessResult::InvalidStag);
  EXPECT_EQ(reg_.check(0, pd_, 7, 0, kIova, 1).host, nullptr);
}

TEST_F(RegistryTest, CheckOrderIsStagPdStreamAccessWrapBounds) {
  ASSERT_EQ(reg_.bind_stream(stag_, 7), 0);
  // Everything wrong: the STag wins.
  EXPECT_EQ(reg_.check(stag_ ^ 1, pd_ + 1, 8, kRemoteAtomic, UINT64_MAX, 2).result,
            AccessResult::InvalidStag);
  EXPECT_EQ(reg_.check(stag_, pd_ + 1, 8, kRemoteAtomic, UINT64_MAX, 2).result,
            AccessResult::PdMismatch);
  EXPECT_EQ(reg_.check(stag_, pd_, 8, kRemoteAtomic, UINT64_MAX, 2).result,
            AccessResult::StreamMismatch);
  EXPECT_EQ(reg_.check(stag_, pd_, 7, kRemoteAtomic, UINT64_MAX, 2).result,
            AccessResult::AccessDenied);
  EXPECT_EQ(reg_.check(stag_, pd_, 7, kRemoteRead, UINT64_MAX, 2).result, AccessResult::ToWrap);
  EXPECT_EQ(reg_.check(stag_, pd_, 7, kRemoteRead, 0, 2).result, AccessResult::BaseBounds);
  EXPECT_EQ(reg_.check(stag_, pd_, 7, kRemoteRead, kIova, 2).result, AccessResult::Ok);
}

TEST_F(RegistryTest, StreamBinding) {
  // Unbound: any stream of the PD (including 0).
  EXPECT_EQ(chk(kIova, 1, kRemoteWrite, 1).result, AccessResult::Ok);
  EXPECT_EQ(chk(kIova, 1, kRemoteWrite, 0).result, AccessResult::Ok);
  ASSERT_EQ(reg_.bind_stream(stag_, 42), 0);
  EXPECT_EQ(chk(kIova, 1, kRemoteWrite, 42).result, AccessResult::Ok);
  EXPECT_EQ(chk(kIova, 1, kRemoteWrite, 41).result, AccessResult::StreamMismatch);
  EXPECT_EQ(chk(kIova, 1, kRemoteWrite, 0).result, AccessResult::StreamMismatch);
  RegionInfo info{};
  ASSERT_EQ(reg_.query(stag_, &info), 0);
  EXPECT_EQ(info.stream, 42u);
  ASSERT_EQ(reg_.bind_stream(stag_, 0), 0);  // unbind
  EXPECT_EQ(chk(kIova, 1, kRemoteWrite, 41).result, AccessResult::Ok);
  EXPECT_EQ(reg_.bind_stream(stag_ ^ 1, 3), -ENOENT);
}

TEST_F(RegistryTest, PdMismatch) {
  uint32_t other = reg_.alloc_pd();
  ASSERT_NE(other, pd_);
  EXPECT_EQ(reg_.check(stag_, other, 7, 0, kIova, 1).result, AccessResult::PdMismatch);
  EXPECT_EQ(reg_.check(stag_, 0, 7, 0, kIova, 1).result, AccessResult::PdMismatch);
}

TEST(RegistryAccess, RequiredAccessMustBeSubset) {
  Registry reg;
  uint32_t pd = reg.alloc_pd();
  std::array<uint8_t, 64> b{};
  int err;
  Stag ro = reg.register_region(pd, b.data(), b.size(), 0, kRemoteRead, &err);
  Stag rw = reg.register_region(pd, b.data(), b.size(), 0, kLocalWrite | kRemoteWrite, &err);
  Stag local = reg.register_region(pd, b.data(), b.size(), 0, 0, &err);
  ASSERT_NE(ro, 0u);
  ASSERT_NE(rw, 0u);
  ASSERT_NE(local, 0u);
  auto res = [&](Stag s, uint32_t a) { return reg.check(s, pd, 0, a, 0, 8).result; };
  // Local read is implicit: required 0 passes on every region.
  EXPECT_EQ(res(local, 0), AccessResult::Ok);
  EXPECT_EQ(res(ro, 0), AccessResult::Ok);
  EXPECT_EQ(res(ro, kRemoteRead), AccessResult::Ok);
  EXPECT_EQ(res(ro, kRemoteWrite), AccessResult::AccessDenied);
  EXPECT_EQ(res(ro, kRemoteRead | kRemoteWrite), AccessResult::AccessDenied);
  EXPECT_EQ(res(ro, kLocalWrite), AccessResult::AccessDenied);
  EXPECT_EQ(res(rw, kRemoteWrite), AccessResult::Ok);
  EXPECT_EQ(res(rw, kRemoteWrite | kLocalWrite), AccessResult::Ok);
  EXPECT_EQ(res(rw, kRemoteRead), AccessResult::AccessDenied);
  EXPECT_EQ(res(local, kRemoteRead), AccessResult::AccessDenied);
  EXPECT_EQ(res(local, kLocalWrite), AccessResult::AccessDenied);
}

TEST(RegistryArgs, RegistrationRejectsBadArguments) {
  Registry reg;
  uint32_t pd = reg.alloc_pd();
  std::array<uint8_t, 64> b{};
  int err = 0;
  // Remote write / atomic without local write (verbs rule).
  EXPECT_EQ(reg.register_region(pd, b.data(), 64, 0, kRemoteWrite, &err), 0u);
  EXPECT_EQ(err, -EINVAL);
  EXPECT_EQ(reg.register_region(pd, b.data(), 64, 0, kRemoteAtomic, &err), 0u);
  EXPECT_EQ(err, -EINVAL);
  EXPECT_EQ(reg.register_region(pd, b.data(), 64, 0, 1u << 10, &err), 0u);  // unknown bit
  EXPECT_EQ(err, -EINVAL);
  EXPECT_EQ(reg.register_region(pd + 100, b.data(), 64, 0, 0, &err), 0u);  // unknown pd
  EXPECT_EQ(err, -EINVAL);
  EXPECT_EQ(reg.register_region(pd, nullptr, 64, 0, 0, &err), 0u);
  EXPECT_EQ(err, -EINVAL);
  EXPECT_EQ(reg.region_count(), 0u);
  // Every known bit together is fine; a zero-length region at address null is fine too.
  EXPECT_NE(reg.register_region(pd, b.data(), 64, 0, kAllAccess, &err), 0u);
  EXPECT_EQ(err, 0);
  Stag empty = reg.register_region(pd, nullptr, 0, 5, 0, &err);
  ASSERT_NE(empty, 0u);
  EXPECT_EQ(reg.check(empty, pd, 0, 0, 5, 0).result, AccessResult::Ok);
  EXPECT_EQ(reg.check(empty, pd, 0, 0, 5, 1).result, AccessResult::BaseBounds);
  EXPECT_EQ(reg.region_count(), 2u);
}

TEST(RegistryCapacity, TableFullGivesEnomemAndSlotsAreReused) {
  Registry reg(4);
  EXPECT_EQ(reg.capacity(), 4u);
  uint32_t pd = reg.alloc_pd();
  std::array<uint8_t, 8> b{};
  int err;
  std::vector<Stag> s;
  for (int i = 0; i < 4; ++i) {
    s.push_back(reg.register_region(pd, b.data(), 8, 0, 0, &err));
    ASSERT_EQ(err, 0);
  }
  EXPECT_EQ(reg.register_region(pd, b.data(), 8, 0, 0, &err), 0u);
  EXPECT_EQ(err, -ENOMEM);
  EXPECT_EQ(reg.region_count(), 4u);
  ASSERT_EQ(reg.deregister(s[2]), 0);
  EXPECT_EQ(reg.deregister(s[2]), -ENOENT);
  Stag again = reg.register_region(pd, b.data(), 8, 0, 0, &err);
  ASSERT_EQ(err, 0);
  // The same slot came back, under a different key, and the old STag stays dead.
  EXPECT_EQ(stag_index(again) & 3, stag_index(s[2]) & 3);
  EXPECT_NE(stag_key(again), stag_key(s[2]));
  EXPECT_EQ(reg.check(s[2], pd, 0, 0, 0, 1).result, AccessResult::InvalidStag);
  EXPECT_EQ(reg.check(again, pd, 0, 0, 0, 1).result, AccessResult::Ok);
}

TEST(RegistryStag, NeverZeroSparseAndKeysDifferOnReuse) {
  Registry reg(1);  // a single slot: every registration reuses it
  uint32_t pd = reg.alloc_pd();
  std::array<uint8_t, 8> b{};
  std::set<uint32_t> indices;
  Stag prev = 0;
  for (int i = 0; i < 2000; ++i) {
    int err;
    Stag s = reg.register_region(pd, b.data(), 8, 0, 0, &err);
    ASSERT_NE(s, 0u);
    ASSERT_EQ(err, 0);
    if (prev) {
      ASSERT_NE(stag_key(s), stag_key(prev)) << i;
    }
    indices.insert(stag_index(s));
    prev = s;
    ASSERT_EQ(reg.deregister(s), 0);
  }
  // The index bits above the slot number are random: 2000 draws from 2^24 hardly collide, and
  // they spread over the whole range (RFC 5040 §8.1.1(8)).
  EXPECT_GT(indices.size(), 1900u);
  EXPECT_GT(*indices.rbegin(), 1u << 23);
  EXPECT_LT(*indices.begin(), 1u << 22);
}

TEST_F(RegistryTest, ReregKeyKeepsIndexAndKillsOldStag) {
  Stag fresh = 0;
  ASSERT_EQ(reg_.rereg_key(stag_, &fresh), 0);
  EXPECT_EQ(stag_index(fresh), stag_index(stag_));
  EXPECT_NE(stag_key(fresh), stag_key(stag_));
  EXPECT_EQ(reg_.check(stag_, pd_, 0, 0, kIova, 1).result, AccessResult::InvalidStag);
  EXPECT_EQ(reg_.check(fresh, pd_, 0, 0, kIova, 1).host, buf_.data());
  EXPECT_EQ(reg_.rereg_key(stag_, &fresh), -ENOENT);
  EXPECT_EQ(reg_.deregister(stag_), -ENOENT);
  EXPECT_EQ(reg_.deregister(fresh), 0);
}

TEST_F(RegistryTest, LocalInvalidateAndRevalidate) {
  ASSERT_EQ(reg_.invalidate_local(stag_), 0);
  EXPECT_EQ(chk(kIova, 1).result, AccessResult::InvalidStag);
  EXPECT_EQ(reg_.invalidate_local(stag_), -ENOENT);  // already invalid
  RegionInfo info{};
  ASSERT_EQ(reg_.query(stag_, &info), 0);
  EXPECT_FALSE(info.valid);
  ASSERT_EQ(reg_.revalidate(stag_), 0);
  EXPECT_EQ(chk(kIova, 1).result, AccessResult::Ok);
  EXPECT_EQ(reg_.revalidate(stag_ ^ 0x80), -ENOENT);
  EXPECT_EQ(reg_.invalidate_local(stag_ ^ 0x80), -ENOENT);
}

TEST_F(RegistryTest, RemoteInvalidateRules) {
  ASSERT_EQ(reg_.bind_stream(stag_, 7), 0);
  // RFC 5040 §7.2 items 4-5: valid STag, associated to this stream (and this PD).
  EXPECT_EQ(reg_.invalidate_remote(stag_ ^ 1, pd_, 7), AccessResult::InvalidStag);
  EXPECT_EQ(reg_.invalidate_remote(stag_, pd_ + 1, 7), AccessResult::PdMismatch);
  EXPECT_EQ(reg_.invalidate_remote(stag_, pd_, 8), AccessResult::StreamMismatch);
  // RFC 5040 §8.1.1(7): not allowed for an STag shared by several streams.
  ASSERT_EQ(reg_.set_remote_invalidate(stag_, false), 0);
  EXPECT_EQ(reg_.invalidate_remote(stag_, pd_, 7), AccessResult::AccessDenied);
  EXPECT_EQ(chk(kIova, 1).result, AccessResult::Ok);  // failed attempts change nothing
  ASSERT_EQ(reg_.set_remote_invalidate(stag_, true), 0);
  EXPECT_EQ(reg_.invalidate_remote(stag_, pd_, 7), AccessResult::Ok);
  EXPECT_EQ(chk(kIova, 1).result, AccessResult::InvalidStag);
  // Invalidating an invalid STag is an error (§7.2 item 4).
  EXPECT_EQ(reg_.invalidate_remote(stag_, pd_, 7), AccessResult::InvalidStag);
  ASSERT_EQ(reg_.revalidate(stag_), 0);
  ASSERT_EQ(reg_.bind_stream(stag_, 0), 0);
  EXPECT_EQ(reg_.invalidate_remote(stag_, pd_, 99), AccessResult::Ok);  // unbound: any stream
  EXPECT_EQ(reg_.set_remote_invalidate(stag_ ^ 1, true), -ENOENT);
}

TEST_F(RegistryTest, DeallocPdBusyWhileRegionsUseIt) {
  EXPECT_EQ(reg_.dealloc_pd(pd_), -EBUSY);
  EXPECT_EQ(reg_.dealloc_pd(pd_ + 1000), -EINVAL);
  ASSERT_EQ(reg_.deregister(stag_), 0);
  EXPECT_EQ(reg_.region_count(), 0u);
  EXPECT_EQ(reg_.dealloc_pd(pd_), 0);
  EXPECT_EQ(reg_.dealloc_pd(pd_), -EINVAL);
  int err = 0;
  EXPECT_EQ(reg_.register_region(pd_, buf_.data(), 8, 0, 0, &err), 0u);
  EXPECT_EQ(err, -EINVAL);
  uint32_t again = reg_.alloc_pd();
  EXPECT_NE(again, 0u);
}

TEST(RegistryNames, EveryResultHasAName) {
  EXPECT_STREQ(access_result_name(AccessResult::Ok), "Ok");
  EXPECT_STREQ(access_result_name(AccessResult::InvalidStag), "InvalidStag");
  EXPECT_STREQ(access_result_name(AccessResult::PdMismatch), "PdMismatch");
  EXPECT_STREQ(access_result_name(AccessResult::StreamMismatch), "StreamMismatch");
  EXPECT_STREQ(access_result_name(AccessResult::AccessDenied), "AccessDenied");
  EXPECT_STREQ(access_result_name(AccessResult::BaseBounds), "BaseBounds");
  EXPECT_STREQ(access_result_name(AccessResult::ToWrap), "ToWrap");
}

TEST_F(RegistryTest, PinHoldsOffDeregister) {
  Registry::Pin p = reg_.pin(stag_, pd_, 7, kRemoteWrite, kIova + 8, 8);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p.mapping().host, buf_.data() + 8);
  Registry::Pin bad = reg_.pin(stag_, pd_ + 1, 7, kRemoteWrite, kIova, 8);
  EXPECT_EQ(bad.mapping().result, AccessResult::PdMismatch);
  std::atomic<bool> done{false};
  std::thread t([&] {
    EXPECT_EQ(reg_.deregister(stag_), 0);
    done = true;
  });
  // Deregistration begins (new checks fail) but waits for the pin. Polled, not slept for: on a
  // loaded machine the thread may start late.
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (chk(kIova, 1).result == AccessResult::Ok && std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  EXPECT_EQ(chk(kIova, 1).result, AccessResult::InvalidStag);
  EXPECT_FALSE(done.load());
  Registry::Pin moved = std::move(p);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_FALSE(done.load());
  moved.release();
  t.join();
  EXPECT_TRUE(done.load());
  EXPECT_EQ(reg_.region_count(), 0u);
}

// Invalidating a region (a Local Invalidate, or a Send with Invalidate from the peer) waits for a
// placement in progress through it, as deregistration does: once the invalidation completes, the
// application may reuse the memory, and no write through the STag may still land in it.
TEST_F(RegistryTest, InvalidationWaitsForALivePin) {
  for (const bool remote : {false, true}) {
    SCOPED_TRACE(remote ? "remote" : "local");
    Registry::Pin p = reg_.pin(stag_, pd_, 7, kRemoteWrite, kIova, 8);
    ASSERT_TRUE(p.ok());
    std::atomic<bool> done{false};
    std::thread t([&] {
      if (remote)
        EXPECT_EQ(reg_.invalidate_remote(stag_, pd_, 7), AccessResult::Ok);
      else
        EXPECT_EQ(reg_.invalidate_local(stag_), 0);
      done = true;
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    EXPECT_EQ(chk(kIova, 1).result, AccessResult::InvalidStag);  // new accesses fail at once
    EXPECT_FALSE(done.load()) << "the region was invalidated under a live Pin";
    p.release();
    t.join();
    EXPECT_TRUE(done.load());
    ASSERT_EQ(reg_.revalidate(stag_), 0);
  }
}

// ibv_rereg_mr: each of PD, translation and access changes alone, the STag stays.
TEST_F(RegistryTest, ReregisterChangesWhatItNamesAndKeepsTheStag) {
  std::array<uint8_t, 2 * kLen> other{};
  ASSERT_EQ(reg_.bind_stream(stag_, 7), 0);
  ASSERT_EQ(reg_.reregister(stag_, {.translation = {{other.data(), 2 * kLen, 0x5000}}}), 0);
  EXPECT_EQ(reg_.check(stag_, pd_, 7, kRemoteWrite, 0x5000 + kLen, 8).host, other.data() + kLen);
  EXPECT_EQ(chk(kIova, 1).result, AccessResult::BaseBounds);  // the old translation is gone
  EXPECT_EQ(reg_.check(stag_, pd_, 8, kRemoteWrite, 0x5000, 1).result,
            AccessResult::StreamMismatch);  // the stream association stays

  ASSERT_EQ(reg_.reregister(stag_, {.access = kLocalWrite | kRemoteRead}), 0);
  EXPECT_EQ(reg_.check(stag_, pd_, 7, kRemoteWrite, 0x5000, 1).result, AccessResult::AccessDenied);
  EXPECT_EQ(reg_.check(stag_, pd_, 7, kRemoteRead, 0x5000, 1).host, other.data());

  const uint32_t pd2 = reg_.alloc_pd();
  ASSERT_EQ(reg_.reregister(stag_, {.pd = pd2}), 0);
  EXPECT_EQ(reg_.check(stag_, pd_, 7, kRemoteRead, 0x5000, 1).result, AccessResult::PdMismatch);
  EXPECT_EQ(reg_.check(stag_, pd2, 7, kRemoteRead, 0x5000, 1).result, AccessResult::Ok);
  EXPECT_EQ(reg_.dealloc_pd(pd_), 0);  // the region moved to pd2
  EXPECT_EQ(reg_.dealloc_pd(pd2), -EBUSY);

  RegionInfo info{};
  ASSERT_EQ(reg_.query(stag_, &info), 0);
  EXPECT_EQ(info.length, 2 * kLen);
  EXPECT_EQ(reg_.region_count(), 1u);
}

TEST_F(RegistryTest, ReregisterRefusesWhatRegistrationRefuses) {
  EXPECT_EQ(reg_.reregister(stag_ ^ 1, {.access = kRemoteRead}), -ENOENT);
  EXPECT_EQ(reg_.reregister(stag_, {.pd = pd_ + 100}), -EINVAL);
  EXPECT_EQ(reg_.reregister(stag_, {.access = kRemoteWrite}), -EINVAL);  // without local write
  EXPECT_EQ(reg_.reregister(stag_, {.translation = {{nullptr, 8, 0}}}), -EINVAL);
  EXPECT_EQ(reg_.reregister(stag_, {.translation = {{buf_.data(), 16, UINT64_MAX - 8}}}), -EINVAL);
  EXPECT_EQ(chk(kIova, kLen).host, buf_.data());  // unchanged by the refusals
}

// A placement in progress under the old translation (a Pin) holds reregister() until it ends,
// so the old buffer may be freed once it returns; placements after the change use the new one
// at once, even while that wait lasts, and never fail for it.
TEST_F(RegistryTest, ReregisterWaitsForOldPinsOnlyAndNeverInvalidates) {
  std::array<uint8_t, kLen> other{};
  Registry::Pin old = reg_.pin(stag_, pd_, 7, kRemoteWrite, kIova, 8);
  ASSERT_TRUE(old.ok());
  std::atomic<bool> done{false};
  std::thread t([&] {
    EXPECT_EQ(reg_.reregister(stag_, {.translation = {{other.data(), kLen, kIova}}}), 0);
    done = true;
  });
  while (chk(kIova, 1).host != other.data()) std::this_thread::yield();
  // Changed, still waiting: new Pins map the new buffer and do not hold it up.
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_FALSE(done.load()) << "reregister returned under a live Pin of the old translation";
  Registry::Pin fresh = reg_.pin(stag_, pd_, 7, kRemoteWrite, kIova, 8);
  ASSERT_TRUE(fresh.ok());
  EXPECT_EQ(fresh.mapping().host, other.data());
  EXPECT_EQ(reg_.reregister(stag_, {.access = kLocalWrite}), -EBUSY);  // one at a time
  EXPECT_EQ(reg_.deregister(stag_), -EBUSY);
  old.release();
  t.join();
  EXPECT_TRUE(done.load());
  // The next change waits for `fresh`, taken under the epoch that is now the old one.
  done = false;
  std::thread t2([&] {
    EXPECT_EQ(reg_.reregister(stag_, {.translation = {{buf_.data(), kLen, kIova}}}), 0);
    done = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_FALSE(done.load());
  fresh.release();
  t2.join();
  EXPECT_EQ(chk(kIova, 1).host, buf_.data());
}

// Placements racing re-registrations back and forth between two buffers: every Pin maps one of
// the two whole, and a buffer is never in use by a Pin once reregister() moved away from it
// (checked with a per-buffer count of live Pins, read when reregister() returns).
TEST(RegistryConcurrency, PinsRacingReregisterSeeOneTranslationWhole) {
  Registry reg;
  const uint32_t pd = reg.alloc_pd();
  std::array<std::array<uint8_t, 256>, 2> bufs{};
  int err = 0;
  const Stag stag =
      reg.register_region(pd, bufs[0].data(), 256, 0x1000, kLocalWrite | kRemoteWrite, &err);
  ASSERT_EQ(err, 0);
  std::array<std::atomic<int>, 2> live{};
  std::atomic<bool> stop{false};
  std::atomic<long> bad{0}, pins{0};
  std::vector<std::thread> readers;
  for (int i = 0; i < 2; ++i)
    readers.emplace_back([&] {
      while (!stop.load(std::memory_order_relaxed)) {
        Registry::Pin p = reg.pin(stag, pd, 0, kRemoteWrite, 0x1000, 256);
        if (!p.ok()) {
          ++bad;
          continue;
        }
        const int which = p.mapping().host == bufs[0].data()   ? 0
                          : p.mapping().host == bufs[1].data() ? 1
                                                               : -1;
        if (which < 0) {
          ++bad;
          continue;
        }
        ++live[which];
        ++pins;
        --live[which];
      }
    });
  // Until both sides did enough: the readers may start after many rounds.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  for (int round = 1;
       (round <= 2000 || pins.load() < 20000) && std::chrono::steady_clock::now() < deadline;
       ++round) {
    const int to = round & 1;
    ASSERT_EQ(reg.reregister(stag, {.translation = {{bufs[to].data(), 256, 0x1000}}}), 0);
    EXPECT_EQ(live[1 - to].load(), 0) << "a Pin of the buffer left behind outlived reregister";
  }
  stop = true;
  for (auto& t : readers) t.join();
  EXPECT_EQ(bad.load(), 0);
  EXPECT_GE(pins.load(), 20000);
}

TEST(RegistryConcurrency, CheckWhileOthersRegisterAndDeregister) {
  Registry reg(64);
  uint32_t pd = reg.alloc_pd();
  constexpr int kBufs = 16;
  static std::array<std::array<uint8_t, 256>, kBufs> bufs;
  int err;
  // Stable regions that must stay Ok throughout.
  std::vector<Stag> stable;
  for (int i = 0; i < 8; ++i)
    stable.push_back(
        reg.register_region(pd, bufs[i].data(), 256, uint64_t(i) << 32, kRemoteRead, &err));
  // The churner publishes (stag, k) of the region it just registered on bufs[k] with iova k<<32.
  std::atomic<uint64_t> published{0};
  std::atomic<bool> stop{false};
  std::atomic<long> churned{0}, seen_ok{0}, seen_invalid{0};
  std::thread churn([&] {
    for (int n = 0; !stop; ++n) {
      int k = 8 + n % 8, e;
      Stag s = reg.register_region(pd, bufs[k].data(), 256, uint64_t(k) << 32, kRemoteRead, &e);
      ASSERT_EQ(e, 0);
      published.store(uint64_t(s) << 32 | uint32_t(k), std::memory_order_release);
      ASSERT_EQ(reg.deregister(s), 0);
      churned++;
    }
  });
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(300);
  long iters = 0;
  while (std::chrono::steady_clock::now() < deadline) {
    for (int i = 0; i < 8; ++i) {
      Mapping m = reg.check(stable[i], pd, 0, kRemoteRead, (uint64_t(i) << 32) + 10, 10);
      ASSERT_EQ(m.result, AccessResult::Ok);
      ASSERT_EQ(m.host, bufs[i].data() + 10);
    }
    uint64_t pub = published.load(std::memory_order_acquire);
    if (pub) {
      Stag s = Stag(pub >> 32);
      int k = int(pub & 0xffffffff);
      Mapping m = reg.check(s, pd, 0, kRemoteRead, (uint64_t(k) << 32) + 255, 1);
      // Either still registered (and then exactly the right buffer: no torn snapshot) or gone.
      if (m.result == AccessResult::Ok) {
        ASSERT_EQ(m.host, bufs[k].data() + 255);
        seen_ok++;
      } else {
        ASSERT_EQ(m.result, AccessResult::InvalidStag);
        seen_invalid++;
      }
    }
    ++iters;
  }
  stop = true;
  churn.join();
  EXPECT_GT(churned.load(), 100);
  EXPECT_GT(iters, 1000);
  EXPECT_EQ(reg.region_count(), 8u);
  std::printf("[          ] %ld check rounds, %ld churn cycles, %ld ok / %ld invalid\n", iters,
              churned.load(), seen_ok.load(), seen_invalid.load());
}

}  // namespace
}  // namespace uiw::memory

namespace uiw::memory {
namespace {

// register_region_with_stag: the provider registers under the STag uiw.ko allocated.
TEST(RegistryGivenStag, RegistersUnderTheGivenStagAndChecksLikeAnyRegion) {
  Registry reg(16);
  const uint32_t pd = reg.alloc_pd();
  std::array<uint8_t, 64> b{};
  const Stag given = (0x000123u << 8) | 0x5a;  // index 0x123 (slot 3 of 16), key 0x5a
  ASSERT_EQ(reg.register_region_with_stag(given, pd, b.data(), b.size(), 0x1000,
                                          kLocalWrite | kRemoteWrite),
            0);
  EXPECT_EQ(reg.region_count(), 1u);
  Mapping m = reg.check(given, pd, 0, kRemoteWrite, 0x1010, 8);
  EXPECT_EQ(m.result, AccessResult::Ok);
  EXPECT_EQ(m.host, b.data() + 0x10);
  // Same index, other key: not this region (RFC 5040 §8.1.1(8): the key is part of the STag).
  EXPECT_EQ(reg.check(given ^ 0x01, pd, 0, 0, 0x1000, 1).result, AccessResult::InvalidStag);
  EXPECT_EQ(reg.check(given, pd, 0, kRemoteRead, 0x1000, 1).result, AccessResult::AccessDenied);
  EXPECT_EQ(reg.check(given, pd + 1, 0, 0, 0x1000, 1).result, AccessResult::PdMismatch);
  ASSERT_EQ(reg.deregister(given), 0);
  EXPECT_EQ(reg.check(given, pd, 0, 0, 0x1000, 1).result, AccessResult::InvalidStag);
  EXPECT_EQ(reg.region_count(), 0u);
  // The slot is free again: the same STag can be registered once more.
  EXPECT_EQ(reg.register_region_with_stag(given, pd, b.data(), b.size(), 0, 0), 0);
}

TEST(RegistryGivenStag, SlotCollisionIsEbusyAndLeavesTheLiveRegionAlone) {
  Registry reg(16);
  const uint32_t pd = reg.alloc_pd();
  std::array<uint8_t, 8> b{};
  const Stag first = (0x000005u << 8) | 0x11;   // slot 5
  const Stag second = (0x000015u << 8) | 0x22;  // index 0x15: slot 5 again
  ASSERT_EQ(reg.register_region_with_stag(first, pd, b.data(), 8, 0, 0), 0);
  EXPECT_EQ(reg.register_region_with_stag(second, pd, b.data(), 8, 0, 0), -EBUSY);
  EXPECT_EQ(reg.check(first, pd, 0, 0, 0, 8).result, AccessResult::Ok);
  EXPECT_EQ(reg.check(second, pd, 0, 0, 0, 8).result, AccessResult::InvalidStag);
  EXPECT_EQ(reg.region_count(), 1u);
  // A random registration never takes a slot a given STag holds, and vice versa.
  int err = 1;
  std::vector<Stag> rnd;
  for (int i = 0; i < 15; ++i) {
    rnd.push_back(reg.register_region(pd, b.data(), 8, 0, 0, &err));
    ASSERT_EQ(err, 0);
    EXPECT_NE(stag_index(rnd.back()) & 15, 5u);
  }
  EXPECT_EQ(reg.register_region(pd, b.data(), 8, 0, 0, &err), 0u);
  EXPECT_EQ(err, -ENOMEM);
  EXPECT_EQ(reg.register_region_with_stag((0x000007u << 8) | 1, pd, b.data(), 8, 0, 0), -EBUSY);
}

TEST(RegistryGivenStag, RejectsStagZeroUnknownPdAndBadArguments) {
  Registry reg(16);
  const uint32_t pd = reg.alloc_pd();
  std::array<uint8_t, 8> b{};
  EXPECT_EQ(reg.register_region_with_stag(0, pd, b.data(), 8, 0, 0), -EINVAL);
  EXPECT_EQ(reg.register_region_with_stag(0x100, pd + 7, b.data(), 8, 0, 0), -EINVAL);
  EXPECT_EQ(reg.register_region_with_stag(0x100, pd, b.data(), 8, 0, kRemoteWrite), -EINVAL);
  EXPECT_EQ(reg.register_region_with_stag(0x100, pd, nullptr, 8, 0, 0), -EINVAL);
  EXPECT_EQ(reg.register_region_with_stag(0x100, pd, b.data(), 8, UINT64_MAX, 0), -EINVAL);
  EXPECT_EQ(reg.region_count(), 0u);
  // The PD now has a region: dealloc_pd refuses until it is gone.
  ASSERT_EQ(reg.register_region_with_stag(0x100, pd, b.data(), 8, 0, 0), 0);
  EXPECT_EQ(reg.dealloc_pd(pd), -EBUSY);
  ASSERT_EQ(reg.deregister(0x100), 0);
  EXPECT_EQ(reg.dealloc_pd(pd), 0);
}

}  // namespace
}  // namespace uiw::memory

namespace uiw::memory {
namespace {

// Memory windows over a region with the bind right: bounds, rights, stream, invalidation,
// the region kept while windows are bound, and pins waited for when a window goes.
class MemoryWindowTest : public ::testing::Test {
 protected:
  void SetUp() override {
    pd_ = reg_.alloc_pd();
    int err = 1;
    mr_ = reg_.register_region(pd_, buf_.data(), kLen, kIova, kLocalWrite | kRemoteRead | kMwBind,
                               &err);
    ASSERT_EQ(err, 0);
  }
  Stag window(MwType t) {
    int err = 1;
    const Stag s = reg_.alloc_mw(pd_, t, &err);
    EXPECT_EQ(err, 0);
    return s;
  }
  Registry reg_;
  std::array<uint8_t, kLen> buf_{};
  uint32_t pd_ = 0;
  Stag mr_ = 0;
};

TEST_F(MemoryWindowTest, ABoundWindowMapsItsPartOfTheRegionOnly) {
  const Stag mw = window(MwType::Type1);
  EXPECT_EQ(reg_.check(mw, pd_, 0, kRemoteRead, kIova, 1).result, AccessResult::InvalidStag);
  Stag bound = 0;
  ASSERT_EQ(reg_.bind_mw(mw, 0x42, mr_, kIova + 1024, 512, kRemoteRead | kRemoteWrite, 0, &bound),
            0);
  EXPECT_EQ(stag_index(bound), stag_index(mw));
  EXPECT_EQ(stag_key(bound), 0x42);
  EXPECT_EQ(reg_.check(mw, pd_, 0, kRemoteRead, kIova + 1024, 8).result,
            AccessResult::InvalidStag);  // the old key
  Mapping m = reg_.check(bound, pd_, 9, kRemoteWrite, kIova + 1024 + 100, 8);
  ASSERT_EQ(m.result, AccessResult::Ok);
  EXPECT_EQ(m.host, buf_.data() + 1124);
  EXPECT_EQ(reg_.check(bound, pd_, 9, kRemoteRead, kIova + 1024 + 510, 8).result,
            AccessResult::BaseBounds);
  EXPECT_EQ(reg_.check(bound, pd_, 9, kRemoteRead, kIova, 8).result, AccessResult::BaseBounds);
  EXPECT_EQ(reg_.check(bound, pd_, 9, kRemoteAtomic, kIova + 1024, 8).result,
            AccessResult::AccessDenied);
  EXPECT_EQ(reg_.check(bound, pd_ + 1, 9, kRemoteRead, kIova + 1024, 8).result,
            AccessResult::PdMismatch);
  // A type 1 window cannot be invalidated, locally or by the peer; a rebind moves it.
  EXPECT_EQ(reg_.invalidate_local(bound), -EINVAL);
  EXPECT_EQ(reg_.invalidate_remote(bound, pd_, 9), AccessResult::AccessDenied);
  Stag moved = 0;
  ASSERT_EQ(reg_.bind_mw(bound, 0x43, mr_, kIova, 64, kRemoteRead, 0, &moved), 0);
  EXPECT_EQ(reg_.check(bound, pd_, 9, kRemoteRead, kIova + 1024, 8).result,
            AccessResult::InvalidStag);
  EXPECT_EQ(reg_.check(moved, pd_, 9, kRemoteRead, kIova, 64).result, AccessResult::Ok);
  // A zero-length bind unbinds it.
  ASSERT_EQ(reg_.bind_mw(moved, 0x44, mr_, kIova, 0, kRemoteRead, 0, nullptr), 0);
  EXPECT_EQ(reg_.check(moved, pd_, 9, kRemoteRead, kIova, 8).result, AccessResult::InvalidStag);
}

TEST_F(MemoryWindowTest, BindRulesAreChecked) {
  const Stag mw = window(MwType::Type1);
  Stag out;
  EXPECT_EQ(reg_.bind_mw(mw, 1, mr_, kIova + kLen - 8, 16, kRemoteRead, 0, &out), -EINVAL);
  EXPECT_EQ(reg_.bind_mw(mw, 1, mr_, kIova - 8, 16, kRemoteRead, 0, &out), -EINVAL);
  EXPECT_EQ(reg_.bind_mw(mw, 1, mr_, kIova, 16, kLocalWrite, 0, &out), -EINVAL);  // remote only
  EXPECT_EQ(reg_.bind_mw(mw, 1, 0x12345678, kIova, 16, kRemoteRead, 0, &out), -ENOENT);
  EXPECT_EQ(reg_.bind_mw(0x12345678, 1, mr_, kIova, 16, kRemoteRead, 0, &out), -ENOENT);
  EXPECT_EQ(reg_.bind_mw(mr_, 1, mr_, kIova, 16, kRemoteRead, 0, &out), -ENOENT);  // not a window
  // The region lacks the bind right; or local write, which remote write needs.
  int err;
  const Stag plain = reg_.register_region(pd_, buf_.data(), kLen, kIova, kLocalWrite, &err);
  EXPECT_EQ(reg_.bind_mw(mw, 1, plain, kIova, 16, kRemoteRead, 0, &out), -EINVAL);
  const Stag ro = reg_.register_region(pd_, buf_.data(), kLen, kIova, kMwBind, &err);
  EXPECT_EQ(reg_.bind_mw(mw, 1, ro, kIova, 16, kRemoteWrite, 0, &out), -EINVAL);
  EXPECT_EQ(reg_.bind_mw(mw, 1, ro, kIova, 16, kRemoteRead, 0, &out), 0);
  // Another PD's region.
  const uint32_t pd2 = reg_.alloc_pd();
  const Stag other = reg_.register_region(pd2, buf_.data(), kLen, kIova, kMwBind, &err);
  EXPECT_EQ(reg_.bind_mw(out, 2, other, kIova, 16, kRemoteRead, 0, &out), -EINVAL);
}

TEST_F(MemoryWindowTest, Type2IsOneStreamsAndInvalidatedBeforeItsNextBind) {
  const Stag mw = window(MwType::Type2);
  Stag b;
  EXPECT_EQ(reg_.bind_mw(mw, 5, mr_, kIova, 64, kRemoteRead, 0, &b), -EINVAL);  // needs a stream
  ASSERT_EQ(reg_.bind_mw(mw, 5, mr_, kIova, 64, kRemoteRead, 7, &b), 0);
  EXPECT_EQ(reg_.check(b, pd_, 7, kRemoteRead, kIova, 8).result, AccessResult::Ok);
  EXPECT_EQ(reg_.check(b, pd_, 8, kRemoteRead, kIova, 8).result, AccessResult::StreamMismatch);
  EXPECT_EQ(reg_.bind_mw(b, 6, mr_, kIova, 64, kRemoteRead, 7, nullptr), -EINVAL);  // still bound
  // The peer of its stream may invalidate it (Send with Invalidate); another stream may not.
  EXPECT_EQ(reg_.invalidate_remote(b, pd_, 8), AccessResult::StreamMismatch);
  EXPECT_EQ(reg_.invalidate_remote(b, pd_, 7), AccessResult::Ok);
  EXPECT_EQ(reg_.check(b, pd_, 7, kRemoteRead, kIova, 8).result, AccessResult::InvalidStag);
  Stag b2;
  ASSERT_EQ(reg_.bind_mw(b, 6, mr_, kIova + 64, 64, kRemoteRead, 7, &b2), 0);
  EXPECT_EQ(reg_.invalidate_local(b2), 0);
  EXPECT_EQ(reg_.invalidate_local(b2), -ENOENT);
  EXPECT_EQ(reg_.dealloc_mw(b2), 0);
  EXPECT_EQ(reg_.dealloc_mw(b2), -ENOENT);
}

// ibv_dealloc_mw names a type 2 window by the rkey ibv_alloc_mw gave, which its binds (WRs with
// an rkey of their own) never change: that STag still frees the bound window and its region.
TEST_F(MemoryWindowTest, DeallocByTheAllocatedStagFreesAWindowBoundUnderAnotherKey) {
  const Stag mw = window(MwType::Type2);
  Stag b;
  ASSERT_EQ(reg_.bind_mw(mw, static_cast<uint8_t>(mw + 1), mr_, kIova, 64, kRemoteRead, 7, &b), 0);
  ASSERT_NE(b, mw);
  EXPECT_EQ(reg_.deregister(mr_), -EBUSY);
  EXPECT_EQ(reg_.dealloc_mw(mw), 0);
  EXPECT_EQ(reg_.check(b, pd_, 7, kRemoteRead, kIova, 8).result, AccessResult::InvalidStag);
  EXPECT_EQ(reg_.dealloc_mw(mw), -ENOENT);
  EXPECT_EQ(reg_.dealloc_mw(mr_), -ENOENT);  // a region is no window
  EXPECT_EQ(reg_.deregister(mr_), 0);
}

TEST_F(MemoryWindowTest, ARegionWithBoundWindowsStays) {
  const Stag mw = window(MwType::Type1);
  Stag b;
  ASSERT_EQ(reg_.bind_mw(mw, 9, mr_, kIova, 64, kRemoteRead, 0, &b), 0);
  EXPECT_EQ(reg_.deregister(mr_), -EBUSY);
  EXPECT_EQ(reg_.deregister(b), -EINVAL);  // a window goes with dealloc_mw
  EXPECT_EQ(reg_.dealloc_pd(pd_), -EBUSY);
  ASSERT_EQ(reg_.dealloc_mw(b), 0);
  EXPECT_EQ(reg_.deregister(mr_), 0);
  EXPECT_EQ(reg_.dealloc_pd(pd_), 0);
}

// Unbinding waits for a placement through the window in progress (a Pin), so the region the
// window maps can be deregistered, and freed, the moment the unbind returns.
TEST_F(MemoryWindowTest, InvalidationWaitsForALivePin) {
  const Stag mw = window(MwType::Type2);
  Stag b;
  ASSERT_EQ(reg_.bind_mw(mw, 3, mr_, kIova, 64, kRemoteRead, 7, &b), 0);
  std::atomic<bool> done{false};
  Registry::Pin pin = reg_.pin(b, pd_, 7, kRemoteRead, kIova, 8);
  ASSERT_TRUE(pin.ok());
  std::thread t([&] {
    EXPECT_EQ(reg_.invalidate_local(b), 0);
    done = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_FALSE(done.load()) << "the window was unbound under a live Pin";
  pin.release();
  t.join();
  EXPECT_TRUE(done.load());
  EXPECT_EQ(reg_.deregister(mr_), 0);  // the invalidated window holds the region no more
  EXPECT_EQ(reg_.dealloc_mw(b), 0);
}

}  // namespace
}  // namespace uiw::memory
