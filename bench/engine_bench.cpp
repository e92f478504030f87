// uiw engine benchmark: two processes over loopback TCP. RDMA Write / Read / Send bandwidth at
// 64 KiB and 1 MiB, 8-byte Send and Write ping-pong latency, with CRC off and on, each beside raw
// TCP measured in the same run (stream bandwidth, ping-pong), printed with the ratio.
//
// Both sides busy-poll in their own thread (runtime::HostEndpoint without a progress thread),
// which is uiw's lowest-latency mode.
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "runtime/host_endpoint.h"
#include "transport/socket_util.h"
#include "wire/bytes.h"

using namespace uiw;
using Clock = std::chrono::steady_clock;

namespace {

double g_seconds = 1.0;
int g_lat_iters = 20000;

double since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// Runs `server` in a forked child on a fresh listener and `client` here; returns client's value.
double run_pair(const std::function<int(int listen_fd)>& server,
                const std::function<double(uint16_t port)>& client) {
  uint16_t port = 0;
  const int lfd = transport::tcp_listen("127.0.0.1", 0, &port);
  if (lfd < 0) {
    std::fprintf(stderr, "listen: %s\n", strerror(-lfd));
    exit(1);
  }
  const pid_t pid = fork();
  if (pid == 0) _exit(server(lfd));
  close(lfd);
  const double v = client(port);
  int status = 0;
  waitpid(pid, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    std::fprintf(stderr, "bench server failed (status %d)\n", status);
    exit(1);
  }
  return v;
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

double tcp_bandwidth(size_t msg) {  // Gb/s
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
        return got * 8 / t / 1e9;
      });
}

