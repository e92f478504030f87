// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
/*
 * uiw verbs: query ops and the shadow verbs objects.
 *
 * The provider runs every data-path verb in user space. The kernel keeps only what the
 * RDMA core and iw_cm need: object identities (QPN, CQ/SRQ ids, STags), the QP's owner
 * and state, and its connection. Objects may only be created from user space (udata
 * present): kernel ULPs get -EOPNOTSUPP, so they can never use a uiw device.
 */

#include <linux/eventfd.h>
#include <linux/mm.h>
#include <linux/overflow.h>
#include <linux/pid.h>
#include <linux/sched.h>
#include <rdma/ib_user_verbs.h>
#include <rdma/restrack.h>
#include <rdma/uverbs_ioctl.h>

#include "uiw.h"
#include "uiw_cm.h"

#define UIW_FW_VER "0.1.0"

/* Copy a driver response, tolerating an older provider's shorter buffer. */
static int uiw_respond(struct ib_udata *udata, void *resp, size_t len)
{
	return ib_copy_to_udata(udata, resp, min(udata->outlen, len));
}

static bool uiw_limit_inc(atomic_t *count, int max)
{
	if (atomic_inc_return(count) > max) {
		atomic_dec(count);
		return false;
	}
	return true;
}

static int uiw_query_device(struct ib_device *ibdev, struct ib_device_attr *attr,
			    struct ib_udata *udata)
{
	memset(attr, 0, sizeof(*attr));
	attr->fw_ver = 0;
	attr->sys_image_guid = ibdev->node_guid;
	attr->max_mr_size = ~0ULL;
	attr->page_size_cap = PAGE_SIZE;
	attr->vendor_id = UIW_VENDOR_ID;
	attr->vendor_part_id = to_udev(ibdev)->vendor_part_id;
	attr->max_qp = UIW_MAX_QP;
	attr->max_qp_wr = UIW_MAX_QP_WR;
	/*
	 * On-demand paging: uiw pins nothing (a registration records keys) and the provider
	 * reaches registered memory through the process's own page tables, faulting pages in as
	 * any access does, so every uiw MR behaves as an ODP MR does, RFC 7306 atomics included.
	 * Explicit and implicit (the whole address space) ODP MRs are offered for RC.
	 */
	attr->kernel_cap_flags = IBK_ALLOW_USER_UNREG | IBK_ON_DEMAND_PAGING;
	/* Windows of type 1 and 2B (a type 2 window is bound to one QP's stream). */
	attr->device_cap_flags = IB_DEVICE_MEM_WINDOW | IB_DEVICE_MEM_WINDOW_TYPE_2B;
	attr->odp_caps.general_caps = IB_ODP_SUPPORT | IB_ODP_SUPPORT_IMPLICIT;
	attr->odp_caps.per_transport_caps.rc_odp_caps =
		IB_ODP_SUPPORT_SEND | IB_ODP_SUPPORT_RECV | IB_ODP_SUPPORT_WRITE |
		IB_ODP_SUPPORT_READ | IB_ODP_SUPPORT_SRQ_RECV | IB_ODP_SUPPORT_ATOMIC;
	attr->max_send_sge = UIW_MAX_SGE;
	attr->max_recv_sge = UIW_MAX_SGE;
	attr->max_sge_rd = UIW_MAX_SGE_RD;
	attr->max_cq = UIW_MAX_CQ;
	attr->max_cqe = UIW_MAX_CQE;
	attr->max_mr = UIW_MAX_MR;
	attr->max_pd = UIW_MAX_PD;
	attr->max_qp_rd_atom = UIW_MAX_IRD;
	attr->max_qp_init_rd_atom = UIW_MAX_ORD;
	attr->max_res_rd_atom = UIW_MAX_QP * UIW_MAX_IRD;
	/*
	 * RFC 7306 atomics, where both peers agreed to them (uiw-setup.h UIW_MPA_RDMAP_EXT_*): the
	 * providers update the target with one atomic instruction, atomic among all QPs.
	 */
	attr->atomic_cap = IB_ATOMIC_HCA;
	attr->max_srq = UIW_MAX_SRQ;
	attr->max_srq_wr = UIW_MAX_SRQ_WR;
	attr->max_srq_sge = UIW_MAX_SGE;
	attr->max_pkeys = 1;
	return 0;
}

static int uiw_query_port(struct ib_device *ibdev, u32 port,
			  struct ib_port_attr *attr)
{
	struct net_device *netdev = to_udev(ibdev)->netdev;
	bool up = netif_running(netdev) && netif_oper_up(netdev);

	memset(attr, 0, sizeof(*attr));
	/* Fails while the netdev unregisters; the cache may still ask then. */
	if (ib_get_eth_speed(ibdev, port, &attr->active_speed,
			     &attr->active_width)) {
		attr->active_speed = IB_SPEED_SDR;
		attr->active_width = IB_WIDTH_1X;
	}
	attr->state = up ? IB_PORT_ACTIVE : IB_PORT_DOWN;
	attr->phys_state = up ? IB_PORT_PHYS_STATE_LINK_UP :
				IB_PORT_PHYS_STATE_DISABLED;
	attr->max_mtu = ib_mtu_int_to_enum(netdev->mtu);
	attr->active_mtu = attr->max_mtu;
	attr->phys_mtu = netdev->mtu;
	attr->gid_tbl_len = UIW_GID_TBL_LEN;
	attr->pkey_tbl_len = 1;
	attr->port_cap_flags = IB_PORT_CM_SUP | IB_PORT_DEVICE_MGMT_SUP;
	attr->max_msg_sz = U32_MAX;
	return 0;
}

