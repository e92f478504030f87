// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
/*
 * uiw driver-specific uverbs methods (ids in kernel-abi/uiw-abi.h).
 *
 * They are chained onto core objects through ib_device.driver_def. A QP or CQ is named by
 * its uverbs handle, which the core resolves in the caller's own uverbs file: only the
 * context that owns an object can reach it here.
 */

#include <linux/eventfd.h>
#include <linux/file.h>

#include "uiw.h"
#include "uiw_cm.h"

#define UVERBS_MODULE_NAME uiw
#include <rdma/uverbs_named_ioctl.h>

/*
 * Hand the connected socket to the QP's owner. Everything that can fail happens before
 * fd_install(), which is the last step: after it the fd belongs to user space.
 */
static int UVERBS_HANDLER(UIW_METHOD_QP_TAKE_SOCKET)(struct uverbs_attr_bundle *attrs)
{
	struct ib_qp *ibqp =
		uverbs_attr_get_obj(attrs, UIW_ATTR_TAKE_SOCKET_QP_HANDLE);
	struct uiw_conn_info info;
	struct file *file;
	int fd, rv;

	if (IS_ERR(ibqp))
		return PTR_ERR(ibqp);
	/* A connect-on-RTR connection that failed for good (uiw_rtr.c). */
	rv = uiw_rtr_error(to_uqp(ibqp));
	if (rv)
		return rv;

	file = uiw_cm_take_socket_prepare(to_uqp(ibqp), &info);
	if (IS_ERR(file))
		return PTR_ERR(file);

	rv = uverbs_copy_to(attrs, UIW_ATTR_TAKE_SOCKET_CONN_INFO, &info,
			    sizeof(info));
	if (rv)
		goto err_file;
	fd = get_unused_fd_flags(O_CLOEXEC);
	if (fd < 0) {
		rv = fd;
		goto err_file;
	}
	rv = uverbs_copy_to(attrs, UIW_ATTR_TAKE_SOCKET_FD, &fd, sizeof(fd));
	if (rv)
		goto err_fd;
	if (!uiw_cm_take_socket_commit(to_uqp(ibqp), file)) {
		rv = -EALREADY;
		goto err_fd;
	}
	fd_install(fd, file);
	return 0;

err_fd:
	put_unused_fd(fd);
err_file:
	fput(file);
	return rv;
}

/*
 * Every event below is queued by uverbs in an allocation of its own until the owner reads
 * it; none is charged to the caller. So each fires only on a condition the kernel saw
 * arise (an arm, a state change, an armed limit), consumed by the event: a context that
 * calls these methods in a loop and never reads queues at most one event per condition.
 */

/* Fire the CQ's completion event if the CQ is armed (uiw_req_notify_cq). */
static int UVERBS_HANDLER(UIW_METHOD_CQ_SIGNAL)(struct uverbs_attr_bundle *attrs)
{
	struct ib_cq *ibcq =
		uverbs_attr_get_obj(attrs, UIW_ATTR_CQ_SIGNAL_CQ_HANDLE);

	if (IS_ERR(ibcq))
		return PTR_ERR(ibcq);
	if (!test_and_clear_bit(UIW_CQ_ARMED, &to_ucq(ibcq)->flags))
		return -EAGAIN;
	/* ib_uverbs_comp_handler queues it on the completion channel. */
	if (ibcq->comp_handler)
		ibcq->comp_handler(ibcq, ibcq->cq_context);
	return 0;
}

/*
 * Affiliated async events detected by the provider's engine. The core's handlers (set by
 * uverbs when the object was created) queue them on the context's async event file.
 */
static int uiw_event_type(struct uverbs_attr_bundle *attrs, u32 *type)
{
	return uverbs_copy_from(type, attrs, UIW_ATTR_EVENT_TYPE);
}

/* -EINVAL for a type the QP cannot raise, -EALREADY when it is not due. */
static int uiw_qp_event_due(struct uiw_qp *qp, u32 type)
{
	int rv = 0;

	spin_lock_bh(&qp->lock);
	switch (type) {
	case IB_EVENT_QP_FATAL:
	case IB_EVENT_QP_REQ_ERR:
	case IB_EVENT_QP_ACCESS_ERR:
		/*
		 * The engine is in Error (RDMAP §5.4 Terminate, or the LLP failed): one
		 * such event between two RESETs (the kernel may have seen the connection
		 * end and entered Error first).
		 */
		if (qp->state == IB_QPS_RESET || qp->fatal_sent) {
			rv = -EALREADY;
			break;
		}
		qp->fatal_sent = true;
		uiw_qp_enter_state(qp, IB_QPS_ERR);
		break;
	case IB_EVENT_SQ_DRAINED:
		if (!qp->sq_drained_due)
			rv = -EALREADY;
		qp->sq_drained_due = false;
		break;
	case IB_EVENT_QP_LAST_WQE_REACHED:
		if (!qp->last_wqe_due)
			rv = -EALREADY;
		qp->last_wqe_due = false;
		break;
	default:
		rv = -EINVAL;
	}
	spin_unlock_bh(&qp->lock);
	return rv;
}

