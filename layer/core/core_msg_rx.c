/*
 * What arrives through the MSG adapter (core_msg.h): the shared receive context and its
 * buffers, the channels' ids, direct receive, and the core's completions.
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "layer/core/core_msg.h"

/*
 * Buffers kept posted to the shared context: a quarter of FI_OFI_LAYER_RX_BUF_CNT at first,
 * twice as many each time they run out, up to four times it (as many as four connections used
 * to keep posted each; the RDM adapter keeps as many for all its peers). A posted receive
 * costs the core too (libfabric 2.x's tcp: a transfer entry of 16 KiB each), and an endpoint
 * that hears from few peers, or little, needs few.
 */
#define LAYER_MSG_BUF_FACTOR 4
#define LAYER_MSG_BUF_FIRST 8

/*
 * The core took a buffer of the shared context. tcp stops reading a connection whose next
 * message finds none: once buffers are posted again, every group is read (core_msg_cq.c),
 * and more are kept posted from then on. With direct receive the count is the core's own;
 * without, buffers are counted out only when they complete, and the core may have taken
 * those still counted for messages on their way in: below half of them, the context counts
 * as dry.
 */
static inline void layer_msg_srx_taken(struct layer_msg_core *mcore)
{
	mcore->srx_cnt--;
	mcore->srx_takes++;
	if (mcore->srx_cnt > (mcore->has_rx_id ? mcore->buf_target / 2 : 0))
		return;
	if (!mcore->is_dry)
		mcore->buf_target = UTIL_MIN(mcore->buf_target * 2, mcore->buf_max);
	mcore->is_dry = true;
}

/* ---- direct receive ---- */

/*
 * Direct receive, over libfabric 1.17's tcp: the core domain takes a callback of ours
 * through fi_set_ops("ofix_dynamic_rbuf_v2"), an extension of tcp's own that rxm uses
 * (DESIGN.md has the facts checked on this platform). tcp then reads the first bytes of each
 * message into the buffer posted for it, calls back with the message's length and the core
 * endpoint it came on, and reads the rest into the iov the callback returns: an expected
 * payload goes straight into the user's buffer (the receive path's place upcall), one copy
 * in all on this side.
 * - Buffers post the header only: tcp does not cut a posted buffer to its message, so a
 *   longer one would swallow the next message's first bytes. Every message of the protocol
 *   starts with the whole header; a shorter one (a peer that is not ofi_layer) leaves the
 *   connection's stream broken, and the connection with it.
 * - The callback runs inside fi_cq_read on the endpoint's core CQ, so under the endpoint's
 *   lock (progress), and with tcp's endpoint lock: nothing in it calls the core.
 * - A callback error makes tcp fail the buffer and close the connection.
 * The two structures are libfabric's internal ABI (include/ofi_cq.h, 1.17), declared here:
 * only runtime 1.17, whose tcp has been checked, gets the extension.
 */
struct layer_core_rbuf_entry {
	void *op_context;          /* the posted buffer's context: our struct layer_buf */
	uint64_t flags;
	size_t len;                /* the whole message, header included */
	void *buf;                 /* the posted buffer, holding the header */
	uint64_t data;
	uint64_t tag;
	void *ep_context;          /* the core endpoint's context: our struct layer_chan */
};

struct layer_core_rbuf_ops {
	size_t size;
	ssize_t (*get_rbuf)(struct layer_core_rbuf_entry *entry, struct iovec *iov,
			    size_t *count);
};

