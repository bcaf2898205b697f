/*
 * The MSG adapter's own structures (core.h says what an adapter is), shared by its files:
 * - core_msg.c: the adapter's life, connections (requests, acceptances, refusals, events)
 *   and channels;
 * - core_msg_rx.c: what arrives: the shared receive context every channel takes its
 *   buffers from, the channels' ids that tell which connection a message came on, direct
 *   receive, and the core's completions;
 * - core_msg_cq.c: the core CQs the channels are spread over, which ones a progress call
 *   reads, and waiting.
 *
 * Every channel's core endpoint takes its receive buffers from one shared receive context
 * (fi_srx_context(3)): an idle connection holds no buffer, and the endpoint posts as many as
 * its traffic takes, wherever it comes from. The core then does not say which connection a
 * buffer's message came on: with direct receive, tcp's callback names the core endpoint
 * (core_msg_rx.c); otherwise each side gives the other, in the handshake, the id under which
 * it knows the channel, and the other sends every message with that id as remote CQ data.
 */
#ifndef LAYER_CORE_CORE_MSG_H
#define LAYER_CORE_CORE_MSG_H

#include "layer/core/core.h"

struct layer_msg_chan;

/* The channels by id (for the peers' remote CQ data): a table whose free slots are reused,
 * each id carrying a generation so that a stale one finds nothing. */
struct layer_msg_ids {
	struct layer_msg_chan **slots;
	uint32_t *next_free;           /* per slot: the next free slot + 1, 0: none */
	uint32_t cap;
	uint32_t free_head;            /* the first free slot + 1, 0: none */
	uint32_t gen;                  /* generations handed out */
};

/* Channels whose core endpoints share one core CQ (core_msg_cq.c). */
struct layer_msg_cqg {
	struct layer_core_set set;     /* marked: the next progress call reads it */
	struct fid_cq *cq;
	int fd;                        /* its wait fd (in mcore->epfd), or -1 */
	uint32_t chan_cnt;             /* channels bound to it, until freed */
	uint32_t idx;                  /* in mcore->cqgs */
};

struct layer_msg_core {
	struct layer_core core;        /* first */
	struct fid_pep *pep;           /* the listener */
	struct fid_ep *srx;            /* the shared receive context every channel's core
					* endpoint takes its buffers from */
	struct util_dlist srx_bufs;    /* struct layer_buf posted to it, not yet taken by a
					* message the core named a channel for */
	size_t srx_cnt;                /* their number */
	uint64_t srx_takes;            /* buffers the core was seen to take, ever */
	size_t buf_target;             /* buffers kept posted: more once they run out */
	size_t buf_max;                /* ... up to this many */
	bool has_rx_id;                /* peers name the channel of each message by its id in
					* remote CQ data (no direct receive) */
	struct layer_msg_ids ids;      /* has_rx_id: the channels by id */
	bool is_dry;                   /* the shared context ran out of buffers since every
					* group was last read (core_msg_cq.c) */
	/* the core CQs (core_msg_cq.c) */
	struct layer_msg_cqg **cqgs;   /* [0]: core->cq; the others once needed */
	size_t cqg_cnt;
	size_t cqg_cap;
	uint32_t cqg_size;             /* channels per CQ; 0: one CQ, read every call */
	int epfd;                      /* the groups' wait fds (core->cq_fd), or -1 */
	struct util_dlist marked;      /* struct layer_core_set of the groups to read */
	struct util_dlist again;       /* ... and those to read again on the next call */
	struct util_dlist chans;       /* every struct layer_msg_chan the layer above holds */
	struct util_dlist dropped;     /* let go of (chan_drop) or freed with buffers still in
					* the core's hands: freed at the end of progress, once
					* the core CQ gave them back */
	struct layer_rings rings;      /* the channels' rings (ring.h) */
	bool is_closed;                /* the endpoint closes: nothing completes any more */
	uint32_t connecting_cnt;       /* channels whose request is out: the EQ is read on
					* every progress call meanwhile */
	unsigned eq_calls;             /* progress calls since the last EQ read */
	unsigned eq_period;            /* calls between reads at most */
	uint64_t eq_read_ns;           /* coarse clock at the last read */
};

