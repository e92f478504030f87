#!/usr/bin/env bash
# perftest ib_send_bw over rxe (RoCEv2) with rdma_cm: 1000 SENDs of 64 KiB on rxe0; both
# sides must exit 0 and report a RoCE (IB transport, Ethernet link) device and a bandwidth.
# needs: rxe
source "$UIW_ROOT/tests/system/lib.sh"

args=(-R -d "$RXE0_DEV" -p 18516 -s 65536 -n 1000)
start_bg server ib_send_bw "${args[@]}"
wait_cm_listen 18516
run_fg client 180 ib_send_bw "${args[@]}" "$RXE0_ADDR"
wait_bg server 30

for side in client server; do
  expect $side 'Transport type : IB' "$side did not run over an IB-transport (RoCE) device"
  expect $side 'Link type +: Ethernet' "$side did not run over an Ethernet link"
  expect $side "Device +: $RXE0_DEV" "$side did not use $RXE0_DEV"
done
bw=$(perftest_bw client 65536 1000)
perftest_bw server 65536 1000 >/dev/null
log "ib_send_bw over $RXE0_DEV: $bw MB/s average"
