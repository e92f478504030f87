// CRC32c known answers: RFC 3720 Appendix B.4 vectors (digest §8.5), the "123456789" check
// value, chaining, and the receiver residue (digest §8.2).
#include "wire/crc32c.h"

#include <gtest/gtest.h>

#include <numeric>
#include <random>
#include <vector>

#include "unit/wire/wire_test_util.h"
#include "wire/bytes.h"

namespace uiw::wire {
namespace {

using test::from_hex;

// The CRC as it appears on the wire: least-significant octet first (RFC 5044 §4.4, Figure 5).
std::vector<uint8_t> wire_crc(const std::vector<uint8_t>& data) {
  std::vector<uint8_t> out(4);
  store_le32(out.data(), crc32c(data.data(), data.size()));
  return out;
}

TEST(Crc32cTest, CheckValue123456789) {
  const char* s = "123456789";
  EXPECT_EQ(crc32c(s, 9), 0xE3069283u);
  // ISA-L's convention: crc32_iscsi(buf, len, 0xFFFFFFFF) ^ 0xFFFFFFFF.
  EXPECT_EQ(crc32c_final(crc32c_update(kCrc32cInit, s, 9)), 0xE3069283u);
}

TEST(Crc32cTest, CheckValueOnWireIsLsbFirst) {
  std::vector<uint8_t> s = {'1', '2', '3', '4', '5', '6', '7', '8', '9'};
  EXPECT_EQ(wire_crc(s), from_hex("83 92 06 e3"));
}

TEST(Crc32cTest, Rfc3720ThirtyTwoZeros) {
  EXPECT_EQ(wire_crc(std::vector<uint8_t>(32, 0x00)), from_hex("aa 36 91 8a"));
}

TEST(Crc32cTest, Rfc3720ThirtyTwoOnes) {
  EXPECT_EQ(wire_crc(std::vector<uint8_t>(32, 0xFF)), from_hex("43 ab a8 62"));
}

TEST(Crc32cTest, Rfc3720Incrementing) {
  std::vector<uint8_t> d(32);
  std::iota(d.begin(), d.end(), uint8_t{0});
  EXPECT_EQ(wire_crc(d), from_hex("4e 79 dd 46"));
}

TEST(Crc32cTest, Rfc3720Decrementing) {
  std::vector<uint8_t> d(32);
  for (size_t i = 0; i < d.size(); ++i) d[i] = static_cast<uint8_t>(31 - i);
  EXPECT_EQ(wire_crc(d), from_hex("5c db 3f 11"));
}

TEST(Crc32cTest, Rfc3720IscsiRead10Pdu) {
  // 48-octet iSCSI SCSI Read(10) command PDU from RFC 3720 B.4.
  auto pdu = from_hex(
      "01 c0 00 00  00 00 00 00  00 00 00 00  00 00 00 00"
      "14 00 00 00  00 00 04 00  00 00 00 14  00 00 00 18"
      "28 00 00 00  00 00 00 00  02 00 00 00  00 00 00 00");
  ASSERT_EQ(pdu.size(), 48u);
  EXPECT_EQ(wire_crc(pdu), from_hex("56 3a 96 d9"));
}

TEST(Crc32cTest, EmptyInputIsZero) {
  EXPECT_EQ(crc32c(nullptr, 0), 0u);
  EXPECT_EQ(crc32c_update(0x12345678u, nullptr, 0), 0x12345678u);
}

TEST(Crc32cTest, ChainedEqualsOneShotAtEverySplit) {
  std::mt19937 rng(7);
  std::vector<uint8_t> d(300);
  for (auto& b : d) b = static_cast<uint8_t>(rng());
  const uint32_t one = crc32c(d.data(), d.size());
  for (size_t split = 0; split <= d.size(); ++split) {
    uint32_t s = crc32c_update(kCrc32cInit, d.data(), split);
    s = crc32c_update(s, d.data() + split, d.size() - split);
    ASSERT_EQ(crc32c_final(s), one) << "split " << split;
  }
}

TEST(Crc32cTest, ReceiverResidueConstant) {
  // Digest §8.2: the raw register over data + the CRC octets as received is 0xB798B438.
  std::mt19937 rng(11);
  for (int round = 0; round < 50; ++round) {
    std::vector<uint8_t> d(1 + rng() % 200);
    for (auto& b : d) b = static_cast<uint8_t>(rng());
    auto crc = wire_crc(d);
    d.insert(d.end(), crc.begin(), crc.end());
    EXPECT_EQ(crc32c_update(kCrc32cInit, d.data(), d.size()), 0xB798B438u);
  }
}

TEST(Crc32cTest, SingleBitFlipChangesCrc) {
  std::vector<uint8_t> d(64, 0x5A);
  const uint32_t base = crc32c(d.data(), d.size());
  for (size_t bit = 0; bit < d.size() * 8; ++bit) {
    d[bit / 8] ^= static_cast<uint8_t>(1u << (bit % 8));
    ASSERT_NE(crc32c(d.data(), d.size()), base) << "bit " << bit;
    d[bit / 8] ^= static_cast<uint8_t>(1u << (bit % 8));
  }
}

}  // namespace
}  // namespace uiw::wire
