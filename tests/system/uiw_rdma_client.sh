#!/usr/bin/env bash
# needs: uiw
# timeout: 120
# librdmacm's rdma_server / rdma_client example (rdma_create_ep, rdma_reg_msgs, Send/Recv with
# the synchronous verbs helpers) between uiw1 and uiw0.
source "$UIW_ROOT/tests/system/lib.sh"
source "$UIW_ROOT/providers/uiw/tests/allow_local_sources.sh"
allow_local_sources

port=7473
start_bg server rdma_server -s "$UIW0_ADDR" -p $port
wait_cm_listen $port
run_fg client 60 rdma_client -s "$UIW0_ADDR" -p $port
wait_bg server 30
expect client '^rdma_client: end 0' "rdma_client did not end with 0"
expect server '^rdma_server: end 0' "rdma_server did not end with 0"
log "rdma_server / rdma_client over $UIW0_DEV"
