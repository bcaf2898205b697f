/*
 * fi_coll_bench: one rank, whichever it is. Rank 0 (fi_coll_bench.c) and ranks 1..N-1
 * (child_main, at the end of this file) open, join and test the same way.
 *
 * Every rank: fi_getinfo (FI_EP_RDM, FI_MSG | FI_COLLECTIVE, FI_CONTEXT, manual progress),
 * fabric, domain, EQ, FI_AV_TABLE AV, CQ, endpoint; the names of all ranks inserted in rank
 * order (so rank i is fi_addr_t i), an AV set of all of them, fi_join_collective and its
 * FI_JOIN_COMPLETE; then per test a checked call, the warm-up, a barrier and the timed calls,
 * each waited for on the CQ before the next. A test's figure is the slowest rank's average.
 *
 * Waiting. Completions are read with fi_cq_read, which with manual progress is also what
 * moves the provider; a read that finds nothing calls sched_yield(). Ranks are pinned
 * round-robin (rank r on the (r mod C)-th CPU we may use), so with 4 or 8 ranks on 2 CPUs
 * several ranks share a CPU: a rank spinning on an empty CQ would keep its CPU for a whole
 * time slice while the rank it waits for cannot run there, and the yield hands the CPU over at
 * once. Figures with more ranks than CPUs therefore measure the provider and the scheduler
 * together; compare providers (and MPI with mpi_yield_when_idle) at the same rank count only.
 *
 * Bounds. Every wait (a completion, the join, a peer's message) gives up after the timeout; a
 * watchdog (SIGALRM once a second) ends a rank whose loops have not turned for the timeout
 * plus a margin, which catches a call that blocks inside a provider.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include <rdma/fabric.h>
#include <rdma/fi_collective.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>

#include "coll_bench.h"

#define WATCHDOG_MARGIN 10 /* seconds beyond the timeout before the watchdog ends a rank */
#define CQ_BATCH 8
#define CHILD_CHECKS 16 /* looks at the clock between two at the other ranks (rank 0) */

/* The result buffer is followed by a guard: a provider that writes past the result is caught. */
#define GUARD_LEN 4096
#define GUARD_BYTE 0xa5 /* rank r's guard is GUARD_BYTE ^ (r & 0x3f) */
#define BCAST_ROOT 0	/* rank 0 is fi_addr_t 0 in the AV and index 0 in the set alike */

/* What the benchmark accepts; it registers its buffers whenever the provider asks for it. */
#define MR_MODE_ACCEPTED                                                                           \
	(FI_MR_LOCAL | FI_MR_ALLOCATED | FI_MR_VIRT_ADDR | FI_MR_PROV_KEY | FI_MR_ENDPOINT)

/* The rows of the table, in order; -t selects among them. */
const struct test tests[NTESTS] = {
	{.name = "barrier", .op = OP_BARRIER, .size = 0, .iters = 1000},
	{.name = "allreduce", .op = OP_ALLREDUCE, .size = 8, .iters = 1000},
	{.name = "allreduce", .op = OP_ALLREDUCE, .size = 1 << 20, .iters = 50},
	{.name = "broadcast", .op = OP_BROADCAST, .size = 8, .iters = 1000},
	{.name = "broadcast", .op = OP_BROADCAST, .size = 1 << 20, .iters = 50},
	{.name = "allgather", .op = OP_ALLGATHER, .size = 8, .iters = 1000},
	{.name = "allgather", .op = OP_ALLGATHER, .size = 64 << 10, .iters = 200},
};
/* lines the ranks up before the timed calls of every test */
static const struct test line_up = {.name = "barrier", .op = OP_BARRIER};

static bool is_rank0 = true; /* child_main says otherwise */

/* ---------------------------------------------------------------- small things */

/* A reason into a WHY_LEN buffer, cut short if need be. */
void copy_why(char *dst, const char *src)
{
	size_t len = strnlen(src, WHY_LEN - 1);

	memcpy(dst, src, len);
	dst[len] = '\0';
}

/* ---------------------------------------------------------------- watchdog */

/*
 * Every loop that waits turns the heartbeat. A rank whose heartbeat stands still for the
 * timeout and a margin is stuck inside a call of the provider (the loops give up at the
 * timeout by themselves): it ends, and rank 0 takes the others with it.
 */
