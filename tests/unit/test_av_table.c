/*
 * Unit tests of util/av_table: index allocation (insertion order, lowest free index reused),
 * generations, reverse lookup with duplicates and with exact (zero-tailed) keys, keys with
 * equal hashes and keys past their home cache line (the inline lookup's ways out), growth and
 * reservation, tables in a region the caller provides (shared memory of named AVs) and their
 * repair after a writer died (test_av_table_random.c: lock-free readers against a writer,
 * random runs against a model).
 */
#include "config.h"

#include "tests/unit/av_table_fixture.h"

static void test_init_args(void **state)
{
	struct util_av_table table;

	assert_int_equal(util_av_table_init(&table, 0, 8), -FI_EINVAL);
	/* a huge hint is not preallocated: the table still opens */
	assert_int_equal(util_av_table_init(&table, ADDRLEN, SIZE_MAX), 0);
	assert_int_equal(insert_value(&table, 1), 0);
	util_av_table_fini(&table);
}

static void test_empty(void **state)
{
	struct util_av_table *table = *state;

	assert_int_equal(table->st->count, 0);
	assert_find(table, 1, -FI_ENODATA, 0);
	assert_null(util_av_table_get(table, 0));
	assert_false(util_av_table_is_live(table, 0));
	assert_int_equal(util_av_table_remove(table, 0), -FI_EINVAL);
}

static void test_insertion_order(void **state)
{
	struct util_av_table *table = *state;
	uint32_t i;

	for (i = 0; i < 10; i++)
		assert_int_equal(insert_value(table, 100 + i), i);
	for (i = 0; i < 10; i++) {
		assert_holds(table, i, 100 + i);
		assert_find(table, 100 + i, 0, i);
	}
	assert_int_equal(table->st->count, 10);
	assert_int_equal(table->st->end, 10);
}

static void test_lowest_free_reused(void **state)
{
	struct util_av_table *table = *state;
	uint32_t i;

	for (i = 0; i < 10; i++)
		insert_value(table, i);
	/* removed out of order: reuse must still go lowest first */
	assert_int_equal(util_av_table_remove(table, 7), 0);
	assert_int_equal(util_av_table_remove(table, 2), 0);
	assert_int_equal(util_av_table_remove(table, 9), 0);
	assert_int_equal(util_av_table_remove(table, 5), 0);
	assert_int_equal(table->st->count, 6);

	assert_int_equal(insert_value(table, 1002), 2);
	assert_int_equal(insert_value(table, 1005), 5);
	/* a removal between reuses is seen by the next insertion */
	assert_int_equal(util_av_table_remove(table, 0), 0);
	assert_int_equal(insert_value(table, 1000), 0);
	assert_int_equal(insert_value(table, 1007), 7);
	assert_int_equal(insert_value(table, 1009), 9);
	/* no hole left: the table extends */
	assert_int_equal(insert_value(table, 1010), 10);

	assert_holds(table, 2, 1002);
	assert_holds(table, 9, 1009);
	assert_holds(table, 1, 1);
	assert_find(table, 7, -FI_ENODATA, 0);
	assert_find(table, 1007, 0, 7);
	assert_int_equal(table->st->count, 11);
}

static void test_generation(void **state)
{
	struct util_av_table *table = *state;

	assert_int_equal(util_av_table_gen(table, 0), 0);
	assert_int_equal(insert_value(table, 1), 0);
	assert_int_equal(insert_value(table, 2), 1);
	assert_int_equal(util_av_table_gen(table, 0), 0);

	assert_int_equal(util_av_table_remove(table, 0), 0);
	assert_int_equal(util_av_table_gen(table, 0), 1);
	assert_false(util_av_table_is_live(table, 0));

	/* reinsertion keeps the generation; the next removal bumps it again */
	assert_int_equal(insert_value(table, 3), 0);
	assert_int_equal(util_av_table_gen(table, 0), 1);
	assert_true(util_av_table_is_live(table, 0));
	assert_int_equal(util_av_table_remove(table, 0), 0);
	assert_int_equal(util_av_table_gen(table, 0), 2);

	/* other slots are untouched; never-used and out-of-range slots report 0 */
	assert_int_equal(util_av_table_gen(table, 1), 0);
	assert_int_equal(util_av_table_gen(table, 2), 0);
	assert_int_equal(util_av_table_gen(table, table->st->capacity + 10), 0);
	assert_int_equal(util_av_table_gen(table, SIZE_MAX), 0);
}

