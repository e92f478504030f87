// Memory windows in the engine: a type 2 window bound by a send queue WR (IBV_WR_BIND_MW), used
// by the peer, invalidated by the peer's Send with Invalidate or a local IBV_WR_LOCAL_INV; a
// failed bind completes with a bind error and ends the stream.
#include <gtest/gtest.h>

#include <cstring>

#include "unit/engine/qp_pair.h"
#include "wire/terminate.h"

namespace uiw::engine::test {
namespace {

using memory::kLocalWrite;
using memory::kMwBind;
using memory::kRemoteRead;
using memory::kRemoteWrite;
using wire::TermLayer;
namespace term = wire::term;

// b owns a 4 KiB region it binds a type 2 window on; a writes through the window.
class QpMwTest : public testing::Test {
 protected:
  QpMwTest() : a(1), b(2), pump{a, b} {
    ConnParams p;
    p.crc = true;
    p.ord = p.ird = 4;
    connect(a, b, p);
    region.assign(4096, 0);
    mr = b.reg_mr(region, kLocalWrite | kMwBind);
    int err = 1;
    mw = b.reg.alloc_mw(b.pd, memory::MwType::Type2, &err);
    EXPECT_EQ(err, 0);
    src.assign(256, 0);
    fill_pattern(src, 9);
    skey = a.reg_mr(src, 0);
  }
  uint64_t at(size_t off) const { return reinterpret_cast<uint64_t>(region.data()) + off; }
  void post_bind(uint64_t wr_id, uint8_t key, uint64_t addr, uint64_t len, uint32_t access) {
    SendWr w;
    w.wr_id = wr_id;
    w.opcode = WrOpcode::BindMw;
    w.flags = kSendSignaled;
    w.bind = {mw, mr, addr, len, access, key};
    ASSERT_EQ(b.qp->post_send(w), 0);
  }
  void post_write(uint64_t wr_id, uint32_t stag, uint64_t to, uint32_t len) {
    SendWr w;
    w.wr_id = wr_id;
    w.opcode = WrOpcode::RdmaWrite;
    w.flags = kSendSignaled;
    w.num_sge = 1;
    w.sg_list[0] = sge_of(src, skey, 0, len);
    w.remote_stag = stag;
    w.remote_addr = to;
    ASSERT_EQ(a.qp->post_send(w), 0);
  }
  uint32_t bound_stag(uint8_t key) const { return (mw & ~0xffu) | key; }
  Side a, b;
  Pump pump;
  std::vector<uint8_t> region, src;
  memory::Stag mr, mw, skey;
};

TEST_F(QpMwTest, ABoundWindowTakesWritesInItsRangeUntilThePeerInvalidatesIt) {
  post_bind(1, 0x5A, at(1024), 512, kRemoteWrite);
  pump.run();
  auto bc = b.poll_send();
  ASSERT_EQ(bc.size(), 1u);
  EXPECT_EQ(bc[0].opcode, WcOpcode::BindMw);
  EXPECT_EQ(bc[0].status, WcStatus::Success);
  const uint32_t w = bound_stag(0x5A);
  post_write(2, w, at(1024 + 100), 64);
  pump.run();
  auto ac = a.poll_send();
  ASSERT_EQ(ac.size(), 1u);
  EXPECT_EQ(ac[0].status, WcStatus::Success);
  EXPECT_EQ(0, std::memcmp(region.data() + 1124, src.data(), 64));
  // The peer's Send with Invalidate names the window: the receive says so, the window is gone.
  std::vector<uint8_t> inbox(64, 0);
  RecvWr r;
  r.wr_id = 7;
  r.num_sge = 1;
  r.sg_list[0] = sge_of(inbox, b.reg_mr(inbox, kLocalWrite));
  ASSERT_EQ(b.qp->post_recv(r), 0);
  SendWr s;
  s.wr_id = 3;
  s.opcode = WrOpcode::SendInv;
  s.flags = kSendSignaled;
  s.num_sge = 1;
  s.sg_list[0] = sge_of(src, skey, 0, 8);
  s.invalidate_stag = w;
  ASSERT_EQ(a.qp->post_send(s), 0);
  pump.run();
  auto rc = b.poll_recv();
  ASSERT_EQ(rc.size(), 1u);
  EXPECT_EQ(rc[0].status, WcStatus::Success);
  EXPECT_EQ(rc[0].flags & kWcWithInv, kWcWithInv);
  EXPECT_EQ(rc[0].invalidated_stag, w);
  post_write(4, w, at(1024), 8);
  pump.run();
  ASSERT_TRUE(b.qp->terminate_sent().has_value());
  EXPECT_EQ(b.qp->terminate_sent()->cause,
            (wire::TerminateCause{TermLayer::Ddp, term::kDdpTagged, term::kDdpInvalidStag}));
}

TEST_F(QpMwTest, AWriteOutsideTheWindowIsRefused) {
  post_bind(1, 0x11, at(1024), 512, kRemoteWrite);
  pump.run();
  ASSERT_EQ(b.poll_send().size(), 1u);
  post_write(2, bound_stag(0x11), at(1024 + 500), 64);  // the region has room, the window not
  pump.run();
  ASSERT_TRUE(b.qp->terminate_sent().has_value());
  EXPECT_EQ(b.qp->terminate_sent()->cause,
            (wire::TerminateCause{TermLayer::Ddp, term::kDdpTagged, term::kDdpBaseBounds}));
  EXPECT_EQ(region, std::vector<uint8_t>(4096, 0));
}

TEST_F(QpMwTest, LocalInvalidateEndsTheWindowInSendQueueOrder) {
  post_bind(1, 0x22, at(0), 4096, kRemoteWrite | kRemoteRead);
  SendWr inv;
  inv.wr_id = 2;
  inv.opcode = WrOpcode::LocalInv;
  inv.flags = kSendSignaled;
  inv.invalidate_stag = bound_stag(0x22);
  ASSERT_EQ(b.qp->post_send(inv), 0);
  pump.run();
  auto bc = b.poll_send();
  ASSERT_EQ(bc.size(), 2u);
  EXPECT_EQ(bc[0].opcode, WcOpcode::BindMw);
  EXPECT_EQ(bc[1].opcode, WcOpcode::LocalInv);
  EXPECT_EQ(bc[1].status, WcStatus::Success);
  EXPECT_EQ(b.reg.deregister(mr), 0);  // the invalidated window holds the region no more
}

TEST_F(QpMwTest, AFailedBindIsABindErrorAndEndsTheStream) {
  post_bind(1, 0x33, at(4000), 512, kRemoteWrite);  // beyond the region
  pump.run();
  auto bc = b.poll_send();
  ASSERT_EQ(bc.size(), 1u);
  EXPECT_EQ(bc[0].status, WcStatus::MwBindErr);
  ASSERT_TRUE(b.qp->terminate_sent().has_value());
  EXPECT_EQ(b.qp->terminate_sent()->cause.etype, term::kRdmaLocalCatastrophic);
  EXPECT_EQ(b.qp->state(), QpState::Error);
}

}  // namespace
}  // namespace uiw::engine::test
