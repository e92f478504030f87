#include "wire/rdmap.h"

#include <cstring>

#include "wire/bytes.h"

namespace uiw::wire {

static_assert(kReadRequestHeaderSize == 4 + 8 + 4 + 4 + 8, "RFC 5040 §4.4: 224 bits");
static_assert(opcode_info(7).qn == kQnTerminate && opcode_info(8).extension &&
              !opcode_info(12).valid);
static_assert(kAtomicRequestHeaderSize == 4 + 4 + 4 + 8 + 4 * 8, "RFC 7306 §5.2.1: 416 bits");
static_assert(kAtomicResponseHeaderSize == 4 + 8, "RFC 7306 §5.2.2 Figure 6");

// RFC 5040 §4.4 Figure 6: SinkSTag | SinkTO | RDMARDSZ | SrcSTag | SrcTO, all big-endian.
void encode_read_request(uint8_t* out28, const ReadRequestHeader& h) {
  store_be32(out28, h.sink_stag);
  store_be64(out28 + 4, h.sink_to);
  store_be32(out28 + 12, h.size);
  store_be32(out28 + 16, h.src_stag);
  store_be64(out28 + 20, h.src_to);
}

ReadRequestHeader decode_read_request(const uint8_t* in28) {
  ReadRequestHeader h;
  h.sink_stag = load_be32(in28);
  h.sink_to = load_be64(in28 + 4);
  h.size = load_be32(in28 + 12);
  h.src_stag = load_be32(in28 + 16);
  h.src_to = load_be64(in28 + 20);
  return h;
}

void encode_immediate(uint8_t* out8, const ImmediateData& d) {
  std::memcpy(out8, &d.imm, 4);
  store_be32(out8 + 4, d.info);
}

ImmediateData decode_immediate(const uint8_t* in8) {
  ImmediateData d;
  std::memcpy(&d.imm, in8, 4);
  d.info = load_be32(in8 + 4);
  return d;
}

void encode_atomic_request(uint8_t* out52, const AtomicRequestHeader& h) {
  store_be32(out52, h.aopcode & kAtomicMaskOpcode);  // the 28 reserved bits sent as 0
  store_be32(out52 + 4, h.request_id);
  store_be32(out52 + 8, h.stag);
  store_be64(out52 + 12, h.to);
  store_be64(out52 + 20, h.data);
  store_be64(out52 + 28, h.data_mask);
  store_be64(out52 + 36, h.compare);
  store_be64(out52 + 44, h.compare_mask);
}

AtomicRequestHeader decode_atomic_request(const uint8_t* in52) {
  AtomicRequestHeader h;
  h.aopcode = static_cast<uint8_t>(load_be32(in52) & kAtomicMaskOpcode);
  h.request_id = load_be32(in52 + 4);
  h.stag = load_be32(in52 + 8);
  h.to = load_be64(in52 + 12);
  h.data = load_be64(in52 + 20);
  h.data_mask = load_be64(in52 + 28);
  h.compare = load_be64(in52 + 36);
  h.compare_mask = load_be64(in52 + 44);
  return h;
}

void encode_atomic_response(uint8_t* out12, const AtomicResponseHeader& h) {
  store_be32(out12, h.request_id);
  store_be64(out12 + 4, h.original);
}

AtomicResponseHeader decode_atomic_response(const uint8_t* in12) {
  return {load_be32(in12), load_be64(in12 + 4)};
}

}  // namespace uiw::wire
