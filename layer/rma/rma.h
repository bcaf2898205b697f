/*
 * RMA (fi_rma(3)) over every core, as messages of the wire protocol (core/wire.h) that the
 * target checks against its registrations (mr.h, util/mr_map.h) before any byte moves: a bad
 * key, a range outside the region or a region without the access fails the request at the
 * initiator with that error, and the connection, and everything else on it, carry on. (tcp's
 * own RMA would close the connection on such a request.)
 *
 * - rma.c, the initiator: a write up to what the peer's buffers take goes with its data
 *   (WRITE), a larger one names its registered buffers (WRITE_RTS) for the target to read
 *   with the core's RMA read; a read asks (READ_REQ) and gets the data in the answer
 *   (READ_RESP), or the target's registered segments to read. Every request completes on the
 *   target's answer, so a refusal fails it: a read's once the data is here; a write's once
 *   its data is in place, or (WRITE over direct receive, without FI_DELIVERY_COMPLETE) once
 *   the target has checked it and placed its data to arrive straight into the region.
 * - rma_target.c, the target: the checks, the copies and reads, remote CQ data and the
 *   FI_REMOTE_READ / FI_REMOTE_WRITE counters (FI_RMA_EVENT), the answers.
 *
 * One target range per request (tx_attr->rma_iov_limit 1). Runs under the endpoint's lock.
 */
#ifndef LAYER_RMA_RMA_H
#define LAYER_RMA_RMA_H

#include <rdma/fi_rma.h>

#include "layer/proto/proto.h"

/* A target range or registered segment on the wire (core/wire.h). */
#define LAYER_RMA_SEG_SIZE sizeof(struct layer_rts_seg)

/*
 * An RMA write of iov to rma at dest (flags: FI_REMOTE_CQ_DATA with data, FI_INJECT,
 * FI_COMPLETION, FI_FENCE...): 0, -FI_EAGAIN (the transmit queue is full), -FI_EINVAL (the
 * lengths differ), -FI_EMSGSIZE, or the connection's error.
 */
ssize_t layer_rma_write(struct layer_proto *proto, const struct iovec *iov, size_t iov_cnt,
			fi_addr_t dest, const struct fi_rma_iov *rma, uint64_t data,
			uint64_t flags, void *context);
/* An RMA read of rma at src into iov: as layer_rma_write. */
ssize_t layer_rma_read(struct layer_proto *proto, const struct iovec *iov, size_t iov_cnt,
		       fi_addr_t src, const struct fi_rma_iov *rma, uint64_t flags,
		       void *context);

/* The receive path's: a WRITE, WRITE_RTS, READ_REQ or READ_RESP came in (rma_target.c for
 * the first three). The buffer stays the caller's. */
void layer_rma_arrive(struct layer_proto *proto, struct layer_buf *buf);
void layer_rma_target(struct layer_proto *proto, struct layer_buf *buf);
void layer_rma_read_resp(struct layer_proto *proto, struct layer_buf *buf);

/*
 * Direct receive (proto/rx.c, layer_rx_place): where the payload of a WRITE (the target's
 * checked region) or of an eager READ_RESP (the read's buffers) goes as soon as its header is
 * in. 0 with iov and *count set (the buffer marked placed), or an error: the payload then goes
 * to the provider's buffer and the message is handled on arrival as usual.
 */
int layer_rma_place(struct layer_proto *proto, struct layer_buf *buf, struct iovec *iov,
		    size_t *count);
int layer_rma_place_read(struct layer_proto *proto, struct layer_buf *buf, struct iovec *iov,
			 size_t *count);
/*
 * Both sides: rx (its iov set) reads hdr->size bytes from the peer's segs with the core's RMA
 * read, then done(rx) runs; hdr->msg_id is what the reads answer. job: done's state.
 */
void layer_rma_pull(struct layer_proto *proto, struct layer_rx *rx, struct layer_conn *conn,
		    const struct layer_hdr *hdr, const struct layer_rts_seg *segs, uint32_t seg_cnt,
		    void (*done)(struct layer_proto *proto, struct layer_rx *rx), void *job);
/*
 * The target's answers (rma_target.c, and atomics'): a READ_RESP of msg_id on conn with size
 * bytes that the caller writes at *data before sending it (layer_tx_ctrl_send): in the header
 * (up to 8 bytes: INLINE), in the entry, after the header in a copy, or (larger than the
 * initiator takes with a header: chan->tx_rma_eager) in a copy registered for the initiator to
 * read. NULL without memory. It may be kept for the endpoint's next call (may_keep: the
 * target's application hears nothing of a read); the caller clears that when it does.
 */
struct layer_tx *layer_rma_resp_new(struct layer_proto *proto, struct layer_conn *conn,
				    uint64_t msg_id, uint64_t size, void **data);
/* A FAILED READ_RESP of msg_id with err (positive). */
void layer_rma_resp_failed(struct layer_proto *proto, struct layer_conn *conn, uint64_t msg_id,
			   int err);
/* A request the target refuses: said once at warning level, the rest at info. */
void layer_rma_refused(const struct layer_hdr *hdr, const struct layer_rts_seg *target,
		       int err);
/*
 * Direct receive: the ACKs of the writes placed during the core's progress, which take them
 * (checked, their data arriving straight into the region) unless the initiator asked for
 * delivery complete. Called once the core's progress returns, before connections are freed.
 */
void layer_rma_answer_taken(struct layer_proto *proto);
/* A placed buffer lost before it arrived: the registration it held goes back. */
void layer_rma_unplace(struct layer_proto *proto, struct layer_buf *buf);

#endif /* LAYER_RMA_RMA_H */
