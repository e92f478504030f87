# Helpers for the uiw <-> siw interop tests (tests/system/interop_*.sh, tshark_*.sh). Sourced
# after lib.sh. Not a test itself (the runner only picks *.sh).
#
# siw's knobs (drivers/infiniband/sw/siw/siw_main.c of linux-source-6.1) are compile-time
# constants, not module parameters: mpa_crc_required (false), mpa_crc_strict (false),
# peer_to_peer (false), try_gso (false), siw_tcp_nagle (false), loopback_enabled and zcopy_tx
# (true); mpa_version (2) is a plain global; the RTR types siw offers as initiator are the static
# rtr_type (Write|Read). /sys/module/siw/parameters does not exist. siw_tunable builds a test-only
# variant of the same source where these become writable module parameters and loads it instead
# of siw.ko, so one VM boot can run every negotiation variant. uiw's knobs are module parameters
# of uiw.ko (kernel/uiw_cm_conn.c), writable in /sys/module/uiw/parameters and read per connection.

source "$UIW_ROOT/providers/uiw/tests/allow_local_sources.sh"

source "$UIW_ROOT/tests/vm/siw_tunable.bash"

# siw_tunable: replaces the loaded siw.ko by the tunable variant (the copy tests/vm/lib.sh
# builds on the host in $UIW_BUILD/vm/siw-tunable-$KVER, else one built here once per boot) and re-creates
# siw0. The original module comes back when the test exits.
siw_tunable() {
  local src pre=$UIW_BUILD/vm/siw-tunable-$UIW_VM_KVER dir=/run/siw-tunable
  src=$(ls -d "$UIW_BUILD"/vm/src/linux-source-*/drivers/infiniband/sw/siw 2>/dev/null | tail -n1)
  if [ -f "$pre/siw.ko" ] && [ "$(cat "$pre/.key" 2>/dev/null)" = "$(cat "$UIW_BUILD/vm/siw-$UIW_VM_KVER/.key")" ]; then
    dir=$pre
  elif [ -f "$dir/siw.ko" ]; then
    : # built by an earlier test of this boot
  else
    [ -n "$src" ] || fail "no extracted siw source under $UIW_BUILD/vm/src"
    log "building the tunable siw variant (no prebuilt copy in $pre)"
    siw_tunable_build "$dir" "$UIW_VM_KVER" "$src" || { cat "$dir.log" >&2; fail "tunable siw did not build"; }
  fi
  siw_swap "$dir/siw.ko"
  [ -w /sys/module/siw/parameters/mpa_crc_required ] || fail "tunable siw has no parameters"
  trap 'siw_swap "$UIW_VM_SIW_KO" || true; uiw_defaults; allow_local_restore' EXIT
}

# siw_swap KO: unloads siw, loads KO and re-creates siw0 on its netdev.
siw_swap() {
  rdma link delete "$SIW0_DEV" 2>/dev/null || true
  rmmod siw 2>/dev/null || true
  insmod "$1" || return 1
  rdma link add "$SIW0_DEV" type siw netdev "$SIW0_NETDEV" || return 1
  ip link set "$SIW0_NETDEV" up
}

# siw_set NAME=VALUE...: sets tunable siw parameters (mpa_crc_required=Y, rtr_type=64, ...).
siw_set() {
  local kv
  for kv in "$@"; do echo "${kv#*=}" >"/sys/module/siw/parameters/${kv%%=*}"; done
}

# uiw_set NAME=VALUE...: sets uiw.ko parameters (mpa_rev=1, mpa_crc=Y, mpa_rtr=2, ...).
uiw_set() {
  local kv
  for kv in "$@"; do echo "${kv#*=}" >"/sys/module/uiw/parameters/${kv%%=*}"; done
}

# uiw_defaults: uiw.ko's parameters as loaded (see kernel/README.md).
uiw_defaults() {
  uiw_set mpa_rev=2 mpa_crc=N mpa_p2p=Y
  [ -e /sys/module/uiw/parameters/mpa_rtr ] && uiw_set mpa_rtr=3
  [ -e /sys/module/uiw/parameters/mpa_markers ] && uiw_set mpa_markers=0
  return 0
}

allow_local_restore() {
  local k
  for k in "${!UIW_SAVED_SYSCTL[@]}"; do sysctl -qw "net.ipv4.conf.$k=${UIW_SAVED_SYSCTL[$k]}"; done
}

# interop_setup: sysctls for cross-device rdma_cm in one namespace, uiw.ko defaults on exit.
interop_setup() {
  allow_local_sources
  sysctl -qw net.ipv4.conf.all.accept_local=1
  trap 'uiw_defaults; allow_local_restore' EXIT
}

