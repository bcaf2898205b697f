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
 * forks the server, one client process holding the awake peer, and up to -P client processes
 * holding the N - 1 idle ones (scale_bench_peer.c), each with a command pipe and a record
 * pipe to the main process. The providers take turns run by run, so that a burst of load
 * from elsewhere on the machine lands on all of them alike.
 *
 * Everything is bounded: every child dies with the main process (PR_SET_PDEATHSIG), carries
 * an alarm(), and the main process gives up on a run past its timeout, kills whatever is left
 * of it and reaps it before the next one. No child forks, so the main process reaps them all.
 */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "scale_bench.h"

struct scale_opts opt;

/* ---------------------------------------------------------------- results */

enum fig { FIG_CONN, FIG_KIB, FIG_FDS, FIG_LAT, NFIGS };

static const char *const fig_head[NFIGS] = {"conn_s", "KiB/peer", "fds/peer", "lat_us"};
static const char *const fig_csv[NFIGS] = {"conn_s", "KiB_per_peer", "fds_per_peer", "lat_us"};
static const char *const ratio_head[NFIGS] = {"conn_x", "KiB_x", "fds_x", "lat_x"};

enum cell_state { CELL_OK, CELL_NA, CELL_FAILED, CELL_FD_LIMIT };

/* One provider at one N, across repeats. */
struct cell {
	enum cell_state state;
	int nsamples;
	double v[SCALE_MAX_REPEATS][NFIGS];
	int repeat[SCALE_MAX_REPEATS]; /* the repeat each sample comes from */
};

static struct cell cells[SCALE_MAX_COUNTS][SCALE_MAX_PROVS];
static bool prov_unavail[SCALE_MAX_PROVS];

/* Churn: row 0 is the baseline, row c the state after cycle c. */
struct churn_row {
	double conn_s;
	double fds_conn; /* with the cycle's peers connected */
	double fds;
	double rss;
	double cq_errors;
	double settle_s;
};

static struct churn_row churn_rows[SCALE_MAX_PROVS][SCALE_MAX_CYCLES + 1];
static unsigned churn_done[SCALE_MAX_PROVS]; /* cycles completed */
static bool churn_failed[SCALE_MAX_PROVS];
static bool churn_started[SCALE_MAX_PROVS]; /* the baseline came */

static int bench_cpus[2] = {-1, -1}; /* the server's and the awake client's */
static int ncpus;
static rlim_t fd_limit;

/* ---------------------------------------------------------------- children */

enum kid_kind { KID_SERVER, KID_AWAKE, KID_IDLE };

struct kid {
	enum kid_kind kind;
	char role[32];
	pid_t pid;
	int cmd_fd; /* to the child; -1 once closed */
	int rep_fd; /* from the child; -1 once closed */
	bool reaped;
	int status;
	bool got; /* the record awaited came */
	double t_got;
	struct scale_rec rec;
};

/* The children of the run under way; the server, when there is one, first. */
static struct kid kids[SCALE_MAX_PROCS + 2];
static int nkids;
static struct scale_run run;
static pid_t main_pid;

/* The soft limit of open files raised to the hard one; the limit in force. */
static rlim_t raise_fd_limit(void)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl))
		return 1024;
	if (rl.rlim_cur != rl.rlim_max) {
		rlim_t cur = rl.rlim_cur;

		rl.rlim_cur = rl.rlim_max;
		if (setrlimit(RLIMIT_NOFILE, &rl))
			return cur;
	}
	return rl.rlim_cur;
}

