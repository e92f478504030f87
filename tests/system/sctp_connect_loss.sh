#!/usr/bin/env bash
# needs: uiw
# timeout: 300
# About 40 s (the fourth INIT leaves 21 s after the first).
# An SCTP connect whose first INITs are lost: uiw.ko waits long enough for SCTP's own
# retransmissions. Every SCTP packet to the server's port is dropped until three were, so the
# client's INIT goes out at 0, 3 and 9 s in vain (RTO.Initial 3 s, doubling) and gets through at
# 21 s; the connection must come up and rping -V verify 10 round trips. With a
# 10 s handshake timeout (uiw_netem's "sctp-loss5" once failed that way under 5% loss: rdma_cm
# UNREACHABLE, -110) the client gives up before the fourth INIT.
source "$UIW_ROOT/tests/system/lib.sh"
source "$UIW_ROOT/providers/uiw/tests/allow_local_sources.sh"
source "$UIW_ROOT/tests/system/sctp_lib.bash"
allow_local_sources
# rping may end in its own teardown race after a complete run (lib.sh).
EXIT_ACCEPT="rping_exit_race 10"
sctp_mode

port=7196
start_bg server rping -s -a "$UIW0_ADDR" -p $port -C 10 -V -v
wait_cm_listen $port
nft -f - <<EOT
table inet uiw_init_loss {
  chain out {
    type filter hook output priority 0;
    meta l4proto sctp th dport $port counter drop
  }
}
EOT
at_exit "nft delete table inet uiw_init_loss 2>/dev/null || true"
start_bg client rping -c -a "$UIW0_ADDR" -I "$UIW1_ADDR" -p $port -C 10 -V -v
# Until the INIT and its retransmissions at 3 and 9 s are dropped (counted by the rule).
drops=0
for ((i = 0; i < 60 && drops < 3; i++)); do
  sleep 0.5
  drops=$(nft list table inet uiw_init_loss | sed -n 's/.*counter packets \([0-9]*\).*/\1/p')
done
nft delete table inet uiw_init_loss
[ "$drops" -ge 3 ] || fail "expected the INIT and two retransmissions dropped in 30 s, saw $drops"
log "$drops SCTP packets to port $port dropped (the INIT at 0, 3 and 9 s); the next goes through"
wait_bg client 60
wait_bg server 30
n=$(grep -c 'ping data: rdma-ping-' client.log || true)
[ "$n" = 10 ] || { show client; fail "rping: $n verified pings, want 10"; }
log "PASS: connected after the fourth INIT; 10 verified rping round trips over SCTP"
