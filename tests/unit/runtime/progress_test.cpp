// runtime::Progress with a peer that never stops: a stream whose every read returns another
// valid RDMA Write FPDU, so each pass of its QP moves bytes and it is never idle. Other QPs of
// the same Progress thread must still be served and torn down at once.
#include "runtime/progress.h"

#include <gtest/gtest.h>
#include <sys/uio.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <future>
#include <memory>
#include <vector>

#include "runtime/queue_pair.h"
#include "unit/engine/qp_pair.h"
#include "wire/ddp.h"
#include "wire/mpa.h"
#include "wire/rdmap.h"

namespace uiw::runtime {
namespace {

using namespace std::chrono_literals;

// Reads return RDMA Write FPDUs (CRC off) into stag at offset 0, forever; writes take all.
class EndlessWrites final : public transport::ByteStream {
 public:
  explicit EndlessWrites(uint32_t stag) {
    wire::SegmentHeader h;
    h.tagged = true;
    h.last = true;
    h.rdmap_control = wire::rdmap_control(wire::Opcode::RdmaWrite);
    h.stag = stag;
    h.to = 0;
    std::vector<uint8_t> ulpdu(wire::segment_header_size(true) + 1024, 0x5a);
    wire::encode_segment_header(ulpdu.data(), h);
    fpdu_.resize(wire::fpdu_size(ulpdu.size()));
    wire::encode_fpdu(fpdu_, 0, ulpdu, false, false);
  }
  transport::IoResult readv(const iovec* iov, int n) override {
    size_t total = 0;
    for (int i = 0; i < n; ++i) {
      auto* p = static_cast<uint8_t*>(iov[i].iov_base);
      for (size_t left = iov[i].iov_len; left > 0;) {
        const size_t k = std::min(left, fpdu_.size() - off_);
        std::copy_n(fpdu_.data() + off_, k, p);
        p += k;
        left -= k;
        off_ = (off_ + k) % fpdu_.size();
        total += k;
      }
    }
    reads++;
    return {transport::IoStatus::Ok, total, 0};
  }
  transport::IoResult writev(const iovec* iov, int n) override {
    size_t total = 0;
    for (int i = 0; i < n; ++i) total += iov[i].iov_len;
    return {transport::IoStatus::Ok, total, 0};
  }
  int fd() const override { return -1; }
  void shutdown_write() override {}
  void abort() override {}
  uint32_t emss() const override { return 1460; }
  std::atomic<uint64_t> reads{0};

 private:
  std::vector<uint8_t> fpdu_;
  size_t off_ = 0;
};

struct Endless {
  engine::test::Side side;
  std::vector<uint8_t> region = std::vector<uint8_t>(4096);
  std::unique_ptr<QueuePair> qp;
  EndlessWrites* stream = nullptr;  // Owned by qp's Connection.
  Endless(uint32_t qpn, Progress& p) : side(qpn) {
    const memory::Stag k = side.reg_mr(region, memory::kLocalWrite | memory::kRemoteWrite);
    engine::QpConfig c;
    c.qp_num = qpn;
    c.pd = side.pd;
    c.sq_depth = 16;
    c.registry = &side.reg;
    c.send_cq = &side.scq;
    c.recv_cq = &side.rcq;
    c.rq = &side.rq;
    qp = std::make_unique<QueuePair>(c);
    auto s = std::make_unique<EndlessWrites>(k);
    stream = s.get();
    engine::ConnParams params;
    params.initiator = true;
    EXPECT_EQ(qp->attach(std::move(s), params, &p), 0);
  }
};

// Runs f in another thread; true if it returned within `limit`.
template <typename F>
bool returns_within(std::chrono::milliseconds limit, F f) {
  auto done = std::async(std::launch::async, f);
  const bool ok = done.wait_for(limit) == std::future_status::ready;
  if (!ok) ADD_FAILURE() << "still blocked after " << limit.count() << " ms";
  return ok;
}

// Two QPs whose peers never stop: the thread takes turns (both advance), and removing either
// (as destroy does) returns at once instead of waiting for the traffic to end.
TEST(ProgressTest, EndlessStreamsShareTheThreadAndDoNotStallRemoval) {
  Progress p;
  Endless a(1, p), b(2, p);
  const auto t0 = std::chrono::steady_clock::now();
  while ((a.stream->reads < 1000 || b.stream->reads < 1000) &&
         std::chrono::steady_clock::now() - t0 < 5s)
    std::this_thread::sleep_for(1ms);
  EXPECT_GE(a.stream->reads, 1000u);
  EXPECT_GE(b.stream->reads, 1000u);
  // A hung removal cannot be recovered from (the thread drives the QPs being destroyed).
  if (!returns_within(2000ms, [&] { b.qp->leave_progress(); })) std::abort();
  if (!returns_within(2000ms, [&] { a.qp->leave_progress(); })) std::abort();
  const uint64_t after = a.stream->reads;
  std::this_thread::sleep_for(20ms);
  EXPECT_EQ(a.stream->reads, after) << "the thread still drives a removed QP";
}

}  // namespace
}  // namespace uiw::runtime
