#!/usr/bin/env bash
# needs: uiw siw
# uiw.ko against kernel siw (the reference iWARP implementation), MPA only: siw initiates to a
# uiw listener (rping client) and the first bytes of the handed-over stream are siw's first
# FPDU, whose ULPDU_Length must be 34 (18-byte untagged DDP/RDMAP header + rping's 16-byte
# buffer advertisement); uiw initiates to a siw listener (rping server) and siw answers with
# RFC 6581 peer-to-peer mode and a Write RTR. The two devices share the VM's namespace, so the
# cross-device ARP needs accept_local.
source "$UIW_ROOT/tests/system/lib.sh"

dmesg_start=$(dmesg | wc -l)
test_program uiw_cm_probe probe
sysctl -qw net.ipv4.conf.all.accept_local=1

# siw -> uiw
start_bg srv ./probe server "$UIW1_DEV" "$UIW1_ADDR" 7701 peek
wait_cm_listen 7701
start_bg rping timeout 30 rping -c -a "$UIW1_ADDR" -I "$SIW0_ADDR" -p 7701 -C 1
wait_bg srv 60
kill "${BG_PID[rping]}" 2>/dev/null || true
expect srv '^event: 4 status 0 ' "no CONNECT_REQUEST from siw"
expect srv '^info: flags 0x2 .* rev 2 rtr 0 ' "siw initiator: enhanced, no peer-to-peer"
expect srv '^first-ulpdu-length: 34$' "the stream does not start at siw's first FPDU"

# uiw -> siw. siw answers with peer-to-peer mode and a Write RTR, and its passive cm_id stays in
# iw_cm's CONN_RECV until that RTR arrives; any close before it (ours, or siw destroying its QP
# when rping exits) makes siw report CLOSE for a never-established connection, and iw_cm
# BUG()s (drivers/infiniband/core/iwcm.c cm_close_handler; siw_cm.c PEER_CLOSE and CLOSE_LLP in
# RDMA mode: seen in CI with rping killed first). So the probe sends the zero-length Write RTR
# a provider would send (RFC 6581), siw reports ESTABLISHED, and then either side may close.
start_bg rpings timeout 60 stdbuf -oL rping -s -d -a "$SIW0_ADDR" -p 7702 -C 1
wait_cm_listen 7702
start_bg cli timeout 60 ./probe client "$UIW1_DEV" "$UIW1_ADDR" "$SIW0_ADDR" 7702 rtr
poll_until 60 0.1 log_has cli '^rtr-sent$' || true
grep -q '^rtr-sent$' cli.log || { show cli; fail "the probe did not connect to siw"; }
# siw has taken the RTR when rping's server sees the connection established (rping -d).
poll_until 60 0.1 log_has rpings 'RDMA_CM_EVENT_ESTABLISHED' || true
grep -q 'RDMA_CM_EVENT_ESTABLISHED' rpings.log || { show rpings; fail "siw did not take uiw's Write RTR"; }
kill "${BG_PID[cli]}" 2>/dev/null || true
wait "${BG_PID[cli]}" 2>/dev/null || true
kill "${BG_PID[rpings]}" 2>/dev/null || true
wait "${BG_PID[rpings]}" 2>/dev/null || true
expect cli '^event: 9 status 0 ' "siw did not accept"
expect cli '^info: flags 0xe .* rev 2 rtr 1 ' "siw responder: enhanced, peer-to-peer, Write RTR"

if dmesg | tail -n +"$((dmesg_start + 1))" | grep -E 'BUG|WARNING|Oops|Call Trace'; then
  fail "kernel complained (above)"
fi
echo "PASS: uiw <-> siw MPA"
