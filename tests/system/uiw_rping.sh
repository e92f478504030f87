#!/usr/bin/env bash
# needs: uiw
# rping between uiw1 (client) and uiw0 (server) through libuiw: rdma_cm connection setup in
# uiw.ko, socket hand-off, then SEND/RECV, RDMA READ and RDMA WRITE in the user-space engine;
# 10 ping-pongs with data verification (-V) on both sides, a graceful disconnect.
source "$UIW_ROOT/tests/system/lib.sh"

# veth-uiw0 and veth-uiw1 share one network namespace: rdma_cm resolves a destination bound to
# the client's device (oif = veth-uiw1) with ARP over the veth pair, and the peer end drops that
# ARP as a martian (its source is a local address) unless accept_local is set. Restore after.
declare -A saved
for k in all.accept_local all.rp_filter $UIW0_NETDEV.accept_local $UIW0_NETDEV.rp_filter \
  $UIW1_NETDEV.accept_local $UIW1_NETDEV.rp_filter; do
  saved[$k]=$(sysctl -n "net.ipv4.conf.$k")
done
restore() { for k in "${!saved[@]}"; do sysctl -qw "net.ipv4.conf.$k=${saved[$k]}"; done; }
trap restore EXIT
for nd in all "$UIW0_NETDEV" "$UIW1_NETDEV"; do
  sysctl -qw "net.ipv4.conf.$nd.accept_local=1" "net.ipv4.conf.$nd.rp_filter=0"
done

port=7175
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
