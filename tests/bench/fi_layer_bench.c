/*
 * fi_layer_bench: FI_MSG and FI_TAGGED latency, bandwidth and tag matching under load of
 * libfabric providers, side by side in one run, with the ratio of the first provider to each
 * of the others.
 *
 * Process model. The main process never calls into libfabric: a provider under development
 * may crash or hang, and that must cost one measurement, not the whole table. For every
 * (repeat, test, provider) run it forks a client; the client forks the server, both open an
 * endpoint on 127.0.0.1, swap addresses through pipes, run the test and exit (bench_peer.c).
 * The providers take turns test by test, so that a burst of load from elsewhere on the
 * machine lands on all of them alike rather than on whichever one was running all its tests.
 * The client reports the test's outcome to the main process; a test that failed is marked
 * and skipped in later repeats.
 *
 * Everything is bounded: both children re-arm alarm() for every test, die with their parent
 * (PR_SET_PDEATHSIG), the main process is the subreaper of orphaned servers and reaps every
 * descendant after each run, and it kills a client that stays silent too long.
 */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <rdma/fabric.h>

#include "bench.h"

/* Per provider and test, across repeats. */
enum cell_state { CELL_PENDING, CELL_NA, CELL_FAILED };

struct cell {
	enum cell_state state;
	int nsamples;
	double samples[MAX_REPEATS];
	int repeat[MAX_REPEATS];       /* the repeat each sample comes from */
};

struct options opt;
struct test tests[MAX_TESTS];
int ntests;
struct run_cfg bench_run;
int bench_cpus[2] = {-1, -1};
bool bench_yield_idle;

static struct cell cells[MAX_PROVS][MAX_TESTS];
static bool prov_unavail[MAX_PROVS];
static bool prov_failed[MAX_PROVS];
static bool prov_ran[MAX_PROVS];

static const size_t default_lat_sizes[] = {8, 4096, 65536, 1048576};
static const size_t default_bw_sizes[] = {65536, 1048576};
/* the receives posted at once in the matching tests */
static const size_t default_counts[] = {1, 64, 1024, 16384};

static size_t clamp_size(size_t v, size_t lo, size_t hi)
{
	return v < lo ? lo : v > hi ? hi : v;
}

static bool is_match_kind(enum test_kind kind)
{
	return kind == KIND_MATCH || kind == KIND_UNEXP;
}

bool test_skipped(int prov, int test)
{
	return cells[prov][test].state != CELL_PENDING || test != bench_run.test;
}

/* ---------------------------------------------------------------- the main process */

static const char *test_name(const struct test *t)
{
	switch (t->kind) {
	case KIND_LAT:
		return t->api == API_TAGGED ? "tag_lat_us" : "msg_lat_us";
	case KIND_BW:
		return t->api == API_TAGGED ? "tag_bw_MBps" : "msg_bw_MBps";
	case KIND_MATCH:
		return "tag_match_kmps";
	case KIND_UNEXP:
		return "tag_unexp_kmps";
	}
	return "?";
}

static void format_size(size_t size, bool human, char *buf, size_t len)
{
	if (human && size >= (1UL << 20) && !(size % (1UL << 20)))
		snprintf(buf, len, "%zuM", size >> 20);
	else if (human && size >= 1024 && !(size % 1024))
		snprintf(buf, len, "%zuK", size >> 10);
	else
		snprintf(buf, len, "%zu", size);
}

/* The size column: bytes, or for the matching rows N, the receives of a round. */
static void format_param(const struct test *t, bool human, char *buf, size_t len)
{
	if (!is_match_kind(t->kind))
		format_size(t->size, human, buf, len);
	else if (human)
		snprintf(buf, len, "N=%zu", t->count);
	else
		snprintf(buf, len, "%zu", t->count);
}

