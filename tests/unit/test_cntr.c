/* Unit tests of util/cntr.c: values, errors, waiting, wait fd. */
#include "config.h"

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <dirent.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <cmocka.h>

#include "util/cntr.h"
#include "tests/unit/unit_fd.h"

static struct fi_provider test_prov = { .name = "util_test" };
struct fi_provider *util_prov = &test_prov;

#define SHORT_TIMEOUT_MS 50
#define LONG_TIMEOUT_MS 10000

struct fixture {
	struct util_cntr cntr;
	bool is_open;
	int fd_cnt;                 /* open fds before the test, to find leaks */
	int progress_calls;
	int progress_incs;          /* completions each progress call counts */
	int progress_errs;          /* errors each progress call counts */
};

static int test_close(struct fid *fid)
{
	return -FI_ENOSYS;
}

static struct fi_ops test_cntr_fi_ops = {
	.size = sizeof(struct fi_ops),
	.close = test_close,
	.control = util_cntr_control,
};

static void progress(void *arg)
{
	struct fixture *f = arg;
	int i;

	f->progress_calls++;
	for (i = 0; i < f->progress_incs; i++)
		util_cntr_inc(&f->cntr);
	for (i = 0; i < f->progress_errs; i++)
		util_cntr_inc_err(&f->cntr);
}

static int open_cntr(struct fixture *f, enum fi_wait_obj wait_obj)
{
	struct fi_cntr_attr attr = { .events = FI_CNTR_EVENTS_COMP, .wait_obj = wait_obj };
	struct util_progress p = { .progress = progress, .arg = f };
	int ret;

	f->cntr.cntr_fid.fid.ops = &test_cntr_fi_ops;
	ret = util_cntr_init(&f->cntr, &attr, &p, f);
	f->is_open = ret == 0;
	return ret;
}

static int setup(void **state)
{
	struct fixture *f = test_calloc(1, sizeof(*f));

	if (!f)
		return -1;
	f->fd_cnt = count_fds();
	*state = f;
	return 0;
}

/* Every test ends with no waiter inside the counter and no fd left open. */
static int teardown(void **state)
{
	struct fixture *f = *state;

	if (f->is_open) {
		assert_int_equal(atomic_load(&f->cntr.sleepers), 0);
		assert_int_equal(util_cntr_fini(&f->cntr), 0);
	}
	assert_int_equal(count_fds(), f->fd_cnt);
	test_free(f);
	return 0;
}

static void test_init_checks_attributes(void **state)
{
	struct fixture *f = *state;
	struct fi_cntr_attr attr = { .wait_obj = FI_WAIT_SET };

	assert_int_equal(util_cntr_init(&f->cntr, &attr, NULL, NULL), -FI_ENOSYS);
	attr.wait_obj = FI_WAIT_MUTEX_COND;
	assert_int_equal(util_cntr_init(&f->cntr, &attr, NULL, NULL), -FI_ENOSYS);
	attr.wait_obj = FI_WAIT_YIELD;
	assert_int_equal(util_cntr_init(&f->cntr, &attr, NULL, NULL), -FI_ENOSYS);
	attr.wait_obj = (enum fi_wait_obj) 66;
	assert_int_equal(util_cntr_init(&f->cntr, &attr, NULL, NULL), -FI_EINVAL);
	attr.wait_obj = FI_WAIT_NONE;
	attr.flags = 1;
	assert_int_equal(util_cntr_init(&f->cntr, &attr, NULL, NULL), -FI_EBADFLAGS);
	attr.flags = 0;
	attr.events = (enum fi_cntr_events) 3;
	assert_int_equal(util_cntr_init(&f->cntr, &attr, NULL, NULL), -FI_EINVAL);

	assert_int_equal(util_cntr_init(&f->cntr, NULL, NULL, &attr), 0);
	f->is_open = true;
	assert_int_equal(f->cntr.wait_obj, FI_WAIT_NONE);
	assert_int_equal(f->cntr.cntr_fid.fid.fclass, FI_CLASS_CNTR);
	assert_ptr_equal(f->cntr.cntr_fid.fid.context, &attr);
	assert_ptr_equal(f->cntr.cntr_fid.ops, &util_cntr_ops);
	assert_int_equal(util_cntr_fini(&f->cntr), 0);

	assert_int_equal(open_cntr(f, FI_WAIT_UNSPEC), 0);
	assert_int_equal(f->cntr.wait_obj, FI_WAIT_FD);
}

