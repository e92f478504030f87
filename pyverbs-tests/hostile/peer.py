"""A hostile iWARP peer: raw MPA/DDP/RDMAP over a plain TCP socket, built with uiwwire.

HostilePeer connects to an rdma_cm listener of a uiw device (iWARP rdma_cm private data goes raw
into the MPA Request), negotiates MPA, then sends whatever FPDUs a test wants and reads back what
uiw answers (Terminate, Read Responses) until the connection closes.

ServerProc runs providers/uiw/tests/uiw_hostile_server (the uiw side: guarded regions, posted
receives, one line per event) and collects its output per connection.
"""
import os
import queue
import re
import select
import socket
import subprocess
import threading
import time

import uiwwire as w

# RDMAP control octets (RFC 5040 4.1: RV 01b).
def ctrl(op, rv=1):
    return w.rdmap_control(int(op), rv)


class Region:
    def __init__(self, name, stag, addr, length):
        self.name, self.stag, self.addr, self.len = name, stag, addr, length

    def __repr__(self):
        return f"Region({self.name} stag={self.stag:#x} addr={self.addr:#x} len={self.len})"


def parse_regions(pd):
    """Parses the server's accept private data: "r0=<stag>:<addr>:<len> ..." (hex, hex, dec)."""
    regions = {}
    for m in re.finditer(rb"(r\d)=([0-9a-f]+):([0-9a-f]+):(\d+)", pd):
        regions[m.group(1).decode()] = Region(m.group(1).decode(), int(m.group(2), 16),
                                              int(m.group(3), 16), int(m.group(4)))
    return regions


class HostilePeer:
    def __init__(self, addr, port, rcvbuf=None, timeout=12.0):
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        if rcvbuf:
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        self.sock.settimeout(timeout)
        self.sock.connect((addr, port))
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.timeout = timeout
        self.reply = None
        self.regions = {}
        self.crc = True
        self.tx_pos = 0  # stream position for markers (never negotiated with uiw.ko)
        self.rx_left = b""
        self.send_msn = 1
        self.rr_msn = 1
        self.term_msn = 1

    # ---- MPA (RFC 5044 7.1, RFC 6581) ----
    def mpa_request(self, pd=b"", rev=2, crc=True, markers=False, v2=None, rdmap_ext=False):
        if rev == 2 and v2 is None:
            v2 = w.MpaV2Params(ird=1, ord=1)
        f = w.MpaFrame("req", markers=markers, crc=crc, revision=rev, v2=v2, private_data=pd,
                       rdmap_ext=rdmap_ext)
        self.sock.sendall(f.encode())

    def read_reply(self):
        """Reads the MPA Reply; returns (frame or None, error). None frame: closed first."""
        buf = b""
        deadline = time.time() + self.timeout
        while time.time() < deadline:
            used, frame, err = w.decode_mpa(buf, "rep")
            if err != "None":
                return None, err
            if frame is not None:
                self.rx_left = buf[used:]
                self.reply = frame
                self.crc = frame.crc
                self.regions = parse_regions(frame.private_data)
                return frame, "None"
            chunk = self._recv(4096)
            if not chunk:
                return None, "closed"
            buf += chunk
        return None, "timeout"

    def connect_mpa(self, pd=b"hostile", **kw):
        self.mpa_request(pd, **kw)
        frame, err = self.read_reply()
        if frame is None or frame.reject:
            raise AssertionError(f"MPA exchange failed: {err} {frame}")
        return frame

    def _recv(self, n):
        try:
            return self.sock.recv(n)
        except (ConnectionResetError, socket.timeout):
            return b""

    # ---- FPDUs ----
    def send_ulpdu(self, ulpdu, bad_crc=False, partial=None):
        fpdu = bytearray(w.encode_fpdu(ulpdu, self.tx_pos, self.crc, False))
        if bad_crc:
            fpdu[-1] ^= 0x01
        if partial is not None:
            fpdu = fpdu[:partial]
        self.sock.sendall(bytes(fpdu))
        self.tx_pos += len(fpdu)

    def write(self, stag, to, data, last=True, dv=1, rv=1, op=w.Opcode.RdmaWrite):
        h = w.DdpHeader(tagged=True, last=last, ddp_version=dv, rdmap_control=ctrl(op, rv),
                        stag=stag, to=to)
        return h.encode() + data

    def send(self, data, msn=None, qn=0, mo=0, last=True, op=w.Opcode.Send, inval=0, dv=1, rv=1):
        if msn is None:
            msn = self.send_msn
            if last:
                self.send_msn += 1
        h = w.DdpHeader(tagged=False, last=last, ddp_version=dv, rdmap_control=ctrl(op, rv),
                        inval_stag=inval, qn=qn, msn=msn, mo=mo)
        return h.encode() + data

    def read_request(self, src_stag, src_to, size, sink_stag=0x1234, sink_to=0, msn=None):
        if msn is None:
            msn = self.rr_msn
            self.rr_msn += 1
        h = w.DdpHeader(tagged=False, last=True, rdmap_control=ctrl(w.Opcode.ReadRequest),
                        qn=w.QN_READ_REQUEST, msn=msn)
        rr = w.ReadRequest(sink_stag=sink_stag, sink_to=sink_to, size=size, src_stag=src_stag,
                           src_to=src_to)
        return h.encode() + rr.encode()

    def atomic(self, stag, to, aopcode=w.ATOMIC_FETCH_ADD, data=1, msn=None, request_id=1):
        """An Atomic Request (RFC 7306 5.2.1) on QN 1, in the Read Request MSN sequence."""
        if msn is None:
            msn = self.rr_msn
            self.rr_msn += 1
        h = w.DdpHeader(tagged=False, last=True, rdmap_control=ctrl(w.Opcode.AtomicRequest),
                        qn=w.QN_READ_REQUEST, msn=msn)
        ar = w.AtomicRequest(aopcode=aopcode, request_id=request_id, stag=stag, to=to, data=data)
        return h.encode() + ar.encode()

    def terminate(self, cause, msn=None):
        if msn is None:
            msn = self.term_msn
            self.term_msn += 1
        h = w.DdpHeader(tagged=False, last=True, rdmap_control=ctrl(w.Opcode.Terminate),
                        qn=w.QN_TERMINATE, msn=msn)
        return h.encode() + w.Terminate(cause).encode()

    def recv_messages(self, timeout=None):
        """Reads until EOF (or timeout). Returns (messages, eof, decoder error) where each message
        is (DdpHeader, payload bytes)."""
        dec = w.FpduDecoder(crc=self.crc)
        out = []
        used, ulpdus = dec.consume(self.rx_left)
        data = self.rx_left[used:]
        for u in ulpdus:
            out.append(self._split(u))
        eof = False
        deadline = time.time() + (timeout or self.timeout)
        while time.time() < deadline:
            r, _, _ = select.select([self.sock], [], [], max(0.0, deadline - time.time()))
            if not r:
                break
            chunk = self._recv(65536)
            if not chunk:
                eof = True
                break
            used, ulpdus = dec.consume(chunk)
            for u in ulpdus:
                out.append(self._split(u))
        return out, eof, dec.error

    @staticmethod
    def _split(ulpdu):
        h, n = w.decode_ddp(ulpdu)
        return h, ulpdu[n:]

    def expect_terminate(self, timeout=None):
        """Returns (terminate DdpHeader, Terminate, all messages, eof)."""
        msgs, eof, err = self.recv_messages(timeout)
        terms = [(h, p) for h, p in msgs if not h.tagged and h.opcode == int(w.Opcode.Terminate)]
        if not terms:
            raise AssertionError(f"no Terminate received (eof={eof}, decoder={err}, "
                                 f"messages={[m[0] for m in msgs]})")
        h, p = terms[0]
        return h, w.decode_terminate(p), msgs, eof

    def shutdown_write(self):
        self.sock.shutdown(socket.SHUT_WR)

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass


class ServerProc:
    """uiw_hostile_server on ADDR:PORT; lines go to a queue read by a thread."""

    def __init__(self, path, addr, port, args=(), env=None):
        self.lines = queue.Queue()
        self.log = []
        self.requests = 0  # "request" lines seen (connections the application was told of)
        self.dones = 0  # "done" lines seen (connections it finished)
        self.proc = subprocess.Popen([path, "-a", addr, "-p", str(port), *args],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, text=True, env=env)
        threading.Thread(target=self._reader, daemon=True).start()
        self.wait_for(r"^listening ", 60)

    def _reader(self):
        for line in self.proc.stdout:
            line = line.rstrip("\n")
            self.log.append(line)
            if line.startswith("request "):
                self.requests += 1
            elif line.startswith("done "):
                self.dones += 1
            self.lines.put(line)
        self.lines.put(None)

    def wait_for(self, regex, timeout=60):
        """Returns the lines read up to and including the first matching one."""
        got = []
        deadline = time.time() + timeout
        while True:
            left = deadline - time.time()
            if left <= 0:
                raise AssertionError(f"server: no /{regex}/ within {timeout}s; got {got}")
            try:
                line = self.lines.get(timeout=left)
            except queue.Empty:
                continue
            if line is None:
                raise AssertionError(f"server exited ({self.proc.poll()}) before /{regex}/; "
                                     f"got {got}")
            got.append(line)
            if re.search(regex, line):
                return got

    def sync(self, timeout=90):
        """Waits until the server has finished every connection it was told of (a failed test
        may leave one behind), then forgets the lines read so far."""
        deadline = time.time() + timeout
        while self.dones < self.requests and time.time() < deadline:
            time.sleep(0.1)
        if self.dones < self.requests:
            raise AssertionError(f"server still busy after {timeout}s: {self.log[-10:]}")
        while True:
            try:
                self.lines.get_nowait()
            except queue.Empty:
                return

    def quiet_for(self, secs):
        """Returns every line printed in the next secs seconds."""
        got = []
        deadline = time.time() + secs
        while time.time() < deadline:
            try:
                line = self.lines.get(timeout=max(0.01, deadline - time.time()))
            except queue.Empty:
                break
            if line is None:
                break
            got.append(line)
        return got

    def stop(self):
        if self.proc.poll() is None:
            try:
                self.proc.stdin.close()
                self.proc.wait(30)
            except (subprocess.TimeoutExpired, BrokenPipeError):
                self.proc.kill()
                self.proc.wait()


class Report:
    """The server's lines for one connection (from "request" to "done")."""

    def __init__(self, lines):
        self.lines = lines

    def wcs(self):
        out = []
        for l in self.lines:
            m = re.match(r"wc wr_id=(\d+) status=(\d+) \(.*\) opcode=(\d+) len=(\d+)", l)
            if m:
                out.append(tuple(int(x) for x in m.groups()))
        return out

    def region_changed(self, name):
        for l in self.lines:
            m = re.match(rf"region {name} changed=(\d+) first=(-?\d+)", l)
            if m:
                return int(m.group(1)), int(m.group(2))
        raise AssertionError(f"no region line for {name}: {self.lines}")

    def qp_states(self):
        return [int(m.group(1)) for l in self.lines for m in [re.match(r"qp_state=(\d+)", l)] if m]

    def guards_ok(self):
        return "guards ok" in self.lines

    def __repr__(self):
        return "\n".join(self.lines)


def env_or(name, default):
    v = os.environ.get(name)
    return v if v else default
