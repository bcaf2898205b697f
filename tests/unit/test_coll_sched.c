/*
 * Unit tests of util/coll_sched.c: every builder's schedules for groups of 1 to 64, run
 * together by a simulator that moves the messages round by round, checked against a serial
 * reference. The simulator also checks what executors rely on: a message named by (round,
 * sender) is received exactly once in the round it is sent, with the length sent; no step
 * reaches outside its buffer (exact-size allocations, so sanitizers see overruns too); a
 * barrier leaves no rank before every rank has arrived.
 */
#include "config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include <rdma/fabric.h>

#include "util/atomic.h"
#include "util/coll_sched.h"

#define MAX_N 64
#define ES sizeof(uint64_t)

enum coll { BARRIER, BROADCAST, ALLREDUCE, REDUCE, REDUCE_SCATTER, ALLGATHER, SCATTER,
	    GATHER, ALLTOALL };

struct rank_state {
	struct util_coll_sched s;
	uint8_t *buf[3];  /* SRC, DST, TMP */
	size_t len[3];
	uint64_t knows;   /* barrier: ranks this one has heard of, itself included */
	enum util_coll_algo algo;
};

struct sim_msg {
	uint32_t src, dst;
	size_t len;
	uint8_t *data;
	uint64_t knows;
	int taken;
};

static uint64_t input(uint32_t rank, size_t j)
{
	return (uint64_t) rank * 1000003u + j * 7u + 1;
}

/* What the ranks' SRC and DST hold, in elements, for coll over n ranks of count. */
static void sizes(enum coll c, uint32_t n, uint32_t rank, uint32_t root, size_t count,
		  size_t *src, size_t *dst)
{
	size_t first, blen;

	switch (c) {
	case BARRIER:
		*src = *dst = 0;
		break;
	case BROADCAST:
		*src = 0;
		*dst = count;
		break;
	case ALLREDUCE:
		*src = *dst = count;
		break;
	case REDUCE:
		*src = count;
		*dst = rank == root ? count : 0;
		break;
	case REDUCE_SCATTER:
		util_coll_block(count, n, rank, &first, &blen);
		*src = count;
		*dst = blen;
		break;
	case ALLGATHER:
		*src = count;
		*dst = count * n;
		break;
	case SCATTER:
		*src = rank == root ? count * n : 0;
		*dst = count;
		break;
	case GATHER:
		*src = count;
		*dst = rank == root ? count * n : 0;
		break;
	case ALLTOALL:
		*src = *dst = count * n;
		break;
	}
}

/* Barrier and allreduce: recursive doubling over pairs (util_coll_rd) instead. */
static bool paired;

static enum util_coll_algo build(enum coll c, struct util_coll_sched *s, uint32_t rank,
				 uint32_t n, uint32_t root, size_t count, size_t large)
{
	switch (c) {
	case BARRIER:
		return util_coll_barrier(s, rank, n, paired);
	case BROADCAST:
		return util_coll_broadcast(s, rank, n, root, count, ES, large, 3 * ES);
	case ALLREDUCE:
		return util_coll_allreduce(s, rank, n, count, ES, large, 0, paired);
	case REDUCE:
		return util_coll_reduce(s, rank, n, root, count, ES, 0);
	case REDUCE_SCATTER:
		return util_coll_reduce_scatter(s, rank, n, count, ES);
	case ALLGATHER:
		return util_coll_allgather(s, rank, n, count, ES, large);
	case SCATTER:
		return util_coll_scatter(s, rank, n, root, count, ES);
	case GATHER:
		return util_coll_gather(s, rank, n, root, count, ES);
	case ALLTOALL:
		return util_coll_alltoall(s, rank, n, count, ES);
	}
	return UTIL_COLL_ALGO_NONE;
}

/* What DST element j of rank must be once coll is done. */
static uint64_t expected(enum coll c, uint32_t n, uint32_t rank, uint32_t root, size_t count,
			 size_t j)
{
	uint64_t sum = 0;
	size_t first, blen;
	uint32_t i;

	switch (c) {
	case BROADCAST:
		return input(root, j);
	case ALLREDUCE:
	case REDUCE:
		for (i = 0; i < n; i++)
			sum += input(i, j);
		return sum;
	case REDUCE_SCATTER:
		util_coll_block(count, n, rank, &first, &blen);
		for (i = 0; i < n; i++)
			sum += input(i, first + j);
		return sum;
	case ALLGATHER:
		return input((uint32_t) (j / count), j % count);
	case SCATTER:
		return input(root, rank * count + j);
	case GATHER:
		return input((uint32_t) (j / count), j % count);
	case ALLTOALL:
		return input((uint32_t) (j / count), rank * count + j % count);
	case BARRIER:
		break;
	}
	return 0;
}

