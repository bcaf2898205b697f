/*
 * Connection management over a MSG core: a passive endpoint listens for peers, an outgoing
 * connection is opened on the first send to a peer, and a connection that fails or shuts
 * down fails what waits on it; the next send to that peer connects again.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "layer/ep.h"
#include "layer/av.h"

static void layer_conn_free(struct layer_conn *conn)
{
	util_dlist_remove(&conn->link);
	free(conn);
}

/* Returns the buffers posted on a connection whose core endpoint is closed to the pool. */
static void layer_conn_release_bufs(struct layer_conn *conn)
{
	struct util_dlist *item;

	while ((item = util_dlist_pop_front(&conn->posted_bufs)))
		util_bufpool_put(&conn->ep->buf_pool,
				 container_of(item, struct layer_rx_buf, link));
}

/*
 * Buffers posted on a connection: incoming ones carry the peer's messages; on outgoing ones
 * only control replies (rendezvous ACKs) arrive, and the core holds what finds no buffer.
 */
#define LAYER_CTRL_BUF_CNT 8

static int layer_conn_setup_core(struct layer_ep *ep, struct layer_conn *conn,
				 struct fi_info *info)
{
	size_t i, buf_cnt = conn->is_outgoing ? LAYER_CTRL_BUF_CNT : layer_settings.rx_buf_cnt;
	struct layer_rx_buf *buf;
	int ret;

	ret = fi_endpoint(ep->domain->core_domain, info, &conn->core_ep, conn);
	if (ret)
		return ret;
	ret = fi_ep_bind(conn->core_ep, &ep->core_eq->fid, 0);
	if (ret)
		goto err_close_core_ep;
	ret = fi_ep_bind(conn->core_ep, &ep->core_cq->fid, FI_TRANSMIT | FI_RECV);
	if (ret)
		goto err_close_core_ep;
	ret = fi_enable(conn->core_ep);
	if (ret)
		goto err_close_core_ep;

	for (i = 0; i < buf_cnt; i++) {
		buf = util_bufpool_get(&ep->buf_pool);
		if (!buf) {
			ret = -FI_ENOMEM;
			goto err_close_core_ep;
		}
		ret = layer_conn_post_buf(conn, buf);
		if (ret) {
			util_bufpool_put(&ep->buf_pool, buf);
			goto err_close_core_ep;
		}
	}
	return 0;

err_close_core_ep:
	fi_close(&conn->core_ep->fid);
	conn->core_ep = NULL;
	layer_conn_release_bufs(conn);
	return ret;
}

int layer_conn_post_buf(struct layer_conn *conn, struct layer_rx_buf *buf)
{
	ssize_t ret;

	buf->type = LAYER_CTX_RX_BUF;
	buf->conn = conn;
	ret = fi_recv(conn->core_ep, buf->data, conn->ep->buf_size, NULL, FI_ADDR_UNSPEC, buf);
	if (ret)
		return (int) ret;
	util_dlist_insert_tail(&buf->link, &conn->posted_bufs);
	return 0;
}

static struct layer_conn *layer_conn_alloc(struct layer_ep *ep, bool is_outgoing)
{
	struct layer_conn *conn;

	conn = calloc(1, sizeof(*conn));
	if (!conn)
		return NULL;
	conn->ep = ep;
	conn->is_outgoing = is_outgoing;
	conn->state = LAYER_CONN_CONNECTING;
	util_dlist_init(&conn->pending_tx);
	util_dlist_init(&conn->inflight_tx);
	util_dlist_init(&conn->rndv_tx);
	util_dlist_init(&conn->posted_bufs);
	util_dlist_init(&conn->reading_rx);
	util_dlist_init(&conn->fenced_tx);
	util_dlist_insert_tail(&conn->link, &ep->conns);
	return conn;
}

int layer_conn_listen(struct layer_ep *ep)
{
	size_t addrlen = sizeof(ep->addr);
	uint8_t raw[sizeof(struct sockaddr_in6)];
	int ret;

	ret = fi_passive_ep(ep->domain->fabric->core_fabric, ep->core_info, &ep->core_pep, ep);
	if (ret)
		return ret;
	ret = fi_pep_bind(ep->core_pep, &ep->core_eq->fid, 0);
	if (ret)
		goto err_close_pep;
	ret = fi_listen(ep->core_pep);
	if (ret)
		goto err_close_pep;
	ret = fi_getname(&ep->core_pep->fid, raw, &addrlen);
	if (ret)
		goto err_close_pep;
	ret = layer_av_normalize(ep->domain->addr_format, raw, addrlen, ep->addr);
	if (ret)
		goto err_close_pep;
	ep->addrlen = ep->domain->addrlen;
	return 0;

err_close_pep:
	fi_close(&ep->core_pep->fid);
	ep->core_pep = NULL;
	return ret;
}

