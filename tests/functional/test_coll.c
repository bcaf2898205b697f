/*
 * Collectives (fi_collective(3)) through the public API, one process per rank: fi_getinfo and
 * fi_query_collective; then passes of n = 2, 3, 4 ranks (every collective, every operation and
 * datatype fi_query_collective accepts, counts 0, 1, 7, 3n+1 and one above the eager size,
 * every root), and shorter ones of 8, 16 and 64 ranks. This file: the ranks (processes, the
 * names they swap, the meetings between sections) and what fi_getinfo says; the calls and their
 * results are in test_coll_data.c; the joins, the bad arguments and the loss of a member in
 * test_coll_join.c; closes refused while busy, an AV entry removed, the calls' flags, the msg
 * entry and FI_SELECTIVE_COMPLETION in test_coll_more.c.
 *
 * Ranks: LAYER_TEST_COLL_RANKS or the first argument, a comma-separated list
 * ("2,3,4,8,16,64" by default). Exit status as common.h says; 77 when fi_getinfo offers no
 * FI_COLLECTIVE.
 */
#include "test_coll.h"

#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define HANG_GUARD_S 120 /* per pass, re-armed at each (lt_begin's guard is for one program) */
#define DEFAULT_RANKS "2,3,4,8,16,64"
#define FULL_MAX_RANKS 4
#define SYNC_SLACK_MS 15000

struct coll_rank me;
struct fi_info *coll_hints;

/* ---- checks ---- */

static bool coll_vcheck(bool ok, long got, long want, bool is_ret, const char *file, int line,
			const char *fmt, va_list ap)
{
	char name[512];
	int len;

	/* outside a pass (me.n 0: what rank 0 checks before any), no prefix */
	len = me.n ? snprintf(name, sizeof(name), "n=%u rank %u: ", me.n, me.rank) : 0;
	vsnprintf(name + len, sizeof(name) - (size_t) len, fmt, ap);
	if (ok && me.rank)
		return true;
	if (is_ret)
		return lt_check_ret_at(got, want, file, line, "%s", name);
	return lt_check_at(ok, file, line, "%s", name);
}

bool coll_check_at(bool ok, const char *file, int line, const char *fmt, ...)
{
	va_list ap;
	bool ret;

	va_start(ap, fmt);
	ret = coll_vcheck(ok, 0, 0, false, file, line, fmt, ap);
	va_end(ap);
	return ret;
}

bool coll_check_ret_at(long got, long want, const char *file, int line, const char *fmt, ...)
{
	va_list ap;
	bool ret;

	va_start(ap, fmt);
	ret = coll_vcheck(got == want, got, want, true, file, line, fmt, ap);
	va_end(ap);
	return ret;
}

void coll_mismatch_at(unsigned *bad, const char *file, int line, const char *fmt, ...)
{
	va_list ap;

	(*bad)++;
	if (me.shown++ >= COLL_SHOWN_MAX)
		return;
	va_start(ap, fmt);
	coll_vcheck(false, 0, 0, false, file, line, fmt, ap);
	va_end(ap);
}

/* ---- completions ---- */

int coll_wait_cq(struct lt_cq *cq, void *ctx)
{
	struct lt_comp comp;

	if (!lt_cq_next(cq, &comp, LT_TIMEOUT_MS)) {
		me.is_desync = true;
		return COLL_TIMED_OUT;
	}
	if (comp.op_context != ctx) {
		me.is_desync = true;
		return COLL_OTHER_CTX;
	}
	if (comp.err)
		return comp.err;
	return comp.flags & FI_COLLECTIVE ? 0 : COLL_NO_FLAG;
}

int coll_wait(void *ctx)
{
	return coll_wait_cq(&me.ep.tx, ctx);
}

int coll_run(ssize_t posted, void *ctx)
{
	if (posted) {
		me.is_desync = true;
		return (int) posted;
	}
	return coll_wait(ctx);
}

