/*
 * The core adapter for reliable-datagram (RDM) cores (core.h): one core endpoint and one core
 * AV per endpoint, receive buffers posted on that endpoint from a shared pool, and channels
 * that are a peer's address in the core AV.
 *
 * Knowing where a message came from takes the core's FI_SOURCE, and a core names a source
 * only when its own AV holds that address (net and sockets report FI_ADDR_NOTAVAIL
 * otherwise, shm a wrong index). So the first message from one endpoint to another is a
 * HELLO carrying the sender's address: the receiver inserts it into its core AV and answers
 * HELLO_ACK; the sender's channel is connected once that answer comes, and what the layers
 * above send waits until then. Every message after that carries a core source the receiver
 * knows, which maps it to the peer; replies go to the peer's core address.
 *
 * Authorization keys: each key a sender uses with a peer is a slot of that peer (0, 1...,
 * in the order first used), announced by a HELLO that carries the key after the address
 * (the HELLO's msg_id is the slot); the peer's data messages name their slot (key_slot), so
 * one peer may send under several keys. The receiver has the connection layer decide on a
 * slot's key once, at its HELLO, and answers HELLO_ACK or, refused, HELLO_NAK: the sender
 * then fails the channels of that slot with FI_EACCES, having sent nothing else on them.
 * Each accepted slot of a peer is an incoming channel of its own, so whatever arrives is
 * attributed to the slot's key. Data on a slot refused or never announced is dropped and
 * counted. Replies (ACK, PACE, UNPACE) are about this endpoint's own sends, whatever key
 * the peer uses: they go up on one of the channels this endpoint sends to the peer on.
 *
 * The core reports errors per operation, never per peer: an operation fails alone, unless
 * the error says the peer is gone (or a HELLO could not be sent), which fails every channel
 * with that peer; the next send to it says HELLO again.
 *
 * Over a datagram core the adapter runs the same way on the datagram transport (dgram.h)
 * instead of a core endpoint: it posts no receive to the core (the transport takes posted
 * buffers as messages arrive), sends handshakes as injects, and hears from the transport
 * when a peer is lost.
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <uthash.h>

#include "layer/addr.h"
#include "layer/core/core.h"

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

struct layer_rdm_chan;

struct layer_rdm_in_slot {
	struct layer_rdm_chan *chan;   /* ACCEPTED: where its messages go up, NULL once that
					* channel failed (the next HELLO makes another) */
	struct layer_key key;          /* the key it was announced with */
	enum layer_rdm_slot_state state;
};

/* One of the keys this endpoint sends to a peer with (the slot is its index). */
struct layer_rdm_out_slot {
	struct layer_key key;
	bool is_hello_sent;            /* its HELLO is on its way or answered */
	bool is_acked;                 /* the peer accepted it: its channels may send */
	size_t tx_eager;               /* what the peer's buffers take, from its HELLO_ACK */
};

/* One address the endpoint exchanges messages with; lives until the endpoint closes. */
struct layer_rdm_peer {
	UT_hash_handle hh;             /* rcore->by_addr */
	fi_addr_t core_addr;           /* in rcore->av */
	bool is_failing;               /* its channels are being failed */
	struct layer_rdm_in_slot *in;  /* by the peer's slot; in_cnt entries */
	size_t in_cnt;
	struct layer_rdm_out_slot *out; /* by our slot; out_cnt in use */
	size_t out_cnt;
	struct util_dlist out_chans;   /* struct layer_rdm_chan by peer_link: sends to it */
	uint8_t addr[LAYER_ADDR_MAX];  /* normalised, core->addrlen bytes (the hash key) */
};

struct layer_rdm_chan {
	struct layer_chan chan;        /* first */
	struct layer_rdm_peer *peer;   /* NULL once closed */
	struct util_dlist peer_link;   /* outgoing: peer->out_chans */
};

/* A handshake message of the adapter's own (HELLO and its answers). */
struct layer_rdm_ctl {
	struct layer_ctx ctx;           /* LAYER_CTX_CTRL, chan NULL; first */
	struct util_dlist link;        /* rcore->ctl_queue, then rcore->ctl_posted */
	struct layer_rdm_peer *peer;
	size_t len;                    /* header and data */
	struct layer_hdr hdr;
	uint8_t data[LAYER_ADDR_MAX + LAYER_AUTH_KEY_MAX];
};

struct layer_rdm_core {
	struct layer_core core;        /* first */
	struct fid_ep *ep;
	struct fid_av *av;             /* FI_AV_TABLE: peers by core fi_addr */
	struct layer_dgram *dg;        /* over a datagram core: the transport (ep, av unused) */
	struct layer_rdm_peer *by_addr; /* uthash by address */
	struct layer_rdm_peer **by_core_addr; /* indexed by core fi_addr */
	size_t by_core_addr_cnt;
	struct util_dlist posted_bufs; /* struct layer_buf posted on ep */
	size_t posted_cnt;
	size_t buf_target;             /* buffers kept posted */
	struct util_dlist ctl_queue;   /* handshake messages the core had no room for yet */
	struct util_dlist ctl_posted;  /* handshake messages the core holds */
};

static inline struct layer_rdm_core *layer_rdm_core_of(struct layer_core *core)
{
	return container_of(core, struct layer_rdm_core, core);
}

