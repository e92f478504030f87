/*
 * uiw_term_check: provokes an RDMAP Terminate (RFC 5040 §7.1) over any iWARP device with rdma_cm,
 * for the interop system tests (tests/system/interop_terminate.sh, tshark_*.sh).
 *
 *   uiw_term_check server BIND_ADDR PORT [unmap|rdonly]
 *   uiw_term_check client BIND_ADDR SERVER_ADDR PORT write|read|write-valid|write-unmapped
 *
 * The server registers a 4 KiB buffer with remote read and write access, posts two receives
 * ("hello", then one left to be flushed) and accepts one connection, sending its buffer's
 * address, length and rkey as private data. The client then sends a 16-byte "hello" Send and
 * the server answers it with a 16-byte "go" Send (the client speaks first: without an RTR,
 * RFC 5044 §7.1.2 forbids the Responder to send an FPDU before it received one); the client
 * provokes the error only after "go" arrived. This ULP handshake keeps the bad access out of
 * the bytes that follow the client's RTR (RFC 6581) in the same TCP read on the server: a siw
 * responder that waits for an RTR reports ESTABLISHED to iw_cm only when its whole first read
 * went without error (siw_rtr_data_ready, linux 6.1); if the bad access is in that read, siw
 * drops the connection and reports CLOSE for a cm_id iw_cm still holds in CONN_RECV, and iw_cm
 * BUG()s (drivers/infiniband/core/iwcm.c:969, cm_close_handler). RFC 6581 lets the Initiator
 * send right after its RTR, so the handshake is the ULP's choice, not a uiw rule.
 * The client then uses a wrong rkey (the server's rkey XOR 0x5a5a5a00, never the right one):
 *   write: an RDMA Write with the wrong rkey, then a correct RDMA Read of the same buffer. The
 *          server's DDP layer finds the invalid STag (RFC 5041 §7.2, tagged error 0x00) and
 *          sends a Terminate; the Read can never be answered and must complete in error.
 *   read:  an RDMA Read Request with the wrong source STag. The server's RDMAP layer answers
 *          with a Terminate (RFC 5040 Figure 9, remote protection error, invalid STag, M/D/R);
 *          the Read must complete in error.
 *   write-valid: a 4 KiB RDMA Write with the right rkey, then a Read of the same bytes. Against
 *          a server started with "unmap" or "rdonly": it advertises a separate 64 KiB mmap()ed
 *          region registered with remote write and read access, and once "hello" arrived (the
 *          connection is up and the region advertised) it munmap()s the region, or mprotect()s
 *          it read-only, leaving the MR registered. The peer's Write then targets memory the
 *          process can no longer write: the server's provider must end the connection with a
 *          Terminate (its QP in ERR, the receive flushed) and the server process must live;
 *          the client's Read must complete in error.
 *   write-unmapped: a 4 KiB RDMA Write with the right rkey from a 64 KiB mmap()ed region the
 *          client registered and then munmap()ed (the MR still registered), then a Read. The
 *          client's provider must fail the Write (uiw: with CRC it reads the source for the CRC
 *          and sends a Terminate; without, the kernel refuses to send it) and the client
 *          process must live; the Read completes in error and both QPs reach ERR.
 * On devices that report QP states (not siw: its query_qp reads RESET whatever the state, and
 * it flushes receives only once its QP reaches ERR, which may wait for the close) the server
 * asserts that its posted receive was flushed (IBV_WC_WR_FLUSH_ERR) and both sides that their
 * QP reached ERR (ibv_query_qp). The server then waits for the peer's close. Each failure prints
 * "FAIL: <what>" and exits 1; success prints one "ok:" line per check and "PASS".
 */
#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <sys/mman.h>

#include <arpa/inet.h>
#include <netdb.h>
#include <rdma/rdma_cma.h>

#define CHECK(cond, ...)                                                       \
	do {                                                                   \
		if (!(cond)) {                                                 \
			printf("FAIL: ");                                      \
			printf(__VA_ARGS__);                                   \
			printf(" (errno %d %s)\n", errno, strerror(errno));    \
			exit(1);                                               \
		}                                                              \
	} while (0)

#define BUF_LEN 4096
#define WAIT_MS 30000
#define GO_LEN 16 /* length of the "hello" and "go" Sends */
#define TARGET_LEN (64 * 1024) /* the server's region in "unmap" and "rdonly" modes */

