# shellcheck shell=bash
# left_after_purge [ROOT]: what of uiw is still in ROOT (default /) after `apt-get purge
# uiw-dkms ibverbs-provider-uiw`: files, one per line, then the packages dpkg still lists.
# Sourced by deb_install.sh (in the VM) and run-packages (a release's root, after a chroot purge).
left_after_purge() {
  local root=${1:-} plugdir=/usr/lib/x86_64-linux-gnu/libibverbs p
  (cd "$root/" && ls -d usr/src/uiw-* var/lib/dkms/uiw lib/modules/*/updates/dkms/uiw.ko* \
    "${plugdir#/}"/libuiw-rdmav*.so etc/libibverbs.d/uiw.driver usr/share/man/man7/uiw.7.gz \
    usr/include/infiniband/uiwdv.h 2>/dev/null || true)
  for p in uiw-dkms ibverbs-provider-uiw; do
    dpkg-query --admindir="$root/var/lib/dpkg" -W -f='${db:Status-Abbrev} ${Package}\n' "$p" \
      2>/dev/null | grep -E '^(ii|rc)' || true
  done
}
