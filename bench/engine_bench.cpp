// uiw engine benchmark: two processes over loopback TCP. RDMA Write / Read / Send bandwidth at
// 64 KiB and 1 MiB, 8-byte Send and Write ping-pong latency, with CRC off and on. Each uiw row is
// printed beside raw TCP measured just before it in the same run (interleaved, so a machine
// whose speed drifts moves both), with the ratio, and with what one operation cost both
// processes together: system calls, context switches and CPU time (bench/op_cost.h). A latency
// row is the median of several such pairs (UIW_BENCH_LAT_ROUNDS): on a shared machine raw TCP's
// own 8-byte latency moves by half or more between runs seconds apart, and one pair's ratio
// moves with it.
//
// uiw runs three ways, each against the raw TCP that waits the same way:
//   busy      the application's thread moves the bytes and never sleeps (runtime::HostEndpoint
//             without a progress thread, spinning on its CQ); against TCP whose ends spin on
//             non-blocking recv, the lowest latency TCP offers.
//   blocking  the same thread, but it sleeps in poll() whenever a look found nothing; against
//             TCP whose read() sleeps until data arrives.
//   progress  a runtime::Progress thread moves the bytes while the application spins on its CQ,
//             as the provider runs; against the better of the two TCP variants.
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "memory/app_copy.h"
#include "op_cost.h"
#include "runtime/host_endpoint.h"
#include "transport/socket_util.h"
#include "wire/bytes.h"
#include "work_requests.h"

using namespace uiw;
using Clock = std::chrono::steady_clock;

