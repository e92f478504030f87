// The per-QP protocol machine: RDMAP over DDP (RFC 5040 / 5041) over a framer (framer.h): MPA
// over TCP (RFC 5044 + 6581) or one SCTP message per segment (RFC 5043).
//
// Sans-IO, as nghttp2 and ngtcp2 are: the Qp never touches a socket or a clock. The lower layer
// moves bytes:
//   receive:  auto need = qp.rx_need();  n = readv(fd, need.dst, need.len);  qp.rx_commit(n);
//             (a "directed read": payload lands straight in the registered buffer it belongs to),
//             or qp.rx_feed(bytes) when the caller already holds the bytes (copy mode);
//   transmit: auto iov = qp.tx_pending();  n = sendmsg(fd, iov);  qp.tx_commit(n);
//             (the iovecs reference user payload in place; the framing's octets live in the Qp
//             until tx_commit has passed them).
//
// Thread safety: none. The caller (runtime/provider) serializes every call on one Qp. Completion
// and receive queues are thread-safe on their own.
#pragma once

#include <sys/uio.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <span>
#include <vector>

#include "engine/completion_queue.h"
#include "engine/framer.h"
#include "engine/receive_queue.h"
#include "engine/types.h"
#include "memory/registry.h"
#include "uiw-abi.h"
#include "wire/rdmap.h"
#include "wire/terminate.h"

namespace uiw::engine {

struct QpConfig {
  uint32_t qp_num = 0;
  uint32_t pd = 0;
  uint32_t sq_depth = 128;
  memory::Registry* registry = nullptr;  // Unowned, must outlive the Qp.
  CompletionQueue* send_cq = nullptr;    // Unowned, must outlive the Qp.
  CompletionQueue* recv_cq = nullptr;    // Unowned, must outlive the Qp.
  ReceiveQueue* rq = nullptr;            // Unowned (private RQ or SRQ), must outlive the Qp.
  std::function<void(QpEvent)> on_event;
  // The context's counters (uiw-abi.h struct uiw_counters: the page uiw.ko sums for rdma
  // statistic), shared by its QPs; null: none. Unowned, must outlive the Qp.
  uint64_t* counters = nullptr;
};

struct QpStats {
  uint64_t tx_fpdus = 0, rx_fpdus = 0;
  uint64_t tx_bytes = 0, rx_bytes = 0;
  uint64_t* shared = nullptr;  // QpConfig::counters
  // Adds to the context's counter `c`: relaxed atomic adds, since the QPs of one context run
  // on several threads; no system call (uiw.ko reads the page when asked).
  void count(uiw_counter c, uint64_t n = 1) const {
    if (shared) std::atomic_ref<uint64_t>(shared[c]).fetch_add(n, std::memory_order_relaxed);
  }
};

// The counter of a Terminate sent or received, by the layer of its cause (RFC 5040 §4.8).
inline uiw_counter terminate_counter(wire::TermLayer layer, bool sent) {
  switch (layer) {
    case wire::TermLayer::Rdma:
      return sent ? UIW_CNT_TERM_TX_RDMAP : UIW_CNT_TERM_RX_RDMAP;
    case wire::TermLayer::Ddp:
      return sent ? UIW_CNT_TERM_TX_DDP : UIW_CNT_TERM_RX_DDP;
    case wire::TermLayer::Llp:
      break;
  }
  return sent ? UIW_CNT_TERM_TX_LLP : UIW_CNT_TERM_RX_LLP;
}

class Qp final : private SegmentRx {
 public:
  explicit Qp(const QpConfig& config);
  Qp(const Qp&) = delete;
  Qp& operator=(const Qp&) = delete;

