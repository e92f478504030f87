/* SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause */
/*
 * uiw connection manager: the iw_cm provider side of uiw.ko.
 *
 * A connection endpoint (cep) owns one TCP socket from creation until the MPA exchange is
 * done (RFC 5044 §7.1.2, RFC 6581), then belongs to its QP: the socket is handed to the
 * QP's owner (uiw_cm_take_socket). From then on the socket carries none of our callbacks
 * and no sk_user_data (its owner may listen on it, and accepted children would inherit
 * both): the kernel watches it through an entry on the socket's own wait queue, which
 * children do not inherit, so a FIN or RST still reaches iw_cm as DISCONNECT/CLOSE.
 *
 * Locking: cep->lock (mutex) serialises everything a cep does: iw_cm downcalls, its work
 * and its timer. Socket callbacks run in softirq context and only post events. Lock
 * order: cep->lock, then qp->lock, then udev->cep_lock (spinlock: device cep list,
 * listener children and the listener's cm_id while upcalls read it).
 */
#ifndef UIW_CM_H
#define UIW_CM_H

#include <linux/kref.h>
#include <linux/mutex.h>
#include <rdma/iw_cm.h>

#include "uiw.h"
#include "uiw_mpa.h"

enum uiw_cep_state {
	UIW_CEP_IDLE = 0,
	UIW_CEP_LISTENING,	/* listener */
	UIW_CEP_CONNECTING,	/* active: TCP handshake in progress */
	UIW_CEP_AWAIT_MPAREP,	/* active: MPA Request sent, awaiting the Reply */
	UIW_CEP_AWAIT_MPAREQ,	/* passive: TCP accepted, awaiting the MPA Request */
	UIW_CEP_RECVD_MPAREQ,	/* passive: CONNECT_REQUEST upcalled, awaiting accept/reject */
	UIW_CEP_RDMA_MODE,	/* MPA done: the stream is at the first FPDU */
	UIW_CEP_CLOSING,	/* local graceful close: FIN sent, awaiting the peer's */
	UIW_CEP_CLOSED,
};

/* Events posted by socket callbacks (bit numbers in cep->events). */
enum uiw_cep_event {
	UIW_CEP_EV_ACCEPT,	/* listener has connections to accept */
	UIW_CEP_EV_READ,	/* bytes to read (MPA frames) */
	UIW_CEP_EV_STATE,	/* TCP state changed */
};

/* Which callbacks a socket gets (uiw_sk_assoc). */
enum uiw_sk_mode {
	UIW_SK_LISTEN,		/* data_ready: accept connections */
	UIW_SK_MPA,		/* data_ready and state_change: MPA exchange, RDMA mode */
};

/* What the two sides agreed on (RFC 5044 §7.1.1, RFC 6581). */
struct uiw_cep_params {
	u8 rev;			/* MPA revision in use */
	bool crc;
	bool enhanced;
	bool p2p;
	u8 rtr;			/* enum uiw_rtr_type */
	u8 rtr_offer;		/* initiator: UIW_MPA_RTR_* offered in peer-to-peer mode */
	bool markers_tx;	/* the peer's frame had M: insert Markers (RFC 5044 §4.3) */
	bool markers_rx;	/* our frame had M: the peer inserts Markers */
	bool rdmap_ext;		/* RFC 7306: offered by one side, then agreed by both */
	u32 ird;
	u32 ord;
};

/* A graceful close's FIN waits for the peer's ACK of what was written before it (uiw_cm.c). */
struct uiw_fin_ack {
	u32 seq;			/* TCP: the end of what was written before the close */
	unsigned long deadline;		/* jiffies: the FIN goes then in any case */
};

struct uiw_cep {
	struct kref ref;
	struct mutex lock;		/* serialises the endpoint (see above) */
	struct uiw_dev *udev;		/* get_device() held */
	struct list_head dev_entry;	/* udev->cep_list, under udev->cep_lock */
	enum uiw_cep_state state;
	bool active;			/* this side sends the MPA Request */
	bool sctp_ddp_peer;		/* SCTP: peer's Adaptation Indication is DDP */
	bool rtr;			/* connect-on-RTR connection (uiw_rtr.c): no cm_id */
	u32 id;				/* udev->cep_xa id while awaiting accept/reject */

