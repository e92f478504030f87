"""Passive side of test_uiw_cm.py (runs as its own process: pyverbs' CMID API is synchronous).

usage: cm_server.py ADDR PORT MODE
  echo N SIZE  - receives N messages of SIZE octets and sends each one back
  rdma SIZE    - registers a SIZE-octet remote-write region and a remote-read one (filled with
                 i % 251), sends "<waddr> <wrkey> <raddr> <rrkey>", waits for the peer's
                 "done", then sends back the first 64 octets of the write region
  reject       - rejects the request
Prints "listening" once listening, "ok" when finished.
"""
import sys

import pyverbs.cm_enums as ce
import pyverbs.enums as e
from pyverbs.cmid import AddrInfo, CMID, ConnParam
from pyverbs.qp import QPCap, QPInitAttr


def main():
    addr, port, mode = sys.argv[1], sys.argv[2], sys.argv[3]
    ai = AddrInfo(src=addr, src_service=port, port_space=ce.RDMA_PS_TCP, flags=ce.RAI_PASSIVE)
    init = QPInitAttr(qp_type=e.IBV_QPT_RC, cap=QPCap(max_send_wr=8, max_recv_wr=8))
    listener = CMID(creator=ai, qp_init_attr=init)
    listener.listen()
    print("listening", flush=True)
    conn = listener.get_request()
    if mode == "reject":
        conn.reject()
        # librdmacm acks the connect request only when its id goes (rdma_reject does not), and
        # destroying the listener waits for that ack: the request's id must go first.
        conn.close()
        listener.close()
        print("ok", flush=True)
        return
    if mode == "echo":
        n, size = int(sys.argv[4]), int(sys.argv[5])
        # Two buffers: the next receive is posted before the echo goes out, because the peer
        # sends its next message as soon as it has the echo and iWARP has no RNR retry (a Send
        # that finds no receive ends the connection, RFC 5041 §7.1).
        mrs = [conn.reg_msgs(size), conn.reg_msgs(size)]
        conn.post_recv(mrs[0], size)
        conn.accept(ConnParam())
        for i in range(n):
            wc = conn.get_recv_comp()
            assert wc.status == e.IBV_WC_SUCCESS and wc.byte_len == size, (wc.status, wc.byte_len)
            if i + 1 < n:
                conn.post_recv(mrs[(i + 1) % 2], size)
            conn.post_send(mrs[i % 2], 0, size)
            conn.get_send_comp()
    elif mode == "rdma":
        size = int(sys.argv[4])
        wregion = conn.reg_write(size)
        rregion = conn.reg_read(size)
        rregion.write(bytes(i % 251 for i in range(size)), size)
        msg = conn.reg_msgs(64)
        conn.post_recv(msg, 64)
        conn.accept(ConnParam())
        info = (f"{wregion.buf:x} {wregion.rkey:x} {rregion.buf:x} {rregion.rkey:x}"
                .encode().ljust(64, b"\0"))
        msg2 = conn.reg_msgs(64)
        msg2.write(info, 64)
        conn.post_send(msg2, 0, 64)
        conn.get_send_comp()
        wc = conn.get_recv_comp()  # "done"
        assert wc.status == e.IBV_WC_SUCCESS
        # Echo a digest of what the peer wrote: the first 64 octets.
        msg2.write(wregion.read(64, 0), 64)
        conn.post_send(msg2, 0, 64)
        conn.get_send_comp()
    conn.disconnect()
    conn.close()
    listener.close()
    print("ok", flush=True)


if __name__ == "__main__":
    main()
