/*
 * Atomics (fi_atomic(3)) over every core, as ATOMIC messages of the wire protocol
 * (core/wire.h) that the target checks against its registrations, then applies in software
 * (util/atomic.h) under one lock of the process: atomic with respect to every other ofi_layer
 * atomic on that memory, whichever endpoint, peer or thread it comes from. No core's own
 * atomics are used, so the rules (and the checks) are the same over all of them.
 *
 * - atomic.c, the initiator: the request, its operands inline when they fit the peer's
 *   buffers, else registered for the target to read (counts above one message); the write
 *   form completes on the target's ACK, the fetch and compare forms on its READ_RESP, whose
 *   values land in the result buffers as a read's data does (rma/rma.c).
 * - atomic_target.c, the target: the checks, the operation, FI_REMOTE_WRITE / FI_REMOTE_READ
 *   counted, remote CQ data, the answer.
 *
 * Validity (fi_atomicvalid, fi_query_atomic) is util_atomic_is_valid's; an operation touches
 * at most LAYER_ATOMIC_MAX_SIZE bytes of target memory, in one target range
 * (rma_iov_limit 1). Runs under the endpoint's lock.
 */
#ifndef LAYER_ATOMIC_ATOMIC_H
#define LAYER_ATOMIC_ATOMIC_H

#include <rdma/fi_atomic.h>

#include "layer/proto/proto.h"
#include "util/atomic.h"

/* One atomic operation, its arguments checked by the entry point (ep/atomic.c). */
struct layer_atomic_req {
	enum util_atomic_kind kind;
	enum fi_op op;
	enum fi_datatype datatype;
	const struct iovec *operand;   /* count elements (none for FI_ATOMIC_READ) */
	size_t operand_cnt;
	const struct iovec *compare;   /* the compare form's */
	size_t compare_cnt;
	const struct iovec *result;    /* the fetch and compare forms' */
	size_t result_cnt;
	size_t len;                    /* bytes of target memory: count times the element size */
	fi_addr_t peer;
	uint64_t addr;                 /* the target range */
	uint64_t key;
	uint64_t data;                 /* remote CQ data, with FI_REMOTE_CQ_DATA */
	uint64_t flags;
	void *context;
};

/* Starts req: 0, -FI_EAGAIN (the transmit queue is full), or the connection's error. */
ssize_t layer_atomic_start(struct layer_proto *proto, const struct layer_atomic_req *req);

/* The receive path's: an ATOMIC came in. The buffer stays the caller's. */
void layer_atomic_target(struct layer_proto *proto, struct layer_buf *buf);

/*
 * fi_atomicvalid and its fetch and compare forms: 0 with *count the most elements one
 * operation takes, or -FI_EOPNOTSUPP.
 */
int layer_atomic_valid(enum util_atomic_kind kind, enum fi_datatype datatype, enum fi_op op,
		       size_t *count);
/* fi_query_atomic (the domain's). */
int layer_query_atomic(struct fid_domain *domain, enum fi_datatype datatype, enum fi_op op,
		       struct fi_atomic_attr *attr, uint64_t flags);

#endif /* LAYER_ATOMIC_ATOMIC_H */
