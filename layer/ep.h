/*
 * Reliable-datagram endpoint over a connected (MSG) or a reliable-datagram (RDM) core.
 *
 * Everything the protocol keeps per peer hangs off a struct layer_conn: the sends waiting,
 * in flight and waiting for their ACK, the fenced ones, the rendezvous reads running. What
 * differs between core kinds is behind struct layer_core_ops, chosen when the endpoint
 * opens (conn_msg.c, conn_rdm.c); the data path calls the core through layer_core_send and
 * layer_core_read, which need no kind: a connection names the core endpoint to use and the
 * peer's address on it (FI_ADDR_UNSPEC on a connected endpoint).
 *
 * Each direction of a peer pair has one connection that carries its user data, so messages
 * from one peer arrive in the order sent. An endpoint sends a peer's messages on the
 * connection in ep->out_conns for that peer: the one it opened on the first send, or, when a
 * peer in the AV connected first, that peer's incoming connection, adopted when it is
 * accepted (MSG core), so that a ping-pong runs over one transport connection whose replies
 * carry its acknowledgements. Two endpoints that connect to each other at the same time keep
 * one connection each, used one way: there is nothing to resolve, nothing lost or
 * duplicated, and sending to oneself is the ordinary case. Control replies (rendezvous reads
 * and ACKs) travel back on the connection the request came in on.
 *
 * MSG core: a connection is a core endpoint of its own; a passive endpoint listens, and the
 * connection request carries the requester's listening address. RDM core: the endpoint has
 * one core endpoint and one core AV; a connection is the peer's address in that AV, and
 * which connection a message came in on follows from the core's source address (FI_SOURCE),
 * once a HELLO has put the sender into the receiver's core AV (conn_rdm.c).
 *
 * Authorization keys (auth.c) are a property of connections: a connection's key is chosen
 * when it opens and travels once, in the connection request or in the HELLO of its key
 * slot (RDM core); the receiver checks it there, refuses the connection (its messages are
 * never delivered) or records in conn->key the AV key handle everything on it is attributed
 * to. The data path only copies that handle into each message, for FI_AUTH_KEY receives.
 */
#ifndef LAYER_EP_H
#define LAYER_EP_H

#include <sys/uio.h>
#include <netinet/in.h>
#include <rdma/fi_rma.h>

#include "layer/layer.h"
#include "layer/proto.h"
#include "util/bufpool.h"
#include "util/tagm.h"

struct layer_av;
struct layer_ep;
struct layer_rdm_peer;

/* The context of every core operation starts with its kind, so completions dispatch. */
enum layer_ctx_type {
	LAYER_CTX_TX,       /* struct layer_tx: a send (user data or control) */
	LAYER_CTX_RX_BUF,   /* struct layer_rx_buf: a posted bounce buffer */
	LAYER_CTX_READ,     /* struct layer_rx: a rendezvous read into a user buffer */
};

enum layer_conn_state {
	LAYER_CONN_CONNECTING,
	LAYER_CONN_CONNECTED,
	LAYER_CONN_CLOSED,  /* failed or shut down; reaped at the end of the progress call */
};

