/*
 * A reliable-datagram transport made of a datagram (FI_EP_DGRAM) core such as libfabric's
 * udp: what the RDM adapter (core/core_rdm.c) needs of a core endpoint — messages to and
 * from an address in the core AV, their completions, and RMA reads — built on datagrams that
 * may be lost, duplicated or reordered. The RDM adapter drives it through the calls below
 * in place of the core's own, so everything above (handshakes, keys, the protocol) is the
 * same over udp as over net or shm.
 *
 * The parts, one file each:
 * - dgram.c: the endpoint, its peers and their sessions, datagrams in and out, progress,
 *   timers, liveness, the test-only fault switch;
 * - rel.c: per peer, the sending window (sequence numbers, acknowledgements cumulative and
 *   selective, retransmission on timeout and on holes, congestion window) and the receiving
 *   one (duplicates dropped, packets put back in order);
 * - stream.c: messages cut into packets and put back together, and RMA reads carried as a
 *   request and an answer streamed into the reader's buffer, served from the domain's
 *   registrations (mr.h).
 * The wire format is in dgram_wire.h, the state in dgram_int.h; fi_layer(7) describes both.
 */
#ifndef LAYER_DGRAM_DGRAM_H
#define LAYER_DGRAM_DGRAM_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/uio.h>
#include <rdma/fabric.h>

struct layer_core;
struct layer_ctx;
struct layer_buf;
struct layer_dgram;

/* What the transport calls above it (the RDM adapter), with arg. err: positive errno. */
struct layer_dgram_upcalls {
	/* A posted buffer to receive a message into (the first posted), or NULL for none. */
	struct layer_buf *(*buf)(void *arg);
	/* That buffer holds a message of len bytes from src (core AV address). */
	void (*recv)(void *arg, struct layer_buf *buf, size_t len, fi_addr_t src);
	/* A send or read posted with ctx is over. */
	void (*done)(void *arg, struct layer_ctx *ctx, int err);
	/* The peer at src is lost (it stopped answering, or it came back as a new session):
	 * every operation with it fails; the next message starts over. */
	void (*peer_lost)(void *arg, fi_addr_t src, int err);
};

/*
 * Opens the transport over core's domain and core CQ (core->info is the datagram endpoint's
 * template): the core endpoint, its AV and the receive datagrams. 0 or -FI_E*; core->addr
 * and core->addrlen are set.
 */
int layer_dgram_open(struct layer_core *core, const struct layer_dgram_upcalls *up, void *arg,
		     struct layer_dgram **dg);
/* Closes the core objects and frees everything: nothing completes after. */
void layer_dgram_close(struct layer_dgram *dg);

/* The core AV address of a normalised address, inserted on first use: 0 or -FI_E*. */
int layer_dgram_av_insert(struct layer_dgram *dg, const void *addr, fi_addr_t *core_addr);

/* A message (at most the core's buf_size) to dest; ctx completes through done(). */
ssize_t layer_dgram_sendv(struct layer_dgram *dg, const struct iovec *iov, size_t count,
			  fi_addr_t dest, struct layer_ctx *ctx);
/* The same, copied at once, with no completion. */
ssize_t layer_dgram_inject(struct layer_dgram *dg, const void *buf, size_t len,
			   fi_addr_t dest);
/* Reads len bytes of the peer's memory at addr under key (a registration of the peer's
 * domain that grants FI_REMOTE_READ) into buf. */
ssize_t layer_dgram_read(struct layer_dgram *dg, void *buf, size_t len, fi_addr_t src,
			 uint64_t addr, uint64_t key, struct layer_ctx *ctx);

/* Datagrams in, timers, acknowledgements out; calls the upcalls. */
void layer_dgram_progress(struct layer_dgram *dg);
/* A buffer was posted above: a message waiting for one goes on. */
void layer_dgram_buf_posted(struct layer_dgram *dg);
/* 0 when the caller may sleep on the core's wait fd: nothing is in flight that timers
 * must drive (acknowledgements owed are sent first). */
int layer_dgram_trywait(struct layer_dgram *dg);

/* Settings read once at provider init (FI_OFI_LAYER_*, fi_layer(7)). */
struct layer_dgram_settings {
	size_t mtu;             /* datagram bytes; 0: the core's max_msg_size */
	size_t window;          /* packets unacknowledged per peer at most */
	const char *fault;      /* test only: "drop=P,dup=P,reorder=P,seed=S" */
};
extern struct layer_dgram_settings layer_dgram_settings;

#endif /* LAYER_DGRAM_DGRAM_H */
