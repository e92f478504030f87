// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
/* Linux 6.17: ib_device_ops.reg_user_mr takes a DMA handle (struct ib_dmah) before the udata. */
#include <rdma/ib_verbs.h>

static struct ib_mr *uiw_probe_reg_user_mr(struct ib_pd *pd, u64 start, u64 length,
					   u64 virt_addr, int access, struct ib_dmah *dmah,
					   struct ib_udata *udata)
{
	return NULL;
}

static const struct ib_device_ops __maybe_unused uiw_probe_ops = {
	.reg_user_mr = uiw_probe_reg_user_mr,
};
