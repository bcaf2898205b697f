/* Unit tests of util/bufpool.c: growth, limit, reuse, alignment, chunks given back. */
#include "config.h"

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "util/bufpool.h"

static struct fi_provider test_prov = { .name = "util_test" };
struct fi_provider *util_prov = &test_prov;

#define ELEM_SIZE 40
#define CHUNK_CNT 4
#define MAX_CNT 10

struct fixture {
	struct util_bufpool pool;
	void *bufs[MAX_CNT + 1];
};

static int setup(void **state)
{
	struct fixture *f = test_calloc(1, sizeof(*f));

	if (!f)
		return -1;
	if (util_bufpool_init(&f->pool, ELEM_SIZE, 0, CHUNK_CNT, MAX_CNT)) {
		test_free(f);
		return -1;
	}
	*state = f;
	return 0;
}

/* Every test hands all its buffers back: none may be outstanding at fini. */
static int teardown(void **state)
{
	struct fixture *f = *state;

	assert_int_equal(f->pool.used_cnt, 0);
	util_bufpool_fini(&f->pool);
	assert_int_equal(f->pool.total_cnt, 0);
	test_free(f);
	return 0;
}

static void test_init_rejects_bad_arguments(void **state)
{
	struct util_bufpool pool;

	assert_int_equal(util_bufpool_init(&pool, 0, 0, 1, 0), -FI_EINVAL);
	assert_int_equal(util_bufpool_init(&pool, 8, 0, 0, 0), -FI_EINVAL);
	assert_int_equal(util_bufpool_init(&pool, 8, 24, 1, 0), -FI_EINVAL);
	assert_int_equal(util_bufpool_init(&pool, SIZE_MAX, 0, 1, 0), -FI_EINVAL);
	assert_int_equal(util_bufpool_init(&pool, 8, 8192, 1, 0), -FI_EINVAL);
}

/* A burst grows the pool; once its buffers are back, every emptied chunk but one goes. */
static void test_burst_shrinks_back(void **state)
{
	struct util_bufpool pool;
	void *bufs[64];
	int i;

	(void) state;
	assert_int_equal(util_bufpool_init(&pool, 100, 0, 8, 0), 0);
	for (i = 0; i < 64; i++) {
		bufs[i] = util_bufpool_get(&pool);
		assert_non_null(bufs[i]);
		memset(bufs[i], i, 100);
	}
	assert_int_equal(pool.total_cnt, 64);
	/* every other buffer back: no chunk is empty, none goes */
	for (i = 0; i < 64; i += 2)
		util_bufpool_put(&pool, bufs[i]);
	assert_int_equal(pool.total_cnt, 64);
	/* the rest, which still hold what was written */
	for (i = 1; i < 64; i += 2) {
		assert_int_equal(((unsigned char *) bufs[i])[99], i);
		util_bufpool_put(&pool, bufs[i]);
	}
	/* one chunk kept for the next gets */
	assert_int_equal(pool.total_cnt, 8);
	assert_int_equal(pool.used_cnt, 0);
	/* which come from it: no growth */
	for (i = 0; i < 8; i++)
		assert_non_null(bufs[i] = util_bufpool_get(&pool));
	assert_int_equal(pool.total_cnt, 8);
	for (i = 0; i < 8; i++)
		util_bufpool_put(&pool, bufs[i]);
	util_bufpool_fini(&pool);
	assert_int_equal(pool.total_cnt, 0);
}

/* A pool that goes back and forth over a chunk's edge keeps its spare chunk mapped. */
static void test_edge_does_not_thrash(void **state)
{
	struct util_bufpool pool;
	void *bufs[5], *extra;
	int i, round;

	(void) state;
	assert_int_equal(util_bufpool_init(&pool, 32, 0, 4, 0), 0);
	for (i = 0; i < 4; i++)
		bufs[i] = util_bufpool_get(&pool);
	for (round = 0; round < 10; round++) {
		extra = util_bufpool_get(&pool);
		assert_non_null(extra);
		assert_int_equal(pool.total_cnt, 8);
		util_bufpool_put(&pool, extra);
		assert_int_equal(pool.total_cnt, 8);
	}
	for (i = 0; i < 4; i++)
		util_bufpool_put(&pool, bufs[i]);
	assert_int_equal(pool.total_cnt, 4);
	util_bufpool_fini(&pool);
}

/* Buffers larger than a page, in chunks of many pages, stay aligned and apart. */
static void test_large_buffers(void **state)
{
	struct util_bufpool pool;
	void *bufs[40];
	int i;

	(void) state;
	assert_int_equal(util_bufpool_init(&pool, 16384 + 200, 64, 16, 0), 0);
	for (i = 0; i < 40; i++) {
		bufs[i] = util_bufpool_get(&pool);
		assert_non_null(bufs[i]);
		assert_int_equal((uintptr_t) bufs[i] % 64, 0);
		memset(bufs[i], i, 16384 + 200);
	}
	for (i = 0; i < 40; i++) {
		assert_int_equal(((unsigned char *) bufs[i])[0], i);
		assert_int_equal(((unsigned char *) bufs[i])[16383 + 200], i);
	}
	assert_int_equal(pool.total_cnt, 48);
	for (i = 0; i < 40; i++)
		util_bufpool_put(&pool, bufs[i]);
	assert_int_equal(pool.total_cnt, 16);
	util_bufpool_fini(&pool);
}

