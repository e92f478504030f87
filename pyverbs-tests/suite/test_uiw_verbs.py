"""uiw's own pyverbs suite, control path (no connection): device and port queries, PD, MR,
CQ, QP state machine, SRQ. Runs in the test VM (tests/system/pyverbs_suite.sh) on UIW0_DEV.
"""
import errno
import ipaddress
import os
import socket
import unittest

import pyverbs.enums as e
from pyverbs.cq import CQ, CompChannel
from pyverbs.device import Context, get_device_list
from pyverbs.mr import MR
from pyverbs.pd import PD
from pyverbs.pyverbs_error import PyverbsError, PyverbsRDMAError
from pyverbs.qp import QP, QPAttr, QPCap, QPInitAttr
from pyverbs.srq import SRQ, SrqAttr, SrqInitAttr
from pyverbs.wr import RecvWR, SGE, SendWR
from watchdog import TimeLimit

DEV = os.environ.get("UIW0_DEV", "uiw0")
ADDR = os.environ.get("UIW0_ADDR", "10.99.1.1")


def rc_init_attr(cq, send=4, recv=4, srq=None):
    return QPInitAttr(qp_type=e.IBV_QPT_RC, scq=cq, rcq=cq, srq=srq,
                      cap=QPCap(max_send_wr=send, max_recv_wr=0 if srq else recv,
                                max_send_sge=1, max_recv_sge=1))


class UiwBase(TimeLimit):
    time_limit = 30

    def setUp(self):
        super().setUp()
        self.ctx = Context(name=DEV)
        self.pd = PD(self.ctx)

    def tearDown(self):
        self.ctx.close()  # closes every object created on it
        super().tearDown()


class DeviceTest(UiwBase):
    def test_device_is_iwarp_rnic(self):
        devs = {d.name.decode(): d for d in get_device_list()}
        self.assertIn(DEV, devs)
        self.assertEqual(devs[DEV].node_type, e.IBV_NODE_RNIC)
        self.assertEqual(devs[DEV].transport_type, e.IBV_TRANSPORT_IWARP)

    def test_device_limits(self):
        a = self.ctx.query_device()
        self.assertGreater(a.max_qp, 0)
        self.assertGreater(a.max_cqe, 0)
        self.assertGreater(a.max_mr, 0)
        self.assertGreater(a.max_pd, 0)
        self.assertEqual(a.max_sge, 16)
        self.assertGreaterEqual(a.max_sge_rd, 1)
        self.assertLessEqual(a.max_sge_rd, a.max_sge)
        self.assertEqual((a.max_qp_rd_atom, a.max_qp_init_rd_atom), (128, 128))
        self.assertEqual(a.phys_port_cnt, 1)
        # RFC 7306 atomics (between uiw peers), one atomic instruction on the target: atomic
        # with respect to every QP of the host.
        self.assertEqual(a.atomic_caps, e.IBV_ATOMIC_HCA)

    def test_port(self):
        p = self.ctx.query_port(1)
        self.assertEqual(p.state, e.IBV_PORT_ACTIVE)
        self.assertGreaterEqual(p.gid_tbl_len, 16)
        with self.assertRaises(PyverbsRDMAError):
            self.ctx.query_port(2)

    def test_gid_is_the_address(self):
        # GID index 0 = the netdev's IPv4 address, IPv4-mapped (STATE.md: "GID table").
        gid = self.ctx.query_gid(1, 0)
        mapped = ipaddress.IPv6Address(socket.inet_pton(socket.AF_INET6, str(gid)))
        self.assertEqual(str(mapped.ipv4_mapped), ADDR)


