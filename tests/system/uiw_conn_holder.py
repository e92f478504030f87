#!/usr/bin/env python3
"""Holds idle TCP connections to a uiw listener (tests/system/uiw_listen_flood.sh).

usage: uiw_conn_holder.py DST_ADDR DST_PORT COUNT SECONDS STOP_FILE SRC_ADDR [SRC_PORT_MIN SRC_PORT_MAX]

For SECONDS, or until STOP_FILE exists: keeps COUNT connections from SRC_ADDR to
DST_ADDR:DST_PORT open without sending a byte (an MPA Request never comes), renewing every one
that the listener drops; with a source port range (root: connect-on-RTR admits only privileged
source ports) binds each to a port of it. Prints "holder: started" when it begins to connect,
then one summary line, "holder: ...", and exits 0.
"""
import os
import socket
import sys
import time

dst, dport, count, secs, stop_file, src = (sys.argv[1], int(sys.argv[2]), int(sys.argv[3]),
                                           float(sys.argv[4]), sys.argv[5], sys.argv[6])
ports = range(int(sys.argv[7]), int(sys.argv[8]) + 1) if len(sys.argv) > 8 else None

held, opened, dropped, next_port, most = [], 0, 0, 0, 0
end = time.time() + secs
print("holder: started", flush=True)
while time.time() < end and not os.path.exists(stop_file):
    while len(held) < count and time.time() < end:
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.settimeout(1)
        try:
            if ports:
                next_port = (next_port + 1) % len(ports)
                s.bind((src, ports[next_port]))
            else:
                s.bind((src, 0))
            s.connect((dst, dport))
            s.setblocking(False)
            held.append(s)
            opened += 1
        except OSError:
            s.close()
            time.sleep(0.02)
            break
    most = max(most, len(held))
    for s in list(held):
        try:
            if s.recv(1) == b"":
                raise OSError("closed")
        except BlockingIOError:
            continue
        except OSError:
            s.close()
            held.remove(s)
            dropped += 1
    time.sleep(0.05)
print(f"holder: {count} wanted, at most {most} held at once, {opened} opened, {dropped} dropped by the listener")
