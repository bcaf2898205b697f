/*
 * Reliable-datagram endpoint: lifecycle, bindings, options and progress. The data calls are
 * in msg.c and tagged.c, the protocol in proto*.c, connections in conn.c, and what depends on
 * the core's kind in conn_msg.c and conn_rdm.c (struct layer_core_ops, chosen here at open).
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "layer/ep.h"
#include "layer/av.h"
#include "rdma/fi_ext_layer.h"
#include "util/tagm_inl.h"

/* Core CQ depth: enough for every posted buffer and send of a few connections. */
#define LAYER_CORE_CQ_SIZE 8192

static void layer_ep_progress_pending(struct layer_ep *ep)
{
	struct util_dlist *item, *rx_item;
	struct layer_conn *conn;
	struct layer_rx *rx;

	ep->has_pending = false;
	util_dlist_foreach(&ep->conns, item) {
		conn = container_of(item, struct layer_conn, link);
		/* A connecting one may have its HELLO to send (RDM core). */
		if (conn->state == LAYER_CONN_CLOSED)
			continue;
		layer_proto_flush_pending(conn);
		util_dlist_foreach(&conn->reading_rx, rx_item) {
			rx = container_of(rx_item, struct layer_rx, link);
			if (rx->read_done < rx->read_len && !rx->read_err &&
			    !layer_rndv_issue_reads(ep, rx))
				break;
		}
	}
	/* Recompute: whatever is still queued keeps the flag up. */
	util_dlist_foreach(&ep->conns, item) {
		conn = container_of(item, struct layer_conn, link);
		if (!util_dlist_empty(&conn->pending_tx)) {
			ep->has_pending = true;
			return;
		}
		util_dlist_foreach(&conn->reading_rx, rx_item) {
			rx = container_of(rx_item, struct layer_rx, link);
			if (rx->read_done < rx->read_len && !rx->read_err) {
				ep->has_pending = true;
				return;
			}
		}
	}
}

void layer_ep_progress(struct layer_ep *ep)
{
	util_lock_acquire(&ep->lock);
	if (ep->is_enabled) {
		ep->core->progress(ep);
		if (ep->has_pending)
			layer_ep_progress_pending(ep);
		/* Flushed completions of closed connections first, then the rest. */
		if (!util_dlist_empty(&ep->closed_conns))
			ep->core->progress(ep);
		if (!util_dlist_empty(&ep->closed_conns) ||
		    !util_dlist_empty(&ep->draining_conns))
			layer_conn_reap(ep);
		/* A lost connection's messages may have left the bound's hold. */
		layer_unexp_check(ep);
	}
	util_lock_release(&ep->lock);
}

int layer_ep_trywait(struct layer_ep *ep)
{
	/* Draining connections wait on core completions, which wake the caller up. */
	if (ep->has_pending || !util_dlist_empty(&ep->closed_conns))
		return -FI_EAGAIN;
	return ep->core->trywait(ep);
}

static bool layer_rx_src_gone(struct layer_ep *ep, const struct layer_rx *rx)
{
	uint8_t addr[LAYER_ADDR_MAX];
	size_t index;

	/* a key handle the endpoint holds stays in the AV while it lives */
	return rx->src_addr != FI_ADDR_UNSPEC && !(rx->flags & FI_AUTH_KEY) &&
	       layer_av_get_addr(ep->av, rx->src_addr, addr, &index);
}

static bool layer_tagm_src_gone(const struct util_tagm_recv *recv, void *ep)
{
	return layer_rx_src_gone(ep, container_of(recv, struct layer_rx, tagm));
}

/*
 * An AV entry was removed: what waits on that peer completes with an error instead of
 * reaching an address that may be reused. Sends in flight go with their connection;
 * directed receives whose source is gone complete with FI_EADDRNOTAVAIL.
 */
