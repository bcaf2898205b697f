/* Unit tests of util/mr_map.c: keys, range and access checks, translation, lifetimes. */
#include "config.h"

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "util/mr_map.h"

static struct fi_provider test_prov = { .name = "util_test" };
struct fi_provider *util_prov = &test_prov;

static char mem[3][4096];

static struct fi_mr_attr attr_of(const struct iovec *iov, size_t cnt, uint64_t access,
				 uint64_t key)
{
	return (struct fi_mr_attr) { .mr_iov = iov, .iov_count = cnt, .access = access,
				     .requested_key = key };
}

static void test_requested_keys(void **state)
{
	struct iovec iov = { mem[0], sizeof(mem[0]) };
	struct fi_mr_attr attr = attr_of(&iov, 1, FI_REMOTE_READ, 7);
	struct util_mr_map_entry *a, *b;
	struct util_mr_map map;

	(void) state;
	util_mr_map_init(&map, 0);
	assert_int_equal(util_mr_map_insert(&map, &attr, &map, &a), 0);
	assert_int_equal(a->key, 7);
	assert_ptr_equal(a->context, &map);
	assert_int_equal(util_mr_map_insert(&map, &attr, NULL, &b), -FI_ENOKEY);
	attr.requested_key = 8;
	assert_int_equal(util_mr_map_insert(&map, &attr, NULL, &b), 0);
	assert_ptr_equal(util_mr_map_find(&map, 7), a);
	assert_ptr_equal(util_mr_map_find(&map, 8), b);
	/* a closed key is free again */
	util_mr_map_remove(&map, a);
	assert_null(util_mr_map_find(&map, 7));
	attr.requested_key = 7;
	assert_int_equal(util_mr_map_insert(&map, &attr, NULL, &a), 0);
	assert_int_equal(map.entry_cnt, 2);
	util_mr_map_fini(&map);
}

static void test_provider_keys(void **state)
{
	struct iovec iov = { mem[0], 16 };
	struct fi_mr_attr attr = attr_of(&iov, 1, FI_REMOTE_WRITE, 7);
	struct util_mr_map_entry *a, *b;
	struct util_mr_map map;

	(void) state;
	util_mr_map_init(&map, FI_MR_PROV_KEY);
	assert_int_equal(util_mr_map_insert(&map, &attr, NULL, &a), 0);
	assert_int_equal(util_mr_map_insert(&map, &attr, NULL, &b), 0);
	assert_int_not_equal(a->key, b->key);
	util_mr_map_remove(&map, a);
	/* a key handed out is not handed out again, even once closed */
	assert_int_equal(util_mr_map_insert(&map, &attr, NULL, &a), 0);
	assert_int_not_equal(a->key, b->key);
	util_mr_map_fini(&map);
}

static void test_bad_attributes(void **state)
{
	struct iovec iov[2] = { { NULL, 8 }, { mem[0], 8 } };
	struct fi_mr_attr attr = attr_of(iov, 2, FI_REMOTE_READ, 1);
	struct util_mr_map_entry *e;
	struct util_mr_map map;

	(void) state;
	util_mr_map_init(&map, 0);
	assert_int_equal(util_mr_map_insert(&map, &attr, NULL, &e), -FI_EINVAL);
	attr = attr_of(NULL, 1, FI_REMOTE_READ, 1);
	assert_int_equal(util_mr_map_insert(&map, &attr, NULL, &e), -FI_EINVAL);
	iov[0] = (struct iovec) { (void *) (UINTPTR_MAX - 4), 8 };
	attr = attr_of(iov, 1, FI_REMOTE_READ, 1);
	assert_int_equal(util_mr_map_insert(&map, &attr, NULL, &e), -FI_EINVAL);
	iov[0] = (struct iovec) { mem[0], 8 };
	attr = attr_of(iov, 1, FI_REMOTE_READ, 1);
	attr.offset = 4;
	assert_int_equal(util_mr_map_insert(&map, &attr, NULL, &e), -FI_EINVAL);
	assert_int_equal(map.entry_cnt, 0);
	/* nothing registered: a region of no bytes */
	attr = attr_of(NULL, 0, FI_REMOTE_READ, 1);
	assert_int_equal(util_mr_map_insert(&map, &attr, NULL, &e), 0);
	util_mr_map_fini(&map);
}

