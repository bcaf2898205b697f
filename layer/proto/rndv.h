/*
 * Rendezvous for messages above the eager size (rndv.c): the sender registers its buffers and
 * sends an RTS naming them; the receiver, once the message is matched, reads the data
 * straight into the receive's buffer with the core's RMA read and answers with an ACK.
 */
#ifndef LAYER_PROTO_RNDV_H
#define LAYER_PROTO_RNDV_H

#include <sys/uio.h>

#include "layer/core/core.h"

struct layer_proto;
struct layer_tx;
struct layer_rx;

/*
 * Names iov's non-empty buffers in segs, one each, for conn's peer to read (RMA's, atomics'):
 * registered (tx->reg, kept until tx is freed) for the core's RMA read, or, to a peer that
 * reads this process's memory, as they are (cma/cma.h: tx->hdr gets LAYER_HDR_CMA).
 * tx->reg_cnt says how many. 0 or -FI_E*.
 */
int layer_rndv_register(struct layer_proto *proto, struct layer_conn *conn, struct layer_tx *tx,
			const struct iovec *iov, size_t iov_cnt, struct layer_rts_seg *segs);
/* Makes tx an RTS on conn for the message in iov, its buffers named (as they are from the CMA
 * message size, cma/cma.h). 0 or -FI_E*. */
int layer_rndv_prepare(struct layer_proto *proto, struct layer_conn *conn, struct layer_tx *tx,
		       const struct iovec *iov, size_t iov_cnt);
/* The send is done: its registrations go back. */
void layer_rndv_release(struct layer_proto *proto, struct layer_tx *tx);
/*
 * Starts pulling the rendezvous message announced in buf into rx's buffer at offset (space
 * bytes available). A multi-receive slice (is_released false) is read through a child
 * receive so that rx stays posted.
 */
void layer_rndv_start_read(struct layer_proto *proto, struct layer_rx *rx,
			   const struct layer_buf *buf, size_t offset, size_t space,
			   uint64_t cq_flags, bool is_released);
/*
 * Runs the reads rx is set up for (conn, iov, segs, is_cma, read_len, msg_id), or its one copy
 * (is_cma: cma/cma.h), then finishes it: an RMA transfer's on_read_done, or the receive's
 * completion and the sender's ACK.
 */
void layer_rndv_run(struct layer_proto *proto, struct layer_rx *rx);
/* Posts the reads rx still needs; false when the core is full (retried by progress). */
bool layer_rndv_issue_reads(struct layer_proto *proto, struct layer_rx *rx);
/* A read of rx completed (err 0 or positive). */
void layer_rndv_read_done(struct layer_proto *proto, struct layer_rx *rx, int err);

#endif /* LAYER_PROTO_RNDV_H */
