// One Terminate per class, provoked by a crafted frame from a raw socket that negotiated MPA by
// hand: the exact Terminate FPDU bytes the uiw endpoint sends back are checked, and guard bytes
// prove nothing outside (or inside) the target region changed.
#include <gtest/gtest.h>
#include <poll.h>
#include <unistd.h>

#include <cstring>
#include <thread>

#include "integration/support/endpoint.h"
#include "transport/socket_util.h"
#include "wire/bytes.h"
#include "wire/ddp.h"
#include "wire/mpa.h"
#include "wire/rdmap.h"
#include "wire/terminate.h"

namespace uiw::test {
namespace {

using wire::TermLayer;
namespace term = wire::term;

class TerminateWireTest : public testing::TestWithParam<bool /*crc*/> {
 protected:
  void SetUp() override {
    LinkOptions o;
    o.crc = GetParam();
    o.rtr = transport::RtrType::None;
    Listener l;
    ASSERT_GE(l.fd, 0);
    int rc = -1;
    std::thread t([&] { rc = server.accept(l.fd, o); });
    fd = transport::tcp_connect("127.0.0.1", l.port, 5000);
    ASSERT_GE(fd, 0);
    transport::MpaConfig c;
    c.crc = o.crc;
    c.rtr = transport::RtrType::None;
    ASSERT_EQ(transport::mpa_initiate(fd, c, &mpa), 0);
    t.join();
    ASSERT_EQ(rc, 0);
    region.assign(8192, 0x5C);
    rkey = server.reg(region.data() + kGuard, region.size() - 2 * kGuard,
                      memory::kLocalWrite | memory::kRemoteWrite | memory::kRemoteRead);
  }
  void TearDown() override {
    if (fd >= 0) close(fd);
  }
  static constexpr size_t kGuard = 1024;
  uint64_t base() const { return reinterpret_cast<uint64_t>(region.data()) + kGuard; }

