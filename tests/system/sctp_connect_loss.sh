#!/usr/bin/env bash
# needs: uiw
# timeout: 300
# About 60 s (the fourth INIT leaves 21 s after the first, twice).
# An SCTP connect whose first INITs are lost: uiw.ko waits long enough for SCTP's own
# retransmissions. Every SCTP packet to the server's port is dropped until three were, so the
# client's INIT goes out at 0, 3 and 9 s in vain (RTO.Initial 3 s, doubling) and gets through at
# 21 s; the connection must come up and rping -V verify 10 round trips. With a
# 10 s handshake timeout (uiw_netem's "sctp-loss5" once failed that way under 5% loss: rdma_cm
# UNREACHABLE, -110) the client gives up before the fourth INIT. Then the same for
# connect-on-RTR (ibv_rc_pingpong -c): the initiator's INITs to the peer's rtr_port are lost
# the same way; its connect runs on the same handshake timer, and rtr_timeout (10 s) bounds
# only the retries after a refusal, which a lost INIT is not.
source "$UIW_ROOT/tests/system/lib.sh"
source "$UIW_ROOT/providers/uiw/tests/allow_local_sources.sh"
source "$UIW_ROOT/tests/system/sctp_lib.bash"
allow_local_sources
# rping may end in its own teardown race after a complete run (lib.sh).
EXIT_ACCEPT="rping_exit_race 10"
sctp_mode

at_exit "nft delete table inet uiw_init_loss 2>/dev/null || true"
# drop_inits PORT: drops every SCTP packet to PORT (the rule counts them).
drop_inits() {
  nft -f - <<EOT
table inet uiw_init_loss {
  chain out {
    type filter hook output priority 0;
    meta l4proto sctp th dport $1 counter drop
  }
}
EOT
}
# lose_three_inits PORT: until the INIT and its retransmissions at 3 and 9 s are dropped, then
# lets the next through.
lose_three_inits() {
  local drops=0 i
  for ((i = 0; i < 60 && drops < 3; i++)); do
    sleep 0.5
    drops=$(nft list table inet uiw_init_loss | sed -n 's/.*counter packets \([0-9]*\).*/\1/p')
  done
  nft delete table inet uiw_init_loss
  [ "$drops" -ge 3 ] || fail "expected the INIT and two retransmissions to port $1 dropped in 30 s, saw $drops"
  log "$drops SCTP packets to port $1 dropped (the INIT at 0, 3 and 9 s); the next goes through"
}

port=7196
start_bg server rping -s -a "$UIW0_ADDR" -p $port -C 10 -V -v
wait_cm_listen $port
drop_inits $port
start_bg client rping -c -a "$UIW0_ADDR" -I "$UIW1_ADDR" -p $port -C 10 -V -v
lose_three_inits $port
wait_bg client 60
wait_bg server 30
n=$(grep -c 'ping data: rdma-ping-' client.log || true)
[ "$n" = 10 ] || { show client; fail "rping: $n verified pings, want 10"; }
log "rdma_cm connected after the fourth INIT; 10 verified rping round trips over SCTP"

# Connect-on-RTR: ibv_rc_pingpong exchanges QP numbers over TCP on port 18706 (not dropped),
# then whichever QP initiates (uiw_rtr.c) opens its association to the other's rtr_port.
rtr_port=$(cat /sys/module/uiw/parameters/rtr_port)
EXIT_ACCEPT=  # ibv_rc_pingpong exits 0 or fails
drop_inits "$rtr_port"
start_bg pp-server ibv_rc_pingpong -d "$UIW0_DEV" -g 0 -p 18706 -c -n 100
wait_tcp_listen 18706
start_bg pp-client ibv_rc_pingpong -d "$UIW1_DEV" -g 0 -p 18706 -c -n 100 "$UIW0_ADDR"
lose_three_inits "$rtr_port"
wait_bg pp-client 60
wait_bg pp-server 30
for side in server client; do
  expect "pp-$side" '^100 iters in ' "ibv_rc_pingpong $side did not finish its 100 iterations"
done
log "PASS: rdma_cm and connect-on-RTR connected after the fourth INIT (rping -V, ibv_rc_pingpong -c)"
