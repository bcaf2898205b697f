/*
 * Unit tests of util/av_set: order after every operation, refusals (duplicate insert,
 * removal of a non-member, the reserved id), self union/intersect/diff, empty sets, the
 * bitmap and hash forms and the moves between them, all-or-nothing union under allocation
 * failure, and long random runs checked against a plain array model.
 *
 * Allocation failures are injected through the linker's --wrap of malloc, calloc and realloc
 * (see tests/unit/local.mk): only util's calls go through the wrappers below.
 */
#include "config.h"

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "util/av_set.h"

#define NO_ID UTIL_AV_SET_NO_ID
#define MODEL_MAX 512

/* ---- allocation failure injection ---- */

void *__real_malloc(size_t size);
void *__real_calloc(size_t n, size_t size);
void *__real_realloc(void *ptr, size_t size);

/* allocations left before the next one fails; < 0: never fail */
static long alloc_budget = -1;

static bool alloc_fails(void)
{
	if (alloc_budget < 0)
		return false;
	if (alloc_budget == 0)
		return true;
	alloc_budget--;
	return false;
}

void *__wrap_malloc(size_t size)
{
	return alloc_fails() ? NULL : __real_malloc(size);
}

void *__wrap_calloc(size_t n, size_t size)
{
	return alloc_fails() ? NULL : __real_calloc(n, size);
}

void *__wrap_realloc(void *ptr, size_t size)
{
	return alloc_fails() ? NULL : __real_realloc(ptr, size);
}

/* ---- helpers ---- */

static int setup_set(void **state)
{
	struct util_av_set *set = malloc(sizeof(*set));

	if (!set || util_av_set_init(set, 0)) {
		free(set);
		return -1;
	}
	*state = set;
	return 0;
}

static int teardown_set(void **state)
{
	struct util_av_set *set = *state;

	util_av_set_fini(set);
	free(set);
	return 0;
}

static void insert_all(struct util_av_set *set, const uint64_t *ids, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		assert_int_equal(util_av_set_insert(set, ids[i]), 0);
}

/* The set holds exactly ids, in this order, and its index agrees. */
static void assert_members(const struct util_av_set *set, const uint64_t *ids, size_t n)
{
	size_t i;

	assert_int_equal(util_av_set_count(set), n);
	for (i = 0; i < n; i++) {
		assert_int_equal(util_av_set_ids(set)[i], ids[i]);
		assert_true(util_av_set_contains(set, ids[i]));
	}
}

/* ---- tests ---- */

static void test_empty(void **state)
{
	struct util_av_set *set = *state;
	struct util_av_set other;

	assert_int_equal(util_av_set_count(set), 0);
	assert_false(util_av_set_contains(set, 0));
	assert_false(util_av_set_contains(set, NO_ID));
	assert_int_equal(util_av_set_remove(set, 0), -FI_ENOENT);
	assert_int_equal(util_av_set_insert(set, NO_ID), -FI_EINVAL);
	assert_false(util_av_set_contains(set, NO_ID));

	/* every operation between empty sets, and with itself */
	assert_int_equal(util_av_set_init(&other, 0), 0);
	assert_int_equal(util_av_set_union(set, &other), 0);
	util_av_set_intersect(set, &other);
	util_av_set_diff(set, &other);
	assert_int_equal(util_av_set_union(set, set), 0);
	util_av_set_intersect(set, set);
	util_av_set_diff(set, set);
	util_av_set_clear(set);
	assert_int_equal(util_av_set_count(set), 0);
	util_av_set_fini(&other);
}

