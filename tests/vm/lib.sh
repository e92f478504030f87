# shellcheck shell=bash disable=SC2034 # the VM_* results are read by the scripts that source it
# Host-side helpers of the uiw test VM (sourced by tests/vm/vm). Not run directly.
#
# vm_prepare picks the kernel and builds (or reuses) everything the VM boots with:
#   VM_KVER VM_KERNEL VM_INITRD          kernel release, bzImage, initramfs
#   VM_SIW_STATE VM_SIW_KO VM_SIW_REASON  siw.ko built from linux-source-<maj.min>
#   VM_UIW_STATE VM_UIW_KO VM_UIW_REASON  uiw.ko built from kernel/ (when it exists)
# *_STATE is ok | absent (not expected to exist: skip) | failed (expected but broken: fail).
# Artifacts live under $VM_DIR (= $UIW_BUILD/vm), cached by content keys.
# UIW_VM_KROOT=DIR boots another release's kernel instead: DIR is a root made by uiw_kroot
# (scripts/lib.sh) holding boot/vmlinuz-<kver>, its module tree and headers. uiw.ko is then
# built inside DIR (its compiler, its headers), the guest sees DIR's module tree at
# /lib/modules/<kver>, and siw is built in DIR from its linux-source (Debian ships no siw.ko).
# UIW_VM_OWNROOT=1 (with UIW_VM_KROOT) also boots DIR's user space: DIR is the guest's root, with
# the checkout and build tree mounted at their host paths; the provider built for the host's
# rdma-core is then not installed (DIR needs kmod, iproute2, procps, nftables and the tools the
# tests run).

source "$(dirname "${BASH_SOURCE[0]}")/../../scripts/lib.sh"

VM_SRC=$UIW_ROOT/tests/vm
VM_DIR=$UIW_BUILD/vm
VM_KROOT=${UIW_VM_KROOT:-}
VM_OWNROOT=0
[ -z "$VM_KROOT" ] || VM_OWNROOT=${UIW_VM_OWNROOT:-0}
VM_QUIET=${VM_QUIET:-0}

# Packages the VM needs on the host; the guest uses the same files through the 9p root.
VM_PACKAGES=(qemu-system-x86 busybox-static linux-image-amd64 linux-headers-amd64 kmod cpio
  xz-utils rsync make gcc procps iproute2 rdma-core ibverbs-utils ibverbs-providers rdmacm-utils perftest
  python3-pyverbs tshark nftables)

vm_log() { [ "$VM_QUIET" = 1 ] || printf 'vm: %s\n' "$*" >&2; }
vm_warn() { printf 'vm: %s\n' "$*" >&2; }
vm_die() {
  printf 'vm: error: %s\n' "$*" >&2
  exit 125
}

# Seconds since the epoch with centiseconds, for the timing lines.
vm_now() { date +%s.%N | cut -c1-14; }
vm_since() { awk -v a="$1" -v b="$(vm_now)" 'BEGIN { printf "%.1f", b - a }'; }

# vm_stale_int3 CONSOLE: the kernel's first oops in the console log is an int3 trap outside
# uiw.ko at an address whose byte is no longer int3 (the "Code:" dump marks the byte after the
# trap; the one before it is not 0xcc). The kernel patches its code with text_poke_bp: an int3
# first, then the new bytes, then a sync of every CPU; a trap on bytes memory no longer holds
# is a vCPU still running a translation made while the int3 was there, which multi-threaded
# TCG allows and a real CPU after that sync does not (seen in udp6_ehashfn on Debian
# unstable's 7.2, and in sched_clock_tick during a boot of Debian 13's 6.12).
vm_stale_int3() {
  awk '
    !oops { if (/Oops: int3/) oops = 1; else if (/Oops:|BUG:|general protection|Kernel panic/) exit; next }
    !rip && /RIP: 0010:/ { rip = 1; if (/\[uiw\]/) exit; next }
    rip && /Code: / {
      for (i = 2; i <= NF; i++) if ($i ~ /^<[0-9a-f][0-9a-f]>$/) { stale = $(i - 1) != "cc"; exit }
      exit
    }
    END { exit !stale }' "$1"
}

vm_pkg_installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q 'install ok installed'; }

