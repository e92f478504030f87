#!/usr/bin/env bash
# needs: uiw
# timeout: 240
# ucmatose (librdmacm's connection test) with 4 connections between uiw1 and uiw0, 10 Sends
# each way on every connection; both sides must report success.
source "$UIW_ROOT/tests/system/lib.sh"
source "$UIW_ROOT/providers/uiw/tests/allow_local_sources.sh"
allow_local_sources

port=7472
start_bg server ucmatose -b "$UIW0_ADDR" -p $port -c 4 -C 10
wait_cm_listen $port
run_fg client 180 ucmatose -s "$UIW0_ADDR" -b "$UIW1_ADDR" -p $port -c 4 -C 10
wait_bg server 60
for side in client server; do
  expect $side '^test complete' "$side did not complete"
  expect $side '^return status 0' "$side did not return status 0"
done
log "ucmatose: 4 connections $UIW1_DEV -> $UIW0_DEV, 10 messages each way"