static void test_duplicates(void **state)
{
	struct util_av_table *table = *state;

	assert_int_equal(insert_value(table, 7), 0);
	assert_int_equal(insert_value(table, 8), 1);
	assert_int_equal(insert_value(table, 7), 2);
	assert_int_equal(insert_value(table, 7), 3);
	assert_find(table, 7, 0, 0);

	/* the lowest copy removed: the next lowest is found */
	assert_int_equal(util_av_table_remove(table, 0), 0);
	assert_find(table, 7, 0, 2);
	/* a removal above the lowest changes nothing */
	assert_int_equal(util_av_table_remove(table, 3), 0);
	assert_find(table, 7, 0, 2);
	/* reinserted into the lowest hole: found there again */
	assert_int_equal(insert_value(table, 7), 0);
	assert_find(table, 7, 0, 0);
	assert_int_equal(util_av_table_remove(table, 0), 0);
	assert_int_equal(util_av_table_remove(table, 2), 0);
	assert_find(table, 7, -FI_ENODATA, 0);
	assert_find(table, 8, 0, 1);
	assert_int_equal(table->st->count, 1);
}

static void test_find_after_remove_reinsert(void **state)
{
	struct util_av_table *table = *state;
	uint32_t i;

	for (i = 0; i < 5; i++)
		insert_value(table, i);
	assert_int_equal(util_av_table_remove(table, 3), 0);
	assert_find(table, 3, -FI_ENODATA, 0);
	assert_null(util_av_table_get(table, 3));
	/* the same address comes back at the same (lowest free) index */
	assert_int_equal(insert_value(table, 3), 3);
	assert_find(table, 3, 0, 3);
	/* a different address in the hole; the old one stays gone */
	assert_int_equal(util_av_table_remove(table, 3), 0);
	assert_int_equal(insert_value(table, 33), 3);
	assert_find(table, 3, -FI_ENODATA, 0);
	assert_find(table, 33, 0, 3);
	assert_find(table, 4, 0, 4);
}

static void test_remove_twice(void **state)
{
	struct util_av_table *table = *state;

	insert_value(table, 1);
	insert_value(table, 2);
	assert_int_equal(util_av_table_remove(table, 1), 0);
	assert_int_equal(util_av_table_remove(table, 1), -FI_EINVAL);
	/* the failed removal did not bump the generation or free the slot twice */
	assert_int_equal(util_av_table_gen(table, 1), 1);
	assert_int_equal(insert_value(table, 3), 1);
	assert_int_equal(insert_value(table, 4), 2);
	assert_int_equal(table->st->count, 3);
}

static void test_out_of_range(void **state)
{
	struct util_av_table *table = *state;

	insert_value(table, 1);
	assert_int_equal(util_av_table_remove(table, 1), -FI_EINVAL);
	assert_int_equal(util_av_table_remove(table, table->st->capacity), -FI_EINVAL);
	assert_int_equal(util_av_table_remove(table, SIZE_MAX), -FI_EINVAL);
	assert_int_equal(util_av_table_remove(table, UINT32_MAX), -FI_EINVAL);
	assert_null(util_av_table_get(table, 1));
	assert_null(util_av_table_get(table, SIZE_MAX));
	assert_false(util_av_table_is_live(table, SIZE_MAX));
	assert_int_equal(table->st->count, 1);
}