/*
 * wr_ids: the client's "hello" Send, receive for "go", Write and Read; the server's receive for
 * "hello", receive left to be flushed, and "go" Send.
 */
enum {
	WR_WRITE = 1,
	WR_READ = 2,
	WR_HELLO_SEND = 40,
	WR_GO_RECV = 50,
	WR_HELLO_RECV = 90,
	WR_SRV_RECV = 100,
	WR_GO_SEND = 200,
};

/* Private data of the accept: the server's buffer (all fields big-endian). */
struct remote_buf {
	uint64_t addr;
	uint32_t rkey;
	uint32_t len;
};

struct conn {
	struct rdma_event_channel *ch;
	struct rdma_cm_id *listen_id, *id;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_mr *mr;
	char *buf;
};

static long now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000L + ts.tv_nsec / 1000000;
}

static void addr_of(const char *host, const char *port, struct sockaddr_storage *ss)
{
	struct addrinfo hints = { .ai_flags = AI_NUMERICHOST }, *ai;
	int rv = getaddrinfo(host, port, &hints, &ai);

	CHECK(rv == 0, "address %s: %s", host, gai_strerror(rv));
	memcpy(ss, ai->ai_addr, ai->ai_addrlen);
	freeaddrinfo(ai);
}

/* Waits for the next rdma_cm event, which must be `want`; returns it (caller acks). */
static struct rdma_cm_event *expect_event(struct conn *c, enum rdma_cm_event_type want)
{
	struct pollfd pfd = { .fd = c->ch->fd, .events = POLLIN };
	struct rdma_cm_event *ev;

	CHECK(poll(&pfd, 1, WAIT_MS) == 1, "no rdma_cm event (want %s)", rdma_event_str(want));
	CHECK(rdma_get_cm_event(c->ch, &ev) == 0, "rdma_get_cm_event");
	CHECK(ev->event == want, "rdma_cm event %s status %d, want %s",
	      rdma_event_str(ev->event), ev->status, rdma_event_str(want));
	return ev;
}

static void setup_qp(struct conn *c, struct rdma_cm_id *id)
{
	struct ibv_qp_init_attr qa = {
		.qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 8, .max_recv_wr = 8, .max_send_sge = 1,
			 .max_recv_sge = 1 },
	};

	c->pd = ibv_alloc_pd(id->verbs);
	CHECK(c->pd, "ibv_alloc_pd");
	c->cq = ibv_create_cq(id->verbs, 16, NULL, NULL, 0);
	CHECK(c->cq, "ibv_create_cq");
	c->buf = calloc(1, BUF_LEN);
	CHECK(c->buf, "calloc");
	c->mr = ibv_reg_mr(c->pd, c->buf, BUF_LEN,
			   IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
				   IBV_ACCESS_REMOTE_READ);
	CHECK(c->mr, "ibv_reg_mr");
	qa.send_cq = qa.recv_cq = c->cq;
	CHECK(rdma_create_qp(id, c->pd, &qa) == 0, "rdma_create_qp");
	printf("ok: QP %u on %s\n", id->qp->qp_num, ibv_get_device_name(id->verbs->device));
}

/* Status + 1 of each completion seen so far, by wr_id (all wr_ids are below 256). */
static int wc_seen[256];

/*
 * Polls until a completion with wr_id `want` has arrived (now or during an earlier wait: the
 * Send and receive queues share the CQ, so their completions may come in either order);
 * returns its status.
 */
static enum ibv_wc_status wait_wc(struct conn *c, uint64_t want)
{
	long deadline = now_ms() + WAIT_MS;
	struct ibv_wc wc;
	int n;

	while (now_ms() < deadline) {
		if (wc_seen[want & 255])
			return wc_seen[want & 255] - 1;
		n = ibv_poll_cq(c->cq, 1, &wc);
		CHECK(n >= 0, "ibv_poll_cq");
		if (n == 0) {
			usleep(1000);
			continue;
		}
		printf("wc: wr_id %llu status %d (%s) opcode %d\n", (unsigned long long)wc.wr_id,
		       wc.status, ibv_wc_status_str(wc.status), wc.opcode);
		wc_seen[wc.wr_id & 255] = wc.status + 1;
	}
	CHECK(0, "no completion for wr_id %llu within %d ms", (unsigned long long)want, WAIT_MS);
	return IBV_WC_SUCCESS;
}

