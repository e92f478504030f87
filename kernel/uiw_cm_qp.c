// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
/*
 * uiw connection manager, QP side: closing a connection when the QP changes state, QP
 * destruction, and handing the connected socket to the QP's owner.
 */

#include <linux/file.h>
#include <linux/net.h>
#include <net/cls_cgroup.h>
#include <net/netprio_cgroup.h>
#include <net/sock.h>

#include "uiw_cm.h"

static struct uiw_cep *uiw_qp_cep(struct uiw_qp *qp)
{
	struct uiw_cep *cep;

	spin_lock_bh(&qp->lock);
	cep = qp->cep;
	if (cep)
		uiw_cep_get(cep);
	spin_unlock_bh(&qp->lock);
	return cep;
}

/*
 * The QP moved to SQD (graceful: rdma_disconnect, RDMAP §6 / RFC 5044 §7.2 close
 * after the queued data) or ERR (abortive). iw_cm calls this through modify_qp with
 * udata == NULL; the provider's own modify_qp lands here too.
 */
void uiw_cm_qp_close(struct uiw_qp *qp, bool abrupt)
{
	struct uiw_cep *cep = uiw_qp_cep(qp);

	if (!cep)
		return;
	mutex_lock(&cep->lock);
	switch (cep->state) {
	case UIW_CEP_CONNECTING:
	case UIW_CEP_AWAIT_MPAREP:
		if (abrupt)
			uiw_cep_active_fail(cep, -ECONNABORTED);
		break;
	case UIW_CEP_RDMA_MODE:
		if (abrupt) {
			uiw_cep_conn_abort(cep);
			break;
		}
		/*
		 * Our FIN follows what the provider already queued, once the peer acknowledged
		 * it (uiw_cep_close_write); CLOSE on the peer's FIN.
		 */
		cep->state = UIW_CEP_CLOSING;
		uiw_cep_close_write(cep);
		break;
	case UIW_CEP_CLOSING:
		if (abrupt)
			uiw_cep_conn_abort(cep);
		break;
	default:
		break;
	}
	mutex_unlock(&cep->lock);
	uiw_cep_put(cep);
}

/*
 * destroy_qp: end the connection. An unfinished connect gets its CONNECT_REPLY, a
 * connected one its CLOSE, so iw_cm drops the QP references destroy_qp waits for.
 *
 * A connected one is closed as close(2) closes a socket (and siw its own): our FIN follows
 * what the provider queued, which send completions told the application is on its way, and
 * TCP retransmits it if segments were lost (RFC 5040 §6: the LLP closes after the
 * outstanding messages). A reset would discard it: applications destroy their QPs right after
 * their last Send (rdma_disconnect, if at all, does not wait). An abortive close is the ERR
 * transition's (uiw_cm_qp_close), which iw_cm makes when the id goes first.
 */
void uiw_cm_qp_destroy(struct uiw_qp *qp)
{
	struct uiw_cep *cep;

	spin_lock_bh(&qp->lock);
	cep = qp->cep;
	qp->cep = NULL;		/* its reference is ours now */
	spin_unlock_bh(&qp->lock);
	if (!cep)
		return;

	mutex_lock(&cep->lock);
	switch (cep->state) {
	case UIW_CEP_CONNECTING:
	case UIW_CEP_AWAIT_MPAREP:
		uiw_cep_active_fail(cep, -ECONNABORTED);
		break;
	case UIW_CEP_RDMA_MODE:
	case UIW_CEP_CLOSING:
		cep->state = UIW_CEP_CLOSED;
		uiw_cep_upcall_close(cep);
		uiw_cep_finish(cep, false);
		break;
	default:
		uiw_cep_finish(cep, true);
		break;
	}
	mutex_unlock(&cep->lock);
	uiw_cep_put(cep);
}

