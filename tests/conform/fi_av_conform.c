/*
 * fi_av_conform: does a provider's address vector do what fi_av(3) says? (see fi_av_conform(1))
 *
 * Every clause runs in a forked process that opens its own fabric, domain and EQ, so that a
 * provider crashing, hanging or corrupting memory on one clause fails that clause and leaves
 * the others alone. The parent never calls into libfabric. Results come back through a pipe;
 * a process that dies or overruns its time is a FAIL with the reason. Output: one line per
 * clause (PASS / FAIL / UNSUPPORTED and a one-line reason), then "N passed, N failed".
 */
#include "config.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "conform.h"

#define DEFAULT_TIMEOUT_S 30
#define EVENT_POLL_MS 1
/*
 * Synthetic FI_ADDR_STR addresses, all of one length so that packed strings (what shm reads:
 * each right after the previous one's NUL) are also a fixed stride, and short enough for
 * shm's name limit (31 characters): "fi_shm://a", the pid in 7 digits, the number in 8, NUL.
 */
#define STR_ADDR_FMT "fi_shm://a%07d%08u"
#define STR_ADDR_LEN (10 + 7 + 8 + 1)

struct outcome {
	enum verdict verdict;
	char why[CONFORM_WHY];
};

static const char *const verdict_name[] = {
	[V_PASS] = "PASS",
	[V_FAIL] = "FAIL",
	[V_UNSUPPORTED] = "UNSUPPORTED",
};

/* ---- helpers for clauses ---- */

static enum verdict conform_vwhy(struct env *e, enum verdict v, const char *fmt, va_list ap)
{
	vsnprintf(e->why, CONFORM_WHY, fmt, ap);
	return v;
}

enum verdict conform_fail(struct env *e, const char *fmt, ...)
{
	enum verdict v;
	va_list ap;

	va_start(ap, fmt);
	v = conform_vwhy(e, V_FAIL, fmt, ap);
	va_end(ap);
	return v;
}

enum verdict conform_unsupported(struct env *e, const char *fmt, ...)
{
	enum verdict v;
	va_list ap;

	va_start(ap, fmt);
	v = conform_vwhy(e, V_UNSUPPORTED, fmt, ap);
	va_end(ap);
	return v;
}

enum verdict conform_refused(struct env *e, const char *call, int ret)
{
	if (ret == -FI_ENOSYS || ret == -FI_EOPNOTSUPP || ret == -FI_EBADFLAGS)
		return conform_unsupported(e, "%s: %d (%s)", call, ret, fi_strerror(-ret));
	return conform_fail(e, "%s: %d (%s)", call, ret, fi_strerror(ret < 0 ? -ret : ret));
}

int conform_av_open(struct env *e, enum fi_av_type type, uint64_t flags, size_t count,
		    struct fid_av **av)
{
	struct fi_av_attr attr = {.type = type, .flags = flags, .count = count};

	return fi_av_open(e->domain, &attr, av, NULL);
}

void *conform_addrs(struct env *e, unsigned first, size_t n)
{
	uint8_t *a = calloc(n ? n : 1, e->addrlen);
	size_t i;

	if (!a) {
		fprintf(stderr, "out of memory\n");
		_exit(3);
	}
	for (i = 0; i < n; i++) {
		unsigned v = first + (unsigned) i;
		uint8_t *p = a + i * e->addrlen;

		if (e->addr_format == FI_SOCKADDR_IN6) {
			struct sockaddr_in6 *s = (struct sockaddr_in6 *) p;

			s->sin6_family = AF_INET6;
			s->sin6_port = htons((uint16_t) (20000 + v % 20000));
			s->sin6_addr.s6_addr[0] = 0xfd;
			s->sin6_addr.s6_addr[12] = (uint8_t) (v >> 24);
			s->sin6_addr.s6_addr[13] = (uint8_t) (v >> 16);
			s->sin6_addr.s6_addr[14] = (uint8_t) (v >> 8);
			s->sin6_addr.s6_addr[15] = (uint8_t) v;
		} else if (e->addr_format == FI_ADDR_STR) {
			/* packed NUL-terminated strings, the way libfabric's shm reads them */
			snprintf((char *) p, e->addrlen, STR_ADDR_FMT, (int) getpid(), v);
		} else {
			struct sockaddr_in *s = (struct sockaddr_in *) p;

			s->sin_family = AF_INET;
			s->sin_port = htons((uint16_t) (20000 + v % 20000));
			s->sin_addr.s_addr = htonl(0x0a600000u + v);
		}
	}
	return a;
}