volatile sig_atomic_t heartbeat;
static sig_atomic_t watch_seen;
static unsigned watch_still;
static unsigned watch_limit;

static void on_watchdog(int sig)
{
	static const char msg[] = BENCH_NAME ": watchdog: a call into the provider has not "
					     "returned within the timeout; giving up\n";

	(void) sig;
	if (heartbeat != watch_seen) {
		watch_seen = heartbeat;
		watch_still = 0;
		return;
	}
	if (++watch_still < watch_limit)
		return;
	if (is_rank0)
		for (int i = 1; i < MAX_RANKS; i++)
			if (children[i].pid > 0)
				kill(children[i].pid, SIGKILL);
	if (write(STDERR_FILENO, msg, sizeof(msg) - 1) < 0)
		_exit(EXIT_FAILED);
	_exit(EXIT_FAILED);
}

/* SIGALRM once a second from now on; the rank ends after timeout + a margin of no heartbeat. */
void watchdog_start(unsigned timeout)
{
	struct sigaction sa = {.sa_handler = on_watchdog, .sa_flags = SA_RESTART};
	struct itimerval it = {.it_interval = {1, 0}, .it_value = {1, 0}};

	watch_limit = timeout + WATCHDOG_MARGIN;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGALRM, &sa, NULL);
	setitimer(ITIMER_REAL, &it, NULL);
}

/* No more SIGALRM: the waiting is over. */
void watchdog_stop(void)
{
	struct itimerval it = {{0, 0}, {0, 0}};

	setitimer(ITIMER_REAL, &it, NULL);
	signal(SIGALRM, SIG_DFL);
}

/* ---------------------------------------------------------------- one rank's fabric */

/*
 * Says on stderr what failed and keeps the first reason in r->why. Returns ret if it is
 * negative, -FI_EOTHER otherwise.
 */
int rank_fail(struct rank *r, int ret, const char *fmt, ...)
{
	char buf[WHY_LEN];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	fprintf(stderr, "%s: %s rank %d: %s\n", BENCH_NAME, r->prov, r->rank, buf);
	if (!r->why[0])
		copy_why(r->why, buf);
	return ret < 0 ? ret : -FI_EOTHER;
}

/* rank_fail for a call that returned the fi_errno ret. */
int rank_call_fail(struct rank *r, const char *call, int ret)
{
	return rank_fail(r, ret, "%s: %s", call, fi_strerror(ret < 0 ? -ret : ret));
}

/* Nothing open yet; rank_open opens, rank_close closes. */
void rank_init(struct rank *r, const char *prov, int rank, int nranks, unsigned timeout)
{
	memset(r, 0, sizeof(*r));
	r->prov = prov;
	r->rank = rank;
	r->nranks = nranks;
	r->timeout = timeout;
	r->coll_addr = FI_ADDR_NOTAVAIL;
}

static int rank_getinfo(const struct rank *r, uint64_t caps, bool manual, struct fi_info **info)
{
	struct fi_info *hints;
	int ret;

	hints = bench_hints(r->prov, caps, FI_EP_RDM, MR_MODE_ACCEPTED, manual);
	if (!hints)
		return -FI_ENOMEM;
	ret = bench_getinfo(hints, true, info);
	fi_freeinfo(hints);
	return ret;
}

/*
 * Manual progress first, the provider's own if it offers no manual one. -FI_ENODATA when it
 * offers no FI_COLLECTIVE at all, with the reason: no such provider, or no collectives.
 */
static int rank_choose_info(struct rank *r)
{
	struct fi_info *plain;
	int ret;

	r->is_manual = true;
	ret = rank_getinfo(r, FI_MSG | FI_COLLECTIVE, true, &r->info);
	if (ret == -FI_ENODATA) {
		r->is_manual = false;
		ret = rank_getinfo(r, FI_MSG | FI_COLLECTIVE, false, &r->info);
	}
	if (ret != -FI_ENODATA)
		return ret ? rank_call_fail(r, "fi_getinfo", ret) : 0;
	if (!rank_getinfo(r, FI_MSG, false, &plain)) {
		fi_freeinfo(plain);
		copy_why(r->why, "no FI_COLLECTIVE");
	} else {
		copy_why(r->why, "no FI_EP_RDM provider of that name");
	}
	return -FI_ENODATA;
}

