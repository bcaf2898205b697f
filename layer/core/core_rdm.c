/*
 * The core adapter for reliable-datagram (RDM) cores (core.h): one core endpoint and one core
 * AV per endpoint, receive buffers posted on that endpoint from a shared pool, and channels
 * that are a peer's address in the core AV.
 *
 * Knowing where a message came from takes the core's FI_SOURCE, and a core names a source
 * only when its own AV holds that address (net and sockets report FI_ADDR_NOTAVAIL
 * otherwise, shm a wrong index). So the first message from one endpoint to another is a
 * HELLO carrying the sender's address: the receiver inserts it into its core AV and answers
 * HELLO_ACK; the sender's channel is connected once that answer comes, and what the layers
 * above send waits until then. Every message after that carries a core source the receiver
 * knows, which maps it to the peer; replies go to the peer's core address.
 *
 * Authorization keys travel as key slots announced by HELLOs: core_rdm_hello.c.
 *
 * The core reports errors per operation, never per peer: an operation fails alone, unless
 * the error says the peer is gone (or a HELLO could not be sent), which fails every channel
 * with that peer; the next send to it says HELLO again.
 *
 * Over a datagram core the adapter runs the same way on the datagram transport (dgram.h)
 * instead of a core endpoint: it posts no receive to the core (the transport takes posted
 * buffers as messages arrive), sends handshakes as injects, and hears from the transport
 * when a peer is lost.
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <uthash.h>

#include "layer/addr.h"
#include "layer/core/core_rdm.h"

static int layer_rdm_post_buf(struct layer_core *core, struct layer_chan *chan,
			      struct layer_buf *buf)
{
	struct layer_rdm_core *rcore = layer_rdm_core_of(core);
	ssize_t ret;

	(void) chan;
	/* A buffer given back after a match goes to the pool when enough are posted. */
	if ((!rcore->ep && !rcore->dg) || rcore->posted_cnt >= rcore->buf_target)
		return -FI_EAGAIN;
	layer_core_buf_reset(buf, NULL);
	if (!rcore->dg) {
		ret = fi_recv(rcore->ep, buf->data, core->buf_size, NULL, FI_ADDR_UNSPEC, buf);
		if (ret)
			return (int) ret;
	}
	util_dlist_insert_tail(&buf->link, &rcore->posted_bufs);
	rcore->posted_cnt++;
	if (rcore->dg)
		layer_dgram_buf_posted(rcore->dg);
	return 0;
}

static void layer_rdm_refill(struct layer_core *core, size_t upto)
{
	struct layer_rdm_core *rcore = layer_rdm_core_of(core);
	struct layer_buf *buf;

	while (rcore->posted_cnt < UTIL_MIN(upto, rcore->buf_target)) {
		buf = layer_core_buf_get(core);
		if (!buf)
			return;
		if (layer_rdm_post_buf(core, NULL, buf)) {
			layer_core_buf_put(core, buf);
			return;
		}
	}
}

static struct layer_rdm_peer *layer_rdm_peer_find(struct layer_rdm_core *rcore,
						  const void *addr)
{
	struct layer_rdm_peer *peer;

	HASH_FIND(hh, rcore->by_addr, addr, rcore->core.addrlen, peer);
	return peer;
}

static struct layer_rdm_peer *layer_rdm_peer_by_src(struct layer_rdm_core *rcore,
						    fi_addr_t src)
{
	return src < rcore->by_core_addr_cnt ? rcore->by_core_addr[src] : NULL;
}

/* The peer of a (normalised) address, inserted into the core AV on first use. */
int layer_rdm_peer_get(struct layer_rdm_core *rcore, const void *addr,
		       struct layer_rdm_peer **peer_out)
{
	fi_addr_t core_addr = FI_ADDR_NOTAVAIL;
	struct layer_rdm_peer *peer, **table;
	int ret;

