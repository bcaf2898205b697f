/*
 * fi_progress_bench: what a target that does not call libfabric costs its peers.
 *
 * One initiator process times 8-byte fetch atomics and reads (64 KiB by default) against one
 * target process, whose memory they reach, with the target in five modes:
 *   poll/manual  manual progress, the target polling its CQ (the usual benchmark);
 *   wait/manual  manual progress, the target asleep in fi_cq_sread (what a target that sleeps
 *                in libfabric costs: the floor of "sleep");
 *   poll         automatic progress (FI_PROGRESS_AUTO), the target polling its CQ all the same;
 *   busy         automatic progress, the target computing in a loop, never calling libfabric;
 *   sleep        automatic progress, the target asleep in poll(2).
 * The target runs on one CPU, the initiator on the other (when there are two). The modes and
 * the providers take turns run by run, each run in fresh processes; the table gives the
 * median of the repeats and the ratios of busy and sleep to poll. A provider that refuses
 * FI_PROGRESS_AUTO shows n/a; one whose target never answers is cut off by an alarm and
 * shows "stall".
 *
 * The main process never calls libfabric: it forks the target, hands its address to the
 * initiator it forks next, reads the initiator's result, then stops and reaps the target.
 */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <rdma/fi_atomic.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_rma.h>

#include "bench_util.h"

#define PROG "fi_progress_bench"
#define MAX_PROVS 4
#define MAX_REPEATS 100
#define ADDR_MAX 256
#define ALARM_S 60
#define REQ_KEY 0x5052
#define MR_MODES (FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY)

enum mode { MODE_POLL_MANUAL, MODE_WAIT_MANUAL, MODE_POLL, MODE_BUSY, MODE_SLEEP, MODE_CNT };
static const char *const mode_names[MODE_CNT] = { "poll/manual", "wait/manual", "poll", "busy",
						  "sleep" };
enum op { OP_FETCH, OP_READ, OP_CNT };
/* a run's outcome per operation: microseconds, or one of these */
#define RES_NA (-1.0)    /* the provider refused the target's set-up */
#define RES_STALL (-2.0) /* the run failed or never ended */

static struct {
	const char *provs[MAX_PROVS];
	int nprovs;
	int repeats;
	unsigned long iters;
	size_t read_size;
	bool pin;
} opt = { .repeats = 5, .iters = 1000, .read_size = 65536, .pin = true };

static int cpus[2] = { -1, -1 };

/* What the target tells the initiator. */
struct target_info {
	uint8_t addr[ADDR_MAX];
	size_t addrlen;
	uint64_t key;
	uint64_t base; /* the region's address in RMA requests: 0 without FI_MR_VIRT_ADDR */
	int err;       /* 0, or the set-up's -FI_E* (the target then stops) */
};

/* One side's objects. */
struct side {
	struct fi_info *info;
	struct fid_fabric *fabric;
	struct fid_domain *domain;
	struct fid_av *av;
	struct fid_cq *cq;
	struct fid_ep *ep;
	struct fid_mr *mr;
	void *buf;
	size_t size;
};

static void side_close(struct side *s)
{
	if (s->mr)
		fi_close(&s->mr->fid);
	if (s->ep)
		fi_close(&s->ep->fid);
	if (s->cq)
		fi_close(&s->cq->fid);
	if (s->av)
		fi_close(&s->av->fid);
	bench_close_domain(s->domain, s->fabric, s->info);
	free(s->buf);
}

