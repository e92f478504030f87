#!/usr/bin/env bash
# needs: uiw
# timeout: 600
# An SCTP Session Accept the peer never acknowledges (kernel/uiw_sctp.c uiw_sctp_send_accept).
# The passive side hands its socket over only once the Accept is SACKed (RFC 5043 §6.6's rule,
# mirrored): that wait must not hold a kernel thread, neither the rdma_accept() caller nor the
# one ordered work queue every uiw connection setup and connect-on-RTR runs in, and a peer
# that never acknowledges ends in a defined error after UIW_ACCEPT_ACK_TIMEOUT (10 s).
# A tc filter on lo drops every SCTP packet to the server's port whose first chunk is a SACK
# (the client's SACK of the Accept, and the client's data bundled behind one). Cases: rping
# (rdma_cm: the Accept is sent inside rdma_accept) and ibv_rc_pingpong -g (connect-on-RTR:
# the responder sends it from the work queue). For each: every 0.2 s for 6 s, no task's kernel
# stack stays in uiw.ko; both applications end with an error; then, without the filter, the same
# case passes with verified data. Cost: about 55 s.
source "$UIW_ROOT/tests/system/lib.sh"
source "$UIW_ROOT/providers/uiw/tests/allow_local_sources.sh"
source "$UIW_ROOT/tests/system/sctp_lib.bash"
allow_local_sources
# rping (without -v) may end in its own teardown race after a complete run (lib.sh).
EXIT_ACCEPT="rping_exit_race -"
sctp_mode
rtr_port=$(cat /sys/module/uiw/parameters/rtr_port)

# sack_drop PORT / sack_pass: IPv4 without options (lo): SCTP's destination port at octets
# 22-23, the first chunk's type at 32 (RFC 4960 §3: 12-octet common header); SACK is 3.
sack_drop() {
  tc qdisc add dev lo root handle 1: prio
  tc filter add dev lo parent 1: protocol ip prio 1 u32 match ip protocol 132 0xff \
    match u16 "$1" 0xffff at 22 match u8 3 0xff at 32 action drop
  log "SACKs to SCTP port $1 dropped on lo"
}
sack_pass() { tc qdisc del dev lo root 2>/dev/null || true; }
at_exit "sack_pass"

# no_uiw_sleeper NAME: for 6 s, no task stays in uiw.ko (its functions are uiw_*) across two
# samples 0.2 s apart (an ioctl or work item passing through is not a wait).
no_uiw_sleeper() {
  local i f hits prev=""
  for ((i = 0; i < 30; i++)); do
    hits=$(grep -l '\buiw_' /proc/[0-9]*/stack 2>/dev/null || true)
    for f in $hits; do
      case " $prev " in
      *" $f "*)
        echo "$f ($(cat "${f%stack}comm" 2>/dev/null)):" >&2
        cat "$f" >&2
        fail "$1: a task waits in uiw.ko while the Accept awaits its SACK"
        ;;
      esac
    done
    prev=$(echo $hits)
    sleep 0.2
  done
  log "$1: no task waited in uiw.ko during 6 s of the Accept awaiting its SACK"
}

# ends_failed NAME SECS: NAME exits within SECS with an error: a non-zero exit or, as rping
# reports a connection lost before its count, a line "wait for <STATE> state <n>".
ends_failed() {
  local name=$1 secs=$2 pid=${BG_PID[$1]} rc=0
  ends_within "$pid" "$secs" || { show "$name"; fail "$name still runs after ${secs}s"; }
  wait "$pid" || rc=$?
  [ "$rc" != 0 ] || grep -Eiq 'error|fail|wait for [a-z_]+ state' "$name.log" ||
    { show "$name"; fail "$name ended without an error"; }
  log "$name ended with an error (exit $rc) $((SECONDS - started)) s after the client started"
}

# 1. rdma_cm: rping server on uiw0, client on uiw1.
port=18790
sack_drop $port
start_bg cm-server rping -s -a "$UIW0_ADDR" -p $port -C 10 -S 64 -V
wait_cm_listen $port
started=$SECONDS
start_bg cm-client rping -c -a "$UIW0_ADDR" -I "$UIW1_ADDR" -p $port -C 10 -S 64 -V
no_uiw_sleeper rping
ends_failed cm-server 60
ends_failed cm-client 120
sack_pass
port=$((port + 1))
start_bg cm2-server rping -s -a "$UIW0_ADDR" -p $port -C 10 -S 64 -V
wait_cm_listen $port
run_fg cm2-client 120 rping -c -a "$UIW0_ADDR" -I "$UIW1_ADDR" -p $port -C 10 -S 64 -V
wait_bg cm2-server 60

# 2. connect-on-RTR: the initiator (uiw0, the lower GID) connects to uiw1's rtr_port.
port=18795
sack_drop "$rtr_port"
start_bg rtr-server ibv_rc_pingpong -d "$UIW1_DEV" -g 0 -p $port -c -n 10
wait_tcp_listen $port
started=$SECONDS
start_bg rtr-client ibv_rc_pingpong -d "$UIW0_DEV" -g 0 -p $port -c -n 10 "$UIW1_ADDR"
no_uiw_sleeper connect-on-RTR
ends_failed rtr-server 60
ends_failed rtr-client 120
sack_pass
port=$((port + 1))
start_bg rtr2-server ibv_rc_pingpong -d "$UIW1_DEV" -g 0 -p $port -c -n 10
wait_tcp_listen $port
run_fg rtr2-client 120 ibv_rc_pingpong -d "$UIW0_DEV" -g 0 -p $port -c -n 10 "$UIW1_ADDR"
wait_bg rtr2-server 60
expect rtr2-client ' bytes in .* seconds = ' "the pingpong without the filter printed no result"
echo "PASS: an unacknowledged SCTP Accept holds no kernel thread and ends in an error"
