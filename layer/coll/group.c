/*
 * Collective groups (coll.h): joins, the groups' table and addresses, fi_close of a group,
 * and what becomes of groups when a member fails or aborts a call.
 *
 * A join is an allreduce (bitwise and) of each member's bitmap of free group ids, run as any
 * call but with messages named by how many joins the two ends of each link have made
 * together (struct layer_coll_pair) instead of by a group. Its members all get the same
 * bitmap back, and all take its lowest id. An endpoint runs one join at a time, so that the
 * ids it offers stay free until its join ends.
 */
#include "config.h"

#include <inttypes.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <uthash.h>

#include "layer/av/av.h"
#include "layer/av/av_set.h"
#include "layer/coll/coll.h"
#include "layer/eq.h"
#include "layer/nosys.h"
#include "layer/proto/proto.h"
#include "layer/proto/rx.h"

/* The joins this endpoint has made with one peer (by AV fi_addr). */
struct layer_coll_pair {
	UT_hash_handle hh;
	fi_addr_t addr;
	uint32_t joins;
};

#define LAYER_COLL_BITMAP_WORDS (LAYER_COLL_GROUP_MAX / 64)

/* ---- addresses ---- */

static fi_addr_t layer_coll_group_addr(const struct layer_coll *coll, uint32_t id)
{
	return LAYER_COLL_ADDR_TAG << LAYER_COLL_ADDR_SHIFT | (uint64_t) coll->gens[id] << 16 | id;
}

struct layer_coll_group *layer_coll_group_find(struct layer_coll *coll, fi_addr_t coll_addr)
{
	struct layer_coll_group *group;
	uint32_t id = (uint32_t) (coll_addr & 0xffff);

	if (coll_addr >> LAYER_COLL_ADDR_SHIFT != LAYER_COLL_ADDR_TAG || id >= LAYER_COLL_GROUP_MAX)
		goto refused;
	group = coll->groups[id];
	if (group && group->mc_fid.fi_addr == coll_addr)
		return group;
refused:
	LAYER_WARN_ONCE(FI_LOG_EP_DATA, "collective: %#" PRIx64 " is not the address of a "
			"joined group of this endpoint\n", (uint64_t) coll_addr);
	return NULL;
}

int layer_coll_group_rank(const struct layer_coll_group *group, fi_addr_t fi_addr)
{
	uint32_t r;

	for (r = 0; r < group->size; r++) {
		if (group->members[r] == fi_addr)
			return (int) r;
	}
	return -1;
}

/* ---- joins ---- */

static void layer_coll_join_start(struct layer_coll *coll, struct layer_coll_op *op)
{
	uint64_t *bits = (uint64_t *) op->src;
	uint32_t id;

	/* the ids free here now: this endpoint's joins run one at a time */
	memset(bits, 0, LAYER_COLL_BITMAP_WORDS * sizeof(*bits));
	for (id = 0; id < LAYER_COLL_GROUP_MAX; id++) {
		if (!coll->groups[id])
			bits[id / 64] |= 1ULL << (id % 64);
	}
	FI_DBG(&layer_prov, FI_LOG_EP_CTRL, "join of %u members (rank %u): %s, %zu steps\n",
	       op->group->size, op->group->rank, util_coll_algo_str(op->algo), op->sched.cnt);
	layer_coll_op_run(op);
}

static int layer_coll_join_event(struct layer_coll *coll, struct layer_coll_group *group, int err)
{
	struct fi_eq_entry entry = {
		.fid = &group->mc_fid.fid,
		.context = group->join_context,
	};

	if (err)
		return util_eq_write_error(&coll->eq->util, &group->mc_fid.fid, group->join_context,
					   0, err, -err);
	return (int) util_eq_write(&coll->eq->util, FI_JOIN_COMPLETE, &entry, sizeof(entry), 0);
}