static int rank_reg(struct rank *r, void *buf, size_t len, uint64_t key, struct fid_mr **mr,
		    void **desc)
{
	int ret;

	ret = fi_mr_reg(r->domain, buf, len, FI_SEND | FI_RECV, 0, key, 0, mr, NULL);
	if (ret)
		return rank_call_fail(r, "fi_mr_reg", ret);
	if (r->info->domain_attr->mr_mode & FI_MR_ENDPOINT) {
		ret = fi_mr_bind(*mr, &r->ep->fid, 0);
		if (ret)
			return rank_call_fail(r, "fi_mr_bind", ret);
		ret = fi_mr_enable(*mr);
		if (ret)
			return rank_call_fail(r, "fi_mr_enable", ret);
	}
	*desc = fi_mr_desc(*mr);
	return 0;
}

/* The largest contribution and the largest result of any test, each with its guard behind. */
static int rank_alloc(struct rank *r)
{
	for (int t = 0; t < NTESTS; t++) {
		size_t recv =
			tests[t].size * (tests[t].op == OP_ALLGATHER ? (size_t) r->nranks : 1);

		if (tests[t].size > r->send_len)
			r->send_len = tests[t].size;
		if (recv > r->recv_len)
			r->recv_len = recv;
	}
	if (posix_memalign((void **) &r->send_buf, 4096, r->send_len + GUARD_LEN) ||
	    posix_memalign((void **) &r->recv_buf, 4096, r->recv_len + GUARD_LEN)) {
		r->send_buf = r->recv_buf = NULL;
		return rank_fail(r, -FI_ENOMEM, "out of memory for the buffers");
	}
	if (!(r->info->domain_attr->mr_mode & FI_MR_LOCAL))
		return 0;
	if (rank_reg(r, r->send_buf, r->send_len + GUARD_LEN, 1, &r->send_mr, &r->send_desc))
		return -FI_EOTHER;
	return rank_reg(r, r->recv_buf, r->recv_len + GUARD_LEN, 2, &r->recv_mr, &r->recv_desc);
}

/* Closes and frees whatever is open; may be called again. */
void rank_close(struct rank *r)
{
	if (r->mc)
		fi_close(&r->mc->fid);
	if (r->set)
		fi_close(&r->set->fid);
	if (r->ep)
		fi_close(&r->ep->fid);
	if (r->send_mr)
		fi_close(&r->send_mr->fid);
	if (r->recv_mr)
		fi_close(&r->recv_mr->fid);
	if (r->av)
		fi_close(&r->av->fid);
	if (r->cq)
		fi_close(&r->cq->fid);
	if (r->eq)
		fi_close(&r->eq->fid);
	bench_close_domain(r->domain, r->fabric, r->info);
	free(r->send_buf);
	free(r->recv_buf);
	r->mc = NULL;
	r->set = NULL;
	r->ep = NULL;
	r->send_mr = r->recv_mr = NULL;
	r->av = NULL;
	r->cq = NULL;
	r->eq = NULL;
	r->domain = NULL;
	r->fabric = NULL;
	r->info = NULL;
	r->send_buf = r->recv_buf = NULL;
}

/* Everything up to the endpoint's name; the caller closes on failure. */
int rank_open(struct rank *r)
{
	struct fi_eq_attr eq_attr = {.size = 64, .wait_obj = FI_WAIT_NONE};
	struct fi_cq_attr cq_attr = {.format = FI_CQ_FORMAT_CONTEXT, .wait_obj = FI_WAIT_NONE};
	struct fi_av_attr av_attr = {.type = FI_AV_TABLE, .count = (size_t) r->nranks};
	const char *failed;
	int ret;

	ret = rank_choose_info(r);
	if (ret)
		return ret;
	ret = bench_open_domain(r->info, &r->fabric, &r->domain, &failed);
	if (ret)
		return rank_call_fail(r, failed, ret);
	ret = fi_eq_open(r->fabric, &eq_attr, &r->eq, NULL);
	if (ret)
		return rank_call_fail(r, "fi_eq_open", ret);
	ret = fi_av_open(r->domain, &av_attr, &r->av, NULL);
	if (ret)
		return rank_call_fail(r, "fi_av_open", ret);
	ret = fi_cq_open(r->domain, &cq_attr, &r->cq, NULL);
	if (ret)
		return rank_call_fail(r, "fi_cq_open", ret);
	ret = fi_endpoint(r->domain, r->info, &r->ep, NULL);
	if (ret)
		return rank_call_fail(r, "fi_endpoint", ret);
	ret = fi_ep_bind(r->ep, &r->eq->fid, 0);
	if (ret)
		return rank_call_fail(r, "fi_ep_bind(eq)", ret);
	ret = fi_ep_bind(r->ep, &r->av->fid, 0);
	if (ret)
		return rank_call_fail(r, "fi_ep_bind(av)", ret);
	ret = fi_ep_bind(r->ep, &r->cq->fid, FI_TRANSMIT | FI_RECV);
	if (ret)
		return rank_call_fail(r, "fi_ep_bind(cq)", ret);
	ret = fi_enable(r->ep);
	if (ret)
		return rank_call_fail(r, "fi_enable", ret);
	ret = rank_alloc(r);
	if (ret)
		return ret;
	r->addrlen = sizeof(r->addr);
	ret = fi_getname(&r->ep->fid, r->addr, &r->addrlen);
	if (ret) {
		r->addrlen = 0;
		return rank_call_fail(r, "fi_getname", ret);
	}
	return 0;
}

