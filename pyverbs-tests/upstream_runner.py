"""Runs rdma-core's installed pyverbs suite like its run_tests.py does (same argument parser,
same test loading), with three additions: a per-test time limit, so a test blocked forever in
a verbs call (e.g. waiting for a completion event that never comes) fails alone instead of
hanging the run; RDMATestCase's two lookups of a device's netdev and its address, which start
an `ls` and an `ip` process for every GID in every test's setUp (under the test VM's TCG a
process start costs 0.1-0.3 s), made once per argument; and in a test listed as an iWARP limit
(upstream_iwarp_limits.txt), a player process that waits for a sibling which already failed is
ended at once rather than after the suite's 15 s (the verdict is the same: the failed sibling
decides it; a listed test whose players both succeed runs as it is). The upstream tests
themselves are not modified.

usage: upstream_runner.py TESTS_DIR [run_tests.py arguments, e.g. --dev uiw0 -v]
Environment: UPSTREAM_TEST_LIMIT (seconds per test, default 120).
"""
import atexit
import faulthandler
import functools
import multiprocessing.context
import os
import signal
import sys
import time
import unittest
from importlib.machinery import SourceFileLoader

tests_dir = os.path.abspath(sys.argv.pop(1))
sys.path.insert(0, tests_dir)
from args_parser import parser  # noqa: E402  (the suite's own parser)

LIMIT = int(os.environ.get("UPSTREAM_TEST_LIMIT", "120"))
durations = {}

with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "upstream_iwarp_limits.txt")) as f:
    IWARP_LIMITS = {line.split()[0] for line in f if line.strip() and not line.startswith("#")}
running = {"test": None, "players": []}


class Player(multiprocessing.context.ForkProcess):
    """The suite's rdma_cm players (two_nodes_rdmacm_traffic forks two and joins each for up to
    15 s): exit status 0 passed, 5 skipped, 1-4 failed with an exception."""

    def start(self):
        super().start()
        running["players"].append(self)

    def join(self, timeout=None):
        super().join(timeout)
        # As two_nodes_rdmacm_traffic reads them: 1-4 is an exception in the player (a signal's
        # negative status or another code is not, so such a sibling ends nobody).
        failed = [p for p in running["players"]
                  if p is not self and p.exitcode is not None and 0 < p.exitcode < 5]
        if running["test"] in IWARP_LIMITS and failed and self.is_alive():
            self.terminate()
            super().join(5)


multiprocessing.context.ForkContext.Process = Player


@atexit.register
def print_slowest():
    # Where the suite's minutes go under TCG: the ten slowest tests, after unittest's summary.
    slowest = sorted(durations.items(), key=lambda kv: kv[1], reverse=True)[:10]
    for test_id, secs in slowest:
        print(f"slowest: {secs:6.1f}s {test_id}", file=sys.stderr)
    # And per module (tests.test_mlx5_cq...): what loading a module whose tests all skip costs.
    modules = {}
    for test_id, secs in durations.items():
        module = test_id.rsplit(".", 2)[0]
        count, total = modules.get(module, (0, 0.0))
        modules[module] = (count + 1, total + secs)
    for module, (count, total) in sorted(modules.items(), key=lambda kv: kv[1][1], reverse=True)[:15]:
        print(f"slowest module: {total:6.1f}s {count:3d} tests {module}", file=sys.stderr)


class TimedResult(unittest.TextTestResult):
    def startTest(self, test):
        def expired(signum, frame):
            raise TimeoutError(f"{test.id()} exceeded {LIMIT}s (uiw runner's time limit)")

        signal.signal(signal.SIGALRM, expired)
        signal.alarm(LIMIT)
        # If the alarm cannot interrupt (e.g. a retried system call), dump stacks and exit.
        faulthandler.dump_traceback_later(LIMIT * 3, exit=True)
        self.started = time.monotonic()
        running["test"], running["players"] = test.id(), []
        super().startTest(test)

    def stopTest(self, test):
        signal.alarm(0)
        faulthandler.cancel_dump_traceback_later()
        durations[test.id()] = time.monotonic() - self.started
        super().stopTest(test)


tests = SourceFileLoader("tests", os.path.join(tests_dir, "__init__.py")).load_module()
# The netdev of a device and the address of a netdev do not change during the run.
base = sys.modules["tests.base"].RDMATestCase
for lookup in ("get_net_name", "get_ip_mac_address"):
    setattr(base, lookup, staticmethod(functools.lru_cache(maxsize=None)(getattr(base, lookup))))
parser.parse_args()
class TimedRunner(unittest.TextTestRunner):
    resultclass = TimedResult


# A runner class (not an instance), so unittest.main passes -v on as the verbosity.
unittest.main(module=tests, testRunner=TimedRunner)
