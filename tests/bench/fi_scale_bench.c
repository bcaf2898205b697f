/*
 * fi_scale_bench: one server endpoint and N peers. How long the N take to connect, what each
 * costs the server in memory and descriptors, and the latency of one awake peer beside N - 1
 * idle ones; providers side by side in one run, with the ratio of each to the first. With
 * --churn: peers connecting and leaving, cycle after cycle, and whether the server gets back
 * to what it held before.
 *
 * Process model, as fi_layer_bench's. The main process never calls into libfabric (but for
 * fi_version(), which initialises no provider): a provider under development may crash or
 * hang, and that must cost one cell, not the table. For every (repeat, N, provider) run it
 * forks the server (scale_bench_server.c), one client process holding the awake peer, and up
 * to -P client processes holding the N - 1 idle ones (scale_bench_client.c), each with a
 * command pipe and a record pipe to the main process (scale_bench_procs.c). The providers take
 * turns run by run, so that a burst of load from elsewhere on the machine lands on all of them
 * alike; scale_bench_report.c prints the tables.
 *
 * Everything is bounded: every child dies with the main process (PR_SET_PDEATHSIG), carries
 * an alarm(), and the main process gives up on a run past its timeout, kills whatever is left
 * of it and reaps it before the next one. No child forks, so the main process reaps them all.
 */
#include "config.h"

#include <getopt.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "scale_bench.h"

struct scale_opts opt;

/* ---------------------------------------------------------------- results */

/* What the runs found; scale_bench_report.c prints it. */
struct cell cells[SCALE_MAX_COUNTS][SCALE_MAX_PROVS];
bool prov_unavail[SCALE_MAX_PROVS];

struct churn_row churn_rows[SCALE_MAX_PROVS][SCALE_MAX_CYCLES + 1];
unsigned churn_done[SCALE_MAX_PROVS]; /* cycles completed */
bool churn_failed[SCALE_MAX_PROVS];
bool churn_started[SCALE_MAX_PROVS]; /* the baseline came */

int bench_cpus[2] = {-1, -1}; /* the server's and the awake client's */
int ncpus;
static rlim_t fd_limit;

/* ---------------------------------------------------------------- one measurement run */

/* The descriptors N needs, against the limit; false (said once per N) when out of reach. */
static bool fds_suffice(size_t npeers, size_t per_proc, bool say)
{
	size_t server = SCALE_FDS_PER_SERVER_PEER * npeers + SCALE_FDS_SPARE;
	size_t client = SCALE_FDS_PER_CLIENT_PEER * per_proc + SCALE_FDS_SPARE;

	if (fd_limit == RLIM_INFINITY || (server <= fd_limit && client <= fd_limit))
		return true;
	if (say)
		fprintf(stderr,
			"%s: N=%zu needs about %zu open files in the server and %zu in a client "
			"process of %zu peers, but RLIMIT_NOFILE is %llu (raised to the hard "
			"limit; see ulimit -Hn): marked \"fail (fd limit)\"%s\n",
			SCALE_NAME, npeers, server, client, per_proc, (unsigned long long) fd_limit,
			client > fd_limit ? "; more client processes (-P) would help" : "");
	return false;
}

static size_t ceil_div(size_t a, size_t b)
{
	return b ? (a + b - 1) / b : 0;
}

/* The server forked and enabled (its record in *server), its address in run for the clients. */
static int start_server(double deadline, char *why, size_t len, struct kid **server)
{
	struct kid *k;
	int ret;

	k = spawn(KID_SERVER, 0, 0);
	if (!k)
		return AWAIT_FAIL;
	ret = await(T_SERVER, REC_ADDR, deadline, why, len);
	if (ret)
		return ret;
	run.server_addrlen = k->rec.addrlen;
	memcpy(run.server_addr, k->rec.addr, sizeof(run.server_addr));
	*server = k;
	return AWAIT_OK;
}

/*
 * The peers leave: the server first hears that they will (what they leave on its CQ is then
 * no failure; its REC_LEAVING record holds its fds with them all there), then they close and
 * exit. The server stays.
 */
static int peers_leave(double deadline, char *why, size_t len)
{
	int ret;

	ret = send_cmd(T_SERVER, CMD_LEAVING, why, len);
	if (!ret)
		ret = await(T_SERVER, REC_LEAVING, deadline, why, len);
	if (!ret)
		ret = send_cmd(T_CLIENTS, CMD_EXIT, why, len);
	if (!ret)
		ret = await_exit(T_CLIENTS, deadline, why, len);
	return ret;
}

