/* Unit tests of util/mr_cache.c: reuse, sharing, capacity, order of release, failures. */
#include "config.h"

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "util/mr_cache.h"

static struct fi_provider test_prov = { .name = "util_test" };
struct fi_provider *util_prov = &test_prov;

#define CAPACITY 3

/* The owner's side: registrations are numbered, and counted while live. */
struct fixture {
	struct util_mr_cache cache;
	int reg_cnt;               /* registrations made */
	int live_cnt;              /* registrations not released */
	int fail_next;             /* the next registration fails with this (0: none) */
	uintptr_t released[16];    /* the handles released, in order */
	int released_cnt;
	char mem[64];
};

static int reg(void *arg, const struct iovec *iov, uint64_t access, void **handle)
{
	struct fixture *f = arg;

	if (f->fail_next) {
		int ret = f->fail_next;

		f->fail_next = 0;
		return ret;
	}
	f->live_cnt++;
	*handle = (void *) (uintptr_t) ++f->reg_cnt;
	return 0;
}

static void dereg(void *arg, void *handle)
{
	struct fixture *f = arg;

	f->live_cnt--;
	if (f->released_cnt < 16)
		f->released[f->released_cnt++] = (uintptr_t) handle;
}

static int setup(void **state)
{
	struct fixture *f = test_calloc(1, sizeof(*f));

	if (!f)
		return -1;
	util_mr_cache_init(&f->cache, CAPACITY, reg, dereg, f);
	*state = f;
	return 0;
}

/* Every test gives back what it took: fini then releases everything. */
static int teardown(void **state)
{
	struct fixture *f = *state;

	util_mr_cache_fini(&f->cache);
	assert_int_equal(f->live_cnt, 0);
	assert_int_equal(util_mr_cache_count(&f->cache), 0);
	test_free(f);
	return 0;
}

static struct util_mr_cache_entry *get(struct fixture *f, size_t off, size_t len,
				       uint64_t access)
{
	struct iovec iov = { .iov_base = f->mem + off, .iov_len = len };
	struct util_mr_cache_entry *entry = NULL;

	assert_int_equal(util_mr_cache_get(&f->cache, &iov, access, &entry), 0);
	return entry;
}

static void test_same_range_is_registered_once(void **state)
{
	struct fixture *f = *state;
	struct util_mr_cache_entry *a, *b;

	a = get(f, 0, 16, FI_REMOTE_READ);
	util_mr_cache_put(&f->cache, a);
	b = get(f, 0, 16, FI_REMOTE_READ);
	assert_ptr_equal(a, b);
	assert_int_equal(f->reg_cnt, 1);
	assert_int_equal(f->cache.hit_cnt, 1);
	assert_int_equal(f->cache.miss_cnt, 1);
	util_mr_cache_put(&f->cache, b);
	/* kept unused until the end */
	assert_int_equal(f->live_cnt, 1);
}

static void test_other_length_or_access_is_another_entry(void **state)
{
	struct fixture *f = *state;
	struct util_mr_cache_entry *a, *b, *c;

	a = get(f, 0, 16, FI_REMOTE_READ);
	b = get(f, 0, 8, FI_REMOTE_READ);
	c = get(f, 0, 16, FI_REMOTE_WRITE);
	assert_ptr_not_equal(a, b);
	assert_ptr_not_equal(a, c);
	assert_int_equal(f->reg_cnt, 3);
	util_mr_cache_put(&f->cache, a);
	util_mr_cache_put(&f->cache, b);
	util_mr_cache_put(&f->cache, c);
}

static void test_users_share_an_entry_in_use(void **state)
{
	struct fixture *f = *state;
	struct util_mr_cache_entry *a, *b;

	a = get(f, 4, 16, FI_REMOTE_READ);
	b = get(f, 4, 16, FI_REMOTE_READ);
	assert_ptr_equal(a, b);
	assert_int_equal(a->ref, 2);
	util_mr_cache_put(&f->cache, a);
	/* still in use: not on the unused list */
	assert_int_equal(f->cache.lru_cnt, 0);
	util_mr_cache_put(&f->cache, b);
	assert_int_equal(f->cache.lru_cnt, 1);
}

