/*
 * Helpers shared by the functional tests: reporting, provider selection, endpoint setup, data
 * patterns and the two-process plumbing (the CQ stashes that let one thread progress several
 * endpoints while it waits: common_cq.c; the provider's log: common_log.c). See common.h.
 */
#include "common.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <rdma/fi_ext_layer.h>

#define LT_HANG_GUARD_S 120
#define LT_MAX_CHILDREN 16

static const char *lt_prog = "test";
static unsigned lt_pass_count;
static unsigned lt_fail_count;
static pid_t lt_children[LT_MAX_CHILDREN];

/* ---- check/report framework ---- */

static void lt_kill_children(void)
{
	for (int i = 0; i < LT_MAX_CHILDREN; i++) {
		if (lt_children[i] > 0) {
			kill(lt_children[i], SIGKILL);
			waitpid(lt_children[i], NULL, 0);
			lt_children[i] = 0;
		}
	}
}

static void lt_child_track(pid_t pid, bool add)
{
	for (int i = 0; i < LT_MAX_CHILDREN; i++) {
		if (add ? lt_children[i] == 0 : lt_children[i] == pid) {
			lt_children[i] = add ? pid : 0;
			return;
		}
	}
}

/* The hang guard: report the hang as a failure, leave no child behind. */
static void lt_on_alarm(int sig)
{
	char line[256];
	int n;

	(void) sig;
	n = snprintf(line, sizeof(line),
		     "FAIL %s: hang guard fired after %d s\n%u passed, %u failed\n", lt_prog,
		     LT_HANG_GUARD_S, lt_pass_count, lt_fail_count + 1);
	if (n > 0 && write(STDOUT_FILENO, line, (size_t) n) < 0)
		n = 0;
	lt_kill_children();
	_exit(1);
}

void lt_begin(const char *prog)
{
	const char *slash = strrchr(prog, '/');

	lt_prog = slash ? slash + 1 : prog;
	setvbuf(stdout, NULL, _IOLBF, 0);
	signal(SIGALRM, lt_on_alarm);
	/* A peer that vanished must show up as an error, not kill us. */
	signal(SIGPIPE, SIG_IGN);
	atexit(lt_kill_children);
	alarm(LT_HANG_GUARD_S);
	printf("# %s: provider %s\n", lt_prog, lt_prov());
}

static bool lt_vcheck(bool ok, const char *detail, const char *file, int line, const char *fmt,
		      va_list ap)
{
	char name[512];

	vsnprintf(name, sizeof(name), fmt, ap);
	if (ok) {
		lt_pass_count++;
		printf("ok   %s\n", name);
	} else {
		lt_fail_count++;
		printf("FAIL %s%s%s (%s:%d)\n", name, detail ? ": " : "", detail ? detail : "",
		       file, line);
	}
	fflush(stdout);
	return ok;
}

bool lt_check_at(bool ok, const char *file, int line, const char *fmt, ...)
{
	va_list ap;
	bool ret;

	va_start(ap, fmt);
	ret = lt_vcheck(ok, NULL, file, line, fmt, ap);
	va_end(ap);
	return ret;
}

static const char *lt_ret_str(long v, char *buf, size_t len)
{
	if (v < 0 && v > -1000)
		snprintf(buf, len, "%ld (%s)", v, fi_strerror((int) -v));
	else
		snprintf(buf, len, "%ld", v);
	return buf;
}

bool lt_check_ret_at(long got, long want, const char *file, int line, const char *fmt, ...)
{
	char detail[256], g[96], w[96];
	va_list ap;
	bool ret;

	snprintf(detail, sizeof(detail), "got %s, want %s", lt_ret_str(got, g, sizeof(g)),
		 lt_ret_str(want, w, sizeof(w)));
	va_start(ap, fmt);
	ret = lt_vcheck(got == want, detail, file, line, fmt, ap);
	va_end(ap);
	return ret;
}

void lt_note(const char *fmt, ...)
{
	va_list ap;

	printf("# ");
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	fflush(stdout);
}

int lt_end(void)
{
	alarm(0);
	lt_kill_children();
	printf("%u passed, %u failed\n", lt_pass_count, lt_fail_count);
	fflush(stdout);
	return lt_fail_count ? 1 : 0;
}

