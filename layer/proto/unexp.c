/*
 * Unexpected messages: what they hold, and the bound on it (FI_OFI_LAYER_UNEXP_MAX).
 *
 * A message that matches no posted receive is kept until one does, in arrival order (in its
 * receive queue, rxq.c). An eager message keeps the bounce buffer it
 * arrived in: no second copy. A rendezvous request, a small message (up to the inject size)
 * whose sender waits for an acknowledgement, and past the limit any small message, is copied
 * into a record of LAYER_RECORD_SIZE bytes, and its bounce buffer goes back to the core at
 * once: a large unexpected message costs its header only, a small one past the limit a
 * record instead of a whole buffer.
 *
 * unexp->bytes counts what they hold, bounce buffers and records as allocated. Under the
 * limit nothing changes: the core gets a buffer back for every one an unexpected message
 * took from its home (the endpoint's shared buffers, over either core). Past it, two
 * things happen:
 * - Stall: the core gets no buffer back, so a home runs dry once the buffers it had posted
 *   are used up. The core then holds its peers' data: tcp stops reading the socket, whose
 *   flow control stalls the sender, whose core sends and then whose ofi_layer sends queue
 *   until its tx_size is used up (-FI_EAGAIN). Buffers of messages received or discarded go
 *   back to their homes; once under the limit, every home is refilled.
 * - Pacing: the sender of an eager message above the inject size that arrives unexpected is
 *   asked (PACE) to send such messages by rendezvous: its sends then complete once this
 *   endpoint has matched them, what it sends waits here as records, at most its tx_size of
 *   them, and its application sees its sends wait, then -FI_EAGAIN. UNPACE releases it once
 *   under half the limit. Small messages are not paced: a sender that waits for its small
 *   sends to complete before it sends the one the receiver waits for (a window of sends,
 *   as fi_layer_bench's unexpected test keeps) would never get there.
 *
 * No deadlock: what the application waits for may sit behind stalled data, in the same
 * socket or, over an RDM core, behind any peer's: a message for a posted receive, the data
 * of a rendezvous read, the ACK, read request or HELLO_ACK a send waits for. So the stall
 * holds only while the endpoint waits for nothing (no receive posted or reading, no send
 * outstanding); as soon as it does, every home is refilled and data flows as under the
 * limit, pacing keeping what comes in small. An FI_PEEK that finds nothing lets one more
 * message into each home left dry, so that a probe loop moves forward too.
 *
 * So, exactly: as long as the endpoint has waited for nothing since it went past the limit,
 * unexpected memory stays under the limit plus the buffers its home had posted then
 * (4 * rx_buf_cnt; with direct receive, each with a payload allocation of up to
 * direct_eager_size, which counts too), plus one buffer per FI_PEEK that found nothing. Waiting lets in more:
 * what its senders had handed to their core before they were paced, one record per paced
 * send (each sender's tx_size at most), and one record per small message that arrives.
 */
#include "config.h"

#include <string.h>

#include "layer/proto/proto.h"
#include "layer/proto/tx.h"
#include "layer/proto/unexp.h"

int layer_unexp_init(struct layer_unexp *unexp)
{
	memset(unexp, 0, sizeof(*unexp));
	unexp->limit = layer_settings.unexp_max;
	return util_bufpool_init(&unexp->rec_pool, sizeof(struct layer_buf) + LAYER_RECORD_SIZE,
				 0, 64, 0);
}

void layer_unexp_fini(struct layer_unexp *unexp)
{
	util_bufpool_fini(&unexp->rec_pool);
}

/* What a kept message counts: its bounce buffer or its record, as allocated. */
static inline size_t layer_unexp_charge(const struct layer_proto *proto,
					const struct layer_buf *buf)
{
	return buf->is_record ? proto->unexp.rec_pool.elem_size :
				proto->core->buf_pool.elem_size + buf->ext_len;
}

/*
 * The endpoint may be waiting for something that comes through a stalled home: a receive is
 * posted (or reading), or a send is outstanding (its ACK, the peer's read request, the
 * HELLO_ACK that lets it go).
 */
static inline bool layer_unexp_is_waiting(const struct layer_proto *proto)
{
	return proto->rx_used || proto->tx_used;
}

static inline bool layer_unexp_is_stalled(const struct layer_proto *proto)
{
	return proto->unexp.bytes > proto->unexp.limit && !layer_unexp_is_waiting(proto);
}

/*
 * Copied into a record: a message that fits one, if its sender waits for our answer or if
 * keeping its buffer would take the endpoint past its limit.
 */
static bool layer_unexp_fits_record(const struct layer_proto *proto,
				    const struct layer_buf *buf)
{
	const struct layer_hdr *hdr = layer_buf_hdr(buf);

	return buf->len <= LAYER_RECORD_SIZE && !buf->ext &&
	       (hdr->op == LAYER_OP_RTS || (hdr->flags & LAYER_HDR_ACK_REQ) ||
		proto->unexp.bytes + proto->core->buf_pool.elem_size > proto->unexp.limit);
}

