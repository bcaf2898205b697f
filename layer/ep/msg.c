/*
 * FI_MSG entry points: argument checks, the completion rules of fi_msg(3) (op_flags,
 * FI_SELECTIVE_COMPLETION, inject), then the transmit or receive path under the variant's
 * lock. Every entry exists twice, locked and unlocked (ep.h says which an endpoint gets).
 */
#include "config.h"

#include "layer/ep/ep.h"

#define LAYER_SENDMSG_FLAGS (FI_REMOTE_CQ_DATA | FI_COMPLETION | FI_INJECT | FI_MORE | \
			     FI_INJECT_COMPLETE | FI_TRANSMIT_COMPLETE | FI_DELIVERY_COMPLETE | \
			     FI_FENCE)
#define LAYER_RECVMSG_FLAGS (FI_COMPLETION | FI_MULTI_RECV | FI_MORE | FI_AUTH_KEY)

static inline struct layer_ep *layer_ep_of(struct fid_ep *ep_fid)
{
	return container_of(ep_fid, struct layer_ep, ep_fid);
}

/* The flags of a call without flags: the endpoint's op_flags, completion as bound. */
static inline uint64_t layer_msg_tx_flags(struct layer_ep *ep, uint64_t extra)
{
	uint64_t flags = (ep->tx_op_flags & ~FI_REMOTE_CQ_DATA) | extra;

	return flags | layer_proto_tx_comp(&ep->proto, flags);
}

static inline uint64_t layer_msg_rx_flags(struct layer_ep *ep)
{
	return ep->rx_op_flags | layer_proto_rx_comp(&ep->proto, ep->rx_op_flags);
}

static inline __attribute__((always_inline)) ssize_t
layer_msg_recv(struct layer_ep *ep, const struct iovec *iov, size_t count, fi_addr_t src,
	       uint64_t flags, void *context, const bool is_locked)
{
	ssize_t ret = -FI_EOPBADSTATE;

	if (unlikely(!layer_iov_ok(iov, count)))
		return -FI_EINVAL;
	if (flags & FI_MULTI_RECV) {
		if (!(ep->caps & FI_MULTI_RECV))
			return -FI_EOPNOTSUPP;
		if (count != 1)
			return -FI_EINVAL;
	}
	if (layer_ep_enter(ep, is_locked)) {
		if (unlikely(src != FI_ADDR_UNSPEC || (flags & FI_AUTH_KEY)) &&
		    layer_ep_check_src(ep, &src, &flags))
			ret = -FI_EINVAL;
		else
			ret = layer_rx_post(&ep->proto, iov, count, src, flags, context);
	}
	return layer_ep_leave(ep, ret, is_locked);
}

static inline __attribute__((always_inline)) ssize_t
layer_msg_recvmsg(struct fid_ep *ep_fid, const struct fi_msg *msg, uint64_t flags,
		  const bool is_locked)
{
	struct layer_ep *ep = layer_ep_of(ep_fid);

	if (unlikely(!msg))
		return -FI_EINVAL;
	if (unlikely(flags & ~LAYER_RECVMSG_FLAGS))
		return -FI_EBADFLAGS;
	return layer_msg_recv(ep, msg->msg_iov, msg->iov_count, msg->addr,
			      (flags & ~FI_COMPLETION) | layer_proto_rx_comp(&ep->proto, flags),
			      msg->context, is_locked);
}

static inline __attribute__((always_inline)) ssize_t
layer_msg_sendmsg(struct fid_ep *ep_fid, const struct fi_msg *msg, uint64_t flags,
		  const bool is_locked)
{
	struct layer_ep *ep = layer_ep_of(ep_fid);

	if (unlikely(!msg))
		return -FI_EINVAL;
	if (unlikely(flags & ~LAYER_SENDMSG_FLAGS))
		return -FI_EBADFLAGS;
	return layer_ep_send(ep, msg->msg_iov, msg->iov_count, msg->addr, msg->data, 0,
			     (flags & ~FI_COMPLETION) | layer_proto_tx_comp(&ep->proto, flags),
			     msg->context, is_locked);
}

