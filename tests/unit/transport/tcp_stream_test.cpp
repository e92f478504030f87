// TcpStream over real loopback sockets, and the socket helpers.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>

#include <cerrno>
#include <chrono>
#include <string>
#include <vector>

#include "transport/byte_stream.h"
#include "transport/socket_util.h"
#include "unit/transport/loopback.h"

namespace uiw::transport {
namespace {

using test::loopback_pair;

bool wait_readable(int fd, int ms = 2000) {
  pollfd p{fd, POLLIN, 0};
  return poll(&p, 1, ms) == 1;
}

struct Pair {
  std::unique_ptr<TcpStream> c, s;
  Pair() {
    auto [cf, sf] = loopback_pair();
    EXPECT_GE(cf, 0);
    EXPECT_GE(sf, 0);
    c = std::make_unique<TcpStream>(cf);
    s = std::make_unique<TcpStream>(sf);
  }
};

TEST(TcpStreamTest, SetsNonBlockingAndNoDelayAndReportsMss) {
  Pair p;
  EXPECT_TRUE(fcntl(p.c->fd(), F_GETFL) & O_NONBLOCK);
  int nd = 0;
  socklen_t len = sizeof nd;
  ASSERT_EQ(getsockopt(p.s->fd(), IPPROTO_TCP, TCP_NODELAY, &nd, &len), 0);
  EXPECT_NE(nd, 0);
  // Loopback MTU 65536: the MSS is far above the Ethernet 1460 but below 64 KiB.
  EXPECT_GT(p.c->emss(), 1000u);
  EXPECT_LT(p.c->emss(), 65536u);
}

TEST(TcpStreamTest, WritevAndDirectedReadvIntoSeveralIovecs) {
  Pair p;
  char hdr[] = "\x00\x0a", body[] = "0123456789", crc[] = "CRC!";
  iovec out[3] = {{hdr, 2}, {body, 10}, {crc, 4}};
  IoResult w = p.c->writev(out, 3);
  ASSERT_EQ(w.status, IoStatus::Ok);
  EXPECT_EQ(w.bytes, 16u);
  ASSERT_TRUE(wait_readable(p.s->fd()));
  // Header into one buffer, payload into the "registered region", trailer into a third.
  uint8_t h[2], region[10], t[4];
  iovec in[3] = {{h, 2}, {region, 10}, {t, 4}};
  size_t got = 0;
  while (got < 16) {
    IoResult r = p.s->readv(in, 3);  // loopback delivers 16 bytes in one go
    ASSERT_EQ(r.status, IoStatus::Ok);
    got += r.bytes;
  }
  EXPECT_EQ(h[0], 0x00);
  EXPECT_EQ(h[1], 0x0a);
  EXPECT_EQ(std::string(reinterpret_cast<char*>(region), 10), "0123456789");
  EXPECT_EQ(std::string(reinterpret_cast<char*>(t), 4), "CRC!");
}

TEST(TcpStreamTest, EmptySocketWouldBlockAndZeroLengthIsOk) {
  Pair p;
  char b[8];
  iovec v{b, sizeof b};
  EXPECT_EQ(p.s->readv(&v, 1).status, IoStatus::WouldBlock);
  iovec none{nullptr, 0};
  EXPECT_EQ(p.s->readv(&none, 1).status, IoStatus::Ok);
  EXPECT_EQ(p.s->writev(&none, 1).bytes, 0u);
}

// The handed-over socket belongs to the application, which may make it blocking again: reads
// and writes still never wait (SO_RCVTIMEO bounds how long the old readv blocked).
TEST(TcpStreamTest, NeverBlocksWhenTheApplicationClearsNonBlocking) {
  Pair p;
  const int fd = p.s->fd();
  ASSERT_EQ(fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK), 0);
  const timeval two_s{2, 0};
  ASSERT_EQ(setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &two_s, sizeof two_s), 0);
  uint8_t a[16], b[16];
  for (const int iovcnt : {1, 2}) {
    iovec in[2] = {{a, sizeof a}, {b, sizeof b}};
    const auto t0 = std::chrono::steady_clock::now();
    EXPECT_EQ(p.s->readv(in, iovcnt).status, IoStatus::WouldBlock) << iovcnt;
    EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(500)) << iovcnt;
  }
  char one[] = "x";
  iovec out{one, 1};
  EXPECT_EQ(p.s->writev(&out, 1).status, IoStatus::Ok);
}

