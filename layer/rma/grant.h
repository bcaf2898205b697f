/*
 * Direct RMA: grants of the core's keys, over a connected core with RMA (tcp).
 *
 * An RMA request carried as a message (rma.h) costs the target a receive completion (and,
 * over tcp, the signal of its CQ's wait object), the work of the request and an answer. tcp's
 * own RMA write costs the target nothing above its socket: the core places the bytes, reports
 * nothing, and completes the write at the initiator once sent. But tcp checks a write's key
 * only as it arrives, and closes the connection, and everything on it, over a bad one; and
 * tcp's keys are not the application's (the provider hands out its own). So the core's RMA is
 * used only where the target has said it may be:
 *
 * - a target that has checked a peer's write, read or atomic for one of its regions
 *   (rma_target.c, atomic/atomic_target.c) grants the region on that connection: GRANT
 *   (core/wire.h, struct layer_grant) says how peers name the region (key, first address,
 *   length, access) and how the core names it (the core's key, the core's address of its
 *   first byte). A region is granted when it is
 *   one range registered with the core, no counter counts peers' accesses to it (fi_mr_bind)
 *   and the endpoint counts none (FI_REMOTE_WRITE / FI_REMOTE_READ counters): the core's
 *   RMA counts nothing at the target. At most LAYER_GRANT_MAX regions per connection.
 * - the initiator keeps what it was granted on the connection; a write or read inside a
 *   granted range with the granted access, without remote CQ data or FI_DELIVERY_COMPLETE
 *   (which need the target's answer), goes on the core's RMA on that connection (proto/tx.c
 *   posts it as it posts sends, behind fences and queued sends) and completes as the core
 *   completes it; everything else goes as a message, checked at the target as before.
 * - a write-form atomic inside a granted range, its operands inline, needs no answer either
 *   (atomic/atomic.c: UNANSWERED, complete once sent). The target applies it in order with
 *   the rest of the connection, but its core serves the core's RMA as it arrives, so such
 *   atomics are counted (conn->blind_sent) and the core's RMA waits, going as messages,
 *   until an answer to a request sent after them has come (conn->blind_applied).
 * - when a granted region closes (fi_close) or gets a counter (fi_mr_bind), the target sends
 *   REVOKE on every connection it granted it on, before fi_close returns; so a message the
 *   application sends after the close reaches the peer after the REVOKE, which the peer takes
 *   first: from then on its requests for the region go as messages, and fail (FI_ENOKEY). The
 *   core's registration is closed at once (the application may free the memory): a write
 *   the peer issued before it took the REVOKE (a race with the close, fi_mr(3)) reaches a
 *   key tcp no longer knows, and tcp ends the connection (what was outstanding on it fails;
 *   a later request connects again); such an atomic is refused at the target, which logs it.
 *
 * Grants live in the connection (conn->grants) and end with it. Runs under the endpoint's
 * lock; layer_grant_revoke takes it.
 */
#ifndef LAYER_RMA_GRANT_H
#define LAYER_RMA_GRANT_H

#include "layer/proto/proto.h"
#include "util/mr_map.h"

/* Regions granted on one connection, in each direction. */
#define LAYER_GRANT_MAX 32

struct layer_grants {
	struct layer_grant held[LAYER_GRANT_MAX]; /* the peer's regions, granted to us */
	size_t held_cnt;
	uint64_t given[LAYER_GRANT_MAX];           /* keys of ours granted to the peer */
	size_t given_cnt;
};

/*
 * The initiator: the grant for len bytes at addr under key with access on conn, or NULL
 * (the request then goes as a message). *core_addr: where the core's RMA names addr.
 */
static inline const struct layer_grant *
layer_grant_find(const struct layer_conn *conn, uint64_t key, uint64_t addr, size_t len,
		 uint64_t access, uint64_t *core_addr)
{
	const struct layer_grants *grants = conn->grants;
	const struct layer_grant *g;
	size_t i;

	if (likely(!grants))
		return NULL;
	for (i = 0; i < grants->held_cnt; i++) {
		g = &grants->held[i];
		if (g->key != key)
			continue;
		if ((g->access & access) != access || addr < g->base ||
		    addr - g->base > g->len || len > g->len - (addr - g->base))
			return NULL;
		*core_addr = g->core_addr + (addr - g->base);
		return g;
	}
	return NULL;
}

/*
 * The target checked a request on conn for entry's region (held by the caller): grants the
 * region on conn when it may be and is not already.
 */
void layer_grant_offer(struct layer_proto *proto, struct layer_conn *conn,
		       struct util_mr_map_entry *entry);
/* A GRANT or REVOKE came in (buf stays the caller's). */
void layer_grant_arrive(struct layer_proto *proto, struct layer_buf *buf);
/* The region of key closes or gets a counter: REVOKE on every connection of this endpoint it
 * was granted on (the endpoint's lock held). */
void layer_grant_revoke(struct layer_proto *proto, uint64_t key);

#endif /* LAYER_RMA_GRANT_H */
