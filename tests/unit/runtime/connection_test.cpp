// runtime::Connection at the edge of a stream that failed: the peer closed its side (EOF),
// then a write of the rest of a partly written FPDU fails (as SCTP refuses sends once the
// peer's SHUTDOWN arrived). The progress driver must then go idle, not retry forever. And its
// receive policy: large payloads are read straight into their destination even when the
// stream hands over whole FPDUs at a time.
#include "runtime/connection.h"

#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "unit/engine/qp_pair.h"
#include "wire/terminate.h"

namespace uiw::transport {
namespace {

// A stream whose script the test sets: reads say WouldBlock until `eof`, then Closed. The
// first write takes `first_write` octets, the second would block, every later one fails with
// EPIPE.
class ScriptedStream final : public ByteStream {
 public:
  struct Script {
    bool eof = false;
    size_t first_write = 10;
    int writes = 0;
  };
  explicit ScriptedStream(Script* s) : s_(s) {}
  IoResult readv(const iovec*, int) override {
    return s_->eof ? IoResult{IoStatus::Closed, 0, 0} : IoResult{IoStatus::WouldBlock, 0, 0};
  }
  IoResult writev(const iovec* iov, int n) override {
    size_t total = 0;
    for (int i = 0; i < n; ++i) total += iov[i].iov_len;
    ++s_->writes;
    if (s_->writes == 1) return {IoStatus::Ok, std::min(total, s_->first_write), 0};
    if (s_->writes == 2) return {IoStatus::WouldBlock, 0, 0};
    return {IoStatus::Error, 0, EPIPE};
  }
  int fd() const override { return -1; }
  void shutdown_write() override {}
  void abort() override {}
  uint32_t emss() const override { return 1460; }

 private:
  Script* s_;
};

TEST(ConnectionTest, AFailedWriteAfterThePeersEofEndsTransmitting) {
  using namespace engine;
  ScriptedStream::Script script;
  test::Side a(1);
  ConnParams p;
  p.initiator = true;
  a.qp->start(p);
  runtime::Connection c(a.qp.get(), std::make_unique<ScriptedStream>(&script));

  std::vector<uint8_t> src(100, 0x5a);
  SendWr w;
  w.wr_id = 1;
  w.flags = kSendSignaled;
  w.num_sge = 1;
  w.sg_list[0] = test::sge_of(src, a.reg_mr(src, 0));
  ASSERT_EQ(a.qp->post_send(w), 0);
  EXPECT_TRUE(c.progress());  // 10 octets of the FPDU go out, then the socket is full
  ASSERT_EQ(script.writes, 2);
  ASSERT_FALSE(c.finished());

  // The peer's clean close (RDMAP §5.4: the Qp enters Error) arrives before the rest could be
  // written; writing the rest then fails.
  script.eof = true;
  EXPECT_TRUE(c.progress());
  EXPECT_EQ(a.qp->state(), QpState::Error);
  EXPECT_TRUE(a.has_event(QpEvent::Closed));
  ASSERT_EQ(script.writes, 3);
  EXPECT_TRUE(c.finished());
  for (int i = 0; i < 10; ++i) EXPECT_FALSE(c.progress()) << "pass " << i;
  EXPECT_EQ(script.writes, 3);  // no write was tried again
  const auto sc = a.poll_send();
  ASSERT_EQ(sc.size(), 1u);
  EXPECT_EQ(sc[0].status, WcStatus::WrFlushErr);
}

// The kernel refuses to send a Write whose source the application unmapped after posting
// (EFAULT; without CRC uiw never reads a large payload itself): the Write completes with a local
// protection error, not a flush, and the connection fails.
TEST(ConnectionTest, AnUnreadableSourceIsALocalProtectionError) {
  using namespace engine;
  test::Side a(1);
  ConnParams p;
  p.initiator = true;
  p.crc = false;
  a.qp->start(p);
  int sp[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sp), 0);
  runtime::Connection c(a.qp.get(), std::make_unique<TcpStream>(sp[0]));

