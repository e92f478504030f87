#!/usr/bin/env bash
# needs: uiw
# rping between uiw1 (client) and uiw0 (server) through libuiw: rdma_cm connection setup in
# uiw.ko, socket hand-off, then SEND/RECV, RDMA READ and RDMA WRITE in the user-space engine;
# 10 ping-pongs with data verification (-V) on both sides, a graceful disconnect.
source "$UIW_ROOT/tests/system/lib.sh"

# rdma_cm from an address bound to a uiw device needs this in the test topology.
source "$UIW_ROOT/providers/uiw/tests/allow_local_sources.sh"
allow_local_sources

port=7175
# rping's own teardown race after a complete run (lib.sh rping_exit_race) is not uiw's.
EXIT_ACCEPT="rping_exit_race 10"
start_bg server rping -s -a "$UIW0_ADDR" -p $port -C 10 -V -v
wait_cm_listen $port
run_fg client 120 rping -c -a "$UIW0_ADDR" -I "$UIW1_ADDR" -p $port -C 10 -V -v
wait_bg server 30

# -v prints one "ping data: rdma-ping-N: ..." line per verified round trip, N = 0..9.
for side in client server; do
  n=$(grep -c 'ping data: rdma-ping-' $side.log || true)
  [ "$n" = 10 ] || { show $side; fail "$side reported $n ping lines, want 10"; }
done
expect client '^ping data: rdma-ping-9: ' "the last ping (rdma-ping-9) is missing"
if grep -Eiq 'mismatch|error|fail' client.log server.log; then
  show client
  show server
  fail "rping reported an error"
fi
log "10 verified pings $UIW1_DEV ($UIW1_ADDR) -> $UIW0_DEV ($UIW0_ADDR)"