static void test_insert_order(void **state)
{
	struct util_av_set *set = *state;
	const uint64_t ids[] = {7, 3, 9, 0, 1000, 4};
	const uint64_t *before;

	insert_all(set, ids, UTIL_ARRAY_SIZE(ids));
	assert_members(set, ids, UTIL_ARRAY_SIZE(ids));

	/* a duplicate is refused and changes nothing, wherever it is */
	before = util_av_set_ids(set);
	assert_int_equal(util_av_set_insert(set, 7), -FI_EALREADY);
	assert_int_equal(util_av_set_insert(set, 4), -FI_EALREADY);
	assert_int_equal(util_av_set_insert(set, 1000), -FI_EALREADY);
	assert_ptr_equal(util_av_set_ids(set), before);
	assert_members(set, ids, UTIL_ARRAY_SIZE(ids));
	assert_false(util_av_set_contains(set, 5));
	assert_false(util_av_set_contains(set, 1001));
	assert_false(util_av_set_contains(set, 1ULL << 40));

	/* push: the same append, without the membership test */
	assert_int_equal(util_av_set_push(set, 5), 0);
	assert_int_equal(util_av_set_push(set, 1ULL << 40), 0);
	assert_int_equal(util_av_set_count(set), UTIL_ARRAY_SIZE(ids) + 2);
	assert_true(util_av_set_contains(set, 5));
	assert_true(util_av_set_contains(set, 1ULL << 40));
	assert_int_equal(util_av_set_ids(set)[UTIL_ARRAY_SIZE(ids) + 1], 1ULL << 40);
}

static void test_remove_order(void **state)
{
	struct util_av_set *set = *state;
	const uint64_t ids[] = {10, 11, 12, 13, 14, 15};
	const uint64_t no_middle[] = {10, 11, 13, 14, 15};
	const uint64_t no_ends[] = {11, 13, 14};

	insert_all(set, ids, UTIL_ARRAY_SIZE(ids));
	assert_int_equal(util_av_set_remove(set, 12), 0);
	assert_members(set, no_middle, UTIL_ARRAY_SIZE(no_middle));
	assert_false(util_av_set_contains(set, 12));
	assert_int_equal(util_av_set_remove(set, 12), -FI_ENOENT);
	assert_int_equal(util_av_set_remove(set, 99), -FI_ENOENT);
	assert_int_equal(util_av_set_remove(set, NO_ID), -FI_ENOENT);
	assert_members(set, no_middle, UTIL_ARRAY_SIZE(no_middle));

	assert_int_equal(util_av_set_remove(set, 10), 0);
	assert_int_equal(util_av_set_remove(set, 15), 0);
	assert_members(set, no_ends, UTIL_ARRAY_SIZE(no_ends));

	/* a removed id can come back, at the end */
	assert_int_equal(util_av_set_insert(set, 10), 0);
	assert_int_equal(util_av_set_ids(set)[3], 10);
	util_av_set_clear(set);
	assert_int_equal(util_av_set_count(set), 0);
	assert_false(util_av_set_contains(set, 11));
}

static void test_union(void **state)
{
	struct util_av_set *dst = *state;
	struct util_av_set src;
	const uint64_t d[] = {5, 1, 9};
	const uint64_t s[] = {8, 9, 2, 5, 7};
	const uint64_t want[] = {5, 1, 9, 8, 2, 7};

	assert_int_equal(util_av_set_init(&src, 0), 0);
	insert_all(dst, d, UTIL_ARRAY_SIZE(d));
	insert_all(&src, s, UTIL_ARRAY_SIZE(s));

	/* new members at the end in src's order; existing ones where they were */
	assert_int_equal(util_av_set_union(dst, &src), 0);
	assert_members(dst, want, UTIL_ARRAY_SIZE(want));
	assert_members(&src, s, UTIL_ARRAY_SIZE(s));

	/* again: nothing new */
	assert_int_equal(util_av_set_union(dst, &src), 0);
	assert_members(dst, want, UTIL_ARRAY_SIZE(want));
	/* with itself: unchanged */
	assert_int_equal(util_av_set_union(dst, dst), 0);
	assert_members(dst, want, UTIL_ARRAY_SIZE(want));

	/* into an empty set: a copy in src's order */
	util_av_set_clear(dst);
	assert_int_equal(util_av_set_union(dst, &src), 0);
	assert_members(dst, s, UTIL_ARRAY_SIZE(s));
	util_av_set_fini(&src);
}

