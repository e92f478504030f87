# shellcheck shell=bash
# Helpers for system tests (tests/system/*.sh). Sourced; runs inside the VM only.
# Each test runs in its own empty working directory; its background jobs are killed by the
# runner when it ends. See tests/vm/README.md for the topology variables.
set -euo pipefail

[ "${UIW_VM:-}" = 1 ] || {
  echo "system tests run inside the VM: scripts/test vm, or scripts/vm -- bash $0" >&2
  exit 2
}

# Seconds since the test started on every line: where a test spends its time under TCG.
log() { echo "# +${SECONDS}s $*"; }
fail() {
  if [ -n "${FAIL_HOOK:-}" ]; then
    local hook=$FAIL_HOOK
    FAIL_HOOK="" # once, even if the hook itself fails
    "$hook" >&2 || true
  fi
  echo "FAIL: $*" >&2
  exit 1
}

# nap SECS: sleeps without starting a process (under TCG a process start costs 0.3-0.9 s, more
# than the polls that nap serves): a timed read of a FIFO that nobody writes.
mkfifo "${TMPDIR:-/tmp}/uiw-nap.$BASHPID"
exec {NAP_FD}<>"${TMPDIR:-/tmp}/uiw-nap.$BASHPID"
rm -f "${TMPDIR:-/tmp}/uiw-nap.$BASHPID"
nap() { read -r -t "$1" -u "$NAP_FD" _ || true; }

# poll_until SECS INTERVAL CMD...: runs CMD, then again every INTERVAL seconds, until it succeeds
# (true) or SECS seconds have passed by the clock (false, after one last look). A deadline, where
# a count of looks would stretch with every process start (0.3-0.9 s under TCG, more when the
# host is busy) and so wait far longer than it says.
poll_until() {
  local end=$((SECONDS + $1 + 1)) interval=$2 # SECONDS counts whole seconds: never short of SECS
  shift 2
  while :; do
    "$@" && return 0
    ((SECONDS < end)) || return 1
    nap "$interval"
  done
}

# path_gone PATH...: none of the PATHs exists (the sysfs directory of a device or netdev, which
# its removal takes away).
path_gone() {
  local p
  for p in "$@"; do [ ! -e "$p" ] || return 1; done
}

