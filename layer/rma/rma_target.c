/*
 * RMA, the target's side (rma.h): every request is checked against the application's
 * registrations first; a failed check answers with the error and touches nothing.
 */
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

/* A refused request: the application's bug, or a peer's. */
void layer_rma_refused(const struct layer_hdr *hdr, const struct layer_rts_seg *target, int err)
{
	LAYER_WARN_ONCE(FI_LOG_EP_DATA, "refused a peer's %s of %" PRIu64 " bytes at %#" PRIx64
			" key %#" PRIx64 ": %s (further refusals logged at info level)\n",
			layer_op_str(hdr->op), hdr->size, target->addr, target->key,
			fi_strerror(err));
	FI_INFO(&layer_prov, FI_LOG_EP_DATA, "refused %s at %#" PRIx64 " key %#" PRIx64 ": %s\n",
		layer_op_str(hdr->op), target->addr, target->key, fi_strerror(err));
}

/* What a peer's write leaves at the target: remote CQ data, FI_REMOTE_WRITE counted. */
static void layer_rma_written(struct layer_proto *proto, size_t len, bool has_data,
			      uint64_t data, fi_addr_t src)
{
	if (has_data && proto->rx_cq)
		(void) util_cq_write(&proto->rx_cq->util, NULL,
				     FI_RMA | FI_REMOTE_WRITE | FI_REMOTE_CQ_DATA, len, NULL, data,
				     0, src);
	if (proto->rem_write_cntr)
		util_cntr_inc(&proto->rem_write_cntr->util);
}

int layer_rma_place(struct layer_proto *proto, struct layer_buf *buf, struct iovec *iov,
		    size_t *count)
{
	const struct layer_hdr *hdr = layer_buf_hdr(buf);
	struct util_mr_map_entry *entry;
	size_t cnt = *count - 1;
	int ret;

	if (hdr->op == LAYER_OP_READ_RESP)
		return layer_rma_place_read(proto, buf, iov, count);
	/* the range checked now; what fails is handled (and refused) on arrival */
	ret = layer_mr_target_get(proto->domain, hdr->data, hdr->tag, hdr->size,
				  FI_REMOTE_WRITE, iov, &cnt, &entry);
	if (ret)
		return ret;
	if (hdr->flags & LAYER_HDR_CQ_DATA) {
		/* the CQ data after it lands in the buffer's own payload room */
		iov[cnt].iov_base = buf->data + LAYER_HDR_SIZE;
		iov[cnt++].iov_len = sizeof(uint64_t);
	}
	*count = cnt;
	buf->rma_entry = entry;
	buf->is_placed = true;
	/* checked, and its data on its way into place through a reliable core: unless the
	 * initiator waits for delivery, it hears so now (once the core's progress returns) */
	if (!(hdr->flags & LAYER_HDR_DELIVERY) && buf->ctx.chan->conn &&
	    proto->taken_cnt < LAYER_TAKEN_MAX) {
		proto->taken[proto->taken_cnt++] = (struct layer_taken_write) {
			.conn = buf->ctx.chan->conn,
			.msg_id = hdr->msg_id,
		};
		buf->is_answered = true;
	}
	return 0;
}

void layer_rma_answer_taken(struct layer_proto *proto)
{
	struct layer_taken_write *w;
	size_t i;

	for (i = 0; i < proto->taken_cnt; i++) {
		w = &proto->taken[i];
		if (w->conn->state != LAYER_CONN_CLOSED)
			layer_tx_ack_send(proto, w->conn, w->msg_id, 0);
	}
	proto->taken_cnt = 0;
}

void layer_rma_unplace(struct layer_proto *proto, struct layer_buf *buf)
{
	if (buf->rma_entry) {
		layer_mr_target_put(proto->domain, buf->rma_entry, 0);
		buf->rma_entry = NULL;
	}
}

