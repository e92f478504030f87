// runtime::Progress and runtime::QueuePair under concurrency: a peer that never stops sending
// cannot stall the teardown of other QPs (or its own), and posting, polling and state queries
// race an abort without losing a work request. Also run under ThreadSanitizer
// (scripts/test tsan).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <thread>
#include <vector>

#include "integration/support/endpoint.h"

namespace uiw::test {
namespace {

using Clock = std::chrono::steady_clock;
using engine::SendWr;
using engine::WcStatus;
using engine::WrOpcode;

int ms_since(Clock::time_point t) {
  return static_cast<int>(
      std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t).count());
}

// server accepts what client connects, over loopback TCP with MPA.
void connect_pair(Endpoint& server, Endpoint& client) {
  Listener l;
  int src = -1;
  std::thread t([&] { src = server.accept(l.fd, LinkOptions{}); });
  const int crc = client.connect(l.port, LinkOptions{});
  t.join();
  ASSERT_EQ(crc, 0);
  ASSERT_EQ(src, 0);
}

// Two server QPs on one Progress thread (as a provider context drives all its QPs), each
// connected to a client with its own thread.
struct SharedProgressPair {
  runtime::Progress shared;
  std::unique_ptr<Endpoint> server[2], client[2];
  SharedProgressPair() {
    for (int i = 0; i < 2; ++i) {
      server[i] = std::make_unique<Endpoint>(10 + i, shared);
      client[i] = std::make_unique<Endpoint>(20 + i);
      connect_pair(*server[i], *client[i]);
    }
  }
};

// client writes 64 KiB RDMA Writes into server back to back until stop().
class Streamer {
 public:
  Streamer(Endpoint& client, Endpoint& server) : region_(1 << 20), src_(64 << 10) {
    fill(src_, 5);
    const memory::Stag rk = server.reg(region_, memory::kLocalWrite | memory::kRemoteWrite);
    const memory::Stag lk = client.reg(src_, memory::kLocalWrite);
    thread_ = std::thread([this, &client, rk, lk] {
      uint64_t id = 0, inflight = 0;
      engine::Completion c[16];
      while (!stop_) {
        while (inflight < 16) {
          SendWr w;
          w.wr_id = id++;
          w.opcode = WrOpcode::RdmaWrite;
          w.flags = engine::kSendSignaled;
          w.num_sge = 1;
          w.sg_list[0] = sge(src_, lk);
          w.remote_stag = rk;
          w.remote_addr = reinterpret_cast<uint64_t>(region_.data()) + (id % 16) * src_.size();
          if (client.post_send(w) != 0) return;
          ++inflight;
        }
        const size_t n = client.poll_send(c);
        for (size_t i = 0; i < n; ++i)
          if (c[i].status != WcStatus::Success) return;
        inflight -= n;
        written_ += n * src_.size();
        if (n == 0) std::this_thread::sleep_for(std::chrono::microseconds(20));
      }
    });
  }
  ~Streamer() { stop(); }
  void stop() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
  }
  uint64_t written() const { return written_; }

 private:
  std::vector<uint8_t> region_, src_;
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> written_{0};
  std::thread thread_;
};

void wait_for_traffic(const Streamer& s) {
  const auto t0 = Clock::now();
  while (s.written() < (8u << 20) && ms_since(t0) < 10000)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  ASSERT_GE(s.written(), 8u << 20) << "the stream did not get going";
}

