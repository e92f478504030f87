#!/usr/bin/env bash
# needs: uiw
# timeout: 300
# quarantine: the client exits 16, rstream's do_poll returning POLLHUP, while the server has sent everything and closed. Likely cause (not yet traced): uiw.ko raises DISCONNECT on the peer's FIN at once (uiw_cep_conn_closed), before the process that owns the socket has read the data in front of the FIN, so rsockets can see the close before the last messages; siw places data in softirq before it sees the FIN. Reproduced on 2026-11-26: 1 of 3 runs on main and 2 of 3 with the framer split with another VM running, and by name. Fix to try: raise DISCONNECT once the owner has read up to the FIN (it then shuts its own side), with a time limit for an owner that never reads. Run it with UIW_SYSTEM_ALL=1 or by name.
# rsockets over uiw in asynchronous mode: librdmacm's rstream -T a (non-blocking rsockets driven
# by rpoll), uiw1 client -> uiw0 server, 100 transfers of 4 KiB each way. The server closes as
# soon as its last send completed; the client must still receive every message before it sees
# the close.
source "$UIW_ROOT/tests/system/lib.sh"
source "$UIW_ROOT/providers/uiw/tests/allow_local_sources.sh"
allow_local_sources

port=7496
for round in 1 2 3; do
  start_bg server rstream -b "$UIW0_ADDR" -p $port -S 4096 -C 100 -T a
  wait_cm_listen $port
  run_fg client 120 rstream -s "$UIW0_ADDR" -b "$UIW1_ADDR" -p $port -S 4096 -C 100 -T a
  wait_bg server 60
  for side in client server; do
    # name bytes xfers iters total time Gb/sec usec/xfer: one "custom" result line.
    expect $side '^custom ' "$side printed no result (round $round)"
    if grep -Eiq 'fail|error|mismatch|rpoll|rrecv|rsend' $side.log; then
      show $side
      fail "rstream $side reported an error (round $round)"
    fi
  done
  log "rstream -S 4096 -C 100 -T a, round $round: $(grep '^custom ' client.log)"
  port=$((port + 1))
done
