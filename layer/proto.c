/*
 * Data path of the reliable-datagram endpoint: sends (inline, eager, or rendezvous via
 * proto_rndv.c; paced when the peer asks, see unexp.c), arrival of core messages, matching
 * against posted receives in posting order, unexpected messages in arrival order (kept by
 * unexp.c), multi-receive buffers, and completions. Everything here runs with ep->lock held.
 */
#include "config.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "layer/ep.h"
#include "layer/av.h"
#include "util/tagm_inl.h"

_Static_assert(offsetof(struct layer_tx, inline_data) ==
	       offsetof(struct layer_tx, hdr) + sizeof(struct layer_hdr),
	       "inline payload must follow the header");

static const char *const layer_op_names[] = {
#define LAYER_OP_NAME(name, str) [LAYER_OP_##name] = str,
	LAYER_OPS(LAYER_OP_NAME)
#undef LAYER_OP_NAME
};

const char *layer_op_str(unsigned op)
{
	return op < LAYER_OP_MAX ? layer_op_names[op] : "unknown";
}

static size_t layer_iov_len(const struct iovec *iov, size_t cnt)
{
	size_t i, len = 0;

	for (i = 0; i < cnt; i++)
		len += iov[i].iov_len;
	return len;
}

/* Copies up to len bytes from src into the iovs, skipping the first offset bytes of them. */
static size_t layer_copy_to_iov(const struct iovec *iov, size_t cnt, size_t offset,
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

static void layer_copy_from_iov(void *dst, const struct iovec *iov, size_t cnt)
{
	size_t i, off = 0;

	for (i = 0; i < cnt; i++) {
		/* an empty entry may have no buffer at all */
		if (!iov[i].iov_len)
			continue;
		memcpy((char *) dst + off, iov[i].iov_base, iov[i].iov_len);
		off += iov[i].iov_len;
	}
}

static struct layer_tx *layer_tx_alloc(struct layer_ep *ep, bool is_ctrl)
{
	struct layer_tx *tx;

	if (!is_ctrl && ep->tx_used >= ep->tx_size)
		return NULL;
	tx = util_bufpool_get(&ep->tx_pool);
	if (!tx)
		return NULL;
	if (!is_ctrl)
		ep->tx_used++;
	tx->type = LAYER_CTX_TX;
	tx->is_ctrl = is_ctrl;
	tx->is_acked = false;
	tx->ack_err = 0;
	tx->wants_ack = false;
	tx->is_active = false;
	tx->mr_cnt = 0;
	tx->bounce = NULL;
	util_dlist_init(&tx->link);
	return tx;
}

void layer_proto_free_tx(struct layer_ep *ep, struct layer_tx *tx)
{
	size_t i;

	for (i = 0; i < tx->mr_cnt; i++)
		layer_domain_dereg_rma(ep->domain, tx->mr[i]);
	free(tx->bounce);
	if (!tx->is_ctrl)
		ep->tx_used--;
	util_bufpool_put(&ep->tx_pool, tx);
}

void layer_ep_write_tx_comp(struct layer_ep *ep, void *context, uint64_t flags, size_t len,
			    int err)
{
	struct fi_cq_err_entry entry = {
		.op_context = context,
		.flags = flags,
		.len = len,
		.err = err,
		.prov_errno = -err,
	};

	if (err) {
		if (ep->tx_cq)
			util_cq_write_error(&ep->tx_cq->util, &entry);
		if (ep->send_cntr)
			util_cntr_inc_err(&ep->send_cntr->util);
		return;
	}
	if ((flags & FI_COMPLETION) && ep->tx_cq)
		util_cq_write(&ep->tx_cq->util, context, flags & ~FI_COMPLETION, len, NULL, 0, 0,
			      FI_ADDR_NOTAVAIL);
	if (ep->send_cntr)
		util_cntr_inc(&ep->send_cntr->util);
}

/* Starts the sends an FI_FENCE held once nothing sent before the fence is active. */
static void layer_proto_release_fenced(struct layer_conn *conn)
{
	struct layer_tx *tx;

	while (!util_dlist_empty(&conn->fenced_tx)) {
		tx = container_of(conn->fenced_tx.next, struct layer_tx, link);
		if ((tx->flags & FI_FENCE) && conn->tx_active)
			return;
		util_dlist_remove(&tx->link);
		tx->is_active = true;
		conn->tx_active++;
		layer_proto_post_tx(conn, tx);
	}
}

void layer_proto_complete_tx(struct layer_ep *ep, struct layer_tx *tx, int err)
{
	struct layer_conn *conn = tx->conn;

	if (!tx->is_ctrl)
		layer_ep_write_tx_comp(ep, tx->context, tx->cq_flags, tx->len, err);
	if (tx->is_active) {
		conn->tx_active--;
		if (!conn->tx_active && conn->state != LAYER_CONN_CLOSED)
			layer_proto_release_fenced(conn);
	}
	layer_proto_free_tx(ep, tx);
}

/* Posts tx to the core; 0, -FI_EAGAIN (the core is full) or another error. */
static int layer_proto_core_send(struct layer_conn *conn, struct layer_tx *tx)
{
	struct layer_ep *ep = conn->ep;
	ssize_t ret;

	/*
	 * A message that fits the core's inject size goes as an inject, as rxm does: the core
	 * keeps the bytes and reports no completion, so the send completes here and neither
	 * side processes a core completion for it. Sends waiting for an ACK keep their entry.
	 */
	if (tx->iov_cnt == 1 && tx->iov[0].iov_len <= ep->core_inject_size && !tx->wants_ack) {
		ret = fi_inject(conn->core_ep, tx->iov[0].iov_base, tx->iov[0].iov_len,
				conn->core_addr);
		if (ret)
			return (int) ret;
		layer_proto_complete_tx(ep, tx, 0);
		return 0;
	}
	ret = layer_core_send(conn, tx);
	if (ret)
		return (int) ret;
	util_dlist_insert_tail(&tx->link, &conn->inflight_tx);
	return 0;
}

/* Whether tx may go to the core now: conn is connected, or tx is the HELLO that connects it. */
static inline bool layer_tx_may_go(const struct layer_conn *conn, const struct layer_tx *tx)
{
	return conn->state == LAYER_CONN_CONNECTED ||
	       (conn->state == LAYER_CONN_CONNECTING && tx->hdr.op == LAYER_OP_HELLO);
}

void layer_proto_post_tx(struct layer_conn *conn, struct layer_tx *tx)
{
	bool is_hello = tx->hdr.op == LAYER_OP_HELLO;
	int ret;

	tx->conn = conn;
	if (layer_tx_may_go(conn, tx) && (is_hello || util_dlist_empty(&conn->pending_tx))) {
		ret = layer_proto_core_send(conn, tx);
		if (!ret)
			return;
		if (ret != -FI_EAGAIN) {
			FI_WARN(&layer_prov, FI_LOG_EP_DATA, "core send failed: %s\n",
				fi_strerror(-ret));
			layer_conn_fail(conn, -ret);
		}
	}
	/* Connecting, core queue full, or failing: progress retries or fails it. */
	conn->ep->has_pending = true;
	if (is_hello)
		util_dlist_insert_head(&tx->link, &conn->pending_tx);
	else
		util_dlist_insert_tail(&tx->link, &conn->pending_tx);
}

void layer_proto_flush_pending(struct layer_conn *conn)
{
	struct layer_tx *tx;
	int ret;

	while (!util_dlist_empty(&conn->pending_tx)) {
		tx = container_of(conn->pending_tx.next, struct layer_tx, link);
		if (!layer_tx_may_go(conn, tx))
			return;
		util_dlist_remove(&tx->link);
		ret = layer_proto_core_send(conn, tx);
		if (ret == -FI_EAGAIN) {
			util_dlist_insert_head(&tx->link, &conn->pending_tx);
			return;
		}
		if (ret) {
			util_dlist_insert_head(&tx->link, &conn->pending_tx);
			layer_conn_fail(conn, -ret);
			return;
		}
	}
}

/*
 * An eager user send above the inject size not yet handed to the core goes by rendezvous
 * instead (its buffers, or its copy, registered). Left as it is when registration fails:
 * pacing only keeps the peer's memory small.
 */
static void layer_proto_pace_tx(struct layer_ep *ep, struct layer_tx *tx)
{
	struct iovec iov[LAYER_IOV_LIMIT];
	size_t cnt;

	if (tx->is_ctrl || tx->hdr.op != LAYER_OP_EAGER || tx->len <= LAYER_INJECT_SIZE)
		return;
	if (tx->bounce) {
		iov[0].iov_base = (char *) tx->bounce + sizeof(tx->hdr);
		iov[0].iov_len = tx->len;
		cnt = 1;
	} else {
		/* Zero copy: the header, then the user's iovs. */
		cnt = tx->iov_cnt - 1;
		memcpy(iov, &tx->iov[1], cnt * sizeof(*iov));
	}
	if (layer_rndv_prepare_tx(ep, tx, iov, cnt))
		FI_INFO(&layer_prov, FI_LOG_EP_DATA, "a queued send stays eager\n");
}

static void layer_proto_pace_list(struct layer_ep *ep, struct util_dlist *list)
{
	struct util_dlist *item;

	util_dlist_foreach(list, item)
		layer_proto_pace_tx(ep, container_of(item, struct layer_tx, link));
}

void layer_proto_set_paced(struct layer_conn *conn, bool is_paced)
{
	if (conn->is_paced == is_paced)
		return;
	conn->is_paced = is_paced;
	if (!is_paced || conn->state == LAYER_CONN_CLOSED)
		return;
	layer_proto_pace_list(conn->ep, &conn->pending_tx);
	layer_proto_pace_list(conn->ep, &conn->fenced_tx);
}

ssize_t layer_proto_send(struct layer_ep *ep, const struct iovec *iov, size_t iov_cnt,
			 fi_addr_t dest, uint64_t data, uint64_t tag, uint64_t flags,
			 void *context)
{
	uint8_t addr[LAYER_ADDR_MAX];
	struct layer_conn *conn;
	struct layer_tx *tx;
	size_t len, index, i;
	int ret;

	len = layer_iov_len(iov, iov_cnt);
	if (unlikely(len > LAYER_MAX_MSG_SIZE))
		return -FI_EMSGSIZE;
	ret = layer_av_get_addr(ep->av, dest, addr, &index);
	if (unlikely(ret))
		return ret;
	tx = layer_tx_alloc(ep, false);
	if (unlikely(!tx))
		return -FI_EAGAIN;
	ret = layer_conn_get(ep, index, addr, &conn);
	if (unlikely(ret)) {
		layer_proto_free_tx(ep, tx);
		return ret;
	}

	tx->context = context;
	tx->flags = flags;
	tx->cq_flags = FI_SEND | (flags & FI_TAGGED ? FI_TAGGED : FI_MSG) |
		       (flags & FI_COMPLETION);
	tx->len = len;
	tx->hdr = (struct layer_hdr) {
		.version = LAYER_PROTO_VERSION,
		.op = LAYER_OP_EAGER,
		.flags = (flags & FI_REMOTE_CQ_DATA ? LAYER_HDR_CQ_DATA : 0) |
			 (flags & FI_TAGGED ? LAYER_HDR_TAGGED : 0),
		.key_slot = conn->key_slot,
		.size = len,
		.tag = tag,
		.data = data,
	};
	/* The target acknowledges once the message is matched and placed (or discarded). */
	if (flags & (FI_DELIVERY_COMPLETE | FI_MATCH_COMPLETE)) {
		tx->wants_ack = true;
		tx->hdr.flags |= LAYER_HDR_ACK_REQ;
		tx->hdr.msg_id = ep->next_msg_id++;
	}

	/* Above the inject size, a paced connection (its peer is past its bound) goes rendezvous. */
	if (len <= LAYER_INJECT_SIZE) {
		layer_copy_from_iov(tx->inline_data, iov, iov_cnt);
		tx->iov[0].iov_base = &tx->hdr;
		tx->iov[0].iov_len = sizeof(tx->hdr) + len;
		tx->iov_cnt = 1;
	} else if (len <= conn->tx_eager && likely(!conn->is_paced)) {
		if (iov_cnt < ep->core_iov_limit) {
			/* Zero copy: the core sends the header and the user's buffers. */
			tx->iov[0].iov_base = &tx->hdr;
			tx->iov[0].iov_len = sizeof(tx->hdr);
			for (i = 0; i < iov_cnt; i++)
				tx->iov[i + 1] = iov[i];
			tx->iov_cnt = iov_cnt + 1;
		} else {
			tx->bounce = malloc(sizeof(tx->hdr) + len);
			if (!tx->bounce) {
				layer_proto_free_tx(ep, tx);
				return -FI_ENOMEM;
			}
			memcpy(tx->bounce, &tx->hdr, sizeof(tx->hdr));
			layer_copy_from_iov((char *) tx->bounce + sizeof(tx->hdr), iov, iov_cnt);
			tx->iov[0].iov_base = tx->bounce;
			tx->iov[0].iov_len = sizeof(tx->hdr) + len;
			tx->iov_cnt = 1;
		}
	} else {
		ret = layer_rndv_prepare_tx(ep, tx, iov, iov_cnt);
		if (ret) {
			layer_proto_free_tx(ep, tx);
			return ret;
		}
	}
	tx->conn = conn;
	if (unlikely(!util_dlist_empty(&conn->fenced_tx) ||
		     ((flags & FI_FENCE) && conn->tx_active))) {
		/* Behind a fence: starts when everything sent before it has completed. */
		util_dlist_insert_tail(&tx->link, &conn->fenced_tx);
	} else {
		tx->is_active = true;
		conn->tx_active++;
		layer_proto_post_tx(conn, tx);
	}
	/* A send outstanding lifts a stall on receiving (its answer may be behind it). */
	layer_unexp_check(ep);
	return 0;
}

int layer_proto_send_ctrl_data(struct layer_ep *ep, struct layer_conn *conn, enum layer_op op,
			       uint64_t msg_id, const void *data, size_t len)
{
	return layer_proto_send_ctrl_hdr(ep, conn, op, 0, msg_id, 0, data, len);
}

int layer_proto_send_ctrl_hdr(struct layer_ep *ep, struct layer_conn *conn, enum layer_op op,
			      uint16_t flags, uint64_t msg_id, uint64_t value, const void *data,
			      size_t len)
{
	struct layer_tx *tx;

	if (len > LAYER_INJECT_SIZE)
		return -FI_EINVAL;
	tx = layer_tx_alloc(ep, true);
	if (!tx)
		return -FI_ENOMEM;
	tx->context = NULL;
	tx->flags = 0;
	tx->cq_flags = 0;
	tx->len = 0;
	tx->hdr = (struct layer_hdr) {
		.version = LAYER_PROTO_VERSION,
		.op = op,
		.flags = flags,
		.size = len,
		.data = value,
		.msg_id = msg_id,
	};
	if (len)
		memcpy(tx->inline_data, data, len);
	tx->iov[0].iov_base = &tx->hdr;
	tx->iov[0].iov_len = sizeof(tx->hdr) + len;
	tx->iov_cnt = 1;
	layer_proto_post_tx(conn, tx);
	return 0;
}

int layer_proto_send_ctrl(struct layer_ep *ep, struct layer_conn *conn, enum layer_op op,
			  uint64_t msg_id)
{
	return layer_proto_send_ctrl_data(ep, conn, op, msg_id, NULL, 0);
}

void layer_proto_report_rx(struct layer_ep *ep, struct layer_rx *rx, void *buf, size_t len,
			   uint64_t cq_flags, uint64_t data, fi_addr_t src, int err,
			   size_t olen)
{
	struct fi_cq_err_entry entry;

	/* Completions report the AV's user ID for a source that has one. */
	if (src != FI_ADDR_NOTAVAIL && ep->av)
		src = layer_av_report_addr(ep->av, src);
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
		if (ep->rx_cq)
			util_cq_write_error(&ep->rx_cq->util, &entry);
		if (ep->recv_cntr)
			util_cntr_inc_err(&ep->recv_cntr->util);
		return;
	}
	if ((rx->flags & FI_COMPLETION) && ep->rx_cq)
		util_cq_write(&ep->rx_cq->util, rx->context, cq_flags, len, buf, data,
			      cq_flags & FI_TAGGED ? rx->tag : 0, src);
	if (ep->recv_cntr)
		util_cntr_inc(&ep->recv_cntr->util);
}

