// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
/*
 * uiw connection manager: endpoint lifetime, socket callbacks, event dispatch and the
 * transitions shared by the active and passive sides. The iw_cm ops and the MPA
 * negotiation are in uiw_cm_conn.c, the QP side (close, destroy, hand-off) in uiw_cm_qp.c.
 */

#include <linux/cred.h>
#include <linux/file.h>
#include <linux/sched/task.h>
#include <linux/module.h>
#include <linux/tcp.h>
#include <net/ip.h>
#include <net/ipv6.h>
#include <net/sock.h>
#include <net/tcp.h>

#include "uiw_cm.h"
#include "uiw_sctp.h"

/* Ordered: one endpoint event at a time, in the order they were posted. */
static struct workqueue_struct *uiw_cm_wq;
static atomic_t uiw_cep_count = ATOMIC_INIT(0);

/*
 * Credentials with CAP_NET_BIND_SERVICE alone, for binding connect-on-RTR sockets to
 * privileged ports (uiw_rtr.c) in the caller's context: inet_bind() and SCTP's connect
 * check the capability of current, and the point of those ports is that the caller lacks it.
 */
static struct cred *uiw_bind_cred;

const struct cred *uiw_privileged_begin(void)
{
	return override_creds(uiw_bind_cred);
}

void uiw_privileged_end(const struct cred *old)
{
	revert_creds(old);
}

static void uiw_cep_work(struct work_struct *work);
static void uiw_cep_timeout(struct work_struct *work);

/* Endpoint lifetime */

static void uiw_cep_release(struct kref *ref)
{
	struct uiw_cep *cep = container_of(ref, struct uiw_cep, ref);
	struct uiw_dev *udev = cep->udev;

	WARN_ON(cep->sock || cep->cm_id || cep->qp || cep->listener);
	spin_lock_bh(&udev->cep_lock);
	list_del(&cep->dev_entry);
	spin_unlock_bh(&udev->cep_lock);
	put_device(&udev->ibdev.dev);
	kfree(cep);
	atomic_dec(&uiw_cep_count);
}

void uiw_cep_get(struct uiw_cep *cep)
{
	kref_get(&cep->ref);
}

void uiw_cep_put(struct uiw_cep *cep)
{
	kref_put(&cep->ref, uiw_cep_release);
}

struct uiw_cep *uiw_cep_alloc(struct uiw_dev *udev)
{
	struct uiw_cep *cep = kzalloc(sizeof(*cep), GFP_KERNEL);

	if (!cep)
		return NULL;
	kref_init(&cep->ref);
	mutex_init(&cep->lock);
	cep->udev = udev;
	get_device(&udev->ibdev.dev);
	INIT_LIST_HEAD(&cep->children);
	INIT_LIST_HEAD(&cep->child_entry);
	INIT_WORK(&cep->work, uiw_cep_work);
	INIT_DELAYED_WORK(&cep->timer, uiw_cep_timeout);
	atomic_inc(&uiw_cep_count);

	spin_lock_bh(&udev->cep_lock);
	list_add_tail(&cep->dev_entry, &udev->cep_list);
	spin_unlock_bh(&udev->cep_lock);
	return cep;
}

/* Queue event processing; callable from any context. */
void uiw_cep_post(struct uiw_cep *cep, enum uiw_cep_event ev)
{
	set_bit(ev, &cep->events);
	uiw_cep_get(cep);
	if (!queue_work(uiw_cm_wq, &cep->work))
		uiw_cep_put(cep);	/* already queued; never the last reference */
}

/* Caller holds cep->lock. The timer only acts if the state is still the armed one. */
void uiw_cep_arm_timer(struct uiw_cep *cep, unsigned long delay)
{
	cep->timer_state = cep->state;
	cep->timer_expires = jiffies + delay;
	uiw_cep_get(cep);
	if (mod_delayed_work(uiw_cm_wq, &cep->timer, delay))
		uiw_cep_put(cep);
}

void uiw_cep_cancel_timer(struct uiw_cep *cep)
{
	cep->timer_state = UIW_CEP_IDLE;
	if (cancel_delayed_work(&cep->timer))
		uiw_cep_put(cep);
}

/* Socket callbacks (softirq or process context; they only post events). */

static void uiw_sk_data_ready(struct sock *sk)
{
	struct uiw_cep *cep;

	read_lock_bh(&sk->sk_callback_lock);
	cep = sk->sk_user_data;
	if (cep)
		uiw_cep_post(cep, UIW_CEP_EV_READ);
	read_unlock_bh(&sk->sk_callback_lock);
}

static void uiw_sk_state_change(struct sock *sk)
{
	void (*orig)(struct sock *sk) = NULL;
	struct uiw_cep *cep;

	read_lock_bh(&sk->sk_callback_lock);
	cep = sk->sk_user_data;
	if (cep) {
		orig = cep->sk_state_change;
		uiw_cep_post(cep, UIW_CEP_EV_STATE);
	}
	read_unlock_bh(&sk->sk_callback_lock);
	/* The owner's poll/epoll waits on the original wakeup. */
	if (orig)
		orig(sk);
}

