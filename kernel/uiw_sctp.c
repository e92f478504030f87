// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
/*
 * DDP over SCTP (RFC 5043): the device's LLP setting, the DDP association options and the
 * DDP Stream Session Control exchange under iw_cm. See uiw_sctp.h.
 */
#include <linux/device.h>
#include <linux/inetdevice.h>
#include <linux/net.h>
#include <linux/sctp.h>
#include <linux/slab.h>
#include <linux/socket.h>
#include <linux/tcp.h>
#include <net/sctp/sctp.h>
#include <net/sock.h>
#include <net/tcp.h>

#include "uiw.h"
#include "uiw_cm.h"
#include "uiw_mpa.h"
#include "uiw_sctp.h"

/* sysfs: /sys/class/infiniband/<dev>/llp */

static ssize_t llp_show(struct device *device, struct device_attribute *attr,
			char *buf)
{
	struct uiw_dev *udev = rdma_device_to_drv_device(device, struct uiw_dev, ibdev);

	return sysfs_emit(buf, "%s\n", READ_ONCE(udev->llp_sctp) ? "sctp" : "tcp");
}

static ssize_t llp_store(struct device *device, struct device_attribute *attr,
			 const char *buf, size_t count)
{
	struct uiw_dev *udev = rdma_device_to_drv_device(device, struct uiw_dev, ibdev);

	/* Applies to connections and listeners created afterwards. */
	if (sysfs_streq(buf, "sctp"))
		WRITE_ONCE(udev->llp_sctp, true);
	else if (sysfs_streq(buf, "tcp"))
		WRITE_ONCE(udev->llp_sctp, false);
	else
		return -EINVAL;
	return count;
}
DEVICE_ATTR_RW(llp);

int uiw_llp_protocol(struct uiw_dev *udev)
{
	return READ_ONCE(udev->llp_sctp) ? IPPROTO_SCTP : IPPROTO_TCP;
}

bool uiw_cep_sctp(const struct uiw_cep *cep)
{
	return cep->sock && cep->sock->sk->sk_protocol == IPPROTO_SCTP;
}

static int uiw_sctp_setopt(struct socket *s, int opt, void *val, unsigned int len)
{
	return s->ops->setsockopt(s, SOL_SCTP, opt, KERNEL_SOCKPTR(val), len);
}

/*
 * SCTP does not autotune its buffers as TCP does: the receive window it advertises in INIT /
 * INIT-ACK is half the receive buffer (net.core.rmem_default, 208 KiB here), about three DDP
 * Segments of a loopback path MTU, and the sender stalls on it. Both buffers are sized for a
 * few dozen segments before the association exists (uiw_sock_fix_bufs).
 */
#define UIW_SCTP_BUF (4 << 20)

int uiw_sctp_sock_setup(struct socket *s)
{
	/* RFC 5043 §5.1, §11.1: the DDP Adaptation Layer Indication in our INIT / INIT-ACK. */
	struct sctp_setadaptation ad = { .ssb_adaptation_ind = UIW_SCTP_ADAPTATION_DDP };
	/* §8: equal inbound and outbound stream counts; uiw uses one DDP stream. */
	struct sctp_initmsg im = { .sinit_num_ostreams = 1, .sinit_max_instreams = 1 };
	/* §10: U=1 on every chunk; what the kernel itself sends is Session Control. */
	struct sctp_sndinfo si = {
		.snd_flags = SCTP_UNORDERED,
		/* The UAPI declares the PPID a plain __u32 that holds network order. */
		.snd_ppid = (__force u32)htonl(UIW_SCTP_PPID_CONTROL),
	};
	/*
	 * §11.1: the peer's indication arrives as a notification. ASSOC_CHANGE also wakes a
	 * listener (data_ready) when an association is ready to accept.
	 */
	struct sctp_event ev[2] = {
		{ .se_type = SCTP_ADAPTATION_INDICATION, .se_on = 1 },
		{ .se_type = SCTP_ASSOC_CHANGE, .se_on = 1 },
	};
	int one = 1;
	int rv;

	rv = uiw_sctp_setopt(s, SCTP_ADAPTATION_LAYER, &ad, sizeof(ad));
	rv = rv ?: uiw_sctp_setopt(s, SCTP_INITMSG, &im, sizeof(im));
	rv = rv ?: uiw_sctp_setopt(s, SCTP_DEFAULT_SNDINFO, &si, sizeof(si));
	rv = rv ?: uiw_sctp_setopt(s, SCTP_EVENT, &ev[0], sizeof(ev[0]));
	rv = rv ?: uiw_sctp_setopt(s, SCTP_EVENT, &ev[1], sizeof(ev[1]));
	rv = rv ?: uiw_sctp_setopt(s, SCTP_RECVRCVINFO, &one, sizeof(one));
	/* §11.2: untagged messages SHOULD NOT wait for bundling. */
	rv = rv ?: uiw_sctp_setopt(s, SCTP_NODELAY, &one, sizeof(one));
	if (!rv)
		uiw_sock_fix_bufs(s->sk, UIW_SCTP_BUF, UIW_SCTP_BUF);
	return rv;
}

