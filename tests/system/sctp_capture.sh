#!/usr/bin/env bash
# needs: uiw
# timeout: 600
# A capture of DDP over SCTP (RFC 5043) decoded by tshark's SCTP dissector: rping -C 5 -V over
# uiw0/uiw1 in SCTP mode, captured on lo (both addresses are local). Asserts, from the
# dissector's fields: the Adaptation Layer Indication parameter (0xC006) with value 1 in both
# INIT and INIT-ACK (§5.1, §11.1), the Session Control messages (PPID 17: Initiate, Accept,
# each with DDP-SSN 0, and the final Terminates), DDP Segment chunks (PPID 16), and U=1 on every
# DATA chunk (§10).
source "$UIW_ROOT/tests/system/lib.sh"
source "$UIW_ROOT/providers/uiw/tests/allow_local_sources.sh"
source "$UIW_ROOT/tests/system/sctp_lib.bash"
allow_local_sources
sctp_mode

port=7195
sctp_capture_start
UIW_DEBUG=1 start_bg server rping -s -a "$UIW0_ADDR" -p $port -C 5 -V
wait_cm_listen $port
UIW_DEBUG=1 start_bg client rping -c -a "$UIW0_ADDR" -I "$UIW1_ADDR" -p $port -C 5 -V
if ! ends_within "${BG_PID[client]}" 90; then
  show server
  dmesg | tail -n 30
fi
wait_bg client 5
wait_bg server 30
sctp_capture_stop

tshark -r cap.pcapng -Y sctp -T fields -e frame.number -e sctp.chunk_type \
  -e sctp.adaptation_layer_indication -e sctp.data_payload_proto_id -e sctp.data_u_bit \
  -e data.data >fields.log 2>&1 || { show fields; fail "tshark could not read the capture"; }
# One tshark start costs tens of seconds under TCG: this is the only one, and the summary on
# failure is the fields dump.
log "$(wc -l <fields.log) SCTP packets captured"
# Chunk type 1 = INIT, 2 = INIT ACK (RFC 4960 §3.2); the field lists every chunk of a packet.
n_init=$(awk -F'\t' '$2 ~ /(^|,)1(,|$)/ && $3 == 1' fields.log | wc -l)
n_ack=$(awk -F'\t' '$2 ~ /(^|,)2(,|$)/ && $3 == 1' fields.log | wc -l)
[ "$n_init" -ge 1 ] && [ "$n_ack" -ge 1 ] || {
  show fields
  fail "no INIT / INIT ACK with Adaptation Layer Indication 1 ($n_init / $n_ack)"
}
n16=$(awk -F'\t' '$4 ~ /(^|,)16(,|$)/' fields.log | wc -l)
n17=$(awk -F'\t' '$4 ~ /(^|,)17(,|$)/' fields.log | wc -l)
[ "$n16" -ge 10 ] || { show fields; fail "only $n16 packets with PPID 16 (DDP Segment)"; }
[ "$n17" -ge 3 ] || { show fields; fail "only $n17 packets with PPID 17 (Session Control)"; }
# Every DATA chunk unordered: no U bit value 0 (False) anywhere.
if awk -F'\t' '$5 != "" && $5 ~ /(^|,)(0|False)(,|$)/' fields.log | grep -q .; then
  show fields
  fail "a DATA chunk without the U bit"
fi
# The Session Initiate (function 1) and Accept (2), DDP-SSN 0, as payload bytes.
awk -F'\t' '$4 ~ /(^|,)17(,|$)/ { print $6 }' fields.log >control.log
expect control '^00000001' "no Session Initiate (DDP-SSN 0, function 1) in the capture"
expect control '^00000002' "no Session Accept (DDP-SSN 0, function 2) in the capture"
expect control '^[0-9a-f]{4}0004$' "no Session Terminate in the capture"
log "INIT/INIT ACK with adaptation indication 1: $n_init/$n_ack; packets with PPID 16: $n16, PPID 17: $n17"
