// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
/* Linux 7.2: ib_device_ops.resize_cq becomes resize_user_cq, with an unsigned CQE count. */
#include <rdma/ib_verbs.h>

static int uiw_probe_resize(struct ib_cq *cq, unsigned int cqe, struct ib_udata *udata)
{
	return 0;
}

static const struct ib_device_ops __maybe_unused uiw_probe_ops = {
	.resize_user_cq = uiw_probe_resize,
};
