#!/usr/bin/env bash
# needs: uiw
# uiw.ko MPA negotiation against hand-made peers (RFC 5044 §7.1, RFC 6581) and its timeouts:
# a Python peer sends byte-exact Request/Reply frames (well-formed, malformed, unacceptable,
# or none) to a uiw listener and to a uiw initiator (kernel/tests/uiw_cm_probe). Checks that
# the kernel reads exactly the MPA frame even when the peer's first bytes arrive in the same
# segment, rejects with the R bit what it cannot accept, closes what is malformed, and that
# every wait ends (5 s for a Request, 10 s for a Reply or the TCP handshake).
source "$UIW_ROOT/tests/system/lib.sh"

dmesg_start=$(dmesg | wc -l)
test_program uiw_cm_probe probe
dev=$UIW1_DEV addr=$UIW1_ADDR

cat >peer.py <<'EOF'
import socket, struct, sys, time

REQ, REP = b"MPA ID Req Frame", b"MPA ID Rep Frame"
C_BYTES, S_BYTES = b"UIW-FIRST-FPDU-FROM-CLIENT", b"UIW-FIRST-FPDU-FROM-SERVER"
M, C, R, ENH = 0x8000, 0x4000, 0x2000, 0x1000


def frame(key, bits, pd=b""):
    # Key (16) | M C R Res Rev (16 bits) | PD_Length (16 bits) | private data
    return key + struct.pack(">HH", bits, len(pd)) + pd


def v2(ird, ord_, p2p=False, send=False, write=False, read=False):
    # |A|B| IRD(14) |C|D| ORD(14)|  (RFC 6581)
    return struct.pack(">HH", ird | (0x8000 if p2p else 0) | (0x4000 if send else 0),
                       ord_ | (0x8000 if write else 0) | (0x4000 if read else 0))


def recv_exact(s, n):
    b = b""
    while len(b) < n:
        c = s.recv(n - len(b))
        if not c:
            raise EOFError(len(b))
        b += c
    return b


def read_frame(s, key):
    h = recv_exact(s, 20)
    bits, pd_len = struct.unpack(">HH", h[16:])
    pd = recv_exact(s, pd_len)
    print("frame: key %s bits 0x%04x pd_len %d" % ("ok" if h[:16] == key else h[:16], bits, pd_len))
    if bits & ENH and pd_len >= 4:
        ird, ord_ = struct.unpack(">HH", pd[:4])
        print("v2: ird %d ord %d p2p %d send %d write %d read %d" % (
            ird & 0x3fff, ord_ & 0x3fff, ird >> 15, (ird >> 14) & 1, ord_ >> 15, (ord_ >> 14) & 1))
        pd = pd[4:]
    print("pd: %s" % pd.decode(errors="replace"))
    return bits


def wait_eof(s, limit):
    t0 = time.time()
    s.settimeout(limit)
    try:
        while s.recv(100):
            pass
        print("eof after %.1f s" % (time.time() - t0))
    except socket.timeout:
        print("no eof within %d s" % limit)
    except ConnectionResetError:
        print("reset after %.1f s" % (time.time() - t0))


mode, host, port = sys.argv[1], sys.argv[2], int(sys.argv[3])
fam = socket.AF_INET6 if ":" in host else socket.AF_INET
if mode.startswith("srv-"):
    ls = socket.socket(fam)
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind((host, port))
    ls.listen()
    print("listening", flush=True)
    s, _ = ls.accept()
    bits = read_frame(s, REQ)
    if mode == "srv-mute":
        wait_eof(s, 30)
    elif mode == "srv-badkey":
        s.sendall(b"MPA ID Bad Frame" + struct.pack(">HH", 2, 0))
        wait_eof(s, 30)
    elif mode == "srv-reject":
        s.sendall(frame(REP, R | ENH | 2, v2(0, 0) + b"go-away"))
        wait_eof(s, 30)
    elif mode == "srv-good":
        # The Reply and the first stream bytes in one segment: the initiator must stop
        # reading at the end of the Reply.
        s.sendall(frame(REP, ENH | 2, v2(8, 2, p2p=True, write=True) + b"reply-from-sv") + S_BYTES)
        print("stream:", "ok" if recv_exact(s, len(C_BYTES)) == C_BYTES else "MISMATCH")
        wait_eof(s, 30)
else:
    s = socket.create_connection((host, port))
    if mode == "cli-silent":
        pass
    elif mode == "cli-garbage":
        s.sendall(b"GET / HTTP/1.0\r\n\r\n..")
    elif mode == "cli-bigpd":
        s.sendall(REQ + struct.pack(">HH", 1, 600))
    elif mode == "cli-markers":
        s.sendall(frame(REQ, M | 1, b"marker-please"))
        read_frame(s, REP)
    elif mode == "cli-sendrtr":
        s.sendall(frame(REQ, ENH | 2, v2(4, 4, p2p=True, send=True)))
        read_frame(s, REP)
    elif mode == "cli-rev3":
        s.sendall(frame(REQ, 3))
    elif mode == "cli-good":
        # The Request and the first stream bytes in one segment.
        s.sendall(frame(REQ, C | ENH | 2, v2(2, 8, p2p=True, write=True, read=True) + b"hello-server") + C_BYTES)
        read_frame(s, REP)
        print("stream:", "ok" if recv_exact(s, len(S_BYTES)) == S_BYTES else "MISMATCH")
        s.shutdown(socket.SHUT_WR)
    wait_eof(s, 20)
EOF

# Passive side: a uiw listener against hand-made initiators.
start_bg srv ./probe server "$dev" "$addr" 7401
wait_cm_listen 7401

