// Blocking MPA Request/Reply exchange (RFC 5044 §7.1, RFC 6581) over a connected socket.
// The frame codec is uiw::wire (mpa_frame.h); this file only moves bytes and applies the
// negotiation rules documented in mpa_negotiate.h.
#include "transport/mpa_negotiate.h"

#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <optional>

#include "uiw-setup.h"
#include "wire/bytes.h"
#include "wire/mpa_frame.h"

namespace uiw::transport {

namespace {

// RFC 6581 IRD/ORD with the peer's word: r holds our configured values on entry. The policy is
// uiw.ko's own (uiw_settle_ird_ord), limited by the 14-bit field.
int settle_ird_ord(MpaResult* r, const wire::MpaV2Params& peer) {
  __u32 ird = r->ird, ord = r->ord;
  if (uiw_settle_ird_ord(&ird, &ord, peer.ird, peer.ord, wire::kMpaV2IrdOrdMask)) return -EPROTO;
  r->ird = static_cast<uint16_t>(ird);
  r->ord = static_cast<uint16_t>(ord);
  return 0;
}

using Clock = std::chrono::steady_clock;
using wire::MpaFrame;
using wire::MpaFrameDecoder;
using wire::MpaFrameKind;
using wire::MpaV2Params;

class Deadline {
 public:
  explicit Deadline(int timeout_ms)
      : infinite_(timeout_ms < 0), end_(Clock::now() + std::chrono::milliseconds(timeout_ms)) {}
  // Milliseconds left for poll(): -1 = forever, 0 = expired.
  int remaining_ms() const {
    if (infinite_) return -1;
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(end_ - Clock::now()).count();
    return left <= 0 ? 0 : static_cast<int>(std::min<long long>(left, 1 << 30));
  }

 private:
  bool infinite_;
  Clock::time_point end_;
};

int wait_for(int fd, short events, const Deadline& d) {
  for (;;) {
    int ms = d.remaining_ms();
    if (ms == 0) return -ETIMEDOUT;
    pollfd p{fd, events, 0};
    int r = poll(&p, 1, ms);
    if (r > 0) return 0;
    if (r < 0 && errno != EINTR) return -errno;
  }
}

int send_all(int fd, const uint8_t* data, size_t len, const Deadline& d) {
  size_t off = 0;
  while (off < len) {
    ssize_t n = send(fd, data + off, len - off, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      off += static_cast<size_t>(n);
    } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      if (int e = wait_for(fd, POLLOUT, d); e < 0) return e;
    } else if (n < 0 && errno != EINTR) {
      return -errno;
    }
  }
  return 0;
}

// Reads exactly len octets: never more, so whatever follows the frame stays in the socket.
int recv_exact(int fd, uint8_t* buf, size_t len, const Deadline& d) {
  size_t off = 0;
  while (off < len) {
    ssize_t n = recv(fd, buf + off, len - off, MSG_DONTWAIT);
    if (n > 0) {
      off += static_cast<size_t>(n);
    } else if (n == 0) {
      return -ECONNRESET;  // the peer closed before the frame was complete
    } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
      if (int e = wait_for(fd, POLLIN, d); e < 0) return e;
    } else if (errno != EINTR) {
      return -errno;
    }
  }
  return 0;
}

// Reads one Request or Reply into `dec`: the 20-octet header first, then exactly PD_Length
// octets (RFC 5044 §7.1.1), so the read stops at the frame boundary.
int read_frame(int fd, MpaFrameDecoder* dec, const Deadline& d) {
  std::array<uint8_t, wire::kMpaFrameHeaderSize + wire::kMpaMaxPrivateData> buf;
  if (int e = recv_exact(fd, buf.data(), wire::kMpaFrameHeaderSize, d); e < 0) return e;
  dec->consume(std::span<const uint8_t>(buf.data(), wire::kMpaFrameHeaderSize));
  if (dec->error() != MpaFrameDecoder::Error::None) return -EPROTO;
  if (dec->done()) return 0;
  size_t pd_len = wire::load_be16(buf.data() + 18);  // PD_Length; the decoder checked <= 512
  if (int e = recv_exact(fd, buf.data(), pd_len, d); e < 0) return e;
  size_t used = dec->consume(std::span<const uint8_t>(buf.data(), pd_len));
  if (dec->error() != MpaFrameDecoder::Error::None || !dec->done() || used != pd_len)
    return -EPROTO;
  return 0;
}