class PdMrTest(UiwBase):
    def test_pd_many(self):
        pds = [PD(self.ctx) for _ in range(16)]
        for p in pds:
            p.close()

    def test_mr_access_flags(self):
        ok = [0, e.IBV_ACCESS_LOCAL_WRITE,
              e.IBV_ACCESS_LOCAL_WRITE | e.IBV_ACCESS_REMOTE_WRITE,
              e.IBV_ACCESS_REMOTE_READ,
              e.IBV_ACCESS_LOCAL_WRITE | e.IBV_ACCESS_REMOTE_WRITE | e.IBV_ACCESS_REMOTE_READ]
        keys = set()
        for acc in ok:
            mr = MR(self.pd, 4096, acc)
            self.assertEqual(mr.length, 4096)
            self.assertNotEqual(mr.lkey, 0)
            keys.add(mr.rkey)
        self.assertEqual(len(keys), len(ok), "STags must be distinct")

    def test_mr_remote_write_needs_local_write(self):
        # Verbs: Remote Write (or Atomic) access requires Local Write.
        for acc in (e.IBV_ACCESS_REMOTE_WRITE, e.IBV_ACCESS_REMOTE_ATOMIC):
            with self.assertRaises(PyverbsRDMAError, msg=f"access {acc:#x} accepted") as cm:
                MR(self.pd, 4096, acc)
            self.assertEqual(cm.exception.error_code, errno.EINVAL)

    def test_mr_unknown_access_bit(self):
        with self.assertRaises(PyverbsRDMAError):
            MR(self.pd, 4096, e.IBV_ACCESS_LOCAL_WRITE | (1 << 30))

    def test_mr_unmapped_address(self):
        # Registering memory the process does not have fails as on a pinning RNIC (uiw.ko
        # checks the range is mapped; it pins nothing).
        with self.assertRaises(PyverbsRDMAError) as cm:
            MR(self.pd, 1 << 20, e.IBV_ACCESS_LOCAL_WRITE, address=0x1000)
        self.assertEqual(cm.exception.error_code, errno.EFAULT)

    def test_on_demand_paging(self):
        # uiw pins nothing, so its MRs are on-demand: explicit ODP for RC (RFC 7306 atomics
        # included) and implicit ODP (the whole address space) are reported and accepted.
        caps = self.ctx.query_device_ex().odp_caps
        self.assertTrue(caps.general_caps & e.IBV_ODP_SUPPORT)
        self.assertTrue(caps.general_caps & e.IBV_ODP_SUPPORT_IMPLICIT)
        for bit in (e.IBV_ODP_SUPPORT_SEND, e.IBV_ODP_SUPPORT_RECV, e.IBV_ODP_SUPPORT_WRITE,
                    e.IBV_ODP_SUPPORT_READ, e.IBV_ODP_SUPPORT_SRQ_RECV,
                    e.IBV_ODP_SUPPORT_ATOMIC):
            self.assertTrue(caps.rc_odp_caps & bit, f"rc_odp_caps lacks {bit:#x}")
        self.assertEqual(caps.ud_odp_caps, 0)
        mr = MR(self.pd, 3 * 4096, e.IBV_ACCESS_LOCAL_WRITE | e.IBV_ACCESS_ON_DEMAND)
        whole = MR(self.pd, 0, e.IBV_ACCESS_LOCAL_WRITE | e.IBV_ACCESS_ON_DEMAND, implicit=True)
        self.assertNotEqual(whole.rkey, mr.rkey)
        whole.close()
        # The whole address space only on demand: without IBV_ACCESS_ON_DEMAND it is a range
        # that must be mapped (and that libibverbs must madvise), which it is not.
        with self.assertRaises(PyverbsRDMAError):
            MR(self.pd, 0, e.IBV_ACCESS_LOCAL_WRITE, implicit=True)
        # ibv_advise_mr: prefetch (read, write, no-fault) of SGEs inside the MR; an SGE with an
        # unknown lkey or past the MR's end is refused with EINVAL.
        for advice in (e._IBV_ADVISE_MR_ADVICE_PREFETCH, e._IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE,
                       e._IBV_ADVISE_MR_ADVICE_PREFETCH_NO_FAULT):
            self.pd.advise_mr(advice, e._IBV_ADVISE_MR_FLAG_FLUSH,
                              [SGE(mr.buf, 4096, mr.lkey), SGE(mr.buf + 8192, 100, mr.lkey)])
        for bad in (SGE(mr.buf, 4096, mr.lkey ^ 0x5A), SGE(mr.buf + 8192, 4097, mr.lkey)):
            with self.assertRaises(PyverbsRDMAError) as cm:
                self.pd.advise_mr(e._IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE, 0, [bad])
            self.assertEqual(cm.exception.error_code, errno.EINVAL)
        ro = MR(self.pd, 4096, e.IBV_ACCESS_ON_DEMAND)  # no local write
        with self.assertRaises(PyverbsRDMAError) as cm:
            self.pd.advise_mr(e._IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE, 0, [SGE(ro.buf, 64, ro.lkey)])
        self.assertEqual(cm.exception.error_code, errno.EINVAL)
        self.pd.advise_mr(e._IBV_ADVISE_MR_ADVICE_PREFETCH, 0, [SGE(ro.buf, 64, ro.lkey)])

    # A PD in use (EBUSY) is checked in C (providers/uiw/tests/uiw_verbs_check.c): pyverbs'
    # PD.close() closes the PD's MRs and QPs first, so it cannot show it.


