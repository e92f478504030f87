#!/usr/bin/env bash
# needs: uiw
# timeout: 900
# Connect-on-RTR against an unprivileged attacker (user nobody) on the initiator's host
# (kernel/uiw_rtr.c: privileged service and source ports, one refusal reason). While
# ibv_rc_pingpong -g runs uiw0 (initiator: the lower GID) <-> uiw1 with every buffer checked,
# tests/system/uiw_rtr_attacker.py tries to bind the service port and a privileged source port
# (must fail: EACCES), holds 130 connections to the service (more than its backlog of 128),
# and sends hand-made MPA Requests from the initiator's address for every pair of QPNs
# `rdma res show qp` shows it. The pingpong must succeed; the service must answer the attacker
# not one byte. Last, connect-on-RTR from another network namespace is refused at RTR.
source "$UIW_ROOT/tests/system/lib.sh"

rtr_port=$(cat /sys/module/uiw/parameters/rtr_port)
[ "$rtr_port" -lt 1024 ] || fail "rtr_port $rtr_port is not a privileged port"
id nobody >/dev/null || fail "no user nobody"
as_nobody() { setpriv --reuid=nobody --regid=nogroup --clear-groups --inh-caps=-all -- "$@"; }
cp "$UIW_ROOT/tests/system/uiw_rtr_attacker.py" attacker.py
chmod 755 . attacker.py

run_round() { # NAME PORT: the attacker beside one verified pingpong, from before it until after
  local name=$1 port=$2
  start_bg "$name-attacker" as_nobody /usr/bin/python3 attacker.py "$UIW0_ADDR" "$UIW1_ADDR" "$rtr_port" 900 130 "$name.stop"
  # The pingpong starts once the attacker watches (its start under TCG takes seconds when the
  # host is busy) and lasts seconds, several of the attacker's looks at `rdma res`.
  poll_until 120 0.2 log_has "$name-attacker" '^attacker: watching' || fail "$name: the attacker did not start"
  start_bg "$name-server" ibv_rc_pingpong -d "$UIW1_DEV" -g 0 -p "$port" -c -n 1000
  wait_tcp_listen "$port"
  run_fg "$name-client" 300 ibv_rc_pingpong -d "$UIW0_DEV" -g 0 -p "$port" -c -n 1000 "$UIW1_ADDR"
  wait_bg "$name-server" 120
  ! pid_gone "${BG_PID[$name-attacker]}" || fail "$name: the attacker ended before the pingpong did"
  : >"$name.stop"
  wait_bg "$name-attacker" 120
  for side in server client; do
    expect "$name-$side" '1000 iters in ' "$name: the pingpong $side did not finish"
    if grep -Eiq 'fail|error|mismatch|couldn' "$name-$side.log"; then
      show "$name-$side"
      fail "$name: the pingpong $side reported an error"
    fi
  done
  show "$name-attacker"
  expect "$name-attacker" 'service port on the responder address: EACCES' "$name: the attacker could bind the service port"
  expect "$name-attacker" 'service port on the initiator address: EACCES' "$name: the attacker could bind the service port"
  expect "$name-attacker" 'service port on the wildcard address: EACCES' "$name: the attacker could bind the service port"
  expect "$name-attacker" 'privileged source port 600: EACCES' "$name: the attacker could bind a privileged port"
  expect "$name-attacker" 'answered 0 \(0 bytes\)' "$name: the service answered the attacker"
  grep -Eq 'requests [1-9][0-9]* naming QPNs \[[0-9]+, [0-9]+' "$name-attacker.log" ||
    fail "$name: the attacker sent no Request naming two QPNs"
  log "$name: pingpong $(grep -h ' iters in ' "$name-client.log")"
}

run_round round1 18651
run_round round2 18652

# A process in another network namespace sees the devices (rdma's shared netns mode) but may
# not have uiw.ko connect for it in the netdevs' namespace: its RTR modify fails (EPERM).
ip netns add uiw-rtr-other
ip -n uiw-rtr-other link set lo up
start_bg ns-server ip netns exec uiw-rtr-other ibv_rc_pingpong -d "$UIW1_DEV" -g 0 -p 18653 -n 5
poll_until 120 0.2 tcp_listening 18653 ip netns exec uiw-rtr-other || true
rc=0
timeout 120 ip netns exec uiw-rtr-other ibv_rc_pingpong -d "$UIW0_DEV" -g 0 -p 18653 -n 5 127.0.0.1 \
  >ns-client.log 2>&1 || rc=$?
kill "${BG_PID[ns-server]}" 2>/dev/null || true
ip netns del uiw-rtr-other
[ "$rc" != 0 ] || { show ns-client; fail "connect-on-RTR worked from another network namespace"; }
# Whichever side reaches RTR first is refused; the other then loses its exchange socket.
grep -q 'Failed to modify QP to RTR' ns-client.log ns-server.log ||
  { show ns-client; show ns-server; fail "the pingpong in another namespace failed, but not at RTR"; }
log "another namespace: $(grep -h -m1 'Failed to modify QP' ns-client.log ns-server.log)"
echo "PASS: connect-on-RTR survives an unprivileged attacker on the initiator's host"