int check_config(const MpaConfig& c) {
  if (c.revision != wire::kMpaRevision1 && c.revision != wire::kMpaRevision2) return -EINVAL;
  if (c.ird > wire::kMpaV2IrdOrdMask || c.ord > wire::kMpaV2IrdOrdMask) return -EINVAL;
  size_t room =
      wire::kMpaMaxPrivateData - (c.revision == wire::kMpaRevision2 ? wire::kMpaV2ParamsSize : 0);
  return c.private_data.size() <= room ? 0 : -EINVAL;
}

void set_rtr_bits(MpaV2Params* p, RtrType t) {
  p->rtr_send = t == RtrType::Send;
  p->rtr_write = t == RtrType::Write;
  p->rtr_read = t == RtrType::Read;
}

bool offered(const MpaV2Params& p, RtrType t) {
  return (t == RtrType::Send && p.rtr_send) || (t == RtrType::Write && p.rtr_write) ||
         (t == RtrType::Read && p.rtr_read);
}

int send_frame(int fd, const MpaFrame& f, const Deadline& d) {
  std::array<uint8_t, wire::kMpaFrameHeaderSize + wire::kMpaMaxPrivateData> out;
  size_t n = wire::encode_mpa_frame(out, f);
  if (n == 0) return -EINVAL;
  return send_all(fd, out.data(), n, d);
}

}  // namespace

const char* rtr_type_name(RtrType t) {
  switch (t) {
    case RtrType::None:
      return "None";
    case RtrType::Send:
      return "Send";
    case RtrType::Write:
      return "Write";
    case RtrType::Read:
      return "Read";
  }
  return "?";
}

int mpa_initiate(int fd, const MpaConfig& cfg, MpaResult* result) {
  if (int e = check_config(cfg); e < 0) return e;
  Deadline deadline(cfg.timeout_ms);

  // RFC 5044 §7.1.2 rule 1: the Initiator sends a Request (M = markers we want to receive).
  MpaFrame req;
  req.kind = MpaFrameKind::Request;
  req.markers = cfg.markers_rx;
  req.crc = cfg.crc;
  req.revision = cfg.revision;
  req.private_data = cfg.private_data;
  req.rdmap_ext = cfg.rdmap_ext;
  if (cfg.revision == wire::kMpaRevision2) {
    // RFC 6581: our IRD/ORD, and in peer-to-peer mode the RTR message we are willing to send.
    MpaV2Params v2;
    v2.ird = cfg.ird;
    v2.ord = cfg.ord;
    v2.peer_to_peer = cfg.rtr != RtrType::None;
    set_rtr_bits(&v2, cfg.rtr);
    req.v2 = v2;
  }
  if (int e = send_frame(fd, req, deadline); e < 0) return e;

  // RFC 5044 §7.1.2 rule 3: receive and validate the Reply; malformed -> close.
  MpaFrameDecoder dec(MpaFrameKind::Reply);
  if (int e = read_frame(fd, &dec, deadline); e < 0) return e;
  const MpaFrame& rep = dec.frame();
  // The Responder answers with at most our revision.
  if (rep.revision > cfg.revision) return -EPROTO;

  MpaResult r{};
  r.crc = cfg.crc || rep.crc;  // RFC 5044 §4.4: CRC unless both sides set C = 0
  r.markers_rx = cfg.markers_rx;
  r.markers_tx = rep.markers;
  r.revision = rep.revision;
  r.ird = cfg.ird;
  r.ord = cfg.ord;
  r.rtr = RtrType::None;
  r.rejected = rep.reject;
  r.rdmap_ext = cfg.rdmap_ext && rep.rdmap_ext;
  r.peer_private_data.assign(rep.private_data.begin(), rep.private_data.end());
  if (rep.v2 && req.v2) {
    // RFC 6581 IRD/ORD, uiw.ko's policy (uiw-setup.h); a peer ORD beyond our IRD limit is
    // insufficient IRD.
    if (int e = settle_ird_ord(&r, *rep.v2); e < 0) return e;
    if (rep.v2->peer_to_peer) {
      int chosen = rep.v2->rtr_send + rep.v2->rtr_write + rep.v2->rtr_read;
      // The Responder must pick exactly one RTR type, and one we offered.
      if (!req.v2->peer_to_peer || chosen != 1 || !offered(*rep.v2, cfg.rtr)) return -EPROTO;
      r.rtr = cfg.rtr;
    }
  }
  *result = std::move(r);
  if (result->rejected) return -ECONNREFUSED;  // rule 3: exit MPA, TCP left to the ULP
  // RFC 5044 §7.1.1: with M = 1 the peer requires Markers in what we send.
  if (result->markers_tx && !cfg.can_send_markers) return -EOPNOTSUPP;
  return 0;
}

