// The framing between the LLP and DDP (RFC 5041 §2.2: DDP needs its LLP to deliver whole
// segments): MPA over a TCP byte stream (RFC 5044: length, Markers, pad, CRC) or one SCTP message
// per segment (RFC 5043: a DDP-SSN, nothing else). A framer recovers DDP segments from what the
// LLP delivers and hands them, one at a time, to the DDP/RDMAP engine's SegmentRx side; the
// engine knows nothing of the framing it runs over.
//
// Sans-IO like the engine: a framer never touches a socket. Both are driven through the Qp's
// lower-layer calls (rx_need/rx_commit/rx_feed, rx_feed_message), which delegate here.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <map>
#include <span>
#include <utility>
#include <vector>

#include "wire/terminate.h"

namespace uiw::engine {

struct QpStats;

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

 private:
  enum class St : uint8_t { Length, Stage, Ulpdu, Trailer };
  void to_length();
  void process_marker();
  void finish_stage();

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

}  // namespace uiw::engine
