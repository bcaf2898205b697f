/* Atomics, the initiator's side, and their validity (atomic.h). */
#include "config.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "layer/atomic/atomic.h"
#include "layer/proto/rndv.h"
#include "layer/proto/tx.h"
#include "layer/rma/grant.h"

/* The description travels where a rendezvous names its first segment (tx->segs[0]). */
_Static_assert(sizeof(struct layer_atomic_desc) == sizeof(struct layer_rts_seg),
	       "an atomic's description takes one segment's room");
_Static_assert(sizeof(struct layer_atomic_desc) + 2 * LAYER_ATOMIC_ORDER_SIZE <= LAYER_INJECT_SIZE,
	       "an atomic that keeps its order travels whole to every peer");

int layer_atomic_valid(enum util_atomic_kind kind, enum fi_datatype datatype, enum fi_op op,
		       size_t *count)
{
	if (!util_atomic_is_valid(kind, op, datatype))
		return -FI_EOPNOTSUPP;
	*count = LAYER_ATOMIC_MAX_SIZE / util_atomic_dt_size(datatype);
	return 0;
}

int layer_query_atomic(struct fid_domain *domain, enum fi_datatype datatype, enum fi_op op,
		       struct fi_atomic_attr *attr, uint64_t flags)
{
	enum util_atomic_kind kind;
	size_t count;
	int ret;

	if (!domain || !attr)
		return -FI_EINVAL;
	switch (flags) {
	case 0:
		kind = UTIL_ATOMIC_WRITE;
		break;
	case FI_FETCH_ATOMIC:
		kind = UTIL_ATOMIC_FETCH;
		break;
	case FI_COMPARE_ATOMIC:
		kind = UTIL_ATOMIC_COMPARE;
		break;
	default:
		/* FI_TAGGED (tagged atomics) and FI_COLLECTIVE are not offered */
		return flags & ~(FI_FETCH_ATOMIC | FI_COMPARE_ATOMIC) ? -FI_EOPNOTSUPP :
									-FI_EBADFLAGS;
	}
	ret = layer_atomic_valid(kind, datatype, op, &count);
	if (ret)
		return ret;
	attr->count = count;
	attr->size = util_atomic_dt_size(datatype);
	return 0;
}

/* Operands and compare values in that order, in dst. */
static void layer_atomic_gather(void *dst, const struct layer_atomic_req *req, size_t len)
{
	util_iov_gather(dst, req->operand, req->operand_cnt);
	util_iov_gather((char *) dst + len, req->compare, req->compare_cnt);
}

/*
 * Operands larger than the peer's buffers take: copied together and registered for the
 * target to read; the description where the first segment would be, the segments after it.
 */
static int layer_atomic_rndv(struct layer_proto *proto, struct layer_conn *conn,
			     struct layer_tx *tx, const struct layer_atomic_req *req,
			     size_t operand_len)
{
	struct iovec iov;
	int ret;

	tx->bounce = malloc(operand_len);
	if (!tx->bounce)
		return -FI_ENOMEM;
	layer_atomic_gather(tx->bounce, req, req->len);
	iov.iov_base = tx->bounce;
	iov.iov_len = operand_len;
	ret = layer_rndv_register(proto, conn, tx, &iov, 1, tx->segs + 1);
	if (ret)
		return ret;
	tx->hdr.seg_cnt = (uint16_t) tx->reg_cnt;
	tx->iov[0].iov_len = sizeof(tx->hdr) + (1 + tx->reg_cnt) * sizeof(struct layer_rts_seg);
	return 0;
}

/*
 * The write form to a region the target granted us (rma/grant.h), its operands inline and
 * no delivery asked: we checked its range and access as the target would, so it needs no
 * answer and completes as sent (transmit complete), as the core's RMA write does. Its
 * refusal could only come from a region closed meanwhile (grant.h), logged at the target.
 */
static bool layer_atomic_is_blind(const struct layer_conn *conn,
				  const struct layer_atomic_req *req, size_t body_len)
{
	uint64_t core_addr;

	return req->kind == UTIL_ATOMIC_WRITE && !(req->flags & FI_DELIVERY_COMPLETE) &&
	       body_len <= UTIL_MAX(conn->chan->tx_eager, LAYER_INJECT_SIZE) &&
	       layer_grant_find(conn, req->key, req->addr, req->len, FI_REMOTE_WRITE,
				&core_addr);
}