/* A receive takes a message from anyone, from its source, or (FI_AUTH_KEY) with its key. */
static inline bool layer_rx_matches(const struct layer_rx *rx, const struct layer_rx_buf *buf)
{
	return rx->src_addr == FI_ADDR_UNSPEC || rx->src_addr == buf->src_addr ||
	       rx->src_addr == buf->key;
}

void layer_rx_free(struct layer_ep *ep, struct layer_rx *rx)
{
	ep->rx_used--;
	util_bufpool_put(&ep->rx_pool, rx);
}

/* A payload allocation (direct receive) goes once its message is done with. */
static inline void layer_buf_drop_ext(struct layer_rx_buf *buf)
{
	if (unlikely(buf->ext)) {
		free(buf->ext);
		buf->ext = NULL;
	}
}

/* A buffer's message no longer arriving: it leaves the unmatched count (layer_proto_place). */
static inline void layer_buf_settle(struct layer_ep *ep, struct layer_rx_buf *buf)
{
	if (unlikely(buf->is_unmatched)) {
		buf->is_unmatched = false;
		ep->unmatched_cnt--;
	}
}

void layer_buf_put(struct layer_ep *ep, struct layer_rx_buf *buf)
{
	layer_buf_drop_ext(buf);
	util_bufpool_put(&ep->buf_pool, buf);
}

