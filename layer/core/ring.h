/*
 * Rings: short messages that need no order as the core's RMA writes (core_msg.c).
 *
 * libfabric 1.17's tcp reports every receive on a CQ that always has a wait object, and
 * signals that object for each completion it writes: a message end costs a write and a read
 * of its signal on top of the poll and the recv of the data. An RMA write is placed by the
 * target's core without a completion, and an inject write makes none at the initiator. So
 * over a connected core that can write (tcp), each side of a channel lends the other a
 * registered region, and a message the layers above say needs no order (collective
 * traffic, which is matched by its tag and sender alone) goes there as one inject write of
 * a whole slot when it fits and a slot is free; anything else goes as a message. The
 * receiver finds the messages by looking at its next slot in progress, and hands each up
 * exactly as a received buffer.
 *
 * A region (each side's offer, struct layer_ring_offer, is in its handshake):
 *   bytes 0..63         struct layer_ring_ctl: written by the peer, never by its owner
 *   then slots of LAYER_RING_SLOT bytes: the message (header and payload, at most
 *   LAYER_RING_MSG_MAX bytes), and in the slot's last 8 bytes struct layer_ring_trailer: its
 *   length and its number (1, 2, ... over the channel's life, modulo 2^32). The core's
 *   write places the bytes in order, so a slot whose trailer holds the number expected next
 *   is whole: a slot being written still holds the number of its previous lap.
 * Flow: the writer uses slot (number - 1) mod slots while number - ctl.taken <= slots, where
 * ctl.taken is what the reader last wrote back into the writer's region: how many of the
 * writer's messages it has taken; it writes it back once a quarter of its slots were taken
 * since it last did. A writer without room sends a message instead.
 *
 * Everything here runs under the endpoint's lock, from the data path and progress.
 */
#ifndef LAYER_CORE_RING_H
#define LAYER_CORE_RING_H

#include <stdint.h>
#include <sys/uio.h>

#include "layer/core/wire.h"
#include "util/list.h"

struct layer_chan;
struct layer_core;

#define LAYER_RING_SLOT 128u     /* one inject write (tcp 1.17 takes 128 bytes) */
#define LAYER_RING_MSG_MAX (LAYER_RING_SLOT - sizeof(struct layer_ring_trailer))
#define LAYER_RING_SLOTS_MAX 4096u

struct layer_ring_trailer {
	uint32_t len;                  /* the message's bytes, header included */
	uint32_t num;                  /* its number: the slot is whole when it is the next */
};

struct layer_ring_ctl {
	uint32_t taken;                /* messages of the region's owner the peer has taken */
	uint8_t reserved[60];
};

/* One channel's rings: the region it lends, and the peer's it writes into. */
struct layer_ring {
	struct layer_chan *chan;
	struct util_dlist link;        /* the adapter's rings in use (polled) */
	uint8_t *region;
	size_t region_len;
	struct fid_mr *mr;
	struct layer_ring_offer own;
	uint32_t taken;                /* messages taken from our slots */
	uint32_t taken_told;           /* the count last written back to the peer */
	struct layer_ring_offer peer;  /* slots 0: the peer lends none */
	uint32_t sent;                 /* messages written into the peer's slots */
};

/* Slots per ring (FI_OFI_LAYER_RING_SLOTS rounded down to a power of two), 0 when core's
 * endpoints cannot carry rings. */
uint32_t layer_ring_slots(const struct layer_core *core);
/* A ring for chan with slots slots, its region registered: 0 or -FI_E*. */
int layer_ring_open(struct layer_chan *chan, uint32_t slots, struct layer_ring **ring);
void layer_ring_close(struct layer_ring *ring);
/* The peer's offer, from its handshake: false when it is malformed (then unused). */
bool layer_ring_set_peer(struct layer_ring *ring, const struct layer_ring_offer *offer);
/* What a ring carries: eager collective messages, matched by their tag and sender alone. */
static inline bool layer_ring_may_carry(const struct layer_hdr *hdr)
{
	return hdr->op == LAYER_OP_EAGER && (hdr->flags & LAYER_HDR_COLL);
}

/* Whether both sides lend slots: only then does either write. */
static inline bool layer_ring_is_up(const struct layer_ring *ring)
{
	return ring->own.slots && ring->peer.slots;
}

/*
 * Writes the message in iov (len bytes, header first) into the peer's next slot: 0, or
 * -FI_EAGAIN when it does not fit, no slot is free or the core is busy (send it as a message
 * then), or another core error.
 */
ssize_t layer_ring_send(struct layer_ring *ring, const struct iovec *iov, size_t cnt,
			size_t len);
/*
 * Hands up the messages whole in our slots, in order, and tells the peer what was taken:
 * 0, or -EPROTO when the peer wrote a slot no ofi_layer writes (its connection should
 * end: its stream cannot be trusted).
 */
int layer_ring_poll(struct layer_ring *ring);

#endif /* LAYER_CORE_RING_H */
