#!/usr/bin/env bash
# needs: uiw
# timeout: 600
# The link under live connections goes down: ip link set veth-uiw0 down (uiw0's port goes
# DOWN), and since traffic between the VM's local addresses crosses lo, which a down veth
# does not stop, tc netem loss 100% on lo for every packet from or to uiw0's address (netem
# drops silently, as a dead link does; a tc drop action would report local congestion to TCP).
#  - Shorter than TCP's timeout (3 s): rping -V 1000 x 4 KiB (rdma_cm, uiw1 -> uiw0) across
#    the outage finishes with every round trip verified; the port reads PORT_DOWN during the
#    outage and PORT_ACTIVE after.
#  - Longer than TCP's timeout (net.ipv4.tcp_retries2 lowered to 3, about 6 s of retransmission):
#    both sides stream RDMA Writes (uiw_cm_check write-stream), so both have data in flight;
#    each must end with an error completion or DISCONNECTED and finish (its QP destroyed) by
#    itself while the link is still down, no QP left behind; once the link is back a new
#    rping -V works.
# (A side with nothing in flight would not notice a peer that timed out: TCP's silence, as on
# a real network without keepalives.) Cost: about 50 s.
source "$UIW_ROOT/tests/system/lib.sh"
source "$UIW_ROOT/providers/uiw/tests/allow_local_sources.sh"
allow_local_sources
# rping (without -v) may end in its own teardown race after a complete run (lib.sh).
EXIT_ACCEPT="rping_exit_race -"

check=$UIW_BUILD/bin/uiw_cm_check
[ -x "$check" ] || fail "$check missing: cmake --build \$UIW_BUILD --target uiw_cm_check"
nd=veth-uiw0
retries_old=$(sysctl -n net.ipv4.tcp_retries2)
# A link going down takes its IPv6 addresses with it (net.ipv6.conf.*.keep_addr_on_down is 0):
# the way up puts uiw0's back, so the next test meets the topology it was given.
restore_link() { ip link set $nd up && ip -6 addr replace "$UIW0_ADDR6/64" dev $nd nodad; }
at_exit "tc qdisc del dev lo root 2>/dev/null || true; restore_link; sysctl -qw net.ipv4.tcp_retries2=$retries_old"

# link_down / link_up: the outage.
link_down() {
  ip link set $nd down
  lo_blackhole "$UIW0_ADDR"
}
link_up() { # sets DROPPED: the packets the outage swallowed
  lo_blackhole_end
  restore_link
}

port_state() { ibv_devinfo -d "$UIW0_DEV" | awk '/state:/ { print $2; exit }'; }

# 1. A 3-second outage under verified rping traffic.
port=19400
start_bg short-server rping -s -a "$UIW0_ADDR" -p $port -C 1000 -S 4096 -V
wait_cm_listen $port
start_bg short-client rping -c -a "$UIW0_ADDR" -I "$UIW1_ADDR" -p $port -C 1000 -S 4096 -V
sleep 4
! pid_gone "${BG_PID[short-client]}" || fail "rping finished before the outage: raise -C"
link_down
sleep 1
[ "$(port_state)" = PORT_DOWN ] || fail "$UIW0_DEV port reads $(port_state) with $nd down"
sleep 2
link_up
log "short outage: $nd down for 3 s under rping, $DROPPED packets lost"
wait_bg short-client 180
wait_bg short-server 60
for s in short-server short-client; do
  grep -Eiq 'mismatch|error|fail' $s.log && { show $s; fail "$s reported an error"; }
done
[ "$(port_state)" = PORT_ACTIVE ] || fail "$UIW0_DEV port reads $(port_state) after $nd up"
log "short outage: 1000 verified 4 KiB rping round trips across it"

# 2. An outage longer than TCP's (lowered) timeout, both sides streaming Writes.
sysctl -qw net.ipv4.tcp_retries2=3
port=$((port + 1))
start_bg long-server env WAIT_SECS=120 "$check" server "$UIW0_ADDR" $port write-stream
wait_cm_listen $port
start_bg long-client env WAIT_SECS=120 "$check" client "$UIW0_ADDR" "$UIW1_ADDR" $port write-stream
wait_log long-client 'streaming, [0-9]+ writes done' 60
wait_log long-server 'streaming, [0-9]+ writes done' 60
link_down
t0=$SECONDS
log "long outage: $nd down under two Write streams"
wait_log long-client 'peer gone after' 60
wait_log long-server 'peer gone after' 60
log "long outage: both streams ended $((SECONDS - t0)) s into it, link still down"
wait_bg long-client 60
wait_bg long-server 60
for s in long-client long-server; do
  grep -E 'peer gone after' $s.log | sed "s/^/# $s: /"
  expect $s '^PASS$'
done
# rdma's text output names a QP's device as "link DEV/PORT".
left=$(rdma res show qp 2>/dev/null | grep -cE "^link ($UIW0_DEV|$UIW1_DEV)/" || true)
[ "$left" = 0 ] || { rdma res show qp; fail "$left uiw QPs left behind"; }
t_end=$((SECONDS - t0))
link_up
log "long outage: $t_end s, $DROPPED packets lost; both sides ended and left no QP while it lasted"
sysctl -qw net.ipv4.tcp_retries2="$retries_old"

# 3. The link works again.
port=$((port + 1))
start_bg after-server rping -s -a "$UIW0_ADDR" -p $port -C 20 -S 4096 -V
wait_cm_listen $port
run_fg after-client 120 rping -c -a "$UIW0_ADDR" -I "$UIW1_ADDR" -p $port -C 20 -S 4096 -V
wait_bg after-server 60
echo "PASS: a short outage is survived with data verified; a long one ends both sides in an error"
