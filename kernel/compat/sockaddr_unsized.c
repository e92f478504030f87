// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
/* Linux 6.19: kernel_bind() and kernel_connect() take a struct sockaddr_unsized pointer. */
#include <linux/net.h>
#include <linux/socket.h>

static int __maybe_unused uiw_probe(struct socket *s, struct sockaddr_storage *ss, int len)
{
	return kernel_bind(s, (struct sockaddr_unsized *)ss, len);
}
