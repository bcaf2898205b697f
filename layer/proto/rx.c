/*
 * The receive path (rx.h). Every message that arrives comes through layer_rx_arrive, with
 * its sender set by the connection layer: it is checked, then a control message goes to the
 * transmit path (ACK, PACE, UNPACE) and a data message to its receive queue (rxq.c), which
 * matches it against the posted receives in posting order; delivered, or kept as unexpected
 * (unexp.c) in arrival order until a receive or a probe takes it. Multi-receive buffers take
 * one message after the other in slices; rendezvous messages are pulled once matched
 * (rndv.c). A receive that takes a message reports it in a completion.
 *
 * Direct receive (core_msg.c): the core asks where an eager message's payload goes as soon
 * as its header is in (layer_rx_place), and it is matched there and then, in arrival order
 * as at completion; see there.
 */
#include "config.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "layer/atomic/atomic.h"
#include "layer/av/av.h"
#include "layer/cma/cma.h"
#include "layer/coll/coll.h"
#include "layer/proto/proto.h"
#include "layer/proto/rndv.h"
#include "layer/proto/rx.h"
#include "layer/proto/tx.h"
#include "layer/rma/grant.h"
#include "layer/rma/rma.h"

static inline struct layer_rxq *layer_rx_queue(struct layer_proto *proto,
					       const struct layer_hdr *hdr)
{
	if (unlikely(hdr->flags & LAYER_HDR_COLL))
		return &proto->coll_q;
	return hdr->flags & LAYER_HDR_TAGGED ? &proto->tag_q : &proto->msg_q;
}

/* Copies up to len bytes from src into the iovs, skipping the first offset bytes of them. */
static size_t layer_rx_copy_to_iov(const struct iovec *iov, size_t cnt, size_t offset,
				   const void *src, size_t len)
{
	size_t i, n, done = 0;

	for (i = 0; i < cnt && done < len; i++) {
		if (offset >= iov[i].iov_len) {
			offset -= iov[i].iov_len;
			continue;
		}
		n = UTIL_MIN(iov[i].iov_len - offset, len - done);
		memcpy((char *) iov[i].iov_base + offset, (const char *) src + done, n);
		done += n;
		offset = 0;
	}
	return done;
}

/* ---- receives ---- */

struct layer_rx *layer_rx_get(struct layer_proto *proto)
{
	struct layer_rx *rx;

	rx = util_bufpool_get(&proto->rx_pool);
	if (!rx)
		return NULL;
	proto->rx_used++;
	/* only a rendezvous read gives it to the core (LAYER_CTX_READ) */
	rx->ctx.type = LAYER_CTX_READ;
	rx->ctx.chan = NULL;
	rx->on_read_done = NULL;
	rx->on_done = NULL;
	return rx;
}

void layer_rx_free(struct layer_proto *proto, struct layer_rx *rx)
{
	proto->rx_used--;
	util_bufpool_put(&proto->rx_pool, rx);
}

/* A receive with its buffers; NULL without memory. */
static struct layer_rx *layer_rx_new(struct layer_proto *proto, void *context, uint64_t flags,
				     const struct iovec *iov, size_t iov_cnt, fi_addr_t src)
{
	struct layer_rx *rx;
	size_t i;

	rx = layer_rx_get(proto);
	if (!rx)
		return NULL;
	rx->context = context;
	rx->flags = flags;
	rx->src_addr = src;
	rx->iov_cnt = iov_cnt;
	rx->len = 0;
	for (i = 0; i < iov_cnt; i++) {
		rx->iov[i] = iov[i];
		rx->len += iov[i].iov_len;
	}
	rx->mrecv_used = 0;
	rx->tag = 0;
	util_dlist_init(&rx->link);
	return rx;
}

/* A receive of the application, within the receive queue's size; NULL when it is full. */
static struct layer_rx *layer_rx_alloc(struct layer_proto *proto, void *context,
				       uint64_t flags, const struct iovec *iov, size_t iov_cnt,
				       fi_addr_t src)
{
	if (proto->rx_used >= proto->rx_size)
		return NULL;
	return layer_rx_new(proto, context, flags, iov, iov_cnt, src);
}

