// runtime::Progress with a peer that never stops: a stream whose every read returns another
// valid RDMA Write FPDU, so each pass of its QP moves bytes and it is never idle. Other QPs of
// the same Progress thread must still be served and torn down at once.
#include "runtime/progress.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sched.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "runtime/queue_pair.h"
#include "transport/byte_stream.h"
#include "transport/socket_util.h"
#include "unit/engine/qp_pair.h"
#include "wire/ddp.h"
#include "wire/mpa.h"
#include "wire/rdmap.h"
#include "wire/terminate.h"

namespace uiw::runtime {
namespace {

using namespace std::chrono_literals;

// Set in a test's polling thread: EndlessWrites counts the reads it makes (a lender's passes)
// and makes each last a while, so that the test can catch one in progress.
thread_local bool tl_polling_thread = false;

// Reads return RDMA Write FPDUs (CRC off) into stag at offset 0, forever; writes take all.
class EndlessWrites final : public transport::ByteStream {
 public:
  explicit EndlessWrites(uint32_t stag) {
    wire::SegmentHeader h;
    h.tagged = true;
    h.last = true;
    h.rdmap_control = wire::rdmap_control(wire::Opcode::RdmaWrite);
    h.stag = stag;
    h.to = 0;
    std::vector<uint8_t> ulpdu(wire::segment_header_size(true) + 1024, 0x5a);
    wire::encode_segment_header(ulpdu.data(), h);
    fpdu_.resize(wire::fpdu_size(ulpdu.size()));
    wire::encode_fpdu(fpdu_, 0, ulpdu, false, false);
  }
  transport::IoResult readv(const iovec* iov, int n) override {
    if (tl_polling_thread) {
      poller_reading = true;
      std::this_thread::sleep_for(50us);
    }
    size_t total = 0;
    for (int i = 0; i < n; ++i) {
      auto* p = static_cast<uint8_t*>(iov[i].iov_base);
      for (size_t left = iov[i].iov_len; left > 0;) {
        const size_t k = std::min(left, fpdu_.size() - off_);
        std::copy_n(fpdu_.data() + off_, k, p);
        p += k;
        left -= k;
        off_ = (off_ + k) % fpdu_.size();
        total += k;
      }
    }
    reads++;
    if (tl_polling_thread) {
      poller_reads++;
      poller_reading = false;
    }
    return {transport::IoStatus::Ok, total, 0};
  }
  transport::IoResult writev(const iovec* iov, int n) override {
    size_t total = 0;
    for (int i = 0; i < n; ++i) total += iov[i].iov_len;
    return {transport::IoStatus::Ok, total, 0};
  }
  int fd() const override { return -1; }
  void shutdown_write() override {}
  void abort() override {}
  uint32_t emss() const override { return 1460; }
  std::atomic<uint64_t> reads{0};
  std::atomic<uint64_t> poller_reads{0};    // made by a thread with tl_polling_thread set
  std::atomic<bool> poller_reading{false};  // such a read is in progress

 private:
  std::vector<uint8_t> fpdu_;
  size_t off_ = 0;
};

// A QP of `side`'s PD, memory and queues.
engine::QpConfig config_of(engine::test::Side& side, uint32_t qpn) {
  engine::QpConfig c;
  c.qp_num = qpn;
  c.pd = side.pd;
  c.sq_depth = 16;
  c.registry = &side.reg;
  c.send_cq = &side.scq;
  c.recv_cq = &side.rcq;
  c.rq = &side.rq;
  return c;
}

struct Endless {
  engine::test::Side side;
  std::vector<uint8_t> region = std::vector<uint8_t>(4096);
  std::unique_ptr<QueuePair> qp;
  EndlessWrites* stream = nullptr;  // Owned by qp's Connection.
  Endless(uint32_t qpn, Progress& p) : side(qpn) {
    const memory::Stag k = side.reg_mr(region, memory::kLocalWrite | memory::kRemoteWrite);
    qp = std::make_unique<QueuePair>(config_of(side, qpn));
    auto s = std::make_unique<EndlessWrites>(k);
    stream = s.get();
    engine::ConnParams params;
    params.initiator = true;
    EXPECT_EQ(qp->attach(std::move(s), params, &p), 0);
  }
};

// Runs f in another thread; true if it returned within `limit`.
template <typename F>
bool returns_within(std::chrono::milliseconds limit, F f) {
  auto done = std::async(std::launch::async, f);
  const bool ok = done.wait_for(limit) == std::future_status::ready;
  if (!ok) ADD_FAILURE() << "still blocked after " << limit.count() << " ms";
  return ok;
}

// Two QPs whose peers never stop: the thread takes turns (both advance), and removing either
// (as destroy does) returns at once instead of waiting for the traffic to end.
TEST(ProgressTest, EndlessStreamsShareTheThreadAndDoNotStallRemoval) {
  Progress p;
  Endless a(1, p), b(2, p);
  const auto t0 = std::chrono::steady_clock::now();
  while ((a.stream->reads < 1000 || b.stream->reads < 1000) &&
         std::chrono::steady_clock::now() - t0 < 5s)
    std::this_thread::sleep_for(1ms);
  EXPECT_GE(a.stream->reads, 1000u);
  EXPECT_GE(b.stream->reads, 1000u);
  // A hung removal cannot be recovered from (the thread drives the QPs being destroyed).
  if (!returns_within(2000ms, [&] { b.qp->leave_progress(); })) std::abort();
  if (!returns_within(2000ms, [&] { a.qp->leave_progress(); })) std::abort();
  const uint64_t after = a.stream->reads;
  std::this_thread::sleep_for(20ms);
  EXPECT_EQ(a.stream->reads, after) << "the thread still drives a removed QP";
}

// One RDMA Write FPDU (CRC off) of `len` bytes of `fill` to tagged offset `to` of stag.
std::vector<uint8_t> write_fpdu(uint32_t stag, uint64_t to, size_t len, uint8_t fill) {
  wire::SegmentHeader h;
  h.tagged = true;
  h.last = true;
  h.rdmap_control = wire::rdmap_control(wire::Opcode::RdmaWrite);
  h.stag = stag;
  h.to = to;
  std::vector<uint8_t> ulpdu(wire::segment_header_size(true) + len, fill);
  wire::encode_segment_header(ulpdu.data(), h);
  std::vector<uint8_t> fpdu(wire::fpdu_size(ulpdu.size()));
  wire::encode_fpdu(fpdu, 0, ulpdu, false, false);
  return fpdu;
}

// The peer's last FPDU and its FIN arrive together, so one readiness edge announces both and
// the pass that reads the FPDU ends on a short read with the FIN still unread. The FIN must be
// read all the same (the QP reaches Error, as after any close): a Progress that ran a pass
// again only when its read budget was spent never read it, and the QP waited for ever.
TEST(ProgressTest, DataAndFinInOneEdgeAreBothRead) {
  uint16_t port = 0;
  const int lfd = transport::tcp_listen("127.0.0.1", 0, &port);
  ASSERT_GE(lfd, 0);
  Progress p;
  for (int round = 0; round < 20; ++round) {
    int peer = transport::tcp_connect("127.0.0.1", port, 2000);
    ASSERT_GE(peer, 0);
    const int fd = transport::tcp_accept(lfd, 2000);
    ASSERT_GE(fd, 0);
    engine::test::Side side(7);
    std::vector<uint8_t> region(512, 0);
    const memory::Stag k = side.reg_mr(region, memory::kLocalWrite | memory::kRemoteWrite);
    const std::vector<uint8_t> fpdu =
        write_fpdu(k, reinterpret_cast<uintptr_t>(region.data()), region.size(), 0xa5);
    // Both are in our socket before the QP is attached: its first pass meets them together.
    ASSERT_EQ(write(peer, fpdu.data(), fpdu.size()), ssize_t(fpdu.size()));
    ASSERT_EQ(shutdown(peer, SHUT_WR), 0);
    std::this_thread::sleep_for(2ms);

    QueuePair qp(config_of(side, 7));
    engine::ConnParams params;
    params.initiator = true;
    params.crc = false;  // as write_fpdu encodes it
    ASSERT_EQ(qp.attach(std::make_unique<transport::TcpStream>(fd), params, &p), 0);
    const auto t0 = std::chrono::steady_clock::now();
    while (qp.state() != engine::QpState::Error && std::chrono::steady_clock::now() - t0 < 2s)
      std::this_thread::sleep_for(1ms);
    EXPECT_EQ(qp.state(), engine::QpState::Error) << "round " << round << ": the FIN was not read";
    qp.with_engine([](engine::Qp& e) {
      if (e.terminate_sent())
        ADD_FAILURE() << "Terminate sent: "
                      << wire::terminate_cause_name(e.terminate_sent()->cause);
    });
    EXPECT_EQ(region[0], 0xa5);
    EXPECT_EQ(region[511], 0xa5);
    qp.leave_progress();
    close(peer);
    if (HasFailure()) break;
  }
  close(lfd);
}

// Reads hand out the queued chunks, one per read (none queued: EAGAIN); writes take all. Both
// are counted.
class ChunkStream final : public transport::ByteStream {
 public:
  transport::IoResult readv(const iovec* iov, int n) override {
    ++reads;
    if (chunks.empty() || n < 1 || iov[0].iov_len < chunks.front().size())
      return {transport::IoStatus::WouldBlock, 0, 0};
    const std::vector<uint8_t> c = std::move(chunks.front());
    chunks.erase(chunks.begin());
    std::copy(c.begin(), c.end(), static_cast<uint8_t*>(iov[0].iov_base));
    return {transport::IoStatus::Ok, c.size(), 0};
  }
  transport::IoResult writev(const iovec* iov, int n) override {
    if (broken) return {transport::IoStatus::Error, 0, EPIPE};
    if (full) return {transport::IoStatus::WouldBlock, 0, 0};
    size_t total = 0;
    for (int i = 0; i < n; ++i) total += iov[i].iov_len;
    ++writes;
    return {transport::IoStatus::Ok, total, 0};
  }
  int fd() const override { return -1; }
  void shutdown_write() override { ++shutdowns; }
  void abort() override {}
  uint32_t emss() const override { return 1460; }
  bool unacknowledged() const override { return unacked; }
  std::vector<std::vector<uint8_t>> chunks;
  int reads = 0, writes = 0;
  std::atomic<int> shutdowns{0};     // FINs sent (from whichever thread)
  bool full = false;                 // every write says EAGAIN
  bool broken = false;               // every write fails (EPIPE)
  std::atomic<bool> unacked{false};  // the peer has not acknowledged every byte written
};

// The poster's own pass sends what it posted and nothing else: one write, no read that could
// only find the socket empty in front of the send (the latency path of every ping-pong).
TEST(QueuePairTest, APostIsSentWithOneWriteAndNoRead) {
  engine::test::Side side(1);
  std::vector<uint8_t> src(8, 0x5a);
  const memory::Stag k = side.reg_mr(src, 0);
  QueuePair qp(config_of(side, 1));
  auto s = std::make_unique<ChunkStream>();
  ChunkStream* stream = s.get();
  engine::ConnParams params;
  params.initiator = true;
  ASSERT_EQ(qp.attach(std::move(s), params, nullptr), 0);
  engine::SendWr w;
  w.wr_id = 1;
  w.flags = engine::kSendSignaled;
  w.num_sge = 1;
  w.sg_list[0] = engine::test::sge_of(src, k);
  ASSERT_EQ(qp.post_send(w), 0);
  EXPECT_TRUE(qp.drive(true));
  EXPECT_EQ(stream->writes, 1);
  EXPECT_EQ(stream->reads, 0);
  // A poller's pass still reads.
  qp.drive(false);
  EXPECT_EQ(stream->reads, 1);
}

// Waits up to `limit` for *p == v.
bool becomes(const volatile uint8_t* p, uint8_t v, std::chrono::milliseconds limit) {
  const auto t0 = std::chrono::steady_clock::now();
  while (*p != v) {
    if (std::chrono::steady_clock::now() - t0 > limit) return false;
    std::this_thread::sleep_for(100us);
  }
  return true;
}

// Polls (drive(false)) until one moves bytes, up to `limit`. One poll is not enough to ask
// for: a poll returns at once when the QP's lock is taken (QueuePair::drive's try_lock), as it
// is until the thread's pass that muted the QP has ended, which a busy host can stretch.
bool a_poll_moves(QueuePair& qp, std::chrono::milliseconds limit = 2000ms) {
  const auto t0 = std::chrono::steady_clock::now();
  while (!qp.drive(false)) {
    if (std::chrono::steady_clock::now() - t0 > limit) return false;
    std::this_thread::sleep_for(100us);
  }
  return true;
}

// Writes take kChunk octets each, the first only once the test opens `gate`; reads find
// nothing until `inbound` is set, then the peer's RDMA Write FPDU once. Records how many
// writes had gone out when that FPDU was read, and by which thread.
class GatedStream final : public transport::ByteStream {
 public:
  static constexpr size_t kChunk = 4096;
  explicit GatedStream(std::vector<uint8_t> fpdu) : fpdu_(std::move(fpdu)) {}
  transport::IoResult readv(const iovec* iov, int n) override {
    ++reads;
    if (!inbound || given_) return {transport::IoStatus::WouldBlock, 0, 0};
    if (n < 1 || iov[0].iov_len < fpdu_.size()) return {transport::IoStatus::WouldBlock, 0, 0};
    std::copy(fpdu_.begin(), fpdu_.end(), static_cast<uint8_t*>(iov[0].iov_base));
    given_ = true;
    writes_before_read = writes.load();
    reader = std::this_thread::get_id();
    return {transport::IoStatus::Ok, fpdu_.size(), 0};
  }
  transport::IoResult writev(const iovec* iov, int n) override {
    if (writes == 0) {
      writing = true;
      while (!gate) std::this_thread::sleep_for(100us);
    }
    size_t total = 0;
    for (int i = 0; i < n; ++i) total += iov[i].iov_len;
    ++writes;
    return {transport::IoStatus::Ok, std::min(total, kChunk), 0};
  }
  int fd() const override { return -1; }
  void shutdown_write() override {}
  void abort() override {}
  uint32_t emss() const override { return 1460; }
  std::atomic<bool> gate{false}, writing{false}, inbound{false};
  std::atomic<int> reads{0}, writes{0}, writes_before_read{-1};
  std::thread::id reader;