void layer_coll_join_done(struct layer_coll_op *op)
{
	struct layer_coll_group *group = op->group;
	struct layer_coll *coll = group->coll;
	const uint64_t *bits = op->dst;
	bool was_running = coll->joins.next == &op->link;
	struct layer_coll_op *next;
	uint32_t w, id = LAYER_COLL_GROUP_MAX;
	int err = op->err;

	for (w = 0; !err && w < LAYER_COLL_BITMAP_WORDS; w++) {
		if (bits[w]) {
			id = w * 64 + (uint32_t) __builtin_ctzll(bits[w]);
			break;
		}
	}
	if (!err && id == LAYER_COLL_GROUP_MAX)
		err = FI_ENOSPC; /* no id free at every member */
	if (!err) {
		group->id = id;
		coll->groups[id] = group;
		coll->gens[id]++;
		group->mc_fid.fi_addr = layer_coll_group_addr(coll, id);
		group->is_joined = true;
	}
	FI_INFO(&layer_prov, FI_LOG_EP_CTRL, "join of %u members (rank %u): %s%s, group %u\n",
		group->size, group->rank, err ? "failed: " : "done", err ? fi_strerror(err) : "",
		err ? 0 : id);
	util_dlist_remove(&op->link);
	group->join = NULL;
	free((void *) op->src);
	layer_coll_op_put(coll, op);
	(void) layer_coll_join_event(coll, group, err);

	/* the next join of this endpoint may run (one that failed before it ran lets the
	 * running one be) */
	if (was_running && !util_dlist_empty(&coll->joins)) {
		next = container_of(coll->joins.next, struct layer_coll_op, link);
		layer_coll_join_start(coll, next);
	}
}

/* Whether a member's address names this host: the same IP address as ours (a name, as shm's,
 * always does). Addresses are the AV's, normalised. */
static bool layer_coll_is_local(const void *addr, const void *self)
{
	sa_family_t family, self_family;

	memcpy(&family, addr, sizeof(family));
	memcpy(&self_family, self, sizeof(self_family));
	if (family == AF_INET && self_family == AF_INET)
		return !memcmp(&((const struct sockaddr_in *) addr)->sin_addr,
			       &((const struct sockaddr_in *) self)->sin_addr, sizeof(struct in_addr));
	if (family == AF_INET6 && self_family == AF_INET6)
		return !memcmp(&((const struct sockaddr_in6 *) addr)->sin6_addr,
			       &((const struct sockaddr_in6 *) self)->sin6_addr,
			       sizeof(struct in6_addr));
	return family != AF_INET && family != AF_INET6;
}

/*
 * The members of set in order, this endpoint's rank among them, and how many of them are on
 * this host: 0 or -FI_E*.
 */
static int layer_coll_members(struct layer_coll *coll, struct layer_av_set *set,
			      fi_addr_t **members, uint32_t *size, uint32_t *rank,
			      uint32_t *local)
{
	uint8_t addr[LAYER_ADDR_MAX];
	size_t n = 0, i;
	fi_addr_t *m;
	int ret;

	ret = layer_av_set_get_members(set, NULL, &n);
	if (ret && ret != -FI_ETOOSMALL)
		return ret;
	if (!n || n > LAYER_COLL_MEMBERS_MAX) {
		FI_WARN(&layer_prov, FI_LOG_EP_CTRL, "join: a set of %zu members (1 .. %u)\n", n,
			LAYER_COLL_MEMBERS_MAX);
		return -FI_EINVAL;
	}
	m = malloc(n * sizeof(*m));
	if (!m)
		return -FI_ENOMEM;
	ret = layer_av_set_get_members(set, m, &n);
	if (ret)
		goto err;
	*rank = UINT32_MAX;
	*local = 0;
	for (i = 0; i < n; i++) {
		if (layer_av_get_addr(coll->av, m[i], addr, NULL)) {
			FI_WARN(&layer_prov, FI_LOG_EP_CTRL, "join: member %" PRIu64
				" is no longer in the AV\n", (uint64_t) m[i]);
			ret = -FI_EINVAL;
			goto err;
		}
		if (*rank == UINT32_MAX && !memcmp(addr, coll->self_addr, coll->addrlen))
			*rank = (uint32_t) i;
		*local += layer_coll_is_local(addr, coll->self_addr);
	}
	if (*rank == UINT32_MAX) {
		FI_WARN(&layer_prov, FI_LOG_EP_CTRL, "join: this endpoint is not a member of the "
			"set\n");
		ret = -FI_EINVAL;
		goto err;
	}
	*members = m;
	*size = (uint32_t) n;
	return 0;
err:
	free(m);
	return ret;
}

