#!/usr/bin/env bash
# needs: uiw
# timeout: 600
# perftest over uiw with rdma_cm (-R), server on uiw0, client started with -d uiw1 (its QP
# lands on uiw0 too: perftest does not bind its source address, see interop_lib.bash):
# ib_write_lat (the server's progress thread places each Write; the application spins on
# memory), ib_read_lat (Read Responses answered by the progress thread), ib_send_lat; then
# ib_write_lat -a (every size from 2 B to 8 MiB) and ib_send_bw -q 4 (four QPs, four
# connections in one context). Both sides must exit 0 and report every size.
source "$UIW_ROOT/tests/system/lib.sh"
source "$UIW_ROOT/providers/uiw/tests/allow_local_sources.sh"
allow_local_sources
# A CI run once failed with the client's connection REJECTED (-ECONNREFUSED: an MPA Reject or a
# refused TCP connect from uiw.ko) in perftest between two uiw QPs on uiw0, as here (then
# inside interop_siw_perftest), and left nothing that said why.
kernel_cm_debug

port=18530
syn_waits_for_listener $port $((port + 69))

# pair NAME TOOL ARGS...: TOOL's server on uiw0 and client on uiw1 (perftest_pair; logs
# NAME-server.log, NAME-client.log).
listening() { wait_cm_listen "$1" && wait_dev_listen "$UIW0_DEV" "$1"; }
pair() {
  local name=$1 tool=$2
  shift 2
  perftest_pair "$name" listening $port "$tool" -R -d "$UIW0_DEV" -p @PORT@ "$@" -- \
    "$tool" -R -d "$UIW1_DEV" -p @PORT@ --source_ip "$UIW1_ADDR" "$@" "$UIW0_ADDR"
  port=$((PAIR_PORT + 1))
  pair_exits_ok "$name"
  perftest_sides_ok "$name" "$UIW0_DEV" "$UIW1_DEV"
}

# lat_line NAME SIZE ITERS: the client's result row (#bytes #iterations t_min t_max t_typical
# t_avg ...); fails if it is missing.
lat_line() {
  local l
  l=$(awk -v s="$2" -v n="$3" '$1 == s && $2 == n && NF >= 6' "$1-client.log" | tail -n1)
  [ -n "$l" ] || { show "$1-client"; fail "$1: no result row for $2 bytes x $3"; }
  echo "$l"
}

for tool in ib_write_lat ib_read_lat ib_send_lat; do
  pair "$tool" "$tool" -s 8 -n 1000
  read -r _ _ tmin _ ttyp tavg _ <<<"$(lat_line "$tool" 8 1000)"
  log "$tool 8 B x 1000: t_min $tmin t_typical $ttyp t_avg $tavg usec"
done

# -a: 2^1 .. 2^23 bytes, 10 round trips each.
pair write_lat_all ib_write_lat -a -n 10
for ((k = 1; k <= 23; k++)); do lat_line write_lat_all $((1 << k)) 10 >/dev/null; done
log "ib_write_lat -a: all 23 sizes, 8 MiB t_typical $(lat_line write_lat_all 8388608 10 |
  awk '{print $5}') usec"

# -q 4: four QPs (four rdma_cm connections); the report sums them (4 x 200 iterations).
pair send_bw_q4 ib_send_bw -q 4 -s 65536 -n 200
for side in client server; do
  perftest_bw "send_bw_q4-$side" 65536 800 >/dev/null
done
log "ib_send_bw -q 4, 64 KiB x 200 per QP: $BW MB/s"
