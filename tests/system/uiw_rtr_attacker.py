#!/usr/bin/env python3
"""An unprivileged local user against uiw.ko's connect-on-RTR service (tests/system/uiw_rtr_attack.sh).

usage: uiw_rtr_attacker.py INITIATOR_ADDR RESPONDER_ADDR RTR_PORT SECONDS IDLE STOP_FILE

For SECONDS, or until STOP_FILE exists: binds the service port (on the responder's, the initiator's and the wildcard
address) and a privileged source port, which must all fail with EACCES; keeps IDLE connections
to the service open (renewing any that die); and sends hand-made MPA Requests from the
initiator's address naming every pair of QPNs `rdma res show qp` lists, counting the bytes the
service answers. Prints one summary line, "attacker: ...", and exits 0 when it could run.
"""
import errno
import json
import os
import socket
import struct
import subprocess
import sys
import time

init_addr, resp_addr, port, secs, idle = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4]), int(sys.argv[5])
stop_file = sys.argv[6]


def gid(addr):
    return b"\0" * 10 + b"\xff\xff" + socket.inet_aton(addr)


def request(src_qpn, dst_qpn):
    """A well-formed connect-on-RTR MPA Request (RFC 6581 enhanced, peer-to-peer, Write RTR)."""
    pd = struct.pack(">IBBHII", 0x55495752, 1, 1, 0, src_qpn, dst_qpn) + gid(init_addr) + gid(resp_addr)
    v2 = struct.pack(">HH", 0x8000 | 4, 0x8000 | 4)
    body = v2 + pd
    return b"MPA ID Req Frame" + struct.pack(">BBH", 0x10, 2, len(body)) + body


def qpns():
    try:
        out = subprocess.run(["rdma", "-j", "res", "show", "qp"], capture_output=True, text=True, timeout=10).stdout
        return sorted({q["lqpn"] for q in json.loads(out or "[]") if q.get("ifname", "").startswith("uiw")})
    except (subprocess.SubprocessError, ValueError, KeyError):
        return []


binds = {}
for name, addr, p in (("service port on the responder address", resp_addr, port),
                      ("service port on the initiator address", init_addr, port),
                      ("service port on the wildcard address", "0.0.0.0", port),
                      ("privileged source port 600", init_addr, 600)):
    s = socket.socket()
    try:
        s.bind((addr, p))
        s.listen(1)
        binds[name] = "BOUND"
    except OSError as e:
        binds[name] = errno.errorcode.get(e.errno, str(e.errno))
    finally:
        s.close()

idle_socks, requests, answered, answered_bytes, seen_qpns = [], 0, 0, 0, set()
end = time.time() + secs
print("attacker: watching", flush=True)  # the victim starts only now (uiw_rtr_attack.sh)
while time.time() < end and not os.path.exists(stop_file):
    # Keep IDLE connections open to the service.
    idle_socks = [s for s in idle_socks if s.fileno() >= 0]
    while len(idle_socks) < idle:
        s = socket.socket()
        s.settimeout(2)
        try:
            s.bind((init_addr, 0))
            s.connect((resp_addr, port))
            idle_socks.append(s)
        except OSError:
            s.close()
            break
    for s in list(idle_socks):
        s.setblocking(False)
        try:
            if s.recv(1) == b"":
                raise OSError("closed")
        except BlockingIOError:
            continue
        except OSError:
            s.close()
            idle_socks.remove(s)
    # A Request for every pair of QPNs the attacker can see.
    ids = qpns()
    seen_qpns.update(ids)
    for a in ids:
        for b in ids:
            if a == b:
                continue
            s = socket.socket()
            s.settimeout(2)
            try:
                s.bind((init_addr, 0))
                s.connect((resp_addr, port))
                s.sendall(request(a, b))
                requests += 1
                data = s.recv(4096)
                if data:
                    answered += 1
                    answered_bytes += len(data)
            except OSError:
                requests += 1
            finally:
                s.close()
    time.sleep(0.05)

print("attacker: binds: " + "; ".join(f"{k}: {v}" for k, v in binds.items()))
print(f"attacker: requests {requests} naming QPNs {sorted(seen_qpns)}, answered {answered} "
      f"({answered_bytes} bytes), idle connections held at the end {len(idle_socks)}")
