/*
 * More sections for test_coll.c, in the passes of 2 to 4 ranks: fi_close refused with
 * -FI_EBUSY (an endpoint with a group open, a group with a call outstanding); an AV entry
 * removed, which fails the groups it was a member of (FI_EADDRNOTAVAIL); fi_barrier2's flags;
 * the msg entry of struct fi_ops_collective; FI_SELECTIVE_COMPLETION and the send counter;
 * calls waited for in fi_cq_sread.
 * What would disturb the shared endpoint runs on endpoints of the check's own, each in a domain
 * of its own; ranks 0 and 1 swap their names, and meet, through their pipes to rank 0.
 */
#include "test_coll.h"

#include <stddef.h>
#include <stdio.h>
#include <string.h>

#define UNKNOWN_FLAG (1ULL << 55) /* no operation flag of fi_collective(3) */
#define BLOCKING_CALLS 200u

/* ---- an endpoint of a check's own ---- */

struct own_ep {
	struct lt_dom dom;
	struct lt_ep ep;
	struct fid_eq *eq;	/* for its joins */
	struct fid_cntr *cntr;	/* bound with FI_SEND, when asked for */
	char peer[LT_ADDR_MAX]; /* ranks 0 and 1: the other one's name */
	size_t peerlen;
};

/*
 * A domain, an endpoint (tx CQ bound with FI_TRANSMIT | tx_flags, both CQs with wait_obj), an
 * EQ and maybe a counter.
 */
static bool own_ep_open(struct own_ep *o, uint64_t tx_flags, enum fi_wait_obj wait_obj,
			bool has_cntr, const char *what)
{
	struct lt_ep_opts opts = {.tx_bind_flags = tx_flags, .no_enable = true,
				  .wait_obj = wait_obj};
	struct fi_eq_attr eq_attr = {.size = 16, .wait_obj = FI_WAIT_NONE};
	struct fi_cntr_attr cntr_attr = {.events = FI_CNTR_EVENTS_COMP, .wait_obj = FI_WAIT_NONE};
	const char *step = "fi_fabric and fi_domain";
	int ret;

	memset(o, 0, sizeof(*o));
	ret = lt_dom_open(me.info, &o->dom);
	if (!ret) {
		step = "the endpoint, its AV and CQs";
		ret = lt_ep_open(&o->dom, &opts, &o->ep);
	}
	if (!ret) {
		step = "fi_eq_open";
		ret = fi_eq_open(o->dom.fabric, &eq_attr, &o->eq, NULL);
	}
	if (!ret) {
		step = "fi_ep_bind of the EQ";
		ret = fi_ep_bind(o->ep.ep, &o->eq->fid, 0);
	}
	if (!ret && has_cntr) {
		step = "fi_cntr_open";
		ret = fi_cntr_open(o->dom.domain, &cntr_attr, &o->cntr, NULL);
		if (!ret) {
			step = "fi_ep_bind of the counter with FI_SEND";
			ret = fi_ep_bind(o->ep.ep, &o->cntr->fid, FI_SEND);
		}
	}
	if (!ret) {
		step = "fi_enable";
		ret = lt_ep_enable(&o->ep);
	}
	if (ret) {
		CHECK_RET(ret, 0, "%s: an endpoint in a domain of its own: %s", what, step);
		me.is_desync = true;
	}
	return !ret;
}

static void own_ep_close(struct own_ep *o)
{
	lt_ep_close(&o->ep);
	if (o->cntr)
		coll_close(&o->cntr->fid);
	if (o->eq)
		coll_close(&o->eq->fid);
	o->cntr = NULL;
	o->eq = NULL;
	lt_dom_close(&o->dom);
}

/* ---- ranks 0 and 1 through their pipes ---- */

static int pipe_in(void)
{
	return me.rank ? me.rfd : me.children[0].from_child;
}

static int pipe_out(void)
{
	return me.rank ? me.wfd : me.children[0].to_child;
}

/*
 * Ranks 0 and 1 swap their endpoints' names and insert both in rank order: fi_addr 0 is rank
 * 0's, 1 is rank 1's. Each sends a name (an empty one when it has none) and reads the other's,
 * whatever happened before, so that nothing is left in a pipe for the meeting after the
 * section. Rank 1 sends first.
 */