static void layer_ep_on_av_remove(void *arg, size_t index)
{
	struct layer_ep *ep = arg;
	struct util_dlist *item, *tmp;
	struct util_tagm_recv *recv;
	struct layer_rx *rx;

	util_lock_acquire(&ep->lock);
	if (index < ep->out_conns_cnt && ep->out_conns[index])
		layer_conn_fail(ep->out_conns[index], FI_EADDRNOTAVAIL);
	util_dlist_foreach_safe(&ep->posted_rx, item, tmp) {
		rx = container_of(item, struct layer_rx, link);
		if (!layer_rx_src_gone(ep, rx))
			continue;
		util_dlist_remove(&rx->link);
		layer_proto_report_rx(ep, rx, NULL, 0, FI_RECV | FI_MSG, 0, FI_ADDR_NOTAVAIL,
				      FI_EADDRNOTAVAIL, 0);
		layer_rx_free(ep, rx);
	}
	while ((recv = util_tagm_recv_find(&ep->tagm, layer_tagm_src_gone, ep))) {
		util_tagm_recv_remove(&ep->tagm, recv);
		rx = container_of(recv, struct layer_rx, tagm);
		layer_proto_report_rx(ep, rx, NULL, 0, FI_RECV | FI_TAGGED, 0, FI_ADDR_NOTAVAIL,
				      FI_EADDRNOTAVAIL, 0);
		layer_rx_free(ep, rx);
	}
	util_lock_release(&ep->lock);
}

static int layer_ep_close(struct fid *fid)
{
	struct layer_ep *ep = container_of(fid, struct layer_ep, ep_fid.fid);
	struct util_dlist *item;

	/* Detach from the objects whose reads drive progress before tearing down; the AV's
	 * listener mutex comes before ep->lock. */
	if (ep->av)
		layer_av_del_listener(ep->av, ep);
	if (ep->tx_cq)
		layer_cq_detach_ep(ep->tx_cq, ep);
	if (ep->rx_cq && ep->rx_cq != ep->tx_cq)
		layer_cq_detach_ep(ep->rx_cq, ep);
	if (ep->send_cntr)
		layer_cntr_detach_ep(ep->send_cntr, ep);
	if (ep->recv_cntr && ep->recv_cntr != ep->send_cntr)
		layer_cntr_detach_ep(ep->recv_cntr, ep);

	util_lock_acquire(&ep->lock);
	ep->core->close(ep);
	layer_conn_free_all(ep);
	while ((item = util_dlist_pop_front(&ep->unexp_msgs)))
		layer_unexp_put(ep, container_of(item, struct layer_rx_buf, link));
	layer_tagged_close(ep);
	util_lock_release(&ep->lock);

	fi_close(&ep->core_cq->fid);
	fi_close(&ep->core_eq->fid);
	if (ep->key_cnt)
		layer_av_keys_unref_all(ep->av, ep->keys, ep->key_cnt);
	if (ep->av)
		atomic_fetch_sub(&ep->av->ref, 1);
	if (ep->eq)
		atomic_fetch_sub(&ep->eq->util.ref, 1);
	util_bufpool_fini(&ep->rec_pool);
	util_bufpool_fini(&ep->buf_pool);
	util_bufpool_fini(&ep->rx_pool);
	util_bufpool_fini(&ep->tx_pool);
	fi_freeinfo(ep->core_info);
	util_lock_fini(&ep->lock);
	atomic_fetch_sub(&ep->domain->ref, 1);
	free(ep);
	return 0;
}

static int layer_ep_bind_cq(struct layer_ep *ep, struct layer_cq *cq, uint64_t flags)
{
	int ret;

	if (flags & ~(FI_TRANSMIT | FI_RECV | FI_SELECTIVE_COMPLETION))
		return -FI_EBADFLAGS;
	if (!(flags & (FI_TRANSMIT | FI_RECV)))
		return -FI_EINVAL;
	if (((flags & FI_TRANSMIT) && ep->tx_cq) || ((flags & FI_RECV) && ep->rx_cq))
		return -FI_EINVAL;
	if (ep->tx_cq != cq && ep->rx_cq != cq) {
		ret = layer_cq_attach_ep(cq, ep);
		if (ret)
			return ret;
	}
	if (flags & FI_TRANSMIT) {
		ep->tx_cq = cq;
		ep->tx_selective = flags & FI_SELECTIVE_COMPLETION;
	}
	if (flags & FI_RECV) {
		ep->rx_cq = cq;
		ep->rx_selective = flags & FI_SELECTIVE_COMPLETION;
	}
	return 0;
}

