/*
 * The endpoint over a reliable-datagram (RDM) core: one core endpoint and one core AV per
 * endpoint, bounce buffers posted on that endpoint from a shared pool, and connections that
 * are peers' addresses in the core AV.
 *
 * Knowing where a message came from takes the core's FI_SOURCE, and a core names a source
 * only when its own AV holds that address (net and sockets report FI_ADDR_NOTAVAIL
 * otherwise, shm a wrong index). So the first message from one endpoint to another is a
 * HELLO carrying the sender's address: the receiver inserts it into its core AV and answers
 * HELLO_ACK; the sender's connection is connected once that answer comes, and keeps what the
 * application sends until then. Every message after that carries a core source the receiver
 * knows, which maps it to the peer; replies go to the peer's core address.
 *
 * Authorization keys: each key a sender uses with a peer is a slot of that peer (0, 1...,
 * in the order first used), announced by a HELLO that carries the key after the address
 * (the HELLO's msg_id is the slot); the peer's messages name their slot (key_slot), so one
 * peer may send under several keys. The receiver checks a slot's key once, at its HELLO, and
 * answers HELLO_ACK or, refusing it, HELLO_NAK: the sender then fails the connections of
 * that slot with FI_EACCES, having sent nothing else on them. Each slot of a peer is an
 * incoming connection of its own, so whatever arrives is attributed to the slot's key. A
 * peer from before keys says HELLO without a key and may skip it: slot 0 without a HELLO is
 * a peer without a key. Messages on a refused or unannounced slot are dropped and counted.
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

/* A slot's key while not accepted: never equal to an AV key handle or FI_ADDR_NOTAVAIL. */
#define LAYER_RDM_NO_KEY_YET ((fi_addr_t) 0)
/* Bounce buffers kept posted on the core endpoint: rx_buf_cnt for each of a few peers. */
#define LAYER_RDM_BUF_FACTOR 4
/* Core fi_addr values past this are not table indices: the core ignored FI_AV_TABLE. */
#define LAYER_RDM_MAX_PEERS (1u << 24)

/* What the endpoint made of one of a peer's key slots (the peer numbers them). */
enum layer_rdm_slot_state {
	LAYER_RDM_SLOT_UNKNOWN,        /* never announced */
	LAYER_RDM_SLOT_ACCEPTED,
	LAYER_RDM_SLOT_REFUSED,
};

struct layer_rdm_in_slot {
	struct layer_conn *conn;       /* where the slot's messages arrive; NULL until one does */
	fi_addr_t key;                 /* ACCEPTED: the AV key handle, or FI_ADDR_NOTAVAIL */
	enum layer_rdm_slot_state state;
};

/* One of the keys this endpoint sends to a peer with (the slot is its index). */
struct layer_rdm_out_slot {
	struct layer_key key;
	bool is_hello_sent;            /* its HELLO is on its way or answered */
	bool is_acked;                 /* the peer accepted it: its connections may send */
	size_t tx_eager;               /* what the peer's buffers take, from its HELLO_ACK */
};

/* One address the endpoint exchanges messages with. */
struct layer_rdm_peer {
	UT_hash_handle hh;             /* ep->rdm.by_addr */
	fi_addr_t core_addr;           /* in ep->rdm.core_av */
	bool is_failing;               /* its connections are being failed */
	struct layer_rdm_in_slot *in;  /* by the peer's slot; in_cnt entries */
	size_t in_cnt;
	struct layer_rdm_out_slot *out; /* by our slot; out_cnt in use */
	size_t out_cnt;
	bool is_paced;                 /* it asked us to pace our sends to it (PACE) */
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
	layer_buf_reset(buf, NULL);
	ret = fi_recv(rdm->core_ep, buf->data, ep->buf_size, NULL, FI_ADDR_UNSPEC, buf);
	if (ret)
		return (int) ret;
	util_dlist_insert_tail(&buf->link, &rdm->posted_bufs);
	rdm->posted_cnt++;
	return 0;
}