 private:
  std::vector<uint8_t> fpdu_;
  bool given_ = false;
};

// A poster that holds the QP while it writes much (here 64 KiB in 4 KiB writes) reads for the
// Progress thread that waits for the QP meanwhile, between two of its writes: ib_send_bw's
// client posted 100 sends of 64 KiB after each completion event, each post transmitting, so
// the server's credit Write waited in the socket until the posting stopped, and perftest's
// event loop, which looks at its credits only after a completion, then slept for ever.
TEST(QueuePairTest, APosterHoldingTheQpReadsForTheProgressThreadThatWaits) {
  engine::test::Side side(1);
  std::vector<uint8_t> src(64 << 10, 0x5a), region(64, 0);
  const memory::Stag lk = side.reg_mr(src, 0);
  const memory::Stag rk = side.reg_mr(region, memory::kLocalWrite | memory::kRemoteWrite);
  auto s = std::make_unique<GatedStream>(
      write_fpdu(rk, reinterpret_cast<uintptr_t>(region.data()), region.size(), 0xc3));
  GatedStream* stream = s.get();
  Progress p;
  QueuePair qp(config_of(side, 1));
  engine::ConnParams params;
  params.initiator = true;
  params.crc = false;  // as write_fpdu encodes it
  ASSERT_EQ(qp.attach(std::move(s), params, &p), 0);
  // The thread's first pass (attach queues one) is over once it read and let go of the QP.
  const auto t0 = std::chrono::steady_clock::now();
  auto within_2s = [&] { return std::chrono::steady_clock::now() - t0 < 2s; };
  while (stream->reads == 0 && within_2s()) std::this_thread::sleep_for(100us);
  ASSERT_GT(stream->reads, 0);
  qp.with_engine([](engine::Qp&) {});  // takes the QP's mutex: after that pass
  engine::SendWr w;
  w.wr_id = 1;
  w.num_sge = 1;
  w.sg_list[0] = engine::test::sge_of(src, lk);
  ASSERT_EQ(qp.post_send(w), 0);
  std::thread::id poster;
  std::thread t([&] {
    poster = std::this_thread::get_id();
    qp.drive(true);
  });
  while (!stream->writing && within_2s()) std::this_thread::sleep_for(100us);
  ASSERT_TRUE(stream->writing) << "the poster did not write";
  // The peer's Write arrives, and Progress, kicked, waits for the poster's QP.
  stream->inbound = true;
  p.kick(&qp);
  while (!qp.reader_waiting() && within_2s()) std::this_thread::sleep_for(100us);
  const bool waited = qp.reader_waiting();
  stream->gate = true;
  t.join();
  ASSERT_TRUE(waited) << "the Progress thread never waited for the QP";
  EXPECT_TRUE(becomes(&region[63], 0xc3, 2000ms)) << "the Write was not placed";
  EXPECT_EQ(stream->reader, poster) << "the Write waited for the Progress thread";
  EXPECT_LT(stream->writes_before_read, 3) << "the Write waited for the poster's writes";
  EXPECT_GE(stream->writes, int(src.size() / GatedStream::kChunk));
  EXPECT_FALSE(qp.reader_waiting());
  qp.leave_progress();
}

// Several WRs posted as one (the ibv_wr_* batch's wr_complete; perftest posts so) go onto the
// send queue while another thread's pass holds the QP across a write that does not return: a
// poster never sleeps behind a pass. A batch the send queue has no room for is refused whole.
TEST(QueuePairTest, ABatchPostDoesNotWaitForAPassThatHoldsTheQp) {
  engine::test::Side side(1);
  std::vector<uint8_t> src(64 << 10, 0x5a);
  const memory::Stag lk = side.reg_mr(src, 0);
  auto s = std::make_unique<GatedStream>(std::vector<uint8_t>{});
  GatedStream* stream = s.get();
  QueuePair qp(config_of(side, 1));
  engine::ConnParams params;
  params.initiator = true;
  ASSERT_EQ(qp.attach(std::move(s), params, nullptr), 0);
  engine::SendWr w;
  w.num_sge = 1;
  w.sg_list[0] = engine::test::sge_of(src, lk);
  ASSERT_EQ(qp.post_send(w), 0);
  std::thread pass([&] { qp.drive(true); });  // its first write waits for the gate
  struct OpenAndJoin {                        // also when an assertion returns early
    GatedStream* s;
    std::thread& t;
    ~OpenAndJoin() {
      s->gate = true;
      if (t.joinable()) t.join();
    }
  } open_and_join{stream, pass};
  const auto t0 = std::chrono::steady_clock::now();
  while (!stream->writing && std::chrono::steady_clock::now() - t0 < 10s)
    std::this_thread::sleep_for(100us);
  ASSERT_TRUE(stream->writing) << "the pass did not write";
  const size_t room = qp.engine_unlocked().sq_free();
  std::vector<engine::SendWr> batch(2, w);
  batch[0].wr_id = 2;
  batch[1].wr_id = 3;
  auto post = std::async(std::launch::async, [&] {
    return qp.post_send_all(batch.size(),
                            [&](size_t i) -> const engine::SendWr& { return batch[i]; });
  });
  const bool returned = post.wait_for(10s) == std::future_status::ready;
  // While the pass is stuck nothing completes: the queue holds exactly what was posted.
  const size_t room_after = qp.engine_unlocked().sq_free();
  stream->gate = true;
  pass.join();
  EXPECT_TRUE(returned) << "the batch waited for the pass";
  EXPECT_EQ(post.get(), 0);
  if (returned) {
    EXPECT_EQ(room_after, room - 2);
  }
  // No room for all of them: none is posted.
  const size_t free_now = qp.engine_unlocked().sq_free();
  std::vector<engine::SendWr> big(free_now + 1, w);
  EXPECT_EQ(qp.post_send_all(big.size(), [&](size_t i) -> const engine::SendWr& { return big[i]; }),
            -ENOMEM);
  EXPECT_EQ(qp.engine_unlocked().sq_free(), free_now);
}

// A batch with one WR the engine refuses (an RFC 7306 atomic on a connection that did not agree
// to the extensions, a Read with inline data) is refused whole: the WRs before it are not posted.
TEST(QueuePairTest, ABatchWithARefusedWrPostsNothing) {
  engine::test::Side side(1);
  std::vector<uint8_t> src(4096, 0x5a);
  const memory::Stag lk = side.reg_mr(src, memory::kLocalWrite);
  auto s = std::make_unique<GatedStream>(std::vector<uint8_t>{});
  GatedStream* stream = s.get();
  stream->gate = true;
  QueuePair qp(config_of(side, 1));
  engine::ConnParams params;
  params.initiator = true;  // rdmap_ext stays off: no RFC 7306 operation
  ASSERT_EQ(qp.attach(std::move(s), params, nullptr), 0);
  engine::SendWr send;
  send.num_sge = 1;
  send.sg_list[0] = engine::test::sge_of(src, lk);
  engine::SendWr atomic = send;
  atomic.opcode = engine::WrOpcode::AtomicFetchAdd;
  atomic.sg_list[0].length = 8;
  engine::SendWr inline_read = send;
  inline_read.opcode = engine::WrOpcode::RdmaRead;
  inline_read.flags = engine::kSendInline;
  inline_read.sg_list[0].length = 8;
  const size_t room = qp.engine_unlocked().sq_free();
  for (const auto& [refused, want] : {std::pair{atomic, -EOPNOTSUPP}, {inline_read, -EINVAL}}) {
    std::vector<engine::SendWr> batch{send, send, refused, send};
    EXPECT_EQ(
        qp.post_send_all(batch.size(), [&](size_t i) -> const engine::SendWr& { return batch[i]; }),
        want);
    EXPECT_EQ(qp.engine_unlocked().sq_free(), room) << "WRs of a refused batch were posted";
  }
  qp.drive(true);
  EXPECT_EQ(stream->writes, 0) << "a refused batch sent something";
  std::vector<engine::SendWr> good{send, send};
  EXPECT_EQ(
      qp.post_send_all(good.size(), [&](size_t i) -> const engine::SendWr& { return good[i]; }), 0);
  EXPECT_EQ(qp.engine_unlocked().sq_free() + 2, room);
}

// One Send segment (CRC off) of `len` payload octets at message offset mo.
std::vector<uint8_t> send_fpdu(uint32_t msn, uint32_t mo, size_t len, bool last) {
  wire::SegmentHeader h;
  h.last = last;
  h.rdmap_control = wire::rdmap_control(wire::Opcode::Send);
  h.msn = msn;
  h.mo = mo;
  std::vector<uint8_t> ulpdu(wire::segment_header_size(false) + len, 0x42);
  wire::encode_segment_header(ulpdu.data(), h);
  std::vector<uint8_t> f(wire::fpdu_size(ulpdu.size()));
  wire::encode_fpdu(f, 0, ulpdu, false, false);
  return f;
}

// A QP (CRC off, no Progress thread) over a ChunkStream that holds `chunks`, one receive posted.
struct ChunkQp {
  explicit ChunkQp(bool initiator, std::vector<std::vector<uint8_t>> chunks = {}) {
    auto s = std::make_unique<ChunkStream>();
    stream = s.get();
    stream->chunks = std::move(chunks);
    engine::ConnParams params;
    params.initiator = initiator;
    params.crc = false;  // as send_fpdu encodes it
    params.ord = params.ird = 1;
    EXPECT_EQ(qp.attach(std::move(s), params, nullptr), 0);
    engine::RecvWr recv;
    recv.num_sge = 1;
    recv.sg_list[0] = engine::test::sge_of(buf, lk);
    EXPECT_EQ(qp.post_recv(recv), 0);
  }
  size_t poll(engine::CompletionQueue& cq) {
    out.assign(4, {});
    return poll_driving(
        cq, [&] { return cq.poll(out); }, [&](auto&& f) { f(qp); });
  }
  engine::test::Side side{1};
  std::vector<uint8_t> buf = std::vector<uint8_t>(64);
  memory::Stag lk = side.reg_mr(buf, memory::kLocalWrite);
  ChunkStream* stream = nullptr;  // Owned by qp's Connection.
  QueuePair qp{config_of(side, 1)};
  std::vector<engine::Completion> out;
};

// An empty poll of a send CQ that no byte from the peer can complete into (its WRs all
// completed; a Send completes once the socket took it) reads nothing: in a ping-pong that read
// was a system call between the client's receive and its next post. The receive CQ's poll reads
// while a receive is posted, the send CQ's while a Read awaits its response, and without a
// Progress thread also while the socket refuses what is left (the peer may wait for its reads).
TEST(QueuePairTest, AnEmptySendCqPollReadsOnlyForWhatThePeerBrings) {
  ChunkQp t(true);
  EXPECT_EQ(t.poll(t.side.scq), 0u);
  EXPECT_EQ(t.stream->reads, 0) << "a send CQ poll with nothing to come from the peer read";
  EXPECT_EQ(t.poll(t.side.rcq), 0u);
  EXPECT_EQ(t.stream->reads, 1) << "a receive CQ poll with a receive posted did not read";

  engine::SendWr send;
  send.num_sge = 1;
  send.sg_list[0] = engine::test::sge_of(t.buf, t.lk, 0, 8);
  t.stream->full = true;
  ASSERT_EQ(t.qp.post_send(send), 0);
  t.qp.drive(true);
  EXPECT_EQ(t.poll(t.side.scq), 0u);
  EXPECT_EQ(t.stream->reads, 2) << "with the socket full and no Progress thread, nothing read";
  t.stream->full = false;
  EXPECT_EQ(t.poll(t.side.scq), 0u);
  EXPECT_TRUE(t.qp.engine_unlocked().tx_idle());
  const int reads = t.stream->reads;
  EXPECT_EQ(t.poll(t.side.scq), 0u);
  EXPECT_EQ(t.stream->reads, reads) << "the Send went out, yet the send CQ's poll read";

  engine::SendWr read = send;
  read.opcode = engine::WrOpcode::RdmaRead;
  read.remote_stag = 0x100;
  read.remote_addr = 0;
  ASSERT_EQ(t.qp.post_send(read), 0);
  t.qp.drive(true);
  EXPECT_EQ(t.poll(t.side.scq), 0u);
  EXPECT_EQ(t.stream->reads, reads + 1) << "a Read awaits its response, yet the poll read nothing";
}

// The receive a Send's first segment took from the queue still awaits its last: with no other
// receive posted, the receive CQ's empty polls go on reading until the Send is complete.
TEST(QueuePairTest, APartlyArrivedSendKeepsItsPollerReading) {
  ChunkQp t(true, {send_fpdu(1, 0, 16, false)});
  EXPECT_EQ(t.poll(t.side.rcq), 0u);
  ASSERT_TRUE(t.stream->chunks.empty()) << "the first segment was not read";
  t.stream->chunks.push_back(send_fpdu(1, 16, 8, true));
  ASSERT_EQ(t.poll(t.side.rcq), 1u) << "the Send's last segment was not read";
  EXPECT_EQ(t.out[0].status, engine::WcStatus::Success);
  EXPECT_EQ(t.out[0].byte_len, 24u);
}

// An MPA Responder sends nothing before it has read the Initiator's first FPDU (RFC 5044
// §7.1.2): a Send it posted first waits in the send queue, and the poll of the send CQ reads
// that FPDU, so the Send goes out and completes.
TEST(QueuePairTest, AResponderHeldSendIsSentByItsSendCqPoll) {
  ChunkQp t(false);
  engine::SendWr send;
  send.num_sge = 1;
  send.flags = engine::kSendSignaled;
  send.sg_list[0] = engine::test::sge_of(t.buf, t.lk, 0, 8);
  ASSERT_EQ(t.qp.post_send(send), 0);
  t.qp.drive(true);
  ASSERT_EQ(t.stream->writes, 0) << "the Responder sent before the Initiator's first FPDU";
  t.stream->chunks.push_back(send_fpdu(1, 0, 8, true));
  const size_t n = t.poll(t.side.scq);
  EXPECT_TRUE(t.stream->chunks.empty()) << "the send CQ's poll did not read the first FPDU";
  EXPECT_GT(t.stream->writes, 0) << "the held Send was not sent";
  ASSERT_EQ(n, 1u);
  EXPECT_EQ(t.out[0].status, engine::WcStatus::Success);
}

// Without a Progress thread, a QP closed with nothing left to send sends its FIN from the next
// poll, of whichever CQ: nothing else would.
TEST(QueuePairTest, AClosedQpSendsItsFinFromASendCqPoll) {
  ChunkQp t(true);
  t.qp.close();
  EXPECT_EQ(t.poll(t.side.scq), 0u);
  EXPECT_EQ(t.stream->shutdowns.load(), 1) << "the FIN was not sent";
}

// Our FIN goes out once the peer acknowledged what was written before it (Connection::
// kFinAckWaitNs says why), or once the wait is over.
TEST(QueuePairTest, AClosedQpHoldsItsFinUntilThePeerAcknowledgedItsData) {
  ChunkQp t(true);
  t.stream->unacked = true;
  t.qp.close();
  for (int i = 0; i < 3; ++i) EXPECT_EQ(t.poll(t.side.scq), 0u);
  EXPECT_EQ(t.stream->shutdowns.load(), 0) << "the FIN went out before the acknowledgement";
  t.stream->unacked = false;
  EXPECT_EQ(t.poll(t.side.scq), 0u);
  EXPECT_EQ(t.stream->shutdowns.load(), 1) << "the FIN was not sent once acknowledged";
}

TEST(QueuePairTest, AFinWaitsForTheAcknowledgementOnlySoLong) {
  ChunkQp t(true);
  t.stream->unacked = true;
  t.qp.close();
  EXPECT_EQ(t.poll(t.side.scq), 0u);
  EXPECT_EQ(t.stream->shutdowns.load(), 0);
  std::this_thread::sleep_for(std::chrono::nanoseconds(Connection::kFinAckWaitNs) + 20ms);
  EXPECT_EQ(t.poll(t.side.scq), 0u);
  EXPECT_EQ(t.stream->shutdowns.load(), 1) << "the FIN still waits after kFinAckWaitNs";
}

// A Terminate we sent ends the connection gracefully too (RDMAP §6.2.1): its FIN waits for the
// acknowledgement as well, and without a Progress thread the polls that follow look again.
TEST(QueuePairTest, TheFinAfterOurTerminateIsSentByLaterPolls) {
  // One receive posted: the second Send finds none, and the QP answers with a Terminate.
  ChunkQp t(true, {send_fpdu(1, 0, 8, true), send_fpdu(2, 0, 8, true)});
  t.stream->unacked = true;
  for (int i = 0; i < 3; ++i) t.qp.run_pass(false, true);  // as the Progress thread reads
  ASSERT_EQ(t.qp.state(), engine::QpState::Error);
  EXPECT_EQ(t.stream->shutdowns.load(), 0) << "the FIN went out before the acknowledgement";
  t.stream->unacked = false;
  for (int i = 0; i < 3; ++i) t.poll(t.side.scq);
  EXPECT_EQ(t.stream->shutdowns.load(), 1) << "no poll sent the FIN once acknowledged";
}

// A write that fails while our FIN is held ends the stream: nothing is held any more, so
// Progress stops looking at the QP.
TEST(QueuePairTest, AFailedWriteEndsTheHoldOfOurFin) {
  ChunkQp t(true);
  t.stream->unacked = true;
  t.qp.close();
  t.poll(t.side.scq);
  ASSERT_EQ(t.stream->shutdowns.load(), 0);
  // Two Sends for one receive: the QP answers the second with a Terminate, whose write fails.
  t.stream->chunks = {send_fpdu(1, 0, 8, true), send_fpdu(2, 0, 8, true)};
  t.stream->broken = true;
  std::optional<QueuePair::PassResult> r;
  for (int i = 0; i < 3; ++i) r = t.qp.run_pass(false, true);
  ASSERT_TRUE(r.has_value());
  ASSERT_EQ(t.qp.state(), engine::QpState::Error);
  EXPECT_TRUE(t.stream->chunks.empty()) << "the Sends were not read";
  EXPECT_FALSE(r->held) << "a FIN still reported held after the stream failed";
}

// No readiness edge announces an acknowledgement: the Progress thread looks again by itself.
TEST(ProgressTest, TheThreadSendsAHeldFinOnceThePeerAcknowledged) {
  Progress p;
  engine::test::Side side(3);
  QueuePair qp(config_of(side, 3));
  auto s = std::make_unique<ChunkStream>();
  ChunkStream* stream = s.get();
  stream->unacked = true;
  engine::ConnParams params;
  params.initiator = true;
  params.crc = false;
  ASSERT_EQ(qp.attach(std::move(s), params, &p), 0);
  qp.close();
  std::this_thread::sleep_for(50ms);
  EXPECT_EQ(stream->shutdowns.load(), 0) << "the FIN went out before the acknowledgement";
  stream->unacked = false;
  const auto t0 = std::chrono::steady_clock::now();
  while (stream->shutdowns.load() == 0 && std::chrono::steady_clock::now() - t0 < 2s)
    std::this_thread::sleep_for(1ms);
  EXPECT_EQ(stream->shutdowns.load(), 1) << "the thread did not send the FIN once acknowledged";
  qp.leave_progress();
}

// A TCP stream that counts its reads (from whichever thread makes them).
class CountedTcpStream final : public transport::ByteStream {
 public:
  explicit CountedTcpStream(int fd) : tcp_(fd) {}
  transport::IoResult readv(const iovec* iov, int n) override {
    reads.fetch_add(1);
    return tcp_.readv(iov, n);
  }
  transport::IoResult writev(const iovec* iov, int n) override {
    writes.fetch_add(1);
    if (std::this_thread::get_id() == creator_) creator_writes.fetch_add(1);
    return tcp_.writev(iov, n);
  }
  int fd() const override { return tcp_.fd(); }
  void shutdown_write() override { tcp_.shutdown_write(); }
  void abort() override { tcp_.abort(); }
  uint32_t emss() const override { return tcp_.emss(); }
  std::atomic<int> reads{0}, writes{0};
  std::atomic<int> creator_writes{0};  // those made by the thread that created the stream

