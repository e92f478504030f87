#include "wire/mpa.h"

#include <algorithm>
#include <cstring>

#include "wire/bytes.h"
#include "wire/crc32c.h"

namespace uiw::wire {

static_assert(fpdu_pad(0) == 2 && fpdu_pad(1) == 1 && fpdu_pad(2) == 0 && fpdu_pad(3) == 3);
static_assert(fpdu_size(42) == 48, "MPA Figure 5: 42-octet ULPDU, no pad");
static_assert(bytes_to_next_marker(0) == 0 && bytes_to_next_marker(1) == 511);

uint32_t mulpdu_for_emss(uint32_t emss, bool markers) {
  // RFC 5044 §4.5; the marker formula accounts for the worst-case number of Markers.
  uint64_t overhead = 6 + emss % 4;
  if (markers) overhead += 4 * ((uint64_t{emss} + kMarkerInterval - 1) / kMarkerInterval);
  uint64_t m = emss > overhead ? emss - overhead : 0;
  // RFC 5044 §4.5: "MUST NOT shrink the MULPDU below 128"; §3: range 128..64768 inclusive.
  m = std::clamp<uint64_t>(m, kMinMulpdu, kMaxMulpdu);
  return static_cast<uint32_t>(m);
}

void encode_marker(uint8_t* out4, uint16_t fpduptr) {
  // RFC 5044 §4.2: RESERVED MUST be zero; the two low FPDUPTR bits MUST be zero on transmit.
  store_be16(out4, 0);
  store_be16(out4 + 2, static_cast<uint16_t>(fpduptr & ~uint16_t{3}));
}

uint16_t decode_marker_fpduptr(const uint8_t* in4) {
  // RFC 5044 §4.2: RESERVED ignored; receivers "MUST always treat these [two bits] as zero".
  return static_cast<uint16_t>(load_be16(in4 + 2) & ~uint16_t{3});
}

// Logical (marker-free) FPDU octets: length field + ULPDU + PAD ("body", CRC-covered) + CRC.
static size_t fpdu_body_size(size_t ulpdu_len) {
  return kUlpduLengthSize + ulpdu_len + fpdu_pad(ulpdu_len);
}

// A Marker precedes logical octet j when the wire position reaches a multiple of 512 there
// (RFC 5044 §4.3). After the last CRC octet no Marker belongs to this FPDU.
size_t fpdu_marker_count(uint64_t stream_pos, size_t ulpdu_len, bool markers) {
  if (!markers) return 0;
  size_t remaining = fpdu_size(ulpdu_len);
  size_t count = 0;
  uint64_t p = stream_pos;
  while (remaining > 0) {
    size_t d = bytes_to_next_marker(p);
    if (d == 0) {
      ++count;
      p += kMarkerSize;
      continue;
    }
    size_t step = std::min(d, remaining);
    p += step;
    remaining -= step;
  }
  return count;
}

size_t fpdu_size_with_markers(uint64_t stream_pos, size_t ulpdu_len, bool markers) {
  return fpdu_size(ulpdu_len) + kMarkerSize * fpdu_marker_count(stream_pos, ulpdu_len, markers);
}

namespace {

// Writes the logical octets of one FPDU into `out`, inserting Markers, and runs the CRC over
// everything written while `covered` is set.
class MarkedWriter {
 public:
  MarkedWriter(uint8_t* out, uint64_t pos, bool markers)
      : out_(out), pos_(pos), markers_(markers) {}

  // A Marker due right before the length field carries FPDUPTR 0 and belongs to this FPDU and
  // its CRC (RFC 5044 §4.3, §4.4 rule 2).
  void start_header() {
    if (markers_ && bytes_to_next_marker(pos_) == 0) emit_marker();
    header_started_ = true;
    header_pos_ = pos_;
  }
  // Emits n logical octets (src == nullptr: zeros), inserting Markers where due.
  void emit(const uint8_t* src, size_t n) {
    while (n > 0) {
      if (markers_ && bytes_to_next_marker(pos_) == 0) emit_marker();
      size_t step = n;
      if (markers_) step = std::min(step, bytes_to_next_marker(pos_));
      uint8_t* dst = out_ + written_;
      if (src != nullptr) {
        std::memcpy(dst, src, step);
        src += step;
      } else {
        std::memset(dst, 0, step);
      }
      if (covered_) crc_ = crc32c_update(crc_, dst, step);
      written_ += step;
      pos_ += step;
      n -= step;
    }
  }
  // A Marker right after the PAD belongs to this FPDU and its CRC (RFC 5044 §4.4 rule 1).
  void end_covered_part() {
    if (markers_ && bytes_to_next_marker(pos_) == 0) emit_marker();
    covered_ = false;
  }
  uint32_t crc() const { return crc32c_final(crc_); }
  size_t written() const { return written_; }