class CqTest(UiwBase):
    def test_sizes(self):
        max_cqe = self.ctx.query_device().max_cqe
        for n in (1, 16, 4096, max_cqe):
            cq = CQ(self.ctx, n, None, None, 0)
            self.assertGreaterEqual(cq.cqe, n)
            cq.close()
        for bad in (0, max_cqe + 1):
            with self.assertRaises(PyverbsRDMAError, msg=f"cqe {bad} accepted"):
                CQ(self.ctx, bad, None, None, 0)

    def test_poll_empty(self):
        cq = CQ(self.ctx, 4, None, None, 0)
        self.assertEqual(cq.poll(4)[0], 0)

    def flushed_qp(self, cq, recvs=2, sends=1):
        mr = MR(self.pd, 4096, e.IBV_ACCESS_LOCAL_WRITE)
        qp = QP(self.pd, rc_init_attr(cq), QPAttr())  # INIT
        for i in range(recvs):
            qp.post_recv(RecvWR(wr_id=i, num_sge=1, sg=[SGE(mr.buf, 64, mr.lkey)]))
        for i in range(sends):
            qp.post_send(SendWR(wr_id=100 + i, opcode=e.IBV_WR_SEND, num_sge=1,
                                sg=[SGE(mr.buf, 64, mr.lkey)]))
        qp.modify(QPAttr(qp_state=e.IBV_QPS_ERR), e.IBV_QP_STATE)
        return qp, mr

    def test_flush_on_err(self):
        cq = CQ(self.ctx, 8, None, None, 0)
        qp, mr = self.flushed_qp(cq, recvs=2, sends=0)
        n, wcs = cq.poll(8)
        self.assertEqual(n, 2)
        self.assertEqual(sorted(w.wr_id for w in wcs), [0, 1])
        self.assertTrue(all(w.status == e.IBV_WC_WR_FLUSH_ERR for w in wcs))

    def test_completion_event(self):
        ch = CompChannel(self.ctx)
        cq = CQ(self.ctx, 8, None, ch, 0)
        cq.req_notify()
        qp, mr = self.flushed_qp(cq, recvs=1, sends=0)
        ch.get_cq_event(cq)
        cq.ack_events(1)
        self.assertEqual(cq.poll(8)[0], 1)

    def test_solicited_only_fires_on_error(self):
        # Verbs: a solicited-only arm also fires for a completion in error (flush).
        ch = CompChannel(self.ctx)
        cq = CQ(self.ctx, 8, None, ch, 0)
        cq.req_notify(solicited_only=True)
        qp, mr = self.flushed_qp(cq, recvs=1, sends=0)
        ch.get_cq_event(cq)
        cq.ack_events(1)


