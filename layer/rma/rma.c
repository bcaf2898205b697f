/* RMA, the initiator's side (rma.h). */
#include "config.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "layer/cma/cma.h"
#include "layer/proto/rndv.h"
#include "layer/proto/rx.h"
#include "layer/proto/tx.h"
#include "layer/rma/grant.h"
#include "layer/rma/rma.h"

/*
 * Direct RMA (grant.h): a request inside what the target granted on conn goes on the core's
 * RMA, unless it needs the target's answer (remote CQ data, FI_DELIVERY_COMPLETE) or more
 * iovs than the core takes. True when tx is set up so (tx.h): the core's address and key in
 * the header, the local buffers in iov (an inject's, a copy in the entry).
 */
static bool layer_rma_direct(struct layer_proto *proto, struct layer_conn *conn,
			     struct layer_tx *tx, const struct iovec *iov, size_t iov_cnt,
			     uint64_t flags)
{
	uint64_t access = tx->hdr.op == LAYER_OP_WRITE ? FI_REMOTE_WRITE : FI_REMOTE_READ;
	const struct layer_rts_seg *target = &tx->segs[0];
	const struct layer_grant *grant;
	uint64_t core_addr;

	/* the core's RMA is served as it arrives: after every atomic before it was applied;
	 * and to a peer on the host that reads this process, one copy does better (cma/cma.h) */
	if ((flags & (FI_DELIVERY_COMPLETE | FI_REMOTE_CQ_DATA)) || !tx->len ||
	    layer_cma_is_for(conn, tx->len) ||
	    conn->blind_applied != conn->blind_sent || iov_cnt > proto->core->iov_limit ||
	    ((flags & FI_INJECT) && tx->len > sizeof(tx->inline_data)))
		return false;
	grant = layer_grant_find(conn, target->key, target->addr, tx->len, access, &core_addr);
	if (!grant)
		return false;
	tx->hdr.tag = core_addr;
	tx->hdr.data = grant->core_key;
	if (flags & FI_INJECT) {
		util_iov_gather(tx->inline_data, iov, iov_cnt);
		tx->iov[0] = (struct iovec) { .iov_base = tx->inline_data, .iov_len = tx->len };
		tx->iov_cnt = 1;
	} else {
		memcpy(tx->iov, iov, iov_cnt * sizeof(*iov));
		tx->iov_cnt = iov_cnt;
	}
	tx->is_direct = true;
	return true;
}

/* A request's transmit entry: its header and the target range, the answer wanted (as a
 * message) or the core's target range (direct). */
static ssize_t layer_rma_new(struct layer_proto *proto, fi_addr_t peer, enum layer_op op,
			     const struct iovec *iov, size_t iov_cnt,
			     const struct fi_rma_iov *rma, uint64_t flags, void *context,
			     struct layer_conn **conn, struct layer_tx **tx_out)
{
	size_t len = util_iov_len(iov, iov_cnt);
	struct layer_tx *tx;
	int ret;

	if (unlikely(len != rma->len))
		return -FI_EINVAL;
	if (unlikely(len > LAYER_MAX_MSG_SIZE))
		return -FI_EMSGSIZE;
	ret = layer_conn_get(proto->conns, peer, conn);
	if (unlikely(ret))
		return ret;
	layer_cma_want(proto, *conn, len, layer_settings.cma_size);
	tx = layer_tx_new(proto);
	if (unlikely(!tx))
		return -FI_EAGAIN;
	tx->context = context;
	tx->flags = flags;
	tx->cq_flags = FI_RMA | (op == LAYER_OP_READ_REQ ? FI_READ : FI_WRITE) |
		       (flags & FI_COMPLETION);
	tx->len = len;
	tx->hdr = (struct layer_hdr) {
		.version = LAYER_PROTO_VERSION,
		.op = (uint8_t) op,
		.key_slot = (*conn)->chan->key_slot,
		.seg_cnt = 1,
		.size = len,
	};
	tx->segs[0] = (struct layer_rts_seg) { .addr = rma->addr, .key = rma->key, .len = len };
	if (layer_rma_direct(proto, *conn, tx, iov, iov_cnt, flags)) {
		*tx_out = tx;
		return 0;
	}
	ret = layer_tx_want_ack(proto, tx);
	if (unlikely(ret)) {
		layer_tx_discard(proto, tx);
		return ret;
	}
	*tx_out = tx;
	return 0;
}

