/*
 * Groups for test_coll.c: joins on AV sets made every way fi_av_set(3) has (a range, a stride,
 * FI_UNIVERSE, union, intersection, difference, one member) and from another group; the
 * FI_JOIN_COMPLETE event read with and without a buffer; several groups open and used at once;
 * a group joined and closed 300 times; the joins and calls that must be refused at once; and
 * a member that dies while the others reduce.
 */
#include "test_coll.h"

#include <inttypes.h>

#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>

#define CYCLES 300

/* ---- helpers ---- */

/* The next event of eq (buf may be NULL, len 0): fi_eq_read's return, -err of an error event. */
static ssize_t wait_event(struct fid_eq *eq, uint32_t *event, void *buf, size_t len)
{
	uint64_t deadline = lt_now_ms() + LT_TIMEOUT_MS;
	struct fi_eq_err_entry err;
	ssize_t ret;

	for (;;) {
		ret = fi_eq_read(eq, event, buf, len, 0);
		if (ret == -FI_EAVAIL) {
			memset(&err, 0, sizeof(err));
			ret = fi_eq_readerr(eq, &err, 0);
			return ret < 0 ? ret : -(ssize_t) (err.err ? err.err : FI_EOTHER);
		}
		if (ret != -FI_EAGAIN)
			return ret;
		if (lt_now_ms() > deadline)
			return -FI_ETIMEDOUT;
		/* joins progress with the endpoint: the EQ alone need not move them */
		lt_progress();
	}
}

struct fid_mc *coll_join_on(struct fid_ep *ep, struct fid_eq *eq, fi_addr_t coll_addr,
			    const struct fid_av_set *set, const char *name)
{
	struct fi_eq_entry entry = {0};
	struct fi_context2 ctx;
	struct fid_mc *mc = NULL;
	uint32_t event = 0;
	ssize_t ret;

	ret = fi_join_collective(ep, coll_addr, set, 0, &mc, &ctx);
	if (ret) {
		CHECK_RET(ret, 0, "%s: fi_join_collective", name);
		me.is_desync = true;
		return NULL;
	}
	ret = wait_event(eq, &event, &entry, sizeof(entry));
	if (ret == (ssize_t) sizeof(entry) && event == FI_JOIN_COMPLETE && entry.fid == &mc->fid &&
	    entry.context == &ctx)
		return mc;
	CHECK(false,
	      "%s: FI_JOIN_COMPLETE with the group's fid and the join's context: read %zd "
	      "(%s), event %u, fid %s, context %s",
	      name, ret, ret < 0 ? fi_strerror((int) -ret) : "bytes", event,
	      entry.fid == &mc->fid ? "right" : "wrong", entry.context == &ctx ? "right" : "wrong");
	me.is_desync = true;
	if (ret != -FI_ETIMEDOUT)
		fi_close(&mc->fid);
	return NULL;
}

struct fid_mc *coll_join(fi_addr_t coll_addr, const struct fid_av_set *set, const char *name)
{
	return coll_join_on(me.ep.ep, me.eq, coll_addr, set, name);
}

static struct fid_av_set *open_set(struct fid_av *av, struct fi_av_set_attr *attr, const char *what)
{
	struct fid_av_set *set = NULL;

	if (!CHECK_RET(fi_av_set(av, attr, &set, NULL), 0, "fi_av_set: %s", what)) {
		me.is_desync = true;
		return NULL;
	}
	return set;
}

struct fid_av_set *coll_range_set(uint32_t start, uint32_t end, uint32_t stride)
{
	struct fi_av_set_attr attr = {
		.count = (end - start) / stride + 1,
		.start_addr = start,
		.end_addr = end,
		.stride = stride,
	};
	char what[64];

	snprintf(what, sizeof(what), "ranks %u to %u, stride %u", start, end, stride);
	return open_set(me.ep.av, &attr, what);
}

static struct fid_av_set *empty_set(void)
{
	struct fi_av_set_attr attr = {
		.count = me.n,
		.start_addr = FI_ADDR_NOTAVAIL,
		.end_addr = FI_ADDR_NOTAVAIL,
	};

	return open_set(me.ep.av, &attr, "empty");
}

