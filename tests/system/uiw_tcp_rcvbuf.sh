#!/usr/bin/env bash
# needs: uiw
# uiw.ko's tcp_rcvbuf: every TCP socket uiw makes has that receive buffer, fixed when it is made
# (ss shows it on both ends of a uiw0 -> uiw1 connection, for the default and for a value set
# at run time), and the bound keeps perftest's event-mode ib_send_bw ending. That client reads
# the credits its server RDMA-Writes only after a completion event, and a Send completes once
# its socket took it: a receive buffer holding many unplaced Sends (autotuning grows it to
# 6 MiB, about 100 x 64 KiB, drained by a thread of the server process) lets the client reap its
# last completion before the next credit arrives, and it then sleeps for ever. Of the 15 rounds
# below, 4 hung with tcp_rcvbuf=0 (autotuning), 1 with 4 MiB, none with 2 MiB. About 90 s.
# timeout: 600
source "$UIW_ROOT/tests/system/lib.sh"

param=/sys/module/uiw/parameters/tcp_rcvbuf
[ -w $param ] || fail "no $param"
default=$(cat $param)
[ "$default" = 2097152 ] || fail "tcp_rcvbuf is $default, want the 2 MiB default"
restore() { echo "$default" >$param; }
at_exit restore

port=19700
syn_waits_for_listener $port $((port + 40))

# rcvbuf_of_connection BYTES: a 4 s ib_write_bw from uiw1 to uiw0; while it runs, both ends of its
# TCP connection (the rdma_cm port is the TCP port on iWARP) must show a receive buffer of BYTES.
rcvbuf_of_connection() {
  local want=$1 name=rcvbuf$1 found i
  start_bg "$name-server" ib_write_bw -R -d "$UIW0_DEV" -p $port -s 65536 -D 4
  wait_cm_listen $port
  start_bg "$name-client" ib_write_bw -R -d "$UIW1_DEV" -p $port -s 65536 -D 4 "$UIW0_ADDR"
  for ((i = 0; i < 300; i++)); do
    ss -tmnH state established "( sport = :$port or dport = :$port )" >"$name.ss"
    [ "$(grep -c skmem "$name.ss" || true)" -lt 2 ] || break
    nap 0.1
  done
  wait_bg "$name-client" 60
  wait_bg "$name-server" 30
  sed 's/^/  ss| /' "$name.ss"
  found=$(grep -c "rb$want," "$name.ss" || true)
  [ "$found" = 2 ] || fail "$found of the connection's two sockets have a $want-byte receive buffer"
  log "PASS both sockets of a uiw connection: receive buffer $want"
  port=$((port + 1))
}

rcvbuf_of_connection 2097152
echo 1048576 >$param
rcvbuf_of_connection 1048576
restore

rounds=15 hung=0
for r in $(seq 1 $rounds); do
  args=(-R -e -s 65536 -n 3000 -r 300 -p "$port")
  start_bg "event$r-server" ib_send_bw "${args[@]}" -d "$UIW0_DEV"
  wait_cm_listen $port
  start_bg "event$r-client" ib_send_bw "${args[@]}" -d "$UIW1_DEV" "$UIW0_ADDR"
  if ! ends_within "${BG_PID[event$r-client]}" 60; then
    hung=$((hung + 1))
    log "round $r: the event-mode client did not end within 60 s"
    kill -9 "${BG_PID[event$r-server]}" "${BG_PID[event$r-client]}" 2>/dev/null || true
    wait "${BG_PID[event$r-server]}" "${BG_PID[event$r-client]}" 2>/dev/null || true
    unset "BG_PID[event$r-server]" "BG_PID[event$r-client]"
  else
    wait_bg "event$r-client" 5
    wait_bg "event$r-server" 30
    perftest_sides_ok "event$r" "$UIW0_DEV" "$UIW1_DEV"
  fi
  port=$((port + 1))
done
[ $hung = 0 ] || fail "$hung of $rounds event-mode ib_send_bw runs hung"
log "PASS $rounds event-mode ib_send_bw runs (-s 65536 -n 3000 -r 300) ended"