# pid_gone PID: no process PID (or not ours to signal), or only its zombie is left. kill -0
# finds a zombie, and an ended child stays one until this shell reaps it, which a loop of
# builtins (kill, nap) was once seen not to do before its 60 s deadline (a CI run under load:
# timeout(1) had no child left and, waited for, said 0). `wait` still gets the status.
pid_gone() {
  local stat
  kill -0 "$1" 2>/dev/null || return 0
  read -r stat 2>/dev/null <"/proc/$1/stat" || return 0
  stat=${stat##*) } # after the command name, which may hold spaces and parentheses
  [ "${stat%% *}" = Z ]
}

# ends_within PID SECS: waits until PID ends or SECS seconds passed; true if PID ended.
ends_within() { poll_until "$2" 0.05 pid_gone "$1"; }

# at_exit CMD: runs CMD when the test exits, before what an earlier EXIT trap runs (the later
# setup is undone first). Under set -e a failing command ends a trap where it fails, so CMD
# runs as one `{ ...; } || true` list: its failure (a namespace already gone) neither stops its
# own later commands nor skips the earlier cleanups.
at_exit() {
  local cmd=$1
  # `trap -p` prints the command quoted for the shell: let the shell unquote it.
  eval "set -- $(trap -p EXIT)"
  # shellcheck disable=SC2064 # CMD and the earlier trap are put together now, as text
  trap "{ $cmd; } || true${3:+; $3}" EXIT # at_exit itself
}

# syn_waits_for_listener LO HI: a TCP connection attempt to a port in LO..HI that finds no
# listener is not refused: the RST the kernel answers its SYN with (sequence number 0, RFC 9293
# §3.10.7.1) is dropped, so the connecting side retransmits the SYN (after 1 s) and meets the
# listener that has appeared meanwhile. The same for SCTP (uiw's SCTP mode): the ABORT without
# error causes that answers an INIT (or a COOKIE ECHO) nobody listens for (Linux
# sctp_sf_tabort_8_4_8; RFC 9260 §8.4) is dropped, and the INIT is sent again after the
# initial RTO (3 s); an association's own ABORT (a close with linger 0) carries a "User
# Initiated Abort" cause and passes. In init_net and every named namespace that exists now.
# Why: perftest -R closes its listener after the connection that exchanges parameters and
# listens again for the test's QPs; a client that connects in between is refused (REJECTED
# -111, seen under load in CI with uiw and siw alike, and over SCTP), and perftest 4.5 then
# crashes in its retry path (a general protection fault in librdmacm; fixed upstream after 4.5).
syn_waits_for_listener() {
  local lo=$1 hi=$2 ns
  local -a where=("")
  mapfile -t -O 1 where < <(ip netns list | awk '{print $1}')
  for ns in "${where[@]}"; do
    local -a run=()
    [ -z "$ns" ] || run=(ip netns exec "$ns")
    "${run[@]}" nft -f - <<EOF
table inet uiw_syn_wait {
  chain out {
    type filter hook output priority 0;
    tcp sport $lo-$hi tcp flags & (syn | ack | rst) == rst | ack tcp sequence 0 drop
    sctp sport $lo-$hi sctp chunk abort length 4 drop
  }
}
EOF
  done
  at_exit "$(printf 'for ns in "" %s; do ${ns:+ip netns exec $ns} nft delete table inet uiw_syn_wait 2>/dev/null || true; done' "${where[*]:1}")"
}

# kernel_cm_debug: turns on the dynamic debug messages of the connection managers of uiw.ko
# and siw (siw_cm.c says why it refuses an MPA Reply, uiw.ko what it sent), and makes a
# failure print them (FAIL_HOOK): evidence for a failure that does not come back on a rerun.
kernel_cm_debug() {
  local c=/sys/kernel/debug/dynamic_debug/control
  [ -w $c ] || c=/proc/dynamic_debug/control
  [ -w $c ] || return 0
  echo 'file siw_cm.c +p' >$c 2>/dev/null || true
  echo 'module uiw +p' >$c 2>/dev/null || true
  KERNEL_CM_DEBUG_FROM=$(dmesg | wc -l)
  FAIL_HOOK=kernel_cm_debug_show
  # Off again when the test ends (the tests after it flood uiw.ko with events and connections).
  at_exit "echo 'file siw_cm.c -p' >$c 2>/dev/null; echo 'module uiw -p' >$c 2>/dev/null"
}
kernel_cm_debug_show() {
  echo "# uiw.ko parameters: $(grep -H . /sys/module/uiw/parameters/* 2>/dev/null | sed 's|.*/||' | tr '\n' ' ')"
  echo "# the kernel's connection manager messages of this test (the last 60):"
  dmesg | tail -n +"$((KERNEL_CM_DEBUG_FROM + 1))" | grep -E 'siw|uiw' | tail -n 60 | sed 's/^/  dmesg| /'
  echo "# TCP connections and SCTP associations now (one a side holds after the other ended):"
  ss -tanpo --sctp 2>&1 | sed 's/^/  ss| /'
}

# show NAME: prints NAME.log (the output of start_bg or run_fg) with a prefix.
show() { sed "s/^/  $1| /" "$1.log"; }

declare -A BG_PID

# start_bg NAME CMD...: starts CMD in the background, output in NAME.log.
start_bg() {
  local name=$1
  shift
  log "start $name: $*"
  "$@" >"$name.log" 2>&1 &
  BG_PID[$name]=$!
}

# EXIT_ACCEPT (set by a caller, usually as a local): a command that, given NAME and a non-zero
# exit status of NAME's program, says (by its own status) that the exit is a known fault of the
# tool after a complete run; wait_bg and run_fg then log it and go on. rping_exit_race below.
accepted_exit() { # NAME RC
  [ -n "${EXIT_ACCEPT:-}" ] || return 1
  $EXIT_ACCEPT "$1" "$2" || return 1
  log "$1 exited $2 after a complete run ($EXIT_ACCEPT): accepted"
}

# rping_exit_race COUNT NAME RC: true when rping's exit status RC (NAME.log) is the teardown race
# of rping before rdma-core 57 (Debian 12 ships 44) after a complete run: its cm thread calls
# rdma_get_cm_event on the event channel main has just destroyed and exits 255 (fixed by
# rdma-core pull request 1622, "rping: Fix spurious failure return codes"). Complete: all COUNT
# pings verified (-V -v prints one line each) and no other error in the log. COUNT "-" is a run
# without -v: rping 44 then prints only its disconnect event, and every way its ping loop can
# stop early prints why (librdmacm/examples/rping.c), so the log must hold nothing else.
rping_exit_race() {
  local race='^rdma_get_cm_event: Bad file descriptor$'
  [ "$3" = 255 ] || return 1
  grep -q "$race" "$2.log" || return 1
  if [ "$1" = - ]; then
    ! grep -Ev "$race|^(server|client) DISCONNECT EVENT\.\.\.$" "$2.log" | grep -q .
    return
  fi
  [ "$(grep -c 'ping data: rdma-ping-' "$2.log" || true)" = "$1" ] || return 1
  ! grep -v "$race" "$2.log" | grep -Eiq 'mismatch|error|fail'
}

# rping_pair NAME SERVER_ADDR CLIENT_ADDR PORT COUNT SIZE: COUNT verified round trips of SIZE
# octets (rping -V -v on both sides), the client bound to CLIENT_ADDR (empty: not bound). Each side
# must print COUNT ping lines and no error; rping's own exit race after a complete run is
# accepted (rping_exit_race).
rping_pair() {
  local name=$1 saddr=$2 caddr=$3 port=$4 count=$5 size=$6 side n bind=()
  local EXIT_ACCEPT="rping_exit_race $count"
  [ -z "$caddr" ] || bind=(-I "$caddr")
  start_bg "$name-server" rping -s -a "$saddr" -p "$port" -C "$count" -S "$size" -V -v
  wait_cm_listen "$port"
  run_fg "$name-client" 600 rping -c -a "$saddr" "${bind[@]}" -p "$port" -C "$count" -S "$size" -V -v
  wait_bg "$name-server" 60
  for side in client server; do
    n=$(grep -c 'ping data: rdma-ping-' "$name-$side.log" || true)
    [ "$n" = "$count" ] || { show "$name-$side" | tail -n 20; fail "$name $side: $n ping lines, want $count"; }
    if grep -Eiq 'mismatch|error|fail' "$name-$side.log"; then
      show "$name-$side" | tail -n 20
      fail "$name $side reported an error"
    fi
  done
  log "PASS $name: $count x $size bytes verified (${caddr:-unbound} -> $saddr)"
}

# wait_bg NAME [SECS]: waits for NAME (default 60 s); fails the test if it does not end or
# exits non-zero (unless EXIT_ACCEPT accepts it).
wait_bg() {
  local name=$1 secs=${2:-60} pid=${BG_PID[$1]} rc
  if ! ends_within "$pid" "$secs"; then
    show_hung "$pid" "$name"
    kill -9 "$pid" 2>/dev/null || true
    show "$name"
    fail "$name did not finish within ${secs}s"
  fi
  rc=0
  wait "$pid" || rc=$?
  [ "$rc" = 0 ] || accepted_exit "$name" "$rc" || {
    show "$name"
    fail "$name exited $rc"
  }
  unset "BG_PID[$name]" # reaped: a later failure's report leaves it out
  log "$name exited $rc"
}

# test_program PROGRAM AS: the system tests' C program PROGRAM, which CMake builds into
# $UIW_BUILD/bin (providers/uiw/CMakeLists.txt), copied into the working directory as ./AS (the
# process name a test looks for; a working directory that `nobody` may run it from).
test_program() {
  cp "$UIW_BUILD/bin/$1" "./$2" ||
    fail "$UIW_BUILD/bin/$1 missing: cmake --build \$UIW_BUILD --target $1"
}

# run_fg NAME SECS CMD...: runs CMD with a time limit, output in NAME.log; fails the test on a
# non-zero exit (unless EXIT_ACCEPT accepts it) or a timeout. A command still running at SECS is
# shown where it waits (show_hung) before it is stopped; timeout(1) is only the backstop that
# also ends the command's children.
run_fg() {
  local name=$1 secs=$2 rc=0 tpid
  shift 2
  log "run $name: $*"
  timeout -k 5 "$((secs + 30))" "$@" <&0 >"$name.log" 2>&1 &
  tpid=$!
  if ! ends_within "$tpid" "$secs"; then
    show_hung_child "$tpid" "$name"
    kill -TERM "$tpid" 2>/dev/null || true
    rc=0
    wait "$tpid" || rc=$?
    echo "$name: timeout(1) ended with status $rc after SIGTERM" >&2
    rc=124
  else
    wait "$tpid" || rc=$?
  fi
  if [ "$rc" != 0 ] && ! accepted_exit "$name" "$rc"; then
    show "$name"
    show_running_bg
    show_exited_bg
    [ "$rc" = 124 ] && fail "$name did not finish within ${secs}s"
    fail "$name exited $rc"
  fi
  log "$name exited $rc"
}

# wait_cm_listen PORT [SECS]: waits until an rdma_cm id listens on PORT (any device, any
# address) and every iWARP device listening there has its own listener up (iw_listeners_up).
# Needed before starting a client: a server under TCG can take seconds to start. Each look
# runs three processes (rdma, ss, rdma) and parses with bash alone: under TCG a process start
# costs 0.3-0.9 s, and the pipelines this replaced (about sixteen processes) took 1.7 s a look.
wait_cm_listen() {
  local port=$1 secs=${2:-30}
  poll_until "$secs" 0.2 cm_listening "$port" && return 0
  rdma res show cm_id >&2 || true
  ss -Hln -t --sctp >&2 || true
  show_exited_bg
  fail "no rdma_cm listener on port $port after ${secs}s"
}

# cm_listening PORT: one look of wait_cm_listen, true once it may stop waiting.
cm_listening() {
  local port=$1 ids line
  local re="state LISTEN .*src-addr [^ ]*:$port( |$)"
  ids=$(rdma res show cm_id 2>/dev/null) || ids=
  while read -r line; do
    [[ $line =~ $re ]] || continue
    iw_listeners_up "$port" "$ids" && return 0
    return 1 # it judged every id on PORT: one look is enough
  done <<<"$ids"
  return 1
}

# iw_listeners_up PORT [CM_IDS]: each iWARP device (node_type RNIC) whose rdma_cm id listens on
# PORT has its own TCP or SCTP listener there (CM_IDS: `rdma res show cm_id` output, read here
# if not given). rdma_listen() marks the ids LISTEN before each
# provider listens (cma_listen_on_all, then iw_cm_listen), and a connection in between is
# refused: the client's rdma_cm reports REJECTED, -ECONNREFUSED (and perftest 4.5 then dies
# of a general protection fault in librdmacm). A wildcard listener is bound to the device's
# netdev (ss: 0.0.0.0%NETDEV:PORT, or the netdev's addresses in SCTP mode); one for an address
# is any listener on PORT (ss shows a multihomed SCTP socket under one of its addresses, not
# necessarily the id's). Only ids of processes in this network namespace are judged: the listener
# sockets live in the listening process's namespace, where ss here cannot see them
# (wait_dev_listen looks there). A wildcard id lists no id of its own: it makes one per device,
# one device after another (cma_listen_on_all), and a device not reached yet lists none, while
# a connection through it is refused just the same. So once one of those ids is listed, every
# iWARP device with a netdev here must list its own.
iw_listeners_up() {
  local port=$1 ids=${2-} line dev pid addr listening links="" wildcard=0 listed=" "
  local re="^link ([^/ ]*)/[^ ]* .*state LISTEN .*pid ([0-9]*) .* src-addr ([^ ]*:$port)( .*)?$"
  [ -n "$ids" ] || ids=$(rdma res show cm_id 2>/dev/null) || return 0
  listening=$(ss -Hln -t --sctp 2>/dev/null || ss -Hltn 2>/dev/null) || return 0
  while read -r line; do
    [[ $line =~ $re ]] || continue
    dev=${BASH_REMATCH[1]} pid=${BASH_REMATCH[2]} addr=${BASH_REMATCH[3]}
    [ "/proc/$pid/ns/net" -ef /proc/self/ns/net ] || continue
    [ -n "$links" ] || links=$(rdma link show 2>/dev/null) || true
    iw_dev_here "$dev" "$links" || continue
    listed+="$dev "
    case ${addr%:*} in
      0.0.0.0 | "[::]" | ::)
        wildcard=1
        [[ $listening == *"%$NETDEV:$port "* ]] || return 1
        ;;
      *) [[ $listening == *":$port "* ]] || return 1 ;;
    esac
  done <<<"$ids"
  ((wildcard)) || return 0
  local re_link="^link ([^/ ]+)/1 "
  while read -r line; do
    [[ $line =~ $re_link ]] || continue
    dev=${BASH_REMATCH[1]}
    iw_dev_here "$dev" "$links" || continue
    [[ $listed == *" $dev "* ]] || return 1
  done <<<"$links"
}

