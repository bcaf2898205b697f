/*
 * Unit tests of util/av_table: index allocation (insertion order, lowest free index reused),
 * generations, reverse lookup with duplicates, growth, and a long random run checked against
 * a plain reference model.
 */
#include "config.h"

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "util/av_table.h"

#define ADDRLEN 16

struct addr16 {
	uint8_t bytes[ADDRLEN];
};

/* A distinct 16-byte address per value, shaped like a sockaddr_in (value in the IPv4 part). */
static struct addr16 make_addr(uint32_t value)
{
	struct addr16 a;

	memset(&a, 0, sizeof(a));
	a.bytes[0] = 2;
	memcpy(&a.bytes[4], &value, sizeof(value));
	return a;
}

static int setup_table(void **state)
{
	struct util_av_table *table = malloc(sizeof(*table));

	if (!table || util_av_table_init(table, ADDRLEN, 0)) {
		free(table);
		return -1;
	}
	*state = table;
	return 0;
}

static int teardown_table(void **state)
{
	struct util_av_table *table = *state;

	util_av_table_fini(table);
	free(table);
	return 0;
}

static size_t insert_value(struct util_av_table *table, uint32_t value)
{
	struct addr16 a = make_addr(value);
	size_t index = SIZE_MAX;

	assert_int_equal(util_av_table_insert(table, &a, &index), 0);
	return index;
}

static void assert_holds(const struct util_av_table *table, size_t index, uint32_t value)
{
	struct addr16 a = make_addr(value);
	const void *stored = util_av_table_get(table, index);

	assert_non_null(stored);
	assert_memory_equal(stored, &a, ADDRLEN);
	assert_true(util_av_table_is_live(table, index));
}

static void assert_find(const struct util_av_table *table, uint32_t value, int want_ret,
			size_t want_index)
{
	struct addr16 a = make_addr(value);
	size_t index = SIZE_MAX;

	assert_int_equal(util_av_table_find(table, &a, &index), want_ret);
	if (!want_ret)
		assert_int_equal(index, want_index);
}

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

	assert_int_equal(table->count, 0);
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
	assert_int_equal(table->count, 10);
	assert_int_equal(table->end, 10);
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
	assert_int_equal(table->count, 6);

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
	assert_int_equal(table->count, 11);
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
	assert_int_equal(util_av_table_gen(table, table->capacity + 10), 0);
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
	assert_int_equal(table->count, 1);
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
	assert_int_equal(table->count, 3);
}

static void test_out_of_range(void **state)
{
	struct util_av_table *table = *state;

	insert_value(table, 1);
	assert_int_equal(util_av_table_remove(table, 1), -FI_EINVAL);
	assert_int_equal(util_av_table_remove(table, table->capacity), -FI_EINVAL);
	assert_int_equal(util_av_table_remove(table, SIZE_MAX), -FI_EINVAL);
	assert_int_equal(util_av_table_remove(table, UINT32_MAX), -FI_EINVAL);
	assert_null(util_av_table_get(table, 1));
	assert_null(util_av_table_get(table, SIZE_MAX));
	assert_false(util_av_table_is_live(table, SIZE_MAX));
	assert_int_equal(table->count, 1);
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
	assert_int_equal(table->count, 2);
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
	assert_true(table.capacity >= n);
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
	assert_int_equal(table.count, n);
	util_av_table_fini(&table);
}

/*
 * The reference model: a plain array of (is_live, value, generation) per index; the lowest
 * free index and the lowest index holding a value are found by scanning it.
 */
struct model_slot {
	bool is_live;
	uint32_t value;
	uint32_t gen;
};

struct model {
	struct model_slot *slot;
	size_t end;
	size_t count;
};

static size_t model_next_index(const struct model *m)
{
	size_t i;

	for (i = 0; i < m->end; i++) {
		if (!m->slot[i].is_live)
			return i;
	}
	return m->end;
}

static size_t model_find(const struct model *m, uint32_t value)
{
	size_t i;

	for (i = 0; i < m->end; i++) {
		if (m->slot[i].is_live && m->slot[i].value == value)
			return i;
	}
	return SIZE_MAX;
}

