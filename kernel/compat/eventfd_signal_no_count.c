// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
/* Linux 6.8: eventfd_signal() adds 1 and takes no count (RHEL 9.5 backports it). */
#include <linux/eventfd.h>

static void __maybe_unused uiw_probe(struct eventfd_ctx *ctx)
{
	eventfd_signal(ctx);
}