static void close_fd(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

/* Forks one child of the run; NULL (said on stderr) when the system refuses. */
static struct kid *spawn(enum kid_kind kind, size_t nep, int index)
{
	struct kid *k = &kids[nkids];
	char role[sizeof(k->role)];
	int cmd[2], rep[2];
	pid_t pid;

	if (kind == KID_SERVER)
		snprintf(role, sizeof(role), "server");
	else if (kind == KID_AWAKE)
		snprintf(role, sizeof(role), "awake client");
	else
		snprintf(role, sizeof(role), "client %d", index);
	if (pipe(cmd)) {
		perror(SCALE_NAME ": pipe");
		return NULL;
	}
	if (pipe(rep)) {
		perror(SCALE_NAME ": pipe");
		close(cmd[0]);
		close(cmd[1]);
		return NULL;
	}
	fflush(NULL);
	pid = fork();
	if (pid < 0) {
		perror(SCALE_NAME ": fork");
		close(cmd[0]);
		close(cmd[1]);
		close(rep[0]);
		close(rep[1]);
		return NULL;
	}
	if (pid == 0) {
		/* a pipe end of another child's left open here would hide that child's death */
		close(cmd[1]);
		close(rep[0]);
		for (int i = 0; i < nkids; i++) {
			close_fd(&kids[i].cmd_fd);
			close_fd(&kids[i].rep_fd);
		}
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != main_pid)
			_exit(1);
		raise_fd_limit();
		bench_pin(SCALE_NAME, kind == KID_SERVER  ? bench_cpus[0]
				      : kind == KID_AWAKE ? bench_cpus[1]
							  : -1);
		alarm(opt.timeout);
		if (kind == KID_SERVER)
			_exit(scale_server_main(&run, cmd[0], rep[1]));
		_exit(scale_client_main(&run, role, nep, kind == KID_AWAKE, cmd[0], rep[1]));
	}
	close(cmd[0]);
	close(rep[1]);
	memset(k, 0, sizeof(*k));
	k->kind = kind;
	memcpy(k->role, role, sizeof(role));
	k->pid = pid;
	k->cmd_fd = cmd[1];
	k->rep_fd = rep[0];
	nkids++;
	return k;
}

static void describe_status(int status, char *buf, size_t len)
{
	if (WIFSIGNALED(status) && WTERMSIG(status) == SIGALRM)
		snprintf(buf, len, "timed out after %u s", opt.timeout);
	else if (WIFSIGNALED(status))
		snprintf(buf, len, "killed by signal %d (%s)", WTERMSIG(status),
			 strsignal(WTERMSIG(status)));
	else
		snprintf(buf, len, "exit status %d", WEXITSTATUS(status));
}

enum target { T_SERVER, T_CLIENTS, T_AWAKE };

static bool is_target(const struct kid *k, enum target t)
{
	switch (t) {
	case T_SERVER:
		return k->kind == KID_SERVER;
	case T_AWAKE:
		return k->kind == KID_AWAKE;
	default:
		return k->kind != KID_SERVER;
	}
}

static int send_cmd(enum target t, char cmd, char *why, size_t len)
{
	for (int i = 0; i < nkids; i++) {
		if (!is_target(&kids[i], t))
			continue;
		if (write_all(kids[i].cmd_fd, &cmd, 1)) {
			snprintf(why, len, "%s is gone", kids[i].role);
			return -1;
		}
	}
	return 0;
}

static const char *rec_name(int type)
{
	static const char *const names[] = {
		[REC_FAIL] = "a failure",	 [REC_UNAVAIL] = "unavailable",
		[REC_ADDR] = "its address",	 [REC_READY] = "ready",
		[REC_CONNECTED] = "connected",	 [REC_MEASURED] = "its measurement",
		[REC_LEAVING] = "its fd count",	 [REC_LATENCY] = "the latency",
		[REC_CYCLE] = "the cycle's end",
	};

	return type >= 0 && type <= REC_CYCLE ? names[type] : "?";
}

/* Blocks until the child exits, or kills it past the deadline. */
static void reap(struct kid *k, double deadline)
{
	while (!k->reaped) {
		pid_t r = waitpid(k->pid, &k->status, WNOHANG);

		if (r == k->pid || (r < 0 && errno != EINTR)) {
			k->reaped = true;
		} else if (now_us() >= deadline) {
			kill(k->pid, SIGKILL);
			deadline = now_us() + 60e6; /* SIGKILL cannot be refused */
		} else {
			usleep(1000);
		}
	}
}

enum { AWAIT_OK = 0, AWAIT_FAIL = -1, AWAIT_UNAVAIL = -2 };