void layer_rx_report(struct layer_proto *proto, struct layer_rx *rx, void *buf, size_t len,
		     uint64_t cq_flags, uint64_t data, fi_addr_t src, int err, size_t olen)
{
	struct fi_cq_err_entry entry;

	if (unlikely(rx->on_done)) {
		rx->on_done(proto, rx, len, err);
		return;
	}
	/* Completions report the AV's user ID for a source that has one. */
	if (src != FI_ADDR_NOTAVAIL && proto->av)
		src = layer_av_report_addr(proto->av, src);
	if (unlikely(err)) {
		entry = (struct fi_cq_err_entry) {
			.op_context = rx->context,
			.flags = cq_flags,
			.len = len,
			.buf = buf,
			.data = data,
			.tag = cq_flags & FI_TAGGED ? rx->tag : 0,
			.olen = olen,
			.err = err,
			.prov_errno = -err,
		};
		/* an overrun CQ records its own loss (util/cq.h) */
		if (proto->rx_cq)
			(void) util_cq_write_error(&proto->rx_cq->util, &entry);
		if (proto->recv_cntr)
			util_cntr_inc_err(&proto->recv_cntr->util);
		return;
	}
	if ((rx->flags & FI_COMPLETION) && proto->rx_cq)
		(void) util_cq_write(&proto->rx_cq->util, rx->context, cq_flags, len, buf, data,
				     cq_flags & FI_TAGGED ? rx->tag : 0, src);
	if (proto->recv_cntr)
		util_cntr_inc(&proto->recv_cntr->util);
}

/* Whether a message's connection can still carry an answer to it. */
static inline struct layer_conn *layer_rx_answer_conn(const struct layer_buf *buf)
{
	struct layer_conn *conn = buf->ctx.chan ? buf->ctx.chan->conn : NULL;

	return conn && conn->state != LAYER_CONN_CLOSED ? conn : NULL;
}

/*
 * Delivers the message in buf to rx. A multi-receive buffer takes the next slice of itself
 * and stays posted until less than min_multi_recv remains. Returns true when rx was
 * consumed (no longer posted).
 */
static bool layer_rx_deliver(struct layer_proto *proto, struct layer_rx *rx,
			     struct layer_buf *buf)
{
	const struct layer_hdr *hdr = layer_buf_hdr(buf);
	uint64_t cq_flags = FI_RECV | (hdr->flags & LAYER_HDR_TAGGED ? FI_TAGGED : FI_MSG);
	size_t offset = 0, space = rx->len, copied;
	bool is_multi = rx->flags & FI_MULTI_RECV;
	bool is_released = true;
	struct layer_conn *conn;
	uint64_t data = 0;
	void *dst;

	if (hdr->flags & LAYER_HDR_CQ_DATA) {
		cq_flags |= FI_REMOTE_CQ_DATA;
		data = hdr->data;
	}
	rx->tag = hdr->tag;
	if (is_multi) {
		offset = rx->mrecv_used;
		space = rx->len - offset;
		/* A slice never splits a message: a message larger than what is left is
		 * truncated and the buffer released. */
		rx->mrecv_used += UTIL_MIN(space, hdr->size);
		is_released = rx->len - rx->mrecv_used < proto->min_multi_recv ||
			      hdr->size > space;
		if (is_released) {
			cq_flags |= FI_MULTI_RECV;
			layer_rxq_remove(&proto->msg_q, rx);
		}
	}
	dst = rx->iov_cnt ? (char *) rx->iov[0].iov_base + offset : NULL;
	FI_DBG(&layer_prov, FI_LOG_EP_DATA, "receive %p takes %s of %" PRIu64 " bytes, tag %#"
	       PRIx64 ", from %#" PRIx64 "\n", rx->context, layer_op_str(hdr->op), hdr->size,
	       hdr->tag, (uint64_t) buf->src_addr);

