/* SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause */
/*
 * MPA Request/Reply frames (RFC 5044 §7.1.1) and the RFC 6581 enhanced-setup word.
 *
 * The kernel sends and reads exactly these frames and nothing else: after the exchange
 * the TCP stream is at the first FPDU, which belongs to the provider.
 */
#ifndef UIW_MPA_H
#define UIW_MPA_H

#include <linux/net.h>
#include <linux/types.h>

#define UIW_MPA_KEY_LEN 16
#define UIW_MPA_HDR_LEN 20		/* key + flags/revision + PD_Length */
#define UIW_MPA_MAX_PD 512		/* RFC 5044 §7.1.1: PD_Length at most 512 */
#define UIW_MPA_V2_LEN 4		/* RFC 6581 IRD/ORD word, first in private data */

/* The 16-bit word at octet 16 (network order): |M|C|R|Res(5)|Rev(8)| */
#define UIW_MPA_MARKERS 0x8000
#define UIW_MPA_CRC 0x4000
#define UIW_MPA_REJECT 0x2000
#define UIW_MPA_ENHANCED 0x1000		/* RFC 6581: reserved bit marking enhanced setup */
#define UIW_MPA_REV_MASK 0x00ff

#define UIW_MPA_REV1 1			/* RFC 5044 */
#define UIW_MPA_REV2 2			/* RFC 6581 */

/* RFC 6581 word: |A|B| IRD(14) |C|D| ORD(14)| */
#define UIW_MPA_V2_P2P 0x8000		/* A, in the IRD half: peer-to-peer mode */
#define UIW_MPA_V2_SEND_RTR 0x4000	/* B, in the IRD half: zero-length Send RTR */
#define UIW_MPA_V2_WRITE_RTR 0x8000	/* C, in the ORD half: zero-length Write RTR */
#define UIW_MPA_V2_READ_RTR 0x4000	/* D, in the ORD half: zero-length Read RTR */
#define UIW_MPA_V2_MASK 0x3fff

/* Values of the mpa_rtr module parameter: the RTR types offered / accepted. */
#define UIW_MPA_RTR_WRITE 0x1
#define UIW_MPA_RTR_READ 0x2

/* Bits of the mpa_markers module parameter (policy in uiw_cm_conn.c). */
#define UIW_MARKERS_ASK_INITIATOR 0x1	/* M in our Request */
#define UIW_MARKERS_ASK_RESPONDER 0x2	/* M in our Reply */
#define UIW_MARKERS_REFUSE 0x4		/* never insert Markers for a peer that asks */

struct uiw_mpa_v2 {
	u16 ird;
	u16 ord;
	bool p2p;
	bool send_rtr;
	bool write_rtr;
	bool read_rtr;
};

/* One frame being received; bytes arrive in any number of pieces. */
struct uiw_mpa_rx {
	u8 hdr[UIW_MPA_HDR_LEN];
	u8 pd[UIW_MPA_MAX_PD];
	unsigned int got;		/* bytes of header + private data so far */
	u16 bits;			/* flags and revision, host order */
	u16 pd_len;
};

static inline u8 uiw_mpa_rev(u16 bits)
{
	return bits & UIW_MPA_REV_MASK;
}

int uiw_mpa_recv(struct socket *sock, struct uiw_mpa_rx *rx, bool request);
int uiw_mpa_send(struct socket *sock, bool request, u16 bits,
		 const struct uiw_mpa_v2 *v2, const void *pd, u8 pd_len);
void uiw_mpa_v2_decode(const u8 *p, struct uiw_mpa_v2 *v2);

#endif /* UIW_MPA_H */
