/*
 * Connections and peers (conn.h): opened on the first send to an AV index or accepted from a
 * peer, given their sender's AV entry and key, failed and reaped exactly once, and the
 * upcalls of the core adapter below, which pass what arrives on to the layer above with its
 * sender.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "layer/conn/conn.h"
#include "layer/av/av.h"

static inline struct layer_conns *layer_conns_of(void *arg)
{
	return arg;
}

/* The peer of a (normalised) address, made on first use; NULL without memory. */
static struct layer_peer *layer_peer_get(struct layer_conns *conns, const void *addr)
{
	size_t addrlen = conns->core->addrlen;
	struct layer_peer *peer;

	HASH_FIND(hh, conns->peers, addr, addrlen, peer);
	if (peer)
		return peer;
	peer = calloc(1, sizeof(*peer));
	if (!peer)
		return NULL;
	util_dlist_init(&peer->conns);
	memcpy(peer->addr, addr, addrlen);
	HASH_ADD(hh, conns->peers, addr, addrlen, peer);
	return peer;
}

static void layer_peer_put(struct layer_conns *conns, struct layer_peer *peer)
{
	if (!util_dlist_empty(&peer->conns))
		return;
	HASH_DEL(conns->peers, peer);
	free(peer);
}

/*
 * The AV entry a connection's messages come from: the lowest live entry holding the peer's
 * address with the connection's key (an address inserted with that key when keys come from
 * the AV, else the plain address).
 */
static fi_addr_t layer_conns_find_src(const struct layer_conns *conns, const void *addr,
				      fi_addr_t key)
{
	if (!conns->av)
		return FI_ADDR_NOTAVAIL;
	return key == FI_ADDR_NOTAVAIL ?
	       layer_av_find(conns->av, addr, conns->core->addrlen) :
	       layer_av_find_key(conns->av, addr, conns->core->addrlen, key);
}

static inline fi_addr_t layer_conn_find_src(const struct layer_conns *conns,
					    const struct layer_conn *conn)
{
	return layer_conns_find_src(conns, conn->chan->peer_addr, conn->key);
}

/* The table index of the AV entry of addr with key: SIZE_MAX when there is none. */
static size_t layer_conns_src_index(const struct layer_conns *conns, const void *addr,
				    fi_addr_t key, fi_addr_t *src_addr)
{
	size_t index;

	*src_addr = layer_conns_find_src(conns, addr, key);
	if (*src_addr == FI_ADDR_NOTAVAIL)
		return SIZE_MAX;
	if (layer_av_resolve(conns->av, *src_addr, NULL, &index)) {
		*src_addr = FI_ADDR_NOTAVAIL;
		return SIZE_MAX;
	}
	return index;
}

static void layer_conn_set_src(struct layer_conns *conns, struct layer_conn *conn)
{
	conn->src_index = layer_conns_src_index(conns, conn->chan->peer_addr, conn->key,
						&conn->src_addr);
}

static int layer_conns_grow(struct layer_conns *conns, size_t index)
{
	struct layer_conn **by_index;

	by_index = util_array_grow(conns->by_index, &conns->by_index_cnt,
				   sizeof(*conns->by_index), index);
	if (!by_index)
		return -FI_ENOMEM;
	conns->by_index = by_index;
	return 0;
}

/* A connection over chan (live, connecting, its lists empty), of chan's peer. */
static struct layer_conn *layer_conn_alloc(struct layer_conns *conns, struct layer_chan *chan,
					   fi_addr_t key)
{
	struct layer_conn *conn;

	conn = calloc(1, sizeof(*conn));
	if (!conn)
		return NULL;
	conn->peer = layer_peer_get(conns, chan->peer_addr);
	if (!conn->peer) {
		free(conn);
		return NULL;
	}
	conn->conns = conns;
	conn->chan = chan;
	conn->key = key;
	conn->state = LAYER_CONN_CONNECTING;
	util_dlist_init(&conn->queued_tx);
	util_dlist_init(&conn->pending_link);
	util_dlist_init(&conn->posted_tx);
	util_dlist_init(&conn->acked_tx);
	util_dlist_init(&conn->fenced_tx);
	util_dlist_init(&conn->reading_rx);
	util_dlist_insert_tail(&conn->peer_link, &conn->peer->conns);
	util_dlist_insert_tail(&conn->link, &conns->live);
	chan->conn = conn;
	layer_conn_set_src(conns, conn);
	return conn;
}

