/*
 * Collective schedules (coll_sched.h). Every builder numbers its rounds from the group size
 * alone, never from what a rank happens to do, so that both ends of every link agree on the
 * round of the message: round 0 holds local preparation (a copy of the input), then each
 * phase takes a fixed run of rounds. A rank with nothing to do in a round just passes it.
 */
#include "config.h"

#include <stdlib.h>

#include <rdma/fi_errno.h>

#include "util/coll_sched.h"
#include "util/util.h"

const char *util_coll_algo_str(enum util_coll_algo algo)
{
	switch (algo) {
	case UTIL_COLL_ALGO_NONE:
		return "none";
	case UTIL_COLL_ALGO_DISSEMINATION:
		return "dissemination";
	case UTIL_COLL_ALGO_RECURSIVE_DOUBLING:
		return "recursive doubling";
	case UTIL_COLL_ALGO_RING:
		return "ring";
	case UTIL_COLL_ALGO_BINOMIAL:
		return "binomial tree";
	case UTIL_COLL_ALGO_PIPELINED:
		return "pipelined binomial tree";
	case UTIL_COLL_ALGO_LINEAR:
		return "linear";
	case UTIL_COLL_ALGO_PAIRWISE:
		return "pairwise exchange";
	case UTIL_COLL_ALGO_BRUCK:
		return "Bruck";
	case UTIL_COLL_ALGO_PAIRED:
		return "recursive doubling over pairs";
	}
	return "?";
}

void util_coll_sched_init(struct util_coll_sched *s)
{
	*s = (struct util_coll_sched) { 0 };
}

void util_coll_sched_fini(struct util_coll_sched *s)
{
	free(s->steps);
	util_coll_sched_init(s);
}

void util_coll_sched_reset(struct util_coll_sched *s)
{
	s->cnt = 0;
	s->tmp_len = 0;
	s->rounds = 0;
	s->err = 0;
}

void util_coll_block(size_t count, uint32_t n, uint32_t i, size_t *first, size_t *len)
{
	size_t base = count / n, extra = count % n;

	*first = i * base + UTIL_MIN((size_t) i, extra);
	*len = base + (i < extra);
}

/* ceil(log2 n): the rounds of a dissemination or binomial phase. */
static uint32_t util_coll_log2_ceil(uint32_t n)
{
	uint32_t k = 0;

	while (((uint64_t) 1 << k) < n)
		k++;
	return k;
}

static void util_coll_add(struct util_coll_sched *s, const struct util_coll_step *step)
{
	struct util_coll_step *grown;
	size_t cap;

	if (s->err)
		return;
	if (s->cnt == s->cap) {
		cap = s->cap ? 2 * s->cap : 16;
		grown = realloc(s->steps, cap * sizeof(*grown));
		if (!grown) {
			s->err = -FI_ENOMEM;
			return;
		}
		s->steps = grown;
		s->cap = cap;
	}
	s->steps[s->cnt++] = *step;
	if (step->round >= s->rounds)
		s->rounds = step->round + 1;
}

/* Messages and local steps of no bytes are left out (both ends know the length). */
static void util_coll_send(struct util_coll_sched *s, uint16_t round, uint32_t peer,
			   enum util_coll_buf buf, size_t off, size_t len)
{
	if (len)
		util_coll_add(s, &(struct util_coll_step) { .kind = UTIL_COLL_SEND, .buf = buf,
			      .round = round, .peer = peer, .off = off, .len = len });
}

static void util_coll_recv(struct util_coll_sched *s, uint16_t round, uint32_t peer,
			   enum util_coll_buf buf, size_t off, size_t len)
{
	if (len)
		util_coll_add(s, &(struct util_coll_step) { .kind = UTIL_COLL_RECV, .buf = buf,
			      .round = round, .peer = peer, .off = off, .len = len });
}

static void util_coll_local(struct util_coll_sched *s, enum util_coll_kind kind,
			    uint16_t round, enum util_coll_buf buf, size_t off,
			    enum util_coll_buf src_buf, size_t src_off, size_t len)
{
	if (!len || (kind == UTIL_COLL_COPY && buf == src_buf && off == src_off))
		return;
	util_coll_add(s, &(struct util_coll_step) { .kind = kind, .buf = buf,
		      .src_buf = src_buf, .round = round, .off = off, .src_off = src_off,
		      .len = len });
}