void *conform_addr_at(struct env *e, void *addrs, size_t i)
{
	return (uint8_t *) addrs + i * e->addrlen;
}

void conform_spoil(struct env *e, void *addrs, size_t i)
{
	uint8_t *p = conform_addr_at(e, addrs, i);

	if (e->addr_format == FI_ADDR_STR)
		memcpy(p, "no_such_s", 9); /* same length: the packing is kept */
	else
		((struct sockaddr *) p)->sa_family = AF_UNIX;
}

bool conform_holds(struct env *e, struct fid_av *av, fi_addr_t fi_addr, unsigned v)
{
	uint8_t got[256], *want = conform_addrs(e, v, 1);
	size_t len = sizeof(got);
	bool ok = false;

	memset(got, 0, sizeof(got));
	if (!fi_av_lookup(av, fi_addr, got, &len)) {
		if (e->addr_format == FI_ADDR_STR)
			ok = !strcmp((char *) got, (char *) want);
		else if (e->addr_format == FI_SOCKADDR_IN)
			ok = !memcmp(got, want, 8); /* family, port, address: not the padding */
		else /* family and port, then the address (not flowinfo, not scope) */
			ok = !memcmp(got, want, 4) && !memcmp(got + 8, want + 8, 16);
	}
	free(want);
	return ok;
}

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t) ts.tv_sec * 1000 + (uint64_t) ts.tv_nsec / 1000000;
}

int conform_next_event(struct env *e, struct conform_event *ev, int timeout_ms)
{
	uint64_t deadline = now_ms() + (uint64_t) timeout_ms;
	struct fi_eq_err_entry err;
	struct fi_eq_entry entry;
	uint32_t event;
	ssize_t ret;

	memset(ev, 0, sizeof(*ev));
	for (;;) {
		ret = fi_eq_read(e->eq, &event, &entry, sizeof(entry), 0);
		if (ret == (ssize_t) sizeof(entry)) {
			ev->event = event;
			ev->fid = entry.fid;
			ev->context = entry.context;
			ev->data = entry.data;
			return 0;
		}
		if (ret == -FI_EAVAIL) {
			memset(&err, 0, sizeof(err));
			ret = fi_eq_readerr(e->eq, &err, 0);
			if (ret < 0)
				return (int) ret;
			ev->is_err = true;
			ev->fid = err.fid;
			ev->context = err.context;
			ev->data = err.data;
			ev->err = err.err;
			return 0;
		}
		if (ret != -FI_EAGAIN)
			return (int) ret;
		if (now_ms() > deadline)
			return -FI_ETIMEDOUT;
		poll(NULL, 0, EVENT_POLL_MS);
	}
}

/* ---- the environment of one clause ---- */