static void layer_conn_free(struct layer_conns *conns, struct layer_conn *conn)
{
	util_dlist_remove(&conn->pending_link);
	conns->core->ops->chan_free(conn->chan, conn->fail_err ? conn->fail_err : FI_ECANCELED);
	util_dlist_remove(&conn->peer_link);
	layer_peer_put(conns, conn->peer);
	free(conn->grants);
	free(conn);
}

/* Sends to index go on conn from now on. */
static void layer_conn_serve(struct layer_conns *conns, struct layer_conn *conn, size_t index)
{
	conns->by_index[index] = conn;
	conn->is_tx = true;
	conn->tx_index = index;
}

static int layer_conn_connect(struct layer_conns *conns, size_t index, const void *addr,
			      struct layer_conn **conn_out)
{
	struct layer_chan *chan;
	struct layer_conn *conn;
	fi_addr_t key_handle;
	struct layer_key key;
	bool is_up;
	int ret;

	/* The key a connection's messages carry is chosen once, here (auth.c). */
	ret = layer_auth_tx_key(&conns->auth, conns->av, index, &key, &key_handle);
	if (ret)
		return ret;
	ret = conns->core->ops->connect(conns->core, addr, &key, &chan, &is_up);
	if (ret)
		return ret;
	conn = layer_conn_alloc(conns, chan, key_handle);
	if (!conn) {
		conns->core->ops->chan_free(chan, FI_ECANCELED);
		return -FI_ENOMEM;
	}
	if (is_up)
		conn->state = LAYER_CONN_CONNECTED;
	layer_conn_serve(conns, conn, index);
	FI_DBG(&layer_prov, FI_LOG_EP_CTRL, "connection %p for av index %zu, %s\n",
	       (void *) conn, index, is_up ? "up" : "connecting");
	*conn_out = conn;
	return 0;
}

/*
 * An accepted connection from a peer in the AV that this endpoint has no connection to send
 * on yet becomes that peer's: the endpoint's sends to it share the connection. With keys
 * from the AV, the peer is the address inserted with the connection's key. Tried when the
 * connection is accepted, when the AV gains entries, and on the first send to the entry.
 */
static void layer_conn_adopt(struct layer_conns *conns, struct layer_conn *conn)
{
	size_t index = conn->src_index;

	if (!conn->chan->is_two_way || conn->is_tx || conn->state == LAYER_CONN_CLOSED ||
	    conn->src_addr == FI_ADDR_NOTAVAIL)
		return;
	if (index >= conns->by_index_cnt && layer_conns_grow(conns, index))
		return;
	if (!conns->by_index[index]) {
		layer_conn_serve(conns, conn, index);
		FI_DBG(&layer_prov, FI_LOG_EP_CTRL, "connection %p adopted for av index %zu\n",
		       (void *) conn, index);
	}
}

/*
 * A connection the peer at addr opened that can carry the sends to index, when the AV did
 * not tell of the entry (a named AV another process filled).
 */
static struct layer_conn *layer_conns_find_adoptable(struct layer_conns *conns,
						     const void *addr, size_t index)
{
	struct layer_peer *peer;
	struct layer_conn *conn;
	struct util_dlist *item;

	HASH_FIND(hh, conns->peers, addr, conns->core->addrlen, peer);
	if (!peer)
		return NULL;
	util_dlist_foreach(&peer->conns, item) {
		conn = container_of(item, struct layer_conn, peer_link);
		if (conn->is_tx || conn->state == LAYER_CONN_CLOSED || !conn->chan->is_two_way)
			continue;
		layer_conn_set_src(conns, conn);
		if (conn->src_index == index)
			return conn;
	}
	return NULL;
}

