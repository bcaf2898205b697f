/*
 * The core adapter for connected (MSG) cores (core.h), its life and its connections: a
 * passive endpoint listens for peers; each channel is a core endpoint of its own, an
 * outgoing one opened by connect() with the requester's listening address, eager size,
 * authorization key and channel id in its connection request (struct layer_hello); every
 * channel takes its receive buffers from the endpoint's shared receive context
 * (core_msg_rx.c). A request whose key the connection layer refuses is rejected with the
 * reason (struct layer_reject), and the requester's channel fails with FI_EACCES. A channel
 * that fails or shuts down is reported up (failed), as is every error completion of an
 * operation on it: on a connected core an operation fails only with its connection. Over a
 * core that writes (tcp), each side of a channel lends the other a ring in its handshake
 * (ring.h), and the channel's short messages go there as the core's RMA writes, without a
 * completion at either end.
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "layer/addr.h"
#include "layer/core/core_msg.h"

_Static_assert(sizeof(((struct layer_hello *) 0)->addr) >= sizeof(struct sockaddr_in6),
	       "the hello holds a listening address (MSG cores have sockaddr addresses only)");

/*
 * Connection events are rare next to completions, and a core EQ read costs about as much as
 * a whole progress call that finds nothing (tcp: 0.7 us against 0.6 us, measured). The EQ
 * is read once eq_period progress calls have passed since the last read, or once the coarse
 * clock has moved on (a kernel tick, 1 to 4 ms), whichever comes first. The period is
 * LAYER_EQ_PERIOD_MIN after an event and once this endpoint asks for a connection, and
 * doubles after each read that finds nothing, up to LAYER_EQ_PERIOD_MAX: an endpoint that
 * spins reads its EQ every few microseconds while connections are being made and a few
 * hundred times less often once they are, and one that makes progress seldom reads it on
 * each call. While a request of this endpoint's is out, the EQ is read on every call: its
 * answer is what the sends queued on it wait for. Blocking waits see the EQ's fd.
 */
#define LAYER_EQ_PERIOD_MIN 16
#define LAYER_EQ_PERIOD_MAX 256

/* The largest eager payload this endpoint's buffers take, as the handshake carries it (KiB,
 * rounded down). */
static uint16_t layer_msg_rx_eager_kib(const struct layer_core *core)
{
	size_t bytes = core->domain->has_direct_recv ? layer_settings.direct_eager_size :
						       layer_settings.eager_size;

	return (uint16_t) UTIL_MIN(bytes >> 10, UINT16_MAX);
}

/* The largest RMA data this endpoint takes with its header: with direct receive it goes
 * straight into place, so more than its buffers take. */
static uint16_t layer_msg_rx_rma_kib(const struct layer_core *core)
{
	if (!core->domain->has_direct_recv)
		return layer_msg_rx_eager_kib(core);
	return (uint16_t) UTIL_MIN(core->rma_direct_max >> 10, UINT16_MAX);
}

/* What a peer's handshake says its buffers take, in bytes (capped at LAYER_EAGER_MAX): at
 * least the inject size, which every buffer holds (a handshake rounds below 1 KiB to 0). */
static size_t layer_msg_peer_eager(uint16_t kib)
{
	return UTIL_MAX(UTIL_MIN((size_t) kib << 10, (size_t) LAYER_EAGER_MAX),
			(size_t) LAYER_INJECT_SIZE);
}

static struct layer_msg_chan *layer_msg_chan_alloc(struct layer_core *core, bool is_outgoing)
{
	struct layer_msg_core *mcore = layer_msg_core_of(core);
	struct layer_msg_chan *mchan;

	mchan = calloc(1, sizeof(*mchan));
	if (!mchan)
		return NULL;
	if (layer_ring_open(&mchan->chan, &mcore->rings, &mchan->ring)) {
		free(mchan);
		return NULL;
	}
	if (layer_msg_id_alloc(mcore, mchan)) {
		layer_ring_close(mchan->ring);
		free(mchan);
		return NULL;
	}
	mchan->chan.ring = mchan->ring;
	mchan->chan.core = core;
	mchan->chan.core_addr = FI_ADDR_UNSPEC;
	mchan->chan.is_outgoing = is_outgoing;
	mchan->chan.is_two_way = true;
	util_dlist_init(&mchan->taken_bufs);
	util_dlist_insert_tail(&mchan->link, &mcore->chans);
	return mchan;
}