static int layer_ep_bind_cntr(struct layer_ep *ep, struct layer_cntr *cntr, uint64_t flags)
{
	int ret;

	if (flags & ~(FI_SEND | FI_RECV))
		return flags & (FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE) ?
		       -FI_EINVAL : -FI_EBADFLAGS;
	if (!flags)
		return -FI_EINVAL;
	if (((flags & FI_SEND) && ep->send_cntr) || ((flags & FI_RECV) && ep->recv_cntr))
		return -FI_EINVAL;
	if (ep->send_cntr != cntr && ep->recv_cntr != cntr) {
		ret = layer_cntr_attach_ep(cntr, ep);
		if (ret)
			return ret;
	}
	if (flags & FI_SEND)
		ep->send_cntr = cntr;
	if (flags & FI_RECV)
		ep->recv_cntr = cntr;
	return 0;
}

static int layer_ep_bind(struct fid *fid, struct fid *bfid, uint64_t flags)
{
	struct layer_ep *ep = container_of(fid, struct layer_ep, ep_fid.fid);
	struct layer_av *av;
	int ret = 0;

	if (!bfid)
		return -FI_EINVAL;
	/*
	 * Binding is set-up, before fi_enable; it does not take ep->lock because attaching to a
	 * CQ takes the CQ's endpoint list lock, which progress holds while taking ep->lock.
	 */
	if (ep->is_enabled)
		return -FI_EOPBADSTATE;
	switch (bfid->fclass) {
	case FI_CLASS_AV:
		av = container_of(bfid, struct layer_av, av_fid.fid);
		if (flags) {
			ret = -FI_EBADFLAGS;
		} else if (ep->av) {
			ret = -FI_EINVAL;
		} else if (av->domain != ep->domain) {
			ret = -FI_EINVAL;
		} else {
			ret = layer_av_add_listener(av, layer_ep_on_av_remove, ep);
			if (ret)
				break;
			ep->av = av;
			atomic_fetch_add(&av->ref, 1);
		}
		break;
	case FI_CLASS_CQ:
		ret = layer_ep_bind_cq(ep, container_of(bfid, struct layer_cq, util.cq_fid.fid),
				       flags);
		break;
	case FI_CLASS_CNTR:
		ret = layer_ep_bind_cntr(ep, container_of(bfid, struct layer_cntr,
							  util.cntr_fid.fid), flags);
		break;
	case FI_CLASS_EQ:
		/* Connection events are the provider's business; the EQ is held for AV events. */
		if (flags) {
			ret = -FI_EBADFLAGS;
		} else if (ep->eq) {
			ret = -FI_EINVAL;
		} else {
			ep->eq = container_of(bfid, struct layer_eq, util.eq_fid.fid);
			atomic_fetch_add(&ep->eq->util.ref, 1);
		}
		break;
	default:
		ret = -FI_EINVAL;
		break;
	}
	return ret;
}