static void test_remove_list(void **state)
{
	struct util_av_table *table = *state;
	size_t bad[] = {1, 5, 2};
	size_t twice[] = {3, 1, 3};
	size_t good[] = {3, 0};
	uint32_t i;

	for (i = 0; i < 4; i++)
		insert_value(table, i);

	/* one entry not live: nothing removed */
	assert_int_equal(util_av_table_remove_list(table, bad, 3), -FI_EINVAL);
	/* one entry listed twice: nothing removed either */
	assert_int_equal(util_av_table_remove_list(table, twice, 3), -FI_EINVAL);
	for (i = 0; i < 4; i++) {
		assert_holds(table, i, i);
		assert_find(table, i, 0, i);
		assert_int_equal(util_av_table_gen(table, i), 0);
	}

	assert_int_equal(util_av_table_remove_list(table, good, 2), 0);
	assert_int_equal(util_av_table_remove_list(table, good, 0), 0);
	assert_false(util_av_table_is_live(table, 0));
	assert_false(util_av_table_is_live(table, 3));
	assert_find(table, 3, -FI_ENODATA, 0);
	assert_int_equal(table->st->count, 2);
	assert_int_equal(insert_value(table, 9), 0);
	assert_int_equal(insert_value(table, 9), 3);
}

static void test_growth(void **state)
{
	struct util_av_table table;
	const uint32_t n = 5000;
	uint32_t i;

	assert_int_equal(util_av_table_init(&table, ADDRLEN, 4), 0);
	for (i = 0; i < n; i++)
		assert_int_equal(insert_value(&table, i * 7919u), i);
	assert_true(table.st->capacity >= n);
	for (i = 0; i < n; i++) {
		assert_holds(&table, i, i * 7919u);
		assert_find(&table, i * 7919u, 0, i);
	}
	/* every other entry removed, then reinserted into the holes in order */
	for (i = 0; i < n; i += 2)
		assert_int_equal(util_av_table_remove(&table, i), 0);
	for (i = 0; i < n; i += 2)
		assert_int_equal(insert_value(&table, i + 1000000u), i);
	for (i = 0; i < n; i++)
		assert_find(&table, i % 2 ? i * 7919u : i + 1000000u, 0, i);
	assert_int_equal(table.st->count, n);
	util_av_table_fini(&table);
}

/* Keys that share their first eight bytes and differ only behind them are told apart. */
static void test_exact_and_tails(void **state)
{
	struct util_av_table *table = *state;
	struct addr16 exact = make_addr(5), tailed = make_addr(5);
	size_t index = SIZE_MAX;

	tailed.bytes[15] = 1;
	assert_int_equal(util_av_table_insert(table, &tailed, &index, NULL), 0);
	assert_int_equal(index, 0);
	assert_int_equal(util_av_table_find(table, &exact, &index, NULL), -FI_ENODATA);
	assert_int_equal(util_av_table_insert(table, &exact, &index, NULL), 0);
	assert_int_equal(index, 1);
	util_av_table_flush(table);
	assert_int_equal(util_av_table_find(table, &exact, &index, NULL), 0);
	assert_int_equal(index, 1);
	assert_int_equal(util_av_table_find(table, &tailed, &index, NULL), 0);
	assert_int_equal(index, 0);
	assert_int_equal(util_av_table_remove(table, 0), 0);
	assert_int_equal(util_av_table_find(table, &tailed, &index, NULL), -FI_ENODATA);
	assert_int_equal(util_av_table_find(table, &exact, &index, NULL), 0);
	assert_int_equal(index, 1);
}

/* ---- hash collisions and full lines (the inline lookup's ways out) ---- */

/*
 * The n-th key with the same 64-bit hash as make_addr(value): n = 0 is that exact key, the
 * others carry a tail n in their second word and a first word that cancels it in the hash.
 */
static struct addr16 colliding_addr(uint32_t value, uint64_t n)
{
	struct addr16 a = make_addr(value);
	uint64_t w0, w1 = n << 40;

	memcpy(&w0, a.bytes, sizeof(w0));
	w0 ^= w1 * UTIL_AV_TABLE_HASH_MUL;
	memcpy(a.bytes, &w0, sizeof(w0));
	memcpy(&a.bytes[8], &w1, sizeof(w1));
	return a;
}

static void assert_find_key(const struct util_av_table *table, const struct addr16 *a,
			    int want_ret, size_t want_index)
{
	size_t index = SIZE_MAX;
	uint32_t gen = UINT32_MAX;

	assert_int_equal(util_av_table_find(table, a, &index, &gen), want_ret);
	if (want_ret)
		return;
	assert_int_equal(index, want_index);
	assert_int_equal(gen, util_av_table_gen(table, want_index));
}

