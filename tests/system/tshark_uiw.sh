#!/usr/bin/env bash
# needs: uiw
# timeout: 900
# Wire validation of uiw <-> uiw with Wireshark's iWARP dissectors (MPA, DDP/RDMAP). One dumpcap
# capture on lo (both addresses are local, so the kernel routes the connections over lo) holds
# every session, from before the first connection; one `tshark -V` pass decodes it
# (interop_lib.bash wire_*). Sessions, uiw1 -> uiw0:
#   rdma_cm (rping -V, 5 x 3000 bytes: Send, Read Request/Response, Write): CRC off, CRC on,
#     Markers both ways with CRC on, Markers both ways with CRC off (mpa_markers=3: each side
#     asks the other, RFC 5044 §7.1.2);
#   connect-on-RTR (kernel/uiw_rtr.c, port rtr_port; no rdma_cm): ibv_rc_pingpong (Send),
#     ib_write_bw (Write) and ib_read_bw (Read Request/Response) without -R, CRC off and on;
#     ib_atomic_bw (RFC 7306 Atomic Request/Response, both uiw ends agreeing to it), CRC off.
#     Wireshark 4.0's dissector decodes the atomic messages field by field but not RFC 7306's
#     Immediate Data (opcodes 8 and 9 show as unknown), so immediates are checked by uiw's own
#     codec instead (tests/system/uiw_rfc7306.sh, pyverbs_hostile).
# Connect-on-RTR initiators take random privileged source ports, so two sessions may share a
# 4-tuple; wire_decode gives the later one a port of its own first (the dissector would decode it
# with the earlier one's MPA state).
# Every stream: MPA Request and Reply found by the heuristic dissector, no malformed packet and
# no expert error, CRC flags and CRC verdicts as negotiated (every decoded FPDU "Good CRC32"),
# only the opcodes the session uses, each of them present.
# Markers: Wireshark's MPA dissector (packet-iwarp-mpa.c) assumes exactly one FPDU per TCP
# segment when Markers are on: it takes the segment length as the FPDU length to place the
# Markers and to check ULPDU_Length, and leaves a segment that does not fit undissected (no
# error, plain TCP payload). uiw's segments carry several FPDUs (and lo's 64 KiB MTU lets TCP
# coalesce them), so only single-FPDU segments decode there: the Markers sessions check the
# M flags, no malformed/expert error, Marker back pointers decoded, CRCs good and opcodes
# allowed in what decodes, but do not require every opcode.
source "$UIW_ROOT/tests/system/lib.sh"
source "$UIW_ROOT/tests/system/interop_lib.bash"
rtr_port=$(cat /sys/module/uiw/parameters/rtr_port)
interop_setup

# rtr_tool NAME PORT TOOL ARGS...: one connect-on-RTR run of TOOL between uiw0 (server) and
# uiw1 (perftest_pair); TOOL's own TCP exchange uses PORT (PORT + 1 if it runs again; not
# captured), its RDMA connection port rtr_port. Exit 1 is accepted with perftest's own iWARP leak
# message at exit (PERFTEST_LEAK). Sets WIN[NAME] to the time window of the run (for wire_check).
declare -A WIN
rtr_tool() {
  local name=$1 port=$2 tool=$3 gid=-x side t0
  shift 3
  [ "$tool" = ibv_rc_pingpong ] && gid=-g
  t0=$(date +%s.%N)
  perftest_pair "$name" wait_tcp_listen "$port" "$tool" -d "$UIW0_DEV" "$gid" 0 -p @PORT@ "$@" -- \
    "$tool" -d "$UIW1_DEV" "$gid" 0 -p @PORT@ "$@" "$UIW0_ADDR"
  WIN[$name]=$t0-$(date +%s.%N)
  pair_exits_ok "$name" leak
  for side in client server; do
    if grep -Ev "$PERFTEST_LEAK" "$name-$side.log" | grep -Eiq 'fail|bad wc|error|mismatch|couldn'; then
      show "$name-$side"
      fail "$name $side reported an error"
    fi
  done
  log "PASS $name"
}
rtr_sessions() { # PREFIX PORTBASE
  rtr_tool "$1-pingpong" "$2" ibv_rc_pingpong -c -n 5
  rtr_tool "$1-write" $(($2 + 2)) ib_write_bw -s 4096 -n 5
  rtr_tool "$1-read" $(($2 + 4)) ib_read_bw -s 4096 -n 5
}

ALL='Send|Read Request|Read Response|Write'
wire_start uiw "tcp port $rtr_port or tcp portrange 7900-7903"
rping_pair cm-nocrc "$UIW0_ADDR" "$UIW1_ADDR" 7900 5 3000
rtr_sessions rtr-nocrc 18710
rtr_tool rtr-atomic 18716 ib_atomic_bw -n 5
uiw_set mpa_crc=Y
rping_pair cm-crc "$UIW0_ADDR" "$UIW1_ADDR" 7901 5 3000
rtr_sessions rtr-crc 18720
uiw_set mpa_markers=3
rping_pair cm-markers-crc "$UIW0_ADDR" "$UIW1_ADDR" 7902 5 3000
uiw_set mpa_crc=N
rping_pair cm-markers "$UIW0_ADDR" "$UIW1_ADDR" 7903 5 3000
wire_stop uiw
wire_decode uiw

wire_check uiw cm-nocrc 7900 1 0 0 "$ALL" "$ALL"
wire_check uiw cm-crc 7901 1 2 0 "$ALL" "$ALL"
wire_check uiw cm-markers-crc 7902 1 2 1 "$ALL" ""
wire_check uiw cm-markers 7903 1 0 1 "$ALL" ""
# ibv_rc_pingpong only Sends; a Write RTR (RFC 6581) also shows as a zero-length Write.
wire_check uiw rtr-atomic "$rtr_port" "${WIN[rtr-atomic]}" 0 0 'Atomic Request|Atomic Response|Write' \
  'Atomic Request|Atomic Response'
for c in nocrc:0 crc:2; do
  wire_check uiw rtr-${c%:*}-pingpong "$rtr_port" "${WIN[rtr-${c%:*}-pingpong]}" "${c#*:}" 0 'Send|Write' Send
  wire_check uiw rtr-${c%:*}-write "$rtr_port" "${WIN[rtr-${c%:*}-write]}" "${c#*:}" 0 "$ALL" Write
  wire_check uiw rtr-${c%:*}-read "$rtr_port" "${WIN[rtr-${c%:*}-read]}" "${c#*:}" 0 "$ALL" 'Read Request|Read Response'
done
echo "PASS: tshark validates uiw <-> uiw"
