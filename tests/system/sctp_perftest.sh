#!/usr/bin/env bash
# needs: uiw
# timeout: 600
# perftest with rdma_cm (-R) between uiw1 (client, --source_ip) and uiw0 (server) with both
# devices in SCTP mode (DDP over SCTP, RFC 5043); with SCTP_PERFTEST_TCP=1 first in TCP mode
# (TCP + MPA, which uiw_perftest_bw/_lat test) in the same VM boot, so the numbers compare
# (about 45 s more under TCG): ib_write_bw, ib_read_bw, ib_send_bw (64 KiB x 200) and
# ib_write_lat, ib_read_lat, ib_send_lat (8 B x 100). Both sides exit 0 with a result row;
# in SCTP mode the traffic must be unordered SCTP DATA chunks. Prints one summary line per
# tool and mode ("RESULT ...").
source "$UIW_ROOT/tests/system/lib.sh"
source "$UIW_ROOT/providers/uiw/tests/allow_local_sources.sh"
source "$UIW_ROOT/tests/system/sctp_lib.bash"
allow_local_sources
kernel_cm_debug

port=18560
# perftest -R listens again for its second connection, which a client can reach first (an
# SCTP INIT is then answered with an ABORT; syn_waits_for_listener).
syn_waits_for_listener $port $((port + 99))

# pair NAME TOOL ARGS...: server on uiw0, client on uiw1 (perftest_pair). The client's QP lands
# on uiw0 (perftest does not bind its source address): uiw0's own listener must be up.
listening() { wait_cm_listen "$1" && wait_dev_listen "$UIW0_DEV" "$1"; }
pair() {
  local name=$1 tool=$2
  shift 2
  perftest_pair "$name" listening $port "$tool" -R -d "$UIW0_DEV" -p @PORT@ "$@" -- \
    "$tool" -R -d "$UIW1_DEV" -p @PORT@ --source_ip "$UIW1_ADDR" "$@" "$UIW0_ADDR"
  port=$((PAIR_PORT + 1))
  pair_exits_ok "$name"
  if grep -Eiq 'failed|bad wc|error' "$name-client.log" "$name-server.log"; then
    show "$name-client"
    show "$name-server"
    fail "$name reported an error"
  fi
  expect "$name-client" "Device +: $UIW1_DEV" "$name client not on $UIW1_DEV"
}

run_mode() {
  local mode=$1 tool row before
  before=$(sctp_stat SctpOutUnorderChunks 2>/dev/null || echo 0)
  for tool in ib_write_bw ib_read_bw ib_send_bw; do
    pair "$mode-$tool" $tool -s 65536 -n 200
    perftest_bw "$mode-$tool-client" 65536 200 >/dev/null
    echo "RESULT $mode $tool 65536x200 BW_average_MBps=$BW"
  done
  for tool in ib_write_lat ib_read_lat ib_send_lat; do
    pair "$mode-$tool" $tool -s 8 -n 100
    row=$(awk '$1 == 8 && $2 == 100 && NF >= 6' "$mode-$tool-client.log" | tail -n1)
    [ -n "$row" ] || { show "$mode-$tool-client"; fail "$mode $tool: no result row"; }
    echo "RESULT $mode $tool 8x100 t_typical_us=$(echo "$row" | awk '{print $5}') t_avg_us=$(echo "$row" | awk '{print $6}')"
  done
  if [ "$mode" = sctp ]; then
    sctp_expect_chunks "$before" 1000 "perftest in SCTP mode"
  fi
}

[ "${SCTP_PERFTEST_TCP:-0}" != 1 ] || run_mode tcp
sctp_mode
run_mode sctp
