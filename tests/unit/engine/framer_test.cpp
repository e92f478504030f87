// The framers alone, without the DDP/RDMAP engine: MpaRx and SctpRx against a recording segment
// receiver, MpaTx and SctpTx against the independent wire encoders.
#include "engine/framer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <optional>
#include <vector>

#include "engine/qp.h"
#include "wire/bytes.h"
#include "wire/mpa.h"
#include "wire/sctp.h"

namespace uiw::engine::test {
namespace {

// Takes every segment whole into its own buffer and records what the framer called.
class RecordingSegments final : public SegmentRx {
 public:
  std::vector<std::vector<uint8_t>> ended;  // segments the framer declared valid
  size_t begun = 0;
  std::optional<wire::TerminateCause> failed;
  bool closed = false;

  void seg_begin(uint16_t len) override {
    ++begun;
    cur_.assign(len, 0);
    got_ = 0;
  }
  RxNeed seg_need(bool* app) override {
    *app = false;
    return {cur_.data() + got_, cur_.size() - got_};
  }
  void seg_commit(size_t n) override { got_ += n; }
  void seg_cancel() override {}
  void seg_fault() override {}
  bool seg_directable() const override { return false; }
  void seg_end() override {
    EXPECT_EQ(got_, cur_.size()) << "a segment ended before all its octets arrived";
    ended.push_back(cur_);
  }
  void llp_fail(wire::TerminateCause cause) override { failed = cause; }
  void llp_closed() override { closed = true; }
  bool draining() const override { return failed.has_value() || closed; }

