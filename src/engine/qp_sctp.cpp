// Qp transmit framing for DDP over SCTP (RFC 5043): each DDP segment travels as one SCTP message
// (a DDP Segment Chunk, PPID 16) led by a DDP-SSN instead of the MPA length, with no pad, CRC or
// markers (SCTP's own CRC32c covers integrity, RFC 5041 §3 item 6): each slot's two leading
// header octets, reserved for the MPA ULPDU_Length, carry the DDP-SSN; end_slot() adds no
// trailer; tx_pending() hands out one slot per call. Receiving is sctp_rx.cpp's.
#include "engine/qp.h"
#include "wire/bytes.h"
#include "wire/sctp.h"

namespace uiw::engine {

void Qp::sctp_start() {
  params_.crc = false;
  params_.markers_tx = params_.markers_rx = false;
  params_.rtr = RtrType::None;
  // RFC 5043 §9: the maximum DDP Segment size is at least 516 octets.
  if (params_.mulpdu < wire::kSctpMinMaxSegment)
    params_.mulpdu = static_cast<uint32_t>(wire::kSctpMinMaxSegment);
  sctp_tx_ssn_ = params_.sctp_tx_ssn;
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

}  // namespace uiw::engine
