#!/usr/bin/env bash
# needs: uiw siw
# timeout: 2400
# perftest with rdma_cm (-R) between a uiw device and a siw device, each tool in both directions
# (uiw server / siw client and siw server / uiw client), MPA revision 2 with IRD/ORD, CRC off:
# ib_write_bw, ib_read_bw, ib_send_bw (64 KiB x 200) and ib_write_lat, ib_read_lat, ib_send_lat
# (64 B x 200). The devices sit on a veth pair with the siw end in its own namespace
# (interop_netns: in one namespace perftest's client lands on its server's device, so this test
# used to run uiw0 <-> uiw0 and siw0 <-> siw0); perftest_devices first checks in `rdma res`
# that each side's QP is on its own device, in both directions.
# ib_write_lat's server posts the first Write. As MPA Responder uiw sends no FPDU before it
# received one (RFC 5044 §7.1.2); siw's initiator asks for no RTR unless told (peer_to_peer,
# a module parameter of the tunable siw), so with a siw client the two would wait for each
# other for ever (siw as responder does not keep the rule). That pair runs with siw in
# peer-to-peer mode: its RTR (RFC 6581) is the first FPDU.
# perftest has no data check for these tools; rping (interop_siw_rping) verifies data.
source "$UIW_ROOT/tests/system/lib.sh"
source "$UIW_ROOT/tests/system/interop_lib.bash"
interop_setup
# A failure prints both connection managers' messages (a CI run of the old, single-namespace
# form of this test failed with REJECTED / -ECONNREFUSED and left nothing that said why).
kernel_cm_debug
siw_tunable
interop_netns

port=18600
syn_waits_for_listener $port $((port + 99))
perftest_devices devices-uiw-srv ib_send_bw "$IXU_DEV" "$IXU_ADDR" "$IXS_DEV" "$IXS_ADDR" $((port++))
perftest_devices devices-siw-srv ib_send_bw "$IXS_DEV" "$IXS_ADDR" "$IXU_DEV" "$IXU_ADDR" $((port++))
for tool in ib_write_bw ib_read_bw ib_send_bw ib_write_lat ib_read_lat ib_send_lat; do
  size=65536
  case $tool in *_lat) size=64 ;; esac
  [ $tool = ib_write_lat ] && siw_set peer_to_peer=Y
  interop_perftest "$tool-uiw-srv" $tool "$IXU_DEV" "$IXU_ADDR" "$IXS_DEV" "$IXS_ADDR" \
    $((port++)) $size 200
  siw_set peer_to_peer=N
  interop_perftest "$tool-siw-srv" $tool "$IXS_DEV" "$IXS_ADDR" "$IXU_DEV" "$IXU_ADDR" \
    $((port++)) $size 200
done
echo "PASS: perftest uiw <-> siw"
