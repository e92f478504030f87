#!/usr/bin/env bash
# needs: uiw
# timeout: 600
# `rdma link del` and `rmmod uiw` under live traffic (uiw1 client -> uiw0 server): an rdma_cm
# pair (rping -C 0 -V: verified pings until it fails) and a connect-on-RTR pair
# (ibv_rc_pingpong -c -n 10^6). Once both move data, the devices are deleted (round "link-del")
# or the module is unloaded with the contexts open (round "rmmod"). The core destroys every
# QP (uiw.ko shuts down each handed socket, so each engine sees its connection end and flushes),
# then: every application ends within 60 s with an error (or, for rping, its DISCONNECTED
# event), none reports a payload mismatch, no
# uverbs object or uiw connection is left behind, the kernel logs no complaint, and the
# kernel's TCP socket count returns to its value before the round.
source "$UIW_ROOT/tests/system/lib.sh"
source "$UIW_ROOT/tests/system/interop_lib.bash"
interop_setup

tcp_socks() { awk '$1 == "TCP:" { print $3 }' /proc/net/sockstat; }
tcp_socks_back() { [ "$(tcp_socks)" -le "$1" ]; } # BEFORE
traffic_moves() { # NAME: rping printed five pings and four uiw QPs are in RTS
  [ "$(grep -c 'ping data' "$1-rping-client.log")" -ge 5 ] &&
    [ "$(rdma res show qp | grep uiw | grep -c ' RTS ')" -ge 4 ]
}

round() { # NAME ACTION
  local name=$1 action=$2 app rc tcp0 d0
  tcp0=$(tcp_socks)
  d0=$(dmesg | wc -l)
  start_bg "$name-rping-server" rping -s -a "$UIW0_ADDR" -p 7950 -C 0 -S 4000 -V
  wait_cm_listen 7950
  start_bg "$name-rping-client" rping -c -a "$UIW0_ADDR" -I "$UIW1_ADDR" -p 7950 -C 0 -S 4000 -V -v
  start_bg "$name-pp-server" ibv_rc_pingpong -d "$UIW0_DEV" -g 0 -p 18670 -c -n 1000000
  wait_tcp_listen 18670
  start_bg "$name-pp-client" ibv_rc_pingpong -d "$UIW1_DEV" -g 0 -p 18670 -c -n 1000000 "$UIW0_ADDR"
  # Both pairs move data: rping prints its pings, the pingpong pair holds a connected QP pair.
  poll_until 60 0.2 traffic_moves "$name" || {
    show "$name-rping-client" | tail -5
    rdma res show qp
    fail "$name: the traffic did not start"
  }
  sleep 2
  log "$name: $(grep -c 'ping data' "$name-rping-client.log") pings verified so far; $action"
  case $action in
  link-del) rdma link del "$UIW0_DEV" && rdma link del "$UIW1_DEV" || fail "$name: rdma link del" ;;
  rmmod) rmmod uiw || fail "$name: rmmod uiw with live contexts" ;;
  esac
  for app in rping-server rping-client pp-server pp-client; do
    if ! ends_within "${BG_PID[$name-$app]}" 60; then
      show "$name-$app" | tail -n 10
      fail "$name: $app still runs 60 s after $action"
    fi
    rc=0
    wait "${BG_PID[$name-$app]}" || rc=$?
    # rping ends with 0 when its connection is DISCONNECTED (it prints the event).
    [ "$rc" != 0 ] || grep -q 'DISCONNECT EVENT' "$name-$app.log" ||
      { show "$name-$app" | tail -n 10; fail "$name: $app exited 0 after $action, with no error"; }
    if grep -Eiq 'mismatch|miscompare' "$name-$app.log"; then
      show "$name-$app" | tail -n 10
      fail "$name: $app saw corrupted data"
    fi
    log "$name: $app exited $rc: $(grep -v 'ping data' "$name-$app.log" | tail -n 1 | cut -c1-100)"
  done
  if dmesg | tail -n +"$((d0 + 1))" | grep -E 'BUG|WARNING|Oops|general protection|KASAN|slub'; then
    fail "$name: the kernel complained (above)"
  fi
  [ "$action" = rmmod ] && { insmod "$UIW_VM_UIW_KO" || fail "insmod $UIW_VM_UIW_KO"; }
  rdma link add "$UIW0_DEV" type uiw netdev "$UIW0_NETDEV" 2>/dev/null || true
  rdma link add "$UIW1_DEV" type uiw netdev "$UIW1_NETDEV" 2>/dev/null || true
  [ -z "$(rdma res show qp | grep uiw)" ] || { rdma res show qp; fail "$name: QPs left behind"; }
  poll_until 60 0.2 tcp_socks_back "$tcp0" || { ss -tan; fail "$name: TCP sockets $(tcp_socks), $tcp0 before"; }
  log "PASS $name: every application ended with an error, TCP sockets back to $(tcp_socks) (before: $tcp0)"
}

round link-del link-del
round rmmod rmmod
echo "PASS: link del and rmmod under traffic end in errors, nothing left behind"
