// Qp receive path, DDP/RDMAP side: one segment at a time from the framer (framer.h), through an
// explicit, resumable state machine (control octets, headers, payload). Headers are validated
// before a single payload byte is placed (RFC 5041 §7.1, §8.1); payload is read straight into its
// target.
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

// ---- Qp's lower-layer receive calls: the framer of the connection's LLP (framer.h)

Qp::RxNeed Qp::rx_need() {
  if (state_ == QpState::Idle) return {nullptr, 0};
  return rx_framer_->need();
}

void Qp::rx_commit(size_t n) {
  rx_framer_->commit(n);
}

void Qp::rx_cancel() {
  rx_framer_->cancel();
}

void Qp::rx_fault() {
  rx_framer_->fault();
}

bool Qp::rx_directable() const {
  return rx_framer_->directable();
}

size_t Qp::rx_feed(std::span<const uint8_t> in) {
  if (state_ == QpState::Idle) return 0;  // not reading yet
  return rx_framer_->feed(in);
}

void Qp::rx_feed_message(uint32_t ppid, std::span<const uint8_t> msg) {
  if (state_ == QpState::Idle) return;
  rx_framer_->feed_message(ppid, msg);
}

// ---- SegmentRx: one DDP segment at a time

void Qp::seg_begin(uint16_t len) {
  rx_ulpdu_len_ = len;
  rx_hdr_len_ = 0;
  rx_got_ = 0;
  rx_want_ = 2;  // the DDP and RDMAP control octets (RFC 5041 §4, RFC 5040 §4.2)
  seg_st_ = SegSt::Control;
  if (len < rx_want_) {
    // The segment cannot hold the headers its own control fields announce. RFC 5041 §6.2.2
    // makes an invalid DDP header fatal but names no code for a short segment: RDMAP "Remote
    // Operation Error / Unspecified" is the closest.
    rx_fail(remote_op(term::kUnspecified));
  }
}

bool Qp::seg_directable() const {
  return seg_st_ == SegSt::Payload && (rx_dest_ == RxDest::Host || rx_dest_ == RxDest::Sgl);
}

RxNeed Qp::seg_need(bool* app) {
  *app = false;
  if (rx_drain_) return {nullptr, 0};
  switch (seg_st_) {
    case SegSt::Control:
    case SegSt::Header:
      return {rx_hdr_.data() + rx_got_, rx_want_ - rx_got_};
    case SegSt::Payload:
      break;
    case SegSt::Idle:
    case SegSt::Complete:
      return {nullptr, 0};
  }
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
        return {nullptr, 0};
      }
      *app = true;
      return {rx_pin_.mapping().host, left};
    }
    case RxDest::Sgl: {
      // Our own receive buffer or Read sink, resolved when the message began: validated
      // again for each read, like a Write's target, so that nothing is placed after
      // ibv_dereg_mr returned (a later segment of a Send or Read Response).
      const ResolvedSge piece = rx_sgl_->at(rx_sgl_off_ + rx_got_);
      const uint64_t len = std::min<uint64_t>(piece.len, left);
      rx_pin_ = cfg_.registry->pin(piece.lkey, cfg_.pd, 0, memory::kLocalWrite, piece.addr, len);
      if (!rx_pin_.ok()) {
        seg_fault();
        return {nullptr, 0};
      }
      *app = true;
      return {rx_pin_.mapping().host, len};
    }
    case RxDest::TermBody:
      if (rx_got_ < rx_term_.size())
        return {rx_term_.data() + rx_got_, std::min<uint64_t>(rx_term_.size() - rx_got_, left)};
      [[fallthrough]];
    case RxDest::Discard:
      break;
  }
  return {rx_discard_.data(), std::min<uint64_t>(rx_discard_.size(), left)};
}

void Qp::seg_cancel() {
  rx_pin_.release();
}

