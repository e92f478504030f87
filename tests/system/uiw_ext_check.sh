#!/usr/bin/env bash
# needs: uiw
# timeout: 600
# providers/uiw/tests/uiw_ext_check.c over connect-on-RTR (uiw0 with uiw1, then both on uiw0):
# ibv_fork_init first and a fork() child that leaves the parent's region and traffic alone;
# ibv_create_cq_ex polled with start_poll/next_poll/end_poll and read_* (timestamps refused with
# EOPNOTSUPP); IBV_EVENT_SRQ_LIMIT_REACHED exactly once below an armed limit, none at it;
# IBV_EVENT_CQ_ERR exactly once on a CQ overrun; the ibv_wr_* API of ibv_create_qp_ex (a batch of
# Write, inline Send and two-SGE Read; wr_abort; refused batches post nothing). Data verified,
# guard bytes checked.
source "$UIW_ROOT/tests/system/lib.sh"

test_program uiw_ext_check ext_check
run_fg two-devices 300 ./ext_check "$UIW0_DEV" 0 "$UIW1_DEV" 0
expect two-devices '^PASS$'
show two-devices
run_fg one-device 300 ./ext_check "$UIW0_DEV" 0 "$UIW0_DEV" 0
expect one-device '^PASS$'
log "$(grep -c '^ok: ' two-devices.log) checks passed on $UIW0_DEV<->$UIW1_DEV and on $UIW0_DEV alone"
