// RDMAP control field, opcode table, RDMA Read Request header (RFC 5040 §4), and the Atomic
// Request / Atomic Response headers of the RFC 7306 extensions.
// RDMAP control octet (DDP RsvdULP[0:7]): RV 0xC0 | Rsv 0x30 | Opcode 0x0F (RFC 5040 §4.1).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

#include "wire/ddp.h"

namespace uiw::wire {

enum class Opcode : uint8_t {
  RdmaWrite = 0,
  ReadRequest = 1,
  ReadResponse = 2,
  Send = 3,
  SendInv = 4,
  SendSe = 5,
  SendSeInv = 6,
  Terminate = 7,
  // RFC 7306 §4.1: valid only on a connection whose peers agreed to use the extensions.
  ImmediateData = 8,
  ImmediateDataSe = 9,
  AtomicRequest = 10,
  AtomicResponse = 11,
};

inline constexpr uint8_t kRdmapVersion = 1;  // RFC 5040 §4.1: RV 01b for IETF RNICs
inline constexpr uint8_t kRdmapMaskVersion = 0xC0;
inline constexpr uint8_t kRdmapMaskReserved = 0x30;  // sent 0, ignored on receive
inline constexpr uint8_t kRdmapMaskOpcode = 0x0F;

constexpr uint8_t rdmap_control(Opcode op, uint8_t rv = kRdmapVersion) {
  return static_cast<uint8_t>(((rv & 0x03) << 6) | (static_cast<uint8_t>(op) & kRdmapMaskOpcode));
}
constexpr uint8_t rdmap_version(uint8_t ctrl) {
  return static_cast<uint8_t>(ctrl >> 6);
}
constexpr uint8_t rdmap_opcode(uint8_t ctrl) {
  return ctrl & kRdmapMaskOpcode;
}

// Untagged queue numbers (RFC 5040 §4.5 Figure 4).
inline constexpr uint32_t kQnSend = 0;
inline constexpr uint32_t kQnReadRequest = 1;
inline constexpr uint32_t kQnTerminate = 2;
inline constexpr uint32_t kQnAtomicResponse = 3;  // RFC 7306 §4.1, §10.2
inline constexpr uint32_t kQueueCount = 4;

inline constexpr size_t kReadRequestHeaderSize = 28;     // RFC 5040 §4.4
inline constexpr size_t kAtomicRequestHeaderSize = 52;   // RFC 7306 §5.2.1 Figure 4
inline constexpr size_t kAtomicResponseHeaderSize = 12;  // RFC 7306 §5.2.2 Figure 6
inline constexpr size_t kImmediateDataSize = 8;          // RFC 7306 §6.2 Figure 7
inline constexpr size_t kMaxRdmapHeaderSize = kAtomicRequestHeaderSize;

// One row per 4-bit opcode (RFC 5040 Figures 4 and 5, RFC 7306 §4.1 Figures 2 and 3); like
// siw's iwarp_pktinfo.
struct OpcodeInfo {
  bool valid = false;
  bool tagged = false;           // DDP T flag the message uses
  uint32_t qn = 0;               // untagged only
  size_t rdmap_header_size = 0;  // RDMAP header after the DDP header (Terminate: 4 minimum,
                                 // the variable part follows its control bits)
  bool fixed_header = false;  // rdmap_header_size octets always follow the DDP header: read with it
  bool payload_allowed = false;     // ULP payload allowed
  bool carries_inval_stag = false;  // Invalidate STag in RsvdULP[8:39]
  bool extension = false;           // RFC 7306: only where both peers agreed to use the extensions
  const char* name = nullptr;
};

// Order of initializers = opcode value; keep it. RFC 7306 §4.1: the Immediate Data messages and
// the Atomic Request use QN 0 and QN 1 like Send and Read Request (an Atomic Request takes the
// same inbound queue, so IRD and ORD count Reads and atomics alike, §5.2); the Atomic Response
// has its own QN 3. The 8 octets of Immediate Data are the message (no ULP payload, §6.2).
inline constexpr std::array<OpcodeInfo, 16> kOpcodeTable = {{
    {.valid = true, .tagged = true, .payload_allowed = true, .name = "RDMA Write"},
    {.valid = true,
     .qn = kQnReadRequest,
     .rdmap_header_size = kReadRequestHeaderSize,
     .fixed_header = true,
     .name = "RDMA Read Request"},
    {.valid = true, .tagged = true, .payload_allowed = true, .name = "RDMA Read Response"},
    {.valid = true, .qn = kQnSend, .payload_allowed = true, .name = "Send"},
    {.valid = true,
     .qn = kQnSend,
     .payload_allowed = true,
     .carries_inval_stag = true,
     .name = "Send with Invalidate"},
    {.valid = true, .qn = kQnSend, .payload_allowed = true, .name = "Send with Solicited Event"},
    {.valid = true,
     .qn = kQnSend,
     .payload_allowed = true,
     .carries_inval_stag = true,
     .name = "Send with Solicited Event and Invalidate"},
    {.valid = true, .qn = kQnTerminate, .rdmap_header_size = 4, .name = "Terminate"},
    {.valid = true,
     .qn = kQnSend,
     .rdmap_header_size = kImmediateDataSize,
     .fixed_header = true,
     .extension = true,
     .name = "Immediate Data"},
    {.valid = true,
     .qn = kQnSend,
     .rdmap_header_size = kImmediateDataSize,
     .fixed_header = true,
     .extension = true,
     .name = "Immediate Data with Solicited Event"},
    {.valid = true,
     .qn = kQnReadRequest,
     .rdmap_header_size = kAtomicRequestHeaderSize,
     .fixed_header = true,
     .extension = true,
     .name = "Atomic Request"},
    {.valid = true,
     .qn = kQnAtomicResponse,
     .rdmap_header_size = kAtomicResponseHeaderSize,
     .fixed_header = true,
     .extension = true,
     .name = "Atomic Response"},
    {.name = "Reserved (12)"},
    {.name = "Reserved (13)"},
    {.name = "Reserved (14)"},
    {.name = "Reserved (15)"},
}};

// Any value is masked to 4 bits, so an out-of-range opcode is never an out-of-bounds read.
constexpr const OpcodeInfo& opcode_info(uint8_t opcode) {
  return kOpcodeTable[opcode & kRdmapMaskOpcode];
}

struct ReadRequestHeader {
  uint32_t sink_stag = 0;
  uint64_t sink_to = 0;
  uint32_t size = 0;  // RDMARDSZ
  uint32_t src_stag = 0;
  uint64_t src_to = 0;
};

void encode_read_request(uint8_t* out28, const ReadRequestHeader& h);
ReadRequestHeader decode_read_request(const uint8_t* in28);

// RFC 7306 §5.2.1 Figure 5 (the low 4 bits of the header's first word; the other 28 reserved).
enum class AtomicOpcode : uint8_t { FetchAdd = 0, CmpSwap = 2 };
inline constexpr uint32_t kAtomicMaskOpcode = 0x0F;

// RFC 7306 §5.2.1 Figure 4, every field big-endian. FetchAdd: data/mask are the Add Data and
// Add Mask, compare/compare_mask unused; CmpSwap: the Swap Data and Swap Mask, then the Compare
// Data and Compare Mask.
struct AtomicRequestHeader {
  uint8_t aopcode = 0;  // 4 bits, as received (only FetchAdd and CmpSwap are defined)
  uint32_t request_id = 0;
  uint32_t stag = 0;
  uint64_t to = 0;
  uint64_t data = 0;
  uint64_t data_mask = 0;
  uint64_t compare = 0;
  uint64_t compare_mask = 0;
};

// RFC 7306 §5.2.2 Figure 6: the request's identifier and the target's value before the update.
struct AtomicResponseHeader {
  uint32_t request_id = 0;
  uint64_t original = 0;
};

// The 8 octets of an Immediate Data message are the ULP's (RFC 7306 §6.2). uiw's verbs mapping
// puts verbs' 32-bit immediate in the first four, as the application gave it, and in the last
// four either the length of the RDMA Write the message follows (Write with Immediate: the
// receive completion reports it as byte_len) or kImmediateForNextSend: the Send that follows
// carries it (Send with Immediate: one receive, completed by the Send). Only connections whose
// peers agreed to the extensions use it, and both ends are uiw's.
struct ImmediateData {
  uint32_t imm = 0;   // verbs' imm_data: the octets as given, in memory order
  uint32_t info = 0;  // a Write's length, or kImmediateForNextSend
};
inline constexpr uint32_t kImmediateForNextSend = 0x80000000u;
void encode_immediate(uint8_t* out8, const ImmediateData& d);
ImmediateData decode_immediate(const uint8_t* in8);

void encode_atomic_request(uint8_t* out52, const AtomicRequestHeader& h);
AtomicRequestHeader decode_atomic_request(const uint8_t* in52);  // reserved bits ignored
void encode_atomic_response(uint8_t* out12, const AtomicResponseHeader& h);
AtomicResponseHeader decode_atomic_response(const uint8_t* in12);

// The value an atomic leaves in the target whose value was v (RFC 7306 §5.1), in the target's
// own byte order. FetchAdd adds field by field: a 1 in the mask marks the most significant bit
// of a field, whose carry out is dropped (mask 0: one 64-bit add). CmpSwap stores the masked
// swap bits only if v matches the compare data in every compare-mask bit; otherwise v stays.
constexpr uint64_t atomic_fetch_add_result(uint64_t v, uint64_t add, uint64_t mask) {
  // Without the field tops the sums cannot carry across a boundary; each top bit is then
  // its own sum bit (v ^ add ^ the carry that reached it), its carry dropped.
  return ((v & ~mask) + (add & ~mask)) ^ ((v ^ add) & mask);
}
constexpr uint64_t atomic_cmp_swap_result(uint64_t v, uint64_t compare, uint64_t compare_mask,
                                          uint64_t swap, uint64_t swap_mask) {
  if (((compare ^ v) & compare_mask) != 0) return v;
  return (v & ~swap_mask) | (swap & swap_mask);
}

}  // namespace uiw::wire
