#!/usr/bin/env bash
# needs: uiw siw
# timeout: 120
# A uiw device goes away with its netdev while ib_core still has work queued: a veth pair
# with uiw on the end in init_net and siw on the end in a namespace, then the namespace is
# deleted (both netdevs unregister at once, and the siw device's port events queue work on
# ib_core's "infiniband" workqueue). uiw.ko unregisters its device from a work item;
# ib_unregister_device() flushes ib_core's workqueue, and when uiw's workqueue had
# WQ_MEM_RECLAIM that flush was a kernel WARNING (check_flush_dependency), in the first of
# six rounds here. Six rounds; the runner fails the test on any WARNING.
source "$UIW_ROOT/tests/system/lib.sh"

ns=""
cleanup() { [ -z "$ns" ] || ip netns del "$ns" 2>/dev/null || true; }
at_exit cleanup
for i in 1 2 3 4 5 6; do
  ns=uiwun$i
  ip netns add $ns
  netns_veth $ns uiwun-a 10.97.0.1/24 uiwun-b 10.97.0.2/24
  rdma link add uiwun0 type uiw netdev uiwun-a
  ip netns exec $ns rdma link add siwun0 type siw netdev uiwun-b
  sleep 1 # the port and GID events of both devices
  ip netns del $ns
  ns=""
  poll_until 60 0.1 path_gone /sys/class/infiniband/uiwun0 || true
  [ ! -d /sys/class/infiniband/uiwun0 ] || fail "round $i: uiwun0 survived its netdev"
  [ ! -d /sys/class/infiniband/siwun0 ] || fail "round $i: siwun0 survived its netdev"
done
echo "PASS: 6 rounds, both devices gone with their netdevs"