	if (hdr->op == LAYER_OP_RTS) {
		layer_rndv_start_read(proto, rx, buf, offset, space, cq_flags, is_released);
		return is_released;
	}

	/* Placed by the core already (direct receive), or copied from where it waits. */
	if (buf->is_placed)
		copied = UTIL_MIN(hdr->size, space);
	else
		copied = layer_rx_copy_to_iov(rx->iov, rx->iov_cnt, offset, layer_buf_payload(buf),
					      UTIL_MIN(hdr->size, space));
	if ((hdr->flags & LAYER_HDR_ACK_REQ) && (conn = layer_rx_answer_conn(buf)))
		layer_tx_ctrl(proto, conn, LAYER_OP_ACK, 0, hdr->msg_id);
	if (copied < hdr->size)
		layer_rx_report(proto, rx, dst, copied, cq_flags, data, buf->src_addr, FI_ETRUNC,
				hdr->size - copied);
	else
		layer_rx_report(proto, rx, dst, copied, cq_flags, data, buf->src_addr, 0, 0);
	if (is_released)
		layer_rx_free(proto, rx);
	return is_released;
}

/* A message nobody will receive (off its queue): its sender is answered when it waits. */
static void layer_rx_discard(struct layer_proto *proto, struct layer_buf *buf)
{
	const struct layer_hdr *hdr = layer_buf_hdr(buf);
	struct layer_conn *conn;

	if ((hdr->op == LAYER_OP_RTS || (hdr->flags & LAYER_HDR_ACK_REQ)) &&
	    (conn = layer_rx_answer_conn(buf)))
		layer_tx_ctrl(proto, conn, LAYER_OP_ACK, 0, hdr->msg_id);
	layer_unexp_release(proto, buf);
}

ssize_t layer_rx_post(struct layer_proto *proto, const struct iovec *iov, size_t iov_cnt,
		      fi_addr_t src, uint64_t flags, void *context)
{
	struct layer_buf *buf;
	struct layer_rx *rx;
	bool is_released;

	rx = layer_rx_alloc(proto, context, flags, iov, iov_cnt, src);
	if (!rx)
		return -FI_EAGAIN;
	/* A multi-receive buffer takes what waits, message after message, while it has room. */
	while ((buf = layer_rxq_take(&proto->msg_q, 0, 0, src))) {
		is_released = layer_rx_deliver(proto, rx, buf);
		layer_unexp_release(proto, buf);
		if (is_released)
			return 0;
	}
	layer_rxq_post(&proto->msg_q, rx, 0, 0);
	/* A receive waits: a stall on receiving is lifted (its message may be behind it). */
	layer_unexp_check(proto);
	return 0;
}

/* A tagged receive (tagged or collective queue) takes the earliest message waiting for it,
 * or waits itself. */
static void layer_rx_match_or_post(struct layer_proto *proto, struct layer_rxq *q,
				   struct layer_rx *rx, uint64_t tag, uint64_t ignore)
{
	struct layer_buf *buf = layer_rxq_take(q, tag, ignore, rx->src_addr);

	if (buf) {
		layer_rx_deliver(proto, rx, buf);
		layer_unexp_release(proto, buf);
		return;
	}
	layer_rxq_post(q, rx, tag, ignore);
	/* A receive waits: a stall on receiving is lifted (its message may be behind it). */
	layer_unexp_check(proto);
}

ssize_t layer_rx_tpost(struct layer_proto *proto, const struct iovec *iov, size_t iov_cnt,
		       fi_addr_t src, uint64_t tag, uint64_t ignore, uint64_t flags,
		       void *context)
{
	struct layer_rx *rx;

	rx = layer_rx_alloc(proto, context, flags, iov, iov_cnt, src);
	if (!rx)
		return -FI_EAGAIN;
	layer_rx_match_or_post(proto, &proto->tag_q, rx, tag, ignore);
	return 0;
}

