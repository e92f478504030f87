// RFC 7306 in the engine: atomics between two Qps over the in-memory pump, their errors, and
// Immediate Data and malformed extension messages fed as crafted FPDUs.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>

#include "unit/engine/qp_pair.h"
#include "wire/bytes.h"
#include "wire/ddp.h"
#include "wire/mpa.h"
#include "wire/rdmap.h"
#include "wire/terminate.h"

namespace uiw::engine::test {
namespace {

using memory::kLocalWrite;
using memory::kRemoteAtomic;
using memory::kRemoteRead;
using memory::kRemoteWrite;
using wire::TermLayer;
namespace term = wire::term;

ConnParams ext_params(bool ext = true) {
  ConnParams p;
  p.crc = true;
  p.ord = p.ird = 4;
  p.rdmap_ext = ext;
  return p;
}

// a (requester) and b (responder), both agreeing to RFC 7306; b's target has 64 octets.
class QpAtomicTest : public testing::Test {
 protected:
  explicit QpAtomicTest(bool a_ext = true, bool b_ext = true) : a(1), b(2), pump{a, b} {
    pump.tap_ab = &tap_ab;
    ConnParams pa = ext_params(a_ext), pb = ext_params(b_ext);
    pa.initiator = true;
    pb.initiator = false;
    a.qp->start(pa);
    b.qp->start(pb);
    target.assign(4096, 0);
    tkey = b.reg_mr(target, kLocalWrite | kRemoteRead | kRemoteWrite | kRemoteAtomic);
    result.assign(8 * 16, 0xEE);
    rkey = a.reg_mr(result, kLocalWrite);
  }
  uint64_t to(size_t off) const { return reinterpret_cast<uint64_t>(target.data()) + off; }
  uint64_t word(size_t off) const {
    uint64_t v;
    std::memcpy(&v, target.data() + off, 8);
    return v;
  }
  void set_word(size_t off, uint64_t v) { std::memcpy(target.data() + off, &v, 8); }
  uint64_t result_at(size_t i) const {
    uint64_t v;
    std::memcpy(&v, result.data() + 8 * i, 8);
    return v;
  }
  int post_atomic(WrOpcode op, uint64_t wr_id, uint32_t stag, uint64_t remote, uint64_t cmp_add,
                  uint64_t swap = 0) {
    SendWr w;
    w.wr_id = wr_id;
    w.opcode = op;
    w.flags = kSendSignaled;
    w.num_sge = 1;
    w.sg_list[0] = sge_of(result, rkey, 8 * wr_id, 8);
    w.remote_stag = stag;
    w.remote_addr = remote;
    w.compare_add = cmp_add;
    w.swap = swap;
    return a.qp->post_send(w);
  }
  void post_read(uint64_t wr_id, std::vector<uint8_t>& sink, uint64_t remote) {
    const memory::Stag k = a.reg_mr(sink, kLocalWrite);
    SendWr w;
    w.wr_id = wr_id;
    w.opcode = WrOpcode::RdmaRead;
    w.flags = kSendSignaled;
    w.num_sge = 1;
    w.sg_list[0] = sge_of(sink, k);
    w.remote_stag = tkey;
    w.remote_addr = remote;
    ASSERT_EQ(a.qp->post_send(w), 0);
  }
  // b sent one Terminate with this cause, copying the DDP header only (RFC 7306 §8.1).
  void expect_terminate(wire::TerminateCause cause) {
    ASSERT_TRUE(b.qp->terminate_sent().has_value());
    const wire::TerminateMessage& t = *b.qp->terminate_sent();
    EXPECT_EQ(t.cause, cause) << wire::terminate_cause_name(t.cause);
    EXPECT_TRUE(t.m);
    EXPECT_TRUE(t.d);
    EXPECT_FALSE(t.r);
    ASSERT_TRUE(a.qp->terminate_received().has_value());
    const wire::TerminateMessage& got = *a.qp->terminate_received();
    EXPECT_EQ(got.cause, cause);
    EXPECT_FALSE(got.r);
    // The copied header is the Atomic Request's: untagged, QN 1, opcode 0xA.
    ASSERT_EQ(got.ddp_header_size, wire::kUntaggedHeaderSize);
    wire::SegmentHeader h;
    wire::decode_segment_header({got.ddp_header, got.ddp_header_size}, &h);
    EXPECT_EQ(wire::rdmap_opcode(h.rdmap_control),
              static_cast<uint8_t>(wire::Opcode::AtomicRequest));
    EXPECT_EQ(h.qn, wire::kQnReadRequest);
    EXPECT_EQ(got.ddp_segment_length, wire::kUntaggedHeaderSize + wire::kAtomicRequestHeaderSize);
    EXPECT_EQ(a.qp->state(), QpState::Error);
  }
  Side a, b;
  Pump pump;
  std::vector<uint8_t> tap_ab, target, result;
  memory::Stag tkey, rkey;
};

TEST_F(QpAtomicTest, FetchAddAndCmpSwapReturnTheOriginalValue) {
  set_word(8, 40);
  set_word(16, 7);
  ASSERT_EQ(post_atomic(WrOpcode::AtomicFetchAdd, 0, tkey, to(8), 2), 0);
  ASSERT_EQ(post_atomic(WrOpcode::AtomicCmpSwap, 1, tkey, to(16), 7, 99), 0);  // matches
  ASSERT_EQ(post_atomic(WrOpcode::AtomicCmpSwap, 2, tkey, to(16), 7, 55), 0);  // no longer
  ASSERT_EQ(post_atomic(WrOpcode::AtomicFetchAdd, 3, tkey, to(8), ~0ull), 0);  // adds -1
  pump.run();
  EXPECT_EQ(word(8), 41u);
  EXPECT_EQ(word(16), 99u);
  EXPECT_EQ(result_at(0), 40u);
  EXPECT_EQ(result_at(1), 7u);
  EXPECT_EQ(result_at(2), 99u);
  EXPECT_EQ(result_at(3), 42u);
  auto sc = a.poll_send();
  ASSERT_EQ(sc.size(), 4u);
  const WcOpcode want[] = {WcOpcode::AtomicFetchAdd, WcOpcode::AtomicCmpSwap,
                           WcOpcode::AtomicCmpSwap, WcOpcode::AtomicFetchAdd};
  for (size_t i = 0; i < sc.size(); ++i) {
    EXPECT_EQ(sc[i].wr_id, i);
    EXPECT_EQ(sc[i].status, WcStatus::Success);
    EXPECT_EQ(sc[i].opcode, want[i]);
    EXPECT_EQ(sc[i].byte_len, 8u);
  }
  EXPECT_EQ(a.qp->state(), QpState::Rts);
  EXPECT_EQ(b.qp->state(), QpState::Rts);
  EXPECT_TRUE(b.poll_recv().empty());  // handled by RDMAP, never delivered (§5.2.1 item 3)
}

// RFC 7306 §7: a Read then an atomic on the same word, the Read's response shows the value
// before the atomic; an atomic then a Read, after it. The Reads are large enough that their
// payload is sent from the region itself (a small one is copied when its segment is built):
// without the atomic waiting until the Read Response's octets were taken, the first Read
// would see 11.
TEST_F(QpAtomicTest, ReadsAndAtomicsAreAnsweredInRequestOrder) {
  set_word(0, 10);
  std::vector<uint8_t> before(target.size(), 0), after(target.size(), 0);
  post_read(10, before, to(0));
  ASSERT_EQ(post_atomic(WrOpcode::AtomicFetchAdd, 0, tkey, to(0), 1), 0);
  post_read(11, after, to(0));
  pump.run();
  uint64_t v_before, v_after;
  std::memcpy(&v_before, before.data(), 8);
  std::memcpy(&v_after, after.data(), 8);
  EXPECT_EQ(v_before, 10u);
  EXPECT_EQ(result_at(0), 10u);
  EXPECT_EQ(v_after, 11u);
  auto sc = a.poll_send();
  ASSERT_EQ(sc.size(), 3u);
  EXPECT_EQ(sc[0].wr_id, 10u);
  EXPECT_EQ(sc[1].wr_id, 0u);
  EXPECT_EQ(sc[2].wr_id, 11u);
  for (const Completion& c : sc) EXPECT_EQ(c.status, WcStatus::Success);
}

// ORD counts atomics with Reads (RFC 7306 §5.2): more than ORD of them still all complete.
TEST_F(QpAtomicTest, MoreAtomicsThanOrdAllComplete) {
  for (uint64_t i = 0; i < 12; ++i)
    ASSERT_EQ(post_atomic(WrOpcode::AtomicFetchAdd, i, tkey, to(24), 1), 0);
  pump.run();
  EXPECT_EQ(word(24), 12u);
  auto sc = a.poll_send();
  ASSERT_EQ(sc.size(), 12u);
  for (uint64_t i = 0; i < 12; ++i) {
    EXPECT_EQ(sc[i].status, WcStatus::Success);
    EXPECT_EQ(result_at(i), i);
  }
}

TEST_F(QpAtomicTest, TheLocalBufferMustBeOneEightOctetSge) {
  SendWr w;
  w.opcode = WrOpcode::AtomicFetchAdd;
  w.num_sge = 1;
  w.sg_list[0] = sge_of(result, rkey, 0, 4);
  w.remote_stag = tkey;
  w.remote_addr = to(0);
  EXPECT_EQ(a.qp->post_send(w), -EINVAL);
  w.num_sge = 2;
  w.sg_list[1] = sge_of(result, rkey, 8, 4);
  EXPECT_EQ(a.qp->post_send(w), -EINVAL);
}

// RFC 7306 §8.2: a target not 64-bit aligned is not touched; "Catastrophic error, localized to
// RDMAP Stream".
TEST_F(QpAtomicTest, MisalignedTargetIsRefusedAndUntouched) {
  set_word(8, 5);
  ASSERT_EQ(post_atomic(WrOpcode::AtomicFetchAdd, 0, tkey, to(4), 1), 0);
  pump.run();
  expect_terminate({TermLayer::Rdma, term::kRdmaRemoteOperation, term::kCatastrophicStream});
  EXPECT_EQ(target, [] {
    std::vector<uint8_t> t(4096, 0);
    t[8] = 5;
    return t;
  }());
  EXPECT_EQ(result_at(0), 0xEEEEEEEEEEEEEEEEu);
  auto sc = a.poll_send();
  ASSERT_EQ(sc.size(), 1u);
  EXPECT_EQ(sc[0].status, WcStatus::WrFlushErr);
}

struct AtomicErrorCase {
  const char* name;
  uint32_t stag_xor;
  size_t offset;
  uint32_t access;  // of the target region
  uint8_t code;     // RDMAP Remote Protection Error code (RFC 5040 §7.2, as for a Read)
};

class QpAtomicErrorTest : public QpAtomicTest,
                          public testing::WithParamInterface<AtomicErrorCase> {};

TEST_P(QpAtomicErrorTest, ProtectionErrorsEndTheStreamWithoutTouchingMemory) {
  const AtomicErrorCase& c = GetParam();
  std::vector<uint8_t> other(64, 0x5A);
  const memory::Stag k = b.reg_mr(other, c.access);
  ASSERT_EQ(post_atomic(WrOpcode::AtomicCmpSwap, 0, k ^ c.stag_xor,
                        reinterpret_cast<uint64_t>(other.data()) + c.offset, 0x5A5A5A5A5A5A5A5A, 1),
            0);
  pump.run();
  expect_terminate({TermLayer::Rdma, term::kRdmaRemoteProtection, c.code});
  EXPECT_EQ(other, std::vector<uint8_t>(64, 0x5A));
}

INSTANTIATE_TEST_SUITE_P(
    Cases, QpAtomicErrorTest,
    testing::Values(
        AtomicErrorCase{"InvalidStag", 0x80, 0, kRemoteAtomic | kLocalWrite, term::kInvalidStag},
        AtomicErrorCase{"BeyondBounds", 0, 64, kRemoteAtomic | kLocalWrite, term::kBaseBounds},
        AtomicErrorCase{"NoAtomicRight", 0, 0, kRemoteRead | kRemoteWrite | kLocalWrite,
                        term::kAccessRights}),
    [](const auto& info) { return std::string(info.param.name); });

// Deregistered after the request was delivered, before it was answered: checked again when
// performed (RFC 5041 §8.3.1(6), as a Read's source is).
TEST_F(QpAtomicTest, DeregisteredBeforeTheAnswerIsNotTouched) {
  set_word(0, 3);
  ASSERT_EQ(post_atomic(WrOpcode::AtomicFetchAdd, 0, tkey, to(0), 1), 0);
  pump.move(a, b, &tap_ab, true);  // b has the request, has not answered
  ASSERT_EQ(b.reg.deregister(tkey), 0);
  pump.run();
  expect_terminate({TermLayer::Rdma, term::kRdmaRemoteProtection, term::kInvalidStag});
  EXPECT_EQ(word(0), 3u);
}

// A target page the application unmapped or made read-only after registering it (nothing is
// pinned): a protection error on the stream, never a signal.
TEST_F(QpAtomicTest, UnmappedOrReadOnlyTargetIsAnErrorNotASignal) {
  for (const bool unmap : {true, false}) {
    SCOPED_TRACE(unmap ? "munmap" : "PROT_READ");
    Side x(11), y(12);
    Pump p{x, y};
    ConnParams px = ext_params(), py = ext_params();
    py.initiator = false;
    x.qp->start(px);
    y.qp->start(py);
    const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    void* m = mmap(nullptr, page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ASSERT_NE(m, MAP_FAILED);
    int err = 0;
    const memory::Stag k = y.reg.register_region(y.pd, m, page, reinterpret_cast<uint64_t>(m),
                                                 kRemoteAtomic | kLocalWrite, &err);
    ASSERT_NE(k, 0u);
    if (unmap) {
      ASSERT_EQ(munmap(m, page), 0);
    } else {
      ASSERT_EQ(mprotect(m, page, PROT_READ), 0);
    }
    std::vector<uint8_t> res(8, 0);
    const memory::Stag rk = x.reg_mr(res, kLocalWrite);
    SendWr w;
    w.opcode = WrOpcode::AtomicFetchAdd;
    w.flags = kSendSignaled;
    w.num_sge = 1;
    w.sg_list[0] = sge_of(res, rk);
    w.remote_stag = k;
    w.remote_addr = reinterpret_cast<uint64_t>(m);
    w.compare_add = 1;
    ASSERT_EQ(x.qp->post_send(w), 0);
    p.run();
    ASSERT_TRUE(y.qp->terminate_sent().has_value());
    EXPECT_EQ(
        y.qp->terminate_sent()->cause,
        (wire::TerminateCause{TermLayer::Rdma, term::kRdmaRemoteProtection, term::kAccessRights}));
    EXPECT_EQ(x.qp->state(), QpState::Error);
    if (!unmap) {
      EXPECT_EQ(*static_cast<uint64_t*>(m), 0u);
      munmap(m, page);
    }
  }
}

// Write with Immediate and Send with Immediate, as verbs define them: one receive each at the
// peer, completed with the immediate (and the Write's length, or the Send's).
TEST_F(QpAtomicTest, WriteAndSendWithImmediate) {
  std::vector<uint8_t> src(3000);
  fill_pattern(src, 3);
  const memory::Stag sk = a.reg_mr(src, 0);
  std::vector<uint8_t> rbuf(4096, 0);
  const memory::Stag rbk = b.reg_mr(rbuf, kLocalWrite);
  for (uint64_t i = 0; i < 3; ++i) {
    RecvWr r;
    r.wr_id = 100 + i;
    r.num_sge = 1;
    r.sg_list[0] = sge_of(rbuf, rbk);
    ASSERT_EQ(b.qp->post_recv(r), 0);
  }
  SendWr w;
  w.wr_id = 1;
  w.opcode = WrOpcode::RdmaWriteImm;
  w.flags = kSendSignaled;
  w.num_sge = 1;
  w.sg_list[0] = sge_of(src, sk);
  w.remote_stag = tkey;
  w.remote_addr = to(0);
  w.imm_data = 0x11223344;
  ASSERT_EQ(a.qp->post_send(w), 0);
  w.wr_id = 2;
  w.opcode = WrOpcode::SendImm;
  w.sg_list[0] = sge_of(src, sk, 0, 100);
  w.imm_data = 0x55667788;
  ASSERT_EQ(a.qp->post_send(w), 0);
  w.wr_id = 3;  // zero-length: a notification
  w.opcode = WrOpcode::RdmaWriteImm;
  w.num_sge = 0;
  w.imm_data = 0x99AABBCC;
  ASSERT_EQ(a.qp->post_send(w), 0);
  pump.run();
  EXPECT_EQ(0, std::memcmp(target.data(), src.data(), 3000));
  EXPECT_EQ(0, std::memcmp(rbuf.data(), src.data(), 100));
  auto sc = a.poll_send();
  ASSERT_EQ(sc.size(), 3u);
  EXPECT_EQ(sc[0].opcode, WcOpcode::RdmaWrite);
  EXPECT_EQ(sc[1].opcode, WcOpcode::Send);
  for (const Completion& c : sc) EXPECT_EQ(c.status, WcStatus::Success);
  auto rc = b.poll_recv();
  ASSERT_EQ(rc.size(), 3u);
  EXPECT_EQ(rc[0].wr_id, 100u);
  EXPECT_EQ(rc[0].opcode, WcOpcode::RecvRdmaWithImm);
  EXPECT_EQ(rc[0].byte_len, 3000u);
  EXPECT_EQ(rc[0].imm_data, 0x11223344u);
  EXPECT_EQ(rc[1].wr_id, 101u);
  EXPECT_EQ(rc[1].opcode, WcOpcode::Recv);
  EXPECT_EQ(rc[1].byte_len, 100u);
  EXPECT_EQ(rc[1].imm_data, 0x55667788u);
  EXPECT_EQ(rc[2].opcode, WcOpcode::RecvRdmaWithImm);
  EXPECT_EQ(rc[2].byte_len, 0u);
  EXPECT_EQ(rc[2].imm_data, 0x99AABBCCu);
  for (const Completion& c : rc) {
    EXPECT_EQ(c.status, WcStatus::Success);
    EXPECT_EQ(c.flags & kWcWithImm, kWcWithImm);
  }
  EXPECT_EQ(b.qp->state(), QpState::Rts);
}

// RFC 7306 §1.1: a peer that did not agree never receives an extension opcode.
TEST(QpRfc7306AgreementTest, WithoutAgreementAnAtomicIsRefusedWhenPosted) {
  Side a(1), b(2);
  Pump pump{a, b};
  std::vector<uint8_t> tap;
  pump.tap_ab = &tap;
  std::vector<uint8_t> res(8, 0);
  const memory::Stag rk = a.reg_mr(res, kLocalWrite);
  SendWr w;
  w.opcode = WrOpcode::AtomicFetchAdd;
  w.flags = kSendSignaled;
  w.num_sge = 1;
  w.sg_list[0] = sge_of(res, rk);
  w.remote_stag = 1;
  // Posted before the connection: accepted, then failed when its turn comes.
  ASSERT_EQ(a.qp->post_send(w), 0);
  connect(a, b, ext_params(false));
  EXPECT_EQ(a.qp->post_send(w), -EOPNOTSUPP);
  pump.run();
  auto sc = a.poll_send();
  ASSERT_EQ(sc.size(), 1u);
  EXPECT_EQ(sc[0].status, WcStatus::LocQpOpErr);
  // The only thing a sent is its Terminate (local catastrophic), never an Atomic Request.
  ASSERT_TRUE(a.qp->terminate_sent().has_value());
  EXPECT_EQ(a.qp->terminate_sent()->cause.layer, TermLayer::Rdma);
  EXPECT_EQ(a.qp->terminate_sent()->cause.etype, term::kRdmaLocalCatastrophic);
  EXPECT_EQ(a.qp->stats().tx_fpdus, 1u);
}

class QpAtomicPeerWithoutExtTest : public QpAtomicTest {
 protected:
  QpAtomicPeerWithoutExtTest() : QpAtomicTest(true, false) {}
};

// A peer that did not agree treats the opcode as reserved (RFC 5040 §7.2 check 2).
TEST_F(QpAtomicPeerWithoutExtTest, ItAnswersUnexpectedOpcode) {
  ASSERT_EQ(post_atomic(WrOpcode::AtomicFetchAdd, 0, tkey, to(0), 1), 0);
  pump.run();
  expect_terminate({TermLayer::Rdma, term::kRdmaRemoteOperation, term::kUnexpectedOpcode});
  EXPECT_EQ(word(0), 0u);
}

// Crafted extension messages into a responder that agreed to RFC 7306.
class QpRfc7306CraftedTest : public testing::Test {
 protected:
  explicit QpRfc7306CraftedTest(bool crc = true) : q(2), crc_(crc) {
    ConnParams p = ext_params();
    p.initiator = false;
    p.crc = crc;
    q.qp->start(p);
  }
  // Feeds one FPDU, all but its last `withheld` octets.
  void feed(const wire::SegmentHeader& h, std::span<const uint8_t> rdmap, size_t withheld = 0) {
    std::vector<uint8_t> ulpdu(wire::kUntaggedHeaderSize);
    wire::encode_segment_header(ulpdu.data(), h);
    ulpdu.insert(ulpdu.end(), rdmap.begin(), rdmap.end());
    std::vector<uint8_t> fpdu(wire::fpdu_size_with_markers(pos_, ulpdu.size(), false));
    ASSERT_EQ(wire::encode_fpdu(fpdu, pos_, ulpdu, crc_, false), fpdu.size());
    pos_ += fpdu.size();
    const size_t n = fpdu.size() - withheld;
    ASSERT_EQ(q.qp->rx_feed(std::span(fpdu).first(n)), n);
  }
  static wire::SegmentHeader untagged(wire::Opcode op, uint32_t qn, uint32_t msn = 1) {
    wire::SegmentHeader h;
    h.last = true;
    h.rdmap_control = wire::rdmap_control(op);
    h.qn = qn;
    h.msn = msn;
    return h;
  }
  void post_recv(uint64_t wr_id) {
    RecvWr r;
    r.wr_id = wr_id;
    r.num_sge = 1;
    r.sg_list[0] = sge_of(buf, key);
    ASSERT_EQ(q.qp->post_recv(r), 0);
  }
  wire::TerminateCause sent_cause() {
    EXPECT_TRUE(q.qp->terminate_sent().has_value());
    return q.qp->terminate_sent() ? q.qp->terminate_sent()->cause : wire::TerminateCause{};
  }
  Side q;
  bool crc_;
  size_t pos_ = 0;
  std::vector<uint8_t> buf = std::vector<uint8_t>(64, 0);
  memory::Stag key = q.reg_mr(buf, kLocalWrite);
};

TEST_F(QpRfc7306CraftedTest, ImmediateDataCompletesAReceiveWithItsImmediate) {
  post_recv(7);
  post_recv(8);
  uint8_t imm[8];
  wire::encode_immediate(imm, {0x04030201, 4096});  // after a 4096-octet Write
  feed(untagged(wire::Opcode::ImmediateData, wire::kQnSend, 1), imm);
  feed(untagged(wire::Opcode::ImmediateDataSe, wire::kQnSend, 2), imm);
  EXPECT_EQ(imm[0], 1);  // verbs' immediate travels in memory order
  auto rc = q.poll_recv();
  ASSERT_EQ(rc.size(), 2u);
  EXPECT_EQ(rc[0].wr_id, 7u);
  EXPECT_EQ(rc[0].status, WcStatus::Success);
  EXPECT_EQ(rc[0].opcode, WcOpcode::RecvRdmaWithImm);
  EXPECT_EQ(rc[0].byte_len, 4096u);
  EXPECT_EQ(rc[0].flags, kWcWithImm);
  EXPECT_EQ(rc[0].imm_data, 0x04030201u);
  EXPECT_EQ(rc[1].flags, kWcWithImm | kWcSolicited);
  EXPECT_EQ(buf, std::vector<uint8_t>(64, 0));  // the buffer itself receives nothing
  EXPECT_FALSE(q.qp->terminate_sent().has_value());
}

// Without CRC an Immediate Data message takes its receive when its header is parsed, before the
// rest of its FPDU arrived: a stream that ends in between flushes that receive, as it flushes
// one a partly received Send landed in. Before, the receive was taken and never completed.
class QpRfc7306CraftedNoCrcTest : public QpRfc7306CraftedTest {
 protected:
  QpRfc7306CraftedNoCrcTest() : QpRfc7306CraftedTest(false) {}
};

TEST_F(QpRfc7306CraftedNoCrcTest, AnImmediateCutShortFlushesTheReceiveItTook) {
  post_recv(7);
  uint8_t imm[8];
  wire::encode_immediate(imm, {1, 4096});
  // All but the (unchecked) CRC field.
  feed(untagged(wire::Opcode::ImmediateData, wire::kQnSend, 1), imm, wire::kCrcSize);
  q.qp->rx_eof();
  const std::vector<Completion> rc = q.poll_recv();
  ASSERT_EQ(rc.size(), 1u) << "the receive the Immediate Data took was never completed";
  EXPECT_EQ(rc[0].wr_id, 7u);
  EXPECT_EQ(rc[0].status, WcStatus::WrFlushErr);
}

// An immediate for the next Send, then another one before that Send: the peer's error.
TEST_F(QpRfc7306CraftedTest, TwoImmediatesForOneSendAreRefused) {
  post_recv(7);
  uint8_t imm[8];
  wire::encode_immediate(imm, {1, wire::kImmediateForNextSend});
  feed(untagged(wire::Opcode::ImmediateData, wire::kQnSend, 1), imm);
  EXPECT_TRUE(q.poll_recv().empty());  // it takes no receive of its own
  feed(untagged(wire::Opcode::ImmediateData, wire::kQnSend, 2), imm);
  EXPECT_EQ(sent_cause(), (wire::TerminateCause{TermLayer::Rdma, term::kRdmaRemoteOperation,
                                                term::kUnspecified}));
}

TEST_F(QpRfc7306CraftedTest, ImmediateDataOfMoreThanEightOctetsIsRefused) {
  post_recv(7);
  const uint8_t imm[12] = {};
  feed(untagged(wire::Opcode::ImmediateData, wire::kQnSend), imm);
  EXPECT_EQ(sent_cause(), (wire::TerminateCause{TermLayer::Rdma, term::kRdmaRemoteOperation,
                                                term::kUnspecified}));
}

TEST_F(QpRfc7306CraftedTest, ImmediateDataWithoutAReceiveIsNoBuffer) {
  const uint8_t imm[8] = {};
  feed(untagged(wire::Opcode::ImmediateData, wire::kQnSend), imm);
  EXPECT_EQ(sent_cause(),
            (wire::TerminateCause{TermLayer::Ddp, term::kDdpUntagged, term::kDdpNoBuffer}));
}

TEST_F(QpRfc7306CraftedTest, AnUndefinedAtomicOpcodeIsUnexpected) {
  std::vector<uint8_t> t(8, 0);
  const memory::Stag tk = q.reg_mr(t, kRemoteAtomic | kLocalWrite);
  wire::AtomicRequestHeader ar;
  ar.aopcode = 1;  // Reserved (RFC 7306 §10.1)
  ar.stag = tk;
  ar.to = reinterpret_cast<uint64_t>(t.data());
  ar.data = 5;
  uint8_t hdr[wire::kAtomicRequestHeaderSize];
  wire::encode_atomic_request(hdr, ar);
  feed(untagged(wire::Opcode::AtomicRequest, wire::kQnReadRequest), hdr);
  EXPECT_EQ(sent_cause(), (wire::TerminateCause{TermLayer::Rdma, term::kRdmaRemoteOperation,
                                                term::kUnexpectedOpcode}));
  EXPECT_EQ(t, std::vector<uint8_t>(8, 0));
}

TEST_F(QpRfc7306CraftedTest, AnAtomicResponseNobodyAskedForIsUnexpected) {
  uint8_t hdr[wire::kAtomicResponseHeaderSize];
  wire::encode_atomic_response(hdr, {0, 1});
  feed(untagged(wire::Opcode::AtomicResponse, wire::kQnAtomicResponse), hdr);
  EXPECT_EQ(sent_cause(), (wire::TerminateCause{TermLayer::Rdma, term::kRdmaRemoteOperation,
                                                term::kUnexpectedOpcode}));
}

TEST_F(QpRfc7306CraftedTest, AnAtomicRequestTooShortForItsHeaderIsRefused) {
  const uint8_t part[20] = {};
  feed(untagged(wire::Opcode::AtomicRequest, wire::kQnReadRequest), part);
  EXPECT_EQ(sent_cause(), (wire::TerminateCause{TermLayer::Rdma, term::kRdmaRemoteOperation,
                                                term::kUnspecified}));
}

}  // namespace
}  // namespace uiw::engine::test
