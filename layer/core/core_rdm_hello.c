/*
 * The reliable-datagram adapter's handshake (core_rdm.c has the rest).
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
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "layer/addr.h"
#include "layer/core/core_rdm.h"

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
int layer_rdm_send_hello(struct layer_rdm_core *rcore, struct layer_rdm_peer *peer,
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

/* Our slot for key at the peer, a new one (not yet announced) if needed. */
int layer_rdm_out_slot(struct layer_rdm_peer *peer, const struct layer_key *key,
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

/*
 * The incoming channel of an accepted slot, opened again (its key taken once more by the
 * connection layer) when the last one failed while the peer went on sending; NULL for a slot
 * never announced or refused, or without memory.
 */
struct layer_rdm_chan *layer_rdm_in_chan(struct layer_rdm_core *rcore,
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
void layer_rdm_handle_hello(struct layer_rdm_core *rcore, struct layer_buf *buf)
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
void layer_rdm_handle_answer(struct layer_rdm_core *rcore, struct layer_rdm_peer *peer,
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

/* Handshake messages the core had no room for, in order. */
void layer_rdm_flush_ctl(struct layer_rdm_core *rcore)
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