/* ---------------------------------------------------------------- waiting */

/* The first call sets the deadline, the later ones check it. */
int check_deadline(struct rank *r, double *deadline, const char *what)
{
	double now = now_us();

	if (!*deadline)
		*deadline = now + r->timeout * 1e6;
	else if (now > *deadline)
		return rank_fail(r, -FI_ETIMEDOUT, "%s: nothing within %u s", what, r->timeout);
	return 0;
}

/*
 * Every CHECK_POLLS polls of a wait: the deadline; on rank 0 now and then (a few system calls
 * per rank, kept off the CPU the ranks share) whether every rank lives and what it reported.
 */
static int check_wait(struct rank *r, double *deadline, const char *what)
{
	static unsigned checks;
	int ret = check_deadline(r, deadline, what);

	if (ret || !is_rank0 || ++checks % CHILD_CHECKS)
		return ret;
	return check_children(r);
}

static int cq_error(struct rank *r)
{
	struct fi_cq_err_entry err = {0};
	char prov_err[64] = "";
	ssize_t ret;

	ret = fi_cq_readerr(r->cq, &err, 0);
	if (ret < 0)
		return rank_call_fail(r, "fi_cq_readerr", (int) ret);
	if (err.prov_errno)
		fi_cq_strerror(r->cq, err.prov_errno, err.err_data, prov_err, sizeof(prov_err));
	return rank_fail(r, err.err ? -err.err : -FI_EIO, "completion error: %s (%s)",
			 fi_strerror(err.err), prov_err[0] ? prov_err : "no provider detail");
}

/*
 * One fi_cq_read: 1 when the completion of ctx came, 0 when nothing did, a negative error
 * otherwise. Only one call is ever outstanding, so any other completion is the provider's
 * mistake. An empty read yields the CPU (see the top of the file).
 */
int cq_read_once(struct rank *r, const struct fi_context *ctx)
{
	struct fi_cq_entry comp[CQ_BATCH];
	int found = 0;
	ssize_t n;

	heartbeat++;
	n = fi_cq_read(r->cq, comp, CQ_BATCH);
	if (n == -FI_EAGAIN) {
		sched_yield();
		return 0;
	}
	if (n == -FI_EAVAIL)
		return cq_error(r);
	if (n < 0)
		return rank_call_fail(r, "fi_cq_read", (int) n);
	for (ssize_t i = 0; i < n; i++) {
		if (ctx && comp[i].op_context == ctx && !found) {
			found = 1;
			continue;
		}
		return rank_fail(r, -FI_EOTHER, "stray completion (context %p, no call of ours)",
				 comp[i].op_context);
	}
	return found;
}

static int wait_comp(struct rank *r, const struct fi_context *ctx, const char *what)
{
	double deadline = 0;
	int ret;

	for (unsigned polls = 1;; polls++) {
		ret = cq_read_once(r, ctx);
		if (ret)
			return ret > 0 ? 0 : ret;
		if (!(polls % CHECK_POLLS)) {
			ret = check_wait(r, &deadline, what);
			if (ret)
				return ret;
		}
	}
}

/* ---------------------------------------------------------------- the join */