int layer_rx_coll_post(struct layer_proto *proto, void *buf, size_t len, fi_addr_t src,
		       uint64_t tag,
		       void (*on_done)(struct layer_proto *proto, struct layer_rx *rx, size_t len,
				       int err),
		       void *job)
{
	struct iovec iov = { .iov_base = buf, .iov_len = len };
	struct layer_rx *rx;

	/* not the application's: its receive queue's size does not refuse it (rx_used still
	 * counts it, as it counts RMA reads) */
	rx = layer_rx_new(proto, NULL, FI_COMPLETION, &iov, 1, src);
	if (unlikely(!rx))
		return -FI_ENOMEM;
	rx->on_done = on_done;
	rx->job = job;
	layer_rx_match_or_post(proto, &proto->coll_q, rx, tag, 0);
	return 0;
}

static bool layer_rx_has_job(const struct layer_rx *rx, void *job)
{
	return rx->job == job;
}

size_t layer_rx_coll_cancel(struct layer_proto *proto, void *job)
{
	struct layer_rx *rx;
	size_t cnt = 0;

	while ((rx = layer_rxq_find(&proto->coll_q, layer_rx_has_job, job))) {
		layer_rxq_remove(&proto->coll_q, rx);
		layer_rx_free(proto, rx);
		cnt++;
	}
	return cnt;
}

struct layer_rx_stale {
	bool (*is_stale)(uint64_t tag, void *arg);
	void *arg;
};

static bool layer_rx_is_stale(const struct layer_buf *buf, void *arg)
{
	const struct layer_rx_stale *stale = arg;

	return stale->is_stale(layer_buf_hdr(buf)->tag, stale->arg);
}

void layer_rx_coll_drop(struct layer_proto *proto, bool (*is_stale)(uint64_t tag, void *arg),
			void *arg)
{
	struct layer_rx_stale stale = { .is_stale = is_stale, .arg = arg };
	struct layer_buf *buf;

	while ((buf = layer_rxq_find_unexp(&proto->coll_q, layer_rx_is_stale, &stale))) {
		layer_rxq_remove_unexp(&proto->coll_q, buf);
		layer_rx_discard(proto, buf);
	}
}

/* What a peek or a discard reports: the message's metadata, data only when copied. */
static void layer_rx_report_probe(struct layer_proto *proto, void *context,
				  const struct layer_buf *buf, void *data_buf)
{
	const struct layer_hdr *hdr = layer_buf_hdr(buf);
	uint64_t flags = FI_RECV | FI_TAGGED;

	if (hdr->flags & LAYER_HDR_CQ_DATA)
		flags |= FI_REMOTE_CQ_DATA;
	if (proto->rx_cq)
		(void) util_cq_write(&proto->rx_cq->util, context, flags, hdr->size, data_buf,
				     hdr->flags & LAYER_HDR_CQ_DATA ? hdr->data : 0, hdr->tag,
				     buf->src_addr == FI_ADDR_NOTAVAIL ? FI_ADDR_NOTAVAIL :
				     layer_av_report_addr(proto->av, buf->src_addr));
}

ssize_t layer_rx_peek(struct layer_proto *proto, const struct iovec *iov, size_t iov_cnt,
		      fi_addr_t src, uint64_t tag, uint64_t ignore, uint64_t flags,
		      void *context)
{
	struct fi_cq_err_entry err = {
		.op_context = context,
		.flags = FI_RECV | FI_TAGGED,
		.tag = tag,
		.err = FI_ENOMSG,
		.prov_errno = -FI_ENOMSG,
	};
	const struct layer_hdr *hdr;
	struct layer_buf *buf;
	void *data_buf = NULL;
	size_t i, room = 0;

	buf = layer_rxq_peek(&proto->tag_q, tag, ignore, src);
	if (!buf) {
		/* Asynchronous by the spec: "not found" is a CQ error entry, not a return. */
		if (proto->rx_cq)
			(void) util_cq_write_error(&proto->rx_cq->util, &err);
		/* It may be behind data the bound holds back: let some in. */
		layer_unexp_peek_missed(proto);
		return 0;
	}
	hdr = layer_buf_hdr(buf);
	if (flags & FI_DISCARD) {
		layer_rxq_remove_unexp(&proto->tag_q, buf);
		layer_rx_report_probe(proto, context, buf, NULL);
		layer_rx_discard(proto, buf);
		return 0;
	}
	/* Eager data is here: copy it when asked; a rendezvous payload is still remote. */
	for (i = 0; i < iov_cnt; i++)
		room += iov[i].iov_len;
	if (hdr->op == LAYER_OP_EAGER && room) {
		layer_rx_copy_to_iov(iov, iov_cnt, 0, layer_buf_payload(buf), hdr->size);
		data_buf = iov[0].iov_base;
	}
	if (flags & FI_CLAIM)
		layer_rxq_claim(&proto->tag_q, buf, context);
	layer_rx_report_probe(proto, context, buf, data_buf);
	return 0;
}