static bool own_ep_swap(struct own_ep *o, bool ok, const char *what)
{
	const void *name;
	fi_addr_t a;
	ssize_t len = -FI_EIO;
	int ret;

	if (me.rank == 0)
		len = coll_pipe_recv(pipe_in(), o->peer, sizeof(o->peer), 2 * LT_TIMEOUT_MS);
	if (lt_pipe_send(pipe_out(), o->ep.addr, ok ? o->ep.addrlen : 0))
		ok = false;
	if (me.rank == 1)
		len = coll_pipe_recv(pipe_in(), o->peer, sizeof(o->peer), 2 * LT_TIMEOUT_MS);
	if (!CHECK(len >= 0, "%s: rank %u's name came through the pipe (%zd)", what, 1 - me.rank,
		   len) ||
	    !ok || !len) {
		/* a rank without a name said so in its own check */
		me.is_desync = true;
		return false;
	}
	o->peerlen = (size_t) len;
	for (uint32_t r = 0; r < 2; r++) {
		name = r == me.rank ? o->ep.addr : o->peer;
		ret = lt_av_insert(&o->ep, name, &a);
		if (!CHECK(!ret && a == r, "%s: rank %u's name inserted at fi_addr %u (%d, %llu)",
			   what, r, r, ret, (unsigned long long) a)) {
			me.is_desync = true;
			return false;
		}
	}
	return true;
}

/*
 * Ranks 0 and 1 meet, progressing while they wait: rank 1 tells rank 0 whether it got here
 * with what it needed (ok), rank 0 answers 'g' (the word the meeting after a section passes
 * over). Both always come, so no word is left behind. Rank 0 gets rank 1's ok; rank 1 whether
 * rank 0 answered.
 */
static bool pair_meet(bool ok, const char *what)
{
	char word = ok;

	if (me.rank == 1) {
		if (!lt_pipe_send(pipe_out(), &word, 1) &&
		    coll_pipe_recv(pipe_in(), &word, 1, 2 * LT_TIMEOUT_MS) == 1 && word == 'g')
			return true;
		CHECK(false, "%s: rank 0 answered through its pipe", what);
		me.is_desync = true;
		return false;
	}
	if (coll_pipe_recv(pipe_in(), &word, 1, 2 * LT_TIMEOUT_MS) != 1) {
		CHECK(false, "%s: rank 1 came to the meeting through its pipe", what);
		me.is_desync = true;
		word = 0;
	}
	lt_pipe_send(pipe_out(), "g", 1);
	return word == 1;
}

/* The AV set of fi_addr 0 and 1 of o's AV (ranks 0 and 1 after own_ep_swap), or NULL. */
static struct fid_av_set *pair_set(struct own_ep *o, const char *what)
{
	struct fi_av_set_attr attr = {.count = 2, .start_addr = 0, .end_addr = 1, .stride = 1};
	struct fid_av_set *set = NULL;

	if (!CHECK_RET(fi_av_set(o->ep.av, &attr, &set, NULL), 0, "%s: fi_av_set of ranks 0 and 1",
		       what)) {
		me.is_desync = true;
		return NULL;
	}
	return set;
}

/* ---- fi_close refused while busy ---- */

/*
 * Every rank: an endpoint with a group of itself alone open refuses to close, still runs the
 * group's calls, and closes once the group is closed. The group's set is an empty one into
 * which the endpoint's own fi_addr is inserted (fi_av_set_insert).
 */
