// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
/*
 * Connect-on-RTR: uiw.ko connects a QP when the application moves it to RTR with the
 * peer's QPN and GID (protocol and private-data layout in uiw_rtr.h, kernel/README.md).
 *
 * Both sides are ordinary uiw connection endpoints (uiw_cm.h) without an iw_cm id: the
 * initiator's cep runs the active MPA exchange with our private data, the responder's is a
 * child of the device's RTR listener whose Request this file matches to a QP. Their
 * outcome goes to the QP: the owner's provider takes the socket (UIW_METHOD_QP_TAKE_SOCKET)
 * or, when the connection failed for good, gets the error from that call and an
 * IB_EVENT_QP_FATAL on its async event file.
 *
 * Who may take part: both ends are privileged ports. The service port is below 1024, so no
 * unprivileged user can listen there first (squat it, or answer an initiator with a mirrored
 * Reply), and the initiator connects from a port in UIW_RTR_SRC_PORT_MIN..MAX, so a
 * responder only hears kernels (or root) of the initiator's host, the way rsh and NFS
 * authenticate hosts. The responder still matches the Request to its QP by both QPNs and
 * both addresses, so another host needs the initiator's address to pose as it. What does
 * not match is refused with one reason, "not ready": a prober learns nothing about QPs.
 */

#include <linux/module.h>
#include <linux/tcp.h>
#include <net/ipv6.h>
#include <net/sock.h>
#include <net/tcp.h>

#include "uiw-setup.h"
#include "uiw_cm.h"
#include "uiw_kcompat.h"
#include "uiw_sctp.h"

static ushort rtr_port = 747;
module_param(rtr_port, ushort, 0444);
MODULE_PARM_DESC(rtr_port, "TCP port of the connect-on-RTR service (listened on per device while a QP waits in RTR as responder; privileged, default 747)");

static uint rtr_timeout = 10000;
module_param(rtr_timeout, uint, 0644);
MODULE_PARM_DESC(rtr_timeout, "ms a connect-on-RTR initiator retries while the peer QP is not in RTR yet (default 10000)");

/* Initiators' source ports: privileged, as rresvport() picks them. */
#define UIW_RTR_SRC_PORT_MIN 512
#define UIW_RTR_SRC_PORT_MAX 1023

#define UIW_RTR_BACKLOG 128
#define UIW_RTR_BACKOFF_MIN_MS 10
#define UIW_RTR_BACKOFF_MAX_MS 320

/* Private data (layout in uiw_rtr.h): encoded field by field, no struct overlay. */

static void uiw_rtr_pd_encode(u8 *b, const struct uiw_rtr_pd *pd)
{
	put_unaligned_be32(UIW_RTR_PD_MAGIC, b);
	b[4] = pd->version;
	b[5] = pd->type;
	put_unaligned_be16(pd->reason, b + 6);
	put_unaligned_be32(pd->src_qpn, b + 8);
	put_unaligned_be32(pd->dst_qpn, b + 12);
	memcpy(b + 16, pd->src.raw, sizeof(pd->src.raw));
	memcpy(b + 32, pd->dst.raw, sizeof(pd->dst.raw));
}

/* UIW_RTR_OK, or the reason to refuse the frame. */
static int uiw_rtr_pd_decode(const u8 *b, u16 len, struct uiw_rtr_pd *pd)
{
	struct uiw_rtr_wire_pd w;
	int rv = uiw_rtr_pd_parse(b, len, &w);	/* uiw-setup.h */

	if (rv == UIW_RTR_BAD_PD)
		return rv;
	pd->version = w.version;
	pd->type = w.type;
	pd->reason = w.reason;
	pd->src_qpn = w.src_qpn;
	pd->dst_qpn = w.dst_qpn;
	memcpy(pd->src.raw, w.src_gid, sizeof(pd->src.raw));
	memcpy(pd->dst.raw, w.dst_gid, sizeof(pd->dst.raw));
	return rv;
}

/* Addresses: GIDs are IPv6 or IPv4-mapped addresses (uiw-abi.h, GID table). */

static bool uiw_gid_eq(const union ib_gid *a, const union ib_gid *b)
{
	return !memcmp(a->raw, b->raw, sizeof(a->raw));
}

static const struct in6_addr *uiw_gid_in6(const union ib_gid *g)
{
	return (const struct in6_addr *)g->raw;
}

static void uiw_gid_sockaddr(const union ib_gid *g, u16 port, int ifindex,
			     struct sockaddr_storage *ss)
{
	memset(ss, 0, sizeof(*ss));
	if (ipv6_addr_v4mapped(uiw_gid_in6(g))) {
		struct sockaddr_in *sin = (struct sockaddr_in *)ss;

		sin->sin_family = AF_INET;
		sin->sin_addr.s_addr = uiw_gid_in6(g)->s6_addr32[3];
		sin->sin_port = htons(port);
	} else {
		struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)ss;

		sin6->sin6_family = AF_INET6;
		sin6->sin6_addr = *uiw_gid_in6(g);
		sin6->sin6_port = htons(port);
		if (ipv6_addr_type(&sin6->sin6_addr) & IPV6_ADDR_LINKLOCAL)
			sin6->sin6_scope_id = ifindex;
	}
}

