// Test support: two engine Qps connected by an in-memory byte pump (no sockets, no threads).
#pragma once

#include <array>
#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include "engine/qp.h"
#include "wire/mpa.h"

namespace uiw::engine::test {

struct Side {
  explicit Side(uint32_t qpn, bool srq = false) : reg(1024), scq(1024), rcq(1024), rq(1024, srq) {
    pd = reg.alloc_pd();
    QpConfig c;
    c.qp_num = qpn;
    c.pd = pd;
    c.sq_depth = 256;
    c.registry = &reg;
    c.send_cq = &scq;
    c.recv_cq = &rcq;
    c.rq = &rq;
    c.on_event = [this](QpEvent e) { events.push_back(e); };
    c.counters = counters.data();
    qp = std::make_unique<Qp>(c);
  }
  memory::Stag reg_mr(std::vector<uint8_t>& buf, uint32_t access) {
    int err = 0;
    return reg.register_region(pd, buf.data(), buf.size(), reinterpret_cast<uint64_t>(buf.data()),
                               access, &err);
  }
  std::vector<Completion> poll_send() { return poll(scq); }
  std::vector<Completion> poll_recv() { return poll(rcq); }
  static std::vector<Completion> poll(CompletionQueue& cq) {
    std::vector<Completion> out(cq.size());
    out.resize(cq.poll(out));
    return out;
  }
  bool has_event(QpEvent e) const {
    for (QpEvent x : events)
      if (x == e) return true;
    return false;
  }

  memory::Registry reg;
  uint32_t pd = 0;
  CompletionQueue scq, rcq;
  ReceiveQueue rq;
  std::array<uint64_t, UIW_CNT_NUM> counters{};  // this side's context counters (uiw-abi.h)
  std::unique_ptr<Qp> qp;
  std::vector<QpEvent> events;
};

inline Sge sge_of(std::vector<uint8_t>& buf, memory::Stag lkey, size_t off = 0,
                  size_t len = SIZE_MAX) {
  if (len == SIZE_MAX) len = buf.size() - off;
  return {reinterpret_cast<uint64_t>(buf.data() + off), static_cast<uint32_t>(len), lkey};
}

inline void fill_pattern(std::vector<uint8_t>& v, uint32_t seed) {
  for (size_t i = 0; i < v.size(); ++i)
    v[i] = static_cast<uint8_t>((i * 131 + seed * 7 + (i >> 8)) & 0xff);
}

// Moves bytes both ways until nothing moves. `chunk` limits every transfer (short reads/writes).
// tap_ab collects every byte a sent to b. A side that wants its sending side shut gets its FIN
// delivered to the peer (rx_eof) once all its bytes were moved.
struct Pump {
  Side& a;
  Side& b;
  size_t chunk = SIZE_MAX;
  std::vector<uint8_t>* tap_ab = nullptr;
  std::vector<uint8_t>* tap_ba = nullptr;
  // Corrupts the byte of the a->b stream at this offset (SIZE_MAX: none).
  size_t flip_ab_at = SIZE_MAX;
  bool eof_ab = false, eof_ba = false;
  uint64_t moved_ab = 0;

  size_t move(Side& x, Side& y, std::vector<uint8_t>* tap, bool ab) {
    std::span<const iovec> iov = x.qp->tx_pending();
    std::vector<uint8_t> buf;
    for (const iovec& v : iov) {
      const size_t k = std::min(v.iov_len, chunk - buf.size());
      const auto* p = static_cast<const uint8_t*>(v.iov_base);
      buf.insert(buf.end(), p, p + k);
      if (buf.size() == chunk) break;
    }
    if (buf.empty()) return 0;
    if (ab && flip_ab_at >= moved_ab && flip_ab_at < moved_ab + buf.size())
      buf[flip_ab_at - moved_ab] ^= 0x01;
    if (ab) moved_ab += buf.size();
    if (tap) tap->insert(tap->end(), buf.begin(), buf.end());
    x.qp->tx_commit(buf.size());
    size_t used = 0;
    while (used < buf.size()) {
      const size_t n = y.qp->rx_feed({buf.data() + used, buf.size() - used});
      if (n == 0) break;
      used += n;
    }
    return buf.size();
  }
  void run(long max_rounds = 100000000) {
    for (long i = 0; i < max_rounds; ++i) {
      size_t n = move(a, b, tap_ab, true) + move(b, a, tap_ba, false);
      if (!eof_ab && a.qp->tx_want_shutdown() && a.qp->tx_idle()) {
        eof_ab = true;
        b.qp->rx_eof();
        ++n;
      }
      if (!eof_ba && b.qp->tx_want_shutdown() && b.qp->tx_idle()) {
        eof_ba = true;
        a.qp->rx_eof();
        ++n;
      }
      if (n == 0) return;
    }
  }
};

// Connects a (initiator) and b (responder) with the given parameters.
inline void connect(Side& a, Side& b, ConnParams p) {
  ConnParams pa = p, pb = p;
  pa.initiator = true;
  pb.initiator = false;
  std::swap(pb.markers_rx, pb.markers_tx);
  a.qp->start(pa);
  b.qp->start(pb);
}

}  // namespace uiw::engine::test