/*
 * Keys with equal hashes (one exact, the others with tails) fill their home line and spill
 * past it: each is found at its own index, whichever is inserted first and whichever goes.
 */
static void test_hash_collisions(void **state)
{
	struct util_av_table *table = *state;
	struct addr16 keys[6], stranger = colliding_addr(77, 9);
	size_t index[6], got[6];
	uint32_t gen[6];
	int ret[6], i;

	for (i = 0; i < 6; i++) {
		keys[i] = colliding_addr(77, (uint64_t) i);
		assert_true(util_av_table_hash(&keys[i], ADDRLEN) ==
			    util_av_table_hash(&keys[0], ADDRLEN));
	}
	/* tailed keys first, the exact one in the middle of them */
	for (i = 1; i < 6; i++) {
		assert_int_equal(util_av_table_insert(table, &keys[i], &index[i], NULL), 0);
		if (i == 2)
			assert_int_equal(util_av_table_insert(table, &keys[0], &index[0], NULL), 0);
	}
	util_av_table_flush(table);
	for (i = 0; i < 6; i++)
		assert_find_key(table, &keys[i], 0, index[i]);
	assert_find_key(table, &stranger, -FI_ENODATA, 0);
	assert_int_equal(util_av_table_find_many(table, keys, sizeof(keys[0]), 6, got, gen, ret),
			 0);
	for (i = 0; i < 6; i++) {
		assert_int_equal(ret[i], 0);
		assert_int_equal(got[i], index[i]);
	}

	/* the exact key gone: the others stay, it comes back into its old index */
	assert_int_equal(util_av_table_remove(table, index[0]), 0);
	assert_find_key(table, &keys[0], -FI_ENODATA, 0);
	for (i = 1; i < 6; i++)
		assert_find_key(table, &keys[i], 0, index[i]);
	assert_int_equal(util_av_table_insert(table, &keys[0], &got[0], NULL), 0);
	assert_int_equal(got[0], index[0]);
	util_av_table_flush(table);
	assert_find_key(table, &keys[0], 0, index[0]);

	/* the first in the line and the one past it gone */
	assert_int_equal(util_av_table_remove(table, index[1]), 0);
	assert_int_equal(util_av_table_remove(table, index[5]), 0);
	assert_find_key(table, &keys[1], -FI_ENODATA, 0);
	assert_find_key(table, &keys[5], -FI_ENODATA, 0);
	for (i = 0; i < 5; i++) {
		if (i != 1)
			assert_find_key(table, &keys[i], 0, index[i]);
	}
	/* a second copy of the exact key, in a lower hole: the lowest copy wins */
	assert_int_equal(util_av_table_insert(table, &keys[0], &got[0], NULL), 0);
	assert_true(got[0] < index[0]);
	util_av_table_flush(table);
	assert_find_key(table, &keys[0], 0, got[0]);
	assert_int_equal(util_av_table_remove(table, got[0]), 0);
	assert_find_key(table, &keys[0], 0, index[0]);
}

/*
 * util_av_table_find_fast settles only hashed, exact, single 16-byte keys; everything else is
 * left to util_av_table_find_from, and what it settles agrees with it.
 */
