// libuiw: the rdma-core provider of uiw devices (uiw0, uiw1, ... registered by uiw.ko).
//
// The control path goes through the kernel (ibv_cmd_*: uiw.ko keeps shadow objects, QPNs and
// STags, and runs iWARP connection setup for rdma_cm). The data path never enters the kernel:
// each QP is an engine::Qp driven over the TCP socket uiw.ko hands over once the connection is
// RDMA-ready (kernel-abi/uiw-abi.h, UIW_METHOD_QP_TAKE_SOCKET).
//
// Files: uiw_ctrl.cpp (device, context, PD/MR/CQ/SRQ/QP control verbs, registration),
// uiw_data.cpp (post/poll/notify and the ibv <-> engine translation tables), uiw_conn.cpp
// (driver methods, socket pick-up, the context's progress and readiness threads).
//
// Threads: the application's, one runtime::Progress thread per context (places one-sided
// traffic and answers Reads without the application) and one readiness thread per context
// (waits on the eventfd uiw.ko signals and picks up handed-over sockets). Lock order:
// Context::mu, then Qp::mu, then the QueuePair's mutex; the Progress thread takes only the
// last, and never holds its own while it does. No exception leaves a provider entry point: every
// one is noexcept and reports errors through its return value and errno.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "engine/completion_queue.h"
#include "engine/qp.h"
#include "engine/receive_queue.h"
#include "memory/registry.h"
#include "runtime/poll_set.h"
#include "runtime/progress.h"
#include "runtime/queue_pair.h"
#include "uiw-abi.h"
#include "uiw_pabi.h"

namespace uiw::provider {

struct Context;

// STag table size per context (a slot is 64 bytes, so 16k regions cost 1 MiB).
inline constexpr uint32_t kMaxRegions = 1u << 14;

// A PD, or a parent domain (ibv_alloc_parent_domain) over one: the parent shares its
// protection domain's kernel handle and registry PD, so every verb that takes a PD takes
// either. uiw allocates no memory a device reads, so a parent domain's allocators are accepted
// and never called; thread domains are not offered.
struct Pd : ibv_pd {
  Pd() : ibv_pd{} {}
  uint32_t pd_id = 0;           // memory::Registry PD
  Pd* protection = nullptr;     // set on a parent domain: the PD it was made over
  std::atomic<int> parents{0};  // parent domains made over this PD (it is busy meanwhile)
};

struct Mr : verbs_mr {
  Mr() : verbs_mr{} {}
  memory::Stag stag = 0;
};

// A memory window: its rkey is its STag in the context's registry, which binds and checks it.
struct Mw : ibv_mw {
  Mw() : ibv_mw{} {}
};

struct Qp;

// An ibv_cq_ex, whose head is the ibv_cq every CQ verb sees (libibverbs' ibv_cq_ex_to_cq); the
// extended poll functions are set only for CQs made by ibv_create_cq_ex.
struct Cq : ibv_cq_ex {
  Cq() : ibv_cq_ex{} {}
  std::unique_ptr<engine::CompletionQueue> cq;
  ibv_wc cur{};  // the completion start_poll/next_poll returned, for the read_* functions
  // The QPs completing here: an empty poll drives the connections the progress thread left to
  // it (busy-poll, runtime/progress.h), so a polling application reads its peer's bytes itself
  // instead of waiting for the progress thread's next time slice. Walked without a lock
  // (runtime/poll_set.h): cq_detach returns once no poll can reach the QP.
  runtime::PollSet<Qp> qps;
  std::atomic<bool> overrun_reported{false};  // IBV_EVENT_CQ_ERR is raised once
};

struct Srq : ibv_srq {
  Srq() : ibv_srq{} {}
  uint32_t max_sge = 0;  // as created: receives with more are refused
  std::unique_ptr<engine::ReceiveQueue> rq;
};

// A verbs_qp: ibv_qp_to_qp_ex() finds the ibv_qp_ex of a QP made with send_ops_flags (the
// ibv_wr_* functions, uiw_data.cpp), so every ibv_qp field is reached through qp.
struct Qp : verbs_qp {
  Qp() : verbs_qp{} {}
  Context* ctx = nullptr;  // Unowned.
  uint32_t pd_id = 0;
  uint32_t sq_depth = 0, rq_depth = 0;
  uint32_t max_send_sge = 0, max_recv_sge = 0;  // as created: WRs with more are refused
  bool sig_all = false;
  std::unique_ptr<engine::ReceiveQueue> own_rq;  // null with an SRQ
  engine::ReceiveQueue* rq = nullptr;            // own_rq or the SRQ's
  engine::CompletionQueue* scq = nullptr;
  engine::CompletionQueue* rcq = nullptr;
  // Serialises posting verbs, the ibv_wr_* batch and replacing rt. A thread that uses rt
  // without mu holds a copy of the pointer taken under it (runtime_of), so a concurrent
  // RESET, which replaces rt, never frees the QueuePair under it.
  std::mutex mu;
  std::shared_ptr<runtime::QueuePair> rt;  // engine + connection; a new one after RESET
  // Connected on RTR (IBV_QP_AV + IBV_QP_DEST_QPN), so no rdma_cm reports the connection's end:
  // a peer's close is raised as IBV_EVENT_QP_FATAL instead, unless we closed first.
  std::atomic<bool> rtr_connect{false};
  std::atomic<bool> local_close{false};  // the application moved it to SQD/ERR/RESET