static void uiw_sockaddr_gid(const struct sockaddr_storage *ss, union ib_gid *g)
{
	if (ss->ss_family == AF_INET)
		ipv6_addr_set_v4mapped(((const struct sockaddr_in *)ss)->sin_addr.s_addr,
				       (struct in6_addr *)g->raw);
	else
		memcpy(g->raw, &((const struct sockaddr_in6 *)ss)->sin6_addr,
		       sizeof(g->raw));
}

/* The lower (GID, QPN) pair initiates: both sides compute the same answer. */
static bool uiw_rtr_initiates(const union ib_gid *sgid, u32 qpn,
			      const union ib_gid *dgid, u32 dest_qpn)
{
	int c = memcmp(sgid->raw, dgid->raw, sizeof(sgid->raw));

	return c < 0 || (c == 0 && qpn < dest_qpn);
}

/* Listeners: iw_cm-style listens (uiw_cm_conn.c) on one address each, with our own id. */

static void uiw_rtr_id_ref(struct iw_cm_id *id)
{
}

/* A Request reaches uiw_rtr_request() first; anything else is refused. */
static int uiw_rtr_id_event(struct iw_cm_id *id, struct iw_cm_event *ev)
{
	return -EINVAL;
}

void uiw_rtr_dev_init(struct uiw_dev *udev)
{
	mutex_init(&udev->rtr.lock);
	INIT_LIST_HEAD(&udev->rtr.listeners);
}

static struct uiw_rtr_listener *uiw_rtr_listen_get(struct uiw_dev *udev,
						   const union ib_gid *gid)
{
	struct uiw_rtr_dev *d = &udev->rtr;
	struct uiw_rtr_listener *l;
	const struct cred *old;
	int rv;

	mutex_lock(&d->lock);
	list_for_each_entry(l, &d->listeners, entry) {
		if (uiw_gid_eq(&l->gid, gid)) {
			l->users++;
			goto out;
		}
	}
	l = kzalloc(sizeof(*l), GFP_KERNEL);
	if (!l) {
		l = ERR_PTR(-ENOMEM);
		goto out;
	}
	l->gid = *gid;
	l->id.device = &udev->ibdev;
	l->id.add_ref = uiw_rtr_id_ref;
	l->id.rem_ref = uiw_rtr_id_ref;
	l->id.event_handler = uiw_rtr_id_event;
	uiw_gid_sockaddr(gid, rtr_port, udev->netdev->ifindex, &l->id.m_local_addr);
	l->id.afonly = 1;
	old = uiw_privileged_begin();
	rv = uiw_iw_create_listen(&l->id, UIW_RTR_BACKLOG);
	uiw_privileged_end(old);
	if (rv) {
		uiw_dbg(udev, "cannot listen on port %u: %d\n", rtr_port, rv);
		kfree(l);
		l = ERR_PTR(rv);
		goto out;
	}
	l->users = 1;
	list_add_tail(&l->entry, &d->listeners);
out:
	mutex_unlock(&d->lock);
	return l;
}

static void uiw_rtr_listen_put(struct uiw_dev *udev, struct uiw_rtr_listener *l)
{
	mutex_lock(&udev->rtr.lock);
	if (!WARN_ON(!l->users) && !--l->users) {
		list_del(&l->entry);
		uiw_iw_destroy_listen(&l->id);
		kfree(l);
	}
	mutex_unlock(&udev->rtr.lock);
}

/* QP side: the RTR modify, echoes for query_qp, failure, reset and destroy. */

static void uiw_rtr_retry_work(struct work_struct *work);

void uiw_rtr_qp_init(struct uiw_qp *qp)
{
	INIT_DELAYED_WORK(&qp->rtr.retry, uiw_rtr_retry_work);
}

bool uiw_rtr_wanted(const struct ib_qp_attr *attr, int mask)
{
	return (mask & IB_QP_STATE) && attr->qp_state == IB_QPS_RTR &&
	       (mask & IB_QP_AV) && (mask & IB_QP_DEST_QPN);
}

/*
 * Validate an RTR modify that names a peer, before the state changes. 0: commit and start
 * it; 1: the QP already runs this very connection (repeated RTR); else a negative errno.
 */
int uiw_rtr_prepare(struct uiw_qp *qp, const struct ib_qp_attr *attr,
		    struct uiw_rtr_target *t)
{
	struct uiw_dev *udev = uiw_qp_dev(qp);
	const struct ib_global_route *grh;
	u32 qpn = qp->ibqp.qp_num;
	int rv = 0;