static void close_ep_with_group(void)
{
	struct fi_av_set_attr attr = {
		.count = 1, .start_addr = FI_ADDR_NOTAVAIL, .end_addr = FI_ADDR_NOTAVAIL};
	static struct fi_context2 ctx;
	struct fid_av_set *set = NULL;
	struct fid_mc *mc = NULL;
	struct own_ep o;
	fi_addr_t self;
	char why[128];
	int ret;

	if (!own_ep_open(&o, 0, FI_WAIT_NONE, false, "an endpoint with a group"))
		goto out;
	if (!CHECK_RET(lt_av_insert(&o.ep, o.ep.addr, &self), 0, "its own address in its AV") ||
	    !CHECK_RET(fi_av_set(o.ep.av, &attr, &set, NULL), 0, "an empty AV set of that AV") ||
	    !CHECK_RET(fi_av_set_insert(set, self), 0, "fi_av_set_insert of its own fi_addr")) {
		me.is_desync = true;
		goto out;
	}
	mc = coll_join_on(o.ep.ep, o.eq, coll_set_addr(set), set, "a group of itself alone");
	if (!CHECK(mc, "a group of the endpoint alone: joined (FI_JOIN_COMPLETE)"))
		goto out;
	ret = fi_close(&o.ep.ep->fid);
	CHECK_RET(ret, -FI_EBUSY, "fi_close of an endpoint with a group open");
	if (!ret) {
		/* closed under its group: what became of the group is unknown, leave it */
		o.ep.ep = NULL;
		mc = NULL;
		goto out;
	}
	ret = (int) LT_RETRY(fi_barrier(o.ep.ep, fi_mc_addr(mc), &ctx));
	if (!ret)
		ret = coll_wait_cq(&o.ep.tx, &ctx);
	CHECK(!ret, "the endpoint that refused to close still runs its group: barrier (%s)",
	      coll_str(ret, why, sizeof(why)));
	if (ret == COLL_TIMED_OUT)
		goto out;
	ret = fi_close(&mc->fid);
	CHECK_RET(ret, 0, "fi_close of the group");
	if (ret)
		goto out;
	mc = NULL;
	ret = fi_close(&o.ep.ep->fid);
	if (CHECK_RET(ret, 0, "then fi_close of the endpoint"))
		o.ep.ep = NULL;
out:
	if (set)
		coll_close(&set->fid);
	own_ep_close(&o);
}

/*
 * Ranks 0 and 1, on the shared endpoint: rank 0 posts a barrier on their group alone, and the
 * group refuses to close; then rank 1 joins the barrier, it completes, and the group closes.
 */
static void close_group_with_call(void)
{
	struct fid_av_set *set = coll_range_set(0, 1, 1);
	fi_addr_t a = set ? coll_set_addr(set) : FI_ADDR_NOTAVAIL;
	struct fid_mc *mc = NULL;
	static struct fi_context2 ctx;
	bool is_posted = false;
	char why[128];
	int ret = 0;

	if (a != FI_ADDR_NOTAVAIL)
		mc = coll_join(a, set, "ranks 0 and 1");
	CHECK(mc, "a group of ranks 0 and 1: joined");
	if (me.rank == 0 && mc) {
		ret = (int) LT_RETRY(fi_barrier(me.ep.ep, fi_mc_addr(mc), &ctx));
		is_posted = CHECK_RET(ret, 0, "rank 0 posts a barrier on it alone");
		if (is_posted) {
			ret = fi_close(&mc->fid);
			CHECK_RET(ret, -FI_EBUSY,
				  "fi_close of a group whose barrier is outstanding");
			if (!ret)
				mc = NULL;
		}
	}
	/* rank 1 joins the barrier only once rank 0 has tried to close */
	pair_meet(mc != NULL, "close while busy");
	if (me.rank == 1 && mc) {
		ret = (int) LT_RETRY(fi_barrier(me.ep.ep, fi_mc_addr(mc), &ctx));
		is_posted = CHECK_RET(ret, 0, "rank 1 joins the barrier");
	}
	if (is_posted) {
		ret = coll_wait(&ctx);
		CHECK(!ret, "the barrier completes on both (%s)", coll_str(ret, why, sizeof(why)));
	} else if (mc) {
		me.is_desync = true;
	}
	if (mc && ret != COLL_TIMED_OUT)
		CHECK_RET(fi_close(&mc->fid), 0, "then fi_close of the group");
	if (set)
		coll_close(&set->fid);
}

void more_close_busy(void)
{
	close_ep_with_group();
	if (me.rank < 2)
		close_group_with_call();
}

/* ---- an AV entry removed ---- */

