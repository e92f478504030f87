/* SPDX-License-Identifier: (GPL-2.0 WITH Linux-syscall-note) OR BSD-3-Clause */
/*
 * Connection setup parsers and policy shared by uiw.ko (kernel/uiw_mpa.c, uiw_cm_conn.c,
 * uiw_rtr.c, uiw_sctp.c), the host side (src/wire/mpa_frame.cpp, src/wire/sctp.cpp,
 * src/transport/mpa_negotiate.cpp)
 * and the libFuzzer target tests/fuzz/fuzz_setup.cpp: one parser per setup message, one
 * IRD/ORD rule, so that what the tests exercise is what ships. C, static inline, no library
 * calls: builds in the kernel and in user space (C and C++).
 */
#ifndef UIW_SETUP_H
#define UIW_SETUP_H

#include <linux/types.h>

#ifdef __cplusplus
extern "C" {
#endif

static inline __u16 uiw_setup_be16(const __u8 *p)
{
	return (__u16)(p[0] << 8 | p[1]);
}

static inline __u32 uiw_setup_be32(const __u8 *p)
{
	return (__u32)p[0] << 24 | (__u32)p[1] << 16 | (__u32)p[2] << 8 | p[3];
}

/*
 * MPA Request / Reply frame (RFC 5044 §7.1.1): 16-octet key, a 16-bit word of flags (octet
 * 16) and revision (octet 17), PD_Length (at most 512), private data. RFC 6581 §7.1 puts the
 * IRD/ORD word first in the private data of a revision 2 frame with the enhanced flag (the
 * bit Linux siw, cxgb4 and qed use: 0x10 of octet 16).
 */
#define UIW_MPA_KEY_LEN 16
#define UIW_MPA_HDR_LEN 20		/* key + flags/revision + PD_Length */
#define UIW_MPA_MAX_PD 512		/* RFC 5044 §7.1.1 */
#define UIW_MPA_V2_LEN 4		/* RFC 6581 IRD/ORD word, first in private data */

#define UIW_MPA_MARKERS 0x8000
#define UIW_MPA_CRC 0x4000
#define UIW_MPA_REJECT 0x2000
#define UIW_MPA_ENHANCED 0x1000
/*
 * uiw's own RFC 7306 agreement (RFC 7306 defines no negotiation; its §1.1 leaves it to the ULP),
 * in two of the Res bits of octet 16 that RFC 5044 §7.1.1 has receivers ignore (0x10 is RFC
 * 6581's enhanced flag, 0x08 siw's GSO experiment). The Initiator offers the extensions with
 * OFFER in its Request; a Responder that implements them too accepts with ACCEPT in its Reply,
 * and only then do both use them. Two bits, not one: siw builds its Reply from the Request's
 * header and so echoes Res bits it does not know; an echoed OFFER is not an acceptance.
 */
#define UIW_MPA_RDMAP_EXT_OFFER 0x0400
#define UIW_MPA_RDMAP_EXT_ACCEPT 0x0200

/* The RFC 7306 bit of a Request (request != 0) or of a Reply. */
static inline __u16 uiw_mpa_rdmap_ext_bit(int request)
{
	return request ? UIW_MPA_RDMAP_EXT_OFFER : UIW_MPA_RDMAP_EXT_ACCEPT;
}

#define UIW_MPA_REV_MASK 0x00ff
#define UIW_MPA_REV1 1			/* RFC 5044 */
#define UIW_MPA_REV2 2			/* RFC 6581 */

#define UIW_MPA_V2_P2P 0x8000		/* A, in the IRD half: peer-to-peer mode */
#define UIW_MPA_V2_SEND_RTR 0x4000	/* B, in the IRD half: zero-length Send RTR */
#define UIW_MPA_V2_WRITE_RTR 0x8000	/* C, in the ORD half: zero-length Write RTR */
#define UIW_MPA_V2_READ_RTR 0x4000	/* D, in the ORD half: zero-length Read RTR */
#define UIW_MPA_V2_MASK 0x3fff

/* Why a frame header is malformed; any of them closes the connection unanswered (§7.1.2). */
enum uiw_mpa_hdr_status {
	UIW_MPA_HDR_OK = 0,
	UIW_MPA_HDR_BAD_KEY,		/* not the key expected: no MPA peer */
	UIW_MPA_HDR_BAD_REV,		/* a revision other than 1 and 2 */
	UIW_MPA_HDR_PD_TOO_LONG,	/* PD_Length over 512 */
	UIW_MPA_HDR_NO_V2,		/* enhanced revision 2 without room for the IRD/ORD word */
};

static inline const __u8 *uiw_mpa_key(int request)
{
	return (const __u8 *)(request ? "MPA ID Req Frame" : "MPA ID Rep Frame");
}

/* Octets [from, to) of a header, to <= 16, match the expected key (checkable as they arrive). */
static inline int uiw_mpa_key_match(const __u8 *h, unsigned int from, unsigned int to,
				    int request)
{
	const __u8 *k = uiw_mpa_key(request);

	for (; from < to && from < UIW_MPA_KEY_LEN; from++)
		if (h[from] != k[from])
			return 0;
	return 1;
}

/* The 20-octet header h: *bits (flags | revision) and *pd_len, or why it is malformed. */
static inline enum uiw_mpa_hdr_status uiw_mpa_hdr_parse(const __u8 *h, int request,
							__u16 *bits, __u16 *pd_len)
{
	__u8 rev;

	if (!uiw_mpa_key_match(h, 0, UIW_MPA_KEY_LEN, request))
		return UIW_MPA_HDR_BAD_KEY;
	*bits = uiw_setup_be16(h + 16);
	*pd_len = uiw_setup_be16(h + 18);
	rev = *bits & UIW_MPA_REV_MASK;
	if (rev != UIW_MPA_REV1 && rev != UIW_MPA_REV2)
		return UIW_MPA_HDR_BAD_REV;
	if (*pd_len > UIW_MPA_MAX_PD)
		return UIW_MPA_HDR_PD_TOO_LONG;
	if (rev == UIW_MPA_REV2 && (*bits & UIW_MPA_ENHANCED) && *pd_len < UIW_MPA_V2_LEN)
		return UIW_MPA_HDR_NO_V2;
	return UIW_MPA_HDR_OK;
}

/* The RFC 6581 IRD/ORD word, decoded. */
struct uiw_mpa_v2 {
	__u16 ird;
	__u16 ord;
	__u8 p2p;
	__u8 send_rtr;
	__u8 write_rtr;
	__u8 read_rtr;
};

/* p: the first UIW_MPA_V2_LEN octets of the private data. */
static inline void uiw_mpa_v2_parse(const __u8 *p, struct uiw_mpa_v2 *v2)
{
	__u16 ird = uiw_setup_be16(p);
	__u16 ord = uiw_setup_be16(p + 2);

	v2->ird = ird & UIW_MPA_V2_MASK;
	v2->ord = ord & UIW_MPA_V2_MASK;
	v2->p2p = !!(ird & UIW_MPA_V2_P2P);
	v2->send_rtr = !!(ird & UIW_MPA_V2_SEND_RTR);
	v2->write_rtr = !!(ord & UIW_MPA_V2_WRITE_RTR);
	v2->read_rtr = !!(ord & UIW_MPA_V2_READ_RTR);
}

/*
 * Connect-on-RTR private data (uiw's own; kernel/uiw_rtr.h documents the layout): 48 octets
 * after the IRD/ORD word of the Request, Reply or Reject.
 */
#define UIW_RTR_PD_MAGIC 0x55495752	/* "UIWR" */
#define UIW_RTR_PD_VERSION 1
#define UIW_RTR_PD_LEN 48

enum uiw_rtr_pd_type {
	UIW_RTR_PD_REQUEST = 1,
	UIW_RTR_PD_ACCEPT = 2,
	UIW_RTR_PD_REJECT = 3,
};

enum uiw_rtr_reason {
	UIW_RTR_OK = 0,
	UIW_RTR_BAD_PD = 1,	/* not uiw connect-on-RTR private data */
	UIW_RTR_VERSION = 2,	/* private data version not spoken here */
	UIW_RTR_NO_QP = 3,	/* no such QP on the device at that address */
	UIW_RTR_NOT_READY = 4,	/* the QP exists but is not in RTR yet (retryable) */
	UIW_RTR_MISMATCH = 5,	/* the QP waits for another peer QPN or address */
	UIW_RTR_BUSY = 6,	/* the QP is connected or connecting already */
};

struct uiw_rtr_wire_pd {
	__u8 version;
	__u8 type;
	__u16 reason;
	__u32 src_qpn;
	__u32 dst_qpn;
	__u8 src_gid[16];
	__u8 dst_gid[16];
};

/* UIW_RTR_OK, or the reason to refuse the frame: BAD_PD (short, other magic), VERSION. */
static inline int uiw_rtr_pd_parse(const __u8 *b, __u32 len, struct uiw_rtr_wire_pd *pd)
{
	unsigned int i;

	if (len < UIW_RTR_PD_LEN || uiw_setup_be32(b) != UIW_RTR_PD_MAGIC)
		return UIW_RTR_BAD_PD;
	pd->version = b[4];
	pd->type = b[5];
	pd->reason = uiw_setup_be16(b + 6);
	pd->src_qpn = uiw_setup_be32(b + 8);
	pd->dst_qpn = uiw_setup_be32(b + 12);
	for (i = 0; i < 16; i++) {
		pd->src_gid[i] = b[16 + i];
		pd->dst_gid[i] = b[32 + i];
	}
	return pd->version == UIW_RTR_PD_VERSION ? UIW_RTR_OK : UIW_RTR_VERSION;
}

/*
 * DDP Stream Session Control message (RFC 5043 §5.2.3), the user data of a PPID 17 chunk:
 * DDP-SSN (16) | Function Code (16) | Private Data (the rest, at most 512 octets).
 */
#define UIW_SCTP_PPID_SEGMENT 16	/* RFC 5043 §5.2 */
#define UIW_SCTP_PPID_CONTROL 17
#define UIW_SCTP_CTRL_HDR 4
#define UIW_SCTP_MAX_PD 512
#define UIW_SCTP_FN_INITIATE 1
#define UIW_SCTP_FN_ACCEPT 2
#define UIW_SCTP_FN_REJECT 3
#define UIW_SCTP_FN_TERMINATE 4

/* Why a Session Control message is malformed. */
enum uiw_sctp_ctrl_status {
	UIW_SCTP_CTRL_OK = 0,
	UIW_SCTP_CTRL_SHORT,		/* under the 4-octet header */
	UIW_SCTP_CTRL_PD_TOO_LONG,	/* more than 512 octets of private data */
	UIW_SCTP_CTRL_BAD_FN,		/* a function code other than 1-4 */
	UIW_SCTP_CTRL_TERMINATE_PD,	/* a Terminate "MUST NOT" carry private data */
};

/* m, len: one whole message. *ssn and *fn filled; private data is m + 4, len - 4 octets. */
static inline enum uiw_sctp_ctrl_status uiw_sctp_ctrl_parse(const __u8 *m, __u32 len,
							    __u16 *ssn, __u16 *fn)
{
	if (len < UIW_SCTP_CTRL_HDR)
		return UIW_SCTP_CTRL_SHORT;
	if (len - UIW_SCTP_CTRL_HDR > UIW_SCTP_MAX_PD)
		return UIW_SCTP_CTRL_PD_TOO_LONG;
	*ssn = uiw_setup_be16(m);
	*fn = uiw_setup_be16(m + 2);
	if (*fn < UIW_SCTP_FN_INITIATE || *fn > UIW_SCTP_FN_TERMINATE)
		return UIW_SCTP_CTRL_BAD_FN;
	if (*fn == UIW_SCTP_FN_TERMINATE && len > UIW_SCTP_CTRL_HDR)
		return UIW_SCTP_CTRL_TERMINATE_PD;
	return UIW_SCTP_CTRL_OK;
}

/*
 * RFC 6581 §3 IRD/ORD, on either side once the peer's IRD/ORD word is known (the Responder
 * before its Reply, which carries the settled values; the Initiator on the Reply). *ird and
 * *ord hold our wanted values on entry and the settled ones on return:
 *  - never more outbound RDMA Reads in flight than the peer can take: ORD = min(ORD, peer IRD);
 *  - enough inbound Read resources for the peer's ORD: the relaxed rule of RFC 6581 §3 raises
 *    our IRD to the peer's ORD, up to max_ird (the device limit).
 * Returns 0, or -1 when the peer's ORD exceeds max_ird (the connection is refused).
 */
static inline int uiw_settle_ird_ord(__u32 *ird, __u32 *ord, __u32 peer_ird, __u32 peer_ord,
				     __u32 max_ird)
{
	if (*ord > peer_ird)
		*ord = peer_ird;
	if (peer_ord > *ird) {
		if (peer_ord > max_ird)
			return -1;
		*ird = peer_ord;
	}
	return 0;
}

#ifdef __cplusplus
}
#endif

#endif /* UIW_SETUP_H */
