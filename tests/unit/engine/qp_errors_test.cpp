// Engine error paths: each Terminate class, what the peer decodes, guard bytes, flush, close.
#include <gtest/gtest.h>

#include "unit/engine/qp_pair.h"
#include "wire/bytes.h"
#include "wire/ddp.h"
#include "wire/rdmap.h"
#include "wire/terminate.h"

namespace uiw::engine::test {
namespace {

using memory::kLocalWrite;
using memory::kRemoteRead;
using memory::kRemoteWrite;
using wire::TermLayer;
namespace term = wire::term;

ConnParams default_params() {
  ConnParams p;
  p.crc = true;
  p.mulpdu = 1448;
  p.ord = p.ird = 4;
  return p;
}

// A connected pair; b is the side under attack (responder), a the peer.
class QpErrorTest : public testing::Test {
 protected:
  QpErrorTest() : a(1), b(2), pump{a, b} {
    pump.tap_ab = &tap_ab;
    pump.tap_ba = &tap_ba;
    connect(a, b, default_params());
    target.assign(4096 + 2 * kGuard, 0xA5);
    tkey = b.reg_mr(target, kLocalWrite | kRemoteWrite | kRemoteRead);
  }
  static constexpr size_t kGuard = 256;
  uint64_t target_to(size_t off) const {
    return reinterpret_cast<uint64_t>(target.data()) + kGuard + off;
  }
  void expect_guards_intact() {
    for (size_t i = 0; i < kGuard; ++i) ASSERT_EQ(target[i], 0xA5) << "low guard " << i;
    for (size_t i = target.size() - kGuard; i < target.size(); ++i)
      ASSERT_EQ(target[i], 0xA5) << "high guard " << i;
  }
  void post_write(uint32_t stag, uint64_t to, std::vector<uint8_t>& src) {
    const memory::Stag k = a.reg_mr(src, 0);
    SendWr w;
    w.wr_id = 42;
    w.opcode = WrOpcode::RdmaWrite;
    w.flags = kSendSignaled;
    w.num_sge = 1;
    w.sg_list[0] = sge_of(src, k);
    w.remote_stag = stag;
    w.remote_addr = to;
    ASSERT_EQ(a.qp->post_send(w), 0);
  }
  void post_read(uint32_t stag, uint64_t to, std::vector<uint8_t>& dst) {
    const memory::Stag k = a.reg_mr(dst, kLocalWrite);
    SendWr w;
    w.wr_id = 43;
    w.opcode = WrOpcode::RdmaRead;
    w.flags = kSendSignaled;
    w.num_sge = 1;
    w.sg_list[0] = sge_of(dst, k);
    w.remote_stag = stag;
    w.remote_addr = to;
    ASSERT_EQ(a.qp->post_send(w), 0);
  }
  // b sent exactly one Terminate with this cause and a received the same one.
  void expect_terminate(wire::TerminateCause cause, bool m, bool d, bool r) {
    ASSERT_TRUE(b.qp->terminate_sent().has_value());
    const wire::TerminateMessage& t = *b.qp->terminate_sent();
    EXPECT_EQ(t.cause, cause) << wire::terminate_cause_name(t.cause);
    EXPECT_EQ(t.m, m);
    EXPECT_EQ(t.d, d);
    EXPECT_EQ(t.r, r);
    ASSERT_TRUE(a.qp->terminate_received().has_value());
    const wire::TerminateMessage& got = *a.qp->terminate_received();
    EXPECT_EQ(got.cause, cause);
    EXPECT_EQ(got.m, m);
    EXPECT_EQ(got.d, d);
    EXPECT_EQ(got.r, r);
    EXPECT_EQ(got.ddp_header_size, t.ddp_header_size);
    EXPECT_EQ(0, std::memcmp(got.ddp_header, t.ddp_header, t.ddp_header_size));
    EXPECT_TRUE(b.has_event(QpEvent::TerminateSent));
    EXPECT_TRUE(a.has_event(QpEvent::TerminateReceived));
    EXPECT_EQ(a.qp->state(), QpState::Error);
    EXPECT_EQ(b.qp->state(), QpState::Error);
    // The Terminate is b's last message (RDMAP §5.4) and b closes after it.
    EXPECT_TRUE(b.qp->tx_want_shutdown());
  }
  // The copied DDP header equals the first segment a sent after its length field.
  void expect_copied_first_header() {
    const wire::TerminateMessage& t = *b.qp->terminate_sent();
    ASSERT_GE(tap_ab.size(), 2 + t.ddp_header_size);
    EXPECT_EQ(0, std::memcmp(t.ddp_header, tap_ab.data() + 2, t.ddp_header_size));
    EXPECT_EQ(t.ddp_segment_length, wire::load_be16(tap_ab.data()));
  }
  Side a, b;
  Pump pump;
  std::vector<uint8_t> tap_ab, tap_ba, target;
  memory::Stag tkey;
};

TEST_F(QpErrorTest, WriteInvalidStag) {
  std::vector<uint8_t> src(100, 1);
  post_write(tkey ^ 0x01, target_to(0), src);  // wrong key byte
  pump.run();
  expect_terminate({TermLayer::Ddp, term::kDdpTagged, term::kDdpInvalidStag}, true, true, false);
  expect_copied_first_header();
  expect_guards_intact();
  EXPECT_EQ(target[kGuard], 0xA5);
}

TEST_F(QpErrorTest, WriteBeyondBounds) {
  std::vector<uint8_t> src(100, 1);
  post_write(tkey, target_to(4096 + kGuard - 50), src);
  pump.run();
  expect_terminate({TermLayer::Ddp, term::kDdpTagged, term::kDdpBaseBounds}, true, true, false);
  expect_guards_intact();
}

TEST_F(QpErrorTest, WriteBelowBase) {
  std::vector<uint8_t> src(10, 1);
  post_write(tkey, reinterpret_cast<uint64_t>(target.data()) - 1, src);
  pump.run();
  expect_terminate({TermLayer::Ddp, term::kDdpTagged, term::kDdpBaseBounds}, true, true, false);
  expect_guards_intact();
}

TEST_F(QpErrorTest, WriteToWrap) {
  std::vector<uint8_t> src(16, 1);
  post_write(tkey, ~0ull - 3, src);
  pump.run();
  expect_terminate({TermLayer::Ddp, term::kDdpTagged, term::kDdpToWrap}, true, true, false);
  expect_guards_intact();
}

TEST_F(QpErrorTest, WriteWithoutRemoteWriteAccess) {
  std::vector<uint8_t> ro(64, 0x5A);
  const memory::Stag k = b.reg_mr(ro, kRemoteRead);
  std::vector<uint8_t> src(8, 1);
  post_write(k, reinterpret_cast<uint64_t>(ro.data()), src);
  pump.run();
  // RFC 5041 has no access-rights code: Invalid STag, as siw reports.
  expect_terminate({TermLayer::Ddp, term::kDdpTagged, term::kDdpInvalidStag}, true, true, false);
  EXPECT_EQ(ro, std::vector<uint8_t>(64, 0x5A));
}

TEST_F(QpErrorTest, WriteToStagOfAnotherPd) {
  std::vector<uint8_t> other(64, 0x5A);
  const uint32_t pd2 = b.reg.alloc_pd();
  int err = 0;
  const memory::Stag k = b.reg.register_region(pd2, other.data(), other.size(),
                                               reinterpret_cast<uint64_t>(other.data()),
                                               kLocalWrite | kRemoteWrite, &err);
  std::vector<uint8_t> src(8, 1);
  post_write(k, reinterpret_cast<uint64_t>(other.data()), src);
  pump.run();
  expect_terminate({TermLayer::Ddp, term::kDdpTagged, term::kDdpStagNotAssociated}, true, true,
                   false);
  EXPECT_EQ(other, std::vector<uint8_t>(64, 0x5A));
}

TEST_F(QpErrorTest, SendWithoutPostedReceive) {
  std::vector<uint8_t> src(10, 1);
  const memory::Stag k = a.reg_mr(src, 0);
  SendWr w;
  w.opcode = WrOpcode::Send;
  w.num_sge = 1;
  w.sg_list[0] = sge_of(src, k);
  ASSERT_EQ(a.qp->post_send(w), 0);
  pump.run();
  // iWARP has no RNR retry: RFC 5041 §7.1 untagged check 2.
  expect_terminate({TermLayer::Ddp, term::kDdpUntagged, term::kDdpNoBuffer}, true, true, false);
  expect_copied_first_header();
}

TEST_F(QpErrorTest, SendLongerThanReceiveBuffer) {
  std::vector<uint8_t> small(2000 + 2 * kGuard, 0xA5);
  const memory::Stag rk = b.reg_mr(small, kLocalWrite);
  RecvWr r;
  r.wr_id = 9;
  r.num_sge = 1;
  r.sg_list[0] = sge_of(small, rk, kGuard, 2000);
  ASSERT_EQ(b.qp->post_recv(r), 0);
  std::vector<uint8_t> src(5000, 1);
  const memory::Stag k = a.reg_mr(src, 0);
  SendWr w;
  w.opcode = WrOpcode::Send;
  w.num_sge = 1;
  w.sg_list[0] = sge_of(src, k);
  ASSERT_EQ(a.qp->post_send(w), 0);
  pump.run();
  expect_terminate({TermLayer::Ddp, term::kDdpUntagged, term::kDdpTooLong}, true, true, false);
  for (size_t i = 0; i < kGuard; ++i) ASSERT_EQ(small[i], 0xA5);
  for (size_t i = kGuard + 2000; i < small.size(); ++i) ASSERT_EQ(small[i], 0xA5);
  auto rc = b.poll_recv();
  ASSERT_EQ(rc.size(), 1u);
  EXPECT_EQ(rc[0].wr_id, 9u);
  EXPECT_EQ(rc[0].status, WcStatus::LocLenErr);  // not a flush: the receive was too small
}

struct ReadCase {
  const char* name;
  int stag_delta;  // 0: valid STag; else XORed into the key
  int64_t offset;
  uint32_t size;
  uint32_t access;
  uint8_t code;
};

class QpReadErrorTest : public QpErrorTest, public testing::WithParamInterface<ReadCase> {};

TEST_P(QpReadErrorTest, ReadRequestSourceCheckEchoesReadHeader) {
  const ReadCase& c = GetParam();
  std::vector<uint8_t> src(4096, 0x33);
  const memory::Stag sk = b.reg_mr(src, c.access);
  std::vector<uint8_t> sink(c.size + 16, 0xC3);
  uint64_t to = reinterpret_cast<uint64_t>(src.data()) + c.offset;
  if (c.offset < 0) to = ~0ull - 7;
  post_read(sk ^ static_cast<uint32_t>(c.stag_delta), to, sink);
  pump.run();
  expect_terminate({TermLayer::Rdma, term::kRdmaRemoteProtection, c.code}, true, true, true);
  // R: the 28-octet Read Request header is echoed unchanged (RDMAP §4.8, before any progress).
  const wire::TerminateMessage& t = *a.qp->terminate_received();
  EXPECT_EQ(0, std::memcmp(t.rdma_header, tap_ab.data() + 2 + 18, 28));
  auto sc = a.poll_send();
  ASSERT_EQ(sc.size(), 1u);
  EXPECT_EQ(sc[0].status, WcStatus::WrFlushErr);
  EXPECT_EQ(sink, std::vector<uint8_t>(c.size + 16, 0xC3));
}

INSTANTIATE_TEST_SUITE_P(
    Cases, QpReadErrorTest,
    testing::Values(ReadCase{"InvalidStag", 0x80, 0, 16, kRemoteRead, term::kInvalidStag},
                    ReadCase{"BeyondBounds", 0, 4000, 200, kRemoteRead, term::kBaseBounds},
                    ReadCase{"NoReadRight", 0, 0, 16, kRemoteWrite | kLocalWrite,
                             term::kAccessRights},
                    ReadCase{"ToWrap", 0, -1, 64, kRemoteRead, term::kToWrap}),
    [](const auto& info) { return std::string(info.param.name); });

TEST_F(QpErrorTest, SendWithInvalidateInvalidatesOnlyAssociatedStags) {
  std::vector<uint8_t> inbox(64);
  const memory::Stag ik = b.reg_mr(inbox, kLocalWrite);
  for (int i = 0; i < 2; ++i) {
    RecvWr r;
    r.wr_id = 20 + i;
    r.num_sge = 1;
    r.sg_list[0] = sge_of(inbox, ik);
    ASSERT_EQ(b.qp->post_recv(r), 0);
  }
  SendWr w;
  w.wr_id = 1;
  w.opcode = WrOpcode::SendInv;
  w.flags = kSendSignaled;
  w.invalidate_stag = tkey;
  ASSERT_EQ(a.qp->post_send(w), 0);
  pump.run();
  auto rc = b.poll_recv();
  ASSERT_EQ(rc.size(), 1u);
  EXPECT_EQ(rc[0].flags & kWcWithInv, kWcWithInv);
  EXPECT_EQ(rc[0].invalidated_stag, tkey);
  memory::RegionInfo info{};
  ASSERT_EQ(b.reg.query(tkey, &info), 0);
  EXPECT_FALSE(info.valid);
  // A second invalidation of the same (now invalid) STag: RDMAP §5.3 "STag cannot be
  // Invalidated".
  w.wr_id = 2;
  ASSERT_EQ(a.qp->post_send(w), 0);
  pump.run();
  expect_terminate({TermLayer::Rdma, term::kRdmaRemoteProtection, term::kCannotInvalidate}, true,
                   true, false);
}

TEST_F(QpErrorTest, CrcErrorIsLlpTerminateWithoutHeaders) {
  std::vector<uint8_t> src(600, 7);
  post_write(tkey, target_to(0), src);
  pump.flip_ab_at = 300;  // inside the payload
  pump.run();
  expect_terminate({TermLayer::Llp, term::kLlpMpa, term::kMpaCrc}, false, false, false);
  expect_guards_intact();
  // RFC 5044 §4.4: the CRC is checked first; not one octet of the invalid FPDU was placed.
  for (size_t i = 0; i < src.size(); ++i) ASSERT_EQ(target[kGuard + i], 0xA5) << i;
}

TEST_F(QpErrorTest, LocalProtectionErrorSendsLocalCatastrophic) {
  std::vector<uint8_t> src(10, 1);
  SendWr w;
  w.wr_id = 77;
  w.opcode = WrOpcode::Send;
  w.flags = kSendSignaled;
  w.num_sge = 1;
  w.sg_list[0] = sge_of(src, 0x12345678);  // not registered
  ASSERT_EQ(b.qp->post_send(w), 0);
  SendWr after = w;
  after.wr_id = 78;
  after.num_sge = 0;
  ASSERT_EQ(b.qp->post_send(after), 0);
  // b is the responder: it may only send once it received an FPDU; a's zero-length Write does it.
  SendWr z;
  z.opcode = WrOpcode::RdmaWrite;
  ASSERT_EQ(a.qp->post_send(z), 0);
  pump.run();
  auto sc = b.poll_send();
  ASSERT_EQ(sc.size(), 2u);
  EXPECT_EQ(sc[0].wr_id, 77u);
  EXPECT_EQ(sc[0].status, WcStatus::LocProtErr);
  EXPECT_EQ(sc[1].status, WcStatus::WrFlushErr);
  // RDMAP §7.1 item 21: no copied headers.
  expect_terminate({TermLayer::Rdma, term::kRdmaLocalCatastrophic, 0}, false, false, false);
}

TEST_F(QpErrorTest, AbortFlushesInOrderAndLaterPostsFlushAtOnce) {
  for (int i = 0; i < 5; ++i) {
    SendWr w;
    w.wr_id = i;
    w.opcode = WrOpcode::Send;
    ASSERT_EQ(a.qp->post_send(w), 0);
  }
  RecvWr r;
  r.wr_id = 99;
  ASSERT_EQ(a.qp->post_recv(r), 0);
  a.qp->abort();
  auto sc = a.poll_send();
  ASSERT_EQ(sc.size(), 5u);
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(sc[i].wr_id, static_cast<uint64_t>(i));
    EXPECT_EQ(sc[i].status, WcStatus::WrFlushErr);
  }
  auto rc = a.poll_recv();
  ASSERT_EQ(rc.size(), 1u);
  EXPECT_EQ(rc[0].status, WcStatus::WrFlushErr);
  SendWr w;
  w.wr_id = 50;
  ASSERT_EQ(a.qp->post_send(w), 0);
  sc = a.poll_send();
  ASSERT_EQ(sc.size(), 1u);
  EXPECT_EQ(sc[0].status, WcStatus::WrFlushErr);
  EXPECT_TRUE(a.qp->tx_pending().empty());
}

TEST_F(QpErrorTest, CompletionsInSubmissionOrderReadBeforeSend) {
  std::vector<uint8_t> sink(64);
  post_read(tkey, target_to(0), sink);
  SendWr s;
  s.wr_id = 44;
  s.opcode = WrOpcode::RdmaWrite;
  s.flags = kSendSignaled;
  ASSERT_EQ(a.qp->post_send(s), 0);
  // Transmit both before any response arrives: the Write is done at DDP level first, but RDMAP
  // §5.5 rule 15 keeps its completion behind the Read's.
  std::span<const iovec> iov = a.qp->tx_pending();
  size_t n = 0;
  std::vector<uint8_t> bytes;
  for (const iovec& v : iov) {
    const auto* p = static_cast<const uint8_t*>(v.iov_base);
    bytes.insert(bytes.end(), p, p + v.iov_len);
    n += v.iov_len;
  }
  a.qp->tx_commit(n);
  EXPECT_TRUE(a.poll_send().empty());
  b.qp->rx_feed(bytes);
  pump.run();
  auto sc = a.poll_send();
  ASSERT_EQ(sc.size(), 2u);
  EXPECT_EQ(sc[0].wr_id, 43u);
  EXPECT_EQ(sc[1].wr_id, 44u);
}

TEST_F(QpErrorTest, ResponderSendsNothingBeforeFirstFpdu) {
  SendWr w;
  w.opcode = WrOpcode::RdmaWrite;
  ASSERT_EQ(b.qp->post_send(w), 0);
  EXPECT_TRUE(b.qp->tx_pending().empty());  // RFC 5044 §7.1.2
  ASSERT_EQ(a.qp->post_send(w), 0);
  pump.run();
  EXPECT_EQ(b.qp->stats().tx_fpdus, 1u);
}

TEST_F(QpErrorTest, GracefulCloseFlushesPeerReceives) {
  RecvWr r;
  r.wr_id = 5;
  ASSERT_EQ(b.qp->post_recv(r), 0);
  a.qp->close();
  pump.run();
  EXPECT_TRUE(pump.eof_ab);
  EXPECT_EQ(b.qp->state(), QpState::Error);
  EXPECT_TRUE(b.has_event(QpEvent::Closed));
  EXPECT_FALSE(b.qp->terminate_sent().has_value());
  auto rc = b.poll_recv();
  ASSERT_EQ(rc.size(), 1u);
  EXPECT_EQ(rc[0].status, WcStatus::WrFlushErr);
}

TEST_F(QpErrorTest, EofMidFpduIsConnectionLost) {
  std::vector<uint8_t> src(1000, 3);
  post_write(tkey, target_to(0), src);
  auto iov = a.qp->tx_pending();
  std::vector<uint8_t> bytes(static_cast<const uint8_t*>(iov[0].iov_base),
                             static_cast<const uint8_t*>(iov[0].iov_base) + iov[0].iov_len);
  b.qp->rx_feed(bytes);  // the header only
  b.qp->rx_eof();
  ASSERT_TRUE(b.qp->terminate_sent().has_value());
  EXPECT_EQ(b.qp->terminate_sent()->cause,
            (wire::TerminateCause{TermLayer::Llp, term::kLlpMpa, term::kMpaConnectionLost}));
}

class QpRtrTest : public testing::TestWithParam<RtrType> {};

TEST_P(QpRtrTest, InitiatorRtrLetsResponderSpeakFirst) {
  Side a(1), b(2);
  ConnParams p = default_params();
  p.rtr = GetParam();
  connect(a, b, p);
  std::vector<uint8_t> inbox(16, 0), msg(16, 0x42);
  const memory::Stag ik = a.reg_mr(inbox, kLocalWrite), mk = b.reg_mr(msg, 0);
  RecvWr r;
  r.wr_id = 1;
  r.num_sge = 1;
  r.sg_list[0] = sge_of(inbox, ik);
  ASSERT_EQ(a.qp->post_recv(r), 0);
  SendWr s;
  s.wr_id = 2;
  s.opcode = WrOpcode::Send;
  s.flags = kSendSignaled;
  s.num_sge = 1;
  s.sg_list[0] = sge_of(msg, mk);
  ASSERT_EQ(b.qp->post_send(s), 0);
  std::vector<uint8_t> tap;
  Pump pump{a, b};
  pump.tap_ab = &tap;
  pump.run();
  ASSERT_EQ(a.poll_recv().size(), 1u);
  EXPECT_EQ(inbox, msg);
  // The RTR message names STag 1, never the reserved STag 0 that hardware peers drop (as siw).
  ASSERT_GE(tap.size(), 2 + wire::kTaggedHeaderSize);
  wire::SegmentHeader h;
  ASSERT_NE(wire::decode_segment_header({tap.data() + 2, tap.size() - 2}, &h), 0u);
  if (GetParam() == RtrType::Write) {
    EXPECT_TRUE(h.tagged);
    EXPECT_EQ(h.stag, 1u);
  } else if (GetParam() == RtrType::Read) {
    ASSERT_GE(tap.size(), 2 + wire::kUntaggedHeaderSize + wire::kReadRequestHeaderSize);
    const wire::ReadRequestHeader rr =
        wire::decode_read_request(tap.data() + 2 + wire::kUntaggedHeaderSize);
    EXPECT_EQ(rr.src_stag, 1u);
    EXPECT_EQ(rr.size, 0u);
  }
  EXPECT_EQ(b.poll_send().size(), 1u);
  EXPECT_EQ(a.qp->state(), QpState::Rts);
  EXPECT_EQ(b.qp->state(), QpState::Rts);
  EXPECT_EQ(b.rq.size(), 0u);
}

INSTANTIATE_TEST_SUITE_P(Types, QpRtrTest,
                         testing::Values(RtrType::Write, RtrType::Read, RtrType::Send));

}  // namespace
}  // namespace uiw::engine::test

