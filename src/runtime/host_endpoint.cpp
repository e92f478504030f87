#include "runtime/host_endpoint.h"

#include <poll.h>
#include <unistd.h>

#include "transport/byte_stream.h"
#include "transport/socket_util.h"
#include "wire/mpa.h"

namespace uiw::runtime {

HostEndpoint::HostEndpoint(uint32_t qpn, bool progress_thread, uint32_t sq_depth, uint32_t cq_depth)
    : scq_(cq_depth), rcq_(cq_depth), want_thread_(progress_thread) {
  pd_ = registry_.alloc_pd();
  engine::QpConfig c;
  c.qp_num = qpn;
  c.pd = pd_;
  c.sq_depth = sq_depth;
  c.registry = &registry_;
  c.send_cq = &scq_;
  c.recv_cq = &rcq_;
  c.rq = &rq_;
  qp_ = std::make_unique<engine::Qp>(c);
}

HostEndpoint::~HostEndpoint() {
  progress_.reset();  // join the thread before the Connection and Qp go
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
  qp_->start(p);
  conn_ = std::make_unique<Connection>(qp_.get(), std::move(stream));
  if (want_thread_) {
    progress_ = std::make_unique<Progress>();
    progress_->add(conn_.get());
  }
  return 0;
}

memory::Stag HostEndpoint::reg(void* p, size_t len, uint32_t access, int* err) {
  int e = 0;
  const memory::Stag s =
      registry_.register_region(pd_, p, len, reinterpret_cast<uint64_t>(p), access, &e);
  if (err) *err = e;
  return s;
}

int HostEndpoint::post_send(const engine::SendWr& wr) {
  const int rc = conn_ ? conn_->post_send(wr) : qp_->post_send(wr);
  if (progress_) progress_->kick();
  return rc;
}

int HostEndpoint::post_recv(const engine::RecvWr& wr) {
  const int rc = conn_ ? conn_->post_recv(wr) : qp_->post_recv(wr);
  if (progress_) progress_->kick();
  return rc;
}

size_t HostEndpoint::poll(engine::CompletionQueue& cq, std::span<engine::Completion> out) {
  size_t n = cq.poll(out);
  if (n == 0 && !progress_ && conn_) {
    conn_->progress();
    n = cq.poll(out);
  }
  return n;
}

bool HostEndpoint::progress() {
  return conn_ ? conn_->progress() : false;
}

void HostEndpoint::close() {
  if (!conn_) return;
  conn_->close();
  if (progress_) progress_->kick();
}

engine::QpState HostEndpoint::state() {
  if (!conn_) return qp_->state();
  std::lock_guard lock(conn_->mu());
  return qp_->state();
}

}  // namespace uiw::runtime

namespace uiw::runtime {

void HostEndpoint::wait_io(int timeout_ms) {
  if (!conn_ || conn_->fd() < 0) return;
  pollfd p{conn_->fd(), static_cast<short>(POLLIN | (conn_->wants_write() ? POLLOUT : 0)), 0};
  ::poll(&p, 1, timeout_ms);
}

}  // namespace uiw::runtime