static void test_intersect(void **state)
{
	struct util_av_set *dst = *state;
	struct util_av_set src, empty;
	const uint64_t d[] = {4, 8, 15, 16, 23, 42};
	const uint64_t s[] = {42, 16, 99, 4};
	const uint64_t want[] = {4, 16, 42};

	assert_int_equal(util_av_set_init(&src, 0), 0);
	assert_int_equal(util_av_set_init(&empty, 0), 0);
	insert_all(dst, d, UTIL_ARRAY_SIZE(d));
	insert_all(&src, s, UTIL_ARRAY_SIZE(s));

	util_av_set_intersect(dst, &src);
	assert_members(dst, want, UTIL_ARRAY_SIZE(want));
	assert_false(util_av_set_contains(dst, 8));
	assert_false(util_av_set_contains(dst, 99));
	assert_members(&src, s, UTIL_ARRAY_SIZE(s));

	util_av_set_intersect(dst, dst);
	assert_members(dst, want, UTIL_ARRAY_SIZE(want));

	util_av_set_intersect(dst, &empty);
	assert_int_equal(util_av_set_count(dst), 0);
	assert_false(util_av_set_contains(dst, 4));

	/* an empty dst stays empty */
	util_av_set_intersect(dst, &src);
	assert_int_equal(util_av_set_count(dst), 0);
	util_av_set_fini(&src);
	util_av_set_fini(&empty);
}

static void test_diff(void **state)
{
	struct util_av_set *dst = *state;
	struct util_av_set src, empty;
	const uint64_t d[] = {4, 8, 15, 16, 23, 42};
	const uint64_t s[] = {42, 16, 99, 4};
	const uint64_t want[] = {8, 15, 23};

	assert_int_equal(util_av_set_init(&src, 0), 0);
	assert_int_equal(util_av_set_init(&empty, 0), 0);
	insert_all(dst, d, UTIL_ARRAY_SIZE(d));
	insert_all(&src, s, UTIL_ARRAY_SIZE(s));

	util_av_set_diff(dst, &src);
	assert_members(dst, want, UTIL_ARRAY_SIZE(want));
	assert_false(util_av_set_contains(dst, 42));
	assert_members(&src, s, UTIL_ARRAY_SIZE(s));

	util_av_set_diff(dst, &empty);
	assert_members(dst, want, UTIL_ARRAY_SIZE(want));

	/* with itself: empty, and usable afterwards */
	util_av_set_diff(dst, dst);
	assert_int_equal(util_av_set_count(dst), 0);
	assert_false(util_av_set_contains(dst, 8));
	assert_int_equal(util_av_set_insert(dst, 8), 0);
	assert_int_equal(util_av_set_count(dst), 1);
	util_av_set_fini(&src);
	util_av_set_fini(&empty);
}

