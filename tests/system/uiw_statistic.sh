#!/usr/bin/env bash
# needs: uiw
# timeout: 300
# rdma statistic show on uiw links: the engine's counters, which the provider keeps in a page
# shared with uiw.ko (no system call per count), and uiw.ko's connection counters. A uiw1 client
# <-> uiw0 server rdma_cm connection with one verified Send each way and a disconnect: FPDUs and
# octets sent by one end are those received by the other, payload was placed on both, one
# connection established on each, no Terminate or CRC error; counts stay after the processes
# exit (their contexts' last values). Then a rejected connect counts one refused on each end.
source "$UIW_ROOT/tests/system/lib.sh"
source "$UIW_ROOT/providers/uiw/tests/allow_local_sources.sh"
allow_local_sources

check=$UIW_BUILD/bin/uiw_cm_check
[ -x "$check" ] || fail "$check missing: cmake --build \$UIW_BUILD --target uiw_cm_check"

names="tx_fpdus rx_fpdus tx_bytes rx_bytes placed_bytes terminate_tx_rdmap terminate_tx_ddp
  terminate_tx_llp terminate_rx_rdmap terminate_rx_ddp terminate_rx_llp crc_errors
  connections_established connections_refused"
declare -A before after
# snapshot ARRAY: every counter of both devices' port 1, ARRAY[DEV.NAME], from one `rdma
# statistic show` per device ("link DEV/1 NAME VALUE NAME VALUE ...": a counter's value is the
# word after its name), parsed by bash: a process per counter costs 0.1-0.3 s under TCG.
snapshot() {
  local -n into=$1
  local dev n i words
  local -A seen
  for dev in "$UIW0_DEV" "$UIW1_DEV"; do
    read -r -d '' -a words < <(rdma statistic show link "$dev/1") || true
    seen=()
    for ((i = 0; i + 1 < ${#words[@]}; i++)); do
      [ -n "${seen[${words[i]}]:-}" ] || seen[${words[i]}]=${words[i + 1]}
    done
    for n in $names; do
      [[ ${seen[$n]:-} =~ ^[0-9]+$ ]] || fail "rdma statistic show link $dev/1 has no $n"
      # shellcheck disable=SC2034 # into is a nameref: this writes the caller's array
      into[$dev.$n]=${seen[$n]}
    done
  done
}
delta() { echo $((after[$1.$2] - before[$1.$2])); }

log "$(rdma statistic show link "$UIW0_DEV/1")"
snapshot before
port=7570
start_bg server "$check" server "$UIW0_ADDR" $port wait-close
wait_cm_listen $port
run_fg client 60 "$check" client "$UIW0_ADDR" "$UIW1_ADDR" $port disconnect
wait_bg server 60
expect client '^PASS$'
expect server '^PASS$'
snapshot after
for n in $names; do log "$n: $UIW1_DEV +$(delta "$UIW1_DEV" $n), $UIW0_DEV +$(delta "$UIW0_DEV" $n)"; done
c=$UIW1_DEV s=$UIW0_DEV
[ "$(delta $c tx_fpdus)" -gt 0 ] && [ "$(delta $s tx_fpdus)" -gt 0 ] || fail "no FPDU counted"
[ "$(delta $c tx_fpdus)" = "$(delta $s rx_fpdus)" ] || fail "client FPDUs sent != server FPDUs received"
[ "$(delta $s tx_fpdus)" = "$(delta $c rx_fpdus)" ] || fail "server FPDUs sent != client FPDUs received"
[ "$(delta $c tx_bytes)" = "$(delta $s rx_bytes)" ] || fail "client octets sent != server octets received"
[ "$(delta $s tx_bytes)" = "$(delta $c rx_bytes)" ] || fail "server octets sent != client octets received"
[ "$(delta $c placed_bytes)" -gt 0 ] && [ "$(delta $s placed_bytes)" -gt 0 ] || fail "nothing placed"
[ "$(delta $c connections_established)" = 1 ] && [ "$(delta $s connections_established)" = 1 ] ||
  fail "not one connection established on each end"
for n in terminate_tx_rdmap terminate_tx_ddp terminate_tx_llp terminate_rx_rdmap terminate_rx_ddp \
  terminate_rx_llp crc_errors connections_refused; do
  [ "$(delta $c $n)" = 0 ] && [ "$(delta $s $n)" = 0 ] || fail "$n counted on a clean connection"
done

snapshot before
port=7571
start_bg rserver "$check" reject-server "$UIW0_ADDR" $port "no"
wait_cm_listen $port
run_fg rclient 60 "$check" reject-client "$UIW0_ADDR" "$UIW1_ADDR" $port "no"
wait_bg rserver 30
expect rclient '^PASS$'
snapshot after
[ "$(delta $s connections_refused)" = 1 ] && [ "$(delta $c connections_refused)" = 1 ] ||
  fail "the reject is not one refused connection on each end"
[ "$(delta $s connections_established)" = 0 ] || fail "a rejected connection counted as established"
log "PASS: rdma statistic counts each end's traffic, connections and refusals"
