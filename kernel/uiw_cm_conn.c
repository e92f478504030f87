// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
/*
 * uiw connection manager: iw_cm provider ops (listen, connect, accept, reject) and the
 * MPA Request/Reply negotiation (RFC 5044 §7.1, RFC 6581).
 *
 * Negotiation policy:
 *   - The initiator sends MPA revision `mpa_rev` (default 2). Revision 2 uses RFC 6581
 *     enhanced setup: the IRD/ORD word leads the private data and, with `mpa_p2p`
 *     (default on), peer-to-peer mode is requested offering zero-length Write and Read
 *     RTRs. The responder answers with the Request's revision (1 or 2; others are
 *     closed), echoes peer-to-peer mode only if asked, and picks Write RTR over Read RTR.
 *     `mpa_rtr` (1 Write, 2 Read, 3 both: default) limits the RTR types the initiator
 *     offers and the responder accepts. A Request offering no acceptable type (e.g. only
 *     Send RTR, which would consume a receive the application posted) is rejected.
 *   - IRD/ORD (RFC 6581), relaxed: a side never uses an ORD above the peer's IRD and
 *     raises its own IRD up to the peer's ORD within the device limit, else it fails.
 *   - CRC (RFC 5044 §7.1.1): requested when `mpa_crc` is set; used when either side asks.
 *   - Markers (RFC 5044 §4.3, §7.1.1; M is the receiver's demand, per direction):
 *     `mpa_markers` bit 1 sets M in our Request, bit 2 in our Reply (the peer must then
 *     insert Markers towards us). A peer's M is honoured (the provider inserts Markers:
 *     "All MPA senders MUST be able to generate Markers", §4.3) unless bit 4 (refuse) is
 *     set: then a Request with M gets a Reply with R set (the connection is refused,
 *     §7.1.2) and a Reply with M fails the connection (TCP closed, rdma_cm sees an error).
 *     Default 0: never ask, always honour.
 *   - Private data: at most 255 bytes of ULP data per frame (iw_cm carries its length in
 *     a u8); a peer sending more is refused.
 */

#include <linux/module.h>
#include <linux/tcp.h>
#include <net/ip.h>
#include <net/ipv6.h>
#include <net/sock.h>
#include <net/tcp.h>

#include "uiw-setup.h"
#include "uiw_cm.h"
#include "uiw_sctp.h"

static uint mpa_rev = UIW_MPA_REV2;
module_param(mpa_rev, uint, 0644);
MODULE_PARM_DESC(mpa_rev, "MPA revision the initiator sends: 1 (RFC 5044) or 2 (RFC 6581, default)");

static bool mpa_crc;
module_param(mpa_crc, bool, 0644);
MODULE_PARM_DESC(mpa_crc, "Request MPA CRC (used anyway when the peer requests it)");

static bool mpa_p2p = true;
module_param(mpa_p2p, bool, 0644);
MODULE_PARM_DESC(mpa_p2p, "Initiator requests RFC 6581 peer-to-peer mode (Write or Read RTR)");

static uint mpa_rtr = UIW_MPA_RTR_WRITE | UIW_MPA_RTR_READ;
module_param(mpa_rtr, uint, 0644);
MODULE_PARM_DESC(mpa_rtr, "RFC 6581 RTR types offered (initiator) and accepted (responder): 1 zero-length Write, 2 zero-length Read, 3 both (default)");

static uint mpa_markers;
module_param(mpa_markers, uint, 0644);
MODULE_PARM_DESC(mpa_markers, "MPA Markers (RFC 5044): 1 ask for them as initiator, 2 as responder, 4 refuse a peer that asks (default 0: never ask, insert them when asked)");

static bool mpa_rdmap_ext = true;
module_param(mpa_rdmap_ext, bool, 0644);
MODULE_PARM_DESC(mpa_rdmap_ext, "Offer the RFC 7306 extensions (atomics, Immediate Data) in MPA setup for QPs whose provider implements them; used only with a peer that offers them too (default 1)");

/*
 * Whether this side offers or accepts RFC 7306 for qp (UIW_MPA_RDMAP_EXT_*, uiw-setup.h): by
 * policy, and only for a provider that implements it (UIW_UCTX_F_RDMAP_EXT). Over SCTP no
 * setup message carries the offer, so it is never used there.
 */
bool uiw_rdmap_ext_offer(const struct uiw_cep *cep, const struct uiw_qp *qp)
{
	return READ_ONCE(mpa_rdmap_ext) && !uiw_cep_sctp(cep) && qp->uctx &&
	       qp->uctx->rdmap_ext;
}

/* The CRC policy for initiators outside iw_cm too (connect-on-RTR, uiw_rtr.c). */
bool uiw_mpa_crc_wanted(void)
{
	return READ_ONCE(mpa_crc);
}

