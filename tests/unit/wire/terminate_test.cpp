// Terminate header and master code table (RFC 5040 §4.8, Figures 8-10; digest §4.8-§4.10, §7).
#include "wire/terminate.h"

#include <gtest/gtest.h>

#include <cstring>
#include <set>
#include <vector>

#include "unit/wire/wire_test_util.h"
#include "wire/ddp.h"
#include "wire/mpa.h"
#include "wire/rdmap.h"

namespace uiw::wire {
namespace {

using test::from_hex;
using test::to_hex;
using namespace term;

// A copied tagged header (the RDMA Write of digest §8.6) and untagged Read Request header.
const char* kWriteHdr = "c140 12345678 00000000 00001000";
const char* kReadReqDdpHdr = "4141 00000000 00000001 00000001 00000000";
const char* kReadReqRdmaHdr = "11111111 00000000 00002000 00000100 22222222 00000000 00003000";

TerminateMessage make(TerminateCause c, bool is_read_request) {
  TerminateMessage t;
  t.cause = c;
  auto f = terminate_flags_for(c, is_read_request);
  t.m = f.m;
  t.d = f.d;
  t.r = f.r;
  if (t.d) {
    auto h = from_hex(is_read_request ? kReadReqDdpHdr : kWriteHdr);
    std::memcpy(t.ddp_header, h.data(), h.size());
    t.ddp_header_size = h.size();
    t.ddp_segment_length = is_read_request ? 46 : 18;
  }
  if (t.r) {
    auto r = from_hex(kReadReqRdmaHdr);
    std::memcpy(t.rdma_header, r.data(), r.size());
  }
  return t;
}

TEST(TerminateTest, MasterTableHasEveryRow) {
  auto all = all_terminate_causes();
  EXPECT_EQ(all.size(), 33u);  // digest §7: 14 RDMA + 12 DDP + 7 MPA rows
  std::set<std::tuple<int, int, int>> seen;
  for (const auto& c : all) {
    EXPECT_NE(terminate_cause_name(c), nullptr);
    EXPECT_TRUE(seen.insert({int(c.layer), c.etype, c.code}).second) << "duplicate row";
  }
}

TEST(TerminateTest, EveryCauseRoundTrips) {
  for (const auto& c : all_terminate_causes()) {
    for (bool rreq : {false, true}) {
      auto t = make(c, rreq);
      uint8_t buf[kTerminateMaxSize];
      size_t n = encode_terminate(buf, t);
      ASSERT_EQ(n, terminate_size(t)) << terminate_cause_name(c);
      TerminateMessage g;
      ASSERT_EQ(decode_terminate(std::span(buf, n), &g), TerminateDecodeError::None);
      EXPECT_EQ(g.cause, c) << terminate_cause_name(c);
      EXPECT_EQ(g.m, t.m);
      EXPECT_EQ(g.d, t.d);
      EXPECT_EQ(g.r, t.r);
      EXPECT_EQ(g.ddp_segment_length, t.ddp_segment_length);
      EXPECT_EQ(g.ddp_header_size, t.ddp_header_size);
      EXPECT_EQ(0, std::memcmp(g.ddp_header, t.ddp_header, t.ddp_header_size));
      if (t.r) {
        EXPECT_EQ(0, std::memcmp(g.rdma_header, t.rdma_header, 28));
      }
    }
  }
}

TEST(TerminateTest, Section410ExampleControlWords) {
  struct Ex {
    TerminateCause cause;
    bool rreq;
    uint32_t word;
  };
  const Ex ex[] = {
      {{TermLayer::Rdma, kRdmaLocalCatastrophic, 0}, false, 0x00000000},
      {{TermLayer::Ddp, kDdpTagged, kDdpInvalidStag}, false, 0x1100C000},
      {{TermLayer::Ddp, kDdpTagged, kDdpBaseBounds}, false, 0x1101C000},
      {{TermLayer::Ddp, kDdpUntagged, kDdpNoBuffer}, false, 0x1202C000},
      {{TermLayer::Ddp, kDdpUntagged, kDdpTooLong}, false, 0x1205C000},
      {{TermLayer::Rdma, kRdmaRemoteProtection, kInvalidStag}, true, 0x0100E000},
      {{TermLayer::Rdma, kRdmaRemoteProtection, kBaseBounds}, true, 0x0101E000},
      {{TermLayer::Rdma, kRdmaRemoteProtection, kAccessRights}, true, 0x0102E000},
      {{TermLayer::Rdma, kRdmaRemoteOperation, kUnexpectedOpcode}, false, 0x0206C000},
      {{TermLayer::Rdma, kRdmaRemoteOperation, kInvalidRdmapVersion}, false, 0x0205C000},
      {{TermLayer::Llp, kLlpMpa, kMpaCrc}, false, 0x20020000},
  };
  for (const auto& e : ex) {
    auto t = make(e.cause, e.rreq);
    EXPECT_EQ(terminate_control_word(t), e.word) << terminate_cause_name(e.cause);
    uint8_t buf[kTerminateMaxSize];
    ASSERT_GT(encode_terminate(buf, t), 0u);
    EXPECT_EQ((uint32_t{buf[0]} << 24 | uint32_t{buf[1]} << 16 | uint32_t{buf[2]} << 8 | buf[3]),
              e.word);
  }
}

TEST(TerminateTest, DigestTerminateFpduVector) {
  // Digest §8.6: Terminate, QN 2, MSN 1: DDP/Tagged/Base-or-bounds, M=D=1, length 18, copied
  // tagged header of the RDMA Write; then framed as an FPDU without Markers, CRC on.
  auto t = make({TermLayer::Ddp, kDdpTagged, kDdpBaseBounds}, false);
  SegmentHeader h;
  h.last = true;
  h.rdmap_control = rdmap_control(Opcode::Terminate);
  h.qn = kQnTerminate;
  h.msn = 1;
  std::vector<uint8_t> ulpdu(kUntaggedHeaderSize + terminate_size(t));
  encode_segment_header(ulpdu.data(), h);
  ASSERT_EQ(encode_terminate(std::span(ulpdu).subspan(kUntaggedHeaderSize), t), 20u);
  std::vector<uint8_t> wire(fpdu_size(ulpdu.size()));
  ASSERT_EQ(encode_fpdu(wire, 0, ulpdu, true, false), wire.size());
  EXPECT_EQ(to_hex(wire), to_hex(from_hex("0026"                                 // ULPDU_Length 38
                                          "4147"                                 // DDP L, Terminate
                                          "00000000 00000002 00000001 00000000"  // QN 2 MSN 1
                                          "1101c000"                         // Terminate control
                                          "0012"                             // DDP Segment Length
                                          "c140 12345678 00000000 00001000"  // copied header
                                          "42347cf9")));                     // CRC
}

TEST(TerminateTest, ReadRequestTerminateLayout) {
  auto t = make({TermLayer::Rdma, kRdmaRemoteProtection, kAccessRights}, true);
  uint8_t buf[kTerminateMaxSize];
  ASSERT_EQ(encode_terminate(buf, t), 52u);  // 4 + 2 + 18 + 28
  EXPECT_EQ(to_hex(buf),
            to_hex(from_hex(std::string("0102e000 002e") + kReadReqDdpHdr + kReadReqRdmaHdr)));
}

TEST(TerminateTest, NamesAndUnknownCodes) {
  EXPECT_STREQ(terminate_cause_name({TermLayer::Llp, kLlpMpa, kMpaMarker}),
               "MPA: Marker and ULPDU Length field mismatch");
  EXPECT_NE(terminate_cause_name({TermLayer::Rdma, kRdmaRemoteProtection, kCannotInvalidate}),
            nullptr);
  EXPECT_NE(terminate_cause_name({TermLayer::Rdma, kRdmaRemoteOperation, kCannotInvalidate}),
            nullptr);
  EXPECT_EQ(terminate_cause_name({TermLayer::Ddp, kDdpTagged, 5}), nullptr);
  EXPECT_EQ(terminate_cause_name({TermLayer::Ddp, kDdpUntagged, 0}), nullptr);
  EXPECT_EQ(terminate_cause_name({TermLayer::Ddp, 3, 0}), nullptr);  // reserved for LLP
  EXPECT_EQ(terminate_cause_name({TermLayer::Rdma, kRdmaRemoteOperation, kAccessRights}), nullptr);
  EXPECT_EQ(terminate_cause_name({TermLayer::Llp, kLlpMpa, 0}), nullptr);
  EXPECT_EQ(terminate_cause_name({TermLayer::Llp, 1, kMpaCrc}), nullptr);
  EXPECT_EQ(terminate_cause_name({static_cast<TermLayer>(3), 0, 0}), nullptr);
}

TEST(TerminateTest, FlagsFollowFigure10) {
  auto f = terminate_flags_for({TermLayer::Llp, kLlpMpa, kMpaCrc}, true);
  EXPECT_FALSE(f.m || f.d || f.r);  // LLP: no headers
  f = terminate_flags_for({TermLayer::Rdma, kRdmaLocalCatastrophic, 0}, true);
  EXPECT_FALSE(f.m || f.d || f.r);  // local catastrophic: no DDP header
  f = terminate_flags_for({TermLayer::Ddp, kDdpLocalCatastrophic, 0});
  EXPECT_FALSE(f.m || f.d || f.r);
  f = terminate_flags_for({TermLayer::Ddp, kDdpUntagged, kDdpInvalidQn}, true);
  EXPECT_TRUE(f.m && f.d);
  EXPECT_FALSE(f.r);  // DDP errors never copy the RDMA header
  f = terminate_flags_for({TermLayer::Rdma, kRdmaRemoteProtection, kInvalidStag}, false);
  EXPECT_TRUE(f.m && f.d);
  EXPECT_FALSE(f.r);  // Send with Invalidate: no RDMA header to copy
  f = terminate_flags_for({TermLayer::Rdma, kRdmaRemoteOperation, kUnexpectedOpcode}, true);
  EXPECT_TRUE(f.m && f.d && f.r);
}

TEST(TerminateTest, DecodePicksCopiedHeaderSizeFromTBit) {
  auto tagged = from_hex(std::string("1100c000 0012") + kWriteHdr);
  TerminateMessage t;
  ASSERT_EQ(decode_terminate(tagged, &t), TerminateDecodeError::None);
  EXPECT_EQ(t.ddp_header_size, 14u);
  EXPECT_EQ(t.ddp_segment_length, 18);
  auto untagged = from_hex("1202c000 0018 4143 00000000 00000000 00000005 00000000");
  ASSERT_EQ(decode_terminate(untagged, &t), TerminateDecodeError::None);
  EXPECT_EQ(t.ddp_header_size, 18u);
  EXPECT_EQ(t.cause, (TerminateCause{TermLayer::Ddp, kDdpUntagged, kDdpNoBuffer}));
}

TEST(TerminateTest, DecodeTooShortAtEveryCut) {
  auto full = from_hex(std::string("0102e000 002e") + kReadReqDdpHdr + kReadReqRdmaHdr);
  ASSERT_EQ(full.size(), 52u);
  for (size_t cut = 0; cut < full.size(); ++cut) {
    TerminateMessage t;
    EXPECT_EQ(decode_terminate(std::span(full).first(cut), &t), TerminateDecodeError::TooShort)
        << cut;
  }
}

TEST(TerminateTest, DecodeRejectsRdmaHeaderWithoutUntaggedDdpHeader) {
  TerminateMessage t;
  auto r_without_d = from_hex(std::string("0100a000 002e") + kReadReqRdmaHdr);  // M R, no D
  EXPECT_EQ(decode_terminate(r_without_d, &t), TerminateDecodeError::BadHeaderLength);
  auto r_tagged = from_hex(std::string("0100e000 0012") + kWriteHdr + kReadReqRdmaHdr);
  EXPECT_EQ(decode_terminate(r_tagged, &t), TerminateDecodeError::BadHeaderLength);
}

TEST(TerminateTest, DecodeIgnoresReservedBitsAndTrailingZeros) {
  // RFC 5040 §4.8: reserved bits ignored; §7.1 item 21 senders may send zeroed header fields.
  auto in = from_hex("2002 1fff");  // LLP/MPA/CRC, M=D=R=0, all 13 reserved bits set
  in.resize(52, 0);
  TerminateMessage t;
  ASSERT_EQ(decode_terminate(in, &t), TerminateDecodeError::None);
  EXPECT_EQ(t.cause, (TerminateCause{TermLayer::Llp, kLlpMpa, kMpaCrc}));
  EXPECT_FALSE(t.m || t.d || t.r);
  EXPECT_EQ(terminate_size(t), 4u);
}

TEST(TerminateTest, MOnlyCarriesLengthWithoutHeader) {
  TerminateMessage t;
  t.cause = {TermLayer::Ddp, kDdpUntagged, kDdpMsnRange};
  t.m = true;
  t.ddp_segment_length = 0x1234;
  uint8_t buf[kTerminateMaxSize];
  ASSERT_EQ(encode_terminate(buf, t), 6u);
  EXPECT_EQ(to_hex(std::span(buf, 6)), "12038000 1234");
  TerminateMessage g;
  ASSERT_EQ(decode_terminate(std::span(buf, 6), &g), TerminateDecodeError::None);
  EXPECT_EQ(g.ddp_segment_length, 0x1234);
  EXPECT_EQ(g.ddp_header_size, 0u);
}

TEST(TerminateTest, EncodeRejectsBadInputs) {
  TerminateMessage t = make({TermLayer::Ddp, kDdpTagged, kDdpToWrap}, false);
  uint8_t small[19];
  EXPECT_EQ(encode_terminate(small, t), 0u);  // needs 20
  t.ddp_header_size = 10;
  uint8_t buf[kTerminateMaxSize];
  EXPECT_EQ(encode_terminate(buf, t), 0u);
}

}  // namespace
}  // namespace uiw::wire
