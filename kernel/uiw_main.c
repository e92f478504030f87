// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
/*
 * uiw: thin kernel helper of the uiw user-space iWARP RNIC.
 *
 * Module entry points, `rdma link add/del`, device registration, the port GID table and
 * the netdev / address notifiers that keep it current.
 */

#include <linux/etherdevice.h>
#include <linux/if_arp.h>
#include <linux/inetdevice.h>
#include <linux/module.h>
#include <net/addrconf.h>
#include <net/if_inet6.h>
#include <rdma/rdma_netlink.h>

#include "uiw.h"
#include "uiw_sctp.h"
#include "uiw_cm.h"

MODULE_AUTHOR("uiw developers");
MODULE_DESCRIPTION("uiw user-space iWARP RNIC kernel helper");
MODULE_LICENSE("Dual BSD/GPL");
MODULE_ALIAS_RDMA_LINK("uiw");

/* Unregistrations, GID table refreshes. */
struct workqueue_struct *uiw_wq;

/*
 * Our devices. uiw is out of tree and registers with RDMA_DRIVER_UNKNOWN, which
 * ib_device_get_by_netdev() and ib_unregister_driver() match on every other ID-less
 * driver, so uiw keeps its own list.
 */
static LIST_HEAD(uiw_devs);
static DEFINE_SPINLOCK(uiw_devs_lock);
static atomic_t uiw_dev_count = ATOMIC_INIT(0);
static DECLARE_WAIT_QUEUE_HEAD(uiw_dev_gone_wq);

/* Caller holds uiw_devs_lock. */
static struct uiw_dev *uiw_find_dev(const struct net_device *netdev)
{
	struct uiw_dev *udev;

	list_for_each_entry(udev, &uiw_devs, list)
		if (udev->netdev == netdev)
			return udev;
	return NULL;
}

/*
 * GID table (layout documented in uiw-abi.h): the netdev's addresses, IPv4 first as
 * IPv4-mapped, then IPv6; the MAC GID (what rdma_cm looks up for an iWARP port) last.
 */
static void uiw_gid_collect(struct net_device *netdev, union ib_gid *gid)
{
	struct in_device *in_dev;
	const struct in_ifaddr *ifa;
	int n = 0;

	memset(gid, 0, sizeof(*gid) * UIW_GID_TBL_LEN);

	rcu_read_lock();
	in_dev = __in_dev_get_rcu(netdev);
	if (in_dev) {
		in_dev_for_each_ifa_rcu(ifa, in_dev) {
			if (n >= UIW_GID_MAC_INDEX)
				break;
			ipv6_addr_set_v4mapped(ifa->ifa_local,
					       (struct in6_addr *)gid[n++].raw);
		}
	}
	rcu_read_unlock();

#if IS_ENABLED(CONFIG_IPV6)
	{
		struct inet6_dev *idev = in6_dev_get(netdev);
		struct inet6_ifaddr *ifp;

		if (idev) {
			read_lock_bh(&idev->lock);
			list_for_each_entry(ifp, &idev->addr_list, if_list) {
				if (n >= UIW_GID_MAC_INDEX)
					break;
				memcpy(gid[n++].raw, &ifp->addr, sizeof(gid->raw));
			}
			read_unlock_bh(&idev->lock);
			in6_dev_put(idev);
		}
	}
#endif
	/* rdma_cm uses the first 6 bytes of dev_addr as the GID of an Ethernet iWARP port. */
	if (netdev->addr_len >= ETH_ALEN)
		memcpy(gid[UIW_GID_MAC_INDEX].raw, netdev->dev_addr, ETH_ALEN);
}

static void uiw_port_event(struct uiw_dev *udev, enum ib_event_type type)
{
	struct ib_event event = {
		.device = &udev->ibdev,
		.element.port_num = 1,
		.event = type,
	};
	struct net_device *netdev = udev->netdev;

	/*
	 * Events make the core re-query the port, which fails once the netdev is being
	 * dismantled; only a registered device that is not unregistering takes them.
	 */
	if (READ_ONCE(netdev->dismantle) ||
	    uiw_netdev_reg_state(netdev) != NETREG_REGISTERED)
		return;
	if (ib_device_try_get(&udev->ibdev)) {
		ib_dispatch_event(&event);
		ib_device_put(&udev->ibdev);
	}
}

