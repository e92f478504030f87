#!/usr/bin/env bash
# needs: uiw
# timeout: 300
# About 35 s (the fourth INIT leaves 21 s after the first; the two connects wait side by side).
# An SCTP connect whose first INITs are lost: uiw.ko waits long enough for SCTP's own
# retransmissions. Every SCTP packet to the server's port is dropped until three were, so the
# client's INIT goes out at 0, 3 and 9 s in vain (RTO.Initial 3 s, doubling) and gets through at
# 21 s; the connection must come up and rping -V verify 10 round trips. With a
# 10 s handshake timeout (uiw_netem's "sctp-loss5" once failed that way under 5% loss: rdma_cm
# UNREACHABLE, -110) the client gives up before the fourth INIT. At the same time the same for
# connect-on-RTR (ibv_rc_pingpong -c): the initiator's INITs to the peer's rtr_port are lost
# the same way; its connect runs on the same handshake timer, and rtr_timeout (10 s) bounds
# only the retries after a refusal, which a lost INIT is not. (Two connects waiting for their
# INITs at once: neither may hold up the other's setup.)
source "$UIW_ROOT/tests/system/lib.sh"
source "$UIW_ROOT/providers/uiw/tests/allow_local_sources.sh"
source "$UIW_ROOT/tests/system/sctp_lib.bash"
allow_local_sources
# rping may end in its own teardown race after a complete run (lib.sh).
EXIT_ACCEPT="rping_exit_race 10"
sctp_mode

rtr_port=$(cat /sys/module/uiw/parameters/rtr_port)
at_exit "nft delete table inet uiw_init_loss_7196 2>/dev/null; nft delete table inet uiw_init_loss_$rtr_port 2>/dev/null"
# drop_inits PORT: drops every SCTP packet to PORT (the rule counts them).
drop_inits() {
  nft -f - <<EOT
table inet uiw_init_loss_$1 {
  chain out {
    type filter hook output priority 0;
    meta l4proto sctp th dport $1 counter drop
  }
}
EOT
}
inits_dropped() { # PORT: sets drops; true once three are
  drops=$(nft list table inet "uiw_init_loss_$1" | sed -n 's/.*counter packets \([0-9]*\).*/\1/p')
  [ "${drops:-0}" -ge 3 ]
}
# lose_three_inits PORT: until the INIT and its retransmissions at 3 and 9 s are dropped, then
# lets the next through.
lose_three_inits() {
  local drops=0
  poll_until 30 0.5 inits_dropped "$1" || true
  nft delete table inet "uiw_init_loss_$1"
  [ "$drops" -ge 3 ] || fail "expected the INIT and two retransmissions to port $1 dropped in 30 s, saw $drops"
  log "$drops SCTP packets to port $1 dropped (the INIT at 0, 3 and 9 s); the next goes through"
}

# rdma_cm (rping -V) to port 7196, and connect-on-RTR: ibv_rc_pingpong exchanges QP numbers over
# TCP on port 18706 (not dropped), then whichever QP initiates (uiw_rtr.c) opens its association
# to the other's rtr_port.
port=7196
start_bg server rping -s -a "$UIW0_ADDR" -p $port -C 10 -V -v
start_bg pp-server ibv_rc_pingpong -d "$UIW0_DEV" -g 0 -p 18706 -c -n 100
wait_cm_listen $port
wait_tcp_listen 18706
drop_inits $port
drop_inits "$rtr_port"
start_bg client rping -c -a "$UIW0_ADDR" -I "$UIW1_ADDR" -p $port -C 10 -V -v
start_bg pp-client ibv_rc_pingpong -d "$UIW1_DEV" -g 0 -p 18706 -c -n 100 "$UIW0_ADDR"
lose_three_inits $port &
cm_loss=$!
lose_three_inits "$rtr_port" &
rtr_loss=$!
wait $cm_loss || fail "the rdma_cm connect's INITs were not lost as planned (above)"
wait $rtr_loss || fail "the connect-on-RTR INITs were not lost as planned (above)"
wait_bg client 60
wait_bg server 30
n=$(grep -c 'ping data: rdma-ping-' client.log || true)
[ "$n" = 10 ] || { show client; fail "rping: $n verified pings, want 10"; }
log "rdma_cm connected after the fourth INIT; 10 verified rping round trips over SCTP"
EXIT_ACCEPT=  # ibv_rc_pingpong exits 0 or fails
wait_bg pp-client 60
wait_bg pp-server 30
for side in server client; do
  expect "pp-$side" '^100 iters in ' "ibv_rc_pingpong $side did not finish its 100 iterations"
done
log "PASS: rdma_cm and connect-on-RTR connected after the fourth INIT (rping -V, ibv_rc_pingpong -c)"
