/*
 * FI_ATOMIC entry points (fi_atomic(3)): argument checks and the completion rules (op_flags,
 * FI_SELECTIVE_COMPLETION, inject), then the atomic paths (atomic/atomic.h) under the
 * variant's lock. Every entry exists twice, locked and unlocked, as in rma.c; the validity
 * calls take no lock.
 */
#include "config.h"

#include "layer/atomic/atomic.h"
#include "layer/ep/ep.h"

#define LAYER_ATOMICMSG_FLAGS (FI_REMOTE_CQ_DATA | FI_COMPLETION | FI_INJECT | FI_MORE | \
			       FI_INJECT_COMPLETE | FI_TRANSMIT_COMPLETE | \
			       FI_DELIVERY_COMPLETE | FI_FENCE)

static inline struct layer_ep *layer_ep_of(struct fid_ep *ep_fid)
{
	return container_of(ep_fid, struct layer_ep, ep_fid);
}

/* The flags of a call without flags: the endpoint's op_flags, completion as bound. */
static inline uint64_t layer_atomic_flags(struct layer_ep *ep)
{
	uint64_t flags = ep->tx_op_flags & ~FI_REMOTE_CQ_DATA;

	return flags | layer_proto_tx_comp(&ep->proto, flags);
}

/* The elements of a vector (the target range's count of the vector calls); checked later. */
static inline size_t layer_ioc_count(const struct fi_ioc *ioc, size_t cnt)
{
	size_t i, total = 0;

	if (!ioc || cnt > LAYER_IOV_LIMIT)
		return 0;
	for (i = 0; i < cnt; i++)
		total += ioc[i].count;
	return total;
}

/*
 * ioc (cnt entries of dt_size-byte elements) as iovecs: the elements' count, -FI_EINVAL for a
 * vector that is not one (has_buf: its buffers must be there), or -FI_EMSGSIZE when it holds
 * more than one operation takes.
 */
static ssize_t layer_ioc_iov(const struct fi_ioc *ioc, size_t cnt, size_t dt_size, bool has_buf,
			     struct iovec *iov)
{
	const size_t max = LAYER_ATOMIC_MAX_SIZE / dt_size;
	size_t i, total = 0;

	if (cnt > LAYER_IOV_LIMIT || (cnt && !ioc))
		return -FI_EINVAL;
	for (i = 0; i < cnt; i++) {
		if (ioc[i].count > max)
			return -FI_EMSGSIZE;
		if (has_buf && !ioc[i].addr && ioc[i].count)
			return -FI_EINVAL;
		iov[i].iov_base = ioc[i].addr;
		iov[i].iov_len = ioc[i].count * dt_size;
		total += ioc[i].count;
	}
	return total > max ? -FI_EMSGSIZE : (ssize_t) total;
}

/*
 * The arguments of one atomic, checked into req: the operation valid for its form
 * (-FI_EOPNOTSUPP), the vectors, one target range, every count the same and not zero
 * (-FI_EINVAL), at most fi_atomicvalid's count (-FI_EMSGSIZE). FI_ATOMIC_READ ignores the
 * operand buffers (fi_atomic(3)).
 */
static ssize_t layer_atomic_args(struct layer_atomic_req *req, const struct fi_msg_atomic *msg,
				 const struct fi_ioc *compare, size_t compare_cnt,
				 const struct fi_ioc *result, size_t result_cnt,
				 struct iovec iov[3][LAYER_IOV_LIMIT])
{
	bool has_operands = msg->op != FI_ATOMIC_READ;
	size_t dt_size;
	ssize_t count, n;

