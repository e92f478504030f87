// Qp framing for DDP over SCTP (RFC 5043): each DDP segment travels as one SCTP message (a DDP
// Segment Chunk, PPID 16) led by a DDP-SSN instead of the MPA length, with no pad, CRC or
// markers (SCTP's own CRC32c covers integrity, RFC 5041 §3 item 6). The DDP/RDMAP machine of
// qp.cpp/qp_tx.cpp/qp_rx.cpp is shared unchanged:
//   transmit: each slot's two leading header octets, reserved for the MPA ULPDU_Length, carry the
//             DDP-SSN; end_slot() adds no trailer; tx_pending() hands out one slot per call.
//   receive:  each message, once its DDP-SSN is next, is fed to the byte-stream parser as an
//             FPDU with CRC checking off (length = segment size, zero trailer), so every DDP and
//             RDMAP check runs exactly as over MPA.
#include <algorithm>
#include <cstring>

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

void Qp::sctp_start() {
  params_.crc = false;
  params_.markers_tx = params_.markers_rx = false;
  params_.rtr = RtrType::None;
  // RFC 5043 §9: the maximum DDP Segment size is at least 516 octets.
  if (params_.mulpdu < wire::kSctpMinMaxSegment)
    params_.mulpdu = static_cast<uint32_t>(wire::kSctpMinMaxSegment);
  sctp_tx_ssn_ = params_.sctp_tx_ssn;
  sctp_rx_ssn_ = params_.sctp_rx_ssn;
  sctp_hold_.clear();
  sctp_held_bytes_ = 0;
  sctp_term_built_ = false;
}

// RFC 5043 §5.2.1: every chunk carries the DDP-SSN "the SCTP Stream Sequence Number (SSN) would
// have been assigned had ordered SCTP Payload Data Chunks been used": +1 per message, no gaps.
// The header iovec already points at s.hdr, so the octets are filled in place.
void Qp::sctp_end_slot(TxSlot& s) {
  wire::store_be16(s.hdr, sctp_tx_ssn_++);
  ++stats_.tx_fpdus;
}

// RFC 5043 §6.2: "At least one side MUST send a DDP Stream Terminate"; it is the last chunk of
// our side of the session (after any RDMAP Terminate, which is simply another DDP Segment), sent
// once everything before it was accepted, in place of a TCP FIN.
void Qp::sctp_fill_tx() {
  if (!want_shutdown_ || slots_used_ != 0 || sctp_term_built_) return;
  sctp_term_built_ = true;
  TxSlot& s = begin_slot(SlotDone::None, 0);
  // Function Code 4, no Private Data (§5.2.3).
  const size_t n = wire::encode_session_control(
      {s.hdr, sizeof s.hdr}, {sctp_tx_ssn_++, wire::SessionFunction::Terminate, {}});
  append(s, s.hdr, n);
}

size_t Qp::sctp_rx_records(std::span<const uint8_t> in) {
  if (state_ == QpState::Idle) return 0;  // not reading yet, like the byte-stream parser
  size_t used = 0;
  while (used < in.size()) {
    std::span<const uint8_t> rest = in.subspan(used);
    if (sctp_record_.empty() && rest.size() >= kSctpRecordHeader) {
      const size_t len = wire::load_be32(rest.data() + 4);
      if (rest.size() >= kSctpRecordHeader + len) {  // whole record in place: no copy
        rx_feed_message(wire::load_be32(rest.data()), rest.subspan(kSctpRecordHeader, len));
        used += kSctpRecordHeader + len;
        continue;
      }
    }
    // Gather a split record.
    size_t want = kSctpRecordHeader;
    if (sctp_record_.size() >= kSctpRecordHeader) want += wire::load_be32(sctp_record_.data() + 4);
    const size_t k = std::min(want - sctp_record_.size(), rest.size());
    sctp_record_.insert(sctp_record_.end(), rest.begin(), rest.begin() + k);
    used += k;
    if (sctp_record_.size() >= kSctpRecordHeader &&
        sctp_record_.size() == kSctpRecordHeader + wire::load_be32(sctp_record_.data() + 4)) {
      std::vector<uint8_t> rec;
      rec.swap(sctp_record_);
      rx_feed_message(wire::load_be32(rec.data()),
                      {rec.data() + kSctpRecordHeader, rec.size() - kSctpRecordHeader});
    }
  }
  return used;
}

