/*
 * FI_MSG entry points: argument checks, the completion rules of fi_msg(3) (op_flags,
 * FI_SELECTIVE_COMPLETION, inject), then the protocol under the endpoint lock. A call that
 * finds its queues full makes progress before returning -FI_EAGAIN, so that an application
 * retrying the call cannot spin without anything moving.
 */
#include "config.h"

#include <inttypes.h>

#include "layer/ep.h"
#include "layer/av.h"

#define LAYER_SENDMSG_FLAGS (FI_REMOTE_CQ_DATA | FI_COMPLETION | FI_INJECT | FI_MORE | \
			     FI_INJECT_COMPLETE | FI_TRANSMIT_COMPLETE | FI_DELIVERY_COMPLETE | \
			     FI_FENCE)
#define LAYER_RECVMSG_FLAGS (FI_COMPLETION | FI_MULTI_RECV | FI_MORE | FI_AUTH_KEY)

int layer_ep_check_src(struct layer_ep *ep, fi_addr_t src, uint64_t flags)
{
	uint8_t addr[LAYER_ADDR_MAX];
	size_t index;

	/* fi_av(3) 1.20: FI_AUTH_KEY says src is a key handle, one the endpoint holds */
	if (unlikely(flags & FI_AUTH_KEY)) {
		if (layer_auth_holds(ep, src))
			return 0;
		FI_WARN(&layer_prov, FI_LOG_EP_DATA, "receive: FI_AUTH_KEY with %#" PRIx64
			", not a key the endpoint was enabled with\n", (uint64_t) src);
		return -FI_EINVAL;
	}
	if (src == FI_ADDR_UNSPEC)
		return 0;
	return layer_av_get_addr(ep->av, src, addr, &index);
}

ssize_t layer_ep_send(struct layer_ep *ep, const struct iovec *iov, size_t count,
		      fi_addr_t dest, uint64_t data, uint64_t tag, uint64_t flags, void *context)
{
	ssize_t ret;

	if (unlikely(!layer_iov_ok(iov, count)))
		return -FI_EINVAL;
	if (unlikely((flags & FI_INJECT) && layer_iov_total(iov, count) > LAYER_INJECT_SIZE))
		return -FI_EMSGSIZE;
	if (unlikely(!(ep->caps & FI_SEND) ||
		     !(ep->caps & (flags & FI_TAGGED ? FI_TAGGED : FI_MSG))))
		return -FI_EOPNOTSUPP;

	util_lock_acquire(&ep->lock);
	if (unlikely(!ep->is_enabled))
		ret = -FI_EOPBADSTATE;
	else
		ret = layer_proto_send(ep, iov, count, dest, data, tag, flags, context);
	util_lock_release(&ep->lock);
	if (ret == -FI_EAGAIN)
		layer_ep_progress(ep);
	return ret;
}

static ssize_t layer_recv_common(struct layer_ep *ep, const struct iovec *iov, size_t count,
				 fi_addr_t src, uint64_t flags, void *context)
{
	ssize_t ret;

	if (unlikely(!layer_iov_ok(iov, count)))
		return -FI_EINVAL;
	if (unlikely(!(ep->caps & FI_RECV) || !(ep->caps & FI_MSG)))
		return -FI_EOPNOTSUPP;
	if (flags & FI_MULTI_RECV) {
		if (!(ep->caps & FI_MULTI_RECV))
			return -FI_EOPNOTSUPP;
		if (count != 1)
			return -FI_EINVAL;
	}
	/* Without FI_DIRECTED_RECV the source of a receive is ignored (fi_msg(3)). */
	if (!(ep->caps & FI_DIRECTED_RECV)) {
		src = FI_ADDR_UNSPEC;
		flags &= ~FI_AUTH_KEY;
	}

	util_lock_acquire(&ep->lock);
	if (unlikely(!ep->is_enabled)) {
		ret = -FI_EOPBADSTATE;
	} else if (layer_ep_check_src(ep, src, flags)) {
		ret = -FI_EINVAL;
	} else {
		ret = layer_proto_recv(ep, iov, count, src, flags, context);
	}
	util_lock_release(&ep->lock);
	if (ret == -FI_EAGAIN)
		layer_ep_progress(ep);
	return ret;
}

static ssize_t layer_recv(struct fid_ep *ep_fid, void *buf, size_t len, void *desc,
			  fi_addr_t src_addr, void *context)
{
	struct layer_ep *ep = container_of(ep_fid, struct layer_ep, ep_fid);
	struct iovec iov = { .iov_base = buf, .iov_len = len };

	return layer_recv_common(ep, &iov, 1, src_addr,
				 ep->rx_op_flags | layer_rx_completion(ep, ep->rx_op_flags),
				 context);
}

