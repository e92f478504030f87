// Qp: verbs-side entry points, completion ordering, error handling and flush.
#include "engine/qp.h"

#include <cerrno>
#include <cstring>

#include "wire/mpa.h"
#include "wire/sctp.h"

namespace uiw::engine {

const char* wc_status_name(WcStatus s) {
  switch (s) {
    case WcStatus::Success:
      return "success";
    case WcStatus::LocLenErr:
      return "local length error";
    case WcStatus::LocQpOpErr:
      return "local QP operation error";
    case WcStatus::LocProtErr:
      return "local protection error";
    case WcStatus::WrFlushErr:
      return "WR flushed";
    case WcStatus::BadResp:
      return "bad response";
    case WcStatus::LocAccessErr:
      return "local access error";
    case WcStatus::RemInvReqErr:
      return "remote invalid request";
    case WcStatus::RemAccessErr:
      return "remote access error";
    case WcStatus::RemOpErr:
      return "remote operation error";
    case WcStatus::FatalErr:
      return "fatal error";
    case WcStatus::GeneralErr:
      return "general error";
    case WcStatus::MwBindErr:
      return "memory window bind error";
  }
  return "?";
}

const char* qp_state_name(QpState s) {
  switch (s) {
    case QpState::Idle:
      return "idle";
    case QpState::Rts:
      return "rts";
    case QpState::Closing:
      return "closing";
    case QpState::Terminate:
      return "terminate";
    case QpState::Error:
      return "error";
  }
  return "?";
}

Qp::Qp(const QpConfig& config)
    : cfg_(config),
      sq_(config.sq_depth ? config.sq_depth : 1),
      orq_(kMaxOrdIrd),
      // Sink STags of our Read Requests are private to this QP (the response is matched to the
      // head of the outstanding-read queue, never looked up in the registry); start them at a
      // value derived from the QP number so they differ between connections.
      next_sink_stag_(0x80000000u ^ (config.qp_num * 0x9E3779B9u)),
      irq_(kMaxOrdIrd),
      slots_(kTxSlots) {
  stats_.shared = config.counters;
  tx_pins_.reserve(kTxSlots);
}

Qp::ResolvedSge Qp::Sgl::at(uint64_t offset) const {
  for (uint32_t i = 0; i < n; ++i) {
    if (offset < sge[i].len) {
      return {sge[i].ptr + offset, static_cast<uint32_t>(sge[i].len - offset), sge[i].lkey,
              sge[i].addr + offset};
    }
    offset -= sge[i].len;
  }
  return {nullptr, 0, 0, 0};
}

// Local SGEs are validated like remote accesses, against the QP's PD (verbs: a bad lkey is a
// local protection error). Zero-length SGEs are skipped without a lookup.
bool Qp::resolve_sgl(const Sge* sges, uint32_t n, uint32_t access, Sgl* out) const {
  out->n = 0;
  out->total = 0;
  for (uint32_t i = 0; i < n; ++i) {
    if (sges[i].length == 0) continue;
    const memory::Mapping m =
        cfg_.registry->check(sges[i].lkey, cfg_.pd, 0, access, sges[i].addr, sges[i].length);
    if (m.result != memory::AccessResult::Ok) return false;
    out->sge[out->n++] = {m.host, sges[i].length, sges[i].lkey, sges[i].addr};
    out->total += sges[i].length;
  }
  return true;
}

int Qp::post_send(const SendWr& wr) {
  if (wr.num_sge > kMaxSge) return -EINVAL;
  const QpState st = state_;
  if (st == QpState::Error || st == QpState::Terminate) {
    // The send queue was flushed on the way here: this completion is in order.
    Completion c{};
    c.wr_id = wr.wr_id;
    c.status = WcStatus::WrFlushErr;
    c.qp_num = cfg_.qp_num;
    push_cqe(cfg_.send_cq, c);
    return 0;
  }
  if (st == QpState::Closing) return -EINVAL;  // RFC 5041 §6.2.1: no new transfers
  if (const int rc = fill_sq_entry(wr, st)) return rc;
  sq_tail_.fetch_add(1);
  return 0;
}

int Qp::post_send_concurrent(const SendWr& wr) {
  if (wr.num_sge > kMaxSge) return -EINVAL;
  const QpState st = state_;
  if (st != QpState::Idle && st != QpState::Rts) return -EAGAIN;
  if (const int rc = fill_sq_entry(wr, st)) return rc;
  sq_tail_.fetch_add(1);  // publishes the entry (seq_cst, before the state is read again)
  const QpState now = state_;
  return now == QpState::Error || now == QpState::Terminate ? -ECANCELED : 0;
}

int Qp::send_refusal(const SendWr& wr) const {
  if (wr.num_sge > kMaxSge) return -EINVAL;
  const QpState st = state_;
  if (st == QpState::Error || st == QpState::Terminate) return 0;  // taken and flushed
  if (st == QpState::Closing) return -EINVAL;
  return shape_refusal(wr, st);
}

int Qp::shape_refusal(const SendWr& wr, QpState st) const {
  const TxOp& op = tx_op(wr.opcode);
  // RFC 7306 §1.1: a peer that did not agree to the extensions must never see their opcodes.
  // Once connected (state_ is stored after params_) that is known: refused here; a WR posted
  // before fails when its turn to be sent comes. st is the state the poster saw, not a later
  // one: an abort meanwhile flushes the WR (it is not refused).
  if (op.extension && st != QpState::Idle && !params_.rdmap_ext) return -EOPNOTSUPP;
  if (wr.flags & kSendInline) {
    if (!op.inline_ok) return -EINVAL;
    uint64_t len = 0;
    for (uint32_t i = 0; i < wr.num_sge; ++i) len += wr.sg_list[i].length;
    if (len > kMaxInline) return -EINVAL;
  }
  // RFC 7306 §5.1: the operands and the original value returned are 64 bits: one SGE of 8
  // octets receives the original value (zero-length SGEs name no memory and are skipped).
  if (op.extension && op.outbound_read) {
    uint32_t n = 0;
    uint64_t total = 0;
    for (uint32_t i = 0; i < wr.num_sge; ++i) {
      n += wr.sg_list[i].length != 0;
      total += wr.sg_list[i].length;
    }
    if (n != 1 || total != sizeof(uint64_t)) return -EINVAL;
  }
  return 0;
}

int Qp::fill_sq_entry(const SendWr& wr, QpState st) {
  const uint32_t tail = sq_tail_.load(std::memory_order_relaxed);  // only posters move it
  if (tail - sq_head_.load(std::memory_order_acquire) >= sq_.size()) return -ENOMEM;
  if (const int rc = shape_refusal(wr, st)) return rc;
  const TxOp& op = tx_op(wr.opcode);
  SqEntry& e = sq_at(tail);
  e.wr = wr;
  e.st = SqSt::Queued;
  e.status = WcStatus::Success;
  e.sink_stag = 0;
  e.request_id = 0;
  e.msn = 0;
  e.imm_out = false;
  if (wr.flags & kSendInline) {
    uint64_t len = 0;  // at most kMaxInline (shape_refusal)
    for (uint32_t i = 0; i < wr.num_sge; ++i) {
      if (wr.sg_list[i].length)
        std::memcpy(e.inline_data + len, reinterpret_cast<const void*>(wr.sg_list[i].addr),
                    wr.sg_list[i].length);
      len += wr.sg_list[i].length;
    }
    e.sgl.n = len ? 1 : 0;
    e.sgl.sge[0] = {e.inline_data, static_cast<uint32_t>(len), 0, 0};
    e.sgl.total = len;
  } else {
    if (!resolve_sgl(wr.sg_list, wr.num_sge, tx_op(wr.opcode).sge_access, &e.sgl))
      e.status = WcStatus::LocProtErr;
  }
  // RDMAP §1.1: a message carries at most 2^32 - 1 octets.
  if (e.status == WcStatus::Success && e.sgl.total > UINT32_MAX) e.status = WcStatus::LocLenErr;
  // A Write with Immediate reports its length in 31 bits (wire::ImmediateData).
  if (wr.opcode == WrOpcode::RdmaWriteImm && e.sgl.total >= wire::kImmediateForNextSend)
    e.status = WcStatus::LocLenErr;
  if (op.outbound_read) sq_reads_.fetch_add(1);  // before the caller publishes
  return 0;
}

int Qp::post_recv(const RecvWr& wr) {
  if (cfg_.rq->shared()) return -EINVAL;
  if (wr.num_sge > kMaxSge) return -EINVAL;
  // Both states flushed the RQ on the way here, and no receive lands any more.
  if (const QpState st = state_; st == QpState::Error || st == QpState::Terminate) {
    Completion c{};
    c.wr_id = wr.wr_id;
    c.status = WcStatus::WrFlushErr;
    c.opcode = WcOpcode::Recv;
    c.qp_num = cfg_.qp_num;
    push_cqe(cfg_.recv_cq, c);
    return 0;
  }
  return cfg_.rq->post(wr);
}

int Qp::post_recv_concurrent(const RecvWr& wr) {
  if (cfg_.rq->shared()) return -EINVAL;
  if (wr.num_sge > kMaxSge) return -EINVAL;
  if (const QpState st = state_; st == QpState::Error || st == QpState::Terminate) return -EAGAIN;
  if (const int rc = cfg_.rq->post(wr)) return rc;
  // The RQ's lock orders this post against a flush's drain of it: a drain that ran first came
  // after the state change, and this load sees it.
  const QpState now = state_;
  return now == QpState::Error || now == QpState::Terminate ? -ECANCELED : 0;
}

void Qp::flush_late() {
  const QpState st = state_;
  if (st == QpState::Error || st == QpState::Terminate) flush_all();
}

void Qp::start(const ConnParams& params) {
  params_ = params;
  if (params_.llp == Llp::Sctp) {
    // RFC 5043: no MPA framing (CRC, Markers) and no MPA-negotiated RTR. §9: the maximum DDP
    // Segment size is at least 516 octets.
    params_.crc = false;
    params_.markers_tx = params_.markers_rx = false;
    params_.rtr = RtrType::None;
    if (params_.mulpdu < wire::kSctpMinMaxSegment)
      params_.mulpdu = static_cast<uint32_t>(wire::kSctpMinMaxSegment);
  }
  if (params_.mulpdu < wire::kMinMulpdu) params_.mulpdu = wire::kMinMulpdu;
  if (params_.mulpdu > wire::kMaxMulpdu) params_.mulpdu = wire::kMaxMulpdu;
  if (params_.ord > kMaxOrdIrd) params_.ord = kMaxOrdIrd;
  if (params_.ird > kMaxOrdIrd) params_.ird = kMaxOrdIrd;
  if (params_.llp == Llp::Sctp) {
    sctp_tx_.start(params_.sctp_tx_ssn);
    sctp_rx_.start(params_.sctp_rx_ssn);
    tx_framer_ = &sctp_tx_;
    rx_framer_ = &sctp_rx_;
  } else {
    mpa_tx_.start(params_.crc, params_.markers_tx, params_.mulpdu, !params_.initiator);
    mpa_rx_.start(params_.crc, params_.markers_rx);
    tx_framer_ = &mpa_tx_;
    rx_framer_ = &mpa_rx_;
  }
  for (TxSlot& s : slots_) tx_framer_->prepare(s);
  tx_iov_per_fpdu_ = tx_framer_->max_iovs(kMaxSge);
  tx_out_.iov.assign(kTxSlots * tx_iov_per_fpdu_ + 1024, iovec{});
  rtr_pending_ = params_.initiator && params_.rtr != RtrType::None;
  state_ = QpState::Rts;
  emit(QpEvent::Established);
}

void Qp::close() {
  if (state_ == QpState::Rts) state_ = QpState::Closing;
  if (state_ == QpState::Idle) enter_error(QpEvent::Closed);
}

void Qp::abort() {
  if (state_ == QpState::Error) return;
  // Abortive close: the connection is reset, so unsent bytes are dropped, not detached.
  slots_used_ = 0;
  tx_out_.begin = tx_out_.end = 0;
  tx_out_.batch_bytes = 0;
  detached_.clear();
  state_ = QpState::Error;
  flush_all();
  emit(QpEvent::Closed);
}

void Qp::emit(QpEvent ev) {
  if (cfg_.on_event) cfg_.on_event(ev);
}

void Qp::push_cqe(CompletionQueue* cq, const Completion& c) {
  if (!cq->push(c)) emit(QpEvent::CqOverrun);
}

// RDMAP §5.5 rule 15: operations complete in submission order, so a Send behind an unfinished
// Read waits for it. Unsignaled successes produce no completion; errors always do.
// The entry is freed before its completion is pushed: an application that sees the completion
// may post into the slot at once (a send queue of depth 1 relies on it), and a lock-free poster
// does not wait for this thread.
void Qp::complete_sq() {
  while (sq_head_ != sq_tail_ && sq_at(sq_head_).st == SqSt::Done) {
    const SqEntry& e = sq_at(sq_head_);
    const bool report = (e.wr.flags & kSendSignaled) || e.status != WcStatus::Success;
    Completion c{};
    if (report) {
      c.wr_id = e.wr.wr_id;
      c.status = e.status;
      c.qp_num = cfg_.qp_num;
      const TxOp& op = tx_op(e.wr.opcode);
      c.opcode = op.completion;
      if (c.status == WcStatus::Success || op.outbound_read)
        c.byte_len = static_cast<uint32_t>(e.sgl.total);
    }
    if (tx_op(e.wr.opcode).outbound_read) sq_reads_.fetch_sub(1, std::memory_order_relaxed);
    sq_head_.fetch_add(1, std::memory_order_release);  // e may be reused from here on
    if (report) push_cqe(cfg_.send_cq, c);
  }
}

// The receive WR a partly received Send is landing in (if any) completes with `status`.
void Qp::complete_active_recv(WcStatus status) {
  if (!rx_send_active_) return;
  Completion c{};
  c.wr_id = rx_send_wr_.wr_id;
  c.status = status;
  c.opcode = WcOpcode::Recv;
  c.qp_num = cfg_.qp_num;
  push_cqe(cfg_.recv_cq, c);
  rx_send_active_ = false;
}

// Everything not yet complete is completed with WrFlushErr, in order (RDMAP §5.4: "Completes in
// error all ULP Operations that have not been provided to the DDP layer"; RFC 5041 §6.2.2).
void Qp::flush_all() {
  for (uint32_t i = sq_head_; i != sq_tail_; ++i) {
    SqEntry& e = sq_at(i);
    // A WR already finished keeps its status; everything else is flushed.
    if (e.st != SqSt::Done) e.status = WcStatus::WrFlushErr;
    e.st = SqSt::Done;
  }
  complete_sq();
  sq_tx_ = sq_tail_;
  orq_count_ = 0;
  orq_placed_ = 0;
  irq_count_ = 0;
  tx_kind_ = TxKind::None;
  complete_active_recv(WcStatus::WrFlushErr);
  // An SRQ's WRs belong to the SRQ and survive the QP.
  if (!cfg_.rq->shared()) {
    for (const RecvWr& wr : cfg_.rq->drain()) {
      Completion c{};
      c.wr_id = wr.wr_id;
      c.status = WcStatus::WrFlushErr;
      c.opcode = WcOpcode::Recv;
      c.qp_num = cfg_.qp_num;
      push_cqe(cfg_.recv_cq, c);
    }
  }
}

// Records the first error (RDMAP §7.1 item 24: the first erroneous message is the one captured)
// and moves to Terminate: the Terminate goes out after the FPDU now on the wire, nothing after it
// (RDMAP §5.4).
void Qp::set_terminate(wire::TerminateCause cause, bool from_rx, const IrqEntry* answering) {
  if (term_sent_ || state_ == QpState::Error || state_ == QpState::Idle) return;
  // A Terminate sent after a frame cut short would be read by the peer as the rest of that
  // frame (placed, with CRC off): the stream ends there instead, the peer sees it close inside
  // a frame (RFC 5044 §8), and this side fails as for a broken connection.
  if (!detach_tx()) {
    enter_error(QpEvent::LlpError);
    return;
  }
  wire::TerminateMessage t{};
  t.cause = cause;
  // The headers to send back: those of the segment being received (rx_hdr_len_ is 0 until its
  // control octets were read, and every check that can fail after that runs once all its
  // header octets arrived), or those of an accepted Read or Atomic Request, whose segment is
  // gone: rebuilt from the IRQ entry (untagged, QN 1, its MSN, MO 0). An atomic's RDMA header
  // is never sent back (RFC 7306 §8.1: the Terminated RDMA Header is zero), so the rule's R is
  // only ever asked for a Read Request.
  const bool rx_hdr = from_rx && rx_hdr_len_ != 0;
  const bool read_request =
      (answering && !answering->atomic) ||
      (rx_hdr && !rx_seg_.tagged && rx_opcode_ == static_cast<uint8_t>(wire::Opcode::ReadRequest));
  const wire::TerminateHeaderFlags f = wire::terminate_flags_for(cause, read_request);
  if (f.d && answering) {
    wire::SegmentHeader h;
    h.last = true;
    h.rdmap_control = wire::rdmap_control(answering->atomic ? wire::Opcode::AtomicRequest
                                                            : wire::Opcode::ReadRequest);
    h.qn = wire::kQnReadRequest;
    h.msn = answering->msn;
    t.ddp_header_size = wire::encode_segment_header(t.ddp_header, h);
    t.ddp_segment_length = static_cast<uint16_t>(
        t.ddp_header_size +
        (answering->atomic ? wire::kAtomicRequestHeaderSize : wire::kReadRequestHeaderSize));
    if (f.r) wire::encode_read_request(t.rdma_header, answering->rr);
  } else if (f.d && rx_hdr) {
    t.ddp_header_size = wire::segment_header_size(rx_seg_.tagged);
    t.ddp_segment_length = rx_ulpdu_len_;
    const uint8_t* ddp = rx_hdr_.data();
    std::memcpy(t.ddp_header, ddp, t.ddp_header_size);
    if (f.r)  // a Read Request: rx_hdr_len_ covers its header
      std::memcpy(t.rdma_header, ddp + wire::kUntaggedHeaderSize, wire::kReadRequestHeaderSize);
  }
  t.m = t.d = t.ddp_header_size != 0;  // RDMAP §4.8: M = DDP Segment Length valid, D = header
  t.r = f.r && t.d;
  term_sent_ = t;
  state_ = QpState::Terminate;
  stop_placing();
  flush_all();
  emit(QpEvent::TerminateSent);
}

// Whatever ended the stream (an error found while receiving or while sending, the peer's
// Terminate, the application), nothing more is placed: RFC 5041 §7.1, "MUST silently drop any
// subsequent incoming DDP Segments". The bytes are still read, so that the close is seen, and
// the receive WRs the rest of a message would have landed in are flushed meanwhile.
void Qp::stop_placing() {
  rx_pin_.release();
  rx_drain_ = true;
  rx_framer_->stop();
}

void Qp::enter_error(QpEvent why) {
  if (state_ == QpState::Error) return;
  state_ = QpState::Error;
  stop_placing();
  detach_tx();
  flush_all();
  want_shutdown_ = true;
  emit(why);
}

}  // namespace uiw::engine