	if (!util_atomic_is_valid(req->kind, msg->op, msg->datatype))
		return -FI_EOPNOTSUPP;
	dt_size = util_atomic_dt_size(msg->datatype);
	count = layer_ioc_iov(msg->msg_iov, msg->iov_count, dt_size, has_operands, iov[0]);
	if (count < 0)
		return count;
	if (!count || msg->rma_iov_count != 1 || !msg->rma_iov ||
	    msg->rma_iov[0].count != (size_t) count)
		return -FI_EINVAL;
	if (req->kind == UTIL_ATOMIC_COMPARE) {
		n = layer_ioc_iov(compare, compare_cnt, dt_size, true, iov[1]);
		if (n != count)
			return n < 0 ? n : -FI_EINVAL;
		req->compare = iov[1];
		req->compare_cnt = compare_cnt;
	}
	if (req->kind != UTIL_ATOMIC_WRITE) {
		n = layer_ioc_iov(result, result_cnt, dt_size, true, iov[2]);
		if (n != count)
			return n < 0 ? n : -FI_EINVAL;
		req->result = iov[2];
		req->result_cnt = result_cnt;
	}
	req->operand = iov[0];
	req->operand_cnt = has_operands ? msg->iov_count : 0;
	req->op = msg->op;
	req->datatype = msg->datatype;
	req->len = (size_t) count * dt_size;
	req->peer = msg->addr;
	req->addr = msg->rma_iov[0].addr;
	req->key = msg->rma_iov[0].key;
	req->data = msg->data;
	req->context = msg->context;
	return 0;
}

/* One atomic of any form, flags final. */
static inline __attribute__((always_inline)) ssize_t
layer_ep_atomic(struct layer_ep *ep, enum util_atomic_kind kind, const struct fi_msg_atomic *msg,
		const struct fi_ioc *compare, size_t compare_cnt, const struct fi_ioc *result,
		size_t result_cnt, uint64_t flags, const bool is_locked)
{
	struct iovec iov[3][LAYER_IOV_LIMIT];
	struct layer_atomic_req req = { .kind = kind, .flags = flags };
	ssize_t ret;

	ret = layer_atomic_args(&req, msg, compare, compare_cnt, result, result_cnt, iov);
	if (unlikely(ret))
		return ret;
	if (unlikely((flags & FI_INJECT) && req.len > LAYER_INJECT_SIZE))
		return -FI_EMSGSIZE;
	ret = -FI_EOPBADSTATE;
	if (layer_ep_enter(ep, is_locked))
		ret = layer_atomic_start(&ep->proto, &req);
	return layer_ep_leave(ep, ret, is_locked);
}

/* The msg calls: their flags checked and made final. */
static inline __attribute__((always_inline)) ssize_t
layer_ep_atomicmsg(struct fid_ep *ep_fid, enum util_atomic_kind kind,
		   const struct fi_msg_atomic *msg, const struct fi_ioc *compare,
		   size_t compare_cnt, const struct fi_ioc *result, size_t result_cnt,
		   uint64_t flags, const bool is_locked)
{
	struct layer_ep *ep = layer_ep_of(ep_fid);

	if (unlikely(!msg))
		return -FI_EINVAL;
	if (unlikely(flags & ~LAYER_ATOMICMSG_FLAGS))
		return -FI_EBADFLAGS;
	return layer_ep_atomic(ep, kind, msg, compare, compare_cnt, result, result_cnt,
			       (flags & ~FI_COMPLETION) | layer_proto_tx_comp(&ep->proto, flags),
			       is_locked);
}

/* A call's vector and its one target range as a message. */
static inline struct fi_msg_atomic layer_atomic_msg(const struct fi_ioc *iov, size_t count,
						    fi_addr_t dest, const struct fi_rma_ioc *rma,
						    enum fi_datatype datatype, enum fi_op op,
						    void *context)
{
	return (struct fi_msg_atomic) { .msg_iov = iov, .iov_count = count, .addr = dest,
					.rma_iov = rma, .rma_iov_count = 1,
					.datatype = datatype, .op = op, .context = context };
}

/* ---- validity ---- */

static int layer_atomic_writevalid(struct fid_ep *ep_fid, enum fi_datatype datatype,
				   enum fi_op op, size_t *count)
{
	if (!ep_fid || !count)
		return -FI_EINVAL;
	return layer_atomic_valid(UTIL_ATOMIC_WRITE, datatype, op, count);
}

static int layer_atomic_readwritevalid(struct fid_ep *ep_fid, enum fi_datatype datatype,
				       enum fi_op op, size_t *count)
{
	if (!ep_fid || !count)
		return -FI_EINVAL;
	return layer_atomic_valid(UTIL_ATOMIC_FETCH, datatype, op, count);
}

