#!/usr/bin/env bash
# needs: uiw
# The uiw provider (libuiw-rdmav34.so) over uiw.ko, without a connection: ibv_devices and
# ibv_devinfo -v list uiw0/uiw1 as iWARP devices through the provider, then uiw_verbs_check
# (providers/uiw/tests) runs the control path on each: queries, PD/MR/CQ/QP create and destroy,
# the QP state machine, sends and receives waiting for a connection, flush on ERR and the
# completion channel firing through uiw.ko's CQ-signal method.
source "$UIW_ROOT/tests/system/lib.sh"

check=$UIW_BUILD/bin/uiw_verbs_check
[ -x "$check" ] || fail "$check missing: cmake --build \$UIW_BUILD --target uiw_verbs_check"
[ -n "${UIW_PROVIDER:-}" ] || fail "no libuiw-rdmav34.so in $UIW_BUILD: build target uiw-rdmav34"

run_fg devices 60 ibv_devices
for dev in "$UIW0_DEV" "$UIW1_DEV"; do
  expect devices "^[[:space:]]+$dev[[:space:]]+[0-9a-f]{16}$" "ibv_devices does not list $dev"
  run_fg "devinfo-$dev" 60 ibv_devinfo -v -d "$dev"
  expect "devinfo-$dev" 'transport:[[:space:]]+iWARP \(1\)' "$dev is not an iWARP device"
  expect "devinfo-$dev" 'state:[[:space:]]+PORT_ACTIVE' "$dev port is not active"
  expect "devinfo-$dev" 'max_sge_rd:[[:space:]]+1$' "$dev max_sge_rd"
  run_fg "check-$dev" 60 "$check" "$dev"
  expect "check-$dev" '^PASS$'
  log "$dev: $(grep -c '^ok:' "check-$dev.log") control-path groups ok"
done
# No provider warning (a mismatched ABI or a failed load would print one).
if grep -Ei 'warning|uiw:' devices.log devinfo-*.log; then fail "libibverbs or libuiw complained"; fi
