// RDMAP control field, opcode table and Read Request header (RFC 5040 §4; digest §4.4-§4.7).
#include "wire/rdmap.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include "unit/wire/wire_test_util.h"

namespace uiw::wire {
namespace {

using test::from_hex;
using test::to_hex;

TEST(RdmapTest, ControlOctetValues) {
  // RV=01b in the top two bits, opcode in the low four (RFC 5040 §4.1).
  EXPECT_EQ(rdmap_control(Opcode::RdmaWrite), 0x40);
  EXPECT_EQ(rdmap_control(Opcode::ReadRequest), 0x41);
  EXPECT_EQ(rdmap_control(Opcode::ReadResponse), 0x42);
  EXPECT_EQ(rdmap_control(Opcode::Send), 0x43);
  EXPECT_EQ(rdmap_control(Opcode::SendInv), 0x44);
  EXPECT_EQ(rdmap_control(Opcode::SendSe), 0x45);
  EXPECT_EQ(rdmap_control(Opcode::SendSeInv), 0x46);
  EXPECT_EQ(rdmap_control(Opcode::Terminate), 0x47);
  EXPECT_EQ(rdmap_control(Opcode::Send, 0), 0x03);  // RDMAC RNIC version 00b
}

TEST(RdmapTest, VersionAndOpcodeExtraction) {
  EXPECT_EQ(rdmap_version(0x43), 1);
  EXPECT_EQ(rdmap_opcode(0x43), 3);
  EXPECT_EQ(rdmap_version(0xF7), 3);
  EXPECT_EQ(rdmap_opcode(0xF7), 7);  // reserved bits 0x30 ignored
  EXPECT_EQ(rdmap_version(0x05), 0);
}

TEST(RdmapTest, OpcodeTableMatchesFigure4AndRfc7306) {
  struct Row {
    Opcode op;
    bool tagged;
    uint32_t qn;
    size_t hdr;
    bool fixed;
    bool payload;
    bool inval;
    bool extension;
  };
  const Row rows[] = {
      {Opcode::RdmaWrite, true, 0, 0, false, true, false, false},
      {Opcode::ReadRequest, false, 1, 28, true, false, false, false},
      {Opcode::ReadResponse, true, 0, 0, false, true, false, false},
      {Opcode::Send, false, 0, 0, false, true, false, false},
      {Opcode::SendInv, false, 0, 0, false, true, true, false},
      {Opcode::SendSe, false, 0, 0, false, true, false, false},
      {Opcode::SendSeInv, false, 0, 0, false, true, true, false},
      {Opcode::Terminate, false, 2, 4, false, false, false, false},
      // RFC 7306 §4.1 Figure 2 (queues) and Figure 3 (no ULP payload), §5.2, §6.2.
      {Opcode::ImmediateData, false, 0, 8, true, false, false, true},
      {Opcode::ImmediateDataSe, false, 0, 8, true, false, false, true},
      {Opcode::AtomicRequest, false, 1, 52, true, false, false, true},
      {Opcode::AtomicResponse, false, 3, 12, true, false, false, true},
  };
  for (const auto& r : rows) {
    const auto& info = opcode_info(static_cast<uint8_t>(r.op));
    SCOPED_TRACE(info.name);
    EXPECT_TRUE(info.valid);
    EXPECT_EQ(info.tagged, r.tagged);
    if (!r.tagged) {
      EXPECT_EQ(info.qn, r.qn);
    }
    EXPECT_EQ(info.rdmap_header_size, r.hdr);
    EXPECT_EQ(info.fixed_header, r.fixed);
    EXPECT_EQ(info.payload_allowed, r.payload);
    EXPECT_EQ(info.carries_inval_stag, r.inval);
    EXPECT_EQ(info.extension, r.extension);
  }
  EXPECT_EQ(std::string(opcode_info(3).name), "Send");
}

TEST(RdmapTest, ReservedOpcodesInvalid) {
  for (uint8_t op = 12; op < 16; ++op) EXPECT_FALSE(opcode_info(op).valid) << int(op);
  // Out-of-range values are masked, never read out of bounds.
  EXPECT_TRUE(opcode_info(0x43).valid);
  EXPECT_FALSE(opcode_info(0xFF).valid);
}

// RFC 7306 §5.2.1 Figure 4: a CmpSwap request, field by field at its documented offset.
TEST(RdmapTest, AtomicRequestLayout) {
  AtomicRequestHeader h;
  h.aopcode = static_cast<uint8_t>(AtomicOpcode::CmpSwap);
  h.request_id = 0x01020304;
  h.stag = 0xA0B0C0D0;
  h.to = 0x1122334455667788;
  h.data = 0x0101010101010101;
  h.data_mask = 0xFFFFFFFFFFFFFFFF;
  h.compare = 0x0202020202020202;
  h.compare_mask = 0x00000000FFFFFFFF;
  uint8_t out[kAtomicRequestHeaderSize];
  encode_atomic_request(out, h);
  const uint8_t want[kAtomicRequestHeaderSize] = {
      0x00, 0x00, 0x00, 0x02, 0x01, 0x02, 0x03, 0x04, 0xA0, 0xB0, 0xC0, 0xD0, 0x11,
      0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88, 0x01, 0x01, 0x01, 0x01, 0x01, 0x01,
      0x01, 0x01, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x02, 0x02, 0x02,
      0x02, 0x02, 0x02, 0x02, 0x02, 0x00, 0x00, 0x00, 0x00, 0xFF, 0xFF, 0xFF, 0xFF};
  EXPECT_EQ(0, std::memcmp(out, want, sizeof want));
  // The 28 reserved bits are ignored on receive (RFC 7306 §5.2.1).
  out[0] = 0xFF;
  out[3] |= 0xF0;
  const AtomicRequestHeader d = decode_atomic_request(out);
  EXPECT_EQ(d.aopcode, 2);
  EXPECT_EQ(d.request_id, h.request_id);
  EXPECT_EQ(d.stag, h.stag);
  EXPECT_EQ(d.to, h.to);
  EXPECT_EQ(d.data, h.data);
  EXPECT_EQ(d.data_mask, h.data_mask);
  EXPECT_EQ(d.compare, h.compare);
  EXPECT_EQ(d.compare_mask, h.compare_mask);
}

TEST(RdmapTest, AtomicResponseLayout) {
  uint8_t out[kAtomicResponseHeaderSize];
  encode_atomic_response(out, {0xDEADBEEF, 0x0102030405060708});
  const uint8_t want[] = {0xDE, 0xAD, 0xBE, 0xEF, 1, 2, 3, 4, 5, 6, 7, 8};
  EXPECT_EQ(0, std::memcmp(out, want, sizeof want));
  const AtomicResponseHeader d = decode_atomic_response(out);
  EXPECT_EQ(d.request_id, 0xDEADBEEFu);
  EXPECT_EQ(d.original, 0x0102030405060708u);
}

// RFC 7306 §5.1.1's bit-serial definition of the masked add, against the closed form.
uint64_t masked_add_by_bits(uint64_t v, uint64_t add, uint64_t mask) {
  uint64_t r = 0, carry = 0;
  for (int b = 0; b < 64; ++b) {
    const uint64_t sum = carry + ((v >> b) & 1) + ((add >> b) & 1);
    r |= (sum & 1) << b;
    carry = (sum >> 1) & ~((mask >> b) & 1);
  }
  return r;
}

TEST(RdmapTest, MaskedFetchAddFollowsTheBitSerialDefinition) {
  EXPECT_EQ(atomic_fetch_add_result(5, 7, 0), 12u);  // mask 0: one 64-bit add
  EXPECT_EQ(atomic_fetch_add_result(~0ull, 1, 0), 0u);
  EXPECT_EQ(atomic_fetch_add_result(0xF0, 0xFF, ~0ull), 0x0Fu);  // every bit a field: XOR
  // Two 32-bit fields: the low one wraps without carrying into the high one.
  EXPECT_EQ(atomic_fetch_add_result(0x00000001FFFFFFFF, 1, 0x8000000080000000),
            0x0000000100000000u);
  uint64_t x = 0x9E3779B97F4A7C15;
  for (int i = 0; i < 20000; ++i) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    const uint64_t v = x, add = x * 0xBF58476D1CE4E5B9, mask = (x >> 3) * 0x94D049BB133111EB;
    ASSERT_EQ(atomic_fetch_add_result(v, add, mask), masked_add_by_bits(v, add, mask))
        << std::hex << v << " " << add << " " << mask;
  }
}

TEST(RdmapTest, MaskedCmpSwap) {
  // Unmasked compare-and-swap: both masks all ones.
  EXPECT_EQ(atomic_cmp_swap_result(7, 7, ~0ull, 9, ~0ull), 9u);
  EXPECT_EQ(atomic_cmp_swap_result(7, 8, ~0ull, 9, ~0ull), 7u);
  // Only the compare-mask bits are compared; only the swap-mask bits are stored.
  EXPECT_EQ(atomic_cmp_swap_result(0xAB, 0x0B, 0x0F, 0x50, 0xF0), 0x5Bu);
  EXPECT_EQ(atomic_cmp_swap_result(0xAB, 0x0C, 0x0F, 0x50, 0xF0), 0xABu);
}

TEST(RdmapTest, FirstTwoOctetsPerMessage) {
  // Digest §1.2 table: DDP control + RDMAP control for the last segment of each message.
  struct Case {
    Opcode op;
    uint16_t last;
  };
  const Case cases[] = {{Opcode::RdmaWrite, 0xC140},    {Opcode::ReadRequest, 0x4141},
                        {Opcode::ReadResponse, 0xC142}, {Opcode::Send, 0x4143},
                        {Opcode::SendInv, 0x4144},      {Opcode::SendSe, 0x4145},
                        {Opcode::SendSeInv, 0x4146},    {Opcode::Terminate, 0x4147}};
  for (const auto& c : cases) {
    const auto& info = opcode_info(static_cast<uint8_t>(c.op));
    SegmentHeader h;
    h.tagged = info.tagged;
    h.last = true;
    h.rdmap_control = rdmap_control(c.op);
    uint8_t buf[18];
    encode_segment_header(buf, h);
    EXPECT_EQ((buf[0] << 8) | buf[1], c.last) << info.name;
    h.last = false;
    encode_segment_header(buf, h);
    EXPECT_EQ((buf[0] << 8) | buf[1], c.last & ~0x4000) << info.name;
  }
}

TEST(RdmapTest, ReadRequestEncodeDigestVector) {
  // Digest §8.6: SinkSTag 0x11111111, SinkTO 0x2000, size 0x100, SrcSTag 0x22222222, SrcTO 0x3000.
  uint8_t buf[kReadRequestHeaderSize];
  encode_read_request(buf, {.sink_stag = 0x11111111,
                            .sink_to = 0x2000,
                            .size = 0x100,
                            .src_stag = 0x22222222,
                            .src_to = 0x3000});
  EXPECT_EQ(to_hex(buf), to_hex(from_hex("11111111"               // Data Sink STag
                                         "00000000 00002000"      // Data Sink Tagged Offset
                                         "00000100"               // RDMA Read Message Size
                                         "22222222"               // Data Source STag
                                         "00000000 00003000")));  // Data Source Tagged Offset
}

TEST(RdmapTest, ReadRequestDecodeRoundTrip) {
  auto in = from_hex("deadbeef 0102030405060708 ffffffff 00c0ffee 8000000000000001");
  auto h = decode_read_request(in.data());
  EXPECT_EQ(h.sink_stag, 0xdeadbeefu);
  EXPECT_EQ(h.sink_to, 0x0102030405060708ull);
  EXPECT_EQ(h.size, 0xffffffffu);
  EXPECT_EQ(h.src_stag, 0x00c0ffeeu);
  EXPECT_EQ(h.src_to, 0x8000000000000001ull);
  uint8_t out[28];
  encode_read_request(out, h);
  EXPECT_EQ(to_hex(out), to_hex(in));
}

}  // namespace
}  // namespace uiw::wire
