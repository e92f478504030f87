/*
 * uiw_cm_check: rdma_cm failure and teardown paths over uiw (or any iWARP device), for the
 * system tests (tests/system/uiw_cm_*.sh, uiw_kill.sh). Plain librdmacm + libibverbs.
 *
 *   uiw_cm_check reject-server ADDR PORT TEXT        reject the first request with TEXT as
 *                                                    private data
 *   uiw_cm_check reject-client DST SRC PORT TEXT     expect RDMA_CM_EVENT_REJECTED carrying TEXT
 *   uiw_cm_check no-listener DST SRC PORT            expect an error event (no listener on PORT)
 *                                                    within 30 s, never ESTABLISHED
 *   uiw_cm_check server ADDR PORT ACTION             accept one connection, then ACTION
 *   uiw_cm_check client DST SRC PORT ACTION          connect, then ACTION
 *
 * ACTION, after one verified Send each way on the new connection:
 *   disconnect   rdma_disconnect(); expect DISCONNECTED and the remaining receives flushed
 *   wait-close   wait for the peer's disconnect: DISCONNECTED, and every receive still posted
 *                completes with IBV_WC_WR_FLUSH_ERR without any verb of ours
 *   write-stream RDMA Write 64 KiB messages into the peer's buffer (address and rkey come in
 *                the connection's private data) until the peer goes away: expect an error
 *                completion or DISCONNECTED, then exits 0
 *   idle         wait (receives posted) until the peer goes away: DISCONNECTED or a flushed
 *                receive, then exits 0
 *   write-once   RDMA Write the whole target once (WINDOW x 64 KiB, a known pattern), then a
 *                Send; exits 0 whether or not the connection survived it (prints what completed)
 *   ext-refused  post each RFC 7306 operation (FetchAdd, CmpSwap, Write and Send with
 *                Immediate): each must be refused with EOPNOTSUPP (a peer that did not agree
 *                to RFC 7306, siw); then one more verified Send each way (nothing reached the
 *                peer, the connection goes on) and rdma_disconnect()
 *   ext-peer     the other side of ext-refused: one more Send each way, then wait-close
 *   last-send    wait SEND_DELAY seconds (default 0), post one more Send and see it complete,
 *                rdma_disconnect() and destroy everything at once, as applications do (with
 *                CLOSE_WAIT set: wait for DISCONNECTED and the receives flushed first)
 *   last-recv    the other side of last-send: that Send must arrive intact (within WAIT_SECS,
 *                60 s by default), then DISCONNECTED and the remaining receives flushed
 *   stream-recv  last-recv while RDMA Writing into the peer's target as write-stream does, so
 *                that its transmit holds its socket when the last Send and the FIN arrive
 *   verify       wait for that Send, or for a flushed receive; then count the target's
 *                octets: the pattern, untouched (zero), or foreign (neither: placed data the
 *                writer never sent); prints "target: correct C untouched U foreign F", then
 *                disconnects and exits 0
 * Every wait is bounded (WAIT_SECS, 60 s by default for the stream/idle actions). Prints
 * progress lines and "PASS" at the end; failures print "FAIL: <what>" and exit 1.
 */
#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#define CHECK(cond, ...)                                                    \
	do {                                                                \
		if (!(cond)) {                                              \
			printf("FAIL: ");                                   \
			printf(__VA_ARGS__);                                \
			printf(" (errno %d %s)\n", errno, strerror(errno)); \
			exit(1);                                            \
		}                                                           \
	} while (0)

enum { NRECV = 8, MSG = 64, CHUNK = 64 * 1024, WINDOW = 8, BUF = WINDOW * CHUNK };

/* What each side tells the other in its connection private data: where it may Write. */
struct wire_target {
	uint64_t addr;
	uint32_t rkey;
	uint32_t magic;
};
#define TARGET_MAGIC 0x75697763u /* "uiwc" */

struct conn {
	struct rdma_event_channel *ch;
	struct rdma_cm_id *listen_id, *id;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_mr *mr;
	char *buf; /* NRECV x MSG receive slots, one send slot, then BUF bytes of Write target */
	struct wire_target peer;
	int recvs_posted; /* receives posted and not completed yet */
	int disconnected; /* DISCONNECTED seen */
	const char *side;
};

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static int wait_secs(int dflt)
{
	const char *s = getenv("WAIT_SECS");

	return s ? atoi(s) : dflt;
}

