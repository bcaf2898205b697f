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

uint32_t layer_ring_slots(const struct layer_core *core)
{
	uint32_t slots = 1;

	/* the core writes (tcp), a whole slot in one inject, at virtual addresses or offsets */
	if (!layer_settings.ring_slots || !(core->info->caps & FI_RMA) ||
	    core->inject_size < LAYER_RING_SLOT || core->domain->mr.is_soft)
		return 0;
	while (slots * 2 <= UTIL_MIN(layer_settings.ring_slots, (size_t) LAYER_RING_SLOTS_MAX))
		slots *= 2;
	return slots;
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

int layer_ring_open(struct layer_chan *chan, uint32_t slots, struct layer_ring **ring_out)
{
	struct layer_domain *domain = chan->core->domain;
	struct layer_ring *ring;
	int ret;

	ring = calloc(1, sizeof(*ring));
	if (!ring)
		return -FI_ENOMEM;
	ring->chan = chan;
	util_dlist_init(&ring->link);
	ring->region_len = sizeof(struct layer_ring_ctl) + (size_t) slots * LAYER_RING_SLOT;
	if (posix_memalign((void **) &ring->region, 4096, ring->region_len)) {
		ret = -FI_ENOMEM;
		goto err_free;
	}
	/* no trailer holds number 0: every slot starts empty */
	memset(ring->region, 0, ring->region_len);
	ret = layer_mr_core_reg(domain, ring->region, ring->region_len, FI_REMOTE_WRITE,
				&ring->mr);
	if (ret)
		goto err_free_region;
	ring->own.addr = chan->core->has_virt_addr ? (uint64_t) (uintptr_t) ring->region : 0;
	ring->own.key = fi_mr_key(ring->mr);
	ring->own.slots = slots;
	*ring_out = ring;
	return 0;

err_free_region:
	free(ring->region);
err_free:
	free(ring);
	return ret;
}

void layer_ring_close(struct layer_ring *ring)
{
	util_dlist_remove(&ring->link);
	layer_mr_core_close(ring->chan->core->domain, ring->mr);
	free(ring->region);
	free(ring);
}

bool layer_ring_set_peer(struct layer_ring *ring, const struct layer_ring_offer *offer)
{
	uint32_t slots = offer->slots;

	if (slots > LAYER_RING_SLOTS_MAX || (slots & (slots - 1)))
		return false;
	ring->peer = *offer;
	return true;
}

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

	return fi_inject_write(ring->chan->core_ep, slot, LAYER_RING_SLOT, FI_ADDR_UNSPEC,
			       ring->peer.addr + sizeof(struct layer_ring_ctl) +
			       (uint64_t) idx * LAYER_RING_SLOT, ring->peer.key);
}

void layer_ring_unstage(struct layer_ring *ring)
{
	if (ring->is_staged) {
		ring->is_staged = false;
		ring->chan->core->staged_cnt--;
	}
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
 * Into the peer's next slot, or with the message in the staged one: 0, -FI_EAGAIN (too long,
 * no room, the core busy), or an error of the core. The slot is staged, and written now
 * unless the message may be kept while the core holds what progress sends.
 */
static ssize_t layer_ring_write(struct layer_ring *ring, const void *buf, size_t len,
				bool may_keep)
{
	const volatile struct layer_ring_ctl *ctl = (const struct layer_ring_ctl *) ring->region;
	bool is_kept = may_keep && ring->chan->core->hold;
	uint32_t num = ring->sent + 1;
	ssize_t ret;

	if (len > LAYER_RING_MSG_MAX)
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

ssize_t layer_ring_inject(struct layer_ring *ring, void *buf, size_t len, bool may_keep)
{
	ssize_t ret;

	ret = layer_ring_write(ring, buf, len, may_keep);
	if (ret != -FI_EAGAIN)
		return ret;
	/* a message goes behind the slots staged before it */
	ret = layer_ring_flush(ring);
	if (ret)
		return ret;
	layer_ring_stamp(ring, buf);
	ret = layer_core_ep_inject(ring->chan, buf, len);
	if (!ret)
		ring->msgs_sent++;
	return ret;
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

/* Writes the count of the peer's slots taken into the peer's control block. */
static void layer_ring_tell(struct layer_ring *ring)
{
	struct layer_ring_ctl ctl = { .taken = ring->taken };

	/* not now (the core is busy): the next poll tells */
	if (!fi_inject_write(ring->chan->core_ep, &ctl.taken, sizeof(ctl.taken), FI_ADDR_UNSPEC,
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
	uint8_t *slot = layer_ring_next(ring);
	const volatile struct layer_ring_trailer *trailer = layer_ring_trailer(slot);
	struct layer_buf *buf, *second = NULL;
	uint32_t len, first_len;

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
	core->up->recv(core->up_arg, buf);
	if (!second)
		return 1;
	/* the first may have closed the channel: the second goes with it */
	if (chan->ring == ring)
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

int layer_ring_poll(struct layer_ring *ring)
{
	struct layer_chan *chan = ring->chan;
	int ret;

	while ((ret = layer_ring_take(ring)) == 1) {
		/* what it set off may have closed the channel (its ring is out of use then) */
		if (chan->ring != ring)
			return 0;
	}
	if (ret)
		return ret;
	if (ring->taken - ring->taken_told >= UTIL_MAX(ring->own.slots / 4, 1u) &&
	    ring->peer.slots)
		layer_ring_tell(ring);
	return 0;
}
