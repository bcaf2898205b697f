/*
 * The transmit path (tx.c): the application's sends and the provider's own control messages
 * as messages of the wire protocol on a connection.
 */
#ifndef LAYER_PROTO_TX_H
#define LAYER_PROTO_TX_H

#include <sys/uio.h>

#include "layer/core/core.h"
#include "layer/mr.h"

struct layer_proto;
struct layer_peer;

/* Where a send is. */
enum layer_tx_state {
	LAYER_TX_QUEUED,               /* on conn->queued_tx or fenced_tx */
	LAYER_TX_POSTED,               /* given to the core (conn->posted_tx) */
	LAYER_TX_WAITING,              /* sent, waiting for the peer's ACK (conn->acked_tx) */
};

struct layer_tx {
	struct layer_ctx ctx;           /* LAYER_CTX_SEND, the channel it went on; first */
	struct util_dlist link;        /* one of conn's tx lists */
	struct layer_conn *conn;
	enum layer_tx_state state;
	void *context;                 /* user context */
	uint64_t flags;                /* operation flags (FI_COMPLETION, FI_INJECT...) */
	uint64_t cq_flags;             /* flags reported in the completion */
	size_t len;                    /* message bytes */
	bool is_ctrl;                  /* provider's own message: no user completion */
	bool may_keep;                 /* an answer whose request the target's application
					* hears nothing of: it may wait in the ring's stage for
					* the endpoint's next call (ep.c, core/ring.h) */
	bool is_counted;               /* an application's: counted against tx_size */
	/* collective traffic (coll/): called instead of a user completion */
	void (*on_done)(struct layer_proto *proto, void *job, int err);
	void *job;
	bool wants_ack;                /* completes on the target's ACK (rendezvous, or
					* FI_DELIVERY_COMPLETE / FI_MATCH_COMPLETE) */
	bool is_acked;                 /* that ACK came before the core completed the send */
	int ack_err;                   /* what the ACK said: 0, or FI_EIO (LAYER_HDR_FAILED) */
	bool is_active;                /* counted in conn->tx_active */
	uint64_t blind_before;         /* conn->blind_sent when it started */
	bool is_direct;                /* direct RMA (rma/grant.h): hdr.op's WRITE or READ_REQ
					* on the core's own RMA at hdr.tag (the core's address)
					* under hdr.data (its key), iov the local buffers (an
					* inject's in inline_data); no message */
	size_t iov_cnt;                /* core iov entries in iov */
	struct iovec iov[LAYER_IOV_LIMIT + 2]; /* the header (and RMA target), the payload */
	/* RMA (rma/): a read's local buffers; what the target's side holds of its memory */
	struct iovec rma_iov[LAYER_IOV_LIMIT];
	size_t rma_iov_cnt;
	uint64_t rma_cq_data;          /* a WRITE's remote CQ data, sent after its data */
	struct util_mr_map_entry *mr_entry;
	layer_rndv_reg_t *reg[LAYER_IOV_LIMIT]; /* rendezvous registrations */
	size_t reg_cnt;
	void *bounce;                  /* malloc'd copy when the iovs do not fit the core */
	struct layer_hdr hdr;
	/* inline payload (inject) or RTS segments follow the header */
	union {
		uint8_t inline_data[LAYER_INJECT_SIZE];
		struct layer_rts_seg segs[LAYER_RTS_MAX_SEGS + 1]; /* + an RMA target */
	};
};

/*
 * A send of the application to dest. flags holds FI_TAGGED for a tagged message (tag is then
 * sent), the completion flags (FI_COMPLETION, FI_INJECT, FI_DELIVERY_COMPLETE...),
 * FI_REMOTE_CQ_DATA, FI_FENCE. 0, -FI_EAGAIN (the transmit queue is full), or -FI_E*.
 */
ssize_t layer_tx_send(struct layer_proto *proto, const struct iovec *iov, size_t iov_cnt,
		      fi_addr_t dest, uint64_t data, uint64_t tag, uint64_t flags,
		      void *context);
/*
 * Collective traffic (coll/): len bytes at buf to dest, a message of the provider's own
 * (LAYER_HDR_COLL with tag), outside the application's transmit queue and its fences;
 * on_done(proto, job, err) when it completes, as a send would (err 0 or positive), which may
 * be before this returns. 0, or -FI_E* (then on_done is not called).
 */