/* Rank 0 says a thing once per provider: the first time this is asked for it. */
static bool is_noted(const char *prov)
{
	static const char *noted[MAX_PROVS];

	for (int i = 0; i < MAX_PROVS; i++) {
		if (noted[i] == prov)
			return true;
		if (!noted[i]) {
			noted[i] = prov;
			return false;
		}
	}
	return true;
}

/* The join's own messages move only while the CQ is read, so it is read in between. */
static int wait_join(struct rank *r)
{
	struct fi_eq_entry entry;
	double deadline = 0;
	uint32_t event;
	ssize_t n;
	int ret;

	for (unsigned polls = 1;; polls++) {
		n = fi_eq_read(r->eq, &event, &entry, sizeof(entry), 0);
		if (n >= 0 && event != FI_JOIN_COMPLETE)
			return rank_fail(r, -FI_EOTHER,
					 "join: EQ event %" PRIu32 " instead of FI_JOIN_COMPLETE",
					 event);
		if (n >= 0) {
			/*
			 * fi_join(3): the event's fid is the fid_mc the join returned. Only one
			 * join is outstanding, so a provider naming another fid is still
			 * understood; rank 0 says so, once per provider.
			 */
			if (entry.fid != &r->mc->fid && r->rank == 0 && !is_noted(r->prov))
				fprintf(stderr,
					"%s: %s: note: FI_JOIN_COMPLETE names fid %p, not the "
					"fid_mc %p that fi_join_collective returned\n",
					BENCH_NAME, r->prov, (void *) entry.fid,
					(void *) &r->mc->fid);
			return 0;
		}
		if (n == -FI_EAVAIL) {
			struct fi_eq_err_entry err = {0};

			if (fi_eq_readerr(r->eq, &err, 0) < 0)
				return rank_fail(r, -FI_EOTHER, "join: fi_eq_readerr failed");
			return rank_fail(r, err.err ? -err.err : -FI_EIO, "join failed: %s",
					 fi_strerror(err.err));
		}
		if (n != -FI_EAGAIN)
			return rank_call_fail(r, "fi_eq_read", (int) n);
		ret = cq_read_once(r, NULL);
		if (!ret && !(polls % CHECK_POLLS))
			ret = check_wait(r, &deadline, "join: FI_JOIN_COMPLETE");
		if (ret)
			return ret;
	}
}

/* names: the names of all ranks in rank order, each as long as fi_getname said. */
int rank_join(struct rank *r, const char *names)
{
	struct fi_av_set_attr attr = {
		.count = (size_t) r->nranks,
		.start_addr = 0,
		.end_addr = (fi_addr_t) r->nranks - 1,
		.stride = 1,
	};
	fi_addr_t addrs[MAX_RANKS], set_addr;
	int ret;

	ret = fi_av_insert(r->av, names, (size_t) r->nranks, addrs, 0, NULL);
	if (ret != r->nranks)
		return rank_fail(r, ret < 0 ? ret : -FI_EOTHER, "fi_av_insert: %d of %d names%s%s",
				 ret < 0 ? 0 : ret, r->nranks, ret < 0 ? ": " : "",
				 ret < 0 ? fi_strerror(-ret) : "");
	/* the AV set names ranks by fi_addr_t 0..N-1: a fresh FI_AV_TABLE must hand out those */
	for (int i = 0; i < r->nranks; i++)
		if (addrs[i] != (fi_addr_t) i)
			return rank_fail(r, -FI_EOTHER,
					 "fi_av_insert: rank %d is fi_addr_t %" PRIu64
					 " in an FI_AV_TABLE",
					 i, (uint64_t) addrs[i]);
	ret = fi_av_set(r->av, &attr, &r->set, NULL);
	if (ret)
		return rank_call_fail(r, "fi_av_set", ret);
	ret = fi_av_set_addr(r->set, &set_addr);
	if (ret)
		return rank_call_fail(r, "fi_av_set_addr", ret);
	ret = fi_join_collective(r->ep, set_addr, r->set, 0, &r->mc, NULL);
	if (ret)
		return rank_call_fail(r, "fi_join_collective", ret);
	ret = wait_join(r);
	if (ret)
		return ret;
	r->coll_addr = fi_mc_addr(r->mc);
	return 0;
}

/* ---------------------------------------------------------------- the tests */

