/*
 * The endpoint over a reliable-datagram (RDM) core: one core endpoint and one core AV per
 * endpoint, bounce buffers posted on that endpoint from a shared pool, and connections that
 * are peers' addresses in the core AV.
 *
 * Knowing where a message came from takes the core's FI_SOURCE, and a core names a source
 * only when its own AV holds that address (net and sockets report FI_ADDR_NOTAVAIL
 * otherwise, shm a wrong index). So the first message from one endpoint to another is a
 * HELLO carrying the sender's address: the receiver inserts it into its core AV and answers
 * HELLO_ACK; the sender's connection is connected once it hears anything from the peer (an
 * answer, or a HELLO of the peer's: either way the peer's core AV holds the sender), and
 * keeps what the application sends until then. Every message after that carries a core
 * source the receiver knows, which maps it to the peer and its incoming connection; replies
 * go to the peer's core address.
 *
 * The core reports errors per operation, never per connection: an operation fails alone,
 * unless the error says the peer is gone (or its HELLO could not be sent), which fails every
 * connection with that peer; the next send to it says HELLO again.
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <uthash.h>

#include "layer/ep.h"
#include "layer/av.h"

/* Bounce buffers kept posted on the core endpoint: rx_buf_cnt for each of a few peers. */
#define LAYER_RDM_BUF_FACTOR 4
/* Core fi_addr values past this are not table indices: the core ignored FI_AV_TABLE. */
#define LAYER_RDM_MAX_PEERS (1u << 24)

/* One address the endpoint exchanges messages with. */
struct layer_rdm_peer {
	UT_hash_handle hh;             /* ep->rdm.by_addr */
	fi_addr_t core_addr;           /* in ep->rdm.core_av */
	bool knows_us;                 /* its core AV holds our address: it may be sent to */
	bool is_hello_sent;            /* a HELLO is on its way or answered */
	bool is_failing;               /* its connections are being failed */
	struct layer_conn *in_conn;    /* where its messages arrive; NULL until one does */
	struct util_dlist out_conns;   /* struct layer_conn by peer_link: sends to it */
	uint8_t addr[LAYER_ADDR_MAX];  /* normalised, ep->addrlen bytes (the hash key) */
};

static int layer_rdm_post_buf(struct layer_ep *ep, struct layer_conn *conn,
			      struct layer_rx_buf *buf)
{
	struct layer_rdm *rdm = &ep->rdm;
	ssize_t ret;

	(void) conn;
	/* A buffer given back after a match goes to the pool when enough are posted. */
	if (!rdm->core_ep || rdm->posted_cnt >= rdm->buf_target)
		return -FI_EAGAIN;
	buf->type = LAYER_CTX_RX_BUF;
	buf->conn = NULL;
	ret = fi_recv(rdm->core_ep, buf->data, ep->buf_size, NULL, FI_ADDR_UNSPEC, buf);
	if (ret)
		return (int) ret;
	util_dlist_insert_tail(&buf->link, &rdm->posted_bufs);
	rdm->posted_cnt++;
	return 0;
}

static struct layer_rdm_peer *layer_rdm_peer_find(struct layer_ep *ep, const void *addr)
{
	struct layer_rdm_peer *peer;

	HASH_FIND(hh, ep->rdm.by_addr, addr, ep->addrlen, peer);
	return peer;
}

static struct layer_rdm_peer *layer_rdm_peer_by_src(struct layer_ep *ep, fi_addr_t src)
{
	return src < ep->rdm.by_core_addr_cnt ? ep->rdm.by_core_addr[src] : NULL;
}

/* The peer of a (normalised) address, inserted into the core AV on first use. */
static int layer_rdm_peer_get(struct layer_ep *ep, const void *addr,
			      struct layer_rdm_peer **peer_out)
{
	struct layer_rdm *rdm = &ep->rdm;
	struct layer_rdm_peer *peer, **table;
	fi_addr_t core_addr = FI_ADDR_NOTAVAIL;
	size_t cnt;
	int ret;

