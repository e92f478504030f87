#!/usr/bin/env bash
# needs: uiw siw
# Interoperability with kernel siw (RFC 5040/5041/5044 over TCP): rping with a siw0 client and a
# uiw0 server (libuiw's engine against siw's kernel engine), then a uiw0 client and a siw0 server;
# 10 verified ping-pongs each way (SEND/RECV, RDMA READ, RDMA WRITE, MPA v2 negotiation).
source "$UIW_ROOT/tests/system/lib.sh"

# rdma_cm from an address bound to a uiw device needs this in the test topology.
source "$UIW_ROOT/providers/uiw/tests/allow_local_sources.sh"
allow_local_sources

ping_pair() { # NAME SERVER_ADDR CLIENT_ADDR PORT
  local name=$1 saddr=$2 caddr=$3 port=$4 side n
  start_bg "$name-server" rping -s -a "$saddr" -p "$port" -C 10 -V -v
  wait_cm_listen "$port"
  run_fg "$name-client" 120 rping -c -a "$saddr" -I "$caddr" -p "$port" -C 10 -V -v
  wait_bg "$name-server" 30
  for side in client server; do
    n=$(grep -c 'ping data: rdma-ping-' "$name-$side.log" || true)
    [ "$n" = 10 ] || { show "$name-$side"; fail "$name $side reported $n ping lines, want 10"; }
    if grep -Eiq 'mismatch|error|fail' "$name-$side.log"; then
      show "$name-$side"
      fail "$name $side reported an error"
    fi
  done
  log "$name: 10 verified pings ($caddr -> $saddr)"
}
ping_pair siw-to-uiw "$UIW0_ADDR" "$SIW0_ADDR" 7177
ping_pair uiw-to-siw "$SIW0_ADDR" "$UIW0_ADDR" 7178