/* True if the device reports QP states: siw's query_qp never fills the state in (RESET). */
static int reports_state(struct conn *c)
{
	struct ibv_qp_init_attr init;
	struct ibv_qp_attr attr;

	CHECK(ibv_query_qp(c->id->qp, &attr, IBV_QP_STATE, &init) == 0, "ibv_query_qp");
	/*
	 * Linux 6.1's siw_query_qp never sets qp_state, and uverbs hands back whatever its
	 * kmalloc'ed ib_qp_attr held: 0 often, 0x6b (107) under slub_debug poisoning.
	 */
	return attr.qp_state != IBV_QPS_RESET && attr.qp_state <= IBV_QPS_UNKNOWN;
}

/* True if the connection runs on a siw device (the interop tests name them siw*). */
static int is_siw(struct conn *c)
{
	return strncmp(ibv_get_device_name(c->id->verbs->device), "siw", 3) == 0;
}

/* The QP must reach ERR (RFC 5040 §6.2: a Terminate, sent or received, ends the stream). */
static void wait_qp_error(struct conn *c)
{
	long deadline = now_ms() + WAIT_MS;
	struct ibv_qp_init_attr init;
	struct ibv_qp_attr attr;

	if (!reports_state(c)) {
		printf("note: %s reports no QP state; not checked\n",
		       ibv_get_device_name(c->id->verbs->device));
		return;
	}
	for (;;) {
		CHECK(ibv_query_qp(c->id->qp, &attr, IBV_QP_STATE, &init) == 0, "ibv_query_qp");
		if (attr.qp_state == IBV_QPS_ERR)
			break;
		CHECK(now_ms() < deadline, "QP state %d, not ERR after %d ms", attr.qp_state,
		      WAIT_MS);
		usleep(10000);
	}
	printf("ok: QP in ERR\n");
}

/* Waits up to 30 s for DISCONNECTED; disconnects ourselves only if it does not come. */
static void wait_disconnected(struct conn *c)
{
	struct pollfd pfd = { .fd = c->ch->fd, .events = POLLIN };
	struct rdma_cm_event *ev;

	while (poll(&pfd, 1, WAIT_MS) == 1) {
		CHECK(rdma_get_cm_event(c->ch, &ev) == 0, "rdma_get_cm_event");
		printf("cm event: %s\n", rdma_event_str(ev->event));
		if (ev->event == RDMA_CM_EVENT_DISCONNECTED) {
			rdma_ack_cm_event(ev);
			return;
		}
		rdma_ack_cm_event(ev);
	}
	printf("note: no DISCONNECTED event; disconnecting\n");
	rdma_disconnect(c->id);
}

/* One signaled work request of `len` bytes from/to c->buf + off (rkey unused by a Send). */
struct rdma_op {
	enum ibv_wr_opcode op;
	uint64_t wr_id, raddr;
	uint32_t rkey, len, off;
};

/* Posts the operations as one list: they are all on the send queue before any of them runs. */
static void post_rdma_list(struct conn *c, const struct rdma_op *ops, int n)
{
	struct ibv_sge sge[2];
	struct ibv_send_wr wr[2], *bad;
	int i;

	CHECK(n >= 1 && n <= 2, "post_rdma_list of %d", n);
	for (i = 0; i < n; i++) {
		sge[i] = (struct ibv_sge){ .addr = (uintptr_t)c->buf + ops[i].off,
					   .length = ops[i].len, .lkey = c->mr->lkey };
		wr[i] = (struct ibv_send_wr){
			.wr_id = ops[i].wr_id, .sg_list = &sge[i], .num_sge = 1,
			.opcode = ops[i].op, .send_flags = IBV_SEND_SIGNALED,
			.wr.rdma = { .remote_addr = ops[i].raddr, .rkey = ops[i].rkey },
			.next = i + 1 < n ? &wr[i + 1] : NULL,
		};
	}
	CHECK(ibv_post_send(c->id->qp, wr, &bad) == 0, "ibv_post_send opcode %d", ops[0].op);
}

static void post_rdma(struct conn *c, enum ibv_wr_opcode op, uint64_t wr_id, uint64_t raddr,
		      uint32_t rkey, uint32_t len, uint32_t off)
{
	struct rdma_op one = { op, wr_id, raddr, rkey, len, off };

	post_rdma_list(c, &one, 1);
}