 private:
  std::vector<uint8_t> cur_;
  size_t got_ = 0;
};

std::vector<uint8_t> pattern(size_t n, uint8_t seed) {
  std::vector<uint8_t> v(n);
  std::iota(v.begin(), v.end(), seed);
  return v;
}

// Three FPDUs back to back from stream position 0, encoded by wire::encode_fpdu.
std::vector<uint8_t> mpa_stream(const std::vector<std::vector<uint8_t>>& ulpdus, bool crc,
                                bool markers, std::vector<size_t>* starts = nullptr) {
  std::vector<uint8_t> out;
  for (const auto& u : ulpdus) {
    const size_t pos = out.size();
    if (starts) starts->push_back(pos);
    out.resize(pos + wire::fpdu_size_with_markers(pos, u.size(), markers));
    EXPECT_EQ(wire::encode_fpdu({out.data() + pos, out.size() - pos}, pos, u, crc, markers),
              out.size() - pos);
  }
  return out;
}

class MpaRxModes : public testing::TestWithParam<std::tuple<bool, bool, size_t>> {};

// Markers, length, pad and CRC removed, in any chunking: each segment arrives whole and ends once.
TEST_P(MpaRxModes, DeliversEachUlpduWhole) {
  const auto [crc, markers, chunk] = GetParam();
  const std::vector<std::vector<uint8_t>> ulpdus = {pattern(600, 1), pattern(5, 2),
                                                    pattern(1100, 3), pattern(18, 4)};
  const std::vector<uint8_t> wire_bytes = mpa_stream(ulpdus, crc, markers);
  RecordingSegments seg;
  QpStats stats;
  std::array<uint8_t, 64> discard{};
  MpaRx rx(seg, stats, discard);
  rx.start(crc, markers);
  for (size_t off = 0; off < wire_bytes.size(); off += chunk) {
    const size_t n = std::min(chunk, wire_bytes.size() - off);
    ASSERT_EQ(rx.feed({wire_bytes.data() + off, n}), n);
  }
  EXPECT_FALSE(seg.failed.has_value());
  EXPECT_EQ(seg.ended, ulpdus);
  EXPECT_TRUE(rx.at_boundary());
  EXPECT_EQ(stats.rx_bytes, wire_bytes.size());
}

INSTANTIATE_TEST_SUITE_P(CrcMarkersChunk, MpaRxModes,
                         testing::Combine(testing::Bool(), testing::Bool(),
                                          testing::Values(size_t{1}, size_t{7}, size_t{4096})));

// RFC 5044 §4.4: with CRCs nothing of an FPDU reaches DDP before its CRC matched; a bad one is
// MPA error 2 and nothing after it is delivered. Whole FPDUs in one feed are checked where they
// lie, split ones once staged: both ways.
TEST(MpaRxTest, NoOctetOfABadCrcFpduReachesTheSegment) {
  for (const size_t chunk : {SIZE_MAX, size_t{7}}) {
    SCOPED_TRACE(chunk);
    std::vector<size_t> starts;
    std::vector<uint8_t> wire_bytes =
        mpa_stream({pattern(40, 1), pattern(40, 2), pattern(40, 3)}, true, false, &starts);
    wire_bytes[starts[1] + 10] ^= 0x80;  // inside the second ULPDU
    RecordingSegments seg;
    QpStats stats;
    std::array<uint8_t, 64> discard{};
    MpaRx rx(seg, stats, discard);
    rx.start(true, false);
    for (size_t off = 0; off < wire_bytes.size();) {  // read on, into the drain
      const size_t n = std::min(chunk, wire_bytes.size() - off);
      ASSERT_EQ(rx.feed({wire_bytes.data() + off, n}), n);
      off += n;
    }
    EXPECT_EQ(seg.begun, 1u);
    EXPECT_EQ(seg.ended.size(), 1u);
    ASSERT_TRUE(seg.failed.has_value());
    EXPECT_EQ(seg.failed->layer, wire::TermLayer::Llp);
    EXPECT_EQ(seg.failed->code, wire::term::kMpaCrc);
    EXPECT_EQ(stats.rx_bytes, wire_bytes.size());
  }
}

// RFC 5044 §4.3 / §8 error 3: a Marker that does not point at its FPDU's length field.
TEST(MpaRxTest, AWrongMarkerIsMpaError3) {
  std::vector<size_t> starts;
  std::vector<uint8_t> wire_bytes = mpa_stream({pattern(1000, 1)}, false, true, &starts);
  wire_bytes[512 + 3] ^= 0x04;  // the FPDUPTR (octets 2-3) of the Marker at stream offset 512
  RecordingSegments seg;
  QpStats stats;
  std::array<uint8_t, 64> discard{};
  MpaRx rx(seg, stats, discard);
  rx.start(false, true);
  rx.feed(wire_bytes);
  ASSERT_TRUE(seg.failed.has_value());
  EXPECT_EQ(seg.failed->code, wire::term::kMpaMarker);
  EXPECT_TRUE(seg.ended.empty());
}

// A close inside a frame is not a boundary (RFC 5044 §8 error 1 is the engine's to send).
TEST(MpaRxTest, BoundaryOnlyBetweenFpdus) {
  const std::vector<uint8_t> wire_bytes = mpa_stream({pattern(30, 1)}, true, false);
  RecordingSegments seg;
  QpStats stats;
  std::array<uint8_t, 64> discard{};
  MpaRx rx(seg, stats, discard);
  rx.start(true, false);
  EXPECT_TRUE(rx.at_boundary());
  rx.feed({wire_bytes.data(), 3});
  EXPECT_FALSE(rx.at_boundary());
  rx.feed({wire_bytes.data() + 3, wire_bytes.size() - 3});
  EXPECT_TRUE(rx.at_boundary());
}

std::vector<uint8_t> chunk_of(uint16_t ssn, const std::vector<uint8_t>& segment) {
  std::vector<uint8_t> m(wire::kDdpSsnSize + segment.size());
  wire::store_be16(m.data(), ssn);
  std::copy(segment.begin(), segment.end(), m.begin() + wire::kDdpSsnSize);
  return m;
}

// RFC 5043 §10: unordered chunks are handed over in DDP-SSN order; the segment is the chunk's
// payload exactly, with no MPA framing around it.
TEST(SctpRxTest, HandsSegmentsOverInDdpSsnOrder) {
  RecordingSegments seg;
  QpStats stats;
  std::array<uint8_t, 64> discard{};
  SctpRx rx(seg, stats, discard);
  rx.start(1);
  const std::vector<std::vector<uint8_t>> segs = {pattern(20, 1), pattern(3, 2), pattern(70, 3)};
  rx.feed_message(wire::kPpidDdpSegment, chunk_of(3, segs[2]));
  rx.feed_message(wire::kPpidDdpSegment, chunk_of(2, segs[1]));
  EXPECT_EQ(rx.held(), 2u);
  EXPECT_TRUE(seg.ended.empty());
  rx.feed_message(wire::kPpidDdpSegment, chunk_of(1, segs[0]));
  EXPECT_EQ(rx.held(), 0u);
  EXPECT_EQ(seg.ended, segs);
  const std::vector<uint8_t> term = {0x00, 0x04, 0x00, 0x04};  // DDP-SSN 4, Session Terminate
  rx.feed_message(wire::kPpidSessionControl, term);
  EXPECT_TRUE(seg.closed);
}

std::vector<uint8_t> gather(const TxIovs& out) {
  std::vector<uint8_t> v;
  for (size_t i = out.begin; i < out.end; ++i) {
    const auto* p = static_cast<const uint8_t*>(out.iov[i].iov_base);
    v.insert(v.end(), p, p + out.iov[i].iov_len);
  }
  return v;
}

// MpaTx frames segments exactly as wire::encode_fpdu does, Markers and CRC included, at every
// stream position the segments bring it to.
TEST(MpaTxTest, FramesMatchTheWireEncoder) {
  for (const bool markers : {false, true}) {
    TxIovs out;
    out.iov.assign(4096, iovec{});
    QpStats stats;
    MpaTx tx(out, stats);
    tx.start(true, markers, 1460, false);
    const std::vector<std::vector<uint8_t>> ulpdus = {pattern(600, 1), pattern(5, 2),
                                                      pattern(1100, 3)};
    std::vector<TxFrame> frames(ulpdus.size());
    for (size_t i = 0; i < ulpdus.size(); ++i) {
      TxFrame& f = frames[i];
      tx.prepare(f);
      f.remaining = f.bytes = f.iov_count = 0;
      tx.begin(f);
      // The first 18 octets play the headers (copied into the frame), the rest the payload.
      const size_t hlen = std::min<size_t>(18, ulpdus[i].size());
      std::copy_n(ulpdus[i].begin(), hlen, f.hdr + kFramePrefix);
      tx.add_header(f, hlen, ulpdus[i].size());
      ASSERT_TRUE(tx.add_payload(f, ulpdus[i].data() + hlen, ulpdus[i].size() - hlen, false));
      tx.end(f, ulpdus[i].size());
    }
    EXPECT_EQ(gather(out), mpa_stream(ulpdus, true, markers)) << "markers " << markers;
    EXPECT_EQ(stats.tx_fpdus, ulpdus.size());
  }
}

// Without Markers, an FPDU whose payload fits behind its headers in the frame (kInlinePayload
// after the largest headers) goes out as one iovec (headers, payload copied behind them, PAD,
// CRC), with the octets the wire encoder gives; a larger payload is referenced in place.
TEST(MpaTxTest, ASmallFpduIsOneIovec) {
  for (const bool crc : {false, true}) {
    const size_t room = kMaxFrameHeader + kInlinePayload - kFramePrefix - 18;
    for (const size_t payload : {size_t{0}, size_t{1}, size_t{8}, room - 1, room, room + 1}) {
      TxIovs out;
      out.iov.assign(16, iovec{});
      QpStats stats;
      MpaTx tx(out, stats);
      tx.start(crc, false, 1460, false);
      const std::vector<uint8_t> ulpdu = pattern(18 + payload, 7);
      TxFrame f;
      tx.prepare(f);
      f.remaining = f.bytes = f.iov_count = 0;
      tx.begin(f);
      std::copy_n(ulpdu.begin(), 18, f.hdr + kFramePrefix);
      tx.add_header(f, 18, ulpdu.size());
      ASSERT_TRUE(tx.add_payload(f, ulpdu.data() + 18, payload, false));
      tx.end(f, ulpdu.size());
      EXPECT_EQ(gather(out), mpa_stream({ulpdu}, crc, false)) << payload;
      const size_t iovs = payload <= room ? 1 : 3 + (wire::fpdu_pad(ulpdu.size()) ? 1 : 0);
      EXPECT_EQ(out.end - out.begin, iovs) << "crc " << crc << " payload " << payload;
      EXPECT_EQ(f.iov_count, iovs);
      EXPECT_EQ(f.bytes, gather(out).size());
    }
  }
}

// The DDP-SSN comes at the end of the frame, so a frame taken back costs none; dropped frames give
// theirs back.
TEST(SctpTxTest, ChunksCarryGaplessDdpSsns) {
  TxIovs out;
  out.iov.assign(64, iovec{});
  QpStats stats;
  SctpTx tx(out, stats);
  tx.start(7);
  std::vector<TxFrame> frames(3);
  const std::vector<uint8_t> payload = pattern(10, 9);
  for (TxFrame& f : frames) {
    f.remaining = f.bytes = f.iov_count = 0;
    tx.begin(f);
    std::fill_n(f.hdr + kFramePrefix, 18, 0x41);
    tx.add_header(f, 18, 28);
    tx.add_payload(f, payload.data(), payload.size(), false);
    tx.end(f, 28);
  }
  EXPECT_EQ(wire::load_be16(frames[0].hdr), 7u);
  EXPECT_EQ(wire::load_be16(frames[2].hdr), 9u);
  tx.drop_after(frames[1], false);  // frames 1 and 2 never went out
  TxFrame close;
  close.remaining = close.bytes = close.iov_count = 0;
  ASSERT_TRUE(tx.build_close(close));
  EXPECT_EQ(wire::load_be16(close.hdr), 8u);
  EXPECT_FALSE(tx.build_close(close));  // once
}

}  // namespace
}  // namespace uiw::engine::test
