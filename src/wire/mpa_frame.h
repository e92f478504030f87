// MPA Request / Reply frames (RFC 5044 §7.1.1) and the RFC 6581 ("MPA v2")
// IRD/ORD word. These frames are sent in TCP streaming mode before Full Operation: no
// ULPDU_Length, no Markers, no CRC.
//
//   octets 0-15  Key: "MPA ID Req Frame" or "MPA ID Rep Frame" (no NUL)
//   octet  16    M 0x80 | C 0x40 | R 0x20 | Res (0x10 = enhanced, see below) | ...
//   octet  17    Rev
//   octets 18-19 PD_Length (big-endian), at most 512 (RFC 5044 §7.1.1)
//   octets 20-   Private Data
//
// RFC 6581 §7.1 (Enhanced RDMA Connection Establishment) puts IRD/ORD and the RTR choice in the
// first four octets of Private Data when Rev = 2:
//   |A|B| IRD (14) |C|D| ORD (14) |   (two big-endian 16-bit words)
//   A = 0x8000 of the IRD word: peer-to-peer (RTR) model
//   B = 0x4000 of the IRD word: zero-length Send as RTR
//   C = 0x8000 of the ORD word: zero-length RDMA Write as RTR
//   D = 0x4000 of the ORD word: zero-length RDMA Read as RTR
//   IRD/ORD mask 0x3FFF.
// Checked against Linux siw (drivers/infiniband/sw/siw/iwarp.h, siw_cm.c): MPA_V2_PEER_TO_PEER
// 0x8000 and MPA_V2_ZERO_LENGTH_RTR 0x4000 are or-ed into the IRD word, MPA_V2_RDMA_WRITE_RTR
// 0x8000 and MPA_V2_RDMA_READ_RTR 0x4000 into the ORD word, MPA_IRD_ORD_MASK 0x3fff. siw also
// sets header flag MPA_RR_FLAG_ENHANCED (0x1000 of the 16-bit bits word = 0x10 of octet 16) with
// Rev 2, and parses the IRD/ORD word only when Rev == 2 and that flag is set (rejecting the
// frame if PD_Length < 4). Chelsio cxgb4 (MPA_ENHANCED_RDMA_CONN 0x10, MPA_V2_PEER2PEER_MODEL,
// MPA_V2_ZERO_LEN_FPDU_RTR) and qed use the same bits. uiw does the same for interoperability:
// v2 params <=> Rev 2 + 0x10.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>