static int layer_atomic_compwritevalid(struct fid_ep *ep_fid, enum fi_datatype datatype,
				       enum fi_op op, size_t *count)
{
	if (!ep_fid || !count)
		return -FI_EINVAL;
	return layer_atomic_valid(UTIL_ATOMIC_COMPARE, datatype, op, count);
}

/* ---- locked ---- */

static ssize_t layer_atomic_write(struct fid_ep *ep_fid, const void *buf, size_t count,
		void *desc, fi_addr_t dest, uint64_t addr, uint64_t key,
		enum fi_datatype datatype, enum fi_op op, void *context)
{
	struct layer_ep *ep = layer_ep_of(ep_fid);
	const struct fi_ioc ioc = { .addr = (void *) buf, .count = count };
	const struct fi_rma_ioc rma = { .addr = addr, .count = count, .key = key };
	const struct fi_msg_atomic msg = layer_atomic_msg(&ioc, 1, dest, &rma, datatype, op,
							  context);

	return layer_ep_atomic(ep, UTIL_ATOMIC_WRITE, &msg, NULL, 0, NULL, 0,
			       layer_atomic_flags(ep), true);
}

static ssize_t layer_atomic_writev(struct fid_ep *ep_fid, const struct fi_ioc *iov,
		void **desc, size_t count, fi_addr_t dest, uint64_t addr, uint64_t key,
		enum fi_datatype datatype, enum fi_op op, void *context)
{
	struct layer_ep *ep = layer_ep_of(ep_fid);
	const struct fi_rma_ioc rma = { .addr = addr, .count = layer_ioc_count(iov, count),
					.key = key };
	const struct fi_msg_atomic msg = layer_atomic_msg(iov, count, dest, &rma, datatype, op,
							  context);

	return layer_ep_atomic(ep, UTIL_ATOMIC_WRITE, &msg, NULL, 0, NULL, 0,
			       layer_atomic_flags(ep), true);
}

static ssize_t layer_atomic_writemsg(struct fid_ep *ep_fid,
		const struct fi_msg_atomic *msg, uint64_t flags)
{
	return layer_ep_atomicmsg(ep_fid, UTIL_ATOMIC_WRITE, msg, NULL, 0, NULL, 0, flags,
				  true);
}

/* fi_inject_atomic never generates a completion; counters still count it. */
static ssize_t layer_atomic_inject(struct fid_ep *ep_fid, const void *buf, size_t count,
		fi_addr_t dest, uint64_t addr, uint64_t key, enum fi_datatype datatype,
		enum fi_op op)
{
	const struct fi_ioc ioc = { .addr = (void *) buf, .count = count };
	const struct fi_rma_ioc rma = { .addr = addr, .count = count, .key = key };
	const struct fi_msg_atomic msg = layer_atomic_msg(&ioc, 1, dest, &rma, datatype, op,
							  NULL);

	return layer_ep_atomic(layer_ep_of(ep_fid), UTIL_ATOMIC_WRITE, &msg, NULL, 0, NULL, 0,
			       FI_INJECT, true);
}

static ssize_t layer_atomic_readwrite(struct fid_ep *ep_fid, const void *buf,
		size_t count, void *desc, void *result, void *result_desc, fi_addr_t dest,
		uint64_t addr, uint64_t key, enum fi_datatype datatype, enum fi_op op,
		void *context)
{
	struct layer_ep *ep = layer_ep_of(ep_fid);
	const struct fi_ioc ioc = { .addr = (void *) buf, .count = count };
	const struct fi_ioc res = { .addr = result, .count = count };
	const struct fi_rma_ioc rma = { .addr = addr, .count = count, .key = key };
	const struct fi_msg_atomic msg = layer_atomic_msg(&ioc, 1, dest, &rma, datatype, op,
							  context);

	return layer_ep_atomic(ep, UTIL_ATOMIC_FETCH, &msg, NULL, 0, &res, 1,
			       layer_atomic_flags(ep), true);
}