static inline struct layer_rdm_chan *layer_rdm_chan_of(struct layer_chan *chan)
{
	return container_of(chan, struct layer_rdm_chan, chan);
}

static int layer_rdm_post_buf(struct layer_core *core, struct layer_chan *chan,
			      struct layer_buf *buf)
{
	struct layer_rdm_core *rcore = layer_rdm_core_of(core);
	ssize_t ret;

	(void) chan;
	/* A buffer given back after a match goes to the pool when enough are posted. */
	if ((!rcore->ep && !rcore->dg) || rcore->posted_cnt >= rcore->buf_target)
		return -FI_EAGAIN;
	layer_core_buf_reset(buf, NULL);
	if (!rcore->dg) {
		ret = fi_recv(rcore->ep, buf->data, core->buf_size, NULL, FI_ADDR_UNSPEC, buf);
		if (ret)
			return (int) ret;
	}
	util_dlist_insert_tail(&buf->link, &rcore->posted_bufs);
	rcore->posted_cnt++;
	if (rcore->dg)
		layer_dgram_buf_posted(rcore->dg);
	return 0;
}

static void layer_rdm_refill(struct layer_core *core, size_t upto)
{
	struct layer_rdm_core *rcore = layer_rdm_core_of(core);
	struct layer_buf *buf;

	while (rcore->posted_cnt < UTIL_MIN(upto, rcore->buf_target)) {
		buf = layer_core_buf_get(core);
		if (!buf)
			return;
		if (layer_rdm_post_buf(core, NULL, buf)) {
			layer_core_buf_put(core, buf);
			return;
		}
	}
}

static struct layer_rdm_peer *layer_rdm_peer_find(struct layer_rdm_core *rcore,
						  const void *addr)
{
	struct layer_rdm_peer *peer;

	HASH_FIND(hh, rcore->by_addr, addr, rcore->core.addrlen, peer);
	return peer;
}

static struct layer_rdm_peer *layer_rdm_peer_by_src(struct layer_rdm_core *rcore,
						    fi_addr_t src)
{
	return src < rcore->by_core_addr_cnt ? rcore->by_core_addr[src] : NULL;
}

/* The peer of a (normalised) address, inserted into the core AV on first use. */
static int layer_rdm_peer_get(struct layer_rdm_core *rcore, const void *addr,
			      struct layer_rdm_peer **peer_out)
{
	fi_addr_t core_addr = FI_ADDR_NOTAVAIL;
	struct layer_rdm_peer *peer, **table;
	int ret;

	peer = layer_rdm_peer_find(rcore, addr);
	if (peer) {
		*peer_out = peer;
		return 0;
	}
	if (rcore->dg) {
		/* the transport's peer table is the AV: nothing to take back on failure */
		ret = layer_dgram_av_insert(rcore->dg, addr, &core_addr);
		if (ret)
			return ret;
		ret = 1;
	} else {
		ret = fi_av_insert(rcore->av, addr, 1, &core_addr, 0, NULL);
	}
	if (ret != 1) {
		LAYER_WARN_ONCE(FI_LOG_EP_CTRL, "core av insert failed: %s\n",
			fi_strerror(ret < 0 ? -ret : FI_EADDRNOTAVAIL));
		return ret < 0 ? ret : -FI_EADDRNOTAVAIL;
	}
	if (core_addr >= LAYER_RDM_MAX_PEERS) {
		LAYER_WARN_ONCE(FI_LOG_EP_CTRL, "core fi_addr %#lx is not a table index\n",
			(unsigned long) core_addr);
		ret = -FI_EOPNOTSUPP;
		goto err_remove;
	}
	if (core_addr >= rcore->by_core_addr_cnt) {
		table = util_array_grow(rcore->by_core_addr, &rcore->by_core_addr_cnt,
					sizeof(*table), core_addr);
		if (!table) {
			ret = -FI_ENOMEM;
			goto err_remove;
		}
		rcore->by_core_addr = table;
	}
	peer = calloc(1, sizeof(*peer));
	if (!peer) {
		ret = -FI_ENOMEM;
		goto err_remove;
	}
	peer->core_addr = core_addr;
	util_dlist_init(&peer->out_chans);
	memcpy(peer->addr, addr, rcore->core.addrlen);
	HASH_ADD(hh, rcore->by_addr, addr, rcore->core.addrlen, peer);
	rcore->by_core_addr[core_addr] = peer;
	*peer_out = peer;
	return 0;

err_remove:
	if (!rcore->dg)
		fi_av_remove(rcore->av, &core_addr, 1, 0);
	return ret;
}

static struct layer_rdm_chan *layer_rdm_chan_alloc(struct layer_rdm_core *rcore,
						   struct layer_rdm_peer *peer, bool is_outgoing,
						   size_t slot)
{
	struct layer_rdm_chan *rchan;

	rchan = calloc(1, sizeof(*rchan));
	if (!rchan)
		return NULL;
	rchan->chan.core = &rcore->core;
	rchan->chan.core_ep = rcore->ep;
	rchan->chan.dgram = rcore->dg;
	rchan->chan.core_addr = peer->core_addr;
	rchan->chan.is_outgoing = is_outgoing;
	rchan->chan.key_slot = (uint16_t) slot;
	memcpy(rchan->chan.peer_addr, peer->addr, rcore->core.addrlen);
	rchan->peer = peer;
	util_dlist_init(&rchan->peer_link);
	return rchan;
}