/* Returns a bounce buffer to the core, or to the pool when its connection is gone. */
void layer_proto_repost_buf(struct layer_ep *ep, struct layer_rx_buf *buf)
{
	layer_buf_drop_ext(buf);
	if (!layer_core_post_buf(ep, buf->conn, buf))
		return;
	util_bufpool_put(&ep->buf_pool, buf);
}

/*
 * Delivers the message in buf to rx. A multi-receive buffer takes the next slice of itself
 * and stays posted until less than min_multi_recv remains. Returns true when rx was
 * consumed (no longer posted).
 */
bool layer_proto_deliver(struct layer_ep *ep, struct layer_rx *rx, struct layer_rx_buf *buf)
{
	const struct layer_hdr *hdr = (const struct layer_hdr *) buf->data;
	uint64_t cq_flags = FI_RECV | (hdr->flags & LAYER_HDR_TAGGED ? FI_TAGGED : FI_MSG);
	uint64_t data = 0;
	size_t offset = 0, space = rx->len, copied;
	bool is_multi = rx->flags & FI_MULTI_RECV;
	bool is_released = true;
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
		is_released = rx->len - rx->mrecv_used < ep->min_multi_recv ||
			      hdr->size > space;
		if (is_released)
			cq_flags |= FI_MULTI_RECV;
	}
	dst = rx->iov_cnt ? (char *) rx->iov[0].iov_base + offset : NULL;
	if (is_released)
		util_dlist_remove(&rx->link);

	if (hdr->op == LAYER_OP_RTS) {
		layer_rndv_start_read(ep, rx, buf, offset, space, cq_flags, is_released);
		return is_released;
	}

	/* Placed by the core already (direct receive), or copied from where it waits. */
	if (buf->is_placed)
		copied = UTIL_MIN(hdr->size, space);
	else
		copied = layer_copy_to_iov(rx->iov, rx->iov_cnt, offset, layer_buf_payload(buf),
					   UTIL_MIN(hdr->size, space));
	if (hdr->flags & LAYER_HDR_ACK_REQ && buf->conn && buf->conn->state != LAYER_CONN_CLOSED)
		layer_proto_send_ctrl(ep, buf->conn, LAYER_OP_ACK, hdr->msg_id);
	if (copied < hdr->size)
		layer_proto_report_rx(ep, rx, dst, copied, cq_flags, data, buf->src_addr,
				      FI_ETRUNC, hdr->size - copied);
	else
		layer_proto_report_rx(ep, rx, dst, copied, cq_flags, data, buf->src_addr, 0, 0);
	if (is_released)
		layer_rx_free(ep, rx);
	return is_released;
}

