// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
/* Linux 6.12: <asm/unaligned.h> becomes <linux/unaligned.h>. */
#include <linux/unaligned.h>

static u16 __maybe_unused uiw_probe(const void *p)
{
	return get_unaligned_be16(p);
}
