#!/usr/bin/env bash
# needs: uiw
# timeout: 600
# Hostile peers against uiw's passive DDP Stream Session setup (RFC 5043 §5.2.3, §6, §11.1;
# kernel/uiw_sctp.c). An rping server listens on uiw0 in SCTP mode; a raw SCTP peer (python,
# below) opens an association to its port and sends one bad first message per case. Outcomes:
#   bad function code, private data over 512 octets, Terminate with private data, wrong PPID:
#     the chunk fits no legal session sequence, so "the DDP Stream Session MUST be terminated"
#     (§6.1): uiw answers with a DDP Stream Session Terminate (PPID 17, DDP-SSN 0, Function Code
#     4, no private data, §5.2.3) as an unordered chunk (§10), then ends the association.
#   no Adaptation Layer Indication in the peer's INIT: "DDP procedures MUST NOT be performed
#     upon this association" (§11.1): no Session Control message at all, the association ends.
# (uiw's own Adaptation Indication in INIT-ACK is checked by sctp_capture.) The
# rping server never sees a connection request: afterwards an ordinary rping client connects to
# the same server and verifies its data.
source "$UIW_ROOT/tests/system/lib.sh"
source "$UIW_ROOT/providers/uiw/tests/allow_local_sources.sh"
source "$UIW_ROOT/tests/system/sctp_lib.bash"
allow_local_sources
sctp_mode

port=18750
start_bg server rping -s -v -V -C 5 -S 64 -a "$UIW0_ADDR" -p $port
wait_cm_listen $port

cat >peer.py <<'EOF'
# A raw SCTP peer: one association per case, one first message, then reads uiw's answer.
import socket, struct, sys

SOL_SCTP = socket.IPPROTO_SCTP      # 132
SCTP_ADAPTATION_LAYER = 7           # struct sctp_setadaptation { u32 indication }
SCTP_RECVRCVINFO = 32               # int: deliver struct sctp_rcvinfo with each message
SCTP_EVENT = 127                    # struct sctp_event { assoc_id s32, type u16, on u8 }
SCTP_ADAPTATION_INDICATION = 0x8006 # notification type (enum sctp_sn_type)
SCTP_SNDINFO, SCTP_RCVINFO = 2, 3   # cmsg types (enum sctp_cmsg_type)
SCTP_UNORDERED = 1
MSG_NOTIFICATION = 0x8000
PPID_SEGMENT, PPID_CONTROL = 16, 17 # RFC 5043 §5.2
FN_INITIATE, FN_TERMINATE = 1, 4    # RFC 5043 §5.2.3

addr, port, case = sys.argv[1], int(sys.argv[2]), sys.argv[3]

def control(fn, pd):
    # DDP-SSN (16) = 0: the first chunk of the session (§6.2) | Function Code (16) | Private Data
    return struct.pack(">HH", 0, fn) + pd

# The IRD/ORD word uiw expects to lead the private data (RFC 6581 layout, uiw_sctp.h): IRD 1, ORD 1.
IRDORD = struct.pack(">HH", 1, 1)
cases = {
    # Function Code 5 is not defined (§5.2.3 defines 1..4).
    "bad_function": (PPID_CONTROL, control(5, IRDORD)),
    # 4 + 600 octets of private data: over "512 bytes in any message" (§5.2.3).
    "pd_over_limit": (PPID_CONTROL, control(FN_INITIATE, IRDORD + bytes(600))),
    # A Terminate "MUST NOT" include private data (§5.2.3): 8 octets here.
    "terminate_pd": (PPID_CONTROL, control(FN_TERMINATE, bytes(range(8)))),
    # A well-formed Initiate under PPID 99: not an adaptation PPID (§5.1, §5.2).
    "wrong_ppid": (99, control(FN_INITIATE, IRDORD)),
    # A well-formed Initiate, but our INIT lacks the Adaptation Layer Indication (§11.1).
    "no_adaptation": (PPID_CONTROL, control(FN_INITIATE, IRDORD)),
}
ppid, first = cases[case]

s = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_SCTP)
if case != "no_adaptation":
    s.setsockopt(SOL_SCTP, SCTP_ADAPTATION_LAYER, struct.pack("=I", 1))  # DDP (§5.1)
s.setsockopt(SOL_SCTP, SCTP_RECVRCVINFO, struct.pack("=i", 1))
s.setsockopt(SOL_SCTP, SCTP_EVENT, struct.pack("=iHBx", 0, SCTP_ADAPTATION_INDICATION, 1))
s.settimeout(60)
s.connect((addr, port))

# struct sctp_sndinfo: sid u16, flags u16, ppid u32 (network order on the wire), context, assoc_id
sndinfo = struct.pack("=HHIIi", 0, SCTP_UNORDERED, socket.htonl(ppid), 0, 0)
s.sendmsg([first], [(SOL_SCTP, SCTP_SNDINFO, sndinfo)])

peer_adaptation, answers, end = None, [], None
while True:
    try:
        data, anc, flags, _ = s.recvmsg(4096, socket.CMSG_SPACE(28))
    except (ConnectionResetError, BrokenPipeError) as e:
        # An ABORT is reported before messages still queued (Linux returns the socket error
        # first): keep reading what arrived before it.
        end = "reset"
        s.settimeout(5)
        continue
    except socket.timeout:
        end = end or "timeout"
        break
    if not data and not (flags & MSG_NOTIFICATION):
        end = end or "eof"
        break
    if flags & MSG_NOTIFICATION:
        # struct sctp_adaptation_event: type u16, flags u16, length u32, indication u32, ...
        ntype, = struct.unpack_from("=H", data)
        if ntype == SCTP_ADAPTATION_INDICATION:
            peer_adaptation, = struct.unpack_from("=I", data, 8)
        continue
    rppid, rflags = None, None
    for level, typ, val in anc:
        if level == SOL_SCTP and typ == SCTP_RCVINFO:
            # struct sctp_rcvinfo: sid u16, ssn u16, flags u16, pad, ppid u32 (network order), ...
            _, _, rflags, rppid = struct.unpack_from("=HHHxxI", val)
            rppid = socket.ntohl(rppid)
    answers.append((rppid, rflags, data.hex()))

print(f"peer_adaptation={peer_adaptation} end={end}")
for a in answers:
    print(f"answer ppid={a[0]} flags={a[1]} data={a[2]}")
EOF

# case NAME WANT: WANT is "terminate" or "silent".
hostile() {
  local name=$1 want=$2 out
  run_fg "peer-$name" 120 /usr/bin/python3 peer.py "$UIW0_ADDR" $port "$name"
  out=$(cat "peer-$name.log")
  log "$name: $(echo "$out" | tr '\n' ';')"
  # The association ends: ABORT (reset) or SHUTDOWN (eof), not a hang.
  echo "$out" | grep -Eq ' end=(reset|eof)$' || fail "$name: the association did not end"
  if [ "$want" = terminate ]; then
    # Exactly one answer: PPID 17, unordered (flags bit 0), DDP-SSN 0000, Function Code 0004.
    [ "$(grep -c '^answer ' "peer-$name.log")" = 1 ] || fail "$name: want exactly one answer"
    grep -q '^answer ppid=17 flags=1 data=00000004$' "peer-$name.log" ||
      fail "$name: the answer is not a Session Terminate"
  else
    ! grep -q '^answer ' "peer-$name.log" || fail "$name: uiw answered a peer without DDP adaptation"
  fi
}

hostile bad_function terminate
hostile pd_over_limit terminate
hostile terminate_pd terminate
hostile wrong_ppid terminate
hostile no_adaptation silent

# The listener survived, and none of the above reached the rping server as a request.
run_fg client 300 rping -c -v -V -C 5 -S 64 -a "$UIW0_ADDR" -I "$UIW1_ADDR" -p $port
wait_bg server 120
[ "$(grep -c 'ping data' client.log)" -ge 5 ] || { show client; fail "rping client: too few pings"; }
echo "PASS: five hostile session-control peers got the RFC 5043 outcome; the server still works"