static int env_open(struct env *e, const char *prov, uint64_t needs)
{
	struct fi_eq_attr eq_attr = {.wait_obj = FI_WAIT_NONE};
	static const enum fi_ep_type types[] = {FI_EP_RDM, FI_EP_DGRAM, FI_EP_MSG};
	struct fi_info *hints, *list, *cur;
	size_t i;
	int ret = -FI_ENODATA;

	hints = fi_allocinfo();
	if (!hints)
		return -FI_ENOMEM;
	hints->fabric_attr->prov_name = strdup(prov);
	hints->caps = needs & CONFORM_NEEDS_SOURCE ? FI_MSG | FI_SOURCE : 0;
	hints->mode = ~0ULL;
	/* no FI_MR_LOCAL: the message clauses send from unregistered buffers */
	hints->domain_attr->mr_mode = FI_MR_RAW | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED |
				      FI_MR_PROV_KEY | FI_MR_ENDPOINT;
	if (needs & CONFORM_NEEDS_AUTH_KEY)
		hints->domain_attr->auth_key_size = SIZE_MAX; /* FI_AV_AUTH_KEY */
	/*
	 * An AV belongs to a domain: any endpoint type the provider offers will do. Only an
	 * info of the provider named counts ("udp" with FI_EP_RDM also brings "udp;ofi_rxd").
	 */
	for (i = 0; i < sizeof(types) / sizeof(types[0]) && !e->info; i++) {
		hints->ep_attr->type = types[i];
		ret = fi_getinfo(FI_VERSION(1, 17), "127.0.0.1", NULL, FI_SOURCE, hints, &list);
		if (ret)
			ret = fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, hints, &list);
		if (ret)
			continue;
		for (cur = list; cur && !e->info; cur = cur->next) {
			if (!strcasecmp(cur->fabric_attr->prov_name, prov))
				e->info = fi_dupinfo(cur);
		}
		fi_freeinfo(list);
	}
	fi_freeinfo(hints);
	if (!e->info)
		return ret ? ret : -FI_ENODATA;
	ret = fi_fabric(e->info->fabric_attr, &e->fabric, NULL);
	if (ret)
		return ret;
	ret = fi_domain(e->fabric, e->info, &e->domain, NULL);
	if (ret)
		return ret;
	if (fi_eq_open(e->fabric, &eq_attr, &e->eq, NULL))
		e->eq = NULL;
	e->addr_format = e->info->addr_format;
	switch (e->addr_format) {
	case FI_SOCKADDR_IN:
		e->addrlen = sizeof(struct sockaddr_in);
		break;
	case FI_SOCKADDR_IN6:
		e->addrlen = sizeof(struct sockaddr_in6);
		break;
	case FI_ADDR_STR:
		e->addrlen = STR_ADDR_LEN;
		break;
	default:
		e->addrlen = 0;
	}
	return 0;
}

/*
 * What a clause process may leave in /dev/shm when it dies or is killed: libfabric's shm
 * provider names its regions "<pid>:...", the named-AV clauses use "..._<pid>". Removed once
 * the process is gone, so that the tool leaves nothing behind.
 */
static void cleanup_shm(pid_t pid)
{
	char prefix[32], suffix[32], path[512];
	struct dirent *de;
	size_t len, slen;
	DIR *dir;

	snprintf(prefix, sizeof(prefix), "%d:", (int) pid);
	snprintf(suffix, sizeof(suffix), "_%d", (int) pid);
	slen = strlen(suffix);
	dir = opendir("/dev/shm");
	if (!dir)
		return;
	while ((de = readdir(dir))) {
		len = strlen(de->d_name);
		if (strncmp(de->d_name, prefix, strlen(prefix)) &&
		    !(strstr(de->d_name, "avconform_") && len > slen &&
		      !strcmp(de->d_name + len - slen, suffix)))
			continue;
		snprintf(path, sizeof(path), "/dev/shm/%s", de->d_name);
		unlink(path);
	}
	closedir(dir);
}

/* Runs one clause in a child process; its verdict and reason come back through a pipe. */
static void run_clause(const struct clause *c, const char *prov, const char *self, int timeout_s,
		       bool is_verbose, struct outcome *out)
{
	struct pollfd pfd;
	char why[CONFORM_WHY];
	int fds[2], status = 0, ret;
	struct env e;
	ssize_t got = -1;
	pid_t pid;

	memset(out, 0, sizeof(*out));
	if (pipe(fds)) {
		out->verdict = V_FAIL;
		snprintf(out->why, sizeof(out->why), "pipe: %s", strerror(errno));
		return;
	}
	fflush(NULL);
	pid = fork();
	if (pid == 0) {
		close(fds[0]);
		/* libfabric's crash handler writes a backtrace: the table says it crashed */
		if (!is_verbose && freopen("/dev/null", "w", stderr) == NULL)
			_exit(3);
		memset(&e, 0, sizeof(e));
		why[0] = '\0';
		e.why = why;
		e.prov = prov;
		e.self = self;
		ret = env_open(&e, prov, c->domain_needs);
		if (ret) {
			out->verdict = (c->domain_needs & CONFORM_NEEDS_AUTH_KEY) &&
				       ret == -FI_ENODATA ? V_UNSUPPORTED : V_FAIL;
			snprintf(out->why, sizeof(out->why), "no %sdomain: %s",
				 c->domain_needs & CONFORM_NEEDS_AUTH_KEY ? "FI_AV_AUTH_KEY " : "",
				 fi_strerror(-ret));
		} else if (!e.addrlen) {
			out->verdict = V_UNSUPPORTED;
			snprintf(out->why, sizeof(out->why), "address format %u not synthesised",
				 e.addr_format);
		} else {
			out->verdict = c->run(&e);
			snprintf(out->why, sizeof(out->why), "%s", why);
		}
		got = write(fds[1], out, sizeof(*out));
		_exit(got == (ssize_t) sizeof(*out) ? 0 : 1);
	}
	close(fds[1]);
	if (pid < 0) {
		close(fds[0]);
		out->verdict = V_FAIL;
		snprintf(out->why, sizeof(out->why), "fork: %s", strerror(errno));
		return;
	}
	pfd.fd = fds[0];
	pfd.events = POLLIN;
	if (poll(&pfd, 1, timeout_s * 1000) == 1)
		got = read(fds[0], out, sizeof(*out));
	close(fds[0]);
	if (got != (ssize_t) sizeof(*out)) {
		kill(pid, SIGKILL);
		waitpid(pid, &status, 0);
		out->verdict = V_FAIL;
		if (WIFSIGNALED(status) && WTERMSIG(status) != SIGKILL)
			snprintf(out->why, sizeof(out->why), "crashed: signal %d (%s)",
				 WTERMSIG(status), strsignal(WTERMSIG(status)));
		else if (WIFEXITED(status))
			snprintf(out->why, sizeof(out->why), "died: exit status %d (a crash caught "
				 "by libfabric's handler, or an abort)", WEXITSTATUS(status));
		else
			snprintf(out->why, sizeof(out->why), "hung: killed after %d s", timeout_s);
		cleanup_shm(pid);
		return;
	}
	waitpid(pid, &status, 0);
	cleanup_shm(pid);
}

