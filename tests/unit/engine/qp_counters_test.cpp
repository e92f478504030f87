// The context counters (uiw-abi.h enum uiw_counter) a Qp adds to for rdma statistic: FPDUs and
// octets each way agree between the two ends, placed payload counts Write, Send and Read
// Response octets only, and a Terminate is counted by the layer of its cause on both ends,
// with the CRC error that caused one.
#include <gtest/gtest.h>

#include "unit/engine/qp_pair.h"

namespace uiw::engine::test {
namespace {

using memory::kLocalWrite;
using memory::kRemoteRead;
using memory::kRemoteWrite;

class QpCountersTest : public testing::Test {
 protected:
  QpCountersTest() : a(1), b(2), pump{a, b} {
    ConnParams p;
    p.crc = true;
    p.mulpdu = 1448;
    p.ord = p.ird = 4;
    connect(a, b, p);
    target.assign(8192, 0);
    tkey = b.reg_mr(target, kLocalWrite | kRemoteWrite | kRemoteRead);
    src.assign(5000, 0x5A);
    skey = a.reg_mr(src, kLocalWrite);
  }
  SendWr wr(WrOpcode op, uint32_t len) {
    SendWr w;
    w.wr_id = 7;
    w.opcode = op;
    w.flags = kSendSignaled;
    w.num_sge = 1;
    w.sg_list[0] = sge_of(src, skey, 0, len);
    w.remote_stag = tkey;
    w.remote_addr = reinterpret_cast<uint64_t>(target.data());
    return w;
  }
  uint64_t at(const Side& s, uiw_counter c) const { return s.counters[c]; }

  Side a, b;
  Pump pump;
  std::vector<uint8_t> target, src;
  memory::Stag tkey = 0, skey = 0;
};

TEST_F(QpCountersTest, TrafficIsCountedAlikeOnBothEnds) {
  std::vector<uint8_t> rbuf(4096);
  const memory::Stag rkey = b.reg_mr(rbuf, kLocalWrite);
  RecvWr r;
  r.wr_id = 1;
  r.num_sge = 1;
  r.sg_list[0] = sge_of(rbuf, rkey);
  ASSERT_EQ(b.qp->post_recv(r), 0);
  ASSERT_EQ(a.qp->post_send(wr(WrOpcode::RdmaWrite, 5000)), 0);  // 4 FPDUs of at most 1448
  ASSERT_EQ(a.qp->post_send(wr(WrOpcode::Send, 100)), 0);
  ASSERT_EQ(a.qp->post_send(wr(WrOpcode::RdmaRead, 3000)), 0);
  pump.run();
  ASSERT_EQ(a.poll_send().size(), 3u);
  ASSERT_EQ(b.poll_recv().size(), 1u);

  EXPECT_EQ(at(a, UIW_CNT_TX_FPDUS), at(b, UIW_CNT_RX_FPDUS));
  EXPECT_EQ(at(b, UIW_CNT_TX_FPDUS), at(a, UIW_CNT_RX_FPDUS));
  EXPECT_GE(at(a, UIW_CNT_TX_FPDUS), 4u + 1 + 1);  // the Write's, the Send, the Read Request
  EXPECT_GE(at(b, UIW_CNT_TX_FPDUS), 3u);          // the Read Response's
  EXPECT_EQ(at(a, UIW_CNT_TX_BYTES), at(b, UIW_CNT_RX_BYTES));
  EXPECT_EQ(at(b, UIW_CNT_TX_BYTES), at(a, UIW_CNT_RX_BYTES));
  EXPECT_EQ(at(a, UIW_CNT_TX_BYTES), a.qp->stats().tx_bytes);
  EXPECT_EQ(at(b, UIW_CNT_PLACED_BYTES), 5000u + 100);  // the Read Request places nothing
  EXPECT_EQ(at(a, UIW_CNT_PLACED_BYTES), 3000u);
  for (const Side* s : {&a, &b}) {
    EXPECT_EQ(at(*s, UIW_CNT_CRC_ERRORS), 0u);
    for (int c = UIW_CNT_TERM_TX_RDMAP; c <= UIW_CNT_TERM_RX_LLP; ++c)
      EXPECT_EQ(s->counters[c], 0u) << c;
  }
}

TEST_F(QpCountersTest, ATerminateIsCountedByItsLayerOnBothEnds) {
  SendWr w = wr(WrOpcode::RdmaWrite, 64);
  w.remote_stag = tkey ^ 0x01;  // DDP tagged buffer error: invalid STag
  ASSERT_EQ(a.qp->post_send(w), 0);
  pump.run();
  EXPECT_EQ(at(b, UIW_CNT_TERM_TX_DDP), 1u);
  EXPECT_EQ(at(a, UIW_CNT_TERM_RX_DDP), 1u);
  EXPECT_EQ(at(b, UIW_CNT_TERM_TX_RDMAP) + at(b, UIW_CNT_TERM_TX_LLP), 0u);
  EXPECT_EQ(at(a, UIW_CNT_TERM_TX_DDP) + at(a, UIW_CNT_TERM_TX_RDMAP), 0u);
  EXPECT_EQ(at(b, UIW_CNT_PLACED_BYTES), 0u);
}

TEST_F(QpCountersTest, ACrcErrorIsCountedWithItsLlpTerminate) {
  pump.flip_ab_at = 40;  // inside the first FPDU's payload
  ASSERT_EQ(a.qp->post_send(wr(WrOpcode::RdmaWrite, 256)), 0);
  pump.run();
  EXPECT_EQ(at(b, UIW_CNT_CRC_ERRORS), 1u);
  EXPECT_EQ(at(b, UIW_CNT_TERM_TX_LLP), 1u);
  EXPECT_EQ(at(a, UIW_CNT_TERM_RX_LLP), 1u);
  EXPECT_EQ(at(b, UIW_CNT_RX_FPDUS), 0u);
  EXPECT_EQ(at(b, UIW_CNT_PLACED_BYTES), 0u);
}

}  // namespace
}  // namespace uiw::engine::test
