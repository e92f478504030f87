// Qp receive path: an explicit, resumable state machine over the byte stream (length, control,
// header, payload, trailer; markers removed wherever they fall). Headers are validated before a
// single payload byte is placed (RFC 5041 §7.1, §8.1); payload is read straight into its target.
#include <algorithm>
#include <cstring>
#include <utility>

#include "engine/access_errors.h"
#include "engine/qp.h"
#include "memory/app_copy.h"
#include "wire/bytes.h"
#include "wire/crc32c.h"
#include "wire/mpa.h"

namespace uiw::engine {

namespace {

using memory::AccessResult;
using wire::TermLayer;
namespace term = wire::term;

constexpr wire::TerminateCause untagged(uint8_t code) {
  return {TermLayer::Ddp, term::kDdpUntagged, code};
}
constexpr wire::TerminateCause remote_op(uint8_t code) {
  return {TermLayer::Rdma, term::kRdmaRemoteOperation, code};
}

}  // namespace

void Qp::rx_to_length() {
  if (rx_st_ == RxSt::Drain) return;
  rx_st_ = RxSt::Length;
  rx_got_ = 0;
  rx_want_ = wire::kUlpduLengthSize;
  rx_hdr_len_ = 0;
  rx_crc_ = wire::kCrc32cInit;
}

bool Qp::rx_directable() const {
  if (rx_in_marker_) return false;
  return rx_st_ == RxSt::Stage ||
         (rx_st_ == RxSt::Payload && (rx_dest_ == RxDest::Host || rx_dest_ == RxDest::Sgl));
}

Qp::RxNeed Qp::rx_need() {
  if (state_ == QpState::Idle) return {nullptr, 0};
  // After an error nothing is parsed or placed (RFC 5041 §7.1: "MUST silently drop any
  // subsequent incoming DDP Segments"), but reading goes on so the close is seen.
  if (rx_st_ == RxSt::Drain) return rx_last_ = {rx_discard_.data(), rx_discard_.size()};
  size_t to_marker = SIZE_MAX;
  if (params_.markers_rx && !rx_replay_) {  // a staged FPDU holds no Markers any more
    const size_t mpos = rx_pos_ % wire::kMarkerInterval;
    if (mpos < wire::kMarkerSize) {
      rx_in_marker_ = true;
      return rx_last_ = {rx_marker_.data() + mpos, wire::kMarkerSize - mpos};
    }
    to_marker = wire::kMarkerInterval - mpos;
  }
  rx_in_marker_ = false;
  RxNeed need{nullptr, 0};
  switch (rx_st_) {
    case RxSt::Length:
    case RxSt::Control:
    case RxSt::Header:
      need = {rx_hdr_.data() + rx_got_, rx_want_ - rx_got_};
      break;
    case RxSt::Stage:
      need = {rx_stage_.data() + rx_got_, rx_want_ - rx_got_};
      break;
    case RxSt::Payload: {
      const uint64_t left = rx_payload_len_ - rx_got_;
      switch (rx_dest_) {
        case RxDest::Host: {
          // Re-validated for each read: a region deregistered mid-message stops placement.
          rx_pin_ = cfg_.registry->pin(rx_seg_.stag, cfg_.pd, cfg_.qp_num, memory::kRemoteWrite,
                                       rx_seg_.to + rx_got_, left);
          if (!rx_pin_.ok()) {
            const AccessResult r = rx_pin_.mapping().result;
            rx_pin_.release();
            rx_fail(ddp_tagged_error(r));
            return rx_need();
          }
          need = {rx_pin_.mapping().host, left};
          break;
        }
        case RxDest::Sgl: {
          // Our own receive buffer or Read sink, resolved when the message began: validated
          // again for each read, like a Write's target, so that nothing is placed after
          // ibv_dereg_mr returned (a later segment of a Send or Read Response).
          const ResolvedSge piece = rx_sgl_->at(rx_sgl_off_ + rx_got_);
          const uint64_t len = std::min<uint64_t>(piece.len, left);
          rx_pin_ =
              cfg_.registry->pin(piece.lkey, cfg_.pd, 0, memory::kLocalWrite, piece.addr, len);
          if (!rx_pin_.ok()) {
            rx_fault();
            return rx_need();
          }
          need = {rx_pin_.mapping().host, len};
          break;
        }
        case RxDest::TermBody:
          if (rx_got_ < rx_term_.size()) {
            need = {rx_term_.data() + rx_got_, std::min<uint64_t>(rx_term_.size() - rx_got_, left)};
            break;
          }
          [[fallthrough]];
        case RxDest::Discard:
          need = {rx_discard_.data(), std::min<uint64_t>(rx_discard_.size(), left)};
          break;
      }
      break;
    }
    case RxSt::Trailer:
      need = {rx_trailer_.data() + rx_got_, rx_want_ - rx_got_};
      break;
    case RxSt::Drain:
      break;
  }
  need.len = std::min(need.len, to_marker);
  return rx_last_ = need;
}

size_t Qp::rx_feed(std::span<const uint8_t> in) {
  if (params_.llp == Llp::Sctp && !sctp_inner_) return sctp_rx_records(in);
  return rx_copy_in(in);
}

// Feeds bytes the caller holds through rx_need()/rx_commit(). Payload bound for application
// memory goes through memory::copy_to_app, so a page that vanished is a protocol error on this
// stream (rx_fault) rather than SIGSEGV in the application.
size_t Qp::rx_copy_in(std::span<const uint8_t> in) {
  size_t used = 0;
  while (used < in.size()) {
    const RxNeed need = rx_need();
    if (need.len == 0) break;
    const size_t k = std::min(need.len, in.size() - used);
    if (rx_need_is_app_memory()) {
      if (memory::copy_to_app(need.dst, in.data() + used, k) != 0) {
        rx_fault();
        continue;  // the Qp drains from here on; the same bytes are read and dropped
      }
    } else {
      std::memcpy(need.dst, in.data() + used, k);
    }
    rx_commit(k);
    used += k;
  }
  return used;
}

bool Qp::rx_need_is_app_memory() const {
  return !rx_in_marker_ && rx_st_ == RxSt::Payload &&
         (rx_dest_ == RxDest::Host || rx_dest_ == RxDest::Sgl);
}

void Qp::rx_cancel() {
  rx_pin_.release();
}

// The destination of the last rx_need() could not be written: a Write's target is the peer's
// error on a region it may write (DDP tagged; RFC 5041 has no code for access rights, so "Invalid
// STag", as for the other access checks), a Send's receive buffer or a Read's sink is ours (the
// receive or Read completes with a local protection error, and the stream ends with RDMAP "Local
// Catastrophic", as for a bad lkey).
void Qp::rx_fault() {
  rx_pin_.release();
  if (rx_st_ != RxSt::Payload) return;
  const auto op = static_cast<wire::Opcode>(rx_opcode_);
  if (op == wire::Opcode::RdmaWrite) {
    rx_fail(ddp_tagged_error(AccessResult::AccessDenied));
    return;
  }
  if (op == wire::Opcode::ReadResponse) {
    SqEntry& e = sq_at(orq_[orq_head_]);
    e.status = WcStatus::LocProtErr;
    e.st = SqSt::Done;  // kept by the flush that follows
  } else {
    complete_active_recv(WcStatus::LocProtErr);
  }
  rx_fail({TermLayer::Rdma, term::kRdmaLocalCatastrophic, 0});
}

void Qp::rx_commit(size_t n) {
  rx_pin_.release();
  if (n == 0) return;
  if (rx_replay_) {
    // Bytes of a staged FPDU: counted, CRC-checked and Marker-stripped when they arrived.
    if (rx_st_ == RxSt::Drain) return;
  } else {
    stats_.rx_bytes += n;
    if (rx_st_ == RxSt::Drain) {
      rx_pos_ += n;
      return;
    }
    if (rx_in_marker_) {
      rx_pos_ += n;
      if (rx_pos_ % wire::kMarkerInterval == wire::kMarkerSize) rx_process_marker();
      return;
    }
    if (params_.crc) {
      // Covered: ULPDU_Length, ULPDU and PAD; not the CRC field itself (RFC 5044 §4.4).
      size_t covered = n;
      if (rx_st_ == RxSt::Stage) {
        const size_t crc_at = rx_want_ - wire::kCrcSize;
        covered = rx_got_ < crc_at ? std::min(n, crc_at - rx_got_) : 0;
      }
      rx_crc_ = wire::crc32c_update(rx_crc_, rx_last_.dst, covered);
    }
    if (rx_st_ == RxSt::Length && rx_got_ == 0) rx_fpdu_start_ = rx_pos_;
    rx_pos_ += n;
  }
  rx_got_ += n;
  switch (rx_st_) {
    case RxSt::Length:
      if (rx_got_ == rx_want_) {
        rx_ulpdu_len_ = wire::load_be16(rx_hdr_.data());
        if (params_.crc) {
          rx_st_ = RxSt::Stage;
          rx_got_ = 0;
          rx_want_ = rx_ulpdu_len_ + wire::fpdu_pad(rx_ulpdu_len_) + wire::kCrcSize;
          if (rx_stage_.size() < rx_want_) rx_stage_.resize(rx_want_);
        } else {
          rx_st_ = RxSt::Control;
          rx_want_ = wire::kUlpduLengthSize + 2;
        }
      }
      break;
    case RxSt::Stage:
      if (rx_got_ == rx_want_) rx_finish_stage();
      break;
    case RxSt::Control:
      if (rx_got_ == rx_want_) rx_process_control();
      break;
    case RxSt::Header:
      if (rx_got_ == rx_want_) rx_process_header();
      break;
    case RxSt::Payload:
      if (rx_got_ == rx_payload_len_) {
        rx_st_ = RxSt::Trailer;
        rx_got_ = 0;
        rx_want_ = rx_pad_ + wire::kCrcSize;
      }
      break;
    case RxSt::Trailer:
      if (rx_got_ == rx_want_) rx_finish_fpdu();
      break;
    case RxSt::Drain:
      break;
  }
}

// RFC 5044 §4.4: "When an FPDU is received, and CRC checking is enabled, the receiver MUST
// first" check its CRC; a mismatch makes the FPDU invalid (MPA error 2, an LLP Terminate with
// no copied headers, RFC 5040 Figure 10). Only a valid FPDU is then parsed and placed, by
// replaying the staged bytes through the usual states from the DDP control field on.
void Qp::rx_finish_stage() {
  const size_t len = rx_want_;
  if (wire::load_le32(rx_stage_.data() + len - wire::kCrcSize) != wire::crc32c_final(rx_crc_)) {
    rx_fail({TermLayer::Llp, term::kLlpMpa, term::kMpaCrc});
    return;
  }
  rx_replay_ = true;
  rx_st_ = RxSt::Control;
  rx_got_ = wire::kUlpduLengthSize;  // rx_hdr_ holds the length already
  rx_want_ = wire::kUlpduLengthSize + 2;
  rx_copy_in({rx_stage_.data(), len});
  rx_replay_ = false;
}

// RFC 5044 §4.3: every Marker points back to the length field of the FPDU it sits in, or is 0
// when it falls between FPDUs; either way it is covered by that FPDU's CRC (§4.4). A mismatch is
// MPA error 3 (RFC 5044 §8), reported as an LLP Terminate.
void Qp::rx_process_marker() {
  const uint64_t marker_pos = rx_pos_ - wire::kMarkerSize;
  const bool between = rx_st_ == RxSt::Length && rx_got_ == 0;
  const uint16_t expect = between ? 0 : static_cast<uint16_t>(marker_pos - rx_fpdu_start_) & 0xFFFC;
  if (params_.crc) rx_crc_ = wire::crc32c_update(rx_crc_, rx_marker_.data(), wire::kMarkerSize);
  if (wire::decode_marker_fpduptr(rx_marker_.data()) != expect)
    rx_fail({TermLayer::Llp, term::kLlpMpa, term::kMpaMarker});
}

void Qp::rx_process_control() {
  rx_seg_.tagged = rx_hdr_[2] & wire::kDdpFlagTagged;
  rx_opcode_ = wire::rdmap_opcode(rx_hdr_[3]);
  size_t hdr = wire::segment_header_size(rx_seg_.tagged);
  if (!rx_seg_.tagged && rx_opcode_ == static_cast<uint8_t>(wire::Opcode::ReadRequest))
    hdr += wire::kReadRequestHeaderSize;
  if (rx_ulpdu_len_ < hdr) {
    // The segment cannot hold the headers its own control fields announce. RFC 5041 §6.2.2
    // makes an invalid DDP header fatal but names no code for a short segment: RDMAP "Remote
    // Operation Error / Unspecified" is the closest.
    rx_fail(remote_op(term::kUnspecified));
    return;
  }
  rx_hdr_len_ = hdr;
  rx_st_ = RxSt::Header;
  rx_want_ = wire::kUlpduLengthSize + hdr;
}

void Qp::rx_fail(wire::TerminateCause cause) {
  set_terminate(cause, true);
  rx_st_ = RxSt::Drain;
}

void Qp::rx_process_header() {
  wire::decode_segment_header({rx_hdr_.data() + wire::kUlpduLengthSize, rx_hdr_len_}, &rx_seg_);
  rx_payload_len_ = rx_ulpdu_len_ - rx_hdr_len_;
  const wire::OpcodeInfo& oi = wire::opcode_info(rx_opcode_);
  // RFC 5041 §4.1: DV MUST be 1; the error type follows the T bit (§7.2).
  if (rx_seg_.ddp_version != wire::kDdpVersion) {
    rx_fail(rx_seg_.tagged
                ? wire::TerminateCause{TermLayer::Ddp, term::kDdpTagged, term::kDdpInvalidVersion}
                : untagged(term::kDdpUntaggedInvalidVersion));
    return;
  }
  // RFC 5040 §7.2 checks 2-3: a valid RDMAP version and opcode, and the T flag and QN the
  // opcode requires (RFC 5040 §4.5 Figure 4).
  if (wire::rdmap_version(rx_seg_.rdmap_control) != wire::kRdmapVersion) {
    rx_fail(remote_op(term::kInvalidRdmapVersion));
    return;
  }
  if (!oi.valid || oi.tagged != rx_seg_.tagged) {
    rx_fail(remote_op(term::kUnexpectedOpcode));
    return;
  }
  if (!rx_seg_.tagged && rx_seg_.qn != oi.qn) {
    rx_fail(untagged(term::kDdpInvalidQn));  // RFC 5041 §7.1 untagged check 1
    return;
  }
  rx_begin_payload();
}

// What the receiver does with each RDMAP opcode; wire::kOpcodeTable says what each one is on the
// wire (tagged or not, its queue, its header), and rx_process_header refuses the opcodes it marks
// invalid before a row here is used. A new opcode is a row in both tables and its handlers.
constexpr std::array<Qp::RxOp, 16> Qp::kRxOps = {{
    {&Qp::rx_begin_write, nullptr, true},  // RFC 5040 §5.1: placed, never delivered
    {&Qp::rx_begin_read_request, &Qp::rx_deliver_read_request, true},
    {&Qp::rx_begin_read_response, &Qp::rx_deliver_read_response, true},
    {&Qp::rx_begin_send, &Qp::rx_deliver_send, true},  // Send
    {&Qp::rx_begin_send, &Qp::rx_deliver_send, true},  // Send with Invalidate
    {&Qp::rx_begin_send, &Qp::rx_deliver_send, true},  // Send with Solicited Event
    {&Qp::rx_begin_send, &Qp::rx_deliver_send, true},  // Send with Solicited Event and Invalidate
    {&Qp::rx_begin_terminate, &Qp::rx_deliver_terminate, true},
}};

// Pre-placement validation and choice of the destination (RFC 5041 §7.1, RFC 5040 §7.2), by
// the opcode's row of kRxOps; then the payload, or straight to the trailer.
void Qp::rx_begin_payload() {
  static_assert(
      [] {
        for (size_t op = 0; op < kRxOps.size(); ++op)
          if (wire::kOpcodeTable[op].valid != kRxOps[op].handled) return false;
        return true;
      }(),
      "every opcode wire::kOpcodeTable accepts needs a row in kRxOps, and only those");
  rx_dest_ = RxDest::Discard;
  rx_rtr_send_ = false;
  if (!(this->*kRxOps[rx_opcode_ & wire::kRdmapMaskOpcode].begin)()) return;  // rx_fail'ed
  rx_pad_ = wire::fpdu_pad(rx_ulpdu_len_);
  if (rx_payload_len_ == 0) {
    rx_st_ = RxSt::Trailer;
    rx_want_ = rx_pad_ + wire::kCrcSize;
  } else {
    rx_st_ = RxSt::Payload;
    rx_want_ = rx_payload_len_;
  }
  rx_got_ = 0;
}

bool Qp::rx_begin_write() {
  // RFC 5041 §5.2: STag and TO of a zero-length tagged segment MUST NOT be checked.
  if (rx_payload_len_ == 0) return true;
  const memory::Mapping m = cfg_.registry->check(rx_seg_.stag, cfg_.pd, cfg_.qp_num,
                                                 memory::kRemoteWrite, rx_seg_.to, rx_payload_len_);
  if (m.result != AccessResult::Ok) {
    rx_fail(ddp_tagged_error(m.result));
    return false;
  }
  rx_dest_ = RxDest::Host;  // pinned per read in rx_need()
  return true;
}

bool Qp::rx_begin_read_response() {
  if (rtr_read_outstanding_) {
    if (rx_payload_len_ != 0) {
      rx_fail(remote_op(term::kUnexpectedOpcode));
      return false;
    }
    return true;
  }
  if (orq_count_ == 0) {  // no Read outstanding: nothing may answer (RFC 5040 §5.2)
    rx_fail(remote_op(term::kUnexpectedOpcode));
    return false;
  }
  if (rx_payload_len_ == 0) return true;
  const SqEntry& e = sq_at(orq_[orq_head_]);
  // RFC 5041 §7.1 tagged checks against the sink our Read Request named: STag, 64-bit
  // wrap, base (TO 0) and bounds (the scatter list's length).
  if (rx_seg_.stag != e.sink_stag) {
    rx_fail(ddp_tagged_error(AccessResult::InvalidStag));
    return false;
  }
  if (rx_seg_.to + rx_payload_len_ < rx_seg_.to) {
    rx_fail(ddp_tagged_error(AccessResult::ToWrap));
    return false;
  }
  if (rx_seg_.to + rx_payload_len_ > e.sgl.total) {
    rx_fail(ddp_tagged_error(AccessResult::BaseBounds));
    return false;
  }
  // Our Read Request named TO 0 and the Read's length (RFC 5040 §5.2.2: the Data Sink MAY
  // validate them); over an in-order LLP the Data Source sends the response's segments in
  // order, so each one starts where the last one ended. One that does not would leave a
  // hole the completion would claim was filled: treated as placing outside the part of the
  // sink this response may fill next (RFC 5041 §7.1 tagged check 3-4).
  if (rx_seg_.to != orq_placed_) {
    rx_fail(ddp_tagged_error(AccessResult::BaseBounds));
    return false;
  }
  rx_dest_ = RxDest::Sgl;
  rx_sgl_ = &e.sgl;
  rx_sgl_off_ = rx_seg_.to;
  orq_placed_ += rx_payload_len_;
  return true;
}

bool Qp::rx_begin_send() {
  if (!(rx_send_active_ && rx_seg_.msn == rx_send_msn_)) {
    // RFC 5041 §7.1 untagged check 5: only the next message's MSN has a buffer.
    if (rx_send_active_ || rx_seg_.msn != rx_expected_msn_[wire::kQnSend]) {
      rx_fail(untagged(term::kDdpMsnRange));
      return false;
    }
    // RFC 6581: the responder's first FPDU may be the initiator's zero-length RTR Send,
    // which consumes no receive buffer here.
    if (!params_.initiator && params_.rtr == RtrType::Send && !rx_first_seen_ &&
        rx_payload_len_ == 0 && rx_seg_.mo == 0 && rx_seg_.last) {
      rx_rtr_send_ = true;
      return true;
    }
    std::optional<RecvWr> wr = cfg_.rq->take();
    if (!wr) {  // RFC 5041 §7.1 untagged check 2; iWARP has no RNR retry
      rx_fail(untagged(term::kDdpNoBuffer));
      return false;
    }
    rx_send_active_ = true;
    rx_send_msn_ = rx_seg_.msn;
    rx_send_got_ = 0;
    rx_send_wr_ = *wr;
    if (!resolve_sgl(wr->sg_list, wr->num_sge, memory::kLocalWrite, &rx_send_sgl_)) {
      // A bad lkey in our own receive WR: a local error (RDMAP §7.1 item 21).
      complete_active_recv(WcStatus::LocProtErr);
      rx_fail({TermLayer::Rdma, term::kRdmaLocalCatastrophic, 0});
      return false;
    }
  }
  // RFC 5041 §7.1 untagged checks 3-4. The message does not fit the posted receive: the
  // receive ends with a local length error (as a verbs receive that is too small does; siw
  // alike) rather than a flush, so the application can tell why.
  if (rx_seg_.mo + rx_payload_len_ > rx_send_sgl_.total) {
    complete_active_recv(WcStatus::LocLenErr);
    rx_fail(untagged(rx_seg_.mo > rx_send_sgl_.total ? term::kDdpInvalidMo : term::kDdpTooLong));
    return false;
  }
  // Over an in-order LLP a message's segments arrive in order (TCP; SCTP messages are
  // processed in DDP-SSN order): each one's MO is what the message holds so far, so a
  // message cannot complete with bytes that never arrived (RFC 5041 §5.4 defines its
  // length by the Last segment). Untagged check 3 names the error.
  if (rx_seg_.mo != rx_send_got_) {
    rx_fail(untagged(term::kDdpInvalidMo));
    return false;
  }
  rx_send_got_ += rx_payload_len_;
  if (rx_payload_len_ == 0) return true;
  rx_dest_ = RxDest::Sgl;
  rx_sgl_ = &rx_send_sgl_;
  rx_sgl_off_ = rx_seg_.mo;
  return true;
}

bool Qp::rx_begin_read_request() {
  if (rx_seg_.msn != rx_expected_msn_[wire::kQnReadRequest]) {
    rx_fail(untagged(term::kDdpMsnRange));
    return false;
  }
  // RFC 5040 §6.1: never more than IRD inbound Reads; the excess one finds no QN 1 buffer
  // (RFC 5041 §7.1 untagged check 2).
  if (irq_count_ >= std::max<uint32_t>(params_.ird, 1)) {
    rx_fail(untagged(term::kDdpNoBuffer));
    return false;
  }
  if (rx_payload_len_ != 0) {  // RFC 5040 §4.5: a Read Request carries no ULP payload
    rx_fail(remote_op(term::kUnspecified));
    return false;
  }
  return true;
}

bool Qp::rx_begin_terminate() {
  if (rx_seg_.msn != rx_expected_msn_[wire::kQnTerminate]) {
    rx_fail(untagged(term::kDdpMsnRange));
    return false;
  }
  rx_dest_ = RxDest::TermBody;
  return true;
}

void Qp::rx_finish_fpdu() {
  // With CRCs the FPDU's CRC matched before it was replayed here (rx_finish_stage).
  ++stats_.rx_fpdus;
  rx_first_seen_ = true;
  tx_hold_ = false;
  if (rx_seg_.last) rx_deliver();
  rx_to_length();
}

// Delivery of a complete message (RFC 5041 §5.4), in order; Read Requests are processed only
// now, once delivered (RFC 5040 §5.5 rules 12 and 17).
void Qp::rx_deliver() {
  if (const RxOp::Handler deliver = kRxOps[rx_opcode_ & wire::kRdmapMaskOpcode].deliver)
    (this->*deliver)();
}

void Qp::rx_deliver_read_response() {
  if (rtr_read_outstanding_) {
    rtr_read_outstanding_ = false;
    return;
  }
  // RFC 5040 §5.5 rule 19: a Read completes when its response is delivered, and only
  // with all the bytes it asked for (§5.2.2: the sink MAY validate the length). A short
  // response is the Data Source's protocol error, not a short success.
  SqEntry& e = sq_at(orq_[orq_head_]);
  const uint64_t placed = std::exchange(orq_placed_, 0);
  if (placed != e.sgl.total) {
    rx_fail(remote_op(term::kUnspecified));
    return;
  }
  e.st = SqSt::Done;
  orq_head_ = (orq_head_ + 1) % orq_.size();
  --orq_count_;
  complete_sq();
}

void Qp::rx_deliver_send() {
  const auto op = static_cast<wire::Opcode>(rx_opcode_);
  ++rx_expected_msn_[wire::kQnSend];
  if (rx_rtr_send_) return;
  Completion c{};
  c.wr_id = rx_send_wr_.wr_id;
  c.opcode = WcOpcode::Recv;
  c.qp_num = cfg_.qp_num;
  // RFC 5041 §5.4: the message length is MO + payload of the Last segment.
  c.byte_len = rx_seg_.mo + static_cast<uint32_t>(rx_payload_len_);
  if (op == wire::Opcode::SendSe || op == wire::Opcode::SendSeInv) c.flags |= kWcSolicited;
  if (op == wire::Opcode::SendInv || op == wire::Opcode::SendSeInv) {
    // RFC 5040 §5.3 / §7.2 checks 4-5: invalidate, or Terminate "STag cannot be
    // Invalidated" when the STag is invalid or not associated with this stream.
    const AccessResult r =
        cfg_.registry->invalidate_remote(rx_seg_.inval_stag, cfg_.pd, cfg_.qp_num);
    if (r != AccessResult::Ok) {
      rx_fail({TermLayer::Rdma, term::kRdmaRemoteProtection, term::kCannotInvalidate});
      return;
    }
    c.flags |= kWcWithInv;
    c.invalidated_stag = rx_seg_.inval_stag;
  }
  rx_send_active_ = false;
  push_cqe(cfg_.recv_cq, c);
}

void Qp::rx_deliver_read_request() {
  const wire::ReadRequestHeader rr = wire::decode_read_request(
      rx_hdr_.data() + wire::kUlpduLengthSize + wire::kUntaggedHeaderSize);
  // RFC 5040 §5.2.1: a zero-size Read is not validated and gets a zero-length response.
  if (rr.size != 0) {
    const memory::Mapping m = cfg_.registry->check(rr.src_stag, cfg_.pd, cfg_.qp_num,
                                                   memory::kRemoteRead, rr.src_to, rr.size);
    if (m.result != AccessResult::Ok) {
      rx_fail(rdmap_protection_error(m.result));
      return;
    }
  }
  ++rx_expected_msn_[wire::kQnReadRequest];
  irq_[(irq_head_ + irq_count_) % irq_.size()] = {rr, 0, rx_seg_.msn};
  ++irq_count_;
}

void Qp::rx_deliver_terminate() {
  ++rx_expected_msn_[wire::kQnTerminate];
  wire::TerminateMessage t{};
  const size_t n = std::min<size_t>(rx_payload_len_, rx_term_.size());
  wire::decode_terminate({rx_term_.data(), n}, &t);
  term_rcvd_ = t;
  // RDMAP §5.4: the stream is over; everything outstanding completes in error.
  rx_st_ = RxSt::Drain;
  enter_error(QpEvent::TerminateReceived);
}
void Qp::rx_eof() {
  const size_t mpos = rx_pos_ % wire::kMarkerInterval;
  const bool mid_marker = params_.markers_rx && mpos > 0 && mpos < wire::kMarkerSize;
  const bool clean = rx_st_ == RxSt::Length && rx_got_ == 0 && !mid_marker;
  if (state_ == QpState::Idle || state_ == QpState::Error) {
    want_shutdown_ = true;
    return;
  }
  if (state_ == QpState::Terminate) {
    rx_st_ = RxSt::Drain;  // our Terminate still goes out, then we close
    return;
  }
  if (clean) {
    rx_st_ = RxSt::Drain;
    enter_error(QpEvent::Closed);
    return;
  }
  // The connection closed mid-FPDU: MPA error 1 (RFC 5044 §8), sent if the peer still reads.
  rx_fail({TermLayer::Llp, term::kLlpMpa, term::kMpaConnectionLost});
}

void Qp::rx_error(int /*err*/) {
  if (state_ == QpState::Error) return;
  // The connection is gone: nothing more can be sent, so nothing is kept for sending.
  slots_used_ = 0;
  tx_iov_begin_ = tx_iov_end_ = 0;
  tx_batch_bytes_ = 0;
  rx_st_ = RxSt::Drain;
  enter_error(QpEvent::LlpError);
}

}  // namespace uiw::engine
