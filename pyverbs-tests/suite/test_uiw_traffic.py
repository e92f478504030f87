"""uiw's own pyverbs suite, data path: two RC QPs of this process, one on uiw0 and one on uiw1,
connected the way ibv_rc_pingpong and rdma-core's tests connect (INIT, RTR with the peer's QPN
and GID, RTS: uiw.ko's connect-on-RTR). Every RDMAP operation uiw offers (RFC 5040: Send, Send
with Solicited Event, Send with Invalidate, RDMA Write, RDMA Read) at the size classes where the
framing changes, with the bytes checked and guard bytes on both sides of every registered region;
then the failure paths of the verbs issue with their exact completion statuses and async events.
(The Terminate each failure sends is asserted octet by octet by uiw_fail_check and the hostile
peer tests; here the application's view is checked.)
"""
import ctypes
import mmap
import os
import select
import unittest

import pyverbs.enums as e
from pyverbs.addr import AHAttr, GlobalRoute
from pyverbs.cq import CQ, CompChannel
from pyverbs.device import Context
from pyverbs.mr import MR
from pyverbs.pd import PD
from pyverbs.qp import QP, QPAttr, QPCap, QPInitAttr
from pyverbs.wr import RecvWR, SGE, SendWR
from watchdog import TimeLimit

DEV_A = os.environ.get("UIW0_DEV", "uiw0")
DEV_B = os.environ.get("UIW1_DEV", "uiw1")
GUARD = 256
GUARD_BYTE = 0xA5
REMOTE = e.IBV_ACCESS_LOCAL_WRITE | e.IBV_ACCESS_REMOTE_WRITE | e.IBV_ACCESS_REMOTE_READ
# 0 and 1 byte; around one FPDU on a 1500-byte MTU (MULPDU is a little under the 1448-byte MSS);
# one page; many FPDUs per message; a message far larger than a socket buffer.
SIZES = (0, 1, 63, 1400, 1500, 4096, 65536, 1 << 20)
REGION = (1 << 20) + 65536  # the largest size plus room for offsets


def pattern(seed, n):
    return bytes((seed * 31 + i * 7 + (i >> 8)) & 0xFF for i in range(n))


def async_fds():
    """The fds of this process that are uverbs event files (async events, completion channels)."""
    out = set()
    for fd in os.listdir("/proc/self/fd"):
        try:
            if "infinibandevent" in os.readlink(f"/proc/self/fd/{fd}"):
                out.add(int(fd))
        except OSError:
            pass
    return out


class Region:
    """`size` registered bytes with GUARD unregistered bytes of GUARD_BYTE on each side, in an
    anonymous mapping of its own."""

    def __init__(self, pd, size, access=REMOTE):
        self.size = size
        self.map = mmap.mmap(-1, size + 2 * GUARD)
        self.map[:] = bytes([GUARD_BYTE]) * len(self.map)
        self.addr = ctypes.addressof(ctypes.c_char.from_buffer(self.map)) + GUARD
        self.mr = MR(pd, size, access, address=self.addr)

    def write(self, data, off=0):
        self.map[GUARD + off:GUARD + off + len(data)] = data

    def read(self, n, off=0):
        return bytes(self.map[GUARD + off:GUARD + off + n])

    def guards_intact(self):
        g = bytes([GUARD_BYTE]) * GUARD
        return self.map[:GUARD] == g and self.map[GUARD + self.size:] == g

    def sge(self, n, off=0):
        return SGE(self.addr + off, n, self.mr.lkey)