static void test_values(void **state)
{
	struct fixture *f = *state;
	struct fid_cntr *cntr;

	assert_int_equal(open_cntr(f, FI_WAIT_NONE), 0);
	cntr = &f->cntr.cntr_fid;
	assert_int_equal(fi_cntr_read(cntr), 0);
	assert_int_equal(fi_cntr_readerr(cntr), 0);

	assert_int_equal(fi_cntr_add(cntr, 5), 0);
	util_cntr_inc(&f->cntr);
	assert_int_equal(fi_cntr_read(cntr), 6);
	assert_int_equal(fi_cntr_set(cntr, 100), 0);
	assert_int_equal(fi_cntr_read(cntr), 100);

	assert_int_equal(fi_cntr_adderr(cntr, 2), 0);
	util_cntr_inc_err(&f->cntr);
	assert_int_equal(fi_cntr_readerr(cntr), 3);
	assert_int_equal(fi_cntr_seterr(cntr, 0), 0);
	assert_int_equal(fi_cntr_readerr(cntr), 0);
	/* Errors never touch the success count. */
	assert_int_equal(fi_cntr_read(cntr), 100);
}

static void test_reads_run_progress(void **state)
{
	struct fixture *f = *state;

	assert_int_equal(open_cntr(f, FI_WAIT_NONE), 0);
	f->progress_incs = 2;
	assert_int_equal(fi_cntr_read(&f->cntr.cntr_fid), 2);
	assert_int_equal(fi_cntr_read(&f->cntr.cntr_fid), 4);
	assert_int_equal(fi_cntr_readerr(&f->cntr.cntr_fid), 0);
	assert_int_equal(f->progress_calls, 3);
}

static void test_wait_without_wait_object(void **state)
{
	struct fixture *f = *state;
	int fd;

	assert_int_equal(open_cntr(f, FI_WAIT_NONE), 0);
	/* no wait object: fi_cntr_wait spins on progress */
	assert_int_equal(fi_cntr_wait(&f->cntr.cntr_fid, 0, 0), 0);
	assert_int_equal(fi_cntr_wait(&f->cntr.cntr_fid, 1, SHORT_TIMEOUT_MS), -FI_ETIMEDOUT);
	f->progress_incs = 1;
	assert_int_equal(fi_cntr_wait(&f->cntr.cntr_fid, 5, LONG_TIMEOUT_MS), 0);
	assert_true(fi_cntr_read(&f->cntr.cntr_fid) >= 5);
	f->progress_incs = 0;
	f->progress_errs = 1;
	assert_int_equal(fi_cntr_wait(&f->cntr.cntr_fid, 100, LONG_TIMEOUT_MS), -FI_EAVAIL);
	f->progress_errs = 0;
	assert_int_equal(fi_control(&f->cntr.cntr_fid.fid, FI_GETWAIT, &fd), -FI_ENODATA);
	assert_int_equal(util_cntr_trywait(&f->cntr), -FI_ENODATA);
}