/* The next CM event within secs, or NULL on timeout. The caller acks it. */
static struct rdma_cm_event *next_event(struct conn *c, int secs)
{
	struct pollfd p = {.fd = c->ch->fd, .events = POLLIN};
	struct rdma_cm_event *ev;

	if (poll(&p, 1, secs * 1000) <= 0)
		return NULL;
	CHECK(!rdma_get_cm_event(c->ch, &ev), "rdma_get_cm_event");
	printf("%s: event %s status %d\n", c->side, rdma_event_str(ev->event), ev->status);
	fflush(stdout);
	return ev;
}

/* Waits for event `want`; anything else fails the check. */
static void expect_event(struct conn *c, enum rdma_cm_event_type want, int secs,
			 struct rdma_cm_event **keep)
{
	struct rdma_cm_event *ev = next_event(c, secs);

	CHECK(ev, "%s: no %s within %d s", c->side, rdma_event_str(want), secs);
	CHECK(ev->event == want, "%s: got %s, want %s (status %d)", c->side,
	      rdma_event_str(ev->event), rdma_event_str(want), ev->status);
	if (keep)
		*keep = ev;
	else
		rdma_ack_cm_event(ev);
}

static void set_addr(struct sockaddr_storage *ss, const char *addr, const char *port)
{
	struct rdma_addrinfo hints = {.ai_port_space = RDMA_PS_TCP}, *res;

	if (!port)
		hints.ai_flags = RAI_PASSIVE;
	CHECK(!rdma_getaddrinfo(addr, port, &hints, &res), "rdma_getaddrinfo(%s)", addr);
	memcpy(ss, port ? res->ai_dst_addr : res->ai_src_addr,
	       port ? res->ai_dst_len : res->ai_src_len);
	rdma_freeaddrinfo(res);
}

static void post_recv(struct conn *c, int slot)
{
	struct ibv_sge sge = {(uintptr_t)(c->buf + slot * MSG), MSG, c->mr->lkey};
	struct ibv_recv_wr wr = {.wr_id = slot, .sg_list = &sge, .num_sge = 1}, *bad;

	CHECK(!ibv_post_recv(c->id->qp, &wr, &bad), "ibv_post_recv");
	c->recvs_posted++;
}