/* The segments of an RTS must add up to the message size, or reads would run past them. */
static bool layer_rts_segs_ok(const struct layer_hdr *hdr)
{
	const struct layer_rts_seg *segs = (const struct layer_rts_seg *) (hdr + 1);
	uint64_t sum = 0;
	uint32_t i;

	for (i = 0; i < hdr->seg_cnt; i++) {
		if (segs[i].len > LAYER_MAX_MSG_SIZE)
			return false;
		sum += segs[i].len;
	}
	return sum == hdr->size;
}

/* Validates a header against its message's length (len bytes, header included). */
static bool layer_proto_hdr_fits(const struct layer_hdr *hdr, size_t len)
{
	if (len < sizeof(*hdr) || hdr->version != LAYER_PROTO_VERSION ||
	    (hdr->flags & ~LAYER_HDR_FLAGS))
		return false;
	switch (hdr->op) {
	case LAYER_OP_EAGER:
		return hdr->size == len - sizeof(*hdr);
	case LAYER_OP_RTS:
		return hdr->seg_cnt >= 1 && hdr->seg_cnt <= LAYER_RTS_MAX_SEGS &&
		       len == sizeof(*hdr) + hdr->seg_cnt * sizeof(struct layer_rts_seg) &&
		       hdr->size <= LAYER_MAX_MSG_SIZE;
	case LAYER_OP_ACK:
	case LAYER_OP_PACE:
	case LAYER_OP_UNPACE:
		return len == sizeof(*hdr);
	default:
		return false;
	}
}

