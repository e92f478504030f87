// uiwwire: python bindings of uiw's wire codecs (src/wire), so tests can speak raw
// MPA/DDP/RDMAP to a uiw QP from a plain socket (pyverbs-tests/hostile/) and so a developer can
// decode captured bytes from a python prompt (pyverbs-tests/README.md).
//
// Thin layer: every function calls the C++ codec and converts spans to python bytes. Errors the
// codecs report through return values become python ValueError here (exceptions are allowed in
// this module; src/wire itself stays exception-free).
#include <pybind11/operators.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <string>
#include <vector>

#include "wire/crc32c.h"
#include "wire/ddp.h"
#include "wire/mpa.h"
#include "wire/mpa_frame.h"
#include "wire/rdmap.h"
#include "wire/terminate.h"

namespace py = pybind11;
using namespace uiw::wire;

namespace {

std::span<const uint8_t> as_span(const py::bytes& b) {
  char* data = nullptr;
  Py_ssize_t len = 0;
  if (PyBytes_AsStringAndSize(b.ptr(), &data, &len) != 0) throw py::error_already_set();
  return {reinterpret_cast<const uint8_t*>(data), static_cast<size_t>(len)};
}

py::bytes to_bytes(const uint8_t* p, size_t n) {
  return py::bytes(reinterpret_cast<const char*>(p), n);
}

// MpaFrame with owned private data (the C++ struct holds a span).
struct PyMpaFrame {
  std::string kind = "req";  // "req" or "rep"
  bool markers = false;
  bool crc = true;
  bool reject = false;
  uint8_t revision = kMpaRevision1;
  std::optional<MpaV2Params> v2;
  std::string private_data;
  bool rdmap_ext = false;  // uiw's RFC 7306 offer (Request) or acceptance (Reply)
};

MpaFrameKind parse_kind(const std::string& k) {
  if (k == "req") return MpaFrameKind::Request;
  if (k == "rep") return MpaFrameKind::Reply;
  throw py::value_error("MPA frame kind must be 'req' or 'rep'");
}

py::bytes py_encode_mpa(const PyMpaFrame& f) {
  MpaFrame c;
  c.kind = parse_kind(f.kind);
  c.markers = f.markers;
  c.crc = f.crc;
  c.reject = f.reject;
  c.revision = f.revision;
  c.v2 = f.v2;
  c.rdmap_ext = f.rdmap_ext;
  c.private_data = {reinterpret_cast<const uint8_t*>(f.private_data.data()), f.private_data.size()};
  std::vector<uint8_t> out(mpa_frame_size(c));
  size_t n = encode_mpa_frame(out, c);
  if (n == 0)
    throw py::value_error("encode_mpa_frame refused (private data > 512, or v2 with rev != 2)");
  return to_bytes(out.data(), n);
}

const char* mpa_error_name(MpaFrameDecoder::Error e) {
  switch (e) {
    case MpaFrameDecoder::Error::None:
      return "None";
    case MpaFrameDecoder::Error::BadKey:
      return "BadKey";
    case MpaFrameDecoder::Error::UnsupportedRevision:
      return "UnsupportedRevision";
    case MpaFrameDecoder::Error::PrivateDataTooLong:
      return "PrivateDataTooLong";
    case MpaFrameDecoder::Error::MissingV2Params:
      return "MissingV2Params";
  }
  return "?";
}

// Decodes one MPA frame from the start of `data`. Returns (consumed, frame or None, error name).
// frame is None until the whole frame is present; error is "None" when there is none.
py::tuple py_decode_mpa(const py::bytes& data, const std::string& kind) {
  MpaFrameDecoder dec(parse_kind(kind));
  size_t used = dec.consume(as_span(data));
  py::object frame = py::none();
  if (dec.done()) {
    const MpaFrame& c = dec.frame();
    PyMpaFrame f;
    f.kind = c.kind == MpaFrameKind::Request ? "req" : "rep";
    f.markers = c.markers;
    f.crc = c.crc;
    f.reject = c.reject;
    f.revision = c.revision;
    f.v2 = c.v2;
    f.rdmap_ext = c.rdmap_ext;
    f.private_data.assign(reinterpret_cast<const char*>(c.private_data.data()),
                          c.private_data.size());
    frame = py::cast(f);
  }
  return py::make_tuple(used, frame, mpa_error_name(dec.error()));
}

py::bytes py_encode_fpdu(const py::bytes& ulpdu, uint64_t stream_pos, bool crc, bool markers) {
  auto in = as_span(ulpdu);
  if (in.size() > kMaxUlpduLength) throw py::value_error("ULPDU longer than 65535");
  std::vector<uint8_t> out(fpdu_size_with_markers(stream_pos, in.size(), markers));
  size_t n = encode_fpdu(out, stream_pos, in, crc, markers);
  if (n == 0) throw py::value_error("encode_fpdu failed");
  return to_bytes(out.data(), n);
}

const char* fpdu_error_name(FpduDecoder::Error e) {
  switch (e) {
    case FpduDecoder::Error::None:
      return "None";
    case FpduDecoder::Error::CrcMismatch:
      return "CrcMismatch";
    case FpduDecoder::Error::MarkerMismatch:
      return "MarkerMismatch";
    case FpduDecoder::Error::UlpduTooLong:
      return "UlpduTooLong";
  }
  return "?";
}

// Owns an FpduDecoder and collects the ULPDUs it delivers.
class PyFpduDecoder : public FpduDecoder::Visitor {
 public:
  PyFpduDecoder(bool crc, bool markers, uint64_t start_pos, size_t max_ulpdu)
      : dec_(this, crc, markers, start_pos, max_ulpdu) {}
  void on_ulpdu(std::span<const uint8_t> ulpdu) override {
    out_.emplace_back(reinterpret_cast<const char*>(ulpdu.data()), ulpdu.size());
  }
  // Returns (consumed, [ulpdu bytes...]).
  py::tuple consume(const py::bytes& data) {
    out_.clear();
    size_t used = dec_.consume(as_span(data));
    py::list l;
    for (auto& s : out_) l.append(py::bytes(s));
    return py::make_tuple(used, l);
  }
  const FpduDecoder& dec() const { return dec_; }