const char *coll_str(int ret, char *buf, size_t len)
{
	if (ret == COLL_TIMED_OUT)
		snprintf(buf, len, "no completion within %d ms", LT_TIMEOUT_MS);
	else if (ret == COLL_OTHER_CTX)
		snprintf(buf, len, "a completion of another context came first");
	else if (ret == COLL_NO_FLAG)
		snprintf(buf, len, "the completion's flags lack FI_COLLECTIVE");
	else if (ret < 0)
		snprintf(buf, len, "posting returned %d (%s)", ret, fi_strerror(-ret));
	else if (ret > 0)
		snprintf(buf, len, "error completion %d (%s)", ret, fi_strerror(ret));
	else
		snprintf(buf, len, "ok");
	return buf;
}

/* ---- pipes between the ranks ---- */

ssize_t coll_pipe_recv(int fd, void *buf, size_t max, int timeout_ms)
{
	uint64_t deadline = lt_now_ms() + (uint64_t) timeout_ms;
	struct pollfd pfd = {.fd = fd, .events = POLLIN};

	for (;;) {
		/* a peer may need this rank's progress to finish what it is waiting for */
		lt_progress();
		if (poll(&pfd, 1, 1) > 0)
			return lt_pipe_recv(fd, buf, max, timeout_ms);
		if (lt_now_ms() > deadline)
			return -FI_ETIMEDOUT;
	}
}

struct sync_msg {
	uint32_t failed;
	uint32_t is_desync;
};

/*
 * The ranks meet after a section: every rank tells rank 0 whether it lost step with the others
 * (a post failed or a wait timed out), and rank 0 tells everyone whether to go on.
 */
static bool coll_sync(const char *section)
{
	struct sync_msg msg = {lt_failed(), me.is_desync};
	uint64_t deadline = lt_now_ms() + LT_TIMEOUT_MS + SYNC_SLACK_MS;
	char go = !me.is_desync;

	me.shown = 0;
	if (me.rank) {
		if (lt_pipe_send(me.wfd, &msg, sizeof(msg)))
			return false;
		/* 'g' is the word of a section this rank left early: not the verdict */
		do {
			if (coll_pipe_recv(me.rfd, &go, 1, LT_TIMEOUT_MS + 2 * SYNC_SLACK_MS) != 1)
				return false;
		} while (go == 'g');
		return go;
	}
	for (uint32_t r = 1; r < me.n; r++) {
		int left = (int) (deadline - lt_now_ms());

		if (!me.is_alive[r - 1])
			continue;
		if (coll_pipe_recv(me.children[r - 1].from_child, &msg, sizeof(msg),
				   left > 0 ? left : 1) != sizeof(msg)) {
			CHECK(false, "rank %u reached the end of section %s", r, section);
			me.is_alive[r - 1] = false;
			go = 0;
		} else if (msg.is_desync) {
			go = 0;
		}
	}
	if (!go)
		lt_note("n=%u: the ranks lost step in section %s: the pass stops here", me.n,
			section);
	for (uint32_t r = 1; r < me.n; r++) {
		if (me.is_alive[r - 1])
			lt_pipe_send(me.children[r - 1].to_child, &go, 1);
	}
	return go;
}

/* ---- one pass: setup, sections, teardown (every rank) ---- */

struct name_msg {
	uint32_t len;
	char addr[LT_ADDR_MAX];
};

/*
 * Opens this rank's endpoint (an EQ bound for the joins) and swaps names through rank 0: every
 * rank inserts all of them in rank order. A rank that failed sends an empty name; rank 0 always
 * sends the table, so nobody waits for what will not come.
 */
