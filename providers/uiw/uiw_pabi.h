// The part of rdma-core's private provider ABI that uiw uses, for two ranges of rdma-core:
// IBVERBS_PRIVATE_34 (rdma-core 36-56: Debian 12 and 13, Ubuntu 22.04 and 24.04) and
// IBVERBS_PRIVATE_65 (rdma-core 65: Debian unstable).
//
// rdma-core does not install its provider headers (libibverbs/driver.h, kern-abi.h,
// cmd_ioctl.h), so a provider built outside its tree must declare what it uses itself. Every
// layout below follows rdma-core tags v44.0 and v65.0 exactly: member order and types of the
// structs libibverbs reads or writes, and the prototypes of the private functions uiw calls.
// Between the two, only the context ops table (17 more ops) and ibv_cmd_get_context (a file
// descriptor array, since 57) differ. A different rdma-core cannot load this provider: the
// registration symbol carries the ABI number (verbs_register_driver_34 / _65), and
// providers/uiw/CMakeLists.txt refuses to build against a release outside both ranges.
//
// Written for uiw from the facts of the v44.0 and v65.0 headers; nothing here is copied.
#pragma once

#include <infiniband/verbs.h>
#include <rdma/ib_user_verbs.h>
#include <sys/types.h>
#include <time.h>

#include <cstddef>
#include <cstdint>

// UIW_IBVERBS_PABI_VERSION comes from providers/uiw/CMakeLists.txt, which picks it by the
// rdma-core release built against: 34 (rdma-core 36-56) or 65 (rdma-core 65).
#if UIW_IBVERBS_PABI_VERSION != 34 && UIW_IBVERBS_PABI_VERSION != 65
#error "uiw_pabi.h has the layouts of IBVERBS_PRIVATE_34 and _65 only"
#endif