/* The peers leave, then the server closes. */
static int teardown(double deadline, char *why, size_t len)
{
	int ret;

	ret = peers_leave(deadline, why, len);
	if (!ret)
		ret = send_cmd(T_SERVER, CMD_STOP, why, len);
	if (!ret)
		ret = await_exit(T_SERVER, deadline, why, len);
	return ret;
}

enum run_result { RUN_OK, RUN_FAIL, RUN_UNAVAIL };

static int run_measure_steps(size_t n, double fig[NFIGS], double deadline, char *why, size_t len)
{
	struct kid *server, *awake = NULL;
	double base_rss, base_fds, conn, lat[SCALE_BATCHES];
	int ret;

	ret = start_server(deadline, why, len, &server);
	if (ret)
		return ret;
	base_rss = server->rec.v[V_RSS];
	base_fds = server->rec.v[V_FDS];
	if (spawn_clients(n, true))
		return AWAIT_FAIL;
	for (int i = 0; i < nkids; i++)
		if (kids[i].kind == KID_AWAKE)
			awake = &kids[i];

	conn = connect_clients(deadline, why, len);
	if (conn < 0)
		return (int) conn;
	fig[FIG_CONN] = conn;
	ret = send_cmd(T_SERVER, CMD_MEASURE, why, len);
	if (!ret)
		ret = await(T_SERVER, REC_MEASURED, deadline, why, len);
	if (ret)
		return ret;
	fig[FIG_KIB] = (server->rec.v[V_RSS] - base_rss) / 1024 / (double) n;
	fig[FIG_FDS] = (server->rec.v[V_FDS] - base_fds) / (double) n;
	ret = send_cmd(T_AWAKE, CMD_PING, why, len);
	if (!ret)
		ret = await(T_AWAKE, REC_LATENCY, deadline, why, len);
	if (ret)
		return ret;
	memcpy(lat, awake->rec.v, sizeof(lat));
	fig[FIG_LAT] = bench_median(lat, SCALE_BATCHES);
	if (teardown(deadline, why, len))
		/* the figures stand; a close that fails now may not fail next time */
		fprintf(stderr, "%s: N=%zu %s: measured, but the teardown failed: %s\n", SCALE_NAME,
			n, run.prov, why);
	return AWAIT_OK;
}

static enum run_result run_measure(int p, size_t n, double fig[NFIGS], char *why, size_t len)
{
	/* the children's alarms fire first; this only catches what they cannot */
	double deadline = now_us() + (opt.timeout + 10) * 1e6;
	int ret;

	memset(&run, 0, sizeof(run));
	run.prov = opt.provs[p];
	run.npeers = n;
	snprintf(why, len, "could not start its processes");
	ret = run_measure_steps(n, fig, deadline, why, len);
	end_all();
	return ret == AWAIT_OK ? RUN_OK : ret == AWAIT_UNAVAIL ? RUN_UNAVAIL : RUN_FAIL;
}

static void note_unavail(int p, const char *why)
{
	prov_unavail[p] = true;
	fprintf(stderr, "%s: %s: not available: %s (FI_PROVIDER_PATH=%s)\n", SCALE_NAME,
		opt.provs[p], why,
		getenv("FI_PROVIDER_PATH") ? getenv("FI_PROVIDER_PATH") : "unset");
}

