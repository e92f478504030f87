// RDMAP Terminate header (RFC 5040 §4.8, Figures 8-10) and the master table of
// Terminate causes (RFC 5040 Figure 9, RFC 5041 §7.2, RFC 5044 §8, RFC 6581).
//
// Terminate header, after the untagged DDP header of the Terminate message (QN 2):
//   octet 0: Layer(4) | EType(4)   octet 1: Error Code   octet 2: M 0x80 | D 0x40 | R 0x20
//   octet 3: reserved (with the low 5 bits of octet 2: 13 reserved bits, sent 0, ignored)
//   then, if M or D: DDP Segment Length (16, big-endian)
//   then, if D: the terminated DDP header, 14 or 18 octets (size from its own T bit)
//   then, if R: the terminated RDMA Read Request header, 28 octets
// The header is not 4-aligned after the length field.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace uiw::wire {

enum class TermLayer : uint8_t { Rdma = 0, Ddp = 1, Llp = 2 };

namespace term {
// Error types per layer.
inline constexpr uint8_t kRdmaLocalCatastrophic = 0;  // RFC 5040 Figure 9
inline constexpr uint8_t kRdmaRemoteProtection = 1;
inline constexpr uint8_t kRdmaRemoteOperation = 2;
inline constexpr uint8_t kDdpLocalCatastrophic = 0;  // RFC 5041 §7.2
inline constexpr uint8_t kDdpTagged = 1;
inline constexpr uint8_t kDdpUntagged = 2;
inline constexpr uint8_t kLlpMpa = 0;  // RFC 5044 §8

// RDMA layer codes (RFC 5040 Figure 9).
inline constexpr uint8_t kInvalidStag = 0x00;
inline constexpr uint8_t kBaseBounds = 0x01;
inline constexpr uint8_t kAccessRights = 0x02;
inline constexpr uint8_t kStagNotAssociated = 0x03;
inline constexpr uint8_t kToWrap = 0x04;
inline constexpr uint8_t kInvalidRdmapVersion = 0x05;
inline constexpr uint8_t kUnexpectedOpcode = 0x06;
inline constexpr uint8_t kCatastrophicStream = 0x07;
inline constexpr uint8_t kCatastrophicGlobal = 0x08;
inline constexpr uint8_t kCannotInvalidate = 0x09;
inline constexpr uint8_t kUnspecified = 0xFF;
inline constexpr uint8_t kLocalCatastrophicCode = 0x00;  // "None" in Figure 9, sent as 0

// DDP tagged buffer codes (RFC 5041 §7.2, EType 1).
inline constexpr uint8_t kDdpInvalidStag = 0;
inline constexpr uint8_t kDdpBaseBounds = 1;
inline constexpr uint8_t kDdpStagNotAssociated = 2;
inline constexpr uint8_t kDdpToWrap = 3;
inline constexpr uint8_t kDdpInvalidVersion = 4;
// DDP untagged buffer codes (RFC 5041 §7.2, EType 2).
inline constexpr uint8_t kDdpInvalidQn = 1;
inline constexpr uint8_t kDdpNoBuffer = 2;
inline constexpr uint8_t kDdpMsnRange = 3;
inline constexpr uint8_t kDdpInvalidMo = 4;
inline constexpr uint8_t kDdpTooLong = 5;
inline constexpr uint8_t kDdpUntaggedInvalidVersion = 6;

// LLP (MPA) codes (RFC 5044 §8; 5-7 from RFC 6581).
inline constexpr uint8_t kMpaConnectionLost = 1;
inline constexpr uint8_t kMpaCrc = 2;
inline constexpr uint8_t kMpaMarker = 3;
inline constexpr uint8_t kMpaBadFrame = 4;
inline constexpr uint8_t kMpaLocalCatastrophic = 5;
inline constexpr uint8_t kMpaInsufficientIrd = 6;
inline constexpr uint8_t kMpaNoMatchingRtr = 7;
}  // namespace term

// Header-control bits in octet 2 of the Terminate header.
inline constexpr uint8_t kTermFlagM = 0x80;  // DDP Segment Length valid
inline constexpr uint8_t kTermFlagD = 0x40;  // DDP header included
inline constexpr uint8_t kTermFlagR = 0x20;  // RDMA (Read Request) header included

inline constexpr size_t kTerminateControlSize = 4;
inline constexpr size_t kTerminateDdpLengthSize = 2;
inline constexpr size_t kTerminateMaxSize = 4 + 2 + 18 + 28;

struct TerminateCause {
  TermLayer layer = TermLayer::Rdma;
  uint8_t etype = 0;  // 4 bits
  uint8_t code = 0;
  friend bool operator==(const TerminateCause&, const TerminateCause&) = default;
};

// Name from the master table, or nullptr for a (layer, etype, code) not in it.
const char* terminate_cause_name(TerminateCause c);
// Every row of the master table, in table order.
std::span<const TerminateCause> all_terminate_causes();

struct TerminateHeaderFlags {
  bool m = false, d = false, r = false;
};
// The one rule for the Terminate header flags, used by the engine for every Terminate it sends.
// RFC 5040 Figure 10: DDP and RDMA remote errors copy the DDP header and length (M, D); LLP and
// local catastrophic errors copy nothing. R: §4.8 sends the RDMA header back "only ... if the
// terminate is associated with an RDMA Read Request", and Figure 10 never copies it for a
// DDP-layer error; where the two meet (a DDP error in a Read Request: MSN range, no QN 1
// buffer) Figure 10 decides, as it is the more specific and siw sends no R there either. So R
// is set for an RDMA-layer remote error in an incoming Read Request (is_read_request).
TerminateHeaderFlags terminate_flags_for(TerminateCause c, bool is_read_request = false);

struct TerminateMessage {
  TerminateCause cause{};
  bool m = false, d = false, r = false;
  uint16_t ddp_segment_length = 0;
  uint8_t ddp_header[18] = {};
  size_t ddp_header_size = 0;  // 0, 14 or 18
  uint8_t rdma_header[28] = {};
};

// Big-endian 32-bit Terminate control word, e.g. 0x1100C000 for DDP/Tagged/Invalid STag, M=D=1.
uint32_t terminate_control_word(const TerminateMessage& t);

// 4 + (2 if m or d) + (ddp_header_size if d) + (28 if r).
size_t terminate_size(const TerminateMessage& t);
// Writes the Terminate header (what follows the Terminate's own DDP header). Returns octets
// written, 0 if `out` is too small or d is set without a 14/18-octet ddp_header_size.
size_t encode_terminate(std::span<uint8_t> out, const TerminateMessage& t);

enum class TerminateDecodeError { None, TooShort, BadHeaderLength };
// Parses a Terminate header. The copied DDP header's size comes from its own T bit. Octets after
// the fields the M/D/R bits announce are ignored (RFC 5040 §7.1 item 21 lets senders send zeroed
// header fields). BadHeaderLength: R set without D, or with a tagged copied header (the RDMA
// header position is then undefined; a Read Request is untagged). Reserved bits are ignored.
TerminateDecodeError decode_terminate(std::span<const uint8_t> in, TerminateMessage* out);

}  // namespace uiw::wire
