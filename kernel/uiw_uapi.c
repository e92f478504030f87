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
static int UVERBS_HANDLER(UIW_METHOD_QP_TAKE_SOCKET)(
	struct uverbs_attr_bundle *attrs)
{
	struct ib_qp *ibqp =
		uverbs_attr_get_obj(attrs, UIW_ATTR_TAKE_SOCKET_QP_HANDLE);
	struct uiw_conn_info info;
	struct file *file;
	int fd, rv;

	if (IS_ERR(ibqp))
		return PTR_ERR(ibqp);

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

/* Fire the CQ's completion event: ib_uverbs_comp_handler queues it on the channel. */
static int UVERBS_HANDLER(UIW_METHOD_CQ_SIGNAL)(struct uverbs_attr_bundle *attrs)
{
	struct ib_cq *ibcq =
		uverbs_attr_get_obj(attrs, UIW_ATTR_CQ_SIGNAL_CQ_HANDLE);

	if (IS_ERR(ibcq))
		return PTR_ERR(ibcq);
	if (ibcq->comp_handler)
		ibcq->comp_handler(ibcq, ibcq->cq_context);
	return 0;
}

static int UVERBS_HANDLER(UIW_METHOD_DEVICE_SET_EVENTFD)(
	struct uverbs_attr_bundle *attrs)
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

DECLARE_UVERBS_NAMED_METHOD(
	UIW_METHOD_QP_TAKE_SOCKET,
	UVERBS_ATTR_IDR(UIW_ATTR_TAKE_SOCKET_QP_HANDLE, UVERBS_OBJECT_QP,
			UVERBS_ACCESS_READ, UA_MANDATORY),
	UVERBS_ATTR_PTR_OUT(UIW_ATTR_TAKE_SOCKET_FD, UVERBS_ATTR_TYPE(s32),
			    UA_MANDATORY),
	UVERBS_ATTR_PTR_OUT(UIW_ATTR_TAKE_SOCKET_CONN_INFO,
			    UVERBS_ATTR_STRUCT(struct uiw_conn_info,
					       remote_addr),
			    UA_MANDATORY));

DECLARE_UVERBS_NAMED_METHOD(
	UIW_METHOD_CQ_SIGNAL,
	UVERBS_ATTR_IDR(UIW_ATTR_CQ_SIGNAL_CQ_HANDLE, UVERBS_OBJECT_CQ,
			UVERBS_ACCESS_READ, UA_MANDATORY));

DECLARE_UVERBS_NAMED_METHOD(
	UIW_METHOD_DEVICE_SET_EVENTFD,
	UVERBS_ATTR_RAW_FD(UIW_ATTR_SET_EVENTFD_FD, UA_MANDATORY));

ADD_UVERBS_METHODS(uiw_qp_methods, UVERBS_OBJECT_QP,
		   &UVERBS_METHOD(UIW_METHOD_QP_TAKE_SOCKET));
ADD_UVERBS_METHODS(uiw_cq_methods, UVERBS_OBJECT_CQ,
		   &UVERBS_METHOD(UIW_METHOD_CQ_SIGNAL));
ADD_UVERBS_METHODS(uiw_device_methods, UVERBS_OBJECT_DEVICE,
		   &UVERBS_METHOD(UIW_METHOD_DEVICE_SET_EVENTFD));

const struct uapi_definition uiw_uapi_defs[] = {
	UAPI_DEF_CHAIN_OBJ_TREE(UVERBS_OBJECT_QP, &uiw_qp_methods),
	UAPI_DEF_CHAIN_OBJ_TREE(UVERBS_OBJECT_CQ, &uiw_cq_methods),
	UAPI_DEF_CHAIN_OBJ_TREE(UVERBS_OBJECT_DEVICE, &uiw_device_methods),
	{}
};