fi_addr_t coll_set_addr(struct fid_av_set *set)
{
	fi_addr_t a = FI_ADDR_NOTAVAIL;
	int ret = fi_av_set_addr(set, &a);

	if (ret || a == FI_ADDR_NOTAVAIL) {
		CHECK_RET(ret, 0, "fi_av_set_addr gives an address");
		me.is_desync = true;
		return FI_ADDR_NOTAVAIL;
	}
	return a;
}

void coll_close(struct fid *fid)
{
	size_t fclass = fid->fclass;
	int ret = fi_close(fid);

	if (ret)
		CHECK_RET(ret, 0, "fi_close of a fid of class %zu", fclass);
}

static void close_mc(struct fid_mc **mc)
{
	if (*mc)
		coll_close(&(*mc)->fid);
	*mc = NULL;
}

static void close_set(struct fid_av_set **set)
{
	if (*set)
		coll_close(&(*set)->fid);
	*set = NULL;
}

/* A join of the set's own address that the set's members make. */
static struct fid_mc *join_set(struct fid_av_set *set, const char *name)
{
	fi_addr_t a = set ? coll_set_addr(set) : FI_ADDR_NOTAVAIL;

	if (a == FI_ADDR_NOTAVAIL) {
		me.is_desync = true;
		return NULL;
	}
	return coll_join(a, set, name);
}

bool coll_sum_ok(fi_addr_t group, uint32_t mine, uint32_t total, const char *name)
{
	uint32_t in[5], out[5] = {0}, wrong = 0;
	struct fi_context2 ctx;
	char why[128];
	int ret;

	for (uint32_t i = 0; i < 5; i++)
		in[i] = mine * (i + 1);
	ret = coll_run(LT_RETRY(fi_allreduce(me.ep.ep, in, 5, NULL, out, NULL, group, FI_UINT32,
					     FI_SUM, 0, &ctx)),
		       &ctx);
	for (uint32_t i = 0; i < 5 && !ret; i++)
		wrong += out[i] != total * (i + 1);
	return CHECK(!ret && !wrong, "%s: allreduce FI_SUM gives %u (%s, %u wrong)", name, total,
		     coll_str(ret, why, sizeof(why)), wrong);
}

bool coll_members_ok(fi_addr_t group, const uint32_t *ranks, uint32_t cnt, const char *name)
{
	uint32_t out[COLL_MAX_RANKS + 1], wrong = 0;
	struct fi_context2 ctx;
	char why[128];
	int ret;

	memset(out, 0xff, sizeof(out));
	ret = coll_run(LT_RETRY(fi_allgather(me.ep.ep, &me.rank, 1, NULL, out, NULL, group,
					     FI_UINT32, 0, &ctx)),
		       &ctx);
	for (uint32_t i = 0; i < cnt && !ret; i++)
		wrong += out[i] != ranks[i];
	wrong += out[cnt] != 0xffffffffu;
	return CHECK(!ret && !wrong,
		     "%s: allgather gives the %u members in the set's order (%s, "
		     "%u wrong)",
		     name, cnt, coll_str(ret, why, sizeof(why)), wrong);
}

/* ---- the group of every rank ---- */

void join_world(void)
{
	uint32_t all[COLL_MAX_RANKS];

	for (uint32_t r = 0; r < me.n; r++)
		all[r] = r;
	me.world_set = coll_range_set(0, me.n - 1, 1);
	me.world = join_set(me.world_set, "world");
	if (!CHECK(me.world,
		   "world (ranks 0 to %u, stride 1): joined, FI_JOIN_COMPLETE with the "
		   "group's fid and the join's context",
		   me.n - 1))
		return;
	me.world_addr = fi_mc_addr(me.world);
	CHECK(me.world_addr != FI_ADDR_NOTAVAIL, "fi_mc_addr gives the group's address");
	if (coll_sum_ok(me.world_addr, me.rank + 1, me.n * (me.n + 1) / 2, "world"))
		coll_members_ok(me.world_addr, all, me.n, "world");
}

