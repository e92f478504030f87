# Sourced by tests/system/sctp_*.sh (inside the test VM): puts uiw0 and uiw1 in SCTP mode
# (DDP over SCTP, RFC 5043; /sys/class/infiniband/<dev>/llp, kernel/README.md) for the
# connections and listeners the test creates, and back to TCP when it exits.

# sctp_mode: loads the sctp module, sets llp=sctp on both uiw devices; restores tcp at exit
# (after any EXIT trap already set, e.g. allow_local_sources).
sctp_mode() {
  local d
  modprobe sctp || fail "the VM kernel has no sctp module"
  for d in "$UIW0_DEV" "$UIW1_DEV"; do
    [ -e "/sys/class/infiniband/$d/llp" ] || fail "$d has no llp attribute (uiw.ko too old)"
    echo sctp >"/sys/class/infiniband/$d/llp"
    [ "$(cat "/sys/class/infiniband/$d/llp")" = sctp ] || fail "$d did not switch to sctp"
  done
  at_exit "echo tcp >/sys/class/infiniband/$UIW0_DEV/llp; echo tcp >/sys/class/infiniband/$UIW1_DEV/llp"
  log "$UIW0_DEV and $UIW1_DEV in SCTP mode"
}

# sctp_stat NAME: a counter of /proc/net/sctp/snmp (SctpOutUnorderChunks, SctpInUnorderChunks...).
sctp_stat() { awk -v k="$1" '$1 == k { print $2 }' /proc/net/sctp/snmp; }

# sctp_expect_chunks BEFORE MIN WHAT: at least MIN more unordered DATA chunks were sent than
# BEFORE (RFC 5043 §10: every DDP chunk has U=1), i.e. WHAT really ran over SCTP.
sctp_expect_chunks() {
  local now
  now=$(sctp_stat SctpOutUnorderChunks)
  [ $((now - $1)) -ge "$2" ] || fail "$3: only $((now - $1)) unordered SCTP chunks sent, want >= $2"
  log "$3: $((now - $1)) unordered SCTP DATA chunks"
}

# sctp_capture_start / sctp_capture_stop: a capture of SCTP on lo (the uiw addresses are all
# local) into cap.pcapng (capture_start), decoded afterwards with tshark.
sctp_capture_start() {
  command -v tshark >/dev/null || fail "tshark is not installed"
  capture_start capture sctp cap.pcapng
}
sctp_capture_stop() {
  sleep 2
  kill -INT "${BG_PID[capture]}"
  wait "${BG_PID[capture]}" || true
}
