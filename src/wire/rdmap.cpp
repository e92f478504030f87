#include "wire/rdmap.h"

#include "wire/bytes.h"

namespace uiw::wire {

static_assert(kReadRequestHeaderSize == 4 + 8 + 4 + 4 + 8, "RFC 5040 §4.4: 224 bits");
static_assert(opcode_info(7).qn == kQnTerminate && !opcode_info(8).valid);

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

}  // namespace uiw::wire
