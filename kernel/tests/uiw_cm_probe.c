// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
/*
 * uiw_cm_probe: exercises uiw.ko's connection manager without a provider.
 *
 * It speaks the raw kernel ABIs: uverbs write commands and ioctls on /dev/infiniband/uverbsN
 * (context, PD, CQ, QP, the uiw driver methods) and rdma_ucm commands on
 * /dev/infiniband/rdma_cm (the same calls librdmacm makes). After the connection is up it
 * takes the socket with UIW_METHOD_QP_TAKE_SOCKET and checks that the byte stream starts
 * exactly at what the peer sent first.
 *
 *   uiw_cm_probe server DEV ADDR PORT [MODE]    (ADDR may be 0.0.0.0 or ::)
 *   uiw_cm_probe client DEV SRC DST PORT [MODE]
 *   uiw_cm_probe steal DEV SRC DST PORT QPN      (connect with someone else's QPN)
 *
 * MODE: data (default: exchange test bytes, then disconnect), reject (server), hold (stay
 * connected until killed), peek (print the first 2 bytes the peer sent, the ULPDU_Length of
 * its first FPDU, then exit without disconnecting), info (exit right after the hand-off),
 * wait (after the hand-off, send nothing and stay until killed), rtr (as initiator in RFC 6581
 * peer-to-peer mode with a Write RTR, send the zero-length RDMA Write RTR FPDU a provider
 * sends, then stay until killed).
 *
 * Output lines are "key: value" for the test script; exit status 0 = the flow completed.
 * Build: the CMake target uiw_cm_probe (into build/bin), which the system tests use.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>
#include <rdma/ib_user_ioctl_cmds.h>
#include <rdma/ib_user_verbs.h>
#include <rdma/rdma_user_cm.h>
#include <rdma/rdma_user_ioctl.h>

#include "uiw-abi.h"

/* enum rdma_cm_event_type (librdmacm) */
enum { EV_ADDR_RESOLVED = 0, EV_ROUTE_RESOLVED = 2, EV_CONNECT_REQUEST = 4,
       EV_CONNECT_ERROR = 6, EV_UNREACHABLE = 7, EV_REJECTED = 8, EV_ESTABLISHED = 9,
       EV_DISCONNECTED = 10 };
#define PS_TCP 0x0106
#define QPT_RC 2

static const char client_bytes[] = "UIW-FIRST-FPDU-FROM-CLIENT";
static const char server_bytes[] = "UIW-FIRST-FPDU-FROM-SERVER";

static void die(const char *what)
{
	printf("error: %s: %s\n", what, strerror(errno));
	exit(1);
}

/* Verbs */

struct verbs {
	int fd;
	uint32_t pd, cq, qp, qpn;
	int efd;
	int channel;		/* completion channel of cq */
};

#define CQ_USER_HANDLE 0x5157cafe

static int uverbs_write(int fd, uint32_t cmd, void *in, size_t in_len, size_t out_len)
{
	struct ib_uverbs_cmd_hdr *hdr = in;

	hdr->command = cmd;
	hdr->in_words = in_len / 4;
	hdr->out_words = out_len / 4;
	return write(fd, in, in_len) == (ssize_t)in_len ? 0 : -1;
}

static int open_uverbs(const char *dev)
{
	char path[320], name[64];
	struct dirent *d;
	DIR *dir = opendir("/sys/class/infiniband_verbs");
	int fd = -1;

	if (!dir)
		die("opendir infiniband_verbs");
	while ((d = readdir(dir))) {
		FILE *f;

		if (strncmp(d->d_name, "uverbs", 6))
			continue;
		snprintf(path, sizeof(path), "/sys/class/infiniband_verbs/%s/ibdev", d->d_name);
		f = fopen(path, "r");
		if (!f)
			continue;
		if (fscanf(f, "%63s", name) == 1 && !strcmp(name, dev)) {
			snprintf(path, sizeof(path), "/dev/infiniband/%s", d->d_name);
			fd = open(path, O_RDWR | O_CLOEXEC);
		}
		fclose(f);
	}
	closedir(dir);
	if (fd < 0)
		die("open uverbs device");
	return fd;
}

