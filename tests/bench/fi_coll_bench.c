/*
 * fi_coll_bench: fi_collective(3) operations of libfabric providers side by side: barrier,
 * allreduce, broadcast and allgather among N ranks on this host, the median over repeats of
 * the microseconds per call, and each provider's ratio to the first.
 *
 * Process model. The process the user starts is rank 0. For every run (one provider in one
 * repeat) it fork+execs itself once per rank 1..N-1, each holding one end of a socketpair.
 * Over the socketpairs rank 0 sends each rank what to run, gathers every rank's endpoint name
 * and sends the whole table back, steps all ranks through the tests one at a time and
 * collects one result per rank and test. No network out-of-band is needed: the only traffic
 * on the network is the provider's own. The providers take turns repeat by repeat, so that a
 * burst of load from elsewhere on the machine lands on all of them alike.
 *
 * What every rank does (rank 0 included), how it waits and how a wait is bounded is in
 * coll_bench_rank.c; this file is rank 0's other side: the other ranks, runs, the table.
 *
 * Bounds. Ranks 1..N-1 die with rank 0 (PR_SET_PDEATHSIG); at the end of every run rank 0
 * reaps them, killing any still alive after a grace period. A test that fails ends its run:
 * the other ranks are killed, the test prints "n/a (reason)" and is not run again, and the
 * remaining tests go on in a fresh run. A provider that does not offer FI_COLLECTIVE prints
 * "n/a" in every row.
 *
 * Exit status: 0, 1 when a test failed, 2 for a usage error, 77 when no provider offers
 * FI_COLLECTIVE (a test harness' "skip").
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <rdma/fabric.h>
#include <rdma/fi_errno.h>

#include "coll_bench.h"

#define DEFAULT_RANKS 4
#define DEFAULT_REPEATS 5
#define MAX_REPEATS 100
#define DEFAULT_TIMEOUT 60 /* seconds, for every single wait */
#define REAP_MS 10000	   /* how long ranks may take to close and exit after a run */
/* A rank's alarm() as bench_describe_status knows it: none, its watchdog catches SIGALRM. */
#define RANK_ALARM_S 0

#define CHILD_OPT "--rank-fd" /* how rank 0 execs the others; not for users */
#define CHILD_FD 3

struct options {
	const char *provs[MAX_PROVS];
	int nprovs;
	int nranks;
	int repeats;
	unsigned long iters; /* 0: each test's own */
	long warmup;	     /* -1: a tenth of the timed calls, one at least */
	unsigned timeout;
	bool selected[NTESTS];
	bool csv;
	bool verbose;
};

/* Per provider and test, across repeats. */
enum cell_state { CELL_PENDING, CELL_SKIP, CELL_FAILED };

struct cell {
	enum cell_state state;
	int nsamples;
	double samples[MAX_REPEATS];
	int repeat[MAX_REPEATS]; /* the repeat each sample comes from */
	char why[WHY_LEN];
};

static struct options opt;
static int cpus[CPU_SETSIZE];
static int ncpus;
struct child children[MAX_RANKS]; /* also seen by the watchdog (coll_bench_rank.c) */
static struct cell cells[MAX_PROVS][NTESTS];
static bool prov_unavail[MAX_PROVS];
static char prov_why[MAX_PROVS][WHY_LEN];
static bool prov_auto[MAX_PROVS]; /* ran with the provider's own progress: no manual offered */

/* ---------------------------------------------------------------- rank 0: the other ranks */

/* Its socket ended: it is exiting, give it a moment to say how (end_run kills it if not). */
static int child_gone(struct rank *r, int i)
{
	char how[64] = "closed its socket";

	for (int ms = 0; children[i].pid > 0 && ms < 1000; ms++) {
		if (waitpid(children[i].pid, &children[i].status, WNOHANG) == children[i].pid) {
			children[i].pid = 0;
			bench_describe_status(children[i].status, RANK_ALARM_S, how, sizeof(how));
			break;
		}
		usleep(1000);
	}
	return rank_fail(r, -FI_EIO, "rank %d: %s", i, how);
}

