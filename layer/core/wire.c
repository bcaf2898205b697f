/* Names and validation of the wire protocol (wire.h). */
#include "config.h"

#include "layer/core/wire.h"

static const char *const layer_op_names[] = {
#define LAYER_OP_NAME(name, str) [LAYER_OP_##name] = str,
	LAYER_OPS(LAYER_OP_NAME)
#undef LAYER_OP_NAME
};

const char *layer_op_str(unsigned op)
{
	return op < LAYER_OP_MAX ? layer_op_names[op] : "unknown";
}

/*
 * The segments of an RTS must add up to the message size, or reads would run past them; so
 * must a WRITE_RTS's after its target, and a READ_RESP's.
 */
bool layer_segs_add_up(const struct layer_hdr *hdr, const struct layer_rts_seg *segs,
		       uint32_t first)
{
	uint64_t sum = 0;
	uint32_t i;

	for (i = first; i < hdr->seg_cnt; i++) {
		if (segs[i].len > LAYER_MAX_MSG_SIZE)
			return false;
		sum += segs[i].len;
	}
	return sum == hdr->size;
}

bool layer_hdr_fits(const struct layer_hdr *hdr, size_t len)
{
	/* RMA requests: the header and the target range */
	const size_t seg = sizeof(*hdr) + sizeof(struct layer_rts_seg);

	if (len < sizeof(*hdr) || hdr->version != LAYER_PROTO_VERSION ||
	    (hdr->flags & ~LAYER_HDR_FLAGS))
		return false;
	/* collective traffic is a plain eager or rendezvous message of the provider's own */
	if (unlikely(hdr->flags & LAYER_HDR_COLL) &&
	    ((hdr->op != LAYER_OP_EAGER && hdr->op != LAYER_OP_RTS) ||
	     (hdr->flags & (LAYER_HDR_TAGGED | LAYER_HDR_CQ_DATA | LAYER_HDR_ACK_REQ))))
		return false;
	if (unlikely(hdr->flags & LAYER_HDR_CMA) &&
	    (!hdr->seg_cnt || (hdr->op != LAYER_OP_RTS && hdr->op != LAYER_OP_WRITE_RTS &&
			       hdr->op != LAYER_OP_READ_RESP && hdr->op != LAYER_OP_ATOMIC)))
		return false;
	if (unlikely(hdr->flags & LAYER_HDR_UNANSWERED) &&
	    (hdr->op != LAYER_OP_ATOMIC || hdr->seg_cnt))
		return false;
	switch (hdr->op) {
	case LAYER_OP_EAGER:
		return hdr->size == len - sizeof(*hdr);
	case LAYER_OP_RTS:
		return hdr->seg_cnt >= 1 && hdr->seg_cnt <= LAYER_RTS_MAX_SEGS &&
		       len == sizeof(*hdr) + hdr->seg_cnt * sizeof(struct layer_rts_seg) &&
		       hdr->size <= LAYER_MAX_MSG_SIZE;
	case LAYER_OP_HELLO:
		return hdr->size == len - sizeof(*hdr);
	case LAYER_OP_WRITE:
		/* the data, then 8 bytes of remote CQ data with CQ_DATA */
		return hdr->seg_cnt == 0 && hdr->size <= LAYER_MAX_MSG_SIZE &&
		       len == sizeof(*hdr) + hdr->size +
			      (hdr->flags & LAYER_HDR_CQ_DATA ? sizeof(uint64_t) : 0);
	case LAYER_OP_WRITE_RTS:
		return hdr->seg_cnt >= 2 && hdr->seg_cnt <= LAYER_RTS_MAX_SEGS + 1 &&
		       len == sizeof(*hdr) + hdr->seg_cnt * sizeof(struct layer_rts_seg) &&
		       hdr->size <= LAYER_MAX_MSG_SIZE;
	case LAYER_OP_READ_REQ:
		return hdr->seg_cnt == 1 && len == seg && hdr->size <= LAYER_MAX_MSG_SIZE;
	case LAYER_OP_READ_RESP:
		if (hdr->flags & LAYER_HDR_FAILED)
			return len == sizeof(*hdr);
		if (hdr->flags & LAYER_HDR_INLINE)
			return len == sizeof(*hdr) && !hdr->seg_cnt &&
			       hdr->size <= sizeof(hdr->data);
		if (!hdr->seg_cnt)
			return hdr->size == len - sizeof(*hdr);
		return hdr->seg_cnt <= LAYER_RTS_MAX_SEGS &&
		       len == sizeof(*hdr) + hdr->seg_cnt * sizeof(struct layer_rts_seg) &&
		       hdr->size <= LAYER_MAX_MSG_SIZE;
	case LAYER_OP_ATOMIC:
		/* the description, then operands or segments: checked in full at the target
		 * (atomic/), where the description is in */
		return hdr->seg_cnt <= LAYER_RTS_MAX_SEGS && hdr->size <= LAYER_MAX_MSG_SIZE &&
		       len >= sizeof(*hdr) + sizeof(struct layer_atomic_desc) +
			      hdr->seg_cnt * sizeof(struct layer_rts_seg);
	case LAYER_OP_GRANT:
		return len == sizeof(*hdr) + sizeof(struct layer_grant);
	case LAYER_OP_CMA:
	case LAYER_OP_CMA_BACK:
		return len == sizeof(*hdr) + sizeof(struct layer_cma_hello);
	case LAYER_OP_RING_OFFER:
	case LAYER_OP_RING_ACCEPT:
		return len == sizeof(*hdr) + sizeof(struct layer_ring_offer);
	case LAYER_OP_ACK:
	case LAYER_OP_REVOKE:
	case LAYER_OP_PACE:
	case LAYER_OP_UNPACE:
	case LAYER_OP_HELLO_ACK:
	case LAYER_OP_HELLO_NAK:
	case LAYER_OP_COLL_ABORT:
	case LAYER_OP_PING:
	case LAYER_OP_PONG:
	case LAYER_OP_RING_RELEASE:
		return len == sizeof(*hdr);
	default:
		return false;
	}
}

bool layer_hdr_is_valid(const struct layer_hdr *hdr, size_t len)
{
	/* RMA messages' segments are checked where they are read (rma/), past the header */
	return layer_hdr_fits(hdr, len) &&
	       (hdr->op != LAYER_OP_RTS ||
		layer_segs_add_up(hdr, (const struct layer_rts_seg *) (hdr + 1), 0));
}
