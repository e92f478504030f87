// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
/*
 * net_device.reg_state: a plain u8, read with READ_ONCE, in Debian 12's 6.1.0-56, 6.12 and
 * 7.2; a bit-field (which READ_ONCE cannot take the address of) in Debian 12's 6.1.0-50.
 */
#include <linux/netdevice.h>

static u8 __maybe_unused uiw_probe(const struct net_device *dev)
{
	return READ_ONCE(dev->reg_state);
}