/* Rank i's record, whose arrival poll() announced; a failure it reports fails the run. */
static int take_result(struct rank *r, int i)
{
	struct child *c = &children[i];

	if (read_all(c->fd, &c->res, sizeof(c->res)))
		return child_gone(r, i);
	c->res.why[WHY_LEN - 1] = '\0';
	c->has_res = true;
	if (c->res.status < 0)
		return rank_fail(r, c->res.status, "rank %d: %s", i,
				 c->res.why[0] ? c->res.why : "failed");
	return 0;
}

/*
 * While rank 0 waits for anything (its waits in coll_bench_rank.c call this now and then): the
 * records that came (a rank reports its failure as soon as it fails, and keeps its connections
 * up meanwhile), and whether every rank still lives.
 */
int check_children(struct rank *r)
{
	struct pollfd pfd[MAX_RANKS];
	int idx[MAX_RANKS], n = 0, ret;

	for (int i = 1; i < r->nranks; i++)
		if (children[i].fd >= 0 && !children[i].has_res) {
			pfd[n] = (struct pollfd){.fd = children[i].fd, .events = POLLIN};
			idx[n++] = i;
		}
	if (n && poll(pfd, (nfds_t) n, 0) > 0)
		for (int k = 0; k < n; k++)
			if (pfd[k].revents) {
				ret = take_result(r, idx[k]);
				if (ret)
					return ret;
			}
	for (int i = 1; i < r->nranks; i++) {
		char how[64];

		if (children[i].pid <= 0 ||
		    waitpid(children[i].pid, &children[i].status, WNOHANG) != children[i].pid)
			continue;
		children[i].pid = 0;
		bench_describe_status(children[i].status, RANK_ALARM_S, how, sizeof(how));
		return rank_fail(r, -FI_EIO, "rank %d: %s", i, how);
	}
	return 0;
}

/* Fork and exec ourselves as rank i, with one end of a socketpair as CHILD_FD. */
static int spawn_rank(struct rank *r, const struct spec *spec, const char *argv0)
{
	char fd_arg[16];
	int sv[2], i = spec->rank;
	pid_t pid, self = getpid();

	/* between fork and exec only async-signal-safe calls: the argument is made here */
	snprintf(fd_arg, sizeof(fd_arg), "%d", CHILD_FD);
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv))
		return rank_fail(r, -errno, "socketpair: %s", strerror(errno));
	fflush(NULL);
	pid = fork();
	if (pid < 0) {
		close(sv[0]);
		close(sv[1]);
		return rank_fail(r, -errno, "fork: %s", strerror(errno));
	}
	if (pid == 0) {
		char *args[] = {(char *) argv0, (char *) CHILD_OPT, fd_arg, NULL};

		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != self)
			_exit(EXIT_FAILED);
		if (sv[1] != CHILD_FD && dup2(sv[1], CHILD_FD) < 0)
			_exit(127);
		fcntl(CHILD_FD, F_SETFD, 0);
		/* nothing of rank 0's fabric (its sockets, its epoll) goes along */
		if (close_range(CHILD_FD + 1, ~0U, 0))
			for (int fd = CHILD_FD + 1; fd < 4096; fd++)
				close(fd);
		execv("/proc/self/exe", args);
		_exit(127);
	}
	close(sv[1]);
	children[i].pid = pid;
	children[i].fd = sv[0];
	if (write_all(sv[0], spec, sizeof(*spec)))
		return child_gone(r, i);
	return 0;
}

/*
 * Every rank's hello, then the table of names to all of them. A rank that dies here shows as
 * the end of its socket; only the deadline is watched besides.
 */
