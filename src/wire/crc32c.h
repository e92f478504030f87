// CRC32c (Castagnoli) for MPA FPDUs, computed by ISA-L's crc32_iscsi; no table of our own.
//
// RFC 5044 §4.4: the FPDU CRC "MUST be computed using the CRC32c polynomial in the manner
// described in the iSCSI Protocol" (RFC 3720 §12.1 / App. B.4): reflected polynomial 0x82F63B78,
// init 0xFFFFFFFF, final XOR 0xFFFFFFFF. The result goes on the wire least-significant octet first
// (store_le32; Figure 5 shows 0x83992352 as `52 23 99 83`).
#pragma once

#include <cstddef>
#include <cstdint>

namespace uiw::wire {

// Raw register value to start a chained computation with.
inline constexpr uint32_t kCrc32cInit = 0xFFFFFFFF;

// Feeds `len` octets into a raw (un-inverted) CRC32c state and returns the new raw state.
// Chainable: crc32c_update(crc32c_update(kCrc32cInit, a, n), b, m) == one pass over a||b.
uint32_t crc32c_update(uint32_t state, const void* data, size_t len);

// Turns a raw state into the CRC32c value (the final XOR of RFC 3720 §12.1).
inline uint32_t crc32c_final(uint32_t state) {
  return state ^ 0xFFFFFFFFu;
}

// One-shot CRC32c: crc32c("123456789", 9) == 0xE3069283.
uint32_t crc32c(const void* data, size_t len);

}  // namespace uiw::wire