static int side_open(struct side *s, const char *prov, bool is_auto, bool can_wait,
		     size_t size)
{
	struct fi_cq_attr cq_attr = { .format = FI_CQ_FORMAT_CONTEXT, .size = 64,
				      .wait_obj = can_wait ? FI_WAIT_UNSPEC : FI_WAIT_NONE };
	struct fi_av_attr av_attr = { .type = FI_AV_TABLE };
	struct fi_info *hints;
	int ret;

	memset(s, 0, sizeof(*s));
	hints = bench_hints(prov, FI_MSG | FI_RMA | FI_ATOMIC, FI_EP_RDM, MR_MODES, !is_auto);
	if (!hints)
		return -FI_ENOMEM;
	if (is_auto)
		hints->domain_attr->data_progress = FI_PROGRESS_AUTO;
	ret = bench_getinfo(hints, true, &s->info);
	fi_freeinfo(hints);
	if (ret)
		return ret;
	ret = bench_open_domain(s->info, &s->fabric, &s->domain, NULL);
	if (!ret)
		ret = fi_av_open(s->domain, &av_attr, &s->av, NULL);
	if (!ret)
		ret = fi_cq_open(s->domain, &cq_attr, &s->cq, NULL);
	if (!ret)
		ret = fi_endpoint(s->domain, s->info, &s->ep, NULL);
	if (!ret)
		ret = fi_ep_bind(s->ep, &s->av->fid, 0);
	if (!ret)
		ret = fi_ep_bind(s->ep, &s->cq->fid, FI_TRANSMIT | FI_RECV);
	if (!ret)
		ret = fi_enable(s->ep);
	if (ret)
		return ret;
	s->size = size;
	if (posix_memalign(&s->buf, 4096, size))
		return -FI_ENOMEM;
	memset(s->buf, 0, size);
	return fi_mr_reg(s->domain, s->buf, size, FI_READ | FI_WRITE | FI_REMOTE_READ |
			 FI_REMOTE_WRITE, 0, REQ_KEY, 0, &s->mr, NULL);
}

/* ---- the target ---- */

/* Until the main process writes: polling the CQ, computing, or asleep. */
static void target_wait(const struct side *s, enum mode mode, int rfd)
{
	struct pollfd pfd = { .fd = rfd, .events = POLLIN };
	struct fi_cq_entry entry;
	volatile uint64_t work = 0;

	if (mode == MODE_SLEEP) {
		(void) poll(&pfd, 1, -1);
		return;
	}
	for (;;) {
		if (poll(&pfd, 1, 0) != 0)
			return;
		if (mode == MODE_WAIT_MANUAL) {
			(void) fi_cq_sread(s->cq, &entry, 1, NULL, 50);
			continue;
		}
		if (mode == MODE_BUSY) {
			for (int i = 0; i < (1 << 18); i++)
				work = work + 1;
			continue;
		}
		for (int i = 0; i < 1024; i++)
			(void) fi_cq_read(s->cq, &entry, 1);
	}
}

static int target_main(const char *prov, enum mode mode, int rfd, int wfd)
{
	struct target_info ti = { .addrlen = sizeof(ti.addr) };
	struct side s;

	ti.err = side_open(&s, prov, mode >= MODE_POLL, mode == MODE_WAIT_MANUAL,
			   4096 + opt.read_size);
	if (!ti.err)
		ti.err = fi_getname(&s.ep->fid, ti.addr, &ti.addrlen);
	if (!ti.err) {
		ti.key = fi_mr_key(s.mr);
		ti.base = s.info->domain_attr->mr_mode & FI_MR_VIRT_ADDR ?
			  (uint64_t) (uintptr_t) s.buf : 0;
	}
	if (write_all(wfd, &ti, sizeof(ti)) || ti.err)
		_exit(ti.err ? 3 : 1);
	target_wait(&s, mode, rfd);
	side_close(&s);
	return 0;
}

/* ---- the initiator ---- */

/* Posts op once and spins on the CQ until it completes: 0 or an error. */
static int initiator_one(struct side *s, enum op op, fi_addr_t peer,
			 const struct target_info *ti)
{
	static uint64_t one = 1;
	void *desc = fi_mr_desc(s->mr);
	struct fi_cq_entry entry;
	ssize_t ret;

	do {
		if (op == OP_FETCH)
			ret = fi_fetch_atomic(s->ep, &one, 1, NULL, s->buf, desc, peer, ti->base,
					      ti->key, FI_UINT64, FI_SUM, s);
		else
			ret = fi_read(s->ep, s->buf, opt.read_size, desc, peer, ti->base + 4096,
				      ti->key, s);
		if (ret == -FI_EAGAIN)
			(void) fi_cq_read(s->cq, &entry, 1);
	} while (ret == -FI_EAGAIN);
	if (ret)
		return (int) ret;
	while ((ret = fi_cq_read(s->cq, &entry, 1)) == -FI_EAGAIN)
		;
	return ret == 1 ? 0 : (int) ret;
}

