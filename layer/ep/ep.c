/*
 * The reliable-datagram endpoint object (ep.h): open, bind, enable, close, options,
 * cancellation and progress. It builds the stack (core adapter, connections, transmit and
 * receive paths) and wires their upcalls, chooses its entry points' variant, and runs the
 * stack's progress for the CQs and counters bound to it.
 */
#include "config.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "layer/ep/ep.h"
#include "layer/nosys.h"
#include "layer/rma/rma.h"
#include "rdma/fi_ext_layer.h"

/* ---- progress ---- */

/* The core's progress, then the answers to the writes it placed meanwhile (no core call may
 * be made from within it). */
static void layer_ep_core_progress(struct layer_ep *ep)
{
	ep->core->ops->progress(ep->core);
	if (ep->proto.taken_cnt)
		layer_rma_answer_taken(&ep->proto);
}

/* Completions the endpoint's CQs ever took (from any endpoint bound to them). */
static size_t layer_ep_comp_cnt(const struct layer_ep *ep)
{
	const struct layer_cq *tx_cq = ep->proto.tx_cq, *rx_cq = ep->proto.rx_cq;
	size_t cnt = 0;

	if (tx_cq)
		cnt = util_cq_write_count(&tx_cq->util);
	if (rx_cq && rx_cq != tx_cq)
		cnt += util_cq_write_count(&rx_cq->util);
	return cnt;
}

static inline bool layer_cq_may_sleep(const struct layer_cq *cq)
{
	return cq && util_cq_may_sleep(&cq->util);
}

static inline bool layer_cntr_may_sleep(const struct layer_cntr *cntr)
{
	return cntr && util_cntr_may_sleep(&cntr->util);
}

/* Whether a thread may be asleep on something the endpoint reports to: it would not send
 * what progress kept. */
static bool layer_ep_may_sleep(const struct layer_ep *ep)
{
	const struct layer_proto *proto = &ep->proto;

	return layer_cq_may_sleep(proto->tx_cq) || layer_cq_may_sleep(proto->rx_cq) ||
	       layer_cntr_may_sleep(proto->send_cntr) || layer_cntr_may_sleep(proto->recv_cntr) ||
	       layer_cntr_may_sleep(proto->read_cntr) || layer_cntr_may_sleep(proto->write_cntr) ||
	       layer_cntr_may_sleep(proto->rem_read_cntr) ||
	       layer_cntr_may_sleep(proto->rem_write_cntr);
}

/* Sends what the core gathered: false when some of it must wait (the core is busy). */
static bool layer_ep_flush(struct layer_ep *ep)
{
	/* progress runs this twice a call: the channels are walked only when one has work */
	return !ep->core->staged_cnt || ep->core->ops->flush(ep->core);
}

/*
 * Progress may keep the answers it sends to reads, writes and atomics (tx->may_keep: the
 * target's application hears nothing of those requests) in the rings' stage: when it handed
 * the application completions, until the endpoint's next call (its next send, or its next
 * progress, which starts with them), else to its end. The application usually answers a
 * completion with a send, and the two then leave in one write of the core (over tcp, in one
 * ring slot: core/ring.h). Not while a thread may be asleep on the endpoint's CQs or counters
 * (it would not send them), and a caller about to sleep sends them first (trywait).
 */
static void layer_ep_run_progress(struct layer_ep *ep, bool may_keep)
{
	size_t comp_cnt;

	if (unlikely(!ep->is_enabled))
		return;
	(void) layer_ep_flush(ep);
	comp_cnt = layer_ep_comp_cnt(ep);
	ep->core->hold = true;
	layer_ep_core_progress(ep);
	if (unlikely(ep->proto.has_pending))
		layer_proto_progress(&ep->proto);
	if (unlikely(layer_conns_has_closed(&ep->conns))) {
		/* the completions the core flushed for failed connections first */
		if (!util_dlist_empty(&ep->conns.closed))
			layer_ep_core_progress(ep);
		layer_conns_reap(&ep->conns);
	}
	layer_conns_watch(&ep->conns);
	layer_unexp_check(&ep->proto);
	ep->core->hold = false;
	if (!may_keep || layer_ep_comp_cnt(ep) == comp_cnt || layer_ep_may_sleep(ep))
		(void) layer_ep_flush(ep);
}