/*
 * Closes the channel's core endpoint. tcp completes what it held with FI_ECANCELED errors
 * in the core CQ (it already has if the connection broke): progress reads its group's CQ
 * again before the channel may be freed.
 */
static void layer_msg_chan_close(struct layer_chan *chan)
{
	if (chan->ring) {
		layer_ring_stop(chan->ring);
		chan->ring = NULL;
	}
	if (chan->core_ep) {
		fi_close(&chan->core_ep->fid);
		chan->core_ep = NULL;
		layer_core_mark(chan);
	}
}

/* The buffers the core took for its messages go back without them: up as lost when it
 * served a connection. */
static void layer_msg_chan_free(struct layer_chan *chan, int err)
{
	struct layer_msg_chan *mchan = layer_msg_chan_of(chan);
	struct layer_msg_core *mcore = layer_msg_core_of(chan->core);

	layer_msg_chan_close(chan);
	/* its id names nothing any more: what still comes with it is dropped */
	layer_msg_id_free(mcore, mchan);
	/*
	 * Buffers the core took for its messages come back through the core CQ, FI_ECANCELED
	 * (tcp may report them after the close): the channel waits for them, on the dropped
	 * list.
	 */
	if (!mcore->is_closed && mchan->taken_cnt) {
		chan->conn = NULL;
		util_dlist_remove(&mchan->link);
		util_dlist_insert_tail(&mchan->link, &mcore->dropped);
		return;
	}
	layer_msg_release_taken(mchan, err);
	util_dlist_remove(&mchan->link);
	if (mchan->cqg && !mcore->is_closed)
		layer_msg_cqg_put(mcore, mchan->cqg);
	/* its core endpoint is closed: nothing writes into its region any more */
	layer_ring_close(mchan->ring);
	free(mchan);
}

/*
 * A channel whose request is still out is left to the peer's answer (tcp 1.17 does not take
 * back a request in flight cleanly: a core endpoint closed then still completes buffers
 * later), and freed when it comes; it carried nothing, so nothing above hears of it.
 */
static void layer_msg_chan_drop(struct layer_chan *chan)
{
	chan->conn = NULL;
	if (!layer_msg_chan_of(chan)->is_connecting)
		layer_msg_chan_free(chan, 0);
}

/* Whether the peer's answer to the channel's request is still to come. */
static void layer_msg_chan_connecting(struct layer_msg_chan *mchan, bool is_connecting)
{
	struct layer_msg_core *mcore = layer_msg_core_of(mchan->chan.core);

	if (mchan->is_connecting == is_connecting)
		return;
	mchan->is_connecting = is_connecting;
	if (is_connecting)
		mcore->connecting_cnt++;
	else
		mcore->connecting_cnt--;
}

/* The peer answered a channel's request, or its connection ended: false when the channel was
 * dropped meanwhile (it goes now, and the event with it). */
static bool layer_msg_chan_answered(struct layer_chan *chan)
{
	layer_msg_chan_connecting(layer_msg_chan_of(chan), false);
	if (chan->conn)
		return true;
	layer_msg_chan_drop(chan);
	return false;
}

/* Frees the dropped channels whose buffers all came back (at close: all of them). */
static void layer_msg_free_dropped(struct layer_msg_core *mcore)
{
	struct util_dlist *item, *tmp;
	struct layer_msg_chan *mchan;

	util_dlist_foreach_safe(&mcore->dropped, item, tmp) {
		mchan = container_of(item, struct layer_msg_chan, link);
		if (!mchan->taken_cnt || mcore->is_closed)
			layer_msg_chan_free(&mchan->chan, 0);
	}
}

static int layer_msg_setup_core(struct layer_msg_chan *mchan, struct fi_info *info)
{
	struct layer_core *core = mchan->chan.core;
	struct layer_msg_core *mcore = layer_msg_core_of(core);
	int ret;

	mchan->cqg = layer_msg_cqg_take(mcore);
	if (!mchan->cqg)
		return -FI_ENOMEM;
	mchan->chan.set = &mchan->cqg->set;
	info->ep_attr->rx_ctx_cnt = FI_SHARED_CONTEXT;
	ret = fi_endpoint(core->domain->core_domain, info, &mchan->chan.core_ep, &mchan->chan);
	if (ret)
		return ret;
	ret = fi_ep_bind(mchan->chan.core_ep, &core->eq->fid, 0);
	if (ret)
		goto err_close_core_ep;
	ret = fi_ep_bind(mchan->chan.core_ep, &mchan->cqg->cq->fid, FI_TRANSMIT | FI_RECV);
	if (ret)
		goto err_close_core_ep;
	ret = fi_ep_bind(mchan->chan.core_ep, &mcore->srx->fid, 0);
	if (ret)
		goto err_close_core_ep;
	ret = fi_enable(mchan->chan.core_ep);
	if (ret)
		goto err_close_core_ep;
	return 0;

err_close_core_ep:
	layer_msg_chan_close(&mchan->chan);
	return ret;
}