/*
 * Listener. Accepted children inherit this callback and the listener's sk_user_data
 * until uiw_listen_accept() installs their own, so act on listening sockets only.
 */
static void uiw_sk_listen_data_ready(struct sock *sk)
{
	struct uiw_cep *cep;

	read_lock_bh(&sk->sk_callback_lock);
	cep = sk->sk_user_data;
	if (cep && sk->sk_state == TCP_LISTEN)
		uiw_cep_post(cep, UIW_CEP_EV_ACCEPT);
	read_unlock_bh(&sk->sk_callback_lock);
}

/*
 * Bind a socket to cep and install the callbacks of `mode` (the socket holds a cep
 * reference). orig_data_ready: what to restore, if not the socket's current callback.
 */
void uiw_sk_assoc(struct uiw_cep *cep, struct socket *s, enum uiw_sk_mode mode,
		  void (*orig_data_ready)(struct sock *sk))
{
	struct sock *sk = s->sk;

	uiw_cep_get(cep);
	cep->sock = s;
	write_lock_bh(&sk->sk_callback_lock);
	cep->sk_data_ready = orig_data_ready ?: sk->sk_data_ready;
	cep->sk_state_change = sk->sk_state_change;
	sk->sk_user_data = cep;
	switch (mode) {
	case UIW_SK_LISTEN:
		sk->sk_data_ready = uiw_sk_listen_data_ready;
		break;
	case UIW_SK_MPA:
		sk->sk_data_ready = uiw_sk_data_ready;
		sk->sk_state_change = uiw_sk_state_change;
		break;
	}
	write_unlock_bh(&sk->sk_callback_lock);
}

/* End of the setup exchange: the socket's own data_ready again (state_change stays). */
static void uiw_sk_restore_data_ready(struct uiw_cep *cep)
{
	struct sock *sk = cep->sock->sk;

	write_lock_bh(&sk->sk_callback_lock);
	sk->sk_data_ready = cep->sk_data_ready;
	write_unlock_bh(&sk->sk_callback_lock);
}

/*
 * Handed-over socket: watch it from its wait queue (struct socket's, so a child accepted on
 * it by its owner starts without us), and only for the peer's FIN or RST, which is all that
 * uiw_cep_state() acts on in RDMA mode. Runs under the wait queue's lock in any context.
 * Cost: with the entry queued the queue is never empty, so every wakeup of the socket (each
 * received segment included) takes its lock and calls this, sleeper or not.
 */
static void uiw_sk_watch_check(struct uiw_cep *cep)
{
	if (uiw_sk_peer_gone(cep->sock->sk) && !test_and_set_bit(0, &cep->watch_gone))
		uiw_cep_post(cep, UIW_CEP_EV_STATE);
}

static int uiw_sk_watch_wake(struct wait_queue_entry *wq, unsigned int mode,
			     int sync, void *key)
{
	struct uiw_cep *cep = container_of(wq, struct uiw_cep, watch);

	/*
	 * The end of an SCTP association shows only in the association (uiw_sctp_assoc_ended,
	 * process context); sk_state_change (sock_def_wakeup) wakes without a poll key.
	 */
	if (!key && cep->sock->sk->sk_protocol == IPPROTO_SCTP)
		uiw_cep_post(cep, UIW_CEP_EV_STATE);
	else
		uiw_sk_watch_check(cep);
	return 0;
}

/* Caller holds cep->lock; the socket has none of our callbacks (uiw_sk_disassoc). */
void uiw_sk_watch(struct uiw_cep *cep)
{
	uiw_cep_get(cep);
	init_waitqueue_func_entry(&cep->watch, uiw_sk_watch_wake);
	cep->watch_head = &cep->sock->wq.wait;
	add_wait_queue(cep->watch_head, &cep->watch);
	/* A FIN that came before the entry was queued woke nobody. */
	uiw_sk_watch_check(cep);
}

/*
 * Restore the socket's callbacks or take our wait queue entry off; nothing of ours runs for
 * the socket afterwards (remove_wait_queue waits out a wakeup in progress).
 */
void uiw_sk_disassoc(struct uiw_cep *cep)
{
	struct sock *sk = cep->sock->sk;

	if (cep->watch_head) {
		remove_wait_queue(cep->watch_head, &cep->watch);
		cep->watch_head = NULL;
		uiw_cep_put(cep);
		return;
	}
	write_lock_bh(&sk->sk_callback_lock);
	if (sk->sk_user_data == cep) {
		sk->sk_data_ready = cep->sk_data_ready;
		sk->sk_state_change = cep->sk_state_change;
		sk->sk_user_data = NULL;
	}
	write_unlock_bh(&sk->sk_callback_lock);
	uiw_cep_put(cep);
}

