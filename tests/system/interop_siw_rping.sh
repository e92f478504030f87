#!/usr/bin/env bash
# needs: uiw siw
# timeout: 2400
# rping -V between uiw0 (libuiw) and siw0 (kernel siw), both directions, over the negotiation
# matrix: MPA revision 2 (RFC 6581, IRD/ORD) with CRC off, CRC required by uiw (mpa_crc) and CRC
# required by siw (the tunable siw's mpa_crc_required; siw asks only as initiator, see
# interop_lib.bash). 500 x 65000 bytes (rping's maximum) for the default configuration, 100 x
# 65000 for the others.
# MPA revision 1 (RFC 5044, no IRD/ORD exchange) with uiw initiating to siw, CRC off and on:
# ib_write_bw and ib_send_bw -R (uiw client, on the namespace pair of interop_netns: in one
# namespace perftest's client would land on the server's siw device). Not rping: siw, as a
# revision-1 responder, reports IRD = ORD = 0 in its CONNECT_REQUEST (siw_cm.c sets cep->ird/ord only from the RFC 6581 word),
# so rdma_cm clamps the server's accept to 0 and siw refuses the rping server's RDMA Read
# (siw_activate_tx_from_sq: -EINVAL, "post send error").
source "$UIW_ROOT/tests/system/lib.sh"
source "$UIW_ROOT/tests/system/interop_lib.bash"
interop_setup
siw_tunable
interop_netns # perftest's pairs (see interop_lib.bash)

port=7500
pair() { # NAME COUNT: one verified rping in each direction
  rping_pair "uiw-to-siw-$1" "$SIW0_ADDR" "$UIW0_ADDR" $((port++)) "$2" 65000
  rping_pair "siw-to-uiw-$1" "$UIW0_ADDR" "$SIW0_ADDR" $((port++)) "$2" 65000
}
pair rev2-nocrc 500
uiw_set mpa_crc=Y
pair rev2-crc-uiw 100
uiw_set mpa_crc=N
siw_set mpa_crc_required=Y
rping_pair siw-to-uiw-rev2-crc-siw "$UIW0_ADDR" "$SIW0_ADDR" $((port++)) 100 65000
siw_set mpa_crc_required=N
uiw_set mpa_rev=1
for crc in N Y; do
  uiw_set mpa_crc=$crc
  for tool in ib_write_bw ib_send_bw; do
    interop_perftest "uiw-to-siw-rev1-crc$crc-$tool" $tool "$IXS_DEV" "$IXS_ADDR" "$IXU_DEV" \
      "$IXU_ADDR" $((port++)) 65536 200
  done
done
echo "PASS: uiw <-> siw rping matrix"
