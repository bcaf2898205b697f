/*
 * Core adapters: the bottom of the endpoint's stack (ep/ep.h draws the whole of it). An
 * adapter runs one kind of core endpoint and hides what differs between kinds:
 * - core_msg.c, connected (FI_EP_MSG) cores such as libfabric 1.17's tcp: a passive endpoint
 *   listens, each channel is a core endpoint of its own whose connection request carries the
 *   handshake (wire.h), receive buffers are posted per channel, and over tcp 1.17 payloads
 *   can land straight in the matched receive (direct receive);
 * - core_rdm.c, reliable-datagram (FI_EP_RDM) cores such as net and shm: one core endpoint
 *   and one core AV, a channel is a peer's address in that AV and one of the sender's key
 *   slots, announced by a HELLO. Over datagram (FI_EP_DGRAM) cores such as udp the same
 *   adapter runs on the datagram transport (dgram/dgram.h), which makes them reliable.
 *
 * A channel (struct layer_chan) is one way to a peer through the core; the connection layer
 * above (conn/conn.h) gives each the connection it carries. An adapter knows nothing above
 * it: it reaches the connection layer only through the upcalls the endpoint gives it at
 * open (struct layer_core_upcalls), and everything it posts to the core on the upper
 * layers' behalf is a struct layer_ctx it hands back, completed, through one of them.
 *
 * Everything here runs under the endpoint's lock (when it has one); nothing is thread safe.
 */
#ifndef LAYER_CORE_CORE_H
#define LAYER_CORE_CORE_H

#include <stdlib.h>
#include <sys/uio.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_rma.h>

#include "layer/layer.h"
#include "layer/domain.h"
#include "layer/core/ring.h"
#include "layer/core/wire.h"
#include "layer/dgram/dgram.h"
#include "util/bufpool.h"
#include "util/tagm.h"

struct layer_chan;
struct layer_conn;
struct layer_rx;

/* What every context given to the core is: its first field says which. */
enum layer_ctx_type {
	LAYER_CTX_BUF,      /* struct layer_buf: a posted receive buffer (the adapter's) */
	LAYER_CTX_SEND,     /* a send of the layers above */
	LAYER_CTX_READ,     /* an RMA read of the layers above */
	LAYER_CTX_CTRL,     /* a handshake message of the adapter (RDM) */
};

/* The head of every context given to the core: its kind and the channel it went on. */
struct layer_ctx {
	enum layer_ctx_type type;
	struct layer_chan *chan;
};

/*
 * One received message on its way up: posted by an adapter, completed by the core, handed to
 * the receive path (proto/rx.c), kept by it while unexpected, given back to the adapter when
 * done with. Each group of fields belongs to the layer named.
 */
struct layer_buf {
	/* core adapter */
	struct layer_ctx ctx;           /* LAYER_CTX_BUF; chan: its home while posted (RDM:
					* NULL), then the channel it came on (NULL once that
					* is gone); first */
	struct util_dlist link;        /* the adapter's posted list, then the receive path's */
	size_t len;                    /* bytes received, header included */
	void *ext;                     /* direct receive: payload allocation (ext_len bytes)
					* when the buffer cannot hold it */
	size_t ext_len;
	bool is_placed;                /* direct receive: the payload went straight into the
					* receive it matched (rx) */
	/* connection layer: who sent it */
	fi_addr_t src_addr;            /* the sender's AV entry, or FI_ADDR_NOTAVAIL */
	fi_addr_t key;                 /* its connection's AV key handle, or FI_ADDR_NOTAVAIL */
	/* receive path */
	bool is_record;                /* an unexpected message's copy (proto/unexp.c), not a
					* core buffer */
	bool is_unmatched;             /* direct receive: counted as arriving unmatched */
	struct layer_rx *rx;           /* direct receive: the receive it matched while arriving */
	void *rma_entry;               /* direct receive: the registration an RMA write's data
					* went straight into, held (rma/) */
	bool is_answered;              /* direct receive: that write's ACK went as soon as its
					* header was checked (rma/) */
	bool is_behind_ring;           /* direct receive: ring slots written before it are not
					* taken yet: not matched before it is whole (ring.h) */
	struct util_tagm_msg tagm;     /* while an unexpected tagged message */
	/* header, then payload */
	uint8_t data[] __attribute__((aligned(16)));
};