 private:
  transport::TcpStream tcp_;
  const std::thread::id creator_ = std::this_thread::get_id();
};

// A loopback TCP connection: *lfd listens, *peer is the test's end; returns the accepted end.
int loopback_connection(int* lfd, int* peer) {
  uint16_t port = 0;
  *lfd = transport::tcp_listen("127.0.0.1", 0, &port);
  *peer = transport::tcp_connect("127.0.0.1", port, 2000);
  const int fd = transport::tcp_accept(*lfd, 2000);
  EXPECT_GE(fd, 0);
  return fd;
}

// A QP of a Progress thread with a 300 ms poller grace, over loopback TCP, whose peer sends
// 64-byte RDMA Writes into `region`.
struct PolledQp {
  static constexpr auto kGrace = 300ms;
  int lfd = -1, peer = -1;
  Progress p;
  engine::test::Side side{9};
  std::vector<uint8_t> region = std::vector<uint8_t>(64, 0), sink = std::vector<uint8_t>(64);
  memory::Stag k = side.reg_mr(region, memory::kLocalWrite | memory::kRemoteWrite);
  QueuePair qp{config_of(side, 9)};
  const volatile uint8_t* first = region.data();
  CountedTcpStream* stream = nullptr;  // Owned by qp's Connection.

  explicit PolledQp(bool with_recv, const ProgressKnobs& knobs = ProgressKnobs{kGrace}) : p(knobs) {
    const int fd = loopback_connection(&lfd, &peer);
    engine::ConnParams params;
    params.initiator = true;
    params.crc = false;  // as write_fpdu encodes it
    auto s = std::make_unique<CountedTcpStream>(fd);
    stream = s.get();
    EXPECT_EQ(qp.attach(std::move(s), params, &p), 0);
    if (!with_recv) return;
    engine::RecvWr r;
    r.num_sge = 1;
    r.sg_list[0] = engine::test::sge_of(sink, side.reg_mr(sink, memory::kLocalWrite));
    EXPECT_EQ(qp.post_recv(r), 0);
  }
  ~PolledQp() {
    qp.leave_progress();
    close(peer);
    close(lfd);
  }
  // The thread's pass that placed a Write holds the QP until it read the socket dry; what is
  // sent after that pass meets only the thread's next decision (a pass already running when
  // the application polls finishes its reads, by design).
  void pass_ended() {
    qp.with_engine([](engine::Qp&) {});
  }
  // The thread's first pass (attach queues one) has read the empty socket and ended: a pass
  // still reading when the test's bytes arrive would read them whatever the test polled.
  void first_pass_ended() {
    const auto t0 = std::chrono::steady_clock::now();
    while (stream->reads.load() == 0 && std::chrono::steady_clock::now() - t0 < 2s)
      std::this_thread::sleep_for(1ms);
    EXPECT_GT(stream->reads.load(), 0) << "the thread's first pass did not read";
    pass_ended();
  }
  void send_write(uint8_t fill) {
    const std::vector<uint8_t> f =
        write_fpdu(k, reinterpret_cast<uintptr_t>(region.data()), region.size(), fill);
    ASSERT_EQ(write(peer, f.data(), f.size()), ssize_t(f.size()));
  }
};

// An empty poll (drive(false)) of a QP that awaits a completion (here a posted receive) mutes
// it: the Progress thread leaves what arrives next to the poller instead of waking for it. It
// takes over once nobody polled for the grace period, at once after unpoll(), and a QP nobody
// polls is served as before.
TEST(ProgressTest, APollerMutesTheThreadUntilItLeavesOrTheGraceEnds) {
  PolledQp t(true);
  // Nobody polls: the thread places the Write.
  t.send_write(0x11);
  EXPECT_TRUE(becomes(t.first, 0x11, 2000ms)) << "an unpolled QP was not served";
  t.pass_ended();

  // A poll, then a Write the poller does not come back for: it waits for the grace period.
  // (Each look is judged only if it came within the grace: on a loaded machine a 50 ms sleep
  // can outlast it, and then the thread rightly took over.)
  t.qp.drive(false);
  const auto t0 = std::chrono::steady_clock::now();
  t.send_write(0x22);
  std::this_thread::sleep_for(50ms);
  uint8_t seen = *t.first;
  if (std::chrono::steady_clock::now() - t0 < PolledQp::kGrace) {
    EXPECT_EQ(seen, 0x11) << "the thread read a QP an application was polling";
  }
  EXPECT_TRUE(becomes(t.first, 0x22, PolledQp::kGrace + 3000ms)) << "the thread never took over";
  EXPECT_GE(std::chrono::steady_clock::now() - t0, PolledQp::kGrace / 2);
  t.pass_ended();

  // A poll, then unpoll (the application arms its CQ): the thread takes over at once.
  t.qp.drive(false);
  const auto t2 = std::chrono::steady_clock::now();
  t.send_write(0x33);
  std::this_thread::sleep_for(50ms);
  seen = *t.first;
  if (std::chrono::steady_clock::now() - t2 < PolledQp::kGrace) {
    EXPECT_EQ(seen, 0x22) << "the thread read a QP an application was polling";
  }
  const auto t1 = std::chrono::steady_clock::now();
  t.qp.unpoll();
  EXPECT_TRUE(becomes(t.first, 0x33, 2000ms));
  EXPECT_LT(std::chrono::steady_clock::now() - t1, PolledQp::kGrace / 2) << "no hand back";
  EXPECT_EQ(t.qp.state(), engine::QpState::Rts);
}

// A QP that awaits no completion is never muted: its application, having polled, may spin on
// memory for the peer's next Write (ib_write_lat), and only the thread can place it.
TEST(ProgressTest, APolledQpThatAwaitsNoCompletionIsServed) {
  PolledQp t(false);
  t.qp.drive(false);
  const auto t0 = std::chrono::steady_clock::now();
  t.send_write(0x44);
  EXPECT_TRUE(becomes(t.first, 0x44, 2000ms));
  EXPECT_LT(std::chrono::steady_clock::now() - t0, PolledQp::kGrace / 2) << "it was muted";
}

// An empty poll reads only a QP that Progress muted for its poller, one that awaits a
// completion only the peer's bytes bring. Otherwise the thread reads for it, and the poll
// costs no system call: a poller waiting for its Sends and Writes (ib_write_bw's client)
// would only find the socket empty, in a loop beside the thread that does the work.
TEST(ProgressTest, AnEmptyPollReadsOnlyAQpMutedForIt) {
  PolledQp t(false);
  t.send_write(0x55);
  ASSERT_TRUE(becomes(t.first, 0x55, 2000ms));
  t.pass_ended();
  // The thread may look once more after its pass (an EAGAIN read): counted only once it has
  // settled, so what follows counts the polls' reads alone (seen under ASan, 1 read more).
  int before = t.stream->reads.load();
  for (auto t0 = std::chrono::steady_clock::now(); std::chrono::steady_clock::now() - t0 < 2s;) {
    std::this_thread::sleep_for(100ms);
    const int now = t.stream->reads.load();
    if (now == before) break;
    before = now;
  }
  for (int i = 0; i < 100; ++i) EXPECT_FALSE(t.qp.drive(false));
  EXPECT_EQ(t.stream->reads.load(), before) << "empty polls of a QP awaiting nothing read";
  EXPECT_FALSE(t.qp.muted());

  // A posted receive: the next edge mutes the QP, and the poll reads what raised it.
  engine::RecvWr r;
  r.num_sge = 1;
  r.sg_list[0] = engine::test::sge_of(t.sink, t.side.reg_mr(t.sink, memory::kLocalWrite));
  ASSERT_EQ(t.qp.post_recv(r), 0);
  t.qp.drive(false);
  t.send_write(0x66);
  const auto t0 = std::chrono::steady_clock::now();
  while (!t.qp.muted() && std::chrono::steady_clock::now() - t0 < 2s)
    std::this_thread::sleep_for(1ms);
  ASSERT_TRUE(t.qp.muted());
  EXPECT_EQ(*t.first, 0x55) << "the thread read a QP an application was polling";
  const int muted_at = t.stream->reads.load();
  EXPECT_TRUE(a_poll_moves(t.qp));
  EXPECT_EQ(*t.first, 0x66);
  EXPECT_GT(t.stream->reads.load(), muted_at);
}

// The peer's last bytes and its FIN reach a QP its application polls: the poller reads both,
// the bytes first. Were the thread to read them in one pass, the completion of the last
// message and the flush of the receives behind it would reach the CQ together, and an
// application that stops polling after its last message (ibv_rc_pingpong) would see the flush
// too. Once the poller leaves, the thread reads the FIN.
TEST(ProgressTest, TheFinOfAPolledQpIsLeftToItsPoller) {
  for (const bool leave : {false, true}) {
    PolledQp t(true);
    t.first_pass_ended();
    t.qp.drive(false);
    const auto polled = std::chrono::steady_clock::now();
    t.send_write(0x77);
    ASSERT_EQ(shutdown(t.peer, SHUT_WR), 0);
    std::this_thread::sleep_for(100ms);
    const uint8_t seen = *t.first;
    const engine::QpState state = t.qp.state();
    // Judged only within the grace (a loaded machine may sleep past it; the thread then
    // rightly takes over).
    if (std::chrono::steady_clock::now() - polled >= PolledQp::kGrace) continue;
    EXPECT_EQ(seen, 0) << "the thread read the bytes of a polled QP";
    EXPECT_EQ(state, engine::QpState::Rts) << "the thread read the FIN of a polled QP";
    EXPECT_TRUE(a_poll_moves(t.qp));
    EXPECT_EQ(*t.first, 0x77);
    if (leave) {
      t.qp.unpoll();
    } else {
      // The poll that placed the bytes left the FIN to the next one.
      EXPECT_EQ(t.qp.state(), engine::QpState::Rts);
      t.qp.drive(false);
    }
    const auto t0 = std::chrono::steady_clock::now();
    while (t.qp.state() != engine::QpState::Error && std::chrono::steady_clock::now() - t0 < 2s)
      std::this_thread::sleep_for(1ms);
    EXPECT_EQ(t.qp.state(), engine::QpState::Error) << (leave ? "unpolled" : "polled");
  }
}

// A post behind a socket that refused the last write does not write again (it could only be
// refused): the kernel reports the space, and the Progress thread sends everything queued.
TEST(ProgressTest, APostBehindAFullSocketLeavesTheWriteToTheThread) {
  Progress p;
  engine::test::Side side(9);
  std::vector<uint8_t> src(1 << 16, 0x3c);
  const memory::Stag k = side.reg_mr(src, 0);
  QueuePair qp(config_of(side, 9));
  uint16_t port = 0;
  const int lfd = transport::tcp_listen("127.0.0.1", 0, &port);
  const int peer = transport::tcp_connect("127.0.0.1", port, 2000);
  const int fd = transport::tcp_accept(lfd, 2000);
  ASSERT_GE(fd, 0);
  const int small = 32 << 10;  // fills after a few Writes
  ASSERT_EQ(setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &small, sizeof small), 0);
  ASSERT_EQ(setsockopt(peer, SOL_SOCKET, SO_RCVBUF, &small, sizeof small), 0);
  auto s = std::make_unique<CountedTcpStream>(fd);
  CountedTcpStream* stream = s.get();
  engine::ConnParams params;
  params.initiator = true;
  ASSERT_EQ(qp.attach(std::move(s), params, &p), 0);
  engine::SendWr w;
  w.opcode = engine::WrOpcode::RdmaWrite;
  w.flags = engine::kSendSignaled;
  w.num_sge = 1;
  w.sg_list[0] = engine::test::sge_of(src, k);
  w.remote_stag = 0x100;
  // Nobody reads at the peer: Writes go out until the socket refuses one.
  int posted = 0;
  while (!qp.wants_write() && posted < 15) {
    ASSERT_EQ(qp.post_send(w), 0);
    ++posted;
    qp.drive(true);
  }
  ASSERT_TRUE(qp.wants_write()) << "the socket took " << posted << " Writes of 64 KiB";
  const int writes = stream->writes.load(), own = stream->creator_writes.load();
  ASSERT_EQ(qp.post_send(w), 0);
  ++posted;
  qp.drive(true);
  // (The thread may write meanwhile: the peer's ACKs of what it buffered free some space.)
  EXPECT_EQ(stream->creator_writes.load(), own)
      << "a post wrote into a socket that refused the last";