static void util_coll_need_tmp(struct util_coll_sched *s, size_t len)
{
	s->tmp_len = UTIL_MAX(s->tmp_len, len);
}

static void util_coll_rd(struct util_coll_sched *s, uint32_t rank, uint32_t n, size_t len,
			 bool paired);

enum util_coll_algo util_coll_barrier(struct util_coll_sched *s, uint32_t rank, uint32_t n,
				      bool paired)
{
	uint32_t k, rounds = util_coll_log2_ceil(n), dist;

	if (n == 1)
		return UTIL_COLL_ALGO_NONE;
	if (paired && n >= 4) {
		/* recursive doubling over pairs: messages of no bytes (util_coll_rd) */
		util_coll_rd(s, rank, n, 0, true);
		return UTIL_COLL_ALGO_PAIRED;
	}
	/* round k: tell rank + 2^k, hear from rank - 2^k; messages carry no bytes */
	for (k = 0; k < rounds; k++) {
		dist = (uint32_t) 1 << k;
		util_coll_add(s, &(struct util_coll_step) { .kind = UTIL_COLL_SEND,
			      .buf = UTIL_COLL_DST, .round = 1 + k, .peer = (rank + dist) % n });
		util_coll_add(s, &(struct util_coll_step) { .kind = UTIL_COLL_RECV,
			      .buf = UTIL_COLL_DST, .round = 1 + k,
			      .peer = (rank + n - dist) % n });
	}
	return UTIL_COLL_ALGO_DISSEMINATION;
}

/* Bytes from block a to block b (b excluded) of count elements shared out over n. */
static void util_coll_blocks(size_t count, uint32_t n, uint32_t a, uint32_t b, size_t esize,
			     size_t *off, size_t *len)
{
	size_t first, last, blen;

	util_coll_block(count, n, a, &first, &blen);
	if (b < n)
		util_coll_block(count, n, b, &last, &blen);
	else
		last = count;
	*off = first * esize;
	*len = (last - first) * esize;
}

/*
 * A binomial tree's places: the inner nodes are the places with low bits clear (every other
 * place forwards), so numbering places by rank order would put every forwarding member on
 * one parity of rank. Places are interleaved instead: place p < ceil(n / 2) is the member 2p
 * after the root, the others the odd ones, so that members placed round robin on cores (rank
 * r on core r mod c, as mpirun and fabtests' runners place them) share the forwarding, and
 * members placed in blocks are no worse off. Any permutation keeps the tree's shape.
 */
static uint32_t util_coll_place_rank(uint32_t place, uint32_t n, uint32_t root, bool interleave)
{
	uint32_t half = (n + 1) / 2;

	if (interleave)
		place = place < half ? 2 * place : 2 * (place - half) + 1;
	return (place + root) % n;
}

static uint32_t util_coll_rank_place(uint32_t rank, uint32_t n, uint32_t root, bool interleave)
{
	uint32_t rel = (rank + n - root) % n;

	if (!interleave)
		return rel;
	return rel % 2 ? rel / 2 + (n + 1) / 2 : rel / 2;
}

/*
 * Binomial broadcast of DST (len bytes) from root over the interleaved places, in segments of
 * at most seg bytes: segment i runs down the tree i rounds behind the first, so that a member
 * forwards one segment while the next arrives. Rounds 1 .. ceil(log2 n) + segments - 1.
 */
static void util_coll_binomial_down(struct util_coll_sched *s, uint32_t rank, uint32_t n,
				    uint32_t root, size_t len, size_t seg)
{
	uint32_t k = util_coll_log2_ceil(n), vr = util_coll_rank_place(rank, n, root, true);
	uint32_t low = vr ? vr & -vr : (uint32_t) 1 << k; /* the subtree this rank heads */
	uint32_t level = util_coll_log2_ceil(low), mask, child, lv; /* low: a power of two */
	size_t off, cnt;
	uint32_t i;

	for (i = 0, off = 0; off < len; i++, off += seg) {
		cnt = UTIL_MIN(seg, len - off);
		if (vr)
			util_coll_recv(s, (uint16_t) (i + k - level),
				       util_coll_place_rank(vr - low, n, root, true), UTIL_COLL_DST, off,
				       cnt);
		for (mask = low >> 1, lv = level; mask; mask >>= 1) {
			lv--;
			child = vr + mask;
			if (child < n)
				util_coll_send(s, (uint16_t) (i + k - lv),
					       util_coll_place_rank(child, n, root, true),
					       UTIL_COLL_DST, off, cnt);
		}
	}
}

