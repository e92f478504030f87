#!/usr/bin/env bash
# needs: uiw
# timeout: 600
# providers/uiw/tests/uiw_fail_check.c: connect-on-RTR with both QPs in one process (uiw0 with
# uiw1, then both on uiw0), data verified, then the failure paths with defined outcomes: wrong
# rkey (Terminate, QP fatal both sides, nothing written), QP in ERR (flush), Send with no
# receive (Terminate), SQ/RQ overflow (ENOMEM), outstanding work flushed before destroy, a peer
# process exiting with a live connection. Guard bytes around every region are checked.
source "$UIW_ROOT/tests/system/lib.sh"

gcc -O2 -Wall -Wextra -Werror -o fail_check "$UIW_ROOT/providers/uiw/tests/uiw_fail_check.c" \
  -libverbs || fail "cannot build uiw_fail_check"
run_fg two-devices 300 ./fail_check "$UIW0_DEV" 0 "$UIW1_DEV" 0
expect two-devices '^PASS$'
run_fg one-device 300 ./fail_check "$UIW0_DEV" 0 "$UIW0_DEV" 0
expect one-device '^PASS$'
log "$(grep -c '^ok: ' two-devices.log) checks passed on $UIW0_DEV<->$UIW1_DEV and on $UIW0_DEV alone"