void lt_skip(const char *why)
{
	printf("# skip: %s\n", why);
	lt_end();
	exit(LT_EXIT_SKIP);
}

unsigned lt_failed(void)
{
	return lt_fail_count;
}

/* ---- time ---- */

uint64_t lt_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t) ts.tv_sec * 1000 + (uint64_t) ts.tv_nsec / 1000000;
}

void lt_sleep_ms(unsigned ms)
{
	struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long) (ms % 1000) * 1000000};

	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

/* ---- provider selection and fi_info ---- */

const char *lt_prov(void)
{
	const char *p = getenv("LAYER_TEST_PROV");

	return p && *p ? p : "tcp;ofi_layer";
}

bool lt_is_layer(void)
{
	return strstr(lt_prov(), "ofi_layer") != NULL;
}

const char *lt_core_name(void)
{
	static char buf[64];
	const char *p = lt_prov(), *semi = strchr(p, ';');

	if (!semi)
		return p;
	if (!strncmp(p, "ofi_layer;", 10))
		return semi + 1;
	snprintf(buf, sizeof(buf), "%.*s", (int) (semi - p), p);
	return buf;
}

void lt_cma_off(void)
{
	setenv("FI_OFI_LAYER_CMA_SIZE", "0", 0);
}

bool lt_core_is_msg(void)
{
	const char *choice = getenv("FI_OFI_LAYER_CORE_EP_TYPE");
	const char *core = lt_core_name();

	if (choice && !strcasecmp(choice, "msg"))
		return true;
	if (choice && (!strcasecmp(choice, "rdm") || !strcasecmp(choice, "dgram")))
		return false;
	return strcasecmp(core, "net") && strcasecmp(core, "shm") && strcasecmp(core, "udp");
}

bool lt_direct_recv(struct fid_ep *ep)
{
	size_t len = sizeof(int);
	int on = 0;

	return !fi_getopt(&ep->fid, FI_OPT_ENDPOINT, FI_OPT_LAYER_DIRECT_RECV, &on, &len) && on;
}

const char *lt_prov_reversed(void)
{
	static char buf[128];
	const char *p = lt_prov();
	const char *semi = strchr(p, ';');

	if (!semi)
		return p;
	snprintf(buf, sizeof(buf), "%s;%.*s", semi + 1, (int) (semi - p), p);
	return buf;
}

struct fi_info *lt_hints(uint64_t caps)
{
	struct fi_info *hints = fi_allocinfo();

	if (!hints) {
		fprintf(stderr, "fi_allocinfo failed\n");
		exit(1);
	}
	hints->caps = caps;
	hints->mode = FI_CONTEXT | FI_CONTEXT2;
	hints->ep_attr->type = FI_EP_RDM;
	hints->domain_attr->mr_mode = 0;
	hints->fabric_attr->prov_name = strdup(lt_prov());
	return hints;
}

int lt_getinfo(struct fi_info *hints, struct fi_info **info)
{
	/* shm's addresses are names, not IP addresses: no node for it */
	if (!strcasecmp(lt_core_name(), "shm"))
		return fi_getinfo(LT_FI_VERSION, NULL, NULL, 0, hints, info);
	return fi_getinfo(LT_FI_VERSION, LT_NODE, NULL, FI_SOURCE, hints, info);
}

struct fi_info *lt_getinfo_or_skip(struct fi_info *hints)
{
	struct fi_info *info = NULL;
	int ret;

	ret = lt_getinfo(hints, &info);
	if (ret == -FI_ENODATA) {
		char why[256];

		snprintf(why, sizeof(why), "fi_getinfo offers nothing for %s on %s", lt_prov(),
			 LT_NODE);
		lt_skip(why);
	}
	if (!LT_CHECK_RET(ret, 0, "fi_getinfo for %s", lt_prov())) {
		lt_end();
		exit(1);
	}
	return info;
}

/* ---- endpoints ---- */

int lt_dom_open(struct fi_info *info, struct lt_dom *dom)
{
	int ret;

	memset(dom, 0, sizeof(*dom));
	dom->info = info;
	ret = fi_fabric(info->fabric_attr, &dom->fabric, NULL);
	if (ret)
		return ret;
	ret = fi_domain(dom->fabric, info, &dom->domain, NULL);
	if (ret) {
		fi_close(&dom->fabric->fid);
		dom->fabric = NULL;
	}
	return ret;
}