 private:
  void emit_marker() {
    // Inside the FPDU the Marker points back to the length field (RFC 5044 §4.3).
    uint16_t ptr = 0;
    if (header_started_) ptr = static_cast<uint16_t>(pos_ - header_pos_);
    encode_marker(out_ + written_, ptr);
    if (covered_) crc_ = crc32c_update(crc_, out_ + written_, kMarkerSize);
    written_ += kMarkerSize;
    pos_ += kMarkerSize;
  }

  uint8_t* out_;  // Unowned.
  uint64_t pos_;
  const bool markers_;
  size_t written_ = 0;
  bool covered_ = true;
  bool header_started_ = false;
  uint64_t header_pos_ = 0;
  uint32_t crc_ = kCrc32cInit;
};

}  // namespace

size_t encode_fpdu(std::span<uint8_t> out, uint64_t stream_pos, std::span<const uint8_t> ulpdu,
                   bool crc, bool markers) {
  if (ulpdu.size() > kMaxUlpduLength) return 0;
  const size_t total = fpdu_size_with_markers(stream_pos, ulpdu.size(), markers);
  if (out.size() < total) return 0;

  MarkedWriter w(out.data(), stream_pos, markers);
  uint8_t len[kUlpduLengthSize];
  store_be16(len, static_cast<uint16_t>(ulpdu.size()));
  w.start_header();
  w.emit(len, sizeof len);
  w.emit(ulpdu.data(), ulpdu.size());
  w.emit(nullptr, fpdu_pad(ulpdu.size()));  // RFC 5044 §4.1: PAD MUST be zero
  w.end_covered_part();
  uint8_t crc_field[kCrcSize] = {0, 0, 0, 0};
  // RFC 5044 §4.4 / RFC 3720: CRC32c, least-significant octet first on the wire.
  if (crc) store_le32(crc_field, w.crc());
  w.emit(crc_field, sizeof crc_field);
  return w.written();
}

// ---------------------------------------------------------------------------------------------
// FpduDecoder

FpduDecoder::FpduDecoder(Visitor* visitor, bool crc, bool markers, uint64_t start_pos,
                         size_t max_ulpdu)
    : visitor_(visitor),
      crc_(crc),
      markers_(markers),
      max_ulpdu_(std::min(max_ulpdu, kMaxUlpduLength)),
      buf_(max_ulpdu_),
      pos_(start_pos),
      crc_state_(kCrc32cInit) {}

size_t FpduDecoder::consume(std::span<const uint8_t> in) {
  return run(in, false);
}
size_t FpduDecoder::consume_one(std::span<const uint8_t> in) {
  return run(in, true);
}

void FpduDecoder::fail(Error e, const char* detail) {
  error_ = e;
  error_detail_ = detail;
}

void FpduDecoder::feed_crc(const uint8_t* p, size_t n) {
  if (crc_) crc_state_ = crc32c_update(crc_state_, p, n);
}

void FpduDecoder::finish_marker() {
  in_marker_ = false;
  // RFC 5044 §4.3: a Marker before the length field carries 0; any other Marker of this FPDU
  // points back to its length field. The two low bits are treated as zero (§4.2).
  const uint16_t got = decode_marker_fpduptr(marker_);
  uint16_t want = 0;
  if (header_started_) want = static_cast<uint16_t>((marker_pos_ - header_pos_) & ~uint64_t{3});
  if (got != want) marker_mismatch_ = true;
}

// Called when all logical octets of the FPDU are in. Returns false on error.
bool FpduDecoder::finish_frame() {
  if (crc_) {
    // RFC 5044 §4.4: recompute and compare; a mismatch makes the FPDU invalid.
    const uint32_t want = crc32c_final(crc_state_);
    if (load_le32(crc_bytes_) != want) {
      fail(Error::CrcMismatch, "MPA CRC mismatch (RFC 5044 §4.4)");
      return false;
    }
  }
  if (marker_mismatch_) {
    fail(Error::MarkerMismatch, "MPA Marker FPDUPTR disagrees with ULPDU_Length (RFC 5044 §8)");
    return false;
  }
  ++frames_;
  const size_t n = ulpdu_len_;
  phase_ = Phase::kLength;
  got_ = 0;
  header_started_ = false;
  frame_started_ = false;
  crc_state_ = kCrc32cInit;
  visitor_->on_ulpdu(std::span<const uint8_t>(buf_.data(), n));
  return true;
}

// Whole unmarked FPDU available in `in` at a frame boundary: check it in place and hand the
// ULPDU to the visitor without copying. Returns octets consumed, 0 if the slow path must run.
size_t FpduDecoder::fast_path(std::span<const uint8_t> in) {
  if (in.size() < kUlpduLengthSize) return 0;
  const size_t len = load_be16(in.data());
  if (len > max_ulpdu_) return 0;  // the slow path reports it
  const size_t size = fpdu_size(len);
  if (in.size() < size) return 0;
  // No Marker may fall before any octet of this FPDU (one exactly at its end is the next's).
  if (markers_) {
    const size_t d = bytes_to_next_marker(pos_);
    if (d == 0 || d < size) return 0;
  }
  const size_t body = fpdu_body_size(len);
  pos_ += size;  // stream_pos() always equals start + octets consumed, errors included
  if (crc_) {
    const uint32_t want = crc32c(in.data(), body);
    if (load_le32(in.data() + body) != want) {
      fail(Error::CrcMismatch, "MPA CRC mismatch (RFC 5044 §4.4)");
      return size;
    }
  }
  ++frames_;
  visitor_->on_ulpdu(in.subspan(kUlpduLengthSize, len));
  return size;
}

size_t FpduDecoder::run(std::span<const uint8_t> in, bool stop_after_one) {
  size_t used = 0;
  while (used < in.size() && error_ == Error::None) {
    const uint8_t* p = in.data() + used;
    size_t n = in.size() - used;

    if (at_frame_boundary()) {
      size_t k = fast_path(in.subspan(used));
      if (k > 0) {
        used += k;
        if (stop_after_one) break;
        continue;
      }
    }

    if (in_marker_) {
      size_t take = std::min(n, kMarkerSize - marker_got_);
      std::memcpy(marker_ + marker_got_, p, take);
      if (marker_in_crc_) feed_crc(p, take);
      marker_got_ += take;
      pos_ += take;
      used += take;
      if (marker_got_ == kMarkerSize) finish_marker();
      continue;
    }
    if (markers_ && bytes_to_next_marker(pos_) == 0) {
      in_marker_ = true;
      marker_got_ = 0;
      marker_pos_ = pos_;
      frame_started_ = true;
      // Covered by this FPDU's CRC unless it falls inside the CRC field itself (only possible
      // with a start position that is not 4-aligned).
      marker_in_crc_ = phase_ != Phase::kCrc || got_ == 0;
      continue;
    }
    size_t lim = n;
    if (markers_) lim = std::min(lim, bytes_to_next_marker(pos_));

    size_t take = 0;
    switch (phase_) {
      case Phase::kLength:
        if (got_ == 0) {
          frame_started_ = true;
          header_started_ = true;
          header_pos_ = pos_;
        }
        take = std::min(lim, kUlpduLengthSize - got_);
        std::memcpy(len_bytes_ + got_, p, take);
        feed_crc(p, take);
        got_ += take;
        if (got_ == kUlpduLengthSize) {
          ulpdu_len_ = load_be16(len_bytes_);
          if (ulpdu_len_ > max_ulpdu_) {
            fail(Error::UlpduTooLong, "ULPDU_Length exceeds the receive limit");
            break;
          }
          // A zero-length ULPDU still has a 2-octet PAD (2 + 0 is not a multiple of 4).
          phase_ = ulpdu_len_ > 0 ? Phase::kUlpdu : Phase::kPad;
          got_ = 0;
        }
        break;
      case Phase::kUlpdu:
        take = std::min(lim, ulpdu_len_ - got_);
        std::memcpy(buf_.data() + got_, p, take);
        feed_crc(p, take);
        got_ += take;
        if (got_ == ulpdu_len_) {
          got_ = 0;
          phase_ = fpdu_pad(ulpdu_len_) > 0 ? Phase::kPad : Phase::kCrc;
        }
        break;
      case Phase::kPad:
        // RFC 5044 §4.1: pad content is ignored by the receiver except for the CRC.
        take = std::min(lim, fpdu_pad(ulpdu_len_) - got_);
        feed_crc(p, take);
        got_ += take;
        if (got_ == fpdu_pad(ulpdu_len_)) {
          got_ = 0;
          phase_ = Phase::kCrc;
        }
        break;
      case Phase::kCrc:
        take = std::min(lim, kCrcSize - got_);
        std::memcpy(crc_bytes_ + got_, p, take);
        got_ += take;
        break;
    }
    pos_ += take;
    used += take;
    if (phase_ == Phase::kCrc && got_ == kCrcSize) {
      if (!finish_frame()) break;
      if (stop_after_one) break;
    }
  }
  return used;
}

}  // namespace uiw::wire
