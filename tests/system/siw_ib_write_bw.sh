#!/usr/bin/env bash
# perftest ib_write_bw over kernel siw with rdma_cm (-R, required on iWARP): 1000 RDMA WRITEs
# of 64 KiB on siw0; both sides must exit 0 and report an iWARP transport and a bandwidth.
# needs: siw
source "$UIW_ROOT/tests/system/lib.sh"

args=(-R -d "$SIW0_DEV" -p 18515 -s 65536 -n 1000)
start_bg server ib_write_bw "${args[@]}"
wait_cm_listen 18515
run_fg client 120 ib_write_bw "${args[@]}" "$SIW0_ADDR"
wait_bg server 30

for side in client server; do
  expect $side 'Transport type : IW' "$side did not run over iWARP"
  expect $side "Device +: $SIW0_DEV" "$side did not use $SIW0_DEV"
done
bw=$(perftest_bw client 65536 1000)
perftest_bw server 65536 1000 >/dev/null
log "ib_write_bw over $SIW0_DEV: $bw MB/s average"