static u16 uiw_mpa_bits(const struct uiw_cep_params *p, bool request)
{
	return p->rev | (p->crc ? UIW_MPA_CRC : 0) |
	       (p->markers_rx ? UIW_MPA_MARKERS : 0) |
	       (p->enhanced ? UIW_MPA_ENHANCED : 0) |
	       (p->rdmap_ext ? uiw_mpa_rdmap_ext_bit(request) : 0);
}

/* Passive side */

/* Leave the listener; true if the listener's list reference is now the caller's. */
bool uiw_cep_unlink_child(struct uiw_cep *cep)
{
	struct uiw_cep *lcep = cep->listener;
	bool linked = false;

	if (!lcep)
		return false;
	spin_lock_bh(&cep->udev->cep_lock);
	if (!list_empty(&cep->child_entry)) {
		list_del_init(&cep->child_entry);
		lcep->num_children--;
		linked = true;
	}
	spin_unlock_bh(&cep->udev->cep_lock);
	cep->listener = NULL;
	uiw_cep_put(lcep);
	return linked;
}

/* A child that never got to CONNECT_REQUEST goes away. Caller holds a reference. */
void uiw_cm_child_drop(struct uiw_cep *cep)
{
	bool linked = uiw_cep_unlink_child(cep);

	uiw_cep_finish(cep, true);
	if (linked)
		uiw_cep_put(cep);
}

/* A CONNECT_REQUEST nobody accepted in time, or whose peer left. */
void uiw_cm_pending_drop(struct uiw_cep *cep)
{
	bool claimed = xa_cmpxchg(&cep->udev->cep_xa, cep->id, cep, NULL,
				  GFP_KERNEL) == cep;

	uiw_cep_finish(cep, true);
	if (claimed)
		uiw_cep_put(cep);
}

/* Take a pending endpoint for iw_accept/iw_reject (its table reference moves to us). */
static struct uiw_cep *uiw_cm_claim(struct uiw_dev *udev, struct iw_cm_id *id)
{
	return xa_erase(&udev->cep_xa, (unsigned long)id->provider_data);
}

/*
 * Refuse a Request: a Reply with R set (RFC 5044 §7.1.2). With enhanced setup the
 * Reply still leads with an (empty) IRD/ORD word, as the Initiator will strip one.
 */
void uiw_cm_send_reject(struct uiw_cep *cep, const void *pd, u8 pd_len)
{
	struct uiw_mpa_v2 v2 = {};
	bool enhanced = cep->params.enhanced;
	u16 bits = uiw_mpa_rev(cep->req_bits) | UIW_MPA_REJECT |
		   (enhanced ? UIW_MPA_ENHANCED : 0);

	uiw_stats_conn_refused(cep->udev);
	if (uiw_cep_sctp(cep)) {	/* RFC 5043 Session Reject */
		uiw_sctp_send_reject(cep, pd, pd_len);
		return;
	}
	if (cep->sock)
		uiw_mpa_send(cep->sock, false, bits, enhanced ? &v2 : NULL, pd,
			     pd_len);
}

/* What a full listener can do for a connection that waits in its accept queue. */
enum uiw_child_room {
	UIW_ROOM_FREE,		/* an idle child can go (or went: uiw_cm_make_room) */
	UIW_ROOM_LATER,		/* a child's read is still queued on uiw_cm_wq */
	UIW_ROOM_NONE,		/* no child can go now: refuse the newcomer */
};

/*
 * The listener's backlog is full of children still waiting for their MPA Request: the oldest
 * idle one goes rather than the new connection being refused. An Initiator sends its Request
 * as soon as TCP is up (RFC 5044 §7.1), so a peer that holds connections open without one
 * cannot keep the next legitimate connection out; it only loses its oldest. Only a child
 * whose read has run (request_looked) and left no bytes unread is considered: until then its
 * Request may be in its socket already or, with the Initiator on this host, be sent by work
 * queued ahead of that read. A Request still on the wire is not seen; the Initiator's
 * connection is reset then. Dropped here, not by arming its timer: uiw_cm_wq is ordered, so
 * the timer would run only after this accept loop, which would find the same child first
 * again for every connection it accepts and let the children outgrow the backlog.
 * With drop false, only says whether the oldest looked child could go.
 */
static enum uiw_child_room uiw_cm_make_room(struct uiw_cep *lcep, bool drop)
{
	struct uiw_dev *udev = lcep->udev;
	enum uiw_child_room room;
	struct uiw_cep *old = NULL, *c;