/*
 * Ring allgather of the n blocks of count elements (shared out over n, util_coll_block) in
 * DST, in the ranks relative to root: block j starts at rank j. Rounds base .. base + n - 2.
 */
static void util_coll_ring_allgather(struct util_coll_sched *s, uint32_t rank, uint32_t n,
				     uint32_t root, size_t count, size_t esize, uint16_t base)
{
	uint32_t vr = (rank + n - root) % n, k;
	uint32_t right = (rank + 1) % n, left = (rank + n - 1) % n;
	size_t off, len;

	for (k = 0; k + 1 < n; k++) {
		util_coll_blocks(count, n, (vr + n - k) % n, (vr + n - k) % n + 1, esize, &off,
				 &len);
		util_coll_send(s, base + k, right, UTIL_COLL_DST, off, len);
		util_coll_blocks(count, n, (vr + n - k - 1) % n, (vr + n - k - 1) % n + 1, esize,
				 &off, &len);
		util_coll_recv(s, base + k, left, UTIL_COLL_DST, off, len);
	}
}

enum util_coll_algo util_coll_broadcast(struct util_coll_sched *s, uint32_t rank, uint32_t n,
					uint32_t root, size_t count, size_t esize,
					size_t large_bytes, size_t seg_bytes)
{
	size_t len = count * esize, seg = UTIL_MAX(seg_bytes / esize, 1) * esize;

	if (n == 1 || !count)
		return UTIL_COLL_ALGO_NONE;
	if (len < large_bytes || seg >= len) {
		util_coll_binomial_down(s, rank, n, root, len, len);
		return UTIL_COLL_ALGO_BINOMIAL;
	}
	util_coll_binomial_down(s, rank, n, root, len, seg);
	return UTIL_COLL_ALGO_PIPELINED;
}

/*
 * Recursive doubling of DST (len bytes; a barrier's messages carry nothing) among p
 * participants, p a power of two: the largest one not above n, or with paired (n itself a
 * power of two, n >= 4) n / 2. The first 2 * (n - p) members pair up, 2j with 2j + 1: one of
 * each pair hands its vector to the other in round 1 (reduced into DST from TMP) and gets
 * the result back in the last round; the leaders and the unpaired members exchange whole
 * vectors log2(p) times in between. Pairing every member halves the messages for one more
 * round each way: where members share cores, the messages are what costs. Leaders alternate
 * between the pair's odd and even member (1, 2, 5, 6...), so that with members placed round
 * robin on two cores or in blocks, each core leads as often.
 */
static uint32_t util_coll_rd_leader(uint32_t pair)
{
	return 2 * pair + 1 - pair % 2;
}

static void util_coll_rd_msg(struct util_coll_sched *s, enum util_coll_kind kind, uint16_t round,
			     uint32_t peer, enum util_coll_buf buf, size_t len, bool is_barrier)
{
	if (is_barrier)
		util_coll_add(s, &(struct util_coll_step) { .kind = kind, .buf = UTIL_COLL_DST,
			      .round = round, .peer = peer });
	else if (kind == UTIL_COLL_SEND)
		util_coll_send(s, round, peer, buf, 0, len);
	else
		util_coll_recv(s, round, peer, buf, 0, len);
}

