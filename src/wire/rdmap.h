// RDMAP control field, opcode table and RDMA Read Request header (RFC 5040 §4).
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

inline constexpr size_t kReadRequestHeaderSize = 28;  // RFC 5040 §4.4

// One row per 4-bit opcode (RFC 5040 Figures 4 and 5); like siw's iwarp_pktinfo.
struct OpcodeInfo {
  bool valid;
  bool tagged;               // DDP T flag the message uses
  uint32_t qn;               // untagged only
  size_t rdmap_header_size;  // RDMAP header after the DDP header (Read Request 28; Terminate: 4
                             // minimum, the variable part follows its control bits)
  bool payload_allowed;      // ULP payload allowed
  bool carries_inval_stag;   // Invalidate STag in RsvdULP[8:39]
  const char* name;
};

// Order of initializers = opcode value; keep it.
inline constexpr std::array<OpcodeInfo, 16> kOpcodeTable = {{
    {true, true, 0, 0, true, false, "RDMA Write"},
    {true, false, kQnReadRequest, kReadRequestHeaderSize, false, false, "RDMA Read Request"},
    {true, true, 0, 0, true, false, "RDMA Read Response"},
    {true, false, kQnSend, 0, true, false, "Send"},
    {true, false, kQnSend, 0, true, true, "Send with Invalidate"},
    {true, false, kQnSend, 0, true, false, "Send with Solicited Event"},
    {true, false, kQnSend, 0, true, true, "Send with Solicited Event and Invalidate"},
    {true, false, kQnTerminate, 4, false, false, "Terminate"},
    {false, false, 0, 0, false, false, "Reserved (8)"},
    {false, false, 0, 0, false, false, "Reserved (9)"},
    {false, false, 0, 0, false, false, "Reserved (10)"},
    {false, false, 0, 0, false, false, "Reserved (11)"},
    {false, false, 0, 0, false, false, "Reserved (12)"},
    {false, false, 0, 0, false, false, "Reserved (13)"},
    {false, false, 0, 0, false, false, "Reserved (14)"},
    {false, false, 0, 0, false, false, "Reserved (15)"},
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

}  // namespace uiw::wire
