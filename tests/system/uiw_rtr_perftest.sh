#!/usr/bin/env bash
# needs: uiw
# timeout: 900
# perftest WITHOUT -R: perftest exchanges QPN/GID over its own TCP socket and moves its QPs to
# RTR/RTS itself; uiw.ko connects them (connect-on-RTR, kernel/uiw_rtr.c). Server on uiw0, client
# on uiw1, GID index 0 (-x 0: the IPv4 address). ib_write_bw, ib_read_bw, ib_send_bw, their
# _lat counterparts, ib_send_bw --use-srq, ib_write_bw -q 16 (16 QPs, 16 connections) and
# ib_send_lat -e (completion events). Both sides exit 0, name their device and print results.
source "$UIW_ROOT/tests/system/lib.sh"

port=18640

# perftest 4.5 deregisters its iWARP Send credit MR only in rdma_cm mode (destroy_ctx:
# `verb == SEND && work_rdma_cm == ON && send_rcredit`), so without -R ib_send_* on any iWARP
# device ends with "Failed to deallocate PD - Device or resource busy" and exit 1 after a
# complete run. Accept exactly that (perftest's leak, not the device's); nothing else.
PERFTEST_LEAK='Failed to deallocate PD - Device or resource busy|Couldn.t destroy all SEND resources'
rc_ok() { # NAME RC
  [ "$2" = 0 ] && return 0
  [ "$2" = 1 ] && grep -Eq "$PERFTEST_LEAK" "$1.log" && return 0
  show "$1"
  fail "$1 exited $2"
}

# run NAME TOOL ARGS...: server on uiw0, client on uiw1 -> uiw0's address. perftest's cycle
# counter calibration sometimes fails under TCG ("Correlation coefficient"): then once more.
run() {
  local name=$1 tool=$2 try rc side
  shift 2
  for try in 1 2; do
    start_bg "$name-server" "$tool" -d "$UIW0_DEV" -x 0 -p $port "$@"
    for ((i = 0; i < 150; i++)); do
      ss -Hltn "sport = :$port" | grep -q . && break
      sleep 0.2
    done
    rc=0
    timeout -k 5 300 "$tool" -d "$UIW1_DEV" -x 0 -p $port "$@" "$UIW0_ADDR" \
      >"$name-client.log" 2>&1 || rc=$?
    port=$((port + 1))
    if [ $rc != 0 ] && [ $try = 1 ] && perftest_clock_failed "$name-client" "$name-server"; then
      log "$name: perftest clock calibration failed under TCG, once more"
      wait "${BG_PID[$name-server]}" 2>/dev/null || true
      continue
    fi
    rc_ok "$name-client" $rc
    local spid=${BG_PID[$name-server]} srv=0
    for ((i = 0; i < 600; i++)); do kill -0 "$spid" 2>/dev/null || break; sleep 0.1; done
    if kill -0 "$spid" 2>/dev/null; then
      kill -9 "$spid"
      show "$name-server"
      fail "$name server did not finish"
    fi
    wait "$spid" || srv=$?
    rc_ok "$name-server" $srv
    break
  done
  for side in client server; do
    expect "$name-$side" 'Transport type : IW' "$name $side did not run over iWARP"
    if grep -Ev "$PERFTEST_LEAK" "$name-$side.log" | grep -Eiq 'failed|bad wc|error|unable'; then
      show "$name-$side"
      fail "$name $side reported an error"
    fi
  done
  expect "$name-server" "Device +: $UIW0_DEV" "$name server not on $UIW0_DEV"
  expect "$name-client" "Device +: $UIW1_DEV" "$name client not on $UIW1_DEV"
}

# lat NAME: the t_typical column (usec) of the client's 2-byte row.
lat() { awk '$1 == 2 && NF >= 5 { print $5 }' "$1-client.log" | tail -n1; }

for t in write read send; do
  run "${t}_bw" "ib_${t}_bw" -s 65536 -n 500
  perftest_bw "${t}_bw-client" 65536 500 >/dev/null
  log "ib_${t}_bw 64 KiB x 500 without -R: $BW MB/s"
done
run send_bw_srq ib_send_bw --use-srq -s 65536 -n 500
perftest_bw send_bw_srq-client 65536 500 >/dev/null
log "ib_send_bw --use-srq: $BW MB/s"
run write_bw_q16 ib_write_bw -q 16 -s 65536 -n 200
# perftest reports the iterations of all 16 QPs together.
perftest_bw write_bw_q16-client 65536 3200 >/dev/null
log "ib_write_bw -q 16: $BW MB/s"
for t in write read send; do
  run "${t}_lat" "ib_${t}_lat" -s 2 -n 1000
  v=$(lat "${t}_lat")
  [ -n "$v" ] || { show "${t}_lat-client"; fail "ib_${t}_lat printed no 2-byte result"; }
  log "ib_${t}_lat 2 B without -R: t_typical $v usec"
done
run send_lat_e ib_send_lat -e -s 2 -n 500
log "ib_send_lat -e: t_typical $(lat send_lat_e) usec"
echo "PASS: perftest without -R over connect-on-RTR"
