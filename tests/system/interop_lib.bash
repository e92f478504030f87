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
  at_exit 'siw_swap "$UIW_VM_SIW_KO"'
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

# cm_check_pair NAME SERVER_ADDR SERVER_ACTION CLIENT_ADDR CLIENT_ACTION PORT: uiw_cm_check's
# server (in the background, on PORT) and its client, each with its action; both print PASS.
cm_check_pair() {
  local check=$UIW_BUILD/bin/uiw_cm_check
  [ -x "$check" ] || fail "$check missing: cmake --build \$UIW_BUILD --target uiw_cm_check"
  start_bg "$1-server" "$check" server "$2" "$6" "$3"
  wait_cm_listen "$6"
  run_fg "$1-client" 120 "$check" client "$2" "$4" "$6" "$5"
  wait_bg "$1-server" 60
  expect "$1-client" '^PASS$'
  expect "$1-server" '^PASS$'
}

# interop_setup: sysctls for cross-device rdma_cm in one namespace, uiw.ko defaults on exit.
interop_setup() {
  allow_local_sources
  at_exit uiw_defaults
}

# term_build: uiw_term_check (providers/uiw/tests) as ./term.
term_build() { test_program uiw_term_check term; }

# term_pair NAME SERVER_ADDR CLIENT_ADDR PORT CLIENT_MODE [SERVER_MODE]: one uiw_term_check
# connection (see its header for the modes); both sides must exit 0 and print PASS.
term_pair() {
  start_bg "$1-server" ./term server "$2" "$4" ${6:+"$6"}
  wait_cm_listen "$4"
  run_fg "$1-client" 90 ./term client "$3" "$2" "$4" "$5"
  wait_bg "$1-server" 60
  expect "$1-client" '^PASS$'
  expect "$1-server" '^PASS$'
}


# The device a process runs its QP on with perftest -R is not the one its -d names: perftest
# resolves the server's address without binding its own first (--source_ip does not change
# that), and rdma_cm resolves a destination that is a local address through lo, to the device
# that owns the address. In one namespace a perftest client therefore always lands on its
# server's device ("uiw0 to siw0" ran uiw0 <-> uiw0, and the reverse siw0 <-> siw0; seen in
# `rdma res show qp`). rping and uiw_term_check bind their source address and do not have the
# problem. interop_netns gives perftest a uiw and a siw device it cannot confuse: a veth pair
# with the siw end in its own namespace.
#   IXU_DEV (uiw, init_net, IXU_ADDR) <-> IXS_DEV (siw, namespace IX_NS, IXS_ADDR)
# interop_perftest runs each side in its device's namespace (DEV_NETNS). Call it after
# siw_tunable (which reloads siw.ko, and with it every siw device); both devices go with the
# namespace when the test exits. perftest's server listens on the wildcard address, so
# rdma_cm listens on every device; netns_veth keeps siw's listener (bound to its netdev's
# ifindex in the caller's namespace) off uiw0's ifindex (else siw_create_listen: bind -98).
interop_netns() {
  IX_NS=uiwix IXU_DEV=uiwix0 IXS_DEV=siwix0 IXU_ADDR=10.97.1.1 IXS_ADDR=10.97.1.2
  ip netns add $IX_NS
  at_exit "ip netns del $IX_NS 2>/dev/null"
  netns_veth $IX_NS uiwix-u $IXU_ADDR/24 uiwix-s $IXS_ADDR/24
  rdma link add $IXU_DEV type uiw netdev uiwix-u || fail "rdma link add $IXU_DEV"
  ip netns exec $IX_NS rdma link add $IXS_DEV type siw netdev uiwix-s || fail "rdma link add $IXS_DEV"
  # shellcheck disable=SC2034 # read by interop_perftest (lib.sh)
  DEV_NETNS[$IXS_DEV]=$IX_NS
}