void lt_dom_close(struct lt_dom *dom)
{
	if (dom->domain)
		fi_close(&dom->domain->fid);
	if (dom->fabric)
		fi_close(&dom->fabric->fid);
	dom->domain = NULL;
	dom->fabric = NULL;
}

int lt_ep_enable(struct lt_ep *ep)
{
	int ret;

	ret = fi_enable(ep->ep);
	if (ret)
		return ret;
	ep->addrlen = sizeof(ep->addr);
	return fi_getname(&ep->ep->fid, ep->addr, &ep->addrlen);
}

int lt_ep_open(struct lt_dom *dom, const struct lt_ep_opts *opts, struct lt_ep *ep)
{
	static const struct lt_ep_opts no_opts;
	struct fi_av_attr av_attr = {.type = FI_AV_TABLE};
	bool use_from = (dom->info->caps & FI_SOURCE) != 0;
	int ret;

	if (!opts)
		opts = &no_opts;
	memset(ep, 0, sizeof(*ep));
	ep->dom = dom;
	av_attr.flags = opts->av_flags;
	ret = fi_av_open(dom->domain, &av_attr, &ep->av, NULL);
	if (ret)
		goto err;
	ret = lt_cq_open(dom->domain, opts->wait_obj, false, &ep->tx);
	if (ret)
		goto err;
	ret = lt_cq_open(dom->domain, opts->wait_obj, use_from, &ep->rx);
	if (ret)
		goto err;
	ret = fi_endpoint(dom->domain, dom->info, &ep->ep, NULL);
	if (ret)
		goto err;
	ret = fi_ep_bind(ep->ep, &ep->av->fid, 0);
	if (ret)
		goto err;
	ret = fi_ep_bind(ep->ep, &ep->tx.cq->fid, FI_TRANSMIT | opts->tx_bind_flags);
	if (ret)
		goto err;
	ret = fi_ep_bind(ep->ep, &ep->rx.cq->fid, FI_RECV | opts->rx_bind_flags);
	if (ret)
		goto err;
	if (opts->min_multi_recv) {
		ret = fi_setopt(&ep->ep->fid, FI_OPT_ENDPOINT, FI_OPT_MIN_MULTI_RECV,
				&opts->min_multi_recv, sizeof(opts->min_multi_recv));
		if (ret)
			goto err;
	}
	if (opts->no_enable)
		return 0;
	ret = lt_ep_enable(ep);
	if (ret)
		goto err;
	return 0;
err:
	lt_ep_close(ep);
	return ret;
}

void lt_ep_close(struct lt_ep *ep)
{
	if (ep->ep)
		fi_close(&ep->ep->fid);
	lt_cq_close(&ep->tx);
	lt_cq_close(&ep->rx);
	if (ep->av)
		fi_close(&ep->av->fid);
	ep->ep = NULL;
	ep->av = NULL;
}

int lt_av_insert(struct lt_ep *ep, const void *addr, fi_addr_t *fi_addr)
{
	int ret;

	*fi_addr = FI_ADDR_NOTAVAIL;
	ret = fi_av_insert(ep->av, addr, 1, fi_addr, 0, NULL);
	if (ret == 1)
		return 0;
	return ret < 0 ? ret : -FI_EOTHER;
}

int lt_av_bind(struct fid_av *av, struct fid *fid, uint64_t flags)
{
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
	return fi_av_bind(av, fid, flags);
#pragma GCC diagnostic pop
}

int lt_pair_open(struct lt_dom *dom, const struct lt_ep_opts *x_opts,
		 const struct lt_ep_opts *y_opts, struct lt_ep *x, struct lt_ep *y,
		 fi_addr_t *x_to_y, fi_addr_t *y_to_x)
{
	int ret;

	ret = lt_ep_open(dom, x_opts, x);
	if (ret)
		return ret;
	ret = lt_ep_open(dom, y_opts, y);
	if (ret) {
		lt_ep_close(x);
		return ret;
	}
	ret = lt_av_insert(x, y->addr, x_to_y);
	if (!ret)
		ret = lt_av_insert(y, x->addr, y_to_x);
	if (ret) {
		lt_ep_close(x);
		lt_ep_close(y);
	}
	return ret;
}

