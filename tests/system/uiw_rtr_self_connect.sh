#!/usr/bin/env bash
# needs: uiw
# timeout: 300
# Connect-on-RTR never connects a socket to itself (kernel/uiw_rtr.c, uiw_rtr_sock_connect). The
# initiator connects from a privileged port to the service port (747) of the responder's
# address; when both QPs share an address and the responder does not listen yet, a source port
# of 747 would be TCP's self-connect (simultaneous open with itself): the initiator read its own
# Request as the Reply and failed with EPROTO ("connection failed: Protocol error"; once in 512
# attempts, about every other pyverbs upstream run). Here every privileged source port of
# uiw0's address but 747 and the six above it is taken, so a port picked the old way is 747
# almost always; uiw_rtr_pairs_check then connects three QP pairs on uiw0, each initiator
# moving to RTR before its responder, and verifies a Send on each.
source "$UIW_ROOT/tests/system/lib.sh"

gcc -O2 -Wall -Wextra -Werror -o rtr_pairs "$UIW_ROOT/providers/uiw/tests/uiw_rtr_pairs_check.c" \
  -libverbs || fail "cannot build uiw_rtr_pairs_check"
service=$(cat /sys/module/uiw/parameters/rtr_port)
[ "$service" = 747 ] || fail "rtr_port is $service, this test assumes 747"
# Ports without SO_REUSEADDR: uiw.ko's bind to any of them fails with EADDRINUSE.
cat >hold_ports.py <<'PY'
import socket, sys, time
addr, free = sys.argv[1], set(range(747, 754))
held = []
for port in range(512, 1024):
    if port not in free:
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.bind((addr, port))
        held.append(s)
print("holding", len(held), "ports", flush=True)
time.sleep(600)
PY
start_bg port-holder /usr/bin/python3 hold_ports.py "$UIW0_ADDR"
for ((i = 0; i < 100; i++)); do
  grep -q '^holding' port-holder.log && break
  kill -0 "${BG_PID[port-holder]}" 2>/dev/null || { show port-holder; fail "the port holder stopped"; }
  sleep 0.1
done
expect port-holder '^holding 505 ports' "the port holder did not take 505 ports"
run_fg pairs 240 ./rtr_pairs "$UIW0_DEV" 3
expect pairs '^PASS$'
show pairs