static int UVERBS_HANDLER(UIW_METHOD_QP_EVENT)(struct uverbs_attr_bundle *attrs)
{
	struct ib_qp *ibqp = uverbs_attr_get_obj(attrs, UIW_ATTR_EVENT_HANDLE);
	struct ib_event ev = {};
	u32 type;
	int rv;

	if (IS_ERR(ibqp))
		return PTR_ERR(ibqp);
	rv = uiw_event_type(attrs, &type);
	if (rv)
		return rv;
	rv = uiw_qp_event_due(to_uqp(ibqp), type);
	if (rv)
		return rv;
	ev.device = ibqp->device;
	ev.element.qp = ibqp;
	ev.event = type;
	if (ibqp->event_handler)
		ibqp->event_handler(&ev, ibqp->qp_context);
	return 0;
}

/* IBV_EVENT_CQ_ERR: a completion found the CQ full; the CQ is unusable after it, so once. */
static int UVERBS_HANDLER(UIW_METHOD_CQ_EVENT)(struct uverbs_attr_bundle *attrs)
{
	struct ib_cq *ibcq = uverbs_attr_get_obj(attrs, UIW_ATTR_EVENT_HANDLE);
	struct ib_event ev = {};
	u32 type;
	int rv;

	if (IS_ERR(ibcq))
		return PTR_ERR(ibcq);
	rv = uiw_event_type(attrs, &type);
	if (rv)
		return rv;
	if (type != IB_EVENT_CQ_ERR)
		return -EINVAL;
	if (test_and_set_bit(UIW_CQ_ERR_SENT, &to_ucq(ibcq)->flags))
		return -EALREADY;
	ev.device = ibcq->device;
	ev.element.cq = ibcq;
	ev.event = type;
	if (ibcq->event_handler)
		ibcq->event_handler(&ev, ibcq->cq_context);
	return 0;
}

/*
 * IBV_EVENT_SRQ_LIMIT_REACHED fires once per armed limit and disarms it, as ibv_modify_srq
 * defines; IBV_EVENT_SRQ_ERR once per SRQ.
 */
static int uiw_srq_event_due(struct uiw_srq *srq, u32 type)
{
	int rv = 0;

	spin_lock_bh(&srq->srq_lock);
	if (type == IB_EVENT_SRQ_LIMIT_REACHED) {
		if (!srq->limit)
			rv = -EALREADY;
		srq->limit = 0;
	} else if (type == IB_EVENT_SRQ_ERR) {
		if (srq->err_sent)
			rv = -EALREADY;
		srq->err_sent = true;
	} else {
		rv = -EINVAL;
	}
	spin_unlock_bh(&srq->srq_lock);
	return rv;
}

static int UVERBS_HANDLER(UIW_METHOD_SRQ_EVENT)(struct uverbs_attr_bundle *attrs)
{
	struct ib_srq *ibsrq = uverbs_attr_get_obj(attrs, UIW_ATTR_EVENT_HANDLE);
	struct ib_event ev = {};
	u32 type;
	int rv;

	if (IS_ERR(ibsrq))
		return PTR_ERR(ibsrq);
	rv = uiw_event_type(attrs, &type);
	if (rv)
		return rv;
	rv = uiw_srq_event_due(to_usrq(ibsrq), type);
	if (rv)
		return rv;
	ev.device = ibsrq->device;
	ev.element.srq = ibsrq;
	ev.event = type;
	if (ibsrq->event_handler)
		ibsrq->event_handler(&ev, ibsrq->srq_context);
	return 0;
}

static int UVERBS_HANDLER(UIW_METHOD_DEVICE_SET_EVENTFD)(struct uverbs_attr_bundle *attrs)
{
	struct ib_ucontext *ibuc = ib_uverbs_get_ucontext(attrs);
	struct eventfd_ctx *efd = NULL, *old;
	struct uiw_ucontext *uctx;
	unsigned long flags;
	int fd, rv;

	if (IS_ERR(ibuc))
		return PTR_ERR(ibuc);
	uctx = to_uctx(ibuc);

	rv = uverbs_get_raw_fd(&fd, attrs, UIW_ATTR_SET_EVENTFD_FD);
	if (rv)
		return rv;
	if (fd != -1) {
		efd = eventfd_ctx_fdget(fd);
		if (IS_ERR(efd))
			return PTR_ERR(efd);
	}

	spin_lock_irqsave(&uctx->lock, flags);
	old = uctx->ready_efd;
	uctx->ready_efd = efd;
	spin_unlock_irqrestore(&uctx->lock, flags);
	if (old)
		eventfd_ctx_put(old);
	return 0;
}

