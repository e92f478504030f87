// DDP segment headers (RFC 5041 §4). One struct for both header forms because
// the ULP-reserved octets carry the RDMAP control field and the Invalidate STag (RFC 5040 §4.1).
//
// Tagged (14 octets):   ctrl | rsvdulp(rdmap ctrl) | STag(4) | TO(8)
// Untagged (18 octets): ctrl | rsvdulp[0:7](rdmap ctrl) | rsvdulp[8:39](inval STag, 4) |
//                       QN(4) | MSN(4) | MO(4)
// ctrl octet: T 0x80 | L 0x40 | Rsvd 0x3C | DV 0x03 (RFC 5041 §4.1).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace uiw::wire {

inline constexpr size_t kTaggedHeaderSize = 14;    // RFC 5041 §4.2
inline constexpr size_t kUntaggedHeaderSize = 18;  // RFC 5041 §4.3
inline constexpr uint8_t kDdpFlagTagged = 0x80;    // T
inline constexpr uint8_t kDdpFlagLast = 0x40;      // L
inline constexpr uint8_t kDdpMaskReserved = 0x3C;  // Rsvd: sent 0, not checked
inline constexpr uint8_t kDdpMaskVersion = 0x03;   // DV
inline constexpr uint8_t kDdpVersion = 1;          // RFC 5041 §4.1: DV "MUST be set to one"

struct SegmentHeader {
  bool tagged = false;
  bool last = false;
  uint8_t ddp_version = kDdpVersion;  // 2 bits
  uint8_t rdmap_control = 0;          // RsvdULP[0:7]
  // Tagged only.
  uint32_t stag = 0;
  uint64_t to = 0;
  // Untagged only.
  uint32_t inval_stag = 0;  // RsvdULP[8:39]
  uint32_t qn = 0;
  uint32_t msn = 0;
  uint32_t mo = 0;
};

constexpr size_t segment_header_size(bool tagged) {
  return tagged ? kTaggedHeaderSize : kUntaggedHeaderSize;
}

// Writes 14 (tagged) or 18 (untagged) octets; `out` must have room. Reserved bits are 0.
size_t encode_segment_header(uint8_t* out, const SegmentHeader& h);

// Decodes the header at the start of `in` (form chosen by the T bit). Returns its size, or 0 if
// `in` is too short. Reserved bits are not checked (RFC 5041 §4.1); DV is returned, not checked.
size_t decode_segment_header(std::span<const uint8_t> in, SegmentHeader* out);

}  // namespace uiw::wire
