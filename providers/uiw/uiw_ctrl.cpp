// libuiw control path: device matching, contexts, and the PD / MR / CQ / SRQ / QP verbs. Each
// object is created in the kernel first (ibv_cmd_*: uiw.ko hands out handles, QPNs and STags),
// then its engine half is built; destruction runs the other way round.
#include <fcntl.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>

#include "uiw.h"

namespace uiw::provider {
namespace {

// Runs f() and turns an escaping exception (bad_alloc, system_error from std::thread) into an
// errno value: no exception may cross into libibverbs.
template <typename F>
int guarded(F&& f) noexcept {
  try {
    return f();
  } catch (const std::bad_alloc&) {
    return ENOMEM;
  } catch (...) {
    return EIO;
  }
}

// Every object is made in two halves: the kernel's (ibv_cmd_*, which also fills the ibv_*
// base) and then the provider's own. kernel(obj) and local(obj) return 0 or an errno value;
// when local fails, undo(obj) removes the kernel half. Either failure leaves nothing behind.
template <typename Obj, typename Kernel, typename Local, typename Undo>
Obj* create_object(Kernel&& kernel, Local&& local, Undo&& undo) noexcept {
  auto* obj = new (std::nothrow) Obj;
  if (!obj) return errno = ENOMEM, nullptr;
  int rc = kernel(obj);
  if (!rc) {
    rc = guarded([&] { return local(obj); });
    if (rc) undo(obj);
  }
  if (rc) {
    delete obj;
    return errno = rc, nullptr;
  }
  return obj;
}

// ---- device and context

// True if the kernel driver behind the device is uiw.ko: its sysfs hca_type says so whatever the
// device is named. (uiw.ko is out of tree, so there is no rdma_driver_id to match.)
bool driven_by_uiw(const verbs_sysfs_dev* sdev) noexcept {
  char path[sizeof(sdev->ibdev_path) + 16];
  if (std::snprintf(path, sizeof(path), "%s/hca_type", sdev->ibdev_path) >= int(sizeof(path)))
    return false;
  int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  char value[16] = {};
  ssize_t n = ::read(fd, value, sizeof(value) - 1);
  ::close(fd);
  constexpr std::size_t kLen = sizeof(UIW_HCA_TYPE) - 1;
  return n == ssize_t(kLen + 1) && std::memcmp(value, UIW_HCA_TYPE "\n", kLen + 1) == 0;
}

// libibverbs calls this for every device, table match or not. The kernel side speaks uiw UAPI
// `abi_ver` (sysfs abi_version); refuse any other with a message that says what to do, rather
// than libibverbs' generic range warning.
bool match_device(verbs_sysfs_dev* sdev) noexcept {
  if (!driven_by_uiw(sdev)) return false;
  if (sdev->abi_ver != UIW_ABI_VERSION) {
    std::fprintf(stderr,
                 "uiw: %s: the kernel module uiw.ko speaks uiw UAPI version %u but this provider "
                 "(libuiw-rdmav%d.so) was built for version %u; install matching uiw.ko and "
                 "provider builds\n",
                 sdev->ibdev_name, sdev->abi_ver, UIW_IBVERBS_PABI_VERSION, UIW_ABI_VERSION);
    return false;
  }
  return true;
}

verbs_device* alloc_device(verbs_sysfs_dev*) noexcept {
  return static_cast<verbs_device*>(std::calloc(1, sizeof(verbs_device)));
}

void uninit_device(verbs_device* dev) noexcept {
  std::free(dev);
}

void free_context(ibv_context* ibctx) noexcept {
  auto* shell = reinterpret_cast<uiw_context*>(verbs_get_ctx(ibctx));
  context_unregister(shell->impl);
  delete shell->impl;
  verbs_uninit_context(&shell->vctx);
  std::free(shell);
}

int query_device_ex(ibv_context* ibctx, const ibv_query_device_ex_input* input,
                    ibv_device_attr_ex* attr, size_t attr_size) noexcept {
  ib_uverbs_ex_query_device_resp resp{};
  size_t resp_size = sizeof(resp);
  const int rc = ibv_cmd_query_device_any(ibctx, input, attr, attr_size, &resp, &resp_size);
  if (rc) return rc;
  // The kernel reports fw_ver as a number only; its sysfs string is the one to show.
  auto* vdev = reinterpret_cast<verbs_device*>(ibctx->device);
  char fw[sizeof(attr->orig_attr.fw_ver)];
  if (ibv_read_ibdev_sysfs_file(fw, sizeof(fw), vdev->sysfs, "fw_ver") > 0)
    std::snprintf(attr->orig_attr.fw_ver, sizeof(attr->orig_attr.fw_ver), "%s", fw);
  // Limits of this provider's own tables.
  Context* ctx = to_ctx(ibctx);
  attr->orig_attr.max_mr = std::min<int>(attr->orig_attr.max_mr, ctx->registry.capacity());
  attr->orig_attr.max_sge = std::min<int>(attr->orig_attr.max_sge, engine::kMaxSge);
  attr->orig_attr.max_qp_rd_atom =
      std::min<int>(attr->orig_attr.max_qp_rd_atom, engine::kMaxOrdIrd);
  attr->orig_attr.max_qp_init_rd_atom =
      std::min<int>(attr->orig_attr.max_qp_init_rd_atom, engine::kMaxOrdIrd);
  return 0;
}

int query_port(ibv_context* ibctx, uint8_t port, ibv_port_attr* attr) noexcept {
  uiw_cmd<ib_uverbs_query_port> cmd{};
  return ibv_cmd_query_port(ibctx, port, attr, &cmd, sizeof(cmd));
}

// ---- PD and MR

ibv_pd* alloc_pd(ibv_context* ibctx) noexcept {
  return create_object<Pd>(
      [&](Pd* pd) {
        uiw_cmd<ib_uverbs_alloc_pd> cmd{};
        ib_uverbs_alloc_pd_resp resp{};
        return ibv_cmd_alloc_pd(ibctx, pd, &cmd, sizeof(cmd), &resp, sizeof(resp));
      },
      [&](Pd* pd) { return pd->pd_id = to_ctx(ibctx)->registry.alloc_pd(), 0; },
      [](Pd* pd) { ibv_cmd_dealloc_pd(pd); });
}

// A parent domain over `attr->pd`; the allocators and pd_context are accepted (uiw has no
// buffers for them to place), a thread domain is refused (uiw offers none).
ibv_pd* alloc_parent_domain(ibv_context* ibctx, ibv_parent_domain_init_attr* attr) noexcept {
  const uint32_t known =
      IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS | IBV_PARENT_DOMAIN_INIT_ATTR_PD_CONTEXT;
  if (!attr->pd || attr->pd->context != ibctx || (attr->comp_mask & ~known))
    return errno = EINVAL, nullptr;
  if (attr->td) return errno = EOPNOTSUPP, nullptr;
  Pd* protection = to_pd(attr->pd);
  if (protection->protection) return errno = EINVAL, nullptr;  // not over another parent
  auto* parent = new (std::nothrow) Pd;
  if (!parent) return errno = ENOMEM, nullptr;
  parent->context = ibctx;
  parent->handle = protection->handle;
  parent->pd_id = protection->pd_id;
  parent->protection = protection;
  ++protection->parents;
  return parent;
}

int dealloc_pd(ibv_pd* ibpd) noexcept {
  Pd* pd = to_pd(ibpd);
  if (pd->protection) {
    --pd->protection->parents;
    delete pd;
    return 0;
  }
  if (pd->parents > 0) return EBUSY;
  // The kernel refuses (EBUSY) while MRs or QPs use the PD, so the local PD is then free too.
  if (const int rc = ibv_cmd_dealloc_pd(pd)) return rc;
  to_ctx(pd->context)->registry.dealloc_pd(pd->pd_id);
  delete pd;
  return 0;
}

ibv_mr* reg_mr(ibv_pd* ibpd, void* addr, size_t length, uint64_t hca_va, int access) noexcept {
  Pd* pd = to_pd(ibpd);
  Context* ctx = to_ctx(pd->context);
  uiw_drv_resp<ib_uverbs_reg_mr_resp, uiw_uresp_reg_mr> resp{};
  Mr* mr = create_object<Mr>(
      [&](Mr* m) {
        uiw_cmd<ib_uverbs_reg_mr> cmd{};
        return ibv_cmd_reg_mr(pd, addr, length, hca_va, access, m, &cmd, sizeof(cmd), resp.ibv(),
                              sizeof(resp));
      },
      [&](Mr* m) {
        // memory::Access has the IBV_ACCESS_* bit values; the optional bits (relaxed
        // ordering, ...) change nothing for a software RNIC.
        const uint32_t acc = static_cast<uint32_t>(access) & memory::kAllAccess;
        m->stag = resp.drv.stag;
        int rc =
            ctx->registry.register_region_with_stag(m->stag, pd->pd_id, addr, length, hca_va, acc);
        if (rc == -EBUSY) {
          // Another live region of this context sits in the STag's table slot (the kernel's
          // STags are unique per device, not per slot). Any STag works for the peer.
          m->stag = ctx->registry.register_region(pd->pd_id, addr, length, hca_va, acc, &rc);
          m->ibv_mr.lkey = m->ibv_mr.rkey = m->stag;
        }
        return -rc;
      },
      [](Mr* m) { ibv_cmd_dereg_mr(m); });
  return mr ? &mr->ibv_mr : nullptr;
}

// ibv_alloc_mw: an STag from uiw.ko, an unbound window in the registry under it (or under one
// of the registry's own when its table slot is taken, as for an MR).
ibv_mw* alloc_mw(ibv_pd* ibpd, ibv_mw_type type) noexcept {
  if (type != IBV_MW_TYPE_1 && type != IBV_MW_TYPE_2) return errno = EINVAL, nullptr;
  Pd* pd = to_pd(ibpd);
  Context* ctx = to_ctx(pd->context);
  const memory::MwType t = type == IBV_MW_TYPE_1 ? memory::MwType::Type1 : memory::MwType::Type2;
  ib_uverbs_alloc_mw_resp resp{};
  Mw* mw = create_object<Mw>(
      [&](Mw* m) {
        uiw_cmd<ib_uverbs_alloc_mw> cmd{};
        return ibv_cmd_alloc_mw(pd, type, m, &cmd, sizeof(cmd), &resp, sizeof(resp));
      },
      [&](Mw* m) {
        int rc = ctx->registry.register_window_with_stag(m->rkey, pd->pd_id, t);
        if (rc == -EBUSY) m->rkey = ctx->registry.alloc_mw(pd->pd_id, t, &rc);
        return -rc;
      },
      [](Mw* m) { ibv_cmd_dealloc_mw(m); });
  return mw;
}

int dealloc_mw(ibv_mw* ibmw) noexcept {
  // Unbound locally first: when that returns, nothing is placed through it any more.
  to_ctx(ibmw->context)->registry.dealloc_mw(ibmw->rkey);
  if (const int rc = ibv_cmd_dealloc_mw(ibmw)) return rc;
  delete static_cast<Mw*>(ibmw);
  return 0;
}

int dereg_mr(verbs_mr* vmr) noexcept {
  Mr* mr = to_mr(vmr);
  Context* ctx = to_ctx(mr->ibv_mr.context);
  // Locally first: when deregister() returns, no placement can touch the buffer any more
  // (RFC 5041 §8.3.1(6)). Memory windows still bound to it keep it (verbs: EBUSY).
  if (ctx->registry.deregister(mr->stag) == -EBUSY) return EBUSY;
  if (const int rc = ibv_cmd_dereg_mr(vmr)) return rc;
  delete mr;
  return 0;
}

// ibv_rereg_mr, in place: the registry first (what placement uses; it refuses while memory
// windows are bound to the region), then uiw.ko (the PD it accounts, the range checked as at
// registration); a refusal there puts the registry back. The STag stays, whatever uiw.ko's
// response says of the keys. As for ibv_reg_mr, the new iova is the address.
int rereg_mr(verbs_mr* vmr, int flags, ibv_pd* ibpd, void* addr, size_t length,
             int access) noexcept {
  Mr* mr = to_mr(vmr);
  Context* ctx = to_ctx(mr->ibv_mr.context);
  memory::RegionInfo old{};
  if (ctx->registry.query(mr->stag, &old)) return EINVAL;
  memory::RegionUpdate change;
  if (flags & IBV_REREG_MR_CHANGE_PD) {
    if (!ibpd || ibpd->context != mr->ibv_mr.context) return EINVAL;
    change.pd = to_pd(ibpd)->pd_id;
  }
  if (flags & IBV_REREG_MR_CHANGE_TRANSLATION)
    change.translation = {{addr, length, reinterpret_cast<uintptr_t>(addr)}};
  if (flags & IBV_REREG_MR_CHANGE_ACCESS)
    change.access = static_cast<uint32_t>(access) & memory::kAllAccess;
  if (const int rc = ctx->registry.reregister(mr->stag, change)) return -rc;
  uiw_cmd<ib_uverbs_rereg_mr> cmd{};
  ib_uverbs_rereg_mr_resp resp{};
  if (const int rc = ibv_cmd_rereg_mr(vmr, flags, addr, length, reinterpret_cast<uintptr_t>(addr),
                                      access, ibpd, &cmd, sizeof(cmd), &resp, sizeof(resp))) {
    const int undo = ctx->registry.reregister(
        mr->stag,
        {.pd = old.pd, .translation = {{old.host, old.length, old.iova}}, .access = old.access});
    return undo ? EIO : rc;
  }
  mr->ibv_mr.lkey = mr->ibv_mr.rkey = mr->stag;
  if (flags & IBV_REREG_MR_CHANGE_ACCESS) vmr->access = access;
  return 0;
}

// ibv_advise_mr. uiw pins nothing, so every MR is on-demand (the ODP caps uiw.ko reports):
// a prefetch faults the SGEs' pages in now, through the process's own page tables, instead of
// at the first placement (MADV_POPULATE_WRITE / _READ, Linux 5.14; older kernels get
// MADV_WILLNEED). PREFETCH_NO_FAULT maps only pages already present, which a CPU access needs no
// help for: the SGEs are checked and nothing else is done. Every SGE must name a range of an
// MR of this PD (for PREFETCH_WRITE one with local write), as for a work request: EINVAL
// otherwise. IBV_ADVISE_MR_FLAG_FLUSH (wait for the prefetch) is what uiw always does.
int advise_mr(ibv_pd* ibpd, ibv_advise_mr_advice advice, uint32_t flags, ibv_sge* sg_list,
              uint32_t num_sge) noexcept {
  if ((flags & ~static_cast<uint32_t>(IBV_ADVISE_MR_FLAG_FLUSH)) || !num_sge || !sg_list)
    return EINVAL;
  int madv;
  uint32_t need = 0;
  switch (advice) {
    case IBV_ADVISE_MR_ADVICE_PREFETCH:
      madv = MADV_POPULATE_READ;
      break;
    case IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE:
      madv = MADV_POPULATE_WRITE;
      need = memory::kLocalWrite;
      break;
    case IBV_ADVISE_MR_ADVICE_PREFETCH_NO_FAULT:
      madv = -1;
      break;
    default:
      return EOPNOTSUPP;
  }
  Context* ctx = to_ctx(ibpd->context);
  const uint32_t pd = to_pd(ibpd)->pd_id;
  for (uint32_t i = 0; i < num_sge; ++i)
    if (ctx->registry.check(sg_list[i].lkey, pd, 0, need, sg_list[i].addr, sg_list[i].length)
            .result != memory::AccessResult::Ok)
      return EINVAL;
  if (madv < 0) return 0;
  const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  for (uint32_t i = 0; i < num_sge; ++i) {
    if (!sg_list[i].length) continue;
    const uintptr_t start = sg_list[i].addr & ~(page - 1);
    const size_t len = sg_list[i].addr + sg_list[i].length - start;
    if (madvise(reinterpret_cast<void*>(start), len, madv) == 0) continue;
    // EINVAL: a kernel before 5.14 (no MADV_POPULATE_*); WILLNEED is the weaker hint it has,
    // and a hint may be declined. Anything else (ENOMEM, EFAULT: the range is no longer
    // mapped as the MR needs) is the caller's to know.
    if (errno != EINVAL) return errno;
    (void)madvise(reinterpret_cast<void*>(start), len, MADV_WILLNEED);
  }
  return 0;
}

// ---- CQ and SRQ

Cq* make_cq(ibv_context* ibctx, int cqe, ibv_comp_channel* channel, int vector) noexcept {
  uiw_drv_resp<ib_uverbs_create_cq_resp, uiw_uresp_create_cq> resp{};
  return create_object<Cq>(
      [&](Cq* cq) {
        uiw_cmd<ib_uverbs_create_cq> cmd{};
        return ibv_cmd_create_cq(ibctx, cqe, channel, vector, to_ibv(cq), &cmd, sizeof(cmd),
                                 resp.ibv(), sizeof(resp));
      },
      [&](Cq* cq) {
        const uint32_t n = std::max<uint32_t>({resp.drv.num_cqe, static_cast<uint32_t>(cqe), 1});
        // An armed CQ that gets a matching completion fires the kernel completion channel.
        cq->cq =
            std::make_unique<engine::CompletionQueue>(n, [cq] { method_cq_signal(to_ibv(cq)); });
        return 0;
      },
      [](Cq* cq) { ibv_cmd_destroy_cq(to_ibv(cq)); });
}

ibv_cq* create_cq(ibv_context* ibctx, int cqe, ibv_comp_channel* channel, int vector) noexcept {
  Cq* cq = make_cq(ibctx, cqe, channel, vector);
  return cq ? to_ibv(cq) : nullptr;
}

// ibv_create_cq_ex: the same CQ plus the start/next/end_poll and read_* functions. libibverbs
// calls the provider directly here, so the provider initialises what ibv_create_cq would.
// Refused: wc_flags beyond kCqExWcFlags (timestamps, VLAN, flow tag: nothing to report) and
// flags other than single-threaded (a hint uiw may ignore). A parent domain is accepted.
ibv_cq_ex* create_cq_ex(ibv_context* ibctx, ibv_cq_init_attr_ex* attr) noexcept {
  const uint32_t known = IBV_CQ_INIT_ATTR_MASK_FLAGS | IBV_CQ_INIT_ATTR_MASK_PD;
  if (attr->comp_mask & ~known) return errno = EINVAL, nullptr;
  if (attr->wc_flags & ~kCqExWcFlags) return errno = EOPNOTSUPP, nullptr;
  // verbs: the PD of a CQ must be a parent domain (its allocators would serve the CQ's buffer).
  if ((attr->comp_mask & IBV_CQ_INIT_ATTR_MASK_PD) &&
      (!attr->parent_domain || attr->parent_domain->context != ibctx ||
       !to_pd(attr->parent_domain)->protection))
    return errno = EINVAL, nullptr;
  if ((attr->comp_mask & IBV_CQ_INIT_ATTR_MASK_FLAGS) &&
      (attr->flags & ~static_cast<uint32_t>(IBV_CREATE_CQ_ATTR_SINGLE_THREADED)))
    return errno = EOPNOTSUPP, nullptr;
  const uint32_t max_cqe = to_ctx(ibctx)->caps.max_cqe;
  if (attr->cqe == 0 || attr->cqe > max_cqe) return errno = EINVAL, nullptr;
  Cq* cq = make_cq(ibctx, static_cast<int>(attr->cqe), attr->channel,
                   static_cast<int>(attr->comp_vector));
  if (!cq) return nullptr;
  verbs_init_cq(to_ibv(cq), ibctx, attr->channel, attr->cq_context);
  cq_ex_set_ops(cq);
  return cq;
}

// The engine ring first (it refuses to shrink below what is queued), then the kernel's record.
int resize_cq(ibv_cq* ibcq, int cqe) noexcept {
  Cq* cq = to_cq(ibcq);
  const int max_cqe = static_cast<int>(to_ctx(ibcq->context)->caps.max_cqe);
  if (cqe <= 0 || cqe > max_cqe) return EINVAL;
  if (const int rc = cq->cq->resize(static_cast<uint32_t>(cqe))) return -rc;
  uiw_cmd<ib_uverbs_resize_cq> cmd{};
  ib_uverbs_resize_cq_resp resp{};
  if (const int rc = ibv_cmd_resize_cq(ibcq, cqe, &cmd, sizeof(cmd), &resp, sizeof(resp)))
    return rc;
  ibcq->cqe = cqe;
  return 0;
}

int destroy_cq(ibv_cq* ibcq) noexcept {
  if (const int rc = ibv_cmd_destroy_cq(ibcq)) return rc;  // EBUSY while QPs use it
  delete to_cq(ibcq);
  return 0;
}

// SRQ limit (IBV_SRQ_LIMIT): when fewer than `limit` receives remain, the engine fires once and
// uiw.ko raises IBV_EVENT_SRQ_LIMIT_REACHED (and disarms its shadow limit); 0 disarms.
void arm_srq_limit(Srq* srq, uint32_t limit) {
  ibv_context* ctx = srq->context;
  const uint32_t handle = srq->handle;
  srq->rq->arm_limit(limit, [ctx, handle] {
    method_event(ctx, UVERBS_OBJECT_SRQ, handle, IBV_EVENT_SRQ_LIMIT_REACHED);
  });
}

ibv_srq* create_srq(ibv_pd* ibpd, ibv_srq_init_attr* init) noexcept {
  uiw_drv_resp<ib_uverbs_create_srq_resp, uiw_uresp_create_srq> resp{};
  return create_object<Srq>(
      [&](Srq* srq) {
        uiw_cmd<ib_uverbs_create_srq> cmd{};
        return ibv_cmd_create_srq(ibpd, srq, init, &cmd, sizeof(cmd), resp.ibv(), sizeof(resp));
      },
      [&](Srq* srq) {
        srq->max_sge = init->attr.max_sge;
        srq->rq = std::make_unique<engine::ReceiveQueue>(std::max(resp.drv.num_rqe, 1u), true);
        if (init->attr.srq_limit) arm_srq_limit(srq, init->attr.srq_limit);
        return 0;
      },
      [](Srq* srq) { ibv_cmd_destroy_srq(srq); });
}

int modify_srq(ibv_srq* srq, ibv_srq_attr* attr, int mask) noexcept {
  uiw_cmd<ib_uverbs_modify_srq> cmd{};
  if (const int rc = ibv_cmd_modify_srq(srq, attr, mask, &cmd, sizeof(cmd))) return rc;
  if (mask & IBV_SRQ_LIMIT)
    return guarded([&] { return arm_srq_limit(to_srq(srq), attr->srq_limit), 0; });
  return 0;
}

int query_srq(ibv_srq* srq, ibv_srq_attr* attr) noexcept {
  uiw_cmd<ib_uverbs_query_srq> cmd{};
  return ibv_cmd_query_srq(srq, attr, &cmd, sizeof(cmd));
}

int destroy_srq(ibv_srq* ibsrq) noexcept {
  if (const int rc = ibv_cmd_destroy_srq(ibsrq)) return rc;
  delete to_srq(ibsrq);
  return 0;
}

// ---- QP

// The engine half of a QP, fresh (create, and again after a reset to RESET).
int build_engine_qp(Qp* qp) {
  return guarded([qp] {
    if (!qp->qp.srq) {
      qp->own_rq = std::make_unique<engine::ReceiveQueue>(std::max(qp->rq_depth, 1u), false);
      qp->rq = qp->own_rq.get();
    }
    engine::QpConfig c;
    c.qp_num = qp->qp.qp_num;
    c.pd = qp->pd_id;
    c.sq_depth = std::max(qp->sq_depth, 1u);
    c.registry = &qp->ctx->registry;
    c.send_cq = qp->scq;
    c.recv_cq = qp->rcq;
    c.rq = qp->rq;
    c.on_event = [qp](engine::QpEvent ev) { qp_event(qp, ev); };
    c.counters = qp->ctx->counters;
    qp->rt = std::make_shared<runtime::QueuePair>(c);
    return 0;
  });
}

ibv_qp* create_qp(ibv_pd* ibpd, ibv_qp_init_attr* attr) noexcept {
  // iWARP is reliable-connected only (RFC 5040 §1).
  if (attr->qp_type != IBV_QPT_RC) return errno = EOPNOTSUPP, nullptr;
  if (attr->cap.max_send_sge > engine::kMaxSge || attr->cap.max_recv_sge > engine::kMaxSge ||
      attr->cap.max_inline_data > engine::kMaxInline)
    return errno = EINVAL, nullptr;
  Context* ctx = to_ctx(ibpd->context);
  uiw_drv_resp<ib_uverbs_create_qp_resp, uiw_uresp_create_qp> resp{};
  Qp* made = create_object<Qp>(
      [&](Qp* qp) {
        uiw_cmd<ib_uverbs_create_qp> cmd{};
        return ibv_cmd_create_qp(ibpd, &qp->qp, attr, &cmd, sizeof(cmd), resp.ibv(), sizeof(resp));
      },
      [&](Qp* qp) {
        qp->ctx = ctx;
        qp->pd_id = to_pd(ibpd)->pd_id;
        qp->sq_depth = resp.drv.num_sqe;
        qp->rq_depth = resp.drv.num_rqe;
        qp->sig_all = attr->sq_sig_all != 0;
        qp->max_send_sge = attr->cap.max_send_sge;
        qp->max_recv_sge = attr->cap.max_recv_sge;
        qp->scq = to_cq(attr->send_cq)->cq.get();
        qp->rcq = to_cq(attr->recv_cq)->cq.get();
        if (attr->srq) qp->rq = to_srq(attr->srq)->rq.get();
        if (const int rc = build_engine_qp(qp)) return rc;
        cq_attach(to_cq(attr->send_cq), qp);
        cq_attach(to_cq(attr->recv_cq), qp);
        std::lock_guard lock(ctx->mu);
        if (const int rc = ctx->start_threads()) return rc;
        ctx->waiting.push_back(qp);
        return 0;
      },
      [&](Qp* qp) {
        cq_detach(to_cq(attr->send_cq), qp);
        cq_detach(to_cq(attr->recv_cq), qp);
        ibv_cmd_destroy_qp(&qp->qp);
      });
  return made ? &made->qp : nullptr;
}

// ibv_create_qp_ex (pyverbs' QPInitAttrEx): the plain QP with a PD and no create flags, and
// with send_ops_flags the ibv_wr_* API for the operations uiw carries (kQpExSendOps; immediate
// data and atomics only on a connection to an RFC 7306 peer). XRC and RSS are not offered.
ibv_qp* create_qp_ex(ibv_context*, ibv_qp_init_attr_ex* attr) noexcept {
  const uint32_t known =
      IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_CREATE_FLAGS | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
  const bool wr_api = attr->comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
  if ((attr->comp_mask & ~known) || !(attr->comp_mask & IBV_QP_INIT_ATTR_PD) || !attr->pd ||
      ((attr->comp_mask & IBV_QP_INIT_ATTR_CREATE_FLAGS) && attr->create_flags) ||
      (wr_api && (attr->send_ops_flags & ~kQpExSendOps)))
    return errno = EOPNOTSUPP, nullptr;
  ibv_qp_init_attr a{};
  a.qp_context = attr->qp_context;
  a.send_cq = attr->send_cq;
  a.recv_cq = attr->recv_cq;
  a.srq = attr->srq;
  a.cap = attr->cap;
  a.qp_type = attr->qp_type;
  a.sq_sig_all = attr->sq_sig_all;
  ibv_qp* qp = create_qp(attr->pd, &a);
  if (!qp) return nullptr;
  attr->cap = a.cap;
  if (wr_api) qp_ex_set_ops(to_qp(qp));
  return qp;
}

int modify_qp(ibv_qp* ibqp, ibv_qp_attr* attr, int mask) noexcept {
  Qp* qp = to_qp(ibqp);
  const bool to_state = mask & IBV_QP_STATE;
  // The application closes: a peer's FIN from now on is the answer, not news (qp_event).
  if (to_state && (attr->qp_state == IBV_QPS_SQD || attr->qp_state == IBV_QPS_ERR ||
                   attr->qp_state == IBV_QPS_RESET))
    qp->local_close = true;
  // iWARP graceful close (rdma_disconnect): uiw.ko sends FIN when the QP enters SQD, so what
  // the application queued must be in the socket first (RFC 5040 §6: the LLP closes after the
  // outstanding messages).
  if (to_state && attr->qp_state == IBV_QPS_SQD) qp_drain(qp, 5000);
  uiw_cmd<ib_uverbs_modify_qp> cmd{};
  if (const int rc = ibv_cmd_modify_qp(ibqp, attr, mask, &cmd, sizeof(cmd))) {
    // rdma_disconnect after the peer closed: uiw.ko already moved the QP to ERR and refuses
    // ERR -> SQD. The connection is closed either way, as the caller wants (siw accepts this).
    if (!(rc == EINVAL && to_state && attr->qp_state == IBV_QPS_SQD && mask == IBV_QP_STATE))
      return rc;
    ibv_qp_attr now{};
    ibv_qp_init_attr init{};
    uiw_cmd<ib_uverbs_query_qp> qcmd{};
    if (ibv_cmd_query_qp(ibqp, &now, IBV_QP_STATE, &init, &qcmd, sizeof(qcmd)) ||
        now.qp_state != IBV_QPS_ERR)
      return rc;
    return 0;
  }
  if (!to_state) return 0;
  const int rtr_mask = IBV_QP_AV | IBV_QP_DEST_QPN;
  if (attr->qp_state == IBV_QPS_RTR && (mask & rtr_mask) == rtr_mask) qp->rtr_connect = true;
  switch (attr->qp_state) {
    case IBV_QPS_ERR:
      qp_abort(qp);  // flush every outstanding WR (verbs: Error state)
      return 0;
    case IBV_QPS_RESET: {
      qp_abort(qp);
      // A fresh engine QP; it waits for a new connection like a new one. Busy pollers must not
      // see the old connection go away under them: detach from the CQs meanwhile.
      twin_forget(qp);
      std::lock_guard lock(qp->ctx->mu);
      cq_detach(to_cq(qp->qp.send_cq), qp);
      cq_detach(to_cq(qp->qp.recv_cq), qp);
      {
        // A thread that took the old QueuePair (runtime_of) keeps it until it is done with it.
        std::lock_guard qlock(qp->mu);
        qp->rt.reset();
        if (const int rc = build_engine_qp(qp)) return rc;
        qp->rtr_connect = false;
        qp->local_close = false;
      }
      if (const int rc = guarded([qp] {
            cq_attach(to_cq(qp->qp.send_cq), qp);
            cq_attach(to_cq(qp->qp.recv_cq), qp);
            return 0;
          }))
        return rc;
      auto& w = qp->ctx->waiting;
      if (std::find(w.begin(), w.end(), qp) == w.end())
        return guarded([&] { return w.push_back(qp), 0; });
      return 0;
    }
    case IBV_QPS_SQD: {
      const std::shared_ptr<runtime::QueuePair> rt = runtime_of(qp);
      if (rt->link() == runtime::Link::Waiting) rt->close();  // never connected: flush
      return 0;
    }
    default:  // INIT, RTR, RTS: the kernel runs the connection; the socket comes by itself
      return 0;
  }
}

int query_qp(ibv_qp* ibqp, ibv_qp_attr* attr, int mask, ibv_qp_init_attr* init) noexcept {
  uiw_cmd<ib_uverbs_query_qp> cmd{};
  if (const int rc = ibv_cmd_query_qp(ibqp, attr, mask, init, &cmd, sizeof(cmd))) return rc;
  // The kernel's state is a shadow: an engine that failed (Terminate, lost connection) is in
  // Error whatever the shadow says.
  Qp* qp = to_qp(ibqp);
  if (runtime_of(qp)->state() == engine::QpState::Error) attr->qp_state = IBV_QPS_ERR;
  // iWARP has one Idle state for RESET/INIT/RTR (RDMAC verbs); like other RNICs, report a new
  // QP as INIT (rdma-core's tests expect that of IBV_NODE_RNIC devices).
  if (attr->qp_state == IBV_QPS_RESET) attr->qp_state = IBV_QPS_INIT;
  attr->cur_qp_state = attr->qp_state;
  init->sq_sig_all = qp->sig_all;
  return 0;
}

int destroy_qp(ibv_qp* ibqp) noexcept {
  Qp* qp = to_qp(ibqp);
  Context* ctx = qp->ctx;
  {
    // After this the readiness thread cannot attach a socket to the QP any more.
    std::lock_guard lock(ctx->mu);
    auto& w = ctx->waiting;
    w.erase(std::remove(w.begin(), w.end(), qp), w.end());
  }
  qp->local_close = true;
  twin_forget(qp);
  // Engine first, so no completion of this QP reaches its CQs after destroy returns.
  cq_detach(to_cq(qp->qp.send_cq), qp);
  cq_detach(to_cq(qp->qp.recv_cq), qp);
  std::shared_ptr<runtime::QueuePair> rt;
  {
    std::lock_guard lock(qp->mu);
    rt = std::move(qp->rt);
  }
  rt->leave_progress();  // a thread that still holds it cannot make it complete anything now
  rt.reset();
  if (const int rc = ibv_cmd_destroy_qp(ibqp)) return rc;
  delete qp;
  return 0;
}

// Only what uiw implements; the rest stay null and libibverbs answers them with EOPNOTSUPP.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
const verbs_context_ops kContextOps = {
    .advise_mr = advise_mr,
    .alloc_mw = alloc_mw,
    .alloc_parent_domain = alloc_parent_domain,
    .alloc_pd = alloc_pd,
    .bind_mw = bind_mw,
    .create_cq = create_cq,
    .create_cq_ex = create_cq_ex,
    .create_qp = create_qp,
    .create_qp_ex = create_qp_ex,
    .create_srq = create_srq,
    .dealloc_mw = dealloc_mw,
    .dealloc_pd = dealloc_pd,
    .dereg_mr = dereg_mr,
    .destroy_cq = destroy_cq,
    .destroy_qp = destroy_qp,
    .destroy_srq = destroy_srq,
    .free_context = free_context,
    .modify_qp = modify_qp,
    .modify_srq = modify_srq,
    .poll_cq = poll_cq,
    .post_recv = post_recv,
    .post_send = post_send,
    .post_srq_recv = post_srq_recv,
    .query_device_ex = query_device_ex,
    .query_port = query_port,
    .query_qp = query_qp,
    .query_srq = query_srq,
    .reg_mr = reg_mr,
    .req_notify_cq = req_notify_cq,
    .rereg_mr = rereg_mr,
    .resize_cq = resize_cq,
};
#pragma GCC diagnostic pop

verbs_context* alloc_context(ibv_device* ibdev, int cmd_fd, void*) noexcept {
  auto* shell = static_cast<uiw_context*>(_verbs_init_and_alloc_context(
      ibdev, cmd_fd, sizeof(uiw_context),
      reinterpret_cast<verbs_context*>(offsetof(uiw_context, vctx)), 0 /* RDMA_DRIVER_UNKNOWN */));
  if (!shell) return nullptr;
  uiw_drv_cmd<ib_uverbs_get_context, uiw_ureq_alloc_ucontext> cmd{};
  cmd.drv.abi_version = UIW_ABI_VERSION;
  cmd.drv.flags = UIW_UCTX_F_RDMAP_EXT;  // the engine implements RFC 7306
  uiw_drv_resp<ib_uverbs_get_context_resp, uiw_uresp_alloc_ucontext> resp{};
  int rc = ibv_cmd_get_context(&shell->vctx, &cmd, sizeof(cmd), UIW_GET_CONTEXT_FDS resp.ibv(),
                               sizeof(resp));
  if (!rc && resp.drv.abi_version != UIW_ABI_VERSION) rc = EPROTONOSUPPORT;
  if (rc == EPROTONOSUPPORT)
    std::fprintf(stderr,
                 "uiw: %s: uiw.ko refused this provider's uiw UAPI version %u (kernel speaks %u); "
                 "install matching uiw.ko and provider builds\n",
                 ibdev->name, UIW_ABI_VERSION, resp.drv.abi_version);
  if (!rc) {
    shell->impl = new (std::nothrow) Context;
    if (!shell->impl) rc = ENOMEM;
  }
  if (rc) {
    verbs_uninit_context(&shell->vctx);
    std::free(shell);
    return errno = rc, nullptr;
  }
  Context* ctx = shell->impl;
  ctx->ibctx = &shell->vctx.context;
  ctx->caps = resp.drv;
  // The readiness eventfd: uiw.ko adds 1 when one of our QPs becomes RDMA-ready.
  ctx->ready_efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  ctx->stop_efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (ctx->ready_efd >= 0 && (ctx->caps.caps & UIW_CAP_READY_EVENTFD)) {
    const int erc = method_set_eventfd(ctx->ibctx, ctx->ready_efd);
    ctx->ready_registered = erc == 0;
    if (erc)  // still works, by looking every 20 ms (Context::ready_loop)
      std::fprintf(stderr, "uiw: %s: registering the readiness eventfd failed: %s\n", ibdev->name,
                   std::strerror(erc));
  }
  if (ctx->caps.caps & UIW_CAP_COUNTERS) {
    // A failed mapping costs only the statistics.
    const size_t len = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    void* page = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_SHARED, cmd_fd,
                      static_cast<off_t>(ctx->caps.counters_mmap_key));
    if (page != MAP_FAILED) {
      ctx->counters = static_cast<uint64_t*>(page);
      ctx->counters_len = len;
    }
  }
  verbs_set_ops(&shell->vctx, &kContextOps);
  context_register(ctx);
  return &shell->vctx;
}

// Only the sentinel: libibverbs (rdma-core 44) walks the table without a null check, and
// match_device() claims uiw devices by their driver, whatever their name.
const verbs_match_ent kNoNameMatches[] = {{}};

const verbs_device_ops kDeviceOps = {
    .name = "uiw",
    // Any version matches here so that match_device() can say why a mismatch is refused.
    .match_min_abi_version = 0,
    .match_max_abi_version = UINT32_MAX,
    .match_table = kNoNameMatches,
    .static_providers = nullptr,
    .match_device = match_device,
    .alloc_context = alloc_context,
    .import_context = nullptr,
    .alloc_device = alloc_device,
    .uninit_device = uninit_device,
};

// PROVIDER_DRIVER(): register with libibverbs when it dlopen()s us.
__attribute__((constructor)) void uiw_register_driver() {
  uiw_verbs_register_driver(&kDeviceOps);
}

}  // namespace
}  // namespace uiw::provider