namespace uiw::wire {

inline constexpr size_t kMpaFrameHeaderSize = 20;
inline constexpr size_t kMpaMaxPrivateData = 512;  // PD_Length limit, RFC 5044 §7.1.1
inline constexpr size_t kMpaKeySize = 16;
inline constexpr std::array<uint8_t, kMpaKeySize> kMpaKeyRequest = {
    'M', 'P', 'A', ' ', 'I', 'D', ' ', 'R', 'e', 'q', ' ', 'F', 'r', 'a', 'm', 'e'};
inline constexpr std::array<uint8_t, kMpaKeySize> kMpaKeyReply = {
    'M', 'P', 'A', ' ', 'I', 'D', ' ', 'R', 'e', 'p', ' ', 'F', 'r', 'a', 'm', 'e'};

// Octet-16 flags.
inline constexpr uint8_t kMpaFlagMarkers = 0x80;   // M
inline constexpr uint8_t kMpaFlagCrc = 0x40;       // C
inline constexpr uint8_t kMpaFlagReject = 0x20;    // R
inline constexpr uint8_t kMpaFlagEnhanced = 0x10;  // RFC 6581 as used by siw (see above)
// uiw's RFC 7306 agreement (uiw-setup.h): offered in a Request, accepted in a Reply. Distinct
// bits, because siw echoes a Request's unknown Res bits in its Reply.
inline constexpr uint8_t kMpaFlagRdmapExtOffer = 0x04;
inline constexpr uint8_t kMpaFlagRdmapExtAccept = 0x02;

inline constexpr uint8_t kMpaRevision1 = 1;  // RFC 5044
inline constexpr uint8_t kMpaRevision2 = 2;  // RFC 6581

// RFC 6581 IRD/ORD word.
inline constexpr size_t kMpaV2ParamsSize = 4;
inline constexpr uint16_t kMpaV2PeerToPeer = 0x8000;     // A, IRD word
inline constexpr uint16_t kMpaV2ZeroLengthRtr = 0x4000;  // B, IRD word (zero-length Send)
inline constexpr uint16_t kMpaV2WriteRtr = 0x8000;       // C, ORD word
inline constexpr uint16_t kMpaV2ReadRtr = 0x4000;        // D, ORD word
inline constexpr uint16_t kMpaV2IrdOrdMask = 0x3FFF;

enum class MpaFrameKind { Request, Reply };

struct MpaV2Params {
  bool peer_to_peer = false;
  bool rtr_send = false;   // B
  bool rtr_write = false;  // C
  bool rtr_read = false;   // D
  uint16_t ird = 0;        // 14 bits
  uint16_t ord = 0;        // 14 bits
};

struct MpaFrame {
  MpaFrameKind kind = MpaFrameKind::Request;
  bool markers = false;  // M: the sender of this frame wants Markers in what it receives
  bool crc = true;       // C
  bool reject = false;   // R (Reply only; sent 0 in a Request)
  uint8_t revision = kMpaRevision1;
  bool rdmap_ext = false;         // RFC 7306: a Request offers it, a Reply accepts the offer
  std::optional<MpaV2Params> v2;  // present => Rev 2 with the enhanced flag and the IRD/ORD word
  std::span<const uint8_t> private_data;  // ULP data, without the v2 word
};

void encode_mpa_v2_params(uint8_t* out4, const MpaV2Params& p);
MpaV2Params decode_mpa_v2_params(const uint8_t* in4);

// 20 + (4 if v2) + private_data.size().
size_t mpa_frame_size(const MpaFrame& f);
// Returns octets written; 0 if `out` is too small, PD_Length would exceed 512, or v2 is set with
// a revision other than 2.
size_t encode_mpa_frame(std::span<uint8_t> out, const MpaFrame& f);

// Incremental Request/Reply parser. consume() never consumes past the end of the frame (the
// octets after it are the first FPDU). Errors are sticky. Accepts revisions 1 and 2.
//   BadKey              - key is not the expected one (RFC 5044 §7.1.2: close, report error)
//   UnsupportedRevision - Rev not 1 or 2
//   PrivateDataTooLong  - PD_Length > 512 (RFC 5044 §7.1.1)
//   MissingV2Params     - Rev 2 with the enhanced flag but PD_Length < 4
// Not thread-safe.
class MpaFrameDecoder {
 public:
  enum class Error { None, BadKey, UnsupportedRevision, PrivateDataTooLong, MissingV2Params };

  explicit MpaFrameDecoder(MpaFrameKind expected);
  MpaFrameDecoder(const MpaFrameDecoder&) = delete;
  MpaFrameDecoder& operator=(const MpaFrameDecoder&) = delete;

  size_t consume(std::span<const uint8_t> in);
  bool done() const { return done_; }
  Error error() const { return error_; }
  const char* error_detail() const { return error_detail_; }
  // Valid once done(); private_data points into the decoder's own storage.
  const MpaFrame& frame() const { return frame_; }

 private:
  void fail(Error e, const char* detail);
  bool parse_header();
  void finish();

  const MpaFrameKind expected_;
  std::array<uint8_t, kMpaFrameHeaderSize + kMpaMaxPrivateData> buf_{};
  size_t got_ = 0;
  size_t need_ = kMpaFrameHeaderSize;
  bool done_ = false;
  MpaFrame frame_{};
  Error error_ = Error::None;
  const char* error_detail_ = "";
};

}  // namespace uiw::wire
