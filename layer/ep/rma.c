/*
 * FI_RMA entry points (fi_rma(3)): argument checks and the completion rules (op_flags,
 * FI_SELECTIVE_COMPLETION, inject), then the RMA paths (rma/rma.h) under the variant's lock.
 * Every entry exists twice, locked and unlocked, as in msg.c.
 */
#include "config.h"

#include "layer/ep/ep.h"
#include "layer/rma/rma.h"

#define LAYER_RMAMSG_FLAGS (FI_REMOTE_CQ_DATA | FI_COMPLETION | FI_INJECT | FI_MORE | \
			    FI_INJECT_COMPLETE | FI_TRANSMIT_COMPLETE | FI_DELIVERY_COMPLETE | \
			    FI_FENCE)

static inline struct layer_ep *layer_ep_of(struct fid_ep *ep_fid)
{
	return container_of(ep_fid, struct layer_ep, ep_fid);
}

/* The flags of a call without flags: the endpoint's op_flags, completion as bound. */
static inline uint64_t layer_rma_flags(struct layer_ep *ep, uint64_t extra)
{
	uint64_t flags = (ep->tx_op_flags & ~FI_REMOTE_CQ_DATA) | extra;

	return flags | layer_proto_tx_comp(&ep->proto, flags);
}

/* One RMA operation, its arguments checked (one target range: rma_iov_limit 1). */
static inline __attribute__((always_inline)) ssize_t
layer_ep_rma(struct layer_ep *ep, bool is_read, const struct iovec *iov, size_t count,
	     fi_addr_t peer, const struct fi_rma_iov *rma, size_t rma_count, uint64_t data,
	     uint64_t flags, void *context, const bool is_locked)
{
	ssize_t ret = -FI_EOPBADSTATE;

	if (unlikely(!layer_iov_ok(iov, count) || rma_count != 1 || !rma))
		return -FI_EINVAL;
	if (unlikely((flags & FI_INJECT) &&
		     (is_read || util_iov_len(iov, count) > LAYER_INJECT_SIZE)))
		return is_read ? -FI_EINVAL : -FI_EMSGSIZE;
	if (layer_ep_enter(ep, is_locked)) {
		if (is_read)
			ret = layer_rma_read(&ep->proto, iov, count, peer, rma, flags, context);
		else
			ret = layer_rma_write(&ep->proto, iov, count, peer, rma, data, flags,
					      context);
	}
	return layer_ep_leave(ep, ret, is_locked);
}

static inline __attribute__((always_inline)) ssize_t
layer_ep_rmamsg(struct fid_ep *ep_fid, bool is_read, const struct fi_msg_rma *msg,
		uint64_t flags, const bool is_locked)
{
	struct layer_ep *ep = layer_ep_of(ep_fid);

	if (unlikely(!msg))
		return -FI_EINVAL;
	if (unlikely(flags & ~LAYER_RMAMSG_FLAGS))
		return -FI_EBADFLAGS;
	if (unlikely(is_read && (flags & (FI_REMOTE_CQ_DATA | FI_INJECT))))
		return -FI_EINVAL;
	return layer_ep_rma(ep, is_read, msg->msg_iov, msg->iov_count, msg->addr, msg->rma_iov,
			    msg->rma_iov_count, msg->data,
			    (flags & ~FI_COMPLETION) | layer_proto_tx_comp(&ep->proto, flags),
			    msg->context, is_locked);
}

/* ---- locked ---- */

static ssize_t layer_read(struct fid_ep *ep_fid, void *buf, size_t len, void *desc,
		  fi_addr_t src_addr, uint64_t addr, uint64_t key, void *context)
{
	struct layer_ep *ep = layer_ep_of(ep_fid);
	struct iovec iov = { .iov_base = buf, .iov_len = len };
	struct fi_rma_iov rma = { .addr = addr, .len = len, .key = key };

	return layer_ep_rma(ep, true, &iov, 1, src_addr, &rma, 1, 0, layer_rma_flags(ep, 0),
			    context, true);
}

static ssize_t layer_readv(struct fid_ep *ep_fid, const struct iovec *iov, void **desc,
		   size_t count, fi_addr_t src_addr, uint64_t addr, uint64_t key,
		   void *context)
{
	struct layer_ep *ep = layer_ep_of(ep_fid);
	struct fi_rma_iov rma = { .addr = addr, .key = key };

	if (iov && count <= LAYER_IOV_LIMIT)
		rma.len = util_iov_len(iov, count);
	return layer_ep_rma(ep, true, iov, count, src_addr, &rma, 1, 0, layer_rma_flags(ep, 0),
			    context, true);
}

