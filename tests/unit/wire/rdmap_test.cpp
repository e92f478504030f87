// RDMAP control field, opcode table and Read Request header (RFC 5040 §4; digest §4.4-§4.7).
#include "wire/rdmap.h"

#include <gtest/gtest.h>

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

TEST(RdmapTest, OpcodeTableMatchesFigure4) {
  struct Row {
    Opcode op;
    bool tagged;
    uint32_t qn;
    size_t hdr;
    bool payload;
    bool inval;
  };
  const Row rows[] = {
      {Opcode::RdmaWrite, true, 0, 0, true, false},
      {Opcode::ReadRequest, false, 1, 28, false, false},
      {Opcode::ReadResponse, true, 0, 0, true, false},
      {Opcode::Send, false, 0, 0, true, false},
      {Opcode::SendInv, false, 0, 0, true, true},
      {Opcode::SendSe, false, 0, 0, true, false},
      {Opcode::SendSeInv, false, 0, 0, true, true},
      {Opcode::Terminate, false, 2, 4, false, false},
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
    EXPECT_EQ(info.payload_allowed, r.payload);
    EXPECT_EQ(info.carries_inval_stag, r.inval);
  }
  EXPECT_EQ(std::string(opcode_info(3).name), "Send");
}

TEST(RdmapTest, ReservedOpcodesInvalid) {
  for (uint8_t op = 8; op < 16; ++op) EXPECT_FALSE(opcode_info(op).valid) << int(op);
  // Out-of-range values are masked, never read out of bounds.
  EXPECT_TRUE(opcode_info(0x43).valid);
  EXPECT_FALSE(opcode_info(0xFF).valid);
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
