#!/usr/bin/env bash
# needs: uiw
# timeout: 600
# Listener backlog exhaustion (kernel/uiw_cm_conn.c): idle connections that never send an MPA
# Request must not keep legitimate connections out. Before, a listener whose backlog was full
# of such children closed every new connection, so ~130 idle connections renewed every 5 s
# failed every legitimate connect; now the oldest idle child (its read ran and found no MPA
# Request) is dropped for the newcomer, and a connect-on-RTR initiator whose connection is reset
# before any Reply retries. Only a child whose read has run is idle: with both ends in this VM,
# rping's Request is sent by work queued behind the listener's accept loop, and dropping the
# child before its read loses that Request ("RDMA_CM_EVENT_REJECTED, error -104").
#   rdma_cm: nobody holds 130 idle connections to an `rping -s` listener (backlog 3) on uiw0
#     while `rping -c -V` from uiw1 runs 20 verified pings, then forty short connections to an
#     `rping -s -P` on the same port: each must pass, and the listener's side never holds more
#     than its backlog of children and TCP's accept queue.
#   connect-on-RTR: root on the initiator's host (the only one who may bind the privileged
#     source ports the service admits) holds 130 idle connections from ports 600-999 to the
#     responder's rtr_port while `ibv_rc_pingpong -g 0 -c` runs: it must pass.
source "$UIW_ROOT/tests/system/lib.sh"
source "$UIW_ROOT/tests/system/interop_lib.bash"
rtr_port=$(cat /sys/module/uiw/parameters/rtr_port)
interop_setup
cp "$UIW_ROOT/tests/system/uiw_conn_holder.py" holder.py
chmod 755 . holder.py
as_nobody() { setpriv --reuid=nobody --regid=nogroup --clear-groups --inh-caps=-all -- "$@"; }

EXIT_ACCEPT="rping_exit_race 20" # rping's own teardown race (lib.sh)
start_bg cm-server rping -s -a "$UIW0_ADDR" -p 7940 -C 20 -S 2000 -V -v
wait_cm_listen 7940
start_bg cm-holder as_nobody /usr/bin/python3 holder.py "$UIW0_ADDR" 7940 130 600 cm-holder.stop "$UIW1_ADDR"
wait_log cm-holder '^holder: started' 60
# Meanwhile the listener's side holds at most its backlog of children (3) and TCP's accept
# queue (backlog + 1): uiw.ko used to expire the oldest child by a timer that could run only
# after its accept loop, which then found the same child for every connection it took.
most=0
for _ in 1 2 3 4 5 6 7 8; do
  n=$(ss -Htn state established "( sport = :7940 )" | wc -l)
  [ "$n" -le "$most" ] || most=$n
  nap 1
done
log "the listener's side held at most $most connections"
[ "$most" -le 8 ] || fail "rdma_cm listener with backlog 3 held $most connections (at most 8 expected)"
run_fg cm-client 300 rping -c -a "$UIW0_ADDR" -I "$UIW1_ADDR" -p 7940 -C 20 -S 2000 -V -v
wait_bg cm-server 60
for side in client server; do
  n=$(grep -c 'ping data: rdma-ping-' "cm-$side.log" || true)
  [ "$n" = 20 ] || { show "cm-$side" | tail -n 20; fail "rdma_cm $side: $n verified pings, want 20"; }
done
# Then short connections one after another to a persistent server on the same port, while the
# holder keeps flooding it: each must get through with its pings verified.
EXIT_ACCEPT="rping_exit_race 2"
start_bg cm-many-server rping -s -P -a "$UIW0_ADDR" -p 7940 -C 2 -S 100 -V -v
wait_cm_listen 7940
for i in $(seq 40); do
  run_fg "cm-many-$i" 60 rping -c -a "$UIW0_ADDR" -I "$UIW1_ADDR" -p 7940 -C 2 -S 100 -V -v
  n=$(grep -c 'ping data: rdma-ping-' "cm-many-$i.log" || true)
  [ "$n" = 2 ] || { show "cm-many-$i"; fail "short connection $i: $n verified pings, want 2"; }
done
kill "${BG_PID[cm-many-server]}" 2>/dev/null || true
wait "${BG_PID[cm-many-server]}" 2>/dev/null || true
unset "BG_PID[cm-many-server]"
unset EXIT_ACCEPT
# The flood lasted until the last short connection: the holder is still there to be stopped.
! pid_gone "${BG_PID[cm-holder]}" || { show cm-holder; fail "the holder ended before the last short connection"; }
: >cm-holder.stop
wait_bg cm-holder 60
show cm-holder
log "PASS rdma_cm listener: 20 x 2000 bytes and 40 short connections verified beside $(grep -o 'at most.*' cm-holder.log)"

# The RTR service listens only while a responder QP waits in RTR: the holder starts first and
# fills the listener as soon as it appears.
start_bg rtr-holder /usr/bin/python3 holder.py "$UIW1_ADDR" "$rtr_port" 130 600 rtr-holder.stop "$UIW0_ADDR" 600 999
start_bg rtr-server ibv_rc_pingpong -d "$UIW1_DEV" -g 0 -p 18660 -c -n 100
wait_tcp_listen 18660
wait_log rtr-holder '^holder: started' 60
run_fg rtr-client 300 ibv_rc_pingpong -d "$UIW0_DEV" -g 0 -p 18660 -c -n 100 "$UIW1_ADDR"
wait_bg rtr-server 60
for side in client server; do
  expect "rtr-$side" '100 iters in ' "connect-on-RTR $side did not finish"
done
! pid_gone "${BG_PID[rtr-holder]}" || { show rtr-holder; fail "the holder ended before the pingpong did"; }
: >rtr-holder.stop
wait_bg rtr-holder 60
show rtr-holder
log "PASS connect-on-RTR: $(grep -h ' iters in ' rtr-client.log) beside $(grep -o 'at most.*' rtr-holder.log)"
echo "PASS: idle connections do not keep legitimate ones out"