static ssize_t layer_atomic_readwritev(struct fid_ep *ep_fid, const struct fi_ioc *iov,
		void **desc, size_t count, struct fi_ioc *resultv, void **result_desc,
		size_t result_count, fi_addr_t dest, uint64_t addr, uint64_t key,
		enum fi_datatype datatype, enum fi_op op, void *context)
{
	struct layer_ep *ep = layer_ep_of(ep_fid);
	const struct fi_rma_ioc rma = { .addr = addr, .count = layer_ioc_count(iov, count),
					.key = key };
	const struct fi_msg_atomic msg = layer_atomic_msg(iov, count, dest, &rma, datatype, op,
							  context);

	return layer_ep_atomic(ep, UTIL_ATOMIC_FETCH, &msg, NULL, 0, resultv, result_count,
			       layer_atomic_flags(ep), true);
}

static ssize_t layer_atomic_readwritemsg(struct fid_ep *ep_fid,
		const struct fi_msg_atomic *msg, struct fi_ioc *resultv, void **result_desc,
		size_t result_count, uint64_t flags)
{
	return layer_ep_atomicmsg(ep_fid, UTIL_ATOMIC_FETCH, msg, NULL, 0, resultv,
				  result_count, flags, true);
}

static ssize_t layer_atomic_compwrite(struct fid_ep *ep_fid, const void *buf,
		size_t count, void *desc, const void *compare, void *compare_desc, void *result,
		void *result_desc, fi_addr_t dest, uint64_t addr, uint64_t key,
		enum fi_datatype datatype, enum fi_op op, void *context)
{
	struct layer_ep *ep = layer_ep_of(ep_fid);
	const struct fi_ioc ioc = { .addr = (void *) buf, .count = count };
	const struct fi_ioc cmp = { .addr = (void *) compare, .count = count };
	const struct fi_ioc res = { .addr = result, .count = count };
	const struct fi_rma_ioc rma = { .addr = addr, .count = count, .key = key };
	const struct fi_msg_atomic msg = layer_atomic_msg(&ioc, 1, dest, &rma, datatype, op,
							  context);

	return layer_ep_atomic(ep, UTIL_ATOMIC_COMPARE, &msg, &cmp, 1, &res, 1,
			       layer_atomic_flags(ep), true);
}

static ssize_t layer_atomic_compwritev(struct fid_ep *ep_fid, const struct fi_ioc *iov,
		void **desc, size_t count, const struct fi_ioc *comparev, void **compare_desc,
		size_t compare_count, struct fi_ioc *resultv, void **result_desc,
		size_t result_count, fi_addr_t dest, uint64_t addr, uint64_t key,
		enum fi_datatype datatype, enum fi_op op, void *context)
{
	struct layer_ep *ep = layer_ep_of(ep_fid);
	const struct fi_rma_ioc rma = { .addr = addr, .count = layer_ioc_count(iov, count),
					.key = key };
	const struct fi_msg_atomic msg = layer_atomic_msg(iov, count, dest, &rma, datatype, op,
							  context);

	return layer_ep_atomic(ep, UTIL_ATOMIC_COMPARE, &msg, comparev, compare_count, resultv,
			       result_count, layer_atomic_flags(ep), true);
}

static ssize_t layer_atomic_compwritemsg(struct fid_ep *ep_fid,
		const struct fi_msg_atomic *msg, const struct fi_ioc *comparev,
		void **compare_desc, size_t compare_count, struct fi_ioc *resultv,
		void **result_desc, size_t result_count, uint64_t flags)
{
	return layer_ep_atomicmsg(ep_fid, UTIL_ATOMIC_COMPARE, msg, comparev, compare_count,
				  resultv, result_count, flags, true);
}

struct fi_ops_atomic layer_atomic_locked_ops = {
	.size = sizeof(struct fi_ops_atomic),
	.write = layer_atomic_write,
	.writev = layer_atomic_writev,
	.writemsg = layer_atomic_writemsg,
	.inject = layer_atomic_inject,
	.readwrite = layer_atomic_readwrite,
	.readwritev = layer_atomic_readwritev,
	.readwritemsg = layer_atomic_readwritemsg,
	.compwrite = layer_atomic_compwrite,
	.compwritev = layer_atomic_compwritev,
	.compwritemsg = layer_atomic_compwritemsg,
	.writevalid = layer_atomic_writevalid,
	.readwritevalid = layer_atomic_readwritevalid,
	.compwritevalid = layer_atomic_compwritevalid,
};