static void layer_rma_write_in(struct layer_proto *proto, struct layer_buf *buf)
{
	const struct layer_hdr *hdr = layer_buf_hdr(buf);
	const struct layer_rts_seg target = { .addr = hdr->tag, .key = hdr->data,
					      .len = hdr->size };
	struct layer_conn *conn = buf->ctx.chan->conn;
	const uint8_t *payload = layer_buf_payload(buf);
	struct util_mr_map_entry *entry = buf->rma_entry;
	struct iovec iov[LAYER_IOV_LIMIT];
	size_t cnt = LAYER_IOV_LIMIT;
	uint64_t cq_data = 0;
	int ret = 0;

	if (entry) {
		/* placed while it arrived: the data is in the region already */
		buf->rma_entry = NULL;
		memcpy(&cq_data, payload, hdr->flags & LAYER_HDR_CQ_DATA ? sizeof(cq_data) : 0);
	} else {
		ret = layer_mr_target_get(proto->domain, target.key, target.addr, hdr->size,
					  FI_REMOTE_WRITE, iov, &cnt, &entry);
		if (!ret) {
			util_iov_scatter(iov, cnt, payload);
			memcpy(&cq_data, payload + hdr->size,
			       hdr->flags & LAYER_HDR_CQ_DATA ? sizeof(cq_data) : 0);
		}
	}
	if (!ret) {
		layer_grant_offer(proto, conn, entry);
		layer_mr_target_put(proto->domain, entry, FI_REMOTE_WRITE);
		layer_rma_written(proto, hdr->size, hdr->flags & LAYER_HDR_CQ_DATA, cq_data,
				  buf->src_addr);
	} else {
		layer_rma_refused(hdr, &target, -ret);
	}
	if (!buf->is_answered)
		layer_tx_ack_send_kept(proto, conn, hdr->msg_id, -ret,
				       !(hdr->flags & LAYER_HDR_CQ_DATA));
}

/* A WRITE_RTS's data is read: the registration goes back, the initiator hears. */
static void layer_rma_write_pulled(struct layer_proto *proto, struct layer_rx *rx)
{
	int err = rx->read_err;

	layer_mr_target_put(proto->domain, rx->job, err ? 0 : FI_REMOTE_WRITE);
	if (rx->conn->state != LAYER_CONN_CLOSED)
		layer_tx_ack_send_kept(proto, rx->conn, rx->msg_id, err ? FI_EIO : 0,
				       !(rx->cq_flags & FI_REMOTE_CQ_DATA));
	if (!err)
		layer_rma_written(proto, rx->read_len, rx->cq_flags & FI_REMOTE_CQ_DATA,
				  rx->cq_data, rx->msg_src);
	layer_rx_free(proto, rx);
}

static void layer_rma_write_rts_in(struct layer_proto *proto, struct layer_buf *buf,
				   const struct layer_rts_seg *target)
{
	const struct layer_hdr *hdr = layer_buf_hdr(buf);
	struct layer_conn *conn = buf->ctx.chan->conn;
	struct util_mr_map_entry *entry;
	struct layer_rx *rx;
	size_t cnt = LAYER_IOV_LIMIT;
	int ret;

	rx = layer_rx_get(proto);
	if (!rx) {
		layer_tx_ack_send(proto, conn, hdr->msg_id, FI_ENOMEM);
		return;
	}
	ret = layer_mr_target_get(proto->domain, target->key, target->addr, hdr->size,
				  FI_REMOTE_WRITE, rx->iov, &cnt, &entry);
	if (ret) {
		layer_rma_refused(hdr, target, -ret);
		layer_rx_free(proto, rx);
		layer_tx_ack_send(proto, conn, hdr->msg_id, -ret);
		return;
	}
	layer_grant_offer(proto, conn, entry);
	rx->iov_cnt = cnt;
	rx->msg_src = buf->src_addr;
	rx->cq_data = hdr->data;
	rx->cq_flags = hdr->flags & LAYER_HDR_CQ_DATA ? FI_REMOTE_CQ_DATA : 0;
	layer_rma_pull(proto, rx, conn, hdr, target + 1, hdr->seg_cnt - 1u,
		       layer_rma_write_pulled, entry);
}