static int layer_ep_enable(struct layer_ep *ep)
{
	int ret;

	if (ep->is_enabled)
		return -FI_EOPBADSTATE;
	if (!ep->av)
		return -FI_ENOAV;
	if (((ep->caps & FI_SEND) && !ep->tx_cq && !ep->send_cntr) ||
	    ((ep->caps & FI_RECV) && !ep->rx_cq && !ep->recv_cntr))
		return -FI_ENOCQ;
	if (ep->av->addrlen != ep->domain->addrlen)
		return -FI_EINVAL;
	/* The keys an endpoint is enabled with stay in the AV while it lives (fi_av(3)). */
	if (ep->domain->auth_key_size == FI_AV_AUTH_KEY) {
		ret = layer_av_keys_ref_all(ep->av, &ep->keys, &ep->key_cnt);
		if (ret)
			return ret;
	}
	ret = ep->core->enable(ep);
	if (ret) {
		if (ep->key_cnt)
			layer_av_keys_unref_all(ep->av, ep->keys, ep->key_cnt);
		ep->keys = NULL;
		ep->key_cnt = 0;
		return ret;
	}
	ep->is_enabled = true;
	return 0;
}

static int layer_ep_control(struct fid *fid, int command, void *arg)
{
	struct layer_ep *ep = container_of(fid, struct layer_ep, ep_fid.fid);
	uint64_t *flags = arg;
	int ret = 0;

	util_lock_acquire(&ep->lock);
	switch (command) {
	case FI_ENABLE:
		ret = layer_ep_enable(ep);
		break;
	case FI_GETOPSFLAG:
		if (!flags || !(*flags & (FI_TRANSMIT | FI_RECV)) ||
		    (*flags & FI_TRANSMIT && *flags & FI_RECV)) {
			ret = -FI_EINVAL;
			break;
		}
		*flags = (*flags & FI_TRANSMIT) ? ep->tx_op_flags : ep->rx_op_flags;
		break;
	case FI_SETOPSFLAG:
		if (!flags) {
			ret = -FI_EINVAL;
		} else if ((*flags & FI_TRANSMIT) && !(*flags & FI_RECV)) {
			if (*flags & ~(FI_TRANSMIT | LAYER_TX_OP_FLAGS))
				ret = -FI_EBADFLAGS;
			else
				ep->tx_op_flags = *flags & ~FI_TRANSMIT;
		} else if ((*flags & FI_RECV) && !(*flags & FI_TRANSMIT)) {
			if (*flags & ~(FI_RECV | LAYER_RX_OP_FLAGS))
				ret = -FI_EBADFLAGS;
			else
				ep->rx_op_flags = *flags & ~FI_RECV;
		} else {
			ret = -FI_EINVAL;
		}
		break;
	default:
		ret = -FI_ENOSYS;
		break;
	}
	util_lock_release(&ep->lock);
	return ret;
}

static struct fi_ops layer_ep_fi_ops = {
	.size = sizeof(struct fi_ops),
	.close = layer_ep_close,
	.bind = layer_ep_bind,
	.control = layer_ep_control,
	.ops_open = layer_no_ops_open,
};

static ssize_t layer_ep_cancel(fid_t fid, void *context)
{
	struct layer_ep *ep = container_of(fid, struct layer_ep, ep_fid.fid);
	int ret;

	util_lock_acquire(&ep->lock);
	ret = layer_proto_cancel(ep, context);
	if (ret == -FI_ENOENT)
		ret = layer_tagged_cancel(ep, context);
	util_lock_release(&ep->lock);
	return ret;
}

static int layer_ep_get_unexp_stats(struct layer_ep *ep, void *optval, size_t *optlen)
{
	struct fi_layer_unexp_stats *stats = optval;

	if (!optval || !optlen)
		return -FI_EINVAL;
	if (*optlen < sizeof(*stats)) {
		*optlen = sizeof(*stats);
		return -FI_ETOOSMALL;
	}
	util_lock_acquire(&ep->lock);
	*stats = (struct fi_layer_unexp_stats) {
		.bytes = ep->unexp_bytes,
		.max_bytes = ep->unexp_max_bytes,
		.msg_cnt = ep->unexp_cnt,
		.limit = ep->unexp_limit,
		.buf_bytes = ep->buf_pool.elem_size,
		.record_bytes = ep->rec_pool.elem_size,
		.stall_cnt = ep->stall_cnt,
		.pace_cnt = ep->pace_cnt,
	};
	util_lock_release(&ep->lock);
	*optlen = sizeof(*stats);
	return 0;
}

