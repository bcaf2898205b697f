/*
 * Rings: short messages as the core's RMA writes (core_msg.c), for the peers that are
 * active now.
 *
 * libfabric 1.17's tcp reports every receive on a CQ that always has a wait object, and
 * signals that object for each completion it writes: a message end costs a write and a read
 * of the signal on top of the poll and the recv of the data. An RMA write is placed by the
 * target's core without a completion, and an inject write makes none at the initiator. So
 * over a connected core that can write (tcp), the two sides of a busy channel lend each other
 * a registered region, and a message that fits a slot goes there, as one inject write of the
 * whole slot, while a slot is free; anything else goes as a message. The receiver finds the
 * messages by looking at its next slot in progress and hands each up exactly as a received
 * buffer: the layers above see messages, whichever way they came.
 *
 * A region costs memory and a look on every progress call, so only channels in use have one:
 * - Earning: a side that receives FI_OFI_LAYER_RING_EARN messages on a channel within
 *   FI_OFI_LAYER_RING_IDLE milliseconds, while it holds fewer than FI_OFI_LAYER_RING_ACTIVE
 *   regions, allocates one and offers it (RING_OFFER, its address, key and slots). The peer
 *   answers with its own (RING_ACCEPT), or RING_RELEASE when it holds its maximum (each
 *   refusal in a row doubles the messages the next offer takes, up to 1024 times, each
 *   idle window halving them again). Offers
 *   that cross: the side that opened the connection ignores the one it gets, the other takes
 *   it as the answer to its own and accepts it with the region it offered.
 * - Giving back: a ring whose slots neither side used for FI_OFI_LAYER_RING_IDLE
 *   milliseconds is released: its side stops writing, and sends RING_RELEASE; the peer,
 *   once it has taken every slot written before it, frees its region, stops writing and
 *   answers RING_RELEASE, on which the first side frees its own. Releases that cross end
 *   both. Each ends with all the slots of its peer taken, so the next ring starts where this
 *   one stopped.
 * The three are messages (never slots), in the channel's one ordered stream.
 *
 * A region (its offer, struct layer_ring_offer, is in RING_OFFER and RING_ACCEPT):
 *   bytes 0..63         struct layer_ring_ctl: written by the peer, never by its owner
 *   then slots of LAYER_RING_SLOT bytes: one message (header and payload), or two back to
 *   back, LAYER_RING_MSG_MAX bytes at most, and in the slot's last 8 bytes struct
 *   layer_ring_trailer: how many messages went before it, its length, the first message's
 *   when it holds two, and its number (1, 2, ... over the channel's life, modulo 2^32). The
 *   core's write places the bytes in order, so a slot whose trailer holds the number expected
 *   next is whole: a slot being written still holds the number of an earlier lap, or 0.
 * Writes: a slot is filled in the ring's stage and written (one inject write of the whole
 *   slot) as soon as nothing more may join it. A message joins the staged slot when both fit;
 *   it goes at once, with what is staged, unless it may be kept (an answer to a read) and the
 *   core's hold is set: the endpoint sets it around its progress, and may keep the staged
 *   slot until its next call (ep.c). Anything else sent on the channel first writes it.
 * Flow: the writer uses slot (number - 1) mod slots while number - ctl.taken <= slots, where
 *   ctl.taken is what the reader last wrote back into the writer's region: how many of the
 *   writer's slots it has taken; it writes it back once a quarter of its slots were taken
 *   since it last did. A writer without room sends a message instead. A new region's
 *   ctl.taken starts at the slots its owner has written so far, all taken.
 * Order: the two ways are one stream. A slot's trailer says how many messages were sent on
 *   the channel before it, and a message's header (key_slot, unused over MSG cores otherwise)
 *   how many slots, modulo 2^16, counted over the channel's life: the reader takes a slot
 *   only once it has taken as many messages, and before it hands a message up it takes the
 *   slots written before it (the core placed them already: they came first on the
 *   connection). A message behind slots not yet taken is not matched while it arrives
 *   (direct receive), only once it is in.
 *
 * Everything here runs under the endpoint's lock, from the data path and progress.
 */
#ifndef LAYER_CORE_RING_H
#define LAYER_CORE_RING_H

#include <stdint.h>
#include <sys/uio.h>

#include "layer/core/wire.h"
#include "util/list.h"

struct layer_buf;
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
#define LAYER_RING_ACTIVE_DEFAULT 64u   /* FI_OFI_LAYER_RING_ACTIVE over tcp 1.17 */

struct layer_ring_ctl {
	uint32_t taken;                /* slots of the region's owner the peer has taken */
	uint8_t reserved[60];
};

/* Where a channel's rings are. */
enum layer_ring_state {
	LAYER_RING_NONE,               /* no region: everything goes as messages */
	LAYER_RING_OFFERED,            /* ours offered, the peer's answer not in */
	LAYER_RING_UP,                 /* both regions: short messages go as slots */
	LAYER_RING_CLOSING,            /* released: no more slots from us; the peer's release
					* (or, from ANSWER, ours) still to come or go */
};

