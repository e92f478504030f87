#!/usr/bin/env bash
# needs: uiw
# uiw.ko's tcp_rcvbuf: every TCP socket uiw makes has that receive buffer, fixed when it is made
# (autotuning would grow it to tcp_rmem[2]); ss shows it on both ends of a uiw0 <- uiw1
# connection, for the default and for a value written to the parameter at run time. Why it is
# bounded: a Send completes once its socket took it and uiw's receiver is a thread of the
# application, so the buffer is how far a sender's completions run ahead of placement; with
# 6 MiB, perftest's event-mode ib_send_bw (whose client reads its server's credit Writes only
# after a completion event) hung in 4 of 15 runs of -s 65536 -n 3000 -r 300, with 2 MiB in 0 of
# 15 on an idle host and 1 of 15 beside a CPU-bound process: a rate, measured, not asserted here.
# About 20 s.
# timeout: 300
source "$UIW_ROOT/tests/system/lib.sh"

param=/sys/module/uiw/parameters/tcp_rcvbuf
[ -w $param ] || fail "no $param"
default=$(cat $param)
[ "$default" = 2097152 ] || fail "tcp_rcvbuf is $default, want the 2 MiB default"
restore() { echo "$default" >$param; }
at_exit restore

port=19700
syn_waits_for_listener $port $((port + 1))

# both_ends_listed FILE: ss lists both ends of the connection on $port, with their socket
# memory, into FILE.
both_ends_listed() {
  ss -tmnH state established "( sport = :$port or dport = :$port )" >"$1"
  [ "$(grep -c skmem "$1" || true)" -ge 2 ]
}

# rcvbuf_of_connection BYTES: a 4 s ib_write_bw from uiw1 to uiw0; while it runs, both ends of its
# TCP connection (the rdma_cm port is the TCP port on iWARP) must show a receive buffer of BYTES.
rcvbuf_of_connection() {
  local want=$1 name=rcvbuf$1 found
  start_bg "$name-server" ib_write_bw -R -d "$UIW0_DEV" -p $port -s 65536 -D 4
  wait_cm_listen $port
  start_bg "$name-client" ib_write_bw -R -d "$UIW1_DEV" -p $port -s 65536 -D 4 "$UIW0_ADDR"
  poll_until 60 0.1 both_ends_listed "$name.ss" || true
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