# iw_dev_here DEV LINKS: DEV is an iWARP device (node_type RNIC) whose port 1 netdev, as LINKS
# (`rdma link show` output) names it, is in this network namespace; sets NETDEV to that netdev.
iw_dev_here() {
  local type=
  read -r type 2>/dev/null <"/sys/class/infiniband/$1/node_type" || true
  [[ $type == *RNIC ]] || return 1
  netdev_in_links "$1" "$2"
  [ -n "$NETDEV" ] && [ -e "/sys/class/net/$NETDEV" ]
}

# netdev_in_links DEV LINKS: sets NETDEV to the netdev of DEV's port 1 in LINKS (`rdma link
# show` output), or to nothing (a variable, not output: $(...) would fork).
netdev_in_links() {
  local line re="^link $1/1 .* netdev ([^ ]+)"
  NETDEV=
  while read -r line; do
    [[ $line =~ $re ]] && NETDEV=${BASH_REMATCH[1]} && return 0
  done <<<"$2"
  return 0
}

# DEV_NETNS: the network namespace of a device whose netdev is not in init_net (set by the
# tests that make one, e.g. interop_netns). netns_of DEV: sets NETNS_EXEC to the command prefix
# that runs a command in DEV's namespace, or to nothing.
declare -gA DEV_NETNS=()
netns_of() {
  NETNS_EXEC=()
  [ -z "${DEV_NETNS[$1]:-}" ] || NETNS_EXEC=(ip netns exec "${DEV_NETNS[$1]}")
}

