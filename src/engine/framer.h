// The framing between the LLP and DDP (RFC 5041 §3: the LLP under DDP must deliver whole
// segments): MPA over a TCP byte stream (RFC 5044: length, Markers, pad, CRC) or one SCTP message
// per segment (RFC 5043: a DDP-SSN, nothing else). A framer recovers DDP segments from what the
// LLP delivers and hands them, one at a time, to the DDP/RDMAP engine's SegmentRx side; the
// engine knows nothing of the framing it runs over.
//
// Sans-IO like the engine: a framer never touches a socket. Both are driven through the Qp's
// lower-layer calls (rx_need/rx_commit/rx_feed, rx_feed_message), which delegate here.
#pragma once

#include <sys/uio.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <map>
#include <span>
#include <utility>
#include <vector>

#include "wire/ddp.h"
#include "wire/rdmap.h"
#include "wire/terminate.h"

namespace uiw::engine {

struct QpStats;

// SCTP mode: the PPID of a message from Qp::tx_pending(), from the octet after its DDP-SSN.
// A Session Control message has a zero there (function codes 1-4, RFC 5043 §5.2.3); a DDP
// Segment has its DDP control octet, never zero as DV is 1 (RFC 5041 §4.1).
inline uint32_t sctp_ppid_of(uint8_t octet_after_ssn) {
  return octet_after_ssn ? 16 : 17;
}
inline constexpr size_t kSctpRecordHeader = 8;  // rx_feed() record: PPID | length

// Where the next received octets go, and at most how many.
struct RxNeed {
  uint8_t* dst;
  size_t len;
};

// The DDP layer's receive side, one segment at a time (RFC 5041 §7: headers validated before
// a payload octet is placed). Implemented by the Qp.
class SegmentRx {
 public:
  // A DDP segment of len octets (an MPA ULPDU, or an SCTP chunk's payload) begins.
  virtual void seg_begin(uint16_t len) = 0;
  // Where its next octets go, never past its end; len 0 once all of them are in (or on error).
  // app: dst is application memory, to be written through memory::copy_to_app or the kernel.
  virtual RxNeed seg_need(bool* app) = 0;
  virtual void seg_commit(size_t n) = 0;    // n octets were written at the last seg_need()
  virtual void seg_cancel() = 0;            // they will not come now
  virtual void seg_fault() = 0;             // they could not be written (EFAULT)
  virtual bool seg_directable() const = 0;  // its payload could be read straight to its target
  // Every octet is in and the framing around them checked out: the segment is valid (RFC 5044
  // §4.4: with CRCs, not before its CRC matched).
  virtual void seg_end() = 0;
  // The framing itself failed (an LLP error: bad CRC, bad Marker, stream lost mid-frame).
  virtual void llp_fail(wire::TerminateCause cause) = 0;
  virtual void llp_closed() = 0;  // the peer ended its side at a frame boundary
  // After an error nothing more is parsed (RFC 5041 §7.1); the framer only drains.
  virtual bool draining() const = 0;

 protected:
  ~SegmentRx() = default;
};

// Feeds bytes the caller holds to one segment: copy mode, and a staged FPDU's replay. Payload
// bound for application memory goes through memory::copy_to_app, so a page that vanished is a
// protocol error on this stream (seg_fault), never SIGSEGV. Returns the octets taken.
size_t seg_copy_in(SegmentRx& seg, std::span<const uint8_t> in);

// The receive half of a framer, as the Qp drives it.
class RxFramer {
 public:
  virtual ~RxFramer() = default;
  virtual RxNeed need() = 0;
  virtual void commit(size_t n) = 0;
  virtual void cancel() = 0;
  virtual void fault() = 0;
  virtual bool need_is_app_memory() const = 0;
  virtual bool directable() const = 0;
  virtual size_t feed(std::span<const uint8_t> in) = 0;
  virtual void feed_message(uint32_t ppid, std::span<const uint8_t> msg) = 0;
  // No frame is partly received: a close here loses nothing (RFC 5044 §8 error 1 otherwise).
  virtual bool at_boundary() const = 0;
  // The stream failed: nothing more is parsed or placed (RFC 5041 §7.1), so what was kept to be
  // parsed later goes now.
  virtual void stop() = 0;
};

// MPA (RFC 5044 §4): FPDU = ULPDU_Length | ULPDU | PAD | CRC, with a Marker every 512 octets of
// the stream when negotiated. Markers are removed wherever they fall; with CRCs an FPDU is
// staged whole and checked before any of it reaches the engine.
class MpaRx final : public RxFramer {
 public:
  MpaRx(SegmentRx& seg, QpStats& stats, std::span<uint8_t> discard);
  void start(bool crc, bool markers);

  RxNeed need() override;
  void commit(size_t n) override;
  void cancel() override;
  void fault() override;
  bool need_is_app_memory() const override;
  bool directable() const override;
  size_t feed(std::span<const uint8_t> in) override;
  void feed_message(uint32_t ppid, std::span<const uint8_t> msg) override;
  bool at_boundary() const override;
  void stop() override {}