	spin_lock_bh(&udev->cep_lock);
	list_for_each_entry(c, &lcep->children, child_entry) {
		if (READ_ONCE(c->request_looked)) {
			old = c;
			uiw_cep_get(old);
			break;
		}
	}
	spin_unlock_bh(&udev->cep_lock);
	if (!old)
		return UIW_ROOM_LATER;	/* every child's first read is still queued */
	if (!mutex_trylock(&old->lock)) {
		room = UIW_ROOM_NONE;
	} else {
		if (old->state != UIW_CEP_AWAIT_MPAREQ || !old->sock)
			room = UIW_ROOM_NONE;
		else if (skb_queue_empty_lockless(&old->sock->sk->sk_receive_queue))
			room = UIW_ROOM_FREE;
		else	/* bytes came after its read, and have their own read queued */
			room = UIW_ROOM_LATER;
		if (room == UIW_ROOM_FREE && drop)
			uiw_cm_child_drop(old);
		mutex_unlock(&old->lock);
	}
	uiw_cep_put(old);
	return room;
}

/*
 * Takes at most UIW_ACCEPT_BATCH connections, true if it stopped there (more may wait) or if a
 * full backlog waits for its children's reads: the caller queues the listener again, behind
 * the work already queued. uiw_cm_wq is ordered and serves every endpoint of every device, so
 * a peer that connects as fast as it can must not hold it: the MPA exchanges, timers and
 * closes of other connections run in between.
 */
bool uiw_cm_listen_accept(struct uiw_cep *lcep)
{
	struct uiw_dev *udev = lcep->udev;
	unsigned int taken = 0;

	while (lcep->state == UIW_CEP_LISTENING) {
		struct uiw_cep *cep = NULL;
		struct socket *s;
		bool full;

		if (taken++ == UIW_ACCEPT_BATCH)
			return true;
		spin_lock_bh(&udev->cep_lock);
		full = lcep->num_children >= lcep->backlog;
		spin_unlock_bh(&udev->cep_lock);
		/* A full listener makes room only for a connection that is there. */
		if (full) {
			if (!READ_ONCE(lcep->sock->sk->sk_ack_backlog))
				break;
			/* The newcomer waits in the accept queue for the children's reads. */
			if (uiw_cm_make_room(lcep, false) == UIW_ROOM_LATER)
				return true;
		}
		if (kernel_accept(lcep->sock, &s, O_NONBLOCK))
			break;
		/* Connect-on-RTR: only another host's uiw.ko may ask (uiw_rtr.c). */
		if (!uiw_rtr_admit(lcep, s)) {
			sock_no_linger(s->sk);
			sock_release(s);
			continue;
		}
		/* Bytes that came meanwhile keep their child: the newcomer is refused. */
		if (!full || uiw_cm_make_room(lcep, true) == UIW_ROOM_FREE)
			cep = uiw_cep_alloc(udev);
		if (!cep) {
			sock_release(s);
			continue;
		}

		mutex_lock_nested(&cep->lock, SINGLE_DEPTH_NESTING);
		uiw_cep_get(lcep);
		cep->listener = lcep;
		/* The listener's list takes over the initial reference. */
		spin_lock_bh(&udev->cep_lock);
		list_add_tail(&cep->child_entry, &lcep->children);
		lcep->num_children++;
		spin_unlock_bh(&udev->cep_lock);

		uiw_sock_set_nodelay(s);
		cep->state = UIW_CEP_AWAIT_MPAREQ;
		/* The child inherited the listener's callback: restore the listener's original. */
		uiw_sk_assoc(cep, s, UIW_SK_MPA, lcep->sk_data_ready);
		uiw_cep_arm_timer(cep, UIW_MPAREQ_TIMEOUT);
		uiw_cep_post(cep, UIW_CEP_EV_READ);
		mutex_unlock(&cep->lock);
	}
	return false;
}

static int uiw_cm_upcall_request(struct uiw_cep *cep, const void *pd, u8 pd_len)
{
	struct uiw_cep *lcep = cep->listener;
	struct uiw_dev *udev = cep->udev;
	struct iw_cm_event ev = {
		.event = IW_CM_EVENT_CONNECT_REQUEST,
		.private_data = (void *)pd,
		.private_data_len = pd_len,
		.provider_data = (void *)(unsigned long)cep->id,
	};
	int rv = -ECONNRESET;

	uiw_cep_addrs(cep, &ev);
	/*
	 * As siw reports them: rdma_cm turns ird into initiator_depth (bounded by the peer's
	 * IRD) and ord into responder_resources (needed for the peer's ORD).
	 */
	if (cep->params.enhanced) {
		ev.ird = min_t(u16, cep->peer_v2.ird, UIW_MAX_ORD);
		ev.ord = min_t(u16, cep->peer_v2.ord, UIW_MAX_IRD);
	} else {
		ev.ird = UIW_MAX_ORD;
		ev.ord = UIW_MAX_IRD;
	}
	/* The listener's cm_id is valid while it is LISTENING (destroy_listen, below). */
	spin_lock_bh(&udev->cep_lock);
	if (lcep->state == UIW_CEP_LISTENING && lcep->cm_id)
		rv = lcep->cm_id->event_handler(lcep->cm_id, &ev);
	spin_unlock_bh(&udev->cep_lock);
	return rv;
}

