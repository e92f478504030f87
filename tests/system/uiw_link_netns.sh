#!/usr/bin/env bash
# needs: uiw
# uiw.ko across network namespaces: a veth pair with one end in a namespace, a uiw device on
# each end (one created from inside the namespace), a wildcard listener in the namespace and a
# client outside. The TCP connection must live in the netdevs' namespaces (uiw creates its
# sockets there) and cross the veth for real. Deleting the namespace removes both devices.
source "$UIW_ROOT/tests/system/lib.sh"

dmesg_start=$(dmesg | wc -l)
test_program uiw_cm_probe probe
ns=uiwtns
cleanup() { ip netns del $ns 2>/dev/null || true; }
at_exit cleanup
ip netns add $ns
netns_veth $ns uiwn-a 10.98.0.1/24 uiwn-b 10.98.0.2/24
rdma link add uiwna type uiw netdev uiwn-a
ip netns exec $ns rdma link add uiwnb type uiw netdev uiwn-b
[ -d /sys/class/infiniband/uiwnb ] || fail "no device on the namespace's netdev"

start_bg srv ip netns exec $ns ./probe server uiwnb 0.0.0.0 7801 hold
wait_log srv '^listening$' 60
start_bg cli ./probe client uiwna 10.98.0.1 10.98.0.2 7801 hold
both_holding() { log_has cli '^holding' && log_has srv '^holding'; }
poll_until 60 0.2 both_holding || true
expect cli '^stream: ok$' "no connection across the namespaces"
expect srv '^stream: ok$'
# The wildcard listener is bound to its netdev, so the accepted socket shows "%uiwn-b".
ip netns exec $ns ss -tn | grep -Eq '10\.98\.0\.2(%uiwn-b)?:7801 +10\.98\.0\.1:' ||
  fail "the accepted socket is not in the namespace: $(ip netns exec $ns ss -tn)"
ss -tn | grep -Eq '10\.98\.0\.1:[0-9]+ +10\.98\.0\.2:7801' || fail "the client socket is not in init_net"
kill "${BG_PID[cli]}" "${BG_PID[srv]}"
wait "${BG_PID[cli]}" "${BG_PID[srv]}" 2>/dev/null || true

ip netns del $ns
poll_until 60 0.2 path_gone /sys/class/infiniband/uiwnb /sys/class/infiniband/uiwna || true
[ ! -d /sys/class/infiniband/uiwnb ] && [ ! -d /sys/class/infiniband/uiwna ] ||
  fail "devices left after the namespace went: $(ls /sys/class/infiniband)"

if dmesg | tail -n +"$((dmesg_start + 1))" | grep -E 'BUG|WARNING|Oops|Call Trace'; then
  fail "kernel complained (above)"
fi
echo "PASS: uiw across network namespaces"