static void verbs_open(struct verbs *v, const char *dev)
{
	struct {
		struct ib_uverbs_cmd_hdr hdr;
		struct ib_uverbs_get_context cmd;
		struct uiw_ureq_alloc_ucontext req;
	} ctx = {};
	struct {
		struct ib_uverbs_get_context_resp resp;
		struct uiw_uresp_alloc_ucontext drv;
	} ctx_resp = {};
	struct {
		struct ib_uverbs_cmd_hdr hdr;
		struct ib_uverbs_alloc_pd cmd;
	} pd = {};
	struct ib_uverbs_alloc_pd_resp pd_resp = {};
	struct {
		struct ib_uverbs_cmd_hdr hdr;
		struct ib_uverbs_create_comp_channel cmd;
	} chan = {};
	struct ib_uverbs_create_comp_channel_resp chan_resp = {};
	struct {
		struct ib_uverbs_cmd_hdr hdr;
		struct ib_uverbs_create_cq cmd;
	} cq = {};
	struct {
		struct ib_uverbs_create_cq_resp resp;
		struct uiw_uresp_create_cq drv;
	} cq_resp = {};
	struct {
		struct ib_uverbs_cmd_hdr hdr;
		struct ib_uverbs_create_qp cmd;
	} qp = {};
	struct {
		struct ib_uverbs_create_qp_resp resp;
		struct uiw_uresp_create_qp drv;
	} qp_resp = {};

	v->fd = open_uverbs(dev);

	ctx.cmd.response = (uintptr_t)&ctx_resp;
	ctx.req.abi_version = UIW_ABI_VERSION;
	if (uverbs_write(v->fd, IB_USER_VERBS_CMD_GET_CONTEXT, &ctx, sizeof(ctx),
			 sizeof(ctx_resp)))
		die("GET_CONTEXT");
	printf("context: abi %u caps 0x%x max_ird %u max_private_data %u\n", ctx_resp.drv.abi_version,
	       ctx_resp.drv.caps, ctx_resp.drv.max_ird, ctx_resp.drv.max_private_data);

	pd.cmd.response = (uintptr_t)&pd_resp;
	if (uverbs_write(v->fd, IB_USER_VERBS_CMD_ALLOC_PD, &pd, sizeof(pd), sizeof(pd_resp)))
		die("ALLOC_PD");
	v->pd = pd_resp.pd_handle;

	chan.cmd.response = (uintptr_t)&chan_resp;
	if (uverbs_write(v->fd, IB_USER_VERBS_CMD_CREATE_COMP_CHANNEL, &chan, sizeof(chan),
			 sizeof(chan_resp)))
		die("CREATE_COMP_CHANNEL");
	v->channel = chan_resp.fd;

	cq.cmd.response = (uintptr_t)&cq_resp;
	cq.cmd.user_handle = CQ_USER_HANDLE;
	cq.cmd.cqe = 64;
	cq.cmd.comp_channel = v->channel;
	if (uverbs_write(v->fd, IB_USER_VERBS_CMD_CREATE_CQ, &cq, sizeof(cq), sizeof(cq_resp)))
		die("CREATE_CQ");
	v->cq = cq_resp.resp.cq_handle;

	qp.cmd.response = (uintptr_t)&qp_resp;
	qp.cmd.pd_handle = v->pd;
	qp.cmd.send_cq_handle = v->cq;
	qp.cmd.recv_cq_handle = v->cq;
	qp.cmd.max_send_wr = 16;
	qp.cmd.max_recv_wr = 16;
	qp.cmd.max_send_sge = 1;
	qp.cmd.max_recv_sge = 1;
	qp.cmd.qp_type = QPT_RC;
	if (uverbs_write(v->fd, IB_USER_VERBS_CMD_CREATE_QP, &qp, sizeof(qp), sizeof(qp_resp)))
		die("CREATE_QP");
	v->qp = qp_resp.resp.qp_handle;
	v->qpn = qp_resp.resp.qpn;
	printf("qp: qpn %u (driver qp_id %u, sq %u rq %u)\n", v->qpn, qp_resp.drv.qp_id,
	       qp_resp.drv.num_sqe, qp_resp.drv.num_rqe);

	/* Two MRs: distinct STags, lkey == rkey == the driver's STag, index never 0. */
	for (int i = 0; i < 2; i++) {
		static char buf[2][4096];
		struct {
			struct ib_uverbs_cmd_hdr hdr;
			struct ib_uverbs_reg_mr cmd;
		} mr = {};
		struct {
			struct ib_uverbs_reg_mr_resp resp;
			struct uiw_uresp_reg_mr drv;
		} mr_resp = {};

		mr.cmd.response = (uintptr_t)&mr_resp;
		mr.cmd.start = (uintptr_t)buf[i];
		mr.cmd.length = sizeof(buf[i]);
		mr.cmd.hca_va = (uintptr_t)buf[i];
		mr.cmd.pd_handle = v->pd;
		mr.cmd.access_flags = 0x7;	/* local write, remote write, remote read */
		if (uverbs_write(v->fd, IB_USER_VERBS_CMD_REG_MR, &mr, sizeof(mr),
				 sizeof(mr_resp)))
			die("REG_MR");
		printf("mr: lkey 0x%08x rkey 0x%08x stag 0x%08x\n", mr_resp.resp.lkey,
		       mr_resp.resp.rkey, mr_resp.drv.stag);
	}

	{
		struct {
			struct ib_uverbs_cmd_hdr hdr;
			struct ib_uverbs_create_srq cmd;
		} srq = {};
		struct {
			struct ib_uverbs_create_srq_resp resp;
			struct uiw_uresp_create_srq drv;
		} srq_resp = {};

		srq.cmd.response = (uintptr_t)&srq_resp;
		srq.cmd.pd_handle = v->pd;
		srq.cmd.max_wr = 32;
		srq.cmd.max_sge = 2;
		if (uverbs_write(v->fd, IB_USER_VERBS_CMD_CREATE_SRQ, &srq, sizeof(srq),
				 sizeof(srq_resp)))
			die("CREATE_SRQ");
		printf("srq: max_wr %u driver srq_id %u num_rqe %u\n", srq_resp.resp.max_wr,
		       srq_resp.drv.srq_id, srq_resp.drv.num_rqe);
	}
}

