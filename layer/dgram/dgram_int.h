/*
 * The datagram transport's state (dgram.h), shared by its three files. Everything runs under
 * the endpoint's lock; nothing here is thread safe.
 */
#ifndef LAYER_DGRAM_DGRAM_INT_H
#define LAYER_DGRAM_DGRAM_INT_H

#include <stdbool.h>
#include <stdint.h>
#include <uthash.h>
#include <rdma/fi_endpoint.h>

#include "layer/layer.h"
#include "layer/core/core.h"
#include "layer/dgram/dgram.h"
#include "layer/dgram/dgram_wire.h"
#include "util/bufpool.h"
#include "util/list.h"
#include "util/mr_map.h"
#include "util/rel.h"

/* Receive datagrams kept posted on the core endpoint, at most (twice the receive window). */
#define LAYER_DG_RX_POSTED 256
/* Acknowledgements owed before one goes alone, without waiting for the endpoint to idle. */
#define LAYER_DG_ACK_EVERY 16
/* Retransmission timeouts, microseconds: first, floor, ceiling. */
#define LAYER_DG_RTO_INITIAL 20000
#define LAYER_DG_RTO_MIN 2000
#define LAYER_DG_RTO_MAX 500000
/* Bytes an op from the pool holds copied (an inject, a handshake, a read request); a larger
 * copy is allocated on its own. */
#define LAYER_DG_OP_COPY_MAX 512
/* The congestion window's floor and first value, packets. */
#define LAYER_DG_CWND_MIN 2
#define LAYER_DG_CWND_INITIAL 32

/* A datagram: posted to receive, kept out of order, or sent and kept until acknowledged. */
struct layer_dg_pkt {
	struct layer_ctx ctx;         /* LAYER_CTX_BUF, chan NULL: the core's context; first */
	struct layer_dg_op *op;       /* sent: the message it carries a share of */
	uint64_t sent_us;             /* sent: when last */
	uint32_t seq;
	uint16_t len;                 /* bytes in data */
	uint8_t tries;                /* sent: how often */
	bool is_sacked;               /* sent: the peer reported it */
	uint8_t data[] __attribute__((aligned(16)));
};

/* A message on its way out: cut into packets as the window lets, done once all are acked. */
struct layer_dg_op {
	struct util_dlist link;       /* peer->txq, then peer->inflight */
	struct layer_ctx *ctx;        /* completed upward; NULL: nothing to report */
	struct layer_dg_msg msg;      /* its header, in its first packet */
	struct iovec iov[LAYER_IOV_LIMIT + 2]; /* what is left to cut, from iov_idx */
	size_t iov_cnt;
	size_t iov_idx;
	size_t left;                  /* bytes of payload not yet in a packet */
	bool is_started;              /* its first packet went */
	uint32_t last_seq;            /* its last packet, once left is 0 */
	struct util_mr_map_entry *entry; /* RDATA: the registration read, held while cut */
	bool is_pooled;               /* from dg->op_pool (else malloc'd) */
	uint8_t copy[];               /* an inject's or a request's bytes */
};

/* One of our reads of the peer, waiting for its answer (answers come in order). */
struct layer_dg_read {
	struct util_dlist link;       /* peer->reads */
	struct layer_ctx *ctx;
	uint8_t *buf;
	size_t len;
};

/* What the receiver is putting together: the message the in-order stream is inside of. */
struct layer_dg_rx_msg {
	enum layer_dg_kind kind;      /* 0: between messages */
	size_t len;                   /* its bytes */
	size_t got;
	int err;                      /* RDATA's refusal */
	struct layer_buf *buf;        /* MSG: where it goes */
	struct layer_dg_read *read;   /* RDATA: the read it answers */
	uint8_t rreq[sizeof(struct layer_dg_rreq)]; /* RREQ: its body */
};

