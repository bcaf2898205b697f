/*
 * Collective schedules: what one member of a group does, step by step, for one collective
 * call (barrier, broadcast, allreduce, allgather, reduce, reduce-scatter, scatter, gather,
 * alltoall), whatever moves the bytes. A builder appends the steps of one algorithm for one
 * rank; an executor (the provider's, or the simulator of the unit tests) runs them.
 *
 * Steps come in rounds. A round posts all its sends and receives at once; its local steps
 * (copies, reductions) run once its receives are in, in order; the next round starts when
 * every step of this one is done (its sends too, so a later round may overwrite what they
 * read). Within a round a rank sends at most one message to a peer and receives at most
 * one from a peer, so a message is named by (round, sender) and both ends of a link agree
 * on the round: the executor tags messages with it.
 *
 * Buffers are named, offsets and lengths are bytes: SRC (the caller's input, only read), DST
 * (the caller's output) and TMP (scratch of tmp_len bytes the executor provides). Zero-byte
 * blocks are left out on both sides alike (they compute the same partition), except the
 * barrier's messages, which carry nothing but their arrival.
 */
#ifndef UTIL_COLL_SCHED_H
#define UTIL_COLL_SCHED_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum util_coll_buf {
	UTIL_COLL_SRC,
	UTIL_COLL_DST,
	UTIL_COLL_TMP,
};

enum util_coll_kind {
	UTIL_COLL_SEND,   /* buf[off, off + len) to peer */
	UTIL_COLL_RECV,   /* from peer into buf[off, off + len) */
	UTIL_COLL_COPY,   /* buf[off...] = src_buf[src_off...], len bytes */
	UTIL_COLL_REDUCE, /* buf[off...] = op(buf[off...], src_buf[src_off...]), len bytes */
};

struct util_coll_step {
	uint8_t kind;	 /* enum util_coll_kind */
	uint8_t buf;	 /* enum util_coll_buf: what is sent, received into, or written */
	uint8_t src_buf; /* COPY, REDUCE: what is read */
	uint16_t round;
	uint32_t peer;	 /* SEND, RECV: group rank */
	size_t off, src_off, len;
};

struct util_coll_sched {
	struct util_coll_step *steps;
	size_t cnt, cap;
	size_t tmp_len;	 /* scratch the steps use */
	uint16_t rounds; /* rounds the steps span (the last one's number + 1) */
	int err;	 /* -FI_ENOMEM once an append failed; the schedule is then unusable */
};

/* Algorithm choices, by size and group (util_coll_*_algo report them). */
enum util_coll_algo {
	UTIL_COLL_ALGO_NONE,	       /* nothing to do (one member, no data) */
	UTIL_COLL_ALGO_DISSEMINATION,  /* barrier: ceil(log2 n) rounds */
	UTIL_COLL_ALGO_RECURSIVE_DOUBLING, /* allreduce: log2 rounds, whole vector each */
	UTIL_COLL_ALGO_RING,	       /* allreduce: reduce-scatter + allgather rings;
					* allgather, reduce-scatter: a ring */
	UTIL_COLL_ALGO_BINOMIAL,       /* broadcast, reduce: a binomial tree from/to root */
	UTIL_COLL_ALGO_PIPELINED,      /* broadcast: a binomial tree, in segments */
	UTIL_COLL_ALGO_LINEAR,	       /* scatter, gather: root and each member directly */
	UTIL_COLL_ALGO_PAIRWISE,       /* alltoall: n - 1 exchanges */
	UTIL_COLL_ALGO_BRUCK,	       /* allgather: ceil(log2 n) rounds of doubling runs */
	UTIL_COLL_ALGO_PAIRED,	       /* barrier, allreduce: recursive doubling among the
					* leaders of pairs, log2 n + 1 rounds, half the
					* messages of recursive doubling or dissemination */
};

const char *util_coll_algo_str(enum util_coll_algo algo);

void util_coll_sched_init(struct util_coll_sched *s);
void util_coll_sched_fini(struct util_coll_sched *s);
/* Empties s for another build, keeping its memory. */
void util_coll_sched_reset(struct util_coll_sched *s);

/*
 * The block of count elements that member i of n holds when count is shared out as evenly
 * as possible (the first count % n members get one more): its first element and length.
 */
void util_coll_block(size_t count, uint32_t n, uint32_t i, size_t *first, size_t *len);

/*
 * Builders: each appends rank's steps (rank < n, n >= 1) and returns the algorithm used;
 * counts are elements of esize bytes. Which algorithm: large_bytes is the size from which
 * the bandwidth-optimal one is used (allreduce: ring; broadcast: pipelined segments;
 * allgather: ring instead of Bruck's).
 */
/*
 * Barrier: DST, SRC unused. Dissemination (ceil(log2 n) rounds, n messages each); with paired
 * and n >= 4, recursive doubling over pairs (one round more, about half the messages).
 */
enum util_coll_algo util_coll_barrier(struct util_coll_sched *s, uint32_t rank, uint32_t n,
				      bool paired);
/*
 * Broadcast of count elements of DST from root (DST is the input at root): a binomial tree,
 * its places interleaved (util_coll_place_rank); from large_bytes in segments of seg_bytes
 * (rounded down to whole elements), pipelined down the tree.
 */
enum util_coll_algo util_coll_broadcast(struct util_coll_sched *s, uint32_t rank, uint32_t n,
					uint32_t root, size_t count, size_t esize,
					size_t large_bytes, size_t seg_bytes);
/*
 * Allreduce: DST = op over members of SRC (count elements; SRC may be DST: in place). Below
 * large_bytes recursive doubling (a non-power of two folds its extra members in pairs
 * first), with paired over pairs of every member when n >= 4 is a power of two.
 */
enum util_coll_algo util_coll_allreduce(struct util_coll_sched *s, uint32_t rank, uint32_t n,
					size_t count, size_t esize, size_t large_bytes,
					int in_place, bool paired);
/* Reduce to root: root's DST = op over members of SRC; others have no DST. */
enum util_coll_algo util_coll_reduce(struct util_coll_sched *s, uint32_t rank, uint32_t n,
				     uint32_t root, size_t count, size_t esize, int in_place);
/* Reduce-scatter: DST (member i's block of count, util_coll_block) = op over SRC. */
enum util_coll_algo util_coll_reduce_scatter(struct util_coll_sched *s, uint32_t rank,
					     uint32_t n, size_t count, size_t esize);
/* Allgather: DST (n blocks of count) block i = member i's SRC (count elements); Bruck's
 * below large_bytes of result (fewer messages), a ring from there (neighbours only). */
enum util_coll_algo util_coll_allgather(struct util_coll_sched *s, uint32_t rank, uint32_t n,
					size_t count, size_t esize, size_t large_bytes);
/* Scatter from root: DST (count) = block rank of root's SRC (n blocks of count). */
enum util_coll_algo util_coll_scatter(struct util_coll_sched *s, uint32_t rank, uint32_t n,
				      uint32_t root, size_t count, size_t esize);
/* Gather to root: root's DST (n blocks of count) block i = member i's SRC (count). */
enum util_coll_algo util_coll_gather(struct util_coll_sched *s, uint32_t rank, uint32_t n,
				     uint32_t root, size_t count, size_t esize);
/* Alltoall: DST block j = member j's SRC block rank (n blocks of count each side). */
enum util_coll_algo util_coll_alltoall(struct util_coll_sched *s, uint32_t rank, uint32_t n,
				       size_t count, size_t esize);

#endif /* UTIL_COLL_SCHED_H */