void join_universe(void)
{
	struct fi_av_set_attr attr = {
		.start_addr = FI_ADDR_NOTAVAIL,
		.end_addr = FI_ADDR_NOTAVAIL,
		.flags = FI_UNIVERSE,
	};
	struct fid_av_set *set = open_set(me.ep.av, &attr, "FI_UNIVERSE");
	fi_addr_t a = set ? coll_set_addr(set) : FI_ADDR_NOTAVAIL;
	struct fid_mc *mc = NULL;
	struct fi_context2 ctx;
	uint32_t event = 0;
	ssize_t ret;

	if (a == FI_ADDR_NOTAVAIL)
		goto out;
	ret = fi_join_collective(me.ep.ep, a, set, 0, &mc, &ctx);
	if (!CHECK_RET(ret, 0, "FI_UNIVERSE: fi_join_collective")) {
		me.is_desync = true;
		goto out;
	}
	/* fabtests' fi_multinode_coll reads the event without a buffer */
	ret = wait_event(me.eq, &event, NULL, 0);
	if (!CHECK(ret == 0 && event == FI_JOIN_COMPLETE,
		   "FI_UNIVERSE: fi_eq_read without a buffer gives 0 and FI_JOIN_COMPLETE (%zd, "
		   "event %u)",
		   ret, event)) {
		me.is_desync = true;
		if (ret != -FI_ETIMEDOUT)
			close_mc(&mc);
		mc = NULL;
		goto out;
	}
	CHECK_RET(fi_eq_read(me.eq, &event, NULL, 0, 0), -FI_EAGAIN,
		  "FI_UNIVERSE: and the event was taken");
	coll_sum_ok(fi_mc_addr(mc), me.rank + 1, me.n * (me.n + 1) / 2, "FI_UNIVERSE");
	close_mc(&mc);
out:
	close_set(&set);
}

/* ---- one member ---- */

void join_self(void)
{
	struct fid_av_set *set = coll_range_set(me.rank, me.rank, 1), *set2 = NULL;
	struct fid_mc *mc = join_set(set, "alone"), *mc2 = NULL;
	struct fi_context2 ctx;
	uint32_t buf[7];
	struct lt_ep ep2;
	fi_addr_t self2, a2;
	char why[128];
	int ret;

	if (CHECK(mc, "a group of this rank alone: joined")) {
		fi_addr_t g = fi_mc_addr(mc);

		coll_sum_ok(g, me.rank + 1, me.rank + 1, "alone");
		coll_members_ok(g, &me.rank, 1, "alone");
		for (uint32_t i = 0; i < 7; i++)
			buf[i] = me.rank * 100 + i;
		ret = coll_run(LT_RETRY(fi_broadcast(me.ep.ep, buf, 7, NULL, g, me.rank, FI_UINT32,
						     0, &ctx)),
			       &ctx);
		CHECK(!ret && buf[6] == me.rank * 100 + 6, "alone: broadcast from itself (%s)",
		      coll_str(ret, why, sizeof(why)));
		close_mc(&mc);
	}
	close_set(&set);

	/* an endpoint with FI_COLLECTIVE but no EQ to report the join */
	if (!CHECK_RET(lt_ep_open(&me.dom, NULL, &ep2), 0, "an endpoint without an EQ"))
		return;
	if (CHECK_RET(lt_av_insert(&ep2, ep2.addr, &self2), 0, "its own address in its AV")) {
		struct fi_av_set_attr attr = {
			.count = 1, .start_addr = self2, .end_addr = self2, .stride = 1};

		set2 = open_set(ep2.av, &attr, "the endpoint without an EQ");
		a2 = set2 ? coll_set_addr(set2) : FI_ADDR_NOTAVAIL;
		ret = fi_join_collective(ep2.ep, a2, set2, 0, &mc2, &ctx);
		CHECK(ret < 0, "without an EQ, fi_join_collective is refused (%d)", ret);
		if (!ret)
			close_mc(&mc2);
		close_set(&set2);
	}
	lt_ep_close(&ep2);
}

/* ---- sets made with union, intersection, difference and a stride ---- */