 private:
  enum class St : uint8_t { Length, Stage, Ulpdu, Trailer };
  void to_length();
  size_t feed_whole(std::span<const uint8_t> in);
  void process_marker();
  void finish_stage();
  // A whole FPDU's ULPDU, to the segment if its CRC matched (or none was checked).
  void hand_over(std::span<const uint8_t> ulpdu, bool crc_ok);

  SegmentRx& seg_;
  QpStats& stats_;
  std::span<uint8_t> discard_;
  bool crc_on_ = false, markers_ = false;
  St st_ = St::Length;
  uint64_t pos_ = 0;  // stream offset from SeqStart, Markers included (RFC 5044 §4.3)
  uint64_t fpdu_start_ = 0;
  uint32_t crc_ = 0;
  size_t got_ = 0, want_ = 0;  // octets of the current field received / its size
  uint16_t ulpdu_len_ = 0;
  size_t pad_ = 0;
  bool in_marker_ = false;
  bool last_seg_ = false;  // the last need() came from the segment
  bool last_app_ = false;  // ... and points into application memory
  RxNeed last_{nullptr, 0};
  std::array<uint8_t, 2> length_{};
  std::array<uint8_t, 8> trailer_{};
  std::array<uint8_t, 4> marker_{};
  std::vector<uint8_t> stage_;  // CRC mode: ULPDU | PAD | CRC of the FPDU being received
};

// SCTP (RFC 5043 §5.2): each message is one DDP Segment Chunk (DDP-SSN, then the segment) or a
// Session Control chunk. Messages may arrive unordered and are processed in DDP-SSN order.
class SctpRx final : public RxFramer {
 public:
  SctpRx(SegmentRx& seg, QpStats& stats, std::span<uint8_t> discard);
  void start(uint16_t rx_ssn);

  // A byte-stream driver's read buffer: the Qp reads while this is non-empty; the octets come
  // whole, as records or messages, through feed()/feed_message().
  RxNeed need() override;
  void commit(size_t) override {}
  void cancel() override {}
  void fault() override {}
  bool need_is_app_memory() const override { return false; }
  bool directable() const override { return false; }
  // Records: PPID (be32) | length (be32) | message, as transport::SctpStream hands them over.
  size_t feed(std::span<const uint8_t> in) override;
  void feed_message(uint32_t ppid, std::span<const uint8_t> msg) override;
  bool at_boundary() const override { return true; }
  void stop() override;  // the messages held for reordering
  size_t held() const { return hold_.size(); }

 private:
  void process(uint32_t ppid, std::span<const uint8_t> msg);

  SegmentRx& seg_;
  QpStats& stats_;
  std::span<uint8_t> discard_;
  uint16_t ssn_ = 0;
  std::map<uint16_t, std::pair<uint32_t, std::vector<uint8_t>>> hold_;
  size_t held_bytes_ = 0;
  std::vector<uint8_t> record_;  // a record split across feed() calls
};

// ---- Transmit

// The octets a frame puts before the DDP header: the MPA ULPDU_Length (RFC 5044 §4.1) or the
// DDP-SSN (RFC 5043 §5.2.1), two either way.
inline constexpr size_t kFramePrefix = 2;
inline constexpr size_t kMaxFrameHeader =
    kFramePrefix + wire::kUntaggedHeaderSize + wire::kMaxRdmapHeaderSize;
// Room for a small payload copied behind the largest headers (MpaTx::add_payload).
inline constexpr size_t kInlinePayload = 64;
// PAD (0-3 octets) then CRC (RFC 5044 §4.1).
inline constexpr size_t kMaxFrameTrailer = 8;

// One frame being built or sent. The framing's own octets (prefix, Markers, pad, CRC) live here;
// the engine writes the segment's headers at hdr + kFramePrefix; payload is sent from where it
// is, or, when small, copied behind the headers with PAD and CRC after it (room for all in hdr).
struct TxFrame {
  uint8_t hdr[kMaxFrameHeader + kInlinePayload + kMaxFrameTrailer];
  uint8_t trailer[kMaxFrameTrailer];  // separate iovecs for pad and CRC: a Marker may sit between
  std::vector<uint8_t> markers;
  size_t markers_used;
  size_t remaining;    // wire octets not yet accepted by the LLP
  size_t bytes;        // wire octets of the whole frame
  size_t iov_count;    // iovecs this frame occupies in TxIovs
  uint64_t start_pos;  // stream offset of its first octet
};

// The iovecs handed to the LLP, frame after frame.
struct TxIovs {
  std::vector<iovec> iov;
  size_t begin = 0, end = 0;
  size_t batch_bytes = 0;  // octets in [begin, end)
  // Octets that continue the frame's last iovec in memory extend it: the kernel walks each
  // iovec of a sendmsg separately.
  void push(TxFrame& f, const void* p, size_t len) {
    iovec* last = f.iov_count > 0 ? &iov[end - 1] : nullptr;
    if (last && static_cast<const uint8_t*>(last->iov_base) + last->iov_len == p) {
      last->iov_len += len;
    } else {
      iov[end++] = {const_cast<void*>(p), len};
      ++f.iov_count;
    }
    f.remaining += len;
    f.bytes += len;
    batch_bytes += len;
  }
};

// The transmit half of a framer: the engine builds each segment into a frame through it.
class TxFramer {
 public:
  virtual ~TxFramer() = default;
  // The iovecs one frame of a segment with up to `pieces` payload pieces may need, and the
  // per-frame storage for them (Markers).
  virtual size_t max_iovs(size_t pieces) const = 0;
  virtual void prepare(TxFrame& f) const = 0;
  virtual void begin(TxFrame& f) = 0;
  // The segment's headers, hlen octets at f.hdr + kFramePrefix, of a segment of len octets.
  virtual void add_header(TxFrame& f, size_t hlen, size_t len) = 0;
  // Payload, sent from p. app: application memory (a registered region: a Send's or Write's
  // source, a Read Response's), read only through memory's fault-safe reads where the framing
  // reads it (a copy, the CRC); false when a page of it could not be read, and the frame is
  // then incomplete (unbuild).
  virtual bool add_payload(TxFrame& f, const uint8_t* p, size_t len, bool app) = 0;
  virtual void end(TxFrame& f, size_t len) = 0;
  virtual void unbuild(const TxFrame& f) = 0;  // the frame just begun is taken back
  // Every frame after f is dropped; f itself is dropped too unless it is partly sent.
  virtual void drop_after(const TxFrame& f, bool partly_sent) = 0;
  // The LLP keeps message boundaries: hand it one frame per write.
  virtual bool frame_per_write() const = 0;
  // No frame may be sent yet; peer_frame_seen() is told of each valid frame received.
  virtual bool holding() const = 0;
  virtual void peer_frame_seen() = 0;
  // The framing's own last message once the engine is done sending (false: it has none).
  virtual bool build_close(TxFrame& f) = 0;
};

// MPA: ULPDU_Length | ULPDU | PAD | CRC, a Marker every 512 octets of the stream when the peer
// asked for them (RFC 5044 §4.3), the CRC over all of it (§4.4).
class MpaTx final : public TxFramer {
 public:
  MpaTx(TxIovs& out, QpStats& stats) : out_(out), stats_(stats) {}
  void start(bool crc, bool markers, uint32_t mulpdu, bool responder);