struct layer_tx *layer_rma_resp_new(struct layer_proto *proto, struct layer_conn *conn,
				    uint64_t msg_id, uint64_t size, void **data)
{
	struct layer_tx *tx = layer_tx_ctrl_new(proto, LAYER_OP_READ_RESP, 0, 0);
	struct iovec iov;

	if (!tx)
		return NULL;
	tx->hdr.tag = msg_id;
	tx->hdr.size = size;
	tx->may_keep = true;
	if (size <= sizeof(tx->hdr.data)) {
		/* in the header: an answer and the next request fit one ring slot (core/ring.h) */
		tx->hdr.flags |= LAYER_HDR_INLINE;
		*data = &tx->hdr.data;
		tx->iov[0].iov_len = sizeof(tx->hdr);
		return tx;
	}
	if (size <= LAYER_INJECT_SIZE) {
		*data = tx->inline_data;
		tx->iov[0].iov_len = sizeof(tx->hdr) + size;
		return tx;
	}
	if (size <= conn->chan->tx_rma_eager) {
		tx->bounce = malloc(sizeof(tx->hdr) + size);
		if (!tx->bounce)
			goto err;
		memcpy(tx->bounce, &tx->hdr, sizeof(tx->hdr));
		*data = (char *) tx->bounce + sizeof(tx->hdr);
		tx->iov[0].iov_base = tx->bounce;
		tx->iov[0].iov_len = sizeof(tx->hdr) + size;
		return tx;
	}
	/* too large for the initiator's buffers: it reads the copy, then answers with an ACK of
	 * this entry's id, which lets it go */
	tx->bounce = malloc(size);
	iov.iov_base = tx->bounce;
	iov.iov_len = size;
	if (!tx->bounce || layer_tx_want_ack(proto, tx) ||
	    layer_rndv_register(proto, conn, tx, &iov, 1, tx->segs))
		goto err;
	tx->hdr.seg_cnt = (uint16_t) tx->reg_cnt;
	tx->iov[0].iov_len = sizeof(tx->hdr) + tx->reg_cnt * LAYER_RMA_SEG_SIZE;
	*data = tx->bounce;
	return tx;

err:
	layer_tx_discard(proto, tx);
	return NULL;
}

void layer_rma_resp_failed(struct layer_proto *proto, struct layer_conn *conn, uint64_t msg_id,
			   int err)
{
	struct layer_tx *tx;

	/* the header alone; without memory for it the request fails with its connection */
	tx = layer_tx_ctrl_new(proto, LAYER_OP_READ_RESP, LAYER_HDR_FAILED, 0);
	if (!tx)
		return;
	tx->hdr.tag = msg_id;
	tx->hdr.data = (uint64_t) err;
	layer_tx_ctrl_send(proto, conn, tx);
}

/* The data of a read from the registered memory: straight, or (larger than the initiator's
 * buffers take) registered for it to read, then answered with an ACK of this entry's id. */
static struct layer_tx *layer_rma_resp_zcopy(struct layer_proto *proto, struct layer_conn *conn,
					     const struct layer_hdr *hdr, const struct iovec *iov,
					     size_t cnt)
{
	struct layer_tx *tx = layer_tx_ctrl_new(proto, LAYER_OP_READ_RESP, 0, 0);
	size_t i;

	if (!tx)
		return NULL;
	tx->hdr.tag = hdr->msg_id;
	tx->hdr.size = hdr->size;
	if (hdr->size <= conn->chan->tx_rma_eager && !layer_cma_is_for(conn, hdr->size)) {
		for (i = 0; i < cnt; i++)
			tx->iov[i + 1] = iov[i];
		tx->iov_cnt = cnt + 1;
		return tx;
	}
	if (layer_tx_want_ack(proto, tx) ||
	    layer_rndv_register(proto, conn, tx, iov, cnt, tx->segs)) {
		layer_tx_discard(proto, tx);
		return NULL;
	}
	tx->hdr.seg_cnt = (uint16_t) tx->reg_cnt;
	tx->iov[0].iov_len = sizeof(tx->hdr) + tx->reg_cnt * LAYER_RMA_SEG_SIZE;
	return tx;
}

