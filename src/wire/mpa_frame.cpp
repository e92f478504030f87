#include "wire/mpa_frame.h"

#include <algorithm>
#include <cstring>

#include "uiw-setup.h"
#include "wire/bytes.h"

namespace uiw::wire {

namespace {

constexpr size_t kFlagsOffset = 16;
constexpr size_t kRevOffset = 17;
constexpr size_t kPdLengthOffset = 18;

const std::array<uint8_t, kMpaKeySize>& key_for(MpaFrameKind k) {
  return k == MpaFrameKind::Request ? kMpaKeyRequest : kMpaKeyReply;
}

uint8_t rdmap_ext_flag(MpaFrameKind k) {
  return k == MpaFrameKind::Request ? kMpaFlagRdmapExtOffer : kMpaFlagRdmapExtAccept;
}

}  // namespace

void encode_mpa_v2_params(uint8_t* out4, const MpaV2Params& p) {
  // RFC 6581 §7.1: |A|B| IRD |C|D| ORD |, bit assignment as in Linux siw (see header).
  uint16_t ird = p.ird & kMpaV2IrdOrdMask;
  uint16_t ord = p.ord & kMpaV2IrdOrdMask;
  if (p.peer_to_peer) ird |= kMpaV2PeerToPeer;
  if (p.rtr_send) ird |= kMpaV2ZeroLengthRtr;
  if (p.rtr_write) ord |= kMpaV2WriteRtr;
  if (p.rtr_read) ord |= kMpaV2ReadRtr;
  store_be16(out4, ird);
  store_be16(out4 + 2, ord);
}

// The parser uiw.ko uses (uiw-setup.h).
MpaV2Params decode_mpa_v2_params(const uint8_t* in4) {
  uiw_mpa_v2 w;
  uiw_mpa_v2_parse(in4, &w);
  MpaV2Params p;
  p.peer_to_peer = w.p2p != 0;
  p.rtr_send = w.send_rtr != 0;
  p.rtr_write = w.write_rtr != 0;
  p.rtr_read = w.read_rtr != 0;
  p.ird = w.ird;
  p.ord = w.ord;
  return p;
}

size_t mpa_frame_size(const MpaFrame& f) {
  return kMpaFrameHeaderSize + (f.v2 ? kMpaV2ParamsSize : 0) + f.private_data.size();
}

size_t encode_mpa_frame(std::span<uint8_t> out, const MpaFrame& f) {
  const size_t pd_len = mpa_frame_size(f) - kMpaFrameHeaderSize;
  if (pd_len > kMpaMaxPrivateData) return 0;  // RFC 5044 §7.1.1: PD_Length at most 512
  if (f.v2 && f.revision != kMpaRevision2) return 0;
  if (out.size() < mpa_frame_size(f)) return 0;

  uint8_t* p = out.data();
  const auto& key = key_for(f.kind);
  std::memcpy(p, key.data(), key.size());
  uint8_t flags = 0;  // Res bits other than the enhanced and RFC 7306 flags are sent as 0
  if (f.markers) flags |= kMpaFlagMarkers;
  if (f.crc) flags |= kMpaFlagCrc;
  // R is the Responder's reject bit; a Request sends it as 0.
  if (f.reject && f.kind == MpaFrameKind::Reply) flags |= kMpaFlagReject;
  if (f.v2) flags |= kMpaFlagEnhanced;
  if (f.rdmap_ext) flags |= rdmap_ext_flag(f.kind);
  p[kFlagsOffset] = flags;
  p[kRevOffset] = f.revision;
  store_be16(p + kPdLengthOffset, static_cast<uint16_t>(pd_len));
  size_t off = kMpaFrameHeaderSize;
  if (f.v2) {
    encode_mpa_v2_params(p + off, *f.v2);
    off += kMpaV2ParamsSize;
  }
  if (!f.private_data.empty()) {
    std::memcpy(p + off, f.private_data.data(), f.private_data.size());
    off += f.private_data.size();
  }
  return off;
}

static_assert(kMpaFlagRdmapExtOffer << 8 == UIW_MPA_RDMAP_EXT_OFFER &&
                  kMpaFlagRdmapExtAccept << 8 == UIW_MPA_RDMAP_EXT_ACCEPT,
              "the same bits as uiw.ko's");

// ---------------------------------------------------------------------------------------------
// MpaFrameDecoder

MpaFrameDecoder::MpaFrameDecoder(MpaFrameKind expected) : expected_(expected) {
  frame_.kind = expected;
}

void MpaFrameDecoder::fail(Error e, const char* detail) {
  error_ = e;
  error_detail_ = detail;
}

// Validates the 20-octet header with uiw.ko's parser (uiw-setup.h); sets need_ to the full
// frame size.
bool MpaFrameDecoder::parse_header() {
  uint16_t bits = 0, pd_len = 0;
  switch (uiw_mpa_hdr_parse(buf_.data(), expected_ == MpaFrameKind::Request, &bits, &pd_len)) {
    case UIW_MPA_HDR_OK:
      break;
    case UIW_MPA_HDR_BAD_KEY:  // checked as the key arrived already
      fail(Error::BadKey, "bad MPA key");
      return false;
    case UIW_MPA_HDR_BAD_REV:
      // RFC 5044 §7.1.1: a receiver closes the connection if it cannot interoperate with the
      // revision; uiw speaks Rev 1 (RFC 5044) and Rev 2 (RFC 6581).
      fail(Error::UnsupportedRevision, "MPA revision is not 1 or 2");
      return false;
    case UIW_MPA_HDR_PD_TOO_LONG:
      fail(Error::PrivateDataTooLong, "MPA PD_Length exceeds 512");
      return false;
    case UIW_MPA_HDR_NO_V2:
      // RFC 6581 §7.1 (siw: reject when pd_len < sizeof(struct mpa_v2_data)).
      fail(Error::MissingV2Params, "MPA Rev 2 enhanced frame without the IRD/ORD word");
      return false;
  }
  const uint8_t flags = buf_[kFlagsOffset];
  frame_.kind = expected_;
  frame_.markers = (flags & kMpaFlagMarkers) != 0;
  frame_.crc = (flags & kMpaFlagCrc) != 0;
  // R is meaningful in a Reply only ("Request: 0, not checked").
  frame_.reject = expected_ == MpaFrameKind::Reply && (flags & kMpaFlagReject) != 0;
  frame_.rdmap_ext = (flags & rdmap_ext_flag(expected_)) != 0;
  frame_.revision = static_cast<uint8_t>(bits & UIW_MPA_REV_MASK);
  need_ = kMpaFrameHeaderSize + pd_len;
  return true;
}

void MpaFrameDecoder::finish() {
  const uint8_t flags = buf_[kFlagsOffset];
  size_t off = kMpaFrameHeaderSize;
  frame_.v2.reset();
  if (frame_.revision == kMpaRevision2 && (flags & kMpaFlagEnhanced) != 0) {
    frame_.v2 = decode_mpa_v2_params(buf_.data() + off);
    off += kMpaV2ParamsSize;
  }
  frame_.private_data = std::span<const uint8_t>(buf_.data() + off, need_ - off);
  done_ = true;
}

size_t MpaFrameDecoder::consume(std::span<const uint8_t> in) {
  if (done_ || error_ != Error::None) return 0;
  size_t used = 0;
  while (used < in.size() && got_ < need_) {
    const size_t take = std::min(in.size() - used, need_ - got_);
    const size_t before = got_;
    std::memcpy(buf_.data() + got_, in.data() + used, take);
    got_ += take;
    used += take;
    // Compare the key as it arrives so garbage is rejected without waiting for 20 octets
    // (RFC 5044 §7.1.2: any other key closes the connection).
    if (before < kMpaKeySize) {
      const size_t upto = std::min(got_, kMpaKeySize);
      if (!uiw_mpa_key_match(buf_.data(), static_cast<unsigned>(before),
                             static_cast<unsigned>(upto), expected_ == MpaFrameKind::Request)) {
        fail(Error::BadKey, expected_ == MpaFrameKind::Request ? "expected \"MPA ID Req Frame\""
                                                               : "expected \"MPA ID Rep Frame\"");
        return used;
      }
    }
    if (before < kMpaFrameHeaderSize && got_ == kMpaFrameHeaderSize && !parse_header()) {
      return used;
    }
  }
  if (got_ == need_ && got_ >= kMpaFrameHeaderSize) finish();
  return used;
}

}  // namespace uiw::wire