static int exchange_names(struct rank *r, char *names)
{
	struct names_hdr hdr = {.status = 0, .addrlen = (uint32_t) r->addrlen};
	bool got[MAX_RANKS] = {false};
	int left = r->nranks - 1, ret;
	double deadline = 0;
	struct hello hello;

	memcpy(names, r->addr, r->addrlen);
	for (unsigned polls = 1; left; polls++) {
		struct pollfd pfd[MAX_RANKS];

		for (int i = 1; i < r->nranks; i++)
			pfd[i - 1] = (struct pollfd){.fd = children[i].fd, .events = POLLIN};
		heartbeat++;
		if (poll(pfd, (nfds_t) r->nranks - 1, 10) < 0 && errno != EINTR)
			return rank_fail(r, -errno, "poll: %s", strerror(errno));
		for (int i = 1; i < r->nranks; i++) {
			if (got[i] || !pfd[i - 1].revents)
				continue;
			if (read_all(children[i].fd, &hello, sizeof(hello)))
				return child_gone(r, i);
			if (hello.status) {
				hello.why[WHY_LEN - 1] = '\0';
				return rank_fail(r, hello.status, "rank %d: %s", i, hello.why);
			}
			if (hello.addrlen != r->addrlen)
				return rank_fail(r, -FI_EOTHER,
						 "rank %d's name is %" PRIu32 " bytes, ours %zu", i,
						 hello.addrlen, r->addrlen);
			memcpy(names + (size_t) i * r->addrlen, hello.addr, r->addrlen);
			got[i] = true;
			left--;
		}
		if (!(polls % 16)) {
			ret = check_deadline(r, &deadline, "the other ranks' names");
			if (ret)
				return ret;
		}
	}
	for (int i = 1; i < r->nranks; i++)
		if (write_all(children[i].fd, &hdr, sizeof(hdr)) ||
		    write_all(children[i].fd, names, r->addrlen * (size_t) r->nranks))
			return child_gone(r, i);
	return 0;
}

static int send_cmd(struct rank *r, int test)
{
	struct cmd cmd = {.test = test};

	for (int i = 1; i < r->nranks; i++)
		if (children[i].pid > 0 && write_all(children[i].fd, &cmd, sizeof(cmd)))
			return child_gone(r, i);
	return 0;
}

/* One result of step from every other rank; our CQ is read meanwhile (manual progress). */
static int collect(struct rank *r, int step, struct result *res)
{
	bool got[MAX_RANKS] = {false};
	int left = r->nranks - 1, ret;
	double deadline = 0;

	for (unsigned polls = 1; left; polls++) {
		ret = cq_read_once(r, NULL);
		if (ret)
			return ret;
		if (polls % FD_POLLS)
			continue;
		ret = check_children(r);
		if (!ret && !(polls % CHECK_POLLS))
			ret = check_deadline(r, &deadline, "the other ranks' results");
		if (ret)
			return ret;
		for (int i = 1; i < r->nranks; i++) {
			if (got[i] || !children[i].has_res)
				continue;
			res[i] = children[i].res;
			children[i].has_res = false;
			if (res[i].test != step)
				return rank_fail(r, -FI_EOTHER,
						 "rank %d answered step %d in step %d", i,
						 res[i].test, step);
			got[i] = true;
			left--;
		}
	}
	return 0;
}

/*
 * The end of a run: after a success the ranks are told to quit, close and exit; after a
 * failure they are killed. Either way none is left behind. Our own objects are closed after a
 * success only: after a failure a provider may never return from fi_close (tcp;ofi_rxm of
 * libfabric 1.17 spins in it after a stray completion), so they are left open, buffers and
 * all, for the few failures a table can have.
 */
