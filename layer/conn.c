/*
 * Connections, whatever the core kind: the outgoing connection of each AV index, opened on
 * the first send by the core kind's connect; failure, which completes everything a connection
 * holds with errors exactly once (the next send to that peer connects again); and the
 * connections' end with the endpoint. The core side is in conn_msg.c (connected cores) and
 * conn_rdm.c (reliable-datagram cores).
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "layer/ep.h"
#include "layer/av.h"

struct layer_conn *layer_conn_alloc(struct layer_ep *ep, bool is_outgoing)
{
	struct layer_conn *conn;

	conn = calloc(1, sizeof(*conn));
	if (!conn)
		return NULL;
	conn->ep = ep;
	conn->core_addr = FI_ADDR_UNSPEC;
	conn->key = FI_ADDR_NOTAVAIL;
	conn->is_outgoing = is_outgoing;
	conn->is_tx = is_outgoing;
	/* Until the peer's handshake says what its buffers take, nothing above the inject size
	 * goes eager: a peer with smaller buffers would fail the message and the connection. */
	conn->tx_eager = 0;
	conn->state = LAYER_CONN_CONNECTING;
	util_dlist_init(&conn->peer_link);
	util_dlist_init(&conn->pending_tx);
	util_dlist_init(&conn->inflight_tx);
	util_dlist_init(&conn->rndv_tx);
	util_dlist_init(&conn->posted_bufs);
	util_dlist_init(&conn->reading_rx);
	util_dlist_init(&conn->fenced_tx);
	util_dlist_insert_tail(&conn->link, &ep->conns);
	return conn;
}

static int layer_conn_grow_out(struct layer_ep *ep, size_t index)
{
	struct layer_conn **conns;
	size_t cnt = UTIL_MAX(ep->out_conns_cnt * 2, 64);

	while (cnt <= index)
		cnt *= 2;
	conns = realloc(ep->out_conns, cnt * sizeof(*conns));
	if (!conns)
		return -FI_ENOMEM;
	memset(conns + ep->out_conns_cnt, 0, (cnt - ep->out_conns_cnt) * sizeof(*conns));
	ep->out_conns = conns;
	ep->out_conns_cnt = cnt;
	return 0;
}

size_t layer_conn_peer_eager(uint64_t bytes)
{
	return bytes ? (size_t) UTIL_MIN(bytes, (uint64_t) LAYER_EAGER_MAX) :
		       layer_settings.eager_size;
}

int layer_conn_get(struct layer_ep *ep, size_t index, const void *addr,
		   struct layer_conn **conn)
{
	struct layer_key key;
	struct layer_conn *cur;
	fi_addr_t key_handle;
	int ret;

	if (unlikely(index >= ep->out_conns_cnt)) {
		ret = layer_conn_grow_out(ep, index);
		if (ret)
			return ret;
	}
	cur = ep->out_conns[index];
	/* The AV slot may have been reused for another address since. */
	if (likely(cur && !memcmp(cur->peer_addr, addr, ep->addrlen))) {
		*conn = cur;
		return 0;
	}
	if (cur) {
		layer_conn_fail(cur, FI_EADDRNOTAVAIL);
		ep->out_conns[index] = NULL;
	}
	/* The key a connection's messages carry is chosen once, here (auth.c). */
	ret = layer_auth_tx_key(ep, index, &key, &key_handle);
	if (ret)
		return ret;
	ret = ep->core->connect(ep, index, addr, &key, &cur);
	if (ret)
		return ret;
	/* what the peer sends back on it (an adopted connection) is of the same key */
	cur->key = key_handle;
	ep->out_conns[index] = cur;
	*conn = cur;
	return 0;
}

