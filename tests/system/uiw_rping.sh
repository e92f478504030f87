#!/usr/bin/env bash
# needs: uiw
# rping between uiw1 (client) and uiw0 (server) through libuiw: rdma_cm connection setup in
# uiw.ko, socket hand-off, then SEND/RECV, RDMA READ and RDMA WRITE in the user-space engine;
# 10 ping-pongs with data verification (-V) on both sides, a graceful disconnect.
source "$UIW_ROOT/tests/system/lib.sh"

# rdma_cm from an address bound to a uiw device needs this in the test topology.
source "$UIW_ROOT/providers/uiw/tests/allow_local_sources.sh"
allow_local_sources

rping_pair "uiw1-to-uiw0" "$UIW0_ADDR" "$UIW1_ADDR" 7175 10 64