	memset(t, 0, sizeof(*t));
	/*
	 * The connection is made in the netdev's namespace (uiw_sock_create): only a caller
	 * that lives there may have uiw.ko connect for it.
	 */
	if (!net_eq(current->nsproxy->net_ns, dev_net(udev->netdev)))
		return -EPERM;
	/* iWARP peers are IP addresses: the AV must carry the GRH (ibv_rc_pingpong -g). */
	if (!(rdma_ah_get_ah_flags(&attr->ah_attr) & IB_AH_GRH)) {
		uiw_dbg_qp(qp, "RTR without a GRH: no peer address\n");
		return -EINVAL;
	}
	grh = rdma_ah_read_grh(&attr->ah_attr);
	if (grh->sgid_index >= UIW_GID_MAC_INDEX)
		return -EINVAL;
	if (grh->sgid_attr) {
		t->sgid = grh->sgid_attr->gid;
	} else {
		spin_lock_bh(&udev->gid_lock);
		t->sgid = udev->gid[grh->sgid_index];
		spin_unlock_bh(&udev->gid_lock);
	}
	t->sgid_index = grh->sgid_index;
	t->dgid = grh->dgid;
	t->dest_qpn = attr->dest_qp_num & UIW_QPN_MAX;
	if (ipv6_addr_any(uiw_gid_in6(&t->sgid)) ||
	    ipv6_addr_any(uiw_gid_in6(&t->dgid)) ||
	    ipv6_addr_is_multicast(uiw_gid_in6(&t->dgid)))
		return -EINVAL;
	/* One QP cannot be both ends of one TCP connection. */
	if (uiw_gid_eq(&t->sgid, &t->dgid) && t->dest_qpn == qpn)
		return -EINVAL;
	t->role = uiw_rtr_initiates(&t->sgid, qpn, &t->dgid, t->dest_qpn) ?
			  UIW_RTR_ROLE_INITIATOR : UIW_RTR_ROLE_RESPONDER;

	spin_lock_bh(&qp->lock);
	rv = uiw_rtr_claim(qp, t);
	spin_unlock_bh(&qp->lock);
	if (rv)
		return rv;

	/* The responder listens before its QP is in RTR: the initiator may be quick. */
	if (t->role == UIW_RTR_ROLE_RESPONDER) {
		t->listener = uiw_rtr_listen_get(udev, &t->sgid);
		if (IS_ERR(t->listener))
			return PTR_ERR(t->listener);
	}
	return 0;
}

/*
 * Caller holds qp->lock. Whether the RTR modify t may commit: 0 if the QP has no connection
 * yet, 1 if it already runs this very one (a repeated RTR), else -EINVAL. uiw_rtr_prepare
 * asks before it listens; modify_qp asks again under the lock it commits under, since uverbs
 * lets modifies of one QP run at once (it holds the QP's uobject shared) and another RTR
 * may have committed in between.
 */
int uiw_rtr_claim(struct uiw_qp *qp, const struct uiw_rtr_target *t)
{
	const struct uiw_rtr_qp *r = &qp->rtr;

	lockdep_assert_held(&qp->lock);
	if (r->role == UIW_RTR_ROLE_NONE)
		return 0;
	return r->dest_qpn == t->dest_qpn && uiw_gid_eq(&r->sgid, &t->sgid) &&
			       uiw_gid_eq(&r->dgid, &t->dgid) ?
		       1 : -EINVAL;
}

/* Caller holds qp->lock, has claimed the QP and moved it to RTR. */
void uiw_rtr_commit(struct uiw_qp *qp, const struct uiw_rtr_target *t)
{
	struct uiw_rtr_qp *r = &qp->rtr;

	r->role = t->role;
	r->listener = t->listener;
	r->err = 0;
	r->dest_qpn = t->dest_qpn;
	r->sgid = t->sgid;
	r->dgid = t->dgid;
	r->sgid_index = t->sgid_index;
	r->deadline = jiffies + msecs_to_jiffies(READ_ONCE(rtr_timeout));
	r->backoff_ms = UIW_RTR_BACKOFF_MIN_MS;
}

void uiw_rtr_abandon(struct uiw_qp *qp, const struct uiw_rtr_target *t)
{
	if (t->listener)
		uiw_rtr_listen_put(uiw_qp_dev(qp), t->listener);
}

/* modify_qp attributes an application reads back (caller holds qp->lock). */
void uiw_rtr_echo(struct uiw_qp *qp, const struct ib_qp_attr *attr, int mask)
{
	struct uiw_rtr_qp *r = &qp->rtr;

	if (mask & IB_QP_TIMEOUT)
		r->timeout = attr->timeout;
	if (mask & IB_QP_RETRY_CNT)
		r->retry_cnt = attr->retry_cnt;
	if (mask & IB_QP_RNR_RETRY)
		r->rnr_retry = attr->rnr_retry;
	if (mask & IB_QP_MIN_RNR_TIMER)
		r->min_rnr_timer = attr->min_rnr_timer;
	if (mask & IB_QP_SQ_PSN)
		r->sq_psn = attr->sq_psn;
	if (mask & IB_QP_RQ_PSN)
		r->rq_psn = attr->rq_psn;
	if (mask & IB_QP_MAX_DEST_RD_ATOMIC)
		r->app_ird = attr->max_dest_rd_atomic;
	if (mask & IB_QP_MAX_QP_RD_ATOMIC)
		r->app_ord = attr->max_rd_atomic;
	if (mask & IB_QP_PATH_MTU)
		r->path_mtu = attr->path_mtu;
}