void layer_ep_progress(struct layer_ep *ep)
{
	layer_progress_called(&ep->member);
	layer_ep_lock(ep);
	/* with a progress thread the application's next call may be far off */
	layer_ep_run_progress(ep, !ep->domain->progress_thread);
	layer_ep_unlock(ep);
}

static void layer_ep_progress_hook(void *arg)
{
	layer_ep_progress(arg);
}

/* The domain's: the progress thread's and fi_mr_bind counters'. Keeps nothing for a next
 * call, which may not come. */
static void layer_ep_domain_progress_hook(void *arg)
{
	struct layer_ep *ep = arg;

	layer_ep_lock(ep);
	layer_ep_run_progress(ep, false);
	layer_ep_unlock(ep);
}

/* 0 when the core has nothing pending and the caller may sleep on the wait fds. */
static int layer_ep_trywait_hook(void *arg)
{
	struct layer_ep *ep = arg;
	int ret = -FI_EAGAIN;

	layer_ep_lock(ep);
	/* Draining connections wait on core completions, which wake the caller up. The core's
	 * trywait reads and sends (acknowledgements) as progress does: under the lock, as
	 * another thread may progress the endpoint meanwhile. */
	if (!ep->proto.has_pending && util_dlist_empty(&ep->conns.closed) && layer_ep_flush(ep))
		ret = ep->core->ops->trywait(ep->core);
	layer_ep_unlock(ep);
	return ret;
}

/* ---- the AV's notices ---- */

static void layer_ep_on_av_insert(void *arg)
{
	struct layer_ep *ep = arg;

	layer_ep_lock(ep);
	layer_conns_av_inserted(&ep->conns);
	layer_ep_unlock(ep);
}

/*
 * An AV entry was removed: what waits on that peer completes with an error instead of
 * reaching an address that may be reused. Sends go with their connection; directed
 * receives whose source is gone complete with FI_EADDRNOTAVAIL, and so do the collective
 * groups it was a member of.
 */
static void layer_ep_on_av_remove(void *arg, size_t index)
{
	struct layer_ep *ep = arg;

	layer_ep_lock(ep);
	layer_conns_av_removed(&ep->conns, index);
	layer_rx_av_removed(&ep->proto);
	layer_coll_av_removed(&ep->coll);
	layer_ep_unlock(ep);
}

/* ---- binding ---- */

/*
 * The endpoint's progress joins an object's: its hook in the object's progress set, and,
 * when the object can block, the core's wait fds in its wait set (the core CQ gets one then;
 * binding comes before fi_enable, so before any core endpoint uses that CQ).
 */
static int layer_ep_bind_progress(struct layer_ep *ep, struct util_progress_set *set,
				  struct util_wait *wait, atomic_int *ref)
{
	struct layer_ep_bind *bind = &ep->binds[ep->bind_cnt];
	struct layer_core *core = ep->core;
	int ret;

	if (ep->bind_cnt == LAYER_EP_MAX_BINDS)
		return -FI_EINVAL;
	if (wait) {
		ret = layer_core_cq_wait(core);
		if (ret)
			return ret;
		/* a core CQ without a wait fd (shm) is polled: its trywait never says sleep */
		ret = core->cq_fd >= 0 ? util_wait_add_fd(wait, core->cq_fd) : 0;
		if (!ret)
			ret = util_wait_add_fd(wait, core->eq_fd);
		if (ret) {
			if (core->cq_fd >= 0)
				util_wait_del_fd(wait, core->cq_fd);
			return ret;
		}
	}
	bind->hook.progress = (struct util_progress) {
		.progress = layer_ep_progress_hook,
		.trywait = layer_ep_trywait_hook,
		.arg = ep,
	};
	bind->set = set;
	bind->wait = wait;
	bind->ref = ref;
	util_progress_set_add(set, &bind->hook);
	atomic_fetch_add(ref, 1);
	ep->bind_cnt++;
	return 0;
}