static int uiw_get_port_immutable(struct ib_device *ibdev, u32 port,
				  struct ib_port_immutable *immutable)
{
	immutable->gid_tbl_len = UIW_GID_TBL_LEN;
	/* cma_bind_loopback() reads pkey index 0 (ib_get_cached_pkey), iWARP too. */
	immutable->pkey_tbl_len = 1;
	immutable->core_cap_flags = RDMA_CORE_PORT_IWARP;
	return 0;
}

static int uiw_query_gid(struct ib_device *ibdev, u32 port, int index,
			 union ib_gid *gid)
{
	struct uiw_dev *udev = to_udev(ibdev);

	if (index < 0 || index >= UIW_GID_TBL_LEN)
		return -EINVAL;
	spin_lock_bh(&udev->gid_lock);
	*gid = udev->gid[index];
	spin_unlock_bh(&udev->gid_lock);
	return 0;
}

static int uiw_query_pkey(struct ib_device *ibdev, u32 port, u16 index,
			  u16 *pkey)
{
	if (index)
		return -EINVAL;
	*pkey = 0xffff;
	return 0;
}

static void uiw_get_dev_fw_str(struct ib_device *ibdev, char *str)
{
	snprintf(str, IB_FW_VERSION_NAME_MAX, "%s", UIW_FW_VER);
}

/* Contexts */

static int uiw_alloc_ucontext(struct ib_ucontext *ibuc, struct ib_udata *udata)
{
	struct uiw_dev *udev = to_udev(ibuc->device);
	struct uiw_ucontext *uctx = to_uctx(ibuc);
	struct uiw_uresp_alloc_ucontext resp = {};
	struct uiw_ureq_alloc_ucontext req = {};
	int rv;

	if (udata->inlen) {
		rv = ib_copy_from_udata(&req, udata,
					min(udata->inlen, sizeof(req)));
		if (rv)
			return rv;
		if (req.abi_version != UIW_ABI_VERSION ||
		    (req.flags & ~UIW_UCTX_F_RDMAP_EXT)) {
			uiw_dbg(udev, "provider ABI %u, kernel ABI %u\n",
				req.abi_version, UIW_ABI_VERSION);
			return -EPROTONOSUPPORT;
		}
	}
	if (!uiw_limit_inc(&udev->num_uctx, UIW_MAX_UCTX))
		return -ENOMEM;

	uctx->owner = get_task_pid(current, PIDTYPE_TGID);
	uctx->rdmap_ext = req.flags & UIW_UCTX_F_RDMAP_EXT;
	spin_lock_init(&uctx->lock);

	resp.abi_version = UIW_ABI_VERSION;
	rv = uiw_stats_uctx_init(uctx, &resp.counters_mmap_key);
	if (rv)
		goto err;
	resp.caps = UIW_CAP_TAKE_SOCKET | UIW_CAP_CQ_SIGNAL |
		    UIW_CAP_READY_EVENTFD | UIW_CAP_ASYNC_EVENT | UIW_CAP_RDMAP_EXT |
		    UIW_CAP_COUNTERS;
	resp.max_qp = UIW_MAX_QP;
	resp.max_qp_wr = UIW_MAX_QP_WR;
	resp.max_sge = UIW_MAX_SGE;
	resp.max_inline_data = UIW_MAX_INLINE;
	resp.max_ird = UIW_MAX_IRD;
	resp.max_ord = UIW_MAX_ORD;
	resp.max_cq = UIW_MAX_CQ;
	resp.max_cqe = UIW_MAX_CQE;
	resp.max_srq = UIW_MAX_SRQ;
	resp.max_srq_wr = UIW_MAX_SRQ_WR;
	resp.max_mr = UIW_MAX_MR;
	resp.max_private_data = UIW_MAX_PRIVATE_DATA;
	resp.max_mr_size = ~0ULL;
	rv = uiw_respond(udata, &resp, sizeof(resp));
	if (!rv)
		return 0;
	uiw_stats_uctx_fini(uctx);
err:
	put_pid(uctx->owner);
	atomic_dec(&udev->num_uctx);
	return rv;
}

static void uiw_dealloc_ucontext(struct ib_ucontext *ibuc)
{
	struct uiw_ucontext *uctx = to_uctx(ibuc);

	if (uctx->ready_efd)
		eventfd_ctx_put(uctx->ready_efd);
	uiw_stats_uctx_fini(uctx);
	put_pid(uctx->owner);
	atomic_dec(&to_udev(ibuc->device)->num_uctx);
}

/*
 * Nothing to do: the core destroys the context's objects itself. Having the op lets
 * `rdma link del` and netdev removal proceed while applications still hold the device.
 */
static void uiw_disassociate_ucontext(struct ib_ucontext *ibuc)
{
}

/* Tell the owner's provider that one of its QPs became ready or lost its connection. */
void uiw_ucontext_signal(struct uiw_ucontext *uctx)
{
	unsigned long flags;

	spin_lock_irqsave(&uctx->lock, flags);
	if (uctx->ready_efd)
		uiw_eventfd_signal(uctx->ready_efd);
	spin_unlock_irqrestore(&uctx->lock, flags);
}

/* PD */

static int uiw_alloc_pd(struct ib_pd *ibpd, struct ib_udata *udata)
{
	struct uiw_dev *udev = to_udev(ibpd->device);

	if (!udata)
		return -EOPNOTSUPP;
	if (!uiw_limit_inc(&udev->num_pd, UIW_MAX_PD))
		return -ENOMEM;
	return 0;
}

static int uiw_dealloc_pd(struct ib_pd *ibpd, struct ib_udata *udata)
{
	atomic_dec(&to_udev(ibpd->device)->num_pd);
	return 0;
}

/* CQ */

static int uiw_create_cq(struct ib_cq *ibcq, const struct ib_cq_init_attr *attr,
			 struct ib_udata *udata)
{
	struct uiw_dev *udev = to_udev(ibcq->device);
	struct uiw_cq *cq = to_ucq(ibcq);
	struct uiw_uresp_create_cq resp = {};
	int rv;