/* Where a received message's payload is. */
static inline uint8_t *layer_buf_payload(struct layer_buf *buf)
{
	return buf->ext ? (uint8_t *) buf->ext : buf->data + LAYER_HDR_SIZE;
}

static inline const struct layer_hdr *layer_buf_hdr(const struct layer_buf *buf)
{
	return (const struct layer_hdr *) buf->data;
}

/* Data bytes of a record: a rendezvous request, or a message up to the inject size. */
#define LAYER_RECORD_SIZE (LAYER_HDR_SIZE + UTIL_MAX(LAYER_INJECT_SIZE, \
				LAYER_RTS_MAX_SEGS * sizeof(struct layer_rts_seg)))

/*
 * Channels whose core operations progress together (a MSG core's CQ group, core_msg.h): an
 * operation posted on one of them marks the set, so that the adapter's next progress call
 * looks at it whatever its wait fds say (tcp 1.17 registers a socket for writing only from
 * its progress, once a send could not finish at once).
 */
struct layer_core_set {
	struct util_dlist link;        /* in *marked while is_marked */
	struct util_dlist *marked;     /* the adapter's list of sets to look at */
	bool is_marked;
};

static inline void layer_core_set_mark(struct layer_core_set *set)
{
	if (!set->is_marked) {
		set->is_marked = true;
		util_dlist_insert_tail(&set->link, set->marked);
	}
}

/* One way to a peer through the core. */
struct layer_chan {
	struct layer_conn *conn;       /* the connection it carries (conn/), opaque here;
					* NULL until the layer above takes the channel */
	struct layer_core *core;
	struct fid_ep *core_ep;        /* MSG: its own, NULL once closed; RDM: the endpoint's */
	struct layer_dgram *dgram;     /* over a datagram core: the transport that carries it
					* (core_ep then unused); else NULL */
	fi_addr_t core_addr;           /* MSG: FI_ADDR_UNSPEC; RDM: the peer in the core AV */
	uint64_t tx_data;              /* MSG: the peer's id of the channel, which every message
					* carries as remote CQ data (core_msg.h); 0: none */
	struct layer_core_set *set;    /* MSG: the group its core endpoint progresses with;
					* NULL: the adapter looks at everything every call */
	bool is_outgoing;              /* opened by this endpoint (connect) */
	bool is_two_way;               /* an incoming channel can carry this endpoint's data
					* to the peer too (MSG: a connection is both ways; RDM:
					* no, it is the peer's key slot, ours are announced) */
	uint16_t key_slot;             /* RDM: outgoing, our slot at the peer; incoming, the
					* peer's slot; MSG: 0 */
	struct layer_ring *ring;       /* MSG: the rings of the channel once both sides lend
					* slots (ring.h): its messages go through them; else
					* NULL */
	size_t tx_eager;               /* the largest eager payload the peer's buffers take,
					* from its handshake; 0 until then */
	size_t tx_rma_eager;           /* the largest RMA data (a write's, a read's answer)
					* that travels with its header to the peer, which
					* places it straight (direct receive): at least
					* tx_eager */
	uint8_t peer_addr[LAYER_ADDR_MAX]; /* the peer's address, normalised (MSG: listening) */
};

/*
 * What an adapter calls above it: the connection layer's entries (conn/conn.c), set by the
 * endpoint at open with their argument (core->up_arg). err values are positive errnos.
 */
struct layer_core_upcalls {
	/*
	 * A peer opened chan (MSG: a connection request; RDM: the HELLO of a new key slot),
	 * using key: 0 when it is taken (chan->conn set), -FI_EACCES when the key is refused,
	 * -FI_EALREADY when the endpoint's own connection to the peer is the one both keep
	 * (MSG), -FI_ENOMEM. On refusal the adapter tells the peer why and frees the channel.
	 */
	int (*accept)(void *arg, struct layer_chan *chan, const struct layer_key *key);
	/* An outgoing chan is connected: the peer's handshake is in (chan->tx_eager set). */
	void (*connected)(void *arg, struct layer_chan *chan);
	/* chan failed: nothing more goes on it. FI_EACCES: the peer refused its key;
	 * FI_EALREADY: the peer keeps its own connection to this endpoint instead (MSG). */
	void (*failed)(void *arg, struct layer_chan *chan, int err);
	/* A message arrived in buf (buf->ctx.chan, buf->len set; its header not yet checked). */
	void (*recv)(void *arg, struct layer_buf *buf);
	/* The message of a buffer will not arrive (its channel is gone): buf is handed up. */
	void (*buf_lost)(void *arg, struct layer_buf *buf, int err);
	/* A send or read posted from above with ctx completed (err 0 on success). */
	void (*done)(void *arg, struct layer_ctx *ctx, int err);
	/*
	 * Direct receive: the header of buf's message is in (buf->len counts the whole
	 * message); fill iov (at most *count entries) with where its payload goes: 0 or -FI_E*
	 * (the core then fails the buffer and closes the channel). Runs inside the core's
	 * progress: it must not call the core.
	 */
	int (*place)(void *arg, struct layer_buf *buf, struct iovec *iov, size_t *count);
};

