/*
 * Rendezvous for messages above eager_size: the sender registers its buffers with the core
 * and sends an RTS naming them; the receiver, once the message is matched, reads the data
 * straight into the user's buffer with the core's RMA read and answers with an ACK, upon
 * which the sender completes. Nothing is staged: the payload crosses the core once, and an
 * unexpected large message waits as its RTS only.
 */
#include "config.h"

#include <string.h>
#include <rdma/fi_rma.h>

#include "layer/ep.h"

int layer_rndv_prepare_tx(struct layer_ep *ep, struct layer_tx *tx,
			  const struct iovec *iov, size_t iov_cnt)
{
	size_t i, n = 0;
	int ret;

	for (i = 0; i < iov_cnt; i++) {
		if (!iov[i].iov_len)
			continue;
		ret = layer_domain_reg_rma(ep->domain, &iov[i], 1, &tx->mr[n]);
		if (ret) {
			FI_WARN(&layer_prov, FI_LOG_EP_DATA, "registration failed: %s\n",
				fi_strerror(-ret));
			return ret;
		}
		tx->mr_cnt = ++n;
		tx->segs[n - 1] = (struct layer_rts_seg) {
			.addr = ep->core_has_virt_addr ? (uint64_t) (uintptr_t) iov[i].iov_base : 0,
			.key = fi_mr_key(tx->mr[n - 1]),
			.len = iov[i].iov_len,
		};
	}
	tx->hdr.op = LAYER_OP_RTS;
	tx->hdr.seg_cnt = (uint16_t) n;
	/* A rendezvous message is acknowledged anyway, once pulled: no eager ACK request. */
	tx->hdr.flags &= ~LAYER_HDR_ACK_REQ;
	if (!tx->wants_ack)
		tx->hdr.msg_id = ep->next_msg_id++;
	tx->wants_ack = true;
	tx->iov[0].iov_base = &tx->hdr;
	tx->iov[0].iov_len = sizeof(tx->hdr) + n * sizeof(struct layer_rts_seg);
	tx->iov_cnt = 1;
	return 0;
}

void layer_rndv_tx_sent(struct layer_ep *ep, struct layer_tx *tx)
{
	if (tx->is_acked || tx->conn->state == LAYER_CONN_CLOSED) {
		layer_proto_complete_tx(ep, tx, tx->is_acked ? tx->ack_err : tx->conn->fail_err);
		return;
	}
	util_dlist_insert_tail(&tx->link, &tx->conn->rndv_tx);
}

static struct layer_tx *layer_rndv_find(struct util_dlist *list, uint64_t msg_id)
{
	struct util_dlist *item;
	struct layer_tx *tx;

	util_dlist_foreach(list, item) {
		tx = container_of(item, struct layer_tx, link);
		if (tx->wants_ack && tx->hdr.msg_id == msg_id)
			return tx;
	}
	return NULL;
}

bool layer_rndv_take_ack(struct layer_conn *conn, const struct layer_hdr *hdr)
{
	int err = hdr->flags & LAYER_HDR_FAILED ? FI_EIO : 0;
	struct layer_tx *tx;

	tx = layer_rndv_find(&conn->rndv_tx, hdr->msg_id);
	if (tx) {
		util_dlist_remove(&tx->link);
		layer_proto_complete_tx(conn->ep, tx, err);
		return true;
	}
	/* The ACK may overtake the completion of the RTS send itself. */
	tx = layer_rndv_find(&conn->inflight_tx, hdr->msg_id);
	if (tx) {
		tx->is_acked = true;
		tx->ack_err = err;
		return true;
	}
	return false;
}

bool layer_rndv_issue_reads(struct layer_ep *ep, struct layer_rx *rx)
{
	const struct layer_rts_seg *seg;
	char *dst;
	size_t n;
	ssize_t ret;

	while (rx->read_done < rx->read_len) {
		seg = &rx->segs[rx->seg_idx];
		if (rx->seg_off == seg->len) {
			rx->seg_idx++;
			rx->seg_off = 0;
			continue;
		}
		if (rx->iov_off == rx->iov[rx->iov_idx].iov_len) {
			rx->iov_idx++;
			rx->iov_off = 0;
			continue;
		}
		n = UTIL_MIN(seg->len - rx->seg_off, rx->iov[rx->iov_idx].iov_len - rx->iov_off);
		n = UTIL_MIN(n, rx->read_len - rx->read_done);
		dst = (char *) rx->iov[rx->iov_idx].iov_base + rx->iov_off;
		ret = layer_core_read(rx->conn, dst, n, seg->addr + rx->seg_off, seg->key, rx);
		if (ret == -FI_EAGAIN)
			return false;
		if (ret) {
			FI_WARN(&layer_prov, FI_LOG_EP_DATA, "core read failed: %s\n",
				fi_strerror((int) -ret));
			rx->read_err = (int) -ret;
			rx->read_len = rx->read_done;
			break;
		}
		rx->reads_left++;
		rx->read_done += n;
		rx->seg_off += n;
		rx->iov_off += n;
	}
	return true;
}