static int layer_ep_getopt(fid_t fid, int level, int optname, void *optval, size_t *optlen)
{
	struct layer_ep *ep = container_of(fid, struct layer_ep, ep_fid.fid);
	size_t size;

	if (level != FI_OPT_ENDPOINT)
		return -FI_ENOPROTOOPT;
	if (optname == FI_OPT_LAYER_UNEXP_STATS)
		return layer_ep_get_unexp_stats(ep, optval, optlen);
	if (optname == FI_OPT_MIN_MULTI_RECV)
		size = sizeof(size_t);
	else if (optname == FI_OPT_LAYER_AUTH_DROPPED)
		size = sizeof(uint64_t);
	else if (optname == FI_OPT_LAYER_DIRECT_RECV)
		size = sizeof(int);
	else
		return -FI_ENOPROTOOPT;
	if (!optval || !optlen)
		return -FI_EINVAL;
	if (*optlen < size) {
		*optlen = size;
		return -FI_ETOOSMALL;
	}
	if (optname == FI_OPT_MIN_MULTI_RECV) {
		*(size_t *) optval = ep->min_multi_recv;
	} else if (optname == FI_OPT_LAYER_DIRECT_RECV) {
		*(int *) optval = ep->domain->has_direct_recv;
	} else {
		util_lock_acquire(&ep->lock);
		*(uint64_t *) optval = ep->auth_dropped_cnt;
		util_lock_release(&ep->lock);
	}
	*optlen = size;
	return 0;
}

static int layer_ep_setopt(fid_t fid, int level, int optname, const void *optval,
			   size_t optlen)
{
	struct layer_ep *ep = container_of(fid, struct layer_ep, ep_fid.fid);

	if (level != FI_OPT_ENDPOINT)
		return -FI_ENOPROTOOPT;
	/* what the provider counts: read only */
	if (optname == FI_OPT_LAYER_AUTH_DROPPED || optname == FI_OPT_LAYER_UNEXP_STATS ||
	    optname == FI_OPT_LAYER_DIRECT_RECV)
		return -FI_EOPNOTSUPP;
	if (optname != FI_OPT_MIN_MULTI_RECV)
		return -FI_ENOPROTOOPT;
	if (!optval || optlen != sizeof(size_t))
		return -FI_EINVAL;
	ep->min_multi_recv = *(const size_t *) optval;
	return 0;
}

static ssize_t layer_ep_rx_size_left(struct fid_ep *ep_fid)
{
	struct layer_ep *ep = container_of(ep_fid, struct layer_ep, ep_fid);

	if (!ep->is_enabled)
		return -FI_EOPBADSTATE;
	return (ssize_t) (ep->rx_size - ep->rx_used);
}

static ssize_t layer_ep_tx_size_left(struct fid_ep *ep_fid)
{
	struct layer_ep *ep = container_of(ep_fid, struct layer_ep, ep_fid);

	if (!ep->is_enabled)
		return -FI_EOPBADSTATE;
	return (ssize_t) (ep->tx_size - ep->tx_used);
}

static int layer_ep_no_ctx(struct fid_ep *sep, int index, struct fi_tx_attr *attr,
			   struct fid_ep **ep, void *context)
{
	return -FI_ENOSYS;
}

static int layer_ep_no_rx_ctx(struct fid_ep *sep, int index, struct fi_rx_attr *attr,
			      struct fid_ep **ep, void *context)
{
	return -FI_ENOSYS;
}

static struct fi_ops_ep layer_ep_ops = {
	.size = sizeof(struct fi_ops_ep),
	.cancel = layer_ep_cancel,
	.getopt = layer_ep_getopt,
	.setopt = layer_ep_setopt,
	.tx_ctx = layer_ep_no_ctx,
	.rx_ctx = layer_ep_no_rx_ctx,
	.rx_size_left = layer_ep_rx_size_left,
	.tx_size_left = layer_ep_tx_size_left,
};

