/*
 * Rendezvous (rndv.h): the sender's buffers come from the domain's registration cache (mr.h)
 * and are named in an RTS; the receiver, once the message is matched, reads the data straight
 * into the receive's buffer with the core's RMA read and answers with an ACK, upon which the
 * sender completes. Nothing is staged: the payload crosses the core once, and an unexpected
 * large message waits as its RTS only.
 */
#include "config.h"

#include <string.h>

#include "layer/cma/cma.h"
#include "layer/proto/proto.h"
#include "layer/proto/rndv.h"
#include "layer/proto/rx.h"
#include "layer/proto/tx.h"

/* iov named in segs: as they are when by_cma (cma/cma.h), else registered with the core. */
static int layer_rndv_name(struct layer_proto *proto, struct layer_tx *tx,
			   const struct iovec *iov, size_t iov_cnt, struct layer_rts_seg *segs,
			   bool by_cma)
{
	size_t i;
	int ret;

	if (by_cma) {
		layer_cma_name(tx, iov, iov_cnt, segs);
		return 0;
	}
	for (i = 0; i < iov_cnt; i++) {
		if (!iov[i].iov_len)
			continue;
		ret = layer_mr_rndv_get(proto->domain, &iov[i], &tx->reg[tx->reg_cnt]);
		if (ret)
			return ret;
		segs[tx->reg_cnt] = (struct layer_rts_seg) {
			.addr = proto->core->has_virt_addr ? (uint64_t) (uintptr_t) iov[i].iov_base :
							     0,
			.key = layer_mr_rndv_key(tx->reg[tx->reg_cnt]),
			.len = iov[i].iov_len,
		};
		tx->reg_cnt++;
	}
	return 0;
}

int layer_rndv_register(struct layer_proto *proto, struct layer_conn *conn, struct layer_tx *tx,
			const struct iovec *iov, size_t iov_cnt, struct layer_rts_seg *segs)
{
	return layer_rndv_name(proto, tx, iov, iov_cnt, segs, conn->cma_is_read);
}

int layer_rndv_prepare(struct layer_proto *proto, struct layer_conn *conn, struct layer_tx *tx,
		       const struct iovec *iov, size_t iov_cnt)
{
	size_t n;
	int ret;

	/* what an earlier attempt left (a paced send that stayed eager) is let go first */
	layer_rndv_release(proto, tx);
	ret = layer_tx_want_ack(proto, tx);
	if (!ret)
		ret = layer_rndv_name(proto, tx, iov, iov_cnt, tx->segs,
				      layer_cma_msg_is_for(conn, tx->len));
	if (ret)
		return ret;
	n = tx->reg_cnt;
	tx->hdr.op = LAYER_OP_RTS;
	tx->hdr.seg_cnt = (uint16_t) n;
	/* A rendezvous message is acknowledged anyway, once pulled: no eager ACK request. */
	tx->hdr.flags &= ~LAYER_HDR_ACK_REQ;
	tx->iov[0].iov_base = &tx->hdr;
	tx->iov[0].iov_len = sizeof(tx->hdr) + n * sizeof(struct layer_rts_seg);
	tx->iov_cnt = 1;
	return 0;
}

void layer_rndv_release(struct layer_proto *proto, struct layer_tx *tx)
{
	size_t i;

	for (i = 0; i < tx->reg_cnt; i++) {
		if (tx->reg[i])
			layer_mr_rndv_put(proto->domain, tx->reg[i]);
	}
	tx->reg_cnt = 0;
	tx->hdr.flags &= (uint16_t) ~LAYER_HDR_CMA;
}