  // The ibv_wr_* batch (uiw_data.cpp), built between wr_start and wr_complete / wr_abort with
  // mu held all along, so no other post comes between its WRs, as with one ibv_post_send.
  struct BatchWr {
    engine::SendWr wr;
    uint32_t inline_len = 0;  // > 0: wr's one SGE is inline_data, fixed up when posted
    uint8_t inline_data[engine::kMaxInline];
  };
  std::vector<BatchWr> batch;
  int batch_error = 0;  // the first builder error; wr_complete returns it and posts nothing

  // The peer of this QP's connection is at an address of this host, so it may be a QP of this
  // same process, a twin (uiw_conn.cpp).
  std::atomic<bool> local_peer{false};
};

struct Context {
  ibv_context* ibctx = nullptr;  // Unowned: the context this one extends.
  uiw_uresp_alloc_ucontext caps{};
  memory::Registry registry{kMaxRegions};

  std::mutex mu;
  std::vector<Qp*> waiting;  // QPs without a socket, under mu
  std::unique_ptr<runtime::Progress> progress;
  std::thread ready_thread;
  int ready_efd = -1;  // signalled by uiw.ko when a QP of ours is RDMA-ready
  int stop_efd = -1;   // tells ready_thread to end
  bool ready_registered = false;
  // The counters page uiw.ko sums for rdma statistic (UIW_CAP_COUNTERS), mapped from the uverbs
  // file; every QP of the context adds to it. Null when the kernel offers none.
  uint64_t* counters = nullptr;
  size_t counters_len = 0;