/* Offsets from 0 (no FI_MR_VIRT_ADDR): every check on one single-range registration. */
static void test_checks_offsets(void **state)
{
	struct iovec iov = { mem[0], 100 }, out[4];
	struct fi_mr_attr attr = attr_of(&iov, 1, FI_REMOTE_WRITE, 3);
	struct util_mr_map_entry *e, *got;
	struct util_mr_map map;
	size_t cnt;

	(void) state;
	util_mr_map_init(&map, 0);
	assert_int_equal(util_mr_map_insert(&map, &attr, NULL, &e), 0);

	cnt = 4;
	assert_int_equal(util_mr_map_get(&map, 3, 10, 90, FI_REMOTE_WRITE, out, &cnt, &got), 0);
	assert_ptr_equal(got, e);
	assert_int_equal(cnt, 1);
	assert_ptr_equal(out[0].iov_base, mem[0] + 10);
	assert_int_equal(out[0].iov_len, 90);
	util_mr_map_put(&map, got);

	cnt = 4;
	assert_int_equal(util_mr_map_get(&map, 4, 0, 1, FI_REMOTE_WRITE, out, &cnt, &got),
			 -FI_ENOKEY);
	assert_int_equal(util_mr_map_get(&map, 3, 0, 1, FI_REMOTE_READ, out, &cnt, &got),
			 -FI_EACCES);
	assert_int_equal(util_mr_map_get(&map, 3, 10, 91, FI_REMOTE_WRITE, out, &cnt, &got),
			 -FI_EACCES);
	assert_int_equal(util_mr_map_get(&map, 3, 101, 0, FI_REMOTE_WRITE, out, &cnt, &got),
			 -FI_EACCES);
	assert_int_equal(util_mr_map_get(&map, 3, UINT64_MAX, 2, FI_REMOTE_WRITE, out, &cnt,
					 &got), -FI_EACCES);
	assert_int_equal(util_mr_map_get(&map, 3, 1, SIZE_MAX, FI_REMOTE_WRITE, out, &cnt, &got),
			 -FI_EACCES);
	/* an empty range at the end is inside; it covers nothing */
	assert_int_equal(util_mr_map_get(&map, 3, 100, 0, FI_REMOTE_WRITE, out, &cnt, &got), 0);
	assert_int_equal(cnt, 0);
	util_mr_map_put(&map, got);
	util_mr_map_fini(&map);
}

/* FI_MR_VIRT_ADDR: peers name virtual addresses; below the region is outside. */
static void test_checks_virtual_addresses(void **state)
{
	struct iovec iov = { mem[1] + 64, 64 }, out[1];
	struct fi_mr_attr attr = attr_of(&iov, 1, FI_REMOTE_READ | FI_REMOTE_WRITE, 9);
	struct util_mr_map_entry *e, *got;
	struct util_mr_map map;
	uint64_t base = (uint64_t) (uintptr_t) (mem[1] + 64);
	size_t cnt = 1;

	(void) state;
	util_mr_map_init(&map, FI_MR_VIRT_ADDR);
	assert_int_equal(util_mr_map_insert(&map, &attr, NULL, &e), 0);
	assert_int_equal(util_mr_map_get(&map, 9, base + 8, 8, FI_REMOTE_READ | FI_REMOTE_WRITE,
					 out, &cnt, &got), 0);
	assert_ptr_equal(out[0].iov_base, mem[1] + 72);
	util_mr_map_put(&map, got);
	cnt = 1;
	assert_int_equal(util_mr_map_get(&map, 9, base - 1, 2, FI_REMOTE_READ, out, &cnt, &got),
			 -FI_EACCES);
	assert_int_equal(util_mr_map_get(&map, 9, 0, 1, FI_REMOTE_READ, out, &cnt, &got),
			 -FI_EACCES);
	assert_int_equal(util_mr_map_get(&map, 9, base + 60, 5, FI_REMOTE_READ, out, &cnt, &got),
			 -FI_EACCES);
	util_mr_map_fini(&map);
}

