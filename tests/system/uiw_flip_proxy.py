#!/usr/bin/env python3
"""A TCP proxy that corrupts one octet of an MPA stream (tests/system/uiw_flip_proxy.sh).

usage: uiw_flip_proxy.py LISTEN_ADDR LISTEN_PORT SERVER_ADDR SERVER_PORT

Accepts one connection, connects to the server and relays both ways, frame by frame: the MPA
Request / Reply (RFC 5044 §7.1), then FPDUs (2-octet ULPDU_Length, ULPDU, pad to 4, 4-octet
CRC; no Markers). In the first tagged FPDU (an RDMA Write segment) from the client with a
ULPDU over 1000 octets, the payload octet 100 past the 14-octet tagged DDP/RDMAP header is
inverted, and TCP carries it with a valid checksum. Prints "flipped ..." for it, and
"terminate: layer L etype E code C" for each RDMAP Terminate (RFC 5040 §4.8) the server sends.
"""
import socket
import sys
import threading

laddr, lport, saddr, sport = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4])


def say(line):
    print(line, flush=True)


def frames(data, state):
    """Splits off the complete frames at the front of data; returns (frames, rest)."""
    out = []
    while True:
        if not state["mpa_done"]:
            if len(data) < 20:
                break
            n = 20 + int.from_bytes(data[18:20], "big")  # key, flags, rev, PD_Length, PD
            if len(data) < n:
                break
            state["mpa_done"] = True
        else:
            if len(data) < 2:
                break
            ulpdu = int.from_bytes(data[0:2], "big")
            n = (2 + ulpdu + 3) // 4 * 4 + 4
            if len(data) < n:
                break
        out.append(bytearray(data[:n]))
        data = data[n:]
    return out, data


def relay(src, dst, client_side):
    state = {"mpa_done": False, "offset": 0, "flipped": False}
    pending = b""
    while True:
        try:
            chunk = src.recv(1 << 16)
        except OSError:
            chunk = b""
        if not chunk:
            break
        done, pending = frames(pending + chunk, state)
        for f in done:
            is_fpdu = state["offset"] > 0  # the first frame is the MPA Request or Reply
            if is_fpdu and len(f) >= 4:
                ulpdu = int.from_bytes(f[0:2], "big")
                tagged = f[2] & 0x80
                if client_side and tagged and ulpdu > 1000 and not state["flipped"]:
                    at = 2 + 14 + 100
                    f[at] ^= 0xFF
                    state["flipped"] = True
                    say(f"flipped the octet at stream offset {state['offset'] + at} "
                        f"(payload octet 100 of a tagged FPDU, ULPDU_Length {ulpdu})")
                if not client_side and not tagged and ulpdu >= 20 and (f[3] & 0x0F) == 7:
                    ctl = f[2 + 18:2 + 20]  # Terminate Control after the 18-octet untagged header
                    say(f"terminate: layer {ctl[0] >> 4} etype {ctl[0] & 0x0F} code {ctl[1]}")
            state["offset"] += len(f)
            try:
                dst.sendall(f)
            except OSError:
                return
    try:
        dst.shutdown(socket.SHUT_WR)
    except OSError:
        pass


ls = socket.socket()
ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
ls.bind((laddr, lport))
ls.listen(1)
say(f"listening on {laddr}:{lport}")
c, _ = ls.accept()
s = socket.create_connection((saddr, sport))
for sk in (c, s):
    sk.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
t = threading.Thread(target=relay, args=(s, c, False))
t.start()
relay(c, s, True)
t.join(120)
say("relay ended")
