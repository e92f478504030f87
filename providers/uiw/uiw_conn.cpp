// libuiw connection side: the uiw.ko driver methods (kernel-abi/uiw-abi.h), picking up the
// socket of an RDMA-ready QP, and the per-context readiness and progress threads.
//
// Hand-off: rdma_cm and iw_cm run connection setup in uiw.ko, which leaves the TCP stream
// exactly at the first FPDU and adds 1 to the context's readiness eventfd. The readiness thread
// then asks for the socket of every QP still waiting (UIW_METHOD_QP_TAKE_SOCKET: fd + negotiated
// parameters), starts the engine on it and gives the connection to the progress thread. Sends
// posted before that wait in the engine's queue.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <rdma/rdma_user_ioctl.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <new>
#include <thread>
#include <vector>

#include "transport/byte_stream.h"
#include "transport/local_address.h"
#include "transport/sctp_stream.h"
#include "uiw.h"
#include "uiwdv.h"
#include "wire/mpa.h"

namespace uiw::provider {
namespace {

// One driver-method call: RDMA_VERBS_IOCTL with up to four attributes. The header ends in a
// flexible array, so it lives in raw storage sized for the attributes.
class DriverMethod {
 public:
  DriverMethod(uint16_t object, uint16_t method) {
    hdr()->object_id = object;
    hdr()->method_id = method;
    hdr()->driver_id = 0;  // RDMA_DRIVER_UNKNOWN, as uiw.ko registers (uiw-abi.h)
  }
  void idr_in(uint16_t id, uint32_t handle) { add(id, 0, handle); }
  void raw_fd_in(uint16_t id, int fd) {
    add(id, 0, static_cast<uint64_t>(static_cast<int64_t>(fd)));
  }
  void ptr_out(uint16_t id, void* p, uint16_t len) { add(id, len, reinterpret_cast<uintptr_t>(p)); }
  // A PTR_IN of at most 8 bytes travels inline in the attribute's data word.
  void u32_in(uint16_t id, uint32_t v) { add(id, sizeof(v), v); }
  // 0 or errno.
  int run(ibv_context* ctx) {
    hdr()->length =
        static_cast<uint16_t>(sizeof(ib_uverbs_ioctl_hdr) + n_ * sizeof(ib_uverbs_attr));
    hdr()->num_attrs = n_;
    return ioctl(ctx->cmd_fd, RDMA_VERBS_IOCTL, hdr()) == 0 ? 0 : errno;
  }