struct layer_core;

/* What differs between core kinds, chosen when the endpoint opens. */
struct layer_core_ops {
	/*
	 * The core holds the operations of every channel on one endpoint: a failed channel's
	 * sends and reads in flight still complete through the core, so its connection is
	 * freed only once they have. (MSG: closing a channel's core endpoint drops them.)
	 */
	bool has_shared_ep;
	/* The format of the core CQ's entries (MSG: with remote CQ data, core_msg.h). */
	enum fi_cq_format cq_format;
	/* fi_enable: opens what receives (listener, or the core endpoint); fills core->addr.
	 * tx_size: the most sends the layers above keep posted. */
	int (*enable)(struct layer_core *core, size_t tx_size);
	/* A new outgoing channel to addr whose messages carry key (len 0: none): connected at
	 * once when *is_up (RDM: the peer knows the key already), else once the upcall
	 * connected() says so. */
	int (*connect)(struct layer_core *core, const void *addr, const struct layer_key *key,
		       struct layer_chan **chan, bool *is_up);
	/* chan failed: its core side goes (MSG: its core endpoint, dropping what it holds). */
	void (*chan_close)(struct layer_chan *chan);
	/* The connection of chan is gone: buffers still posted for it go up (buf_lost) with
	 * err, chan is freed. */
	void (*chan_free)(struct layer_chan *chan, int err);
	/* The layer above lets go of chan before it carried anything (chan->conn is cleared):
	 * the adapter closes it and frees it once the core has given back what it held. */
	void (*chan_drop)(struct layer_chan *chan);
	/* Reads core events and completions, calling the upcalls. */
	void (*progress)(struct layer_core *core);
	/* Sends what the channels gathered (ring slots staged while hold was set): false when
	 * some must wait (the core is busy). Called while staged_cnt > 0 only; NULL when the
	 * adapter gathers nothing. */
	bool (*flush)(struct layer_core *core);
	/* fi_trywait on the core's wait objects: 0 when the caller may sleep on them. */
	int (*trywait)(struct layer_core *core);
	/* A CQ or counter that can block was bound (before enable): core->cq_fd becomes an fd
	 * the caller may sleep on. NULL: the core CQ gets a wait fd (layer_core_cq_wait). */
	int (*cq_wait)(struct layer_core *core);
	/* Posts buf for the messages of chan (RDM: of any peer; chan unused), unless its home
	 * holds as many as it keeps: -FI_EAGAIN then. */
	int (*post_buf)(struct layer_core *core, struct layer_chan *chan, struct layer_buf *buf);
	/* Posts buffers until every home holds min(upto, the number it keeps). */
	void (*refill)(struct layer_core *core, size_t upto);
	/* Endpoint close: closes the core objects (nothing completes after) and frees what the
	 * adapter holds itself; the channels are freed by the caller (chan_free). */
	void (*close)(struct layer_core *core);
};