void uiw_sock_set_nodelay(struct socket *s)
{
	int one = 1;

	if (s->sk->sk_protocol == IPPROTO_SCTP)
		uiw_sctp_setopt(s, SCTP_NODELAY, &one, sizeof(one));
	else
		tcp_sock_set_nodelay(s->sk);
}

/*
 * Multihoming (RFC 5043 §7.2). A DDP endpoint covers the IPv4 addresses of its own netdev:
 * "addresses on one RNIC" (which the local interface MAY require), and for a software RNIC
 * on one netdev more addresses bring "neither additional bus traffic nor duplication of
 * memory registration resources", the condition under which the default binding may cover
 * more than one. So a wildcard IPv4 listener binds the netdev's addresses (not every address
 * of the namespace, as an SCTP wildcard bind would), and a connecting endpoint adds the
 * netdev's other addresses to the one rdma_cm chose. SCTP uses them for failover only; uiw
 * never picks source addresses (no load balancing, §7.2). IPv6 endpoints stay single-homed
 * (a wildcard IPv6 listener keeps SCTP's wildcard binding).
 */
#define UIW_SCTP_MAX_ADDRS 8

static int uiw_netdev_ipv4(struct uiw_dev *udev, __be32 *addrs)
{
	const struct in_ifaddr *ifa;
	struct in_device *in_dev;
	int n = 0;

	rcu_read_lock();
	in_dev = __in_dev_get_rcu(udev->netdev);
	if (in_dev) {
		in_dev_for_each_ifa_rcu(ifa, in_dev) {
			if (n < UIW_SCTP_MAX_ADDRS)
				addrs[n++] = ifa->ifa_local;
		}
	}
	rcu_read_unlock();
	return n;
}

/* Adds the netdev's IPv4 addresses other than the bound one, at the bound port. */
void uiw_sctp_bind_more(struct uiw_dev *udev, struct socket *s)
{
	__be32 addrs[UIW_SCTP_MAX_ADDRS];
	struct sockaddr_in bound = {};
	int i, n;

	if (kernel_getsockname(s, (struct sockaddr *)&bound) < 0 ||
	    bound.sin_family != AF_INET || bound.sin_addr.s_addr == htonl(INADDR_ANY))
		return;
	n = uiw_netdev_ipv4(udev, addrs);
	for (i = 0; i < n; i++) {
		struct sockaddr_in a = {
			.sin_family = AF_INET,
			.sin_port = bound.sin_port,
			.sin_addr.s_addr = addrs[i],
		};

		if (addrs[i] != bound.sin_addr.s_addr)
			uiw_sctp_setopt(s, SCTP_SOCKOPT_BINDX_ADD, &a, sizeof(a));
	}
}

int uiw_sctp_bind(struct uiw_dev *udev, struct socket *s,
		  const struct sockaddr_storage *laddr)
{
	struct sockaddr_storage a = *laddr;
	__be32 addrs[UIW_SCTP_MAX_ADDRS];
	int rv;

	if (a.ss_family == AF_INET && uiw_addr_is_any(&a) &&
	    uiw_netdev_ipv4(udev, addrs) > 0)
		((struct sockaddr_in *)&a)->sin_addr.s_addr = addrs[0];
	rv = kernel_bind(s, uiw_sockaddr(&a), uiw_addr_len(&a));
	if (!rv)
		uiw_sctp_bind_more(udev, s);
	return rv;
}

/* Session Control (RFC 5043 §5.2.3) */

