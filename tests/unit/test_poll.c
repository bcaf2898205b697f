/* Unit tests of util/poll.c: membership, references, what fi_poll reports, fairness. */
#include "config.h"

/*
 * Poll sets are deprecated by libfabric 2.0 (its headers mark fi_poll_open, fi_poll,
 * fi_poll_add and fi_poll_del); ofi_layer still offers them, as rxm does, and this file
 * tests them.
 */
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <rdma/fi_domain.h>

#include "util/cntr.h"
#include "util/cq.h"
#include "util/poll.h"

static struct fi_provider test_prov = { .name = "util_test" };
struct fi_provider *util_prov = &test_prov;

#define CTX_CNT 8

/* Two CQs and two counters, each with a progress hook that counts its calls. */
struct fixture {
	struct util_poll poll;
	struct util_cq cq[2];
	struct util_cntr cntr[2];
	int cq_progress[2];
	int cntr_progress[2];
	void *ctx[CTX_CNT];
};

static struct fi_ops_poll test_poll_ops = {
	.size = sizeof(struct fi_ops_poll),
	.poll = util_poll_poll,
	.poll_del = util_poll_del,
};

static void count_call(void *arg)
{
	(*(int *) arg)++;
}

static int setup(void **state)
{
	struct fixture *f = test_calloc(1, sizeof(*f));
	struct fi_cq_attr cq_attr = { .format = FI_CQ_FORMAT_CONTEXT, .size = 4 };
	int i;

	if (!f)
		return -1;
	for (i = 0; i < 2; i++) {
		struct util_progress cq_hook = { .progress = count_call, .arg = &f->cq_progress[i] };
		struct util_progress cntr_hook = { .progress = count_call,
						   .arg = &f->cntr_progress[i] };

		/* each member's context is its own address, as fabtests does */
		if (util_cq_init(&f->cq[i], &cq_attr, false, &cq_hook, &f->cq[i]) ||
		    util_cntr_init(&f->cntr[i], NULL, &cntr_hook, &f->cntr[i]))
			return -1;
	}
	if (util_poll_init(&f->poll, NULL, false, f))
		return -1;
	f->poll.poll_fid.ops = &test_poll_ops;
	*state = f;
	return 0;
}

/* Every test leaves the set empty: then the set, the CQs and the counters all close. */
static int teardown(void **state)
{
	struct fixture *f = *state;
	int i;

	assert_int_equal(util_poll_fini(&f->poll), 0);
	for (i = 0; i < 2; i++) {
		assert_int_equal(util_cq_fini(&f->cq[i]), 0);
		assert_int_equal(util_cntr_fini(&f->cntr[i]), 0);
	}
	test_free(f);
	return 0;
}

static int poll_now(struct fixture *f, int count)
{
	return fi_poll(&f->poll.poll_fid, f->ctx, count);
}

static void test_init_checks_flags(void **state)
{
	struct fixture *f = *state;
	struct util_poll other;
	struct fi_poll_attr attr = { .flags = 1 };

	assert_int_equal(util_poll_init(&other, &attr, false, NULL), -FI_EBADFLAGS);
	attr.flags = 0;
	assert_int_equal(util_poll_init(&other, &attr, true, f), 0);
	assert_int_equal(other.poll_fid.fid.fclass, FI_CLASS_POLL);
	assert_ptr_equal(other.poll_fid.fid.context, f);
	assert_int_equal(util_poll_fini(&other), 0);
}

static void test_membership(void **state)
{
	struct fixture *f = *state;
	struct fid *cq = &f->cq[0].cq_fid.fid;
	struct fid *cntr = &f->cntr[0].cntr_fid.fid;

	assert_int_equal(util_poll_add(&f->poll, cq, 1), -FI_EBADFLAGS);
	assert_int_equal(util_poll_add(&f->poll, cq, 0), 0);
	assert_int_equal(util_poll_add(&f->poll, cq, 0), -FI_EALREADY);
	assert_int_equal(util_poll_add(&f->poll, cntr, 0), 0);

	/* members hold their CQ and counter open; the set holds itself open */
	assert_int_equal(util_cq_fini(&f->cq[0]), -FI_EBUSY);
	assert_int_equal(util_cntr_fini(&f->cntr[0]), -FI_EBUSY);
	assert_int_equal(util_poll_fini(&f->poll), -FI_EBUSY);

	assert_int_equal(fi_poll_del(&f->poll.poll_fid, cq, 1), -FI_EBADFLAGS);
	assert_int_equal(fi_poll_del(&f->poll.poll_fid, &f->cq[1].cq_fid.fid, 0), -FI_EINVAL);
	assert_int_equal(fi_poll_del(&f->poll.poll_fid, NULL, 0), -FI_EINVAL);
	assert_int_equal(fi_poll_del(&f->poll.poll_fid, cq, 0), 0);
	assert_int_equal(fi_poll_del(&f->poll.poll_fid, cq, 0), -FI_EINVAL);
	assert_int_equal(util_poll_fini(&f->poll), -FI_EBUSY);
	assert_int_equal(fi_poll_del(&f->poll.poll_fid, cntr, 0), 0);
	assert_int_equal(atomic_load(&f->cq[0].ref), 0);
	assert_int_equal(atomic_load(&f->cntr[0].ref), 0);
}