  constexpr size_t kLen = 64 << 10;
  auto* src = static_cast<uint8_t*>(
      mmap(nullptr, kLen, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  ASSERT_NE(src, MAP_FAILED);
  int err = 0;
  const memory::Stag lkey =
      a.reg.register_region(a.pd, src, kLen, reinterpret_cast<uint64_t>(src), 0, &err);
  ASSERT_NE(lkey, 0u);
  SendWr w;
  w.wr_id = 7;
  w.opcode = WrOpcode::RdmaWrite;
  w.num_sge = 1;
  w.sg_list[0] = {reinterpret_cast<uint64_t>(src), 4096, lkey};
  w.remote_stag = 0x1234;
  ASSERT_EQ(munmap(src, kLen), 0);
  ASSERT_EQ(a.qp->post_send(w), 0);
  for (int pass = 0; pass < 100 && a.qp->state() != QpState::Error; ++pass) c.progress();
  EXPECT_EQ(a.qp->state(), QpState::Error);
  const auto sc = a.poll_send();
  ASSERT_EQ(sc.size(), 1u);
  EXPECT_EQ(sc[0].wr_id, 7u);
  EXPECT_EQ(sc[0].status, WcStatus::LocProtErr);
  close(sp[1]);
}

// Reads hand out at most `chunk` bytes of `data` at a time, as TCP over loopback hands over at
// most 64 KiB per read, and once `*eof` is set the end of `data` is the peer's FIN; writes are
// taken whole, or at most `write_max` octets of them. `log`, if given, counts the reads and the
// writes and notes how many of each came before the first of the other.
class ChunkStream final : public ByteStream {
 public:
  struct Log {
    size_t reads = 0, writes = 0;
    size_t reads_before_first_write = SIZE_MAX, writes_before_first_read = SIZE_MAX;
    size_t write_max = SIZE_MAX;
    std::function<void(size_t reads)> on_read;    // after each read that returned bytes
    std::function<void(size_t writes)> on_write;  // after each write
  };
  ChunkStream(const std::vector<uint8_t>* data, size_t chunk, const bool* eof = nullptr,
              Log* log = nullptr)
      : data_(data), chunk_(chunk), eof_(eof), log_(log) {}
  IoResult readv(const iovec* iov, int n) override {
    const IoResult r = read(iov, n);
    if (!log_ || r.status != IoStatus::Ok) return r;
    if (log_->writes_before_first_read == SIZE_MAX) log_->writes_before_first_read = log_->writes;
    if (++log_->reads && log_->on_read) log_->on_read(log_->reads);
    return r;
  }
  IoResult writev(const iovec* iov, int n) override {
    size_t total = 0;
    for (int i = 0; i < n; ++i) total += iov[i].iov_len;
    if (!log_) return {IoStatus::Ok, total, 0};
    if (log_->reads_before_first_write == SIZE_MAX) log_->reads_before_first_write = log_->reads;
    ++log_->writes;
    if (log_->on_write) log_->on_write(log_->writes);
    return {IoStatus::Ok, std::min(total, log_->write_max), 0};
  }
  int fd() const override { return -1; }
  void shutdown_write() override {}
  void abort() override {}
  uint32_t emss() const override { return 65483; }

 private:
  IoResult read(const iovec* iov, int n) {
    if (off_ == data_->size())
      return eof_ && *eof_ ? IoResult{IoStatus::Closed, 0, 0}
                           : IoResult{IoStatus::WouldBlock, 0, 0};
    size_t budget = std::min(chunk_, data_->size() - off_), done = 0;
    for (int i = 0; i < n && budget > 0; ++i) {
      const size_t k = std::min(iov[i].iov_len, budget);
      std::memcpy(iov[i].iov_base, data_->data() + off_ + done, k);
      done += k;
      budget -= k;
    }
    off_ += done;
    return {IoStatus::Ok, done, 0};
  }

  const std::vector<uint8_t>* data_;
  size_t chunk_;
  const bool* eof_;
  Log* log_;
  size_t off_ = 0;
};

// Everything q has to send, appended to out.
void drain_tx(engine::Qp& q, std::vector<uint8_t>* out) {
  for (std::span<const iovec> iov = q.tx_pending(); !iov.empty(); iov = q.tx_pending()) {
    size_t n = 0;
    for (const iovec& v : iov) {
      const auto* p = static_cast<const uint8_t*>(v.iov_base);
      out->insert(out->end(), p, p + v.iov_len);
      n += v.iov_len;
    }
    q.tx_commit(n);
  }
}

// A Read Response's source is pinned only across the write that may read it: a peer that stops
// reading cannot make a deregistration wait, and once deregistered the source is read no more
// (RFC 5041 §8.3.1(6)): the requester's sink never receives what the memory held afterwards,
// and its Read fails: the Terminate for an invalid source when the socket stopped taking bytes
// between two frames, the stream's end inside a frame otherwise.
TEST(ConnectionTest, ADeregisteredReadSourceIsNeitherWaitedForNorReadWhileThePeerStopsReading) {
  using namespace engine;
  test::Side a(1), b(2);
  ConnParams p;
  p.crc = false;
  p.ord = p.ird = 2;
  p.initiator = true;
  a.qp->start(p);
  p.initiator = false;
  b.qp->start(p);
  int sp[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sp), 0);
  runtime::Connection c(b.qp.get(), std::make_unique<TcpStream>(sp[0]));

  constexpr size_t kLen = 4 << 20;
  std::vector<uint8_t> src(kLen, 0x5A), sink(kLen, 0);
  const memory::Stag skey = b.reg_mr(src, memory::kRemoteRead);
  SendWr w;
  w.wr_id = 5;
  w.opcode = WrOpcode::RdmaRead;
  w.flags = kSendSignaled;
  w.num_sge = 1;
  w.sg_list[0] = test::sge_of(sink, a.reg_mr(sink, memory::kLocalWrite));
  w.remote_stag = skey;
  w.remote_addr = reinterpret_cast<uint64_t>(src.data());
  ASSERT_EQ(a.qp->post_send(w), 0);
  std::vector<uint8_t> request;
  drain_tx(*a.qp, &request);
  ASSERT_EQ(write(sp[1], request.data(), request.size()), static_cast<ssize_t>(request.size()));
  for (int pass = 0; pass < 10; ++pass) c.progress();  // answers until the socket is full
  ASSERT_FALSE(b.qp->tx_idle()) << "the socket took the whole response";

  std::atomic<bool> returned{false};
  std::thread dereg([&] {
    EXPECT_EQ(b.reg.deregister(skey), 0);
    returned = true;
  });
  for (int i = 0; i < 500 && !returned; ++i) usleep(10000);
  const bool waited = !returned;
  if (waited) b.qp->tx_commit(0);  // drops what the connection left pinned: the thread ends
  dereg.join();
  ASSERT_FALSE(waited) << "the deregistration waited for a peer that stopped reading";
  std::fill(src.begin(), src.end(), 0xC3);  // the memory's next use

  std::vector<uint8_t> buf(1 << 16);
  bool eof = false;
  for (int pass = 0; pass < 100000 && !eof && !a.qp->terminate_received(); ++pass) {
    c.progress();
    const ssize_t r = read(sp[1], buf.data(), buf.size());
    if (r > 0) {
      ASSERT_EQ(a.qp->rx_feed({buf.data(), static_cast<size_t>(r)}), static_cast<size_t>(r));
    }
    eof = r == 0;
  }
  close(sp[1]);
  if (eof) a.qp->rx_eof();
  EXPECT_EQ(std::count(sink.begin(), sink.end(), 0xC3), 0)
      << "octets written to the source after its deregistration reached the requester";
  EXPECT_GT(std::count(sink.begin(), sink.end(), 0x5A), 0);
  ASSERT_TRUE(eof || a.qp->terminate_received().has_value());
  if (a.qp->terminate_received()) {
    EXPECT_EQ(a.qp->terminate_received()->cause,
              (wire::TerminateCause{wire::TermLayer::Rdma, wire::term::kRdmaRemoteProtection,
                                    wire::term::kInvalidStag}));
  }
  const auto sc = a.poll_send();
  ASSERT_EQ(sc.size(), 1u);
  EXPECT_NE(sc[0].status, WcStatus::Success);
}

// a and b connected without CRC, with loopback's 32 KiB FPDUs (ULPDU 32762).
void connect_loopback(engine::test::Side& a, engine::test::Side& b) {
  engine::ConnParams p;
  p.crc = false;
  p.mulpdu = 32762;
  engine::test::connect(a, b, p);
}

// An RDMA Write of all of src (registered as lkey) to remote_addr under rkey.
engine::SendWr write_wr(std::vector<uint8_t>& src, memory::Stag lkey, memory::Stag rkey,
                        uint64_t remote_addr, uint64_t wr_id) {
  engine::SendWr w;
  w.wr_id = wr_id;
  w.opcode = engine::WrOpcode::RdmaWrite;
  w.num_sge = 1;
  w.sg_list[0] = engine::test::sge_of(src, lkey);
  w.remote_stag = rkey;
  w.remote_addr = remote_addr;
  return w;
}

// 16 Writes of 1 MiB from a to a peer that drains as fast as we write: one pass of c sends at
// most its budget and ends cut short (for the Progress thread to serve the others first), not
// the whole send queue; later passes send the rest.
void expect_passes_within_budget(engine::test::Side& a, runtime::Connection& c) {
  using namespace engine;
  constexpr size_t kMsg = 1 << 20, kWrites = 16;
  std::vector<uint8_t> src(kMsg, 0x5a);
  const memory::Stag lkey = a.reg_mr(src, 0);
  for (size_t i = 0; i < kWrites; ++i) {
    SendWr w = write_wr(src, lkey, 0x1234, 0x10000, i);
    w.flags = kSendSignaled;
    ASSERT_EQ(a.qp->post_send(w), 0);
  }
  EXPECT_TRUE(c.progress());
  const uint64_t first = a.qp->stats().tx_bytes;
  EXPECT_GE(first, runtime::Connection::kTxBytesPerPass);
  EXPECT_LT(first, runtime::Connection::kTxBytesPerPass + 2 * kMsg) << "one pass sent it all";
  EXPECT_TRUE(c.cut_short());
  for (int pass = 0; pass < 100 && c.progress(); ++pass) {
  }
  EXPECT_GT(a.qp->stats().tx_bytes, kMsg * kWrites);
  EXPECT_FALSE(c.cut_short());
  EXPECT_EQ(a.poll_send().size(), kWrites);
}

engine::ConnParams budget_params() {
  engine::ConnParams p;
  p.initiator = true;
  p.crc = false;
  p.mulpdu = 32762;
  return p;
}

TEST(ConnectionTest, APassWritesAtMostItsBudget) {
  engine::test::Side a(1);
  a.qp->start(budget_params());
  const std::vector<uint8_t> nothing;
  runtime::Connection c(a.qp.get(), std::make_unique<ChunkStream>(&nothing, 65536));
  expect_passes_within_budget(a, c);
}

// The budget covers the whole pass: the sends its reads make between two rounds (what was
// posted meanwhile goes out between reads) count too, while the peer streams data as well.
TEST(ConnectionTest, APassThatReadsWritesAtMostItsBudgetToo) {
  using namespace engine;
  test::Side a(1), b(2);
  a.qp->start(budget_params());
  b.qp->start(budget_params());
  std::vector<uint8_t> dst(1 << 20, 0), bsrc(64 << 10, 0x33);
  const memory::Stag rkey = a.reg_mr(dst, memory::kRemoteWrite | memory::kLocalWrite);
  const memory::Stag blkey = b.reg_mr(bsrc, 0);
  std::vector<uint8_t> inbound;  // b's 4 MiB of Writes into dst, read 64 KiB at a time
  for (size_t i = 0; i < 64; ++i) {
    ASSERT_EQ(b.qp->post_send(
                  write_wr(bsrc, blkey, rkey, reinterpret_cast<uint64_t>(dst.data()), 100 + i)),
              0);
    drain_tx(*b.qp, &inbound);
  }
  runtime::Connection c(a.qp.get(), std::make_unique<ChunkStream>(&inbound, 65536));
  expect_passes_within_budget(a, c);
  EXPECT_EQ(dst[0], 0x33);
}

class ConnectionPlacementTest : public ::testing::TestWithParam<bool /* crc */> {};

// 32 KiB FPDUs (ULPDU 32762 + length, CRC field: loopback's FPDU) arriving 64 KiB per read,
// so every bulk read ends exactly at an FPDU boundary: without CRC the payloads must still be
// read straight into the target, not copied out of the staging buffer; with CRC (verified in
// a stage before placing, so copied either way) reads stay bulk. Placed intact either way.
TEST_P(ConnectionPlacementTest, LargeFpdusAreReadDirectly) {
  using namespace engine;
  test::Side a(1), b(2);
  ConnParams p;
  p.crc = GetParam();
  p.mulpdu = 32762;
  engine::test::connect(a, b, p);

  // Eight full segments per Write: ULPDU 32762 = DDP tagged header (14) + 32748 payload octets.
  constexpr size_t kMsg = 8 * 32748, kWrites = 8;
  std::vector<uint8_t> src(kMsg), dst(kMsg * kWrites);
  test::fill_pattern(src, 3);
  const memory::Stag lkey = a.reg_mr(src, 0);
  const memory::Stag rkey = b.reg_mr(dst, memory::kRemoteWrite | memory::kLocalWrite);
  for (size_t i = 0; i < kWrites; ++i)
    ASSERT_EQ(a.qp->post_send(
                  write_wr(src, lkey, rkey, reinterpret_cast<uint64_t>(dst.data()) + i * kMsg, i)),
              0);
  std::vector<uint8_t> wire;
  drain_tx(*a.qp, &wire);
  ASSERT_EQ(wire.size() % 32768, 0u) << "the FPDUs are not the 32 KiB of loopback";

  runtime::Connection c(b.qp.get(), std::make_unique<ChunkStream>(&wire, 65536));
  for (int pass = 0; pass < 10000 && c.progress(); ++pass) {
  }
  ASSERT_EQ(b.qp->state(), QpState::Rts);
  for (size_t i = 0; i < kWrites; ++i)
    ASSERT_EQ(std::memcmp(dst.data() + i * kMsg, src.data(), kMsg), 0) << "write " << i;
  const uint64_t payload = kMsg * kWrites;
  if (!p.crc) {
    // All but the first two FPDUs (the bulk read that showed how large they are) and each
    // FPDU's first kHeaderWindow octets.
    EXPECT_GE(c.stats().directed_bytes, payload * 9 / 10)
        << "staged reads " << c.stats().staged_reads << ", directed " << c.stats().directed_reads;
    // One read per FPDU: the read that places a payload also takes the headers that follow.
    const uint64_t fpdus = wire.size() / 32768;
    EXPECT_LE(c.stats().staged_reads + c.stats().directed_reads, fpdus + 4)
        << "staged reads " << c.stats().staged_reads << ", directed " << c.stats().directed_reads;
  } else {
    // With CRC every payload is staged for verification: bulk reads, no header windows.
    EXPECT_LE(c.stats().staged_reads, wire.size() / 65536 + 4);
  }

  // Small FPDUs next: back to bulk reads, many FPDUs per read (not one header window each).
  constexpr size_t kSmall = 1000;
  const size_t wire_before = wire.size();
  for (size_t i = 0; i < kSmall; ++i) {
    SendWr w;
    w.wr_id = 100 + i;
    w.opcode = WrOpcode::RdmaWrite;
    w.num_sge = 1;
    w.sg_list[0] = test::sge_of(src, lkey, 0, 64);
    w.remote_stag = rkey;
    w.remote_addr = reinterpret_cast<uint64_t>(dst.data()) + 64 * i;
    ASSERT_EQ(a.qp->post_send(w), 0);
    if (i % 200 == 199) drain_tx(*a.qp, &wire);  // the send queue holds 256
  }
  drain_tx(*a.qp, &wire);
  const uint64_t staged_before = c.stats().staged_reads;
  for (int pass = 0; pass < 10000 && c.progress(); ++pass) {
  }
  ASSERT_EQ(b.qp->state(), QpState::Rts);
  EXPECT_EQ(std::memcmp(dst.data() + 64 * (kSmall - 1), src.data(), 64), 0);
  EXPECT_LE(c.stats().staged_reads - staged_before, (wire.size() - wire_before) / 65536 + 4);
}

INSTANTIATE_TEST_SUITE_P(Crc, ConnectionPlacementTest, ::testing::Bool());

// A pass reads up to kRxRounds times while the peer streams; a Send posted meanwhile (its
// poster found the QP held by the pass and left the send to it) goes out between two reads,
// not after the whole read budget: a small message (an acknowledgement, ib_send_bw's credit
// Write to its client) waited behind up to 4 MiB of inbound data, tens of milliseconds under
// TCG.
TEST(ConnectionTest, ASendPostedDuringAPassGoesOutBeforeItsReadsEnd) {
  using namespace engine;
  test::Side a(1), b(2);
  connect_loopback(a, b);
  // More than a pass reads (kRxRounds rounds, reads of 64 KiB among them).
  constexpr size_t kMsg = 8 * 32748, kWrites = 24;
  std::vector<uint8_t> src(kMsg), dst(kMsg);
  test::fill_pattern(src, 5);
  const memory::Stag lkey = a.reg_mr(src, 0);
  const memory::Stag rkey = b.reg_mr(dst, memory::kRemoteWrite | memory::kLocalWrite);
  std::vector<uint8_t> wire;
  for (size_t i = 0; i < kWrites; ++i) {
    ASSERT_EQ(a.qp->post_send(write_wr(src, lkey, rkey, reinterpret_cast<uint64_t>(dst.data()), i)),
              0);
    drain_tx(*a.qp, &wire);
  }
  ASSERT_GT(wire.size(), size_t{runtime::Connection::kRxRounds} * 65536);

  std::vector<uint8_t> credit(8, 0x11);
  const memory::Stag ckey = b.reg_mr(credit, 0);
  ChunkStream::Log log;
  log.on_read = [&](size_t reads) {
    if (reads != 2) return;
    SendWr w;
    w.wr_id = 99;
    w.flags = kSendSignaled;
    w.num_sge = 1;
    w.sg_list[0] = test::sge_of(credit, ckey);
    ASSERT_EQ(b.qp->post_send(w), 0);
  };
  runtime::Connection c(b.qp.get(), std::make_unique<ChunkStream>(&wire, 65536, nullptr, &log));
  c.progress();
  EXPECT_GT(log.reads, 8u) << "the pass did not go on reading";
  EXPECT_LE(log.reads_before_first_write, 3u) << "the Send waited for the pass's reads";
  EXPECT_EQ(b.poll_send().size(), 1u);
}

// A pass's transmit half goes on while the socket takes writes, and over loopback the peer
// drains as fast as we write: it ends only when the send queue is empty. A small message that
// arrives meanwhile (ib_send_bw's credit Write) is read after at most kTxBytesPerRead more,
// not after the whole queue: perftest's client looks at its credits after each completion
// event and sleeps for good if the Write is not placed by its last one.
TEST(ConnectionTest, ALongTransmitReadsWhatArrivedMeanwhile) {
  using namespace engine;
  test::Side a(1), b(2);
  connect_loopback(a, b);
  // b, the responder, sends 2 MiB, 64 KiB per write, once a's first FPDU came (RFC 6581 §5);
  // a's Write into b's `credit` arrives after b's first write.
  constexpr size_t kMsg = 8 * 32748, kWrites = 8;
  std::vector<uint8_t> bulk(kMsg), sink(kMsg), credit_src(8, 0x77), credit(8, 0);
  const memory::Stag bulk_key = b.reg_mr(bulk, 0);
  const memory::Stag sink_key = a.reg_mr(sink, memory::kRemoteWrite | memory::kLocalWrite);
  const memory::Stag src_key = a.reg_mr(credit_src, 0);
  const memory::Stag credit_key = b.reg_mr(credit, memory::kRemoteWrite | memory::kLocalWrite);
  const uint64_t credit_addr = reinterpret_cast<uint64_t>(credit.data());
  std::vector<uint8_t> wire, later;
  ASSERT_EQ(a.qp->post_send(write_wr(credit_src, src_key, credit_key, credit_addr, 1)), 0);
  drain_tx(*a.qp, &wire);
  std::fill(credit_src.begin(), credit_src.end(), 0x78);
  ASSERT_EQ(a.qp->post_send(write_wr(credit_src, src_key, credit_key, credit_addr, 2)), 0);
  drain_tx(*a.qp, &later);
  for (size_t i = 0; i < kWrites; ++i)
    ASSERT_EQ(b.qp->post_send(
                  write_wr(bulk, bulk_key, sink_key, reinterpret_cast<uint64_t>(sink.data()), i)),
              0);
  ChunkStream::Log log;
  log.write_max = 65536;
  log.on_write = [&](size_t writes) {
    if (writes == 1) wire.insert(wire.end(), later.begin(), later.end());
  };
  size_t writes_before_later = SIZE_MAX;
  log.on_read = [&](size_t reads) {
    if (reads == 2) writes_before_later = log.writes;
  };
  runtime::Connection c(b.qp.get(), std::make_unique<ChunkStream>(&wire, 65536, nullptr, &log));
  c.progress();
  EXPECT_GE(log.writes, kMsg * kWrites / 65536) << "the pass did not send the queue";
  EXPECT_EQ(log.reads, 2u);
  EXPECT_EQ(credit, credit_src) << "the second Write waited for the next pass";
  EXPECT_EQ(log.reads_before_first_write, 1u);
  EXPECT_LE(writes_before_later, runtime::Connection::kTxBytesPerRead / 65536 + 1)
      << "the second Write waited for the pass's writes";
}

// ibv_rc_pingpong's last round over a lossy link: the server sends its last 16 KiB message and
// closes, TCP retransmits the message with the FIN, and the client's poll reads both at once.
// The pass that completes the message must leave the FIN to the next one: the poll then
// returns the completion alone, and the client, done, never sees its other receives flushed.
// (A read placing a payload directly that comes back short drained the socket.)
TEST(ConnectionTest, TheReadThatCompletesAMessageLeavesTheFinThatCameWithIt) {
  using namespace engine;
  test::Side a(1), b(2);
  connect_loopback(a, b);
  constexpr size_t kMsg = 16384, kMsgs = 4;
  std::vector<uint8_t> src(kMsg), dst(kMsg * (kMsgs + 2));
  test::fill_pattern(src, 9);
  const memory::Stag lkey = a.reg_mr(src, 0);
  const memory::Stag dkey = b.reg_mr(dst, memory::kLocalWrite);
  for (size_t i = 0; i < kMsgs + 2; ++i) {
    RecvWr r;
    r.wr_id = 100 + i;
    r.num_sge = 1;
    r.sg_list[0] = test::sge_of(dst, dkey, i * kMsg, kMsg);
    ASSERT_EQ(b.qp->post_recv(r), 0);
  }
  auto send = [&](uint64_t id) {
    SendWr w;
    w.wr_id = id;
    w.num_sge = 1;
    w.sg_list[0] = test::sge_of(src, lkey);
    ASSERT_EQ(a.qp->post_send(w), 0);
  };
  std::vector<uint8_t> wire;
  bool fin = false;
  runtime::Connection c(b.qp.get(), std::make_unique<ChunkStream>(&wire, 65536, &fin));
  // The earlier rounds: one message at a time, each read as it comes.
  for (size_t i = 0; i + 1 < kMsgs; ++i) {
    send(i);
    drain_tx(*a.qp, &wire);
    c.progress();
    ASSERT_EQ(b.poll_recv().size(), 1u) << "message " << i;
  }
  ASSERT_GT(c.stats().directed_reads, 0u) << "the payloads were not read directly";
  // The last message and the FIN, in the socket together.
  send(kMsgs - 1);
  drain_tx(*a.qp, &wire);
  fin = true;
  c.progress();
  const auto last = b.poll_recv();
  ASSERT_EQ(last.size(), 1u) << "the receive behind the last message was flushed with it";
  EXPECT_EQ(last[0].status, WcStatus::Success);
  EXPECT_EQ(last[0].byte_len, kMsg);
  EXPECT_EQ(b.qp->state(), QpState::Rts);
  EXPECT_EQ(std::memcmp(dst.data() + (kMsgs - 1) * kMsg, src.data(), kMsg), 0);
  // The next pass meets the FIN: the peer closed, the other receives are flushed.
  c.progress();
  EXPECT_EQ(b.qp->state(), QpState::Error);
  const auto flushed = b.poll_recv();
  ASSERT_EQ(flushed.size(), 2u);
  for (const Completion& f : flushed) EXPECT_EQ(f.status, WcStatus::WrFlushErr);
}

}  // namespace
}  // namespace uiw::transport