/* A write too large for the peer's buffers names its registered buffers (WRITE_RTS). */
static int layer_rma_write_rts(struct layer_proto *proto, struct layer_conn *conn,
			       struct layer_tx *tx, const struct iovec *iov, size_t iov_cnt)
{
	size_t n;
	int ret;

	/* after the target range */
	ret = layer_rndv_register(proto, conn, tx, iov, iov_cnt, tx->segs + 1);
	if (ret)
		return ret;
	n = tx->reg_cnt;
	tx->hdr.op = LAYER_OP_WRITE_RTS;
	tx->hdr.seg_cnt = (uint16_t) (n + 1);
	tx->iov[0].iov_base = &tx->hdr;
	tx->iov[0].iov_len = sizeof(tx->hdr) + (n + 1) * LAYER_RMA_SEG_SIZE;
	tx->iov_cnt = 1;
	return 0;
}

ssize_t layer_rma_write(struct layer_proto *proto, const struct iovec *iov, size_t iov_cnt,
			fi_addr_t dest, const struct fi_rma_iov *rma, uint64_t data,
			uint64_t flags, void *context)
{
	const size_t head = sizeof(struct layer_hdr);
	struct layer_conn *conn;
	struct layer_tx *tx;
	size_t i, len, trailer = 0;
	ssize_t ret;

	ret = layer_rma_new(proto, dest, LAYER_OP_WRITE, iov, iov_cnt, rma, flags, context,
			    &conn, &tx);
	if (unlikely(ret))
		return ret;
	len = tx->len;
	if (tx->is_direct)
		goto post;
	if (len > conn->chan->tx_rma_eager - sizeof(uint64_t) || layer_cma_is_for(conn, len)) {
		/* too large for the peer's buffers, or for a copy through the core to a peer
		 * that reads this process: the target reads it */
		if (flags & FI_REMOTE_CQ_DATA) {
			tx->hdr.flags |= LAYER_HDR_CQ_DATA;
			tx->hdr.data = data;
		}
		ret = layer_rma_write_rts(proto, conn, tx, iov, iov_cnt);
		goto post;
	}
	/* the target range in the header, the data after it, then any remote CQ data; the
	 * target answers once it has taken it, or once it is in place if asked */
	tx->hdr.seg_cnt = 0;
	if (flags & FI_DELIVERY_COMPLETE)
		tx->hdr.flags |= LAYER_HDR_DELIVERY;
	tx->hdr.tag = rma->addr;
	tx->hdr.data = rma->key;
	if (flags & FI_REMOTE_CQ_DATA) {
		tx->hdr.flags |= LAYER_HDR_CQ_DATA;
		tx->rma_cq_data = data;
		trailer = sizeof(uint64_t);
	}
	if (len + trailer <= LAYER_INJECT_SIZE) {
		/* small: copied into the entry */
		util_iov_gather(tx->inline_data, iov, iov_cnt);
		memcpy(tx->inline_data + len, &tx->rma_cq_data, trailer);
		tx->iov[0].iov_base = &tx->hdr;
		tx->iov[0].iov_len = head + len + trailer;
		tx->iov_cnt = 1;
	} else if (iov_cnt + 2 <= proto->core->iov_limit && !(flags & FI_INJECT)) {
		/* zero copy: the header, the application's buffers, the CQ data */
		tx->iov[0].iov_base = &tx->hdr;
		tx->iov[0].iov_len = head;
		for (i = 0; i < iov_cnt; i++)
			tx->iov[i + 1] = iov[i];
		tx->iov_cnt = iov_cnt + 1;
		if (trailer) {
			tx->iov[tx->iov_cnt].iov_base = &tx->rma_cq_data;
			tx->iov[tx->iov_cnt++].iov_len = trailer;
		}
	} else {
		tx->bounce = malloc(head + len + trailer);
		if (!tx->bounce) {
			ret = -FI_ENOMEM;
		} else {
			memcpy(tx->bounce, &tx->hdr, head);
			util_iov_gather((char *) tx->bounce + head, iov, iov_cnt);
			memcpy((char *) tx->bounce + head + len, &tx->rma_cq_data, trailer);
			tx->iov[0].iov_base = tx->bounce;
			tx->iov[0].iov_len = head + len + trailer;
			tx->iov_cnt = 1;
		}
	}
post:
	if (unlikely(ret)) {
		layer_tx_discard(proto, tx);
		return ret;
	}
	FI_DBG(&layer_prov, FI_LOG_EP_DATA, "%s %p: %zu bytes to %#" PRIx64 " key %#" PRIx64
	       "\n", layer_op_str(tx->hdr.op), (void *) tx, len, rma->addr, rma->key);
	layer_tx_start(proto, conn, tx);
	return 0;
}