  // The peer reads: the thread sends the rest, every Write completes.
  std::vector<uint8_t> sink(1 << 16);
  size_t got = 0;
  std::vector<engine::Completion> done;
  const auto t0 = std::chrono::steady_clock::now();
  while ((done.size() < size_t(posted) || got <= posted * src.size()) &&
         std::chrono::steady_clock::now() - t0 < 5s) {
    const ssize_t n = recv(peer, sink.data(), sink.size(), MSG_DONTWAIT);
    if (n > 0) got += n;
    for (const engine::Completion& c : side.poll_send()) done.push_back(c);
    if (n <= 0) std::this_thread::sleep_for(1ms);
  }
  EXPECT_GT(stream->writes.load(), writes);
  EXPECT_GT(got, posted * src.size());
  ASSERT_EQ(done.size(), size_t(posted));
  for (const engine::Completion& c : done) EXPECT_EQ(c.status, engine::WcStatus::Success);
  qp.leave_progress();
  close(peer);
  close(lfd);
}

// The kernel's preemptions of the calling thread since construction (RUSAGE_THREAD's
// involuntary context switches), at most `cap`: a poller preempted for longer than the grace
// (or the late unlend) lets the Progress thread wake as if nobody polled, once per preemption,
// which a loaded machine does and the lease cannot prevent.
class Preemptions {
 public:
  Preemptions() { EXPECT_EQ(getrusage(RUSAGE_THREAD, &at_), 0); }
  long up_to(long cap) const {
    rusage now{};
    EXPECT_EQ(getrusage(RUSAGE_THREAD, &now), 0);
    return std::min(now.ru_nivcsw - at_.ru_nivcsw, cap);
  }

