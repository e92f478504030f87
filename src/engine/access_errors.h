// The one mapping from memory-check failures (memory::AccessResult) to Terminate causes, shared
// by the receive path (placement) and the transmit path (Read Response sources).
#pragma once

#include "memory/registry.h"
#include "wire/terminate.h"

namespace uiw::engine {

// The one mapping from memory-check failures to DDP Tagged Buffer codes (RFC 5041 §7.2), for
// placement of RDMA Write and Read Response payload.
inline wire::TerminateCause ddp_tagged_error(memory::AccessResult r) {
  uint8_t code = wire::term::kDdpInvalidStag;
  switch (r) {
    case memory::AccessResult::PdMismatch:
    case memory::AccessResult::StreamMismatch:
      code = wire::term::kDdpStagNotAssociated;
      break;
    case memory::AccessResult::BaseBounds:
      code = wire::term::kDdpBaseBounds;
      break;
    case memory::AccessResult::ToWrap:
      code = wire::term::kDdpToWrap;
      break;
    // RFC 5041 lacks a code for insufficient access rights; like siw, report "Invalid STag".
    default:
      code = wire::term::kDdpInvalidStag;
      break;
  }
  return {wire::TermLayer::Ddp, wire::term::kDdpTagged, code};
}

// The one mapping for RDMA Read Request sources: RDMAP Remote Protection Errors (RFC 5040 §4.8
// Figure 9, §7.2 checks 4a-4e).
inline wire::TerminateCause rdmap_protection_error(memory::AccessResult r) {
  uint8_t code = wire::term::kInvalidStag;
  switch (r) {
    case memory::AccessResult::PdMismatch:
    case memory::AccessResult::StreamMismatch:
      code = wire::term::kStagNotAssociated;
      break;
    case memory::AccessResult::AccessDenied:
      code = wire::term::kAccessRights;
      break;
    case memory::AccessResult::BaseBounds:
      code = wire::term::kBaseBounds;
      break;
    case memory::AccessResult::ToWrap:
      code = wire::term::kToWrap;
      break;
    default:
      code = wire::term::kInvalidStag;
      break;
  }
  return {wire::TermLayer::Rdma, wire::term::kRdmaRemoteProtection, code};
}

}  // namespace uiw::engine