# rping_pair NAME SERVER_ADDR CLIENT_ADDR PORT COUNT SIZE: rping -V with COUNT verified
# ping-pongs of SIZE bytes; both sides must report COUNT lines and no error.
rping_pair() {
  local name=$1 saddr=$2 caddr=$3 port=$4 count=$5 size=$6 side n
  start_bg "$name-server" rping -s -a "$saddr" -p "$port" -C "$count" -S "$size" -V -v
  wait_cm_listen "$port"
  run_fg "$name-client" 600 rping -c -a "$saddr" -I "$caddr" -p "$port" -C "$count" -S "$size" -V -v
  wait_bg "$name-server" 60
  for side in client server; do
    n=$(grep -c 'ping data: rdma-ping-' "$name-$side.log" || true)
    [ "$n" = "$count" ] || { show "$name-$side" | tail -n 20; fail "$name $side: $n ping lines, want $count"; }
    if grep -Eiq 'mismatch|error|fail' "$name-$side.log"; then
      show "$name-$side" | tail -n 20
      fail "$name $side reported an error"
    fi
  done
  log "PASS $name: $count x $size bytes verified ($caddr -> $saddr)"
}

# perftest_pair NAME TOOL SERVER_DEV SERVER_ADDR CLIENT_DEV CLIENT_ADDR PORT SIZE ITERS [ARGS]:
# a perftest TOOL with -R between two devices; both sides must exit 0, name their device and
# report no error; bandwidth tools must print a result line, latency tools a t_avg.
perftest_pair() {
  local name=$1 tool=$2 sdev=$3 saddr=$4 cdev=$5 caddr=$6 port=$7 size=$8 iters=$9 side
  shift 9
  start_bg "$name-server" "$tool" -R -d "$sdev" -p "$port" -s "$size" -n "$iters" -F "$@"
  wait_cm_listen "$port"
  run_fg "$name-client" 300 "$tool" -R -d "$cdev" -p "$port" -s "$size" -n "$iters" -F \
    --source_ip "$caddr" "$@" "$saddr"
  wait_bg "$name-server" 60
  for side in server client; do
    if grep -Eiq 'failed|bad wc|error|couldn' "$name-$side.log"; then
      show "$name-$side" | tail -n 20
      fail "$name $side reported an error"
    fi
  done
  expect "$name-server" "Device +: $sdev( |$)" "$name server did not use $sdev"
  expect "$name-client" "Device +: $cdev( |$)" "$name client did not use $cdev"
  case $tool in
  *_lat)
    expect "$name-client" "^ *$size +$iters +[0-9.]+ " "$name: no latency line for $size bytes"
    log "PASS $name: $(awk -v s="$size" '$1 == s { print "t_avg " $6 " usec" }' "$name-client.log" | tail -n1)"
    ;;
  *) log "PASS $name: $(perftest_bw "$name-client" "$size" "$iters") MB/s" ;;
  esac
}

# tshark_start NAME IFACE FILTER: captures IFACE (one interface per capture) into NAME.pcapng
# and returns once tshark says "Capturing on" (seconds under TCG). The iWARP MPA dissector is
# heuristic: it needs the MPA Request/Reply, so capture before the connection starts.
tshark_start() {
  local name=$1 i
  start_bg "$name-tshark" tshark -n -i "$2" -f "$3" -w "$name.pcapng"
  for ((i = 0; i < 600; i++)); do
    grep -q 'Capturing on' "$name-tshark.log" && return 0
    kill -0 "${BG_PID[$name-tshark]}" 2>/dev/null || break
    sleep 0.1
  done
  show "$name-tshark"
  fail "tshark on $2 did not start capturing"
}

# tshark_stop NAME: ends the capture (after the kernel flushed the last packets to it).
tshark_stop() {
  sleep 1
  kill -INT "${BG_PID[$1-tshark]}" 2>/dev/null || true
  wait "${BG_PID[$1-tshark]}" 2>/dev/null || true
  [ -s "$1.pcapng" ] || fail "capture $1.pcapng is empty"
}

