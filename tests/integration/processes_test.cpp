// Two engines in two processes (fork) over loopback TCP: an echo server that also exposes a
// region for RDMA Read and Write, driven by its own progress thread.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>

#include "integration/support/endpoint.h"
#include "test_util.h"
#include "wire/bytes.h"

namespace uiw::test {
namespace {

using engine::RecvWr;
using engine::SendWr;
using engine::WcStatus;
using engine::WrOpcode;

constexpr size_t kRegion = 4 << 20;
constexpr int kEchoes = 40;

// Child: advertise a region (STag + address in the first Send), echo every message back, exit
// 0 when the client closed and every echo went out.
int run_server(int listen_fd, LinkOptions opts) {
  Endpoint ep(2);
  if (ep.accept(listen_fd, opts) != 0) return 10;
  std::vector<uint8_t> region(kRegion);
  fill(region, 1234);
  const auto rk = ep.reg(region, memory::kLocalWrite | memory::kRemoteRead | memory::kRemoteWrite);
  std::vector<std::vector<uint8_t>> bufs(kEchoes, std::vector<uint8_t>(1 << 20));
  std::vector<memory::Stag> keys;
  for (int i = 0; i < kEchoes; ++i) {
    keys.push_back(ep.reg(bufs[i], memory::kLocalWrite));
    RecvWr r;
    r.wr_id = i;
    r.num_sge = 1;
    r.sg_list[0] = sge(bufs[i], keys[i]);
    if (ep.post_recv(r) != 0) return 11;
  }
  std::vector<uint8_t> ad(12);
  wire::store_be32(ad.data(), rk);
  wire::store_be64(ad.data() + 4, reinterpret_cast<uint64_t>(region.data()));
  SendWr a;
  a.opcode = WrOpcode::Send;
  a.flags = engine::kSendSignaled;
  a.num_sge = 1;
  a.sg_list[0] = sge(ad, ep.reg(ad, 0));
  if (ep.post_send(a) != 0) return 12;
  for (int i = 0; i < kEchoes; ++i) {
    auto rc = ep.wait_recv(1);
    if (rc.size() != 1 || rc[0].status != WcStatus::Success) return 13;
    // Echo straight from the buffer the message landed in.
    const uint64_t idx = rc[0].wr_id;
    SendWr e;
    e.wr_id = i;
    e.opcode = WrOpcode::Send;
    e.flags = engine::kSendSignaled;
    e.num_sge = rc[0].byte_len ? 1 : 0;
    e.sg_list[0] = sge(bufs[idx], keys[idx], 0, rc[0].byte_len);
    if (ep.post_send(e) != 0) return 14;
  }
  if (ep.wait_send(kEchoes + 1).size() != static_cast<size_t>(kEchoes + 1)) return 15;
  if (!ep.wait_error()) return 16;  // the client's close reaches us
  return 0;
}

class ProcessesTest : public testing::TestWithParam<bool /*crc*/> {};

TEST_P(ProcessesTest, EchoReadAndWriteAcrossProcesses) {
  LinkOptions opts;
  opts.crc = GetParam();
  Listener l;
  ASSERT_GE(l.fd, 0);
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) _exit(run_server(l.fd, opts));

  Endpoint ep(1);
  std::vector<uint8_t> ad(12);
  std::vector<std::vector<uint8_t>> in(kEchoes + 1, std::vector<uint8_t>(1 << 20, 0));
  RecvWr r;
  r.num_sge = 1;
  r.sg_list[0] = sge(ad, ep.reg(ad, memory::kLocalWrite));
  ASSERT_EQ(ep.post_recv(r), 0);
  for (int i = 0; i < kEchoes; ++i) {
    r.wr_id = i;
    r.sg_list[0] = sge(in[i], ep.reg(in[i], memory::kLocalWrite));
    ASSERT_EQ(ep.post_recv(r), 0);
  }
  // The server sends its advertisement as soon as it accepted, so the receives must be posted
  // before the connection exists; a Send meeting an empty queue is a Terminate (RFC 5041 §7.2).
  ASSERT_EQ(ep.connect(l.port, opts), 0);
  ASSERT_EQ(ep.wait_recv(1).size(), 1u);
  const uint32_t rk = wire::load_be32(ad.data());
  const uint64_t raddr = wire::load_be64(ad.data() + 4);

  std::vector<std::vector<uint8_t>> out;
  for (int i = 0; i < kEchoes; ++i) {
    out.emplace_back((static_cast<size_t>(i) * 26041) % (1 << 20));
    fill(out.back(), i);
    SendWr s;
    s.wr_id = i;
    s.opcode = WrOpcode::Send;
    s.flags = engine::kSendSignaled;
    s.num_sge = out.back().empty() ? 0 : 1;
    s.sg_list[0] = sge(out.back(), ep.reg(out.back(), 0));
    ASSERT_EQ(ep.post_send(s), 0);
  }
  auto rc = ep.wait_recv(kEchoes);
  ASSERT_EQ(rc.size(), static_cast<size_t>(kEchoes));
  for (int i = 0; i < kEchoes; ++i) {
    ASSERT_EQ(rc[i].status, WcStatus::Success);
    ASSERT_EQ(rc[i].byte_len, out[i].size());
    ASSERT_TRUE(uiw::test::same_bytes(in[rc[i].wr_id].data(), out[i].data(), out[i].size())) << i;
  }
  ASSERT_EQ(ep.wait_send(kEchoes).size(), static_cast<size_t>(kEchoes));

  // Read the whole region, then Write a pattern into its second half and read it back.
  std::vector<uint8_t> got(kRegion), expect(kRegion), pat(kRegion / 2), back(kRegion / 2);
  fill(expect, 1234);
  fill(pat, 99);
  SendWr rd;
  rd.opcode = WrOpcode::RdmaRead;
  rd.flags = engine::kSendSignaled;
  rd.num_sge = 1;
  rd.sg_list[0] = sge(got, ep.reg(got, memory::kLocalWrite));
  rd.remote_stag = rk;
  rd.remote_addr = raddr;
  ASSERT_EQ(ep.post_send(rd), 0);
  // RDMAP §11.2: a Write after a Read may be placed before the Read Response is generated;
  // the fence holds it back until the Read completed.
  SendWr wr;
  wr.opcode = WrOpcode::RdmaWrite;
  wr.flags = engine::kSendFence;
  wr.num_sge = 1;
  wr.sg_list[0] = sge(pat, ep.reg(pat, 0));
  wr.remote_stag = rk;
  wr.remote_addr = raddr + kRegion / 2;
  ASSERT_EQ(ep.post_send(wr), 0);
  SendWr rd2 = rd;
  rd2.sg_list[0] = sge(back, ep.reg(back, memory::kLocalWrite));
  rd2.remote_addr = raddr + kRegion / 2;
  ASSERT_EQ(ep.post_send(rd2), 0);
  auto sc = ep.wait_send(2);  // the Write is unsignaled
  ASSERT_EQ(sc.size(), 2u);
  EXPECT_EQ(sc[0].status, WcStatus::Success);
  EXPECT_EQ(sc[1].status, WcStatus::Success);
  EXPECT_EQ(got, expect);
  EXPECT_EQ(back, pat);

  ep.close();
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

INSTANTIATE_TEST_SUITE_P(Crc, ProcessesTest, testing::Bool());

}  // namespace
}  // namespace uiw::test
