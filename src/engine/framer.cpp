// What both framers share: feeding octets the caller holds to one segment.
#include "engine/framer.h"

#include <algorithm>
#include <cstring>

#include "memory/app_copy.h"

namespace uiw::engine {

size_t seg_copy_in(SegmentRx& seg, std::span<const uint8_t> in) {
  size_t used = 0;
  while (used < in.size() && !seg.draining()) {
    bool app = false;
    const RxNeed need = seg.seg_need(&app);
    if (need.len == 0) break;
    const size_t k = std::min(need.len, in.size() - used);
    if (app) {
      if (memory::copy_to_app(need.dst, in.data() + used, k) != 0) {
        seg.seg_fault();
        break;  // the segment is dropped from here on
      }
    } else {
      std::memcpy(need.dst, in.data() + used, k);
    }
    seg.seg_commit(k);
    used += k;
  }
  return used;
}

}  // namespace uiw::engine