# dev_listening NETDEV PORT [WRAPPER...]: a TCP or SCTP socket bound to NETDEV listens on PORT
# (ss shows it as ADDR%NETDEV:PORT), as seen by ss run under WRAPPER (ip netns exec NS).
dev_listening() {
  local nd=$1 port=$2
  shift 2
  [[ $("$@" ss -Hln -t --sctp "sport = :$port") == *"%$nd:$port "* ]]
}

# wait_dev_listen DEV PORT: waits (up to 60 s) until RDMA device DEV's own TCP (or SCTP) listener on PORT is there
# (in the namespace of DEV's netdev). wait_cm_listen is not enough before connecting
# to DEV: rdma_listen() marks the id LISTEN first and then has every device's provider
# listen (cma_listen_on_all), and a connection in between is refused (the client's rdma_cm
# reports REJECTED, -ECONNREFUSED). uiw and siw bind a wildcard listener to their netdev, so
# ss shows it as ADDR%NETDEV:PORT (dev_listening).
wait_dev_listen() {
  local dev=$1 port=$2 nd run_in=()
  netns_of "$dev" && run_in=("${NETNS_EXEC[@]}")
  netdev_in_links "$dev" "$("${run_in[@]}" rdma link show "$dev/1" 2>/dev/null)"
  nd=$NETDEV
  [ -n "$nd" ] || fail "wait_dev_listen: no netdev for $dev"
  poll_until 60 0.2 dev_listening "$nd" "$port" "${run_in[@]}" && return 0
  "${run_in[@]}" ss -Hln -t --sctp "sport = :$port" >&2 || true
  show_exited_bg
  fail "$dev ($nd) does not listen on TCP port $port"
}

