#include "integration/support/endpoint.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <thread>

#include "transport/byte_stream.h"
#include "transport/socket_util.h"
#include "wire/mpa.h"

namespace uiw::test {

void fill(std::vector<uint8_t>& v, uint32_t seed) {
  uint32_t x = seed * 2654435761u + 1;
  for (auto& b : v) {
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    b = static_cast<uint8_t>(x);
  }
}

Listener::Listener() {
  fd = transport::tcp_listen("127.0.0.1", 0, &port);
}
Listener::~Listener() {
  if (fd >= 0) ::close(fd);
}

Endpoint::Endpoint(uint32_t qpn, bool progress_thread) : use_thread_(progress_thread) {
  pd_ = registry_.alloc_pd();
  engine::QpConfig c;
  c.qp_num = qpn;
  c.pd = pd_;
  c.sq_depth = 1024;
  c.registry = &registry_;
  c.send_cq = &scq_;
  c.recv_cq = &rcq_;
  c.rq = &rq_;
  qp_ = std::make_unique<engine::Qp>(c);
}

Endpoint::~Endpoint() {
  progress_.reset();  // joins the thread before the Qp and Connection go
}

static transport::MpaConfig to_config(const LinkOptions& o) {
  transport::MpaConfig c;
  c.revision = o.revision;
  c.crc = o.crc;
  c.markers_rx = o.markers_rx;
  c.ird = o.ird;
  c.ord = o.ord;
  c.rtr = o.rtr;
  return c;
}

int Endpoint::connect(uint16_t port, const LinkOptions& opts) {
  const int fd = transport::tcp_connect("127.0.0.1", port, 5000);
  if (fd < 0) return fd;
  transport::MpaResult r{};
  const int rc = transport::mpa_initiate(fd, to_config(opts), &r);
  if (rc != 0) {
    ::close(fd);
    return rc;
  }
  qp_params_initiator_ = true;
  return finish_setup(fd, r);
}

int Endpoint::accept(int listen_fd, const LinkOptions& opts) {
  const int fd = transport::tcp_accept(listen_fd, 5000);
  if (fd < 0) return fd;
  transport::MpaResult r{};
  const int rc = transport::mpa_respond(fd, to_config(opts), &r);
  if (rc != 0) {
    ::close(fd);
    return rc;
  }
  qp_params_initiator_ = false;
  return finish_setup(fd, r);
}

int Endpoint::finish_setup(int fd, const transport::MpaResult& r) {
  mpa_ = r;
  auto stream = std::make_unique<transport::TcpStream>(fd);
  engine::ConnParams p;
  p.crc = r.crc;
  p.markers_tx = r.markers_tx;
  p.markers_rx = r.markers_rx;
  p.mulpdu = wire::mulpdu_for_emss(stream->emss(), r.markers_tx);
  p.ord = r.ord;
  p.ird = r.ird;
  p.initiator = qp_params_initiator_;
  p.mpa_revision = r.revision;
  p.rtr = static_cast<engine::RtrType>(r.rtr);
  qp_->start(p);
  conn_ = std::make_unique<runtime::Connection>(qp_.get(), std::move(stream));
  if (use_thread_) {
    progress_ = std::make_unique<runtime::Progress>();
    progress_->add(conn_.get());
  }
  return 0;
}

memory::Stag Endpoint::reg(void* p, size_t len, uint32_t access) {
  int err = 0;
  const memory::Stag s =
      registry_.register_region(pd_, p, len, reinterpret_cast<uint64_t>(p), access, &err);
  EXPECT_NE(s, 0u) << "register_region: " << err;
  return s;
}

void Endpoint::kick() {
  if (progress_) progress_->kick();
}

int Endpoint::post_send(const engine::SendWr& wr) {
  const int rc = conn_ ? conn_->post_send(wr) : qp_->post_send(wr);
  kick();
  return rc;
}

int Endpoint::post_recv(const engine::RecvWr& wr) {
  const int rc = conn_ ? conn_->post_recv(wr) : qp_->post_recv(wr);
  kick();
  return rc;
}

std::vector<engine::Completion> Endpoint::wait(engine::CompletionQueue& cq, size_t n,
                                               int timeout_ms) {
  std::vector<engine::Completion> out;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  engine::Completion buf[64];
  while (out.size() < n) {
    const size_t got = cq.poll({buf, std::min<size_t>(64, n - out.size())});
    out.insert(out.end(), buf, buf + got);
    if (got) continue;
    if (std::chrono::steady_clock::now() > deadline) {
      ADD_FAILURE() << "timeout: " << out.size() << " of " << n << " completions, qp state "
                    << engine::qp_state_name(qp_->state());
      break;
    }
    if (!use_thread_ && conn_) {
      if (!conn_->progress()) std::this_thread::yield();
    } else {
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }
  return out;
}

std::vector<engine::Completion> Endpoint::wait_send(size_t n, int timeout_ms) {
  return wait(scq_, n, timeout_ms);
}
std::vector<engine::Completion> Endpoint::wait_recv(size_t n, int timeout_ms) {
  return wait(rcq_, n, timeout_ms);
}

bool Endpoint::wait_error(int timeout_ms) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  for (;;) {
    {
      std::lock_guard lock(conn_->mu());
      if (qp_->state() == engine::QpState::Error) return true;
    }
    if (std::chrono::steady_clock::now() > deadline) return false;
    if (!use_thread_) conn_->progress();
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
}

}  // namespace uiw::test
