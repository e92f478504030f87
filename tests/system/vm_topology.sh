#!/usr/bin/env bash
# The harness itself: the VM has no NIC, the root is the host's read-only 9p share under a
# tmpfs overlay, and siw0/rxe0 exist on their own netdevs with the documented addresses.
# needs: siw rxe
source "$UIW_ROOT/tests/system/lib.sh"

# Root: an overlay on tmpfs whose lower layer is the host root, shared read-only over 9p and
# also mounted at /run/uiw-vm/hostroot: writes there fail, writes to / stay in the VM.
host=/run/uiw-vm/hostroot
awk '$2 == "/" { print $3 }' /proc/mounts | grep -qx overlay || fail "/ is not an overlay"
grep -Eq "^hostroot $host 9p ro[, ]" /proc/mounts || fail "no read-only 9p mount of the host root"
[ -f "$UIW_ROOT/tests/vm/README.md" ] || fail "the checkout is not visible at $UIW_ROOT"
[ "$(stat -c %i "$UIW_ROOT/tests/vm/README.md")" = "$(stat -c %i "$host$UIW_ROOT/tests/vm/README.md")" ] ||
  fail "/ and $host show different files"
if touch "$host$UIW_ROOT/.vm-write-probe" 2>/dev/null; then fail "the host root is writable"; fi
echo probe >"$UIW_ROOT/.vm-write-probe" || fail "the overlay root is not writable"
[ ! -e "$host$UIW_ROOT/.vm-write-probe" ] || fail "a write to / reached the host root"

# No NIC: no netdev is backed by a (virtual) hardware device; modules may add virtual ones
# (tunl0, sit0, ...), which cannot reach outside the VM.
for nd in /sys/class/net/*; do
  [ ! -e "$nd/device" ] || fail "netdev ${nd##*/} is a NIC (the VM must have none)"
done
ls /sys/class/net/lo /sys/class/net/"$SIW0_NETDEV" /sys/class/net/"$RXE0_NETDEV" >/dev/null ||
  fail "topology netdevs missing"

run_fg devices 60 ibv_devices
run_fg links 30 rdma link show
for p in SIW0 RXE0; do
  dev=${p}_DEV nd=${p}_NETDEV a4=${p}_ADDR a6=${p}_ADDR6
  expect devices "^ +${!dev} " "ibv_devices does not list ${!dev}"
  expect links "^link ${!dev}/1 state ACTIVE .* netdev ${!nd} " "${!dev} is not ACTIVE on ${!nd}"
  ip -o addr show dev "${!nd}" | grep -q " ${!a4}/24 " || fail "${!nd} lacks ${!a4}"
  ip -o addr show dev "${!nd}" | grep -q " ${!a6}/64 " || fail "${!nd} lacks ${!a6}"
done
[ "$(cat "/sys/class/infiniband/$SIW0_DEV/node_type")" = "4: RNIC" ] || fail "$SIW0_DEV is not an RNIC"
log "topology as documented: $(rdma link show | wc -l) rdma links, no NIC, read-only host root"
