# Shared helpers for the scripts/ entry points. Sourced, not run.
UIW_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
UIW_BUILD=${UIW_BUILD_DIR:-$UIW_ROOT/build}
UIW_JOBS=${UIW_JOBS:-$(nproc)}

uiw_log() { printf '\n== %s\n' "$*"; }

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
UIW_BUILD_PACKAGES=(build-essential cmake ninja-build pkg-config libisal-dev libgtest-dev
  libgmock-dev libbenchmark-dev clang libclang-rt-14-dev libibverbs-dev librdmacm-dev
  libnl-3-dev libnl-route-3-dev pybind11-dev python3-dev liburing-dev)

# uiw_configure DIR [cmake args...]: configure a build tree (again each time: cheap once
# cached, and it picks up folders that appeared since, e.g. providers/uiw).
uiw_configure() {
  local dir=$1; shift
  cmake -S "$UIW_ROOT" -B "$dir" -G Ninja "$@" >/dev/null
}
