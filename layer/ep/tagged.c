/*
 * FI_TAGGED entry points: argument checks and the completion rules of fi_tagged(3), then the
 * transmit or receive path under the variant's lock: posted receives, FI_PEEK / FI_CLAIM /
 * FI_DISCARD probes (matched in software by the tagged receive queue, proto/rxq.c). Every
 * entry exists twice, locked and unlocked (ep.h says which an endpoint gets).
 */
#include "config.h"

#include "layer/ep/ep.h"

#define LAYER_TSENDMSG_FLAGS (FI_REMOTE_CQ_DATA | FI_COMPLETION | FI_INJECT | FI_MORE | \
			      FI_INJECT_COMPLETE | FI_TRANSMIT_COMPLETE | FI_DELIVERY_COMPLETE | \
			      FI_MATCH_COMPLETE | FI_FENCE)
#define LAYER_TRECVMSG_FLAGS (FI_COMPLETION | FI_MORE | FI_PEEK | FI_CLAIM | FI_DISCARD | \
			      FI_AUTH_KEY)

static inline struct layer_ep *layer_ep_of(struct fid_ep *ep_fid)
{
	return container_of(ep_fid, struct layer_ep, ep_fid);
}

static inline uint64_t layer_tagged_tx_flags(struct layer_ep *ep, uint64_t extra)
{
	uint64_t flags = (ep->tx_op_flags & ~FI_REMOTE_CQ_DATA) | FI_TAGGED | extra;

	return flags | layer_proto_tx_comp(&ep->proto, flags);
}

static inline uint64_t layer_tagged_rx_flags(struct layer_ep *ep)
{
	return ep->rx_op_flags | layer_proto_rx_comp(&ep->proto, ep->rx_op_flags);
}

static inline __attribute__((always_inline)) ssize_t
layer_tagged_recv(struct layer_ep *ep, const struct iovec *iov, size_t count, fi_addr_t src,
		  uint64_t tag, uint64_t ignore, uint64_t flags, void *context,
		  const bool is_locked)
{
	ssize_t ret = -FI_EOPBADSTATE;

	if (unlikely(!layer_iov_ok(iov, count)))
		return -FI_EINVAL;
	/* FI_DISCARD goes with FI_PEEK or FI_CLAIM; FI_CLAIM needs the caller's context. */
	if (unlikely(((flags & FI_DISCARD) && !(flags & (FI_PEEK | FI_CLAIM))) ||
		     ((flags & FI_CLAIM) && !context)))
		return -FI_EINVAL;

	if (layer_ep_enter(ep, is_locked)) {
		if (unlikely((flags & (FI_CLAIM | FI_PEEK)) == FI_CLAIM))
			/* The claimed message is named by the context; source and tag play no
			 * part. */
			ret = layer_rx_claim(&ep->proto, iov, count, flags, context);
		else if (unlikely(src != FI_ADDR_UNSPEC || (flags & FI_AUTH_KEY)) &&
			 layer_ep_check_src(ep, &src, &flags))
			ret = -FI_EINVAL;
		else if (unlikely(flags & FI_PEEK))
			ret = layer_rx_peek(&ep->proto, iov, count, src, tag, ignore, flags,
					    context);
		else
			ret = layer_rx_tpost(&ep->proto, iov, count, src, tag, ignore, flags,
					     context);
	}
	return layer_ep_leave(ep, ret, is_locked);
}

static inline __attribute__((always_inline)) ssize_t
layer_tagged_recvmsg(struct fid_ep *ep_fid, const struct fi_msg_tagged *msg, uint64_t flags,
		     const bool is_locked)
{
	struct layer_ep *ep = layer_ep_of(ep_fid);

	if (unlikely(!msg))
		return -FI_EINVAL;
	if (unlikely(flags & ~LAYER_TRECVMSG_FLAGS))
		return -FI_EBADFLAGS;
	return layer_tagged_recv(ep, msg->msg_iov, msg->iov_count, msg->addr, msg->tag,
				 msg->ignore,
				 (flags & ~FI_COMPLETION) | layer_proto_rx_comp(&ep->proto, flags),
				 msg->context, is_locked);
}

static inline __attribute__((always_inline)) ssize_t
layer_tagged_sendmsg(struct fid_ep *ep_fid, const struct fi_msg_tagged *msg, uint64_t flags,
		     const bool is_locked)
{
	struct layer_ep *ep = layer_ep_of(ep_fid);

	if (unlikely(!msg))
		return -FI_EINVAL;
	if (unlikely(flags & ~LAYER_TSENDMSG_FLAGS))
		return -FI_EBADFLAGS;
	return layer_ep_send(ep, msg->msg_iov, msg->iov_count, msg->addr, msg->data, msg->tag,
			     (flags & ~FI_COMPLETION) | FI_TAGGED |
			     layer_proto_tx_comp(&ep->proto, flags), msg->context, is_locked);
}