	if (!udata)
		return -EOPNOTSUPP;
	if (attr->flags)
		return -EOPNOTSUPP;
	if (!attr->cqe || attr->cqe > UIW_MAX_CQE)
		return -EINVAL;
	if (!uiw_limit_inc(&udev->num_cq, UIW_MAX_CQ))
		return -ENOMEM;

	rv = xa_alloc_cyclic(&udev->cq_xa, &cq->id, cq, xa_limit_32b,
			     &udev->cq_next, GFP_KERNEL);
	if (rv < 0)
		goto err_count;
	ibcq->cqe = attr->cqe;

	resp.cq_id = cq->id;
	resp.num_cqe = attr->cqe;
	rv = uiw_respond(udata, &resp, sizeof(resp));
	if (rv)
		goto err_id;
	return 0;

err_id:
	xa_erase(&udev->cq_xa, cq->id);
err_count:
	atomic_dec(&udev->num_cq);
	return rv;
}

/* The ring is the provider's; the kernel only checks and records the size. */
#ifdef UIW_HAVE_RESIZE_USER_CQ
static int uiw_resize_cq(struct ib_cq *ibcq, unsigned int cqe, struct ib_udata *udata)
#else
static int uiw_resize_cq(struct ib_cq *ibcq, int cqe, struct ib_udata *udata)
#endif
{
	if (cqe < 1 || cqe > UIW_MAX_CQE)
		return -EINVAL;
	ibcq->cqe = cqe;
	return 0;
}

static int uiw_destroy_cq(struct ib_cq *ibcq, struct ib_udata *udata)
{
	struct uiw_dev *udev = to_udev(ibcq->device);

	xa_erase(&udev->cq_xa, to_ucq(ibcq)->id);
	atomic_dec(&udev->num_cq);
	return 0;
}

/* SRQ */

static int uiw_create_srq(struct ib_srq *ibsrq, struct ib_srq_init_attr *init,
			  struct ib_udata *udata)
{
	struct uiw_dev *udev = to_udev(ibsrq->device);
	struct uiw_srq *srq = to_usrq(ibsrq);
	struct uiw_uresp_create_srq resp = {};
	struct ib_srq_attr *attr = &init->attr;
	int rv;

	if (!udata)
		return -EOPNOTSUPP;
	if (init->srq_type != IB_SRQT_BASIC)
		return -EOPNOTSUPP;
	if (!attr->max_wr || attr->max_wr > UIW_MAX_SRQ_WR ||
	    attr->max_sge > UIW_MAX_SGE || attr->srq_limit > attr->max_wr)
		return -EINVAL;
	if (!uiw_limit_inc(&udev->num_srq, UIW_MAX_SRQ))
		return -ENOMEM;

	rv = xa_alloc_cyclic(&udev->srq_xa, &srq->id, srq, xa_limit_32b,
			     &udev->srq_next, GFP_KERNEL);
	if (rv < 0)
		goto err_count;
	spin_lock_init(&srq->srq_lock);
	srq->num_rqe = attr->max_wr;
	srq->limit = attr->srq_limit;

	resp.srq_id = srq->id;
	resp.num_rqe = srq->num_rqe;
	rv = uiw_respond(udata, &resp, sizeof(resp));
	if (rv)
		goto err_id;
	return 0;

err_id:
	xa_erase(&udev->srq_xa, srq->id);
err_count:
	atomic_dec(&udev->num_srq);
	return rv;
}

static int uiw_modify_srq(struct ib_srq *ibsrq, struct ib_srq_attr *attr,
			  enum ib_srq_attr_mask mask, struct ib_udata *udata)
{
	struct uiw_srq *srq = to_usrq(ibsrq);

	/* The provider owns the receive ring: it cannot be resized from here. */
	if (mask & IB_SRQ_MAX_WR)
		return -EOPNOTSUPP;
	if (mask & IB_SRQ_LIMIT) {
		if (attr->srq_limit > srq->num_rqe)
			return -EINVAL;
		spin_lock_bh(&srq->srq_lock);
		srq->limit = attr->srq_limit;
		spin_unlock_bh(&srq->srq_lock);
	}
	return 0;
}

static int uiw_query_srq(struct ib_srq *ibsrq, struct ib_srq_attr *attr)
{
	struct uiw_srq *srq = to_usrq(ibsrq);

	attr->max_wr = srq->num_rqe;
	attr->max_sge = UIW_MAX_SGE;
	spin_lock_bh(&srq->srq_lock);
	attr->srq_limit = srq->limit;
	spin_unlock_bh(&srq->srq_lock);
	return 0;
}

static int uiw_destroy_srq(struct ib_srq *ibsrq, struct ib_udata *udata)
{
	struct uiw_dev *udev = to_udev(ibsrq->device);

	xa_erase(&udev->srq_xa, to_usrq(ibsrq)->id);
	atomic_dec(&udev->num_srq);
	return 0;
}

/* MR: a key allocator. Nothing is pinned; the provider checks every access itself. */

/*
 * uiw pins nothing (the provider places data through the process's own mappings), but a
 * registration must still name memory the process has, as ib_umem_get() demands of a pinning
 * RNIC such as siw (FOLL_WRITE for write access): the whole range mapped and readable, and
 * writable when the region may be written; -EFAULT otherwise. ODP registrations (explicit) are
 * checked the same way. A later munmap or mprotect is caught by the provider's placement.
 */
