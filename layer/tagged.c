/*
 * FI_TAGGED: tagged sends share the protocol with FI_MSG (a header flag and the tag); tagged
 * receives are matched in software by util's engine: posted receives in the order they were
 * posted, unexpected messages in the order they arrived, and FI_PEEK / FI_CLAIM /
 * FI_DISCARD probes over the latter (fi_tagged(3)). Everything below the entry points runs
 * with ep->lock held.
 */
#include "config.h"

#include <string.h>
#include <rdma/fi_tagged.h>

#include "layer/ep.h"
#include "layer/av.h"
#include "util/tagm_inl.h"

#define LAYER_TSENDMSG_FLAGS (FI_REMOTE_CQ_DATA | FI_COMPLETION | FI_INJECT | FI_MORE | \
			      FI_INJECT_COMPLETE | FI_TRANSMIT_COMPLETE | FI_DELIVERY_COMPLETE | \
			      FI_MATCH_COMPLETE | FI_FENCE)
#define LAYER_TRECVMSG_FLAGS (FI_COMPLETION | FI_MORE | FI_PEEK | FI_CLAIM | FI_DISCARD | \
			      FI_AUTH_KEY)

/* A message that came without an AV key is in no group of the engine. */
_Static_assert(UTIL_TAGM_NO_GROUP == FI_ADDR_NOTAVAIL, "no key, no group");

static inline struct layer_rx_buf *layer_buf_of(struct util_tagm_msg *msg)
{
	return container_of(msg, struct layer_rx_buf, tagm);
}

void layer_tagged_arrive(struct layer_ep *ep, struct layer_rx_buf *buf)
{
	uint64_t tag = ((const struct layer_hdr *) buf->data)->tag;
	struct util_tagm_recv *recv;

	/* An FI_AUTH_KEY receive names the key: the message's group (util/tagm.h). */
	recv = util_tagm_recv_match(&ep->tagm, tag, buf->src_addr, buf->key);
	if (recv) {
		layer_proto_deliver(ep, container_of(recv, struct layer_rx, tagm), buf);
		layer_proto_repost_buf(ep, buf);
		return;
	}
	/* Unexpected: kept until a receive or a probe takes it (unexp.c). */
	buf = layer_unexp_keep(ep, buf);
	util_tagm_msg_add(&ep->tagm, &buf->tagm, tag, buf->src_addr, buf->key);
}

/* What a peek or a discard reports: the message's metadata, data only when copied. */
static void layer_tagged_report_probe(struct layer_ep *ep, void *context,
				      const struct layer_rx_buf *buf, void *data_buf)
{
	const struct layer_hdr *hdr = (const struct layer_hdr *) buf->data;
	uint64_t flags = FI_RECV | FI_TAGGED;

	if (hdr->flags & LAYER_HDR_CQ_DATA)
		flags |= FI_REMOTE_CQ_DATA;
	if (ep->rx_cq)
		util_cq_write(&ep->rx_cq->util, context, flags, hdr->size, data_buf,
			      hdr->flags & LAYER_HDR_CQ_DATA ? hdr->data : 0, hdr->tag,
			      buf->src_addr == FI_ADDR_NOTAVAIL ? FI_ADDR_NOTAVAIL :
			      layer_av_report_addr(ep->av, buf->src_addr));
}