static void measure_all(void)
{
	bool said[SCALE_MAX_COUNTS] = {false};
	char why[256];
	double fig[NFIGS];

	/* providers take turns run by run, so drifts and bursts of load hit all of them alike */
	for (int r = 0; r < opt.repeats; r++) {
		for (int ni = 0; ni < opt.ncounts; ni++) {
			size_t n = opt.counts[ni], idle = n - 1;
			size_t procs = idle < opt.procs ? idle : opt.procs;

			for (int p = 0; p < opt.nprovs; p++) {
				struct cell *c = &cells[ni][p];

				if (prov_unavail[p] || c->state != CELL_OK)
					continue;
				if (!fds_suffice(n, ceil_div(idle, procs), !said[ni])) {
					said[ni] = true;
					c->state = CELL_FD_LIMIT;
					continue;
				}
				switch (run_measure(p, n, fig, why, sizeof(why))) {
				case RUN_OK:
					c->repeat[c->nsamples] = r;
					memcpy(c->v[c->nsamples++], fig, sizeof(fig));
					if (opt.verbose)
						fprintf(stderr,
							"%s: repeat %d N=%zu %s: %.4f s, "
							"%.1f KiB/peer, %.2f fds/peer, %.2f us\n",
							SCALE_NAME, r + 1, n, opt.provs[p],
							fig[FIG_CONN], fig[FIG_KIB], fig[FIG_FDS],
							fig[FIG_LAT]);
					break;
				case RUN_UNAVAIL:
					note_unavail(p, why);
					break;
				case RUN_FAIL:
					c->state = CELL_FAILED;
					fprintf(stderr,
						"%s: repeat %d N=%zu %s: failed (%s); not run "
						"again\n",
						SCALE_NAME, r + 1, n, opt.provs[p], why);
					break;
				}
			}
		}
	}
}

/* ---------------------------------------------------------------- churn */

static int churn_steps(int p, size_t n, char *why, size_t len)
{
	struct kid *server;
	double deadline = now_us() + (opt.timeout + 10) * 1e6;
	int ret;

	ret = start_server(deadline, why, len, &server);
	if (ret)
		return ret;
	churn_rows[p][0].fds = server->rec.v[V_FDS];
	churn_rows[p][0].rss = server->rec.v[V_RSS];
	churn_started[p] = true;

	for (unsigned c = 1; c <= opt.churn; c++) {
		struct churn_row *row = &churn_rows[p][c];
		double conn;

		deadline = now_us() + (opt.timeout + SCALE_SETTLE_S + 10) * 1e6;
		if (spawn_clients(n, false))
			return AWAIT_FAIL;
		conn = connect_clients(deadline, why, len);
		if (conn < 0)
			return (int) conn;
		row->conn_s = conn;
		/* the clients close their endpoints and exit; then the server removes them */
		ret = peers_leave(deadline, why, len);
		if (ret)
			return ret;
		row->fds_conn = server->rec.v[V_FDS]; /* its REC_LEAVING: no record came since */
		nkids = 1; /* the server stays; the clients are reaped, their pipes closed */
		ret = send_cmd(T_SERVER, CMD_REMOVE, why, len);
		if (!ret)
			ret = await(T_SERVER, REC_CYCLE, deadline, why, len);
		if (ret)
			return ret;
		row->fds = server->rec.v[V_FDS];
		row->rss = server->rec.v[V_RSS];
		row->cq_errors = server->rec.v[V_CQ_ERRORS];
		row->settle_s = server->rec.v[V_SETTLE_S];
		churn_done[p] = c;
		if (opt.verbose)
			fprintf(stderr,
				"%s: %s cycle %u: %.4f s, fds %.0f connected, %.0f after, "
				"RSS %.0f KiB\n",
				SCALE_NAME, opt.provs[p], c, conn, row->fds_conn, row->fds,
				row->rss / 1024);
	}
	deadline = now_us() + (opt.timeout + 10) * 1e6;
	ret = send_cmd(T_SERVER, CMD_STOP, why, len);
	if (!ret && await_exit(T_SERVER, deadline, why, len))
		fprintf(stderr, "%s: %s: churn measured, but the server's close failed: %s\n",
			SCALE_NAME, opt.provs[p], why);
	return AWAIT_OK;
}

static void churn_all(void)
{
	size_t n = opt.counts[0];
	size_t procs = n < opt.procs ? n : opt.procs;
	char why[256];

	for (int p = 0; p < opt.nprovs; p++) {
		int ret;

		if (!fds_suffice(n, ceil_div(n, procs), true)) {
			churn_failed[p] = true;
			continue;
		}
		memset(&run, 0, sizeof(run));
		run.prov = opt.provs[p];
		run.npeers = n;
		run.cycles = opt.churn;
		snprintf(why, sizeof(why), "could not start its processes");
		ret = churn_steps(p, n, why, sizeof(why));
		end_all();
		if (ret == AWAIT_UNAVAIL) {
			note_unavail(p, why);
		} else if (ret) {
			churn_failed[p] = true;
			fprintf(stderr, "%s: %s: churn cycle %u failed (%s)\n", SCALE_NAME,
				opt.provs[p], churn_done[p] + 1, why);
		}
	}
}