static ssize_t layer_msg_get_rbuf(struct layer_core_rbuf_entry *entry, struct iovec *iov,
				  size_t *count)
{
	struct layer_buf *buf = entry->op_context;
	struct layer_chan *chan = entry->ep_context;
	struct layer_msg_chan *mchan = layer_msg_chan_of(chan);
	struct layer_msg_core *mcore = layer_msg_core_of(chan->core);
	struct layer_core *core = &mcore->core;

	/* The buffer is the channel's from now on: out of the shared context's list, so that
	 * the channel is kept until the core gives it back. */
	util_dlist_remove(&buf->link);
	layer_msg_srx_taken(mcore);
	buf->ctx.chan = chan;
	util_dlist_insert_tail(&buf->link, &mchan->taken_bufs);
	mchan->taken_cnt++;
	/* a runt (not from ofi_layer): its stream is lost already, close the connection */
	if (unlikely(entry->len < LAYER_HDR_SIZE))
		return -FI_EIO;
	buf->len = entry->len;
	if (mchan->ring)
		buf->is_behind_ring = layer_ring_is_behind(mchan->ring, layer_buf_hdr(buf));
	return core->up->place(core->up_arg, buf, iov, count);
}

/* tcp keeps a pointer to it for the domain's life. */
static struct layer_core_rbuf_ops layer_msg_rbuf_ops = {
	.size = sizeof(layer_msg_rbuf_ops),
	.get_rbuf = layer_msg_get_rbuf,
};

bool layer_core_msg_direct_recv_init(struct layer_domain *domain)
{
	uint32_t version = fi_version();
	int ret;

	if (!layer_settings.direct_recv || FI_MAJOR(version) != 1 || FI_MINOR(version) != 17 ||
	    strcasecmp(domain->core_info->fabric_attr->prov_name, "tcp"))
		return false;
	ret = fi_set_ops(&domain->core_domain->fid, "ofix_dynamic_rbuf_v2", 0,
			 &layer_msg_rbuf_ops, NULL);
	if (ret) {
		FI_INFO(&layer_prov, FI_LOG_DOMAIN, "no direct receive: %s\n", fi_strerror(-ret));
		return false;
	}
	return true;
}

/* ---- channel ids ---- */


/* Ids are slot + 1 in the low 32 bits (0 is "none"), a generation in the high 32. */
static inline uint32_t layer_msg_id_slot(uint64_t id)
{
	return (uint32_t) id - 1;
}

static int layer_msg_ids_grow(struct layer_msg_ids *ids)
{
	uint32_t cap = ids->cap ? ids->cap * 2 : 64, i;
	struct layer_msg_chan **slots;
	uint32_t *next_free;

	if (cap <= ids->cap)
		return -FI_ENOMEM;
	slots = realloc(ids->slots, cap * sizeof(*slots));
	if (!slots)
		return -FI_ENOMEM;
	ids->slots = slots;
	next_free = realloc(ids->next_free, cap * sizeof(*next_free));
	if (!next_free)
		return -FI_ENOMEM;
	ids->next_free = next_free;
	/* the new slots, lowest first, ahead of the free list (empty: the table was full) */
	for (i = ids->cap; i < cap; i++) {
		slots[i] = NULL;
		next_free[i] = i + 1 < cap ? i + 2 : 0;
	}
	ids->free_head = ids->cap + 1;
	ids->cap = cap;
	return 0;
}

int layer_msg_id_alloc(struct layer_msg_core *mcore, struct layer_msg_chan *mchan)
{
	struct layer_msg_ids *ids = &mcore->ids;
	uint32_t slot;
	int ret;

	if (!mcore->has_rx_id)
		return 0;
	if (!ids->free_head) {
		ret = layer_msg_ids_grow(ids);
		if (ret)
			return ret;
	}
	slot = ids->free_head - 1;
	ids->free_head = ids->next_free[slot];
	ids->slots[slot] = mchan;
	mchan->id = (uint64_t) ++ids->gen << 32 | (slot + 1);
	return 0;
}

void layer_msg_id_free(struct layer_msg_core *mcore, struct layer_msg_chan *mchan)
{
	struct layer_msg_ids *ids = &mcore->ids;
	uint32_t slot;

	/* at close the table goes first */
	if (!mchan->id || !ids->slots) {
		mchan->id = 0;
		return;
	}
	slot = layer_msg_id_slot(mchan->id);
	ids->slots[slot] = NULL;
	ids->next_free[slot] = ids->free_head;
	ids->free_head = slot + 1;
	mchan->id = 0;
}