/* A peer: one core AV address; lives until the endpoint closes. */
struct layer_dg_peer {
	UT_hash_handle hh;            /* dg->by_addr */
	fi_addr_t core_addr;
	uint32_t my_sess;             /* our session with it (new after each loss) */
	uint32_t peer_sess;           /* its session with us, 0 until heard */
	bool is_synced;               /* it knows our session: our address need not go */
	/* sending */
	uint32_t snd_una;             /* the oldest packet not acknowledged */
	uint32_t snd_nxt;             /* the next packet's number */
	uint32_t peer_wnd;            /* what it takes ahead of its ack */
	size_t tx_mtu;                /* the largest datagram it takes (and we send) */
	uint32_t recover;             /* a loss before this one halved the window already */
	struct layer_dg_pkt **tx_win; /* sent packets by seq % window */
	struct util_dlist txq;        /* ops with bytes not yet in a packet, in order */
	struct util_dlist inflight;   /* ops all cut, waiting for their last ack, in order */
	struct util_rtt rtt;
	struct util_cwnd cwnd;
	uint64_t stall_us;            /* since when an unacknowledged packet has waited with
				       * no acknowledgement moving */
	bool is_probed;               /* the tail was probed since the acknowledgement moved */
	/* receiving */
	uint32_t rcv_nxt;             /* the next packet the stream needs */
	struct layer_dg_pkt **rx_win; /* packets past it, by seq % window */
	uint32_t rx_held;             /* how many */
	bool is_draining;             /* its stream is taking held packets (no nesting) */
	unsigned ack_owed;            /* packets taken since our last acknowledgement */
	bool is_ack_now;              /* a duplicate or a hole: acknowledge at once */
	bool is_ack_asked;            /* a packet asked for it: before the progress call ends */
	struct layer_dg_rx_msg cur;
	struct util_dlist reads;      /* our reads waiting for answers, in order asked */
	uint64_t last_rx_us;          /* when it last sent us anything */
	/* lists of the endpoint */
	struct util_dlist ack_link;   /* dg->ack_peers while ack_owed */
	struct util_dlist busy_link;  /* dg->busy_peers while it has packets or ops out */
	bool is_ack_listed;
	bool is_busy_listed;
	uint8_t addr[LAYER_ADDR_MAX]; /* normalised (the hash key) */
};

/* The test-only fault switch (FI_OFI_LAYER_DGRAM_FAULT). */
struct layer_dg_fault {
	unsigned drop, dup, reorder;  /* percent of datagrams sent */
	uint64_t rand;                /* xorshift state, from its seed */
	fi_addr_t held_dest;
	uint8_t held_data[2048];      /* reorder: a datagram sent after the next one */
	size_t held_len;
	bool is_on;
};

struct layer_dgram {
	struct layer_core *core;
	const struct layer_dgram_upcalls *up;
	void *up_arg;
	struct fid_ep *ep;
	struct fid_av *av;            /* FI_AV_TABLE */
	struct layer_dg_peer *by_addr; /* uthash */
	struct layer_dg_peer **by_core_addr; /* by core fi_addr */
	size_t by_core_addr_cnt;
	struct util_bufpool pkt_pool; /* struct layer_dg_pkt, mtu data bytes */
	struct util_bufpool op_pool;  /* struct layer_dg_op, LAYER_DG_OP_COPY_MAX bytes */
	size_t mtu;                   /* the largest datagram we send and take */
	size_t min_mtu;               /* what every peer takes: the core's max_msg_size */
	size_t window;                /* packets */
	uint32_t rx_wnd;              /* packets a peer may send ahead of our ack: what the
				       * core's socket buffer holds of them */
	size_t rx_posted;
	size_t rx_target;             /* datagrams kept posted */
	struct util_dlist ack_peers;  /* peers owed an acknowledgement */
	struct util_dlist busy_peers; /* peers with something unacknowledged or to send */
	bool is_buf_short;            /* a message waits for a buffer above */
	bool is_closing;              /* layer_dgram_close lingers: nothing goes up */
	uint64_t now_us;              /* the clock as of this progress call */
	uint64_t next_timer_us;       /* timers need not be looked at before */
	struct layer_dg_fault fault;
	uint64_t rand;                /* xorshift state: sessions */
	uint64_t stats_retx;          /* retransmissions */
	uint64_t stats_dup;           /* duplicates dropped */
};