static int layer_conn_connect(struct layer_ep *ep, size_t index, const void *addr,
			      struct layer_conn **conn_out)
{
	struct layer_hello hello = {
		.magic = LAYER_HELLO_MAGIC,
		.version = LAYER_PROTO_VERSION,
		.addrlen = (uint8_t) ep->addrlen,
	};
	struct layer_conn *conn;
	int ret;

	conn = layer_conn_alloc(ep, true);
	if (!conn)
		return -FI_ENOMEM;
	conn->peer_index = index;
	memcpy(conn->peer_addr, addr, ep->addrlen);
	memcpy(hello.addr, ep->addr, ep->addrlen);

	ret = layer_conn_setup_core(ep, conn, ep->core_info);
	if (ret)
		goto err_free_conn;
	ret = fi_connect(conn->core_ep, addr, &hello, sizeof(hello));
	if (ret) {
		FI_WARN(&layer_prov, FI_LOG_EP_CTRL, "connect failed: %s\n", fi_strerror(-ret));
		fi_close(&conn->core_ep->fid);
		conn->core_ep = NULL;
		layer_conn_release_bufs(conn);
		goto err_free_conn;
	}
	*conn_out = conn;
	return 0;

err_free_conn:
	layer_conn_free(conn);
	return ret;
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

int layer_conn_get(struct layer_ep *ep, size_t index, const void *addr,
		   struct layer_conn **conn)
{
	struct layer_conn *cur;
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
	ret = layer_conn_connect(ep, index, addr, &cur);
	if (ret)
		return ret;
	ep->out_conns[index] = cur;
	*conn = cur;
	return 0;
}

static void layer_conn_handle_connreq(struct layer_ep *ep, struct fi_eq_cm_entry *entry,
				      size_t len)
{
	const struct layer_hello *hello = (const struct layer_hello *) entry->data;
	struct layer_conn *conn;
	int ret;

	if (len < sizeof(*entry) + sizeof(*hello) || hello->magic != LAYER_HELLO_MAGIC ||
	    hello->version != LAYER_PROTO_VERSION || hello->addrlen != ep->addrlen) {
		FI_WARN(&layer_prov, FI_LOG_EP_CTRL, "rejecting malformed connection request\n");
		fi_reject(ep->core_pep, entry->info->handle, NULL, 0);
		goto out;
	}
	conn = layer_conn_alloc(ep, false);
	if (!conn) {
		fi_reject(ep->core_pep, entry->info->handle, NULL, 0);
		goto out;
	}
	memcpy(conn->peer_addr, hello->addr, ep->addrlen);
	ret = layer_conn_setup_core(ep, conn, entry->info);
	if (!ret)
		ret = fi_accept(conn->core_ep, NULL, 0);
	if (ret) {
		FI_WARN(&layer_prov, FI_LOG_EP_CTRL, "accept failed: %s\n", fi_strerror(-ret));
		if (conn->core_ep) {
			fi_close(&conn->core_ep->fid);
			conn->core_ep = NULL;
		} else {
			fi_reject(ep->core_pep, entry->info->handle, NULL, 0);
		}
		layer_conn_free(conn);
	}
out:
	fi_freeinfo(entry->info);
}

void layer_conn_fail(struct layer_conn *conn, int err)
{
	struct layer_ep *ep = conn->ep;

	if (conn->state == LAYER_CONN_CLOSED)
		return;
	FI_INFO(&layer_prov, FI_LOG_EP_CTRL, "closing connection: %s\n", fi_strerror(err));
	conn->state = LAYER_CONN_CLOSED;
	conn->fail_err = err;
	if (conn->is_outgoing && conn->peer_index < ep->out_conns_cnt &&
	    ep->out_conns[conn->peer_index] == conn)
		ep->out_conns[conn->peer_index] = NULL;
	/*
	 * Closing the core endpoint makes the core flush or drop what it holds. Flushed
	 * completions may already sit in the core CQ: layer_conn_reap drains it before it
	 * completes the rest, so everything completes exactly once.
	 */
	if (conn->core_ep) {
		fi_close(&conn->core_ep->fid);
		conn->core_ep = NULL;
	}
	util_dlist_remove(&conn->link);
	util_dlist_insert_tail(&conn->link, &ep->closed_conns);
}

static void layer_conn_fail_list(struct layer_ep *ep, struct util_dlist *list, int err)
{
	struct util_dlist *item;

	while ((item = util_dlist_pop_front(list)))
		layer_proto_complete_tx(ep, container_of(item, struct layer_tx, link), err);
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
			util_bufpool_put(&ep->buf_pool, buf);
		} else {
			buf->conn = NULL;
		}
	}
}