DECLARE_UVERBS_NAMED_METHOD(UIW_METHOD_QP_TAKE_SOCKET,
			    UVERBS_ATTR_IDR(UIW_ATTR_TAKE_SOCKET_QP_HANDLE, UVERBS_OBJECT_QP,
					    UVERBS_ACCESS_READ, UA_MANDATORY),
			    UVERBS_ATTR_PTR_OUT(UIW_ATTR_TAKE_SOCKET_FD, UVERBS_ATTR_TYPE(s32),
						UA_MANDATORY),
			    UVERBS_ATTR_PTR_OUT(UIW_ATTR_TAKE_SOCKET_CONN_INFO,
						UVERBS_ATTR_STRUCT(struct uiw_conn_info,
								   remote_addr),
						UA_MANDATORY));

DECLARE_UVERBS_NAMED_METHOD(UIW_METHOD_CQ_SIGNAL,
			    UVERBS_ATTR_IDR(UIW_ATTR_CQ_SIGNAL_CQ_HANDLE, UVERBS_OBJECT_CQ,
					    UVERBS_ACCESS_READ, UA_MANDATORY));

DECLARE_UVERBS_NAMED_METHOD(UIW_METHOD_QP_EVENT,
			    UVERBS_ATTR_IDR(UIW_ATTR_EVENT_HANDLE, UVERBS_OBJECT_QP,
					    UVERBS_ACCESS_READ, UA_MANDATORY),
			    UVERBS_ATTR_PTR_IN(UIW_ATTR_EVENT_TYPE, UVERBS_ATTR_TYPE(u32),
					       UA_MANDATORY));

DECLARE_UVERBS_NAMED_METHOD(UIW_METHOD_CQ_EVENT,
			    UVERBS_ATTR_IDR(UIW_ATTR_EVENT_HANDLE, UVERBS_OBJECT_CQ,
					    UVERBS_ACCESS_READ, UA_MANDATORY),
			    UVERBS_ATTR_PTR_IN(UIW_ATTR_EVENT_TYPE, UVERBS_ATTR_TYPE(u32),
					       UA_MANDATORY));

DECLARE_UVERBS_NAMED_METHOD(UIW_METHOD_SRQ_EVENT,
			    UVERBS_ATTR_IDR(UIW_ATTR_EVENT_HANDLE, UVERBS_OBJECT_SRQ,
					    UVERBS_ACCESS_READ, UA_MANDATORY),
			    UVERBS_ATTR_PTR_IN(UIW_ATTR_EVENT_TYPE, UVERBS_ATTR_TYPE(u32),
					       UA_MANDATORY));

DECLARE_UVERBS_NAMED_METHOD(UIW_METHOD_DEVICE_SET_EVENTFD,
			    UVERBS_ATTR_RAW_FD(UIW_ATTR_SET_EVENTFD_FD, UA_MANDATORY));

ADD_UVERBS_METHODS(uiw_qp_methods, UVERBS_OBJECT_QP,
		   &UVERBS_METHOD(UIW_METHOD_QP_TAKE_SOCKET),
		   &UVERBS_METHOD(UIW_METHOD_QP_EVENT));
ADD_UVERBS_METHODS(uiw_cq_methods, UVERBS_OBJECT_CQ,
		   &UVERBS_METHOD(UIW_METHOD_CQ_SIGNAL),
		   &UVERBS_METHOD(UIW_METHOD_CQ_EVENT));
ADD_UVERBS_METHODS(uiw_srq_methods, UVERBS_OBJECT_SRQ,
		   &UVERBS_METHOD(UIW_METHOD_SRQ_EVENT));
ADD_UVERBS_METHODS(uiw_device_methods, UVERBS_OBJECT_DEVICE,
		   &UVERBS_METHOD(UIW_METHOD_DEVICE_SET_EVENTFD));

const struct uapi_definition uiw_uapi_defs[] = {
	UAPI_DEF_CHAIN_OBJ_TREE(UVERBS_OBJECT_QP, &uiw_qp_methods),
	UAPI_DEF_CHAIN_OBJ_TREE(UVERBS_OBJECT_CQ, &uiw_cq_methods),
	UAPI_DEF_CHAIN_OBJ_TREE(UVERBS_OBJECT_SRQ, &uiw_srq_methods),
	UAPI_DEF_CHAIN_OBJ_TREE(UVERBS_OBJECT_DEVICE, &uiw_device_methods),
	{}
};