static void end_run(struct rank *r, bool is_ok)
{
	double deadline = now_us() + REAP_MS * 1e3;
	bool any;

	if (is_ok)
		send_cmd(r, STEP_QUIT);
	for (int i = 1; i < MAX_RANKS; i++)
		if (!is_ok && children[i].pid > 0)
			kill(children[i].pid, SIGKILL);
	if (is_ok)
		rank_close(r);
	do {
		any = false;
		heartbeat++;
		for (int i = 1; i < MAX_RANKS; i++) {
			if (children[i].pid <= 0)
				continue;
			if (waitpid(children[i].pid, &children[i].status, WNOHANG) ==
			    children[i].pid) {
				if (is_ok && children[i].status) {
					char how[64];

					bench_describe_status(children[i].status, RANK_ALARM_S, how,
							      sizeof(how));
					fprintf(stderr, "%s: %s rank %d %s after its tests\n",
						BENCH_NAME, r->prov, i, how);
				}
				children[i].pid = 0;
				continue;
			}
			if (now_us() < deadline) {
				any = true;
				continue;
			}
			fprintf(stderr, "%s: %s rank %d did not exit, killing it\n", BENCH_NAME,
				r->prov, i);
			kill(children[i].pid, SIGKILL);
			waitpid(children[i].pid, &children[i].status, 0);
			children[i].pid = 0;
		}
		if (any)
			usleep(1000);
	} while (any);
	for (int i = 1; i < MAX_RANKS; i++) {
		if (children[i].fd >= 0)
			close(children[i].fd);
		children[i].fd = -1;
		children[i].has_res = false;
	}
}

/* ---------------------------------------------------------------- rank 0: runs and cells */

static unsigned long test_iters(int t)
{
	return opt.iters ? opt.iters : tests[t].iters;
}

static unsigned long test_warmup(int t)
{
	unsigned long w = test_iters(t) / 10;

	if (opt.warmup >= 0)
		return (unsigned long) opt.warmup;
	return w ? w : 1;
}

static void mark(int p, int t, enum cell_state state, const char *why)
{
	cells[p][t].state = state;
	copy_why(cells[p][t].why, why);
}

/* One test in a running run. Non-zero: the run is over (the cell says why). */
static int run_step(struct rank *r, int p, int repeat, int t)
{
	struct result res[MAX_RANKS];
	char skip_why[WHY_LEN] = "";
	double us = 0, worst;
	int ret, status;

	ret = send_cmd(r, t);
	if (ret)
		goto err;
	status = query(r, &tests[t], skip_why);
	if (status != STATUS_SKIP)
		ret = run_test(r, &tests[t], test_iters(t), test_warmup(t), &us);
	if (!ret)
		ret = collect(r, t, res);
	if (ret)
		goto err;
	for (int i = 1; i < r->nranks; i++)
		if (res[i].status != status) {
			ret = rank_fail(r, -FI_EOTHER, "rank %d %s fi_query_collective", i,
					status == STATUS_SKIP ? "ran it despite" : "skipped it by");
			goto err;
		}
	if (status == STATUS_SKIP) {
		mark(p, t, CELL_SKIP, skip_why);
		return 0;
	}
	worst = us;
	for (int i = 1; i < r->nranks; i++)
		if (res[i].us > worst)
			worst = res[i].us;
	cells[p][t].repeat[cells[p][t].nsamples] = repeat;
	cells[p][t].samples[cells[p][t].nsamples++] = worst;
	if (opt.verbose)
		fprintf(stderr, "%s: repeat %d %s %s %zu B: %.2f us (rank 0 %.2f us)\n", BENCH_NAME,
			repeat + 1, r->prov, tests[t].name, tests[t].size, worst, us);
	return 0;
err:
	mark(p, t, CELL_FAILED, r->why);
	return ret;
}

/*
 * One run of provider p: the tests in todo, in order, all ranks started afresh. Returns the
 * tests of todo not reached because one failed, for the next run.
 */
