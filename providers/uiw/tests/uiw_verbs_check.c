/*
 * uiw_verbs_check: control-path checks of a uiw device through plain libibverbs, for the system
 * tests (tests/system/uiw_verbs.sh). Needs no peer and no connection.
 *
 *   uiw_verbs_check DEVICE
 *
 * Checks, in order (each failure prints "FAIL: <what>" and exits 1):
 *   - the device is an iWARP RNIC and its context comes from libuiw (node type, transport);
 *   - query device / port / GID 0 report uiw's limits, an active port and a non-zero GID;
 *   - PD, MR (lkey == rkey, non-zero; unmapped memory, write access to read-only memory and
 *     any access to PROT_NONE memory refused with EFAULT), CQ with a
 *     completion channel, RC QP create;
 *   - QP state machine RESET -> INIT -> RTR, ibv_query_qp reporting it;
 *   - a Send and a Receive posted before any connection are accepted (they wait);
 *   - moving the QP to ERR flushes both with IBV_WC_WR_FLUSH_ERR, and the CQ armed for
 *     solicited completions only fires its completion channel (an error completion counts; the
 *     event goes through uiw.ko's CQ-signal method) so ibv_get_cq_event returns;
 *   - an SRQ: create, query, limit, receives posted to it, a QP on it (whose own post_recv is
 *     refused); its receives are not flushed by that QP's error;
 *   - the UD QP type is refused with EOPNOTSUPP;
 *   - the PD cannot be deallocated while its MR lives (EBUSY);
 *   - everything is destroyed without error.
 * Prints one "ok: ..." line per passed group and "PASS" at the end.
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include <infiniband/verbs.h>

#define CHECK(cond, ...)                  \
	do {                              \
		if (!(cond)) {            \
			printf("FAIL: "); \
			printf(__VA_ARGS__);  \
			printf(" (errno %d %s)\n", errno, strerror(errno)); \
			exit(1);          \
		}                         \
	} while (0)

static struct ibv_context *open_device(const char *name)
{
	struct ibv_device **list = ibv_get_device_list(NULL);
	struct ibv_context *ctx = NULL;

	CHECK(list, "ibv_get_device_list");
	for (int i = 0; list[i]; i++) {
		if (strcmp(ibv_get_device_name(list[i]), name))
			continue;
		CHECK(list[i]->node_type == IBV_NODE_RNIC, "node type %d", list[i]->node_type);
		CHECK(list[i]->transport_type == IBV_TRANSPORT_IWARP, "transport %d",
		      list[i]->transport_type);
		ctx = ibv_open_device(list[i]);
		CHECK(ctx, "ibv_open_device(%s)", name);
	}
	ibv_free_device_list(list);
	CHECK(ctx, "device %s not found (is the uiw provider loaded?)", name);
	return ctx;
}

static void check_queries(struct ibv_context *ctx)
{
	struct ibv_device_attr da;
	struct ibv_port_attr pa;
	union ibv_gid gid, zero = {};

	CHECK(!ibv_query_device(ctx, &da), "ibv_query_device");
	CHECK(da.max_qp > 0 && da.max_cqe > 0 && da.max_mr > 0, "device limits");
	CHECK(da.max_sge == 16 && da.max_sge_rd == 16, "max_sge %d max_sge_rd %d", da.max_sge,
	      da.max_sge_rd);
	CHECK(da.atomic_cap == IBV_ATOMIC_HCA, "atomic_cap %d", da.atomic_cap);
	CHECK(da.max_qp_rd_atom == 128 && da.max_qp_init_rd_atom == 128, "ird/ord %d/%d",
	      da.max_qp_rd_atom, da.max_qp_init_rd_atom);
	CHECK(da.fw_ver[0] != 0, "empty fw_ver");
	CHECK(!ibv_query_port(ctx, 1, &pa), "ibv_query_port");
	CHECK(pa.state == IBV_PORT_ACTIVE, "port state %d", pa.state);
	CHECK(pa.link_layer == IBV_LINK_LAYER_ETHERNET || pa.link_layer == IBV_LINK_LAYER_UNSPECIFIED,
	      "link layer %d", pa.link_layer);
	CHECK(!ibv_query_gid(ctx, 1, 0, &gid), "ibv_query_gid");
	CHECK(memcmp(&gid, &zero, sizeof(gid)), "GID 0 is zero");
	printf("ok: queries (fw %s, max_qp %d, max_mr %d, gid_tbl %d)\n", da.fw_ver, da.max_qp,
	       da.max_mr, pa.gid_tbl_len);
}

/*
 * Write access to memory the process cannot write is refused with EFAULT, as siw and
 * hardware refuse it (the pages cannot be pinned for writing); read access to it is fine,
 * and inaccessible (PROT_NONE) memory cannot be registered at all.
 */
