// Qp transmit path: send-queue processing, DDP segmentation, Read Responses, Terminate; each
// segment is framed by the connection's framer (framer.h) into iovecs that reference payload in
// place.
#include <algorithm>
#include <cerrno>
#include <cstring>

#include "engine/access_errors.h"
#include "engine/qp.h"
#include "memory/app_copy.h"
#include "wire/bytes.h"

namespace uiw::engine {

namespace {
constexpr size_t kIovMax = 1024;  // IOV_MAX for one sendmsg

wire::Opcode send_opcode(const SendWr& wr) {
  const bool se = wr.flags & kSendSolicited;
  if (wr.opcode == WrOpcode::SendInv) return se ? wire::Opcode::SendSeInv : wire::Opcode::SendInv;
  return se ? wire::Opcode::SendSe : wire::Opcode::Send;
}
}  // namespace

std::span<const iovec> Qp::tx_pending() {
  tx_pins_.clear();
  fill_tx();
  if (!pin_read_sources()) fill_tx();  // the Terminate that replaces what was dropped
  fill_close();
  size_t n = std::min(tx_out_.end - tx_out_.begin, kIovMax);
  // SCTP: one message per call, so the I/O edge keeps message boundaries (RFC 5043 §4).
  if (tx_framer_->frame_per_write() && slots_used_ > 0)
    n = std::min(n, slots_[slot_head_].iov_count);
  return {tx_out_.iov.data() + tx_out_.begin, n};
}

// The framing's own last message (SCTP's Session Terminate), once our side is done.
void Qp::fill_close() {
  if (!want_shutdown_ || slots_used_ != 0) return;
  TxSlot& s = begin_slot(SlotDone::None, 0);
  if (!tx_framer_->build_close(s)) --slots_used_;
}

void Qp::tx_commit(size_t n) {
  tx_pins_.clear();  // the write that read the sources is over
  stats_.tx_bytes += n;
  stats_.count(UIW_CNT_TX_BYTES, n);
  while (n > 0 && slots_used_ > 0) {
    TxSlot& s = slots_[slot_head_];
    iovec& v = tx_out_.iov[tx_out_.begin];
    const size_t k = std::min(n, v.iov_len);
    v.iov_base = static_cast<uint8_t*>(v.iov_base) + k;
    v.iov_len -= k;
    n -= k;
    s.remaining -= k;
    tx_out_.batch_bytes -= k;
    if (v.iov_len == 0) {
      ++tx_out_.begin;
      --s.iov_count;
    }
    if (s.remaining != 0) continue;
    // The whole FPDU was accepted by the LLP: RDMAP §5.5 rule 14, a Send or Write completes
    // once DDP (here: TCP) has taken all of it.
    if (s.done == SlotDone::SqEntry) {
      SqEntry& e = sq_at(s.index);
      if (e.st == SqSt::Sending) e.st = SqSt::Done;
      complete_sq();
    } else if (s.done == SlotDone::Terminate) {
      // RDMAP §6.2.1: close gracefully so the Terminate is delivered.
      state_ = QpState::Error;
      want_shutdown_ = true;
    }
    slot_head_ = (slot_head_ + 1) % kTxSlots;
    --slots_used_;
  }
  if (slots_used_ == 0) tx_out_.begin = tx_out_.end = 0;
}

void Qp::tx_fault() {
  if (state_ == QpState::Error) return;
  if (slots_used_ > 0 && slots_[slot_head_].from_sq) {
    SqEntry& e = sq_at(slots_[slot_head_].index);
    if (e.st != SqSt::Done) {
      e.status = WcStatus::LocProtErr;
      e.st = SqSt::Done;  // kept by the flush that follows
    }
  }
  rx_error(EFAULT);
}

void Qp::fill_tx() {
  if (state_ == QpState::Idle) return;
  while (slots_used_ < kTxSlots && tx_out_.batch_bytes < kTxBatchBytes) {
    if (tx_out_.end + tx_iov_per_fpdu_ > tx_out_.iov.size()) {
      if (tx_out_.begin == 0) break;
      std::memmove(tx_out_.iov.data(), tx_out_.iov.data() + tx_out_.begin,
                   (tx_out_.end - tx_out_.begin) * sizeof(iovec));
      tx_out_.end -= tx_out_.begin;
      tx_out_.begin = 0;
    }
    if (!build_next_fpdu()) break;
  }
  if (state_ == QpState::Closing && slots_used_ == 0 && sq_tx_ == sq_tail_ &&
      sq_head_ == sq_tail_ && irq_count_ == 0 && tx_kind_ == TxKind::None) {
    want_shutdown_ = true;
  }
}

bool Qp::build_next_fpdu() {
  if (state_ == QpState::Error) return false;
  if (state_ == QpState::Terminate) {
    if (term_queued_) return false;
    build_terminate();
    return true;
  }
  // An MPA Responder sends nothing before the peer's first FPDU (RFC 5044 §7.1.2); a local
  // operation at the head of the send queue still runs.
  if (tx_framer_->holding() && !(tx_kind_ == TxKind::None && !rtr_pending_ && irq_count_ == 0 &&
                                 sq_tx_ != sq_tail_ && tx_op(sq_at(sq_tx_).wr.opcode).local))
    return false;
  if (rtr_pending_) {
    build_rtr();
    return true;
  }
  if (tx_kind_ == TxKind::None) {
    // Read Responses go first: they answer the peer's earlier requests, at most IRD of them.
    if (irq_count_ > 0) {
      tx_kind_ = TxKind::Irq;
    } else if (sq_tx_ != sq_tail_) {
      SqEntry& e = sq_at(sq_tx_);
      if (e.status != WcStatus::Success) {
        end_message_in_error(e);
        return true;
      }
      // IBV_SEND_FENCE: wait for every earlier Read (RDMAP §5.5 rule 12's ULP fence).
      if ((e.wr.flags & kSendFence) && orq_count_ > 0) return false;
      // RDMAP §6.1: never exceed the negotiated outbound Read limit (ORD).
      const TxOp& op = tx_op(e.wr.opcode);
      if (op.extension && !params_.rdmap_ext) {
        // Posted before the connection said the peer lacks RFC 7306 (post_send refuses it
        // after): never sent, the peer would see an opcode it does not know.
        e.status = WcStatus::LocQpOpErr;
        end_message_in_error(e);
        return true;
      }
      if (op.outbound_read && orq_count_ >= std::max<uint32_t>(params_.ord, 1)) return false;
      e.st = SqSt::Sending;
      tx_kind_ = TxKind::Sq;
      tx_offset_ = 0;
      if (op.untagged_send) e.msn = tx_msn_[wire::kQnSend]++;  // RFC 5041 §4.3: +1, wraps
    } else {
      return false;
    }
  }
  if (tx_kind_ == TxKind::Irq) return build_irq_segment();
  SqEntry& e = sq_at(sq_tx_);
  (this->*tx_op(e.wr.opcode).build)(e);
  return true;
}

Qp::TxSlot& Qp::begin_slot(SlotDone done, uint32_t index) {
  TxSlot& s = slots_[(slot_head_ + slots_used_) % kTxSlots];
  ++slots_used_;
  s.remaining = 0;
  s.bytes = 0;
  s.iov_count = 0;
  s.done = done;
  s.index = index;
  s.from_sq = false;
  s.read_response = false;
  tx_framer_->begin(s);
  return s;
}

// Takes back the slot begin_slot() just opened, before anything of it was handed out.
void Qp::unbuild_slot(TxSlot& s) {
  tx_out_.end -= s.iov_count;
  tx_out_.batch_bytes -= s.bytes;
  tx_framer_->unbuild(s);
  --slots_used_;
}

// The send queue's operations, indexed by WrOpcode; the wire side of each RDMAP opcode is
// wire::kOpcodeTable's, the receive side kRxOps's.
constexpr std::array<Qp::TxOp, 10> Qp::kTxOps = {{
    // Send: RDMAP §5.3, untagged on QN 0.
    {&Qp::build_send_segment, WcOpcode::Send, 0, true, true, false, false},
    // Send with Invalidate: the same, naming the peer's STag to invalidate (§5.3).
    {&Qp::build_send_segment, WcOpcode::Send, 0, true, true, false, false},
    // RDMA Write: RDMAP §5.1, tagged, into the peer's advertised buffer.
    {&Qp::build_write_segment, WcOpcode::RdmaWrite, 0, true, false, false, false},
    // RDMA Read: RDMAP §5.2, a Read Request; the response writes the local sink (local write).
    {&Qp::build_read_request, WcOpcode::RdmaRead, memory::kLocalWrite, false, false, true, false},
    // Atomics: RFC 7306 §5.2.1, an Atomic Request on QN 1 under ORD like a Read; the Atomic
    // Response's original value lands in the local buffer (local write).
    {&Qp::build_atomic_request, WcOpcode::AtomicFetchAdd, memory::kLocalWrite, false, false, true,
     true},
    {&Qp::build_atomic_request, WcOpcode::AtomicCmpSwap, memory::kLocalWrite, false, false, true,
     true},
    // Write with Immediate: the Write, then an Immediate Data message (RFC 7306 §6: completed at
    // the peer once the Write is placed); Send with Immediate: an Immediate Data message the
    // Send that follows carries (wire::ImmediateData). Each takes its own MSNs on QN 0.
    {&Qp::build_write_imm_segment, WcOpcode::RdmaWrite, 0, true, false, false, true},
    {&Qp::build_send_imm_segment, WcOpcode::Send, 0, true, false, false, true},
    // Memory window bind and local invalidation: nothing on the wire; done when their turn in
    // the send queue comes, so they take effect after every WR posted before them.
    {&Qp::run_bind_mw, WcOpcode::BindMw, 0, false, false, false, false, true},
    {&Qp::run_local_inv, WcOpcode::LocalInv, 0, false, false, false, false, true},
}};
static_assert(static_cast<size_t>(WrOpcode::Send) == 0 &&
                  static_cast<size_t>(WrOpcode::SendInv) == 1 &&
                  static_cast<size_t>(WrOpcode::RdmaWrite) == 2 &&
                  static_cast<size_t>(WrOpcode::RdmaRead) == 3 &&
                  static_cast<size_t>(WrOpcode::AtomicFetchAdd) == 4 &&
                  static_cast<size_t>(WrOpcode::AtomicCmpSwap) == 5 &&
                  static_cast<size_t>(WrOpcode::RdmaWriteImm) == 6 &&
                  static_cast<size_t>(WrOpcode::SendImm) == 7 &&
                  static_cast<size_t>(WrOpcode::BindMw) == 8 &&
                  static_cast<size_t>(WrOpcode::LocalInv) == 9,
              "kTxOps is indexed by WrOpcode");

// RDMAP §4.4 / §5.2.1: one untagged segment on QN 1, never any payload. The sink STag names this
// Read's scatter list, private to this QP; the response is matched to the head of the
// outstanding-read queue (RDMAP §5.5 rule 20: responses come in request order).
void Qp::build_read_request(SqEntry& e) {
  if (++next_sink_stag_ == 0) ++next_sink_stag_;
  e.sink_stag = next_sink_stag_;
  uint8_t rr[wire::kReadRequestHeaderSize];
  wire::encode_read_request(
      rr, {e.sink_stag, 0, static_cast<uint32_t>(e.sgl.total), e.wr.remote_stag, e.wr.remote_addr});
  build_header_only(wire::Opcode::ReadRequest, wire::kQnReadRequest, rr);
  await_response(e);
}

// A request is out: its WR waits at the tail of the outstanding queue for the response.
void Qp::await_response(SqEntry& e) {
  e.st = SqSt::AwaitResponse;
  orq_[(orq_head_ + orq_count_) % orq_.size()] = sq_tx_;
  ++orq_count_;
  ++sq_tx_;
  tx_kind_ = TxKind::None;
}

// A message of one untagged segment that is all headers (RDMAP's own requests and responses):
// the DDP header on queue qn with its next MSN, then the RDMAP header the caller encoded.
void Qp::build_header_only(wire::Opcode op, uint32_t qn, std::span<const uint8_t> rdmap_header,
                           SlotDone done, uint32_t index) {
  wire::SegmentHeader h{};
  h.last = true;
  h.rdmap_control = wire::rdmap_control(op);
  h.qn = qn;
  h.msn = tx_msn_[qn]++;
  TxSlot& s = begin_slot(done, index);
  const size_t hlen = wire::encode_segment_header(s.hdr + kFramePrefix, h);
  std::memcpy(s.hdr + kFramePrefix + hlen, rdmap_header.data(), rdmap_header.size());
  const size_t ulpdu = hlen + rdmap_header.size();
  tx_framer_->add_header(s, ulpdu, ulpdu);
  tx_framer_->end(s, ulpdu);
}

// RFC 7306 §5.2.1: one untagged segment on QN 1 (the Read Request queue and its MSNs), no
// payload. Verbs' FetchAdd is a plain 64-bit add (Add Mask 0: no field boundaries, §5.1.1) and
// its CmpSwap compares and swaps all 64 bits (both masks all ones, §5.1.2). The response is
// matched to the head of the outstanding queue, which it shares with Reads (§7: responses come
// in request order); the Request Identifier is checked against it.
void Qp::build_atomic_request(SqEntry& e) {
  e.request_id = sq_tx_;
  wire::AtomicRequestHeader ar{};
  ar.request_id = e.request_id;
  ar.stag = e.wr.remote_stag;
  ar.to = e.wr.remote_addr;
  if (e.wr.opcode == WrOpcode::AtomicFetchAdd) {
    ar.aopcode = static_cast<uint8_t>(wire::AtomicOpcode::FetchAdd);
    ar.data = e.wr.compare_add;
    ar.compare_mask = ~0ull;  // §5.2.1: unused by FetchAdd, sent as all ones
  } else {
    ar.aopcode = static_cast<uint8_t>(wire::AtomicOpcode::CmpSwap);
    ar.data = e.wr.swap;
    ar.data_mask = ~0ull;
    ar.compare = e.wr.compare_add;
    ar.compare_mask = ~0ull;
  }
  uint8_t hdr[wire::kAtomicRequestHeaderSize];
  wire::encode_atomic_request(hdr, ar);
  build_header_only(wire::Opcode::AtomicRequest, wire::kQnReadRequest, hdr);
  await_response(e);
}

// An Immediate Data message (RFC 7306 §6.2) for e; completes e once the LLP took it, if it
// comes last.
void Qp::build_immediate(SqEntry& e, uint32_t info, bool completes) {
  const bool se = e.wr.flags & kSendSolicited;
  uint8_t data[wire::kImmediateDataSize];
  wire::encode_immediate(data, {e.wr.imm_data, info});
  build_header_only(se ? wire::Opcode::ImmediateDataSe : wire::Opcode::ImmediateData, wire::kQnSend,
                    data, completes ? SlotDone::SqEntry : SlotDone::None, sq_tx_);
  e.imm_out = true;
  if (completes) {
    ++sq_tx_;
    tx_kind_ = TxKind::None;
  }
}

void Qp::build_write_imm_segment(SqEntry& e) {
  if (!e.imm_out) {
    wire::SegmentHeader h{};
    h.tagged = true;
    h.rdmap_control = wire::rdmap_control(wire::Opcode::RdmaWrite);
    h.stag = e.wr.remote_stag;
    h.to = e.wr.remote_addr + tx_offset_;
    build_data_segment(e, h, params_.mulpdu - wire::kTaggedHeaderSize, false);
    return;
  }
  // The Write's length fits: RDMAP §1.1 bounds a message below 2^32, and fill_sq_entry below
  // kImmediateForNextSend.
  build_immediate(e, static_cast<uint32_t>(e.sgl.total), true);
}

// The Immediate Data first, then the Send (its MSN the next one): the receiver holds the
// immediate for the Send, whose receive completes with it.
void Qp::build_send_imm_segment(SqEntry& e) {
  if (!e.imm_out) {
    build_immediate(e, wire::kImmediateForNextSend, false);
    e.msn = tx_msn_[wire::kQnSend]++;
    return;
  }
  wire::SegmentHeader h{};
  h.rdmap_control = wire::rdmap_control((e.wr.flags & kSendSolicited) ? wire::Opcode::SendSe
                                                                      : wire::Opcode::Send);
  h.qn = wire::kQnSend;
  h.msn = e.msn;
  h.mo = static_cast<uint32_t>(tx_offset_);
  build_data_segment(e, h, params_.mulpdu - wire::kUntaggedHeaderSize);
}

// A local operation's WR is done once it ran; a failed one ends the stream as a WR that could
// not be sent does (RDMAP §7.1 item 21: local catastrophic Terminate).
void Qp::finish_local_op(SqEntry& e, WcStatus status) {
  if (status != WcStatus::Success) {
    e.status = status;
    end_message_in_error(e);
    return;
  }
  e.st = SqSt::Done;
  ++sq_tx_;
  tx_kind_ = TxKind::None;
  complete_sq();
}

// A type 2 window is bound to this QP's stream (the registry's stream is the QP number).
void Qp::run_bind_mw(SqEntry& e) {
  const SendWr::Bind& b = e.wr.bind;
  memory::Stag bound = 0;
  const int rc =
      cfg_.registry->bind_mw(b.mw, b.key, b.mr, b.addr, b.length, b.access, cfg_.qp_num, &bound);
  finish_local_op(e, rc == 0 ? WcStatus::Success : WcStatus::MwBindErr);
}

void Qp::run_local_inv(SqEntry& e) {
  const int rc = cfg_.registry->invalidate_local(e.wr.invalidate_stag);
  finish_local_op(e, rc == 0 ? WcStatus::Success : WcStatus::LocProtErr);
}

void Qp::build_write_segment(SqEntry& e) {
  wire::SegmentHeader h{};
  h.tagged = true;
  h.rdmap_control = wire::rdmap_control(wire::Opcode::RdmaWrite);
  h.stag = e.wr.remote_stag;
  h.to = e.wr.remote_addr + tx_offset_;  // RFC 5041 §5.2: TO of this segment's first octet
  build_data_segment(e, h, params_.mulpdu - wire::kTaggedHeaderSize);
}

void Qp::build_send_segment(SqEntry& e) {
  wire::SegmentHeader h{};
  h.rdmap_control = wire::rdmap_control(send_opcode(e.wr));
  h.qn = wire::kQnSend;
  h.msn = e.msn;
  h.mo = static_cast<uint32_t>(tx_offset_);
  if (e.wr.opcode == WrOpcode::SendInv) h.inval_stag = e.wr.invalidate_stag;
  build_data_segment(e, h, params_.mulpdu - wire::kUntaggedHeaderSize);
}

// The next segment of a Write or Send: RFC 5041 §5.2, no larger than MULPDU (room is what its
// header leaves for payload); the L segment is posted last (§4.1).
void Qp::build_data_segment(SqEntry& e, wire::SegmentHeader& h, size_t room, bool ends_wr) {
  const uint64_t total = e.sgl.total;
  const uint64_t chunk = std::min<uint64_t>(total - tx_offset_, room);
  h.last = tx_offset_ + chunk == total;
  TxSlot& s = begin_slot(h.last && ends_wr ? SlotDone::SqEntry : SlotDone::None, sq_tx_);
  s.from_sq = true;
  const size_t hlen = wire::encode_segment_header(s.hdr + kFramePrefix, h);
  const size_t ulpdu = hlen + chunk;
  tx_framer_->add_header(s, hlen, ulpdu);
  for (uint64_t done = 0; done < chunk;) {
    const ResolvedSge piece = e.sgl.at(tx_offset_ + done);
    const size_t k = std::min<uint64_t>(piece.len, chunk - done);
    if (!tx_framer_->add_payload(s, piece.ptr, k, true)) {
      // A page of the source could not be read: registration pins nothing, so the
      // application may unmap a posted buffer.
      unbuild_slot(s);
      e.status = WcStatus::LocProtErr;
      end_message_in_error(e);
      return;
    }
    done += k;
  }
  tx_framer_->end(s, ulpdu);
  tx_offset_ += chunk;
  if (h.last && !ends_wr) {
    e.imm_out = true;  // the Immediate Data that follows ends it
  } else if (h.last) {
    ++sq_tx_;
    tx_kind_ = TxKind::None;
  }
}

// RDMAP §7.1 item 21: an error found while creating a message (e.status) sends a Terminate
// instead of the message, with no copied headers; the work request keeps its status.
void Qp::end_message_in_error(SqEntry& e) {
  e.st = SqSt::Done;  // kept by the flush that follows
  ++sq_tx_;
  tx_kind_ = TxKind::None;
  set_terminate({wire::TermLayer::Rdma, wire::term::kRdmaLocalCatastrophic, 0}, false);
}

// RDMAP §5.2.2: the response is tagged, addressed to the requester's sink STag and TO copied
// from the request without interpretation; segments at increasing TO.
bool Qp::build_irq_segment() {
  IrqEntry& q = irq_[irq_head_ % irq_.size()];
  if (q.atomic) return build_atomic_response(q);
  wire::SegmentHeader h{};
  h.tagged = true;
  h.rdmap_control = wire::rdmap_control(wire::Opcode::ReadResponse);
  h.stag = q.rr.sink_stag;
  h.to = q.rr.sink_to + q.sent;
  const uint32_t chunk =
      std::min<uint32_t>(q.rr.size - q.sent, params_.mulpdu - wire::kTaggedHeaderSize);
  h.last = q.sent + chunk == q.rr.size;
  // Validated again for every segment (RFC 5041 §8.3.1(6): once deregistered, a region is no
  // longer read for the peer). The pin covers building the segment; the octets are read by the
  // kernel when sent (see append).
  memory::Registry::Pin pin;
  if (chunk) {
    pin = cfg_.registry->pin(q.rr.src_stag, cfg_.pd, cfg_.qp_num, memory::kRemoteRead,
                             q.rr.src_to + q.sent, chunk);
    if (!pin.ok()) {
      set_terminate(rdmap_protection_error(pin.mapping().result), false, &q);
      return true;
    }
  }
  TxSlot& s = begin_slot(SlotDone::None, 0);
  s.read_response = chunk != 0;
  s.request = q;
  s.source_to = q.rr.src_to + q.sent;
  s.source = pin.mapping().host;
  s.source_len = chunk;
  const size_t hlen = wire::encode_segment_header(s.hdr + kFramePrefix, h);
  tx_framer_->add_header(s, hlen, hlen + chunk);
  if (chunk && !tx_framer_->add_payload(s, pin.mapping().host, chunk, true)) {
    pin.release();  // not held across the completions and events of the failure
    unbuild_slot(s);
    set_terminate(rdmap_protection_error(memory::AccessResult::AccessDenied), false, &q);
    return true;
  }
  tx_framer_->end(s, hlen + chunk);
  q.sent += chunk;
  if (h.last) {
    irq_head_ = (irq_head_ + 1) % irq_.size();
    --irq_count_;
    tx_kind_ = TxKind::None;
  }
  return true;
}

// RFC 5041 §8.3.1(6): once deregistered, a region is no longer read for the peer. The kernel
// reads a Read Response's payload from the region when the write carrying it runs, which a peer
// that stops reading delays at will, so each write validates and pins the sources again. A source
// gone since its segment was built ends the stream with the Terminate a Read of it gets when
// built (RDMAP §7.2), every segment not yet on the wire dropped; if it was partly on the wire
// already, the stream ends inside it (detach_tx, set_terminate).
bool Qp::pin_read_sources() {
  for (size_t i = 0; i < slots_used_; ++i) {
    const TxSlot& s = slots_[(slot_head_ + i) % kTxSlots];
    if (!s.read_response) continue;
    memory::Registry::Pin pin;
    const memory::AccessResult why = pin_source(s, &pin);
    if (why == memory::AccessResult::Ok) {
      tx_pins_.push_back(std::move(pin));
      continue;
    }
    const IrqEntry request = s.request;  // the slot goes with the frames set_terminate drops
    tx_pins_.clear();  // no Pin is held across the completions and events that follow
    set_terminate(rdmap_protection_error(why), false, &request);
    return false;
  }
  return true;
}

// A Read Response segment's source, pinned where the segment was built from (Ok), or why not:
// deregistered, invalidated, or reregistered to other memory (its iovecs point at the old).
memory::AccessResult Qp::pin_source(const TxSlot& s, memory::Registry::Pin* out) const {
  *out = cfg_.registry->pin(s.request.rr.src_stag, cfg_.pd, cfg_.qp_num, memory::kRemoteRead,
                            s.source_to, s.source_len);
  if (!out->ok()) return out->mapping().result;
  if (out->mapping().host == s.source) return memory::AccessResult::Ok;
  out->release();
  return memory::AccessResult::AccessDenied;
}

// RFC 7306 §5.2.2: the atomic is performed now, when its turn to be answered came (§7: after
// every earlier Read's response was generated, i.e. once the LLP took their octets, which the
// kernel reads from the region only then), and answered on QN 3 with the target's original
// value. The target is checked again (deregistered since delivery: RDMAP §7.2 as for a Read).
// The update is one atomic instruction on the application's memory (atomic against every other
// atomic, §5.3, and every CPU), fault-safe: a target unmapped or made read-only meanwhile is a
// protection error on the stream, not a signal.
bool Qp::build_atomic_response(IrqEntry& q) {
  for (size_t i = 0; i < slots_used_; ++i)
    if (slots_[(slot_head_ + i) % kTxSlots].read_response) return false;  // tx_commit resumes
  const wire::AtomicRequestHeader& ar = q.ar;
  memory::Registry::Pin pin = cfg_.registry->pin(ar.stag, cfg_.pd, cfg_.qp_num,
                                                 memory::kRemoteAtomic, ar.to, sizeof(uint64_t));
  if (!pin.ok()) {
    set_terminate(rdmap_protection_error(pin.mapping().result), false, &q);
    return true;
  }
  auto* target = reinterpret_cast<uint64_t*>(pin.mapping().host);
  uint64_t original = 0;
  int rc;
  if (ar.aopcode == static_cast<uint8_t>(wire::AtomicOpcode::FetchAdd)) {
    rc = memory::atomic_update_app(target, &original, [&](uint64_t v) {
      return wire::atomic_fetch_add_result(v, ar.data, ar.data_mask);
    });
  } else {
    rc = memory::atomic_update_app(target, &original, [&](uint64_t v) {
      return wire::atomic_cmp_swap_result(v, ar.compare, ar.compare_mask, ar.data, ar.data_mask);
    });
  }
  pin.release();
  if (rc != 0) {
    set_terminate(rdmap_protection_error(memory::AccessResult::AccessDenied), false, &q);
    return true;
  }
  uint8_t hdr[wire::kAtomicResponseHeaderSize];
  wire::encode_atomic_response(hdr, {ar.request_id, original});
  build_header_only(wire::Opcode::AtomicResponse, wire::kQnAtomicResponse, hdr);
  irq_head_ = (irq_head_ + 1) % irq_.size();
  --irq_count_;
  tx_kind_ = TxKind::None;
  return true;
}

// RDMAP §5.4: untagged, QN 2, one message; nothing is sent after it.
void Qp::build_terminate() {
  wire::SegmentHeader h{};
  h.last = true;
  h.rdmap_control = wire::rdmap_control(wire::Opcode::Terminate);
  h.qn = wire::kQnTerminate;
  h.msn = tx_msn_[wire::kQnTerminate]++;
  const size_t body = wire::encode_terminate(term_body_, *term_sent_);
  stats_.count(terminate_counter(term_sent_->cause.layer, true));
  TxSlot& s = begin_slot(SlotDone::Terminate, 0);
  const size_t hlen = wire::encode_segment_header(s.hdr + kFramePrefix, h);
  tx_framer_->add_header(s, hlen, hlen + body);
  tx_framer_->add_payload(s, term_body_.data(), body, false);
  tx_framer_->end(s, hlen + body);
  term_queued_ = true;
}

// RFC 6581 peer-to-peer mode: the initiator's first FPDU is the negotiated zero-length RTR
// message, after which the responder may send.
// RFC 6581 §5: the zero-length RTR message. Its STags are never checked (RFC 5041 §5.2 for a
// zero-length tagged segment, RFC 5040 §5.2.1 for a zero-size Read), but hardware peers drop
// segments naming STag 0, the reserved privileged STag; siw names 1 as well.
constexpr uint32_t kRtrStag = 1;

void Qp::build_rtr() {
  wire::SegmentHeader h{};
  h.last = true;
  size_t extra = 0;
  TxSlot& s = begin_slot(SlotDone::None, 0);
  switch (params_.rtr) {
    case RtrType::Write:
      h.tagged = true;
      h.rdmap_control = wire::rdmap_control(wire::Opcode::RdmaWrite);
      h.stag = kRtrStag;
      break;
    case RtrType::Read: {
      h.rdmap_control = wire::rdmap_control(wire::Opcode::ReadRequest);
      h.qn = wire::kQnReadRequest;
      h.msn = tx_msn_[wire::kQnReadRequest]++;
      wire::ReadRequestHeader rr{};
      rr.src_stag = kRtrStag;  // the Data Source's STag, as siw; our sink STag 0 gets no data
      wire::encode_read_request(s.hdr + kFramePrefix + wire::kUntaggedHeaderSize, rr);
      extra = wire::kReadRequestHeaderSize;
      rtr_read_outstanding_ = true;
      break;
    }
    case RtrType::Send:
    case RtrType::None:
      h.rdmap_control = wire::rdmap_control(wire::Opcode::Send);
      h.qn = wire::kQnSend;
      h.msn = tx_msn_[wire::kQnSend]++;
      break;
  }
  const size_t ulpdu = wire::encode_segment_header(s.hdr + kFramePrefix, h) + extra;
  tx_framer_->add_header(s, ulpdu, ulpdu);
  tx_framer_->end(s, ulpdu);
  rtr_pending_ = false;
}

// After an error only the FPDU already partly on the wire may continue (cutting it would break
// the framing the peer needs to read our Terminate). Its unsent rest is copied into the Qp so the
// flushed work requests no longer reference user memory; unstarted FPDUs are dropped. The copy
// is fault-safe: a source the application unmapped meanwhile leaves the FPDU cut short (the
// peer then sees the stream end inside it), never a signal.
bool Qp::detach_tx() {
  tx_kind_ = TxKind::None;
  if (slots_used_ == 0) {
    tx_pins_.clear();
    return true;
  }
  TxSlot& h = slots_[slot_head_];
  const bool partly_sent = h.remaining != h.bytes;
  tx_framer_->drop_after(h, partly_sent);
  std::vector<uint8_t> rest;
  if (partly_sent) {
    // A Read Response's source is read only while it still holds the region (RFC 5041
    // §8.3.1(6)); once gone, the frame cannot be finished.
    memory::Registry::Pin source;
    if (!h.read_response || pin_source(h, &source) == memory::AccessResult::Ok) {
      rest.resize(h.remaining);
      size_t at = 0;
      for (size_t i = 0; i < h.iov_count; ++i) {
        const iovec& v = tx_out_.iov[tx_out_.begin + i];
        if (memory::copy_from_app(rest.data() + at, v.iov_base, v.iov_len) != 0) {
          rest.clear();
          break;
        }
        at += v.iov_len;
      }
    }
  }
  tx_pins_.clear();
  h.read_response = false;
  slots_used_ = 0;
  tx_out_.begin = tx_out_.end = 0;
  tx_out_.batch_bytes = 0;
  if (rest.empty()) return !partly_sent;
  detached_.swap(rest);
  ++slots_used_;
  h.done = SlotDone::None;
  h.from_sq = false;  // the rest is the Qp's own copy now
  h.iov_count = 1;
  h.remaining = h.bytes = detached_.size();
  tx_out_.iov[tx_out_.end++] = {detached_.data(), detached_.size()};
  tx_out_.batch_bytes = detached_.size();
  return true;
}

}  // namespace uiw::engine