class End:
    def __init__(self, dev, send_wr=32, recv_wr=32, sge=4, channel=False):
        before = async_fds()
        self.ctx = Context(name=dev)
        fds = async_fds() - before
        self.async_fd = fds.pop() if len(fds) == 1 else None
        self.pd = PD(self.ctx)
        self.channel = self.channel_fd = None
        if channel:
            before = async_fds()
            self.channel = CompChannel(self.ctx)
            fds = async_fds() - before
            self.channel_fd = fds.pop() if len(fds) == 1 else None
        self.cq = CQ(self.ctx, 128, None, self.channel, 0)
        cap = QPCap(max_send_wr=send_wr, max_recv_wr=recv_wr, max_send_sge=sge, max_recv_sge=sge)
        init = QPInitAttr(qp_type=e.IBV_QPT_RC, scq=self.cq, rcq=self.cq, cap=cap)
        attr = QPAttr(port_num=1)
        attr.qp_access_flags = REMOTE
        self.qp = QP(self.pd, init, attr)  # in INIT
        self.gid = self.ctx.query_gid(1, 0)  # GID index 0 = the netdev's IPv4 address

    def to_rts(self, peer):
        attr = QPAttr(port_num=1)
        attr.qp_access_flags = REMOTE
        attr.path_mtu = e.IBV_MTU_1024
        attr.max_dest_rd_atomic = 4
        attr.max_rd_atomic = 4
        attr.min_rnr_timer = 12
        attr.timeout = 14
        attr.retry_cnt = 7
        attr.rnr_retry = 7
        attr.ah_attr = AHAttr(port_num=1, is_global=1,
                              gr=GlobalRoute(dgid=peer.gid, sgid_index=0))
        attr.dest_qp_num = peer.qp.qp_num
        attr.rq_psn = 0
        attr.sq_psn = 0
        self.qp.to_rts(attr)

    def post_recv(self, wr_id, sges):
        self.qp.post_recv(RecvWR(wr_id=wr_id, num_sge=len(sges), sg=sges))

    def post_send(self, wr_id, opcode, sges, remote=None, flags=e.IBV_SEND_SIGNALED, inv=None):
        wr = SendWR(wr_id=wr_id, opcode=opcode, num_sge=len(sges), sg=sges, send_flags=flags)
        if remote is not None:
            wr.set_wr_rdma(remote[0], remote[1])  # (rkey, address)
        if inv is not None:
            wr.imm_data = inv  # ibv_send_wr's imm_data/invalidate_rkey union
        self.qp.post_send(wr)

    def poll(self, what, timeout_ms=20000):
        for _ in range(timeout_ms):
            n, wcs = self.cq.poll(1)
            if n == 1:
                return wcs[0]
            select.select([], [], [], 0.001)
        raise AssertionError(f"{what}: no completion within {timeout_ms} ms")

    def next_async(self, timeout_s):
        """The next async event's type, or None when none comes within timeout_s."""
        if self.async_fd is None:
            raise unittest.SkipTest("the context's async-event fd was not found")
        r, _, _ = select.select([self.async_fd], [], [], timeout_s)
        if not r:
            return None
        ev = self.ctx.get_async_event()
        ev.ack()
        return ev.event_type

    def close(self):
        self.ctx.close()


def connect(a, b):
    a.to_rts(b)
    b.to_rts(a)


class PairTest(TimeLimit):
    time_limit = 120

    def setUp(self):
        super().setUp()
        self.a = End(DEV_A)
        self.b = End(DEV_B)
        self.ra = Region(self.a.pd, REGION)
        self.rb = Region(self.b.pd, REGION)

    def tearDown(self):
        for end in (self.a, self.b):
            end.close()
        super().tearDown()

    def expect_wc(self, end, wr_id, status, what, opcode=None, byte_len=None):
        wc = end.poll(what)
        self.assertEqual((wc.wr_id, wc.status), (wr_id, status),
                         f"{what}: completion (wr_id, status) {(wc.wr_id, wc.status)}")
        if opcode is not None:
            self.assertEqual(wc.opcode, opcode, what)
        if byte_len is not None:
            self.assertEqual(wc.byte_len, byte_len, what)
        return wc

    def assert_guards(self, what):
        self.assertTrue(self.ra.guards_intact(), f"{what}: a guard byte next to A's region changed")
        self.assertTrue(self.rb.guards_intact(), f"{what}: a guard byte next to B's region changed")