static void layer_ep_unbind_progress(struct layer_ep *ep)
{
	struct layer_ep_bind *bind;
	size_t i;

	for (i = 0; i < ep->bind_cnt; i++) {
		bind = &ep->binds[i];
		util_progress_set_del(bind->set, &bind->hook);
		if (bind->wait) {
			if (ep->core->cq_fd >= 0)
				util_wait_del_fd(bind->wait, ep->core->cq_fd);
			util_wait_del_fd(bind->wait, ep->core->eq_fd);
		}
		atomic_fetch_sub(bind->ref, 1);
	}
	ep->bind_cnt = 0;
}

static int layer_ep_bind_cq(struct layer_ep *ep, struct layer_cq *cq, uint64_t flags)
{
	struct layer_proto *proto = &ep->proto;
	int ret;

	if (flags & ~(FI_TRANSMIT | FI_RECV | FI_SELECTIVE_COMPLETION))
		return -FI_EBADFLAGS;
	if (!(flags & (FI_TRANSMIT | FI_RECV)))
		return -FI_EINVAL;
	if (((flags & FI_TRANSMIT) && proto->tx_cq) || ((flags & FI_RECV) && proto->rx_cq))
		return -FI_EINVAL;
	if (proto->tx_cq != cq && proto->rx_cq != cq) {
		ret = layer_ep_bind_progress(ep, &cq->progress,
					     cq->util.wait_obj != FI_WAIT_NONE ? &cq->util.wait :
										 NULL,
					     &cq->util.ref);
		if (ret)
			return ret;
	}
	if (flags & FI_TRANSMIT) {
		proto->tx_cq = cq;
		proto->tx_selective = flags & FI_SELECTIVE_COMPLETION;
	}
	if (flags & FI_RECV) {
		proto->rx_cq = cq;
		proto->rx_selective = flags & FI_SELECTIVE_COMPLETION;
	}
	return 0;
}

static int layer_ep_bind_cntr(struct layer_ep *ep, struct layer_cntr *cntr, uint64_t flags)
{
	struct layer_proto *proto = &ep->proto;
	struct {
		uint64_t flag;
		struct layer_cntr **slot;
	} slots[] = {
		{ FI_SEND, &proto->send_cntr },
		{ FI_RECV, &proto->recv_cntr },
		{ FI_READ, &proto->read_cntr },
		{ FI_WRITE, &proto->write_cntr },
		{ FI_REMOTE_READ, &proto->rem_read_cntr },
		{ FI_REMOTE_WRITE, &proto->rem_write_cntr },
	};
	const uint64_t rma_flags = FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE;
	uint64_t counted = flags;
	bool is_bound = false;
	size_t i;
	int ret;

	if (flags & ~(FI_SEND | FI_RECV | rma_flags))
		return -FI_EBADFLAGS;
	if (!flags)
		return -FI_EINVAL;
	/*
	 * Events the endpoint cannot have are accepted and never counted (fi_cntr(3) allows
	 * the binding; rxm takes it so): RMA and atomic ones without FI_RMA or FI_ATOMIC,
	 * remote ones without FI_RMA_EVENT.
	 */
	if (!(ep->caps & (FI_RMA | FI_ATOMIC)))
		counted &= ~rma_flags;
	if (!(ep->caps & FI_RMA_EVENT))
		counted &= ~(FI_REMOTE_READ | FI_REMOTE_WRITE);
	for (i = 0; i < UTIL_ARRAY_SIZE(slots); i++) {
		if ((counted & slots[i].flag) && *slots[i].slot)
			return -FI_EINVAL;
		is_bound |= *slots[i].slot == cntr;
	}
	if (!is_bound) {
		ret = layer_ep_bind_progress(ep, &cntr->progress,
					     cntr->util.wait_obj != FI_WAIT_NONE ?
					     &cntr->util.wait : NULL, &cntr->util.ref);
		if (ret)
			return ret;
	}
	for (i = 0; i < UTIL_ARRAY_SIZE(slots); i++) {
		if (counted & slots[i].flag)
			*slots[i].slot = cntr;
	}
	return 0;
}

