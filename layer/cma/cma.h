/*
 * Cross-memory attach between processes of one host (util/cma.h): large data goes with one
 * copy and one system call, process to process, instead of through the core (over tcp: two
 * copies through the kernel's loopback, and its protocol).
 *
 * - Each side of a connection says who it is (CMA, core/wire.h) when the connection opens,
 *   or in answer to the peer's. A side that finds it can read the peer's memory (same host
 *   and pid namespace, the peer's cookie reads back: util_cma_reaches) keeps the peer's pid
 *   on the connection and says so to the peer.
 * - A side the peer said it reads sends by rendezvous its RMA writes (WRITE_RTS) and the
 *   answers to RMA reads (READ_RESP) from FI_OFI_LAYER_CMA_SIZE bytes on, and its messages
 *   (RTS) from FI_OFI_LAYER_CMA_MSG_SIZE; these, any other rendezvous message above that
 *   size and atomics' large operands name its own addresses (LAYER_HDR_CMA), with no
 *   registration with the core; the peer copies them straight into place (the receive's
 *   buffer, the target region) once the message is matched or the request checked, and
 *   answers as after any rendezvous read. Everything else, and what the target checks, is
 *   unchanged: keys, ranges, access, counters, remote CQ data, errors.
 * - A copy the system refuses (the peer changed its credentials, or is gone) fails that
 *   transfer (FI_EIO); the side that could not copy says it no longer reads the peer, whose
 *   later transfers go through the core again. Each copy reads the peer's cookie again in
 *   the same system call, so a pid the system gave another process since fails it too.
 *
 * Direct RMA (rma/grant.h) yields to it: a write or read to a peer that reads this process
 * goes as a request from the CMA size on. Runs under the endpoint's lock.
 */
#ifndef LAYER_CMA_CMA_H
#define LAYER_CMA_CMA_H

#include "layer/conn/conn.h"
#include "layer/proto/proto.h"

struct layer_rx;
struct layer_tx;

/*
 * Whether an RMA write or read answer of len bytes to conn's peer goes by cross-memory attach:
 * the peer reads this process. It needs the target's answer either way, so one copy wins
 * from a few KiB on.
 */
static inline bool layer_cma_is_for(const struct layer_conn *conn, size_t len)
{
	/* never an inject's (at most LAYER_INJECT_SIZE): its buffer is the caller's again */
	return conn->cma_is_read && len >= layer_settings.cma_size && len > LAYER_INJECT_SIZE;
}

/*
 * The same for a message: by rendezvous, whose answer an eager message does without, so
 * from a larger size (FI_OFI_LAYER_CMA_MSG_SIZE; 0: never).
 */
static inline bool layer_cma_msg_is_for(const struct layer_conn *conn, size_t len)
{
	return conn->cma_is_read && layer_settings.cma_msg_size &&
	       len >= layer_settings.cma_msg_size && len > LAYER_INJECT_SIZE;
}

/*
 * conn is open (FI_OFI_LAYER_CMA_SIZE not 0). Over a core whose connections carry both ways
 * (MSG), nothing is said yet: the first transfer that could go by cross-memory attach says
 * who this side is (layer_cma_want), and goes the core's way itself; so the connections
 * that never carry large data (most of them, with many peers) cost no exchange. Over other
 * cores, whose answers may come on another connection, this side says it now.
 */
void layer_cma_start(struct layer_proto *proto, struct layer_conn *conn);
/* This side says who it is on conn, unless it did. */
void layer_cma_begin(struct layer_proto *proto, struct layer_conn *conn);

/*
 * A transfer of len bytes with conn's peer is about to go, which goes by cross-memory attach
 * from min_size bytes on (FI_OFI_LAYER_CMA_MSG_SIZE for messages, 0: never;
 * FI_OFI_LAYER_CMA_SIZE for RMA).
 */
static inline void layer_cma_want(struct layer_proto *proto, struct layer_conn *conn,
				  size_t len, size_t min_size)
{
	if (unlikely(!conn->cma_is_said) && min_size && len >= min_size &&
	    len > LAYER_INJECT_SIZE)
		layer_cma_begin(proto, conn);
}
/* A CMA or CMA_BACK came in (buf stays the caller's). */
void layer_cma_arrive(struct layer_proto *proto, struct layer_buf *buf);
/* iov's non-empty buffers named in segs for the peer to copy (tx->reg_cnt of them, with no
 * registration), tx marked LAYER_HDR_CMA. */
void layer_cma_name(struct layer_tx *tx, const struct iovec *iov, size_t iov_cnt,
		    struct layer_rts_seg *segs);
/* Copies the rendezvous data rx is set up for (rx->segs: the peer's addresses) into rx->iov:
 * rx->read_done or rx->read_err set. */
void layer_cma_copy(struct layer_proto *proto, struct layer_rx *rx);

#endif /* LAYER_CMA_CMA_H */