	peer = layer_rdm_peer_find(ep, addr);
	if (peer) {
		*peer_out = peer;
		return 0;
	}
	ret = fi_av_insert(rdm->core_av, addr, 1, &core_addr, 0, NULL);
	if (ret != 1) {
		FI_WARN(&layer_prov, FI_LOG_EP_CTRL, "core av insert failed: %s\n",
			fi_strerror(ret < 0 ? -ret : FI_EADDRNOTAVAIL));
		return ret < 0 ? ret : -FI_EADDRNOTAVAIL;
	}
	if (core_addr >= LAYER_RDM_MAX_PEERS) {
		FI_WARN(&layer_prov, FI_LOG_EP_CTRL, "core fi_addr %#lx is not a table index\n",
			(unsigned long) core_addr);
		ret = -FI_EOPNOTSUPP;
		goto err_remove;
	}
	if (core_addr >= rdm->by_core_addr_cnt) {
		cnt = UTIL_MAX(rdm->by_core_addr_cnt * 2, 64);
		while (cnt <= core_addr)
			cnt *= 2;
		table = realloc(rdm->by_core_addr, cnt * sizeof(*table));
		if (!table) {
			ret = -FI_ENOMEM;
			goto err_remove;
		}
		memset(table + rdm->by_core_addr_cnt, 0,
		       (cnt - rdm->by_core_addr_cnt) * sizeof(*table));
		rdm->by_core_addr = table;
		rdm->by_core_addr_cnt = cnt;
	}
	peer = calloc(1, sizeof(*peer));
	if (!peer) {
		ret = -FI_ENOMEM;
		goto err_remove;
	}
	peer->core_addr = core_addr;
	util_dlist_init(&peer->out_conns);
	memcpy(peer->addr, addr, ep->addrlen);
	HASH_ADD(hh, rdm->by_addr, addr, ep->addrlen, peer);
	rdm->by_core_addr[core_addr] = peer;
	*peer_out = peer;
	return 0;

err_remove:
	fi_av_remove(rdm->core_av, &core_addr, 1, 0);
	return ret;
}

/* A connection to peer on the endpoint's core endpoint (in the CONNECTING state). */
static struct layer_conn *layer_rdm_conn_alloc(struct layer_ep *ep, struct layer_rdm_peer *peer,
					       bool is_outgoing)
{
	struct layer_conn *conn;

	conn = layer_conn_alloc(ep, is_outgoing);
	if (!conn)
		return NULL;
	conn->core_ep = ep->rdm.core_ep;
	conn->core_addr = peer->core_addr;
	conn->rdm_peer = peer;
	memcpy(conn->peer_addr, peer->addr, ep->addrlen);
	return conn;
}

/* The connection the peer's messages arrive on (and replies to them leave by). */
static struct layer_conn *layer_rdm_in_conn(struct layer_ep *ep, struct layer_rdm_peer *peer)
{
	struct layer_conn *conn = peer->in_conn;

	if (conn)
		return conn;
	conn = layer_rdm_conn_alloc(ep, peer, false);
	if (!conn)
		return NULL;
	/* The peer sent to us, so its core AV holds our address: replies reach it named. */
	conn->state = LAYER_CONN_CONNECTED;
	peer->in_conn = conn;
	return conn;
}

static int layer_rdm_send_hello(struct layer_ep *ep, struct layer_conn *conn)
{
	int ret;

	ret = layer_proto_send_ctrl_data(ep, conn, LAYER_OP_HELLO, 0, ep->addr, ep->addrlen);
	if (!ret)
		conn->rdm_peer->is_hello_sent = true;
	return ret;
}

/* The peer's core AV holds our address: what waited for that may go. */
static void layer_rdm_peer_knows_us(struct layer_rdm_peer *peer)
{
	struct util_dlist *item, *tmp;

	if (peer->knows_us)
		return;
	peer->knows_us = true;
	util_dlist_foreach_safe(&peer->out_conns, item, tmp)
		layer_conn_connected(container_of(item, struct layer_conn, peer_link));
}

static void layer_rdm_peer_fail(struct layer_rdm_peer *peer, int err)
{
	struct util_dlist *item;

	FI_INFO(&layer_prov, FI_LOG_EP_CTRL, "peer lost: %s\n", fi_strerror(err));
	/* It may come back as a new process that has never heard of us. */
	peer->knows_us = false;
	peer->is_hello_sent = false;
	peer->is_failing = true;
	if (peer->in_conn)
		layer_conn_fail(peer->in_conn, err);
	while ((item = peer->out_conns.next) != &peer->out_conns)
		layer_conn_fail(container_of(item, struct layer_conn, peer_link), err);
	peer->is_failing = false;
}

static int layer_rdm_connect(struct layer_ep *ep, size_t index, const void *addr,
			     struct layer_conn **conn_out)
{
	struct layer_rdm_peer *peer;
	struct layer_conn *conn;
	int ret;