static int uiw_check_mapped(u64 start, u64 len, bool write)
{
	struct mm_struct *mm = current->mm;
	struct vm_area_struct *vma;
	u64 addr = start, end;
	int rv = 0;

	if (check_add_overflow(start, len, &end) ||
	    !access_ok(u64_to_user_ptr(start), len) || !mm)
		return -EFAULT;
	mmap_read_lock(mm);
	while (addr < end) {
		vma = find_vma(mm, addr);	/* the first one ending above addr */
		if (!vma || vma->vm_start > addr ||
		    !(vma->vm_flags & (VM_READ | VM_WRITE)) ||
		    (write && !(vma->vm_flags & VM_WRITE))) {
			rv = -EFAULT;
			break;
		}
		addr = vma->vm_end;
	}
	mmap_read_unlock(mm);
	return rv;
}

/*
 * The range of a registration, checked as a pinning driver's would fail: mapped, and writable
 * where the access writes. Implicit ODP (start 0, length U64_MAX) is the whole address space:
 * what is mapped is found at each access, through the process's own page tables.
 */
static int uiw_check_mr_range(u64 start, u64 len, int access)
{
	if ((access & IB_ACCESS_ON_DEMAND) && !start && len == U64_MAX)
		return 0;
	if (!len)
		return -EINVAL;
	return uiw_check_mapped(start, len, access & (IB_ACCESS_LOCAL_WRITE |
						      IB_ACCESS_REMOTE_WRITE |
						      IB_ACCESS_REMOTE_ATOMIC));
}

/*
 * A random index per registration: a peer that knows one STag (its own, or one it was
 * given) learns nothing about the STags registered before or after it. At most
 * UIW_MAX_MR of the 2^24 indexes are in use (1/16), so a random try fails with
 * probability 1/16 at worst; after a few, take the first free index above a random one.
 */
static int uiw_stag_index_alloc(struct uiw_dev *udev, void *mr, u32 *idx)
{
	int i, rv;

	for (i = 0; i < 4; i++) {
		*idx = 1 + get_random_u32_below(UIW_STAG_IDX_MAX);
		rv = xa_insert(&udev->mr_xa, *idx, mr, GFP_KERNEL);
		if (rv != -EBUSY)
			return rv;
	}
	rv = xa_alloc(&udev->mr_xa, idx, mr,
		      XA_LIMIT(1 + get_random_u32_below(UIW_STAG_IDX_MAX),
			       UIW_STAG_IDX_MAX), GFP_KERNEL);
	if (rv != -EBUSY)
		return rv;
	return xa_alloc(&udev->mr_xa, idx, mr, XA_LIMIT(1, UIW_STAG_IDX_MAX),
			GFP_KERNEL);
}

static struct ib_mr *uiw_reg_user_mr(struct ib_pd *ibpd, u64 start, u64 len,
				     u64 iova, int access, struct ib_udata *udata)
{
	struct uiw_dev *udev = to_udev(ibpd->device);
	struct uiw_uresp_reg_mr resp = {};
	struct uiw_mr *mr;
	u32 idx;
	int rv;

	if (!udata)
		return ERR_PTR(-EOPNOTSUPP);
	rv = uiw_check_mr_range(start, len, access);
	if (rv)
		return ERR_PTR(rv);
	if (!uiw_limit_inc(&udev->num_mr, UIW_MAX_MR))
		return ERR_PTR(-ENOMEM);

	mr = kzalloc(sizeof(*mr), GFP_KERNEL);
	if (!mr) {
		rv = -ENOMEM;
		goto err_count;
	}
	rv = uiw_stag_index_alloc(udev, mr, &idx);
	if (rv < 0)
		goto err_free;
	/* STag = 24-bit index | 8-bit key; a fresh random key per registration. */
	mr->stag = idx << 8 | get_random_u8();
	mr->start = start;
	mr->len = len;
	mr->access = access;
	mr->ibmr.lkey = mr->stag;
	mr->ibmr.rkey = mr->stag;

	resp.stag = mr->stag;
	rv = uiw_respond(udata, &resp, sizeof(resp));
	if (rv)
		goto err_idx;
	return &mr->ibmr;

err_idx:
	xa_erase(&udev->mr_xa, idx);
err_free:
	kfree(mr);
err_count:
	atomic_dec(&udev->num_mr);
	return ERR_PTR(rv);
}

/*
 * ibv_rereg_mr, in place (NULL: the core keeps this ib_mr, moves it to the new PD and records
 * the new iova and length). The provider's registry holds what placement uses; the kernel keeps
 * the STag and checks the resulting range as a registration would. The STag stays.
 */
static struct ib_mr *uiw_rereg_user_mr(struct ib_mr *ibmr, int flags, u64 start, u64 len,
				       u64 iova, int access, struct ib_pd *pd,
				       struct ib_udata *udata)
{
	struct uiw_mr *mr = to_umr(ibmr);
	int rv;

	if (!udata)
		return ERR_PTR(-EOPNOTSUPP);
	if (!(flags & IB_MR_REREG_ACCESS))
		access = mr->access;
	if (!(flags & IB_MR_REREG_TRANS)) {
		start = mr->start;
		len = mr->len;
	}
	rv = uiw_check_mr_range(start, len, access);
	if (rv)
		return ERR_PTR(rv);
	mr->start = start;
	mr->len = len;
	mr->access = access;
	return NULL;
}

static int uiw_dereg_mr(struct ib_mr *ibmr, struct ib_udata *udata)
{
	struct uiw_dev *udev = to_udev(ibmr->device);
	struct uiw_mr *mr = to_umr(ibmr);

	xa_erase(&udev->mr_xa, mr->stag >> 8);
	kfree(mr);
	atomic_dec(&udev->num_mr);
	return 0;
}

/*
 * Memory windows share the MRs' STag space and limit. The provider binds and checks them in
 * its registry (bind and invalidation are work requests it runs), so the kernel only hands
 * out a unique STag.
 */