static void util_coll_rd(struct util_coll_sched *s, uint32_t rank, uint32_t n, size_t len,
			 bool paired)
{
	bool is_barrier = !len;
	uint32_t p, extra, levels, vr, k, peer, pair = rank / 2;

	for (p = 1; 2 * p <= n; p *= 2)
		;
	if (paired && p == n && n >= 4)
		p = n / 2;
	extra = n - p;
	levels = util_coll_log2_ceil(p);
	if (rank < 2 * extra) {
		peer = rank ^ 1;
		if (rank != util_coll_rd_leader(pair)) {
			util_coll_rd_msg(s, UTIL_COLL_SEND, 1, peer, UTIL_COLL_DST, len, is_barrier);
			util_coll_rd_msg(s, UTIL_COLL_RECV, (uint16_t) (2 + levels), peer,
					 UTIL_COLL_DST, len, is_barrier);
			return;
		}
		util_coll_rd_msg(s, UTIL_COLL_RECV, 1, peer, UTIL_COLL_TMP, len, is_barrier);
		util_coll_local(s, UTIL_COLL_REDUCE, 1, UTIL_COLL_DST, 0, UTIL_COLL_TMP, 0, len);
	}
	/* vr: the place among the p participants, the pairs' leaders first */
	vr = rank < 2 * extra ? pair : rank - extra;
	for (k = 0; k < levels; k++) {
		uint32_t other = vr ^ ((uint32_t) 1 << k);

		peer = other < extra ? util_coll_rd_leader(other) : other + extra;
		util_coll_rd_msg(s, UTIL_COLL_SEND, (uint16_t) (2 + k), peer, UTIL_COLL_DST, len,
				 is_barrier);
		util_coll_rd_msg(s, UTIL_COLL_RECV, (uint16_t) (2 + k), peer, UTIL_COLL_TMP, len,
				 is_barrier);
		util_coll_local(s, UTIL_COLL_REDUCE, (uint16_t) (2 + k), UTIL_COLL_DST, 0,
				UTIL_COLL_TMP, 0, len);
	}
	if (rank < 2 * extra)
		util_coll_rd_msg(s, UTIL_COLL_SEND, (uint16_t) (2 + levels), rank ^ 1, UTIL_COLL_DST,
				 len, is_barrier);
}

enum util_coll_algo util_coll_allreduce(struct util_coll_sched *s, uint32_t rank, uint32_t n,
					size_t count, size_t esize, size_t large_bytes,
					int in_place, bool paired)
{
	size_t len = count * esize, off, blen;
	uint32_t k, right, left;

	if (!in_place)
		util_coll_local(s, UTIL_COLL_COPY, 0, UTIL_COLL_DST, 0, UTIL_COLL_SRC, 0, len);
	if (n == 1 || !count)
		return UTIL_COLL_ALGO_NONE;

	if (len >= large_bytes && count >= n) {
		/* reduce-scatter: after round k, DST block rank - k - 1 holds k + 2 inputs */
		right = (rank + 1) % n;
		left = (rank + n - 1) % n;
		for (k = 0; k + 1 < n; k++) {
			util_coll_blocks(count, n, (rank + n - k) % n, (rank + n - k) % n + 1,
					 esize, &off, &blen);
			util_coll_send(s, 1 + k, right, UTIL_COLL_DST, off, blen);
			util_coll_blocks(count, n, (rank + 2 * n - k - 1) % n,
					 (rank + 2 * n - k - 1) % n + 1, esize, &off, &blen);
			util_coll_need_tmp(s, blen);
			util_coll_recv(s, 1 + k, left, UTIL_COLL_TMP, 0, blen);
			util_coll_local(s, UTIL_COLL_REDUCE, 1 + k, UTIL_COLL_DST, off,
					UTIL_COLL_TMP, 0, blen);
		}
		/* rank now holds block rank + 1 whole: the ring passes the blocks round */
		util_coll_ring_allgather(s, rank, n, n - 1, count, esize, (uint16_t) n);
		return UTIL_COLL_ALGO_RING;
	}

	util_coll_need_tmp(s, len);
	util_coll_rd(s, rank, n, len, paired);
	if (paired && n >= 4 && !(n & (n - 1)))
		return UTIL_COLL_ALGO_PAIRED;
	return UTIL_COLL_ALGO_RECURSIVE_DOUBLING;
}