void join_subsets(void)
{
	struct fid_av_set *evens = coll_range_set(0, me.n - 1, 2);
	struct fid_av_set *odds = coll_range_set(1, me.n - 1, 2); /* the stride set */
	struct fid_av_set *uni = empty_set(), *inter = coll_range_set(0, me.n - 1, 1);
	struct fid_av_set *diff = coll_range_set(0, me.n - 1, 1);
	struct fid_mc *all = NULL, *mine = NULL, *odd2 = NULL, *stray = NULL;
	bool is_even = me.rank % 2 == 0;
	uint32_t members[COLL_MAX_RANKS], cnt = 0, sum = 0, buf[4] = {0};
	static struct fi_context2 ctx;
	char why[128];
	int ret;

	if (!evens || !odds || !uni || !inter || !diff)
		goto out;
	for (uint32_t r = is_even ? 0 : 1; r < me.n; r += 2) {
		members[cnt++] = r;
		sum += r + 1;
	}
	if (!CHECK_RET(fi_av_set_union(uni, evens), 0, "fi_av_set_union with the evens") ||
	    !CHECK_RET(fi_av_set_union(uni, odds), 0, "and with the odds") ||
	    !CHECK_RET(fi_av_set_intersect(inter, evens), 0, "fi_av_set_intersect: the evens") ||
	    !CHECK_RET(fi_av_set_diff(diff, evens), 0, "fi_av_set_diff: the odds")) {
		me.is_desync = true;
		goto out;
	}

	/* the union: every rank, the evens first */
	all = join_set(uni, "union");
	if (!CHECK(all, "union of the evens and the odds: joined"))
		goto out;
	coll_sum_ok(fi_mc_addr(all), me.rank + 1, me.n * (me.n + 1) / 2, "union");
	if (me.rank == me.n - 1)
		buf[3] = 77;
	ret = coll_run(LT_RETRY(fi_broadcast(me.ep.ep, buf, 4, NULL, fi_mc_addr(all), me.n - 1,
					     FI_UINT32, 0, &ctx)),
		       &ctx);
	CHECK(!ret && buf[3] == 77, "union: broadcast from rank %u (%s)", me.n - 1,
	      coll_str(ret, why, sizeof(why)));
	if (me.is_desync)
		goto out;

	/* a rank not in a set is refused at once */
	ret = fi_join_collective(me.ep.ep, coll_set_addr(is_even ? odds : inter),
				 is_even ? odds : inter, 0, &stray, &ctx);
	CHECK_RET(ret, -FI_EINVAL, "fi_join_collective of a set without this rank");
	if (!ret)
		close_mc(&stray);

	/* evens: the intersection; odds: the stride set, then the difference */
	mine = join_set(is_even ? inter : odds, is_even ? "intersection" : "stride 2 from 1");
	if (!CHECK(mine, "%s: joined",
		   is_even ? "intersection (the evens)" : "stride set (the odds)"))
		goto out;
	coll_sum_ok(fi_mc_addr(mine), me.rank + 1, sum, is_even ? "evens" : "odds");
	coll_members_ok(fi_mc_addr(mine), members, cnt, is_even ? "evens" : "odds");
	ret = LT_RETRY(fi_broadcast(me.ep.ep, buf, 4, NULL, fi_mc_addr(mine), is_even ? 1 : 0,
				    FI_UINT32, 0, &ctx));
	CHECK_RET(ret, -FI_EINVAL, "broadcast from a root outside the group");
	if (!ret)
		me.is_desync = true;
	if (!is_even && !me.is_desync) {
		odd2 = join_set(diff, "difference");
		if (CHECK(odd2, "the difference (the odds again): joined beside the stride set"))
			coll_sum_ok(fi_mc_addr(odd2), 100 * (me.rank + 1), 100 * sum, "difference");
		coll_sum_ok(fi_mc_addr(mine), me.rank + 1, sum, "stride set, after that");
	}
out:
	close_mc(&odd2);
	close_mc(&mine);
	close_mc(&all);
	close_set(&evens);
	close_set(&odds);
	close_set(&uni);
	close_set(&inter);
	close_set(&diff);
}

/* ---- a group joined from another group ---- */