ssize_t lt_send(struct lt_ep *ep, const void *buf, size_t len, fi_addr_t dest, void *ctx)
{
	uint64_t deadline = lt_now_ms() + LT_TIMEOUT_MS;
	ssize_t ret;

	for (;;) {
		ret = fi_send(ep->ep, buf, len, NULL, dest, ctx);
		if (ret != -FI_EAGAIN || lt_now_ms() > deadline)
			return ret;
		lt_progress();
	}
}

ssize_t lt_recv(struct lt_ep *ep, void *buf, size_t len, fi_addr_t src, void *ctx)
{
	uint64_t deadline = lt_now_ms() + LT_TIMEOUT_MS;
	ssize_t ret;

	for (;;) {
		ret = fi_recv(ep->ep, buf, len, NULL, src, ctx);
		if (ret != -FI_EAGAIN || lt_now_ms() > deadline)
			return ret;
		lt_progress();
	}
}

/* ---- data patterns ---- */

static inline uint64_t lt_word(uint64_t index, uint64_t seed)
{
	uint64_t x = (index + 1) * 0x9e3779b97f4a7c15ULL ^ seed;

	return x ^ (x >> 29);
}

void lt_fill(void *buf, size_t len, uint64_t seed)
{
	unsigned char *p = buf;
	size_t words = len / 8;
	uint64_t w;

	for (size_t i = 0; i < words; i++) {
		w = lt_word(i, seed);
		memcpy(p + i * 8, &w, 8);
	}
	if (len % 8) {
		w = lt_word(words, seed);
		memcpy(p + words * 8, &w, len % 8);
	}
}

size_t lt_verify(const void *buf, size_t len, uint64_t seed)
{
	const unsigned char *p = buf;
	size_t words = (len + 7) / 8;
	uint64_t w;

	for (size_t i = 0; i < words; i++) {
		size_t n = i * 8 + 8 <= len ? 8 : len % 8;

		w = lt_word(i, seed);
		if (memcmp(p + i * 8, &w, n)) {
			const unsigned char *b = (const unsigned char *) &w;

			for (size_t j = 0; j < n; j++) {
				if (p[i * 8 + j] != b[j])
					return i * 8 + j;
			}
		}
	}
	return len;
}

/* ---- two processes ---- */

int lt_child_spawn(const char *role, struct lt_child *child)
{
	int p2c[2], c2p[2];
	pid_t pid;

	if (pipe2(p2c, O_CLOEXEC))
		return -errno;
	if (pipe2(c2p, O_CLOEXEC)) {
		close(p2c[0]);
		close(p2c[1]);
		return -errno;
	}
	fflush(NULL);
	pid = fork();
	if (pid < 0) {
		close(p2c[0]);
		close(p2c[1]);
		close(c2p[0]);
		close(c2p[1]);
		return -errno;
	}
	if (pid == 0) {
		char rfd[16], wfd[16];
		int r = dup(p2c[0]), w = dup(c2p[1]);

		/* dup drops O_CLOEXEC: these two survive the exec, the rest close. */
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		snprintf(rfd, sizeof(rfd), "%d", r);
		snprintf(wfd, sizeof(wfd), "%d", w);
		execl("/proc/self/exe", lt_prog, "--lt-child", role, rfd, wfd, (char *) NULL);
		_exit(127);
	}
	close(p2c[0]);
	close(c2p[1]);
	child->pid = pid;
	child->to_child = p2c[1];
	child->from_child = c2p[0];
	lt_child_track(pid, true);
	return 0;
}

const char *lt_child_role(int argc, char **argv, int *rfd, int *wfd)
{
	if (argc < 5 || strcmp(argv[1], "--lt-child"))
		return NULL;
	*rfd = atoi(argv[3]);
	*wfd = atoi(argv[4]);
	lt_prog = "child";
	signal(SIGPIPE, SIG_IGN);
	/* The parent's hang guard covers it too, but a child must never outlive a test. */
	alarm(LT_HANG_GUARD_S);
	return argv[2];
}

