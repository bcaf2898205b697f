/*
 * Unit tests of util/cma.c: who a process is, whether a peer is reachable, and copies out of
 * another process's memory (a child that waits until it is told to go).
 */
#include "config.h"

#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <string.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#include <linux/capability.h>
#include <cmocka.h>

#include "util/cma.h"

static struct fi_provider test_prov = { .name = "util_test" };
struct fi_provider *util_prov = &test_prov;

#define DATA_LEN 100000

/* The child's memory: the same addresses as the parent's, the child's own contents. */
static uint8_t data[DATA_LEN];

struct child {
	pid_t pid;
	int go;                        /* write end: the child exits once it reads */
};

/* A child that fills data with its pattern (and, undumpable, lets no one without
 * CAP_SYS_PTRACE read it), says it is ready and waits. */
static void child_start(struct child *c, bool is_undumpable)
{
	int ready[2], go[2];
	char x;
	size_t i;

	assert_int_equal(pipe(ready), 0);
	assert_int_equal(pipe(go), 0);
	c->pid = fork();
	assert_true(c->pid >= 0);
	if (!c->pid) {
		/* never outlives the test, even one that failed before child_stop */
		prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
		alarm(60);
		close(ready[0]);
		close(go[1]);              /* the parent's end: its exit is our EOF */
		for (i = 0; i < DATA_LEN; i++)
			data[i] = (uint8_t) (i * 7 + 3);
		if (is_undumpable)
			prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
		if (write(ready[1], "r", 1) != 1)
			_exit(1);
		_exit(read(go[0], &x, 1) == 1 ? 0 : 2);
	}
	close(ready[1]);
	close(go[0]);
	assert_int_equal(read(ready[0], &x, 1), 1);
	close(ready[0]);
	c->go = go[1];
}