  ~Context();
  int start_threads();  // once, on the first QP; requires mu
  void ready_loop();
  void pick_up_sockets();  // requires mu
};

// The block libibverbs allocates (zeroed) for a context: plain C, the C++ state hangs off it.
struct uiw_context {
  verbs_context vctx;  // first: libibverbs finds it at offset 0
  Context* impl;
};

inline Context* to_ctx(ibv_context* c) {
  return reinterpret_cast<uiw_context*>(verbs_get_ctx(c))->impl;
}
inline Pd* to_pd(ibv_pd* p) {
  return static_cast<Pd*>(p);
}
inline Cq* to_cq(ibv_cq* c) {
  return static_cast<Cq*>(reinterpret_cast<ibv_cq_ex*>(c));
}
inline ibv_cq* to_ibv(Cq* c) {
  return ibv_cq_ex_to_cq(c);
}
inline Srq* to_srq(ibv_srq* s) {
  return static_cast<Srq*>(s);
}
inline Qp* to_qp(ibv_qp* q) {
  return static_cast<Qp*>(reinterpret_cast<verbs_qp*>(q));
}
inline Qp* to_qp(ibv_qp_ex* q) {
  return static_cast<Qp*>(reinterpret_cast<verbs_qp*>(q));
}
inline Mr* to_mr(verbs_mr* m) {
  return static_cast<Mr*>(m);
}
// The QP's runtime QueuePair, kept alive for the caller even if RESET replaces it meanwhile.
inline std::shared_ptr<runtime::QueuePair> runtime_of(Qp* qp) {
  std::lock_guard lock(qp->mu);
  return qp->rt;
}

// uiw_data.cpp: the data path ops, and the CQ <-> QP association of busy polling.
void cq_attach(Cq* cq, Qp* qp);  // may throw std::bad_alloc
void cq_detach(Cq* cq, Qp* qp) noexcept;
int post_send(ibv_qp* qp, ibv_send_wr* wr, ibv_send_wr** bad_wr) noexcept;
int bind_mw(ibv_qp* qp, ibv_mw* mw, ibv_mw_bind* bind) noexcept;  // type 1 windows
int post_recv(ibv_qp* qp, ibv_recv_wr* wr, ibv_recv_wr** bad_wr) noexcept;
int post_srq_recv(ibv_srq* srq, ibv_recv_wr* wr, ibv_recv_wr** bad_wr) noexcept;
int poll_cq(ibv_cq* cq, int num_entries, ibv_wc* wc) noexcept;
int req_notify_cq(ibv_cq* cq, int solicited_only) noexcept;
// ibv_create_cq_ex: the wc_flags the read_* functions can answer, and setting them up.
inline constexpr uint64_t kCqExWcFlags = IBV_WC_STANDARD_FLAGS;
void cq_ex_set_ops(Cq* cq) noexcept;
// ibv_create_qp_ex with send_ops_flags: the ibv_wr_* operations uiw carries, and setting up the
// wr_* functions of the QP's ibv_qp_ex.
inline constexpr uint64_t kQpExSendOps =
    IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_RDMA_READ |
    IBV_QP_EX_WITH_SEND_WITH_INV | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM |
    IBV_QP_EX_WITH_SEND_WITH_IMM | IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP |
    IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD | IBV_QP_EX_WITH_BIND_MW | IBV_QP_EX_WITH_LOCAL_INV;
void qp_ex_set_ops(Qp* qp) noexcept;

// uiw_conn.cpp: driver methods and the connection side of a QP.
int method_set_eventfd(ibv_context* ctx, int fd) noexcept;  // 0 or errno
int method_cq_signal(ibv_cq* cq) noexcept;                  // 0 or errno
// Raise an affiliated async event through uiw.ko (object: UVERBS_OBJECT_QP, _CQ or _SRQ);
// 0 or errno (EOPNOTSUPP from a uiw.ko without UIW_CAP_ASYNC_EVENT).
int method_event(ibv_context* ctx, uint16_t object, uint32_t handle, ibv_event_type type) noexcept;
void qp_event(Qp* qp, engine::QpEvent ev) noexcept;
// Graceful close before the kernel's FIN (ibv_modify_qp to SQD): the queued sends are pushed
// into the socket first, at most timeout_ms.
void qp_drain(Qp* qp, int timeout_ms) noexcept;
void qp_abort(Qp* qp) noexcept;  // ERR / RESET: flush, drop the connection
// Twins: two connected QPs of one process (a loopback pair, as test suites and single-process
// applications make). When an RDMA Write of qp completes, twin_deliver() runs the peer QP's
// receive side until it has consumed every byte qp sent, so the Write is placed by the time
// poll_cq reports it, as on an RC transport whose completion follows the responder's
// acknowledgement; without it, whether the peer's threads had run yet was a race.
// twin_forget() before the connection goes.
void twin_deliver(Qp* qp) noexcept;
inline std::atomic<int> local_peer_qps{0};  // QPs with local_peer set, for a cheap check
void twin_forget(Qp* qp) noexcept;
// Every context of the process, so a twin whose socket is not picked up yet can be (uiw_conn).
void context_register(Context* ctx) noexcept;
void context_unregister(Context* ctx) noexcept;

}  // namespace uiw::provider
