/* Rings (ring.h). */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "layer/core/core.h"
#include "layer/core/ring.h"
#include "layer/mr.h"

_Static_assert(sizeof(struct layer_ring_ctl) == 64, "ring control block");
_Static_assert(sizeof(struct layer_ring_trailer) == 8, "ring trailer");
_Static_assert(LAYER_RING_MSG_MAX <= UINT8_MAX, "a slot's length fits its trailer");
_Static_assert(LAYER_RING_MSG_MAX >= LAYER_HDR_SIZE + 64, "a slot holds 64 bytes of payload");

/* Refusals in a row after which the messages an offer takes stop doubling. */
#define LAYER_RING_EARN_SHIFT_MAX 10

void layer_rings_init(struct layer_rings *rings, const struct layer_core *core)
{
	uint32_t slots = 1;

	/* from libfabric 1.18 on, tcp's CQs signal nothing a completion would cost: measured
	 * over 2.6, rings slowed an 8-byte ping-pong by a tenth */
	rings->max = layer_settings.ring_active != SIZE_MAX ? (uint32_t) layer_settings.ring_active :
		     FI_VERSION_LT(fi_version(), FI_VERSION(1, 18)) ? LAYER_RING_ACTIVE_DEFAULT : 0;
	rings->earn = (uint32_t) layer_settings.ring_earn;
	rings->idle_ms = layer_settings.ring_idle_ms;
	/* the core writes (tcp), a whole slot in one inject, at virtual addresses or offsets */
	if (!layer_settings.ring_slots || !rings->max || !(core->info->caps & FI_RMA) ||
	    core->inject_size < LAYER_RING_SLOT || core->domain->mr.is_soft)
		return;
	while (slots * 2 <= UTIL_MIN(layer_settings.ring_slots, (size_t) LAYER_RING_SLOTS_MAX))
		slots *= 2;
	rings->slots = slots;
}

static inline uint8_t *layer_ring_slot(const struct layer_ring *ring, uint32_t idx)
{
	return ring->region + sizeof(struct layer_ring_ctl) + (size_t) idx * LAYER_RING_SLOT;
}

static inline struct layer_ring_trailer *layer_ring_trailer(uint8_t *slot)
{
	return (struct layer_ring_trailer *) (slot + LAYER_RING_MSG_MAX);
}

/* The slot of our region the next message comes into. */
static inline uint8_t *layer_ring_next(const struct layer_ring *ring)
{
	return layer_ring_slot(ring, ring->taken & (ring->own.slots - 1));
}

int layer_ring_open(struct layer_chan *chan, struct layer_rings *rings,
		    struct layer_ring **ring_out)
{
	struct layer_ring *ring;

	ring = calloc(1, sizeof(*ring));
	if (!ring)
		return -FI_ENOMEM;
	ring->chan = chan;
	ring->rings = rings;
	util_dlist_init(&ring->link);
	util_dlist_init(&ring->pending_link);
	*ring_out = ring;
	return 0;
}

static void layer_ring_unstage(struct layer_ring *ring)
{
	if (ring->is_staged) {
		ring->is_staged = false;
		ring->chan->core->staged_cnt--;
	}
}

/* ---- regions ---- */

/* A region of rings->slots slots, registered, counted: 0 or -FI_E*. */
static int layer_ring_region_alloc(struct layer_ring *ring)
{
	struct layer_rings *rings = ring->rings;
	struct layer_domain *domain = ring->chan->core->domain;
	struct layer_ring_ctl *ctl;
	int ret;

	ring->region_len = sizeof(struct layer_ring_ctl) + (size_t) rings->slots * LAYER_RING_SLOT;
	if (posix_memalign((void **) &ring->region, 4096, ring->region_len))
		return -FI_ENOMEM;
	/* no trailer holds a number due yet: every slot starts empty */
	memset(ring->region, 0, ring->region_len);
	/* the peer has taken every slot we wrote so far (rings end with all taken) */
	ctl = (struct layer_ring_ctl *) ring->region;
	ctl->taken = ring->sent;
	ret = layer_mr_core_reg(domain, ring->region, ring->region_len, FI_REMOTE_WRITE,
				&ring->mr);
	if (ret) {
		free(ring->region);
		ring->region = NULL;
		return ret;
	}
	ring->own.addr = ring->chan->core->has_virt_addr ? (uint64_t) (uintptr_t) ring->region : 0;
	ring->own.key = fi_mr_key(ring->mr);
	ring->own.slots = rings->slots;
	ring->taken_told = ring->taken;
	ring->used_ms = rings->now_ms;
	util_dlist_insert_tail(&ring->link, &rings->active);
	rings->cnt++;
	return 0;
}