static void test_find_fast(void **state)
{
	struct util_av_table *table = *state, other;
	struct addr16 a = make_addr(5), tailed = make_addr(6);
	size_t index = SIZE_MAX;
	uint32_t gen = UINT32_MAX;
	uint8_t key13[ADDRLEN] = {1}; /* 13 bytes used; room for what an inline path may read */

	assert_false(util_av_table_find_fast(table, &a, &index, &gen));
	assert_int_equal(insert_value(table, 4), 0);
	assert_int_equal(insert_value(table, 5), 1);
	/* pending: not in the hash yet */
	assert_false(util_av_table_find_fast(table, &a, &index, &gen));
	util_av_table_flush(table);
	assert_true(util_av_table_find_fast(table, &a, &index, &gen));
	assert_int_equal(index, 1);
	assert_int_equal(gen, 0);

	/* removed and back: the next generation */
	assert_int_equal(util_av_table_remove(table, 1), 0);
	assert_false(util_av_table_find_fast(table, &a, &index, &gen));
	assert_int_equal(insert_value(table, 5), 1);
	util_av_table_flush(table);
	assert_true(util_av_table_find_fast(table, &a, &index, &gen));
	assert_int_equal(index, 1);
	assert_int_equal(gen, 1);

	/* a second copy: find picks the lowest, find_fast leaves it to find */
	assert_int_equal(insert_value(table, 5), 2);
	util_av_table_flush(table);
	assert_false(util_av_table_find_fast(table, &a, &index, &gen));
	assert_find(table, 5, 0, 1);

	/* a key with a tail */
	tailed.bytes[12] = 1;
	assert_int_equal(util_av_table_insert(table, &tailed, &index, NULL), 0);
	util_av_table_flush(table);
	assert_false(util_av_table_find_fast(table, &tailed, &index, &gen));
	assert_int_equal(util_av_table_find(table, &tailed, &index, NULL), 0);
	assert_int_equal(index, 3);

	/* another key length */
	assert_int_equal(util_av_table_init(&other, 13, 0), 0);
	assert_int_equal(util_av_table_insert(&other, key13, &index, NULL), 0);
	util_av_table_flush(&other);
	assert_false(util_av_table_find_fast(&other, key13, &index, &gen));
	util_av_table_fini(&other);
}

/* Exact keys (different hashes) sharing one home line, more than it holds. */
static void test_full_home_line(void **state)
{
	struct util_av_table *table = *state;
	const struct util_av_hash *hash = atomic_load(&table->hash);
	struct addr16 keys[10], a;
	size_t index[10], home = SIZE_MAX, line;
	uint32_t value;
	int n = 0, i;

	/* values whose keys all start their chain at the same line */
	for (value = 1; n < 10; value++) {
		a = make_addr(value);
		line = util_av_table_home(util_av_table_hash(&a, ADDRLEN), hash->nslots);
		if (home == SIZE_MAX)
			home = line;
		if (line == home)
			keys[n++] = a;
	}
	for (i = 0; i < 7; i++)
		assert_int_equal(util_av_table_insert(table, &keys[i], &index[i], NULL), 0);
	util_av_table_flush(table);
	assert_ptr_equal(atomic_load(&table->hash), hash);
	for (i = 0; i < 7; i++)
		assert_find_key(table, &keys[i], 0, index[i]);
	/* absent, with the home line full: the walk says so */
	for (i = 7; i < 10; i++)
		assert_find_key(table, &keys[i], -FI_ENODATA, 0);

	/* holes in the line and past it: everything behind a hole is still found */
	assert_int_equal(util_av_table_remove(table, index[1]), 0);
	assert_int_equal(util_av_table_remove(table, index[4]), 0);
	for (i = 0; i < 7; i++)
		assert_find_key(table, &keys[i], i == 1 || i == 4 ? -FI_ENODATA : 0, index[i]);
	/* the last ones gone: their slots, and the tombstone before them, empty again */
	assert_int_equal(util_av_table_remove(table, index[6]), 0);
	assert_int_equal(util_av_table_remove(table, index[5]), 0);
	for (i = 0; i < 10; i++)
		assert_find_key(table, &keys[i], i == 0 || i == 2 || i == 3 ? 0 : -FI_ENODATA,
				index[i < 7 ? i : 0]);
}