static void test_wait_reached_and_timeout(void **state)
{
	struct fixture *f = *state;
	uint64_t start;

	assert_int_equal(open_cntr(f, FI_WAIT_FD), 0);
	assert_int_equal(fi_cntr_wait(&f->cntr.cntr_fid, 0, 0), 0);
	assert_int_equal(fi_cntr_add(&f->cntr.cntr_fid, 3), 0);
	assert_int_equal(fi_cntr_wait(&f->cntr.cntr_fid, 3, -1), 0);

	start = util_now_ms();
	assert_int_equal(fi_cntr_wait(&f->cntr.cntr_fid, 4, SHORT_TIMEOUT_MS), -FI_ETIMEDOUT);
	assert_true(util_now_ms() - start >= SHORT_TIMEOUT_MS);
	/* Slept in the kernel: a handful of progress calls, not a spin. */
	assert_true(f->progress_calls <= 8);
	/* A timeout leaves the error count alone. */
	assert_int_equal(fi_cntr_readerr(&f->cntr.cntr_fid), 0);

	/* Progress reaching the threshold ends the wait. */
	f->progress_incs = 1;
	assert_int_equal(fi_cntr_wait(&f->cntr.cntr_fid, 6, LONG_TIMEOUT_MS), 0);
	assert_int_equal(fi_cntr_read(&f->cntr.cntr_fid), 7);
}

static void test_wait_error_change_is_eavail(void **state)
{
	struct fixture *f = *state;

	assert_int_equal(open_cntr(f, FI_WAIT_FD), 0);
	/* Errors counted before the wait do not end it... */
	util_cntr_inc_err(&f->cntr);
	assert_int_equal(fi_cntr_wait(&f->cntr.cntr_fid, 1, 0), -FI_ETIMEDOUT);
	/* ...but a change while waiting does, here one found by progress. */
	f->progress_errs = 1;
	assert_int_equal(fi_cntr_wait(&f->cntr.cntr_fid, 1, LONG_TIMEOUT_MS), -FI_EAVAIL);
	f->progress_errs = 0;
	assert_int_equal(fi_cntr_readerr(&f->cntr.cntr_fid), 2);
	assert_int_equal(fi_cntr_read(&f->cntr.cntr_fid), 0);
}

struct helper {
	struct fixture *f;
	bool is_error;              /* add an error instead of reaching the threshold */
	bool saw_sleeper;           /* util_cntr_may_sleep while the waiter was blocked */
	int ret;
};

static void *helper_thread(void *arg)
{
	struct helper *h = arg;

	/* Act only once the waiter is inside fi_cntr_wait, so a blocked wait is covered. */
	while (atomic_load(&h->f->cntr.sleepers) == 0)
		sched_yield();
	h->saw_sleeper = util_cntr_may_sleep(&h->f->cntr);
	if (h->is_error) {
		h->ret = fi_cntr_adderr(&h->f->cntr.cntr_fid, 1);
	} else {
		/* Below the threshold first: the waiter wakes, checks, and sleeps again. */
		h->ret = fi_cntr_add(&h->f->cntr.cntr_fid, 1);
		if (!h->ret)
			h->ret = fi_cntr_add(&h->f->cntr.cntr_fid, 1);
	}
	return NULL;
}

static void test_wait_woken_by_other_thread(void **state)
{
	struct fixture *f = *state;
	struct helper h = { .f = f };
	pthread_t thread;
	uint64_t start;

	assert_int_equal(open_cntr(f, FI_WAIT_FD), 0);
	assert_false(util_cntr_may_sleep(&f->cntr));
	start = util_now_ms();
	assert_int_equal(pthread_create(&thread, NULL, helper_thread, &h), 0);
	assert_int_equal(fi_cntr_wait(&f->cntr.cntr_fid, 2, LONG_TIMEOUT_MS), 0);
	assert_int_equal(pthread_join(thread, NULL), 0);
	assert_int_equal(h.ret, 0);
	/* a waiter is one that may sleep, while it waits only */
	assert_true(h.saw_sleeper);
	assert_false(util_cntr_may_sleep(&f->cntr));
	assert_true(util_now_ms() - start < LONG_TIMEOUT_MS);
	assert_int_equal(fi_cntr_read(&f->cntr.cntr_fid), 2);
}

