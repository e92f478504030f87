"""Per-test time limit for the pyverbs suites: blocking verbs calls (get_cq_event,
rdma_get_recv_comp) would otherwise hang the whole run. SIGALRM interrupts the blocked system
call (python handlers are installed without SA_RESTART) and the handler fails the test; a stack
dump and exit follow if even that does not return."""
import faulthandler
import signal
import unittest


class TimeLimit(unittest.TestCase):
    time_limit = 60

    def setUp(self):
        super().setUp()

        def expired(signum, frame):
            raise TimeoutError(f"test exceeded {self.time_limit}s (blocked in a verbs call)")

        signal.signal(signal.SIGALRM, expired)
        signal.alarm(self.time_limit)
        faulthandler.dump_traceback_later(self.time_limit * 3, exit=True)

    def tearDown(self):
        signal.alarm(0)
        faulthandler.cancel_dump_traceback_later()
        super().tearDown()
