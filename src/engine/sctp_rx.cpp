// SCTP receive framing (RFC 5043): each message is one DDP Segment Chunk (PPID 16: DDP-SSN, then
// exactly one DDP segment; no length, pad, CRC or Markers, SCTP's own CRC32c covers integrity,
// RFC 5041 §3 item 6) or a Session Control chunk (PPID 17). Chunks may be unordered (§10) and
// are handed to the segment in DDP-SSN order.
#include <algorithm>

#include "engine/framer.h"
#include "engine/qp.h"
#include "wire/bytes.h"
#include "wire/mpa.h"
#include "wire/sctp.h"

namespace uiw::engine {

namespace {
// RFC 5043 §10: DDP-SSNs are compared in 16-bit serial arithmetic, which is only unambiguous
// while fewer than 32768 chunks are in flight; anything farther ahead is invalid.
constexpr uint16_t kSsnWindow = 0x8000;
// SCTP-21: hold out-of-order messages only up to this much memory, then terminate.
constexpr size_t kMaxHeldBytes = 64u << 20;
// Errors of the adaptation layer itself (bad DDP-SSN, session control out of the legal pattern,
// oversize segment): RFC 5043 defines no LLP error codes, so report the catastrophic loss of
// this stream (RFC 5040 Figure 9, Remote Operation Error 0x07).
constexpr wire::TerminateCause kStreamLost{wire::TermLayer::Rdma, wire::term::kRdmaRemoteOperation,
                                           wire::term::kCatastrophicStream};
}  // namespace

SctpRx::SctpRx(SegmentRx& seg, QpStats& stats, std::span<uint8_t> discard)
    : seg_(seg), stats_(stats), discard_(discard) {}

void SctpRx::start(uint16_t rx_ssn) {
  ssn_ = rx_ssn;
  hold_.clear();
  held_bytes_ = 0;
  record_.clear();
}

// A split record is still gathered (the records after it are read to see the close).
void SctpRx::stop() {
  hold_.clear();
  held_bytes_ = 0;
}

RxNeed SctpRx::need() {
  return {discard_.data(), discard_.size()};
}

size_t SctpRx::feed(std::span<const uint8_t> in) {
  size_t used = 0;
  while (used < in.size()) {
    std::span<const uint8_t> rest = in.subspan(used);
    if (record_.empty() && rest.size() >= kSctpRecordHeader) {
      const size_t len = wire::load_be32(rest.data() + 4);
      if (rest.size() >= kSctpRecordHeader + len) {  // whole record in place: no copy
        feed_message(wire::load_be32(rest.data()), rest.subspan(kSctpRecordHeader, len));
        used += kSctpRecordHeader + len;
        continue;
      }
    }
    // Gather a split record.
    size_t want = kSctpRecordHeader;
    if (record_.size() >= kSctpRecordHeader) want += wire::load_be32(record_.data() + 4);
    const size_t k = std::min(want - record_.size(), rest.size());
    record_.insert(record_.end(), rest.begin(), rest.begin() + k);
    used += k;
    if (record_.size() >= kSctpRecordHeader &&
        record_.size() == kSctpRecordHeader + wire::load_be32(record_.data() + 4)) {
      std::vector<uint8_t> rec;
      rec.swap(record_);
      feed_message(wire::load_be32(rec.data()),
                   {rec.data() + kSctpRecordHeader, rec.size() - kSctpRecordHeader});
    }
  }
  return used;
}

void SctpRx::feed_message(uint32_t ppid, std::span<const uint8_t> msg) {
  stats_.rx_bytes += msg.size();
  stats_.count(UIW_CNT_RX_BYTES, msg.size());
  if (seg_.draining()) return;  // RFC 5041 §7.1: after an error, drop silently
  if (msg.size() < wire::kDdpSsnSize) {
    seg_.llp_fail(kStreamLost);
    return;
  }
  const uint16_t ssn = wire::load_be16(msg.data());
  if (ssn != ssn_) {
    // Unordered delivery (RFC 5043 §10): a later chunk may overtake an earlier one. Hold it only
    // if the gap can be accounted for by chunks still in flight (SCTP-21); a DDP-SSN behind
    // the expected one, a duplicate, or one beyond the window terminates the stream.
    const uint16_t ahead = static_cast<uint16_t>(ssn - ssn_);
    if (ahead >= kSsnWindow || hold_.count(ssn) || held_bytes_ + msg.size() > kMaxHeldBytes) {
      seg_.llp_fail(kStreamLost);
      return;
    }
    held_bytes_ += msg.size();
    hold_.emplace(ssn, std::make_pair(ppid, std::vector<uint8_t>(msg.begin(), msg.end())));
    return;
  }
  process(ppid, msg);
  ++ssn_;
  for (auto it = hold_.find(ssn_); it != hold_.end(); it = hold_.find(ssn_)) {
    const auto held = std::move(it->second);
    hold_.erase(it);
    held_bytes_ -= held.second.size();
    if (!seg_.draining()) process(held.first, held.second);
    ++ssn_;
  }
}

void SctpRx::process(uint32_t ppid, std::span<const uint8_t> msg) {
  if (ppid == wire::kPpidSessionControl) {
    wire::SessionControl sc;
    if (wire::decode_session_control(msg, &sc) == wire::SctpDecodeError::None &&
        sc.function == wire::SessionFunction::Terminate) {
      // RFC 5043 §6.2: the peer's final chunk; the session is over like a FIN over TCP.
      seg_.llp_closed();
      return;
    }
    // Initiate/Accept/Reject inside an established session, or a malformed control message,
    // fits no legal sequence: "the DDP Stream Session MUST be terminated" (RFC 5043 §6.1).
    seg_.llp_fail(kStreamLost);
    return;
  }
  std::span<const uint8_t> segment;
  uint16_t ssn = 0;
  // RFC 5043 §5.1: the association carries only adaptation chunks; any other PPID is out of the
  // legal pattern. §9: "MUST reject DDP Segments that are larger than the maximum size".
  if (ppid != wire::kPpidDdpSegment ||
      wire::decode_ddp_segment_chunk(msg, &ssn, &segment) != wire::SctpDecodeError::None ||
      segment.size() > wire::kMaxMulpdu) {
    seg_.llp_fail(kStreamLost);
    return;
  }
  seg_.seg_begin(static_cast<uint16_t>(segment.size()));
  seg_copy_in(seg_, segment);
  if (!seg_.draining()) seg_.seg_end();
}

}  // namespace uiw::engine
