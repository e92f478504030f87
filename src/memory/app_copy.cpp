#include "memory/app_copy.h"

#include <pthread.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <csetjmp>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "wire/crc32c.h"

namespace uiw::memory {

namespace {

enum class Mode { Guarded, Kernel };

std::atomic<bool> g_unsafe{false};

void report_unsafe(const char* why) {
  if (!g_unsafe.exchange(true))
    std::fprintf(stderr,
                 "uiw: %s: placement falls back to memcpy; a registered page unmapped by the "
                 "application now crashes it\n",
                 why);
}

// --- guarded: memcpy, a fault in the application range ends the copy ---

// The copy in progress in this thread: the application range and where to resume on a fault.
struct FaultGuard {
  sigjmp_buf resume;
  uintptr_t lo, hi;
};

// initial-exec: the handler reads it, and a dynamically allocated TLS block (the provider is
// dlopen()ed) may be allocated by malloc on first access, which a signal handler must not do.
__attribute__((tls_model("initial-exec"))) thread_local FaultGuard* t_guard = nullptr;

struct sigaction g_prev_segv {};
struct sigaction g_prev_bus {};

// A fault that is not ours gets what it would have got without uiw: the previous handler, or
// the default action (a hardware fault re-executes the access and takes it; a sent signal is
// raised again).
void forward(int sig, siginfo_t* si, void* uc) {
  const struct sigaction& prev = sig == SIGBUS ? g_prev_bus : g_prev_segv;
  if (prev.sa_flags & SA_SIGINFO) {
    prev.sa_sigaction(sig, si, uc);
    return;
  }
  if (prev.sa_handler != SIG_DFL && prev.sa_handler != SIG_IGN) {
    prev.sa_handler(sig);
    return;
  }
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  sigaction(sig, &dfl, nullptr);
  if (si->si_code <= 0) raise(sig);
}

void on_fault(int sig, siginfo_t* si, void* uc) {
  FaultGuard* g = t_guard;
  const auto at = reinterpret_cast<uintptr_t>(si->si_addr);
  // si_code > 0: raised by the kernel for an access, not sent by kill() or sigqueue().
  // SI_KERNEL with no address: a general protection fault, which on x86-64 is what an access
  // to a non-canonical address raises (a page fault would give the address). Inside a copy,
  // whose other side is uiw's own memory, only the application address can be that (a peer's
  // offset into a region over the whole address space, an implicit ODP MR).
  if (g && si->si_code > 0 &&
      ((at >= g->lo && at < g->hi) || (si->si_code == SI_KERNEL && at == 0))) {
    t_guard = nullptr;
    siglongjmp(g->resume, 1);
  }
  forward(sig, si, uc);
}

// SA_NODEFER: the handler leaves by siglongjmp without restoring the signal mask (sigsetjmp
// saves none: that would be a system call per copy), so the signal must not be blocked while
// it runs. SA_ONSTACK: a thread with an alternate signal stack keeps using it.
[[maybe_unused]] bool install_handler() {
  struct sigaction sa {};
  sa.sa_sigaction = on_fault;
  sa.sa_flags = SA_SIGINFO | SA_NODEFER | SA_ONSTACK;
  sigemptyset(&sa.sa_mask);
  if (sigaction(SIGSEGV, &sa, &g_prev_segv) != 0) return false;
  if (sigaction(SIGBUS, &sa, &g_prev_bus) != 0) {
    sigaction(SIGSEGV, &g_prev_segv, nullptr);
    return false;
  }
  return true;
}

// Runs access() over the application range [app, app + n): 0, or -EFAULT when it faulted there.
template <typename Access>
int guarded(const void* app, size_t n, Access&& access) {
  FaultGuard g;
  g.lo = reinterpret_cast<uintptr_t>(app);
  g.hi = g.lo + n;
  if (sigsetjmp(g.resume, 0) != 0) return -EFAULT;
  t_guard = &g;
  // The handler runs in this thread: the guard must be in place before the first access and
  // gone only after the last (compiler ordering only).
  std::atomic_signal_fence(std::memory_order_seq_cst);
  access();
  std::atomic_signal_fence(std::memory_order_seq_cst);
  t_guard = nullptr;
  return 0;
}

// --- kernel: process_vm_writev / process_vm_readv on ourselves ---

// The calling process's pid, without a getpid() system call per copy: refreshed in the child
// of every fork() (pthread_atfork), so a child never addresses its parent's memory.
std::atomic<pid_t> g_self{0};

pid_t self_pid() {
  static const bool registered = [] {
    pthread_atfork(nullptr, nullptr, [] { g_self.store(getpid(), std::memory_order_relaxed); });
    return true;
  }();
  (void)registered;
  pid_t p = g_self.load(std::memory_order_relaxed);
  if (p == 0) {
    p = getpid();
    g_self.store(p, std::memory_order_relaxed);
  }
  return p;
}

// The kernel copies until the first page it cannot access and returns the count so far; a
// short count is that fault. A sandbox may forbid the calls (a seccomp filter answers EPERM or
// ENOSYS); the data path must still work, so it then copies directly and says so once.
int kernel_copy(void* dst, const void* src, size_t n, bool to_app) {
  const pid_t self = self_pid();
  iovec local{}, app{};
  if (to_app) {
    local = {const_cast<void*>(src), n};
    app = {dst, n};
  } else {
    local = {dst, n};
    app = {const_cast<void*>(src), n};
  }
  ssize_t r;
  do {
    r = to_app ? process_vm_writev(self, &local, 1, &app, 1, 0)
               : process_vm_readv(self, &local, 1, &app, 1, 0);
  } while (r < 0 && errno == EINTR);
  if (r == static_cast<ssize_t>(n)) return 0;
  if (r < 0 && (errno == ENOSYS || errno == EPERM)) {
    report_unsafe("process_vm_readv/writev refused");
    std::memcpy(dst, src, n);
    return 0;
  }
  return -EFAULT;
}

// UIW_APP_COPY=kernel chooses the system calls; anything else (or unset) the guarded memcpy,
// unless its handler cannot be installed. ThreadSanitizer builds always copy through the
// kernel: TSan routes SIGSEGV and SIGBUS through its own handler, which did not hand every
// fault on (a SIGBUS killed the process), and it would report the application side of each
// copy, written outside the memory model as an RNIC's DMA writes it, as a data race.
Mode mode() {
  static const Mode m = [] {
#if defined(__SANITIZE_THREAD__)
    return Mode::Kernel;
#else
    const char* v = std::getenv("UIW_APP_COPY");
    if (v && std::strcmp(v, "kernel") == 0) return Mode::Kernel;
    return install_handler() ? Mode::Guarded : Mode::Kernel;
#endif
  }();
  return m;
}

// Where user space ends: x86-64 with 5-level page tables gives a process at most 2^56 (57-bit
// canonical addresses, user half), arm64 at most 2^52; above is the kernel's or nothing.
#if defined(__x86_64__)
constexpr uintptr_t kUserAddressEnd = uintptr_t{1} << 56;
#elif defined(__aarch64__)
constexpr uintptr_t kUserAddressEnd = uintptr_t{1} << 52;
#else
constexpr uintptr_t kUserAddressEnd = UINTPTR_MAX;
#endif

// An application range no access can succeed on: address 0 (Linux maps nothing there,
// vm.mmap_min_addr, and C++ forbids passing a null pointer to memcpy), or one reaching past
// user space. A region over the whole address space (implicit ODP) lets a peer name such
// ranges; they fail before any access (an address between the 4-level and the 5-level limit
// faults, and the fault guard takes that).
bool outside_user_space(const void* app, size_t n) {
  const auto a = reinterpret_cast<uintptr_t>(app);
  return a == 0 || a >= kUserAddressEnd || n > kUserAddressEnd - a;
}

int transfer(void* dst, const void* src, size_t n, bool to_app) {
  if (n == 0) return 0;
  if (outside_user_space(to_app ? dst : src, n)) return -EFAULT;
  if (mode() == Mode::Guarded)
    return guarded(to_app ? dst : src, n, [&] { std::memcpy(dst, src, n); });
  // Once the kernel refused, no system call per copy to be refused again.
  if (g_unsafe.load(std::memory_order_relaxed)) {
    std::memcpy(dst, src, n);
    return 0;
  }
  return kernel_copy(dst, src, n, to_app);
}

}  // namespace

int copy_to_app(void* app_dst, const void* src, size_t n) {
  return transfer(app_dst, src, n, true);
}

int copy_from_app(void* dst, const void* app_src, size_t n) {
  return transfer(dst, app_src, n, false);
}

int crc32c_update_from_app(uint32_t* state, const void* app_src, size_t n,
                           std::vector<uint8_t>& bounce) {
  if (n == 0) return 0;
  if (outside_user_space(app_src, n)) return -EFAULT;
  if (mode() == Mode::Guarded)
    return guarded(app_src, n, [&] { *state = wire::crc32c_update(*state, app_src, n); });
  if (g_unsafe.load(std::memory_order_relaxed)) {
    *state = wire::crc32c_update(*state, app_src, n);
    return 0;
  }
  constexpr size_t kBounce = 16 << 10;
  if (bounce.empty()) bounce.resize(kBounce);
  const auto* p = static_cast<const uint8_t*>(app_src);
  for (size_t off = 0; off < n;) {
    const size_t k = std::min(n - off, bounce.size());
    if (kernel_copy(bounce.data(), p + off, k, false) != 0) return -EFAULT;
    *state = wire::crc32c_update(*state, bounce.data(), k);
    off += k;
  }
  return 0;
}

int atomic_update_app_raw(uint64_t* app_target, uint64_t* original,
                          uint64_t (*update)(const void* ctx, uint64_t v), const void* ctx) {
  if (outside_user_space(app_target, sizeof(uint64_t))) return -EFAULT;
  const auto cas_loop = [&] {
    uint64_t v = __atomic_load_n(app_target, __ATOMIC_RELAXED);
    while (!__atomic_compare_exchange_n(app_target, &v, update(ctx, v), false, __ATOMIC_SEQ_CST,
                                        __ATOMIC_RELAXED)) {
    }
    *original = v;
  };
  if (mode() == Mode::Guarded) return guarded(app_target, sizeof *app_target, cas_loop);
  if (!g_unsafe.load(std::memory_order_relaxed)) {
    uint64_t probe;
    if (kernel_copy(&probe, app_target, sizeof probe, false) != 0) return -EFAULT;
  }
  cas_loop();
  return 0;
}

bool app_copy_unsafe() {
  return g_unsafe.load(std::memory_order_relaxed);
}

}  // namespace uiw::memory