/* The peer writes into it no more, and what it wrote is taken. */
static void layer_ring_region_free(struct layer_ring *ring)
{
	if (!ring->region)
		return;
	util_dlist_remove(&ring->link);
	ring->rings->gen++;
	ring->rings->cnt--;
	layer_mr_core_close(ring->chan->core->domain, ring->mr);
	free(ring->region);
	ring->region = NULL;
	ring->mr = NULL;
}

void layer_ring_stop(struct layer_ring *ring)
{
	layer_ring_unstage(ring);
	ring->is_stopped = true;
	ring->state = LAYER_RING_NONE;
	if (ring->pending_op) {
		ring->pending_op = 0;
		util_dlist_remove(&ring->pending_link);
	}
	/* out of the polled list now, the region freed with the ring (layer_ring_close) */
	if (ring->region) {
		util_dlist_remove(&ring->link);
		ring->rings->gen++;
	}
}

void layer_ring_close(struct layer_ring *ring)
{
	layer_ring_stop(ring);
	if (ring->region) {
		ring->rings->cnt--;
		layer_mr_core_close(ring->chan->core->domain, ring->mr);
		free(ring->region);
	}
	free(ring);
}

/* ---- writing ---- */

/* A slot image of the message buf (len bytes, at most LAYER_RING_MSG_MAX), numbered num. */
static void layer_ring_fill(const struct layer_ring *ring, uint8_t *slot, const void *buf,
			    size_t len, uint32_t num)
{
	struct layer_ring_trailer *trailer = layer_ring_trailer(slot);

	memcpy(slot, buf, len);
	memset(slot + len, 0, LAYER_RING_MSG_MAX - len);
	*trailer = (struct layer_ring_trailer) {
		.msgs = (uint16_t) ring->msgs_sent,
		.len = (uint8_t) len,
		.num = num,
	};
}

/* Puts the message buf after the one the staged slot holds, if both fit: whether it did. */
static bool layer_ring_append(uint8_t *slot, const void *buf, size_t len)
{
	struct layer_ring_trailer *trailer = layer_ring_trailer(slot);

	if (trailer->first_len || trailer->len + len > LAYER_RING_MSG_MAX)
		return false;
	memcpy(slot + trailer->len, buf, len);
	trailer->first_len = trailer->len;
	trailer->len = (uint8_t) (trailer->len + len);
	return true;
}

/* Writes the slot image numbered num into the peer's region: 0, or the core's error. */
static ssize_t layer_ring_put(struct layer_ring *ring, const uint8_t *slot, uint32_t num)
{
	uint32_t idx = (num - 1) & (ring->peer.slots - 1);

	return layer_core_inject_write(ring->chan, slot, LAYER_RING_SLOT,
				       ring->peer.addr + sizeof(struct layer_ring_ctl) +
				       (uint64_t) idx * LAYER_RING_SLOT, ring->peer.key);
}

ssize_t layer_ring_flush(struct layer_ring *ring)
{
	ssize_t ret;

	if (!ring->is_staged)
		return 0;
	ret = layer_ring_put(ring, ring->stage, ring->sent);
	if (!ret)
		layer_ring_unstage(ring);
	return ret;
}

/*
 * Into the peer's next slot, or with the message in the staged one: 0, -FI_EAGAIN (no ring
 * up, too long, no room, the core busy), or an error of the core. The slot is staged, and
 * written now unless the message may be kept while the core holds what progress sends.
 */
static ssize_t layer_ring_write(struct layer_ring *ring, const void *buf, size_t len,
				bool may_keep)
{
	const volatile struct layer_ring_ctl *ctl = (const struct layer_ring_ctl *) ring->region;
	bool is_kept = may_keep && ring->chan->core->hold;
	uint32_t num = ring->sent + 1;
	ssize_t ret;

	if (ring->state != LAYER_RING_UP || len > LAYER_RING_MSG_MAX)
		return -FI_EAGAIN;
	if (!ring->is_staged || !layer_ring_append(ring->stage, buf, len)) {
		ret = layer_ring_flush(ring);
		if (ret)
			return ret;
		if (num - ctl->taken > ring->peer.slots)
			return -FI_EAGAIN;
		layer_ring_fill(ring, ring->stage, buf, len, num);
		ring->is_staged = true;
		ring->chan->core->staged_cnt++;
		ring->sent = num;
	}
	ring->used_ms = ring->rings->now_ms;
	/* staged, it is sent as far as the layers above know: the core takes it later */
	if (!is_kept)
		(void) layer_ring_flush(ring);
	return 0;
}

