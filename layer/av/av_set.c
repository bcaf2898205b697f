/*
 * AV sets (fi_av_set(3)) on util's ordered id sets. Every call on a set takes its AV's lock:
 * the sets of one AV are used together (union, intersect, diff need two of them), they read
 * the AV's table, and they are not on any data path.
 *
 * A collective address (fi_av_set_addr) names a set and its membership when it was handed
 * out: a tagged number, new from the AV's counter whenever the set changed since the last
 * one. Nothing resolves it back to the set yet: no collective operation takes it.
 */
#include "config.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "layer/av/av_set.h"
#include "layer/nosys.h"

/* fi_av_set(3) flags: FI_UNIVERSE, and the collectives the set will be used for (all there are) */
#define LAYER_AV_SET_COLL_FLAGS                                                                    \
	(FI_BARRIER_SET | FI_BROADCAST_SET | FI_ALLTOALL_SET | FI_ALLREDUCE_SET |                  \
	 FI_ALLGATHER_SET | FI_REDUCE_SCATTER_SET | FI_REDUCE_SET | FI_SCATTER_SET |               \
	 FI_GATHER_SET)
#define LAYER_AV_SET_FLAGS (FI_UNIVERSE | LAYER_AV_SET_COLL_FLAGS)

/* Collective address: the tag in the top byte, then the AV's counter (56 bits). */
#define LAYER_AV_SET_ADDR_SEQ_MASK ((1ULL << LAYER_AV_SET_ADDR_SHIFT) - 1)

static struct fi_ops_av_set layer_av_set_ops;
static struct fi_layer_av_set_ops layer_av_set_ext_ops;

/* After a membership change (AV lock held): the next address names the new members. */
static void layer_av_set_changed(struct layer_av_set *set)
{
	set->is_addr_current = false;
}

/* The layer set behind a public one, or NULL when it is not an ofi_layer AV set. */
static struct layer_av_set *layer_av_set_of(const struct fid_av_set *set_fid)
{
	if (!set_fid || set_fid->fid.fclass != FI_CLASS_AV_SET || set_fid->ops != &layer_av_set_ops)
		return NULL;
	return container_of(set_fid, struct layer_av_set, av_set_fid);
}

/*
 * The source of a union, intersect or diff: one of ours, on dst's AV (fi_av_set(3) sets are
 * subsets of one AV; ids of two AVs would not mean the same addresses).
 */
static int layer_av_set_check_src(const struct layer_av_set *dst, const struct fid_av_set *src_fid,
				  const char *call, const struct layer_av_set **src)
{
	const struct layer_av_set *set = layer_av_set_of(src_fid);

	if (!set) {
		FI_WARN(&layer_prov, FI_LOG_AV, "%s: the source is not an ofi_layer av set\n",
			call);
		return -FI_EINVAL;
	}
	if (set->av != dst->av) {
		FI_WARN(&layer_prov, FI_LOG_AV, "%s: the sets belong to different avs\n", call);
		return -FI_EINVAL;
	}
	*src = set;
	return 0;
}

static int layer_av_set_union(struct fid_av_set *dst_fid, const struct fid_av_set *src_fid)
{
	struct layer_av_set *dst = container_of(dst_fid, struct layer_av_set, av_set_fid);
	const struct layer_av_set *src;
	size_t before;
	int ret;

	ret = layer_av_set_check_src(dst, src_fid, "union", &src);
	if (ret)
		return ret;

	util_lock_acquire(&dst->av->lock);
	before = util_av_set_count(&dst->members);
	ret = util_av_set_union(&dst->members, &src->members);
	/* members are only appended: the count tells whether the membership changed */
	if (util_av_set_count(&dst->members) != before)
		layer_av_set_changed(dst);
	util_lock_release(&dst->av->lock);

	if (ret)
		FI_WARN(&layer_prov, FI_LOG_AV, "union: no memory (set unchanged)\n");
	return ret;
}

static int layer_av_set_intersect(struct fid_av_set *dst_fid, const struct fid_av_set *src_fid)
{
	struct layer_av_set *dst = container_of(dst_fid, struct layer_av_set, av_set_fid);
	const struct layer_av_set *src;
	size_t before;
	int ret;

	ret = layer_av_set_check_src(dst, src_fid, "intersect", &src);
	if (ret)
		return ret;

	util_lock_acquire(&dst->av->lock);
	before = util_av_set_count(&dst->members);
	util_av_set_intersect(&dst->members, &src->members);
	if (util_av_set_count(&dst->members) != before)
		layer_av_set_changed(dst);
	util_lock_release(&dst->av->lock);
	return 0;
}