struct layer_msg_chan {
	struct layer_chan chan;        /* first; the core endpoint's context */
	struct layer_msg_cqg *cqg;     /* the group of its core endpoint, once it has one */
	struct util_dlist link;        /* mcore->chans */
	struct util_dlist taken_bufs;  /* direct receive: struct layer_buf the core took for a
					* message of this channel, not completed yet */
	size_t taken_cnt;
	uint64_t id;                   /* has_rx_id: its id, what the peer sends as remote CQ
					* data; else 0 */
	bool is_connecting;            /* outgoing, the peer has not answered its request */
	struct layer_ring *ring;       /* its rings (ring.h), also chan.ring while it may send */
};

static inline struct layer_msg_core *layer_msg_core_of(struct layer_core *core)
{
	return container_of(core, struct layer_msg_core, core);
}

static inline struct layer_msg_chan *layer_msg_chan_of(struct layer_chan *chan)
{
	return container_of(chan, struct layer_msg_chan, chan);
}

/* ---- core_msg_rx.c ---- */

/* At enable: the shared receive context, its buffers, ids when peers must send them. 0 or
 * -FI_E*. */
int layer_msg_rx_open(struct layer_msg_core *mcore);
/* At close, after every channel's core endpoint: the context and what it holds. */
void layer_msg_rx_close(struct layer_msg_core *mcore);
/* A new channel's id (0 when peers send none): 0 or -FI_ENOMEM. */
int layer_msg_id_alloc(struct layer_msg_core *mcore, struct layer_msg_chan *mchan);
void layer_msg_id_free(struct layer_msg_core *mcore, struct layer_msg_chan *mchan);
/* The buffers the core took for mchan's messages go up as lost (err), or back to the pool
 * when nothing above holds the channel. */
void layer_msg_release_taken(struct layer_msg_chan *mchan, int err);
/* Reads a core CQ until it is empty, handing up what completed. */
void layer_msg_read_cq(struct layer_msg_core *mcore, struct fid_cq *cq);
/* Whether a slot is whole in a ring, and what peers wrote there. */
bool layer_msg_rings_ready(struct layer_msg_core *mcore);
void layer_msg_poll_rings(struct layer_msg_core *mcore);

/* ---- core_msg_cq.c ---- */

/* At alloc: no group yet. */
void layer_msg_cqgs_init(struct layer_msg_core *mcore);
/* At enable: group 0 (and the epoll set when the core's CQs are spread). 0 or -FI_E*. */
int layer_msg_cqgs_enable(struct layer_msg_core *mcore);
/* At close, after every channel's core endpoint. */
void layer_msg_cqgs_close(struct layer_msg_core *mcore);
/* A CQ for a new channel's core endpoint: its group (counted), or NULL (-FI_ENOMEM). */
struct layer_msg_cqg *layer_msg_cqg_take(struct layer_msg_core *mcore);
/* The channel that had it is freed (its core endpoint closed). */
void layer_msg_cqg_put(struct layer_msg_core *mcore, struct layer_msg_cqg *cqg);
/* The shared context has buffers again after running out: every group is read. */
void layer_msg_cqgs_mark_all(struct layer_msg_core *mcore);
/* Reads the CQs that have something, or something posted on them. */
void layer_msg_progress_cqs(struct layer_msg_core *mcore);
int layer_msg_cq_wait(struct layer_core *core);
int layer_msg_trywait(struct layer_core *core);

extern const struct layer_core_ops layer_core_msg_ops;
int layer_msg_post_buf(struct layer_core *core, struct layer_chan *chan,
		       struct layer_buf *buf);
void layer_msg_refill(struct layer_core *core, size_t upto);

#endif /* LAYER_CORE_CORE_MSG_H */
