/*
 * fi_av_set_bench: the cost of AV set operations (fi_av_set(3)) for large groups, providers
 * side by side, with the ratio of the first provider to the second.
 *
 * For each size n, one FI_AV_TABLE AV of 3n/2 addresses and two sets of n members built as
 * ranges: A = [0, n) and B = [n/2, 3n/2). Timed, each on fresh sets (the operations change
 * dst): creating A, A ∪ B, A ∩ B, A \ B, and building a set of n members with
 * fi_av_set_insert in a random order, then A ∪ (that set). Each figure is the median of the
 * repeats, with the spread (min-max), in milliseconds.
 *
 * Every (provider, size, operation) runs in its own child process with a time limit: a
 * provider whose sets are quadratic stops being measured at the first size it cannot finish
 * in time, and a crash costs one figure. A last section times ofi_layer's set engine
 * (util/av_set) directly, for each form of its index: FI_AV_TABLE indices, FI_AV_MAP handles
 * that share a generation, and sparse ids.
 */
#include "config.h"

#include <arpa/inet.h>
#include <getopt.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <rdma/fabric.h>
#include <rdma/fi_collective.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_errno.h>

#include "util/av_set.h"

#include "bench_util.h"

#define BENCH_NAME "fi_av_set_bench"
#define DEFAULT_PROVS "tcp;ofi_layer,tcp;ofi_rxm"
#define DEFAULT_SIZES "1000,10000,100000,1000000"
#define DEFAULT_REPEATS 7
#define DEFAULT_TIMEOUT 60
#define MAX_PROVS 8
#define MAX_SIZES 16
#define MAX_REPEATS 100
#define MAX_SIZE (1UL << 26)
/* addresses inserted per fi_av_insert call while building the AV */
#define INSERT_BATCH 4096

enum op { OP_CREATE, OP_UNION, OP_INTERSECT, OP_DIFF, OP_INSERT, OP_UNION_SHUFFLED, OP_COUNT };

static const char *const op_names[OP_COUNT] = {
	[OP_CREATE] = "create A", [OP_UNION] = "A | B",	    [OP_INTERSECT] = "A & B",
	[OP_DIFF] = "A - B",	  [OP_INSERT] = "insert n", [OP_UNION_SHUFFLED] = "A | shuffled",
};

/* What a child reports: one write, atomic on a pipe. */
struct result {
	int32_t status; /* 0, or the negative fi_errno that stopped the measurement */
	int32_t nsamples;
	double median, min, max; /* milliseconds */
};

enum cell_state { CELL_NONE, CELL_OK, CELL_FAILED, CELL_TIMEOUT, CELL_SKIPPED, CELL_UNAVAIL };

struct cell {
	enum cell_state state;
	struct result res;
};

static struct {
	const char *provs[MAX_PROVS];
	int nprovs;
	size_t sizes[MAX_SIZES];
	int nsizes;
	int repeats;
	unsigned timeout;
	bool no_engine;
} opt;

static struct cell cells[MAX_PROVS][MAX_SIZES][OP_COUNT];

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *) a, y = *(const double *) b;

	return x < y ? -1 : x > y;
}

static struct result summarize(double *samples, int n)
{
	struct result r = {.nsamples = n};

	qsort(samples, (size_t) n, sizeof(*samples), cmp_double);
	r.min = samples[0];
	r.max = samples[n - 1];
	r.median = n % 2 ? samples[n / 2] : (samples[n / 2 - 1] + samples[n / 2]) / 2;
	return r;
}

