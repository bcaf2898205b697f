/*
 * fi_scale_bench: the children of a run, as the main process sees them. It forks them (spawn),
 * tells them what to do next (send_cmd: one byte down the command pipe), waits for their
 * records (await: one struct scale_rec up the record pipe) and reaps them (await_exit,
 * end_all). A child that ends, fails or reports out of turn fails the wait, and so the run.
 */
#include "config.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "scale_bench.h"

/* The children of the run under way; the server, when there is one, first. */
struct kid kids[SCALE_MAX_PROCS + 2];
int nkids;
struct scale_run run;
pid_t main_pid;

/* The soft limit of open files raised to the hard one; the limit in force. */
rlim_t raise_fd_limit(void)
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
struct kid *spawn(enum kid_kind kind, size_t nep, int index)
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
		bench_die_with_parent(main_pid);
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

int send_cmd(enum target t, char cmd, char *why, size_t len)
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
		bench_describe_status(k->status, opt.timeout, how, sizeof(how));
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
int await(enum target t, int want, double deadline, char *why, size_t len)
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
int await_exit(enum target t, double deadline, char *why, size_t len)
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
			bench_describe_status(k->status, opt.timeout, how, sizeof(how));
			snprintf(why, len, "%s ended badly (%s)", k->role, how);
			ret = AWAIT_FAIL;
		}
	}
	return ret;
}

/* Every child of the run killed and reaped, every pipe closed. */
void end_all(void)
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
int spawn_clients(size_t npeers, bool with_awake)
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
double connect_clients(double deadline, char *why, size_t len)
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
