/*
 * What unexpected messages hold, and the bound on it (FI_OFI_LAYER_UNEXP_MAX): unexp.c says
 * how the receive path keeps them and pushes back on senders past the bound.
 */
#ifndef LAYER_PROTO_UNEXP_H
#define LAYER_PROTO_UNEXP_H

#include "layer/core/core.h"
#include "util/bufpool.h"

struct layer_proto;

struct layer_unexp {
	struct util_bufpool rec_pool;  /* struct layer_buf records, LAYER_RECORD_SIZE */
	size_t limit;                  /* FI_OFI_LAYER_UNEXP_MAX */
	size_t bytes;                  /* held now: bounce buffers and records, as allocated */
	size_t max_bytes;              /* the most held at once */
	size_t cnt;                    /* messages held, claimed ones included */
	uint64_t stall_cnt;            /* buffers held back from the core */
	uint64_t pace_cnt;             /* PACE requests sent */
	bool is_short;                 /* a home was left short of buffers by the bound */
	bool is_pacing;                /* some connection's peer was asked to pace */
};

int layer_unexp_init(struct layer_unexp *unexp);
void layer_unexp_fini(struct layer_unexp *unexp);

/*
 * buf (its sender set) matched no receive: returns what keeps it, buf or a record, charged
 * to the endpoint; gives the core a buffer back for it unless the bound holds it back.
 */
struct layer_buf *layer_unexp_keep(struct layer_proto *proto, struct layer_buf *buf);
/* A kept message was received or discarded (off its queue): frees what kept it. */
void layer_unexp_release(struct layer_proto *proto, struct layer_buf *buf);
/* The same without giving anything to the core (endpoint close, a lost connection). */
void layer_unexp_put(struct layer_proto *proto, struct layer_buf *buf);
/* An FI_PEEK found nothing: one more message may come in on each home left dry. */
void layer_unexp_peek_missed(struct layer_proto *proto);
/* What layer_unexp_check (proto.h) calls when the bound holds something back. */
void layer_unexp_update(struct layer_proto *proto);

#endif /* LAYER_PROTO_UNEXP_H */