/* ---- locked ---- */

static ssize_t layer_recv(struct fid_ep *ep_fid, void *buf, size_t len, void *desc,
			  fi_addr_t src_addr, void *context)
{
	struct layer_ep *ep = layer_ep_of(ep_fid);
	struct iovec iov = { .iov_base = buf, .iov_len = len };

	return layer_msg_recv(ep, &iov, 1, src_addr, layer_msg_rx_flags(ep), context, true);
}

static ssize_t layer_recvv(struct fid_ep *ep_fid, const struct iovec *iov, void **desc,
			   size_t count, fi_addr_t src_addr, void *context)
{
	struct layer_ep *ep = layer_ep_of(ep_fid);

	return layer_msg_recv(ep, iov, count, src_addr, layer_msg_rx_flags(ep), context, true);
}

static ssize_t layer_recvmsg(struct fid_ep *ep_fid, const struct fi_msg *msg, uint64_t flags)
{
	return layer_msg_recvmsg(ep_fid, msg, flags, true);
}

static ssize_t layer_send(struct fid_ep *ep_fid, const void *buf, size_t len, void *desc,
			  fi_addr_t dest_addr, void *context)
{
	struct layer_ep *ep = layer_ep_of(ep_fid);
	struct iovec iov = { .iov_base = (void *) buf, .iov_len = len };

	return layer_ep_send(ep, &iov, 1, dest_addr, 0, 0, layer_msg_tx_flags(ep, 0), context,
			     true);
}

static ssize_t layer_sendv(struct fid_ep *ep_fid, const struct iovec *iov, void **desc,
			   size_t count, fi_addr_t dest_addr, void *context)
{
	struct layer_ep *ep = layer_ep_of(ep_fid);

	return layer_ep_send(ep, iov, count, dest_addr, 0, 0, layer_msg_tx_flags(ep, 0), context,
			     true);
}

static ssize_t layer_sendmsg(struct fid_ep *ep_fid, const struct fi_msg *msg, uint64_t flags)
{
	return layer_msg_sendmsg(ep_fid, msg, flags, true);
}

/* fi_inject never generates a completion; counters still count it. */
static ssize_t layer_inject(struct fid_ep *ep_fid, const void *buf, size_t len,
			    fi_addr_t dest_addr)
{
	struct iovec iov = { .iov_base = (void *) buf, .iov_len = len };

	return layer_ep_send(layer_ep_of(ep_fid), &iov, 1, dest_addr, 0, 0, FI_INJECT, NULL,
			     true);
}

static ssize_t layer_senddata(struct fid_ep *ep_fid, const void *buf, size_t len, void *desc,
			      uint64_t data, fi_addr_t dest_addr, void *context)
{
	struct layer_ep *ep = layer_ep_of(ep_fid);
	struct iovec iov = { .iov_base = (void *) buf, .iov_len = len };

	return layer_ep_send(ep, &iov, 1, dest_addr, data, 0,
			     layer_msg_tx_flags(ep, FI_REMOTE_CQ_DATA), context, true);
}

static ssize_t layer_injectdata(struct fid_ep *ep_fid, const void *buf, size_t len,
				uint64_t data, fi_addr_t dest_addr)
{
	struct iovec iov = { .iov_base = (void *) buf, .iov_len = len };

	return layer_ep_send(layer_ep_of(ep_fid), &iov, 1, dest_addr, data, 0,
			     FI_INJECT | FI_REMOTE_CQ_DATA, NULL, true);
}

const struct fi_ops_msg layer_msg_locked_ops = {
	.size = sizeof(struct fi_ops_msg),
	.recv = layer_recv,
	.recvv = layer_recvv,
	.recvmsg = layer_recvmsg,
	.send = layer_send,
	.sendv = layer_sendv,
	.sendmsg = layer_sendmsg,
	.inject = layer_inject,
	.senddata = layer_senddata,
	.injectdata = layer_injectdata,
};

/* ---- unlocked: the same without the lock ---- */