/* Rebuild the GID table; if it changed, make the core refresh its GID cache. */
void uiw_gid_update(struct uiw_dev *udev)
{
	union ib_gid gid[UIW_GID_TBL_LEN];
	bool changed;

	uiw_gid_collect(udev->netdev, gid);

	spin_lock_bh(&udev->gid_lock);
	changed = memcmp(gid, udev->gid, sizeof(gid)) != 0;
	if (changed)
		memcpy(udev->gid, gid, sizeof(gid));
	spin_unlock_bh(&udev->gid_lock);

	if (changed)
		uiw_port_event(udev, IB_EVENT_GID_CHANGE);
}

static void uiw_gid_work(struct work_struct *work)
{
	uiw_gid_update(container_of(work, struct uiw_dev, gid_work));
}

static void uiw_unreg_work(struct work_struct *work)
{
	struct uiw_dev *udev = container_of(work, struct uiw_dev, unreg_work);

	/* The device memory stays until put_device(), taken when the work was queued. */
	ib_unregister_device(&udev->ibdev);
	put_device(&udev->ibdev.dev);
}

/* Caller holds uiw_devs_lock. */
static void uiw_queue_unregister(struct uiw_dev *udev)
{
	if (udev->unreg_queued)
		return;
	udev->unreg_queued = true;
	get_device(&udev->ibdev.dev);
	queue_work(uiw_wq, &udev->unreg_work);
}

static int uiw_netdev_event(struct notifier_block *nb, unsigned long event,
			    void *arg)
{
	struct net_device *netdev = netdev_notifier_info_to_dev(arg);
	struct uiw_dev *udev;
	bool up;

	/* _bh: uiw_addr_event takes it from the inet6addr chain, which runs in softirq too. */
	spin_lock_bh(&uiw_devs_lock);
	udev = uiw_find_dev(netdev);
	if (!udev)
		goto out;

	switch (event) {
	case NETDEV_UP:
	case NETDEV_DOWN:
	case NETDEV_CHANGE:
		up = netif_running(netdev) && netif_oper_up(netdev);
		uiw_port_event(udev, up ? IB_EVENT_PORT_ACTIVE : IB_EVENT_PORT_ERR);
		queue_work(uiw_wq, &udev->gid_work);
		break;
	case NETDEV_CHANGEADDR:
		queue_work(uiw_wq, &udev->gid_work);
		break;
	case NETDEV_CHANGENAME:
		strscpy(udev->ibdev.iw_ifname, netdev->name,
			sizeof(udev->ibdev.iw_ifname));
		if (udev->net_kobj)
			queue_work(uiw_wq, &udev->rename_work);
		break;
	case NETDEV_UNREGISTER:
		/* Also sent when the netdev moves to another network namespace. */
		udev->netdev_gone = true;
		uiw_queue_unregister(udev);
		break;
	default:
		break;
	}
out:
	spin_unlock_bh(&uiw_devs_lock);
	return NOTIFY_OK;
}

static void uiw_addr_event(struct net_device *netdev)
{
	struct uiw_dev *udev;

	spin_lock_bh(&uiw_devs_lock);
	udev = uiw_find_dev(netdev);
	if (udev)
		queue_work(uiw_wq, &udev->gid_work);
	spin_unlock_bh(&uiw_devs_lock);
}

static int uiw_inetaddr_event(struct notifier_block *nb, unsigned long event,
			      void *arg)
{
	const struct in_ifaddr *ifa = arg;

	uiw_addr_event(ifa->ifa_dev->dev);
	return NOTIFY_OK;
}

/* The inet6addr chain is atomic: only queue work from here. */
static int uiw_inet6addr_event(struct notifier_block *nb, unsigned long event,
			       void *arg)
{
	const struct inet6_ifaddr *ifp = arg;

	uiw_addr_event(ifp->idev->dev);
	return NOTIFY_OK;
}

static struct notifier_block uiw_netdev_nb = {
	.notifier_call = uiw_netdev_event,
};

static struct notifier_block uiw_inetaddr_nb = {
	.notifier_call = uiw_inetaddr_event,
};

static struct notifier_block uiw_inet6addr_nb = {
	.notifier_call = uiw_inet6addr_event,
};

/*
 * The ib_device's parent: /sys/devices/uiw/rnicN, holding net/<ifname> -> the netdev. A NIC's
 * RDMA device shows its interface as /sys/class/infiniband/DEV/device/net/IFNAME; tools and
 * rdma-core's tests (tests/base.py) find the interface and its address there. A virtual
 * netdev (veth, dummy) has no parent device to lend, so uiw makes its own.
 */
static struct device *uiw_root;

