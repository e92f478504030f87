#!/usr/bin/env bash
# needs: uiw
# timeout: 300
# rdma res show qp on uiw: a connected QP shows what its connection negotiated as driver
# attributes (lower layer, MPA revision, CRC, Markers per direction, peer-to-peer, RFC 7306,
# role, IRD/ORD), on both ends of a uiw1 client <-> uiw0 server rdma_cm connection; the QPs are
# gone from the list once the connection ends.
source "$UIW_ROOT/tests/system/lib.sh"
source "$UIW_ROOT/providers/uiw/tests/allow_local_sources.sh"
allow_local_sources

check=$UIW_BUILD/bin/uiw_cm_check
[ -x "$check" ] || fail "$check missing: cmake --build \$UIW_BUILD --target uiw_cm_check"

port=7560
start_bg server env WAIT_SECS=120 "$check" server "$UIW0_ADDR" $port idle
wait_cm_listen $port
start_bg client env WAIT_SECS=120 "$check" client "$UIW0_ADDR" "$UIW1_ADDR" $port idle
for side in server client; do
  poll_until 60 0.2 log_has $side 'exchanged one verified Send each way' || {
    show server
    show client
    fail "$side: not connected"
  }
done

# res_line DEV: the one RC QP of DEV in RTS, with driver details.
res_line() {
  rdma -dd res show qp link "$1/1" | tr -s ' \n' ' ' | sed 's/link /\nlink /g' |
    grep -E "state RTS" | grep -F " type RC " || true
}
for pair in "$UIW0_DEV responder" "$UIW1_DEV initiator"; do
  set -- $pair
  line=$(res_line "$1")
  log "$1: $line"
  [ "$(printf '%s\n' "$line" | grep -c .)" = 1 ] || fail "$1: not exactly one RC QP in RTS"
  # rdma(8) prints a driver attribute NAME as drv_NAME.
  for want in "llp tcp" "mpa_rev 2" "crc [01]" "markers_tx 0" "markers_rx 0" "p2p [01]" \
    "rfc7306 1" "role $2" "ird [1-9][0-9]*" "ord [1-9][0-9]*"; do
    printf '%s\n' "$line" | grep -Eq " drv_$want( |$)" || fail "$1: no 'drv_$want' in rdma res show qp"
  done
done
# The server's IRD covers the client's ORD and the reverse (RFC 6581 §3).
s_ird=$(res_line "$UIW0_DEV" | grep -oE ' drv_ird [0-9]+' | awk '{print $2}')
c_ord=$(res_line "$UIW1_DEV" | grep -oE ' drv_ord [0-9]+' | awk '{print $2}')
[ "$c_ord" -le "$s_ird" ] || fail "client ORD $c_ord exceeds server IRD $s_ird"

kill "${BG_PID[client]}"
wait "${BG_PID[client]}" 2>/dev/null || true
wait_bg server 90
no_qp_listed() { [ -z "$(res_line "$UIW0_DEV")$(res_line "$UIW1_DEV")" ]; }
poll_until 60 0.2 no_qp_listed || fail "a QP is still listed after the connection ended"
log "PASS: rdma res show qp shows each end's negotiated parameters"