/*
 * A graceful close sends its FIN only once the peer acknowledged what was written before it,
 * or after UIW_FIN_ACK_WAIT. A FIN that reaches the peer while our last segment still sits in
 * its socket's backlog (the socket busy in a sendmsg of the peer's own) is merged into that
 * segment (Linux tcp_add_backlog), and TCP then calls sk_state_change for the FIN before
 * sk_data_ready for the data. siw's close work takes its QP's state lock for writing on the
 * FIN, and its data_ready reads the socket only if a read trylock of that lock succeeds: our
 * last message is left unread and the receive it was for flushed. A segment the peer's TCP
 * acknowledged has left the backlog, and its data_ready ran before our FIN can arrive.
 */

/* TCP: a wait begins while part of what was written is unacknowledged; it ends by *ack. */
static bool uiw_fin_ack_begin(struct sock *sk, struct uiw_fin_ack *ack)
{
	if (sk->sk_protocol != IPPROTO_TCP)
		return false;
	ack->seq = READ_ONCE(tcp_sk(sk)->write_seq);
	ack->deadline = jiffies + UIW_FIN_ACK_WAIT;
	return READ_ONCE(tcp_sk(sk)->snd_una) != ack->seq;
}

/* The wait is over: the ACK came, the deadline passed or the connection ended. */
static bool uiw_fin_ack_over(struct sock *sk, const struct uiw_fin_ack *ack)
{
	int state = READ_ONCE(sk->sk_state);

	return !before(READ_ONCE(tcp_sk(sk)->snd_una), ack->seq) ||
	       time_after_eq(jiffies, ack->deadline) ||
	       (state != TCP_ESTABLISHED && state != TCP_CLOSE_WAIT);
}

/*
 * Caller holds cep->lock, state CLOSING: our FIN now or at a later tick, then the peer's (its
 * FIN may have come meanwhile: the socket watch reports it once, so look here).
 */
void uiw_cep_close_write(struct uiw_cep *cep)
{
	struct sock *sk = cep->sock->sk;

	if (!cep->fin_wait)
		cep->fin_wait = uiw_fin_ack_begin(sk, &cep->fin_ack);
	if (cep->fin_wait && !uiw_fin_ack_over(sk, &cep->fin_ack)) {
		uiw_cep_arm_timer(cep, UIW_FIN_ACK_POLL);
		return;
	}
	cep->fin_wait = false;
	kernel_sock_shutdown(cep->sock, SHUT_WR);
	uiw_cep_arm_timer(cep, UIW_CLOSE_TIMEOUT);
	uiw_cep_post(cep, UIW_CEP_EV_STATE);
}

/*
 * A handed-over socket released (QP destroyed) before the peer acknowledged its data: the
 * shutdown waits on uiw_fin_waits, with the endpoint gone. The entry owns the file's
 * reference. One work looks at every waiting socket per UIW_FIN_ACK_POLL, however many
 * connections close at once.
 */
struct uiw_fin_wait {
	struct list_head entry;
	struct socket *sock;
	struct file *file;
	struct uiw_fin_ack ack;
};

static void uiw_fin_waits_scan(struct work_struct *work);
static LIST_HEAD(uiw_fin_waits);
static DEFINE_SPINLOCK(uiw_fin_waits_lock);
static DECLARE_DELAYED_WORK(uiw_fin_waits_dwork, uiw_fin_waits_scan);

static void uiw_fin_waits_end(struct list_head *ended)
{
	struct uiw_fin_wait *w, *next;

	list_for_each_entry_safe(w, next, ended, entry) {
		kernel_sock_shutdown(w->sock, SHUT_RDWR);
		fput(w->file);
		kfree(w);
	}
}

static void uiw_fin_waits_scan(struct work_struct *work)
{
	struct uiw_fin_wait *w, *next;
	LIST_HEAD(ended);
	bool more;

	spin_lock(&uiw_fin_waits_lock);
	list_for_each_entry_safe(w, next, &uiw_fin_waits, entry)
		if (uiw_fin_ack_over(w->sock->sk, &w->ack))
			list_move_tail(&w->entry, &ended);
	more = !list_empty(&uiw_fin_waits);
	spin_unlock(&uiw_fin_waits_lock);
	/* An entry added meanwhile queued the work itself. */
	if (more)
		queue_delayed_work(uiw_cm_wq, &uiw_fin_waits_dwork, UIW_FIN_ACK_POLL);
	uiw_fin_waits_end(&ended);
}