/* Element j of rank q's contribution: every rank and element distinct, all 64 bits used. */
static uint64_t value(int q, size_t j)
{
	return ((uint64_t) (q + 1) << 48) + (uint64_t) j * 0x9e3779b97f4a7c15ULL;
}

static size_t test_count(const struct test *t)
{
	return t->size / sizeof(uint64_t);
}

static size_t result_len(const struct rank *r, const struct test *t)
{
	return t->op == OP_ALLGATHER ? t->size * (size_t) r->nranks : t->size;
}

static const char *op_call(enum coll_op op)
{
	switch (op) {
	case OP_BARRIER:
		return "fi_barrier";
	case OP_ALLREDUCE:
		return "fi_allreduce";
	case OP_BROADCAST:
		return "fi_broadcast";
	case OP_ALLGATHER:
		return "fi_allgather";
	}
	return "?";
}

/*
 * STATUS_SKIP with the reason when the provider says it does not do this operation for us;
 * 0 to run it. A provider without fi_query_collective is simply tried.
 */
int query(struct rank *r, const struct test *t, char *why)
{
	struct fi_collective_attr attr = {.op = FI_NOOP, .datatype = FI_UINT64};
	enum fi_collective_op coll = FI_BARRIER;
	int ret;

	if (!FI_CHECK_OP(r->domain->ops, struct fi_ops_domain, query_collective))
		return 0;
	switch (t->op) {
	case OP_BARRIER:
		attr.datatype = FI_VOID;
		break;
	case OP_ALLREDUCE:
		coll = FI_ALLREDUCE;
		attr.op = FI_SUM;
		break;
	case OP_BROADCAST:
		coll = FI_BROADCAST;
		break;
	case OP_ALLGATHER:
		coll = FI_ALLGATHER;
		break;
	}
	ret = fi_query_collective(r->domain, coll, &attr, 0);
	if (ret == -FI_ENOSYS || ret == -FI_EOPNOTSUPP) {
		snprintf(why, WHY_LEN, "fi_query_collective: %s", fi_strerror(-ret));
		return STATUS_SKIP;
	}
	if (ret) {
		/* a query that errs says nothing about the operation: try it */
		fprintf(stderr, "%s: %s rank %d: fi_query_collective(%s): %s; trying it anyway\n",
			BENCH_NAME, r->prov, r->rank, op_call(t->op), fi_strerror(-ret));
		return 0;
	}
	if (attr.max_members && attr.max_members < (size_t) r->nranks) {
		snprintf(why, WHY_LEN, "at most %zu members", attr.max_members);
		return STATUS_SKIP;
	}
	return 0;
}

static ssize_t post(struct rank *r, const struct test *t, struct fi_context *ctx)
{
	size_t count = test_count(t);

	switch (t->op) {
	case OP_BARRIER:
		return fi_barrier(r->ep, r->coll_addr, ctx);
	case OP_ALLREDUCE:
		return fi_allreduce(r->ep, r->send_buf, count, r->send_desc, r->recv_buf,
				    r->recv_desc, r->coll_addr, FI_UINT64, FI_SUM, 0, ctx);
	case OP_BROADCAST:
		return fi_broadcast(r->ep, r->recv_buf, count, r->recv_desc, r->coll_addr,
				    BCAST_ROOT, FI_UINT64, 0, ctx);
	case OP_ALLGATHER:
		return fi_allgather(r->ep, r->send_buf, count, r->send_desc, r->recv_buf,
				    r->recv_desc, r->coll_addr, FI_UINT64, 0, ctx);
	}
	return -FI_EINVAL;
}

/* One call, waited for. A full queue (-FI_EAGAIN) drains as the CQ is read. */
static int call(struct rank *r, const struct test *t)
{
	struct fi_context *ctx = &r->ctx[r->nposted++ & 1];
	double deadline = 0;
	ssize_t ret;

	for (unsigned polls = 1;; polls++) {
		ret = post(r, t, ctx);
		if (ret != -FI_EAGAIN)
			break;
		ret = cq_read_once(r, NULL);
		if (!ret && !(polls % CHECK_POLLS))
			ret = check_wait(r, &deadline, op_call(t->op));
		if (ret)
			return (int) ret;
	}
	if (ret)
		return rank_call_fail(r, op_call(t->op), (int) ret);
	return wait_comp(r, ctx, op_call(t->op));
}