static void check_bounds(const struct rank_state *r, const struct util_coll_step *st)
{
	assert_true(st->buf <= UTIL_COLL_TMP);
	assert_true(st->off + st->len <= r->len[st->buf]);
	if (st->kind == UTIL_COLL_COPY || st->kind == UTIL_COLL_REDUCE) {
		assert_true(st->src_buf <= UTIL_COLL_TMP);
		assert_true(st->src_off + st->len <= r->len[st->src_buf]);
		assert_true(st->buf != UTIL_COLL_SRC); /* the caller's input is only read */
	}
	if (st->kind == UTIL_COLL_RECV)
		assert_true(st->buf != UTIL_COLL_SRC);
}

/* Runs one collective over n ranks and checks every rank's result. */
static void run(enum coll c, uint32_t n, uint32_t root, size_t count, size_t large)
{
	struct rank_state *r = calloc(n, sizeof(*r));
	struct sim_msg *msgs = NULL;
	size_t msg_cnt, msg_cap = 0, i, j, src_cnt, dst_cnt;
	uint16_t rounds = 0, round;
	uint32_t k;

	assert_non_null(r);
	for (k = 0; k < n; k++) {
		util_coll_sched_init(&r[k].s);
		r[k].algo = build(c, &r[k].s, k, n, root, count, large);
		assert_int_equal(r[k].s.err, 0);
		/* every rank of a group chooses alike */
		if (k)
			assert_int_equal(r[k].algo, r[0].algo);
		sizes(c, n, k, root, count, &src_cnt, &dst_cnt);
		r[k].len[UTIL_COLL_SRC] = src_cnt * ES;
		r[k].len[UTIL_COLL_DST] = dst_cnt * ES;
		r[k].len[UTIL_COLL_TMP] = r[k].s.tmp_len;
		for (i = 0; i < 3; i++) {
			r[k].buf[i] = malloc(r[k].len[i] ? r[k].len[i] : 1);
			assert_non_null(r[k].buf[i]);
			memset(r[k].buf[i], 0xee, r[k].len[i]);
		}
		for (j = 0; j < src_cnt; j++)
			((uint64_t *) r[k].buf[UTIL_COLL_SRC])[j] = input(k, j);
		if (c == BROADCAST && k == root)
			for (j = 0; j < dst_cnt; j++)
				((uint64_t *) r[k].buf[UTIL_COLL_DST])[j] = input(k, j);
		r[k].knows = (uint64_t) 1 << k;
		if (r[k].s.rounds > rounds)
			rounds = r[k].s.rounds;
	}

	for (round = 0; round < rounds; round++) {
		msg_cnt = 0;
		/* every send of the round, as it stands at the round's start */
		for (k = 0; k < n; k++) {
			for (i = 0; i < r[k].s.cnt; i++) {
				const struct util_coll_step *st = &r[k].s.steps[i];

				if (st->round != round || st->kind != UTIL_COLL_SEND)
					continue;
				check_bounds(&r[k], st);
				assert_true(st->peer < n && st->peer != k);
				for (j = 0; j < msg_cnt; j++) /* one message per link and round */
					assert_false(msgs[j].src == k && msgs[j].dst == st->peer);
				if (msg_cnt == msg_cap) {
					msg_cap = msg_cap ? 2 * msg_cap : 64;
					msgs = realloc(msgs, msg_cap * sizeof(*msgs));
					assert_non_null(msgs);
				}
				msgs[msg_cnt] = (struct sim_msg) { .src = k, .dst = st->peer,
					.len = st->len, .data = malloc(st->len ? st->len : 1),
					.knows = r[k].knows };
				memcpy(msgs[msg_cnt].data, r[k].buf[st->buf] + st->off, st->len);
				msg_cnt++;
			}
		}
		/* every receive finds its message, of the length it expects */
		for (k = 0; k < n; k++) {
			for (i = 0; i < r[k].s.cnt; i++) {
				const struct util_coll_step *st = &r[k].s.steps[i];

				if (st->round != round || st->kind != UTIL_COLL_RECV)
					continue;
				check_bounds(&r[k], st);
				for (j = 0; j < msg_cnt; j++)
					if (msgs[j].src == st->peer && msgs[j].dst == k &&
					    !msgs[j].taken)
						break;
				assert_true(j < msg_cnt);
				assert_int_equal(msgs[j].len, st->len);
				memcpy(r[k].buf[st->buf] + st->off, msgs[j].data, st->len);
				r[k].knows |= msgs[j].knows;
				msgs[j].taken = 1;
			}
		}
		for (j = 0; j < msg_cnt; j++) {
			assert_true(msgs[j].taken);
			free(msgs[j].data);
		}
		/* then the local steps, in order */
		for (k = 0; k < n; k++) {
			for (i = 0; i < r[k].s.cnt; i++) {
				const struct util_coll_step *st = &r[k].s.steps[i];
				uint8_t *dst, *src;

				if (st->round != round || st->kind == UTIL_COLL_SEND ||
				    st->kind == UTIL_COLL_RECV)
					continue;
				check_bounds(&r[k], st);
				dst = r[k].buf[st->buf] + st->off;
				src = r[k].buf[st->src_buf] + st->src_off;
				if (st->kind == UTIL_COLL_COPY)
					memmove(dst, src, st->len);
				else
					assert_int_equal(util_atomic_apply(FI_SUM, FI_UINT64, dst,
									   src, NULL, NULL,
									   st->len / ES),
							 0);
			}
		}
	}

	for (k = 0; k < n; k++) {
		sizes(c, n, k, root, count, &src_cnt, &dst_cnt);
		if (c == BARRIER)
			assert_true(r[k].knows == (n == 64 ? UINT64_MAX : ((uint64_t) 1 << n) - 1));
		for (j = 0; j < dst_cnt; j++)
			if (((uint64_t *) r[k].buf[UTIL_COLL_DST])[j] !=
			    expected(c, n, k, root, count, j))
				fail_msg("coll %d n %u root %u count %zu (%s): rank %u element %zu",
					 c, n, root, count, util_coll_algo_str(r[k].algo), k, j);
		for (i = 0; i < 3; i++)
			free(r[k].buf[i]);
		util_coll_sched_fini(&r[k].s);
	}
	free(msgs);
	free(r);
}

