/*
 * Wire protocol of ofi_layer (version: LAYER_PROTO_VERSION below): what travels between two
 * endpoints, whatever the core. Every message starts with a fixed 40-byte header. Eager
 * messages carry their payload right after it; a rendezvous request (RTS) carries the sender's
 * registered segments, which the receiver reads with the core's RMA read once the message is
 * matched, and acknowledges with an ACK (which also answers an eager message sent with
 * ACK_REQ). A receiver whose unexpected messages hold more than its bound sends PACE to their
 * senders, which then send their messages above the inject size by rendezvous, until UNPACE.
 *
 * RMA (rma/rma.h) is carried as messages, checked by the target against its registrations
 * before any byte moves. WRITE names the target range in its header (tag: address, data: key,
 * size: length) so that the data after it can go straight into place as soon as the header is
 * in; its remote CQ data, if any, follows the data. The other requests' first segment after
 * the header names the target range (address, key, length): WRITE_RTS then names the
 * initiator's registered segments, which the target reads with the core's RMA read. Writes
 * are answered by an ACK once their data is in place; a WRITE without DELIVERY whose data the
 * core reads straight into the region, as soon as that is set up. READ_REQ asks for the
 * range; READ_RESP (its tag: the request's msg_id) answers with the data, or names the
 * target's registered segments for the initiator to read, then answered by an ACK of the
 * READ_RESP's msg_id. A failed request's ACK or READ_RESP has FAILED and the error in data.
 *
 * ATOMIC (atomic/atomic.h) carries struct layer_atomic_desc after the header (the target
 * range, the operation, the datatype, which of the three forms), then its operands and, for
 * the compare form, the compare operands; or, when they are larger than the target's buffers
 * take (seg_cnt > 0), the initiator's registered segments holding both, which the target
 * reads. size is the bytes of target memory (elements times datatype size); data the remote
 * CQ data with CQ_DATA. The write form is answered by an ACK (not with UNANSWERED, for a
 * region granted to the initiator); the fetch and compare forms by a READ_RESP with the
 * values the target held before, as a read is.
 *
 * Direct RMA (rma/grant.h), over a MSG core with RMA: a target that has checked a request for
 * one of its regions may answer it with GRANT too, carrying struct layer_grant (the region's
 * key, range and access as peers name them, the core's key and the core's address of its first
 * byte); the initiator's later writes and reads inside that range then go on the core's own RMA
 * on the connection, which no message of ours answers. REVOKE (data: the key) ends a grant:
 * the target sends it on every connection it granted the region on when the region closes or
 * gets a counter, before the application's next message on it.
 *
 * Cross-memory attach (cma/cma.h), between processes of one host: each side of a connection
 * sends CMA (struct layer_cma_hello: who it is, and whether it has found that it reads the
 * peer's memory) when the connection opens, or in answer to the peer's, and again when what
 * it said changes; CMA_BACK is the same on a channel the peer opened (an RDM core routes it
 * as an answer). A side the peer said it reads names, from the CMA sizes on, its own
 * addresses in RTS, WRITE_RTS, READ_RESP and ATOMIC (CMA set), which the peer copies with
 * one system call instead of reading them with the core's RMA; everything else is unchanged.
 *
 * Collectives (coll/coll.h) travel as EAGER and RTS messages with COLL set: matched in the
 * endpoint's own queue, never the application's, by their tag (struct layer_coll_tag: group,
 * call, round) and their sender. COLL_ABORT (tag: group and call) tells the members of a
 * group that a call failed at its sender, so that none waits for ever for a message it will
 * not get.
 *
 * Handshakes, one per connection (the core adapters, core_msg.c and core_rdm.c):
 * - over a MSG core the connection request carries struct layer_hello (the requester's
 *   listening address, the largest eager payload its buffers take, its authorization key,
 *   the id its peer's messages carry as remote CQ data when its core does not say which
 *   connection a message came on: core/core_msg.h), its acceptance struct layer_accept
 *   (the same of the acceptor), a refusal struct layer_reject (for the requester's key,
 *   or because the two endpoints asked each other at once and the acceptor's request is
 *   the one both keep). A busy connection's two sides lend each other rings (core/ring.h)
 *   with RING_OFFER and RING_ACCEPT (struct layer_ring_offer after the header), and give
 *   them back with RING_RELEASE: short messages, each the header and payload it would
 *   carry as a message, go as the core's RMA writes into the peer's slots meanwhile;
 * - over an RDM core the first message to a peer for each key (a numbered slot) is a HELLO
 *   carrying the sender's address and the key, answered by HELLO_ACK (whose data field says
 *   what the answering endpoint's buffers take) or HELLO_NAK (the key is refused).
 * Every field is always present: version 2 has no "not said" values. Version 1 peers are
 * refused (their handshakes and headers fail validation).
 */