/* One client (and through it one server) for one provider; collects what it reports. */
static void run_once(int prov, int repeat)
{
	struct record rec;
	char why[128];
	int res[2], status, current = -1;
	bool done = false, unavail = false, timed_out = false, began = false;
	pid_t client, self = getpid();

	if (pipe(res)) {
		perror(BENCH_NAME ": pipe");
		exit(1);
	}
	fflush(NULL);
	client = fork();
	if (client < 0) {
		perror(BENCH_NAME ": fork");
		exit(1);
	}
	if (client == 0) {
		close(res[0]);
		bench_die_with_parent(self);
		signal(SIGPIPE, SIG_IGN);
		_exit(client_main(prov, res[1]));
	}
	close(res[1]);

	for (;;) {
		struct pollfd pfd = {.fd = res[0], .events = POLLIN};
		/* the client re-arms its own alarm per test; this only catches a broken client */
		int n = poll(&pfd, 1, (int) (opt.timeout + 15) * 1000);

		if (n < 0 && errno == EINTR)
			continue;
		if (n == 0) {
			timed_out = true;
			kill(client, SIGKILL);
			break;
		}
		if (n < 0 || read_all(res[0], &rec, sizeof(rec)))
			break;
		if (rec.type == REC_UNAVAIL) {
			unavail = true;
		} else if (rec.type == REC_DONE) {
			done = true;
		} else if (rec.test >= 0 && rec.test < ntests) {
			struct cell *c = &cells[prov][rec.test];

			if (rec.type == REC_BEGIN) {
				current = rec.test;
				began = true;
			} else if (rec.type == REC_NA) {
				c->state = CELL_NA;
			} else if (rec.type == REC_RESULT && c->nsamples < MAX_REPEATS) {
				c->repeat[c->nsamples] = repeat;
				c->samples[c->nsamples++] = rec.value;
				prov_ran[prov] = true;
				current = -1;
				if (opt.verbose) {
					char size[32];

					format_param(&tests[rec.test], false, size, sizeof(size));
					fprintf(stderr, "%s: repeat %d %s %s %s: %.2f\n",
						BENCH_NAME, repeat + 1, opt.provs[prov],
						test_name(&tests[rec.test]), size, rec.value);
				}
			}
		}
	}
	close(res[0]);
	waitpid(client, &status, 0);
	/* orphaned servers come to us (we are their subreaper) and die with their client */
	while (waitpid(-1, NULL, 0) > 0)
		;

	if (unavail) {
		prov_unavail[prov] = true;
		fprintf(stderr,
			"%s: %s: not available: fi_getinfo offers no %s endpoint "
			"with FI_MSG on " BENCH_NODE " (FI_PROVIDER_PATH=%s)\n",
			BENCH_NAME, opt.provs[prov],
			prov_is_msg_ep(opt.provs[prov]) ? "FI_EP_MSG" : "FI_EP_RDM",
			getenv("FI_PROVIDER_PATH") ? getenv("FI_PROVIDER_PATH") : "unset");
		return;
	}
	if (done && WIFEXITED(status) && WEXITSTATUS(status) == 0)
		return;
	if (timed_out)
		snprintf(why, sizeof(why), "stopped reporting, killed");
	else
		bench_describe_status(status, opt.timeout, why, sizeof(why));
	if (current >= 0) {
		char size[32];

		cells[prov][current].state = CELL_FAILED;
		format_param(&tests[current], true, size, sizeof(size));
		fprintf(stderr, "%s: %s repeat %d: %s %s failed (%s); skipped from now on\n",
			BENCH_NAME, opt.provs[prov], repeat + 1, test_name(&tests[current]), size,
			why);
	} else if (began) {
		/* every result arrived; the teardown failed, which the next repeat may not */
		fprintf(stderr, "%s: %s repeat %d: run failed after its tests (%s)\n", BENCH_NAME,
			opt.provs[prov], repeat + 1, why);
	} else {
		/* setup itself failed: it would fail the same way in every repeat */
		prov_failed[prov] = true;
		fprintf(stderr, "%s: %s repeat %d: run failed before any test (%s)\n", BENCH_NAME,
			opt.provs[prov], repeat + 1, why);
	}
}

static bool cell_has_value(int prov, int test)
{
	return !prov_unavail[prov] && cells[prov][test].state == CELL_PENDING &&
	       cells[prov][test].nsamples > 0;
}

/*
 * The median, or with --best the best sample (latency: the lowest; the rest: the highest);
 * false when the cell has no number to show.
 */