/* Caller holds qp->lock. */
void uiw_rtr_query(struct uiw_qp *qp, struct ib_qp_attr *attr)
{
	const struct uiw_rtr_qp *r = &qp->rtr;

	attr->timeout = r->timeout;
	attr->retry_cnt = r->retry_cnt;
	attr->rnr_retry = r->rnr_retry;
	attr->min_rnr_timer = r->min_rnr_timer;
	attr->sq_psn = r->sq_psn;
	attr->rq_psn = r->rq_psn;
	if (r->path_mtu)
		attr->path_mtu = r->path_mtu;
	if (r->role == UIW_RTR_ROLE_NONE)
		return;
	/* What the application asked for, not what the MPA exchange settled on. */
	attr->max_dest_rd_atomic = r->app_ird;
	attr->max_rd_atomic = r->app_ord;
	attr->dest_qp_num = r->dest_qpn;
	attr->ah_attr.port_num = 1;
	rdma_ah_set_grh(&attr->ah_attr, NULL, 0, r->sgid_index, 0xff, 0);
	rdma_ah_retrieve_grh(&attr->ah_attr)->dgid = r->dgid;
}

/* The QP's connection attempt failed for good: ERR, a QP fatal event, wake the owner. */
static void uiw_rtr_fail(struct uiw_qp *qp, int err)
{
	struct ib_event ev = {
		.device = qp->ibqp.device,
		.element.qp = &qp->ibqp,
		.event = IB_EVENT_QP_FATAL,
	};
	bool report, event = false;

	spin_lock_bh(&qp->lock);
	report = !qp->dying && !qp->rtr.err;
	if (report) {
		qp->rtr.err = err;
		event = !qp->fatal_sent;	/* one QP error event per RESET */
		qp->fatal_sent = true;
		uiw_qp_enter_state(qp, IB_QPS_ERR);
	}
	spin_unlock_bh(&qp->lock);
	if (!report)
		return;
	uiw_dbg_qp(qp, "connect-on-RTR failed: %d\n", err);
	if (event && qp->ibqp.event_handler)
		qp->ibqp.event_handler(&ev, qp->ibqp.qp_context);
	uiw_ucontext_signal(qp->uctx);
}

int uiw_rtr_error(struct uiw_qp *qp)
{
	int err;

	spin_lock_bh(&qp->lock);
	err = qp->rtr.err;
	spin_unlock_bh(&qp->lock);
	return err;
}

/*
 * Start the initiator's connection from a free privileged port of our address src (random
 * first try).
 * A port fails when a socket holds it without SO_REUSEADDR (bind) or already carries a
 * connection to raddr (TCP's connect: 4-tuple in use, TIME-WAIT included). SCTP has no
 * connect-time check of that kind, so its sockets take their port exclusively.
 */
static int uiw_rtr_sock_connect(struct uiw_cep *cep, const union ib_gid *src,
				struct sockaddr_storage *raddr)
{
	struct sockaddr_storage laddr;
	const u32 n = UIW_RTR_SRC_PORT_MAX - UIW_RTR_SRC_PORT_MIN + 1;
	struct uiw_dev *udev = cep->udev;
	u32 first = get_random_u32() % n, i;
	int rv = -EADDRNOTAVAIL;

	for (i = 0; i < n; i++) {
		u16 port = UIW_RTR_SRC_PORT_MIN + (first + i) % n;
		const struct cred *old;
		struct socket *s;
		bool sctp;

		/*
		 * Never from the service port: towards our own address while no responder
		 * listens there yet, TCP connects the socket to itself (simultaneous open,
		 * RFC 793 §3.4) and the initiator reads its own Request as the Reply.
		 */
		if (port == READ_ONCE(rtr_port))
			continue;
		uiw_gid_sockaddr(src, port, udev->netdev->ifindex, &laddr);
		rv = uiw_sock_create(udev, raddr->ss_family, &s);
		if (rv)
			return rv;
		sctp = s->sk->sk_protocol == IPPROTO_SCTP;
		old = uiw_privileged_begin();
		/* Over SCTP (device llp=sctp) the multihoming policy of uiw_sctp.c binds. */
		if (sctp) {
			s->sk->sk_reuse = SK_NO_REUSE;
			rv = uiw_sctp_bind(udev, s, &laddr);
		} else {
			rv = kernel_bind(s, uiw_sockaddr(&laddr), uiw_addr_len(&laddr));
		}
		if (rv) {
			uiw_privileged_end(old);
			sock_release(s);
		} else {
			uiw_sock_set_nodelay(s);
			/* SCTP checks the bound port's privilege again at connect. */
			rv = uiw_cep_start_connect(cep, s, raddr);
			uiw_privileged_end(old);
			if (!rv)
				return 0;
			uiw_cep_cancel_timer(cep);
			uiw_cep_release_sock(cep, true);
		}
		if (rv != -EADDRINUSE && rv != -EADDRNOTAVAIL)
			return rv;
	}
	return rv;
}

/*
 * Initiator: connect from our address to the peer's service port and send the Request
 * (uiw_cm_send_request, once TCP is up). Process context or the retry work.
 */
