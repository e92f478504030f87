// DDP over SCTP (RFC 5043): the Adaptation Layer Indication parameter, the DDP
// Segment chunk payload (PPID 16) and the DDP Stream Session Control payload (PPID 17).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "uiw-setup.h"

namespace uiw::wire {

// The values uiw.ko uses (uiw-setup.h).
inline constexpr uint32_t kPpidDdpSegment = UIW_SCTP_PPID_SEGMENT;  // RFC 5043 §5.2, §12
inline constexpr uint32_t kPpidSessionControl = UIW_SCTP_PPID_CONTROL;
inline constexpr uint16_t kAdaptationParamType = 0xC006;  // RFC 5061 Adaptation Layer Indication
inline constexpr uint32_t kDdpAdaptationIndication = 1;   // RFC 5043 §5.1
inline constexpr size_t kAdaptationParamSize = 8;
inline constexpr size_t kSctpMaxPrivateData = UIW_SCTP_MAX_PD;  // RFC 5043 §5.2.3
inline constexpr size_t kSctpMinMaxSegment = 516;               // 512 private data + 4-octet header
inline constexpr size_t kDdpSsnSize = 2;
inline constexpr size_t kSessionControlHeaderSize = UIW_SCTP_CTRL_HDR;

enum class SessionFunction : uint16_t {
  Initiate = UIW_SCTP_FN_INITIATE,
  Accept = UIW_SCTP_FN_ACCEPT,
  Reject = UIW_SCTP_FN_REJECT,
  Terminate = UIW_SCTP_FN_TERMINATE
};

enum class SctpDecodeError {
  None,
  TooShort,
  BadFunction,
  PrivateDataTooLong,
  TerminateWithPrivateData,
  BadParameter
};

// Adaptation Layer Indication parameter: Type 0xC006 | Length 8 | Indication (all big-endian).
// encode returns 8, or 0 if out is too small.
size_t encode_adaptation_indication(std::span<uint8_t> out,
                                    uint32_t indication = kDdpAdaptationIndication);
// Decodes the parameter; BadParameter when the type is not 0xC006 or the length not 8.
// Whether the value is DDP (1) is the caller's decision (RFC 5043 §11.1 action table).
SctpDecodeError decode_adaptation_indication(std::span<const uint8_t> in, uint32_t* indication);

// DDP Segment chunk payload: DDP-SSN (16) then the DDP segment (RFC 5043 §5.2.2).
size_t encode_ddp_segment_chunk(std::span<uint8_t> out, uint16_t ddp_ssn,
                                std::span<const uint8_t> segment);
SctpDecodeError decode_ddp_segment_chunk(std::span<const uint8_t> in, uint16_t* ddp_ssn,
                                         std::span<const uint8_t>* segment);

// Session Control payload: DDP-SSN (16) | Function Code (16) | Private Data (RFC 5043 §5.2.3).
struct SessionControl {
  uint16_t ddp_ssn = 0;
  SessionFunction function = SessionFunction::Initiate;
  std::span<const uint8_t> private_data;  // points into the decoded input
};
size_t session_control_size(const SessionControl& s);
// Returns octets written; 0 if out is too small, private data > 512, or Terminate carries any.
size_t encode_session_control(std::span<uint8_t> out, const SessionControl& s);
// BadFunction for codes other than 1-4; PrivateDataTooLong for > 512 octets;
// TerminateWithPrivateData when a Terminate carries private data ("MUST NOT be included").
SctpDecodeError decode_session_control(std::span<const uint8_t> in, SessionControl* out);

// 16-bit serial-number comparison for DDP-SSNs (RFC 5043 §10: < 32768 in flight).
constexpr bool ssn_less(uint16_t a, uint16_t b) {
  return a != b && static_cast<uint16_t>(b - a) < 0x8000;
}

}  // namespace uiw::wire