static int uiw_alloc_mw(struct ib_mw *ibmw, struct ib_udata *udata)
{
	struct uiw_dev *udev = to_udev(ibmw->device);
	struct uiw_mw *mw = container_of(ibmw, struct uiw_mw, ibmw);
	u32 idx;
	int rv;

	if (!udata)
		return -EOPNOTSUPP;
	if (!uiw_limit_inc(&udev->num_mr, UIW_MAX_MR))
		return -ENOMEM;
	rv = uiw_stag_index_alloc(udev, mw, &idx);
	if (rv < 0) {
		atomic_dec(&udev->num_mr);
		return rv;
	}
	mw->stag = idx << 8 | get_random_u8();
	ibmw->rkey = mw->stag;
	return 0;
}

static int uiw_dealloc_mw(struct ib_mw *ibmw)
{
	struct uiw_dev *udev = to_udev(ibmw->device);
	struct uiw_mw *mw = container_of(ibmw, struct uiw_mw, ibmw);

	xa_erase(&udev->mr_xa, mw->stag >> 8);
	atomic_dec(&udev->num_mr);
	return 0;
}

static struct ib_mr *uiw_get_dma_mr(struct ib_pd *ibpd, int access)
{
	return ERR_PTR(-EOPNOTSUPP);
}

/* QP */

void uiw_qp_get(struct uiw_qp *qp)
{
	refcount_inc(&qp->ref);
}

void uiw_qp_put(struct uiw_qp *qp)
{
	if (refcount_dec_and_test(&qp->ref))
		complete(&qp->released);
}

/* Look up a live QP of this device and take a reference. */
struct uiw_qp *uiw_qp_lookup(struct uiw_dev *udev, u32 qpn)
{
	struct uiw_qp *qp;

	rcu_read_lock();
	qp = xa_load(&udev->qp_xa, qpn);
	if (qp && !refcount_inc_not_zero(&qp->ref))
		qp = NULL;
	rcu_read_unlock();
	return qp;
}

/* iw_cm's QP handle: iw_connect/iw_accept must name a QP of the calling process. */
bool uiw_qp_owned_by_current(struct uiw_qp *qp)
{
	return qp->owner == task_tgid(current);
}

/*
 * Change the shadow state under qp->lock, and allow the async event the change makes due:
 * SQ_DRAINED on entering SQD, LAST_WQE_REACHED on entering ERR with an SRQ (the verbs
 * events of those transitions); RESET withdraws both and allows a QP error event again.
 */
void uiw_qp_enter_state(struct uiw_qp *qp, enum ib_qp_state state)
{
	lockdep_assert_held(&qp->lock);
	if (state == IB_QPS_SQD && qp->state != IB_QPS_SQD)
		qp->sq_drained_due = true;
	if (state == IB_QPS_ERR && qp->state != IB_QPS_ERR && qp->ibqp.srq)
		qp->last_wqe_due = true;
	if (state == IB_QPS_RESET) {
		qp->sq_drained_due = false;
		qp->last_wqe_due = false;
		qp->fatal_sent = false;
		qp->conn_known = false;	/* the connection is gone */
	}
	qp->state = state;
}

void uiw_qp_set_state(struct uiw_qp *qp, enum ib_qp_state state)
{
	spin_lock_bh(&qp->lock);
	uiw_qp_enter_state(qp, state);
	spin_unlock_bh(&qp->lock);
}

static int uiw_create_qp(struct ib_qp *ibqp, struct ib_qp_init_attr *attr,
			 struct ib_udata *udata)
{
	struct uiw_dev *udev = to_udev(ibqp->device);
	struct uiw_qp *qp = to_uqp(ibqp);
	struct uiw_uresp_create_qp resp = {};
	struct ib_qp_cap *cap = &attr->cap;
	u32 qpn;
	int rv;

	if (!udata)
		return -EOPNOTSUPP;
	/* iWARP is reliable connected only (RFC 5040 §1). */
	if (attr->qp_type != IB_QPT_RC || attr->create_flags)
		return -EOPNOTSUPP;
	if (cap->max_send_wr > UIW_MAX_QP_WR ||
	    cap->max_recv_wr > UIW_MAX_QP_WR ||
	    cap->max_send_sge > UIW_MAX_SGE ||
	    cap->max_recv_sge > UIW_MAX_SGE ||
	    cap->max_inline_data > UIW_MAX_INLINE)
		return -EINVAL;
	if (!uiw_limit_inc(&udev->num_qp, UIW_MAX_QP))
		return -ENOMEM;

	qp->uctx = rdma_udata_to_drv_context(udata, struct uiw_ucontext, ibuc);
	qp->owner = get_task_pid(current, PIDTYPE_TGID);
	refcount_set(&qp->ref, 1);
	init_completion(&qp->released);
	spin_lock_init(&qp->lock);
	uiw_rtr_qp_init(qp);
	qp->state = IB_QPS_RESET;
	qp->num_sqe = cap->max_send_wr;
	qp->max_send_sge = cap->max_send_sge;
	qp->max_recv_sge = cap->max_recv_sge;
	qp->num_rqe = attr->srq ? 0 : cap->max_recv_wr;

	/*
	 * Reserve the QPN now and publish the QP only once nothing can fail: iw_get_qp() and
	 * uiw_qp_lookup() take references as soon as the QP is in the table, which only
	 * destroy_qp waits for. An allocating XArray keeps a NULL entry as reserved (xa_load
	 * sees NULL), and storing into a reserved slot needs no memory.
	 */
	rv = xa_alloc_cyclic(&udev->qp_xa, &qpn, NULL,
			     XA_LIMIT(UIW_QPN_MIN, UIW_QPN_MAX), &udev->qp_next,
			     GFP_KERNEL);
	if (rv < 0)
		goto err_owner;
	ibqp->qp_num = qpn;

