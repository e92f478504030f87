#!/usr/bin/env bash
# rping over kernel siw: 100 ping-pongs on siw0 with data verification (-V) on both sides.
# Proves rdma_cm + iWARP connection setup, SEND/RECV and RDMA READ/WRITE in the VM.
# needs: siw
source "$UIW_ROOT/tests/system/lib.sh"

port=7174
start_bg server rping -s -a "$SIW0_ADDR" -p $port -C 100 -V
wait_cm_listen $port
run_fg client 120 rping -c -a "$SIW0_ADDR" -p $port -C 100 -V -v
wait_bg server 30

# -v prints one "ping data: rdma-ping-N: ..." line per verified round trip, N = 0..99.
n=$(grep -c '^ping data: rdma-ping-' client.log || true)
[ "$n" = 100 ] || { show client; fail "client reported $n ping lines, want 100"; }
expect client '^ping data: rdma-ping-99: ' "the last ping (rdma-ping-99) is missing"
if grep -Eiq 'mismatch|error|fail' client.log server.log; then
  show client
  show server
  fail "rping reported an error"
fi
log "100 verified pings over siw0 ($SIW0_ADDR)"