static void test_arguments(void **state)
{
	struct fixture *f = *state;

	assert_int_equal(poll_now(f, -1), -FI_EINVAL);
	assert_int_equal(fi_poll(&f->poll.poll_fid, NULL, 1), -FI_EINVAL);
	assert_int_equal(fi_poll(&f->poll.poll_fid, NULL, 0), 0);
	assert_int_equal(poll_now(f, CTX_CNT), 0); /* an empty set */
}

/* fi_poll progresses every member, even those it has no room to report. */
static void test_progresses_every_member(void **state)
{
	struct fixture *f = *state;
	int i;

	for (i = 0; i < 2; i++) {
		assert_int_equal(util_poll_add(&f->poll, &f->cq[i].cq_fid.fid, 0), 0);
		assert_int_equal(util_poll_add(&f->poll, &f->cntr[i].cntr_fid.fid, 0), 0);
	}
	assert_int_equal(poll_now(f, 0), 0);
	for (i = 0; i < 2; i++) {
		assert_int_equal(f->cq_progress[i], 1);
		assert_int_equal(f->cntr_progress[i], 1);
		assert_int_equal(fi_poll_del(&f->poll.poll_fid, &f->cq[i].cq_fid.fid, 0), 0);
		assert_int_equal(fi_poll_del(&f->poll.poll_fid, &f->cntr[i].cntr_fid.fid, 0), 0);
	}
}

/* A CQ is reported as long as it holds an entry or an error, and not once it is empty. */
static void test_cq_reported_while_not_empty(void **state)
{
	struct fixture *f = *state;
	struct fi_cq_err_entry err = { .err = FI_ECANCELED };
	struct fi_cq_entry entry;

	assert_int_equal(util_poll_add(&f->poll, &f->cq[0].cq_fid.fid, 0), 0);
	assert_int_equal(poll_now(f, CTX_CNT), 0);
	assert_int_equal(util_cq_write(&f->cq[0], f, 0, 0, NULL, 0, 0, FI_ADDR_NOTAVAIL), 0);
	assert_int_equal(poll_now(f, CTX_CNT), 1);
	assert_ptr_equal(f->ctx[0], &f->cq[0]);
	assert_int_equal(poll_now(f, CTX_CNT), 1); /* not consumed by fi_poll */
	assert_int_equal(fi_cq_read(&f->cq[0].cq_fid, &entry, 1), 1);
	assert_int_equal(poll_now(f, CTX_CNT), 0);

	assert_int_equal(util_cq_write_error(&f->cq[0], &err), 0);
	assert_int_equal(poll_now(f, CTX_CNT), 1);
	assert_int_equal(fi_cq_readerr(&f->cq[0].cq_fid, &err, 0), 1);
	assert_int_equal(poll_now(f, CTX_CNT), 0);
	assert_int_equal(fi_poll_del(&f->poll.poll_fid, &f->cq[0].cq_fid.fid, 0), 0);
}

/* A counter is reported once per change of its value or error count by the provider. */
static void test_cntr_reported_on_change(void **state)
{
	struct fixture *f = *state;
	struct fid_cntr *cntr = &f->cntr[0].cntr_fid;

	assert_int_equal(util_poll_add(&f->poll, &cntr->fid, 0), 0);
	assert_int_equal(poll_now(f, CTX_CNT), 0);
	util_cntr_inc(&f->cntr[0]);
	util_cntr_inc(&f->cntr[0]);
	assert_int_equal(poll_now(f, CTX_CNT), 1);
	assert_ptr_equal(f->ctx[0], &f->cntr[0]);
	assert_int_equal(poll_now(f, CTX_CNT), 0); /* seen */
	util_cntr_inc_err(&f->cntr[0]);
	assert_int_equal(poll_now(f, CTX_CNT), 1);
	assert_int_equal(poll_now(f, CTX_CNT), 0);

	/* fi_poll(3): "since the last time fi_poll, fi_cntr_set, or fi_cntr_add were called" */
	assert_int_equal(fi_cntr_add(cntr, 5), 0);
	assert_int_equal(poll_now(f, CTX_CNT), 0);
	assert_int_equal(fi_cntr_set(cntr, 1), 0);
	assert_int_equal(poll_now(f, CTX_CNT), 0);
	assert_int_equal(fi_cntr_adderr(cntr, 2), 0);
	assert_int_equal(fi_cntr_seterr(cntr, 0), 0);
	assert_int_equal(poll_now(f, CTX_CNT), 0);
	util_cntr_inc(&f->cntr[0]);
	assert_int_equal(fi_cntr_read(cntr), 2);
	assert_int_equal(poll_now(f, CTX_CNT), 1); /* reading is no substitute for fi_poll */
	assert_int_equal(fi_poll_del(&f->poll.poll_fid, &cntr->fid, 0), 0);
}

