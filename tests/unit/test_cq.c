/* Unit tests of util/cq.c: ring, overflow, formats, errors, blocking reads, wait fd. */
#include "config.h"

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <string.h>
#include <dirent.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <cmocka.h>

#include "util/cq.h"
#include "tests/unit/unit_fd.h"

static struct fi_provider test_prov = { .name = "util_test" };
struct fi_provider *util_prov = &test_prov;

/*
 * Allocation failure on demand: util's calls to malloc come here (the program links with
 * -Wl,--wrap=malloc; cmocka's and libc's own allocations do not).
 */
static bool fail_malloc;
void *__real_malloc(size_t size);
void *__wrap_malloc(size_t size);

void *__wrap_malloc(size_t size)
{
	return fail_malloc ? NULL : __real_malloc(size);
}

#define SHORT_TIMEOUT_MS 50
#define LONG_TIMEOUT_MS 10000
#define SMALL_CQ_SIZE 4

struct fixture {
	struct util_cq cq;
	bool is_open;
	int fd_cnt;                 /* open fds before the test, to find leaks */
	int progress_calls;
	int progress_writes;        /* completions each progress call writes */
	uint64_t next_data;         /* data of the next completion progress writes */
};

static int test_close(struct fid *fid)
{
	return -FI_ENOSYS;
}

/* The owner's fi_ops, as the provider sets them: control goes to util. */
static struct fi_ops test_cq_fi_ops = {
	.size = sizeof(struct fi_ops),
	.close = test_close,
	.control = util_cq_control,
};

static void progress(void *arg)
{
	struct fixture *f = arg;
	int i;

	f->progress_calls++;
	/* What a provider does: turn core events into completions of this CQ. */
	for (i = 0; i < f->progress_writes; i++, f->next_data++)
		util_cq_write(&f->cq, (void *) (uintptr_t) (f->next_data + 1), FI_RECV, 0, NULL,
			      f->next_data, 0, FI_ADDR_NOTAVAIL);
}

static int open_cq(struct fixture *f, enum fi_cq_format format, size_t size,
		   enum fi_wait_obj wait_obj)
{
	struct fi_cq_attr attr = { .format = format, .size = size, .wait_obj = wait_obj };
	struct util_progress p = { .progress = progress, .arg = f };
	int ret;

