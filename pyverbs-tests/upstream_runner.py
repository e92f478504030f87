"""Runs rdma-core's installed pyverbs suite like its run_tests.py does (same argument parser,
same test loading), with two additions: a per-test time limit, so a test blocked forever in a
verbs call (e.g. waiting for a completion event that never comes) fails alone instead of
hanging the run; and RDMATestCase's two lookups of a device's netdev and its address, which
start an `ls` and an `ip` process for every GID in every test's setUp (under the test VM's TCG
a process start costs 0.1-0.3 s), made once per argument. The upstream tests themselves are not
modified.

usage: upstream_runner.py TESTS_DIR [run_tests.py arguments, e.g. --dev uiw0 -v]
Environment: UPSTREAM_TEST_LIMIT (seconds per test, default 120).
"""
import atexit
import faulthandler
import functools
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