/* Lookups see entries whether still pending or hashed, duplicates across both included. */
static void test_pending_and_hashed(void **state)
{
	struct util_av_table *table = *state;
	uint32_t i;

	for (i = 0; i < UTIL_AV_TABLE_PENDING + 3; i++)
		assert_int_equal(insert_value(table, i), i);
	/* index 0 is hashed; its copy goes into the hole at 0 later, while pending */
	assert_int_equal(table->st->pending_cnt, 3);
	assert_int_equal(util_av_table_remove(table, 1), 0);
	assert_int_equal(insert_value(table, 0), 1);
	assert_find(table, 0, 0, 0);
	assert_int_equal(util_av_table_remove(table, 0), 0);
	assert_find(table, 0, 0, 1);
	/* a pending entry removed before it was ever hashed */
	assert_int_equal(util_av_table_remove(table, UTIL_AV_TABLE_PENDING + 2), 0);
	assert_find(table, UTIL_AV_TABLE_PENDING + 2, -FI_ENODATA, 0);
	util_av_table_flush(table);
	assert_int_equal(table->st->pending_cnt, 0);
	assert_find(table, 0, 0, 1);
	assert_find(table, UTIL_AV_TABLE_PENDING + 1, 0, UTIL_AV_TABLE_PENDING + 1);
}

static void test_read(void **state)
{
	struct util_av_table *table = *state;
	struct addr16 got, want = make_addr(42);
	uint32_t gen = UINT32_MAX;

	assert_int_equal(util_av_table_read(table, 0, &got, &gen), -FI_EINVAL);
	insert_value(table, 42);
	assert_int_equal(util_av_table_read(table, 0, &got, &gen), 0);
	assert_memory_equal(&got, &want, ADDRLEN);
	assert_int_equal(gen, 0);
	assert_int_equal(util_av_table_read(table, 0, NULL, NULL), 0);
	assert_int_equal(util_av_table_remove(table, 0), 0);
	assert_int_equal(util_av_table_read(table, 0, &got, &gen), -FI_EINVAL);
	insert_value(table, 43);
	assert_int_equal(util_av_table_read(table, 0, NULL, &gen), 0);
	assert_int_equal(gen, 1);
	assert_int_equal(util_av_table_read(table, SIZE_MAX, NULL, NULL), -FI_EINVAL);
	assert_int_equal(util_av_table_read(table, UINT32_MAX, NULL, NULL), -FI_EINVAL);
}

/* find_many answers as find does, for present, removed and duplicate keys alike. */
static void test_find_many(void **state)
{
	struct util_av_table *table = *state;
	struct addr16 keys[40];
	size_t index[40], want;
	int ret[40];
	uint32_t gen[40], i;

	for (i = 0; i < 30; i++)
		insert_value(table, i);
	insert_value(table, 5); /* a duplicate, at 30 */
	assert_int_equal(util_av_table_remove(table, 7), 0);
	for (i = 0; i < 40; i++)
		keys[i] = make_addr(i);
	assert_int_equal(util_av_table_find_many(table, keys, sizeof(keys[0]), 40, index, gen,
						 ret), 0);
	for (i = 0; i < 40; i++) {
		if (i >= 30 || i == 7) {
			assert_int_equal(ret[i], -FI_ENODATA);
			continue;
		}
		want = i;
		assert_int_equal(ret[i], 0);
		assert_int_equal(index[i], want);
		assert_int_equal(gen[i], util_av_table_gen(table, want));
	}
	assert_int_equal(util_av_table_find_many(table, keys, sizeof(keys[0]), 0, index, NULL,
						 ret), 0);
}

/* reserve makes one insertion call cost no rebuild and no chunk allocation. */
static void test_reserve(void **state)
{
	struct util_av_table table;
	const uint32_t n = 20000;
	struct util_av_hash *hash;
	uint32_t i;

	assert_int_equal(util_av_table_init(&table, ADDRLEN, 0), 0);
	insert_value(&table, 1000000);
	assert_int_equal(util_av_table_reserve(&table, n), 0);
	assert_true(table.st->capacity >= n + 1);
	hash = atomic_load(&table.hash);
	for (i = 0; i < n; i++)
		assert_int_equal(insert_value(&table, i), i + 1);
	assert_ptr_equal(atomic_load(&table.hash), hash);
	for (i = 0; i < n; i++)
		assert_find(&table, i, 0, i + 1);
	assert_int_equal(util_av_table_reserve(&table, UTIL_AV_TABLE_MAX_ENTRIES), -FI_ENOSPC);
	/* footprint: stride, heap and hash, well under 100 bytes an entry */
	assert_true(util_av_table_mem_size(&table) / table.st->count < 100);
	util_av_table_fini(&table);
}

