// memory::copy_to_app / copy_from_app: a fault on the application side is -EFAULT (unmapped,
// read-only, beyond the end of a file), the process lives, later copies and later faults behave,
// and a fault that is not a copy's still reaches what the application installed (or kills).
#include "memory/app_copy.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#include "wire/crc32c.h"

namespace uiw::memory {
namespace {

const size_t kPage = static_cast<size_t>(sysconf(_SC_PAGESIZE));

// Two pages, the second made unusable by the test.
class AppCopyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    map_ = static_cast<uint8_t*>(
        mmap(nullptr, 2 * kPage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
    ASSERT_NE(map_, MAP_FAILED);
  }
  void TearDown() override { munmap(map_, 2 * kPage); }
  uint8_t* map_ = nullptr;
};

TEST_F(AppCopyTest, CopiesBothWays) {
  std::vector<uint8_t> src(2 * kPage), back(2 * kPage);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<uint8_t>(i * 7);
  for (size_t n : {size_t{1}, size_t{8}, kPage + 3, 2 * kPage}) {
    ASSERT_EQ(copy_to_app(map_, src.data(), n), 0);
    ASSERT_EQ(copy_from_app(back.data(), map_, n), 0);
    EXPECT_EQ(std::memcmp(back.data(), src.data(), n), 0) << n;
  }
  EXPECT_EQ(copy_to_app(map_, src.data(), 0), 0);
  EXPECT_FALSE(app_copy_unsafe());
}

TEST_F(AppCopyTest, UnmappedDestinationIsEfaultAndTheNextCopiesWork) {
  ASSERT_EQ(munmap(map_ + kPage, kPage), 0);
  const std::vector<uint8_t> src(256, 0xAB);
  // Twice: the first fault must leave nothing behind (a signal left blocked would make the
  // second one kill the process).
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(copy_to_app(map_ + kPage + 8, src.data(), src.size()), -EFAULT);
    EXPECT_EQ(copy_to_app(map_, src.data(), src.size()), 0);
    EXPECT_EQ(map_[255], 0xAB);
  }
}

TEST_F(AppCopyTest, ReadOnlyDestinationIsEfault) {
  ASSERT_EQ(mprotect(map_ + kPage, kPage, PROT_READ), 0);
  const std::vector<uint8_t> src(64, 0xCD);
  EXPECT_EQ(copy_to_app(map_ + kPage - 32, src.data(), src.size()), -EFAULT);  // straddles
  EXPECT_EQ(map_[kPage], 0);
}

TEST_F(AppCopyTest, UnmappedSourceIsEfault) {
  ASSERT_EQ(munmap(map_ + kPage, kPage), 0);
  std::vector<uint8_t> dst(512);
  EXPECT_EQ(copy_from_app(dst.data(), map_ + kPage - 256, dst.size()), -EFAULT);
}

// A region over the whole address space (implicit ODP) lets a peer name any address: 0, a
// kernel address, a non-canonical one, the end of user space. Each is -EFAULT, and the process
// lives.
TEST(AppCopyAnyAddressTest, KernelAndNonCanonicalAddressesAreEfault) {
  const std::vector<uint8_t> src(64, 0x5A);
  std::vector<uint8_t> dst(64);
  std::vector<uintptr_t> addresses = {0, 0xffff888000000000ull, 0x8000000000000000ull,
                                      (uintptr_t{1} << 56) - 8};
#if defined(__x86_64__) && !defined(__SANITIZE_ADDRESS__)
  // Non-canonical with 4-level page tables: a general protection fault, which carries no
  // address (the guard takes it). AddressSanitizer's own check of the address faults first.
  addresses.push_back(0x0000800000000000ull);
#endif
  for (const uintptr_t at : addresses) {
    auto* p = reinterpret_cast<uint8_t*>(at);
    EXPECT_EQ(copy_to_app(p, src.data(), src.size()), -EFAULT) << std::hex << at;
    EXPECT_EQ(copy_from_app(dst.data(), p, dst.size()), -EFAULT) << std::hex << at;
    uint64_t old = 0;
    EXPECT_EQ(
        atomic_update_app(reinterpret_cast<uint64_t*>(at), &old, [](uint64_t v) { return v + 1; }),
        -EFAULT)
        << std::hex << at;
  }
}

// An RDMA atomic's target (RFC 7306): one atomic read-modify-write of the word, the original
// value returned; two threads updating one word lose no update; an unmapped or read-only word
// is -EFAULT and the process lives.
TEST_F(AppCopyTest, AtomicUpdateOfAnApplicationWord) {
  auto* w = reinterpret_cast<uint64_t*>(map_ + 64);
  *w = 40;
  uint64_t old = 0;
  ASSERT_EQ(atomic_update_app(w, &old, [](uint64_t v) { return v + 2; }), 0);
  EXPECT_EQ(old, 40u);
  EXPECT_EQ(*w, 42u);
  constexpr int kEach = 20000;
  auto add_ones = [w] {
    for (int i = 0; i < kEach; ++i) {
      uint64_t o;
      ASSERT_EQ(atomic_update_app(w, &o, [](uint64_t v) { return v + 1; }), 0);
    }
  };
  std::thread t1(add_ones), t2(add_ones);
  t1.join();
  t2.join();
  EXPECT_EQ(*w, 42u + 2 * kEach);
#if !defined(__SANITIZE_THREAD__)
  // (ThreadSanitizer builds use the kernel mechanism, which cannot tell a read-only word
  // before it writes: app_copy.h.)
  ASSERT_EQ(mprotect(map_ + kPage, kPage, PROT_READ), 0);
  EXPECT_EQ(atomic_update_app(reinterpret_cast<uint64_t*>(map_ + kPage), &old,
                              [](uint64_t v) { return v; }),
            -EFAULT);  // written even when the value stays
#endif
  ASSERT_EQ(munmap(map_ + kPage, kPage), 0);
  EXPECT_EQ(atomic_update_app(reinterpret_cast<uint64_t*>(map_ + kPage + 8), &old,
                              [](uint64_t v) { return v + 1; }),
            -EFAULT);
  EXPECT_EQ(*w, 42u + 2 * kEach);
}

// A send's CRC reads the source where it is: the same state as wire::crc32c_update, -EFAULT
// from the first unreadable page on, and later reads work.
TEST_F(AppCopyTest, CrcOfApplicationMemory) {
  for (size_t i = 0; i < 2 * kPage; ++i) map_[i] = static_cast<uint8_t>(i * 13);
  std::vector<uint8_t> bounce;
  for (size_t n : {size_t{0}, size_t{1}, size_t{8}, kPage + 3, 2 * kPage}) {
    uint32_t st = wire::kCrc32cInit;
    ASSERT_EQ(crc32c_update_from_app(&st, map_, n, bounce), 0);
    EXPECT_EQ(st, wire::crc32c_update(wire::kCrc32cInit, map_, n)) << n;
  }
  ASSERT_EQ(munmap(map_ + kPage, kPage), 0);
  for (int i = 0; i < 2; ++i) {
    uint32_t st = wire::kCrc32cInit;
    EXPECT_EQ(crc32c_update_from_app(&st, map_ + kPage - 100, 200, bounce), -EFAULT);
    st = wire::kCrc32cInit;
    EXPECT_EQ(crc32c_update_from_app(&st, map_, 100, bounce), 0);
    EXPECT_EQ(st, wire::crc32c_update(wire::kCrc32cInit, map_, 100));
  }
}

// A file mapping beyond the file's end raises SIGBUS, not SIGSEGV.
TEST(AppCopyFileTest, BeyondTheEndOfAFileIsEfault) {
  FILE* f = tmpfile();
  ASSERT_NE(f, nullptr);
  const int fd = fileno(f);
  ASSERT_EQ(ftruncate(fd, static_cast<off_t>(2 * kPage)), 0);
  auto* m =
      static_cast<uint8_t*>(mmap(nullptr, 2 * kPage, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0));
  ASSERT_NE(m, MAP_FAILED);
  ASSERT_EQ(ftruncate(fd, static_cast<off_t>(kPage)), 0);
  const std::vector<uint8_t> src(64, 1);
  std::vector<uint8_t> dst(64);
  EXPECT_EQ(copy_to_app(m + kPage, src.data(), src.size()), -EFAULT);
  EXPECT_EQ(copy_from_app(dst.data(), m + kPage, dst.size()), -EFAULT);
  EXPECT_EQ(copy_to_app(m, src.data(), src.size()), 0);
  munmap(m, 2 * kPage);
  fclose(f);
}

// A fault in the application's own code, after uiw's handler is in place, still ends the
// process (by SIGSEGV, or by a sanitizer's report and abort or exit status when one handles
// it): uiw must not swallow it, or resume the faulting code.
bool died_of_the_fault(int status) {
  return (WIFSIGNALED(status) && (WTERMSIG(status) == SIGSEGV || WTERMSIG(status) == SIGABRT)) ||
         (WIFEXITED(status) && WEXITSTATUS(status) != 0);
}

void copy_then_fault_outside_a_copy() {
  auto* m = static_cast<uint8_t*>(
      mmap(nullptr, kPage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  const uint8_t b = 1;
  if (copy_to_app(m, &b, 1) != 0) _exit(3);
  munmap(m, kPage);
  if (copy_to_app(m, &b, 1) != -EFAULT) _exit(4);
  *static_cast<volatile uint8_t*>(m) = 2;  // the application's own fault
  _exit(0);
}

TEST(AppCopyDeathTest, AFaultOutsideACopyStillKillsTheProcess) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(copy_then_fault_outside_a_copy(), died_of_the_fault, "");
}

// The application's handler, installed before uiw's first copy, gets the faults that are not
// a copy's, with their siginfo.
void* volatile g_app_fault_addr = nullptr;
void app_handler(int, siginfo_t* si, void*) {
  _exit(si->si_addr == g_app_fault_addr ? 42 : 43);
}

void install_app_handler_then_fault() {
  struct sigaction sa {};
  sa.sa_sigaction = app_handler;
  sa.sa_flags = SA_SIGINFO;
  sigemptyset(&sa.sa_mask);
  if (sigaction(SIGSEGV, &sa, nullptr) != 0) _exit(2);
  auto* m = static_cast<uint8_t*>(
      mmap(nullptr, kPage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  munmap(m, kPage);
  const uint8_t b = 1;
  if (copy_to_app(m, &b, 1) != -EFAULT) _exit(4);  // uiw's, not the application's
  g_app_fault_addr = m;
  *static_cast<volatile uint8_t*>(m) = 2;
  _exit(0);
}

TEST(AppCopyDeathTest, TheApplicationsHandlerStillGetsItsFaults) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");  // a fresh process: uiw installs after it
  EXPECT_EXIT(install_app_handler_then_fault(), testing::ExitedWithCode(42), "");
}

// UIW_APP_COPY=kernel: the system-call copy; the SIGSEGV handler stays what it was (none, or a
// sanitizer's).
void kernel_mode_copies() {
  setenv("UIW_APP_COPY", "kernel", 1);
  struct sigaction before {};
  sigaction(SIGSEGV, nullptr, &before);
  auto* m = static_cast<uint8_t*>(
      mmap(nullptr, 2 * kPage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  munmap(m + kPage, kPage);
  const std::vector<uint8_t> src(64, 5);
  if (copy_to_app(m, src.data(), src.size()) != 0 || m[63] != 5) _exit(3);
  if (copy_to_app(m + kPage, src.data(), src.size()) != -EFAULT) _exit(4);
  // The CRC read copies through the bounce buffer in pieces: larger than one piece, across
  // the pieces' boundary.
  std::vector<uint8_t> big(40000, 9), bounce;
  uint32_t st = wire::kCrc32cInit;
  if (crc32c_update_from_app(&st, big.data(), big.size(), bounce) != 0 ||
      st != wire::crc32c_update(wire::kCrc32cInit, big.data(), big.size()))
    _exit(6);
  if (crc32c_update_from_app(&st, m + kPage - 8, 16, bounce) != -EFAULT) _exit(7);
  // An atomic's target: checked through the kernel first, then updated in place.
  uint64_t old = 0;
  auto* w = reinterpret_cast<uint64_t*>(m + 8);
  *w = 5;
  if (atomic_update_app(w, &old, [](uint64_t v) { return v * 3; }) != 0 || old != 5 || *w != 15)
    _exit(8);
  if (atomic_update_app(reinterpret_cast<uint64_t*>(m + kPage), &old,
                        [](uint64_t v) { return v; }) != -EFAULT)
    _exit(9);
  struct sigaction after {};
  sigaction(SIGSEGV, nullptr, &after);
  _exit(after.sa_sigaction == before.sa_sigaction ? 0 : 5);
}

TEST(AppCopyDeathTest, KernelModeCopiesWithoutAHandler) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(kernel_mode_copies(), testing::ExitedWithCode(0), "");
}

}  // namespace
}  // namespace uiw::memory
