#!/usr/bin/env bash
# needs: uiw
# timeout: 300
# About 20-30 s (the fault: 60 s).
# A Send that completed before its sender disconnected and destroyed the QP still reaches the
# peer when its segments were lost: the close is TCP's graceful one, which retransmits what
# the socket holds and then sends the FIN, as close(2) and siw do (RFC 5040 §6: the LLP
# closes after the outstanding messages). Applications tear down right after their last Send
# (perftest -R after its closing exchange); a reset there discards the socket's unacknowledged
# data, and the peer's receive flushes instead.
# The client (uiw1) sends its last Send while every packet to and from uiw0 is dropped, then
# rdma_disconnect()s and destroys everything at once and exits; after the outage the server
# must receive that Send intact, then DISCONNECTED.
source "$UIW_ROOT/tests/system/lib.sh"
source "$UIW_ROOT/providers/uiw/tests/allow_local_sources.sh"
allow_local_sources

check=$UIW_BUILD/bin/uiw_cm_check
[ -x "$check" ] || fail "$check missing: cmake --build \$UIW_BUILD --target uiw_cm_check"
at_exit "tc qdisc del dev lo root 2>/dev/null || true"

port=19410
start_bg server env WAIT_SECS=60 "$check" server "$UIW0_ADDR" $port last-recv
wait_cm_listen $port
start_bg client env SEND_DELAY=5 "$check" client "$UIW0_ADDR" "$UIW1_ADDR" $port last-send
wait_log client 'the last Send in' 60
lo_blackhole "$UIW0_ADDR"
log "every packet to and from $UIW0_ADDR dropped"
# The client sends, disconnects, destroys its QP and exits, all during the outage.
wait_bg client 30
sleep 1
lo_blackhole_end
log "outage over: $DROPPED packets dropped"
# TCP's retransmission timer has backed off during the outage: the Send comes within seconds.
wait_bg server 90
expect server 'received "uiw_cm_check last from the client"' "the server never got the client's last Send"
expect server 'DISCONNECTED' "the server saw no DISCONNECTED after the last Send"
log "PASS: a Send completed before the sender's teardown arrived after the outage"
