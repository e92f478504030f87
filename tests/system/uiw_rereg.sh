#!/usr/bin/env bash
# needs: uiw
# timeout: 300
# ibv_rereg_mr with the peer writing into the region (providers/uiw/tests/uiw_rereg_check.c,
# connect-on-RTR, uiw0 with uiw1, then both on uiw0): a new translation under the same rkey,
# 2000 Writes streaming through access changes, a PD change and back, a region with a bound
# window refused, remote write removed (the next Write refused, the buffer unchanged).
source "$UIW_ROOT/tests/system/lib.sh"

test_program uiw_rereg_check rereg_check
run_fg two-devices 240 ./rereg_check "$UIW0_DEV" 0 "$UIW1_DEV" 0
expect two-devices '^PASS$'
show two-devices
run_fg one-device 240 ./rereg_check "$UIW0_DEV" 0 "$UIW0_DEV" 0
expect one-device '^PASS$'
log "$(grep -c '^ok: ' two-devices.log) checks passed on $UIW0_DEV<->$UIW1_DEV and on $UIW0_DEV alone"