 private:
  static constexpr uint16_t kMaxAttrs = 4;
  ib_uverbs_ioctl_hdr* hdr() { return reinterpret_cast<ib_uverbs_ioctl_hdr*>(buf_); }
  void add(uint16_t id, uint16_t len, uint64_t data) {
    ib_uverbs_attr& a = hdr()->attrs[n_++];
    a.attr_id = id;
    a.len = len;
    a.flags = UVERBS_ATTR_F_MANDATORY;
    a.data = data;
  }
  alignas(8) unsigned char buf_[sizeof(ib_uverbs_ioctl_hdr) + kMaxAttrs * sizeof(ib_uverbs_attr)]{};
  uint16_t n_ = 0;
};

// 0 with *fd and *info set, or errno: EAGAIN (connection not RDMA-ready yet), ENOTCONN (no
// connection, or gone), EALREADY (taken before).
int method_take_socket(Qp* qp, int* fd, uiw_conn_info* info) {
  DriverMethod m(UVERBS_OBJECT_QP, UIW_METHOD_QP_TAKE_SOCKET);
  m.idr_in(UIW_ATTR_TAKE_SOCKET_QP_HANDLE, qp->qp.handle);
  m.ptr_out(UIW_ATTR_TAKE_SOCKET_FD, fd, sizeof(*fd));
  m.ptr_out(UIW_ATTR_TAKE_SOCKET_CONN_INFO, info, sizeof(*info));
  return m.run(qp->qp.context);
}

engine::RtrType map_rtr(uint8_t rtr) {
  switch (rtr) {
    case UIW_RTR_WRITE:
      return engine::RtrType::Write;
    case UIW_RTR_READ:
      return engine::RtrType::Read;
    case UIW_RTR_SEND:
      return engine::RtrType::Send;
    default:
      return engine::RtrType::None;
  }
}

// What uiw.ko negotiated (RFC 5044 §7.1, RFC 6581), in the engine's terms.
engine::ConnParams conn_params(const uiw_conn_info& info, const transport::ByteStream& s) {
  engine::ConnParams p;
  p.crc = info.flags & UIW_CONN_F_CRC;
  // RFC 5044 §7.1.1: each side's M bit asks the other to insert Markers (per direction).
  p.markers_tx = info.flags & UIW_CONN_F_MARKERS_TX;
  p.markers_rx = info.flags & UIW_CONN_F_MARKERS_RX;
  // RFC 5044 §4.5 / §3: the largest ULPDU that fits one TCP segment of the current EMSS.
  p.mulpdu = wire::mulpdu_for_emss(s.emss(), p.markers_tx);
  p.ord = info.ord;
  p.ird = info.ird;
  p.initiator = info.flags & UIW_CONN_F_INITIATOR;
  p.mpa_revision = info.mpa_rev;
  p.rtr = (info.flags & UIW_CONN_F_P2P) ? map_rtr(info.rtr) : engine::RtrType::None;
  p.rdmap_ext = info.flags & UIW_CONN_F_RDMAP_EXT;  // both MPA frames offered RFC 7306
  if (info.flags & UIW_CONN_F_SCTP) {
    // RFC 5043: one DDP segment per SCTP message, at most the association's maximum
    // (SctpStream::emss); the Qp ignores the MPA fields.
    p.llp = engine::Llp::Sctp;
    p.mulpdu = s.emss();
  }
  return p;
}

bool debug_enabled() {
  static const bool on = std::getenv("UIW_DEBUG") != nullptr;
  return on;
}

// ---- twins: connections of this process whose two ends are both here (uiw.h). An end is
// known by its socket's local and peer addresses; a twin has them swapped. Only connections to
// an address of this host are registered. Lock order: contexts_mu, Context::mu, twins_mu, a
// QueuePair's mutex. A QP leaves the registry (twin_forget) before its QueuePair is replaced,
// so a twin found under twins_mu has a live connection.
struct TwinEnd {
  Qp* qp;
  sockaddr_storage local, peer;
  socklen_t local_len, peer_len;
  Qp* twin;
};

std::mutex twins_mu;
std::vector<TwinEnd> twins;  // under twins_mu

std::mutex contexts_mu;
std::vector<Context*> contexts;  // under contexts_mu

bool same_addr(const sockaddr_storage& a, socklen_t alen, const sockaddr_storage& b,
               socklen_t blen) {
  return alen == blen && std::memcmp(&a, &b, alen) == 0;
}

// Whether the peer address is one of this host's: our own socket's address is, without asking;
// otherwise the routing tables say (RTN_LOCAL).
bool peer_is_local(const TwinEnd& e) {
  const auto* peer = reinterpret_cast<const sockaddr*>(&e.peer);
  if (e.peer.ss_family == AF_INET && e.local.ss_family == AF_INET &&
      reinterpret_cast<const sockaddr_in*>(&e.peer)->sin_addr.s_addr ==
          reinterpret_cast<const sockaddr_in*>(&e.local)->sin_addr.s_addr)
    return true;
  if (e.peer.ss_family == AF_INET6 && e.local.ss_family == AF_INET6 &&
      std::memcmp(&reinterpret_cast<const sockaddr_in6*>(&e.peer)->sin6_addr,
                  &reinterpret_cast<const sockaddr_in6*>(&e.local)->sin6_addr,
                  sizeof(in6_addr)) == 0)
    return true;
  return transport::is_local_address(peer);
}

void twin_register(Qp* qp, int fd) {
  TwinEnd me{qp, {}, {}, sizeof(sockaddr_storage), sizeof(sockaddr_storage), nullptr};
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&me.local), &me.local_len) ||
      getpeername(fd, reinterpret_cast<sockaddr*>(&me.peer), &me.peer_len))
    return;
  const bool local = peer_is_local(me);
  if (debug_enabled()) {
    char text[INET6_ADDRSTRLEN] = "?";
    const sockaddr* p = reinterpret_cast<const sockaddr*>(&me.peer);
    inet_ntop(p->sa_family,
              p->sa_family == AF_INET
                  ? static_cast<const void*>(&reinterpret_cast<const sockaddr_in*>(p)->sin_addr)
                  : static_cast<const void*>(&reinterpret_cast<const sockaddr_in6*>(p)->sin6_addr),
              text, sizeof(text));
    std::fprintf(stderr, "uiw: QP %u: peer %s is %s\n", qp->qp.qp_num, text,
                 local ? "of this host" : "remote");
  }
  if (!local) return;
  std::lock_guard lock(twins_mu);
  for (TwinEnd& other : twins) {
    if (other.twin || !same_addr(other.local, other.local_len, me.peer, me.peer_len) ||
        !same_addr(other.peer, other.peer_len, me.local, me.local_len))
      continue;
    other.twin = qp;
    me.twin = other.qp;
    break;
  }
  twins.push_back(me);
  qp->local_peer = true;
  ++local_peer_qps;
}