# perftest_devices NAME TOOL SERVER_DEV SERVER_ADDR CLIENT_DEV CLIENT_ADDR PORT: a 3-second
# TOOL -R (a bandwidth tool) while `rdma res show qp` is sampled: the server's process must
# have its QP on SERVER_DEV and the client's on CLIENT_DEV (the process names tell them apart:
# each side runs under its own name via a symlink).
perftest_devices() {
  local name=$1 tool=$2 sdev=$3 saddr=$4 cdev=$5 caddr=$6 port=$7 swrap cwrap
  netns_of "$sdev" && swrap=("${NETNS_EXEC[@]}")
  netns_of "$cdev" && cwrap=("${NETNS_EXEC[@]}")
  ln -sf "$(command -v "$tool")" "./srv_$tool"
  ln -sf "$(command -v "$tool")" "./cli_$tool"
  start_bg "$name-server" "${swrap[@]}" "./srv_$tool" -R -d "$sdev" -p "$port" -D 3 -F
  wait_cm_listen "$port"
  wait_dev_listen "$sdev" "$port"
  start_bg "$name-client" "${cwrap[@]}" "./cli_$tool" -R -d "$cdev" -p "$port" -D 3 -F \
    --source_ip "$caddr" "$saddr"
  # Sampled for as long as the client lives (its QPs live no longer), and once after.
  : >"$name.qps"
  local end=$((SECONDS + 60))
  while ! pid_gone "${BG_PID[$name-client]}" && ((SECONDS < end)); do
    rdma res show qp >>"$name.qps" 2>/dev/null || true
    nap 0.1
  done
  rdma res show qp >>"$name.qps" 2>/dev/null || true
  wait_bg "$name-client" 60
  wait_bg "$name-server" 60
  local side comm dev
  for side in server:srv:$sdev client:cli:$cdev; do
    IFS=: read -r side comm dev <<<"$side"
    comm=${comm}_$tool
    comm=${comm:0:15} # the kernel cuts comm to 15 characters
    grep -q "comm $comm" "$name.qps" || fail "$name: the $side's QP never showed in rdma res"
    if grep "comm $comm" "$name.qps" | grep -v "^link $dev/" | grep -q .; then
      sort -u "$name.qps"
      fail "$name: the $side (-d $dev) ran a QP on another device"
    fi
  done
  log "PASS $name: server QP on $sdev, client QP on $cdev"
}

# interop_perftest NAME TOOL SERVER_DEV SERVER_ADDR CLIENT_DEV CLIENT_ADDR PORT SIZE ITERS
# [ARGS]: a perftest TOOL with -R between two devices, each side in its device's namespace
# (perftest_pair; a rerun goes to PORT + 1000); both sides must exit 0 and report no error;
# bandwidth tools must print a result line, latency tools a t_avg. (Which device each side
# really used: perftest_devices.)
ix_listening() { wait_cm_listen "$1" && wait_dev_listen "$IX_LISTEN_DEV" "$1"; }
interop_perftest() {
  local name=$1 tool=$2 sdev=$3 saddr=$4 cdev=$5 caddr=$6 port=$7 size=$8 iters=$9 side
  local swrap=() cwrap=()
  shift 9
  netns_of "$sdev" && swrap=("${NETNS_EXEC[@]}")
  netns_of "$cdev" && cwrap=("${NETNS_EXEC[@]}")
  IX_LISTEN_DEV=$sdev PAIR_RERUN_OFFSET=1000 perftest_pair "$name" ix_listening "$port" \
    "${swrap[@]}" "$tool" -R -d "$sdev" -p @PORT@ -s "$size" -n "$iters" -F "$@" -- \
    "${cwrap[@]}" "$tool" -R -d "$cdev" -p @PORT@ -s "$size" -n "$iters" -F --source_ip "$caddr" \
    "$@" "$saddr"
  pair_exits_ok "$name"
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
  *)
    perftest_bw "$name-client" "$size" "$iters" >/dev/null
    log "PASS $name: $BW MB/s"
    ;;
  esac
}

# Wire validation (tshark_*.sh, interop_terminate.sh). Under TCG every tshark start costs tens
# of seconds (its dissector tables), so a test captures all its sessions into ONE file with
# dumpcap (which has no dissectors and starts in a few seconds) and decodes that file with ONE
# `tshark -V` pass; wire_summary then reads everything it checks from that text, per TCP stream.
# The iWARP MPA dissector is heuristic: it needs the MPA Request/Reply, so the capture starts
# before the first connection. One interface per capture (lo carries all traffic between the
# VM's local addresses).

