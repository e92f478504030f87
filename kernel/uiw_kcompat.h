/* SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause */
/*
 * The kernel APIs that differ between the kernels uiw.ko builds for, in one place. Which
 * variant a kernel has is decided by compiling probes against its headers (compat.sh writes
 * uiw_compat.h), not by version numbers: distributions backport API changes.
 */
#ifndef UIW_KCOMPAT_H
#define UIW_KCOMPAT_H

#include <linux/eventfd.h>

#include "uiw_compat.h"

#ifdef UIW_HAVE_LINUX_UNALIGNED_H
#include <linux/unaligned.h>	/* since 6.12 */
#else
#include <asm/unaligned.h>
#endif

/* Adds 1 to the eventfd's counter; the count argument went away in 6.8. */
static inline void uiw_eventfd_signal(struct eventfd_ctx *ctx)
{
#ifdef UIW_HAVE_EVENTFD_SIGNAL_NO_COUNT
	eventfd_signal(ctx);
#else
	eventfd_signal(ctx, 1);
#endif
}

/* kernel_bind() and kernel_connect() take a struct sockaddr_unsized pointer since 6.19. */
#ifdef UIW_HAVE_SOCKADDR_UNSIZED
#define uiw_sockaddr(addr) ((struct sockaddr_unsized *)(addr))
#else
#define uiw_sockaddr(addr) ((struct sockaddr *)(addr))
#endif

/*
 * net_device.reg_state, read without the RTNL: a u8 read with READ_ONCE where it is one, a
 * plain read of the bit-field where it is not (older 6.1 stable kernels).
 */
#ifdef UIW_HAVE_NETDEV_REG_STATE_U8
#define uiw_netdev_reg_state(dev) READ_ONCE((dev)->reg_state)
#else
#define uiw_netdev_reg_state(dev) ((dev)->reg_state)
#endif

#endif /* UIW_KCOMPAT_H */
