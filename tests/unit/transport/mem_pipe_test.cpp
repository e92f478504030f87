// In-memory pipe: short I/O, backpressure, readiness eventfd, half close, reset, threads.
#include <gtest/gtest.h>
#include <poll.h>

#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "transport/byte_stream.h"

namespace uiw::transport {
namespace {

IoResult write_str(ByteStream& s, const std::string& str) {
  iovec v{const_cast<char*>(str.data()), str.size()};
  return s.writev(&v, 1);
}

std::string read_n(ByteStream& s, size_t n, IoResult* res = nullptr) {
  std::string out(n, '\0');
  iovec v{out.data(), n};
  IoResult r = s.readv(&v, 1);
  if (res) *res = r;
  out.resize(r.status == IoStatus::Ok ? r.bytes : 0);
  return out;
}

bool readable(const ByteStream& s) {
  pollfd p{s.fd(), POLLIN, 0};
  return poll(&p, 1, 0) == 1 && (p.revents & POLLIN);
}

TEST(MemPipeTest, RoundTripAcrossSeveralIovecs) {
  auto [a, b] = make_mem_pipe();
  char h1[] = "head", h2[] = "er+", h3[] = "payload";
  iovec out[3] = {{h1, 4}, {h2, 3}, {h3, 7}};
  IoResult w = a->writev(out, 3);
  EXPECT_EQ(w.status, IoStatus::Ok);
  EXPECT_EQ(w.bytes, 14u);
  // Directed read: 6 bytes into one buffer, the rest into another.
  char d1[6] = {}, d2[20] = {};
  iovec in[2] = {{d1, 6}, {d2, 20}};
  IoResult r = b->readv(in, 2);
  ASSERT_EQ(r.status, IoStatus::Ok);
  EXPECT_EQ(r.bytes, 14u);
  EXPECT_EQ(std::string(d1, 6), "header");
  EXPECT_EQ(std::string(d2, 8), "+payload");
  EXPECT_EQ(read_n(*b, 4, &r), "");
  EXPECT_EQ(r.status, IoStatus::WouldBlock);
  // And the other direction is independent.
  EXPECT_EQ(write_str(*b, "back").bytes, 4u);
  EXPECT_EQ(read_n(*a, 10), "back");
}

TEST(MemPipeTest, MaxChunkGivesShortReadsAndWrites) {
  auto [a, b] = make_mem_pipe(1024, 3);
  IoResult w = write_str(*a, "abcdefgh");
  EXPECT_EQ(w.status, IoStatus::Ok);
  EXPECT_EQ(w.bytes, 3u);
  EXPECT_EQ(write_str(*a, "defgh").bytes, 3u);
  EXPECT_EQ(write_str(*a, "gh").bytes, 2u);
  std::string got;
  IoResult r;
  for (std::string part; !(part = read_n(*b, 100, &r)).empty();) {
    EXPECT_LE(part.size(), 3u);
    got += part;
  }
  EXPECT_EQ(r.status, IoStatus::WouldBlock);
  EXPECT_EQ(got, "abcdefgh");
}

TEST(MemPipeTest, CapacityBoundsBufferAndWouldBlockThenReadiness) {
  auto [a, b] = make_mem_pipe(8);
  EXPECT_FALSE(readable(*a));
  EXPECT_FALSE(readable(*b));
  IoResult w = write_str(*a, "0123456789");
  EXPECT_EQ(w.bytes, 8u);  // partial write: only the capacity fits
  EXPECT_TRUE(readable(*b));
  w = write_str(*a, "89");
  EXPECT_EQ(w.status, IoStatus::WouldBlock);
  EXPECT_EQ(w.bytes, 0u);
  EXPECT_FALSE(readable(*a));  // blocked writer: not ready until the reader frees space
  EXPECT_EQ(read_n(*b, 3), "012");
  EXPECT_TRUE(readable(*a));  // space again: the blocked writer is woken
  EXPECT_EQ(write_str(*a, "89").bytes, 2u);
  EXPECT_FALSE(readable(*a));
  // Ring wrap-around keeps order.
  EXPECT_EQ(read_n(*b, 100), "3456789");
  EXPECT_FALSE(readable(*b));
  EXPECT_EQ(read_n(*b, 1), "");
}

TEST(MemPipeTest, ZeroLengthIoIsOkNotEof) {
  auto [a, b] = make_mem_pipe();
  iovec none{nullptr, 0};
  EXPECT_EQ(a->writev(&none, 1).status, IoStatus::Ok);
  EXPECT_EQ(b->readv(&none, 1).status, IoStatus::Ok);
  EXPECT_EQ(b->readv(&none, 0).bytes, 0u);
}

TEST(MemPipeTest, ShutdownWriteDeliversDataThenEof) {
  auto [a, b] = make_mem_pipe();
  EXPECT_EQ(write_str(*a, "last").bytes, 4u);
  a->shutdown_write();
  IoResult w = write_str(*a, "more");
  EXPECT_EQ(w.status, IoStatus::Error);
  EXPECT_EQ(w.err, EPIPE);
  IoResult r;
  EXPECT_EQ(read_n(*b, 100, &r), "last");
  read_n(*b, 100, &r);
  EXPECT_EQ(r.status, IoStatus::Closed);
  EXPECT_TRUE(readable(*b));  // EOF is a readable condition, like a socket
  // Half close: b can still send to a.
  EXPECT_EQ(write_str(*b, "reply").bytes, 5u);
  EXPECT_EQ(read_n(*a, 100), "reply");
}

TEST(MemPipeTest, AbortResetsBothDirections) {
  auto [a, b] = make_mem_pipe();
  EXPECT_EQ(write_str(*a, "lost").bytes, 4u);
  EXPECT_EQ(write_str(*b, "lost too").bytes, 8u);
  a->abort();
  IoResult r;
  read_n(*b, 100, &r);
  EXPECT_EQ(r.status, IoStatus::Error);  // RST discards buffered data
  EXPECT_EQ(r.err, ECONNRESET);
  IoResult w = write_str(*b, "x");
  EXPECT_EQ(w.status, IoStatus::Error);
  EXPECT_EQ(w.err, ECONNRESET);
  EXPECT_TRUE(readable(*b));
  read_n(*a, 100, &r);
  EXPECT_EQ(r.status, IoStatus::Closed);  // the aborting end is closed
  EXPECT_EQ(write_str(*a, "x").status, IoStatus::Closed);
}

TEST(MemPipeTest, DestroyingAnEndIsClose) {
  auto [a, b] = make_mem_pipe();
  EXPECT_EQ(write_str(*a, "bye").bytes, 3u);
  a.reset();
  IoResult r;
  EXPECT_EQ(read_n(*b, 100, &r), "bye");
  read_n(*b, 100, &r);
  EXPECT_EQ(r.status, IoStatus::Closed);
  IoResult w = write_str(*b, "anyone?");
  EXPECT_EQ(w.status, IoStatus::Error);
  EXPECT_EQ(w.err, EPIPE);
}

TEST(MemPipeTest, EmssDefaultAndOption) {
  auto [a, b] = make_mem_pipe();
  EXPECT_EQ(a->emss(), 1460u);
  MemPipeOptions o;
  o.emss = 9000;
  auto [c, d] = make_mem_pipe(o);
  EXPECT_EQ(d->emss(), 9000u);
  EXPECT_GE(c->fd(), 0);
  EXPECT_NE(c->fd(), d->fd());
  EXPECT_STREQ(io_status_name(IoStatus::WouldBlock), "WouldBlock");
}

TEST(MemPipeTest, ThreadsMoveAMegabyteThroughShortChunksAndPoll) {
  auto [a, b] = make_mem_pipe(4096, 1000);
  constexpr size_t kTotal = 1 << 20;
  std::vector<uint8_t> src(kTotal), dst(kTotal);
  for (size_t i = 0; i < kTotal; ++i) src[i] = static_cast<uint8_t>(i * 7 + (i >> 9));
  std::thread writer([&, &a = a] {
    size_t off = 0;
    while (off < kTotal) {
      iovec v{src.data() + off, std::min<size_t>(kTotal - off, 3000)};
      IoResult w = a->writev(&v, 1);
      if (w.status == IoStatus::WouldBlock) {
        pollfd p{a->fd(), POLLIN, 0};
        poll(&p, 1, 1000);
        continue;
      }
      ASSERT_EQ(w.status, IoStatus::Ok);
      off += w.bytes;
    }
    a->shutdown_write();
  });
  // One spare byte: the reader asks for more than was sent, so only EOF can end the loop.
  dst.resize(kTotal + 1);
  size_t off = 0;
  for (;;) {
    iovec v{dst.data() + off, dst.size() - off};
    IoResult r = b->readv(&v, 1);
    if (r.status == IoStatus::Closed) break;
    if (r.status == IoStatus::WouldBlock) {
      pollfd p{b->fd(), POLLIN, 0};
      poll(&p, 1, 1000);
      continue;
    }
    ASSERT_EQ(r.status, IoStatus::Ok);
    ASSERT_LE(r.bytes, 1000u);
    off += r.bytes;
  }
  dst.resize(kTotal);
  writer.join();
  EXPECT_EQ(off, kTotal);
  EXPECT_EQ(src, dst);
}

}  // namespace
}  // namespace uiw::transport
