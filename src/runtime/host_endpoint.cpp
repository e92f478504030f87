#include "runtime/host_endpoint.h"

#include <poll.h>
#include <unistd.h>

#include "transport/byte_stream.h"
#include "transport/socket_util.h"
#include "wire/mpa.h"

namespace uiw::runtime {

HostEndpoint::HostEndpoint(uint32_t qpn, bool progress_thread, uint32_t sq_depth, uint32_t cq_depth)
    : HostEndpoint(qpn, nullptr, sq_depth, cq_depth) {
  if (progress_thread)
    driver_ = (own_progress_ = std::make_unique<Progress>(ProgressKnobs::from_env())).get();
}

HostEndpoint::HostEndpoint(uint32_t qpn, Progress& shared, uint32_t sq_depth, uint32_t cq_depth)
    : HostEndpoint(qpn, &shared, sq_depth, cq_depth) {}

HostEndpoint::HostEndpoint(uint32_t qpn, Progress* driver, uint32_t sq_depth, uint32_t cq_depth)
    : scq_(cq_depth), rcq_(cq_depth), driver_(driver) {
  pd_ = registry_.alloc_pd();
  engine::QpConfig c;
  c.qp_num = qpn;
  c.pd = pd_;
  c.sq_depth = sq_depth;
  c.registry = &registry_;
  c.send_cq = &scq_;
  c.recv_cq = &rcq_;
  c.rq = &rq_;
  c.counters = counters_;
  qp_ = std::make_unique<QueuePair>(c);
}

HostEndpoint::~HostEndpoint() {
  qp_.reset();  // leaves the Progress thread before it stops
}

int HostEndpoint::connect(const char* ip, uint16_t port, const transport::MpaConfig& cfg) {
  const int fd = transport::tcp_connect(ip, port, cfg.timeout_ms);
  if (fd < 0) return fd;
  transport::MpaResult r{};
  const int rc = transport::mpa_initiate(fd, cfg, &r);
  if (rc != 0) {
    ::close(fd);
    return rc;
  }
  return finish_setup(fd, r, true);
}

int HostEndpoint::accept(int listen_fd, const transport::MpaConfig& cfg) {
  const int fd = transport::tcp_accept(listen_fd, cfg.timeout_ms);
  if (fd < 0) return fd;
  transport::MpaResult r{};
  const int rc = transport::mpa_respond(fd, cfg, &r);
  if (rc != 0) {
    ::close(fd);
    return rc;
  }
  return finish_setup(fd, r, false);
}

int HostEndpoint::finish_setup(int fd, const transport::MpaResult& r, bool initiator) {
  mpa_ = r;
  auto stream = std::make_unique<transport::TcpStream>(fd);
  engine::ConnParams p;
  p.crc = r.crc;
  p.markers_tx = r.markers_tx;
  p.markers_rx = r.markers_rx;
  p.mulpdu = wire::mulpdu_for_emss(stream->emss(), r.markers_tx);
  p.ord = r.ord;
  p.ird = r.ird;
  p.initiator = initiator;
  p.mpa_revision = r.revision;
  p.rtr = r.rtr;
  p.rdmap_ext = r.rdmap_ext;
  return qp_->attach(std::move(stream), p, driver_);
}

memory::Stag HostEndpoint::reg(void* p, size_t len, uint32_t access, int* err) {
  int e = 0;
  const memory::Stag s =
      registry_.register_region(pd_, p, len, reinterpret_cast<uint64_t>(p), access, &e);
  if (err) *err = e;
  return s;
}

int HostEndpoint::post_send(const engine::SendWr& wr) {
  const int rc = qp_->post_send(wr);
  qp_->drive(true);
  return rc;
}

int HostEndpoint::post_recv(const engine::RecvWr& wr) {
  return qp_->post_recv(wr);
}

// The provider's ibv_poll_cq rule (runtime::poll_driving), over this endpoint's one QP.
size_t HostEndpoint::poll(engine::CompletionQueue& cq, std::span<engine::Completion> out) {
  return poll_driving(
      cq, [&] { return cq.poll(out); }, [&](auto&& f) { f(*qp_); });
}

void HostEndpoint::wait_io(int timeout_ms) {
  if (qp_->fd() < 0) return;
  pollfd p{qp_->fd(), static_cast<short>(POLLIN | (qp_->wants_write() ? POLLOUT : 0)), 0};
  ::poll(&p, 1, timeout_ms);
}

}  // namespace uiw::runtime