int mpa_respond(int fd, const MpaConfig& cfg, MpaResult* result,
                const std::function<bool(const MpaResult& request, std::vector<uint8_t>* reply_pd)>&
                    accept_fn) {
  if (int e = check_config(cfg); e < 0) return e;
  Deadline deadline(cfg.timeout_ms);

  // RFC 5044 §7.1.2 rule 2: wait for and validate the Request; improperly formatted -> close.
  MpaFrameDecoder dec(MpaFrameKind::Request);
  if (int e = read_frame(fd, &dec, deadline); e < 0) return e;
  const MpaFrame& req = dec.frame();

  MpaResult r{};
  r.revision = std::min(cfg.revision, req.revision);  // answer with min(ours, theirs)
  r.crc = cfg.crc || req.crc;                         // RFC 5044 §4.4
  r.markers_tx = req.markers;                         // per direction, RFC 5044 §7.1.1
  r.markers_rx = cfg.markers_rx;
  r.ird = cfg.ird;
  r.ord = cfg.ord;
  r.rtr = RtrType::None;
  r.rejected = false;
  r.rdmap_ext = cfg.rdmap_ext && req.rdmap_ext;
  r.peer_private_data.assign(req.private_data.begin(), req.private_data.end());

  std::optional<MpaV2Params> v2;
  if (r.revision == wire::kMpaRevision2 && req.v2) {
    // RFC 6581: reply with the already reduced values (see mpa_negotiate.h).
    MpaV2Params p;
    if (int e = settle_ird_ord(&r, *req.v2); e < 0) return e;
    p.ird = r.ird;
    p.ord = r.ord;
    if (req.v2->peer_to_peer && cfg.rtr != RtrType::None) {
      RtrType pick = RtrType::None;
      if (offered(*req.v2, cfg.rtr)) {
        pick = cfg.rtr;
      } else {
        for (RtrType t : {RtrType::Write, RtrType::Send, RtrType::Read})
          if (pick == RtrType::None && offered(*req.v2, t)) pick = t;
      }
      if (pick != RtrType::None) {
        p.peer_to_peer = true;
        set_rtr_bits(&p, pick);
        r.rtr = pick;
      }
    }
    v2 = p;
  }

  std::vector<uint8_t> reply_pd = cfg.private_data;
  bool reject = false;
  if (r.markers_tx && !cfg.can_send_markers) {
    reject = true;  // we cannot honour the peer's M bit
  } else if (accept_fn && !accept_fn(r, &reply_pd)) {
    reject = true;  // rule 2: well formed, but the ULP refuses it
  }
  if (reply_pd.size() > wire::kMpaMaxPrivateData - (v2 ? wire::kMpaV2ParamsSize : 0))
    return -EINVAL;

  MpaFrame rep;
  rep.kind = MpaFrameKind::Reply;
  rep.markers = cfg.markers_rx;
  rep.crc = r.crc;  // C = 1 whenever CRC will be used (RFC 5044 §4.4: if either side asks)
  rep.reject = reject;
  rep.revision = r.revision;
  rep.v2 = v2;
  rep.rdmap_ext = r.rdmap_ext;  // only when the Request offered it too
  rep.private_data = reply_pd;
  if (int e = send_frame(fd, rep, deadline); e < 0) return e;

  r.rejected = reject;
  *result = std::move(r);
  return reject ? -ECONNREFUSED : 0;
}

}  // namespace uiw::transport
