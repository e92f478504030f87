#!/usr/bin/env bash
# needs: uiw siw
# timeout: 1200
# RFC 6581 peer-to-peer (RTR) variants and clean refusals between uiw0 and siw0 (rping -V,
# 20 x 1000 bytes, unless refused):
#   - uiw initiator offering Write RTR only, Read RTR only, both (siw responder picks one);
#   - siw initiator (tunable peer_to_peer, rtr_type) offering Write, Read, both to uiw;
#   - uiw initiator without peer-to-peer (mpa_p2p=N), MPA revision 2;
#   - Markers: uiw asks for them (mpa_markers 1 as initiator, 2 as responder); siw never
#     inserts Markers: it rejects a Request with M (Reply with R, RFC 5044 §7.1.2) and fails on
#     a Reply with M; both refusals must be clean;
#   - CRC strict siw (mpa_crc_strict, CRC off) against uiw requiring CRC: refused both ways.
source "$UIW_ROOT/tests/system/lib.sh"
source "$UIW_ROOT/tests/system/interop_lib.bash"
interop_setup
siw_tunable

port=7600
for rtr in 1 2 3; do
  uiw_set mpa_rtr=$rtr
  rping_pair "uiw-to-siw-rtr$rtr" "$SIW0_ADDR" "$UIW0_ADDR" $((port++)) 20 1000
done
uiw_set mpa_rtr=3
siw_set peer_to_peer=Y
for rt in 128 64 192; do
  siw_set rtr_type=$rt
  rping_pair "siw-to-uiw-rtr$rt" "$UIW0_ADDR" "$SIW0_ADDR" $((port++)) 20 1000
done
siw_set peer_to_peer=N rtr_type=192
uiw_set mpa_p2p=N
rping_pair uiw-to-siw-nop2p "$SIW0_ADDR" "$UIW0_ADDR" $((port++)) 20 1000
uiw_set mpa_p2p=Y

uiw_set mpa_markers=1
rping_refused uiw-to-siw-markers-req "$SIW0_ADDR" "$UIW0_ADDR" $((port++))
uiw_set mpa_markers=2
rping_refused siw-to-uiw-markers-rep "$UIW0_ADDR" "$SIW0_ADDR" $((port++))
uiw_set mpa_markers=0

siw_set mpa_crc_strict=Y
uiw_set mpa_crc=Y
rping_refused uiw-to-siw-crc-strict "$SIW0_ADDR" "$UIW0_ADDR" $((port++))
rping_refused siw-to-uiw-crc-strict "$UIW0_ADDR" "$SIW0_ADDR" $((port++))
siw_set mpa_crc_strict=N
uiw_set mpa_crc=N
echo "PASS: uiw <-> siw RTR variants and refusals"
