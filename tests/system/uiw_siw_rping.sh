#!/usr/bin/env bash
# needs: uiw siw
# Interoperability with kernel siw (RFC 5040/5041/5044 over TCP): rping with a siw0 client and a
# uiw0 server (libuiw's engine against siw's kernel engine), then a uiw0 client and a siw0 server;
# 10 verified ping-pongs each way (SEND/RECV, RDMA READ, RDMA WRITE, MPA v2 negotiation).
source "$UIW_ROOT/tests/system/lib.sh"

# rdma_cm from an address bound to a uiw device needs this in the test topology.
source "$UIW_ROOT/providers/uiw/tests/allow_local_sources.sh"
allow_local_sources

rping_pair siw-to-uiw "$UIW0_ADDR" "$SIW0_ADDR" 7177 10 64
rping_pair uiw-to-siw "$SIW0_ADDR" "$UIW0_ADDR" 7178 10 64