	peer = layer_rdm_peer_find(rcore, addr);
	if (peer) {
		*peer_out = peer;
		return 0;
	}
	if (rcore->dg) {
		/* the transport's peer table is the AV: nothing to take back on failure */
		ret = layer_dgram_av_insert(rcore->dg, addr, &core_addr);
		if (ret)
			return ret;
		ret = 1;
	} else {
		ret = fi_av_insert(rcore->av, addr, 1, &core_addr, 0, NULL);
	}
	if (ret != 1) {
		LAYER_WARN_ONCE(FI_LOG_EP_CTRL, "core av insert failed: %s\n",
			fi_strerror(ret < 0 ? -ret : FI_EADDRNOTAVAIL));
		return ret < 0 ? ret : -FI_EADDRNOTAVAIL;
	}
	if (core_addr >= LAYER_RDM_MAX_PEERS) {
		LAYER_WARN_ONCE(FI_LOG_EP_CTRL, "core fi_addr %#lx is not a table index\n",
			(unsigned long) core_addr);
		ret = -FI_EOPNOTSUPP;
		goto err_remove;
	}
	if (core_addr >= rcore->by_core_addr_cnt) {
		table = util_array_grow(rcore->by_core_addr, &rcore->by_core_addr_cnt,
					sizeof(*table), core_addr);
		if (!table) {
			ret = -FI_ENOMEM;
			goto err_remove;
		}
		rcore->by_core_addr = table;
	}
	peer = calloc(1, sizeof(*peer));
	if (!peer) {
		ret = -FI_ENOMEM;
		goto err_remove;
	}
	peer->core_addr = core_addr;
	util_dlist_init(&peer->out_chans);
	memcpy(peer->addr, addr, rcore->core.addrlen);
	HASH_ADD(hh, rcore->by_addr, addr, rcore->core.addrlen, peer);
	rcore->by_core_addr[core_addr] = peer;
	*peer_out = peer;
	return 0;

err_remove:
	if (!rcore->dg)
		fi_av_remove(rcore->av, &core_addr, 1, 0);
	return ret;
}

struct layer_rdm_chan *layer_rdm_chan_alloc(struct layer_rdm_core *rcore,
					    struct layer_rdm_peer *peer, bool is_outgoing,
					    size_t slot)
{
	struct layer_rdm_chan *rchan;

	rchan = calloc(1, sizeof(*rchan));
	if (!rchan)
		return NULL;
	rchan->chan.core = &rcore->core;
	rchan->chan.core_ep = rcore->ep;
	rchan->chan.dgram = rcore->dg;
	rchan->chan.core_addr = peer->core_addr;
	rchan->chan.is_outgoing = is_outgoing;
	rchan->chan.key_slot = (uint16_t) slot;
	memcpy(rchan->chan.peer_addr, peer->addr, rcore->core.addrlen);
	rchan->peer = peer;
	util_dlist_init(&rchan->peer_link);
	return rchan;
}

/* Fails chan: unlinked from its peer first, so that the caller's walk moves on. */
void layer_rdm_chan_fail(struct layer_rdm_core *rcore, struct layer_rdm_chan *rchan,
			 int err)
{
	util_dlist_remove(&rchan->peer_link);
	rcore->core.up->failed(rcore->core.up_arg, &rchan->chan, err);
}

void layer_rdm_peer_fail(struct layer_rdm_core *rcore, struct layer_rdm_peer *peer,
			 int err)
{
	struct util_dlist *item;
	size_t i;

	FI_INFO(&layer_prov, FI_LOG_EP_CTRL, "peer lost: %s\n", fi_strerror(err));
	/* It may come back as a new process that has never heard of us. */
	for (i = 0; i < peer->out_cnt; i++) {
		peer->out[i].is_hello_sent = false;
		peer->out[i].is_acked = false;
	}
	peer->is_failing = true;
	/* its slots keep what was decided: what it sends next opens a channel again */
	for (i = 0; i < peer->in_cnt; i++) {
		if (peer->in[i].chan)
			layer_rdm_chan_fail(rcore, peer->in[i].chan, err);
		peer->in[i].chan = NULL;
	}
	while ((item = util_dlist_pop_front(&peer->out_chans)))
		layer_rdm_chan_fail(rcore, container_of(item, struct layer_rdm_chan, peer_link),
				    err);
	peer->is_failing = false;
}