static int layer_av_set_diff(struct fid_av_set *dst_fid, const struct fid_av_set *src_fid)
{
	struct layer_av_set *dst = container_of(dst_fid, struct layer_av_set, av_set_fid);
	const struct layer_av_set *src;
	size_t before;
	int ret;

	ret = layer_av_set_check_src(dst, src_fid, "diff", &src);
	if (ret)
		return ret;

	util_lock_acquire(&dst->av->lock);
	before = util_av_set_count(&dst->members);
	util_av_set_diff(&dst->members, &src->members);
	if (util_av_set_count(&dst->members) != before)
		layer_av_set_changed(dst);
	util_lock_release(&dst->av->lock);
	return 0;
}

/* Appends a live fi_addr of the set's AV, which is not a member yet. */
static int layer_av_set_insert(struct fid_av_set *set_fid, fi_addr_t fi_addr)
{
	struct layer_av_set *set = container_of(set_fid, struct layer_av_set, av_set_fid);
	struct sockaddr_storage addr;
	int ret;

	if (layer_av_set_is_coll_addr(fi_addr)) {
		FI_WARN(&layer_prov, FI_LOG_AV, "insert: 0x%" PRIx64 " is a collective address\n",
			(uint64_t) fi_addr);
		return -FI_EINVAL;
	}

	util_lock_acquire(&set->av->lock);
	/* the AV's own check of a live fi_addr; it logs a refusal itself */
	ret = set->av->addrlen <= sizeof(addr) ? layer_av_get_addr(set->av, fi_addr, &addr, NULL)
					       : -FI_EINVAL;
	if (!ret) {
		ret = util_av_set_insert(&set->members, fi_addr);
		if (!ret)
			layer_av_set_changed(set);
	}
	util_lock_release(&set->av->lock);

	if (ret == -FI_EALREADY) {
		FI_WARN(&layer_prov, FI_LOG_AV, "insert: fi_addr %" PRIu64 " is already a member\n",
			(uint64_t) fi_addr);
		ret = -FI_EINVAL;
	} else if (ret == -FI_ENOMEM) {
		FI_WARN(&layer_prov, FI_LOG_AV, "insert: no memory\n");
	}
	return ret;
}

/*
 * Removes a member, keeping the order of the others. The AV entry need not be live: a set
 * keeps fi_addrs that were removed from the AV until they are removed from the set.
 */
static int layer_av_set_remove(struct fid_av_set *set_fid, fi_addr_t fi_addr)
{
	struct layer_av_set *set = container_of(set_fid, struct layer_av_set, av_set_fid);
	int ret;

	util_lock_acquire(&set->av->lock);
	ret = util_av_set_remove(&set->members, fi_addr);
	if (!ret)
		layer_av_set_changed(set);
	util_lock_release(&set->av->lock);

	if (ret) {
		FI_WARN(&layer_prov, FI_LOG_AV, "remove: fi_addr %" PRIu64 " is not a member\n",
			(uint64_t) fi_addr);
		return -FI_EINVAL;
	}
	return 0;
}

static int layer_av_set_addr(struct fid_av_set *set_fid, fi_addr_t *coll_addr)
{
	struct layer_av_set *set = container_of(set_fid, struct layer_av_set, av_set_fid);

	if (!coll_addr) {
		FI_WARN(&layer_prov, FI_LOG_AV, "addr: no coll_addr\n");
		return -FI_EINVAL;
	}

	util_lock_acquire(&set->av->lock);
	if (!set->is_addr_current) {
		set->coll_addr = LAYER_AV_SET_ADDR_TAG << LAYER_AV_SET_ADDR_SHIFT |
				 (++set->av->coll_addr_seq & LAYER_AV_SET_ADDR_SEQ_MASK);
		set->is_addr_current = true;
	}
	*coll_addr = set->coll_addr;
	util_lock_release(&set->av->lock);
	return 0;
}

int layer_av_set_get_members(struct layer_av_set *set, fi_addr_t *addrs, size_t *count)
{
	size_t room = *count, n;

	util_lock_acquire(&set->av->lock);
	n = util_av_set_count(&set->members);
	/* fi_addr_t is the id type itself */
	if (room && addrs)
		memcpy(addrs, util_av_set_ids(&set->members), UTIL_MIN(room, n) * sizeof(*addrs));
	util_lock_release(&set->av->lock);

	*count = n;
	return room < n ? -FI_ETOOSMALL : 0;
}

static int layer_av_set_ext_members(struct fid_av_set *set_fid, fi_addr_t *addrs, size_t *count)
{
	struct layer_av_set *set = layer_av_set_of(set_fid);

	if (!set || !count || (*count && !addrs))
		return -FI_EINVAL;
	return layer_av_set_get_members(set, addrs, count);
}

