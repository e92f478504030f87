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
  expect devices "^[[:space:]]+${dev}[[:space:]]+[0-9a-f]{16}$" "ibv_devices does not list $dev"
  run_fg "devinfo-$dev" 60 ibv_devinfo -v -d "$dev"
  expect "devinfo-$dev" 'transport:[[:space:]]+iWARP \(1\)' "$dev is not an iWARP device"
  expect "devinfo-$dev" 'state:[[:space:]]+PORT_ACTIVE' "$dev port is not active"
  expect "devinfo-$dev" 'max_sge_rd:[[:space:]]+16$' "$dev max_sge_rd"
  run_fg "check-$dev" 60 "$check" "$dev"
  expect "check-$dev" '^PASS$'
  log "$dev: $(grep -c '^ok:' "check-$dev.log") control-path groups ok"
done
# No provider warning (a mismatched ABI or a failed load would print one).
if grep -Ei "warning|uiw:" devices.log devinfo-*.log; then fail "libibverbs or libuiw complained"; fi

# From the build tree (README, "Using uiw"): with no driver file, RDMAV_DRIVERS=<dir>/libuiw
# loads <dir>/libuiw-rdmav34.so.
drv=/etc/libibverbs.d/uiw.driver
if [ -f $drv ]; then
  mv $drv uiw.driver.saved
  at_exit "mv uiw.driver.saved $drv"
fi
run_fg devices-nodrv 60 ibv_devices
if grep -Eq "^[[:space:]]+${UIW0_DEV}[[:space:]]" devices-nodrv.log; then
  fail "$UIW0_DEV listed without any uiw driver file: the test cannot tell how it was loaded"
fi
run_fg devices-env 60 env RDMAV_DRIVERS="${UIW_PROVIDER%-rdmav*.so}" ibv_devices
expect devices-env "^[[:space:]]+${UIW0_DEV}[[:space:]]+[0-9a-f]{16}$" \
  "RDMAV_DRIVERS=${UIW_PROVIDER%-rdmav*.so} does not load the provider"
log "RDMAV_DRIVERS loads the provider from the build tree"