ssize_t layer_rx_claim(struct layer_proto *proto, const struct iovec *iov, size_t iov_cnt,
		       uint64_t flags, void *context)
{
	struct layer_rx *rx = NULL;
	struct layer_buf *buf;

	/* The receive first: without one the claimed message stays claimed, for a retry. */
	if (!(flags & FI_DISCARD)) {
		rx = layer_rx_alloc(proto, context, flags, iov, iov_cnt, FI_ADDR_UNSPEC);
		if (!rx)
			return -FI_EAGAIN;
	}
	buf = layer_rxq_take_claimed(&proto->tag_q, context);
	if (!buf) {
		if (rx)
			layer_rx_free(proto, rx);
		return -FI_EINVAL;
	}
	if (!rx) {
		layer_rx_report_probe(proto, context, buf, NULL);
		layer_rx_discard(proto, buf);
		return 0;
	}
	layer_rx_deliver(proto, rx, buf);
	layer_unexp_release(proto, buf);
	return 0;
}

static bool layer_rx_has_context(const struct layer_rx *rx, void *context)
{
	return rx->context == context;
}

int layer_rx_cancel(struct layer_proto *proto, void *context)
{
	struct layer_rxq *queues[] = { &proto->msg_q, &proto->tag_q };
	struct layer_rx *rx;
	size_t i;

	for (i = 0; i < UTIL_ARRAY_SIZE(queues); i++) {
		rx = layer_rxq_find(queues[i], layer_rx_has_context, context);
		if (!rx)
			continue;
		layer_rxq_remove(queues[i], rx);
		layer_rx_report(proto, rx, NULL, 0,
				FI_RECV | (queues[i]->is_tagged ? FI_TAGGED : FI_MSG), 0,
				FI_ADDR_NOTAVAIL, FI_ECANCELED, 0);
		layer_rx_free(proto, rx);
		return 0;
	}
	return -FI_ENOENT;
}

/* A directed receive whose source left the AV (a key handle the endpoint holds stays). */
static bool layer_rx_src_gone(const struct layer_rx *rx, void *arg)
{
	struct layer_proto *proto = arg;
	size_t index;

	return rx->src_addr != FI_ADDR_UNSPEC && !(rx->flags & FI_AUTH_KEY) &&
	       layer_av_resolve(proto->av, rx->src_addr, NULL, &index);
}

void layer_rx_av_removed(struct layer_proto *proto)
{
	struct layer_rxq *queues[] = { &proto->msg_q, &proto->tag_q };
	struct layer_rx *rx;
	size_t i;

	for (i = 0; i < UTIL_ARRAY_SIZE(queues); i++) {
		while ((rx = layer_rxq_find(queues[i], layer_rx_src_gone, proto))) {
			layer_rxq_remove(queues[i], rx);
			layer_rx_report(proto, rx, NULL, 0,
					FI_RECV | (queues[i]->is_tagged ? FI_TAGGED : FI_MSG), 0,
					FI_ADDR_NOTAVAIL, FI_EADDRNOTAVAIL, 0);
			layer_rx_free(proto, rx);
		}
	}
}

