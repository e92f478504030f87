#!/usr/bin/env bash
# needs: uiw siw
# timeout: 2400
# perftest with rdma_cm (-R) between uiw0 and siw0, each tool in both directions (uiw server /
# siw client and siw server / uiw client), MPA revision 2 with IRD/ORD, CRC off: ib_write_bw,
# ib_read_bw, ib_send_bw (64 KiB x 200) and ib_write_lat, ib_read_lat, ib_send_lat (64 B x 200).
# perftest has no data check for these tools; rping (interop_siw_rping) verifies data.
source "$UIW_ROOT/tests/system/lib.sh"
source "$UIW_ROOT/tests/system/interop_lib.bash"
interop_setup
# One CI run saw siw refuse uiw0's MPA Reply (REJECTED, -ECONNREFUSED: siw_proc_mpareply says
# that only of a Reply with M set while the plain siw asks for no CRC) and could not say why.
kernel_cm_debug

port=18600
for tool in ib_write_bw ib_read_bw ib_send_bw ib_write_lat ib_read_lat ib_send_lat; do
  size=65536
  case $tool in *_lat) size=64 ;; esac
  perftest_pair "$tool-uiw-srv" $tool "$UIW0_DEV" "$UIW0_ADDR" "$SIW0_DEV" "$SIW0_ADDR" \
    $((port++)) $size 200
  perftest_pair "$tool-siw-srv" $tool "$SIW0_DEV" "$SIW0_ADDR" "$UIW0_DEV" "$UIW0_ADDR" \
    $((port++)) $size 200
done
echo "PASS: perftest uiw <-> siw"