static int uiw_sctp_send_ctrl(struct uiw_cep *cep, u16 ssn, u16 fn,
			      const struct uiw_mpa_v2 *v2, const void *pd, u16 pd_len)
{
	struct msghdr msg = { .msg_flags = MSG_DONTWAIT | MSG_NOSIGNAL };
	u8 hdr[UIW_SCTP_CTRL_HDR + UIW_MPA_V2_LEN];
	struct kvec iov[2] = { { hdr, UIW_SCTP_CTRL_HDR }, { (void *)pd, pd_len } };
	size_t hdr_len = UIW_SCTP_CTRL_HDR;
	int rv;

	if (!cep->sock)
		return -ENOTCONN;
	put_unaligned_be16(ssn, hdr);
	put_unaligned_be16(fn, hdr + 2);
	if (v2) {
		/* RFC 6581 §... word: |A|B| IRD(14) |C|D| ORD(14)|, no peer-to-peer bits here. */
		put_unaligned_be16(min_t(u16, v2->ird, UIW_MPA_V2_MASK), hdr + 4);
		put_unaligned_be16(min_t(u16, v2->ord, UIW_MPA_V2_MASK), hdr + 6);
		hdr_len += UIW_MPA_V2_LEN;
	}
	iov[0].iov_len = hdr_len;
	/* §5.2.3: "Private Data length MUST NOT exceed 512 bytes in any message." */
	if (hdr_len - UIW_SCTP_CTRL_HDR + pd_len > UIW_SCTP_MAX_PD)
		return -EINVAL;
	/* One message, PPID 17, unordered (SCTP_DEFAULT_SNDINFO). */
	rv = kernel_sendmsg(cep->sock, &msg, iov, pd_len ? 2 : 1, hdr_len + pd_len);
	return rv < 0 ? rv : 0;
}

/*
 * §6.2: the Initiate is the active side's first chunk (DDP-SSN 0). The enhanced-setup
 * parameters are forced: the IRD/ORD word always leads the private data, and there are no
 * MPA CRC, Markers or RTR on SCTP.
 */
int uiw_sctp_send_initiate(struct uiw_cep *cep)
{
	struct uiw_cep_params *p = &cep->params;
	struct uiw_mpa_v2 v2 = { .ird = p->ird, .ord = p->ord };

	p->rev = UIW_MPA_REV2;
	p->enhanced = true;
	p->crc = false;
	p->p2p = false;
	p->rtr_offer = 0;
	p->rtr = UIW_RTR_NONE;
	p->markers_rx = false;
	return uiw_sctp_send_ctrl(cep, 0, UIW_SCTP_FN_INITIATE, &v2, cep->tx_pd,
				  cep->tx_pd_len);
}

/* True while our association has DATA not yet acknowledged by the peer. */
static bool uiw_sctp_unacked(struct socket *s)
{
	struct sock *sk = s->sk;
	struct sctp_association *asoc;
	bool busy = false;

	lock_sock(sk);
	asoc = list_first_entry_or_null(&sctp_sk(sk)->ep->asocs,
					struct sctp_association, asocs);
	/* sctp_outq_is_empty(), which sctp.ko does not export. */
	if (asoc)
		busy = asoc->outqueue.out_qlen || asoc->outqueue.outstanding_bytes ||
		       !list_empty(&asoc->outqueue.retransmit);
	release_sock(sk);
	return busy;
}

/*
 * Process context. An association that ended (ABORT received or sent, COMM_LOST) leaves a
 * TCP-style socket's sk_state at ESTABLISHED and its shutdown bits clear; only the
 * association's own state, or its absence once freed, tells.
 */
bool uiw_sctp_assoc_ended(struct socket *s)
{
	struct sock *sk = s->sk;
	struct sctp_association *asoc;
	bool ended;

	lock_sock(sk);
	asoc = list_first_entry_or_null(&sctp_sk(sk)->ep->asocs,
					struct sctp_association, asocs);
	ended = !asoc || asoc->state == SCTP_STATE_CLOSED;
	release_sock(sk);
	return ended;
}

/*
 * SCTP_SENDER_DRY_EVENT (RFC 6458 §6.1.9): a notification once nothing we sent is
 * unacknowledged, at once if that is already so when subscribing. It wakes data_ready.
 */
static int uiw_sctp_sender_dry_events(struct socket *s, bool on)
{
	struct sctp_event ev = { .se_type = SCTP_SENDER_DRY_EVENT, .se_on = on };

	return uiw_sctp_setopt(s, SCTP_EVENT, &ev, sizeof(ev));
}