static bool rank_setup(void)
{
	static struct name_msg names[COLL_MAX_RANKS];
	struct lt_ep_opts opts = {.no_enable = true};
	struct fi_eq_attr eq_attr = {.size = 64, .wait_obj = FI_WAIT_NONE};
	bool ok;
	fi_addr_t fi_addr;
	uint32_t bad = 0;

	ok = CHECK_RET(lt_getinfo(coll_hints, &me.info), 0, "fi_getinfo") &&
	     CHECK_RET(lt_dom_open(me.info, &me.dom), 0, "open the domain") &&
	     CHECK_RET(lt_ep_open(&me.dom, &opts, &me.ep), 0, "open the endpoint") &&
	     CHECK_RET(fi_eq_open(me.dom.fabric, &eq_attr, &me.eq, NULL), 0, "open an EQ") &&
	     CHECK_RET(fi_ep_bind(me.ep.ep, &me.eq->fid, 0), 0, "bind it to the endpoint") &&
	     CHECK_RET(lt_ep_enable(&me.ep), 0, "enable the endpoint");
	memset(names, 0, sizeof(names));
	if (me.rank) {
		if (lt_pipe_send(me.wfd, me.ep.addr, ok ? me.ep.addrlen : 0) ||
		    lt_pipe_recv(me.rfd, names, sizeof(names), 2 * LT_TIMEOUT_MS) != sizeof(names))
			return false;
	} else {
		names[0].len = ok ? (uint32_t) me.ep.addrlen : 0;
		memcpy(names[0].addr, me.ep.addr, me.ep.addrlen);
		for (uint32_t r = 1; r < me.n; r++) {
			ssize_t len = lt_pipe_recv(me.children[r - 1].from_child, names[r].addr,
						   LT_ADDR_MAX, LT_TIMEOUT_MS);

			if (!CHECK(len > 0, "rank %u's name came through its pipe", r))
				len = 0;
			names[r].len = (uint32_t) len;
		}
		for (uint32_t r = 1; r < me.n; r++)
			lt_pipe_send(me.children[r - 1].to_child, names, sizeof(names));
	}
	for (uint32_t r = 0; r < me.n; r++) {
		if (!names[r].len)
			return false;
		me.namelen[r] = names[r].len;
		memcpy(me.names[r], names[r].addr, names[r].len);
	}
	if (!ok)
		return false;
	for (uint32_t r = 0; r < me.n; r++)
		bad += lt_av_insert(&me.ep, me.names[r], &fi_addr) || fi_addr != r;
	return CHECK(!bad, "every rank's name inserted in rank order: fi_addr i is rank i");
}

static void rank_teardown(void)
{
	if (me.world)
		coll_close(&me.world->fid);
	if (me.world_set)
		coll_close(&me.world_set->fid);
	me.world = NULL;
	me.world_set = NULL;
	lt_ep_close(&me.ep);
	if (me.eq)
		fi_close(&me.eq->fid);
	me.eq = NULL;
	lt_dom_close(&me.dom);
	fi_freeinfo(me.info);
	me.info = NULL;
}

enum when { ALWAYS, FULL, DEAD };

static const struct section {
	const char *name;
	void (*fn)(void);
	enum when when;
} sections[] = {
	{"join the world", join_world, ALWAYS},
	{"join with FI_UNIVERSE", join_universe, ALWAYS},
	{"join alone", join_self, ALWAYS},
	{"barrier", data_barrier, ALWAYS},
	{"allreduce", data_allreduce, ALWAYS},
	{"reduce", data_reduce, FULL},
	{"reduce_scatter", data_reduce_scatter, FULL},
	{"data movement", data_movement, ALWAYS},
	{"large counts", data_large, FULL},
	{"outstanding", data_outstanding, ALWAYS},
	{"tag space", data_tag_space, ALWAYS},
	{"subsets", join_subsets, ALWAYS},
	{"join from a group", join_from_parent, ALWAYS},
	{"join during traffic", join_during_traffic, ALWAYS},
	{"two groups", join_two_groups, ALWAYS},
	{"join and close again", join_cycles, FULL},
	{"bad input", bad_input, ALWAYS},
	{"close while busy", more_close_busy, FULL},
	{"AV removal", more_av_remove, FULL},
	{"flags and the msg entry", more_flags_msg, FULL},
	{"selective completion", more_selective, FULL},
	{"blocking waits", more_blocking, FULL},
	{"counts that differ", more_count_mismatch, FULL},
	{"dead member", dead_member, DEAD},
};

static void run_rank(void)
{
	bool go = rank_setup();

	/* the setup's own meeting: nobody goes on without every name */
	me.is_desync = !go;
	go = coll_sync("setup");
	for (size_t i = 0; go && i < sizeof(sections) / sizeof(sections[0]); i++) {
		const struct section *s = &sections[i];

		if ((s->when == FULL && !me.is_full) || (s->when == DEAD && me.n != 3))
			continue;
		s->fn();
		if (s->when != DEAD)
			go = coll_sync(s->name);
	}
	rank_teardown();
}