  // ---- verbs side
  // 0, -ENOMEM (send queue full), -EINVAL (malformed WR: too many SGEs, inline too long, ...).
  // In Error state the WR completes at once with WrFlushErr, as verbs require.
  int post_send(const SendWr& wr);
  int post_recv(const RecvWr& wr);  // private RQ only; -EINVAL on an SRQ-attached QP
  // The same without the lock that serializes everything else on this Qp, so a posting thread
  // never waits for a thread that holds it across socket I/O. Posters still come one at a time
  // (post_send_concurrent; the RQ serializes post_recv_concurrent itself). -EAGAIN: not now
  // (Terminate, Error, Closing: call the locked one, which decides). -ECANCELED: posted, but
  // the Qp was flushed meanwhile and may have missed it: call flush_late() under the lock.
  int post_send_concurrent(const SendWr& wr);
  int post_recv_concurrent(const RecvWr& wr);
  // What post_send would refuse wr with whatever the send queue's room: -EINVAL (too many SGEs,
  // inline data the operation cannot carry or too much of it, an atomic whose result is not one
  // 8-octet SGE, a QP closing), -EOPNOTSUPP (an RFC 7306 operation the connection did not
  // agree to); 0: taken. The answer holds while the state does: a batch checks every WR first.
  int send_refusal(const SendWr& wr) const;
  void flush_late();
  // Enter full operation with what connection setup negotiated.
  void start(const ConnParams& params);
  void close();  // graceful: finish queued sends, then ask the lower layer for a FIN
  void abort();  // abortive: flush everything now
  QpState state() const { return state_.load(std::memory_order_acquire); }
  // Send queue entries free now: post_send() takes at least this many more WRs.
  size_t sq_free() const { return sq_.size() - (sq_tail_ - sq_head_); }
  // A completion is still to come: a posted send WR, or a posted receive (from any thread).
  bool awaits_completion() const {
    return sq_tail_.load(std::memory_order_relaxed) != sq_head_.load(std::memory_order_relaxed) ||
           (cfg_.rq && cfg_.rq->size() > 0);
  }
  // A completion is still to come that only the peer's bytes can bring: a posted receive, or a
  // Read awaiting its response (from any thread). A Send or Write completes once the LLP took
  // it (RFC 5040 §5.3 and §5.1: iWARP completes the Data Source's WR locally).
  bool awaits_inbound() const {
    return sq_reads_.load(std::memory_order_relaxed) > 0 || (cfg_.rq && cfg_.rq->size() > 0);
  }
  // Whether a completion into `cq` may still wait for the peer's bytes (one CQ may be both):
  // into the send CQ while any WR is in the send queue (a Read awaits its response; a WR may
  // wait for the peer's first FPDU, RFC 6581 §5, or for room the peer makes by reading), into
  // the receive CQ while a receive is posted (from any thread). A receive a partly arrived
  // Send has taken from the queue awaits the rest too: rx_message_open_into(), under the lock.
  bool awaits_inbound_into(const CompletionQueue& cq) const {
    return (&cq == cfg_.send_cq &&
            sq_tail_.load(std::memory_order_relaxed) != sq_head_.load(std::memory_order_relaxed)) ||
           (&cq == cfg_.recv_cq && cfg_.rq && cfg_.rq->size() > 0);
  }
  // A Send (or Send with Immediate) has begun to arrive into a receive WR it took from the
  // queue, whose completion goes to `cq`, and its last segment has not (owner's lock).
  bool rx_message_open_into(const CompletionQueue& cq) const {
    return &cq == cfg_.recv_cq && rx_send_active_;
  }
  // The QP's CQs hold completions the application has not polled yet (from any thread; for a
  // CQ shared with other QPs, theirs count too).
  bool completions_queued() const {
    return (cfg_.send_cq && cfg_.send_cq->size() > 0) || (cfg_.recv_cq && cfg_.recv_cq->size() > 0);
  }
  uint32_t qp_num() const { return cfg_.qp_num; }
  const ConnParams& params() const { return params_; }
  const QpStats& stats() const { return stats_; }
  // The Terminate this QP sent / received, if any (for async events and tests).
  const std::optional<wire::TerminateMessage>& terminate_sent() const { return term_sent_; }
  const std::optional<wire::TerminateMessage>& terminate_received() const { return term_rcvd_; }