static struct layer_buf *layer_unexp_record(struct layer_proto *proto,
					    const struct layer_buf *buf)
{
	struct layer_buf *rec;

	rec = util_bufpool_get(&proto->unexp.rec_pool);
	if (!rec)
		return NULL;
	layer_core_buf_reset(rec, buf->ctx.chan);
	rec->is_record = true;
	rec->len = buf->len;
	rec->src_addr = buf->src_addr;
	rec->key = buf->key;
	memcpy(rec->data, buf->data, buf->len);
	return rec;
}

/* Asks the peer of conn to pace its sends to this endpoint, once. */
static void layer_unexp_pace(struct layer_proto *proto, struct layer_conn *conn)
{
	if (!conn || conn->is_pace_asked || conn->state == LAYER_CONN_CLOSED)
		return;
	if (layer_tx_ctrl(proto, conn, LAYER_OP_PACE, 0, 0))
		return;
	FI_INFO(&layer_prov, FI_LOG_EP_DATA,
		"unexpected messages hold %zu bytes (limit %zu): pacing a sender\n",
		proto->unexp.bytes, proto->unexp.limit);
	conn->is_pace_asked = true;
	proto->unexp.is_pacing = true;
	proto->unexp.pace_cnt++;
}

static void layer_unexp_unpace(struct layer_proto *proto)
{
	struct util_dlist *item, *tmp;
	struct layer_conn *conn;

	proto->unexp.is_pacing = false;
	/* A failed send moves its connection off the list, and only that one. */
	util_dlist_foreach_safe(&proto->conns->live, item, tmp) {
		conn = container_of(item, struct layer_conn, link);
		if (!conn->is_pace_asked)
			continue;
		conn->is_pace_asked = false;
		/* Without memory for it, the peer stays paced: slower, never wrong. */
		layer_tx_ctrl(proto, conn, LAYER_OP_UNPACE, 0, 0);
	}
}

struct layer_buf *layer_unexp_keep(struct layer_proto *proto, struct layer_buf *buf)
{
	const struct layer_hdr *hdr = layer_buf_hdr(buf);
	struct layer_unexp *unexp = &proto->unexp;
	struct layer_buf *kept = buf, *spare = NULL;
	struct layer_chan *home = buf->ctx.chan;

	if (layer_unexp_fits_record(proto, buf)) {
		kept = layer_unexp_record(proto, buf);
		if (kept)
			spare = buf;
		else
			kept = buf;
	}
	unexp->bytes += layer_unexp_charge(proto, kept);
	unexp->cnt++;
	if (unexp->bytes > unexp->max_bytes)
		unexp->max_bytes = unexp->bytes;

	if (unlikely(unexp->bytes > unexp->limit)) {
		/* Its sender does not wait for us and it is too big for a record: pace it. */
		if (hdr->op == LAYER_OP_EAGER && hdr->size > LAYER_INJECT_SIZE &&
		    !(hdr->flags & LAYER_HDR_ACK_REQ))
			layer_unexp_pace(proto, home ? home->conn : NULL);
		if (!layer_unexp_is_waiting(proto)) {
			/* Held back: the home runs one buffer short. */
			unexp->is_short = true;
			unexp->stall_cnt++;
			if (spare)
				layer_core_buf_put(proto->core, spare);
			return kept;
		}
	}
	if (!spare)
		spare = layer_core_buf_get(proto->core);
	if (spare) {
		layer_core_buf_reset(spare, home);
		layer_core_repost(proto->core, spare);
	}
	return kept;
}

void layer_unexp_put(struct layer_proto *proto, struct layer_buf *buf)
{
	proto->unexp.bytes -= layer_unexp_charge(proto, buf);
	proto->unexp.cnt--;
	if (buf->is_record)
		util_bufpool_put(&proto->unexp.rec_pool, buf);
	else
		layer_core_buf_put(proto->core, buf);
}

void layer_unexp_release(struct layer_proto *proto, struct layer_buf *buf)
{
	if (buf->is_record) {
		layer_unexp_put(proto, buf);
	} else {
		/* Its home posts it if it was left short, else it goes to the pool. */
		proto->unexp.bytes -= layer_unexp_charge(proto, buf);
		proto->unexp.cnt--;
		layer_core_repost(proto->core, buf);
	}
	layer_unexp_check(proto);
}

void layer_unexp_peek_missed(struct layer_proto *proto)
{
	if (!proto->unexp.is_short)
		return;
	if (layer_unexp_is_stalled(proto))
		proto->core->ops->refill(proto->core, 1);
	else
		layer_unexp_update(proto);
}

void layer_unexp_update(struct layer_proto *proto)
{
	struct layer_unexp *unexp = &proto->unexp;

	if (unexp->is_short && !layer_unexp_is_stalled(proto)) {
		unexp->is_short = false;
		proto->core->ops->refill(proto->core, SIZE_MAX);
	}
	if (unexp->is_pacing && unexp->bytes <= unexp->limit / 2)
		layer_unexp_unpace(proto);
}