/* The wait a CLOSING endpoint began goes on; one whose FIN went out needs none. */
static bool uiw_fin_wait_start(struct uiw_cep *cep, struct socket *s, struct file *file)
{
	struct uiw_fin_ack ack = cep->fin_ack;
	struct uiw_fin_wait *w;

	if (!cep->fin_wait && !uiw_fin_ack_begin(s->sk, &ack))
		return false;
	if (uiw_fin_ack_over(s->sk, &ack))
		return false;
	w = kzalloc(sizeof(*w), GFP_KERNEL);
	if (!w)
		return false;	/* the FIN goes now, as it would without the wait */
	w->sock = s;
	w->file = file;
	w->ack = ack;
	spin_lock(&uiw_fin_waits_lock);
	list_add_tail(&w->entry, &uiw_fin_waits);
	spin_unlock(&uiw_fin_waits_lock);
	queue_delayed_work(uiw_cm_wq, &uiw_fin_waits_dwork, UIW_FIN_ACK_POLL);
	return true;
}

/* Module exit, every endpoint gone: the FINs still waiting go now. */
static void uiw_fin_waits_flush(void)
{
	LIST_HEAD(ended);

	cancel_delayed_work_sync(&uiw_fin_waits_dwork);
	spin_lock(&uiw_fin_waits_lock);
	list_splice_init(&uiw_fin_waits, &ended);
	spin_unlock(&uiw_fin_waits_lock);
	uiw_fin_waits_end(&ended);
}

/*
 * Close and forget the socket. A handed-over socket lives on while the owner keeps its
 * fd, so it is shut down explicitly (gracefully: once its data is acknowledged, above);
 * abort also makes the final close send a reset.
 */
void uiw_cep_release_sock(struct uiw_cep *cep, bool abort)
{
	struct socket *s = cep->sock;

	if (!s)
		return;
	uiw_sk_disassoc(cep);
	cep->sock = NULL;
	if (abort)
		sock_no_linger(s->sk);
	if (cep->file) {
		if (abort || !uiw_fin_wait_start(cep, s, cep->file)) {
			kernel_sock_shutdown(s, SHUT_RDWR);
			fput(cep->file);
		}
		cep->file = NULL;
	} else {
		sock_release(s);
	}
}

bool uiw_sk_peer_gone(const struct sock *sk)
{
	int state = READ_ONCE(sk->sk_state);

	return state == TCP_CLOSE || state == TCP_CLOSE_WAIT ||
	       state == TCP_LAST_ACK || (READ_ONCE(sk->sk_shutdown) & RCV_SHUTDOWN);
}

/*
 * Bytes a uiw TCP socket holds received but not yet placed. The provider drains its sockets
 * from a thread of the application, not in softirq as siw or an RNIC places, and a Send
 * completes at its source once its socket took it (RFC 5041 §5.3: once the LLP will deliver
 * it reliably; RFC 5040 §5.5: not a sign it was placed). With the kernel's autotuning the
 * receive buffer grows to net.ipv4.tcp_rmem[2] (6 MiB on Debian), so a sender's completions
 * could run that far ahead of the receiver's placement, and a small message waited behind as
 * much bulk data. A fixed buffer bounds both. Set before connect/listen, so that the first
 * window advertised already follows it.
 */
static uint tcp_rcvbuf = 2 << 20;
module_param(tcp_rcvbuf, uint, 0644);
MODULE_PARM_DESC(tcp_rcvbuf, "Receive buffer of uiw's TCP sockets, bytes, fixed when a socket is made (default 2 MiB; 0: the kernel's autotuning up to net.ipv4.tcp_rmem)");

/*
 * Fixes sk's send and receive buffers (0: leave that one to the kernel) as SO_SNDBUFFORCE and
 * SO_RCVBUFFORCE would, without the caller's CAP_NET_ADMIN: the sizes are uiw's, not the
 * application's. Before connect/listen; accepted sockets inherit the listener's.
 */
void uiw_sock_fix_bufs(struct sock *sk, uint sndbuf, uint rcvbuf)
{
	lock_sock(sk);
	if (sndbuf) {
		sk->sk_userlocks |= SOCK_SNDBUF_LOCK;
		WRITE_ONCE(sk->sk_sndbuf, clamp_t(uint, sndbuf, SOCK_MIN_SNDBUF, INT_MAX));
	}
	if (rcvbuf) {
		sk->sk_userlocks |= SOCK_RCVBUF_LOCK;
		WRITE_ONCE(sk->sk_rcvbuf, clamp_t(uint, rcvbuf, SOCK_MIN_RCVBUF, INT_MAX));
	}
	release_sock(sk);
}

int uiw_sock_create(struct uiw_dev *udev, int family, struct socket **s)
{
	/*
	 * A user socket (kern = 0) in the netdev's namespace: unlike a kernel socket it holds
	 * a reference on the namespace (sk_net_refcnt), so it may be handed to user space.
	 */
	int proto = uiw_llp_protocol(udev);	/* TCP, or SCTP (uiw_sctp.c) */
	int rv = __sock_create(dev_net(udev->netdev), family, SOCK_STREAM,
			       proto, s, 0);

	if (rv)
		return rv;
	sock_set_reuseaddr((*s)->sk);
	if (proto != IPPROTO_SCTP) {
		uiw_sock_fix_bufs((*s)->sk, 0, READ_ONCE(tcp_rcvbuf));
		return 0;
	}
	rv = uiw_sctp_sock_setup(*s);
	if (rv) {
		sock_release(*s);
		*s = NULL;
	}
	return rv;
}