static uint32_t run_once(int p, int repeat, uint32_t todo, const char *argv0)
{
	static char names[MAX_RANKS * ADDR_MAX];
	struct result res[MAX_RANKS];
	struct spec spec = {
		.nranks = opt.nranks,
		.timeout = opt.timeout,
	};
	struct rank r;
	int ret;

	snprintf(spec.prov, sizeof(spec.prov), "%s", opt.provs[p]);
	for (int t = 0; t < NTESTS; t++) {
		spec.iters[t] = test_iters(t);
		spec.warmup[t] = test_warmup(t);
	}
	rank_init(&r, opt.provs[p], 0, opt.nranks, opt.timeout);
	ret = rank_open(&r);
	if (ret == -FI_ENODATA) {
		prov_unavail[p] = true;
		copy_why(prov_why[p], r.why);
		return 0;
	}
	prov_auto[p] = !r.is_manual;
	for (int i = 1; !ret && i < opt.nranks; i++) {
		spec.rank = i;
		spec.cpu = ncpus ? cpus[i % ncpus] : -1;
		ret = spawn_rank(&r, &spec, argv0);
	}
	if (!ret)
		ret = exchange_names(&r, names);
	if (!ret)
		ret = rank_join(&r, names);
	if (!ret)
		ret = collect(&r, STEP_JOIN, res);
	if (ret) {
		/* it would fail the same way every time: these tests are done for */
		for (int t = 0; t < NTESTS; t++)
			if (todo & (1U << t))
				mark(p, t, CELL_FAILED, r.why);
		end_run(&r, false);
		return 0;
	}
	for (int t = 0; t < NTESTS && !ret; t++) {
		if (!(todo & (1U << t)))
			continue;
		todo &= ~(1U << t);
		ret = run_step(&r, p, repeat, t);
	}
	end_run(&r, !ret);
	return ret ? todo : 0;
}

static uint32_t pending(int p)
{
	uint32_t mask = 0;

	for (int t = 0; t < NTESTS; t++)
		if (opt.selected[t] && cells[p][t].state == CELL_PENDING)
			mask |= 1U << t;
	return mask;
}

/* ---------------------------------------------------------------- the table */

static void format_size(size_t size, bool human, char *buf, size_t len)
{
	if (human && !size)
		snprintf(buf, len, "-");
	else if (human && size >= (1UL << 20) && !(size % (1UL << 20)))
		snprintf(buf, len, "%zuM", size >> 20);
	else if (human && size >= 1024 && !(size % 1024))
		snprintf(buf, len, "%zuK", size >> 10);
	else
		snprintf(buf, len, "%zu", size);
}

static bool cell_value(int p, int t, double *value)
{
	const struct cell *c = &cells[p][t];
	double v[MAX_REPEATS];

	if (prov_unavail[p] || c->state != CELL_PENDING || !c->nsamples)
		return false;
	memcpy(v, c->samples, (size_t) c->nsamples * sizeof(v[0]));
	*value = bench_median(v, c->nsamples);
	return true;
}

/*
 * Provider p against the first in test t: the median of the ratios of the samples of each
 * repeat, which ran one after the other, so that a slow phase of the host cancels out.
 */
static bool ratio_value(int p, int t, double *value)
{
	const struct cell *x = &cells[p][t], *y = &cells[0][t];
	double r[MAX_REPEATS], unused;
	int n = 0;

	if (!cell_value(p, t, &unused) || !cell_value(0, t, &unused))
		return false;
	for (int i = 0; i < x->nsamples; i++)
		for (int j = 0; j < y->nsamples; j++)
			if (x->repeat[i] == y->repeat[j] && y->samples[j] > 0)
				r[n++] = x->samples[i] / y->samples[j];
	if (!n)
		return false;
	*value = bench_median(r, n);
	return true;
}

#define CELL_LEN (WHY_LEN + 16)

static void format_cell(int p, int t, char *buf, size_t len)
{
	const char *why = prov_unavail[p] ? prov_why[p] : cells[p][t].why;
	char clean[WHY_LEN];
	double m;

	if (cell_value(p, t, &m)) {
		snprintf(buf, len, "%.2f", m);
		return;
	}
	/* the reason goes into CSV too: no commas in it */
	copy_why(clean, why[0] ? why : "no sample");
	for (char *c = clean; *c; c++)
		if (*c == ',')
			*c = ';';
	snprintf(buf, len, "n/a (%s)", clean);
}