/* Dense ids use the bitmap; one far id turns the index into a hash; growth turns it back. */
static void test_forms(void **state)
{
	struct util_av_set *set = *state;
	struct util_av_set dense;
	const uint64_t far = 1ULL << 50;
	uint64_t i;

	for (i = 0; i < 100; i++)
		assert_int_equal(util_av_set_insert(set, i * 3), 0);
	assert_true(util_av_set_is_bitmap(set));

	assert_int_equal(util_av_set_insert(set, far), 0);
	assert_false(util_av_set_is_bitmap(set));
	assert_int_equal(util_av_set_insert(set, far), -FI_EALREADY);
	assert_int_equal(util_av_set_insert(set, NO_ID - 1), 0);
	for (i = 0; i < 100; i++)
		assert_true(util_av_set_contains(set, i * 3));
	assert_false(util_av_set_contains(set, 1));
	assert_int_equal(util_av_set_ids(set)[100], far);
	assert_int_equal(util_av_set_ids(set)[101], NO_ID - 1);

	/* operations between a hash set and a bitmap set, both ways */
	assert_int_equal(util_av_set_init(&dense, 0), 0);
	for (i = 0; i < 300; i++)
		assert_int_equal(util_av_set_insert(&dense, i), 0);
	assert_true(util_av_set_is_bitmap(&dense));
	util_av_set_intersect(&dense, set);
	assert_int_equal(util_av_set_count(&dense), 100);
	assert_int_equal(util_av_set_ids(&dense)[1], 3);
	assert_int_equal(util_av_set_union(&dense, set), 0);
	assert_int_equal(util_av_set_count(&dense), 102);
	assert_false(util_av_set_is_bitmap(&dense));
	util_av_set_diff(set, &dense);
	assert_int_equal(util_av_set_count(set), 0);

	/* without the far ids, the next growth rebuilds a bitmap */
	assert_int_equal(util_av_set_remove(&dense, far), 0);
	assert_int_equal(util_av_set_remove(&dense, NO_ID - 1), 0);
	for (i = 1000; util_av_set_count(&dense) < 4096; i++)
		assert_int_equal(util_av_set_insert(&dense, i), 0);
	assert_true(util_av_set_is_bitmap(&dense));
	assert_true(util_av_set_contains(&dense, 297));
	assert_false(util_av_set_contains(&dense, 298));
	assert_int_equal(util_av_set_ids(&dense)[0], 0);
	util_av_set_fini(&dense);
}

/*
 * Ids dense above a large offset (FI_AV_MAP handles sharing a generation) keep a bitmap whose
 * window starts near them, in either order of insertion; a far id turns it into a hash.
 */
static void test_window(void **state)
{
	struct util_av_set *set = *state;
	struct util_av_set other;
	const uint64_t base = 7ULL << 32;
	uint64_t i;

	for (i = 100; i < 200; i++)
		assert_int_equal(util_av_set_insert(set, base + i), 0);
	assert_true(util_av_set_is_bitmap(set));
	assert_int_equal(util_av_set_insert(set, base + 5), 0);
	assert_true(util_av_set_is_bitmap(set));
	assert_true(util_av_set_contains(set, base + 5));
	assert_true(util_av_set_contains(set, base + 150));
	assert_false(util_av_set_contains(set, base + 6));
	assert_false(util_av_set_contains(set, 5));
	assert_false(util_av_set_contains(set, base - 64));
	assert_int_equal(util_av_set_insert(set, base + 5), -FI_EALREADY);
	assert_int_equal(util_av_set_ids(set)[100], base + 5);

	/* descending: the window moves down in doublings, and stays a bitmap */
	assert_int_equal(util_av_set_init(&other, 0), 0);
	for (i = 20000; i > 0; i--)
		assert_int_equal(util_av_set_insert(&other, base + i), 0);
	assert_true(util_av_set_is_bitmap(&other));
	assert_int_equal(util_av_set_count(&other), 20000);
	assert_true(util_av_set_mem_size(&other) <= 2 * 32768 * sizeof(uint64_t));

	/* other's (descending) order survives */
	util_av_set_intersect(&other, set);
	assert_int_equal(util_av_set_count(&other), 101);
	assert_int_equal(util_av_set_ids(&other)[0], base + 199);
	assert_int_equal(util_av_set_ids(&other)[99], base + 100);
	assert_int_equal(util_av_set_ids(&other)[100], base + 5);
	assert_int_equal(util_av_set_remove(&other, base + 5), 0);
	assert_int_equal(util_av_set_union(&other, set), 0);
	assert_int_equal(util_av_set_count(&other), 101);
	assert_int_equal(util_av_set_ids(&other)[100], base + 5);

	/* a small id far below the window: a hash, still right */
	assert_int_equal(util_av_set_insert(&other, 3), 0);
	assert_false(util_av_set_is_bitmap(&other));
	assert_true(util_av_set_contains(&other, 3));
	assert_true(util_av_set_contains(&other, base + 150));
	util_av_set_diff(set, &other);
	assert_int_equal(util_av_set_count(set), 0);
	/* empty: the window may go anywhere */
	assert_int_equal(util_av_set_insert(set, 1ULL << 62), 0);
	assert_true(util_av_set_is_bitmap(set));
	assert_true(util_av_set_contains(set, 1ULL << 62));
	assert_false(util_av_set_contains(set, base + 150));
	util_av_set_fini(&other);
}