struct layer_conn {
	struct util_dlist link;        /* ep->conns, ep->closed_conns or ep->draining_conns */
	struct layer_ep *ep;
	struct fid_ep *core_ep;        /* MSG: the connection's own; RDM: the endpoint's */
	fi_addr_t core_addr;           /* MSG: FI_ADDR_UNSPEC; RDM: the peer in the core AV */
	enum layer_conn_state state;
	int fail_err;                  /* positive errno the connection failed with */
	bool is_outgoing;              /* opened by this endpoint to send to peer_index */
	bool is_tx;                    /* sends to peer_index (ep->out_conns) go on it */
	size_t peer_index;             /* is_tx: the AV index it serves */
	bool is_ctrl_only;             /* MSG: opened by this endpoint, no user data seen on
					* it yet: only a few buffers posted (conn_msg.c) */
	fi_addr_t key;                 /* the AV key handle (FI_AV_AUTH_KEY) of what travels
					* on it (accepted: the peer's, checked; opened: its
					* own), else FI_ADDR_NOTAVAIL */
	uint16_t key_slot;             /* RDM: outgoing, the slot of its key at the peer;
					* incoming, the peer's slot it serves; MSG: 0 */
	bool is_paced;                 /* the peer asked us to pace our sends on it (PACE) */
	size_t tx_eager;               /* largest payload sent eager on it: what the peer's
					* buffers take, as its handshake said (MSG: acceptance;
					* RDM: HELLO_ACK); until then only inline-size ones */
	bool is_pace_asked;            /* we asked the peer to pace its sends (unexp.c) */
	uint8_t peer_addr[LAYER_ADDR_MAX]; /* peer's address (MSG: listening; normalised) */
	struct layer_rdm_peer *rdm_peer; /* RDM: the peer it belongs to, NULL once closed */
	struct util_dlist peer_link;   /* RDM, outgoing: rdm_peer->out_conns */
	/* Everything that refers to this connection is on one of its lists, so that a failed
	 * connection can complete all of it exactly once. */
	struct util_dlist pending_tx;  /* struct layer_tx not yet accepted by the core */
	struct util_dlist inflight_tx; /* struct layer_tx posted to the core */
	struct util_dlist rndv_tx;     /* struct layer_tx sent, waiting for their ACK */
	struct util_dlist posted_bufs; /* struct layer_rx_buf posted to the core */
	size_t posted_cnt;             /* MSG: buffers in posted_bufs */
	struct util_dlist reading_rx;  /* struct layer_rx whose rendezvous reads run here */
	struct util_dlist fenced_tx;   /* struct layer_tx held by an FI_FENCE until earlier
					* sends to this peer complete */
	size_t tx_active;              /* user sends posted here and not completed */
};

struct layer_tx {
	enum layer_ctx_type type;      /* LAYER_CTX_TX; first */
	struct util_dlist link;        /* one of conn's tx lists */
	struct layer_conn *conn;
	void *context;                 /* user context */
	uint64_t flags;                /* operation flags (FI_COMPLETION, FI_INJECT...) */
	uint64_t cq_flags;             /* flags reported in the completion */
	size_t len;                    /* message bytes */
	bool is_ctrl;                  /* provider's own message: no user completion */
	bool is_acked;                 /* ACK seen before the core completed the send */
	int ack_err;                   /* what that ACK said: 0, or FI_EIO (LAYER_HDR_FAILED) */
	bool wants_ack;                /* completes on the target's ACK (rendezvous, or
					* FI_DELIVERY_COMPLETE / FI_MATCH_COMPLETE) */
	bool is_active;                /* counted in conn->tx_active */
	size_t iov_cnt;                /* core iov entries in iov */
	struct iovec iov[LAYER_IOV_LIMIT + 1];
	struct fid_mr *mr[LAYER_IOV_LIMIT]; /* rendezvous registrations */
	size_t mr_cnt;
	void *bounce;                  /* malloc'd copy when the iovs do not fit the core */
	struct layer_hdr hdr;
	/* inline payload (inject) or RTS segments follow the header */
	union {
		uint8_t inline_data[LAYER_INJECT_SIZE];
		struct layer_rts_seg segs[LAYER_RTS_MAX_SEGS];
	};
};

struct layer_rx_buf {
	enum layer_ctx_type type;      /* LAYER_CTX_RX_BUF; first */
	bool is_record;                /* a record from ep->rec_pool (an unexpected message's
					* copy), not a bounce buffer */
	struct util_dlist link;        /* conn->posted_bufs (RDM: ep->rdm.posted_bufs), then
					* ep->unexp_msgs if unexpected */
	struct layer_conn *conn;       /* the connection it came on (RDM: set at arrival);
					* NULL once an unexpected message outlived it */
	size_t len;                    /* bytes received */
	fi_addr_t src_addr;            /* resolved at arrival */
	fi_addr_t key;                 /* its connection's key handle (conn->key), kept for
					* FI_AUTH_KEY receives once the connection is gone */
	struct util_tagm_msg tagm;     /* while an unexpected tagged message */
	/* Direct receive (conn_msg.c): what the core's callback decided while the message was
	 * still arriving, before its completion. */
	struct layer_rx *rx;           /* the receive it matched then, off every list */
	void *ext;                     /* malloc'd payload larger than the buffer (ext_len) */
	size_t ext_len;
	bool is_placed;                /* the payload went straight into rx's buffer */
	bool is_unmatched;             /* counted in ep->unmatched_cnt */
	/* header, then payload (up to eager_size; a record, and a buffer with direct receive:
	 * LAYER_RECORD_SIZE in all) */
	uint8_t data[] __attribute__((aligned(16)));
};

