#include "wire/ddp.h"

#include "wire/bytes.h"

namespace uiw::wire {

// RFC 5041 §4.1: control octet T | L | Rsvd(4) = 0 | DV(2).
static uint8_t ddp_control_octet(const SegmentHeader& h) {
  uint8_t c = h.ddp_version & kDdpMaskVersion;
  if (h.tagged) c |= kDdpFlagTagged;
  if (h.last) c |= kDdpFlagLast;
  return c;
}

size_t encode_segment_header(uint8_t* out, const SegmentHeader& h) {
  out[0] = ddp_control_octet(h);
  out[1] = h.rdmap_control;  // RsvdULP[0:7] carries the RDMAP control field (RFC 5040 §4.1)
  if (h.tagged) {
    // RFC 5041 §4.2: STag (32) then TO (64).
    store_be32(out + 2, h.stag);
    store_be64(out + 6, h.to);
    return kTaggedHeaderSize;
  }
  // RFC 5041 §4.3: RsvdULP[8:39] (Invalidate STag, RFC 5040 §4.1), QN, MSN, MO.
  store_be32(out + 2, h.inval_stag);
  store_be32(out + 6, h.qn);
  store_be32(out + 10, h.msn);
  store_be32(out + 14, h.mo);
  return kUntaggedHeaderSize;
}

size_t decode_segment_header(std::span<const uint8_t> in, SegmentHeader* out) {
  if (in.empty()) return 0;
  const uint8_t c = in[0];
  const bool tagged = (c & kDdpFlagTagged) != 0;
  const size_t size = segment_header_size(tagged);
  if (in.size() < size) return 0;
  const uint8_t* p = in.data();
  SegmentHeader h;
  h.tagged = tagged;
  h.last = (c & kDdpFlagLast) != 0;
  h.ddp_version = c & kDdpMaskVersion;  // Rsvd bits are "not checked on receive" (RFC 5041 §4.1)
  h.rdmap_control = p[1];
  if (tagged) {
    h.stag = load_be32(p + 2);
    h.to = load_be64(p + 6);
  } else {
    h.inval_stag = load_be32(p + 2);
    h.qn = load_be32(p + 6);
    h.msn = load_be32(p + 10);
    h.mo = load_be32(p + 14);
  }
  *out = h;
  return size;
}

}  // namespace uiw::wire