static void uiw_cm_proc_request(struct uiw_cep *cep)
{
	struct uiw_cep_params *p = &cep->params;
	struct uiw_mpa_rx *rx = &cep->rx;
	struct uiw_dev *udev = cep->udev;
	u8 rev = uiw_mpa_rev(rx->bits);
	const u8 *pd = rx->pd;
	u16 pd_len = rx->pd_len;
	uint markers, rtr_ok;
	bool linked;

	uiw_cep_cancel_timer(cep);
	cep->req_bits = rx->bits;
	/* RFC 5044 §7.1.2: a revision we cannot interoperate with is closed, not answered. */
	if (rev != UIW_MPA_REV1 && rev != UIW_MPA_REV2)
		goto drop;
	p->rev = rev;
	p->enhanced = rev == UIW_MPA_REV2 && (rx->bits & UIW_MPA_ENHANCED);
	if (p->enhanced) {
		/* RFC 6581: the IRD/ORD word leads the private data. */
		if (pd_len < UIW_MPA_V2_LEN)
			goto drop;
		uiw_mpa_v2_parse(pd, &cep->peer_v2);
		pd += UIW_MPA_V2_LEN;
		pd_len -= UIW_MPA_V2_LEN;
	}
	/* RFC 5044 §7.1.1: CRCs are used if either side asks for them. */
	p->crc = READ_ONCE(mpa_crc) || (rx->bits & UIW_MPA_CRC);
	/* The initiator's RFC 7306 offer; ours is added once the QP is known (accept). */
	p->rdmap_ext = rx->bits & UIW_MPA_RDMAP_EXT_OFFER;
	p->p2p = p->enhanced && cep->peer_v2.p2p;
	/* RFC 5044 §7.1.1: M declares what its sender wants to receive, per direction. */
	markers = READ_ONCE(mpa_markers);
	p->markers_tx = rx->bits & UIW_MPA_MARKERS;
	p->markers_rx = markers & UIW_MARKERS_ASK_RESPONDER;
	/* RFC 6581: pick one offered RTR type we accept; Write costs the peer nothing. */
	rtr_ok = READ_ONCE(mpa_rtr);
	p->rtr = UIW_RTR_NONE;
	if (p->p2p && cep->peer_v2.write_rtr && (rtr_ok & UIW_MPA_RTR_WRITE))
		p->rtr = UIW_RTR_WRITE;
	else if (p->p2p && cep->peer_v2.read_rtr && (rtr_ok & UIW_MPA_RTR_READ))
		p->rtr = UIW_RTR_READ;

	/*
	 * Well-formed but unacceptable (RFC 5044 §7.1.2): Markers requested while the policy
	 * refuses them, more private data than iw_cm can carry, or peer-to-peer mode with no
	 * RTR type uiw accepts.
	 */
	if ((p->markers_tx && (markers & UIW_MARKERS_REFUSE)) ||
	    pd_len > UIW_MAX_PRIVATE_DATA || (p->p2p && p->rtr == UIW_RTR_NONE)) {
		uiw_cm_send_reject(cep, NULL, 0);
		linked = uiw_cep_unlink_child(cep);
		uiw_cep_finish(cep, false);
		if (linked)
			uiw_cep_put(cep);
		return;
	}

	/* Connect-on-RTR (uiw_rtr.c): matched to a QP in RTR, never shown to iw_cm. */
	if (uiw_rtr_request(cep, pd, pd_len))
		return;
	if (xa_alloc_cyclic(&udev->cep_xa, &cep->id, cep, xa_limit_31b,
			    &udev->cep_next, GFP_KERNEL) < 0)
		goto drop;
	uiw_cep_get(cep);	/* the table's reference */
	cep->state = UIW_CEP_RECVD_MPAREQ;
	if (uiw_cm_upcall_request(cep, pd, pd_len)) {
		if (xa_cmpxchg(&udev->cep_xa, cep->id, cep, NULL, GFP_KERNEL) ==
		    cep)
			uiw_cep_put(cep);
		goto drop;
	}
	/* Owned by the table (and iw_cm's child id) from now on. */
	if (uiw_cep_unlink_child(cep))
		uiw_cep_put(cep);
	uiw_cep_arm_timer(cep, UIW_ACCEPT_TIMEOUT);
	return;

drop:
	uiw_cm_child_drop(cep);
}

/* Active side */