/* The adapter's rings (core_msg.c): the settings, the regions held, the clock. */
struct layer_rings {
	struct util_dlist active;      /* struct layer_ring with a region: polled */
	struct util_dlist pending;     /* struct layer_ring with a RING_* message to send */
	uint64_t gen;                  /* rings taken out of active so far */
	uint32_t slots;                /* slots per region; 0: no rings over this core */
	uint32_t cnt;                  /* regions held */
	uint32_t max;                  /* FI_OFI_LAYER_RING_ACTIVE */
	uint32_t earn;                 /* FI_OFI_LAYER_RING_EARN */
	uint64_t idle_ms;              /* FI_OFI_LAYER_RING_IDLE */
	uint64_t now_ms;               /* the adapter's coarse clock, set per progress call */
	uint64_t next_sweep_ms;        /* when to look for idle rings again */
};

/* One channel's rings: the state and counts of its life, and the regions while it has them. */
struct layer_ring {
	struct layer_chan *chan;
	struct layer_rings *rings;
	struct util_dlist link;        /* rings->active while it has a region */
	struct util_dlist pending_link; /* rings->pending while pending_op is set */
	enum layer_ring_state state;
	uint8_t pending_op;            /* RING_* message to send when the core takes it; 0 */
	bool is_answer;                /* CLOSING: the peer released first; ours is the answer,
					* which ends it */
	bool is_staged;                /* stage holds slot number sent, not written yet */
	bool is_stopped;               /* its channel failed: nothing more goes through it */
	/* over the channel's life */
	uint32_t taken;                /* slots taken from our regions */
	uint32_t msgs_taken;           /* messages of the channel handed up */
	uint32_t sent;                 /* slots written into the peer's regions */
	uint32_t msgs_sent;            /* messages sent on the channel */
	/* earning and idleness */
	uint32_t earn_cnt;             /* messages received since earn_ms */
	uint8_t earn_shift;            /* offers refused in a row (up to 10): the next needs
					* earn << earn_shift messages */
	uint64_t earn_ms;
	uint64_t used_ms;              /* a slot was last written or taken */
	/* while it has a region */
	uint8_t *region;
	size_t region_len;
	struct fid_mr *mr;
	struct layer_ring_offer own;
	uint32_t taken_told;           /* the count last written back to the peer */
	struct layer_ring_offer peer;  /* UP, CLOSING: the peer's region */
	_Alignas(8) uint8_t stage[LAYER_RING_SLOT]; /* as a slot of the region: header, trailer */
};

/* The adapter's rings, with the settings, for core (at enable; its lists are set up when it
 * is allocated): 0 slots when its endpoints cannot carry rings (no RMA, an inject below a
 * slot, software registrations) or FI_OFI_LAYER_RING_SLOTS or _ACTIVE is 0. */
void layer_rings_init(struct layer_rings *rings, const struct layer_core *core);

/* A channel's ring, without a region (the channel is new): 0 or -FI_ENOMEM. */
int layer_ring_open(struct layer_chan *chan, struct layer_rings *rings,
		    struct layer_ring **ring);
/* The channel failed: nothing more goes through the ring (what is staged is dropped). */
void layer_ring_stop(struct layer_ring *ring);
/* Frees it, its region with it (the channel's core endpoint is closed: nothing writes there). */
void layer_ring_close(struct layer_ring *ring);

/*
 * The channel's sends (core.h's data path calls, for a channel with a ring), the header first
 * in buf and iov[0]: a message that fits goes into the peer's next free slot while the ring
 * is up, anything else as a message whose header says how many slots went before it. As the
 * core's fi_inject and fi_sendv return. may_keep: the slot may stay staged while the core's
 * hold is set (the provider's own messages: the application's go at once, its completion
 * reported).
 */
ssize_t layer_ring_inject(struct layer_ring *ring, void *buf, size_t len, bool may_keep);
ssize_t layer_ring_sendv(struct layer_ring *ring, const struct iovec *iov, size_t count,
			 struct layer_ctx *ctx);

/*
 * Writes the staged slot: 0, or the core's error (-FI_EAGAIN: busy; it stays staged, and
 * every send of the channel waits behind it).
 */
ssize_t layer_ring_flush(struct layer_ring *ring);

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
/* The message is handed up: slots written after it may be taken; it counts towards a ring. */
void layer_ring_after_msg(struct layer_ring *ring);
/* Whether op is one of the rings' own messages, which the adapter keeps (see above). */
static inline bool layer_ring_is_ctl(unsigned op)
{
	return op == LAYER_OP_RING_OFFER || op == LAYER_OP_RING_ACCEPT ||
	       op == LAYER_OP_RING_RELEASE;
}
/* One of them arrived, whole, in buf (its slots before it taken): its step is done. 0, or
 * -EPROTO when the peer broke the protocol (its connection should end). */
int layer_ring_ctl_arrive(struct layer_ring *ring, struct layer_buf *buf);
/* Whether the next slot of the region is whole. */
bool layer_ring_is_ready(struct layer_ring *ring);
/*
 * Hands up the slots whole in the region, in order, as far as the messages before them
 * were, and tells the peer what was taken: 0, or -EPROTO when the peer wrote a slot no
 * ofi_layer writes (its connection should end: its stream cannot be trusted).
 */
int layer_ring_poll(struct layer_ring *ring);

/*
 * Once per progress call, with the coarse clock: sends the RING_* messages the core could
 * not take before, and releases the rings unused for the idle time.
 */
void layer_rings_progress(struct layer_rings *rings, uint64_t now_ms);

#endif /* LAYER_CORE_RING_H */
