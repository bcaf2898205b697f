/* Unit tests of util/wait.c and util/util.c: the epoll + eventfd wait set and its loop. */
#include "config.h"

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <string.h>
#include <dirent.h>
#include <poll.h>
#include <pthread.h>
#include <unistd.h>
#include <cmocka.h>

#include "util/wait.h"
#include "tests/unit/unit_fd.h"

static struct fi_provider test_prov = { .name = "util_test" };
struct fi_provider *util_prov = &test_prov;

#define SHORT_TIMEOUT_MS 50
#define LONG_TIMEOUT_MS 10000

struct fixture {
	struct util_wait wait;
	int fd_cnt;              /* open fds before the test, to find leaks */
	int progress_calls;
	int trywait_calls;
	int trywait_busy;        /* trywait reports pending events this many more times */
	int done_after;          /* done() turns true once progress ran this often (0: never) */
	atomic_bool is_done;     /* set by another thread */
};

static int setup(void **state)
{
	struct fixture *f = test_calloc(1, sizeof(*f));

	if (!f)
		return -1;
	f->fd_cnt = count_fds();
	if (util_wait_init(&f->wait)) {
		test_free(f);
		return -1;
	}
	atomic_init(&f->is_done, false);
	*state = f;
	return 0;
}

/* Every test ends with the set closed and no fd left open. */
static int teardown(void **state)
{
	struct fixture *f = *state;

	util_wait_fini(&f->wait);
	assert_int_equal(f->wait.epfd, -1);
	assert_int_equal(f->wait.signal_fd, -1);
	assert_int_equal(count_fds(), f->fd_cnt);
	test_free(f);
	return 0;
}

static void progress(void *arg)
{
	struct fixture *f = arg;

	f->progress_calls++;
}

static int trywait(void *arg)
{
	struct fixture *f = arg;

	f->trywait_calls++;
	if (f->trywait_busy > 0) {
		f->trywait_busy--;
		return -FI_EAGAIN;
	}
	return 0;
}

static bool done(void *arg)
{
	struct fixture *f = arg;

	if (atomic_load(&f->is_done))
		return true;
	return f->done_after && f->progress_calls >= f->done_after;
}

static void test_now_and_timeout_left(void **state)
{
	uint64_t start = util_now_ms();

	assert_true(util_now_ms() >= start);
	assert_int_equal(util_timeout_left(-1, start), -1);
	assert_int_equal(util_timeout_left(0, start), 0);
	assert_true(util_timeout_left(LONG_TIMEOUT_MS, start) > 0);
	assert_true(util_timeout_left(LONG_TIMEOUT_MS, start) <= LONG_TIMEOUT_MS);
	assert_int_equal(util_timeout_left(5, start - 10), 0);
	assert_int_equal(util_roundup_pow2(1), 1);
	assert_int_equal(util_roundup_pow2(1000), 1024);
	assert_int_equal(util_roundup_pow2(1024), 1024);
}

static void test_strerror(void **state)
{
	char buf[8];

	assert_string_equal(util_strerror(FI_EAGAIN, NULL, 0), fi_strerror(FI_EAGAIN));
	assert_string_equal(util_strerror(-FI_EAGAIN, NULL, 0), fi_strerror(FI_EAGAIN));
	/* Copied, truncated and terminated when a buffer is given. */
	assert_ptr_equal(util_strerror(FI_ETOOSMALL, buf, sizeof(buf)), buf);
	assert_int_equal(strlen(buf), sizeof(buf) - 1);
	assert_memory_equal(buf, fi_strerror(FI_ETOOSMALL), sizeof(buf) - 1);
}

static void test_wait_obj_resolve(void **state)
{
	enum fi_wait_obj obj;

	assert_int_equal(util_wait_obj_resolve(FI_WAIT_NONE, &obj), 0);
	assert_int_equal(obj, FI_WAIT_NONE);
	assert_int_equal(util_wait_obj_resolve(FI_WAIT_UNSPEC, &obj), 0);
	assert_int_equal(obj, FI_WAIT_FD);
	assert_int_equal(util_wait_obj_resolve(FI_WAIT_FD, &obj), 0);
	assert_int_equal(obj, FI_WAIT_FD);
	assert_int_equal(util_wait_obj_resolve(FI_WAIT_SET, &obj), -FI_ENOSYS);
	assert_int_equal(util_wait_obj_resolve(FI_WAIT_MUTEX_COND, &obj), -FI_ENOSYS);
	assert_int_equal(util_wait_obj_resolve(FI_WAIT_YIELD, &obj), -FI_ENOSYS);
	assert_int_equal(util_wait_obj_resolve(FI_WAIT_POLLFD, &obj), -FI_ENOSYS);
	assert_int_equal(util_wait_obj_resolve((enum fi_wait_obj) 1234, &obj), -FI_EINVAL);
}

