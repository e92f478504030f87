// MPA transmit framing (RFC 5044 §4): each DDP segment becomes an FPDU, ULPDU_Length | ULPDU |
// PAD | CRC, with Markers wherever the stream position puts them, as iovecs that reference the
// payload in place.
#include <algorithm>
#include <cstring>

#include "engine/framer.h"
#include "engine/qp.h"
#include "memory/app_copy.h"
#include "wire/bytes.h"
#include "wire/crc32c.h"
#include "wire/mpa.h"

namespace uiw::engine {

void MpaTx::start(bool crc, bool markers, uint32_t mulpdu, bool responder) {
  crc_on_ = crc;
  markers_ = markers;
  // RFC 5044 §7.1.2: "MPA Responder mode implementations MUST receive and validate at least one
  // FPDU before sending any FPDUs or Markers."
  hold_ = responder;
  // Every payload piece may split once per Marker, plus the Markers themselves.
  markers_per_frame_ = markers ? mulpdu / (wire::kMarkerInterval - wire::kMarkerSize) + 3 : 0;
  pos_ = 0;
}

size_t MpaTx::max_iovs(size_t pieces) const {
  // The length and headers, the pieces, pad, CRC, and per Marker its own iovec and one split.
  return pieces + 4 + 2 * markers_per_frame_;
}

void MpaTx::prepare(TxFrame& f) const {
  f.markers.assign(markers_per_frame_ * wire::kMarkerSize, 0);
}

void MpaTx::begin(TxFrame& f) {
  f.markers_used = 0;
  f.start_pos = pos_;
  fpdu_start_ = pos_;
  crc_ = wire::kCrc32cInit;
}

void MpaTx::add_header(TxFrame& f, size_t hlen, size_t len) {
  wire::store_be16(f.hdr, static_cast<uint16_t>(len));
  append(f, f.hdr, kFramePrefix + hlen, true, false);
}

// The frame so far is one run of octets from f.hdr (its headers, perhaps a small payload copied
// behind them), so what follows can be written there and extend the same iovec. Markers (RFC
// 5044 §4.3) go where the stream position puts them, so a framing with Markers never runs.
bool MpaTx::in_header_run(const TxFrame& f) const {
  return !markers_ && f.iov_count == 1 && out_.iov[out_.end - 1].iov_base == f.hdr;
}

// A payload that fits in the frame is copied behind the headers, so that with PAD and CRC the whole
// FPDU is one iovec: a sendmsg of one iovec costs the kernel less than of three, which is a
// measurable part of a small message's latency. The copy is fault-safe, as every read of
// application memory here.
bool MpaTx::add_payload(TxFrame& f, const uint8_t* p, size_t len, bool app) {
  if (len > 0 && f.bytes + len <= kMaxFrameHeader + kInlinePayload && in_header_run(f)) {
    uint8_t* at = f.hdr + f.bytes;
    if (memory::copy_from_app(at, p, len) != 0) return false;
    return append(f, at, len, true, false);
  }
  return append(f, p, len, true, app);
}

// PAD then CRC (RFC 5044 §4.1). A Marker landing right after the PAD belongs to this FPDU and is
// in its CRC (RFC 5044 §4.4 rule 1). The CRC octets go least significant first (RFC 5044 §4.4,
// Figures 5 and 6).
void MpaTx::end(TxFrame& f, size_t len) {
  const size_t pad = wire::fpdu_pad(len);
  // Behind a header run PAD and CRC extend it; otherwise they come from the trailer, as two
  // iovecs, since a Marker may sit between them.
  const bool run = in_header_run(f);
  uint8_t* pad_at = run ? f.hdr + f.bytes : f.trailer;
  uint8_t* crc_at = run ? pad_at + pad : f.trailer + 4;
  std::memset(pad_at, 0, run ? pad : sizeof f.trailer);
  if (pad) append(f, pad_at, pad, true, false);
  if (markers_ && pos_ % wire::kMarkerInterval == 0) put_marker(f);
  const uint32_t crc = crc_on_ ? wire::crc32c_final(crc_) : 0;
  wire::store_le32(crc_at, crc);
  append(f, crc_at, wire::kCrcSize, false, false);
  ++stats_.tx_fpdus;
  stats_.count(UIW_CNT_TX_FPDUS);
}

// Markers are placed by stream position: rewind past everything that will never be sent.
void MpaTx::drop_after(const TxFrame& f, bool partly_sent) {
  pos_ = f.start_pos + (partly_sent ? f.bytes : 0);
}

// RFC 5044 §4.3: a Marker every 512 octets from SeqStart. One that falls right before the length
// field points 0 (it belongs to this FPDU); any other points back to this FPDU's length field.
// Both are covered by this FPDU's CRC (RFC 5044 §4.4 rules 1-2).
void MpaTx::put_marker(TxFrame& f) {
  const bool at_start = pos_ == fpdu_start_ && f.bytes == 0;
  const uint16_t ptr = at_start ? 0 : static_cast<uint16_t>(pos_ - fpdu_start_);
  uint8_t* m = f.markers.data() + f.markers_used * wire::kMarkerSize;
  ++f.markers_used;
  wire::encode_marker(m, ptr);
  if (crc_on_) crc_ = wire::crc32c_update(crc_, m, wire::kMarkerSize);
  out_.push(f, m, wire::kMarkerSize);
  pos_ += wire::kMarkerSize;
  if (at_start) fpdu_start_ = pos_;
}

// Application memory (app) is folded into the CRC through memory::crc32c_update_from_app, so a
// page unmapped since the work request was posted or the Read Request accepted fails the frame
// instead of raising SIGSEGV; the octets themselves go out from the application's memory, read
// by the kernel in sendmsg (EFAULT, not a signal).
bool MpaTx::append(TxFrame& f, const uint8_t* p, size_t len, bool fold_crc, bool app) {
  while (len > 0) {
    size_t k = len;
    if (markers_) {
      if (pos_ % wire::kMarkerInterval == 0) put_marker(f);
      k = std::min(k, wire::bytes_to_next_marker(pos_));
    }
    if (crc_on_ && fold_crc) {
      if (!app)
        crc_ = wire::crc32c_update(crc_, p, k);
      else if (memory::crc32c_update_from_app(&crc_, p, k, bounce_) != 0)
        return false;
    }
    out_.push(f, p, k);
    pos_ += k;
    p += k;
    len -= k;
  }
  return true;
}

}  // namespace uiw::engine