void layer_conn_adopt(struct layer_ep *ep, struct layer_conn *conn)
{
	fi_addr_t fi_addr;
	size_t index;

	if (!ep->av)
		return;
	/*
	 * The entry our sends to the peer would use the connection's key with (auth.c): the
	 * address inserted with that key when keys come from the AV, else the plain address.
	 */
	fi_addr = conn->key == FI_ADDR_NOTAVAIL ?
		  layer_av_find(ep->av, conn->peer_addr, ep->addrlen) :
		  layer_av_find_key(ep->av, conn->peer_addr, ep->addrlen, conn->key);
	if (fi_addr == FI_ADDR_NOTAVAIL || layer_av_resolve(ep->av, fi_addr, NULL, &index))
		return;
	if (index >= ep->out_conns_cnt && layer_conn_grow_out(ep, index))
		return;
	if (ep->out_conns[index])
		return;
	ep->out_conns[index] = conn;
	conn->peer_index = index;
	conn->is_tx = true;
}

void layer_conn_carries_data(struct layer_ep *ep, struct layer_conn *conn)
{
	struct layer_rx_buf *buf;

	conn->is_ctrl_only = false;
	/* the core refuses buffers past the connection's new target */
	while ((buf = util_bufpool_get(&ep->buf_pool))) {
		if (layer_core_post_buf(ep, conn, buf)) {
			util_bufpool_put(&ep->buf_pool, buf);
			return;
		}
	}
}

void layer_conn_connected(struct layer_conn *conn)
{
	if (conn->state != LAYER_CONN_CONNECTING)
		return;
	conn->state = LAYER_CONN_CONNECTED;
	layer_proto_flush_pending(conn);
}

void layer_conn_fail(struct layer_conn *conn, int err)
{
	struct layer_ep *ep = conn->ep;

	if (conn->state == LAYER_CONN_CLOSED)
		return;
	FI_INFO(&layer_prov, FI_LOG_EP_CTRL, "closing connection: %s\n", fi_strerror(err));
	conn->state = LAYER_CONN_CLOSED;
	conn->fail_err = err;
	if (conn->is_tx && conn->peer_index < ep->out_conns_cnt &&
	    ep->out_conns[conn->peer_index] == conn)
		ep->out_conns[conn->peer_index] = NULL;
	/*
	 * MSG: closing the core endpoint makes the core flush or drop what it holds. Flushed
	 * completions may already sit in the core CQ: progress drains it before layer_conn_reap
	 * completes the rest, so everything completes exactly once.
	 */
	ep->core->conn_closing(conn);
	util_dlist_remove(&conn->link);
	util_dlist_insert_tail(&conn->link, &ep->closed_conns);
}

static void layer_conn_fail_list(struct layer_ep *ep, struct util_dlist *list, int err)
{
	struct util_dlist *item;

	while ((item = util_dlist_pop_front(list)))
		layer_proto_complete_tx(ep, container_of(item, struct layer_tx, link), err);
}

/* Returns the buffers posted on a connection whose core endpoint is closed to the pool. */
static void layer_conn_release_bufs(struct layer_conn *conn)
{
	struct util_dlist *item;

	while ((item = util_dlist_pop_front(&conn->posted_bufs)))
		layer_proto_buf_lost(conn->ep, container_of(item, struct layer_rx_buf, link),
				     conn->fail_err ? conn->fail_err : FI_EIO);
	conn->posted_cnt = 0;
}

/*
 * Unexpected messages outlive their connection: an eager one arrived whole and can still be
 * received; a rendezvous request cannot be pulled any more (its sender has already failed
 * it), so it is dropped.
 */
static void layer_conn_orphan_unexpected(struct layer_ep *ep, struct layer_conn *conn)
{
	struct util_dlist *item, *tmp;
	struct layer_rx_buf *buf;

	util_dlist_foreach_safe(&ep->unexp_msgs, item, tmp) {
		buf = container_of(item, struct layer_rx_buf, link);
		if (buf->conn != conn)
			continue;
		if (((const struct layer_hdr *) buf->data)->op == LAYER_OP_RTS) {
			FI_INFO(&layer_prov, FI_LOG_EP_DATA,
				"dropping unexpected rendezvous message of a lost connection\n");
			util_dlist_remove(&buf->link);
			layer_unexp_put(ep, buf);
		} else {
			buf->conn = NULL;
		}
	}
}

