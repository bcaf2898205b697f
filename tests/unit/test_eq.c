/* Unit tests of util/eq.c: events, peek, errors with err_data, blocking reads, wait fd. */
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

#include "util/eq.h"
#include "tests/unit/unit_fd.h"

static struct fi_provider test_prov = { .name = "util_test" };
struct fi_provider *util_prov = &test_prov;

#define SHORT_TIMEOUT_MS 50
#define LONG_TIMEOUT_MS 10000

struct fixture {
	struct util_eq eq;
	bool is_open;
	int fd_cnt;                 /* open fds before the test, to find leaks */
	int progress_calls;
	bool progress_writes;       /* each progress call writes one FI_AV_COMPLETE */
};

static int test_close(struct fid *fid)
{
	return -FI_ENOSYS;
}

static struct fi_ops test_eq_fi_ops = {
	.size = sizeof(struct fi_ops),
	.close = test_close,
	.control = util_eq_control,
};

static void progress(void *arg)
{
	struct fixture *f = arg;
	struct fi_eq_entry entry = { .context = f, .data = (uint64_t) f->progress_calls };

	f->progress_calls++;
	/* Like asynchronous AV inserts: completions appear while the EQ is read. */
	if (f->progress_writes)
		util_eq_write(&f->eq, FI_AV_COMPLETE, &entry, sizeof(entry), 0);
}