/* The number of joins this endpoint starts with fi_addr (counted). */
static int layer_coll_pair_next(struct layer_coll *coll, fi_addr_t fi_addr, uint32_t *seq)
{
	struct layer_coll_pair *pair;

	HASH_FIND(hh, coll->pairs, &fi_addr, sizeof(fi_addr), pair);
	if (!pair) {
		pair = calloc(1, sizeof(*pair));
		if (!pair)
			return -FI_ENOMEM;
		pair->addr = fi_addr;
		HASH_ADD(hh, coll->pairs, addr, sizeof(pair->addr), pair);
	}
	*seq = pair->joins++;
	return 0;
}

static int layer_coll_group_close(struct fid *fid);

static struct fi_ops layer_coll_group_ops = {
	.size = sizeof(struct fi_ops),
	.close = layer_coll_group_close,
	.bind = layer_no_bind,
	.control = layer_no_control,
	.ops_open = layer_no_ops_open,
};

/* The join's allreduce over the group's members: its schedule and bitmaps. */
static int layer_coll_join_op(struct layer_coll *coll, struct layer_coll_group *group)
{
	struct layer_coll_args args = {
		.kind = FI_ALLREDUCE,
		.count = LAYER_COLL_BITMAP_WORDS,
		.datatype = FI_UINT64,
		.op = FI_BAND,
	};
	struct layer_coll_op *op;
	uint64_t *bits;
	uint32_t r;
	int ret = -FI_ENOMEM;

	op = layer_coll_op_get(coll);
	if (!op)
		return -FI_ENOMEM;
	op->group = group;
	bits = calloc(2 * LAYER_COLL_BITMAP_WORDS, sizeof(*bits));
	op->join_seq = calloc(group->size, sizeof(*op->join_seq));
	if (!bits || !op->join_seq)
		goto err;
	args.src = bits;
	args.dst = bits + LAYER_COLL_BITMAP_WORDS;
	ret = layer_coll_prepare(op, &args, group->rank, group->size);
	if (ret)
		goto err;
	for (r = 0; r < group->size; r++) {
		if (r != group->rank && (ret = layer_coll_pair_next(coll, group->members[r],
								     &op->join_seq[r])))
			goto err;
	}
	group->join = op;
	return 0;
err:
	free(bits);
	layer_coll_op_put(coll, op);
	return ret;
}

int layer_coll_join(struct layer_coll *coll, const struct fi_collective_addr *addr,
		    uint64_t flags, struct fid_mc **mc, void *context)
{
	struct layer_coll_group *group;
	struct layer_av_set *set;
	uint32_t local;
	int ret;

	if (!addr || !addr->set || !mc)
		return -FI_EINVAL;
	if (flags & ~(FI_COLLECTIVE | FI_SEND | FI_RECV))
		return -FI_EBADFLAGS;
	if (!coll->eq) {
		FI_WARN(&layer_prov, FI_LOG_EP_CTRL, "join: no EQ bound to the endpoint\n");
		return -FI_ENOEQ;
	}
	set = container_of(addr->set, struct layer_av_set, av_set_fid);
	if (set->av != coll->av) {
		FI_WARN(&layer_prov, FI_LOG_EP_CTRL, "join: a set of another AV\n");
		return -FI_EINVAL;
	}
	/* what the join goes through: a set's address, a group of this endpoint, or nothing */
	if (addr->coll_addr != FI_ADDR_NOTAVAIL && !layer_av_set_is_coll_addr(addr->coll_addr) &&
	    !layer_coll_group_find(coll, addr->coll_addr))
		return -FI_EINVAL;
	if (coll->open_cnt >= LAYER_COLL_GROUP_MAX)
		return -FI_ENOSPC;

	group = calloc(1, sizeof(*group));
	if (!group)
		return -FI_ENOMEM;
	ret = layer_coll_members(coll, set, &group->members, &group->size, &group->rank, &local);
	if (ret)
		goto err_free;
	/* FI_OFI_LAYER_COLL_PAIRED: 0, 1, or (2) when more than twice as many members share this
	 * host as it has processors: there the messages are what costs, not the rounds (measured
	 * on 2 processors: 8 members gain, 4 lose) */
	group->is_paired = coll->paired_mode == 1 ||
			   (coll->paired_mode == 2 && local > 2 * coll->cpu_cnt);
	group->coll = coll;
	group->join_context = context;
	util_dlist_init(&group->ops);
	group->mc_fid.fid.fclass = FI_CLASS_MC;
	group->mc_fid.fid.context = context;
	group->mc_fid.fid.ops = &layer_coll_group_ops;
	group->mc_fid.fi_addr = FI_ADDR_NOTAVAIL;
	ret = layer_coll_join_op(coll, group);
	if (ret)
		goto err_free;

	coll->open_cnt++;
	*mc = &group->mc_fid;
	util_dlist_insert_tail(&group->join->link, &coll->joins);
	if (coll->joins.next == &group->join->link)
		layer_coll_join_start(coll, group->join);
	return 0;

err_free:
	free(group->members);
	free(group);
	return ret;
}