// Takes the QP's socket if it is ready and starts the engine on it. True when the QP no longer
// waits (connected, or nothing can come any more). Requires ctx->mu.
bool attach_socket(Context* ctx, Qp* qp) {
  int fd = -1;
  uiw_conn_info info{};
  const int rc = method_take_socket(qp, &fd, &info);
  if (rc == EAGAIN || rc == ENOTCONN) return false;
  if (rc == EALREADY) return true;
  if (rc) {
    // The connection failed for good (connect-on-RTR: refused, timed out, wrong peer): the QP
    // is in Error, its work requests complete with flush errors (uiw.ko raised QP fatal).
    std::fprintf(stderr, "uiw: QP %u: connection failed: %s\n", qp->qp.qp_num, std::strerror(rc));
    std::lock_guard lock(qp->mu);
    qp->rt->abort();
    return true;
  }
  std::lock_guard lock(qp->mu);
  runtime::QueuePair& rt = *qp->rt;
  // The application may have moved the QP to ERR/RESET meanwhile: the socket is of no use then.
  if (rt.state() != engine::QpState::Idle || info.qpn != qp->qp.qp_num) {
    close(fd);
    return true;
  }
  // A twin is known before the first byte moves: a Write posted before the connection came up
  // completes as soon as the attach sends it, and its completion must already find the twin.
  try {
    twin_register(qp, fd);
  } catch (const std::bad_alloc&) {
    // Not a twin then: its Writes are placed by the peer's progress thread, a little later.
  }
  try {
    std::unique_ptr<transport::ByteStream> stream;
    if (info.flags & UIW_CONN_F_SCTP)
      stream = std::make_unique<transport::SctpStream>(fd);
    else
      stream = std::make_unique<transport::TcpStream>(fd);
    const engine::ConnParams p = conn_params(info, *stream);
    if (rt.attach(std::move(stream), p, ctx->progress.get()) != 0) {
      twin_forget(qp);
      rt.abort();
      return true;
    }
  } catch (...) {
    // The stream (if built) owns and closes fd; the QP can no longer connect.
    twin_forget(qp);
    rt.abort();
    return true;
  }
  if (debug_enabled()) {
    const engine::ConnParams p = rt.with_engine([](engine::Qp& e) { return e.params(); });
    std::fprintf(stderr, "uiw: QP %u: socket taken (%s, crc %d, ird %u, ord %u, mulpdu %u)\n",
                 qp->qp.qp_num, (info.flags & UIW_CONN_F_INITIATOR) ? "initiator" : "responder",
                 p.crc, info.ird, info.ord, p.mulpdu);
  }
  return true;
}

}  // namespace

int method_set_eventfd(ibv_context* ctx, int fd) noexcept {
  DriverMethod m(UVERBS_OBJECT_DEVICE, UIW_METHOD_DEVICE_SET_EVENTFD);
  m.raw_fd_in(UIW_ATTR_SET_EVENTFD_FD, fd);
  return m.run(ctx);
}

int method_cq_signal(ibv_cq* cq) noexcept {
  DriverMethod m(UVERBS_OBJECT_CQ, UIW_METHOD_CQ_SIGNAL);
  m.idr_in(UIW_ATTR_CQ_SIGNAL_CQ_HANDLE, cq->handle);
  return m.run(cq->context);
}

int method_event(ibv_context* ctx, uint16_t object, uint32_t handle, ibv_event_type type) noexcept {
  if (!(to_ctx(ctx)->caps.caps & UIW_CAP_ASYNC_EVENT)) return EOPNOTSUPP;
  uint16_t method = UIW_METHOD_SRQ_EVENT;
  if (object == UVERBS_OBJECT_QP) method = UIW_METHOD_QP_EVENT;
  if (object == UVERBS_OBJECT_CQ) method = UIW_METHOD_CQ_EVENT;
  DriverMethod m(object, method);
  m.idr_in(UIW_ATTR_EVENT_HANDLE, handle);
  m.u32_in(UIW_ATTR_EVENT_TYPE, static_cast<uint32_t>(type));
  return m.run(ctx);
}