# netns_veth NS LOCAL LOCAL_CIDR PEER PEER_CIDR: a veth pair, LOCAL in init_net and PEER in
# the existing namespace NS, both up with their addresses (and NS's lo up). The pair is made
# here and PEER moved, so PEER keeps an ifindex that no init_net netdev has: siw binds a
# wildcard listener to its netdev's ifindex in the caller's namespace, and a peer created in
# NS directly got ifindex 2 there, which in init_net is another device's netdev.
netns_veth() {
  local ns=$1 a=$2 a_cidr=$3 b=$4 b_cidr=$5
  ip link add "$a" type veth peer name "$b"
  ip link set "$b" netns "$ns"
  ip addr add "$a_cidr" dev "$a"
  ip link set "$a" up
  ip -n "$ns" addr add "$b_cidr" dev "$b"
  ip -n "$ns" link set "$b" up
  ip -n "$ns" link set lo up
}

# show_exited_bg: prints the log of every background job that has already ended: a server
# that died before listening says why there.
show_exited_bg() {
  local name rc
  for name in "${!BG_PID[@]}"; do
    pid_gone "${BG_PID[$name]}" || continue
    rc=0
    wait "${BG_PID[$name]}" 2>/dev/null || rc=$?
    echo "# $name had already ended (status $rc):" >&2
    show "$name" >&2
  done
}

# show_hung PID NAME: where a process that did not finish waits, for the failure report: each
# thread's state, wait channel and kernel stack, its sockets, and the QPs uiw.ko knows.
show_hung() {
  local t comm st wchan
  echo "$2 (pid $1) is still running; its threads:" >&2
  for t in /proc/"$1"/task/*; do
    read -r comm <"$t/comm" 2>/dev/null || continue
    st=$(sed -n 's/^State:[[:space:]]*//p' "$t/status" 2>/dev/null)
    wchan='?' && { read -r wchan <"$t/wchan" 2>/dev/null || :; } # no newline there: read says 1
    echo "  ${t##*/} $comm: $st, wchan $wchan" >&2
    sed 's/^/    /' "$t/stack" >&2 2>/dev/null || true
  done
  ss -tanpei 2>/dev/null | grep -F "pid=$1," | sed 's/^/  tcp| /' >&2 || true
  ss -Sanpei 2>/dev/null | grep -F "pid=$1," | sed 's/^/  sctp| /' >&2 || true
  rdma res show qp 2>/dev/null | sed 's/^/  qp| /' >&2 || true
}