namespace {

double g_seconds = 1.0;
int g_lat_iters = 20000;
int g_lat_rounds = 5;
int g_bw_rounds = 3;
enum class Mode { Busy, Blocking, Progress };
const char* const kModeName[] = {"busy", "blocking", "progress"};
// uiw's mode for the current rows; with Progress a Progress thread moves the bytes.
Mode g_mode = Mode::Busy;
bool g_progress_thread = false;
pid_t g_client = getpid();

double since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// A client's result: its figure and how many operations (messages one way) it took.
struct Measure {
  double value = 0;
  double ops = 0;
};

struct Result {
  double value = 0;
  bench::Cost cost;  // per operation, both processes
};

// Runs `server` in a forked child on a fresh listener and `client` here; returns the client's
// figure with what each operation cost both processes (setup included: a few hundred system
// calls over tens of thousands of operations).
Result run_pair(const std::function<int(int listen_fd)>& server,
                const std::function<Measure(uint16_t port)>& client) {
  const bench::OpCost cost;
  uint16_t port = 0;
  const int lfd = transport::tcp_listen("127.0.0.1", 0, &port);
  if (lfd < 0) {
    std::fprintf(stderr, "listen: %s\n", strerror(-lfd));
    exit(1);
  }
  const pid_t pid = fork();
  if (pid == 0) _exit(server(lfd));
  close(lfd);
  const Measure m = client(port);
  int status = 0;
  waitpid(pid, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    std::fprintf(stderr, "bench server failed (status %d)\n", status);
    exit(1);
  }
  return {m.value, cost.per_op(m.ops)};
}

// ---------------------------------------------------------------- raw TCP baselines

void nodelay(int fd) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

bool read_full(int fd, void* p, size_t n) {
  auto* b = static_cast<uint8_t*>(p);
  while (n) {
    const ssize_t r = read(fd, b, n);
    if (r <= 0) return false;
    b += r;
    n -= r;
  }
  return true;
}

bool write_full(int fd, const void* p, size_t n) {
  auto* b = static_cast<const uint8_t*>(p);
  while (n) {
    const ssize_t r = write(fd, b, n);
    if (r <= 0) return false;
    b += r;
    n -= r;
  }
  return true;
}

Result tcp_bandwidth(size_t msg) {  // Gb/s
  return run_pair(
      [](int lfd) {
        const int fd = transport::tcp_accept(lfd, 10000);
        std::vector<uint8_t> buf(1 << 20);
        uint64_t total = 0;
        for (;;) {
          const ssize_t r = read(fd, buf.data(), buf.size());
          if (r <= 0) break;
          total += r;
        }
        return write_full(fd, &total, sizeof total) ? 0 : 1;
      },
      [msg](uint16_t port) {
        const int fd = transport::tcp_connect("127.0.0.1", port, 10000);
        std::vector<uint8_t> buf(msg, 0x5A);
        uint64_t sent = 0, got = 0;
        const auto t0 = Clock::now();
        while (since(t0) < g_seconds) {
          write_full(fd, buf.data(), msg);
          sent += msg;
        }
        shutdown(fd, SHUT_WR);
        read_full(fd, &got, sizeof got);
        const double t = since(t0);
        close(fd);
        return Measure{got * 8 / t / 1e9, static_cast<double>(sent / msg)};
      });
}

// Non-blocking exchange of exactly n bytes, spinning while the socket has nothing: how a
// busy-polling TCP application waits (no sleep, no wakeup, one recv per look).
bool recv_spin(int fd, void* p, size_t n) {
  auto* b = static_cast<uint8_t*>(p);
  while (n) {
    const ssize_t r = recv(fd, b, n, MSG_DONTWAIT);
    if (r == 0 || (r < 0 && errno != EAGAIN && errno != EINTR)) return false;
    if (r < 0) continue;
    b += r;
    n -= r;
  }
  return true;
}

Result tcp_pingpong(bool busy) {  // one-way latency, us
  auto rd = busy ? recv_spin : read_full;
  return run_pair(
      [rd](int lfd) {
        const int fd = transport::tcp_accept(lfd, 10000);
        nodelay(fd);
        uint8_t b[8];
        while (rd(fd, b, 8)) write_full(fd, b, 8);
        return 0;
      },
      [rd](uint16_t port) {
        const int fd = transport::tcp_connect("127.0.0.1", port, 10000);
        nodelay(fd);
        uint8_t b[8] = {};
        const auto t0 = Clock::now();
        for (int i = 0; i < g_lat_iters; ++i) {
          write_full(fd, b, 8);
          rd(fd, b, 8);
        }
        const double t = since(t0);
        close(fd);
        return Measure{t / g_lat_iters / 2 * 1e6, 2.0 * g_lat_iters};
      });
}

// ---------------------------------------------------------------- uiw

transport::MpaConfig mpa(bool crc) {
  transport::MpaConfig c;
  c.crc = crc;
  c.timeout_ms = 10000;
  return c;
}

using engine::Completion;
using engine::RecvWr;
using engine::SendWr;
using engine::WrOpcode;

const char* g_test = "";  // the measurement running, for error messages

[[noreturn]] void die(const char* what) {
  std::fprintf(stderr, "bench: %s (%s, %s)\n", what, g_test,
               getpid() == g_client ? "client" : "server");
  exit(1);
}

// Says which Terminate ended the connection, and exits.
[[noreturn]] void qp_error(runtime::HostEndpoint& ep, const char* what) {
  ep.queue_pair().with_engine([](engine::Qp& q) {
    for (const auto* t : {&q.terminate_sent(), &q.terminate_received()})
      if (t->has_value())
        std::fprintf(stderr, "bench: %s Terminate layer %u etype %u code %u\n",
                     t == &q.terminate_sent() ? "sent" : "received",
                     static_cast<unsigned>((*t)->cause.layer), unsigned{(*t)->cause.etype},
                     unsigned{(*t)->cause.code});
    return 0;
  });
  die(what);
}

// Looks that find nothing before the polling thread sleeps in poll(): none in blocking mode,
// unbounded in busy mode (UIW_BENCH_SPINS overrides both).
int g_spins = 0;

// Waits for one completion on the send (or receive) queue.
Completion wait_one(runtime::HostEndpoint& ep, bool send) {
  Completion c;
  for (int64_t idle = 0;; ++idle) {
    // With a Progress thread the CQ is all the application looks at (no system call); the
    // thread itself blocks when its sockets are idle.
    if (idle > g_spins && ep.busy_poll()) {
      ep.wait_io(1);
      idle = 0;
    }
    // The state is read before the poll: a Progress thread may place the last completion and
    // then see the peer's close between the two, and that completion must still be seen.
    const bool error = ep.state() == engine::QpState::Error;
    if (send ? ep.poll_send({&c, 1}) : ep.poll_recv({&c, 1})) {
      if (c.status != engine::WcStatus::Success) qp_error(ep, engine::wc_status_name(c.status));
      return c;
    }
    if (error) qp_error(ep, "qp entered error");
  }
}

void post_recv(runtime::HostEndpoint& ep, void* p, size_t n, memory::Stag k, uint64_t id = 0) {
  if (ep.post_recv(bench::recv_wr(p, n, k, id)) != 0) die("post_recv");
}

void post_send(runtime::HostEndpoint& ep, WrOpcode op, void* p, size_t n, memory::Stag k,
               uint32_t rkey = 0, uint64_t raddr = 0, bool signaled = true) {
  if (ep.post_send(bench::send_wr(op, p, n, k, rkey, raddr, signaled)) != 0) die("post_send");
}

// Server side of the one-sided tests: exposes a buffer, then serves until the client's "done".
int one_sided_server(int lfd, bool crc, size_t size) {
  runtime::HostEndpoint ep(2, g_progress_thread);
  std::vector<uint8_t> buf(size), ctl(16), done(8);
  const auto bk =
      ep.reg(buf.data(), size, memory::kLocalWrite | memory::kRemoteWrite | memory::kRemoteRead);
  const auto ck = ep.reg(ctl.data(), ctl.size(), 0);
  const auto dk = ep.reg(done.data(), done.size(), memory::kLocalWrite);
  post_recv(ep, done.data(), done.size(), dk);
  if (ep.accept(lfd, mpa(crc)) != 0) return 2;
  wire::store_be32(ctl.data(), bk);
  wire::store_be64(ctl.data() + 4, reinterpret_cast<uint64_t>(buf.data()));
  post_send(ep, WrOpcode::Send, ctl.data(), 12, ck);
  wait_one(ep, true);
  wait_one(ep, false);  // "done": every earlier Write is placed (RDMAP §5.5 rule 10)
  post_send(ep, WrOpcode::Send, ctl.data(), 0, ck);
  wait_one(ep, true);
  return 0;
}

bool tx_idle(runtime::HostEndpoint& ep) {
  return ep.queue_pair().with_engine([](engine::Qp& q) { return q.tx_idle(); });
}

Result uiw_one_sided_bw(bool crc, size_t size, WrOpcode op) {
  g_test = op == WrOpcode::RdmaRead ? "uiw_one_sided_bw read" : "uiw_one_sided_bw write";
  return run_pair([=](int lfd) { return one_sided_server(lfd, crc, size); },
                  [=](uint16_t port) {
                    runtime::HostEndpoint ep(1, g_progress_thread);
                    std::vector<uint8_t> buf(size, 0x3C), ctl(16);
                    const auto bk = ep.reg(buf.data(), size, memory::kLocalWrite);
                    const auto ck = ep.reg(ctl.data(), ctl.size(), memory::kLocalWrite);
                    post_recv(ep, ctl.data(), ctl.size(), ck);
                    if (ep.connect("127.0.0.1", port, mpa(crc)) != 0) die("connect");
                    wait_one(ep, false);
                    const uint32_t rkey = wire::load_be32(ctl.data());
                    const uint64_t raddr = wire::load_be64(ctl.data() + 4);
                    post_recv(ep, ctl.data(), ctl.size(), ck);
                    const int window = op == WrOpcode::RdmaRead ? 16 : 32;
                    int outstanding = 0;
                    uint64_t done = 0;
                    const auto t0 = Clock::now();
                    while (since(t0) < g_seconds) {
                      while (outstanding < window) {
                        post_send(ep, op, buf.data(), size, bk, rkey, raddr);
                        ++outstanding;
                      }
                      wait_one(ep, true);
                      --outstanding;
                      ++done;
                    }
                    while (outstanding) {
                      wait_one(ep, true);
                      --outstanding;
                      ++done;
                    }
                    post_send(ep, WrOpcode::Send, ctl.data(), 0, ck);
                    wait_one(ep, true);
                    wait_one(ep, false);  // the server saw everything
                    const double t = since(t0);
                    return Measure{done * size * 8 / t / 1e9, static_cast<double>(done)};
                  });
}

// Send bandwidth with receive credits: the server acks every kBatch messages after reposting
// them, so the client never sends into a missing receive (iWARP has no RNR retry).
constexpr int kBatch = 32;

Result uiw_send_bw(bool crc, size_t size) {
  g_test = "uiw_send_bw";
  return run_pair(
      [=](int lfd) {
        runtime::HostEndpoint ep(2, g_progress_thread);
        // Every receive lands in the same buffer, as the TCP baseline reads into one: 64
        // buffers of 1 MiB would measure cache and TLB misses, not the data path.
        std::vector<uint8_t> buf(size), ack(4);
        const auto k = ep.reg(buf.data(), buf.size(), memory::kLocalWrite);
        const auto ak = ep.reg(ack.data(), ack.size(), 0);
        for (int i = 0; i < 2 * kBatch; ++i) post_recv(ep, buf.data(), size, k, i);
        if (ep.accept(lfd, mpa(crc)) != 0) return 2;
        post_send(ep, WrOpcode::Send, ack.data(), 0, ak, 0, 0, false);  // "ready"
        for (int got = 0;;) {
          const Completion c = wait_one(ep, false);
          if (c.byte_len == 0) break;  // "done"
          post_recv(ep, buf.data(), size, k, c.wr_id);
          if (++got % kBatch == 0) post_send(ep, WrOpcode::Send, ack.data(), 1, ak, 0, 0, false);
        }
        post_send(ep, WrOpcode::Send, ack.data(), 0, ak);  // the only signaled one
        wait_one(ep, true);
        return 0;
      },
      [=](uint16_t port) {
        runtime::HostEndpoint ep(1, g_progress_thread);
        std::vector<uint8_t> buf(size, 0x6B), acks(4 * 64);
        const auto bk = ep.reg(buf.data(), size, 0);
        const auto ak = ep.reg(acks.data(), acks.size(), memory::kLocalWrite);
        for (int i = 0; i < 64; ++i) post_recv(ep, acks.data() + 4 * i, 4, ak);
        if (ep.connect("127.0.0.1", port, mpa(crc)) != 0) die("connect");
        wait_one(ep, false);  // ready
        int credits = 2 * kBatch, outstanding = 0;
        uint64_t sent = 0;
        int64_t idle = 0;
        const auto t0 = Clock::now();
        while (since(t0) < g_seconds) {
          while (credits > 0 && outstanding < 32) {
            post_send(ep, WrOpcode::Send, buf.data(), size, bk);
            --credits;
            ++outstanding;
          }
          Completion c;
          bool found = false;
          if (ep.poll_send({&c, 1})) {
            --outstanding;
            ++sent;
            found = true;
          }
          if (ep.poll_recv({&c, 1})) {
            credits += kBatch;
            post_recv(ep, acks.data(), 4, ak);
            found = true;
          }
          // As wait_one: in blocking mode the thread sleeps once a look found nothing.
          if (found) {
            idle = 0;
          } else if (++idle > g_spins && ep.busy_poll()) {
            ep.wait_io(1);
            idle = 0;
          }
        }
        while (outstanding) {
          wait_one(ep, true);
          --outstanding;
          ++sent;
        }
        // "done" needs a receive at the server too.
        while (credits < 1) {
          wait_one(ep, false);
          credits += kBatch;
          post_recv(ep, acks.data(), 4, ak);
        }
        post_send(ep, WrOpcode::Send, buf.data(), 0, bk);
        for (;;) {  // the final zero-length reply
          const Completion c = wait_one(ep, false);
          if (c.byte_len == 0) break;
          post_recv(ep, acks.data(), 4, ak);
        }
        const double t = since(t0);
        return Measure{sent * size * 8 / t / 1e9, static_cast<double>(sent)};
      });
}

Result uiw_send_lat(bool crc) {
  g_test = "uiw_send_lat";
  return run_pair(
      [=](int lfd) {
        runtime::HostEndpoint ep(2, g_progress_thread);
        std::vector<uint8_t> in(8), out(8);
        const auto ik = ep.reg(in.data(), 8, memory::kLocalWrite), ok = ep.reg(out.data(), 8, 0);
        for (int i = 0; i < 16; ++i) post_recv(ep, in.data(), 8, ik);
        if (ep.accept(lfd, mpa(crc)) != 0) return 2;
        for (int i = 0; i < g_lat_iters; ++i) {
          wait_one(ep, false);
          post_recv(ep, in.data(), 8, ik);
          post_send(ep, WrOpcode::Send, out.data(), 8, ok, 0, 0, (i % 64) == 63);
          Completion c;
          ep.poll_send({&c, 1});
        }
        while (!tx_idle(ep)) ep.progress();
        return 0;
      },
      [=](uint16_t port) {
        runtime::HostEndpoint ep(1, g_progress_thread);
        std::vector<uint8_t> in(8), out(8);
        const auto ik = ep.reg(in.data(), 8, memory::kLocalWrite), ok = ep.reg(out.data(), 8, 0);
        for (int i = 0; i < 16; ++i) post_recv(ep, in.data(), 8, ik);
        if (ep.connect("127.0.0.1", port, mpa(crc)) != 0) die("connect");
        const auto t0 = Clock::now();
        for (int i = 0; i < g_lat_iters; ++i) {
          post_send(ep, WrOpcode::Send, out.data(), 8, ok, 0, 0, (i % 64) == 63);
          wait_one(ep, false);
          post_recv(ep, in.data(), 8, ik);
          Completion c;
          ep.poll_send({&c, 1});
        }
        const double t = since(t0);
        return Measure{t / g_lat_iters / 2 * 1e6, 2.0 * g_lat_iters};
      });
}

// ib_write_lat style: each side Writes 8 bytes into the other's buffer and spins on its own
// buffer for the peer's next value, driving progress while it spins.
Result uiw_write_lat(bool crc) {
  g_test = "uiw_write_lat";
  // connect: the side's connection setup, run once its receive is posted.
  auto side = [=](runtime::HostEndpoint& ep, bool client, auto connect) -> double {
    std::vector<uint8_t> mine(8, 0), out(8, 0), ctl(16), peer(16);
    const auto mk = ep.reg(mine.data(), 8, memory::kLocalWrite | memory::kRemoteWrite);
    const auto ok = ep.reg(out.data(), 8, 0);
    const auto ck = ep.reg(ctl.data(), 16, 0), pk = ep.reg(peer.data(), 16, memory::kLocalWrite);
    post_recv(ep, peer.data(), 16, pk);
    connect();
    wire::store_be32(ctl.data(), mk);
    wire::store_be64(ctl.data() + 4, reinterpret_cast<uint64_t>(mine.data()));
    post_send(ep, WrOpcode::Send, ctl.data(), 12, ck);
    wait_one(ep, false);
    wait_one(ep, true);
    const uint32_t rkey = wire::load_be32(peer.data());
    const uint64_t raddr = wire::load_be64(peer.data() + 4);
    volatile uint8_t* flag = mine.data() + 7;
    const auto t0 = Clock::now();
    for (int i = 1; i <= g_lat_iters; ++i) {
      const uint8_t v = static_cast<uint8_t>(i);
      if (client) {
        out[7] = v;
        post_send(ep, WrOpcode::RdmaWrite, out.data(), 8, ok, rkey, raddr, (i % 64) == 0);
      }
      for (int64_t idle = 0; *flag != v; ++idle) {
        if (!ep.busy_poll()) continue;  // the Progress thread places the Write
        if (ep.progress()) idle = 0;
        if (idle > g_spins) {
          ep.wait_io(1);
          idle = 0;
        }
      }
      if (!client) {
        out[7] = v;
        post_send(ep, WrOpcode::RdmaWrite, out.data(), 8, ok, rkey, raddr, (i % 64) == 0);
      }
      Completion c;
      ep.poll_send({&c, 1});
    }
    const double t = since(t0);
    while (!tx_idle(ep)) ep.progress();
    return t / g_lat_iters / 2 * 1e6;
  };
  return run_pair(
      [=](int lfd) {
        runtime::HostEndpoint ep(2, g_progress_thread);
        side(ep, false, [&] {
          if (ep.accept(lfd, mpa(crc)) != 0) die("accept");
        });
        return 0;
      },
      [=](uint16_t port) {
        runtime::HostEndpoint ep(1, g_progress_thread);
        const double lat = side(ep, true, [&] {
          if (ep.connect("127.0.0.1", port, mpa(crc)) != 0) die("connect");
        });
        return Measure{lat, 2.0 * g_lat_iters};
      });
}

// Cost of the STag check on the receive hot path (memory::Registry::check and pin).
void registry_costs() {
  memory::Registry reg;
  const uint32_t pd = reg.alloc_pd();
  static std::vector<uint8_t> b(1 << 16);
  std::vector<memory::Stag> s;
  for (int i = 0; i < 64; ++i)
    s.push_back(reg.register_region(pd, b.data(), b.size(), 0x1000,
                                    memory::kLocalWrite | memory::kRemoteWrite, nullptr));
  constexpr int kN = 4'000'000;
  uintptr_t sink = 0;
  auto t0 = Clock::now();
  for (int i = 0; i < kN; ++i)
    sink += reinterpret_cast<uintptr_t>(
        reg.check(s[i & 63], pd, 0, memory::kRemoteWrite, 0x1000 + (i & 1023), 64).host);
  const double check_ns = since(t0) * 1e9 / kN;
  t0 = Clock::now();
  for (int i = 0; i < kN / 4; ++i) {
    memory::Registry::Pin p = reg.pin(s[i & 63], pd, 0, memory::kRemoteWrite, 0x1000, 1024);
    sink += reinterpret_cast<uintptr_t>(p.mapping().host);
  }
  const double pin_ns = since(t0) * 1e9 / (kN / 4);
  std::printf("registry: check() %.1f ns, pin()+release %.1f ns (sink %zu)\n", check_ns, pin_ns,
              static_cast<size_t>(sink & 1));
}

// Cost of fault-safe placement (memory::copy_to_app: the kernel copies, so an unmapped or
// read-only page is EFAULT, not SIGSEGV) against a plain memcpy, per copy: what every staged
// payload pays on receive.
void app_copy_costs() {
  static std::vector<uint8_t> src(1 << 16), dst(1 << 16);
  std::printf("fault-safe placement (memory::copy_to_app) vs memcpy, per copy:");
  for (size_t n : {size_t{8}, size_t{4096}, size_t{65536}}) {
    const int iters = n > 4096 ? 20'000 : 200'000;
    auto t0 = Clock::now();
    for (int i = 0; i < iters; ++i)
      if (memory::copy_to_app(dst.data(), src.data(), n) != 0) die("copy_to_app");
    const double safe_us = since(t0) * 1e6 / iters;
    t0 = Clock::now();
    for (int i = 0; i < iters; ++i) {
      std::memcpy(dst.data(), src.data(), n);
      asm volatile("" : : "r"(dst.data()) : "memory");  // the copy is not elided
    }
    const double plain_us = since(t0) * 1e6 / iters;
    std::printf(" %zu B %.3f us (memcpy %.3f us)%s", n, safe_us, plain_us, n == 65536 ? "\n" : ",");
  }
}

void print_cost(const bench::Cost& c) {
  bench::print_count(c.syscalls, 6);
  bench::print_count(c.ctx_switches, 6);
  std::printf(" %7.2f", c.cpu_us);
}

// One line: uiw, the raw TCP baseline it is compared with, the ratio, and each one's cost per
// operation (system calls, context switches, CPU us; both processes); `range`, when given, ends
// the line (the spread of the ratio over a latency row's rounds).
void row(const char* test, const char* size, bool crc, const Result& uiw, const Result& tcp,
         bool bw, const char* range = "") {
  std::printf("%-9s %-5s %-8s %-3s %9.2f %-4s %9.2f %-4s %6.2fx |", test, size,
              kModeName[static_cast<int>(g_mode)], crc ? "on" : "off", uiw.value,
              bw ? "Gb/s" : "us", tcp.value, bw ? "Gb/s" : "us", uiw.value / tcp.value);
  print_cost(uiw.cost);
  std::printf(" |");
  print_cost(tcp.cost);
  std::printf("%s\n", range);
  std::fflush(stdout);
}

// The raw TCP latency uiw's current mode is compared with, measured now.
Result tcp_latency() {
  if (g_mode == Mode::Busy) return tcp_pingpong(true);
  if (g_mode == Mode::Blocking) return tcp_pingpong(false);
  const Result blocking = tcp_pingpong(false), busy = tcp_pingpong(true);
  return busy.value < blocking.value ? busy : blocking;
}

// A row of `rounds` pairs, each raw TCP then uiw: the row printed is the pair whose ratio is
// the median, followed by the lowest and highest ratio of the rounds. On this kind of machine
// one point in a few lands in a slow mode (both processes on one CPU: several context switches
// per operation, three times the CPU) that raw TCP and uiw meet alike, so one pair's ratio can
// be off by 2x either way.
void pairs_row(const char* test, const char* size, bool crc, bool bw, int rounds,
               const std::function<Result()>& tcp, const std::function<Result()>& uiw) {
  struct Pair {
    Result uiw, tcp;
    double ratio;
  };
  std::vector<Pair> pairs;
  for (int r = 0; r < rounds; ++r) {
    Pair p;
    p.tcp = tcp();
    p.uiw = uiw();
    p.ratio = p.uiw.value / p.tcp.value;
    pairs.push_back(p);
  }
  std::sort(pairs.begin(), pairs.end(),
            [](const Pair& a, const Pair& b) { return a.ratio < b.ratio; });
  char range[64] = "";
  if (pairs.size() > 1)
    std::snprintf(range, sizeof range, "  [%.2f-%.2fx]", pairs.front().ratio, pairs.back().ratio);
  const Pair& median = pairs[pairs.size() / 2];
  row(test, size, crc, median.uiw, median.tcp, bw, range);
}

void lat_row(const char* test, bool crc, Result (*uiw)(bool)) {
  pairs_row(test, "8B", crc, false, g_lat_rounds, tcp_latency, [&] { return uiw(crc); });
}

void bw_row(const char* test, const char* size_name, size_t size, bool crc,
            const std::function<Result()>& uiw) {
  pairs_row(
      test, size_name, crc, true, g_bw_rounds, [&] { return tcp_bandwidth(size); }, uiw);
}

}  // namespace