/*
 * Rank 0 on its own endpoint, after a barrier of the group with rank 1: fi_av_remove of rank 1,
 * then a barrier that fails. False when that barrier may still be outstanding.
 */
static bool fail_after_removal(struct own_ep *o, fi_addr_t group)
{
	static struct fi_context2 ctx;
	struct fi_cq_tagged_entry entry;
	struct fi_cq_err_entry err = {0};
	fi_addr_t gone = 1, again;
	uint64_t deadline;
	char got[160];
	ssize_t ret;

	if (!CHECK_RET(fi_av_remove(o->ep.av, &gone, 1, 0), 0,
		       "AV removal: rank 0 fi_av_remove's rank 1's fi_addr"))
		return true;
	ret = fi_barrier(o->ep.ep, group, &ctx);
	if (!CHECK_RET(ret, 0, "AV removal: fi_barrier on the group is still taken"))
		return true;
	/* read here, not through the stash of common.c: fi_cq_read, then fi_cq_readerr */
	deadline = lt_now_ms() + LT_TIMEOUT_MS;
	do
		ret = fi_cq_read(o->ep.tx.cq, &entry, 1);
	while (ret == -FI_EAGAIN && lt_now_ms() <= deadline);
	if (ret == -FI_EAVAIL) {
		ret = fi_cq_readerr(o->ep.tx.cq, &err, 0);
		snprintf(got, sizeof(got), "fi_cq_readerr %zd: err %d (%s), %s context", ret,
			 err.err, fi_strerror(err.err), err.op_context == &ctx ? "its" : "another");
	} else if (ret == 1) {
		snprintf(got, sizeof(got), "a completion without error");
	} else {
		snprintf(got, sizeof(got), "fi_cq_read %zd (%s)", ret, fi_strerror((int) -ret));
	}
	CHECK(ret == 1 && err.err == FI_EADDRNOTAVAIL && err.op_context == &ctx,
	      "AV removal: the barrier completes with an error entry, err FI_EADDRNOTAVAIL (%s)",
	      got);
	if (ret == -FI_EAGAIN) {
		me.is_desync = true;
		return false;
	}
	CHECK_RET(lt_av_insert(&o->ep, o->peer, &again), 0,
		  "AV removal: rank 1's name inserted again");
	return true;
}

/*
 * Ranks 0 and 1 on endpoints of their own: a group of the two, a barrier; rank 1 closes its
 * group and posts nothing more on it, rank 0 removes rank 1 from its AV and its next call fails.
 * Rank 1 keeps its endpoint open until rank 0 is done, so that what rank 0 sees comes from the
 * removal, not from a connection lost.
 */
void more_av_remove(void)
{
	static struct fi_context2 ctx;
	struct fid_av_set *set = NULL;
	struct fid_mc *mc = NULL;
	struct own_ep o;
	bool ok, is_peer_ok;
	char why[128];
	int ret = -1;

	if (me.rank > 1)
		return;
	ok = own_ep_open(&o, 0, FI_WAIT_NONE, false, "AV removal");
	ok = own_ep_swap(&o, ok, "AV removal");
	if (ok)
		set = pair_set(&o, "AV removal");
	if (set)
		mc = coll_join_on(o.ep.ep, o.eq, coll_set_addr(set), set, "AV removal");
	if (mc) {
		ret = (int) LT_RETRY(fi_barrier(o.ep.ep, fi_mc_addr(mc), &ctx));
		if (!ret)
			ret = coll_wait_cq(&o.ep.tx, &ctx);
		CHECK(!ret, "AV removal: a group of ranks 0 and 1, a barrier (%s)",
		      coll_str(ret, why, sizeof(why)));
		if (ret)
			me.is_desync = true;
	}
	if (me.rank == 1 && mc && ret != COLL_TIMED_OUT) {
		CHECK_RET(fi_close(&mc->fid), 0, "AV removal: rank 1 closes its group");
		mc = NULL;
	}
	/* rank 0 removes rank 1 only once rank 1's barrier has completed */
	is_peer_ok = pair_meet(!ret, "AV removal, after the barrier");
	if (me.rank == 0 && !ret && is_peer_ok && !fail_after_removal(&o, fi_mc_addr(mc)))
		ret = COLL_TIMED_OUT;
	if (me.rank == 0 && mc && ret != COLL_TIMED_OUT)
		CHECK_RET(fi_close(&mc->fid), 0, "AV removal: rank 0 closes its group");
	pair_meet(true, "AV removal, rank 0 done");
	if (set)
		coll_close(&set->fid);
	own_ep_close(&o);
}