/* Validates a received message; false for anything malformed. */
static bool layer_proto_hdr_ok(const struct layer_rx_buf *buf)
{
	const struct layer_hdr *hdr = (const struct layer_hdr *) buf->data;

	return layer_proto_hdr_fits(hdr, buf->len) &&
	       (hdr->op != LAYER_OP_RTS || layer_rts_segs_ok(hdr));
}

/* Who sent buf's message: its connection's key, and the peer's fi_addr in the AV. */
static void layer_proto_resolve_src(struct layer_ep *ep, struct layer_rx_buf *buf)
{
	struct layer_conn *conn = buf->conn;

	/* A peer that uses an AV key is the address inserted with that key (fi_av(3) 1.20). */
	buf->key = conn->key;
	if (unlikely(!ep->av))
		buf->src_addr = FI_ADDR_NOTAVAIL;
	else if (likely(buf->key == FI_ADDR_NOTAVAIL))
		buf->src_addr = layer_av_find(ep->av, conn->peer_addr, ep->addrlen);
	else
		buf->src_addr = layer_av_find_key(ep->av, conn->peer_addr, ep->addrlen, buf->key);
}

void layer_proto_handle_buf(struct layer_ep *ep, struct layer_rx_buf *buf)
{
	const struct layer_hdr *hdr = (const struct layer_hdr *) buf->data;
	struct layer_conn *conn = buf->conn;
	struct util_dlist *item;
	struct layer_rx *rx;

	if (unlikely(!layer_proto_hdr_ok(buf))) {
		/* Warned once per endpoint, then counted: a bad peer cannot flood the log. */
		FI_LOG(&layer_prov, ep->dropped_cnt ? FI_LOG_INFO : FI_LOG_WARN, FI_LOG_EP_DATA,
		       "dropping malformed message (%zu bytes, version %u, op %s; %" PRIu64
		       " dropped before)\n", buf->len, buf->len >= 2 ? buf->data[0] : 0,
		       layer_op_str(buf->len >= 2 ? buf->data[1] : LAYER_OP_MAX),
		       ep->dropped_cnt);
		ep->dropped_cnt++;
		layer_proto_repost_buf(ep, buf);
		return;
	}
	if (unlikely(hdr->op != LAYER_OP_EAGER && hdr->op != LAYER_OP_RTS)) {
		if (hdr->op == LAYER_OP_ACK)
			ep->core->handle_ack(conn, hdr);
		else
			ep->core->handle_pace(conn, hdr->op == LAYER_OP_PACE);
		layer_proto_repost_buf(ep, buf);
		return;
	}

	if (unlikely(conn->is_ctrl_only))
		layer_conn_carries_data(ep, conn);
	layer_proto_resolve_src(ep, buf);
	if (hdr->flags & LAYER_HDR_TAGGED) {
		layer_tagged_arrive(ep, buf);
		return;
	}
	util_dlist_foreach(&ep->posted_rx, item) {
		rx = container_of(item, struct layer_rx, link);
		if (!layer_rx_matches(rx, buf))
			continue;
		layer_proto_deliver(ep, rx, buf);
		layer_proto_repost_buf(ep, buf);
		return;
	}

	/* Unexpected: kept until a receive matches (unexp.c). */
	buf = layer_unexp_keep(ep, buf);
	util_dlist_insert_tail(&buf->link, &ep->unexp_msgs);
}