/* A buffer about to be posted to the core: nothing decided about it yet. */
static inline void layer_buf_reset(struct layer_rx_buf *buf, struct layer_conn *conn)
{
	buf->type = LAYER_CTX_RX_BUF;
	buf->is_record = false;
	buf->conn = conn;
	buf->rx = NULL;
	buf->ext = NULL;
	buf->ext_len = 0;
	buf->is_placed = false;
	buf->is_unmatched = false;
}

/* Where a received message's payload is. */
static inline uint8_t *layer_buf_payload(struct layer_rx_buf *buf)
{
	return buf->ext ? (uint8_t *) buf->ext : buf->data + LAYER_HDR_SIZE;
}

/* Data bytes of a record: a rendezvous request, or a message up to the inject size (unexp.c). */
#define LAYER_RECORD_SIZE (LAYER_HDR_SIZE + UTIL_MAX(LAYER_INJECT_SIZE, \
				LAYER_RTS_MAX_SEGS * sizeof(struct layer_rts_seg)))

/* A receive posted by the application. */
struct layer_rx {
	enum layer_ctx_type type;      /* LAYER_CTX_READ while a rendezvous read runs; first */
	struct util_dlist link;        /* ep->posted_rx, then conn->reading_rx */
	void *context;
	uint64_t flags;                /* FI_COMPLETION, FI_MULTI_RECV... */
	fi_addr_t src_addr;            /* directed receive: the only source accepted */
	struct util_tagm_recv tagm;    /* tagged: while posted */
	uint64_t tag;                  /* tagged: the message's tag, reported */
	size_t iov_cnt;
	struct iovec iov[LAYER_IOV_LIMIT];
	size_t len;                    /* total buffer bytes */
	size_t mrecv_used;             /* FI_MULTI_RECV: bytes consumed so far */
	/* rendezvous read state */
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
};

/*
 * What differs between core kinds (conn_msg.c, conn_rdm.c). Every entry runs with ep->lock
 * held except where noted.
 */
struct layer_core_ops {
	/* The core holds operations of every connection on one endpoint: a closed connection's
	 * sends and reads in flight still complete through the core, so it is freed only once
	 * they have (MSG: closing the connection's core endpoint drops them). */
	bool has_shared_ep;
	/* fi_enable: opens what receives (listener, or the core endpoint); fills ep->addr. */
	int (*enable)(struct layer_ep *ep);
	/* Endpoint close: closes the core objects; connections are then freed without
	 * completions by the caller. */
	void (*close)(struct layer_ep *ep);
	/* A new outgoing connection to addr (AV index) whose messages carry key (len 0:
	 * none), connecting or connected. */
	int (*connect)(struct layer_ep *ep, size_t index, const void *addr,
		       const struct layer_key *key, struct layer_conn **conn);
	/* Reads core events and completions. */
	void (*progress)(struct layer_ep *ep);
	/* fi_trywait on the core's wait objects (no lock held). */
	int (*trywait)(struct layer_ep *ep);
	/* Posts a bounce buffer for conn's messages (RDM: the endpoint's; conn unused), unless
	 * conn (RDM: the endpoint) already holds as many as it keeps: -FI_EAGAIN then. */
	int (*post_buf)(struct layer_ep *ep, struct layer_conn *conn, struct layer_rx_buf *buf);
	/* Posts bounce buffers until each home (MSG: every live connection; RDM: the endpoint)
	 * holds min(upto, the number it keeps). */
	void (*refill)(struct layer_ep *ep, size_t upto);
	/* The core side of a connection being failed (MSG: closes its core endpoint). */
	void (*conn_closing)(struct layer_conn *conn);
	/* A core operation of conn failed with err (tx NULL for a read): fails the connection
	 * when the error means the peer is lost; the operation itself is completed by the
	 * caller. */
	void (*op_failed)(struct layer_conn *conn, const struct layer_tx *tx, int err);
	/* An ACK came in on conn: completes the send it answers (RDM: on one of the peer's
	 * outgoing connections). */
	void (*handle_ack)(struct layer_conn *conn, const struct layer_hdr *hdr);
	/* A PACE (is_paced) or UNPACE came in on conn: applies to the connections the
	 * endpoint sends to that peer on (layer_proto_set_paced). */
	void (*handle_pace)(struct layer_conn *conn, bool is_paced);
};