int uiw_addr_len(const struct sockaddr_storage *a)
{
	return a->ss_family == AF_INET ? sizeof(struct sockaddr_in) :
					 sizeof(struct sockaddr_in6);
}

bool uiw_addr_is_any(const struct sockaddr_storage *a)
{
	if (a->ss_family == AF_INET)
		return ((const struct sockaddr_in *)a)->sin_addr.s_addr ==
		       htonl(INADDR_ANY);
	return ipv6_addr_any(&((const struct sockaddr_in6 *)a)->sin6_addr);
}

/* Upcalls */

void uiw_cep_addrs(struct uiw_cep *cep, struct iw_cm_event *ev)
{
	if (!cep->sock)
		return;
	kernel_getsockname(cep->sock, (struct sockaddr *)&ev->local_addr);
	kernel_getpeername(cep->sock, (struct sockaddr *)&ev->remote_addr);
}

/* Event to the connection's own cm_id (not CONNECT_REQUEST). */
void uiw_cm_upcall(struct uiw_cep *cep, enum iw_cm_event_type type,
		   int status, const void *pd, u8 pd_len)
{
	struct iw_cm_event ev = {
		.event = type,
		.status = status,
		.private_data = (void *)pd,
		.private_data_len = pd_len,
	};
	struct iw_cm_id *id = cep->cm_id;

	if (!id) {
		/* Connect-on-RTR connections have no cm_id: their outcome goes to the QP. */
		if (cep->rtr)
			uiw_rtr_cep_event(cep, type, status, pd, pd_len);
		return;
	}
	if (type == IW_CM_EVENT_CONNECT_REPLY || type == IW_CM_EVENT_ESTABLISHED) {
		ev.local_addr = id->m_local_addr;
		ev.remote_addr = id->m_remote_addr;
		uiw_cep_addrs(cep, &ev);
		/* What this side will use (iw_cm convention). */
		ev.ird = min_t(u32, cep->params.ird, U8_MAX);
		ev.ord = min_t(u32, cep->params.ord, U8_MAX);
	}
	id->event_handler(id, &ev);
}

/* Drop the cm_id: iw_cm frees it once every reference is gone. */
void uiw_cep_put_cm_id(struct uiw_cep *cep)
{
	struct iw_cm_id *id = cep->cm_id;

	if (id) {
		cep->cm_id = NULL;
		id->rem_ref(id);
	}
}

/* Deliver CLOSE (only after a successful CONNECT_REPLY/ESTABLISHED, only once). */
void uiw_cep_upcall_close(struct uiw_cep *cep)
{
	if (cep->connected && !cep->close_sent) {
		cep->close_sent = true;
		uiw_cm_upcall(cep, IW_CM_EVENT_CLOSE, 0, NULL, 0);
	}
	uiw_cep_put_cm_id(cep);
	if (cep->qp)
		uiw_ucontext_signal(cep->qp->uctx);
}

/* QP association. Caller holds cep->lock. */

int uiw_cep_attach_qp(struct uiw_cep *cep, struct uiw_qp *qp)
{
	int rv = 0;

	spin_lock_bh(&qp->lock);
	/* A connect-on-RTR QP may be in RTS before its connection is up (uiw_rtr.c). */
	if (qp->dying || qp->cep ||
	    (qp->state != IB_QPS_RESET && qp->state != IB_QPS_INIT &&
	     qp->state != IB_QPS_RTR &&
	     !(cep->rtr && qp->state == IB_QPS_RTS)))
		rv = -EBUSY;
	else
		qp->cep = cep;
	spin_unlock_bh(&qp->lock);
	if (rv)
		return rv;
	uiw_cep_get(cep);	/* qp->cep */
	cep->qp = qp;		/* takes over the caller's QP reference */
	return 0;
}

void uiw_cep_detach_qp(struct uiw_cep *cep)
{
	struct uiw_qp *qp = cep->qp;
	bool linked = false;

	if (!qp)
		return;
	cep->qp = NULL;
	spin_lock_bh(&qp->lock);
	if (qp->cep == cep) {
		qp->cep = NULL;
		linked = true;
	}
	spin_unlock_bh(&qp->lock);
	if (linked)
		uiw_cep_put(cep);
	uiw_qp_put(qp);
}

/* Tear everything down (no upcall). Caller holds cep->lock and a cep reference. */
void uiw_cep_finish(struct uiw_cep *cep, bool abort)
{
	uiw_cep_cancel_timer(cep);
	cep->state = UIW_CEP_CLOSED;
	uiw_cep_release_sock(cep, abort);
	uiw_cep_put_cm_id(cep);
	uiw_cep_detach_qp(cep);
}