int layer_conn_get(struct layer_conns *conns, fi_addr_t dest, struct layer_conn **conn)
{
	uint8_t addr[LAYER_ADDR_MAX];
	struct layer_conn *cur;
	size_t index;
	int ret;

	/* The AV's notices keep by_index right, but for a named AV changed elsewhere. */
	if (likely(conns->is_src_kept)) {
		ret = layer_av_resolve(conns->av, dest, NULL, &index);
		if (unlikely(ret))
			return ret;
		if (likely(index < conns->by_index_cnt && (cur = conns->by_index[index]))) {
			*conn = cur;
			return 0;
		}
	}
	ret = layer_av_get_addr(conns->av, dest, addr, &index);
	if (ret)
		return ret;
	if (unlikely(index >= conns->by_index_cnt)) {
		ret = layer_conns_grow(conns, index);
		if (ret)
			return ret;
	}
	cur = conns->by_index[index];
	/* a named AV's slot may have been reused for another address since */
	if (cur && !memcmp(cur->chan->peer_addr, addr, conns->core->addrlen)) {
		*conn = cur;
		return 0;
	}
	if (cur)
		layer_conn_fail(cur, FI_EADDRNOTAVAIL);
	cur = layer_conns_find_adoptable(conns, addr, index);
	if (cur) {
		layer_conn_serve(conns, cur, index);
		*conn = cur;
		return 0;
	}
	return layer_conn_connect(conns, index, addr, conn);
}

/*
 * One connection per pair of endpoints. Over a MSG core a connection carries both ways, and
 * an endpoint sends on the one it opened or, when the peer connected first, on the peer's
 * (adopted). Two endpoints that ask each other at once would end with two: the request of
 * the endpoint whose address is lower is the one both keep. A peer's request that finds a
 * connection to send to it already (cur) is therefore:
 */
enum layer_conn_clash {
	LAYER_CLASH_SELF,   /* the endpoint's own, to itself: a second channel, never sent on */
	LAYER_CLASH_REFUSE, /* ours is kept (we are lower, cur is ours): refused; the peer
			     * takes ours over when it arrives */
	LAYER_CLASH_TAKE,   /* theirs is kept (we are higher, cur ours and still connecting):
			     * cur goes on over the peer's channel, with what is queued on it;
			     * ours, which the peer refuses, is dropped */
	LAYER_CLASH_STALE,  /* the peer asks again while cur is up, or while cur is the
			     * peer's own: it no longer has cur (it restarted, or closed it),
			     * so cur fails and the request makes a new connection */
};

static enum layer_conn_clash layer_conn_clash(const struct layer_conns *conns,
					      const struct layer_conn *cur,
					      const struct layer_chan *chan)
{
	int cmp = memcmp(conns->core->addr, chan->peer_addr, conns->core->addrlen);

	if (!cmp)
		return LAYER_CLASH_SELF;
	if (!cur->chan->is_outgoing)
		return LAYER_CLASH_STALE;
	if (cmp < 0)
		return LAYER_CLASH_REFUSE;
	return cur->state == LAYER_CONN_CONNECTING ? LAYER_CLASH_TAKE : LAYER_CLASH_STALE;
}

/* conn goes on over chan, of the same peer; its channel until now is dropped. */
static void layer_conn_rechan(struct layer_conns *conns, struct layer_conn *conn,
			      struct layer_chan *chan, fi_addr_t key)
{
	conns->core->ops->chan_drop(conn->chan);
	conn->chan = chan;
	chan->conn = conn;
	conn->key = key;
	layer_conn_set_src(conns, conn);
}