/* A large count hint preallocates a bounded amount and never caps growth. */
static void test_count_hint(void **state)
{
	struct util_av_set set;
	uint64_t i;

	assert_int_equal(util_av_set_init(&set, SIZE_MAX), 0);
	assert_true(util_av_set_mem_size(&set) <= (64UL << 20));
	util_av_set_fini(&set);

	assert_int_equal(util_av_set_init(&set, 4), 0);
	for (i = 0; i < 10000; i++)
		assert_int_equal(util_av_set_insert(&set, 10000 - i), 0);
	assert_int_equal(util_av_set_count(&set), 10000);
	assert_int_equal(util_av_set_ids(&set)[9999], 1);
	assert_int_equal(util_av_set_reserve(&set, 20000), 0);
	assert_int_equal(util_av_set_reserve(&set, 10), 0);
	assert_int_equal(util_av_set_reserve(&set, SIZE_MAX), -FI_ENOMEM);
	assert_int_equal(util_av_set_count(&set), 10000);
	util_av_set_fini(&set);
}

/* Ids whose low bits are equal (large power-of-two strides) must not pile up in the hash. */
static void test_strided_hash(void **state)
{
	struct util_av_set *set = *state;
	uint64_t i;

	assert_int_equal(util_av_set_insert(set, 1ULL << 62), 0);
	for (i = 0; i < 20000; i++)
		assert_int_equal(util_av_set_insert(set, i << 32), 0);
	assert_false(util_av_set_is_bitmap(set));
	for (i = 0; i < 20000; i += 2)
		assert_int_equal(util_av_set_remove(set, i << 32), 0);
	for (i = 0; i < 20000; i++)
		assert_int_equal(util_av_set_contains(set, i << 32), i % 2 == 1);
	assert_int_equal(util_av_set_count(set), 10001);
}

/* Union is all or nothing: an allocation failure at any point leaves dst as it was. */
static void test_union_enomem(void **state)
{
	struct util_av_set dst, src;
	uint64_t want[64];
	long budget;
	int ret = -FI_ENOMEM;
	uint64_t i;

	assert_int_equal(util_av_set_init(&dst, 0), 0);
	assert_int_equal(util_av_set_init(&src, 0), 0);
	for (i = 0; i < 10; i++) {
		want[i] = i * 2;
		assert_int_equal(util_av_set_insert(&dst, want[i]), 0);
	}
	/* growth, a bitmap extension and a move to the hash are all on src's path */
	for (i = 0; i < 40; i++)
		assert_int_equal(util_av_set_insert(&src, i * 70000), 0);
	assert_int_equal(util_av_set_insert(&src, 1ULL << 45), 0);

	for (budget = 0; ret == -FI_ENOMEM; budget++) {
		alloc_budget = budget;
		ret = util_av_set_union(&dst, &src);
		alloc_budget = -1;
		if (ret == -FI_ENOMEM) {
			assert_members(&dst, want, 10);
			assert_false(util_av_set_contains(&dst, 70000));
			assert_false(util_av_set_contains(&dst, 1ULL << 45));
		}
	}
	assert_int_equal(ret, 0);
	assert_true(budget > 1);
	assert_int_equal(util_av_set_count(&dst), 10 + 39 + 1);
	assert_int_equal(util_av_set_ids(&dst)[10], 70000);
	assert_int_equal(util_av_set_ids(&dst)[49], 1ULL << 45);

	/* insert and init fail cleanly too */
	alloc_budget = 0;
	for (i = 0; i < 100 && util_av_set_insert(&src, 1000 + i) == 0; i++)
		;
	alloc_budget = -1;
	assert_false(util_av_set_contains(&src, 1000 + i));
	util_av_set_fini(&dst);
	alloc_budget = 0;
	assert_int_equal(util_av_set_init(&dst, 0), -FI_ENOMEM);
	alloc_budget = -1;
	util_av_set_fini(&dst);
	util_av_set_fini(&src);
}