/* Active side failed before CONNECT_REPLY(0): report once; iw_cm drops its QP ref. */
void uiw_cep_active_fail(struct uiw_cep *cep, int status)
{
	uiw_dbg(cep->udev, "connect failed: %d\n", status);
	uiw_cm_upcall(cep, IW_CM_EVENT_CONNECT_REPLY, status, NULL, 0);
	uiw_cep_finish(cep, true);
}

void uiw_conn_addr(const struct sockaddr_storage *ss, u8 *addr, u16 *port)
{
	if (ss->ss_family == AF_INET) {
		const struct sockaddr_in *sin = (const struct sockaddr_in *)ss;

		ipv6_addr_set_v4mapped(sin->sin_addr.s_addr, (struct in6_addr *)addr);
		*port = ntohs(sin->sin_port);
	} else {
		const struct sockaddr_in6 *sin6 = (const struct sockaddr_in6 *)ss;

		memcpy(addr, &sin6->sin6_addr, 16);
		*port = ntohs(sin6->sin6_port);
	}
}

/*
 * MPA is done: the stream is at the first FPDU and belongs to the QP's owner. Restore
 * the original data_ready (user space polls the socket); keep the chained state_change
 * so a FIN or RST still reaches iw_cm.
 */
void uiw_cep_enter_rdma_mode(struct uiw_cep *cep)
{
	struct uiw_cep_params *p = &cep->params;
	struct uiw_conn_info *info = &cep->info;
	struct sockaddr_storage local = {}, remote = {};
	struct uiw_qp *qp = cep->qp;

	uiw_cep_cancel_timer(cep);
	uiw_stats_conn_established(cep->udev);
	/* Until its Accept is acknowledged, an SCTP socket stays ours (uiw_cep_accept_ack). */
	if (!cep->accept_unacked)
		uiw_sk_restore_data_ready(cep);

	kernel_getsockname(cep->sock, (struct sockaddr *)&local);
	kernel_getpeername(cep->sock, (struct sockaddr *)&remote);
	memset(info, 0, sizeof(*info));
	info->flags = (p->crc ? UIW_CONN_F_CRC : 0) |
		      (p->enhanced ? UIW_CONN_F_ENHANCED : 0) |
		      (p->p2p ? UIW_CONN_F_P2P : 0) |
		      (cep->active ? UIW_CONN_F_INITIATOR : 0) |
		      (p->markers_tx ? UIW_CONN_F_MARKERS_TX : 0) |
		      (p->markers_rx ? UIW_CONN_F_MARKERS_RX : 0);
	if (uiw_cep_sctp(cep))
		info->flags |= UIW_CONN_F_SCTP;
	else if (p->rdmap_ext)
		info->flags |= UIW_CONN_F_RDMAP_EXT;
	if (local.ss_family == AF_INET6 &&
	    !ipv6_addr_v4mapped(&((struct sockaddr_in6 *)&local)->sin6_addr))
		info->flags |= UIW_CONN_F_IPV6;
	info->qpn = qp->ibqp.qp_num;
	info->ird = p->ird;
	info->ord = p->ord;
	info->mpa_rev = p->rev;
	info->rtr = p->rtr;
	uiw_conn_addr(&local, info->local_addr, &info->local_port);
	uiw_conn_addr(&remote, info->remote_addr, &info->remote_port);

	spin_lock_bh(&qp->lock);
	/*
	 * A modify to ERR that came during connection setup stands: its close of the connection
	 * follows (uiw_cm_qp_close waits for cep->lock). RESET is not such a modify: iw_connect
	 * and iw_accept take a QP in RESET (uiw_cep_attach_qp).
	 */
	if (qp->state != IB_QPS_ERR) {
		qp->state = IB_QPS_RTS;
		qp->ird = p->ird;
		qp->ord = p->ord;
		qp->conn_known = true;
		qp->conn_flags = info->flags;
		qp->mpa_rev = p->rev;
	}
	spin_unlock_bh(&qp->lock);
	cep->state = UIW_CEP_RDMA_MODE;
}

/*
 * Just before the connected upcall (under cep->lock, so a TAKE_SOCKET waits for the upcall):
 * wake the owner first, so that an application that sees ESTABLISHED finds the readiness
 * eventfd already signalled; and catch a close that came during the MPA exchange (handled
 * by the work queue, after the upcall). An SCTP Accept not yet acknowledged defers the wake
 * to uiw_cep_accept_ack, within UIW_ACCEPT_ACK_TIMEOUT.
 */