static void test_wait_error_from_other_thread(void **state)
{
	struct fixture *f = *state;
	struct helper h = { .f = f, .is_error = true };
	pthread_t thread;

	assert_int_equal(open_cntr(f, FI_WAIT_FD), 0);
	assert_int_equal(pthread_create(&thread, NULL, helper_thread, &h), 0);
	assert_int_equal(fi_cntr_wait(&f->cntr.cntr_fid, 10, -1), -FI_EAVAIL);
	assert_int_equal(pthread_join(thread, NULL), 0);
	assert_int_equal(h.ret, 0);
	assert_int_equal(fi_cntr_readerr(&f->cntr.cntr_fid), 1);
	assert_int_equal(fi_cntr_read(&f->cntr.cntr_fid), 0);
}

static void test_wait_fd_readable_after_change(void **state)
{
	struct fixture *f = *state;
	enum fi_wait_obj obj;
	int fd = -1;

	assert_int_equal(open_cntr(f, FI_WAIT_FD), 0);
	assert_int_equal(fi_control(&f->cntr.cntr_fid.fid, FI_GETWAIT, &fd), 0);
	/* the fd handed out: a thread may sleep on it at any time */
	assert_true(util_cntr_may_sleep(&f->cntr));
	assert_int_equal(fi_control(&f->cntr.cntr_fid.fid, FI_GETWAITOBJ, &obj), 0);
	assert_int_equal(obj, FI_WAIT_FD);
	assert_int_equal(fi_control(&f->cntr.cntr_fid.fid, FI_GETOPSFLAG, &obj), -FI_ENOSYS);
	assert_false(is_readable(fd));

	util_cntr_inc(&f->cntr);
	assert_true(is_readable(fd));
	/* fi_trywait protocol: refuses until the application has read the new value. */
	assert_int_equal(util_cntr_trywait(&f->cntr), -FI_EAGAIN);
	assert_int_equal(fi_cntr_read(&f->cntr.cntr_fid), 1);
	assert_int_equal(util_cntr_trywait(&f->cntr), 0);
	assert_false(is_readable(fd));

	util_cntr_inc_err(&f->cntr);
	assert_true(is_readable(fd));
	assert_int_equal(util_cntr_trywait(&f->cntr), -FI_EAGAIN);
	assert_int_equal(fi_cntr_readerr(&f->cntr.cntr_fid), 1);
	assert_int_equal(util_cntr_trywait(&f->cntr), 0);
	assert_false(is_readable(fd));

	assert_int_equal(fi_cntr_set(&f->cntr.cntr_fid, 9), 0);
	assert_true(is_readable(fd));
	assert_int_equal(fi_cntr_read(&f->cntr.cntr_fid), 9);
	assert_int_equal(util_cntr_trywait(&f->cntr), 0);
}

static void test_fini_refuses_while_bound(void **state)
{
	struct fixture *f = *state;

	assert_int_equal(open_cntr(f, FI_WAIT_FD), 0);
	atomic_fetch_add(&f->cntr.ref, 1);
	assert_int_equal(util_cntr_fini(&f->cntr), -FI_EBUSY);
	atomic_fetch_sub(&f->cntr.ref, 1);
}

#define CNTR_TEST(name) cmocka_unit_test_setup_teardown(name, setup, teardown)

int main(void)
{
	const struct CMUnitTest tests[] = {
		CNTR_TEST(test_init_checks_attributes),
		CNTR_TEST(test_values),
		CNTR_TEST(test_reads_run_progress),
		CNTR_TEST(test_wait_without_wait_object),
		CNTR_TEST(test_wait_reached_and_timeout),
		CNTR_TEST(test_wait_error_change_is_eavail),
		CNTR_TEST(test_wait_woken_by_other_thread),
		CNTR_TEST(test_wait_error_from_other_thread),
		CNTR_TEST(test_wait_fd_readable_after_change),
		CNTR_TEST(test_fini_refuses_while_bound),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
