// MPA receive framing (RFC 5044 §4): an explicit, resumable state machine over the byte stream
// (length, ULPDU, pad and CRC; Markers removed wherever they fall). Without CRCs the ULPDU's
// octets go straight to the segment's own destinations; with CRCs the FPDU is staged whole and
// replayed to the segment only once its CRC matched.
#include <algorithm>
#include <cstring>

#include "engine/framer.h"
#include "engine/qp.h"
#include "memory/app_copy.h"
#include "wire/bytes.h"
#include "wire/crc32c.h"
#include "wire/mpa.h"

namespace uiw::engine {

namespace term = wire::term;

MpaRx::MpaRx(SegmentRx& seg, QpStats& stats, std::span<uint8_t> discard)
    : seg_(seg), stats_(stats), discard_(discard) {}

void MpaRx::start(bool crc, bool markers) {
  crc_on_ = crc;
  markers_ = markers;
  pos_ = 0;
  to_length();
}

void MpaRx::to_length() {
  st_ = St::Length;
  got_ = 0;
  want_ = wire::kUlpduLengthSize;
  crc_ = wire::kCrc32cInit;
}

bool MpaRx::at_boundary() const {
  const size_t mpos = pos_ % wire::kMarkerInterval;
  const bool mid_marker = markers_ && mpos > 0 && mpos < wire::kMarkerSize;
  return st_ == St::Length && got_ == 0 && !mid_marker;
}

bool MpaRx::directable() const {
  if (in_marker_) return false;
  return st_ == St::Stage || (st_ == St::Ulpdu && seg_.seg_directable());
}

bool MpaRx::need_is_app_memory() const {
  return !in_marker_ && last_seg_ && last_app_;
}

RxNeed MpaRx::need() {
  last_seg_ = last_app_ = false;
  // After an error nothing is parsed or placed (RFC 5041 §7.1: "MUST silently drop any
  // subsequent incoming DDP Segments"), but reading goes on so the close is seen.
  if (seg_.draining()) return last_ = {discard_.data(), discard_.size()};
  size_t to_marker = SIZE_MAX;
  if (markers_) {
    const size_t mpos = pos_ % wire::kMarkerInterval;
    if (mpos < wire::kMarkerSize) {
      in_marker_ = true;
      return last_ = {marker_.data() + mpos, wire::kMarkerSize - mpos};
    }
    to_marker = wire::kMarkerInterval - mpos;
  }
  in_marker_ = false;
  RxNeed need{nullptr, 0};
  switch (st_) {
    case St::Length:
      need = {length_.data() + got_, want_ - got_};
      break;
    case St::Stage:
      need = {stage_.data() + got_, want_ - got_};
      break;
    case St::Ulpdu:
      need = seg_.seg_need(&last_app_);
      last_seg_ = true;
      if (seg_.draining()) return this->need();  // the segment failed while choosing
      break;
    case St::Trailer:
      need = {trailer_.data() + got_, want_ - got_};
      break;
  }
  need.len = std::min(need.len, to_marker);
  return last_ = need;
}

void MpaRx::cancel() {
  if (last_seg_) seg_.seg_cancel();
}

void MpaRx::fault() {
  if (last_seg_) seg_.seg_fault();
}

// A whole FPDU at the front of `in`, taken in one step: the same checks and calls as the
// field-by-field path below, without its per-field bookkeeping, and with CRCs verified where
// the octets already are instead of after a copy into the stage (RFC 5044 §4.4 still holds:
// nothing reaches the segment before its CRC matched). Small messages arrive so, several to
// a read. Without Markers only: one may fall anywhere in a frame (RFC 5044 §4.3). 0 if the
// front of `in` is not such an FPDU.
size_t MpaRx::feed_whole(std::span<const uint8_t> in) {
  if (markers_ || st_ != St::Length || got_ != 0 || in.size() < wire::kUlpduLengthSize ||
      seg_.draining())
    return 0;
  const uint16_t ulpdu_len = wire::load_be16(in.data());
  const size_t covered = wire::kUlpduLengthSize + ulpdu_len + wire::fpdu_pad(ulpdu_len);
  const size_t total = covered + wire::kCrcSize;
  if (in.size() < total) return 0;
  last_seg_ = last_app_ = false;
  pos_ += total;
  stats_.rx_bytes += total;
  stats_.count(UIW_CNT_RX_BYTES, total);
  const bool crc_ok = !crc_on_ || wire::load_le32(in.data() + covered) ==
                                      wire::crc32c_final(wire::crc32c_update(wire::kCrc32cInit,
                                                                             in.data(), covered));
  hand_over(in.subspan(wire::kUlpduLengthSize, ulpdu_len), crc_ok);
  return total;  // at a boundary still: st_, got_, want_ and crc_ are those of to_length()
}

size_t MpaRx::feed(std::span<const uint8_t> in) {
  size_t used = 0;
  while (used < in.size()) {
    if (const size_t whole = feed_whole(in.subspan(used))) {
      used += whole;
      continue;
    }
    const RxNeed need = this->need();
    if (need.len == 0) break;
    const size_t k = std::min(need.len, in.size() - used);
    if (need_is_app_memory()) {
      if (memory::copy_to_app(need.dst, in.data() + used, k) != 0) {
        fault();
        continue;  // the Qp drains from here on; the same bytes are read and dropped
      }
    } else {
      std::memcpy(need.dst, in.data() + used, k);
    }
    commit(k);
    used += k;
  }
  return used;
}

void MpaRx::feed_message(uint32_t, std::span<const uint8_t> msg) {
  feed(msg);
}

void MpaRx::commit(size_t n) {
  if (last_seg_ && !in_marker_) seg_.seg_commit(n);  // releases what seg_need() pinned
  if (n == 0) return;
  stats_.rx_bytes += n;
  stats_.count(UIW_CNT_RX_BYTES, n);
  if (seg_.draining() && !last_seg_) {
    pos_ += n;
    return;
  }
  if (in_marker_) {
    pos_ += n;
    if (pos_ % wire::kMarkerInterval == wire::kMarkerSize) process_marker();
    return;
  }
  if (crc_on_) {
    // Covered: ULPDU_Length, ULPDU and PAD; not the CRC field itself (RFC 5044 §4.4).
    size_t covered = n;
    if (st_ == St::Stage) {
      const size_t crc_at = want_ - wire::kCrcSize;
      covered = got_ < crc_at ? std::min(n, crc_at - got_) : 0;
    }
    crc_ = wire::crc32c_update(crc_, last_.dst, covered);
  }
  if (st_ == St::Length && got_ == 0) fpdu_start_ = pos_;
  pos_ += n;
  got_ += n;
  switch (st_) {
    case St::Length:
      if (got_ < want_) break;
      ulpdu_len_ = wire::load_be16(length_.data());
      pad_ = wire::fpdu_pad(ulpdu_len_);
      got_ = 0;
      if (crc_on_) {
        st_ = St::Stage;
        want_ = ulpdu_len_ + pad_ + wire::kCrcSize;
        if (stage_.size() < want_) stage_.resize(want_);
        break;
      }
      st_ = St::Ulpdu;
      want_ = ulpdu_len_;
      seg_.seg_begin(ulpdu_len_);
      if (want_ != 0) break;
      [[fallthrough]];  // an empty ULPDU: straight to its trailer
    case St::Ulpdu:
      if (got_ < want_ || seg_.draining()) break;
      st_ = St::Trailer;
      got_ = 0;
      want_ = pad_ + wire::kCrcSize;
      break;
    case St::Stage:
      if (got_ == want_) finish_stage();
      break;
    case St::Trailer:
      // Without CRCs the CRC field is present but not checked (RFC 5044 §4.4).
      if (got_ < want_) break;
      seg_.seg_end();
      to_length();
      break;
  }
}

// RFC 5044 §4.4: "When an FPDU is received, and CRC checking is enabled, the receiver MUST
// first" check its CRC; a mismatch makes the FPDU invalid (MPA error 2, an LLP Terminate with
// no copied headers, RFC 5040 Figure 10). Only a valid FPDU then reaches the segment.
void MpaRx::hand_over(std::span<const uint8_t> ulpdu, bool crc_ok) {
  if (!crc_ok) {
    stats_.count(UIW_CNT_CRC_ERRORS);
    seg_.llp_fail({wire::TermLayer::Llp, term::kLlpMpa, term::kMpaCrc});
    return;
  }
  seg_.seg_begin(static_cast<uint16_t>(ulpdu.size()));
  seg_copy_in(seg_, ulpdu);
  if (!seg_.draining()) seg_.seg_end();
}

// A staged FPDU, once all of it is in: replayed from the stage.
void MpaRx::finish_stage() {
  const bool crc_ok =
      wire::load_le32(stage_.data() + want_ - wire::kCrcSize) == wire::crc32c_final(crc_);
  hand_over({stage_.data(), ulpdu_len_}, crc_ok);
  if (crc_ok) to_length();
}

// RFC 5044 §4.3: every Marker points back to the length field of the FPDU it sits in, or is 0
// when it falls between FPDUs; either way it is covered by that FPDU's CRC (§4.4). A mismatch is
// MPA error 3 (RFC 5044 §8), reported as an LLP Terminate.
void MpaRx::process_marker() {
  const uint64_t marker_pos = pos_ - wire::kMarkerSize;
  const bool between = st_ == St::Length && got_ == 0;
  const uint16_t expect = between ? 0 : static_cast<uint16_t>(marker_pos - fpdu_start_) & 0xFFFC;
  if (crc_on_) crc_ = wire::crc32c_update(crc_, marker_.data(), wire::kMarkerSize);
  if (wire::decode_marker_fpduptr(marker_.data()) != expect)
    seg_.llp_fail({wire::TermLayer::Llp, term::kLlpMpa, term::kMpaMarker});
}

}  // namespace uiw::engine