fi_addr_t lt_child_start(const char *role, struct lt_ep *ep, struct lt_child *child)
{
	char addr[LT_ADDR_MAX];
	fi_addr_t fi_addr = FI_ADDR_NOTAVAIL;
	ssize_t n;

	if (lt_child_spawn(role, child))
		return FI_ADDR_NOTAVAIL;
	n = lt_pipe_recv(child->from_child, addr, sizeof(addr), LT_TIMEOUT_MS);
	if (n <= 0 || lt_pipe_send(child->to_child, ep->addr, ep->addrlen) ||
	    lt_av_insert(ep, addr, &fi_addr))
		return FI_ADDR_NOTAVAIL;
	return fi_addr;
}

fi_addr_t lt_child_meet(struct lt_ep *ep, int rfd, int wfd)
{
	char addr[LT_ADDR_MAX];
	fi_addr_t fi_addr;
	ssize_t n;

	if (lt_pipe_send(wfd, ep->addr, ep->addrlen))
		return FI_ADDR_NOTAVAIL;
	n = lt_pipe_recv(rfd, addr, sizeof(addr), LT_TIMEOUT_MS);
	if (n <= 0 || lt_av_insert(ep, addr, &fi_addr))
		return FI_ADDR_NOTAVAIL;
	return fi_addr;
}

int lt_child_reap(struct lt_child *child, int timeout_ms, bool kill_first)
{
	uint64_t deadline = lt_now_ms() + (uint64_t) timeout_ms;
	int status = -1;
	pid_t ret;

	if (child->pid <= 0)
		return -1;
	if (kill_first)
		kill(child->pid, SIGKILL);
	for (;;) {
		ret = waitpid(child->pid, &status, WNOHANG);
		if (ret == child->pid || ret < 0)
			break;
		if (lt_now_ms() > deadline) {
			kill(child->pid, SIGKILL);
			waitpid(child->pid, &status, 0);
			status = -1;
			break;
		}
		lt_sleep_ms(5);
	}
	lt_child_track(child->pid, false);
	child->pid = 0;
	if (child->to_child >= 0)
		close(child->to_child);
	if (child->from_child >= 0)
		close(child->from_child);
	child->to_child = child->from_child = -1;
	return status;
}