int layer_tx_coll_send(struct layer_proto *proto, const void *buf, size_t len, fi_addr_t dest,
		       uint64_t tag, void (*on_done)(struct layer_proto *proto, void *job, int err),
		       void *job);
/* A control message of the protocol (ACK, PACE, UNPACE) on conn: 0 or -FI_ENOMEM. */
int layer_tx_ctrl(struct layer_proto *proto, struct layer_conn *conn, enum layer_op op,
		  uint16_t flags, uint64_t msg_id);
/* The same with its header's data field (an ACK's error, a REVOKE's key). */
int layer_tx_ctrl_data(struct layer_proto *proto, struct layer_conn *conn, enum layer_op op,
		       uint16_t flags, uint64_t msg_id, uint64_t data);
/*
 * A control message built and not sent yet (its header: op, flags, msg_id; one iov), for the
 * caller to complete; NULL without memory. layer_tx_ctrl_send sends it on conn, outside the
 * application's fences.
 */
struct layer_tx *layer_tx_ctrl_new(struct layer_proto *proto, enum layer_op op, uint16_t flags,
				   uint64_t msg_id);
void layer_tx_ctrl_send(struct layer_proto *proto, struct layer_conn *conn, struct layer_tx *tx);
/* An ACK of msg_id: err 0, or the positive errno the request failed with. */
int layer_tx_ack_send(struct layer_proto *proto, struct layer_conn *conn, uint64_t msg_id,
		      int err);
/*
 * The same for a target's answer to a write or a write-form atomic its application hears
 * nothing of (no remote CQ data): may_keep lets it wait for the endpoint's next call, as a
 * read's answer does (tx->may_keep, ep/ep.c), to leave with the application's next send.
 */
int layer_tx_ack_send_kept(struct layer_proto *proto, struct layer_conn *conn, uint64_t msg_id,
			   int err, bool may_keep);

/*
 * For the RMA paths (rma/): an application's transmit entry (counted against tx_size: NULL
 * when the queue is full), started on conn once its header and iovs are set (fences and
 * queuing as for sends), found again by the id its answer names, and completed by that
 * answer (err 0 or positive).
 */
struct layer_tx *layer_tx_new(struct layer_proto *proto);
void layer_tx_discard(struct layer_proto *proto, struct layer_tx *tx);
void layer_tx_start(struct layer_proto *proto, struct layer_conn *conn, struct layer_tx *tx);
struct layer_tx *layer_tx_find(struct layer_proto *proto, struct layer_conn *conn,
			       uint64_t msg_id);
void layer_tx_answered(struct layer_proto *proto, struct layer_tx *tx, int err);
/* The error a FAILED answer (ACK, READ_RESP) carries (positive), or 0. */
int layer_tx_answer_err(const struct layer_hdr *hdr);

/* tx completes on its peer's ACK: it gets an id (hdr.msg_id) for it. 0 or -FI_ENOMEM. */
int layer_tx_want_ack(struct layer_proto *proto, struct layer_tx *tx);
/* conn connected, or the core has room again: its queued sends go to the core. */
void layer_tx_flush(struct layer_proto *proto, struct layer_conn *conn);
/* The core completed a send (err 0, or a positive errno). */
void layer_tx_done(struct layer_proto *proto, struct layer_tx *tx, int err);
/* An ACK came in on conn (its msg_id names the send): false when it is for no send. */
bool layer_tx_ack(struct layer_proto *proto, struct layer_conn *conn,
		  const struct layer_hdr *hdr);
/* The peer asks (is_paced) that messages above the inject size go to it by rendezvous, or
 * no longer: the sends queued on its connections change too. */
void layer_tx_set_paced(struct layer_proto *proto, struct layer_peer *peer, bool is_paced);
/* A failed connection's sends complete with its error; the rest (in the core) later. */
void layer_tx_conn_lost(struct layer_proto *proto, struct layer_conn *conn);
/* Endpoint close: a connection's sends are freed without completions. */
void layer_tx_conn_discard(struct layer_proto *proto, struct layer_conn *conn);

int layer_tx_init(struct layer_proto *proto);
void layer_tx_fini(struct layer_proto *proto);

#endif /* LAYER_PROTO_TX_H */