# show_hung_child TPID NAME: show_hung for the command that timeout(1) (TPID) runs. With no
# child left, show_hung of timeout itself (a zombie: the command ended and this shell has not
# reaped timeout yet) and every thread of TPID's process group (timeout puts its command in a
# group of its own).
show_hung_child() {
  local child
  child=$(pgrep -P "$1" | head -n 1) || true # none: pgrep says 1
  if [ -n "$child" ]; then
    show_hung "$child" "$2"
    return 0
  fi
  show_hung "$1" "$2's timeout(1), which has no child left,"
  ps -eLo pid,tid,ppid,pgid,stat,etimes,wchan:32,comm 2>/dev/null |
    awk -v g="$1" 'NR == 1 || $4 == g' | sed 's/^/  ps| /' >&2 || true
}

# show_running_bg: prints the log so far of every background job still running: when a client
# fails, its server's side of the story (the server is killed unseen when the test ends).
show_running_bg() {
  local name
  for name in "${!BG_PID[@]}"; do
    pid_gone "${BG_PID[$name]}" || show "$name" >&2
  done
  return 0
}

# tcp_listening PORT [WRAPPER...]: something listens on TCP PORT, as seen by ss run under
# WRAPPER (ip netns exec NS).
tcp_listening() { [ -n "$("${@:2}" ss -Hltn "sport = :$1")" ]; }

# wait_tcp_listen PORT: waits (up to 60 s) until something listens on TCP PORT
# (ibv_rc_pingpong's own socket, for example): a server under TCG can take seconds to start.
wait_tcp_listen() {
  poll_until 60 0.2 tcp_listening "$1" && return 0
  show_exited_bg
  fail "nothing listens on TCP port $1"
}

# capture_start NAME FILTER FILE: dumpcap (no dissectors: it starts in seconds under TCG, where
# tshark takes tens) captures lo, where traffic between the VM's local addresses goes, through
# the capture FILTER into FILE, as background job NAME; returns once it says "Capturing on".
capture_start() {
  start_bg "$1" dumpcap -q -i lo -f "$2" -w "$3"
  poll_until 60 0.1 said_or_ended "$1" 'Capturing on' || true
  log_has "$1" 'Capturing on' && return 0
  show "$1"
  fail "dumpcap on lo did not start capturing ($2)"
}

# log_has NAME REGEX: NAME.log exists and has a line matching the extended REGEX.
log_has() { grep -Eq -- "$2" "$1.log" 2>/dev/null; }

# said_or_ended NAME REGEX: background job NAME printed a line matching REGEX, or it has ended
# (no use waiting for it to say so).
said_or_ended() { log_has "$1" "$2" || pid_gone "${BG_PID[$1]}"; }

# wait_log NAME REGEX SECS: until NAME.log has a line matching the extended REGEX.
wait_log() {
  poll_until "$3" 0.2 log_has "$1" "$2" && return 0
  show "$1"
  fail "$1: no /$2/ within $3 s"
}

# lo_blackhole ADDR: every packet from or to ADDR is dropped silently, as a dead link does
# (netem loss 100% on lo, which traffic between the VM's local addresses crosses; a tc drop
# action would report local congestion to TCP). lo_blackhole_end removes it and sets DROPPED
# to the packets it swallowed (none fails the test). The caller's at_exit removes it too:
# tc qdisc del dev lo root.
lo_blackhole() {
  tc qdisc add dev lo root handle 1: prio
  tc qdisc add dev lo parent 1:3 handle 30: netem loss 100%
  tc filter add dev lo parent 1: protocol ip prio 1 u32 match ip dst "$1/32" flowid 1:3
  tc filter add dev lo parent 1: protocol ip prio 2 u32 match ip src "$1/32" flowid 1:3
}
lo_blackhole_end() {
  local stats
  stats=$(tc -s qdisc show dev lo | grep -A1 'qdisc netem' | grep -m1 -E '^ *Sent ')
  tc qdisc del dev lo root
  DROPPED=$(sed -E 's/.*dropped ([0-9]+).*/\1/' <<<"$stats")
  [ "$DROPPED" -gt 0 ] || fail "the outage dropped no packet: $stats"
}