  // Sends one FPDU carrying `hdr` + `extra` (optionally with the CRC corrupted).
  std::vector<uint8_t> send_segment(const wire::SegmentHeader& hdr, std::vector<uint8_t> extra,
                                    bool bad_crc = false) {
    std::vector<uint8_t> ulpdu(wire::segment_header_size(hdr.tagged));
    wire::encode_segment_header(ulpdu.data(), hdr);
    ulpdu.insert(ulpdu.end(), extra.begin(), extra.end());
    std::vector<uint8_t> fpdu(wire::fpdu_size(ulpdu.size()));
    wire::encode_fpdu(fpdu, 0, ulpdu, true, false);  // always a real CRC: only bad_crc breaks it
    if (bad_crc) fpdu.back() ^= 0xFF;
    EXPECT_EQ(write(fd, fpdu.data(), fpdu.size()), static_cast<ssize_t>(fpdu.size()));
    return ulpdu;
  }
  // Everything the endpoint sends until it closes.
  std::vector<uint8_t> read_all() {
    std::vector<uint8_t> out;
    uint8_t buf[4096];
    for (;;) {
      pollfd p{fd, POLLIN, 0};
      if (poll(&p, 1, 10000) <= 0) break;
      const ssize_t n = read(fd, buf, sizeof buf);
      if (n <= 0) break;
      out.insert(out.end(), buf, buf + n);
    }
    return out;
  }
  // The exact Terminate FPDU expected (RDMAP §4.8, Figure 10 header rules).
  std::vector<uint8_t> expected(wire::TerminateCause cause, const std::vector<uint8_t>* ulpdu,
                                bool with_rdma) {
    wire::TerminateMessage t{};
    t.cause = cause;
    if (ulpdu) {
      t.m = t.d = true;
      t.ddp_segment_length = static_cast<uint16_t>(ulpdu->size());
      t.ddp_header_size = wire::segment_header_size((*ulpdu)[0] & wire::kDdpFlagTagged);
      std::memcpy(t.ddp_header, ulpdu->data(), t.ddp_header_size);
    }
    if (with_rdma) {
      t.r = true;
      std::memcpy(t.rdma_header, ulpdu->data() + wire::kUntaggedHeaderSize, 28);
    }
    wire::SegmentHeader h;
    h.last = true;
    h.rdmap_control = wire::rdmap_control(wire::Opcode::Terminate);
    h.qn = 2;
    h.msn = 1;
    std::vector<uint8_t> body(wire::kUntaggedHeaderSize + wire::terminate_size(t));
    wire::encode_segment_header(body.data(), h);
    wire::encode_terminate(std::span(body).subspan(wire::kUntaggedHeaderSize), t);
    std::vector<uint8_t> fpdu(wire::fpdu_size(body.size()));
    wire::encode_fpdu(fpdu, 0, body, mpa.crc, false);
    return fpdu;
  }
  void expect_region_untouched() {
    EXPECT_EQ(region, std::vector<uint8_t>(8192, 0x5C));
    EXPECT_TRUE(server.wait_error());
    EXPECT_TRUE(server.queue_pair().with_engine(
        [](engine::Qp& e) { return e.terminate_sent().has_value(); }));
  }
  Endpoint server{2};
  int fd = -1;
  transport::MpaResult mpa{};
  std::vector<uint8_t> region;
  memory::Stag rkey = 0;
};

TEST_P(TerminateWireTest, DdpTaggedWriteBeyondBounds) {
  wire::SegmentHeader h;
  h.tagged = h.last = true;
  h.rdmap_control = wire::rdmap_control(wire::Opcode::RdmaWrite);
  h.stag = rkey;
  h.to = base() + 8192 - 2 * kGuard - 10;  // 10 bytes left, 64 sent: the high guard is next
  const auto u = send_segment(h, std::vector<uint8_t>(64, 0xFF));
  EXPECT_EQ(read_all(),
            expected({TermLayer::Ddp, term::kDdpTagged, term::kDdpBaseBounds}, &u, false));
  expect_region_untouched();
}

TEST_P(TerminateWireTest, DdpTaggedWrongKeyByte) {
  wire::SegmentHeader h;
  h.tagged = h.last = true;
  h.rdmap_control = wire::rdmap_control(wire::Opcode::RdmaWrite);
  h.stag = rkey ^ 0x01;
  h.to = base();
  const auto u = send_segment(h, std::vector<uint8_t>(64, 0xFF));
  EXPECT_EQ(read_all(),
            expected({TermLayer::Ddp, term::kDdpTagged, term::kDdpInvalidStag}, &u, false));
  expect_region_untouched();
}

TEST_P(TerminateWireTest, DdpUntaggedSendWithoutReceive) {
  wire::SegmentHeader h;
  h.last = true;
  h.rdmap_control = wire::rdmap_control(wire::Opcode::Send);
  h.msn = 1;
  const auto u = send_segment(h, std::vector<uint8_t>(100, 1));
  EXPECT_EQ(read_all(),
            expected({TermLayer::Ddp, term::kDdpUntagged, term::kDdpNoBuffer}, &u, false));
  expect_region_untouched();
}

TEST_P(TerminateWireTest, RdmaRemoteProtectionReadBeyondBounds) {
  wire::SegmentHeader h;
  h.last = true;
  h.rdmap_control = wire::rdmap_control(wire::Opcode::ReadRequest);
  h.qn = 1;
  h.msn = 1;
  std::vector<uint8_t> rr(28);
  wire::encode_read_request(rr.data(), {0x1234, 0, 8192, rkey, base()});
  const auto u = send_segment(h, rr);
  EXPECT_EQ(read_all(),
            expected({TermLayer::Rdma, term::kRdmaRemoteProtection, term::kBaseBounds}, &u, true));
  expect_region_untouched();
}

TEST_P(TerminateWireTest, RdmaRemoteOperationReservedOpcode) {
  wire::SegmentHeader h;
  h.last = true;
  h.rdmap_control = 0x40 | 0x0C;
  h.msn = 1;
  const auto u = send_segment(h, {});
  EXPECT_EQ(
      read_all(),
      expected({TermLayer::Rdma, term::kRdmaRemoteOperation, term::kUnexpectedOpcode}, &u, false));
  expect_region_untouched();
}

TEST_P(TerminateWireTest, LlpCrcErrorOnlyWhenCrcNegotiated) {
  wire::SegmentHeader h;
  h.tagged = h.last = true;
  h.rdmap_control = wire::rdmap_control(wire::Opcode::RdmaWrite);
  h.stag = rkey;
  h.to = base();
  send_segment(h, std::vector<uint8_t>(32, 0x77), true);
  if (!GetParam()) {
    // RFC 5044 §4.1: with CRCs disabled the field "MUST NOT be checked": the Write is placed.
    auto rx_fpdus = [&] {
      return server.queue_pair().with_engine([](engine::Qp& e) { return e.stats().rx_fpdus; });
    };
    for (int i = 0; i < 2000 && rx_fpdus() == 0; ++i) usleep(1000);
    EXPECT_EQ(rx_fpdus(), 1u);
    EXPECT_EQ(server.state(), engine::QpState::Rts);
    EXPECT_EQ(region[kGuard], 0x77);
    EXPECT_EQ(region[kGuard + 32], 0x5C);
    return;
  }
  EXPECT_EQ(read_all(), expected({TermLayer::Llp, term::kLlpMpa, term::kMpaCrc}, nullptr, false));
  // The payload was placed (in bounds) before the CRC could be checked; nothing outside it was.
  for (size_t i = 0; i < kGuard; ++i) ASSERT_EQ(region[i], 0x5C);
  for (size_t i = kGuard + 32; i < region.size(); ++i) ASSERT_EQ(region[i], 0x5C);
  EXPECT_TRUE(server.wait_error());
}

INSTANTIATE_TEST_SUITE_P(Crc, TerminateWireTest, testing::Bool(),
                         [](const auto& i) { return i.param ? "Crc" : "NoCrc"; });

}  // namespace
}  // namespace uiw::test
