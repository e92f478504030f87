"""uiw's own pyverbs suite, rdma_cm flows (pyverbs CMID) between uiw1 (active) and uiw0
(passive, cm_server.py in its own process). Needs allow_local_sources (tests/system/
pyverbs_suite.sh sources providers/uiw/tests/allow_local_sources.sh).
"""
import os
import subprocess
import sys
import time
import unittest

import pyverbs.cm_enums as ce
import pyverbs.enums as e
from pyverbs.cmid import AddrInfo, CMID, ConnParam
from pyverbs.pyverbs_error import PyverbsError, PyverbsRDMAError
from pyverbs.qp import QPCap, QPInitAttr
from watchdog import TimeLimit

SRV_ADDR = os.environ.get("UIW0_ADDR", "10.99.1.1")
CLI_ADDR = os.environ.get("UIW1_ADDR", "10.99.2.1")
HERE = os.path.dirname(os.path.abspath(__file__))


class CmTest(TimeLimit):
    port = 7400
    time_limit = 120

    def setUp(self):
        super().setUp()
        CmTest.port += 1
        self.srv = None

    def tearDown(self):
        if self.srv and self.srv.poll() is None:
            self.srv.kill()
            self.srv.wait()
        super().tearDown()

    def start_server(self, *args):
        self.srv = subprocess.Popen([sys.executable, os.path.join(HERE, "cm_server.py"),
                                     SRV_ADDR, str(self.port), *args], stdout=subprocess.PIPE,
                                    stderr=subprocess.STDOUT, text=True)
        # Lines before "listening" (library warnings on the merged stderr) are kept for the
        # failure message; EOF means the server died first.
        seen = []
        for line in self.srv.stdout:
            if line.strip() == "listening":
                return
            seen.append(line)
        self.fail("cm_server.py exited before listening:\n" + "".join(seen))

    def server_result(self):
        out, _ = self.srv.communicate(timeout=120)
        self.assertEqual(self.srv.returncode, 0, out)
        self.assertIn("ok", out.split(), out)

    def client(self):
        ai = AddrInfo(src=CLI_ADDR, dst=SRV_ADDR, dst_service=str(self.port),
                      port_space=ce.RDMA_PS_TCP)
        init = QPInitAttr(qp_type=e.IBV_QPT_RC, cap=QPCap(max_send_wr=8, max_recv_wr=8))
        return CMID(creator=ai, qp_init_attr=init)

    def echo(self, n, size):
        self.start_server("echo", str(n), str(size))
        c = self.client()
        mr = c.reg_msgs(size)
        c.connect(ConnParam())
        self.assertEqual(c.dev_name if isinstance(c.dev_name, str) else c.dev_name.decode(),
                         os.environ.get("UIW1_DEV", "uiw1"))
        for i in range(n):
            payload = bytes((i * 7 + j) % 256 for j in range(size))
            mr.write(payload, size)
            c.post_recv(mr, size)
            c.post_send(mr, 0, size)
            wc = c.get_send_comp()
            self.assertEqual(wc.status, e.IBV_WC_SUCCESS)
            wc = c.get_recv_comp()
            self.assertEqual((wc.status, wc.byte_len), (e.IBV_WC_SUCCESS, size))
            self.assertEqual(mr.read(size, 0), payload, f"echo {i} differs")
        self.server_result()
        c.close()

    def test_echo_small(self):
        self.echo(10, 1)

    def test_echo_4k(self):
        self.echo(5, 4096)

    def test_echo_64k(self):
        # Larger than one FPDU: several DDP segments per message.
        self.echo(3, 65536)

    def test_rdma_write_read(self):
        size = 8192
        self.start_server("rdma", str(size))
        c = self.client()
        msg = c.reg_msgs(64)
        c.post_recv(msg, 64)
        c.connect(ConnParam(resources=4, depth=4))
        wc = c.get_recv_comp()
        self.assertEqual(wc.status, e.IBV_WC_SUCCESS)
        waddr, wkey, raddr, rkey = (int(x, 16) for x in msg.read(64, 0).rstrip(b"\0").split())
        local = c.reg_read(size)  # local buffer for the Write source / Read sink
        data = bytes((j * 13) % 256 for j in range(size))
        local.write(data, size)
        c.post_write(local, size, waddr, wkey, e.IBV_SEND_SIGNALED)
        self.assertEqual(c.get_send_comp().status, e.IBV_WC_SUCCESS)
        local.write(bytes(size), size)
        c.post_read(local, size, raddr, rkey, e.IBV_SEND_SIGNALED)
        wc = c.get_send_comp()
        self.assertEqual((wc.status, wc.opcode), (e.IBV_WC_SUCCESS, e.IBV_WC_RDMA_READ))
        self.assertEqual(local.read(size, 0), bytes(i % 251 for i in range(size)))
        c.post_recv(msg, 64)
        done = c.reg_msgs(64)
        done.write(b"done".ljust(64, b"\0"), 64)
        c.post_send(done, 0, 64)
        self.assertEqual(c.get_send_comp().status, e.IBV_WC_SUCCESS)
        self.assertEqual(c.get_recv_comp().status, e.IBV_WC_SUCCESS)
        self.assertEqual(msg.read(64, 0), data[:64], "the server's region lacks our Write")
        self.server_result()
        c.close()

    def test_send_beyond_its_mr_is_a_local_protection_error(self):
        # An SGE running past the end of its MR: the WR completes with a local protection
        # error (the engine checks local bounds when the WR is posted) and the QP fails.
        self.start_server("echo", "1", "64")
        c = self.client()
        mr = c.reg_msgs(64)
        c.connect(ConnParam())
        c.post_send(mr, 0, 128)
        wc = c.get_send_comp()
        self.assertEqual(wc.status, e.IBV_WC_LOC_PROT_ERR)
        c.close()

    def test_reject(self):
        self.start_server("reject")
        c = self.client()
        with self.assertRaises((PyverbsRDMAError, PyverbsError)):
            c.connect(ConnParam())
        self.server_result()
        c.close()

    def test_no_listener(self):
        c = self.client()
        with self.assertRaises((PyverbsRDMAError, PyverbsError)):
            c.connect(ConnParam())
        c.close()


if __name__ == "__main__":
    unittest.main(verbosity=2)