/* Microseconds per operation, warm-up untimed; or a negative error. */
static double initiator_time(struct side *s, enum op op, fi_addr_t peer,
			     const struct target_info *ti)
{
	unsigned long n = op == OP_FETCH ? opt.iters : (opt.iters + 4) / 5;
	double start = 0;
	int ret;

	for (unsigned long i = 0; i < n + n / 10 + 1; i++) {
		if (i == n / 10 + 1)
			start = now_us();
		ret = initiator_one(s, op, peer, ti);
		if (ret)
			return ret;
	}
	return (now_us() - start) / (double) n;
}

static int initiator_main(const char *prov, int rfd, int wfd)
{
	double res[OP_CNT] = { RES_STALL, RES_STALL };
	struct target_info ti;
	struct side s;
	fi_addr_t peer;
	int ret;

	if (read_all(rfd, &ti, sizeof(ti)))
		return 1;
	ret = side_open(&s, prov, false, false, 4096 + opt.read_size);
	if (!ret)
		ret = fi_av_insert(s.av, ti.addr, 1, &peer, 0, NULL) == 1 ? 0 : -FI_EADDRNOTAVAIL;
	for (int op = 0; !ret && op < OP_CNT; op++) {
		res[op] = initiator_time(&s, op, peer, &ti);
		if (res[op] < 0) {
			fprintf(stderr, PROG ": %s: %s failed: %s\n", prov,
				op == OP_FETCH ? "fi_fetch_atomic" : "fi_read",
				fi_strerror((int) -res[op]));
			res[op] = RES_STALL;
			break;
		}
	}
	if (ret)
		fprintf(stderr, PROG ": %s: initiator set-up: %s\n", prov, fi_strerror(-ret));
	side_close(&s);
	return write_all(wfd, res, sizeof(res)) ? 1 : 0;
}

/* ---- the main process ---- */

static pid_t fork_child(int cpu, int *to, int *from, int (*fn)(const char *, enum mode, int,
							       int),
			const char *prov, enum mode mode)
{
	int down[2], up[2];
	pid_t parent = getpid(), pid;

	if (pipe(down) || pipe(up))
		return -1;
	pid = fork();
	if (pid == 0) {
		bench_die_with_parent(parent);
		close(down[1]);
		close(up[0]);
		alarm(ALARM_S);
		bench_pin(PROG, cpu);
		_exit(fn(prov, mode, down[0], up[1]));
	}
	close(down[0]);
	close(up[1]);
	*to = down[1];
	*from = up[0];
	return pid;
}

static int initiator_entry(const char *prov, enum mode mode, int rfd, int wfd)
{
	(void) mode;
	return initiator_main(prov, rfd, wfd);
}

/* One run: the target in mode, the initiator timing both operations. */
static void run_one(const char *prov, enum mode mode, double res[OP_CNT])
{
	int t_to, t_from, i_to, i_from, status;
	struct target_info ti;
	pid_t target, initiator;
	char stop = 's';

	res[OP_FETCH] = res[OP_READ] = RES_STALL;
	target = fork_child(cpus[0], &t_to, &t_from, target_main, prov, mode);
	if (target < 0)
		return;
	if (read_all(t_from, &ti, sizeof(ti)) || ti.err) {
		if (ti.err == -FI_ENODATA)
			res[OP_FETCH] = res[OP_READ] = RES_NA;
		goto out_target;
	}
	initiator = fork_child(cpus[1], &i_to, &i_from, initiator_entry, prov, mode);
	if (initiator < 0)
		goto out_target;
	if (write_all(i_to, &ti, sizeof(ti)) || read_all(i_from, res, 2 * sizeof(double)))
		res[OP_FETCH] = res[OP_READ] = RES_STALL;
	close(i_to);
	close(i_from);
	(void) waitpid(initiator, &status, 0);
out_target:
	(void) write_all(t_to, &stop, 1);
	close(t_to);
	close(t_from);
	(void) waitpid(target, &status, 0);
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: " PROG " [-p PROV[,PROV...]] [-r REPEATS] [-n ITERS] [-S READ_SIZE] "
		"[--no-pin]\n"
		"  -p  providers (default: tcp;ofi_layer)\n"
		"  -r  repeats, each mode and provider in turn (default: 5)\n"
		"  -n  fetch atomics timed per run; reads: a fifth (default: 1000)\n"
		"  -S  bytes per read (default: 65536)\n"
		"  --no-pin  leave both processes where the system puts them\n");
}

