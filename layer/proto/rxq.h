/*
 * Receive queues: where posted receives wait for messages and unexpected messages wait for
 * receives, and the one place where the two are matched. An endpoint has two, behind one
 * interface: the plain queue of FI_MSG receives, in posting order, which take any message
 * from their source (FI_MULTI_RECV buffers stay posted while they have room), and the tagged
 * queue of FI_TAGGED receives, util's tag-matching engine (util/tagm.h), with the probes of
 * fi_tagged(3) (FI_PEEK, FI_CLAIM, FI_DISCARD). Both keep unexpected messages in arrival
 * order.
 *
 * A receive names one source: FI_ADDR_UNSPEC (anyone), an AV entry (the message's
 * buf->src_addr), or with FI_AUTH_KEY an AV key handle (the message's buf->key, its group
 * in the engine).
 */
#ifndef LAYER_PROTO_RXQ_H
#define LAYER_PROTO_RXQ_H

#include "layer/core/core.h"
#include "util/tagm.h"

struct layer_rx;

struct layer_rxq {
	bool is_tagged;
	struct util_dlist posted;      /* plain: struct layer_rx in posting order */
	struct util_dlist unexp;       /* plain: struct layer_buf in arrival order */
	struct util_tagm tagm;         /* tagged: receives and unexpected messages */
};

int layer_rxq_init(struct layer_rxq *q, bool is_tagged);
/* At close: frees_rx and free_buf are called for what is left (in no particular order);
 * returns the number of unexpected messages that were never matched. */
size_t layer_rxq_fini(struct layer_rxq *q, void (*free_rx)(struct layer_rx *rx, void *arg),
		      void (*free_buf)(struct layer_buf *buf, void *arg), void *arg);

/*
 * A message arrives (buf->src_addr and buf->key set): the receive it goes to, taken off the
 * queue unless it is a multi-receive buffer (the caller removes it once full); NULL when
 * none. With may_multi false (direct receive, while the message is still arriving) a
 * multi-receive buffer is not taken: NULL then.
 */
struct layer_rx *layer_rxq_match(struct layer_rxq *q, struct layer_buf *buf, bool may_multi);
/* No receive took buf: it waits, behind earlier arrivals. */
void layer_rxq_add_unexp(struct layer_rxq *q, struct layer_buf *buf);
/* A receive (tag and ignore for a tagged one, source src) is posted: the earliest unexpected
 * message it takes, removed, or NULL; then it is posted with layer_rxq_post. */
struct layer_buf *layer_rxq_take(struct layer_rxq *q, uint64_t tag, uint64_t ignore,
				 fi_addr_t src);
void layer_rxq_post(struct layer_rxq *q, struct layer_rx *rx, uint64_t tag, uint64_t ignore);
/* Takes a posted receive off the queue (a multi-receive buffer that is full). */
void layer_rxq_remove(struct layer_rxq *q, struct layer_rx *rx);
/* The posted receive for which is_match(rx, arg), not removed; NULL when none. Cold. */
struct layer_rx *layer_rxq_find(struct layer_rxq *q,
				bool (*is_match)(const struct layer_rx *rx, void *arg), void *arg);
/* The unexpected message (claimed ones included) for which is_match(buf, arg); NULL when none.
 * Cold. */
struct layer_buf *layer_rxq_find_unexp(struct layer_rxq *q,
				       bool (*is_match)(const struct layer_buf *buf, void *arg),
				       void *arg);
void layer_rxq_remove_unexp(struct layer_rxq *q, struct layer_buf *buf);
/* The sender of an unexpected message that came from none became known: src from now on
 * (directed receives of src take it, in its arrival place). */
void layer_rxq_set_src(struct layer_rxq *q, struct layer_buf *buf, fi_addr_t src);

/* Tagged only: FI_PEEK finds without taking; FI_CLAIM ties the message to a context, which
 * takes it later; FI_DISCARD removes it (layer_rxq_remove_unexp). */
struct layer_buf *layer_rxq_peek(struct layer_rxq *q, uint64_t tag, uint64_t ignore,
				 fi_addr_t src);
void layer_rxq_claim(struct layer_rxq *q, struct layer_buf *buf, void *context);
struct layer_buf *layer_rxq_take_claimed(struct layer_rxq *q, void *context);

#endif /* LAYER_PROTO_RXQ_H */
