/*
 * The datagram transport's wire format (dgram.h; fi_layer(7), WIRE PROTOCOL). Every datagram
 * starts with struct layer_dg_hdr. A DATA datagram carries a share of one direction's byte
 * stream of messages: its sequence number orders it, FIRST marks a message's first packet,
 * which starts with struct layer_dg_msg, and LAST its last. Every datagram carries the
 * sender's acknowledgement of what it received (HAS_ACK), so acknowledgements ride on traffic;
 * an ACK datagram carries only that. A session is one life of a pair's conversation, named
 * at each end by a random number; a datagram naming a session its receiver does not have
 * is answered by RST, and a peer that shows up with a new session is a new conversation.
 * Datagrams to a peer are no larger than the mtu it announces (the core's max_msg_size until
 * it has).
 * Little-endian, as the rest of the protocol (x86-64 only today).
 */
#ifndef LAYER_DGRAM_DGRAM_WIRE_H
#define LAYER_DGRAM_DGRAM_WIRE_H

#include <stdint.h>

#define LAYER_DG_VERSION 1

enum layer_dg_type {
	LAYER_DG_DATA = 1,     /* stream packet (+ acknowledgement) */
	LAYER_DG_ACK = 2,      /* acknowledgement only */
	LAYER_DG_RST = 3,      /* "I have no session dst_sess with you" */
};

enum layer_dg_flag {
	LAYER_DG_HAS_ACK = 1 << 0,  /* ack, sack are valid (the sender knows our session) */
	LAYER_DG_SYN = 1 << 1,      /* the sender's address follows the header (addrlen
				     * bytes, normalised): sent until the peer answers */
	LAYER_DG_FIRST = 1 << 2,    /* a message starts here: struct layer_dg_msg first */
	LAYER_DG_LAST = 1 << 3,     /* the message ends in this packet */
	LAYER_DG_ACK_REQ = 1 << 4,  /* an operation waits for this packet's acknowledgement:
				     * it goes before the receiver's progress call returns */
};

struct layer_dg_hdr {
	uint8_t version;
	uint8_t type;               /* enum layer_dg_type */
	uint8_t flags;              /* enum layer_dg_flag */
	uint8_t rsvd;
	uint32_t src_sess;          /* the sender's session with the receiver */
	uint32_t dst_sess;          /* the receiver's, as the sender knows it; 0: not yet */
	uint32_t seq;               /* DATA: this packet's place in the stream */
	uint32_t ack;               /* every packet before this one arrived */
	uint32_t sack;              /* bit i: packet ack + 1 + i arrived too */
	uint32_t wnd;               /* packets the sender of this takes ahead of ack */
	uint32_t mtu;               /* the largest datagram the sender of this takes */
};

/* What a message is, in the first packet of each. */
enum layer_dg_kind {
	LAYER_DG_MSG = 1,           /* a message of the protocol above, len bytes */
	LAYER_DG_RREQ = 2,          /* a read request: struct layer_dg_rreq follows */
	LAYER_DG_RDATA = 3,         /* the answer to the oldest read request not answered:
				     * len bytes of data, or err */
	LAYER_DG_PING = 4,          /* nothing (a keepalive): its acknowledgement is the
				     * answer */
};

struct layer_dg_msg {
	uint8_t kind;               /* enum layer_dg_kind */
	uint8_t rsvd[3];
	uint32_t err;               /* RDATA: 0, or the positive errno of a refusal */
	uint64_t len;               /* bytes of the message after this header */
};

struct layer_dg_rreq {
	uint64_t addr;
	uint64_t key;
	uint64_t len;
};

_Static_assert(sizeof(struct layer_dg_hdr) == 32, "datagram header layout");
_Static_assert(sizeof(struct layer_dg_msg) == 16, "datagram message header layout");

#endif /* LAYER_DGRAM_DGRAM_WIRE_H */