/*
 * From here on core->info is the template of outgoing connections: their sockets take the
 * listener's address but any port, or binding them to a port the listener holds (an
 * application that chose its port, fi_getinfo with a service) fails with EADDRINUSE.
 */
static void layer_msg_clear_src_port(struct fi_info *info)
{
	struct sockaddr *sa = info->src_addr;

	if (!sa)
		return;
	if (sa->sa_family == AF_INET && info->src_addrlen >= sizeof(struct sockaddr_in))
		((struct sockaddr_in *) sa)->sin_port = 0;
	else if (sa->sa_family == AF_INET6 && info->src_addrlen >= sizeof(struct sockaddr_in6))
		((struct sockaddr_in6 *) sa)->sin6_port = 0;
}

static int layer_msg_enable(struct layer_core *core, size_t tx_size)
{
	struct layer_msg_core *mcore = layer_msg_core_of(core);
	size_t addrlen = sizeof(core->addr);
	uint8_t raw[LAYER_ADDR_MAX];
	int ret;

	mcore->eq_period = LAYER_EQ_PERIOD_MIN;
	layer_rings_init(&mcore->rings, core);
	core->rings = &mcore->rings;
	/* the core's keys of the application's regions are never reused: the provider's own
	 * (mr.c), or a core's that hands out its own (tcp's util key map counts up) */
	core->has_direct_rma = layer_settings.direct_rma && (core->info->caps & FI_RMA) &&
			       !core->domain->mr.is_soft;
	ret = layer_msg_cqgs_enable(mcore);
	if (ret)
		return ret;
	ret = layer_msg_rx_open(mcore);
	if (ret)
		goto err_close_cqgs;
	ret = fi_passive_ep(core->domain->fabric->core_fabric, core->info, &mcore->pep, core);
	if (ret)
		goto err_close_rx;
	ret = fi_pep_bind(mcore->pep, &core->eq->fid, 0);
	if (ret)
		goto err_close_pep;
	ret = fi_listen(mcore->pep);
	if (ret)
		goto err_close_pep;
	ret = fi_getname(&mcore->pep->fid, raw, &addrlen);
	if (ret)
		goto err_close_pep;
	ret = layer_addr_normalize(core->domain->addr_format, raw, addrlen, core->addr);
	if (ret)
		goto err_close_pep;
	core->addrlen = core->domain->addrlen;
	layer_msg_clear_src_port(core->info);
	return 0;

err_close_pep:
	fi_close(&mcore->pep->fid);
	mcore->pep = NULL;
err_close_rx:
	layer_msg_rx_close(mcore);
err_close_cqgs:
	layer_msg_cqgs_close(mcore);
	return ret;
}

static int layer_msg_connect(struct layer_core *core, const void *addr,
			     const struct layer_key *key, struct layer_chan **chan, bool *is_up)
{
	struct layer_msg_core *mcore = layer_msg_core_of(core);
	struct layer_hello hello = {
		.magic = LAYER_HELLO_MAGIC,
		.version = LAYER_PROTO_VERSION,
		.addrlen = (uint8_t) core->addrlen,
		.rx_eager_kib = layer_msg_rx_eager_kib(core),
		.key_len = key->len,
		.rx_rma_kib = layer_msg_rx_rma_kib(core),
	};
	struct layer_msg_chan *mchan;
	int ret;

	mchan = layer_msg_chan_alloc(core, true);
	if (!mchan)
		return -FI_ENOMEM;
	hello.rx_id = mchan->id;
	memcpy(mchan->chan.peer_addr, addr, core->addrlen);
	memcpy(hello.addr, core->addr, core->addrlen);
	memcpy(hello.key, key->bytes, key->len);

	ret = layer_msg_setup_core(mchan, core->info);
	if (ret)
		goto err_free_chan;
	ret = fi_connect(mchan->chan.core_ep, addr, &hello, sizeof(hello));
	/* its answer is an event: the EQ is watched closely again */
	mcore->eq_period = LAYER_EQ_PERIOD_MIN;
	if (ret) {
		LAYER_WARN_ONCE(FI_LOG_EP_CTRL, "connect failed: %s\n", fi_strerror(-ret));
		goto err_free_chan;
	}
	FI_DBG(&layer_prov, FI_LOG_EP_CTRL, "connecting channel %p\n", (void *) &mchan->chan);
	layer_msg_chan_connecting(mchan, true);
	*chan = &mchan->chan;
	*is_up = false;
	return 0;

err_free_chan:
	layer_msg_chan_free(&mchan->chan, 0);
	return ret;
}