ssize_t layer_rma_read(struct layer_proto *proto, const struct iovec *iov, size_t iov_cnt,
		       fi_addr_t src, const struct fi_rma_iov *rma, uint64_t flags,
		       void *context)
{
	struct layer_conn *conn;
	struct layer_tx *tx;
	ssize_t ret;

	ret = layer_rma_new(proto, src, LAYER_OP_READ_REQ, iov, iov_cnt, rma, flags, context,
			    &conn, &tx);
	if (unlikely(ret))
		return ret;
	if (!tx->is_direct) {
		memcpy(tx->rma_iov, iov, iov_cnt * sizeof(*iov));
		tx->rma_iov_cnt = iov_cnt;
		tx->iov[0].iov_base = &tx->hdr;
		tx->iov[0].iov_len = sizeof(tx->hdr) + LAYER_RMA_SEG_SIZE;
		tx->iov_cnt = 1;
	}
	FI_DBG(&layer_prov, FI_LOG_EP_DATA, "read %p: %zu bytes at %#" PRIx64 " key %#" PRIx64
	       "\n", (void *) tx, tx->len, rma->addr, rma->key);
	layer_tx_start(proto, conn, tx);
	return 0;
}

/* Whether tx waits for a READ_RESP: a read, or an atomic's fetch or compare form. */
static inline bool layer_rma_wants_data(const struct layer_tx *tx)
{
	return tx->hdr.op == LAYER_OP_READ_REQ ||
	       (tx->hdr.op == LAYER_OP_ATOMIC && tx->rma_iov_cnt);
}

/* The initiator read the target's segments: the target may let them go, the read is done. */
static void layer_rma_read_pulled(struct layer_proto *proto, struct layer_rx *rx)
{
	struct layer_tx *tx = rx->job;
	int err = rx->read_err;

	if (rx->conn->state != LAYER_CONN_CLOSED)
		layer_tx_ack_send(proto, rx->conn, rx->msg_id, err ? FI_EIO : 0);
	layer_rx_free(proto, rx);
	layer_tx_answered(proto, tx, err);
}