ssize_t layer_atomic_start(struct layer_proto *proto, const struct layer_atomic_req *req)
{
	const size_t head = sizeof(struct layer_hdr) + sizeof(struct layer_atomic_desc);
	const struct layer_atomic_desc desc = {
		.addr = req->addr,
		.key = req->key,
		.kind = (uint8_t) req->kind,
		.op = (uint8_t) req->op,
		.datatype = (uint8_t) req->datatype,
	};
	size_t operand_len = layer_atomic_operand_len(&desc, req->len);
	struct layer_conn *conn;
	struct layer_tx *tx;
	bool is_blind;
	ssize_t ret = 0;

	ret = layer_conn_get(proto->conns, req->peer, &conn);
	if (unlikely(ret))
		return ret;
	tx = layer_tx_new(proto);
	if (unlikely(!tx))
		return -FI_EAGAIN;
	tx->context = req->context;
	tx->flags = req->flags;
	tx->cq_flags = FI_ATOMIC | (req->kind == UTIL_ATOMIC_WRITE ? FI_WRITE : FI_READ) |
		       (req->flags & FI_COMPLETION);
	tx->len = req->len;
	tx->hdr = (struct layer_hdr) {
		.version = LAYER_PROTO_VERSION,
		.op = LAYER_OP_ATOMIC,
		.key_slot = conn->chan->key_slot,
		.size = req->len,
	};
	if (req->flags & FI_REMOTE_CQ_DATA) {
		tx->hdr.flags |= LAYER_HDR_CQ_DATA;
		tx->hdr.data = req->data;
	}
	/* the fetch and compare forms' old values land where a read's data does (rma.c) */
	if (req->result_cnt)
		memcpy(tx->rma_iov, req->result, req->result_cnt * sizeof(*req->result));
	tx->rma_iov_cnt = req->result_cnt;
	memcpy(tx->inline_data, &desc, sizeof(desc));
	tx->iov[0].iov_base = &tx->hdr;
	tx->iov_cnt = 1;
	is_blind = layer_atomic_is_blind(conn, req, sizeof(desc) + operand_len);
	if (is_blind)
		tx->hdr.flags |= LAYER_HDR_UNANSWERED;
	else
		ret = layer_tx_want_ack(proto, tx);
	if (unlikely(ret))
		goto err;
	/* at most the inject size, as every peer takes, always whole: in order (layer.h) */
	if (sizeof(desc) + operand_len > UTIL_MAX(conn->chan->tx_eager, LAYER_INJECT_SIZE)) {
		/* larger than the peer's buffers take: the target reads them */
		ret = layer_atomic_rndv(proto, conn, tx, req, operand_len);
	} else if (sizeof(desc) + operand_len <= LAYER_INJECT_SIZE) {
		/* small: the description and operands in the entry */
		layer_atomic_gather(tx->inline_data + sizeof(desc), req, req->len);
		tx->iov[0].iov_len = head + operand_len;
	} else {
		tx->bounce = malloc(head + operand_len);
		ret = tx->bounce ? 0 : -FI_ENOMEM;
		if (!ret) {
			memcpy(tx->bounce, &tx->hdr, sizeof(tx->hdr));
			memcpy((char *) tx->bounce + sizeof(tx->hdr), &desc, sizeof(desc));
			layer_atomic_gather((char *) tx->bounce + head, req, req->len);
			tx->iov[0].iov_base = tx->bounce;
			tx->iov[0].iov_len = head + operand_len;
		}
	}
	if (unlikely(ret))
		goto err;
	FI_DBG(&layer_prov, FI_LOG_EP_DATA, "atomic %p: op %d datatype %d, %zu bytes at %#"
	       PRIx64 " key %#" PRIx64 "\n", (void *) tx, (int) req->op, (int) req->datatype,
	       req->len, req->addr, req->key);
	layer_tx_start(proto, conn, tx);
	if (is_blind)
		conn->blind_sent++;
	return 0;

err:
	layer_tx_discard(proto, tx);
	return ret;
}