/*
 * The peer refused conn's request because its own is kept (LAYER_CLASH_REFUSE there):
 * conn, still connecting, takes the peer's over when it comes, and asks again meanwhile in
 * case it never does (the peer dropped it, or what the peer still holds is a connection to
 * an earlier process at this address, which it will see fail). Each request is answered
 * only by the peer's progress, so this does not spin; LAYER_REDIAL_MAX bounds it.
 */
#define LAYER_REDIAL_MAX 256

static int layer_conn_redial(struct layer_conns *conns, struct layer_conn *conn)
{
	struct layer_chan *chan;
	fi_addr_t key_handle;
	struct layer_key key;
	bool is_up;
	int ret;

	if (conn->state != LAYER_CONN_CONNECTING || !conn->is_tx ||
	    ++conn->redial_cnt > LAYER_REDIAL_MAX)
		return -FI_ECONNREFUSED;
	ret = layer_auth_tx_key(&conns->auth, conns->av, conn->tx_index, &key, &key_handle);
	if (ret)
		return ret;
	ret = conns->core->ops->connect(conns->core, conn->chan->peer_addr, &key, &chan,
					&is_up);
	if (ret)
		return ret;
	layer_conn_rechan(conns, conn, chan, key_handle);
	return 0;
}

void layer_conn_fail(struct layer_conn *conn, int err)
{
	struct layer_conns *conns = conn->conns;

	if (conn->state == LAYER_CONN_CLOSED)
		return;
	FI_INFO(&layer_prov, FI_LOG_EP_CTRL, "closing connection: %s\n", fi_strerror(err));
	conn->state = LAYER_CONN_CLOSED;
	conn->fail_err = err;
	if (conn->is_tx && conns->by_index[conn->tx_index] == conn)
		conns->by_index[conn->tx_index] = NULL;
	/*
	 * MSG: closing the core endpoint makes the core drop what it holds. Completions it
	 * flushed before may still sit in the core CQ: progress drains it before the reap
	 * completes the rest, so everything completes exactly once.
	 */
	conns->core->ops->chan_close(conn->chan);
	util_dlist_remove(&conn->link);
	util_dlist_insert_tail(&conn->link, &conns->closed);
}

void layer_conns_reap(struct layer_conns *conns)
{
	struct util_dlist *item, *tmp;
	struct layer_conn *conn;

	while ((item = util_dlist_pop_front(&conns->closed))) {
		conn = container_of(item, struct layer_conn, link);
		if (conns->up->lost(conns->up_arg, conn))
			layer_conn_free(conns, conn);
		else
			util_dlist_insert_tail(&conn->link, &conns->draining);
	}
	util_dlist_foreach_safe(&conns->draining, item, tmp) {
		conn = container_of(item, struct layer_conn, link);
		if (!conns->up->lost(conns->up_arg, conn))
			continue;
		util_dlist_remove(&conn->link);
		layer_conn_free(conns, conn);
	}
}

static void layer_conns_free_list(struct layer_conns *conns, struct util_dlist *list)
{
	struct util_dlist *item;
	struct layer_conn *conn;

	while ((item = util_dlist_pop_front(list))) {
		conn = container_of(item, struct layer_conn, link);
		conns->up->discard(conns->up_arg, conn);
		layer_conn_free(conns, conn);
	}
}

void layer_conns_close(struct layer_conns *conns)
{
	layer_conns_free_list(conns, &conns->live);
	layer_conns_free_list(conns, &conns->closed);
	layer_conns_free_list(conns, &conns->draining);
	free(conns->by_index);
	conns->by_index = NULL;
	conns->by_index_cnt = 0;
	if (conns->av)
		layer_auth_fini(&conns->auth, conns->av);
}

int layer_conns_init(struct layer_conns *conns, struct layer_core *core,
		     const struct fi_info *info, const struct layer_conn_upcalls *up,
		     void *up_arg)
{
	memset(conns, 0, sizeof(*conns));
	conns->core = core;
	conns->up = up;
	conns->up_arg = up_arg;
	util_dlist_init(&conns->live);
	util_dlist_init(&conns->closed);
	util_dlist_init(&conns->draining);
	conns->is_watching = !core->has_liveness && layer_settings.keepalive_ms;
	return layer_auth_init(&conns->auth, core->domain, info);
}