static void usage(const char *prog)
{
	printf("usage: %s [-p provider] [-c clause]... [-t seconds] [-l] [-v]\n"
	       "  -p  provider as fi_getinfo names it (default \"tcp;ofi_layer\")\n"
	       "  -c  run only this clause (repeatable; see -l)\n"
	       "  -t  seconds a clause may take before it counts as hung (default %d)\n"
	       "  -l  list the clauses and what each checks\n"
	       "  -v  keep the provider's messages (stderr) of each clause\n",
	       prog, DEFAULT_TIMEOUT_S);
}

int main(int argc, char **argv)
{
	const char *prov = "tcp;ofi_layer", *only[64];
	unsigned counts[3] = {0};
	int only_cnt = 0, timeout_s = DEFAULT_TIMEOUT_S, opt, i;
	bool is_verbose = false;
	char self[4096];
	struct outcome out;
	ssize_t len;
	size_t c;

	if (argc > 1 && !strcmp(argv[1], "--conform-peer"))
		return conform_peer_main(argc, argv);

	while ((opt = getopt(argc, argv, "p:c:t:lvh")) != -1) {
		switch (opt) {
		case 'p':
			prov = optarg;
			break;
		case 'c':
			if (only_cnt < 64)
				only[only_cnt++] = optarg;
			break;
		case 't':
			timeout_s = atoi(optarg) > 0 ? atoi(optarg) : DEFAULT_TIMEOUT_S;
			break;
		case 'l':
			for (c = 0; c < conform_clause_cnt; c++)
				printf("%-26s %s\n", conform_clauses[c].id,
				       conform_clauses[c].what);
			return 0;
		case 'v':
			is_verbose = true;
			break;
		case 'h':
			usage(argv[0]);
			return 0;
		default:
			usage(argv[0]);
			return 2;
		}
	}
	len = readlink("/proc/self/exe", self, sizeof(self) - 1);
	self[len > 0 ? len : 0] = '\0';

	printf("fi_av_conform: provider %s, %zu clauses of fi_av(3)\n", prov, conform_clause_cnt);
	printf("%-26s %-11s %s\n", "clause", "result", "reason");
	for (c = 0; c < conform_clause_cnt; c++) {
		for (i = 0; i < only_cnt && strcmp(only[i], conform_clauses[c].id); i++)
			;
		if (only_cnt && i == only_cnt)
			continue;
		run_clause(&conform_clauses[c], prov, self, timeout_s, is_verbose, &out);
		counts[out.verdict]++;
		printf("%-26s %-11s %s\n", conform_clauses[c].id, verdict_name[out.verdict],
		       out.why);
		fflush(stdout);
	}
	printf("# %u unsupported\n", counts[V_UNSUPPORTED]);
	printf("%u passed, %u failed\n", counts[V_PASS], counts[V_FAIL]);
	return counts[V_FAIL] ? 1 : 0;
}