run_fg silent 90 /usr/bin/python3 peer.py cli-silent "$addr" 7401
expect silent '^(eof|reset) after [4-9]\.' "a silent initiator was not closed after the 5 s MPA Request timeout"
run_fg garbage 90 /usr/bin/python3 peer.py cli-garbage "$addr" 7401
expect garbage '^(eof|reset) after [0-2]\.' "a non-MPA initiator was not closed at once"
run_fg bigpd 90 /usr/bin/python3 peer.py cli-bigpd "$addr" 7401
expect bigpd '^(eof|reset) after [0-2]\.' "PD_Length 600 (> 512) was not closed at once"
run_fg rev3 90 /usr/bin/python3 peer.py cli-rev3 "$addr" 7401
expect rev3 '^(eof|reset) after [0-2]\.' "MPA revision 3 was not closed"
# uiw honours a peer's Markers by default (RFC 5044 §4.3); the refusal policy (mpa_markers bit 4)
# must answer a Request with M by a Reply with R set.
echo 4 >/sys/module/uiw/parameters/mpa_markers
run_fg markers 90 /usr/bin/python3 peer.py cli-markers "$addr" 7401
echo 0 >/sys/module/uiw/parameters/mpa_markers
expect markers '^frame: key ok bits 0x2001 pd_len 0$' "Markers refused: no Reply with R set (rev 1)"
run_fg sendrtr 90 /usr/bin/python3 peer.py cli-sendrtr "$addr" 7401
expect sendrtr '^frame: key ok bits 0x3002 pd_len 4$' "Send-only RTR: no enhanced Reply with R set"
grep -q '^event: 4 ' srv.log && { show srv; fail "an unacceptable Request reached the application"; }

run_fg good 120 /usr/bin/python3 peer.py cli-good "$addr" 7401
wait_bg srv 30
# Reply: rev 2, enhanced, CRC echoed (the Request asked), IRD 8 >= the peer's ORD 8,
# ORD 2 <= the peer's IRD 2, P2P with Write RTR, the application's private data.
expect good '^frame: key ok bits 0x5002 pd_len 17$' "Reply header"
expect good '^v2: ird 8 ord 2 p2p 1 send 0 write 1 read 0$' "Reply IRD/ORD word"
expect good '^pd: reply-from-sv$'
expect good '^stream: ok$' "the initiator did not see the responder's first bytes"
expect srv '^stream: ok$' "the kernel consumed bytes behind the MPA Request"
expect srv '^info: flags 0x7 .* ird 8 ord 2 rev 2 rtr 1 ' "responder conn_info"
expect srv '^event: 10 ' "no DISCONNECTED after the initiator closed"

# Active side: a uiw initiator against hand-made responders.
# against_peer NAME MODE PORT: Python responder NAME (MODE), uiw initiator NAME-c.
against_peer() {
  start_bg "$1" /usr/bin/python3 peer.py "$2" "$addr" "$3"
  wait_log "$1" listening 60
  run_fg "$1-c" 120 ./probe client "$dev" "$addr" "$addr" "$3"
}

against_peer mute srv-mute 7402
expect mute-c '^event: 7 status -110 ' "no UNREACHABLE/-ETIMEDOUT after the 10 s MPA Reply timeout"
# The Request the initiator sent: rev 2, enhanced, IRD 2 / ORD 8, P2P offering Write and Read.
expect mute '^frame: key ok bits 0x1002 pd_len 16$' "Request header"
expect mute '^v2: ird 2 ord 8 p2p 1 send 0 write 1 read 1$' "Request IRD/ORD word"
expect mute '^pd: hello-server$'
kill "${BG_PID[mute]}" 2>/dev/null || true

against_peer badkey srv-badkey 7403
expect badkey-c '^event: 6 status -71 ' "a bad Reply key did not give CONNECT_ERROR/-EPROTO"
kill "${BG_PID[badkey]}" 2>/dev/null || true

against_peer rej srv-reject 7404
expect rej-c '^event: 8 status -111 ' "a Reply with R set did not give REJECTED"
expect rej-c '^rejected-data: go-away$'
kill "${BG_PID[rej]}" 2>/dev/null || true

against_peer good2 srv-good 7405
wait_bg good2 30
expect good2-c '^reply-data: reply-from-sv$'
expect good2-c '^info: flags 0xe .* ird 2 ord 8 rev 2 rtr 1 ' "initiator conn_info"
expect good2-c '^stream: ok$' "the kernel consumed bytes behind the MPA Reply"
expect good2 '^stream: ok$'
expect good2-c '^event: 10 ' "no DISCONNECTED"

# TCP handshake timeout: SYNs to this port vanish. rdma_connect returns at once (the connect
# is non-blocking) and UNREACHABLE/-ETIMEDOUT comes after the 10 s connect timeout.
tc qdisc add dev lo root handle 1: prio
tc filter add dev lo parent 1: protocol ip u32 match ip dport 7406 0xffff action drop
start_bg syn ./probe client "$dev" "$addr" "$addr" 7406
sleep 4
expect syn '^connect: issued$' "rdma_connect blocked during the TCP handshake"
grep -q '^event: 7 ' syn.log && { show syn; fail "the connect timed out before 10 s"; }
wait_bg syn 30
tc qdisc del dev lo root
expect syn '^event: 7 status -110 ' "no UNREACHABLE/-ETIMEDOUT after the TCP connect timeout"

if dmesg | tail -n +"$((dmesg_start + 1))" | grep -E 'BUG|WARNING|Oops|Call Trace'; then
  fail "kernel complained (above)"
fi
echo "PASS: uiw MPA negotiation"
