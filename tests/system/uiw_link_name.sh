#!/usr/bin/env bash
# needs: uiw siw
# The provider claims devices by their kernel driver (sysfs hca_type), not by their name: a uiw
# device named without the "uiw" prefix ("rdma link add rnic7 type uiw ...") is opened by
# libuiw and carries rping traffic with uiw0, and a siw device whose name starts with "uiw"
# is left to siw's provider (libuiw says nothing about it).
source "$UIW_ROOT/tests/system/lib.sh"
source "$UIW_ROOT/providers/uiw/tests/allow_local_sources.sh"
allow_local_sources

ip link add uiwn-dm type dummy
ip link add uiwn-sd type dummy
at_exit "rdma link del rnic7 2>/dev/null; rdma link del uiwsiw7 2>/dev/null; ip link del uiwn-dm; ip link del uiwn-sd"
ip addr add 10.99.7.1/24 dev uiwn-dm
ip addr add 10.99.8.1/24 dev uiwn-sd
ip link set uiwn-dm up
ip link set uiwn-sd up
rdma link add rnic7 type uiw netdev uiwn-dm
rdma link add uiwsiw7 type siw netdev uiwn-sd

[ "$(cat /sys/class/infiniband/rnic7/hca_type)" = uiw ] ||
  fail "rnic7 hca_type: $(cat /sys/class/infiniband/rnic7/hca_type 2>&1)"
ibv_devinfo -d rnic7 >rnic7.log 2>&1 || { show rnic7; fail "ibv_devinfo cannot open rnic7"; }
expect rnic7 'transport:[[:space:]]+iWARP' "rnic7 is not an iWARP device to libibverbs"
# With a name table, libuiw would claim it (or refuse it aloud: "uiw: uiwsiw7: ... UAPI").
ibv_devinfo -d uiwsiw7 >uiwsiw7.log 2>&1 || { show uiwsiw7; fail "ibv_devinfo cannot open uiwsiw7"; }
if grep -q '^uiw:' uiwsiw7.log; then
  show uiwsiw7
  fail "libuiw looked at a siw device because of its name"
fi
expect uiwsiw7 'transport:[[:space:]]+iWARP' "uiwsiw7 is not an iWARP device to libibverbs"

# Traffic: rping server on rnic7 (its address is on rnic7's netdev only), client on uiw1.
rping_pair rnic7 10.99.7.1 "$UIW1_ADDR" 7177 20 64
log "PASS: rnic7 (a uiw device by driver) served 20 verified pings; uiwsiw7 left to siw"