/* One record from child k; AWAIT_OK when it is the one awaited. */
static int take_record(struct kid *k, enum target t, int want, double deadline, char *why,
		       size_t len)
{
	struct scale_rec rec;
	char how[96];

	if (read_all(k->rep_fd, &rec, sizeof(rec))) {
		/* its pipe closes only when it ends */
		close_fd(&k->rep_fd);
		reap(k, deadline);
		describe_status(k->status, how, sizeof(how));
		snprintf(why, len, "%s ended (%s)", k->role, how);
		return AWAIT_FAIL;
	}
	switch (rec.type) {
	case REC_FAIL:
		snprintf(why, len, "%s failed", k->role);
		return AWAIT_FAIL;
	case REC_UNAVAIL:
		rec.text[sizeof(rec.text) - 1] = '\0';
		snprintf(why, len, "%s", rec.text);
		return AWAIT_UNAVAIL;
	}
	if (!is_target(k, t) || rec.type != want || k->got) {
		snprintf(why, len, "%s sent %s out of turn", k->role, rec_name(rec.type));
		return AWAIT_FAIL;
	}
	k->got = true;
	k->t_got = now_us();
	k->rec = rec;
	return AWAIT_OK;
}

/*
 * Until every child the target names has sent a record of type want. Any other child that
 * ends or reports meanwhile fails the wait too: the run is broken.
 */
static int await(enum target t, int want, double deadline, char *why, size_t len)
{
	struct pollfd pfd[SCALE_MAX_PROCS + 2];
	int idx[SCALE_MAX_PROCS + 2];

	for (int i = 0; i < nkids; i++)
		if (is_target(&kids[i], t))
			kids[i].got = false;
	for (;;) {
		int missing = 0, n = 0, ret;
		double left = deadline - now_us();

		for (int i = 0; i < nkids; i++) {
			missing += is_target(&kids[i], t) && !kids[i].got;
			if (kids[i].rep_fd >= 0) {
				pfd[n] = (struct pollfd){.fd = kids[i].rep_fd, .events = POLLIN};
				idx[n++] = i;
			}
		}
		if (!missing)
			return AWAIT_OK;
		if (left <= 0) {
			snprintf(why, len, "timed out: %d %s without %s", missing,
				 t == T_CLIENTS ? "client processes" : "child", rec_name(want));
			return AWAIT_FAIL;
		}
		ret = poll(pfd, (nfds_t) n, (int) (left / 1000) + 1);
		if (ret < 0 && errno == EINTR)
			continue;
		if (ret < 0) {
			snprintf(why, len, "poll: %s", strerror(errno));
			return AWAIT_FAIL;
		}
		for (int j = 0; j < n; j++) {
			if (!pfd[j].revents)
				continue;
			ret = take_record(&kids[idx[j]], t, want, deadline, why, len);
			if (ret)
				return ret;
		}
	}
}

/* Until every child the target names has exited; AWAIT_FAIL when one did not exit 0. */
static int await_exit(enum target t, double deadline, char *why, size_t len)
{
	int ret = AWAIT_OK;

	for (int i = 0; i < nkids; i++) {
		struct kid *k = &kids[i];
		char how[96];

		if (!is_target(k, t))
			continue;
		reap(k, deadline);
		close_fd(&k->cmd_fd);
		close_fd(&k->rep_fd);
		if (ret == AWAIT_OK && (!WIFEXITED(k->status) || WEXITSTATUS(k->status))) {
			describe_status(k->status, how, sizeof(how));
			snprintf(why, len, "%s ended badly (%s)", k->role, how);
			ret = AWAIT_FAIL;
		}
	}
	return ret;
}

/* Every child of the run killed and reaped, every pipe closed. */
static void end_all(void)
{
	for (int i = 0; i < nkids; i++)
		if (!kids[i].reaped)
			kill(kids[i].pid, SIGKILL);
	for (int i = 0; i < nkids; i++) {
		reap(&kids[i], now_us() + 60e6);
		close_fd(&kids[i].cmd_fd);
		close_fd(&kids[i].rep_fd);
	}
	nkids = 0;
}

/* The N peers' client processes: the idle ones spread evenly. */
static int spawn_clients(size_t npeers, bool with_awake)
{
	size_t idle = npeers - with_awake;
	size_t procs = idle < opt.procs ? idle : opt.procs;

	if (with_awake && !spawn(KID_AWAKE, 1, 0))
		return -1;
	for (size_t i = 0; i < procs; i++)
		if (!spawn(KID_IDLE, idle / procs + (i < idle % procs), (int) i + 1))
			return -1;
	return 0;
}