static const uint32_t sizes_n[] = { 1, 2, 3, 4, 5, 6, 7, 8, 9, 13, 16, 17, 31, 33, 64 };

/* Counts around the group size: none, one, fewer than n, n, more, not a multiple. */
static void each_count(enum coll c, uint32_t n, uint32_t root, size_t large)
{
	const size_t counts[] = { 0, 1, 2, n - 1 ? n - 1 : 1, n, n + 1, 3 * (size_t) n + 2, 100 };
	size_t i;

	for (i = 0; i < sizeof(counts) / sizeof(counts[0]); i++)
		run(c, n, root, counts[i], large);
}

static void each_group(enum coll c, size_t large)
{
	size_t i;
	uint32_t n;

	for (i = 0; i < sizeof(sizes_n) / sizeof(sizes_n[0]); i++) {
		n = sizes_n[i];
		each_count(c, n, 0, large);
		if (n > 1) {
			each_count(c, n, n - 1, large);
			each_count(c, n, n / 2 + (n > 2), large);
		}
	}
}

static void test_barrier(void **state)
{
	each_group(BARRIER, 0);
}

static void test_broadcast_binomial(void **state)
{
	each_group(BROADCAST, SIZE_MAX);
}

static void test_broadcast_pipelined(void **state)
{
	each_group(BROADCAST, 0);
}

static void test_allreduce_recursive_doubling(void **state)
{
	each_group(ALLREDUCE, SIZE_MAX);
}

static void test_allreduce_ring(void **state)
{
	each_group(ALLREDUCE, 0);
}

static void test_paired(void **state)
{
	paired = true;
	each_group(BARRIER, 0);
	each_group(ALLREDUCE, SIZE_MAX);
	paired = false;
}

static void test_reduce(void **state)
{
	each_group(REDUCE, 0);
}

static void test_reduce_scatter(void **state)
{
	each_group(REDUCE_SCATTER, 0);
}

static void test_allgather(void **state)
{
	each_group(ALLGATHER, 0);
}

static void test_allgather_bruck(void **state)
{
	each_group(ALLGATHER, SIZE_MAX);
}

static void test_scatter(void **state)
{
	each_group(SCATTER, 0);
}

static void test_gather(void **state)
{
	each_group(GATHER, 0);
}

static void test_alltoall(void **state)
{
	each_group(ALLTOALL, 0);
}