/* A read's answer: READ_RESP with the data, the target's segments, or (FAILED) the error. */
static void layer_rma_read_in(struct layer_proto *proto, struct layer_buf *buf,
			      const struct layer_rts_seg *target)
{
	const struct layer_hdr *hdr = layer_buf_hdr(buf);
	struct layer_conn *conn = buf->ctx.chan->conn;
	struct iovec iov[LAYER_IOV_LIMIT];
	size_t cnt = LAYER_IOV_LIMIT;
	struct util_mr_map_entry *entry;
	struct layer_tx *tx;
	void *data;
	int ret;

	ret = layer_mr_target_get(proto->domain, target->key, target->addr, hdr->size,
				  FI_REMOTE_READ, iov, &cnt, &entry);
	if (ret) {
		layer_rma_refused(hdr, target, -ret);
		layer_rma_resp_failed(proto, conn, hdr->msg_id, -ret);
		return;
	}
	layer_grant_offer(proto, conn, entry);
	if (layer_cma_is_for(conn, hdr->size)) {
		/* the initiator copies it from the region (cma/cma.h) */
		tx = layer_rma_resp_zcopy(proto, conn, hdr, iov, cnt);
	} else if (hdr->size <= LAYER_INJECT_SIZE ||
		   (hdr->size <= conn->chan->tx_rma_eager && cnt + 1 >= proto->core->iov_limit)) {
		/* small, or in more pieces than the core takes at once: copied */
		tx = layer_rma_resp_new(proto, conn, hdr->msg_id, hdr->size, &data);
		if (tx)
			util_iov_gather(data, iov, cnt);
	} else {
		tx = layer_rma_resp_zcopy(proto, conn, hdr, iov, cnt);
	}
	if (!tx) {
		layer_mr_target_put(proto->domain, entry, 0);
		layer_rma_resp_failed(proto, conn, hdr->msg_id, FI_ENOMEM);
		return;
	}
	tx->mr_entry = entry;          /* the memory is held until the answer is sent */
	/* counted as the answer goes: its data is taken from the region now, or read by the
	 * peer from the registration that holds it */
	if (proto->rem_read_cntr)
		util_cntr_inc(&proto->rem_read_cntr->util);
	layer_mr_target_count(proto->domain, entry, FI_REMOTE_READ);
	layer_tx_ctrl_send(proto, conn, tx);
}

void layer_rma_target(struct layer_proto *proto, struct layer_buf *buf)
{
	const struct layer_hdr *hdr = layer_buf_hdr(buf);
	const struct layer_rts_seg *target = (const struct layer_rts_seg *) layer_buf_payload(buf);

	if (hdr->op == LAYER_OP_WRITE) {
		FI_DBG(&layer_prov, FI_LOG_EP_DATA, "write in: %" PRIu64 " bytes at %#" PRIx64
		       " key %#" PRIx64 "\n", hdr->size, hdr->tag, hdr->data);
		layer_rma_write_in(proto, buf);
		return;
	}
	FI_DBG(&layer_prov, FI_LOG_EP_DATA, "%s in: %" PRIu64 " bytes at %#" PRIx64 " key %#"
	       PRIx64 "\n", layer_op_str(hdr->op), hdr->size, target->addr, target->key);
	if (unlikely(target->len != hdr->size ||
		     (hdr->op == LAYER_OP_WRITE_RTS && !layer_segs_add_up(hdr, target, 1)))) {
		layer_core_dropped(proto->core, buf, "malformed");
		return;
	}
	switch (hdr->op) {
	case LAYER_OP_WRITE_RTS:
		layer_rma_write_rts_in(proto, buf, target);
		break;
	default:
		layer_rma_read_in(proto, buf, target);
		break;
	}
}