	resp.qp_id = qpn;
	resp.num_sqe = qp->num_sqe;
	resp.num_rqe = qp->num_rqe;
	rv = uiw_respond(udata, &resp, sizeof(resp));
	if (rv)
		goto err_qpn;
	xa_store(&udev->qp_xa, qpn, qp, GFP_KERNEL);
	return 0;

err_qpn:
	xa_erase(&udev->qp_xa, qpn);
err_owner:
	put_pid(qp->owner);
	atomic_dec(&udev->num_qp);
	return rv;
}

/* Transitions of the shadow state (IB spec 10.3.1, with iWARP's SQD = graceful close). */
static bool uiw_qp_transition_ok(enum ib_qp_state cur, enum ib_qp_state next)
{
	if (next == IB_QPS_RESET || next == IB_QPS_ERR)
		return true;
	switch (cur) {
	case IB_QPS_RESET:
		return next == IB_QPS_INIT;
	case IB_QPS_INIT:
		return next == IB_QPS_INIT || next == IB_QPS_RTR;
	case IB_QPS_RTR:
		return next == IB_QPS_RTR || next == IB_QPS_RTS;
	case IB_QPS_RTS:
	case IB_QPS_SQD:
		return next == IB_QPS_RTS || next == IB_QPS_SQD;
	default:
		return false;
	}
}

/*
 * Called by the provider (udata set) to mirror its QP state, and by iw_cm (udata NULL)
 * to close a connection: SQD = graceful (rdma_disconnect), ERR = abortive (destroy).
 */
static int uiw_modify_qp(struct ib_qp *ibqp, struct ib_qp_attr *attr, int mask,
			 struct ib_udata *udata)
{
	struct uiw_qp *qp = to_uqp(ibqp);
	enum ib_qp_state next = IB_QPS_RESET, prev;
	bool close = false, abrupt = false, rtr = false, lost = false;
	struct uiw_rtr_target t;
	int rv;

	if (mask & ~(IB_QP_STATE | IB_QP_CUR_STATE | IB_QP_ACCESS_FLAGS |
		     IB_QP_MAX_QP_RD_ATOMIC | IB_QP_MAX_DEST_RD_ATOMIC |
		     IB_QP_PKEY_INDEX | IB_QP_PORT | IB_QP_AV | IB_QP_PATH_MTU |
		     IB_QP_DEST_QPN | IB_QP_RQ_PSN | IB_QP_SQ_PSN |
		     IB_QP_TIMEOUT | IB_QP_RETRY_CNT | IB_QP_RNR_RETRY |
		     IB_QP_MIN_RNR_TIMER | IB_QP_EN_SQD_ASYNC_NOTIFY))
		return -EOPNOTSUPP;
	if ((mask & IB_QP_MAX_QP_RD_ATOMIC) && attr->max_rd_atomic > UIW_MAX_ORD)
		return -EINVAL;
	if ((mask & IB_QP_MAX_DEST_RD_ATOMIC) &&
	    attr->max_dest_rd_atomic > UIW_MAX_IRD)
		return -EINVAL;

	/* RTR with a destination QPN and GID: uiw.ko connects the QP (uiw_rtr.c). */
	if (uiw_rtr_wanted(attr, mask)) {
		rv = uiw_rtr_prepare(qp, attr, &t);
		if (rv < 0)
			return rv;
		rtr = rv == 0;
	}

	spin_lock_bh(&qp->lock);
	if (rtr) {
		rv = uiw_rtr_claim(qp, &t);
		if (rv < 0) {
			spin_unlock_bh(&qp->lock);
			uiw_rtr_abandon(qp, &t);
			return rv;
		}
		/* Another RTR modify committed this very connection: a repeated RTR. */
		lost = rv > 0;
		rtr = !lost;
	}
	prev = qp->state;
	if (mask & IB_QP_STATE) {
		next = attr->qp_state;
		if (!uiw_qp_transition_ok(qp->state, next)) {
			spin_unlock_bh(&qp->lock);
			uiw_dbg_qp(qp, "bad transition %d -> %d\n", qp->state,
				   next);
			if (rtr || lost)
				uiw_rtr_abandon(qp, &t);
			return -EINVAL;
		}
		if (next == IB_QPS_SQD && qp->state != IB_QPS_SQD)
			close = true;
		if (next == IB_QPS_ERR && qp->state != IB_QPS_ERR) {
			close = true;
			abrupt = true;
		}
		uiw_qp_enter_state(qp, next);
	}
	if (mask & IB_QP_ACCESS_FLAGS)
		qp->access_flags = attr->qp_access_flags;
	if (mask & IB_QP_MAX_QP_RD_ATOMIC)
		qp->ord = attr->max_rd_atomic;
	if (mask & IB_QP_MAX_DEST_RD_ATOMIC)
		qp->ird = attr->max_dest_rd_atomic;
	uiw_rtr_echo(qp, attr, mask);
	if (rtr)
		uiw_rtr_commit(qp, &t);
	spin_unlock_bh(&qp->lock);

	if (lost)
		uiw_rtr_abandon(qp, &t);
	if (close)
		uiw_cm_qp_close(qp, abrupt);
	if ((mask & IB_QP_STATE) && next == IB_QPS_RESET)
		uiw_rtr_reset(qp);
	if (rtr)
		return uiw_rtr_start(qp, prev);
	return 0;
}

static int uiw_query_qp(struct ib_qp *ibqp, struct ib_qp_attr *attr, int mask,
			struct ib_qp_init_attr *init)
{
	struct uiw_qp *qp = to_uqp(ibqp);
	struct net_device *netdev = uiw_qp_dev(qp)->netdev;

	memset(attr, 0, sizeof(*attr));
	memset(init, 0, sizeof(*init));

