#!/usr/bin/env bash
# perftest ib_write_bw over kernel siw with rdma_cm (-R, required on iWARP): 1000 RDMA WRITEs
# of 64 KiB on siw0; both sides must exit 0 and report an iWARP transport and a bandwidth.
# needs: siw
source "$UIW_ROOT/tests/system/lib.sh"

perftest_run ib_write_bw "$SIW0_DEV" "$SIW0_ADDR" 18515 65536 1000
expect ib_write_bw-client 'Transport type : IW' "the client did not run over iWARP"
expect ib_write_bw-server 'Transport type : IW' "the server did not run over iWARP"
log "ib_write_bw over $SIW0_DEV: $BW MB/s average"