 private:
  rusage at_{};
};

// How often the Progress thread went to sleep so far: the voluntary context switches of the
// process's "uiw-progress" threads (one Progress lives at a time in these tests).
long progress_thread_sleeps() {
  long total = 0;
  for (const auto& task : std::filesystem::directory_iterator("/proc/self/task")) {
    std::ifstream comm(task.path() / "comm");
    std::string name;
    if (!std::getline(comm, name) || name != "uiw-progress") continue;
    std::ifstream status(task.path() / "status");
    for (std::string line; std::getline(status, line);)
      if (line.starts_with("voluntary_ctxt_switches:")) total += std::stol(line.substr(24));
  }
  return total;
}

// Sends Writes numbered v up to `until` (exclusive), `pace` apart, each placed before the next
// goes; false if one was not placed within 2 s.
bool paced_writes(PolledQp& t, uint8_t& v, uint8_t until, std::chrono::microseconds pace) {
  for (; v < until; ++v) {
    std::this_thread::sleep_for(pace);
    t.send_write(v);
    if (!becomes(t.first, v, 2000ms)) return false;
  }
  return true;
}

// With a spin, the thread keeps looking after a pass that moved bytes, for twice the longest of
// the last four gaps between such passes: Writes that arrive at a steady pace are placed by a
// thread that does not sleep once it has seen four gaps. Without one it sleeps between them.
TEST(ProgressTest, WithinTheSpinTheThreadPlacesWithoutSleeping) {
  for (const auto spin : {0ms, 5000ms}) {
    SCOPED_TRACE(spin.count());
    // Whatever else the machine runs meanwhile (spin_any_load): the next test covers the rule.
    PolledQp t(false, ProgressKnobs{PolledQp::kGrace, spin, 20us, false, true});
    uint8_t v = 1;
    ASSERT_TRUE(paced_writes(t, v, 7, 50us));  // four gaps and more
    const long before = progress_thread_sleeps();
    ASSERT_TRUE(paced_writes(t, v, 26, 50us));
    const long sleeps = progress_thread_sleeps() - before;
    if (spin == 0ms)
      EXPECT_GE(sleeps, 10) << "the thread should sleep between Writes 50 us apart";
    else
      EXPECT_LE(sleeps, 3) << "the thread slept within its spin";
  }
}

// The CPU time of the process's "uiw-progress" threads so far (schedstat's first field); -1 ns
// if no such thread's could be read.
std::chrono::nanoseconds progress_thread_cpu() {
  long long total = -1;
  for (const auto& task : std::filesystem::directory_iterator("/proc/self/task")) {
    std::ifstream comm(task.path() / "comm");
    std::string name;
    if (!std::getline(comm, name) || name != "uiw-progress") continue;
    std::ifstream stat(task.path() / "schedstat");
    long long ns = 0;
    if (stat >> ns) total = std::max(total, 0LL) + ns;
  }
  return std::chrono::nanoseconds(total);
}

// Messages further apart than the spin: the thread does not look for them (an idle or sparse
// connection costs no CPU beyond its passes).
TEST(ProgressTest, TheThreadDoesNotSpinForMessagesFurtherApartThanTheSpin) {
  PolledQp t(false, ProgressKnobs{PolledQp::kGrace, 3ms, 20us, false, true});
  uint8_t v = 1;
  ASSERT_TRUE(paced_writes(t, v, 7, 10ms));
  const auto before = progress_thread_cpu();
  ASSERT_GE(before.count(), 0) << "no schedstat of the progress thread";
  ASSERT_TRUE(paced_writes(t, v, 17, 10ms));
  const auto used = progress_thread_cpu() - before;
  EXPECT_LT(used, 10ms) << "the thread spun for Writes 10 ms apart: "
                        << std::chrono::duration_cast<std::chrono::microseconds>(used).count()
                        << " us of CPU for 10 Writes";
}

// Where runnable threads already outnumber the CPUs, a spin would keep one of them off the
// CPU it spins on: the thread sleeps between Writes as if it had no spin.
TEST(ProgressTest, TheThreadDoesNotSpinWhileThreadsWaitForACpu) {
  cpu_set_t mine;
  ASSERT_EQ(sched_getaffinity(0, sizeof mine, &mine), 0);
  std::atomic<bool> stop{false};
  std::vector<std::thread> hogs;
  for (int i = 0; i <= CPU_COUNT(&mine); ++i)
    hogs.emplace_back([&] {
      while (!stop.load(std::memory_order_relaxed)) {
      }
    });
  {
    PolledQp t(false, ProgressKnobs{PolledQp::kGrace, 5000ms});
    uint8_t v = 1;
    EXPECT_TRUE(paced_writes(t, v, 7, 50us));
    const long before = progress_thread_sleeps();
    EXPECT_TRUE(paced_writes(t, v, 26, 50us));
    EXPECT_GE(progress_thread_sleeps() - before, 10)
        << "the thread spun while " << hogs.size() << " threads spun on " << CPU_COUNT(&mine)
        << " CPUs";
  }
  stop = true;
  for (auto& h : hogs) h.join();
}

TEST(ProgressTest, RunnableFitReadsTheRunningCountOfLoadavg) {
  EXPECT_TRUE(runnable_fit("0.52 0.58 0.59 2/467 12345\n", 2));
  EXPECT_FALSE(runnable_fit("0.52 0.58 0.59 3/467 12345\n", 2));
  EXPECT_TRUE(runnable_fit("4.00 3.10 2.00 17/900 1\n", 64));
  EXPECT_FALSE(runnable_fit("0.52 0.58 0.59 /467 1", 2));
  EXPECT_FALSE(runnable_fit("0.52 0.58 0.59 2", 2));
  EXPECT_FALSE(runnable_fit("garbage", 2));
  EXPECT_FALSE(runnable_fit("", 2));
}

// The CPUs the process's "uiw-progress" thread may run on (one Progress lives at a time here).
std::vector<int> progress_thread_cpus() {
  for (const auto& task : std::filesystem::directory_iterator("/proc/self/task")) {
    std::ifstream comm(task.path() / "comm");
    std::string name;
    if (!std::getline(comm, name) || name != "uiw-progress") continue;
    cpu_set_t set;
    if (sched_getaffinity(std::stoi(task.path().filename()), sizeof set, &set) != 0) return {};
    std::vector<int> cpus;
    for (int c = 0; c < CPU_SETSIZE; ++c)
      if (CPU_ISSET(c, &set)) cpus.push_back(c);
    return cpus;
  }
  return {};
}

// Waits up to `limit` for the progress thread's CPUs to be `want`.
bool progress_thread_cpus_become(const std::vector<int>& want,
                                 std::chrono::milliseconds limit = 2000ms) {
  const auto t0 = std::chrono::steady_clock::now();
  while (progress_thread_cpus() != want) {
    if (std::chrono::steady_clock::now() - t0 > limit) return false;
    std::this_thread::sleep_for(1ms);
  }
  return true;
}

// The CPUs this process may run on.
std::vector<int> own_cpus() {
  cpu_set_t home;
  std::vector<int> all;
  if (sched_getaffinity(0, sizeof home, &home) != 0) return all;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &home)) all.push_back(c);
  return all;
}