void uiw_cm_send_request(struct uiw_cep *cep)
{
	struct uiw_cep_params *p = &cep->params;
	struct uiw_mpa_v2 v2 = {
		.ird = p->ird,
		.ord = p->ord,
		.p2p = p->p2p,
		.write_rtr = p->rtr_offer & UIW_MPA_RTR_WRITE,
		.read_rtr = p->rtr_offer & UIW_MPA_RTR_READ,
	};

	if (uiw_cep_sctp(cep) ? uiw_sctp_send_initiate(cep) :
	    uiw_mpa_send(cep->sock, true, uiw_mpa_bits(p, true),
			 p->enhanced ? &v2 : NULL, cep->tx_pd, cep->tx_pd_len)) {
		uiw_cep_active_fail(cep, -ECONNRESET);
		return;
	}
	cep->state = UIW_CEP_AWAIT_MPAREP;
	uiw_cep_arm_timer(cep, UIW_MPAREP_TIMEOUT);
}

static void uiw_cm_proc_reply(struct uiw_cep *cep)
{
	struct uiw_cep_params *p = &cep->params;
	struct uiw_mpa_rx *rx = &cep->rx;
	u8 rev = uiw_mpa_rev(rx->bits);
	const u8 *pd = rx->pd;
	u16 pd_len = rx->pd_len;
	struct uiw_mpa_v2 v2 = {};
	bool enhanced;

	/* RFC 5044 §7.1.2: the Reply must carry a revision this side offered or lower. */
	if (rev < UIW_MPA_REV1 || rev > p->rev)
		goto proto;
	enhanced = rev == UIW_MPA_REV2 && (rx->bits & UIW_MPA_ENHANCED);
	if (enhanced) {
		if (!p->enhanced || pd_len < UIW_MPA_V2_LEN)
			goto proto;
		uiw_mpa_v2_parse(pd, &v2);
		pd += UIW_MPA_V2_LEN;
		pd_len -= UIW_MPA_V2_LEN;
	}
	if (pd_len > UIW_MAX_PRIVATE_DATA)
		goto proto;

	if (rx->bits & UIW_MPA_REJECT) {
		/* RFC 5044 §7.1.2: the Responder's ULP refused; rdma_cm reports REJECTED. */
		uiw_stats_conn_refused(cep->udev);
		uiw_cm_upcall(cep, IW_CM_EVENT_CONNECT_REPLY, -ECONNREFUSED, pd,
			      pd_len);
		uiw_cep_finish(cep, false);
		return;
	}
	/*
	 * RFC 5044 §7.1.1: M in the Reply demands Markers from us. Refused by policy: the
	 * connection fails (TCP closed, error to the ULP), as for an unacceptable Reply.
	 */
	p->markers_tx = rx->bits & UIW_MPA_MARKERS;
	if (p->markers_tx && (READ_ONCE(mpa_markers) & UIW_MARKERS_REFUSE))
		goto proto;
	/* RFC 7306 only if the Responder accepted our offer (an echoed offer is not that). */
	p->rdmap_ext = p->rdmap_ext && (rx->bits & UIW_MPA_RDMAP_EXT_ACCEPT);

	p->rev = rev;
	p->enhanced = enhanced;
	p->crc = p->crc || (rx->bits & UIW_MPA_CRC);
	if (!enhanced || !v2.p2p) {
		p->p2p = false;
		p->rtr = UIW_RTR_NONE;
	} else {
		/* RFC 6581: exactly one of the RTR types we offered (Write, Read). */
		if (!p->p2p || v2.send_rtr || v2.write_rtr == v2.read_rtr ||
		    (v2.write_rtr && !(p->rtr_offer & UIW_MPA_RTR_WRITE)) ||
		    (v2.read_rtr && !(p->rtr_offer & UIW_MPA_RTR_READ)))
			goto proto;
		p->rtr = v2.write_rtr ? UIW_RTR_WRITE : UIW_RTR_READ;
	}
	/* RFC 6581 IRD/ORD; a peer ORD beyond our IRD limit is insufficient IRD. */
	if (enhanced && uiw_settle_ird_ord(&p->ird, &p->ord, v2.ird, v2.ord, UIW_MAX_IRD))
		goto proto;

	/* Connect-on-RTR: the Reply must name our QP and its peer (uiw_rtr.c). */
	if (cep->rtr && uiw_rtr_reply(cep, pd, pd_len))
		goto proto;
	uiw_cep_enter_rdma_mode(cep);
	uiw_cep_connected(cep);
	uiw_cm_upcall(cep, IW_CM_EVENT_CONNECT_REPLY, 0, pd, pd_len);
	return;

proto:
	uiw_cep_active_fail(cep, -EPROTO);
}