/*
 * What the result and its guard are poisoned with: distinct per rank, so that a provider that
 * reads past one rank's buffer and writes that past another's is caught as well.
 */
static int guard_byte(int rank)
{
	return GUARD_BYTE ^ (rank & 0x3f);
}

/* The contribution, and a poisoned result with its guard (the root's broadcast data). */
static void fill(struct rank *r, const struct test *t)
{
	size_t count = test_count(t), len = result_len(r, t);

	for (size_t j = 0; j < count; j++)
		r->send_buf[j] = value(r->rank, j);
	memset(r->recv_buf, guard_byte(r->rank), len + GUARD_LEN);
	if (t->op == OP_BROADCAST && r->rank == BCAST_ROOT)
		memcpy(r->recv_buf, r->send_buf, len);
}

/* The result against a serial computation; the guard untouched; the contribution intact. */
static int verify(struct rank *r, const struct test *t, const char *when)
{
	size_t count = test_count(t), len = result_len(r, t);
	const unsigned char *guard = (const unsigned char *) r->recv_buf + len;
	uint64_t want;

	for (size_t j = 0; j < count; j++)
		if (r->send_buf[j] != value(r->rank, j))
			return rank_fail(r, -FI_EOTHER, "%s (%s): the send buffer changed at %zu",
					 t->name, when, j);
	switch (t->op) {
	case OP_BARRIER:
		break;
	case OP_ALLREDUCE:
		for (size_t j = 0; j < count; j++) {
			want = 0;
			for (int q = 0; q < r->nranks; q++)
				want += value(q, j);
			if (r->recv_buf[j] != want)
				return rank_fail(r, -FI_EOTHER,
						 "allreduce (%s): element %zu is %#" PRIx64
						 ", the sum is %#" PRIx64,
						 when, j, r->recv_buf[j], want);
		}
		break;
	case OP_BROADCAST:
		for (size_t j = 0; j < count; j++)
			if (r->recv_buf[j] != value(BCAST_ROOT, j))
				return rank_fail(r, -FI_EOTHER,
						 "broadcast (%s): element %zu is %#" PRIx64
						 ", the root sent %#" PRIx64,
						 when, j, r->recv_buf[j], value(BCAST_ROOT, j));
		break;
	case OP_ALLGATHER:
		for (int q = 0; q < r->nranks; q++)
			for (size_t j = 0; j < count; j++)
				if (r->recv_buf[(size_t) q * count + j] != value(q, j))
					return rank_fail(r, -FI_EOTHER,
							 "allgather (%s): element %zu of rank %d "
							 "is wrong",
							 when, j, q);
		break;
	}
	for (size_t i = 0; i < GUARD_LEN; i++)
		if (guard[i] != guard_byte(r->rank))
			return rank_fail(r, -FI_EOTHER,
					 "%s %zu B (%s): wrote past the result (byte %zu after it)",
					 t->name, t->size, when, i);
	return 0;
}

/*
 * A checked call, so that a wrong answer is reported rather than timed; the warm-up; a
 * barrier so that all ranks start the clock together; the timed calls, each waited for; and
 * the last answer checked again. us: this rank's average per timed call.
 */
int run_test(struct rank *r, const struct test *t, uint64_t iters, uint64_t warmup, double *us)
{
	double start, end;
	int ret;

	fill(r, t);
	ret = call(r, t);
	if (!ret)
		ret = verify(r, t, "first call");
	for (uint64_t i = 0; !ret && i < warmup; i++)
		ret = call(r, t);
	if (!ret)
		ret = call(r, &line_up);
	if (ret)
		return ret;
	start = now_us();
	for (uint64_t i = 0; !ret && i < iters; i++)
		ret = call(r, t);
	end = now_us();
	if (!ret)
		ret = verify(r, t, "after the timed calls");
	*us = (end - start) / (double) iters;
	return ret;
}

/* ---------------------------------------------------------------- ranks 1..N-1 */

static void send_result(int fd, int test, int status, double us, const char *why)
{
	struct result res = {.test = test, .status = status, .us = us};

	copy_why(res.why, why);
	/* rank 0 gone: nobody is left to report to */
	if (write_all(fd, &res, sizeof(res)))
		_exit(EXIT_FAILED);
}