/* ---- unlocked: the same without the lock ---- */

static ssize_t layer_atomic_write_unlocked(struct fid_ep *ep_fid, const void *buf, size_t count,
		void *desc, fi_addr_t dest, uint64_t addr, uint64_t key,
		enum fi_datatype datatype, enum fi_op op, void *context)
{
	struct layer_ep *ep = layer_ep_of(ep_fid);
	const struct fi_ioc ioc = { .addr = (void *) buf, .count = count };
	const struct fi_rma_ioc rma = { .addr = addr, .count = count, .key = key };
	const struct fi_msg_atomic msg = layer_atomic_msg(&ioc, 1, dest, &rma, datatype, op,
							  context);

	return layer_ep_atomic(ep, UTIL_ATOMIC_WRITE, &msg, NULL, 0, NULL, 0,
			       layer_atomic_flags(ep), false);
}

static ssize_t layer_atomic_writev_unlocked(struct fid_ep *ep_fid, const struct fi_ioc *iov,
		void **desc, size_t count, fi_addr_t dest, uint64_t addr, uint64_t key,
		enum fi_datatype datatype, enum fi_op op, void *context)
{
	struct layer_ep *ep = layer_ep_of(ep_fid);
	const struct fi_rma_ioc rma = { .addr = addr, .count = layer_ioc_count(iov, count),
					.key = key };
	const struct fi_msg_atomic msg = layer_atomic_msg(iov, count, dest, &rma, datatype, op,
							  context);

	return layer_ep_atomic(ep, UTIL_ATOMIC_WRITE, &msg, NULL, 0, NULL, 0,
			       layer_atomic_flags(ep), false);
}

static ssize_t layer_atomic_writemsg_unlocked(struct fid_ep *ep_fid,
		const struct fi_msg_atomic *msg, uint64_t flags)
{
	return layer_ep_atomicmsg(ep_fid, UTIL_ATOMIC_WRITE, msg, NULL, 0, NULL, 0, flags,
				  false);
}

/* fi_inject_atomic never generates a completion; counters still count it. */
static ssize_t layer_atomic_inject_unlocked(struct fid_ep *ep_fid, const void *buf, size_t count,
		fi_addr_t dest, uint64_t addr, uint64_t key, enum fi_datatype datatype,
		enum fi_op op)
{
	const struct fi_ioc ioc = { .addr = (void *) buf, .count = count };
	const struct fi_rma_ioc rma = { .addr = addr, .count = count, .key = key };
	const struct fi_msg_atomic msg = layer_atomic_msg(&ioc, 1, dest, &rma, datatype, op,
							  NULL);

	return layer_ep_atomic(layer_ep_of(ep_fid), UTIL_ATOMIC_WRITE, &msg, NULL, 0, NULL, 0,
			       FI_INJECT, false);
}

static ssize_t layer_atomic_readwrite_unlocked(struct fid_ep *ep_fid, const void *buf,
		size_t count, void *desc, void *result, void *result_desc, fi_addr_t dest,
		uint64_t addr, uint64_t key, enum fi_datatype datatype, enum fi_op op,
		void *context)
{
	struct layer_ep *ep = layer_ep_of(ep_fid);
	const struct fi_ioc ioc = { .addr = (void *) buf, .count = count };
	const struct fi_ioc res = { .addr = result, .count = count };
	const struct fi_rma_ioc rma = { .addr = addr, .count = count, .key = key };
	const struct fi_msg_atomic msg = layer_atomic_msg(&ioc, 1, dest, &rma, datatype, op,
							  context);

	return layer_ep_atomic(ep, UTIL_ATOMIC_FETCH, &msg, NULL, 0, &res, 1,
			       layer_atomic_flags(ep), false);
}

static ssize_t layer_atomic_readwritev_unlocked(struct fid_ep *ep_fid, const struct fi_ioc *iov,
		void **desc, size_t count, struct fi_ioc *resultv, void **result_desc,
		size_t result_count, fi_addr_t dest, uint64_t addr, uint64_t key,
		enum fi_datatype datatype, enum fi_op op, void *context)
{
	struct layer_ep *ep = layer_ep_of(ep_fid);
	const struct fi_rma_ioc rma = { .addr = addr, .count = layer_ioc_count(iov, count),
					.key = key };
	const struct fi_msg_atomic msg = layer_atomic_msg(iov, count, dest, &rma, datatype, op,
							  context);

