"""Host tests of the uiwwire python module (pyverbs-tests/wire_module/uiw_wire_py.cpp).

Byte-exact against the CRC32c vectors of RFC 3720 Appendix B.4, RFC 5044 Figures 5 and 6,
FPDUs derived by hand from the header layouts of RFC 5040 / 5041 / 5044, and the MPA frame
layout of RFC 5044 7.1.1 / RFC 6581. Run: PYTHONPATH=<build>/python python3 -m unittest discover -s
pyverbs-tests/wire_module (ctest: pyverbs_wire_module).
"""
import unittest

import uiwwire as w

H = bytes.fromhex


class Crc32cTest(unittest.TestCase):
    def test_rfc3720_vectors(self):
        # RFC 3720 B.4; the CRC goes on the wire least-significant octet first (RFC 5044 4.4).
        cases = [
            (bytes(32), "aa36918a"),
            (b"\xff" * 32, "43aba862"),
            (bytes(range(32)), "4e79dd46"),
            (bytes(range(31, -1, -1)), "5cdb3f11"),
            (H("01c00000" "00000000" "00000000" "00000000" "14000000" "00000400"
               "00000014" "00000018" "28000000" "00000000" "02000000" "00000000"), "563a96d9"),
        ]
        for data, wire in cases:
            self.assertEqual(w.crc32c(data).to_bytes(4, "little"), H(wire), data.hex())

    def test_check_value(self):
        self.assertEqual(w.crc32c(b"123456789"), 0xE3069283)


# RFC 5044 Figure 5 ULPDU: untagged Send, L=1, QN 0, MSN 1, MO 0, 24 zero octets.
FIG5_ULPDU = H("4143"        # DDP ctrl: T=0 L=1 DV=1; RDMAP ctrl: RV=1 opcode 3 (Send)
               "00000000"    # reserved (Invalidate STag position)
               "00000000"    # QN 0
               "00000001"    # MSN 1
               "00000000"    # MO 0
               ) + bytes(24)