bool layer_rndv_issue_reads(struct layer_proto *proto, struct layer_rx *rx)
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
		rx->ctx.chan = rx->conn->chan;
		ret = layer_core_read(rx->conn->chan, dst, n, seg->addr + rx->seg_off, seg->key,
				      &rx->ctx);
		if (ret == -FI_EAGAIN)
			return false;
		if (ret) {
			FI_INFO(&layer_prov, FI_LOG_EP_DATA, "core read failed: %s\n",
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

static void layer_rndv_finish(struct layer_proto *proto, struct layer_rx *rx)
{
	struct layer_conn *conn = rx->conn;
	int err = rx->read_err;

	util_dlist_remove(&rx->link);
	FI_DBG(&layer_prov, FI_LOG_EP_DATA, "read of message %#lx done: %d\n",
	       (unsigned long) rx->msg_id, err);
	if (rx->on_read_done) {
		rx->on_read_done(proto, rx);
		return;
	}
	/* The sender waits for this answer whatever happened: a read that failed while the
	 * connection lives (an RDM core fails operations alone) fails its send too. */
	if (conn->state != LAYER_CONN_CLOSED)
		layer_tx_ctrl(proto, conn, LAYER_OP_ACK, err ? LAYER_HDR_FAILED : 0, rx->msg_id);
	if (!err && rx->read_len < rx->msg_len)
		layer_rx_report(proto, rx, rx->msg_buf, rx->read_len, rx->cq_flags, rx->cq_data,
				rx->msg_src, FI_ETRUNC, rx->msg_len - rx->read_len);
	else
		layer_rx_report(proto, rx, rx->msg_buf, err ? 0 : rx->read_len, rx->cq_flags,
				rx->cq_data, rx->msg_src, err, 0);
	layer_rx_free(proto, rx);
}

void layer_rndv_start_read(struct layer_proto *proto, struct layer_rx *rx,
			   const struct layer_buf *buf, size_t offset, size_t space,
			   uint64_t cq_flags, bool is_released)
{
	const struct layer_hdr *hdr = layer_buf_hdr(buf);
	struct layer_rx *child;

	if (rx->flags & FI_MULTI_RECV) {
		/* The read targets one slice of the multi-receive buffer. */
		child = is_released ? rx : layer_rx_get(proto);
		if (!child) {
			layer_rx_report(proto, rx, NULL, 0, cq_flags, 0, buf->src_addr, FI_ENOMEM,
					hdr->size);
			return;
		}
		if (child != rx) {
			child->context = rx->context;
			child->flags = rx->flags;
		}
		child->iov[0].iov_base = (char *) rx->iov[0].iov_base + offset;
		child->iov[0].iov_len = space;
		child->iov_cnt = 1;
		child->len = space;
		rx = child;
	}

	rx->ctx.type = LAYER_CTX_READ;
	rx->conn = buf->ctx.chan->conn;
	rx->msg_id = hdr->msg_id;
	rx->msg_len = hdr->size;
	rx->cq_data = hdr->data;
	rx->cq_flags = cq_flags;
	rx->msg_src = buf->src_addr;
	rx->msg_buf = rx->iov_cnt ? rx->iov[0].iov_base : NULL;
	rx->read_len = UTIL_MIN(hdr->size, rx->len);
	rx->seg_cnt = hdr->seg_cnt;
	rx->is_cma = hdr->flags & LAYER_HDR_CMA;
	memcpy(rx->segs, buf->data + sizeof(*hdr), hdr->seg_cnt * sizeof(struct layer_rts_seg));
	layer_rndv_run(proto, rx);
}

void layer_rndv_run(struct layer_proto *proto, struct layer_rx *rx)
{
	rx->reads_left = 0;
	rx->read_err = 0;
	rx->seg_idx = rx->seg_off = rx->iov_idx = rx->iov_off = rx->read_done = 0;
	util_dlist_insert_tail(&rx->link, &rx->conn->reading_rx);
	FI_DBG(&layer_prov, FI_LOG_EP_DATA, "reading message %#lx, %zu of %lu bytes\n",
	       (unsigned long) rx->msg_id, rx->read_len, (unsigned long) rx->msg_len);

	if (rx->conn->state == LAYER_CONN_CLOSED) {
		rx->read_err = rx->conn->fail_err;
		layer_rndv_finish(proto, rx);
		return;
	}
	if (rx->is_cma) {
		layer_cma_copy(proto, rx);
		layer_rndv_finish(proto, rx);
		return;
	}
	if (!layer_rndv_issue_reads(proto, rx)) {
		layer_proto_pend(proto, rx->conn);
		return;
	}
	if (!rx->reads_left)
		layer_rndv_finish(proto, rx);
}

void layer_rndv_read_done(struct layer_proto *proto, struct layer_rx *rx, int err)
{
	if (err && !rx->read_err)
		rx->read_err = err;
	if (rx->reads_left)
		rx->reads_left--;
	if (rx->reads_left || (rx->read_done < rx->read_len && !rx->read_err))
		return;
	layer_rndv_finish(proto, rx);
}