void Qp::rx_feed_message(uint32_t ppid, std::span<const uint8_t> msg) {
  if (state_ == QpState::Idle) return;
  if (rx_st_ == RxSt::Drain) {  // RFC 5041 §7.1: after an error, drop silently
    stats_.rx_bytes += msg.size();
    return;
  }
  if (msg.size() < wire::kDdpSsnSize) {
    rx_fail(kStreamLost);
    return;
  }
  const uint16_t ssn = wire::load_be16(msg.data());
  if (ssn != sctp_rx_ssn_) {
    // Unordered delivery (RFC 5043 §10): a later chunk may overtake an earlier one. Hold it only
    // if the gap can be accounted for by chunks still in flight (SCTP-21); a DDP-SSN behind
    // the expected one, a duplicate, or one beyond the window terminates the stream.
    const uint16_t ahead = static_cast<uint16_t>(ssn - sctp_rx_ssn_);
    if (ahead >= kSsnWindow || sctp_hold_.count(ssn) ||
        sctp_held_bytes_ + msg.size() > kMaxHeldBytes) {
      rx_fail(kStreamLost);
      return;
    }
    sctp_held_bytes_ += msg.size();
    sctp_hold_.emplace(ssn, std::make_pair(ppid, std::vector<uint8_t>(msg.begin(), msg.end())));
    return;
  }
  sctp_process(ppid, msg);
  ++sctp_rx_ssn_;
  for (auto it = sctp_hold_.find(sctp_rx_ssn_); it != sctp_hold_.end();
       it = sctp_hold_.find(sctp_rx_ssn_)) {
    const auto held = std::move(it->second);
    sctp_hold_.erase(it);
    sctp_held_bytes_ -= held.second.size();
    if (rx_st_ != RxSt::Drain) sctp_process(held.first, held.second);
    ++sctp_rx_ssn_;
  }
}

void Qp::sctp_process(uint32_t ppid, std::span<const uint8_t> msg) {
  if (ppid == wire::kPpidSessionControl) {
    wire::SessionControl sc;
    if (wire::decode_session_control(msg, &sc) == wire::SctpDecodeError::None &&
        sc.function == wire::SessionFunction::Terminate) {
      // RFC 5043 §6.2: the peer's final chunk; the session is over like a FIN over TCP.
      rx_eof();
      if (rx_st_ != RxSt::Drain) rx_st_ = RxSt::Drain;
      return;
    }
    // Initiate/Accept/Reject inside an established session, or a malformed control message,
    // fits no legal sequence: "the DDP Stream Session MUST be terminated" (RFC 5043 §6.1).
    rx_fail(kStreamLost);
    return;
  }
  std::span<const uint8_t> seg;
  uint16_t ssn = 0;
  // RFC 5043 §5.1: the association carries only adaptation chunks; any other PPID is out of the
  // legal pattern. §9: "MUST reject DDP Segments that are larger than the maximum size".
  if (ppid != wire::kPpidDdpSegment ||
      wire::decode_ddp_segment_chunk(msg, &ssn, &seg) != wire::SctpDecodeError::None ||
      seg.size() > wire::kMaxMulpdu) {
    rx_fail(kStreamLost);
    return;
  }
  // Present the segment to the shared parser as an FPDU: ULPDU_Length = segment size, then the
  // segment, then pad and a CRC field the parser does not check (params_.crc is off).
  uint8_t len[wire::kUlpduLengthSize];
  wire::store_be16(len, static_cast<uint16_t>(seg.size()));
  static constexpr uint8_t kZeros[8] = {};
  const size_t trailer = wire::fpdu_pad(seg.size()) + wire::kCrcSize;
  sctp_inner_ = true;
  rx_feed({len, sizeof len});
  rx_feed(seg);
  rx_feed({kZeros, trailer});
  sctp_inner_ = false;
  // rx_bytes counts what arrived, not the synthetic framing (+2 SSN, -2 length, -trailer).
  stats_.rx_bytes -= trailer;
}

}  // namespace uiw::engine
