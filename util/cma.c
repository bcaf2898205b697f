/* Cross-memory attach (cma.h). */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "util/cma.h"

/* What never changes in a process: its cookie, its host's boot and its pid namespace. */
static struct {
	pthread_once_t once;
	int err;
	uint64_t cookie;
	uint64_t pid_ns;
	uint8_t boot_id[16];
} util_cma_host = { .once = PTHREAD_ONCE_INIT };

static int util_cma_hex(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* The boot id's 32 hex digits (dashes between them) into 16 bytes. */
static int util_cma_read_boot_id(uint8_t *boot_id)
{
	char text[64];
	size_t n = 0, i;
	ssize_t len;
	int fd, hi, lo;

	fd = open("/proc/sys/kernel/random/boot_id", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -FI_ENOSYS;
	len = read(fd, text, sizeof(text) - 1);
	close(fd);
	for (i = 0; len > 0 && i + 1 < (size_t) len && n < 16; i++) {
		if (text[i] == '-')
			continue;
		hi = util_cma_hex(text[i]);
		lo = util_cma_hex(text[++i]);
		if (hi < 0 || lo < 0)
			return -FI_ENOSYS;
		boot_id[n++] = (uint8_t) (hi << 4 | lo);
	}
	return n == 16 ? 0 : -FI_ENOSYS;
}

static void util_cma_host_init(void)
{
	struct timespec now;
	struct stat st;

	if (getrandom(&util_cma_host.cookie, sizeof(util_cma_host.cookie), GRND_NONBLOCK) !=
	    (ssize_t) sizeof(util_cma_host.cookie)) {
		/* no entropy yet: the cookie only tells processes apart, it guards nothing */
		clock_gettime(CLOCK_MONOTONIC, &now);
		util_cma_host.cookie = (uint64_t) now.tv_nsec * 0x9e3779b97f4a7c15ull ^
				       (uint64_t) getpid() << 32;
	}
	util_cma_host.cookie |= 1; /* never 0, the value of memory not written */
	if (stat("/proc/self/ns/pid", &st)) {
		util_cma_host.err = -FI_ENOSYS;
		return;
	}
	util_cma_host.pid_ns = (uint64_t) st.st_ino;
	util_cma_host.err = util_cma_read_boot_id(util_cma_host.boot_id);
}

int util_cma_self(struct util_cma_id *id)
{
	pthread_once(&util_cma_host.once, util_cma_host_init);
	if (util_cma_host.err)
		return util_cma_host.err;
	*id = (struct util_cma_id) {
		.pid = (uint64_t) getpid(),
		.pid_ns = util_cma_host.pid_ns,
		.cookie_addr = (uint64_t) (uintptr_t) &util_cma_host.cookie,
		.cookie = util_cma_host.cookie,
	};
	memcpy(id->boot_id, util_cma_host.boot_id, sizeof(id->boot_id));
	return 0;
}

bool util_cma_reaches(const struct util_cma_id *peer)
{
	struct util_cma_id self;
	uint64_t cookie = 0;
	struct iovec local = { .iov_base = &cookie, .iov_len = sizeof(cookie) };
	struct iovec remote = { .iov_base = (void *) (uintptr_t) peer->cookie_addr,
				.iov_len = sizeof(cookie) };

	if (util_cma_self(&self) || peer->pid_ns != self.pid_ns ||
	    memcmp(peer->boot_id, self.boot_id, sizeof(self.boot_id)) || !peer->pid ||
	    peer->pid > (uint64_t) INT32_MAX)
		return false;
	if (util_cma_read((pid_t) peer->pid, &local, 1, &remote, 1, sizeof(cookie)))
		return false;
	return cookie == peer->cookie;
}

/* The first len bytes of iov[cnt] into out: their count, or 0 when iov holds fewer. */
static size_t util_cma_clip(const struct iovec *iov, size_t cnt, size_t len, struct iovec *out)
{
	size_t i, n = 0;

	for (i = 0; i < cnt && len; i++) {
		if (!iov[i].iov_len)
			continue;
		out[n] = iov[i];
		out[n].iov_len = UTIL_MIN(iov[i].iov_len, len);
		len -= out[n++].iov_len;
	}
	return len ? 0 : n;
}

/* Skips done bytes of *iov (*cnt entries). */
static void util_cma_advance(struct iovec **iov, size_t *cnt, size_t done)
{
	while (done) {
		if (done < (*iov)->iov_len) {
			(*iov)->iov_base = (char *) (*iov)->iov_base + done;
			(*iov)->iov_len -= done;
			return;
		}
		done -= (*iov)->iov_len;
		(*iov)++;
		(*cnt)--;
	}
}

int util_cma_read(pid_t pid, const struct iovec *local, size_t local_cnt,
		  const struct iovec *remote, size_t remote_cnt, size_t len)
{
	struct iovec lbuf[UTIL_CMA_IOV_MAX], rbuf[UTIL_CMA_IOV_MAX];
	struct iovec *l = lbuf, *r = rbuf;
	size_t lcnt, rcnt;
	ssize_t ret;

	if (local_cnt > UTIL_CMA_IOV_MAX || remote_cnt > UTIL_CMA_IOV_MAX)
		return -FI_EINVAL;
	if (!len)
		return 0;
	lcnt = util_cma_clip(local, local_cnt, len, lbuf);
	rcnt = util_cma_clip(remote, remote_cnt, len, rbuf);
	if (!lcnt || !rcnt)
		return -FI_EINVAL;
	/* a short count stops at an iov the system could not copy: the next call says why */
	while (len) {
		ret = process_vm_readv(pid, l, lcnt, r, rcnt, 0);
		if (ret < 0 && errno == EINTR)
			continue;
		if (ret < 0)
			return -errno;
		if (ret == 0)
			return -FI_EFAULT;
		len -= (size_t) ret;
		util_cma_advance(&l, &lcnt, (size_t) ret);
		util_cma_advance(&r, &rcnt, (size_t) ret);
	}
	return 0;
}