// A Progress pass is bounded per QP and its lock is not held across passes: aborting another
// QP of the same thread, or the streamed-into QP itself, returns while the peer keeps sending
// (before, one pass ran as long as any connection moved bytes, with the lock held).
TEST(RuntimeTest, AStreamingPeerDoesNotStallTeardownOfOtherQps) {
  SharedProgressPair p;
  Streamer s(*p.client[0], *p.server[0]);
  wait_for_traffic(s);
  const uint64_t before = s.written();
  auto t0 = Clock::now();
  p.server[1]->queue_pair().abort();
  EXPECT_LT(ms_since(t0), 1000) << "abort of an idle QP waited for another QP's stream";
  EXPECT_EQ(p.server[1]->state(), engine::QpState::Error);
  // The stream goes on: a stall would last; a busy machine may only delay the next Write.
  const auto t1 = Clock::now();
  while (s.written() <= before && ms_since(t1) < 5000)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  EXPECT_GT(s.written(), before) << "the stream stopped";

  t0 = Clock::now();
  p.server[0]->queue_pair().abort();
  EXPECT_LT(ms_since(t0), 1000) << "abort of the streamed-into QP waited for the stream";
  s.stop();
  p.client[0]->queue_pair().abort();  // nothing is sent from the Streamer's buffer any more
}

// An endpoint's poll is ibv_poll_cq's: with a Progress thread, an empty poll marks the QP
// polled (so Progress leaves its reads to this poller while it awaits a receive,
// runtime/progress.h) and then moves the bytes in the polling thread; the poll that finds the
// completion hands the QP back. (Before, the endpoint only polled the CQ, so the host benchmark's
// progress mode never showed what the provider does.)
TEST(RuntimeTest, AnEmptyPollMovesTheBytesAndMarksTheQpPolled) {
  std::vector<uint8_t> in(64), out(64);
  fill(out, 9);
  Endpoint server(2), client(1);
  ASSERT_NO_FATAL_FAILURE(connect_pair(server, client));
  const memory::Stag ik = server.reg(in, memory::kLocalWrite);
  const memory::Stag lk = client.reg(out, memory::kLocalWrite);
  engine::RecvWr r;
  r.wr_id = 7;
  r.num_sge = 1;
  r.sg_list[0] = sge(in, ik);
  ASSERT_EQ(server.post_recv(r), 0);

  const int64_t before = runtime::steady_ns();
  engine::Completion c[4];
  EXPECT_EQ(server.poll_recv(c), 0u);
  EXPECT_TRUE(server.queue_pair().polled_since(before)) << "an empty poll did not drive the QP";

  SendWr w;
  w.wr_id = 8;
  w.opcode = WrOpcode::Send;
  w.flags = engine::kSendSignaled;
  w.num_sge = 1;
  w.sg_list[0] = sge(out, lk);
  ASSERT_EQ(client.post_send(w), 0);
  const auto got = server.wait_recv(1);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].status, WcStatus::Success);
  EXPECT_EQ(in, out);
  // It awaits nothing now: Progress reads for it again, at once or, while it sleeps on the
  // poller's lease, when the lease ends a few lend intervals later (Progress::unlend).
  const auto t0 = std::chrono::steady_clock::now();
  while (server.queue_pair().muted() &&
         std::chrono::steady_clock::now() - t0 < std::chrono::seconds(1))
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  EXPECT_FALSE(server.queue_pair().muted());
}

