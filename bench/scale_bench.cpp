// uiw scale benchmark: N connections between two processes over loopback TCP, N = 1, 16, 256 and
// 1024 (UIW_SCALE_N="1,16" overrides). Each process drives its N runtime::HostEndpoints with one
// shared runtime::Progress thread, as the provider drives all QPs of a device context. Per N:
//   setup      connections set up per second: the client connects its N endpoints one after
//              the other (TCP connect, MPA Request/Reply, CRC off); the server accepts them;
//   memory     the client's resident memory per QP once all N are connected;
//   latency    8-byte Send ping-pong on QP 0 while the other N-1 stay connected and idle,
//              one-way time and its ratio to N = 1 of the same run (target: <= 1.1 at 1024);
//   bandwidth  every QP keeps 4 RDMA Writes of 64 KiB outstanding for UIW_BENCH_SECONDS.
// Latency and bandwidth run in separate process pairs, and each measurement forks a fresh
// client and server: setup is outside every timed window, and no heap kept by an earlier
// measurement hides in the next one's memory figure.
#include <sched.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <vector>

#include "op_cost.h"
#include "runtime/host_endpoint.h"
#include "runtime/progress.h"
#include "transport/socket_util.h"
#include "wire/bytes.h"
#include "work_requests.h"

using namespace uiw;
using Clock = std::chrono::steady_clock;
using engine::Completion;
using engine::RecvWr;
using engine::SendWr;
using engine::WrOpcode;

namespace {

double g_seconds = 1.0;  // UIW_BENCH_SECONDS: bandwidth window
int g_iters = 5000;      // UIW_SCALE_ITERS: ping-pong round trips
// UIW_SCALE_YIELD=0|1: whether a thread waiting for a completion yields the CPU between looks
// (default: on machines with at most 2 CPUs). A pair runs four busy threads (two pollers, two
// Progress threads); with fewer cores, a poller that never yields keeps a Progress thread off
// the CPU until the scheduler preempts it: one-way latency read ~2400 us instead of ~35 us
// on 2 CPUs. sched_yield() does not sleep: with nothing else runnable it returns at once.
bool g_yield = sysconf(_SC_NPROCESSORS_ONLN) <= 2;
// The server writes one byte here once its receives are posted and it is about to accept; the
// client reads it before its clock starts, so setup time does not include the server's start.
int g_ready_fd = -1;
// A child that hangs (a lost completion) is killed by SIGALRM after this long: the run fails
// instead of stalling the caller.
constexpr unsigned kWatchdogSeconds = 120;

// Small queues, so that 1024 endpoints per process stay within memory; the workloads below
// never have more than 16 receives or 6 sends outstanding on one QP.
constexpr uint32_t kSqDepth = 64, kCqDepth = 256;
constexpr size_t kWriteSize = 64 << 10;
constexpr int kWriteWindow = 4;  // outstanding RDMA Writes per QP
constexpr int kLatRecvs = 16;    // receives kept posted on each QP of the latency test

double since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

const char* g_side = "bench";  // "client" or "server" in the children, for messages
uint64_t g_yields = 0;         // sched_yield() calls of this process's polling thread

void yield_cpu() {
  ++g_yields;
  sched_yield();
}

[[noreturn]] void die(const char* what, int qp = -1) {
  if (qp >= 0)
    std::fprintf(stderr, "scale bench %s: qp %d: %s\n", g_side, qp, what);
  else
    std::fprintf(stderr, "scale bench %s: %s\n", g_side, what);
  exit(1);
}

// What one process reports about a measurement. Trivially copyable: it crosses a pipe.
struct Result {
  double seconds = 0;    // the timed window
  double ops = 0;        // round trips (latency) or RDMA Writes completed (bandwidth)
  double bytes = 0;      // payload moved in the window
  double syscalls = -1;  // in the window, every thread of the process, less the poller's
                         // sched_yield() calls; -1: not counted
  double cpu_us = 0;     // in the window, every thread of the process
  double setup_s = 0;    // client: connecting all N
  double kib_per_qp = 0;
};

// The counts of one process over a window. OpCost counts what its threads do from the moment
// it is opened, so each child opens one before its Progress thread starts; read() includes
// threads that are still running, so two readings bracket the window.
class Window {
 public:
  void start() {
    at_start_ = cost_.per_op(1);
    yields_ = g_yields;
  }
  // The yields are left out of the system calls: how often a poller yields depends on what else
  // the machine runs, not on uiw.
  void stop(Result* r) const {
    const bench::Cost now = cost_.per_op(1);
    r->syscalls = now.syscalls >= 0 && at_start_.syscalls >= 0
                      ? now.syscalls - at_start_.syscalls - static_cast<double>(g_yields - yields_)
                      : -1;
    r->cpu_us = now.cpu_us - at_start_.cpu_us;
  }