/* ---- locked ---- */

static ssize_t layer_trecv(struct fid_ep *ep_fid, void *buf, size_t len, void *desc,
			   fi_addr_t src_addr, uint64_t tag, uint64_t ignore, void *context)
{
	struct layer_ep *ep = layer_ep_of(ep_fid);
	struct iovec iov = { .iov_base = buf, .iov_len = len };

	return layer_tagged_recv(ep, &iov, 1, src_addr, tag, ignore, layer_tagged_rx_flags(ep),
				 context, true);
}

static ssize_t layer_trecvv(struct fid_ep *ep_fid, const struct iovec *iov, void **desc,
			    size_t count, fi_addr_t src_addr, uint64_t tag, uint64_t ignore,
			    void *context)
{
	struct layer_ep *ep = layer_ep_of(ep_fid);

	return layer_tagged_recv(ep, iov, count, src_addr, tag, ignore,
				 layer_tagged_rx_flags(ep), context, true);
}

static ssize_t layer_trecvmsg(struct fid_ep *ep_fid, const struct fi_msg_tagged *msg,
			      uint64_t flags)
{
	return layer_tagged_recvmsg(ep_fid, msg, flags, true);
}

static ssize_t layer_tsend(struct fid_ep *ep_fid, const void *buf, size_t len, void *desc,
			   fi_addr_t dest_addr, uint64_t tag, void *context)
{
	struct layer_ep *ep = layer_ep_of(ep_fid);
	struct iovec iov = { .iov_base = (void *) buf, .iov_len = len };

	return layer_ep_send(ep, &iov, 1, dest_addr, 0, tag, layer_tagged_tx_flags(ep, 0),
			     context, true);
}

static ssize_t layer_tsendv(struct fid_ep *ep_fid, const struct iovec *iov, void **desc,
			    size_t count, fi_addr_t dest_addr, uint64_t tag, void *context)
{
	struct layer_ep *ep = layer_ep_of(ep_fid);

	return layer_ep_send(ep, iov, count, dest_addr, 0, tag, layer_tagged_tx_flags(ep, 0),
			     context, true);
}

static ssize_t layer_tsendmsg(struct fid_ep *ep_fid, const struct fi_msg_tagged *msg,
			      uint64_t flags)
{
	return layer_tagged_sendmsg(ep_fid, msg, flags, true);
}

static ssize_t layer_tinject(struct fid_ep *ep_fid, const void *buf, size_t len,
			     fi_addr_t dest_addr, uint64_t tag)
{
	struct iovec iov = { .iov_base = (void *) buf, .iov_len = len };

	return layer_ep_send(layer_ep_of(ep_fid), &iov, 1, dest_addr, 0, tag,
			     FI_INJECT | FI_TAGGED, NULL, true);
}

static ssize_t layer_tsenddata(struct fid_ep *ep_fid, const void *buf, size_t len, void *desc,
			       uint64_t data, fi_addr_t dest_addr, uint64_t tag, void *context)
{
	struct layer_ep *ep = layer_ep_of(ep_fid);
	struct iovec iov = { .iov_base = (void *) buf, .iov_len = len };

	return layer_ep_send(ep, &iov, 1, dest_addr, data, tag,
			     layer_tagged_tx_flags(ep, FI_REMOTE_CQ_DATA), context, true);
}

static ssize_t layer_tinjectdata(struct fid_ep *ep_fid, const void *buf, size_t len,
				 uint64_t data, fi_addr_t dest_addr, uint64_t tag)
{
	struct iovec iov = { .iov_base = (void *) buf, .iov_len = len };

	return layer_ep_send(layer_ep_of(ep_fid), &iov, 1, dest_addr, data, tag,
			     FI_INJECT | FI_REMOTE_CQ_DATA | FI_TAGGED, NULL, true);
}

const struct fi_ops_tagged layer_tagged_locked_ops = {
	.size = sizeof(struct fi_ops_tagged),
	.recv = layer_trecv,
	.recvv = layer_trecvv,
	.recvmsg = layer_trecvmsg,
	.send = layer_tsend,
	.sendv = layer_tsendv,
	.sendmsg = layer_tsendmsg,
	.inject = layer_tinject,
	.senddata = layer_tsenddata,
	.injectdata = layer_tinjectdata,
};