static void test_capacity_releases_least_recently_used(void **state)
{
	struct fixture *f = *state;
	struct util_mr_cache_entry *e[5];
	int i;

	for (i = 0; i < 5; i++)
		e[i] = get(f, (size_t) i, 8, FI_REMOTE_READ);
	/* in use: all five live whatever the capacity */
	assert_int_equal(f->live_cnt, 5);
	for (i = 0; i < 5; i++)
		util_mr_cache_put(&f->cache, e[i]);
	/* unused: the two used least recently go */
	assert_int_equal(f->live_cnt, CAPACITY);
	assert_int_equal(f->released_cnt, 2);
	assert_int_equal(f->released[0], 1);
	assert_int_equal(f->released[1], 2);
	/* a hit makes an entry recent again */
	e[2] = get(f, 2, 8, FI_REMOTE_READ);
	util_mr_cache_put(&f->cache, e[2]);
	e[0] = get(f, 0, 8, FI_REMOTE_READ);
	util_mr_cache_put(&f->cache, e[0]);
	assert_int_equal(f->released[2], 4);
}

static void test_flush_releases_unused_only(void **state)
{
	struct fixture *f = *state;
	struct util_mr_cache_entry *a, *b;

	a = get(f, 0, 8, FI_REMOTE_READ);
	b = get(f, 8, 8, FI_REMOTE_READ);
	util_mr_cache_put(&f->cache, a);
	util_mr_cache_flush(&f->cache);
	assert_int_equal(f->live_cnt, 1);
	assert_int_equal(util_mr_cache_count(&f->cache), 1);
	util_mr_cache_put(&f->cache, b);
}

static void test_no_capacity_releases_when_unused(void **state)
{
	struct fixture *f = *state;
	struct util_mr_cache_entry *a;

	f->cache.capacity = 0;
	a = get(f, 0, 8, FI_REMOTE_READ);
	util_mr_cache_put(&f->cache, a);
	assert_int_equal(f->live_cnt, 0);
	a = get(f, 0, 8, FI_REMOTE_READ);
	assert_int_equal(f->reg_cnt, 2);
	util_mr_cache_put(&f->cache, a);
}

static void test_failures(void **state)
{
	struct fixture *f = *state;
	struct iovec iov = { .iov_base = f->mem, .iov_len = 0 };
	struct util_mr_cache_entry *entry = NULL;

	assert_int_equal(util_mr_cache_get(&f->cache, &iov, FI_REMOTE_READ, &entry), -FI_EINVAL);
	iov.iov_len = 8;
	f->fail_next = -FI_ENOKEY;
	assert_int_equal(util_mr_cache_get(&f->cache, &iov, FI_REMOTE_READ, &entry), -FI_ENOKEY);
	assert_null(entry);
	assert_int_equal(util_mr_cache_count(&f->cache), 0);
	/* nothing was kept of the failure: the next get registers */
	entry = get(f, 0, 8, FI_REMOTE_READ);
	assert_int_equal(f->reg_cnt, 1);
	util_mr_cache_put(&f->cache, entry);
}

#define MR_TEST(name) cmocka_unit_test_setup_teardown(name, setup, teardown)

int main(void)
{
	const struct CMUnitTest tests[] = {
		MR_TEST(test_same_range_is_registered_once),
		MR_TEST(test_other_length_or_access_is_another_entry),
		MR_TEST(test_users_share_an_entry_in_use),
		MR_TEST(test_capacity_releases_least_recently_used),
		MR_TEST(test_flush_releases_unused_only),
		MR_TEST(test_no_capacity_releases_when_unused),
		MR_TEST(test_failures),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