/* The endpoint's core side. Adapters embed it first in their own struct. */
struct layer_core {
	const struct layer_core_ops *ops;
	const struct layer_core_upcalls *up;
	void *up_arg;
	struct layer_domain *domain;
	struct fi_info *info;          /* the template of the core's endpoints */
	struct fid_cq *cq;             /* every core endpoint of this endpoint reports here */
	int cq_fd;                     /* its wait fd, or -1 (none until one is asked for) */
	struct fid_eq *eq;             /* MSG: connection events; RDM: unused */
	int eq_fd;                     /* its wait fd, or -1 (as cq_fd) */
	uint8_t addr[LAYER_ADDR_MAX];  /* the endpoint's address, normalised: MSG the
					* listener's, RDM the core endpoint's */
	size_t addrlen;
	size_t iov_limit;              /* iov entries one core send takes */
	size_t inject_size;            /* bytes one core inject takes (header included) */
	bool has_virt_addr;            /* core RMA addresses are virtual addresses */
	bool has_direct_rma;           /* MSG: the core's RMA reaches the application's
					* registrations, under keys it never reuses: peers may
					* be granted them (rma/grant.h) */
	bool hold;                     /* gather short sends (ring slots) until flush; set by
					* the endpoint around its progress */
	uint32_t staged_cnt;           /* channels with a ring slot staged: flush has work */
	struct layer_rings *rings;     /* MSG: the channels' rings (ring.h); else NULL */
	bool has_liveness;             /* the adapter finds peers that vanished itself (the
					* datagram transport): no PING from the layer above */
	bool has_domain_wait;          /* every wait fd of the core's CQs holds one epoll set
					* of the core domain (tcp from libfabric 1.18, net): any
					* endpoint's wakes for all of the domain's sockets */
	struct util_bufpool buf_pool;  /* struct layer_buf, buf_size data bytes each */
	size_t buf_size;               /* header + eager payload (direct receive: a record) */
	size_t direct_max;             /* direct receive: the largest eager payload taken */
	size_t rma_direct_max;         /* and the largest RMA data (WRITE, READ_RESP) */
	uint64_t dropped_cnt;          /* messages dropped (malformed, unroutable, acks of
					* nothing), by every layer */
	uint64_t refused_cnt;          /* handshakes and messages refused for their key */
};

/*
 * Opens the core side of an endpoint over domain's core (MSG or RDM adapter by its core
 * info), with info's source address: core CQ without a wait fd, core EQ, buffer pool.
 * up and up_arg: the upcalls. 0 or -FI_E*.
 */
int layer_core_open(struct layer_domain *domain, const struct fi_info *info,
		    const struct layer_core_upcalls *up, void *up_arg, struct layer_core **core);
/* After ops->close and every chan_free: frees the rest. */
void layer_core_free(struct layer_core *core);
/*
 * A CQ or counter that can block was bound: the core EQ and CQ get wait fds (before enable;
 * their fds then are core->eq_fd and core->cq_fd). A core without wait objects (shm) keeps
 * none for its CQ: 0 all the same.
 */
int layer_core_cq_wait(struct layer_core *core);
/* The same for the one core CQ (core->cq): what layer_core_cq_wait does by default. */
int layer_core_cq_wait_fd(struct layer_core *core);

/* Opens a core CQ on the endpoint's core domain with the adapter's entry format. */
int layer_core_open_cq(struct layer_core *core, enum fi_wait_obj wait_obj, size_t size,
		       struct fid_cq **cq);

/* Sets up direct receive on a MSG core domain when the core has it; true if it is on. */
bool layer_core_msg_direct_recv_init(struct layer_domain *domain);

/* The adapters' allocations of their struct (layer_core first), zeroed, ops set. */
struct layer_core *layer_core_msg_alloc(void);
struct layer_core *layer_core_rdm_alloc(void);

/* Counts a refusal for a key and logs it: a warning once per endpoint, then info. */
void layer_core_refused(struct layer_core *core, const char *what);
/* Counts a message dropped as malformed or unroutable and logs it (as above). */
void layer_core_dropped(struct layer_core *core, const struct layer_buf *buf, const char *why);

/* Buffers: taken from and given back to the pool. */
static inline struct layer_buf *layer_core_buf_get(struct layer_core *core)
{
	return util_bufpool_get(&core->buf_pool);
}

static inline void layer_core_buf_put(struct layer_core *core, struct layer_buf *buf)
{
	if (unlikely(buf->ext)) {
		free(buf->ext);
		buf->ext = NULL;
		buf->ext_len = 0;
	}
	util_bufpool_put(&core->buf_pool, buf);
}

/* A buffer done with goes back to its home (the channel it came on, RDM: the endpoint), or
 * to the pool when the home is full or gone. */
static inline void layer_core_repost(struct layer_core *core, struct layer_buf *buf)
{
	if (unlikely(buf->ext)) {
		free(buf->ext);
		buf->ext = NULL;
		buf->ext_len = 0;
	}
	if (core->ops->post_buf(core, buf->ctx.chan, buf))
		util_bufpool_put(&core->buf_pool, buf);
}

/* Something was posted on chan's core endpoint: its progress is due. */
static inline void layer_core_mark(struct layer_chan *chan)
{
	if (chan->set)
		layer_core_set_mark(chan->set);
}