/*
 * Completes what a closed connection holds and the core will not complete any more: true
 * when nothing is left and conn may be freed. Over a shared core endpoint, sends and reads
 * in flight still complete through the core (a send that completes on a closed connection
 * is reported with its own result, a rendezvous send with the connection's error); the
 * connection then waits on ep->draining_conns, and this runs again for it.
 */
static bool layer_conn_reap_one(struct layer_ep *ep, struct layer_conn *conn)
{
	bool has_shared_ep = ep->core->has_shared_ep;
	struct util_dlist *item, *tmp;
	struct layer_rx *rx;

	layer_conn_fail_list(ep, &conn->fenced_tx, conn->fail_err);
	layer_conn_fail_list(ep, &conn->pending_tx, conn->fail_err);
	if (!has_shared_ep)
		layer_conn_fail_list(ep, &conn->inflight_tx, conn->fail_err);
	layer_conn_fail_list(ep, &conn->rndv_tx, conn->fail_err);
	util_dlist_foreach_safe(&conn->reading_rx, item, tmp) {
		rx = container_of(item, struct layer_rx, link);
		if (has_shared_ep && rx->reads_left) {
			/* No more reads; it ends when those in flight have. */
			if (!rx->read_err)
				rx->read_err = conn->fail_err;
			continue;
		}
		rx->reads_left = 0;
		layer_rndv_read_done(ep, rx, conn->fail_err);
	}
	layer_conn_release_bufs(conn);
	layer_conn_orphan_unexpected(ep, conn);
	layer_tagged_orphan(ep, conn);
	return util_dlist_empty(&conn->inflight_tx) && util_dlist_empty(&conn->reading_rx);
}

void layer_conn_reap(struct layer_ep *ep)
{
	struct util_dlist *item, *tmp;
	struct layer_conn *conn;

	while ((item = util_dlist_pop_front(&ep->closed_conns))) {
		conn = container_of(item, struct layer_conn, link);
		if (layer_conn_reap_one(ep, conn))
			free(conn);
		else
			util_dlist_insert_tail(&conn->link, &ep->draining_conns);
	}
	util_dlist_foreach_safe(&ep->draining_conns, item, tmp) {
		conn = container_of(item, struct layer_conn, link);
		if (!layer_conn_reap_one(ep, conn))
			continue;
		util_dlist_remove(&conn->link);
		free(conn);
	}
}

/* Closing the core endpoint discards its outstanding operations: no completions. */
static void layer_conn_free_list(struct layer_ep *ep, struct util_dlist *list)
{
	struct util_dlist *item, *tx_item;
	struct layer_conn *conn;
	struct util_dlist *tx_lists[4];
	size_t i;

	while ((item = util_dlist_pop_front(list))) {
		conn = container_of(item, struct layer_conn, link);
		tx_lists[0] = &conn->fenced_tx;
		tx_lists[1] = &conn->pending_tx;
		tx_lists[2] = &conn->inflight_tx;
		tx_lists[3] = &conn->rndv_tx;
		for (i = 0; i < UTIL_ARRAY_SIZE(tx_lists); i++) {
			while ((tx_item = util_dlist_pop_front(tx_lists[i])))
				layer_proto_free_tx(ep, container_of(tx_item, struct layer_tx,
								     link));
		}
		layer_conn_release_bufs(conn);
		free(conn);
	}
}

void layer_conn_free_all(struct layer_ep *ep)
{
	layer_conn_free_list(ep, &ep->conns);
	layer_conn_free_list(ep, &ep->closed_conns);
	layer_conn_free_list(ep, &ep->draining_conns);
	free(ep->out_conns);
	ep->out_conns = NULL;
	ep->out_conns_cnt = 0;
}