double tcp_pingpong() {  // one-way latency, us
  return run_pair(
      [](int lfd) {
        const int fd = transport::tcp_accept(lfd, 10000);
        nodelay(fd);
        uint8_t b[8];
        while (read_full(fd, b, 8)) write_full(fd, b, 8);
        return 0;
      },
      [](uint16_t port) {
        const int fd = transport::tcp_connect("127.0.0.1", port, 10000);
        nodelay(fd);
        uint8_t b[8] = {};
        const auto t0 = Clock::now();
        for (int i = 0; i < g_lat_iters; ++i) {
          write_full(fd, b, 8);
          read_full(fd, b, 8);
        }
        const double t = since(t0);
        close(fd);
        return t / g_lat_iters / 2 * 1e6;
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

engine::Sge sge_of(void* p, size_t n, memory::Stag k) {
  return {reinterpret_cast<uint64_t>(p), static_cast<uint32_t>(n), k};
}

void die(const char* what) {
  std::fprintf(stderr, "bench: %s\n", what);
  exit(1);
}

// Waits for one completion on the send (or receive) queue, busy-polling.
// Spins, then blocks in poll(): busy-polling alone starves the peer when both processes share
// few cores.
// Spinning pays only with a spare core; on 2 CPUs it steals the peer's time slice.
int kSpins = sysconf(_SC_NPROCESSORS_ONLN) > 2 ? 2000 : 0;  // UIW_BENCH_SPINS

Completion wait_one(runtime::HostEndpoint& ep, bool send) {
  Completion c;
  for (int idle = 0;; ++idle) {
    if (idle > kSpins) {
      ep.wait_io(1);
      idle = 0;
    }
    const size_t n = send ? ep.poll_send({&c, 1}) : ep.poll_recv({&c, 1});
    if (n) {
      if (c.status != engine::WcStatus::Success) die(engine::wc_status_name(c.status));
      return c;
    }
    if (ep.state() == engine::QpState::Error) die("qp entered error");
  }
}

void post_recv(runtime::HostEndpoint& ep, void* p, size_t n, memory::Stag k, uint64_t id = 0) {
  RecvWr r;
  r.wr_id = id;
  r.num_sge = 1;
  r.sg_list[0] = sge_of(p, n, k);
  if (ep.post_recv(r) != 0) die("post_recv");
}

void post_send(runtime::HostEndpoint& ep, WrOpcode op, void* p, size_t n, memory::Stag k,
               uint32_t rkey = 0, uint64_t raddr = 0, bool signaled = true) {
  SendWr w;
  w.opcode = op;
  w.flags = signaled ? uint32_t{engine::kSendSignaled} : 0u;
  w.num_sge = n ? 1 : 0;
  w.sg_list[0] = sge_of(p, n, k);
  w.remote_stag = rkey;
  w.remote_addr = raddr;
  if (ep.post_send(w) != 0) die("post_send");
}

// Server side of the one-sided tests: exposes a buffer, then serves until the client's "done".
int one_sided_server(int lfd, bool crc, size_t size) {
  runtime::HostEndpoint ep(2, false);
  if (ep.accept(lfd, mpa(crc)) != 0) return 2;
  std::vector<uint8_t> buf(size), ctl(16), done(8);
  const auto bk =
      ep.reg(buf.data(), size, memory::kLocalWrite | memory::kRemoteWrite | memory::kRemoteRead);
  const auto ck = ep.reg(ctl.data(), ctl.size(), 0);
  const auto dk = ep.reg(done.data(), done.size(), memory::kLocalWrite);
  post_recv(ep, done.data(), done.size(), dk);
  wire::store_be32(ctl.data(), bk);
  wire::store_be64(ctl.data() + 4, reinterpret_cast<uint64_t>(buf.data()));
  post_send(ep, WrOpcode::Send, ctl.data(), 12, ck);
  wait_one(ep, true);
  wait_one(ep, false);  // "done": every earlier Write is placed (RDMAP §5.5 rule 10)
  post_send(ep, WrOpcode::Send, ctl.data(), 0, ck);
  wait_one(ep, true);
  return 0;
}

double uiw_one_sided_bw(bool crc, size_t size, WrOpcode op) {
  return run_pair([=](int lfd) { return one_sided_server(lfd, crc, size); },
                  [=](uint16_t port) {
                    runtime::HostEndpoint ep(1, false);
                    if (ep.connect("127.0.0.1", port, mpa(crc)) != 0) die("connect");
                    std::vector<uint8_t> buf(size, 0x3C), ctl(16);
                    const auto bk = ep.reg(buf.data(), size, memory::kLocalWrite);
                    const auto ck = ep.reg(ctl.data(), ctl.size(), memory::kLocalWrite);
                    post_recv(ep, ctl.data(), ctl.size(), ck);
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
                    return done * size * 8 / t / 1e9;
                  });
}

// Send bandwidth with receive credits: the server acks every kBatch messages after reposting
// them, so the client never sends into a missing receive (iWARP has no RNR retry).
constexpr int kBatch = 32;

double uiw_send_bw(bool crc, size_t size) {
  return run_pair(
      [=](int lfd) {
        runtime::HostEndpoint ep(2, false);
        if (ep.accept(lfd, mpa(crc)) != 0) return 2;
        std::vector<uint8_t> bufs(size * 2 * kBatch), ack(4);
        const auto k = ep.reg(bufs.data(), bufs.size(), memory::kLocalWrite);
        const auto ak = ep.reg(ack.data(), ack.size(), 0);
        for (int i = 0; i < 2 * kBatch; ++i) post_recv(ep, bufs.data() + i * size, size, k, i);
        post_send(ep, WrOpcode::Send, ack.data(), 0, ak, 0, 0, false);  // "ready"
        for (int got = 0;;) {
          const Completion c = wait_one(ep, false);
          if (c.byte_len == 0) break;  // "done"
          post_recv(ep, bufs.data() + c.wr_id * size, size, k, c.wr_id);
          if (++got % kBatch == 0) post_send(ep, WrOpcode::Send, ack.data(), 1, ak, 0, 0, false);
        }
        post_send(ep, WrOpcode::Send, ack.data(), 0, ak);  // the only signaled one
        wait_one(ep, true);
        return 0;
      },
      [=](uint16_t port) {
        runtime::HostEndpoint ep(1, false);
        if (ep.connect("127.0.0.1", port, mpa(crc)) != 0) die("connect");
        std::vector<uint8_t> buf(size, 0x6B), acks(4 * 64);
        const auto bk = ep.reg(buf.data(), size, 0);
        const auto ak = ep.reg(acks.data(), acks.size(), memory::kLocalWrite);
        for (int i = 0; i < 64; ++i) post_recv(ep, acks.data() + 4 * i, 4, ak);
        wait_one(ep, false);  // ready
        int credits = 2 * kBatch, outstanding = 0;
        uint64_t sent = 0;
        const auto t0 = Clock::now();
        while (since(t0) < g_seconds) {
          while (credits > 0 && outstanding < 32) {
            post_send(ep, WrOpcode::Send, buf.data(), size, bk);
            --credits;
            ++outstanding;
          }
          Completion c;
          if (ep.poll_send({&c, 1})) {
            --outstanding;
            ++sent;
          }
          if (ep.poll_recv({&c, 1})) {
            credits += kBatch;
            post_recv(ep, acks.data(), 4, ak);
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
        return sent * size * 8 / t / 1e9;
      });
}

double uiw_send_lat(bool crc) {
  return run_pair(
      [=](int lfd) {
        runtime::HostEndpoint ep(2, false);
        if (ep.accept(lfd, mpa(crc)) != 0) return 2;
        std::vector<uint8_t> in(8), out(8);
        const auto ik = ep.reg(in.data(), 8, memory::kLocalWrite), ok = ep.reg(out.data(), 8, 0);
        for (int i = 0; i < 16; ++i) post_recv(ep, in.data(), 8, ik);
        for (int i = 0; i < g_lat_iters; ++i) {
          wait_one(ep, false);
          post_recv(ep, in.data(), 8, ik);
          post_send(ep, WrOpcode::Send, out.data(), 8, ok, 0, 0, (i % 64) == 63);
          Completion c;
          ep.poll_send({&c, 1});
        }
        while (ep.qp().tx_pending().size()) ep.progress();
        return 0;
      },
      [=](uint16_t port) {
        runtime::HostEndpoint ep(1, false);
        if (ep.connect("127.0.0.1", port, mpa(crc)) != 0) die("connect");
        std::vector<uint8_t> in(8), out(8);
        const auto ik = ep.reg(in.data(), 8, memory::kLocalWrite), ok = ep.reg(out.data(), 8, 0);
        for (int i = 0; i < 16; ++i) post_recv(ep, in.data(), 8, ik);
        const auto t0 = Clock::now();
        for (int i = 0; i < g_lat_iters; ++i) {
          post_send(ep, WrOpcode::Send, out.data(), 8, ok, 0, 0, (i % 64) == 63);
          wait_one(ep, false);
          post_recv(ep, in.data(), 8, ik);
          Completion c;
          ep.poll_send({&c, 1});
        }
        const double t = since(t0);
        return t / g_lat_iters / 2 * 1e6;
      });
}

// ib_write_lat style: each side Writes 8 bytes into the other's buffer and spins on its own
// buffer for the peer's next value, driving progress while it spins.
double uiw_write_lat(bool crc) {
  auto side = [=](runtime::HostEndpoint& ep, bool client) -> double {
    std::vector<uint8_t> mine(8, 0), out(8, 0), ctl(16), peer(16);
    const auto mk = ep.reg(mine.data(), 8, memory::kLocalWrite | memory::kRemoteWrite);
    const auto ok = ep.reg(out.data(), 8, 0);
    const auto ck = ep.reg(ctl.data(), 16, 0), pk = ep.reg(peer.data(), 16, memory::kLocalWrite);
    post_recv(ep, peer.data(), 16, pk);
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
      for (int idle = 0; *flag != v; ++idle) {
        if (ep.progress()) idle = 0;
        if (idle > kSpins) {
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
    while (!ep.qp().tx_idle()) ep.progress();
    return t / g_lat_iters / 2 * 1e6;
  };
  return run_pair(
      [=](int lfd) {
        runtime::HostEndpoint ep(2, false);
        if (ep.accept(lfd, mpa(crc)) != 0) return 2;
        side(ep, false);
        return 0;
      },
      [=](uint16_t port) {
        runtime::HostEndpoint ep(1, false);
        if (ep.connect("127.0.0.1", port, mpa(crc)) != 0) die("connect");
        return side(ep, true);
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

void row(const char* test, const char* size, bool crc, double uiw, double tcp, bool bw) {
  const double ratio = bw ? uiw / tcp : uiw / tcp;
  std::printf("%-12s %-7s %-4s %10.2f %-5s %10.2f %-5s %7.2fx\n", test, size, crc ? "on" : "off",
              uiw, bw ? "Gb/s" : "us", tcp, bw ? "Gb/s" : "us", ratio);
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  if (const char* s = getenv("UIW_BENCH_SECONDS")) g_seconds = atof(s);
  if (const char* s = getenv("UIW_BENCH_LAT_ITERS")) g_lat_iters = atoi(s);
  if (const char* s = getenv("UIW_BENCH_SPINS")) kSpins = atoi(s);
  const std::string only = argc > 1 ? argv[1] : "";
  std::printf(
      "uiw engine benchmark: two processes over loopback TCP, busy-poll, %.1f s per "
      "bandwidth point, %d ping-pong round trips\n",
      g_seconds, g_lat_iters);
  std::printf("%-12s %-7s %-4s %16s %16s %8s\n", "test", "size", "crc", "uiw", "raw TCP", "ratio");
  registry_costs();
  const double tcp64 = tcp_bandwidth(64 << 10), tcp1m = tcp_bandwidth(1 << 20);
  const double tcplat = tcp_pingpong();
  for (bool crc : {false, true}) {
    row("write bw", "64KiB", crc, uiw_one_sided_bw(crc, 64 << 10, WrOpcode::RdmaWrite), tcp64,
        true);
    row("write bw", "1MiB", crc, uiw_one_sided_bw(crc, 1 << 20, WrOpcode::RdmaWrite), tcp1m, true);
    row("read bw", "64KiB", crc, uiw_one_sided_bw(crc, 64 << 10, WrOpcode::RdmaRead), tcp64, true);
    row("read bw", "1MiB", crc, uiw_one_sided_bw(crc, 1 << 20, WrOpcode::RdmaRead), tcp1m, true);
    row("send bw", "64KiB", crc, uiw_send_bw(crc, 64 << 10), tcp64, true);
    row("send bw", "1MiB", crc, uiw_send_bw(crc, 1 << 20), tcp1m, true);
    row("send lat", "8B", crc, uiw_send_lat(crc), tcplat, false);
    row("write lat", "8B", crc, uiw_write_lat(crc), tcplat, false);
  }
  std::printf("ratio: uiw / raw TCP (bandwidth: higher is better; latency: lower is better)\n");
  return 0;
}