TEST(TcpStreamTest, FinIsClosedAfterTheData) {
  Pair p;
  char m[] = "tail";
  iovec v{m, 4};
  ASSERT_EQ(p.c->writev(&v, 1).bytes, 4u);
  p.c->shutdown_write();
  char b[16];
  iovec in{b, sizeof b};
  size_t got = 0;
  IoResult r{};
  while (wait_readable(p.s->fd()) && (r = p.s->readv(&in, 1)).status == IoStatus::Ok)
    got += r.bytes;
  EXPECT_EQ(got, 4u);
  EXPECT_EQ(r.status, IoStatus::Closed);
  // Half close: the other direction still works.
  ASSERT_EQ(p.s->writev(&v, 1).bytes, 4u);
  ASSERT_TRUE(wait_readable(p.c->fd()));
  EXPECT_EQ(p.c->readv(&in, 1).bytes, 4u);
}

TEST(TcpStreamTest, PeerAbortIsErrorConnReset) {
  Pair p;
  p.c->abort();
  EXPECT_EQ(p.c->fd(), -1);
  char b[8];
  iovec v{b, sizeof b};
  EXPECT_EQ(p.c->readv(&v, 1).status, IoStatus::Closed);
  EXPECT_EQ(p.c->writev(&v, 1).status, IoStatus::Closed);
  ASSERT_TRUE(wait_readable(p.s->fd()));
  IoResult r = p.s->readv(&v, 1);
  EXPECT_EQ(r.status, IoStatus::Error);
  EXPECT_EQ(r.err, ECONNRESET);
  // Writing to a reset connection fails (EPIPE) without raising SIGPIPE (MSG_NOSIGNAL).
  IoResult w = p.s->writev(&v, 1);
  EXPECT_EQ(w.status, IoStatus::Error);
  EXPECT_TRUE(w.err == EPIPE || w.err == ECONNRESET) << w.err;
}

TEST(TcpStreamTest, WritevWouldBlockWhenBuffersFill) {
  Pair p;
  std::vector<uint8_t> chunk(1 << 16, 0xab);
  iovec v{chunk.data(), chunk.size()};
  size_t total = 0;
  IoResult w{};
  for (int i = 0; i < 10000; ++i) {
    w = p.c->writev(&v, 1);
    if (w.status != IoStatus::Ok) break;
    total += w.bytes;
  }
  EXPECT_EQ(w.status, IoStatus::WouldBlock);
  EXPECT_GT(total, 0u);
}

// Bytes the peer never acknowledged before it reset the connection stay counted by the socket
// (SIOCOUTQ), but nothing will acknowledge them: they are not "unacknowledged" in the sense of
// a FIN waiting for them (runtime::Connection::kFinAckWaitNs).
TEST(TcpStreamTest, UnacknowledgedIsWhatThePeerMayStillAcknowledge) {
  Pair p;
  EXPECT_FALSE(p.c->unacknowledged());
  std::vector<uint8_t> chunk(1 << 16, 0xab);
  iovec v{chunk.data(), chunk.size()};
  for (int i = 0; i < 10000 && p.c->writev(&v, 1).status == IoStatus::Ok; ++i) {
  }
  EXPECT_TRUE(p.c->unacknowledged()) << "a full window of unread data is not acknowledged";
  p.s->abort();
  ASSERT_TRUE(wait_readable(p.c->fd()));
  EXPECT_EQ(p.c->readv(&v, 1).status, IoStatus::Error);
  EXPECT_FALSE(p.c->unacknowledged()) << "a reset connection still waits for acknowledgements";
}

TEST(SocketUtilTest, ErrorsAndIpv6) {
  EXPECT_EQ(tcp_listen("not an ip", 0, nullptr), -EINVAL);
  EXPECT_EQ(tcp_connect("999.1.1.1", 1, 100), -EINVAL);
  // Nothing listens on the port we just closed.
  uint16_t port = 0;
  int l = tcp_listen("127.0.0.1", 0, &port);
  ASSERT_GE(l, 0);
  EXPECT_EQ(tcp_accept(l, 50), -ETIMEDOUT);
  close(l);
  EXPECT_EQ(tcp_connect("127.0.0.1", port, 1000), -ECONNREFUSED);
  int l6 = tcp_listen("::1", 0, &port);
  if (l6 == -EADDRNOTAVAIL || l6 == -EAFNOSUPPORT) GTEST_SKIP() << "no IPv6 loopback";
  ASSERT_GE(l6, 0);
  int c = tcp_connect("::1", port, 1000);
  ASSERT_GE(c, 0);
  int s = tcp_accept(l6, 1000);
  ASSERT_GE(s, 0);
  EXPECT_FALSE(fcntl(s, F_GETFL) & O_NONBLOCK);  // helpers hand out blocking sockets
  EXPECT_FALSE(fcntl(c, F_GETFL) & O_NONBLOCK);
  close(c);
  close(s);
  close(l6);
}

}  // namespace
}  // namespace uiw::transport