static void child_stop(struct child *c)
{
	int status;

	assert_int_equal(write(c->go, "g", 1), 1);
	close(c->go);
	assert_int_equal(waitpid(c->pid, &status, 0), c->pid);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

static void test_self(void **state)
{
	struct util_cma_id id, again;

	(void) state;
	assert_int_equal(util_cma_self(&id), 0);
	assert_int_equal(id.pid, (uint64_t) getpid());
	assert_int_not_equal(id.cookie, 0);
	assert_int_equal(*(const uint64_t *) (uintptr_t) id.cookie_addr, id.cookie);
	assert_int_equal(util_cma_self(&again), 0);
	assert_memory_equal(&id, &again, sizeof(id));
	/* a process reaches itself: endpoints of one process copy too */
	assert_true(util_cma_reaches(&id));
}

static void test_reaches_child_not_strangers(void **state)
{
	struct util_cma_id self, peer;
	struct child c;

	(void) state;
	assert_int_equal(util_cma_self(&self), 0);
	child_start(&c, false);
	peer = self;                   /* the child's cookie lies where ours does */
	peer.pid = (uint64_t) c.pid;
	assert_true(util_cma_reaches(&peer));

	peer.cookie ^= 2;              /* another process at that pid */
	assert_false(util_cma_reaches(&peer));
	peer = self;
	peer.pid = (uint64_t) c.pid;
	peer.pid_ns++;                 /* the pid means another process there */
	assert_false(util_cma_reaches(&peer));
	peer.pid_ns--;
	peer.boot_id[3] ^= 1;          /* another host */
	assert_false(util_cma_reaches(&peer));
	peer.boot_id[3] ^= 1;
	peer.cookie_addr = 8;          /* nothing mapped there */
	assert_false(util_cma_reaches(&peer));
	peer.cookie_addr = self.cookie_addr;
	peer.pid = 0;
	assert_false(util_cma_reaches(&peer));
	peer.pid = (uint64_t) 1 << 40;
	assert_false(util_cma_reaches(&peer));
	child_stop(&c);
	/* gone */
	peer.pid = (uint64_t) c.pid;
	assert_false(util_cma_reaches(&peer));
}

static void assert_pattern(const uint8_t *buf, size_t off, size_t len)
{
	size_t i;

	for (i = 0; i < len; i++) {
		if (buf[i] != (uint8_t) ((off + i) * 7 + 3))
			fail_msg("byte %zu: %u", off + i, buf[i]);
	}
}

static void test_read_gathers_and_scatters(void **state)
{
	static uint8_t out[DATA_LEN + 16];
	struct iovec remote[3], local[4];
	struct child c;

	(void) state;
	memset(data, 0, sizeof(data));
	child_start(&c, false);
	/* uneven pieces on both sides, an empty one among them */
	remote[0] = (struct iovec) { .iov_base = data, .iov_len = 4097 };
	remote[1] = (struct iovec) { .iov_base = data + 4097, .iov_len = 0 };
	remote[2] = (struct iovec) { .iov_base = data + 4097, .iov_len = DATA_LEN - 4097 };
	local[0] = (struct iovec) { .iov_base = out, .iov_len = 10 };
	local[1] = (struct iovec) { .iov_base = out + 10, .iov_len = 50000 };
	local[2] = (struct iovec) { .iov_base = out + 50010, .iov_len = DATA_LEN - 50010 };
	local[3] = (struct iovec) { .iov_base = out + DATA_LEN, .iov_len = 16 };
	memset(out, 0xee, sizeof(out));
	assert_int_equal(util_cma_read(c.pid, local, 4, remote, 3, DATA_LEN), 0);
	assert_pattern(out, 0, DATA_LEN);
	assert_int_equal(out[DATA_LEN], 0xee); /* past len: untouched */

	/* len shorter than both lists: only len bytes move */
	memset(out, 0xee, sizeof(out));
	assert_int_equal(util_cma_read(c.pid, local, 4, remote, 3, 4200), 0);
	assert_pattern(out, 0, 4200);
	assert_int_equal(out[4200], 0xee);
	assert_int_equal(util_cma_read(c.pid, local, 4, remote, 3, 0), 0);
	child_stop(&c);
	/* the parent's own data was never the child's */
	assert_int_equal(data[1], 0);
}

static void test_read_errors(void **state)
{
	uint8_t out[64];
	struct iovec local = { .iov_base = out, .iov_len = sizeof(out) };
	struct iovec remote = { .iov_base = data, .iov_len = sizeof(out) };
	struct iovec many[UTIL_CMA_IOV_MAX + 1];
	struct iovec bad;
	struct child c;
	size_t i;

	(void) state;
	child_start(&c, false);
	/* lists shorter than len, or too long */
	assert_int_equal(util_cma_read(c.pid, &local, 1, &remote, 1, sizeof(out) + 1),
			 -FI_EINVAL);
	for (i = 0; i < UTIL_CMA_IOV_MAX + 1; i++)
		many[i] = (struct iovec) { .iov_base = out + i, .iov_len = 1 };
	assert_int_equal(util_cma_read(c.pid, many, UTIL_CMA_IOV_MAX + 1, &remote, 1, 17),
			 -FI_EINVAL);
	assert_int_equal(util_cma_read(c.pid, many, UTIL_CMA_IOV_MAX, &remote, 1, 16), 0);
	/* nothing mapped there, in either process */
	bad = (struct iovec) { .iov_base = (void *) 8, .iov_len = sizeof(out) };
	assert_int_equal(util_cma_read(c.pid, &local, 1, &bad, 1, sizeof(out)), -FI_EFAULT);
	assert_int_equal(util_cma_read(c.pid, &bad, 1, &remote, 1, sizeof(out)), -FI_EFAULT);
	/* a fault past the first piece fails the copy too */
	many[0] = remote;
	many[0].iov_len = 32;
	many[1] = bad;
	many[1].iov_len = 32;
	assert_int_equal(util_cma_read(c.pid, &local, 1, many, 2, sizeof(out)), -FI_EFAULT);
	child_stop(&c);
	assert_int_equal(util_cma_read(c.pid, &local, 1, &remote, 1, sizeof(out)), -ESRCH);
}

/* Drops CAP_SYS_PTRACE from this process's effective set: false when it cannot. */
static bool drop_ptrace_cap(void)
{
	struct __user_cap_header_struct hdr = { .version = _LINUX_CAPABILITY_VERSION_3 };
	struct __user_cap_data_struct caps[2];

	if (syscall(SYS_capget, &hdr, caps))
		return false;
	caps[0].effective &= ~(1u << CAP_SYS_PTRACE);
	return !syscall(SYS_capset, &hdr, caps);
}

/* A process the system does not let this one read: refused, and not reachable. */
static void test_refused(void **state)
{
	struct util_cma_id peer;
	struct child c;
	pid_t reader;
	int status;

	(void) state;
	child_start(&c, true);
	assert_int_equal(util_cma_self(&peer), 0);
	peer.pid = (uint64_t) c.pid;
	reader = fork();
	assert_true(reader >= 0);
	if (!reader) {
		uint8_t out[8];
		struct iovec local = { .iov_base = out, .iov_len = sizeof(out) };
		struct iovec remote = { .iov_base = data, .iov_len = sizeof(out) };

		if (!drop_ptrace_cap())
			_exit(3);
		_exit(util_cma_read(c.pid, &local, 1, &remote, 1, sizeof(out)) == -FI_EPERM &&
			      !util_cma_reaches(&peer) ? 0 : 1);
	}
	assert_int_equal(waitpid(reader, &status, 0), reader);
	child_stop(&c);
	assert_true(WIFEXITED(status));
	if (WEXITSTATUS(status) == 3)
		skip();
	assert_int_equal(WEXITSTATUS(status), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_self),
		cmocka_unit_test(test_reaches_child_not_strangers),
		cmocka_unit_test(test_read_gathers_and_scatters),
		cmocka_unit_test(test_read_errors),
		cmocka_unit_test(test_refused),
	};

	signal(SIGPIPE, SIG_IGN);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
