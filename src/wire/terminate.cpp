#include "wire/terminate.h"

#include <array>
#include <cstring>

#include "wire/bytes.h"
#include "wire/ddp.h"

namespace uiw::wire {

namespace {

struct CauseRow {
  TerminateCause cause;
  const char* name;
};

constexpr TerminateCause rdma(uint8_t etype, uint8_t code) {
  return {TermLayer::Rdma, etype, code};
}
constexpr TerminateCause ddp(uint8_t etype, uint8_t code) {
  return {TermLayer::Ddp, etype, code};
}
constexpr TerminateCause llp(uint8_t code) {
  return {TermLayer::Llp, term::kLlpMpa, code};
}

using namespace term;

// Master table: RFC 5040 Figure 9, RFC 5041 §7.2, RFC 5044 §8 (+ RFC 6581 5-7).
// RFC 5040 lists 0x09 "STag cannot be Invalidated" under both RDMA error types (Figure 9); both
// rows are kept so either one a peer sends is recognised.
constexpr std::array<CauseRow, 33> kCauses = {{
    {rdma(kRdmaLocalCatastrophic, kLocalCatastrophicCode), "RDMA Local Catastrophic Error"},
    {rdma(kRdmaRemoteProtection, kInvalidStag), "RDMA Remote Protection: Invalid STag"},
    {rdma(kRdmaRemoteProtection, kBaseBounds), "RDMA Remote Protection: Base or bounds violation"},
    {rdma(kRdmaRemoteProtection, kAccessRights), "RDMA Remote Protection: Access rights violation"},
    {rdma(kRdmaRemoteProtection, kStagNotAssociated),
     "RDMA Remote Protection: STag not associated with RDMAP Stream"},
    {rdma(kRdmaRemoteProtection, kToWrap), "RDMA Remote Protection: TO wrap"},
    {rdma(kRdmaRemoteProtection, kCannotInvalidate),
     "RDMA Remote Protection: STag cannot be Invalidated"},
    {rdma(kRdmaRemoteProtection, kUnspecified), "RDMA Remote Protection: Unspecified Error"},
    {rdma(kRdmaRemoteOperation, kInvalidRdmapVersion),
     "RDMA Remote Operation: Invalid RDMAP version"},
    {rdma(kRdmaRemoteOperation, kUnexpectedOpcode), "RDMA Remote Operation: Unexpected OpCode"},
    {rdma(kRdmaRemoteOperation, kCatastrophicStream),
     "RDMA Remote Operation: Catastrophic error, localized to RDMAP Stream"},
    {rdma(kRdmaRemoteOperation, kCatastrophicGlobal),
     "RDMA Remote Operation: Catastrophic error, global"},
    {rdma(kRdmaRemoteOperation, kCannotInvalidate),
     "RDMA Remote Operation: STag cannot be Invalidated"},
    {rdma(kRdmaRemoteOperation, kUnspecified), "RDMA Remote Operation: Unspecified Error"},
    {ddp(kDdpLocalCatastrophic, 0x00), "DDP Local Catastrophic"},
    {ddp(kDdpTagged, kDdpInvalidStag), "DDP Tagged: Invalid STag"},
    {ddp(kDdpTagged, kDdpBaseBounds), "DDP Tagged: Base or bounds violation"},
    {ddp(kDdpTagged, kDdpStagNotAssociated), "DDP Tagged: STag not associated with DDP Stream"},
    {ddp(kDdpTagged, kDdpToWrap), "DDP Tagged: TO wrap"},
    {ddp(kDdpTagged, kDdpInvalidVersion), "DDP Tagged: Invalid DDP version"},
    {ddp(kDdpUntagged, kDdpInvalidQn), "DDP Untagged: Invalid QN"},
    {ddp(kDdpUntagged, kDdpNoBuffer), "DDP Untagged: Invalid MSN - no buffer available"},
    {ddp(kDdpUntagged, kDdpMsnRange), "DDP Untagged: Invalid MSN - MSN range is not valid"},
    {ddp(kDdpUntagged, kDdpInvalidMo), "DDP Untagged: Invalid MO"},
    {ddp(kDdpUntagged, kDdpTooLong), "DDP Untagged: DDP Message too long for available buffer"},
    {ddp(kDdpUntagged, kDdpUntaggedInvalidVersion), "DDP Untagged: Invalid DDP version"},
    {llp(kMpaConnectionLost), "MPA: TCP connection closed, terminated or lost"},
    {llp(kMpaCrc), "MPA: CRC Error"},
    {llp(kMpaMarker), "MPA: Marker and ULPDU Length field mismatch"},
    {llp(kMpaBadFrame), "MPA: Invalid MPA Request Frame or MPA Response Frame"},
    {llp(kMpaLocalCatastrophic), "MPA: Local Catastrophic Error"},
    {llp(kMpaInsufficientIrd), "MPA: Insufficient IRD Resources"},
    {llp(kMpaNoMatchingRtr), "MPA: No Matching RTR Option"},
}};

constexpr std::array<TerminateCause, kCauses.size()> make_cause_list() {
  std::array<TerminateCause, kCauses.size()> out{};
  for (size_t i = 0; i < kCauses.size(); ++i) out[i] = kCauses[i].cause;
  return out;
}
constexpr auto kCauseList = make_cause_list();

bool is_local_catastrophic(TerminateCause c) {
  return (c.layer == TermLayer::Rdma && c.etype == kRdmaLocalCatastrophic) ||
         (c.layer == TermLayer::Ddp && c.etype == kDdpLocalCatastrophic);
}

}  // namespace

const char* terminate_cause_name(TerminateCause c) {
  for (const auto& row : kCauses) {
    if (row.cause == c) return row.name;
  }
  return nullptr;
}

std::span<const TerminateCause> all_terminate_causes() {
  return kCauseList;
}

TerminateHeaderFlags terminate_flags_for(TerminateCause c, bool is_read_request) {
  TerminateHeaderFlags f;
  // RFC 5040 Figure 10: LLP errors and local catastrophic errors copy no headers (§4.8: "The
  // DDP Header is not present if the Terminate Error Type is a Local Catastrophic Error").
  if (c.layer == TermLayer::Llp || is_local_catastrophic(c)) return f;
  // DDP errors and RDMA remote errors: DDP header and its length (§7.1 items 22 and 23).
  f.m = true;
  f.d = true;
  // §4.8: the RDMA header is "only sent back if the terminate is associated with an RDMA Read
  // Request Message" (§7.1 item 23); DDP-layer errors never copy it (Figure 10).
  f.r = c.layer == TermLayer::Rdma && is_read_request;
  return f;
}

uint32_t terminate_control_word(const TerminateMessage& t) {
  // RFC 5040 §4.8 Figure 8: Layer(4) EType(4) ErrorCode(8) M D R, 13 reserved bits = 0.
  uint32_t w = (uint32_t{static_cast<uint8_t>(t.cause.layer) & 0x0Fu} << 28) |
               (uint32_t{t.cause.etype & 0x0Fu} << 24) | (uint32_t{t.cause.code} << 16);
  if (t.m) w |= uint32_t{kTermFlagM} << 8;
  if (t.d) w |= uint32_t{kTermFlagD} << 8;
  if (t.r) w |= uint32_t{kTermFlagR} << 8;
  return w;
}

size_t terminate_size(const TerminateMessage& t) {
  size_t n = kTerminateControlSize;
  // RFC 5040 §4.8: the length "MUST be valid if the M bit is set" and "MUST be present when
  // the D bit is set".
  if (t.m || t.d) n += kTerminateDdpLengthSize;
  if (t.d) n += t.ddp_header_size;
  if (t.r) n += sizeof t.rdma_header;
  return n;
}

size_t encode_terminate(std::span<uint8_t> out, const TerminateMessage& t) {
  if (t.d && t.ddp_header_size != kTaggedHeaderSize && t.ddp_header_size != kUntaggedHeaderSize) {
    return 0;
  }
  const size_t n = terminate_size(t);
  if (out.size() < n) return 0;
  uint8_t* p = out.data();
  store_be32(p, terminate_control_word(t));
  size_t off = kTerminateControlSize;
  if (t.m || t.d) {
    store_be16(p + off, t.ddp_segment_length);
    off += kTerminateDdpLengthSize;
  }
  if (t.d) {
    std::memcpy(p + off, t.ddp_header, t.ddp_header_size);
    off += t.ddp_header_size;
  }
  if (t.r) {
    std::memcpy(p + off, t.rdma_header, sizeof t.rdma_header);
    off += sizeof t.rdma_header;
  }
  return off;
}

TerminateDecodeError decode_terminate(std::span<const uint8_t> in, TerminateMessage* out) {
  if (in.size() < kTerminateControlSize) return TerminateDecodeError::TooShort;
  TerminateMessage t;
  const uint8_t* p = in.data();
  t.cause.layer = static_cast<TermLayer>(p[0] >> 4);
  t.cause.etype = p[0] & 0x0F;
  t.cause.code = p[1];
  t.m = (p[2] & kTermFlagM) != 0;
  t.d = (p[2] & kTermFlagD) != 0;
  t.r = (p[2] & kTermFlagR) != 0;  // remaining 13 bits reserved: ignored on receive
  size_t off = kTerminateControlSize;
  if (t.m || t.d) {
    if (in.size() < off + kTerminateDdpLengthSize) return TerminateDecodeError::TooShort;
    t.ddp_segment_length = load_be16(p + off);
    off += kTerminateDdpLengthSize;
  }
  if (t.d) {
    if (in.size() < off + 1) return TerminateDecodeError::TooShort;
    // The copied header's own T bit tells its size.
    t.ddp_header_size = segment_header_size((p[off] & kDdpFlagTagged) != 0);
    if (in.size() < off + t.ddp_header_size) return TerminateDecodeError::TooShort;
    std::memcpy(t.ddp_header, p + off, t.ddp_header_size);
    off += t.ddp_header_size;
  }
  if (t.r) {
    // The RDMA header follows a copied untagged (Read Request) DDP header (RFC 5040 §7.1
    // item 23); anywhere else its position is undefined.
    if (!t.d || t.ddp_header_size != kUntaggedHeaderSize) {
      return TerminateDecodeError::BadHeaderLength;
    }
    if (in.size() < off + sizeof t.rdma_header) return TerminateDecodeError::TooShort;
    std::memcpy(t.rdma_header, p + off, sizeof t.rdma_header);
  }
  *out = t;
  return TerminateDecodeError::None;
}

}  // namespace uiw::wire