void join_from_parent(void)
{
	struct fid_av_set *set = coll_range_set(0, me.n - 1, 1);
	uint32_t members[COLL_MAX_RANKS], cnt = 0, sum = 0;
	static struct fi_context2 ctx;
	struct fid_mc *mc = NULL;
	int ret;

	if (!set || !CHECK_RET(fi_av_set_remove(set, 1), 0, "fi_av_set_remove of rank 1")) {
		me.is_desync = true;
		goto out;
	}
	for (uint32_t r = 0; r < me.n; r++) {
		if (r != 1) {
			members[cnt++] = r;
			sum += r + 1;
		}
	}
	if (me.rank == 1) {
		ret = fi_join_collective(me.ep.ep, me.world_addr, set, 0, &mc, &ctx);
		CHECK_RET(ret, -FI_EINVAL, "from the world: a set without this rank is refused");
		if (!ret)
			close_mc(&mc);
		goto out;
	}
	mc = coll_join(me.world_addr, set, "from the world");
	if (!CHECK(mc, "a group of every rank but rank 1, joined with the world's address"))
		goto out;
	coll_sum_ok(fi_mc_addr(mc), me.rank + 1, sum, "from the world");
	coll_members_ok(fi_mc_addr(mc), members, cnt, "from the world");
	close_mc(&mc);
out:
	close_set(&set);
}

/* ---- groups open and used at once ---- */

/*
 * A join while a call of a joined group is on its way: the join's messages and the call's
 * share the connections and interleave; both complete, the call with the right sum, and the
 * new group works.
 */
void join_during_traffic(void)
{
	uint64_t in = me.rank + 1, out = 0, want = (uint64_t) me.n * (me.n + 1) / 2;
	struct fid_av_set *set = coll_range_set(0, me.n - 1, 1);
	struct fid_mc *mc = NULL;
	struct fi_context2 ctx;
	char why[128];
	ssize_t posted;
	int ret;

	posted = LT_RETRY(fi_allreduce(me.ep.ep, &in, 1, NULL, &out, NULL, me.world_addr,
				       FI_UINT64, FI_SUM, 0, &ctx));
	if (!CHECK_RET(posted, 0, "join during traffic: an allreduce on the world posted")) {
		me.is_desync = true;
		goto out;
	}
	mc = join_set(set, "join during traffic: a new group");
	ret = coll_wait(&ctx);
	CHECK(!ret && out == want, "join during traffic: the allreduce completes (%s) with %" PRIu64
	      " (want %" PRIu64 ")", coll_str(ret, why, sizeof(why)), out, want);
	if (mc)
		coll_sum_ok(fi_mc_addr(mc), me.rank + 1, (uint32_t) want,
			    "join during traffic: the new group");
out:
	close_mc(&mc);
	close_set(&set);
}

void join_two_groups(void)
{
	uint32_t last_b = me.n > 2 ? me.n - 2 : 1;
	struct fid_av_set *sa = coll_range_set(0, me.n - 1, 1);
	struct fid_av_set *sb = coll_range_set(0, last_b, 1);
	bool in_b = me.rank <= last_b;
	struct fid_mc *a = NULL, *b = NULL;
	uint32_t in[3][5], out[3][5], want[3] = {0};
	struct fi_context2 ctx[3];
	fi_addr_t addr[3];
	int order[3], posted = 0, done = 0, wrong = 0;
	struct lt_comp comp;

	a = join_set(sa, "group A (every rank)");
	if (!CHECK(a, "group A (every rank): joined while the world is open"))
		goto out;
	if (in_b) {
		b = join_set(sb, "group B");
		if (!CHECK(b, "group B (ranks 0 to %u): joined while A is open", last_b))
			goto out;
	}
	addr[0] = fi_mc_addr(a);
	addr[1] = me.world_addr;
	addr[2] = in_b ? fi_mc_addr(b) : FI_ADDR_NOTAVAIL;
	for (uint32_t r = 0; r < me.n; r++) {
		want[0] += r + 1;
		want[1] += 10 * (r + 1);
		want[2] += r <= last_b ? 100 * (r + 1) : 0;
	}
	/* the even ranks post A, world, B; the odd ones B, world, A */
	order[0] = me.rank % 2 ? 2 : 0;
	order[1] = 1;
	order[2] = me.rank % 2 ? 0 : 2;
	for (int k = 0; k < 3; k++) {
		int g = order[k];

		if (g == 2 && !in_b)
			continue;
		for (uint32_t i = 0; i < 5; i++) {
			in[g][i] = (g == 0 ? 1 : g == 1 ? 10 : 100) * (me.rank + 1) * (i + 1);
			out[g][i] = 0;
		}
		if (LT_RETRY(fi_allreduce(me.ep.ep, in[g], 5, NULL, out[g], NULL, addr[g],
					  FI_UINT32, FI_SUM, 0, &ctx[g])))
			break;
		posted++;
	}
	while (done < posted && lt_cq_next(&me.ep.tx, &comp, LT_TIMEOUT_MS)) {
		int g = 0;

		while (g < 3 && comp.op_context != &ctx[g])
			g++;
		if (g == 3 || comp.err)
			break;
		for (uint32_t i = 0; i < 5; i++)
			wrong += out[g][i] != want[g] * (i + 1);
		done++;
	}
	if (done < posted || posted < (in_b ? 3 : 2))
		me.is_desync = true;
	CHECK(posted == (in_b ? 3 : 2) && done == posted && !wrong,
	      "allreduces on A, the world and B outstanding at once, posted in different orders "
	      "by different ranks: %d posted, %d completed, %d elements wrong",
	      posted, done, wrong);
out:
	close_mc(&b);
	close_mc(&a);
	close_set(&sa);
	close_set(&sb);
}

