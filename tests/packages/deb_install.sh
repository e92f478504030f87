#!/usr/bin/env bash
# needs: uiw
# timeout: 1500
# The Debian packages as a user gets them (run by tests/packages/run-packages inside the VM,
# booted on a release's own kernel and root, after it built that release's .debs into $UIW_DEBS,
# /pkg in the root; by hand on the host's root, $UIW_BUILD/packages/deb): the harness's uiw.ko and
# provider are taken away, apt installs uiw-dkms and ibverbs-provider-uiw, DKMS builds uiw.ko
# for the running kernel, modprobe loads that build, devices made with `rdma link add` carry
# rping -V, ibv_rc_pingpong -g (connect-on-RTR), ib_write_bw -R and ib_send_lat -R between
# them, and `apt-get purge` leaves nothing of uiw behind.
# UIW_DEBS_INSTALLED=1: apt installed the packages into this root before it was booted (as an
# image builder does; run-packages, in a chroot, where DKMS builds for the root's kernel at
# native speed instead of the minutes TCG takes): the same checks from the installed state on,
# up to the purge, which run-packages does in the chroot afterwards.
source "$UIW_ROOT/tests/system/lib.sh"
source "$UIW_ROOT/providers/uiw/tests/allow_local_sources.sh"
source "$UIW_ROOT/tests/packages/left_after_purge.sh"

debs=${UIW_DEBS:-$UIW_BUILD/packages/deb}
ls "$debs"/uiw-dkms_*_all.deb "$debs"/ibverbs-provider-uiw_*_amd64.deb >/dev/null ||
  fail "no packages in $debs (tests/packages/run-packages builds them)"
kver=$(uname -r)
preinstalled=${UIW_DEBS_INSTALLED:-0}
plugdir=/usr/lib/x86_64-linux-gnu/libibverbs

# What the harness put in place goes, so that only the packages can make uiw work (in an own
# root the harness installs no provider: the one there is the package's).
for d in /sys/class/infiniband/*; do
  [ "$(cat "$d/hca_type" 2>/dev/null)" = uiw ] && rdma link delete "${d##*/}"
done
rmmod uiw || fail "rmmod uiw (the harness's module)"
[ "$preinstalled" = 1 ] || rm -f "$plugdir"/libuiw-rdmav*.so /etc/libibverbs.d/uiw.driver
unset RDMAV_DRIVERS IBV_DRIVERS

log "$(. /etc/os-release && echo "$PRETTY_NAME"), rdma-core $(dpkg-query -W -f='${Version}' libibverbs1)"
if [ "$preinstalled" = 1 ]; then
  for p in uiw-dkms ibverbs-provider-uiw; do
    [ "$(dpkg-query -W -f='${db:Status-Abbrev}' "$p" 2>/dev/null)" = "ii " ] ||
      fail "$p is not installed in this root (UIW_DEBS_INSTALLED=1)"
  done
  log "installed in this root before boot (apt-get install in a chroot; DKMS built uiw.ko for $kver there)"
else
  log "apt-get install (DKMS builds uiw.ko for $kver)"
  t0=$SECONDS
  apt-get install -y "$debs"/uiw-dkms_*_all.deb \
    "$debs"/ibverbs-provider-uiw_*_amd64.deb >apt.log 2>&1 || { show apt; fail "apt-get install"; }
  log "installed in $((SECONDS - t0)) s"
fi
dkms status uiw >dkms.log 2>&1
# (kver as a literal in the pattern: Debian 13's is 6.12.117+deb13-amd64)
expect dkms "uiw/[^,]*, $(sed 's/[][\.^$*+?(){}|]/\\&/g' <<<"$kver"), x86_64: installed" \
  "DKMS did not install uiw.ko for $kver"
ko=$(modinfo -n uiw) || fail "modinfo finds no uiw module"
case $ko in */updates/dkms/uiw.ko*) ;; *) fail "uiw resolves to $ko, not DKMS's build" ;; esac
# (libuiw-rdmav<private ABI>.so: 34 for rdma-core 36-56, 65 for 65)
ls "$plugdir"/libuiw-rdmav*.so >/dev/null 2>&1 || fail "the provider is not in $plugdir"
grep -qx 'driver uiw' /etc/libibverbs.d/uiw.driver || fail "no /etc/libibverbs.d/uiw.driver"
man -w uiw >/dev/null 2>&1 || [ -f /usr/share/man/man7/uiw.7.gz ] || fail "no uiw(7)"

modprobe uiw || fail "modprobe uiw"
rdma link add pk0 type uiw netdev "$UIW0_NETDEV"
rdma link add pk1 type uiw netdev "$UIW1_NETDEV"
# shellcheck disable=SC2034 # for the library functions below
UIW0_DEV=pk0 UIW1_DEV=pk1
allow_local_sources

port=7790
syn_waits_for_listener $port $((port + 9))
start_bg rping-server rping -s -a "$UIW0_ADDR" -p $port -C 10 -V -v
wait_cm_listen $port
run_fg rping-client 120 rping -c -a "$UIW0_ADDR" -I "$UIW1_ADDR" -p $port -C 10 -V -v
wait_bg rping-server 30
n=$(grep -c 'ping data: rdma-ping-' rping-client.log || true)
[ "$n" = 10 ] || { show rping-client; fail "rping: $n verified pings, want 10"; }
log "PASS rping -V: 10 verified pings pk1 -> pk0"

# Connect-on-RTR: GID index 0 is the netdev's first address.
start_bg pp-server ibv_rc_pingpong -d pk0 -g 0 -p 7791 -n 100
wait_tcp_listen 7791
run_fg pp-client 120 ibv_rc_pingpong -d pk1 -g 0 -p 7791 -n 100 "$UIW0_ADDR"
wait_bg pp-server 30
expect pp-client '^[0-9]+ bytes in .* seconds = ' "ibv_rc_pingpong: no result"
log "PASS ibv_rc_pingpong -g 0"

for tool in ib_write_bw ib_send_lat; do
  start_bg "$tool-server" "$tool" -R -d pk0 -p 7792 -n 200
  wait_cm_listen 7792
  run_fg "$tool-client" 180 "$tool" -R -d pk1 -p 7792 -n 200 "$UIW0_ADDR"
  wait_bg "$tool-server" 30
  expect "$tool-client" '^ *(65536|2) +200 ' "$tool: no result line"
  log "PASS $tool -R"
done

rdma link delete pk0
rdma link delete pk1
rmmod uiw
if [ "$preinstalled" = 1 ]; then
  # The root is this boot's overlay over the release's cached root: run-packages purges there,
  # in a chroot, and checks that nothing is left (DKMS's removal took 157 s here under TCG).
  log "PASS: installed before boot and used; apt-get purge follows in the chroot"
  exit 0
fi
log "apt-get purge"
apt-get purge -y uiw-dkms ibverbs-provider-uiw >purge.log 2>&1 || { show purge; fail "apt-get purge"; }
left=$(left_after_purge)
[ -z "$left" ] || fail "left behind after purge: $left"
log "PASS: installed, used and purged; nothing left"