/* Until rank 0 says what comes next; the CQ is read meanwhile, peers may need our progress. */
static int wait_cmd(struct rank *r, int fd, struct cmd *cmd)
{
	struct pollfd pfd = {.fd = fd, .events = POLLIN};
	double deadline = 0;
	int ret;

	for (unsigned polls = 1;; polls++) {
		ret = cq_read_once(r, NULL);
		if (ret)
			return ret;
		if (!(polls % FD_POLLS) && poll(&pfd, 1, 0) > 0) {
			if (read_all(fd, cmd, sizeof(*cmd)))
				return rank_fail(r, -FI_EIO, "rank 0 is gone");
			return 0;
		}
		if (!(polls % CHECK_POLLS)) {
			ret = check_wait(r, &deadline, "the next step from rank 0");
			if (ret)
				return ret;
		}
	}
}

static int read_names(struct rank *r, int fd, char *names)
{
	struct names_hdr hdr;

	if (read_all(fd, &hdr, sizeof(hdr)))
		return rank_fail(r, -FI_EIO, "rank 0 is gone");
	if (hdr.status)
		return -FI_ECANCELED; /* another rank failed; rank 0 knows why */
	if (!hdr.addrlen || hdr.addrlen > ADDR_MAX ||
	    read_all(fd, names, (size_t) hdr.addrlen * (size_t) r->nranks))
		return rank_fail(r, -FI_EIO, "bad name table from rank 0");
	return 0;
}

/*
 * After a failure: report it, then keep everything as it is (no fi_close: a provider that
 * failed may hang in it) until rank 0 ends the run. Exiting at once would break this rank's
 * connections, the other ranks would fail in turn and their reports could reach rank 0 first,
 * burying the cause. Rank 0 kills us; the watchdog and PR_SET_PDEATHSIG stand behind that.
 */
static int child_fail(int fd, int test, int status, const char *why)
{
	char c;

	send_result(fd, test, status < 0 ? status : -FI_EOTHER, 0, why);
	while (read(fd, &c, 1) > 0 || errno == EINTR)
		;
	return EXIT_FAILED;
}

/* A rank other than 0: the spec, the endpoint, the name, the join, then the tests rank 0 calls. */
int child_main(int fd)
{
	static char names[MAX_RANKS * ADDR_MAX];
	struct hello hello = {0};
	struct spec spec;
	struct rank r;
	struct cmd cmd;
	double us = 0;
	int ret, status;

	is_rank0 = false;
	signal(SIGPIPE, SIG_IGN);
	if (read_all(fd, &spec, sizeof(spec)) || spec.nranks < 1 || spec.nranks > MAX_RANKS)
		return EXIT_FAILED;
	spec.prov[PROV_LEN - 1] = '\0';
	bench_pin(BENCH_NAME, spec.cpu);
	watchdog_start(spec.timeout);
	rank_init(&r, spec.prov, spec.rank, spec.nranks, spec.timeout);

	ret = rank_open(&r);
	hello.status = ret;
	hello.addrlen = (uint32_t) r.addrlen;
	memcpy(hello.addr, r.addr, r.addrlen);
	copy_why(hello.why, r.why);
	if (write_all(fd, &hello, sizeof(hello)) || ret)
		return EXIT_FAILED;

	ret = read_names(&r, fd, names);
	if (ret == -FI_ECANCELED)
		return EXIT_FAILED;
	if (!ret)
		ret = rank_join(&r, names);
	if (ret)
		return child_fail(fd, STEP_JOIN, ret, r.why);
	send_result(fd, STEP_JOIN, 0, 0, "");

	for (;;) {
		char why[WHY_LEN] = "";

		ret = wait_cmd(&r, fd, &cmd);
		if (ret)
			return child_fail(fd, STEP_IDLE, ret, r.why);
		if (cmd.test == STEP_QUIT)
			break;
		if (cmd.test < 0 || cmd.test >= NTESTS)
			return EXIT_FAILED;
		status = query(&r, &tests[cmd.test], why);
		if (status == STATUS_SKIP) {
			send_result(fd, cmd.test, STATUS_SKIP, 0, why);
			continue;
		}
		ret = run_test(&r, &tests[cmd.test], spec.iters[cmd.test], spec.warmup[cmd.test],
			       &us);
		if (ret)
			return child_fail(fd, cmd.test, ret, r.why);
		send_result(fd, cmd.test, 0, us, "");
	}
	rank_close(&r);
	return 0;
}
