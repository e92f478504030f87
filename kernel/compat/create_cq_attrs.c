// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
/* Linux 6.11: ib_device_ops.create_cq takes the uverbs_attr_bundle instead of the udata. */
#include <rdma/ib_verbs.h>
#include <rdma/uverbs_ioctl.h>

static int uiw_probe_create_cq(struct ib_cq *cq, const struct ib_cq_init_attr *attr,
			       struct uverbs_attr_bundle *attrs)
{
	return 0;
}

static const struct ib_device_ops __maybe_unused uiw_probe_ops = {
	.create_cq = uiw_probe_create_cq,
};