 private:
  bench::OpCost cost_;
  bench::Cost at_start_;
  uint64_t yields_ = 0;
};

// Resident set size of this process in bytes (/proc/self/statm: size, resident, ... in pages).
double rss_bytes() {
  FILE* f = std::fopen("/proc/self/statm", "r");
  if (!f) return 0;
  unsigned long size = 0, resident = 0;
  const int got = std::fscanf(f, "%lu %lu", &size, &resident);
  std::fclose(f);
  return got == 2 ? static_cast<double>(resident) * sysconf(_SC_PAGESIZE) : 0;
}

// ---------------------------------------------------------------- process pair

pid_t spawn(const std::function<Result()>& body, const char* side, int* read_fd) {
  int p[2];
  if (pipe(p) != 0) die("pipe");
  const pid_t pid = fork();
  if (pid < 0) die("fork");
  if (pid == 0) {
    close(p[0]);
    g_side = side;
    alarm(kWatchdogSeconds);
    const Result r = body();
    _exit(write(p[1], &r, sizeof r) == sizeof r ? 0 : 1);
  }
  close(p[1]);
  *read_fd = p[0];
  return pid;
}

// Runs `server` and `client` in two fresh children over a new listener and returns what each
// measured. Exits if either fails; the other is killed then, so nothing is left waiting.
void run_pair(const std::function<Result(int listen_fd)>& server,
              const std::function<Result(uint16_t port)>& client, Result* server_out,
              Result* client_out) {
  uint16_t port = 0;
  const int lfd = transport::tcp_listen("127.0.0.1", 0, &port);
  if (lfd < 0) {
    std::fprintf(stderr, "listen: %s\n", strerror(-lfd));
    exit(1);
  }
  int ready[2];
  if (pipe(ready) != 0) die("pipe");
  int sfd = -1, cfd = -1;
  const pid_t spid = spawn(
      [&] {
        close(ready[0]);
        g_ready_fd = ready[1];
        return server(lfd);
      },
      "server", &sfd);
  const pid_t cpid = spawn(
      [&] {
        close(lfd);
        close(ready[1]);
        g_ready_fd = ready[0];
        return client(port);
      },
      "client", &cfd);
  close(lfd);
  close(ready[0]);
  close(ready[1]);
  for (int left = 2; left > 0; --left) {
    int status = 0;
    const pid_t pid = waitpid(-1, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      std::fprintf(stderr, "scale bench: %s failed (%s %d)\n", pid == spid ? "server" : "client",
                   WIFSIGNALED(status) ? "signal" : "exit status",
                   WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
      kill(pid == spid ? cpid : spid, SIGKILL);
      waitpid(-1, nullptr, 0);
      exit(1);
    }
  }
  if (read(sfd, server_out, sizeof *server_out) != sizeof *server_out ||
      read(cfd, client_out, sizeof *client_out) != sizeof *client_out) {
    std::fprintf(stderr, "scale bench: lost a child's result\n");
    exit(1);
  }
  close(sfd);
  close(cfd);
}

// ---------------------------------------------------------------- uiw helpers

transport::MpaConfig mpa() {
  transport::MpaConfig c;
  c.crc = false;
  c.timeout_ms = 10000;
  return c;
}

using Endpoints = std::vector<std::unique_ptr<runtime::HostEndpoint>>;

Endpoints make_endpoints(int n, runtime::Progress& progress) {
  Endpoints eps;
  eps.reserve(n);
  for (int i = 0; i < n; ++i)
    eps.push_back(std::make_unique<runtime::HostEndpoint>(i + 1, progress, kSqDepth, kCqDepth));
  return eps;
}

memory::Stag reg(runtime::HostEndpoint& ep, void* p, size_t n, uint32_t access) {
  int err = 0;
  const memory::Stag k = ep.reg(p, n, access, &err);
  if (err != 0) die("register");
  return k;
}

void post_recv(runtime::HostEndpoint& ep, void* p, size_t n, memory::Stag k) {
  if (ep.post_recv(bench::recv_wr(p, n, k)) != 0) die("post_recv");
}

void post_send(runtime::HostEndpoint& ep, WrOpcode op, void* p, size_t n, memory::Stag k,
               uint32_t rkey = 0, uint64_t raddr = 0, bool signaled = true) {
  if (ep.post_send(bench::send_wr(op, p, n, k, rkey, raddr, signaled)) != 0) die("post_send");
}

void check(runtime::HostEndpoint& ep, int i) {
  const engine::QpState s = ep.state();
  if (s != engine::QpState::Rts) die(engine::qp_state_name(s), i);
}

void check(const Completion& c, int i) {
  if (c.status != engine::WcStatus::Success) die(engine::wc_status_name(c.status), i);
}

// Spins on the CQ until a completion arrives. With a Progress thread poll_* only looks at the
// CQ: that thread moves the bytes, so this one does no I/O and never sleeps (see g_yield).
Completion wait_one(runtime::HostEndpoint& ep, bool send, int i) {
  Completion c;
  auto poll = [&] { return (send ? ep.poll_send({&c, 1}) : ep.poll_recv({&c, 1})) != 0; };
  while (!poll()) {
    if (ep.state() != engine::QpState::Rts) {
      // The peer may close right after its last message: the Progress thread can complete the
      // receive and see the FIN between the poll above and this look at the state.
      if (poll()) break;
      check(ep, i);
    }
    if (g_yield) yield_cpu();
  }
  check(c, i);
  return c;
}

// Connects (client) or accepts (server) every endpoint in turn. prepare(i) runs before the
// connection comes up: it must post the receives, because the shared Progress thread reads a
// Send as soon as the QP is attached, and one without a posted receive is an error (RFC 5041
// §7.1 untagged check 2; iWARP has no RNR retry).
double connect_all(Endpoints& eps, uint16_t port, int lfd,
                   const std::function<void(int)>& prepare) {
  for (size_t i = 0; i < eps.size(); ++i) prepare(static_cast<int>(i));
  char ready = 0;
  if ((lfd < 0 ? read(g_ready_fd, &ready, 1) : write(g_ready_fd, &ready, 1)) != 1)
    die("ready pipe");
  const auto t0 = Clock::now();
  for (size_t i = 0; i < eps.size(); ++i) {
    const int rc = lfd < 0 ? eps[i]->connect("127.0.0.1", port, mpa()) : eps[i]->accept(lfd, mpa());
    if (rc != 0) die(strerror(-rc), static_cast<int>(i));
  }
  return since(t0);
}

// ---------------------------------------------------------------- latency, setup, memory

// Per QP: an 8-byte receive area and an 8-byte send area, registered with the QP's registry.
constexpr size_t kSlot = 16;

Result latency_server(int lfd, int n) {
  Window w;
  runtime::Progress progress{runtime::ProgressKnobs::from_env()};
  std::vector<uint8_t> slots(n * kSlot);
  Endpoints eps = make_endpoints(n, progress);
  std::vector<memory::Stag> keys(n);
  connect_all(eps, 0, lfd, [&](int i) {
    keys[i] = reg(*eps[i], &slots[i * kSlot], kSlot, memory::kLocalWrite);
    for (int r = 0; r < kLatRecvs; ++r) post_recv(*eps[i], &slots[i * kSlot], 8, keys[i]);
  });
  runtime::HostEndpoint& ep = *eps[0];
  uint8_t* in = &slots[0];
  uint8_t* out = in + 8;
  Result res;
  int signaled = 0;  // posted and not completed yet
  for (int i = 0; i < g_iters; ++i) {
    wait_one(ep, false, 0);
    if (i == 0) w.start();  // from the first ping on
    post_recv(ep, in, 8, keys[0]);
    const bool sig = i % 16 == 15 || i == g_iters - 1;
    post_send(ep, WrOpcode::Send, out, 8, keys[0], 0, 0, sig);
    signaled += sig;
    Completion c;
    if (ep.poll_send({&c, 1})) {
      check(c, 0);
      --signaled;
    }
  }
  // The last echo is signaled: once it completed, it left.
  for (; signaled > 0; --signaled) wait_one(ep, true, 0);
  w.stop(&res);
  res.ops = g_iters;
  // The client's zero-length "bye": it checked its QPs before this one closes them all.
  if (wait_one(ep, false, 0).byte_len != 0) die("expected bye", 0);
  return res;
}

Result latency_client(uint16_t port, int n) {
  Window w;  // before the Progress thread starts, so that it is counted
  runtime::Progress progress{runtime::ProgressKnobs::from_env()};
  std::vector<uint8_t> slots(n * kSlot);
  std::vector<memory::Stag> keys(n);
  // Resident memory of n connected endpoints. It includes, per HostEndpoint: the QueuePair
  // (engine Qp with its send queue and transmit state), the Connection's 64 KiB receive staging
  // buffer, and its own memory registry, receive queue and two CQs. HostEndpoint sizes the
  // registry and the receive queue at 4096 entries whatever the depths asked (host_endpoint.h),
  // where a provider QP has its context's registry and an RQ of the requested depth. The
  // application's buffers above are allocated first; the kernel's socket buffers are not in RSS.
  const double rss0 = rss_bytes();
  Endpoints eps = make_endpoints(n, progress);
  Result res;
  res.setup_s = connect_all(eps, port, -1, [&](int i) {
    keys[i] = reg(*eps[i], &slots[i * kSlot], kSlot, memory::kLocalWrite);
    for (int r = 0; r < kLatRecvs; ++r) post_recv(*eps[i], &slots[i * kSlot], 8, keys[i]);
  });
  res.kib_per_qp = (rss_bytes() - rss0) / 1024 / n;
  for (int i = 0; i < n; ++i) check(*eps[i], i);

  runtime::HostEndpoint& ep = *eps[0];
  uint8_t* in = &slots[0];
  uint8_t* out = in + 8;
  w.start();
  const auto t0 = Clock::now();
  int signaled = 0;  // posted and not completed yet
  for (int i = 0; i < g_iters; ++i) {
    const bool sig = i % 16 == 15;
    post_send(ep, WrOpcode::Send, out, 8, keys[0], 0, 0, sig);
    signaled += sig;
    wait_one(ep, false, 0);
    post_recv(ep, in, 8, keys[0]);
    Completion c;
    if (ep.poll_send({&c, 1})) {
      check(c, 0);
      --signaled;
    }
  }
  res.seconds = since(t0);
  w.stop(&res);
  res.ops = g_iters;
  for (int i = 0; i < n; ++i) check(*eps[i], i);   // the idle ones too
  post_send(ep, WrOpcode::Send, out, 0, keys[0]);  // "bye"
  for (++signaled; signaled > 0; --signaled) wait_one(ep, true, 0);
  return res;
}

// ---------------------------------------------------------------- aggregate bandwidth

// Server: one 64 KiB sink per QP, advertised to the client's QP by a Send (STag, address),
// then it waits for every QP's zero-length "done" Send, answers each, and waits for the
// client's "bye" on QP 0. When a QP's "done" completes here, its Writes before it are placed
// (RFC 5040 §5.5: a Send completes at the Data Sink after the messages sent before it).
Result bandwidth_server(int lfd, int n) {
  Window w;
  runtime::Progress progress{runtime::ProgressKnobs::from_env()};
  std::vector<uint8_t> sinks(n * kWriteSize), ctl(n * 32);
  Endpoints eps = make_endpoints(n, progress);
  std::vector<memory::Stag> sink_keys(n), ctl_keys(n);
  connect_all(eps, 0, lfd, [&](int i) {
    sink_keys[i] = reg(*eps[i], &sinks[i * kWriteSize], kWriteSize,
                       memory::kLocalWrite | memory::kRemoteWrite);
    ctl_keys[i] = reg(*eps[i], &ctl[i * 32], 32, memory::kLocalWrite);
    post_recv(*eps[i], &ctl[i * 32 + 16], 16, ctl_keys[i]);  // "done"
    post_recv(*eps[i], &ctl[i * 32 + 16], 16, ctl_keys[i]);  // "bye" (QP 0)
  });
  for (int i = 0; i < n; ++i) {
    wire::store_be32(&ctl[i * 32], sink_keys[i]);
    wire::store_be64(&ctl[i * 32 + 4], reinterpret_cast<uint64_t>(&sinks[i * kWriteSize]));
    post_send(*eps[i], WrOpcode::Send, &ctl[i * 32], 12, ctl_keys[i]);
  }
  for (int i = 0; i < n; ++i) wait_one(*eps[i], true, i);
  w.start();
  // The Writes need nothing from this thread (the Progress thread places them), so it looks for
  // the "done"s once a millisecond instead of taking a core from the client.
  std::vector<bool> done(n, false);
  for (int left = n; left > 0;) {
    for (int i = 0; i < n; ++i) {
      Completion c;
      if (done[i] || eps[i]->poll_recv({&c, 1}) == 0) continue;
      check(c, i);
      done[i] = true;
      --left;
      post_send(*eps[i], WrOpcode::Send, &ctl[i * 32], 0, ctl_keys[i]);
    }
    for (int i = 0; i < n; ++i) check(*eps[i], i);
    if (left) usleep(1000);
  }
  for (int i = 0; i < n; ++i) wait_one(*eps[i], true, i);
  Result res;
  w.stop(&res);
  if (wait_one(*eps[0], false, 0).byte_len != 0) die("expected bye", 0);
  return res;
}

Result bandwidth_client(uint16_t port, int n) {
  Window w;
  runtime::Progress progress{runtime::ProgressKnobs::from_env()};
  std::vector<uint8_t> src(kWriteSize, 0x5A), ctl(n * 32);
  Endpoints eps = make_endpoints(n, progress);
  std::vector<memory::Stag> src_keys(n), ctl_keys(n);
  Result res;
  res.setup_s = connect_all(eps, port, -1, [&](int i) {
    src_keys[i] = reg(*eps[i], src.data(), src.size(), 0);
    ctl_keys[i] = reg(*eps[i], &ctl[i * 32], 32, memory::kLocalWrite);
    post_recv(*eps[i], &ctl[i * 32], 16, ctl_keys[i]);       // the sink's STag and address
    post_recv(*eps[i], &ctl[i * 32 + 16], 16, ctl_keys[i]);  // the answer to "done"
  });
  std::vector<uint32_t> rkeys(n);
  std::vector<uint64_t> raddrs(n);
  for (int i = 0; i < n; ++i) {
    if (wait_one(*eps[i], false, i).byte_len != 12) die("expected the sink's STag", i);
    rkeys[i] = wire::load_be32(&ctl[i * 32]);
    raddrs[i] = wire::load_be64(&ctl[i * 32 + 4]);
  }

  std::vector<int> outstanding(n, 0);
  uint64_t writes = 0;
  // Reaps what QP i completed; true if anything.
  auto reap = [&](int i) {
    Completion cs[kWriteWindow];
    const size_t got = eps[i]->poll_send(cs);
    for (size_t k = 0; k < got; ++k) check(cs[k], i);
    outstanding[i] -= static_cast<int>(got);
    writes += got;
    return got > 0;
  };
  w.start();
  const auto t0 = Clock::now();
  while (since(t0) < g_seconds) {
    bool any = false;
    for (int i = 0; i < n; ++i) {
      while (outstanding[i] < kWriteWindow) {
        post_send(*eps[i], WrOpcode::RdmaWrite, src.data(), kWriteSize, src_keys[i], rkeys[i],
                  raddrs[i]);
        ++outstanding[i];
      }
      any |= reap(i);
    }
    // Nothing completed on any QP: the bytes wait for a Progress thread (ours or the server's).
    if (!any && g_yield) yield_cpu();
  }
  for (int i = 0; i < n; ++i) {
    while (outstanding[i] > 0) {
      if (!reap(i)) check(*eps[i], i);
    }
    post_send(*eps[i], WrOpcode::Send, src.data(), 0, src_keys[i]);  // "done"
  }
  for (int i = 0; i < n; ++i) {
    wait_one(*eps[i], true, i);
    if (wait_one(*eps[i], false, i).byte_len != 0) die("expected the answer to done", i);
  }
  res.seconds = since(t0);
  w.stop(&res);
  res.ops = static_cast<double>(writes);
  res.bytes = static_cast<double>(writes) * kWriteSize;
  for (int i = 0; i < n; ++i) check(*eps[i], i);
  post_send(*eps[0], WrOpcode::Send, src.data(), 0, src_keys[0]);  // "bye"
  wait_one(*eps[0], true, 0);
  return res;
}

// ---------------------------------------------------------------- report

struct Row {
  Result lat_client, lat_server, bw_client, bw_server;
};

// Both processes' counts in the window, per operation; -1 if either side could not count.
double syscalls_per_op(const Result& c, const Result& s) {
  return c.syscalls < 0 || s.syscalls < 0 || c.ops <= 0 ? -1 : (c.syscalls + s.syscalls) / c.ops;
}

double cpu_per_op(const Result& c, const Result& s) {
  return c.ops <= 0 ? -1 : (c.cpu_us + s.cpu_us) / c.ops;
}

std::vector<int> parse_ns(const char* s) {
  std::vector<int> ns;
  for (const char* p = s; *p;) {
    char* end = nullptr;
    const long v = std::strtol(p, &end, 10);
    if (end == p || v <= 0) {
      std::fprintf(stderr, "UIW_SCALE_N: expected a comma-separated list of counts, got '%s'\n", s);
      exit(2);
    }
    ns.push_back(static_cast<int>(v));
    p = *end == ',' ? end + 1 : end;
  }
  return ns;
}

// Raises the descriptor limit to its hard limit; returns how many descriptors one process has.
rlim_t raise_nofile() {
  rlimit r{};
  if (getrlimit(RLIMIT_NOFILE, &r) != 0) return 0;
  if (r.rlim_cur < r.rlim_max) {
    r.rlim_cur = r.rlim_max;
    setrlimit(RLIMIT_NOFILE, &r);
    getrlimit(RLIMIT_NOFILE, &r);
  }
  return r.rlim_cur;
}

}  // namespace

int main() {
  if (const char* s = getenv("UIW_BENCH_SECONDS")) g_seconds = atof(s);
  if (const char* s = getenv("UIW_SCALE_ITERS")) g_iters = atoi(s);
  if (g_iters <= 0) g_iters = 1;
  if (const char* s = getenv("UIW_SCALE_YIELD")) g_yield = atoi(s) != 0;
  const std::vector<int> ns =
      parse_ns(getenv("UIW_SCALE_N") ? getenv("UIW_SCALE_N") : "1,16,256,1024");
  const rlim_t nofile = raise_nofile();

  std::printf(
      "uiw scale benchmark: two processes over loopback TCP, N connections each driven by one "
      "shared Progress thread per process, CRC off, small queues (SQ %u, CQ %u), pollers "
      "spin%s\n"
      "  setup: client connects N in turn (TCP + MPA), both pairs' setups; KiB/QP: client RSS "
      "growth / N;\n"
      "  lat: 8-byte Send ping-pong on QP 0 with N-1 idle QPs, %d round trips, one-way us;\n"
      "  agg: every QP keeps %d RDMA Writes of 64 KiB outstanding for %.1f s;\n"
      "  sys/op, cpu/op: both processes, all threads, timed window only, sys/op without the "
      "pollers' sched_yield (op = round trip for lat, one 64 KiB Write for agg)\n",
      kSqDepth, kCqDepth, g_yield ? " with sched_yield (UIW_SCALE_YIELD)" : "", g_iters,
      kWriteWindow, g_seconds);
  std::printf("%-6s %12s %8s %8s %7s %8s %9s %9s %8s %9s\n", "N", "setup conn/s", "KiB/QP",
              "lat us", "vs N=1", "sys/rt", "cpu us/rt", "agg Gb/s", "sys/wr", "cpu us/wr");
  std::fflush(stdout);

  double lat1 = -1;
  for (const int n : ns) {
    // n sockets, the listener, epoll, eventfd, pipes, stdio, and some slack.
    if (static_cast<rlim_t>(n) + 32 > nofile) {
      std::printf(
          "%-6d skipped: %d connections need more than the %lu file descriptors allowed "
          "(RLIMIT_NOFILE hard limit)\n",
          n, n, static_cast<unsigned long>(nofile));
      continue;
    }
    Row r;
    run_pair([n](int lfd) { return latency_server(lfd, n); },
             [n](uint16_t port) { return latency_client(port, n); }, &r.lat_server, &r.lat_client);
    run_pair([n](int lfd) { return bandwidth_server(lfd, n); },
             [n](uint16_t port) { return bandwidth_client(port, n); }, &r.bw_server, &r.bw_client);
    const double lat = r.lat_client.seconds / r.lat_client.ops / 2 * 1e6;
    if (n == 1) lat1 = lat;
    std::printf("%-6d %12.0f %8.1f %8.2f", n, 2 * n / (r.lat_client.setup_s + r.bw_client.setup_s),
                r.lat_client.kib_per_qp, lat);
    if (lat1 > 0)
      std::printf(" %6.2fx", lat / lat1);
    else
      std::printf(" %7s", "n/a");
    bench::print_count(syscalls_per_op(r.lat_client, r.lat_server), 8);
    bench::print_count(cpu_per_op(r.lat_client, r.lat_server), 9);
    std::printf(" %9.2f", r.bw_client.bytes * 8 / r.bw_client.seconds / 1e9);
    bench::print_count(syscalls_per_op(r.bw_client, r.bw_server), 8);
    bench::print_count(cpu_per_op(r.bw_client, r.bw_server), 9);
    std::printf("\n");
    std::fflush(stdout);
  }
  return 0;
}
