/* SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause */
/*
 * uiw.ko internals: device, shadow verbs objects and their limits.
 *
 * uiw.ko never moves payload. It registers the RDMA device, keeps shadow copies of the
 * verbs objects the RDMA core needs (ucontext, PD, CQ, QP, SRQ, MR keys), runs iWARP
 * connection setup for iw_cm and hands each connected socket to the process that owns
 * the QP. The protocol engines run in the provider (user space).
 */
#ifndef UIW_H
#define UIW_H

#include <linux/completion.h>
#include <linux/list.h>
#include <linux/netdevice.h>
#include <linux/refcount.h>
#include <linux/spinlock.h>
#include <linux/workqueue.h>
#include <linux/xarray.h>
#include <rdma/ib_verbs.h>
#include <rdma/uverbs_ioctl.h>

#include "uiw-abi.h"
#include "uiw_kcompat.h"
#include "uiw_rtr.h"

/*
 * Device limits. They are what ibv_query_device reports and what the provider's engine
 * must honour; the provider learns them from struct uiw_uresp_alloc_ucontext.
 */
#define UIW_VENDOR_ID 0x756977		/* "uiw" */
#define UIW_MAX_QP BIT(16)
#define UIW_MAX_QP_WR BIT(14)
#define UIW_MAX_SGE 16
/*
 * One sink STag per RDMA Read Request (RFC 5040 §4.4), but the engine's sink STag names the
 * Read's whole local scatter list, so a Read may land in as many SGEs as a Send.
 */
#define UIW_MAX_SGE_RD UIW_MAX_SGE
#define UIW_MAX_INLINE 256
#define UIW_MAX_IRD 128
#define UIW_MAX_ORD 128
#define UIW_MAX_CQ BIT(16)
#define UIW_MAX_CQE BIT(20)
#define UIW_MAX_PD BIT(16)
#define UIW_MAX_MR BIT(20)
#define UIW_MAX_SRQ BIT(14)
#define UIW_MAX_SRQ_WR BIT(14)
#define UIW_MAX_UCTX 4096
/* iw_cm carries private data lengths in a u8 (struct iw_cm_event, iw_cm_conn_param). */
#define UIW_MAX_PRIVATE_DATA 255

/* QPNs are 24 bits on the verbs interface; 0 and 1 are special in IB, never hand them out. */
#define UIW_QPN_MIN 2
#define UIW_QPN_MAX 0xffffff
/* STag = index << 8 | key (RFC 5040 §2.1: an STag is opaque to the peer). */
#define UIW_STAG_IDX_MAX 0xffffff

struct uiw_cep;

struct uiw_dev {
	struct ib_device ibdev;		/* first: ib_alloc_device() */
	struct net_device *netdev;	/* own reference, dropped in dealloc_driver */
	struct list_head list;		/* uiw_devs, under uiw_devs_lock */
	bool unreg_queued;		/* under uiw_devs_lock */
	bool netdev_gone;		/* NETDEV_UNREGISTER seen; under uiw_devs_lock */
	struct work_struct unreg_work;	/* unregister after NETDEV_UNREGISTER */
	struct work_struct gid_work;	/* rebuild the GID table, then tell the core */

	spinlock_t gid_lock;		/* guards gid[] */
	union ib_gid gid[UIW_GID_TBL_LEN];

	struct xarray qp_xa;		/* QPN -> struct uiw_qp (RCU lookups by iw_get_qp) */
	u32 qp_next;
	struct xarray mr_xa;		/* STag index -> struct uiw_mr */
	struct xarray cq_xa;		/* cq id -> struct uiw_cq */
	u32 cq_next;
	struct xarray srq_xa;		/* srq id -> struct uiw_srq */
	u32 srq_next;

	u32 vendor_part_id;

