// Work requests the benchmarks post: one SGE over a registered buffer.
#pragma once

#include <cstddef>
#include <cstdint>

#include "engine/types.h"
#include "memory/registry.h"

namespace uiw::bench {

inline engine::Sge sge_of(void* p, size_t n, memory::Stag k) {
  return {reinterpret_cast<uint64_t>(p), static_cast<uint32_t>(n), k};
}

inline engine::RecvWr recv_wr(void* p, size_t n, memory::Stag k, uint64_t id = 0) {
  engine::RecvWr r;
  r.wr_id = id;
  r.num_sge = 1;
  r.sg_list[0] = sge_of(p, n, k);
  return r;
}

// A zero-length message has no SGE.
inline engine::SendWr send_wr(engine::WrOpcode op, void* p, size_t n, memory::Stag k,
                              uint32_t rkey = 0, uint64_t raddr = 0, bool signaled = true) {
  engine::SendWr w;
  w.opcode = op;
  w.flags = signaled ? uint32_t{engine::kSendSignaled} : 0u;
  w.num_sge = n ? 1 : 0;
  w.sg_list[0] = sge_of(p, n, k);
  w.remote_stag = rkey;
  w.remote_addr = raddr;
  return w;
}

}  // namespace uiw::bench
