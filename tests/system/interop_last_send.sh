#!/usr/bin/env bash
# needs: uiw siw
# timeout: 300
# uiw's last Send before rdma_disconnect reaches a siw peer: uiw's FIN waits until the peer
# acknowledged the data before it. siw reads its socket only when its data_ready callback gets
# the QP's state lock by trylock, and a FIN that arrives in one segment with the last Send
# queues siw's close, which may take that lock first and flush the receive the Send was for.
# TCP makes one segment of the two when the FIN comes while the data still sits in the socket's
# backlog (tcp_add_backlog merges them while siw's own transmit holds the socket).
#
# 1. The rule, on the wire: with 20 ms of delay on lo (netem), the data is unacknowledged for at
#    least 40 ms after it was sent. uiw_cm_check last-send on uiw (one exchange, one more Send,
#    rdma_disconnect, then destroy at once; with CLOSE_WAIT, DISCONNECTED first), last-recv on
#    siw (the Send arrives intact). The capture must show siw's ACK of every byte uiw sent
#    before uiw's FIN, for both ways of closing (the FIN sent on rdma_disconnect, and the one
#    sent when the QP is destroyed before the ACK came).
# 2. The race itself: siw stream-recv (RDMA Writes into uiw's target, so that siw's transmit
#    holds its socket) against uiw last-send, two pairs each way. Without the wait this failed
#    rarely (siw's close must win a lock within microseconds), mostly with the host loaded.
source "$UIW_ROOT/tests/system/lib.sh"
source "$UIW_ROOT/tests/system/interop_lib.bash"
interop_setup

# fin_fields CAPTURE: CAPTURE.fields, one line per TCP segment: source and destination port,
# sequence and acknowledgement numbers, FIN flag (one tshark start: tens of seconds under TCG).
fin_fields() {
  tshark -n -r "$1.pcapng" -Y tcp -T fields -e tcp.srcport -e tcp.dstport -e tcp.seq_raw \
    -e tcp.ack_raw -e tcp.flags.fin >"$1.fields" 2>"$1.tshark-err" ||
    { cat "$1.tshark-err"; fail "$1: tshark could not read the capture"; }
}
# fin_after_ack CAPTURE PORT: in the stream to PORT, the client's FIN went out after a segment
# of the server had acknowledged every byte before it (sequence numbers modulo 2^32).
fin_after_ack() {
  local r
  r=$(awk -v p="$2" '
    function ge(a, b) { return (a - b + 4294967296) % 4294967296 < 2147483648 }
    $1 != p && $2 != p { next }
    $2 != p { if (!seen || ge($4, ack)) ack = $4; seen = 1; next }
    !done && ($5 == 1 || $5 == "True") {
      done = 1; printf "%s fin_seq=%s acked=%s\n", (seen && ge(ack, $3)) ? "after" : "before", $3, ack }' "$1.fields")
  log "port $2: the client's FIN went out $r"
  [[ $r == after* ]] || { cat "$1.tshark-err"; fail "port $2: uiw's FIN went out before the peer acknowledged the data before it ($r)"; }
}

D0=$(dmesg | wc -l)
at_exit "tc qdisc del dev lo root 2>/dev/null || true"
tc qdisc replace dev lo root netem delay 20ms || fail "tc netem delay on lo"
wire_start fin "tcp portrange 7720-7721"
cm_check_pair destroy "$SIW0_ADDR" last-recv "$UIW0_ADDR" last-send 7720
CLOSE_WAIT=1 cm_check_pair close-wait "$SIW0_ADDR" last-recv "$UIW0_ADDR" last-send 7721
expect close-wait-client 'DISCONNECTED after'
wire_stop fin
tc qdisc del dev lo root
fin_fields fin
fin_after_ack fin 7720
fin_after_ack fin 7721

port=7722
for r in 1 2; do
  SEND_DELAY=1 cm_check_pair "uiw-client$r" "$SIW0_ADDR" stream-recv "$UIW0_ADDR" last-send $((port++))
  expect "uiw-client$r-server" 'received "uiw_cm_check last from the client" while writing'
  SEND_DELAY=1 cm_check_pair "uiw-server$r" "$UIW0_ADDR" last-send "$SIW0_ADDR" stream-recv $((port++))
  expect "uiw-server$r-client" 'received "uiw_cm_check last from the server" while writing'
done
if dmesg | tail -n +"$((D0 + 1))" | grep -q 'siw: got TERMINATE'; then
  dmesg | tail -n +"$((D0 + 1))" | grep siw >&2
  fail "siw received a Terminate"
fi
log "PASS: uiw's FIN followed the peer's ACK of its last Send; that Send reached a transmitting siw peer 4 times"