/* A message as a message: its header says how many slots went before it. */
static inline void layer_ring_stamp(const struct layer_ring *ring, void *hdr)
{
	((struct layer_hdr *) hdr)->key_slot = (uint16_t) ring->sent;
}

/* A message on the channel's core endpoint, behind the slots written before it. */
static ssize_t layer_ring_inject_msg(struct layer_ring *ring, void *buf, size_t len)
{
	ssize_t ret;

	ret = layer_ring_flush(ring);
	if (ret)
		return ret;
	layer_ring_stamp(ring, buf);
	ret = layer_core_ep_inject(ring->chan, buf, len);
	if (!ret)
		ring->msgs_sent++;
	return ret;
}

ssize_t layer_ring_inject(struct layer_ring *ring, void *buf, size_t len, bool may_keep)
{
	ssize_t ret;

	ret = layer_ring_write(ring, buf, len, may_keep);
	if (ret != -FI_EAGAIN)
		return ret;
	return layer_ring_inject_msg(ring, buf, len);
}

ssize_t layer_ring_sendv(struct layer_ring *ring, const struct iovec *iov, size_t count,
			 struct layer_ctx *ctx)
{
	ssize_t ret;

	ret = layer_ring_flush(ring);
	if (ret)
		return ret;
	layer_ring_stamp(ring, iov[0].iov_base);
	ret = layer_core_ep_sendv(ring->chan, iov, count, ctx);
	if (!ret)
		ring->msgs_sent++;
	return ret;
}

/* ---- the rings' own messages ---- */

/* Sends op (with our offer for OFFER and ACCEPT): 0, or the core's error. */
static ssize_t layer_ring_send_ctl(struct layer_ring *ring, unsigned op)
{
	struct {
		struct layer_hdr hdr;
		struct layer_ring_offer offer;
	} msg = {
		.hdr = {
			.version = LAYER_PROTO_VERSION,
			.op = (uint8_t) op,
		},
		.offer = ring->own,
	};
	size_t len = op == LAYER_OP_RING_RELEASE ? sizeof(msg.hdr) : sizeof(msg);

	return layer_ring_inject_msg(ring, &msg, len);
}

/* Sends op now, or once the core takes it (progress tries again). */
static void layer_ring_say(struct layer_ring *ring, unsigned op)
{
	if (!layer_ring_send_ctl(ring, op))
		return;
	if (!ring->pending_op)
		util_dlist_insert_tail(&ring->pending_link, &ring->rings->pending);
	ring->pending_op = (uint8_t) op;
}

/* What follows a RING_* message that went: a release answered ends the ring. */
static void layer_ring_said(struct layer_ring *ring, unsigned op)
{
	if (op == LAYER_OP_RING_RELEASE && ring->is_answer)
		ring->state = LAYER_RING_NONE;
}

/* A side that received enough offers its region, when it may hold one more. */
static void layer_ring_offer(struct layer_ring *ring)
{
	struct layer_rings *rings = ring->rings;

	/* one step at a time: an answer still to go comes first; and not before the peer's
	 * handshake is in (its data can come before: it may need our id of the channel) */
	if (!rings->slots || rings->cnt >= rings->max || ring->pending_op ||
	    !ring->chan->tx_eager || layer_ring_region_alloc(ring))
		return;
	if (layer_ring_send_ctl(ring, LAYER_OP_RING_OFFER)) {
		/* the core is busy: offered later, if traffic goes on */
		layer_ring_region_free(ring);
		return;
	}
	ring->state = LAYER_RING_OFFERED;
}

/* Stops writing into the peer's region and says so (RING_RELEASE): the slot staged goes
 * first. The region stays until the peer's release comes. */
static void layer_ring_release(struct layer_ring *ring, bool is_answer)
{
	/* an acceptance still to go goes first (idle: released by a later sweep) */
	if (ring->pending_op && !is_answer)
		return;
	ring->state = LAYER_RING_CLOSING;
	ring->is_answer = is_answer;
	if (layer_ring_flush(ring) || layer_ring_send_ctl(ring, LAYER_OP_RING_RELEASE)) {
		if (!ring->pending_op)
			util_dlist_insert_tail(&ring->pending_link, &ring->rings->pending);
		ring->pending_op = LAYER_OP_RING_RELEASE;
		return;
	}
	layer_ring_said(ring, LAYER_OP_RING_RELEASE);
}