/* ---- unlocked: the same without the lock ---- */

static ssize_t layer_trecv_unlocked(struct fid_ep *ep_fid, void *buf, size_t len, void *desc,
				    fi_addr_t src_addr, uint64_t tag, uint64_t ignore,
				    void *context)
{
	struct layer_ep *ep = layer_ep_of(ep_fid);
	struct iovec iov = { .iov_base = buf, .iov_len = len };

	return layer_tagged_recv(ep, &iov, 1, src_addr, tag, ignore, layer_tagged_rx_flags(ep),
				 context, false);
}

static ssize_t layer_trecvv_unlocked(struct fid_ep *ep_fid, const struct iovec *iov,
				     void **desc, size_t count, fi_addr_t src_addr, uint64_t tag,
				     uint64_t ignore, void *context)
{
	struct layer_ep *ep = layer_ep_of(ep_fid);

	return layer_tagged_recv(ep, iov, count, src_addr, tag, ignore,
				 layer_tagged_rx_flags(ep), context, false);
}

static ssize_t layer_trecvmsg_unlocked(struct fid_ep *ep_fid, const struct fi_msg_tagged *msg,
				       uint64_t flags)
{
	return layer_tagged_recvmsg(ep_fid, msg, flags, false);
}

static ssize_t layer_tsend_unlocked(struct fid_ep *ep_fid, const void *buf, size_t len,
				    void *desc, fi_addr_t dest_addr, uint64_t tag, void *context)
{
	struct layer_ep *ep = layer_ep_of(ep_fid);
	struct iovec iov = { .iov_base = (void *) buf, .iov_len = len };

	return layer_ep_send(ep, &iov, 1, dest_addr, 0, tag, layer_tagged_tx_flags(ep, 0),
			     context, false);
}

static ssize_t layer_tsendv_unlocked(struct fid_ep *ep_fid, const struct iovec *iov,
				     void **desc, size_t count, fi_addr_t dest_addr, uint64_t tag,
				     void *context)
{
	struct layer_ep *ep = layer_ep_of(ep_fid);

	return layer_ep_send(ep, iov, count, dest_addr, 0, tag, layer_tagged_tx_flags(ep, 0),
			     context, false);
}

static ssize_t layer_tsendmsg_unlocked(struct fid_ep *ep_fid, const struct fi_msg_tagged *msg,
				       uint64_t flags)
{
	return layer_tagged_sendmsg(ep_fid, msg, flags, false);
}

static ssize_t layer_tinject_unlocked(struct fid_ep *ep_fid, const void *buf, size_t len,
				      fi_addr_t dest_addr, uint64_t tag)
{
	struct iovec iov = { .iov_base = (void *) buf, .iov_len = len };

	return layer_ep_send(layer_ep_of(ep_fid), &iov, 1, dest_addr, 0, tag,
			     FI_INJECT | FI_TAGGED, NULL, false);
}

static ssize_t layer_tsenddata_unlocked(struct fid_ep *ep_fid, const void *buf, size_t len,
					void *desc, uint64_t data, fi_addr_t dest_addr,
					uint64_t tag, void *context)
{
	struct layer_ep *ep = layer_ep_of(ep_fid);
	struct iovec iov = { .iov_base = (void *) buf, .iov_len = len };

	return layer_ep_send(ep, &iov, 1, dest_addr, data, tag,
			     layer_tagged_tx_flags(ep, FI_REMOTE_CQ_DATA), context, false);
}

static ssize_t layer_tinjectdata_unlocked(struct fid_ep *ep_fid, const void *buf, size_t len,
					  uint64_t data, fi_addr_t dest_addr, uint64_t tag)
{
	struct iovec iov = { .iov_base = (void *) buf, .iov_len = len };

	return layer_ep_send(layer_ep_of(ep_fid), &iov, 1, dest_addr, data, tag,
			     FI_INJECT | FI_REMOTE_CQ_DATA | FI_TAGGED, NULL, false);
}

const struct fi_ops_tagged layer_tagged_unlocked_ops = {
	.size = sizeof(struct fi_ops_tagged),
	.recv = layer_trecv_unlocked,
	.recvv = layer_trecvv_unlocked,
	.recvmsg = layer_trecvmsg_unlocked,
	.send = layer_tsend_unlocked,
	.sendv = layer_tsendv_unlocked,
	.sendmsg = layer_tsendmsg_unlocked,
	.inject = layer_tinject_unlocked,
	.senddata = layer_tsenddata_unlocked,
	.injectdata = layer_tinjectdata_unlocked,
};
