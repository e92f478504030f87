// Work requests, completions and connection parameters of the uiw engine.
// These mirror the verbs objects the provider translates from (ibv_send_wr, ibv_wc, ...), but
// carry no libibverbs dependency.
#pragma once

#include <cstddef>
#include <cstdint>

namespace uiw::engine {

// Device limits the engine is built for; the provider reports them through query_device.
inline constexpr uint32_t kMaxSge = 16;
inline constexpr uint32_t kMaxInline = 256;
inline constexpr uint32_t kMaxOrdIrd = 128;

struct Sge {
  uint64_t addr;
  uint32_t length;
  uint32_t lkey;
};

// AtomicFetchAdd / AtomicCmpSwap (RFC 7306 §5) and the two with an immediate (§6; wire::
// ImmediateData) only where ConnParams::rdmap_ext.
enum class WrOpcode : uint8_t {
  Send,
  SendInv,
  RdmaWrite,
  RdmaRead,
  AtomicFetchAdd,
  AtomicCmpSwap,
  RdmaWriteImm,
  SendImm,
  BindMw,    // binds a memory window (SendWr::bind): a local operation, in send queue order
  LocalInv,  // invalidates SendWr::invalidate_stag here: a local operation
};

enum SendFlags : uint32_t {
  kSendSignaled = 1u << 0,
  kSendSolicited = 1u << 1,
  kSendFence = 1u << 2,
  kSendInline = 1u << 3,
};

struct SendWr {
  uint64_t wr_id = 0;
  WrOpcode opcode = WrOpcode::Send;
  uint32_t flags = 0;
  uint32_t num_sge = 0;
  Sge sg_list[kMaxSge] = {};
  uint32_t invalidate_stag = 0;  // SendInv: the peer's STag to invalidate (RDMAP §5.3)
  uint32_t remote_stag = 0;      // RdmaWrite: sink STag; RdmaRead, atomics: source STag
  uint64_t remote_addr = 0;      // tagged offset at the peer
  // Atomics (verbs' wr.atomic): FetchAdd adds compare_add; CmpSwap stores swap where the
  // target equals compare_add. The one 8-octet SGE receives the target's original value.
  uint64_t compare_add = 0;
  uint64_t swap = 0;
  uint32_t imm_data = 0;  // RdmaWriteImm, SendImm: verbs' immediate, as given (network order)
  // BindMw: window `mw` (its current STag) gets key `key` over [addr, addr + length) of the
  // region `mr` with remote rights `access` (memory::Registry::bind_mw); a type 2 window is
  // bound to this QP's stream.
  struct Bind {
    uint32_t mw = 0;
    uint32_t mr = 0;
    uint64_t addr = 0;
    uint64_t length = 0;
    uint32_t access = 0;
    uint8_t key = 0;
  } bind;
};

struct RecvWr {
  uint64_t wr_id = 0;
  uint32_t num_sge = 0;
  Sge sg_list[kMaxSge] = {};
};

// Same meanings as enum ibv_wc_status.
enum class WcStatus : uint8_t {
  Success,
  LocLenErr,
  LocQpOpErr,
  LocProtErr,
  WrFlushErr,
  BadResp,
  LocAccessErr,
  RemInvReqErr,
  RemAccessErr,
  RemOpErr,
  FatalErr,
  GeneralErr,
  MwBindErr,
};
const char* wc_status_name(WcStatus);

// RecvRdmaWithImm: an Immediate Data message that no Send carries (a Write with Immediate).
enum class WcOpcode : uint8_t {
  Send,
  RdmaWrite,
  RdmaRead,
  Recv,
  AtomicFetchAdd,
  AtomicCmpSwap,
  RecvRdmaWithImm,
  BindMw,
  LocalInv,
};

enum WcFlags : uint32_t {
  kWcWithInv = 1u << 0,    // a Send with Invalidate was received; invalidated_stag is valid
  kWcSolicited = 1u << 1,  // a Send with Solicited Event was received
  kWcWithImm = 1u << 2,    // an Immediate Data message was received: immediate is valid
};

struct Completion {
  uint64_t wr_id = 0;
  WcStatus status = WcStatus::Success;
  WcOpcode opcode = WcOpcode::Send;
  uint32_t byte_len = 0;
  uint32_t qp_num = 0;
  uint32_t flags = 0;
  uint32_t invalidated_stag = 0;
  uint32_t vendor_err = 0;  // Terminate control word when a Terminate caused the error
  uint32_t imm_data = 0;    // kWcWithImm: verbs' immediate, as the peer gave it
};

// RFC 6581 peer-to-peer "ready to receive" message the initiator sends first.
enum class RtrType : uint8_t { None, Send, Write, Read };

// The lower-layer protocol under DDP: MPA over TCP (RFC 5044) or the SCTP adaptation (RFC 5043).
enum class Llp : uint8_t { Mpa, Sctp };

// What the connection setup (uiw.ko, or transport::mpa_* on the host) negotiated.
struct ConnParams {
  bool crc = true;          // generate and check CRC32c (RFC 5044 §4.4: on unless both said no)
  bool markers_tx = false;  // we insert markers: the peer's M bit (RFC 5044 §7.1.1)
  bool markers_rx = false;  // the peer inserts markers: our M bit
  uint32_t mulpdu = 1448;   // maximum ULPDU we send (RFC 5044 §4.5)
  uint32_t ord = 16;        // outbound Read Requests in flight (RDMAP §6.1)
  uint32_t ird = 16;        // inbound Read Requests we accept
  bool initiator = true;    // MPA role
  uint8_t mpa_revision = 2;
  RtrType rtr = RtrType::None;  // p2p RTR: sent by the initiator, expected by the responder
  // Both peers agreed to use the RFC 7306 extensions (atomics, Immediate Data): without it
  // their opcodes are never sent and, received, are "Unexpected OpCode" (RFC 7306 §1.1).
  bool rdmap_ext = false;
  // SCTP mode (RFC 5043): crc, markers, mpa_revision and rtr are ignored; mulpdu is the maximum
  // DDP Segment size the association carries unfragmented (§9). The session control exchange
  // used DDP-SSN 0 each way (§6.2), so data starts at 1 unless setup says otherwise.
  Llp llp = Llp::Mpa;
  uint16_t sctp_tx_ssn = 1;  // DDP-SSN of our first DDP Segment Chunk
  uint16_t sctp_rx_ssn = 1;  // DDP-SSN expected on the peer's first one
};

enum class QpState : uint8_t {
  Idle,       // created, not connected (verbs RESET/INIT/RTR)
  Rts,        // full operation
  Closing,    // graceful close requested: draining the send queue
  Terminate,  // a Terminate is queued or in flight; nothing else is sent (RDMAP §5.4)
  Error,      // work requests flushed
};
const char* qp_state_name(QpState);

enum class QpEvent : uint8_t {
  Established,
  TerminateSent,      // local error: Terminate built and queued (IBV_EVENT_QP_FATAL)
  TerminateReceived,  // peer sent a Terminate (IBV_EVENT_QP_FATAL)
  LlpError,           // connection lost mid-stream (IBV_EVENT_QP_FATAL)
  CqOverrun,          // a completion could not be queued (IBV_EVENT_CQ_ERR)
  Closed,             // graceful close finished both ways
};

}  // namespace uiw::engine