	return layer_ep_atomic(ep, UTIL_ATOMIC_FETCH, &msg, NULL, 0, resultv, result_count,
			       layer_atomic_flags(ep), false);
}

static ssize_t layer_atomic_readwritemsg_unlocked(struct fid_ep *ep_fid,
		const struct fi_msg_atomic *msg, struct fi_ioc *resultv, void **result_desc,
		size_t result_count, uint64_t flags)
{
	return layer_ep_atomicmsg(ep_fid, UTIL_ATOMIC_FETCH, msg, NULL, 0, resultv,
				  result_count, flags, false);
}

static ssize_t layer_atomic_compwrite_unlocked(struct fid_ep *ep_fid, const void *buf,
		size_t count, void *desc, const void *compare, void *compare_desc, void *result,
		void *result_desc, fi_addr_t dest, uint64_t addr, uint64_t key,
		enum fi_datatype datatype, enum fi_op op, void *context)
{
	struct layer_ep *ep = layer_ep_of(ep_fid);
	const struct fi_ioc ioc = { .addr = (void *) buf, .count = count };
	const struct fi_ioc cmp = { .addr = (void *) compare, .count = count };
	const struct fi_ioc res = { .addr = result, .count = count };
	const struct fi_rma_ioc rma = { .addr = addr, .count = count, .key = key };
	const struct fi_msg_atomic msg = layer_atomic_msg(&ioc, 1, dest, &rma, datatype, op,
							  context);

	return layer_ep_atomic(ep, UTIL_ATOMIC_COMPARE, &msg, &cmp, 1, &res, 1,
			       layer_atomic_flags(ep), false);
}

static ssize_t layer_atomic_compwritev_unlocked(struct fid_ep *ep_fid, const struct fi_ioc *iov,
		void **desc, size_t count, const struct fi_ioc *comparev, void **compare_desc,
		size_t compare_count, struct fi_ioc *resultv, void **result_desc,
		size_t result_count, fi_addr_t dest, uint64_t addr, uint64_t key,
		enum fi_datatype datatype, enum fi_op op, void *context)
{
	struct layer_ep *ep = layer_ep_of(ep_fid);
	const struct fi_rma_ioc rma = { .addr = addr, .count = layer_ioc_count(iov, count),
					.key = key };
	const struct fi_msg_atomic msg = layer_atomic_msg(iov, count, dest, &rma, datatype, op,
							  context);

	return layer_ep_atomic(ep, UTIL_ATOMIC_COMPARE, &msg, comparev, compare_count, resultv,
			       result_count, layer_atomic_flags(ep), false);
}

static ssize_t layer_atomic_compwritemsg_unlocked(struct fid_ep *ep_fid,
		const struct fi_msg_atomic *msg, const struct fi_ioc *comparev,
		void **compare_desc, size_t compare_count, struct fi_ioc *resultv,
		void **result_desc, size_t result_count, uint64_t flags)
{
	return layer_ep_atomicmsg(ep_fid, UTIL_ATOMIC_COMPARE, msg, comparev, compare_count,
				  resultv, result_count, flags, false);
}

struct fi_ops_atomic layer_atomic_unlocked_ops = {
	.size = sizeof(struct fi_ops_atomic),
	.write = layer_atomic_write_unlocked,
	.writev = layer_atomic_writev_unlocked,
	.writemsg = layer_atomic_writemsg_unlocked,
	.inject = layer_atomic_inject_unlocked,
	.readwrite = layer_atomic_readwrite_unlocked,
	.readwritev = layer_atomic_readwritev_unlocked,
	.readwritemsg = layer_atomic_readwritemsg_unlocked,
	.compwrite = layer_atomic_compwrite_unlocked,
	.compwritev = layer_atomic_compwritev_unlocked,
	.compwritemsg = layer_atomic_compwritemsg_unlocked,
	.writevalid = layer_atomic_writevalid,
	.readwritevalid = layer_atomic_readwritevalid,
	.compwritevalid = layer_atomic_compwritevalid,
};
