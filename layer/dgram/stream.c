/*
 * Messages over the datagram transport (dgram.h): each direction of a peer is one ordered
 * stream of packets (rel.c), and a message is a run of them, the first starting with its
 * header (struct layer_dg_msg), none shared with another message.
 *
 * Reads: the reader sends RREQ (address, key, length) and queues the read; the peer checks
 * the range against its domain's rendezvous registrations (the only memory the layers above
 * ever read: mr.h) and answers RDATA, the data or the error, which lands straight in the
 * reader's buffer. Requests are served, and so answered, in the order they arrive.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "layer/dgram/dgram_int.h"
#include "layer/mr.h"

struct layer_dg_op *layer_dg_op_new(struct layer_dgram *dg, enum layer_dg_kind kind,
				    const struct iovec *iov, size_t count, bool is_copy,
				    struct layer_ctx *ctx)
{
	struct layer_dg_op *op;
	size_t i, len = 0;
	bool is_pooled;

	for (i = 0; i < count; i++)
		len += iov[i].iov_len;
	/* one per message: from the pool unless it copies more than the pool's room */
	is_pooled = !is_copy || len <= LAYER_DG_OP_COPY_MAX;
	op = is_pooled ? util_bufpool_get(&dg->op_pool) : malloc(sizeof(*op) + len);
	if (!op)
		return NULL;
	op->is_pooled = is_pooled;
	op->ctx = ctx;
	op->msg = (struct layer_dg_msg) { .kind = (uint8_t) kind, .len = len };
	op->iov_idx = 0;
	op->left = len;
	op->is_started = false;
	op->last_seq = 0;
	op->entry = NULL;
	if (is_copy) {
		for (i = 0, len = 0; i < count; len += iov[i].iov_len, i++) {
			if (iov[i].iov_len)
				memcpy(op->copy + len, iov[i].iov_base, iov[i].iov_len);
		}
		op->iov[0] = (struct iovec) { .iov_base = op->copy, .iov_len = len };
		op->iov_cnt = 1;
	} else {
		/* a PING has none */
		if (count)
			memcpy(op->iov, iov, count * sizeof(*iov));
		op->iov_cnt = count;
	}
	return op;
}

void layer_dg_op_free(struct layer_dgram *dg, struct layer_dg_op *op)
{
	if (op->entry)
		layer_mr_rndv_release(dg->core->domain, op->entry);
	if (op->is_pooled)
		util_bufpool_put(&dg->op_pool, op);
	else
		free(op);
}

size_t layer_dg_op_cut(struct layer_dg_op *op, uint8_t *dst, size_t room, uint8_t *flags)
{
	size_t used = 0, n;
	struct iovec *iov;

	if (!op->is_started) {
		memcpy(dst, &op->msg, sizeof(op->msg));
		used = sizeof(op->msg);
		op->is_started = true;
		*flags |= LAYER_DG_FIRST;
	}
	while (op->left && used < room) {
		iov = &op->iov[op->iov_idx];
		n = UTIL_MIN(iov->iov_len, room - used);
		memcpy(dst + used, iov->iov_base, n);
		used += n;
		op->left -= n;
		iov->iov_base = (uint8_t *) iov->iov_base + n;
		iov->iov_len -= n;
		if (!iov->iov_len)
			op->iov_idx++;
	}
	if (!op->left)
		*flags |= LAYER_DG_LAST;
	return used;
}

/* Answers a read request: the data of a registration that grants the range, or why not. */
static void layer_dg_serve_read(struct layer_dgram *dg, struct layer_dg_peer *peer,
				const struct layer_dg_rreq *rreq)
{
	struct iovec iov[LAYER_IOV_LIMIT + 2];
	struct util_mr_map_entry *entry = NULL;
	size_t cnt = UTIL_ARRAY_SIZE(iov);
	struct layer_dg_op *op;
	int ret;

	ret = layer_mr_rndv_lookup(dg->core->domain, rreq->key, rreq->addr, rreq->len, iov, &cnt,
				   &entry);
	if (ret) {
		LAYER_WARN_ONCE(FI_LOG_EP_DATA, "refusing a peer's read of %zu bytes: %s\n",
			(size_t) rreq->len, fi_strerror(-ret));
		cnt = 0;
	}
	op = layer_dg_op_new(dg, LAYER_DG_RDATA, iov, cnt, false, NULL);
	if (!op) {
		if (entry)
			layer_mr_rndv_release(dg->core->domain, entry);
		/* the reader gets nothing for it and times out: no memory here either way */
		layer_dg_peer_reset(dg, peer, FI_ENOMEM);
		return;
	}
	op->entry = entry;
	op->msg.err = ret ? (uint32_t) -ret : 0;
	util_dlist_insert_tail(&op->link, &peer->txq);
	layer_dg_rel_push(dg, peer);
}

/* The end of a message: it goes where it belongs. */
static void layer_dg_msg_done(struct layer_dgram *dg, struct layer_dg_peer *peer)
{
	struct layer_dg_rx_msg cur = peer->cur;
	struct layer_dg_rreq rreq;

	/* the buffer goes up: a reset of the peer later must not give it back again */
	peer->cur.kind = 0;
	peer->cur.buf = NULL;
	switch (cur.kind) {
	case LAYER_DG_MSG:
		if (cur.buf)
			dg->up->recv(dg->up_arg, cur.buf, cur.len, peer->core_addr);
		break;
	case LAYER_DG_RREQ:
		memcpy(&rreq, cur.rreq, sizeof(rreq));
		layer_dg_serve_read(dg, peer, &rreq);
		break;
	case LAYER_DG_RDATA:
		if (cur.read) {
			util_dlist_remove(&cur.read->link);
			dg->up->done(dg->up_arg, cur.read->ctx, cur.err);
			free(cur.read);
		}
		break;
	default:
		break;
	}
}