/* ---------------------------------------------------------------- options */

static void usage(FILE *out)
{
	fprintf(out,
		"usage: %s [options]\n"
		"One server endpoint and N peers over 127.0.0.1: connection time, the server's\n"
		"memory and fds per peer, and the latency of one awake peer beside N-1 idle ones;\n"
		"providers side by side, with the ratio of each to the first.\n"
		"\n"
		"  -p, --providers LIST  comma-separated providers (default \"%s\");\n"
		"                        a name without ';' is a core provider's own FI_EP_RDM\n"
		"  -n, --peers LIST      peer counts N, 1 to %d (default %s)\n"
		"  -P, --procs N         idle client processes at most (default %d)\n"
		"  -r, --repeats N       runs per provider and N, alternating providers (default "
		"%d)\n"
		"  -i, --iters N         timed ping-pong round trips, in %d batches (default %d)\n"
		"  -t, --timeout SEC     give up on a run (churn: a cycle) after SEC s (default "
		"%d)\n"
		"      --churn CYCLES    peers connect and leave CYCLES times (one N); does the\n"
		"                        server get its fds and memory back?\n"
		"  -c, --csv             print the table as CSV\n"
		"      --no-pin          do not pin the server and the awake client to CPUs\n"
		"  -v, --verbose         print every run's figures on stderr\n"
		"  -h, --help            this text\n",
		SCALE_NAME, SCALE_DEFAULT_PROVS, SCALE_MAX_PEERS, SCALE_DEFAULT_COUNTS,
		SCALE_DEFAULT_PROCS, SCALE_DEFAULT_REPEATS, SCALE_BATCHES, SCALE_DEFAULT_ITERS,
		SCALE_DEFAULT_TIMEOUT);
}

/* What is wrong with the options, and where to read about them; exit status 2. */
static void __attribute__((noreturn, format(printf, 1, 2))) bad_usage(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "%s: ", SCALE_NAME);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\n(%s -h for the options)\n", SCALE_NAME);
	exit(2);
}

static void parse_providers(char *list)
{
	opt.nprovs = bench_split_list(list, opt.provs, SCALE_MAX_PROVS);
	if (opt.nprovs < 0)
		bad_usage("-p: at most %d providers", SCALE_MAX_PROVS);
	if (!opt.nprovs)
		bad_usage("-p: empty provider list");
	for (int p = 0; p < opt.nprovs; p++)
		if (strlen(opt.provs[p]) >= SCALE_PROV_LEN)
			bad_usage("-p: provider name too long: %s", opt.provs[p]);
}

static void parse_counts(char *list)
{
	const char *item[SCALE_MAX_COUNTS];
	unsigned long v;

	opt.ncounts = bench_split_list(list, item, SCALE_MAX_COUNTS);
	if (opt.ncounts < 0)
		bad_usage("-n: at most %d peer counts", SCALE_MAX_COUNTS);
	if (!opt.ncounts)
		bad_usage("-n: empty list of peer counts");
	for (int i = 0; i < opt.ncounts; i++) {
		if (!bench_parse_ulong(item[i], 1, SCALE_MAX_PEERS, &v))
			bad_usage("-n: '%s' is not a peer count from 1 to %d", item[i],
				  SCALE_MAX_PEERS);
		opt.counts[i] = v;
	}
}

static unsigned long parse_num(const char *name, const char *s, unsigned long min,
			       unsigned long max)
{
	unsigned long v;

	if (!bench_parse_ulong(s, min, max, &v))
		bad_usage("%s: '%s' is not a number from %lu to %lu", name, s, min, max);
	return v;
}