/* ---- messages ---- */

/* A message's arrival is over: it leaves the unmatched count (layer_rx_place). */
static inline void layer_rx_settle(struct layer_proto *proto, struct layer_buf *buf)
{
	if (unlikely(buf->is_unmatched)) {
		buf->is_unmatched = false;
		proto->unmatched_cnt--;
	}
}

static void layer_rx_drop(struct layer_proto *proto, struct layer_buf *buf, const char *why)
{
	layer_core_dropped(proto->core, buf, why);
	layer_core_repost(proto->core, buf);
}

void layer_rx_arrive(struct layer_proto *proto, struct layer_buf *buf)
{
	const struct layer_hdr *hdr = layer_buf_hdr(buf);
	struct layer_rxq *q;
	struct layer_rx *rx;

	layer_rx_settle(proto, buf);
	/* Direct receive: matched while it arrived, its payload in place already. */
	rx = buf->rx;
	if (rx) {
		buf->rx = NULL;
		layer_rx_deliver(proto, rx, buf);
		layer_core_repost(proto->core, buf);
		return;
	}
	if (unlikely(!layer_hdr_is_valid(hdr, buf->len))) {
		layer_rx_drop(proto, buf, "malformed");
		return;
	}
	FI_DBG(&layer_prov, FI_LOG_EP_DATA, "%s in: %zu bytes from %#" PRIx64 "\n",
	       layer_op_str(hdr->op), buf->len, (uint64_t) buf->src_addr);
	switch (hdr->op) {
	case LAYER_OP_EAGER:
	case LAYER_OP_RTS:
		break;
	case LAYER_OP_ACK:
		if (layer_tx_ack(proto, buf->ctx.chan->conn, hdr))
			layer_core_repost(proto->core, buf);
		else
			layer_rx_drop(proto, buf, "an ack for no send");
		return;
	case LAYER_OP_PACE:
	case LAYER_OP_UNPACE:
		layer_tx_set_paced(proto, buf->ctx.chan->conn->peer, hdr->op == LAYER_OP_PACE);
		layer_core_repost(proto->core, buf);
		return;
	case LAYER_OP_WRITE:
	case LAYER_OP_WRITE_RTS:
	case LAYER_OP_READ_REQ:
	case LAYER_OP_READ_RESP:
		layer_rma_arrive(proto, buf);
		layer_core_repost(proto->core, buf);
		return;
	case LAYER_OP_ATOMIC:
		layer_atomic_target(proto, buf);
		layer_core_repost(proto->core, buf);
		return;
	case LAYER_OP_GRANT:
	case LAYER_OP_REVOKE:
		layer_grant_arrive(proto, buf);
		layer_core_repost(proto->core, buf);
		return;
	case LAYER_OP_CMA:
	case LAYER_OP_CMA_BACK:
		layer_cma_arrive(proto, buf);
		layer_core_repost(proto->core, buf);
		return;
	case LAYER_OP_COLL_ABORT:
		if (proto->coll)
			layer_coll_abort_arrive(proto->coll, hdr->tag, buf->src_addr);
		layer_core_repost(proto->core, buf);
		return;
	case LAYER_OP_PING:
		/* liveness (conn/liveness.c): answered on the connection it came on */
		layer_tx_ctrl(proto, buf->ctx.chan->conn, LAYER_OP_PONG, 0, 0);
		layer_core_repost(proto->core, buf);
		return;
	case LAYER_OP_PONG:
		/* its arrival was what counted */
		layer_core_repost(proto->core, buf);
		return;
	default:
		/* the adapters keep their handshakes */
		layer_rx_drop(proto, buf, "a handshake out of place");
		return;
	}

	q = layer_rx_queue(proto, hdr);
	rx = layer_rxq_match(q, buf, true);
	if (rx) {
		layer_rx_deliver(proto, rx, buf);
		layer_core_repost(proto->core, buf);
		return;
	}
	/* Unexpected: kept until a receive or a probe takes it (unexp.c). */
	FI_DBG(&layer_prov, FI_LOG_EP_DATA, "unexpected: tag %#" PRIx64 "\n", hdr->tag);
	layer_rxq_add_unexp(q, layer_unexp_keep(proto, buf));
}