	f->cq.cq_fid.fid.ops = &test_cq_fi_ops;
	ret = util_cq_init(&f->cq, &attr, true, &p, f);
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

/* Every test reads all it wrote: nothing may be left queued, no fd left open. */
static int teardown(void **state)
{
	struct fixture *f = *state;

	if (f->is_open) {
		assert_int_equal(util_cq_count(&f->cq), 0);
		assert_int_equal(f->cq.overflow_cnt, 0);
		assert_int_equal(f->cq.error_cnt, 0);
		assert_int_equal(atomic_load(&f->cq.sleepers), 0);
		assert_int_equal(util_cq_fini(&f->cq), 0);
	}
	assert_int_equal(count_fds(), f->fd_cnt);
	test_free(f);
	return 0;
}

static void write_seq(struct fixture *f, uint64_t first, size_t cnt)
{
	size_t i;

	for (i = 0; i < cnt; i++)
		assert_int_equal(util_cq_write(&f->cq, (void *) (uintptr_t) (first + i + 1),
					       FI_SEND, first + i, NULL, first + i, 0, first + i),
				 0);
}

/*
 * Reads exactly cnt entries in batches of batch and checks they continue the sequence (the
 * context always, data when the format has it).
 */
static void read_seq(struct fixture *f, uint64_t first, size_t cnt, size_t batch)
{
	struct fi_cq_tagged_entry entries[16];
	struct fi_cq_data_entry *entry;
	size_t done = 0, i;
	ssize_t ret;

	assert_true(batch <= 16);
	while (done < cnt) {
		ret = fi_cq_read(&f->cq.cq_fid, entries, UTIL_MIN(batch, cnt - done));
		assert_true(ret > 0);
		for (i = 0; i < (size_t) ret; i++) {
			entry = (void *) ((char *) entries + i * f->cq.entry_size);
			assert_ptr_equal(entry->op_context,
					 (void *) (uintptr_t) (first + done + i + 1));
			if (f->cq.entry_size >= sizeof(struct fi_cq_data_entry))
				assert_int_equal(entry->data, first + done + i);
		}
		done += (size_t) ret;
	}
}

static void test_init_checks_attributes(void **state)
{
	struct fixture *f = *state;
	struct fi_cq_attr attr = { .format = FI_CQ_FORMAT_TAGGED };

	attr.format = (enum fi_cq_format) 99;
	assert_int_equal(util_cq_init(&f->cq, &attr, true, NULL, NULL), -FI_EINVAL);
	attr.format = FI_CQ_FORMAT_TAGGED;
	attr.wait_obj = FI_WAIT_SET;
	assert_int_equal(util_cq_init(&f->cq, &attr, true, NULL, NULL), -FI_ENOSYS);
	attr.wait_obj = FI_WAIT_MUTEX_COND;
	assert_int_equal(util_cq_init(&f->cq, &attr, true, NULL, NULL), -FI_ENOSYS);
	attr.wait_obj = FI_WAIT_YIELD;
	assert_int_equal(util_cq_init(&f->cq, &attr, true, NULL, NULL), -FI_ENOSYS);
	attr.wait_obj = (enum fi_wait_obj) 77;
	assert_int_equal(util_cq_init(&f->cq, &attr, true, NULL, NULL), -FI_EINVAL);
	attr.wait_obj = FI_WAIT_FD;
	attr.wait_cond = (enum fi_cq_wait_cond) 9;
	assert_int_equal(util_cq_init(&f->cq, &attr, true, NULL, NULL), -FI_EINVAL);
	attr.wait_cond = FI_CQ_COND_NONE;
	attr.flags = FI_SEND;
	assert_int_equal(util_cq_init(&f->cq, &attr, true, NULL, NULL), -FI_EBADFLAGS);
	attr.flags = 0;
	attr.size = SIZE_MAX;
	assert_int_equal(util_cq_init(&f->cq, &attr, true, NULL, NULL), -FI_EINVAL);
	/* Nothing was left open by the failures (checked by teardown's fd count). */
}

static void test_init_defaults(void **state)
{
	struct fixture *f = *state;
	void *context = &context;

	/* Without attributes: context format, no wait object, a default size. */
	assert_int_equal(util_cq_init(&f->cq, NULL, false, NULL, context), 0);
	f->is_open = true;
	assert_int_equal(f->cq.format, FI_CQ_FORMAT_CONTEXT);
	assert_int_equal(f->cq.entry_size, sizeof(struct fi_cq_entry));
	assert_int_equal(f->cq.wait_obj, FI_WAIT_NONE);
	assert_true(f->cq.ring_mask + 1 >= 1024);
	assert_int_equal(f->cq.cq_fid.fid.fclass, FI_CLASS_CQ);
	assert_ptr_equal(f->cq.cq_fid.fid.context, context);
	assert_ptr_equal(f->cq.cq_fid.ops, &util_cq_ops);
	assert_int_equal(util_cq_fini(&f->cq), 0);

	/* UNSPEC format is the context format; UNSPEC wait is an fd; size rounds up. */
	assert_int_equal(open_cq(f, FI_CQ_FORMAT_UNSPEC, 1000, FI_WAIT_UNSPEC), 0);
	assert_int_equal(f->cq.format, FI_CQ_FORMAT_CONTEXT);
	assert_int_equal(f->cq.wait_obj, FI_WAIT_FD);
	assert_int_equal(f->cq.ring_mask + 1, 1024);
	assert_ptr_equal(f->cq.cq_fid.fid.ops, &test_cq_fi_ops);
}

static void test_read_arguments_and_empty(void **state)
{
	struct fixture *f = *state;
	struct fi_cq_entry entry;

	assert_int_equal(open_cq(f, FI_CQ_FORMAT_CONTEXT, 0, FI_WAIT_NONE), 0);
	assert_int_equal(fi_cq_read(&f->cq.cq_fid, &entry, 1), -FI_EAGAIN);
	assert_int_equal(fi_cq_read(&f->cq.cq_fid, NULL, 1), -FI_EINVAL);
	assert_int_equal(fi_cq_readerr(&f->cq.cq_fid, NULL, 0), -FI_EINVAL);
	assert_int_equal(fi_cq_sread(&f->cq.cq_fid, NULL, 1, NULL, 0), -FI_ENOSYS);
	/* No wait object: no blocking read, no signal, no fd. */
	assert_int_equal(fi_cq_sread(&f->cq.cq_fid, &entry, 1, NULL, 0), -FI_ENOSYS);
	assert_int_equal(fi_cq_signal(&f->cq.cq_fid), -FI_ENOSYS);
	assert_int_equal(util_cq_trywait(&f->cq), -FI_ENODATA);
}

static void test_count_zero_drives_progress(void **state)
{
	struct fixture *f = *state;

	assert_int_equal(open_cq(f, FI_CQ_FORMAT_CONTEXT, 0, FI_WAIT_NONE), 0);
	assert_int_equal(fi_cq_read(&f->cq.cq_fid, NULL, 0), -FI_EAGAIN);
	assert_int_equal(f->progress_calls, 1);

	write_seq(f, 0, 1);
	/* Entries wait, none taken. */
	assert_int_equal(fi_cq_read(&f->cq.cq_fid, NULL, 0), 0);
	assert_int_equal(f->progress_calls, 2);
	assert_int_equal(util_cq_count(&f->cq), 1);
	read_seq(f, 0, 1, 1);
}

static void test_ring_wraparound(void **state)
{
	struct fixture *f = *state;
	uint64_t seq = 0;
	int round;

	assert_int_equal(open_cq(f, FI_CQ_FORMAT_DATA, SMALL_CQ_SIZE, FI_WAIT_NONE), 0);
	assert_int_equal(f->cq.ring_mask + 1, SMALL_CQ_SIZE);

	/* 3 in, 3 out: head and tail lap the ring many times without overflowing. */
	for (round = 0; round < 50; round++) {
		write_seq(f, seq, 3);
		assert_int_equal(f->cq.overflow_cnt, 0);
		read_seq(f, seq, 3, round % 3 + 1);
		seq += 3;
	}
	assert_true(f->cq.head > 4 * (f->cq.ring_mask + 1));
	assert_int_equal(f->cq.head, f->cq.tail);
}

static void test_overflow_loses_nothing_and_keeps_fifo(void **state)
{
	struct fixture *f = *state;
	uint64_t written = 0, read = 0;
	int round;

	assert_int_equal(open_cq(f, FI_CQ_FORMAT_DATA, SMALL_CQ_SIZE, FI_WAIT_NONE), 0);

	write_seq(f, written, 100);
	written += 100;
	assert_int_equal(f->cq.overflow_cnt, 100 - SMALL_CQ_SIZE);
	assert_int_equal(util_cq_count(&f->cq), 100);

	/* Reads free ring slots while more writes arrive: order must hold throughout. */
	for (round = 0; round < 20; round++) {
		read_seq(f, read, 7, 7);
		read += 7;
		write_seq(f, written, 5);
		written += 5;
	}
	read_seq(f, read, written - read, 16);
	assert_int_equal(fi_cq_read(&f->cq.cq_fid, (struct fi_cq_data_entry[1]){ 0 }, 1),
			 -FI_EAGAIN);
}

/*
 * A completion that cannot be stored is not lost silently: the CQ is overrun (fi_cq(3)), what
 * was stored before is still read, then every read says FI_EOVERRUN, which is fatal.
 */
static void test_overrun_when_memory_runs_out(void **state)
{
	struct fi_cq_err_entry err = { .err = FI_EIO, .prov_errno = -FI_EIO };
	struct fixture *f = *state;
	struct fi_cq_data_entry entry;
	int i;

	assert_int_equal(open_cq(f, FI_CQ_FORMAT_DATA, SMALL_CQ_SIZE, FI_WAIT_NONE), 0);
	write_seq(f, 0, SMALL_CQ_SIZE);
	fail_malloc = true;
	/* the ring is full: the next entry needs an overflow node, the error its entry */
	assert_int_equal(util_cq_write(&f->cq, NULL, FI_SEND, 0, NULL, 0, 0, 0), -FI_EOVERRUN);
	assert_int_equal(util_cq_write_error(&f->cq, &err), -FI_EOVERRUN);
	fail_malloc = false;
	/* fatal: nothing is stored any more, memory or not */
	assert_int_equal(util_cq_write(&f->cq, NULL, FI_SEND, 0, NULL, 0, 0, 0), -FI_EOVERRUN);

	read_seq(f, 0, SMALL_CQ_SIZE, 1);
	for (i = 0; i < 2; i++) {
		assert_int_equal(fi_cq_read(&f->cq.cq_fid, &entry, 1), -FI_EAVAIL);
		memset(&err, 0, sizeof(err));
		assert_int_equal(fi_cq_readerr(&f->cq.cq_fid, &err, 0), 1);
		assert_int_equal(err.err, FI_EOVERRUN);
		assert_int_equal(err.olen, 3);
	}
	assert_int_equal(util_cq_count(&f->cq), 1);
	/* so that the fixture's end-of-test checks apply to the rest */
	f->cq.is_overrun = false;
}

static void check_format(struct fixture *f, enum fi_cq_format format, size_t size)
{
	struct fi_cq_tagged_entry *entry;
	unsigned char buf[2 * sizeof(struct fi_cq_tagged_entry)];
	int ctx;
	size_t i;

	assert_int_equal(open_cq(f, format, 0, FI_WAIT_NONE), 0);
	assert_int_equal(f->cq.entry_size, size);

	assert_int_equal(util_cq_write(&f->cq, &ctx, FI_RECV | FI_TAGGED, 11, buf, 22, 33, 44), 0);
	assert_int_equal(util_cq_write(&f->cq, NULL, FI_SEND, 55, NULL, 66, 77, 88), 0);
	memset(buf, 0xa5, sizeof(buf));
	assert_int_equal(fi_cq_read(&f->cq.cq_fid, buf, 2), 2);

	/* The first entry's fields, as far as the format goes. */
	entry = (struct fi_cq_tagged_entry *) buf;
	assert_ptr_equal(entry->op_context, &ctx);
	if (size > sizeof(struct fi_cq_entry)) {
		assert_int_equal(entry->flags, FI_RECV | FI_TAGGED);
		assert_int_equal(entry->len, 11);
	}
	if (size > sizeof(struct fi_cq_msg_entry)) {
		assert_ptr_equal(entry->buf, buf);
		assert_int_equal(entry->data, 22);
	}
	if (size > sizeof(struct fi_cq_data_entry))
		assert_int_equal(entry->tag, 33);

	/* The second one starts right after, in the user's format. */
	entry = (struct fi_cq_tagged_entry *) (buf + size);
	assert_null(entry->op_context);
	if (size > sizeof(struct fi_cq_entry))
		assert_int_equal(entry->len, 55);
	if (size > sizeof(struct fi_cq_data_entry))
		assert_int_equal(entry->tag, 77);

	/* Nothing written past two entries of the user's size. */
	for (i = 2 * size; i < sizeof(buf); i++)
		assert_int_equal(buf[i], 0xa5);

	assert_int_equal(util_cq_fini(&f->cq), 0);
	f->is_open = false;
}

static void test_formats(void **state)
{
	struct fixture *f = *state;

	check_format(f, FI_CQ_FORMAT_CONTEXT, sizeof(struct fi_cq_entry));
	check_format(f, FI_CQ_FORMAT_MSG, sizeof(struct fi_cq_msg_entry));
	check_format(f, FI_CQ_FORMAT_DATA, sizeof(struct fi_cq_data_entry));
	check_format(f, FI_CQ_FORMAT_TAGGED, sizeof(struct fi_cq_tagged_entry));
	check_format(f, FI_CQ_FORMAT_UNSPEC, sizeof(struct fi_cq_entry));
}

static void test_readfrom(void **state)
{
	struct fixture *f = *state;
	struct fi_cq_msg_entry entries[3];
	fi_addr_t addrs[3] = { 0 };

	assert_int_equal(open_cq(f, FI_CQ_FORMAT_MSG, SMALL_CQ_SIZE, FI_WAIT_NONE), 0);
	/* 6 entries: the ring holds 4, two overflow; both carry their source. */
	assert_int_equal(util_cq_write(&f->cq, NULL, FI_RECV, 1, NULL, 0, 0, 7), 0);
	assert_int_equal(util_cq_write(&f->cq, NULL, FI_RECV, 2, NULL, 0, 0, FI_ADDR_NOTAVAIL), 0);
	assert_int_equal(util_cq_write(&f->cq, NULL, FI_SEND, 3, NULL, 0, 0, 9), 0);
	assert_int_equal(util_cq_write(&f->cq, NULL, FI_RECV, 4, NULL, 0, 0, 10), 0);
	assert_int_equal(util_cq_write(&f->cq, NULL, FI_RECV, 5, NULL, 0, 0, 11), 0);
	assert_int_equal(util_cq_write(&f->cq, NULL, FI_RECV, 6, NULL, 0, 0, 12), 0);

	assert_int_equal(fi_cq_readfrom(&f->cq.cq_fid, entries, 3, addrs), 3);
	assert_int_equal(entries[0].len, 1);
	assert_int_equal(addrs[0], 7);
	assert_int_equal(addrs[1], FI_ADDR_NOTAVAIL);
	assert_int_equal(addrs[2], 9);

	/* A plain read skips the source; readfrom goes on across ring and overflow. */
	assert_int_equal(fi_cq_read(&f->cq.cq_fid, entries, 1), 1);
	assert_int_equal(entries[0].len, 4);
	assert_int_equal(fi_cq_readfrom(&f->cq.cq_fid, entries, 3, addrs), 2);
	assert_int_equal(entries[0].len, 5);
	assert_int_equal(addrs[0], 11);
	assert_int_equal(entries[1].len, 6);
	assert_int_equal(addrs[1], 12);
}

static void write_err(struct fixture *f, int err, uint64_t tag)
{
	struct fi_cq_err_entry entry = {
		.op_context = f,
		.flags = FI_RECV | FI_TAGGED,
		.len = 5,
		.tag = tag,
		.olen = 3,
		.err = err,
		.prov_errno = -err,
		/* Not kept: the CQ must not hold on to the writer's memory. */
		.err_data = &entry,
		.err_data_size = sizeof(entry),
	};

	assert_int_equal(util_cq_write_error(&f->cq, &entry), 0);
}

static void test_errors_are_out_of_band_in_order(void **state)
{
	struct fixture *f = *state;
	struct fi_cq_err_entry err = { 0 };
	struct fi_cq_tagged_entry entry;

	assert_int_equal(open_cq(f, FI_CQ_FORMAT_TAGGED, 0, FI_WAIT_NONE), 0);
	write_seq(f, 0, 1);
	write_err(f, FI_ETRUNC, 100);
	write_seq(f, 1, 1);
	write_err(f, FI_ECANCELED, 200);
	assert_int_equal(util_cq_count(&f->cq), 4);
	assert_int_equal(util_cq_write_error(&f->cq, NULL), -FI_EINVAL);

	/* Errors pending: reads fail with -FI_EAVAIL even though entries wait. */
	assert_int_equal(fi_cq_read(&f->cq.cq_fid, &entry, 1), -FI_EAVAIL);
	assert_int_equal(fi_cq_readerr(&f->cq.cq_fid, &err, 0), 1);
	assert_int_equal(err.err, FI_ETRUNC);
	assert_int_equal(err.prov_errno, -FI_ETRUNC);
	assert_int_equal(err.tag, 100);
	assert_int_equal(err.olen, 3);
	assert_ptr_equal(err.op_context, f);
	assert_null(err.err_data);
	assert_int_equal(err.err_data_size, 0);

	assert_int_equal(fi_cq_read(&f->cq.cq_fid, &entry, 1), -FI_EAVAIL);
	assert_int_equal(fi_cq_readerr(&f->cq.cq_fid, &err, 0), 1);
	assert_int_equal(err.err, FI_ECANCELED);
	assert_int_equal(err.tag, 200);
	assert_int_equal(fi_cq_readerr(&f->cq.cq_fid, &err, 0), -FI_EAGAIN);

	read_seq(f, 0, 2, 2);
}

static void test_readerr_err_data(void **state)
{
	struct fixture *f = *state;
	unsigned char user_data[16], raw[sizeof(struct fi_cq_err_entry)];
	struct fi_cq_err_entry err;
	size_t old_size = offsetof(struct fi_cq_err_entry, err_data_size);
#if HAVE_STRUCT_FI_CQ_ERR_ENTRY_SRC_ADDR
	size_t new_end = offsetof(struct fi_cq_err_entry, src_addr);
#else
	size_t new_end = sizeof(struct fi_cq_err_entry);
#endif
	size_t i;

	assert_int_equal(open_cq(f, FI_CQ_FORMAT_CONTEXT, 0, FI_WAIT_NONE), 0);

	/* 1.5+: the application's buffer stays its own, 0 bytes of it are used. */
	write_err(f, FI_EIO, 1);
	memset(&err, 0, sizeof(err));
	err.err_data = user_data;
	err.err_data_size = sizeof(user_data);
	assert_int_equal(fi_cq_readerr(&f->cq.cq_fid, &err, 0), 1);
	assert_ptr_equal(err.err_data, user_data);
	assert_int_equal(err.err_data_size, 0);
	assert_int_equal(err.err, FI_EIO);

	/* Without a buffer (size 0) there is no provider data to point at. */
	write_err(f, FI_EIO, 2);
	err.err_data = user_data;
	err.err_data_size = 0;
	assert_int_equal(fi_cq_readerr(&f->cq.cq_fid, &err, 0), 1);
	assert_null(err.err_data);
	assert_int_equal(err.err_data_size, 0);
	assert_int_equal(err.tag, 2);

	/* An application built for < 1.5 has no err_data_size: nothing written there. */
	f->cq.api_version = FI_VERSION(1, 4);
	write_err(f, FI_EIO, 3);
	memset(raw, 0xa5, sizeof(raw));
	assert_int_equal(fi_cq_readerr(&f->cq.cq_fid, (struct fi_cq_err_entry *) raw, 0), 1);
	memcpy(&err, raw, old_size);
	assert_int_equal(err.err, FI_EIO);
	assert_int_equal(err.tag, 3);
	assert_null(err.err_data);
	for (i = old_size; i < new_end; i++)
		assert_int_equal(raw[i], 0xa5);
#if HAVE_STRUCT_FI_CQ_ERR_ENTRY_SRC_ADDR
	/* 1.5 to 1.19: the struct ends after err_data_size; src_addr (1.20) is not written.
	 * Through the ops, as fi_cq_readerr of newer headers sets src_addr itself first. */
	f->cq.api_version = FI_VERSION(1, 17);
	write_err(f, FI_EIO, 4);
	memset(raw, 0xa5, sizeof(raw));
	assert_int_equal(f->cq.cq_fid.ops->readerr(&f->cq.cq_fid, (void *) raw, 0), 1);
	memcpy(&err, raw, new_end);
	assert_int_equal(err.tag, 4);
	for (i = new_end; i < sizeof(raw); i++)
		assert_int_equal(raw[i], 0xa5);

	/* 1.20 on: src_addr is there, and no error here names an address. */
	f->cq.api_version = FI_VERSION(1, 20);
	write_err(f, FI_EIO, 5);
	memset(&err, 0, sizeof(err));
	assert_int_equal(f->cq.cq_fid.ops->readerr(&f->cq.cq_fid, &err, 0), 1);
	assert_int_equal(err.tag, 5);
	assert_true(err.src_addr == FI_ADDR_NOTAVAIL);
#endif
}

static void test_strerror(void **state)
{
	struct fixture *f = *state;
	char buf[64];

	assert_int_equal(open_cq(f, FI_CQ_FORMAT_CONTEXT, 0, FI_WAIT_NONE), 0);
	assert_string_equal(fi_cq_strerror(&f->cq.cq_fid, FI_ETRUNC, NULL, NULL, 0),
			    fi_strerror(FI_ETRUNC));
	assert_ptr_equal(fi_cq_strerror(&f->cq.cq_fid, -FI_ETRUNC, NULL, buf, sizeof(buf)), buf);
	assert_string_equal(buf, fi_strerror(FI_ETRUNC));
}

static void test_progress_hook_writes_entries(void **state)
{
	struct fixture *f = *state;
	struct fi_cq_err_entry err = { 0 };
	struct fi_cq_data_entry entry;

	assert_int_equal(open_cq(f, FI_CQ_FORMAT_DATA, SMALL_CQ_SIZE, FI_WAIT_FD), 0);
	/* Each read runs progress first, outside the lock, and sees what it wrote. */
	f->progress_writes = 3;
	read_seq(f, 0, 3, 16);
	assert_int_equal(f->progress_calls, 1);

	/* More than the ring in one call: progress overflows the ring as well. */
	f->progress_writes = 10;
	read_seq(f, 3, 5, 5);
	f->progress_writes = 0;
	read_seq(f, 8, 5, 16);
	assert_int_equal(f->progress_calls, 3);

	/* readerr and sread drive progress too. */
	assert_int_equal(fi_cq_readerr(&f->cq.cq_fid, &err, 0), -FI_EAGAIN);
	assert_int_equal(f->progress_calls, 4);
	f->progress_writes = 1;
	assert_int_equal(fi_cq_sread(&f->cq.cq_fid, &entry, 1, NULL, LONG_TIMEOUT_MS), 1);
	assert_int_equal(entry.data, 13);
	assert_int_equal(f->next_data, 14);
	f->progress_writes = 0;
}

static void test_sread_timeout_sleeps(void **state)
{
	struct fixture *f = *state;
	struct fi_cq_entry entry;
	uint64_t start;

	assert_int_equal(open_cq(f, FI_CQ_FORMAT_CONTEXT, 0, FI_WAIT_FD), 0);
	start = util_now_ms();
	assert_int_equal(fi_cq_sread(&f->cq.cq_fid, &entry, 1, NULL, SHORT_TIMEOUT_MS),
			 -FI_EAGAIN);
	assert_true(util_now_ms() - start >= SHORT_TIMEOUT_MS);
	/* Slept in the kernel: a handful of progress calls, not a spin. */
	assert_true(f->progress_calls <= 6);

	/* Timeout 0 is a non-blocking check. */
	assert_int_equal(fi_cq_sread(&f->cq.cq_fid, &entry, 1, NULL, 0), -FI_EAGAIN);
	assert_int_equal(fi_cq_sread(&f->cq.cq_fid, NULL, 1, NULL, 0), -FI_EINVAL);
}

static void test_sread_returns_what_is_there(void **state)
{
	struct fixture *f = *state;
	struct fi_cq_err_entry err = { 0 };
	struct fi_cq_data_entry entries[4];
	fi_addr_t addrs[4];

	assert_int_equal(open_cq(f, FI_CQ_FORMAT_DATA, 0, FI_WAIT_FD), 0);
	write_seq(f, 0, 3);
	assert_int_equal(fi_cq_sreadfrom(&f->cq.cq_fid, entries, 4, addrs, NULL, LONG_TIMEOUT_MS),
			 3);
	assert_int_equal(entries[2].data, 2);
	assert_int_equal(addrs[2], 2);

	write_err(f, FI_EIO, 0);
	assert_int_equal(fi_cq_sread(&f->cq.cq_fid, entries, 4, NULL, LONG_TIMEOUT_MS),
			 -FI_EAVAIL);
	assert_int_equal(fi_cq_readerr(&f->cq.cq_fid, &err, 0), 1);
}

static void test_sread_threshold(void **state)
{
	struct fixture *f = *state;
	struct fi_cq_attr attr = {
		.format = FI_CQ_FORMAT_DATA,
		.wait_obj = FI_WAIT_FD,
		.wait_cond = FI_CQ_COND_THRESHOLD,
	};
	struct fi_cq_data_entry entries[4];
	size_t threshold = 3;
	uint64_t start;

	assert_int_equal(util_cq_init(&f->cq, &attr, true, NULL, NULL), 0);
	f->is_open = true;

	/* Threshold met: returns at once. */
	write_seq(f, 0, 3);
	assert_int_equal(fi_cq_sread(&f->cq.cq_fid, entries, 4, &threshold, LONG_TIMEOUT_MS), 3);

	/* Not met: waits out the timeout, then returns what is there. */
	write_seq(f, 3, 2);
	start = util_now_ms();
	assert_int_equal(fi_cq_sread(&f->cq.cq_fid, entries, 4, &threshold, SHORT_TIMEOUT_MS), 2);
	assert_true(util_now_ms() - start >= SHORT_TIMEOUT_MS);
	assert_int_equal(entries[1].data, 4);
}

struct helper {
	struct fixture *f;
	bool is_write;              /* write a completion instead of signalling */
	bool saw_sleeper;           /* util_cq_may_sleep while the reader was blocked */
	int ret;
};

static void wait_for_sleeper(struct util_cq *cq)
{
	/* Act only once the reader is inside sread, so the test covers a blocked reader. */
	while (atomic_load(&cq->sleepers) == 0)
		sched_yield();
}

static void *helper_thread(void *arg)
{
	struct helper *h = arg;

	wait_for_sleeper(&h->f->cq);
	h->saw_sleeper = util_cq_may_sleep(&h->f->cq);
	if (h->is_write)
		h->ret = util_cq_write(&h->f->cq, h, FI_RECV, 42, NULL, 0, 0, 0);
	else
		h->ret = fi_cq_signal(&h->f->cq.cq_fid);
	return NULL;
}

static void test_signal_wakes_blocked_sread(void **state)
{
	struct fixture *f = *state;
	struct helper h = { .f = f };
	struct fi_cq_entry entry;
	pthread_t thread;
	uint64_t start;

	assert_int_equal(open_cq(f, FI_CQ_FORMAT_CONTEXT, 0, FI_WAIT_FD), 0);
	start = util_now_ms();
	assert_int_equal(pthread_create(&thread, NULL, helper_thread, &h), 0);
	assert_int_equal(fi_cq_sread(&f->cq.cq_fid, &entry, 1, NULL, LONG_TIMEOUT_MS), -FI_EAGAIN);
	assert_int_equal(pthread_join(thread, NULL), 0);
	assert_int_equal(h.ret, 0);
	/* Woken by the signal, not by the timeout. */
	assert_true(util_now_ms() - start < LONG_TIMEOUT_MS);

	/* The signal was consumed: the next sread times out normally. */
	assert_int_equal(fi_cq_sread(&f->cq.cq_fid, &entry, 1, NULL, 0), -FI_EAGAIN);
	assert_false(atomic_load(&f->cq.is_signaled));

	/* A signal sent before the sread ends the next one with an infinite timeout. */
	assert_int_equal(fi_cq_signal(&f->cq.cq_fid), 0);
	assert_int_equal(fi_cq_sread(&f->cq.cq_fid, &entry, 1, NULL, -1), -FI_EAGAIN);

	/* A signal sent while entries are returned survives them. */
	assert_int_equal(fi_cq_signal(&f->cq.cq_fid), 0);
	write_seq(f, 0, 1);
	assert_int_equal(fi_cq_sread(&f->cq.cq_fid, &entry, 1, NULL, -1), 1);
	assert_int_equal(fi_cq_sread(&f->cq.cq_fid, &entry, 1, NULL, -1), -FI_EAGAIN);
}

static void test_write_wakes_blocked_sread(void **state)
{
	struct fixture *f = *state;
	struct helper h = { .f = f, .is_write = true };
	struct fi_cq_msg_entry entry;
	pthread_t thread;

	assert_int_equal(open_cq(f, FI_CQ_FORMAT_MSG, 0, FI_WAIT_FD), 0);
	assert_int_equal(pthread_create(&thread, NULL, helper_thread, &h), 0);
	assert_int_equal(fi_cq_sread(&f->cq.cq_fid, &entry, 1, NULL, -1), 1);
	assert_int_equal(pthread_join(thread, NULL), 0);
	assert_int_equal(h.ret, 0);
	assert_ptr_equal(entry.op_context, &h);
	assert_int_equal(entry.len, 42);
}

/* What a provider asks before keeping work for a later call: how many completions were ever
 * written, and whether a thread may be asleep on the CQ. */
static void test_write_count_and_may_sleep(void **state)
{
	struct fixture *f = *state;
	struct helper h = { .f = f, .is_write = true };
	struct fi_cq_err_entry err = { 0 };
	struct fi_cq_data_entry entry;
	pthread_t thread;
	int fd = -1;

	assert_int_equal(open_cq(f, FI_CQ_FORMAT_DATA, SMALL_CQ_SIZE, FI_WAIT_FD), 0);
	assert_int_equal(util_cq_write_count(&f->cq), 0);
	/* entries in the ring and past it, and errors, count; reads do not */
	write_seq(f, 0, SMALL_CQ_SIZE + 2);
	write_err(f, FI_EIO, 0);
	assert_int_equal(util_cq_write_count(&f->cq), SMALL_CQ_SIZE + 3);
	assert_int_equal(fi_cq_readerr(&f->cq.cq_fid, &err, 0), 1);
	read_seq(f, 0, SMALL_CQ_SIZE + 2, 4);
	assert_int_equal(util_cq_write_count(&f->cq), SMALL_CQ_SIZE + 3);

	/* asleep in sread while it waits, and no more once it returned */
	assert_false(util_cq_may_sleep(&f->cq));
	assert_int_equal(pthread_create(&thread, NULL, helper_thread, &h), 0);
	assert_int_equal(fi_cq_sread(&f->cq.cq_fid, &entry, 1, NULL, -1), 1);
	assert_int_equal(pthread_join(thread, NULL), 0);
	assert_true(h.saw_sleeper);
	assert_false(util_cq_may_sleep(&f->cq));
	assert_int_equal(util_cq_write_count(&f->cq), SMALL_CQ_SIZE + 4);

	/* the fd handed out: a thread may sleep on it at any time */
	assert_int_equal(fi_control(&f->cq.cq_fid.fid, FI_GETWAIT, &fd), 0);
	assert_true(util_cq_may_sleep(&f->cq));
}

static void test_wait_fd_readable_after_write(void **state)
{
	struct fixture *f = *state;
	struct fi_cq_err_entry err = { 0 };
	enum fi_wait_obj obj;
	int fd = -1;

	assert_int_equal(open_cq(f, FI_CQ_FORMAT_DATA, 0, FI_WAIT_FD), 0);
	assert_int_equal(fi_control(&f->cq.cq_fid.fid, FI_GETWAIT, &fd), 0);
	assert_true(fd >= 0);
	assert_int_equal(fi_control(&f->cq.cq_fid.fid, FI_GETWAITOBJ, &obj), 0);
	assert_int_equal(obj, FI_WAIT_FD);
	assert_int_equal(fi_control(&f->cq.cq_fid.fid, FI_GETOPSFLAG, &obj), -FI_ENOSYS);
	assert_false(is_readable(fd));

	write_seq(f, 0, 1);
	assert_true(is_readable(fd));
	/* fi_trywait protocol: refuses while entries wait... */
	assert_int_equal(util_cq_trywait(&f->cq), -FI_EAGAIN);
	read_seq(f, 0, 1, 1);
	/* ...and once empty it clears the fd, which the next write sets again. */
	assert_int_equal(util_cq_trywait(&f->cq), 0);
	assert_false(is_readable(fd));

	write_err(f, FI_EIO, 0);
	assert_true(is_readable(fd));
	assert_int_equal(util_cq_trywait(&f->cq), -FI_EAGAIN);
	assert_int_equal(fi_cq_readerr(&f->cq.cq_fid, &err, 0), 1);
	assert_int_equal(util_cq_trywait(&f->cq), 0);
	assert_false(is_readable(fd));
}

static void test_getwait_without_wait_object(void **state)
{
	struct fixture *f = *state;
	int fd = -1;

	assert_int_equal(open_cq(f, FI_CQ_FORMAT_DATA, 0, FI_WAIT_NONE), 0);
	assert_int_equal(fi_control(&f->cq.cq_fid.fid, FI_GETWAIT, &fd), -FI_ENODATA);
}

static void test_fini_refuses_while_bound(void **state)
{
	struct fixture *f = *state;

	assert_int_equal(open_cq(f, FI_CQ_FORMAT_DATA, SMALL_CQ_SIZE, FI_WAIT_FD), 0);
	atomic_fetch_add(&f->cq.ref, 1);
	assert_int_equal(util_cq_fini(&f->cq), -FI_EBUSY);
	atomic_fetch_sub(&f->cq.ref, 1);

	/* Entries left at close are dropped, overflow and errors included, without leaks. */
	write_seq(f, 0, 10);
	write_err(f, FI_EIO, 0);
	assert_int_equal(util_cq_fini(&f->cq), 0);
	f->is_open = false;
}

#define WRITERS 2
#define PER_WRITER 5000

struct writer {
	struct fixture *f;
	uint64_t id;
	int ret;
};

static void *writer_thread(void *arg)
{
	struct writer *w = arg;
	uint64_t i;

	for (i = 0; i < PER_WRITER && !w->ret; i++)
		w->ret = util_cq_write(&w->f->cq, NULL, FI_SEND, 0, NULL, i, w->id, 0);
	return NULL;
}

static void test_concurrent_writers_keep_per_writer_order(void **state)
{
	struct fixture *f = *state;
	struct writer writers[WRITERS];
	pthread_t threads[WRITERS];
	uint64_t next[WRITERS] = { 0 };
	struct fi_cq_tagged_entry entries[16];
	size_t total = 0;
	ssize_t ret, i;
	int w;

	/* A small ring, so the writers race through the overflow path as well. */
	assert_int_equal(open_cq(f, FI_CQ_FORMAT_TAGGED, 64, FI_WAIT_FD), 0);
	for (w = 0; w < WRITERS; w++) {
		writers[w] = (struct writer){ .f = f, .id = (uint64_t) w };
		assert_int_equal(pthread_create(&threads[w], NULL, writer_thread, &writers[w]), 0);
	}
	while (total < WRITERS * PER_WRITER) {
		ret = fi_cq_sread(&f->cq.cq_fid, entries, 16, NULL, LONG_TIMEOUT_MS);
		assert_true(ret > 0);
		for (i = 0; i < ret; i++) {
			assert_true(entries[i].tag < WRITERS);
			assert_int_equal(entries[i].data, next[entries[i].tag]);
			next[entries[i].tag]++;
		}
		total += (size_t) ret;
	}
	for (w = 0; w < WRITERS; w++) {
		assert_int_equal(pthread_join(threads[w], NULL), 0);
		assert_int_equal(writers[w].ret, 0);
		assert_int_equal(next[w], PER_WRITER);
	}
}

#define CQ_TEST(name) cmocka_unit_test_setup_teardown(name, setup, teardown)

int main(void)
{
	const struct CMUnitTest tests[] = {
		CQ_TEST(test_init_checks_attributes),
		CQ_TEST(test_init_defaults),
		CQ_TEST(test_read_arguments_and_empty),
		CQ_TEST(test_count_zero_drives_progress),
		CQ_TEST(test_ring_wraparound),
		CQ_TEST(test_overflow_loses_nothing_and_keeps_fifo),
		CQ_TEST(test_overrun_when_memory_runs_out),
		CQ_TEST(test_formats),
		CQ_TEST(test_readfrom),
		CQ_TEST(test_errors_are_out_of_band_in_order),
		CQ_TEST(test_readerr_err_data),
		CQ_TEST(test_strerror),
		CQ_TEST(test_progress_hook_writes_entries),
		CQ_TEST(test_sread_timeout_sleeps),
		CQ_TEST(test_sread_returns_what_is_there),
		CQ_TEST(test_sread_threshold),
		CQ_TEST(test_signal_wakes_blocked_sread),
		CQ_TEST(test_write_wakes_blocked_sread),
		CQ_TEST(test_write_count_and_may_sleep),
		CQ_TEST(test_wait_fd_readable_after_write),
		CQ_TEST(test_getwait_without_wait_object),
		CQ_TEST(test_fini_refuses_while_bound),
		CQ_TEST(test_concurrent_writers_keep_per_writer_order),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
