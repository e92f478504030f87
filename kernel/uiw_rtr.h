/* SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause */
/*
 * Connect-on-RTR: ibv_modify_qp to RTR with a destination
 * QPN and the peer's GID (an IP address of a uiw device) makes uiw.ko connect the QP itself,
 * the way applications that exchange QPN/GID out of band (ibv_rc_pingpong, perftest without
 * -R, pyverbs RC tests) expect of an RNIC.
 *
 * Roles: of the two (GID, QPN) pairs the lower one (memcmp of the 16 GID bytes, then the
 * QPN) initiates, so two QPs moving to RTR at the same time meet exactly once. The
 * initiator connects from its GID's address to the peer's address at port `rtr_port` and
 * runs an ordinary MPA Request/Reply exchange (RFC 5044 §7.1, RFC 6581 enhanced, P2P) whose
 * private data (below) names both QPs; the responder matches it to its QP in RTR/RTS by QPN
 * and addresses, or refuses it with an MPA Reject that says why. A responder that is not in
 * RTR yet refuses with "not ready"; the initiator retries (backoff) until `rtr_timeout`.
 * The connected socket goes to the QP's owner through UIW_METHOD_QP_TAKE_SOCKET.
 *
 * Private data v1 (after the RFC 6581 IRD/ORD word; all fields network byte order):
 *   0  4  magic "UIWR" (0x55 0x49 0x57 0x52)
 *   4  1  version (1)
 *   5  1  type: 1 Request, 2 Accept (Reply), 3 Reject (Reply with R set)
 *   6  2  reason (Reject only, enum uiw_rtr_reason; 0 otherwise)
 *   8  4  sender's QPN
 *  12  4  receiver's QPN (the sender's dest_qp_num)
 *  16 16  sender's GID (its address: IPv6 or IPv4-mapped)
 *  32 16  receiver's GID
 * A frame with another magic, or shorter than 48 bytes, is refused with reason BAD_PD; with
 * a higher version, with reason VERSION (the Reject carries the version we speak).
 */
#ifndef UIW_RTR_H
#define UIW_RTR_H

#include <linux/mutex.h>
#include <linux/types.h>
#include <linux/workqueue.h>
#include <rdma/ib_verbs.h>
#include <rdma/iw_cm.h>

#include "uiw-setup.h"

/* Decoded private data. */
struct uiw_rtr_pd {
	u8 version;
	u8 type;
	u16 reason;
	u32 src_qpn;
	u32 dst_qpn;
	union ib_gid src;
	union ib_gid dst;
};

struct uiw_rtr_listener;

enum uiw_rtr_role {
	UIW_RTR_ROLE_NONE = 0,	/* not a connect-on-RTR QP */
	UIW_RTR_ROLE_INITIATOR,
	UIW_RTR_ROLE_RESPONDER,
};

/*
 * Per QP (struct uiw_qp.rtr), under qp->lock. Also what the application set in
 * modify_qp, echoed by query_qp.
 */
struct uiw_rtr_qp {
	u8 role;		/* enum uiw_rtr_role */
	struct uiw_rtr_listener *listener;	/* responder: a reference on it */
	int err;		/* the connection failed for good (negative errno) */
	u32 dest_qpn;
	union ib_gid sgid;	/* our address */
	union ib_gid dgid;	/* the peer's */
	u8 sgid_index;
	unsigned long deadline;	/* jiffies: the initiator stops retrying */
	unsigned int backoff_ms;
	struct delayed_work retry;	/* holds a QP reference while queued */

	/* Echo of modify_qp attributes (query_qp). */
	u8 timeout;
	u8 retry_cnt;
	u8 rnr_retry;
	u8 min_rnr_timer;
	u32 sq_psn;
	u32 rq_psn;
	u32 app_ird;		/* max_dest_rd_atomic as set */
	u32 app_ord;		/* max_rd_atomic as set */
	enum ib_mtu path_mtu;
};

/* What an RTR modify asks for, validated before the state changes (uiw_rtr_prepare). */
struct uiw_rtr_target {
	u8 role;
	struct uiw_rtr_listener *listener;
	u8 sgid_index;
	u32 dest_qpn;
	union ib_gid sgid;
	union ib_gid dgid;
};

/*
 * A listener on one of the device's addresses at rtr_port, open while QPs wait on that
 * address as responders. Bound to the address, not to the netdev: the reply to a peer on
 * another local netdev must be routed like any local traffic.
 */
struct uiw_rtr_listener {
	struct list_head entry;	/* uiw_rtr_dev.listeners */
	union ib_gid gid;
	unsigned int users;
	struct iw_cm_id id;	/* the listener's id (never seen by iw_cm) */
};

/* Per device (struct uiw_dev.rtr). */
struct uiw_rtr_dev {
	struct mutex lock;	/* the listener list and their user counts */
	struct list_head listeners;
};

struct uiw_dev;
struct uiw_qp;
struct uiw_cep;
struct socket;

void uiw_rtr_dev_init(struct uiw_dev *udev);
void uiw_rtr_qp_init(struct uiw_qp *qp);

/* uiw_verbs.c modify_qp / query_qp / destroy_qp. */
bool uiw_rtr_wanted(const struct ib_qp_attr *attr, int mask);
bool uiw_rtr_service_id(const struct iw_cm_id *id);
int uiw_rtr_prepare(struct uiw_qp *qp, const struct ib_qp_attr *attr,
		    struct uiw_rtr_target *t);
int uiw_rtr_claim(struct uiw_qp *qp, const struct uiw_rtr_target *t);
void uiw_rtr_commit(struct uiw_qp *qp, const struct uiw_rtr_target *t);
void uiw_rtr_abandon(struct uiw_qp *qp, const struct uiw_rtr_target *t);
int uiw_rtr_start(struct uiw_qp *qp, enum ib_qp_state prev);
void uiw_rtr_echo(struct uiw_qp *qp, const struct ib_qp_attr *attr, int mask);
void uiw_rtr_query(struct uiw_qp *qp, struct ib_qp_attr *attr);
void uiw_rtr_reset(struct uiw_qp *qp);
void uiw_rtr_destroy(struct uiw_qp *qp, bool abort);
int uiw_rtr_error(struct uiw_qp *qp);

/* uiw_cm*.c hooks, called with cep->lock held. */
bool uiw_rtr_admit(struct uiw_cep *lcep, struct socket *s);
bool uiw_rtr_request(struct uiw_cep *cep, const u8 *pd, u16 pd_len);
int uiw_rtr_reply(struct uiw_cep *cep, const u8 *pd, u16 pd_len);
void uiw_rtr_cep_event(struct uiw_cep *cep, enum iw_cm_event_type type,
		       int status, const void *pd, u8 pd_len);

#endif /* UIW_RTR_H */