/* The size threshold picks the algorithm; too few elements keep the small one. */
static void test_algorithm_choice(void **state)
{
	struct util_coll_sched s;

	util_coll_sched_init(&s);
	assert_int_equal(util_coll_allreduce(&s, 0, 4, 1000, ES, 4096, 0, true),
			 UTIL_COLL_ALGO_RING);
	util_coll_sched_reset(&s);
	assert_int_equal(util_coll_allreduce(&s, 0, 4, 100, ES, 4096, 0, false),
			 UTIL_COLL_ALGO_RECURSIVE_DOUBLING);
	util_coll_sched_reset(&s);
	assert_int_equal(util_coll_allreduce(&s, 0, 8, 4, ES, 0, 0, false),
			 UTIL_COLL_ALGO_RECURSIVE_DOUBLING);
	util_coll_sched_reset(&s);
	assert_int_equal(util_coll_broadcast(&s, 1, 4, 0, 1000, ES, 4096, 1024),
			 UTIL_COLL_ALGO_PIPELINED);
	util_coll_sched_reset(&s);
	/* one segment is the whole: the tree alone */
	assert_int_equal(util_coll_broadcast(&s, 1, 4, 0, 1000, ES, 4096, 8000),
			 UTIL_COLL_ALGO_BINOMIAL);
	util_coll_sched_reset(&s);
	assert_int_equal(util_coll_broadcast(&s, 1, 4, 0, 10, ES, 4096, 1024),
			 UTIL_COLL_ALGO_BINOMIAL);
	util_coll_sched_reset(&s);
	/* allgather: by the size of the whole result */
	assert_int_equal(util_coll_allgather(&s, 2, 4, 1000, ES, 4096), UTIL_COLL_ALGO_RING);
	util_coll_sched_reset(&s);
	assert_int_equal(util_coll_allgather(&s, 2, 4, 10, ES, 4096), UTIL_COLL_ALGO_BRUCK);
	util_coll_sched_reset(&s);
	assert_int_equal(util_coll_barrier(&s, 0, 1, true), UTIL_COLL_ALGO_NONE);
	assert_int_equal(s.cnt, 0);
	/* a barrier of n takes ceil(log2 n) rounds after the local one */
	assert_int_equal(util_coll_barrier(&s, 0, 5, false), UTIL_COLL_ALGO_DISSEMINATION);
	assert_int_equal(s.rounds, 4);
	/* over pairs: a power of two from 4, one round more each way, half the messages */
	util_coll_sched_reset(&s);
	assert_int_equal(util_coll_barrier(&s, 1, 8, true), UTIL_COLL_ALGO_PAIRED);
	assert_int_equal(s.rounds, 5);
	assert_int_equal(s.cnt, 6); /* a leader: in, 2 exchanges, out */
	util_coll_sched_reset(&s);
	assert_int_equal(util_coll_barrier(&s, 0, 8, true), UTIL_COLL_ALGO_PAIRED);
	assert_int_equal(s.cnt, 2); /* the other of its pair: out, in */
	util_coll_sched_reset(&s);
	assert_int_equal(util_coll_allreduce(&s, 0, 8, 4, ES, SIZE_MAX, 0, true),
			 UTIL_COLL_ALGO_PAIRED);
	util_coll_sched_reset(&s);
	assert_int_equal(util_coll_allreduce(&s, 0, 6, 4, ES, SIZE_MAX, 0, true),
			 UTIL_COLL_ALGO_RECURSIVE_DOUBLING);
	util_coll_sched_reset(&s);
	assert_int_equal(util_coll_barrier(&s, 0, 2, true), UTIL_COLL_ALGO_DISSEMINATION);
	util_coll_sched_fini(&s);
}

static void test_block(void **state)
{
	size_t first, len, total = 0;
	uint32_t i;

	for (i = 0; i < 7; i++) {
		util_coll_block(23, 7, i, &first, &len);
		assert_int_equal(first, total);
		assert_int_equal(len, i < 2 ? 4 : 3);
		total += len;
	}
	assert_int_equal(total, 23);
	util_coll_block(0, 3, 2, &first, &len);
	assert_int_equal(len, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_block),
		cmocka_unit_test(test_algorithm_choice),
		cmocka_unit_test(test_barrier),
		cmocka_unit_test(test_broadcast_binomial),
		cmocka_unit_test(test_broadcast_pipelined),
		cmocka_unit_test(test_allreduce_recursive_doubling),
		cmocka_unit_test(test_allreduce_ring),
		cmocka_unit_test(test_paired),
		cmocka_unit_test(test_reduce),
		cmocka_unit_test(test_reduce_scatter),
		cmocka_unit_test(test_allgather),
		cmocka_unit_test(test_allgather_bruck),
		cmocka_unit_test(test_scatter),
		cmocka_unit_test(test_gather),
		cmocka_unit_test(test_alltoall),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
