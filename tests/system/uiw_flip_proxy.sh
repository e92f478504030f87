#!/usr/bin/env bash
# needs: uiw
# timeout: 600
# A corrupted octet inside an MPA stream, past TCP's checksum: tests/system/uiw_flip_proxy.py
# relays an rdma_cm connection uiw1 -> uiw0 and inverts one payload octet of the first RDMA
# Write segment. The writer (uiw_cm_check write-once) Writes 512 KiB of a known pattern into
# the server's buffer, then Sends; the server (verify) counts its buffer's octets: the
# pattern, untouched, or foreign (placed but never sent).
#  - MPA CRC on (RFC 5044 §4.4, §8): the receiver must Terminate with LLP layer / MPA CRC
#    error (layer 2, type 0, code 2) and place nothing of the corrupted segment, nor after
#    it: the flip is in the first segment, so the whole buffer stays untouched, and the
#    Send never arrives. (The writer's Writes complete: an iWARP Write completes locally.)
#  - MPA CRC off: nothing below RDMAP can notice (TCP's checksum was valid on each hop), so
#    the octet is placed: exactly 1 foreign octet, the connection carries on, the Send
#    arrives. This is what running without CRC means; uiw documents it (README, limits).
source "$UIW_ROOT/tests/system/lib.sh"
source "$UIW_ROOT/providers/uiw/tests/allow_local_sources.sh"
allow_local_sources

check=$UIW_BUILD/bin/uiw_cm_check
[ -x "$check" ] || fail "$check missing: cmake --build \$UIW_BUILD --target uiw_cm_check"
params=/sys/module/uiw/parameters
crc_old=$(cat $params/mpa_crc)
at_exit "echo $crc_old >$params/mpa_crc"
cp "$UIW_ROOT/tests/system/uiw_flip_proxy.py" proxy.py

port=19300
# flip_case NAME CRC: one connection through the proxy with mpa_crc=CRC.
flip_case() {
  local name=$1 pport=$((port + 50))
  echo "$2" >$params/mpa_crc
  start_bg "$name-proxy" /usr/bin/python3 proxy.py "$UIW0_ADDR" $pport "$UIW0_ADDR" $port
  start_bg "$name-server" "$check" server "$UIW0_ADDR" $port verify
  wait_cm_listen $port
  wait_tcp_listen $pport
  run_fg "$name-client" 120 "$check" client "$UIW0_ADDR" "$UIW1_ADDR" $pport write-once
  wait_bg "$name-server" 90
  wait_bg "$name-proxy" 90
  for s in proxy server client; do show "$name-$s"; done
  expect "$name-proxy" '^flipped the octet' "$name: the proxy flipped nothing"
  port=$((port + 1))
}

flip_case crc 1
expect crc-server 'server: the connection ended' "CRC: the corrupted stream went on"
expect crc-server 'target: correct 0 untouched 524288 foreign 0$' "CRC: data of or after the corrupted segment was placed"
expect crc-proxy '^terminate: layer 2 etype 0 code 2$' "CRC: no LLP / MPA CRC error Terminate"
log "CRC on: $(grep -o 'target: .*' crc-server.log); $(grep -m1 '^terminate' crc-proxy.log)"

flip_case nocrc 0
expect nocrc-server "server: the writer's Send arrived" "no CRC: the Send did not arrive"
expect nocrc-server 'target: correct 524287 untouched 0 foreign 1 ' "no CRC: not exactly the flipped octet placed"
grep -q '^terminate' nocrc-proxy.log && fail "no CRC: a Terminate was sent"
log "CRC off: $(grep -o 'target: .*' nocrc-server.log)"
echo "PASS: a flipped octet is a CRC Terminate with nothing placed; without CRC it is placed"
