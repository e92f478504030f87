#!/usr/bin/env bash
# needs: uiw
# timeout: 1800
# connect-on-RTR over DDP over SCTP (RFC 5043; kernel/uiw_rtr.c, uiw_sctp.c): unmodified
# ibv_rc_pingpong between uiw0 and uiw1 in SCTP mode. At RTR uiw.ko opens an SCTP association
# to the peer's rtr_port and runs Session Initiate / Accept carrying the connect-on-RTR private
# data. Every received buffer is validated (-c): default size, -s 1, -s 65536, -e (completion
# events), the server on either device. The traffic must be unordered SCTP DATA chunks and
# the connect-on-RTR association an SCTP one (no TCP connection to rtr_port).
source "$UIW_ROOT/tests/system/lib.sh"
source "$UIW_ROOT/tests/system/sctp_lib.bash"

rtr_port=$(cat /sys/module/uiw/parameters/rtr_port)

# pp NAME PORT SERVER_DEV CLIENT_DEV SERVER_ADDR ARGS...: one verified run over SCTP.
pp() {
  local name=$1 port=$2 sdev=$3 cdev=$4 saddr=$5 side before
  shift 5
  before=$(sctp_stat SctpOutUnorderChunks)
  start_bg "$name-server" ibv_rc_pingpong -d "$sdev" -g 0 -p "$port" -c "$@"
  wait_tcp_listen "$port"
  run_fg "$name-client" 600 ibv_rc_pingpong -d "$cdev" -g 0 -p "$port" -c "$@" "$saddr"
  wait_bg "$name-server" 120
  for side in server client; do
    expect "$name-$side" ' bytes in .* seconds = ' "$name $side printed no result"
    if grep -Eiq 'fail|error|mismatch|couldn' "$name-$side.log"; then
      show "$name-$side"
      fail "$name $side reported an error"
    fi
  done
  # Each iteration is a Send each way: at least one unordered DATA chunk per message.
  sctp_expect_chunks "$before" "$PP_MIN_CHUNKS" "$name"
  log "$name: $(grep -E ' iters in ' "$name-client.log")"
}

sctp_mode
# SCTP associations to rtr_port while a pingpong runs (the kernel's, so `ss` lists them).
ss_sctp_before=$(sctp_stat SctpActiveEstabs)
# TCP sockets on rtr_port now (earlier tests' TIME-WAITs): only new ones count below.
rtr_tcp() { ss -Htan "( sport = :$rtr_port or dport = :$rtr_port )" | awk '{print $4, $5}' | sort; }
rtr_tcp_before=$(rtr_tcp)
PP_MIN_CHUNKS=1000 pp default 18701 "$UIW0_DEV" "$UIW1_DEV" "$UIW0_ADDR"
expect default-server "remote address: .*GID ::ffff:$UIW1_ADDR" "server saw the wrong peer GID"
[ "$(sctp_stat SctpActiveEstabs)" -gt "$ss_sctp_before" ] ||
  fail "no SCTP association was established for connect-on-RTR"
# No TCP connection to the connect-on-RTR port was ever accepted in SCTP mode.
new_tcp=$(comm -13 <(echo "$rtr_tcp_before") <(rtr_tcp) | grep . || true)
[ -z "$new_tcp" ] || fail "a TCP connection to rtr_port $rtr_port was made in SCTP mode: $new_tcp"
PP_MIN_CHUNKS=300 pp size1 18702 "$UIW0_DEV" "$UIW1_DEV" "$UIW0_ADDR" -s 1 -n 300
# 64 KiB messages: two DDP segments (unordered chunks) each at the loopback path MTU.
PP_MIN_CHUNKS=400 pp size64k 18703 "$UIW0_DEV" "$UIW1_DEV" "$UIW0_ADDR" -s 65536 -n 100
PP_MIN_CHUNKS=300 pp events 18704 "$UIW0_DEV" "$UIW1_DEV" "$UIW0_ADDR" -e -n 300
# Server on uiw1: the lower (GID, QPN) pair still initiates, now from the client's side.
PP_MIN_CHUNKS=300 pp reversed 18705 "$UIW1_DEV" "$UIW0_DEV" "$UIW1_ADDR" -n 300
echo "PASS: ibv_rc_pingpong over connect-on-RTR in SCTP mode"