extern const struct layer_core_ops layer_core_msg_ops;
/* Sets up direct receive on a MSG core domain when the core has it; true if it is on. */
bool layer_msg_direct_recv_init(struct layer_domain *domain);
extern const struct layer_core_ops layer_core_rdm_ops;

/* RDM core: the endpoint's core objects and its peers (conn_rdm.c). */
struct layer_rdm {
	struct fid_ep *core_ep;
	struct fid_av *core_av;        /* FI_AV_TABLE: peers by core fi_addr */
	struct layer_rdm_peer *by_addr; /* uthash by address */
	struct layer_rdm_peer **by_core_addr; /* indexed by core fi_addr */
	size_t by_core_addr_cnt;
	struct util_dlist posted_bufs; /* struct layer_rx_buf posted on core_ep */
	size_t posted_cnt;
	size_t buf_target;             /* bounce buffers kept posted */
};

struct layer_ep {
	struct fid_ep ep_fid;
	struct layer_domain *domain;
	struct util_lock lock;
	uint64_t caps;
	uint64_t tx_op_flags;
	uint64_t rx_op_flags;
	size_t tx_size;
	size_t rx_size;
	bool is_enabled;
	bool tx_selective;             /* FI_SELECTIVE_COMPLETION on the transmit CQ */
	bool rx_selective;
	size_t min_multi_recv;

	struct layer_av *av;
	struct layer_cq *tx_cq;
	struct layer_cq *rx_cq;
	struct layer_cntr *send_cntr;
	struct layer_cntr *recv_cntr;
	struct layer_eq *eq;
	fi_addr_t *keys;               /* AV keys referenced while enabled (FI_AV_AUTH_KEY) */
	size_t key_cnt;
	bool has_av_keys;              /* domain with FI_AV_AUTH_KEY: keys come from the AV */
	struct layer_key auth_key;     /* otherwise: the endpoint's key (its own, else the
					* domain's), or none */
	uint64_t auth_dropped_cnt;     /* connections, HELLOs, messages refused for their key */

	/* core objects */
	const struct layer_core_ops *core; /* per core kind, chosen at open */
	struct fi_info *core_info;     /* template for the core's endpoints */
	struct fid_cq *core_cq;
	struct fid_eq *core_eq;        /* MSG: connection events; RDM: unused, in the wait set */
	struct fid_pep *core_pep;      /* MSG: the listener */
	struct layer_rdm rdm;          /* RDM: the core endpoint and peers */
	int core_cq_fd;
	int core_eq_fd;
	uint8_t addr[LAYER_ADDR_MAX];  /* the endpoint's address (normalised): MSG the
					* listener's, RDM the core endpoint's */
	size_t addrlen;
	bool core_has_virt_addr;       /* core RMA addresses are virtual addresses */
	bool core_has_prov_key;

	/* peers */
	struct layer_conn **out_conns; /* by AV index: connection to send on */
	size_t out_conns_cnt;
	struct util_dlist conns;       /* every live connection */
	struct util_dlist closed_conns; /* failed, to be reaped at the end of progress */
	struct util_dlist draining_conns; /* reaped, their core operations still in flight */

	/* receive side */
	struct util_dlist posted_rx;   /* struct layer_rx in posting order */
	struct util_dlist unexp_msgs;  /* struct layer_rx_buf in arrival order */
	struct util_tagm tagm;         /* tagged receives and unexpected tagged messages */