static int verbs_ioctl(int fd, uint16_t object, uint16_t method, struct ib_uverbs_attr *attrs,
		       int n)
{
	struct {
		struct ib_uverbs_ioctl_hdr hdr;
		struct ib_uverbs_attr attrs[4];
	} req = {};

	req.hdr.length = sizeof(req.hdr) + n * sizeof(attrs[0]);
	req.hdr.object_id = object;
	req.hdr.method_id = method;
	req.hdr.num_attrs = n;
	req.hdr.driver_id = 0;	/* RDMA_DRIVER_UNKNOWN */
	memcpy(req.attrs, attrs, n * sizeof(attrs[0]));
	return ioctl(fd, RDMA_VERBS_IOCTL, &req);
}

static void verbs_set_eventfd(struct verbs *v)
{
	struct ib_uverbs_attr a = {
		.attr_id = UIW_ATTR_SET_EVENTFD_FD,
		.flags = UVERBS_ATTR_F_MANDATORY,
	};

	v->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	a.data_s64 = v->efd;
	if (verbs_ioctl(v->fd, UVERBS_OBJECT_DEVICE, UIW_METHOD_DEVICE_SET_EVENTFD, &a, 1))
		die("SET_EVENTFD");
}

static int take_socket(struct verbs *v, struct uiw_conn_info *info, int *sfd)
{
	struct ib_uverbs_attr a[3] = {
		{ .attr_id = UIW_ATTR_TAKE_SOCKET_QP_HANDLE, .flags = UVERBS_ATTR_F_MANDATORY,
		  .data = v->qp },
		{ .attr_id = UIW_ATTR_TAKE_SOCKET_FD, .len = sizeof(*sfd),
		  .flags = UVERBS_ATTR_F_MANDATORY, .data = (uintptr_t)sfd },
		{ .attr_id = UIW_ATTR_TAKE_SOCKET_CONN_INFO, .len = sizeof(*info),
		  .flags = UVERBS_ATTR_F_MANDATORY, .data = (uintptr_t)info },
	};

	return verbs_ioctl(v->fd, UVERBS_OBJECT_QP, UIW_METHOD_QP_TAKE_SOCKET, a, 3);
}