static void print_legend(char names[][BENCH_NAME_LEN])
{
	printf("# %s %s, libfabric %u.%u: %d ranks on %d CPU%s (rank r on CPU number r mod %d), "
	       "median of %d repeat%s, providers taking turns\n",
	       BENCH_NAME, PACKAGE_VERSION, FI_MAJOR(fi_version()), FI_MINOR(fi_version()),
	       opt.nranks, ncpus, ncpus == 1 ? "" : "s", ncpus, opt.repeats,
	       opt.repeats == 1 ? "" : "s");
	printf("# us per call, each call waited for; the slowest rank's average; allgather size "
	       "is per rank; broadcast root is rank 0\n");
	printf("# an empty CQ read yields the CPU (sched_yield): with more ranks than CPUs, ranks "
	       "time-share\n");
	for (int p = 1; p < opt.nprovs; p++)
		printf("# %s/%s = %s / %s (median of the per-repeat ratios; > 1: slower than %s)\n",
		       names[p], names[0], opt.provs[p], opt.provs[0], names[0]);
	for (int p = 0; p < opt.nprovs; p++)
		if (prov_auto[p])
			printf("# %s offers no FI_PROGRESS_MANUAL with FI_COLLECTIVE: it ran with "
			       "its own progress\n",
			       opt.provs[p]);
}

static void print_table(void)
{
	int ncols = 2 + 2 * opt.nprovs - 1, nrows = 1, t;
	char(*text)[2 * MAX_PROVS + 1][CELL_LEN];
	char names[MAX_PROVS][BENCH_NAME_LEN];
	size_t width[2 * MAX_PROVS + 1] = {0};

	text = calloc(NTESTS + 1, sizeof(*text));
	if (!text) {
		perror(BENCH_NAME);
		exit(EXIT_FAILED);
	}
	bench_prov_names(opt.provs, opt.nprovs, names);
	snprintf(text[0][0], CELL_LEN, "test");
	snprintf(text[0][1], CELL_LEN, "size");
	for (int p = 0; p < opt.nprovs; p++) {
		snprintf(text[0][2 * p + 1 + (p == 0)], CELL_LEN, "%s", opt.provs[p]);
		if (p)
			snprintf(text[0][2 * p + 2], CELL_LEN, "%s/%s", names[p], names[0]);
	}
	for (t = 0; t < NTESTS; t++) {
		char(*row)[CELL_LEN] = text[nrows];
		double ratio;

		if (!opt.selected[t])
			continue;
		nrows++;
		snprintf(row[0], CELL_LEN, "%s", tests[t].name);
		format_size(tests[t].size, !opt.csv, row[1], CELL_LEN);
		for (int p = 0; p < opt.nprovs; p++) {
			/* columns: test, size, first, then per provider its figure and ratio */
			format_cell(p, t, row[2 * p + 1 + (p == 0)], CELL_LEN);
			if (!p)
				continue;
			if (ratio_value(p, t, &ratio))
				snprintf(row[2 * p + 2], CELL_LEN, "%.2f", ratio);
			else
				snprintf(row[2 * p + 2], CELL_LEN, "n/a");
		}
	}

	if (opt.csv) {
		for (int i = 0; i < nrows; i++)
			for (int c = 0; c < ncols; c++)
				printf("%s%s", text[i][c], c + 1 < ncols ? "," : "\n");
		free(text);
		return;
	}
	for (int i = 0; i < nrows; i++)
		for (int c = 0; c < ncols; c++)
			if (strlen(text[i][c]) > width[c])
				width[c] = strlen(text[i][c]);
	print_legend(names);
	for (int i = 0; i < nrows; i++) {
		for (int c = 0; c < ncols; c++) {
			/* names left-aligned, numbers right-aligned */
			if (c == 0)
				printf("%-*s", (int) width[c], text[i][c]);
			else
				printf("  %*s", (int) width[c], text[i][c]);
		}
		printf("\n");
	}
	free(text);
}

/* ---------------------------------------------------------------- options */