static ssize_t layer_readmsg(struct fid_ep *ep_fid, const struct fi_msg_rma *msg,
		     uint64_t flags)
{
	return layer_ep_rmamsg(ep_fid, true, msg, flags, true);
}

static ssize_t layer_write(struct fid_ep *ep_fid, const void *buf, size_t len, void *desc,
		   fi_addr_t dest_addr, uint64_t addr, uint64_t key, void *context)
{
	struct layer_ep *ep = layer_ep_of(ep_fid);
	struct iovec iov = { .iov_base = (void *) buf, .iov_len = len };
	struct fi_rma_iov rma = { .addr = addr, .len = len, .key = key };

	return layer_ep_rma(ep, false, &iov, 1, dest_addr, &rma, 1, 0, layer_rma_flags(ep, 0),
			    context, true);
}

static ssize_t layer_writev(struct fid_ep *ep_fid, const struct iovec *iov, void **desc,
		    size_t count, fi_addr_t dest_addr, uint64_t addr, uint64_t key,
		    void *context)
{
	struct layer_ep *ep = layer_ep_of(ep_fid);
	struct fi_rma_iov rma = { .addr = addr, .key = key };

	if (iov && count <= LAYER_IOV_LIMIT)
		rma.len = util_iov_len(iov, count);
	return layer_ep_rma(ep, false, iov, count, dest_addr, &rma, 1, 0,
			    layer_rma_flags(ep, 0), context, true);
}

static ssize_t layer_writemsg(struct fid_ep *ep_fid, const struct fi_msg_rma *msg,
		      uint64_t flags)
{
	return layer_ep_rmamsg(ep_fid, false, msg, flags, true);
}

/* fi_inject_write never generates a completion; counters still count it. */
static ssize_t layer_inject_write(struct fid_ep *ep_fid, const void *buf, size_t len,
			  fi_addr_t dest_addr, uint64_t addr, uint64_t key)
{
	struct iovec iov = { .iov_base = (void *) buf, .iov_len = len };
	struct fi_rma_iov rma = { .addr = addr, .len = len, .key = key };

	return layer_ep_rma(layer_ep_of(ep_fid), false, &iov, 1, dest_addr, &rma, 1, 0,
			    FI_INJECT, NULL, true);
}

static ssize_t layer_writedata(struct fid_ep *ep_fid, const void *buf, size_t len,
		       void *desc, uint64_t data, fi_addr_t dest_addr, uint64_t addr,
		       uint64_t key, void *context)
{
	struct layer_ep *ep = layer_ep_of(ep_fid);
	struct iovec iov = { .iov_base = (void *) buf, .iov_len = len };
	struct fi_rma_iov rma = { .addr = addr, .len = len, .key = key };

	return layer_ep_rma(ep, false, &iov, 1, dest_addr, &rma, 1, data,
			    layer_rma_flags(ep, FI_REMOTE_CQ_DATA), context, true);
}

static ssize_t layer_inject_writedata(struct fid_ep *ep_fid, const void *buf, size_t len,
			      uint64_t data, fi_addr_t dest_addr, uint64_t addr,
			      uint64_t key)
{
	struct iovec iov = { .iov_base = (void *) buf, .iov_len = len };
	struct fi_rma_iov rma = { .addr = addr, .len = len, .key = key };

	return layer_ep_rma(layer_ep_of(ep_fid), false, &iov, 1, dest_addr, &rma, 1, data,
			    FI_INJECT | FI_REMOTE_CQ_DATA, NULL, true);
}

struct fi_ops_rma layer_rma_locked_ops = {
	.size = sizeof(struct fi_ops_rma),
	.read = layer_read,
	.readv = layer_readv,
	.readmsg = layer_readmsg,
	.write = layer_write,
	.writev = layer_writev,
	.writemsg = layer_writemsg,
	.inject = layer_inject_write,
	.writedata = layer_writedata,
	.injectdata = layer_inject_writedata,
};

/* ---- unlocked: the same without the lock ---- */

static ssize_t layer_read_unlocked(struct fid_ep *ep_fid, void *buf, size_t len, void *desc,
		  fi_addr_t src_addr, uint64_t addr, uint64_t key, void *context)
{
	struct layer_ep *ep = layer_ep_of(ep_fid);
	struct iovec iov = { .iov_base = buf, .iov_len = len };
	struct fi_rma_iov rma = { .addr = addr, .len = len, .key = key };

	return layer_ep_rma(ep, true, &iov, 1, src_addr, &rma, 1, 0, layer_rma_flags(ep, 0),
			    context, false);
}