static int layer_av_set_ext_comm_key(struct fid_av_set *set_fid, void *key, size_t *key_size)
{
	struct layer_av_set *set = layer_av_set_of(set_fid);
	size_t room;

	if (!set || !key_size || (*key_size && !key))
		return -FI_EINVAL;
	/* the key never changes after open: no lock */
	room = *key_size;
	if (room && set->comm_key_size)
		memcpy(key, set->comm_key, UTIL_MIN(room, set->comm_key_size));
	*key_size = set->comm_key_size;
	return room < set->comm_key_size ? -FI_ETOOSMALL : 0;
}

static int layer_av_set_ops_open(struct fid *fid, const char *name, uint64_t flags, void **ops,
				 void *context)
{
	if (!name || strcmp(name, FI_LAYER_AV_SET_OPS))
		return -FI_ENOSYS;
	if (flags || !ops) {
		FI_WARN(&layer_prov, FI_LOG_AV, "ops_open: %s\n", ops ? "unknown flags" : "no ops");
		return -FI_EINVAL;
	}
	*ops = &layer_av_set_ext_ops;
	return 0;
}

static int layer_av_set_close(struct fid *fid)
{
	struct layer_av_set *set = container_of(fid, struct layer_av_set, av_set_fid.fid);

	util_av_set_fini(&set->members);
	atomic_fetch_sub(&set->av->ref, 1);
	free(set->comm_key);
	free(set);
	return 0;
}

static struct fi_ops layer_av_set_fi_ops = {
	.size = sizeof(struct fi_ops),
	.close = layer_av_set_close,
	.bind = layer_no_bind,
	.control = layer_no_control,
	.ops_open = layer_av_set_ops_open,
};

static struct fi_ops_av_set layer_av_set_ops = {
	.size = sizeof(struct fi_ops_av_set),
	.set_union = layer_av_set_union,
	.intersect = layer_av_set_intersect,
	.diff = layer_av_set_diff,
	.insert = layer_av_set_insert,
	.remove = layer_av_set_remove,
	.addr = layer_av_set_addr,
};

static struct fi_layer_av_set_ops layer_av_set_ext_ops = {
	.size = sizeof(struct fi_layer_av_set_ops),
	.members = layer_av_set_ext_members,
	.comm_key = layer_av_set_ext_comm_key,
};

/*
 * fi_av_set(3) attributes. A range (start_addr..end_addr) needs both ends, a stride, an
 * FI_AV_TABLE AV and no communication key; no range means both ends FI_ADDR_NOTAVAIL and
 * stride 0. *has_range tells which.
 */
static int layer_av_set_check_attr(const struct layer_av *av, const struct fi_av_set_attr *attr,
				   bool *has_range)
{
	bool has_start = attr->start_addr != FI_ADDR_NOTAVAIL;
	bool has_end = attr->end_addr != FI_ADDR_NOTAVAIL;
	const char *why = NULL;

	if (attr->flags & ~LAYER_AV_SET_FLAGS) {
		FI_WARN(&layer_prov, FI_LOG_AV, "av_set: unknown flags 0x%" PRIx64 "\n",
			(uint64_t) (attr->flags & ~LAYER_AV_SET_FLAGS));
		return -FI_EINVAL;
	}
	/* fi_av_set(3)'s collective flags name calls the set will be used for: every one is
	 * supported (coll/), so they change nothing */
	if (attr->comm_key_size > LAYER_AV_SET_COMM_KEY_MAX) {
		FI_WARN(&layer_prov, FI_LOG_AV, "av_set: comm_key_size %zu above the limit (%d)\n",
			attr->comm_key_size, LAYER_AV_SET_COMM_KEY_MAX);
		return -FI_EINVAL;
	}

	if (attr->comm_key_size && !attr->comm_key)
		why = "comm_key_size without comm_key";
	else if (has_start != has_end)
		why = "only one of start_addr and end_addr set";
	else if (!has_start && attr->stride)
		why = "stride without a range";
	else if (has_start && av->type != FI_AV_TABLE)
		why = "a range needs an FI_AV_TABLE av";
	else if (has_start && attr->comm_key_size)
		why = "a range with a communication key";
	else if (has_start && (attr->flags & FI_UNIVERSE))
		why = "a range with FI_UNIVERSE";
	else if (has_start && !attr->stride)
		why = "a range with stride 0";
	else if (has_start && attr->end_addr < attr->start_addr)
		why = "end_addr below start_addr";
	if (why) {
		FI_WARN(&layer_prov, FI_LOG_AV, "av_set: %s\n", why);
		return -FI_EINVAL;
	}
	*has_range = has_start;
	return 0;
}