/*
 * A 4 KiB Write from a registered region that is no longer mapped, then a 64-byte Read into
 * c->buf, in one list (as post_rdma_list, so the Read is queued before the Write fails).
 */
static void post_write_from_unmapped(struct conn *c, uint64_t raddr, uint32_t rkey)
{
	struct ibv_sge sge[2];
	struct ibv_send_wr wr[2], *bad;
	struct ibv_mr *mr;
	char *src;

	src = mmap(NULL, TARGET_LEN, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	CHECK(src != MAP_FAILED, "mmap");
	memset(src, 0x3c, TARGET_LEN);
	mr = ibv_reg_mr(c->pd, src, TARGET_LEN, IBV_ACCESS_LOCAL_WRITE);
	CHECK(mr, "ibv_reg_mr of the source region");
	CHECK(munmap(src, TARGET_LEN) == 0, "munmap");
	printf("ok: source region unmapped, MR 0x%x still registered\n", mr->lkey);
	sge[0] = (struct ibv_sge){ .addr = (uintptr_t)src + 4096, .length = BUF_LEN,
				   .lkey = mr->lkey };
	sge[1] = (struct ibv_sge){ .addr = (uintptr_t)c->buf, .length = 64, .lkey = c->mr->lkey };
	wr[0] = (struct ibv_send_wr){ .wr_id = WR_WRITE, .sg_list = &sge[0], .num_sge = 1,
				      .opcode = IBV_WR_RDMA_WRITE, .send_flags = IBV_SEND_SIGNALED,
				      .wr.rdma = { .remote_addr = raddr, .rkey = rkey },
				      .next = &wr[1] };
	wr[1] = (struct ibv_send_wr){ .wr_id = WR_READ, .sg_list = &sge[1], .num_sge = 1,
				      .opcode = IBV_WR_RDMA_READ, .send_flags = IBV_SEND_SIGNALED,
				      .wr.rdma = { .remote_addr = raddr, .rkey = rkey } };
	CHECK(ibv_post_send(c->id->qp, wr, &bad) == 0, "ibv_post_send of the Write and Read");
}

static int run_server(const char *bind_addr, const char *port, const char *how)
{
	struct conn c = {};
	struct sockaddr_storage ss;
	struct rdma_cm_event *ev;
	struct remote_buf rb;
	struct rdma_conn_param cp = { .responder_resources = 4, .initiator_depth = 4 };
	struct ibv_sge sge, hsge;
	struct ibv_recv_wr rwr = { .wr_id = WR_SRV_RECV, .sg_list = &sge, .num_sge = 1 };
	struct ibv_recv_wr hwr = { .wr_id = WR_HELLO_RECV, .sg_list = &hsge, .num_sge = 1,
				   .next = &rwr }, *bad;
	enum ibv_wc_status st;
	struct ibv_mr *tmr = NULL;
	char *target = NULL;

	CHECK(!how || !strcmp(how, "unmap") || !strcmp(how, "rdonly"),
	      "server mode must be unmap or rdonly, not %s", how);
	c.ch = rdma_create_event_channel();
	CHECK(c.ch, "rdma_create_event_channel");
	CHECK(rdma_create_id(c.ch, &c.listen_id, NULL, RDMA_PS_TCP) == 0, "rdma_create_id");
	addr_of(bind_addr, port, &ss);
	CHECK(rdma_bind_addr(c.listen_id, (struct sockaddr *)&ss) == 0, "rdma_bind_addr");
	CHECK(rdma_listen(c.listen_id, 1) == 0, "rdma_listen");
	printf("listening on %s:%s\n", bind_addr, port);
	fflush(stdout);

	ev = expect_event(&c, RDMA_CM_EVENT_CONNECT_REQUEST);
	c.id = ev->id;
	rdma_ack_cm_event(ev);
	setup_qp(&c, c.id);
	/* "hello" lands in the second half; the receive after it is the one left to be flushed. */
	hsge = (struct ibv_sge){ .addr = (uintptr_t)c.buf + BUF_LEN / 2, .length = GO_LEN,
				 .lkey = c.mr->lkey };
	sge = (struct ibv_sge){ .addr = (uintptr_t)c.buf, .length = BUF_LEN / 2, .lkey = c.mr->lkey };
	CHECK(ibv_post_recv(c.id->qp, &hwr, &bad) == 0, "ibv_post_recv");

	rb.addr = htobe64((uintptr_t)c.buf);
	rb.rkey = htobe32(c.mr->rkey);
	rb.len = htobe32(BUF_LEN);
	if (how) {
		target = mmap(NULL, TARGET_LEN, PROT_READ | PROT_WRITE,
			      MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		CHECK(target != MAP_FAILED, "mmap");
		memset(target, 0x5a, TARGET_LEN);
		tmr = ibv_reg_mr(c.pd, target, TARGET_LEN,
				 IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
					 IBV_ACCESS_REMOTE_READ);
		CHECK(tmr, "ibv_reg_mr of the mmap()ed region");
		rb.addr = htobe64((uintptr_t)target);
		rb.rkey = htobe32(tmr->rkey);
		rb.len = htobe32(TARGET_LEN);
	}
	cp.private_data = &rb;
	cp.private_data_len = sizeof(rb);
	CHECK(rdma_accept(c.id, &cp) == 0, "rdma_accept");
	ev = expect_event(&c, RDMA_CM_EVENT_ESTABLISHED);
	rdma_ack_cm_event(ev);
	printf("ok: established\n");
	fflush(stdout);
	st = wait_wc(&c, WR_HELLO_RECV);
	CHECK(st == IBV_WC_SUCCESS, "the client's hello Send arrived with status %d", st);
	if (how && !strcmp(how, "unmap")) {
		CHECK(munmap(target, TARGET_LEN) == 0, "munmap");
		printf("ok: advertised region unmapped, MR 0x%x still registered\n", tmr->rkey);
	} else if (how) {
		CHECK(mprotect(target, TARGET_LEN, PROT_READ) == 0, "mprotect");
		printf("ok: advertised region made read-only, MR 0x%x still registered\n",
		       tmr->rkey);
	}
	/* "go": only now may the client provoke the error (see the top of this file). */
	post_rdma(&c, IBV_WR_SEND, WR_GO_SEND, 0, 0, GO_LEN, BUF_LEN / 2);
	printf("ok: hello received, go sent\n");

	/*
	 * The peer's bad access makes this side send the Terminate and enter ERR; the receive is
	 * flushed once the QP is in ERR. Checked of uiw only: siw's Terminate is checked on the
	 * wire, and Linux 6.12's siw leaves its QP in RTS after terminating over a bad Read
	 * Request (siw_qp_sq_process fails, siw_qp_cm_drop closes, the state changes only at
	 * destroy), where 6.1's siw_query_qp reports no state at all.
	 */
	if (is_siw(&c)) {
		printf("note: siw's own QP state after its Terminate is not checked\n");
	} else if (reports_state(&c)) {
		CHECK(wait_wc(&c, WR_SRV_RECV) == IBV_WC_WR_FLUSH_ERR, "posted receive not flushed");
		printf("ok: receive flushed\n");
		wait_qp_error(&c);
	} else {
		printf("note: %s reports no QP state; not checked\n",
		       ibv_get_device_name(c.id->verbs->device));
	}
	/*
	 * Let the peer's close arrive before leaving, so that the connection ends by the close
	 * that follows the Terminate (RFC 5040 §6.2) and not by our own disconnect racing it.
	 */
	wait_disconnected(&c);
	if (tmr)
		CHECK(ibv_dereg_mr(tmr) == 0, "ibv_dereg_mr of the advertised region");
	printf("PASS\n");
	return 0;
}

static int run_client(const char *bind_addr, const char *srv, const char *port, const char *mode)
{
	struct conn c = {};
	struct sockaddr_storage src, dst;
	struct rdma_cm_event *ev;
	struct remote_buf rb;
	struct rdma_conn_param cp = { .responder_resources = 4, .initiator_depth = 4,
				      .retry_count = 7 };
	struct ibv_sge sge;
	struct ibv_recv_wr rwr = { .wr_id = WR_GO_RECV, .sg_list = &sge, .num_sge = 1 }, *bad;
	uint64_t raddr;
	uint32_t rkey, bad_rkey;
	enum ibv_wc_status st;
	int read_mode = !strcmp(mode, "read"), valid = !strcmp(mode, "write-valid");
	int unmapped = !strcmp(mode, "write-unmapped");

	CHECK(read_mode || valid || unmapped || !strcmp(mode, "write"),
	      "mode must be write, read, write-valid or write-unmapped, not %s", mode);
	c.ch = rdma_create_event_channel();
	CHECK(c.ch, "rdma_create_event_channel");
	CHECK(rdma_create_id(c.ch, &c.id, NULL, RDMA_PS_TCP) == 0, "rdma_create_id");
	addr_of(bind_addr, "0", &src);
	addr_of(srv, port, &dst);
	CHECK(rdma_resolve_addr(c.id, (struct sockaddr *)&src, (struct sockaddr *)&dst, 5000) == 0,
	      "rdma_resolve_addr");
	rdma_ack_cm_event(expect_event(&c, RDMA_CM_EVENT_ADDR_RESOLVED));
	CHECK(rdma_resolve_route(c.id, 5000) == 0, "rdma_resolve_route");
	rdma_ack_cm_event(expect_event(&c, RDMA_CM_EVENT_ROUTE_RESOLVED));
	setup_qp(&c, c.id);
	sge = (struct ibv_sge){ .addr = (uintptr_t)c.buf + BUF_LEN / 2, .length = GO_LEN,
				.lkey = c.mr->lkey };
	CHECK(ibv_post_recv(c.id->qp, &rwr, &bad) == 0, "ibv_post_recv");
	CHECK(rdma_connect(c.id, &cp) == 0, "rdma_connect");
	ev = expect_event(&c, RDMA_CM_EVENT_ESTABLISHED);
	CHECK(ev->param.conn.private_data_len >= sizeof(rb), "private data %u bytes, want %zu",
	      ev->param.conn.private_data_len, sizeof(rb));
	memcpy(&rb, ev->param.conn.private_data, sizeof(rb));
	rdma_ack_cm_event(ev);
	raddr = be64toh(rb.addr);
	rkey = be32toh(rb.rkey);
	bad_rkey = rkey ^ 0x5a5a5a00;
	printf("ok: established; server buffer 0x%llx rkey 0x%x, using rkey 0x%x\n",
	       (unsigned long long)raddr, rkey, bad_rkey);
	fflush(stdout);
	post_rdma(&c, IBV_WR_SEND, WR_HELLO_SEND, 0, 0, GO_LEN, 0);
	st = wait_wc(&c, WR_GO_RECV);
	CHECK(st == IBV_WC_SUCCESS, "the server's go Send arrived with status %d", st);
	printf("ok: go received\n");

	/*
	 * The Write and the Read go in one list, so the Read is queued before the peer's
	 * Terminate can end the stream. Posted separately under load, a siw client's Read (Linux
	 * 6.1) was not yet on its queue when the Terminate made siw flush it, and never completed.
	 */
	if (read_mode) {
		post_rdma(&c, IBV_WR_RDMA_READ, WR_READ, raddr, bad_rkey, 64, 0);
	} else if (unmapped) {
		post_write_from_unmapped(&c, raddr, rkey);
		st = wait_wc(&c, WR_WRITE);
		CHECK(st != IBV_WC_SUCCESS, "the Write from an unmapped source succeeded");
		printf("ok: Write from an unmapped source completed in error (%s)\n",
		       ibv_wc_status_str(st));
	} else {
		struct rdma_op ops[2] = {
			{ IBV_WR_RDMA_WRITE, WR_WRITE, raddr, valid ? rkey : bad_rkey,
			  valid ? BUF_LEN : 64, 0 },
			{ IBV_WR_RDMA_READ, WR_READ, raddr, rkey, 64, 0 },
		};

		post_rdma_list(&c, ops, 2);
	}
	st = wait_wc(&c, WR_READ);
	CHECK(st != IBV_WC_SUCCESS, "the RDMA Read completed successfully");
	printf("ok: RDMA Read completed in error (%s)\n", ibv_wc_status_str(st));
	wait_qp_error(&c);
	printf("PASS\n");
	return 0;
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	if ((argc == 4 || argc == 5) && !strcmp(argv[1], "server"))
		return run_server(argv[2], argv[3], argc == 5 ? argv[4] : NULL);
	if (argc == 6 && !strcmp(argv[1], "client"))
		return run_client(argv[2], argv[3], argv[4], argv[5]);
	fprintf(stderr, "usage: %s server BIND_ADDR PORT [unmap|rdonly]\n"
			"       %s client BIND_ADDR SERVER_ADDR PORT "
			"write|read|write-valid|write-unmapped\n",
		argv[0], argv[0]);
	return 2;
}