static ssize_t layer_tagged_peek(struct layer_ep *ep, const struct iovec *iov, size_t count,
				 fi_addr_t src, uint64_t tag, uint64_t ignore, uint64_t flags,
				 void *context)
{
	struct fi_cq_err_entry err = {
		.op_context = context,
		.flags = FI_RECV | FI_TAGGED,
		.tag = tag,
		.err = FI_ENOMSG,
		.prov_errno = -FI_ENOMSG,
	};
	struct util_tagm_msg *msg;
	struct layer_rx_buf *buf;
	const struct layer_hdr *hdr;
	void *data_buf = NULL;

	msg = util_tagm_msg_search(&ep->tagm, tag, ignore, src);
	if (!msg) {
		/* Asynchronous by the spec: "not found" is a CQ error entry, not a return. */
		if (ep->rx_cq)
			util_cq_write_error(&ep->rx_cq->util, &err);
		/* It may be behind data the bound holds back: let some in. */
		layer_unexp_peek_missed(ep);
		return 0;
	}
	buf = layer_buf_of(msg);
	hdr = (const struct layer_hdr *) buf->data;
	if (flags & FI_DISCARD) {
		util_tagm_msg_remove(&ep->tagm, msg);
		layer_tagged_report_probe(ep, context, buf, NULL);
		layer_proto_discard(ep, buf);
		return 0;
	}
	/* Eager data is here: copy it when asked; a rendezvous payload is still remote. */
	if (hdr->op == LAYER_OP_EAGER && count && layer_iov_total(iov, count)) {
		size_t i, done = 0, n;

		for (i = 0; i < count && done < hdr->size; i++) {
			n = UTIL_MIN(iov[i].iov_len, hdr->size - done);
			memcpy(iov[i].iov_base, layer_buf_payload(buf) + done, n);
			done += n;
		}
		data_buf = iov[0].iov_base;
	}
	if (flags & FI_CLAIM)
		util_tagm_msg_claim(&ep->tagm, msg, context);
	layer_tagged_report_probe(ep, context, buf, data_buf);
	return 0;
}

static ssize_t layer_tagged_claim(struct layer_ep *ep, const struct iovec *iov, size_t count,
				  uint64_t flags, void *context)
{
	struct util_tagm_msg *msg;
	struct layer_rx_buf *buf;
	struct layer_rx *rx = NULL;

	/* The receive first: without one the claimed message stays claimed, for a retry. */
	if (!(flags & FI_DISCARD)) {
		rx = layer_rx_alloc(ep, context, flags, iov, count, FI_ADDR_UNSPEC);
		if (!rx)
			return -FI_EAGAIN;
	}
	msg = util_tagm_msg_take_claimed(&ep->tagm, context);
	if (!msg) {
		if (rx)
			layer_rx_free(ep, rx);
		return -FI_EINVAL;
	}
	buf = layer_buf_of(msg);
	if (!rx) {
		layer_tagged_report_probe(ep, context, buf, NULL);
		layer_proto_discard(ep, buf);
		return 0;
	}
	layer_proto_deliver(ep, rx, buf);
	layer_unexp_release(ep, buf);
	return 0;
}

static ssize_t layer_tagged_post(struct layer_ep *ep, const struct iovec *iov, size_t count,
				 fi_addr_t src, uint64_t tag, uint64_t ignore, uint64_t flags,
				 void *context)
{
	struct util_tagm_msg *msg;
	struct layer_rx_buf *buf;
	struct layer_rx *rx;

	rx = layer_rx_alloc(ep, context, flags, iov, count, src);
	if (!rx)
		return -FI_EAGAIN;
	msg = util_tagm_msg_match(&ep->tagm, tag, ignore, src);
	if (msg) {
		buf = layer_buf_of(msg);
		layer_proto_deliver(ep, rx, buf);
		layer_unexp_release(ep, buf);
		return 0;
	}
	util_tagm_recv_post(&ep->tagm, &rx->tagm, tag, ignore, src);
	/* A receive waits: a stall on receiving is lifted (its message may be behind it). */
	layer_unexp_check(ep);
	return 0;
}

static ssize_t layer_trecv_common(struct layer_ep *ep, const struct iovec *iov, size_t count,
				  fi_addr_t src, uint64_t tag, uint64_t ignore, uint64_t flags,
				  void *context)
{
	ssize_t ret;

	if (unlikely(!layer_iov_ok(iov, count)))
		return -FI_EINVAL;
	if (unlikely(!(ep->caps & FI_RECV) || !(ep->caps & FI_TAGGED)))
		return -FI_EOPNOTSUPP;
	/* FI_DISCARD goes with FI_PEEK or FI_CLAIM; FI_CLAIM needs the caller's context. */
	if (unlikely(((flags & FI_DISCARD) && !(flags & (FI_PEEK | FI_CLAIM))) ||
		     ((flags & FI_CLAIM) && !context)))
		return -FI_EINVAL;
	if (!(ep->caps & FI_DIRECTED_RECV)) {
		src = FI_ADDR_UNSPEC;
		flags &= ~FI_AUTH_KEY;
	}

	util_lock_acquire(&ep->lock);
	if (unlikely(!ep->is_enabled))
		ret = -FI_EOPBADSTATE;
	else if ((flags & (FI_CLAIM | FI_PEEK)) == FI_CLAIM)
		/* The claimed message is named by the context; source and tag play no part. */
		ret = layer_tagged_claim(ep, iov, count, flags, context);
	else if (layer_ep_check_src(ep, src, flags))
		ret = -FI_EINVAL;
	else if (flags & FI_PEEK)
		ret = layer_tagged_peek(ep, iov, count, src, tag, ignore, flags, context);
	else
		ret = layer_tagged_post(ep, iov, count, src, tag, ignore, flags, context);
	util_lock_release(&ep->lock);
	if (ret == -FI_EAGAIN)
		layer_ep_progress(ep);
	return ret;
}