/* Bytes arrived while an MPA frame is expected (either side). */
void uiw_cm_read(struct uiw_cep *cep)
{
	bool request;
	int rv;

	if (cep->state == UIW_CEP_AWAIT_MPAREQ)
		request = true;
	else if (cep->state == UIW_CEP_AWAIT_MPAREP)
		request = false;
	else
		return;

	/* A full listener may drop this child only after this (uiw_cm_make_room). */
	if (request)
		WRITE_ONCE(cep->request_looked, true);
	/* Over SCTP the frame is a Session Control message (uiw_sctp.c). */
	rv = uiw_cep_sctp(cep) ? uiw_sctp_recv_frame(cep, &cep->rx, request) :
				 uiw_mpa_recv(cep->sock, &cep->rx, request);
	if (rv == -EAGAIN)
		return;
	if (rv) {
		uiw_dbg(cep->udev, "MPA %s: %d\n", request ? "request" : "reply",
			rv);
		if (request)
			uiw_cm_child_drop(cep);
		else
			uiw_cep_active_fail(cep, rv == -EPROTO ? -EPROTO :
								 -ECONNRESET);
		return;
	}
	if (request)
		uiw_cm_proc_request(cep);
	else
		uiw_cm_proc_reply(cep);
}

/* iw_cm ops (process context of the rdma_cm caller) */

/*
 * Active side, both for iw_cm and connect-on-RTR: associate the socket, arm the connect timer
 * and start a non-blocking TCP connect (the caller does not wait for the handshake). 0 or the
 * connect error; requires cep->lock.
 */
int uiw_cep_start_connect(struct uiw_cep *cep, struct socket *s,
			  struct sockaddr_storage *raddr)
{
	int rv;

	uiw_sk_assoc(cep, s, UIW_SK_MPA, NULL);
	cep->state = UIW_CEP_CONNECTING;
	uiw_cep_arm_timer(cep, s->sk->sk_protocol == IPPROTO_SCTP ?
			  UIW_SCTP_CONNECT_TIMEOUT : UIW_CONNECT_TIMEOUT);
	rv = kernel_connect(s, uiw_sockaddr(raddr), uiw_addr_len(raddr),
			    O_NONBLOCK);
	if (rv && rv != -EINPROGRESS)
		return rv;
	if (!rv)
		uiw_cep_post(cep, UIW_CEP_EV_STATE);
	return 0;
}

int uiw_iw_connect(struct iw_cm_id *id, struct iw_cm_conn_param *param)
{
	struct uiw_dev *udev = to_udev(id->device);
	struct sockaddr_storage *laddr = &id->m_local_addr;
	struct sockaddr_storage *raddr = &id->m_remote_addr;
	int family = raddr->ss_family;
	struct uiw_cep_params *p;
	struct uiw_cep *cep;
	struct uiw_qp *qp;
	struct socket *s;
	int rv;

	if (family != AF_INET && family != AF_INET6)
		return -EAFNOSUPPORT;
	if (laddr->ss_family != family ||
	    param->private_data_len > UIW_MAX_PRIVATE_DATA ||
	    param->ird > UIW_MAX_IRD || param->ord > UIW_MAX_ORD)
		return -EINVAL;

	/* The QPN comes from user space: it must name a QP of the caller. */
	qp = uiw_qp_lookup(udev, param->qpn);
	if (!qp)
		return -EINVAL;
	if (!uiw_qp_owned_by_current(qp)) {
		uiw_qp_put(qp);
		return -EPERM;
	}
	cep = uiw_cep_alloc(udev);
	if (!cep) {
		uiw_qp_put(qp);
		return -ENOMEM;
	}

	mutex_lock(&cep->lock);
	cep->active = true;
	rv = uiw_cep_attach_qp(cep, qp);
	if (rv) {
		uiw_qp_put(qp);
		goto out;
	}

	p = &cep->params;
	p->rev = clamp_t(uint, READ_ONCE(mpa_rev), UIW_MPA_REV1, UIW_MPA_REV2);
	p->enhanced = p->rev == UIW_MPA_REV2;
	p->crc = READ_ONCE(mpa_crc);
	p->rtr_offer = READ_ONCE(mpa_rtr) & (UIW_MPA_RTR_WRITE | UIW_MPA_RTR_READ);
	p->p2p = p->enhanced && READ_ONCE(mpa_p2p) && p->rtr_offer;
	p->markers_rx = READ_ONCE(mpa_markers) & UIW_MARKERS_ASK_INITIATOR;
	p->ird = param->ird;
	p->ord = param->ord;
	p->rdmap_ext = uiw_rdmap_ext_offer(cep, qp);
	/* RFC 6581: a Read RTR uses one ORD credit. */
	if (p->p2p && !p->ord)
		p->ord = 1;
	memcpy(cep->tx_pd, param->private_data, param->private_data_len);
	cep->tx_pd_len = param->private_data_len;

	rv = uiw_sock_create(udev, family, &s);
	if (rv)
		goto fail;
	if (family == AF_INET6 && id->afonly)
		ip6_sock_set_v6only(s->sk);
	if (family == AF_INET && id->tos_set)
		ip_sock_set_tos(s->sk, id->tos);
	rv = kernel_bind(s, uiw_sockaddr(laddr), uiw_addr_len(laddr));
	if (rv == -EADDRINUSE) {
		/* rdma_cm's port is only a reservation in its own port space. */
		struct sockaddr_storage any_port = *laddr;

		if (family == AF_INET)
			((struct sockaddr_in *)&any_port)->sin_port = 0;
		else
			((struct sockaddr_in6 *)&any_port)->sin6_port = 0;
		rv = kernel_bind(s, uiw_sockaddr(&any_port),
				 uiw_addr_len(laddr));
	}
	if (rv) {
		sock_release(s);
		goto fail;
	}
	if (s->sk->sk_protocol == IPPROTO_SCTP)
		uiw_sctp_bind_more(udev, s);	/* multihoming policy (uiw_sctp.c) */
	uiw_sock_set_nodelay(s);

	cep->cm_id = id;
	id->add_ref(id);
	rv = uiw_cep_start_connect(cep, s, raddr);
	if (!rv)
		goto out;
fail:
	/* An error return precludes any event (iw_cm contract): none was sent. */
	uiw_cep_finish(cep, true);
out:
	mutex_unlock(&cep->lock);
	uiw_cep_put(cep);
	return rv;
}