// The destination of the last seg_need() could not be written: a Write's target is the peer's
// error on a region it may write (DDP tagged; RFC 5041 has no code for access rights, so "Invalid
// STag", as for the other access checks), a Send's receive buffer or a Read's sink is ours (the
// receive or Read completes with a local protection error, and the stream ends with RDMAP "Local
// Catastrophic", as for a bad lkey).
void Qp::seg_fault() {
  rx_pin_.release();
  if (seg_st_ != SegSt::Payload || rx_drain_) return;
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

void Qp::seg_commit(size_t n) {
  rx_pin_.release();
  if (n == 0 || rx_drain_) return;
  rx_got_ += n;
  switch (seg_st_) {
    case SegSt::Control:
      if (rx_got_ == rx_want_) rx_process_control();
      break;
    case SegSt::Header:
      if (rx_got_ == rx_want_) rx_process_header();
      break;
    case SegSt::Payload:
      if (rx_got_ == rx_payload_len_) seg_st_ = SegSt::Complete;
      break;
    case SegSt::Idle:
    case SegSt::Complete:
      break;
  }
}

void Qp::llp_fail(wire::TerminateCause cause) {
  rx_fail(cause);
}

// The peer's side ended between frames (an SCTP Session Terminate; over TCP rx_eof itself).
void Qp::llp_closed() {
  rx_eof();
  rx_drain_ = true;
}

// Whether this connection accepts the opcode at all: defined, and not an RFC 7306 extension the
// peers did not agree to (RFC 7306 §1.1: then it is "Unexpected OpCode" like a reserved one).
bool Qp::rx_opcode_usable(const wire::OpcodeInfo& oi) const {
  return oi.valid && (!oi.extension || params_.rdmap_ext);
}

void Qp::rx_process_control() {
  rx_seg_.tagged = rx_hdr_[0] & wire::kDdpFlagTagged;
  rx_opcode_ = wire::rdmap_opcode(rx_hdr_[1]);
  const wire::OpcodeInfo& oi = wire::opcode_info(rx_opcode_);
  size_t hdr = wire::segment_header_size(rx_seg_.tagged);
  // A fixed RDMAP header is read with the DDP header; an opcode this connection refuses reads
  // none, so that a short segment is still refused for its opcode.
  if (!rx_seg_.tagged && !oi.tagged && oi.fixed_header && rx_opcode_usable(oi))
    hdr += oi.rdmap_header_size;
  if (rx_ulpdu_len_ < hdr) {
    rx_fail(remote_op(term::kUnspecified));  // as in seg_begin: too short for its headers
    return;
  }
  rx_hdr_len_ = hdr;
  seg_st_ = SegSt::Header;
  rx_want_ = hdr;
}

void Qp::rx_fail(wire::TerminateCause cause) {
  set_terminate(cause, true);
  stop_placing();  // also where no Terminate follows (one was sent, or the Qp is in Error)
}

void Qp::rx_process_header() {
  wire::decode_segment_header({rx_hdr_.data(), rx_hdr_len_}, &rx_seg_);
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
  if (!rx_opcode_usable(oi) || oi.tagged != rx_seg_.tagged) {
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
    {&Qp::rx_begin_write, nullptr, true, true},  // RFC 5040 §5.1: placed, never delivered
    {&Qp::rx_begin_read_request, &Qp::rx_deliver_read_request, true, false},
    {&Qp::rx_begin_read_response, &Qp::rx_deliver_read_response, true, true},
    {&Qp::rx_begin_send, &Qp::rx_deliver_send, true, true},  // Send
    {&Qp::rx_begin_send, &Qp::rx_deliver_send, true, true},  // Send with Invalidate
    {&Qp::rx_begin_send, &Qp::rx_deliver_send, true, true},  // Send with Solicited Event
    {&Qp::rx_begin_send, &Qp::rx_deliver_send, true, true},  // ... and Invalidate
    {&Qp::rx_begin_terminate, &Qp::rx_deliver_terminate, true, false},
    {&Qp::rx_begin_immediate, &Qp::rx_deliver_immediate, true, false},              // RFC 7306 §6
    {&Qp::rx_begin_immediate, &Qp::rx_deliver_immediate, true, false},              // ... with SE
    {&Qp::rx_begin_atomic_request, &Qp::rx_deliver_atomic_request, true, false},    // §5.2.1
    {&Qp::rx_begin_atomic_response, &Qp::rx_deliver_atomic_response, true, false},  // §5.2.2
}};

// Pre-placement validation and choice of the destination (RFC 5041 §7.1, RFC 5040 §7.2), by
// the opcode's row of kRxOps; then the payload, if any.
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
  seg_st_ = rx_payload_len_ == 0 ? SegSt::Complete : SegSt::Payload;
  rx_want_ = rx_payload_len_;
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
  // No Read outstanding, or the oldest request is an atomic (responses come in request order,
  // RFC 7306 §7): nothing may answer (RFC 5040 §5.2).
  if (orq_count_ == 0 || sq_at(orq_[orq_head_]).wr.opcode != WrOpcode::RdmaRead) {
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
    if (!cfg_.rq->take(&rx_send_wr_)) {  // RFC 5041 §7.1 untagged check 2; no RNR retry
      rx_fail(untagged(term::kDdpNoBuffer));
      return false;
    }
    rx_send_active_ = true;
    rx_send_msn_ = rx_seg_.msn;
    rx_send_got_ = 0;
    if (!resolve_sgl(rx_send_wr_.sg_list, rx_send_wr_.num_sge, memory::kLocalWrite,
                     &rx_send_sgl_)) {
      // A bad lkey in our own receive WR: a local error (RDMAP §7.1 item 21).
      complete_active_recv(WcStatus::LocProtErr);
      rx_fail({TermLayer::Rdma, term::kRdmaLocalCatastrophic, 0});
      return false;
    }
  }
  // RFC 5041 §7.1 untagged checks 3-4. The message does not fit the posted receive: the
  // receive ends with a local length error (as a verbs receive that is too small does; siw
  // alike) rather than a flush, so the application can tell why. A buffer holds at most the
  // 2^32 - 1 octets a 32-bit MO can describe (§4.3): a longer message's length (MO + payload of
  // its Last segment, §5.4) would wrap.
  const uint64_t room = std::min<uint64_t>(rx_send_sgl_.total, UINT32_MAX);
  if (rx_seg_.mo + rx_payload_len_ > room) {
    complete_active_recv(WcStatus::LocLenErr);
    rx_fail(untagged(rx_seg_.mo > room ? term::kDdpInvalidMo : term::kDdpTooLong));
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

// RFC 7306 §6.3: an Immediate Data message is one untagged QN 0 segment of exactly 8 octets
// (read as its fixed header) and takes the next receive buffer, in MSN order with Sends.
// One for the Send that follows (wire::kImmediateForNextSend) takes no buffer of its own: that
// Send's receive completes with it; a second one before that Send is the peer's error.
bool Qp::rx_begin_immediate() {
  if (rx_send_active_ || rx_seg_.msn != rx_expected_msn_[wire::kQnSend]) {
    rx_fail(untagged(term::kDdpMsnRange));  // RFC 5041 §7.1 untagged check 5
    return false;
  }
  if (rx_seg_.mo != 0) {
    rx_fail(untagged(term::kDdpInvalidMo));
    return false;
  }
  if (rx_payload_len_ != 0 || !rx_seg_.last || rx_imm_for_send_) {  // more than its 8 octets
    rx_fail(remote_op(term::kUnspecified));
    return false;
  }
  const wire::ImmediateData d = wire::decode_immediate(rx_hdr_.data() + wire::kUntaggedHeaderSize);
  if (d.info == wire::kImmediateForNextSend) return true;
  if (!cfg_.rq->take(&rx_send_wr_)) {  // RFC 5041 §7.1 untagged check 2
    rx_fail(untagged(term::kDdpNoBuffer));
    return false;
  }
  // Taken before the rest of the FPDU arrived (without CRC): a stream that ends first flushes
  // it (complete_active_recv), as a partly received Send's.
  rx_send_active_ = true;
  return true;
}

void Qp::rx_deliver_immediate() {
  ++rx_expected_msn_[wire::kQnSend];
  const wire::ImmediateData d = wire::decode_immediate(rx_hdr_.data() + wire::kUntaggedHeaderSize);
  if (d.info == wire::kImmediateForNextSend) {
    rx_imm_for_send_ = true;
    rx_imm_ = d.imm;
    return;
  }
  Completion c{};
  c.wr_id = rx_send_wr_.wr_id;
  c.opcode = WcOpcode::RecvRdmaWithImm;
  c.qp_num = cfg_.qp_num;
  c.byte_len = d.info;
  c.flags = kWcWithImm;
  if (rx_opcode_ == static_cast<uint8_t>(wire::Opcode::ImmediateDataSe)) c.flags |= kWcSolicited;
  c.imm_data = d.imm;
  rx_send_active_ = false;
  push_cqe(cfg_.recv_cq, c);
}

// RFC 7306 §5.2.1: on QN 1 with the Read Requests, in their MSN sequence and under the same IRD
// (§5.2: the responder keeps QN 1 buffers for both).
bool Qp::rx_begin_atomic_request() {
  return rx_begin_read_request();
}

// Validated once delivered (RFC 7306 §5.2.1 item 5: processed in order, after every earlier
// message); performed when its turn to be answered comes (build_atomic_response). Errors: an
// undefined atomic opcode is refused like an undefined RDMAP one (§1.1, §5.2.1 item 4 names no
// code); the STag checks are RFC 5040 §7.2's for a Read's source with the remote atomic access
// right; a target not 8-octet aligned is "Catastrophic error, localized to RDMAP Stream"
// (§8.2). The Terminate copies the DDP header only (§8.1, set_terminate).
void Qp::rx_deliver_atomic_request() {
  const wire::AtomicRequestHeader ar =
      wire::decode_atomic_request(rx_hdr_.data() + wire::kUntaggedHeaderSize);
  if (ar.aopcode != static_cast<uint8_t>(wire::AtomicOpcode::FetchAdd) &&
      ar.aopcode != static_cast<uint8_t>(wire::AtomicOpcode::CmpSwap)) {
    rx_fail(remote_op(term::kUnexpectedOpcode));
    return;
  }
  const memory::Mapping m = cfg_.registry->check(ar.stag, cfg_.pd, cfg_.qp_num,
                                                 memory::kRemoteAtomic, ar.to, sizeof(uint64_t));
  if (m.result != AccessResult::Ok) {
    rx_fail(rdmap_protection_error(m.result));
    return;
  }
  if (reinterpret_cast<uintptr_t>(m.host) % sizeof(uint64_t) != 0) {
    rx_fail(remote_op(term::kCatastrophicStream));
    return;
  }
  ++rx_expected_msn_[wire::kQnReadRequest];
  IrqEntry& q = irq_[(irq_head_ + irq_count_) % irq_.size()];
  q = IrqEntry{};
  q.msn = rx_seg_.msn;
  q.atomic = true;
  q.ar = ar;
  ++irq_count_;
}

// RFC 7306 §5.2.2: on QN 3, in its own MSN sequence; it answers the oldest outstanding request,
// which must be an atomic (§7: responses come in request order).
bool Qp::rx_begin_atomic_response() {
  if (rx_seg_.msn != rx_expected_msn_[wire::kQnAtomicResponse]) {
    rx_fail(untagged(term::kDdpMsnRange));
    return false;
  }
  if (orq_count_ == 0 || !tx_op(sq_at(orq_[orq_head_]).wr.opcode).extension) {
    rx_fail(remote_op(term::kUnexpectedOpcode));
    return false;
  }
  if (rx_payload_len_ != 0) {
    rx_fail(remote_op(term::kUnspecified));
    return false;
  }
  return true;
}

// The original value goes to the WR's 8-octet buffer in host order (RFC 7306 §5.1: converted
// from the wire's big-endian), through the same fault-safe, revalidated path as a Read's sink.
// A response naming another request is the peer's protocol error (§5.2.2 item 7 names no code).
void Qp::rx_deliver_atomic_response() {
  ++rx_expected_msn_[wire::kQnAtomicResponse];
  SqEntry& e = sq_at(orq_[orq_head_]);
  const wire::AtomicResponseHeader r =
      wire::decode_atomic_response(rx_hdr_.data() + wire::kUntaggedHeaderSize);
  if (r.request_id != e.request_id) {
    e.status = WcStatus::BadResp;
    e.st = SqSt::Done;  // kept by the flush that follows
    rx_fail(remote_op(term::kUnspecified));
    return;
  }
  const ResolvedSge& dst = e.sgl.sge[0];
  memory::Registry::Pin pin =
      cfg_.registry->pin(dst.lkey, cfg_.pd, 0, memory::kLocalWrite, dst.addr, sizeof r.original);
  if (!pin.ok() || memory::copy_to_app(pin.mapping().host, &r.original, sizeof r.original) != 0) {
    pin.release();  // not held across the completions and events of the failure
    e.status = WcStatus::LocProtErr;
    e.st = SqSt::Done;
    rx_fail({TermLayer::Rdma, term::kRdmaLocalCatastrophic, 0});
    return;
  }
  pin.release();
  e.st = SqSt::Done;
  orq_head_ = (orq_head_ + 1) % orq_.size();
  --orq_count_;
  complete_sq();
}

// The framer found the segment whole and valid (with CRCs: its CRC matched).
void Qp::seg_end() {
  ++stats_.rx_fpdus;
  stats_.count(UIW_CNT_RX_FPDUS);
  if (kRxOps[rx_opcode_ & wire::kRdmapMaskOpcode].places)
    stats_.count(UIW_CNT_PLACED_BYTES, rx_payload_len_);
  rx_first_seen_ = true;
  tx_framer_->peer_frame_seen();
  seg_st_ = SegSt::Idle;
  if (rx_seg_.last) rx_deliver();
  rx_hdr_len_ = 0;
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
  if (std::exchange(rx_imm_for_send_, false)) {
    c.flags |= kWcWithImm;
    c.imm_data = rx_imm_;
  }
  rx_send_active_ = false;
  push_cqe(cfg_.recv_cq, c);
}

void Qp::rx_deliver_read_request() {
  const wire::ReadRequestHeader rr =
      wire::decode_read_request(rx_hdr_.data() + wire::kUntaggedHeaderSize);
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
  irq_[(irq_head_ + irq_count_) % irq_.size()] = {rr, 0, rx_seg_.msn, false, {}};
  ++irq_count_;
}

void Qp::rx_deliver_terminate() {
  ++rx_expected_msn_[wire::kQnTerminate];
  wire::TerminateMessage t{};
  const size_t n = std::min<size_t>(rx_payload_len_, rx_term_.size());
  wire::decode_terminate({rx_term_.data(), n}, &t);
  term_rcvd_ = t;
  stats_.count(terminate_counter(t.cause.layer, false));
  // RDMAP §5.4: the stream is over; everything outstanding completes in error.
  enter_error(QpEvent::TerminateReceived);
}
void Qp::rx_eof() {
  if (state_ == QpState::Idle || state_ == QpState::Error) {
    want_shutdown_ = true;
    return;
  }
  if (state_ == QpState::Terminate) return;  // our Terminate still goes out, then we close
  if (rx_framer_->at_boundary()) {
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
  tx_out_.begin = tx_out_.end = 0;
  tx_out_.batch_bytes = 0;
  enter_error(QpEvent::LlpError);
}

}  // namespace uiw::engine