/* Intersect and diff never fail: without memory for a smaller hash they refill the old one. */
static void test_filter_enomem(void **state)
{
	struct util_av_set set, other;
	uint64_t i;

	assert_int_equal(util_av_set_init(&set, 0), 0);
	assert_int_equal(util_av_set_init(&other, 0), 0);
	for (i = 0; i < 1000; i++)
		assert_int_equal(util_av_set_insert(&set, i << 40), 0);
	for (i = 0; i < 1000; i += 3)
		assert_int_equal(util_av_set_insert(&other, i << 40), 0);
	assert_false(util_av_set_is_bitmap(&set));
	assert_int_equal(util_av_set_reserve(&set, 4000), 0);

	alloc_budget = 0;
	util_av_set_intersect(&set, &other);
	alloc_budget = -1;
	assert_int_equal(util_av_set_count(&set), 334);
	for (i = 0; i < 1000; i++)
		assert_int_equal(util_av_set_contains(&set, i << 40), i % 3 == 0);
	assert_int_equal(util_av_set_ids(&set)[1], 3ULL << 40);

	/* with memory, the hash shrinks to the survivors */
	util_av_set_fini(&other);
	assert_int_equal(util_av_set_init(&other, 0), 0);
	for (i = 0; i < 1000; i += 6)
		assert_int_equal(util_av_set_insert(&other, i << 40), 0);
	util_av_set_diff(&set, &other);
	assert_int_equal(util_av_set_count(&set), 167);
	assert_int_equal(util_av_set_ids(&set)[0], 3ULL << 40);
	assert_true(util_av_set_mem_size(&set) < 4000 * sizeof(uint64_t) + 1024 * sizeof(uint64_t));
	for (i = 0; i < 1000; i++)
		assert_int_equal(util_av_set_contains(&set, i << 40), i % 6 == 3);
	util_av_set_fini(&set);
	util_av_set_fini(&other);
}

/* ---- random runs against a plain model ---- */

struct model {
	uint64_t ids[MODEL_MAX];
	size_t n;
};

static bool model_has(const struct model *m, uint64_t id)
{
	size_t i;

	for (i = 0; i < m->n; i++)
		if (m->ids[i] == id)
			return true;
	return false;
}

static void model_filter(struct model *m, const struct model *other, bool keep_if)
{
	struct model out = {.n = 0};
	size_t i;

	for (i = 0; i < m->n; i++)
		if (model_has(other, m->ids[i]) == keep_if)
			out.ids[out.n++] = m->ids[i];
	*m = out;
}