// An application thread on `cpu` posts to t's QP (a post's drive).
void post_from_cpu(PolledQp& t, int cpu) {
  std::thread app([&] {
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(cpu, &one);
    ASSERT_EQ(sched_setaffinity(0, sizeof one, &one), 0);
    t.qp.drive(true);
  });
  app.join();
}

// With follow, while the application posts the thread sleeps on the CPU the poster runs on (its
// wakeup then preempts its own application, not another process); once the application arms
// its CQ (unpoll) the thread goes back to every CPU it started with. Without, it never moves.
TEST(ProgressTest, TheThreadSleepsOnTheCpuOfItsPostingApplication) {
  const std::vector<int> all = own_cpus();
  if (all.size() < 2) GTEST_SKIP() << "one CPU: nothing to follow";
  for (const bool follow : {false, true}) {
    SCOPED_TRACE(follow);
    PolledQp t(false, ProgressKnobs{PolledQp::kGrace, 0ms, 20us, follow});
    ASSERT_TRUE(progress_thread_cpus_become(all));
    post_from_cpu(t, all.back());
    t.p.kick(&t.qp);  // a pass, after which the thread sleeps again
    if (follow)
      EXPECT_TRUE(progress_thread_cpus_become({all.back()})) << "the thread did not follow";
    else
      EXPECT_FALSE(progress_thread_cpus_become({all.back()}, 100ms)) << "the thread moved";
    t.qp.unpoll();  // the application will sleep on a completion event
    t.p.kick(&t.qp);
    EXPECT_TRUE(progress_thread_cpus_become(all)) << "the thread did not go home";
  }
}

// A thread that follows its application onto that application's CPU does not spin there: the
// application may be waiting on memory for the very Write the thread would place.
TEST(ProgressTest, AThreadThatFollowsItsApplicationDoesNotSpin) {
  const std::vector<int> all = own_cpus();
  if (all.size() < 2) GTEST_SKIP() << "one CPU: nothing to follow";
  PolledQp t(false, ProgressKnobs{PolledQp::kGrace, 5000ms, 20us, true, true});
  ASSERT_TRUE(progress_thread_cpus_become(all));
  post_from_cpu(t, all.back());
  t.p.kick(&t.qp);
  ASSERT_TRUE(progress_thread_cpus_become({all.back()})) << "the thread did not follow";
  uint8_t v = 1;
  ASSERT_TRUE(paced_writes(t, v, 7, 50us));
  const long before = progress_thread_sleeps();
  ASSERT_TRUE(paced_writes(t, v, 26, 50us));
  EXPECT_GE(progress_thread_sleeps() - before, 10) << "the thread spun on its application's CPU";
}

// A second QP of t's Progress thread, over loopback TCP, that the test polls as an application
// polls its CQs (poll_driving) for a receive: until its peer sends, each poll finds nothing.
struct BusyPoller {
  int lfd = -1, peer = -1;
  engine::test::Side side{10};
  std::vector<uint8_t> sink = std::vector<uint8_t>(64);
  memory::Stag sink_key = side.reg_mr(sink, memory::kLocalWrite);
  QueuePair qp{config_of(side, 10)};
  explicit BusyPoller(Progress& p) {
    const int fd = loopback_connection(&lfd, &peer);
    engine::ConnParams params;
    params.initiator = true;
    params.crc = false;  // as send_fpdu encodes it
    EXPECT_EQ(qp.attach(std::make_unique<transport::TcpStream>(fd), params, &p), 0);
    post_recv();
  }
  void post_recv() {
    engine::RecvWr r;
    r.num_sge = 1;
    r.sg_list[0] = engine::test::sge_of(sink, sink_key);
    EXPECT_EQ(qp.post_recv(r), 0);
  }
  // The peer's Send of 8 bytes (MSN msn), which takes the oldest posted receive.
  void peer_sends(uint32_t msn = 1) {
    wire::SegmentHeader h;
    h.last = true;
    h.rdmap_control = wire::rdmap_control(wire::Opcode::Send);
    h.msn = msn;
    std::vector<uint8_t> ulpdu(wire::segment_header_size(false) + 8, 0x42);
    wire::encode_segment_header(ulpdu.data(), h);
    std::vector<uint8_t> f(wire::fpdu_size(ulpdu.size()));
    wire::encode_fpdu(f, 0, ulpdu, false, false);
    ASSERT_EQ(write(peer, f.data(), f.size()), ssize_t(f.size()));
  }
  ~BusyPoller() {
    qp.leave_progress();
    close(peer);
    close(lfd);
  }
  size_t poll() {
    std::vector<engine::Completion> out(16);
    return poll_driving(
        side.rcq,
        [&] {
          const size_t n = side.scq.poll(out);
          return n + side.rcq.poll(std::span(out).subspan(n));
        },
        [&](auto&& f) { f(qp); });
  }
  // Polls until *p == v or `limit` passed.
  bool poll_until(const volatile uint8_t* p, uint8_t v, std::chrono::milliseconds limit) {
    const auto t0 = std::chrono::steady_clock::now();
    while (*p != v)
      if (poll(), std::chrono::steady_clock::now() - t0 > limit) return false;
    return true;
  }
};