/* ---- the second process of the named-AV clauses ---- */

/*
 * Starts this program as "--conform-peer <prov> <name> <fi_addr>...": it opens the named AV
 * with FI_READ and checks that map_addr[i] and lookups agree with the creator's fi_addrs.
 * Returns 0 when they do; the reason otherwise in why.
 */
int conform_run_peer(struct env *e, const char *name, const fi_addr_t *fi_addr, size_t n,
		     char *why, size_t why_len)
{
	char *args[16], vals[8][24];
	int fds[2], status = -1;
	ssize_t got;
	pid_t pid;
	size_t i;

	if (n > 8 || pipe(fds))
		return -1;
	args[0] = (char *) e->self;
	args[1] = "--conform-peer";
	args[2] = (char *) e->prov;
	args[3] = (char *) name;
	for (i = 0; i < n; i++) {
		snprintf(vals[i], sizeof(vals[i]), "%llu", (unsigned long long) fi_addr[i]);
		args[4 + i] = vals[i];
	}
	args[4 + n] = NULL;
	fflush(NULL);
	pid = fork();
	if (pid == 0) {
		close(fds[0]);
		dup2(fds[1], STDOUT_FILENO);
		execv(e->self, args);
		_exit(127);
	}
	close(fds[1]);
	memset(why, 0, why_len);
	got = pid > 0 ? read(fds[0], why, why_len - 1) : -1;
	close(fds[0]);
	if (pid > 0)
		waitpid(pid, &status, 0);
	if (got > 0 && why[got - 1] == '\n')
		why[got - 1] = '\0';
	return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static void env_close(struct env *e)
{
	if (e->eq)
		fi_close(&e->eq->fid);
	if (e->domain)
		fi_close(&e->domain->fid);
	if (e->fabric)
		fi_close(&e->fabric->fid);
	fi_freeinfo(e->info);
}

/* The checks of the peer: 0, or 1 with the reason in why. */
static int peer_check(struct env *e, struct fid_av *av, fi_addr_t *map, int argc, char **argv)
{
	fi_addr_t fi_addr;
	void *addr;
	int i, ret;

	for (i = 4; i < argc; i++) {
		fi_addr = strtoull(argv[i], NULL, 0);
		if (!map) {
			snprintf(e->why, CONFORM_WHY, "peer: no map_addr reported");
			return 1;
		}
		if (map[i - 4] != fi_addr) {
			snprintf(e->why, CONFORM_WHY, "peer: map_addr[%d] %#llx, creator's %#llx",
				 i - 4, (unsigned long long) map[i - 4],
				 (unsigned long long) fi_addr);
			return 1;
		}
		if (!conform_holds(e, av, fi_addr, (unsigned) (i - 4))) {
			snprintf(e->why, CONFORM_WHY, "peer: lookup of the creator's fi_addr %d "
				 "differs", i - 4);
			return 1;
		}
	}
	addr = conform_addrs(e, 100, 1);
	ret = fi_av_insert(av, addr, 1, &fi_addr, 0, NULL);
	free(addr);
	if (ret > 0) {
		snprintf(e->why, CONFORM_WHY, "peer: insert into an FI_READ av succeeded");
		return 1;
	}
	return 0;
}

int conform_peer_main(int argc, char **argv)
{
	struct fi_av_attr attr = {.type = FI_AV_UNSPEC, .flags = FI_READ};
	char why[CONFORM_WHY] = "";
	struct env e = {.why = why};
	struct fid_av *av;
	int ret = 1;

	if (argc < 4)
		return 2;
	if (env_open(&e, argv[2], 0)) {
		snprintf(why, sizeof(why), "peer: no domain");
		goto out;
	}
	attr.name = argv[3];
	ret = fi_av_open(e.domain, &attr, &av, NULL);
	if (ret) {
		snprintf(why, sizeof(why), "peer: FI_READ open: %s", fi_strerror(-ret));
		ret = 1;
		goto out;
	}
	ret = peer_check(&e, av, attr.map_addr, argc, argv);
	fi_close(&av->fid);
out:
	env_close(&e);
	if (ret)
		printf("%s\n", why);
	return ret;
}
