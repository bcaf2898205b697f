/*
 * Connections and peers: the middle of the endpoint's stack (ep/ep.h draws the whole of it).
 *
 * A connection (struct layer_conn) is what the transmit and receive paths above see of a
 * peer: a channel of the core adapter below (core/core.h), the AV entry the peer is (its
 * fi_addr, reported as the source of what it sends), the authorization key its messages are
 * attributed to, and the state of the sends and reads that use it. The endpoint's
 * connections (struct layer_conns) are found by AV index for sending, and by peer address
 * (struct layer_peer) for what the AV's notices and the adapters tell.
 *
 * Each direction of a peer pair has one connection that carries its user data, so messages
 * from one peer arrive in the order sent. An endpoint sends a peer's messages on the
 * connection its AV index has: the one it opened on the first send, or, when the peer
 * connected first, the peer's connection, adopted when it is accepted, when the peer's entry
 * is inserted later, or on the first send to it (a named AV filled elsewhere). Over a MSG
 * core, where a connection carries both ways, a pair of endpoints so has one core
 * connection, whose replies carry its acknowledgements; when two endpoints ask each other at
 * once, the request of the lower address is kept, by both (conn.c, enum layer_conn_clash).
 * Control replies (rendezvous ACKs, PACE) travel back on the connection the request came in
 * on.
 *
 * The sender of a message is the connection's, found once: when the connection opens, and
 * again on the AV's notices (an entry inserted or removed), not per message. A named AV
 * shared with other processes tells only of this process's changes: over one the sender is
 * looked up per message.
 *
 * The layer above sees connections fail through one call (upcalls->lost), after which it
 * completes everything that refers to the connection; the connection is freed once nothing
 * of it remains in the core.
 *
 * Liveness (liveness.c): a peer that something waits on and that stays silent is probed, and
 * lost after FI_OFI_LAYER_PEER_TIMEOUT, unless the core adapter finds vanished peers itself.
 */
#ifndef LAYER_CONN_CONN_H
#define LAYER_CONN_CONN_H

#include <uthash.h>

#include "layer/layer.h"
#include "layer/conn/auth.h"
#include "layer/core/core.h"

struct layer_av;

enum layer_conn_state {
	LAYER_CONN_CONNECTING,         /* its sends wait (queued_tx) */
	LAYER_CONN_CONNECTED,
	LAYER_CONN_CLOSED,             /* failed: completed with errors by the next reap */
};

/* The connections of one peer address. */
struct layer_peer {
	UT_hash_handle hh;             /* conns->peers */
	struct util_dlist conns;       /* struct layer_conn by peer_link */
	bool is_paced;                 /* transmit path: the peer asked us to pace (PACE) */
	bool is_watched;               /* liveness: something waits on it, since watch_ms */
	uint64_t watch_ms;
	uint64_t last_rx_ms;           /* liveness: when it last sent anything */
	uint64_t ping_ms;              /* liveness: when it was last probed */
	uint8_t addr[LAYER_ADDR_MAX];  /* normalised (the hash key) */
};

struct layer_conn {
	struct util_dlist link;        /* conns->live, closed or draining */
	struct util_dlist peer_link;   /* peer->conns */
	struct layer_conns *conns;
	struct layer_peer *peer;
	struct layer_chan *chan;       /* the core adapter's side */
	enum layer_conn_state state;
	int fail_err;                  /* positive errno it failed with */
	bool is_tx;                    /* sends to AV index tx_index go on it */
	size_t tx_index;
	fi_addr_t key;                 /* the AV key handle (FI_AV_AUTH_KEY) of what travels on
					* it (accepted: the peer's, checked; opened: its own),
					* else FI_ADDR_NOTAVAIL */
	fi_addr_t src_addr;            /* the peer's AV entry (with key), FI_ADDR_NOTAVAIL while
					* the AV has none */
	size_t src_index;              /* src_addr's table index */
	unsigned redial_cnt;           /* requests the peer refused as duplicates (conn.c) */
	/* The transmit path's (proto/tx.c): every send that refers to the connection is on one
	 * of its lists, so that a failure completes each exactly once. */
	struct util_dlist queued_tx;   /* not yet given to the core */
	struct util_dlist posted_tx;   /* given to the core, not completed */
	struct util_dlist acked_tx;    /* sent, waiting for the peer's ACK */
	struct util_dlist fenced_tx;   /* held by an FI_FENCE until earlier sends complete */
	struct util_dlist pending_link; /* proto->pending while it may have queued sends or
					 * blocked reads */
	size_t tx_active;              /* user sends started on it and not completed */
	uint64_t blind_sent;           /* UNANSWERED atomics sent on it (atomic/) */
	uint64_t blind_applied;        /* how many of those the peer has surely applied: an
					* answer to a request sent after them came back; the
					* core's RMA, which the peer's core serves at once,
					* waits for all (rma/grant.h) */
	/* The receive path's. */
	struct util_dlist reading_rx;  /* receives whose rendezvous reads run on it */
	bool is_pace_asked;            /* we asked the peer to pace its sends (proto/unexp.c) */
	/* Direct RMA's (rma/grant.h): the grants either side made on it; NULL until one is
	 * made. One allocation, freed with the connection. */
	struct layer_grants *grants;
	/* Cross-memory attach's (cma/cma.h), with a peer on this host. */
	uint32_t cma_pid;              /* the peer's pid, once this process found it reads the
					* peer's memory; 0: it does not */
	uint64_t cma_cookie_addr;      /* the peer's cookie (util/cma.h), read again with */
	uint64_t cma_cookie;           /* every copy: the pid is still the peer */
	bool cma_is_checked;           /* the peer said who it is, and was checked */
	bool cma_is_read;              /* the peer said it reads this process's memory */
	bool cma_is_said;              /* this side said who it is */
	bool cma_said_reads;           /* ... and that it reads the peer */
};

