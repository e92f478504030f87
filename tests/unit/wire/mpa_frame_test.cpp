// MPA Request/Reply frames (RFC 5044 §7.1.1; digest §2.9-§2.12) and RFC 6581 IRD/ORD word.
#include "wire/mpa_frame.h"

#include <gtest/gtest.h>

#include <vector>

#include "unit/wire/wire_test_util.h"

namespace uiw::wire {
namespace {

using test::from_hex;
using test::to_hex;
using Error = MpaFrameDecoder::Error;

std::vector<uint8_t> encode(const MpaFrame& f) {
  std::vector<uint8_t> out(mpa_frame_size(f));
  EXPECT_EQ(encode_mpa_frame(out, f), out.size());
  return out;
}

const char* kRequestRev1Crc =
    "4d504120 49442052 65712046 72616d65"  // "MPA ID Req Frame"
    "40"                                   // M=0 C=1 R=0 Res=0
    "01"                                   // Rev 1
    "0003"                                 // PD_Length 3
    "616263";                              // Private Data "abc"

const char* kReplyRev2 =
    "4d504120 49442052 65702046 72616d65"  // "MPA ID Rep Frame"
    "50"                                   // C=1, enhanced flag 0x10
    "02"                                   // Rev 2
    "0006"                                 // PD_Length 6 = IRD/ORD word + 2
    "8010"                                 // A (peer-to-peer) | IRD 16
    "4008"                                 // D (Read RTR) | ORD 8
    "6869";                                // ULP Private Data "hi"

TEST(MpaFrameTest, KeysAreTheRfcStrings) {
  EXPECT_EQ(to_hex(kMpaKeyRequest), to_hex(from_hex("4d504120 49442052 65712046 72616d65")));
  EXPECT_EQ(to_hex(kMpaKeyReply), to_hex(from_hex("4d504120 49442052 65702046 72616d65")));
}

TEST(MpaFrameTest, EncodeRequestRev1) {
  const std::vector<uint8_t> pd = {'a', 'b', 'c'};
  MpaFrame f;
  f.kind = MpaFrameKind::Request;
  f.crc = true;
  f.revision = 1;
  f.private_data = pd;
  EXPECT_EQ(mpa_frame_size(f), 23u);
  EXPECT_EQ(to_hex(encode(f)), to_hex(from_hex(kRequestRev1Crc)));
}

TEST(MpaFrameTest, EncodeReplyRev2WithIrdOrd) {
  const std::vector<uint8_t> pd = {'h', 'i'};
  MpaFrame f;
  f.kind = MpaFrameKind::Reply;
  f.crc = true;
  f.revision = 2;
  f.v2 = MpaV2Params{.peer_to_peer = true, .rtr_read = true, .ird = 16, .ord = 8};
  f.private_data = pd;
  EXPECT_EQ(mpa_frame_size(f), 26u);
  EXPECT_EQ(to_hex(encode(f)), to_hex(from_hex(kReplyRev2)));
}

TEST(MpaFrameTest, EncodeFlagsMarkersAndReject) {
  MpaFrame f;
  f.kind = MpaFrameKind::Reply;
  f.markers = true;
  f.crc = false;
  f.reject = true;
  auto w = encode(f);
  EXPECT_EQ(w[16], 0xA0);  // M | R
  EXPECT_EQ(w[17], 1);
  f.kind = MpaFrameKind::Request;  // a Request sends R as 0
  w = encode(f);
  EXPECT_EQ(w[16], 0x80);
}

// uiw's RFC 7306 agreement, in Res bits of octet 16 (RFC 5044 §7.1.1): 0x04 offers it in a
// Request, 0x02 accepts in a Reply; each kind reads only its own bit, so a Reply that echoes the
// Request's 0x04 (as siw's does) accepts nothing.
TEST(MpaFrameTest, Rfc7306OfferAndAcceptanceAreDistinctResBits) {
  MpaFrame f;
  f.rdmap_ext = true;
  auto w = encode(f);
  EXPECT_EQ(w[16], 0x44);  // C | offer
  MpaFrameDecoder dec(MpaFrameKind::Request);
  EXPECT_EQ(dec.consume(w), w.size());
  ASSERT_TRUE(dec.done());
  EXPECT_TRUE(dec.frame().rdmap_ext);
  EXPECT_TRUE(dec.frame().crc);
  EXPECT_FALSE(dec.frame().markers);

  f.kind = MpaFrameKind::Reply;
  w = encode(f);
  EXPECT_EQ(w[16], 0x42);  // C | accept
  MpaFrameDecoder rep(MpaFrameKind::Reply);
  EXPECT_EQ(rep.consume(w), w.size());
  ASSERT_TRUE(rep.done());
  EXPECT_TRUE(rep.frame().rdmap_ext);

  w[16] = 0x44;  // the Request's bits echoed
  MpaFrameDecoder echo(MpaFrameKind::Reply);
  EXPECT_EQ(echo.consume(w), w.size());
  ASSERT_TRUE(echo.done());
  EXPECT_FALSE(echo.frame().rdmap_ext);
  w[16] = 0x42;  // an acceptance bit in a Request means nothing
  w[9] = 'q';    // "MPA ID Req Frame"
  MpaFrameDecoder req(MpaFrameKind::Request);
  EXPECT_EQ(req.consume(w), w.size());
  ASSERT_TRUE(req.done());
  EXPECT_FALSE(req.frame().rdmap_ext);
}

TEST(MpaFrameTest, V2ParamBitAssignment) {
  // RFC 6581 §7.1 / siw: A,B in the IRD word, C,D in the ORD word, 14-bit values.
  uint8_t w[4];
  encode_mpa_v2_params(w, {.rtr_send = true, .ird = 0x3FFF, .ord = 0});
  EXPECT_EQ(to_hex(w), "7fff0000");
  encode_mpa_v2_params(w, {.rtr_write = true, .ird = 0xFFFF /* masked */, .ord = 1});
  EXPECT_EQ(to_hex(w), "3fff8001");
  const auto p = decode_mpa_v2_params(from_hex("c0054003").data());
  EXPECT_TRUE(p.peer_to_peer);
  EXPECT_TRUE(p.rtr_send);
  EXPECT_FALSE(p.rtr_write);
  EXPECT_TRUE(p.rtr_read);
  EXPECT_EQ(p.ird, 5);
  EXPECT_EQ(p.ord, 3);
}

TEST(MpaFrameTest, DecodeRequestWhole) {
  auto in = from_hex(kRequestRev1Crc);
  MpaFrameDecoder dec(MpaFrameKind::Request);
  EXPECT_EQ(dec.consume(in), in.size());
  ASSERT_TRUE(dec.done());
  EXPECT_EQ(dec.error(), Error::None);
  const auto& f = dec.frame();
  EXPECT_EQ(f.kind, MpaFrameKind::Request);
  EXPECT_FALSE(f.markers);
  EXPECT_TRUE(f.crc);
  EXPECT_FALSE(f.reject);
  EXPECT_FALSE(f.rdmap_ext);
  EXPECT_EQ(f.revision, 1);
  EXPECT_FALSE(f.v2.has_value());
  EXPECT_EQ(std::vector<uint8_t>(f.private_data.begin(), f.private_data.end()), from_hex("616263"));
}

TEST(MpaFrameTest, DecodeReplyRev2CharByChar) {
  auto in = from_hex(kReplyRev2);
  MpaFrameDecoder dec(MpaFrameKind::Reply);
  for (size_t i = 0; i < in.size(); ++i) {
    EXPECT_FALSE(dec.done());
    ASSERT_EQ(dec.consume(std::span(&in[i], 1)), 1u);
  }
  ASSERT_TRUE(dec.done());
  const auto& f = dec.frame();
  ASSERT_TRUE(f.v2.has_value());
  EXPECT_TRUE(f.v2->peer_to_peer);
  EXPECT_TRUE(f.v2->rtr_read);
  EXPECT_FALSE(f.v2->rtr_write);
  EXPECT_EQ(f.v2->ird, 16);
  EXPECT_EQ(f.v2->ord, 8);
  EXPECT_EQ(std::vector<uint8_t>(f.private_data.begin(), f.private_data.end()), from_hex("6869"));
}

TEST(MpaFrameTest, GarbageAppendedIsNotConsumed) {
  // The first FPDU follows the frame directly; the decoder must stop at the frame end.
  auto in = from_hex(kReplyRev2);
  const size_t frame = in.size();
  in.insert(in.end(), {0x00, 0x12, 0x41, 0x43, 0xff});
  MpaFrameDecoder dec(MpaFrameKind::Reply);
  EXPECT_EQ(dec.consume(in), frame);
  EXPECT_TRUE(dec.done());
  EXPECT_EQ(dec.consume(in), 0u);
}

TEST(MpaFrameTest, ZeroPrivateDataFinishesAtHeader) {
  MpaFrame f;
  f.kind = MpaFrameKind::Request;
  auto in = encode(f);
  ASSERT_EQ(in.size(), 20u);
  in.push_back(0x77);
  MpaFrameDecoder dec(MpaFrameKind::Request);
  EXPECT_EQ(dec.consume(in), 20u);
  ASSERT_TRUE(dec.done());
  EXPECT_TRUE(dec.frame().private_data.empty());
}

TEST(MpaFrameTest, BadKeyDetectedEarly) {
  // A Reply key where a Request is expected: octet 9 differs ('p' vs 'q').
  auto in = from_hex(kReplyRev2);
  MpaFrameDecoder dec(MpaFrameKind::Request);
  EXPECT_EQ(dec.consume(std::span(in).first(9)), 9u);
  EXPECT_EQ(dec.error(), Error::None);
  dec.consume(std::span(in).subspan(9, 1));
  EXPECT_EQ(dec.error(), Error::BadKey);
  EXPECT_FALSE(dec.done());
  EXPECT_EQ(dec.consume(in), 0u);  // sticky
}

TEST(MpaFrameTest, GarbageKeyRejectedOnFirstOctet) {
  // E.g. an HTTP request on the iWARP port.
  auto in = from_hex("47455420 2f204854 54502f31 2e310d0a 00000000");
  MpaFrameDecoder dec(MpaFrameKind::Request);
  dec.consume(std::span(in).first(1));
  EXPECT_EQ(dec.error(), Error::BadKey);
}

TEST(MpaFrameTest, UnsupportedRevisions) {
  for (uint8_t rev : {0, 3, 255}) {
    auto in = from_hex(kRequestRev1Crc);
    in[17] = rev;
    MpaFrameDecoder dec(MpaFrameKind::Request);
    dec.consume(in);
    EXPECT_EQ(dec.error(), Error::UnsupportedRevision) << int(rev);
    EXPECT_FALSE(dec.done());
  }
}

TEST(MpaFrameTest, PrivateData512AcceptedAnd513Rejected) {
  std::vector<uint8_t> pd(512, 0x5A);
  MpaFrame f;
  f.private_data = pd;
  auto in = encode(f);
  MpaFrameDecoder ok(MpaFrameKind::Request);
  EXPECT_EQ(ok.consume(in), 532u);
  ASSERT_TRUE(ok.done());
  EXPECT_EQ(ok.frame().private_data.size(), 512u);
  EXPECT_EQ(ok.frame().private_data[511], 0x5A);

  in[18] = 0x02;  // PD_Length 0x0201 = 513
  in[19] = 0x01;
  in.push_back(0);
  MpaFrameDecoder bad(MpaFrameKind::Request);
  bad.consume(in);
  EXPECT_EQ(bad.error(), Error::PrivateDataTooLong);
}

TEST(MpaFrameTest, EncodeRejectsPrivateDataOver512) {
  std::vector<uint8_t> pd(513);
  std::vector<uint8_t> out(1000);
  MpaFrame f;
  f.private_data = pd;
  EXPECT_EQ(encode_mpa_frame(out, f), 0u);
  // With the v2 word, 508 octets of ULP data fill PD_Length 512.
  f.revision = 2;
  f.v2 = MpaV2Params{};
  f.private_data = std::span(pd).first(508);
  EXPECT_EQ(encode_mpa_frame(out, f), 532u);
  f.private_data = std::span(pd).first(509);
  EXPECT_EQ(encode_mpa_frame(out, f), 0u);
}

TEST(MpaFrameTest, EncodeRejectsSmallBufferAndV2WithRev1) {
  MpaFrame f;
  std::vector<uint8_t> out(19);
  EXPECT_EQ(encode_mpa_frame(out, f), 0u);
  std::vector<uint8_t> big(64);
  f.v2 = MpaV2Params{};
  f.revision = 1;
  EXPECT_EQ(encode_mpa_frame(big, f), 0u);
}

TEST(MpaFrameTest, EnhancedRev2WithoutIrdOrdWord) {
  auto in = from_hex(
      "4d504120 49442052 65712046 72616d65"  // Request key
      "50 02 0002"                           // C | enhanced, Rev 2, PD_Length 2
      "0000");
  MpaFrameDecoder dec(MpaFrameKind::Request);
  dec.consume(in);
  EXPECT_EQ(dec.error(), Error::MissingV2Params);
}

TEST(MpaFrameTest, Rev2WithoutEnhancedFlagHasNoV2Params) {
  // siw parses the IRD/ORD word only when the enhanced flag is set.
  auto in = from_hex(
      "4d504120 49442052 65712046 72616d65"  // Request key
      "40 02 0004"                           // C, Rev 2, PD_Length 4, no enhanced flag
      "80104008");
  MpaFrameDecoder dec(MpaFrameKind::Request);
  EXPECT_EQ(dec.consume(in), in.size());
  ASSERT_TRUE(dec.done());
  EXPECT_EQ(dec.frame().revision, 2);
  EXPECT_FALSE(dec.frame().v2.has_value());
  EXPECT_EQ(dec.frame().private_data.size(), 4u);
}

TEST(MpaFrameTest, RejectBitOnlyMeaningfulInReply) {
  auto req = from_hex(kRequestRev1Crc);
  req[16] |= 0x20;  // R in a Request: "not checked"
  MpaFrameDecoder dreq(MpaFrameKind::Request);
  dreq.consume(req);
  ASSERT_TRUE(dreq.done());
  EXPECT_FALSE(dreq.frame().reject);

  MpaFrame f;
  f.kind = MpaFrameKind::Reply;
  f.reject = true;
  f.markers = true;
  auto rep = encode(f);
  MpaFrameDecoder drep(MpaFrameKind::Reply);
  drep.consume(rep);
  ASSERT_TRUE(drep.done());
  EXPECT_TRUE(drep.frame().reject);
  EXPECT_TRUE(drep.frame().markers);
  EXPECT_TRUE(drep.frame().crc);
}

TEST(MpaFrameTest, ReservedBitsIgnored) {
  auto in = from_hex(kRequestRev1Crc);
  in[16] |= 0x0F;  // reserved bits other than the enhanced flag; Rev 1
  MpaFrameDecoder dec(MpaFrameKind::Request);
  dec.consume(in);
  ASSERT_TRUE(dec.done());
  EXPECT_TRUE(dec.frame().crc);
  EXPECT_FALSE(dec.frame().v2.has_value());
}

TEST(MpaFrameTest, RoundTripAllFlagCombinations) {
  const std::vector<uint8_t> pd = {1, 2, 3, 4, 5};
  for (int bits = 0; bits < 32; ++bits) {
    MpaFrame f;
    f.kind = (bits & 1) ? MpaFrameKind::Reply : MpaFrameKind::Request;
    f.markers = bits & 2;
    f.crc = bits & 4;
    f.reject = (bits & 8) && f.kind == MpaFrameKind::Reply;
    if (bits & 16) {
      f.revision = 2;
      f.v2 = MpaV2Params{.peer_to_peer = true, .rtr_write = true, .ird = 7, .ord = 9};
    }
    f.private_data = pd;
    auto in = encode(f);
    MpaFrameDecoder dec(f.kind);
    EXPECT_EQ(dec.consume(in), in.size());
    ASSERT_TRUE(dec.done()) << bits;
    const auto& g = dec.frame();
    EXPECT_EQ(g.markers, f.markers);
    EXPECT_EQ(g.crc, f.crc);
    EXPECT_EQ(g.reject, f.reject);
    EXPECT_EQ(g.revision, f.revision);
    EXPECT_EQ(g.v2.has_value(), f.v2.has_value());
    if (g.v2) {
      EXPECT_EQ(g.v2->ird, 7);
      EXPECT_EQ(g.v2->ord, 9);
      EXPECT_TRUE(g.v2->rtr_write);
    }
    EXPECT_EQ(std::vector<uint8_t>(g.private_data.begin(), g.private_data.end()), pd);
  }
}

}  // namespace
}  // namespace uiw::wire
