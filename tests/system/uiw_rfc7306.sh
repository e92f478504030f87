#!/usr/bin/env bash
# needs: uiw
# timeout: 600
# providers/uiw/tests/uiw_rfc7306_check.c over connect-on-RTR (uiw0 with uiw1, then both on
# uiw0): the MPA Request offers RFC 7306 and the Reply accepts (UIW_MPA_RDMAP_EXT_*), and both
# use it.
# atomic_cap; FetchAdd and CmpSwap with ibv_post_send and the ibv_wr_* API, original values and
# target checked; Write and Send with Immediate (one receive each, IBV_WC_WITH_IMM, the value);
# a misaligned target, a region without remote atomic access and a deregistered one refused
# with both QPs fatal and the target unchanged.
source "$UIW_ROOT/tests/system/lib.sh"

test_program uiw_rfc7306_check rfc7306_check
run_fg two-devices 300 ./rfc7306_check "$UIW0_DEV" 0 "$UIW1_DEV" 0
expect two-devices '^PASS$'
show two-devices
run_fg one-device 300 ./rfc7306_check "$UIW0_DEV" 0 "$UIW0_DEV" 0
expect one-device '^PASS$'
log "$(grep -c '^ok: ' two-devices.log) checks passed on $UIW0_DEV<->$UIW1_DEV and on $UIW0_DEV alone"