static bool layer_ring_offer_ok(const struct layer_ring_offer *offer)
{
	return offer->slots && offer->slots <= LAYER_RING_SLOTS_MAX &&
	       !(offer->slots & (offer->slots - 1));
}

int layer_ring_ctl_arrive(struct layer_ring *ring, struct layer_buf *buf)
{
	const struct layer_hdr *hdr = layer_buf_hdr(buf);
	struct layer_rings *rings = ring->rings;
	struct layer_ring_offer offer;

	/* what comes after its channel failed is for nobody */
	if (ring->is_stopped)
		return 0;
	if (hdr->op != LAYER_OP_RING_RELEASE) {
		memcpy(&offer, layer_buf_payload(buf), sizeof(offer));
		if (!layer_ring_offer_ok(&offer))
			goto err_proto;
	}
	switch (hdr->op) {
	case LAYER_OP_RING_OFFER:
		if (ring->state == LAYER_RING_OFFERED) {
			/* offers crossed: the connecting side's is the one */
			if (ring->chan->is_outgoing)
				return 0;
		} else if (ring->state != LAYER_RING_NONE) {
			goto err_proto;
		} else if (!rings->slots || rings->cnt >= rings->max ||
			   layer_ring_region_alloc(ring)) {
			/* no region to lend: the release is the refusal */
			ring->is_answer = true;
			layer_ring_say(ring, LAYER_OP_RING_RELEASE);
			return 0;
		}
		ring->peer = offer;
		ring->state = LAYER_RING_UP;
		layer_ring_say(ring, LAYER_OP_RING_ACCEPT);
		return 0;
	case LAYER_OP_RING_ACCEPT:
		if (ring->state != LAYER_RING_OFFERED)
			goto err_proto;
		ring->peer = offer;
		ring->state = LAYER_RING_UP;
		ring->earn_shift = 0;
		return 0;
	case LAYER_OP_RING_RELEASE:
		/* every slot the peer wrote into our region is taken: it is free */
		switch (ring->state) {
		case LAYER_RING_OFFERED:
			/* refused: the peer lends its maximum; offered again after more */
			layer_ring_region_free(ring);
			ring->state = LAYER_RING_NONE;
			if (ring->earn_shift < LAYER_RING_EARN_SHIFT_MAX)
				ring->earn_shift++;
			return 0;
		case LAYER_RING_UP:
			layer_ring_region_free(ring);
			layer_ring_release(ring, true);
			return 0;
		case LAYER_RING_CLOSING:
			layer_ring_region_free(ring);
			/* the answer to ours, or crossing it: the end (ours, if still to go,
			 * ends it when it goes) */
			if (!ring->pending_op)
				ring->state = LAYER_RING_NONE;
			ring->is_answer = true;
			return 0;
		default:
			goto err_proto;
		}
	}
err_proto:
	LAYER_WARN_ONCE(FI_LOG_EP_DATA, "a peer sent %s out of its turn (ring %d): closing its "
			"connection\n", layer_op_str(hdr->op), ring->state);
	return -EPROTO;
}

/* ---- reading ---- */

/* Writes the count of the peer's slots taken into the peer's control block. */
static void layer_ring_tell(struct layer_ring *ring)
{
	struct layer_ring_ctl ctl = { .taken = ring->taken };

	/* not now (the core is busy): the next poll tells */
	if (!layer_core_inject_write(ring->chan, &ctl.taken, sizeof(ctl.taken),
				     ring->peer.addr + offsetof(struct layer_ring_ctl, taken),
				     ring->peer.key))
		ring->taken_told = ring->taken;
}

/* A buffer of chan holding len bytes from data, or NULL when none is free. */
static struct layer_buf *layer_ring_buf(struct layer_chan *chan, const uint8_t *data,
					uint32_t len)
{
	struct layer_buf *buf = layer_core_buf_get(chan->core);

	if (!buf)
		return NULL;
	layer_core_buf_reset(buf, chan);
	memcpy(buf->data, data, len);
	buf->len = len;
	return buf;
}

/*
 * The next slot, when it is whole and the messages before it were handed up: 1 when its
 * messages were handed up, 0 when it is not there yet (or no buffer is free), -EPROTO when it
 * cannot be from ofi_layer.
 */