static void uiw_parent_release(struct device *dev)
{
	kfree(dev);
}

static void uiw_parent_del(struct uiw_dev *udev)
{
	if (udev->net_kobj) {
		if (udev->net_link[0])
			sysfs_remove_link(udev->net_kobj, udev->net_link);
		kobject_put(udev->net_kobj);
		udev->net_kobj = NULL;
	}
	if (udev->parent) {
		device_unregister(udev->parent);
		udev->parent = NULL;
	}
}

static int uiw_net_link(struct uiw_dev *udev)
{
	char name[IFNAMSIZ];
	int rv;

	rtnl_lock();
	strscpy(name, udev->netdev->name, sizeof(name));
	rtnl_unlock();
	if (!strcmp(name, udev->net_link))
		return 0;
	if (udev->net_link[0])
		sysfs_remove_link(udev->net_kobj, udev->net_link);
	udev->net_link[0] = 0;
	rv = sysfs_create_link(udev->net_kobj, &udev->netdev->dev.kobj, name);
	if (!rv)
		strscpy(udev->net_link, name, sizeof(udev->net_link));
	return rv;
}

static void uiw_rename_work(struct work_struct *work)
{
	struct uiw_dev *udev = container_of(work, struct uiw_dev, rename_work);

	if (uiw_net_link(udev))
		dev_warn(udev->parent, "cannot link net/%s\n", udev->netdev->name);
}

static int uiw_parent_add(struct uiw_dev *udev)
{
	struct device *parent;
	int rv;

	parent = kzalloc(sizeof(*parent), GFP_KERNEL);
	if (!parent)
		return -ENOMEM;
	device_initialize(parent);
	parent->parent = uiw_root;
	parent->release = uiw_parent_release;
	rv = dev_set_name(parent, "rnic%u", udev->vendor_part_id);
	if (!rv)
		rv = device_add(parent);
	if (rv) {
		put_device(parent);
		return rv;
	}
	udev->parent = parent;
	udev->net_kobj = kobject_create_and_add("net", &parent->kobj);
	rv = udev->net_kobj ? uiw_net_link(udev) : -ENOMEM;
	if (rv) {
		uiw_parent_del(udev);
		return rv;
	}
	udev->ibdev.dev.parent = parent;
	return 0;
}

/* Called by the core when the device is freed (after unregistration or a failed one). */
static void uiw_dealloc_driver(struct ib_device *ibdev)
{
	struct uiw_dev *udev = to_udev(ibdev);

	spin_lock_bh(&uiw_devs_lock);
	list_del_init(&udev->list);
	spin_unlock_bh(&uiw_devs_lock);
	cancel_work_sync(&udev->gid_work);
	cancel_work_sync(&udev->rename_work);
	/* The ib_device's own sysfs entry is gone by now (device_del before dealloc_driver). */
	uiw_parent_del(udev);

	uiw_cm_dev_cleanup(udev);

	WARN_ON(!xa_empty(&udev->qp_xa));
	WARN_ON(!xa_empty(&udev->mr_xa));
	WARN_ON(!xa_empty(&udev->cq_xa));
	WARN_ON(!xa_empty(&udev->srq_xa));
	xa_destroy(&udev->qp_xa);
	xa_destroy(&udev->mr_xa);
	xa_destroy(&udev->cq_xa);
	xa_destroy(&udev->srq_xa);
	xa_destroy(&udev->cep_xa);
	dev_put(udev->netdev);

	if (atomic_dec_and_test(&uiw_dev_count))
		wake_up_all(&uiw_dev_gone_wq);
}

/*
 * hca_type names the driver behind a device whatever the admin named the device: the provider
 * claims a device by it (uiw has no rdma_driver_id of its own to match on, being out of tree).
 */
static ssize_t hca_type_show(struct device *device, struct device_attribute *attr, char *buf)
{
	return sysfs_emit(buf, "%s\n", UIW_HCA_TYPE);
}
static DEVICE_ATTR_RO(hca_type);

static struct attribute *uiw_dev_attrs[] = {
	&dev_attr_hca_type.attr,
	&dev_attr_llp.attr,
	NULL,
};

static const struct attribute_group uiw_dev_attr_group = {
	.attrs = uiw_dev_attrs,
};

static const struct ib_device_ops uiw_main_ops = {
	.dealloc_driver = uiw_dealloc_driver,
	.device_group = &uiw_dev_attr_group,
};