enum util_coll_algo util_coll_reduce(struct util_coll_sched *s, uint32_t rank, uint32_t n,
				     uint32_t root, size_t count, size_t esize, int in_place)
{
	uint32_t vr = util_coll_rank_place(rank, n, root, true), k, mask;
	size_t len = count * esize, scratch = rank == root ? 0 : len;
	enum util_coll_buf acc = rank == root ? UTIL_COLL_DST : UTIL_COLL_TMP;

	/* the partial result builds up in DST at root, in TMP elsewhere; arrivals go after it */
	if (!(rank == root && in_place))
		util_coll_local(s, UTIL_COLL_COPY, 0, acc, 0, UTIL_COLL_SRC, 0, len);
	if (n == 1 || !count)
		return UTIL_COLL_ALGO_NONE;
	util_coll_need_tmp(s, scratch + len);
	for (k = 0; ((uint64_t) 1 << k) < n; k++) {
		mask = (uint32_t) 1 << k;
		if (vr & mask) {
			util_coll_send(s, 1 + k, util_coll_place_rank(vr - mask, n, root, true), acc,
				       0, len);
			break;
		}
		if (vr + mask < n) {
			util_coll_recv(s, 1 + k, util_coll_place_rank(vr + mask, n, root, true),
				       UTIL_COLL_TMP, scratch, len);
			util_coll_local(s, UTIL_COLL_REDUCE, 1 + k, acc, 0, UTIL_COLL_TMP,
					scratch, len);
		}
	}
	return UTIL_COLL_ALGO_BINOMIAL;
}

enum util_coll_algo util_coll_reduce_scatter(struct util_coll_sched *s, uint32_t rank,
					     uint32_t n, size_t count, size_t esize)
{
	uint32_t right = (rank + 1) % n, left = (rank + n - 1) % n, k, blk;
	size_t len = count * esize, off, blen, max_blen;

	/* the whole vector builds up in TMP, arrivals after it; the rank's block goes out */
	util_coll_blocks(count, n, 0, 1, esize, &off, &max_blen);
	util_coll_need_tmp(s, len + (n > 1 ? max_blen : 0));
	util_coll_local(s, UTIL_COLL_COPY, 0, UTIL_COLL_TMP, 0, UTIL_COLL_SRC, 0, len);
	for (k = 0; k + 1 < n; k++) {
		blk = (rank + 2 * n - k - 1) % n;
		util_coll_blocks(count, n, blk, blk + 1, esize, &off, &blen);
		util_coll_send(s, 1 + k, right, UTIL_COLL_TMP, off, blen);
		blk = (rank + 2 * n - k - 2) % n;
		util_coll_blocks(count, n, blk, blk + 1, esize, &off, &blen);
		util_coll_recv(s, 1 + k, left, UTIL_COLL_TMP, len, blen);
		util_coll_local(s, UTIL_COLL_REDUCE, 1 + k, UTIL_COLL_TMP, off, UTIL_COLL_TMP,
				len, blen);
	}
	util_coll_blocks(count, n, rank, rank + 1, esize, &off, &blen);
	util_coll_local(s, UTIL_COLL_COPY, (uint16_t) n, UTIL_COLL_DST, 0, UTIL_COLL_TMP, off,
			blen);
	return n == 1 ? UTIL_COLL_ALGO_NONE : UTIL_COLL_ALGO_RING;
}

/*
 * Bruck's allgather: TMP holds the blocks rotated by rank (its block j is member rank + j's).
 * Round 1 + k sends the first min(2^k, n - 2^k) blocks gathered so far to rank - 2^k and
 * receives as many from rank + 2^k behind them: ceil(log2 n) messages instead of n - 1, the
 * same bytes; a final copy puts the blocks in place.
 */
static void util_coll_bruck_allgather(struct util_coll_sched *s, uint32_t rank, uint32_t n,
				      size_t len)
{
	uint32_t rounds = util_coll_log2_ceil(n), k, dist, cnt;

	util_coll_need_tmp(s, n * len);
	util_coll_local(s, UTIL_COLL_COPY, 0, UTIL_COLL_TMP, 0, UTIL_COLL_SRC, 0, len);
	for (k = 0; k < rounds; k++) {
		dist = (uint32_t) 1 << k;
		cnt = UTIL_MIN(dist, n - dist);
		util_coll_send(s, 1 + k, (rank + n - dist) % n, UTIL_COLL_TMP, 0, cnt * len);
		util_coll_recv(s, 1 + k, (rank + dist) % n, UTIL_COLL_TMP, dist * len, cnt * len);
	}
	/* TMP block j is member (rank + j) % n's: two runs */
	util_coll_local(s, UTIL_COLL_COPY, (uint16_t) rounds, UTIL_COLL_DST, rank * len,
			UTIL_COLL_TMP, 0, (n - rank) * len);
	util_coll_local(s, UTIL_COLL_COPY, (uint16_t) rounds, UTIL_COLL_DST, 0, UTIL_COLL_TMP,
			(n - rank) * len, rank * len);
}

