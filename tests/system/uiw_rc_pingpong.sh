#!/usr/bin/env bash
# needs: uiw
# connect-on-RTR (kernel/uiw_rtr.c): unmodified ibv_rc_pingpong exchanges QPN and GID over its
# own TCP socket and moves its QP to RTR/RTS itself; uiw.ko connects the two QPs. uiw0 <-> uiw1,
# GID index 0 (the netdev's IPv4 address, uiw-abi.h), every received buffer validated (-c):
# default, -s 1, -s 4096, -s 1048576, -n 2000 -s 64, -e (completion events), server on either
# device, and two pairs at once.
# timeout: 2400
source "$UIW_ROOT/tests/system/lib.sh"

# pingpong NAME PORT SERVER_DEV CLIENT_DEV SERVER_ADDR ARGS...: one verified run; prints the
# client's rate line. The client gets 300 s (TCG round trips take 12-30 ms under load).
pingpong() {
  local name=$1 port=$2 sdev=$3 cdev=$4 saddr=$5 side
  shift 5
  start_bg "$name-server" ibv_rc_pingpong -d "$sdev" -g 0 -p "$port" -c "$@"
  wait_tcp_listen "$port"
  run_fg "$name-client" 300 ibv_rc_pingpong -d "$cdev" -g 0 -p "$port" -c "$@" "$saddr"
  wait_bg "$name-server" 120
  for side in server client; do
    expect "$name-$side" ' bytes in .* seconds = ' "$name $side printed no result"
    if grep -Eiq 'fail|error|mismatch|couldn' "$name-$side.log"; then
      show "$name-$side"
      fail "$name $side reported an error"
    fi
  done
  log "$name: $(grep -E ' iters in ' "$name-client.log")"
}

pingpong default 18601 "$UIW0_DEV" "$UIW1_DEV" "$UIW0_ADDR"
# The remote GID both sides print is the other one's IPv4-mapped address.
expect default-server "remote address: .*GID ::ffff:$UIW1_ADDR" "server saw the wrong peer GID"
pingpong size1 18602 "$UIW0_DEV" "$UIW1_DEV" "$UIW0_ADDR" -s 1 -n 300
pingpong size4096 18603 "$UIW0_DEV" "$UIW1_DEV" "$UIW0_ADDR" -s 4096 -n 300
pingpong size1m 18604 "$UIW0_DEV" "$UIW1_DEV" "$UIW0_ADDR" -s 1048576 -n 50
pingpong events 18606 "$UIW0_DEV" "$UIW1_DEV" "$UIW0_ADDR" -e -n 300
# Server on uiw1: the lower (GID, QPN) pair still initiates, now from the client's side.
pingpong reversed 18607 "$UIW1_DEV" "$UIW0_DEV" "$UIW1_ADDR" -n 300

# Two pairs at once, each direction of server placement.
start_bg pairA-server ibv_rc_pingpong -d "$UIW0_DEV" -g 0 -p 18608 -c -n 500
start_bg pairB-server ibv_rc_pingpong -d "$UIW1_DEV" -g 0 -p 18609 -c -n 500
wait_tcp_listen 18608
wait_tcp_listen 18609
start_bg pairA-client ibv_rc_pingpong -d "$UIW1_DEV" -g 0 -p 18608 -c -n 500 "$UIW0_ADDR"
start_bg pairB-client ibv_rc_pingpong -d "$UIW0_DEV" -g 0 -p 18609 -c -n 500 "$UIW1_ADDR"
for n in pairA-client pairB-client pairA-server pairB-server; do
  wait_bg $n 300
  expect $n '500 iters in ' "$n did not finish its 500 iterations"
done
log "two pairs at once: $(grep -h ' iters in ' pairA-client.log pairB-client.log | tr '\n' ';')"
# Many small exchanges last: each side's 500-deep receive queue wraps around four times, its
# 501-entry CQ (a Send and a Receive completion per iteration) about eight times.
# A round trip costs 0.15 ms in an idle VM and 12 ms when the host is busy (both applications
# spin on a vCPU the host shares), so the count is what a busy host can run in half a minute.
pingpong iters2000 18605 "$UIW0_DEV" "$UIW1_DEV" "$UIW0_ADDR" -n 2000 -s 64
echo "PASS: ibv_rc_pingpong over connect-on-RTR"