static bool uiw_netdev_qualified(const struct net_device *netdev)
{
	switch (netdev->type) {
	case ARPHRD_ETHER:
	case ARPHRD_IEEE802:
	case ARPHRD_LOOPBACK:
		return true;
	default:
		return false;
	}
}

static struct uiw_dev *uiw_dev_alloc(struct net_device *netdev)
{
	static atomic_t part_id = ATOMIC_INIT(0);
	struct uiw_dev *udev;
	struct ib_device *ibdev;
	u8 mac[ETH_ALEN];
	u8 *guid;

	udev = ib_alloc_device(uiw_dev, ibdev);
	if (!udev)
		return NULL;
	ibdev = &udev->ibdev;

	udev->netdev = netdev;
	dev_hold(netdev);
	INIT_LIST_HEAD(&udev->list);
	INIT_WORK(&udev->unreg_work, uiw_unreg_work);
	INIT_WORK(&udev->gid_work, uiw_gid_work);
	INIT_WORK(&udev->rename_work, uiw_rename_work);
	spin_lock_init(&udev->gid_lock);
	xa_init_flags(&udev->qp_xa, XA_FLAGS_ALLOC);
	xa_init_flags(&udev->mr_xa, XA_FLAGS_ALLOC);
	xa_init_flags(&udev->cq_xa, XA_FLAGS_ALLOC);
	xa_init_flags(&udev->srq_xa, XA_FLAGS_ALLOC);
	xa_init_flags(&udev->cep_xa, XA_FLAGS_ALLOC1);
	spin_lock_init(&udev->cep_lock);
	INIT_LIST_HEAD(&udev->cep_list);
	uiw_stats_dev_init(udev);
	/*
	 * A random starting point makes QPNs hard to guess (RFC 5040 §8); STag indexes are
	 * random per registration (uiw_verbs.c).
	 */
	udev->qp_next = UIW_QPN_MIN + get_random_u32_below(1 << 16);

	/*
	 * Node GUID: the EUI-64 of the MAC with 0xff,0x75 ("u") instead of 0xff,0xfe in
	 * the middle, so it never equals the GUID siw or rxe derive from the same MAC.
	 */
	if (netdev->addr_len >= ETH_ALEN && !is_zero_ether_addr(netdev->dev_addr))
		memcpy(mac, netdev->dev_addr, ETH_ALEN);
	else
		eth_random_addr(mac);
	guid = (u8 *)&ibdev->node_guid;
	addrconf_addr_eui48(guid, mac);
	guid[4] = 0x75;

	ibdev->node_type = RDMA_NODE_RNIC;
	ibdev->phys_port_cnt = 1;
	ibdev->num_comp_vectors = 1;
	ibdev->local_dma_lkey = 0;
	ibdev->driver_def = uiw_uapi_defs;
	/* uiw binds real kernel TCP ports: iwpmd must not remap them. */
	ibdev->iw_driver_flags = IW_F_NO_PORT_MAP;
	strscpy(ibdev->iw_ifname, netdev->name, sizeof(ibdev->iw_ifname));
	snprintf(ibdev->node_desc, sizeof(ibdev->node_desc),
		 "uiw user-space iWARP RNIC on %s", netdev->name);
	udev->vendor_part_id = atomic_inc_return(&part_id);

	ib_set_device_ops(ibdev, &uiw_device_ops);
	ib_set_device_ops(ibdev, &uiw_main_ops);
	/* The provider arms CQs here (uiw_req_notify_cq): not in the core's default set. */
	ibdev->uverbs_cmd_mask |= BIT_ULL(IB_USER_VERBS_CMD_REQ_NOTIFY_CQ);

	uiw_gid_collect(netdev, udev->gid);
	return udev;
}