static int child_main(int rfd, int wfd)
{
	uint32_t cfg[3], failed;

	memset(&me, 0, sizeof(me));
	me.rfd = rfd;
	me.wfd = wfd;
	if (lt_pipe_recv(rfd, cfg, sizeof(cfg), LT_TIMEOUT_MS) != sizeof(cfg))
		return 2;
	me.rank = cfg[0];
	me.n = cfg[1];
	me.is_full = cfg[2];
	run_rank();
	failed = lt_failed();
	lt_pipe_send(wfd, &failed, sizeof(failed));
	return failed ? 1 : 0;
}

static void run_pass(uint32_t n)
{
	struct lt_child children[COLL_MAX_RANKS];
	bool is_alive[COLL_MAX_RANKS] = {0};
	uint32_t cfg[3], failed;
	int status;

	memset(children, 0, sizeof(children));

	alarm(HANG_GUARD_S);
	lt_note("---- %u ranks ----", n);
	memset(&me, 0, sizeof(me));
	me.n = n;
	me.is_full = n <= FULL_MAX_RANKS;
	me.children = children;
	me.is_alive = is_alive;
	/* children first: they must not inherit this process's sockets */
	for (uint32_t r = 1; r < n; r++) {
		if (!LT_CHECK_RET(lt_child_spawn("rank", &children[r - 1]), 0,
				  "n=%u: start rank %u", n, r)) {
			memset(is_alive, 0, sizeof(is_alive));
			goto out;
		}
		is_alive[r - 1] = true;
		cfg[0] = r;
		cfg[1] = n;
		cfg[2] = me.is_full;
		lt_pipe_send(children[r - 1].to_child, cfg, sizeof(cfg));
	}
	run_rank();
out:
	for (uint32_t r = 1; r < n; r++) {
		if (!children[r - 1].pid)
			continue;
		if (!is_alive[r - 1]) {
			lt_child_reap(&children[r - 1], 1000, true);
			continue;
		}
		failed = 1;
		if (lt_pipe_recv(children[r - 1].from_child, &failed, sizeof(failed),
				 LT_TIMEOUT_MS) != sizeof(failed))
			failed = ~0u;
		status = lt_child_reap(&children[r - 1], LT_TIMEOUT_MS, false);
		LT_CHECK(!failed && status == 0,
			 "n=%u: rank %u passed all its checks (%d failed, exit status %#x)", n, r,
			 (int) failed, status);
	}
}

/* ---- what the provider says before any rank runs ---- */

static void check_getinfo(struct fi_info *info)
{
	struct fi_info *hints = lt_hints(FI_MSG | FI_TAGGED), *plain = NULL;

	LT_CHECK(info->caps & FI_COLLECTIVE, "fi_getinfo offers FI_COLLECTIVE");
	LT_CHECK(info->ep_attr->type == FI_EP_RDM, "on FI_EP_RDM");
	if (LT_CHECK_RET(lt_getinfo(hints, &plain), 0, "fi_getinfo without FI_COLLECTIVE"))
		LT_CHECK(plain->ep_attr->mem_tag_format == info->ep_attr->mem_tag_format,
			 "mem_tag_format is the same with and without FI_COLLECTIVE (%#llx, "
			 "%#llx): collectives take no tag bits",
			 (unsigned long long) info->ep_attr->mem_tag_format,
			 (unsigned long long) plain->ep_attr->mem_tag_format);
	fi_freeinfo(plain);
	fi_freeinfo(hints);
}

/* An endpoint of hints without FI_COLLECTIVE joins nothing and runs no collective. */
static long barrier_without_cap(void *arg)
{
	struct fi_context2 ctx;

	return fi_barrier(me.ep.ep, *(fi_addr_t *) arg, &ctx);
}

