// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
/*
 * uiw: thin kernel helper of the uiw user-space iWARP RNIC.
 * Module entry points.
 */

#include <linux/module.h>

MODULE_AUTHOR("uiw developers");
MODULE_DESCRIPTION("uiw user-space iWARP RNIC kernel helper");
MODULE_LICENSE("Dual BSD/GPL");

static int __init uiw_init_module(void)
{
	return 0;
}

static void __exit uiw_exit_module(void)
{
}

module_init(uiw_init_module);
module_exit(uiw_exit_module);