#ifndef LAYER_CORE_WIRE_H
#define LAYER_CORE_WIRE_H

#include <stddef.h>
#include <stdint.h>

#include "layer/layer.h"
#include "util/atomic.h"
#include "util/cma.h"

#define LAYER_PROTO_VERSION 11

/* Operations, with their names for logs. */
#define LAYER_OPS(X)                                                         \
	X(EAGER, "eager")         /* header + payload */                     \
	X(RTS, "rts")             /* rendezvous request */                   \
	X(ACK, "ack")             /* rendezvous data pulled, or ACK_REQ met */ \
	X(HELLO, "hello")         /* RDM core: the sender's address, key */  \
	X(HELLO_ACK, "hello-ack") /* RDM core: the sender is known now */    \
	X(HELLO_NAK, "hello-nak") /* RDM core: the HELLO's key is refused */ \
	X(PACE, "pace")           /* receiver over its unexpected bound */   \
	X(UNPACE, "unpace")       /* receiver under half its bound again */  \
	X(WRITE, "write")         /* RMA write, data after the target */     \
	X(WRITE_RTS, "write-rts") /* RMA write, initiator's segments */      \
	X(READ_REQ, "read-req")   /* RMA read of the target range */         \
	X(READ_RESP, "read-resp") /* its data, or the target's segments */ \
	X(ATOMIC, "atomic")       /* atomic: its description, operands */     \
	X(COLL_ABORT, "coll-abort") /* a collective call failed at the sender */ \
	X(PING, "ping")           /* liveness: are you there? */               \
	X(PONG, "pong")           /* liveness: yes */                         \
	X(GRANT, "grant")         /* direct RMA: how the core names a region */ \
	X(REVOKE, "revoke")       /* direct RMA: that grant is over */          \
	X(CMA, "cma")             /* who this process is, for a peer on its host */ \
	X(CMA_BACK, "cma-back")   /* the same, on a channel the peer opened */ \
	X(RING_OFFER, "ring-offer") /* MSG core: write short messages here */ \
	X(RING_ACCEPT, "ring-accept") /* and you here */                     \
	X(RING_RELEASE, "ring-release") /* no more slots from me (or: no ring) */

enum layer_op {
#define LAYER_OP_ENUM(name, str) LAYER_OP_##name,
	LAYER_OPS(LAYER_OP_ENUM)
#undef LAYER_OP_ENUM
	LAYER_OP_MAX
};

const char *layer_op_str(unsigned op);

/* Header flags. */
#define LAYER_HDR_CQ_DATA (1u << 0) /* data holds remote CQ data */
#define LAYER_HDR_TAGGED  (1u << 1) /* a tagged message: tag is valid */
#define LAYER_HDR_ACK_REQ (1u << 2) /* eager: acknowledge with msg_id once delivered */
#define LAYER_HDR_FAILED  (1u << 3) /* ACK, READ_RESP: the target could not do it; the
				     * request fails with the errno in data (FI_EIO when
				     * 0) instead of waiting for ever */
#define LAYER_HDR_DELIVERY (1u << 4) /* WRITE: answer once the data is in place
				      * (FI_DELIVERY_COMPLETE), not once it is taken */