static int layer_rdm_connect(struct layer_core *core, const void *addr,
			     const struct layer_key *key, struct layer_chan **chan, bool *is_up)
{
	struct layer_rdm_core *rcore = layer_rdm_core_of(core);
	struct layer_rdm_out_slot *out;
	struct layer_rdm_peer *peer;
	struct layer_rdm_chan *rchan;
	size_t slot;
	int ret;

	ret = layer_rdm_peer_get(rcore, addr, &peer);
	if (!ret)
		ret = layer_rdm_out_slot(peer, key, &slot);
	if (ret)
		return ret;
	out = &peer->out[slot];
	if (!out->is_acked && !out->is_hello_sent) {
		ret = layer_rdm_send_hello(rcore, peer, slot);
		if (ret)
			return ret;
	}
	rchan = layer_rdm_chan_alloc(rcore, peer, true, slot);
	if (!rchan)
		return -FI_ENOMEM;
	util_dlist_insert_tail(&rchan->peer_link, &peer->out_chans);
	*is_up = out->is_acked;
	if (out->is_acked) {
		rchan->chan.tx_eager = out->tx_eager;
		rchan->chan.tx_rma_eager = out->tx_eager;
	}
	*chan = &rchan->chan;
	return 0;
}

static void layer_rdm_chan_close(struct layer_chan *chan)
{
	struct layer_rdm_chan *rchan = layer_rdm_chan_of(chan);
	struct layer_rdm_core *rcore = layer_rdm_core_of(chan->core);
	struct layer_rdm_peer *peer = rchan->peer;
	struct layer_rdm_out_slot *out;
	struct util_dlist *item;

	if (!peer)
		return;
	rchan->peer = NULL;
	if (!chan->is_outgoing) {
		if (chan->key_slot < peer->in_cnt && peer->in[chan->key_slot].chan == rchan)
			peer->in[chan->key_slot].chan = NULL;
		return;
	}
	util_dlist_remove(&rchan->peer_link);
	/*
	 * Its HELLO may have gone down with it (a removed AV entry): if another channel of the
	 * slot still waits for the peer, the slot says it again; a second answer does no harm.
	 */
	out = &peer->out[chan->key_slot];
	if (out->is_acked || peer->is_failing)
		return;
	out->is_hello_sent = false;
	util_dlist_foreach(&peer->out_chans, item) {
		if (container_of(item, struct layer_rdm_chan, peer_link)->chan.key_slot !=
		    chan->key_slot)
			continue;
		if (layer_rdm_send_hello(rcore, peer, chan->key_slot))
			layer_rdm_peer_fail(rcore, peer, FI_ENOMEM);
		return;
	}
}

/* Nothing of the core is the channel's own: it goes once its connection has. */
static void layer_rdm_chan_free(struct layer_chan *chan, int err)
{
	layer_rdm_chan_close(chan);
	free(layer_rdm_chan_of(chan));
}

/* A channel that carried nothing holds nothing of the core (RDM channels are one way, so
 * the connection layer has no reason to drop one today). */
static void layer_rdm_chan_drop(struct layer_chan *chan)
{
	chan->conn = NULL;
	layer_rdm_chan_free(chan, 0);
}

/* Errors that say the peer itself is unreachable or gone, not just this operation. */
static bool layer_rdm_err_is_peer_lost(int err)
{
	switch (err) {
	case FI_ECONNREFUSED:
	case FI_ECONNRESET:
	case FI_ECONNABORTED:
	case FI_ENOTCONN:
	case FI_ESHUTDOWN:
	case FI_ETIMEDOUT:
	case FI_EHOSTDOWN:
	case FI_EHOSTUNREACH:
	case FI_ENETDOWN:
	case FI_ENETUNREACH:
	case EPIPE:
		return true;
	default:
		return false;
	}
}

