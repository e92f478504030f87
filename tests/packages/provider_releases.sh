#!/usr/bin/env bash
# needs: uiw
# timeout: 600
# The provider as Debian 13 (rdma-core 56) and Debian unstable (rdma-core 65) build it (run by
# tests/packages/run-packages inside the VM, after it built the packages in each release's
# root, $UIW_BUILD/kroots/<suite>/pkg): in a chroot into that root, with its own libibverbs,
# librdmacm and tools and the harness's uiw.ko underneath, dpkg installs the provider package
# and ibv_devinfo, rping -V and ibv_rc_pingpong -g 0 (connect-on-RTR) run between uiw0 and uiw1.
source "$UIW_ROOT/tests/system/lib.sh"
source "$UIW_ROOT/providers/uiw/tests/allow_local_sources.sh"
allow_local_sources

port=7820
for suite in trixie unstable; do
  root=$UIW_BUILD/kroots/$suite
  deb=$(ls "$root"/pkg/ibverbs-provider-uiw_*_amd64.deb 2>/dev/null | head -n1)
  [ -n "$deb" ] || fail "no provider package in $root/pkg (tests/packages/run-packages builds it)"
  for m in dev sys proc; do mount --bind "/$m" "$root/$m"; done
  at_exit "for m in dev sys proc; do umount '$root'/\$m 2>/dev/null || true; done"
  # Only the provider: DKMS would build for the root's kernel, not for the one running.
  chroot "$root" dpkg -i --force-depends "/pkg/$(basename "$deb")" >"dpkg-$suite.log" 2>&1 ||
    { show "dpkg-$suite"; fail "$suite: dpkg -i the provider"; }
  rel=$(chroot "$root" dpkg-query -W -f='${Version}' libibverbs1)
  chroot "$root" ibv_devinfo -d "$UIW0_DEV" >"devinfo-$suite.log" 2>&1 ||
    { show "devinfo-$suite"; fail "$suite: ibv_devinfo -d $UIW0_DEV"; }
  expect "devinfo-$suite" 'transport:[[:space:]]+iWARP' "$suite: $UIW0_DEV is not an iWARP device"

  start_bg "rping-server-$suite" chroot "$root" rping -s -a "$UIW0_ADDR" -p $port -C 10 -V -v
  wait_cm_listen $port
  run_fg "rping-client-$suite" 120 chroot "$root" rping -c -a "$UIW0_ADDR" -I "$UIW1_ADDR" \
    -p $port -C 10 -V -v
  wait_bg "rping-server-$suite" 30
  n=$(grep -c 'ping data: rdma-ping-' "rping-client-$suite.log" || true)
  [ "$n" = 10 ] || { show "rping-client-$suite"; fail "$suite rping: $n verified pings, want 10"; }
  port=$((port + 1))

  start_bg "pp-server-$suite" chroot "$root" ibv_rc_pingpong -d "$UIW0_DEV" -g 0 -p $port -n 100
  wait_tcp_listen $port
  run_fg "pp-client-$suite" 120 chroot "$root" ibv_rc_pingpong -d "$UIW1_DEV" -g 0 -p $port \
    -n 100 "$UIW0_ADDR"
  wait_bg "pp-server-$suite" 30
  expect "pp-client-$suite" '^[0-9]+ bytes in .* seconds = ' "$suite: ibv_rc_pingpong gave no result"
  port=$((port + 1))
  for m in dev sys proc; do umount "$root/$m"; done
  log "PASS $suite (libibverbs1 $rel): ibv_devinfo, rping -V x10, ibv_rc_pingpong -g 0 x100"
done
