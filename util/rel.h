/*
 * Arithmetic of a reliable transport over unreliable datagrams, apart from any I/O so that
 * unit tests drive it: 32-bit sequence numbers that wrap, the selective-acknowledgement
 * bitmap a receiver reports, the round-trip estimator and retransmission timeout of
 * RFC 6298 (Karn's rule is the caller's: sample only packets sent once), and an AIMD
 * congestion window counted in packets (slow start, then one packet per window; halved on a
 * loss, back to its floor on a timeout).
 */
#ifndef UTIL_REL_H
#define UTIL_REL_H

#include <stdbool.h>
#include <stdint.h>

/* a comes before b (modulo 2^32: the two are less than 2^31 apart). */
static inline bool util_seq_before(uint32_t a, uint32_t b)
{
	return (int32_t) (a - b) < 0;
}

/* Packets after a cumulative acknowledgement the bitmap can report. */
#define UTIL_SACK_BITS 32

/*
 * A receiver's acknowledgement: every packet before ack arrived; bit i of sack says that
 * packet ack + 1 + i arrived too (packet ack itself is the first missing one).
 */
struct util_ack {
	uint32_t ack;
	uint32_t sack;
};

/* Whether the acknowledgement says that packet seq arrived. */
static inline bool util_ack_covers(const struct util_ack *a, uint32_t seq)
{
	uint32_t off;

	if (util_seq_before(seq, a->ack))
		return true;
	off = seq - a->ack;
	return off >= 1 && off <= UTIL_SACK_BITS && (a->sack >> (off - 1)) & 1;
}

/* Packets the acknowledgement reports beyond its cumulative point. */
static inline unsigned util_ack_sacked(const struct util_ack *a)
{
	return (unsigned) __builtin_popcount(a->sack);
}

/* The highest packet the acknowledgement reports, or ack - 1 when none beyond. */
static inline uint32_t util_ack_highest(const struct util_ack *a)
{
	return a->sack ? a->ack + (uint32_t) (32 - __builtin_clz(a->sack)) : a->ack - 1;
}

/* Round trips and the retransmission timeout, in microseconds. */
struct util_rtt {
	uint64_t srtt;       /* smoothed round trip; 0 before the first sample */
	uint64_t rttvar;     /* its mean deviation */
	uint64_t rto;        /* the timeout, backed off by util_rtt_backoff */
	uint64_t rto_min;
	uint64_t rto_max;
};

void util_rtt_init(struct util_rtt *rtt, uint64_t rto_initial, uint64_t rto_min,
		   uint64_t rto_max);
/* A round trip measured on a packet sent once: srtt, rttvar and rto follow (RFC 6298). */
void util_rtt_sample(struct util_rtt *rtt, uint64_t sample);
/* A timeout expired: the next waits twice as long, up to rto_max. */
void util_rtt_backoff(struct util_rtt *rtt);

/* A congestion window in packets (AIMD). */
struct util_cwnd {
	uint32_t cwnd;       /* packets that may be unacknowledged */
	uint32_t ssthresh;   /* slow start up to here, then one more per window */
	uint32_t acked;      /* packets acknowledged toward the next increase */
	uint32_t min;        /* floor after a timeout */
	uint32_t max;        /* ceiling: the receiver's window */
};

void util_cwnd_init(struct util_cwnd *cw, uint32_t initial, uint32_t min, uint32_t max);
/* n packets newly acknowledged. */
void util_cwnd_acked(struct util_cwnd *cw, uint32_t n);
/* A loss found by later packets' acknowledgements: the window halves (once per window;
 * the caller decides when). */
void util_cwnd_loss(struct util_cwnd *cw);
/* A retransmission timeout: back to the floor, slow start up to half of before. */
void util_cwnd_timeout(struct util_cwnd *cw);

#endif /* UTIL_REL_H */
