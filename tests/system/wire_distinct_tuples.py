#!/usr/bin/env python3
"""wire_distinct_tuples.py IN OUT: copy a pcapng capture, giving every TCP connection that
reuses the 4-tuple of an earlier one in the capture an initiator port of its own.

Why: Wireshark keeps per-conversation state, and the iWARP MPA dissector's (MPA mode, CRC and
Markers negotiated) is kept across a reused 4-tuple, so a later connection on the same
addresses and ports is decoded with the earlier one's settings and its MPA Request and Reply
are taken for FPDUs. A connect-on-RTR initiator takes a random privileged source port and a
connection closed by a reset leaves no TIME-WAIT, so a capture of several sessions can hold
two connections on one 4-tuple.

A new connection on a known 4-tuple is a SYN without ACK, with a sequence number other than
that of the tuple's previous SYN (not a retransmission), after any earlier frame of that tuple. Its initiator port, and that of every later frame of the connection in either
direction, is replaced by a port no frame of the capture uses; the TCP checksum is adjusted
(RFC 1624). Ethernet (as captured on lo) and raw IP link types; IPv4 and IPv6.
Prints one line per connection moved to stderr.
"""
import ipaddress
import struct
import sys

SHB, IDB, EPB = 0x0A0D0D0A, 1, 6
LINK_ETHERNET, LINK_RAW = 1, 101


def tcp_offsets(link, data):
    """(ip version, src, dst, offset of the TCP header) of a TCP frame, else None."""
    if link == LINK_ETHERNET:
        if len(data) < 14:
            return None
        ethertype = struct.unpack_from("!H", data, 12)[0]
        off = 14
        if ethertype not in (0x0800, 0x86DD):
            return None
    elif link == LINK_RAW:
        off = 0
    else:
        return None
    if len(data) < off + 1:
        return None
    version = data[off] >> 4
    if version == 4 and len(data) >= off + 20:
        ihl = (data[off] & 0x0F) * 4
        if data[off + 9] != 6:
            return None
        return 4, bytes(data[off + 12:off + 16]), bytes(data[off + 16:off + 20]), off + ihl
    # IPv6 without extension headers: the only kind the tests send.
    if version == 6 and len(data) >= off + 40 and data[off + 6] == 6:
        return 6, bytes(data[off + 8:off + 24]), bytes(data[off + 24:off + 40]), off + 40
    return None


def csum_replace(csum, old, new):
    """RFC 1624 eqn. 3: HC' = ~(~HC + ~m + m')."""
    s = (~csum & 0xFFFF) + (~old & 0xFFFF) + new
    s = (s & 0xFFFF) + (s >> 16)
    s = (s & 0xFFFF) + (s >> 16)
    return ~s & 0xFFFF


def blocks(buf):
    off = 0
    endian = "<"
    while off + 12 <= len(buf):
        btype = struct.unpack_from(endian + "I", buf, off)[0]
        if btype == SHB:
            magic = struct.unpack_from("<I", buf, off + 8)[0]
            endian = "<" if magic == 0x1A2B3C4D else ">"
        blen = struct.unpack_from(endian + "I", buf, off + 4)[0]
        if blen < 12 or off + blen > len(buf):
            break  # a block cut by the end of the capture: copied as it is
        yield endian, btype, off, blen
        off += blen


def main():
    src, dst = sys.argv[1], sys.argv[2]
    buf = bytearray(open(src, "rb").read())
    frames = []  # (offset of the TCP header in buf, ip version, saddr, daddr)
    links = []
    for endian, btype, off, _ in blocks(buf):
        if btype == SHB:
            links = []
        elif btype == IDB:
            links.append(struct.unpack_from(endian + "H", buf, off + 8)[0])
        elif btype == EPB:
            ifid, _, _, caplen = struct.unpack_from(endian + "IIII", buf, off + 8)
            start = off + 28
            if ifid >= len(links):
                continue
            data = memoryview(buf)[start:start + caplen]
            t = tcp_offsets(links[ifid], data)
            if t and caplen >= t[3] + 20:
                frames.append((start + t[3], t[0], t[1], t[2]))
    used = set()
    for tcp, _, _, _ in frames:
        used.update(struct.unpack_from("!HH", buf, tcp))
    seen = set()  # 4-tuples (unordered) with a frame so far
    syn_seq = {}  # 4-tuple -> sequence number of its latest SYN (a retransmission repeats it)
    moved = {}  # 4-tuple -> (initiator address, its original port, its new port)
    spare = 65535
    for tcp, ver, saddr, daddr in frames:
        sport, dport = struct.unpack_from("!HH", buf, tcp)
        flags = buf[tcp + 13]
        key = frozenset(((saddr, sport), (daddr, dport)))
        seq = struct.unpack_from("!I", buf, tcp + 4)[0]
        syn = flags & 0x02 and not flags & 0x10
        if syn and key in seen and syn_seq.get(key) != seq:
            while spare in used:
                spare -= 1
            if spare < 1024:
                sys.exit("wire_distinct_tuples: no unused port left")
            used.add(spare)
            moved[key] = (saddr, sport, spare)
            peer = ipaddress.ip_address(daddr)
            sys.stderr.write("reused 4-tuple %s:%d -> %s:%d: this connection's initiator port "
                             "is %d in the decoded capture\n" % (
                                 ipaddress.ip_address(saddr), sport, peer, dport, spare))
        seen.add(key)
        if syn:
            syn_seq[key] = seq
        if key not in moved:
            continue
        addr, old, new = moved[key]
        field = 0 if (saddr, sport) == (addr, old) else 2
        csum = struct.unpack_from("!H", buf, tcp + 16)[0]
        struct.pack_into("!H", buf, tcp + field, new)
        struct.pack_into("!H", buf, tcp + 16, csum_replace(csum, old, new))
    open(dst, "wb").write(buf)


if __name__ == "__main__":
    main()