class QpStateTest(UiwBase):
    def setUp(self):
        super().setUp()
        self.cq = CQ(self.ctx, 16, None, None, 0)

    def new_qp(self):
        qp = QP(self.pd, rc_init_attr(self.cq))
        return qp

    def state(self, qp):
        attr, _ = qp.query(e.IBV_QP_STATE)
        return attr.qp_state

    def to(self, qp, state, mask=e.IBV_QP_STATE, **kw):
        qp.modify(QPAttr(qp_state=state, **kw), mask)

    def test_create_reports_idle(self):
        qp = self.new_qp()
        self.assertEqual(self.state(qp), self.IDLE)
        self.assertGreater(qp.qp_num, 0)

    def test_reset_init_rtr(self):
        qp = self.new_qp()
        self.to(qp, e.IBV_QPS_RESET)
        qp.to_init(QPAttr())
        self.assertEqual(self.state(qp), e.IBV_QPS_INIT)
        attr, init = qp.query(e.IBV_QP_CAP)
        self.assertGreaterEqual((attr.cap.max_send_wr, attr.cap.max_recv_wr), (4, 4))

    # iWARP has one Idle state for RESET and INIT (RDMAC verbs): a QP reset to RESET reports
    # INIT, as siw's does and as rdma-core's test_qp expects of IBV_NODE_RNIC devices.
    IDLE = e.IBV_QPS_INIT

    def test_illegal_transitions_refused(self):
        qp = self.new_qp()
        self.to(qp, e.IBV_QPS_RESET)
        for bad in (e.IBV_QPS_RTS, e.IBV_QPS_SQD, e.IBV_QPS_SQE):
            with self.assertRaises(PyverbsRDMAError, msg=f"RESET -> {bad} accepted"):
                self.to(qp, bad)
            self.assertEqual(self.state(qp), self.IDLE)
        qp.to_init(QPAttr())
        with self.assertRaises(PyverbsRDMAError, msg="INIT -> RTS accepted"):
            self.to(qp, e.IBV_QPS_RTS)
        self.assertEqual(self.state(qp), e.IBV_QPS_INIT)

    def test_any_to_err_and_reset(self):
        qp = self.new_qp()
        self.to(qp, e.IBV_QPS_ERR)
        self.assertEqual(self.state(qp), e.IBV_QPS_ERR)
        with self.assertRaises(PyverbsRDMAError, msg="ERR -> RTS accepted"):
            self.to(qp, e.IBV_QPS_RTS)
        self.to(qp, e.IBV_QPS_RESET)
        self.assertEqual(self.state(qp), self.IDLE)
        qp.to_init(QPAttr())
        self.assertEqual(self.state(qp), e.IBV_QPS_INIT)

    def test_post_recv_in_idle_flushed_on_err(self):
        # Receives may be posted in Idle (RDMAC verbs; siw alike), before any connection; the
        # QP's error flushes them.
        qp = self.new_qp()
        self.to(qp, e.IBV_QPS_RESET)
        mr = MR(self.pd, 64, e.IBV_ACCESS_LOCAL_WRITE)
        qp.post_recv(RecvWR(wr_id=7, num_sge=1, sg=[SGE(mr.buf, 64, mr.lkey)]))
        self.to(qp, e.IBV_QPS_ERR)
        n, wcs = self.cq.poll(4)
        self.assertEqual(n, 1)
        self.assertEqual((wcs[0].wr_id, wcs[0].status), (7, e.IBV_WC_WR_FLUSH_ERR))

    def test_too_many_sges_refused(self):
        qp = self.new_qp()
        mr = MR(self.pd, 64, e.IBV_ACCESS_LOCAL_WRITE)
        sg = [SGE(mr.buf, 8, mr.lkey), SGE(mr.buf + 8, 8, mr.lkey)]
        with self.assertRaises(PyverbsRDMAError):
            qp.post_recv(RecvWR(wr_id=1, num_sge=2, sg=sg))

    def test_queue_overflow_refused(self):
        qp = self.new_qp()
        mr = MR(self.pd, 64, e.IBV_ACCESS_LOCAL_WRITE)
        max_wr = qp.query(e.IBV_QP_CAP)[0].cap.max_recv_wr
        for i in range(max_wr):
            qp.post_recv(RecvWR(wr_id=i, num_sge=1, sg=[SGE(mr.buf, 8, mr.lkey)]))
        with self.assertRaises(PyverbsRDMAError):
            qp.post_recv(RecvWR(wr_id=99, num_sge=1, sg=[SGE(mr.buf, 8, mr.lkey)]))

    def test_ud_refused(self):
        # uiw is an RNIC: RC only.
        with self.assertRaises(PyverbsRDMAError):
            QP(self.pd, QPInitAttr(qp_type=e.IBV_QPT_UD, scq=self.cq, rcq=self.cq,
                                   cap=QPCap(max_send_wr=1, max_recv_wr=1)))


class SrqTest(UiwBase):
    def test_srq_create_query_modify(self):
        srq = SRQ(self.pd, SrqInitAttr(SrqAttr(max_wr=16, max_sge=1)))
        a = srq.query()
        self.assertGreaterEqual(a.max_wr, 16)
        srq.modify(SrqAttr(srq_limit=4), e.IBV_SRQ_LIMIT)
        self.assertEqual(srq.query().srq_limit, 4)

    def test_srq_receives_flush_not_on_qp_err(self):
        # Receives belong to the SRQ: a QP entering ERR does not flush them.
        cq = CQ(self.ctx, 16, None, None, 0)
        srq = SRQ(self.pd, SrqInitAttr(SrqAttr(max_wr=8, max_sge=1)))
        mr = MR(self.pd, 4096, e.IBV_ACCESS_LOCAL_WRITE)
        for i in range(3):
            srq.post_recv(RecvWR(wr_id=i, num_sge=1, sg=[SGE(mr.buf + 64 * i, 64, mr.lkey)]))
        qp = QP(self.pd, rc_init_attr(cq, srq=srq), QPAttr())
        with self.assertRaises(PyverbsRDMAError):
            qp.post_recv(RecvWR(wr_id=9, num_sge=1, sg=[SGE(mr.buf, 64, mr.lkey)]))
        qp.modify(QPAttr(qp_state=e.IBV_QPS_ERR), e.IBV_QP_STATE)
        self.assertEqual(cq.poll(8)[0], 0)

    def test_srq_overflow_refused(self):
        srq = SRQ(self.pd, SrqInitAttr(SrqAttr(max_wr=4, max_sge=1)))
        mr = MR(self.pd, 64, e.IBV_ACCESS_LOCAL_WRITE)
        n = srq.query().max_wr
        for i in range(n):
            srq.post_recv(RecvWR(wr_id=i, num_sge=1, sg=[SGE(mr.buf, 8, mr.lkey)]))
        with self.assertRaises(PyverbsRDMAError):
            srq.post_recv(RecvWR(wr_id=99, num_sge=1, sg=[SGE(mr.buf, 8, mr.lkey)]))


if __name__ == "__main__":
    unittest.main(verbosity=2)