# wire_start NAME FILTER: captures lo into NAME.pcapng; returns once dumpcap says
# "Capturing on".
wire_start() { capture_start "$1-dumpcap" "$2" "$1.pcapng"; }

# wire_stop NAME: ends the capture (after the kernel handed it the last packets).
wire_stop() {
  sleep 1
  kill -INT "${BG_PID[$1-dumpcap]}" 2>/dev/null || true
  wait "${BG_PID[$1-dumpcap]}" 2>/dev/null || true
  [ -s "$1.pcapng" ] || fail "capture $1.pcapng is empty"
}

# wire_decode NAME: the one tshark pass: NAME.decoded (`tshark -V`), and NAME.streams, one line
# per TCP stream in capture order:
#   stream=S port=P t0=T frames=N req=R rep=R mreq=M mrep=M creq=C crep=C fpdu=F good=G bad=B
#   raw=W markers=K malformed=X experr=E ops=Name:count,...
# port: the destination port of the stream's first frame (the SYN: the server's port); t0: that
# frame's time (seconds since the epoch, the guest's clock, as `date +%s.%N`). req/rep:
# MPA Request/Reply frames the dissector found; mreq/mrep, creq/crep: their M and C flags.
# fpdu: FPDUs decoded; good/bad: FPDU CRCs the dissector verified (CRC negotiated), raw: CRC
# fields it did not verify (CRC not negotiated). markers: Markers decoded (FPDU back pointers).
# malformed: "[Malformed Packet" items; experr: expert infos of severity Error (warnings, e.g.
# "Rev field is NOT set to one as required by RFC 5044" on RFC 6581 frames, are not errors).
# ops: RDMAP opcodes (RFC 5040 Figure 4, as Wireshark names them), one per DDP segment.
# A connection on the 4-tuple of an earlier one would inherit its MPA state in the dissector:
# wire_distinct_tuples.py first gives each such connection a port of its own (NAME.pcapng;
# the capture as taken is NAME.captured.pcapng).
# Heuristic dissectors (MPA's is one) run before port dissectors: a connect-on-RTR initiator
# binds a random source port in 512-1023, where Wireshark registers about 27 port dissectors
# (514 rsh, 554 rtsp, 873 rsync, ...) that otherwise take the stream's FPDUs.
wire_decode() {
  local name=$1
  mv "$name.pcapng" "$name.captured.pcapng"
  /usr/bin/python3 "$UIW_ROOT/tests/system/wire_distinct_tuples.py" "$name.captured.pcapng" \
    "$name.pcapng" 2>"$name.reused" || { cat "$name.reused"; fail "$name: could not rewrite the capture"; }
  [ ! -s "$name.reused" ] || cat "$name.reused"
  tshark -n -o tcp.try_heuristic_first:TRUE -r "$name.pcapng" -V >"$name.decoded" 2>"$name.tshark-err" ||
    { cat "$name.tshark-err"; fail "$name: tshark could not decode the capture"; }
  awk '
    /^Frame [0-9]+:/ { s = ""; next }
    /^    Epoch Time: / { t = $3; next }
    /^Transmission Control Protocol, Src Port: / {
      split($0, f, /[ ,]+/); dport = f[9]; next }
    /^    \[Stream index: [0-9]+\]/ {
      s = $3; sub(/\]/, "", s)
      if (!(s in port)) { port[s] = dport; t0[s] = t; order[++n] = s }
      frames[s]++; next }
    s == "" { next }
    /^    Request frame header/ { req[s]++; side = "req"; next }
    /^    Reply frame header/ { rep[s]++; side = "rep"; next }
    /= Marker flag: True/ { if (side == "req") mreq[s] = 1; else mrep[s] = 1 }
    /= CRC flag: True/ { if (side == "req") creq[s] = 1; else crep[s] = 1 }
    /^    FPDU$/ { fpdu[s]++ }
    /\(Good CRC32\)/ { good[s]++ }
    /Bad CRC32/ { bad[s]++ }
    /^        CRC: 0x/ { raw[s]++ }
    /FPDU back pointer:/ { mk[s]++ }
    /\[Malformed Packet/ { mal[s]++ }
    /\[Expert Info \(Error\// { err[s]++ }
    /OpCode: .* \(0x[0-9a-f]+\)$/ {
      o = $0; sub(/.*OpCode: /, "", o); sub(/ \(0x[0-9a-f]+\)$/, "", o); gsub(/ /, "_", o)
      if (!((s, o) in ops)) opl[s] = opl[s] "," o
      ops[s, o]++ }
    END {
      for (i = 1; i <= n; i++) {
        s = order[i]; l = ""
        k = split(substr(opl[s], 2), ol, ",")
        for (j = 1; j <= k; j++) l = l (j > 1 ? "," : "") ol[j] ":" ops[s, ol[j]]
        printf "stream=%s port=%s t0=%s frames=%d req=%d rep=%d mreq=%d mrep=%d creq=%d crep=%d fpdu=%d good=%d bad=%d raw=%d markers=%d malformed=%d experr=%d ops=%s\n",
          s, port[s], t0[s], frames[s], req[s], rep[s], mreq[s], mrep[s], creq[s], crep[s], fpdu[s],
          good[s], bad[s], raw[s], mk[s], mal[s], err[s], l
      }
    }' "$name.decoded" >"$name.streams"
  [ -s "$name.streams" ] || fail "$name: no TCP stream decoded"
  if grep -Eq '\[Malformed Packet|\[Expert Info \(Error/' "$name.decoded"; then
    grep -E '^Frame [0-9]+:|\[Malformed Packet|\[Expert Info \(Error/' "$name.decoded" |
      grep -B1 -E 'Malformed|Error/' | head -n 20 || true
    echo "# the capture's TCP streams (port: the first frame's destination):"
    sed 's/ ops=.*//' "$name.streams"
    wire_show_bad "$name" || true
    fail "$name: malformed packets or expert errors (above)"
  fi
}

# wire_show_bad NAME: the first two frames of NAME.decoded with a malformed packet or an expert
# error, whole (TCP sequence and length, what the dissectors made of it) and in hex, so a
# failure that does not come back on a rerun can still be read.
wire_show_bad() {
  local frames
  awk '/^Frame [0-9]+:/ { if (bad && n < 2) { printf "%s", blk; n++ } blk = ""; bad = 0 }
       { blk = blk $0 "\n" }
       /\[Malformed Packet|\[Expert Info \(Error\// { bad = 1 }
       END { if (bad && n < 2) printf "%s", blk }' "$1.decoded" | head -n 160 || true
  frames=$(awk '/^Frame [0-9]+:/ { f = $2; sub(/:/, "", f) }
                /\[Malformed Packet|\[Expert Info \(Error\// { if (!(f in seen)) { seen[f] = 1; l = l " " f } }
                END { print l }' "$1.decoded" | awk '{ print $1, $2 }')
  if [ -n "$frames" ]; then
    tshark -n -r "$1.pcapng" -x -Y "frame.number in {$frames}" 2>/dev/null | head -n 80 || true
  fi
}

# wire_ns SECS.FRACTION: the time in integer nanoseconds, in NS (bash has no fractions).
wire_ns() {
  local frac=""
  [[ $1 == *.* ]] && frac=${1#*.}
  frac=${frac}000000000
  NS=$((10#${1%%.*} * 1000000000 + 10#${frac:0:9}))
}

# wire_check NAME LABEL PORT K CRC MARKERS ALLOWED REQUIRED: checks the K-th stream (1-based,
# capture order) to server PORT in NAME.streams, or with K=T0-T1 the last one that started
# between those times (`date +%s.%N` around the session): MPA Request and Reply decoded, no malformed
# packet or expert error; CRC=1: C set in the Request or Reply (RFC 5044 §7.1.2), every decoded
# FPDU CRC "Good" and none unverified; CRC=2: as 1, with C set in both frames (both sides
# asked for CRC: uiw <-> uiw with mpa_crc=Y, either side initiating); CRC=0: C in neither, no CRC verified (RFC 5044 §4.1: the
# field then carries no CRC); MARKERS=1: M in both frames (each side asked the other for
# Markers) and Markers decoded; every decoded opcode in ALLOWED, every one of REQUIRED present
# (|-separated RFC 5040 Figure 4 names). Logs one summary line.
# Builtins only: each of its checks as a process (sed per field, grep per opcode) cost about 30
# process starts a stream, seconds under TCG.
wire_check() {
  local name=$1 label=$2 port=$3 k=$4 crc=$5 markers=$6 allowed=$7 required=$8 l="" line n=0
  local lo hi NS w o
  local -A f=() seen=()
  local -a words
  if [[ $k == *-* ]]; then
    wire_ns "${k%-*}" && lo=$NS
    wire_ns "${k#*-}" && hi=$NS
  fi
  while IFS= read -r line; do
    [[ " $line " == *" port=$port "* ]] || continue
    if [[ $k == *-* ]]; then
      [[ $line =~ \ t0=([0-9.]+)\  ]] && wire_ns "${BASH_REMATCH[1]}" && ((NS >= lo && NS <= hi)) &&
        l=$line
    elif ((++n == k)); then
      l=$line
      break
    fi
  done <"$name.streams"
  [ -n "$l" ] || fail "$label: no stream number $k to port $port in the capture"
  read -ra words <<<"$l"
  for w in "${words[@]}"; do f[${w%%=*}]=${w#*=}; done
  [ "${f[req]}" = 1 ] && [ "${f[rep]}" = 1 ] ||
    fail "$label: the MPA dissector did not find one Request and one Reply ($l)"
  [ "${f[malformed]}${f[experr]}" = 00 ] || fail "$label: malformed/expert errors ($l)"
  [ "${f[fpdu]}" -gt 0 ] || fail "$label: no FPDU decoded ($l)"
  if [ "$crc" != 0 ]; then
    [ "${f[creq]}${f[crep]}" != 00 ] || fail "$label: CRC flag in neither MPA frame ($l)"
    [ "$crc" = 1 ] || [ "${f[creq]}${f[crep]}" = 11 ] ||
      fail "$label: CRC flag not in both MPA frames ($l)"
    [ "${f[bad]}" = 0 ] || fail "$label: FPDU CRCs the dissector computed differently ($l)"
    [ "${f[good]}" -gt 0 ] && [ "${f[raw]}" = 0 ] ||
      fail "$label: FPDU CRCs not all verified ($l)"
  else
    [ "${f[creq]}${f[crep]}" = 00 ] || fail "$label: CRC flag set ($l)"
    [ "${f[good]}${f[bad]}" = 00 ] || fail "$label: CRCs checked although off ($l)"
  fi
  if [ "$markers" = 1 ]; then
    [ "${f[mreq]}${f[mrep]}" = 11 ] || fail "$label: Marker flag not in both MPA frames ($l)"
    [ "${f[markers]}" -gt 0 ] || fail "$label: no Marker decoded ($l)"
  else
    [ "${f[mreq]}${f[mrep]}${f[markers]}" = 000 ] ||
      fail "$label: Markers although not negotiated ($l)"
  fi
  # ops=Name:count,...; names with "_" for spaces, as RFC 5040 Figure 4 spells them with spaces.
  IFS=, read -ra words <<<"${f[ops]:-}"
  for w in "${words[@]}"; do
    o=${w%%:*}
    o=${o//_/ }
    [ -n "$o" ] || continue
    [[ $o =~ ^($allowed)$ ]] || fail "$label: unexpected RDMAP opcode '$o' ($l)"
    seen[$o]=1
  done
  IFS='|' read -ra words <<<"$required"
  for o in "${words[@]}"; do
    [ -n "${seen[$o]:-}" ] || fail "$label: no $o decoded ($l)"
  done
  log "$label: $l"
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
