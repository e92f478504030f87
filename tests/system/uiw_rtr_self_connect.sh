#!/usr/bin/env bash
# needs: uiw
# timeout: 300
# Connect-on-RTR never connects a socket to itself (kernel/uiw_rtr.c, uiw_rtr_sock_connect). The
# initiator connects from a privileged port to the service port (747) of the responder's
# address; when both QPs share an address and the responder does not listen yet, a source port
# of 747 would be TCP's self-connect (simultaneous open with itself): the initiator read its own
# Request as the Reply and failed with EPROTO ("connection failed: Protocol error"; once in 512
# attempts, about every other pyverbs upstream run). Here every privileged source port of
# uiw0's address but 747 and the six above it is held (or in TIME-WAIT), so a port picked the
# old way is 747 almost always; uiw_rtr_pairs_check then connects three QP pairs on uiw0, each
# initiator moving to RTR before its responder, and verifies a Send on each.
source "$UIW_ROOT/tests/system/lib.sh"

test_program uiw_rtr_pairs_check rtr_pairs
service=$(cat /sys/module/uiw/parameters/rtr_port)
[ "$service" = 747 ] || fail "rtr_port is $service, this test assumes 747"
# uiw.ko binds without SO_REUSEADDR: a port bound by any socket is refused to it, and so is one
# an earlier test's connection left in TIME-WAIT (which this holder cannot bind either).
cat >hold_ports.py <<'PY'
import errno, socket, sys, time
addr, free = sys.argv[1], set(range(747, 754))
held, busy = [], 0
for port in range(512, 1024):
    if port not in free:
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            s.bind((addr, port))
            held.append(s)
        except OSError as e:
            if e.errno != errno.EADDRINUSE:
                raise
            s.close()
            busy += 1
print("holding", len(held), "ports,", busy, "busy already", flush=True)
time.sleep(600)
PY
start_bg port-holder /usr/bin/python3 hold_ports.py "$UIW0_ADDR"
poll_until 120 0.1 said_or_ended port-holder '^holding' || true
log_has port-holder '^holding' ||
  { show port-holder; fail "the port holder stopped or did not say what it holds"; }
read -r _ held _ busy _ <port-holder.log
[ $((held + busy)) = 505 ] || { show port-holder; fail "the port holder did not account for 505 ports"; }
run_fg pairs 240 ./rtr_pairs "$UIW0_DEV" 3
expect pairs '^PASS$'
show pairs