void layer_rdm_drop(struct layer_rdm_core *rcore, struct layer_buf *buf, const char *why)
{
	layer_core_dropped(&rcore->core, buf, why);
	layer_core_repost(&rcore->core, buf);
}

/*
 * What arrives goes up on the channel it belongs to: data on its key slot's, a reply on one
 * of the channels that send to the peer. The rest is handled or dropped here.
 */
static void layer_rdm_handle_buf(struct layer_rdm_core *rcore, struct layer_buf *buf,
				 size_t len, fi_addr_t src)
{
	const struct layer_hdr *hdr = layer_buf_hdr(buf);
	struct layer_rdm_in_slot *in;
	struct layer_rdm_chan *rchan;
	struct layer_rdm_peer *peer;

	buf->len = len;
	if (unlikely(!layer_hdr_is_valid(hdr, len))) {
		layer_rdm_drop(rcore, buf, "malformed");
		return;
	}
	if (unlikely(hdr->op == LAYER_OP_HELLO)) {
		layer_rdm_handle_hello(rcore, buf);
		return;
	}
	peer = layer_rdm_peer_by_src(rcore, src);
	if (unlikely(!peer)) {
		layer_rdm_drop(rcore, buf, "unknown source");
		return;
	}
	switch (hdr->op) {
	case LAYER_OP_EAGER:
	case LAYER_OP_RTS:
	case LAYER_OP_WRITE:
	case LAYER_OP_WRITE_RTS:
	case LAYER_OP_READ_REQ:
	case LAYER_OP_ATOMIC:
	case LAYER_OP_PING:
	case LAYER_OP_CMA:
		/* the peer's requests, on its key slot */
		in = hdr->key_slot < peer->in_cnt ? &peer->in[hdr->key_slot] : NULL;
		rchan = in ? layer_rdm_in_chan(rcore, peer, hdr->key_slot) : NULL;
		if (unlikely(!rchan)) {
			layer_core_refused(&rcore->core, in && in->state == LAYER_RDM_SLOT_REFUSED ?
					   "a message of a refused key" :
					   "a message on a key slot never announced");
			layer_core_repost(&rcore->core, buf);
			return;
		}
		buf->ctx.chan = &rchan->chan;
		break;
	case LAYER_OP_HELLO_ACK:
	case LAYER_OP_HELLO_NAK:
		layer_rdm_handle_answer(rcore, peer, hdr);
		layer_core_repost(&rcore->core, buf);
		return;
	default:
		/* ACK, PACE, UNPACE, READ_RESP, PONG, CMA_BACK: about our sends to the peer */
		if (unlikely(util_dlist_empty(&peer->out_chans))) {
			layer_rdm_drop(rcore, buf, "a reply from a peer this endpoint sends nothing "
				       "to");
			return;
		}
		buf->ctx.chan = &container_of(peer->out_chans.next, struct layer_rdm_chan,
					     peer_link)->chan;
		break;
	}
	rcore->core.up->recv(rcore->core.up_arg, buf);
}

/* An operation failed: alone, unless the error says the peer is gone. */
static void layer_rdm_op_failed(struct layer_rdm_core *rcore, struct layer_ctx *ctx, int err)
{
	struct layer_rdm_ctl *ctl;
	struct layer_rdm_peer *peer;

	if (ctx->type == LAYER_CTX_CTRL) {
		ctl = container_of(ctx, struct layer_rdm_ctl, ctx);
		util_dlist_remove(&ctl->link);
		/* without its HELLO the peer can never name us: nothing for it would go */
		if (ctl->hdr.op == LAYER_OP_HELLO && !ctl->peer->is_failing)
			layer_rdm_peer_fail(rcore, ctl->peer, err);
		free(ctl);
		return;
	}
	peer = layer_rdm_chan_of(ctx->chan)->peer;
	if (peer && !peer->is_failing && layer_rdm_err_is_peer_lost(err))
		layer_rdm_peer_fail(rcore, peer, err);
	rcore->core.up->done(rcore->core.up_arg, ctx, err);
}