/* What the connection layer calls above it: the transmit and receive paths (proto/). */
struct layer_conn_upcalls {
	/* conn is connected: what waits on it may go. */
	void (*ready)(void *arg, struct layer_conn *conn);
	/* conn failed (conn->fail_err): everything waiting on it completes with an error.
	 * Called again while it drains; true once nothing of it is left in the core. */
	bool (*lost)(void *arg, struct layer_conn *conn);
	/* Endpoint close: frees what refers to conn without completing it. */
	void (*discard)(void *arg, struct layer_conn *conn);
	/* conn's messages came from no AV entry and its peer was inserted: conn->src_addr
	 * names it from now on, also for what it delivered before. */
	void (*named)(void *arg, struct layer_conn *conn);
	/* Liveness: ask the peer of conn to answer (a PING). */
	void (*probe)(void *arg, struct layer_conn *conn);
	/* As core/core.h's upcalls, with buf->src_addr and buf->key set. */
	void (*recv)(void *arg, struct layer_buf *buf);
	void (*buf_lost)(void *arg, struct layer_buf *buf, int err);
	void (*done)(void *arg, struct layer_ctx *ctx, int err);
	int (*place)(void *arg, struct layer_buf *buf, struct iovec *iov, size_t *count);
};

/* The endpoint's connections. */
struct layer_conns {
	struct layer_core *core;
	struct layer_av *av;           /* set at enable */
	struct layer_auth auth;
	const struct layer_conn_upcalls *up;
	void *up_arg;
	struct layer_conn **by_index;  /* by AV index: the connection sends go on */
	size_t by_index_cnt;
	struct layer_peer *peers;      /* uthash by address */
	struct util_dlist live;        /* connecting or connected */
	struct util_dlist closed;      /* failed, reaped at the end of the progress call */
	struct util_dlist draining;    /* reaped, their core operations still in flight */
	bool is_src_kept;              /* the AV tells of every change: src_addr kept */
	bool is_watching;              /* liveness runs here (not over a datagram core) */
	uint64_t next_watch_ms;
};

/* The upcalls the core adapter is given (arg: the struct layer_conns). */
extern const struct layer_core_upcalls layer_conn_core_upcalls;

/* At open: 0 or -FI_EINVAL (a bad key in info). */
int layer_conns_init(struct layer_conns *conns, struct layer_core *core,
		     const struct fi_info *info, const struct layer_conn_upcalls *up,
		     void *up_arg);
/* At enable, with the bound AV: 0 or -FI_ENOMEM. */
int layer_conns_enable(struct layer_conns *conns, struct layer_av *av);
/* Endpoint close, after the core's close: frees every connection without completions. */
void layer_conns_close(struct layer_conns *conns);

/*
 * The connection to send to dest on, connecting on first use: 0, -FI_EINVAL (dest is not a
 * live AV entry), -FI_EACCES (its key), or the core's error.
 */
int layer_conn_get(struct layer_conns *conns, fi_addr_t dest, struct layer_conn **conn);
/* Fails conn with err (positive): what it holds completes with errors at the next reap. */
void layer_conn_fail(struct layer_conn *conn, int err);
/* Completes what failed connections hold and frees them; end of each progress call. */
void layer_conns_reap(struct layer_conns *conns);

static inline bool layer_conns_has_closed(const struct layer_conns *conns)
{
	return !util_dlist_empty(&conns->closed) || !util_dlist_empty(&conns->draining);
}

/*
 * Liveness, from each progress call: peers waiting on which have been silent are probed, or
 * lost (their connections fail with FI_EHOSTUNREACH). Cheap until it is time to look.
 */
void layer_conns_watch_run(struct layer_conns *conns, uint64_t now_ms);

static inline void layer_conns_watch(struct layer_conns *conns)
{
	uint64_t now_ms;

	if (!conns->is_watching)
		return;
	now_ms = util_coarse_ns() / 1000000;
	if (unlikely(now_ms >= conns->next_watch_ms))
		layer_conns_watch_run(conns, now_ms);
}

/* The connections live (connecting or connected): what FI_OPT_LAYER_CONN_COUNT reads. */
size_t layer_conns_count(const struct layer_conns *conns);

/* Whether a live connection holds sends not yet given to the core (connecting, the core
 * busy, or behind a fence). */
bool layer_conns_has_queued(const struct layer_conns *conns);

/* The AV's notices (under the endpoint's lock). */
void layer_conns_av_inserted(struct layer_conns *conns);
void layer_conns_av_removed(struct layer_conns *conns, size_t index);

#endif /* LAYER_CONN_CONN_H */