extern "C" {  // driver.h has no extern "C" guard of its own

// ccan/list.h node, embedded in the structs below.
struct uiw_list_node {
  uiw_list_node* next;
  uiw_list_node* prev;
};

// ---- device matching (driver.h: enum VERBS_MATCH_*, struct verbs_match_ent)
enum : uint8_t { UIW_VERBS_MATCH_SENTINEL = 0, UIW_VERBS_MATCH_MODALIAS = 2 };

struct verbs_match_ent {
  void* driver_data;
  union {
    const char* modalias;
    uint64_t driver_id;
  } u;
  uint16_t vendor;
  uint16_t device;
  uint8_t kind;
};

// An rdma device found in sysfs/netlink; libibverbs fills it, the provider reads it.
struct verbs_sysfs_dev {
  uiw_list_node entry;
  void* provider_data;
  const verbs_match_ent* match;
  unsigned int flags;
  char sysfs_name[IBV_SYSFS_NAME_MAX];
  dev_t sysfs_cdev;
  char ibdev_name[IBV_SYSFS_NAME_MAX];
  char ibdev_path[IBV_SYSFS_PATH_MAX];
  char modalias[512];
  uint64_t node_guid;
  uint32_t driver_id;
  enum ibv_node_type node_type;
  int ibdev_idx;
  uint32_t num_ports;
  uint32_t abi_ver;  // /sys/class/infiniband_verbs/uverbsN/abi_version
  struct timespec time_created;
};

struct verbs_device;

struct verbs_device_ops {
  const char* name;
  uint32_t match_min_abi_version;
  uint32_t match_max_abi_version;
  const verbs_match_ent* match_table;
  const verbs_device_ops** static_providers;
  bool (*match_device)(verbs_sysfs_dev* sysfs_dev);
  verbs_context* (*alloc_context)(ibv_device* device, int cmd_fd, void* private_data);
  verbs_context* (*import_context)(ibv_device* device, int cmd_fd);
  verbs_device* (*alloc_device)(verbs_sysfs_dev* sysfs_dev);
  void (*uninit_device)(verbs_device* device);
};

struct verbs_device {
  ibv_device device;  // must be first
  const verbs_device_ops* ops;
  int refcount;  // atomic_int in C; libibverbs owns it
  uiw_list_node entry;
  verbs_sysfs_dev* sysfs;
  uint64_t core_support;
};

enum ibv_mr_type {
  IBV_MR_TYPE_MR,
  IBV_MR_TYPE_NULL_MR,
  IBV_MR_TYPE_IMPORTED_MR,
  IBV_MR_TYPE_DMABUF_MR
};

struct verbs_mr {
  struct ibv_mr ibv_mr;  // first; named as in driver.h
  enum ibv_mr_type mr_type;
  int access;
};

// A QP as libibverbs sees it: ibv_qp_to_qp_ex() returns &qp_ex when comp_mask has
// UIW_VERBS_QP_EX (set by a provider that fills the ibv_wr_* functions); VERBS_QP_XRCD says
// xrcd is valid (uiw has no XRC).
struct verbs_xrcd;
enum : uint32_t { UIW_VERBS_QP_XRCD = 1u << 0, UIW_VERBS_QP_EX = 1u << 1 };

struct verbs_qp {
  union {
    ibv_qp qp;
    ibv_qp_ex qp_ex;  // begins with the ibv_qp (qp_base)
  };
  uint32_t comp_mask;
  verbs_xrcd* xrcd;
};
static_assert(offsetof(ibv_qp_ex, qp_base) == 0, "ibv_qp_ex must begin with its ibv_qp");

// Every op a provider can supply, in driver.h's (sorted) order; verbs_set_ops() copies the
// non-null ones into the context and libibverbs fills the rest with EOPNOTSUPP stubs. v65.0 has
// every op of v44.0 with the same signature, and 17 more that uiw does not supply: those are
// declared by name only (every member is a function pointer, so the layout needs no more).
#if UIW_IBVERBS_PABI_VERSION >= 65
#define UIW_OP_SINCE_65(name) void (*name)();
#else
#define UIW_OP_SINCE_65(name)
#endif
struct verbs_context_ops {
  int (*advise_mr)(ibv_pd*, enum ibv_advise_mr_advice, uint32_t, ibv_sge*, uint32_t);
  UIW_OP_SINCE_65(alloc_buf)
  ibv_dm* (*alloc_dm)(ibv_context*, ibv_alloc_dm_attr*);
  UIW_OP_SINCE_65(alloc_dmah)
  ibv_mw* (*alloc_mw)(ibv_pd*, enum ibv_mw_type);
  ibv_mr* (*alloc_null_mr)(ibv_pd*);
  ibv_pd* (*alloc_parent_domain)(ibv_context*, ibv_parent_domain_init_attr*);
  ibv_pd* (*alloc_pd)(ibv_context*);
  ibv_td* (*alloc_td)(ibv_context*, ibv_td_init_attr*);
  void (*async_event)(ibv_context*, ibv_async_event*);
  int (*attach_counters_point_flow)(ibv_counters*, ibv_counter_attach_attr*, ibv_flow*);
  int (*attach_mcast)(ibv_qp*, const ibv_gid*, uint16_t);
  int (*bind_mw)(ibv_qp*, ibv_mw*, ibv_mw_bind*);
  int (*close_xrcd)(ibv_xrcd*);
  void (*cq_event)(ibv_cq*);
  ibv_ah* (*create_ah)(ibv_pd*, ibv_ah_attr*);
  UIW_OP_SINCE_65(create_comp_cntr)
  ibv_counters* (*create_counters)(ibv_context*, ibv_counters_init_attr*);
  ibv_cq* (*create_cq)(ibv_context*, int cqe, ibv_comp_channel*, int comp_vector);
  ibv_cq_ex* (*create_cq_ex)(ibv_context*, ibv_cq_init_attr_ex*);
  ibv_flow* (*create_flow)(ibv_qp*, ibv_flow_attr*);
  ibv_flow_action* (*create_flow_action_esp)(ibv_context*, ibv_flow_action_esp_attr*);
  ibv_qp* (*create_qp)(ibv_pd*, ibv_qp_init_attr*);
  ibv_qp* (*create_qp_ex)(ibv_context*, ibv_qp_init_attr_ex*);
  ibv_rwq_ind_table* (*create_rwq_ind_table)(ibv_context*, ibv_rwq_ind_table_init_attr*);
  ibv_srq* (*create_srq)(ibv_pd*, ibv_srq_init_attr*);
  ibv_srq* (*create_srq_ex)(ibv_context*, ibv_srq_init_attr_ex*);
  ibv_wq* (*create_wq)(ibv_context*, ibv_wq_init_attr*);
  UIW_OP_SINCE_65(dealloc_dmah)
  int (*dealloc_mw)(ibv_mw*);
  int (*dealloc_pd)(ibv_pd*);
  int (*dealloc_td)(ibv_td*);
  int (*dereg_mr)(verbs_mr*);
  int (*destroy_ah)(ibv_ah*);
  UIW_OP_SINCE_65(destroy_comp_cntr)
  int (*destroy_counters)(ibv_counters*);
  int (*destroy_cq)(ibv_cq*);
  int (*destroy_flow)(ibv_flow*);
  int (*destroy_flow_action)(ibv_flow_action*);
  int (*destroy_qp)(ibv_qp*);
  int (*destroy_rwq_ind_table)(ibv_rwq_ind_table*);
  int (*destroy_srq)(ibv_srq*);
  int (*destroy_wq)(ibv_wq*);
  int (*detach_mcast)(ibv_qp*, const ibv_gid*, uint16_t);
  UIW_OP_SINCE_65(dm_export_dmabuf_fd)
  UIW_OP_SINCE_65(free_buf)
  void (*free_context)(ibv_context*);
  int (*free_dm)(ibv_dm*);
  int (*get_srq_num)(ibv_srq*, uint32_t*);
  ibv_dm* (*import_dm)(ibv_context*, uint32_t);
  ibv_mr* (*import_mr)(ibv_pd*, uint32_t);
  ibv_pd* (*import_pd)(ibv_context*, uint32_t);
  UIW_OP_SINCE_65(inc_comp_cntr)
  UIW_OP_SINCE_65(inc_err_comp_cntr)
  int (*modify_cq)(ibv_cq*, ibv_modify_cq_attr*);
  int (*modify_flow_action_esp)(ibv_flow_action*, ibv_flow_action_esp_attr*);
  int (*modify_qp)(ibv_qp*, ibv_qp_attr*, int attr_mask);
  int (*modify_qp_rate_limit)(ibv_qp*, ibv_qp_rate_limit_attr*);
  int (*modify_srq)(ibv_srq*, ibv_srq_attr*, int attr_mask);
  int (*modify_wq)(ibv_wq*, ibv_wq_attr*);
  ibv_qp* (*open_qp)(ibv_context*, ibv_qp_open_attr*);
  ibv_xrcd* (*open_xrcd)(ibv_context*, ibv_xrcd_init_attr*);
  int (*poll_cq)(ibv_cq*, int num_entries, ibv_wc*);
  int (*post_recv)(ibv_qp*, ibv_recv_wr*, ibv_recv_wr**);
  int (*post_send)(ibv_qp*, ibv_send_wr*, ibv_send_wr**);
  int (*post_srq_ops)(ibv_srq*, ibv_ops_wr*, ibv_ops_wr**);
  int (*post_srq_recv)(ibv_srq*, ibv_recv_wr*, ibv_recv_wr**);
  UIW_OP_SINCE_65(qp_attach_comp_cntr)
  UIW_OP_SINCE_65(query_comp_cntr_caps)
  int (*query_device_ex)(ibv_context*, const ibv_query_device_ex_input*, ibv_device_attr_ex*,
                         size_t attr_size);
  int (*query_ece)(ibv_qp*, ibv_ece*);
  int (*query_port)(ibv_context*, uint8_t port_num, ibv_port_attr*);
  UIW_OP_SINCE_65(query_port_speed)
  int (*query_qp)(ibv_qp*, ibv_qp_attr*, int attr_mask, ibv_qp_init_attr*);
  int (*query_qp_data_in_order)(ibv_qp*, enum ibv_wr_opcode, uint32_t);
  int (*query_rt_values)(ibv_context*, ibv_values_ex*);
  int (*query_srq)(ibv_srq*, ibv_srq_attr*);
  UIW_OP_SINCE_65(read_comp_cntr)
  int (*read_counters)(ibv_counters*, uint64_t*, uint32_t, uint32_t);
  UIW_OP_SINCE_65(read_err_comp_cntr)
  ibv_mr* (*reg_dm_mr)(ibv_pd*, ibv_dm*, uint64_t, size_t, unsigned int);
  ibv_mr* (*reg_dmabuf_mr)(ibv_pd*, uint64_t, size_t, uint64_t, int, int);
  ibv_mr* (*reg_mr)(ibv_pd*, void* addr, size_t length, uint64_t hca_va, int access);
  UIW_OP_SINCE_65(reg_mr_ex)
  int (*req_notify_cq)(ibv_cq*, int solicited_only);
  int (*rereg_mr)(verbs_mr*, int, ibv_pd*, void*, size_t, int);
  int (*resize_cq)(ibv_cq*, int);
  UIW_OP_SINCE_65(set_comp_cntr)
  int (*set_ece)(ibv_qp*, ibv_ece*);
  UIW_OP_SINCE_65(set_err_comp_cntr)
  void (*unimport_dm)(ibv_dm*);
  void (*unimport_mr)(ibv_mr*);
  void (*unimport_pd)(ibv_pd*);
};
#undef UIW_OP_SINCE_65
static_assert(sizeof(verbs_context_ops) ==
                  (UIW_IBVERBS_PABI_VERSION >= 65 ? 93 : 76) * sizeof(void*),
              "v44.0 has 76 context ops, v65.0 93");

// ---- registration and contexts (IBVERBS_PRIVATE_<PABI>: the registration symbol names it)
#if UIW_IBVERBS_PABI_VERSION == 65
void verbs_register_driver_65(const verbs_device_ops* ops);
#define uiw_verbs_register_driver verbs_register_driver_65
#else
void verbs_register_driver_34(const verbs_device_ops* ops);
#define uiw_verbs_register_driver verbs_register_driver_34
#endif
void* _verbs_init_and_alloc_context(ibv_device* device, int cmd_fd, size_t alloc_size,
                                    verbs_context* context_offset, uint32_t driver_id);
void verbs_uninit_context(verbs_context* context);
void verbs_set_ops(verbs_context* vctx, const verbs_context_ops* ops);
int ibv_read_ibdev_sysfs_file(char* buf, size_t size, verbs_sysfs_dev* sysfs_dev, const char* fnfmt,
                              ...) __attribute__((format(printf, 4, 5)));

// ---- commands. `cmd` points at a request laid out as uiw_cmd / uiw_drv_cmd below and
// `cmd_size` covers it all; `resp`/`resp_size` likewise for responses (uiw_drv_resp).
#if UIW_IBVERBS_PABI_VERSION >= 65
// Since rdma-core 57: file descriptors handed to the kernel with the request (none for uiw).
struct ibv_fd_arr;
int ibv_cmd_get_context(verbs_context* context, void* cmd, size_t cmd_size, ibv_fd_arr* fd_arr,
                        ib_uverbs_get_context_resp* resp, size_t resp_size);
#define UIW_GET_CONTEXT_FDS nullptr,
#else
int ibv_cmd_get_context(verbs_context* context, void* cmd, size_t cmd_size,
                        ib_uverbs_get_context_resp* resp, size_t resp_size);
#define UIW_GET_CONTEXT_FDS
#endif
int ibv_cmd_query_device_any(ibv_context* context, const ibv_query_device_ex_input* input,
                             ibv_device_attr_ex* attr, size_t attr_size,
                             ib_uverbs_ex_query_device_resp* resp, size_t* resp_size);
int ibv_cmd_query_port(ibv_context* context, uint8_t port_num, ibv_port_attr* port_attr, void* cmd,
                       size_t cmd_size);
int ibv_cmd_alloc_pd(ibv_context* context, ibv_pd* pd, void* cmd, size_t cmd_size,
                     ib_uverbs_alloc_pd_resp* resp, size_t resp_size);
int ibv_cmd_dealloc_pd(ibv_pd* pd);
int ibv_cmd_reg_mr(ibv_pd* pd, void* addr, size_t length, uint64_t hca_va, int access,
                   verbs_mr* vmr, void* cmd, size_t cmd_size, ib_uverbs_reg_mr_resp* resp,
                   size_t resp_size);
int ibv_cmd_rereg_mr(verbs_mr* vmr, uint32_t flags, void* addr, size_t length, uint64_t hca_va,
                     int access, ibv_pd* pd, void* cmd, size_t cmd_size,
                     ib_uverbs_rereg_mr_resp* resp, size_t resp_size);
int ibv_cmd_dereg_mr(verbs_mr* vmr);
int ibv_cmd_alloc_mw(ibv_pd* pd, ibv_mw_type type, ibv_mw* mw, void* cmd, size_t cmd_size,
                     ib_uverbs_alloc_mw_resp* resp, size_t resp_size);
int ibv_cmd_dealloc_mw(ibv_mw* mw);
int ibv_cmd_create_cq(ibv_context* context, int cqe, ibv_comp_channel* channel, int comp_vector,
                      ibv_cq* cq, void* cmd, size_t cmd_size, ib_uverbs_create_cq_resp* resp,
                      size_t resp_size);
int ibv_cmd_destroy_cq(ibv_cq* cq);
int ibv_cmd_req_notify_cq(ibv_cq* cq, int solicited_only);
// What ibv_create_cq does after the provider (context, channel reference, cq_context, the
// event mutex and condition); a provider of create_cq_ex calls it itself.
void verbs_init_cq(ibv_cq* cq, ibv_context* context, ibv_comp_channel* channel, void* cq_context);
int ibv_cmd_resize_cq(ibv_cq* cq, int cqe, void* cmd, size_t cmd_size,
                      ib_uverbs_resize_cq_resp* resp, size_t resp_size);
int ibv_cmd_create_srq(ibv_pd* pd, ibv_srq* srq, ibv_srq_init_attr* attr, void* cmd,
                       size_t cmd_size, ib_uverbs_create_srq_resp* resp, size_t resp_size);
int ibv_cmd_modify_srq(ibv_srq* srq, ibv_srq_attr* srq_attr, int srq_attr_mask, void* cmd,
                       size_t cmd_size);
int ibv_cmd_query_srq(ibv_srq* srq, ibv_srq_attr* srq_attr, void* cmd, size_t cmd_size);
int ibv_cmd_destroy_srq(ibv_srq* srq);
int ibv_cmd_create_qp(ibv_pd* pd, ibv_qp* qp, ibv_qp_init_attr* attr, void* cmd, size_t cmd_size,
                      ib_uverbs_create_qp_resp* resp, size_t resp_size);
int ibv_cmd_query_qp(ibv_qp* qp, ibv_qp_attr* qp_attr, int attr_mask,
                     ibv_qp_init_attr* qp_init_attr, void* cmd, size_t cmd_size);
int ibv_cmd_modify_qp(ibv_qp* qp, ibv_qp_attr* attr, int attr_mask, void* cmd, size_t cmd_size);
int ibv_cmd_destroy_qp(ibv_qp* qp);

}  // extern "C"