	struct util_bufpool tx_pool;   /* struct layer_tx, user sends bounded by tx_size */
	size_t tx_used;                /* user sends outstanding */
	struct util_bufpool rx_pool;   /* struct layer_rx, bounded by rx_size */
	size_t rx_used;
	struct util_bufpool buf_pool;  /* struct layer_rx_buf */
	size_t buf_size;               /* header + eager_size (direct receive: a record) */
	size_t direct_max;             /* direct receive: the largest eager payload taken */
	/* unexpected messages: what they hold and the bound on it (unexp.c) */
	struct util_bufpool rec_pool;  /* struct layer_rx_buf records, LAYER_RECORD_SIZE */
	size_t unexp_limit;            /* FI_OFI_LAYER_UNEXP_MAX */
	size_t unexp_bytes;            /* held now: bounce buffers and records, as allocated */
	size_t unexp_max_bytes;        /* the most held at once */
	size_t unexp_cnt;              /* messages held, claimed ones included */
	uint64_t stall_cnt;            /* buffers held back from the core */
	uint64_t pace_cnt;             /* PACE requests sent */
	bool is_short;                 /* a home was left short of buffers by the bound */
	bool is_pacing;                /* some connection's peer was asked to pace */
	uint64_t next_msg_id;
	size_t core_iov_limit;         /* iov entries one core send takes */
	size_t core_inject_size;       /* bytes one core inject takes (header included) */
	/* MSG: pacing of the core EQ reads (conn_msg.c) */
	unsigned eq_calls;             /* progress calls since the last read */
	unsigned eq_period;            /* calls between reads at most */
	uint64_t eq_read_ns;           /* coarse clock at the last read */
	bool has_pending;              /* some connection has queued sends or blocked reads */
	size_t unmatched_cnt;          /* direct receive: messages arriving that matched no
					* receive; until they complete, none matches early */
	uint64_t dropped_cnt;          /* malformed messages dropped */
};

int layer_ep_open(struct fid_domain *domain, struct fi_info *info, struct fid_ep **ep,
		  void *context);
/* Runs the endpoint's progress: core completions, connection events, queued sends. */
void layer_ep_progress(struct layer_ep *ep);
/* 0 when the core has nothing pending and the caller may sleep on the wait fds. */
int layer_ep_trywait(struct layer_ep *ep);
/* A CQ or counter that can block is bound: the core CQ gets a wait fd (before fi_enable). */
int layer_ep_core_cq_wait(struct layer_ep *ep);

/* conn.c (ep->lock held) */
/* A connection on ep's conns list (connecting), with its lists empty; NULL without memory. */
struct layer_conn *layer_conn_alloc(struct layer_ep *ep, bool is_outgoing);
/*
 * What a connection may send eager once its peer's handshake said its buffers take bytes
 * (capped at LAYER_EAGER_MAX); 0, from a peer that does not say, stands for our own
 * eager_size, as before the handshakes said it.
 */
size_t layer_conn_peer_eager(uint64_t bytes);
/* The connection to send to av index/addr on, connecting on first use. */
int layer_conn_get(struct layer_ep *ep, size_t index, const void *addr,
		   struct layer_conn **conn);
/* Closes a failed connection; what it holds is completed with errors by layer_conn_reap. */
void layer_conn_fail(struct layer_conn *conn, int err);
/* Completes what closed connections still hold; called at the end of progress. */
void layer_conn_reap(struct layer_ep *ep);
/* Endpoint close, after the core objects: frees every connection without completions. */
void layer_conn_free_all(struct layer_ep *ep);
/* Connecting (conn_msg.c: FI_CONNECTED; conn_rdm.c: the peer knows us) is done. */
void layer_conn_connected(struct layer_conn *conn);
/*
 * An accepted connection from a peer in the AV that this endpoint has no connection to send
 * on yet becomes that peer's: the endpoint's sends to it share the connection. With keys
 * from the AV, the peer is the address inserted with the connection's key.
 */