/*
 * The Accept is the passive side's first chunk (DDP-SSN 0). Its DDP Segments follow
 * unordered and could overtake it, while the active side's kernel reads the socket until
 * the Accept: like the active side's rule of §6.6 ("determined by SCTP acking of the Data
 * Chunk"), the socket goes to its owner only once the Accept was acknowledged. Nothing
 * waits here: cep->accept_unacked holds the socket back until the sender-dry notification
 * (uiw_sctp_accept_acked), or the endpoint's timer, ends the wait.
 */
int uiw_sctp_send_accept(struct uiw_cep *cep, const struct uiw_mpa_v2 *v2,
			 const void *pd, u8 pd_len)
{
	struct uiw_mpa_v2 w = { .ird = v2->ird, .ord = v2->ord };
	int rv = uiw_sctp_send_ctrl(cep, 0, UIW_SCTP_FN_ACCEPT, &w, pd, pd_len);

	rv = rv ?: uiw_sctp_sender_dry_events(cep->sock, true);
	if (!rv)
		cep->accept_unacked = true;
	return rv;
}

/*
 * On data_ready while cep->accept_unacked: true once the Accept is acknowledged; the
 * notifications stop then (one left queued is skipped by the owner, as any but
 * ASSOC_CHANGE). Reads nothing: the peer's first DDP Segments may be queued already.
 */
bool uiw_sctp_accept_acked(struct uiw_cep *cep)
{
	if (uiw_sctp_unacked(cep->sock))
		return false;
	uiw_sctp_sender_dry_events(cep->sock, false);
	return true;
}

/* §6.3: a Reject only at the ULP's (or the setup policy's) direction; it is DDP-SSN 0. */
int uiw_sctp_send_reject(struct uiw_cep *cep, const void *pd, u8 pd_len)
{
	struct uiw_mpa_v2 v2 = {};

	return uiw_sctp_send_ctrl(cep, 0, UIW_SCTP_FN_REJECT, &v2, pd, pd_len);
}

/* Receive */

/* One message or notification; *ppid and *flags describe it. */
static int uiw_sctp_recv(struct socket *s, u8 *buf, size_t len, u32 *ppid,
			 int *flags)
{
	u8 cbuf[CMSG_SPACE(sizeof(struct sctp_rcvinfo))] __aligned(8) = {};
	struct msghdr msg = {
		.msg_control = cbuf,
		.msg_controllen = sizeof(cbuf),
		.msg_control_is_user = false,
	};
	struct kvec iov = { buf, len };
	struct cmsghdr *c = (struct cmsghdr *)cbuf;
	int rv;

	rv = kernel_recvmsg(s, &msg, &iov, 1, len, MSG_DONTWAIT);
	if (rv < 0)
		return rv;
	*flags = msg.msg_flags;
	*ppid = 0;
	/* put_cmsg() advanced msg_control: the first (only) cmsg is at the buffer's start. */
	if (c->cmsg_len >= CMSG_LEN(sizeof(struct sctp_rcvinfo)) &&
	    c->cmsg_level == IPPROTO_SCTP && c->cmsg_type == SCTP_RCVINFO) {
		struct sctp_rcvinfo ri;

		memcpy(&ri, CMSG_DATA(c), sizeof(ri));
		*ppid = ntohl((__force __be32)ri.rcv_ppid);
	}
	return rv;
}

/* RFC 5043 §6.1: a chunk out of the legal sequence terminates the session. */
static int uiw_sctp_refuse(struct uiw_cep *cep, bool request, const char *why)
{
	uiw_dbg(cep->udev, "SCTP session %s: %s\n", request ? "initiate" : "reply", why);
	/* Our DDP-SSN: 0 if we sent nothing yet (passive), 1 after the Initiate. */
	if (cep->sctp_ddp_peer)
		uiw_sctp_send_ctrl(cep, request ? 0 : 1, UIW_SCTP_FN_TERMINATE, NULL, NULL, 0);
	return -EPROTO;
}

static int uiw_sctp_notification(struct uiw_cep *cep, const u8 *buf, int len)
{
	const union sctp_notification *n = (const void *)buf;

	if (len < (int)sizeof(n->sn_header))
		return 0;
	switch (n->sn_header.sn_type) {
	case SCTP_ADAPTATION_INDICATION:
		/* §11.1: only the DDP indication allows DDP procedures on this association. */
		if (len >= (int)sizeof(n->sn_adaptation_event))
			cep->sctp_ddp_peer = n->sn_adaptation_event.sai_adaptation_ind ==
					     UIW_SCTP_ADAPTATION_DDP;
		return 0;
	case SCTP_ASSOC_CHANGE:
		if (len >= (int)sizeof(n->sn_assoc_change) &&
		    (n->sn_assoc_change.sac_state == SCTP_COMM_LOST ||
		     n->sn_assoc_change.sac_state == SCTP_SHUTDOWN_COMP ||
		     n->sn_assoc_change.sac_state == SCTP_CANT_STR_ASSOC))
			return -ECONNRESET;
		return 0;
	default:
		return 0;
	}
}