/* Several iovs are one region end to end: a range across them comes back in pieces. */
static void test_translates_across_iovs(void **state)
{
	struct iovec iov[3] = { { mem[0], 10 }, { mem[1], 0 }, { mem[2], 20 } }, out[3];
	struct fi_mr_attr attr = attr_of(iov, 3, FI_REMOTE_READ, 5);
	struct util_mr_map_entry *e, *got;
	struct util_mr_map map;
	size_t cnt = 3;

	(void) state;
	util_mr_map_init(&map, 0);
	assert_int_equal(util_mr_map_insert(&map, &attr, NULL, &e), 0);
	assert_int_equal(e->len, 30);
	assert_int_equal(util_mr_map_get(&map, 5, 4, 16, FI_REMOTE_READ, out, &cnt, &got), 0);
	assert_int_equal(cnt, 2);
	assert_ptr_equal(out[0].iov_base, mem[0] + 4);
	assert_int_equal(out[0].iov_len, 6);
	assert_ptr_equal(out[1].iov_base, mem[2]);
	assert_int_equal(out[1].iov_len, 10);
	util_mr_map_put(&map, got);
	/* inside the second range only */
	cnt = 3;
	assert_int_equal(util_mr_map_get(&map, 5, 15, 15, FI_REMOTE_READ, out, &cnt, &got), 0);
	assert_int_equal(cnt, 1);
	assert_ptr_equal(out[0].iov_base, mem[2] + 5);
	util_mr_map_put(&map, got);
	/* not enough room for the pieces */
	cnt = 1;
	assert_int_equal(util_mr_map_get(&map, 5, 0, 30, FI_REMOTE_READ, out, &cnt, &got),
			 -FI_ETOOSMALL);
	util_mr_map_fini(&map);
}

/* A registration closed under a transfer: gone for every later request, freed at the last put. */
static void test_remove_while_in_use(void **state)
{
	struct iovec iov = { mem[0], 8 }, out[1];
	struct fi_mr_attr attr = attr_of(&iov, 1, FI_REMOTE_WRITE, 11);
	struct util_mr_map_entry *e, *got;
	struct util_mr_map map;
	size_t cnt = 1;

	(void) state;
	util_mr_map_init(&map, 0);
	assert_int_equal(util_mr_map_insert(&map, &attr, NULL, &e), 0);
	assert_int_equal(util_mr_map_get(&map, 11, 0, 8, FI_REMOTE_WRITE, out, &cnt, &got), 0);
	util_mr_map_remove(&map, e);
	cnt = 1;
	assert_int_equal(util_mr_map_get(&map, 11, 0, 8, FI_REMOTE_WRITE, out, &cnt, &e),
			 -FI_ENOKEY);
	/* the key may be registered again meanwhile */
	assert_int_equal(util_mr_map_insert(&map, &attr, NULL, &e), 0);
	assert_ptr_not_equal(e, got);
	assert_int_equal(got->ref, 1);
	util_mr_map_put(&map, got); /* freed here (a leak shows under ASan and valgrind) */
	util_mr_map_fini(&map);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_requested_keys),
		cmocka_unit_test(test_provider_keys),
		cmocka_unit_test(test_bad_attributes),
		cmocka_unit_test(test_checks_offsets),
		cmocka_unit_test(test_checks_virtual_addresses),
		cmocka_unit_test(test_translates_across_iovs),
		cmocka_unit_test(test_remove_while_in_use),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