static void test_lazy_then_grows_by_chunk(void **state)
{
	struct fixture *f = *state;
	int i;

	assert_int_equal(f->pool.total_cnt, 0);

	f->bufs[0] = util_bufpool_get(&f->pool);
	assert_non_null(f->bufs[0]);
	assert_int_equal(f->pool.total_cnt, CHUNK_CNT);

	for (i = 1; i < CHUNK_CNT; i++)
		f->bufs[i] = util_bufpool_get(&f->pool);
	assert_int_equal(f->pool.total_cnt, CHUNK_CNT);

	f->bufs[CHUNK_CNT] = util_bufpool_get(&f->pool);
	assert_non_null(f->bufs[CHUNK_CNT]);
	assert_int_equal(f->pool.total_cnt, 2 * CHUNK_CNT);
	assert_int_equal(f->pool.used_cnt, CHUNK_CNT + 1);

	for (i = 0; i <= CHUNK_CNT; i++)
		util_bufpool_put(&f->pool, f->bufs[i]);
}

static void test_limit_stops_at_max_cnt(void **state)
{
	struct fixture *f = *state;
	int i;

	for (i = 0; i < MAX_CNT; i++) {
		f->bufs[i] = util_bufpool_get(&f->pool);
		assert_non_null(f->bufs[i]);
		/* Buffers are usable memory of at least the requested size. */
		memset(f->bufs[i], i, ELEM_SIZE);
	}
	/* The last chunk is cut to stop exactly at the limit. */
	assert_int_equal(f->pool.total_cnt, MAX_CNT);
	assert_null(util_bufpool_get(&f->pool));
	assert_int_equal(f->pool.used_cnt, MAX_CNT);

	/* Distinct buffers whose contents were not overwritten by their neighbours. */
	for (i = 0; i < MAX_CNT; i++)
		assert_int_equal(((unsigned char *) f->bufs[i])[ELEM_SIZE - 1], i);

	/* One back, one available again; still no growth. */
	util_bufpool_put(&f->pool, f->bufs[3]);
	f->bufs[3] = util_bufpool_get(&f->pool);
	assert_non_null(f->bufs[3]);
	assert_null(util_bufpool_get(&f->pool));

	for (i = 0; i < MAX_CNT; i++)
		util_bufpool_put(&f->pool, f->bufs[i]);
}

static void test_reuse_is_lifo_without_growth(void **state)
{
	struct fixture *f = *state;
	void *buf, *again;
	int i;

	for (i = 0; i < 100; i++) {
		buf = util_bufpool_get(&f->pool);
		assert_non_null(buf);
		util_bufpool_put(&f->pool, buf);
		again = util_bufpool_get(&f->pool);
		assert_ptr_equal(again, buf);
		util_bufpool_put(&f->pool, again);
	}
	assert_int_equal(f->pool.total_cnt, CHUNK_CNT);
}

static void test_alignment(void **state)
{
	struct util_bufpool pool;
	void *bufs[5];
	int i;

	assert_int_equal(util_bufpool_init(&pool, 10, 64, 2, 0), 0);
	assert_int_equal(pool.elem_size, 64);
	for (i = 0; i < 5; i++) {
		bufs[i] = util_bufpool_get(&pool);
		assert_non_null(bufs[i]);
		assert_int_equal((uintptr_t) bufs[i] % 64, 0);
	}
	assert_int_equal(pool.total_cnt, 6);
	for (i = 0; i < 5; i++)
		util_bufpool_put(&pool, bufs[i]);
	assert_int_equal(pool.used_cnt, 0);
	util_bufpool_fini(&pool);
}

static void test_unlimited_pool(void **state)
{
	struct util_bufpool pool;
	void *bufs[100];
	int i;

	assert_int_equal(util_bufpool_init(&pool, 1, 0, 3, 0), 0);
	/* Small elements still hold the free-list link and the default 16-byte alignment. */
	assert_int_equal(pool.elem_size, 16);
	for (i = 0; i < 100; i++) {
		bufs[i] = util_bufpool_get(&pool);
		assert_non_null(bufs[i]);
	}
	assert_int_equal(pool.total_cnt, 102);
	for (i = 0; i < 100; i++)
		util_bufpool_put(&pool, bufs[i]);
	assert_int_equal(pool.used_cnt, 0);
	util_bufpool_fini(&pool);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_init_rejects_bad_arguments),
		cmocka_unit_test_setup_teardown(test_lazy_then_grows_by_chunk, setup, teardown),
		cmocka_unit_test_setup_teardown(test_limit_stops_at_max_cnt, setup, teardown),
		cmocka_unit_test_setup_teardown(test_reuse_is_lifo_without_growth, setup, teardown),
		cmocka_unit_test(test_alignment),
		cmocka_unit_test(test_unlimited_pool),
		cmocka_unit_test(test_burst_shrinks_back),
		cmocka_unit_test(test_edge_does_not_thrash),
		cmocka_unit_test(test_large_buffers),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