# expect NAME REGEX [MESSAGE]: NAME.log must contain a line matching the extended REGEX.
expect() {
  grep -Eq -- "$2" "$1.log" || {
    show "$1"
    fail "${3:-$1 output lacks /$2/}"
  }
}

# perftest_bw NAME SIZE ITERS: sets BW to (and prints) the "BW average" column (MB/s) of
# perftest's result line for SIZE bytes x ITERS in NAME.log; fails if the line is missing or the
# average is not > 0. Call it directly and read $BW: inside $(...) its failure would end only the
# subshell, and the test would go on. (What it shows on failure goes to stderr: callers
# discard what it prints.)
perftest_bw() {
  perftest_column "$@" 4 "average bandwidth"
  BW=$COLUMN
  echo "$BW"
}

# perftest_rate NAME SIZE ITERS: the same for the "MsgRate" column (Mpps, printed with six
# decimals), into RATE: 500 8-byte atomics on a busy host move under 0.005 MB/s, which the
# bandwidth columns (two decimals) print as 0.00.
perftest_rate() {
  perftest_column "$@" 5 "message rate"
  RATE=$COLUMN
  echo "$RATE"
}

# perftest_column NAME SIZE ITERS FIELD WHAT: FIELD of the result line into COLUMN; it must be > 0.
perftest_column() {
  COLUMN=$(awk -v s="$2" -v n="$3" -v f="$4" '$1 == s && $2 == n && NF >= 5 { print $f }' \
    "$1.log" | tail -n1)
  [ -n "$COLUMN" ] || {
    show "$1" >&2
    fail "$1: no result line for $2 bytes x $3 iterations"
  }
  awk -v b="$COLUMN" 'BEGIN { exit !(b > 0) }' || {
    show "$1" >&2
    fail "$1: $5 $COLUMN is not > 0"
  }
}

# perftest_clock_failed NAME...: perftest could not calibrate its cycle counter (get_clock.c:
# "Correlation coefficient r^2 ... < 0.9", which happens under TCG): it then runs with 0 MHz
# and every figure it prints reads 0 or inf, although the transfer itself went through.
perftest_clock_failed() {
  local n
  for n in "$@"; do grep -q 'Correlation coefficient' "$n.log" && return 0; done
  return 1
}

# perftest 4.5 deregisters its iWARP Send credit MR only in rdma_cm mode (destroy_ctx:
# `verb == SEND && work_rdma_cm == ON && send_rcredit`), so without -R ib_send_* on any iWARP
# device ends with this and exit 1 after a complete run (perftest's leak, not the device's).
PERFTEST_LEAK='Failed to deallocate PD - Device or resource busy|Couldn.t destroy all SEND resources'