/* Posts a handshake message, or queues it while the core is full: 0 or -FI_E*. */
static int layer_rdm_ctl_post(struct layer_rdm_core *rcore, struct layer_rdm_ctl *ctl)
{
	struct iovec iov = { .iov_base = &ctl->hdr, .iov_len = ctl->len };
	fi_addr_t dest = ctl->peer->core_addr;
	ssize_t ret;

	if (rcore->dg) {
		ret = layer_dgram_inject(rcore->dg, &ctl->hdr, ctl->len, dest);
		if (!ret)
			free(ctl);
	} else if (ctl->len <= rcore->core.inject_size) {
		ret = fi_inject(rcore->ep, &ctl->hdr, ctl->len, dest);
		if (!ret)
			free(ctl);
	} else {
		ret = fi_sendv(rcore->ep, &iov, NULL, 1, dest, &ctl->ctx);
		if (!ret)
			util_dlist_insert_tail(&ctl->link, &rcore->ctl_posted);
	}
	if (ret == -FI_EAGAIN) {
		util_dlist_insert_tail(&ctl->link, &rcore->ctl_queue);
		return 0;
	}
	if (ret)
		free(ctl);
	return (int) ret;
}

/* A handshake message of op to peer with data after the header: 0 or -FI_E*. */
static int layer_rdm_ctl_send(struct layer_rdm_core *rcore, struct layer_rdm_peer *peer,
			      enum layer_op op, size_t slot, uint64_t value, const void *data,
			      size_t len)
{
	struct layer_rdm_ctl *ctl;

	ctl = calloc(1, sizeof(*ctl));
	if (!ctl)
		return -FI_ENOMEM;
	ctl->ctx.type = LAYER_CTX_CTRL;
	ctl->peer = peer;
	ctl->hdr = (struct layer_hdr) {
		.version = LAYER_PROTO_VERSION,
		.op = (uint8_t) op,
		.size = len,
		.data = value,
		.msg_id = slot,
	};
	if (len)
		memcpy(ctl->data, data, len);
	ctl->len = sizeof(ctl->hdr) + len;
	/* the core's send takes header and data as one buffer */
	_Static_assert(offsetof(struct layer_rdm_ctl, data) ==
		       offsetof(struct layer_rdm_ctl, hdr) + sizeof(struct layer_hdr),
		       "handshake data follows its header");
	return layer_rdm_ctl_post(rcore, ctl);
}

/* Announces our key slot to its peer: the HELLO carries our address, then the key. */
static int layer_rdm_send_hello(struct layer_rdm_core *rcore, struct layer_rdm_peer *peer,
				size_t slot)
{
	struct layer_rdm_out_slot *out = &peer->out[slot];
	uint8_t data[LAYER_ADDR_MAX + LAYER_AUTH_KEY_MAX];
	size_t addrlen = rcore->core.addrlen;
	int ret;

	memcpy(data, rcore->core.addr, addrlen);
	memcpy(data + addrlen, out->key.bytes, out->key.len);
	ret = layer_rdm_ctl_send(rcore, peer, LAYER_OP_HELLO, slot, 0, data,
				 addrlen + out->key.len);
	if (!ret)
		out->is_hello_sent = true;
	return ret;
}

/* Fails chan: unlinked from its peer first, so that the caller's walk moves on. */
static void layer_rdm_chan_fail(struct layer_rdm_core *rcore, struct layer_rdm_chan *rchan,
				int err)
{
	util_dlist_remove(&rchan->peer_link);
	rcore->core.up->failed(rcore->core.up_arg, &rchan->chan, err);
}

