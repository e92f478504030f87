#!/usr/bin/env bash
# needs: uiw
# timeout: 600
# The socket uiw.ko hands to a QP's owner carries nothing of uiw's that the owner can reach
# (providers/uiw/tests/uiw_sock_attack.c): the owner resets it with connect(AF_UNSPEC) (its QP
# gets QP fatal, the privileged connect-on-RTR port is released), listens on it and accepts
# clients, then the QP is destroyed (initiator's socket, then responder's) or every context is
# closed and uiw.ko unloaded; then the children change state. Before the fix each child
# inherited uiw's sk_state_change and a cep pointer without a reference: a general protection
# fault at 0x6b6b6b6b6b6b6b6b under slub_debug=FZP, or a jump into unloaded code. The runner
# fails the test on any kernel complaint; the module is reloaded and the links re-added.
source "$UIW_ROOT/tests/system/lib.sh"

test_program uiw_sock_attack sock_attack
grep -q 'slub_debug=FZP' /proc/cmdline || fail "the guest did not boot with slub_debug=FZP"

for side in a b; do
  run_fg "destroy-$side" 120 ./sock_attack "$UIW0_DEV" 0 "$UIW1_DEV" 0 "$side" destroy
  expect "destroy-$side" '^PASS$'
  show "destroy-$side"
done

# The same with uiw.ko unloaded while the hijacked listener and a child live.
start_bg rmmod-case ./sock_attack "$UIW0_DEV" 0 "$UIW1_DEV" 0 a rmmod "$PWD/go"
poll_until 120 0.2 said_or_ended rmmod-case '^READY$' || true
grep -q '^READY$' rmmod-case.log || { show rmmod-case; fail "the rmmod case did not get ready"; }
rdma link del "$UIW0_DEV" || fail "rdma link del $UIW0_DEV"
rdma link del "$UIW1_DEV" || fail "rdma link del $UIW1_DEV"
rmmod uiw || fail "rmmod uiw with a hijacked socket alive"
log "uiw.ko unloaded; the hijacked listener and its child live on"
touch go
wait_bg rmmod-case 120
expect rmmod-case '^PASS$'
show rmmod-case
insmod "$UIW_VM_UIW_KO" || fail "insmod $UIW_VM_UIW_KO"
rdma link add "$UIW0_DEV" type uiw netdev "$UIW0_NETDEV" || fail "rdma link add $UIW0_DEV"
rdma link add "$UIW1_DEV" type uiw netdev "$UIW1_NETDEV" || fail "rdma link add $UIW1_DEV"
echo "PASS: hijacked handed sockets (initiator, responder, after rmmod): no kernel complaint"