void layer_conn_reap(struct layer_ep *ep)
{
	struct util_dlist *item;
	struct layer_conn *conn;
	struct layer_rx *rx;

	while ((item = util_dlist_pop_front(&ep->closed_conns))) {
		conn = container_of(item, struct layer_conn, link);
		layer_conn_fail_list(ep, &conn->fenced_tx, conn->fail_err);
		layer_conn_fail_list(ep, &conn->pending_tx, conn->fail_err);
		layer_conn_fail_list(ep, &conn->inflight_tx, conn->fail_err);
		layer_conn_fail_list(ep, &conn->rndv_tx, conn->fail_err);
		while ((item = util_dlist_pop_front(&conn->reading_rx))) {
			rx = container_of(item, struct layer_rx, link);
			rx->reads_left = 0;
			layer_rndv_read_done(ep, rx, conn->fail_err);
		}
		layer_conn_release_bufs(conn);
		layer_conn_orphan_unexpected(ep, conn);
		layer_tagged_orphan(ep, conn);
		free(conn);
	}
}

static void layer_conn_handle_error(struct layer_ep *ep)
{
	struct fi_eq_err_entry err = { 0 };
	struct layer_conn *conn;

	if (fi_eq_readerr(ep->core_eq, &err, 0) != sizeof(err))
		return;
	if (!err.fid || err.fid == &ep->core_pep->fid) {
		FI_WARN(&layer_prov, FI_LOG_EP_CTRL, "listener error: %s\n",
			fi_strerror(err.err));
		return;
	}
	conn = err.fid->context;
	FI_WARN(&layer_prov, FI_LOG_EP_CTRL, "connection failed: %s\n", fi_strerror(err.err));
	layer_conn_fail(conn, err.err ? err.err : FI_ECONNABORTED);

}

void layer_conn_progress_events(struct layer_ep *ep)
{
	struct {
		struct fi_eq_cm_entry entry;
		uint8_t data[256];
	} ev;
	struct layer_conn *conn;
	uint32_t event;
	ssize_t ret;

	for (;;) {
		ret = fi_eq_read(ep->core_eq, &event, &ev, sizeof(ev), 0);
		if (ret == -FI_EAVAIL) {
			layer_conn_handle_error(ep);
			continue;
		}
		if (ret < 0)
			return;
		switch (event) {
		case FI_CONNREQ:
			layer_conn_handle_connreq(ep, &ev.entry, (size_t) ret);
			break;
		case FI_CONNECTED:
			conn = ev.entry.fid->context;
			if (conn->state != LAYER_CONN_CONNECTING)
				break;
			conn->state = LAYER_CONN_CONNECTED;
			layer_proto_flush_pending(conn);
			break;
		case FI_SHUTDOWN:
			conn = ev.entry.fid->context;
			layer_conn_fail(conn, FI_ECONNRESET);
			break;
		default:
			FI_WARN(&layer_prov, FI_LOG_EP_CTRL, "unexpected core event %u\n", event);
			break;
		}
	}
}

void layer_conn_close_all(struct layer_ep *ep)
{
	struct util_dlist *item;
	struct layer_conn *conn;

	while ((item = util_dlist_pop_front(&ep->conns))) {
		conn = container_of(item, struct layer_conn, link);
		if (conn->core_ep) {
			fi_close(&conn->core_ep->fid);
			conn->core_ep = NULL;
		}
		/* Closing an endpoint discards its outstanding operations: no completions. */
		util_dlist_insert_tail(&conn->link, &ep->closed_conns);
		conn->state = LAYER_CONN_CLOSED;
	}
	while ((item = util_dlist_pop_front(&ep->closed_conns))) {
		conn = container_of(item, struct layer_conn, link);
		while ((item = util_dlist_pop_front(&conn->fenced_tx)))
			layer_proto_free_tx(ep, container_of(item, struct layer_tx, link));
		while ((item = util_dlist_pop_front(&conn->pending_tx)))
			layer_proto_free_tx(ep, container_of(item, struct layer_tx, link));
		while ((item = util_dlist_pop_front(&conn->inflight_tx)))
			layer_proto_free_tx(ep, container_of(item, struct layer_tx, link));
		while ((item = util_dlist_pop_front(&conn->rndv_tx)))
			layer_proto_free_tx(ep, container_of(item, struct layer_tx, link));
		layer_conn_release_bufs(conn);
		free(conn);
	}
	free(ep->out_conns);
	ep->out_conns = NULL;
	ep->out_conns_cnt = 0;
}