static void check_no_cap(struct fi_info *hints)
{
	struct lt_ep_opts opts = {.no_enable = true};
	struct fi_eq_attr eq_attr = {.wait_obj = FI_WAIT_NONE};
	struct fid_av_set *set = NULL;
	struct fid_mc *mc = NULL;
	struct fi_context2 ctx;
	fi_addr_t self, a;
	char got[128];
	int status, ret;
	long lret;

	me.n = 0;
	me.info = NULL;
	if (!LT_CHECK_RET(lt_getinfo(hints, &me.info), 0, "no FI_COLLECTIVE: fi_getinfo") ||
	    !LT_CHECK_RET(lt_dom_open(me.info, &me.dom), 0, "no FI_COLLECTIVE: domain") ||
	    !LT_CHECK_RET(lt_ep_open(&me.dom, &opts, &me.ep), 0, "no FI_COLLECTIVE: endpoint") ||
	    !LT_CHECK_RET(fi_eq_open(me.dom.fabric, &eq_attr, &me.eq, NULL), 0, "an EQ") ||
	    !LT_CHECK_RET(fi_ep_bind(me.ep.ep, &me.eq->fid, 0), 0, "bound") ||
	    !LT_CHECK_RET(lt_ep_enable(&me.ep), 0, "enabled") ||
	    !LT_CHECK_RET(lt_av_insert(&me.ep, me.ep.addr, &self), 0, "its own address inserted"))
		goto out;
	set = coll_range_set(0, 0, 1);
	a = set ? coll_set_addr(set) : FI_ADDR_NOTAVAIL;
	ret = fi_join_collective(me.ep.ep, a, set, 0, &mc, &ctx);
	LT_CHECK(ret < 0, "no FI_COLLECTIVE: fi_join_collective is refused (%d)", ret);
	if (!ret)
		fi_close(&mc->fid);
	status = lt_guarded(barrier_without_cap, &a, 10000, &lret);
	LT_CHECK(status == 0 && lret < 0, "no FI_COLLECTIVE: fi_barrier is refused (%s)",
		 lt_guarded_str(status, lret, got, sizeof(got)));
out:
	if (set)
		fi_close(&set->fid);
	rank_teardown();
}

/* ---- main ---- */

int main(int argc, char **argv)
{
	const char *ranks = getenv("LAYER_TEST_COLL_RANKS"), *role;
	struct fi_info *info = NULL, *plain;
	char *list, *tok, *save = NULL;
	int rfd, wfd, ret;

	coll_hints = lt_hints(FI_MSG | FI_TAGGED | FI_COLLECTIVE);
	role = lt_child_role(argc, argv, &rfd, &wfd);
	if (role)
		return child_main(rfd, wfd);

	lt_begin(argv[0]);
	ret = lt_getinfo(coll_hints, &info);
	if (ret == -FI_ENODATA) {
		/* the provider not there at all: the usual skip */
		plain = lt_hints(FI_MSG | FI_TAGGED);
		fi_freeinfo(lt_getinfo_or_skip(plain));
		fi_freeinfo(plain);
		/* there, but without collectives: say so loudly, nothing was tested */
		fprintf(stderr,
			"test_coll: %s is offered, but not with FI_COLLECTIVE: no "
			"collective was tested\n",
			lt_prov());
		lt_skip("fi_getinfo offers the provider, but not with FI_COLLECTIVE (hints "
			"FI_MSG|FI_TAGGED|FI_COLLECTIVE, FI_EP_RDM)");
	}
	if (!LT_CHECK_RET(ret, 0, "fi_getinfo with FI_COLLECTIVE"))
		return lt_end();
	check_getinfo(info);
	if (LT_CHECK_RET(lt_dom_open(info, &me.dom), 0, "open a domain"))
		check_query();
	lt_dom_close(&me.dom);
	fi_freeinfo(info);

	plain = lt_hints(FI_MSG | FI_TAGGED);
	check_no_cap(plain);
	fi_freeinfo(plain);

	if (argc > 1)
		ranks = argv[1];
	list = strdup(ranks && *ranks ? ranks : DEFAULT_RANKS);
	for (tok = strtok_r(list, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		long n = strtol(tok, NULL, 10);

		if (!LT_CHECK(n >= 2 && n <= COLL_MAX_RANKS, "%ld ranks: between 2 and %d", n,
			      COLL_MAX_RANKS))
			continue;
		run_pass((uint32_t) n);
	}
	free(list);
	fi_freeinfo(coll_hints);
	return lt_end();
}