/* Whether a connection request's handshake is one of this version; its key if so. */
static bool layer_msg_hello_ok(const struct layer_core *core, const struct layer_hello *hello,
			       size_t len, struct layer_key *key)
{
	if (len != sizeof(*hello) || hello->magic != LAYER_HELLO_MAGIC ||
	    hello->version != LAYER_PROTO_VERSION || hello->addrlen != core->addrlen ||
	    hello->key_len > LAYER_AUTH_KEY_MAX)
		return false;
	key->len = hello->key_len;
	memcpy(key->bytes, hello->key, key->len);
	return true;
}

static void layer_msg_handle_connreq(struct layer_core *core, struct fi_eq_cm_entry *entry,
				     size_t len)
{
	const struct layer_hello *hello = (const struct layer_hello *) entry->data;
	struct layer_reject reject = {
		.magic = LAYER_HELLO_MAGIC,
		.version = LAYER_PROTO_VERSION,
	};
	struct layer_accept accept = {
		.magic = LAYER_HELLO_MAGIC,
		.version = LAYER_PROTO_VERSION,
		.rx_eager_kib = layer_msg_rx_eager_kib(core),
		.rx_rma_kib = layer_msg_rx_rma_kib(core),
	};
	struct fid_pep *pep = layer_msg_core_of(core)->pep;
	struct layer_msg_chan *mchan;
	struct layer_key key;
	int ret;

	if (len < sizeof(*entry) || !layer_msg_hello_ok(core, hello, len - sizeof(*entry), &key)) {
		LAYER_WARN_ONCE(FI_LOG_EP_CTRL, "rejecting malformed connection request\n");
		fi_reject(pep, entry->info->handle, NULL, 0);
		goto out;
	}
	mchan = layer_msg_chan_alloc(core, false);
	if (!mchan) {
		fi_reject(pep, entry->info->handle, NULL, 0);
		goto out;
	}
	memcpy(mchan->chan.peer_addr, hello->addr, core->addrlen);
	mchan->chan.tx_eager = layer_msg_peer_eager(hello->rx_eager_kib);
	mchan->chan.tx_rma_eager = UTIL_MAX(layer_msg_peer_eager(hello->rx_rma_kib),
					    mchan->chan.tx_eager);
	mchan->chan.tx_data = hello->rx_id;
	accept.rx_id = mchan->id;
	/* Checked once here: everything on the connection is attributed to this key. */
	ret = core->up->accept(core->up_arg, &mchan->chan, &key);
	if (ret) {
		if (ret == -FI_EACCES)
			layer_core_refused(core, "a connection request");
		reject.reason = ret == -FI_EACCES ? LAYER_REJECT_AUTH_KEY :
				ret == -FI_EALREADY ? LAYER_REJECT_DUPLICATE : 0;
		fi_reject(pep, entry->info->handle, reject.reason ? &reject : NULL,
			  reject.reason ? sizeof(reject) : 0);
		layer_msg_chan_free(&mchan->chan, 0);
		goto out;
	}
	ret = layer_msg_setup_core(mchan, entry->info);
	if (!ret)
		ret = fi_accept(mchan->chan.core_ep, &accept, sizeof(accept));
	if (ret) {
		LAYER_WARN_ONCE(FI_LOG_EP_CTRL, "accept failed: %s\n", fi_strerror(-ret));
		if (!mchan->chan.core_ep)
			fi_reject(pep, entry->info->handle, NULL, 0);
		core->up->failed(core->up_arg, &mchan->chan, -ret);
		goto out;
	}
	FI_DBG(&layer_prov, FI_LOG_EP_CTRL, "accepted channel %p\n", (void *) &mchan->chan);
out:
	fi_freeinfo(entry->info);
}