	ret = layer_rdm_peer_get(ep, addr, &peer);
	if (ret)
		return ret;
	conn = layer_rdm_conn_alloc(ep, peer, true);
	if (!conn)
		return -FI_ENOMEM;
	conn->peer_index = index;
	util_dlist_insert_tail(&conn->peer_link, &peer->out_conns);
	if (peer->knows_us) {
		conn->state = LAYER_CONN_CONNECTED;
	} else if (!peer->is_hello_sent) {
		ret = layer_rdm_send_hello(ep, conn);
		if (ret) {
			util_dlist_remove(&conn->peer_link);
			util_dlist_remove(&conn->link);
			free(conn);
			return ret;
		}
	}
	*conn_out = conn;
	return 0;
}

static void layer_rdm_conn_closing(struct layer_conn *conn)
{
	struct layer_rdm_peer *peer = conn->rdm_peer;
	struct layer_conn *next;

	if (!peer)
		return;
	conn->rdm_peer = NULL;
	if (peer->in_conn == conn)
		peer->in_conn = NULL;
	util_dlist_remove(&conn->peer_link);
	/*
	 * Its HELLO may go down with it (a removed AV entry): another connection still waiting
	 * for the peer says it again; a second answer does no harm.
	 */
	if (peer->knows_us || peer->is_failing || !conn->is_outgoing)
		return;
	peer->is_hello_sent = false;
	if (util_dlist_empty(&peer->out_conns))
		return;
	next = container_of(peer->out_conns.next, struct layer_conn, peer_link);
	if (layer_rdm_send_hello(conn->ep, next))
		layer_conn_fail(next, FI_ENOMEM);
}

/* Errors that say the peer itself is unreachable or gone, not just this operation. */
static bool layer_rdm_err_is_peer_lost(int err)
{
	switch (err) {
	case FI_ECONNREFUSED:
	case FI_ECONNRESET:
	case FI_ECONNABORTED:
	case FI_ENOTCONN:
	case FI_ESHUTDOWN:
	case FI_ETIMEDOUT:
	case FI_EHOSTDOWN:
	case FI_EHOSTUNREACH:
	case FI_ENETDOWN:
	case FI_ENETUNREACH:
	case EPIPE:
		return true;
	default:
		return false;
	}
}

static void layer_rdm_op_failed(struct layer_conn *conn, const struct layer_tx *tx, int err)
{
	struct layer_rdm_peer *peer = conn->rdm_peer;

	if (!peer || peer->is_failing)
		return;
	/* Without its HELLO the peer can never name us: nothing queued for it would go. */
	if (layer_rdm_err_is_peer_lost(err) || (tx && tx->hdr.op == LAYER_OP_HELLO))
		layer_rdm_peer_fail(peer, err);
}

/* ACKs come from the peer (on its incoming connection here) for one of our sends to it. */
static void layer_rdm_handle_ack(struct layer_conn *conn, const struct layer_hdr *hdr)
{
	struct layer_rdm_peer *peer = conn->rdm_peer;
	struct util_dlist *item;

	if (peer) {
		util_dlist_foreach(&peer->out_conns, item) {
			if (layer_rndv_take_ack(container_of(item, struct layer_conn, peer_link),
						hdr))
				return;
		}
	}
	FI_WARN(&layer_prov, FI_LOG_EP_DATA, "dropping ack for unknown message %lu\n",
		(unsigned long) hdr->msg_id);
	conn->ep->dropped_cnt++;
}

static void layer_rdm_drop(struct layer_ep *ep, struct layer_rx_buf *buf, const char *why)
{
	FI_WARN(&layer_prov, FI_LOG_EP_DATA, "dropping message (%zu bytes): %s\n", buf->len,
		why);
	ep->dropped_cnt++;
	layer_proto_repost_buf(ep, buf);
}