static int layer_ep_bind_av(struct layer_ep *ep, struct layer_av *av, uint64_t flags)
{
	if (flags)
		return -FI_EBADFLAGS;
	if (ep->av || av->domain != ep->domain)
		return -FI_EINVAL;
	ep->av_listener = (struct layer_av_listener) {
		.on_insert = layer_ep_on_av_insert,
		.on_remove = layer_ep_on_av_remove,
		.arg = ep,
	};
	layer_av_add_listener(av, &ep->av_listener);
	ep->av = av;
	atomic_fetch_add(&av->ref, 1);
	return 0;
}

static int layer_ep_bind(struct fid *fid, struct fid *bfid, uint64_t flags)
{
	struct layer_ep *ep = container_of(fid, struct layer_ep, ep_fid.fid);

	if (!bfid)
		return -FI_EINVAL;
	/*
	 * Binding is set-up, before fi_enable; it does not take the endpoint's lock because
	 * joining a CQ's progress set takes the set's lock, which progress holds while taking
	 * the endpoint's.
	 */
	if (ep->is_enabled)
		return -FI_EOPBADSTATE;
	switch (bfid->fclass) {
	case FI_CLASS_AV:
		return layer_ep_bind_av(ep, container_of(bfid, struct layer_av, av_fid.fid), flags);
	case FI_CLASS_CQ:
		return layer_ep_bind_cq(ep, container_of(bfid, struct layer_cq, util.cq_fid.fid),
					flags);
	case FI_CLASS_CNTR:
		return layer_ep_bind_cntr(ep, container_of(bfid, struct layer_cntr,
							   util.cntr_fid.fid), flags);
	case FI_CLASS_EQ:
		/* Connection events are the provider's business; the EQ is held for AV events. */
		if (flags)
			return -FI_EBADFLAGS;
		if (ep->eq)
			return -FI_EINVAL;
		ep->eq = container_of(bfid, struct layer_eq, util.eq_fid.fid);
		atomic_fetch_add(&ep->eq->util.ref, 1);
		ep->coll.eq = ep->eq; /* FI_JOIN_COMPLETE */
		return 0;
	default:
		return -FI_EINVAL;
	}
}

/* ---- enable, control, close ---- */

static int layer_ep_enable(struct layer_ep *ep)
{
	struct layer_proto *proto = &ep->proto;
	int ret;

	if (ep->is_enabled)
		return -FI_EOPBADSTATE;
	if (!ep->av)
		return -FI_ENOAV;
	if (((ep->caps & FI_SEND) && !proto->tx_cq && !proto->send_cntr) ||
	    ((ep->caps & FI_RECV) && !proto->rx_cq && !proto->recv_cntr))
		return -FI_ENOCQ;
	if (ep->av->addrlen != ep->domain->addrlen)
		return -FI_EINVAL;
	/* the progress thread sleeps on the core's wait fds: they exist before the core
	 * endpoints use the core CQ */
	if (ep->domain->progress_thread) {
		ret = layer_core_cq_wait(ep->core);
		if (ret)
			return ret;
	}
	ret = layer_conns_enable(&ep->conns, ep->av);
	if (ret)
		return ret;
	ret = ep->core->ops->enable(ep->core, proto->tx_size);
	if (ret) {
		layer_auth_fini(&ep->conns.auth, ep->av);
		ep->conns.av = NULL;
		return ret;
	}
	proto->av = ep->av;
	ep->coll.av = ep->av;
	ep->coll.self_addr = ep->core->addr;
	ep->coll.addrlen = ep->core->addrlen;
	ep->is_enabled = true;
	return 0;
}

/* An enabled endpoint joins the domain's progress (not under its lock: the progress thread
 * holds the domain's set while it takes the endpoints'). */