// An application thread that busy-polls one QP for a receive does the Progress thread's work
// for the others of its context (Progress::lend): Writes to a QP nobody polls are placed while
// the thread stays asleep. Without lending the thread wakes for each of them.
TEST(ProgressTest, ABusyPollerPlacesOtherQpsWritesWhileTheThreadSleeps) {
  for (const auto lend : {0us, 20us}) {
    SCOPED_TRACE(lend.count());
    PolledQp t(false, ProgressKnobs{PolledQp::kGrace, 0ms, lend});
    BusyPoller poller(t.p);
    auto poll_for = [&](std::chrono::milliseconds d) {
      const auto t0 = std::chrono::steady_clock::now();
      while (std::chrono::steady_clock::now() - t0 < d) poller.poll();
    };
    // Two Writes first: the thread, asleep in epoll_wait when the polling began, may wake for
    // one of them before it sees the lease and parks.
    for (uint8_t v = 1; v <= 2; ++v) {
      t.send_write(v);
      ASSERT_TRUE(poller.poll_until(t.first, v, 2000ms));
      poll_for(5ms);
    }
    constexpr long kWrites = 10;
    const long before = progress_thread_sleeps();
    const Preemptions preemptions;
    const auto t0 = std::chrono::steady_clock::now();
    for (uint8_t v = 3; v < 3 + kWrites; ++v) {
      poll_for(5ms);
      t.send_write(v);
      ASSERT_TRUE(poller.poll_until(t.first, v, 2000ms));
    }
    const long sleeps = progress_thread_sleeps() - before;
    // Parked, the thread still sleeps once when it gets there (that may be after `before` on a
    // slow machine) and once more per grace period the loop outlasts (the park's timeout); and
    // once per preemption of the poller, up to half the Writes (woken for each, it sleeps at
    // least once per Write).
    const long parks = 2 + (std::chrono::steady_clock::now() - t0) / PolledQp::kGrace;
    const long preempted = preemptions.up_to(kWrites / 2);
    if (lend == 0us)
      EXPECT_GE(sleeps, kWrites / 2) << "without lending the thread should wake for each Write";
    else
      EXPECT_LE(sleeps, parks + preempted)
          << "the thread woke for Writes a busy poller could place: " << sleeps
          << " sleeps, the poller preempted " << preempted << " times";
  }
}

// A busy poller's lend() takes from epoll the edge of another QP's message, whose pass it cannot
// run now (an application thread holds that QP: a post; over SCTP a pass that read one message
// is cut short alike) and leaves queued. The thread, asleep in epoll_wait since before the
// polling began, has no edge left to wake for, and the poller may stop polling at once (rping's
// completion thread sleeps on its CQ after one empty poll): the lender must ring it, or the
// message waits for ever (an rping over SCTP hung so in the VM, a Read Response left unread).
// The lender usually wins the race for the edge, since it looks every microsecond while the
// thread needs a wakeup; hence several rounds.
TEST(ProgressTest, WorkALenderLeavesQueuedWakesTheSleepingThread) {
  for (uint8_t round = 1; round <= 10; ++round) {
    SCOPED_TRACE(round);
    PolledQp t(false, ProgressKnobs{PolledQp::kGrace, 0ms, 1us});
    BusyPoller poller(t.p);
    t.first_pass_ended();
    std::this_thread::sleep_for(20ms);  // the thread sleeps in epoll_wait, nothing muted
    std::promise<void> release;
    std::promise<void> holding;
    std::thread holder([&] {
      t.qp.with_engine([&](engine::Qp&) {
        holding.set_value();
        release.get_future().wait();
      });
    });
    holding.get_future().wait();
    t.send_write(round);
    const auto t0 = std::chrono::steady_clock::now();
    while (std::chrono::steady_clock::now() - t0 < 20ms) poller.poll();
    release.set_value();  // nobody polls any more
    holder.join();
    EXPECT_TRUE(becomes(t.first, round, 2000ms)) << "the Write a lender left queued waits";
  }
}

// The lease ends at once when the application stops polling: on unpoll (it arms its CQ), and
// after a poll that took the last completion its QPs awaited from the peer (it may now spin on
// memory). The thread then places the next Write without waiting out the grace.
TEST(ProgressTest, ThePollersLeaseEndsWhenItStopsPolling) {
  for (const bool arm : {true, false}) {
    SCOPED_TRACE(arm ? "unpoll" : "completion");
    PolledQp t(false);
    BusyPoller poller(t.p);
    for (int i = 0; i < 200; ++i) EXPECT_EQ(poller.poll(), 0u);
    if (arm) {
      poller.qp.unpoll();
    } else {
      poller.peer_sends();
      const auto t0 = std::chrono::steady_clock::now();
      while (poller.poll() == 0) ASSERT_LT(std::chrono::steady_clock::now() - t0, 2s);
      ASSERT_EQ(poller.sink[0], 0x42);
    }
    const auto t1 = std::chrono::steady_clock::now();
    t.send_write(0x21);
    EXPECT_TRUE(becomes(t.first, 0x21, 2000ms));
    EXPECT_LT(std::chrono::steady_clock::now() - t1, PolledQp::kGrace / 2)
        << "the thread waited out the grace of a poller that had stopped";
  }
}

// A poller that only reaps its Send and Write completions lends nothing: having polled, it may
// spin on memory for its peer's Write (ib_write_lat), and only the thread places that.
TEST(ProgressTest, APollerReapingItsOwnSendsLeavesTheThreadAwake) {
  PolledQp t(false);
  BusyPoller poller(t.p);
  poller.peer_sends();  // takes the poller's one receive: it awaits nothing from its peer now
  const auto t0 = std::chrono::steady_clock::now();
  while (poller.poll() == 0) ASSERT_LT(std::chrono::steady_clock::now() - t0, 2s);
  for (int i = 0; i < 200; ++i) EXPECT_EQ(poller.poll(), 0u);
  const auto t1 = std::chrono::steady_clock::now();
  t.send_write(0x31);
  EXPECT_TRUE(becomes(t.first, 0x31, 2000ms));
  EXPECT_LT(std::chrono::steady_clock::now() - t1, PolledQp::kGrace / 2)
      << "a poller that awaits nothing from its peer kept the thread parked";
}

// A poller that reaps the completion it awaited and at once awaits the next (it posts a receive
// and polls again, as in a ping-pong) keeps its lease: the thread is not woken for the moment in
// between (Progress::unlend is late). Woken at once, it sleeps twice per message.
TEST(ProgressTest, APollerThatComesBackAtOnceKeepsItsLease) {
  constexpr uint32_t kMessages = 40;
  PolledQp t(false);
  BusyPoller poller(t.p);
  for (int i = 0; i < 200; ++i) EXPECT_EQ(poller.poll(), 0u);
  std::this_thread::sleep_for(5ms);  // the thread sees the lease and parks
  const long before = progress_thread_sleeps();
  const Preemptions preemptions;
  const auto t0 = std::chrono::steady_clock::now();
  for (uint32_t msn = 1; msn <= kMessages; ++msn) {
    poller.peer_sends(msn);
    while (poller.poll() == 0) ASSERT_LT(std::chrono::steady_clock::now() - t0, 5s);
    poller.post_recv();
    // Idle between messages, as a ping-pong's poller waits for the peer's answer.
    const auto t1 = std::chrono::steady_clock::now();
    while (std::chrono::steady_clock::now() - t1 < 1ms) EXPECT_EQ(poller.poll(), 0u);
  }
  const long sleeps = progress_thread_sleeps() - before;
  // It parks again once per grace period; and a loaded machine may let it wake now and then: a
  // few times, and once per preemption of the poller, up to half the messages (woken at once
  // it would sleep twice per message).
  const long parks = 1 + (std::chrono::steady_clock::now() - t0) / PolledQp::kGrace;
  const long preempted = preemptions.up_to(kMessages / 2);
  EXPECT_LE(sleeps, parks + kMessages / 4 + preempted)
      << "the thread woke between a poller's completion and its next poll: " << sleeps
      << " sleeps, the poller preempted " << preempted << " times";
}

// Another thread removes and destroys a QP whose passes a busy poller runs (lend) while the
// poller goes on: remove() waits for a lender's pass of it as for the thread's, and no pass
// touches it afterwards (under ASan or TSan a pass that outlived the QP is a report). The QP's
// own lock, which remove() briefly takes first, covers most of the window: hence ten rounds.
// The wait for the poller's passes is only a bound against a hang: on a loaded machine the
// preempted poller loses its lease now and then, and the thread runs the passes meanwhile.
TEST(ProgressTest, AQpALenderDrivesIsRemovedWhileThePollerGoesOn) {
  Progress p(ProgressKnobs{PolledQp::kGrace, 0ms, 20us});
  BusyPoller poller(p);
  std::atomic<bool> stop{false};
  std::thread polling([&] {
    tl_polling_thread = true;
    while (!stop.load()) poller.poll();
  });
  for (uint32_t round = 1; round <= 10; ++round) {
    SCOPED_TRACE(round);
    auto endless = std::make_unique<Endless>(round, p);
    EndlessWrites* stream = endless->stream;
    const auto t0 = std::chrono::steady_clock::now();
    while (stream->poller_reads.load() < 10 && std::chrono::steady_clock::now() - t0 < 60s)
      std::this_thread::sleep_for(1ms);
    ASSERT_GE(stream->poller_reads.load(), 10u) << "the poller ran no passes of the other QP";
    while (!stream->poller_reading.load()) {
    }
    if (!returns_within(2000ms, [&] { endless->qp->leave_progress(); })) std::abort();
    EXPECT_FALSE(stream->poller_reading.load()) << "remove() returned during a lender's pass";
    const uint64_t after = stream->reads.load();
    std::this_thread::sleep_for(5ms);
    EXPECT_EQ(stream->reads.load(), after) << "a pass ran after remove() returned";
    endless.reset();  // the QP, its Connection and stream go while the poller still polls
  }
  stop = true;
  polling.join();
}