int uiw_iw_accept(struct iw_cm_id *id, struct iw_cm_conn_param *param)
{
	struct uiw_dev *udev = to_udev(id->device);
	struct uiw_cep *cep = uiw_cm_claim(udev, id);
	struct uiw_mpa_v2 v2 = {};
	struct uiw_cep_params *p;
	struct uiw_qp *qp;
	int rv;

	if (!cep)
		return -ECONNRESET;
	mutex_lock(&cep->lock);
	if (cep->state != UIW_CEP_RECVD_MPAREQ) {
		rv = -ECONNRESET;
		goto out;
	}
	uiw_cep_cancel_timer(cep);
	p = &cep->params;

	rv = -EINVAL;
	if (param->private_data_len > UIW_MAX_PRIVATE_DATA ||
	    param->ird > UIW_MAX_IRD || param->ord > UIW_MAX_ORD)
		goto refuse;
	qp = uiw_qp_lookup(udev, param->qpn);
	if (!qp)
		goto refuse;
	if (!uiw_qp_owned_by_current(qp)) {
		uiw_qp_put(qp);
		rv = -EPERM;
		goto refuse;
	}
	rv = uiw_cep_attach_qp(cep, qp);
	if (rv) {
		uiw_qp_put(qp);
		goto refuse;
	}

	p->ird = param->ird;
	p->ord = param->ord;
	p->rdmap_ext = p->rdmap_ext && uiw_rdmap_ext_offer(cep, qp);
	if (p->enhanced) {
		rv = -EINVAL;
		if (uiw_settle_ird_ord(&p->ird, &p->ord, cep->peer_v2.ird, cep->peer_v2.ord,
				       UIW_MAX_IRD))
			goto refuse;
		/* The RTR type was chosen with the Request; a Read RTR needs one IRD. */
		if (p->rtr == UIW_RTR_READ && !p->ird)
			p->ird = 1;
		v2.ird = p->ird;
		v2.ord = p->ord;
		v2.p2p = p->p2p;
		v2.write_rtr = p->rtr == UIW_RTR_WRITE;
		v2.read_rtr = p->rtr == UIW_RTR_READ;
	}
	if (uiw_cep_sctp(cep))
		rv = uiw_sctp_send_accept(cep, &v2, param->private_data,
					  param->private_data_len);
	else
		rv = uiw_mpa_send(cep->sock, false, uiw_mpa_bits(p, false),
				  p->enhanced ? &v2 : NULL, param->private_data,
				  param->private_data_len);
	if (rv)
		goto fail;

	cep->cm_id = id;
	id->add_ref(id);
	uiw_cep_enter_rdma_mode(cep);
	/*
	 * ESTABLISHED right away. With an RTR the provider holds back its own FPDUs until
	 * it has received the peer's RTR (RFC 6581); the kernel never reads it.
	 */
	uiw_cep_connected(cep);
	uiw_cm_upcall(cep, IW_CM_EVENT_ESTABLISHED, 0, NULL, 0);
	rv = 0;
	goto out;

refuse:
	/* iw_cm moves the id to IDLE: the connection cannot be accepted later. */
	uiw_cm_send_reject(cep, NULL, 0);
fail:
	uiw_cep_finish(cep, false);
out:
	mutex_unlock(&cep->lock);
	uiw_cep_put(cep);
	return rv;
}