/* ---- fi_barrier2's flags, the msg entry ---- */

void more_flags_msg(void)
{
	const uint64_t guard = 0xa5a5a5a5a5a5a5a5ull;
	uint64_t in[4], want[4] = {0}, by_call[5], by_msg[5];
	static struct fi_context2 ctx;
	struct fid_ep *ep = me.ep.ep;
	fi_addr_t w = me.world_addr;
	struct fi_ops_collective *ops = ep->collective;
	struct fi_ioc iov[2], res;
	struct fi_msg_collective msg;
	unsigned wrong = 0;
	char why[128];
	int ret;

	ret = coll_run(LT_RETRY(fi_barrier2(ep, w, FI_COMPLETION, &ctx)), &ctx);
	CHECK(!ret, "fi_barrier2 with FI_COMPLETION on the world (%s)",
	      coll_str(ret, why, sizeof(why)));
	ret = (int) fi_barrier2(ep, w, UNKNOWN_FLAG, &ctx);
	CHECK_RET(ret, -FI_EBADFLAGS, "fi_barrier2 with flag 1 << 55");
	if (!ret)
		(void) coll_wait(&ctx);
	if (me.is_desync)
		return;

	for (uint32_t i = 0; i < 4; i++) {
		in[i] = (me.rank + 1) * (i + 1) + ((uint64_t) i << 40);
		for (uint32_t r = 0; r < me.n; r++)
			want[i] += (r + 1) * (i + 1) + ((uint64_t) i << 40);
		by_call[i] = by_msg[i] = 0;
	}
	by_call[4] = by_msg[4] = guard;
	ret = coll_run(LT_RETRY(fi_allreduce(ep, in, 4, NULL, by_call, NULL, w, FI_UINT64, FI_SUM,
					     0, &ctx)),
		       &ctx);
	if (!CHECK(!ret, "fi_allreduce of 4 FI_UINT64, FI_SUM (%s)",
		   coll_str(ret, why, sizeof(why))))
		return;
	if (!CHECK(ops && ops->size >= offsetof(struct fi_ops_collective, msg) + sizeof(ops->msg) &&
			   ops->msg,
		   "the endpoint's struct fi_ops_collective has a msg entry"))
		return;
	iov[0] = (struct fi_ioc){.addr = in, .count = 4};
	iov[1] = iov[0];
	res = (struct fi_ioc){.addr = by_msg, .count = 4};
	msg = (struct fi_msg_collective){
		.msg_iov = iov,
		.iov_count = 1,
		.coll_addr = w,
		.root_addr = FI_ADDR_NOTAVAIL,
		.coll = FI_ALLREDUCE,
		.datatype = FI_UINT64,
		.op = FI_SUM,
		.context = &ctx,
	};
	ret = coll_run(LT_RETRY(ops->msg(ep, &msg, &res, NULL, 1, 0)), &ctx);
	for (uint32_t i = 0; i < 4 && !ret; i++)
		wrong += by_msg[i] != by_call[i] || by_msg[i] != want[i];
	CHECK(!ret && !wrong && by_msg[4] == guard && by_call[4] == guard,
	      "the msg entry, FI_ALLREDUCE of one fi_ioc of 4 FI_UINT64 into one: what "
	      "fi_allreduce gives (%s, %u wrong, guard %s)",
	      coll_str(ret, why, sizeof(why)), wrong,
	      by_msg[4] == guard && by_call[4] == guard ? "untouched" : "overwritten");
	if (me.is_desync)
		return;
	msg.iov_count = 2;
	ret = (int) ops->msg(ep, &msg, &res, NULL, 1, 0);
	CHECK_RET(ret, -FI_EINVAL, "the msg entry with iov_count 2");
	if (!ret)
		(void) coll_wait(&ctx);
}

