#!/usr/bin/env bash
# needs: uiw
# timeout: 240
# rdma_cm failure paths over uiw (providers/uiw/tests/uiw_cm_check): a server on uiw0 rejects
# the request of a uiw1 client with private data, which the client must receive with
# RDMA_CM_EVENT_REJECTED (MPA Reply with the Reject bit, RFC 5044 §7.1.3); a connect to a port
# of uiw0 without listener ends in an error event within seconds (TCP RST), never a hang.
source "$UIW_ROOT/tests/system/lib.sh"
source "$UIW_ROOT/providers/uiw/tests/allow_local_sources.sh"
allow_local_sources

check=$UIW_BUILD/bin/uiw_cm_check
[ -x "$check" ] || fail "$check missing: cmake --build \$UIW_BUILD --target uiw_cm_check"

port=7480
text="uiw-reject-$RANDOM"
start_bg server "$check" reject-server "$UIW0_ADDR" $port "$text"
wait_cm_listen $port
run_fg client 60 "$check" reject-client "$UIW0_ADDR" "$UIW1_ADDR" $port "$text"
wait_bg server 30
expect client "^client: private data \"$text\"$" "the client did not get the reject's private data"
expect client '^PASS$'
expect server '^PASS$'
log "reject: $(grep '^client: rejected after' client.log)"

# Nothing listens on this port: the TCP SYN is answered by a RST.
port=7481
start=$(date +%s)
run_fg nolisten 60 "$check" no-listener "$UIW0_ADDR" "$UIW1_ADDR" $port
expect nolisten '^PASS$'
log "no listener: $(grep -E '^client: RDMA_CM_EVENT' nolisten.log) (test took $(($(date +%s) - start)) s)"
# The failed connects left no connection behind.
if rdma res show cm_id 2>/dev/null | grep -E "dst-addr [^ ]*:(7480|7481)( |$)"; then
  fail "cm_ids left over after the failed connects"
fi
