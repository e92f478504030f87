/* SPDX-License-Identifier: (GPL-2.0 WITH Linux-syscall-note) OR BSD-3-Clause */
/*
 * Connection setup policy shared by uiw.ko (kernel/uiw_cm_conn.c, uiw_rtr.c) and the host-side
 * MPA negotiator (src/transport/mpa_negotiate.cpp), so that what the integration tests
 * negotiate is what ships. C, static inline, no library calls: builds in the kernel and in
 * user space (C and C++).
 */
#ifndef UIW_SETUP_H
#define UIW_SETUP_H

#include <linux/types.h>

#ifdef __cplusplus
extern "C" {
#endif

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
