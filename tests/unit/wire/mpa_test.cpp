// MPA FPDU framing (RFC 5044 §4): pad, MULPDU, Markers, CRC coverage and the byte-exact seed
// figures (digest §2.4, §2.6, §8.3, §8.4, §8.6).
#include "wire/mpa.h"

#include <gtest/gtest.h>

#include <vector>

#include "unit/wire/wire_test_util.h"
#include "wire/bytes.h"
#include "wire/crc32c.h"

namespace uiw::wire {
namespace {

using test::from_hex;
using test::to_hex;

std::vector<uint8_t> encode(uint64_t pos, const std::vector<uint8_t>& ulpdu, bool crc,
                            bool markers) {
  std::vector<uint8_t> out(fpdu_size_with_markers(pos, ulpdu.size(), markers));
  size_t n = encode_fpdu(out, pos, ulpdu, crc, markers);
  EXPECT_EQ(n, out.size());
  return out;
}

// Untagged DDP header of a Send with L=1 on QN 0 (MPA Figures 5 and 6).
std::vector<uint8_t> send_ulpdu(uint32_t msn, size_t zeros) {
  auto u = from_hex(
      "41 43"          // DDP control: T=0 L=1 DV=1 | RDMAP control: RV=1 Send
      "00 00 00 00"    // RsvdULP[8:39] (no Invalidate STag)
      "00 00 00 00");  // QN 0
  u.resize(u.size() + 4);
  store_be32(u.data() + u.size() - 4, msn);  // MSN
  u.resize(u.size() + 4);                    // MO 0
  u.resize(u.size() + zeros);                // Send data, all zeros
  return u;
}

TEST(MpaTest, PadAndSizeForAllResidues) {
  // RFC 5044 §4.1: pad makes 2 + ULPDU_Length + pad a multiple of 4.
  EXPECT_EQ(fpdu_pad(2), 0u);
  EXPECT_EQ(fpdu_pad(3), 3u);
  EXPECT_EQ(fpdu_pad(4), 2u);
  EXPECT_EQ(fpdu_pad(5), 1u);
  EXPECT_EQ(fpdu_pad(0), 2u);
  for (size_t len = 0; len < 64; ++len) {
    EXPECT_EQ(fpdu_size(len) % 4, 0u);
    EXPECT_LT(fpdu_pad(len), 4u);
    EXPECT_EQ(fpdu_size(len), 2 + len + fpdu_pad(len) + 4);
  }
}

TEST(MpaTest, MulpduTable) {
  // Digest §2.6 table (RFC 5044 §4.5 formulas).
  EXPECT_EQ(mulpdu_for_emss(1460, true), 1442u);
  EXPECT_EQ(mulpdu_for_emss(1460, false), 1454u);
  EXPECT_EQ(mulpdu_for_emss(1448, true), 1430u);
  EXPECT_EQ(mulpdu_for_emss(1448, false), 1442u);
  EXPECT_EQ(mulpdu_for_emss(536, true), 522u);
  EXPECT_EQ(mulpdu_for_emss(536, false), 530u);
  EXPECT_EQ(mulpdu_for_emss(8960, true), 8882u);
  EXPECT_EQ(mulpdu_for_emss(8960, false), 8954u);
  EXPECT_EQ(mulpdu_for_emss(9000, true), 8922u);
  EXPECT_EQ(mulpdu_for_emss(9000, false), 8994u);
}

TEST(MpaTest, MulpduFloorAndCeiling) {
  // RFC 5044 §4.5: never below 128; §3: never above 64768.
  EXPECT_EQ(mulpdu_for_emss(128, true), 128u);
  EXPECT_EQ(mulpdu_for_emss(128, false), 128u);
  EXPECT_EQ(mulpdu_for_emss(0, true), 128u);
  EXPECT_EQ(mulpdu_for_emss(5, false), 128u);
  EXPECT_EQ(mulpdu_for_emss(65535, false), 64768u);
  EXPECT_EQ(mulpdu_for_emss(0xFFFFFFFFu, true), 64768u);
}

TEST(MpaTest, BytesToNextMarker) {
  EXPECT_EQ(bytes_to_next_marker(0), 0u);
  EXPECT_EQ(bytes_to_next_marker(4), 508u);
  EXPECT_EQ(bytes_to_next_marker(511), 1u);
  EXPECT_EQ(bytes_to_next_marker(512), 0u);
  EXPECT_EQ(bytes_to_next_marker(1000), 24u);
  EXPECT_EQ(bytes_to_next_marker(0x1'0000'0000ull), 0u);
}

TEST(MpaTest, MarkerEncodingClearsLowBitsAndReserved) {
  uint8_t m[4] = {0xff, 0xff, 0xff, 0xff};
  encode_marker(m, 0x0017);
  EXPECT_EQ(to_hex(m), "00000014");                // RESERVED 0, FPDUPTR 0x14 (low 2 bits cleared)
  const uint8_t rx[4] = {0xAB, 0xCD, 0x00, 0x17};  // reserved ignored, low bits masked
  EXPECT_EQ(decode_marker_fpduptr(rx), 0x0014);
}

TEST(MpaTest, Figure5FirstFpduWithMarker) {
  // Digest §8.3: first FPDU of the stream, so it starts with a Marker (FPDUPTR 0) that is
  // covered by the FPDU's CRC.
  auto wire = encode(0, send_ulpdu(1, 24), true, true);
  auto expected = from_hex(
      "0000 0000"  // Marker: Reserved, FPDUPTR 0
      "002a"       // ULPDU_Length 42
      "41 43"      // DDP control (Send, L=1), RDMAP control
      "0000 0000"  // Reserved (no STag)
      "0000 0000"  // QN 0
      "0000 0001"  // MSN 1
      "0000 0000"  // MO 0
      "00000000 00000000 00000000 00000000 00000000 00000000"  // 24 octets of data
      "52 23 99 83");                                          // CRC32c, LSB first
  EXPECT_EQ(to_hex(wire), to_hex(expected));
  EXPECT_EQ(crc32c(wire.data(), 48), 0x83992352u);
}

TEST(MpaTest, Figure6SecondFpduWithEmbeddedMarker) {
  // Digest §8.4 reproduction: FPDU1 (Send MSN 1, 464 zero octets => ULPDU 482, 492 octets on
  // the wire with the initial Marker) then FPDU2 (Send MSN 2) at stream octet 0x1EC.
  auto f1 = encode(0, send_ulpdu(1, 464), true, true);
  ASSERT_EQ(f1.size(), 492u);
  EXPECT_EQ(to_hex(std::span(f1).last(4)), "a01ee4fd");  // self-consistency value of §8.4
  auto f2 = encode(492, send_ulpdu(2, 24), true, true);
  auto expected = from_hex(
      "002a"       // 01ec Length 42
      "41 43"      // 01ee DDP control: Send with Last, RDMAP control
      "0000 0000"  // 01f0 Reserved
      "0000 0000"  // 01f4 DDP Queue 0
      "0000 0002"  // 01f8 DDP MSN 2
      "0000 0000"  // 01fc DDP MO 0
      "0000 0014"  // 0200 Marker: Reserved, FPDUPTR 0x14
      "00000000 00000000 00000000 00000000 00000000 00000000"  // 0204 24 octets of data
      "84 92 58 98");                                          // 021c CRC32c
  EXPECT_EQ(to_hex(f2), to_hex(expected));
}

TEST(MpaTest, Figure4MarkerInsideUlpdu) {
  // Digest §2.4 Figure 4: ULPDU_Length 16, Marker after 10 ULPDU octets with FPDUPTR 0x0C, pad 2.
  std::vector<uint8_t> ulpdu(16);
  for (size_t i = 0; i < ulpdu.size(); ++i) ulpdu[i] = static_cast<uint8_t>(0xA0 + i);
  auto wire = encode(500, ulpdu, true, true);  // 500 + 2 + 10 = 512
  ASSERT_EQ(wire.size(), 28u);
  EXPECT_EQ(to_hex(std::span(wire).first(24)),
            to_hex(from_hex("0010"                      // ULPDU Length 0x0010
                            "a0a1 a2a3 a4a5 a6a7 a8a9"  // ULPDU octets 0-9
                            "0000 000c"                 // Marker, FPDU ptr 0x000C
                            "aaab acad aeaf"            // ULPDU octets 10-15
                            "0000")));                  // PAD (2 octets)
  // The embedded Marker is covered by the CRC.
  EXPECT_EQ(load_le32(wire.data() + 24), crc32c(wire.data(), 24));
}

TEST(MpaTest, Section86DerivedVectors) {
  struct Vec {
    const char* ulpdu;
    const char* wire;
  };
  const Vec vecs[] = {
      // Zero-length Send, QN 0, MSN 1
      {"4143 00000000 00000000 00000001 00000000",
       "00124143 00000000 00000000 00000001 00000000 587be8c4"},
      // RDMA Write, STag 0x12345678, TO 0x1000, payload deadbeef
      {"c140 12345678 00000000 00001000 deadbeef",
       "0012c140 12345678 00000000 00001000 deadbeef adc06961"},
      // RDMA Read Request, MSN 1, sink 0x11111111/0x2000, size 0x100, src 0x22222222/0x3000
      {"4141 00000000 00000001 00000001 00000000 11111111 00000000 00002000 00000100 22222222 "
       "00000000 00003000",
       "002e4141 00000000 00000001 00000001 00000000 11111111 00000000 00002000 00000100 "
       "22222222 00000000 00003000 d52ec5b9"},
      // Send, QN 0, MSN 2, 1-octet payload 5a (pad 3)
      {"4143 00000000 00000000 00000002 00000000 5a",
       "00134143 00000000 00000000 00000002 00000000 5a000000 3ac1dcfd"},
      // Terminate QN 2 MSN 1, DDP/Tagged/Base-or-bounds, M=D=1, copied Write header
      {"4147 00000000 00000002 00000001 00000000 1101c000 0012c140 12345678 00000000 00001000",
       "00264147 00000000 00000002 00000001 00000000 1101c000 0012c140 12345678 00000000 "
       "00001000 42347cf9"},
  };
  for (const auto& v : vecs) {
    auto wire = encode(0, from_hex(v.ulpdu), true, false);
    EXPECT_EQ(to_hex(wire), to_hex(from_hex(v.wire)));
  }
}

TEST(MpaTest, CrcOffWritesZeroCrcField) {
  auto wire = encode(0, from_hex("4143 00000000 00000000 00000001 00000000"), false, false);
  EXPECT_EQ(to_hex(wire), "00124143 00000000 00000000 00000001 00000000 00000000");
}

TEST(MpaTest, MarkersRelativeToSeqStartEleven) {
  // RFC 5044 §4.3: started at TCP sequence 11 => Markers at 11, 523, 1035, ... Stream positions
  // here are relative to SeqStart, so Markers sit at relative 0, 512, 1024 and every FPDUPTR
  // points back to the FPDU containing it (or is 0 between FPDUs).
  const uint32_t seq_start = 11;
  std::vector<uint8_t> stream;
  std::vector<uint64_t> headers;  // relative position of each ULPDU_Length field
  const size_t sizes[] = {100, 7, 300, 1, 0, 700, 42, 511, 64, 1000, 3};
  uint64_t pos = 0;
  for (size_t s : sizes) {
    std::vector<uint8_t> u(s, 0x77);
    auto f = encode(pos, u, true, true);
    headers.push_back(pos + (bytes_to_next_marker(pos) == 0 ? 4 : 0));
    stream.insert(stream.end(), f.begin(), f.end());
    pos += f.size();
  }
  ASSERT_GT(stream.size(), 2048u);
  size_t markers_seen = 0;
  for (uint64_t rel = 0; rel + 4 <= stream.size(); rel += 512) {
    const uint32_t seq = seq_start + static_cast<uint32_t>(rel);
    EXPECT_EQ((seq - seq_start) % 512, 0u);
    EXPECT_EQ(stream[rel], 0);  // RESERVED
    EXPECT_EQ(stream[rel + 1], 0);
    const uint16_t ptr = decode_marker_fpduptr(&stream[rel]);
    uint64_t owner = 0;
    for (uint64_t h : headers) {
      if (h <= rel) owner = h;
    }
    if (ptr == 0) {
      // Between FPDUs: the next octets are a ULPDU_Length field.
      EXPECT_TRUE(std::find(headers.begin(), headers.end(), rel + 4) != headers.end());
    } else {
      EXPECT_EQ(ptr, rel - owner) << "marker at relative " << rel << " seq " << seq;
    }
    ++markers_seen;
  }
  EXPECT_EQ(markers_seen, stream.size() / 512 + (stream.size() % 512 >= 4 ? 1 : 0));
  EXPECT_EQ(to_hex(std::span(stream).first(4)), "00000000");  // first Marker, FPDUPTR 0
}

TEST(MpaTest, MarkerSplitsDdpHeader) {
  // Digest §10 item 6: the FPDU at 508 puts its ULPDU_Length at 508, the DDP/RDMAP control at
  // 510 and a Marker at 512, in the middle of the DDP header.
  auto u = send_ulpdu(9, 5);
  auto wire = encode(508, u, true, true);
  EXPECT_EQ(to_hex(std::span(wire).first(8)), "00174143 00000004");  // len 23, ctrl, Marker ptr 4
  test::CollectingVisitor v;
  FpduDecoder dec(&v, true, true, 508);
  EXPECT_EQ(dec.consume(wire), wire.size());
  EXPECT_EQ(dec.error(), FpduDecoder::Error::None);
  ASSERT_EQ(v.ulpdus.size(), 1u);
  EXPECT_EQ(v.ulpdus[0], u);
}

TEST(MpaTest, MarkerRightAfterPadBelongsToThisFpdu) {
  // Header at 500, body 12 octets ends at 512: the Marker there points back 12 octets and is in
  // this FPDU's CRC (RFC 5044 §4.4 rule 1); the CRC follows it.
  std::vector<uint8_t> u(10, 0x3C);
  auto wire = encode(500, u, true, true);
  ASSERT_EQ(wire.size(), 20u);
  EXPECT_EQ(to_hex(std::span(wire).subspan(12, 4)), "0000000c");
  EXPECT_EQ(load_le32(wire.data() + 16), crc32c(wire.data(), 16));
}

TEST(MpaTest, MarkerBetweenFpdusBelongsToNextFpdu) {
  // FPDU1 at 496 ends exactly at 512: no Marker in it. FPDU2 at 512 starts with a Marker of
  // FPDUPTR 0 that is covered by FPDU2's CRC (RFC 5044 §4.3, §4.4 rule 2).
  std::vector<uint8_t> u(10, 0x11);
  auto f1 = encode(496, u, true, true);
  EXPECT_EQ(f1.size(), 16u);
  EXPECT_EQ(load_le32(f1.data() + 12), crc32c(f1.data(), 12));
  auto f2 = encode(512, u, true, true);
  ASSERT_EQ(f2.size(), 20u);
  EXPECT_EQ(to_hex(std::span(f2).first(4)), "00000000");
  EXPECT_EQ(load_le32(f2.data() + 16), crc32c(f2.data(), 16));
}

TEST(MpaTest, LargeFpduCarriesManyMarkersAllPointingToSameHeader) {
  // RFC 5044 §4.3: all Markers in one FPDU point at its ULPDU_Length field.
  std::vector<uint8_t> u(5000, 0xEE);
  auto wire = encode(8, u, true, true);
  EXPECT_EQ(fpdu_marker_count(8, u.size(), true), 9u);  // at 512, 1024, ..., 4608
  for (size_t rel = 504; rel < wire.size(); rel += 512) {
    // Stream position rel + 8 minus the header at 8.
    EXPECT_EQ(decode_marker_fpduptr(&wire[rel]), static_cast<uint16_t>(rel));
  }
}

TEST(MpaTest, SizeWithMarkersMatchesEncoder) {
  for (uint64_t pos : {0ull, 4ull, 496ull, 508ull, 1020ull, 4096ull}) {
    for (size_t len : {0u, 1u, 2u, 3u, 10u, 500u, 506u, 507u, 1500u, 65535u}) {
      std::vector<uint8_t> u(len, 1);
      std::vector<uint8_t> out(70000);
      size_t n = encode_fpdu(out, pos, u, true, true);
      EXPECT_EQ(n, fpdu_size_with_markers(pos, len, true)) << pos << " " << len;
      EXPECT_EQ(n % 4, 0u);
      EXPECT_EQ(encode_fpdu(out, pos, u, true, false), fpdu_size(len));
    }
  }
}

TEST(MpaTest, EncodeRejectsSmallBufferAndHugeUlpdu) {
  std::vector<uint8_t> u(10);
  std::vector<uint8_t> out(fpdu_size(10) - 1);
  EXPECT_EQ(encode_fpdu(out, 0, u, true, false), 0u);
  std::vector<uint8_t> big(65536);
  std::vector<uint8_t> out2(70000);
  EXPECT_EQ(encode_fpdu(out2, 0, big, true, false), 0u);
}

TEST(MpaTest, PadOctetsAreZeroOnTransmit) {
  for (size_t len = 1; len <= 4; ++len) {
    std::vector<uint8_t> u(len, 0xFF);
    auto wire = encode(0, u, true, false);
    for (size_t i = 2 + len; i < wire.size() - 4; ++i) EXPECT_EQ(wire[i], 0) << len;
  }
}

}  // namespace
}  // namespace uiw::wire