/* The channel a peer's remote CQ data names, or NULL (gone, or not an id of ours). */
static struct layer_msg_chan *layer_msg_id_find(struct layer_msg_core *mcore, uint64_t id)
{
	struct layer_msg_ids *ids = &mcore->ids;
	uint32_t slot = layer_msg_id_slot(id);
	struct layer_msg_chan *mchan;

	if (slot >= ids->cap)
		return NULL;
	mchan = ids->slots[slot];
	return mchan && mchan->id == id ? mchan : NULL;
}

/* ---- buffers ---- */


int layer_msg_post_buf(struct layer_core *core, struct layer_chan *chan,
		       struct layer_buf *buf)
{
	struct layer_msg_core *mcore = layer_msg_core_of(core);
	ssize_t ret;

	(void) chan;
	/* A buffer given back once enough are posted goes to the pool. */
	if (!mcore->srx || mcore->is_closed || mcore->srx_cnt >= mcore->buf_target)
		return -FI_EAGAIN;
	layer_core_buf_reset(buf, NULL);
	/* Direct receive: the header only, the core asks for the rest (see above). */
	ret = fi_recv(mcore->srx, buf->data,
		      core->domain->has_direct_recv ? LAYER_HDR_SIZE : core->buf_size, NULL,
		      FI_ADDR_UNSPEC, buf);
	if (ret)
		return (int) ret;
	util_dlist_insert_tail(&buf->link, &mcore->srx_bufs);
	mcore->srx_cnt++;
	/* the core may hold messages it had no buffer for, on connections whose sockets say
	 * nothing more: every group is read once */
	if (unlikely(mcore->is_dry))
		layer_msg_cqgs_mark_all(mcore);
	return 0;
}

void layer_msg_refill(struct layer_core *core, size_t upto)
{
	struct layer_msg_core *mcore = layer_msg_core_of(core);
	struct layer_buf *buf;

	while (mcore->srx_cnt < UTIL_MIN(upto, mcore->buf_target)) {
		buf = layer_core_buf_get(core);
		if (!buf)
			return;
		if (layer_msg_post_buf(core, NULL, buf)) {
			layer_core_buf_put(core, buf);
			return;
		}
	}
}

int layer_msg_rx_open(struct layer_msg_core *mcore)
{
	struct layer_core *core = &mcore->core;
	struct fi_rx_attr attr = *core->info->rx_attr;
	int ret;

	mcore->buf_max = layer_settings.rx_buf_cnt * LAYER_MSG_BUF_FACTOR;
	mcore->buf_target = UTIL_MIN(UTIL_MAX(layer_settings.rx_buf_cnt / 4,
					      (size_t) LAYER_MSG_BUF_FIRST), mcore->buf_max);
	/* With direct receive the core names the endpoint of each message; else peers do. */
	mcore->has_rx_id = !core->domain->has_direct_recv;
	attr.size = UTIL_MAX(attr.size, mcore->buf_max);
	ret = fi_srx_context(core->domain->core_domain, &attr, &mcore->srx, core);
	if (ret) {
		FI_WARN(&layer_prov, FI_LOG_EP_CTRL, "the core has no shared receive context: "
			"%s\n", fi_strerror(-ret));
		return ret;
	}
	/* every channel's core endpoint shares it */
	core->info->ep_attr->rx_ctx_cnt = FI_SHARED_CONTEXT;
	layer_msg_refill(core, SIZE_MAX);
	if (mcore->srx_cnt < mcore->buf_target) {
		layer_msg_rx_close(mcore);
		return -FI_ENOMEM;
	}
	return 0;
}