static bool layer_recv_has_context(const struct util_tagm_recv *recv, void *context)
{
	return container_of(recv, struct layer_rx, tagm)->context == context;
}

int layer_tagged_cancel(struct layer_ep *ep, void *context)
{
	struct util_tagm_recv *recv;
	struct layer_rx *rx;

	recv = util_tagm_recv_find(&ep->tagm, layer_recv_has_context, context);
	if (!recv)
		return -FI_ENOENT;
	util_tagm_recv_remove(&ep->tagm, recv);
	rx = container_of(recv, struct layer_rx, tagm);
	layer_proto_report_rx(ep, rx, NULL, 0, FI_RECV | FI_TAGGED, 0, FI_ADDR_NOTAVAIL,
			      FI_ECANCELED, 0);
	layer_rx_free(ep, rx);
	return 0;
}

static void layer_tagged_free_recv(struct util_tagm_recv *recv, void *arg)
{
	layer_rx_free(arg, container_of(recv, struct layer_rx, tagm));
}

static void layer_tagged_free_msg(struct util_tagm_msg *msg, void *arg)
{
	layer_unexp_put(arg, layer_buf_of(msg));
}

void layer_tagged_close(struct layer_ep *ep)
{
	size_t cnt;

	util_tagm_recv_flush(&ep->tagm, layer_tagged_free_recv, ep);
	cnt = util_tagm_msg_flush(&ep->tagm, layer_tagged_free_msg, ep);
	if (cnt)
		FI_WARN(&layer_prov, FI_LOG_EP_DATA,
			"%zu unexpected tagged messages never matched\n", cnt);
	util_tagm_fini(&ep->tagm);
}

/* A lost connection's unexpected tagged messages: as layer_conn_orphan_unexpected. */
static bool layer_msg_from_conn(const struct util_tagm_msg *msg, void *conn)
{
	return container_of(msg, struct layer_rx_buf, tagm)->conn == conn;
}

void layer_tagged_orphan(struct layer_ep *ep, struct layer_conn *conn)
{
	struct util_tagm_msg *msg;
	struct layer_rx_buf *buf;

	while ((msg = util_tagm_msg_find(&ep->tagm, layer_msg_from_conn, conn))) {
		buf = layer_buf_of(msg);
		if (((const struct layer_hdr *) buf->data)->op == LAYER_OP_RTS) {
			util_tagm_msg_remove(&ep->tagm, msg);
			layer_unexp_put(ep, buf);
		} else {
			buf->conn = NULL;
		}
	}
}

/* Entry points. */

static ssize_t layer_trecv(struct fid_ep *ep_fid, void *buf, size_t len, void *desc,
			   fi_addr_t src_addr, uint64_t tag, uint64_t ignore, void *context)
{
	struct layer_ep *ep = container_of(ep_fid, struct layer_ep, ep_fid);
	struct iovec iov = { .iov_base = buf, .iov_len = len };

	return layer_trecv_common(ep, &iov, 1, src_addr, tag, ignore,
				  ep->rx_op_flags | layer_rx_completion(ep, ep->rx_op_flags),
				  context);
}

static ssize_t layer_trecvv(struct fid_ep *ep_fid, const struct iovec *iov, void **desc,
			    size_t count, fi_addr_t src_addr, uint64_t tag, uint64_t ignore,
			    void *context)
{
	struct layer_ep *ep = container_of(ep_fid, struct layer_ep, ep_fid);

	return layer_trecv_common(ep, iov, count, src_addr, tag, ignore,
				  ep->rx_op_flags | layer_rx_completion(ep, ep->rx_op_flags),
				  context);
}