/*
 * Connect the clients: all told "go" at once, done when the last says every hello of its
 * endpoints was answered. Returns the seconds between, or a negative AWAIT_*.
 */
static double connect_clients(double deadline, char *why, size_t len)
{
	double start, end = 0;
	int ret;

	ret = await(T_CLIENTS, REC_READY, deadline, why, len);
	if (ret)
		return ret;
	start = now_us();
	if (send_cmd(T_CLIENTS, CMD_GO, why, len))
		return AWAIT_FAIL;
	ret = await(T_CLIENTS, REC_CONNECTED, deadline, why, len);
	if (ret)
		return ret;
	for (int i = 0; i < nkids; i++)
		if (kids[i].kind != KID_SERVER && kids[i].t_got > end)
			end = kids[i].t_got;
	return (end - start) / 1e6;
}

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

/*
 * The peers leave: the server first hears that they will (what they leave on its CQ is then
 * no failure), then they close and exit, then the server closes.
 */
static int teardown(double deadline, char *why, size_t len)
{
	int ret;

	ret = send_cmd(T_SERVER, CMD_LEAVING, why, len);
	if (!ret)
		ret = await(T_SERVER, REC_LEAVING, deadline, why, len);
	if (!ret)
		ret = send_cmd(T_CLIENTS, CMD_EXIT, why, len);
	if (!ret)
		ret = await_exit(T_CLIENTS, deadline, why, len);
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

	server = spawn(KID_SERVER, 0, 0);
	if (!server)
		return AWAIT_FAIL;
	ret = await(T_SERVER, REC_ADDR, deadline, why, len);
	if (ret)
		return ret;
	base_rss = server->rec.v[V_RSS];
	base_fds = server->rec.v[V_FDS];
	run.server_addrlen = server->rec.addrlen;
	memcpy(run.server_addr, server->rec.addr, sizeof(run.server_addr));
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

	server = spawn(KID_SERVER, 0, 0);
	if (!server)
		return AWAIT_FAIL;
	ret = await(T_SERVER, REC_ADDR, deadline, why, len);
	if (ret)
		return ret;
	churn_rows[p][0].fds = server->rec.v[V_FDS];
	churn_rows[p][0].rss = server->rec.v[V_RSS];
	churn_started[p] = true;
	run.server_addrlen = server->rec.addrlen;
	memcpy(run.server_addr, server->rec.addr, sizeof(run.server_addr));

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
		ret = send_cmd(T_SERVER, CMD_LEAVING, why, len);
		if (!ret)
			ret = await(T_SERVER, REC_LEAVING, deadline, why, len);
		if (ret)
			return ret;
		row->fds_conn = server->rec.v[V_FDS];
		/* the clients close their endpoints and exit; then the server removes them */
		ret = send_cmd(T_CLIENTS, CMD_EXIT, why, len);
		if (!ret)
			ret = await_exit(T_CLIENTS, deadline, why, len);
		if (ret)
			return ret;
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

/* ---------------------------------------------------------------- tables */

#define CELL_LEN 40
#define MAX_COLS 10 /* the measurement table's, the churn table's */

/* Columns aligned (those in left_cols to the left), or comma-separated with --csv. */
static void print_rows(char (*text)[MAX_COLS][CELL_LEN], int nrows, int ncols, unsigned left_cols)
{
	size_t width[MAX_COLS] = {0};

	for (int r = 0; r < nrows; r++)
		for (int c = 0; c < ncols; c++)
			if (strlen(text[r][c]) > width[c])
				width[c] = strlen(text[r][c]);
	for (int r = 0; r < nrows; r++) {
		for (int c = 0; c < ncols; c++) {
			if (opt.csv)
				printf("%s%s", text[r][c], c + 1 < ncols ? "," : "");
			else if (left_cols & (1u << c))
				printf("%s%-*s", c ? "  " : "", (int) width[c], text[r][c]);
			else
				printf("%s%*s", c ? "  " : "", (int) width[c], text[r][c]);
		}
		printf("\n");
	}
}

static void print_first_line(void)
{
	printf("# %s %s, libfabric %u.%u, %d CPUs", SCALE_NAME, PACKAGE_VERSION,
	       FI_MAJOR(fi_version()), FI_MINOR(fi_version()), ncpus);
	if (opt.churn)
		printf(": churn, %u cycles of %zu peers\n", opt.churn, opt.counts[0]);
	else
		printf(": median of %d repeat%s, providers alternating run by run\n", opt.repeats,
		       opt.repeats == 1 ? "" : "s");
}

static bool fig_median(int ni, int p, int f, double *out)
{
	const struct cell *c = &cells[ni][p];
	double v[SCALE_MAX_REPEATS];

	if (prov_unavail[p] || c->state != CELL_OK || !c->nsamples)
		return false;
	for (int i = 0; i < c->nsamples; i++)
		v[i] = c->v[i][f];
	*out = bench_median(v, c->nsamples);
	return true;
}

/*
 * Provider p over the first: the median of the ratios of the two runs of each repeat, which
 * ran one after the other, so that a slow phase of the machine shifts both sides alike.
 */
static bool fig_ratio(int ni, int p, int f, double *out)
{
	const struct cell *a = &cells[ni][0], *b = &cells[ni][p];
	double r[SCALE_MAX_REPEATS];
	int n = 0;
	double unused;

	if (!fig_median(ni, 0, f, &unused) || !fig_median(ni, p, f, &unused))
		return false;
	for (int i = 0; i < b->nsamples; i++)
		for (int j = 0; j < a->nsamples; j++)
			if (a->repeat[j] == b->repeat[i] && a->v[j][f] > 0)
				r[n++] = b->v[i][f] / a->v[j][f];
	if (!n)
		return false;
	*out = bench_median(r, n);
	return true;
}

static void format_fig(int ni, int p, int f, char *buf)
{
	static const char *const fmt[NFIGS] = {"%.4f", "%.1f", "%.2f", "%.2f"};
	const struct cell *c = &cells[ni][p];
	double m;

	if (fig_median(ni, p, f, &m))
		snprintf(buf, CELL_LEN, fmt[f], m);
	else if (prov_unavail[p])
		snprintf(buf, CELL_LEN, "n/a");
	else if (c->state == CELL_FD_LIMIT)
		snprintf(buf, CELL_LEN, f == FIG_CONN ? "fail (fd limit)" : "fail");
	else
		snprintf(buf, CELL_LEN, "fail");
}

static void print_measure_legend(void)
{
	printf("# one server endpoint (FI_EP_RDM, FI_MSG|FI_TAGGED, FI_AV_TABLE) and N peers, "
	       "each a client endpoint: one awake, N-1 idle in up to %zu processes\n",
	       opt.procs);
	printf("# conn_s: from \"go\" to the last peer's hello answered; KiB/peer, fds/peer: "
	       "the server's RSS (after malloc_trim(0)) and open fds, all N connected less none, "
	       "over N\n");
	printf("# lat_us: 8-byte tagged ping-pong with the awake peer beside the idle ones, half "
	       "the round trip, median of %d batches of %zu\n",
	       SCALE_BATCHES, opt.iters / SCALE_BATCHES);
	if (bench_cpus[0] >= 0)
		printf("# server on CPU %d, awake client on CPU %d, idle clients not pinned\n",
		       bench_cpus[0], bench_cpus[1]);
	else
		printf("# not pinned\n");
	if (opt.nprovs > 1)
		printf("# conn_x .. lat_x: the figure over %s's (median of the per-repeat "
		       "ratios); above 1: slower, or more per peer\n",
		       opt.provs[0]);
}

static void print_measure_table(void)
{
	int ncols = 2 + NFIGS + (opt.nprovs > 1 ? NFIGS : 0);
	int nrows = 1 + opt.ncounts * opt.nprovs, row = 1;
	char(*text)[MAX_COLS][CELL_LEN] = calloc((size_t) nrows, sizeof(*text));

	if (!text) {
		perror(SCALE_NAME);
		exit(1);
	}
	snprintf(text[0][0], CELL_LEN, "N");
	snprintf(text[0][1], CELL_LEN, "provider");
	for (int f = 0; f < NFIGS; f++) {
		snprintf(text[0][2 + f], CELL_LEN, "%s", opt.csv ? fig_csv[f] : fig_head[f]);
		if (opt.nprovs > 1)
			snprintf(text[0][2 + NFIGS + f], CELL_LEN, "%s", ratio_head[f]);
	}
	for (int ni = 0; ni < opt.ncounts; ni++) {
		for (int p = 0; p < opt.nprovs; p++, row++) {
			snprintf(text[row][0], CELL_LEN, "%zu", opt.counts[ni]);
			snprintf(text[row][1], CELL_LEN, "%s", opt.provs[p]);
			for (int f = 0; f < NFIGS; f++) {
				char *cell = text[row][2 + NFIGS + f];
				double r;

				format_fig(ni, p, f, text[row][2 + f]);
				if (opt.nprovs == 1)
					continue;
				if (p == 0)
					snprintf(cell, CELL_LEN, "-");
				else if (fig_ratio(ni, p, f, &r))
					snprintf(cell, CELL_LEN, "%.2f", r);
				else
					snprintf(cell, CELL_LEN, "n/a");
			}
		}
	}
	print_first_line();
	if (!opt.csv)
		print_measure_legend();
	print_rows(text, nrows, ncols, 1u << 1);
	free(text);
}

static void churn_verdict(int p)
{
	const struct churn_row *base = &churn_rows[p][0], *last = &churn_rows[p][churn_done[p]];
	double fds_x = base->fds > 0 ? last->fds / base->fds : 0;
	double rss_x = base->rss > 0 ? last->rss / base->rss : 0;
	bool within = fds_x >= 0.9 && fds_x <= 1.1 && rss_x >= 0.9 && rss_x <= 1.1;

	if (prov_unavail[p]) {
		printf("# %s: not available\n", opt.provs[p]);
		return;
	}
	if (!churn_done[p]) {
		printf("# %s: no cycle completed\n", opt.provs[p]);
		return;
	}
	printf("# %s: after cycle %u%s, fds %.0f (%.2fx) and RSS %.0f KiB (%.2fx) of the "
	       "baseline: %s",
	       opt.provs[p], churn_done[p], churn_failed[p] ? " (the next failed)" : "", last->fds,
	       fds_x, last->rss / 1024, rss_x, within ? "both within 10%" : "NOT both within 10%");
	/* what the first cycle left may be kept for reuse; what later cycles add is a leak */
	if (churn_done[p] > 1)
		printf("; RSS %+.0f KiB from cycle 1 to %u",
		       (last->rss - churn_rows[p][1].rss) / 1024, churn_done[p]);
	printf("\n");
}

static void print_churn_table(void)
{
	static const char *const head[] = {"provider",	"cycle",   "conn_s",  "fds_conn",
					   "fds",	"fds_x",   "RSS_KiB", "RSS_x",
					   "cq_errors", "settle_s"};
	int ncols = (int) (sizeof(head) / sizeof(head[0]));
	int nrows = 1 + opt.nprovs * (int) (opt.churn + 2), row = 1;
	char(*text)[MAX_COLS][CELL_LEN] = calloc((size_t) nrows, sizeof(*text));

	if (!text) {
		perror(SCALE_NAME);
		exit(1);
	}
	for (int c = 0; c < ncols; c++)
		snprintf(text[0][c], CELL_LEN, "%s", head[c]);
	for (int p = 0; p < opt.nprovs; p++) {
		const struct churn_row *base = &churn_rows[p][0];
		/* the baseline, the cycles done, and the one that failed, if one did */
		unsigned last = churn_done[p] + (churn_failed[p] && churn_done[p] < opt.churn);

		for (unsigned c = 0; c <= last; c++) {
			const struct churn_row *cr = &churn_rows[p][c];
			char(*t)[CELL_LEN] = text[row++];
			bool none = prov_unavail[p] || c > churn_done[p] || !churn_started[p];

			snprintf(t[0], CELL_LEN, "%s", opt.provs[p]);
			if (c == 0)
				snprintf(t[1], CELL_LEN, "base");
			else
				snprintf(t[1], CELL_LEN, "%u", c);
			for (int k = 2; k < ncols; k++)
				snprintf(t[k], CELL_LEN, "-");
			if (none) {
				snprintf(t[2], CELL_LEN, prov_unavail[p] ? "n/a" : "fail");
				break;
			}
			if (c) {
				snprintf(t[2], CELL_LEN, "%.4f", cr->conn_s);
				snprintf(t[3], CELL_LEN, "%.0f", cr->fds_conn);
				snprintf(t[8], CELL_LEN, "%.0f", cr->cq_errors);
				snprintf(t[9], CELL_LEN, "%.2f", cr->settle_s);
			}
			snprintf(t[4], CELL_LEN, "%.0f", cr->fds);
			snprintf(t[5], CELL_LEN, "%.2f", base->fds > 0 ? cr->fds / base->fds : 0);
			snprintf(t[6], CELL_LEN, "%.0f", cr->rss / 1024);
			snprintf(t[7], CELL_LEN, "%.2f", base->rss > 0 ? cr->rss / base->rss : 0);
		}
	}
	print_first_line();
	if (!opt.csv) {
		printf("# each cycle: N peers in up to %zu processes connect (hello, ack), close "
		       "and exit; the server fi_av_remove's them and reads its CQ until its fds "
		       "are within 10%% of the baseline (%d s at most)\n",
		       opt.procs, SCALE_SETTLE_S);
		printf("# fds_conn: the server's fds with the cycle's peers connected; fds, "
		       "RSS_KiB (after malloc_trim(0)): once they left and were removed; *_x: over "
		       "the baseline\n");
	}
	print_rows(text, row, ncols, 1u << 0);
	for (int p = 0; p < opt.nprovs; p++)
		churn_verdict(p);
	free(text);
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

static void __attribute__((noreturn)) bad_usage(const char *fmt, const char *arg)
{
	fprintf(stderr, "%s: ", SCALE_NAME);
	fprintf(stderr, fmt, arg);
	fprintf(stderr, "\n(%s -h for the options)\n", SCALE_NAME);
	exit(2);
}

static void parse_providers(char *list)
{
	char *save = NULL;

	opt.nprovs = 0;
	for (char *p = strtok_r(list, ",", &save); p; p = strtok_r(NULL, ",", &save)) {
		if (opt.nprovs == SCALE_MAX_PROVS)
			bad_usage("-p: at most 8 providers", NULL);
		if (strlen(p) >= SCALE_PROV_LEN)
			bad_usage("-p: provider name too long: %s", p);
		opt.provs[opt.nprovs++] = p;
	}
	if (!opt.nprovs)
		bad_usage("-p: empty provider list", NULL);
}

static void parse_counts(char *list)
{
	char *save = NULL;
	unsigned long v;

	opt.ncounts = 0;
	for (char *s = strtok_r(list, ",", &save); s; s = strtok_r(NULL, ",", &save)) {
		if (opt.ncounts == SCALE_MAX_COUNTS)
			bad_usage("-n: at most 16 peer counts", NULL);
		if (!bench_parse_ulong(s, 1, SCALE_MAX_PEERS, &v))
			bad_usage("-n: '%s' is not a peer count from 1 to 65536", s);
		opt.counts[opt.ncounts++] = v;
	}
	if (!opt.ncounts)
		bad_usage("-n: empty list of peer counts", NULL);
}

static unsigned long parse_num(const char *name, const char *s, unsigned long min,
			       unsigned long max)
{
	unsigned long v;

	if (!bench_parse_ulong(s, min, max, &v)) {
		fprintf(stderr,
			"%s: %s: '%s' is not a number from %lu to %lu\n(%s -h for the "
			"options)\n",
			SCALE_NAME, name, s, min, max, SCALE_NAME);
		exit(2);
	}
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
			bad_usage("--churn takes one peer count: -n N", NULL);
		if (repeats_set)
			bad_usage("-r does not apply to --churn: each provider runs its cycles "
				  "once",
				  NULL);
		if (iters_set)
			bad_usage("-i does not apply to --churn: it measures no latency", NULL);
	}
}

/* The first two CPUs we may run on, for the server and the awake client. */
static void choose_cpus(void)
{
	cpu_set_t set;
	int found = 0;

	ncpus = (int) sysconf(_SC_NPROCESSORS_ONLN);
	if (sched_getaffinity(0, sizeof(set), &set))
		return;
	ncpus = CPU_COUNT(&set);
	for (int cpu = 0; cpu < CPU_SETSIZE && found < 2; cpu++)
		if (CPU_ISSET(cpu, &set))
			bench_cpus[found++] = cpu;
	if (found < 2 || !opt.pin)
		bench_cpus[0] = bench_cpus[1] = -1;
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