	/*
	 * Parent device /sys/devices/uiw/rnicN with net/<ifname> linking the netdev (uiw_main.c);
	 * net_link is the link's current name, changed by rename_work.
	 */
	struct device *parent;
	struct kobject *net_kobj;
	char net_link[IFNAMSIZ];
	struct work_struct rename_work;

	atomic_t num_uctx;
	atomic_t num_pd;
	atomic_t num_cq;
	atomic_t num_qp;
	atomic_t num_srq;
	atomic_t num_mr;

	/* Connection endpoints of this device (uiw_cm.c). */
	spinlock_t cep_lock;
	struct list_head cep_list;
	bool llp_sctp;			/* new connections over SCTP (uiw_sctp.c) */
	struct xarray cep_xa;		/* ids of endpoints awaiting iw_accept/iw_reject */
	u32 cep_next;

	struct uiw_rtr_dev rtr;		/* connect-on-RTR listener (uiw_rtr.c) */

	/* rdma statistic (uiw_stats.c). */
	spinlock_t stats_lock;
	struct list_head stats_list;	/* contexts with a counters page, under stats_lock */
	u64 stats_retired[UIW_CNT_NUM];	/* closed contexts' counts, under stats_lock */
	atomic64_t conn_established;
	atomic64_t conn_refused;
};

struct uiw_ucontext {
	struct ib_ucontext ibuc;	/* first */
	struct pid *owner;		/* thread group that opened the context */
	spinlock_t lock;
	struct eventfd_ctx *ready_efd;	/* readiness eventfd, under lock */
	bool rdmap_ext;			/* the provider implements RFC 7306 */
	struct uiw_counters_page *counters;	/* uiw_stats.c */
	struct list_head stats_entry;	/* udev->stats_list */
};

struct uiw_pd {
	struct ib_pd ibpd;
};

/* struct uiw_cq.flags: each bit allows the one event that clears it (uiw_uapi.c). */
enum uiw_cq_flag {
	UIW_CQ_ARMED,		/* req_notify_cq seen: one completion event may fire */
	UIW_CQ_ERR_SENT,	/* IB_EVENT_CQ_ERR raised (once per CQ) */
};

struct uiw_cq {
	struct ib_cq ibcq;
	u32 id;
	unsigned long flags;	/* enum uiw_cq_flag bits */
};

struct uiw_srq {
	struct ib_srq ibsrq;
	u32 id;
	u32 num_rqe;
	u32 limit;		/* armed limit, 0 = disarmed; under srq_lock */
	bool err_sent;		/* IB_EVENT_SRQ_ERR raised (once per SRQ); under srq_lock */
	spinlock_t srq_lock;
};

struct uiw_mr {
	struct ib_mr ibmr;
	u32 stag;
	u64 start;		/* the user range and rights, for rereg_user_mr's checks */
	u64 len;
	int access;
};

/* A memory window: an STag of its own, bound and checked by the provider's registry. */
struct uiw_mw {
	struct ib_mw ibmw;
	u32 stag;
};

struct uiw_qp {
	struct ib_qp ibqp;		/* first */
	struct uiw_ucontext *uctx;
	struct pid *owner;		/* thread group that created the QP */
	refcount_t ref;			/* creator + iw_cm (iw_add_ref) + connection code */
	struct completion released;	/* ref reached zero */

	spinlock_t lock;		/* protects the fields below */
	enum ib_qp_state state;		/* shadow of the provider's QP state */
	/*
	 * Async events the provider may raise next: each is allowed once per state change the
	 * kernel saw (uiw_uapi.c), so the events a context can queue are bounded.
	 */
	bool fatal_sent;		/* a QP error event since RESET */
	bool sq_drained_due;		/* entered SQD */
	bool last_wqe_due;		/* entered ERR with an SRQ */
	bool dying;			/* destroy_qp started: no new connection */
	u32 num_sqe;
	u32 num_rqe;
	u32 max_send_sge;	/* as created: the provider refuses WRs with more */
	u32 max_recv_sge;
	u32 ird;			/* max_dest_rd_atomic */
	u32 ord;			/* max_rd_atomic */
	int access_flags;
	/* What the connection negotiated, for rdma res (uiw_fill_res_qp_entry). */
	bool conn_known;		/* set from RDMA mode until RESET */
	u32 conn_flags;			/* UIW_CONN_F_* handed to the provider */
	u8 mpa_rev;
	struct uiw_cep *cep;		/* connection; holds a cep reference */
	struct uiw_rtr_qp rtr;		/* connect-on-RTR state (uiw_rtr.c) */
};