	struct iw_cm_id *cm_id;		/* add_ref() held while set */
	struct uiw_qp *qp;		/* QP reference held while set */
	struct socket *sock;
	struct file *file;		/* created at hand-off; owns sock from then on */
	bool taken;			/* socket handed to user space */
	bool connected;			/* CONNECT_REPLY(0) or ESTABLISHED upcalled */
	bool accept_unacked;		/* SCTP passive: Accept not yet acknowledged */
	bool disconnect_sent;
	bool close_sent;
	bool fin_wait;			/* CLOSING: our FIN waits for fin_ack */
	struct uiw_fin_ack fin_ack;

	/* Listener side. children and num_children are under udev->cep_lock. */
	struct uiw_cep *listener;	/* passive child: parent (reference held) */
	struct list_head children;	/* listener: children awaiting their MPA Request */
	struct list_head child_entry;
	unsigned int backlog;
	unsigned int num_children;

	/* Socket callbacks to chain to / restore (before the hand-off). */
	void (*sk_data_ready)(struct sock *sk);
	void (*sk_state_change)(struct sock *sk);
	/* After the hand-off: our entry on the socket's wait queue while watch_head is set. */
	struct wait_queue_entry watch;
	struct wait_queue_head *watch_head;
	unsigned long watch_gone;	/* bit 0: the peer-gone event was posted */

	unsigned long events;		/* enum uiw_cep_event bits */
	struct work_struct work;
	struct delayed_work timer;
	enum uiw_cep_state timer_state;	/* state the timer guards */
	unsigned long timer_expires;	/* jiffies */
	bool reaped;			/* seen by uiw_cm_dev_cleanup() */

	/* MPA exchange. */
	bool request_looked;		/* passive child: its read for the Request has run */
	struct uiw_mpa_rx rx;		/* frame being received */
	struct uiw_mpa_v2 peer_v2;	/* peer's RFC 6581 word (passive side) */
	u16 req_bits;			/* flags/revision of the Request (passive side) */
	u8 tx_pd[UIW_MAX_PRIVATE_DATA];	/* active: ULP private data to send */
	u8 tx_pd_len;
	struct uiw_cep_params params;
	struct uiw_conn_info info;	/* filled on entering RDMA mode */
};

int uiw_cm_init(void);
void uiw_cm_exit(void);
void uiw_cm_dev_cleanup(struct uiw_dev *udev);

int uiw_iw_connect(struct iw_cm_id *id, struct iw_cm_conn_param *param);
int uiw_iw_accept(struct iw_cm_id *id, struct iw_cm_conn_param *param);
int uiw_iw_reject(struct iw_cm_id *id, const void *pdata, u8 pdata_len);
int uiw_iw_create_listen(struct iw_cm_id *id, int backlog);
int uiw_iw_destroy_listen(struct iw_cm_id *id);

/* Timeouts. Every state that waits for the peer has one, so iw_cm always gets its event. */
/*
 * Active: the transport's handshake. Each lets its first packet be retransmitted three times:
 * TCP's SYN at 1, 3 and 7 s (initial RTO 1 s, RFC 6298 section 2), SCTP's INIT (or COOKIE
 * ECHO) at 3, 9 and 21 s (RTO.Initial 3 s, RFC 9260 section 16; Linux's rto_initial).
 */
#define UIW_CONNECT_TIMEOUT (10 * HZ)
#define UIW_SCTP_CONNECT_TIMEOUT (25 * HZ)
#define UIW_MPAREP_TIMEOUT (10 * HZ)	/* active: MPA Reply after our Request */
#define UIW_MPAREQ_TIMEOUT (5 * HZ)	/* passive: MPA Request after TCP accept */
#define UIW_ACCEPT_TIMEOUT (30 * HZ)	/* passive: iw_accept/iw_reject after CONNECT_REQUEST */
#define UIW_CLOSE_TIMEOUT (10 * HZ)	/* graceful close: the peer's FIN after ours */
#define UIW_FIN_ACK_WAIT (HZ / 2)	/* graceful close: the ACK of our data before our FIN */
#define UIW_FIN_ACK_POLL (HZ / 100 ?: 1) /* how often that wait looks */
#define UIW_ACCEPT_ACK_TIMEOUT (10 * HZ) /* SCTP passive: the peer's SACK of our Accept */
#define UIW_ACCEPT_BATCH 16	/* connections a listener takes per turn on uiw_cm_wq */

