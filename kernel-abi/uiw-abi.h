/* SPDX-License-Identifier: (GPL-2.0 WITH Linux-syscall-note) OR BSD-3-Clause */
/*
 * uiw kernel <-> provider ABI.
 *
 * Shared, byte for byte, by uiw.ko (kernel/) and the rdma-core provider (providers/uiw).
 * Everything here is a fixed-width layout: __u32/__aligned_u64 fields, explicit padding
 * (always sent as zero), no bitfields, no pointers. A change to any struct or id bumps
 * UIW_ABI_VERSION; the kernel reports its version in the uverbs abi_version attribute and
 * in struct uiw_uresp_alloc_ucontext, and the provider refuses any other version.
 *
 * Usable from C (kernel and user space) and C++ (the provider).
 */
#ifndef UIW_ABI_H
#define UIW_ABI_H

#include <linux/types.h>
#include <rdma/ib_user_ioctl_cmds.h>

/* static_assert: a keyword in C++, a macro of <linux/build_bug.h> and of C11's <assert.h>. */
#if defined(__KERNEL__)
#include <linux/build_bug.h>
#elif !defined(__cplusplus)
#include <assert.h>
#endif
#define UIW_ABI_STATIC_ASSERT(expr, msg) static_assert(expr, msg)

#ifdef __cplusplus
extern "C" {
#endif

/*
 * 2: UIW_METHOD_CQ_SIGNAL needs an arm (IB_USER_VERBS_CMD_REQ_NOTIFY_CQ); events are gated.
 * 3: RFC 7306: UIW_UCTX_F_RDMAP_EXT, UIW_CAP_RDMAP_EXT, UIW_CONN_F_RDMAP_EXT; the counters
 *    page (UIW_CAP_COUNTERS, counters_mmap_key).
 */
#define UIW_ABI_VERSION 3

/*
 * Contents of a uiw device's sysfs attribute hca_type (/sys/class/infiniband/<dev>/hca_type):
 * the provider claims devices by it, so a device may have any name ("rdma link add NAME").
 */
#define UIW_HCA_TYPE "uiw"

/*
 * Port GID table layout (port 1). Entries 0 .. UIW_GID_TBL_LEN - 2 hold the netdev's IP
 * addresses, IPv4 addresses first (as IPv4-mapped IPv6, ::ffff:a.b.c.d) then IPv6, in the
 * order the kernel lists them; unused entries are empty. The last entry holds the MAC in
 * its first 6 bytes (the GID rdma_cm computes for an iWARP port). The table follows
 * address changes.
 */
#define UIW_GID_TBL_LEN 16
#define UIW_GID_MAC_INDEX (UIW_GID_TBL_LEN - 1)

/* struct uiw_uresp_alloc_ucontext.caps */
enum uiw_caps {
	UIW_CAP_TAKE_SOCKET = 1 << 0,	/* UIW_METHOD_QP_TAKE_SOCKET */
	UIW_CAP_CQ_SIGNAL = 1 << 1,	/* UIW_METHOD_CQ_SIGNAL */
	UIW_CAP_READY_EVENTFD = 1 << 2,	/* UIW_METHOD_DEVICE_SET_EVENTFD */
	UIW_CAP_ASYNC_EVENT = 1 << 3,	/* UIW_METHOD_QP_EVENT, _CQ_EVENT, _SRQ_EVENT */
	UIW_CAP_RDMAP_EXT = 1 << 4,	/* offers RFC 7306 for UIW_UCTX_F_RDMAP_EXT contexts */
	UIW_CAP_COUNTERS = 1 << 5,	/* counters page at counters_mmap_key */
};

/*
 * The protocol engine's counters, which live in the provider: one page per context, mapped
 * from the uverbs file at counters_mmap_key, that the provider adds to (relaxed atomic adds,
 * no system call) and uiw.ko sums over the device's contexts for rdma statistic. Only
 * increased; a context's last values stay in the device's totals when it is closed.
 */
enum uiw_counter {
	UIW_CNT_TX_FPDUS,		/* FPDUs (SCTP: DDP messages) sent */
	UIW_CNT_RX_FPDUS,		/* valid FPDUs received */
	UIW_CNT_TX_BYTES,		/* octets handed to the lower layer */
	UIW_CNT_RX_BYTES,		/* octets taken from the lower layer */
	UIW_CNT_PLACED_BYTES,		/* payload of valid Write, Read Response, Send FPDUs */
	UIW_CNT_TERM_TX_RDMAP,		/* Terminates sent, by the layer of their cause */
	UIW_CNT_TERM_TX_DDP,
	UIW_CNT_TERM_TX_LLP,
	UIW_CNT_TERM_RX_RDMAP,		/* Terminates received, by the layer of their cause */
	UIW_CNT_TERM_RX_DDP,
	UIW_CNT_TERM_RX_LLP,
	UIW_CNT_CRC_ERRORS,		/* FPDUs whose MPA CRC did not match */
	UIW_CNT_NUM
};

struct uiw_counters {
	__aligned_u64 v[UIW_CNT_NUM];	/* indexed by enum uiw_counter */
};

/* struct uiw_ureq_alloc_ucontext.flags */
enum uiw_uctx_flags {
	/*
	 * The provider implements the RFC 7306 extensions: the kernel may offer them in the
	 * connection setup of this context's QPs (UIW_MPA_RDMAP_EXT_*, uiw-setup.h).
	 */
	UIW_UCTX_F_RDMAP_EXT = 1 << 0,
};

/* Udata of IB_USER_VERBS_CMD_GET_CONTEXT (optional: an empty request is accepted). */
struct uiw_ureq_alloc_ucontext {
	__u32 abi_version;	/* UIW_ABI_VERSION the provider was built for */
	__u32 flags;		/* enum uiw_uctx_flags; other bits must be 0 */
};

struct uiw_uresp_alloc_ucontext {
	__u32 abi_version;	/* UIW_ABI_VERSION of the kernel */
	__u32 caps;		/* enum uiw_caps */
	__u32 max_qp;
	__u32 max_qp_wr;	/* per send / receive queue */
	__u32 max_sge;
	__u32 max_inline_data;
	__u32 max_ird;		/* inbound RDMA Reads per QP */
	__u32 max_ord;		/* outbound RDMA Reads per QP */
	__u32 max_cq;
	__u32 max_cqe;
	__u32 max_srq;
	__u32 max_srq_wr;
	__u32 max_mr;
	__u32 max_private_data;	/* ULP private data in connect/accept/reject */
	__aligned_u64 max_mr_size;
	__aligned_u64 counters_mmap_key; /* UIW_CAP_COUNTERS: mmap offset of struct uiw_counters */
};

/* Udata responses of the create/register commands. */
struct uiw_uresp_create_cq {
	__u32 cq_id;		/* device-unique CQ id */
	__u32 num_cqe;		/* CQ size granted */
};

struct uiw_uresp_create_qp {
	__u32 qp_id;		/* == QPN */
	__u32 num_sqe;		/* send queue size granted */
	__u32 num_rqe;		/* receive queue size granted (0 with an SRQ) */
	__u32 pad;
};

struct uiw_uresp_create_srq {
	__u32 srq_id;		/* device-unique SRQ id */
	__u32 num_rqe;
};

/*
 * STag = 24-bit index << 8 | 8-bit key (RFC 5040 §2.1 leaves the split to the RNIC). The
 * kernel only hands out unique STags per device; it never pins or touches the memory.
 */
struct uiw_uresp_reg_mr {
	__u32 stag;		/* == lkey == rkey */
	__u32 pad;
};

/*
 * Connection parameters returned with a handed-over socket (UIW_METHOD_QP_TAKE_SOCKET).
 *
 * When the socket is handed over, the kernel has consumed exactly the MPA Request and
 * Reply frames (RFC 5044 §7.1.1, RFC 6581): the next byte read from the socket is the first
 * byte of the peer's first FPDU (its ULPDU_Length), or of its first Marker with
 * UIW_CONN_F_MARKERS_RX (RFC 5044 §4.3: Markers, per direction, count from the first octet
 * after the MPA frames). With
 * UIW_CONN_F_P2P the initiator's provider sends the RTR FPDU of type `rtr` first; the
 * responder's provider sends nothing before it has received that RTR (RFC 6581). The
 * first message on every untagged DDP queue carries MSN 1 (RFC 5041 §5.1).
 */
enum uiw_conn_flags {
	UIW_CONN_F_CRC = 1 << 0,	/* MPA CRC in both directions */
	UIW_CONN_F_ENHANCED = 1 << 1,	/* RFC 6581 enhanced connection setup */
	UIW_CONN_F_P2P = 1 << 2,	/* RFC 6581 peer-to-peer mode (RTR) */
	UIW_CONN_F_INITIATOR = 1 << 3,	/* this side sent the MPA Request */
	UIW_CONN_F_IPV6 = 1 << 4,	/* addresses are IPv6 (else IPv4-mapped) */
	UIW_CONN_F_MARKERS_TX = 1 << 5,	/* insert Markers: the peer's frame had M set */
	UIW_CONN_F_MARKERS_RX = 1 << 6,	/* the peer inserts Markers: our frame had M set */
	UIW_CONN_F_SCTP = 1 << 7,	/* DDP over SCTP (RFC 5043): no MPA framing */
	UIW_CONN_F_RDMAP_EXT = 1 << 8,	/* RFC 7306 offered and accepted in MPA setup: use it */
};

enum uiw_rtr_type {
	UIW_RTR_NONE = 0,
	UIW_RTR_WRITE = 1,		/* zero-length RDMA Write */
	UIW_RTR_READ = 2,		/* zero-length RDMA Read Request */
	UIW_RTR_SEND = 3,		/* zero-length Send (never chosen by uiw) */
};

struct uiw_conn_info {
	__u32 flags;		/* enum uiw_conn_flags */
	__u32 qpn;
	__u32 ird;		/* negotiated inbound RDMA Read depth */
	__u32 ord;		/* negotiated outbound RDMA Read depth */
	__u8 mpa_rev;		/* 1 or 2 */
	__u8 rtr;		/* enum uiw_rtr_type */
	__u16 local_port;	/* host byte order */
	__u16 remote_port;	/* host byte order */
	__u16 pad;
	__u8 local_addr[16];	/* IPv6, or IPv4-mapped IPv6 */
	__u8 remote_addr[16];
};

/*
 * Driver-specific uverbs methods (RDMA_VERBS_IOCTL on the context's uverbs fd; ids carry
 * the driver namespace bit, UVERBS_ID_DRIVER_NS). ib_uverbs_ioctl_hdr.driver_id must be
 * RDMA_DRIVER_UNKNOWN (0): uiw is out of tree and has no driver id of its own.
 */

/* On UVERBS_OBJECT_QP. */
enum uiw_qp_methods {
	/*
	 * Hand the connected socket of a QP to its owner, once: returns a new file
	 * descriptor (O_CLOEXEC, O_NONBLOCK) and the connection parameters. -EAGAIN while
	 * the connection is not RDMA-ready, -EALREADY once taken, -ENOTCONN if the
	 * connection is gone.
	 */
	UIW_METHOD_QP_TAKE_SOCKET = (1U << UVERBS_ID_NS_SHIFT),
	/*
	 * Raise an affiliated asynchronous event on the QP (ibv_get_async_event): the engine
	 * runs in user space, so the provider reports what it detects (a Terminate sent or
	 * received, a lost connection: IBV_EVENT_QP_FATAL; RFC 5040 §5.4). Allowed types:
	 * IBV_EVENT_QP_FATAL, _QP_REQ_ERR, _QP_ACCESS_ERR (the QP's shadow state becomes
	 * ERR; one of them between two transitions to RESET), IBV_EVENT_SQ_DRAINED (once
	 * after each transition to SQD), IBV_EVENT_QP_LAST_WQE_REACHED (once after each
	 * transition to ERR of a QP with an SRQ); others -EINVAL. -EALREADY when not due.
	 */
	UIW_METHOD_QP_EVENT,
};

/* Attributes of UIW_METHOD_QP_EVENT, _CQ_EVENT and _SRQ_EVENT (same ids for all three). */
enum uiw_event_attrs {
	UIW_ATTR_EVENT_HANDLE = (1U << UVERBS_ID_NS_SHIFT), /* idr, in: the QP, CQ or SRQ */
	UIW_ATTR_EVENT_TYPE,	/* __u32, in: enum ibv_event_type (= kernel ib_event_type) */
};

enum uiw_qp_take_socket_attrs {
	UIW_ATTR_TAKE_SOCKET_QP_HANDLE = (1U << UVERBS_ID_NS_SHIFT), /* idr, in */
	UIW_ATTR_TAKE_SOCKET_FD,	/* __s32, out */
	UIW_ATTR_TAKE_SOCKET_CONN_INFO,	/* struct uiw_conn_info, out */
};

/* On UVERBS_OBJECT_CQ. */
enum uiw_cq_methods {
	/*
	 * Fire the CQ's completion event (the completion channel of ibv_get_cq_event). The
	 * provider calls it when an armed CQ gets a matching completion. One event per arm:
	 * the provider arms the kernel with IB_USER_VERBS_CMD_REQ_NOTIFY_CQ (ibv_cmd_req_notify_cq)
	 * and -EAGAIN means no arm since the last event.
	 */
	UIW_METHOD_CQ_SIGNAL = (1U << UVERBS_ID_NS_SHIFT),
	/*
	 * Async event on the CQ: IBV_EVENT_CQ_ERR only (a completion found the CQ full), once
	 * per CQ (-EALREADY after).
	 */
	UIW_METHOD_CQ_EVENT,
};

/* On UVERBS_OBJECT_SRQ. */
enum uiw_srq_methods {
	/*
	 * Async event on the SRQ: IBV_EVENT_SRQ_LIMIT_REACHED (the armed limit was crossed,
	 * the kernel's shadow limit disarms as ibv_modify_srq requires; -EALREADY if no limit
	 * is armed) or IBV_EVENT_SRQ_ERR (once per SRQ).
	 */
	UIW_METHOD_SRQ_EVENT = (1U << UVERBS_ID_NS_SHIFT),
};

enum uiw_cq_signal_attrs {
	UIW_ATTR_CQ_SIGNAL_CQ_HANDLE = (1U << UVERBS_ID_NS_SHIFT), /* idr, in */
};

/* On UVERBS_OBJECT_DEVICE (applies to the calling context). */
enum uiw_device_methods {
	/*
	 * Register (fd >= 0) or clear (fd == -1) the context's readiness eventfd. The kernel
	 * adds 1 to it whenever a QP of the context becomes RDMA-ready (its socket can be
	 * taken) or loses its connection. The provider then retries TAKE_SOCKET on its
	 * waiting QPs.
	 */
	UIW_METHOD_DEVICE_SET_EVENTFD = (1U << UVERBS_ID_NS_SHIFT),
};

enum uiw_device_set_eventfd_attrs {
	/* raw fd, in: ib_uverbs_attr.len = 0, .data_s64 = the eventfd (or -1) */
	UIW_ATTR_SET_EVENTFD_FD = (1U << UVERBS_ID_NS_SHIFT),
};

UIW_ABI_STATIC_ASSERT(sizeof(struct uiw_ureq_alloc_ucontext) == 8, "uiw ABI: alloc_ucontext req");
UIW_ABI_STATIC_ASSERT(sizeof(struct uiw_counters) <= 4096, "uiw ABI: counters fit a page");
UIW_ABI_STATIC_ASSERT(sizeof(struct uiw_uresp_alloc_ucontext) == 72,
		      "uiw ABI: alloc_ucontext resp");
UIW_ABI_STATIC_ASSERT(sizeof(struct uiw_uresp_create_cq) == 8, "uiw ABI: create_cq resp");
UIW_ABI_STATIC_ASSERT(sizeof(struct uiw_uresp_create_qp) == 16, "uiw ABI: create_qp resp");
UIW_ABI_STATIC_ASSERT(sizeof(struct uiw_uresp_create_srq) == 8, "uiw ABI: create_srq resp");
UIW_ABI_STATIC_ASSERT(sizeof(struct uiw_uresp_reg_mr) == 8, "uiw ABI: reg_mr resp");
UIW_ABI_STATIC_ASSERT(sizeof(struct uiw_conn_info) == 56, "uiw ABI: conn_info");
UIW_ABI_STATIC_ASSERT(UIW_ATTR_TAKE_SOCKET_CONN_INFO == 0x1002, "uiw ABI: attr ids");

#ifdef __cplusplus
}
#endif

#endif /* UIW_ABI_H */
