// SCTP transmit framing (RFC 5043): each DDP segment travels as one SCTP message, a DDP Segment
// Chunk (PPID 16) led by a DDP-SSN, with no pad, CRC or Markers (SCTP's own CRC32c covers
// integrity, RFC 5041 §3 item 6); the Qp hands the LLP one frame per write.
#include "engine/framer.h"
#include "engine/qp.h"
#include "wire/bytes.h"
#include "wire/sctp.h"

namespace uiw::engine {

void SctpTx::start(uint16_t tx_ssn) {
  ssn_ = tx_ssn;
  close_built_ = false;
}

void SctpTx::add_header(TxFrame& f, size_t hlen, size_t) {
  out_.push(f, f.hdr, kFramePrefix + hlen);
}

// The payload is read by the kernel in sendmsg: a page that vanished is EFAULT, not a signal.
bool SctpTx::add_payload(TxFrame& f, const uint8_t* p, size_t len, bool) {
  out_.push(f, p, len);
  return true;
}

// RFC 5043 §5.2.1: every chunk carries the DDP-SSN "the SCTP Stream Sequence Number (SSN) would
// have been assigned had ordered SCTP Payload Data Chunks been used": +1 per message, no gaps.
// The header iovec already points at f.hdr, so the octets are filled in place.
void SctpTx::end(TxFrame& f, size_t) {
  wire::store_be16(f.hdr, ssn_++);
  ++stats_.tx_fpdus;
  stats_.count(UIW_CNT_TX_FPDUS);
}

// Frames dropped unsent give their DDP-SSNs back: the next chunk (a Terminate) must follow the
// last one sent without a gap, or the peer would hold it for the missing ones (§10).
void SctpTx::drop_after(const TxFrame& f, bool partly_sent) {
  ssn_ = static_cast<uint16_t>(wire::load_be16(f.hdr) + (partly_sent ? 1 : 0));
}

// RFC 5043 §6.2: "At least one side MUST send a DDP Stream Terminate"; it is the last chunk of
// our side of the session (after any RDMAP Terminate, which is simply another DDP Segment), sent
// once everything before it was accepted, in place of a TCP FIN. Function Code 4, no Private
// Data (§5.2.3).
bool SctpTx::build_close(TxFrame& f) {
  if (close_built_) return false;
  close_built_ = true;
  const size_t n = wire::encode_session_control({f.hdr, sizeof f.hdr},
                                                {ssn_++, wire::SessionFunction::Terminate, {}});
  out_.push(f, f.hdr, n);
  return true;
}

}  // namespace uiw::engine
