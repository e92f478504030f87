#!/usr/bin/env bash
# needs: uiw siw
# timeout: 300
# RFC 7306 on a connection to siw, which does not implement it (atomic_cap 0): uiw offers it in
# its MPA Request (UIW_MPA_RDMAP_EXT_OFFER), siw neither offers nor accepts it (its Reply echoes
# the Request's flags, offer included, but never carries UIW_MPA_RDMAP_EXT_ACCEPT), so the
# connection does not use it. uiw_cm_check ext-refused on the uiw side (client to a siw server, then server to a siw
# client): FetchAdd, CmpSwap, Write and Send with Immediate are each refused by ibv_post_send
# with EOPNOTSUPP, then one more verified Send each way works and the connection closes
# gracefully. The capture shows no RFC 7306 opcode and no Terminate, and siw logs none.
source "$UIW_ROOT/tests/system/lib.sh"
source "$UIW_ROOT/tests/system/interop_lib.bash"
interop_setup

D0=$(dmesg | wc -l)
wire_start ext "tcp portrange 7710-7711"
cm_check_pair uiw-client "$SIW0_ADDR" ext-peer "$UIW0_ADDR" ext-refused 7710
expect uiw-client-client '4 RFC 7306 work requests refused with EOPNOTSUPP'
cm_check_pair uiw-server "$UIW0_ADDR" ext-refused "$SIW0_ADDR" ext-peer 7711
expect uiw-server-server '4 RFC 7306 work requests refused with EOPNOTSUPP'
wire_stop ext
wire_decode ext
# The RTR siw may pick (RFC 6581) shows as a zero-length Write or Read.
ops='Send|Write|Read Request|Read Response'
wire_check ext uiw-client 7710 1 0 0 "$ops" Send
wire_check ext uiw-server 7711 1 0 0 "$ops" Send
if dmesg | tail -n +"$((D0 + 1))" | grep -q 'siw: got TERMINATE'; then
  dmesg | tail -n +"$((D0 + 1))" | grep siw >&2
  fail "siw received a Terminate"
fi
log "PASS: RFC 7306 refused on both uiw sides of a siw connection, nothing of it on the wire"
