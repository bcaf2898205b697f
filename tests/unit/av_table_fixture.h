/*
 * The fixture of util/av_table's unit tests (test_av_table.c, test_av_table_random.c):
 * 16-byte addresses made from a number, a table per test, and checks of what it holds.
 */
#ifndef TESTS_UNIT_AV_TABLE_FIXTURE_H
#define TESTS_UNIT_AV_TABLE_FIXTURE_H

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include <pthread.h>
#include <stdatomic.h>

#include "util/av_table.h"

#define ADDRLEN 16

struct addr16 {
	uint8_t bytes[ADDRLEN];
};

/* A distinct 16-byte address per value, shaped like a sockaddr_in (value in the IPv4 part). */
static inline struct addr16 make_addr(uint32_t value)
{
	struct addr16 a;

	memset(&a, 0, sizeof(a));
	a.bytes[0] = 2;
	memcpy(&a.bytes[4], &value, sizeof(value));
	return a;
}

static inline int setup_table(void **state)
{
	struct util_av_table *table = malloc(sizeof(*table));

	if (!table || util_av_table_init(table, ADDRLEN, 0)) {
		free(table);
		return -1;
	}
	*state = table;
	return 0;
}

static inline int teardown_table(void **state)
{
	struct util_av_table *table = *state;

	util_av_table_fini(table);
	free(table);
	return 0;
}

static inline size_t insert_value(struct util_av_table *table, uint32_t value)
{
	struct addr16 a = make_addr(value);
	size_t index = SIZE_MAX;

	assert_int_equal(util_av_table_insert(table, &a, &index, NULL), 0);
	return index;
}

static inline void assert_holds(const struct util_av_table *table, size_t index, uint32_t value)
{
	struct addr16 a = make_addr(value);
	const void *stored = util_av_table_get(table, index);

	assert_non_null(stored);
	assert_memory_equal(stored, &a, ADDRLEN);
	assert_true(util_av_table_is_live(table, index));
}

static inline void assert_find(const struct util_av_table *table, uint32_t value, int want_ret,
			size_t want_index)
{
	struct addr16 a = make_addr(value);
	size_t index = SIZE_MAX;

	assert_int_equal(util_av_table_find(table, &a, &index, NULL), want_ret);
	if (!want_ret)
		assert_int_equal(index, want_index);
}

#endif /* TESTS_UNIT_AV_TABLE_FIXTURE_H */