	spin_lock_bh(&qp->lock);
	attr->qp_state = qp->state;
	attr->cur_qp_state = qp->state;
	attr->qp_access_flags = qp->access_flags;
	attr->max_rd_atomic = qp->ord;
	attr->max_dest_rd_atomic = qp->ird;
	attr->cap.max_send_wr = qp->num_sqe;
	attr->cap.max_recv_wr = qp->num_rqe;
	attr->path_mtu = ib_mtu_int_to_enum(netdev->mtu);
	attr->port_num = 1;
	uiw_rtr_query(qp, attr);
	spin_unlock_bh(&qp->lock);

	attr->cap.max_send_sge = qp->max_send_sge;
	attr->cap.max_recv_sge = qp->max_recv_sge;
	attr->cap.max_inline_data = UIW_MAX_INLINE;

	init->cap = attr->cap;
	init->qp_type = IB_QPT_RC;
	init->sq_sig_type = IB_SIGNAL_REQ_WR;
	init->send_cq = ibqp->send_cq;
	init->recv_cq = ibqp->recv_cq;
	init->srq = ibqp->srq;
	return 0;
}

/*
 * rdma res show qp: what the QP's connection negotiated, as driver attributes (the lower
 * layer, MPA revision, CRC, Markers per direction, RFC 7306, IRD/ORD); nothing before it is
 * connected or after a reset.
 */
static int uiw_fill_res_qp_entry(struct sk_buff *msg, struct ib_qp *ibqp)
{
	struct uiw_qp *qp = to_uqp(ibqp);
	struct nlattr *table;
	u32 flags, ird, ord;
	bool known;
	u8 rev;

	spin_lock_bh(&qp->lock);
	known = qp->conn_known;
	flags = qp->conn_flags;
	rev = qp->mpa_rev;
	ird = qp->ird;
	ord = qp->ord;
	spin_unlock_bh(&qp->lock);
	if (!known)
		return 0;
	/* The driver's own attributes go in one nest, as rdma(8) expects them. */
	table = nla_nest_start_noflag(msg, RDMA_NLDEV_ATTR_DRIVER);
	if (!table)
		return -EMSGSIZE;
	if (rdma_nl_put_driver_string(msg, "llp", flags & UIW_CONN_F_SCTP ? "sctp" : "tcp"))
		goto err;
	if (!(flags & UIW_CONN_F_SCTP) &&
	    (rdma_nl_put_driver_u32(msg, "mpa_rev", rev) ||
	     rdma_nl_put_driver_u32(msg, "crc", !!(flags & UIW_CONN_F_CRC)) ||
	     rdma_nl_put_driver_u32(msg, "markers_tx", !!(flags & UIW_CONN_F_MARKERS_TX)) ||
	     rdma_nl_put_driver_u32(msg, "markers_rx", !!(flags & UIW_CONN_F_MARKERS_RX)) ||
	     rdma_nl_put_driver_u32(msg, "p2p", !!(flags & UIW_CONN_F_P2P))))
		goto err;
	if (rdma_nl_put_driver_u32(msg, "rfc7306", !!(flags & UIW_CONN_F_RDMAP_EXT)) ||
	    rdma_nl_put_driver_string(msg, "role", flags & UIW_CONN_F_INITIATOR ?
				      "initiator" : "responder") ||
	    rdma_nl_put_driver_u32(msg, "ird", ird) ||
	    rdma_nl_put_driver_u32(msg, "ord", ord))
		goto err;
	nla_nest_end(msg, table);
	return 0;

err:
	nla_nest_cancel(msg, table);
	return -EMSGSIZE;
}

static int uiw_destroy_qp(struct ib_qp *ibqp, struct ib_udata *udata)
{
	struct uiw_dev *udev = to_udev(ibqp->device);
	struct uiw_qp *qp = to_uqp(ibqp);
	bool abort;

	/*
	 * Unpublish first: after the grace period neither iw_get_qp() (it runs under
	 * iw_cm's spinlock, an RCU read-side section) nor uiw_qp_lookup() can find it.
	 */
	xa_erase(&udev->qp_xa, ibqp->qp_num);
	synchronize_rcu();

	spin_lock_bh(&qp->lock);
	abort = qp->state == IB_QPS_ERR;
	qp->state = IB_QPS_ERR;
	qp->dying = true;
	spin_unlock_bh(&qp->lock);
	uiw_rtr_destroy(qp, abort);
	uiw_cm_qp_destroy(qp);

	/* iw_cm drops its references when it has processed our CLOSE/CONNECT_REPLY. */
	uiw_qp_put(qp);
	wait_for_completion(&qp->released);

	put_pid(qp->owner);
	atomic_dec(&udev->num_qp);
	return 0;
}

#ifdef UIW_HAVE_CREATE_CQ_ATTRS
/* Since the core passes the uverbs_attr_bundle (NULL for kernel consumers), not the udata. */
static int uiw_create_cq_attrs(struct ib_cq *ibcq, const struct ib_cq_init_attr *attr,
			       struct uverbs_attr_bundle *attrs)
{
	return uiw_create_cq(ibcq, attr, attrs ? &attrs->driver_udata : NULL);
}

#define UIW_CREATE_CQ uiw_create_cq_attrs
#else
#define UIW_CREATE_CQ uiw_create_cq
#endif

#ifdef UIW_HAVE_REG_USER_MR_DMAH
/* Since the core passes a DMA handle: uiw does no DMA, so there is nothing to steer. */
static struct ib_mr *uiw_reg_user_mr_dmah(struct ib_pd *ibpd, u64 start, u64 len, u64 iova,
					  int access, struct ib_dmah *dmah,
					  struct ib_udata *udata)
{
	if (dmah)
		return ERR_PTR(-EOPNOTSUPP);
	return uiw_reg_user_mr(ibpd, start, len, iova, access, udata);
}

#define UIW_REG_USER_MR uiw_reg_user_mr_dmah
#else
#define UIW_REG_USER_MR uiw_reg_user_mr
#endif

