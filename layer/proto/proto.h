/*
 * The transmit and receive paths: the layer between the API entry points (ep/) and the
 * connections (conn/) of the endpoint's stack (ep/ep.h draws the whole of it). It turns the
 * application's sends into messages of the wire protocol (core/wire.h) on connections, and
 * the messages that arrive into completions of the application's receives:
 * - tx.c: sends (inline, eager, rendezvous requests), fences, pacing, completions, and the
 *   acknowledgements they wait for, found by index;
 * - rndv.c: rendezvous, the registration of a sender's buffers and the receiver's RMA reads;
 * - rx.c: the receive path: the one entry every arriving message goes through
 *   (layer_rx_arrive), delivery into receives, multi-receive buffers, probes, completions;
 * - rxq.c: the receive queues, plain and tagged, where matching happens;
 * - unexp.c: the bound on what unexpected messages hold.
 * It calls only down (connections, core buffers) and into the completion objects; what the
 * connections report comes up through struct layer_conn_upcalls (layer_proto_conn_upcalls).
 * Everything here runs under the endpoint's lock (when it has one).
 */
#ifndef LAYER_PROTO_PROTO_H
#define LAYER_PROTO_PROTO_H

#include "layer/cntr.h"
#include "layer/conn/conn.h"
#include "layer/core/core.h"
#include "layer/cq.h"
#include "layer/proto/rxq.h"
#include "layer/proto/unexp.h"
#include "util/bufpool.h"

struct layer_tx;
struct layer_coll;

/* RMA writes taken during one progress call whose ACKs wait for its end; more are answered
 * when their data is in. */
#define LAYER_TAKEN_MAX 64

/* Sends waiting for their ACK, by the index in the low half of the ACK's msg_id. */
struct layer_tx_acks {
	struct layer_tx **slots;       /* NULL: free */
	uint32_t *gens;                /* generation of each slot, in the high half */
	uint32_t *free;                /* free slots, a stack */
	uint32_t free_cnt;
	uint32_t cnt;                  /* slots allocated */
};

struct layer_proto {
	struct layer_domain *domain;
	struct layer_conns *conns;     /* below: where messages go */
	struct layer_core *core;       /* below: receive buffers */
	struct layer_av *av;           /* sources of receives, user IDs (set at enable) */
	/* completions */
	struct layer_cq *tx_cq;
	struct layer_cq *rx_cq;
	struct layer_cntr *send_cntr;
	struct layer_cntr *recv_cntr;
	struct layer_cntr *read_cntr;       /* FI_READ: this endpoint's reads */
	struct layer_cntr *write_cntr;      /* FI_WRITE: this endpoint's writes */
	struct layer_cntr *rem_read_cntr;   /* FI_REMOTE_READ: peers' reads of its memory */
	struct layer_cntr *rem_write_cntr;  /* FI_REMOTE_WRITE: peers' writes to it */
	bool tx_selective;             /* FI_SELECTIVE_COMPLETION on the transmit CQ */
	bool rx_selective;
	size_t min_multi_recv;
	/* transmit */
	struct util_bufpool tx_pool;   /* struct layer_tx */
	size_t tx_size;                /* user sends outstanding at most */
	size_t tx_used;
	struct layer_tx_acks acks;
	bool has_pending;              /* pending is not empty */
	struct util_dlist pending;     /* struct layer_conn (pending_link) that may have queued
					* sends or blocked reads: progress looks at these only */
	/* receive */
	struct util_bufpool rx_pool;   /* struct layer_rx */
	size_t rx_size;                /* receives posted at most */
	size_t rx_used;
	struct layer_rxq msg_q;        /* FI_MSG */
	struct layer_rxq tag_q;        /* FI_TAGGED */
	struct layer_rxq coll_q;       /* collective traffic (coll/), the provider's own */
	struct layer_coll *coll;       /* the endpoint's collective groups; NULL without
					* FI_COLLECTIVE */
	struct layer_unexp unexp;      /* what unexpected messages hold (unexp.h) */
	size_t unmatched_cnt;          /* direct receive: messages arriving that matched no
					* receive; until they complete, none matches early */
	/* direct receive: the ACKs of RMA writes taken while their data arrives, sent once the
	 * core's progress returns (rma/rma_target.c) */
	struct layer_taken_write {
		struct layer_conn *conn;
		uint64_t msg_id;
	} taken[LAYER_TAKEN_MAX];
	size_t taken_cnt;
};

/* The upcalls the connection layer is given (arg: the struct layer_proto). */
extern const struct layer_conn_upcalls layer_proto_conn_upcalls;

int layer_proto_init(struct layer_proto *proto, struct layer_domain *domain,
		     struct layer_conns *conns, struct layer_core *core, size_t tx_size,
		     size_t rx_size);
/* Endpoint close, once the connections are gone: frees what is left. */
void layer_proto_fini(struct layer_proto *proto);

/* conn has queued sends or a blocked read: progress tries them again. */
static inline void layer_proto_pend(struct layer_proto *proto, struct layer_conn *conn)
{
	proto->has_pending = true;
	if (util_dlist_empty(&conn->pending_link))
		util_dlist_insert_tail(&conn->pending_link, &proto->pending);
}

/* Progress: queued sends and blocked reads retried (only when has_pending). */
void layer_proto_progress(struct layer_proto *proto);

/* FI_COMPLETION when an operation generates a completion (fi_msg(3), fi_cq(3)). */
static inline uint64_t layer_proto_tx_comp(const struct layer_proto *proto, uint64_t flags)
{
	return !proto->tx_selective || (flags & FI_COMPLETION) ? FI_COMPLETION : 0;
}

static inline uint64_t layer_proto_rx_comp(const struct layer_proto *proto, uint64_t flags)
{
	return !proto->rx_selective || (flags & FI_COMPLETION) ? FI_COMPLETION : 0;
}

/*
 * After anything that may lift the unexpected bound's hold: a release, a receive posted or a
 * send outstanding (the endpoint waits), progress. Refills short homes, releases paced peers.
 */
static inline void layer_unexp_check(struct layer_proto *proto)
{
	if (unlikely(proto->unexp.is_short || proto->unexp.is_pacing))
		layer_unexp_update(proto);
}

#endif /* LAYER_PROTO_PROTO_H */