static uint64_t rng_next(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

/* An id from one of several shapes, so both index forms and their moves are exercised. */
static uint64_t random_id(uint64_t *rng, unsigned shape)
{
	uint64_t r = rng_next(rng);

	switch (shape) {
	case 0:
		return r % 200; /* dense */
	case 1:
		return (r % 200) * 4096; /* strided */
	case 2:
		return (r % 200) << 40; /* sparse, equal low bits */
	case 3:
		return (5ULL << 40) + r % 300; /* dense above an offset */
	default:
		return r % 4 ? r % 300 : r % NO_ID; /* mostly dense, sometimes huge */
	}
}

static void run_random(unsigned shape, uint64_t seed)
{
	struct util_av_set sets[3];
	struct model models[3];
	uint64_t rng = seed, id;
	unsigned step, a, b;
	size_t i;
	int ret;

	for (a = 0; a < 3; a++) {
		assert_int_equal(util_av_set_init(&sets[a], a * 50), 0);
		models[a].n = 0;
	}
	for (step = 0; step < 20000; step++) {
		a = (unsigned) (rng_next(&rng) % 3);
		b = (unsigned) (rng_next(&rng) % 3);
		id = random_id(&rng, shape);
		switch (rng_next(&rng) % 16) {
		case 0:
			if (models[a].n + models[b].n > MODEL_MAX)
				break;
			assert_int_equal(util_av_set_union(&sets[a], &sets[b]), 0);
			for (i = 0; i < models[b].n; i++)
				if (!model_has(&models[a], models[b].ids[i]))
					models[a].ids[models[a].n++] = models[b].ids[i];
			break;
		case 1:
			util_av_set_intersect(&sets[a], &sets[b]);
			if (a != b)
				model_filter(&models[a], &models[b], true);
			break;
		case 2:
			util_av_set_diff(&sets[a], &sets[b]);
			if (a == b)
				models[a].n = 0;
			else
				model_filter(&models[a], &models[b], false);
			break;
		case 3:
			if (rng_next(&rng) % 8 == 0) {
				util_av_set_clear(&sets[a]);
				models[a].n = 0;
			}
			break;
		case 4:
		case 5:
		case 6:
		case 7:
		case 8:
			if (models[a].n)
				id = models[a].ids[rng_next(&rng) % models[a].n];
			ret = util_av_set_remove(&sets[a], id);
			if (model_has(&models[a], id)) {
				assert_int_equal(ret, 0);
				model_filter(&models[a], &(struct model){.ids = {id}, .n = 1},
					     false);
			} else {
				assert_int_equal(ret, -FI_ENOENT);
			}
			break;
		default:
			if (models[a].n == MODEL_MAX)
				break;
			ret = util_av_set_insert(&sets[a], id);
			if (model_has(&models[a], id)) {
				assert_int_equal(ret, -FI_EALREADY);
			} else {
				assert_int_equal(ret, 0);
				models[a].ids[models[a].n++] = id;
			}
			break;
		}
		assert_members(&sets[a], models[a].ids, models[a].n);
		id = random_id(&rng, shape);
		assert_int_equal(util_av_set_contains(&sets[a], id), model_has(&models[a], id));
	}
	for (a = 0; a < 3; a++) {
		assert_members(&sets[a], models[a].ids, models[a].n);
		util_av_set_fini(&sets[a]);
	}
}

static void test_random_dense(void **state)
{
	run_random(0, 0x1234567887654321ULL);
}

static void test_random_strided(void **state)
{
	run_random(1, 0xfeedfacecafebeefULL);
}

static void test_random_sparse(void **state)
{
	run_random(2, 42);
}

static void test_random_offset(void **state)
{
	run_random(3, 99);
}

static void test_random_mixed(void **state)
{
	run_random(4, 7);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_empty, setup_set, teardown_set),
		cmocka_unit_test_setup_teardown(test_insert_order, setup_set, teardown_set),
		cmocka_unit_test_setup_teardown(test_remove_order, setup_set, teardown_set),
		cmocka_unit_test_setup_teardown(test_union, setup_set, teardown_set),
		cmocka_unit_test_setup_teardown(test_intersect, setup_set, teardown_set),
		cmocka_unit_test_setup_teardown(test_diff, setup_set, teardown_set),
		cmocka_unit_test_setup_teardown(test_forms, setup_set, teardown_set),
		cmocka_unit_test_setup_teardown(test_window, setup_set, teardown_set),
		cmocka_unit_test(test_count_hint),
		cmocka_unit_test_setup_teardown(test_strided_hash, setup_set, teardown_set),
		cmocka_unit_test(test_union_enomem),
		cmocka_unit_test(test_filter_enomem),
		cmocka_unit_test(test_random_dense),
		cmocka_unit_test(test_random_strided),
		cmocka_unit_test(test_random_sparse),
		cmocka_unit_test(test_random_offset),
		cmocka_unit_test(test_random_mixed),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