void uiw_cep_connected(struct uiw_cep *cep)
{
	cep->connected = true;
	if (cep->accept_unacked) {
		uiw_cep_arm_timer(cep, UIW_ACCEPT_ACK_TIMEOUT);
		return;
	}
	uiw_ucontext_signal(cep->qp->uctx);
	if (uiw_sk_peer_gone(cep->sock->sk))
		uiw_cep_post(cep, UIW_CEP_EV_STATE);
}

/*
 * SCTP passive side in RDMA mode, on data_ready: once the peer acknowledged our Accept, the
 * socket is its owner's (uiw_sctp_send_accept says why it waits).
 */
static void uiw_cep_accept_ack(struct uiw_cep *cep)
{
	if (cep->state != UIW_CEP_RDMA_MODE || !cep->sock ||
	    !uiw_sctp_accept_acked(cep))
		return;
	cep->accept_unacked = false;
	uiw_cep_cancel_timer(cep);
	uiw_sk_restore_data_ready(cep);
	uiw_cep_connected(cep);
}

/* The peer closed (FIN or RST) an RDMA-mode connection, or our graceful close ended. */
void uiw_cep_conn_closed(struct uiw_cep *cep)
{
	uiw_cep_cancel_timer(cep);
	if (cep->state == UIW_CEP_RDMA_MODE && !cep->disconnect_sent) {
		cep->disconnect_sent = true;
		uiw_cm_upcall(cep, IW_CM_EVENT_DISCONNECT, 0, NULL, 0);
	}
	/*
	 * Finish the TCP close; the owner may still read what arrived before the FIN. A socket
	 * handed to its owner is closed by the owner's provider after its last FPDU: a peer that
	 * stopped mid-FPDU is still owed the Terminate of RFC 5044 §8 (MPA error 1), which our
	 * FIN would cut off. uiw_cep_release_sock closes it at the latest.
	 */
	if (!cep->file)
		kernel_sock_shutdown(cep->sock, SHUT_WR);
	cep->state = UIW_CEP_CLOSED;
	if (cep->qp)
		uiw_qp_set_state(cep->qp, IB_QPS_ERR);
	uiw_cep_upcall_close(cep);
}

/* Abortive local close (QP to ERR, or connection lost). */
void uiw_cep_conn_abort(struct uiw_cep *cep)
{
	uiw_cep_cancel_timer(cep);
	if (cep->sock) {
		sock_no_linger(cep->sock->sk);
		kernel_sock_shutdown(cep->sock, SHUT_RDWR);
	}
	cep->state = UIW_CEP_CLOSED;
	uiw_cep_upcall_close(cep);
}

/* Event dispatch */

/* Process context: the peer closed or reset, or the SCTP association ended. */
static bool uiw_cep_peer_gone(struct uiw_cep *cep)
{
	return uiw_sk_peer_gone(cep->sock->sk) ||
	       (uiw_cep_sctp(cep) && uiw_sctp_assoc_ended(cep->sock));
}

/* SCTP passive side: the peer never acknowledged our Accept. */
static void uiw_cep_accept_ack_timeout(struct uiw_cep *cep)
{
	uiw_dbg(cep->udev, "SCTP Accept not acknowledged\n");
	cep->accept_unacked = false;
	if (cep->qp)
		uiw_qp_set_state(cep->qp, IB_QPS_ERR);
	if (cep->rtr)
		uiw_rtr_cep_event(cep, IW_CM_EVENT_CLOSE, -ETIMEDOUT, NULL, 0);
	/*
	 * The socket is shut down with linger 0 and goes to the owner like any closed one: its
	 * provider finds the stream ended and flushes, and its close sends SCTP's ABORT.
	 */
	uiw_cep_conn_abort(cep);
}

static void uiw_cep_state(struct uiw_cep *cep)
{
	struct sock *sk;

	if (!cep->sock)
		return;
	sk = cep->sock->sk;

	switch (cep->state) {
	case UIW_CEP_CONNECTING:
		switch (READ_ONCE(sk->sk_state)) {
		case TCP_SYN_SENT:
			break;
		case TCP_CLOSE:
			uiw_cep_active_fail(cep, sock_error(sk) ?: -ECONNREFUSED);
			break;
		default:
			uiw_cm_send_request(cep);
			break;
		}
		break;
	case UIW_CEP_AWAIT_MPAREP:
	case UIW_CEP_AWAIT_MPAREQ:
		/* Bytes before a FIN are still the peer's frame; reading also sees the EOF. */
		uiw_cm_read(cep);
		break;
	case UIW_CEP_RECVD_MPAREQ:
		if (uiw_cep_peer_gone(cep))
			uiw_cm_pending_drop(cep);
		break;
	case UIW_CEP_RDMA_MODE:
	case UIW_CEP_CLOSING:
		/* Our waiting FIN goes first; uiw_cep_close_write looks again then. */
		if (!cep->fin_wait && uiw_cep_peer_gone(cep))
			uiw_cep_conn_closed(cep);
		break;
	default:
		break;
	}
}

