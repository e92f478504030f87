"""uiw's own pyverbs suite, beyond RFC 5040: RFC 7306 atomics and immediate data between two uiw
ends (uiw.ko agrees to them in the MPA exchange), memory windows of type 1 and 2, and
ibv_rereg_mr, on the connect-on-RTR pair of test_uiw_traffic (QP on uiw0 <-> QP on uiw1), with
the values, completions and guard bytes checked.
"""
import struct

import pyverbs.enums as e
from pyverbs.mr import MW, MWBind, MWBindInfo
from pyverbs.pyverbs_error import PyverbsRDMAError
from pyverbs.wr import SendWR

from test_uiw_traffic import GUARD_BYTE, REMOTE, PairTest, Region, connect, pattern

ATOMIC = REMOTE | e.IBV_ACCESS_REMOTE_ATOMIC
WINDOWED = REMOTE | e.IBV_ACCESS_MW_BIND


def fill(n):
    """What a fresh Region holds: its guard byte everywhere."""
    return bytes([GUARD_BYTE]) * n


def word(v):
    return struct.pack("<Q", v)


class ExtensionTest(PairTest):
    def setUp(self):
        super().setUp()
        connect(self.a, self.b)

    def atomic(self, wr_id, opcode, target, off, compare_add, swap=0):
        """a's atomic on B's `target` region at `off`; the original lands in A's region at 0."""
        wr = SendWR(wr_id=wr_id, opcode=opcode, num_sge=1, sg=[self.ra.sge(8)],
                    send_flags=e.IBV_SEND_SIGNALED)
        wr.set_wr_atomic(rkey=target.mr.rkey, addr=target.addr + off, compare_add=compare_add,
                         swap=swap)
        self.a.qp.post_send(wr)

    def original(self):
        return struct.unpack("<Q", self.ra.read(8))[0]

    def test_atomics(self):
        t = Region(self.b.pd, 4096, ATOMIC)
        t.write(word(40), 64)
        self.atomic(1, e.IBV_WR_ATOMIC_FETCH_AND_ADD, t, 64, 2)
        self.expect_wc(self.a, 1, e.IBV_WC_SUCCESS, "FetchAdd", e.IBV_WC_FETCH_ADD, 8)
        self.assertEqual((self.original(), t.read(8, 64)), (40, word(42)))
        self.atomic(2, e.IBV_WR_ATOMIC_CMP_AND_SWP, t, 64, 41, 7)  # no match: unchanged
        self.expect_wc(self.a, 2, e.IBV_WC_SUCCESS, "CmpSwap miss", e.IBV_WC_COMP_SWAP, 8)
        self.assertEqual((self.original(), t.read(8, 64)), (42, word(42)))
        self.atomic(3, e.IBV_WR_ATOMIC_CMP_AND_SWP, t, 64, 42, 7)
        self.expect_wc(self.a, 3, e.IBV_WC_SUCCESS, "CmpSwap hit", e.IBV_WC_COMP_SWAP, 8)
        self.assertEqual((self.original(), t.read(8, 64)), (42, word(7)))
        self.assertTrue(t.guards_intact())
        # RFC 7306: a target that is not 8-octet aligned is refused; the requester's WR fails
        # and the word is unchanged.
        self.atomic(4, e.IBV_WR_ATOMIC_FETCH_AND_ADD, t, 68, 1)
        wc = self.a.poll("misaligned FetchAdd")
        self.assertNotEqual(wc.status, e.IBV_WC_SUCCESS)
        self.assertEqual(t.read(8, 64), word(7))

    def test_write_and_send_with_immediate(self):
        data = pattern(5, 3000)
        self.ra.write(data)
        self.b.post_recv(10, [self.rb.sge(16)])
        self.b.post_recv(11, [self.rb.sge(4096, 8192)])
        wr = SendWR(wr_id=20, opcode=e.IBV_WR_RDMA_WRITE_WITH_IMM, num_sge=1,
                    sg=[self.ra.sge(3000)], send_flags=e.IBV_SEND_SIGNALED)
        wr.set_wr_rdma(self.rb.mr.rkey, self.rb.addr + 4096)
        wr.imm_data = 0x11223344
        self.a.qp.post_send(wr)
        self.expect_wc(self.a, 20, e.IBV_WC_SUCCESS, "Write with Immediate", e.IBV_WC_RDMA_WRITE)
        wc = self.expect_wc(self.b, 10, e.IBV_WC_SUCCESS, "its receive",
                            e.IBV_WC_RECV_RDMA_WITH_IMM, 3000)
        self.assertTrue(wc.wc_flags & e.IBV_WC_WITH_IMM)
        self.assertEqual(wc.imm_data, 0x11223344)
        self.assertEqual(self.rb.read(3000, 4096), data)
        wr = SendWR(wr_id=21, opcode=e.IBV_WR_SEND_WITH_IMM, num_sge=1, sg=[self.ra.sge(100)],
                    send_flags=e.IBV_SEND_SIGNALED)
        wr.imm_data = 0x55667788
        self.a.qp.post_send(wr)
        self.expect_wc(self.a, 21, e.IBV_WC_SUCCESS, "Send with Immediate", e.IBV_WC_SEND)
        wc = self.expect_wc(self.b, 11, e.IBV_WC_SUCCESS, "its receive", e.IBV_WC_RECV, 100)
        self.assertTrue(wc.wc_flags & e.IBV_WC_WITH_IMM)
        self.assertEqual(wc.imm_data, 0x55667788)
        self.assertEqual(self.rb.read(100, 8192), data[:100])
        self.assert_guards("immediate data")

    def write_through(self, wr_id, rkey, addr, data):
        self.ra.write(data)
        self.a.post_send(wr_id, e.IBV_WR_RDMA_WRITE, [self.ra.sge(len(data))], (rkey, addr))
        self.expect_wc(self.a, wr_id, e.IBV_WC_SUCCESS, "Write through a window")
        # A Send after the Write, received, proves the Write was placed (RFC 5040 ordering).
        self.b.post_recv(wr_id, [self.rb.sge(1)])
        self.a.post_send(wr_id + 1, e.IBV_WR_SEND, [self.ra.sge(1)])
        self.expect_wc(self.a, wr_id + 1, e.IBV_WC_SUCCESS, "fence Send")
        self.expect_wc(self.b, wr_id, e.IBV_WC_SUCCESS, "fence receive")

    def test_memory_window_type1(self):
        t = Region(self.b.pd, 8192, WINDOWED)
        mw = MW(self.b.pd, e.IBV_MW_TYPE_1)
        info = MWBindInfo(t.mr, t.addr + 4096, 1024, e.IBV_ACCESS_REMOTE_WRITE)
        self.b.qp.bind_mw(mw, MWBind(info, e.IBV_SEND_SIGNALED))
        self.expect_wc(self.b, 0, e.IBV_WC_SUCCESS, "bind", e.IBV_WC_BIND_MW)
        self.write_through(30, mw.rkey, t.addr + 4096 + 100, pattern(9, 500))
        self.assertEqual(t.read(500, 4196), pattern(9, 500))
        self.assertEqual(t.read(100, 4096), fill(100))  # the window's own bytes only
        # A bind beyond the region fails with a bind error; the window stays as it was.
        bad = MWBindInfo(t.mr, t.addr + 8000, 1024, e.IBV_ACCESS_REMOTE_WRITE)
        self.b.qp.bind_mw(mw, MWBind(bad, e.IBV_SEND_SIGNALED))
        wc = self.b.poll("bind beyond the region")
        self.assertEqual(wc.status, e.IBV_WC_MW_BIND_ERR)
        self.assertTrue(t.guards_intact())
        mw.close()

    def test_memory_window_type2_and_its_invalidation(self):
        t = Region(self.b.pd, 8192, WINDOWED)
        mw = MW(self.b.pd, e.IBV_MW_TYPE_2)
        wr = SendWR(wr_id=40, opcode=e.IBV_WR_BIND_MW, send_flags=e.IBV_SEND_SIGNALED)
        wr.set_bind_wr(mw, MWBindInfo(t.mr, t.addr, 2048, e.IBV_ACCESS_REMOTE_WRITE))
        rkey = wr.rkey  # the window's next key (pyverbs: ibv_inc_rkey)
        self.assertNotEqual(rkey, mw.rkey)
        self.b.qp.post_send(wr)
        self.expect_wc(self.b, 40, e.IBV_WC_SUCCESS, "type 2 bind", e.IBV_WC_BIND_MW)
        self.write_through(50, rkey, t.addr + 10, pattern(3, 200))
        self.assertEqual(t.read(200, 10), pattern(3, 200))
        # Local invalidation: the window's rkey is dead; the region itself is untouched.
        inv = SendWR(wr_id=41, opcode=e.IBV_WR_LOCAL_INV, send_flags=e.IBV_SEND_SIGNALED)
        inv.imm_data = rkey  # ibv_send_wr's invalidate_rkey
        self.b.qp.post_send(inv)
        self.expect_wc(self.b, 41, e.IBV_WC_SUCCESS, "local invalidate", e.IBV_WC_LOCAL_INV)
        self.ra.write(pattern(4, 64))
        self.a.post_send(52, e.IBV_WR_RDMA_WRITE, [self.ra.sge(64)], (rkey, t.addr))
        self.expect_wc(self.a, 52, e.IBV_WC_SUCCESS, "Write to the invalidated window (local)")
        # The responder refuses it: its QP goes to error (the Terminate is the peer's).
        self.assertEqual(self.b.next_async(20), e.IBV_EVENT_QP_FATAL)
        self.assertEqual(t.read(10), fill(10))  # the refused Write placed nothing
        self.assertEqual(t.read(200, 10), pattern(3, 200))
        self.assertTrue(t.guards_intact())
        mw.close()

    def bind_type2(self, t, wr_id, access):
        mw = MW(self.b.pd, e.IBV_MW_TYPE_2)
        wr = SendWR(wr_id=wr_id, opcode=e.IBV_WR_BIND_MW, send_flags=e.IBV_SEND_SIGNALED)
        wr.set_bind_wr(mw, MWBindInfo(t.mr, t.addr, 1024, access))
        self.b.qp.post_send(wr)
        self.expect_wc(self.b, wr_id, e.IBV_WC_SUCCESS, "type 2 bind", e.IBV_WC_BIND_MW)
        return mw, wr.rkey

    def test_memory_window_invalidated_by_send_with_invalidate(self):
        # RFC 5040 §5.3: the peer's Send with Invalidate names the window; the receive completes
        # with IBV_WC_WITH_INV and that rkey, and the window is dead from then on.
        t = Region(self.b.pd, 4096, WINDOWED)
        mw, rkey = self.bind_type2(t, 70, e.IBV_ACCESS_REMOTE_WRITE)
        self.write_through(72, rkey, t.addr, pattern(8, 32))
        self.b.post_recv(74, [self.rb.sge(64)])
        self.ra.write(pattern(2, 16))
        self.a.post_send(75, e.IBV_WR_SEND_WITH_INV, [self.ra.sge(16)], inv=rkey)
        self.expect_wc(self.a, 75, e.IBV_WC_SUCCESS, "Send with Invalidate")
        wc = self.expect_wc(self.b, 74, e.IBV_WC_SUCCESS, "its receive", e.IBV_WC_RECV, 16)
        self.assertTrue(wc.wc_flags & e.IBV_WC_WITH_INV)
        self.assertEqual(wc.imm_data, rkey, "invalidated_rkey")  # pyverbs: the same union
        self.ra.write(pattern(9, 32))
        self.a.post_send(76, e.IBV_WR_RDMA_WRITE, [self.ra.sge(32)], (rkey, t.addr))
        self.expect_wc(self.a, 76, e.IBV_WC_SUCCESS, "Write to the invalidated window (local)")
        self.assertEqual(self.b.next_async(20), e.IBV_EVENT_QP_FATAL)
        self.assertEqual(t.read(32), pattern(8, 32))  # nothing placed after the invalidation
        mw.close()

    def test_memory_window_without_remote_write(self):
        # A window bound for remote read only: a Write through it is refused (RFC 5040 §5.1
        # access rights), the responder's QP is fatal and nothing is placed.
        t = Region(self.b.pd, 4096, WINDOWED)
        mw, rkey = self.bind_type2(t, 80, e.IBV_ACCESS_REMOTE_READ)
        self.ra.write(pattern(1, 64))
        self.a.post_send(81, e.IBV_WR_RDMA_WRITE, [self.ra.sge(64)], (rkey, t.addr))
        self.expect_wc(self.a, 81, e.IBV_WC_SUCCESS, "Write through a read-only window (local)")
        self.assertEqual(self.b.next_async(20), e.IBV_EVENT_QP_FATAL)
        self.assertEqual(t.read(64), fill(64))
        self.assertTrue(t.guards_intact())
        mw.close()

    def test_rereg_translation_and_access(self):
        t = Region(self.b.pd, 4096, REMOTE)
        other = Region(self.b.pd, 4096, REMOTE)
        other.mr.close()  # only its mapping is used
        rkey = t.mr.rkey
        t.mr.rereg(flags=e.IBV_REREG_MR_CHANGE_TRANSLATION, pd=self.b.pd, addr=other.addr,
                   length=4096, access=0)
        self.assertEqual(t.mr.rkey, rkey)
        self.write_through(60, rkey, other.addr + 8, pattern(6, 300))
        self.assertEqual(other.read(300, 8), pattern(6, 300))
        self.assertEqual(t.read(308), fill(308))  # the old buffer is left alone
        with self.assertRaises(PyverbsRDMAError):  # remote atomic needs local write
            t.mr.rereg(flags=e.IBV_REREG_MR_CHANGE_ACCESS, pd=self.b.pd, addr=0, length=0,
                       access=e.IBV_ACCESS_REMOTE_ATOMIC)
        self.assertTrue(other.guards_intact() and t.guards_intact())