static int layer_ep_getname(fid_t fid, void *addr, size_t *addrlen)
{
	struct layer_ep *ep = container_of(fid, struct layer_ep, ep_fid.fid);
	size_t len;

	if (!addrlen)
		return -FI_EINVAL;
	if (!ep->is_enabled)
		return -FI_EOPBADSTATE;
	len = *addrlen;
	*addrlen = ep->addrlen;
	if (len < ep->addrlen)
		return -FI_ETOOSMALL;
	if (!addr)
		return -FI_EINVAL;
	memcpy(addr, ep->addr, ep->addrlen);
	return 0;
}

static int layer_ep_setname(fid_t fid, void *addr, size_t addrlen)
{
	struct layer_ep *ep = container_of(fid, struct layer_ep, ep_fid.fid);
	void *copy;

	if (!addr || addrlen != ep->domain->addrlen)
		return -FI_EINVAL;
	if (ep->is_enabled)
		return -FI_EOPBADSTATE;
	copy = malloc(addrlen);
	if (!copy)
		return -FI_ENOMEM;
	memcpy(copy, addr, addrlen);
	free(ep->core_info->src_addr);
	ep->core_info->src_addr = copy;
	ep->core_info->src_addrlen = addrlen;
	return 0;
}

static int layer_no_getpeer(struct fid_ep *ep, void *addr, size_t *addrlen)
{
	return -FI_ENOSYS;
}

static int layer_no_connect(struct fid_ep *ep, const void *addr, const void *param,
			    size_t paramlen)
{
	return -FI_ENOSYS;
}

static int layer_no_listen(struct fid_pep *pep)
{
	return -FI_ENOSYS;
}

static int layer_no_accept(struct fid_ep *ep, const void *param, size_t paramlen)
{
	return -FI_ENOSYS;
}

static int layer_no_reject(struct fid_pep *pep, fid_t handle, const void *param,
			   size_t paramlen)
{
	return -FI_ENOSYS;
}

static int layer_no_shutdown(struct fid_ep *ep, uint64_t flags)
{
	return -FI_ENOSYS;
}

static int layer_no_join(struct fid_ep *ep, const void *addr, uint64_t flags,
			 struct fid_mc **mc, void *context)
{
	return -FI_ENOSYS;
}

static struct fi_ops_cm layer_ep_cm_ops = {
	.size = sizeof(struct fi_ops_cm),
	.setname = layer_ep_setname,
	.getname = layer_ep_getname,
	.getpeer = layer_no_getpeer,
	.connect = layer_no_connect,
	.listen = layer_no_listen,
	.accept = layer_no_accept,
	.reject = layer_no_reject,
	.shutdown = layer_no_shutdown,
	.join = layer_no_join,
};

/*
 * The core CQ gets a wait fd only once a CQ or counter that can block is bound: with
 * FI_WAIT_FD, tcp keeps an epoll set of every socket, and each message then costs an epoll
 * wakeup in the sender's kernel path, epoll_wait instead of poll on each progress call and
 * a signal write that wakes the set (measured: ~1 us of an 8-byte half round trip over
 * tcp). Without one, tcp polls its sockets with poll(), as under rxm. Binding comes before
 * fi_enable (layer_ep_bind refuses it after), so the core CQ is replaced before any core
 * endpoint is bound to it.
 */
static int layer_ep_open_core_cq(struct layer_ep *ep, enum fi_wait_obj wait_obj,
				 struct fid_cq **cq)
{
	struct fi_cq_attr cq_attr = {
		.size = LAYER_CORE_CQ_SIZE,
		.format = FI_CQ_FORMAT_MSG,
		.wait_obj = wait_obj,
	};

	return fi_cq_open(ep->domain->core_domain, &cq_attr, cq, ep);
}