/* ---- close ---- */

static bool layer_coll_is_group_tag(uint64_t tag, void *arg)
{
	return layer_coll_tag_id(tag) == *(uint32_t *) arg;
}

static int layer_coll_group_close(struct fid *fid)
{
	struct layer_coll_group *group = container_of(fid, struct layer_coll_group, mc_fid.fid);
	struct layer_coll *coll = group->coll;
	int ret = 0;

	if (coll->lock)
		pthread_mutex_lock(coll->lock);
	if (group->join || !util_dlist_empty(&group->ops)) {
		FI_WARN(&layer_prov, FI_LOG_EP_CTRL, "close: the group has %s outstanding\n",
			group->join ? "its join" : "calls");
		ret = -FI_EBUSY;
		goto unlock;
	}
	if (group->is_joined) {
		coll->groups[group->id] = NULL;
		/* what members sent it that nobody will take (calls aborted here) */
		layer_rx_coll_drop(coll->proto, layer_coll_is_group_tag, &group->id);
	}
	coll->open_cnt--;
	free(group->aborted);
	free(group->members);
	free(group);
unlock:
	if (coll->lock)
		pthread_mutex_unlock(coll->lock);
	return ret;
}

void layer_coll_pairs_free(struct layer_coll *coll)
{
	struct layer_coll_pair *pair, *tmp;

	HASH_ITER(hh, coll->pairs, pair, tmp) {
		HASH_DEL(coll->pairs, pair);
		free(pair);
	}
}

/* ---- failures ---- */

static void layer_coll_keep_abort(struct layer_coll_group *group, uint32_t seq)
{
	uint32_t *grown;
	size_t i, cap;

	for (i = 0; i < group->aborted_cnt; i++) {
		if (group->aborted[i] == seq)
			return;
	}
	if (group->aborted_cnt == group->aborted_cap) {
		cap = group->aborted_cap ? 2 * group->aborted_cap : 4;
		grown = realloc(group->aborted, cap * sizeof(*grown));
		if (!grown) {
			LAYER_WARN_ONCE(FI_LOG_EP_DATA, "no memory to keep an abort\n");
			return;
		}
		group->aborted = grown;
		group->aborted_cap = cap;
	}
	group->aborted[group->aborted_cnt++] = seq;
}

bool layer_coll_take_abort(struct layer_coll_group *group, uint32_t seq)
{
	size_t i;

	for (i = 0; i < group->aborted_cnt; i++) {
		if (group->aborted[i] == seq) {
			group->aborted[i] = group->aborted[--group->aborted_cnt];
			return true;
		}
	}
	return false;
}

