#!/usr/bin/env bash
# needs: uiw
# timeout: 900
# perftest WITHOUT -R: perftest exchanges QPN/GID over its own TCP socket and moves its QPs to
# RTR/RTS itself; uiw.ko connects them (connect-on-RTR, kernel/uiw_rtr.c). Server on uiw0, client
# on uiw1, GID index 0 (-x 0: the IPv4 address). ib_write_bw, ib_read_bw, ib_send_bw, their
# _lat counterparts, ib_send_bw --use-srq, ib_write_bw -q 16 (16 QPs, 16 connections) and
# ib_send_lat -e (completion events). Both sides exit 0, name their device and print results.
source "$UIW_ROOT/tests/system/lib.sh"

port=18640

# run NAME TOOL ARGS...: server on uiw0, client on uiw1 -> uiw0's address (perftest_pair).
# Without -R ib_send_* end with perftest's own leak (PERFTEST_LEAK): accepted, nothing else.
run() {
  local name=$1 tool=$2
  shift 2
  perftest_pair "$name" wait_tcp_listen $port "$tool" -d "$UIW0_DEV" -x 0 -p @PORT@ "$@" -- \
    "$tool" -d "$UIW1_DEV" -x 0 -p @PORT@ "$@" "$UIW0_ADDR"
  port=$((PAIR_PORT + 1))
  pair_exits_ok "$name" leak
  perftest_sides_ok "$name" "$UIW0_DEV" "$UIW1_DEV"
}

# lat NAME: the t_typical column (usec) of the client's 2-byte row.
lat() { awk '$1 == 2 && NF >= 5 { print $5 }' "$1-client.log" | tail -n1; }

for t in write read send; do
  run "${t}_bw" "ib_${t}_bw" -s 65536 -n 500
  perftest_bw "${t}_bw-client" 65536 500 >/dev/null
  log "ib_${t}_bw 64 KiB x 500 without -R: $BW MB/s"
done
run send_bw_srq ib_send_bw --use-srq -s 65536 -n 500
perftest_bw send_bw_srq-client 65536 500 >/dev/null
log "ib_send_bw --use-srq: $BW MB/s"
run write_bw_q16 ib_write_bw -q 16 -s 65536 -n 200
# perftest reports the iterations of all 16 QPs together.
perftest_bw write_bw_q16-client 65536 3200 >/dev/null
log "ib_write_bw -q 16: $BW MB/s"
for t in write read send; do
  run "${t}_lat" "ib_${t}_lat" -s 2 -n 1000
  v=$(lat "${t}_lat")
  [ -n "$v" ] || { show "${t}_lat-client"; fail "ib_${t}_lat printed no 2-byte result"; }
  log "ib_${t}_lat 2 B without -R: t_typical $v usec"
done
run send_lat_e ib_send_lat -e -s 2 -n 500
log "ib_send_lat -e: t_typical $(lat send_lat_e) usec"
echo "PASS: perftest without -R over connect-on-RTR"
