#!/usr/bin/env bash
# needs: uiw
# timeout: 900
# One end of the cross-release pair (run by tests/packages/run-packages in two VMs at once,
# joined by a virtio-net wire, tests/vm/vm --nic-udp): UIW_PAIR_ROLE=server runs on Debian 12
# with the build tree's provider, UIW_PAIR_ROLE=client on another release's own kernel and root
# with that release's provider package (from $UIW_DEBS). Each VM makes a uiw device on its NIC
# (MTU 1500); rping -V (rdma_cm) and ibv_rc_pingpong --chk (connect-on-RTR, GID index 0) run
# from the client to the server, their data verified.
source "$UIW_ROOT/tests/system/lib.sh"

role=${UIW_PAIR_ROLE:?UIW_PAIR_ROLE=server or client}
server=10.99.9.1 client=10.99.9.2
# Either VM may boot minutes after the other under TCG.
deadline=$((SECONDS + 600))

modprobe virtio_net
nd=""
while [ -z "$nd" ] && [ $SECONDS -lt $deadline ]; do
  for d in /sys/class/net/*; do
    [ "$(basename "$(readlink -f "$d/device/driver" 2>/dev/null)")" = virtio_net ] && nd=${d##*/}
  done
  [ -n "$nd" ] || sleep 0.2
done
[ -n "$nd" ] || fail "no virtio-net NIC (the VM is started with --nic-udp)"
me=$server
[ "$role" = server ] || me=$client
ip link set "$nd" mtu 1500 up
ip addr add "$me/24" dev "$nd"

plugdir=$(ls -d /usr/lib/*/libibverbs | head -n1)
if ! ls "$plugdir"/libuiw-rdmav*.so >/dev/null 2>&1; then
  # This release's provider package, without uiw-dkms: the harness's uiw.ko (built for this
  # kernel in this root) is loaded; building it again with DKMS costs minutes under TCG.
  deb=$(ls "${UIW_DEBS:?no provider installed and no UIW_DEBS}"/ibverbs-provider-uiw_*_amd64.deb)
  dpkg -i --force-depends "$deb" >dpkg.log 2>&1 || { show dpkg; fail "dpkg -i $deb"; }
fi
log "$(. /etc/os-release && echo "$PRETTY_NAME"), kernel $(uname -r), rdma-core $(dpkg-query -W -f='${Version}' libibverbs1), $nd $(cat /sys/class/net/$nd/address) mtu $(cat /sys/class/net/$nd/mtu)"

dev=wire0
rdma link add $dev type uiw netdev "$nd" || fail "rdma link add $dev type uiw netdev $nd"
at_exit "rdma link delete $dev 2>/dev/null || true"
for ((i = 0; i < 100; i++)); do
  grep -q ACTIVE /sys/class/infiniband/$dev/ports/1/state && break
  sleep 0.1
done
grep -q ACTIVE /sys/class/infiniband/$dev/ports/1/state || fail "$dev: port not ACTIVE"

if [ "$role" = server ]; then
  start_bg rping-server rping -s -a $server -p 7830 -C 10 -V -v
  start_bg pp-server ibv_rc_pingpong -d $dev -g 0 -p 7831 -n 100 --chk
  wait_bg rping-server $((deadline - SECONDS))
  wait_bg pp-server $((deadline - SECONDS + 60))
  log "PASS server: the peer's rping and ibv_rc_pingpong ran to the end"
  exit 0
fi

# retry NAME CMD...: CMD until it succeeds (the server may not be up yet), output in NAME.log.
retry() {
  local name=$1 tries=0
  shift
  until timeout -k 5 120 "$@" >"$name.log" 2>&1; do
    tries=$((tries + 1))
    [ $SECONDS -lt $deadline ] || { show "$name"; fail "$name: no success in $tries tries"; }
    sleep 2
  done
  log "$name succeeded after $tries failed tries (server not up yet)"
}
retry rping-client rping -c -a $server -I $client -p 7830 -C 10 -V -v
n=$(grep -c 'ping data: rdma-ping-' rping-client.log || true)
[ "$n" = 10 ] || { show rping-client; fail "rping: $n verified pings, want 10"; }
log "PASS rping -V: 10 verified pings $client -> $server"
retry pp-client ibv_rc_pingpong -d $dev -g 0 -p 7831 -n 100 --chk $server
expect pp-client '^[0-9]+ bytes in .* seconds = ' "ibv_rc_pingpong: no result"
log "PASS ibv_rc_pingpong -g 0 --chk (connect-on-RTR)"