static int uiw_newlink(const char *ibdev_name, struct net_device *netdev)
{
	struct uiw_dev *udev;
	bool gone;
	int rv;

	if (!uiw_netdev_qualified(netdev))
		return -EINVAL;

	udev = uiw_dev_alloc(netdev);
	if (!udev)
		return -ENOMEM;
	atomic_inc(&uiw_dev_count);

	/*
	 * One uiw device per netdev. The device joins the list before it registers so the
	 * netdev notifier sees it: a netdev that unregisters meanwhile sets netdev_gone.
	 */
	spin_lock_bh(&uiw_devs_lock);
	if (uiw_find_dev(netdev)) {
		spin_unlock_bh(&uiw_devs_lock);
		ib_dealloc_device(&udev->ibdev);
		return -EEXIST;
	}
	list_add_tail(&udev->list, &uiw_devs);
	udev->unreg_queued = true;	/* not registered yet: nothing to queue */
	spin_unlock_bh(&uiw_devs_lock);

	if (uiw_netdev_reg_state(netdev) != NETREG_REGISTERED) {
		ib_dealloc_device(&udev->ibdev);
		return -ENODEV;
	}

#ifdef UIW_HAVE_MARK_NAME_ASSIGNED_BY_USER
	/* The administrator named it (rdma link add NAME): ib_core must not rename it. */
	ib_mark_name_assigned_by_user(&udev->ibdev);
#endif
	rv = uiw_parent_add(udev);
	if (!rv)
		rv = ib_device_set_netdev(&udev->ibdev, netdev, 1);
	if (!rv)
		rv = ib_register_device(&udev->ibdev, ibdev_name, NULL);
	if (rv) {
		ib_dealloc_device(&udev->ibdev);
		return rv;
	}

	spin_lock_bh(&uiw_devs_lock);
	udev->unreg_queued = false;
	gone = udev->netdev_gone;
	spin_unlock_bh(&uiw_devs_lock);
	if (gone) {
		ib_unregister_device(&udev->ibdev);
		return -ENODEV;
	}
	uiw_dbg(udev, "registered on %s\n", netdev->name);
	return 0;
}

static struct rdma_link_ops uiw_link_ops = {
	.type = "uiw",
	.newlink = uiw_newlink,
};

/* Unregister every uiw device (module exit); each one's dealloc_driver unlinks it. */
static void uiw_unregister_all(void)
{
	struct uiw_dev *udev;

	for (;;) {
		spin_lock_bh(&uiw_devs_lock);
		udev = list_first_entry_or_null(&uiw_devs, struct uiw_dev, list);
		if (udev)
			get_device(&udev->ibdev.dev);
		spin_unlock_bh(&uiw_devs_lock);
		if (!udev)
			break;
		ib_unregister_device(&udev->ibdev);
		put_device(&udev->ibdev.dev);
	}
	wait_event(uiw_dev_gone_wq, atomic_read(&uiw_dev_count) == 0);
}

static int __init uiw_init_module(void)
{
	int rv;

	/*
	 * No WQ_MEM_RECLAIM: uiw serves no storage consumer (kernel ULPs get no objects), and
	 * uiw_unreg_work calls ib_unregister_device(), which flushes ib_core's workqueues; they
	 * have no rescuer, and flushing them from a reclaim workqueue is a WARN in
	 * check_flush_dependency().
	 */
	uiw_wq = alloc_workqueue("uiw", WQ_UNBOUND, 0);
	if (!uiw_wq)
		return -ENOMEM;
	uiw_root = root_device_register("uiw");
	if (IS_ERR(uiw_root)) {
		rv = PTR_ERR(uiw_root);
		goto out_wq;
	}
	rv = uiw_cm_init();
	if (rv)
		goto out_root;
	rv = register_netdevice_notifier(&uiw_netdev_nb);
	if (rv)
		goto out_cm;
	rv = register_inetaddr_notifier(&uiw_inetaddr_nb);
	if (rv)
		goto out_netdev;
#if IS_ENABLED(CONFIG_IPV6)
	rv = register_inet6addr_notifier(&uiw_inet6addr_nb);
	if (rv)
		goto out_inet;
#endif
	rdma_link_register(&uiw_link_ops);
	return 0;

#if IS_ENABLED(CONFIG_IPV6)
out_inet:
	unregister_inetaddr_notifier(&uiw_inetaddr_nb);
#endif
out_netdev:
	unregister_netdevice_notifier(&uiw_netdev_nb);
out_cm:
	uiw_cm_exit();
out_root:
	root_device_unregister(uiw_root);
out_wq:
	destroy_workqueue(uiw_wq);
	return rv;
}

static void __exit uiw_exit_module(void)
{
	rdma_link_unregister(&uiw_link_ops);
	/* Queued unregistrations first, then whatever is left. */
	flush_workqueue(uiw_wq);
	uiw_unregister_all();
#if IS_ENABLED(CONFIG_IPV6)
	unregister_inet6addr_notifier(&uiw_inet6addr_nb);
#endif
	unregister_inetaddr_notifier(&uiw_inetaddr_nb);
	unregister_netdevice_notifier(&uiw_netdev_nb);
	uiw_cm_exit();
	root_device_unregister(uiw_root);
	destroy_workqueue(uiw_wq);
}

module_init(uiw_init_module);
module_exit(uiw_exit_module);
