#!/usr/bin/env bash
# needs: uiw
# uiw.ko connection manager through rdma_cm, without a provider: kernel/tests/uiw_cm_probe
# speaks the raw uverbs and rdma_ucm ABIs. Covers accept (IPv4 and IPv6) with private data
# both ways, RFC 6581 IRD/ORD and RTR negotiation, the socket hand-off (once, positioned at
# the peer's first bytes), the readiness eventfd, disconnect, reject with private data, a
# foreign QPN, no listener, MPA revision 1, CRC, a killed peer, and `rdma link del` under a
# live connection.
source "$UIW_ROOT/tests/system/lib.sh"

dmesg_start=$(dmesg | wc -l)
test_program uiw_cm_probe probe
dev=$UIW1_DEV a4=$UIW1_ADDR a6=$UIW1_ADDR6
params=/sys/module/uiw/parameters

# server_client NAME ADDR PORT [SERVER_MODE [CLIENT_MODE]]: one connection on $dev.
server_client() {
  local name=$1 addr=$2 port=$3
  start_bg "$name-s" ./probe server "$dev" "$addr" "$port" "${4:-data}"
  wait_cm_listen "$port"
  run_fg "$name-c" 60 ./probe client "$dev" "$addr" "$addr" "$port" "${5:-data}"
  wait_bg "$name-s" 30
}

# 1. IPv4 accept: private data, IRD/ORD (client IRD 2 ORD 8, server IRD 4 ORD 4: relaxed
#    negotiation gives the server ORD 2 and IRD 8), peer-to-peer with Write RTR, hand-off.
server_client v4 "$a4" 7301
expect v4-s '^request-data: hello-server$'
expect v4-s '^event: 4 status 0 .* ird 8 ord 2$' "CONNECT_REQUEST: responder_resources 8, initiator_depth 2"
expect v4-c '^reply-data: reply-from-sv$'
expect v4-s '^info: flags 0x6 .* ird 8 ord 2 rev 2 rtr 1 ' "server conn_info"
expect v4-c '^info: flags 0xe .* ird 2 ord 8 rev 2 rtr 1 ' "client conn_info"
for s in v4-s v4-c; do
  expect $s '^eventfd: [1-9]' "readiness eventfd not signalled"
  expect $s '^take-again: EALREADY$'
  expect $s '^stream: ok$' "the handed-over stream does not start at the peer's first byte"
  expect $s '^event: 10 ' "no DISCONNECTED"
  grep -q '^error' $s.log && { show $s; fail "$s reported an error"; }
done
grep -q "remote \[::ffff:$a4\]:7301" v4-c.log || { show v4-c; fail "client remote address"; }
# Shadow objects: STag = lkey = rkey, two registrations get distinct STags with index != 0;
# CQ_SIGNAL puts the CQ's handle on its completion channel (ibv_get_cq_event).
expect v4-s '^cq-event: ok$' "CQ_SIGNAL did not reach the completion channel"
expect v4-s '^srq: max_wr 32 .* num_rqe 32$'
awk '/^mr:/ { if ($3 != $5 || $5 != $7 || substr($7, 3, 6) == "000000") bad = 1; n++; k[$7] = 1 }
     END { exit !(n == 2 && length(k) == 2 && !bad) }' v4-s.log || { show v4-s; fail "MR keys"; }

# 2. IPv6.
server_client v6 "$a6" 7302
expect v6-c '^info: flags 0x1e .* rev 2 rtr 1 ' "IPv6 client conn_info"
expect v6-s '^stream: ok$'

# 3. Reject with private data: the client sees REJECTED (-ECONNREFUSED) and the data.
server_client rej "$a4" 7303 reject
expect rej-c '^event: 8 status -111 ' "no REJECTED"
expect rej-c '^rejected-data: go-away$'

# 4. A QPN of another process: rdma_connect fails, nothing reaches the wire.
start_bg own ./probe server "$dev" "$a4" 7304
wait_cm_listen 7304
qpn=$(sed -n 's/^qp: qpn \([0-9]*\) .*/\1/p' own.log)
run_fg steal 30 ./probe steal "$dev" "$a4" "$a4" 7304 "$qpn"
expect steal '^connect: Invalid argument$' "connect with a foreign QPN"
grep -q '^event: 4 ' own.log && fail "the foreign-QPN connect reached the listener"
kill "${BG_PID[own]}"

# 5. Nobody listens: REJECTED with -ECONNREFUSED (TCP reset).
run_fg nol 60 ./probe client "$dev" "$a4" "$a4" 7305
expect nol '^event: 8 status -111 ' "no REJECTED without a listener"

# 6. MPA revision 1 (RFC 5044): no IRD/ORD exchange, no RTR; the app's values stand.
echo 1 >"$params/mpa_rev"
server_client rev1 "$a4" 7306
echo 2 >"$params/mpa_rev"
expect rev1-c '^info: flags 0x8 .* ird 2 ord 8 rev 1 rtr 0 ' "rev 1 client conn_info"
expect rev1-s '^info: flags 0x0 .* ird 4 ord 4 rev 1 rtr 0 ' "rev 1 server conn_info"
expect rev1-s '^stream: ok$'

# 7. CRC requested by the initiator: both sides use it (RFC 5044 §7.1.1).
echo 1 >"$params/mpa_crc"
server_client crc "$a4" 7307
echo 0 >"$params/mpa_crc"
expect crc-c '^info: flags 0xf ' "client CRC flag"
expect crc-s '^info: flags 0x7 ' "server CRC flag"

# 8. The client dies: the server gets DISCONNECTED.
start_bg kill-s ./probe server "$dev" "$a4" 7308
wait_cm_listen 7308
start_bg kill-c ./probe client "$dev" "$a4" "$a4" 7308 hold
wait_log kill-c '^holding$' 120
kill -9 "${BG_PID[kill-c]}"
wait_bg kill-s 30
expect kill-s '^event: 10 ' "no DISCONNECTED after the peer died"

# 9. rdma link del under a live connection: both ends see the device go (DEVICE_REMOVAL).
start_bg del-s ./probe server "$dev" "$a4" 7309
wait_cm_listen 7309
start_bg del-c ./probe client "$dev" "$a4" "$a4" 7309 hold
wait_log del-c '^holding$' 120
timeout 60 rdma link del "$dev" || fail "rdma link del $dev under a live connection"
[ ! -d "/sys/class/infiniband/$dev" ] || fail "$dev still registered"
kill "${BG_PID[del-c]}" "${BG_PID[del-s]}" 2>/dev/null || true
wait "${BG_PID[del-c]}" "${BG_PID[del-s]}" 2>/dev/null || true
rdma link add "$dev" type uiw netdev "$UIW1_NETDEV"

if dmesg | tail -n +"$((dmesg_start + 1))" | grep -E 'BUG|WARNING|Oops|Call Trace'; then
  fail "kernel complained (above)"
fi
echo "PASS: uiw connection manager"