/* xorshift64*: deterministic, so a failure reproduces */
static uint64_t rand_next(uint64_t *s)
{
	*s ^= *s >> 12;
	*s ^= *s << 25;
	*s ^= *s >> 27;
	return *s * 2685821657736338717ULL;
}

static void make_addr_len(uint8_t *out, size_t addrlen, uint32_t value)
{
	memset(out, 0xa5, addrlen);
	memcpy(out + addrlen - sizeof(value), &value, sizeof(value));
}

static void check_model(const struct util_av_table *table, const struct model *m, size_t addrlen)
{
	uint8_t a[64];
	size_t i;

	assert_int_equal(table->count, m->count);
	for (i = 0; i < m->end + 2; i++) {
		bool is_live = i < m->end && m->slot[i].is_live;

		assert_int_equal(util_av_table_is_live(table, i), is_live);
		assert_int_equal(util_av_table_gen(table, i), i < m->end ? m->slot[i].gen : 0);
		if (is_live) {
			make_addr_len(a, addrlen, m->slot[i].value);
			assert_memory_equal(util_av_table_get(table, i), a, addrlen);
		} else {
			assert_null(util_av_table_get(table, i));
		}
	}
}

/*
 * 100,000 random insertions and removals over a small set of values (so duplicates are
 * common and chains are full of tombstones), each checked against the model.
 */
static void run_random(size_t addrlen, uint64_t seed)
{
	const size_t ops = 100000, values = 400, max_live = 1500;
	struct util_av_table table;
	struct model m = {0};
	uint64_t rs = seed;
	uint8_t a[64];
	size_t op, index, want;
	uint32_t value;

	m.slot = calloc(max_live + 1, sizeof(*m.slot));
	assert_non_null(m.slot);
	assert_int_equal(util_av_table_init(&table, addrlen, 0), 0);

	for (op = 0; op < ops; op++) {
		uint64_t r = rand_next(&rs);
		bool do_insert = m.count < max_live && (m.count < 10 || r % 100 < 52);

		if (do_insert) {
			value = (uint32_t) (rand_next(&rs) % values);
			make_addr_len(a, addrlen, value);
			want = model_next_index(&m);
			assert_int_equal(util_av_table_insert(&table, a, &index), 0);
			assert_int_equal(index, want);
			if (want == m.end)
				m.end++;
			m.slot[want].is_live = true;
			m.slot[want].value = value;
			m.count++;
		} else {
			/* anywhere up to end + 1: also hits holes and never-used indices */
			index = (size_t) (rand_next(&rs) % (m.end + 2));
			if (index < m.end && m.slot[index].is_live) {
				assert_int_equal(util_av_table_remove(&table, index), 0);
				m.slot[index].is_live = false;
				m.slot[index].gen++;
				m.count--;
			} else {
				assert_int_equal(util_av_table_remove(&table, index), -FI_EINVAL);
			}
		}

		value = (uint32_t) (rand_next(&rs) % values);
		make_addr_len(a, addrlen, value);
		want = model_find(&m, value);
		if (want == SIZE_MAX) {
			assert_int_equal(util_av_table_find(&table, a, &index), -FI_ENODATA);
		} else {
			assert_int_equal(util_av_table_find(&table, a, &index), 0);
			assert_int_equal(index, want);
		}

		if (op % 5000 == 0)
			check_model(&table, &m, addrlen);
	}
	check_model(&table, &m, addrlen);

	util_av_table_fini(&table);
	free(m.slot);
}

static void test_random_ipv4(void **state)
{
	run_random(16, 0x1234567887654321ULL);
}

static void test_random_ipv6(void **state)
{
	/* sockaddr_in6 size: 3 words and a 4-byte tail through the hash and memcmp */
	run_random(28, 0xfeedfacecafebeefULL);
}

static void test_random_odd_size(void **state)
{
	run_random(5, 42);
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
		cmocka_unit_test(test_random_ipv4),
		cmocka_unit_test(test_random_ipv6),
		cmocka_unit_test(test_random_odd_size),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