/*
 * The receive a message arriving now takes, off its list; NULL when none does yet, or when
 * it is a multi-receive buffer (its slices complete in order: the message waits).
 */
static struct layer_rx *layer_proto_match_early(struct layer_ep *ep, struct layer_rx_buf *buf)
{
	const struct layer_hdr *hdr = (const struct layer_hdr *) buf->data;
	struct util_tagm_recv *recv;
	struct util_dlist *item;
	struct layer_rx *rx;

	layer_proto_resolve_src(ep, buf);
	if (hdr->flags & LAYER_HDR_TAGGED) {
		recv = util_tagm_recv_match(&ep->tagm, hdr->tag, buf->src_addr, buf->key);
		return recv ? container_of(recv, struct layer_rx, tagm) : NULL;
	}
	util_dlist_foreach(&ep->posted_rx, item) {
		rx = container_of(item, struct layer_rx, link);
		if (!layer_rx_matches(rx, buf))
			continue;
		if (rx->flags & FI_MULTI_RECV)
			return NULL;
		util_dlist_remove(&rx->link);
		return rx;
	}
	return NULL;
}

/*
 * Direct receive. The core (conn_msg.c) has read the header of buf's message and asks where
 * its payload goes, while the payload is still arriving. An eager message is matched now, in
 * arrival order as at completion: the receive it takes leaves its list and waits on buf->rx,
 * and the payload goes straight into the receive's buffer when it fits (the one copy on this
 * side). Everything else waits for its completion, as a bounce buffer does, in the buffer or
 * an allocation of its size: a rendezvous request (its segments are checked once in), a
 * message for a multi-receive buffer (slices complete in order), a truncated one, a malformed
 * one (dropped then). A message that matched nothing is counted (ep->unmatched_cnt): until
 * it completes, no later message matches early either, or one could take the receive posted
 * meanwhile that is the earlier one's. Runs inside the core's progress: no core call here.
 */