int layer_ep_core_cq_wait(struct layer_ep *ep)
{
	struct fid_cq *cq;
	int ret = 0;

	util_lock_acquire(&ep->lock);
	if (ep->core_cq_fd >= 0 || ep->is_enabled)
		goto out;
	ret = layer_ep_open_core_cq(ep, FI_WAIT_FD, &cq);
	if (ret) {
		/* A core without wait objects (shm): blocking reads poll it. */
		ret = ret == -FI_ENOSYS ? 0 : ret;
		goto out;
	}
	ret = fi_control(&cq->fid, FI_GETWAIT, &ep->core_cq_fd);
	if (ret) {
		ep->core_cq_fd = -1;
		fi_close(&cq->fid);
		goto out;
	}
	fi_close(&ep->core_cq->fid);
	ep->core_cq = cq;
out:
	util_lock_release(&ep->lock);
	return ret;
}

static int layer_ep_open_core(struct layer_ep *ep, const struct fi_info *info)
{
	struct fi_eq_attr eq_attr = { .wait_obj = FI_WAIT_FD };
	struct layer_domain *domain = ep->domain;
	int ret;

	ep->core_info = fi_dupinfo(domain->core_info);
	if (!ep->core_info)
		return -FI_ENOMEM;
	/* Peers are named per send; the core's endpoints take no destination from the info. */
	free(ep->core_info->dest_addr);
	ep->core_info->dest_addr = NULL;
	ep->core_info->dest_addrlen = 0;
	if (info->src_addr && info->src_addrlen == domain->addrlen) {
		free(ep->core_info->src_addr);
		ep->core_info->src_addr = malloc(info->src_addrlen);
		if (!ep->core_info->src_addr)
			return -FI_ENOMEM;
		memcpy(ep->core_info->src_addr, info->src_addr, info->src_addrlen);
		ep->core_info->src_addrlen = info->src_addrlen;
	}
	ep->core_iov_limit = UTIL_MIN(ep->core_info->tx_attr->iov_limit, LAYER_IOV_LIMIT + 1);
	ep->core_inject_size = ep->core_info->tx_attr->inject_size;
	ep->core_has_virt_addr = ep->core_info->domain_attr->mr_mode & FI_MR_VIRT_ADDR;
	ep->core_has_prov_key = ep->core_info->domain_attr->mr_mode & FI_MR_PROV_KEY;

	/* Without a wait fd until an object that blocks is bound (layer_ep_core_cq_wait). */
	ret = layer_ep_open_core_cq(ep, FI_WAIT_NONE, &ep->core_cq);
	if (ret)
		return ret;
	ep->core_cq_fd = -1;
	ret = fi_eq_open(domain->fabric->core_fabric, &eq_attr, &ep->core_eq, ep);
	if (ret)
		goto err_close_cq;
	ret = fi_control(&ep->core_eq->fid, FI_GETWAIT, &ep->core_eq_fd);
	if (ret)
		goto err_close_eq;
	return 0;

err_close_eq:
	fi_close(&ep->core_eq->fid);
err_close_cq:
	fi_close(&ep->core_cq->fid);
	return ret;
}