/*
 * With room for one context, successive calls go round the members with events: none is
 * starved, and a counter left out keeps its event for a later call.
 */
static void test_short_array_goes_round(void **state)
{
	struct fixture *f = *state;
	bool seen[3] = { false };
	int i;

	assert_int_equal(util_poll_add(&f->poll, &f->cq[0].cq_fid.fid, 0), 0);
	assert_int_equal(util_poll_add(&f->poll, &f->cq[1].cq_fid.fid, 0), 0);
	assert_int_equal(util_poll_add(&f->poll, &f->cntr[0].cntr_fid.fid, 0), 0);
	assert_int_equal(util_cq_write(&f->cq[0], f, 0, 0, NULL, 0, 0, FI_ADDR_NOTAVAIL), 0);
	assert_int_equal(util_cq_write(&f->cq[1], f, 0, 0, NULL, 0, 0, FI_ADDR_NOTAVAIL), 0);
	util_cntr_inc(&f->cntr[0]);
	for (i = 0; i < 3; i++) {
		assert_int_equal(poll_now(f, 1), 1);
		if (f->ctx[0] == &f->cq[0])
			seen[0] = true;
		else if (f->ctx[0] == &f->cq[1])
			seen[1] = true;
		else if (f->ctx[0] == &f->cntr[0])
			seen[2] = true;
	}
	assert_true(seen[0] && seen[1] && seen[2]);
	/* the CQs still hold their entries; the counter's event was taken */
	assert_int_equal(poll_now(f, CTX_CNT), 2);

	/* removing a member keeps the others' order and the round going */
	assert_int_equal(fi_poll_del(&f->poll.poll_fid, &f->cq[0].cq_fid.fid, 0), 0);
	assert_int_equal(poll_now(f, 1), 1);
	assert_ptr_equal(f->ctx[0], &f->cq[1]);
	assert_int_equal(fi_poll_del(&f->poll.poll_fid, &f->cq[1].cq_fid.fid, 0), 0);
	assert_int_equal(fi_poll_del(&f->poll.poll_fid, &f->cntr[0].cntr_fid.fid, 0), 0);
	assert_int_equal(poll_now(f, CTX_CNT), 0);
}

/* Many members: the set grows. */
static void test_many_members(void **state)
{
	struct fixture *f = *state;
	enum { N = 100 };
	struct util_cntr *cntrs = test_calloc(N, sizeof(*cntrs));
	void *ctx[N];
	int i;

	assert_non_null(cntrs);
	for (i = 0; i < N; i++) {
		assert_int_equal(util_cntr_init(&cntrs[i], NULL, NULL, &cntrs[i]), 0);
		assert_int_equal(util_poll_add(&f->poll, &cntrs[i].cntr_fid.fid, 0), 0);
		if (i % 3 == 0)
			util_cntr_inc(&cntrs[i]);
	}
	assert_int_equal(fi_poll(&f->poll.poll_fid, ctx, N), (N + 2) / 3);
	for (i = 0; i < (N + 2) / 3; i++)
		assert_ptr_equal(ctx[i], &cntrs[3 * i]);
	for (i = 0; i < N; i++) {
		assert_int_equal(fi_poll_del(&f->poll.poll_fid, &cntrs[i].cntr_fid.fid, 0), 0);
		assert_int_equal(util_cntr_fini(&cntrs[i]), 0);
	}
	test_free(cntrs);
}

#define POLL_TEST(name) cmocka_unit_test_setup_teardown(name, setup, teardown)

int main(void)
{
	const struct CMUnitTest tests[] = {
		POLL_TEST(test_init_checks_flags),
		POLL_TEST(test_membership),
		POLL_TEST(test_arguments),
		POLL_TEST(test_progresses_every_member),
		POLL_TEST(test_cq_reported_while_not_empty),
		POLL_TEST(test_cntr_reported_on_change),
		POLL_TEST(test_short_array_goes_round),
		POLL_TEST(test_many_members),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
