#!/usr/bin/env bash
# needs: uiw
# perftest ib_write_bw with rdma_cm (-R, required on iWARP) over uiw0 through libuiw: 1000 RDMA
# WRITEs of 64 KiB placed by the server's progress thread; both sides must exit 0 and report an
# iWARP transport and a bandwidth.
source "$UIW_ROOT/tests/system/lib.sh"

args=(-R -d "$UIW0_DEV" -p 18516 -s 65536 -n 1000)
start_bg server ib_write_bw "${args[@]}"
wait_cm_listen 18516
run_fg client 180 ib_write_bw "${args[@]}" "$UIW0_ADDR"
wait_bg server 30

for side in client server; do
  expect $side 'Transport type : IW' "$side did not run over iWARP"
  expect $side "Device +: $UIW0_DEV" "$side did not use $UIW0_DEV"
done
bw=$(perftest_bw client 65536 1000)
perftest_bw server 65536 1000 >/dev/null
log "ib_write_bw over $UIW0_DEV: $bw MB/s average"