void layer_conn_adopt(struct layer_ep *ep, struct layer_conn *conn);
/* User data came in on a conn->is_ctrl_only connection: gives it its full set of buffers. */
void layer_conn_carries_data(struct layer_ep *ep, struct layer_conn *conn);

/*
 * auth.c: which authorization key an endpoint sends with and which it accepts (see there).
 * layer_auth_init: at open, the endpoint's key from info: 0 or -FI_EINVAL.
 * layer_auth_tx_key: the key sends to AV index carry, and its AV key handle (FI_AV_AUTH_KEY;
 * FI_ADDR_NOTAVAIL otherwise): 0, or -FI_EACCES (the address was inserted with a key the
 * endpoint was not enabled with).
 * layer_auth_accepts: whether a peer's key is one the endpoint accepts, and the AV key handle
 * its messages are attributed to (FI_AV_AUTH_KEY; FI_ADDR_NOTAVAIL otherwise).
 * layer_auth_refused: counts a refusal and logs it (warning once per endpoint, then info).
 * layer_auth_holds: whether key is a key handle the endpoint was enabled with.
 */
int layer_auth_init(struct layer_ep *ep, const struct fi_info *info);
int layer_auth_tx_key(struct layer_ep *ep, size_t index, struct layer_key *key,
		      fi_addr_t *handle);
bool layer_auth_accepts(struct layer_ep *ep, const struct layer_key *key, fi_addr_t *handle);
void layer_auth_refused(struct layer_ep *ep, const char *what);
bool layer_auth_holds(const struct layer_ep *ep, fi_addr_t key);

/* proto.c (ep->lock held) */
/*
 * A send. flags holds FI_TAGGED for a tagged message (tag is then sent), the completion
 * flags (FI_COMPLETION, FI_INJECT, FI_DELIVERY_COMPLETE...), FI_REMOTE_CQ_DATA, FI_FENCE.
 */
ssize_t layer_proto_send(struct layer_ep *ep, const struct iovec *iov, size_t iov_cnt,
			 fi_addr_t dest, uint64_t data, uint64_t tag, uint64_t flags,
			 void *context);
ssize_t layer_proto_recv(struct layer_ep *ep, const struct iovec *iov, size_t iov_cnt,
			 fi_addr_t src, uint64_t flags, void *context);
/* Hands a transmit to the core, or queues it on its connection. */
void layer_proto_post_tx(struct layer_conn *conn, struct layer_tx *tx);
void layer_proto_flush_pending(struct layer_conn *conn);
void layer_proto_handle_comp(struct layer_ep *ep, const struct fi_cq_msg_entry *comp);
/* A bounce buffer came in (buf->len, buf->conn set): validates and dispatches it. */
void layer_proto_handle_buf(struct layer_ep *ep, struct layer_rx_buf *buf);
void layer_proto_handle_error(struct layer_ep *ep, const struct fi_cq_err_entry *err);
/* Completes tx to the user (err 0 or positive errno) and frees it. */
void layer_proto_complete_tx(struct layer_ep *ep, struct layer_tx *tx, int err);
void layer_proto_free_tx(struct layer_ep *ep, struct layer_tx *tx);
void layer_rx_free(struct layer_ep *ep, struct layer_rx *rx);
int layer_proto_send_ctrl(struct layer_ep *ep, struct layer_conn *conn, enum layer_op op,
			  uint64_t msg_id);
/* A control message with len (<= LAYER_INJECT_SIZE) bytes of data after the header. */
int layer_proto_send_ctrl_data(struct layer_ep *ep, struct layer_conn *conn, enum layer_op op,
			       uint64_t msg_id, const void *data, size_t len);
/* The same with header flags (LAYER_HDR_*) and the header's data field (value). */
int layer_proto_send_ctrl_hdr(struct layer_ep *ep, struct layer_conn *conn, enum layer_op op,
			      uint16_t flags, uint64_t msg_id, uint64_t value, const void *data,
			      size_t len);
int layer_proto_cancel(struct layer_ep *ep, void *context);
void layer_proto_report_rx(struct layer_ep *ep, struct layer_rx *rx, void *buf, size_t len,
			   uint64_t cq_flags, uint64_t data, fi_addr_t src, int err,
			   size_t olen);
