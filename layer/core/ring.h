/*
 * Rings: short messages as the core's RMA writes (core_msg.c).
 *
 * libfabric 1.17's tcp reports every receive on a CQ that always has a wait object, and
 * signals that object for each completion it writes: a message end costs a write and a read
 * of the signal on top of the poll and the recv of the data. An RMA write is placed by the
 * target's core without a completion, and an inject write makes none at the initiator. So
 * over a connected core that can write (tcp), each side of a channel lends the other a
 * registered region, and a message that fits a slot goes there, as one inject write of the
 * whole slot, while a slot is free; anything else goes as a message. The receiver finds the
 * messages by looking at its next slot in progress and hands each up exactly as a received
 * buffer: the layers above see messages, whichever way they came.
 *
 * A region (each side's offer, struct layer_ring_offer, is in its handshake):
 *   bytes 0..63         struct layer_ring_ctl: written by the peer, never by its owner
 *   then slots of LAYER_RING_SLOT bytes: one message (header and payload), or two back to
 *   back, LAYER_RING_MSG_MAX bytes at most, and in the slot's last 8 bytes struct
 *   layer_ring_trailer: how many messages went before it, its length, the first message's
 *   when it holds two, and its number (1, 2, ... over the channel's life, modulo 2^32). The
 *   core's write places the bytes in order, so a slot whose trailer holds the number expected
 *   next is whole: a slot being written still holds the number of its previous lap.
 * Writes: a slot is filled in the ring's stage and written (one inject write of the whole
 *   slot) as soon as nothing more may join it. A message joins the staged slot when both fit;
 *   it goes at once, with what is staged, unless it may be kept (an answer to a read) and the
 *   core's hold is set: the endpoint sets it around its progress, and may keep the staged
 *   slot until its next call (ep.c). Anything else sent on the channel first writes it.
 * Flow: the writer uses slot (number - 1) mod slots while number - ctl.taken <= slots, where
 * ctl.taken is what the reader last wrote back into the writer's region: how many of the
 * writer's slots it has taken; it writes it back once a quarter of its slots were taken
 * since it last did. A writer without room sends a message instead.
 * Order: the two ways are one stream. A slot's trailer says how many messages were sent on
 * the channel before it, and a message's header (key_slot, unused over MSG cores otherwise)
 * how many slots, modulo 2^16: the reader takes a slot only once it has taken as many
 * messages, and before it hands a message up it takes the slots written before it (the core
 * placed them already: they came first on the connection). A message behind slots not yet
 * taken is not matched while it arrives (direct receive), only once it is in. The reader
 * counts from the channel's first message, even before it knows the peer's ring: a
 * connection's data may come before its event does (libfabric 1.22), and the peer writes as
 * soon as it knows ours.
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
struct layer_ctx;

struct layer_ring_trailer {
	uint16_t msgs;                 /* messages sent on the channel before it, modulo 2^16 */
	uint8_t len;                   /* bytes of the messages in it, headers included */
	uint8_t first_len;             /* two messages: the first's bytes (the second follows
					* it); 0: one message */
	uint32_t num;                  /* its number: the slot is whole when it is the next */
};

#define LAYER_RING_SLOT 128u     /* one inject write (tcp 1.17 takes 128 bytes) */
#define LAYER_RING_MSG_MAX (LAYER_RING_SLOT - sizeof(struct layer_ring_trailer))
#define LAYER_RING_SLOTS_MAX 4096u

struct layer_ring_ctl {
	uint32_t taken;                /* slots of the region's owner the peer has taken */
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
	uint32_t taken;                /* slots taken from our region */
	uint32_t taken_told;           /* the count last written back to the peer */
	uint32_t msgs_taken;           /* messages of the channel handed up */
	struct layer_ring_offer peer;  /* slots 0: the peer lends none */
	uint32_t sent;                 /* slots written into the peer's region */
	uint32_t msgs_sent;            /* messages sent on the channel */
	bool is_staged;                /* stage holds slot number sent, not written yet */
	_Alignas(8) uint8_t stage[LAYER_RING_SLOT]; /* as a slot of the region: header, trailer */
};

/* Slots per ring (FI_OFI_LAYER_RING_SLOTS rounded down to a power of two), 0 when core's
 * endpoints cannot carry rings. */
uint32_t layer_ring_slots(const struct layer_core *core);
/* A ring for chan with slots slots, its region registered: 0 or -FI_E*. */
int layer_ring_open(struct layer_chan *chan, uint32_t slots, struct layer_ring **ring);
void layer_ring_close(struct layer_ring *ring);
/* The peer's offer, from its handshake: false when it is malformed (then unused). */
bool layer_ring_set_peer(struct layer_ring *ring, const struct layer_ring_offer *offer);

/*
 * The channel's sends (core.h's data path calls, for a channel whose rings are up), the
 * header first in buf and iov[0]: a message that fits goes into the peer's next free slot,
 * anything else as a message whose header says how many slots went before it. As the core's
 * fi_inject and fi_sendv return. may_keep: the slot may stay staged while the core's hold is
 * set (the provider's own messages: the application's go at once, its completion reported).
 */
ssize_t layer_ring_inject(struct layer_ring *ring, void *buf, size_t len, bool may_keep);
ssize_t layer_ring_sendv(struct layer_ring *ring, const struct iovec *iov, size_t count,
			 struct layer_ctx *ctx);

/*
 * Writes the staged slot: 0, or the core's error (-FI_EAGAIN: busy; it stays staged, and
 * every send of the channel waits behind it).
 */
ssize_t layer_ring_flush(struct layer_ring *ring);
/* Drops the staged slot (its channel closes: nothing more goes on it). */
void layer_ring_unstage(struct layer_ring *ring);

/*
 * A message of the channel arrived, its header in: whether the slots written before it are
 * all taken (else it is not matched before it is whole, see above).
 */
static inline bool layer_ring_is_behind(const struct layer_ring *ring,
					const struct layer_hdr *hdr)
{
	return hdr->key_slot != (uint16_t) ring->taken;
}
/* A message of the channel is whole: the slots written before it are taken first. */
void layer_ring_before_msg(struct layer_ring *ring, const struct layer_hdr *hdr);
/* The message is handed up: slots written after it may be taken. */
static inline void layer_ring_after_msg(struct layer_ring *ring)
{
	ring->msgs_taken++;
}
/* Whether the next slot of the region is whole. */
bool layer_ring_is_ready(struct layer_ring *ring);
/*
 * Hands up the slots whole in the region, in order, as far as the messages before them
 * were, and tells the peer what was taken: 0, or -EPROTO when the peer wrote a slot no
 * ofi_layer writes (its connection should end: its stream cannot be trusted).
 */
int layer_ring_poll(struct layer_ring *ring);

#endif /* LAYER_CORE_RING_H */
