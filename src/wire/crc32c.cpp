#include "wire/crc32c.h"

#include <isa-l/crc.h>

#include <climits>

namespace uiw::wire {

// ISA-L's crc32_iscsi(buf, len, init) returns the raw reflected register (no final XOR) and
// takes the previous raw register as `init`, so it chains directly; with init 0xFFFFFFFF and a
// final XOR it is the RFC 3720 CRC32c (checked by the "123456789" -> 0xE3069283 unit test).
// Its length parameter is an int, so very large buffers are fed in chunks.
uint32_t crc32c_update(uint32_t state, const void* data, size_t len) {
  // crc32_iscsi takes a non-const pointer but only reads the buffer.
  auto* p = static_cast<unsigned char*>(const_cast<void*>(data));
  constexpr size_t kChunk = size_t{1} << 30;
  while (len > 0) {
    size_t n = len < kChunk ? len : kChunk;
    state = crc32_iscsi(p, static_cast<int>(n), state);
    p += n;
    len -= n;
  }
  return state;
}

uint32_t crc32c(const void* data, size_t len) {
  return crc32c_final(crc32c_update(kCrc32cInit, data, len));
}

}  // namespace uiw::wire