  // ---- lower-layer side: receive
  using RxNeed = engine::RxNeed;  // len > 0 while the Qp reads
  // A remote Write's destination stays pinned (memory::Registry::Pin) from rx_need() until
  // rx_commit() or rx_cancel(), so a deregistration never races a placement (RFC 5041 §8.3.1(6))
  // and never waits for the network.
  RxNeed rx_need();
  void rx_commit(size_t n);  // n (<= need.len) bytes were written at need.dst
  void rx_cancel();          // the bytes of the last rx_need() will not come now
  // The bytes of the last rx_need() could not be written at need.dst (the read into it failed
  // with EFAULT: the page is unmapped or read-only). The Qp ends the stream with the Terminate
  // for that destination and drains; the bytes are still to be read (into the next rx_need()).
  void rx_fault();
  // Copy mode: consumes bytes the caller already read. Returns the count consumed (all of them
  // unless the Qp stopped reading).
  size_t rx_feed(std::span<const uint8_t> in);
  void rx_eof();               // the peer closed its sending side (FIN)
  void rx_error(int err);      // the connection broke (RST, timeout)
  bool rx_directable() const;  // true while a payload read of > 0 bytes is pending

  // ---- lower-layer side: transmit
  // The octets to send next. Every call is followed by tx_commit() of what the lower layer took
  // (0 when it took nothing) before anything else is asked of the Qp: a Read Response's source
  // stays pinned from tx_pending() to tx_commit(), so a deregistration waits for the write that
  // reads it (one non-blocking syscall) and never for the network, and no source is read by a
  // later write once deregistered (RFC 5041 §8.3.1(6)).
  std::span<const iovec> tx_pending();
  void tx_commit(size_t n);
  // The lower layer could not read the next octets to send (EFAULT: a source page the
  // application unmapped after posting). The frame may be partly on the wire, so nothing can
  // follow it: the work request it belongs to completes with a local protection error and the
  // connection fails as for rx_error.
  void tx_fault();
  bool tx_idle() const { return slots_used_ == 0; }
  // True once the Qp wants its sending side shut (graceful close or Terminate delivered).
  bool tx_want_shutdown() const { return want_shutdown_; }

  // ---- lower-layer side, SCTP mode (ConnParams::llp == Llp::Sctp; RFC 5043, sctp_*.cpp)
  // tx_pending() returns the iovecs of exactly one SCTP message per call: a DDP Segment Chunk
  // (DDP-SSN, then one DDP segment; PPID 16) or, once the Qp wants its sending side shut, the
  // DDP Stream Session Terminate (PPID 17, RFC 5043 §6.2). sctp_ppid_of() tells which. Send each
  // whole and unordered, then tx_commit(its length).
  // rx_feed_message() consumes one whole received message (MSG_EOR seen) and its PPID; messages
  // may arrive in any order (unordered chunks) and are processed in DDP-SSN order.
  // rx_feed() in SCTP mode takes the same messages as records, for byte-stream drivers
  // (runtime::Connection over transport::SctpStream): PPID (be32) | length (be32) | message.
  void rx_feed_message(uint32_t ppid, std::span<const uint8_t> msg);
  // Out-of-order messages held for reordering (tests, diagnostics).
  size_t sctp_held() const { return sctp_rx_.held(); }

 private:
  static constexpr size_t kMaxHeader = kMaxFrameHeader;
  static constexpr size_t kTxSlots = 64;
  static constexpr size_t kTxBatchBytes = 1 << 20;

