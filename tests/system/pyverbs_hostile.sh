#!/usr/bin/env bash
# needs: uiw
# timeout: 600
# Hostile peer (pyverbs-tests/hostile): a raw MPA/DDP/RDMAP client on a plain TCP socket against
# uiw_hostile_server (rdma_cm on uiw0, guarded regions, posted receives). Each case checks the
# exact Terminate uiw sends, what the server application sees and the guard octets.
source "$UIW_ROOT/tests/system/lib.sh"

server_bin=$UIW_BUILD/bin/uiw_hostile_server
[ -x "$server_bin" ] || fail "$server_bin missing: cmake --build \$UIW_BUILD --target uiw_hostile_server"
ls "$UIW_BUILD"/python/uiwwire*.so >/dev/null 2>&1 ||
  fail "no uiwwire module in $UIW_BUILD/python: cmake --build \$UIW_BUILD --target uiwwire"

export PYTHONPATH=$UIW_BUILD/python:$UIW_ROOT/pyverbs-tests/hostile UIW_HOSTILE_SERVER=$server_bin
export PYTHONDONTWRITEBYTECODE=1
rc=0
timeout -k 5 850 /usr/bin/python3 -m unittest -v ${PYVERBS_HOSTILE_TESTS:-test_hostile} \
  >hostile.log 2>&1 || rc=$?
grep -E " \.\.\. " hostile.log || true
/usr/bin/python3 "$UIW_ROOT/pyverbs-tests/summarize.py" hostile.log 600 || true
unittest_counts hostile.log
log "hostile-peer cases passed: $ok of ${ran:-?} (${summary:-no summary})"
[ "$rc" = 0 ] || fail "hostile-peer tests failed (rc $rc)"
