/*
 * The reliable-datagram core adapter's state, shared by its two files: core_rdm.c (the core
 * endpoint, peers, channels, progress, the datagram transport's upcalls) and core_rdm_hello.c
 * (key slots and the HELLO handshake). Private to them.
 */
#ifndef LAYER_CORE_CORE_RDM_H
#define LAYER_CORE_CORE_RDM_H

#include <uthash.h>

#include "layer/core/core.h"

/* Bounce buffers kept posted on the core endpoint: rx_buf_cnt for each of a few peers. */
#define LAYER_RDM_BUF_FACTOR 4
/* Core fi_addr values past this are not table indices: the core ignored FI_AV_TABLE. */
#define LAYER_RDM_MAX_PEERS (1u << 24)

/* What the endpoint made of one of a peer's key slots (the peer numbers them). */
enum layer_rdm_slot_state {
	LAYER_RDM_SLOT_UNKNOWN,        /* never announced */
	LAYER_RDM_SLOT_ACCEPTED,
	LAYER_RDM_SLOT_REFUSED,
};

struct layer_rdm_chan;

struct layer_rdm_in_slot {
	struct layer_rdm_chan *chan;   /* ACCEPTED: where its messages go up, NULL once that
					* channel failed (the next HELLO makes another) */
	struct layer_key key;          /* the key it was announced with */
	enum layer_rdm_slot_state state;
};

/* One of the keys this endpoint sends to a peer with (the slot is its index). */
struct layer_rdm_out_slot {
	struct layer_key key;
	bool is_hello_sent;            /* its HELLO is on its way or answered */
	bool is_acked;                 /* the peer accepted it: its channels may send */
	size_t tx_eager;               /* what the peer's buffers take, from its HELLO_ACK */
};

/* One address the endpoint exchanges messages with; lives until the endpoint closes. */
struct layer_rdm_peer {
	UT_hash_handle hh;             /* rcore->by_addr */
	fi_addr_t core_addr;           /* in rcore->av */
	bool is_failing;               /* its channels are being failed */
	struct layer_rdm_in_slot *in;  /* by the peer's slot; in_cnt entries */
	size_t in_cnt;
	struct layer_rdm_out_slot *out; /* by our slot; out_cnt in use */
	size_t out_cnt;
	struct util_dlist out_chans;   /* struct layer_rdm_chan by peer_link: sends to it */
	uint8_t addr[LAYER_ADDR_MAX];  /* normalised, core->addrlen bytes (the hash key) */
};

struct layer_rdm_chan {
	struct layer_chan chan;        /* first */
	struct layer_rdm_peer *peer;   /* NULL once closed */
	struct util_dlist peer_link;   /* outgoing: peer->out_chans */
};

/* A handshake message of the adapter's own (HELLO and its answers). */
struct layer_rdm_ctl {
	struct layer_ctx ctx;           /* LAYER_CTX_CTRL, chan NULL; first */
	struct util_dlist link;        /* rcore->ctl_queue, then rcore->ctl_posted */
	struct layer_rdm_peer *peer;
	size_t len;                    /* header and data */
	struct layer_hdr hdr;
	uint8_t data[LAYER_ADDR_MAX + LAYER_AUTH_KEY_MAX];
};

struct layer_rdm_core {
	struct layer_core core;        /* first */
	struct fid_ep *ep;
	struct fid_av *av;             /* FI_AV_TABLE: peers by core fi_addr */
	struct layer_dgram *dg;        /* over a datagram core: the transport (ep, av unused) */
	struct layer_rdm_peer *by_addr; /* uthash by address */
	struct layer_rdm_peer **by_core_addr; /* indexed by core fi_addr */
	size_t by_core_addr_cnt;
	struct util_dlist posted_bufs; /* struct layer_buf posted on ep */
	size_t posted_cnt;
	size_t buf_target;             /* buffers kept posted */
	struct util_dlist ctl_queue;   /* handshake messages the core had no room for yet */
	struct util_dlist ctl_posted;  /* handshake messages the core holds */
};

static inline struct layer_rdm_core *layer_rdm_core_of(struct layer_core *core)
{
	return container_of(core, struct layer_rdm_core, core);
}

static inline struct layer_rdm_chan *layer_rdm_chan_of(struct layer_chan *chan)
{
	return container_of(chan, struct layer_rdm_chan, chan);
}

/* core_rdm.c */
/* The peer of a (normalised) address, inserted into the core AV on first use. */
int layer_rdm_peer_get(struct layer_rdm_core *rcore, const void *addr,
		       struct layer_rdm_peer **peer_out);
struct layer_rdm_chan *layer_rdm_chan_alloc(struct layer_rdm_core *rcore,
					    struct layer_rdm_peer *peer, bool is_outgoing,
					    size_t slot);
/* Fails chan: unlinked from its peer first, so that the caller's walk moves on. */
void layer_rdm_chan_fail(struct layer_rdm_core *rcore, struct layer_rdm_chan *rchan,
			 int err);
/* Every channel with the peer fails; the next send to it says HELLO again. */
void layer_rdm_peer_fail(struct layer_rdm_core *rcore, struct layer_rdm_peer *peer,
			 int err);
/* A received buffer dropped (counted, logged once) and given back. */
void layer_rdm_drop(struct layer_rdm_core *rcore, struct layer_buf *buf, const char *why);

/* core_rdm_hello.c */
/* Announces our key slot to its peer: 0 or -FI_E*. */
int layer_rdm_send_hello(struct layer_rdm_core *rcore, struct layer_rdm_peer *peer,
			 size_t slot);
/* Our slot for key at the peer, a new one (not yet announced) if needed. */
int layer_rdm_out_slot(struct layer_rdm_peer *peer, const struct layer_key *key,
		       size_t *slot);
/* The incoming channel of an accepted slot (opened again if needed), or NULL. */
struct layer_rdm_chan *layer_rdm_in_chan(struct layer_rdm_core *rcore,
					 struct layer_rdm_peer *peer, size_t slot);
/* A HELLO arrived in buf, and an answer to one of ours (hdr). */
void layer_rdm_handle_hello(struct layer_rdm_core *rcore, struct layer_buf *buf);
void layer_rdm_handle_answer(struct layer_rdm_core *rcore, struct layer_rdm_peer *peer,
			     const struct layer_hdr *hdr);
/* Handshake messages the core had no room for, posted again in order. */
void layer_rdm_flush_ctl(struct layer_rdm_core *rcore);

#endif /* LAYER_CORE_CORE_RDM_H */