#define LAYER_HDR_COLL (1u << 5) /* EAGER, RTS: collective traffic, tag as coll/coll.h
				  * says; matched apart from the application's */
#define LAYER_HDR_UNANSWERED (1u << 6) /* ATOMIC, write form, operands inline: inside what
					* the target granted the initiator (rma/grant.h), which
					* completed it as sent; no ACK (a refusal is the
					* target's to log) */
#define LAYER_HDR_INLINE (1u << 7) /* READ_RESP of at most 8 bytes: they are in data, the
				    * message is the header alone */
#define LAYER_HDR_CMA (1u << 8) /* RTS, WRITE_RTS, READ_RESP, ATOMIC with segments: they
				 * are the sender's own addresses, for the receiver to copy
				 * from by cross-memory attach (cma/cma.h), not the core's */
#define LAYER_HDR_FLAGS (LAYER_HDR_CQ_DATA | LAYER_HDR_TAGGED | LAYER_HDR_ACK_REQ | \
			 LAYER_HDR_FAILED | LAYER_HDR_DELIVERY | LAYER_HDR_COLL | \
			 LAYER_HDR_UNANSWERED | LAYER_HDR_INLINE | LAYER_HDR_CMA)

struct layer_hdr {
	uint8_t version;    /* LAYER_PROTO_VERSION */
	uint8_t op;         /* enum layer_op */
	uint16_t flags;     /* LAYER_HDR_* */
	uint16_t seg_cnt;   /* RTS: struct layer_rts_seg entries after the header */
	uint16_t key_slot;  /* EAGER, RTS over an RDM core: the sender's key slot; else 0 */
	uint64_t size;      /* EAGER: payload bytes; RTS: message size; HELLO: address and key */
	uint64_t tag;       /* tagged messages: the tag; COLL, COLL_ABORT: group, call, round;
			     * WRITE: the target address;
			     * READ_RESP: the request's msg_id */
	uint64_t data;      /* remote CQ data (ATOMIC's too); WRITE: the target key; READ_RESP
			     * with INLINE: the data; HELLO_ACK:
			     * the largest eager payload the answering endpoint's buffers take;
			     * FAILED: the errno */
	uint64_t msg_id;    /* RTS, ACK, and eager with ACK_REQ: the sender's id of the send;
			     * RMA requests: the initiator's id of the request; READ_RESP
			     * with segments: the target's id, for the ACK releasing them;
			     * HELLO, HELLO_ACK, HELLO_NAK: the key slot */
};

_Static_assert(sizeof(struct layer_hdr) == LAYER_HDR_SIZE, "wire header size");

/* One registered segment of a rendezvous message, or the target range of an RMA request. */
struct layer_rts_seg {
	uint64_t addr;      /* remote address as the core's RMA wants it */
	uint64_t key;
	uint64_t len;
};

#define LAYER_RTS_MAX_SEGS LAYER_IOV_LIMIT

/* What a GRANT carries after its header (rma/grant.h). */
struct layer_grant {
	uint64_t key;       /* the region's key, as peers' requests name it */
	uint64_t base;      /* the address requests name its first byte by */
	uint64_t len;
	uint64_t access;    /* FI_REMOTE_READ, FI_REMOTE_WRITE */
	uint64_t core_key;  /* the core's key of the region */
	uint64_t core_addr; /* the address the core's RMA names its first byte by */
};

/* What an ATOMIC does, after its header. */
struct layer_atomic_desc {
	uint64_t addr;      /* the target range: address and key as the target's MR names them */
	uint64_t key;
	uint8_t kind;       /* enum util_atomic_kind: write, fetch, compare */
	uint8_t op;         /* enum fi_op (libfabric's values, the same in every release) */
	uint8_t datatype;   /* enum fi_datatype (likewise) */
	uint8_t reserved[5];
};

/* Bytes of operands an ATOMIC of size target bytes carries (or its segments name). */
static inline uint64_t layer_atomic_operand_len(const struct layer_atomic_desc *desc,
						uint64_t size)
{
	return (desc->op == FI_ATOMIC_READ ? 0 : size) +
	       (desc->kind == UTIL_ATOMIC_COMPARE ? size : 0);
}