static void uiw_cep_work(struct work_struct *work)
{
	struct uiw_cep *cep = container_of(work, struct uiw_cep, work);
	bool more = false;
	unsigned long ev;

	mutex_lock(&cep->lock);
	while (!more && (ev = xchg(&cep->events, 0))) {
		if (ev & BIT(UIW_CEP_EV_ACCEPT))
			more = uiw_cm_listen_accept(cep);
		if ((ev & BIT(UIW_CEP_EV_READ)) && cep->accept_unacked)
			uiw_cep_accept_ack(cep);
		else if (ev & BIT(UIW_CEP_EV_READ))
			uiw_cm_read(cep);
		if (ev & BIT(UIW_CEP_EV_STATE))
			uiw_cep_state(cep);
	}
	mutex_unlock(&cep->lock);
	/* Its next turn comes after the work queued meanwhile (uiw_cm_listen_accept). */
	if (more)
		uiw_cep_post(cep, UIW_CEP_EV_ACCEPT);
	uiw_cep_put(cep);
}

static void uiw_cep_timeout(struct work_struct *work)
{
	struct uiw_cep *cep =
		container_of(to_delayed_work(work), struct uiw_cep, timer);

	mutex_lock(&cep->lock);
	/* A run for an older arming finds another state or an unexpired deadline. */
	if (cep->timer_state == cep->state && cep->state != UIW_CEP_IDLE &&
	    time_after_eq(jiffies, cep->timer_expires)) {
		cep->timer_state = UIW_CEP_IDLE;
		uiw_dbg(cep->udev, "timeout in state %d\n", cep->state);
		switch (cep->state) {
		case UIW_CEP_CONNECTING:
		case UIW_CEP_AWAIT_MPAREP:
			uiw_cep_active_fail(cep, -ETIMEDOUT);
			break;
		case UIW_CEP_AWAIT_MPAREQ:
			uiw_cm_child_drop(cep);
			break;
		case UIW_CEP_RECVD_MPAREQ:
			uiw_cm_pending_drop(cep);
			break;
		case UIW_CEP_CLOSING:
			if (cep->fin_wait && cep->sock)
				uiw_cep_close_write(cep);
			else
				uiw_cep_conn_abort(cep);
			break;
		case UIW_CEP_RDMA_MODE:
			if (cep->accept_unacked)
				uiw_cep_accept_ack_timeout(cep);
			break;
		default:
			break;
		}
	}
	mutex_unlock(&cep->lock);
	uiw_cep_put(cep);
}

/*
 * Device teardown (dealloc_driver). iw_cm ids and QPs of the device are gone by now;
 * what can remain are endpoints whose CONNECT_REQUEST nobody answered and endpoints
 * with a pending timer or work. Close the former, stop every timer, drain the work.
 */
void uiw_cm_dev_cleanup(struct uiw_dev *udev)
{
	struct uiw_cep *cep;

	for (;;) {
		bool found = false;

		spin_lock_bh(&udev->cep_lock);
		list_for_each_entry(cep, &udev->cep_list, dev_entry) {
			if (!cep->reaped && kref_get_unless_zero(&cep->ref)) {
				cep->reaped = true;
				found = true;
				break;
			}
		}
		spin_unlock_bh(&udev->cep_lock);
		if (!found)
			break;
		mutex_lock(&cep->lock);
		uiw_cep_cancel_timer(cep);
		if (cep->state == UIW_CEP_RECVD_MPAREQ)
			uiw_cm_pending_drop(cep);
		else if (cep->sock && !cep->qp && !cep->cm_id)
			uiw_cep_finish(cep, true);
		mutex_unlock(&cep->lock);
		uiw_cep_put(cep);
	}
	flush_workqueue(uiw_cm_wq);
}

int uiw_cm_init(void)
{
	uiw_bind_cred = prepare_kernel_cred(&init_task);
	if (!uiw_bind_cred)
		return -ENOMEM;
	cap_clear(uiw_bind_cred->cap_inheritable);
	cap_clear(uiw_bind_cred->cap_permitted);
	cap_clear(uiw_bind_cred->cap_effective);
	cap_clear(uiw_bind_cred->cap_bset);
	cap_clear(uiw_bind_cred->cap_ambient);
	cap_raise(uiw_bind_cred->cap_permitted, CAP_NET_BIND_SERVICE);
	cap_raise(uiw_bind_cred->cap_effective, CAP_NET_BIND_SERVICE);
	uiw_cm_wq = alloc_ordered_workqueue("uiw_cm", WQ_MEM_RECLAIM);
	if (!uiw_cm_wq) {
		put_cred(uiw_bind_cred);
		return -ENOMEM;
	}
	return 0;
}

void uiw_cm_exit(void)
{
	uiw_fin_waits_flush();
	destroy_workqueue(uiw_cm_wq);
	put_cred(uiw_bind_cred);
	WARN_ON(atomic_read(&uiw_cep_count));
}