int layer_conns_enable(struct layer_conns *conns, struct layer_av *av)
{
	int ret;

	ret = layer_auth_enable(&conns->auth, av);
	if (ret)
		return ret;
	conns->av = av;
	conns->is_src_kept = !av->shm;
	return 0;
}

/* Entries went into the AV: connections from peers it did not hold may be in it now, and
 * serve it. */
void layer_conns_av_inserted(struct layer_conns *conns)
{
	struct layer_conn *conn;
	struct util_dlist *item;

	util_dlist_foreach(&conns->live, item) {
		conn = container_of(item, struct layer_conn, link);
		if (conn->src_addr != FI_ADDR_NOTAVAIL)
			continue;
		layer_conn_set_src(conns, conn);
		if (conn->src_addr != FI_ADDR_NOTAVAIL)
			conns->up->named(conns->up_arg, conn);
		layer_conn_adopt(conns, conn);
	}
}

size_t layer_conns_count(const struct layer_conns *conns)
{
	const struct util_dlist *item;
	size_t cnt = 0;

	util_dlist_foreach(&conns->live, item)
		cnt++;
	return cnt;
}

bool layer_conns_has_queued(const struct layer_conns *conns)
{
	const struct util_dlist *item;
	const struct layer_conn *conn;

	util_dlist_foreach(&conns->live, item) {
		conn = container_of(item, const struct layer_conn, link);
		if (!util_dlist_empty(&conn->queued_tx) || !util_dlist_empty(&conn->fenced_tx))
			return true;
	}
	return false;
}

/*
 * An AV entry was removed: the connection that sends to it fails (what waits on that peer
 * completes with an error instead of reaching an address that may be reused), and
 * connections whose messages came from it look for another entry of the peer.
 */
void layer_conns_av_removed(struct layer_conns *conns, size_t index)
{
	struct layer_conn *conn;
	struct util_dlist *item;

	if (index < conns->by_index_cnt && conns->by_index[index])
		layer_conn_fail(conns->by_index[index], FI_EADDRNOTAVAIL);
	util_dlist_foreach(&conns->live, item) {
		conn = container_of(item, struct layer_conn, link);
		if (conn->src_index == index)
			layer_conn_set_src(conns, conn);
	}
}

/* ---- the core adapter's upcalls ---- */

static int layer_conn_up_accept(void *arg, struct layer_chan *chan, const struct layer_key *key)
{
	struct layer_conns *conns = layer_conns_of(arg);
	struct layer_conn *conn, *cur = NULL;
	fi_addr_t key_handle, src_addr;
	size_t index;

	/* Checked once here: everything on the connection is attributed to this key. */
	if (!layer_auth_accepts(&conns->auth, conns->av, key, &key_handle))
		return -FI_EACCES;
	if (chan->is_two_way && conns->av) {
		index = layer_conns_src_index(conns, chan->peer_addr, key_handle, &src_addr);
		cur = index < conns->by_index_cnt ? conns->by_index[index] : NULL;
	}
	if (cur) {
		switch (layer_conn_clash(conns, cur, chan)) {
		case LAYER_CLASH_REFUSE:
			FI_DBG(&layer_prov, FI_LOG_EP_CTRL, "refusing the peer's request: "
			       "connection %p is kept\n", (void *) cur);
			/* A peer that asks while ours is up may no longer have it (it declared
			 * us lost, or restarted): probed now, tcp answers with a reset then, cur
			 * fails, and the peer's next request is taken. */
			if (cur->state == LAYER_CONN_CONNECTED)
				conns->up->probe(conns->up_arg, cur);
			return -FI_EALREADY;
		case LAYER_CLASH_TAKE:
			FI_DBG(&layer_prov, FI_LOG_EP_CTRL, "connection %p goes on over the "
			       "peer's channel %p\n", (void *) cur, (void *) chan);
			layer_conn_rechan(conns, cur, chan, key_handle);
			return 0;
		case LAYER_CLASH_STALE:
			layer_conn_fail(cur, FI_ECONNRESET);
			break;
		case LAYER_CLASH_SELF:
			break;
		}
	}
	conn = layer_conn_alloc(conns, chan, key_handle);
	if (!conn)
		return -FI_ENOMEM;
	layer_conn_adopt(conns, conn);
	FI_DBG(&layer_prov, FI_LOG_EP_CTRL, "accepted connection %p from av entry %#lx\n",
	       (void *) conn, (unsigned long) conn->src_addr);
	return 0;
}

