// DDP over SCTP payloads (RFC 5043 §5; digest §5.2-§5.6).
#include "wire/sctp.h"

#include <gtest/gtest.h>

#include <vector>

#include "unit/wire/wire_test_util.h"

namespace uiw::wire {
namespace {

using test::from_hex;
using test::to_hex;

TEST(SctpTest, AdaptationIndicationBytes) {
  uint8_t buf[8];
  ASSERT_EQ(encode_adaptation_indication(buf), 8u);
  EXPECT_EQ(to_hex(buf), to_hex(from_hex("c006"          // Type 0xC006
                                         "0008"          // Length 8
                                         "00000001")));  // DDP adaptation indication
  uint32_t v = 0;
  EXPECT_EQ(decode_adaptation_indication(buf, &v), SctpDecodeError::None);
  EXPECT_EQ(v, kDdpAdaptationIndication);
}

TEST(SctpTest, AdaptationIndicationOtherValueDecodes) {
  // RFC 5043 §11.1: any other indication means "no DDP" — the caller decides.
  auto in = from_hex("c006 0008 12345678");
  uint32_t v = 0;
  EXPECT_EQ(decode_adaptation_indication(in, &v), SctpDecodeError::None);
  EXPECT_EQ(v, 0x12345678u);
}

TEST(SctpTest, AdaptationIndicationErrors) {
  uint32_t v = 0;
  EXPECT_EQ(decode_adaptation_indication(from_hex("c006 0008 000000"), &v),
            SctpDecodeError::TooShort);
  EXPECT_EQ(decode_adaptation_indication(from_hex("c007 0008 00000001"), &v),
            SctpDecodeError::BadParameter);
  EXPECT_EQ(decode_adaptation_indication(from_hex("c006 000c 00000001"), &v),
            SctpDecodeError::BadParameter);
  uint8_t small[7];
  EXPECT_EQ(encode_adaptation_indication(small), 0u);
}

TEST(SctpTest, DdpSegmentChunk) {
  auto seg = from_hex("4143 00000000 00000000 00000001 00000000 abcd");
  std::vector<uint8_t> buf(2 + seg.size());
  ASSERT_EQ(encode_ddp_segment_chunk(buf, 0xFFFE, seg), buf.size());
  EXPECT_EQ(buf[0], 0xFF);  // DDP-SSN, big-endian
  EXPECT_EQ(buf[1], 0xFE);
  uint16_t ssn = 0;
  std::span<const uint8_t> out;
  ASSERT_EQ(decode_ddp_segment_chunk(buf, &ssn, &out), SctpDecodeError::None);
  EXPECT_EQ(ssn, 0xFFFE);
  EXPECT_EQ(std::vector<uint8_t>(out.begin(), out.end()), seg);
  EXPECT_EQ(decode_ddp_segment_chunk(from_hex("00"), &ssn, &out), SctpDecodeError::TooShort);
  std::vector<uint8_t> small(seg.size() + 1);
  EXPECT_EQ(encode_ddp_segment_chunk(small, 1, seg), 0u);
}

TEST(SctpTest, SessionControlEachFunction) {
  const std::vector<uint8_t> pd = {'p', 'd'};
  for (auto fn : {SessionFunction::Initiate, SessionFunction::Accept, SessionFunction::Reject}) {
    SessionControl s{.ddp_ssn = 0, .function = fn, .private_data = pd};
    std::vector<uint8_t> buf(session_control_size(s));
    ASSERT_EQ(encode_session_control(buf, s), 6u);
    EXPECT_EQ(buf[2], 0);
    EXPECT_EQ(buf[3], static_cast<uint8_t>(fn));
    SessionControl g;
    ASSERT_EQ(decode_session_control(buf, &g), SctpDecodeError::None);
    EXPECT_EQ(g.function, fn);
    EXPECT_EQ(std::vector<uint8_t>(g.private_data.begin(), g.private_data.end()), pd);
  }
}

TEST(SctpTest, SessionInitiateBytes) {
  const std::vector<uint8_t> pd = {0xAA};
  SessionControl s{.ddp_ssn = 0, .function = SessionFunction::Initiate, .private_data = pd};
  uint8_t buf[5];
  ASSERT_EQ(encode_session_control(buf, s), 5u);
  EXPECT_EQ(to_hex(buf), to_hex(from_hex("0000"    // DDP-SSN 0 (first chunk of the session)
                                         "0001"    // Function Code: Initiate
                                         "aa")));  // Private Data
}

TEST(SctpTest, SessionTerminateHasNoPrivateData) {
  SessionControl s{.ddp_ssn = 7, .function = SessionFunction::Terminate, .private_data = {}};
  uint8_t buf[4];
  ASSERT_EQ(encode_session_control(buf, s), 4u);
  EXPECT_EQ(to_hex(buf), "00070004");
  SessionControl g;
  EXPECT_EQ(decode_session_control(buf, &g), SctpDecodeError::None);
  EXPECT_EQ(g.function, SessionFunction::Terminate);
  EXPECT_EQ(decode_session_control(from_hex("0007 0004 00"), &g),
            SctpDecodeError::TerminateWithPrivateData);
  const std::vector<uint8_t> pd = {1};
  s.private_data = pd;
  uint8_t big[8];
  EXPECT_EQ(encode_session_control(big, s), 0u);
}

TEST(SctpTest, SessionPrivateData512And513) {
  std::vector<uint8_t> in(4 + 512, 0);
  in[3] = 1;  // Initiate
  SessionControl g;
  EXPECT_EQ(decode_session_control(in, &g), SctpDecodeError::None);
  EXPECT_EQ(g.private_data.size(), 512u);
  in.push_back(0);
  EXPECT_EQ(decode_session_control(in, &g), SctpDecodeError::PrivateDataTooLong);
  std::vector<uint8_t> pd(513);
  SessionControl s{.ddp_ssn = 0, .function = SessionFunction::Accept, .private_data = pd};
  std::vector<uint8_t> out(600);
  EXPECT_EQ(encode_session_control(out, s), 0u);
  s.private_data = std::span(pd).first(512);
  EXPECT_EQ(encode_session_control(out, s), 516u);  // = kSctpMinMaxSegment
}

TEST(SctpTest, SessionBadFunctionAndTooShort) {
  SessionControl g;
  EXPECT_EQ(decode_session_control(from_hex("0000 0000"), &g), SctpDecodeError::BadFunction);
  EXPECT_EQ(decode_session_control(from_hex("0000 0005"), &g), SctpDecodeError::BadFunction);
  EXPECT_EQ(decode_session_control(from_hex("0000 0100"), &g), SctpDecodeError::BadFunction);
  EXPECT_EQ(decode_session_control(from_hex("0000 00"), &g), SctpDecodeError::TooShort);
}

TEST(SctpTest, SsnSerialArithmetic) {
  EXPECT_TRUE(ssn_less(0, 1));
  EXPECT_FALSE(ssn_less(1, 0));
  EXPECT_FALSE(ssn_less(5, 5));
  EXPECT_TRUE(ssn_less(65535, 0));  // wrap
  EXPECT_FALSE(ssn_less(0, 65535));
  EXPECT_TRUE(ssn_less(100, 100 + 32767));
  EXPECT_FALSE(ssn_less(100, 100 + 32768));  // beyond the 2^15 window
  static_assert(ssn_less(65000, 10));
}

}  // namespace
}  // namespace uiw::wire