/*
 * The socket becomes its owner's as if the owner had accepted it: the socket's uid (the
 * inode's, which sock_i_uid() and ownership matches read, and sk_uid) and the net_cls /
 * net_prio ids, as fd passing does (__receive_sock). Sockets accepted by a listener or
 * created on a retry were made in a kernel worker, as root.
 *
 * Connect-on-RTR sockets are bound to privileged ports, which is what the peer trusts
 * (uiw_rtr.c). Without SOCK_BINDPORT_LOCK, TCP lets go of the port when the connection
 * ends (tcp_set_state(TCP_CLOSE)), so connect(AF_UNSPEC) followed by connect() or listen()
 * gets an ephemeral port, not the privileged one. SCTP refuses an unprivileged connect
 * from a privileged port by itself.
 */
static void uiw_sock_adopt(struct socket *s)
{
	struct sock *sk = s->sk;

	SOCK_INODE(s)->i_uid = current_fsuid();
	lock_sock(sk);
	sk->sk_uid = current_fsuid();
	if (sk->sk_protocol == IPPROTO_TCP)
		sk->sk_userlocks &= ~SOCK_BINDPORT_LOCK;
	/* Inherited from the RTR service listener: binding past every conflict is not theirs. */
	if (sk->sk_reuse == SK_FORCE_REUSE)
		sk->sk_reuse = SK_CAN_REUSE;
	sock_update_netprioidx(&sk->sk_cgrp_data);
	sock_update_classid(&sk->sk_cgrp_data);
	release_sock(sk);
}

/*
 * The socket's struct file, created on first hand-off in the owner's context (it
 * carries the owner's credentials). Our callbacks come off first, for good: from now on the
 * owner may do with the socket whatever the socket API allows, so only a wait queue entry
 * (uiw_sk_watch) follows it. sock_alloc_file() releases the socket when it fails.
 */
static struct file *uiw_cep_sock_file(struct uiw_cep *cep)
{
	struct socket *s = cep->sock;
	struct file *file;

	if (cep->file)
		return cep->file;
	uiw_sk_disassoc(cep);
	uiw_sock_adopt(s);
	file = sock_alloc_file(s, O_NONBLOCK, NULL);
	if (IS_ERR(file)) {
		cep->sock = NULL;
		if (cep->state == UIW_CEP_RDMA_MODE ||
		    cep->state == UIW_CEP_CLOSING)
			uiw_cep_conn_abort(cep);
		return file;
	}
	cep->file = file;
	uiw_sk_watch(cep);
	return file;
}

/*
 * First half of UIW_METHOD_QP_TAKE_SOCKET: the connection parameters and a file
 * reference for the new fd. Nothing is committed yet.
 */
struct file *uiw_cm_take_socket_prepare(struct uiw_qp *qp,
					struct uiw_conn_info *info)
{
	struct uiw_cep *cep = uiw_qp_cep(qp);
	struct file *file;

	if (!cep)
		return ERR_PTR(-ENOTCONN);
	mutex_lock(&cep->lock);
	if (cep->taken) {
		file = ERR_PTR(-EALREADY);
	} else if (!cep->connected || cep->accept_unacked) {
		file = ERR_PTR(cep->state == UIW_CEP_CLOSED ? -ENOTCONN :
							      -EAGAIN);
	} else if (!cep->sock) {
		file = ERR_PTR(-ENOTCONN);
	} else {
		file = uiw_cep_sock_file(cep);
		if (!IS_ERR(file)) {
			*info = cep->info;
			get_file(file);
		}
	}
	mutex_unlock(&cep->lock);
	uiw_cep_put(cep);
	return file;
}

/* Second half: the socket is handed over exactly once. */
bool uiw_cm_take_socket_commit(struct uiw_qp *qp, struct file *file)
{
	struct uiw_cep *cep = uiw_qp_cep(qp);
	bool ok;

	if (!cep)
		return false;
	mutex_lock(&cep->lock);
	ok = !cep->taken && cep->file == file;
	if (ok)
		cep->taken = true;
	mutex_unlock(&cep->lock);
	uiw_cep_put(cep);
	return ok;
}
