#!/usr/bin/env bash
# perftest ib_send_bw over rxe (RoCEv2) with rdma_cm: 1000 SENDs of 64 KiB on rxe0; both sides
# must exit 0 and report a RoCE device (IB transport over an Ethernet link) and a bandwidth.
# needs: rxe
source "$UIW_ROOT/tests/system/lib.sh"

perftest_run ib_send_bw "$RXE0_DEV" "$RXE0_ADDR" 18516 65536 1000
for side in client server; do
  expect "ib_send_bw-$side" 'Transport type : IB' "$side did not run over an IB-transport (RoCE) device"
  expect "ib_send_bw-$side" 'Link type +: Ethernet' "$side did not run over an Ethernet link"
done
log "ib_send_bw over $RXE0_DEV: $BW MB/s average"
