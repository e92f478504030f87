#!/usr/bin/env bash
# needs: uiw
# timeout: 2400
# rdma-core's own pyverbs suite (python3-pyverbs ships it gzipped under
# /usr/share/doc/rdma-core/tests) against uiw0: unpacked into the working directory, run with
# run_tests.py --dev $UIW0_DEV, pass/fail/error/skip counts printed.
# Fails when the suite crashes or hangs, when a test fails that is not a listed iWARP limit
# (pyverbs-tests/upstream_iwarp_limits.txt, each with its reason), or when fewer tests pass
# than UPSTREAM_MIN_OK. PYVERBS_UPSTREAM_DEV picks another device (e.g. siw0, rxe0: counts
# only, for comparison).
source "$UIW_ROOT/tests/system/lib.sh"

src=/usr/share/doc/rdma-core/tests
[ -f "$src/run_tests.py" ] || fail "$src/run_tests.py missing: apt-get install python3-pyverbs"
dev=${PYVERBS_UPSTREAM_DEV:-$UIW0_DEV}
mkdir -p upstream
cp -r "$src" upstream/tests
gunzip -f upstream/tests/*.gz

# The suite's huge-page tests (test_parent_domain's test_huge_page_traffic, ODP's) need 2 MiB
# pages allocated, as on a machine prepared for it; given back when the test ends.
echo 64 >/proc/sys/vm/nr_hugepages
at_exit 'echo 0 >/proc/sys/vm/nr_hugepages'

rc=0
# run_tests.py's loading and arguments plus a per-test time limit (pyverbs-tests/upstream_runner.py)
# so that one test blocked in a verbs call cannot hang the whole run.
PYTHONDONTWRITEBYTECODE=1 UPSTREAM_TEST_LIMIT=${UPSTREAM_TEST_LIMIT:-90} timeout -k 10 2200 \
  /usr/bin/python3 "$UIW_ROOT/pyverbs-tests/upstream_runner.py" upstream/tests --dev "$dev" -v \
  >upstream.log 2>&1 || rc=$?
# Counts from unittest's summary (lib.sh), failing ids from its "FAIL: id" / "ERROR: id" sections.
unittest_counts upstream.log
/usr/bin/python3 "$UIW_ROOT/pyverbs-tests/summarize.py" upstream.log 200 || true
log "upstream pyverbs suite on $dev: ran ${ran:-?}: ok $ok, failed $failed, errors $errors, skipped $skipped ($summary)"
# Skip reasons, most common first.
grep -aoE ' \.\.\. skipped .*' upstream.log | sort | uniq -c | sort -rn | head -n 30 || true
# The slowest tests and modules (upstream_runner.py), where the run's minutes go.
grep -a '^slowest' upstream.log || true
[ "$rc" != 124 ] || fail "the upstream suite hung (killed after 2200 s)"
[ -n "$ran" ] || { tail -n 40 upstream.log; fail "the upstream suite crashed (exit $rc, no summary)"; }
# Every failing test must be a listed iWARP limit (pyverbs-tests/upstream_iwarp_limits.txt).
limits=$UIW_ROOT/pyverbs-tests/upstream_iwarp_limits.txt
unexpected=()
while read -r id; do
  if why=$(grep -m1 "^$id " "$limits"); then
    log "iWARP limit: $id: ${why#"$id"}"
  else
    log "UNEXPECTED failure: $id"
    # Its traceback (unittest's section for it), for a failure a rerun may not show again.
    awk -v id="($id)" 'index($0, id) && /^(FAIL|ERROR): / { p = 1 }
                       p && /^(=+|-+)$/ && ++d > 1 { exit }
                       p' upstream.log | head -n 40
    unexpected+=("$id")
  fi
done < <(sed -n 's/^\(FAIL\|ERROR\): [^ ]* (\([^)]*\)).*/\2/p' upstream.log | sort -u)
# What the provider reported on stderr during the run (connection failures, fatal events), for
# an unexpected failure whose traceback shows only a flushed completion.
[ ${#unexpected[@]} = 0 ] || grep -a -o 'uiw: .*' upstream.log | sort | uniq -c | head -n 20 || true
# The ids once more as the last lines: CI keeps only the end of a failed test's output.
[ "$dev" != "$UIW0_DEV" ] || [ ${#unexpected[@]} = 0 ] ||
  fail "${#unexpected[@]} upstream tests failed on uiw: ${unexpected[*]}"
# uiw passed this many on 2026-11-28 (75: with RFC 7306, memory windows, rereg_mr and implicit
# on-demand paging): fewer means something that worked broke.
min_ok=${UPSTREAM_MIN_OK:-75}
[ "$dev" != "$UIW0_DEV" ] || [ "$ok" -ge "$min_ok" ] || fail "only $ok upstream tests passed (at least $min_ok did before)"
exit 0