/* Why the peer refused a connect (enum layer_reject_reason), 0 when it did not say. */
static unsigned layer_msg_reject_reason(const struct fi_eq_err_entry *err)
{
	struct layer_reject reject;

	if (err->err != FI_ECONNREFUSED || !err->err_data ||
	    err->err_data_size < sizeof(reject))
		return 0;
	memcpy(&reject, err->err_data, sizeof(reject));
	return reject.magic == LAYER_HELLO_MAGIC ? reject.reason : 0;
}

static void layer_msg_handle_eq_error(struct layer_core *core)
{
	struct fid_pep *pep = layer_msg_core_of(core)->pep;
	struct fi_eq_err_entry err = { 0 };
	struct layer_chan *chan;

	if (fi_eq_readerr(core->eq, &err, 0) != sizeof(err))
		return;
	if (!err.fid || err.fid == &pep->fid) {
		FI_WARN(&layer_prov, FI_LOG_EP_CTRL, "listener error: %s\n",
			fi_strerror(err.err));
		return;
	}
	chan = err.fid->context;
	if (!layer_msg_chan_answered(chan))
		return;
	switch (layer_msg_reject_reason(&err)) {
	case LAYER_REJECT_AUTH_KEY:
		/* reported by the sends' error completions */
		FI_INFO(&layer_prov, FI_LOG_EP_CTRL, "connection refused: the peer does not "
			"accept this endpoint's authorization key\n");
		core->up->failed(core->up_arg, chan, FI_EACCES);
		return;
	case LAYER_REJECT_DUPLICATE:
		FI_DBG(&layer_prov, FI_LOG_EP_CTRL, "channel %p refused: the peer's own "
		       "request is the connection\n", (void *) chan);
		core->up->failed(core->up_arg, chan, FI_EALREADY);
		return;
	}
	FI_INFO(&layer_prov, FI_LOG_EP_CTRL, "connection failed: %s\n", fi_strerror(err.err));
	core->up->failed(core->up_arg, chan, err.err ? err.err : FI_ECONNABORTED);
}

/* The acceptor says what its buffers take; an acceptance without it is not of this version. */
static void layer_msg_handle_connected(struct layer_core *core, struct layer_chan *chan,
				       const struct fi_eq_cm_entry *entry, size_t len)
{
	struct layer_accept accept;

	if (!layer_msg_chan_answered(chan))
		return;
	if (!chan->is_outgoing) {
		core->up->connected(core->up_arg, chan);
		return;
	}
	if (len < sizeof(*entry) + sizeof(accept)) {
		LAYER_WARN_ONCE(FI_LOG_EP_CTRL, "the peer's acceptance says nothing of its "
			"buffers: not protocol version %d\n", LAYER_PROTO_VERSION);
		core->up->failed(core->up_arg, chan, EPROTO);
		return;
	}
	memcpy(&accept, entry->data, sizeof(accept));
	if (accept.magic != LAYER_HELLO_MAGIC || accept.version != LAYER_PROTO_VERSION) {
		LAYER_WARN_ONCE(FI_LOG_EP_CTRL, "the peer speaks protocol version %u, not "
			"%d\n", accept.version, LAYER_PROTO_VERSION);
		core->up->failed(core->up_arg, chan, EPROTO);
		return;
	}
	chan->tx_eager = layer_msg_peer_eager(accept.rx_eager_kib);
	chan->tx_rma_eager = UTIL_MAX(layer_msg_peer_eager(accept.rx_rma_kib), chan->tx_eager);
	chan->tx_data = accept.rx_id;
	core->up->connected(core->up_arg, chan);
}