static void test_control(void **state)
{
	struct fixture *f = *state;
	atomic_bool is_exported;
	enum fi_wait_obj obj;
	int fd = -1;

	atomic_init(&is_exported, false);
	assert_int_equal(util_wait_control(&f->wait, FI_WAIT_FD, FI_GETWAIT, &fd, &is_exported),
			 0);
	assert_int_equal(fd, f->wait.epfd);
	assert_true(atomic_load(&is_exported));
	assert_int_equal(util_wait_control(&f->wait, FI_WAIT_FD, FI_GETWAIT, NULL, NULL),
			 -FI_EINVAL);
	assert_int_equal(util_wait_control(&f->wait, FI_WAIT_NONE, FI_GETWAIT, &fd, NULL),
			 -FI_ENODATA);
	assert_int_equal(util_wait_control(&f->wait, FI_WAIT_FD, FI_GETWAITOBJ, &obj, NULL), 0);
	assert_int_equal(obj, FI_WAIT_FD);
	assert_int_equal(util_wait_control(&f->wait, FI_WAIT_FD, FI_GETOPSFLAG, &obj, NULL),
			 -FI_ENOSYS);
}

static void test_signal_makes_readable_until_consumed(void **state)
{
	struct fixture *f = *state;

	assert_false(is_readable(f->wait.epfd));
	util_wait_signal(&f->wait);
	util_wait_signal(&f->wait);
	assert_true(is_readable(f->wait.epfd));
	/* Stays readable until someone consumes it... */
	assert_true(is_readable(f->wait.epfd));
	/* ...and one wait consumes all pending signals. */
	assert_int_equal(util_wait_wait(&f->wait, 0), 0);
	assert_false(is_readable(f->wait.epfd));
	assert_int_equal(util_wait_wait(&f->wait, 0), -FI_ETIMEDOUT);
}

static void test_reset(void **state)
{
	struct fixture *f = *state;

	util_wait_reset(&f->wait);
	util_wait_signal(&f->wait);
	util_wait_reset(&f->wait);
	assert_false(is_readable(f->wait.epfd));
}

static void test_wait_timeout_sleeps(void **state)
{
	struct fixture *f = *state;
	uint64_t start = util_now_ms();

	assert_int_equal(util_wait_wait(&f->wait, SHORT_TIMEOUT_MS), -FI_ETIMEDOUT);
	assert_true(util_now_ms() - start >= SHORT_TIMEOUT_MS);
}

static void test_owner_fd(void **state)
{
	struct fixture *f = *state;
	int fds[2];
	char c = 'x';

	assert_int_equal(pipe(fds), 0);
	assert_int_equal(util_wait_add_fd(&f->wait, fds[0]), 0);
	/* Adding the same fd again is not an error. */
	assert_int_equal(util_wait_add_fd(&f->wait, fds[0]), 0);
	assert_false(is_readable(f->wait.epfd));

	assert_int_equal(write(fds[1], &c, 1), 1);
	assert_true(is_readable(f->wait.epfd));
	assert_int_equal(util_wait_wait(&f->wait, LONG_TIMEOUT_MS), 0);
	/* The owner's fd is the owner's to clear: still readable until read. */
	assert_true(is_readable(f->wait.epfd));
	assert_int_equal(read(fds[0], &c, 1), 1);
	assert_false(is_readable(f->wait.epfd));

	assert_int_equal(util_wait_del_fd(&f->wait, fds[0]), 0);
	assert_int_equal(util_wait_del_fd(&f->wait, fds[0]), -FI_ENOENT);
	assert_int_equal(write(fds[1], &c, 1), 1);
	assert_false(is_readable(f->wait.epfd));

	close(fds[0]);
	close(fds[1]);
}

static void test_until_done_by_progress(void **state)
{
	struct fixture *f = *state;
	struct util_progress p = { .progress = progress, .trywait = trywait, .arg = f };

	f->done_after = 1;
	assert_int_equal(util_wait_until(&f->wait, &p, LONG_TIMEOUT_MS, done, f), 0);
	assert_int_equal(f->progress_calls, 1);
	/* Done at the first check: never got as far as asking to sleep. */
	assert_int_equal(f->trywait_calls, 0);
}

