// Engine operations between two Qps over the in-memory pump, in every framing mode.
#include <gtest/gtest.h>

#include <tuple>

#include "test_util.h"
#include "unit/engine/qp_pair.h"
#include "wire/ddp.h"
#include "wire/rdmap.h"

namespace uiw::engine::test {
namespace {

using memory::kLocalWrite;
using memory::kRemoteRead;
using memory::kRemoteWrite;

struct Mode {
  bool crc;
  bool markers_ab;  // initiator inserts markers
  bool markers_ba;  // responder inserts markers
  uint32_t mulpdu;
  size_t chunk;
};

std::string mode_name(const testing::TestParamInfo<Mode>& info) {
  const Mode& m = info.param;
  return std::string(m.crc ? "Crc" : "NoCrc") + (m.markers_ab ? "_MarkAB" : "") +
         (m.markers_ba ? "_MarkBA" : "") + "_Mulpdu" + std::to_string(m.mulpdu) +
         (m.chunk == SIZE_MAX ? "" : "_Chunk" + std::to_string(m.chunk));
}

class QpOpsTest : public testing::TestWithParam<Mode> {
 protected:
  QpOpsTest() : a(1), b(2), pump{a, b} {
    const Mode& m = GetParam();
    pump.chunk = m.chunk;
    pump.tap_ab = &tap_ab;
    pump.tap_ba = &tap_ba;
    ConnParams p;
    p.crc = m.crc;
    p.markers_tx = m.markers_ab;
    p.markers_rx = m.markers_ba;
    p.mulpdu = m.mulpdu;
    p.ord = p.ird = 8;
    connect(a, b, p);
  }
  // The bytes each side sent, decoded by the independent wire::FpduDecoder.
  void expect_wire_decodes() {
    struct Count : wire::FpduDecoder::Visitor {
      size_t n = 0;
      void on_ulpdu(std::span<const uint8_t> u) override {
        wire::SegmentHeader h;
        EXPECT_GT(wire::decode_segment_header(u, &h), 0u);
        EXPECT_EQ(h.ddp_version, 1);
        ++n;
      }
    } ca, cb;
    const Mode& m = GetParam();
    wire::FpduDecoder da(&ca, m.crc, m.markers_ab), db(&cb, m.crc, m.markers_ba);
    EXPECT_EQ(da.consume(tap_ab), tap_ab.size());
    EXPECT_EQ(da.error(), wire::FpduDecoder::Error::None) << da.error_detail();
    EXPECT_TRUE(da.at_frame_boundary());
    EXPECT_EQ(db.consume(tap_ba), tap_ba.size());
    EXPECT_EQ(db.error(), wire::FpduDecoder::Error::None) << db.error_detail();
    EXPECT_EQ(ca.n, a.qp->stats().tx_fpdus);
    EXPECT_EQ(cb.n, b.qp->stats().tx_fpdus);
  }
  Side a, b;
  Pump pump;
  std::vector<uint8_t> tap_ab, tap_ba;
};

TEST_P(QpOpsTest, SendSizesDeliveredByteForByte) {
  const uint32_t mul = GetParam().mulpdu;
  const std::vector<size_t> sizes = {0, 1, mul - 19, mul - 18, mul - 17, mul, 3 * mul + 5, 70000};
  std::vector<std::vector<uint8_t>> src, dst;
  for (size_t i = 0; i < sizes.size(); ++i) {
    src.emplace_back(sizes[i]);
    fill_pattern(src.back(), static_cast<uint32_t>(i));
    dst.emplace_back(sizes[i] + 64, 0xEE);
    const memory::Stag rk = b.reg_mr(dst.back(), kLocalWrite);
    RecvWr r;
    r.wr_id = 100 + i;
    r.num_sge = 1;
    r.sg_list[0] = sge_of(dst.back(), rk);
    ASSERT_EQ(b.qp->post_recv(r), 0);
  }
  for (size_t i = 0; i < sizes.size(); ++i) {
    const memory::Stag lk = a.reg_mr(src[i], 0);
    SendWr w;
    w.wr_id = i;
    w.opcode = WrOpcode::Send;
    w.flags = kSendSignaled;
    w.num_sge = sizes[i] ? 1 : 0;
    w.sg_list[0] = sge_of(src[i], lk);
    ASSERT_EQ(a.qp->post_send(w), 0);
  }
  pump.run();
  auto sc = a.poll_send();
  auto rc = b.poll_recv();
  ASSERT_EQ(sc.size(), sizes.size());
  ASSERT_EQ(rc.size(), sizes.size());
  for (size_t i = 0; i < sizes.size(); ++i) {
    EXPECT_EQ(sc[i].wr_id, i);
    EXPECT_EQ(sc[i].status, WcStatus::Success);
    EXPECT_EQ(rc[i].wr_id, 100 + i);
    EXPECT_EQ(rc[i].status, WcStatus::Success);
    EXPECT_EQ(rc[i].opcode, WcOpcode::Recv);
    EXPECT_EQ(rc[i].byte_len, sizes[i]);
    EXPECT_TRUE(uiw::test::same_bytes(dst[i].data(), src[i].data(), sizes[i]));
    for (size_t g = sizes[i]; g < dst[i].size(); ++g) ASSERT_EQ(dst[i][g], 0xEE) << "guard " << g;
  }
  EXPECT_EQ(a.qp->state(), QpState::Rts);
  EXPECT_EQ(b.qp->state(), QpState::Rts);
  expect_wire_decodes();
}

TEST_P(QpOpsTest, WriteThenSendScatterGather) {
  std::vector<uint8_t> target(100000, 0x11), p1(3000), p2(1), p3(40000), note(8), inbox(64);
  fill_pattern(p1, 1);
  fill_pattern(p2, 2);
  fill_pattern(p3, 3);
  const memory::Stag rkey = b.reg_mr(target, kLocalWrite | kRemoteWrite);
  const memory::Stag ik = b.reg_mr(inbox, kLocalWrite);
  const memory::Stag k1 = a.reg_mr(p1, 0), k2 = a.reg_mr(p2, 0), k3 = a.reg_mr(p3, 0),
                     kn = a.reg_mr(note, 0);
  RecvWr r;
  r.wr_id = 7;
  r.num_sge = 1;
  r.sg_list[0] = sge_of(inbox, ik);
  ASSERT_EQ(b.qp->post_recv(r), 0);
  SendWr w;
  w.wr_id = 1;
  w.opcode = WrOpcode::RdmaWrite;
  w.flags = kSendSignaled;
  w.num_sge = 3;
  w.sg_list[0] = sge_of(p1, k1);
  w.sg_list[1] = sge_of(p2, k2);
  w.sg_list[2] = sge_of(p3, k3);
  w.remote_stag = rkey;
  w.remote_addr = reinterpret_cast<uint64_t>(target.data()) + 17;
  ASSERT_EQ(a.qp->post_send(w), 0);
  SendWr s;
  s.wr_id = 2;
  s.opcode = WrOpcode::Send;
  s.flags = kSendSignaled | kSendSolicited;
  s.num_sge = 1;
  s.sg_list[0] = sge_of(note, kn);
  ASSERT_EQ(a.qp->post_send(s), 0);
  pump.run();
  auto sc = a.poll_send();
  ASSERT_EQ(sc.size(), 2u);
  EXPECT_EQ(sc[0].opcode, WcOpcode::RdmaWrite);
  EXPECT_EQ(sc[0].byte_len, 43001u);
  auto rc = b.poll_recv();
  ASSERT_EQ(rc.size(), 1u);  // RDMAP §5.1: the Write itself is never delivered
  EXPECT_EQ(rc[0].flags & kWcSolicited, kWcSolicited);
  std::vector<uint8_t> expect(target.size(), 0x11);
  std::memcpy(expect.data() + 17, p1.data(), p1.size());
  std::memcpy(expect.data() + 17 + p1.size(), p2.data(), 1);
  std::memcpy(expect.data() + 17 + p1.size() + 1, p3.data(), p3.size());
  EXPECT_EQ(target, expect);
  expect_wire_decodes();
}

TEST_P(QpOpsTest, ReadIntoTwoSgesAndManyOutstanding) {
  std::vector<uint8_t> remote(200000);
  fill_pattern(remote, 9);
  const memory::Stag rkey = b.reg_mr(remote, kRemoteRead);
  constexpr int kReads = 20;  // more than ORD (8): the rest wait their turn
  std::vector<std::vector<uint8_t>> s1, s2;
  for (int i = 0; i < kReads; ++i) {
    s1.emplace_back(1000 + i, 0);
    s2.emplace_back(5000 * i, 0);
    const memory::Stag k1 = a.reg_mr(s1.back(), kLocalWrite), k2 = a.reg_mr(s2.back(), kLocalWrite);
    SendWr w;
    w.wr_id = 500 + i;
    w.opcode = WrOpcode::RdmaRead;
    w.flags = kSendSignaled;
    w.num_sge = 2;
    w.sg_list[0] = sge_of(s1.back(), k1);
    w.sg_list[1] = sge_of(s2.back(), k2);
    w.remote_stag = rkey;
    w.remote_addr = reinterpret_cast<uint64_t>(remote.data()) + 100 * i;
    ASSERT_EQ(a.qp->post_send(w), 0);
  }
  pump.run();
  auto sc = a.poll_send();
  ASSERT_EQ(sc.size(), static_cast<size_t>(kReads));
  for (int i = 0; i < kReads; ++i) {
    EXPECT_EQ(sc[i].wr_id, 500u + i);
    EXPECT_EQ(sc[i].status, WcStatus::Success);
    EXPECT_EQ(sc[i].opcode, WcOpcode::RdmaRead);
    EXPECT_TRUE(uiw::test::same_bytes(s1[i].data(), remote.data() + 100 * i, s1[i].size()));
    EXPECT_TRUE(
        uiw::test::same_bytes(s2[i].data(), remote.data() + 100 * i + s1[i].size(), s2[i].size()));
  }
  EXPECT_TRUE(b.poll_recv().empty());  // Read Requests are not delivered to the responder ULP
  expect_wire_decodes();
}

TEST_P(QpOpsTest, ZeroLengthWriteAndReadWithBogusStags) {
  // RFC 5041 §5.2 / RFC 5040 §5.2.1: zero-length tagged messages and zero-size Reads are not
  // validated.
  std::vector<uint8_t> sink(8);
  const memory::Stag k = a.reg_mr(sink, kLocalWrite);
  SendWr w;
  w.wr_id = 1;
  w.opcode = WrOpcode::RdmaWrite;
  w.flags = kSendSignaled;
  w.remote_stag = 0xDEADBEEF;
  w.remote_addr = ~0ull;
  ASSERT_EQ(a.qp->post_send(w), 0);
  SendWr r = w;
  r.wr_id = 2;
  r.opcode = WrOpcode::RdmaRead;
  r.num_sge = 1;
  r.sg_list[0] = sge_of(sink, k, 0, 0);
  ASSERT_EQ(a.qp->post_send(r), 0);
  pump.run();
  auto sc = a.poll_send();
  ASSERT_EQ(sc.size(), 2u);
  EXPECT_EQ(sc[0].status, WcStatus::Success);
  EXPECT_EQ(sc[1].status, WcStatus::Success);
  EXPECT_EQ(b.qp->state(), QpState::Rts);
}

// Only a posted receive or a Read still unanswered waits for the peer's bytes: a Write or a
// Send completes once it was handed to the lower layer. (The runtime leaves an application that
// polls for the others nothing to read.)
TEST(QpAwaitsTest, OnlyReceivesAndReadsAwaitThePeersBytes) {
  Side a(1), b(2);
  Pump pump{a, b};
  ConnParams p;
  p.ord = p.ird = 8;
  connect(a, b, p);
  std::vector<uint8_t> src(64, 7), remote(64, 9), sink(64), in(64);
  const memory::Stag sk = a.reg_mr(src, 0), lk = a.reg_mr(sink, kLocalWrite);
  const memory::Stag rk = b.reg_mr(remote, kLocalWrite | kRemoteRead | kRemoteWrite);
  EXPECT_FALSE(a.qp->awaits_inbound());

  SendWr w;
  w.opcode = WrOpcode::RdmaWrite;
  w.flags = kSendSignaled;
  w.num_sge = 1;
  w.sg_list[0] = sge_of(src, sk);
  w.remote_stag = rk;
  w.remote_addr = reinterpret_cast<uint64_t>(remote.data());
  ASSERT_EQ(a.qp->post_send(w), 0);
  EXPECT_TRUE(a.qp->awaits_completion());
  EXPECT_FALSE(a.qp->awaits_inbound());
  pump.run();
  const std::vector<Completion> wc = a.poll_send();
  ASSERT_EQ(wc.size(), 1u);
  ASSERT_EQ(wc[0].status, WcStatus::Success);

  SendWr r = w;
  r.opcode = WrOpcode::RdmaRead;
  r.sg_list[0] = sge_of(sink, lk);
  ASSERT_EQ(a.qp->post_send(r), 0);
  ASSERT_EQ(a.qp->post_send(w), 0);
  EXPECT_TRUE(a.qp->awaits_inbound());
  pump.run();
  EXPECT_EQ(a.poll_send().size(), 2u);
  EXPECT_FALSE(a.qp->awaits_inbound()) << "the answered Read is still counted";

  ASSERT_EQ(a.qp->post_send(r), 0);
  a.qp->abort();  // flushed, never answered
  EXPECT_EQ(a.poll_send().size(), 1u);
  EXPECT_FALSE(a.qp->awaits_inbound()) << "the flushed Read is still counted";

  Side c(3), d(4);
  connect(c, d, p);
  RecvWr rv;
  rv.num_sge = 1;
  rv.sg_list[0] = sge_of(in, c.reg_mr(in, kLocalWrite));
  ASSERT_EQ(c.qp->post_recv(rv), 0);
  EXPECT_TRUE(c.qp->awaits_inbound());
}

INSTANTIATE_TEST_SUITE_P(
    Modes, QpOpsTest,
    testing::Values(Mode{true, false, false, 1448, SIZE_MAX},
                    Mode{false, false, false, 1448, SIZE_MAX},
                    Mode{true, false, false, 128, SIZE_MAX},
                    Mode{true, false, false, 64768, SIZE_MAX},
                    Mode{true, true, false, 1442, SIZE_MAX},
                    Mode{true, false, true, 1442, SIZE_MAX}, Mode{true, true, true, 500, SIZE_MAX},
                    Mode{false, true, true, 8882, SIZE_MAX}, Mode{true, false, false, 1448, 1},
                    Mode{true, true, true, 1000, 7}, Mode{true, true, false, 200, 513}),
    mode_name);

}  // namespace
}  // namespace uiw::engine::test
