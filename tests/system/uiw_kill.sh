#!/usr/bin/env bash
# needs: uiw
# timeout: 600
# kill -9 of one side in the middle of a transfer, uiw1 client <-> uiw0 server:
#  1. uiw_cm_check streams 64 KiB RDMA Writes from the client into the server; the writer is
#     killed: the server gets DISCONNECTED, its posted receives flush, it exits 0.
#  2. the same with the server (the Write target) killed: the writer gets an error completion
#     or DISCONNECTED and exits 0.
#  3. rping -C 100000 with the client killed: the rping server ends by itself.
# Then uiw0 still works (a new verified rping), no QP or cm_id is left behind, and
# `rdma link del` + `rmmod uiw` succeed (the topology is restored afterwards).
source "$UIW_ROOT/tests/system/lib.sh"
source "$UIW_ROOT/providers/uiw/tests/allow_local_sources.sh"
allow_local_sources

check=$UIW_BUILD/bin/uiw_cm_check
[ -x "$check" ] || fail "$check missing: cmake --build \$UIW_BUILD --target uiw_cm_check"
dmesg_start=$(dmesg | wc -l)

port=7500
for victim in client server; do
  if [ $victim = client ]; then survivor=server; else survivor=client; fi
  start_bg server env WAIT_SECS=120 "$check" server "$UIW0_ADDR" $port idle
  wait_cm_listen $port
  start_bg client env WAIT_SECS=120 "$check" client "$UIW0_ADDR" "$UIW1_ADDR" $port write-stream
  wait_log client '^client: streaming, [0-9]+ writes done' 120
  kill -9 "${BG_PID[$victim]}"
  log "killed the $victim (pid ${BG_PID[$victim]}) mid-transfer"
  wait "${BG_PID[$victim]}" 2>/dev/null || true
  start=$(date +%s)
  wait_bg $survivor 90
  expect $survivor '^PASS$'
  if [ $survivor = server ]; then
    expect server '^server: all [0-9]+ posted receives flushed' "server: receives not flushed"
  else
    expect client '^client: peer gone after' "client did not notice the peer going away"
  fi
  log "$survivor noticed within $(($(date +%s) - start)) s: $(grep -hE 'peer gone|flushed' \
    $survivor.log | tr '\n' ' ')"
  cp client.log "kill-$victim-client.log"
  cp server.log "kill-$victim-server.log"
  port=$((port + 1))
done

# An unmodified application: the rping server survives its client's death and ends.
start_bg rping-server rping -s -a "$UIW0_ADDR" -p $port -C 100000 -S 4096
wait_cm_listen $port
start_bg rping-client rping -c -a "$UIW0_ADDR" -I "$UIW1_ADDR" -p $port -C 100000 -S 4096 -v
wait_log rping-client '^ping data: rdma-ping-20' 120
kill -9 "${BG_PID[rping-client]}"
wait "${BG_PID[rping-client]}" 2>/dev/null || true
pid=${BG_PID[rping-server]}
ends_within "$pid" 60 || { show rping-server; fail "rping server still runs 60 s after its client was killed"; }
log "rping server ended after its client was killed (status $(wait "$pid"; echo $?))"
port=$((port + 1))

# uiw0 keeps working for new connections.
start_bg server rping -s -a "$UIW0_ADDR" -p $port -C 10 -V -v
wait_cm_listen $port
run_fg client 120 rping -c -a "$UIW0_ADDR" -I "$UIW1_ADDR" -p $port -C 10 -V -v
wait_bg server 30
n=$(grep -c 'ping data: rdma-ping-' client.log || true)
[ "$n" = 10 ] || { show client; fail "new rping after the kills: $n verified pings, want 10"; }
log "a new rping $UIW1_DEV -> $UIW0_DEV after the kills: 10 verified pings"

# Nothing is left: no QP, no cm_id on the uiw devices.
sleep 1
left=$(rdma res show qp 2>/dev/null | grep -E "link (uiw0|uiw1)/" || true)
[ -z "$left" ] || fail "QPs left on the uiw devices: $left"
left=$(rdma res show cm_id 2>/dev/null | grep -E "link (uiw0|uiw1)/" || true)
[ -z "$left" ] || fail "cm_ids left on the uiw devices: $left"

# The devices go and the module unloads; then the topology comes back.
rdma link del "$UIW0_DEV" || fail "rdma link del $UIW0_DEV"
rdma link del "$UIW1_DEV" || fail "rdma link del $UIW1_DEV"
rmmod uiw || fail "rmmod uiw"
log "rdma link del + rmmod uiw succeeded"
insmod "$UIW_VM_UIW_KO" || fail "insmod $UIW_VM_UIW_KO"
rdma link add "$UIW0_DEV" type uiw netdev "$UIW0_NETDEV" || fail "rdma link add $UIW0_DEV"
rdma link add "$UIW1_DEV" type uiw netdev "$UIW1_NETDEV" || fail "rdma link add $UIW1_DEV"
if dmesg | tail -n +"$((dmesg_start + 1))" | grep -E 'BUG|WARNING|Oops|Call Trace'; then
  fail "kernel complained (above)"
fi