/*
 * Whether a message of len bytes (header included) is well formed for its operation: the
 * version, the flags, the length the operation implies, and (is_valid) that an RTS's
 * segments add up to its size. fits needs the header only (direct receive asks while the
 * rest is still arriving). HELLO is the RDM adapter's to check further (address and key).
 */
bool layer_hdr_fits(const struct layer_hdr *hdr, size_t len);
bool layer_hdr_is_valid(const struct layer_hdr *hdr, size_t len);
/* The segments first .. seg_cnt - 1 after the header add up to its size. */
bool layer_segs_add_up(const struct layer_hdr *hdr, const struct layer_rts_seg *segs,
		       uint32_t first);

/*
 * Over an RDM core, the key slots one sender uses with one peer: at most this many
 * distinct keys (a slot is never reused while the peer lives).
 */
#define LAYER_KEY_SLOT_MAX 1024

/*
 * MSG core: the ring a side lends its peer (core/ring.h), in RING_OFFER and RING_ACCEPT:
 * where the peer's core writes go (address and key as the core's RMA names them) and how
 * many slots (a power of two).
 */
struct layer_ring_offer {
	uint64_t addr;
	uint64_t key;
	uint32_t slots;
	uint32_t reserved;
};

/* MSG core: the handshake carried in the core's connection request. */
struct layer_hello {
	uint32_t magic;     /* LAYER_HELLO_MAGIC */
	uint8_t version;    /* LAYER_PROTO_VERSION */
	uint8_t addrlen;    /* bytes of addr in use */
	uint16_t rx_eager_kib; /* the largest eager payload the requester's buffers take, KiB */
	uint8_t addr[28];   /* the requester's listening address (normalised) */
	uint8_t key_len;    /* the requester's authorization key: 0 (none) .. LAYER_AUTH_KEY_MAX */
	uint8_t reserved;
	uint16_t rx_rma_kib; /* the largest RMA data (a WRITE's, a READ_RESP's) the requester
			      * takes with its header, KiB */
	uint8_t key[LAYER_AUTH_KEY_MAX];
	uint64_t rx_id;     /* what the acceptor's messages carry as remote CQ data, so that
			     * the requester knows their connection; 0: nothing (its core names
			     * it) */
};

#define LAYER_HELLO_MAGIC 0x6c617972u /* "layr" */

/* MSG core: carried by the acceptance of a connection request. */
struct layer_accept {
	uint32_t magic;     /* LAYER_HELLO_MAGIC */
	uint8_t version;    /* LAYER_PROTO_VERSION */
	uint8_t reserved;
	uint16_t rx_eager_kib; /* as in struct layer_hello */
	uint16_t rx_rma_kib;   /* likewise */
	uint16_t reserved2;
	uint32_t reserved3;
	uint64_t rx_id;     /* as in struct layer_hello, for the requester's messages */
};

/* MSG core: carried by a refusal of a connection request (fi_reject), so the requester
 * knows why. */
struct layer_reject {
	uint32_t magic;     /* LAYER_HELLO_MAGIC */
	uint8_t version;    /* LAYER_PROTO_VERSION */
	uint8_t reason;     /* enum layer_reject_reason */
	uint16_t reserved;
};

enum layer_reject_reason {
	LAYER_REJECT_AUTH_KEY = 1, /* the requester's key is not one the endpoint accepts */
	LAYER_REJECT_DUPLICATE = 2, /* both endpoints asked at once: the acceptor's own
				     * request is the connection both keep (conn/conn.c) */
};

/* CMA's payload (cma/cma.h). */
struct layer_cma_hello {
	struct util_cma_id id;         /* the sender, as util/cma.h checks it */
	uint32_t flags;                /* LAYER_CMA_* */
	uint32_t reserved;
};

#define LAYER_CMA_READS (1u << 0)      /* the sender reads the receiver's memory */

#endif /* LAYER_CORE_WIRE_H */