static int uiw_rtr_connect(struct uiw_qp *qp)
{
	struct uiw_dev *udev = uiw_qp_dev(qp);
	int ifindex = udev->netdev->ifindex;
	struct sockaddr_storage laddr, raddr;
	struct uiw_cep_params *p;
	struct uiw_rtr_pd req = {
		.version = UIW_RTR_PD_VERSION,
		.type = UIW_RTR_PD_REQUEST,
		.src_qpn = qp->ibqp.qp_num,
	};
	struct uiw_cep *cep;
	u32 ird;
	int rv;

	spin_lock_bh(&qp->lock);
	req.dst_qpn = qp->rtr.dest_qpn;
	req.src = qp->rtr.sgid;
	req.dst = qp->rtr.dgid;
	ird = qp->rtr.app_ird;
	spin_unlock_bh(&qp->lock);
	uiw_gid_sockaddr(&req.src, 0, ifindex, &laddr);
	uiw_gid_sockaddr(&req.dst, rtr_port, ifindex, &raddr);
	if (laddr.ss_family != raddr.ss_family)
		return -EAFNOSUPPORT;

	cep = uiw_cep_alloc(udev);
	if (!cep)
		return -ENOMEM;
	mutex_lock(&cep->lock);
	cep->active = true;
	cep->rtr = true;
	uiw_qp_get(qp);
	rv = uiw_cep_attach_qp(cep, qp);
	if (rv) {
		uiw_qp_put(qp);
		goto out;
	}

	/*
	 * RFC 6581 enhanced setup in peer-to-peer mode: the responder's provider may not
	 * send before our RTR (RFC 5044 §7.1.2). ORD is offered at the device maximum: the
	 * application sets max_rd_atomic only at RTS, after this Request is out; the
	 * responder bounds it by its IRD (max_dest_rd_atomic).
	 */
	p = &cep->params;
	p->rev = UIW_MPA_REV2;
	p->enhanced = true;
	p->p2p = true;
	/* RFC 5044 §7.1.1: ask for CRC as an iw_cm initiator would (mpa_crc). */
	p->crc = uiw_mpa_crc_wanted();
	p->rtr_offer = UIW_MPA_RTR_WRITE | UIW_MPA_RTR_READ;
	p->rdmap_ext = uiw_rdmap_ext_offer(cep, qp);
	p->ird = min_t(u32, ird, UIW_MAX_IRD);
	p->ord = UIW_MAX_ORD;
	uiw_rtr_pd_encode(cep->tx_pd, &req);
	cep->tx_pd_len = UIW_RTR_PD_LEN;

	rv = uiw_rtr_sock_connect(cep, &req.src, &raddr);
	if (rv)
		uiw_cep_finish(cep, true);
out:
	mutex_unlock(&cep->lock);
	uiw_cep_put(cep);
	return rv;
}

static void uiw_rtr_retry_work(struct work_struct *work)
{
	struct uiw_qp *qp =
		container_of(to_delayed_work(work), struct uiw_qp, rtr.retry);
	bool go, busy, late;
	int rv;

	spin_lock_bh(&qp->lock);
	go = !qp->dying && qp->rtr.role == UIW_RTR_ROLE_INITIATOR &&
	     !qp->rtr.err &&
	     (qp->state == IB_QPS_RTR || qp->state == IB_QPS_RTS);
	busy = !!qp->cep;
	late = !time_before(jiffies, qp->rtr.deadline);
	spin_unlock_bh(&qp->lock);
	if (go && busy && !late) {
		/* The failed attempt's endpoint is still letting go of the QP. */
		if (!queue_delayed_work(uiw_wq, &qp->rtr.retry,
					msecs_to_jiffies(UIW_RTR_BACKOFF_MIN_MS)))
			uiw_qp_put(qp);
		return;
	}
	if (go && busy) {
		/* rtr_timeout bounds this wait too. */
		uiw_rtr_fail(qp, -ETIMEDOUT);
	} else if (go) {
		rv = uiw_rtr_connect(qp);
		if (rv)
			uiw_rtr_fail(qp, rv);
	}
	uiw_qp_put(qp);
}

/* The peer's QP is not in RTR yet: try again later, up to rtr_timeout. */
static void uiw_rtr_retry(struct uiw_qp *qp)
{
	unsigned long delay = 0;
	bool again;

	spin_lock_bh(&qp->lock);
	again = !qp->dying && time_before(jiffies, qp->rtr.deadline);
	if (again) {
		delay = msecs_to_jiffies(qp->rtr.backoff_ms);
		qp->rtr.backoff_ms = min_t(unsigned int, qp->rtr.backoff_ms * 2,
					   UIW_RTR_BACKOFF_MAX_MS);
	}
	spin_unlock_bh(&qp->lock);
	if (!again) {
		uiw_rtr_fail(qp, -ETIMEDOUT);
		return;
	}
	uiw_qp_get(qp);
	if (!queue_delayed_work(uiw_wq, &qp->rtr.retry, delay))
		uiw_qp_put(qp);
}

