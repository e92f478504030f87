# shellcheck shell=bash
# Shared helpers for the scripts/ entry points. Sourced, not run.
UIW_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
UIW_BUILD=${UIW_BUILD_DIR:-$UIW_ROOT/build}
UIW_JOBS=${UIW_JOBS:-$(nproc)}

# uiw_log MSG: a section heading, with the wall time since the outermost script that sources
# this file began (scripts/test: CI gives the whole run 90 minutes).
: "${UIW_T0:=$(date +%s)}"
export UIW_T0
uiw_log() {
  local t=$(($(date +%s) - UIW_T0))
  printf '\n== %s [+%d:%02d]\n' "$*" $((t / 60)) $((t % 60))
}

# uiw_need_packages PKG...: installs the Debian packages that are missing.
# Idempotent and silent when everything is present.
uiw_need_packages() {
  local missing=() p
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  echo "installing: ${missing[*]}"
  local sudo=""
  [ "$(id -u)" -ne 0 ] && sudo=sudo
  if [ ! -f /tmp/.uiw-apt-updated ]; then
    $sudo apt-get update -qq && touch /tmp/.uiw-apt-updated
  fi
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

# Packages to build and run the host tiers (unit, integration, fuzz, bench).
# shellcheck disable=SC2034 # for the scripts that source this file
UIW_BUILD_PACKAGES=(build-essential cmake ninja-build pkg-config libisal-dev libgtest-dev
  libgmock-dev libbenchmark-dev clang libclang-rt-14-dev libibverbs-dev librdmacm-dev
  libnl-3-dev libnl-route-3-dev pybind11-dev python3-dev liburing-dev clang-format shellcheck)

# uiw_configure DIR [cmake args...]: configure a build tree (again each time: cheap once
# cached, and it picks up folders that appeared since, e.g. providers/uiw).
uiw_configure() {
  local dir=$1; shift
  cmake -S "$UIW_ROOT" -B "$dir" -G Ninja "$@" >/dev/null
}

# uiw_kroot SUITE [PKG...]: prints the directory of a minimal root of Debian SUITE (trixie,
# unstable, ...) with its kernel headers and compiler, made with mmdebstrap once and cached in
# $UIW_BUILD/kroots/SUITE (UIW_KROOTS_REFRESH=1 makes it again); PKGs are installed into it
# when missing. The kernel and packages tiers build uiw.ko and the packages there.
uiw_kroot() {
  local suite=$1 dir=$UIW_BUILD/kroots/$1 missing=() p
  shift
  if [ ! -f "$dir/.complete" ] || [ "${UIW_KROOTS_REFRESH:-0}" = 1 ]; then
    uiw_need_packages mmdebstrap >&2
    rm -rf "$dir"
    mkdir -p "$(dirname "$dir")"
    # The mirror's Release files of a frozen snapshot may be past Valid-Until.
    mmdebstrap --variant=apt --aptopt='Acquire::Check-Valid-Until "false"' \
      --include=linux-headers-amd64,make,gcc,libc6-dev "$suite" "$dir" \
      http://deb.debian.org/debian >"$dir.log" 2>&1 || { tail -n 20 "$dir.log" >&2; return 1; }
    echo 'Acquire::Check-Valid-Until "false";' >"$dir/etc/apt/apt.conf.d/99uiw-snapshot"
    touch "$dir/.complete"
  fi
  for p in "$@"; do
    chroot "$dir" dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' ||
      missing+=("$p")
  done
  if [ ${#missing[@]} -gt 0 ]; then
    # mmdebstrap leaves no package lists behind.
    { chroot "$dir" apt-get update -q &&
      chroot "$dir" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q \
        --no-install-recommends "${missing[@]}"; } >>"$dir.log" 2>&1 ||
      { tail -n 20 "$dir.log" >&2; return 1; }
  fi
  echo "$dir"
}

# uiw_in_root ROOT CMD...: CMD chrooted into ROOT with ROOT/proc mounted for it (kbuild's
# objtool reads /proc), unmounted afterwards however CMD ends.
uiw_in_root() {
  local root=$1
  shift
  (
    trap 'umount "$root/proc" 2>/dev/null || true' EXIT
    mountpoint -q "$root/proc" || mount -t proc proc "$root/proc"
    chroot "$root" "$@"
  )
}

# uiw_copy_kernel_tree DEST: kernel/ and kernel-abi/ into DEST/ (the checkout stays clean),
# keeping kbuild's outputs already in DEST so rebuilds stay incremental. Files are compared by
# content and a changed one gets the current time: with the source's own mtime, a file older
# than its object (another checkout, an older revision) was not rebuilt by make.
uiw_copy_kernel_tree() {
  local d
  for d in kernel kernel-abi; do
    [ -d "$UIW_ROOT/$d" ] || continue
    mkdir -p "$1/$d"
    rsync -a --checksum --no-times --delete --exclude='*.o' --exclude='*.ko' --exclude='*.mod' \
      --exclude='*.mod.c' --exclude='.*.cmd' --exclude='modules.order' \
      --exclude='Module.symvers' --exclude='.tmp_versions' --exclude='uiw_compat.h' \
      "$UIW_ROOT/$d/" "$1/$d/"
  done
}

# uiw_free_udp_port [NOT]: a loopback UDP port nothing is bound to now (and not NOT).
uiw_free_udp_port() {
  local p
  while :; do
    p=$((20000 + RANDOM % 40000))
    [ "$p" != "${1:-}" ] || continue
    ss -Hunl "sport = :$p" | grep -q . || { echo "$p"; return 0; }
  done
}
