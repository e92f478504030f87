#!/usr/bin/env bash
# needs: uiw
# timeout: 600
# RFC 7306 atomics through unmodified perftest, server on uiw0, client on uiw1: ib_atomic_bw
# and ib_atomic_lat, Fetch-and-Add and Compare-and-Swap (-A), with rdma_cm (-R) and without
# (perftest moves its QPs to RTR itself: connect-on-RTR, GID index 0). Both sides exit 0, run
# over iWARP on their device and report a result row for 8-octet operations. 8 runs of 500
# operations, about a minute in the TCG VM.
source "$UIW_ROOT/tests/system/lib.sh"
source "$UIW_ROOT/providers/uiw/tests/allow_local_sources.sh"
allow_local_sources

port=18760
syn_waits_for_listener $port $((port + 39))

listening() { wait_cm_listen "$1" && wait_dev_listen "$UIW0_DEV" "$1"; }
# run MODE NAME TOOL ARGS...: MODE cm (-R) or rtr; both sides exit 0 (rtr: or with perftest's
# leak) and pass perftest_sides_ok.
run() {
  local mode=$1 name=$2 tool=$3
  shift 3
  if [ "$mode" = cm ]; then
    perftest_pair "$name" listening $port "$tool" -R -d "$UIW0_DEV" -p @PORT@ "$@" -- \
      "$tool" -R -d "$UIW1_DEV" -p @PORT@ --source_ip "$UIW1_ADDR" "$@" "$UIW0_ADDR"
    pair_exits_ok "$name"
  else
    perftest_pair "$name" wait_tcp_listen $port "$tool" -d "$UIW0_DEV" -x 0 -p @PORT@ "$@" -- \
      "$tool" -d "$UIW1_DEV" -x 0 -p @PORT@ "$@" "$UIW0_ADDR"
    pair_exits_ok "$name" leak
  fi
  port=$((PAIR_PORT + 1))
  perftest_sides_ok "$name" "$UIW0_DEV" "$UIW1_DEV"
}

for mode in cm rtr; do
  for op in FETCH_AND_ADD CMP_AND_SWAP; do
    name=bw-$mode-$op
    run $mode "$name" ib_atomic_bw -A $op -n 500
    perftest_rate "$name-client" 8 500 >/dev/null
    log "ib_atomic_bw -A $op ($mode): $RATE Mpps"
    name=lat-$mode-$op
    run $mode "$name" ib_atomic_lat -A $op -n 500
    row=$(awk '$1 == 8 && $2 == 500 && NF >= 6' "$name-client.log" | tail -n1)
    [ -n "$row" ] || { show "$name-client"; fail "$name: no result row for 8 bytes x 500"; }
    read -r _ _ tmin _ ttyp _ <<<"$row"
    log "ib_atomic_lat -A $op ($mode): t_min $tmin t_typical $ttyp usec"
  done
done
log "PASS: ib_atomic_bw and ib_atomic_lat, both atomic operations, with and without -R"
