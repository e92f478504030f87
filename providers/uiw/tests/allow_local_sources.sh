# shellcheck shell=bash
# Sourced by tests/system/uiw_*rping.sh (inside the test VM). The topology's uiw veth pair lives in
# one network namespace, so rdma_cm's address resolution from an address bound to one uiw device
# (route lookup with oif = its veth) ARPs over the pair, and the other end drops that ARP as a
# martian (its source is a local address). allow_local_sources sets accept_local=1 and
# rp_filter=0 on the pair (and "all") and restores the old values when the test exits, before
# what the caller's EXIT trap did already (which it keeps).
# The values are read and written in /proc/sys with builtins: a sysctl process costs 0.1-0.3 s
# under the test VM's TCG, and nearly every system test comes here.
allow_local_sources() {
  local nd k
  declare -gA UIW_SAVED_SYSCTL=()
  for nd in all "$UIW0_NETDEV" "$UIW1_NETDEV"; do
    for k in accept_local rp_filter; do
      read -r "UIW_SAVED_SYSCTL[$nd/$k]" <"/proc/sys/net/ipv4/conf/$nd/$k"
    done
    echo 1 >"/proc/sys/net/ipv4/conf/$nd/accept_local"
    echo 0 >"/proc/sys/net/ipv4/conf/$nd/rp_filter"
  done
  # `trap -p` prints the caller's EXIT trap quoted for the shell: let the shell unquote it.
  eval "set -- $(trap -p EXIT)"
  # shellcheck disable=SC2064 # the earlier trap is put in now, as text
  trap "{ allow_local_restore; } || true${3:+; $3}" EXIT
}

allow_local_restore() {
  local k
  for k in "${!UIW_SAVED_SYSCTL[@]}"; do
    echo "${UIW_SAVED_SYSCTL[$k]}" >"/proc/sys/net/ipv4/conf/$k"
  done
}
