// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
/*
 * MPA Request/Reply frame I/O (RFC 5044 §7.1.1, RFC 6581).
 *
 * Frames are read with exact lengths: first the 20-byte header, then exactly PD_Length
 * bytes. A peer may legitimately send its first FPDU right behind its Reply (RFC 6581
 * peer-to-peer RTR); reading one byte more would steal it from the provider.
 */

#include <linux/uio.h>
#include <net/sock.h>

#include "uiw_kcompat.h"
#include "uiw_mpa.h"

/* Read up to len bytes without blocking; 0 on EOF is reported as -ECONNRESET. */
static int uiw_mpa_read(struct socket *sock, void *buf, size_t len)
{
	struct msghdr msg = { .msg_flags = MSG_DONTWAIT };
	struct kvec iov = { .iov_base = buf, .iov_len = len };
	int rv;

	rv = kernel_recvmsg(sock, &msg, &iov, 1, len, MSG_DONTWAIT);
	if (rv == 0)
		return -ECONNRESET;
	return rv;
}

/*
 * Receive one MPA Request (request == true) or Reply frame.
 * Returns 0 once the whole frame is in rx, -EAGAIN when more bytes are needed,
 * -ECONNRESET when the peer closed, -EPROTO for a malformed frame, or another error.
 */
int uiw_mpa_recv(struct socket *sock, struct uiw_mpa_rx *rx, bool request)
{
	int rv;

	while (rx->got < UIW_MPA_HDR_LEN) {
		rv = uiw_mpa_read(sock, rx->hdr + rx->got,
				  UIW_MPA_HDR_LEN - rx->got);
		if (rv < 0)
			return rv;
		rx->got += rv;
		if (rx->got < UIW_MPA_HDR_LEN)
			continue;
		/* Malformed (uiw-setup.h): RFC 5044 §7.1.2 closes the connection. */
		if (uiw_mpa_hdr_parse(rx->hdr, request, &rx->bits, &rx->pd_len))
			return -EPROTO;
	}
	while (rx->got < UIW_MPA_HDR_LEN + rx->pd_len) {
		unsigned int off = rx->got - UIW_MPA_HDR_LEN;

		rv = uiw_mpa_read(sock, rx->pd + off, rx->pd_len - off);
		if (rv < 0)
			return rv;
		rx->got += rv;
	}
	return 0;
}

static void uiw_mpa_v2_encode(u8 *p, const struct uiw_mpa_v2 *v2)
{
	u16 ird = min_t(u16, v2->ird, UIW_MPA_V2_MASK);
	u16 ord = min_t(u16, v2->ord, UIW_MPA_V2_MASK);

	if (v2->p2p)
		ird |= UIW_MPA_V2_P2P;
	if (v2->send_rtr)
		ird |= UIW_MPA_V2_SEND_RTR;
	if (v2->write_rtr)
		ord |= UIW_MPA_V2_WRITE_RTR;
	if (v2->read_rtr)
		ord |= UIW_MPA_V2_READ_RTR;
	put_unaligned_be16(ird, p);
	put_unaligned_be16(ord, p + 2);
}

/*
 * Send one MPA Request or Reply: header, the RFC 6581 word if v2 != NULL (then bits
 * must carry UIW_MPA_ENHANCED), then the ULP private data. The frame is at most
 * 20 + 4 + 255 bytes and goes out with one non-blocking sendmsg on a socket that has
 * sent nothing yet; anything short of the whole frame is an error.
 */
int uiw_mpa_send(struct socket *sock, bool request, u16 bits,
		 const struct uiw_mpa_v2 *v2, const void *pd, u8 pd_len)
{
	struct msghdr msg = { .msg_flags = MSG_DONTWAIT | MSG_NOSIGNAL };
	u8 hdr[UIW_MPA_HDR_LEN + UIW_MPA_V2_LEN];
	struct kvec iov[2];
	size_t hdr_len = UIW_MPA_HDR_LEN;
	size_t total;
	int n = 1;
	int rv;

	memcpy(hdr, uiw_mpa_key(request), UIW_MPA_KEY_LEN);
	put_unaligned_be16(bits, hdr + 16);
	if (v2) {
		uiw_mpa_v2_encode(hdr + UIW_MPA_HDR_LEN, v2);
		hdr_len += UIW_MPA_V2_LEN;
	}
	put_unaligned_be16(hdr_len - UIW_MPA_HDR_LEN + pd_len, hdr + 18);

	iov[0].iov_base = hdr;
	iov[0].iov_len = hdr_len;
	if (pd_len) {
		iov[1].iov_base = (void *)pd;
		iov[1].iov_len = pd_len;
		n = 2;
	}
	total = hdr_len + pd_len;
	rv = kernel_sendmsg(sock, &msg, iov, n, total);
	if (rv < 0)
		return rv;
	return rv == total ? 0 : -EIO;
}
