// SctpStream over real loopback SCTP associations, and two engine Qps in SCTP mode driven by
// runtime::Connection over it (RFC 5043). Needs kernel SCTP: skipped where socket(IPPROTO_SCTP)
// fails (the build host); tests/system/sctp_transport.sh runs them in the VM (modprobe sctp).
#include "transport/sctp_stream.h"

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <memory>
#include <vector>

#include "runtime/connection.h"
#include "unit/engine/qp_pair.h"
#include "wire/bytes.h"
#include "wire/sctp.h"

namespace uiw::transport {
namespace {

bool have_sctp() {
  const int fd = socket(AF_INET, SOCK_STREAM, IPPROTO_SCTP);
  if (fd < 0) return false;
  close(fd);
  return true;
}

#define REQUIRE_SCTP() \
  if (!have_sctp()) GTEST_SKIP() << "no kernel SCTP here (modprobe sctp)"

struct Assoc {
  int c = -1, s = -1;
  Assoc() {
    uint16_t port = 0;
    const int l = sctp_listen("127.0.0.1", 0, &port);
    EXPECT_GE(l, 0);
    c = sctp_connect("127.0.0.1", port, 5000);
    EXPECT_GE(c, 0);
    s = sctp_accept(l, 5000);
    EXPECT_GE(s, 0);
    close(l);
  }
};

std::vector<uint8_t> read_record(SctpStream& s) {
  std::vector<uint8_t> out;
  uint8_t buf[4096];
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (std::chrono::steady_clock::now() < deadline) {
    iovec v{buf, out.size() < 8 ? 8 - out.size()
                                : std::min<size_t>(sizeof buf, 8 + wire::load_be32(out.data() + 4) -
                                                                   out.size())};
    if (v.iov_len == 0) break;
    const IoResult r = s.readv(&v, 1);
    if (r.status == IoStatus::WouldBlock) {
      pollfd p{s.fd(), POLLIN, 0};
      poll(&p, 1, 100);
      continue;
    }
    if (r.status != IoStatus::Ok) break;
    out.insert(out.end(), buf, buf + r.bytes);
  }
  return out;
}

TEST(SctpStreamTest, BothEndsSeeTheDdpAdaptationIndication) {
  REQUIRE_SCTP();
  Assoc a;
  uint32_t ind = 0;
  // RFC 5043 §11.1: each side MUST verify the peer's indication is DDP (1).
  ASSERT_EQ(sctp_peer_adaptation(a.c, &ind, 2000), 0);
  EXPECT_EQ(ind, wire::kDdpAdaptationIndication);
  ind = 0;
  ASSERT_EQ(sctp_peer_adaptation(a.s, &ind, 2000), 0);
  EXPECT_EQ(ind, wire::kDdpAdaptationIndication);
  close(a.c);
  close(a.s);
}

TEST(SctpStreamTest, MessagesKeepBoundariesAndPpids) {
  REQUIRE_SCTP();
  Assoc a;
  SctpStream tx(a.c), rx(a.s);
  EXPECT_GE(tx.emss(), wire::kSctpMinMaxSegment);  // RFC 5043 §9 floor
  EXPECT_LE(tx.emss(), 65535u);
  // A DDP Segment Chunk split over two iovecs: DDP-SSN 1 | DDP control 0xC1 | ...
  uint8_t seg_head[] = {0x00, 0x01, 0xC1, 0x40};
  std::vector<uint8_t> seg_body(60000);
  engine::test::fill_pattern(seg_body, 3);
  iovec v1[2] = {{seg_head, sizeof seg_head}, {seg_body.data(), seg_body.size()}};
  IoResult w = tx.writev(v1, 2);
  ASSERT_EQ(w.status, IoStatus::Ok);
  EXPECT_EQ(w.bytes, 60004u);
  // Session Terminate: DDP-SSN 2 | Function Code 4.
  uint8_t term[] = {0x00, 0x02, 0x00, 0x04};
  iovec v2{term, sizeof term};
  ASSERT_EQ(tx.writev(&v2, 1).status, IoStatus::Ok);
  std::vector<uint8_t> r1 = read_record(rx);
  ASSERT_EQ(r1.size(), 8u + 60004);
  EXPECT_EQ(wire::load_be32(r1.data()), wire::kPpidDdpSegment);
  EXPECT_EQ(wire::load_be32(r1.data() + 4), 60004u);
  EXPECT_TRUE(std::equal(seg_body.begin(), seg_body.end(), r1.begin() + 12));
  std::vector<uint8_t> r2 = read_record(rx);
  ASSERT_EQ(r2.size(), 12u);
  EXPECT_EQ(wire::load_be32(r2.data()), wire::kPpidSessionControl);
  EXPECT_EQ(0, std::memcmp(r2.data() + 8, term, 4));
  tx.shutdown_write();
  uint8_t b[16];
  iovec v{b, sizeof b};
  IoResult r{IoStatus::WouldBlock, 0, 0};
  for (int i = 0; i < 100 && r.status == IoStatus::WouldBlock; ++i) {
    pollfd p{rx.fd(), POLLIN, 0};
    poll(&p, 1, 50);
    r = rx.readv(&v, 1);
  }
  EXPECT_EQ(r.status, IoStatus::Closed);
  EXPECT_EQ(rx.messages_in(), 2u);
}

// Two Qps in SCTP mode (a initiates), each behind a runtime::Connection over its SctpStream.
struct EnginePair {
  Assoc as;
  engine::test::Side a{1}, b{2};
  std::unique_ptr<runtime::Connection> ca, cb;
  explicit EnginePair(uint32_t ord_ird) {
    auto sa = std::make_unique<SctpStream>(as.c);
    auto sb = std::make_unique<SctpStream>(as.s);
    engine::ConnParams p;
    p.llp = engine::Llp::Sctp;
    p.mulpdu = sa->emss();
    p.ord = p.ird = ord_ird;
    p.initiator = true;
    a.qp->start(p);
    p.initiator = false;
    p.mulpdu = sb->emss();
    b.qp->start(p);
    ca = std::make_unique<runtime::Connection>(a.qp.get(), std::move(sa));
    cb = std::make_unique<runtime::Connection>(b.qp.get(), std::move(sb));
  }
};

TEST(SctpStreamTest, EngineSendsWritesReadsAndClosesOverSctp) {
  REQUIRE_SCTP();
  using namespace engine;
  using engine::test::sge_of;
  using engine::test::Side;
  EnginePair pair(8);
  Side& a = pair.a;
  Side& b = pair.b;
  runtime::Connection& ca = *pair.ca;
  runtime::Connection& cb = *pair.cb;

  constexpr int kSends = 100;
  std::vector<std::vector<uint8_t>> src, dst;
  for (int i = 0; i < kSends; ++i) {
    src.emplace_back((i * 6553) % 65001);
    engine::test::fill_pattern(src.back(), i);
    dst.emplace_back(65000, 0);
    RecvWr r;
    r.wr_id = i;
    r.num_sge = 1;
    r.sg_list[0] = sge_of(dst.back(), b.reg_mr(dst.back(), memory::kLocalWrite));
    ASSERT_EQ(b.qp->post_recv(r), 0);
  }
  std::vector<uint8_t> remote(200000), back(200000);
  engine::test::fill_pattern(remote, 77);
  const memory::Stag rk = b.reg_mr(remote, memory::kRemoteRead);
  for (int i = 0; i < kSends; ++i) {
    SendWr w;
    w.wr_id = i;
    w.num_sge = src[i].empty() ? 0 : 1;
    w.sg_list[0] = sge_of(src[i], a.reg_mr(src[i], 0));
    ASSERT_EQ(a.qp->post_send(w), 0);
  }
  SendWr rd;
  rd.wr_id = 999;
  rd.opcode = WrOpcode::RdmaRead;
  rd.flags = kSendSignaled;
  rd.num_sge = 1;
  rd.sg_list[0] = sge_of(back, a.reg_mr(back, memory::kLocalWrite));
  rd.remote_stag = rk;
  rd.remote_addr = reinterpret_cast<uint64_t>(remote.data());
  ASSERT_EQ(a.qp->post_send(rd), 0);

  std::vector<Completion> rc, sc;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while ((rc.size() < kSends || sc.empty()) && std::chrono::steady_clock::now() < deadline) {
    if (!ca.progress() && !cb.progress()) {
      pollfd pf[2] = {{ca.fd(), POLLIN, 0}, {cb.fd(), POLLIN, 0}};
      poll(pf, 2, 10);
    }
    for (auto& c : b.poll_recv()) rc.push_back(c);
    for (auto& c : a.poll_send()) sc.push_back(c);
  }
  ASSERT_EQ(rc.size(), static_cast<size_t>(kSends));
  for (int i = 0; i < kSends; ++i) {
    EXPECT_EQ(rc[i].status, WcStatus::Success);
    EXPECT_EQ(rc[i].byte_len, src[i].size());
    EXPECT_TRUE(std::equal(src[i].begin(), src[i].end(), dst[i].begin())) << i;
  }
  ASSERT_EQ(sc.size(), 1u);
  EXPECT_EQ(sc[0].wr_id, 999u);
  EXPECT_EQ(sc[0].status, WcStatus::Success);
  EXPECT_EQ(back, remote);
  // Every message was one DDP segment no larger than the association allows (RFC 5043 §9).
  EXPECT_GT(a.qp->stats().tx_fpdus, static_cast<uint64_t>(kSends));
  EXPECT_LE(a.qp->params().mulpdu, 65535u);

  // Graceful close: Session Terminate, SHUTDOWN, and the peer sees Closed.
  a.qp->close();
  const auto d2 = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!(ca.finished() && cb.finished()) && std::chrono::steady_clock::now() < d2) {
    ca.progress();
    cb.progress();
    if (b.qp->state() == QpState::Error) b.qp->close();
    usleep(1000);
  }
  EXPECT_TRUE(b.has_event(QpEvent::Closed));
  EXPECT_EQ(b.qp->terminate_received(), std::nullopt);
}

// SCTP has no half-close: the side that sends SHUTDOWN never sees its receive side shut.
// Its Qp must still learn that the association ended (SHUTDOWN COMPLETE notification) and
// flush, with no close from the peer's application (as rping's client after rdma_disconnect).
TEST(SctpStreamTest, TheSideThatShutsDownSeesTheAssociationEnd) {
  REQUIRE_SCTP();
  using namespace engine;
  using engine::test::sge_of;
  EnginePair e(0);
  std::vector<uint8_t> dst(64);
  RecvWr r;
  r.wr_id = 7;
  r.num_sge = 1;
  r.sg_list[0] = sge_of(dst, e.a.reg_mr(dst, memory::kLocalWrite));
  ASSERT_EQ(e.a.qp->post_recv(r), 0);

  e.a.qp->close();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while ((e.a.qp->state() != QpState::Error || e.b.qp->state() != QpState::Error) &&
         std::chrono::steady_clock::now() < deadline) {
    if (!e.ca->progress() && !e.cb->progress()) {
      pollfd pf[2] = {{e.ca->fd(), POLLIN, 0}, {e.cb->fd(), POLLIN, 0}};
      poll(pf, 2, 10);
    }
  }
  EXPECT_EQ(e.a.qp->state(), QpState::Error);
  EXPECT_EQ(e.b.qp->state(), QpState::Error);
  EXPECT_TRUE(e.a.has_event(QpEvent::Closed));
  EXPECT_FALSE(e.a.has_event(QpEvent::LlpError));
  EXPECT_TRUE(e.b.has_event(QpEvent::Closed));
  const auto rc = e.a.poll_recv();
  ASSERT_EQ(rc.size(), 1u);
  EXPECT_EQ(rc[0].wr_id, 7u);
  EXPECT_EQ(rc[0].status, WcStatus::WrFlushErr);
}

}  // namespace
}  // namespace uiw::transport