static ssize_t layer_trecvmsg(struct fid_ep *ep_fid, const struct fi_msg_tagged *msg,
			      uint64_t flags)
{
	struct layer_ep *ep = container_of(ep_fid, struct layer_ep, ep_fid);

	if (unlikely(!msg))
		return -FI_EINVAL;
	if (unlikely(flags & ~LAYER_TRECVMSG_FLAGS))
		return -FI_EBADFLAGS;
	return layer_trecv_common(ep, msg->msg_iov, msg->iov_count, msg->addr, msg->tag,
				  msg->ignore,
				  (flags & ~FI_COMPLETION) | layer_rx_completion(ep, flags),
				  msg->context);
}

static ssize_t layer_tsend(struct fid_ep *ep_fid, const void *buf, size_t len, void *desc,
			   fi_addr_t dest_addr, uint64_t tag, void *context)
{
	struct layer_ep *ep = container_of(ep_fid, struct layer_ep, ep_fid);
	struct iovec iov = { .iov_base = (void *) buf, .iov_len = len };
	uint64_t flags = (ep->tx_op_flags & ~FI_REMOTE_CQ_DATA) | FI_TAGGED;

	return layer_ep_send(ep, &iov, 1, dest_addr, 0, tag,
			     flags | layer_tx_completion(ep, flags), context);
}

static ssize_t layer_tsendv(struct fid_ep *ep_fid, const struct iovec *iov, void **desc,
			    size_t count, fi_addr_t dest_addr, uint64_t tag, void *context)
{
	struct layer_ep *ep = container_of(ep_fid, struct layer_ep, ep_fid);
	uint64_t flags = (ep->tx_op_flags & ~FI_REMOTE_CQ_DATA) | FI_TAGGED;

	return layer_ep_send(ep, iov, count, dest_addr, 0, tag,
			     flags | layer_tx_completion(ep, flags), context);
}

static ssize_t layer_tsendmsg(struct fid_ep *ep_fid, const struct fi_msg_tagged *msg,
			      uint64_t flags)
{
	struct layer_ep *ep = container_of(ep_fid, struct layer_ep, ep_fid);

	if (unlikely(!msg))
		return -FI_EINVAL;
	if (unlikely(flags & ~LAYER_TSENDMSG_FLAGS))
		return -FI_EBADFLAGS;
	return layer_ep_send(ep, msg->msg_iov, msg->iov_count, msg->addr, msg->data, msg->tag,
			     (flags & ~FI_COMPLETION) | FI_TAGGED |
			     layer_tx_completion(ep, flags), msg->context);
}

static ssize_t layer_tinject(struct fid_ep *ep_fid, const void *buf, size_t len,
			     fi_addr_t dest_addr, uint64_t tag)
{
	struct layer_ep *ep = container_of(ep_fid, struct layer_ep, ep_fid);
	struct iovec iov = { .iov_base = (void *) buf, .iov_len = len };

	return layer_ep_send(ep, &iov, 1, dest_addr, 0, tag, FI_INJECT | FI_TAGGED, NULL);
}

static ssize_t layer_tsenddata(struct fid_ep *ep_fid, const void *buf, size_t len, void *desc,
			       uint64_t data, fi_addr_t dest_addr, uint64_t tag, void *context)
{
	struct layer_ep *ep = container_of(ep_fid, struct layer_ep, ep_fid);
	struct iovec iov = { .iov_base = (void *) buf, .iov_len = len };
	uint64_t flags = ep->tx_op_flags | FI_REMOTE_CQ_DATA | FI_TAGGED;

	return layer_ep_send(ep, &iov, 1, dest_addr, data, tag,
			     flags | layer_tx_completion(ep, flags), context);
}

static ssize_t layer_tinjectdata(struct fid_ep *ep_fid, const void *buf, size_t len,
				 uint64_t data, fi_addr_t dest_addr, uint64_t tag)
{
	struct layer_ep *ep = container_of(ep_fid, struct layer_ep, ep_fid);
	struct iovec iov = { .iov_base = (void *) buf, .iov_len = len };

	return layer_ep_send(ep, &iov, 1, dest_addr, data, tag,
			     FI_INJECT | FI_REMOTE_CQ_DATA | FI_TAGGED, NULL);
}

struct fi_ops_tagged layer_tagged_ops = {
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