/* Removing every entry in one list: all gone, generations bumped, index 0 next. */
static void test_remove_all(void **state)
{
	struct util_av_table *table = *state;
	size_t index[40];
	uint32_t i;

	for (i = 0; i < 40; i++)
		insert_value(table, i);
	assert_int_equal(util_av_table_remove(table, 39), 0);
	for (i = 0; i < 39; i++)
		index[i] = 38 - i;
	assert_int_equal(util_av_table_remove_list(table, index, 39), 0);
	assert_int_equal(table->st->count, 0);
	for (i = 0; i < 40; i++) {
		assert_false(util_av_table_is_live(table, i));
		assert_int_equal(util_av_table_gen(table, i), 1);
		assert_find(table, i, -FI_ENODATA, 0);
	}
	for (i = 0; i < 41; i++)
		assert_int_equal(insert_value(table, 100 + i), i);
	assert_find(table, 120, 0, 20);
}

/* ---- tables in a caller's region ---- */

static void *alloc_region(size_t size)
{
	void *region = NULL;

	assert_int_equal(posix_memalign(&region, 64, size), 0);
	memset(region, 0, size);
	return region;
}

/* Every hash array starts its slots on a cache line and holds whole lines. */
static void test_hash_lines(void **state)
{
	const size_t capacity = 100;
	size_t size = util_av_table_region_size(ADDRLEN, capacity), i;
	const struct util_av_hash *hash;
	struct util_av_table t;
	void *region;

	assert_int_equal(util_av_table_init(&t, ADDRLEN, 0), 0);
	for (i = 0; i < 3000; i++) {
		hash = atomic_load(&t.hash);
		assert_int_equal((uintptr_t) hash->slot % 64, 0);
		assert_int_equal(hash->nslots % UTIL_AV_HASH_LINE_SLOTS, 0);
		insert_value(&t, (uint32_t) i);
	}
	util_av_table_fini(&t);

	region = alloc_region(size);
	assert_int_equal(util_av_table_attach(&t, region, size, ADDRLEN, capacity, true), 0);
	hash = atomic_load(&t.hash);
	assert_int_equal((uintptr_t) hash->slot % 64, 0);
	assert_int_equal(hash->nslots % UTIL_AV_HASH_LINE_SLOTS, 0);
	util_av_table_fini(&t);
	free(region);
}

static void test_attach(void **state)
{
	const size_t capacity = 100;
	size_t size = util_av_table_region_size(ADDRLEN, capacity), index;
	struct util_av_table a, b;
	struct addr16 key;
	void *region = alloc_region(size);
	uint32_t i;

	assert_int_equal(util_av_table_attach(&a, region, size - 1, ADDRLEN, capacity, true),
			 -FI_EINVAL);
	assert_int_equal(util_av_table_attach(&a, region, size, ADDRLEN, capacity, true), 0);
	for (i = 0; i < capacity; i++)
		assert_int_equal(insert_value(&a, i), i);
	key = make_addr(capacity);
	assert_int_equal(util_av_table_insert(&a, &key, &index, NULL), -FI_ENOSPC);
	assert_int_equal(util_av_table_reserve(&a, 10), 0);

	/* a second view of the same region (another process) sees the same entries */
	assert_int_equal(util_av_table_attach(&b, region, size, ADDRLEN + 1, capacity, false),
			 -FI_EINVAL);
	assert_int_equal(util_av_table_attach(&b, region, size, ADDRLEN, capacity + 1, false),
			 -FI_EINVAL);
	assert_int_equal(util_av_table_attach(&b, region, size, ADDRLEN, capacity, false), 0);
	for (i = 0; i < capacity; i++) {
		assert_holds(&b, i, i);
		assert_find(&b, i, 0, i);
	}
	assert_int_equal(util_av_table_remove(&b, 7), 0);
	assert_find(&a, 7, -FI_ENODATA, 0);
	assert_int_equal(insert_value(&a, 1007), 7);
	assert_find(&b, 1007, 0, 7);
	assert_int_equal(util_av_table_gen(&b, 7), 1);

	/* churn: tombstones are cleared in place, the capacity never changes */
	for (i = 0; i < 5000; i++) {
		assert_int_equal(util_av_table_remove(&a, i % capacity), 0);
		assert_int_equal(insert_value(&b, 2000 + i), i % capacity);
	}
	assert_int_equal(a.st->count, capacity);
	assert_find(&a, 2000 + 4999, 0, 4999 % capacity);
	util_av_table_fini(&a);
	util_av_table_fini(&b);
	free(region);
}

