// Engine over the SCTP adaptation (RFC 5043): two Qps in Llp::Sctp mode joined by an in-memory
// message pipe that keeps message boundaries and PPIDs and may reorder (unordered chunks).
#include <gtest/gtest.h>

#include <algorithm>
#include <deque>

#include "test_util.h"
#include "unit/engine/qp_pair.h"
#include "wire/bytes.h"
#include "wire/ddp.h"
#include "wire/rdmap.h"
#include "wire/sctp.h"
#include "wire/terminate.h"

namespace uiw::engine::test {
namespace {

using memory::kLocalWrite;
using memory::kRemoteRead;
using memory::kRemoteWrite;

struct Msg {
  uint32_t ppid;
  std::vector<uint8_t> bytes;
};

// Moves whole messages. With `reverse`, every batch of up to `batch` messages is delivered in
// reverse order, as unordered SCTP delivery may do after a loss.
struct MsgPump {
  MsgPump(Side& x, Side& y) : a(x), b(y) {}
  Side& a;
  Side& b;
  bool reverse = false;
  size_t batch = 7;
  std::vector<Msg> log_ab, log_ba;  // everything each side sent, in send order
  bool fin_ab = false, fin_ba = false;

  size_t move(Side& x, Side& y, std::vector<Msg>& log, bool& fin) {
    std::vector<Msg> out;
    while (out.size() < batch) {
      std::span<const iovec> iov = x.qp->tx_pending();
      if (iov.empty()) break;
      Msg m{0, {}};
      for (const iovec& v : iov) {
        const auto* p = static_cast<const uint8_t*>(v.iov_base);
        m.bytes.insert(m.bytes.end(), p, p + v.iov_len);
      }
      EXPECT_GE(m.bytes.size(), 4u);
      m.ppid = sctp_ppid_of(m.bytes.at(2));
      x.qp->tx_commit(m.bytes.size());
      out.push_back(std::move(m));
    }
    // An SCTP SHUTDOWN: the peer reads end-of-stream after the last message.
    const bool shut = !fin && x.qp->tx_want_shutdown() && x.qp->tx_idle();
    if (shut) fin = true;
    log.insert(log.end(), out.begin(), out.end());
    if (reverse) std::reverse(out.begin(), out.end());
    for (const Msg& m : out) y.qp->rx_feed_message(m.ppid, m.bytes);
    if (shut) y.qp->rx_eof();
    return out.size() + shut;
  }
  void run() {
    for (int i = 0; i < 10000000; ++i)
      if (move(a, b, log_ab, fin_ab) + move(b, a, log_ba, fin_ba) == 0) return;
  }
};

void sctp_connect(Side& a, Side& b, uint32_t max_segment) {
  ConnParams p;
  p.llp = Llp::Sctp;
  p.mulpdu = max_segment;
  p.ord = p.ird = 8;
  p.crc = true;  // ignored in SCTP mode: no MPA CRC on the wire
  connect(a, b, p);
}

// Every message is one DDP Segment Chunk: DDP-SSN from 1 without gaps (RFC 5043 §5.2.1, the
// session control exchange used 0), a decodable DDP header, at most the maximum segment size.
void expect_chunks(const std::vector<Msg>& log, uint32_t max_segment) {
  uint16_t ssn = 1;
  for (const Msg& m : log) {
    uint16_t got = 0;
    if (m.ppid == wire::kPpidSessionControl) {
      wire::SessionControl sc;
      ASSERT_EQ(wire::decode_session_control(m.bytes, &sc), wire::SctpDecodeError::None);
      EXPECT_EQ(sc.function, wire::SessionFunction::Terminate);
      EXPECT_EQ(sc.ddp_ssn, ssn++);
      continue;
    }
    std::span<const uint8_t> seg;
    ASSERT_EQ(wire::decode_ddp_segment_chunk(m.bytes, &got, &seg), wire::SctpDecodeError::None);
    EXPECT_EQ(got, ssn++);
    EXPECT_LE(seg.size(), max_segment);
    wire::SegmentHeader h;
    EXPECT_GT(wire::decode_segment_header(seg, &h), 0u);
    EXPECT_EQ(h.ddp_version, 1);
  }
}

struct Mode {
  uint32_t max_segment;
  bool reverse;
};

class QpSctpOpsTest : public testing::TestWithParam<Mode> {
 protected:
  QpSctpOpsTest() : a(1), b(2), pump{a, b} {
    pump.reverse = GetParam().reverse;
    sctp_connect(a, b, GetParam().max_segment);
  }
  Side a, b;
  MsgPump pump;
};

TEST_P(QpSctpOpsTest, SendSizesDeliveredByteForByte) {
  const uint32_t mul = GetParam().max_segment;
  const std::vector<size_t> sizes = {0, 1, mul - 19, mul - 18, mul - 17, mul, 3 * mul + 5, 70000};
  std::vector<std::vector<uint8_t>> src, dst;
  for (size_t i = 0; i < sizes.size(); ++i) {
    src.emplace_back(sizes[i]);
    fill_pattern(src.back(), static_cast<uint32_t>(i));
    dst.emplace_back(sizes[i] + 64, 0xEE);
    RecvWr r;
    r.wr_id = 100 + i;
    r.num_sge = 1;
    r.sg_list[0] = sge_of(dst.back(), b.reg_mr(dst.back(), kLocalWrite));
    ASSERT_EQ(b.qp->post_recv(r), 0);
  }
  for (size_t i = 0; i < sizes.size(); ++i) {
    SendWr w;
    w.wr_id = i;
    w.flags = kSendSignaled;
    w.num_sge = sizes[i] ? 1 : 0;
    w.sg_list[0] = sge_of(src[i], a.reg_mr(src[i], 0));
    ASSERT_EQ(a.qp->post_send(w), 0);
  }
  pump.run();
  auto sc = a.poll_send();
  auto rc = b.poll_recv();
  ASSERT_EQ(sc.size(), sizes.size());
  ASSERT_EQ(rc.size(), sizes.size());
  for (size_t i = 0; i < sizes.size(); ++i) {
    EXPECT_EQ(sc[i].status, WcStatus::Success);
    EXPECT_EQ(rc[i].wr_id, 100 + i);
    EXPECT_EQ(rc[i].status, WcStatus::Success);
    EXPECT_EQ(rc[i].byte_len, sizes[i]);
    EXPECT_TRUE(uiw::test::same_bytes(dst[i].data(), src[i].data(), sizes[i]));
    for (size_t g = sizes[i]; g < dst[i].size(); ++g) ASSERT_EQ(dst[i][g], 0xEE) << "guard " << g;
  }
  EXPECT_EQ(a.qp->state(), QpState::Rts);
  EXPECT_EQ(b.qp->state(), QpState::Rts);
  EXPECT_EQ(b.qp->sctp_held(), 0u);
  expect_chunks(pump.log_ab, mul);
  EXPECT_EQ(pump.log_ab.size(), a.qp->stats().tx_fpdus);
}

TEST_P(QpSctpOpsTest, WriteThenReadBackManyOutstanding) {
  std::vector<uint8_t> remote(300000, 0), src(250000);
  fill_pattern(src, 4);
  const memory::Stag rkey = b.reg_mr(remote, kRemoteWrite | kRemoteRead | kLocalWrite);
  SendWr w;
  w.wr_id = 1;
  w.opcode = WrOpcode::RdmaWrite;
  w.flags = kSendSignaled;
  w.num_sge = 1;
  w.sg_list[0] = sge_of(src, a.reg_mr(src, 0));
  w.remote_stag = rkey;
  w.remote_addr = reinterpret_cast<uint64_t>(remote.data()) + 9;
  ASSERT_EQ(a.qp->post_send(w), 0);
  constexpr int kReads = 20;  // more than ORD 8
  std::vector<std::vector<uint8_t>> sinks;
  for (int i = 0; i < kReads; ++i) sinks.emplace_back(10000 + 997 * i, 0);
  for (int i = 0; i < kReads; ++i) {
    SendWr r;
    r.wr_id = 10 + i;
    r.opcode = WrOpcode::RdmaRead;
    r.flags = kSendSignaled;
    r.num_sge = 1;
    r.sg_list[0] = sge_of(sinks[i], a.reg_mr(sinks[i], kLocalWrite));
    r.remote_stag = rkey;
    r.remote_addr = reinterpret_cast<uint64_t>(remote.data()) + 9 + 1000 * i;
    ASSERT_EQ(a.qp->post_send(r), 0);
  }
  pump.run();
  auto sc = a.poll_send();
  ASSERT_EQ(sc.size(), 1u + kReads);
  EXPECT_EQ(sc[0].opcode, WcOpcode::RdmaWrite);
  EXPECT_TRUE(uiw::test::same_bytes(remote.data() + 9, src.data(), src.size()));
  for (int i = 0; i < kReads; ++i) {
    EXPECT_EQ(sc[1 + i].wr_id, 10u + i);
    EXPECT_EQ(sc[1 + i].status, WcStatus::Success);
    EXPECT_TRUE(uiw::test::same_bytes(sinks[i].data(), src.data() + 1000 * i, sinks[i].size()));
  }
  expect_chunks(pump.log_ab, GetParam().max_segment);
  expect_chunks(pump.log_ba, GetParam().max_segment);
}

TEST_P(QpSctpOpsTest, GracefulCloseEndsWithSessionTerminate) {
  std::vector<uint8_t> inbox(16);
  RecvWr r;
  r.wr_id = 3;
  r.num_sge = 1;
  r.sg_list[0] = sge_of(inbox, b.reg_mr(inbox, kLocalWrite));
  ASSERT_EQ(b.qp->post_recv(r), 0);
  a.qp->close();
  pump.run();
  // RFC 5043 §6.2: the last chunk a sends is a Session Terminate (PPID 17), DDP-SSN 1 here.
  ASSERT_EQ(pump.log_ab.size(), 1u);
  EXPECT_EQ(pump.log_ab[0].ppid, wire::kPpidSessionControl);
  // DDP-SSN 0x0001 | Function Code 0x0004 (Terminate) | no Private Data
  EXPECT_EQ(pump.log_ab[0].bytes, (std::vector<uint8_t>{0x00, 0x01, 0x00, 0x04}));
  EXPECT_TRUE(b.has_event(QpEvent::Closed));
  auto rc = b.poll_recv();
  ASSERT_EQ(rc.size(), 1u);
  EXPECT_EQ(rc[0].status, WcStatus::WrFlushErr);
  EXPECT_TRUE(pump.fin_ab);
  EXPECT_TRUE(a.qp->tx_pending().empty());  // only once
}

INSTANTIATE_TEST_SUITE_P(Modes, QpSctpOpsTest,
                         testing::Values(Mode{1452, false}, Mode{1452, true}, Mode{516, true},
                                         Mode{9000, false}, Mode{64768, true}),
                         [](const testing::TestParamInfo<Mode>& i) {
                           return "Seg" + std::to_string(i.param.max_segment) +
                                  (i.param.reverse ? "_Reordered" : "");
                         });

class QpSctpTest : public testing::Test {
 protected:
  QpSctpTest() : a(1), b(2), pump{a, b} { sctp_connect(a, b, 1452); }
  // b's Terminate, once it is the only thing b sent.
  wire::TerminateMessage terminate_from_b() {
    pump.run();
    EXPECT_TRUE(b.has_event(QpEvent::TerminateSent));
    EXPECT_TRUE(a.has_event(QpEvent::TerminateReceived));
    EXPECT_TRUE(a.qp->terminate_received().has_value());
    return a.qp->terminate_received().value_or(wire::TerminateMessage{});
  }
  Side a, b;
  MsgPump pump;
};

TEST_F(QpSctpTest, SendChunkIsByteExact) {
  std::vector<uint8_t> src = {0xA1, 0xB2, 0xC3, 0xD4, 0xE5}, dst(8);
  RecvWr r;
  r.num_sge = 1;
  r.sg_list[0] = sge_of(dst, b.reg_mr(dst, kLocalWrite));
  ASSERT_EQ(b.qp->post_recv(r), 0);
  SendWr w;
  w.flags = kSendSolicited;
  w.num_sge = 1;
  w.sg_list[0] = sge_of(src, a.reg_mr(src, 0));
  ASSERT_EQ(a.qp->post_send(w), 0);
  pump.run();
  ASSERT_EQ(pump.log_ab.size(), 1u);
  EXPECT_EQ(pump.log_ab[0].ppid, 16u);
  const std::vector<uint8_t> expect = {
      0x00, 0x01,                    // DDP-SSN 1 (RFC 5043 §5.2.2); no MPA length
      0x41,                          // DDP control: T=0, L=1, DV=1 (RFC 5041 §4.1)
      0x45,                          // RDMAP control: RV=1, opcode 5 Send with Solicited Event
      0x00, 0x00, 0x00, 0x00,        // Invalidate STag (unused)
      0x00, 0x00, 0x00, 0x00,        // QN 0 (Send queue)
      0x00, 0x00, 0x00, 0x01,        // MSN 1
      0x00, 0x00, 0x00, 0x00,        // MO 0
      0xA1, 0xB2, 0xC3, 0xD4, 0xE5,  // payload; no pad, no CRC
  };
  EXPECT_EQ(pump.log_ab[0].bytes, expect);
  EXPECT_EQ(dst[4], 0xE5);
}

TEST_F(QpSctpTest, ReadRequestChunkIsByteExact) {
  std::vector<uint8_t> sink(0x20);
  SendWr w;
  w.opcode = WrOpcode::RdmaRead;
  w.num_sge = 1;
  w.sg_list[0] = sge_of(sink, a.reg_mr(sink, kLocalWrite));
  w.remote_stag = 0x11223344;
  w.remote_addr = 0x0102030405060708;
  ASSERT_EQ(a.qp->post_send(w), 0);
  std::span<const iovec> iov = a.qp->tx_pending();
  std::vector<uint8_t> got;
  for (const iovec& v : iov)
    got.insert(got.end(), static_cast<uint8_t*>(v.iov_base),
               static_cast<uint8_t*>(v.iov_base) + v.iov_len);
  ASSERT_EQ(got.size(), 2u + 18 + 28);
  const std::vector<uint8_t> head = {
      0x00, 0x01,              // DDP-SSN 1
      0x41,                    // DDP control: untagged, L=1, DV=1
      0x41,                    // RDMAP control: RV=1, opcode 1 Read Request
      0x00, 0x00, 0x00, 0x00,  // Invalidate STag
      0x00, 0x00, 0x00, 0x01,  // QN 1 (Read Request queue)
      0x00, 0x00, 0x00, 0x01,  // MSN 1
      0x00, 0x00, 0x00, 0x00,  // MO 0
  };
  EXPECT_TRUE(std::equal(head.begin(), head.end(), got.begin()));
  // Read Request header (RFC 5040 §4.4): sink STag (engine's own) | sink TO 0 | size 0x20 |
  // source STag | source TO.
  EXPECT_EQ(wire::load_be64(got.data() + 24), 0u);
  EXPECT_EQ(wire::load_be32(got.data() + 32), 0x20u);
  EXPECT_EQ(wire::load_be32(got.data() + 36), 0x11223344u);
  EXPECT_EQ(wire::load_be64(got.data() + 40), 0x0102030405060708u);
  a.qp->tx_commit(got.size());
  EXPECT_TRUE(a.qp->tx_pending().empty());
}

TEST_F(QpSctpTest, TerminateTravelsAsDdpSegmentThenSessionTerminate) {
  std::vector<uint8_t> src(100);
  SendWr w;
  w.opcode = WrOpcode::RdmaWrite;
  w.num_sge = 1;
  w.sg_list[0] = sge_of(src, a.reg_mr(src, 0));
  w.remote_stag = 0x00BAD0;
  w.remote_addr = 0;
  ASSERT_EQ(a.qp->post_send(w), 0);
  const wire::TerminateMessage t = terminate_from_b();
  EXPECT_EQ(t.cause.layer, wire::TermLayer::Ddp);
  EXPECT_EQ(t.cause.etype, wire::term::kDdpTagged);
  EXPECT_EQ(t.cause.code, wire::term::kDdpInvalidStag);
  // RDMAP Terminate (a DDP segment, PPID 16, SSN 1), then Session Terminate (PPID 17, SSN 2).
  ASSERT_EQ(pump.log_ba.size(), 2u);
  EXPECT_EQ(pump.log_ba[0].ppid, wire::kPpidDdpSegment);
  EXPECT_EQ(wire::rdmap_opcode(pump.log_ba[0].bytes[3]),
            static_cast<uint8_t>(wire::Opcode::Terminate));
  EXPECT_EQ(pump.log_ba[1].ppid, wire::kPpidSessionControl);
  EXPECT_EQ(pump.log_ba[1].bytes, (std::vector<uint8_t>{0x00, 0x02, 0x00, 0x04}));
  EXPECT_EQ(b.qp->state(), QpState::Error);
  expect_chunks(pump.log_ba, 1452);
}

// Chunks built but never sent when an error strikes are dropped, and so are their DDP-SSNs: the
// Terminate follows the last chunk sent without a gap (RFC 5043 §5.2.1), or the peer would hold
// it for chunks that never come.
TEST_F(QpSctpTest, TerminateAfterUnsentChunksKeepsTheDdpSsnsGapless) {
  std::vector<uint8_t> src(64);
  const memory::Stag stag = b.reg_mr(src, 0);
  for (int i = 0; i < 3; ++i) {
    SendWr w;
    w.num_sge = 1;
    w.sg_list[0] = sge_of(src, stag);
    ASSERT_EQ(b.qp->post_send(w), 0);
  }
  ASSERT_FALSE(b.qp->tx_pending().empty());  // built with DDP-SSNs 1-3, none sent
  // a's Write of 4 octets to an STag b never registered: b terminates (DDP tagged).
  const std::vector<uint8_t> bad_write = {0x00, 0x01, 0xC1, 0x40, 0x00, 0xBA, 0xD0, 0x00, 0, 0,
                                          0,    0,    0,    0,    0,    0,    1,    2,    3, 4};
  b.qp->rx_feed_message(wire::kPpidDdpSegment, bad_write);
  ASSERT_TRUE(b.qp->terminate_sent().has_value());
  pump.run();
  ASSERT_EQ(pump.log_ba.size(), 2u);
  EXPECT_EQ(wire::rdmap_opcode(pump.log_ba[0].bytes[3]),
            static_cast<uint8_t>(wire::Opcode::Terminate));
  expect_chunks(pump.log_ba, 1452);  // SSN 1 for the Terminate, 2 for the Session Terminate
  EXPECT_TRUE(a.has_event(QpEvent::TerminateReceived));
}

// Crafted messages from a hostile peer, delivered to b.
void expect_stream_lost(Side& b) {
  ASSERT_TRUE(b.qp->terminate_sent().has_value());
  const wire::TerminateCause c = b.qp->terminate_sent()->cause;
  EXPECT_EQ(c.layer, wire::TermLayer::Rdma);
  EXPECT_EQ(c.etype, wire::term::kRdmaRemoteOperation);
  EXPECT_EQ(c.code, wire::term::kCatastrophicStream);
}

TEST_F(QpSctpTest, DdpSsnBehindOrDuplicateTerminates) {
  // A zero-length Write (DDP-SSN 1) is fine; its duplicate is "behind" the expected 2.
  const std::vector<uint8_t> write0 = {0x00, 0x01, 0xC1, 0x40, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
  b.qp->rx_feed_message(16, write0);
  EXPECT_FALSE(b.qp->terminate_sent().has_value());
  b.qp->rx_feed_message(16, write0);
  expect_stream_lost(b);
}

TEST_F(QpSctpTest, DdpSsnFarAheadTerminates) {
  std::vector<uint8_t> write0 = {0x80, 0x01, 0xC1, 0x40, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
  b.qp->rx_feed_message(16, write0);  // 0x8001 - 1 = 32768 ahead: outside RFC 5043 §10 window
  expect_stream_lost(b);
  EXPECT_EQ(b.qp->sctp_held(), 0u);
}

TEST_F(QpSctpTest, HeldMessageWaitsForTheGap) {
  std::vector<uint8_t> w2 = {0x00, 0x02, 0xC1, 0x40, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
  std::vector<uint8_t> w1 = w2;
  w1[1] = 0x01;
  b.qp->rx_feed_message(16, w2);
  EXPECT_EQ(b.qp->sctp_held(), 1u);
  b.qp->rx_feed_message(16, w1);
  EXPECT_EQ(b.qp->sctp_held(), 0u);
  EXPECT_FALSE(b.qp->terminate_sent().has_value());
  EXPECT_EQ(b.qp->state(), QpState::Rts);
}

// Over SCTP a Read Response segment is one message, sent whole or not at all: a source
// deregistered after its segments were built, before any was sent, is not read; they are
// dropped with their DDP-SSNs and the Terminate follows the last message sent.
TEST_F(QpSctpTest, ReadSourceDeregisteredBeforeItsBuiltResponseIsSentIsNotRead) {
  std::vector<uint8_t> src(8000, 0x5A), sink(8000, 0);
  const memory::Stag skey = b.reg_mr(src, kRemoteRead);
  SendWr w;
  w.wr_id = 9;
  w.opcode = WrOpcode::RdmaRead;
  w.flags = kSendSignaled;
  w.num_sge = 1;
  w.sg_list[0] = sge_of(sink, a.reg_mr(sink, kLocalWrite));
  w.remote_stag = skey;
  w.remote_addr = reinterpret_cast<uint64_t>(src.data());
  ASSERT_EQ(a.qp->post_send(w), 0);
  ASSERT_EQ(pump.move(a, b, pump.log_ab, pump.fin_ab), 1u);  // the Read Request
  ASSERT_FALSE(b.qp->tx_pending().empty());                  // its response is built
  b.qp->tx_commit(0);                                        // and none of it sent
  ASSERT_EQ(b.reg.deregister(skey), 0);
  std::fill(src.begin(), src.end(), 0xC3);
  const wire::TerminateMessage t = terminate_from_b();
  EXPECT_EQ(t.cause, (wire::TerminateCause{wire::TermLayer::Rdma, wire::term::kRdmaRemoteProtection,
                                           wire::term::kInvalidStag}));
  expect_chunks(pump.log_ba, 1452);
  EXPECT_EQ(sink, std::vector<uint8_t>(sink.size(), 0)) << "a response segment was sent";
  const auto sc = a.poll_send();
  ASSERT_EQ(sc.size(), 1u);
  EXPECT_NE(sc[0].status, WcStatus::Success);
}

// Messages that overtook a missing one are held in memory, but only so much of it: a peer that
// never fills the gap while it goes on sending loses the stream at 64 MiB, not the process's
// memory.
TEST_F(QpSctpTest, HeldMessagesAreBoundedInMemory) {
  constexpr size_t kPayload = 60000, kLimit = 64u << 20;
  std::vector<uint8_t> msg = {0, 0, 0xC1, 0x40, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
  msg.resize(msg.size() + kPayload, 0x5A);
  size_t held = 0;
  for (uint16_t ssn = 2; ssn < 2000 && !b.qp->terminate_sent(); ++ssn) {
    wire::store_be16(msg.data(), ssn);  // DDP-SSN 1 never comes
    b.qp->rx_feed_message(wire::kPpidDdpSegment, msg);
    if (!b.qp->terminate_sent()) held += msg.size();
  }
  expect_stream_lost(b);
  EXPECT_LE(held, kLimit);
  EXPECT_GT(held + msg.size(), kLimit);  // the message that ended it would have gone beyond
  EXPECT_EQ(b.qp->sctp_held(), 0u);      // nothing is kept once the stream is lost
}

TEST_F(QpSctpTest, WrongPpidTerminates) {
  const std::vector<uint8_t> write0 = {0x00, 0x01, 0xC1, 0x40, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
  b.qp->rx_feed_message(51, write0);  // RFC 5043 §5.1: only PPIDs 16 and 17
  expect_stream_lost(b);
}

TEST_F(QpSctpTest, SessionInitiateMidSessionTerminates) {
  // DDP-SSN 1 | Function Code 1 (Initiate) | 2 octets Private Data
  b.qp->rx_feed_message(17, std::vector<uint8_t>{0x00, 0x01, 0x00, 0x01, 0xAB, 0xCD});
  expect_stream_lost(b);
}

TEST_F(QpSctpTest, SessionTerminateWithPrivateDataTerminates) {
  b.qp->rx_feed_message(17, std::vector<uint8_t>{0x00, 0x01, 0x00, 0x04, 0x00});
  expect_stream_lost(b);
}

TEST_F(QpSctpTest, OversizeSegmentTerminates) {
  std::vector<uint8_t> big(2 + 64769, 0);  // one octet over the maximum (RFC 5043 §9)
  big[1] = 0x01;
  big[2] = 0xC1;
  big[3] = 0x40;
  b.qp->rx_feed_message(16, big);
  expect_stream_lost(b);
}

TEST_F(QpSctpTest, TruncatedHeaderTerminates) {
  b.qp->rx_feed_message(16, std::vector<uint8_t>{0x00, 0x01, 0x41, 0x43, 0x00});
  ASSERT_TRUE(b.qp->terminate_sent().has_value());
  EXPECT_EQ(b.qp->state(), QpState::Terminate);
}

TEST_F(QpSctpTest, PeerSessionTerminateFlushesReceives) {
  std::vector<uint8_t> inbox(16);
  RecvWr r;
  r.wr_id = 9;
  r.num_sge = 1;
  r.sg_list[0] = sge_of(inbox, b.reg_mr(inbox, kLocalWrite));
  ASSERT_EQ(b.qp->post_recv(r), 0);
  b.qp->rx_feed_message(17, std::vector<uint8_t>{0x00, 0x01, 0x00, 0x04});
  EXPECT_TRUE(b.has_event(QpEvent::Closed));
  auto rc = b.poll_recv();
  ASSERT_EQ(rc.size(), 1u);
  EXPECT_EQ(rc[0].status, WcStatus::WrFlushErr);
  // Anything after the session's last chunk is dropped.
  b.qp->rx_feed_message(16, std::vector<uint8_t>{0x00, 0x02, 0xC1, 0x40});
  EXPECT_FALSE(b.qp->terminate_sent().has_value());
}

}  // namespace
}  // namespace uiw::engine::test

namespace uiw::engine::test {
namespace {

// The record form of rx_feed() (what runtime::Connection hands over from transport::SctpStream):
// records split at every size from 1 octet up still deliver every message exactly once.
TEST(QpSctpRecordTest, RecordsSplitAnywhereDeliverInOrder) {
  for (size_t chunk : {1u, 3u, 7u, 64u, 100000u}) {
    Side a(1), b(2);
    sctp_connect(a, b, 1452);
    std::vector<uint8_t> src(5000), dst(5000);
    fill_pattern(src, 11);
    RecvWr r;
    r.wr_id = 42;
    r.num_sge = 1;
    r.sg_list[0] = sge_of(dst, b.reg_mr(dst, kLocalWrite));
    ASSERT_EQ(b.qp->post_recv(r), 0);
    SendWr w;
    w.num_sge = 1;
    w.sg_list[0] = sge_of(src, a.reg_mr(src, 0));
    ASSERT_EQ(a.qp->post_send(w), 0);
    std::vector<uint8_t> stream;
    for (std::span<const iovec> iov = a.qp->tx_pending(); !iov.empty(); iov = a.qp->tx_pending()) {
      std::vector<uint8_t> m;
      for (const iovec& v : iov)
        m.insert(m.end(), static_cast<uint8_t*>(v.iov_base),
                 static_cast<uint8_t*>(v.iov_base) + v.iov_len);
      a.qp->tx_commit(m.size());
      uint8_t hdr[kSctpRecordHeader];
      wire::store_be32(hdr, sctp_ppid_of(m[2]));                   // PPID
      wire::store_be32(hdr + 4, static_cast<uint32_t>(m.size()));  // message length
      stream.insert(stream.end(), hdr, hdr + sizeof hdr);
      stream.insert(stream.end(), m.begin(), m.end());
    }
    EXPECT_EQ(a.qp->stats().tx_fpdus, 4u);  // 5000 octets in 1452-octet segments
    for (size_t off = 0; off < stream.size(); off += chunk) {
      const size_t k = std::min(chunk, stream.size() - off);
      ASSERT_EQ(b.qp->rx_feed({stream.data() + off, k}), k);
    }
    auto rc = b.poll_recv();
    ASSERT_EQ(rc.size(), 1u) << "chunk " << chunk;
    EXPECT_EQ(rc[0].byte_len, 5000u);
    EXPECT_EQ(dst, src);
    EXPECT_EQ(b.qp->state(), QpState::Rts);
  }
}

TEST(QpSctpRecordTest, NotStartedQpReadsNothing) {
  Side b(2);
  const uint8_t rec[] = {0, 0, 0, 16, 0, 0, 0, 0};
  EXPECT_EQ(b.qp->rx_feed(rec), 0u);
}

}  // namespace
}  // namespace uiw::engine::test
