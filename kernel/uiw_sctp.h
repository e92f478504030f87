/* SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause */
/*
 * DDP over SCTP (RFC 5043) connection setup in uiw.ko.
 *
 * A uiw device whose sysfs attribute `llp` is "sctp" runs its new connections over
 * one-to-one SCTP associations instead of TCP + MPA. The iw_cm logic of uiw_cm*.c is shared:
 * only the socket and the setup messages differ. The MPA Request / Reply become DDP Stream
 * Session Initiate / Accept / Reject (PPID 17, RFC 5043 §5.2.3); uiw_sctp_recv_frame()
 * presents a received Session Control message to the MPA code as an enhanced (RFC 6581)
 * frame, so the IRD/ORD negotiation, the private data limits and the accept/reject paths
 * are exactly those of MPA.
 *
 * uiw convention (RFC 5043 defines no IRD/ORD exchange): the private data of Initiate,
 * Accept and Reject leads with the RFC 6581 IRD/ORD word (4 octets, no peer-to-peer bits),
 * then the ULP's private data (at most 255 octets from iw_cm; 4 + 255 <= 512).
 */
#ifndef UIW_SCTP_H
#define UIW_SCTP_H

#include <linux/types.h>

#include "uiw-setup.h"

struct device_attribute;
struct socket;
struct sockaddr_storage;
struct uiw_cep;
struct uiw_dev;
struct uiw_mpa_rx;
struct uiw_mpa_v2;

#define UIW_SCTP_ADAPTATION_DDP 1	/* RFC 5043 §5.1 */

/* sysfs /sys/class/infiniband/<dev>/llp: tcp|sctp (default tcp), read and set by the admin. */
extern struct device_attribute dev_attr_llp;

/* IPPROTO_SCTP if the device runs new connections over SCTP, else IPPROTO_TCP. */
int uiw_llp_protocol(struct uiw_dev *udev);
/* Socket options every DDP association needs (adaptation indication, streams, events). */
int uiw_sctp_sock_setup(struct socket *s);
/* TCP_NODELAY or SCTP_NODELAY, by the socket's protocol. */
void uiw_sock_set_nodelay(struct socket *s);
bool uiw_cep_sctp(const struct uiw_cep *cep);
/* Multihoming policy (§7.2): the netdev's IPv4 addresses; see uiw_sctp.c. */
int uiw_sctp_bind(struct uiw_dev *udev, struct socket *s,
		  const struct sockaddr_storage *laddr);
void uiw_sctp_bind_more(struct uiw_dev *udev, struct socket *s);

/* Setup messages. Each returns 0 or -errno. */
int uiw_sctp_send_initiate(struct uiw_cep *cep);
int uiw_sctp_send_accept(struct uiw_cep *cep, const struct uiw_mpa_v2 *v2,
			 const void *pd, u8 pd_len);
int uiw_sctp_send_reject(struct uiw_cep *cep, const void *pd, u8 pd_len);
/* Process context: the association is gone (see uiw_sctp.c). */
bool uiw_sctp_assoc_ended(struct socket *s);
/* Passive side, after the Accept: true once the peer acknowledged it (see uiw_sctp.c). */
bool uiw_sctp_accept_acked(struct uiw_cep *cep);
/*
 * Reads the peer's Session Control message into rx as an MPA frame would be: 0 (rx->bits,
 * rx->pd, rx->pd_len filled), -EAGAIN (nothing yet), -ECONNRESET (peer gone or Session
 * Terminate), -EPROTO (not a legal session sequence: a Session Terminate was sent when the
 * peer is a DDP endpoint, RFC 5043 §6.1).
 */
int uiw_sctp_recv_frame(struct uiw_cep *cep, struct uiw_mpa_rx *rx, bool request);

#endif /* UIW_SCTP_H */