static ssize_t layer_readv_unlocked(struct fid_ep *ep_fid, const struct iovec *iov, void **desc,
		   size_t count, fi_addr_t src_addr, uint64_t addr, uint64_t key,
		   void *context)
{
	struct layer_ep *ep = layer_ep_of(ep_fid);
	struct fi_rma_iov rma = { .addr = addr, .key = key };

	if (iov && count <= LAYER_IOV_LIMIT)
		rma.len = util_iov_len(iov, count);
	return layer_ep_rma(ep, true, iov, count, src_addr, &rma, 1, 0, layer_rma_flags(ep, 0),
			    context, false);
}

static ssize_t layer_readmsg_unlocked(struct fid_ep *ep_fid, const struct fi_msg_rma *msg,
		     uint64_t flags)
{
	return layer_ep_rmamsg(ep_fid, true, msg, flags, false);
}

static ssize_t layer_write_unlocked(struct fid_ep *ep_fid, const void *buf, size_t len, void *desc,
		   fi_addr_t dest_addr, uint64_t addr, uint64_t key, void *context)
{
	struct layer_ep *ep = layer_ep_of(ep_fid);
	struct iovec iov = { .iov_base = (void *) buf, .iov_len = len };
	struct fi_rma_iov rma = { .addr = addr, .len = len, .key = key };

	return layer_ep_rma(ep, false, &iov, 1, dest_addr, &rma, 1, 0, layer_rma_flags(ep, 0),
			    context, false);
}

static ssize_t layer_writev_unlocked(struct fid_ep *ep_fid, const struct iovec *iov, void **desc,
		    size_t count, fi_addr_t dest_addr, uint64_t addr, uint64_t key,
		    void *context)
{
	struct layer_ep *ep = layer_ep_of(ep_fid);
	struct fi_rma_iov rma = { .addr = addr, .key = key };

	if (iov && count <= LAYER_IOV_LIMIT)
		rma.len = util_iov_len(iov, count);
	return layer_ep_rma(ep, false, iov, count, dest_addr, &rma, 1, 0,
			    layer_rma_flags(ep, 0), context, false);
}

static ssize_t layer_writemsg_unlocked(struct fid_ep *ep_fid, const struct fi_msg_rma *msg,
		      uint64_t flags)
{
	return layer_ep_rmamsg(ep_fid, false, msg, flags, false);
}

/* fi_inject_write never generates a completion; counters still count it. */
static ssize_t layer_inject_write_unlocked(struct fid_ep *ep_fid, const void *buf, size_t len,
			  fi_addr_t dest_addr, uint64_t addr, uint64_t key)
{
	struct iovec iov = { .iov_base = (void *) buf, .iov_len = len };
	struct fi_rma_iov rma = { .addr = addr, .len = len, .key = key };

	return layer_ep_rma(layer_ep_of(ep_fid), false, &iov, 1, dest_addr, &rma, 1, 0,
			    FI_INJECT, NULL, false);
}

static ssize_t layer_writedata_unlocked(struct fid_ep *ep_fid, const void *buf, size_t len,
		       void *desc, uint64_t data, fi_addr_t dest_addr, uint64_t addr,
		       uint64_t key, void *context)
{
	struct layer_ep *ep = layer_ep_of(ep_fid);
	struct iovec iov = { .iov_base = (void *) buf, .iov_len = len };
	struct fi_rma_iov rma = { .addr = addr, .len = len, .key = key };

	return layer_ep_rma(ep, false, &iov, 1, dest_addr, &rma, 1, data,
			    layer_rma_flags(ep, FI_REMOTE_CQ_DATA), context, false);
}

static ssize_t layer_inject_writedata_unlocked(struct fid_ep *ep_fid, const void *buf, size_t len,
			      uint64_t data, fi_addr_t dest_addr, uint64_t addr,
			      uint64_t key)
{
	struct iovec iov = { .iov_base = (void *) buf, .iov_len = len };
	struct fi_rma_iov rma = { .addr = addr, .len = len, .key = key };

	return layer_ep_rma(layer_ep_of(ep_fid), false, &iov, 1, dest_addr, &rma, 1, data,
			    FI_INJECT | FI_REMOTE_CQ_DATA, NULL, false);
}

struct fi_ops_rma layer_rma_unlocked_ops = {
	.size = sizeof(struct fi_ops_rma),
	.read = layer_read_unlocked,
	.readv = layer_readv_unlocked,
	.readmsg = layer_readmsg_unlocked,
	.write = layer_write_unlocked,
	.writev = layer_writev_unlocked,
	.writemsg = layer_writemsg_unlocked,
	.inject = layer_inject_write_unlocked,
	.writedata = layer_writedata_unlocked,
	.injectdata = layer_inject_writedata_unlocked,
};