static bool cell_value(int prov, int test, double *value)
{
	struct cell *c = &cells[prov][test];
	double v[MAX_REPEATS];
	int n = c->nsamples;

	if (!cell_has_value(prov, test))
		return false;
	memcpy(v, c->samples, n * sizeof(v[0]));
	*value = bench_median(v, n); /* sorts v */
	if (opt.best)
		*value = tests[test].kind == KIND_LAT ? v[0] : v[n - 1];
	return true;
}

/*
 * Test a of provider 0 against test b of provider p: the median of the ratios of the two
 * samples of each repeat, which ran one after the other, so that a slow phase of the host
 * over a few repeats cancels out instead of landing on one side of the ratio; with --best,
 * the ratio of the best samples.
 */
static bool ratio_value(int p, int a, int b, double *value)
{
	const struct cell *x = &cells[0][a], *y = &cells[p][b];
	double r[MAX_REPEATS], best_x, best_y;
	int n = 0;

	if (!cell_has_value(0, a) || !cell_has_value(p, b))
		return false;
	if (opt.best) {
		if (!cell_value(0, a, &best_x) || !cell_value(p, b, &best_y) || best_y <= 0)
			return false;
		*value = best_x / best_y;
		return true;
	}
	for (int i = 0; i < x->nsamples; i++)
		for (int j = 0; j < y->nsamples; j++)
			if (x->repeat[i] == y->repeat[j] && y->samples[j] > 0)
				r[n++] = x->samples[i] / y->samples[j];
	if (!n)
		return false;
	*value = bench_median(r, n);
	return true;
}

static void format_cell(int prov, int test, char *buf, size_t len)
{
	double m;

	if (cell_value(prov, test, &m))
		/* two decimals for microseconds and for slow bandwidths, none for the rest */
		snprintf(buf, len, tests[test].kind == KIND_LAT || m < 100 ? "%.2f" : "%.0f", m);
	else if (prov_unavail[prov] || cells[prov][test].state == CELL_NA)
		snprintf(buf, len, "n/a");
	else if (cells[prov][test].state == CELL_FAILED || prov_failed[prov])
		snprintf(buf, len, "fail");
	else
		snprintf(buf, len, "-"); /* never reached: earlier tests failed in every repeat */
}

#define CELL_LEN 48

/* The FI_MSG row of the same kind and size as a tagged latency or bandwidth row, or -1. */
static int msg_twin(int test)
{
	const struct test *t = &tests[test];

	if (t->api != API_TAGGED || is_match_kind(t->kind))
		return -1;
	for (int i = 0; i < ntests; i++)
		if (tests[i].api == API_MSG && tests[i].kind == t->kind && tests[i].size == t->size)
			return i;
	return -1;
}

/*
 * The first provider against provider p. A provider without FI_TAGGED (the raw core) is
 * compared in the tagged rows with its FI_MSG figure, marked: that is the limit the layered
 * tagged path is held against.
 */
static bool format_ratio(int p, int test, char *buf, size_t len)
{
	double r;
	int twin;

	if (ratio_value(p, test, test, &r)) {
		snprintf(buf, len, "%.2f", r);
		return false;
	}
	twin = msg_twin(test);
	if (cells[p][test].state == CELL_NA && !prov_unavail[p] && twin >= 0 &&
	    ratio_value(p, test, twin, &r)) {
		snprintf(buf, len, "%.2f%s", r, opt.csv ? "" : "*");
		return true;
	}
	snprintf(buf, len, "n/a");
	return false;
}

