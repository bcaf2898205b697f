/*
 * The reliable-datagram endpoint: a one-way stack. Each layer is a folder of layer/, calls
 * only the layers below it, and hears from them only through the upcall table it gives them
 * when the endpoint opens:
 *
 *   ep/     the endpoint object (this file, ep.c) and the API entry points: FI_MSG (msg.c),
 *           FI_TAGGED (tagged.c), FI_RMA (rma.c), FI_ATOMIC (atomic.c), FI_COLLECTIVE
 *      |    (coll.c); argument checks, the threading variant, progress
 *   proto/  transmit and receive paths: sends and rendezvous (tx.c, rndv.c), the receive
 *      |    path with its one entry for every message (rx.c), receive queues where matching
 *      |    happens (rxq.c), the unexpected-memory bound (unexp.c); beside it rma/, RMA
 *      |    requests and the target's side of them (rma.c, rma_target.c), atomic/,
 *      |    atomics the same way (atomic.c, atomic_target.c), and coll/, collective groups
 *      |    and the calls' schedules run over the endpoint's own messages (group.c, coll.c)
 *      |                                         ^ struct layer_conn_upcalls
 *   conn/   connections and peers: one per peer and direction, found by AV index, the
 *      |    sender of what they carry kept from the AV's notices; authorization keys
 *      |                                         ^ struct layer_core_upcalls
 *   core/   core adapters: connected cores (core_msg.c) and reliable-datagram cores
 *           (core_rdm.c), each reading its own completions; the wire format (wire.h)
 *
 * A tagged message received over tcp crosses each layer once: the adapter reads the core
 * completion and hands the buffer up (recv); the connection layer sets its sender and key
 * and hands it up; the receive path checks the header, matches it in the tagged queue and
 * writes the completion. A send goes the other way: the entry point checks its arguments
 * and takes the lock, the transmit path builds the message and asks the connection layer
 * for the peer's connection, and gives it to that connection's core channel.
 *
 * The endpoint owns one struct of each layer (proto, conns, core) and wires them together at
 * open; the application's CQs and counters run its progress through a hook each
 * (util/progress.h), its AV tells it of insertions and removals through a listener.
 *
 * Threading: an endpoint of an FI_THREAD_SAFE domain (and FI_THREAD_FID, UNSPEC) takes its
 * mutex around every entry; one of an FI_THREAD_DOMAIN (and stricter) domain takes none.
 * The variant is chosen at open: each entry point exists in both, and the endpoint's ops
 * tables point at one, with "not supported" entries (nosys.c) where its capabilities leave
 * a direction or an interface out, so that no data call tests capabilities or lock modes.
 */
#ifndef LAYER_EP_EP_H
#define LAYER_EP_EP_H

#include <pthread.h>
#include <rdma/fi_tagged.h>

#include "layer/av/av.h"
#include "layer/coll/coll.h"
#include "layer/conn/conn.h"
#include "layer/core/core.h"
#include "layer/domain.h"
#include "layer/eq.h"
#include "layer/proto/proto.h"
#include "layer/proto/rx.h"
#include "layer/proto/tx.h"
#include "util/progress.h"

/* The CQs and counters an endpoint can be bound to: two CQs, six counters. */
#define LAYER_EP_MAX_BINDS 8

/* One CQ or counter the endpoint is bound to: its progress runs the endpoint's. */
struct layer_ep_bind {
	struct util_progress_hook hook;
	struct util_progress_set *set; /* the CQ's or counter's */
	struct util_wait *wait;        /* its wait set, when it has one: the core's fds are in */
	atomic_int *ref;               /* its reference count */
};

struct layer_ep {
	struct fid_ep ep_fid;
	struct layer_domain *domain;
	pthread_mutex_t lock;          /* taken by the locked variant only */
	bool is_locked;                /* the variant chosen at open */
	uint64_t caps;
	uint64_t tx_op_flags;
	uint64_t rx_op_flags;
	bool is_enabled;
	struct layer_av *av;
	struct layer_eq *eq;
	struct layer_av_listener av_listener;
	struct layer_ep_bind binds[LAYER_EP_MAX_BINDS];
	size_t bind_cnt;
	struct layer_progress_member member; /* in the domain's set while enabled: the
					      * progress thread (progress.h) and the
					      * counters of fi_mr_bind run it */
	/* the entry points, per variant and capabilities (chosen at open) */
	struct fi_ops_msg msg_ops;
	struct fi_ops_tagged tagged_ops;
	/* FI_COLLECTIVE: its groups (coll/) */
	struct layer_coll coll;
	/* the stack */
	struct layer_proto proto;
	struct layer_conns conns;
	struct layer_core *core;
};