static void cq_signal(struct verbs *v)
{
	struct ib_uverbs_attr a = { .attr_id = UIW_ATTR_CQ_SIGNAL_CQ_HANDLE,
				    .flags = UVERBS_ATTR_F_MANDATORY, .data = v->cq };

	struct ib_uverbs_comp_event_desc desc = {};
	struct pollfd p = { .fd = v->channel, .events = POLLIN };

	struct {
		struct ib_uverbs_cmd_hdr hdr;
		struct ib_uverbs_req_notify_cq cmd;
	} arm = { .cmd = { .cq_handle = v->cq } };

	/* The kernel queues a completion event only for an armed CQ: unarmed is EAGAIN. */
	if (!verbs_ioctl(v->fd, UVERBS_OBJECT_CQ, UIW_METHOD_CQ_SIGNAL, &a, 1) || errno != EAGAIN)
		die("CQ_SIGNAL on an unarmed CQ was not refused with EAGAIN");
	if (uverbs_write(v->fd, IB_USER_VERBS_CMD_REQ_NOTIFY_CQ, &arm, sizeof(arm), 0))
		die("REQ_NOTIFY_CQ");
	if (verbs_ioctl(v->fd, UVERBS_OBJECT_CQ, UIW_METHOD_CQ_SIGNAL, &a, 1))
		die("CQ_SIGNAL");
	/* What ibv_get_cq_event() reads: the CQ's user handle on its completion channel. */
	if (poll(&p, 1, 5000) != 1 || read(v->channel, &desc, sizeof(desc)) != sizeof(desc))
		die("completion channel");
	printf("cq-event: %s\n", desc.cq_handle == CQ_USER_HANDLE ? "ok" : "WRONG HANDLE");
}

/* rdma_ucm */

static int ucma_fd;

static int ucma_write(uint32_t cmd, void *in, size_t in_len, size_t out_len)
{
	struct rdma_ucm_cmd_hdr *hdr = in;

	hdr->cmd = cmd;
	hdr->in = in_len - sizeof(*hdr);
	hdr->out = out_len;
	if (getenv("PROBE_TRACE"))
		fprintf(stderr, "ucma cmd %u\n", cmd);
	return write(ucma_fd, in, in_len) == (ssize_t)in_len ? 0 : -1;
}

static uint32_t ucma_create_id(void)
{
	struct {
		struct rdma_ucm_cmd_hdr hdr;
		struct rdma_ucm_create_id cmd;
	} c = {};
	struct rdma_ucm_create_id_resp resp = {};

	c.cmd.uid = 1;		/* ucma only queues events of ids with a non-zero uid */
	c.cmd.response = (uintptr_t)&resp;
	c.cmd.ps = PS_TCP;
	c.cmd.qp_type = QPT_RC;
	if (ucma_write(RDMA_USER_CM_CMD_CREATE_ID, &c, sizeof(c), sizeof(resp)))
		die("CREATE_ID");
	return resp.id;
}

static struct rdma_ucm_event_resp ucma_event(void)
{
	struct {
		struct rdma_ucm_cmd_hdr hdr;
		struct rdma_ucm_get_event cmd;
	} c = {};
	struct rdma_ucm_event_resp resp = {};

	c.cmd.response = (uintptr_t)&resp;
	if (ucma_write(RDMA_USER_CM_CMD_GET_EVENT, &c, sizeof(c), sizeof(resp)))
		die("GET_EVENT");
	printf("event: %u status %d id %u pd_len %u ird %u ord %u\n", resp.event,
	       (int)resp.status, resp.id, resp.param.conn.private_data_len,
	       resp.param.conn.responder_resources, resp.param.conn.initiator_depth);
	return resp;
}