/*
 * The live entries of start..end (inclusive) every stride-th index, in index order (AV lock
 * held). Indices past the table's end are never visited, so a huge range costs nothing; more
 * members than a non-zero count is -FI_EINVAL (fi_av_set(3)).
 */
static int layer_av_set_add_range(struct layer_av_set *set, const struct fi_av_set_attr *attr)
{
	const struct util_av_table *table = &set->av->table;
	uint64_t end = util_av_table_end(table);
	uint64_t index, last;
	size_t added = 0;
	int ret;

	if (attr->start_addr >= end)
		return 0;
	last = UTIL_MIN(attr->end_addr, end - 1);
	ret = util_av_set_reserve(&set->members,
				  UTIL_MIN((last - attr->start_addr) / attr->stride + 1,
					   (uint64_t) util_av_table_count(table)));
	if (ret)
		return ret;

	for (index = attr->start_addr;; index += attr->stride) {
		if (util_av_table_is_live(table, index)) {
			if (attr->count && added == attr->count) {
				FI_WARN(&layer_prov, FI_LOG_AV,
					"av_set: the range holds more than count (%zu) addresses\n",
					attr->count);
				return -FI_EINVAL;
			}
			/* FI_AV_TABLE: the fi_addr is the index (fi_av(3)); increasing, so new */
			ret = util_av_set_push(&set->members, index);
			if (ret)
				return ret;
			added++;
		}
		/* the next index would pass last (or wrap around) */
		if (last - index < attr->stride)
			return 0;
	}
}

/* Every live entry, in index order (AV lock held). */
static int layer_av_set_add_universe(struct layer_av_set *set)
{
	const struct util_av_table *table = &set->av->table;
	bool is_table = set->av->type == FI_AV_TABLE;
	size_t end = util_av_table_end(table);
	fi_addr_t fi_addr;
	size_t index;
	int ret;

	ret = util_av_set_reserve(&set->members, util_av_table_count(table));
	if (ret)
		return ret;
	for (index = 0; index < end; index++) {
		if (!util_av_table_is_live(table, index))
			continue;
		/* FI_AV_TABLE fi_addrs are the indices (fi_av(3)); distinct either way, so new */
		fi_addr = is_table ? index : layer_av_index_to_fi_addr(set->av, index);
		ret = util_av_set_push(&set->members, fi_addr);
		if (ret)
			return ret;
	}
	return 0;
}

int layer_av_set_open(struct fid_av *av_fid, struct fi_av_set_attr *attr,
		      struct fid_av_set **set_fid, void *context)
{
	struct layer_av_set *set;
	struct layer_av *av;
	bool has_range;
	int ret;

	if (!av_fid || !attr || !set_fid) {
		FI_WARN(&layer_prov, FI_LOG_AV, "av_set: missing av, attributes or set pointer\n");
		return -FI_EINVAL;
	}
	av = container_of(av_fid, struct layer_av, av_fid);
	ret = layer_av_set_check_attr(av, attr, &has_range);
	if (ret)
		return ret;

	set = calloc(1, sizeof(*set));
	if (!set)
		return -FI_ENOMEM;
	ret = util_av_set_init(&set->members, attr->count);
	if (ret)
		goto err_free_set;
	if (attr->comm_key_size) {
		set->comm_key = malloc(attr->comm_key_size);
		if (!set->comm_key) {
			ret = -FI_ENOMEM;
			goto err_fini_members;
		}
		memcpy(set->comm_key, attr->comm_key, attr->comm_key_size);
		set->comm_key_size = attr->comm_key_size;
	}
	set->av = av;
	set->flags = attr->flags;

	util_lock_acquire(&av->lock);
	if (has_range)
		ret = layer_av_set_add_range(set, attr);
	else if (attr->flags & FI_UNIVERSE)
		ret = layer_av_set_add_universe(set);
	util_lock_release(&av->lock);
	if (ret)
		goto err_free_key;

	set->av_set_fid.fid.fclass = FI_CLASS_AV_SET;
	set->av_set_fid.fid.context = context;
	set->av_set_fid.fid.ops = &layer_av_set_fi_ops;
	set->av_set_fid.ops = &layer_av_set_ops;
	/* the AV refuses to close while sets refer to it */
	atomic_fetch_add(&av->ref, 1);
	*set_fid = &set->av_set_fid;
	return 0;

err_free_key:
	free(set->comm_key);
err_fini_members:
	util_av_set_fini(&set->members);
err_free_set:
	free(set);
	if (ret == -FI_ENOMEM)
		FI_WARN(&layer_prov, FI_LOG_AV, "av_set: no memory\n");
	return ret;
}