# perftest_pair NAME WAIT PORT SERVER_CMD... -- CLIENT_CMD...: a perftest (or ibv_*_pingpong)
# server in the background (NAME-server.log), WAIT PORT (a command: wait_cm_listen,
# wait_tcp_listen, ...), then the client (NAME-client.log; PAIR_CLIENT_SECS limit, default
# 300 s); the server then has 120 s to end and is killed after. @PORT@ in either command stands
# for the port. Leaves each side's exit status in PAIR_RC[client] and PAIR_RC[server] for the
# caller to judge, and the port the run used in PAIR_PORT. perftest's cycle-counter calibration
# can fail under TCG on either side after the transfer went through (perftest_clock_failed; the
# side then exits 1 with "Can't produce a report", or with -F prints figures of 0 or inf): then
# the pair runs once more, on PORT + PAIR_RERUN_OFFSET (default 1).
declare -A PAIR_RC
perftest_pair() {
  local name=$1 wait_cmd=$2 port=$3 try pid srv=() cli=()
  shift 3
  while [ $# -gt 0 ] && [ "$1" != -- ]; do
    srv+=("$1")
    shift
  done
  shift
  cli=("$@")
  for try in 1 2; do
    # shellcheck disable=SC2034 # PAIR_PORT: for the caller
    PAIR_RC[client]=0 PAIR_RC[server]=0 PAIR_PORT=$port
    start_bg "$name-server" "${srv[@]//@PORT@/$port}"
    $wait_cmd "$port"
    log "run $name-client (try $try): ${cli[*]//@PORT@/$port}"
    timeout -k 5 "${PAIR_CLIENT_SECS:-300}" "${cli[@]//@PORT@/$port}" >"$name-client.log" 2>&1 ||
      PAIR_RC[client]=$?
    pid=${BG_PID[$name-server]}
    if ! ends_within "$pid" 120 && kill -9 "$pid" 2>/dev/null; then
      log "$name-server still ran 120 s after its client: killed"
    fi
    wait "$pid" || PAIR_RC[server]=$?
    unset "BG_PID[$name-server]"
    log "$name: client exited ${PAIR_RC[client]}, server ${PAIR_RC[server]}"
    if [ $try = 1 ] && perftest_clock_failed "$name-client" "$name-server"; then
      log "$name: perftest clock calibration failed under TCG, once more"
      port=$((port + ${PAIR_RERUN_OFFSET:-1}))
      continue
    fi
    break
  done
}

# pair_exits_ok NAME [leak]: both sides of the last perftest_pair NAME exited 0 (or, with
# "leak", 1 with PERFTEST_LEAK in their log); fails the test otherwise.
pair_exits_ok() {
  local name=$1 side rc
  for side in client server; do
    rc=${PAIR_RC[$side]}
    [ "$rc" = 0 ] && continue
    [ "${2:-}" = leak ] && [ "$rc" = 1 ] && grep -Eq "$PERFTEST_LEAK" "$name-$side.log" && continue
    show "$name-client"
    show "$name-server"
    fail "$name $side exited $rc"
  done
}

# perftest_sides_ok NAME SERVER_DEV CLIENT_DEV: both sides of the perftest run NAME
# (NAME-server.log, NAME-client.log) ran over iWARP, named their device and printed no error;
# perftest's own leak without -R (PERFTEST_LEAK) is judged by pair_exits_ok, not here.
perftest_sides_ok() {
  local name=$1 side
  for side in client server; do
    expect "$name-$side" 'Transport type : IW' "$name $side did not run over iWARP"
    if grep -Ev "$PERFTEST_LEAK" "$name-$side.log" |
      grep -Eiq 'failed|bad wc|error|unable|not supported'; then
      show "$name-$side"
      fail "$name $side reported an error"
    fi
  done
  expect "$name-server" "Device +: $2" "$name server not on $2"
  expect "$name-client" "Device +: $3" "$name client not on $3"
}

# perftest_run TOOL DEV ADDR PORT SIZE ITERS [ARGS...]: a perftest bandwidth TOOL (ib_write_bw,
# ib_send_bw, ib_read_bw) connected with rdma_cm (-R, which iWARP requires): server on DEV, the
# client on DEV connecting to ADDR:PORT, as a perftest_pair named TOOL (a clock calibration
# failure reruns it once on PORT + 1). Both must exit 0, name DEV and report SIZE x ITERS with
# an average > 0. Logs: TOOL-server.log, TOOL-client.log; sets BW to the client's average (MB/s).
perftest_run() {
  local tool=$1 dev=$2 addr=$3 port=$4 size=$5 iters=$6 side
  shift 6
  local args=(-R -d "$dev" -p @PORT@ -s "$size" -n "$iters" "$@")
  syn_waits_for_listener "$port" $((port + ${PAIR_RERUN_OFFSET:-1}))
  PAIR_CLIENT_SECS=180 perftest_pair "$tool" wait_cm_listen "$port" "$tool" "${args[@]}" -- \
    "$tool" "${args[@]}" "$addr"
  pair_exits_ok "$tool"
  for side in server client; do
    expect "$tool-$side" "Device +: $dev( |$)" "$side did not use $dev"
    perftest_bw "$tool-$side" "$size" "$iters" >/dev/null
  done
}

# unittest_counts LOG: sets ran, ok, failed, errors, skipped and summary from unittest's own
# summary ("Ran N tests", "OK (skipped=S)" / "FAILED (failures=F, errors=E, skipped=S)"): what
# a test or a library prints can split a test's "... ok" line, the summary cannot be split.
unittest_counts() {
  local f
  ran=$(sed -n 's/^Ran \([0-9]*\) tests\{0,1\} in .*/\1/p' "$1" | tail -n1)
  summary=$(grep -aE '^(OK|FAILED)( |$)' "$1" | tail -n1 || true)
  for f in failures errors skipped; do
    printf -v "$f" '%s' "$(sed -n "s/.*$f=\([0-9]*\).*/\1/p" <<<"$summary")"
  done
  failed=${failures:-0} errors=${errors:-0} skipped=${skipped:-0}
  # shellcheck disable=SC2034 # for the caller, as ran and failed
  ok=$((${ran:-0} - failed - errors - skipped))
}
