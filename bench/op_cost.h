// OpCost: what a benchmark run cost the machine, for "per operation" columns: system calls,
// context switches and CPU time of this process, its threads and the children it forks while
// counting (both ends of a two-process benchmark).
//
// Counted by the kernel (perf_event_open, inherit=1): system calls through the
// raw_syscalls:sys_enter tracepoint (its id from tracefs), context switches and task-clock as
// software events; a read covers every thread and child, running or exited. The CPU time comes
// from getrusage (RUSAGE_SELF + RUSAGE_CHILDREN), which counts a child once it was reaped: read
// after waitpid. Where perf events are not allowed (kernel.perf_event_paranoid, no tracefs)
// those columns read "n/a".
#pragma once

#include <linux/perf_event.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <initializer_list>

namespace uiw::bench {

struct Cost {
  double syscalls = -1;  // -1: not counted here
  double ctx_switches = -1;
  double cpu_us = 0;  // user + system, all counted tasks
};

class OpCost {
 public:
  OpCost() {
    syscalls_fd_ = open_counter(PERF_TYPE_TRACEPOINT, tracepoint_id());
    ctx_fd_ = open_counter(PERF_TYPE_SOFTWARE, PERF_COUNT_SW_CONTEXT_SWITCHES);
    rusage_cpu_us(&self0_, &children0_);
  }
  ~OpCost() {
    if (syscalls_fd_ >= 0) close(syscalls_fd_);
    if (ctx_fd_ >= 0) close(ctx_fd_);
  }
  OpCost(const OpCost&) = delete;
  OpCost& operator=(const OpCost&) = delete;

  // Everything counted since construction, divided by ops. Call after the children were reaped.
  Cost per_op(double ops) const {
    Cost c;
    if (ops <= 0) return c;
    uint64_t v;
    if (syscalls_fd_ >= 0 && read(syscalls_fd_, &v, sizeof v) == sizeof v) c.syscalls = v / ops;
    if (ctx_fd_ >= 0 && read(ctx_fd_, &v, sizeof v) == sizeof v) c.ctx_switches = v / ops;
    double self, children;
    rusage_cpu_us(&self, &children);
    c.cpu_us = (self - self0_ + children - children0_) / ops;
    return c;
  }

 private:
  static uint64_t tracepoint_id() {
    for (const char* p : {"/sys/kernel/tracing/events/raw_syscalls/sys_enter/id",
                          "/sys/kernel/debug/tracing/events/raw_syscalls/sys_enter/id"}) {
      if (FILE* f = std::fopen(p, "r")) {
        unsigned long long id = 0;
        const bool ok = std::fscanf(f, "%llu", &id) == 1;
        std::fclose(f);
        if (ok) return id;
      }
    }
    return UINT64_MAX;
  }

  static int open_counter(uint32_t type, uint64_t config) {
    if (config == UINT64_MAX) return -1;
    perf_event_attr a;
    std::memset(&a, 0, sizeof a);
    a.size = sizeof a;
    a.type = type;
    a.config = config;
    a.inherit = 1;  // threads and forked children, added when they exit
    a.exclude_hv = 1;
    return static_cast<int>(syscall(SYS_perf_event_open, &a, 0 /* this process */, -1, -1, 0));
  }

  static void rusage_cpu_us(double* self, double* children) {
    auto us = [](const rusage& r) {
      return (r.ru_utime.tv_sec + r.ru_stime.tv_sec) * 1e6 + r.ru_utime.tv_usec +
             r.ru_stime.tv_usec;
    };
    rusage r;
    getrusage(RUSAGE_SELF, &r);
    *self = us(r);
    getrusage(RUSAGE_CHILDREN, &r);
    *children = us(r);
  }

  int syscalls_fd_ = -1, ctx_fd_ = -1;
  double self0_ = 0, children0_ = 0;
};

// "12.3" or "n/a", for a column of width w.
inline void print_count(double v, int w) {
  if (v < 0)
    std::printf(" %*s", w, "n/a");
  else
    std::printf(" %*.1f", w, v);
}

}  // namespace uiw::bench