static void layer_ep_join_domain(struct layer_ep *ep)
{
	layer_progress_member_init(&ep->member, ep->core->cq_fd, ep->core->eq_fd,
				   ep->core->has_domain_wait);
	ep->member.hook.progress = (struct util_progress) {
		.progress = layer_ep_domain_progress_hook,
		.trywait = layer_ep_trywait_hook,
		.arg = ep,
	};
	util_progress_set_add(&ep->domain->eps, &ep->member.hook);
}

static int layer_ep_setopsflag(struct layer_ep *ep, uint64_t *flags)
{
	if (!flags)
		return -FI_EINVAL;
	if ((*flags & FI_TRANSMIT) && !(*flags & FI_RECV)) {
		if (*flags & ~(FI_TRANSMIT | LAYER_TX_OP_FLAGS))
			return -FI_EBADFLAGS;
		ep->tx_op_flags = *flags & ~FI_TRANSMIT;
		return 0;
	}
	if ((*flags & FI_RECV) && !(*flags & FI_TRANSMIT)) {
		if (*flags & ~(FI_RECV | LAYER_RX_OP_FLAGS))
			return -FI_EBADFLAGS;
		ep->rx_op_flags = *flags & ~FI_RECV;
		return 0;
	}
	return -FI_EINVAL;
}

static int layer_ep_control(struct fid *fid, int command, void *arg)
{
	struct layer_ep *ep = container_of(fid, struct layer_ep, ep_fid.fid);
	uint64_t *flags = arg;
	int ret = 0;

	layer_ep_lock(ep);
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
		ret = layer_ep_setopsflag(ep, flags);
		break;
	default:
		ret = -FI_ENOSYS;
		break;
	}
	layer_ep_unlock(ep);
	if (command == FI_ENABLE && !ret)
		layer_ep_join_domain(ep);
	return ret;
}

/*
 * Close: sends the application was told are done (an inject completes once copied) may still
 * wait in the layer, for their connection or for room in the core; progress runs until none
 * does, for at most layer_close_wait_ms(): the peer has to progress meanwhile for a
 * connection to open. What still waits then is dropped.
 */
static void layer_ep_linger(struct layer_ep *ep)
{
	const struct timespec pause = { .tv_nsec = 20000 };
	uint64_t deadline = util_now_ms() + layer_close_wait_ms();

	while (layer_conns_has_queued(&ep->conns) && util_now_ms() < deadline) {
		layer_ep_run_progress(ep, false);
		(void) nanosleep(&pause, NULL);
	}
}

static int layer_ep_close(struct fid *fid)
{
	struct layer_ep *ep = container_of(fid, struct layer_ep, ep_fid.fid);

	if (layer_coll_busy(&ep->coll)) {
		FI_WARN(&layer_prov, FI_LOG_EP_CTRL, "close: collective groups still open\n");
		return -FI_EBUSY;
	}
	/* Out of the objects whose reads drive progress first; the AV's listener mutex comes
	 * before the endpoint's lock. */
	if (ep->av)
		layer_av_del_listener(ep->av, &ep->av_listener);
	layer_ep_unbind_progress(ep);
	if (ep->is_enabled) {
		util_progress_set_del(&ep->domain->eps, &ep->member.hook);
		layer_progress_member_fini(ep->domain->progress_thread, &ep->member);
	}

	layer_ep_lock(ep);
	if (ep->is_enabled) {
		layer_ep_linger(ep);
		/* what the last progress kept goes while it can (answers a peer may wait for) */
		(void) layer_ep_flush(ep);
	}
	/* the core objects go first: nothing completes after, everything is freed as it is */
	ep->core->ops->close(ep->core);
	layer_conns_close(&ep->conns);
	layer_proto_fini(&ep->proto);
	layer_coll_fini(&ep->coll);
	layer_ep_unlock(ep);
	layer_core_free(ep->core);

	if (ep->av)
		atomic_fetch_sub(&ep->av->ref, 1);
	if (ep->eq)
		atomic_fetch_sub(&ep->eq->util.ref, 1);
	pthread_mutex_destroy(&ep->lock);
	atomic_fetch_sub(&ep->domain->ref, 1);
	free(ep);
	return 0;
}