static void layer_rdm_handle_error(struct layer_rdm_core *rcore,
				   const struct fi_cq_err_entry *err)
{
	struct layer_ctx *ctx = err->op_context;
	struct layer_buf *buf;

	if (!ctx)
		return;
	if (ctx->type != LAYER_CTX_BUF) {
		layer_rdm_op_failed(rcore, ctx, err->err ? err->err : FI_EIO);
		return;
	}
	/* A receive on the shared endpoint fails alone (a truncated message, say). */
	buf = container_of(ctx, struct layer_buf, ctx);
	util_dlist_remove(&buf->link);
	rcore->posted_cnt--;
	if (err->err == FI_ECANCELED) {
		layer_core_buf_put(&rcore->core, buf);
		return;
	}
	buf->len = err->len;
	layer_rdm_drop(rcore, buf, fi_strerror(err->err ? err->err : FI_EIO));
}

static void layer_rdm_progress(struct layer_core *core)
{
	struct layer_rdm_core *rcore = layer_rdm_core_of(core);
	struct layer_mr_domain *mr = &core->domain->mr;
	struct fi_cq_msg_entry comp[64];
	fi_addr_t src[64];
	struct fi_cq_err_entry err;
	size_t batch = UTIL_MIN(layer_settings.cq_batch, UTIL_ARRAY_SIZE(comp));
	struct layer_rdm_ctl *ctl;
	struct layer_ctx *ctx;
	struct layer_buf *buf;
	ssize_t ret, i;

	if (unlikely(!util_dlist_empty(&rcore->ctl_queue)))
		layer_rdm_flush_ctl(rcore);
	if (rcore->dg) {
		/* peers' reads are served in here too, from the domain's map (mr.h) */
		layer_dgram_progress(rcore->dg);
		return;
	}
	for (;;) {
		/* The core serves peers' reads in here, looking their keys up in the map other
		 * endpoints of the domain register into and close from (mr.h). */
		util_lock_acquire(&mr->lock);
		ret = fi_cq_readfrom(core->cq, comp, batch, src);
		util_lock_release(&mr->lock);
		if (ret == -FI_EAVAIL) {
			memset(&err, 0, sizeof(err));
			if (fi_cq_readerr(core->cq, &err, 0) == 1)
				layer_rdm_handle_error(rcore, &err);
			continue;
		}
		if (ret <= 0)
			return;
		for (i = 0; i < ret; i++) {
			ctx = comp[i].op_context;
			switch (ctx->type) {
			case LAYER_CTX_BUF:
				buf = container_of(ctx, struct layer_buf, ctx);
				util_dlist_remove(&buf->link);
				rcore->posted_cnt--;
				layer_rdm_handle_buf(rcore, buf, comp[i].len, src[i]);
				break;
			case LAYER_CTX_CTRL:
				ctl = container_of(ctx, struct layer_rdm_ctl, ctx);
				util_dlist_remove(&ctl->link);
				free(ctl);
				break;
			default:
				core->up->done(core->up_arg, ctx, 0);
				break;
			}
		}
		if ((size_t) ret < batch)
			return;
	}
}

static int layer_rdm_trywait(struct layer_core *core)
{
	struct fid *fids[1] = { &core->cq->fid };

	/* Handshakes to retry, or nothing to sleep on (a core CQ without a wait fd: shm). */
	if (!util_dlist_empty(&layer_rdm_core_of(core)->ctl_queue) || core->cq_fd < 0)
		return -FI_EAGAIN;
	if (layer_rdm_core_of(core)->dg)
		return layer_dgram_trywait(layer_rdm_core_of(core)->dg);
	return fi_trywait(core->domain->fabric->core_fabric, fids, 1);
}

static void layer_rdm_release_bufs(struct layer_rdm_core *rcore)
{
	struct util_dlist *item;

	while ((item = util_dlist_pop_front(&rcore->posted_bufs)))
		layer_core_buf_put(&rcore->core, container_of(item, struct layer_buf, link));
	rcore->posted_cnt = 0;
}