/* A message on chan's core endpoint, with the peer's id of the channel when it wants it. */
static inline ssize_t layer_core_ep_sendv(struct layer_chan *chan, const struct iovec *iov,
					  size_t count, struct layer_ctx *ctx)
{
	struct fi_msg msg;

	layer_core_mark(chan);
	if (!chan->tx_data)
		return fi_sendv(chan->core_ep, iov, NULL, count, chan->core_addr, ctx);
	msg = (struct fi_msg) {
		.msg_iov = iov,
		.iov_count = count,
		.addr = chan->core_addr,
		.context = ctx,
		.data = chan->tx_data,
	};
	return fi_sendmsg(chan->core_ep, &msg, FI_REMOTE_CQ_DATA | FI_COMPLETION);
}

static inline ssize_t layer_core_ep_inject(struct layer_chan *chan, const void *buf,
					   size_t len)
{
	layer_core_mark(chan);
	if (!chan->tx_data)
		return fi_inject(chan->core_ep, buf, len, chan->core_addr);
	return fi_injectdata(chan->core_ep, buf, len, chan->tx_data, chan->core_addr);
}

/*
 * The data path's core calls, the same for every kind (a channel names its endpoint and the
 * peer's address on it, the datagram transport that stands for the core, or its rings). A
 * message starts with its header, in our own memory: over rings its key_slot is written.
 * ctx->chan must be chan.
 */
static inline ssize_t layer_core_sendv(struct layer_chan *chan, const struct iovec *iov,
				       size_t count, struct layer_ctx *ctx)
{
	if (chan->dgram)
		return layer_dgram_sendv(chan->dgram, iov, count, chan->core_addr, ctx);
	if (chan->ring)
		return layer_ring_sendv(chan->ring, iov, count, ctx);
	return layer_core_ep_sendv(chan, iov, count, ctx);
}

static inline ssize_t layer_core_inject(struct layer_chan *chan, void *buf, size_t len,
					bool may_keep)
{
	if (chan->dgram)
		return layer_dgram_inject(chan->dgram, buf, len, chan->core_addr);
	if (chan->ring)
		return layer_ring_inject(chan->ring, buf, len, may_keep);
	return layer_core_ep_inject(chan, buf, len);
}

static inline ssize_t layer_core_read(struct layer_chan *chan, void *buf, size_t len,
				      uint64_t addr, uint64_t key, struct layer_ctx *ctx)
{
	if (chan->dgram)
		return layer_dgram_read(chan->dgram, buf, len, chan->core_addr, addr, key, ctx);
	layer_core_mark(chan);
	return fi_read(chan->core_ep, buf, len, NULL, chan->core_addr, addr, key, ctx);
}

/* Direct RMA (rma/grant.h): the core's own write or read of the application's buffers, on a
 * channel with a core endpoint of its own (MSG), at the core's address and key. */
static inline ssize_t layer_core_writev(struct layer_chan *chan, const struct iovec *iov,
					size_t count, uint64_t addr, uint64_t key,
					struct layer_ctx *ctx)
{
	layer_core_mark(chan);
	return fi_writev(chan->core_ep, iov, NULL, count, chan->core_addr, addr, key, ctx);
}

/* An RMA inject write on chan's core endpoint (direct RMA, rings): no completion. */
static inline ssize_t layer_core_inject_write(struct layer_chan *chan, const void *buf,
					      size_t len, uint64_t addr, uint64_t key)
{
	layer_core_mark(chan);
	return fi_inject_write(chan->core_ep, buf, len, chan->core_addr, addr, key);
}

static inline ssize_t layer_core_readv(struct layer_chan *chan, const struct iovec *iov,
				       size_t count, uint64_t addr, uint64_t key,
				       struct layer_ctx *ctx)
{
	layer_core_mark(chan);
	return fi_readv(chan->core_ep, iov, NULL, count, chan->core_addr, addr, key, ctx);
}

/* A buffer about to be posted: nothing decided about it yet. */
static inline void layer_core_buf_reset(struct layer_buf *buf, struct layer_chan *chan)
{
	buf->ctx.type = LAYER_CTX_BUF;
	buf->ctx.chan = chan;
	buf->is_record = false;
	buf->rx = NULL;
	buf->rma_entry = NULL;
	buf->ext = NULL;
	buf->ext_len = 0;
	buf->is_placed = false;
	buf->is_unmatched = false;
	buf->is_answered = false;
	buf->is_behind_ring = false;
}

#endif /* LAYER_CORE_CORE_H */