static void layer_rdm_peer_fail(struct layer_rdm_core *rcore, struct layer_rdm_peer *peer,
				int err)
{
	struct util_dlist *item;
	size_t i;

	FI_INFO(&layer_prov, FI_LOG_EP_CTRL, "peer lost: %s\n", fi_strerror(err));
	/* It may come back as a new process that has never heard of us. */
	for (i = 0; i < peer->out_cnt; i++) {
		peer->out[i].is_hello_sent = false;
		peer->out[i].is_acked = false;
	}
	peer->is_failing = true;
	/* its slots keep what was decided: what it sends next opens a channel again */
	for (i = 0; i < peer->in_cnt; i++) {
		if (peer->in[i].chan)
			layer_rdm_chan_fail(rcore, peer->in[i].chan, err);
		peer->in[i].chan = NULL;
	}
	while ((item = util_dlist_pop_front(&peer->out_chans)))
		layer_rdm_chan_fail(rcore, container_of(item, struct layer_rdm_chan, peer_link),
				    err);
	peer->is_failing = false;
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
		LAYER_WARN_ONCE(FI_LOG_EP_CTRL, "more than %d keys used with one peer\n",
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

static int layer_rdm_connect(struct layer_core *core, const void *addr,
			     const struct layer_key *key, struct layer_chan **chan, bool *is_up)
{
	struct layer_rdm_core *rcore = layer_rdm_core_of(core);
	struct layer_rdm_out_slot *out;
	struct layer_rdm_peer *peer;
	struct layer_rdm_chan *rchan;
	size_t slot;
	int ret;

	ret = layer_rdm_peer_get(rcore, addr, &peer);
	if (!ret)
		ret = layer_rdm_out_slot(peer, key, &slot);
	if (ret)
		return ret;
	out = &peer->out[slot];
	if (!out->is_acked && !out->is_hello_sent) {
		ret = layer_rdm_send_hello(rcore, peer, slot);
		if (ret)
			return ret;
	}
	rchan = layer_rdm_chan_alloc(rcore, peer, true, slot);
	if (!rchan)
		return -FI_ENOMEM;
	util_dlist_insert_tail(&rchan->peer_link, &peer->out_chans);
	*is_up = out->is_acked;
	if (out->is_acked) {
		rchan->chan.tx_eager = out->tx_eager;
		rchan->chan.tx_rma_eager = out->tx_eager;
	}
	*chan = &rchan->chan;
	return 0;
}

static void layer_rdm_chan_close(struct layer_chan *chan)
{
	struct layer_rdm_chan *rchan = layer_rdm_chan_of(chan);
	struct layer_rdm_core *rcore = layer_rdm_core_of(chan->core);
	struct layer_rdm_peer *peer = rchan->peer;
	struct layer_rdm_out_slot *out;
	struct util_dlist *item;

	if (!peer)
		return;
	rchan->peer = NULL;
	if (!chan->is_outgoing) {
		if (chan->key_slot < peer->in_cnt && peer->in[chan->key_slot].chan == rchan)
			peer->in[chan->key_slot].chan = NULL;
		return;
	}
	util_dlist_remove(&rchan->peer_link);
	/*
	 * Its HELLO may have gone down with it (a removed AV entry): if another channel of the
	 * slot still waits for the peer, the slot says it again; a second answer does no harm.
	 */
	out = &peer->out[chan->key_slot];
	if (out->is_acked || peer->is_failing)
		return;
	out->is_hello_sent = false;
	util_dlist_foreach(&peer->out_chans, item) {
		if (container_of(item, struct layer_rdm_chan, peer_link)->chan.key_slot !=
		    chan->key_slot)
			continue;
		if (layer_rdm_send_hello(rcore, peer, chan->key_slot))
			layer_rdm_peer_fail(rcore, peer, FI_ENOMEM);
		return;
	}
}

/* Nothing of the core is the channel's own: it goes once its connection has. */
static void layer_rdm_chan_free(struct layer_chan *chan, int err)
{
	layer_rdm_chan_close(chan);
	free(layer_rdm_chan_of(chan));
}

/* A channel that carried nothing holds nothing of the core (RDM channels are one way, so
 * the connection layer has no reason to drop one today). */
static void layer_rdm_chan_drop(struct layer_chan *chan)
{
	chan->conn = NULL;
	layer_rdm_chan_free(chan, 0);
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

/* Makes room for the peer's slot in peer->in: 0 or -FI_ENOMEM. */
static int layer_rdm_in_grow(struct layer_rdm_peer *peer, size_t slot)
{
	struct layer_rdm_in_slot *in;
	size_t cnt;

	if (slot < peer->in_cnt)
		return 0;
	cnt = UTIL_MAX(peer->in_cnt * 2, (size_t) 4);
	while (cnt <= slot)
		cnt *= 2;
	in = realloc(peer->in, cnt * sizeof(*in));
	if (!in)
		return -FI_ENOMEM;
	memset(in + peer->in_cnt, 0, (cnt - peer->in_cnt) * sizeof(*in));
	peer->in = in;
	peer->in_cnt = cnt;
	return 0;
}

static void layer_rdm_drop(struct layer_rdm_core *rcore, struct layer_buf *buf, const char *why)
{
	layer_core_dropped(&rcore->core, buf, why);
	layer_core_repost(&rcore->core, buf);
}

/*
 * The incoming channel of an accepted slot, opened again (its key taken once more by the
 * connection layer) when the last one failed while the peer went on sending; NULL for a slot
 * never announced or refused, or without memory.
 */
static struct layer_rdm_chan *layer_rdm_in_chan(struct layer_rdm_core *rcore,
						struct layer_rdm_peer *peer, size_t slot)
{
	struct layer_rdm_in_slot *in = &peer->in[slot];
	struct layer_rdm_chan *rchan;
	int ret;

	if (in->chan || in->state != LAYER_RDM_SLOT_ACCEPTED)
		return in->chan;
	rchan = layer_rdm_chan_alloc(rcore, peer, false, slot);
	if (!rchan)
		return NULL;
	/* the peer sent to us, so its core AV holds our address: replies reach it */
	ret = rcore->core.up->accept(rcore->core.up_arg, &rchan->chan, &in->key);
	if (ret) {
		free(rchan);
		if (ret == -FI_EACCES)
			in->state = LAYER_RDM_SLOT_REFUSED;
		return NULL;
	}
	in->chan = rchan;
	rcore->core.up->connected(rcore->core.up_arg, &rchan->chan);
	return rchan;
}

/*
 * Decides a slot announced (again) with key: the connection layer takes a channel for it, or
 * refuses the key. A slot announced again with another key (a new process there) loses its
 * channel first. Returns the answer to send, or LAYER_OP_MAX for none (no memory).
 */
static enum layer_op layer_rdm_in_decide(struct layer_rdm_core *rcore,
					 struct layer_rdm_peer *peer, size_t slot,
					 const struct layer_key *key)
{
	struct layer_rdm_in_slot *in = &peer->in[slot];

	if (in->state == LAYER_RDM_SLOT_UNKNOWN || !layer_key_equal(&in->key, key)) {
		if (in->chan)
			layer_rdm_chan_fail(rcore, in->chan, FI_ECONNRESET);
		in->chan = NULL;
		in->state = LAYER_RDM_SLOT_ACCEPTED;
		in->key = *key;
	}
	if (layer_rdm_in_chan(rcore, peer, slot))
		return LAYER_OP_HELLO_ACK;
	return in->state == LAYER_RDM_SLOT_REFUSED ? LAYER_OP_HELLO_NAK : LAYER_OP_MAX;
}

/*
 * A HELLO: its sender is named by the address it carries, whatever the core's source says;
 * the key after the address (none: a peer without a key) decides the slot's fate.
 */
static void layer_rdm_handle_hello(struct layer_rdm_core *rcore, struct layer_buf *buf)
{
	const struct layer_hdr *hdr = layer_buf_hdr(buf);
	size_t addrlen = rcore->core.addrlen, slot = hdr->msg_id;
	uint8_t addr[LAYER_ADDR_MAX];
	struct layer_rdm_peer *peer;
	struct layer_key key;
	enum layer_op answer;

	if (hdr->size < addrlen || hdr->size > addrlen + LAYER_AUTH_KEY_MAX || hdr->flags ||
	    hdr->msg_id >= LAYER_KEY_SLOT_MAX ||
	    layer_addr_normalize(rcore->core.domain->addr_format, hdr + 1, addrlen, addr)) {
		layer_rdm_drop(rcore, buf, "malformed hello");
		return;
	}
	key.len = (uint8_t) (hdr->size - addrlen);
	memcpy(key.bytes, buf->data + sizeof(*hdr) + addrlen, key.len);
	if (layer_rdm_peer_get(rcore, addr, &peer)) {
		layer_rdm_drop(rcore, buf, "hello from an address the core refuses");
		return;
	}
	if (layer_rdm_in_grow(peer, slot)) {
		layer_rdm_drop(rcore, buf, "no memory for a hello");
		return;
	}
	answer = layer_rdm_in_decide(rcore, peer, slot, &key);
	if (answer == LAYER_OP_HELLO_NAK)
		layer_core_refused(&rcore->core, "a hello");
	/* The answer says what our buffers take: the peer sends eager no more than that. */
	if (answer == LAYER_OP_MAX ||
	    layer_rdm_ctl_send(rcore, peer, answer, slot, rcore->core.buf_size - LAYER_HDR_SIZE,
			       NULL, 0)) {
		layer_rdm_drop(rcore, buf, "no memory to answer a hello");
		return;
	}
	layer_core_repost(&rcore->core, buf);
}

/* The peer answered the HELLO of one of our slots. */
static void layer_rdm_handle_answer(struct layer_rdm_core *rcore, struct layer_rdm_peer *peer,
				    const struct layer_hdr *hdr)
{
	struct layer_rdm_out_slot *out;
	struct layer_rdm_chan *rchan;
	struct util_dlist *item, *tmp;

	if (hdr->msg_id >= peer->out_cnt)
		return;
	out = &peer->out[hdr->msg_id];
	if (hdr->op == LAYER_OP_HELLO_ACK) {
		out->is_acked = true;
		/* at least the inject size, which every buffer holds */
		out->tx_eager = UTIL_MAX(UTIL_MIN(hdr->data, (uint64_t) LAYER_EAGER_MAX),
					 (uint64_t) LAYER_INJECT_SIZE);
	} else {
		/* reported by the sends' error completions */
		FI_INFO(&layer_prov, FI_LOG_EP_CTRL, "peer refused this endpoint's "
			"authorization key: sends to it fail\n");
		/* the next send to the peer with that key says HELLO again */
		out->is_acked = false;
		out->is_hello_sent = false;
		/* its channels go without saying HELLO again */
		peer->is_failing = true;
	}
	util_dlist_foreach_safe(&peer->out_chans, item, tmp) {
		rchan = container_of(item, struct layer_rdm_chan, peer_link);
		if (rchan->chan.key_slot != hdr->msg_id)
			continue;
		if (out->is_acked) {
			rchan->chan.tx_eager = out->tx_eager;
			rchan->chan.tx_rma_eager = out->tx_eager;
			rcore->core.up->connected(rcore->core.up_arg, &rchan->chan);
		} else {
			layer_rdm_chan_fail(rcore, rchan, FI_EACCES);
		}
	}
	peer->is_failing = false;
}

/*
 * What arrives goes up on the channel it belongs to: data on its key slot's, a reply on one
 * of the channels that send to the peer. The rest is handled or dropped here.
 */
static void layer_rdm_handle_buf(struct layer_rdm_core *rcore, struct layer_buf *buf,
				 size_t len, fi_addr_t src)
{
	const struct layer_hdr *hdr = layer_buf_hdr(buf);
	struct layer_rdm_in_slot *in;
	struct layer_rdm_chan *rchan;
	struct layer_rdm_peer *peer;

	buf->len = len;
	if (unlikely(!layer_hdr_is_valid(hdr, len))) {
		layer_rdm_drop(rcore, buf, "malformed");
		return;
	}
	if (unlikely(hdr->op == LAYER_OP_HELLO)) {
		layer_rdm_handle_hello(rcore, buf);
		return;
	}
	peer = layer_rdm_peer_by_src(rcore, src);
	if (unlikely(!peer)) {
		layer_rdm_drop(rcore, buf, "unknown source");
		return;
	}
	switch (hdr->op) {
	case LAYER_OP_EAGER:
	case LAYER_OP_RTS:
	case LAYER_OP_WRITE:
	case LAYER_OP_WRITE_RTS:
	case LAYER_OP_READ_REQ:
	case LAYER_OP_ATOMIC:
	case LAYER_OP_PING:
		/* the peer's requests, on its key slot */
		in = hdr->key_slot < peer->in_cnt ? &peer->in[hdr->key_slot] : NULL;
		rchan = in ? layer_rdm_in_chan(rcore, peer, hdr->key_slot) : NULL;
		if (unlikely(!rchan)) {
			layer_core_refused(&rcore->core, in && in->state == LAYER_RDM_SLOT_REFUSED ?
					   "a message of a refused key" :
					   "a message on a key slot never announced");
			layer_core_repost(&rcore->core, buf);
			return;
		}
		buf->ctx.chan = &rchan->chan;
		break;
	case LAYER_OP_HELLO_ACK:
	case LAYER_OP_HELLO_NAK:
		layer_rdm_handle_answer(rcore, peer, hdr);
		layer_core_repost(&rcore->core, buf);
		return;
	default:
		/* ACK, PACE, UNPACE, READ_RESP: about our sends to the peer */
		if (unlikely(util_dlist_empty(&peer->out_chans))) {
			layer_rdm_drop(rcore, buf, "a reply from a peer this endpoint sends nothing "
				       "to");
			return;
		}
		buf->ctx.chan = &container_of(peer->out_chans.next, struct layer_rdm_chan,
					     peer_link)->chan;
		break;
	}
	rcore->core.up->recv(rcore->core.up_arg, buf);
}

/* An operation failed: alone, unless the error says the peer is gone. */
static void layer_rdm_op_failed(struct layer_rdm_core *rcore, struct layer_ctx *ctx, int err)
{
	struct layer_rdm_ctl *ctl;
	struct layer_rdm_peer *peer;

	if (ctx->type == LAYER_CTX_CTRL) {
		ctl = container_of(ctx, struct layer_rdm_ctl, ctx);
		util_dlist_remove(&ctl->link);
		/* without its HELLO the peer can never name us: nothing for it would go */
		if (ctl->hdr.op == LAYER_OP_HELLO && !ctl->peer->is_failing)
			layer_rdm_peer_fail(rcore, ctl->peer, err);
		free(ctl);
		return;
	}
	peer = layer_rdm_chan_of(ctx->chan)->peer;
	if (peer && !peer->is_failing && layer_rdm_err_is_peer_lost(err))
		layer_rdm_peer_fail(rcore, peer, err);
	rcore->core.up->done(rcore->core.up_arg, ctx, err);
}

static void layer_rdm_handle_error(struct layer_rdm_core *rcore,
				   const struct fi_cq_err_entry *err)
{
	struct layer_ctx *ctx = err->op_context;
	struct layer_buf *buf;

	if (!ctx)
		return;
	if (ctx->type != LAYER_CTX_BUF) {
		layer_rdm_op_failed(rcore, ctx, err->err ? err->err : FI_EIO);
		return;
	}
	/* A receive on the shared endpoint fails alone (a truncated message, say). */
	buf = container_of(ctx, struct layer_buf, ctx);
	util_dlist_remove(&buf->link);
	rcore->posted_cnt--;
	if (err->err == FI_ECANCELED) {
		layer_core_buf_put(&rcore->core, buf);
		return;
	}
	buf->len = err->len;
	layer_rdm_drop(rcore, buf, fi_strerror(err->err ? err->err : FI_EIO));
}

/* Handshake messages the core had no room for, in order. */
static void layer_rdm_flush_ctl(struct layer_rdm_core *rcore)
{
	struct util_dlist queue = UTIL_DLIST_INIT(queue);
	struct util_dlist *item;
	struct layer_rdm_ctl *ctl;

	/* each goes back on the queue if the core is still full */
	while ((item = util_dlist_pop_front(&rcore->ctl_queue)))
		util_dlist_insert_tail(item, &queue);
	while ((item = util_dlist_pop_front(&queue))) {
		ctl = container_of(item, struct layer_rdm_ctl, link);
		if (layer_rdm_ctl_post(rcore, ctl) && ctl->hdr.op == LAYER_OP_HELLO)
			layer_rdm_peer_fail(rcore, ctl->peer, FI_EIO);
	}
}

static void layer_rdm_progress(struct layer_core *core)
{
	struct layer_rdm_core *rcore = layer_rdm_core_of(core);
	struct layer_mr_domain *mr = &core->domain->mr;
	struct fi_cq_msg_entry comp[64];
	fi_addr_t src[64];
	struct fi_cq_err_entry err;
	size_t batch = UTIL_MIN(layer_settings.cq_batch, UTIL_ARRAY_SIZE(comp));
	struct layer_rdm_ctl *ctl;
	struct layer_ctx *ctx;
	struct layer_buf *buf;
	ssize_t ret, i;

	if (unlikely(!util_dlist_empty(&rcore->ctl_queue)))
		layer_rdm_flush_ctl(rcore);
	if (rcore->dg) {
		/* peers' reads are served in here too, from the domain's map (mr.h) */
		layer_dgram_progress(rcore->dg);
		return;
	}
	for (;;) {
		/* The core serves peers' reads in here, looking their keys up in the map other
		 * endpoints of the domain register into and close from (mr.h). */
		util_lock_acquire(&mr->lock);
		ret = fi_cq_readfrom(core->cq, comp, batch, src);
		util_lock_release(&mr->lock);
		if (ret == -FI_EAVAIL) {
			memset(&err, 0, sizeof(err));
			if (fi_cq_readerr(core->cq, &err, 0) == 1)
				layer_rdm_handle_error(rcore, &err);
			continue;
		}
		if (ret <= 0)
			return;
		for (i = 0; i < ret; i++) {
			ctx = comp[i].op_context;
			switch (ctx->type) {
			case LAYER_CTX_BUF:
				buf = container_of(ctx, struct layer_buf, ctx);
				util_dlist_remove(&buf->link);
				rcore->posted_cnt--;
				layer_rdm_handle_buf(rcore, buf, comp[i].len, src[i]);
				break;
			case LAYER_CTX_CTRL:
				ctl = container_of(ctx, struct layer_rdm_ctl, ctx);
				util_dlist_remove(&ctl->link);
				free(ctl);
				break;
			default:
				core->up->done(core->up_arg, ctx, 0);
				break;
			}
		}
		if ((size_t) ret < batch)
			return;
	}
}

static int layer_rdm_trywait(struct layer_core *core)
{
	struct fid *fids[1] = { &core->cq->fid };

	/* Handshakes to retry, or nothing to sleep on (a core CQ without a wait fd: shm). */
	if (!util_dlist_empty(&layer_rdm_core_of(core)->ctl_queue) || core->cq_fd < 0)
		return -FI_EAGAIN;
	if (layer_rdm_core_of(core)->dg)
		return layer_dgram_trywait(layer_rdm_core_of(core)->dg);
	return fi_trywait(core->domain->fabric->core_fabric, fids, 1);
}

static void layer_rdm_release_bufs(struct layer_rdm_core *rcore)
{
	struct util_dlist *item;

	while ((item = util_dlist_pop_front(&rcore->posted_bufs)))
		layer_core_buf_put(&rcore->core, container_of(item, struct layer_buf, link));
	rcore->posted_cnt = 0;
}

/* Over a datagram core: what the transport calls (dgram.h). */

/* A message starts arriving: it takes the first posted buffer. */
static struct layer_buf *layer_rdm_dg_buf(void *arg)
{
	struct layer_rdm_core *rcore = arg;
	struct util_dlist *item;

	item = util_dlist_pop_front(&rcore->posted_bufs);
	if (!item)
		return NULL;
	rcore->posted_cnt--;
	return container_of(item, struct layer_buf, link);
}

static void layer_rdm_dg_recv(void *arg, struct layer_buf *buf, size_t len, fi_addr_t src)
{
	layer_rdm_handle_buf(arg, buf, len, src);
}

/* Sends and reads of the layers above (handshakes go as injects and never complete). */
static void layer_rdm_dg_done(void *arg, struct layer_ctx *ctx, int err)
{
	struct layer_rdm_core *rcore = arg;

	rcore->core.up->done(rcore->core.up_arg, ctx, err);
}

static void layer_rdm_dg_peer_lost(void *arg, fi_addr_t src, int err)
{
	struct layer_rdm_core *rcore = arg;
	struct layer_rdm_peer *peer = layer_rdm_peer_by_src(rcore, src);

	if (peer && !peer->is_failing)
		layer_rdm_peer_fail(rcore, peer, err);
}

static const struct layer_dgram_upcalls layer_rdm_dg_upcalls = {
	.buf = layer_rdm_dg_buf,
	.recv = layer_rdm_dg_recv,
	.done = layer_rdm_dg_done,
	.peer_lost = layer_rdm_dg_peer_lost,
};

static int layer_rdm_enable_dgram(struct layer_rdm_core *rcore)
{
	struct layer_core *core = &rcore->core;
	int ret;

	ret = layer_dgram_open(core, &layer_rdm_dg_upcalls, rcore, &rcore->dg);
	if (ret)
		return ret;
	/*
	 * The transport copies what it sends and names peers' memory by virtual address. A
	 * message up to the provider's inject size completes once copied, as over the other
	 * cores (an inject); a larger one once the peer acknowledged it (transmit complete),
	 * so that a send into a peer that is lost fails instead of vanishing.
	 */
	core->iov_limit = LAYER_IOV_LIMIT + 1;
	core->has_virt_addr = true;
	core->inject_size = LAYER_HDR_SIZE + LAYER_INJECT_SIZE;
	core->has_liveness = true;
	layer_rdm_refill(core, SIZE_MAX);
	if (rcore->posted_cnt < rcore->buf_target) {
		layer_dgram_close(rcore->dg);
		rcore->dg = NULL;
		layer_rdm_release_bufs(rcore);
		return -FI_ENOMEM;
	}
	return 0;
}

static int layer_rdm_enable(struct layer_core *core, size_t tx_size)
{
	struct layer_rdm_core *rcore = layer_rdm_core_of(core);
	struct fi_av_attr av_attr = { .type = FI_AV_TABLE };
	struct layer_domain *domain = core->domain;
	uint8_t raw[LAYER_ADDR_MAX];
	size_t addrlen = sizeof(raw);
	int ret;

	rcore->buf_target = layer_settings.rx_buf_cnt * LAYER_RDM_BUF_FACTOR;
	/* The core must take every buffer the endpoint keeps posted, and every send. */
	if (core->info->rx_attr->size < rcore->buf_target)
		core->info->rx_attr->size = rcore->buf_target;
	if (core->info->tx_attr->size < tx_size)
		core->info->tx_attr->size = tx_size;
	if (core->info->ep_attr->type == FI_EP_DGRAM)
		return layer_rdm_enable_dgram(rcore);

	ret = fi_av_open(domain->core_domain, &av_attr, &rcore->av, rcore);
	if (ret)
		return ret;
	ret = fi_endpoint(domain->core_domain, core->info, &rcore->ep, rcore);
	if (ret)
		goto err_close_av;
	ret = fi_ep_bind(rcore->ep, &rcore->av->fid, 0);
	if (ret)
		goto err_close_ep;
	ret = fi_ep_bind(rcore->ep, &core->cq->fid, FI_TRANSMIT | FI_RECV);
	if (ret)
		goto err_close_ep;
	ret = fi_enable(rcore->ep);
	if (ret)
		goto err_close_ep;
	ret = fi_getname(&rcore->ep->fid, raw, &addrlen);
	if (ret)
		goto err_close_ep;
	ret = layer_addr_normalize(domain->addr_format, raw, addrlen, core->addr);
	if (ret)
		goto err_close_ep;
	core->addrlen = domain->addrlen;

	layer_rdm_refill(core, SIZE_MAX);
	if (rcore->posted_cnt < rcore->buf_target) {
		ret = -FI_ENOMEM;
		FI_WARN(&layer_prov, FI_LOG_EP_CTRL, "posting receive buffers failed\n");
		goto err_close_ep;
	}
	return 0;

err_close_ep:
	fi_close(&rcore->ep->fid);
	rcore->ep = NULL;
	layer_rdm_release_bufs(rcore);
err_close_av:
	fi_close(&rcore->av->fid);
	rcore->av = NULL;
	return ret;
}

static void layer_rdm_close(struct layer_core *core)
{
	struct layer_rdm_core *rcore = layer_rdm_core_of(core);
	struct layer_rdm_peer *peer, *tmp;
	struct util_dlist *item;

	/* Closing the core endpoint discards what it holds: no completions follow. */
	if (rcore->ep) {
		fi_close(&rcore->ep->fid);
		rcore->ep = NULL;
	}
	if (rcore->dg) {
		layer_dgram_close(rcore->dg);
		rcore->dg = NULL;
	}
	layer_rdm_release_bufs(rcore);
	while ((item = util_dlist_pop_front(&rcore->ctl_queue)))
		free(container_of(item, struct layer_rdm_ctl, link));
	while ((item = util_dlist_pop_front(&rcore->ctl_posted)))
		free(container_of(item, struct layer_rdm_ctl, link));
	HASH_ITER(hh, rcore->by_addr, peer, tmp) {
		/* the channels are the connection layer's to free: they forget their peer */
		while ((item = util_dlist_pop_front(&peer->out_chans)))
			container_of(item, struct layer_rdm_chan, peer_link)->peer = NULL;
		for (size_t i = 0; i < peer->in_cnt; i++) {
			if (peer->in[i].chan)
				peer->in[i].chan->peer = NULL;
		}
		HASH_DEL(rcore->by_addr, peer);
		free(peer->in);
		free(peer->out);
		free(peer);
	}
	free(rcore->by_core_addr);
	rcore->by_core_addr = NULL;
	rcore->by_core_addr_cnt = 0;
	if (rcore->av) {
		fi_close(&rcore->av->fid);
		rcore->av = NULL;
	}
}

static const struct layer_core_ops layer_core_rdm_ops = {
	.has_shared_ep = true,
	.enable = layer_rdm_enable,
	.connect = layer_rdm_connect,
	.chan_close = layer_rdm_chan_close,
	.chan_free = layer_rdm_chan_free,
	.chan_drop = layer_rdm_chan_drop,
	.progress = layer_rdm_progress,
	.trywait = layer_rdm_trywait,
	.post_buf = layer_rdm_post_buf,
	.refill = layer_rdm_refill,
	.close = layer_rdm_close,
};

struct layer_core *layer_core_rdm_alloc(void)
{
	struct layer_rdm_core *rcore;

	rcore = calloc(1, sizeof(*rcore));
	if (!rcore)
		return NULL;
	rcore->core.ops = &layer_core_rdm_ops;
	util_dlist_init(&rcore->posted_bufs);
	util_dlist_init(&rcore->ctl_queue);
	util_dlist_init(&rcore->ctl_posted);
	return &rcore->core;
}
