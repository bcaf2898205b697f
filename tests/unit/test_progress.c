/* Unit tests of util/progress.c: every hook runs, trywait asks them all, each visits every
 * owner, add and del. */
#include "config.h"

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "util/progress.h"

static struct fi_provider test_prov = { .name = "util_test" };
struct fi_provider *util_prov = &test_prov;

/* One owner: counts its progress calls, answers trywait as told. */
struct owner {
	struct util_progress_hook hook;
	int progress_cnt;
	int trywait_cnt;
	int trywait_ret;
};

static void owner_progress(void *arg)
{
	((struct owner *) arg)->progress_cnt++;
}

static int owner_trywait(void *arg)
{
	struct owner *o = arg;

	o->trywait_cnt++;
	return o->trywait_ret;
}

static void owner_init(struct owner *o)
{
	o->hook.progress = (struct util_progress) {
		.progress = owner_progress,
		.trywait = owner_trywait,
		.arg = o,
	};
}

static void test_run_and_trywait_reach_every_owner(void **state)
{
	struct util_progress_set set;
	struct owner a = { 0 }, b = { 0 };

	util_progress_set_init(&set, true);
	assert_true(util_progress_set_is_empty(&set));
	/* nothing bound: nothing to run, and sleeping is safe */
	util_progress_set_run(&set);
	assert_int_equal(util_progress_set_trywait(&set), 0);

	owner_init(&a);
	owner_init(&b);
	util_progress_set_add(&set, &a.hook);
	util_progress_set_add(&set, &b.hook);
	util_progress_set_run(&set);
	assert_int_equal(a.progress_cnt, 1);
	assert_int_equal(b.progress_cnt, 1);

	assert_int_equal(util_progress_set_trywait(&set), 0);
	assert_int_equal(a.trywait_cnt, 1);
	assert_int_equal(b.trywait_cnt, 1);
	/* one owner with something pending keeps the caller awake */
	b.trywait_ret = -FI_EAGAIN;
	assert_int_equal(util_progress_set_trywait(&set), -FI_EAGAIN);

	util_progress_set_del(&set, &a.hook);
	util_progress_set_run(&set);
	assert_int_equal(a.progress_cnt, 1);
	assert_int_equal(b.progress_cnt, 2);
	util_progress_set_del(&set, &b.hook);
	assert_true(util_progress_set_is_empty(&set));
	util_progress_set_fini(&set);
}

static void test_hook_without_trywait_allows_sleep(void **state)
{
	struct util_progress_set set;
	struct owner a = { 0 };

	util_progress_set_init(&set, false);
	owner_init(&a);
	a.hook.progress.trywait = NULL;
	util_progress_set_add(&set, &a.hook);
	assert_int_equal(util_progress_set_trywait(&set), 0);
	util_progress_set_del(&set, &a.hook);
	util_progress_set_fini(&set);
}

/* each: fn sees every owner's hook once, in the order added, with the caller's argument */
static void visit(struct util_progress_hook *hook, void *arg)
{
	struct owner **seen = arg;

	while (*seen)
		seen++;
	*seen = container_of(hook, struct owner, hook);
}

static void test_each_visits_every_owner(void **state)
{
	struct util_progress_set set;
	struct owner a = { 0 }, b = { 0 };
	struct owner *seen[3] = { NULL };

	util_progress_set_init(&set, true);
	util_progress_set_each(&set, visit, seen);
	assert_null(seen[0]);
	owner_init(&a);
	owner_init(&b);
	util_progress_set_add(&set, &a.hook);
	util_progress_set_add(&set, &b.hook);
	util_progress_set_each(&set, visit, seen);
	assert_ptr_equal(seen[0], &a);
	assert_ptr_equal(seen[1], &b);
	assert_null(seen[2]);
	/* nothing run */
	assert_int_equal(a.progress_cnt + b.progress_cnt, 0);
	util_progress_set_del(&set, &a.hook);
	util_progress_set_del(&set, &b.hook);
	util_progress_set_fini(&set);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_run_and_trywait_reach_every_owner),
		cmocka_unit_test(test_hook_without_trywait_allows_sleep),
		cmocka_unit_test(test_each_visits_every_owner),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