static void layer_conn_up_connected(void *arg, struct layer_chan *chan)
{
	struct layer_conns *conns = layer_conns_of(arg);
	struct layer_conn *conn = chan->conn;

	FI_DBG(&layer_prov, FI_LOG_EP_CTRL, "channel %p (%s) of connection %p is up\n",
	       (void *) chan, chan->is_outgoing ? "ours" : "the peer's", (void *) conn);
	if (!conn || conn->state != LAYER_CONN_CONNECTING)
		return;
	conn->state = LAYER_CONN_CONNECTED;
	conns->up->ready(conns->up_arg, conn);
}

static void layer_conn_up_failed(void *arg, struct layer_chan *chan, int err)
{
	struct layer_conns *conns = layer_conns_of(arg);
	struct layer_conn *conn = chan->conn;
	int ret;

	FI_DBG(&layer_prov, FI_LOG_EP_CTRL, "channel %p (%s) of connection %p failed: %s\n",
	       (void *) chan, chan->is_outgoing ? "ours" : "the peer's", (void *) conn,
	       fi_strerror(err));
	if (!conn)
		return;
	if (err == FI_EALREADY) {
		ret = layer_conn_redial(conns, conn);
		if (!ret)
			return;
		err = -ret;
	}
	layer_conn_fail(conn, err);
}

/* The sender of a message is its connection's. */
static inline void layer_conn_set_sender(struct layer_conns *conns, struct layer_buf *buf)
{
	struct layer_conn *conn = buf->ctx.chan->conn;

	buf->key = conn->key;
	buf->src_addr = likely(conns->is_src_kept) ? conn->src_addr :
						      layer_conn_find_src(conns, conn);
}

static void layer_conn_up_recv(void *arg, struct layer_buf *buf)
{
	struct layer_conns *conns = layer_conns_of(arg);
	struct layer_peer *peer = buf->ctx.chan->conn->peer;

	/* anything from a watched peer says it is there */
	if (unlikely(peer->is_watched))
		peer->last_rx_ms = util_coarse_ns() / 1000000;
	layer_conn_set_sender(conns, buf);
	conns->up->recv(conns->up_arg, buf);
}

static void layer_conn_up_buf_lost(void *arg, struct layer_buf *buf, int err)
{
	struct layer_conns *conns = layer_conns_of(arg);

	conns->up->buf_lost(conns->up_arg, buf, err);
}

static void layer_conn_up_done(void *arg, struct layer_ctx *ctx, int err)
{
	struct layer_conns *conns = layer_conns_of(arg);

	conns->up->done(conns->up_arg, ctx, err);
}

static int layer_conn_up_place(void *arg, struct layer_buf *buf, struct iovec *iov,
			       size_t *count)
{
	struct layer_conns *conns = layer_conns_of(arg);

	layer_conn_set_sender(conns, buf);
	return conns->up->place(conns->up_arg, buf, iov, count);
}

const struct layer_core_upcalls layer_conn_core_upcalls = {
	.accept = layer_conn_up_accept,
	.connected = layer_conn_up_connected,
	.failed = layer_conn_up_failed,
	.recv = layer_conn_up_recv,
	.buf_lost = layer_conn_up_buf_lost,
	.done = layer_conn_up_done,
	.place = layer_conn_up_place,
};
