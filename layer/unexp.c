/*
 * Unexpected messages: what keeps them, and what they hold.
 *
 * A message that matches no posted receive is kept until one does, in arrival order (on
 * ep->unexp_msgs, or in util's tag matcher). An eager message keeps the bounce buffer it
 * arrived in: no second copy. A message whose sender waits for this endpoint's answer (a
 * rendezvous request, or a small message sent with an acknowledgement request) is copied into
 * a record of LAYER_RECORD_SIZE bytes, and its bounce buffer goes back to the core at once:
 * a large unexpected message costs its header only. The core gets a buffer back for every
 * one an unexpected message took from its home (MSG: the connection; RDM: the endpoint).
 *
 * ep->unexp_bytes counts what they hold, bounce buffers and records as allocated.
 */
#include "config.h"

#include <string.h>

#include "layer/ep.h"

/* What a kept message counts: its bounce buffer or its record, as allocated. */
static inline size_t layer_unexp_charge(const struct layer_ep *ep,
					const struct layer_rx_buf *buf)
{
	return buf->is_record ? ep->rec_pool.elem_size : ep->buf_pool.elem_size;
}

/* A sender that waits for our answer, and a message small enough for a record. */
static bool layer_unexp_fits_record(const struct layer_rx_buf *buf)
{
	const struct layer_hdr *hdr = (const struct layer_hdr *) buf->data;

	return buf->len <= LAYER_RECORD_SIZE &&
	       (hdr->op == LAYER_OP_RTS || (hdr->flags & LAYER_HDR_ACK_REQ));
}

static struct layer_rx_buf *layer_unexp_record(struct layer_ep *ep,
					       const struct layer_rx_buf *buf)
{
	struct layer_rx_buf *rec;

	rec = util_bufpool_get(&ep->rec_pool);
	if (!rec)
		return NULL;
	rec->type = LAYER_CTX_RX_BUF;
	rec->is_record = true;
	rec->conn = buf->conn;
	rec->len = buf->len;
	rec->src_addr = buf->src_addr;
	rec->key = buf->key;
	memcpy(rec->data, buf->data, buf->len);
	return rec;
}

struct layer_rx_buf *layer_unexp_keep(struct layer_ep *ep, struct layer_rx_buf *buf)
{
	struct layer_conn *conn = buf->conn;
	struct layer_rx_buf *kept = buf, *spare = NULL;

	if (layer_unexp_fits_record(buf)) {
		kept = layer_unexp_record(ep, buf);
		if (kept)
			spare = buf;
		else
			kept = buf;
	}
	ep->unexp_bytes += layer_unexp_charge(ep, kept);
	ep->unexp_cnt++;
	if (ep->unexp_bytes > ep->unexp_max_bytes)
		ep->unexp_max_bytes = ep->unexp_bytes;

	if (!spare)
		spare = util_bufpool_get(&ep->buf_pool);
	if (spare && layer_core_post_buf(ep, conn, spare))
		util_bufpool_put(&ep->buf_pool, spare);
	return kept;
}

void layer_unexp_put(struct layer_ep *ep, struct layer_rx_buf *buf)
{
	ep->unexp_bytes -= layer_unexp_charge(ep, buf);
	ep->unexp_cnt--;
	util_bufpool_put(buf->is_record ? &ep->rec_pool : &ep->buf_pool, buf);
}

void layer_unexp_release(struct layer_ep *ep, struct layer_rx_buf *buf)
{
	if (buf->is_record) {
		layer_unexp_put(ep, buf);
		return;
	}
	/* Its home posts it if it is short of one, else it goes to the pool. */
	ep->unexp_bytes -= layer_unexp_charge(ep, buf);
	ep->unexp_cnt--;
	layer_proto_repost_buf(ep, buf);
}