static void usage(FILE *out)
{
	fprintf(out,
		"usage: %s [-n RANKS] [-i ITERS] [-w WARMUP] [-r REPEATS] [-p PROV]... "
		"[-t TEST]...\n"
		"fi_collective(3) latency of libfabric providers among RANKS processes on this "
		"host,\nside by side, with the ratio of each provider to the first.\n"
		"\n"
		"  -n, --ranks N        ranks, 2 to %d (default %d); rank 0 is this process, it\n"
		"                       starts the others; ranks are pinned round-robin to CPUs\n"
		"  -p, --provider PROV  a provider, e.g. \"tcp;ofi_rxm\"; repeat -p to compare\n"
		"                       (default \"tcp;ofi_layer\" and \"tcp;ofi_rxm\")\n"
		"  -t, --test TEST      barrier, allreduce, broadcast, allgather, optionally with\n"
		"                       :SIZE (allreduce:8, allreduce:1m, allgather:64k); repeat\n"
		"                       -t for several (default: all)\n"
		"  -i, --iters N        timed calls per test (default 1000; 1 MiB: 50; 64 KiB:\n"
		"                       200)\n"
		"  -w, --warmup N       untimed calls before them (default: a tenth of -i, 1 at "
		"least)\n"
		"  -r, --repeats N      runs per provider, providers taking turns (default %d)\n"
		"  -T, --timeout SEC    give up on any single wait after SEC s (default %d)\n"
		"  -c, --csv            print the table as CSV\n"
		"  -v, --verbose        print every measurement on stderr\n"
		"  -h, --help           this text\n"
		"\n"
		"A rank yields its CPU (sched_yield) whenever a CQ read finds nothing, so\n"
		"that ranks sharing a CPU hand it over at once. Exit status: 0; 1 when a\n"
		"test failed; 77 when no provider offers FI_COLLECTIVE.\n",
		BENCH_NAME, MAX_RANKS, DEFAULT_RANKS, DEFAULT_REPEATS, DEFAULT_TIMEOUT);
}

/* "allreduce", "allreduce:1m", "bcast", ...: selects the rows; false when none matches. */
static bool select_test(const char *arg)
{
	char name[32];
	const char *colon = strchr(arg, ':');
	size_t len = colon ? (size_t) (colon - arg) : strlen(arg), size = 0;
	bool found = false;

	if (len >= sizeof(name) || (colon && !bench_parse_size(colon + 1, 0, SIZE_MAX, &size)))
		return false;
	memcpy(name, arg, len);
	name[len] = '\0';
	if (!strcmp(name, "bcast"))
		snprintf(name, sizeof(name), "broadcast");
	for (int t = 0; t < NTESTS; t++) {
		if (strcmp(name, tests[t].name) || (colon && size != tests[t].size))
			continue;
		opt.selected[t] = true;
		found = true;
	}
	return found;
}

