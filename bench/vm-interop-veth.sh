#!/usr/bin/env bash
# needs: uiw siw
# timeout: 1800
# uiw <-> siw and siw <-> siw over the interop veth pair (MTU 1500, siw's end in its own
# namespace; tests/system/interop_lib.bash): ib_write_bw and ib_send_bw -R, 64 KiB x 200, three
# rounds per direction, uiw's counters (rdma statistic) around each run with a uiw server; then
# the uiw device is replaced by a siw one on the same netdev: siw -> siw over the same wire.
# Run: tests/vm/run-system-tests bench/vm-interop-veth.sh (about 2.5 minutes).
source "$UIW_ROOT/tests/system/lib.sh"
source "$UIW_ROOT/tests/system/interop_lib.bash"
interop_setup
siw_tunable
interop_netns
port=18600
syn_waits_for_listener $port $((port + 199))
stats() { rdma statistic show link "$IXU_DEV/1" 2>/dev/null | tr -s ' \n' ' '; echo; }
for r in 1 2 3; do
  for tool in ib_write_bw ib_send_bw; do
    s0=$(stats)
    interop_perftest "$tool-uiw-srv-$r" $tool "$IXU_DEV" "$IXU_ADDR" "$IXS_DEV" "$IXS_ADDR" $((port++)) 65536 200
    log "before: $s0"
    log "after:  $(stats)"
    interop_perftest "$tool-siw-srv-$r" $tool "$IXS_DEV" "$IXS_ADDR" "$IXU_DEV" "$IXU_ADDR" $((port++)) 65536 200
  done
done
# siw <-> siw on the same veth
rdma link delete "$IXU_DEV"
rdma link add siwiu0 type siw netdev uiwix-u || fail "siw on uiwix-u"
for r in 1 2 3; do
  for tool in ib_write_bw ib_send_bw; do
    interop_perftest "$tool-siwsiw-$r" $tool siwiu0 "$IXU_ADDR" "$IXS_DEV" "$IXS_ADDR" $((port++)) 65536 200
  done
done
echo "PASS: vm-interop-veth"