  struct ResolvedSge {
    uint8_t* ptr;
    uint32_t len;
    uint32_t lkey;  // the SGE's key and address at ptr, to validate it again at placement
    uint64_t addr;
  };
  // A gather/scatter list resolved to host addresses, with a cursor for sequential access.
  struct Sgl {
    ResolvedSge sge[kMaxSge];
    uint32_t n = 0;
    uint64_t total = 0;
    // Maps message offset -> contiguous host bytes available there (len 0 past the end).
    ResolvedSge at(uint64_t offset) const;
  };
  enum class SqSt : uint8_t { Queued, Sending, AwaitResponse, Done };
  struct SqEntry {
    SendWr wr;
    Sgl sgl;
    SqSt st;
    WcStatus status;      // Success, or the local error found when the WR was posted
    uint32_t sink_stag;   // RDMA Read: the STag our Read Request names for the response
    uint32_t request_id;  // atomics: the Request Identifier its Atomic Response echoes
    uint32_t msn;         // untagged messages: the MSN assigned at transmit
    bool imm_out;         // RdmaWriteImm: the Write is out; SendImm: the Immediate Data is
    uint8_t inline_data[kMaxInline];
  };
  // An inbound Read Request, or an Atomic Request (RFC 7306 §5.2: the same queue, answered in
  // the order they arrived, §7).
  struct IrqEntry {
    wire::ReadRequestHeader rr;  // RDMAP §7.2 checks done at delivery, again per segment
    uint32_t sent;
    uint32_t msn;  // the request's DDP MSN (QN 1), for a Terminate about it
    bool atomic;
    wire::AtomicRequestHeader ar;  // atomic: checked at delivery, performed when answered
  };
  enum class SlotDone : uint8_t { None, SqEntry, Terminate };
  struct TxSlot : TxFrame {
    SlotDone done;
    uint32_t index;        // SQ index of the work request whose segment this is (from_sq)
    bool from_sq = false;  // a Send's or Write's segment: its payload is the application's
    // A Read Response segment whose payload the kernel reads from the region when it is written:
    // validated again before each write (pin_read_sources), through the request it answers and
    // the source range it covers.
    bool read_response = false;
    IrqEntry request;
    uint64_t source_to;
    const uint8_t* source;
    uint32_t source_len;
  };
  enum class TxKind : uint8_t { None, Sq, Irq };
  // The DDP segment being received: its control octets, the rest of its headers, its payload;
  // Complete once all its octets are in, until the framer ends it (seg_end).
  enum class SegSt : uint8_t { Idle, Control, Header, Payload, Complete };

  // qp.cpp: queues, completion, errors
  // Validates wr into the entry at sq_tail_; st: the state the poster saw (Idle or Rts).
  int fill_sq_entry(const SendWr& wr, QpState st);
  int shape_refusal(const SendWr& wr, QpState st) const;  // send_refusal in Idle and Rts
  bool resolve_sgl(const Sge* sges, uint32_t n, uint32_t access, Sgl* out) const;
  void complete_sq();
  void push_cqe(CompletionQueue* cq, const Completion& c);
  void flush_all();
  // Terminate with cause; its M, D and R flags are wire::terminate_flags_for's. from_rx: the
  // error is in the segment being received, whose headers are copied as far as they arrived.
  // answering: the error was found while answering this accepted Read Request, whose headers
  // are rebuilt. Otherwise (an error found while transmitting) no header is copied.
  void set_terminate(wire::TerminateCause cause, bool from_rx, const IrqEntry* answering = nullptr);
  void enter_error(QpEvent why);
  void stop_placing();  // after any error: read and drop (RFC 5041 §7.1)
  void emit(QpEvent ev);
  SqEntry& sq_at(uint32_t i) { return sq_[i % sq_.size()]; }

