// libFuzzer target: the MPA FPDU deframer (RFC 5044 §4) plus the header decoders run on every
// delivered ULPDU: DDP (RFC 5041 §4), Read Request (RFC 5040 §4.4), Terminate (RFC 5040 §4.8).
// Input octet 0 chooses CRC on/off, Markers on/off, the chunk size and the start position.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <span>

#include "wire/ddp.h"
#include "wire/mpa.h"
#include "wire/rdmap.h"
#include "wire/terminate.h"

using namespace uiw::wire;

namespace {

struct ParsingVisitor : FpduDecoder::Visitor {
  size_t delivered = 0;
  void on_ulpdu(std::span<const uint8_t> ulpdu) override {
    ++delivered;
    SegmentHeader h;
    const size_t hn = decode_segment_header(ulpdu, &h);
    if (hn == 0) return;
    if (hn != segment_header_size(h.tagged) || hn > ulpdu.size()) abort();
    const std::span<const uint8_t> rest = ulpdu.subspan(hn);
    const OpcodeInfo& info = opcode_info(rdmap_opcode(h.rdmap_control));
    if (!info.valid || info.tagged != h.tagged) return;
    const auto op = static_cast<Opcode>(rdmap_opcode(h.rdmap_control));
    if (op == Opcode::ReadRequest && rest.size() >= kReadRequestHeaderSize) {
      const ReadRequestHeader rr = decode_read_request(rest.data());
      uint8_t again[kReadRequestHeaderSize];
      encode_read_request(again, rr);
      for (size_t i = 0; i < kReadRequestHeaderSize; ++i) {
        if (again[i] != rest[i]) abort();
      }
    }
    if (op == Opcode::Terminate) {
      TerminateMessage t;
      if (decode_terminate(rest, &t) == TerminateDecodeError::None) {
        if (terminate_size(t) > rest.size() || terminate_size(t) > kTerminateMaxSize) abort();
        (void)terminate_cause_name(t.cause);
        uint8_t out[kTerminateMaxSize];
        if (encode_terminate(out, t) != terminate_size(t)) abort();
      }
    }
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint8_t mode = data[0];
  const bool crc = mode & 1;
  const bool markers = mode & 2;
  const size_t step = (mode & 4) ? 1 + ((mode >> 3) & 7) * 37 : size;  // whole or chunked
  const uint64_t start =
      static_cast<uint64_t>((mode >> 6) & 3) * 500;  // 0, 500, 1000, 1500 (4-aligned)
  std::span<const uint8_t> in(data + 1, size - 1);

  ParsingVisitor v;
  FpduDecoder dec(&v, crc, markers, start);
  size_t off = 0;
  while (off < in.size() && dec.error() == FpduDecoder::Error::None) {
    const size_t n = std::min(step, in.size() - off);
    const size_t used = dec.consume(in.subspan(off, n));
    if (used > n) abort();
    if (used < n && dec.error() == FpduDecoder::Error::None) abort();  // must take all input
    off += used;
  }
  if (dec.stream_pos() != start + off) abort();
  if (dec.frames_decoded() != v.delivered) abort();
  return 0;
}