static struct fi_ops layer_ep_fi_ops = {
	.size = sizeof(struct fi_ops),
	.close = layer_ep_close,
	.bind = layer_ep_bind,
	.control = layer_ep_control,
	.ops_open = layer_no_ops_open,
};

/* ---- fi_ops_ep ---- */

static ssize_t layer_ep_cancel(fid_t fid, void *context)
{
	struct layer_ep *ep = container_of(fid, struct layer_ep, ep_fid.fid);
	int ret;

	layer_ep_lock(ep);
	ret = layer_rx_cancel(&ep->proto, context);
	layer_ep_unlock(ep);
	return ret;
}

static int layer_ep_get_unexp_stats(struct layer_ep *ep, void *optval, size_t *optlen)
{
	struct fi_layer_unexp_stats *stats = optval;
	struct layer_unexp *unexp = &ep->proto.unexp;

	if (!optval || !optlen)
		return -FI_EINVAL;
	if (*optlen < sizeof(*stats)) {
		*optlen = sizeof(*stats);
		return -FI_ETOOSMALL;
	}
	layer_ep_lock(ep);
	*stats = (struct fi_layer_unexp_stats) {
		.bytes = unexp->bytes,
		.max_bytes = unexp->max_bytes,
		.msg_cnt = unexp->cnt,
		.limit = unexp->limit,
		.buf_bytes = ep->core->buf_pool.elem_size,
		.record_bytes = unexp->rec_pool.elem_size,
		.stall_cnt = unexp->stall_cnt,
		.pace_cnt = unexp->pace_cnt,
	};
	layer_ep_unlock(ep);
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
	else if (optname == FI_OPT_LAYER_AUTH_DROPPED || optname == FI_OPT_LAYER_DROPPED ||
		 optname == FI_OPT_LAYER_CONN_COUNT || optname == FI_OPT_LAYER_RING_COUNT)
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
		*(size_t *) optval = ep->proto.min_multi_recv;
	} else if (optname == FI_OPT_LAYER_DIRECT_RECV) {
		*(int *) optval = ep->domain->has_direct_recv;
	} else {
		layer_ep_lock(ep);
		*(uint64_t *) optval = optname == FI_OPT_LAYER_DROPPED ? ep->core->dropped_cnt :
				       optname == FI_OPT_LAYER_CONN_COUNT ?
				       layer_conns_count(&ep->conns) :
				       optname == FI_OPT_LAYER_RING_COUNT ?
				       (ep->core->rings ? ep->core->rings->cnt : 0) :
				       ep->core->refused_cnt;
		layer_ep_unlock(ep);
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
	    optname == FI_OPT_LAYER_DIRECT_RECV || optname == FI_OPT_LAYER_DROPPED ||
	    optname == FI_OPT_LAYER_CONN_COUNT || optname == FI_OPT_LAYER_RING_COUNT)
		return -FI_EOPNOTSUPP;
	if (optname != FI_OPT_MIN_MULTI_RECV)
		return -FI_ENOPROTOOPT;
	if (!optval || optlen != sizeof(size_t))
		return -FI_EINVAL;
	layer_ep_lock(ep);
	ep->proto.min_multi_recv = *(const size_t *) optval;
	layer_ep_unlock(ep);
	return 0;
}

static ssize_t layer_ep_rx_size_left(struct fid_ep *ep_fid)
{
	struct layer_ep *ep = container_of(ep_fid, struct layer_ep, ep_fid);

	if (!ep->is_enabled)
		return -FI_EOPBADSTATE;
	return (ssize_t) (ep->proto.rx_size - ep->proto.rx_used);
}

static ssize_t layer_ep_tx_size_left(struct fid_ep *ep_fid)
{
	struct layer_ep *ep = container_of(ep_fid, struct layer_ep, ep_fid);

	if (!ep->is_enabled)
		return -FI_EOPBADSTATE;
	return (ssize_t) (ep->proto.tx_size - ep->proto.tx_used);
}