static void print_legend(char names[][BENCH_NAME_LEN], bool against_msg)
{
	printf("# %s %s, libfabric %u.%u: %s of %d repeat%s, providers alternating test by "
	       "test\n",
	       BENCH_NAME, PACKAGE_VERSION, FI_MAJOR(fi_version()), FI_MINOR(fi_version()),
	       opt.best ? "best" : "median", opt.repeats, opt.repeats == 1 ? "" : "s");
	printf("# lat: half round trip in us; bw: MB/s (10^6 B/s), window %zu; ", opt.window);
	if (bench_cpus[0] >= 0)
		printf("client on CPU %d, server on CPU %d\n", bench_cpus[0], bench_cpus[1]);
	else if (bench_yield_idle)
		printf("one CPU, the processes yield it while waiting\n");
	else
		printf("not pinned\n");
	if (opt.run_match)
		printf("# match/unexp: thousands of %zu-byte tagged messages per second; "
		       "N receives, distinct tags, matched in reverse order\n",
		       MATCH_MSG_SIZE);
	for (int p = 1; p < opt.nprovs; p++)
		printf("# %s/%s = %s / %s\n", names[0], names[p], opt.provs[0], opt.provs[p]);
	if (opt.nprovs >= 2)
		printf("# ratios: %s; lat > 1 means slower; bw, match, unexp > 1 means faster\n",
		       opt.best ? "of the best samples" :
				  "median of the per-repeat ratios");
	if (against_msg)
		printf("# *: against that provider's msg_ row of the same size (it has no "
		       "FI_TAGGED)\n");
}

static void print_table(void)
{
	int nratios = opt.nprovs - 1;
	int ncols = 2 + opt.nprovs + nratios;
	char(*text)[2 * MAX_PROVS + 1][CELL_LEN];
	char names[MAX_PROVS][BENCH_NAME_LEN];
	size_t width[2 * MAX_PROVS + 1] = {0};
	int nrows = ntests + 1;
	bool against_msg = false;

	text = calloc((size_t) nrows, sizeof(*text));
	if (!text) {
		perror(BENCH_NAME);
		exit(1);
	}
	bench_prov_names(opt.provs, opt.nprovs, names);
	snprintf(text[0][0], CELL_LEN, "test");
	snprintf(text[0][1], CELL_LEN, "size");
	for (int p = 0; p < opt.nprovs; p++)
		snprintf(text[0][2 + p], CELL_LEN, "%s", opt.provs[p]);
	for (int p = 1; p < opt.nprovs; p++)
		snprintf(text[0][1 + opt.nprovs + p], CELL_LEN, "%s/%s", names[0], names[p]);
	for (int t = 0; t < ntests; t++) {
		char(*row)[CELL_LEN] = text[t + 1];

		snprintf(row[0], CELL_LEN, "%s", test_name(&tests[t]));
		format_param(&tests[t], !opt.csv, row[1], CELL_LEN);
		for (int p = 0; p < opt.nprovs; p++)
			format_cell(p, t, row[2 + p], CELL_LEN);
		for (int p = 1; p < opt.nprovs; p++)
			against_msg |= format_ratio(p, t, row[1 + opt.nprovs + p], CELL_LEN);
	}

	if (opt.csv) {
		for (int r = 0; r < nrows; r++)
			for (int c = 0; c < ncols; c++)
				printf("%s%s", text[r][c], c + 1 < ncols ? "," : "\n");
		free(text);
		return;
	}

	for (int r = 0; r < nrows; r++)
		for (int c = 0; c < ncols; c++)
			if (strlen(text[r][c]) > width[c])
				width[c] = strlen(text[r][c]);
	print_legend(names, against_msg);
	for (int r = 0; r < nrows; r++) {
		for (int c = 0; c < ncols; c++) {
			/* names left-aligned, numbers right-aligned */
			if (c == 0)
				printf("%-*s", (int) width[c], text[r][c]);
			else
				printf("  %*s", (int) width[c], text[r][c]);
		}
		printf("\n");
	}
	free(text);
}

/* ---------------------------------------------------------------- options */