void layer_coll_abort_arrive(struct layer_coll *coll, uint64_t tag, fi_addr_t src)
{
	uint32_t id = layer_coll_tag_id(tag), seq = layer_coll_tag_seq(tag);
	struct layer_coll_group *group;
	struct util_dlist *item;
	struct layer_coll_op *op;

	group = id < LAYER_COLL_GROUP_MAX ? coll->groups[id] : NULL;
	if (!group || layer_coll_group_rank(group, src) < 0) {
		FI_INFO(&layer_prov, FI_LOG_EP_DATA, "an abort for no group of this endpoint\n");
		return;
	}
	FI_INFO(&layer_prov, FI_LOG_EP_DATA, "group %u: call %u aborted by member %" PRIu64 "\n",
		id, seq, (uint64_t) src);
	util_dlist_foreach(&group->ops, item) {
		op = container_of(item, struct layer_coll_op, link);
		if (op->seq == seq) {
			layer_coll_op_fail(op, FI_ECONNABORTED);
			return;
		}
	}
	/* not made here yet (a call already completed here is not): it fails when it is */
	if (seq - group->next_seq < UINT32_MAX / 2)
		layer_coll_keep_abort(group, seq);
}

/* The first of list's ops (linked by link) that has not failed yet, or NULL. */
static struct layer_coll_op *layer_coll_first_alive(struct util_dlist *list)
{
	struct layer_coll_op *op;
	struct util_dlist *item;

	util_dlist_foreach(list, item) {
		op = container_of(item, struct layer_coll_op, link);
		if (!op->is_done && !op->err)
			return op;
	}
	return NULL;
}

static void layer_coll_group_lost(struct layer_coll_group *group, int err)
{
	struct layer_coll_op *op;

	if (!group->err)
		group->err = err;
	if (group->join)
		layer_coll_op_fail(group->join, err);
	/* a failure may complete (and free) the calls behind it: look again each time */
	while ((op = layer_coll_first_alive(&group->ops)))
		layer_coll_op_fail(op, err);
}

void layer_coll_peer_lost(struct layer_coll *coll, fi_addr_t fi_addr, int err)
{
	struct layer_coll_group *group;
	struct layer_coll_op *op;
	struct util_dlist *item;
	uint32_t id;

	if (fi_addr == FI_ADDR_NOTAVAIL || !coll->open_cnt)
		return;
	for (id = 0; id < LAYER_COLL_GROUP_MAX; id++) {
		group = coll->groups[id];
		if (group && layer_coll_group_rank(group, fi_addr) >= 0)
			layer_coll_group_lost(group, err);
	}
again:
	util_dlist_foreach(&coll->joins, item) {
		op = container_of(item, struct layer_coll_op, link);
		if (!op->is_done && !op->err && layer_coll_group_rank(op->group, fi_addr) >= 0) {
			layer_coll_group_lost(op->group, err);
			goto again;
		}
	}
}

/* Whether some member of group has left the AV. */
static bool layer_coll_group_lost_member(struct layer_coll *coll,
					 const struct layer_coll_group *group)
{
	uint8_t addr[LAYER_ADDR_MAX];
	uint32_t r;

	for (r = 0; r < group->size; r++) {
		if (layer_av_get_addr(coll->av, group->members[r], addr, NULL))
			return true;
	}
	return false;
}

void layer_coll_av_removed(struct layer_coll *coll)
{
	uint8_t addr[LAYER_ADDR_MAX];
	struct layer_coll_pair *pair, *tmp;
	struct layer_coll_group *group;
	struct layer_coll_op *op;
	struct util_dlist *item;
	uint32_t id;

	/* cheap when nothing collective happened: AV removals run this for every entry */
	if (!coll->av || (!coll->open_cnt && !coll->pairs))
		return;
	/* a peer inserted again at that fi_addr starts counting its joins from 0 */
	HASH_ITER(hh, coll->pairs, pair, tmp) {
		if (layer_av_get_addr(coll->av, pair->addr, addr, NULL)) {
			HASH_DEL(coll->pairs, pair);
			free(pair);
		}
	}
	/* the groups of a member gone cannot go on: nothing of it will come any more */
	for (id = 0; coll->open_cnt && id < LAYER_COLL_GROUP_MAX; id++) {
		group = coll->groups[id];
		if (group && !group->err && layer_coll_group_lost_member(coll, group))
			layer_coll_group_lost(group, FI_EADDRNOTAVAIL);
	}
again:
	util_dlist_foreach(&coll->joins, item) {
		op = container_of(item, struct layer_coll_op, link);
		if (!op->is_done && !op->err && layer_coll_group_lost_member(coll, op->group)) {
			layer_coll_group_lost(op->group, FI_EADDRNOTAVAIL);
			goto again;
		}
	}
}
