/*
 * The transmit and receive paths' state (proto.h): set up and torn down with the endpoint,
 * their progress, and the upcalls through which the connection layer reaches them.
 */
#include "config.h"

#include <string.h>

#include "layer/cma/cma.h"
#include "layer/coll/coll.h"
#include "layer/proto/proto.h"
#include "layer/proto/rndv.h"
#include "layer/proto/rx.h"
#include "layer/proto/tx.h"

int layer_proto_init(struct layer_proto *proto, struct layer_domain *domain,
		     struct layer_conns *conns, struct layer_core *core, size_t tx_size,
		     size_t rx_size)
{
	int ret;

	memset(proto, 0, sizeof(*proto));
	proto->domain = domain;
	proto->conns = conns;
	proto->core = core;
	proto->tx_size = tx_size;
	proto->rx_size = rx_size;
	proto->min_multi_recv = 64;
	util_dlist_init(&proto->pending);
	ret = layer_tx_init(proto);
	if (ret)
		return ret;
	ret = layer_rx_init(proto);
	if (ret)
		goto err_fini_tx;
	ret = layer_unexp_init(&proto->unexp);
	if (ret)
		goto err_fini_rx;
	return 0;

err_fini_rx:
	layer_rx_fini(proto);
err_fini_tx:
	layer_tx_fini(proto);
	return ret;
}

void layer_proto_fini(struct layer_proto *proto)
{
	layer_rx_fini(proto);
	layer_unexp_fini(&proto->unexp);
	layer_tx_fini(proto);
}

/* Whether rx still has reads to post (the core refused some). */
static inline bool layer_proto_read_blocked(const struct layer_rx *rx)
{
	return rx->read_done < rx->read_len && !rx->read_err;
}

/* Whether conn still has a send queued or a read blocked. */
static bool layer_proto_conn_waits(const struct layer_conn *conn)
{
	const struct util_dlist *item;

	if (!util_dlist_empty(&conn->queued_tx))
		return true;
	util_dlist_foreach(&conn->reading_rx, item) {
		if (layer_proto_read_blocked(container_of(item, struct layer_rx, link)))
			return true;
	}
	return false;
}

void layer_proto_progress(struct layer_proto *proto)
{
	struct util_dlist *item, *tmp, *rx_item;
	struct layer_conn *conn;
	struct layer_rx *rx;

	/*
	 * The connections that had something waiting, and only those: one that still has
	 * stays on the list. A send that fails takes its connection off the live list; a
	 * failed connection leaves this one (its reap completes what it holds).
	 */
	util_dlist_foreach_safe(&proto->pending, item, tmp) {
		conn = container_of(item, struct layer_conn, pending_link);
		layer_tx_flush(proto, conn);
		if (conn->state != LAYER_CONN_CLOSED) {
			util_dlist_foreach(&conn->reading_rx, rx_item) {
				rx = container_of(rx_item, struct layer_rx, link);
				if (layer_proto_read_blocked(rx) &&
				    !layer_rndv_issue_reads(proto, rx))
					break;
			}
			if (layer_proto_conn_waits(conn))
				continue;
		}
		util_dlist_remove(&conn->pending_link);
	}
	proto->has_pending = !util_dlist_empty(&proto->pending);
}

/* ---- the connection layer's upcalls ---- */

static inline struct layer_proto *layer_proto_of(void *arg)
{
	return arg;
}

static void layer_proto_up_ready(void *arg, struct layer_conn *conn)
{
	layer_cma_start(layer_proto_of(arg), conn);
	layer_tx_flush(layer_proto_of(arg), conn);
}

/*
 * Completes what a failed connection holds and the core will not complete any more: true
 * when nothing is left. Over a shared core endpoint, sends and reads in flight still
 * complete through the core (a send that completes on a failed connection is reported with
 * its own result, a rendezvous send with the connection's error): the connection drains,
 * and this runs again for it.
 */
static bool layer_proto_up_lost(void *arg, struct layer_conn *conn)
{
	struct layer_proto *proto = layer_proto_of(arg);
	bool has_shared_ep = proto->core->ops->has_shared_ep;
	struct util_dlist *item, *tmp;
	struct layer_rx *rx;

	layer_tx_conn_lost(proto, conn);
	util_dlist_foreach_safe(&conn->reading_rx, item, tmp) {
		rx = container_of(item, struct layer_rx, link);
		if (has_shared_ep && rx->reads_left) {
			/* No more reads; it ends when those in flight have. */
			if (!rx->read_err)
				rx->read_err = conn->fail_err;
			continue;
		}
		rx->reads_left = 0;
		layer_rndv_read_done(proto, rx, conn->fail_err);
	}
	layer_rx_conn_lost(proto, conn);
	/* the groups the peer is a member of fail (coll/) */
	if (proto->coll)
		layer_coll_peer_lost(proto->coll, conn->src_addr, conn->fail_err);
	/* A lost connection's messages may have left the bound's hold. */
	layer_unexp_check(proto);
	return util_dlist_empty(&conn->posted_tx) && util_dlist_empty(&conn->reading_rx);
}

static void layer_proto_up_discard(void *arg, struct layer_conn *conn)
{
	struct layer_proto *proto = layer_proto_of(arg);
	struct util_dlist *item;

	layer_tx_conn_discard(proto, conn);
	while ((item = util_dlist_pop_front(&conn->reading_rx)))
		layer_rx_free(proto, container_of(item, struct layer_rx, link));
	layer_rx_conn_lost(proto, conn);
}

static void layer_proto_up_named(void *arg, struct layer_conn *conn)
{
	layer_rx_conn_named(layer_proto_of(arg), conn);
}

static void layer_proto_up_probe(void *arg, struct layer_conn *conn)
{
	/* no memory: the next look tries again, the timeout holds either way */
	layer_tx_ctrl(layer_proto_of(arg), conn, LAYER_OP_PING, 0, 0);
}

static void layer_proto_up_recv(void *arg, struct layer_buf *buf)
{
	layer_rx_arrive(layer_proto_of(arg), buf);
}

static void layer_proto_up_buf_lost(void *arg, struct layer_buf *buf, int err)
{
	layer_rx_buf_lost(layer_proto_of(arg), buf, err);
}

static void layer_proto_up_done(void *arg, struct layer_ctx *ctx, int err)
{
	struct layer_proto *proto = layer_proto_of(arg);

	if (ctx->type == LAYER_CTX_SEND)
		layer_tx_done(proto, container_of(ctx, struct layer_tx, ctx), err);
	else
		layer_rndv_read_done(proto, container_of(ctx, struct layer_rx, ctx), err);
}

static int layer_proto_up_place(void *arg, struct layer_buf *buf, struct iovec *iov,
				size_t *count)
{
	return layer_rx_place(layer_proto_of(arg), buf, iov, count);
}

const struct layer_conn_upcalls layer_proto_conn_upcalls = {
	.ready = layer_proto_up_ready,
	.lost = layer_proto_up_lost,
	.discard = layer_proto_up_discard,
	.named = layer_proto_up_named,
	.probe = layer_proto_up_probe,
	.recv = layer_proto_up_recv,
	.buf_lost = layer_proto_up_buf_lost,
	.done = layer_proto_up_done,
	.place = layer_proto_up_place,
};
