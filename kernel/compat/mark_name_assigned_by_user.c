// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
/*
 * After 6.1 (6.12 has it): a device named by the administrator (rdma link add NAME) says so with
 * ib_mark_name_assigned_by_user(), so that ib_core does not rename it.
 */
#include <rdma/ib_verbs.h>

static void __maybe_unused uiw_probe(struct ib_device *dev)
{
	ib_mark_name_assigned_by_user(dev);
}