/* ---- join, use, close, again ---- */

void join_cycles(void)
{
	uint32_t last = me.n - 1;
	struct fid_av_set *set;
	struct fid_mc *mc;
	fi_addr_t a, gone = FI_ADDR_NOTAVAIL;
	static struct fi_context2 ctx;
	unsigned cycles = 0;
	char why[128];
	int ret = 0;

	if (me.rank != 0 && me.rank != last)
		return;
	set = empty_set();
	if (!set || !CHECK_RET(fi_av_set_insert(set, 0), 0, "fi_av_set_insert of rank 0") ||
	    !CHECK_RET(fi_av_set_insert(set, last), 0, "and of rank %u", last))
		goto out;
	a = coll_set_addr(set);
	for (; cycles < CYCLES && a != FI_ADDR_NOTAVAIL; cycles++) {
		mc = coll_join(a, set, "join and close again");
		if (!mc)
			break;
		gone = fi_mc_addr(mc);
		ret = coll_run(LT_RETRY(fi_barrier(me.ep.ep, gone, &ctx)), &ctx);
		if (!ret && cycles % 50 == 49 &&
		    !coll_sum_ok(gone, me.rank + 1, last + 2, "a group joined again"))
			ret = -1;
		close_mc(&mc);
		if (ret)
			break;
	}
	CHECK(cycles == CYCLES, "ranks 0 and %u: %d cycles of join, barrier, close (%u done; %s)",
	      last, CYCLES, cycles, coll_str(ret, why, sizeof(why)));
	if (gone != FI_ADDR_NOTAVAIL) {
		ret = (int) fi_barrier(me.ep.ep, gone, &ctx);
		CHECK_RET(ret, -FI_EINVAL, "fi_barrier on the address of a group closed");
		if (!ret)
			me.is_desync = true;
	}
out:
	if (set)
		coll_close(&set->fid);
}

/* ---- what is refused at once ---- */

static struct fi_context2 bad_ctx; /* a call taken by mistake may still write to it */

static void refused_at(ssize_t ret, int want, int line, const char *what)
{
	coll_check_ret_at((long) ret, want, __FILE__, line, "refused: %s", what);
	/*
	 * Taken by mistake: every rank made the same call, so it may run to its end as a
	 * collective; if it does not, the ranks are out of step (coll_wait says so).
	 */
	if (ret == 0)
		(void) coll_wait(&bad_ctx);
}

/* The failure line names the call, not this helper. */
#define REFUSED(ret, want, what) refused_at(ret, want, __LINE__, what)

