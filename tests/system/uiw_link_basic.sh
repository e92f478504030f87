#!/usr/bin/env bash
# needs: uiw
# uiw.ko device basics (runs inside the test VM): node type RNIC, transport iWARP, node GUID
# derived from the MAC, the port GID table (netdev addresses as IPv4-mapped/IPv6 GIDs, the MAC
# GID last) following address changes, one device per netdev, `rdma link del` and re-add.
source "$UIW_ROOT/tests/system/lib.sh"

dmesg_start=$(dmesg | wc -l)

dev=$UIW0_DEV nd=$UIW0_NETDEV
sys=/sys/class/infiniband/$dev
[ -d "$sys" ] || fail "$sys missing"
[ "$(cat "$sys/node_type")" = "4: RNIC" ] || fail "node_type $(cat "$sys/node_type")"
rdma link show "$dev/1" | grep -q "netdev $nd" || fail "rdma link show: $(rdma link show)"
[ "$(cat "$sys/ports/1/link_layer")" = Ethernet ] || fail "link_layer"

# Node GUID: EUI-64 of the MAC with 0xff,0x75 in the middle (uiw_main.c).
IFS=: read -r m0 m1 m2 m3 m4 m5 <"/sys/class/net/$nd/address"
guid=$(printf '%02x%s:%sff:75%s:%s%s' $((0x$m0 ^ 2)) "$m1" "$m2" "$m3" "$m4" "$m5")
[ "$(cat "$sys/node_guid")" = "$guid" ] || fail "node_guid $(cat "$sys/node_guid") != $guid"

gid_of_v4() { # 10.99.1.1 -> 0000:...:ffff:0a63:0101
  local IFS=.
  set -- $1
  printf '0000:0000:0000:0000:0000:ffff:%02x%02x:%02x%02x' "$1" "$2" "$3" "$4"
}
gids() { cat "$sys"/ports/1/gids/*; }
has_gid() { gids | grep -x "$1" >/dev/null; }
lacks_gid() { ! has_gid "$1"; }
wait_gid() { # wait_gid present|absent GID
  if [ "$1" = present ]; then
    poll_until 30 0.1 has_gid "$2" && return 0
  else
    poll_until 30 0.1 lacks_gid "$2" && return 0
  fi
  fail "GID $2 not $1: $(gids | sort -u | tr '\n' ' ')"
}

v4=$(gid_of_v4 "$UIW0_ADDR")
[ "$(cat "$sys/ports/1/gids/0")" = "$v4" ] || fail "gid 0 $(cat "$sys/ports/1/gids/0") != $v4"
has_gid "$(/usr/bin/python3 -c "import ipaddress,sys; a=ipaddress.ip_address(sys.argv[1]).exploded; print(a)" "$UIW0_ADDR6")" ||
  fail "IPv6 GID of $UIW0_ADDR6 missing"
mac_gid=$(printf '%s%s:%s%s:%s%s:0000:0000:0000:0000:0000' "$m0" "$m1" "$m2" "$m3" "$m4" "$m5")
[ "$(cat "$sys/ports/1/gids/15")" = "$mac_gid" ] || fail "MAC GID $(cat "$sys/ports/1/gids/15") != $mac_gid"

# The table follows address changes.
ip addr add 10.99.1.77/24 dev "$nd"
wait_gid present "$(gid_of_v4 10.99.1.77)"
ip addr del 10.99.1.77/24 dev "$nd"
wait_gid absent "$(gid_of_v4 10.99.1.77)"
ip addr add fd99:77::5/64 dev "$nd" nodad
wait_gid present fd99:0077:0000:0000:0000:0000:0000:0005
ip addr del fd99:77::5/64 dev "$nd"
wait_gid absent fd99:0077:0000:0000:0000:0000:0000:0005

# One device per netdev.
if rdma link add uiwdup type uiw netdev "$nd" 2>/dev/null; then fail "second device on $nd"; fi
[ ! -d /sys/class/infiniband/uiwdup ] || fail "uiwdup exists"

# Port state follows the netdev.
ip link set "$nd" down
sleep 0.3
[ "$(cat "$sys/ports/1/state")" = "1: DOWN" ] || fail "state after down: $(cat "$sys/ports/1/state")"
ip link set "$nd" up
port_active() { [ "$(cat "$sys/ports/1/state")" = "4: ACTIVE" ]; }
poll_until 30 0.1 port_active || true
[ "$(cat "$sys/ports/1/state")" = "4: ACTIVE" ] || fail "state after up: $(cat "$sys/ports/1/state")"

# rdma link del, then add again.
rdma link del "$dev"
[ ! -d "$sys" ] || fail "$dev still there after rdma link del"
rdma link add "$dev" type uiw netdev "$nd"
[ -d "$sys" ] || fail "$dev not re-created"

if dmesg | tail -n +"$((dmesg_start + 1))" | grep -E 'BUG|WARNING|Oops|Call Trace|ib_query_port failed'; then
  fail "kernel complained (above)"
fi
echo "PASS: uiw device basics"