/* Over a datagram core: what the transport calls (dgram.h). */

/* A message starts arriving: it takes the first posted buffer. */
static struct layer_buf *layer_rdm_dg_buf(void *arg)
{
	struct layer_rdm_core *rcore = arg;
	struct util_dlist *item;

	item = util_dlist_pop_front(&rcore->posted_bufs);
	if (!item)
		return NULL;
	rcore->posted_cnt--;
	return container_of(item, struct layer_buf, link);
}

static void layer_rdm_dg_recv(void *arg, struct layer_buf *buf, size_t len, fi_addr_t src)
{
	layer_rdm_handle_buf(arg, buf, len, src);
}

/* Sends and reads of the layers above (handshakes go as injects and never complete). */
static void layer_rdm_dg_done(void *arg, struct layer_ctx *ctx, int err)
{
	struct layer_rdm_core *rcore = arg;

	rcore->core.up->done(rcore->core.up_arg, ctx, err);
}

static void layer_rdm_dg_peer_lost(void *arg, fi_addr_t src, int err)
{
	struct layer_rdm_core *rcore = arg;
	struct layer_rdm_peer *peer = layer_rdm_peer_by_src(rcore, src);

	if (peer && !peer->is_failing)
		layer_rdm_peer_fail(rcore, peer, err);
}

static const struct layer_dgram_upcalls layer_rdm_dg_upcalls = {
	.buf = layer_rdm_dg_buf,
	.recv = layer_rdm_dg_recv,
	.done = layer_rdm_dg_done,
	.peer_lost = layer_rdm_dg_peer_lost,
};

static int layer_rdm_enable_dgram(struct layer_rdm_core *rcore)
{
	struct layer_core *core = &rcore->core;
	int ret;

	ret = layer_dgram_open(core, &layer_rdm_dg_upcalls, rcore, &rcore->dg);
	if (ret)
		return ret;
	/*
	 * The transport copies what it sends and names peers' memory by virtual address. A
	 * message up to the provider's inject size completes once copied, as over the other
	 * cores (an inject); a larger one once the peer acknowledged it (transmit complete),
	 * so that a send into a peer that is lost fails instead of vanishing.
	 */
	core->iov_limit = LAYER_IOV_LIMIT + 1;
	core->has_virt_addr = true;
	core->inject_size = LAYER_HDR_SIZE + LAYER_INJECT_SIZE;
	core->has_liveness = true;
	layer_rdm_refill(core, SIZE_MAX);
	if (rcore->posted_cnt < rcore->buf_target) {
		layer_dgram_close(rcore->dg);
		rcore->dg = NULL;
		layer_rdm_release_bufs(rcore);
		return -FI_ENOMEM;
	}
	return 0;
}

