// MPA FPDU framing (RFC 5044 §4): ULPDU_Length, PAD, CRC32c and Markers.
//
// Stream positions (`stream_pos`) are octet offsets from SeqStart, the first octet of Full
// Operation in one direction (the octet right after that side's MPA Request/Reply frame). Markers
// sit at every position p with p % 512 == 0 (RFC 5044 §4.3: "(SeqNum - SeqStart) mod 512 is
// zero"), so TCP sequence wrap never matters here: the caller counts octets, not sequence numbers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace uiw::wire {

inline constexpr size_t kUlpduLengthSize = 2;     // RFC 5044 §4.1 ULPDU_Length
inline constexpr size_t kCrcSize = 4;             // RFC 5044 §4.1 CRC, always present
inline constexpr size_t kMarkerSize = 4;          // RFC 5044 §4.2
inline constexpr size_t kMarkerInterval = 512;    // RFC 5044 §4.3
inline constexpr uint32_t kMinMulpdu = 128;       // RFC 5044 §3/§4.5 MULPDU floor
inline constexpr uint32_t kMaxMulpdu = 64768;     // RFC 5044 §3 MULPDU ceiling
inline constexpr size_t kMaxUlpduLength = 65535;  // 16-bit ULPDU_Length field

// PAD makes the FPDU an integral multiple of four octets (RFC 5044 §4.1).
constexpr size_t fpdu_pad(size_t ulpdu_len) {
  return (4 - ((ulpdu_len + 2) % 4)) % 4;
}

// FPDU size without Markers: length field + ULPDU + PAD + CRC (RFC 5044 §4.1).
constexpr size_t fpdu_size(size_t ulpdu_len) {
  return kUlpduLengthSize + ulpdu_len + fpdu_pad(ulpdu_len) + kCrcSize;
}

// MULPDU for an EMSS (RFC 5044 §4.5), floored at 128 and capped at 64768 (RFC 5044 §3):
//   markers:    EMSS - (6 + 4 * ceil(EMSS / 512) + EMSS mod 4)
//   no markers: EMSS - (6 + EMSS mod 4)
uint32_t mulpdu_for_emss(uint32_t emss, bool markers);

// Octets from stream_pos to the next Marker position; 0 when a Marker starts at stream_pos.
constexpr size_t bytes_to_next_marker(uint64_t stream_pos) {
  return static_cast<size_t>((kMarkerInterval - stream_pos % kMarkerInterval) % kMarkerInterval);
}

// Marker: 16-bit RESERVED (0) then 16-bit FPDUPTR whose two low bits are sent as 0 (RFC 5044
// §4.2). decode_marker_fpduptr masks those bits, as receivers "MUST always treat these as zero".
void encode_marker(uint8_t* out4, uint16_t fpduptr);
uint16_t decode_marker_fpduptr(const uint8_t* in4);

// Number of Markers that an FPDU starting at stream_pos carries (0 when !markers): the one that
// may precede its length field, the ones inside, and one right after its PAD (RFC 5044 §4.3/§4.4).
size_t fpdu_marker_count(uint64_t stream_pos, size_t ulpdu_len, bool markers);

// Wire size of one FPDU starting at stream_pos, Markers included.
size_t fpdu_size_with_markers(uint64_t stream_pos, size_t ulpdu_len, bool markers);

// Encodes one whole FPDU starting at stream_pos. With `markers`, a Marker falling right before
// the length field has FPDUPTR 0 and belongs to (is covered by the CRC of) this FPDU; Markers
// inside the FPDU or right after the PAD point back to this FPDU's length field and are also
// covered (RFC 5044 §4.3, §4.4 rules 1 and 2); a Marker right after the CRC belongs to the next
// FPDU. Returns octets written, or 0 if `out` is too small or ulpdu.size() > 65535.
// crc=false writes a zero CRC field (RFC 5044 §4.1: "still present, may contain any value").
size_t encode_fpdu(std::span<uint8_t> out, uint64_t stream_pos, std::span<const uint8_t> ulpdu,
                   bool crc, bool markers);