class FpduTest(unittest.TestCase):
    def test_figure5_with_marker(self):
        # Stream position 0 is a Marker position: Marker 0, then length 0x2a, ULPDU, CRC.
        fpdu = w.encode_fpdu(FIG5_ULPDU, stream_pos=0, crc=True, markers=True)
        self.assertEqual(fpdu, H("00000000" "002a") + FIG5_ULPDU + H("52239983"))

    def test_figure6_marker_inside(self):
        # FPDU1: Send MSN 1 with 464 zero octets (482-octet ULPDU, 492 on the wire with Marker 0).
        fpdu1_ulpdu = H("4143" "00000000" "00000000" "00000001" "00000000") + bytes(464)
        fpdu1 = w.encode_fpdu(fpdu1_ulpdu, stream_pos=0, crc=True, markers=True)
        self.assertEqual(len(fpdu1), 0x1EC)
        self.assertEqual(fpdu1[-4:], H("a01ee4fd"))
        ulpdu2 = H("4143" "00000000" "00000000" "00000002" "00000000") + bytes(24)
        fpdu2 = w.encode_fpdu(ulpdu2, stream_pos=0x1EC, crc=True, markers=True)
        expect = (H("002a") + ulpdu2[:18]   # 0x1ec..0x1ff: length and DDP header
                  + H("00000014")           # 0x200: Marker, FPDUPTR 0x14 back to 0x1ec
                  + bytes(24) + H("84925898"))
        self.assertEqual(fpdu2, expect)
        dec = w.FpduDecoder(crc=True, markers=True)
        used, ulpdus = dec.consume(fpdu1 + fpdu2)
        self.assertEqual((used, ulpdus, dec.error), (len(fpdu1) + len(fpdu2),
                                                    [fpdu1_ulpdu, ulpdu2], "None"))

    def test_derived_vectors(self):
        # Derived FPDUs (no Markers, CRC on).
        cases = [
            ("4143" "00000000" "00000000" "00000001" "00000000",
             "00124143 00000000 00000000 00000001 00000000 587be8c4"),
            ("c140" "12345678" "0000000000001000" "deadbeef",
             "0012c140 12345678 00000000 00001000 deadbeef adc06961"),
            ("4143" "00000000" "00000000" "00000002" "00000000" "5a",
             "00134143 00000000 00000000 00000002 00000000 5a000000 3ac1dcfd"),
        ]
        for ulpdu, wire in cases:
            self.assertEqual(w.encode_fpdu(H(ulpdu)), H(wire.replace(" ", "")))

    def test_bad_crc_detected(self):
        fpdu = bytearray(w.encode_fpdu(FIG5_ULPDU))
        fpdu[-1] ^= 1
        dec = w.FpduDecoder(crc=True)
        used, ulpdus = dec.consume(bytes(fpdu))
        self.assertEqual((ulpdus, dec.error), ([], "CrcMismatch"))
        # Sticky: a good FPDU afterwards is not delivered.
        self.assertEqual(dec.consume(w.encode_fpdu(FIG5_ULPDU)), (0, []))

    def test_byte_by_byte(self):
        fpdu = w.encode_fpdu(FIG5_ULPDU) * 2
        dec = w.FpduDecoder(crc=True)
        got = []
        for i in range(len(fpdu)):
            used, ulpdus = dec.consume(fpdu[i:i + 1])
            self.assertEqual(used, 1)
            got += ulpdus
            self.assertEqual(dec.at_frame_boundary, (i + 1) % (len(fpdu) // 2) == 0)
        self.assertEqual(got, [FIG5_ULPDU, FIG5_ULPDU])

    def test_sizes(self):
        self.assertEqual((w.fpdu_pad(42), w.fpdu_size(42), w.fpdu_size(19)), (0, 48, 28))
        self.assertEqual(w.mulpdu_for_emss(1460, False), 1454)


class DdpRdmapTest(unittest.TestCase):
    def test_tagged_write_header(self):
        h = w.DdpHeader(tagged=True, last=True, rdmap_control=w.rdmap_control(w.Opcode.RdmaWrite),
                        stag=0x12345678, to=0x1000)
        self.assertEqual(h.encode(), H("c140" "12345678" "0000000000001000"))
        d, n = w.decode_ddp(h.encode() + b"junk")
        self.assertEqual((n, d.tagged, d.stag, d.to, d.opcode, d.rdmap_version),
                         (14, True, 0x12345678, 0x1000, 0, 1))

    def test_untagged_send_inv_header(self):
        h = w.DdpHeader(tagged=False, last=False, ddp_version=2,
                        rdmap_control=w.rdmap_control(w.Opcode.SendInv, rv=3),
                        inval_stag=0xAABBCCDD, qn=0, msn=7, mo=0x100)
        # DDP ctrl 0x02: T=0 L=0 DV=2; RDMAP ctrl 0xc4: RV=3 opcode 4.
        self.assertEqual(h.encode(), H("02c4" "aabbccdd" "00000000" "00000007" "00000100"))
        d, n = w.decode_ddp(h.encode())
        self.assertEqual((n, d.ddp_version, d.rdmap_version, d.opcode, d.inval_stag, d.msn, d.mo),
                         (18, 2, 3, 4, 0xAABBCCDD, 7, 0x100))

    def test_read_request_vector(self):
        # The Read Request FPDU (RFC 5040 §4.4, derived).
        ddp = w.DdpHeader(rdmap_control=w.rdmap_control(w.Opcode.ReadRequest), qn=1, msn=1)
        rr = w.ReadRequest(sink_stag=0x11111111, sink_to=0x2000, size=0x100,
                           src_stag=0x22222222, src_to=0x3000)
        wire = ("002e4141 00000000 00000001 00000001 00000000 11111111 00000000 00002000"
                " 00000100 22222222 00000000 00003000 d52ec5b9")
        self.assertEqual(w.encode_fpdu(ddp.encode() + rr.encode()), H(wire.replace(" ", "")))
        back = w.decode_read_request(rr.encode())
        self.assertEqual((back.sink_stag, back.sink_to, back.size, back.src_stag, back.src_to),
                         (0x11111111, 0x2000, 0x100, 0x22222222, 0x3000))


    def test_atomic_request_and_response(self):
        # RFC 7306 5.2.1 Figure 4: a FetchAdd of 5 at TO 0x1000 of STag 0x42, request id 7.
        ddp = w.DdpHeader(rdmap_control=w.rdmap_control(w.Opcode.AtomicRequest),
                          qn=w.QN_READ_REQUEST, msn=1)
        ar = w.AtomicRequest(aopcode=w.ATOMIC_FETCH_ADD, request_id=7, stag=0x42, to=0x1000, data=5)
        self.assertEqual(ddp.encode()[:2], H("414a"))
        self.assertEqual(ar.encode(), H("00000000" "00000007" "00000042" "0000000000001000"
                                        "0000000000000005" "0000000000000000" "0000000000000000"
                                        "ffffffffffffffff"))
        self.assertEqual(w.decode_atomic_response(H("00000007" "0000000000000009")), (7, 9))
        self.assertEqual(w.opcode_name(int(w.Opcode.AtomicResponse)), "Atomic Response")
        self.assertEqual(w.QN_ATOMIC_RESPONSE, 3)

class TerminateTest(unittest.TestCase):
    def test_derived_vector(self):
        # Derived (RFC 5040 §4.8): DDP/Tagged/Base-or-bounds, M=D=1, length 18, copied Write header.
        copied = H("c140" "12345678" "0000000000001000")
        t = w.Terminate(w.TerminateCause(w.term.LAYER_DDP, w.term.kDdpTagged, w.term.kDdpBaseBounds),
                        m=True, d=True, ddp_segment_length=18, ddp_header=copied)
        self.assertEqual(t.control_word, 0x1101C000)
        ddp = w.DdpHeader(rdmap_control=w.rdmap_control(w.Opcode.Terminate), qn=2, msn=1)
        wire = ("00264147 00000000 00000002 00000001 00000000 1101c000 0012c140 12345678"
                " 00000000 00001000 42347cf9")
        self.assertEqual(w.encode_fpdu(ddp.encode() + t.encode()), H(wire.replace(" ", "")))
        back = w.decode_terminate(t.encode())
        self.assertEqual((back.cause.as_tuple(), back.m, back.d, back.r, back.ddp_segment_length,
                          back.ddp_header), ((1, 1, 1), True, True, False, 18, copied))
        self.assertEqual(back.cause.name, "DDP Tagged: Base or bounds violation")

    def test_read_request_terminate(self):
        rrddp = w.DdpHeader(rdmap_control=w.rdmap_control(w.Opcode.ReadRequest), qn=1, msn=1).encode()
        rr = w.ReadRequest(src_stag=5, size=1).encode()
        t = w.Terminate(w.TerminateCause(0, 1, 0), m=True, d=True, r=True, ddp_segment_length=46,
                        ddp_header=rrddp, rdma_header=rr)
        enc = t.encode()
        self.assertEqual(enc[:6], H("0100e000" "002e"))
        self.assertEqual(len(enc), 4 + 2 + 18 + 28)
        back = w.decode_terminate(enc)
        self.assertEqual((back.r, back.rdma_header, back.ddp_header), (True, rr, rrddp))
        self.assertEqual(w.terminate_flags_for(w.TerminateCause(0, 1, 0), True), (True, True, True))

    def test_llp_and_errors(self):
        t = w.Terminate(w.TerminateCause(2, 0, w.term.kMpaCrc))
        self.assertEqual(t.encode(), H("20020000"))
        with self.assertRaises(ValueError):
            w.decode_terminate(H("2002"))
        self.assertEqual(len(w.all_terminate_causes()) > 30, True)


class MpaFrameTest(unittest.TestCase):
    def test_request_rev1(self):
        f = w.MpaFrame("req", markers=False, crc=True, revision=1, private_data=b"hi")
        self.assertEqual(f.encode(), w.MPA_KEY_REQ + H("40" "01" "0002") + b"hi")
        used, back, err = w.decode_mpa(f.encode() + b"FPDU", "req")
        self.assertEqual((used, err, back.crc, back.markers, back.private_data), (22, "None", True,
                                                                                 False, b"hi"))

    def test_reply_rev2_params(self):
        v2 = w.MpaV2Params(peer_to_peer=True, rtr_write=True, ird=16, ord=8)
        self.assertEqual(v2.encode(), H("8010" "8008"))
        f = w.MpaFrame("rep", crc=False, revision=2, v2=v2, private_data=b"x")
        # Octet 16: enhanced 0x10; Rev 2; PD_Length 5 = IRD/ORD word + 1.
        self.assertEqual(f.encode(), w.MPA_KEY_REP + H("10" "02" "0005" "80108008") + b"x")
        used, back, err = w.decode_mpa(f.encode(), "rep")
        self.assertEqual((err, back.revision, back.v2.ird, back.v2.ord, back.v2.peer_to_peer,
                          back.v2.rtr_write, back.private_data), ("None", 2, 16, 8, True, True, b"x"))

    def test_rfc7306_offer(self):
        # uiw's offer: 0x04 of octet 16 (a Res bit, RFC 5044 7.1.1), decoded back; a Reply
        # accepts with 0x02, and an echoed 0x04 in a Reply (siw's way) accepts nothing.
        f = w.MpaFrame("req", crc=True, revision=1, rdmap_ext=True)
        self.assertEqual(f.encode(), w.MPA_KEY_REQ + H("44" "01" "0000"))
        used, back, err = w.decode_mpa(f.encode(), "req")
        self.assertEqual((err, back.rdmap_ext, back.crc), ("None", True, True))
        self.assertFalse(w.decode_mpa(w.MpaFrame("rep").encode(), "rep")[1].rdmap_ext)
        rep = w.MpaFrame("rep", crc=True, revision=1, rdmap_ext=True)
        self.assertEqual(rep.encode(), w.MPA_KEY_REP + H("42" "01" "0000"))
        self.assertTrue(w.decode_mpa(rep.encode(), "rep")[1].rdmap_ext)
        echo = w.MPA_KEY_REP + H("44" "01" "0000")
        self.assertFalse(w.decode_mpa(echo, "rep")[1].rdmap_ext)

    def test_decode_errors(self):
        good = w.MpaFrame("req").encode()
        self.assertEqual(w.decode_mpa(good, "rep")[2], "BadKey")
        self.assertEqual(w.decode_mpa(good[:17] + b"\x03" + good[18:], "req")[2],
                         "UnsupportedRevision")
        self.assertEqual(w.decode_mpa(good[:18] + H("0201"), "req")[2], "PrivateDataTooLong")
        self.assertEqual(w.decode_mpa(good[:10], "req"), (10, None, "None"))
        with self.assertRaises(ValueError):
            w.MpaFrame("req", private_data=bytes(513)).encode()


if __name__ == "__main__":
    unittest.main()