// The peer's last Send and its FIN reach a QP nobody polls at that moment (its application was
// preempted): the Progress thread reads both, yet the next poll of two completions returns the
// Send's alone, and only a later poll the flush of the receive behind it. ibv_rc_pingpong polls
// two at a time and fails on an error among them after a complete run. A QP whose application
// does not poll again still ends, once Connection::kEofHoldNs passed.
TEST(ProgressTest, APeersLastMessageCompletesBeforeTheFlushOfItsClose) {
  for (const bool poll_again : {true, false}) {
    SCOPED_TRACE(poll_again ? "polled again" : "not polled again");
    Progress p;
    BusyPoller b(p);
    b.post_recv();  // flushed by the close
    b.peer_sends();
    ASSERT_EQ(shutdown(b.peer, SHUT_WR), 0);
    const auto t0 = std::chrono::steady_clock::now();
    while (b.side.rcq.size() == 0 && std::chrono::steady_clock::now() - t0 < 2s)
      std::this_thread::sleep_for(1ms);
    std::this_thread::sleep_for(50ms);  // the thread has read the FIN by now
    EXPECT_EQ(b.qp.state(), engine::QpState::Rts) << "the FIN was read before the Send was polled";
    EXPECT_EQ(b.side.rcq.size(), 1u);
    if (!poll_again) {
      // The engine's state turns Error before its flushes are queued (engine::Qp::enter_error):
      // wait for the flush too.
      const auto limit = std::chrono::nanoseconds(Connection::kEofHoldNs) + 3s;
      while ((b.qp.state() != engine::QpState::Error || b.side.rcq.size() < 2) &&
             std::chrono::steady_clock::now() - t0 < limit)
        std::this_thread::sleep_for(1ms);
      EXPECT_EQ(b.qp.state(), engine::QpState::Error) << "a held FIN was never read";
      EXPECT_EQ(b.side.rcq.size(), 2u) << "the receive behind the Send was not flushed";
      continue;
    }
    std::vector<engine::Completion> out;
    auto poll_two = [&] {
      out.assign(2, {});
      out.resize(poll_driving(
          b.side.rcq, [&] { return b.side.rcq.poll(out); }, [&](auto&& f) { f(b.qp); }));
    };
    poll_two();
    ASSERT_EQ(out.size(), 1u);
    EXPECT_EQ(out[0].status, engine::WcStatus::Success);
    const auto t1 = std::chrono::steady_clock::now();
    do poll_two();
    while (out.empty() && std::chrono::steady_clock::now() - t1 < 2s);
    ASSERT_EQ(out.size(), 1u);
    EXPECT_EQ(out[0].status, engine::WcStatus::WrFlushErr);
    EXPECT_EQ(b.qp.state(), engine::QpState::Error);
  }
}

// An SCTP socket tells the end of its association once, in the notification a read consumes
// (transport::SctpStream), and a closed association reports neither readable nor writable
// (sctp_poll); a TCP FIN keeps its socket readable. This stream models the SCTP way: its
// readiness is a pipe's read end, readable once the test announced what the peer sent, emptied
// by each read that finds the socket empty or at its end, and never writable.
class AnnouncedTcpStream final : public transport::ByteStream {
 public:
  explicit AnnouncedTcpStream(int fd) : tcp_(fd) {
    EXPECT_EQ(pipe2(pipe_, O_NONBLOCK | O_CLOEXEC), 0);
  }
  ~AnnouncedTcpStream() override {
    close(pipe_[0]);
    close(pipe_[1]);
  }
  void announce() { EXPECT_EQ(write(pipe_[1], "!", 1), 1); }
  transport::IoResult readv(const iovec* iov, int n) override {
    const transport::IoResult r = tcp_.readv(iov, n);
    if (r.status == transport::IoStatus::Closed) ends_read_.fetch_add(1);
    if (r.status == transport::IoStatus::WouldBlock || r.status == transport::IoStatus::Closed) {
      char drain[16];
      while (read(pipe_[0], drain, sizeof drain) > 0) {
      }
    }
    return r;
  }
  transport::IoResult writev(const iovec* iov, int n) override { return tcp_.writev(iov, n); }
  int fd() const override { return pipe_[0]; }
  void shutdown_write() override { tcp_.shutdown_write(); }
  void abort() override { tcp_.abort(); }
  uint32_t emss() const override { return tcp_.emss(); }
  // Reads that met the peer's FIN, by any thread.
  int ends_read() const { return ends_read_.load(); }

 private:
  transport::TcpStream tcp_;
  int pipe_[2] = {-1, -1};
  std::atomic<int> ends_read_{0};
};

// The poller of a muted QP reads the peer's last Send and then its FIN while the Send's
// completion is still queued, so it holds the FIN (Connection::kEofHoldNs); then it takes the
// completion, arms its CQ and sleeps. On a stream that announced its end only once, no edge comes
// again: the Progress thread must still read the FIN (its held-FIN timer), ending the QP and
// flushing the receive behind the Send.
TEST(ProgressTest, AFinItsPollerHeldIsReadAfterThePollerLeavesWithoutAnotherEdge) {
  int lfd = -1, peer = -1;
  // A grace longer than the steps below take on a loaded machine: the edge must find the QP
  // polled, and its poller must keep it until unpoll(). It is also the held FIN's recheck
  // interval (Progress::check_held_locked).
  const ProgressKnobs knobs{1s};
  Progress p(knobs);
  engine::test::Side side{10};
  std::vector<uint8_t> sink(64);
  const memory::Stag key = side.reg_mr(sink, memory::kLocalWrite);
  QueuePair qp{config_of(side, 10)};
  auto s = std::make_unique<AnnouncedTcpStream>(loopback_connection(&lfd, &peer));
  AnnouncedTcpStream* stream = s.get();
  engine::ConnParams params;
  params.initiator = true;
  params.crc = false;  // as the FPDU below is encoded
  ASSERT_EQ(qp.attach(std::move(s), params, &p), 0);
  for (int i = 0; i < 2; ++i) {
    engine::RecvWr r;
    r.num_sge = 1;
    r.sg_list[0] = engine::test::sge_of(sink, key);
    ASSERT_EQ(qp.post_recv(r), 0);
  }
  qp.with_engine([](engine::Qp&) {});  // the pass attach queued has ended
  qp.drive(false);                     // a poll: the next edge mutes the QP for its poller
  wire::SegmentHeader h;
  h.last = true;
  h.rdmap_control = wire::rdmap_control(wire::Opcode::Send);
  h.msn = 1;
  std::vector<uint8_t> ulpdu(wire::segment_header_size(false) + 8, 0x42);
  wire::encode_segment_header(ulpdu.data(), h);
  std::vector<uint8_t> f(wire::fpdu_size(ulpdu.size()));
  wire::encode_fpdu(f, 0, ulpdu, false, false);
  ASSERT_EQ(write(peer, f.data(), f.size()), ssize_t(f.size()));
  ASSERT_EQ(shutdown(peer, SHUT_WR), 0);
  stream->announce();
  const auto t0 = std::chrono::steady_clock::now();
  while (!qp.muted() && std::chrono::steady_clock::now() - t0 < 2s)
    std::this_thread::sleep_for(1ms);
  ASSERT_TRUE(qp.muted());
  // A poll places the Send (its read ends short of the FIN); the next empty poll (of the send
  // CQ, say) reads the FIN while the Send's completion is queued, and holds it. A poll that
  // finds the QP in another thread's pass leaves the bytes to that pass (QueuePair::drive), as
  // can happen to any poll on a loaded machine: poll until each step is seen.
  const auto t2 = std::chrono::steady_clock::now();
  while (side.rcq.size() == 0 && std::chrono::steady_clock::now() - t2 < 2s) qp.drive(false);
  ASSERT_EQ(side.rcq.size(), 1u);
  while (stream->ends_read() == 0 && std::chrono::steady_clock::now() - t2 < 2s) qp.drive(false);
  ASSERT_GT(stream->ends_read(), 0);
  ASSERT_EQ(qp.state(), engine::QpState::Rts);
  std::vector<engine::Completion> out(2);
  ASSERT_EQ(side.rcq.poll(out), 1u);
  EXPECT_EQ(out[0].status, engine::WcStatus::Success);
  qp.unpoll();  // the application arms its CQ and sleeps
  const auto t1 = std::chrono::steady_clock::now();
  while (qp.state() != engine::QpState::Error &&
         std::chrono::steady_clock::now() - t1 <
             std::chrono::nanoseconds(Connection::kEofHoldNs) + knobs.poller_grace + 2s)
    std::this_thread::sleep_for(1ms);
  EXPECT_EQ(qp.state(), engine::QpState::Error) << "a FIN the poller held was never read";
  // The engine's state turns Error before its flushes are queued (engine::Qp::enter_error).
  size_t flushed = 0;
  while ((flushed = side.rcq.poll(out)) == 0 && std::chrono::steady_clock::now() - t1 < 10s)
    std::this_thread::sleep_for(1ms);
  ASSERT_EQ(flushed, 1u);
  EXPECT_EQ(out[0].status, engine::WcStatus::WrFlushErr);
  qp.leave_progress();
  close(peer);
  close(lfd);
}

}  // namespace
}  // namespace uiw::runtime