static void usage(FILE *out)
{
	fprintf(out,
		"usage: %s [options]\n"
		"FI_MSG and FI_TAGGED latency, bandwidth and tag matching of libfabric providers\n"
		"over 127.0.0.1, side by side, with the ratio of the first provider to the\n"
		"others.\n"
		"\n"
		"  -p, --providers LIST  comma-separated providers (default \"%s\");\n"
		"                        CORE-msg (tcp-msg): a connected FI_EP_MSG of CORE,\n"
		"                        the reference for what the core itself can do\n"
		"  -r, --repeats N       runs per provider, alternating providers (default %d)\n"
		"  -i, --iters N         latency round trips / bandwidth messages per size /\n"
		"                        matching messages per N (default: from a budget)\n"
		"  -s, --sizes LIST      message sizes for all tests, e.g. 8,4k,64k,1m\n"
		"                        (default: latency 8,4k,64k,1m; bandwidth 64k,1m)\n"
		"  -w, --window N        outstanding sends in the bandwidth and matching tests\n"
		"                        (default %d)\n"
		"  -t, --timeout SEC     give up on a test after SEC seconds (default %d)\n"
		"  -q, --quick           1 repeat and a tenth of the iterations (a smoke test)\n"
		"  -T, --tagged          also run the tests with fi_tsend/fi_trecv, and the\n"
		"                        matching tests\n"
		"  -m, --match           run only the matching tests: N tagged receives posted,\n"
		"                        messages in reverse order, expected and unexpected\n"
		"      --no-match        leave the matching tests out of a --tagged run\n"
		"  -n, --counts LIST     N for the matching tests (default 1,64,1024,16384)\n"
		"  -b, --best            show the best of the repeats instead of the median\n"
		"  -c, --csv             print the table as CSV\n"
		"      --no-pin          do not pin the two processes to their own CPUs\n"
		"  -F, --fabtests        set endpoints up as libfabric's fabtests do: separate\n"
		"                        transmit and receive CQs, fi_inject below the inject\n"
		"                        size, threading left to the provider, and an RDM server\n"
		"                        that learns the client's address from its first message\n"
		"  -v, --verbose         print every measurement on stderr\n"
		"  -h, --help            this text\n",
		BENCH_NAME, DEFAULT_PROVS, DEFAULT_REPEATS, DEFAULT_WINDOW, DEFAULT_TIMEOUT);
}

/* Each -p adds its providers to those of the -p before. */
static void parse_providers(char *list)
{
	int n = bench_split_list(list, opt.provs + opt.nprovs, MAX_PROVS - opt.nprovs);

	if (n < 0) {
		fprintf(stderr, "%s: at most %d providers\n", BENCH_NAME, MAX_PROVS);
		exit(2);
	}
	opt.nprovs += n;
	if (!opt.nprovs) {
		fprintf(stderr, "%s: empty provider list\n", BENCH_NAME);
		exit(2);
	}
}

static void parse_sizes(char *list)
{
	const char *item[MAX_SIZES];
	int n = bench_split_list(list, item, MAX_SIZES);
	bool ok = n >= 0;

	for (int i = 0; ok && i < n; i++)
		ok = bench_parse_size(item[i], 1, MAX_MSG_SIZE, &opt.sizes[i]);
	if (!ok) {
		fprintf(stderr, "%s: bad size list (at most %d sizes, 1 B to 1 GiB)\n", BENCH_NAME,
			MAX_SIZES);
		exit(2);
	}
	if (!n) {
		fprintf(stderr, "%s: empty size list\n", BENCH_NAME);
		exit(2);
	}
	opt.nsizes = n;
}

static void parse_counts(char *list)
{
	const char *item[MAX_COUNTS];
	int n = bench_split_list(list, item, MAX_COUNTS);
	bool ok = n >= 0;
	unsigned long v;

	for (int i = 0; ok && i < n; i++) {
		ok = bench_parse_ulong(item[i], 1, MAX_MATCH_COUNT, &v);
		if (ok)
			opt.counts[i] = v;
	}
	if (!ok) {
		fprintf(stderr, "%s: bad count list (at most %d counts, 1 to %d)\n", BENCH_NAME,
			MAX_COUNTS, MAX_MATCH_COUNT);
		exit(2);
	}
	if (!n) {
		fprintf(stderr, "%s: empty count list\n", BENCH_NAME);
		exit(2);
	}
	opt.ncounts = n;
}