static void expect_event(uint32_t event)
{
	struct rdma_ucm_event_resp e = ucma_event();

	if (e.event != event) {
		printf("error: expected event %u, got %u status %d\n", event, e.event,
		       (int)e.status);
		exit(1);
	}
}

static int parse_addr(const char *s, int port, struct sockaddr_storage *ss)
{
	struct sockaddr_in *sin = (struct sockaddr_in *)ss;
	struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)ss;

	memset(ss, 0, sizeof(*ss));
	if (inet_pton(AF_INET, s, &sin->sin_addr) == 1) {
		sin->sin_family = AF_INET;
		sin->sin_port = htons(port);
		return sizeof(*sin);
	}
	if (inet_pton(AF_INET6, s, &sin6->sin6_addr) == 1) {
		sin6->sin6_family = AF_INET6;
		sin6->sin6_port = htons(port);
		return sizeof(*sin6);
	}
	fprintf(stderr, "bad address %s\n", s);
	exit(2);
}

static void print_info(const struct uiw_conn_info *i)
{
	char l[64], r[64];

	inet_ntop(AF_INET6, i->local_addr, l, sizeof(l));
	inet_ntop(AF_INET6, i->remote_addr, r, sizeof(r));
	printf("info: flags 0x%x qpn %u ird %u ord %u rev %u rtr %u local [%s]:%u remote [%s]:%u\n",
	       i->flags, i->qpn, i->ird, i->ord, i->mpa_rev, i->rtr, l, i->local_port, r,
	       i->remote_port);
}

/* The stream must start exactly with what the peer sent first. */
static void exchange(int sfd, const char *out, const char *in)
{
	char buf[64] = {};
	size_t got = 0, want = strlen(in);
	struct pollfd p = { .fd = sfd, .events = POLLIN };

	if (write(sfd, out, strlen(out)) != (ssize_t)strlen(out))
		die("socket write");
	while (got < want) {
		ssize_t n;

		if (poll(&p, 1, 10000) <= 0)
			die("socket poll");
		n = read(sfd, buf + got, want - got);
		if (n <= 0)
			die("socket read");
		got += n;
	}
	printf("stream: %s\n", memcmp(buf, in, want) ? "MISMATCH" : "ok");
}

static const char *mode = "data";

/*
 * The RFC 6581 RTR of type Write: one FPDU (RFC 5044 §4.1) carrying a zero-length tagged DDP
 * segment (RFC 5041 §4.2: T, L, DV 1; STag 0, TO 0) with RDMAP RV 1, opcode RDMA Write (RFC 5040
 * §4.3). 2 octets ULPDU_Length + 14 header octets need no pad; without negotiated CRC the CRC
 * field is sent as 0 (the probe computes no CRC: its tests run CRC off).
 */
static void send_write_rtr(int sfd, const struct uiw_conn_info *i)
{
	const unsigned char f[20] = { 0, 14, 0xc1, 0x40 };

	if (i->rtr != UIW_RTR_WRITE || !(i->flags & UIW_CONN_F_P2P) ||
	    !(i->flags & UIW_CONN_F_INITIATOR) ||
	    (i->flags & (UIW_CONN_F_MARKERS_TX | UIW_CONN_F_CRC)))
		die("rtr mode: needs a p2p initiator, Write RTR, no Markers, no CRC");
	if (write(sfd, f, sizeof(f)) != (ssize_t)sizeof(f))
		die("RTR write");
	printf("rtr-sent\n");
	fflush(stdout);
}

