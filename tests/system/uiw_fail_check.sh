#!/usr/bin/env bash
# needs: uiw
# timeout: 600
# providers/uiw/tests/uiw_fail_check.c: connect-on-RTR with both QPs in one process (uiw0 with
# uiw1, then both on uiw0), data verified, then every failure path with its exact outcome
# (completion status, one QP fatal event per side and no other event, the Terminate's
# layer/type/code, M/D/R and echoed headers as sent and as decoded by the peer, guard bytes):
# wrong-key Write, Write to and Read from a deregistered MR, QP in ERR (flush), Send with no
# receive, SQ/RQ overflow (ENOMEM), outstanding work flushed before destroy, a peer process
# exiting with a live connection (QP fatal, receive flushed, no Terminate).
source "$UIW_ROOT/tests/system/lib.sh"

test_program uiw_fail_check fail_check
run_fg two-devices 300 ./fail_check "$UIW0_DEV" 0 "$UIW1_DEV" 0
expect two-devices '^PASS$'
show two-devices
run_fg one-device 300 ./fail_check "$UIW0_DEV" 0 "$UIW0_DEV" 0
expect one-device '^PASS$'
log "$(grep -c '^ok: ' two-devices.log) checks passed on $UIW0_DEV<->$UIW1_DEV and on $UIW0_DEV alone"