static void check_mr_permissions(struct ibv_pd *pd)
{
	static const int write_access[] = {
		IBV_ACCESS_LOCAL_WRITE,
		IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE,
	};
	const size_t len = 2 * 4096;
	struct ibv_mr *mr;
	unsigned int i;
	char *ro, *none;

	ro = mmap(NULL, len, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	none = mmap(NULL, len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	CHECK(ro != MAP_FAILED && none != MAP_FAILED, "mmap");
	for (i = 0; i < sizeof(write_access) / sizeof(write_access[0]); i++) {
		errno = 0;
		mr = ibv_reg_mr(pd, ro, len, write_access[i]);
		CHECK(!mr && errno == EFAULT,
		      "ibv_reg_mr(read-only memory, access %#x): errno %d, want EFAULT",
		      write_access[i], errno);
	}
	mr = ibv_reg_mr(pd, ro, len, IBV_ACCESS_REMOTE_READ);
	CHECK(mr, "ibv_reg_mr(read-only memory, remote read)");
	CHECK(!ibv_dereg_mr(mr), "ibv_dereg_mr");
	/* Half writable, half read-only: the whole range counts. */
	CHECK(!mprotect(ro, 4096, PROT_READ | PROT_WRITE), "mprotect");
	errno = 0;
	CHECK(!ibv_reg_mr(pd, ro, len, IBV_ACCESS_LOCAL_WRITE) && errno == EFAULT,
	      "ibv_reg_mr(partly read-only memory, local write): errno %d, want EFAULT", errno);
	errno = 0;
	CHECK(!ibv_reg_mr(pd, none, len, 0) && errno == EFAULT,
	      "ibv_reg_mr(PROT_NONE memory): errno %d, want EFAULT", errno);
	munmap(ro, len);
	munmap(none, len);
	printf("ok: MR write access to read-only memory and any access to PROT_NONE memory refused (EFAULT)\n");
}

static void check_srq(struct ibv_pd *pd, struct ibv_cq *cq, struct ibv_mr *mr)
{
	struct ibv_srq_init_attr si = {.attr = {.max_wr = 8, .max_sge = 1}};
	struct ibv_qp_init_attr ia = {};
	struct ibv_qp_attr qa = {.qp_state = IBV_QPS_ERR};
	struct ibv_srq_attr sa;
	struct ibv_sge sge = {.addr = (uintptr_t)mr->addr, .length = 64, .lkey = mr->lkey};
	struct ibv_recv_wr rwr = {.wr_id = 7, .sg_list = &sge, .num_sge = 1}, *bad;
	struct ibv_wc wc;
	struct ibv_srq *srq;
	struct ibv_qp *qp;

	srq = ibv_create_srq(pd, &si);
	CHECK(srq, "ibv_create_srq");
	CHECK(!ibv_query_srq(srq, &sa) && sa.max_wr >= 8, "ibv_query_srq max_wr %u", sa.max_wr);
	sa.srq_limit = 2;
	CHECK(!ibv_modify_srq(srq, &sa, IBV_SRQ_LIMIT), "ibv_modify_srq(limit)");
	CHECK(!ibv_query_srq(srq, &sa) && sa.srq_limit == 2, "srq_limit %u", sa.srq_limit);
	for (int i = 0; i < 3; i++)
		CHECK(!ibv_post_srq_recv(srq, &rwr, &bad), "ibv_post_srq_recv %d", i);

	ia.qp_type = IBV_QPT_RC;
	ia.send_cq = ia.recv_cq = cq;
	ia.srq = srq;
	ia.cap.max_send_wr = 4;
	ia.cap.max_send_sge = 1;
	qp = ibv_create_qp(pd, &ia);
	CHECK(qp, "ibv_create_qp on an SRQ");
	CHECK(ibv_post_recv(qp, &rwr, &bad) == EINVAL, "post_recv on an SRQ QP not refused");
	CHECK(!ibv_modify_qp(qp, &qa, IBV_QP_STATE), "SRQ QP to ERR");
	CHECK(ibv_poll_cq(cq, 1, &wc) == 0, "the SRQ's receives were flushed with its QP");
	CHECK(!ibv_destroy_qp(qp), "destroy the SRQ QP");
	CHECK(!ibv_destroy_srq(srq), "ibv_destroy_srq");
	printf("ok: SRQ (limit, 3 receives, a QP on it)\n");
}

int main(int argc, char **argv)
{
	static char buf[4096];
	struct ibv_context *ctx;
	struct ibv_comp_channel *ch;
	struct ibv_pd *pd;
	struct ibv_mr *mr;
	struct ibv_cq *cq, *ev_cq;
	struct ibv_qp *qp;
	struct ibv_qp_init_attr ia = {};
	struct ibv_qp_attr qa = {};
	struct ibv_qp_init_attr qia;
	struct ibv_sge sge;
	struct ibv_send_wr swr = {}, *bad_s;
	struct ibv_recv_wr rwr = {}, *bad_r;
	struct ibv_wc wc[4];
	void *ev_ctx;
	int n, got = 0, flushed = 0;

	if (argc != 2) {
		fprintf(stderr, "usage: %s DEVICE\n", argv[0]);
		return 2;
	}
	ctx = open_device(argv[1]);
	check_queries(ctx);

	pd = ibv_alloc_pd(ctx);
	CHECK(pd, "ibv_alloc_pd");
	mr = ibv_reg_mr(pd, buf, sizeof(buf),
			IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
	CHECK(mr, "ibv_reg_mr");
	CHECK(mr->lkey && mr->lkey == mr->rkey, "lkey %#x rkey %#x", mr->lkey, mr->rkey);
	/* Memory the process does not have cannot be registered, pinned or not. */
	errno = 0;
	CHECK(!ibv_reg_mr(pd, (void *)0x1000, 1 << 20, IBV_ACCESS_LOCAL_WRITE) && errno == EFAULT,
	      "ibv_reg_mr of unmapped memory: errno %d, want EFAULT", errno);
	check_mr_permissions(pd);
	ch = ibv_create_comp_channel(ctx);
	CHECK(ch, "ibv_create_comp_channel");
	cq = ibv_create_cq(ctx, 16, NULL, ch, 0);
	CHECK(cq && cq->cqe >= 16, "ibv_create_cq");
	printf("ok: PD, MR (stag %#x), CQ (%d entries) with a completion channel\n", mr->lkey,
	       cq->cqe);

	ia.qp_type = IBV_QPT_UD;
	ia.send_cq = ia.recv_cq = cq;
	ia.cap.max_send_wr = ia.cap.max_recv_wr = 4;
	ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
	CHECK(!ibv_create_qp(pd, &ia) && errno == EOPNOTSUPP, "UD QP not refused");
	ia.qp_type = IBV_QPT_RC;
	qp = ibv_create_qp(pd, &ia);
	CHECK(qp, "ibv_create_qp(RC)");
	CHECK(qp->qp_num >= 2, "qp_num %u", qp->qp_num);

	qa.qp_state = IBV_QPS_INIT;
	qa.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
	qa.port_num = 1;
	CHECK(!ibv_modify_qp(qp, &qa, IBV_QP_STATE | IBV_QP_ACCESS_FLAGS | IBV_QP_PORT |
				  IBV_QP_PKEY_INDEX), "modify to INIT");
	qa.qp_state = IBV_QPS_RTR;
	CHECK(!ibv_modify_qp(qp, &qa, IBV_QP_STATE), "modify to RTR");
	CHECK(!ibv_query_qp(qp, &qa, IBV_QP_STATE | IBV_QP_CAP, &qia), "ibv_query_qp");
	CHECK(qa.qp_state == IBV_QPS_RTR, "query_qp state %d, want RTR", qa.qp_state);
	CHECK(qa.cap.max_send_wr >= 4 && qa.cap.max_recv_wr >= 4, "query_qp caps");
	printf("ok: RC QP %u RESET -> INIT -> RTR\n", qp->qp_num);

	sge.addr = (uintptr_t)buf;
	sge.length = 64;
	sge.lkey = mr->lkey;
	rwr.wr_id = 1;
	rwr.sg_list = &sge;
	rwr.num_sge = 1;
	CHECK(!ibv_post_recv(qp, &rwr, &bad_r), "post_recv before connection");
	swr.wr_id = 2;
	swr.opcode = IBV_WR_SEND;
	swr.send_flags = IBV_SEND_SIGNALED;
	swr.sg_list = &sge;
	swr.num_sge = 1;
	CHECK(!ibv_post_send(qp, &swr, &bad_s), "post_send before connection");
	swr.opcode = IBV_WR_ATOMIC_FETCH_AND_ADD;
	CHECK(ibv_post_send(qp, &swr, &bad_s) == EINVAL && bad_s == &swr, "atomic WR not refused");
	CHECK(ibv_poll_cq(cq, 4, wc) == 0, "completion before any connection");
	printf("ok: a Send and a Receive wait in their queues\n");

	CHECK(!ibv_req_notify_cq(cq, 1), "ibv_req_notify_cq(solicited_only)");
	qa.qp_state = IBV_QPS_ERR;
	CHECK(!ibv_modify_qp(qp, &qa, IBV_QP_STATE), "modify to ERR");
	struct pollfd pfd = {.fd = ch->fd, .events = POLLIN};
	CHECK(poll(&pfd, 1, 5000) == 1, "no completion event within 5 s");
	CHECK(!ibv_get_cq_event(ch, &ev_cq, &ev_ctx) && ev_cq == cq, "ibv_get_cq_event");
	ibv_ack_cq_events(cq, 1);
	while (got < 2 && (n = ibv_poll_cq(cq, 4, wc)) >= 0) {
		for (int i = 0; i < n; i++, got++)
			flushed += wc[i].status == IBV_WC_WR_FLUSH_ERR && wc[i].qp_num == qp->qp_num;
		if (!n)
			break;
	}
	CHECK(got == 2 && flushed == 2, "%d completions, %d flushed, want 2 and 2", got, flushed);
	CHECK(!ibv_query_qp(qp, &qa, IBV_QP_STATE, &qia) && qa.qp_state == IBV_QPS_ERR,
	      "query_qp after ERR: state %d", qa.qp_state);
	printf("ok: ERR flushed both WRs and fired the completion channel\n");

	check_srq(pd, cq, mr);

	CHECK(!ibv_destroy_qp(qp), "ibv_destroy_qp");
	CHECK(!ibv_destroy_cq(cq), "ibv_destroy_cq");
	CHECK(!ibv_destroy_comp_channel(ch), "ibv_destroy_comp_channel");
	/* verbs: a PD still in use by an MR cannot be deallocated, and stays usable. */
	CHECK(ibv_dealloc_pd(pd) == EBUSY, "ibv_dealloc_pd with an MR on it: not EBUSY");
	CHECK(!ibv_dereg_mr(mr), "ibv_dereg_mr");
	CHECK(!ibv_dealloc_pd(pd), "ibv_dealloc_pd");
	CHECK(!ibv_close_device(ctx), "ibv_close_device");
	printf("ok: everything destroyed\nPASS\n");
	return 0;
}