# vm_need_packages PKG...: installs what is missing; waits for a running apt/dpkg first.
vm_need_packages() {
  local missing=() p try
  for p in "$@"; do vm_pkg_installed "$p" || missing+=("$p"); done
  [ ${#missing[@]} -eq 0 ] && return 0
  vm_log "installing missing packages: ${missing[*]}"
  for try in 1 2 3 4 5 6; do
    if pgrep -x 'apt(-get)?|dpkg' >/dev/null; then
      vm_log "apt/dpkg is busy; waiting (try $try)"
      sleep 20
      continue
    fi
    uiw_need_packages "${missing[@]}" && return 0
    sleep 5
  done
  vm_die "could not install: ${missing[*]}
  install them by hand: apt-get install ${missing[*]}"
}

# vm_headers KVER: KVER's headers as the build sees them: /lib/modules/<kver>/build on the host,
# or in VM_KROOT (whose build link is absolute, valid inside the root only) their own directory.
vm_headers() {
  if [ -n "$VM_KROOT" ]; then echo "/usr/src/linux-headers-$1"; else echo "/lib/modules/$1/build"; fi
}

# Picks the newest installed kernel that has both its module tree and its headers
# (vm_headers); UIW_VM_KERNEL=<kver> forces one. Sets VM_KVER, VM_KHDR, VM_KERNEL.
vm_pick_kernel() {
  local img k best="" seen="" r=$VM_KROOT
  for img in "$r"/boot/vmlinuz-*; do
    [ -f "$img" ] || continue
    k=${img#"$r"/boot/vmlinuz-}
    seen+=" $k"
    if [ -n "${UIW_VM_KERNEL:-}" ] && [ "$k" != "$UIW_VM_KERNEL" ]; then continue; fi
    [ -f "$r/lib/modules/$k/modules.dep" ] || continue
    [ -f "$r$(vm_headers "$k")/Makefile" ] || continue
    best=$(printf '%s\n%s\n' "$best" "$k" | sed '/^$/d' | sort -V | tail -n1)
  done
  if [ -z "$best" ]; then
    [ -n "$seen" ] || vm_die "no kernel image in /boot: apt-get install linux-image-amd64"
    local want=${UIW_VM_KERNEL:-${seen##* }}
    [ -f "/boot/vmlinuz-$want" ] ||
      vm_die "UIW_VM_KERNEL=$want: no /boot/vmlinuz-$want (installed:$seen)"
    [ -f "/lib/modules/$want/modules.dep" ] ||
      vm_die "kernel $want has no module tree /lib/modules/$want: apt-get install --reinstall linux-image-$want"
    vm_die "no kernel headers matching $want (need /lib/modules/$want/build):
  apt-get install linux-headers-$want"
  fi
  VM_KVER=$best
  VM_KHDR=$(vm_headers "$best")
  VM_KERNEL=$r/boot/vmlinuz-$best
  [ -r "$VM_KERNEL" ] || vm_die "$VM_KERNEL is not readable"
}

# QEMU boots an uncompressed ELF vmlinux directly through its PVH entry point; that skips the
# firmware's bzImage loader and the in-guest XZ decompression, ~7 s under TCG. The vmlinux is
# unpacked from Debian's bzImage once (cached); without a PVH note the bzImage is used.
vm_unpack_kernel() {
  local out=$VM_DIR/vmlinux-$VM_KVER key magic off tool
  key=$(stat -c '%s %Y' "$VM_KERNEL")
  if [ -f "$out" ] && [ "$(cat "$out.key" 2>/dev/null)" = "$key" ]; then
    VM_KERNEL=$out
    return 0
  fi
  rm -f "$out" "$out.key"
  # magic (as grep -P bytes) and decompressor, as in the kernel's scripts/extract-vmlinux
  for magic in '\xfd\x37\x7a\x58\x5a\x00:xz -dc' '\x28\xb5\x2f\xfd:zstd -qdc' \
    '\x1f\x8b\x08:gzip -dc' '\x02\x21\x4c\x18:lz4 -dc'; do
    tool=${magic#*:}
    command -v "${tool%% *}" >/dev/null || continue
    for off in $(LC_ALL=C grep -obUaP "${magic%%:*}" "$VM_KERNEL" | cut -d: -f1 | head -n 3 || true); do
      # (the decompressor complains about the bytes after its stream: ignore its status)
      tail -c +"$((off + 1))" "$VM_KERNEL" | $tool >"$out.tmp" 2>/dev/null || true
      # XEN_ELFNOTE_PHYS32_ENTRY (type 0x12) marks the PVH entry point.
      if readelf -n "$out.tmp" 2>/dev/null | grep -q 'Unknown note type: (0x00000012)'; then
        mv "$out.tmp" "$out" && echo "$key" >"$out.key"
        VM_KERNEL=$out
        return 0
      fi
    done
  done
  rm -f "$out.tmp"
  vm_log "cannot unpack a PVH vmlinux from $VM_KERNEL; booting the bzImage (slower)"
}

# Hash of the given strings and files (missing files hash as their name).
vm_key() {
  local x
  for x in "$@"; do
    if [ -f "$x" ]; then sha256sum "$x"; else printf '%s\n' "$x"; fi
  done | sha256sum | cut -c1-16
}

# Modules the initramfs loads to mount the 9p root and open the virtio serial ports.
VM_INITRD_MODULES=(virtio_pci virtio_console 9pnet_virtio 9p overlay)

vm_build_initramfs() {
  local mods key out tmp f
  mods=$(for f in "${VM_INITRD_MODULES[@]}"; do
    modprobe ${VM_KROOT:+-d "$VM_KROOT"} -S "$VM_KVER" --show-depends "$f" ||
      vm_die "module $f missing for $VM_KVER"
  done | awk '$1 == "insmod" && !seen[$2]++ { print $2 }')
  key=$(vm_key "$VM_KVER" "$VM_KROOT" "$VM_SRC/initramfs-init" /bin/busybox $mods)
  out=$VM_DIR/initramfs-$VM_KVER.cpio
  VM_INITRD=$out
  [ -f "$out" ] && [ "$(cat "$out.key" 2>/dev/null)" = "$key" ] && return 0
  vm_log "building initramfs for $VM_KVER"
  tmp=$(mktemp -d "$VM_DIR/initramfs.XXXXXX")
  mkdir -p "$tmp"/{bin,dev,proc,sys,lower,rw,newroot,modules}
  cp /bin/busybox "$tmp/bin/busybox"
  cp "$VM_SRC/initramfs-init" "$tmp/init"
  chmod 755 "$tmp/init"
  : >"$tmp/modules/order"
  for f in $mods; do
    local base
    base=$(basename "$f")
    # busybox insmod takes plain .ko files only.
    case $f in
      *.ko.xz) xz -dc "$f" >"$tmp/modules/${base%.xz}"; base=${base%.xz} ;;
      *.ko.zst) zstd -qdc "$f" >"$tmp/modules/${base%.zst}"; base=${base%.zst} ;;
      *.ko.gz) gzip -dc "$f" >"$tmp/modules/${base%.gz}"; base=${base%.gz} ;;
      *) cp "$f" "$tmp/modules/$base" ;;
    esac
    echo "$base" >>"$tmp/modules/order"
  done
  (cd "$tmp" && find . | cpio -o -H newc --quiet) >"$out.tmp"
  mv "$out.tmp" "$out"
  echo "$key" >"$out.key"
  rm -rf "$tmp"
}

source "$(dirname "${BASH_SOURCE[0]}")/siw_tunable.bash"

# The interop tests' tunable siw variant (tests/vm/siw_tunable.bash), built here on the host
# because building it in the guest costs minutes under TCG. A failure only costs those minutes.
vm_build_siw_tunable() {
  local src=$1 key=$2 out=$VM_DIR/siw-tunable-$VM_KVER
  [ "$(cat "$out/.key" 2>/dev/null)" = "$key" ] && [ -f "$out/siw.ko" ] && return 0
  vm_log "building the tunable siw variant for the interop tests"
  if siw_tunable_build "$out" "$VM_KVER" "$src" vm_make_siw; then
    echo "$key" >"$out/.key"
  else
    vm_warn "the tunable siw variant failed to build (log: $out.log)"
  fi
}

# siw.ko from Debian's linux-source-<maj.min> (Debian ships no siw): the driver directory is
# extracted once per source version and built out of tree against the chosen kernel's headers.
vm_build_siw() {
  VM_SIW_STATE=failed VM_SIW_KO="" VM_SIW_REASON=""
  local series pkg tarball srcver key dir log src
  series=$(echo "$VM_KVER" | cut -d. -f1,2)
  pkg=linux-source-$series
  tarball=$VM_KROOT/usr/src/$pkg.tar.xz
  if [ -n "$VM_KROOT" ]; then
    # The release's own source, installed in its root (tests/vm/run-release-kernels does).
    srcver=$(chroot "$VM_KROOT" dpkg-query -W -f='${Version}' "$pkg" 2>/dev/null) || srcver=""
    if [ -z "$srcver" ] || [ ! -f "$tarball" ]; then
      VM_SIW_STATE=absent VM_SIW_REASON="no $pkg in $VM_KROOT"
      return 0
    fi
  else
    if ! vm_pkg_installed "$pkg" || [ ! -f "$tarball" ]; then
      vm_need_packages "$pkg"
      [ -f "$tarball" ] || { VM_SIW_REASON="$tarball missing (apt-get install $pkg)"; return 0; }
    fi
    srcver=$(dpkg-query -W -f='${Version}' "$pkg")
  fi
  src=$VM_DIR/src/$pkg-$srcver
  if [ ! -f "$src/.extracted" ]; then
    vm_log "extracting drivers/infiniband/sw/siw from $tarball (once per source version)"
    rm -rf "$src" && mkdir -p "$src"
    if ! tar -xJf "$tarball" -C "$src" --strip-components=1 "$pkg/drivers/infiniband/sw/siw"; then
      VM_SIW_REASON="cannot extract siw from $tarball"
      return 0
    fi
    touch "$src/.extracted"
  fi
  dir=$VM_DIR/siw-$VM_KVER
  key=$(vm_key "$VM_KVER" "$VM_KROOT" "$srcver" "$VM_KROOT$VM_KHDR/Module.symvers")
  log=$dir.log
  if [ -f "$dir/siw.ko" ] && [ "$(cat "$dir/.key" 2>/dev/null)" = "$key" ]; then
    VM_SIW_STATE=ok VM_SIW_KO=$dir/siw.ko
    vm_build_siw_tunable "$src/drivers/infiniband/sw/siw" "$key"
    return 0
  fi
  vm_log "building siw.ko from $pkg $srcver for $VM_KVER"
  rm -rf "$dir" && mkdir -p "$dir"
  cp -a "$src/drivers/infiniband/sw/siw/." "$dir/"
  if vm_make_siw "$dir" >"$log" 2>&1 && [ -f "$dir/siw.ko" ]; then
    echo "$key" >"$dir/.key"
    VM_SIW_STATE=ok VM_SIW_KO=$dir/siw.ko
    vm_build_siw_tunable "$src/drivers/infiniband/sw/siw" "$key"
  else
    echo "make failed: see above" >>"$log"
    VM_SIW_REASON="siw.ko failed to build (log: $log)"
    vm_warn "$VM_SIW_REASON"
    tail -n 15 "$log" >&2
  fi
}

# uiw.ko: when kernel/ has a Makefile or Kbuild, copy kernel/ (and kernel-abi/, which it may
# include by relative path) under the build dir and build it there, so the checkout stays clean.
vm_build_uiw() {
  VM_UIW_STATE=absent VM_UIW_KO="" VM_UIW_REASON="kernel/ does not exist yet (uiw.ko not written)"
  local k=$UIW_ROOT/kernel
  [ -f "$k/Makefile" ] || [ -f "$k/Kbuild" ] || return 0
  local dir=$VM_DIR/uiw-$VM_KVER log key files
  log=$dir.log
  files=$(cd "$UIW_ROOT" && find kernel kernel-abi -type f 2>/dev/null | sort)
  key=$(cd "$UIW_ROOT" && vm_key "$VM_KVER" "$VM_KROOT" "$VM_KROOT$VM_KHDR/Module.symvers" $files)
  if [ "$(cat "$dir/.key" 2>/dev/null)" = "$key" ]; then
    if [ -f "$dir/src/kernel/uiw.ko" ]; then
      VM_UIW_STATE=ok VM_UIW_KO=$dir/src/kernel/uiw.ko
    else
      VM_UIW_STATE=failed VM_UIW_REASON="uiw.ko failed to build (log: $log)"
      vm_warn "$VM_UIW_REASON (cached result; sources unchanged)"
    fi
    return 0
  fi
  vm_log "building uiw.ko for $VM_KVER"
  mkdir -p "$dir/src"
  uiw_copy_kernel_tree "$dir/src"
  rm -f "$dir/src/kernel/uiw.ko"
  # kernel/Makefile: the compat probes (uiw_compat.h), then Kbuild.
  if [ -n "$VM_KROOT" ]; then
    vm_build_uiw_in_root "$dir" >"$log" 2>&1
  else
    make -C "$dir/src/kernel" KDIR="$VM_KHDR" -j"$UIW_JOBS" >"$log" 2>&1
  fi
  if [ -f "$dir/src/kernel/uiw.ko" ]; then
    VM_UIW_STATE=ok VM_UIW_KO=$dir/src/kernel/uiw.ko
    if grep -q 'warning:' "$log"; then vm_warn "uiw.ko built with warnings (log: $log)"; fi
  else
    VM_UIW_STATE=failed VM_UIW_REASON="uiw.ko failed to build (log: $log)"
    vm_warn "$VM_UIW_REASON"
    grep -m 20 -E 'error|Error' "$log" >&2 || tail -n 20 "$log" >&2
  fi
  echo "$key" >"$dir/.key"
}

# vm_make_siw DIR: builds siw's sources in DIR against VM_KVER's headers; with VM_KROOT inside
# that root (DIR is copied in, siw.ko back).
vm_make_siw() {
  local dir=$1 in
  if [ -z "$VM_KROOT" ]; then
    make -C "$VM_KHDR" M="$dir" CONFIG_RDMA_SIW=m -j"$UIW_JOBS" modules
    return
  fi
  in=/uiw-vm/$(basename "$dir")
  rm -rf "${VM_KROOT:?}$in" && mkdir -p "$VM_KROOT$in" && cp -a "$dir/." "$VM_KROOT$in/"
  uiw_in_root "$VM_KROOT" make -C "$VM_KHDR" M="$in" CONFIG_RDMA_SIW=m -j"$UIW_JOBS" modules &&
    cp "$VM_KROOT$in/siw.ko" "$dir/siw.ko"
}

# vm_build_uiw_in_root DIR: uiw.ko for VM_KROOT's kernel, built in that root (its gcc and
# headers), copied to DIR/src/kernel/uiw.ko.
vm_build_uiw_in_root() {
  local dir=$1
  uiw_copy_kernel_tree "$VM_KROOT/uiw-vm"
  rm -f "$VM_KROOT/uiw-vm/kernel/uiw.ko"
  uiw_in_root "$VM_KROOT" make -C /uiw-vm/kernel KDIR="$VM_KHDR" -j"$UIW_JOBS" &&
    cp "$VM_KROOT/uiw-vm/kernel/uiw.ko" "$dir/src/kernel/uiw.ko"
}

# The rdma-core provider, when the build tree has one (providers/uiw/CMakeLists.txt puts it in
# <build>/lib); the guest installs it into its overlay. Only there: the packages and kernel
# tiers keep other builds under the build tree (kroots/, packages/), some for another
# rdma-core.
vm_find_provider() {
  VM_PROVIDER=""
  [ "$VM_OWNROOT" = 1 ] || VM_PROVIDER=$(ls "$UIW_BUILD"/lib/libuiw-rdmav*.so 2>/dev/null | head -n1)
}

# vm_hostpaths: the host paths an own-root guest mounts (uiw.hostpaths=): the checkout, and the
# build tree when it lies outside it.
vm_hostpaths() {
  local paths=$UIW_ROOT
  case $UIW_BUILD/ in "$UIW_ROOT"/*) ;; *) paths+=:$UIW_BUILD ;; esac
  echo "$paths"
}

# vm_prepare [WANT_SIW] [WANT_UIW]: everything above (plus VM_SIW_DEPS/VM_UIW_DEPS, the in-tree
# modules each one needs, loaded by the guest before insmod), serialised between concurrent runs.
vm_prepare() {
  local want_siw=${1:-1} want_uiw=${2:-1}
  vm_need_packages "${VM_PACKAGES[@]}"
  mkdir -p "$VM_DIR"
  exec 9>"$VM_DIR/.lock"
  flock 9
  vm_pick_kernel
  vm_unpack_kernel
  vm_build_initramfs
  if [ "$want_siw" = 1 ]; then
    vm_build_siw
  else
    VM_SIW_STATE=absent VM_SIW_KO="" VM_SIW_REASON="disabled (--no-siw)"
  fi
  if [ "$want_uiw" = 1 ]; then
    vm_build_uiw
  else
    VM_UIW_STATE=absent VM_UIW_KO="" VM_UIW_REASON="disabled (--no-uiw)"
  fi
  vm_find_provider
  VM_SIW_DEPS="" VM_UIW_DEPS=""
  [ "$VM_SIW_STATE" = ok ] && VM_SIW_DEPS=$(modinfo -F depends "$VM_SIW_KO")
  [ "$VM_UIW_STATE" = ok ] && VM_UIW_DEPS=$(modinfo -F depends "$VM_UIW_KO")
  flock -u 9
  exec 9>&-
}
