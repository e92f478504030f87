// Crafted FPDUs fed straight into a Qp: every receive validation rule ends in the Terminate the
// RFCs name, read back from the bytes the Qp transmits.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "unit/engine/qp_pair.h"
#include "wire/bytes.h"
#include "wire/ddp.h"
#include "wire/rdmap.h"
#include "wire/terminate.h"

namespace uiw::engine::test {
namespace {

using wire::TermLayer;
namespace term = wire::term;

class QpCraftedTest : public testing::Test {
 protected:
  explicit QpCraftedTest(bool markers = false, bool crc = true) : q(2) {
    ConnParams p;
    p.initiator = false;
    p.crc = crc;
    p.markers_rx = markers;
    p.ord = p.ird = 2;
    markers_ = markers;
    crc_ = crc;
    q.qp->start(p);
  }
  // Encodes one FPDU (markers when negotiated) at the current stream position and feeds it.
  void feed(const wire::SegmentHeader& h, std::span<const uint8_t> extra = {}) {
    std::vector<uint8_t> ulpdu(wire::segment_header_size(h.tagged));
    wire::encode_segment_header(ulpdu.data(), h);
    ulpdu.insert(ulpdu.end(), extra.begin(), extra.end());
    std::vector<uint8_t> fpdu(wire::fpdu_size_with_markers(pos_, ulpdu.size(), markers_));
    ASSERT_EQ(wire::encode_fpdu(fpdu, pos_, ulpdu, crc_, markers_), fpdu.size());
    pos_ += fpdu.size();
    last_header_.assign(ulpdu.begin(), ulpdu.begin() + wire::segment_header_size(h.tagged));
    ASSERT_EQ(q.qp->rx_feed(fpdu), fpdu.size());
  }
  // Every octet the Qp transmits now.
  std::vector<uint8_t> sent_bytes() {
    std::vector<uint8_t> out;
    for (int i = 0; i < 10; ++i) {
      auto iov = q.qp->tx_pending();
      size_t n = 0;
      for (const iovec& v : iov) {
        const auto* p = static_cast<const uint8_t*>(v.iov_base);
        out.insert(out.end(), p, p + v.iov_len);
        n += v.iov_len;
      }
      q.qp->tx_commit(n);
    }
    return out;
  }
  // The ULPDUs of the whole FPDUs in bytes.
  std::vector<std::vector<uint8_t>> ulpdus_of(std::span<const uint8_t> bytes) {
    struct Collect : wire::FpduDecoder::Visitor {
      std::vector<std::vector<uint8_t>> u;
      void on_ulpdu(std::span<const uint8_t> s) override { u.emplace_back(s.begin(), s.end()); }
    } c;
    wire::FpduDecoder d(&c, crc_, false);
    EXPECT_EQ(d.consume(bytes), bytes.size());
    return c.u;
  }
  // The ULPDUs of every FPDU the Qp transmits now.
  std::vector<std::vector<uint8_t>> sent_ulpdus() { return ulpdus_of(sent_bytes()); }
  // The one Terminate the Qp transmitted, decoded from its wire bytes.
  wire::TerminateMessage sent_terminate() { return terminate_of(sent_ulpdus()); }
  wire::TerminateMessage terminate_of(const std::vector<std::vector<uint8_t>>& u) {
    EXPECT_EQ(u.size(), 1u);
    wire::TerminateMessage t{};
    if (u.empty()) return t;
    wire::SegmentHeader h;
    EXPECT_EQ(wire::decode_segment_header(u[0], &h), wire::kUntaggedHeaderSize);
    EXPECT_EQ(wire::rdmap_opcode(h.rdmap_control), static_cast<uint8_t>(wire::Opcode::Terminate));
    EXPECT_EQ(h.qn, wire::kQnTerminate);
    EXPECT_EQ(h.msn, 1u);
    EXPECT_TRUE(h.last);
    EXPECT_EQ(wire::decode_terminate(std::span(u[0]).subspan(wire::kUntaggedHeaderSize), &t),
              wire::TerminateDecodeError::None);
    EXPECT_EQ(q.qp->state(), QpState::Error);
    EXPECT_TRUE(q.qp->tx_want_shutdown());
    return t;
  }
  void expect(wire::TerminateCause cause, bool with_header) {
    const wire::TerminateMessage t = sent_terminate();
    EXPECT_EQ(t.cause, cause) << wire::terminate_cause_name(t.cause);
    EXPECT_EQ(t.d, with_header);
    EXPECT_EQ(t.m, with_header);
    if (with_header) {
      ASSERT_EQ(t.ddp_header_size, last_header_.size());
      EXPECT_EQ(0, std::memcmp(t.ddp_header, last_header_.data(), last_header_.size()));
    }
  }
  // Registers buf and posts one receive into all of it; returns the lkey.
  memory::Stag post_recv_into(std::vector<uint8_t>& buf, uint64_t wr_id) {
    const memory::Stag k = q.reg_mr(buf, memory::kLocalWrite);
    RecvWr r;
    r.wr_id = wr_id;
    r.num_sge = 1;
    r.sg_list[0] = sge_of(buf, k);
    EXPECT_EQ(q.rq.post(r), 0);
    return k;
  }
  static wire::SegmentHeader tagged_hdr(wire::Opcode op, uint32_t stag, uint64_t to, bool last) {
    wire::SegmentHeader h;
    h.tagged = true;
    h.last = last;
    h.rdmap_control = wire::rdmap_control(op);
    h.stag = stag;
    h.to = to;
    return h;
  }
  static wire::SegmentHeader send_hdr(uint32_t msn = 1) {
    wire::SegmentHeader h;
    h.last = true;
    h.rdmap_control = wire::rdmap_control(wire::Opcode::Send);
    h.qn = 0;
    h.msn = msn;
    return h;
  }
  static wire::SegmentHeader read_hdr(uint32_t msn) {
    wire::SegmentHeader h;
    h.last = true;
    h.rdmap_control = wire::rdmap_control(wire::Opcode::ReadRequest);
    h.qn = 1;
    h.msn = msn;
    return h;
  }
  Side q;
  bool markers_ = false;
  bool crc_ = true;
  uint64_t pos_ = 0;
  std::vector<uint8_t> last_header_;
};

TEST_F(QpCraftedTest, WrongDdpVersionUntagged) {
  wire::SegmentHeader h = send_hdr();
  h.ddp_version = 2;
  feed(h);
  expect({TermLayer::Ddp, term::kDdpUntagged, term::kDdpUntaggedInvalidVersion}, true);
}

TEST_F(QpCraftedTest, WrongDdpVersionTagged) {
  wire::SegmentHeader h;
  h.tagged = true;
  h.last = true;
  h.ddp_version = 0;
  h.rdmap_control = wire::rdmap_control(wire::Opcode::RdmaWrite);
  feed(h);
  expect({TermLayer::Ddp, term::kDdpTagged, term::kDdpInvalidVersion}, true);
}

TEST_F(QpCraftedTest, WrongRdmapVersion) {
  wire::SegmentHeader h = send_hdr();
  h.rdmap_control = wire::rdmap_control(wire::Opcode::Send, 2);
  feed(h);
  expect({TermLayer::Rdma, term::kRdmaRemoteOperation, term::kInvalidRdmapVersion}, true);
}

TEST_F(QpCraftedTest, ReservedOpcode) {
  wire::SegmentHeader h = send_hdr();
  h.rdmap_control = 0x40 | 0x09;
  feed(h);
  expect({TermLayer::Rdma, term::kRdmaRemoteOperation, term::kUnexpectedOpcode}, true);
}

// A receive posted while the Terminate is on its way out completes flushed at once: the RQ was
// flushed when the Terminate was queued, and once it is sent the Qp is in Error without another
// flush. Before, the receive waited in the RQ for good. Lock-free posts leave that state to the
// locked ones.
TEST_F(QpCraftedTest, AReceiveOrSendPostedWhileTheTerminateIsOutboundIsFlushed) {
  feed(send_hdr(1));  // no receive posted: DDP untagged "no buffer", Terminate queued
  ASSERT_EQ(q.qp->state(), QpState::Terminate);
  RecvWr r;
  r.wr_id = 77;
  EXPECT_EQ(q.qp->post_recv_concurrent(r), -EAGAIN);
  EXPECT_EQ(q.qp->post_recv(r), 0);
  SendWr w;
  w.wr_id = 78;
  w.opcode = WrOpcode::Send;
  EXPECT_EQ(q.qp->post_send_concurrent(w), -EAGAIN);
  EXPECT_EQ(q.qp->post_send(w), 0);
  expect({TermLayer::Ddp, term::kDdpUntagged, term::kDdpNoBuffer}, true);
  const std::vector<Completion> rc = q.poll_recv();
  ASSERT_EQ(rc.size(), 1u);
  EXPECT_EQ(rc[0].wr_id, 77u);
  EXPECT_EQ(rc[0].status, WcStatus::WrFlushErr);
  const std::vector<Completion> sc = q.poll_send();
  ASSERT_EQ(sc.size(), 1u);
  EXPECT_EQ(sc[0].wr_id, 78u);
  EXPECT_EQ(sc[0].status, WcStatus::WrFlushErr);
}

// Lock-free posts in full operation queue like locked ones: the Send goes out, the receive
// takes the peer's Send.
TEST_F(QpCraftedTest, LockFreePostsQueueLikeLockedOnes) {
  std::vector<uint8_t> rbuf(64);
  const memory::Stag k = q.reg_mr(rbuf, memory::kLocalWrite);
  RecvWr r;
  r.wr_id = 5;
  r.num_sge = 1;
  r.sg_list[0] = sge_of(rbuf, k);
  ASSERT_EQ(q.qp->post_recv_concurrent(r), 0);
  const std::array<uint8_t, 4> hello = {'h', 'e', 'y', '!'};
  feed(send_hdr(1), hello);
  const std::vector<Completion> rc = q.poll_recv();
  ASSERT_EQ(rc.size(), 1u);
  EXPECT_EQ(rc[0].status, WcStatus::Success);
  EXPECT_EQ(rc[0].byte_len, 4u);
  SendWr w;
  w.wr_id = 6;
  w.opcode = WrOpcode::Send;
  w.flags = kSendSignaled;
  ASSERT_EQ(q.qp->post_send_concurrent(w), 0);
  EXPECT_EQ(sent_ulpdus().size(), 1u);
  const std::vector<Completion> sc = q.poll_send();
  ASSERT_EQ(sc.size(), 1u);
  EXPECT_EQ(sc[0].wr_id, 6u);
  EXPECT_EQ(sc[0].status, WcStatus::Success);
}

// The application may post into a send queue slot as soon as it sees the slot's completion (a
// queue of depth 1, as perftest's latency tests use): the entry is free before the completion
// is pushed. Checked from the CQ's notify hook, which runs right after the push.
TEST(QpSendQueueTest, ASlotIsFreeWhenItsCompletionIsSeen) {
  memory::Registry reg(16);
  ReceiveQueue rq(4, false);
  CompletionQueue rcq(16);
  Qp* qp = nullptr;
  std::vector<int> posted_from_hook;
  SendWr next;
  next.opcode = WrOpcode::Send;
  CompletionQueue scq(16, [&] { posted_from_hook.push_back(qp->post_send_concurrent(next)); });
  QpConfig c;
  c.qp_num = 3;
  c.pd = reg.alloc_pd();
  c.sq_depth = 1;
  c.registry = &reg;
  c.send_cq = &scq;
  c.recv_cq = &rcq;
  c.rq = &rq;
  Qp q(c);
  qp = &q;
  ConnParams p;
  p.crc = false;
  q.start(p);
  SendWr w;
  w.opcode = WrOpcode::Send;
  w.flags = kSendSignaled;
  ASSERT_EQ(q.post_send_concurrent(w), 0);
  EXPECT_EQ(q.post_send_concurrent(w), -ENOMEM) << "depth 1: the queue is full";
  scq.arm(false);
  size_t n = 0;
  for (const iovec& v : q.tx_pending()) n += v.iov_len;
  ASSERT_GT(n, 0u);
  q.tx_commit(n);  // TCP took the whole Send: it completes (RDMAP §5.5 rule 14)
  ASSERT_EQ(posted_from_hook.size(), 1u);
  EXPECT_EQ(posted_from_hook[0], 0) << "the completed Send's slot was still taken";
  EXPECT_EQ(Side::poll(scq).size(), 1u);
}

TEST_F(QpCraftedTest, SendWithTaggedFlag) {
  wire::SegmentHeader h;
  h.tagged = true;
  h.last = true;
  h.rdmap_control = wire::rdmap_control(wire::Opcode::Send);
  feed(h);
  expect({TermLayer::Rdma, term::kRdmaRemoteOperation, term::kUnexpectedOpcode}, true);
}

TEST_F(QpCraftedTest, WrongQueueNumber) {
  wire::SegmentHeader h = send_hdr();
  h.qn = 3;
  feed(h);
  expect({TermLayer::Ddp, term::kDdpUntagged, term::kDdpInvalidQn}, true);
}

TEST_F(QpCraftedTest, MsnOutOfRange) {
  RecvWr r;
  ASSERT_EQ(q.rq.post(r), 0);
  feed(send_hdr(7));
  expect({TermLayer::Ddp, term::kDdpUntagged, term::kDdpMsnRange}, true);
}

TEST_F(QpCraftedTest, ReadRequestsBeyondIrd) {
  std::vector<uint8_t> rr(wire::kReadRequestHeaderSize, 0);  // zero-size reads: always valid
  feed(read_hdr(1), rr);
  feed(read_hdr(2), rr);
  EXPECT_EQ(q.qp->state(), QpState::Rts);
  feed(read_hdr(3), rr);  // IRD is 2 and nothing was answered yet
  const wire::TerminateMessage t = sent_terminate();
  EXPECT_EQ(t.cause,
            (wire::TerminateCause{TermLayer::Ddp, term::kDdpUntagged, term::kDdpNoBuffer}));
  // A DDP-layer error: the DDP header goes back, the Read Request header does not (RFC 5040
  // Figure 10; wire::terminate_flags_for), as siw sends it.
  EXPECT_TRUE(t.m && t.d);
  EXPECT_FALSE(t.r);
}

TEST_F(QpCraftedTest, ReadRequestOutOfMsnRangeCopiesNoRdmaHeader) {
  std::vector<uint8_t> rr(wire::kReadRequestHeaderSize, 0);
  feed(read_hdr(5), rr);
  const wire::TerminateMessage t = sent_terminate();
  EXPECT_EQ(t.cause,
            (wire::TerminateCause{TermLayer::Ddp, term::kDdpUntagged, term::kDdpMsnRange}));
  const wire::TerminateHeaderFlags f = wire::terminate_flags_for(t.cause, true);
  EXPECT_EQ(t.m, f.m);
  EXPECT_EQ(t.d, f.d);
  EXPECT_EQ(t.r, f.r);
  EXPECT_FALSE(t.r);
}

// An RDMA-layer error on a Read Request sends its header back (R, RFC 5040 §4.8).
TEST_F(QpCraftedTest, ReadRequestOfAnInvalidStagCopiesItsHeader) {
  std::vector<uint8_t> rr(wire::kReadRequestHeaderSize, 0);
  wire::ReadRequestHeader h{};
  h.sink_stag = 0x100;
  h.size = 64;
  h.src_stag = 0xdead00;
  wire::encode_read_request(rr.data(), h);
  feed(read_hdr(1), rr);
  const wire::TerminateMessage t = sent_terminate();
  EXPECT_EQ(t.cause.layer, TermLayer::Rdma);
  EXPECT_TRUE(t.m && t.d && t.r);
  EXPECT_EQ(0, std::memcmp(t.rdma_header, rr.data(), rr.size()));
}

// A Terminate the Qp raises while sending ends placement as one raised while receiving does
// (RFC 5041 §7.1: after an error, subsequent DDP Segments are dropped): here the source of an
// accepted Read Request was deregistered before the answer was built, and a Write that arrives
// afterwards is read and dropped, not placed.
TEST_F(QpCraftedTest, AfterATerminateRaisedWhileSendingNothingIsPlaced) {
  std::vector<uint8_t> src(64, 0x11), dst(64, 0);
  const memory::Stag s = q.reg_mr(src, memory::kRemoteRead);
  const memory::Stag d = q.reg_mr(dst, memory::kLocalWrite | memory::kRemoteWrite);
  ASSERT_NE(s, 0u);
  ASSERT_NE(d, 0u);
  std::vector<uint8_t> rr(wire::kReadRequestHeaderSize, 0);
  wire::ReadRequestHeader h{};
  h.sink_stag = 0x100;
  h.size = static_cast<uint32_t>(src.size());
  h.src_stag = s;
  h.src_to = reinterpret_cast<uint64_t>(src.data());
  wire::encode_read_request(rr.data(), h);
  feed(read_hdr(1), rr);
  ASSERT_EQ(q.reg.deregister(s), 0);
  q.qp->tx_pending();  // the answer is built now: its source is gone
  ASSERT_EQ(q.qp->state(), QpState::Terminate);
  const std::vector<uint8_t> payload(dst.size(), 0x22);
  feed(tagged_hdr(wire::Opcode::RdmaWrite, d, reinterpret_cast<uint64_t>(dst.data()), true),
       payload);
  EXPECT_EQ(dst, std::vector<uint8_t>(dst.size(), 0)) << "a Write was placed after the Terminate";
}

TEST_F(QpCraftedTest, ReadRequestWithPayload) {
  std::vector<uint8_t> rr(wire::kReadRequestHeaderSize + 4, 0);
  feed(read_hdr(1), rr);
  expect({TermLayer::Rdma, term::kRdmaRemoteOperation, term::kUnspecified}, true);
}

TEST_F(QpCraftedTest, UnsolicitedReadResponse) {
  wire::SegmentHeader h;
  h.tagged = true;
  h.last = true;
  h.rdmap_control = wire::rdmap_control(wire::Opcode::ReadResponse);
  std::vector<uint8_t> data(8, 1);
  feed(h, data);
  expect({TermLayer::Rdma, term::kRdmaRemoteOperation, term::kUnexpectedOpcode}, true);
}

TEST_F(QpCraftedTest, TerminateOutOfTheBlueIsDeliveredNotAnswered) {
  wire::SegmentHeader h = send_hdr();
  h.rdmap_control = wire::rdmap_control(wire::Opcode::Terminate);
  h.qn = 2;
  wire::TerminateMessage t{};
  t.cause = {TermLayer::Rdma, term::kRdmaRemoteOperation, term::kCatastrophicStream};
  std::vector<uint8_t> body(wire::terminate_size(t));
  wire::encode_terminate(body, t);
  RecvWr r;
  r.wr_id = 3;
  ASSERT_EQ(q.rq.post(r), 0);
  feed(h, body);
  EXPECT_EQ(q.qp->state(), QpState::Error);
  ASSERT_TRUE(q.qp->terminate_received().has_value());
  EXPECT_EQ(q.qp->terminate_received()->cause, t.cause);
  EXPECT_FALSE(q.qp->terminate_sent().has_value());
  EXPECT_TRUE(q.has_event(QpEvent::TerminateReceived));
  auto rc = q.poll_recv();
  ASSERT_EQ(rc.size(), 1u);
  EXPECT_EQ(rc[0].status, WcStatus::WrFlushErr);
}

TEST_F(QpCraftedTest, UlpduShorterThanItsHeader) {
  // ULPDU_Length 6 while the control octets announce an 18-octet untagged header.
  std::vector<uint8_t> ulpdu = {0x41, 0x43, 0, 0, 0, 0};
  std::vector<uint8_t> fpdu(wire::fpdu_size(ulpdu.size()));
  wire::encode_fpdu(fpdu, 0, ulpdu, true, false);
  q.qp->rx_feed(fpdu);
  const wire::TerminateMessage t = sent_terminate();
  EXPECT_EQ(t.cause, (wire::TerminateCause{TermLayer::Rdma, term::kRdmaRemoteOperation,
                                           term::kUnspecified}));
}

TEST_F(QpCraftedTest, EverythingAfterAnErrorIsDropped) {
  wire::SegmentHeader bad = send_hdr();
  bad.qn = 9;
  feed(bad);
  std::vector<uint8_t> inbox(8, 0);
  RecvWr r;
  ASSERT_EQ(q.rq.post(r), 0);
  feed(send_hdr(1));  // valid, but RFC 5041 §7.1: subsequent segments are silently dropped
  EXPECT_EQ(q.rq.size(), 1u);
  EXPECT_EQ(q.qp->stats().rx_fpdus, 0u);
}

// RFC 5041 §5.4: a message's length is MO + payload of its Last segment, which only tells the
// truth when every earlier octet arrived. Over an in-order LLP each segment's MO is what the
// message holds so far; otherwise untagged check 3 (Invalid MO), and the receive never completes
// with Success.
TEST_F(QpCraftedTest, SendOfOnlyItsLastSegmentIsInvalidMo) {
  std::vector<uint8_t> inbox(1000, 0xEE);
  post_recv_into(inbox, 5);
  wire::SegmentHeader h = send_hdr();
  h.mo = 200;
  const std::vector<uint8_t> data(16, 0xAB);
  feed(h, data);
  expect({TermLayer::Ddp, term::kDdpUntagged, term::kDdpInvalidMo}, true);
  const auto rc = q.poll_recv();
  ASSERT_EQ(rc.size(), 1u);
  EXPECT_EQ(rc[0].wr_id, 5u);
  EXPECT_NE(rc[0].status, WcStatus::Success);
  EXPECT_EQ(inbox, std::vector<uint8_t>(1000, 0xEE));  // nothing placed
}

TEST_F(QpCraftedTest, SendSegmentLeavingAHoleIsInvalidMo) {
  std::vector<uint8_t> inbox(1000, 0);
  post_recv_into(inbox, 0);
  const std::vector<uint8_t> data(16, 0xAB);
  wire::SegmentHeader first = send_hdr();
  first.last = false;
  feed(first, data);
  EXPECT_EQ(q.qp->state(), QpState::Rts);
  wire::SegmentHeader last = send_hdr();
  last.mo = 32;  // octets 16..31 never came
  feed(last, data);
  expect({TermLayer::Ddp, term::kDdpUntagged, term::kDdpInvalidMo}, true);
  const auto rc = q.poll_recv();
  ASSERT_EQ(rc.size(), 1u);
  EXPECT_NE(rc[0].status, WcStatus::Success);
}

// The receive buffer is deregistered between two segments of one Send: the second is not
// placed (RFC 5041 §8.3.1(6)), the receive completes with a local protection error.
TEST_F(QpCraftedTest, SendBufferDeregisteredBetweenSegmentsIsNotWritten) {
  std::vector<uint8_t> inbox(1000, 0);
  const memory::Stag k = post_recv_into(inbox, 6);
  wire::SegmentHeader first = send_hdr();
  first.last = false;
  feed(first, std::vector<uint8_t>(16, 0xAB));
  ASSERT_EQ(q.reg.deregister(k), 0);
  wire::SegmentHeader last = send_hdr();
  last.mo = 16;
  feed(last, std::vector<uint8_t>(16, 0xCD));
  expect({TermLayer::Rdma, term::kRdmaLocalCatastrophic, 0}, false);
  const auto rc = q.poll_recv();
  ASSERT_EQ(rc.size(), 1u);
  EXPECT_EQ(rc[0].status, WcStatus::LocProtErr);
  EXPECT_EQ(inbox[15], 0xAB);
  EXPECT_EQ(inbox[16], 0);  // nothing of the second segment
}

// A Send's MO is 32 bits (RFC 5041 §4.3), so no message is longer than 2^32 - 1 octets, however
// large the receive buffer: a segment that would end beyond is "too long", never a completion
// whose byte_len (MO + payload, §5.4) wrapped around. The 4 GiB before it are placed as the
// runtime places large payloads (rx_need / rx_commit straight into the buffer), here without
// writing them, into a 6 GiB receive buffer that is reserved and never touched.
class QpCraftedNoCrcTest : public QpCraftedTest {
 protected:
  QpCraftedNoCrcTest() : QpCraftedTest(false, false) {}
};

TEST_F(QpCraftedNoCrcTest, ASendLongerThanItsMoCanDescribeIsTooLong) {
  constexpr uint64_t kSge = 3ull << 30;
  void* const buf = mmap(nullptr, 2 * kSge, PROT_READ | PROT_WRITE,
                         MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  ASSERT_NE(buf, MAP_FAILED);
  const auto base = reinterpret_cast<uint64_t>(buf);
  int err = 0;
  const memory::Stag k =
      q.reg.register_region(q.pd, buf, 2 * kSge, base, memory::kLocalWrite, &err);
  ASSERT_NE(k, 0u);
  RecvWr r;
  r.wr_id = 6;
  r.num_sge = 2;
  r.sg_list[0] = {base, static_cast<uint32_t>(kSge), k};
  r.sg_list[1] = {base + kSge, static_cast<uint32_t>(kSge), k};
  ASSERT_EQ(q.rq.post(r), 0);

  // One segment at MO: its headers fed, its payload placed directly, its PAD and CRC fed.
  auto segment = [&](uint32_t mo, uint32_t len, bool last) {
    wire::SegmentHeader h = send_hdr();
    h.last = last;
    h.mo = mo;
    const size_t ulpdu = wire::kUntaggedHeaderSize + len;
    std::vector<uint8_t> head(wire::kUlpduLengthSize + wire::kUntaggedHeaderSize);
    wire::store_be16(head.data(), static_cast<uint16_t>(ulpdu));
    wire::encode_segment_header(head.data() + wire::kUlpduLengthSize, h);
    last_header_.assign(head.begin() + wire::kUlpduLengthSize, head.end());
    ASSERT_EQ(q.qp->rx_feed(head), head.size());
    for (uint64_t placed = 0; placed < len;) {
      if (last && !q.qp->rx_directable()) {  // refused: read and dropped
        const std::vector<uint8_t> rest(len - placed, 0);
        ASSERT_EQ(q.qp->rx_feed(rest), rest.size());
        break;
      }
      // Feeding 4 GiB would touch every page of the buffer.
      ASSERT_TRUE(q.qp->rx_directable()) << "MO " << mo << " placed " << placed;
      const Qp::RxNeed need = q.qp->rx_need();
      ASSERT_GT(need.len, 0u);
      const size_t n = std::min<uint64_t>(need.len, len - placed);
      q.qp->rx_commit(n);
      placed += n;
    }
    const std::vector<uint8_t> tail(wire::fpdu_pad(ulpdu) + wire::kCrcSize, 0);
    ASSERT_EQ(q.qp->rx_feed(tail), tail.size());
  };
  constexpr uint32_t kPiece = 65000, kLastMo = UINT32_MAX - 99;
  uint32_t mo = 0;
  while (mo < kLastMo) {
    const uint32_t len = std::min(kPiece, kLastMo - mo);
    segment(mo, len, false);
    if (HasFatalFailure()) break;
    mo += len;
  }
  if (!HasFatalFailure()) {
    ASSERT_EQ(q.qp->state(), QpState::Rts);
    segment(kLastMo, 200, true);  // would end at 2^32 + 100
  }
  if (!HasFatalFailure()) {
    expect({TermLayer::Ddp, term::kDdpUntagged, term::kDdpTooLong}, true);
    const auto rc = q.poll_recv();
    ASSERT_EQ(rc.size(), 1u);
    EXPECT_EQ(rc[0].wr_id, 6u);
    EXPECT_EQ(rc[0].status, WcStatus::LocLenErr) << "byte_len " << rc[0].byte_len;
  }
  munmap(buf, 2 * kSge);
}

// A Read whose response does not bring every octet it asked for.
class QpCraftedReadResponseTest : public QpCraftedTest {
 protected:
  QpCraftedReadResponseTest() : sink(1000, 0xEE) {
    sink_key = q.reg_mr(sink, memory::kLocalWrite | memory::kRemoteWrite);
    // The responder speaks only after the initiator's first FPDU (RFC 5044 §7.1.2): a
    // zero-length Write, whose STag is not checked (RFC 5041 §5.2).
    feed(tagged_hdr(wire::Opcode::RdmaWrite, 0, 0, true));
    SendWr rd;
    rd.wr_id = 9;
    rd.opcode = WrOpcode::RdmaRead;
    rd.flags = kSendSignaled;
    rd.num_sge = 1;
    rd.sg_list[0] = sge_of(sink, sink_key);
    rd.remote_stag = 0x1234;
    EXPECT_EQ(q.qp->post_send(rd), 0);
    const auto u = sent_ulpdus();
    EXPECT_EQ(u.size(), 1u);
    if (u.empty()) return;
    const wire::ReadRequestHeader rr =
        wire::decode_read_request(u[0].data() + wire::kUntaggedHeaderSize);
    EXPECT_EQ(rr.size, 1000u);
    sink_stag = rr.sink_stag;
  }
  wire::SegmentHeader response(uint64_t to, bool last) const {
    return tagged_hdr(wire::Opcode::ReadResponse, sink_stag, to, last);
  }
  void expect_read_failed() {
    const auto sc = q.poll_send();
    ASSERT_EQ(sc.size(), 1u);
    EXPECT_EQ(sc[0].wr_id, 9u);
    EXPECT_NE(sc[0].status, WcStatus::Success);
  }
  std::vector<uint8_t> sink;
  memory::Stag sink_key = 0;
  uint32_t sink_stag = 0;
};

TEST_F(QpCraftedReadResponseTest, ShortResponseIsRemoteOperationError) {
  const std::vector<uint8_t> data(8, 0xAB);
  feed(response(0, true), data);  // 8 of the 1000 octets, and Last
  expect({TermLayer::Rdma, term::kRdmaRemoteOperation, term::kUnspecified}, true);
  expect_read_failed();
}

TEST_F(QpCraftedReadResponseTest, SegmentLeavingAHoleIsBaseBounds) {
  const std::vector<uint8_t> data(500, 0xAB);
  feed(response(500, true), data);  // octets 0..499 never came
  expect({TermLayer::Ddp, term::kDdpTagged, term::kDdpBaseBounds}, true);
  expect_read_failed();
  EXPECT_EQ(sink, std::vector<uint8_t>(1000, 0xEE));  // nothing placed
}

TEST_F(QpCraftedReadResponseTest, SinkDeregisteredBetweenSegmentsIsNotWritten) {
  const std::vector<uint8_t> data(500, 0xAB);
  feed(response(0, false), data);
  ASSERT_EQ(q.reg.deregister(sink_key), 0);
  feed(response(500, true), data);
  expect({TermLayer::Rdma, term::kRdmaLocalCatastrophic, 0}, false);
  const auto sc = q.poll_send();
  ASSERT_EQ(sc.size(), 1u);
  EXPECT_EQ(sc[0].status, WcStatus::LocProtErr);
  EXPECT_EQ(sink[499], 0xAB);
  EXPECT_EQ(sink[500], 0xEE);  // nothing of the second segment
}

TEST_F(QpCraftedReadResponseTest, WholeResponseInTwoSegmentsCompletes) {
  const std::vector<uint8_t> data(500, 0xAB);
  feed(response(0, false), data);
  feed(response(500, true), data);
  EXPECT_EQ(q.qp->state(), QpState::Rts);
  const auto sc = q.poll_send();
  ASSERT_EQ(sc.size(), 1u);
  EXPECT_EQ(sc[0].status, WcStatus::Success);
  EXPECT_EQ(sink, std::vector<uint8_t>(1000, 0xAB));
}

// A peer names registered memory the application has since unmapped or made read-only (legal
// with on-demand paging, and registration pins nothing): the stream ends with the Terminate for
// that buffer and the process lives. With and without CRC (staged and copy placement).
class QpCraftedFaultTest : public QpCraftedTest, public testing::WithParamInterface<bool> {
 protected:
  static constexpr size_t kPage = 4096;
  QpCraftedFaultTest() : QpCraftedTest(false, GetParam()) {
    map_ = static_cast<uint8_t*>(
        mmap(nullptr, 2 * kPage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
    EXPECT_NE(map_, MAP_FAILED);
    int err = 0;
    key_ = q.reg.register_region(q.pd, map_, 2 * kPage, reinterpret_cast<uint64_t>(map_),
                                 memory::kLocalWrite | memory::kRemoteWrite | memory::kRemoteRead,
                                 &err);
    EXPECT_NE(key_, 0u);
  }
  ~QpCraftedFaultTest() override { munmap(map_, 2 * kPage); }
  uint64_t second_page() const { return reinterpret_cast<uint64_t>(map_) + kPage; }
  wire::SegmentHeader write_to(uint64_t to) const {
    return tagged_hdr(wire::Opcode::RdmaWrite, key_, to, true);
  }
  // The Terminate about an accepted Read Request found unanswerable later carries the Read
  // Request's headers as it came (M, D, R; RFC 5040 §4.8), as siw sends them.
  void expect_read_request_echoed(wire::TerminateCause cause, std::span<const uint8_t> rr) {
    expect_read_request_echoed(sent_terminate(), cause, rr);
  }
  void expect_read_request_echoed(const wire::TerminateMessage& t, wire::TerminateCause cause,
                                  std::span<const uint8_t> rr) {
    EXPECT_EQ(t.cause, cause) << wire::terminate_cause_name(t.cause);
    EXPECT_TRUE(t.m && t.d);
    ASSERT_EQ(t.ddp_header_size, last_header_.size());
    EXPECT_EQ(0, std::memcmp(t.ddp_header, last_header_.data(), last_header_.size()));
    EXPECT_EQ(t.ddp_segment_length, last_header_.size() + rr.size());
    EXPECT_TRUE(t.r);
    EXPECT_EQ(0, std::memcmp(t.rdma_header, rr.data(), rr.size()));
  }
  // The second page filled with `fill`, and a 512-octet Read Request of it accepted; returns
  // the request's RDMA header.
  std::vector<uint8_t> read_of_second_page(uint8_t fill) {
    std::memset(map_ + kPage, fill, kPage);
    std::vector<uint8_t> rr(wire::kReadRequestHeaderSize);
    wire::encode_read_request(rr.data(), {0x77, 0, 512, key_, second_page()});
    feed(read_hdr(1), rr);
    return rr;
  }
  uint8_t* map_ = nullptr;
  memory::Stag key_ = 0;
};

TEST_P(QpCraftedFaultTest, WriteToUnmappedPageIsTaggedError) {
  ASSERT_EQ(munmap(map_ + kPage, kPage), 0);
  const std::vector<uint8_t> data(64, 0xAB);
  feed(write_to(second_page() + 8), data);
  expect({TermLayer::Ddp, term::kDdpTagged, term::kDdpInvalidStag}, true);
}

TEST_P(QpCraftedFaultTest, WriteToReadOnlyPageIsTaggedError) {
  ASSERT_EQ(mprotect(map_ + kPage, kPage, PROT_READ), 0);
  const std::vector<uint8_t> data(64, 0xAB);
  feed(write_to(second_page() - 32), data);  // straddles the writable and read-only pages
  expect({TermLayer::Ddp, term::kDdpTagged, term::kDdpInvalidStag}, true);
}

TEST_P(QpCraftedFaultTest, SendIntoUnmappedReceiveBufferIsLocalProtectionError) {
  RecvWr r;
  r.wr_id = 4;
  r.num_sge = 1;
  r.sg_list[0] = {second_page(), 256, key_};
  ASSERT_EQ(q.rq.post(r), 0);
  ASSERT_EQ(munmap(map_ + kPage, kPage), 0);
  const std::vector<uint8_t> data(100, 0xAB);
  feed(send_hdr(), data);
  expect({TermLayer::Rdma, term::kRdmaLocalCatastrophic, 0}, false);
  const auto rc = q.poll_recv();
  ASSERT_EQ(rc.size(), 1u);
  EXPECT_EQ(rc[0].wr_id, 4u);
  EXPECT_EQ(rc[0].status, WcStatus::LocProtErr);
}

// With CRC the engine reads the source for the CRC (fault-safe): Remote Protection
// Error. Without, only the kernel's sendmsg reads it, and refuses with EFAULT (the connection
// then fails); either way the process lives.
TEST_P(QpCraftedFaultTest, ReadOfUnmappedSourceNeverFaultsTheProcess) {
  std::vector<uint8_t> rr(wire::kReadRequestHeaderSize);
  wire::encode_read_request(rr.data(), {0x77, 0, 512, key_, second_page()});
  feed(read_hdr(1), rr);  // accepted: the source is mapped now
  ASSERT_EQ(munmap(map_ + kPage, kPage), 0);
  if (crc_) {
    expect_read_request_echoed({TermLayer::Rdma, term::kRdmaRemoteProtection, term::kAccessRights},
                               rr);
    return;
  }
  const std::span<const iovec> iov = q.qp->tx_pending();
  size_t total = 0;
  for (const iovec& v : iov) total += v.iov_len;
  int sp[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sp), 0);
  const ssize_t r = writev(sp[0], iov.data(), static_cast<int>(iov.size()));
  const int err = errno;
  close(sp[0]);
  close(sp[1]);
  if (r < 0)
    EXPECT_EQ(err, EFAULT);
  else
    EXPECT_LT(static_cast<size_t>(r), total);
}

// A response small enough to be copied into its FPDU is read by the engine with or without CRC:
// Remote Protection Error, never a signal.
TEST_P(QpCraftedFaultTest, SmallReadOfUnmappedSourceIsRemoteProtectionError) {
  std::vector<uint8_t> rr(wire::kReadRequestHeaderSize);
  wire::encode_read_request(rr.data(), {0x77, 0, 8, key_, second_page()});
  feed(read_hdr(1), rr);
  ASSERT_EQ(munmap(map_ + kPage, kPage), 0);
  expect_read_request_echoed({TermLayer::Rdma, term::kRdmaRemoteProtection, term::kAccessRights},
                             rr);
}

TEST_P(QpCraftedFaultTest, ReadSourceDeregisteredAfterAcceptanceIsNotRead) {
  std::vector<uint8_t> rr(wire::kReadRequestHeaderSize);
  wire::encode_read_request(rr.data(), {0x77, 0, 512, key_, second_page()});
  feed(read_hdr(1), rr);
  ASSERT_EQ(q.reg.deregister(key_), 0);
  expect_read_request_echoed({TermLayer::Rdma, term::kRdmaRemoteProtection, term::kInvalidStag},
                             rr);
}

// The kernel reads a Read Response's payload from the region when the write carrying it runs:
// a source deregistered after its segment was built, but before the lower layer took the
// segment, is not read again (RFC 5041 §8.3.1(6)). Here none of it was taken: the Terminate
// replaces it.
TEST_P(QpCraftedFaultTest, ReadSourceDeregisteredBeforeItsBuiltResponseIsSentIsNotRead) {
  const std::vector<uint8_t> rr = read_of_second_page(0x5A);
  ASSERT_FALSE(q.qp->tx_pending().empty());  // the response is built
  q.qp->tx_commit(0);                        // and the socket took none of it
  ASSERT_EQ(q.reg.deregister(key_), 0);
  std::memset(map_ + kPage, 0xC3, kPage);  // the memory's next use
  expect_read_request_echoed({TermLayer::Rdma, term::kRdmaRemoteProtection, term::kInvalidStag},
                             rr);
}

// An invalidation is the same to a built response as a deregistration: a Local Invalidate of
// the source, run in its turn in the send queue after the response was built, leaves nothing of
// the region to be read.
TEST_P(QpCraftedFaultTest, ReadSourceInvalidatedBeforeItsBuiltResponseIsSentIsNotRead) {
  const std::vector<uint8_t> rr = read_of_second_page(0x5A);
  ASSERT_FALSE(q.qp->tx_pending().empty());
  q.qp->tx_commit(0);
  SendWr inv;
  inv.wr_id = 8;
  inv.opcode = WrOpcode::LocalInv;
  inv.invalidate_stag = key_;
  ASSERT_EQ(q.qp->post_send(inv), 0);
  expect_read_request_echoed({TermLayer::Rdma, term::kRdmaRemoteProtection, term::kInvalidStag},
                             rr);
  EXPECT_EQ(q.reg.check(key_, q.pd, 0, memory::kRemoteRead, second_page(), 1).result,
            memory::AccessResult::InvalidStag);
}

// Part of the segment is on the wire: it cannot be finished without the source, and a Terminate
// behind it would be read as its rest, so nothing more goes out; the stream ends inside the frame
// (the peer's Read then fails, RFC 5044 §8) and the QP fails as for a broken connection.
TEST_P(QpCraftedFaultTest, ReadSourceDeregisteredWhileItsResponseIsPartlySentIsNotReadAgain) {
  read_of_second_page(0x5A);
  constexpr size_t kTaken = 100;
  size_t pending = 0;
  for (const iovec& v : q.qp->tx_pending()) pending += v.iov_len;
  ASSERT_GT(pending, kTaken);
  q.qp->tx_commit(kTaken);
  ASSERT_EQ(q.reg.deregister(key_), 0);
  std::memset(map_ + kPage, 0xC3, kPage);
  EXPECT_EQ(sent_bytes().size(), 0u) << "the frame was finished, or a Terminate followed it";
  EXPECT_EQ(q.qp->state(), QpState::Error);
  EXPECT_TRUE(q.qp->tx_want_shutdown());
  EXPECT_TRUE(q.has_event(QpEvent::LlpError));
  EXPECT_FALSE(q.qp->terminate_sent().has_value());
}

// A local source the application unmapped after posting (legal: registration pins nothing) is
// read by the engine wherever it reads payload (a small one copied into its FPDU; any with CRC):
// the work request completes with a local protection error and the stream ends with RDMAP
// "Local Catastrophic", never a signal. A large payload without CRC is read only by the kernel.
class QpCraftedLocalSourceTest : public QpCraftedFaultTest {
 protected:
  void SetUp() override {
    // A responder sends nothing before the initiator's first FPDU (RFC 5044 §7.1.2).
    feed(write_to(reinterpret_cast<uint64_t>(map_)), std::vector<uint8_t>(8, 1));
  }
  void post(WrOpcode op, uint64_t addr, uint32_t len) {
    SendWr w;
    w.wr_id = 9;
    w.opcode = op;
    w.num_sge = 1;
    w.sg_list[0] = {addr, len, key_};
    w.remote_stag = 0x1234;
    w.remote_addr = 0x10000;
    ASSERT_EQ(q.qp->post_send(w), 0);
  }
  // The octets the Qp hands the LLP now (building them, not reading them).
  size_t pending_octets() {
    size_t total = 0;
    for (const iovec& v : q.qp->tx_pending()) total += v.iov_len;
    return total;
  }
  void expect_local_protection_error() {
    const auto sc = q.poll_send();
    ASSERT_EQ(sc.size(), 1u);
    EXPECT_EQ(sc[0].wr_id, 9u);
    EXPECT_EQ(sc[0].status, WcStatus::LocProtErr);
  }
};

TEST_P(QpCraftedLocalSourceTest, SmallSendFromUnmappedSource) {
  post(WrOpcode::Send, second_page(), 8);
  ASSERT_EQ(munmap(map_ + kPage, kPage), 0);
  expect({TermLayer::Rdma, term::kRdmaLocalCatastrophic, 0}, false);
  expect_local_protection_error();
}

TEST_P(QpCraftedLocalSourceTest, WriteFromUnmappedSource) {
  post(WrOpcode::RdmaWrite, second_page(), 1000);
  ASSERT_EQ(munmap(map_ + kPage, kPage), 0);
  if (!crc_) {
    // The FPDU references the source; the kernel refuses it (see the Read test above).
    EXPECT_GT(pending_octets(), 1000u);
    return;
  }
  expect({TermLayer::Rdma, term::kRdmaLocalCatastrophic, 0}, false);
  expect_local_protection_error();
}

// The Terminate replaces every segment not yet handed to the LLP: the peer never sees the first
// segment of a message whose second cannot be read.
TEST_P(QpCraftedLocalSourceTest, WriteWhoseSecondSegmentIsUnmapped) {
  post(WrOpcode::RdmaWrite, second_page() - 1000, 2000);  // two segments (MULPDU 1448)
  ASSERT_EQ(munmap(map_ + kPage, kPage), 0);
  if (!crc_) {
    EXPECT_GT(pending_octets(), 2000u);  // both segments reference the source, for the kernel
    return;
  }
  expect({TermLayer::Rdma, term::kRdmaLocalCatastrophic, 0}, false);
  expect_local_protection_error();
}

// An error while an FPDU is partly on the wire keeps its unsent rest (copied out of the
// application's memory, to finish the framing): a source unmapped meanwhile ends the stream
// inside that FPDU instead of killing the process.
TEST_P(QpCraftedLocalSourceTest, ErrorWithAPartlySentFpduFromAnUnmappedSource) {
  post(WrOpcode::RdmaWrite, second_page(), 1000);
  ASSERT_GT(pending_octets(), 1000u);
  q.qp->tx_commit(20);  // the headers and a little payload
  ASSERT_EQ(munmap(map_ + kPage, kPage), 0);
  wire::SegmentHeader h = send_hdr();  // the peer's Terminate ends the QP
  h.rdmap_control = wire::rdmap_control(wire::Opcode::Terminate);
  h.qn = wire::kQnTerminate;
  wire::TerminateMessage t{};
  t.cause = {TermLayer::Rdma, term::kRdmaRemoteOperation, term::kCatastrophicStream};
  std::vector<uint8_t> body(wire::terminate_size(t));
  wire::encode_terminate(body, t);
  feed(h, body);
  EXPECT_EQ(q.qp->state(), QpState::Error);
  EXPECT_TRUE(q.qp->tx_pending().empty());
  const auto sc = q.poll_send();
  ASSERT_EQ(sc.size(), 1u);
  EXPECT_EQ(sc[0].status, WcStatus::WrFlushErr);
}

// The lower layer could not read the source (the kernel's EFAULT): the Write it belongs to
// completes with a local protection error, the rest is flushed.
TEST_P(QpCraftedLocalSourceTest, TransmitFaultIsALocalProtectionError) {
  post(WrOpcode::RdmaWrite, second_page(), 1000);
  post(WrOpcode::Send, reinterpret_cast<uint64_t>(map_), 8);
  ASSERT_FALSE(q.qp->tx_pending().empty());
  q.qp->tx_commit(10);
  q.qp->tx_fault();
  EXPECT_EQ(q.qp->state(), QpState::Error);
  const auto sc = q.poll_send();
  ASSERT_EQ(sc.size(), 2u);
  EXPECT_EQ(sc[0].status, WcStatus::LocProtErr);
  EXPECT_EQ(sc[1].status, WcStatus::WrFlushErr);
}

INSTANTIATE_TEST_SUITE_P(CrcOnOff, QpCraftedLocalSourceTest, testing::Bool(),
                         [](const testing::TestParamInfo<bool>& i) {
                           return i.param ? "Crc" : "NoCrc";
                         });

INSTANTIATE_TEST_SUITE_P(CrcOnOff, QpCraftedFaultTest, testing::Bool(),
                         [](const testing::TestParamInfo<bool>& i) {
                           return i.param ? "Crc" : "NoCrc";
                         });

class QpCraftedMarkerTest : public QpCraftedTest {
 protected:
  QpCraftedMarkerTest() : QpCraftedTest(true) {}
};

TEST_F(QpCraftedMarkerTest, ValidMarkersThenBadFpduPtr) {
  RecvWr r;
  std::vector<uint8_t> inbox(2000);
  const memory::Stag k = q.reg_mr(inbox, memory::kLocalWrite);
  r.num_sge = 1;
  r.sg_list[0] = sge_of(inbox, k);
  ASSERT_EQ(q.rq.post(r), 0);
  ASSERT_EQ(q.rq.post(r), 0);
  std::vector<uint8_t> payload(1200, 9);
  feed(send_hdr(1), payload);  // spans markers at 0, 512 and 1024
  EXPECT_EQ(q.qp->state(), QpState::Rts);
  ASSERT_EQ(q.poll_recv().size(), 1u);
  EXPECT_EQ(0, std::memcmp(inbox.data(), payload.data(), payload.size()));
  // Next FPDU with a corrupted marker pointer (CRC recomputed, so only the marker is wrong).
  wire::SegmentHeader h = send_hdr(2);
  std::vector<uint8_t> ulpdu(18);
  wire::encode_segment_header(ulpdu.data(), h);
  ulpdu.resize(18 + 600, 1);
  std::vector<uint8_t> fpdu(wire::fpdu_size_with_markers(pos_, ulpdu.size(), true));
  wire::encode_fpdu(fpdu, pos_, ulpdu, false, true);
  const size_t m = wire::bytes_to_next_marker(pos_);
  fpdu[m + 3] ^= 0x04;  // FPDUPTR off by 4
  q.qp->rx_feed(fpdu);
  const wire::TerminateMessage t = sent_terminate();
  EXPECT_EQ(t.cause, (wire::TerminateCause{TermLayer::Llp, term::kLlpMpa, term::kMpaMarker}));
}

}  // namespace
}  // namespace uiw::engine::test