void bad_input(void)
{
	static uint32_t buf[4 * COLL_MAX_RANKS], res[4 * COLL_MAX_RANKS];
	struct fi_context2 *ctx = &bad_ctx;
	struct fid_ep *ep = me.ep.ep;
	fi_addr_t w = me.world_addr, nobody = me.n, a, gone;
	struct fid_av_set *set = coll_range_set(0, me.n - 1, 1);
	struct fid_mc *mc;

	REFUSED(fi_barrier(ep, 0, ctx), -FI_EINVAL, "fi_barrier on a plain AV fi_addr");
	REFUSED(fi_barrier(ep, FI_ADDR_NOTAVAIL, ctx), -FI_EINVAL,
		"fi_barrier on FI_ADDR_NOTAVAIL");
	REFUSED(fi_allreduce(ep, buf, 4, NULL, res, NULL, 1, FI_UINT32, FI_SUM, 0, ctx), -FI_EINVAL,
		"fi_allreduce on a plain AV fi_addr");
	a = set ? coll_set_addr(set) : FI_ADDR_NOTAVAIL;
	if (a != FI_ADDR_NOTAVAIL) {
		REFUSED(fi_barrier(ep, a, ctx), -FI_EINVAL,
			"fi_barrier on an AV set's address never joined");
		REFUSED(fi_allreduce(ep, buf, 4, NULL, res, NULL, a, FI_UINT32, FI_SUM, 0, ctx),
			-FI_EINVAL, "fi_allreduce on an AV set's address never joined");
		mc = me.is_desync ? NULL : coll_join(a, set, "a group to close");
		if (mc) {
			gone = fi_mc_addr(mc);
			close_mc(&mc);
			REFUSED(fi_barrier(ep, gone, ctx), -FI_EINVAL,
				"fi_barrier on a group's address after fi_close");
			REFUSED(fi_broadcast(ep, buf, 4, NULL, gone, 0, FI_UINT32, 0, ctx),
				-FI_EINVAL, "fi_broadcast on a group's address after fi_close");
		}
	}
	close_set(&set);

	REFUSED(fi_allreduce(ep, buf, 4, NULL, res, NULL, w, FI_DOUBLE, FI_BAND, 0, ctx),
		-FI_EOPNOTSUPP, "fi_allreduce FI_BAND on FI_DOUBLE");
	REFUSED(fi_allreduce(ep, buf, 4, NULL, res, NULL, w, FI_VOID, FI_SUM, 0, ctx),
		-FI_EOPNOTSUPP, "fi_allreduce FI_SUM on FI_VOID");
	REFUSED(fi_reduce(ep, buf, 2, NULL, res, NULL, w, 0, FI_FLOAT_COMPLEX, FI_MIN, 0, ctx),
		-FI_EOPNOTSUPP, "fi_reduce FI_MIN on FI_FLOAT_COMPLEX");
	REFUSED(fi_reduce_scatter(ep, buf, 4, NULL, res, NULL, w, FI_FLOAT, FI_BXOR, 0, ctx),
		-FI_EOPNOTSUPP, "fi_reduce_scatter FI_BXOR on FI_FLOAT");

	REFUSED(fi_broadcast(ep, buf, 4, NULL, w, nobody, FI_UINT32, 0, ctx), -FI_EINVAL,
		"fi_broadcast from a root not in the AV");
	REFUSED(fi_broadcast(ep, buf, 4, NULL, w, FI_ADDR_NOTAVAIL, FI_UINT32, 0, ctx), -FI_EINVAL,
		"fi_broadcast from root FI_ADDR_NOTAVAIL");
	REFUSED(fi_reduce(ep, buf, 4, NULL, res, NULL, w, nobody, FI_UINT32, FI_SUM, 0, ctx),
		-FI_EINVAL, "fi_reduce to a root not in the AV");
	REFUSED(fi_reduce(ep, buf, 4, NULL, res, NULL, w, FI_ADDR_NOTAVAIL, FI_UINT32, FI_SUM, 0,
			  ctx),
		-FI_EINVAL, "fi_reduce to root FI_ADDR_NOTAVAIL");
	REFUSED(fi_scatter(ep, buf, 4, NULL, res, NULL, w, FI_ADDR_NOTAVAIL, FI_UINT32, 0, ctx),
		-FI_EINVAL, "fi_scatter from root FI_ADDR_NOTAVAIL");
	REFUSED(fi_gather(ep, buf, 4, NULL, res, NULL, w, FI_ADDR_NOTAVAIL, FI_UINT32, 0, ctx),
		-FI_EINVAL, "fi_gather to root FI_ADDR_NOTAVAIL");
	REFUSED(fi_scatter(ep, buf, 4, NULL, res, NULL, w, nobody, FI_UINT32, 0, ctx), -FI_EINVAL,
		"fi_scatter from a root not in the AV");
	REFUSED(fi_gather(ep, buf, 4, NULL, res, NULL, w, nobody, FI_UINT32, 0, ctx), -FI_EINVAL,
		"fi_gather to a root not in the AV");

	REFUSED(fi_allreduce(ep, NULL, 4, NULL, res, NULL, w, FI_UINT32, FI_SUM, 0, ctx),
		-FI_EINVAL, "fi_allreduce without buf");
	REFUSED(fi_allreduce(ep, buf, 4, NULL, NULL, NULL, w, FI_UINT32, FI_SUM, 0, ctx),
		-FI_EINVAL, "fi_allreduce without result");
	REFUSED(fi_broadcast(ep, NULL, 4, NULL, w, 0, FI_UINT32, 0, ctx), -FI_EINVAL,
		"fi_broadcast without buf");
	REFUSED(fi_allgather(ep, buf, 4, NULL, NULL, NULL, w, FI_UINT32, 0, ctx), -FI_EINVAL,
		"fi_allgather without result");
	REFUSED(fi_alltoall(ep, NULL, 4, NULL, res, NULL, w, FI_UINT32, 0, ctx), -FI_EINVAL,
		"fi_alltoall without buf");
	REFUSED(fi_reduce_scatter(ep, NULL, 4, NULL, res, NULL, w, FI_UINT32, FI_SUM, 0, ctx),
		-FI_EINVAL, "fi_reduce_scatter without buf");
	REFUSED(fi_reduce(ep, buf, 4, NULL, NULL, NULL, w, me.rank, FI_UINT32, FI_SUM, 0, ctx),
		-FI_EINVAL, "fi_reduce without result at the root");
	REFUSED(fi_scatter(ep, NULL, 4, NULL, res, NULL, w, me.rank, FI_UINT32, 0, ctx), -FI_EINVAL,
		"fi_scatter without buf at the root");
	REFUSED(fi_gather(ep, buf, 4, NULL, NULL, NULL, w, me.rank, FI_UINT32, 0, ctx), -FI_EINVAL,
		"fi_gather without result at the root");

	if (!me.is_desync)
		coll_sum_ok(w, me.rank + 1, me.n * (me.n + 1) / 2, "the world after the refusals");
}