static int open_eq(struct fixture *f, enum fi_wait_obj wait_obj)
{
	struct fi_eq_attr attr = { .wait_obj = wait_obj, .flags = FI_WRITE };
	struct util_progress p = { .progress = progress, .arg = f };
	int ret;

	f->eq.eq_fid.fid.ops = &test_eq_fi_ops;
	ret = util_eq_init(&f->eq, &attr, &p, f);
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

/* Every test reads all it wrote: no event may be left queued, no fd left open. */
static int teardown(void **state)
{
	struct fixture *f = *state;

	if (f->is_open) {
		assert_true(util_dlist_empty(&f->eq.events));
		assert_int_equal(util_eq_fini(&f->eq), 0);
	}
	assert_int_equal(count_fds(), f->fd_cnt);
	test_free(f);
	return 0;
}

static void write_entry(struct fixture *f, uint32_t event, uint64_t data)
{
	struct fi_eq_entry entry = { .fid = &f->eq.eq_fid.fid, .context = f, .data = data };

	assert_int_equal(fi_eq_write(&f->eq.eq_fid, event, &entry, sizeof(entry), 0),
			 sizeof(entry));
}

static void read_entry(struct fixture *f, uint32_t event, uint64_t data)
{
	struct fi_eq_entry entry;
	uint32_t got;

	assert_int_equal(fi_eq_read(&f->eq.eq_fid, &got, &entry, sizeof(entry), 0),
			 sizeof(entry));
	assert_int_equal(got, event);
	assert_int_equal(entry.data, data);
	assert_ptr_equal(entry.context, f);
}

static void test_init_checks_attributes(void **state)
{
	struct fixture *f = *state;
	struct fi_eq_attr attr = { .wait_obj = FI_WAIT_SET };

	assert_int_equal(util_eq_init(&f->eq, &attr, NULL, NULL), -FI_ENOSYS);
	attr.wait_obj = FI_WAIT_MUTEX_COND;
	assert_int_equal(util_eq_init(&f->eq, &attr, NULL, NULL), -FI_ENOSYS);
	attr.wait_obj = FI_WAIT_YIELD;
	assert_int_equal(util_eq_init(&f->eq, &attr, NULL, NULL), -FI_ENOSYS);
	attr.wait_obj = (enum fi_wait_obj) 55;
	assert_int_equal(util_eq_init(&f->eq, &attr, NULL, NULL), -FI_EINVAL);
	attr.wait_obj = FI_WAIT_NONE;
	attr.flags = FI_SEND;
	assert_int_equal(util_eq_init(&f->eq, &attr, NULL, NULL), -FI_EBADFLAGS);

	assert_int_equal(util_eq_init(&f->eq, NULL, NULL, &attr), 0);
	f->is_open = true;
	assert_int_equal(f->eq.wait_obj, FI_WAIT_NONE);
	assert_int_equal(f->eq.eq_fid.fid.fclass, FI_CLASS_EQ);
	assert_ptr_equal(f->eq.eq_fid.fid.context, &attr);
	assert_ptr_equal(f->eq.eq_fid.ops, &util_eq_ops);
	assert_int_equal(util_eq_fini(&f->eq), 0);

	assert_int_equal(open_eq(f, FI_WAIT_UNSPEC), 0);
	assert_int_equal(f->eq.wait_obj, FI_WAIT_FD);
	assert_ptr_equal(f->eq.eq_fid.fid.ops, &test_eq_fi_ops);
}

static void test_write_checks_arguments(void **state)
{
	struct fixture *f = *state;
	struct fi_eq_entry entry = { 0 };

	assert_int_equal(open_eq(f, FI_WAIT_NONE), 0);
	assert_int_equal(fi_eq_write(&f->eq.eq_fid, FI_NOTIFY, NULL, sizeof(entry), 0),
			 -FI_EINVAL);
	assert_int_equal(fi_eq_write(&f->eq.eq_fid, FI_NOTIFY, &entry, 0, 0), -FI_EINVAL);
	/* An error event needs at least the fields every release had. */
	assert_int_equal(util_eq_write(&f->eq, 0, &entry, sizeof(entry), FI_EQ_ERR), -FI_EINVAL);
}

static void test_read_in_order_and_sizes(void **state)
{
	struct fixture *f = *state;
	unsigned char cm[sizeof(struct fi_eq_cm_entry) + 5], out[64];
	struct fi_eq_entry entry;
	uint32_t event;

	assert_int_equal(open_eq(f, FI_WAIT_NONE), 0);
	assert_int_equal(fi_eq_read(&f->eq.eq_fid, &event, &entry, sizeof(entry), 0), -FI_EAGAIN);
	assert_int_equal(fi_eq_read(&f->eq.eq_fid, &event, NULL, sizeof(entry), 0), -FI_EINVAL);

	write_entry(f, FI_MR_COMPLETE, 1);
	/* Variable-size events: a CM entry with 5 bytes of private data. */
	memset(cm, 0x5c, sizeof(cm));
	assert_int_equal(fi_eq_write(&f->eq.eq_fid, FI_CONNREQ, cm, sizeof(cm), 0), sizeof(cm));
	write_entry(f, FI_AV_COMPLETE, 3);

	read_entry(f, FI_MR_COMPLETE, 1);
	/* Too small a buffer leaves the event queued. */
	assert_int_equal(fi_eq_read(&f->eq.eq_fid, &event, out, sizeof(cm) - 1, 0),
			 -FI_ETOOSMALL);
	memset(out, 0, sizeof(out));
	assert_int_equal(fi_eq_read(&f->eq.eq_fid, &event, out, sizeof(out), 0), sizeof(cm));
	assert_int_equal(event, FI_CONNREQ);
	assert_memory_equal(out, cm, sizeof(cm));
	read_entry(f, FI_AV_COMPLETE, 3);
	assert_int_equal(fi_eq_read(&f->eq.eq_fid, &event, &entry, sizeof(entry), 0), -FI_EAGAIN);

	/* No buffer at all: the event is taken, only its type reported. */
	write_entry(f, FI_JOIN_COMPLETE, 4);
	event = 0;
	assert_int_equal(fi_eq_read(&f->eq.eq_fid, &event, NULL, 0, 0), 0);
	assert_int_equal(event, FI_JOIN_COMPLETE);
	assert_int_equal(fi_eq_read(&f->eq.eq_fid, &event, &entry, sizeof(entry), 0), -FI_EAGAIN);
}

static void test_peek_leaves_event(void **state)
{
	struct fixture *f = *state;
	struct fi_eq_entry entry;
	uint32_t event = 0;

	assert_int_equal(open_eq(f, FI_WAIT_NONE), 0);
	write_entry(f, FI_AV_COMPLETE, 7);
	write_entry(f, FI_MR_COMPLETE, 8);

	assert_int_equal(fi_eq_read(&f->eq.eq_fid, &event, &entry, sizeof(entry), FI_PEEK),
			 sizeof(entry));
	assert_int_equal(event, FI_AV_COMPLETE);
	assert_int_equal(entry.data, 7);
	/* Peeking again sees the same event; a plain read then takes it. */
	assert_int_equal(fi_eq_read(&f->eq.eq_fid, &event, &entry, sizeof(entry), FI_PEEK),
			 sizeof(entry));
	assert_int_equal(entry.data, 7);
	read_entry(f, FI_AV_COMPLETE, 7);
	read_entry(f, FI_MR_COMPLETE, 8);
}

static void write_error(struct fixture *f, int err, const void *err_data, size_t size)
{
	struct fi_eq_err_entry entry = {
		.fid = &f->eq.eq_fid.fid,
		.context = f,
		.data = 99,
		.err = err,
		.prov_errno = -err,
		.err_data = (void *) err_data,
		.err_data_size = size,
	};

	assert_int_equal(util_eq_write(&f->eq, 0, &entry, sizeof(entry), FI_EQ_ERR),
			 sizeof(entry));
}

static void test_error_blocks_head_in_order(void **state)
{
	struct fixture *f = *state;
	struct fi_eq_err_entry err = { 0 };
	struct fi_eq_entry entry;
	uint32_t event;

	assert_int_equal(open_eq(f, FI_WAIT_NONE), 0);
	assert_int_equal(fi_eq_readerr(&f->eq.eq_fid, &err, 0), -FI_EAGAIN);
	assert_int_equal(fi_eq_readerr(&f->eq.eq_fid, NULL, 0), -FI_EINVAL);

	write_entry(f, FI_AV_COMPLETE, 1);
	assert_int_equal(util_eq_write_error(&f->eq, &f->eq.eq_fid.fid, f, 2, FI_EADDRNOTAVAIL, 7),
			 0);
	write_entry(f, FI_AV_COMPLETE, 3);

	/* Events before the error come first; the error then blocks the head. */
	read_entry(f, FI_AV_COMPLETE, 1);
	assert_int_equal(fi_eq_read(&f->eq.eq_fid, &event, &entry, sizeof(entry), 0), -FI_EAVAIL);
	assert_int_equal(fi_eq_read(&f->eq.eq_fid, &event, &entry, sizeof(entry), FI_PEEK),
			 -FI_EAVAIL);

	/* readerr peeks too, then takes it. */
	assert_int_equal(fi_eq_readerr(&f->eq.eq_fid, &err, FI_PEEK), sizeof(err));
	assert_int_equal(err.err, FI_EADDRNOTAVAIL);
	memset(&err, 0, sizeof(err));
	assert_int_equal(fi_eq_readerr(&f->eq.eq_fid, &err, 0), sizeof(err));
	assert_ptr_equal(err.fid, &f->eq.eq_fid.fid);
	assert_ptr_equal(err.context, f);
	assert_int_equal(err.data, 2);
	assert_int_equal(err.err, FI_EADDRNOTAVAIL);
	assert_int_equal(err.prov_errno, 7);
	assert_null(err.err_data);
	assert_int_equal(err.err_data_size, 0);
	assert_int_equal(fi_eq_readerr(&f->eq.eq_fid, &err, 0), -FI_EAGAIN);

	read_entry(f, FI_AV_COMPLETE, 3);
}

static void test_readerr_finds_error_behind_events(void **state)
{
	struct fixture *f = *state;
	struct fi_eq_err_entry err = { 0 };

	assert_int_equal(open_eq(f, FI_WAIT_NONE), 0);
	write_entry(f, FI_AV_COMPLETE, 1);
	write_error(f, FI_EIO, NULL, 0);

	/* The oldest error is returned even with a successful event ahead of it. */
	assert_int_equal(fi_eq_readerr(&f->eq.eq_fid, &err, 0), sizeof(err));
	assert_int_equal(err.err, FI_EIO);
	read_entry(f, FI_AV_COMPLETE, 1);
}

static void test_error_err_data(void **state)
{
	struct fixture *f = *state;
	const char data[] = "provider error data";
	unsigned char user[64], raw[sizeof(struct fi_eq_err_entry)];
	struct fi_eq_err_entry err;
	size_t old_size = offsetof(struct fi_eq_err_entry, err_data_size);
	char copy[sizeof(data)];
	uint32_t event;
	size_t i;

	assert_int_equal(open_eq(f, FI_WAIT_NONE), 0);

	/* The writer's buffer may go away at once: the EQ keeps its own copy. */
	memcpy(copy, data, sizeof(data));
	write_error(f, FI_EIO, copy, sizeof(copy));
	memset(copy, 0, sizeof(copy));

	/* Into the application's buffer, with the size copied. */
	memset(&err, 0, sizeof(err));
	err.err_data = user;
	err.err_data_size = sizeof(user);
	assert_int_equal(fi_eq_readerr(&f->eq.eq_fid, &err, 0), sizeof(err));
	assert_ptr_equal(err.err_data, user);
	assert_int_equal(err.err_data_size, sizeof(data));
	assert_string_equal((char *) user, data);

	/* Truncated into a small buffer. */
	write_error(f, FI_EIO, data, sizeof(data));
	err.err_data = user;
	err.err_data_size = 4;
	memset(user, 0, sizeof(user));
	assert_int_equal(fi_eq_readerr(&f->eq.eq_fid, &err, 0), sizeof(err));
	assert_int_equal(err.err_data_size, 4);
	assert_memory_equal(user, data, 4);
	assert_int_equal(user[4], 0);

	/* Size 0: lent provider data, valid until the next read call. */
	write_error(f, FI_EIO, data, sizeof(data));
	err.err_data = NULL;
	err.err_data_size = 0;
	assert_int_equal(fi_eq_readerr(&f->eq.eq_fid, &err, 0), sizeof(err));
	assert_non_null(err.err_data);
	assert_int_equal(err.err_data_size, sizeof(data));
	assert_string_equal((char *) err.err_data, data);
	assert_non_null(f->eq.last_err);
	/* The next read call (even an empty one) releases it. */
	assert_int_equal(fi_eq_read(&f->eq.eq_fid, &event, NULL, 0, 0), -FI_EAGAIN);
	assert_null(f->eq.last_err);

	/* A buffer size without a buffer is refused. */
	write_error(f, FI_EIO, data, sizeof(data));
	err.err_data = NULL;
	err.err_data_size = 8;
	assert_int_equal(fi_eq_readerr(&f->eq.eq_fid, &err, 0), -FI_EINVAL);

	/* An application built for < 1.5: short entry, lent data, nothing written beyond. */
	f->eq.api_version = FI_VERSION(1, 4);
	memset(raw, 0xa5, sizeof(raw));
	assert_int_equal(fi_eq_readerr(&f->eq.eq_fid, (struct fi_eq_err_entry *) raw, 0),
			 old_size);
	memcpy(&err, raw, old_size);
	assert_int_equal(err.err, FI_EIO);
	assert_string_equal((char *) err.err_data, data);
	for (i = old_size; i < sizeof(raw); i++)
		assert_int_equal(raw[i], 0xa5);
	/* Left lent at fini: freed there (valgrind checks). */
}

static void test_strerror(void **state)
{
	struct fixture *f = *state;
	char buf[64];

	assert_int_equal(open_eq(f, FI_WAIT_NONE), 0);
	assert_string_equal(fi_eq_strerror(&f->eq.eq_fid, FI_EIO, NULL, NULL, 0),
			    fi_strerror(FI_EIO));
	assert_ptr_equal(fi_eq_strerror(&f->eq.eq_fid, FI_EIO, NULL, buf, sizeof(buf)), buf);
	assert_string_equal(buf, fi_strerror(FI_EIO));
}

static void test_progress_hook_writes_events(void **state)
{
	struct fixture *f = *state;
	struct fi_eq_err_entry err = { 0 };
	struct fi_eq_entry entry;
	uint32_t event;

	assert_int_equal(open_eq(f, FI_WAIT_FD), 0);
	f->progress_writes = true;
	assert_int_equal(fi_eq_read(&f->eq.eq_fid, &event, &entry, sizeof(entry), 0),
			 sizeof(entry));
	assert_int_equal(event, FI_AV_COMPLETE);
	assert_int_equal(entry.data, 0);
	assert_int_equal(fi_eq_sread(&f->eq.eq_fid, &event, &entry, sizeof(entry), -1, 0),
			 sizeof(entry));
	assert_int_equal(entry.data, 1);
	f->progress_writes = false;
	assert_int_equal(fi_eq_readerr(&f->eq.eq_fid, &err, 0), -FI_EAGAIN);
	assert_int_equal(f->progress_calls, 3);
}

static void test_sread(void **state)
{
	struct fixture *f = *state;
	struct fi_eq_err_entry err = { 0 };
	struct fi_eq_entry entry;
	uint32_t event;
	uint64_t start;

	assert_int_equal(open_eq(f, FI_WAIT_FD), 0);
	start = util_now_ms();
	assert_int_equal(fi_eq_sread(&f->eq.eq_fid, &event, &entry, sizeof(entry),
				     SHORT_TIMEOUT_MS, 0), -FI_EAGAIN);
	assert_true(util_now_ms() - start >= SHORT_TIMEOUT_MS);
	assert_true(f->progress_calls <= 6);
	assert_int_equal(fi_eq_sread(&f->eq.eq_fid, &event, NULL, 4, 0, 0), -FI_EINVAL);

	write_entry(f, FI_MR_COMPLETE, 5);
	assert_int_equal(fi_eq_sread(&f->eq.eq_fid, &event, &entry, sizeof(entry), 0, FI_PEEK),
			 sizeof(entry));
	assert_int_equal(fi_eq_sread(&f->eq.eq_fid, &event, &entry, sizeof(entry), -1, 0),
			 sizeof(entry));
	assert_int_equal(entry.data, 5);

	write_error(f, FI_EIO, NULL, 0);
	assert_int_equal(fi_eq_sread(&f->eq.eq_fid, &event, &entry, sizeof(entry), -1, 0),
			 -FI_EAVAIL);
	assert_int_equal(fi_eq_readerr(&f->eq.eq_fid, &err, 0), sizeof(err));
}

static void test_sread_without_wait_object(void **state)
{
	struct fixture *f = *state;
	struct fi_eq_entry entry;
	uint32_t event;
	int fd;

	assert_int_equal(open_eq(f, FI_WAIT_NONE), 0);
	assert_int_equal(fi_eq_sread(&f->eq.eq_fid, &event, &entry, sizeof(entry), 0, 0),
			 -FI_ENOSYS);
	assert_int_equal(fi_control(&f->eq.eq_fid.fid, FI_GETWAIT, &fd), -FI_ENODATA);
	assert_int_equal(util_eq_trywait(&f->eq), -FI_ENODATA);
}

struct helper {
	struct fixture *f;
	ssize_t ret;
};

static void *writer_thread(void *arg)
{
	struct helper *h = arg;
	struct fi_eq_entry entry = { .context = h->f, .data = 42 };

	/* The reader may or may not be asleep yet; either way it must get the event. */
	usleep(20 * 1000);
	h->ret = fi_eq_write(&h->f->eq.eq_fid, FI_NOTIFY, &entry, sizeof(entry), 0);
	return NULL;
}

static void test_write_wakes_blocked_sread(void **state)
{
	struct fixture *f = *state;
	struct helper h = { .f = f };
	struct fi_eq_entry entry;
	pthread_t thread;
	uint32_t event;

	assert_int_equal(open_eq(f, FI_WAIT_FD), 0);
	assert_int_equal(pthread_create(&thread, NULL, writer_thread, &h), 0);
	assert_int_equal(fi_eq_sread(&f->eq.eq_fid, &event, &entry, sizeof(entry), -1, 0),
			 sizeof(entry));
	assert_int_equal(pthread_join(thread, NULL), 0);
	assert_int_equal(h.ret, sizeof(entry));
	assert_int_equal(event, FI_NOTIFY);
	assert_int_equal(entry.data, 42);
}

static void test_wait_fd_readable_after_write(void **state)
{
	struct fixture *f = *state;
	enum fi_wait_obj obj;
	int fd = -1;

	assert_int_equal(open_eq(f, FI_WAIT_FD), 0);
	assert_int_equal(fi_control(&f->eq.eq_fid.fid, FI_GETWAIT, &fd), 0);
	assert_int_equal(fi_control(&f->eq.eq_fid.fid, FI_GETWAITOBJ, &obj), 0);
	assert_int_equal(obj, FI_WAIT_FD);
	assert_int_equal(fi_control(&f->eq.eq_fid.fid, FI_GETOPSFLAG, &obj), -FI_ENOSYS);
	assert_false(is_readable(fd));

	write_entry(f, FI_AV_COMPLETE, 1);
	assert_true(is_readable(fd));
	assert_int_equal(util_eq_trywait(&f->eq), -FI_EAGAIN);
	read_entry(f, FI_AV_COMPLETE, 1);
	assert_int_equal(util_eq_trywait(&f->eq), 0);
	assert_false(is_readable(fd));
}

static void test_fini(void **state)
{
	struct fixture *f = *state;
	const char data[] = "x";

	assert_int_equal(open_eq(f, FI_WAIT_FD), 0);
	atomic_fetch_add(&f->eq.ref, 1);
	assert_int_equal(util_eq_fini(&f->eq), -FI_EBUSY);
	atomic_fetch_sub(&f->eq.ref, 1);
	/* Events left at close are dropped without leaks. */
	write_entry(f, FI_AV_COMPLETE, 1);
	write_error(f, FI_EIO, data, sizeof(data));
	assert_int_equal(util_eq_fini(&f->eq), 0);
	f->is_open = false;
}

#define EQ_TEST(name) cmocka_unit_test_setup_teardown(name, setup, teardown)

int main(void)
{
	const struct CMUnitTest tests[] = {
		EQ_TEST(test_init_checks_attributes),
		EQ_TEST(test_write_checks_arguments),
		EQ_TEST(test_read_in_order_and_sizes),
		EQ_TEST(test_peek_leaves_event),
		EQ_TEST(test_error_blocks_head_in_order),
		EQ_TEST(test_readerr_finds_error_behind_events),
		EQ_TEST(test_error_err_data),
		EQ_TEST(test_strerror),
		EQ_TEST(test_progress_hook_writes_events),
		EQ_TEST(test_sread),
		EQ_TEST(test_sread_without_wait_object),
		EQ_TEST(test_write_wakes_blocked_sread),
		EQ_TEST(test_wait_fd_readable_after_write),
		EQ_TEST(test_fini),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