static void parse_options(int argc, char **argv)
{
	static const struct option longopts[] = {
		{"ranks", required_argument, NULL, 'n'},
		{"iters", required_argument, NULL, 'i'},
		{"warmup", required_argument, NULL, 'w'},
		{"repeats", required_argument, NULL, 'r'},
		{"provider", required_argument, NULL, 'p'},
		{"test", required_argument, NULL, 't'},
		{"timeout", required_argument, NULL, 'T'},
		{"csv", no_argument, NULL, 'c'},
		{"verbose", no_argument, NULL, 'v'},
		{"help", no_argument, NULL, 'h'},
		{0},
	};
	bool any_test = false;
	unsigned long v;
	int c;

	opt.nranks = DEFAULT_RANKS;
	opt.repeats = DEFAULT_REPEATS;
	opt.timeout = DEFAULT_TIMEOUT;
	opt.warmup = -1;
	while ((c = getopt_long(argc, argv, "n:i:w:r:p:t:T:cvh", longopts, NULL)) != -1) {
		switch (c) {
		case 'n':
			if (!bench_parse_ulong(optarg, 2, MAX_RANKS, &v))
				goto bad;
			opt.nranks = (int) v;
			break;
		case 'i':
			if (!bench_parse_ulong(optarg, 1, 100000000, &v))
				goto bad;
			opt.iters = v;
			break;
		case 'w':
			if (!bench_parse_ulong(optarg, 0, 100000000, &v))
				goto bad;
			opt.warmup = (long) v;
			break;
		case 'r':
			if (!bench_parse_ulong(optarg, 1, MAX_REPEATS, &v))
				goto bad;
			opt.repeats = (int) v;
			break;
		case 'p':
			if (opt.nprovs == MAX_PROVS) {
				fprintf(stderr, "%s: at most %d providers\n", BENCH_NAME,
					MAX_PROVS);
				exit(EXIT_USAGE);
			}
			if (!optarg[0] || strlen(optarg) >= PROV_LEN)
				goto bad;
			opt.provs[opt.nprovs++] = optarg;
			break;
		case 't':
			if (!select_test(optarg)) {
				fprintf(stderr, "%s: no test '%s'\n", BENCH_NAME, optarg);
				usage(stderr);
				exit(EXIT_USAGE);
			}
			any_test = true;
			break;
		case 'T':
			if (!bench_parse_ulong(optarg, 1, 3600, &v))
				goto bad;
			opt.timeout = (unsigned) v;
			break;
		case 'c':
			opt.csv = true;
			break;
		case 'v':
			opt.verbose = true;
			break;
		case 'h':
			usage(stdout);
			exit(0);
		default:
			usage(stderr);
			exit(EXIT_USAGE);
		}
	}
	if (optind < argc) {
		fprintf(stderr, "%s: unexpected argument '%s'\n", BENCH_NAME, argv[optind]);
		usage(stderr);
		exit(EXIT_USAGE);
	}
	if (!opt.nprovs) {
		opt.provs[opt.nprovs++] = "tcp;ofi_layer";
		opt.provs[opt.nprovs++] = "tcp;ofi_rxm";
	}
	for (int t = 0; !any_test && t < NTESTS; t++)
		opt.selected[t] = true;
	return;
bad:
	fprintf(stderr, "%s: bad value '%s' for -%c\n", BENCH_NAME, optarg, c);
	usage(stderr);
	exit(EXIT_USAGE);
}

/* The CPUs we may run on, in order; rank r goes to cpus[r % ncpus]. */
static void choose_cpus(void)
{
	ncpus = bench_allowed_cpus(cpus, CPU_SETSIZE);
	if (ncpus < 0)
		ncpus = 0;
}

int main(int argc, char **argv)
{
	bool any_avail = false, any_failed = false;
	unsigned long v;

	if (argc == 3 && !strcmp(argv[1], CHILD_OPT)) {
		if (!bench_parse_ulong(argv[2], 0, 1024, &v))
			return EXIT_USAGE;
		return child_main((int) v);
	}
	parse_options(argc, argv);
	for (int i = 0; i < MAX_RANKS; i++)
		children[i].fd = -1;
	choose_cpus();
	if (ncpus)
		bench_pin(BENCH_NAME, cpus[0]);
	signal(SIGPIPE, SIG_IGN);
	watchdog_start(opt.timeout);

	/* providers take turns run by run; every run starts all ranks afresh */
	for (int r = 0; r < opt.repeats; r++) {
		for (int p = 0; p < opt.nprovs; p++) {
			uint32_t todo = prov_unavail[p] ? 0 : pending(p);

			while (todo)
				todo = run_once(p, r, todo, argv[0]);
		}
	}
	watchdog_stop();

	print_table();
	for (int p = 0; p < opt.nprovs; p++) {
		if (prov_unavail[p]) {
			fprintf(stderr, "%s: %s: not available: %s (FI_PROVIDER_PATH=%s)\n",
				BENCH_NAME, opt.provs[p], prov_why[p],
				getenv("FI_PROVIDER_PATH") ? getenv("FI_PROVIDER_PATH") : "unset");
			continue;
		}
		any_avail = true;
		for (int t = 0; t < NTESTS; t++)
			any_failed =
				any_failed || (opt.selected[t] && cells[p][t].state == CELL_FAILED);
	}
	if (!any_avail)
		return EXIT_UNAVAIL;
	return any_failed ? EXIT_FAILED : 0;
}