static void take_and_check(struct verbs *v, const char *out, const char *in)
{
	struct uiw_conn_info info = {};
	uint64_t n = 0;
	int sfd = -1;

	if (read(v->efd, &n, sizeof(n)) != sizeof(n))
		printf("eventfd: not signalled\n");
	else
		printf("eventfd: %llu\n", (unsigned long long)n);
	if (take_socket(v, &info, &sfd))
		die("TAKE_SOCKET");
	print_info(&info);
	if (take_socket(v, &info, &sfd) == 0 || errno != EALREADY)
		printf("error: second TAKE_SOCKET did not fail with EALREADY\n");
	else
		printf("take-again: EALREADY\n");
	if (!strcmp(mode, "info"))
		exit(0);
	if (!strcmp(mode, "wait")) {	/* silent until killed: the peer goes first */
		printf("waiting\n");
		fflush(stdout);
		pause();
	}
	if (!strcmp(mode, "rtr")) {	/* the RTR, then silent until killed */
		send_write_rtr(sfd, &info);
		pause();
	}
	if (!strcmp(mode, "peek")) {
		unsigned char len[2];
		struct pollfd p = { .fd = sfd, .events = POLLIN };

		if (poll(&p, 1, 20000) <= 0 || recv(sfd, len, 2, MSG_WAITALL) != 2)
			die("peek");
		printf("first-ulpdu-length: %u\n", len[0] << 8 | len[1]);
		exit(0);
	}
	exchange(sfd, out, in);
	if (!strcmp(mode, "hold")) {
		printf("holding\n");
		pause();
	}
	close(sfd);
}