/* ---- a member dies ---- */

void dead_member(void)
{
	uint32_t last = me.n - 1, in[7] = {1, 2, 3, 4, 5, 6, 7}, out[7];
	static struct fi_context2 ctx;
	struct lt_comp comp = {0};
	bool has_comp;
	ssize_t ret;
	int status;
	char go;

	if (!lt_core_is_msg()) {
		if (me.rank == 0)
			lt_note("dead member: not run, the core is not connected (MSG) and reports "
				"no lost peer (fi_layer(7))");
		return;
	}
	if (me.rank == last) {
		/* killed by rank 0 while waiting here */
		lt_pipe_recv(me.rfd, &go, 1, 2 * LT_TIMEOUT_MS);
		return;
	}
	if (me.rank == 0) {
		status = lt_child_reap(&me.children[last - 1], LT_TIMEOUT_MS, true);
		me.is_alive[last - 1] = false;
		CHECK(status != -1 && WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL,
		      "dead member: rank %u killed with SIGKILL (status %#x)", last, status);
		for (uint32_t r = 1; r < last; r++)
			lt_pipe_send(me.children[r - 1].to_child, "g", 1);
	} else if (coll_pipe_recv(me.rfd, &go, 1, LT_TIMEOUT_MS) != 1) {
		CHECK(false, "dead member: word from rank 0 that rank %u is dead", last);
		return;
	}
	ret = LT_RETRY(fi_allreduce(me.ep.ep, in, 7, NULL, out, NULL, me.world_addr, FI_UINT32,
				    FI_SUM, 0, &ctx));
	if (ret) {
		CHECK(ret < 0 && ret != -FI_EAGAIN,
		      "dead member: fi_allreduce refused at once (%zd): allowed, noted", ret);
		lt_note("dead member: rank %u's fi_allreduce was refused at posting (%zd)", me.rank,
			ret);
	} else {
		has_comp = lt_cq_next(&me.ep.tx, &comp, LT_TIMEOUT_MS);
		CHECK(has_comp && comp.op_context == &ctx && comp.err != 0,
		      "dead member: fi_allreduce completes with an error within %d ms (%s, err "
		      "%d)",
		      LT_TIMEOUT_MS, has_comp ? "completed" : "never completed", comp.err);
	}
	ret = fi_close(&me.world->fid);
	me.world = NULL;
	CHECK_RET(ret, 0, "dead member: the group closes");
}