/* uiw_cm.c: endpoint core shared by the active and passive sides. */
void uiw_cep_get(struct uiw_cep *cep);
void uiw_cep_put(struct uiw_cep *cep);
struct uiw_cep *uiw_cep_alloc(struct uiw_dev *udev);
void uiw_cep_post(struct uiw_cep *cep, enum uiw_cep_event ev);
void uiw_cep_arm_timer(struct uiw_cep *cep, unsigned long delay);
void uiw_cep_cancel_timer(struct uiw_cep *cep);
void uiw_sk_assoc(struct uiw_cep *cep, struct socket *s, enum uiw_sk_mode mode,
		  void (*orig_data_ready)(struct sock *sk));
void uiw_sk_disassoc(struct uiw_cep *cep);
void uiw_sk_watch(struct uiw_cep *cep);
void uiw_cep_release_sock(struct uiw_cep *cep, bool abort);
void uiw_cep_close_write(struct uiw_cep *cep);
bool uiw_sk_peer_gone(const struct sock *sk);
int uiw_sock_create(struct uiw_dev *udev, int family, struct socket **s);
void uiw_sock_fix_bufs(struct sock *sk, uint sndbuf, uint rcvbuf);
const struct cred *uiw_privileged_begin(void);
void uiw_privileged_end(const struct cred *old);
int uiw_addr_len(const struct sockaddr_storage *a);
bool uiw_addr_is_any(const struct sockaddr_storage *a);
void uiw_conn_addr(const struct sockaddr_storage *ss, u8 *addr, u16 *port);
void uiw_cep_addrs(struct uiw_cep *cep, struct iw_cm_event *ev);
void uiw_cm_upcall(struct uiw_cep *cep, enum iw_cm_event_type type, int status,
		   const void *pd, u8 pd_len);
void uiw_cep_put_cm_id(struct uiw_cep *cep);
void uiw_cep_upcall_close(struct uiw_cep *cep);
int uiw_cep_attach_qp(struct uiw_cep *cep, struct uiw_qp *qp);
void uiw_cep_detach_qp(struct uiw_cep *cep);
void uiw_cep_finish(struct uiw_cep *cep, bool abort);
void uiw_cep_active_fail(struct uiw_cep *cep, int status);
void uiw_cep_enter_rdma_mode(struct uiw_cep *cep);
void uiw_cep_connected(struct uiw_cep *cep);
void uiw_cep_conn_closed(struct uiw_cep *cep);
void uiw_cep_conn_abort(struct uiw_cep *cep);

/* uiw_cm_conn.c: event handlers called with cep->lock held. */
bool uiw_cm_listen_accept(struct uiw_cep *lcep);
void uiw_cm_read(struct uiw_cep *cep);
void uiw_cm_send_request(struct uiw_cep *cep);
void uiw_cm_child_drop(struct uiw_cep *cep);
void uiw_cm_pending_drop(struct uiw_cep *cep);
bool uiw_cep_unlink_child(struct uiw_cep *cep);
bool uiw_mpa_crc_wanted(void);
bool uiw_rdmap_ext_offer(const struct uiw_cep *cep, const struct uiw_qp *qp);
void uiw_cm_send_reject(struct uiw_cep *cep, const void *pd, u8 pd_len);
int uiw_cep_start_connect(struct uiw_cep *cep, struct socket *s,
			  struct sockaddr_storage *raddr);

/* QP side (uiw_verbs.c, uiw_uapi.c). */
void uiw_cm_qp_close(struct uiw_qp *qp, bool abrupt);
void uiw_cm_qp_destroy(struct uiw_qp *qp);
struct file *uiw_cm_take_socket_prepare(struct uiw_qp *qp,
					struct uiw_conn_info *info);
bool uiw_cm_take_socket_commit(struct uiw_qp *qp, struct file *file);

#endif /* UIW_CM_H */