static uint64_t rng_next(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

/* A random permutation of [0, n). */
static fi_addr_t *shuffled(size_t n, uint64_t seed)
{
	fi_addr_t *a = malloc(n * sizeof(*a)), t;
	size_t i, j;

	if (!a)
		return NULL;
	for (i = 0; i < n; i++)
		a[i] = i;
	for (i = n - 1; i > 0; i--) {
		j = rng_next(&seed) % (i + 1);
		t = a[i];
		a[i] = a[j];
		a[j] = t;
	}
	return a;
}

/* ---------------------------------------------------------------- child: one measurement */

struct fab {
	struct fi_info *info;
	struct fid_fabric *fabric;
	struct fid_domain *domain;
	struct fid_av *av;
};

static void fab_close(struct fab *f)
{
	if (f->av)
		fi_close(&f->av->fid);
	bench_close_domain(f->domain, f->fabric, f->info);
}

/* Fabric, domain and an FI_AV_TABLE AV of naddr distinct (never contacted) addresses. */
static int fab_open(const char *prov, size_t naddr, struct fab *f)
{
	struct fi_av_attr av_attr = {.type = FI_AV_TABLE, .count = naddr};
	struct fi_info *hints = fi_allocinfo();
	struct sockaddr_in *batch;
	size_t i, n;
	int ret;

	memset(f, 0, sizeof(*f));
	if (!hints)
		return -FI_ENOMEM;
	hints->ep_attr->type = FI_EP_RDM;
	hints->caps = FI_MSG;
	hints->addr_format = FI_SOCKADDR_IN;
	hints->fabric_attr->prov_name = strdup(prov);
	ret = fi_getinfo(BENCH_API, BENCH_NODE, NULL, 0, hints, &f->info);
	fi_freeinfo(hints);
	if (ret)
		return ret;
	ret = bench_open_domain(f->info, &f->fabric, &f->domain, NULL);
	if (!ret)
		ret = fi_av_open(f->domain, &av_attr, &f->av, NULL);
	if (ret)
		return ret;

	batch = calloc(INSERT_BATCH, sizeof(*batch));
	if (!batch)
		return -FI_ENOMEM;
	for (i = 0; i < naddr; i += n) {
		n = naddr - i < INSERT_BATCH ? naddr - i : INSERT_BATCH;
		for (size_t j = 0; j < n; j++) {
			batch[j].sin_family = AF_INET;
			batch[j].sin_addr.s_addr = htonl(0x0a000000u + (uint32_t) ((i + j) >> 8));
			batch[j].sin_port = htons((uint16_t) (10000 + (i + j) % 256));
		}
		ret = fi_av_insert(f->av, batch, n, NULL, 0, NULL);
		if (ret != (int) n) {
			free(batch);
			return ret < 0 ? ret : -FI_EIO;
		}
	}
	free(batch);
	return 0;
}

static int range_set(struct fab *f, fi_addr_t start, size_t n, struct fid_av_set **set)
{
	struct fi_av_set_attr attr = {
		/* room for a union of two sets: a hint to some providers, a bound to others */
		.count = 2 * n,
		.start_addr = start,
		.end_addr = start + n - 1,
		.stride = 1,
	};

	return fi_av_set(f->av, &attr, set, NULL);
}

static int insert_set(struct fab *f, const fi_addr_t *order, size_t n, struct fid_av_set **set)
{
	struct fi_av_set_attr attr = {
		.count = 2 * n,
		.start_addr = FI_ADDR_NOTAVAIL,
		.end_addr = FI_ADDR_NOTAVAIL,
	};
	size_t i;
	int ret;

	ret = fi_av_set(f->av, &attr, set, NULL);
	for (i = 0; !ret && i < n; i++)
		ret = fi_av_set_insert(*set, order[i]);
	if (ret && *set) {
		fi_close(&(*set)->fid);
		*set = NULL;
	}
	return ret;
}

/* One repetition of op on fresh sets; the time in *ms. */
static int run_once(struct fab *f, enum op op, size_t n, const fi_addr_t *order, double *ms)
{
	struct fid_av_set *a = NULL, *b = NULL;
	double t0;
	int ret;

	if (op == OP_CREATE) {
		t0 = now_ms();
		ret = range_set(f, 0, n, &a);
		*ms = now_ms() - t0;
		goto close_sets;
	}
	if (op == OP_INSERT) {
		t0 = now_ms();
		ret = insert_set(f, order, n, &a);
		*ms = now_ms() - t0;
		goto close_sets;
	}

	ret = range_set(f, 0, n, &a);
	if (ret)
		goto close_sets;
	ret = op == OP_UNION_SHUFFLED ? insert_set(f, order, n, &b) : range_set(f, n / 2, n, &b);
	if (ret)
		goto close_sets;

	t0 = now_ms();
	switch (op) {
	case OP_INTERSECT:
		ret = fi_av_set_intersect(a, b);
		break;
	case OP_DIFF:
		ret = fi_av_set_diff(a, b);
		break;
	default:
		ret = fi_av_set_union(a, b);
		break;
	}
	*ms = now_ms() - t0;

close_sets:
	if (b)
		fi_close(&b->fid);
	if (a)
		fi_close(&a->fid);
	return ret;
}

/* In the child: measures op at size n and writes one result to fd. */
static void child_measure(const char *prov, size_t n, enum op op, int fd)
{
	double samples[MAX_REPEATS];
	struct result res = {0};
	fi_addr_t *order = NULL;
	struct fab f;
	int i, ret;

	ret = fab_open(prov, n + n / 2, &f);
	if (!ret && (op == OP_INSERT || op == OP_UNION_SHUFFLED)) {
		/* a shuffle of B's range [n/2, 3n/2) */
		order = shuffled(n, 0x2545f4914f6cdd1dULL);
		if (!order)
			ret = -FI_ENOMEM;
		for (size_t k = 0; order && k < n; k++)
			order[k] += n / 2;
	}
	for (i = 0; !ret && i < opt.repeats; i++)
		ret = run_once(&f, op, n, order, &samples[i]);
	if (ret)
		res.status = ret;
	else
		res = summarize(samples, opt.repeats);
	free(order);
	fab_close(&f);
	if (write(fd, &res, sizeof(res)) != sizeof(res))
		_exit(2);
	_exit(0);
}

/* Runs one measurement in a child, bounded by opt.timeout. */
static enum cell_state measure(const char *prov, size_t n, enum op op, struct result *res)
{
	int fds[2], status;
	struct pollfd pfd;
	ssize_t got = 0;
	pid_t pid;

	if (pipe(fds))
		return CELL_FAILED;
	fflush(NULL);
	pid = fork();
	if (pid < 0) {
		close(fds[0]);
		close(fds[1]);
		return CELL_FAILED;
	}
	if (pid == 0) {
		close(fds[0]);
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		child_measure(prov, n, op, fds[1]);
	}
	close(fds[1]);
	pfd.fd = fds[0];
	pfd.events = POLLIN;
	if (poll(&pfd, 1, (int) opt.timeout * 1000) > 0)
		got = read(fds[0], res, sizeof(*res));
	close(fds[0]);
	if (got != sizeof(*res))
		kill(pid, SIGKILL);
	waitpid(pid, &status, 0);
	if (got != sizeof(*res))
		return WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL ? CELL_TIMEOUT
									  : CELL_FAILED;
	if (res->status == -FI_ENODATA)
		return CELL_UNAVAIL;
	return res->status ? CELL_FAILED : CELL_OK;
}

/* ---------------------------------------------------------------- engine section */

/*
 * util's sets directly, n members each: FI_AV_TABLE indices (a bitmap from 0), FI_AV_MAP
 * handles sharing a generation (a bitmap window high up) and sparse ids (a hash).
 */
static uint64_t engine_id(int shape, uint64_t k)
{
	switch (shape) {
	case 0:
		return k;
	case 1:
		return 0x5a5a5aULL << 32 | k;
	default:
		return k << 32 | 1;
	}
}

static void engine_section(size_t n)
{
	static const char *const shapes[] = {"table ids (bitmap)", "map ids (window)",
					     "sparse ids (hash)"};
	double samples[OP_COUNT][MAX_REPEATS], t0;
	struct util_av_set a, b;
	struct result r;
	int shape, op, i;
	size_t k;

	printf("\n# ofi_layer's set engine (util/av_set) alone, n = %zu, ms: median (min-max)\n",
	       n);
	printf("%-20s %-22s %-22s %-22s\n", "ids", "A | B", "A & B", "A - B");
	for (shape = 0; shape < 3; shape++) {
		for (i = 0; i < opt.repeats; i++) {
			for (op = OP_UNION; op <= OP_DIFF; op++) {
				if (util_av_set_init(&a, 2 * n) || util_av_set_init(&b, 2 * n))
					return;
				for (k = 0; k < n; k++) {
					util_av_set_insert(&a, engine_id(shape, k));
					util_av_set_insert(&b, engine_id(shape, k + n / 2));
				}
				t0 = now_ms();
				if (op == OP_UNION)
					util_av_set_union(&a, &b);
				else if (op == OP_INTERSECT)
					util_av_set_intersect(&a, &b);
				else
					util_av_set_diff(&a, &b);
				samples[op][i] = now_ms() - t0;
				util_av_set_fini(&a);
				util_av_set_fini(&b);
			}
		}
		printf("%-20s", shapes[shape]);
		for (op = OP_UNION; op <= OP_DIFF; op++) {
			char buf[64];

			r = summarize(samples[op], opt.repeats);
			snprintf(buf, sizeof(buf), "%.2f (%.2f-%.2f)", r.median, r.min, r.max);
			printf(" %-22s", buf);
		}
		printf("\n");
	}
}

/* ---------------------------------------------------------------- table */

static void format_cell(const struct cell *c, char *buf, size_t len)
{
	switch (c->state) {
	case CELL_OK:
		snprintf(buf, len, "%.2f (%.2f-%.2f)", c->res.median, c->res.min, c->res.max);
		break;
	case CELL_FAILED:
		snprintf(buf, len, "fail %d", c->res.status);
		break;
	case CELL_TIMEOUT:
		snprintf(buf, len, "timeout");
		break;
	case CELL_UNAVAIL:
		snprintf(buf, len, "n/a");
		break;
	default:
		snprintf(buf, len, "-");
		break;
	}
}

static void print_row(int s, enum op op)
{
	const struct cell *c0 = &cells[0][s][op], *c1 = &cells[1][s][op];
	char buf[64];
	int p;

	printf("%-9zu %-13s", opt.sizes[s], op_names[op]);
	for (p = 0; p < opt.nprovs; p++) {
		format_cell(&cells[p][s][op], buf, sizeof(buf));
		printf(" %-24s", buf);
	}
	if (opt.nprovs >= 2 && c0->state == CELL_OK && c1->state == CELL_OK && c1->res.median > 0)
		printf(" %.3g", c0->res.median / c1->res.median);
	printf("\n");
}

/* ---------------------------------------------------------------- options */

static void usage(FILE *out)
{
	fprintf(out,
		"usage: %s [options]\n"
		"  -p, --provs LIST    providers, comma separated (default \"%s\")\n"
		"  -n, --sizes LIST    members per set, comma separated (default %s)\n"
		"  -r, --repeats N     runs per figure; the median is shown (default %d)\n"
		"  -t, --timeout S     seconds per provider, size and operation (default %d)\n"
		"  -E, --no-engine     skip the section timing util/av_set alone\n"
		"  -h, --help\n"
		"The provider is loaded from FI_PROVIDER_PATH (e.g. the build tree's .libs).\n",
		BENCH_NAME, DEFAULT_PROVS, DEFAULT_SIZES, DEFAULT_REPEATS, DEFAULT_TIMEOUT);
}

static int parse_options(int argc, char **argv)
{
	static const struct option longopts[] = {
		{"provs", required_argument, NULL, 'p'},
		{"sizes", required_argument, NULL, 'n'},
		{"repeats", required_argument, NULL, 'r'},
		{"timeout", required_argument, NULL, 't'},
		{"no-engine", no_argument, NULL, 'E'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	static char provs[1024], sizes[1024];
	const char *list[MAX_SIZES];
	char *end;
	int c, i;

	snprintf(provs, sizeof(provs), "%s", DEFAULT_PROVS);
	snprintf(sizes, sizeof(sizes), "%s", DEFAULT_SIZES);
	opt.repeats = DEFAULT_REPEATS;
	opt.timeout = DEFAULT_TIMEOUT;
	while ((c = getopt_long(argc, argv, "p:n:r:t:Eh", longopts, NULL)) != -1) {
		switch (c) {
		case 'p':
			snprintf(provs, sizeof(provs), "%s", optarg);
			break;
		case 'n':
			snprintf(sizes, sizeof(sizes), "%s", optarg);
			break;
		case 'r':
			opt.repeats = atoi(optarg);
			break;
		case 't':
			opt.timeout = (unsigned) atoi(optarg);
			break;
		case 'E':
			opt.no_engine = true;
			break;
		case 'h':
			usage(stdout);
			exit(0);
		default:
			usage(stderr);
			return -1;
		}
	}
	opt.nprovs = bench_split_list(provs, opt.provs, MAX_PROVS);
	opt.nsizes = bench_split_list(sizes, list, MAX_SIZES);
	if (opt.nprovs <= 0 || opt.nsizes <= 0 || opt.repeats < 1 || opt.repeats > MAX_REPEATS ||
	    !opt.timeout) {
		usage(stderr);
		return -1;
	}
	for (i = 0; i < opt.nsizes; i++) {
		opt.sizes[i] = strtoul(list[i], &end, 10);
		if (*end || opt.sizes[i] < 2 || opt.sizes[i] > MAX_SIZE) {
			fprintf(stderr, "%s: size %s: not in 2..%lu\n", BENCH_NAME, list[i],
				MAX_SIZE);
			return -1;
		}
	}
	return 0;
}

int main(int argc, char **argv)
{
	enum cell_state state;
	struct result res;
	bool stopped[MAX_PROVS][OP_COUNT] = {{0}};
	int p, s, op;

	if (parse_options(argc, argv))
		return 1;
	setvbuf(stdout, NULL, _IOLBF, 0);
	printf("# %s: per size n, one FI_AV_TABLE AV of 3n/2 addresses, A = [0, n), "
	       "B = [n/2, 3n/2)\n",
	       BENCH_NAME);
	printf("# ms: median of %d runs (min-max); ratio = %s / %s\n", opt.repeats, opt.provs[0],
	       opt.nprovs > 1 ? opt.provs[1] : "-");
	printf("%-9s %-13s", "n", "operation");
	for (p = 0; p < opt.nprovs; p++)
		printf(" %-24s", opt.provs[p]);
	printf("%s\n", opt.nprovs > 1 ? " ratio" : "");

	for (s = 0; s < opt.nsizes; s++) {
		for (op = 0; op < OP_COUNT; op++) {
			for (p = 0; p < opt.nprovs; p++) {
				/* past the size it could not finish in time, or unavailable */
				if (stopped[p][op]) {
					cells[p][s][op].state = CELL_SKIPPED;
					continue;
				}
				memset(&res, 0, sizeof(res));
				state = measure(opt.provs[p], opt.sizes[s], (enum op) op, &res);
				cells[p][s][op].state = state;
				cells[p][s][op].res = res;
				if (state == CELL_TIMEOUT || state == CELL_UNAVAIL)
					stopped[p][op] = true;
			}
			print_row(s, (enum op) op);
		}
	}
	for (p = 0; p < opt.nprovs; p++) {
		if (cells[p][0][0].state == CELL_UNAVAIL)
			printf("# %s: not available (FI_PROVIDER_PATH?)\n", opt.provs[p]);
	}
	if (!opt.no_engine)
		engine_section(opt.sizes[opt.nsizes - 1]);
	return 0;
}