/* Receives the message in buf (matched to rx); frees rx unless a multi-receive stays. */
bool layer_proto_deliver(struct layer_ep *ep, struct layer_rx *rx, struct layer_rx_buf *buf);
/* Puts a receive buffer back into the pool, with its payload allocation freed. */
void layer_buf_put(struct layer_ep *ep, struct layer_rx_buf *buf);
/* Gives a bounce buffer back to its connection (or the pool). */
void layer_proto_repost_buf(struct layer_ep *ep, struct layer_rx_buf *buf);
/*
 * Direct receive: buf's header is in (buf->len counts the whole message); fills iov (at most
 * *count entries) with where its payload goes. See proto.c. No core call; 0 or -FI_E*.
 */
int layer_proto_place(struct layer_ep *ep, struct layer_rx_buf *buf, struct iovec *iov,
		      size_t *count);
/* A posted buffer's message will not complete (its connection is gone): err fails the
 * receive it matched early; the buffer goes to the pool. */
void layer_proto_buf_lost(struct layer_ep *ep, struct layer_rx_buf *buf, int err);
/*
 * Drops an unexpected message nobody will receive (taken off the lists), answering its sender
 * when it waits; releases it.
 */
void layer_proto_discard(struct layer_ep *ep, struct layer_rx_buf *buf);
/*
 * The peer of conn asks (is_paced) that messages above the inject size go to it by
 * rendezvous, or no longer; the sends still queued for the core are changed too.
 */
void layer_proto_set_paced(struct layer_conn *conn, bool is_paced);
struct layer_rx *layer_rx_alloc(struct layer_ep *ep, void *context, uint64_t flags,
				const struct iovec *iov, size_t iov_cnt, fi_addr_t src);

/* unexp.c (ep->lock held) */
/*
 * buf (buf->conn, buf->src_addr set) matched no receive: returns what keeps it, buf or a
 * record, charged to the endpoint; gives the core a buffer back for it unless the bound
 * holds it back.
 */
struct layer_rx_buf *layer_unexp_keep(struct layer_ep *ep, struct layer_rx_buf *buf);
/* A kept message was received or discarded (off the lists): frees what kept it. */
void layer_unexp_release(struct layer_ep *ep, struct layer_rx_buf *buf);
/* The same without giving anything to the core (endpoint close, lost connection). */
void layer_unexp_put(struct layer_ep *ep, struct layer_rx_buf *buf);
/* An FI_PEEK found nothing: one more message may come in on each home left dry. */
void layer_unexp_peek_missed(struct layer_ep *ep);
void layer_unexp_update(struct layer_ep *ep);

/*
 * After anything that may lift the bound's hold: a release, a receive posted or a send
 * outstanding (the endpoint waits), progress. Refills short homes, releases paced peers.
 */
static inline void layer_unexp_check(struct layer_ep *ep)
{
	if (unlikely(ep->is_short || ep->is_pacing))
		layer_unexp_update(ep);
}

/* tagged.c (ep->lock held) */
void layer_tagged_arrive(struct layer_ep *ep, struct layer_rx_buf *buf);
int layer_tagged_cancel(struct layer_ep *ep, void *context);
void layer_tagged_close(struct layer_ep *ep);
/* A lost connection's unexpected tagged messages: eager ones stay, rendezvous ones go. */
void layer_tagged_orphan(struct layer_ep *ep, struct layer_conn *conn);
extern struct fi_ops_tagged layer_tagged_ops;

/* proto_rndv.c (ep->lock held) */
int layer_rndv_prepare_tx(struct layer_ep *ep, struct layer_tx *tx,
			  const struct iovec *iov, size_t iov_cnt);
/*
 * Starts pulling the rendezvous message announced in buf into rx's buffer at offset (space
 * bytes available). A multi-receive slice (is_released false) is read through a child
 * receive so that rx stays posted.
 */
void layer_rndv_start_read(struct layer_ep *ep, struct layer_rx *rx,
			   const struct layer_rx_buf *buf, size_t offset, size_t space,
			   uint64_t cq_flags, bool is_released);
