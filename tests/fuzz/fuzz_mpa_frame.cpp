// libFuzzer target: MPA Request/Reply parser (RFC 5044 §7.1.1, RFC 6581), both frame kinds.
// The first input octet picks the kind and a chunking step so incremental parsing is covered.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <span>
#include <vector>

#include "wire/mpa_frame.h"

using namespace uiw::wire;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint8_t mode = data[0];
  std::span<const uint8_t> in(data + 1, size - 1);
  const MpaFrameKind kind = (mode & 1) ? MpaFrameKind::Reply : MpaFrameKind::Request;
  const size_t step = 1 + (mode >> 1);  // 1..128 octets per consume() call

  MpaFrameDecoder dec(kind);
  size_t off = 0;
  while (off < in.size()) {
    const size_t n = std::min(step, in.size() - off);
    const size_t used = dec.consume(in.subspan(off, n));
    if (used > n) abort();
    off += used;
    if (used < n) break;  // done or error: the decoder stops at the frame end
  }
  if (dec.done()) {
    if (dec.error() != MpaFrameDecoder::Error::None) abort();
    const MpaFrame& f = dec.frame();
    if (f.private_data.size() > kMpaMaxPrivateData) abort();
    // Consumed exactly header + PD_Length.
    if (off != mpa_frame_size(f)) abort();
    // Re-encoding yields the same frame size, and decoding the re-encoding gives the same frame.
    std::vector<uint8_t> out(mpa_frame_size(f));
    if (encode_mpa_frame(out, f) != out.size()) abort();
    MpaFrameDecoder again(kind);
    if (again.consume(out) != out.size() || !again.done()) abort();
    const MpaFrame& g = again.frame();
    if (g.crc != f.crc || g.markers != f.markers || g.reject != f.reject ||
        g.revision != f.revision || g.v2.has_value() != f.v2.has_value() ||
        g.private_data.size() != f.private_data.size()) {
      abort();
    }
  }
  return 0;
}
