/*
 * Atomics, the target's side (atomic.h): the request is checked (its form, operation and
 * datatype, then the key, range and access against the registrations), its operands read
 * from the initiator first when they did not travel with it, then the operation applied under
 * one lock of the process with the old values going straight into the answer. A failed check
 * touches nothing and answers with an ACK that has FAILED and the error.
 */
#include "config.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "layer/atomic/atomic.h"
#include "layer/proto/rx.h"
#include "layer/proto/tx.h"
#include "layer/rma/grant.h"
#include "layer/rma/rma.h"

/* Every ofi_layer atomic of the process, whichever endpoint, domain or thread applies it. */
static pthread_mutex_t layer_atomic_lock = PTHREAD_MUTEX_INITIALIZER;

/* A request whose operands the target reads first: what it needs once they are in. */
struct layer_atomic_job {
	struct layer_atomic_desc desc;
	struct layer_hdr hdr;          /* the request's: size, CQ data, msg_id */
	fi_addr_t src;
	uint8_t operands[];
};

/* The access a form needs at the target, as libfabric's own targets ask for it. */
static uint64_t layer_atomic_access(const struct layer_atomic_desc *desc)
{
	if (desc->kind == UTIL_ATOMIC_WRITE)
		return FI_REMOTE_WRITE;
	return desc->op == FI_ATOMIC_READ ? FI_REMOTE_READ : FI_REMOTE_READ | FI_REMOTE_WRITE;
}

/* How the counters see it, as rxm counts: the write form writes, the others read. */
static uint64_t layer_atomic_counted(const struct layer_atomic_desc *desc)
{
	return desc->kind == UTIL_ATOMIC_WRITE ? FI_REMOTE_WRITE : FI_REMOTE_READ;
}

/* Whether desc and size make an operation: 0, -FI_EOPNOTSUPP or -FI_EINVAL. */
static int layer_atomic_check(const struct layer_atomic_desc *desc, uint64_t size)
{
	size_t dt_size;

	if (desc->kind > UTIL_ATOMIC_COMPARE ||
	    !util_atomic_is_valid(desc->kind, desc->op, desc->datatype))
		return -FI_EOPNOTSUPP;
	dt_size = util_atomic_dt_size(desc->datatype);
	if (!size || size % dt_size || size > LAYER_ATOMIC_MAX_SIZE)
		return -FI_EINVAL;
	return 0;
}

/*
 * Applies desc to the target memory iov (size bytes in cnt pieces), under the lock: the
 * operands, then the compare values, in operands; the old values to old when not NULL.
 * 0 or -FI_ENOMEM.
 */
static int layer_atomic_apply(const struct layer_atomic_desc *desc, const struct iovec *iov,
			      size_t cnt, uint64_t size, const uint8_t *operands, uint8_t *old)
{
	const size_t dt_size = util_atomic_dt_size(desc->datatype);
	const uint8_t *src = desc->op == FI_ATOMIC_READ ? NULL : operands;
	const uint8_t *cmp = desc->kind == UTIL_ATOMIC_COMPARE ? operands + size : NULL;
	uint8_t *tmp = NULL;
	size_t i, off;

	for (i = 0; i < cnt; i++)
		if (iov[i].iov_len % dt_size)
			break;
	if (i < cnt) {
		/* an element across two pieces of the region: applied to a copy */
		tmp = malloc(size);
		if (!tmp)
			return -FI_ENOMEM;
	}
	pthread_mutex_lock(&layer_atomic_lock);
	if (tmp) {
		util_iov_gather(tmp, iov, cnt);
		(void) util_atomic_apply(desc->op, desc->datatype, tmp, src, cmp, old,
					 size / dt_size);
		util_iov_scatter(iov, cnt, tmp);
	} else {
		for (i = 0, off = 0; i < cnt; off += iov[i].iov_len, i++)
			(void) util_atomic_apply(desc->op, desc->datatype, iov[i].iov_base,
						 src ? src + off : NULL, cmp ? cmp + off : NULL,
						 old ? old + off : NULL, iov[i].iov_len / dt_size);
	}
	pthread_mutex_unlock(&layer_atomic_lock);
	free(tmp);
	return 0;
}

/* The ACK of the write form (err 0 or positive), unless its initiator asked for none. */
static void layer_atomic_ack(struct layer_proto *proto, struct layer_conn *conn,
			     const struct layer_hdr *hdr, int err)
{
	if (!(hdr->flags & LAYER_HDR_UNANSWERED))
		layer_tx_ack_send_kept(proto, conn, hdr->msg_id, err,
				       !(hdr->flags & LAYER_HDR_CQ_DATA));
}

/* A refused request: logged as RMA's are, answered with the error. */
static void layer_atomic_refuse(struct layer_proto *proto, struct layer_conn *conn,
				const struct layer_atomic_desc *desc, const struct layer_hdr *hdr,
				int err)
{
	const struct layer_rts_seg target = { .addr = desc->addr, .key = desc->key,
					      .len = hdr->size };

	layer_rma_refused(hdr, &target, err);
	layer_atomic_ack(proto, conn, hdr, err);
}

