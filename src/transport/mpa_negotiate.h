// MPA connection setup over a connected TCP socket: RFC 5044 §7.1 (Request/Reply frames, startup
// rules) and RFC 6581 (MPA revision 2: IRD/ORD exchange and peer-to-peer RTR).
//
// Blocking style with an overall timeout, for host tests and tools; in production uiw.ko runs the
// exchange and hands over a socket positioned at the first FPDU. Works whether or not the fd is
// in O_NONBLOCK mode (it polls). Both functions read exactly one frame and never past it: the
// peer's first FPDU may already be queued behind the Reply/Request and stays in the socket.
// On any negative return other than -ECONNREFUSED the caller must close the socket (RFC 5044
// §7.1.2: a malformed frame closes the TCP connection); after -ECONNREFUSED the connection is left
// open for the ULP to close or reuse (RFC 5044 §7.1.2).
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "engine/types.h"

namespace uiw::transport {

// The RFC 6581 RTR message type is the engine's: negotiation picks it, the Qp sends it.
using RtrType = engine::RtrType;
const char* rtr_type_name(RtrType);

struct MpaConfig {
  uint8_t revision = 2;               // 1 = RFC 5044, 2 = RFC 6581 enhanced
  bool crc = true;                    // we ask for CRC (C bit)
  bool markers_rx = false;            // we ask the peer to insert markers (M bit)
  bool can_send_markers = true;       // false: refuse a peer that asks us for markers
  uint16_t ird = 16, ord = 16;        // rev 2 only; at most 0x3FFF (14-bit fields, RFC 6581)
  RtrType rtr = RtrType::Write;       // initiator: RTR message offered; responder: preferred pick;
                                      // None = no peer-to-peer mode (rev 2)
  std::vector<uint8_t> private_data;  // ULP private data (<= 512 - 4 for rev 2, 512 for rev 1)
  bool rdmap_ext = true;              // we offer or accept RFC 7306 (UIW_MPA_RDMAP_EXT_*)
  int timeout_ms = 5000;              // whole exchange; < 0 = no timeout
};

struct MpaResult {
  bool crc;           // CRC in use in both directions (RFC 5044 §4.4: on if either side asked)
  bool markers_tx;    // we insert markers in FPDUs we send (the peer's M bit)
  bool markers_rx;    // the peer inserts markers in FPDUs we receive (our M bit)
  uint8_t revision;   // revision of the exchange (the Reply's)
  uint16_t ird, ord;  // negotiated local IRD/ORD (rev 2), else our configured values
  RtrType rtr;        // RTR message the initiator sends first (rev 2 p2p), else None
  bool rejected;      // the Reply had R=1
  bool rdmap_ext;     // both frames offered RFC 7306: the connection uses it
  std::vector<uint8_t> peer_private_data;  // ULP part (after the rev 2 IRD/ORD word)
};

// Initiator: send the Request, read exactly the Reply.
// 0; -ECONNREFUSED if rejected (*result filled, rejected = true); -EPROTO bad frame or revision;
// -EOPNOTSUPP peer wants markers and !can_send_markers; -ETIMEDOUT; -ECONNRESET peer closed;
// -EINVAL bad config; other -errno from the socket.
//
// Negotiation rules implemented (both sides compute the same result):
//  * revision: the Responder answers min(its, ours); a Reply with a higher revision than the
//    Request is -EPROTO. Revision 0 (pre-IETF MPA, RFC 5044 App. C) is refused (-EPROTO).
//  * CRC: on if either frame has C=1 (RFC 5044 §4.4 / §7.1.1).
//  * markers per direction: markers_tx = peer's M bit, markers_rx = our M bit (RFC 5044 §7.1.1).
//  * IRD/ORD (RFC 6581 §3), uiw.ko's policy (kernel-abi/uiw-setup.h uiw_settle_ird_ord): each
//      side's ORD = min(own ORD, peer IRD), and its IRD is raised to the peer's ORD (relaxed
//      rule; the peer ORD over 0x3FFF fails with -EPROTO). The Responder replies with its
//      settled values, so A's ORD <= B's IRD in both directions.
//  * RFC 7306: used if the Request offers it and the Reply accepts (UIW_MPA_RDMAP_EXT_OFFER,
//    _ACCEPT: distinct bits, so that a Reply echoing the Request's Res bits accepts nothing);
//    the Responder accepts when the Request offered it and cfg.rdmap_ext.
//  * RTR (RFC 6581 §4): the initiator offers cfg.rtr (p2p bit + that one type); the Responder
//    picks its cfg.rtr if offered, else the one offered; a Responder with rtr None, or a rev 1
//    exchange, gives RtrType::None (no RTR).
int mpa_initiate(int fd, const MpaConfig&, MpaResult*);

// Responder: read exactly the Request, decide, send the Reply. accept_fn (optional) sees the
// Request as a MpaResult (fields from the initiator's point of view already negotiated for us)
// and returns false to reject, optionally filling *reply_pd with the Reply's private data.
// 0 accepted; -ECONNREFUSED a reject Reply was sent (accept_fn said no, or the peer asked for
// markers and !can_send_markers); -EPROTO malformed Request (bad key, PD_Length > 512, rev 0);
// -ETIMEDOUT; -ECONNRESET; -EINVAL bad config; other -errno.
int mpa_respond(int fd, const MpaConfig&, MpaResult*,
                const std::function<bool(const MpaResult& request, std::vector<uint8_t>* reply_pd)>&
                    accept_fn = {});

}  // namespace uiw::transport