/* Reads the core's connection events; whether there was any. */
static bool layer_msg_progress_events(struct layer_core *core)
{
	struct {
		struct fi_eq_cm_entry entry;
		uint8_t data[256];
	} ev;
	bool has_event = false;
	uint32_t event;
	ssize_t ret;

	for (;; has_event = true) {
		ret = fi_eq_read(core->eq, &event, &ev, sizeof(ev), 0);
		if (ret == -FI_EAVAIL) {
			layer_msg_handle_eq_error(core);
			continue;
		}
		if (ret < 0)
			return has_event;
		switch (event) {
		case FI_CONNREQ:
			layer_msg_handle_connreq(core, &ev.entry, (size_t) ret);
			break;
		case FI_CONNECTED:
			layer_msg_handle_connected(core, ev.entry.fid->context, &ev.entry,
						   (size_t) ret);
			break;
		case FI_SHUTDOWN:
			if (layer_msg_chan_answered(ev.entry.fid->context))
				core->up->failed(core->up_arg, ev.entry.fid->context,
						 FI_ECONNRESET);
			break;
		default:
			LAYER_WARN_ONCE(FI_LOG_EP_CTRL, "unexpected core event %u\n", event);
			break;
		}
	}
}

static void layer_msg_progress(struct layer_core *core)
{
	struct layer_msg_core *mcore = layer_msg_core_of(core);
	uint64_t now = util_coarse_ns();

	if (++mcore->eq_calls >= mcore->eq_period || now != mcore->eq_read_ns ||
	    mcore->connecting_cnt) {
		mcore->eq_calls = 0;
		mcore->eq_read_ns = now;
		if (layer_msg_progress_events(core))
			mcore->eq_period = LAYER_EQ_PERIOD_MIN;
		else if (mcore->eq_period < LAYER_EQ_PERIOD_MAX)
			mcore->eq_period <<= 1;
	}
	layer_msg_progress_cqs(mcore);
	if (mcore->rings.slots)
		layer_rings_progress(&mcore->rings, now / 1000000);
	if (!util_dlist_empty(&mcore->rings.active))
		layer_msg_poll_rings(mcore);
	/* the CQ was read empty: what the dropped channels wait for has come, or comes later */
	if (unlikely(!util_dlist_empty(&mcore->dropped)))
		layer_msg_free_dropped(mcore);
}

/* What the rings staged goes (a ring whose core is busy keeps it for the next call). */
static bool layer_msg_flush(struct layer_core *core)
{
	struct layer_msg_core *mcore = layer_msg_core_of(core);
	struct util_dlist *item;
	bool is_flushed = true;

	util_dlist_foreach(&mcore->rings.active, item) {
		if (layer_ring_flush(container_of(item, struct layer_ring, link)))
			is_flushed = false;
	}
	return is_flushed;
}

static void layer_msg_close(struct layer_core *core)
{
	struct layer_msg_core *mcore = layer_msg_core_of(core);
	struct util_dlist *item, *tmp;
	struct layer_msg_chan *mchan;

	mcore->is_closed = true;
	util_dlist_foreach_safe(&mcore->chans, item, tmp) {
		mchan = container_of(item, struct layer_msg_chan, link);
		layer_msg_chan_close(&mchan->chan);
		/* dropped while its request was out: no connection frees it */
		if (!mchan->chan.conn)
			layer_msg_chan_free(&mchan->chan, 0);
	}
	/* nothing completes after close: what the core held of them is gone */
	layer_msg_free_dropped(mcore);
	if (mcore->pep) {
		fi_close(&mcore->pep->fid);
		mcore->pep = NULL;
	}
	layer_msg_rx_close(mcore);
	layer_msg_cqgs_close(mcore);
}

const struct layer_core_ops layer_core_msg_ops = {
	.has_shared_ep = false,
	.cq_format = FI_CQ_FORMAT_DATA,
	.enable = layer_msg_enable,
	.connect = layer_msg_connect,
	.chan_close = layer_msg_chan_close,
	.chan_free = layer_msg_chan_free,
	.chan_drop = layer_msg_chan_drop,
	.progress = layer_msg_progress,
	.flush = layer_msg_flush,
	.trywait = layer_msg_trywait,
	.cq_wait = layer_msg_cq_wait,
	.post_buf = layer_msg_post_buf,
	.refill = layer_msg_refill,
	.close = layer_msg_close,
};

struct layer_core *layer_core_msg_alloc(void)
{
	struct layer_msg_core *mcore;

	mcore = calloc(1, sizeof(*mcore));
	if (!mcore)
		return NULL;
	mcore->core.ops = &layer_core_msg_ops;
	util_dlist_init(&mcore->chans);
	util_dlist_init(&mcore->dropped);
	util_dlist_init(&mcore->srx_bufs);
	util_dlist_init(&mcore->rings.active);
	util_dlist_init(&mcore->rings.pending);
	layer_msg_cqgs_init(mcore);
	return &mcore->core;
}
