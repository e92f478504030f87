// libFuzzer target: arbitrary bytes into the engine's receive path (FPDU framing, markers, CRC,
// or SCTP records; DDP/RDMAP validation, tagged and untagged placement, Read Responses into a
// Read's scatter list, delivery, Terminate), then the transmit side is drained.
// Input: mode byte (MPA options), ops byte (chunking, ORD/IRD, an outstanding Read), llp byte
// (bit 0: SCTP, RFC 5043; bit 1: RFC 7306 agreed; bit 2: with it, an outstanding FetchAdd after
// the Read), then the bytes the peer sent.
// The regions have fixed STags and the Read's sink STag is the engine's first, so the fuzzer
// reaches placement by mutating a seed instead of guessing random keys (tests/fuzz/corpus).
// Invariants checked beyond "no crash": guard bytes around every registered region never change,
// and a Qp that saw an error keeps reading (drains) instead of stopping.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "engine/qp.h"

using namespace uiw;

namespace {

constexpr size_t kGuard = 64;

struct Region {
  std::vector<uint8_t> mem;
  memory::Stag stag = 0;
  uint8_t* body() { return mem.data() + kGuard; }
  size_t size() const { return mem.size() - 2 * kGuard; }
  bool guards_ok() const {
    for (size_t i = 0; i < kGuard; ++i)
      if (mem[i] != 0xA5 || mem[mem.size() - 1 - i] != 0xA5) return false;
    return true;
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 3) return 0;
  const uint8_t mode = data[0];
  const uint8_t ops = data[1];
  const bool sctp = data[2] & 1;
  const bool rdmap_ext = data[2] & 2;
  const bool pending_atomic = rdmap_ext && (data[2] & 4);
  data += 3;
  size -= 3;

  memory::Registry reg(64);
  const uint32_t pd = reg.alloc_pd();
  engine::CompletionQueue scq(64), rcq(64);
  engine::ReceiveQueue rq(16, false);
  engine::QpConfig cfg;
  cfg.qp_num = 7;
  cfg.pd = pd;
  cfg.sq_depth = 16;
  cfg.registry = &reg;
  cfg.send_cq = &scq;
  cfg.recv_cq = &rcq;
  cfg.rq = &rq;
  engine::Qp qp(cfg);

  // Regions at small, fixed tagged offsets (iova 0x1000, 0x2000, 0x3000) under fixed STags
  // 0x101, 0x201, 0x301 (index i + 1, key 1).
  Region regions[3];
  for (int i = 0; i < 3; ++i) {
    Region& r = regions[i];
    r.mem.assign(256 + 2 * kGuard, 0xA5);
    std::memset(r.body(), 0, r.size());
    r.stag = (static_cast<memory::Stag>(i + 1) << 8) | 1;
    if (reg.register_region_with_stag(r.stag, pd, r.body(), r.size(), 0x1000u * (i + 1),
                                      memory::kLocalWrite | memory::kRemoteWrite |
                                          memory::kRemoteRead | memory::kRemoteAtomic) != 0)
      abort();
  }
  for (int i = 0; i < 4; ++i) {
    engine::RecvWr w;
    w.wr_id = i;
    w.num_sge = 2;
    // Local SGEs are addressed by tagged offset (the iova given at registration).
    w.sg_list[0] = {0x3000, 100, regions[2].stag};
    w.sg_list[1] = {0x3000 + 100, 60, regions[2].stag};
    rq.post(w);
  }
  if (ops & 1) {  // an outstanding 192-byte Read into region 1, so Read Responses have a sink
    engine::SendWr w;
    w.opcode = engine::WrOpcode::RdmaRead;
    w.num_sge = 2;
    w.sg_list[0] = {0x2000, 128, regions[1].stag};
    w.sg_list[1] = {0x2000 + 128, 64, regions[1].stag};
    w.remote_stag = 0x1234;
    if (qp.post_send(w) != 0) abort();
  }
  if (pending_atomic) {  // its original value lands in region 1 after the Read's
    engine::SendWr w;
    w.opcode = engine::WrOpcode::AtomicFetchAdd;
    w.num_sge = 1;
    w.sg_list[0] = {0x2000 + 192, 8, regions[1].stag};
    w.remote_stag = 0x1234;
    w.compare_add = 1;
    if (qp.post_send(w) != 0) abort();
  }

  engine::ConnParams p;
  p.crc = mode & 1;
  p.markers_rx = mode & 2;
  p.markers_tx = mode & 4;
  p.initiator = mode & 8;
  p.mulpdu = 128 + (mode >> 4) * 512;
  p.ord = p.ird = 1 + (ops >> 4);
  if (sctp) p.llp = engine::Llp::Sctp;
  p.rdmap_ext = rdmap_ext;
  qp.start(p);
  const auto drain_tx = [&qp] {
    for (int i = 0; i < 4; ++i) {
      auto iov = qp.tx_pending();
      size_t bytes = 0;
      for (const iovec& v : iov) bytes += v.iov_len;
      if (bytes == 0) break;
      qp.tx_commit(bytes);
    }
  };
  drain_tx();  // the Read Request goes out before any response can match it

  // Feed in chunks whose sizes come from `ops`, draining the transmit side between chunks.
  const size_t chunk = 1 + ((ops >> 1) & 7) * 37;
  for (size_t off = 0; off < size;) {
    const size_t n = std::min(chunk, size - off);
    const size_t used = qp.rx_feed({data + off, n});
    if (used != n) abort();  // the Qp must always consume (parse or drain)
    off += n;
    drain_tx();
  }
  qp.rx_eof();
  for (auto& r : regions)
    if (!r.guards_ok()) abort();
  engine::Completion c[64];
  scq.poll(c);
  rcq.poll(c);
  return 0;
}
