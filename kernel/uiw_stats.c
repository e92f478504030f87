// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
/*
 * rdma statistic: the protocol engine runs in the provider, so its counters are there too.
 * Each user context gets one zeroed page (struct uiw_counters, uiw-abi.h) that the provider
 * maps from the uverbs file and adds to without a system call; the port's counters are the
 * sum over the device's live contexts plus what closed contexts left behind. The connection
 * counters are kept here, where connections are set up.
 */

#include <linux/mm.h>
#include <linux/vmalloc.h>
#include <rdma/ib_verbs.h>
#include <rdma/uverbs_ioctl.h>

#include "uiw.h"

struct uiw_counters_page {
	struct rdma_user_mmap_entry entry;
	struct uiw_counters *page;	/* vmalloc_user(): one page, mapped by the provider */
};

enum {
	UIW_STAT_CONN_ESTABLISHED = UIW_CNT_NUM,
	UIW_STAT_CONN_REFUSED,
	UIW_STAT_NUM
};

static const struct rdma_stat_desc uiw_stat_descs[UIW_STAT_NUM] = {
	[UIW_CNT_TX_FPDUS].name = "tx_fpdus",
	[UIW_CNT_RX_FPDUS].name = "rx_fpdus",
	[UIW_CNT_TX_BYTES].name = "tx_bytes",
	[UIW_CNT_RX_BYTES].name = "rx_bytes",
	[UIW_CNT_PLACED_BYTES].name = "placed_bytes",
	[UIW_CNT_TERM_TX_RDMAP].name = "terminate_tx_rdmap",
	[UIW_CNT_TERM_TX_DDP].name = "terminate_tx_ddp",
	[UIW_CNT_TERM_TX_LLP].name = "terminate_tx_llp",
	[UIW_CNT_TERM_RX_RDMAP].name = "terminate_rx_rdmap",
	[UIW_CNT_TERM_RX_DDP].name = "terminate_rx_ddp",
	[UIW_CNT_TERM_RX_LLP].name = "terminate_rx_llp",
	[UIW_CNT_CRC_ERRORS].name = "crc_errors",
	[UIW_STAT_CONN_ESTABLISHED].name = "connections_established",
	[UIW_STAT_CONN_REFUSED].name = "connections_refused",
};

void uiw_stats_dev_init(struct uiw_dev *udev)
{
	spin_lock_init(&udev->stats_lock);
	INIT_LIST_HEAD(&udev->stats_list);
	atomic64_set(&udev->conn_established, 0);
	atomic64_set(&udev->conn_refused, 0);
}

void uiw_stats_conn_established(struct uiw_dev *udev)
{
	atomic64_inc(&udev->conn_established);
}

void uiw_stats_conn_refused(struct uiw_dev *udev)
{
	atomic64_inc(&udev->conn_refused);
}

/* The context's counters page and the mmap key the provider maps it with. */
int uiw_stats_uctx_init(struct uiw_ucontext *uctx, u64 *key)
{
	struct uiw_dev *udev = to_udev(uctx->ibuc.device);
	struct uiw_counters_page *cp;
	int rv;

	cp = kzalloc(sizeof(*cp), GFP_KERNEL);
	if (!cp)
		return -ENOMEM;
	cp->page = vmalloc_user(PAGE_SIZE);	/* zeroed */
	if (!cp->page) {
		kfree(cp);
		return -ENOMEM;
	}
	rv = rdma_user_mmap_entry_insert(&uctx->ibuc, &cp->entry, PAGE_SIZE);
	if (rv) {
		vfree(cp->page);
		kfree(cp);
		return rv;
	}
	*key = rdma_user_mmap_get_offset(&cp->entry);
	uctx->counters = cp;
	spin_lock(&udev->stats_lock);
	list_add(&uctx->stats_entry, &udev->stats_list);
	spin_unlock(&udev->stats_lock);
	return 0;
}

/* The context is gone: its counts stay in the device's totals, its page goes once unmapped. */
void uiw_stats_uctx_fini(struct uiw_ucontext *uctx)
{
	struct uiw_dev *udev = to_udev(uctx->ibuc.device);
	struct uiw_counters_page *cp = uctx->counters;
	int i;

	if (!cp)
		return;
	spin_lock(&udev->stats_lock);
	for (i = 0; i < UIW_CNT_NUM; i++)
		udev->stats_retired[i] += READ_ONCE(cp->page->v[i]);
	list_del(&uctx->stats_entry);
	spin_unlock(&udev->stats_lock);
	uctx->counters = NULL;
	rdma_user_mmap_entry_remove(&cp->entry);	/* uiw_mmap_free() when unmapped */
}

int uiw_mmap(struct ib_ucontext *ibuc, struct vm_area_struct *vma)
{
	struct rdma_user_mmap_entry *e;
	struct uiw_counters_page *cp;
	int rv;

	e = rdma_user_mmap_entry_get(ibuc, vma);	/* checks the size and VM_SHARED */
	if (!e)
		return -EINVAL;
	cp = container_of(e, struct uiw_counters_page, entry);
	rv = remap_vmalloc_range(vma, cp->page, 0);
	rdma_user_mmap_entry_put(e);
	return rv;
}

void uiw_mmap_free(struct rdma_user_mmap_entry *e)
{
	struct uiw_counters_page *cp = container_of(e, struct uiw_counters_page, entry);

	vfree(cp->page);
	kfree(cp);
}

struct rdma_hw_stats *uiw_alloc_hw_port_stats(struct ib_device *ibdev, u32 port)
{
	return rdma_alloc_hw_stats_struct(uiw_stat_descs, UIW_STAT_NUM,
					  RDMA_HW_STATS_DEFAULT_LIFESPAN);
}

int uiw_get_hw_stats(struct ib_device *ibdev, struct rdma_hw_stats *stats, u32 port,
		     int index)
{
	struct uiw_dev *udev = to_udev(ibdev);
	struct uiw_ucontext *uctx;
	int i;

	spin_lock(&udev->stats_lock);
	for (i = 0; i < UIW_CNT_NUM; i++)
		stats->value[i] = udev->stats_retired[i];
	/* A provider's relaxed 64-bit adds: each value is read whole (aligned u64). */
	list_for_each_entry(uctx, &udev->stats_list, stats_entry)
		for (i = 0; i < UIW_CNT_NUM; i++)
			stats->value[i] += READ_ONCE(uctx->counters->page->v[i]);
	spin_unlock(&udev->stats_lock);
	stats->value[UIW_STAT_CONN_ESTABLISHED] = atomic64_read(&udev->conn_established);
	stats->value[UIW_STAT_CONN_REFUSED] = atomic64_read(&udev->conn_refused);
	return UIW_STAT_NUM;
}
