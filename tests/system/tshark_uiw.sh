#!/usr/bin/env bash
# needs: uiw
# quarantine: decoding under TCG took longer than 900 s; not yet passed in full
# timeout: 2400
# Wire validation of uiw <-> uiw with Wireshark's iWARP dissectors (MPA, DDP/RDMAP): rping -V
# sessions (uiw1 -> uiw0, 20 x 3000 bytes) captured on lo (both addresses are local, so the
# kernel routes the TCP connection over lo; the veth pair only carries rdma_cm's ARP) from before
# the connection starts, with CRC off, CRC on, and Markers both ways with CRC on. Each capture
# must decode with no malformed packet and no expert error; with CRC on, every FPDU's CRC must
# match the dissector's own CRC32c; only Send, Read Request, Read Response and Write may appear,
# and `tshark -Y iwarp_ddp_rdmap` must list each kind.
source "$UIW_ROOT/tests/system/lib.sh"
source "$UIW_ROOT/tests/system/interop_lib.bash"
interop_setup

port=7900
capture() { # NAME CRC
  tshark_start "$1" lo "tcp port $port"
  rping_pair "$1" "$UIW0_ADDR" "$UIW1_ADDR" $port 20 3000
  tshark_stop "$1"
  tshark_check "$1" "$2" 'Send|Read Request|Read Response|Write'
  for op in Send 'Read Request' 'Read Response' Write; do
    grep -qx "$op" "$1.ops" || fail "$1: no $op segment decoded"
  done
  port=$((port + 1))
}
capture uiw-nocrc 0
uiw_set mpa_crc=Y
capture uiw-crc 1
uiw_set mpa_markers=3
capture uiw-markers-crc 1
n=$(tshark -n -r uiw-markers-crc.pcapng -Y iwarp_mpa.marker_fpduptr 2>/dev/null | wc -l)
[ "$n" -gt 0 ] || fail "uiw-markers-crc: the dissector found no Markers"
log "uiw-markers-crc: $n packets with decoded Markers"
echo "PASS: tshark validates uiw <-> uiw"