void qp_event(Qp* qp, engine::QpEvent ev) noexcept {
  if (debug_enabled()) {
    static const char* const kNames[] = {"established",     "terminate sent", "terminate received",
                                         "connection lost", "CQ overrun",     "closed"};
    std::fprintf(stderr, "uiw: QP %u: %s\n", qp->qp.qp_num, kNames[static_cast<int>(ev)]);
  }
  // Affiliated async events (ibv_get_async_event), raised through uiw.ko: a Terminate either
  // way or a lost LLP ends the QP in Error (RDMAP §5.4) = IBV_EVENT_QP_FATAL; a completion that
  // found its CQ full = IBV_EVENT_CQ_ERR on the CQ that overran.
  switch (ev) {
    case engine::QpEvent::TerminateSent:
    case engine::QpEvent::TerminateReceived:
    case engine::QpEvent::LlpError:
      method_event(qp->qp.context, UVERBS_OBJECT_QP, qp->qp.handle, IBV_EVENT_QP_FATAL);
      break;
    case engine::QpEvent::Closed:
      // The peer closed (or its process died) with no rdma_cm to say so: for the application
      // the QP just entered Error, as when an IB RC peer stops answering.
      if (qp->rtr_connect && !qp->local_close)
        method_event(qp->qp.context, UVERBS_OBJECT_QP, qp->qp.handle, IBV_EVENT_QP_FATAL);
      break;
    case engine::QpEvent::CqOverrun:
      for (ibv_cq* cq : {qp->qp.send_cq, qp->qp.recv_cq}) {
        if (to_cq(cq)->cq->overrun() && !to_cq(cq)->overrun_reported.exchange(true))
          method_event(qp->qp.context, UVERBS_OBJECT_CQ, cq->handle, IBV_EVENT_CQ_ERR);
      }
      break;
    default:
      break;
  }
}

