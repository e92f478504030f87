/*
 * uiwdv: uiw's provider-specific ("direct verbs") entry points, for tests and diagnostics.
 *
 * libuiw is a libibverbs plugin, not a library applications link against, so these symbols
 * are reached through the already-loaded plugin: find the object whose name contains
 * "libuiw-rdmav" (dl_iterate_phdr), dlopen() it with RTLD_NOLOAD and dlsym() the name.
 */
#ifndef UIWDV_H
#define UIWDV_H

#include <infiniband/verbs.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The M, D and R bits of a Terminate header (RFC 5040 §4.8). */
enum {
	UIWDV_TERM_M = 1 << 0, /* DDP Segment Length valid */
	UIWDV_TERM_D = 1 << 1, /* DDP header of the erroneous segment included */
	UIWDV_TERM_R = 1 << 2, /* RDMA Read Request header included */
};

/* One Terminate message as uiw built (sent) or decoded (received) it. */
struct uiwdv_terminate {
	uint8_t valid;		   /* 0: no Terminate that way */
	uint8_t layer;		   /* RFC 5040 Figure 9: 0 RDMAP, 1 DDP, 2 LLP (MPA) */
	uint8_t etype;		   /* error type within the layer */
	uint8_t ecode;		   /* error code within the type */
	uint8_t flags;		   /* UIWDV_TERM_* */
	uint8_t ddp_header_len;	   /* 0, 14 (untagged) or 18 (tagged) */
	uint16_t ddp_segment_length;
	uint8_t ddp_header[18];	   /* as on the wire, from the DDP control octet */
	uint8_t rdma_header[28];   /* the Read Request header (valid with UIWDV_TERM_R) */
};

/*
 * The first Terminate the QP sent and the first it received (RDMAP §7.1 item 24: the first
 * error is the one captured); either pointer may be NULL. 0, or EINVAL if qp is not a uiw QP.
 */
int uiwdv_query_terminate(struct ibv_qp *qp, struct uiwdv_terminate *sent,
			  struct uiwdv_terminate *received);
typedef int (*uiwdv_query_terminate_fn)(struct ibv_qp *, struct uiwdv_terminate *,
					struct uiwdv_terminate *);

#ifdef __cplusplus
}
#endif

#endif /* UIWDV_H */