static int layer_rdm_enable(struct layer_core *core, size_t tx_size)
{
	struct layer_rdm_core *rcore = layer_rdm_core_of(core);
	struct fi_av_attr av_attr = { .type = FI_AV_TABLE };
	struct layer_domain *domain = core->domain;
	uint8_t raw[LAYER_ADDR_MAX];
	size_t addrlen = sizeof(raw);
	int ret;

	rcore->buf_target = layer_settings.rx_buf_cnt * LAYER_RDM_BUF_FACTOR;
	/* The core must take every buffer the endpoint keeps posted, and every send. */
	if (core->info->rx_attr->size < rcore->buf_target)
		core->info->rx_attr->size = rcore->buf_target;
	if (core->info->tx_attr->size < tx_size)
		core->info->tx_attr->size = tx_size;
	if (core->info->ep_attr->type == FI_EP_DGRAM)
		return layer_rdm_enable_dgram(rcore);

	ret = fi_av_open(domain->core_domain, &av_attr, &rcore->av, rcore);
	if (ret)
		return ret;
	ret = fi_endpoint(domain->core_domain, core->info, &rcore->ep, rcore);
	if (ret)
		goto err_close_av;
	ret = fi_ep_bind(rcore->ep, &rcore->av->fid, 0);
	if (ret)
		goto err_close_ep;
	ret = fi_ep_bind(rcore->ep, &core->cq->fid, FI_TRANSMIT | FI_RECV);
	if (ret)
		goto err_close_ep;
	ret = fi_enable(rcore->ep);
	if (ret)
		goto err_close_ep;
	ret = fi_getname(&rcore->ep->fid, raw, &addrlen);
	if (ret)
		goto err_close_ep;
	ret = layer_addr_normalize(domain->addr_format, raw, addrlen, core->addr);
	if (ret)
		goto err_close_ep;
	core->addrlen = domain->addrlen;

	layer_rdm_refill(core, SIZE_MAX);
	if (rcore->posted_cnt < rcore->buf_target) {
		ret = -FI_ENOMEM;
		FI_WARN(&layer_prov, FI_LOG_EP_CTRL, "posting receive buffers failed\n");
		goto err_close_ep;
	}
	return 0;

err_close_ep:
	fi_close(&rcore->ep->fid);
	rcore->ep = NULL;
	layer_rdm_release_bufs(rcore);
err_close_av:
	fi_close(&rcore->av->fid);
	rcore->av = NULL;
	return ret;
}

static void layer_rdm_close(struct layer_core *core)
{
	struct layer_rdm_core *rcore = layer_rdm_core_of(core);
	struct layer_rdm_peer *peer, *tmp;
	struct util_dlist *item;

	/* Closing the core endpoint discards what it holds: no completions follow. */
	if (rcore->ep) {
		fi_close(&rcore->ep->fid);
		rcore->ep = NULL;
	}
	if (rcore->dg) {
		layer_dgram_close(rcore->dg);
		rcore->dg = NULL;
	}
	layer_rdm_release_bufs(rcore);
	while ((item = util_dlist_pop_front(&rcore->ctl_queue)))
		free(container_of(item, struct layer_rdm_ctl, link));
	while ((item = util_dlist_pop_front(&rcore->ctl_posted)))
		free(container_of(item, struct layer_rdm_ctl, link));
	HASH_ITER(hh, rcore->by_addr, peer, tmp) {
		/* the channels are the connection layer's to free: they forget their peer */
		while ((item = util_dlist_pop_front(&peer->out_chans)))
			container_of(item, struct layer_rdm_chan, peer_link)->peer = NULL;
		for (size_t i = 0; i < peer->in_cnt; i++) {
			if (peer->in[i].chan)
				peer->in[i].chan->peer = NULL;
		}
		HASH_DEL(rcore->by_addr, peer);
		free(peer->in);
		free(peer->out);
		free(peer);
	}
	free(rcore->by_core_addr);
	rcore->by_core_addr = NULL;
	rcore->by_core_addr_cnt = 0;
	if (rcore->av) {
		fi_close(&rcore->av->fid);
		rcore->av = NULL;
	}
}

static const struct layer_core_ops layer_core_rdm_ops = {
	.has_shared_ep = true,
	.cq_format = FI_CQ_FORMAT_MSG,
	.enable = layer_rdm_enable,
	.connect = layer_rdm_connect,
	.chan_close = layer_rdm_chan_close,
	.chan_free = layer_rdm_chan_free,
	.chan_drop = layer_rdm_chan_drop,
	.progress = layer_rdm_progress,
	.trywait = layer_rdm_trywait,
	.post_buf = layer_rdm_post_buf,
	.refill = layer_rdm_refill,
	.close = layer_rdm_close,
};

struct layer_core *layer_core_rdm_alloc(void)
{
	struct layer_rdm_core *rcore;

	rcore = calloc(1, sizeof(*rcore));
	if (!rcore)
		return NULL;
	rcore->core.ops = &layer_core_rdm_ops;
	util_dlist_init(&rcore->posted_bufs);
	util_dlist_init(&rcore->ctl_queue);
	util_dlist_init(&rcore->ctl_posted);
	return &rcore->core;
}