int uiw_iw_reject(struct iw_cm_id *id, const void *pdata, u8 pdata_len)
{
	struct uiw_cep *cep = uiw_cm_claim(to_udev(id->device), id);

	/* Gone already (timeout, peer closed): the outcome the caller wants. */
	if (!cep)
		return 0;
	mutex_lock(&cep->lock);
	if (cep->state == UIW_CEP_RECVD_MPAREQ) {
		uiw_cm_send_reject(cep, pdata, pdata_len);
		uiw_cep_finish(cep, false);
	}
	mutex_unlock(&cep->lock);
	uiw_cep_put(cep);
	return 0;
}

int uiw_iw_create_listen(struct iw_cm_id *id, int backlog)
{
	struct uiw_dev *udev = to_udev(id->device);
	struct sockaddr_storage *laddr = &id->m_local_addr;
	struct uiw_cep *cep;
	struct socket *s;
	int rv;

	if (laddr->ss_family != AF_INET && laddr->ss_family != AF_INET6)
		return -EAFNOSUPPORT;
	rv = uiw_sock_create(udev, laddr->ss_family, &s);
	if (rv)
		return rv;
	if (laddr->ss_family == AF_INET6 && id->afonly) {
		rv = ip6_sock_set_v6only(s->sk);
		if (rv)
			goto err;
	}
	/*
	 * rdma_cm calls this once per device for a wildcard address. Binding the socket to
	 * the netdev lets every RDMA device (uiw, siw, ...) listen on the same port; a
	 * failure here would fail the application's rdma_listen() on all devices.
	 */
	if (uiw_addr_is_any(laddr)) {
		rv = sock_bindtoindex(s->sk, udev->netdev->ifindex, true);
		if (rv)
			goto err;
	}
	/*
	 * The RTR service port of an address is shared by all its users, and the listener's
	 * children are handed to their QPs' owners, who may clear SO_REUSEADDR on one and keep
	 * it (in FIN_WAIT2 for as long as they hold it, or a minute of TIME_WAIT). TCP refuses
	 * a bind that conflicts with such a socket, which would shut the service there for
	 * everyone once its listener closed; SK_FORCE_REUSE binds past it (inet_csk_get_port).
	 * The children lose it when handed over (uiw_sock_adopt).
	 */
	if (uiw_rtr_service_id(id) && s->sk->sk_protocol == IPPROTO_TCP)
		s->sk->sk_reuse = SK_FORCE_REUSE;
	if (s->sk->sk_protocol == IPPROTO_SCTP)
		rv = uiw_sctp_bind(udev, s, laddr);	/* the netdev's addresses */
	else
		rv = kernel_bind(s, uiw_sockaddr(laddr), uiw_addr_len(laddr));
	if (rv)
		goto err;
	rv = kernel_listen(s, backlog);
	if (rv)
		goto err;
	cep = uiw_cep_alloc(udev);
	if (!cep) {
		rv = -ENOMEM;
		goto err;
	}

	mutex_lock(&cep->lock);
	cep->backlog = max(backlog, 1);
	cep->cm_id = id;
	id->add_ref(id);
	cep->state = UIW_CEP_LISTENING;
	uiw_sk_assoc(cep, s, UIW_SK_LISTEN, NULL);
	id->provider_data = cep;	/* owns the initial reference */
	/* Connections that completed before the callback was in place. */
	uiw_cep_post(cep, UIW_CEP_EV_ACCEPT);
	mutex_unlock(&cep->lock);
	return 0;

err:
	sock_release(s);
	return rv;
}

int uiw_iw_destroy_listen(struct iw_cm_id *id)
{
	struct uiw_dev *udev = to_udev(id->device);
	struct uiw_cep *lcep = id->provider_data;
	struct uiw_cep *cep;

	if (!lcep)
		return 0;
	id->provider_data = NULL;

	mutex_lock(&lcep->lock);
	/* After this no CONNECT_REQUEST upcall touches the cm_id. */
	spin_lock_bh(&udev->cep_lock);
	lcep->state = UIW_CEP_CLOSED;
	spin_unlock_bh(&udev->cep_lock);
	uiw_cep_release_sock(lcep, false);
	uiw_cep_put_cm_id(lcep);
	mutex_unlock(&lcep->lock);

	/* Children still waiting for their MPA Request go with the listener. */
	for (;;) {
		spin_lock_bh(&udev->cep_lock);
		cep = list_first_entry_or_null(&lcep->children, struct uiw_cep,
					       child_entry);
		if (cep) {
			list_del_init(&cep->child_entry);
			lcep->num_children--;
		}
		spin_unlock_bh(&udev->cep_lock);
		if (!cep)
			break;
		mutex_lock(&cep->lock);
		if (cep->state == UIW_CEP_AWAIT_MPAREQ)
			uiw_cm_child_drop(cep);
		mutex_unlock(&cep->lock);
		uiw_cep_put(cep);	/* the list's reference */
	}
	uiw_cep_put(lcep);
	return 0;
}