/*
 * Direct receive. The core has read the header of buf's message and asks where its payload
 * goes, while the payload is still arriving. An eager message is matched now, in arrival
 * order as at completion: the receive it takes leaves its queue and waits on buf->rx, and
 * the payload goes straight into the receive's buffer when it fits (the one copy on this
 * side). Everything else waits for its completion, as a bounce buffer does, in the buffer or
 * an allocation of its size: a rendezvous request (its segments are checked once in), a
 * message for a multi-receive buffer (slices complete in order), a truncated one, a malformed
 * one (dropped then). A message that matched nothing is counted (unmatched_cnt): until it
 * completes, no later message matches early either, or one could take the receive posted
 * meanwhile that is the earlier one's. Runs inside the core's progress: no core call here.
 */
int layer_rx_place(struct layer_proto *proto, struct layer_buf *buf, struct iovec *iov,
		   size_t *count)
{
	const struct layer_hdr *hdr = layer_buf_hdr(buf);
	struct layer_core *core = proto->core;
	size_t i, left = buf->len - sizeof(*hdr);
	bool is_data = false;
	struct layer_rx *rx;

	if (!left) {
		iov[0].iov_base = NULL;
		iov[0].iov_len = 0;
		*count = 1;
		return 0;
	}
	if (likely(layer_hdr_fits(hdr, buf->len))) {
		is_data = hdr->op == LAYER_OP_EAGER || hdr->op == LAYER_OP_RTS;
		/* RMA data straight into the region, or into the read's buffers */
		if ((hdr->op == LAYER_OP_WRITE || hdr->op == LAYER_OP_READ_RESP) && *count > 1 &&
		    !layer_rma_place(proto, buf, iov, count))
			return 0;
	}
	if (likely(is_data && hdr->op == LAYER_OP_EAGER && !proto->unmatched_cnt &&
		   !buf->is_behind_ring)) {
		rx = layer_rxq_match(layer_rx_queue(proto, hdr), buf, false);
		buf->rx = rx;
		if (rx && left <= rx->len && rx->iov_cnt <= *count) {
			for (i = 0; i < rx->iov_cnt; i++)
				iov[i] = rx->iov[i];
			*count = rx->iov_cnt;
			buf->is_placed = true;
			return 0;
		}
	}
	if (is_data && !buf->rx) {
		buf->is_unmatched = true;
		proto->unmatched_cnt++;
	}
	if (left > core->buf_size - sizeof(*hdr)) {
		/* A peer sends eager what this endpoint told it to at most (core_msg.c): RMA
		 * data more, as it goes straight into place (refused, into an allocation). */
		size_t max = hdr->op == LAYER_OP_WRITE || hdr->op == LAYER_OP_READ_RESP ?
			     core->rma_direct_max : core->direct_max;

		if (unlikely(left > max)) {
			LAYER_WARN_ONCE(FI_LOG_EP_DATA, "message of %zu bytes over the %zu "
				"this endpoint takes: closing its connection\n", left, max);
			return -FI_EMSGSIZE;
		}
		buf->ext = malloc(left);
		if (!buf->ext)
			return -FI_ENOMEM;
		buf->ext_len = left;
	}
	iov[0].iov_base = layer_buf_payload(buf);
	iov[0].iov_len = left;
	*count = 1;
	return 0;
}

