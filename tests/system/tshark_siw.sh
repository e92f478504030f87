#!/usr/bin/env bash
# needs: uiw siw
# timeout: 600
# Wire validation of uiw <-> siw with Wireshark's iWARP dissectors: rping -V sessions (5 x 3000
# bytes: Send, Read Request/Response, Write) in both directions, CRC off, CRC required by uiw,
# and siw -> uiw with CRC required by siw (the tunable siw, interop_lib.bash), all in one
# dumpcap capture on lo (the interface that carries traffic between the two local addresses)
# from before the first connection, decoded by one `tshark -V` pass (wire_*). Every stream: MPA
# Request and Reply found, no malformed packet, no expert error, CRC flags and verdicts as
# negotiated (every FPDU "Good CRC32" when on), only Send / Read Request / Read Response /
# Write, each of them present.
source "$UIW_ROOT/tests/system/lib.sh"
source "$UIW_ROOT/tests/system/interop_lib.bash"
interop_setup

ALL='Send|Read Request|Read Response|Write'
wire_start siw "tcp portrange 7950-7954"
rping_pair uiw-to-siw-nocrc "$SIW0_ADDR" "$UIW0_ADDR" 7950 5 3000
rping_pair siw-to-uiw-nocrc "$UIW0_ADDR" "$SIW0_ADDR" 7951 5 3000
uiw_set mpa_crc=Y
rping_pair uiw-to-siw-crc "$SIW0_ADDR" "$UIW0_ADDR" 7952 5 3000
rping_pair siw-to-uiw-crc "$UIW0_ADDR" "$SIW0_ADDR" 7953 5 3000
uiw_set mpa_crc=N
siw_tunable
siw_set mpa_crc_required=Y
rping_pair siw-to-uiw-siwcrc "$UIW0_ADDR" "$SIW0_ADDR" 7954 5 3000
wire_stop siw
wire_decode siw
wire_check siw uiw-to-siw-nocrc 7950 1 0 0 "$ALL" "$ALL"
wire_check siw siw-to-uiw-nocrc 7951 1 0 0 "$ALL" "$ALL"
wire_check siw uiw-to-siw-crc 7952 1 1 0 "$ALL" "$ALL"
wire_check siw siw-to-uiw-crc 7953 1 1 0 "$ALL" "$ALL"
wire_check siw siw-to-uiw-siwcrc 7954 1 1 0 "$ALL" "$ALL"
echo "PASS: tshark validates uiw <-> siw"
