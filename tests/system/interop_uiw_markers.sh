#!/usr/bin/env bash
# needs: uiw
# timeout: 1800
# MPA Markers (RFC 5044 §4.3) between uiw1 (initiator) and uiw0 (responder), per direction, set
# with uiw.ko's mpa_markers policy (kernel/uiw_cm_conn.c): 1 = the initiator's Request sets M
# (the responder inserts Markers), 2 = the Reply sets M (the initiator inserts them), 3 = both.
# Each passes rping -V (100 x 65000 bytes, verified both ways) with CRC off and (for 3) on, and
# perftest -R streams whose data flows the way the Markers go: ib_read_bw for 1 (the responder,
# the server, sends the Read Responses), ib_write_bw and ib_send_bw for 2 (the initiator, the
# client, sends), ib_send_bw for 3 and ib_write_bw for 3 with CRC. Then the refusals: a Request with M to a responder whose policy refuses
# (5 = ask as initiator + refuse) gets a Reply with R (rdma_cm REJECTED), and a Reply with M
# to an initiator that refuses (6) fails the connection; both clean.
source "$UIW_ROOT/tests/system/lib.sh"
source "$UIW_ROOT/tests/system/interop_lib.bash"
interop_setup

port=7800
syn_waits_for_listener $port $((port + 99))
declare -A tools=([1]="ib_read_bw" [2]="ib_write_bw ib_send_bw" [3]="ib_send_bw")
for m in 1 2 3; do
  uiw_set mpa_markers=$m
  rping_pair "markers$m" "$UIW0_ADDR" "$UIW1_ADDR" $((port++)) 100 65000
  for tool in ${tools[$m]}; do
    interop_perftest "markers$m-$tool" $tool "$UIW0_DEV" "$UIW0_ADDR" "$UIW1_DEV" "$UIW1_ADDR" \
      $((port++)) 65536 100
  done
done
uiw_set mpa_markers=3 mpa_crc=Y
rping_pair markers3-crc "$UIW0_ADDR" "$UIW1_ADDR" $((port++)) 100 65000
interop_perftest markers3-crc-ib_write_bw ib_write_bw "$UIW0_DEV" "$UIW0_ADDR" "$UIW1_DEV" \
  "$UIW1_ADDR" $((port++)) 65536 100
uiw_set mpa_crc=N
uiw_set mpa_markers=5
rping_refused markers-refused-by-responder "$UIW0_ADDR" "$UIW1_ADDR" $((port++))
uiw_set mpa_markers=6
rping_refused markers-refused-by-initiator "$UIW0_ADDR" "$UIW1_ADDR" $((port++))
uiw_set mpa_markers=0
echo "PASS: uiw <-> uiw with Markers each way"
