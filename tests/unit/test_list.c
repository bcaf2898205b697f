/* Unit tests of util/list.h: the intrusive circular list. */
#include "config.h"

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "util/util.h"
#include "util/list.h"

#define ITEM_CNT 8

struct item {
	struct util_dlist link;
	int value;
};

struct fixture {
	struct util_dlist head;
	struct item items[ITEM_CNT];
};

static int setup(void **state)
{
	struct fixture *f = test_calloc(1, sizeof(*f));
	int i;

	if (!f)
		return -1;
	util_dlist_init(&f->head);
	for (i = 0; i < ITEM_CNT; i++) {
		f->items[i].value = i;
		util_dlist_init(&f->items[i].link);
	}
	*state = f;
	return 0;
}

/* Every test leaves the list empty: nothing may stay linked to the fixture's items. */
static int teardown(void **state)
{
	struct fixture *f = *state;

	assert_true(util_dlist_empty(&f->head));
	test_free(f);
	return 0;
}

static int value_at(struct util_dlist *item)
{
	return container_of(item, struct item, link)->value;
}

static void test_empty(void **state)
{
	struct fixture *f = *state;
	struct util_dlist static_head = UTIL_DLIST_INIT(static_head);
	struct util_dlist *item;
	int cnt = 0;

	assert_true(util_dlist_empty(&f->head));
	assert_true(util_dlist_empty(&static_head));
	assert_null(util_dlist_pop_front(&f->head));
	util_dlist_foreach(&f->head, item)
		cnt++;
	assert_int_equal(cnt, 0);
}

static void test_insert_tail_keeps_order(void **state)
{
	struct fixture *f = *state;
	struct util_dlist *item;
	int i, expect = 0;

	for (i = 0; i < ITEM_CNT; i++)
		util_dlist_insert_tail(&f->items[i].link, &f->head);
	assert_false(util_dlist_empty(&f->head));

	util_dlist_foreach(&f->head, item)
		assert_int_equal(value_at(item), expect++);
	assert_int_equal(expect, ITEM_CNT);

	for (i = 0; i < ITEM_CNT; i++)
		assert_int_equal(value_at(util_dlist_pop_front(&f->head)), i);
	assert_null(util_dlist_pop_front(&f->head));
}

static void test_insert_head_reverses(void **state)
{
	struct fixture *f = *state;
	int i;

	for (i = 0; i < ITEM_CNT; i++)
		util_dlist_insert_head(&f->items[i].link, &f->head);
	for (i = ITEM_CNT - 1; i >= 0; i--)
		assert_int_equal(value_at(util_dlist_pop_front(&f->head)), i);
}

static void test_insert_after(void **state)
{
	struct fixture *f = *state;

	util_dlist_insert_tail(&f->items[0].link, &f->head);
	util_dlist_insert_tail(&f->items[2].link, &f->head);
	util_dlist_insert_after(&f->items[1].link, &f->items[0].link);

	assert_int_equal(value_at(util_dlist_pop_front(&f->head)), 0);
	assert_int_equal(value_at(util_dlist_pop_front(&f->head)), 1);
	assert_int_equal(value_at(util_dlist_pop_front(&f->head)), 2);
}

static void test_remove_middle_and_self_link(void **state)
{
	struct fixture *f = *state;

	util_dlist_insert_tail(&f->items[0].link, &f->head);
	util_dlist_insert_tail(&f->items[1].link, &f->head);
	util_dlist_insert_tail(&f->items[2].link, &f->head);

	util_dlist_remove(&f->items[1].link);
	/* A removed item points at itself, so removing it again is harmless. */
	assert_ptr_equal(f->items[1].link.next, &f->items[1].link);
	assert_ptr_equal(f->items[1].link.prev, &f->items[1].link);
	util_dlist_remove(&f->items[1].link);

	assert_int_equal(value_at(util_dlist_pop_front(&f->head)), 0);
	assert_int_equal(value_at(util_dlist_pop_front(&f->head)), 2);
}

static void test_foreach_safe_removes_while_walking(void **state)
{
	struct fixture *f = *state;
	struct util_dlist *item, *tmp;
	int i, expect = 1, cnt = 0;

	for (i = 0; i < ITEM_CNT; i++)
		util_dlist_insert_tail(&f->items[i].link, &f->head);

	/* Drop the even values while walking, then check the odd ones remain in order. */
	util_dlist_foreach_safe(&f->head, item, tmp) {
		if (value_at(item) % 2 == 0)
			util_dlist_remove(item);
	}
	util_dlist_foreach(&f->head, item) {
		assert_int_equal(value_at(item), expect);
		expect += 2;
		cnt++;
	}
	assert_int_equal(cnt, ITEM_CNT / 2);

	util_dlist_foreach_safe(&f->head, item, tmp)
		util_dlist_remove(item);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_empty, setup, teardown),
		cmocka_unit_test_setup_teardown(test_insert_tail_keeps_order, setup, teardown),
		cmocka_unit_test_setup_teardown(test_insert_head_reverses, setup, teardown),
		cmocka_unit_test_setup_teardown(test_insert_after, setup, teardown),
		cmocka_unit_test_setup_teardown(test_remove_middle_and_self_link, setup, teardown),
		cmocka_unit_test_setup_teardown(test_foreach_safe_removes_while_walking, setup,
						teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
