// DDP tagged/untagged segment headers (RFC 5041 §4; digest §3.2-§3.4).
#include "wire/ddp.h"

#include <gtest/gtest.h>

#include <vector>

#include "unit/wire/wire_test_util.h"
#include "wire/rdmap.h"

namespace uiw::wire {
namespace {

using test::from_hex;
using test::to_hex;

std::string encode_hex(const SegmentHeader& h) {
  uint8_t buf[kUntaggedHeaderSize] = {};
  size_t n = encode_segment_header(buf, h);
  EXPECT_EQ(n, segment_header_size(h.tagged));
  return to_hex(std::span(buf, n));
}

TEST(DdpTest, HeaderSizes) {
  EXPECT_EQ(segment_header_size(true), 14u);
  EXPECT_EQ(segment_header_size(false), 18u);
}

TEST(DdpTest, EncodeTaggedRdmaWrite) {
  SegmentHeader h;
  h.tagged = true;
  h.last = true;
  h.rdmap_control = rdmap_control(Opcode::RdmaWrite);
  h.stag = 0x12345678;
  h.to = 0x1000;
  EXPECT_EQ(encode_hex(h), to_hex(from_hex("c1"                     // T=1 L=1 DV=1
                                           "40"                     // RV=1, RDMA Write
                                           "12345678"               // STag
                                           "00000000 00001000")));  // TO
}

TEST(DdpTest, EncodeUntaggedSendFigure5) {
  SegmentHeader h;
  h.last = true;
  h.rdmap_control = rdmap_control(Opcode::Send);
  h.qn = kQnSend;
  h.msn = 1;
  EXPECT_EQ(encode_hex(h), to_hex(from_hex("41"            // T=0 L=1 DV=1
                                           "43"            // RV=1, Send
                                           "00000000"      // RsvdULP[8:39]
                                           "00000000"      // QN 0
                                           "00000001"      // MSN 1
                                           "00000000")));  // MO 0
}

TEST(DdpTest, EncodeSendWithInvalidateCarriesStag) {
  SegmentHeader h;
  h.last = false;
  h.rdmap_control = rdmap_control(Opcode::SendSeInv);
  h.inval_stag = 0xCAFEF00D;
  h.msn = 0xFFFFFFFF;
  h.mo = 1482;
  EXPECT_EQ(encode_hex(h), to_hex(from_hex("01"            // T=0 L=0 DV=1
                                           "46"            // Send with SE and Invalidate
                                           "cafef00d"      // Invalidate STag
                                           "00000000"      // QN 0
                                           "ffffffff"      // MSN
                                           "000005ca")));  // MO 1482
}

TEST(DdpTest, EncodeWritesReservedBitsAsZero) {
  SegmentHeader h;
  h.tagged = true;
  h.ddp_version = 0xFF;  // only the 2 DV bits are used
  uint8_t buf[14];
  encode_segment_header(buf, h);
  EXPECT_EQ(buf[0], 0x83);
}

TEST(DdpTest, DecodeTagged) {
  auto in = from_hex("c142 aabbccdd 0102030405060708 ffff");  // Read Response + 2 payload octets
  SegmentHeader h;
  ASSERT_EQ(decode_segment_header(in, &h), 14u);
  EXPECT_TRUE(h.tagged);
  EXPECT_TRUE(h.last);
  EXPECT_EQ(h.ddp_version, 1);
  EXPECT_EQ(rdmap_opcode(h.rdmap_control), static_cast<uint8_t>(Opcode::ReadResponse));
  EXPECT_EQ(h.stag, 0xaabbccddu);
  EXPECT_EQ(h.to, 0x0102030405060708ull);
}

TEST(DdpTest, DecodeUntagged) {
  auto in = from_hex("4144 11223344 00000000 00000007 00000010");
  SegmentHeader h;
  ASSERT_EQ(decode_segment_header(in, &h), 18u);
  EXPECT_FALSE(h.tagged);
  EXPECT_TRUE(h.last);
  EXPECT_EQ(h.inval_stag, 0x11223344u);
  EXPECT_EQ(h.qn, 0u);
  EXPECT_EQ(h.msn, 7u);
  EXPECT_EQ(h.mo, 16u);
}

TEST(DdpTest, DecodeTooShort) {
  SegmentHeader h;
  EXPECT_EQ(decode_segment_header({}, &h), 0u);
  auto tagged = from_hex("c140 00000000 00000000 000000");  // 13 octets
  EXPECT_EQ(decode_segment_header(tagged, &h), 0u);
  auto untagged = from_hex("4143 00000000 00000000 00000001 000000");  // 17 octets
  EXPECT_EQ(decode_segment_header(untagged, &h), 0u);
}

TEST(DdpTest, DecodeIgnoresReservedBitsAndReportsVersion) {
  // RFC 5041 §4.1: Rsvd "not checked on receive"; DV is reported for the caller to validate.
  auto in = from_hex("fe40 00000001 0000000000000002");  // T L Rsvd=1111 DV=2
  SegmentHeader h;
  ASSERT_EQ(decode_segment_header(in, &h), 14u);
  EXPECT_TRUE(h.tagged);
  EXPECT_TRUE(h.last);
  EXPECT_EQ(h.ddp_version, 2);
}

TEST(DdpTest, RoundTripBothForms) {
  for (bool tagged : {false, true}) {
    for (bool last : {false, true}) {
      SegmentHeader h;
      h.tagged = tagged;
      h.last = last;
      h.rdmap_control = 0x45;
      h.stag = tagged ? 0x9ABCDEF0 : 0;
      h.to = tagged ? 0xFFFFFFFFFFFFFFF0ull : 0;
      h.inval_stag = tagged ? 0 : 0x01020304;
      h.qn = tagged ? 0 : 2;
      h.msn = tagged ? 0 : 0x80000000;
      h.mo = tagged ? 0 : 0xFFFFFFFF;
      uint8_t buf[18];
      size_t n = encode_segment_header(buf, h);
      SegmentHeader g;
      ASSERT_EQ(decode_segment_header(std::span(buf, n), &g), n);
      EXPECT_EQ(g.tagged, h.tagged);
      EXPECT_EQ(g.last, h.last);
      EXPECT_EQ(g.ddp_version, kDdpVersion);
      EXPECT_EQ(g.rdmap_control, h.rdmap_control);
      EXPECT_EQ(g.stag, h.stag);
      EXPECT_EQ(g.to, h.to);
      EXPECT_EQ(g.inval_stag, h.inval_stag);
      EXPECT_EQ(g.qn, h.qn);
      EXPECT_EQ(g.msn, h.msn);
      EXPECT_EQ(g.mo, h.mo);
    }
  }
}

}  // namespace
}  // namespace uiw::wire
