#!/usr/bin/env bash
# needs: uiw
# timeout: 400
# rping at rping's limits between uiw1 (client) and uiw0 (server): 1000 round trips of 65000
# bytes with data verification (-V) on both sides; both exit 0 after a graceful disconnect.
source "$UIW_ROOT/tests/system/lib.sh"
source "$UIW_ROOT/providers/uiw/tests/allow_local_sources.sh"
allow_local_sources
# rping (without -v) may end in its own teardown race after a complete run (lib.sh).
EXIT_ACCEPT="rping_exit_race -"

port=7176
start_bg server rping -s -a "$UIW0_ADDR" -p $port -C 1000 -S 65000 -V
wait_cm_listen $port
run_fg client 300 rping -c -a "$UIW0_ADDR" -I "$UIW1_ADDR" -p $port -C 1000 -S 65000 -V
wait_bg server 60
if grep -Eiq 'mismatch|error|fail' client.log server.log; then
  show client
  show server
  fail "rping reported an error"
fi
log "1000 verified 65000-byte rping round trips $UIW1_DEV -> $UIW0_DEV"