int layer_ep_open(struct fid_domain *domain, struct fi_info *info, struct fid_ep **ep,
		  void *context);

/* Runs the endpoint's progress (the lock taken when the variant has one). */
void layer_ep_progress(struct layer_ep *ep);

static inline void layer_ep_lock(struct layer_ep *ep)
{
	if (ep->is_locked)
		pthread_mutex_lock(&ep->lock);
}

static inline void layer_ep_unlock(struct layer_ep *ep)
{
	if (ep->is_locked)
		pthread_mutex_unlock(&ep->lock);
}

/* The entry points' variants (msg.c, tagged.c), and what an endpoint chooses from them. */
extern const struct fi_ops_msg layer_msg_locked_ops;
extern struct fi_ops_rma layer_rma_locked_ops;
extern struct fi_ops_rma layer_rma_unlocked_ops;
extern struct fi_ops_atomic layer_atomic_locked_ops;
extern struct fi_ops_atomic layer_atomic_unlocked_ops;
extern const struct fi_ops_msg layer_msg_unlocked_ops;
extern const struct fi_ops_tagged layer_tagged_locked_ops;
extern const struct fi_ops_tagged layer_tagged_unlocked_ops;
extern struct fi_ops_collective layer_coll_locked_ops;
extern struct fi_ops_collective layer_coll_unlocked_ops;
/* fi_join (coll.c): FI_COLLECTIVE groups only. */
int layer_ep_join(struct fid_ep *ep, const void *addr, uint64_t flags, struct fid_mc **mc,
		  void *context);

/* ---- helpers of the entry points (msg.c, tagged.c) ---- */

static inline bool layer_iov_ok(const struct iovec *iov, size_t count)
{
	size_t i;

	if (unlikely(count > LAYER_IOV_LIMIT || (count && !iov)))
		return false;
	for (i = 0; i < count; i++) {
		if (unlikely(!iov[i].iov_base && iov[i].iov_len))
			return false;
	}
	return true;
}

/*
 * The frame of every data call, is_locked a constant in each variant: enter takes the lock
 * and says whether the endpoint is enabled; leave releases it and, before returning
 * -FI_EAGAIN, makes progress, so that an application retrying the call cannot spin without
 * anything moving.
 */
static inline __attribute__((always_inline)) bool layer_ep_enter(struct layer_ep *ep,
								 const bool is_locked)
{
	if (is_locked)
		pthread_mutex_lock(&ep->lock);
	return likely(ep->is_enabled);
}

static inline __attribute__((always_inline)) ssize_t
layer_ep_leave(struct layer_ep *ep, ssize_t ret, const bool is_locked)
{
	if (is_locked)
		pthread_mutex_unlock(&ep->lock);
	if (unlikely(ret == -FI_EAGAIN))
		layer_ep_progress(ep);
	return ret;
}

/* A send of either interface, its arguments checked. flags as for layer_tx_send. */
static inline __attribute__((always_inline)) ssize_t
layer_ep_send(struct layer_ep *ep, const struct iovec *iov, size_t count, fi_addr_t dest,
	      uint64_t data, uint64_t tag, uint64_t flags, void *context, const bool is_locked)
{
	ssize_t ret = -FI_EOPBADSTATE;

	if (unlikely(!layer_iov_ok(iov, count)))
		return -FI_EINVAL;
	if (unlikely((flags & FI_INJECT) && util_iov_len(iov, count) > LAYER_INJECT_SIZE))
		return -FI_EMSGSIZE;
	if (layer_ep_enter(ep, is_locked))
		ret = layer_tx_send(&ep->proto, iov, count, dest, data, tag, flags, context);
	return layer_ep_leave(ep, ret, is_locked);
}

/*
 * A receive's source: FI_ADDR_UNSPEC, an address of the AV, or with FI_AUTH_KEY in flags a
 * key handle the endpoint was enabled with. 0 or -FI_EINVAL. Without FI_DIRECTED_RECV the
 * source is ignored (fi_msg(3)): *src becomes FI_ADDR_UNSPEC.
 */
int layer_ep_check_src(struct layer_ep *ep, fi_addr_t *src, uint64_t *flags);

#endif /* LAYER_EP_EP_H */