/* A HELLO: its sender is named by the address it carries, whatever the core's source says. */
static void layer_rdm_handle_hello(struct layer_ep *ep, struct layer_rx_buf *buf)
{
	const struct layer_hdr *hdr = (const struct layer_hdr *) buf->data;
	uint8_t addr[LAYER_ADDR_MAX];
	struct layer_rdm_peer *peer;
	struct layer_conn *conn;

	if (buf->len != sizeof(*hdr) + ep->addrlen || hdr->size != ep->addrlen || hdr->flags ||
	    layer_av_normalize(ep->domain->addr_format, hdr + 1, ep->addrlen, addr)) {
		layer_rdm_drop(ep, buf, "malformed hello");
		return;
	}
	if (layer_rdm_peer_get(ep, addr, &peer)) {
		layer_rdm_drop(ep, buf, "hello from an address the core refuses");
		return;
	}
	layer_rdm_peer_knows_us(peer);
	conn = layer_rdm_in_conn(ep, peer);
	if (!conn || layer_proto_send_ctrl_data(ep, conn, LAYER_OP_HELLO_ACK, 0, NULL, 0)) {
		layer_rdm_drop(ep, buf, "no memory to answer a hello");
		return;
	}
	layer_proto_repost_buf(ep, buf);
}

static void layer_rdm_handle_buf(struct layer_ep *ep, struct layer_rx_buf *buf, size_t len,
				 fi_addr_t src)
{
	const struct layer_hdr *hdr = (const struct layer_hdr *) buf->data;
	struct layer_rdm_peer *peer;
	bool is_versioned;

	util_dlist_remove(&buf->link);
	ep->rdm.posted_cnt--;
	buf->len = len;
	is_versioned = len >= sizeof(*hdr) && hdr->version == LAYER_PROTO_VERSION;
	if (is_versioned && hdr->op == LAYER_OP_HELLO) {
		layer_rdm_handle_hello(ep, buf);
		return;
	}
	peer = layer_rdm_peer_by_src(ep, src);
	if (!peer) {
		layer_rdm_drop(ep, buf, "unknown source");
		return;
	}
	/* Whatever the peer sends, it sent to our address: it knows us. */
	layer_rdm_peer_knows_us(peer);
	if (is_versioned && hdr->op == LAYER_OP_HELLO_ACK && len == sizeof(*hdr)) {
		layer_proto_repost_buf(ep, buf);
		return;
	}
	buf->conn = layer_rdm_in_conn(ep, peer);
	if (!buf->conn) {
		layer_rdm_drop(ep, buf, "no memory for a connection");
		return;
	}
	layer_proto_handle_buf(ep, buf);
}

static void layer_rdm_handle_error(struct layer_ep *ep, const struct fi_cq_err_entry *err)
{
	struct layer_rx_buf *buf;

	if (!err->op_context)
		return;
	if (*(enum layer_ctx_type *) err->op_context != LAYER_CTX_RX_BUF) {
		layer_proto_handle_error(ep, err);
		return;
	}
	/* A receive on the shared endpoint fails alone (a truncated message, say). */
	buf = err->op_context;
	util_dlist_remove(&buf->link);
	ep->rdm.posted_cnt--;
	if (err->err == FI_ECANCELED) {
		util_bufpool_put(&ep->buf_pool, buf);
		return;
	}
	buf->len = err->len;
	layer_rdm_drop(ep, buf, fi_strerror(err->err ? err->err : FI_EIO));
}

static void layer_rdm_progress(struct layer_ep *ep)
{
	struct fi_cq_msg_entry comp[64];
	fi_addr_t src[64];
	struct fi_cq_err_entry err;
	size_t batch = UTIL_MIN(layer_settings.cq_batch, UTIL_ARRAY_SIZE(comp));
	ssize_t ret, i;

	for (;;) {
		ret = fi_cq_readfrom(ep->core_cq, comp, batch, src);
		if (ret == -FI_EAVAIL) {
			memset(&err, 0, sizeof(err));
			if (fi_cq_readerr(ep->core_cq, &err, 0) == 1)
				layer_rdm_handle_error(ep, &err);
			continue;
		}
		if (ret <= 0)
			return;
		for (i = 0; i < ret; i++) {
			if (*(enum layer_ctx_type *) comp[i].op_context == LAYER_CTX_RX_BUF)
				layer_rdm_handle_buf(ep, comp[i].op_context, comp[i].len, src[i]);
			else
				layer_proto_handle_comp(ep, &comp[i]);
		}
		if ((size_t) ret < batch)
			return;
	}
}

static int layer_rdm_trywait(struct layer_ep *ep)
{
	struct fid *fids[1] = { &ep->core_cq->fid };

	/* Nothing to sleep on: the core CQ has no wait fd (shm). */
	if (ep->core_cq_fd < 0)
		return -FI_EAGAIN;
	return fi_trywait(ep->domain->fabric->core_fabric, fids, 1);
}