static int parse(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "no-pin", no_argument, NULL, 'P' }, { "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 } };
	static char default_provs[] = "tcp;ofi_layer";
	char *provs = default_provs;
	unsigned long v;
	int c;

	while ((c = getopt_long(argc, argv, "p:r:n:S:h", longopts, NULL)) != -1) {
		switch (c) {
		case 'p': provs = optarg; break;
		case 'r':
			if (!bench_parse_ulong(optarg, 1, MAX_REPEATS, &v))
				return -1;
			opt.repeats = (int) v;
			break;
		case 'n':
			if (!bench_parse_ulong(optarg, 1, 10000000, &opt.iters))
				return -1;
			break;
		case 'S':
			if (!bench_parse_size(optarg, 8, 1 << 30, &opt.read_size))
				return -1;
			break;
		case 'P': opt.pin = false; break;
		case 'h': usage(stdout); exit(0);
		default: return -1;
		}
	}
	opt.nprovs = bench_split_list(provs, opt.provs, MAX_PROVS);
	return optind == argc && opt.nprovs > 0 ? 0 : -1;
}

static void print_cell(double v)
{
	if (v == RES_NA)
		printf(" %11s", "n/a");
	else if (v == RES_STALL)
		printf(" %11s", "stall");
	else
		printf(" %11.2f", v);
}

static void print_ratio(double v, double base)
{
	if (v > 0 && base > 0)
		printf(" %10.2fx", v / base);
	else
		printf(" %11s", "-");
}

int main(int argc, char **argv)
{
	static double samples[MAX_PROVS][MODE_CNT][OP_CNT][MAX_REPEATS];
	double res[OP_CNT], med[MODE_CNT];
	int n[MAX_PROVS][MODE_CNT][OP_CNT] = { { { 0 } } };
	bool failed[MAX_PROVS][MODE_CNT][OP_CNT] = { { { false } } };

	if (parse(argc, argv)) {
		usage(stderr);
		return 2;
	}
	if (opt.pin && bench_allowed_cpus(cpus, 2) < 2)
		cpus[0] = cpus[1] = -1;
	printf("# %s: %lu fetch atomics of 8 bytes and %lu reads of %zu bytes per run, median of "
	       "%d repeats; target on CPU %d, initiator on CPU %d (-1: not pinned)\n", PROG,
	       opt.iters, (opt.iters + 4) / 5, opt.read_size, opt.repeats, cpus[0], cpus[1]);
	for (int r = 0; r < opt.repeats; r++) {
		for (int m = 0; m < MODE_CNT; m++) {
			for (int p = 0; p < opt.nprovs; p++) {
				run_one(opt.provs[p], m, res);
				for (int o = 0; o < OP_CNT; o++) {
					if (res[o] > 0)
						samples[p][m][o][n[p][m][o]++] = res[o];
					else
						failed[p][m][o] |= res[o] == RES_STALL;
				}
			}
		}
	}
	printf("%-18s %-13s", "provider", "operation");
	for (int m = 0; m < MODE_CNT; m++)
		printf(" %11s", mode_names[m]);
	printf(" %11s %11s\n", "busy/poll", "sleep/poll");
	for (int p = 0; p < opt.nprovs; p++) {
		for (int o = 0; o < OP_CNT; o++) {
			char what[32];

			snprintf(what, sizeof(what), o == OP_FETCH ? "fetch_atomic 8" :
				 "read %zu", opt.read_size);
			printf("%-18s %-13s", opt.provs[p], what);
			for (int m = 0; m < MODE_CNT; m++) {
				int cnt = n[p][m][o];

				med[m] = failed[p][m][o] ? RES_STALL : cnt ?
					 bench_median(samples[p][m][o], cnt) : RES_NA;
				print_cell(med[m]);
			}
			print_ratio(med[MODE_BUSY], med[MODE_POLL]);
			print_ratio(med[MODE_SLEEP], med[MODE_POLL]);
			printf("\n");
		}
	}
	printf("# microseconds per operation; ratios: the target that never calls against the "
	       "one that polls, both with FI_PROGRESS_AUTO\n");
	return 0;
}
