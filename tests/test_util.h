// Helpers shared by the unit and integration tests.
#pragma once

#include <cstddef>
#include <cstring>

namespace uiw::test {

// memcmp for buffers that may be empty (std::vector::data() of an empty vector may be null,
// and memcmp on a null pointer is undefined even for length 0).
inline bool same_bytes(const void* a, const void* b, size_t n) {
  return n == 0 || std::memcmp(a, b, n) == 0;
}

}  // namespace uiw::test
