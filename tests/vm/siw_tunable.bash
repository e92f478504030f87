# siw_tunable_build: the test-only siw.ko whose negotiation knobs are module parameters (see
# tests/system/interop_lib.bash). Sourced by tests/vm/lib.sh, which builds it on the host next to
# siw.ko (<build>/vm/siw-tunable-<kver>), and by interop_lib.bash, which builds it in the guest
# only when that copy is missing (much slower under TCG).

# siw_tunable_build OUTDIR KVER SRCDIR [MAKE_FN]: builds OUTDIR/siw.ko from siw's sources in
# SRCDIR with mpa_crc_required, mpa_crc_strict, peer_to_peer, mpa_version and rtr_type as module
# parameters; MAKE_FN DIR, when given, builds DIR instead of make against /lib/modules/KVER.
siw_tunable_build() {
  local out=$1 kver=$2 src=$3 make_fn=${4:-} v
  rm -rf "$out" && mkdir -p "$out" && cp -a "$src/." "$out/" && rm -f "$out"/*.o "$out"/*.ko
  for v in mpa_crc_required mpa_crc_strict peer_to_peer; do
    sed -i "s/^const bool $v;/bool $v;\nmodule_param($v, bool, 0644);/" "$out/siw_main.c"
    sed -i "s/^extern const bool $v;/extern bool $v;/" "$out/siw.h"
  done
  sed -i 's/^u_char mpa_version = MPA_REVISION_2;/&\nmodule_param(mpa_version, byte, 0644);/' \
    "$out/siw_main.c"
  # rtr_type is a __be16: write 128 (Write RTR), 64 (Read RTR) or 192 (both) on little endian.
  sed -i 's/^static __be16 rtr_type = .*;/&\nmodule_param(rtr_type, ushort, 0644);/' "$out/siw_cm.c"
  grep -q 'module_param(rtr_type' "$out/siw_cm.c" || return 1
  [ "$(grep -c '^module_param(' "$out/siw_main.c")" = 4 ] || return 1
  if [ -n "$make_fn" ]; then
    "$make_fn" "$out" >"$out.log" 2>&1
  else
    make -C "/lib/modules/$kver/build" M="$out" CONFIG_RDMA_SIW=m -j2 modules >"$out.log" 2>&1
  fi && [ -f "$out/siw.ko" ]
}