void layer_rx_buf_lost(struct layer_proto *proto, struct layer_buf *buf, int err)
{
	const struct layer_hdr *hdr = layer_buf_hdr(buf);
	struct layer_rx *rx = buf->rx;

	layer_rx_settle(proto, buf);
	layer_rma_unplace(proto, buf);
	if (rx) {
		/* Matched while arriving, its message lost with the connection: the receive
		 * fails, as the receives of a removed peer's messages do. */
		buf->rx = NULL;
		rx->tag = hdr->tag;
		layer_rx_report(proto, rx, NULL, 0,
				FI_RECV | (hdr->flags & LAYER_HDR_TAGGED ? FI_TAGGED : FI_MSG), 0,
				buf->src_addr, err, 0);
		layer_rx_free(proto, rx);
	}
	layer_core_buf_put(proto->core, buf);
}

/*
 * Unexpected messages outlive their connection: an eager one arrived whole and can still be
 * received; a rendezvous request cannot be pulled any more (its sender has already failed
 * it), so it is dropped.
 */
static bool layer_rx_is_from(const struct layer_buf *buf, void *conn)
{
	return buf->ctx.chan && buf->ctx.chan->conn == conn;
}

static bool layer_rx_is_unnamed_from(const struct layer_buf *buf, void *conn)
{
	return buf->src_addr == FI_ADDR_NOTAVAIL && layer_rx_is_from(buf, conn);
}

void layer_rx_conn_named(struct layer_proto *proto, struct layer_conn *conn)
{
	struct layer_rxq *queues[] = { &proto->msg_q, &proto->tag_q, &proto->coll_q };
	struct layer_buf *buf;
	size_t i;

	for (i = 0; i < UTIL_ARRAY_SIZE(queues); i++) {
		while ((buf = layer_rxq_find_unexp(queues[i], layer_rx_is_unnamed_from, conn)))
			layer_rxq_set_src(queues[i], buf, conn->src_addr);
	}
}

void layer_rx_conn_lost(struct layer_proto *proto, struct layer_conn *conn)
{
	struct layer_rxq *queues[] = { &proto->msg_q, &proto->tag_q, &proto->coll_q };
	struct layer_buf *buf;
	size_t i;

	for (i = 0; i < UTIL_ARRAY_SIZE(queues); i++) {
		while ((buf = layer_rxq_find_unexp(queues[i], layer_rx_is_from, conn))) {
			if (layer_buf_hdr(buf)->op != LAYER_OP_RTS) {
				buf->ctx.chan = NULL;
				continue;
			}
			FI_INFO(&layer_prov, FI_LOG_EP_DATA,
				"dropping unexpected rendezvous message of a lost connection\n");
			layer_rxq_remove_unexp(queues[i], buf);
			layer_unexp_put(proto, buf);
		}
	}
}

int layer_rx_init(struct layer_proto *proto)
{
	int ret;

	ret = util_bufpool_init(&proto->rx_pool, sizeof(struct layer_rx), 64, 64, 0);
	if (ret)
		return ret;
	ret = layer_rxq_init(&proto->msg_q, false);
	if (ret)
		goto err_fini_pool;
	ret = layer_rxq_init(&proto->tag_q, true);
	if (ret)
		goto err_fini_pool;
	ret = layer_rxq_init(&proto->coll_q, true);
	if (ret)
		goto err_fini_pool;
	return 0;

err_fini_pool:
	util_bufpool_fini(&proto->rx_pool);
	return ret;
}

static void layer_rx_fini_rx(struct layer_rx *rx, void *arg)
{
	layer_rx_free(arg, rx);
}

static void layer_rx_fini_buf(struct layer_buf *buf, void *arg)
{
	layer_unexp_put(arg, buf);
}

void layer_rx_fini(struct layer_proto *proto)
{
	size_t cnt;

	layer_rxq_fini(&proto->msg_q, layer_rx_fini_rx, layer_rx_fini_buf, proto);
	cnt = layer_rxq_fini(&proto->tag_q, layer_rx_fini_rx, layer_rx_fini_buf, proto);
	layer_rxq_fini(&proto->coll_q, layer_rx_fini_rx, layer_rx_fini_buf, proto);
	if (cnt)
		FI_WARN(&layer_prov, FI_LOG_EP_DATA,
			"%zu unexpected tagged messages never matched\n", cnt);
	util_bufpool_fini(&proto->rx_pool);
}
