#!/usr/bin/env bash
# needs: uiw
# timeout: 300
# A handed connect-on-RTR socket kept by its owner cannot close the RTR service of its address
# to everyone (providers/uiw/tests/uiw_rtr_port_hold_check.c, as nobody): after one RTR pair's
# sockets are held past the responder QP, its socket on rtr_port with SO_REUSEADDR off, a second
# pair on the same address must connect. The service listener binds with SK_FORCE_REUSE
# (kernel/uiw_cm_conn.c); before, its bind conflicted with the held socket (in TIME-WAIT here)
# and the second pair's responder failed with EADDRINUSE. About 10 s.
source "$UIW_ROOT/tests/system/lib.sh"

test_program uiw_rtr_port_hold_check port_hold
chmod 755 . port_hold
run_fg hold 120 setpriv --reuid=nobody --regid=nogroup --clear-groups \
  ./port_hold "$UIW0_DEV" "$(cat /sys/module/uiw/parameters/rtr_port)"
show hold
expect hold '^PASS$'