// Streaming FPDU deframer (QUICHE HttpDecoder style). consume() returns octets consumed and calls
// visitor->on_ulpdu() once per complete, valid FPDU with the ULPDU (Markers, length, PAD and CRC
// removed; RFC 5044 §4.3: receivers "MUST pass the ULPDU data and the ULPDU Length to DDP and not
// the Markers, headers, and CRC"). The span passed to on_ulpdu is valid only during the call.
//
// Errors are sticky; after one, consume() returns 0 and no more ULPDUs are delivered (RFC 5044
// §8: after an error MPA MUST NOT deliver further FPDUs on that half connection):
//   CrcMismatch    - CRC enabled and the received CRC differs (RFC 5044 §4.4; Terminate 2/0/0x02)
//   MarkerMismatch - CRC good (or off) but a Marker's FPDUPTR disagrees with the framing given by
//                    ULPDU_Length (RFC 5044 §8; Terminate 2/0/0x03). Every Marker is checked.
//   UlpduTooLong   - ULPDU_Length > max_ulpdu (reported as soon as the length is read; the
//                    engine maps it, e.g. to DDP "message too long" or an MPA framing error).
// The decoder allocates its reassembly buffer once, in the constructor. Not thread-safe.
class FpduDecoder {
 public:
  struct Visitor {
    virtual ~Visitor() = default;
    virtual void on_ulpdu(std::span<const uint8_t> ulpdu) = 0;
  };
  enum class Error { None, CrcMismatch, MarkerMismatch, UlpduTooLong };

  // `visitor` must be non-null and must outlive the decoder. start_pos is the stream position
  // of the first octet that will be consumed (normally 0 = SeqStart).
  FpduDecoder(Visitor* visitor, bool crc, bool markers, uint64_t start_pos = 0,
              size_t max_ulpdu = kMaxUlpduLength);
  FpduDecoder(const FpduDecoder&) = delete;
  FpduDecoder& operator=(const FpduDecoder&) = delete;

  // Consumes as many octets as possible (any number of FPDUs).
  size_t consume(std::span<const uint8_t> in);
  // Like consume() but returns right after the first FPDU it completes, so the caller can stop
  // exactly at a frame boundary (the octets after it are left unread).
  size_t consume_one(std::span<const uint8_t> in);

  Error error() const { return error_; }
  const char* error_detail() const { return error_detail_; }
  // True when no part of an FPDU (nor a Marker preceding one) has been consumed.
  bool at_frame_boundary() const { return !frame_started_; }
  uint64_t stream_pos() const { return pos_; }
  uint64_t frames_decoded() const { return frames_; }

 private:
  enum class Phase { kLength, kUlpdu, kPad, kCrc };
  size_t run(std::span<const uint8_t> in, bool stop_after_one);
  size_t fast_path(std::span<const uint8_t> in);
  void feed_crc(const uint8_t* p, size_t n);
  void finish_marker();
  bool finish_frame();
  void fail(Error e, const char* detail);

  Visitor* const visitor_;  // Unowned.
  const bool crc_;
  const bool markers_;
  const size_t max_ulpdu_;
  std::vector<uint8_t> buf_;  // ULPDU reassembly, max_ulpdu octets.

  uint64_t pos_;
  uint64_t frames_ = 0;
  Phase phase_ = Phase::kLength;
  size_t got_ = 0;  // octets of the current phase already consumed
  uint8_t len_bytes_[2] = {0, 0};
  size_t ulpdu_len_ = 0;
  uint8_t crc_bytes_[4] = {0, 0, 0, 0};
  uint32_t crc_state_ = 0;
  uint64_t header_pos_ = 0;      // stream position of this FPDU's ULPDU_Length field
  bool header_started_ = false;  // length field reached (Markers then point back to it)
  bool frame_started_ = false;   // any octet (Marker or length) of the current FPDU consumed
  bool in_marker_ = false;
  bool marker_in_crc_ = false;  // Marker covered by the CRC of this FPDU
  uint8_t marker_[4] = {0, 0, 0, 0};
  size_t marker_got_ = 0;
  uint64_t marker_pos_ = 0;
  bool marker_mismatch_ = false;
  Error error_ = Error::None;
  const char* error_detail_ = "";
};

}  // namespace uiw::wire