static int lt_write_all(int fd, const void *buf, size_t len)
{
	const char *p = buf;

	while (len) {
		ssize_t n = write(fd, p, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -FI_EIO;
		p += n;
		len -= (size_t) n;
	}
	return 0;
}

static int lt_read_all(int fd, void *buf, size_t len, uint64_t deadline)
{
	char *p = buf;

	while (len) {
		struct pollfd pfd = {.fd = fd, .events = POLLIN};
		int64_t left = (int64_t) deadline - (int64_t) lt_now_ms();
		ssize_t n;

		if (left <= 0)
			return -FI_ETIMEDOUT;
		n = poll(&pfd, 1, (int) left);
		if (n < 0 && errno == EINTR)
			continue;
		if (n == 0)
			return -FI_ETIMEDOUT;
		n = read(fd, p, len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -FI_EIO;
		p += n;
		len -= (size_t) n;
	}
	return 0;
}

int lt_pipe_send(int fd, const void *buf, size_t len)
{
	uint32_t n = (uint32_t) len;
	int ret;

	ret = lt_write_all(fd, &n, sizeof(n));
	return ret ? ret : lt_write_all(fd, buf, len);
}

ssize_t lt_pipe_recv(int fd, void *buf, size_t max, int timeout_ms)
{
	uint64_t deadline = lt_now_ms() + (uint64_t) timeout_ms;
	uint32_t n;
	int ret;

	ret = lt_read_all(fd, &n, sizeof(n), deadline);
	if (ret)
		return ret;
	if (n > max)
		return -FI_ETOOSMALL;
	ret = lt_read_all(fd, buf, n, deadline);
	return ret ? ret : (ssize_t) n;
}

/*
 * Why a child gave no result. libfabric installs its own SIGSEGV handler that prints a backtrace
 * and exits, so a crash may show up as an exit status rather than a signal.
 */
static void lt_describe_death(bool hung, int status, int timeout_ms, char *buf, size_t len)
{
	if (hung)
		snprintf(buf, len, "hung, killed after %d ms", timeout_ms);
	else if (status != -1 && WIFSIGNALED(status))
		snprintf(buf, len, "crashed with signal %d (%s)", WTERMSIG(status),
			 strsignal(WTERMSIG(status)));
	else if (status != -1 && WIFEXITED(status))
		snprintf(buf, len,
			 "died with exit status %d (a crash caught by libfabric's "
			 "handler)",
			 WEXITSTATUS(status));
	else
		snprintf(buf, len, "died");
}

int lt_guarded(long (*fn)(void *), void *arg, int timeout_ms, long *ret)
{
	struct lt_child child = {.to_child = -1};
	int fds[2], status, rret;
	long value;
	pid_t pid;

	*ret = 0;
	if (pipe2(fds, O_CLOEXEC))
		return -1;
	fflush(NULL);
	pid = fork();
	if (pid < 0) {
		close(fds[0]);
		close(fds[1]);
		return -1;
	}
	if (pid == 0) {
		close(fds[0]);
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		alarm(0);
		signal(SIGALRM, SIG_DFL);
		memset(lt_children, 0, sizeof(lt_children));
		value = fn(arg);
		if (write(fds[1], &value, sizeof(value)) != sizeof(value))
			_exit(2);
		_exit(0);
	}
	close(fds[1]);
	lt_child_track(pid, true);
	child.pid = pid;
	child.from_child = fds[0];
	rret = lt_read_all(fds[0], &value, sizeof(value), lt_now_ms() + (uint64_t) timeout_ms);
	if (rret == 0) {
		lt_child_reap(&child, timeout_ms, false);
		*ret = value;
		return 0;
	}
	status = lt_child_reap(&child, 1000, rret == -FI_ETIMEDOUT);
	if (rret == -FI_ETIMEDOUT)
		return -1;
	if (status != -1 && WIFSIGNALED(status))
		return WTERMSIG(status);
	/* libfabric's own SIGSEGV handler prints a backtrace and exits. */
	*ret = status != -1 && WIFEXITED(status) ? WEXITSTATUS(status) : -1;
	return -2;
}

const char *lt_guarded_str(int status, long ret, char *buf, size_t len)
{
	if (status == 0)
		return lt_ret_str(ret, buf, len);
	if (status > 0)
		snprintf(buf, len, "crashed with signal %d (%s)", status, strsignal(status));
	else if (status == -2)
		snprintf(buf, len,
			 "died with exit status %ld (a crash caught by libfabric's "
			 "handler)",
			 ret);
	else
		snprintf(buf, len, "hung (killed)");
	return buf;
}

int lt_isolated(const char *name, void (*fn)(void *), void *arg, int timeout_ms)
{
	struct lt_child child = {.to_child = -1};
	unsigned counts[2];
	char why[128];
	int fds[2], status, ret;
	pid_t pid;

	if (pipe2(fds, O_CLOEXEC))
		return -1;
	fflush(NULL);
	pid = fork();
	if (pid < 0) {
		close(fds[0]);
		close(fds[1]);
		return -1;
	}
	if (pid == 0) {
		unsigned pass0 = lt_pass_count, fail0 = lt_fail_count;

		close(fds[0]);
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		alarm(0);
		signal(SIGALRM, SIG_DFL);
		memset(lt_children, 0, sizeof(lt_children));
		fn(arg);
		fflush(NULL);
		counts[0] = lt_pass_count - pass0;
		counts[1] = lt_fail_count - fail0;
		if (write(fds[1], counts, sizeof(counts)) != sizeof(counts))
			_exit(2);
		_exit(0);
	}
	close(fds[1]);
	lt_child_track(pid, true);
	child.pid = pid;
	child.from_child = fds[0];
	ret = lt_read_all(fds[0], counts, sizeof(counts), lt_now_ms() + (uint64_t) timeout_ms);
	if (ret == 0) {
		lt_child_reap(&child, timeout_ms, false);
		lt_pass_count += counts[0];
		lt_fail_count += counts[1];
		return 0;
	}
	status = lt_child_reap(&child, 1000, ret == -FI_ETIMEDOUT);
	lt_describe_death(ret == -FI_ETIMEDOUT, status, timeout_ms, why, sizeof(why));
	LT_CHECK(false, "%s: section ran to its end (%s)", name, why);
	return -1;
}