static void layer_rdm_refill(struct layer_ep *ep, size_t upto)
{
	struct layer_rdm *rdm = &ep->rdm;
	struct layer_rx_buf *buf;

	while (rdm->posted_cnt < UTIL_MIN(upto, rdm->buf_target)) {
		buf = util_bufpool_get(&ep->buf_pool);
		if (!buf)
			return;
		if (layer_rdm_post_buf(ep, NULL, buf)) {
			util_bufpool_put(&ep->buf_pool, buf);
			return;
		}
	}
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

/* Makes room for the peer's slot in peer->in: 0 or -FI_ENOMEM. */
static int layer_rdm_in_grow(struct layer_rdm_peer *peer, size_t slot)
{
	struct layer_rdm_in_slot *in;
	size_t cnt, i;

	if (slot < peer->in_cnt)
		return 0;
	cnt = UTIL_MAX(peer->in_cnt * 2, (size_t) 4);
	while (cnt <= slot)
		cnt *= 2;
	in = realloc(peer->in, cnt * sizeof(*in));
	if (!in)
		return -FI_ENOMEM;
	for (i = peer->in_cnt; i < cnt; i++)
		in[i] = (struct layer_rdm_in_slot) { .key = FI_ADDR_NOTAVAIL };
	peer->in = in;
	peer->in_cnt = cnt;
	return 0;
}

/* Decides a slot's fate from the key it was announced with. */
static void layer_rdm_in_decide(struct layer_ep *ep, struct layer_rdm_in_slot *in,
				const struct layer_key *key)
{
	in->state = layer_auth_accepts(ep, key, &in->key) ? LAYER_RDM_SLOT_ACCEPTED :
							    LAYER_RDM_SLOT_REFUSED;
}

/*
 * The connection a slot's messages arrive on (and replies to them leave by), created on
 * first use; NULL without memory. A slot 0 never announced is a peer from before keys: no
 * key, accepted or refused here.
 */
static struct layer_conn *layer_rdm_in_conn(struct layer_ep *ep, struct layer_rdm_peer *peer,
					    size_t slot)
{
	static const struct layer_key no_key;
	struct layer_rdm_in_slot *in;
	struct layer_conn *conn;

	if (layer_rdm_in_grow(peer, slot))
		return NULL;
	in = &peer->in[slot];
	if (in->conn)
		return in->conn;
	if (in->state == LAYER_RDM_SLOT_UNKNOWN && slot == 0)
		layer_rdm_in_decide(ep, in, &no_key);
	conn = layer_rdm_conn_alloc(ep, peer, false);
	if (!conn)
		return NULL;
	/* The peer sent to us, so its core AV holds our address: replies reach it named. */
	conn->state = LAYER_CONN_CONNECTED;
	conn->key_slot = (uint16_t) slot;
	conn->key = in->key;
	in->conn = conn;
	return conn;
}

/* Our slot for key at the peer, a new one (not yet announced) if needed. */
static int layer_rdm_out_slot(struct layer_rdm_peer *peer, const struct layer_key *key,
			      size_t *slot)
{
	struct layer_rdm_out_slot *out;
	size_t i;

	for (i = 0; i < peer->out_cnt; i++) {
		if (layer_key_equal(&peer->out[i].key, key)) {
			*slot = i;
			return 0;
		}
	}
	if (peer->out_cnt == LAYER_KEY_SLOT_MAX) {
		FI_WARN(&layer_prov, FI_LOG_EP_CTRL, "more than %d keys used with one peer\n",
			LAYER_KEY_SLOT_MAX);
		return -FI_ENOSPC;
	}
	/* grows one at a time: a peer sees one key, or a handful */
	out = realloc(peer->out, (peer->out_cnt + 1) * sizeof(*out));
	if (!out)
		return -FI_ENOMEM;
	out[peer->out_cnt] = (struct layer_rdm_out_slot) { .key = *key };
	peer->out = out;
	*slot = peer->out_cnt++;
	return 0;
}

/* Announces conn's key slot to its peer: the HELLO carries our address, then the key. */
static int layer_rdm_send_hello(struct layer_ep *ep, struct layer_conn *conn)
{
	struct layer_rdm_out_slot *out = &conn->rdm_peer->out[conn->key_slot];
	uint8_t data[LAYER_ADDR_MAX + LAYER_AUTH_KEY_MAX];
	int ret;

	memcpy(data, ep->addr, ep->addrlen);
	memcpy(data + ep->addrlen, out->key.bytes, out->key.len);
	ret = layer_proto_send_ctrl_data(ep, conn, LAYER_OP_HELLO, conn->key_slot, data,
					 ep->addrlen + out->key.len);
	if (!ret)
		out->is_hello_sent = true;
	return ret;
}

static void layer_rdm_peer_fail(struct layer_rdm_peer *peer, int err)
{
	struct util_dlist *item;
	size_t i;

	FI_INFO(&layer_prov, FI_LOG_EP_CTRL, "peer lost: %s\n", fi_strerror(err));
	/* It may come back as a new process that has never heard of us. */
	for (i = 0; i < peer->out_cnt; i++) {
		peer->out[i].is_hello_sent = false;
		peer->out[i].is_acked = false;
	}
	peer->is_paced = false;
	peer->is_failing = true;
	for (i = 0; i < peer->in_cnt; i++) {
		if (peer->in[i].conn)
			layer_conn_fail(peer->in[i].conn, err);
	}
	while ((item = peer->out_conns.next) != &peer->out_conns)
		layer_conn_fail(container_of(item, struct layer_conn, peer_link), err);
	peer->is_failing = false;
}

static int layer_rdm_connect(struct layer_ep *ep, size_t index, const void *addr,
			     const struct layer_key *key, struct layer_conn **conn_out)
{
	struct layer_rdm_peer *peer;
	struct layer_conn *conn;
	size_t slot;
	int ret;

	ret = layer_rdm_peer_get(ep, addr, &peer);
	if (!ret)
		ret = layer_rdm_out_slot(peer, key, &slot);
	if (ret)
		return ret;
	conn = layer_rdm_conn_alloc(ep, peer, true);
	if (!conn)
		return -FI_ENOMEM;
	conn->peer_index = index;
	conn->key_slot = (uint16_t) slot;
	conn->is_paced = peer->is_paced;
	util_dlist_insert_tail(&conn->peer_link, &peer->out_conns);
	if (peer->out[slot].is_acked) {
		conn->state = LAYER_CONN_CONNECTED;
		conn->tx_eager = peer->out[slot].tx_eager;
	} else if (!peer->out[slot].is_hello_sent) {
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
	struct layer_rdm_out_slot *out;
	struct util_dlist *item;
	struct layer_conn *next;

	if (!peer)
		return;
	conn->rdm_peer = NULL;
	if (!conn->is_outgoing) {
		if (conn->key_slot < peer->in_cnt && peer->in[conn->key_slot].conn == conn)
			peer->in[conn->key_slot].conn = NULL;
		return;
	}
	util_dlist_remove(&conn->peer_link);
	/*
	 * Its HELLO may go down with it (a removed AV entry): another connection of the slot
	 * still waiting for the peer says it again; a second answer does no harm.
	 */
	out = &peer->out[conn->key_slot];
	if (out->is_acked || peer->is_failing)
		return;
	out->is_hello_sent = false;
	util_dlist_foreach(&peer->out_conns, item) {
		next = container_of(item, struct layer_conn, peer_link);
		if (next->key_slot != conn->key_slot)
			continue;
		if (layer_rdm_send_hello(conn->ep, next))
			layer_conn_fail(next, FI_ENOMEM);
		return;
	}
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

/* A PACE comes from the peer: it applies to every connection that sends to it. */
static void layer_rdm_handle_pace(struct layer_conn *conn, bool is_paced)
{
	struct layer_rdm_peer *peer = conn->rdm_peer;
	struct util_dlist *item;

	if (!peer)
		return;
	peer->is_paced = is_paced;
	util_dlist_foreach(&peer->out_conns, item)
		layer_proto_set_paced(container_of(item, struct layer_conn, peer_link), is_paced);
}

static void layer_rdm_drop(struct layer_ep *ep, struct layer_rx_buf *buf, const char *why)
{
	FI_WARN(&layer_prov, FI_LOG_EP_DATA, "dropping message (%zu bytes): %s\n", buf->len,
		why);
	ep->dropped_cnt++;
	layer_proto_repost_buf(ep, buf);
}

/*
 * A HELLO: its sender is named by the address it carries, whatever the core's source says;
 * the key after the address (none: a peer without a key) decides the slot's fate.
 */
static void layer_rdm_handle_hello(struct layer_ep *ep, struct layer_rx_buf *buf)
{
	const struct layer_hdr *hdr = (const struct layer_hdr *) buf->data;
	uint8_t addr[LAYER_ADDR_MAX];
	struct layer_rdm_in_slot *in;
	struct layer_rdm_peer *peer;
	struct layer_conn *conn;
	struct layer_key key;
	fi_addr_t prev_key, new_key;
	size_t slot = hdr->msg_id;

	if (buf->len != sizeof(*hdr) + hdr->size || hdr->size < ep->addrlen ||
	    hdr->size > ep->addrlen + LAYER_AUTH_KEY_MAX || hdr->flags ||
	    hdr->msg_id >= LAYER_KEY_SLOT_MAX ||
	    layer_av_normalize(ep->domain->addr_format, hdr + 1, ep->addrlen, addr)) {
		layer_rdm_drop(ep, buf, "malformed hello");
		return;
	}
	key.len = (uint8_t) (hdr->size - ep->addrlen);
	memcpy(key.bytes, buf->data + sizeof(*hdr) + ep->addrlen, key.len);
	if (layer_rdm_peer_get(ep, addr, &peer)) {
		layer_rdm_drop(ep, buf, "hello from an address the core refuses");
		return;
	}
	if (layer_rdm_in_grow(peer, slot)) {
		layer_rdm_drop(ep, buf, "no memory for a hello");
		return;
	}
	in = &peer->in[slot];
	prev_key = in->state == LAYER_RDM_SLOT_ACCEPTED ? in->key : LAYER_RDM_NO_KEY_YET;
	layer_rdm_in_decide(ep, in, &key);
	new_key = in->state == LAYER_RDM_SLOT_ACCEPTED ? in->key : LAYER_RDM_NO_KEY_YET;
	if (in->state != LAYER_RDM_SLOT_ACCEPTED)
		layer_auth_refused(ep, "a hello");
	/* Announced again with another key (a new process there): the old connection goes. */
	if (in->conn && new_key != prev_key)
		layer_conn_fail(in->conn, FI_ECONNRESET);
	conn = layer_rdm_in_conn(ep, peer, slot);
	/* The answer says what our buffers take: the peer sends eager no more than that. */
	if (!conn || layer_proto_send_ctrl_hdr(ep, conn, in->state == LAYER_RDM_SLOT_ACCEPTED ?
					       LAYER_OP_HELLO_ACK : LAYER_OP_HELLO_NAK, 0, slot,
					       ep->buf_size - LAYER_HDR_SIZE, NULL, 0)) {
		layer_rdm_drop(ep, buf, "no memory to answer a hello");
		return;
	}
	layer_proto_repost_buf(ep, buf);
}

/* The peer answered the HELLO of one of our slots. */
static void layer_rdm_handle_answer(struct layer_rdm_peer *peer, const struct layer_hdr *hdr)
{
	struct util_dlist *item, *tmp;
	struct layer_conn *conn;
	bool is_ack = hdr->op == LAYER_OP_HELLO_ACK;

	if (hdr->msg_id >= peer->out_cnt)
		return;
	if (is_ack) {
		peer->out[hdr->msg_id].is_acked = true;
		peer->out[hdr->msg_id].tx_eager = layer_conn_peer_eager(hdr->data);
	} else {
		/* reported by the sends' error completions */
		FI_INFO(&layer_prov, FI_LOG_EP_CTRL, "peer refused this endpoint's "
			"authorization key: sends to it fail\n");
		/* the next send to the peer with that key says HELLO again */
		peer->out[hdr->msg_id].is_acked = false;
		peer->out[hdr->msg_id].is_hello_sent = false;
		peer->is_failing = true;
	}
	util_dlist_foreach_safe(&peer->out_conns, item, tmp) {
		conn = container_of(item, struct layer_conn, peer_link);
		if (conn->key_slot != hdr->msg_id)
			continue;
		if (is_ack) {
			conn->tx_eager = peer->out[hdr->msg_id].tx_eager;
			layer_conn_connected(conn);
		} else {
			layer_conn_fail(conn, FI_EACCES);
		}
	}
	peer->is_failing = false;
}

static void layer_rdm_handle_buf(struct layer_ep *ep, struct layer_rx_buf *buf, size_t len,
				 fi_addr_t src)
{
	const struct layer_hdr *hdr = (const struct layer_hdr *) buf->data;
	struct layer_rdm_peer *peer;
	bool is_versioned, is_ack;
	size_t slot;

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
	if (is_versioned && (hdr->op == LAYER_OP_HELLO_ACK || hdr->op == LAYER_OP_HELLO_NAK) &&
	    len == sizeof(*hdr)) {
		layer_rdm_handle_answer(peer, hdr);
		layer_proto_repost_buf(ep, buf);
		return;
	}
	/*
	 * User data counts only on a slot whose key was accepted. A reply (ACK, and PACE or
	 * UNPACE) is about our own sends, whatever key the peer sends with: it comes on slot
	 * 0's connection.
	 */
	is_ack = is_versioned && (hdr->op == LAYER_OP_ACK || hdr->op == LAYER_OP_PACE ||
				  hdr->op == LAYER_OP_UNPACE);
	slot = is_versioned && !is_ack ? hdr->key_slot : 0;
	if (unlikely(slot && (slot >= peer->in_cnt ||
			      peer->in[slot].state == LAYER_RDM_SLOT_UNKNOWN))) {
		layer_auth_refused(ep, "a message on a key slot never announced");
		layer_proto_repost_buf(ep, buf);
		return;
	}
	buf->conn = layer_rdm_in_conn(ep, peer, slot);
	if (!buf->conn) {
		layer_rdm_drop(ep, buf, "no memory for a connection");
		return;
	}
	if (unlikely(peer->in[slot].state != LAYER_RDM_SLOT_ACCEPTED) && !is_ack) {
		layer_auth_refused(ep, "a message of a refused key");
		layer_proto_repost_buf(ep, buf);
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
		/* The core serves peers' reads in here, looking their keys up in the map other
		 * endpoints of the domain register into and close from (domain.c). */
		util_lock_acquire(&ep->domain->core_mr_lock);
		ret = fi_cq_readfrom(ep->core_cq, comp, batch, src);
		util_lock_release(&ep->domain->core_mr_lock);
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
		free(peer->in);
		free(peer->out);
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
	.refill = layer_rdm_refill,
	.conn_closing = layer_rdm_conn_closing,
	.op_failed = layer_rdm_op_failed,
	.handle_ack = layer_rdm_handle_ack,
	.handle_pace = layer_rdm_handle_pace,
};