class TrafficTest(PairTest):
    """Every operation at every size class on one connection, data and guards checked."""

    def setUp(self):
        super().setUp()
        connect(self.a, self.b)

    def test_send_sizes(self):
        for i, n in enumerate(SIZES):
            data = pattern(i, n)
            self.ra.write(data)
            self.rb.write(bytes(n))
            self.b.post_recv(100 + i, [self.rb.sge(max(n, 1))])
            self.a.post_send(200 + i, e.IBV_WR_SEND, [self.ra.sge(n)])
            self.expect_wc(self.a, 200 + i, e.IBV_WC_SUCCESS, f"Send {n}", e.IBV_WC_SEND)
            self.expect_wc(self.b, 100 + i, e.IBV_WC_SUCCESS, f"Receive {n}", e.IBV_WC_RECV, n)
            self.assertEqual(self.rb.read(n), data, f"Send of {n} bytes: data differs")
        self.assert_guards("Sends")

    def test_write_sizes(self):
        for i, n in enumerate(SIZES):
            data = pattern(i + 50, n)
            off = 3 * i  # unaligned target offsets
            self.ra.write(data)
            self.rb.write(bytes(n + 8), off)
            self.a.post_send(300 + i, e.IBV_WR_RDMA_WRITE, [self.ra.sge(n)],
                             remote=(self.rb.mr.rkey, self.rb.addr + off))
            self.expect_wc(self.a, 300 + i, e.IBV_WC_SUCCESS, f"Write {n}", e.IBV_WC_RDMA_WRITE)
            # The Write is placed by B's progress thread; a Send after it is delivered after it
            # (RFC 5040 §5.5), so its Receive completion says the Write has landed.
            self.b.post_recv(400 + i, [self.rb.sge(1, REGION - 1)])
            self.a.post_send(500 + i, e.IBV_WR_SEND, [self.ra.sge(0)])
            self.expect_wc(self.a, 500 + i, e.IBV_WC_SUCCESS, "Send after the Write")
            self.expect_wc(self.b, 400 + i, e.IBV_WC_SUCCESS, "Receive after the Write")
            self.assertEqual(self.rb.read(n, off), data, f"Write of {n} bytes: data differs")
            self.assertEqual(self.rb.read(8, off + n), bytes(8), f"Write of {n} went past its end")
        self.assert_guards("Writes")

    def test_read_sizes(self):
        for i, n in enumerate(SIZES):
            data = pattern(i + 90, n)
            self.rb.write(data, 5)
            self.ra.write(bytes(n + 8))
            self.a.post_send(600 + i, e.IBV_WR_RDMA_READ, [self.ra.sge(n)],
                             remote=(self.rb.mr.rkey, self.rb.addr + 5))
            self.expect_wc(self.a, 600 + i, e.IBV_WC_SUCCESS, f"Read {n}", e.IBV_WC_RDMA_READ)
            self.assertEqual(self.ra.read(n), data, f"Read of {n} bytes: data differs")
            self.assertEqual(self.ra.read(8, n), bytes(8), f"Read of {n} went past its end")
        self.assert_guards("Reads")

    def test_gather_and_scatter(self):
        # Send: three source SGEs gathered, two receive SGEs scattered.
        data = pattern(7, 3000)
        self.ra.write(data[:1000], 0)
        self.ra.write(data[1000:2000], 10000)
        self.ra.write(data[2000:], 20000)
        self.b.post_recv(1, [self.rb.sge(1700, 0), self.rb.sge(1300, 50000)])
        self.a.post_send(2, e.IBV_WR_SEND, [self.ra.sge(1000, 0), self.ra.sge(1000, 10000),
                                             self.ra.sge(1000, 20000)])
        self.expect_wc(self.a, 2, e.IBV_WC_SUCCESS, "gathered Send")
        self.expect_wc(self.b, 1, e.IBV_WC_SUCCESS, "scattered Receive", byte_len=3000)
        self.assertEqual(self.rb.read(1700, 0) + self.rb.read(1300, 50000), data)
        # Read: one remote source scattered into two local SGEs (max_sge_rd > 1).
        self.rb.write(pattern(8, 5000), 100000)
        self.a.post_send(3, e.IBV_WR_RDMA_READ, [self.ra.sge(2000, 300000),
                                                 self.ra.sge(3000, 400000)],
                         remote=(self.rb.mr.rkey, self.rb.addr + 100000))
        self.expect_wc(self.a, 3, e.IBV_WC_SUCCESS, "scattered Read")
        self.assertEqual(self.ra.read(2000, 300000) + self.ra.read(3000, 400000), pattern(8, 5000))
        self.assert_guards("SGE lists")

    def test_many_outstanding_then_ordered_completions(self):
        # 16 Writes, 8 Reads and 8 Sends in flight at once; completions come in posting order on
        # one send queue (RFC 5040 §5.5), Reads included.
        ids = []
        for i in range(8):
            self.b.post_recv(700 + i, [self.rb.sge(64, 64 * i)])
        for i in range(32):
            kind = (e.IBV_WR_RDMA_WRITE, e.IBV_WR_RDMA_WRITE, e.IBV_WR_RDMA_READ, e.IBV_WR_SEND)[i % 4]
            if kind == e.IBV_WR_SEND:  # into a 64-byte receive
                self.a.post_send(800 + i, kind, [self.ra.sge(64, 4096 * (i + 1))])
            else:
                self.a.post_send(800 + i, kind, [self.ra.sge(4096, 4096 * (i + 1))],
                                 remote=(self.rb.mr.rkey, self.rb.addr + 4096 * (i + 1)))
            ids.append(800 + i)
        got = [self.expect_wc(self.a, wr_id, e.IBV_WC_SUCCESS, f"WR {wr_id}").wr_id for wr_id in ids]
        self.assertEqual(got, ids)
        for i in range(8):
            self.expect_wc(self.b, 700 + i, e.IBV_WC_SUCCESS, f"Receive {i}")
        self.assert_guards("32 outstanding WRs")

    def test_send_with_invalidate(self):
        # RFC 5040 §5.3: the Send names an STag of the receiver's, which is invalidated before
        # the Receive completes; the completion reports it (IBV_WC_WITH_INV).
        victim = Region(self.b.pd, 4096)
        self.b.post_recv(1, [self.rb.sge(16)])
        self.ra.write(b"invalidate this!")
        self.a.post_send(2, e.IBV_WR_SEND_WITH_INV, [self.ra.sge(16)], inv=victim.mr.rkey)
        self.expect_wc(self.a, 2, e.IBV_WC_SUCCESS, "Send with Invalidate")
        wc = self.expect_wc(self.b, 1, e.IBV_WC_SUCCESS, "its Receive", e.IBV_WC_RECV, 16)
        self.assertTrue(wc.wc_flags & e.IBV_WC_WITH_INV, "no IBV_WC_WITH_INV")
        self.assertEqual(wc.imm_data, victim.mr.rkey, "invalidated_rkey")
        self.assertEqual(self.rb.read(16), b"invalidate this!")
        # The invalidated STag refuses a remote Write: B Terminates, both QPs are fatal, and
        # nothing is written.
        self.ra.write(pattern(3, 64))
        self.a.post_send(3, e.IBV_WR_RDMA_WRITE, [self.ra.sge(64)],
                         remote=(victim.mr.rkey, victim.addr))
        self.expect_wc(self.a, 3, e.IBV_WC_SUCCESS, "Write to the invalidated STag")
        self.assertEqual(self.b.next_async(20), e.IBV_EVENT_QP_FATAL)
        self.assertEqual(self.a.next_async(20), e.IBV_EVENT_QP_FATAL)
        self.assertEqual(victim.read(64), bytes([GUARD_BYTE]) * 64)
        self.assertTrue(victim.guards_intact())

    def test_on_demand_regions(self):
        # ODP MRs (IBV_ACCESS_ON_DEMAND) carry every operation; B's is prefetched for writing
        # (ibv_advise_mr), A's is not.
        oa = Region(self.a.pd, 65536, REMOTE | e.IBV_ACCESS_ON_DEMAND)
        ob = Region(self.b.pd, 65536, REMOTE | e.IBV_ACCESS_ON_DEMAND)
        self.b.pd.advise_mr(e._IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE, e._IBV_ADVISE_MR_FLAG_FLUSH,
                            [ob.sge(65536)])
        data = pattern(12, 65536)
        oa.write(data)
        self.b.post_recv(1, [ob.sge(65536)])
        self.a.post_send(2, e.IBV_WR_SEND, [oa.sge(65536)])
        self.expect_wc(self.a, 2, e.IBV_WC_SUCCESS, "Send from an ODP MR")
        self.expect_wc(self.b, 1, e.IBV_WC_SUCCESS, "Receive into an ODP MR", byte_len=65536)
        self.assertEqual(ob.read(65536), data)
        oa.write(data[::-1])
        self.a.post_send(3, e.IBV_WR_RDMA_WRITE, [oa.sge(65536)], remote=(ob.mr.rkey, ob.addr))
        self.a.post_send(4, e.IBV_WR_RDMA_READ, [oa.sge(4096, 8192)],
                         remote=(ob.mr.rkey, ob.addr + 100))
        self.expect_wc(self.a, 3, e.IBV_WC_SUCCESS, "Write into an ODP MR")
        self.expect_wc(self.a, 4, e.IBV_WC_SUCCESS, "Read from an ODP MR")
        # The Read was answered after the Write was placed (RFC 5040 §5.5).
        self.assertEqual(ob.read(65536), data[::-1])
        self.assertEqual(oa.read(4096, 8192), data[::-1][100:4196])
        self.assertTrue(oa.guards_intact() and ob.guards_intact())

    def test_solicited_event(self):
        # A CQ armed for solicited completions only fires for the Send with Solicited Event
        # (RFC 5040 §6.4), not for the plain Send before it.
        b = End(DEV_B, channel=True)
        a = End(DEV_A)
        try:
            rb = Region(b.pd, 4096)
            ra = Region(a.pd, 4096)
            connect(a, b)
            b.cq.req_notify(solicited_only=True)
            for i in range(2):
                b.post_recv(10 + i, [rb.sge(64, 64 * i)])
            a.post_send(20, e.IBV_WR_SEND, [ra.sge(64)])
            self.expect_wc(a, 20, e.IBV_WC_SUCCESS, "plain Send")
            # The plain Send has arrived (its Receive can be polled) without an event.
            wc = b.poll("plain Send's Receive")
            self.assertEqual((wc.wr_id, wc.status), (10, e.IBV_WC_SUCCESS))
            if b.channel_fd is None:
                raise unittest.SkipTest("the completion channel's fd was not found")
            r, _, _ = select.select([b.channel_fd], [], [], 0.5)
            self.assertFalse(r, "the unsolicited Send fired a solicited-only CQ")
            a.post_send(21, e.IBV_WR_SEND, [ra.sge(64)],
                        flags=e.IBV_SEND_SIGNALED | e.IBV_SEND_SOLICITED)
            self.expect_wc(a, 21, e.IBV_WC_SUCCESS, "solicited Send")
            b.channel.get_cq_event(b.cq)
            b.cq.ack_events(1)
            wc = b.poll("solicited Send's Receive")
            self.assertEqual((wc.wr_id, wc.status), (11, e.IBV_WC_SUCCESS))
        finally:
            a.close()
            b.close()


