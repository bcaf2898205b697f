/*
 * The receive path (rx.c): the application's receives, and every message that arrives from
 * the connections below: matched against the receive queues (rxq.h), delivered or kept as
 * unexpected (unexp.h), completed.
 */
#ifndef LAYER_PROTO_RX_H
#define LAYER_PROTO_RX_H

#include <sys/uio.h>

#include "layer/core/core.h"
#include "util/tagm.h"

struct layer_proto;
struct layer_conn;

/* A receive posted by the application. */
struct layer_rx {
	struct layer_ctx ctx;           /* LAYER_CTX_READ while a rendezvous read runs; first */
	struct util_dlist link;        /* the plain queue, then conn->reading_rx */
	void *context;
	uint64_t flags;                /* FI_COMPLETION, FI_MULTI_RECV... */
	fi_addr_t src_addr;            /* directed receive: the only source accepted */
	struct util_tagm_recv tagm;    /* tagged: while posted */
	uint64_t tag;                  /* tagged: the message's tag, reported */
	size_t iov_cnt;
	struct iovec iov[LAYER_IOV_LIMIT];
	size_t len;                    /* total buffer bytes */
	size_t mrecv_used;             /* FI_MULTI_RECV: bytes consumed so far */
	/* rendezvous read state (rndv.c) */
	struct layer_conn *conn;
	uint64_t msg_id;
	uint64_t msg_len;
	uint64_t cq_data;
	uint64_t cq_flags;
	fi_addr_t msg_src;
	void *msg_buf;                 /* where the data lands (reported in the completion) */
	size_t read_len;               /* bytes to pull: the message, truncated to the buffer */
	size_t reads_left;             /* reads posted and not completed */
	int read_err;
	/* read cursor, so that reads the core refuses for now can resume */
	size_t seg_idx, seg_off, iov_idx, iov_off, read_done;
	struct layer_rts_seg segs[LAYER_RTS_MAX_SEGS];
	uint32_t seg_cnt;
	bool is_cma;                   /* segs are the peer's own addresses, copied by
					* cross-memory attach (LAYER_HDR_CMA, cma/cma.h) */
	/* an RMA transfer's reads (rma/): called instead of completing a receive */
	void (*on_read_done)(struct layer_proto *proto, struct layer_rx *rx);
	/* collective traffic (coll/): called instead of a completion (bytes received, err 0
	 * or positive); rx is freed after it returns */
	void (*on_done)(struct layer_proto *proto, struct layer_rx *rx, size_t len, int err);
	void *job;                     /* their state: the request, the target's registration,
					* the collective call */
};

/* The application's receives: 0, -FI_EAGAIN (the receive queue is full), -FI_EINVAL. */
ssize_t layer_rx_post(struct layer_proto *proto, const struct iovec *iov, size_t iov_cnt,
		      fi_addr_t src, uint64_t flags, void *context);
ssize_t layer_rx_tpost(struct layer_proto *proto, const struct iovec *iov, size_t iov_cnt,
		       fi_addr_t src, uint64_t tag, uint64_t ignore, uint64_t flags,
		       void *context);
/* FI_PEEK (with FI_CLAIM or FI_DISCARD), and FI_CLAIM of a message claimed before. */
ssize_t layer_rx_peek(struct layer_proto *proto, const struct iovec *iov, size_t iov_cnt,
		      fi_addr_t src, uint64_t tag, uint64_t ignore, uint64_t flags,
		      void *context);
ssize_t layer_rx_claim(struct layer_proto *proto, const struct iovec *iov, size_t iov_cnt,
		       uint64_t flags, void *context);
/*
 * Collective traffic (coll/): a receive of the message tagged tag from src (an AV fi_addr)
 * into len bytes at buf, in the endpoint's own queue; on_done as for struct layer_rx, which
 * may be before this returns (the message was there). 0 or -FI_ENOMEM (then on_done is not
 * called).
 */
int layer_rx_coll_post(struct layer_proto *proto, void *buf, size_t len, fi_addr_t src,
		       uint64_t tag,
		       void (*on_done)(struct layer_proto *proto, struct layer_rx *rx, size_t len,
				       int err),
		       void *job);
/* Takes the posted collective receives of job off the queue, without calling on_done: the
 * number taken. */
size_t layer_rx_coll_cancel(struct layer_proto *proto, void *job);
/* Collective messages that wait unexpected and for which is_stale(tag, arg) are dropped
 * (a group closed). */
void layer_rx_coll_drop(struct layer_proto *proto, bool (*is_stale)(uint64_t tag, void *arg),
			void *arg);
/* fi_cancel of a posted receive: 0, or -FI_ENOENT. */
int layer_rx_cancel(struct layer_proto *proto, void *context);
/* An AV entry was removed: directed receives whose source is gone fail (FI_EADDRNOTAVAIL). */
void layer_rx_av_removed(struct layer_proto *proto);

/* The connection layer's upcalls (rx.c). */
void layer_rx_arrive(struct layer_proto *proto, struct layer_buf *buf);
int layer_rx_place(struct layer_proto *proto, struct layer_buf *buf, struct iovec *iov,
		   size_t *count);
void layer_rx_buf_lost(struct layer_proto *proto, struct layer_buf *buf, int err);
/*
 * The peer of a connection whose messages came from no AV entry was inserted: its unexpected
 * messages get that sender, as if they had come after (a directed receive or a collective's
 * takes them; FI_SOURCE reports it).
 */
void layer_rx_conn_named(struct layer_proto *proto, struct layer_conn *conn);
/* A failed connection: its unexpected eager messages stay, rendezvous ones go. */
void layer_rx_conn_lost(struct layer_proto *proto, struct layer_conn *conn);

/* For rndv.c: completions and the end of a receive. */
void layer_rx_report(struct layer_proto *proto, struct layer_rx *rx, void *buf, size_t len,
		     uint64_t cq_flags, uint64_t data, fi_addr_t src, int err, size_t olen);
struct layer_rx *layer_rx_get(struct layer_proto *proto);
void layer_rx_free(struct layer_proto *proto, struct layer_rx *rx);

int layer_rx_init(struct layer_proto *proto);
/* Close: frees posted receives and unexpected messages (warns of those never matched). */
void layer_rx_fini(struct layer_proto *proto);

#endif /* LAYER_PROTO_RX_H */