static int layer_rdm_enable(struct layer_ep *ep)
{
	struct fi_av_attr av_attr = { .type = FI_AV_TABLE };
	struct layer_rdm *rdm = &ep->rdm;
	struct layer_domain *domain = ep->domain;
	uint8_t raw[LAYER_ADDR_MAX];
	size_t addrlen = sizeof(raw);
	struct layer_rx_buf *buf;
	int ret;

	rdm->buf_target = layer_settings.rx_buf_cnt * LAYER_RDM_BUF_FACTOR;
	/* The core must take every buffer the endpoint keeps posted. */
	if (ep->core_info->rx_attr->size < rdm->buf_target)
		ep->core_info->rx_attr->size = rdm->buf_target;
	if (ep->core_info->tx_attr->size < ep->tx_size)
		ep->core_info->tx_attr->size = ep->tx_size;

	ret = fi_av_open(domain->core_domain, &av_attr, &rdm->core_av, ep);
	if (ret)
		return ret;
	ret = fi_endpoint(domain->core_domain, ep->core_info, &rdm->core_ep, ep);
	if (ret)
		goto err_close_av;
	ret = fi_ep_bind(rdm->core_ep, &rdm->core_av->fid, 0);
	if (ret)
		goto err_close_ep;
	ret = fi_ep_bind(rdm->core_ep, &ep->core_cq->fid, FI_TRANSMIT | FI_RECV);
	if (ret)
		goto err_close_ep;
	ret = fi_enable(rdm->core_ep);
	if (ret)
		goto err_close_ep;
	ret = fi_getname(&rdm->core_ep->fid, raw, &addrlen);
	if (ret)
		goto err_close_ep;
	ret = layer_av_normalize(domain->addr_format, raw, addrlen, ep->addr);
	if (ret)
		goto err_close_ep;
	ep->addrlen = domain->addrlen;

	while (rdm->posted_cnt < rdm->buf_target) {
		buf = util_bufpool_get(&ep->buf_pool);
		if (!buf) {
			ret = -FI_ENOMEM;
			goto err_release_bufs;
		}
		ret = layer_rdm_post_buf(ep, NULL, buf);
		if (ret) {
			util_bufpool_put(&ep->buf_pool, buf);
			goto err_release_bufs;
		}
	}
	return 0;

err_release_bufs:
	FI_WARN(&layer_prov, FI_LOG_EP_CTRL, "posting receive buffers failed: %s\n",
		fi_strerror(-ret));
err_close_ep:
	fi_close(&rdm->core_ep->fid);
	rdm->core_ep = NULL;
	while (!util_dlist_empty(&rdm->posted_bufs)) {
		buf = container_of(util_dlist_pop_front(&rdm->posted_bufs), struct layer_rx_buf,
				   link);
		util_bufpool_put(&ep->buf_pool, buf);
	}
	rdm->posted_cnt = 0;
err_close_av:
	fi_close(&rdm->core_av->fid);
	rdm->core_av = NULL;
	return ret;
}

static void layer_rdm_close(struct layer_ep *ep)
{
	struct layer_rdm_peer *peer, *tmp;
	struct layer_rdm *rdm = &ep->rdm;
	struct util_dlist *item;

	/* Closing the core endpoint discards what it holds: no completions follow. */
	if (rdm->core_ep) {
		fi_close(&rdm->core_ep->fid);
		rdm->core_ep = NULL;
	}
	while ((item = util_dlist_pop_front(&rdm->posted_bufs)))
		util_bufpool_put(&ep->buf_pool, container_of(item, struct layer_rx_buf, link));
	rdm->posted_cnt = 0;
	HASH_ITER(hh, rdm->by_addr, peer, tmp) {
		HASH_DEL(rdm->by_addr, peer);
		free(peer);
	}
	free(rdm->by_core_addr);
	rdm->by_core_addr = NULL;
	rdm->by_core_addr_cnt = 0;
	if (rdm->core_av) {
		fi_close(&rdm->core_av->fid);
		rdm->core_av = NULL;
	}
}

const struct layer_core_ops layer_core_rdm_ops = {
	.has_shared_ep = true,
	.enable = layer_rdm_enable,
	.close = layer_rdm_close,
	.connect = layer_rdm_connect,
	.progress = layer_rdm_progress,
	.trywait = layer_rdm_trywait,
	.post_buf = layer_rdm_post_buf,
	.conn_closing = layer_rdm_conn_closing,
	.op_failed = layer_rdm_op_failed,
	.handle_ack = layer_rdm_handle_ack,
};