static struct fi_ops_ep layer_ep_ops = {
	.size = sizeof(struct fi_ops_ep),
	.cancel = layer_ep_cancel,
	.getopt = layer_ep_getopt,
	.setopt = layer_ep_setopt,
	.tx_ctx = layer_no_tx_ctx,
	.rx_ctx = layer_no_rx_ctx,
	.rx_size_left = layer_ep_rx_size_left,
	.tx_size_left = layer_ep_tx_size_left,
};

/* ---- fi_ops_cm: names only, a connectionless endpoint ---- */

static int layer_ep_getname(fid_t fid, void *addr, size_t *addrlen)
{
	struct layer_ep *ep = container_of(fid, struct layer_ep, ep_fid.fid);
	size_t len;

	if (!addrlen)
		return -FI_EINVAL;
	if (!ep->is_enabled)
		return -FI_EOPBADSTATE;
	len = *addrlen;
	*addrlen = ep->core->addrlen;
	if (len < ep->core->addrlen)
		return -FI_ETOOSMALL;
	if (!addr)
		return -FI_EINVAL;
	memcpy(addr, ep->core->addr, ep->core->addrlen);
	return 0;
}

static int layer_ep_setname(fid_t fid, void *addr, size_t addrlen)
{
	struct layer_ep *ep = container_of(fid, struct layer_ep, ep_fid.fid);
	struct fi_info *info = ep->core->info;
	void *copy;

	if (!addr || addrlen != ep->domain->addrlen)
		return -FI_EINVAL;
	if (ep->is_enabled)
		return -FI_EOPBADSTATE;
	copy = malloc(addrlen);
	if (!copy)
		return -FI_ENOMEM;
	memcpy(copy, addr, addrlen);
	free(info->src_addr);
	info->src_addr = copy;
	info->src_addrlen = addrlen;
	return 0;
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
	.join = layer_ep_join,
};

/* ---- the entry points' source check ---- */

int layer_ep_check_src(struct layer_ep *ep, fi_addr_t *src, uint64_t *flags)
{
	uint8_t addr[LAYER_ADDR_MAX];
	size_t index;

	/* Without FI_DIRECTED_RECV the source of a receive is ignored (fi_msg(3)). */
	if (!(ep->caps & FI_DIRECTED_RECV)) {
		*src = FI_ADDR_UNSPEC;
		*flags &= ~FI_AUTH_KEY;
		return 0;
	}
	/* fi_av(3) 1.20: FI_AUTH_KEY says src is a key handle, one the endpoint holds */
	if (*flags & FI_AUTH_KEY) {
		if (layer_auth_holds(&ep->conns.auth, *src))
			return 0;
		LAYER_WARN_ONCE(FI_LOG_EP_DATA, "receive: FI_AUTH_KEY with %#" PRIx64
			", not a key the endpoint was enabled with\n", (uint64_t) *src);
		return -FI_EINVAL;
	}
	if (*src == FI_ADDR_UNSPEC)
		return 0;
	return layer_av_get_addr(ep->av, *src, addr, &index);
}

/* ---- open ---- */

/*
 * The entry points an endpoint gets: the variant of its threading model, each direction or
 * interface its capabilities leave out answering -FI_EOPNOTSUPP.
 */