# tshark_check NAME CRC OPCODES: decodes NAME.pcapng with the iWARP dissectors and fails on a
# malformed packet, an expert error, an MPA CRC mismatch (CRC=1: the dissector must verify
# FPDU CRCs and find none bad; CRC=0: not checked, RFC 5044 §4.1) or an RDMAP opcode
# outside OPCODES (a |-separated list of RFC 5040 Figure 4 names). Writes NAME.rdmap (the
# `tshark -Y iwarp_ddp_rdmap` listing), NAME.ops (one opcode name per DDP segment) and
# NAME.fields (frame|malformed|opcodes|crc|crc_check|marker FPDU pointers). Three tshark passes
# (four with CRC): each takes tens of seconds under TCG. Known and tolerated (warnings, not errors): the
# dissector's "Res field is NOT set to zero" and "Rev field is NOT set to one" on RFC 6581
# (MPA revision 2, enhanced flag) frames.
tshark_check() {
  local name=$1 crc=$2 ops=$3 n
  tshark -n -r "$name.pcapng" -Y iwarp_ddp_rdmap >"$name.rdmap" 2>/dev/null
  [ -s "$name.rdmap" ] || fail "$name: no DDP/RDMAP segment decoded"
  tshark -n -r "$name.pcapng" -T fields -E separator='|' -E occurrence=a -E aggregator=, \
    -e frame.number -e _ws.malformed -e iwarp_rdma.opcode -e iwarp_mpa.crc \
    -e iwarp_mpa.crc_check -e iwarp_mpa.marker_fpduptr >"$name.fields" 2>/dev/null
  n=$(awk -F'|' '$2 != ""' "$name.fields" | wc -l)
  [ "$n" = 0 ] || { awk -F'|' '$2 != ""' "$name.fields" | head; fail "$name: $n malformed packets"; }
  tshark -n -r "$name.pcapng" -q -z expert,error >"$name.experr" 2>/dev/null
  if grep -Eq '^Errors \(' "$name.experr"; then
    cat "$name.experr"
    fail "$name: expert errors"
  fi
  if [ "$crc" = 1 ]; then
    # With CRCs negotiated the dissector verifies each FPDU itself and labels its CRC field
    # "Good CRC32" or "Bad CRC32, should be ..." (iwarp_mpa.crc_check; iwarp_mpa.crc is then
    # absent). Several FPDUs may share a packet: count labels, not packets.
    tshark -n -r "$name.pcapng" -Y iwarp_mpa.crc_check -O iwarp_mpa -V 2>/dev/null |
      grep -Eo '(Good|Bad) CRC32' | sort | uniq -c >"$name.crc"
    n=$(awk '$2 == "Good" { print $1 }' "$name.crc")
    bad=$(awk '$2 == "Bad" { print $1 }' "$name.crc")
    [ -z "$bad" ] || fail "$name: $bad FPDUs whose MPA CRC differs from the dissector's CRC32c"
    [ -n "$n" ] && [ "$n" -gt 0 ] || fail "$name: no FPDU CRC verified by the dissector"
    n=$(awk -F'|' '$4 != ""' "$name.fields" | wc -l)
    [ "$n" = 0 ] || fail "$name: $n packets with unchecked CRC fields although CRC is on"
    log "$name: $(awk '{ print $1 }' "$name.crc") FPDU CRCs verified good by the dissector"
  fi
  # RFC 5040 Figure 4 opcodes, as Wireshark names them.
  awk -F'|' '$3 != "" { n = split($3, o, ","); for (i = 1; i <= n; i++) print o[i] }' \
    "$name.fields" | awk '{
      split("Write,Read Request,Read Response,Send,Send with Invalidate,Send with Solicited Event,Send with Solicited Event and Invalidate,Terminate", names, ",")
      v = index("01234567", substr($1, 4, 1)); print ($1 ~ /^0x0[0-7]$/ ? names[v] : "opcode " $1) }' >"$name.ops"
  if grep -Evx "$ops" "$name.ops" | sort | uniq -c | grep .; then
    fail "$name: unexpected RDMAP opcodes (above); allowed: $ops"
  fi
  log "$name: $(wc -l <"$name.rdmap") DDP/RDMAP packets, opcodes: $(sort "$name.ops" | uniq -c | tr -s ' \n' ' ')"
}

# rping_refused NAME SERVER_ADDR CLIENT_ADDR PORT: the connection must fail cleanly: the rping
# client exits non-zero within 60 s with a REJECTED / CONNECT_ERROR / UNREACHABLE rdma_cm event,
# and the kernel logs no warning.
rping_refused() {
  local name=$1 saddr=$2 caddr=$3 port=$4 rc=0 d0
  d0=$(dmesg | wc -l)
  start_bg "$name-server" rping -s -a "$saddr" -p "$port" -C 1 -v
  wait_cm_listen "$port"
  timeout -k 5 60 rping -c -a "$saddr" -I "$caddr" -p "$port" -C 1 -v >"$name-client.log" 2>&1 || rc=$?
  kill "${BG_PID[$name-server]}" 2>/dev/null || true
  [ "$rc" != 0 ] && [ "$rc" != 124 ] || { show "$name-client"; fail "$name: rping client exited $rc, want a refusal"; }
  expect "$name-client" 'REJECTED|CONNECT_ERROR|UNREACHABLE' "$name: no rdma_cm refusal event"
  if dmesg | tail -n +"$((d0 + 1))" | grep -E 'BUG|WARNING|Oops|Call Trace'; then
    fail "$name: kernel complained (above)"
  fi
  log "PASS $name: refused ($(grep -Eo 'RDMA_CM_EVENT_[A-Z_]+' "$name-client.log" | tail -n1))"
}
