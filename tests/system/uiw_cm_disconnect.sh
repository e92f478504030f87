#!/usr/bin/env bash
# needs: uiw
# timeout: 300
# Disconnect initiated by either side over uiw (providers/uiw/tests/uiw_cm_check), uiw1 client
# <-> uiw0 server: after one verified Send each way, one side calls rdma_disconnect; the other
# gets RDMA_CM_EVENT_DISCONNECTED and every receive it still has posted completes with
# IBV_WC_WR_FLUSH_ERR without any verb of its own (the engine saw the FIN); the disconnecting
# side gets DISCONNECTED and its receives flush too.
source "$UIW_ROOT/tests/system/lib.sh"
source "$UIW_ROOT/providers/uiw/tests/allow_local_sources.sh"
allow_local_sources

check=$UIW_BUILD/bin/uiw_cm_check
[ -x "$check" ] || fail "$check missing: cmake --build \$UIW_BUILD --target uiw_cm_check"

port=7482
for initiator in client server; do
  if [ $initiator = client ]; then sa=wait-close ca=disconnect; else sa=disconnect ca=wait-close; fi
  start_bg server "$check" server "$UIW0_ADDR" $port $sa
  wait_cm_listen $port
  run_fg client 120 "$check" client "$UIW0_ADDR" "$UIW1_ADDR" $port $ca
  wait_bg server 60
  for side in client server; do
    expect $side '^PASS$'
    expect $side "^$side: all [0-9]+ posted receives flushed" "$side: receives not flushed"
    expect $side "^$side: DISCONNECTED after" "$side: no DISCONNECTED event"
    cp $side.log "$initiator-initiated-$side.log"
  done
  log "disconnect by the $initiator: $(grep -h 'flushed' client.log server.log | tr '\n' ' ')"
  port=$((port + 1))
done