int uiw_rtr_start(struct uiw_qp *qp, enum ib_qp_state prev)
{
	bool restore, stranded;
	int rv;

	if (qp->rtr.role != UIW_RTR_ROLE_INITIATOR)
		return 0;
	rv = uiw_rtr_connect(qp);
	if (rv) {
		/*
		 * Nothing went out: the RTR modify fails as a whole. Another modify since
		 * stands: ERR and RESET; a QP already moved on to RTS cannot connect and fails.
		 */
		spin_lock_bh(&qp->lock);
		restore = qp->state == IB_QPS_RTR &&
			  qp->rtr.role == UIW_RTR_ROLE_INITIATOR;
		if (restore) {
			qp->state = prev;
			qp->rtr.role = UIW_RTR_ROLE_NONE;
		}
		stranded = !restore && qp->rtr.role == UIW_RTR_ROLE_INITIATOR &&
			   qp->state != IB_QPS_ERR && qp->state != IB_QPS_RESET;
		spin_unlock_bh(&qp->lock);
		if (stranded)
			uiw_rtr_fail(qp, rv);
	}
	return rv;
}

/* Take the QP's connect-on-RTR endpoint off it and end the connection. */
static void uiw_rtr_drop_conn(struct uiw_qp *qp, bool abort)
{
	struct uiw_cep *cep;

	spin_lock_bh(&qp->lock);
	cep = qp->cep;
	if (cep && cep->rtr)
		qp->cep = NULL;	/* its reference is ours now */
	else
		cep = NULL;
	spin_unlock_bh(&qp->lock);
	if (!cep)
		return;

	mutex_lock(&cep->lock);
	/*
	 * Applications that connect on RTR destroy their QPs without a disconnect verb
	 * (ibv_rc_pingpong, perftest): unless the QP is in ERR, close like close(2) does, so
	 * what the peer has been told is complete (iWARP send completions) still reaches it.
	 */
	if (cep->state == UIW_CEP_RDMA_MODE || cep->state == UIW_CEP_CLOSING)
		cep->state = UIW_CEP_CLOSED;
	else
		abort = true;
	uiw_cep_finish(cep, abort);
	mutex_unlock(&cep->lock);
	uiw_cep_put(cep);
}

static void uiw_rtr_clear(struct uiw_qp *qp, bool abort)
{
	struct uiw_rtr_listener *l;

	if (cancel_delayed_work_sync(&qp->rtr.retry))
		uiw_qp_put(qp);
	uiw_rtr_drop_conn(qp, abort);
	spin_lock_bh(&qp->lock);
	l = qp->rtr.listener;
	qp->rtr.listener = NULL;
	qp->rtr.role = UIW_RTR_ROLE_NONE;
	qp->rtr.err = 0;
	spin_unlock_bh(&qp->lock);
	if (l)
		uiw_rtr_listen_put(uiw_qp_dev(qp), l);
}

/* modify_qp to RESET: the QP may connect again, to anyone. */
void uiw_rtr_reset(struct uiw_qp *qp)
{
	uiw_rtr_clear(qp, true);
}

void uiw_rtr_destroy(struct uiw_qp *qp, bool abort)
{
	uiw_rtr_clear(qp, abort);
}

/* Endpoint hooks (uiw_cm.c, uiw_cm_conn.c), cep->lock held. */

/* Refuse a Request with an MPA Reject (RFC 5044 §7.1.2) saying why, and close. */
static void uiw_rtr_refuse(struct uiw_cep *cep, int reason,
			   const struct uiw_rtr_pd *req)
{
	/*
	 * Whether the QP exists, waits for someone else or is connected already is nobody's
	 * business but its peer's: all of that is "not ready" on the wire (the initiator retries
	 * until rtr_timeout). Only faults of the frame itself are named.
	 */
	struct uiw_rtr_pd rej = {
		.version = UIW_RTR_PD_VERSION,
		.type = UIW_RTR_PD_REJECT,
		.reason = reason == UIW_RTR_BAD_PD || reason == UIW_RTR_VERSION ?
				  reason : UIW_RTR_NOT_READY,
		.src_qpn = req->dst_qpn,
		.dst_qpn = req->src_qpn,
		.src = req->dst,
		.dst = req->src,
	};
	u8 buf[UIW_RTR_PD_LEN];
	bool linked;

	uiw_dbg(cep->udev, "refusing QP %u -> %u: reason %d\n", req->src_qpn,
		req->dst_qpn, reason);
	uiw_rtr_pd_encode(buf, &rej);
	uiw_cm_send_reject(cep, buf, sizeof(buf));
	linked = uiw_cep_unlink_child(cep);
	uiw_cep_finish(cep, false);
	if (linked)
		uiw_cep_put(cep);
}