static inline struct uiw_dev *to_udev(struct ib_device *ibdev)
{
	return container_of(ibdev, struct uiw_dev, ibdev);
}

static inline struct uiw_ucontext *to_uctx(struct ib_ucontext *ibuc)
{
	return container_of(ibuc, struct uiw_ucontext, ibuc);
}

static inline struct uiw_qp *to_uqp(struct ib_qp *ibqp)
{
	return container_of(ibqp, struct uiw_qp, ibqp);
}

static inline struct uiw_cq *to_ucq(struct ib_cq *ibcq)
{
	return container_of(ibcq, struct uiw_cq, ibcq);
}

static inline struct uiw_srq *to_usrq(struct ib_srq *ibsrq)
{
	return container_of(ibsrq, struct uiw_srq, ibsrq);
}

static inline struct uiw_mr *to_umr(struct ib_mr *ibmr)
{
	return container_of(ibmr, struct uiw_mr, ibmr);
}

static inline struct uiw_dev *uiw_qp_dev(struct uiw_qp *qp)
{
	return to_udev(qp->ibqp.device);
}

#define uiw_dbg(udev, fmt, ...)                                                \
	ibdev_dbg(&(udev)->ibdev, "%s: " fmt, __func__, ##__VA_ARGS__)
#define uiw_dbg_qp(qp, fmt, ...)					\
	do {								\
		struct uiw_qp *uiw_dbg_qp_ = (qp);			\
									\
		ibdev_dbg(uiw_dbg_qp_->ibqp.device, "QP[%u] %s: " fmt,	\
			  uiw_dbg_qp_->ibqp.qp_num, __func__, ##__VA_ARGS__); \
	} while (0)

/* uiw_main.c */
extern struct workqueue_struct *uiw_wq;
void uiw_gid_update(struct uiw_dev *udev);

/* uiw_verbs.c */
extern const struct ib_device_ops uiw_device_ops;
void uiw_qp_get(struct uiw_qp *qp);
void uiw_qp_put(struct uiw_qp *qp);
struct uiw_qp *uiw_qp_lookup(struct uiw_dev *udev, u32 qpn);
void uiw_qp_enter_state(struct uiw_qp *qp, enum ib_qp_state state);
void uiw_qp_set_state(struct uiw_qp *qp, enum ib_qp_state state);
bool uiw_qp_owned_by_current(struct uiw_qp *qp);
void uiw_ucontext_signal(struct uiw_ucontext *uctx);

/* uiw_stats.c */
void uiw_stats_dev_init(struct uiw_dev *udev);
void uiw_stats_conn_established(struct uiw_dev *udev);
void uiw_stats_conn_refused(struct uiw_dev *udev);
int uiw_stats_uctx_init(struct uiw_ucontext *uctx, u64 *key);
void uiw_stats_uctx_fini(struct uiw_ucontext *uctx);
int uiw_mmap(struct ib_ucontext *ibuc, struct vm_area_struct *vma);
void uiw_mmap_free(struct rdma_user_mmap_entry *e);
struct rdma_hw_stats *uiw_alloc_hw_port_stats(struct ib_device *ibdev, u32 port);
int uiw_get_hw_stats(struct ib_device *ibdev, struct rdma_hw_stats *stats, u32 port,
		     int index);

/* uiw_uapi.c */
extern const struct uapi_definition uiw_uapi_defs[];

#endif /* UIW_H */