void layer_rma_read_resp(struct layer_proto *proto, struct layer_buf *buf)
{
	const struct layer_hdr *hdr = layer_buf_hdr(buf);
	struct layer_conn *conn = buf->ctx.chan->conn;
	const uint8_t *payload = layer_buf_payload(buf);
	struct layer_tx *tx;
	struct layer_rx *rx;

	tx = layer_tx_find(proto, conn, hdr->tag);
	if (unlikely(!tx || !layer_rma_wants_data(tx))) {
		layer_core_dropped(proto->core, buf, "an answer to no read");
		return;
	}
	if (hdr->flags & LAYER_HDR_FAILED) {
		layer_tx_answered(proto, tx, layer_tx_answer_err(hdr));
		return;
	}
	if (unlikely(hdr->size != tx->len ||
		     (hdr->seg_cnt && !layer_segs_add_up(hdr, (const void *) payload, 0)))) {
		layer_core_dropped(proto->core, buf, "a read answer of the wrong size");
		layer_tx_answered(proto, tx, FI_EIO);
		return;
	}
	if (hdr->flags & LAYER_HDR_INLINE) {
		util_iov_scatter(tx->rma_iov, tx->rma_iov_cnt, &hdr->data);
		layer_tx_answered(proto, tx, 0);
		return;
	}
	if (!hdr->seg_cnt && buf->is_placed) {
		/* placed while it arrived: the data is in the application's buffers */
		layer_tx_answered(proto, tx, 0);
		return;
	}
	if (!hdr->seg_cnt) {
		util_iov_scatter(tx->rma_iov, tx->rma_iov_cnt, payload);
		layer_tx_answered(proto, tx, 0);
		return;
	}
	/* the target's registered segments: read them into the application's buffers */
	rx = layer_rx_get(proto);
	if (!rx) {
		layer_tx_ack_send(proto, conn, hdr->msg_id, FI_ENOMEM);
		layer_tx_answered(proto, tx, FI_ENOMEM);
		return;
	}
	memcpy(rx->iov, tx->rma_iov, tx->rma_iov_cnt * sizeof(rx->iov[0]));
	rx->iov_cnt = tx->rma_iov_cnt;
	layer_rma_pull(proto, rx, conn, hdr, (const void *) payload, hdr->seg_cnt,
		       layer_rma_read_pulled, tx);
}

void layer_rma_pull(struct layer_proto *proto, struct layer_rx *rx, struct layer_conn *conn,
		    const struct layer_hdr *hdr, const struct layer_rts_seg *segs, uint32_t seg_cnt,
		    void (*done)(struct layer_proto *proto, struct layer_rx *rx), void *job)
{
	rx->len = hdr->size;
	rx->conn = conn;
	rx->msg_id = hdr->msg_id;
	rx->msg_len = hdr->size;
	rx->read_len = hdr->size;
	rx->seg_cnt = seg_cnt;
	rx->is_cma = hdr->flags & LAYER_HDR_CMA;
	memcpy(rx->segs, segs, seg_cnt * LAYER_RMA_SEG_SIZE);
	rx->on_read_done = done;
	rx->job = job;
	layer_rndv_run(proto, rx);
}

int layer_rma_place_read(struct layer_proto *proto, struct layer_buf *buf, struct iovec *iov,
			 size_t *count)
{
	const struct layer_hdr *hdr = layer_buf_hdr(buf);
	struct layer_tx *tx;

	if (hdr->seg_cnt || (hdr->flags & LAYER_HDR_FAILED))
		return -FI_EINVAL;
	tx = layer_tx_find(proto, buf->ctx.chan->conn, hdr->tag);
	if (!tx || !layer_rma_wants_data(tx) || hdr->size != tx->len ||
	    tx->rma_iov_cnt > *count)
		return -FI_EINVAL;
	memcpy(iov, tx->rma_iov, tx->rma_iov_cnt * sizeof(*iov));
	*count = tx->rma_iov_cnt;
	buf->is_placed = true;
	return 0;
}

void layer_rma_arrive(struct layer_proto *proto, struct layer_buf *buf)
{
	if (layer_buf_hdr(buf)->op == LAYER_OP_READ_RESP)
		layer_rma_read_resp(proto, buf);
	else
		layer_rma_target(proto, buf);
}