void layer_msg_rx_close(struct layer_msg_core *mcore)
{
	struct util_dlist *item;

	if (mcore->srx) {
		fi_close(&mcore->srx->fid);
		mcore->srx = NULL;
	}
	/* nothing completes after its close: what it held goes back to the pool */
	while ((item = util_dlist_pop_front(&mcore->srx_bufs)))
		layer_core_buf_put(&mcore->core, container_of(item, struct layer_buf, link));
	mcore->srx_cnt = 0;
	free(mcore->ids.slots);
	free(mcore->ids.next_free);
	memset(&mcore->ids, 0, sizeof(mcore->ids));
}

void layer_msg_release_taken(struct layer_msg_chan *mchan, int err)
{
	struct layer_core *core = mchan->chan.core;
	struct util_dlist *item;
	struct layer_buf *buf;

	while ((item = util_dlist_pop_front(&mchan->taken_bufs))) {
		mchan->taken_cnt--;
		buf = container_of(item, struct layer_buf, link);
		if (mchan->chan.conn)
			core->up->buf_lost(core->up_arg, buf, err);
		else
			layer_core_buf_put(core, buf);
	}
}

/* ---- completions ---- */

/*
 * The channel a completed buffer's message came on: the one the core named (direct
 * receive), or the one the peer's id names (remote CQ data); NULL when neither says (the
 * channel is gone, or the peer broke the protocol). The buffer leaves its list.
 */
static struct layer_msg_chan *layer_msg_buf_chan(struct layer_msg_core *mcore,
						 struct layer_buf *buf, uint64_t flags,
						 uint64_t data)
{
	struct layer_msg_chan *mchan;

	util_dlist_remove(&buf->link);
	if (buf->ctx.chan) {
		mchan = layer_msg_chan_of(buf->ctx.chan);
		mchan->taken_cnt--;
		return mchan;
	}
	layer_msg_srx_taken(mcore);
	if (!mcore->has_rx_id || !(flags & FI_REMOTE_CQ_DATA))
		return NULL;
	mchan = layer_msg_id_find(mcore, data);
	if (mchan)
		buf->ctx.chan = &mchan->chan;
	return mchan;
}

/* A message came in on a channel. */
static void layer_msg_handle_buf(struct layer_msg_core *mcore, struct layer_buf *buf,
				 const struct fi_cq_data_entry *comp)
{
	struct layer_core *core = &mcore->core;
	struct layer_msg_chan *mchan;
	const struct layer_hdr *hdr;
	struct layer_ring *ring;
	int ret;

	mchan = layer_msg_buf_chan(mcore, buf, comp->flags, comp->data);
	buf->len = comp->len;
	if (unlikely(!mchan || !mchan->chan.conn)) {
		/* a peer that names no channel of ours, or one let go of */
		if (!mchan)
			layer_core_dropped(core, buf, "it names no connection of this endpoint");
		layer_core_repost(core, buf);
		return;
	}
	/*
	 * The ring's slots written before it go up first; those after it once it is up. The
	 * count is kept from the channel's first message on, though this side may not know the
	 * peer's ring yet (a connection's data can come before its event does, libfabric 1.22):
	 * the peer writes into ours as soon as it knows it.
	 */
	hdr = layer_buf_hdr(buf);
	ring = mchan->ring;
	if (buf->len >= sizeof(*hdr))
		layer_ring_before_msg(ring, hdr);
	if (unlikely(layer_ring_is_ctl(hdr->op) && layer_hdr_fits(hdr, buf->len))) {
		/* the rings' own: kept here */
		ret = layer_ring_ctl_arrive(ring, buf);
		/* taken, but no traffic of the application's: it earns nothing */
		ring->msgs_taken++;
		layer_core_repost(core, buf);
		if (ret)
			core->up->failed(core->up_arg, &mchan->chan, EPROTO);
		return;
	}
	core->up->recv(core->up_arg, buf);
	/* the channel may be closed now: its ring stays until it is freed */
	layer_ring_after_msg(ring);
}