/* Called by ib_register_device() before any user can reach the device. */
static int uiw_enable_driver(struct ib_device *ibdev)
{
	uiw_rtr_dev_init(to_udev(ibdev));
	return 0;
}

/* iw_cm QP hooks: iw_get_qp runs under iw_cm's spinlock and must not sleep. */

static struct ib_qp *uiw_iw_get_qp(struct ib_device *ibdev, int qpn)
{
	struct uiw_qp *qp = xa_load(&to_udev(ibdev)->qp_xa, qpn);

	if (!qp || !uiw_qp_owned_by_current(qp))
		return NULL;
	return &qp->ibqp;
}

static void uiw_iw_add_ref(struct ib_qp *ibqp)
{
	uiw_qp_get(to_uqp(ibqp));
}

static void uiw_iw_rem_ref(struct ib_qp *ibqp)
{
	uiw_qp_put(to_uqp(ibqp));
}

/*
 * Kernel-verbs entry points. ib_device_check_mandatory() requires them, or rdma_cm would
 * never see the device; no kernel object ever exists to use them.
 */
static int uiw_post_send(struct ib_qp *ibqp, const struct ib_send_wr *wr,
			 const struct ib_send_wr **bad_wr)
{
	*bad_wr = wr;
	return -EOPNOTSUPP;
}

static int uiw_post_recv(struct ib_qp *ibqp, const struct ib_recv_wr *wr,
			 const struct ib_recv_wr **bad_wr)
{
	*bad_wr = wr;
	return -EOPNOTSUPP;
}

static int uiw_poll_cq(struct ib_cq *ibcq, int num_entries, struct ib_wc *wc)
{
	return -EOPNOTSUPP;
}

/*
 * ibv_req_notify_cq (the provider sends the write command, IB_USER_VERBS_CMD_REQ_NOTIFY_CQ):
 * the ring is in user memory, so the provider decides which completion matches the arm;
 * the kernel only counts arms. UIW_METHOD_CQ_SIGNAL fires one event per arm, as a hardware
 * CQ raises one per arm doorbell: a context cannot queue completion events by calling it.
 */
static int uiw_req_notify_cq(struct ib_cq *ibcq, enum ib_cq_notify_flags flags)
{
	if (!ibcq->uobject)
		return -EOPNOTSUPP;	/* no kernel consumers: nothing polls from here */
	set_bit(UIW_CQ_ARMED, &to_ucq(ibcq)->flags);
	return 0;
}

const struct ib_device_ops uiw_device_ops = {
	.owner = THIS_MODULE,
	.driver_id = RDMA_DRIVER_UNKNOWN,
	.uverbs_abi_ver = UIW_ABI_VERSION,

	.alloc_mw = uiw_alloc_mw,
	.alloc_pd = uiw_alloc_pd,
	.alloc_ucontext = uiw_alloc_ucontext,
	.create_cq = UIW_CREATE_CQ,
	.create_qp = uiw_create_qp,
	.create_srq = uiw_create_srq,
	.dealloc_mw = uiw_dealloc_mw,
	.dealloc_pd = uiw_dealloc_pd,
	.dealloc_ucontext = uiw_dealloc_ucontext,
	.dereg_mr = uiw_dereg_mr,
	.destroy_cq = uiw_destroy_cq,
	.destroy_qp = uiw_destroy_qp,
	.fill_res_qp_entry = uiw_fill_res_qp_entry,
	.alloc_hw_port_stats = uiw_alloc_hw_port_stats,
	.get_hw_stats = uiw_get_hw_stats,
	.mmap = uiw_mmap,
	.mmap_free = uiw_mmap_free,
	.destroy_srq = uiw_destroy_srq,
	.disassociate_ucontext = uiw_disassociate_ucontext,
	.enable_driver = uiw_enable_driver,
	.get_dev_fw_str = uiw_get_dev_fw_str,
	.get_dma_mr = uiw_get_dma_mr,
	.get_port_immutable = uiw_get_port_immutable,
	.iw_accept = uiw_iw_accept,
	.iw_add_ref = uiw_iw_add_ref,
	.iw_connect = uiw_iw_connect,
	.iw_create_listen = uiw_iw_create_listen,
	.iw_destroy_listen = uiw_iw_destroy_listen,
	.iw_get_qp = uiw_iw_get_qp,
	.iw_reject = uiw_iw_reject,
	.iw_rem_ref = uiw_iw_rem_ref,
	.modify_qp = uiw_modify_qp,
	.modify_srq = uiw_modify_srq,
	.poll_cq = uiw_poll_cq,
	.post_recv = uiw_post_recv,
	.post_send = uiw_post_send,
	.query_device = uiw_query_device,
	.query_gid = uiw_query_gid,
	.query_pkey = uiw_query_pkey,
	.query_port = uiw_query_port,
	.query_qp = uiw_query_qp,
	.query_srq = uiw_query_srq,
	.reg_user_mr = UIW_REG_USER_MR,
	.rereg_user_mr = uiw_rereg_user_mr,
	.req_notify_cq = uiw_req_notify_cq,
#ifdef UIW_HAVE_RESIZE_USER_CQ
	.resize_user_cq = uiw_resize_cq,
#else
	.resize_cq = uiw_resize_cq,
#endif

	INIT_RDMA_OBJ_SIZE(ib_cq, uiw_cq, ibcq),
	INIT_RDMA_OBJ_SIZE(ib_mw, uiw_mw, ibmw),
	INIT_RDMA_OBJ_SIZE(ib_pd, uiw_pd, ibpd),
	INIT_RDMA_OBJ_SIZE(ib_qp, uiw_qp, ibqp),
	INIT_RDMA_OBJ_SIZE(ib_srq, uiw_srq, ibsrq),
	INIT_RDMA_OBJ_SIZE(ib_ucontext, uiw_ucontext, ibuc),
};
