// Integration-test endpoint: a Qp with its memory registry, CQs and receive queue, connected over
// real loopback TCP (transport::tcp_* + MPA negotiation) and driven either by a runtime::Progress
// thread or inline by the waiting thread (busy-poll mode).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/qp.h"
#include "runtime/connection.h"
#include "runtime/progress.h"
#include "transport/mpa_negotiate.h"

namespace uiw::test {

struct LinkOptions {
  uint8_t revision = 2;
  bool crc = true;
  bool markers_rx = false;  // ask the peer to insert markers toward us
  uint16_t ird = 16, ord = 16;
  transport::RtrType rtr = transport::RtrType::Write;
};

class Endpoint {
 public:
  explicit Endpoint(uint32_t qpn, bool progress_thread = true);
  ~Endpoint();

  // Blocking connection setup; 0 or -errno. The Qp enters RTS on success.
  int connect(uint16_t port, const LinkOptions& opts);
  int accept(int listen_fd, const LinkOptions& opts);

  memory::Stag reg(void* p, size_t len, uint32_t access);
  memory::Stag reg(std::vector<uint8_t>& v, uint32_t access) {
    return reg(v.data(), v.size(), access);
  }
  int post_send(const engine::SendWr& wr);
  int post_recv(const engine::RecvWr& wr);
  // Waits for n completions (driving progress inline when there is no thread); fails the
  // calling test (and returns what it got) on timeout.
  std::vector<engine::Completion> wait_send(size_t n, int timeout_ms = 20000);
  std::vector<engine::Completion> wait_recv(size_t n, int timeout_ms = 20000);
  // Waits until the Qp reaches Error (terminated, closed or flushed).
  bool wait_error(int timeout_ms = 20000);
  void close() {
    conn_->close();
    kick();
  }
  void kick();

  engine::Qp& qp() { return *qp_; }
  runtime::Connection& conn() { return *conn_; }
  memory::Registry& registry() { return registry_; }
  const transport::MpaResult& mpa() const { return mpa_; }
  uint32_t mulpdu() const { return qp_->params().mulpdu; }

 private:
  int finish_setup(int fd, const transport::MpaResult& r);
  std::vector<engine::Completion> wait(engine::CompletionQueue& cq, size_t n, int timeout_ms);

  memory::Registry registry_{4096};
  uint32_t pd_;
  engine::CompletionQueue scq_{8192}, rcq_{8192};
  engine::ReceiveQueue rq_{4096, false};
  std::unique_ptr<engine::Qp> qp_;
  std::unique_ptr<runtime::Connection> conn_;
  std::unique_ptr<runtime::Progress> progress_;
  bool use_thread_;
  transport::MpaResult mpa_{};
  bool qp_params_initiator_ = true;
};

// A listening socket on 127.0.0.1 with an ephemeral port.
struct Listener {
  Listener();
  ~Listener();
  int fd = -1;
  uint16_t port = 0;
};

inline engine::Sge sge(std::vector<uint8_t>& v, memory::Stag k, size_t off = 0,
                       size_t len = SIZE_MAX) {
  if (len == SIZE_MAX) len = v.size() - off;
  return {reinterpret_cast<uint64_t>(v.data() + off), static_cast<uint32_t>(len), k};
}
void fill(std::vector<uint8_t>& v, uint32_t seed);

}  // namespace uiw::test