static void parse_options(int argc, char **argv)
{
	static const struct option longopts[] = {
		{"providers", required_argument, NULL, 'p'},
		{"repeats", required_argument, NULL, 'r'},
		{"iters", required_argument, NULL, 'i'},
		{"sizes", required_argument, NULL, 's'},
		{"window", required_argument, NULL, 'w'},
		{"timeout", required_argument, NULL, 't'},
		{"quick", no_argument, NULL, 'q'},
		{"tagged", no_argument, NULL, 'T'},
		{"match", no_argument, NULL, 'm'},
		{"no-match", no_argument, NULL, 'M'},
		{"counts", required_argument, NULL, 'n'},
		{"best", no_argument, NULL, 'b'},
		{"csv", no_argument, NULL, 'c'},
		{"no-pin", no_argument, NULL, 'P'},
		{"fabtests", no_argument, NULL, 'F'},
		{"verbose", no_argument, NULL, 'v'},
		{"help", no_argument, NULL, 'h'},
		{0},
	};
	static char default_provs[] = DEFAULT_PROVS;
	unsigned long v;
	bool repeats_set = false, tagged = false, match = false, no_match = false;
	int c;

	opt.window = DEFAULT_WINDOW;
	opt.timeout = DEFAULT_TIMEOUT;
	opt.repeats = DEFAULT_REPEATS;
	opt.pin = true;
	while ((c = getopt_long(argc, argv, "p:r:i:s:w:t:qTmn:bcFvh", longopts, NULL)) != -1) {
		switch (c) {
		case 'p':
			parse_providers(optarg);
			break;
		case 'r':
			if (!bench_parse_ulong(optarg, 1, MAX_REPEATS, &v))
				goto bad;
			opt.repeats = (int) v;
			repeats_set = true;
			break;
		case 'i':
			if (!bench_parse_ulong(optarg, 1, 100000000, &v))
				goto bad;
			opt.iters = v;
			break;
		case 's':
			parse_sizes(optarg);
			break;
		case 'w':
			if (!bench_parse_ulong(optarg, 1, MAX_WINDOW, &v))
				goto bad;
			opt.window = v;
			break;
		case 't':
			if (!bench_parse_ulong(optarg, 1, 3600, &v))
				goto bad;
			opt.timeout = (unsigned) v;
			break;
		case 'q':
			opt.quick = true;
			break;
		case 'T':
			tagged = true;
			break;
		case 'm':
			match = true;
			break;
		case 'M':
			no_match = true;
			break;
		case 'n':
			parse_counts(optarg);
			break;
		case 'b':
			opt.best = true;
			break;
		case 'c':
			opt.csv = true;
			break;
		case 'P':
			opt.pin = false;
			break;
		case 'F':
			opt.fabtests = true;
			break;
		case 'v':
			opt.verbose = true;
			break;
		case 'h':
			usage(stdout);
			exit(0);
		default:
			usage(stderr);
			exit(2);
		}
	}
	if (optind < argc) {
		fprintf(stderr, "%s: unexpected argument '%s'\n", BENCH_NAME, argv[optind]);
		usage(stderr);
		exit(2);
	}
	if (!opt.nprovs)
		parse_providers(default_provs);
	if (opt.quick && !repeats_set)
		opt.repeats = 1;
	/* --match alone is the matching tests alone; --tagged brings them unless --no-match */
	opt.run_msg = tagged || !match;
	opt.run_tagged = tagged;
	opt.run_match = match || (tagged && !no_match);
	return;
bad:
	fprintf(stderr, "%s: bad value '%s' for -%c\n", BENCH_NAME, optarg, c);
	usage(stderr);
	exit(2);
}

static void add_test(enum test_api api, enum test_kind kind, size_t size)
{
	struct test *t = &tests[ntests++];
	size_t div = opt.quick ? 10 : 1;

	t->api = api;
	t->kind = kind;
	t->size = size;
	if (kind == KIND_LAT) {
		t->iters = clamp_size(LAT_BUDGET / size, LAT_MIN_ITERS, LAT_MAX_ITERS) / div;
		if (opt.iters)
			t->iters = opt.iters;
		t->warmup = clamp_size(t->iters / 10, 2, 1000);
	} else {
		size_t min = 4 * opt.window;

		t->iters = clamp_size(BW_BUDGET / div / size, min, BW_MAX_MSGS / div);
		if (opt.iters)
			t->iters = opt.iters;
		/* warmup is counted in windows */
		t->warmup = clamp_size(t->iters / opt.window / 10, 1, 100);
	}
	if (!t->iters)
		t->iters = 1;
}

