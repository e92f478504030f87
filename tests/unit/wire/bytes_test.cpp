// Byte-order helpers and the bounds-checked Reader/Writer cursors.
#include "wire/bytes.h"

#include <gtest/gtest.h>

#include <array>

#include "unit/wire/wire_test_util.h"

namespace uiw::wire {
namespace {

using test::from_hex;

TEST(BytesTest, BigEndianStoreLoad) {
  std::array<uint8_t, 8> b{};
  store_be16(b.data(), 0x1234);
  EXPECT_EQ(b[0], 0x12);
  EXPECT_EQ(b[1], 0x34);
  EXPECT_EQ(load_be16(b.data()), 0x1234);
  store_be32(b.data(), 0xDEADBEEF);
  EXPECT_EQ(std::vector<uint8_t>(b.begin(), b.begin() + 4), from_hex("de ad be ef"));
  EXPECT_EQ(load_be32(b.data()), 0xDEADBEEFu);
  store_be64(b.data(), 0x0102030405060708ull);
  EXPECT_EQ(std::vector<uint8_t>(b.begin(), b.end()), from_hex("0102030405060708"));
  EXPECT_EQ(load_be64(b.data()), 0x0102030405060708ull);
}

TEST(BytesTest, LittleEndian32ForCrc) {
  std::array<uint8_t, 4> b{};
  store_le32(b.data(), 0x83992352);  // MPA Figure 5 CRC value
  EXPECT_EQ(std::vector<uint8_t>(b.begin(), b.end()), from_hex("52 23 99 83"));
  EXPECT_EQ(load_le32(b.data()), 0x83992352u);
}

TEST(BytesTest, ReaderReadsInOrderAndStopsAtEnd) {
  auto in = from_hex("01 0203 04050607 08090a0b0c0d0e0f ff");
  Reader r(in);
  uint8_t a = 0;
  uint16_t b = 0;
  uint32_t c = 0;
  uint64_t d = 0;
  ASSERT_TRUE(r.read_u8(&a));
  ASSERT_TRUE(r.read_u16(&b));
  ASSERT_TRUE(r.read_u32(&c));
  ASSERT_TRUE(r.read_u64(&d));
  EXPECT_EQ(a, 0x01);
  EXPECT_EQ(b, 0x0203);
  EXPECT_EQ(c, 0x04050607u);
  EXPECT_EQ(d, 0x08090a0b0c0d0e0full);
  EXPECT_EQ(r.position(), 15u);
  EXPECT_EQ(r.remaining(), 1u);
  // A failed read leaves the cursor unchanged.
  EXPECT_FALSE(r.read_u16(&b));
  EXPECT_FALSE(r.read_u32(&c));
  EXPECT_FALSE(r.read_u64(&d));
  EXPECT_EQ(r.position(), 15u);
  EXPECT_TRUE(r.read_u8(&a));
  EXPECT_EQ(a, 0xff);
  EXPECT_FALSE(r.read_u8(&a));
}

TEST(BytesTest, ReaderBytesAndSkip) {
  auto in = from_hex("aabbccdd");
  Reader r(in);
  EXPECT_FALSE(r.skip(5));
  EXPECT_TRUE(r.skip(1));
  std::array<uint8_t, 2> two{};
  EXPECT_TRUE(r.read_bytes(two));
  EXPECT_EQ(two[0], 0xbb);
  EXPECT_EQ(two[1], 0xcc);
  std::array<uint8_t, 2> more{};
  EXPECT_FALSE(r.read_bytes(more));
  EXPECT_EQ(r.rest().size(), 1u);
  EXPECT_EQ(r.rest()[0], 0xdd);
}

TEST(BytesTest, WriterRefusesWhenFull) {
  std::array<uint8_t, 7> buf{};
  Writer w(buf);
  EXPECT_TRUE(w.write_u8(0x01));
  EXPECT_TRUE(w.write_u16(0x0203));
  EXPECT_TRUE(w.write_u32(0x04050607));
  EXPECT_EQ(w.remaining(), 0u);
  EXPECT_FALSE(w.write_u8(0xff));
  EXPECT_FALSE(w.write_u64(1));
  EXPECT_EQ(std::vector<uint8_t>(buf.begin(), buf.end()), from_hex("01 0203 04050607"));
}

TEST(BytesTest, WriterBytesZerosAndU64) {
  std::array<uint8_t, 12> buf{};
  buf.fill(0xEE);
  Writer w(buf);
  EXPECT_TRUE(w.write_zeros(2));
  EXPECT_TRUE(w.write_u64(0x1122334455667788ull));
  std::array<uint8_t, 3> src = {9, 8, 7};
  EXPECT_FALSE(w.write_bytes(src));  // only 2 left
  EXPECT_TRUE(w.write_bytes(std::span<const uint8_t>(src).first(2)));
  EXPECT_EQ(w.position(), 12u);
  EXPECT_EQ(std::vector<uint8_t>(buf.begin(), buf.end()), from_hex("0000 1122334455667788 0908"));
}

}  // namespace
}  // namespace uiw::wire
