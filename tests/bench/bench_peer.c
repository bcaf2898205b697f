/*
 * fi_layer_bench: the two processes of one run of one provider.
 *
 * The client forks the server; both open their endpoint on 127.0.0.1, swap addresses (and
 * for a MSG endpoint connect) through two pipes, then run the tests of the run together
 * (bench_run says which: one, as the main process forks them). The client streams one record
 * per test to the main process, so a run that dies half way still delivers the tests it
 * finished. Both re-arm alarm() for every test and die with their parent; the client reaps
 * the server, or kills it when the run failed.
 */
#include "config.h"

#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/wait.h>
#include <unistd.h>

#include <rdma/fi_errno.h>

#include "bench.h"

static int wait_peer_done(struct fab *f, int fd);

static int server_main(int prov, int rfd, int wfd)
{
	struct fab f = {
		.prov = opt.provs[prov],
		.role = "server",
		.is_server = true,
		.peer = FI_ADDR_UNSPEC,
		.rfd = rfd,
		.wfd = wfd,
	};
	double unused;
	int ret;

	/* outlive the client's alarm a little, so a hang is reported by the client */
	alarm(opt.timeout + SERVER_ALARM_EXTRA);
	ret = fab_open(&f, bench_run.buf_size);
	ret = fab_send_hdr(&f, wfd, ret);
	if (!ret)
		ret = fab_recv_hdr(&f, rfd);
	if (!ret)
		ret = fab_connect(&f);
	for (int i = 0; !ret && i < ntests; i++) {
		if (test_skipped(prov, i) || !test_possible(&f, &tests[i]))
			continue;
		alarm(opt.timeout + SERVER_ALARM_EXTRA);
		ret = run_test(&f, &tests[i], false, &unused);
	}
	alarm(opt.timeout + SERVER_ALARM_EXTRA);
	if (!ret)
		ret = wait_peer_done(&f, rfd);
	if (!ret && write_all(wfd, "d", 1))
		ret = -FI_EIO;
	fab_close(&f);
	return ret == -FI_ENODATA ? 0 : ret ? 1 : 0;
}

static void send_record(int fd, enum rec_type type, int test, double value)
{
	struct record rec = {.type = type, .test = test, .value = value};

	/* if the main process is gone there is nobody left to report to */
	if (write_all(fd, &rec, sizeof(rec)))
		_exit(1);
}

/* Reap the server; kill it if it lingers (it would have died of its alarm anyway). */
static int reap_server(pid_t pid)
{
	int status;

	for (int i = 0; i < 500; i++) {
		pid_t r = waitpid(pid, &status, WNOHANG);

		if (r == pid)
			return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : -1;
		if (r < 0)
			return -1;
		usleep(10000);
	}
	fprintf(stderr, "%s: server did not exit, killing it\n", BENCH_NAME);
	kill(pid, SIGKILL);
	waitpid(pid, &status, 0);
	return -1;
}

/*
 * Close only once the peer is through: its last completions may still need our provider
 * (an acknowledgement, a rendezvous read), and with manual progress only our CQ reads move it.
 * The client says so once its last test is over, the server once it has heard that: a server
 * that closed at the end of its own part would leave the client's rendezvous sends without
 * their acknowledgements, and its close, with the client's later traffic unread, resets the
 * connection, which loses what it sent last.
 */
static int wait_peer_done(struct fab *f, int fd)
{
	struct pollfd pfd = {.fd = fd, .events = POLLIN};
	pid_t server = f->watch_pid;
	char done;
	int ret;

	/* the peer exits right after it says done: the pipe, not waitpid, tells how it ended */
	f->watch_pid = 0;
	for (unsigned i = 1;; i++) {
		ret = cq_poll(f);
		if (ret)
			break;
		if (i % 1024 || poll(&pfd, 1, 0) <= 0)
			continue;
		if (read(fd, &done, 1) != 1) {
			fprintf(stderr, "%s: %s %s: the peer failed after the last test\n",
				BENCH_NAME, f->prov, f->role);
			ret = -FI_EIO;
		}
		break;
	}
	f->watch_pid = server;
	return ret;
}

int client_main(int prov, int res_fd)
{
	struct fab f = {.prov = opt.provs[prov], .role = "client", .peer = FI_ADDR_UNSPEC};
	int c2s[2], s2c[2];
	double value;
	pid_t server, self = getpid();
	int ret;

	alarm(opt.timeout);
	if (pipe(c2s) || pipe(s2c)) {
		perror(BENCH_NAME ": pipe");
		return 1;
	}
	fflush(NULL);
	server = fork();
	if (server < 0) {
		perror(BENCH_NAME ": fork");
		return 1;
	}
	if (server == 0) {
		close(res_fd);
		close(c2s[1]);
		close(s2c[0]);
		bench_die_with_parent(self);
		bench_pin(BENCH_NAME, bench_cpus[1]);
		_exit(server_main(prov, c2s[0], s2c[1]));
	}
	close(c2s[0]);
	close(s2c[1]);
	bench_pin(BENCH_NAME, bench_cpus[0]);
	f.watch_pid = server;
	f.rfd = s2c[0];
	f.wfd = c2s[1];

	ret = fab_open(&f, bench_run.buf_size);
	if (ret == -FI_ENODATA)
		send_record(res_fd, REC_UNAVAIL, -1, 0);
	ret = fab_send_hdr(&f, c2s[1], ret);
	if (!ret)
		ret = fab_recv_hdr(&f, s2c[0]);
	if (!ret)
		ret = fab_connect(&f);
	if (!ret && bench_run.is_first) {
		/* "udp" silently becomes "udp;ofi_rxd": say what the column measures, once */
		if (strcasecmp(f.info->fabric_attr->prov_name, f.core) && bench_run.test == 0)
			fprintf(stderr, "%s: note: \"%s\" runs as \"%s\"\n", BENCH_NAME, f.prov,
				f.info->fabric_attr->prov_name);
		if (opt.verbose)
			fab_describe(&f);
	}
	for (int i = 0; !ret && i < ntests; i++) {
		if (test_skipped(prov, i))
			continue;
		if (!test_possible(&f, &tests[i])) {
			send_record(res_fd, REC_NA, i, 0);
			continue;
		}
		send_record(res_fd, REC_BEGIN, i, 0);
		alarm(opt.timeout);
		ret = run_test(&f, &tests[i], true, &value);
		if (!ret)
			send_record(res_fd, REC_RESULT, i, value);
	}
	alarm(opt.timeout);
	if (!ret && write_all(c2s[1], "c", 1))
		ret = -FI_EIO;
	if (!ret)
		ret = wait_peer_done(&f, s2c[0]);
	if (ret) {
		/* the server may be blocked on a message that will never come */
		if (f.watch_pid)
			kill(f.watch_pid, SIGKILL);
	}
	fab_close(&f);
	close(c2s[1]);
	close(s2c[0]);
	if (f.watch_pid && reap_server(f.watch_pid) && !ret)
		ret = -FI_EIO;
	if (!ret)
		send_record(res_fd, REC_DONE, -1, 0);
	return ret == -FI_ENODATA ? 0 : ret ? 1 : 0;
}