/* dgram.c */
uint64_t layer_dg_now(void);
/* Sends a packet that was built (header filled but for the acknowledgement). */
void layer_dg_xmit(struct layer_dgram *dg, struct layer_dg_peer *peer, struct layer_dg_pkt *pkt);
/* Sends an acknowledgement now. */
void layer_dg_send_ack(struct layer_dgram *dg, struct layer_dg_peer *peer);
void layer_dg_busy(struct layer_dgram *dg, struct layer_dg_peer *peer);
/* The peer is lost, or starts a new session: everything with it fails with err. */
void layer_dg_peer_reset(struct layer_dgram *dg, struct layer_dg_peer *peer, int err);
struct layer_dg_pkt *layer_dg_pkt_get(struct layer_dgram *dg);
void layer_dg_pkt_put(struct layer_dgram *dg, struct layer_dg_pkt *pkt);
/* Bytes of header (and address) in front of a DATA packet's stream bytes. */
size_t layer_dg_hdr_len(struct layer_dgram *dg, const struct layer_dg_peer *peer);

/* rel.c */
int layer_dg_rel_init(struct layer_dgram *dg, struct layer_dg_peer *peer);
void layer_dg_rel_fini(struct layer_dgram *dg, struct layer_dg_peer *peer);
/* A new session both ways: numbers from 0, windows empty (packets dropped). */
void layer_dg_rel_reset(struct layer_dgram *dg, struct layer_dg_peer *peer);
/* The packets held past a hole from the peer, dropped (a reset; a close, after which its
 * data is acknowledged, not taken: layer_dg_rel_discard). */
void layer_dg_rel_rx_drop(struct layer_dgram *dg, struct layer_dg_peer *peer);
/* While closing: the peer's packet seq, acknowledged and dropped. */
void layer_dg_rel_discard(struct layer_dgram *dg, struct layer_dg_peer *peer, uint32_t seq);
/* Cuts queued ops into packets and sends them as the windows let. */
void layer_dg_rel_push(struct layer_dgram *dg, struct layer_dg_peer *peer);
/* The peer's acknowledgement in hdr. */
void layer_dg_rel_acked(struct layer_dgram *dg, struct layer_dg_peer *peer,
			const struct layer_dg_hdr *hdr);
/* A DATA packet from the peer (its session checked): taken into the stream (in order,
 * then whatever it lets follow), held, or dropped. Takes pkt. */
void layer_dg_rel_data(struct layer_dgram *dg, struct layer_dg_peer *peer,
		       struct layer_dg_pkt *pkt);
/* Held packets the stream can take now (a buffer was posted). */
void layer_dg_rel_drain(struct layer_dgram *dg, struct layer_dg_peer *peer);
/* The acknowledgement we owe, into hdr. */
void layer_dg_rel_fill_ack(struct layer_dgram *dg, struct layer_dg_peer *peer,
			   struct layer_dg_hdr *hdr);
/* Timers of a busy peer: retransmissions, liveness. Returns when next to look (us). */
uint64_t layer_dg_rel_timers(struct layer_dgram *dg, struct layer_dg_peer *peer);
bool layer_dg_rel_is_idle(const struct layer_dg_peer *peer);

/* stream.c */
/* A queued op for a message of kind with msg header fields; payload iov (copied when
 * is_copy). NULL without memory. */
struct layer_dg_op *layer_dg_op_new(struct layer_dgram *dg, enum layer_dg_kind kind,
				    const struct iovec *iov, size_t count, bool is_copy,
				    struct layer_ctx *ctx);
void layer_dg_op_free(struct layer_dgram *dg, struct layer_dg_op *op);
/* Fills a packet's stream bytes from op (at most room): bytes used. */
size_t layer_dg_op_cut(struct layer_dg_op *op, uint8_t *dst, size_t room, uint8_t *flags);
/*
 * In-order stream bytes of a packet: fed to the message being put together. Returns false
 * when the stream must stop before this packet (no buffer above yet), true once all of it
 * is taken.
 */
bool layer_dg_stream_take(struct layer_dgram *dg, struct layer_dg_peer *peer,
			  const struct layer_dg_pkt *pkt);
/* The messages half put together and the reads waiting fail (session reset). */
void layer_dg_stream_reset(struct layer_dgram *dg, struct layer_dg_peer *peer, int err);

#endif /* LAYER_DGRAM_DGRAM_INT_H */
