// FpduDecoder: the streaming MPA deframer, fed whole, byte by byte, in random chunks and with
// garbage appended (QUICHE http_decoder_test style); CRC and Marker validation (RFC 5044 §4.3,
// §4.4, §8).
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "unit/wire/wire_test_util.h"
#include "wire/bytes.h"
#include "wire/crc32c.h"
#include "wire/mpa.h"

namespace uiw::wire {
namespace {

using test::CollectingVisitor;
using test::from_hex;
using Error = FpduDecoder::Error;

struct Stream {
  std::vector<uint8_t> bytes;
  std::vector<std::vector<uint8_t>> ulpdus;
  std::vector<size_t> frame_ends;  // offset just after each FPDU
};

Stream make_stream(const std::vector<size_t>& sizes, bool crc, bool markers, uint64_t start = 0,
                   uint32_t seed = 1) {
  Stream s;
  std::mt19937 rng(seed);
  uint64_t pos = start;
  for (size_t len : sizes) {
    std::vector<uint8_t> u(len);
    for (auto& b : u) b = static_cast<uint8_t>(rng());
    std::vector<uint8_t> f(fpdu_size_with_markers(pos, len, markers));
    EXPECT_EQ(encode_fpdu(f, pos, u, crc, markers), f.size());
    s.bytes.insert(s.bytes.end(), f.begin(), f.end());
    s.frame_ends.push_back(s.bytes.size());
    s.ulpdus.push_back(std::move(u));
    pos += f.size();
  }
  return s;
}

// Recomputes the CRC of a single FPDU (covered part = all but the last 4 octets) after a test
// has edited covered octets, so only the intended defect remains.
void fix_crc(std::vector<uint8_t>& fpdu) {
  store_le32(fpdu.data() + fpdu.size() - 4, crc32c(fpdu.data(), fpdu.size() - 4));
}

const std::vector<size_t> kSizes = {42, 0, 1, 2, 3, 100, 506, 507, 1000, 4, 65535, 18, 2000};

class FpduDecoderModes : public ::testing::TestWithParam<std::tuple<bool, bool>> {};

TEST_P(FpduDecoderModes, WholeInput) {
  auto [crc, markers] = GetParam();
  auto s = make_stream(kSizes, crc, markers);
  CollectingVisitor v;
  FpduDecoder dec(&v, crc, markers);
  EXPECT_EQ(dec.consume(s.bytes), s.bytes.size());
  EXPECT_EQ(dec.error(), Error::None) << dec.error_detail();
  EXPECT_EQ(v.ulpdus, s.ulpdus);
  EXPECT_TRUE(dec.at_frame_boundary());
  EXPECT_EQ(dec.stream_pos(), s.bytes.size());
  EXPECT_EQ(dec.frames_decoded(), kSizes.size());
}

TEST_P(FpduDecoderModes, CharByChar) {
  auto [crc, markers] = GetParam();
  auto s = make_stream({42, 0, 3, 600, 5}, crc, markers, 0, 2);
  CollectingVisitor v;
  FpduDecoder dec(&v, crc, markers);
  for (size_t i = 0; i < s.bytes.size(); ++i) {
    ASSERT_EQ(dec.consume(std::span(&s.bytes[i], 1)), 1u) << i;
    const bool boundary =
        std::find(s.frame_ends.begin(), s.frame_ends.end(), i + 1) != s.frame_ends.end();
    EXPECT_EQ(dec.at_frame_boundary(), boundary) << i;
  }
  EXPECT_EQ(dec.error(), Error::None);
  EXPECT_EQ(v.ulpdus, s.ulpdus);
}

TEST_P(FpduDecoderModes, RandomChunksAndStartPositions) {
  auto [crc, markers] = GetParam();
  std::mt19937 rng(99);
  for (int round = 0; round < 40; ++round) {
    std::vector<size_t> sizes;
    for (int i = 0; i < 12; ++i) sizes.push_back(rng() % 1500);
    const uint64_t start = (rng() % 4096) * 4;  // FPDUs start 4-aligned from SeqStart
    auto s = make_stream(sizes, crc, markers, start, round);
    CollectingVisitor v;
    FpduDecoder dec(&v, crc, markers, start);
    size_t off = 0;
    while (off < s.bytes.size()) {
      size_t n = std::min<size_t>(1 + rng() % 700, s.bytes.size() - off);
      ASSERT_EQ(dec.consume(std::span(s.bytes).subspan(off, n)), n);
      off += n;
    }
    ASSERT_EQ(dec.error(), Error::None) << dec.error_detail();
    ASSERT_EQ(v.ulpdus, s.ulpdus) << "round " << round;
    EXPECT_EQ(dec.stream_pos(), start + s.bytes.size());
  }
}

TEST_P(FpduDecoderModes, GarbageAppendedNeverReadPastFrame) {
  auto [crc, markers] = GetParam();
  auto s = make_stream({42, 7, 513}, crc, markers);
  std::vector<uint8_t> in = s.bytes;
  in.insert(in.end(), 64, 0xFF);  // garbage after the last FPDU
  CollectingVisitor v;
  FpduDecoder dec(&v, crc, markers);
  size_t off = 0;
  for (size_t i = 0; i < s.frame_ends.size(); ++i) {
    size_t n = dec.consume_one(std::span(in).subspan(off));
    off += n;
    EXPECT_EQ(off, s.frame_ends[i]);
    EXPECT_TRUE(dec.at_frame_boundary());
    EXPECT_EQ(v.ulpdus.size(), i + 1);
  }
  EXPECT_EQ(v.ulpdus, s.ulpdus);
  EXPECT_EQ(dec.error(), Error::None);
}

INSTANTIATE_TEST_SUITE_P(CrcAndMarkers, FpduDecoderModes,
                         ::testing::Combine(::testing::Bool(), ::testing::Bool()));

TEST(FpduDecoderTest, Figure5DecodesToItsUlpdu) {
  auto wire = from_hex(
      "00000000 002a4143 00000000 00000000 00000001 00000000"
      "00000000 00000000 00000000 00000000 00000000 00000000 52239983");
  CollectingVisitor v;
  FpduDecoder dec(&v, true, true);
  EXPECT_EQ(dec.consume(wire), wire.size());
  EXPECT_EQ(dec.error(), Error::None);
  ASSERT_EQ(v.ulpdus.size(), 1u);
  EXPECT_EQ(v.ulpdus[0].size(), 42u);
  EXPECT_EQ(v.ulpdus[0][0], 0x41);
}

TEST(FpduDecoderTest, CorruptedCrcDetected) {
  auto s = make_stream({42}, true, false);
  s.bytes.back() ^= 0x01;
  CollectingVisitor v;
  FpduDecoder dec(&v, true, false);
  dec.consume(s.bytes);
  EXPECT_EQ(dec.error(), Error::CrcMismatch);
  EXPECT_TRUE(v.ulpdus.empty());
  EXPECT_STRNE(dec.error_detail(), "");
}

TEST(FpduDecoderTest, EveryBitFlipDetected) {
  // Digest §8.7 item 6: a flip anywhere, including Marker RESERVED octets, PAD and the CRC.
  // Followed by zeros so a flipped length still reaches a CRC check.
  for (bool markers : {false, true}) {
    auto s = make_stream({41}, true, markers, 504);  // Marker at 512 inside, pad 1
    for (size_t bit = 0; bit < s.bytes.size() * 8; ++bit) {
      auto in = s.bytes;
      in[bit / 8] ^= static_cast<uint8_t>(0x80 >> (bit % 8));
      in.resize(in.size() + 70000, 0);
      CollectingVisitor v;
      FpduDecoder dec(&v, true, markers, 504);
      dec.consume(in);
      ASSERT_NE(dec.error(), Error::None) << "bit " << bit << " markers " << markers;
      ASSERT_TRUE(v.ulpdus.empty());
    }
  }
}

TEST(FpduDecoderTest, CrcOffDoesNotCheckCrcField) {
  // RFC 5044 §4.1: with CRCs off the field "may contain any value, and MUST NOT be checked".
  auto s = make_stream({42}, false, false);
  store_be32(s.bytes.data() + s.bytes.size() - 4, 0xDEADBEEF);
  CollectingVisitor v;
  FpduDecoder dec(&v, false, false);
  EXPECT_EQ(dec.consume(s.bytes), s.bytes.size());
  EXPECT_EQ(dec.error(), Error::None);
  EXPECT_EQ(v.ulpdus, s.ulpdus);
}

TEST(FpduDecoderTest, CrcOffIgnoresPayloadCorruption) {
  auto s = make_stream({42}, true, false);
  s.bytes[10] ^= 0xFF;
  CollectingVisitor v;
  FpduDecoder dec(&v, false, false);
  dec.consume(s.bytes);
  EXPECT_EQ(dec.error(), Error::None);
  ASSERT_EQ(v.ulpdus.size(), 1u);
  EXPECT_NE(v.ulpdus[0], s.ulpdus[0]);
}

TEST(FpduDecoderTest, MarkerPointerMismatchWithGoodCrc) {
  // Figure 4 layout: header at 500, Marker at 512 must carry 12. Make it 16 and fix the CRC:
  // RFC 5044 §8 code 3 "Marker and ULPDU Length field mismatch".
  auto s = make_stream({16}, true, true, 500);
  ASSERT_EQ(decode_marker_fpduptr(&s.bytes[12]), 12);
  store_be16(&s.bytes[14], 16);
  fix_crc(s.bytes);
  CollectingVisitor v;
  FpduDecoder dec(&v, true, true, 500);
  dec.consume(s.bytes);
  EXPECT_EQ(dec.error(), Error::MarkerMismatch);
  EXPECT_TRUE(v.ulpdus.empty());
}

TEST(FpduDecoderTest, LeadingMarkerMustBeZero) {
  auto s = make_stream({42}, true, true, 0);
  store_be16(&s.bytes[2], 0x0040);  // the Marker before the header must be 0
  fix_crc(s.bytes);
  CollectingVisitor v;
  FpduDecoder dec(&v, true, true);
  dec.consume(s.bytes);
  EXPECT_EQ(dec.error(), Error::MarkerMismatch);
}

TEST(FpduDecoderTest, MarkerMismatchWithCrcOff) {
  auto s = make_stream({16}, false, true, 500);
  store_be16(&s.bytes[14], 0x0100);
  CollectingVisitor v;
  FpduDecoder dec(&v, false, true, 500);
  dec.consume(s.bytes);
  EXPECT_EQ(dec.error(), Error::MarkerMismatch);
}

TEST(FpduDecoderTest, CrcErrorWinsOverMarkerError) {
  auto s = make_stream({16}, true, true, 500);
  store_be16(&s.bytes[14], 0x0100);  // CRC not fixed
  CollectingVisitor v;
  FpduDecoder dec(&v, true, true, 500);
  dec.consume(s.bytes);
  EXPECT_EQ(dec.error(), Error::CrcMismatch);
}

TEST(FpduDecoderTest, MarkerLowBitsAndReservedIgnored) {
  // RFC 5044 §4.2: RESERVED ignored on receive (but CRC-covered), FPDUPTR low bits as zero.
  auto s = make_stream({16}, true, true, 500);
  s.bytes[12] = 0xAB;
  s.bytes[13] = 0xCD;
  s.bytes[15] |= 0x03;
  fix_crc(s.bytes);
  CollectingVisitor v;
  FpduDecoder dec(&v, true, true, 500);
  EXPECT_EQ(dec.consume(s.bytes), s.bytes.size());
  EXPECT_EQ(dec.error(), Error::None);
  EXPECT_EQ(v.ulpdus, s.ulpdus);
}

TEST(FpduDecoderTest, NonZeroPadAcceptedButCrcCovered) {
  // RFC 5044 §4.1: pad is ignored by the receiver except for CRC checking.
  auto s = make_stream({1}, true, false);
  s.bytes[3] = s.bytes[4] = s.bytes[5] = 0xAA;  // the 3 pad octets
  {
    CollectingVisitor v;
    FpduDecoder dec(&v, true, false);
    dec.consume(s.bytes);
    EXPECT_EQ(dec.error(), Error::CrcMismatch);
  }
  fix_crc(s.bytes);
  CollectingVisitor v;
  FpduDecoder dec(&v, true, false);
  dec.consume(s.bytes);
  EXPECT_EQ(dec.error(), Error::None);
  EXPECT_EQ(v.ulpdus, s.ulpdus);
}

TEST(FpduDecoderTest, UlpduTooLongIsStickyError) {
  auto s = make_stream({101, 5}, true, false);
  CollectingVisitor v;
  FpduDecoder dec(&v, true, false, 0, 100);
  size_t n = dec.consume(s.bytes);
  EXPECT_LE(n, 2u);
  EXPECT_EQ(dec.error(), Error::UlpduTooLong);
  EXPECT_EQ(dec.consume(s.bytes), 0u);  // sticky: nothing more is consumed or delivered
  EXPECT_TRUE(v.ulpdus.empty());
}

TEST(FpduDecoderTest, NothingDeliveredAfterError) {
  // RFC 5044 §8: after an error no further FPDUs are delivered on that half connection.
  auto s = make_stream({20, 20, 20}, true, false);
  s.bytes[s.frame_ends[0] + 5] ^= 0x10;  // corrupt the second FPDU
  CollectingVisitor v;
  FpduDecoder dec(&v, true, false);
  dec.consume(s.bytes);
  EXPECT_EQ(dec.error(), Error::CrcMismatch);
  EXPECT_EQ(v.ulpdus.size(), 1u);
  EXPECT_EQ(dec.consume(std::span(s.bytes).subspan(s.frame_ends[1])), 0u);
  EXPECT_EQ(v.ulpdus.size(), 1u);
}

TEST(FpduDecoderTest, ZeroLengthUlpdu) {
  auto s = make_stream({0}, true, false);
  EXPECT_EQ(s.bytes.size(), 8u);  // length 2 + pad 2 + CRC 4
  CollectingVisitor v;
  FpduDecoder dec(&v, true, false);
  EXPECT_EQ(dec.consume(s.bytes), 8u);
  ASSERT_EQ(v.ulpdus.size(), 1u);
  EXPECT_TRUE(v.ulpdus[0].empty());
}

TEST(FpduDecoderTest, PartialFrameIsNotBoundary) {
  auto s = make_stream({42}, true, true);
  CollectingVisitor v;
  FpduDecoder dec(&v, true, true);
  EXPECT_TRUE(dec.at_frame_boundary());
  EXPECT_EQ(dec.consume(std::span(s.bytes).first(2)), 2u);  // half of the leading Marker
  EXPECT_FALSE(dec.at_frame_boundary());
  EXPECT_EQ(dec.consume(std::span(s.bytes).subspan(2, 4)), 4u);  // rest of Marker + length
  EXPECT_FALSE(dec.at_frame_boundary());
  EXPECT_EQ(dec.consume(std::span(s.bytes).subspan(6)), s.bytes.size() - 6);
  EXPECT_TRUE(dec.at_frame_boundary());
  EXPECT_EQ(v.ulpdus, s.ulpdus);
}

TEST(FpduDecoderTest, StreamPosCountsConsumedOctetsOnError) {
  // Found by fuzz_fpdu_decoder: a CRC error on the in-place path must still advance stream_pos.
  for (bool whole : {true, false}) {
    auto s = make_stream({42}, true, false);
    s.bytes[9] ^= 1;
    CollectingVisitor v;
    FpduDecoder dec(&v, true, false, 100);
    size_t used = 0;
    if (whole) {
      used = dec.consume(s.bytes);
    } else {
      for (size_t i = 0; i < s.bytes.size(); ++i) used += dec.consume(std::span(&s.bytes[i], 1));
    }
    EXPECT_EQ(dec.error(), Error::CrcMismatch);
    EXPECT_EQ(dec.stream_pos(), 100 + used);
  }
}

TEST(FpduDecoderTest, Figure6StreamDecodes) {
  // Digest §8.4: both FPDUs of the Figure 6 stream, the second carrying the Marker at 0x200.
  auto s = make_stream({482, 42}, true, true);
  ASSERT_EQ(s.frame_ends[0], 492u);
  ASSERT_EQ(s.bytes.size(), 0x220u);
  CollectingVisitor v;
  FpduDecoder dec(&v, true, true);
  EXPECT_EQ(dec.consume(s.bytes), s.bytes.size());
  EXPECT_EQ(dec.error(), Error::None);
  EXPECT_EQ(v.ulpdus, s.ulpdus);
}

TEST(FpduDecoderTest, UnalignedStartPositionsRoundTrip) {
  // MPA keeps FPDUs 4-aligned from SeqStart, but encoder and decoder agree for any start, even
  // when a Marker lands inside the CRC field.
  for (uint64_t start = 490; start < 530; ++start) {
    auto s = make_stream({7, 1, 20, 600}, true, true, start);
    CollectingVisitor v;
    FpduDecoder dec(&v, true, true, start);
    for (size_t i = 0; i < s.bytes.size(); ++i) dec.consume(std::span(&s.bytes[i], 1));
    ASSERT_EQ(dec.error(), Error::None) << start << " " << dec.error_detail();
    ASSERT_EQ(v.ulpdus, s.ulpdus) << start;
  }
}

}  // namespace
}  // namespace uiw::wire