namespace uiw::engine::test {
namespace {

TEST_F(QpErrorTest, DeregisterMidWriteStopsPlacement) {
  std::vector<uint8_t> src(1000, 0x77);
  post_write(tkey, target_to(0), src);
  std::vector<uint8_t> wire_bytes;
  for (const iovec& v : a.qp->tx_pending()) {
    const auto* p = static_cast<const uint8_t*>(v.iov_base);
    wire_bytes.insert(wire_bytes.end(), p, p + v.iov_len);
  }
  // Header (2 + 14) and the first 100 payload octets arrive, then the region is revoked.
  ASSERT_EQ(b.qp->rx_feed({wire_bytes.data(), 16 + 100}), 116u);
  ASSERT_EQ(b.reg.deregister(tkey), 0);
  b.qp->rx_feed({wire_bytes.data() + 116, wire_bytes.size() - 116});
  ASSERT_TRUE(b.qp->terminate_sent().has_value());
  EXPECT_EQ(b.qp->terminate_sent()->cause,
            (wire::TerminateCause{TermLayer::Ddp, term::kDdpTagged, term::kDdpInvalidStag}));
  // RFC 5041 §8.3.1(6): after revocation nothing more is written. With CRCs (this fixture) the
  // FPDU waits whole for its CRC (RFC 5044 §4.4), so the revocation came before any of it.
  for (size_t i = kGuard; i < target.size(); ++i) ASSERT_EQ(target[i], 0xA5) << i;
}

TEST(QpSrqTest, TwoQpsShareOneSrqAndTheLimitFires) {
  // Two connections whose receivers share one SRQ (and one registry, PD and CQ).
  Side a1(1), a2(3);
  memory::Registry reg(64);
  const uint32_t pd = reg.alloc_pd();
  CompletionQueue scq(64), rcq(64);
  ReceiveQueue srq(64, true);
  QpConfig c;
  c.pd = pd;
  c.registry = &reg;
  c.send_cq = &scq;
  c.recv_cq = &rcq;
  c.rq = &srq;
  c.qp_num = 2;
  Qp b1(c);
  c.qp_num = 4;
  Qp b2(c);
  ConnParams p = default_params();
  ConnParams pb = p;
  pb.initiator = false;
  a1.qp->start(p);
  a2.qp->start(p);
  b1.start(pb);
  b2.start(pb);
  std::vector<uint8_t> bufs(8 * 32);
  int err = 0;
  const memory::Stag k =
      reg.register_region(pd, bufs.data(), bufs.size(), reinterpret_cast<uint64_t>(bufs.data()),
                          memory::kLocalWrite, &err);
  for (int i = 0; i < 8; ++i) {
    RecvWr r;
    r.wr_id = i;
    r.num_sge = 1;
    r.sg_list[0] = sge_of(bufs, k, 32 * i, 32);
    ASSERT_EQ(srq.post(r), 0);
  }
  int limit_events = 0;
  srq.arm_limit(3, [&] { ++limit_events; });
  EXPECT_EQ(b1.post_recv(RecvWr{}), -EINVAL);  // receives go to the SRQ
  auto send = [](Side& s, uint8_t v) {
    SendWr w;
    w.opcode = WrOpcode::Send;
    w.flags = kSendInline;
    w.num_sge = 1;
    static uint8_t byte;
    byte = v;
    w.sg_list[0] = {reinterpret_cast<uint64_t>(&byte), 1, 0};
    ASSERT_EQ(s.qp->post_send(w), 0);
  };
  // Moves a's bytes into b without a Pump (b is not a Side here).
  auto deliver = [](Side& s, Qp& q) {
    for (const iovec& v : s.qp->tx_pending()) {
      q.rx_feed({static_cast<const uint8_t*>(v.iov_base), v.iov_len});
      s.qp->tx_commit(v.iov_len);
    }
  };
  for (int i = 0; i < 3; ++i) {
    send(a1, static_cast<uint8_t>(10 + i));
    deliver(a1, b1);
    send(a2, static_cast<uint8_t>(20 + i));
    deliver(a2, b2);
  }
  std::vector<Completion> rc(16);
  rc.resize(rcq.poll(rc));
  ASSERT_EQ(rc.size(), 6u);
  for (size_t i = 0; i < 6; ++i) {
    EXPECT_EQ(rc[i].wr_id, i);  // the SRQ hands out WRs in posting order, to either QP
    EXPECT_EQ(rc[i].qp_num, i % 2 ? 4u : 2u);
    EXPECT_EQ(bufs[32 * i], (i % 2 ? 20 : 10) + i / 2);
  }
  EXPECT_EQ(srq.size(), 2u);
  EXPECT_EQ(limit_events, 1);  // fired once when the count dropped below 3
  // An SRQ outlives its QPs' errors: aborting b1 flushes nothing from it.
  b1.abort();
  EXPECT_EQ(srq.size(), 2u);
}

}  // namespace
}  // namespace uiw::engine::test