/* PD, CQ, MR and QP on c->id, with NRECV receives posted. */
static void setup_qp(struct conn *c)
{
	struct ibv_qp_init_attr qa = {
		.qp_type = IBV_QPT_RC,
		.cap = {.max_send_wr = 2 * WINDOW, .max_recv_wr = NRECV, .max_send_sge = 1,
			.max_recv_sge = 1},
	};

	c->pd = ibv_alloc_pd(c->id->verbs);
	CHECK(c->pd, "ibv_alloc_pd");
	c->cq = ibv_create_cq(c->id->verbs, 4 * WINDOW + NRECV, NULL, NULL, 0);
	CHECK(c->cq, "ibv_create_cq");
	c->buf = calloc(1, (NRECV + 1) * MSG + BUF);
	CHECK(c->buf, "calloc");
	c->mr = ibv_reg_mr(c->pd, c->buf, (NRECV + 1) * MSG + BUF,
			   IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	CHECK(c->mr, "ibv_reg_mr");
	qa.send_cq = qa.recv_cq = c->cq;
	CHECK(!rdma_create_qp(c->id, c->pd, &qa), "rdma_create_qp");
	for (int i = 0; i < NRECV; i++)
		post_recv(c, i);
}

static struct wire_target my_target(struct conn *c)
{
	return (struct wire_target){(uintptr_t)(c->buf + (NRECV + 1) * MSG), c->mr->rkey,
				    TARGET_MAGIC};
}

static void take_target(struct conn *c, const void *pd, uint8_t len)
{
	CHECK(pd && len >= sizeof(c->peer), "%s: private data of %u bytes, want >= %zu", c->side,
	      len, sizeof(c->peer));
	memcpy(&c->peer, pd, sizeof(c->peer));
	CHECK(c->peer.magic == TARGET_MAGIC, "%s: private data is not the peer's target",
	      c->side);
}

static struct conn *new_conn(const char *side)
{
	struct conn *c = calloc(1, sizeof(*c));

	CHECK(c, "calloc");
	c->side = side;
	c->ch = rdma_create_event_channel();
	CHECK(c->ch, "rdma_create_event_channel");
	return c;
}

static void listen_on(struct conn *c, const char *addr, const char *port)
{
	struct sockaddr_storage ss;

	set_addr(&ss, addr, NULL);
	((struct sockaddr_in *)&ss)->sin_port = htons(atoi(port)); /* same offset for in6 */
	CHECK(!rdma_create_id(c->ch, &c->listen_id, c, RDMA_PS_TCP), "rdma_create_id");
	CHECK(!rdma_bind_addr(c->listen_id, (struct sockaddr *)&ss), "rdma_bind_addr(%s)", addr);
	CHECK(!rdma_listen(c->listen_id, 4), "rdma_listen");
	printf("%s: listening on %s:%s\n", c->side, addr, port);
	fflush(stdout);
}

/* Resolves DST from SRC; c->id is then ready for rdma_connect. */
static void resolve(struct conn *c, const char *dst, const char *src, const char *port)
{
	struct sockaddr_storage d, s;

	set_addr(&d, dst, port);
	set_addr(&s, src, NULL);
	CHECK(!rdma_create_id(c->ch, &c->id, c, RDMA_PS_TCP), "rdma_create_id");
	CHECK(!rdma_resolve_addr(c->id, (struct sockaddr *)&s, (struct sockaddr *)&d, 5000),
	      "rdma_resolve_addr");
	expect_event(c, RDMA_CM_EVENT_ADDR_RESOLVED, 30, NULL);
	CHECK(!rdma_resolve_route(c->id, 5000), "rdma_resolve_route");
	expect_event(c, RDMA_CM_EVENT_ROUTE_RESOLVED, 30, NULL);
}

static void connect_to(struct conn *c, const void *pd, uint8_t pd_len)
{
	struct rdma_conn_param p = {.private_data = pd, .private_data_len = pd_len,
				    .initiator_depth = 1, .responder_resources = 1};

	CHECK(!rdma_connect(c->id, &p), "rdma_connect");
}

static int reject_server(const char *addr, const char *port, const char *text)
{
	struct conn *c = new_conn("server");
	struct rdma_cm_event *ev;

	listen_on(c, addr, port);
	expect_event(c, RDMA_CM_EVENT_CONNECT_REQUEST, 60, &ev);
	CHECK(!rdma_reject(ev->id, text, strlen(text) + 1), "rdma_reject");
	printf("server: rejected with \"%s\"\n", text);
	rdma_ack_cm_event(ev);
	/* The rejected request's id goes away with the channel; nothing else may arrive. */
	ev = next_event(c, 2);
	CHECK(!ev, "server: unexpected event after the reject");
	rdma_destroy_id(c->listen_id);
	rdma_destroy_event_channel(c->ch);
	printf("PASS\n");
	return 0;
}

static int reject_client(const char *dst, const char *src, const char *port, const char *text)
{
	struct conn *c = new_conn("client");
	struct rdma_cm_event *ev;
	const double t0 = now_s();

	resolve(c, dst, src, port);
	setup_qp(c);
	connect_to(c, "hello", 6);
	expect_event(c, RDMA_CM_EVENT_REJECTED, 30, &ev);
	printf("client: rejected after %.2f s, status %d, %u bytes of private data\n",
	       now_s() - t0, ev->status, ev->param.conn.private_data_len);
	CHECK(ev->param.conn.private_data &&
		      ev->param.conn.private_data_len >= strlen(text) + 1 &&
		      !memcmp(ev->param.conn.private_data, text, strlen(text) + 1),
	      "client: the reject's private data is not \"%s\"", text);
	printf("client: private data \"%s\"\n", (const char *)ev->param.conn.private_data);
	rdma_ack_cm_event(ev);
	rdma_destroy_qp(c->id);
	rdma_destroy_id(c->id);
	printf("PASS\n");
	return 0;
}

static int no_listener(const char *dst, const char *src, const char *port)
{
	struct conn *c = new_conn("client");
	struct rdma_cm_event *ev;
	const double t0 = now_s();

	resolve(c, dst, src, port);
	setup_qp(c);
	connect_to(c, NULL, 0);
	ev = next_event(c, 30);
	CHECK(ev, "client: no event within 30 s of connecting to a port without listener");
	CHECK(ev->event == RDMA_CM_EVENT_REJECTED || ev->event == RDMA_CM_EVENT_UNREACHABLE ||
		      ev->event == RDMA_CM_EVENT_CONNECT_ERROR,
	      "client: %s instead of an error event", rdma_event_str(ev->event));
	printf("client: %s (status %d) after %.2f s\n", rdma_event_str(ev->event), ev->status,
	       now_s() - t0);
	rdma_ack_cm_event(ev);
	/* The QP is still usable for destruction, and no further event is pending. */
	rdma_destroy_qp(c->id);
	rdma_destroy_id(c->id);
	printf("PASS\n");
	return 0;
}

/* Posts one signaled Send of TEXT (MSG octets) from the send slot after the receive slots. */
static void post_text(struct conn *c, const char *text, uint64_t wr_id)
{
	char *out = c->buf + NRECV * MSG;
	struct ibv_sge sge = {(uintptr_t)out, MSG, c->mr->lkey};
	struct ibv_send_wr wr = {.wr_id = wr_id, .sg_list = &sge, .num_sge = 1,
				 .opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED},
			   *bad;

	snprintf(out, MSG, "%s", text);
	CHECK(!ibv_post_send(c->id->qp, &wr, &bad), "ibv_post_send");
}

/* Posts one Send of TEXT and waits up to 30 s for its completion. */
static void send_text(struct conn *c, const char *text)
{
	const double end = now_s() + 30;
	struct ibv_wc wc;
	int n = 0;

	post_text(c, text, 1001);
	while (!n && now_s() < end) {
		n = ibv_poll_cq(c->cq, 1, &wc);
		CHECK(n >= 0, "ibv_poll_cq");
	}
	CHECK(n, "%s: no completion of the Send in 30 s", c->side);
	CHECK(wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_SEND && wc.wr_id == 1001,
	      "%s: the Send completed with %s (opcode %d)", c->side, ibv_wc_status_str(wc.status),
	      wc.opcode);
}

/* Waits up to secs for the next receive: it must succeed and carry WANT. */
static void recv_text(struct conn *c, const char *want, int secs)
{
	const double t0 = now_s();
	struct ibv_wc wc;
	int n = 0;

	while (!n && now_s() < t0 + secs) {
		n = ibv_poll_cq(c->cq, 1, &wc);
		CHECK(n >= 0, "ibv_poll_cq");
		if (!n)
			usleep(1000);
	}
	CHECK(n, "%s: nothing received in %d s", c->side, secs);
	CHECK(wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_RECV && wc.byte_len == MSG,
	      "%s: receive completed with %s (opcode %d, %u octets), not the peer's Send",
	      c->side, ibv_wc_status_str(wc.status), wc.opcode, wc.byte_len);
	CHECK(!strcmp(c->buf + wc.wr_id * MSG, want), "%s: received \"%.*s\"", c->side, MSG,
	      c->buf + wc.wr_id * MSG);
	c->recvs_posted--;
	printf("%s: received \"%s\" after %.2f s\n", c->side, want, now_s() - t0);
	fflush(stdout);
}

/* One Send each way, data verified: proves the connection carries traffic. */
static void exchange(struct conn *c)
{
	char text[MSG], want[MSG];
	int sent = 0, got = 0;
	const double end = now_s() + 30;

	snprintf(text, MSG, "uiw_cm_check from the %s", c->side);
	snprintf(want, MSG, "uiw_cm_check from the %s",
		 strcmp(c->side, "server") ? "server" : "client");
	post_text(c, text, 1000);
	while ((!sent || !got) && now_s() < end) {
		struct ibv_wc wc;
		int n = ibv_poll_cq(c->cq, 1, &wc);

		CHECK(n >= 0, "ibv_poll_cq");
		if (!n)
			continue;
		CHECK(wc.status == IBV_WC_SUCCESS,
		      "%s: exchange completion %s (opcode %d, wr_id %lu; sent %d, received %d)",
		      c->side, ibv_wc_status_str(wc.status), wc.opcode, (unsigned long)wc.wr_id,
		      sent, got);
		if (wc.opcode == IBV_WC_SEND) {
			sent = 1;
		} else {
			CHECK(wc.opcode == IBV_WC_RECV && wc.byte_len == MSG, "recv opcode %d len %u",
			      wc.opcode, wc.byte_len);
			CHECK(!strcmp(c->buf + wc.wr_id * MSG, want), "%s: received \"%.*s\"",
			      c->side, MSG, c->buf + wc.wr_id * MSG);
			c->recvs_posted--;
			got = 1;
		}
	}
	CHECK(sent && got, "%s: exchange did not complete in 30 s (sent %d, received %d)",
	      c->side, sent, got);
	printf("%s: exchanged one verified Send each way\n", c->side);
	fflush(stdout);
}

/* Collects completions until every receive still posted has flushed (bounded). */
static void expect_flushed_recvs(struct conn *c, int secs)
{
	const double end = now_s() + secs;
	int flushed = 0, want = c->recvs_posted;

	while (c->recvs_posted > 0 && now_s() < end) {
		struct ibv_wc wc;
		int n = ibv_poll_cq(c->cq, 1, &wc);

		CHECK(n >= 0, "ibv_poll_cq");
		if (!n) {
			usleep(1000);
			continue;
		}
		if (wc.wr_id < NRECV) {
			CHECK(wc.status == IBV_WC_WR_FLUSH_ERR, "%s: receive %lu completed with %s",
			      c->side, (unsigned long)wc.wr_id, ibv_wc_status_str(wc.status));
			c->recvs_posted--;
			flushed++;
		}
	}
	CHECK(!c->recvs_posted, "%s: %d of %d receives flushed within %d s", c->side, flushed,
	      want, secs);
	printf("%s: all %d posted receives flushed (IBV_WC_WR_FLUSH_ERR)\n", c->side, flushed);
}

static void wait_disconnected(struct conn *c, int secs)
{
	const double t0 = now_s();

	if (c->disconnected)
		return;
	expect_event(c, RDMA_CM_EVENT_DISCONNECTED, secs, NULL);
	c->disconnected = 1;
	printf("%s: DISCONNECTED after %.2f s\n", c->side, now_s() - t0);
	fflush(stdout);
}

/* Non-blocking: notes a DISCONNECTED event if one is there. */
static void poll_events(struct conn *c)
{
	struct rdma_cm_event *ev = next_event(c, 0);

	if (!ev)
		return;
	CHECK(ev->event == RDMA_CM_EVENT_DISCONNECTED, "%s: unexpected %s", c->side,
	      rdma_event_str(ev->event));
	c->disconnected = 1;
	rdma_ack_cm_event(ev);
}

/* The writer's pattern for target offset i (write_stream and write_once): never zero. */
static char pattern_at(int i)
{
	return (char)(i * 7 % 255 + 1);
}

/*
 * Writes CHUNK-byte RDMA Writes into the peer's target, WINDOW outstanding, until the peer
 * goes away: an error completion or DISCONNECTED. Returns once that happened. With WANT, it
 * ends instead when a Send carrying WANT arrives; any other receive completion fails.
 */
static void write_stream(struct conn *c, int secs, const char *want)
{
	const double end = now_s() + secs;
	char *src = c->buf + (NRECV + 1) * MSG;
	unsigned long posted = 0, done = 0;
	int outstanding = 0, error = 0, got = 0;

	for (int i = 0; i < BUF; i++)
		src[i] = pattern_at(i);
	while ((want ? !got : !error && !c->disconnected) && now_s() < end) {
		struct ibv_wc wc[8];
		int n;

		while (!error && !got && outstanding < WINDOW) {
			const int slot = posted % WINDOW;
			struct ibv_sge sge = {(uintptr_t)(src + slot * CHUNK), CHUNK, c->mr->lkey};
			struct ibv_send_wr wr = {.wr_id = 2000 + posted, .sg_list = &sge,
						 .num_sge = 1, .opcode = IBV_WR_RDMA_WRITE,
						 .send_flags = IBV_SEND_SIGNALED},
					   *bad;

			wr.wr.rdma.remote_addr = c->peer.addr + slot * CHUNK;
			wr.wr.rdma.rkey = c->peer.rkey;
			if (ibv_post_send(c->id->qp, &wr, &bad)) {
				printf("%s: ibv_post_send refused (errno %d): the QP is down\n",
				       c->side, errno);
				error = 1;
				break;
			}
			posted++;
			outstanding++;
		}
		n = ibv_poll_cq(c->cq, 8, wc);
		CHECK(n >= 0, "ibv_poll_cq");
		for (int i = 0; i < n; i++) {
			if (wc[i].wr_id < NRECV) {
				c->recvs_posted--;
				CHECK(want || wc[i].status != IBV_WC_SUCCESS,
				      "%s: unexpected receive", c->side);
				if (!want)
					continue;
				/* The receives still posted flush once the peer closed. */
				if (got) {
					CHECK(wc[i].status == IBV_WC_WR_FLUSH_ERR,
					      "%s: receive completed with %s after the last Send",
					      c->side, ibv_wc_status_str(wc[i].status));
					continue;
				}
				CHECK(wc[i].status == IBV_WC_SUCCESS && wc[i].byte_len == MSG &&
					      !strcmp(c->buf + wc[i].wr_id * MSG, want),
				      "%s: receive completed with %s (%u octets \"%.*s\") after %lu writes, not the peer's last Send",
				      c->side, ibv_wc_status_str(wc[i].status), wc[i].byte_len, MSG,
				      c->buf + wc[i].wr_id * MSG, done);
				printf("%s: received \"%s\" while writing, after %lu writes\n",
				       c->side, want, done);
				got = 1;
				continue;
			}
			outstanding--;
			if (wc[i].status != IBV_WC_SUCCESS) {
				if (!error)
					printf("%s: write completed with %s after %lu writes\n",
					       c->side, ibv_wc_status_str(wc[i].status), done);
				error = 1;
				continue;
			}
			if (++done % 200 == 0) {
				printf("%s: streaming, %lu writes done\n", c->side, done);
				fflush(stdout);
			}
		}
		if (!n)
			poll_events(c);
	}
	if (want) {
		CHECK(got, "%s: no Send from the peer within %d s (%lu writes done)", c->side, secs,
		      done);
		return;
	}
	CHECK(error || c->disconnected, "%s: the peer did not go away within %d s", c->side, secs);
	printf("%s: peer gone after %lu writes (%s)\n", c->side, done,
	       error ? "error completion" : "DISCONNECTED");
}

/* The next completion, noting a DISCONNECTED meanwhile; 0 once the deadline passed. */
static int next_wc(struct conn *c, struct ibv_wc *wc, double end)
{
	while (now_s() < end) {
		int n = ibv_poll_cq(c->cq, 1, wc);

		CHECK(n >= 0, "ibv_poll_cq");
		if (n)
			return 1;
		poll_events(c);
		usleep(1000);
	}
	return 0;
}

/* write-once: the target once over, then a Send; reports what completed. */
static void write_once(struct conn *c)
{
	char *src = c->buf + (NRECV + 1) * MSG;
	char *out = c->buf + NRECV * MSG;
	const double end = now_s() + 60;
	int writes_ok = 0, send_done = 0, failed = 0, pending = 0;
	struct ibv_send_wr *bad;

	for (int i = 0; i < BUF; i++)
		src[i] = pattern_at(i);
	for (int slot = 0; slot < WINDOW; slot++) {
		struct ibv_sge sge = {(uintptr_t)(src + slot * CHUNK), CHUNK, c->mr->lkey};
		struct ibv_send_wr wr = {.wr_id = 2000 + slot, .sg_list = &sge, .num_sge = 1,
					 .opcode = IBV_WR_RDMA_WRITE,
					 .send_flags = IBV_SEND_SIGNALED};

		wr.wr.rdma.remote_addr = c->peer.addr + slot * CHUNK;
		wr.wr.rdma.rkey = c->peer.rkey;
		CHECK(!ibv_post_send(c->id->qp, &wr, &bad), "ibv_post_send(write)");
		pending++;
	}
	{
		struct ibv_sge sge = {(uintptr_t)out, MSG, c->mr->lkey};
		struct ibv_send_wr wr = {.wr_id = 3000, .sg_list = &sge, .num_sge = 1,
					 .opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED};

		snprintf(out, MSG, "written");
		CHECK(!ibv_post_send(c->id->qp, &wr, &bad), "ibv_post_send(send)");
		pending++;
	}
	while (pending) {
		struct ibv_wc wc;

		if (!next_wc(c, &wc, end))
			break;
		if (wc.wr_id < NRECV) {
			c->recvs_posted--;
			continue;
		}
		pending--;
		if (wc.status != IBV_WC_SUCCESS)
			failed++;
		else if (wc.wr_id == 3000)
			send_done = 1;
		else
			writes_ok++;
	}
	CHECK(!pending, "%s: %d work requests did not complete in 60 s", c->side, pending);
	printf("%s: %d of %d writes and %d send completed, %d in error\n", c->side, writes_ok,
	       WINDOW, send_done, failed);
	fflush(stdout);
}

/*
 * verify: the writer's Send, or the connection's end; then the target's octets counted. The
 * end is a receive completing in error (flushed), not DISCONNECTED: a writer that disconnects
 * right after its Send may be seen disconnected before the Send's completion is polled.
 */
static void verify_target(struct conn *c)
{
	const char *t = c->buf + (NRECV + 1) * MSG;
	const double end = now_s() + 60;
	int got = 0, gone = 0, correct = 0, untouched = 0, foreign = 0, first = -1;

	while (!got && !gone) {
		struct ibv_wc wc;

		if (!next_wc(c, &wc, end))
			break;
		if (wc.wr_id < NRECV) {
			c->recvs_posted--;
			if (wc.status == IBV_WC_SUCCESS)
				got = 1;
			else
				gone = 1;
		}
	}
	CHECK(got || gone, "%s: neither the writer's Send nor an error within 60 s", c->side);
	printf("%s: %s\n", c->side, got ? "the writer's Send arrived" : "the connection ended");
	for (int i = 0; i < BUF; i++) {
		if (t[i] == pattern_at(i)) {
			correct++;
		} else if (!t[i]) {
			untouched++;
		} else {
			foreign++;
			if (first < 0)
				first = i;
		}
	}
	printf("%s: target: correct %d untouched %d foreign %d", c->side, correct, untouched,
	       foreign);
	if (first >= 0)
		printf(" (first at %d: 0x%02x, written 0x%02x)", first, (uint8_t)t[first],
		       (uint8_t)pattern_at(first));
	printf("\n");
	fflush(stdout);
	rdma_disconnect(c->id);
}

static void post_refused_extensions(struct conn *c)
{
	static const enum ibv_wr_opcode ops[] = {
		IBV_WR_ATOMIC_FETCH_AND_ADD, IBV_WR_ATOMIC_CMP_AND_SWP,
		IBV_WR_RDMA_WRITE_WITH_IMM, IBV_WR_SEND_WITH_IMM};
	struct ibv_sge sge = {(uintptr_t)(c->buf + NRECV * MSG), 8, c->mr->lkey};

	for (size_t i = 0; i < sizeof(ops) / sizeof(ops[0]); i++) {
		struct ibv_send_wr wr = {.wr_id = 2000 + i, .sg_list = &sge, .num_sge = 1,
					 .opcode = ops[i], .send_flags = IBV_SEND_SIGNALED},
				   *bad = NULL;
		int rc;

		wr.wr.atomic.remote_addr = 0x1000;
		wr.wr.atomic.rkey = 0x1234;
		rc = ibv_post_send(c->id->qp, &wr, &bad);
		CHECK(rc == EOPNOTSUPP && bad == &wr, "%s: RFC 7306 opcode %d posted: %d (%s)",
		      c->side, ops[i], rc, strerror(rc));
	}
	printf("%s: 4 RFC 7306 work requests refused with EOPNOTSUPP\n", c->side);
	fflush(stdout);
}

static int run_action(struct conn *c, const char *action)
{
	exchange(c);
	if (!strcmp(action, "disconnect")) {
		CHECK(!rdma_disconnect(c->id), "rdma_disconnect");
		printf("%s: rdma_disconnect done\n", c->side);
		wait_disconnected(c, 30);
		expect_flushed_recvs(c, 30);
	} else if (!strcmp(action, "wait-close")) {
		wait_disconnected(c, 60);
		expect_flushed_recvs(c, 30);
		rdma_disconnect(c->id); /* what applications do; the QP is down already */
	} else if (!strcmp(action, "write-stream")) {
		write_stream(c, wait_secs(60), NULL);
		wait_disconnected(c, 30);
	} else if (!strcmp(action, "write-once")) {
		write_once(c);
		rdma_disconnect(c->id);
	} else if (!strcmp(action, "ext-refused")) {
		post_refused_extensions(c);
		exchange(c);
		CHECK(!rdma_disconnect(c->id), "rdma_disconnect");
		wait_disconnected(c, 30);
		expect_flushed_recvs(c, 30);
	} else if (!strcmp(action, "ext-peer")) {
		exchange(c);
		wait_disconnected(c, 60);
		expect_flushed_recvs(c, 30);
		rdma_disconnect(c->id);
	} else if (!strcmp(action, "last-send")) {
		const char *d = getenv("SEND_DELAY");
		char text[MSG];

		if (d && atoi(d) > 0) {
			printf("%s: the last Send in %d s\n", c->side, atoi(d));
			fflush(stdout);
			sleep(atoi(d));
		}
		snprintf(text, MSG, "uiw_cm_check last from the %s", c->side);
		send_text(c, text);
		CHECK(!rdma_disconnect(c->id), "rdma_disconnect");
		if (getenv("CLOSE_WAIT")) {
			printf("%s: last Send complete, rdma_disconnect done\n", c->side);
			wait_disconnected(c, 30);
			expect_flushed_recvs(c, 30);
		} else {
			printf("%s: last Send complete, rdma_disconnect done; destroying\n",
			       c->side);
		}
	} else if (!strcmp(action, "last-recv")) {
		char want[MSG];

		snprintf(want, MSG, "uiw_cm_check last from the %s",
			 strcmp(c->side, "server") ? "server" : "client");
		recv_text(c, want, wait_secs(60));
		wait_disconnected(c, 30);
		expect_flushed_recvs(c, 30);
	} else if (!strcmp(action, "stream-recv")) {
		char want[MSG];

		snprintf(want, MSG, "uiw_cm_check last from the %s",
			 strcmp(c->side, "server") ? "server" : "client");
		write_stream(c, wait_secs(60), want);
		wait_disconnected(c, 30);
		expect_flushed_recvs(c, 30);
	} else if (!strcmp(action, "verify")) {
		verify_target(c);
	} else if (!strcmp(action, "idle")) {
		const int secs = wait_secs(60);

		printf("%s: idle, waiting for the peer to go away\n", c->side);
		fflush(stdout);
		wait_disconnected(c, secs);
		expect_flushed_recvs(c, 30);
	} else {
		CHECK(0, "unknown action %s", action);
	}
	rdma_destroy_qp(c->id);
	CHECK(!rdma_destroy_id(c->id), "rdma_destroy_id");
	ibv_dereg_mr(c->mr);
	ibv_destroy_cq(c->cq);
	ibv_dealloc_pd(c->pd);
	if (c->listen_id)
		rdma_destroy_id(c->listen_id);
	rdma_destroy_event_channel(c->ch);
	printf("PASS\n");
	return 0;
}

static int server(const char *addr, const char *port, const char *action)
{
	struct conn *c = new_conn("server");
	struct rdma_cm_event *ev;
	struct wire_target t;
	struct rdma_conn_param p = {.initiator_depth = 1, .responder_resources = 1};

	listen_on(c, addr, port);
	expect_event(c, RDMA_CM_EVENT_CONNECT_REQUEST, 120, &ev);
	c->id = ev->id;
	take_target(c, ev->param.conn.private_data, ev->param.conn.private_data_len);
	rdma_ack_cm_event(ev);
	setup_qp(c);
	t = my_target(c);
	p.private_data = &t;
	p.private_data_len = sizeof(t);
	CHECK(!rdma_accept(c->id, &p), "rdma_accept");
	expect_event(c, RDMA_CM_EVENT_ESTABLISHED, 30, NULL);
	return run_action(c, action);
}

static int client(const char *dst, const char *src, const char *port, const char *action)
{
	struct conn *c = new_conn("client");
	struct rdma_cm_event *ev;
	struct wire_target t;

	resolve(c, dst, src, port);
	setup_qp(c);
	t = my_target(c);
	connect_to(c, &t, sizeof(t));
	expect_event(c, RDMA_CM_EVENT_ESTABLISHED, 30, &ev);
	take_target(c, ev->param.conn.private_data, ev->param.conn.private_data_len);
	rdma_ack_cm_event(ev);
	return run_action(c, action);
}

int main(int argc, char **argv)
{
	const char *m = argc > 1 ? argv[1] : "";

	setvbuf(stdout, NULL, _IOLBF, 0);
	if (!strcmp(m, "reject-server") && argc == 5)
		return reject_server(argv[2], argv[3], argv[4]);
	if (!strcmp(m, "reject-client") && argc == 6)
		return reject_client(argv[2], argv[3], argv[4], argv[5]);
	if (!strcmp(m, "no-listener") && argc == 5)
		return no_listener(argv[2], argv[3], argv[4]);
	if (!strcmp(m, "server") && argc == 5)
		return server(argv[2], argv[3], argv[4]);
	if (!strcmp(m, "client") && argc == 6)
		return client(argv[2], argv[3], argv[4], argv[5]);
	fprintf(stderr,
		"usage: uiw_cm_check reject-server ADDR PORT TEXT | reject-client DST SRC PORT TEXT\n"
		"     | no-listener DST SRC PORT | server ADDR PORT ACTION | client DST SRC PORT "
		"ACTION\n  ACTION: disconnect | wait-close | write-stream | idle | write-once | verify |\n"
		"          ext-refused | ext-peer | last-send | last-recv | stream-recv\n");
	return 2;
}
