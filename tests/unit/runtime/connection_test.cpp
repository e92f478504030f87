// runtime::Connection at the edge of a stream that failed: the peer closed its side (EOF),
// then a write of the rest of a partly written FPDU fails (as SCTP refuses sends once the
// peer's SHUTDOWN arrived). The progress driver must then go idle, not retry forever.
#include "runtime/connection.h"

#include <gtest/gtest.h>
#include <sys/uio.h>

#include <algorithm>
#include <cerrno>
#include <memory>
#include <vector>

#include "unit/engine/qp_pair.h"

namespace uiw::transport {
namespace {

// A stream whose script the test sets: reads say WouldBlock until `eof`, then Closed. The
// first write takes `first_write` octets, the second would block, every later one fails with
// EPIPE.
class ScriptedStream final : public ByteStream {
 public:
  struct Script {
    bool eof = false;
    size_t first_write = 10;
    int writes = 0;
  };
  explicit ScriptedStream(Script* s) : s_(s) {}
  IoResult readv(const iovec*, int) override {
    return s_->eof ? IoResult{IoStatus::Closed, 0, 0} : IoResult{IoStatus::WouldBlock, 0, 0};
  }
  IoResult writev(const iovec* iov, int n) override {
    size_t total = 0;
    for (int i = 0; i < n; ++i) total += iov[i].iov_len;
    ++s_->writes;
    if (s_->writes == 1) return {IoStatus::Ok, std::min(total, s_->first_write), 0};
    if (s_->writes == 2) return {IoStatus::WouldBlock, 0, 0};
    return {IoStatus::Error, 0, EPIPE};
  }
  int fd() const override { return -1; }
  void shutdown_write() override {}
  void abort() override {}
  uint32_t emss() const override { return 1460; }

 private:
  Script* s_;
};

TEST(ConnectionTest, AFailedWriteAfterThePeersEofEndsTransmitting) {
  using namespace engine;
  ScriptedStream::Script script;
  test::Side a(1);
  ConnParams p;
  p.initiator = true;
  a.qp->start(p);
  runtime::Connection c(a.qp.get(), std::make_unique<ScriptedStream>(&script));

  std::vector<uint8_t> src(100, 0x5a);
  SendWr w;
  w.wr_id = 1;
  w.flags = kSendSignaled;
  w.num_sge = 1;
  w.sg_list[0] = test::sge_of(src, a.reg_mr(src, 0));
  ASSERT_EQ(a.qp->post_send(w), 0);
  EXPECT_TRUE(c.progress());  // 10 octets of the FPDU go out, then the socket is full
  ASSERT_EQ(script.writes, 2);
  ASSERT_FALSE(c.finished());

  // The peer's clean close (RDMAP §5.4: the Qp enters Error) arrives before the rest could be
  // written; writing the rest then fails.
  script.eof = true;
  EXPECT_TRUE(c.progress());
  EXPECT_EQ(a.qp->state(), QpState::Error);
  EXPECT_TRUE(a.has_event(QpEvent::Closed));
  ASSERT_EQ(script.writes, 3);
  EXPECT_TRUE(c.finished());
  for (int i = 0; i < 10; ++i) EXPECT_FALSE(c.progress()) << "pass " << i;
  EXPECT_EQ(script.writes, 3);  // no write was tried again
  const auto sc = a.poll_send();
  ASSERT_EQ(sc.size(), 1u);
  EXPECT_EQ(sc[0].status, WcStatus::WrFlushErr);
}

}  // namespace
}  // namespace uiw::transport