/* A matching test: rounds of n messages, as many as the message budget takes. */
static void add_match_test(enum test_kind kind, size_t n)
{
	struct test *t = &tests[ntests++];
	size_t budget = opt.iters ? opt.iters : MATCH_BUDGET / (opt.quick ? 10 : 1);

	t->api = API_TAGGED;
	t->kind = kind;
	t->size = MATCH_MSG_SIZE;
	t->count = n;
	t->iters = (budget + n - 1) / n;
	/* warmup is counted in rounds; one at least, so the first round's setup is not timed */
	t->warmup = clamp_size(t->iters / 10, 1, 100);
}

static void add_api_tests(enum test_api api)
{
	if (opt.nsizes) {
		for (int i = 0; i < opt.nsizes; i++)
			add_test(api, KIND_LAT, opt.sizes[i]);
		for (int i = 0; i < opt.nsizes; i++)
			add_test(api, KIND_BW, opt.sizes[i]);
		return;
	}
	for (size_t i = 0; i < ARRAY_SIZE(default_lat_sizes); i++)
		add_test(api, KIND_LAT, default_lat_sizes[i]);
	for (size_t i = 0; i < ARRAY_SIZE(default_bw_sizes); i++)
		add_test(api, KIND_BW, default_bw_sizes[i]);
}

static void build_tests(void)
{
	const size_t *counts = opt.ncounts ? opt.counts : default_counts;
	size_t ncounts = opt.ncounts ? (size_t) opt.ncounts : ARRAY_SIZE(default_counts);

	if (opt.run_msg)
		add_api_tests(API_MSG);
	if (opt.run_tagged)
		add_api_tests(API_TAGGED);
	for (int k = 0; opt.run_match && k < 2; k++)
		for (size_t i = 0; i < ncounts; i++)
			add_match_test(k ? KIND_UNEXP : KIND_MATCH, counts[i]);
}

/* Sets up bench_run for the runs of test t in repeat r. */
static void set_run(int t, int r)
{
	bool matching = is_match_kind(tests[t].kind);
	int first = -1;

	bench_run.test = t;
	bench_run.matching = matching;
	bench_run.max_count = 0;
	/* one buffer each way holds the largest message, or a round's messages and a signal */
	bench_run.buf_size = ACK_SIZE;
	for (int i = 0; i < ntests; i++) {
		size_t need = tests[i].size;

		if (is_match_kind(tests[i].kind) != matching)
			continue;
		if (first < 0)
			first = i;
		if (matching) {
			need = (tests[i].count + 1) * MATCH_MSG_SIZE;
			if (tests[i].count > bench_run.max_count)
				bench_run.max_count = tests[i].count;
		}
		if (need > bench_run.buf_size)
			bench_run.buf_size = need;
	}
	bench_run.is_first = r == 0 && t == first;
}

/* The first two CPUs we may run on; with fewer, nobody is pinned. */
static void choose_cpus(void)
{
	int found = bench_allowed_cpus(bench_cpus, 2);

	if (found < 0)
		return;
	if (found < 2) {
		bench_yield_idle = true;
		fprintf(stderr,
			"%s: only one CPU available: processes not pinned, and they yield "
			"the CPU while waiting\n",
			BENCH_NAME);
	}
	if (found < 2 || !opt.pin)
		bench_cpus[0] = bench_cpus[1] = -1;
}

int main(int argc, char **argv)
{
	int nran = 0;

	parse_options(argc, argv);
	build_tests();
	choose_cpus();
	/* a client killed mid-run leaves its server to us, so we can reap it */
	if (prctl(PR_SET_CHILD_SUBREAPER, 1))
		perror(BENCH_NAME ": PR_SET_CHILD_SUBREAPER");

	/*
	 * Providers alternate test by test within every repeat, so drifts and bursts of load hit
	 * all of them alike; each run is one test in fresh processes.
	 */
	for (int r = 0; r < opt.repeats; r++) {
		for (int t = 0; t < ntests; t++) {
			set_run(t, r);
			for (int p = 0; p < opt.nprovs; p++)
				if (!prov_unavail[p] && !prov_failed[p] && !test_skipped(p, t))
					run_once(p, r);
		}
	}

	print_table();
	for (int p = 0; p < opt.nprovs; p++)
		nran += prov_ran[p];
	if (!nran)
		fprintf(stderr, "%s: no provider ran\n", BENCH_NAME);
	return nran ? 0 : 1;
}