int main(int argc, char **argv)
{
	struct uiw_conn_info info;
	struct verbs v = {};
	int sfd;

	if (argc < 5) {
		fprintf(stderr, "usage: see the header of %s\n", __FILE__);
		return 2;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	ucma_fd = open("/dev/infiniband/rdma_cm", O_RDWR | O_CLOEXEC);
	if (ucma_fd < 0)
		die("open rdma_cm");
	verbs_open(&v, argv[2]);
	verbs_set_eventfd(&v);
	if (take_socket(&v, &info, &sfd) == 0 || errno != ENOTCONN)
		printf("error: TAKE_SOCKET before connecting did not fail with ENOTCONN (%d)\n",
		       errno);
	cq_signal(&v);

	if (!strcmp(argv[1], "server")) {
		struct {
			struct rdma_ucm_cmd_hdr hdr;
			struct rdma_ucm_bind cmd;
		} bind = {};
		struct {
			struct rdma_ucm_cmd_hdr hdr;
			struct rdma_ucm_listen cmd;
		} listen = {};
		struct {
			struct rdma_ucm_cmd_hdr hdr;
			struct rdma_ucm_accept cmd;
		} acc = {};
		struct {
			struct rdma_ucm_cmd_hdr hdr;
			struct rdma_ucm_reject cmd;
		} rej = {};
		struct rdma_ucm_event_resp e;
		bool reject;

		if (argc > 5)
			mode = argv[5];
		reject = !strcmp(mode, "reject");

		bind.cmd.id = ucma_create_id();
		bind.cmd.addr_size = parse_addr(argv[3], atoi(argv[4]), (void *)&bind.cmd.addr);
		if (ucma_write(RDMA_USER_CM_CMD_BIND, &bind, sizeof(bind), 0))
			die("BIND");
		listen.cmd.id = bind.cmd.id;
		listen.cmd.backlog = 8;
		if (ucma_write(RDMA_USER_CM_CMD_LISTEN, &listen, sizeof(listen), 0))
			die("LISTEN");
		printf("listening\n");
		e = ucma_event();
		if (e.event != EV_CONNECT_REQUEST)
			return 1;
		printf("request-data: %.*s\n", e.param.conn.private_data_len,
		       (char *)e.param.conn.private_data);
		if (reject) {
			rej.cmd.id = e.id;
			rej.cmd.private_data_len = 7;
			memcpy(rej.cmd.private_data, "go-away", 7);
			if (ucma_write(RDMA_USER_CM_CMD_REJECT, &rej, sizeof(rej), 0))
				die("REJECT");
			printf("rejected\n");
			return 0;
		}
		acc.cmd.uid = 2;
		acc.cmd.id = e.id;
		acc.cmd.conn_param.qp_num = v.qpn;
		acc.cmd.conn_param.valid = 1;
		acc.cmd.conn_param.responder_resources = 4;
		acc.cmd.conn_param.initiator_depth = 4;
		acc.cmd.conn_param.private_data_len = 13;
		memcpy(acc.cmd.conn_param.private_data, "reply-from-sv", 13);
		if (ucma_write(RDMA_USER_CM_CMD_ACCEPT, &acc, sizeof(acc), 0))
			die("ACCEPT");
		expect_event(EV_ESTABLISHED);
		take_and_check(&v, server_bytes, client_bytes);
		expect_event(EV_DISCONNECTED);
		printf("done\n");
		return 0;
	}

	if (!strcmp(argv[1], "client") || !strcmp(argv[1], "steal")) {
		struct {
			struct rdma_ucm_cmd_hdr hdr;
			struct rdma_ucm_resolve_addr cmd;
		} ra = {};
		struct {
			struct rdma_ucm_cmd_hdr hdr;
			struct rdma_ucm_resolve_route cmd;
		} rr = {};
		struct {
			struct rdma_ucm_cmd_hdr hdr;
			struct rdma_ucm_connect cmd;
		} con = {};
		struct {
			struct rdma_ucm_cmd_hdr hdr;
			struct rdma_ucm_disconnect cmd;
		} disc = {};
		struct rdma_ucm_event_resp e;
		bool steal = !strcmp(argv[1], "steal");

		if (argc < 6)
			return 2;
		if (!steal && argc > 6)
			mode = argv[6];
		ra.cmd.id = ucma_create_id();
		ra.cmd.src_size = parse_addr(argv[3], 0, (void *)&ra.cmd.src_addr);
		ra.cmd.dst_size = parse_addr(argv[4], atoi(argv[5]), (void *)&ra.cmd.dst_addr);
		ra.cmd.timeout_ms = 2000;
		if (ucma_write(RDMA_USER_CM_CMD_RESOLVE_ADDR, &ra, sizeof(ra), 0))
			die("RESOLVE_ADDR");
		expect_event(EV_ADDR_RESOLVED);
		rr.cmd.id = ra.cmd.id;
		rr.cmd.timeout_ms = 2000;
		if (ucma_write(RDMA_USER_CM_CMD_RESOLVE_ROUTE, &rr, sizeof(rr), 0))
			die("RESOLVE_ROUTE");
		expect_event(EV_ROUTE_RESOLVED);

		con.cmd.id = ra.cmd.id;
		con.cmd.conn_param.qp_num = steal ? strtoul(argv[6], NULL, 0) : v.qpn;
		con.cmd.conn_param.valid = 1;
		con.cmd.conn_param.responder_resources = 2;
		con.cmd.conn_param.initiator_depth = 8;
		con.cmd.conn_param.private_data_len = 12;
		memcpy(con.cmd.conn_param.private_data, "hello-server", 12);
		if (ucma_write(RDMA_USER_CM_CMD_CONNECT, &con, sizeof(con), 0)) {
			printf("connect: %s\n", strerror(errno));
			return steal ? 0 : 1;
		}
		if (steal) {
			printf("error: connect with a foreign QPN succeeded\n");
			return 1;
		}
		printf("connect: issued\n");
		e = ucma_event();
		if (e.event == EV_REJECTED) {
			printf("rejected-data: %.*s\n", e.param.conn.private_data_len,
			       (char *)e.param.conn.private_data);
			return 0;
		}
		if (e.event != EV_ESTABLISHED) {
			/* The event line above is the result the test checks. */
			printf("connect-result: %u\n", e.event);
			return 0;
		}
		printf("reply-data: %.*s\n", e.param.conn.private_data_len,
		       (char *)e.param.conn.private_data);
		take_and_check(&v, client_bytes, server_bytes);
		disc.cmd.id = ra.cmd.id;
		if (ucma_write(RDMA_USER_CM_CMD_DISCONNECT, &disc, sizeof(disc), 0))
			die("DISCONNECT");
		expect_event(EV_DISCONNECTED);
		printf("done\n");
		return 0;
	}
	return 2;
}