int layer_ep_open(struct fid_domain *domain_fid, struct fi_info *info, struct fid_ep **ep_fid,
		  void *context)
{
	struct layer_domain *domain;
	struct layer_ep *ep;
	int ret;

	if (!domain_fid || !info || !ep_fid || !info->ep_attr || !info->tx_attr ||
	    !info->rx_attr)
		return -FI_EINVAL;
	if (info->ep_attr->type != FI_EP_RDM)
		return -FI_EINVAL;
	if (info->caps & ~(LAYER_EP_CAPS | LAYER_DOMAIN_CAPS))
		return -FI_EINVAL;
	domain = container_of(domain_fid, struct layer_domain, domain_fid);

	ep = calloc(1, sizeof(*ep));
	if (!ep)
		return -FI_ENOMEM;
	ep->domain = domain;
	util_lock_init(&ep->lock, domain->is_thread_safe);
	ep->caps = layer_default_caps(info->caps ? info->caps : LAYER_EP_CAPS);
	ep->tx_op_flags = info->tx_attr->op_flags;
	ep->rx_op_flags = info->rx_attr->op_flags;
	ep->tx_size = info->tx_attr->size ? info->tx_attr->size : layer_settings.tx_size;
	ep->rx_size = info->rx_attr->size ? info->rx_attr->size : layer_settings.rx_size;
	ep->min_multi_recv = 64;
	ep->core = domain->core_info->ep_attr->type == FI_EP_RDM ? &layer_core_rdm_ops :
								   &layer_core_msg_ops;
	/*
	 * Direct receive posts the header only, and a payload that waits for its completion
	 * gets an allocation of its size unless a record's room holds it: buffers are records.
	 */
	if (domain->has_direct_recv)
		ep->buf_size = LAYER_RECORD_SIZE;
	else
		ep->buf_size = sizeof(struct layer_hdr) + UTIL_MAX(layer_settings.eager_size,
								   (size_t) LAYER_INJECT_SIZE);
	ep->direct_max = UTIL_MAX(layer_settings.direct_eager_size, ep->buf_size);
	ret = layer_auth_init(ep, info);
	if (ret)
		goto err_free_ep;
	util_dlist_init(&ep->conns);
	util_dlist_init(&ep->closed_conns);
	util_dlist_init(&ep->draining_conns);
	util_dlist_init(&ep->rdm.posted_bufs);
	util_dlist_init(&ep->posted_rx);
	util_dlist_init(&ep->unexp_msgs);

	ret = util_bufpool_init(&ep->tx_pool, sizeof(struct layer_tx), 64, 64, 0);
	if (ret)
		goto err_free_ep;
	ret = util_bufpool_init(&ep->rx_pool, sizeof(struct layer_rx), 64, 64, 0);
	if (ret)
		goto err_fini_tx_pool;
	ret = util_bufpool_init(&ep->buf_pool, sizeof(struct layer_rx_buf) + ep->buf_size, 64,
				layer_settings.rx_buf_cnt, 0);
	if (ret)
		goto err_fini_rx_pool;
	ret = util_bufpool_init(&ep->rec_pool, sizeof(struct layer_rx_buf) + LAYER_RECORD_SIZE,
				0, 64, 0);
	if (ret)
		goto err_fini_buf_pool;
	ep->unexp_limit = layer_settings.unexp_max;
	ret = util_tagm_init(&ep->tagm, 0);
	if (ret)
		goto err_fini_rec_pool;
	ret = layer_ep_open_core(ep, info);
	if (ret)
		goto err_fini_tagm;

	ep->ep_fid.fid.fclass = FI_CLASS_EP;
	ep->ep_fid.fid.context = context;
	ep->ep_fid.fid.ops = &layer_ep_fi_ops;
	ep->ep_fid.ops = &layer_ep_ops;
	ep->ep_fid.cm = &layer_ep_cm_ops;
	ep->ep_fid.msg = &layer_msg_ops;
	ep->ep_fid.rma = &layer_no_rma_ops;
	ep->ep_fid.tagged = &layer_tagged_ops;
	ep->ep_fid.atomic = &layer_no_atomic_ops;
	atomic_fetch_add(&domain->ref, 1);
	*ep_fid = &ep->ep_fid;
	return 0;

err_fini_tagm:
	util_tagm_fini(&ep->tagm);
err_fini_rec_pool:
	fi_freeinfo(ep->core_info);
	util_bufpool_fini(&ep->rec_pool);
err_fini_buf_pool:
	util_bufpool_fini(&ep->buf_pool);
err_fini_rx_pool:
	util_bufpool_fini(&ep->rx_pool);
err_fini_tx_pool:
	util_bufpool_fini(&ep->tx_pool);
err_free_ep:
	util_lock_fini(&ep->lock);
	free(ep);
	return ret;
}