/* Posts the reads rx still needs; false when the core is full (retried by progress). */
bool layer_rndv_issue_reads(struct layer_ep *ep, struct layer_rx *rx);
void layer_rndv_read_done(struct layer_ep *ep, struct layer_rx *rx, int err);
/* Completes conn's send the ACK answers: false when conn has none of that id. */
bool layer_rndv_take_ack(struct layer_conn *conn, const struct layer_hdr *hdr);
void layer_rndv_tx_sent(struct layer_ep *ep, struct layer_tx *tx);

/* Argument checks and completion rules shared by msg.c and tagged.c. */
static inline bool layer_iov_ok(const struct iovec *iov, size_t count)
{
	size_t i;

	if (unlikely(count > LAYER_IOV_LIMIT || (count && !iov)))
		return false;
	for (i = 0; i < count; i++) {
		if (unlikely(!iov[i].iov_base && iov[i].iov_len))
			return false;
	}
	return true;
}

static inline size_t layer_iov_total(const struct iovec *iov, size_t count)
{
	size_t i, len = 0;

	for (i = 0; i < count; i++)
		len += iov[i].iov_len;
	return len;
}

/* The core calls of the data path, the same for every core kind (see the top). */
static inline ssize_t layer_core_send(struct layer_conn *conn, struct layer_tx *tx)
{
	return fi_sendv(conn->core_ep, tx->iov, NULL, tx->iov_cnt, conn->core_addr, tx);
}

static inline ssize_t layer_core_read(struct layer_conn *conn, void *buf, size_t len,
				      uint64_t addr, uint64_t key, void *context)
{
	return fi_read(conn->core_ep, buf, len, NULL, conn->core_addr, addr, key, context);
}

/* Gives buf to the core for the messages of conn (RDM: of any peer). */
static inline int layer_core_post_buf(struct layer_ep *ep, struct layer_conn *conn,
				      struct layer_rx_buf *buf)
{
	return ep->core->post_buf(ep, conn, buf);
}

/* FI_COMPLETION when the operation generates a completion (fi_msg(3), fi_cq(3)). */
static inline uint64_t layer_tx_completion(const struct layer_ep *ep, uint64_t flags)
{
	return !ep->tx_selective || (flags & FI_COMPLETION) ? FI_COMPLETION : 0;
}

static inline uint64_t layer_rx_completion(const struct layer_ep *ep, uint64_t flags)
{
	return !ep->rx_selective || (flags & FI_COMPLETION) ? FI_COMPLETION : 0;
}

/*
 * msg.c: checks a send's arguments and runs it under the lock; makes progress before
 * returning -FI_EAGAIN. flags as for layer_proto_send.
 */
ssize_t layer_ep_send(struct layer_ep *ep, const struct iovec *iov, size_t count,
		      fi_addr_t dest, uint64_t data, uint64_t tag, uint64_t flags, void *context);

/*
 * msg.c: checks a receive's source: FI_ADDR_UNSPEC, an address of the AV, or with FI_AUTH_KEY
 * in flags a key handle the endpoint was enabled with. 0 or -FI_EINVAL.
 */
int layer_ep_check_src(struct layer_ep *ep, fi_addr_t src, uint64_t flags);

extern struct fi_ops_msg layer_msg_ops;
extern struct fi_ops_rma layer_no_rma_ops;
extern struct fi_ops_atomic layer_no_atomic_ops;

/* cq.c, cntr.c: the endpoints whose progress a CQ or counter read drives. */
int layer_cq_attach_ep(struct layer_cq *cq, struct layer_ep *ep);
void layer_cq_detach_ep(struct layer_cq *cq, struct layer_ep *ep);
int layer_cntr_attach_ep(struct layer_cntr *cntr, struct layer_ep *ep);
void layer_cntr_detach_ep(struct layer_cntr *cntr, struct layer_ep *ep);

/* Completion helpers. */
void layer_ep_write_tx_comp(struct layer_ep *ep, void *context, uint64_t flags, size_t len,
			    int err);

#endif /* LAYER_EP_H */
