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

#include "uiw-setup.h"

#define UIW_MPA_RTR_WRITE 0x1
#define UIW_MPA_RTR_READ 0x2

/* Bits of the mpa_markers module parameter (policy in uiw_cm_conn.c). */
#define UIW_MARKERS_ASK_INITIATOR 0x1	/* M in our Request */
#define UIW_MARKERS_ASK_RESPONDER 0x2	/* M in our Reply */
#define UIW_MARKERS_REFUSE 0x4		/* never insert Markers for a peer that asks */

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

#endif /* UIW_MPA_H */
