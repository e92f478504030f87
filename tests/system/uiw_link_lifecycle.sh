#!/usr/bin/env bash
# needs: uiw
# uiw.ko device lifecycle (runs inside the test VM): a device goes away with its netdev, a
# device can sit on lo (GIDs 127.0.0.1 and ::1), unsupported netdev types are refused, kernel
# ULPs (ib_srpt, rds_rdma) are refused cleanly, device/net/<ifname> names the netdev (also after
# a rename), the module unloads with devices present and
# `rdma link add` loads it again through its rdma-link alias. Restores the topology's uiw
# devices at the end.
source "$UIW_ROOT/tests/system/lib.sh"

dmesg_start=$(dmesg | wc -l)

# The device follows its netdev's unregistration.
ip link add uiwt-dm type dummy
ip link set uiwt-dm up
rdma link add uiwt0 type uiw netdev uiwt-dm
[ -d /sys/class/infiniband/uiwt0 ] || fail "uiwt0 not created"
# Its parent device shows the netdev as device/net/<ifname> (where rdma-core's tests look for
# the interface), and the link follows a rename.
[ "$(readlink -f /sys/class/infiniband/uiwt0/device/net/uiwt-dm)" = "$(readlink -f /sys/class/net/uiwt-dm)" ] ||
  fail "uiwt0/device/net: $(ls /sys/class/infiniband/uiwt0/device/net/ 2>&1)"
ip link set uiwt-dm down
ip link set uiwt-dm name uiwt-dr
ip link set uiwt-dr up
poll_until 30 0.1 test -e /sys/class/infiniband/uiwt0/device/net/uiwt-dr || true
[ "$(ls /sys/class/infiniband/uiwt0/device/net/)" = uiwt-dr ] ||
  fail "after a rename uiwt0/device/net holds: $(ls /sys/class/infiniband/uiwt0/device/net/ 2>&1)"
parent=$(readlink -f /sys/class/infiniband/uiwt0/device)
ip link del uiwt-dr
poll_until 30 0.1 path_gone /sys/class/infiniband/uiwt0 || true
[ ! -e "$parent" ] || fail "the parent device $parent survived the device"
[ ! -d /sys/class/infiniband/uiwt0 ] || fail "uiwt0 survived its netdev"

# lo: zero MAC, so no MAC GID, but the loopback addresses are there.
rdma link add uiwlo type uiw netdev lo
grep -qx 0000:0000:0000:0000:0000:ffff:7f00:0001 /sys/class/infiniband/uiwlo/ports/1/gids/0 ||
  fail "127.0.0.1 GID: $(cat /sys/class/infiniband/uiwlo/ports/1/gids/0)"
rdma link del uiwlo

# Not an Ethernet-like netdev.
ip link add uiwt-ipip type ipip local 10.99.1.1 remote 10.99.2.1 2>/dev/null || true
if [ -d /sys/class/net/uiwt-ipip ]; then
  if rdma link add uiwt1 type uiw netdev uiwt-ipip 2>/dev/null; then fail "uiw on an ipip netdev"; fi
  ip link del uiwt-ipip
fi

# Kernel ULPs get no objects on a uiw device (no udata: -EOPNOTSUPP) and must cope.
if modprobe -a ib_srpt rds_rdma 2>/dev/null; then
  sleep 0.5
  modprobe -r ib_srpt rds_rdma || true
fi
[ -d "/sys/class/infiniband/$UIW0_DEV" ] || fail "$UIW0_DEV gone after the kernel ULPs"

# The module unloads with devices present; every uiw device goes away.
ko="${UIW_BUILD:-/nonexistent}/vm/uiw-$(uname -r)/src/kernel/uiw.ko"
[ -f "$ko" ] || ko=$(modinfo -n uiw 2>/dev/null || true)
[ -n "$ko" ] || fail "cannot find uiw.ko"
rmmod uiw || fail "rmmod uiw"
compgen -G '/sys/class/infiniband/uiw*' >/dev/null && fail "uiw devices left after rmmod: $(ls /sys/class/infiniband)"

# `rdma link add ... type uiw` loads the module: the kernel asks modprobe for "rdma-link-uiw"
# (request_module in rdma's nldev), the alias uiw.ko declares (MODULE_ALIAS_RDMA_LINK). An
# installed kernel finds the module by that alias through depmod's index; here a modprobe.d
# install line stands for the index (the VM's root is a throw-away overlay), because `depmod
# -a` reads all ~4000 modules of the 9p-shared root: 86 s beside a CPU hog, and once more than
# this test's 300 s. tests/packages installs the package and loads it with modprobe.
modinfo -F alias "$ko" | grep -qx rdma-link-uiw || fail "uiw.ko declares no rdma-link-uiw alias"
echo "install rdma-link-uiw /sbin/insmod $ko" >/etc/modprobe.d/uiw-lifecycle.conf
rdma link add "$UIW0_DEV" type uiw netdev "$UIW0_NETDEV" || fail "rdma link add did not autoload uiw"
[ -d /sys/module/uiw ] || fail "uiw not loaded"
rdma link add "$UIW1_DEV" type uiw netdev "$UIW1_NETDEV"

if dmesg | tail -n +"$((dmesg_start + 1))" | grep -E 'BUG|WARNING|Oops|Call Trace|ib_query_port failed'; then
  fail "kernel complained (above)"
fi
echo "PASS: uiw device lifecycle"