static void test_until_timeout_sleeps_without_spinning(void **state)
{
	struct fixture *f = *state;
	struct util_progress p = { .progress = progress, .trywait = trywait, .arg = f };
	uint64_t start = util_now_ms();

	assert_int_equal(util_wait_until(&f->wait, &p, SHORT_TIMEOUT_MS, done, f), -FI_EAGAIN);
	assert_true(util_now_ms() - start >= SHORT_TIMEOUT_MS);
	/* One sleep for the whole timeout, not a polling loop. */
	assert_true(f->progress_calls >= 1);
	assert_true(f->progress_calls <= 5);
	assert_true(f->trywait_calls >= 1);
}

static void test_until_zero_timeout_checks_once(void **state)
{
	struct fixture *f = *state;
	struct util_progress p = { .progress = progress, .trywait = trywait, .arg = f };

	assert_int_equal(util_wait_until(&f->wait, &p, 0, done, f), -FI_EAGAIN);
	assert_int_equal(f->progress_calls, 1);
	assert_int_equal(f->trywait_calls, 0);
}

static void test_until_busy_trywait_progresses_again(void **state)
{
	struct fixture *f = *state;
	struct util_progress p = { .progress = progress, .trywait = trywait, .arg = f };

	/* Events pending below: no sleep, progress again until they turn into "done". */
	f->trywait_busy = 3;
	f->done_after = 4;
	assert_int_equal(util_wait_until(&f->wait, &p, LONG_TIMEOUT_MS, done, f), 0);
	assert_int_equal(f->progress_calls, 4);
	assert_int_equal(f->trywait_calls, 3);
}

static void test_until_without_wait_polls(void **state)
{
	struct fixture *f = *state;
	struct util_progress p = { .progress = progress, .arg = f };
	uint64_t start = util_now_ms();

	assert_int_equal(util_wait_until(NULL, &p, SHORT_TIMEOUT_MS, done, f), -FI_EAGAIN);
	assert_true(util_now_ms() - start >= SHORT_TIMEOUT_MS);
	assert_true(f->progress_calls >= 1);

	f->progress_calls = 0;
	f->done_after = 5;
	assert_int_equal(util_wait_until(NULL, &p, -1, done, f), 0);
	assert_int_equal(f->progress_calls, 5);
}

static void test_until_null_hooks(void **state)
{
	struct fixture *f = *state;
	struct util_progress p = { 0 };

	atomic_store(&f->is_done, true);
	assert_int_equal(util_wait_until(&f->wait, &p, -1, done, f), 0);
}

static void *waker_thread(void *arg)
{
	struct fixture *f = arg;

	/* The main thread may or may not be asleep yet; either way it must see the flag. */
	usleep(20 * 1000);
	atomic_store(&f->is_done, true);
	util_wait_signal(&f->wait);
	return NULL;
}

static void test_until_woken_by_other_thread(void **state)
{
	struct fixture *f = *state;
	struct util_progress p = { .progress = progress, .trywait = trywait, .arg = f };
	uint64_t start = util_now_ms();
	pthread_t thread;

	assert_int_equal(pthread_create(&thread, NULL, waker_thread, f), 0);
	assert_int_equal(util_wait_until(&f->wait, &p, LONG_TIMEOUT_MS, done, f), 0);
	assert_int_equal(pthread_join(thread, NULL), 0);
	/* Woken, not timed out. */
	assert_true(util_now_ms() - start < LONG_TIMEOUT_MS);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_now_and_timeout_left),
		cmocka_unit_test(test_strerror),
		cmocka_unit_test(test_wait_obj_resolve),
		cmocka_unit_test_setup_teardown(test_control, setup, teardown),
		cmocka_unit_test_setup_teardown(test_signal_makes_readable_until_consumed, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_reset, setup, teardown),
		cmocka_unit_test_setup_teardown(test_wait_timeout_sleeps, setup, teardown),
		cmocka_unit_test_setup_teardown(test_owner_fd, setup, teardown),
		cmocka_unit_test_setup_teardown(test_until_done_by_progress, setup, teardown),
		cmocka_unit_test_setup_teardown(test_until_timeout_sleeps_without_spinning, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_until_zero_timeout_checks_once, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_until_busy_trywait_progresses_again, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_until_without_wait_polls, setup, teardown),
		cmocka_unit_test_setup_teardown(test_until_null_hooks, setup, teardown),
		cmocka_unit_test_setup_teardown(test_until_woken_by_other_thread, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