/* ---- FI_SELECTIVE_COMPLETION and the send counter ---- */

/* fi_cntr_read once it reaches n, or what it holds after LT_TIMEOUT_MS. */
static uint64_t cntr_wait(struct fid_cntr *cntr, uint64_t n)
{
	uint64_t deadline = lt_now_ms() + LT_TIMEOUT_MS, v;

	for (;;) {
		v = fi_cntr_read(cntr);
		if (v >= n || lt_now_ms() > deadline)
			return v;
		lt_progress();
	}
}

/*
 * Ranks 0 and 1 on endpoints of their own, the tx CQ bound with FI_SELECTIVE_COMPLETION and a
 * counter with FI_SEND: an allreduce with flags 0, then one with FI_COMPLETION. Calls complete
 * in the order made, and the counter says when both have: the only entry is the second's.
 */
void more_selective(void)
{
	static struct fi_context2 quiet, loud;
	uint32_t in[2][3], out[2][3], wrong = 0;
	struct fid_av_set *set = NULL;
	struct fid_mc *mc = NULL;
	struct own_ep o;
	fi_addr_t g;
	uint64_t cnt;
	char why[128];
	bool ok;
	int ret = -1;

	if (me.rank > 1)
		return;
	ok = own_ep_open(&o, FI_SELECTIVE_COMPLETION, FI_WAIT_NONE, true,
			 "selective completion");
	ok = own_ep_swap(&o, ok, "selective completion");
	if (ok)
		set = pair_set(&o, "selective completion");
	if (set)
		mc = coll_join_on(o.ep.ep, o.eq, coll_set_addr(set), set, "selective completion");
	if (!mc)
		goto out;
	g = fi_mc_addr(mc);
	for (uint32_t k = 0; k < 2; k++) {
		for (uint32_t i = 0; i < 3; i++) {
			in[k][i] = (k + 1) * 100 * (me.rank + 1) + i;
			out[k][i] = 0;
		}
	}
	ret = (int) LT_RETRY(fi_allreduce(o.ep.ep, in[0], 3, NULL, out[0], NULL, g, FI_UINT32,
					  FI_SUM, 0, &quiet));
	if (!ret)
		ret = (int) LT_RETRY(fi_allreduce(o.ep.ep, in[1], 3, NULL, out[1], NULL, g,
						  FI_UINT32, FI_SUM, FI_COMPLETION, &loud));
	if (!CHECK_RET(ret, 0,
		       "selective completion: two allreduces posted (flags 0, then "
		       "FI_COMPLETION)")) {
		me.is_desync = true;
		goto out;
	}
	ret = coll_wait_cq(&o.ep.tx, &loud);
	CHECK(!ret,
	      "selective completion: the first entry on the transmit CQ is the allreduce with "
	      "FI_COMPLETION's, none for the one with flags 0 (%s)",
	      coll_str(ret, why, sizeof(why)));
	cnt = cntr_wait(o.cntr, 2);
	CHECK(cnt == 2, "selective completion: the send counter counts both (%llu)",
	      (unsigned long long) cnt);
	CHECK_RET(fi_cntr_readerr(o.cntr), 0, "selective completion: and no error");
	if (cnt < 2)
		me.is_desync = true;
	/* both done: an entry of the first would be there by now */
	lt_progress();
	CHECK(o.ep.tx.count == 0, "selective completion: no other entry on the CQ (%zu)",
	      o.ep.tx.count);
	for (uint32_t k = 0; k < 2 && cnt == 2; k++) {
		for (uint32_t i = 0; i < 3; i++)
			wrong += out[k][i] != (k + 1) * 100 * 3 + 2 * i;
	}
	CHECK(cnt == 2 && !wrong, "selective completion: both sums right (%u wrong)", wrong);
	if (ret == COLL_TIMED_OUT || cnt < 2)
		mc = NULL; /* a call may be outstanding: the group would refuse to close */
out:
	if (mc)
		CHECK_RET(fi_close(&mc->fid), 0, "selective completion: fi_close of the group");
	pair_meet(mc != NULL, "selective completion, done");
	if (set)
		coll_close(&set->fid);
	own_ep_close(&o);
}