static void parse_options(int argc, char **argv)
{
	enum { OPT_CHURN = 256, OPT_NO_PIN };
	static const struct option longopts[] = {
		{"providers", required_argument, NULL, 'p'},
		{"peers", required_argument, NULL, 'n'},
		{"procs", required_argument, NULL, 'P'},
		{"repeats", required_argument, NULL, 'r'},
		{"iters", required_argument, NULL, 'i'},
		{"timeout", required_argument, NULL, 't'},
		{"churn", required_argument, NULL, OPT_CHURN},
		{"csv", no_argument, NULL, 'c'},
		{"no-pin", no_argument, NULL, OPT_NO_PIN},
		{"verbose", no_argument, NULL, 'v'},
		{"help", no_argument, NULL, 'h'},
		{0},
	};
	static char default_provs[] = SCALE_DEFAULT_PROVS;
	static char default_counts[] = SCALE_DEFAULT_COUNTS;
	bool counts_set = false, repeats_set = false, iters_set = false;
	int c;

	opt.procs = SCALE_DEFAULT_PROCS;
	opt.repeats = SCALE_DEFAULT_REPEATS;
	opt.iters = SCALE_DEFAULT_ITERS;
	opt.timeout = SCALE_DEFAULT_TIMEOUT;
	opt.pin = true;
	while ((c = getopt_long(argc, argv, "p:n:P:r:i:t:cvh", longopts, NULL)) != -1) {
		switch (c) {
		case 'p':
			parse_providers(optarg);
			break;
		case 'n':
			parse_counts(optarg);
			counts_set = true;
			break;
		case 'P':
			opt.procs = parse_num("-P", optarg, 1, SCALE_MAX_PROCS);
			break;
		case 'r':
			opt.repeats = (int) parse_num("-r", optarg, 1, SCALE_MAX_REPEATS);
			repeats_set = true;
			break;
		case 'i':
			opt.iters = parse_num("-i", optarg, SCALE_BATCHES, 100000000);
			iters_set = true;
			break;
		case 't':
			opt.timeout = (unsigned) parse_num("-t", optarg, 1, 3600);
			break;
		case OPT_CHURN:
			opt.churn = (unsigned) parse_num("--churn", optarg, 1, SCALE_MAX_CYCLES);
			break;
		case 'c':
			opt.csv = true;
			break;
		case OPT_NO_PIN:
			opt.pin = false;
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
	if (optind < argc)
		bad_usage("unexpected argument '%s'", argv[optind]);
	if (!opt.nprovs)
		parse_providers(default_provs);
	if (!counts_set)
		parse_counts(default_counts);
	if (opt.churn) {
		if (!counts_set || opt.ncounts != 1)
			bad_usage("--churn takes one peer count: -n N");
		if (repeats_set)
			bad_usage("-r does not apply to --churn: each provider runs its cycles "
				  "once");
		if (iters_set)
			bad_usage("-i does not apply to --churn: it measures no latency");
	}
}

/* The first two CPUs we may run on, for the server and the awake client. */
static void choose_cpus(void)
{
	ncpus = bench_allowed_cpus(bench_cpus, 2);
	if (ncpus < 2 || !opt.pin)
		bench_cpus[0] = bench_cpus[1] = -1;
	if (ncpus < 0)
		ncpus = (int) sysconf(_SC_NPROCESSORS_ONLN);
}

/*
 * libinfinipath, which libfabric's psm provider links in, installs a handler of its own when it
 * loads, before main(), on SIGSEGV, SIGBUS, SIGILL, SIGABRT, SIGINT and SIGTERM, and it exits
 * with status 1: a child's crash would read as "exit status 1", and an interrupted benchmark
 * would exit quietly (even from a shell that had SIGINT ignored). The defaults back, inherited by
 * every child.
 */
static void restore_signals(void)
{
	static const int sigs[] = {SIGSEGV, SIGBUS, SIGILL, SIGABRT, SIGINT, SIGTERM};

	for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
		signal(sigs[i], SIG_DFL);
}

int main(int argc, char **argv)
{
	bool any = false;

	restore_signals();
	parse_options(argc, argv);
	choose_cpus();
	main_pid = getpid();
	/* a child gone makes its command pipe fail with EPIPE, which the run reports */
	signal(SIGPIPE, SIG_IGN);
	fd_limit = raise_fd_limit();

	if (opt.churn) {
		churn_all();
		print_churn_table();
		for (int p = 0; p < opt.nprovs; p++)
			any |= churn_done[p] > 0;
	} else {
		measure_all();
		print_measure_table();
		for (int ni = 0; ni < opt.ncounts; ni++)
			for (int p = 0; p < opt.nprovs; p++)
				any |= cells[ni][p].state == CELL_OK && cells[ni][p].nsamples &&
				       !prov_unavail[p];
	}
	if (!any)
		fprintf(stderr, "%s: no provider produced a figure\n", SCALE_NAME);
	return any ? 0 : 1;
}
