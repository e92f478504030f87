#!/usr/bin/env bash
# needs: uiw
# timeout: 400
# DDP over SCTP with two addresses per endpoint (RFC 5043 §7.2): each uiw netdev gets a second
# IPv4 address; uiw binds an SCTP endpoint to the IPv4 addresses of its own netdev (kernel/
# README.md), so the INIT (from uiw1) and the INIT ACK (from uiw0) each list two addresses,
# and /proc/net/sctp/assocs shows the association with both. rping -C 50 -V must pass.
source "$UIW_ROOT/tests/system/lib.sh"
source "$UIW_ROOT/providers/uiw/tests/allow_local_sources.sh"
source "$UIW_ROOT/tests/system/sctp_lib.bash"
allow_local_sources
# rping (without -v) may end in its own teardown race after a complete run (lib.sh).
EXIT_ACCEPT="rping_exit_race -"
sctp_mode
ip addr add 10.99.1.2/24 dev "$UIW0_NETDEV"
ip addr add 10.99.2.2/24 dev "$UIW1_NETDEV"
at_exit "ip addr del 10.99.1.2/24 dev $UIW0_NETDEV; ip addr del 10.99.2.2/24 dev $UIW1_NETDEV"

port=7197
sctp_capture_start
start_bg server rping -s -a "$UIW0_ADDR" -p $port -C 50 -V
wait_cm_listen $port
start_bg client rping -c -a "$UIW0_ADDR" -I "$UIW1_ADDR" -p $port -C 50 -V
# While it runs: the association's local and remote address lists (one line per association).
poll_until 60 0.2 grep -qs "$port" /proc/net/sctp/assocs || true
cp /proc/net/sctp/assocs assocs.log
wait_bg client 200
wait_bg server 30
sctp_capture_stop

# INIT (chunk type 1) and INIT ACK (2): the IPv4 Address parameters they carry.
tshark -r cap.pcapng -Y "sctp.chunk_type == 1 || sctp.chunk_type == 2" -T fields \
  -e sctp.chunk_type -e sctp.parameter_ipv4_address >init.log 2>&1 || true
show init
awk -F'\t' '$1 ~ /(^|,)1(,|$)/ && $2 ~ /10\.99\.2\.1/ && $2 ~ /10\.99\.2\.2/' init.log | grep -q . ||
  fail "the INIT does not list both of uiw1's addresses"
awk -F'\t' '$1 ~ /(^|,)2(,|$)/ && $2 ~ /10\.99\.1\.1/ && $2 ~ /10\.99\.1\.2/' init.log | grep -q . ||
  fail "the INIT ACK does not list both of uiw0's addresses"
show assocs
log "two addresses per endpoint: INIT and INIT ACK list both; 50 verified rping round trips"
