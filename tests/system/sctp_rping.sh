#!/usr/bin/env bash
# needs: uiw
# timeout: 600
# rping over DDP over SCTP (RFC 5043) between uiw1 (client) and uiw0 (server), both devices in
# SCTP mode: Session Initiate/Accept in uiw.ko, the association's socket handed to libuiw,
# one DDP segment per unordered SCTP message. 500 verified (-V) round trips at 64 bytes, then
# 500 at rping's maximum of 65000 bytes; both sides exit 0 after a graceful disconnect, and the
# traffic shows up as unordered SCTP DATA chunks.
source "$UIW_ROOT/tests/system/lib.sh"
source "$UIW_ROOT/providers/uiw/tests/allow_local_sources.sh"
source "$UIW_ROOT/tests/system/sctp_lib.bash"
allow_local_sources
# rping (without -v) may end in its own teardown race after a complete run (lib.sh).
EXIT_ACCEPT="rping_exit_race -"
sctp_mode

port=7190
for size in 64 65000; do
  before=$(sctp_stat SctpOutUnorderChunks)
  start_bg "server-$size" rping -s -a "$UIW0_ADDR" -p $port -C 500 -S $size -V
  wait_cm_listen $port
  run_fg "client-$size" 400 rping -c -a "$UIW0_ADDR" -I "$UIW1_ADDR" -p $port -C 500 -S $size -V
  wait_bg "server-$size" 60
  if grep -Eiq 'mismatch|error|fail' "client-$size.log" "server-$size.log"; then
    show "client-$size"
    show "server-$size"
    fail "rping $size reported an error"
  fi
  # Each round trip moves at least 4 messages (Send, Read Request, Read Response, Send).
  sctp_expect_chunks "$before" 2000 "rping -S $size"
  log "500 verified $size-byte rping round trips over SCTP $UIW1_DEV -> $UIW0_DEV"
  port=$((port + 1))
done