static void layer_ep_choose_ops(struct layer_ep *ep)
{
	const struct fi_ops_msg *msg = ep->is_locked ? &layer_msg_locked_ops :
						       &layer_msg_unlocked_ops;
	const struct fi_ops_tagged *tagged = ep->is_locked ? &layer_tagged_locked_ops :
							     &layer_tagged_unlocked_ops;
	bool has_send = ep->caps & FI_SEND, has_recv = ep->caps & FI_RECV;

	ep->msg_ops = ep->caps & FI_MSG ? *msg : layer_no_msg_ops;
	ep->tagged_ops = ep->caps & FI_TAGGED ? *tagged : layer_no_tagged_ops;
	if (!has_send) {
		ep->msg_ops.send = layer_no_msg_ops.send;
		ep->msg_ops.sendv = layer_no_msg_ops.sendv;
		ep->msg_ops.sendmsg = layer_no_msg_ops.sendmsg;
		ep->msg_ops.inject = layer_no_msg_ops.inject;
		ep->msg_ops.senddata = layer_no_msg_ops.senddata;
		ep->msg_ops.injectdata = layer_no_msg_ops.injectdata;
		ep->tagged_ops.send = layer_no_tagged_ops.send;
		ep->tagged_ops.sendv = layer_no_tagged_ops.sendv;
		ep->tagged_ops.sendmsg = layer_no_tagged_ops.sendmsg;
		ep->tagged_ops.inject = layer_no_tagged_ops.inject;
		ep->tagged_ops.senddata = layer_no_tagged_ops.senddata;
		ep->tagged_ops.injectdata = layer_no_tagged_ops.injectdata;
	}
	if (!has_recv) {
		ep->msg_ops.recv = layer_no_msg_ops.recv;
		ep->msg_ops.recvv = layer_no_msg_ops.recvv;
		ep->msg_ops.recvmsg = layer_no_msg_ops.recvmsg;
		ep->tagged_ops.recv = layer_no_tagged_ops.recv;
		ep->tagged_ops.recvv = layer_no_tagged_ops.recvv;
		ep->tagged_ops.recvmsg = layer_no_tagged_ops.recvmsg;
	}
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
	ep->is_locked = domain->is_thread_safe;
	pthread_mutex_init(&ep->lock, NULL);
	ep->caps = layer_default_caps(info->caps ? info->caps : LAYER_EP_CAPS);
	ep->tx_op_flags = info->tx_attr->op_flags;
	ep->rx_op_flags = info->rx_attr->op_flags;

	ret = layer_core_open(domain, info, &layer_conn_core_upcalls, &ep->conns, &ep->core);
	if (ret)
		goto err_free_ep;
	ret = layer_conns_init(&ep->conns, ep->core, info, &layer_proto_conn_upcalls,
			       &ep->proto);
	if (ret)
		goto err_free_core;
	ret = layer_proto_init(&ep->proto, domain, &ep->conns, ep->core,
			       info->tx_attr->size ? info->tx_attr->size : layer_settings.tx_size,
			       info->rx_attr->size ? info->rx_attr->size : layer_settings.rx_size);
	if (ret)
		goto err_free_core;
	layer_ep_choose_ops(ep);
	layer_coll_init(&ep->coll, &ep->proto);
	if (ep->caps & FI_COLLECTIVE) {
		ep->coll.lock = ep->is_locked ? &ep->lock : NULL;
		ep->proto.coll = &ep->coll;
	}

	ep->ep_fid.fid.fclass = FI_CLASS_EP;
	ep->ep_fid.fid.context = context;
	ep->ep_fid.fid.ops = &layer_ep_fi_ops;
	ep->ep_fid.ops = &layer_ep_ops;
	ep->ep_fid.cm = &layer_ep_cm_ops;
	ep->ep_fid.msg = &ep->msg_ops;
	ep->ep_fid.rma = ep->caps & FI_RMA ? ep->is_locked ? &layer_rma_locked_ops :
							  &layer_rma_unlocked_ops :
			 &layer_no_rma_ops;
	ep->ep_fid.tagged = &ep->tagged_ops;
	ep->ep_fid.collective = ep->caps & FI_COLLECTIVE ? ep->is_locked ? &layer_coll_locked_ops :
									   &layer_coll_unlocked_ops :
				&layer_no_collective_ops;
	ep->ep_fid.atomic = ep->caps & FI_ATOMIC ? ep->is_locked ? &layer_atomic_locked_ops :
								   &layer_atomic_unlocked_ops :
			    &layer_no_atomic_ops;
	atomic_fetch_add(&domain->ref, 1);
	*ep_fid = &ep->ep_fid;
	return 0;

err_free_core:
	layer_core_free(ep->core);
err_free_ep:
	pthread_mutex_destroy(&ep->lock);
	free(ep);
	return ret;
}
