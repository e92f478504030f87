#include "wire/sctp.h"

#include <cstring>

#include "uiw-setup.h"
#include "wire/bytes.h"

namespace uiw::wire {

size_t encode_adaptation_indication(std::span<uint8_t> out, uint32_t indication) {
  Writer w(out);
  // RFC 5061 §4.2.7 / RFC 5043 §5.1: Type 0xC006, Length 8 (includes the 4-octet header).
  if (!w.write_u16(kAdaptationParamType) || !w.write_u16(kAdaptationParamSize) ||
      !w.write_u32(indication)) {
    return 0;
  }
  return w.position();
}

SctpDecodeError decode_adaptation_indication(std::span<const uint8_t> in, uint32_t* indication) {
  Reader r(in);
  uint16_t type = 0, len = 0;
  uint32_t value = 0;
  if (!r.read_u16(&type) || !r.read_u16(&len) || !r.read_u32(&value)) {
    return SctpDecodeError::TooShort;
  }
  if (type != kAdaptationParamType || len != kAdaptationParamSize) {
    return SctpDecodeError::BadParameter;
  }
  *indication = value;
  return SctpDecodeError::None;
}

size_t encode_ddp_segment_chunk(std::span<uint8_t> out, uint16_t ddp_ssn,
                                std::span<const uint8_t> segment) {
  Writer w(out);
  // RFC 5043 §5.2.2: DDP-SSN (16) then the DDP segment; no MPA length, pad or CRC.
  if (out.size() < kDdpSsnSize + segment.size()) return 0;
  w.write_u16(ddp_ssn);
  w.write_bytes(segment);
  return w.position();
}

SctpDecodeError decode_ddp_segment_chunk(std::span<const uint8_t> in, uint16_t* ddp_ssn,
                                         std::span<const uint8_t>* segment) {
  Reader r(in);
  if (!r.read_u16(ddp_ssn)) return SctpDecodeError::TooShort;
  *segment = r.rest();
  return SctpDecodeError::None;
}

size_t session_control_size(const SessionControl& s) {
  return kSessionControlHeaderSize + s.private_data.size();
}

size_t encode_session_control(std::span<uint8_t> out, const SessionControl& s) {
  // RFC 5043 §5.2.3: "Private Data length MUST NOT exceed 512 bytes in any message"; a
  // Terminate "MUST NOT" include Private Data.
  if (s.private_data.size() > kSctpMaxPrivateData) return 0;
  if (s.function == SessionFunction::Terminate && !s.private_data.empty()) return 0;
  if (out.size() < session_control_size(s)) return 0;
  Writer w(out);
  w.write_u16(s.ddp_ssn);
  w.write_u16(static_cast<uint16_t>(s.function));
  w.write_bytes(s.private_data);
  return w.position();
}

// The parser uiw.ko uses (uiw-setup.h).
SctpDecodeError decode_session_control(std::span<const uint8_t> in, SessionControl* out) {
  uint16_t ssn = 0, code = 0;
  switch (uiw_sctp_ctrl_parse(in.data(), static_cast<uint32_t>(in.size()), &ssn, &code)) {
    case UIW_SCTP_CTRL_OK:
      break;
    case UIW_SCTP_CTRL_SHORT:
      return SctpDecodeError::TooShort;
    case UIW_SCTP_CTRL_PD_TOO_LONG:
      return SctpDecodeError::PrivateDataTooLong;
    case UIW_SCTP_CTRL_BAD_FN:
      return SctpDecodeError::BadFunction;
    case UIW_SCTP_CTRL_TERMINATE_PD:
      return SctpDecodeError::TerminateWithPrivateData;
  }
  // No length field: Private Data is the rest of the chunk's user data (RFC 5043 §5.2.3).
  out->ddp_ssn = ssn;
  out->function = static_cast<SessionFunction>(code);
  out->private_data = in.subspan(kSessionControlHeaderSize);
  return SctpDecodeError::None;
}

}  // namespace uiw::wire