static ssize_t layer_recv_unlocked(struct fid_ep *ep_fid, void *buf, size_t len, void *desc,
				   fi_addr_t src_addr, void *context)
{
	struct layer_ep *ep = layer_ep_of(ep_fid);
	struct iovec iov = { .iov_base = buf, .iov_len = len };

	return layer_msg_recv(ep, &iov, 1, src_addr, layer_msg_rx_flags(ep), context, false);
}

static ssize_t layer_recvv_unlocked(struct fid_ep *ep_fid, const struct iovec *iov,
				    void **desc, size_t count, fi_addr_t src_addr,
				    void *context)
{
	struct layer_ep *ep = layer_ep_of(ep_fid);

	return layer_msg_recv(ep, iov, count, src_addr, layer_msg_rx_flags(ep), context, false);
}

static ssize_t layer_recvmsg_unlocked(struct fid_ep *ep_fid, const struct fi_msg *msg,
				      uint64_t flags)
{
	return layer_msg_recvmsg(ep_fid, msg, flags, false);
}

static ssize_t layer_send_unlocked(struct fid_ep *ep_fid, const void *buf, size_t len,
				   void *desc, fi_addr_t dest_addr, void *context)
{
	struct layer_ep *ep = layer_ep_of(ep_fid);
	struct iovec iov = { .iov_base = (void *) buf, .iov_len = len };

	return layer_ep_send(ep, &iov, 1, dest_addr, 0, 0, layer_msg_tx_flags(ep, 0), context,
			     false);
}

static ssize_t layer_sendv_unlocked(struct fid_ep *ep_fid, const struct iovec *iov,
				    void **desc, size_t count, fi_addr_t dest_addr,
				    void *context)
{
	struct layer_ep *ep = layer_ep_of(ep_fid);

	return layer_ep_send(ep, iov, count, dest_addr, 0, 0, layer_msg_tx_flags(ep, 0), context,
			     false);
}

static ssize_t layer_sendmsg_unlocked(struct fid_ep *ep_fid, const struct fi_msg *msg,
				      uint64_t flags)
{
	return layer_msg_sendmsg(ep_fid, msg, flags, false);
}

static ssize_t layer_inject_unlocked(struct fid_ep *ep_fid, const void *buf, size_t len,
				     fi_addr_t dest_addr)
{
	struct iovec iov = { .iov_base = (void *) buf, .iov_len = len };

	return layer_ep_send(layer_ep_of(ep_fid), &iov, 1, dest_addr, 0, 0, FI_INJECT, NULL,
			     false);
}

static ssize_t layer_senddata_unlocked(struct fid_ep *ep_fid, const void *buf, size_t len,
				       void *desc, uint64_t data, fi_addr_t dest_addr,
				       void *context)
{
	struct layer_ep *ep = layer_ep_of(ep_fid);
	struct iovec iov = { .iov_base = (void *) buf, .iov_len = len };

	return layer_ep_send(ep, &iov, 1, dest_addr, data, 0,
			     layer_msg_tx_flags(ep, FI_REMOTE_CQ_DATA), context, false);
}

static ssize_t layer_injectdata_unlocked(struct fid_ep *ep_fid, const void *buf, size_t len,
					 uint64_t data, fi_addr_t dest_addr)
{
	struct iovec iov = { .iov_base = (void *) buf, .iov_len = len };

	return layer_ep_send(layer_ep_of(ep_fid), &iov, 1, dest_addr, data, 0,
			     FI_INJECT | FI_REMOTE_CQ_DATA, NULL, false);
}

const struct fi_ops_msg layer_msg_unlocked_ops = {
	.size = sizeof(struct fi_ops_msg),
	.recv = layer_recv_unlocked,
	.recvv = layer_recvv_unlocked,
	.recvmsg = layer_recvmsg_unlocked,
	.send = layer_send_unlocked,
	.sendv = layer_sendv_unlocked,
	.sendmsg = layer_sendmsg_unlocked,
	.inject = layer_inject_unlocked,
	.senddata = layer_senddata_unlocked,
	.injectdata = layer_injectdata_unlocked,
};