/* Does the Request name this QP, waiting in RTR for exactly this peer? */
static int uiw_rtr_match(struct uiw_qp *qp, const struct uiw_rtr_pd *req,
			 const union ib_gid *lgid, const union ib_gid *rgid)
{
	const struct uiw_rtr_qp *r = &qp->rtr;
	int reason = UIW_RTR_OK;

	spin_lock_bh(&qp->lock);
	if (qp->dying)
		reason = UIW_RTR_NO_QP;
	else if (r->role == UIW_RTR_ROLE_NONE)
		reason = qp->state == IB_QPS_RESET || qp->state == IB_QPS_INIT ?
				 UIW_RTR_NOT_READY : UIW_RTR_MISMATCH;
	else if (r->role != UIW_RTR_ROLE_RESPONDER ||
		 r->dest_qpn != req->src_qpn ||
		 !uiw_gid_eq(&r->dgid, &req->src) || !uiw_gid_eq(&r->dgid, rgid) ||
		 !uiw_gid_eq(&r->sgid, &req->dst) || !uiw_gid_eq(&r->sgid, lgid))
		reason = UIW_RTR_MISMATCH;
	else if (qp->cep || r->err || qp->state == IB_QPS_ERR)
		reason = UIW_RTR_BUSY;
	spin_unlock_bh(&qp->lock);
	return reason;
}

/*
 * Responder: settle IRD/ORD and the RTR type (RFC 6581; the initiator's
 * uiw_cm_proc_reply checks the result) and send the Reply with our private data.
 */
static int uiw_rtr_send_accept(struct uiw_cep *cep, const struct uiw_rtr_pd *rep)
{
	struct uiw_cep_params *p = &cep->params;
	const struct uiw_mpa_v2 *peer = &cep->peer_v2;
	struct uiw_mpa_v2 v2 = {};
	u8 buf[UIW_RTR_PD_LEN];

	/* ORD as large as the initiator's IRD allows: the application never set one. */
	p->ord = UIW_MAX_ORD;
	if (uiw_settle_ird_ord(&p->ird, &p->ord, peer->ird, peer->ord, UIW_MAX_IRD))
		return -EINVAL;
	uiw_rtr_pd_encode(buf, rep);
	if (uiw_cep_sctp(cep)) {
		/* RFC 5043 §6.2 Session Accept: no RTR message, no peer-to-peer bits. */
		p->rtr = UIW_RTR_NONE;
		p->p2p = false;
		v2.ird = p->ird;
		v2.ord = p->ord;
		return uiw_sctp_send_accept(cep, &v2, buf, sizeof(buf));
	}
	if (p->rtr == UIW_RTR_NONE)
		p->rtr = peer->write_rtr ? UIW_RTR_WRITE :
			 peer->read_rtr	 ? UIW_RTR_READ :
					   UIW_RTR_NONE;
	if (p->rtr == UIW_RTR_NONE)
		return -EINVAL;
	if (p->rtr == UIW_RTR_READ && !p->ird)
		p->ird = 1;
	p->markers_rx = false;
	/* The Initiator's RFC 7306 offer (the Request's bits), accepted if we offer it too. */
	p->rdmap_ext = p->rdmap_ext && uiw_rdmap_ext_offer(cep, cep->qp);
	v2.ird = p->ird;
	v2.ord = p->ord;
	v2.p2p = true;
	v2.write_rtr = p->rtr == UIW_RTR_WRITE;
	v2.read_rtr = p->rtr == UIW_RTR_READ;
	return uiw_mpa_send(cep->sock, false,
			    p->rev | (p->crc ? UIW_MPA_CRC : 0) | UIW_MPA_ENHANCED |
			    (p->rdmap_ext ? UIW_MPA_RDMAP_EXT_ACCEPT : 0),
			    &v2, buf, sizeof(buf));
}

/* The iw_cm_id of a device's RTR service listener (uiw_rtr_listen_get), not rdma_cm's. */
bool uiw_rtr_service_id(const struct iw_cm_id *id)
{
	return id->event_handler == uiw_rtr_id_event;
}

static bool uiw_rtr_listener(struct uiw_cep *lcep)
{
	struct iw_cm_id *lid = READ_ONCE(lcep->cm_id);

	return lid && uiw_rtr_service_id(lid);
}

/*
 * A connection accepted by lcep (its lock held): on an RTR listener, only one from an
 * initiator's privileged source port is read. Anything else is reset before a byte of it is
 * read, so it neither learns anything nor holds a place among the listener's children.
 */
bool uiw_rtr_admit(struct uiw_cep *lcep, struct socket *s)
{
	struct sockaddr_storage peer = {};
	u8 addr[16];
	u16 port;

	if (!uiw_rtr_listener(lcep))
		return true;
	if (kernel_getpeername(s, (struct sockaddr *)&peer) < 0)
		return false;
	uiw_conn_addr(&peer, addr, &port);
	if (port >= UIW_RTR_SRC_PORT_MIN && port <= UIW_RTR_SRC_PORT_MAX)
		return true;
	uiw_dbg(lcep->udev, "unprivileged source port %u refused\n", port);
	return false;
}

/*
 * A Request arrived on the device's RTR listener (true), or on another listener (false:
 * the caller goes on with iw_cm). Match it to a QP, then accept or refuse it.
 */