static ssize_t layer_recvv(struct fid_ep *ep_fid, const struct iovec *iov, void **desc,
			   size_t count, fi_addr_t src_addr, void *context)
{
	struct layer_ep *ep = container_of(ep_fid, struct layer_ep, ep_fid);

	return layer_recv_common(ep, iov, count, src_addr,
				 ep->rx_op_flags | layer_rx_completion(ep, ep->rx_op_flags),
				 context);
}

static ssize_t layer_recvmsg(struct fid_ep *ep_fid, const struct fi_msg *msg, uint64_t flags)
{
	struct layer_ep *ep = container_of(ep_fid, struct layer_ep, ep_fid);

	if (unlikely(!msg))
		return -FI_EINVAL;
	if (unlikely(flags & ~LAYER_RECVMSG_FLAGS))
		return -FI_EBADFLAGS;
	return layer_recv_common(ep, msg->msg_iov, msg->iov_count, msg->addr,
				 (flags & ~FI_COMPLETION) | layer_rx_completion(ep, flags),
				 msg->context);
}

static ssize_t layer_send(struct fid_ep *ep_fid, const void *buf, size_t len, void *desc,
			  fi_addr_t dest_addr, void *context)
{
	struct layer_ep *ep = container_of(ep_fid, struct layer_ep, ep_fid);
	struct iovec iov = { .iov_base = (void *) buf, .iov_len = len };
	uint64_t flags = ep->tx_op_flags & ~FI_REMOTE_CQ_DATA;

	return layer_ep_send(ep, &iov, 1, dest_addr, 0, 0,
				 flags | layer_tx_completion(ep, flags), context);
}

static ssize_t layer_sendv(struct fid_ep *ep_fid, const struct iovec *iov, void **desc,
			   size_t count, fi_addr_t dest_addr, void *context)
{
	struct layer_ep *ep = container_of(ep_fid, struct layer_ep, ep_fid);
	uint64_t flags = ep->tx_op_flags & ~FI_REMOTE_CQ_DATA;

	return layer_ep_send(ep, iov, count, dest_addr, 0, 0,
				 flags | layer_tx_completion(ep, flags), context);
}

static ssize_t layer_sendmsg(struct fid_ep *ep_fid, const struct fi_msg *msg, uint64_t flags)
{
	struct layer_ep *ep = container_of(ep_fid, struct layer_ep, ep_fid);

	if (unlikely(!msg))
		return -FI_EINVAL;
	if (unlikely(flags & ~LAYER_SENDMSG_FLAGS))
		return -FI_EBADFLAGS;
	return layer_ep_send(ep, msg->msg_iov, msg->iov_count, msg->addr, msg->data, 0,
				 (flags & ~FI_COMPLETION) | layer_tx_completion(ep, flags),
				 msg->context);
}

static ssize_t layer_inject(struct fid_ep *ep_fid, const void *buf, size_t len,
			    fi_addr_t dest_addr)
{
	struct layer_ep *ep = container_of(ep_fid, struct layer_ep, ep_fid);
	struct iovec iov = { .iov_base = (void *) buf, .iov_len = len };

	/* fi_inject never generates a completion; counters still count it. */
	return layer_ep_send(ep, &iov, 1, dest_addr, 0, 0, FI_INJECT, NULL);
}

static ssize_t layer_senddata(struct fid_ep *ep_fid, const void *buf, size_t len, void *desc,
			      uint64_t data, fi_addr_t dest_addr, void *context)
{
	struct layer_ep *ep = container_of(ep_fid, struct layer_ep, ep_fid);
	struct iovec iov = { .iov_base = (void *) buf, .iov_len = len };
	uint64_t flags = ep->tx_op_flags | FI_REMOTE_CQ_DATA;

	return layer_ep_send(ep, &iov, 1, dest_addr, data, 0,
				 flags | layer_tx_completion(ep, flags), context);
}

static ssize_t layer_injectdata(struct fid_ep *ep_fid, const void *buf, size_t len,
				uint64_t data, fi_addr_t dest_addr)
{
	struct layer_ep *ep = container_of(ep_fid, struct layer_ep, ep_fid);
	struct iovec iov = { .iov_base = (void *) buf, .iov_len = len };

	return layer_ep_send(ep, &iov, 1, dest_addr, data, 0, FI_INJECT | FI_REMOTE_CQ_DATA,
				 NULL);
}

struct fi_ops_msg layer_msg_ops = {
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
