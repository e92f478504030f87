// libuiw data path: post_send / post_recv / post_srq_recv, poll_cq and req_notify_cq. No system
// call on this path except the socket I/O of inline progress passes, req_notify_cq's arm
// command, one epoll_ctl when a poll or an arm hands a muted QP back to the progress thread, an
// empty poll's look for the context's other work (an epoll_wait per lend interval) and the
// doorbell write that ends such a lease (runtime/progress.h); the translation between ibv_* and the
// engine's types is table-driven (map_*).
#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <new>

#include "uiw.h"

namespace uiw::provider {
namespace {

using engine::WcOpcode;
using engine::WcStatus;
using engine::WrOpcode;

// ibv_wr_opcode -> engine opcode; -1 = not an iWARP RDMAP operation uiw offers (LOCAL_INV /
// BIND_MW / TSO are not user-space WRs here). Immediate data and atomics are RFC 7306's: the
// engine refuses them (EOPNOTSUPP) on a connection whose peer did not agree to it.
constexpr int kNoOp = -1;
constexpr std::array<int, 16> kMapSendOpcode = [] {
  std::array<int, 16> m{};
  m.fill(kNoOp);
  m[IBV_WR_RDMA_WRITE] = static_cast<int>(WrOpcode::RdmaWrite);
  m[IBV_WR_SEND] = static_cast<int>(WrOpcode::Send);
  m[IBV_WR_RDMA_READ] = static_cast<int>(WrOpcode::RdmaRead);
  m[IBV_WR_SEND_WITH_INV] = static_cast<int>(WrOpcode::SendInv);
  m[IBV_WR_RDMA_WRITE_WITH_IMM] = static_cast<int>(WrOpcode::RdmaWriteImm);
  m[IBV_WR_SEND_WITH_IMM] = static_cast<int>(WrOpcode::SendImm);
  m[IBV_WR_ATOMIC_CMP_AND_SWP] = static_cast<int>(WrOpcode::AtomicCmpSwap);
  m[IBV_WR_ATOMIC_FETCH_AND_ADD] = static_cast<int>(WrOpcode::AtomicFetchAdd);
  m[IBV_WR_BIND_MW] = static_cast<int>(WrOpcode::BindMw);
  m[IBV_WR_LOCAL_INV] = static_cast<int>(WrOpcode::LocalInv);
  return m;
}();

// engine::WcStatus (declaration order) -> ibv_wc_status.
constexpr ibv_wc_status kMapWcStatus[] = {
    IBV_WC_SUCCESS,        IBV_WC_LOC_LEN_ERR,  IBV_WC_LOC_QP_OP_ERR,  IBV_WC_LOC_PROT_ERR,
    IBV_WC_WR_FLUSH_ERR,   IBV_WC_BAD_RESP_ERR, IBV_WC_LOC_ACCESS_ERR, IBV_WC_REM_INV_REQ_ERR,
    IBV_WC_REM_ACCESS_ERR, IBV_WC_REM_OP_ERR,   IBV_WC_FATAL_ERR,      IBV_WC_GENERAL_ERR,
    IBV_WC_MW_BIND_ERR,
};
static_assert(std::size(kMapWcStatus) == static_cast<size_t>(WcStatus::MwBindErr) + 1);

// engine::WcOpcode (declaration order) -> ibv_wc_opcode.
constexpr ibv_wc_opcode kMapWcOpcode[] = {
    IBV_WC_SEND,      IBV_WC_RDMA_WRITE, IBV_WC_RDMA_READ,          IBV_WC_RECV,
    IBV_WC_FETCH_ADD, IBV_WC_COMP_SWAP,  IBV_WC_RECV_RDMA_WITH_IMM, IBV_WC_BIND_MW,
    IBV_WC_LOCAL_INV,
};
static_assert(std::size(kMapWcOpcode) == static_cast<size_t>(WcOpcode::LocalInv) + 1);

// ibv_send_flags -> engine::SendFlags.
uint32_t map_send_flags(unsigned int f, bool sig_all) {
  uint32_t out = 0;
  if ((f & IBV_SEND_SIGNALED) || sig_all) out |= engine::kSendSignaled;
  if (f & IBV_SEND_SOLICITED) out |= engine::kSendSolicited;
  if (f & IBV_SEND_FENCE) out |= engine::kSendFence;
  if (f & IBV_SEND_INLINE) out |= engine::kSendInline;
  return out;
}

void copy_sges(const ibv_sge* in, int n, engine::Sge* out) {
  for (int i = 0; i < n; ++i) out[i] = {in[i].addr, in[i].length, in[i].lkey};
}

// The bind of window `mw` (its current STag) under `new_rkey` (the same index, its key byte
// what the application chose, ibv_inc_rkey) as bind_info says. memory::Access has the
// IBV_ACCESS_* bit values; a window carries remote rights only.
void set_bind(uint32_t mw, uint32_t new_rkey, const ibv_mw_bind_info& bi, engine::SendWr* out) {
  out->bind.mw = mw;
  out->bind.mr = bi.mr ? bi.mr->lkey : 0;
  out->bind.addr = bi.addr;
  out->bind.length = bi.length;
  out->bind.access = static_cast<uint32_t>(bi.mw_access_flags) &
                     (memory::kRemoteRead | memory::kRemoteWrite | memory::kRemoteAtomic);
  out->bind.key = static_cast<uint8_t>(new_rkey & 0xff);
}

// 0 or EINVAL (unsupported opcode, more SGEs than the QP was created with).
int to_engine(const ibv_send_wr& wr, const Qp& qp, engine::SendWr* out) {
  const int op =
      static_cast<unsigned>(wr.opcode) < kMapSendOpcode.size() ? kMapSendOpcode[wr.opcode] : kNoOp;
  if (op == kNoOp || wr.num_sge < 0 || static_cast<uint32_t>(wr.num_sge) > qp.max_send_sge)
    return EINVAL;
  const bool sig_all = qp.sig_all;
  out->wr_id = wr.wr_id;
  out->opcode = static_cast<WrOpcode>(op);
  out->flags = map_send_flags(wr.send_flags, sig_all);
  out->num_sge = static_cast<uint32_t>(wr.num_sge);
  copy_sges(wr.sg_list, wr.num_sge, out->sg_list);
  if (out->opcode == WrOpcode::SendInv) out->invalidate_stag = wr.invalidate_rkey;
  switch (out->opcode) {
    case WrOpcode::RdmaWrite:
    case WrOpcode::RdmaRead:
    case WrOpcode::RdmaWriteImm:
      out->remote_stag = wr.wr.rdma.rkey;
      out->remote_addr = wr.wr.rdma.remote_addr;
      break;
    case WrOpcode::AtomicFetchAdd:
    case WrOpcode::AtomicCmpSwap:
      out->remote_stag = wr.wr.atomic.rkey;
      out->remote_addr = wr.wr.atomic.remote_addr;
      out->compare_add = wr.wr.atomic.compare_add;
      out->swap = wr.wr.atomic.swap;
      break;
    default:
      break;
  }
  if (out->opcode == WrOpcode::RdmaWriteImm || out->opcode == WrOpcode::SendImm)
    out->imm_data = wr.imm_data;  // network order, passed through as the application gave it
  if (out->opcode == WrOpcode::LocalInv) out->invalidate_stag = wr.invalidate_rkey;
  if (out->opcode == WrOpcode::BindMw) {
    // IBV_WR_BIND_MW binds type 2 windows; a type 1 window is bound with ibv_bind_mw.
    if (!wr.bind_mw.mw || wr.bind_mw.mw->type != IBV_MW_TYPE_2) return EINVAL;
    set_bind(wr.bind_mw.mw->rkey, wr.bind_mw.rkey, wr.bind_mw.bind_info, out);
  }
  return 0;
}

int to_engine(const ibv_recv_wr& wr, uint32_t max_sge, engine::RecvWr* out) {
  if (wr.num_sge < 0 || static_cast<uint32_t>(wr.num_sge) > max_sge) return EINVAL;
  out->wr_id = wr.wr_id;
  out->num_sge = static_cast<uint32_t>(wr.num_sge);
  copy_sges(wr.sg_list, wr.num_sge, out->sg_list);
  return 0;
}

void to_wc(const engine::Completion& c, ibv_wc* wc) {
  *wc = ibv_wc{};
  wc->wr_id = c.wr_id;
  wc->status = kMapWcStatus[static_cast<size_t>(c.status)];
  wc->opcode = kMapWcOpcode[static_cast<size_t>(c.opcode)];
  wc->vendor_err = c.vendor_err;
  wc->byte_len = c.byte_len;
  wc->qp_num = c.qp_num;
  if (c.flags & engine::kWcWithInv) {
    wc->wc_flags |= IBV_WC_WITH_INV;
    wc->invalidated_rkey = c.invalidated_stag;
  }
  if (c.flags & engine::kWcWithImm) {
    wc->wc_flags |= IBV_WC_WITH_IMM;
    wc->imm_data = c.imm_data;
  }
}

}  // namespace

int post_send(ibv_qp* ibqp, ibv_send_wr* wr, ibv_send_wr** bad_wr) noexcept {
  Qp* qp = to_qp(ibqp);
  int rc = 0;
  std::lock_guard lock(qp->mu);
  for (; wr; wr = wr->next) {
    engine::SendWr ew;
    rc = to_engine(*wr, *qp, &ew);
    if (!rc) rc = -qp->rt->post_send(ew);
    if (rc) {
      *bad_wr = wr;
      break;
    }
  }
  // Transmit now, in the caller's thread (the lowest latency, and no doorbell to ring); what the
  // socket does not take, the progress thread sends when it becomes writable. Under Qp::mu, so
  // RESET cannot replace rt meanwhile.
  qp->rt->drive(true);
  return rc;
}

// ibv_bind_mw (type 1): a bind work request on the QP, in order with the others; the window's
// rkey takes its next key now, as rdma-core's ibv_bind_mw expects of a provider.
int bind_mw(ibv_qp* ibqp, ibv_mw* mw, ibv_mw_bind* b) noexcept {
  if (!mw || !b || mw->type != IBV_MW_TYPE_1) return EINVAL;
  Qp* qp = to_qp(ibqp);
  const uint32_t new_rkey = ibv_inc_rkey(mw->rkey);
  engine::SendWr ew;
  ew.wr_id = b->wr_id;
  ew.opcode = WrOpcode::BindMw;
  ew.flags = map_send_flags(b->send_flags, qp->sig_all);
  set_bind(mw->rkey, new_rkey, b->bind_info, &ew);
  std::lock_guard lock(qp->mu);
  const int rc = -qp->rt->post_send(ew);
  if (!rc) mw->rkey = new_rkey;
  qp->rt->drive(true);
  return rc;
}

int post_recv(ibv_qp* ibqp, ibv_recv_wr* wr, ibv_recv_wr** bad_wr) noexcept {
  Qp* qp = to_qp(ibqp);
  std::lock_guard lock(qp->mu);
  for (; wr; wr = wr->next) {
    engine::RecvWr ew;
    int rc = to_engine(*wr, qp->max_recv_sge, &ew);
    if (!rc) rc = -qp->rt->post_recv(ew);
    if (rc) {
      *bad_wr = wr;
      return rc;
    }
  }
  return 0;
}

int post_srq_recv(ibv_srq* ibsrq, ibv_recv_wr* wr, ibv_recv_wr** bad_wr) noexcept {
  Srq* srq = to_srq(ibsrq);
  for (; wr; wr = wr->next) {
    engine::RecvWr ew;
    int rc = to_engine(*wr, srq->max_sge, &ew);
    if (!rc) rc = -srq->rq->post(ew);
    if (rc) {
      *bad_wr = wr;
      return rc;
    }
  }
  return 0;
}

void cq_attach(Cq* cq, Qp* qp) {
  cq->qps.add(qp);
}

void cq_detach(Cq* cq, Qp* qp) noexcept {
  cq->qps.remove(qp);
}

namespace {

// An RDMA Write of a QP whose peer lives in this process completed: place it there now
// (twin_deliver, uiw.h), before the application sees the completion.
void deliver_to_twins(Cq* cq, const engine::Completion* c, size_t n) {
  if (local_peer_qps.load(std::memory_order_relaxed) == 0) return;
  for (size_t i = 0; i < n; ++i) {
    if (c[i].opcode != WcOpcode::RdmaWrite || c[i].status != WcStatus::Success) continue;
    Qp* twin_of = nullptr;
    cq->qps.for_each([&](Qp& qp) {
      if (qp.qp.qp_num == c[i].qp_num && qp.local_peer) twin_of = &qp;
    });
    // After the walk: twin_deliver takes the twins registry, which destroy_qp takes first.
    if (twin_of) twin_deliver(twin_of);
  }
}

}  // namespace

int poll_cq(ibv_cq* ibcq, int num_entries, ibv_wc* wc) noexcept {
  if (num_entries <= 0) return 0;
  Cq* cq = to_cq(ibcq);
  // What the ring holds, up to num_entries, in chunks of engine completions.
  auto take = [&] {
    std::array<engine::Completion, 32> buf;
    size_t total = 0;
    while (total < static_cast<size_t>(num_entries)) {
      const size_t want = std::min(buf.size(), static_cast<size_t>(num_entries) - total);
      const size_t got = cq->cq->poll({buf.data(), want});
      deliver_to_twins(cq, buf.data(), got);
      for (size_t i = 0; i < got; ++i) to_wc(buf[i], &wc[total + i]);
      total += got;
      if (got < want) break;
    }
    return total;
  };
  // Within the walk: RESET and destroy detach a QP from its CQs (which waits for the walks that
  // may reach it) before replacing its rt.
  auto each_qp = [&](auto&& f) { cq->qps.for_each([&](Qp& qp) { f(*qp.rt); }); };
  return static_cast<int>(runtime::poll_driving(*cq->cq, take, each_qp));
}

// uiw.ko fires one completion event per arm it has seen (it cannot read the ring, and an
// event it queued for nothing would cost kernel memory), so the kernel is armed first: a
// completion that arrives between the two arms then finds the kernel armed.
int req_notify_cq(ibv_cq* ibcq, int solicited_only) noexcept {
  if (int rc = ibv_cmd_req_notify_cq(ibcq, solicited_only)) return rc;
  Cq* cq = to_cq(ibcq);
  cq->cq->arm(solicited_only != 0);
  // The application stops polling to sleep on the event: the progress thread must read what
  // arrives from now on (a poll had muted these QPs for it, runtime/progress.h).
  cq->qps.for_each([](Qp& qp) { qp.rt->unpoll(); });
  return 0;
}

// ---- ibv_cq_ex: one completion at a time through poll_cq (same busy-poll and ordering), kept in
// Cq::cur for the read_* functions until the next start_poll/next_poll.
namespace {

Cq* cqx(ibv_cq_ex* c) {
  return static_cast<Cq*>(c);
}

int cqx_poll_one(ibv_cq_ex* c) {
  Cq* cq = cqx(c);
  if (poll_cq(to_ibv(cq), 1, &cq->cur) != 1) return ENOENT;
  c->wr_id = cq->cur.wr_id;
  c->status = cq->cur.status;
  return 0;
}

int cqx_start_poll(ibv_cq_ex* c, ibv_poll_cq_attr* attr) {
  if (attr->comp_mask) return EINVAL;  // no poll attributes defined
  return cqx_poll_one(c);
}
int cqx_next_poll(ibv_cq_ex* c) {
  return cqx_poll_one(c);
}
void cqx_end_poll(ibv_cq_ex*) {}  // nothing held between polls
ibv_wc_opcode cqx_read_opcode(ibv_cq_ex* c) {
  return cqx(c)->cur.opcode;
}
uint32_t cqx_read_vendor_err(ibv_cq_ex* c) {
  return cqx(c)->cur.vendor_err;
}
uint32_t cqx_read_byte_len(ibv_cq_ex* c) {
  return cqx(c)->cur.byte_len;
}
__be32 cqx_read_imm_data(ibv_cq_ex* c) {  // the invalidated STag with IBV_WC_WITH_INV
  return cqx(c)->cur.imm_data;
}
uint32_t cqx_read_qp_num(ibv_cq_ex* c) {
  return cqx(c)->cur.qp_num;
}
uint32_t cqx_read_src_qp(ibv_cq_ex* c) {
  return cqx(c)->cur.src_qp;
}
unsigned int cqx_read_wc_flags(ibv_cq_ex* c) {
  return cqx(c)->cur.wc_flags;
}
uint32_t cqx_read_slid(ibv_cq_ex* c) {
  return cqx(c)->cur.slid;
}
uint8_t cqx_read_sl(ibv_cq_ex* c) {
  return cqx(c)->cur.sl;
}
uint8_t cqx_read_dlid_path_bits(ibv_cq_ex* c) {
  return cqx(c)->cur.dlid_path_bits;
}

}  // namespace

void cq_ex_set_ops(Cq* cq) noexcept {
  cq->start_poll = cqx_start_poll;
  cq->next_poll = cqx_next_poll;
  cq->end_poll = cqx_end_poll;
  cq->read_opcode = cqx_read_opcode;
  cq->read_vendor_err = cqx_read_vendor_err;
  cq->read_byte_len = cqx_read_byte_len;
  cq->read_imm_data = cqx_read_imm_data;
  cq->read_qp_num = cqx_read_qp_num;
  cq->read_src_qp = cqx_read_src_qp;
  cq->read_wc_flags = cqx_read_wc_flags;
  cq->read_slid = cqx_read_slid;
  cq->read_sl = cqx_read_sl;
  cq->read_dlid_path_bits = cqx_read_dlid_path_bits;
}

// ---- ibv_qp_ex: the ibv_wr_* post-send API. wr_start takes Qp::mu and wr_complete / wr_abort
// release it; each builder (wr_send, wr_rdma_write, ...) begins a WR with the ibv_qp_ex's wr_id
// and wr_flags as they are then, and the wr_set_* functions fill in the WR begun last. Errors
// are held until wr_complete, which then posts nothing (rdma-core's ibv_wr_post(3)).
namespace {

void batch_fail(Qp* qp, int err) {
  if (!qp->batch_error) qp->batch_error = err;
}

void batch_begin(ibv_qp_ex* x, WrOpcode op) {
  Qp* qp = to_qp(x);
  if (qp->batch_error) return;
  try {
    Qp::BatchWr& b = qp->batch.emplace_back();
    b.wr.wr_id = x->wr_id;
    b.wr.opcode = op;
    b.wr.flags = map_send_flags(x->wr_flags, qp->sig_all);
  } catch (const std::bad_alloc&) {
    batch_fail(qp, ENOMEM);
  }
}

// The WR the last builder began; null (and EINVAL held) when a wr_set_* comes first.
Qp::BatchWr* batch_last(ibv_qp_ex* x) {
  Qp* qp = to_qp(x);
  if (qp->batch_error) return nullptr;
  if (qp->batch.empty()) return batch_fail(qp, EINVAL), nullptr;
  return &qp->batch.back();
}

void qpx_wr_start(ibv_qp_ex* x) {
  Qp* qp = to_qp(x);
  qp->mu.lock();
  qp->batch.clear();
  qp->batch_error = 0;
}

void qpx_wr_abort(ibv_qp_ex* x) {
  Qp* qp = to_qp(x);
  qp->batch.clear();
  qp->batch_error = 0;
  qp->mu.unlock();
}

// A send queue without room for the whole batch refuses it (ENOMEM), as does a Read with inline
// data in it; a QP in Error takes it and flushes. A WR the engine refuses (an RFC 7306 opcode the
// connection did not agree to, an atomic with other than one 8-byte SGE) ends the post with its
// error, as ibv_post_send's bad_wr does: the WRs before it stay posted and are sent.
int qpx_wr_complete(ibv_qp_ex* x) {
  Qp* qp = to_qp(x);
  int rc = qp->batch_error;
  if (!rc) {
    for (Qp::BatchWr& b : qp->batch)
      if (b.inline_len) b.wr.sg_list[0].addr = reinterpret_cast<uintptr_t>(b.inline_data);
    // As ibv_post_send posts: not behind a pass of the progress thread, which holds the QP's
    // engine across its socket reads and writes. All or nothing: a WR the engine refuses
    // refuses the batch.
    rc = -qp->rt->post_send_all(
        qp->batch.size(), [qp](size_t i) -> const engine::SendWr& { return qp->batch[i].wr; });
    if (!rc) qp->rt->drive(true);
  }
  qp->batch.clear();
  qp->batch_error = 0;
  qp->mu.unlock();
  return rc;
}

void qpx_wr_send(ibv_qp_ex* x) {
  batch_begin(x, WrOpcode::Send);
}
void qpx_wr_send_inv(ibv_qp_ex* x, uint32_t invalidate_rkey) {
  batch_begin(x, WrOpcode::SendInv);
  if (Qp::BatchWr* b = batch_last(x)) b->wr.invalidate_stag = invalidate_rkey;
}
void qpx_wr_rdma_write(ibv_qp_ex* x, uint32_t rkey, uint64_t remote_addr) {
  batch_begin(x, WrOpcode::RdmaWrite);
  if (Qp::BatchWr* b = batch_last(x)) b->wr.remote_stag = rkey, b->wr.remote_addr = remote_addr;
}
void qpx_wr_rdma_read(ibv_qp_ex* x, uint32_t rkey, uint64_t remote_addr) {
  batch_begin(x, WrOpcode::RdmaRead);
  if (Qp::BatchWr* b = batch_last(x)) b->wr.remote_stag = rkey, b->wr.remote_addr = remote_addr;
}

void qpx_wr_set_sge(ibv_qp_ex* x, uint32_t lkey, uint64_t addr, uint32_t length) {
  if (to_qp(x)->max_send_sge < 1) return batch_fail(to_qp(x), EINVAL);
  if (Qp::BatchWr* b = batch_last(x)) {
    b->wr.num_sge = 1;
    b->wr.sg_list[0] = {addr, length, lkey};
    b->inline_len = 0;
  }
}
void qpx_wr_set_sge_list(ibv_qp_ex* x, size_t num_sge, const ibv_sge* sg_list) {
  Qp::BatchWr* b = batch_last(x);
  if (!b) return;
  if (num_sge > to_qp(x)->max_send_sge) return batch_fail(to_qp(x), EINVAL);
  b->wr.num_sge = static_cast<uint32_t>(num_sge);
  copy_sges(sg_list, static_cast<int>(num_sge), b->wr.sg_list);
  b->inline_len = 0;
}

// Inline data is copied now: the caller may reuse its buffers as soon as the call returns.
void qpx_wr_set_inline_data_list(ibv_qp_ex* x, size_t num_buf, const ibv_data_buf* buf_list) {
  Qp::BatchWr* b = batch_last(x);
  if (!b) return;
  size_t len = 0;
  for (size_t i = 0; i < num_buf; ++i) {
    if (buf_list[i].length > engine::kMaxInline - len) return batch_fail(to_qp(x), EINVAL);
    if (buf_list[i].length) std::memcpy(b->inline_data + len, buf_list[i].addr, buf_list[i].length);
    len += buf_list[i].length;
  }
  b->inline_len = static_cast<uint32_t>(len);
  b->wr.flags |= engine::kSendInline;
  b->wr.num_sge = len ? 1 : 0;
  b->wr.sg_list[0] = {0, static_cast<uint32_t>(len), 0};  // addr set when posted
}
void qpx_wr_set_inline_data(ibv_qp_ex* x, void* addr, size_t length) {
  const ibv_data_buf one{addr, length};
  qpx_wr_set_inline_data_list(x, 1, &one);
}

// Operations iWARP (RFC 5040) does not have or uiw does not offer: create_qp_ex refuses them
// in send_ops_flags, and calling one anyway fails the batch instead of jumping through null.
void qpx_refuse(ibv_qp_ex* x) {
  Qp* qp = to_qp(x);
  batch_begin(x, WrOpcode::Send);
  batch_fail(qp, EOPNOTSUPP);
}
void qpx_wr_atomic_cmp_swp(ibv_qp_ex* x, uint32_t rkey, uint64_t remote_addr, uint64_t compare,
                           uint64_t swap) {
  batch_begin(x, WrOpcode::AtomicCmpSwap);
  if (Qp::BatchWr* b = batch_last(x)) {
    b->wr.remote_stag = rkey;
    b->wr.remote_addr = remote_addr;
    b->wr.compare_add = compare;
    b->wr.swap = swap;
  }
}
void qpx_wr_atomic_fetch_add(ibv_qp_ex* x, uint32_t rkey, uint64_t remote_addr, uint64_t add) {
  batch_begin(x, WrOpcode::AtomicFetchAdd);
  if (Qp::BatchWr* b = batch_last(x)) {
    b->wr.remote_stag = rkey;
    b->wr.remote_addr = remote_addr;
    b->wr.compare_add = add;
  }
}
void qpx_wr_atomic_write(ibv_qp_ex* x, uint32_t, uint64_t, const void*) {
  qpx_refuse(x);
}
void qpx_wr_bind_mw(ibv_qp_ex* x, ibv_mw* mw, uint32_t rkey, const ibv_mw_bind_info* bi) {
  if (!mw || !bi || mw->type != IBV_MW_TYPE_2) return batch_fail(to_qp(x), EINVAL);
  batch_begin(x, WrOpcode::BindMw);
  if (Qp::BatchWr* b = batch_last(x)) set_bind(mw->rkey, rkey, *bi, &b->wr);
}
void qpx_wr_local_inv(ibv_qp_ex* x, uint32_t invalidate_rkey) {
  batch_begin(x, WrOpcode::LocalInv);
  if (Qp::BatchWr* b = batch_last(x)) b->wr.invalidate_stag = invalidate_rkey;
}
void qpx_wr_rdma_write_imm(ibv_qp_ex* x, uint32_t rkey, uint64_t remote_addr, __be32 imm_data) {
  batch_begin(x, WrOpcode::RdmaWriteImm);
  if (Qp::BatchWr* b = batch_last(x)) {
    b->wr.remote_stag = rkey;
    b->wr.remote_addr = remote_addr;
    b->wr.imm_data = imm_data;
  }
}
void qpx_wr_send_imm(ibv_qp_ex* x, __be32 imm_data) {
  batch_begin(x, WrOpcode::SendImm);
  if (Qp::BatchWr* b = batch_last(x)) b->wr.imm_data = imm_data;
}
void qpx_wr_send_tso(ibv_qp_ex* x, void*, uint16_t, uint16_t) {
  qpx_refuse(x);
}
void qpx_wr_set_ud_addr(ibv_qp_ex* x, ibv_ah*, uint32_t, uint32_t) {  // RC only
  batch_fail(to_qp(x), EINVAL);
}
void qpx_wr_set_xrc_srqn(ibv_qp_ex* x, uint32_t) {
  batch_fail(to_qp(x), EINVAL);
}

}  // namespace

void qp_ex_set_ops(Qp* qp) noexcept {
  ibv_qp_ex& x = qp->qp_ex;
  x.wr_start = qpx_wr_start;
  x.wr_complete = qpx_wr_complete;
  x.wr_abort = qpx_wr_abort;
  x.wr_send = qpx_wr_send;
  x.wr_send_inv = qpx_wr_send_inv;
  x.wr_rdma_write = qpx_wr_rdma_write;
  x.wr_rdma_read = qpx_wr_rdma_read;
  x.wr_set_sge = qpx_wr_set_sge;
  x.wr_set_sge_list = qpx_wr_set_sge_list;
  x.wr_set_inline_data = qpx_wr_set_inline_data;
  x.wr_set_inline_data_list = qpx_wr_set_inline_data_list;
  x.wr_atomic_cmp_swp = qpx_wr_atomic_cmp_swp;
  x.wr_atomic_fetch_add = qpx_wr_atomic_fetch_add;
  x.wr_atomic_write = qpx_wr_atomic_write;
  x.wr_bind_mw = qpx_wr_bind_mw;
  x.wr_local_inv = qpx_wr_local_inv;
  x.wr_rdma_write_imm = qpx_wr_rdma_write_imm;
  x.wr_send_imm = qpx_wr_send_imm;
  x.wr_send_tso = qpx_wr_send_tso;
  x.wr_set_ud_addr = qpx_wr_set_ud_addr;
  x.wr_set_xrc_srqn = qpx_wr_set_xrc_srqn;
  qp->comp_mask |= UIW_VERBS_QP_EX;
}

}  // namespace uiw::provider