int layer_proto_place(struct layer_ep *ep, struct layer_rx_buf *buf, struct iovec *iov,
		      size_t *count)
{
	const struct layer_hdr *hdr = (const struct layer_hdr *) buf->data;
	size_t i, left = buf->len - sizeof(*hdr);
	bool is_data = false;
	struct layer_rx *rx;

	if (!left) {
		iov[0].iov_base = NULL;
		iov[0].iov_len = 0;
		*count = 1;
		return 0;
	}
	if (likely(layer_proto_hdr_fits(hdr, buf->len)))
		is_data = hdr->op == LAYER_OP_EAGER || hdr->op == LAYER_OP_RTS;
	if (likely(is_data && hdr->op == LAYER_OP_EAGER && !ep->unmatched_cnt)) {
		rx = layer_proto_match_early(ep, buf);
		buf->rx = rx;
		if (rx && !(rx->flags & FI_MULTI_RECV) && left <= rx->len &&
		    rx->iov_cnt <= *count) {
			for (i = 0; i < rx->iov_cnt; i++)
				iov[i] = rx->iov[i];
			*count = rx->iov_cnt;
			buf->is_placed = true;
			return 0;
		}
	}
	if (is_data && !buf->rx) {
		buf->is_unmatched = true;
		ep->unmatched_cnt++;
	}
	if (left > ep->buf_size - sizeof(*hdr)) {
		/* A peer sends eager what this endpoint told it to at most (conn_msg.c). */
		if (unlikely(left > ep->direct_max)) {
			FI_WARN(&layer_prov, FI_LOG_EP_DATA, "message of %zu bytes over the %zu "
				"this endpoint takes: closing its connection\n", left,
				ep->direct_max);
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

/* Direct receive: a message matched while it arrived is in. */
static void layer_proto_handle_matched(struct layer_ep *ep, struct layer_rx_buf *buf)
{
	struct layer_rx *rx = buf->rx;

	buf->rx = NULL;
	if (unlikely(buf->conn->is_ctrl_only))
		layer_conn_carries_data(ep, buf->conn);
	layer_proto_deliver(ep, rx, buf);
	layer_proto_repost_buf(ep, buf);
}

void layer_proto_buf_lost(struct layer_ep *ep, struct layer_rx_buf *buf, int err)
{
	const struct layer_hdr *hdr = (const struct layer_hdr *) buf->data;
	struct layer_rx *rx = buf->rx;

	layer_buf_settle(ep, buf);
	if (rx) {
		/* Matched while arriving, its message lost with the connection: the receive
		 * fails, as the receives of a removed peer's messages do. */
		buf->rx = NULL;
		rx->tag = hdr->tag;
		layer_proto_report_rx(ep, rx, NULL, 0,
				      FI_RECV | (hdr->flags & LAYER_HDR_TAGGED ? FI_TAGGED : FI_MSG),
				      0, buf->src_addr, err, 0);
		layer_rx_free(ep, rx);
	}
	layer_buf_put(ep, buf);
}

void layer_proto_discard(struct layer_ep *ep, struct layer_rx_buf *buf)
{
	const struct layer_hdr *hdr = (const struct layer_hdr *) buf->data;

	/* The sender of a rendezvous or acknowledged message waits for this answer. */
	if ((hdr->op == LAYER_OP_RTS || (hdr->flags & LAYER_HDR_ACK_REQ)) && buf->conn &&
	    buf->conn->state != LAYER_CONN_CLOSED)
		layer_proto_send_ctrl(ep, buf->conn, LAYER_OP_ACK, hdr->msg_id);
	layer_unexp_release(ep, buf);
}

struct layer_rx *layer_rx_alloc(struct layer_ep *ep, void *context, uint64_t flags,
				const struct iovec *iov, size_t iov_cnt, fi_addr_t src)
{
	struct layer_rx *rx;
	size_t i;

	if (ep->rx_used >= ep->rx_size)
		return NULL;
	rx = util_bufpool_get(&ep->rx_pool);
	if (!rx)
		return NULL;
	ep->rx_used++;
	rx->type = LAYER_CTX_RX_BUF;
	rx->context = context;
	rx->flags = flags;
	rx->src_addr = src;
	rx->iov_cnt = iov_cnt;
	for (i = 0; i < iov_cnt; i++)
		rx->iov[i] = iov[i];
	rx->len = layer_iov_len(iov, iov_cnt);
	rx->mrecv_used = 0;
	rx->tag = 0;
	util_dlist_init(&rx->link);
	return rx;
}

ssize_t layer_proto_recv(struct layer_ep *ep, const struct iovec *iov, size_t iov_cnt,
			 fi_addr_t src, uint64_t flags, void *context)
{
	struct util_dlist *item, *tmp;
	struct layer_rx_buf *buf;
	struct layer_rx *rx;
	bool is_released;

	rx = layer_rx_alloc(ep, context, flags, iov, iov_cnt, src);
	if (!rx)
		return -FI_EAGAIN;

	util_dlist_foreach_safe(&ep->unexp_msgs, item, tmp) {
		buf = container_of(item, struct layer_rx_buf, link);
		if (!layer_rx_matches(rx, buf))
			continue;
		util_dlist_remove(&buf->link);
		is_released = layer_proto_deliver(ep, rx, buf);
		layer_unexp_release(ep, buf);
		if (is_released)
			return 0;
	}
	util_dlist_insert_tail(&rx->link, &ep->posted_rx);
	/* A receive waits: a stall on receiving is lifted (its message may be behind it). */
	layer_unexp_check(ep);
	return 0;
}

int layer_proto_cancel(struct layer_ep *ep, void *context)
{
	struct util_dlist *item;
	struct layer_rx *rx;

	util_dlist_foreach(&ep->posted_rx, item) {
		rx = container_of(item, struct layer_rx, link);
		if (rx->context != context)
			continue;
		util_dlist_remove(&rx->link);
		layer_proto_report_rx(ep, rx, NULL, 0, FI_RECV | FI_MSG, 0, FI_ADDR_NOTAVAIL,
				      FI_ECANCELED, 0);
		layer_rx_free(ep, rx);
		return 0;
	}
	return -FI_ENOENT;
}

void layer_proto_handle_comp(struct layer_ep *ep, const struct fi_cq_msg_entry *comp)
{
	enum layer_ctx_type type = *(enum layer_ctx_type *) comp->op_context;
	struct layer_rx_buf *buf;
	struct layer_tx *tx;

	switch (type) {
	case LAYER_CTX_TX:
		tx = comp->op_context;
		util_dlist_remove(&tx->link);
		if (tx->wants_ack)
			layer_rndv_tx_sent(ep, tx);
		else
			layer_proto_complete_tx(ep, tx, 0);
		break;
	case LAYER_CTX_RX_BUF:
		/* A connection's buffer (an RDM core's are handled in conn_rdm.c). */
		buf = comp->op_context;
		util_dlist_remove(&buf->link);
		buf->conn->posted_cnt--;
		buf->len = comp->len;
		layer_buf_settle(ep, buf);
		if (buf->rx)
			layer_proto_handle_matched(ep, buf);
		else
			layer_proto_handle_buf(ep, buf);
		break;
	case LAYER_CTX_READ:
		layer_rndv_read_done(ep, comp->op_context, 0);
		break;
	}
}

void layer_proto_handle_error(struct layer_ep *ep, const struct fi_cq_err_entry *err)
{
	enum layer_ctx_type type;
	struct layer_rx_buf *buf;
	struct layer_tx *tx;
	struct layer_rx *rx;
	int code = err->err ? err->err : FI_EIO;

	if (!err->op_context)
		return;
	type = *(enum layer_ctx_type *) err->op_context;
	switch (type) {
	case LAYER_CTX_TX:
		tx = err->op_context;
		util_dlist_remove(&tx->link);
		ep->core->op_failed(tx->conn, tx, code);
		layer_proto_complete_tx(ep, tx, code);
		break;
	case LAYER_CTX_RX_BUF:
		/* A connection's buffer (an RDM core's are handled in conn_rdm.c). */
		buf = err->op_context;
		util_dlist_remove(&buf->link);
		buf->conn->posted_cnt--;
		if (code != FI_ECANCELED && buf->conn && buf->conn->state != LAYER_CONN_CLOSED)
			layer_conn_fail(buf->conn, code);
		/* a receive matched to its message fails as the connection did */
		layer_proto_buf_lost(ep, buf, buf->conn->fail_err ? buf->conn->fail_err :
					      code == FI_ECANCELED ? FI_EIO : code);
		break;
	case LAYER_CTX_READ:
		rx = err->op_context;
		ep->core->op_failed(rx->conn, NULL, code);
		layer_rndv_read_done(ep, rx, code);
		break;
	}
}