void qp_drain(Qp* qp, int timeout_ms) noexcept {
  const std::shared_ptr<runtime::QueuePair> rt = runtime_of(qp);
  if (rt->link() != runtime::Link::Up) return;
  rt->close();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  for (;;) {
    rt->progress();
    // Closing ends with want_shutdown once nothing is queued or owed. Connection then sends
    // our FIN itself once the peer acknowledged the data (Connection::kFinAckWaitNs), later
    // than this loop ends; the kernel's SHUT_WR on SQD waits for that ACK the same way, and
    // whichever comes second is a no-op.
    if (rt->with_engine([](engine::Qp& e) {
          return e.state() == engine::QpState::Error || (e.tx_want_shutdown() && e.tx_idle());
        }))
      break;
    if (std::chrono::steady_clock::now() > deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  rt->progress();
}

void qp_abort(Qp* qp) noexcept {
  runtime_of(qp)->abort();  // flushes every WR with WrFlushErr, resets the connection
}

namespace {

// Runs the twin's receive side until it has consumed every byte `from` has sent (a TCP stream
// carries the same octets both ways: the engines count them alike), at most 200 ms.
// Requires twins_mu.
void place_at_twin(Qp* from, Qp* twin) {
  const auto [sent, tcp] = from->rt->with_engine([](engine::Qp& e) {
    return std::pair{e.stats().tx_bytes, e.params().llp != engine::Llp::Sctp};
  });
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(200);
  for (;;) {
    twin->rt->progress();
    if (!tcp) return;  // one pass: SCTP records are counted differently on the two sides
    if (twin->rt->with_engine([](engine::Qp& e) { return e.stats().rx_bytes; }) >= sent) return;
    if (std::chrono::steady_clock::now() > deadline) return;
    sched_yield();  // the bytes are on their way through the loopback device
  }
}

}  // namespace

void twin_deliver(Qp* qp) noexcept {
  try {
    for (int attempt = 0; attempt < 2; ++attempt) {
      {
        std::lock_guard lock(twins_mu);
        auto me =
            std::find_if(twins.begin(), twins.end(), [qp](const TwinEnd& t) { return t.qp == qp; });
        if (me == twins.end()) return;
        if (me->twin && me->twin->rt->link() == runtime::Link::Up)
          return place_at_twin(qp, me->twin);
      }
      if (attempt) return;
      // No twin yet: its context may not have picked up its socket (the readiness thread has
      // not run yet). Pick up every context's waiting sockets now and look again.
      std::lock_guard clock(contexts_mu);
      for (Context* ctx : contexts) {
        std::lock_guard lock(ctx->mu);
        ctx->pick_up_sockets();
      }
    }
  } catch (...) {  // a failing lock: the peer's own threads place it a little later
  }
}

void twin_forget(Qp* qp) noexcept {
  if (qp->local_peer.exchange(false)) --local_peer_qps;
  try {
    std::lock_guard lock(twins_mu);
    for (TwinEnd& t : twins)
      if (t.twin == qp) t.twin = nullptr;
    std::erase_if(twins, [qp](const TwinEnd& t) { return t.qp == qp; });
  } catch (...) {
  }
}

void context_register(Context* ctx) noexcept {
  try {
    std::lock_guard lock(contexts_mu);
    contexts.push_back(ctx);
  } catch (...) {  // only twins that are slow to connect miss it
  }
}

void context_unregister(Context* ctx) noexcept {
  try {
    std::lock_guard lock(contexts_mu);
    std::erase(contexts, ctx);
  } catch (...) {
  }
}

Context::~Context() {
  if (ready_thread.joinable()) {
    const uint64_t one = 1;
    [[maybe_unused]] ssize_t n = write(stop_efd, &one, sizeof(one));
    ready_thread.join();
  }
  if (ready_registered) method_set_eventfd(ibctx, -1);
  progress.reset();
  if (ready_efd >= 0) close(ready_efd);
  if (stop_efd >= 0) close(stop_efd);
  if (counters) munmap(counters, counters_len);
}

int Context::start_threads() {
  if (progress) return 0;
  if (ready_efd < 0 || stop_efd < 0) return EMFILE;
  try {
    progress = std::make_unique<runtime::Progress>(runtime::ProgressKnobs::from_env());
    ready_thread = std::thread([this] { ready_loop(); });
  } catch (...) {
    progress.reset();
    return EAGAIN;
  }
  return 0;
}

void Context::ready_loop() {
  pollfd fds[2] = {{ready_efd, POLLIN, 0}, {stop_efd, POLLIN, 0}};
  for (;;) {
    // Without the readiness eventfd (an older uiw.ko), look every 20 ms instead.
    const int n = poll(fds, 2, ready_registered ? -1 : 20);
    if (n < 0 && errno != EINTR) return;
    if (fds[1].revents) return;
    uint64_t v;
    [[maybe_unused]] ssize_t r = read(ready_efd, &v, sizeof(v));
    std::lock_guard lock(mu);
    pick_up_sockets();
  }
}

void Context::pick_up_sockets() {
  waiting.erase(std::remove_if(waiting.begin(), waiting.end(),
                               [this](Qp* qp) { return attach_socket(this, qp); }),
                waiting.end());
}

namespace {

void export_terminate(const std::optional<wire::TerminateMessage>& t, uiwdv_terminate* out) {
  if (!out) return;
  *out = {};
  if (!t) return;
  out->valid = 1;
  out->layer = static_cast<uint8_t>(t->cause.layer);
  out->etype = t->cause.etype;
  out->ecode = t->cause.code;
  out->flags = (t->m ? UIWDV_TERM_M : 0) | (t->d ? UIWDV_TERM_D : 0) | (t->r ? UIWDV_TERM_R : 0);
  out->ddp_header_len = static_cast<uint8_t>(t->ddp_header_size);
  out->ddp_segment_length = t->ddp_segment_length;
  std::memcpy(out->ddp_header, t->ddp_header, sizeof(out->ddp_header));
  std::memcpy(out->rdma_header, t->rdma_header, sizeof(out->rdma_header));
}

}  // namespace
}  // namespace uiw::provider

extern "C" __attribute__((visibility("default"))) int uiwdv_query_terminate(
    ibv_qp* ibqp, uiwdv_terminate* sent, uiwdv_terminate* received) {
  using namespace uiw::provider;
  // Only a QP of a uiw context: its ops are ours.
  if (!ibqp || ibqp->context->ops.poll_cq != poll_cq) return EINVAL;
  Qp* qp = to_qp(ibqp);
  try {  // no exception leaves a provider entry point (a failing lock throws)
    runtime_of(qp)->with_engine([&](uiw::engine::Qp& e) {
      export_terminate(e.terminate_sent(), sent);
      export_terminate(e.terminate_received(), received);
    });
  } catch (...) {
    return EIO;
  }
  return 0;
}