static int layer_ring_take(struct layer_ring *ring)
{
	struct layer_chan *chan = ring->chan;
	struct layer_core *core = chan->core;
	const volatile struct layer_ring_trailer *trailer;
	struct layer_buf *buf, *second = NULL;
	uint32_t len, first_len;
	uint8_t *slot;

	if (!ring->region)
		return 0;
	slot = layer_ring_next(ring);
	trailer = layer_ring_trailer(slot);
	if (trailer->num != ring->taken + 1 || trailer->msgs != (uint16_t) ring->msgs_taken)
		return 0;
	len = trailer->len;
	first_len = trailer->first_len ? trailer->first_len : len;
	if (unlikely(first_len < LAYER_HDR_SIZE || first_len > len || len > LAYER_RING_MSG_MAX ||
		     (first_len < len && len - first_len < LAYER_HDR_SIZE))) {
		LAYER_WARN_ONCE(FI_LOG_EP_DATA, "a peer wrote a ring slot no ofi_layer writes "
				"(%u bytes, the first message %u): closing its connection\n", len,
				first_len);
		return -EPROTO;
	}
	buf = layer_ring_buf(chan, slot, first_len);
	if (!buf)
		return 0;
	if (first_len < len) {
		second = layer_ring_buf(chan, slot + first_len, len - first_len);
		if (!second) {
			layer_core_buf_put(core, buf);
			return 0;
		}
	}
	ring->taken++;
	ring->used_ms = ring->rings->now_ms;
	core->up->recv(core->up_arg, buf);
	if (!second)
		return 1;
	/* the first may have closed the channel: the second goes with it */
	if (chan->ring == ring && ring->region)
		core->up->recv(core->up_arg, second);
	else
		layer_core_buf_put(core, second);
	return 1;
}

bool layer_ring_is_ready(struct layer_ring *ring)
{
	const volatile struct layer_ring_trailer *trailer =
		layer_ring_trailer(layer_ring_next(ring));

	return trailer->num == ring->taken + 1;
}

void layer_ring_before_msg(struct layer_ring *ring, const struct layer_hdr *hdr)
{
	/* they came first on the connection: the core placed them (else the peer broke the
	 * protocol, and the message simply goes first) */
	while (layer_ring_is_behind(ring, hdr) && layer_ring_take(ring) == 1)
		;
}

void layer_ring_after_msg(struct layer_ring *ring)
{
	struct layer_rings *rings = ring->rings;

	ring->msgs_taken++;
	if (ring->state != LAYER_RING_NONE || !rings->slots || ring->is_stopped)
		return;
	/* a busy channel earns a ring: so many messages within the idle time */
	if (rings->now_ms - ring->earn_ms > rings->idle_ms) {
		ring->earn_ms = rings->now_ms;
		ring->earn_cnt = 0;
		/* refusals are forgotten one window at a time */
		if (ring->earn_shift)
			ring->earn_shift--;
	}
	if (++ring->earn_cnt >= (uint64_t) rings->earn << ring->earn_shift) {
		ring->earn_cnt = 0;
		layer_ring_offer(ring);
	}
}

int layer_ring_poll(struct layer_ring *ring)
{
	struct layer_chan *chan = ring->chan;
	int ret;

	while ((ret = layer_ring_take(ring)) == 1) {
		/* what it set off may have closed the channel, or freed the region */
		if (chan->ring != ring || !ring->region)
			return 0;
	}
	if (ret)
		return ret;
	if (ring->taken - ring->taken_told >= UTIL_MAX(ring->own.slots / 4, 1u) &&
	    ring->state == LAYER_RING_UP)
		layer_ring_tell(ring);
	return 0;
}

void layer_rings_progress(struct layer_rings *rings, uint64_t now_ms)
{
	struct util_dlist *item, *tmp;
	struct layer_ring *ring;
	unsigned op;

	rings->now_ms = now_ms;
	util_dlist_foreach_safe(&rings->pending, item, tmp) {
		ring = container_of(item, struct layer_ring, pending_link);
		op = ring->pending_op;
		if ((op == LAYER_OP_RING_RELEASE && layer_ring_flush(ring)) ||
		    layer_ring_send_ctl(ring, op))
			continue;
		ring->pending_op = 0;
		util_dlist_remove(&ring->pending_link);
		layer_ring_said(ring, op);
	}
	if (now_ms < rings->next_sweep_ms)
		return;
	rings->next_sweep_ms = now_ms + UTIL_MAX(rings->idle_ms / 4, 1);
	util_dlist_foreach_safe(&rings->active, item, tmp) {
		ring = container_of(item, struct layer_ring, link);
		if (ring->state == LAYER_RING_UP && now_ms - ring->used_ms >= rings->idle_ms)
			layer_ring_release(ring, false);
	}
}
