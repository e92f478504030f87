#!/usr/bin/env bash
# needs: uiw
# timeout: 900
# uiw's own pyverbs suite (pyverbs-tests/suite): control path on uiw0 (device, port, GID, PD, MR,
# CQ, QP state machine, SRQ) and rdma_cm flows over pyverbs CMID between uiw1 and uiw0.
source "$UIW_ROOT/tests/system/lib.sh"
source "$UIW_ROOT/providers/uiw/tests/allow_local_sources.sh"
allow_local_sources

export PYTHONPATH=$UIW_ROOT/pyverbs-tests/suite PYTHONDONTWRITEBYTECODE=1
rc=0
timeout -k 5 850 /usr/bin/python3 -m unittest -v ${PYVERBS_SUITE_TESTS:-test_uiw_verbs test_uiw_traffic test_uiw_extensions test_uiw_cm} \
  >suite.log 2>&1 || rc=$?
grep -E " \.\.\. " suite.log || true
/usr/bin/python3 "$UIW_ROOT/pyverbs-tests/summarize.py" suite.log 600 || true
unittest_counts suite.log
log "uiw pyverbs suite: ran ${ran:-?}, ok $ok (${summary:-no summary})"
[ "$rc" = 0 ] || fail "uiw pyverbs suite failed (rc $rc)"