  size_t max_iovs(size_t pieces) const override;
  void prepare(TxFrame& f) const override;
  void begin(TxFrame& f) override;
  void add_header(TxFrame& f, size_t hlen, size_t len) override;
  bool add_payload(TxFrame& f, const uint8_t* p, size_t len, bool app) override;
  void end(TxFrame& f, size_t len) override;
  void unbuild(const TxFrame& f) override { pos_ = f.start_pos; }
  void drop_after(const TxFrame& f, bool partly_sent) override;
  bool frame_per_write() const override { return false; }
  bool holding() const override { return hold_; }
  void peer_frame_seen() override { hold_ = false; }
  bool build_close(TxFrame&) override { return false; }

 private:
  bool append(TxFrame& f, const uint8_t* p, size_t len, bool fold_crc, bool app);
  bool in_header_run(const TxFrame& f) const;
  void put_marker(TxFrame& f);

  TxIovs& out_;
  QpStats& stats_;
  bool crc_on_ = true, markers_ = false;
  bool hold_ = false;  // a responder before the initiator's first FPDU arrived
  size_t markers_per_frame_ = 0;
  uint64_t pos_ = 0;  // stream offset from SeqStart of the next octet built
  uint64_t fpdu_start_ = 0;
  uint32_t crc_ = 0;
  std::vector<uint8_t> bounce_;  // memory::crc32c_update_from_app's, grown on first use
};

// SCTP: each frame is one message, a DDP Segment Chunk (RFC 5043 §5.2.1): the DDP-SSN, then the
// segment, nothing after it; the session ends with a Session Control Terminate (§6.2).
class SctpTx final : public TxFramer {
 public:
  SctpTx(TxIovs& out, QpStats& stats) : out_(out), stats_(stats) {}
  void start(uint16_t tx_ssn);

  size_t max_iovs(size_t pieces) const override { return 1 + pieces; }  // headers, pieces
  void prepare(TxFrame& f) const override { f.markers.clear(); }
  void begin(TxFrame&) override {}
  void add_header(TxFrame& f, size_t hlen, size_t len) override;
  bool add_payload(TxFrame& f, const uint8_t* p, size_t len, bool app) override;
  void end(TxFrame& f, size_t len) override;
  void unbuild(const TxFrame&) override {}
  void drop_after(const TxFrame& f, bool partly_sent) override;
  bool frame_per_write() const override { return true; }
  bool holding() const override { return false; }
  void peer_frame_seen() override {}
  bool build_close(TxFrame& f) override;

 private:
  TxIovs& out_;
  QpStats& stats_;
  uint16_t ssn_ = 0;
  bool close_built_ = false;
};

}  // namespace uiw::engine
