#!/usr/bin/env bash
# needs: uiw
# perftest bandwidth tests with rdma_cm (-R, required on iWARP) over uiw0 through libuiw:
# ib_write_bw (RDMA WRITEs placed by the server's progress thread), ib_read_bw (RDMA READs
# answered by it) and ib_send_bw (SEND/RECV with perftest's iWARP credits), 64 KiB x 500 each.
# Both sides must exit 0, report an iWARP transport on uiw0 and a bandwidth > 0.
# timeout: 400
source "$UIW_ROOT/tests/system/lib.sh"

port=18516
syn_waits_for_listener $port $((port + 9))
for tool in ib_write_bw ib_read_bw ib_send_bw; do
  args=(-R -d "$UIW0_DEV" -p "$port" -s 65536 -n 500)
  start_bg "$tool-server" "$tool" "${args[@]}"
  wait_cm_listen $port
  wait_dev_listen "$UIW0_DEV" $port
  run_fg "$tool-client" 120 "$tool" "${args[@]}" "$UIW0_ADDR"
  wait_bg "$tool-server" 30
  perftest_sides_ok "$tool" "$UIW0_DEV" "$UIW0_DEV"
  perftest_bw "$tool-client" 65536 500 >/dev/null
  log "$tool over $UIW0_DEV: $BW MB/s average"
  port=$((port + 1))
done