/* On a connected core an error fails the operation's connection, then the operation. */
static void layer_msg_handle_error(struct layer_msg_core *mcore,
				   const struct fi_cq_err_entry *err)
{
	struct layer_core *core = &mcore->core;
	struct layer_ctx *ctx = err->op_context;
	int code = err->err ? err->err : FI_EIO;
	struct layer_msg_chan *mchan;
	struct layer_buf *buf;

	if (!ctx)
		return;
	if (ctx->type != LAYER_CTX_BUF) {
		/* a read fails alone (a key the peer never registered, say) */
		if (code != FI_ECANCELED && ctx->type != LAYER_CTX_READ && ctx->chan->core_ep &&
		    ctx->chan->conn)
			core->up->failed(core->up_arg, ctx->chan, code);
		core->up->done(core->up_arg, ctx, code);
		return;
	}
	buf = container_of(ctx, struct layer_buf, ctx);
	mchan = layer_msg_buf_chan(mcore, buf, 0, 0);
	if (!mchan || !mchan->chan.conn) {
		/* its message was lost with a connection the core does not name: that
		 * connection's own events report it */
		layer_core_repost(core, buf);
		return;
	}
	if (code != FI_ECANCELED && mchan->chan.core_ep)
		core->up->failed(core->up_arg, &mchan->chan, code);
	/* a receive matched to its message fails as the connection did (the connection may
	 * be gone already: the buffer needs nothing of it) */
	core->up->buf_lost(core->up_arg, buf, code == FI_ECANCELED ? FI_EIO : code);
}

void layer_msg_read_cq(struct layer_msg_core *mcore, struct fid_cq *cq)
{
	struct layer_core *core = &mcore->core;
	struct fi_cq_data_entry comp[64];
	struct fi_cq_err_entry err;
	size_t batch = UTIL_MIN(layer_settings.cq_batch, UTIL_ARRAY_SIZE(comp));
	struct layer_ctx *ctx;
	ssize_t ret, i;

	/* Until a read returns fewer entries than asked (a channel closed while handling them
	 * marks its group: read again, what the core flushed for it is there). */
	for (;;) {
		ret = fi_cq_read(cq, comp, batch);
		if (ret == -FI_EAVAIL) {
			memset(&err, 0, sizeof(err));
			if (fi_cq_readerr(cq, &err, 0) == 1)
				layer_msg_handle_error(mcore, &err);
			continue;
		}
		if (ret <= 0)
			return;
		for (i = 0; i < ret; i++) {
			ctx = comp[i].op_context;
			if (ctx->type == LAYER_CTX_BUF)
				layer_msg_handle_buf(mcore,
						     container_of(ctx, struct layer_buf, ctx),
						     &comp[i]);
			else
				core->up->done(core->up_arg, ctx, 0);
		}
		if ((size_t) ret < batch)
			return;
	}
}

/* ---- rings ---- */

/*
 * What peers wrote into the rings. A message handed up may close channels, whose rings then
 * leave the list: the walk starts over (a ring polled twice finds nothing new).
 */
void layer_msg_poll_rings(struct layer_msg_core *mcore)
{
	struct layer_ring *ring;
	struct util_dlist *item;
	uint64_t gen;

restart:
	gen = mcore->rings.gen;
	util_dlist_foreach(&mcore->rings.active, item) {
		ring = container_of(item, struct layer_ring, link);
		if (layer_ring_poll(ring))
			mcore->core.up->failed(mcore->core.up_arg, ring->chan, EPROTO);
		if (gen != mcore->rings.gen)
			goto restart;
	}
}

/*
 * Whether a slot is whole in a ring. fi_trywait reads the core CQ (libfabric's poll sets
 * do), which progresses tcp: what it reads from the sockets then, a peer's write into a ring
 * among it, is out of them, and the fds would not wake a sleeper for it.
 */
bool layer_msg_rings_ready(struct layer_msg_core *mcore)
{
	struct util_dlist *item;

	util_dlist_foreach(&mcore->rings.active, item) {
		if (layer_ring_is_ready(container_of(item, struct layer_ring, link)))
			return true;
	}
	return false;
}