enum util_coll_algo util_coll_allgather(struct util_coll_sched *s, uint32_t rank, uint32_t n,
					size_t count, size_t esize, size_t large_bytes)
{
	size_t len = count * esize;

	if (n == 1 || !count) {
		util_coll_local(s, UTIL_COLL_COPY, 0, UTIL_COLL_DST, rank * len, UTIL_COLL_SRC, 0,
				len);
		return UTIL_COLL_ALGO_NONE;
	}
	if (n * len < large_bytes) {
		util_coll_bruck_allgather(s, rank, n, len);
		return UTIL_COLL_ALGO_BRUCK;
	}
	util_coll_local(s, UTIL_COLL_COPY, 0, UTIL_COLL_DST, rank * len, UTIL_COLL_SRC, 0, len);
	/* n blocks of count each: the same as count * n shared out over n */
	util_coll_ring_allgather(s, rank, n, 0, count * n, esize, 1);
	return UTIL_COLL_ALGO_RING;
}

/* Root and each member directly: block i of root's n goes to (scatter) or comes from
 * (gather) member i. */
static enum util_coll_algo util_coll_linear(struct util_coll_sched *s, uint32_t rank,
					    uint32_t n, uint32_t root, size_t count, size_t esize,
					    bool gather)
{
	size_t len = count * esize;
	uint32_t i;

	if (rank != root) {
		if (gather)
			util_coll_send(s, 1, root, UTIL_COLL_SRC, 0, len);
		else
			util_coll_recv(s, 1, root, UTIL_COLL_DST, 0, len);
		return count ? UTIL_COLL_ALGO_LINEAR : UTIL_COLL_ALGO_NONE;
	}
	util_coll_local(s, UTIL_COLL_COPY, 0, UTIL_COLL_DST, gather ? root * len : 0,
			UTIL_COLL_SRC, gather ? 0 : root * len, len);
	for (i = 0; i < n; i++) {
		if (i == root)
			continue;
		if (gather)
			util_coll_recv(s, 1, i, UTIL_COLL_DST, i * len, len);
		else
			util_coll_send(s, 1, i, UTIL_COLL_SRC, i * len, len);
	}
	return n == 1 || !count ? UTIL_COLL_ALGO_NONE : UTIL_COLL_ALGO_LINEAR;
}

enum util_coll_algo util_coll_scatter(struct util_coll_sched *s, uint32_t rank, uint32_t n,
				      uint32_t root, size_t count, size_t esize)
{
	return util_coll_linear(s, rank, n, root, count, esize, false);
}

enum util_coll_algo util_coll_gather(struct util_coll_sched *s, uint32_t rank, uint32_t n,
				     uint32_t root, size_t count, size_t esize)
{
	return util_coll_linear(s, rank, n, root, count, esize, true);
}

enum util_coll_algo util_coll_alltoall(struct util_coll_sched *s, uint32_t rank, uint32_t n,
				       size_t count, size_t esize)
{
	size_t len = count * esize;
	uint32_t k, to, from;

	util_coll_local(s, UTIL_COLL_COPY, 0, UTIL_COLL_DST, rank * len, UTIL_COLL_SRC,
			rank * len, len);
	if (n == 1 || !count)
		return UTIL_COLL_ALGO_NONE;
	for (k = 1; k < n; k++) {
		to = (rank + k) % n;
		from = (rank + n - k) % n;
		util_coll_send(s, (uint16_t) k, to, UTIL_COLL_SRC, to * len, len);
		util_coll_recv(s, (uint16_t) k, from, UTIL_COLL_DST, from * len, len);
	}
	return UTIL_COLL_ALGO_PAIRWISE;
}