static const char *const uiw_sctp_ctrl_why[] = {
	[UIW_SCTP_CTRL_OK] = "",
	[UIW_SCTP_CTRL_SHORT] = "short Session Control message",
	[UIW_SCTP_CTRL_PD_TOO_LONG] = "private data over 512 octets",
	[UIW_SCTP_CTRL_BAD_FN] = "bad function code",
	[UIW_SCTP_CTRL_TERMINATE_PD] = "Terminate with private data",
};

int uiw_sctp_recv_frame(struct uiw_cep *cep, struct uiw_mpa_rx *rx, bool request)
{
	/* One octet more than the largest legal message, to see an oversized one. */
	const size_t cap = UIW_SCTP_CTRL_HDR + UIW_SCTP_MAX_PD + 1;
	u8 *buf = kmalloc(cap, GFP_KERNEL);
	enum uiw_sctp_ctrl_status st;
	int rv, flags;
	bool initiate;
	u16 ssn, fn;
	u32 ppid;

	if (!buf)
		return -ENOMEM;
	for (;;) {
		rv = uiw_sctp_recv(cep->sock, buf, cap, &ppid, &flags);
		if (rv == -EAGAIN) {
			rv = uiw_sk_peer_gone(cep->sock->sk) ? -ECONNRESET : -EAGAIN;
			goto out;
		}
		if (rv <= 0) {
			rv = rv ?: -ECONNRESET;	/* 0: the association was shut down */
			goto out;
		}
		if (!(flags & MSG_NOTIFICATION))
			break;
		rv = uiw_sctp_notification(cep, buf, rv);
		if (rv)
			goto out;
	}
	/*
	 * §11.1: without the DDP Adaptation Indication "DDP procedures MUST NOT be performed
	 * upon this association": no Session Control is answered, the association is dropped.
	 */
	if (!cep->sctp_ddp_peer) {
		rv = uiw_sctp_refuse(cep, request, "peer sent no DDP adaptation indication");
		goto out;
	}
	/* §5.1: only PPIDs 16 and 17; before the session is up only Session Control. */
	if (ppid != UIW_SCTP_PPID_CONTROL) {
		rv = uiw_sctp_refuse(cep, request, "not a Session Control message");
		goto out;
	}
	/* A message larger than the buffer arrives without MSG_EOR: over 512 octets too. */
	st = flags & MSG_EOR ? uiw_sctp_ctrl_parse(buf, rv, &ssn, &fn) :
			       UIW_SCTP_CTRL_PD_TOO_LONG;
	if (st) {
		rv = uiw_sctp_refuse(cep, request, uiw_sctp_ctrl_why[st]);
		goto out;
	}
	rx->pd_len = rv - UIW_SCTP_CTRL_HDR;
	/* §6.2: each side's first chunk of a session has DDP-SSN 0. */
	if (ssn != 0) {
		rv = uiw_sctp_refuse(cep, request, "DDP-SSN not 0");
		goto out;
	}
	/* §6.4: the passive side's limit, or the peer ended the session. */
	if (fn == UIW_SCTP_FN_TERMINATE) {
		rv = -ECONNRESET;
		goto out;
	}
	/* A request carries the Initiate function; a reply carries any other. */
	initiate = fn == UIW_SCTP_FN_INITIATE;
	if (request != initiate) {
		rv = uiw_sctp_refuse(cep, request, "function out of sequence");
		goto out;
	}
	/* The MPA code takes it from here, as an enhanced MPA frame (uiw_sctp.h). */
	memcpy(rx->pd, buf + UIW_SCTP_CTRL_HDR, rx->pd_len);
	rx->bits = UIW_MPA_REV2 | UIW_MPA_ENHANCED |
		   (fn == UIW_SCTP_FN_REJECT ? UIW_MPA_REJECT : 0);
	rv = 0;
out:
	kfree(buf);
	return rv;
}