  // qp_tx.cpp
  void fill_tx();
  bool build_next_fpdu();
  // One row per work-request opcode (kTxOps, qp_tx.cpp, indexed by WrOpcode): what the send
  // queue does with it, from posting to completion. A new operation is a row and its builder.
  struct TxOp {
    using Build = void (Qp::*)(SqEntry&);
    Build build = nullptr;       // builds the entry's next segment at sq_tx_
    WcOpcode completion{};       // what its completion reports
    uint32_t sge_access = 0;     // local access its SGEs need
    bool inline_ok = false;      // IBV_SEND_INLINE: its payload goes out from the WR itself
    bool untagged_send = false;  // a Send message: takes the next MSN on QN 0 (RFC 5041 §4.3)
    bool outbound_read = false;  // a Read or atomic: counts against ORD (RDMAP §6.1, RFC 7306
                                 // §5.2), awaits its response
    bool extension = false;      // RFC 7306: only on a connection that agreed to it
    bool local = false;          // nothing on the wire: runs even before we may send
  };
  static const std::array<TxOp, 10> kTxOps;
  static const TxOp& tx_op(WrOpcode op) { return kTxOps[static_cast<size_t>(op)]; }
  void build_read_request(SqEntry& e);
  void await_response(SqEntry& e);
  void build_header_only(wire::Opcode op, uint32_t qn, std::span<const uint8_t> rdmap_header,
                         SlotDone done = SlotDone::None, uint32_t index = 0);
  void build_write_imm_segment(SqEntry& e);
  void build_send_imm_segment(SqEntry& e);
  void build_immediate(SqEntry& e, uint32_t info, bool completes);
  void run_bind_mw(SqEntry& e);
  void run_local_inv(SqEntry& e);
  void finish_local_op(SqEntry& e, WcStatus status);
  void build_atomic_request(SqEntry& e);
  bool build_atomic_response(IrqEntry& q);
  void build_write_segment(SqEntry& e);
  void build_send_segment(SqEntry& e);
  // ends_wr: the message's Last segment completes the WR (not when an Immediate Data follows).
  void build_data_segment(SqEntry& e, wire::SegmentHeader& h, size_t room, bool ends_wr = true);
  void end_message_in_error(SqEntry& e);
  bool build_irq_segment();
  bool pin_read_sources();
  memory::AccessResult pin_source(const TxSlot& s, memory::Registry::Pin* out) const;
  void build_terminate();
  void build_rtr();
  TxSlot& begin_slot(SlotDone done, uint32_t index);
  void unbuild_slot(TxSlot& s);
  void fill_close();
  // After an error: every frame not yet on the wire is dropped, the rest of one partly on it
  // copied to be finished. False when that rest could not be read (a page unmapped, a Read
  // Response's source gone): the stream then ends inside the frame, and nothing may follow.
  bool detach_tx();

  // qp_rx.cpp: the segment side (SegmentRx) the framers drive
  void seg_begin(uint16_t len) override;
  RxNeed seg_need(bool* app) override;
  void seg_commit(size_t n) override;
  void seg_cancel() override;
  void seg_fault() override;
  bool seg_directable() const override;
  void seg_end() override;
  void llp_fail(wire::TerminateCause cause) override;
  void llp_closed() override;
  bool draining() const override { return rx_drain_; }
  bool rx_opcode_usable(const wire::OpcodeInfo& oi) const;
  void rx_process_control();
  void rx_process_header();
  void rx_begin_payload();
  void rx_deliver();
  // One row per RDMAP opcode (kRxOps, qp_rx.cpp): begin validates a segment and picks where its
  // payload goes (false: it failed, rx_fail was called); deliver completes the message once
  // its Last segment is in (nullptr: nothing to deliver). handled marks the rows that have
  // handlers (a member pointer cannot be compared in a constant expression under UBSan).
  struct RxOp {
    using Begin = bool (Qp::*)();
    using Handler = void (Qp::*)();
    Begin begin = nullptr;
    Handler deliver = nullptr;
    bool handled = false;
    bool places = false;  // the payload is data placed for the ULP (UIW_CNT_PLACED_BYTES)
  };
  static const std::array<RxOp, 16> kRxOps;
  bool rx_begin_write();
  bool rx_begin_read_request();
  bool rx_begin_read_response();
  bool rx_begin_send();
  bool rx_begin_terminate();
  bool rx_begin_immediate();
  bool rx_begin_atomic_request();
  bool rx_begin_atomic_response();
  void rx_deliver_read_request();
  void rx_deliver_read_response();
  void rx_deliver_send();
  void rx_deliver_terminate();
  void rx_deliver_immediate();
  void rx_deliver_atomic_request();
  void rx_deliver_atomic_response();
  void rx_fail(wire::TerminateCause cause);
  void complete_active_recv(WcStatus status);

  QpConfig cfg_;
  ConnParams params_;
  // Written only under the owner's lock; read by lock-free posters. With sq_tail_ it is a
  // store-then-load handshake on both sides (seq_cst): a poster that published an entry and then
  // reads Rts knows the flush that follows a state change will see the entry.
  std::atomic<QpState> state_ = QpState::Idle;
  QpStats stats_;