static void layer_rndv_finish(struct layer_ep *ep, struct layer_rx *rx)
{
	struct layer_conn *conn = rx->conn;
	int err = rx->read_err;

	util_dlist_remove(&rx->link);
	/* The sender waits for this answer whatever happened: a read that failed while the
	 * connection lives (an RDM core fails operations alone) fails its send too. */
	if (conn->state != LAYER_CONN_CLOSED)
		layer_proto_send_ctrl_hdr(ep, conn, LAYER_OP_ACK, err ? LAYER_HDR_FAILED : 0,
					  rx->msg_id, 0, NULL, 0);
	if (!err && rx->read_len < rx->msg_len)
		layer_proto_report_rx(ep, rx, rx->msg_buf, rx->read_len, rx->cq_flags,
				      rx->cq_data, rx->msg_src, FI_ETRUNC,
				      rx->msg_len - rx->read_len);
	else
		layer_proto_report_rx(ep, rx, rx->msg_buf, err ? 0 : rx->read_len, rx->cq_flags,
				      rx->cq_data, rx->msg_src, err, 0);
	layer_rx_free(ep, rx);
}

void layer_rndv_start_read(struct layer_ep *ep, struct layer_rx *rx,
			   const struct layer_rx_buf *buf, size_t offset, size_t space,
			   uint64_t cq_flags, bool is_released)
{
	const struct layer_hdr *hdr = (const struct layer_hdr *) buf->data;
	struct layer_rx *child;

	if (rx->flags & FI_MULTI_RECV) {
		/* The read targets one slice of the multi-receive buffer. */
		child = is_released ? rx : util_bufpool_get(&ep->rx_pool);
		if (!child) {
			layer_proto_report_rx(ep, rx, NULL, 0, cq_flags, 0, buf->src_addr,
					      FI_ENOMEM, hdr->size);
			return;
		}
		if (child != rx) {
			ep->rx_used++;
			child->context = rx->context;
			child->flags = rx->flags;
		}
		child->iov[0].iov_base = (char *) rx->iov[0].iov_base + offset;
		child->iov[0].iov_len = space;
		child->iov_cnt = 1;
		child->len = space;
		rx = child;
	}

	rx->type = LAYER_CTX_READ;
	rx->conn = buf->conn;
	rx->msg_id = hdr->msg_id;
	rx->msg_len = hdr->size;
	rx->cq_data = hdr->data;
	rx->cq_flags = cq_flags;
	rx->msg_src = buf->src_addr;
	rx->msg_buf = rx->iov_cnt ? rx->iov[0].iov_base : NULL;
	rx->read_len = UTIL_MIN(hdr->size, rx->len);
	rx->reads_left = 0;
	rx->read_err = 0;
	rx->seg_idx = rx->seg_off = rx->iov_idx = rx->iov_off = rx->read_done = 0;
	rx->seg_cnt = hdr->seg_cnt;
	memcpy(rx->segs, buf->data + sizeof(*hdr), hdr->seg_cnt * sizeof(struct layer_rts_seg));
	util_dlist_insert_tail(&rx->link, &rx->conn->reading_rx);

	if (rx->conn->state == LAYER_CONN_CLOSED) {
		rx->read_err = rx->conn->fail_err;
		layer_rndv_finish(ep, rx);
		return;
	}
	if (!layer_rndv_issue_reads(ep, rx)) {
		ep->has_pending = true;
		return;
	}
	if (!rx->reads_left)
		layer_rndv_finish(ep, rx);
}

void layer_rndv_read_done(struct layer_ep *ep, struct layer_rx *rx, int err)
{
	if (err && !rx->read_err)
		rx->read_err = err;
	if (rx->reads_left)
		rx->reads_left--;
	if (rx->reads_left || (rx->read_done < rx->read_len && !rx->read_err))
		return;
	layer_rndv_finish(ep, rx);
}
