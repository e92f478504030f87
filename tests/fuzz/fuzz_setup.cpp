// libFuzzer target: uiw.ko's connection setup parsers and IRD/ORD rule (kernel-abi/uiw-setup.h),
// the same code the kernel module compiles: the MPA frame header and RFC 6581 word, the
// connect-on-RTR private data, the DDP Stream Session Control message, and
// uiw_settle_ird_ord. The first octet picks the part.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "uiw-setup.h"
#include "wire/mpa_frame.h"
#include "wire/sctp.h"

namespace {

void mpa_header(const uint8_t* d, size_t n, bool request) {
  if (n < UIW_MPA_HDR_LEN) return;
  __u16 bits = 0, pd_len = 0;
  const enum uiw_mpa_hdr_status st = uiw_mpa_hdr_parse(d, request, &bits, &pd_len);
  // The host decoder (the same parser underneath) reaches the same verdict on the header.
  uiw::wire::MpaFrameDecoder dec(request ? uiw::wire::MpaFrameKind::Request
                                         : uiw::wire::MpaFrameKind::Reply);
  dec.consume({d, UIW_MPA_HDR_LEN});
  const bool host_ok = dec.error() == uiw::wire::MpaFrameDecoder::Error::None;
  if (host_ok != (st == UIW_MPA_HDR_OK)) abort();
  if (st != UIW_MPA_HDR_OK) return;
  const unsigned rev = bits & UIW_MPA_REV_MASK;
  if (pd_len > UIW_MPA_MAX_PD || (rev != UIW_MPA_REV1 && rev != UIW_MPA_REV2)) abort();
  if (rev == UIW_MPA_REV2 && (bits & UIW_MPA_ENHANCED) && pd_len < UIW_MPA_V2_LEN) abort();
  if (n >= UIW_MPA_HDR_LEN + UIW_MPA_V2_LEN) {
    uiw_mpa_v2 v2;
    uiw_mpa_v2_parse(d + UIW_MPA_HDR_LEN, &v2);
    if (v2.ird > UIW_MPA_V2_MASK || v2.ord > UIW_MPA_V2_MASK || v2.p2p > 1 || v2.send_rtr > 1 ||
        v2.write_rtr > 1 || v2.read_rtr > 1)
      abort();
  }
}

void rtr_pd(const uint8_t* d, size_t n) {
  uiw_rtr_wire_pd pd;
  std::memset(&pd, 0xA5, sizeof pd);
  const int r = uiw_rtr_pd_parse(d, static_cast<__u32>(n), &pd);
  if (n < UIW_RTR_PD_LEN) {
    if (r != UIW_RTR_BAD_PD) abort();
    return;
  }
  if (r == UIW_RTR_BAD_PD) return;
  if (r != (d[4] == UIW_RTR_PD_VERSION ? UIW_RTR_OK : UIW_RTR_VERSION)) abort();
  if (pd.type != d[5] || pd.src_qpn != uiw_setup_be32(d + 8) ||
      pd.dst_qpn != uiw_setup_be32(d + 12) || std::memcmp(pd.src_gid, d + 16, 16) ||
      std::memcmp(pd.dst_gid, d + 32, 16))
    abort();
}

void settle(const uint8_t* d, size_t n) {
  if (n < 20) return;
  __u32 v[5];
  std::memcpy(v, d, sizeof v);
  __u32 ird = v[0], ord = v[1];
  const __u32 peer_ird = v[2], peer_ord = v[3], max_ird = v[4];
  const int r = uiw_settle_ird_ord(&ird, &ord, peer_ird, peer_ord, max_ird);
  // Never more Reads out than the peer takes, never fewer in than the peer may send.
  if (ord > peer_ird || ord > v[1]) abort();
  if (r == 0 && (ird < peer_ord || ird < v[0] || (ird != v[0] && ird > max_ird))) abort();
  if (r != 0 && !(peer_ord > v[0] && peer_ord > max_ird)) abort();
}

void sctp_ctrl(const uint8_t* d, size_t n) {
  __u16 ssn = 0, fn = 0;
  const enum uiw_sctp_ctrl_status st = uiw_sctp_ctrl_parse(d, static_cast<__u32>(n), &ssn, &fn);
  // The host decoder (the same parser underneath) agrees.
  uiw::wire::SessionControl sc;
  const bool host_ok =
      uiw::wire::decode_session_control({d, n}, &sc) == uiw::wire::SctpDecodeError::None;
  if (host_ok != (st == UIW_SCTP_CTRL_OK)) abort();
  if (st != UIW_SCTP_CTRL_OK) return;
  if (n < UIW_SCTP_CTRL_HDR || n - UIW_SCTP_CTRL_HDR > UIW_SCTP_MAX_PD) abort();
  if (fn < UIW_SCTP_FN_INITIATE || fn > UIW_SCTP_FN_TERMINATE) abort();
  if (fn == UIW_SCTP_FN_TERMINATE && n != UIW_SCTP_CTRL_HDR) abort();
  if (sc.ddp_ssn != ssn || sc.private_data.size() != n - UIW_SCTP_CTRL_HDR) abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint8_t* d = data + 1;
  const size_t n = size - 1;
  switch (data[0] % 5) {
    case 0:
      mpa_header(d, n, true);
      break;
    case 1:
      mpa_header(d, n, false);
      break;
    case 2:
      rtr_pd(d, n);
      break;
    case 3:
      settle(d, n);
      break;
    default:
      sctp_ctrl(d, n);
      break;
  }
  return 0;
}