static void layer_dg_malformed(struct layer_dgram *dg, const char *why)
{
	LAYER_WARN_ONCE(FI_LOG_EP_DATA, "datagram transport: dropping %s\n", why);
	dg->core->dropped_cnt++;
}

/* A message broken on the wire ends: nothing of it goes up but a read's failure. */
static void layer_dg_msg_abort(struct layer_dgram *dg, struct layer_dg_peer *peer,
			       const char *why)
{
	struct layer_dg_rx_msg *cur = &peer->cur;

	layer_dg_malformed(dg, why);
	if (cur->buf)
		layer_core_repost(dg->core, cur->buf);
	cur->buf = NULL;
	cur->err = FI_EIO;
	if (cur->kind == LAYER_DG_RREQ)
		cur->kind = LAYER_DG_PING;
	layer_dg_msg_done(dg, peer);
}

/* A message starts: where its bytes go. false: no buffer above yet. */
static bool layer_dg_msg_start(struct layer_dgram *dg, struct layer_dg_peer *peer,
			       const struct layer_dg_msg *msg)
{
	struct layer_dg_rx_msg *cur = &peer->cur;

	*cur = (struct layer_dg_rx_msg) { .kind = msg->kind, .len = msg->len };
	switch (msg->kind) {
	case LAYER_DG_MSG:
		if (msg->len > dg->core->buf_size) {
			layer_dg_malformed(dg, "a message larger than a receive buffer");
			break;
		}
		cur->buf = dg->up->buf(dg->up_arg);
		if (!cur->buf) {
			cur->kind = 0;
			return false;
		}
		break;
	case LAYER_DG_RREQ:
		if (msg->len != sizeof(struct layer_dg_rreq)) {
			layer_dg_malformed(dg, "a malformed read request");
			cur->len = 0;
		}
		break;
	case LAYER_DG_RDATA:
		cur->err = (int) msg->err;
		if (util_dlist_empty(&peer->reads)) {
			layer_dg_malformed(dg, "a read answer for no read");
			break;
		}
		cur->read = container_of(peer->reads.next, struct layer_dg_read, link);
		if (!cur->err && msg->len != cur->read->len) {
			layer_dg_malformed(dg, "a read answer of the wrong length");
			cur->err = FI_EIO;
		}
		break;
	case LAYER_DG_PING:
		break;
	default:
		layer_dg_malformed(dg, "a message of an unknown kind");
		break;
	}
	return true;
}

bool layer_dg_stream_take(struct layer_dgram *dg, struct layer_dg_peer *peer,
			  const struct layer_dg_pkt *pkt)
{
	const struct layer_dg_hdr *hdr = (const struct layer_dg_hdr *) pkt->data;
	struct layer_dg_rx_msg *cur = &peer->cur;
	const uint8_t *data;
	size_t n, off, take;

	off = sizeof(*hdr) + (hdr->flags & LAYER_DG_SYN ? dg->core->addrlen : 0);
	data = pkt->data + off;
	n = pkt->len - off;
	if (hdr->flags & LAYER_DG_FIRST) {
		if (cur->kind)
			layer_dg_msg_abort(dg, peer, "a message cut short");
		if (n < sizeof(struct layer_dg_msg)) {
			layer_dg_malformed(dg, "a runt packet");
			return true;
		}
		if (!layer_dg_msg_start(dg, peer, (const struct layer_dg_msg *) data))
			return false;
		data += sizeof(struct layer_dg_msg);
		n -= sizeof(struct layer_dg_msg);
	} else if (!cur->kind) {
		layer_dg_malformed(dg, "a packet of no message");
		return true;
	}
	take = UTIL_MIN(n, cur->len - cur->got);
	if (take) {
		if (cur->buf)
			memcpy(cur->buf->data + cur->got, data, take);
		else if (cur->kind == LAYER_DG_RREQ)
			memcpy(cur->rreq + cur->got, data, take);
		else if (cur->read && !cur->err)
			memcpy(cur->read->buf + cur->got, data, take);
	}
	cur->got += take;
	if (!(hdr->flags & LAYER_DG_LAST))
		return true;
	if (cur->got != cur->len || take != n)
		layer_dg_msg_abort(dg, peer, "a message of the wrong length");
	else
		layer_dg_msg_done(dg, peer);
	return true;
}

void layer_dg_stream_reset(struct layer_dgram *dg, struct layer_dg_peer *peer, int err)
{
	struct layer_dg_read *read;
	struct util_dlist *item;

	if (peer->cur.buf)
		layer_core_repost(dg->core, peer->cur.buf);
	peer->cur = (struct layer_dg_rx_msg) { 0 };
	while ((item = util_dlist_pop_front(&peer->reads))) {
		read = container_of(item, struct layer_dg_read, link);
		dg->up->done(dg->up_arg, read->ctx, err);
		free(read);
	}
}