int main() {
  if (const char* s = getenv("UIW_BENCH_SECONDS")) g_seconds = atof(s);
  if (const char* s = getenv("UIW_BENCH_LAT_ITERS")) g_lat_iters = atoi(s);
  if (const char* s = getenv("UIW_BENCH_LAT_ROUNDS")) g_lat_rounds = std::max(1, atoi(s));
  if (const char* s = getenv("UIW_BENCH_BW_ROUNDS")) g_bw_rounds = std::max(1, atoi(s));
  const char* spins = getenv("UIW_BENCH_SPINS");
  const std::string modes =
      getenv("UIW_BENCH_MODES") ? getenv("UIW_BENCH_MODES") : "busy,blocking,progress";
  // Rows to run, by test name ("send lat,write bw"); all by default. One row alone is what a
  // profile of it needs.
  const std::string tests = getenv("UIW_BENCH_TESTS") ? getenv("UIW_BENCH_TESTS") : "";
  auto wanted = [&](const char* test) {
    return tests.empty() || tests.find(test) != std::string::npos;
  };
  std::printf(
      "uiw engine benchmark: two processes over loopback TCP, %.1f s per bandwidth point, %d "
      "pairs per bandwidth row, %d ping-pong round trips per latency pair, %d pairs per latency "
      "row, %ld CPUs\n",
      g_seconds, g_bw_rounds, g_lat_iters, g_lat_rounds, sysconf(_SC_NPROCESSORS_ONLN));
  std::printf(
      "mode busy: the polling thread moves the bytes and spins (latency vs TCP busy-poll recv); "
      "blocking: it sleeps in poll() when idle (vs TCP blocking read); progress: a progress "
      "thread moves them, the application spins on its CQ (vs the better TCP)\n"
      "raw TCP is measured just before each uiw point: stream bandwidth with the same message "
      "size, latency as above (both variants printed first); a row is its median pair "
      "[lowest-highest ratio of its pairs]\n"
      "cost per operation (one message one way), both processes: system calls, context "
      "switches, CPU us\n");
  registry_costs();
  app_copy_costs();
  {
    const Result blocking = tcp_pingpong(false), busy = tcp_pingpong(true);
    std::printf("raw TCP 8 B one-way: blocking %.2f us (", blocking.value);
    print_cost(blocking.cost);
    std::printf(" ), busy-poll %.2f us (", busy.value);
    print_cost(busy.cost);
    std::printf(" )\n");
  }
  std::printf("%-9s %-5s %-8s %-3s %14s %14s %7s | %6s %6s %7s | %6s %6s %7s\n", "test", "size",
              "mode", "crc", "uiw", "raw TCP", "ratio", "sys", "ctxsw", "cpu us", "sys", "ctxsw",
              "cpu us");
  for (const Mode mode : {Mode::Busy, Mode::Blocking, Mode::Progress}) {
    if (modes.find(kModeName[static_cast<int>(mode)]) == std::string::npos) continue;
    g_mode = mode;
    g_progress_thread = mode == Mode::Progress;
    g_spins = spins ? atoi(spins) : mode == Mode::Blocking ? 0 : std::numeric_limits<int>::max();
    for (bool crc : {false, true}) {
      for (const size_t size : {size_t{64} << 10, size_t{1} << 20}) {
        const char* sz = size == (64 << 10) ? "64KiB" : "1MiB";
        if (wanted("write bw"))
          bw_row("write bw", sz, size, crc,
                 [&] { return uiw_one_sided_bw(crc, size, WrOpcode::RdmaWrite); });
        if (wanted("read bw"))
          bw_row("read bw", sz, size, crc,
                 [&] { return uiw_one_sided_bw(crc, size, WrOpcode::RdmaRead); });
        if (wanted("send bw"))
          bw_row("send bw", sz, size, crc, [&] { return uiw_send_bw(crc, size); });
      }
      if (wanted("send lat")) lat_row("send lat", crc, uiw_send_lat);
      if (wanted("write lat")) lat_row("write lat", crc, uiw_write_lat);
    }
  }
  std::printf("ratio: uiw / raw TCP (bandwidth: higher is better; latency: lower is better)\n");
  return 0;
}