class FailureTest(PairTest):
    """The failure paths with a defined outcome (RFC 5040 §5.4, §7; RFC 5041 §7): a Send or
    Write completes when TCP took it (RDMAP §5.5), so the requester sees SUCCESS even when the
    responder refuses; the responder Terminates and its QP is fatal; the Terminate makes the
    requester's QP fatal and flushes what is outstanding; nothing is written."""

    def setUp(self):
        super().setUp()
        connect(self.a, self.b)
        self.rb.write(pattern(1, 4096))
        self.ra.write(pattern(2, 4096))

    def both_fatal(self, what):
        self.assertEqual(self.b.next_async(20), e.IBV_EVENT_QP_FATAL, f"{what}: responder event")
        self.assertEqual(self.a.next_async(20), e.IBV_EVENT_QP_FATAL, f"{what}: requester event")

    def refused(self, opcode, sges, status, what, remote=None):
        """A posts one WR that B refuses: it completes with `status` (SUCCESS for a Send or
        Write, which completed when TCP took it; WR_FLUSH_ERR for a Read, which waited for the
        response the Terminate ended), both QPs become fatal and neither region changes."""
        self.a.post_send(1, opcode, sges, remote=remote)
        self.expect_wc(self.a, 1, status, what)
        self.both_fatal(what)
        self.untouched(what)

    def untouched(self, what):
        self.assertEqual(self.rb.read(4096), pattern(1, 4096), f"{what}: B's region changed")
        self.assertEqual(self.ra.read(4096), pattern(2, 4096), f"{what}: A's region changed")
        self.assert_guards(what)

    def later_wr_flushed(self, what):
        self.a.post_send(99, e.IBV_WR_SEND, [self.ra.sge(8)])
        self.expect_wc(self.a, 99, e.IBV_WC_WR_FLUSH_ERR, f"{what}: a WR after the Terminate")
        self.assertIsNone(self.a.next_async(0.2), f"{what}: a second async event")

    def test_write_with_wrong_key(self):
        bad = self.rb.mr.rkey ^ 0x5A  # same index, another key byte
        self.refused(e.IBV_WR_RDMA_WRITE, [self.ra.sge(4096)], e.IBV_WC_SUCCESS, "wrong key",
                     remote=(bad, self.rb.addr))
        self.later_wr_flushed("wrong key")

    def test_write_out_of_bounds(self):
        # One byte past the end of B's region: base-and-bounds (RFC 5041 §7.1), nothing placed.
        self.refused(e.IBV_WR_RDMA_WRITE, [self.ra.sge(64)], e.IBV_WC_SUCCESS, "out of bounds",
                     remote=(self.rb.mr.rkey, self.rb.addr + REGION - 63))

    def test_read_from_deregistered_mr(self):
        gone = self.rb.mr.rkey
        self.rb.mr.close()
        self.refused(e.IBV_WR_RDMA_READ, [self.ra.sge(4096)], e.IBV_WC_WR_FLUSH_ERR,
                     "deregistered", remote=(gone, self.rb.addr))
        self.later_wr_flushed("deregistered")

    def test_read_without_remote_read_right(self):
        wo = Region(self.b.pd, 4096, e.IBV_ACCESS_LOCAL_WRITE | e.IBV_ACCESS_REMOTE_WRITE)
        self.refused(e.IBV_WR_RDMA_READ, [self.ra.sge(64)], e.IBV_WC_WR_FLUSH_ERR,
                     "no remote read", remote=(wo.mr.rkey, wo.addr))
        self.assertTrue(wo.guards_intact())

    def test_send_without_receive(self):
        # iWARP has no RNR retry: DDP finds no buffer (RFC 5041 §7.1) and Terminates.
        self.refused(e.IBV_WR_SEND, [self.ra.sge(64)], e.IBV_WC_SUCCESS, "no receive")
        self.later_wr_flushed("no receive")

    def test_send_longer_than_receive(self):
        # The message does not fit the posted receive (RFC 5041 §7.1 untagged check 4): the
        # receive completes in error, nothing past its buffer is written.
        self.b.post_recv(1, [self.rb.sge(100)])
        self.a.post_send(2, e.IBV_WR_SEND, [self.ra.sge(200)])
        self.expect_wc(self.a, 2, e.IBV_WC_SUCCESS, "Send longer than the receive")
        self.expect_wc(self.b, 1, e.IBV_WC_LOC_LEN_ERR, "the too-small receive")
        self.assertEqual(self.rb.read(3996, 100), pattern(1, 4096)[100:],
                         "bytes past the receive were written")
        self.both_fatal("receive too small")
        self.assert_guards("receive too small")

    def test_post_in_err_is_flushed(self):
        self.b.qp.modify(QPAttr(qp_state=e.IBV_QPS_ERR), e.IBV_QP_STATE)
        self.b.post_recv(7, [self.rb.sge(8)])
        self.expect_wc(self.b, 7, e.IBV_WC_WR_FLUSH_ERR, "Receive posted in ERR")
        self.b.post_send(8, e.IBV_WR_SEND, [self.rb.sge(8)])
        self.expect_wc(self.b, 8, e.IBV_WC_WR_FLUSH_ERR, "Send posted in ERR")

    def test_destroy_with_work_outstanding(self):
        # Receives outstanding when the QP goes to ERR are flushed, in order; destroying the QP
        # afterwards leaves no completion behind.
        for i in range(5):
            self.b.post_recv(10 + i, [self.rb.sge(64, 64 * i)])
        self.b.qp.modify(QPAttr(qp_state=e.IBV_QPS_ERR), e.IBV_QP_STATE)
        for i in range(5):
            self.expect_wc(self.b, 10 + i, e.IBV_WC_WR_FLUSH_ERR, f"outstanding receive {i}")
        self.b.qp.close()
        self.assertEqual(self.b.cq.poll(4)[0], 0)

    def test_local_sge_outside_mr(self):
        # A local SGE past the end of its MR: the WR completes with a local protection error and
        # nothing is sent.
        self.b.post_recv(1, [self.rb.sge(64)])
        self.a.post_send(2, e.IBV_WR_SEND, [SGE(self.ra.addr + REGION - 8, 64, self.ra.mr.lkey)])
        wc = self.a.poll("Send from outside its MR")
        self.assertEqual((wc.wr_id, wc.status), (2, e.IBV_WC_LOC_PROT_ERR))
        self.assert_guards("local SGE outside its MR")


if __name__ == "__main__":
    unittest.main(verbosity=2)