/* A writer that died half-way leaves counters, heap and hash wrong; repair recomputes them. */
static void test_repair(void **state)
{
	const size_t capacity = 64;
	size_t size = util_av_table_region_size(ADDRLEN, capacity);
	struct util_av_table t;
	void *region = alloc_region(size);
	struct util_av_hash *hash;
	uint32_t i;

	assert_int_equal(util_av_table_attach(&t, region, size, ADDRLEN, capacity, true), 0);
	for (i = 0; i < 20; i++)
		insert_value(&t, i);
	assert_int_equal(util_av_table_remove(&t, 3), 0);
	assert_int_equal(util_av_table_remove(&t, 11), 0);

	/* the damage: an odd sequence count, lost heap, wrong counts, hash wiped */
	atomic_store(&t.st->seq, atomic_load(&t.st->seq) | 1);
	t.st->free_cnt = 0;
	t.st->count = 1234;
	t.st->pending_cnt = 7;
	hash = atomic_load(&t.hash);
	memset(hash->slot, 0xff, hash->nslots * sizeof(hash->slot[0]));
	memset(hash->slot, 0, sizeof(hash->slot[0]));

	util_av_table_repair(&t);
	assert_int_equal(t.st->count, 18);
	assert_int_equal(atomic_load(&t.st->seq) & 1, 0);
	for (i = 0; i < 20; i++) {
		if (i == 3 || i == 11)
			assert_find(&t, i, -FI_ENODATA, 0);
		else
			assert_find(&t, i, 0, i);
	}
	assert_int_equal(insert_value(&t, 100), 3);
	assert_int_equal(insert_value(&t, 101), 11);
	assert_int_equal(insert_value(&t, 102), 20);
	util_av_table_fini(&t);
	free(region);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_init_args),
		cmocka_unit_test_setup_teardown(test_empty, setup_table, teardown_table),
		cmocka_unit_test_setup_teardown(test_insertion_order, setup_table, teardown_table),
		cmocka_unit_test_setup_teardown(test_lowest_free_reused, setup_table,
						teardown_table),
		cmocka_unit_test_setup_teardown(test_generation, setup_table, teardown_table),
		cmocka_unit_test_setup_teardown(test_duplicates, setup_table, teardown_table),
		cmocka_unit_test_setup_teardown(test_find_after_remove_reinsert, setup_table,
						teardown_table),
		cmocka_unit_test_setup_teardown(test_remove_twice, setup_table, teardown_table),
		cmocka_unit_test_setup_teardown(test_out_of_range, setup_table, teardown_table),
		cmocka_unit_test_setup_teardown(test_remove_list, setup_table, teardown_table),
		cmocka_unit_test(test_growth),
		cmocka_unit_test_setup_teardown(test_exact_and_tails, setup_table, teardown_table),
		cmocka_unit_test_setup_teardown(test_hash_collisions, setup_table, teardown_table),
		cmocka_unit_test_setup_teardown(test_find_fast, setup_table, teardown_table),
		cmocka_unit_test_setup_teardown(test_full_home_line, setup_table, teardown_table),
		cmocka_unit_test(test_hash_lines),
		cmocka_unit_test_setup_teardown(test_pending_and_hashed, setup_table,
						teardown_table),
		cmocka_unit_test_setup_teardown(test_read, setup_table, teardown_table),
		cmocka_unit_test(test_reserve),
		cmocka_unit_test_setup_teardown(test_find_many, setup_table, teardown_table),
		cmocka_unit_test_setup_teardown(test_remove_all, setup_table, teardown_table),
		cmocka_unit_test(test_attach),
		cmocka_unit_test(test_repair),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