// Threads post (sends and receives), poll and query one QP while another aborts it: every WR
// posted is completed once (success before the abort, flushed after), none is lost or doubled.
// Posting does not take the QP's lock (QueuePair::post_send/post_recv), so this is also the
// race of a lock-free post against the flush of the abort.
TEST(RuntimeTest, PostPollAndQueryRaceAnAbortWithoutLosingWorkRequests) {
  // Before the endpoints, so they outlive them: the server may still be answering Reads.
  std::vector<uint8_t> region(1 << 16), local(4096);
  Endpoint server(2), client(1);
  ASSERT_NO_FATAL_FAILURE(connect_pair(server, client));
  const memory::Stag rk =
      server.reg(region, memory::kLocalWrite | memory::kRemoteWrite | memory::kRemoteRead);
  const memory::Stag lk = client.reg(local, memory::kLocalWrite);

  constexpr int kPosters = 2;
  // Fewer outstanding than the CQ holds (8192): a full CQ drops completions (CQ overrun).
  constexpr uint64_t kOutstanding = 1024;
  std::atomic<uint64_t> posted{0}, completed{0}, flushed{0};
  std::atomic<bool> stop{false}, posters_done{false};
  std::vector<std::thread> posters;
  for (int i = 0; i < kPosters; ++i) {
    posters.emplace_back([&, i] {
      for (uint64_t n = 0; !stop; ++n) {
        if (posted - completed >= kOutstanding) {
          std::this_thread::yield();
          continue;
        }
        SendWr w;
        w.wr_id = (static_cast<uint64_t>(i) << 32) | n;
        w.opcode = n % 2 ? WrOpcode::RdmaWrite : WrOpcode::RdmaRead;
        w.flags = engine::kSendSignaled;
        w.num_sge = 1;
        w.sg_list[0] = sge(local, lk, 0, 512);
        w.remote_stag = rk;
        w.remote_addr = reinterpret_cast<uint64_t>(region.data()) + 512 * (n % 64);
        if (client.post_send(w) == 0)
          ++posted;
        else
          std::this_thread::yield();  // send queue full
      }
    });
  }
  std::thread poller([&] {
    engine::Completion c[32];
    const auto give_up = Clock::now() + std::chrono::seconds(20);
    while ((!posters_done || completed < posted) && Clock::now() < give_up) {
      const size_t n = client.poll_send(c);
      for (size_t i = 0; i < n; ++i) {
        if (c[i].status == WcStatus::WrFlushErr) ++flushed;
        EXPECT_TRUE(c[i].status == WcStatus::Success || c[i].status == WcStatus::WrFlushErr)
            << engine::wc_status_name(c[i].status);
      }
      completed += n;
      if (n == 0 && stop) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  });
  std::thread querier([&] {
    while (!stop) (void)client.state();
  });
  // Receives nobody sends to: each one completes exactly once, flushed by the abort.
  std::atomic<uint64_t> recv_posted{0}, recv_flushed{0};
  std::thread recv_poster([&] {
    engine::Completion c[32];
    for (uint64_t n = 0; !stop; ++n) {
      if (recv_posted - recv_flushed < 64) {
        engine::RecvWr r;
        r.wr_id = n;
        r.num_sge = 1;
        r.sg_list[0] = sge(local, lk, 0, 64);
        if (client.post_recv(r) == 0) ++recv_posted;
      }
      const size_t k = client.poll_recv(c);
      for (size_t i = 0; i < k; ++i) EXPECT_EQ(c[i].status, WcStatus::WrFlushErr);
      recv_flushed += k;
    }
    const auto give_up = Clock::now() + std::chrono::seconds(10);
    while (recv_flushed < recv_posted && Clock::now() < give_up)
      recv_flushed += client.poll_recv(c);
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  client.queue_pair().abort();
  // Until a poster has posted after the abort: no fixed pause is long enough on a busy host,
  // where the posters may not get a CPU for tens of milliseconds.
  const uint64_t posted_at_abort = posted;
  const auto aborted_at = Clock::now();
  while (posted <= posted_at_abort + kPosters && ms_since(aborted_at) < 10000)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  stop = true;
  for (auto& th : posters) th.join();
  posters_done = true;
  querier.join();
  recv_poster.join();
  EXPECT_EQ(recv_flushed.load(), recv_posted.load()) << "a receive was lost or completed twice";
  EXPECT_GT(recv_posted.load(), 0u);
  const auto t0 = Clock::now();
  while (completed < posted && ms_since(t0) < 10000)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  poller.join();
  EXPECT_EQ(completed.load(), posted.load());
  EXPECT_GT(posted.load(), posted_at_abort + kPosters) << "nothing was posted after the abort";
  EXPECT_GT(flushed.load(), 0u) << "WRs posted after the abort complete flushed";
  EXPECT_EQ(client.state(), engine::QpState::Error);
}

}  // namespace
}  // namespace uiw::test
