#include "memory/app_copy.h"

#include <pthread.h>
#include <sys/uio.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>

namespace uiw::memory {

namespace {

std::atomic<bool> g_unsafe{false};

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

// A sandbox may forbid the calls (a seccomp filter answers EPERM or ENOSYS); the data path must
// still work, so it copies directly and says once that a fault now costs the process.
bool refused(int err) {
  if (err != ENOSYS && err != EPERM) return false;
  if (!g_unsafe.exchange(true))
    std::fprintf(stderr,
                 "uiw: process_vm_readv/writev refused (%s): placement falls back to memcpy; "
                 "a registered page unmapped by the application now crashes it\n",
                 std::strerror(err));
  return true;
}

// The kernel copies until the first page it cannot access and returns the count so far; a
// short count is that fault.
int transfer(void* dst, const void* src, size_t n, bool to_app) {
  if (n == 0) return 0;
  if (g_unsafe.load(std::memory_order_relaxed)) {
    std::memcpy(dst, src, n);
    return 0;
  }
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
  if (r < 0 && refused(errno)) {
    std::memcpy(dst, src, n);
    return 0;
  }
  return -EFAULT;
}

}  // namespace

int copy_to_app(void* app_dst, const void* src, size_t n) {
  return transfer(app_dst, src, n, true);
}

int copy_from_app(void* dst, const void* app_src, size_t n) {
  return transfer(dst, app_src, n, false);
}

bool app_copy_unsafe() {
  return g_unsafe.load(std::memory_order_relaxed);
}

}  // namespace uiw::memory