// ---- request / response framing (kern-abi.h's DECLARE_CMD / DECLARE_DRV_CMD).
// A legacy-write request is the uverbs command header, the core struct, then the driver's
// udata; libibverbs builds the header itself (also for the ioctl path, where it sends the
// driver part as UVERBS_ATTR_UHW_IN), so the provider only sizes the buffer and fills udata.
// The core structs end in flexible arrays, which C++ cannot embed before another member: the
// core part is raw storage of the same size and alignment.
template <typename Core>
struct uiw_cmd {
  ib_uverbs_cmd_hdr hdr;
  alignas(Core) unsigned char core[sizeof(Core)];
};

template <typename Core, typename Drv>
struct uiw_drv_cmd {
  ib_uverbs_cmd_hdr hdr;
  alignas(Core) unsigned char core[sizeof(Core)];
  Drv drv;
  static_assert((sizeof(ib_uverbs_cmd_hdr) + sizeof(Core)) % alignof(Drv) == 0,
                "driver request would be misplaced");
};

template <typename Core, typename Drv>
struct uiw_drv_resp {
  alignas(Core) unsigned char core[sizeof(Core)];
  Drv drv;
  Core* ibv() { return reinterpret_cast<Core*>(core); }
  static_assert(sizeof(Core) % alignof(Drv) == 0, "driver response would be misplaced");
};