/*
 * Calls waited for in fi_cq_sread, on a CQ with a wait object: whatever carries the partner's
 * messages (over tcp, the rings of core/ring.h: RMA writes that make no completion) wakes the
 * waiter. Barriers and 8-byte allreduces alternate, each waited for before the next.
 */
void more_blocking(void)
{
	static struct fi_context2 ctx;
	struct fid_av_set *set = NULL;
	struct fi_cq_tagged_entry comp;
	struct fid_mc *mc = NULL;
	uint64_t in, out = 0;
	uint32_t done = 0, wrong = 0;
	struct own_ep o;
	ssize_t ret = 0;
	fi_addr_t g;
	bool ok;

	if (me.rank > 1)
		return;
	ok = own_ep_open(&o, 0, FI_WAIT_UNSPEC, false, "blocking waits");
	ok = own_ep_swap(&o, ok, "blocking waits");
	if (ok)
		set = pair_set(&o, "blocking waits");
	if (set)
		mc = coll_join_on(o.ep.ep, o.eq, coll_set_addr(set), set, "blocking waits");
	if (!mc)
		goto out;
	g = fi_mc_addr(mc);
	for (; done < BLOCKING_CALLS; done++) {
		in = done * 2 + me.rank;
		ret = done % 2 ? LT_RETRY(fi_allreduce(o.ep.ep, &in, 1, NULL, &out, NULL, g,
						       FI_UINT64, FI_SUM, 0, &ctx)) :
				 LT_RETRY(fi_barrier(o.ep.ep, g, &ctx));
		if (ret)
			break;
		ret = fi_cq_sread(o.ep.tx.cq, &comp, 1, NULL, LT_TIMEOUT_MS);
		if (ret != 1 || comp.op_context != &ctx)
			break;
		wrong += done % 2 && out != done * 4 + 1;
	}
	CHECK(done == BLOCKING_CALLS && !wrong, "blocking waits: %u calls of %u completed in "
	      "fi_cq_sread (last return %zd), %u sums wrong", done, BLOCKING_CALLS, ret, wrong);
	if (done < BLOCKING_CALLS) {
		me.is_desync = true;
		mc = NULL; /* a call may be outstanding: the group would refuse to close */
	}
out:
	if (mc)
		CHECK_RET(fi_close(&mc->fid), 0, "blocking waits: fi_close of the group");
	pair_meet(mc != NULL, "blocking waits, done");
	if (set)
		coll_close(&set->fid);
	own_ep_close(&o);
}

/*
 * Counts that differ between members (rank 0 gives half the others' count): nobody waits for
 * ever and nobody writes past its buffer. Rank 0, whose messages do not fit its partners'
 * receives nor theirs its own, gets an error; the others fail too once told (COLL_ABORT),
 * unless they completed without meeting rank 0's data.
 */
void more_count_mismatch(void)
{
	const uint64_t guard = 0xa5a5a5a5a5a5a5a5ull;
	size_t count = me.rank ? 8 : 4, i;
	uint64_t in[8], out[9];
	static struct fi_context2 ctx;
	bool is_guarded = true;
	char why[128];
	int ret;

	for (i = 0; i < 8; i++)
		in[i] = i + 1;
	for (i = 0; i < 9; i++)
		out[i] = i < count ? 0 : guard;
	ret = coll_run(LT_RETRY(fi_allreduce(me.ep.ep, in, count, NULL, out, NULL, me.world_addr,
					     FI_UINT64, FI_SUM, 0, &ctx)),
		       &ctx);
	CHECK(ret >= 0, "differing counts: the allreduce of %zu elements completes (%s)", count,
	      coll_str(ret, why, sizeof(why)));
	if (!me.rank)
		CHECK(ret > 0, "differing counts: rank 0's half count fails (%s)",
		      coll_str(ret, why, sizeof(why)));
	for (i = count; i < 9; i++)
		is_guarded &= out[i] == guard;
	CHECK(is_guarded, "differing counts: nothing written past the %zu elements", count);
}
