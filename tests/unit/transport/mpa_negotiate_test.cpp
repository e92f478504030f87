// MPA negotiation (RFC 5044 §7.1, RFC 6581) between the two helpers, and against scripted raw
// peers over loopback TCP.
#include "transport/mpa_negotiate.h"

#include <gtest/gtest.h>
#include <sys/socket.h>

#include <cerrno>
#include <string>
#include <thread>
#include <vector>

#include "unit/transport/loopback.h"

namespace uiw::transport {
namespace {

using test::Fd;
using test::loopback_pair;
using Bytes = std::vector<uint8_t>;

struct Outcome {
  int irc = 1, rrc = 1;  // initiator / responder return codes
  MpaResult ir{}, rr{};
};

Outcome negotiate(const MpaConfig& ic, const MpaConfig& rc,
                  const std::function<bool(const MpaResult&, Bytes*)>& accept = {}) {
  auto [c, s] = loopback_pair();
  Fd cf(c), sf(s);
  Outcome o;
  std::thread responder([&] { o.rrc = mpa_respond(sf.fd, rc, &o.rr, accept); });
  o.irc = mpa_initiate(cf.fd, ic, &o.ir);
  responder.join();
  return o;
}

Bytes str(const std::string& s) {
  return Bytes(s.begin(), s.end());
}

// Reads exactly n bytes (blocking), or fewer on EOF/error.
Bytes recv_n(int fd, size_t n) {
  Bytes b(n);
  size_t got = 0;
  while (got < n) {
    ssize_t r = recv(fd, b.data() + got, n - got, 0);
    if (r <= 0) break;
    got += static_cast<size_t>(r);
  }
  b.resize(got);
  return b;
}

// Whatever is queued in the socket right now (after a short settle), without blocking.
Bytes pending(int fd) {
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  Bytes b(4096);
  ssize_t r = recv(fd, b.data(), b.size(), MSG_DONTWAIT);
  b.resize(r > 0 ? static_cast<size_t>(r) : 0);
  return b;
}

TEST(MpaNegotiateTest, Rev2DefaultsAndIrdOrdRule) {
  MpaConfig ic, rc;
  ic.ird = 8;
  ic.ord = 4;
  rc.ird = 2;
  rc.ord = 16;
  Outcome o = negotiate(ic, rc);
  ASSERT_EQ(o.irc, 0);
  ASSERT_EQ(o.rrc, 0);
  EXPECT_EQ(o.ir.revision, 2);
  EXPECT_EQ(o.rr.revision, 2);
  EXPECT_TRUE(o.ir.crc);
  EXPECT_TRUE(o.rr.crc);
  EXPECT_FALSE(o.ir.markers_tx || o.ir.markers_rx || o.rr.markers_tx || o.rr.markers_rx);
  // Responder (uiw.ko's policy): ORD = min(16, initiator IRD 8); IRD 2 raised to the
  // initiator's ORD 4.
  EXPECT_EQ(o.rr.ord, 8);
  EXPECT_EQ(o.rr.ird, 4);
  // Initiator: ORD = min(4, responder IRD 4); IRD 8 already covers the responder's ORD 8.
  EXPECT_EQ(o.ir.ord, 4);
  EXPECT_EQ(o.ir.ird, 8);
  // Each direction agrees: my ORD is never above the peer's IRD.
  EXPECT_EQ(o.ir.ord, o.rr.ird);
  EXPECT_EQ(o.rr.ord, o.ir.ird);
  EXPECT_EQ(o.ir.rtr, RtrType::Write);
  EXPECT_EQ(o.rr.rtr, RtrType::Write);
  EXPECT_FALSE(o.ir.rejected);
}

// The relaxed IRD rule of RFC 6581 §3 as uiw.ko applies it: an initiator whose ORD exceeds
// the responder's IRD gets it raised, not reduced (the negotiator once took the minimum).
TEST(MpaNegotiateTest, ResponderRaisesIrdToInitiatorOrd) {
  MpaConfig ic, rc;
  ic.ird = 1;
  ic.ord = 12;
  rc.ird = 3;
  rc.ord = 2;
  Outcome o = negotiate(ic, rc);
  ASSERT_EQ(o.irc, 0);
  ASSERT_EQ(o.rrc, 0);
  EXPECT_EQ(o.rr.ird, 12);
  EXPECT_EQ(o.rr.ord, 1);
  EXPECT_EQ(o.ir.ord, 12);
  EXPECT_EQ(o.ir.ird, 1);
}

TEST(MpaNegotiateTest, Rev1RequestGetsRev1Reply) {
  MpaConfig ic, rc;
  ic.revision = 1;
  ic.ird = 3;
  Outcome o = negotiate(ic, rc);
  ASSERT_EQ(o.irc, 0);
  ASSERT_EQ(o.rrc, 0);
  EXPECT_EQ(o.ir.revision, 1);
  EXPECT_EQ(o.rr.revision, 1);
  // No RFC 6581 exchange: no RTR, IRD/ORD stay as configured locally.
  EXPECT_EQ(o.ir.rtr, RtrType::None);
  EXPECT_EQ(o.rr.rtr, RtrType::None);
  EXPECT_EQ(o.ir.ird, 3);
  EXPECT_EQ(o.rr.ird, 16);
}

TEST(MpaNegotiateTest, Rev1ResponderAnswersRev2InitiatorWithRev1) {
  MpaConfig ic, rc;
  rc.revision = 1;
  ic.private_data = str("hello");
  Outcome o = negotiate(ic, rc);
  ASSERT_EQ(o.irc, 0);
  ASSERT_EQ(o.rrc, 0);
  EXPECT_EQ(o.ir.revision, 1);
  EXPECT_EQ(o.rr.revision, 1);
  EXPECT_EQ(o.ir.rtr, RtrType::None);
  // The rev 2 IRD/ORD word is not ULP data: the responder still sees just "hello".
  EXPECT_EQ(o.rr.peer_private_data, str("hello"));
}

TEST(MpaNegotiateTest, CrcOnIfEitherSideAsks) {
  for (int mask = 0; mask < 4; ++mask) {
    MpaConfig ic, rc;
    ic.crc = mask & 1;
    rc.crc = mask & 2;
    Outcome o = negotiate(ic, rc);
    ASSERT_EQ(o.irc, 0);
    ASSERT_EQ(o.rrc, 0);
    EXPECT_EQ(o.ir.crc, mask != 0) << mask;  // RFC 5044 §4.4
    EXPECT_EQ(o.rr.crc, mask != 0) << mask;
  }
}

// RFC 7306 is used only when the Request offers it (UIW_MPA_RDMAP_EXT_OFFER) and the Reply
// accepts (UIW_MPA_RDMAP_EXT_ACCEPT); a Responder that does not offer it does not accept.
TEST(MpaNegotiateTest, Rfc7306OnlyWhenBothOffer) {
  for (int mask = 0; mask < 4; ++mask) {
    MpaConfig ic, rc;
    ic.rdmap_ext = mask & 1;
    rc.rdmap_ext = mask & 2;
    Outcome o = negotiate(ic, rc);
    ASSERT_EQ(o.irc, 0);
    ASSERT_EQ(o.rrc, 0);
    EXPECT_EQ(o.ir.rdmap_ext, mask == 3) << mask;
    EXPECT_EQ(o.rr.rdmap_ext, mask == 3) << mask;
  }
}

TEST(MpaNegotiateTest, MarkersArePerDirection) {
  MpaConfig ic, rc;
  ic.markers_rx = true;  // the initiator wants markers in what it receives
  Outcome o = negotiate(ic, rc);
  ASSERT_EQ(o.irc, 0);
  EXPECT_TRUE(o.ir.markers_rx);
  EXPECT_FALSE(o.ir.markers_tx);
  EXPECT_TRUE(o.rr.markers_tx);
  EXPECT_FALSE(o.rr.markers_rx);

  MpaConfig ic2, rc2;
  rc2.markers_rx = true;
  o = negotiate(ic2, rc2);
  ASSERT_EQ(o.irc, 0);
  EXPECT_TRUE(o.ir.markers_tx);
  EXPECT_FALSE(o.ir.markers_rx);
  EXPECT_TRUE(o.rr.markers_rx);
  EXPECT_FALSE(o.rr.markers_tx);
}

TEST(MpaNegotiateTest, MarkersWeCannotSendAreRefused) {
  MpaConfig ic, rc;
  ic.markers_rx = true;
  rc.can_send_markers = false;
  Outcome o = negotiate(ic, rc);
  EXPECT_EQ(o.rrc, -ECONNREFUSED);
  EXPECT_EQ(o.irc, -ECONNREFUSED);
  EXPECT_TRUE(o.ir.rejected);
  // And on the initiator side: a Reply with M = 1 it cannot honour.
  MpaConfig ic2, rc2;
  ic2.can_send_markers = false;
  rc2.markers_rx = true;
  o = negotiate(ic2, rc2);
  EXPECT_EQ(o.irc, -EOPNOTSUPP);
  EXPECT_EQ(o.rrc, 0);
}

TEST(MpaNegotiateTest, RejectCarriesPrivateData) {
  MpaConfig ic, rc;
  ic.private_data = str("let me in");
  Bytes seen;
  Outcome o = negotiate(ic, rc, [&](const MpaResult& req, Bytes* reply) {
    seen = req.peer_private_data;
    *reply = str("go away");
    return false;
  });
  EXPECT_EQ(seen, str("let me in"));
  EXPECT_EQ(o.rrc, -ECONNREFUSED);
  EXPECT_TRUE(o.rr.rejected);
  EXPECT_EQ(o.irc, -ECONNREFUSED);
  EXPECT_TRUE(o.ir.rejected);
  EXPECT_EQ(o.ir.peer_private_data, str("go away"));
}

TEST(MpaNegotiateTest, AcceptMayReplaceReplyPrivateData) {
  MpaConfig ic, rc;
  rc.private_data = str("default");
  Outcome o = negotiate(ic, rc, [](const MpaResult&, Bytes* reply) {
    EXPECT_EQ(*reply, str("default"));
    *reply = str("custom");
    return true;
  });
  ASSERT_EQ(o.irc, 0);
  EXPECT_EQ(o.ir.peer_private_data, str("custom"));
}

TEST(MpaNegotiateTest, MaximumPrivateData) {
  // RFC 5044 §7.1.1: up to 512 octets. Rev 1: all of it is ULP data.
  MpaConfig ic, rc;
  ic.revision = rc.revision = 1;
  ic.private_data.resize(512);
  rc.private_data.resize(512);
  for (size_t i = 0; i < 512; ++i) {
    ic.private_data[i] = static_cast<uint8_t>(i);
    rc.private_data[i] = static_cast<uint8_t>(~i);
  }
  Outcome o = negotiate(ic, rc);
  ASSERT_EQ(o.irc, 0);
  ASSERT_EQ(o.rrc, 0);
  EXPECT_EQ(o.rr.peer_private_data, ic.private_data);
  EXPECT_EQ(o.ir.peer_private_data, rc.private_data);
  // Rev 2: the IRD/ORD word takes 4 of the 512 octets.
  MpaConfig ic2, rc2;
  ic2.private_data.assign(508, 0x5a);
  o = negotiate(ic2, rc2);
  ASSERT_EQ(o.irc, 0);
  EXPECT_EQ(o.rr.peer_private_data.size(), 508u);
  ic2.private_data.push_back(0);
  auto [c, s] = loopback_pair();
  Fd cf(c), sf(s);
  MpaResult r;
  EXPECT_EQ(mpa_initiate(cf.fd, ic2, &r), -EINVAL);
}

TEST(MpaNegotiateTest, RtrChoice) {
  MpaConfig ic, rc;
  ic.rtr = RtrType::Read;   // offered
  rc.rtr = RtrType::Write;  // preferred, but not offered: the responder takes Read
  Outcome o = negotiate(ic, rc);
  ASSERT_EQ(o.irc, 0);
  EXPECT_EQ(o.ir.rtr, RtrType::Read);
  EXPECT_EQ(o.rr.rtr, RtrType::Read);
  ic.rtr = RtrType::None;
  o = negotiate(ic, rc);
  ASSERT_EQ(o.irc, 0);
  EXPECT_EQ(o.ir.rtr, RtrType::None);
  EXPECT_EQ(o.rr.rtr, RtrType::None);
  ic.rtr = RtrType::Send;
  rc.rtr = RtrType::None;
  o = negotiate(ic, rc);
  ASSERT_EQ(o.irc, 0);
  EXPECT_EQ(o.ir.rtr, RtrType::None);
  EXPECT_STREQ(rtr_type_name(RtrType::Send), "Send");
}

TEST(MpaNegotiateTest, RequestIsByteExactAndFpduAfterReplyStaysUnread) {
  auto [c, s] = loopback_pair();
  Fd cf(c), sf(s);
  Bytes request;
  std::thread raw_responder([&] {
    request = recv_n(sf.fd, 26);
    const Bytes reply_and_fpdu = {
        'M',  'P',  'A',  ' ',  'I', 'D', ' ', 'R', 'e', 'p', ' ', 'F', 'r', 'a', 'm', 'e',  // key
        0x50,                    // C | enhanced (0x10)
        0x02,                    // Rev 2
        0x00, 0x04,              // PD_Length 4: the IRD/ORD word only
        0x80, 0x04,              // A (peer-to-peer) | IRD 4
        0x80, 0x08,              // C (RDMA Write RTR) | ORD 8
        0x00, 0x02, 0xab, 0xcd,  // first FPDU: ULPDU_Length 2 + data, same TCP segment
    };
    ASSERT_EQ(send(sf.fd, reply_and_fpdu.data(), reply_and_fpdu.size(), 0), 28);
  });
  MpaConfig ic;
  ic.private_data = str("ab");
  MpaResult r;
  ASSERT_EQ(mpa_initiate(cf.fd, ic, &r), 0);
  raw_responder.join();
  const Bytes expected = {
      0x4d, 0x50, 0x41, 0x20, 0x49, 0x44, 0x20, 0x52,  // "MPA ID R"
      0x65, 0x71, 0x20, 0x46, 0x72, 0x61, 0x6d, 0x65,  // "eq Frame"
      0x54,                                            // M=0 C=1 R=0, enhanced, RFC 7306 0x04
      0x02,                                            // Rev 2
      0x00, 0x06,                                      // PD_Length: 4 (IRD/ORD) + 2
      0x80, 0x10,                                      // A=1 B=0, IRD 16
      0x80, 0x10,                                      // C=1 (Write RTR) D=0, ORD 16
      0x61, 0x62,                                      // "ab"
  };
  EXPECT_EQ(request, expected);
  EXPECT_EQ(r.ord, 4);   // min(16, peer IRD 4)
  EXPECT_EQ(r.ird, 16);  // 16 already covers the peer's ORD 8
  EXPECT_EQ(r.rtr, RtrType::Write);
  EXPECT_FALSE(r.rdmap_ext);  // the Reply, like siw's, lacks the bit: no RFC 7306
  EXPECT_TRUE(r.peer_private_data.empty());
  // mpa_initiate stopped exactly at the frame boundary (RFC 5044 §7.1.2 rule 7).
  EXPECT_EQ(pending(cf.fd), (Bytes{0x00, 0x02, 0xab, 0xcd}));
}

// siw answers with the Request's own header (key and C/M rewritten, unknown Res bits kept), so
// its Reply echoes the RFC 7306 offer: that echo must not count as an acceptance.
TEST(MpaNegotiateTest, AnEchoedRfc7306OfferIsNotAnAcceptance) {
  auto [c, s] = loopback_pair();
  Fd cf(c), sf(s);
  std::thread echoing_responder([&] {
    Bytes request = recv_n(sf.fd, 24);  // header + IRD/ORD word, no private data
    ASSERT_EQ(request.size(), 24u);
    ASSERT_EQ(request[16] & 0x04, 0x04);  // the offer
    const std::string reply_key = "MPA ID Rep Frame";
    std::copy(reply_key.begin(), reply_key.end(), request.begin());
    ASSERT_EQ(send(sf.fd, request.data(), request.size(), 0), 24);
  });
  MpaConfig ic;
  MpaResult r;
  ASSERT_EQ(mpa_initiate(cf.fd, ic, &r), 0);
  echoing_responder.join();
  EXPECT_FALSE(r.rdmap_ext);
}

TEST(MpaNegotiateTest, ResponderLeavesFirstFpduInSocket) {
  auto [c, s] = loopback_pair();
  Fd cf(c), sf(s);
  const Bytes request_and_rtr = {
      'M',  'P',  'A',  ' ',  'I', 'D', ' ', 'R', 'e', 'q', ' ', 'F', 'r', 'a', 'm', 'e',  // key
      0x00,                    // M=0 C=0, no enhanced flag
      0x01,                    // Rev 1
      0x00, 0x01,              // PD_Length 1
      0x7a,                    // private data "z"
      0x00, 0x00, 0x11, 0x22,  // bytes of the first FPDU, same send()
  };
  ASSERT_EQ(send(cf.fd, request_and_rtr.data(), request_and_rtr.size(), 0), 25);
  MpaConfig rc;
  rc.crc = false;
  MpaResult r;
  ASSERT_EQ(mpa_respond(sf.fd, rc, &r), 0);
  EXPECT_EQ(r.revision, 1);
  EXPECT_FALSE(r.crc);
  EXPECT_EQ(r.peer_private_data, str("z"));
  EXPECT_EQ(pending(sf.fd), (Bytes{0x00, 0x00, 0x11, 0x22}));
  // The Reply: rev 1, C = 0 (neither side asked), no private data.
  Bytes reply = recv_n(cf.fd, 20);
  const Bytes expected = {
      0x4d, 0x50, 0x41, 0x20, 0x49, 0x44, 0x20, 0x52,  // "MPA ID R"
      0x65, 0x70, 0x20, 0x46, 0x72, 0x61, 0x6d, 0x65,  // "ep Frame"
      0x00,                                            // M=0 C=0 R=0
      0x01,                                            // Rev 1
      0x00, 0x00,                                      // PD_Length 0
  };
  EXPECT_EQ(reply, expected);
}

TEST(MpaNegotiateTest, GarbageKeyIsProtocolError) {
  auto [c, s] = loopback_pair();
  Fd cf(c), sf(s);
  const std::string http = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
  ASSERT_EQ(send(cf.fd, http.data(), http.size(), 0), static_cast<ssize_t>(http.size()));
  MpaConfig rc;
  MpaResult r;
  EXPECT_EQ(mpa_respond(sf.fd, rc, &r), -EPROTO);
  MpaConfig ic;
  MpaResult ir;
  // Send a *Request* to an initiator waiting for a Reply.
  auto [c3, s3] = loopback_pair();
  Fd cf3(c3), sf3(s3);
  std::thread t3([&] {
    recv_n(sf3.fd, 24);
    Bytes bad = {'M', 'P', 'A', ' ', 'I', 'D', ' ',  'R',  'e',  'q',
                 ' ', 'F', 'r', 'a', 'm', 'e', 0x40, 0x01, 0x00, 0x00};
    send(sf3.fd, bad.data(), bad.size(), 0);
  });
  EXPECT_EQ(mpa_initiate(cf3.fd, ic, &ir), -EPROTO);
  t3.join();
}

TEST(MpaNegotiateTest, BadHeaderFieldsAreProtocolErrors) {
  auto run = [](const Bytes& frame) {
    auto [c, s] = loopback_pair();
    Fd cf(c), sf(s);
    send(cf.fd, frame.data(), frame.size(), 0);
    MpaConfig rc;
    rc.timeout_ms = 500;
    MpaResult r;
    return mpa_respond(sf.fd, rc, &r);
  };
  Bytes key = {'M', 'P', 'A', ' ', 'I', 'D', ' ', 'R', 'e', 'q', ' ', 'F', 'r', 'a', 'm', 'e'};
  Bytes rev0 = key, big = key, v2short = key;
  rev0.insert(rev0.end(), {0x40, 0x00, 0x00, 0x00});              // Rev 0 (pre-IETF MPA)
  big.insert(big.end(), {0x40, 0x01, 0x02, 0x01});                // PD_Length 513 > 512
  v2short.insert(v2short.end(), {0x50, 0x02, 0x00, 0x02, 0, 0});  // enhanced, PD 2 < 4
  EXPECT_EQ(run(rev0), -EPROTO);
  EXPECT_EQ(run(big), -EPROTO);
  EXPECT_EQ(run(v2short), -EPROTO);
}

TEST(MpaNegotiateTest, ReplyWithHigherRevisionOrUnofferedRtrIsRejected) {
  auto script = [](uint8_t rev, uint8_t flags, const Bytes& pd, const MpaConfig& ic) {
    auto [c, s] = loopback_pair();
    Fd cf(c), sf(s);
    std::thread t([&] {
      recv_n(sf.fd, 20 + (ic.revision == 2 ? 4 : 0) + ic.private_data.size());
      Bytes rep = {'M', 'P', 'A', ' ', 'I', 'D', ' ',   'R', 'e',  'p',
                   ' ', 'F', 'r', 'a', 'm', 'e', flags, rev, 0x00, static_cast<uint8_t>(pd.size())};
      rep.insert(rep.end(), pd.begin(), pd.end());
      send(sf.fd, rep.data(), rep.size(), 0);
    });
    MpaResult r;
    int rc = mpa_initiate(cf.fd, ic, &r);
    t.join();
    return rc;
  };
  MpaConfig v1;
  v1.revision = 1;
  EXPECT_EQ(script(2, 0x40, {}, v1), -EPROTO);  // Reply rev 2 to a rev 1 Request
  MpaConfig v2;                                 // offers Write RTR
  EXPECT_EQ(script(2, 0x50, {0xc0, 0x10, 0x00, 0x10}, v2), -EPROTO);        // picks Send (B)
  EXPECT_EQ(script(2, 0x50, {0x80, 0x10, 0xc0, 0x10}, v2), -EPROTO);        // picks two types
  EXPECT_EQ(script(2, 0x50, {0x80, 0x10, 0x80, 0x10}, v2), 0);              // picks Write: fine
  EXPECT_EQ(script(2, 0x70, {0x80, 0x10, 0x80, 0x10}, v2), -ECONNREFUSED);  // R = 1
}

TEST(MpaNegotiateTest, TimeoutAndPeerClose) {
  auto [c, s] = loopback_pair();
  Fd cf(c), sf(s);
  MpaConfig ic;
  ic.timeout_ms = 100;
  MpaResult r;
  auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(mpa_initiate(cf.fd, ic, &r), -ETIMEDOUT);  // the responder never answers
  EXPECT_GE(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(90));
  // Responder whose peer closes mid-Request.
  auto [c2, s2] = loopback_pair();
  Fd sf2(s2);
  {
    Fd cf2(c2);
    send(cf2.fd, "MPA ID", 6, 0);
  }
  MpaConfig rc;
  EXPECT_EQ(mpa_respond(sf2.fd, rc, &r), -ECONNRESET);
}

TEST(MpaNegotiateTest, BadConfigIsEinval) {
  auto [c, s] = loopback_pair();
  Fd cf(c), sf(s);
  MpaResult r;
  MpaConfig bad;
  bad.revision = 3;
  EXPECT_EQ(mpa_initiate(cf.fd, bad, &r), -EINVAL);
  bad.revision = 2;
  bad.ird = 0x4000;  // IRD is a 14-bit field (RFC 6581)
  EXPECT_EQ(mpa_respond(sf.fd, bad, &r), -EINVAL);
}

}  // namespace
}  // namespace uiw::transport