bool uiw_rtr_request(struct uiw_cep *cep, const u8 *pd, u16 pd_len)
{
	struct uiw_cep *lcep = cep->listener;
	struct uiw_dev *udev = cep->udev;
	struct sockaddr_storage local = {}, remote = {};
	struct uiw_rtr_pd req = {}, rep;
	struct uiw_qp *qp = NULL;
	union ib_gid lgid, rgid;
	int reason;
	u32 ird = 0;

	/*
	 * One of our listeners? Its id stays valid while this child is on its list or waits
	 * for this lock (uiw_iw_destroy_listen drops its children under their lock).
	 */
	if (!lcep || !uiw_rtr_listener(lcep))
		return false;
	cep->rtr = true;
	kernel_getsockname(cep->sock, (struct sockaddr *)&local);
	kernel_getpeername(cep->sock, (struct sockaddr *)&remote);
	uiw_sockaddr_gid(&local, &lgid);
	uiw_sockaddr_gid(&remote, &rgid);

	reason = uiw_rtr_pd_decode(pd, pd_len, &req);
	/*
	 * Over TCP the initiator must ask for peer-to-peer mode (RFC 6581) so that our side
	 * may send first. RFC 5043 has no such mode and needs none: the Session Accept is
	 * acknowledged before either side's DDP Segments (uiw_sctp_send_accept).
	 */
	if (!reason && (req.type != UIW_RTR_PD_REQUEST ||
			!(cep->params.p2p || uiw_cep_sctp(cep))))
		reason = UIW_RTR_BAD_PD;
	if (!reason) {
		qp = uiw_qp_lookup(udev, req.dst_qpn & UIW_QPN_MAX);
		reason = qp ? uiw_rtr_match(qp, &req, &lgid, &rgid) :
			      UIW_RTR_NO_QP;
	}
	if (!reason) {
		spin_lock_bh(&qp->lock);
		ird = qp->rtr.app_ird;
		spin_unlock_bh(&qp->lock);
		/* Takes over our QP reference; fails if another connection won the race. */
		if (uiw_cep_attach_qp(cep, qp))
			reason = UIW_RTR_BUSY;
		else
			qp = NULL;
	}
	if (qp)
		uiw_qp_put(qp);
	if (reason) {
		uiw_rtr_refuse(cep, reason, &req);
		return true;
	}

	/* Ours now: the QP and the socket hold the endpoint. */
	if (uiw_cep_unlink_child(cep))
		uiw_cep_put(cep);
	cep->params.ird = min_t(u32, ird, UIW_MAX_IRD);
	rep = (struct uiw_rtr_pd){
		.version = UIW_RTR_PD_VERSION,
		.type = UIW_RTR_PD_ACCEPT,
		.src_qpn = cep->qp->ibqp.qp_num,
		.dst_qpn = req.src_qpn,
		.src = lgid,
		.dst = rgid,
	};
	if (uiw_rtr_send_accept(cep, &rep)) {
		uiw_cep_finish(cep, true);
		return true;
	}
	uiw_cep_enter_rdma_mode(cep);
	uiw_cep_connected(cep);
	uiw_dbg(udev, "QP %u accepted QP %u\n", rep.src_qpn, rep.dst_qpn);
	return true;
}

/* Initiator: the Reply must name our QP as its peer and come from the QP we asked for. */
int uiw_rtr_reply(struct uiw_cep *cep, const u8 *pd, u16 pd_len)
{
	struct uiw_qp *qp = cep->qp;
	struct uiw_rtr_pd rep;
	bool ok;

	if (!qp || uiw_rtr_pd_decode(pd, pd_len, &rep) ||
	    rep.type != UIW_RTR_PD_ACCEPT)
		return -EPROTO;
	spin_lock_bh(&qp->lock);
	ok = rep.src_qpn == qp->rtr.dest_qpn && rep.dst_qpn == qp->ibqp.qp_num &&
	     uiw_gid_eq(&rep.src, &qp->rtr.dgid) &&
	     uiw_gid_eq(&rep.dst, &qp->rtr.sgid);
	spin_unlock_bh(&qp->lock);
	return ok ? 0 : -EPROTO;
}

/* Events of an endpoint without cm_id: a failed connect is retried or fails the QP. */
void uiw_rtr_cep_event(struct uiw_cep *cep, enum iw_cm_event_type type,
		       int status, const void *pd, u8 pd_len)
{
	struct uiw_qp *qp = cep->qp;
	struct uiw_rtr_pd rej;

	/* Our side's connection failed after the Reply was sent (uiw_cm.c). */
	if (type == IW_CM_EVENT_CLOSE && status && qp) {
		uiw_rtr_fail(qp, status);
		return;
	}
	if (type != IW_CM_EVENT_CONNECT_REPLY || !status || !qp || !cep->active)
		return;
	/*
	 * Not final: no listener yet (TCP reset), the peer QP is not in RTR yet, or the
	 * connection was reset before any Reply (the peer's listener was full and dropped it).
	 */
	if ((status == -ECONNRESET && !pd_len) ||
	    (status == -ECONNREFUSED &&
	     (!pd_len || (!uiw_rtr_pd_decode(pd, pd_len, &rej) &&
			  rej.type == UIW_RTR_PD_REJECT &&
			  rej.reason == UIW_RTR_NOT_READY)))) {
		uiw_rtr_retry(qp);
		return;
	}
	if (pd_len && !uiw_rtr_pd_decode(pd, pd_len, &rej))
		uiw_dbg_qp(qp, "peer refused: reason %u\n", rej.reason);
	uiw_rtr_fail(qp, status);
}