  // Send queue: [sq_head_, sq_tail_) posted, sq_tx_ the next to transmit.
  std::vector<SqEntry> sq_;
  // sq_tail_ moves only by posting (publishes an entry), sq_head_ only by completion (frees
  // one): a lock-free poster and the lock holder share the ring through them.
  std::atomic<uint32_t> sq_head_ = 0, sq_tail_ = 0;
  // Reads in [sq_head_, sq_tail_): counted up before an entry is published, down before it is
  // freed, so it never reads low for a Read still posted.
  std::atomic<uint32_t> sq_reads_ = 0;
  uint32_t sq_tx_ = 0;
  std::vector<uint32_t> orq_;  // SQ indices of Reads awaiting their response, in order
  size_t orq_head_ = 0, orq_count_ = 0;
  uint32_t next_sink_stag_;
  std::vector<IrqEntry> irq_;  // inbound Read Requests, answered in arrival order (RDMAP §5.5 r20)
  size_t irq_head_ = 0, irq_count_ = 0;

  // Transmit
  std::vector<TxSlot> slots_;
  size_t slot_head_ = 0, slots_used_ = 0;
  TxIovs tx_out_;
  size_t tx_iov_per_fpdu_ = kMaxSge + 4;
  MpaTx mpa_tx_{tx_out_, stats_};
  SctpTx sctp_tx_{tx_out_, stats_};
  TxFramer* tx_framer_ = &mpa_tx_;
  TxKind tx_kind_ = TxKind::None;
  uint64_t tx_offset_ = 0;  // progress inside the current message
  uint32_t tx_msn_[wire::kQueueCount] = {1, 1, 1, 1};
  bool rtr_pending_ = false;
  bool rtr_read_outstanding_ = false;
  bool term_queued_ = false;
  bool want_shutdown_ = false;
  std::vector<uint8_t> detached_;  // the unsent rest of a partly sent FPDU after an error
  std::vector<memory::Registry::Pin> tx_pins_;  // Read Response sources, tx_pending to tx_commit
  std::array<uint8_t, wire::kTerminateMaxSize> term_body_{};

  // Receive: the framer for params_.llp (framer.h) recovers segments; the rest is the segment.
  std::array<uint8_t, 4096> rx_discard_{};
  MpaRx mpa_rx_{*this, stats_, rx_discard_};
  SctpRx sctp_rx_{*this, stats_, rx_discard_};
  RxFramer* rx_framer_ = &mpa_rx_;
  bool rx_drain_ = false;  // after an error: read and drop (RFC 5041 §7.1)
  SegSt seg_st_ = SegSt::Idle;
  size_t rx_got_ = 0;   // octets of the current field already received
  size_t rx_want_ = 0;  // size of the current field
  uint16_t rx_ulpdu_len_ = 0;
  size_t rx_hdr_len_ = 0;  // DDP (+RDMAP) header octets in rx_hdr_; 0 until they are known
  uint64_t rx_payload_len_ = 0;
  wire::SegmentHeader rx_seg_{};
  uint8_t rx_opcode_ = 0;
  enum class RxDest : uint8_t { Discard, Host, Sgl, TermBody } rx_dest_ = RxDest::Discard;
  memory::Registry::Pin rx_pin_;
  const Sgl* rx_sgl_ = nullptr;
  uint64_t rx_sgl_off_ = 0;
  uint32_t rx_expected_msn_[wire::kQueueCount] = {1, 1, 1, 1};
  bool rx_first_seen_ = false;
  // The Send message being received (QN 0).
  bool rx_send_active_ = false;
  uint32_t rx_send_msn_ = 0;
  uint64_t rx_send_got_ = 0;  // payload octets of the active Send received so far
  RecvWr rx_send_wr_{};
  Sgl rx_send_sgl_;
  uint64_t orq_placed_ = 0;  // payload octets of the oldest Read's response received so far
  std::array<uint8_t, kMaxHeader> rx_hdr_{};  // from the DDP control octet on
  std::array<uint8_t, 64> rx_term_{};
  bool rx_rtr_send_ = false;  // the current message is the peer's zero-length RTR Send
  // An Immediate Data for the Send that follows (wire::kImmediateForNextSend) was received.
  bool rx_imm_for_send_ = false;
  uint32_t rx_imm_ = 0;

  // Errors: the first cause wins (RDMAP §7.1 item 24).
  std::optional<wire::TerminateMessage> term_sent_;
  std::optional<wire::TerminateMessage> term_rcvd_;
};

}  // namespace uiw::engine