 private:
  FpduDecoder dec_;
  std::vector<std::string> out_;
};

py::bytes py_encode_ddp(const SegmentHeader& h) {
  uint8_t out[kUntaggedHeaderSize];
  size_t n = encode_segment_header(out, h);
  return to_bytes(out, n);
}

// Returns (header, size); raises if too short.
py::tuple py_decode_ddp(const py::bytes& data) {
  SegmentHeader h;
  size_t n = decode_segment_header(as_span(data), &h);
  if (n == 0) throw py::value_error("too short for a DDP header");
  return py::make_tuple(h, n);
}

py::bytes py_encode_read_request(const ReadRequestHeader& h) {
  uint8_t out[kReadRequestHeaderSize];
  encode_read_request(out, h);
  return to_bytes(out, sizeof out);
}

ReadRequestHeader py_decode_read_request(const py::bytes& data) {
  auto in = as_span(data);
  if (in.size() < kReadRequestHeaderSize) throw py::value_error("Read Request header is 28 octets");
  return decode_read_request(in.data());
}

py::bytes py_encode_terminate(const TerminateMessage& t) {
  uint8_t out[kTerminateMaxSize];
  size_t n = encode_terminate(out, t);
  if (n == 0) throw py::value_error("encode_terminate refused (D without a 14/18-octet header)");
  return to_bytes(out, n);
}

TerminateMessage py_decode_terminate(const py::bytes& data) {
  TerminateMessage t;
  switch (decode_terminate(as_span(data), &t)) {
    case TerminateDecodeError::None:
      return t;
    case TerminateDecodeError::TooShort:
      throw py::value_error("Terminate header too short");
    case TerminateDecodeError::BadHeaderLength:
      throw py::value_error("Terminate: bad header length");
  }
  throw py::value_error("Terminate: unknown decode error");
}

std::string cause_repr(const TerminateCause& c) {
  const char* name = terminate_cause_name(c);
  return "TerminateCause(layer=" + std::to_string(static_cast<int>(c.layer)) +
         ", etype=" + std::to_string(c.etype) + ", code=" + std::to_string(c.code) + ", '" +
         (name ? name : "not in the master table") + "')";
}

void bind_mpa(py::module_& m) {
  py::class_<MpaV2Params>(m, "MpaV2Params", "RFC 6581 IRD/ORD word")
      .def(py::init([](bool p2p, bool rtr_send, bool rtr_write, bool rtr_read, uint16_t ird,
                       uint16_t ord) {
             return MpaV2Params{p2p, rtr_send, rtr_write, rtr_read, ird, ord};
           }),
           py::arg("peer_to_peer") = false, py::arg("rtr_send") = false,
           py::arg("rtr_write") = false, py::arg("rtr_read") = false, py::arg("ird") = 0,
           py::arg("ord") = 0)
      .def_readwrite("peer_to_peer", &MpaV2Params::peer_to_peer)
      .def_readwrite("rtr_send", &MpaV2Params::rtr_send)
      .def_readwrite("rtr_write", &MpaV2Params::rtr_write)
      .def_readwrite("rtr_read", &MpaV2Params::rtr_read)
      .def_readwrite("ird", &MpaV2Params::ird)
      .def_readwrite("ord", &MpaV2Params::ord)
      .def("encode",
           [](const MpaV2Params& p) {
             uint8_t b[kMpaV2ParamsSize];
             encode_mpa_v2_params(b, p);
             return to_bytes(b, sizeof b);
           })
      .def_static("decode",
                  [](const py::bytes& d) {
                    auto in = as_span(d);
                    if (in.size() < kMpaV2ParamsSize)
                      throw py::value_error("IRD/ORD word is 4 octets");
                    return decode_mpa_v2_params(in.data());
                  })
      .def("__repr__", [](const MpaV2Params& p) {
        return "MpaV2Params(p2p=" + std::to_string(p.peer_to_peer) +
               ", send=" + std::to_string(p.rtr_send) + ", write=" + std::to_string(p.rtr_write) +
               ", read=" + std::to_string(p.rtr_read) + ", ird=" + std::to_string(p.ird) +
               ", ord=" + std::to_string(p.ord) + ")";
      });

  py::class_<PyMpaFrame>(m, "MpaFrame", "MPA Request/Reply (RFC 5044 7.1.1)")
      .def(py::init([](const std::string& kind, bool markers, bool crc, bool reject,
                       uint8_t revision, std::optional<MpaV2Params> v2, const py::bytes& pd,
                       bool rdmap_ext) {
             parse_kind(kind);
             PyMpaFrame f{kind, markers, crc, reject, revision, v2, std::string(pd), rdmap_ext};
             return f;
           }),
           py::arg("kind") = "req", py::arg("markers") = false, py::arg("crc") = true,
           py::arg("reject") = false, py::arg("revision") = 1, py::arg("v2") = py::none(),
           py::arg("private_data") = py::bytes(), py::arg("rdmap_ext") = false)
      .def_readwrite("rdmap_ext", &PyMpaFrame::rdmap_ext)
      .def_readwrite("kind", &PyMpaFrame::kind)
      .def_readwrite("markers", &PyMpaFrame::markers)
      .def_readwrite("crc", &PyMpaFrame::crc)
      .def_readwrite("reject", &PyMpaFrame::reject)
      .def_readwrite("revision", &PyMpaFrame::revision)
      .def_readwrite("v2", &PyMpaFrame::v2)
      .def_property(
          "private_data", [](const PyMpaFrame& f) { return py::bytes(f.private_data); },
          [](PyMpaFrame& f, const py::bytes& b) { f.private_data = std::string(b); })
      .def("encode", &py_encode_mpa)
      .def("__repr__", [](const PyMpaFrame& f) {
        return "MpaFrame(" + f.kind + ", rev=" + std::to_string(f.revision) +
               ", M=" + std::to_string(f.markers) + ", C=" + std::to_string(f.crc) +
               ", R=" + std::to_string(f.reject) + ", v2=" + (f.v2 ? "yes" : "no") +
               ", pd_len=" + std::to_string(f.private_data.size()) + ")";
      });
  m.def("encode_mpa", &py_encode_mpa, "MpaFrame -> bytes");
  m.def("decode_mpa", &py_decode_mpa, py::arg("data"), py::arg("kind") = "req",
        "bytes -> (consumed, MpaFrame or None, error name)");
  m.attr("MPA_KEY_REQ") = to_bytes(kMpaKeyRequest.data(), kMpaKeySize);
  m.attr("MPA_KEY_REP") = to_bytes(kMpaKeyReply.data(), kMpaKeySize);
  m.attr("MPA_MAX_PRIVATE_DATA") = kMpaMaxPrivateData;
  m.attr("MPA_FLAG_MARKERS") = kMpaFlagMarkers;
  m.attr("MPA_FLAG_CRC") = kMpaFlagCrc;
  m.attr("MPA_FLAG_REJECT") = kMpaFlagReject;
  m.attr("MPA_FLAG_ENHANCED") = kMpaFlagEnhanced;
}

void bind_fpdu(py::module_& m) {
  m.def("crc32c", [](const py::bytes& d) {
    auto in = as_span(d);
    return crc32c(in.data(), in.size());
  });
  m.def("fpdu_pad", &fpdu_pad);
  m.def("fpdu_size", &fpdu_size);
  m.def("fpdu_size_with_markers", &fpdu_size_with_markers, py::arg("stream_pos"),
        py::arg("ulpdu_len"), py::arg("markers"));
  m.def("mulpdu_for_emss", &mulpdu_for_emss, py::arg("emss"), py::arg("markers"));
  m.def("encode_fpdu", &py_encode_fpdu, py::arg("ulpdu"), py::arg("stream_pos") = 0,
        py::arg("crc") = true, py::arg("markers") = false,
        "ULPDU -> FPDU (length, ULPDU, pad, CRC, markers relative to stream_pos)");
  py::class_<PyFpduDecoder>(m, "FpduDecoder")
      .def(py::init<bool, bool, uint64_t, size_t>(), py::arg("crc") = true,
           py::arg("markers") = false, py::arg("start_pos") = 0,
           py::arg("max_ulpdu") = kMaxUlpduLength)
      .def("consume", &PyFpduDecoder::consume, "bytes -> (consumed, [ulpdu, ...])")
      .def_property_readonly(
          "error", [](const PyFpduDecoder& d) { return fpdu_error_name(d.dec().error()); })
      .def_property_readonly(
          "error_detail",
          [](const PyFpduDecoder& d) { return std::string(d.dec().error_detail()); })
      .def_property_readonly("at_frame_boundary",
                             [](const PyFpduDecoder& d) { return d.dec().at_frame_boundary(); })
      .def_property_readonly("stream_pos",
                             [](const PyFpduDecoder& d) { return d.dec().stream_pos(); })
      .def_property_readonly("frames_decoded",
                             [](const PyFpduDecoder& d) { return d.dec().frames_decoded(); });
}

void bind_ddp_rdmap(py::module_& m) {
  py::class_<SegmentHeader>(m, "DdpHeader", "DDP tagged (14) / untagged (18) header, RFC 5041 4")
      .def(py::init([](bool tagged, bool last, uint8_t dv, uint8_t rdmap_control, uint32_t stag,
                       uint64_t to, uint32_t inval_stag, uint32_t qn, uint32_t msn, uint32_t mo) {
             SegmentHeader h;
             h.tagged = tagged;
             h.last = last;
             h.ddp_version = dv;
             h.rdmap_control = rdmap_control;
             h.stag = stag;
             h.to = to;
             h.inval_stag = inval_stag;
             h.qn = qn;
             h.msn = msn;
             h.mo = mo;
             return h;
           }),
           py::arg("tagged") = false, py::arg("last") = true, py::arg("ddp_version") = kDdpVersion,
           py::arg("rdmap_control") = 0, py::arg("stag") = 0, py::arg("to") = 0,
           py::arg("inval_stag") = 0, py::arg("qn") = 0, py::arg("msn") = 0, py::arg("mo") = 0)
      .def_readwrite("tagged", &SegmentHeader::tagged)
      .def_readwrite("last", &SegmentHeader::last)
      .def_readwrite("ddp_version", &SegmentHeader::ddp_version)
      .def_readwrite("rdmap_control", &SegmentHeader::rdmap_control)
      .def_readwrite("stag", &SegmentHeader::stag)
      .def_readwrite("to", &SegmentHeader::to)
      .def_readwrite("inval_stag", &SegmentHeader::inval_stag)
      .def_readwrite("qn", &SegmentHeader::qn)
      .def_readwrite("msn", &SegmentHeader::msn)
      .def_readwrite("mo", &SegmentHeader::mo)
      .def_property_readonly("opcode",
                             [](const SegmentHeader& h) { return rdmap_opcode(h.rdmap_control); })
      .def_property_readonly("rdmap_version",
                             [](const SegmentHeader& h) { return rdmap_version(h.rdmap_control); })
      .def("encode", &py_encode_ddp)
      .def("__repr__", [](const SegmentHeader& h) {
        std::string s = h.tagged ? "DdpHeader(tagged" : "DdpHeader(untagged";
        s += ", L=" + std::to_string(h.last) + ", dv=" + std::to_string(h.ddp_version) +
             ", op=" + opcode_info(rdmap_opcode(h.rdmap_control)).name +
             ", rv=" + std::to_string(rdmap_version(h.rdmap_control));
        if (h.tagged) {
          s += ", stag=" + std::to_string(h.stag) + ", to=" + std::to_string(h.to);
        } else {
          s += ", inval_stag=" + std::to_string(h.inval_stag) + ", qn=" + std::to_string(h.qn) +
               ", msn=" + std::to_string(h.msn) + ", mo=" + std::to_string(h.mo);
        }
        return s + ")";
      });
  m.def("encode_ddp", &py_encode_ddp);
  m.def("decode_ddp", &py_decode_ddp, "bytes -> (DdpHeader, header size)");
  m.def("ddp_header_size", &segment_header_size, py::arg("tagged"));

  py::enum_<Opcode>(m, "Opcode")
      .value("RdmaWrite", Opcode::RdmaWrite)
      .value("ReadRequest", Opcode::ReadRequest)
      .value("ReadResponse", Opcode::ReadResponse)
      .value("Send", Opcode::Send)
      .value("SendInv", Opcode::SendInv)
      .value("SendSe", Opcode::SendSe)
      .value("SendSeInv", Opcode::SendSeInv)
      .value("Terminate", Opcode::Terminate)
      .value("ImmediateData", Opcode::ImmediateData)
      .value("ImmediateDataSe", Opcode::ImmediateDataSe)
      .value("AtomicRequest", Opcode::AtomicRequest)
      .value("AtomicResponse", Opcode::AtomicResponse);
  m.def(
      "rdmap_control",
      [](uint8_t op, uint8_t rv) {
        return rdmap_control(static_cast<Opcode>(op & kRdmapMaskOpcode), rv);
      },
      py::arg("opcode"), py::arg("rv") = kRdmapVersion, "opcode (int or Opcode) -> control octet");
  m.def("opcode_name", [](uint8_t op) { return std::string(opcode_info(op).name); });

  py::class_<ReadRequestHeader>(m, "ReadRequest", "RDMA Read Request header, RFC 5040 4.4")
      .def(py::init([](uint32_t sink_stag, uint64_t sink_to, uint32_t size, uint32_t src_stag,
                       uint64_t src_to) {
             return ReadRequestHeader{sink_stag, sink_to, size, src_stag, src_to};
           }),
           py::arg("sink_stag") = 0, py::arg("sink_to") = 0, py::arg("size") = 0,
           py::arg("src_stag") = 0, py::arg("src_to") = 0)
      .def_readwrite("sink_stag", &ReadRequestHeader::sink_stag)
      .def_readwrite("sink_to", &ReadRequestHeader::sink_to)
      .def_readwrite("size", &ReadRequestHeader::size)
      .def_readwrite("src_stag", &ReadRequestHeader::src_stag)
      .def_readwrite("src_to", &ReadRequestHeader::src_to)
      .def("encode", &py_encode_read_request);
  m.def("encode_read_request", &py_encode_read_request);
  m.def("decode_read_request", &py_decode_read_request);

  // RFC 7306 §5.2.1 / §5.2.2.
  py::class_<AtomicRequestHeader>(m, "AtomicRequest", "Atomic Request header, RFC 7306 5.2.1")
      .def(py::init([](uint8_t aopcode, uint32_t request_id, uint32_t stag, uint64_t to,
                       uint64_t data, uint64_t data_mask, uint64_t compare, uint64_t compare_mask) {
             return AtomicRequestHeader{aopcode, request_id, stag,    to,
                                        data,    data_mask,  compare, compare_mask};
           }),
           py::arg("aopcode") = 0, py::arg("request_id") = 0, py::arg("stag") = 0,
           py::arg("to") = 0, py::arg("data") = 0, py::arg("data_mask") = 0, py::arg("compare") = 0,
           py::arg("compare_mask") = ~0ull)
      .def_readwrite("aopcode", &AtomicRequestHeader::aopcode)
      .def_readwrite("request_id", &AtomicRequestHeader::request_id)
      .def_readwrite("stag", &AtomicRequestHeader::stag)
      .def_readwrite("to", &AtomicRequestHeader::to)
      .def("encode", [](const AtomicRequestHeader& h) {
        uint8_t out[kAtomicRequestHeaderSize];
        encode_atomic_request(out, h);
        return to_bytes(out, sizeof out);
      });
  m.def("decode_atomic_response", [](const py::bytes& data) {
    auto in = as_span(data);
    if (in.size() < kAtomicResponseHeaderSize)
      throw py::value_error("Atomic Response header is 12 octets");
    const AtomicResponseHeader h = decode_atomic_response(in.data());
    return py::make_tuple(h.request_id, h.original);
  });
  m.attr("ATOMIC_FETCH_ADD") = static_cast<int>(AtomicOpcode::FetchAdd);
  m.attr("ATOMIC_CMP_SWAP") = static_cast<int>(AtomicOpcode::CmpSwap);
  m.attr("QN_SEND") = kQnSend;
  m.attr("QN_READ_REQUEST") = kQnReadRequest;
  m.attr("QN_TERMINATE") = kQnTerminate;
  m.attr("QN_ATOMIC_RESPONSE") = kQnAtomicResponse;
}

void bind_terminate(py::module_& m) {
  py::class_<TerminateCause>(m, "TerminateCause")
      .def(py::init([](uint8_t layer, uint8_t etype, uint8_t code) {
             return TerminateCause{static_cast<TermLayer>(layer), etype, code};
           }),
           py::arg("layer"), py::arg("etype"), py::arg("code"))
      .def_property(
          "layer", [](const TerminateCause& c) { return static_cast<int>(c.layer); },
          [](TerminateCause& c, uint8_t l) { c.layer = static_cast<TermLayer>(l); })
      .def_readwrite("etype", &TerminateCause::etype)
      .def_readwrite("code", &TerminateCause::code)
      .def_property_readonly("name",
                             [](const TerminateCause& c) -> py::object {
                               const char* n = terminate_cause_name(c);
                               return n ? py::object(py::str(n)) : py::none();
                             })
      .def("as_tuple",
           [](const TerminateCause& c) {
             return py::make_tuple(static_cast<int>(c.layer), c.etype, c.code);
           })
      .def(py::self == py::self)
      .def("__repr__", &cause_repr);
  m.def("all_terminate_causes", [] {
    auto s = all_terminate_causes();
    return std::vector<TerminateCause>(s.begin(), s.end());
  });

  py::class_<TerminateMessage>(m, "Terminate", "Terminate header, RFC 5040 4.8")
      .def(py::init([](const TerminateCause& cause, bool mf, bool df, bool rf, uint16_t len,
                       const py::bytes& ddp_header, const py::bytes& rdma_header) {
             TerminateMessage t;
             t.cause = cause;
             t.m = mf;
             t.d = df;
             t.r = rf;
             t.ddp_segment_length = len;
             auto dh = as_span(ddp_header);
             auto rh = as_span(rdma_header);
             if (dh.size() != 0 && dh.size() != 14 && dh.size() != 18)
               throw py::value_error("ddp_header must be 0, 14 or 18 octets");
             if (rh.size() != 0 && rh.size() != 28)
               throw py::value_error("rdma_header must be 0 or 28 octets");
             std::copy(dh.begin(), dh.end(), t.ddp_header);
             t.ddp_header_size = dh.size();
             std::copy(rh.begin(), rh.end(), t.rdma_header);
             return t;
           }),
           py::arg("cause"), py::arg("m") = false, py::arg("d") = false, py::arg("r") = false,
           py::arg("ddp_segment_length") = 0, py::arg("ddp_header") = py::bytes(),
           py::arg("rdma_header") = py::bytes())
      .def_readwrite("cause", &TerminateMessage::cause)
      .def_readwrite("m", &TerminateMessage::m)
      .def_readwrite("d", &TerminateMessage::d)
      .def_readwrite("r", &TerminateMessage::r)
      .def_readwrite("ddp_segment_length", &TerminateMessage::ddp_segment_length)
      .def_property_readonly(
          "ddp_header",
          [](const TerminateMessage& t) { return to_bytes(t.ddp_header, t.ddp_header_size); })
      .def_property_readonly(
          "rdma_header",
          [](const TerminateMessage& t) { return t.r ? to_bytes(t.rdma_header, 28) : py::bytes(); })
      .def_property_readonly("control_word", &terminate_control_word)
      .def("encode", &py_encode_terminate)
      .def("__repr__", [](const TerminateMessage& t) {
        return "Terminate(" + cause_repr(t.cause) + ", M=" + std::to_string(t.m) +
               ", D=" + std::to_string(t.d) + ", R=" + std::to_string(t.r) +
               ", ddp_len=" + std::to_string(t.ddp_segment_length) +
               ", ddp_hdr=" + std::to_string(t.ddp_header_size) + ")";
      });
  m.def("encode_terminate", &py_encode_terminate);
  m.def("decode_terminate", &py_decode_terminate);
  m.def(
      "terminate_flags_for",
      [](const TerminateCause& c, bool rr) {
        auto f = terminate_flags_for(c, rr);
        return py::make_tuple(f.m, f.d, f.r);
      },
      py::arg("cause"), py::arg("is_read_request") = false, "-> (M, D, R) per RFC 5040 Figure 10");

  py::module_ t = m.def_submodule("term", "Terminate layer/etype/code constants (terminate.h)");
  t.attr("LAYER_RDMA") = 0;
  t.attr("LAYER_DDP") = 1;
  t.attr("LAYER_LLP") = 2;
#define UIW_TERM(name) t.attr(#name) = term::name
  UIW_TERM(kRdmaLocalCatastrophic);
  UIW_TERM(kRdmaRemoteProtection);
  UIW_TERM(kRdmaRemoteOperation);
  UIW_TERM(kDdpLocalCatastrophic);
  UIW_TERM(kDdpTagged);
  UIW_TERM(kDdpUntagged);
  UIW_TERM(kLlpMpa);
  UIW_TERM(kInvalidStag);
  UIW_TERM(kBaseBounds);
  UIW_TERM(kAccessRights);
  UIW_TERM(kStagNotAssociated);
  UIW_TERM(kToWrap);
  UIW_TERM(kInvalidRdmapVersion);
  UIW_TERM(kUnexpectedOpcode);
  UIW_TERM(kCatastrophicStream);
  UIW_TERM(kCatastrophicGlobal);
  UIW_TERM(kCannotInvalidate);
  UIW_TERM(kUnspecified);
  UIW_TERM(kDdpInvalidStag);
  UIW_TERM(kDdpBaseBounds);
  UIW_TERM(kDdpStagNotAssociated);
  UIW_TERM(kDdpToWrap);
  UIW_TERM(kDdpInvalidVersion);
  UIW_TERM(kDdpInvalidQn);
  UIW_TERM(kDdpNoBuffer);
  UIW_TERM(kDdpMsnRange);
  UIW_TERM(kDdpInvalidMo);
  UIW_TERM(kDdpTooLong);
  UIW_TERM(kDdpUntaggedInvalidVersion);
  UIW_TERM(kMpaConnectionLost);
  UIW_TERM(kMpaCrc);
  UIW_TERM(kMpaMarker);
  UIW_TERM(kMpaBadFrame);
  UIW_TERM(kMpaLocalCatastrophic);
  UIW_TERM(kMpaInsufficientIrd);
  UIW_TERM(kMpaNoMatchingRtr);
#undef UIW_TERM
}

}  // namespace

PYBIND11_MODULE(uiwwire, m) {
  m.doc() = "uiw wire codecs (src/wire): MPA frames, FPDU, DDP, RDMAP Read Request, Terminate";
  bind_mpa(m);
  bind_fpdu(m);
  bind_ddp_rdmap(m);
  bind_terminate(m);
}