/* The checked request with its operands: applied, counted, answered. */
static void layer_atomic_do(struct layer_proto *proto, struct layer_conn *conn,
			    const struct layer_atomic_desc *desc, const struct layer_hdr *hdr,
			    fi_addr_t src, const uint8_t *operands)
{
	const uint64_t counted = layer_atomic_counted(desc);
	struct layer_cntr *cntr = counted == FI_REMOTE_WRITE ? proto->rem_write_cntr :
							      proto->rem_read_cntr;
	struct iovec iov[LAYER_IOV_LIMIT];
	size_t cnt = LAYER_IOV_LIMIT;
	struct util_mr_map_entry *entry;
	struct layer_tx *tx = NULL;
	void *old = NULL;
	int ret;

	ret = layer_mr_target_get(proto->domain, desc->key, desc->addr, hdr->size,
				  layer_atomic_access(desc), iov, &cnt, &entry);
	if (ret) {
		layer_atomic_refuse(proto, conn, desc, hdr, -ret);
		return;
	}
	layer_grant_offer(proto, conn, entry);
	if (desc->kind != UTIL_ATOMIC_WRITE) {
		/* the old values go straight into the answer */
		tx = layer_rma_resp_new(proto, conn, hdr->msg_id, hdr->size, &old);
		ret = tx ? 0 : -FI_ENOMEM;
		/* its remote CQ data tells the application: then it goes at once */
		if (tx && (hdr->flags & LAYER_HDR_CQ_DATA))
			tx->may_keep = false;
	}
	if (!ret)
		ret = layer_atomic_apply(desc, iov, cnt, hdr->size, operands, old);
	layer_mr_target_put(proto->domain, entry, ret ? 0 : counted);
	if (ret && tx) {
		layer_tx_discard(proto, tx);
		layer_tx_ack_send(proto, conn, hdr->msg_id, -ret);
		return;
	}
	if (ret) {
		layer_atomic_refuse(proto, conn, desc, hdr, -ret);
		return;
	}
	if ((hdr->flags & LAYER_HDR_CQ_DATA) && proto->rx_cq)
		(void) util_cq_write(&proto->rx_cq->util, NULL,
				     FI_ATOMIC | counted | FI_REMOTE_CQ_DATA, hdr->size, NULL,
				     hdr->data, 0, src);
	if (cntr)
		util_cntr_inc(&cntr->util);
	if (tx)
		layer_tx_ctrl_send(proto, conn, tx);
	else
		layer_atomic_ack(proto, conn, hdr, 0);
}

/* The operands are read (or failed to be): the operation goes on, unless nobody waits. */
static void layer_atomic_pulled(struct layer_proto *proto, struct layer_rx *rx)
{
	struct layer_atomic_job *job = rx->job;

	if (rx->conn->state != LAYER_CONN_CLOSED) {
		if (rx->read_err)
			layer_tx_ack_send(proto, rx->conn, job->hdr.msg_id, FI_EIO);
		else
			layer_atomic_do(proto, rx->conn, &job->desc, &job->hdr, job->src,
					job->operands);
	}
	layer_rx_free(proto, rx);
	free(job);
}

/* Operands larger than one message: read from the initiator's segments first. */
static void layer_atomic_pull(struct layer_proto *proto, struct layer_buf *buf,
			      const struct layer_atomic_desc *desc, uint64_t operand_len)
{
	const struct layer_hdr *hdr = layer_buf_hdr(buf);
	const struct layer_rts_seg *segs = (const struct layer_rts_seg *) (desc + 1);
	struct layer_conn *conn = buf->ctx.chan->conn;
	struct layer_atomic_job *job;
	struct layer_hdr pull = *hdr;
	struct layer_rx *rx;

	job = malloc(sizeof(*job) + operand_len);
	rx = job ? layer_rx_get(proto) : NULL;
	if (!rx) {
		free(job);
		layer_tx_ack_send(proto, conn, hdr->msg_id, FI_ENOMEM);
		return;
	}
	job->desc = *desc;
	job->hdr = *hdr;
	job->src = buf->src_addr;
	rx->iov[0].iov_base = job->operands;
	rx->iov[0].iov_len = operand_len;
	rx->iov_cnt = 1;
	pull.size = operand_len;
	layer_rma_pull(proto, rx, conn, &pull, segs, hdr->seg_cnt, layer_atomic_pulled, job);
}

void layer_atomic_target(struct layer_proto *proto, struct layer_buf *buf)
{
	const struct layer_hdr *hdr = layer_buf_hdr(buf);
	const struct layer_atomic_desc *desc = (const void *) layer_buf_payload(buf);
	struct layer_conn *conn = buf->ctx.chan->conn;
	size_t rest = buf->len - sizeof(*hdr) - sizeof(*desc);
	struct layer_hdr sum;
	uint64_t operand_len;
	int ret;

	FI_DBG(&layer_prov, FI_LOG_EP_DATA, "atomic in: op %u datatype %u, %" PRIu64 " bytes at %#"
	       PRIx64 " key %#" PRIx64 "\n", desc->op, desc->datatype, hdr->size, desc->addr,
	       desc->key);
	ret = layer_atomic_check(desc, hdr->size);
	if (ret) {
		layer_atomic_refuse(proto, conn, desc, hdr, -ret);
		return;
	}
	operand_len = layer_atomic_operand_len(desc, hdr->size);
	if (!hdr->seg_cnt) {
		if (rest != operand_len)
			layer_atomic_refuse(proto, conn, desc, hdr, FI_EINVAL);
		else
			layer_atomic_do(proto, conn, desc, hdr, buf->src_addr,
					(const uint8_t *) (desc + 1));
		return;
	}
	/* the segments must hold the operands exactly */
	sum = *hdr;
	sum.size = operand_len;
	if (!operand_len || rest != hdr->seg_cnt * sizeof(struct layer_rts_seg) ||
	    !layer_segs_add_up(&sum, (const struct layer_rts_seg *) (desc + 1), 0)) {
		layer_atomic_refuse(proto, conn, desc, hdr, FI_EINVAL);
		return;
	}
	layer_atomic_pull(proto, buf, desc, operand_len);
}
