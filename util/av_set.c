/*
 * Ordered id sets (see av_set.h). The array keeps the order; the index answers membership.
 * Only two places decide the index's form: growing the array (a hash becomes a bitmap again
 * when every member fits the bitmap budget of the new capacity), and adding an id (the bitmap
 * grows within its budget, else the index becomes a hash; a hash doubles when 3/4 full).
 *
 * Union, intersect and diff visit members in batches, prefetching the index slots of a whole
 * batch before using them, so that the cache misses of a large hash overlap.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "util/av_set.h"

#define UTIL_AV_SET_MIN_CAPACITY 16
/* a count hint preallocates at most this many members (8 MiB): it is only a hint */
#define UTIL_AV_SET_PREALLOC_MAX (1UL << 20)
/* a bitmap this small (8 KiB) is always allowed, whatever the capacity */
#define UTIL_AV_SET_BITMAP_MIN_WORDS 1024
#define UTIL_AV_SET_HASH_MIN_SLOTS 32
/* members whose index slots are prefetched together */
#define UTIL_AV_SET_BATCH 16

/*
 * The largest bitmap (in words) a set of this capacity may keep: one word per member of
 * capacity, i.e. the size of the id array, so the bitmap never dominates the footprint.
 */
static size_t util_av_set_bitmap_budget(size_t capacity)
{
	return UTIL_MAX(capacity, (size_t) UTIL_AV_SET_BITMAP_MIN_WORDS);
}

/* Hash slots for members members: half full at most, a power of two. 0 if too many. */
static size_t util_av_set_hash_slots(size_t members)
{
	if (members > SIZE_MAX / 4 / sizeof(uint64_t))
		return 0;
	return util_roundup_pow2(UTIL_MAX(2 * members, (size_t) UTIL_AV_SET_HASH_MIN_SLOTS));
}

static inline void util_av_set_prefetch(const struct util_av_set *set, uint64_t id)
{
	uint64_t rel = id - set->bitmap_base;

	if (set->hash)
		__builtin_prefetch(&set->hash[util_av_set_hash_home(id, set->hash_mask)]);
	else if (rel / 64 < set->bitmap_words)
		__builtin_prefetch(&set->bitmap[rel / 64]);
}

static void util_av_set_hash_put(uint64_t *hash, size_t mask, uint64_t id)
{
	size_t slot;

	for (slot = util_av_set_hash_home(id, mask); hash[slot] != UTIL_AV_SET_NO_ID;
	     slot = (slot + 1) & mask)
		;
	hash[slot] = id;
}

/*
 * Deletion without tombstones (backward shift): the entries after the hole that would no
 * longer be found from their home slot move into it, so lookups stay short after many
 * removals and never need a rebuild.
 */
static void util_av_set_hash_del(struct util_av_set *set, uint64_t id)
{
	size_t mask = set->hash_mask;
	size_t hole, next, home;

	for (hole = util_av_set_hash_home(id, mask); set->hash[hole] != id;
	     hole = (hole + 1) & mask)
		;
	for (next = (hole + 1) & mask; set->hash[next] != UTIL_AV_SET_NO_ID;
	     next = (next + 1) & mask) {
		home = util_av_set_hash_home(set->hash[next], mask);
		/* stays if its home lies cyclically in (hole, next] */
		if (hole <= next ? (hole < home && home <= next) : (hole < home || home <= next))
			continue;
		set->hash[hole] = set->hash[next];
		hole = next;
	}
	set->hash[hole] = UTIL_AV_SET_NO_ID;
}

/* Bit operations of the bitmap index, for ids inside its window. */
static inline void util_av_set_bit_set(struct util_av_set *set, uint64_t id)
{
	set->bitmap[(id - set->bitmap_base) / 64] |= 1ULL << (id % 64);
}

static inline void util_av_set_bit_clear(struct util_av_set *set, uint64_t id)
{
	set->bitmap[(id - set->bitmap_base) / 64] &= ~(1ULL << (id % 64));
}

/* Index removal of a member. */
static void util_av_set_index_del(struct util_av_set *set, uint64_t id)
{
	if (set->hash)
		util_av_set_hash_del(set, id);
	else
		util_av_set_bit_clear(set, id);
}

/*
 * Empties hash and puts the ids into it, the slots of a batch prefetched together (a large
 * hash lives in memory, not cache).
 */
static void util_av_set_hash_fill(uint64_t *hash, size_t mask, const uint64_t *ids, size_t n)
{
	size_t base, end, i;

	/* all bytes 0xff: every slot UTIL_AV_SET_NO_ID */
	memset(hash, 0xff, (mask + 1) * sizeof(*hash));
	for (base = 0; base < n; base = end) {
		end = UTIL_MIN(base + UTIL_AV_SET_BATCH, n);
		for (i = base; i < end; i++)
			__builtin_prefetch(&hash[util_av_set_hash_home(ids[i], mask)]);
		for (i = base; i < end; i++)
			util_av_set_hash_put(hash, mask, ids[i]);
	}
}

/* A hash index of the current members with room for members members, in *hash and *mask. */
static int util_av_set_build_hash(const struct util_av_set *set, size_t members, uint64_t **hash,
				  size_t *mask)
{
	size_t slots = util_av_set_hash_slots(UTIL_MAX(members, set->count));

	if (!slots)
		return -FI_ENOMEM;
	*hash = malloc(slots * sizeof(**hash));
	if (!*hash)
		return -FI_ENOMEM;
	*mask = slots - 1;
	util_av_set_hash_fill(*hash, *mask, set->ids, set->count);
	return 0;
}

/*
 * A bitmap window covering lo..hi within budget words, in *base and *words: false if none
 * fits. Small ids get a window from 0 (nothing to move when lower ones come). Otherwise it
 * starts at lo, with as much room again below lo when it had to move down (is_down), and it
 * is rounded up above: windows double either way, so moving them costs amortised O(1).
 */
static bool util_av_set_bitmap_window(uint64_t lo, uint64_t hi, size_t budget, bool is_down,
				      uint64_t *base, size_t *words)
{
	uint64_t need, slack;

	if (hi / 64 < budget) {
		*base = 0;
		need = hi / 64 + 1;
	} else {
		*base = lo & ~63ULL;
		need = (hi - *base) / 64 + 1;
		if (need > budget)
			return false;
		if (is_down) {
			slack = UTIL_MIN(UTIL_MIN(need, *base / 64), budget - need);
			*base -= slack * 64;
			need += slack;
		}
	}
	*words = UTIL_MIN(util_roundup_pow2((size_t) need), budget);
	return true;
}

/* A bitmap of the current members over the window base, words (which covers them all). */
static int util_av_set_build_bitmap(const struct util_av_set *set, uint64_t base, size_t words,
				    uint64_t **bitmap)
{
	size_t i;

	*bitmap = calloc(words, sizeof(**bitmap));
	if (!*bitmap)
		return -FI_ENOMEM;
	for (i = 0; i < set->count; i++)
		(*bitmap)[(set->ids[i] - base) / 64] |= 1ULL << (set->ids[i] % 64);
	return 0;
}

/*
 * Grows the array to hold at least need members; a hash index whose members now fit the
 * bitmap budget of the new capacity becomes a bitmap. All or nothing: -FI_ENOMEM leaves the
 * set as it was.
 */
static int util_av_set_grow(struct util_av_set *set, size_t need)
{
	size_t capacity =
		UTIL_MAX(need, UTIL_MAX(2 * set->capacity, (size_t) UTIL_AV_SET_MIN_CAPACITY));
	size_t budget = util_av_set_bitmap_budget(capacity);
	uint64_t *ids, *bitmap = NULL, min_id = UINT64_MAX, base = 0;
	bool to_bitmap = false;
	size_t words = 0, i;
	int ret;

	if (capacity > SIZE_MAX / sizeof(*ids))
		return -FI_ENOMEM;

	if (set->hash) {
		/* removals leave max_id an upper bound: make it exact (growth is linear anyway) */
		set->max_id = 0;
		for (i = 0; i < set->count; i++) {
			set->max_id = UTIL_MAX(set->max_id, set->ids[i]);
			min_id = UTIL_MIN(min_id, set->ids[i]);
		}
		to_bitmap = !set->count || util_av_set_bitmap_window(min_id, set->max_id, budget,
								     false, &base, &words);
	}
	if (to_bitmap && set->count) {
		ret = util_av_set_build_bitmap(set, base, words, &bitmap);
		if (ret)
			return ret;
	}

	ids = realloc(set->ids, capacity * sizeof(*ids));
	if (!ids) {
		free(bitmap);
		return -FI_ENOMEM;
	}
	set->ids = ids;
	set->capacity = capacity;

	if (to_bitmap) {
		free(set->hash);
		set->hash = NULL;
		set->hash_mask = 0;
		set->bitmap = bitmap;
		set->bitmap_words = words;
		set->bitmap_base = base;
	}
	return 0;
}

/* Replaces the index by a hash with room for members members. -FI_ENOMEM: nothing changed. */
static int util_av_set_rehash(struct util_av_set *set, size_t members)
{
	uint64_t *hash;
	size_t mask;
	int ret;

	ret = util_av_set_build_hash(set, members, &hash, &mask);
	if (ret)
		return ret;
	free(set->hash);
	free(set->bitmap);
	set->bitmap = NULL;
	set->bitmap_words = 0;
	set->bitmap_base = 0;
	set->hash = hash;
	set->hash_mask = mask;
	return 0;
}

/*
 * Makes the index able to take one more member, id: doubles a 3/4-full hash, grows the
 * bitmap within its budget, or turns the index into a hash. -FI_ENOMEM: nothing changed.
 */
static int util_av_set_index_prepare(struct util_av_set *set, uint64_t id)
{
	size_t budget = util_av_set_bitmap_budget(set->capacity);
	uint64_t *bitmap, base, lo, hi;
	bool is_down;
	size_t words;
	int ret;

	if (set->hash) {
		/* built half full, doubled at 3/4: fewer rebuilds, probes still within a line */
		if (4 * (set->count + 1) <= 3 * (set->hash_mask + 1))
			return 0;
		return util_av_set_rehash(set, set->count + 1);
	}
	if ((id - set->bitmap_base) / 64 < set->bitmap_words)
		return 0;

	/* members lie in the current window; an empty set may move it anywhere */
	is_down = set->count && id < set->bitmap_base;
	lo = set->count ? UTIL_MIN(id, set->bitmap_base) : id;
	hi = set->count ? UTIL_MAX(id, set->max_id) : id;
	if (!util_av_set_bitmap_window(lo, hi, budget, is_down, &base, &words))
		return util_av_set_rehash(set, set->count + 1);

	if (base == set->bitmap_base && set->bitmap_words) {
		/* the same start: extend in place */
		bitmap = realloc(set->bitmap, words * sizeof(*bitmap));
		if (!bitmap)
			return -FI_ENOMEM;
		memset(bitmap + set->bitmap_words, 0,
		       (words - set->bitmap_words) * sizeof(*bitmap));
	} else {
		ret = util_av_set_build_bitmap(set, base, words, &bitmap);
		if (ret)
			return ret;
		free(set->bitmap);
	}
	set->bitmap = bitmap;
	set->bitmap_words = words;
	set->bitmap_base = base;
	return 0;
}

/* Appends an id known not to be a member. 0 or -FI_ENOMEM (set unchanged). */
static int util_av_set_append(struct util_av_set *set, uint64_t id)
{
	int ret;

	if (unlikely(set->count == set->capacity)) {
		ret = util_av_set_grow(set, set->count + 1);
		if (ret)
			return ret;
	}
	ret = util_av_set_index_prepare(set, id);
	if (unlikely(ret))
		return ret;

	if (set->hash)
		util_av_set_hash_put(set->hash, set->hash_mask, id);
	else
		util_av_set_bit_set(set, id);
	set->ids[set->count++] = id;
	if (id > set->max_id)
		set->max_id = id;
	return 0;
}

int util_av_set_init(struct util_av_set *set, size_t count_hint)
{
	memset(set, 0, sizeof(*set));
	return util_av_set_grow(set, UTIL_MIN(count_hint, (size_t) UTIL_AV_SET_PREALLOC_MAX));
}

void util_av_set_fini(struct util_av_set *set)
{
	free(set->ids);
	free(set->hash);
	free(set->bitmap);
	memset(set, 0, sizeof(*set));
}

int util_av_set_reserve(struct util_av_set *set, size_t count)
{
	int ret;

	if (count > set->capacity) {
		ret = util_av_set_grow(set, count);
		if (ret)
			return ret;
	}
	if (set->hash && util_av_set_hash_slots(count) > set->hash_mask + 1)
		return util_av_set_rehash(set, count);
	return 0;
}

int util_av_set_insert(struct util_av_set *set, uint64_t id)
{
	if (id == UTIL_AV_SET_NO_ID)
		return -FI_EINVAL;
	if (util_av_set_contains(set, id))
		return -FI_EALREADY;
	return util_av_set_append(set, id);
}

int util_av_set_push(struct util_av_set *set, uint64_t id)
{
	return util_av_set_append(set, id);
}

int util_av_set_remove(struct util_av_set *set, uint64_t id)
{
	size_t pos;

	if (!util_av_set_contains(set, id))
		return -FI_ENOENT;
	/* a member: the scan stops at it */
	for (pos = 0; set->ids[pos] != id; pos++)
		;
	memmove(&set->ids[pos], &set->ids[pos + 1], (set->count - pos - 1) * sizeof(*set->ids));
	set->count--;
	util_av_set_index_del(set, id);
	if (!set->count)
		set->max_id = 0;
	return 0;
}

void util_av_set_clear(struct util_av_set *set)
{
	size_t i;

	/* member by member: linear in the members, whatever the index's size */
	for (i = 0; i < set->count; i++)
		util_av_set_index_del(set, set->ids[i]);
	set->count = 0;
	set->max_id = 0;
}

int util_av_set_union(struct util_av_set *dst, const struct util_av_set *src)
{
	size_t old_count = dst->count;
	size_t base, end, i;
	int ret;

	if (dst == src)
		return 0;
	for (base = 0; base < src->count; base = end) {
		end = UTIL_MIN(base + UTIL_AV_SET_BATCH, src->count);
		for (i = base; i < end; i++)
			util_av_set_prefetch(dst, src->ids[i]);
		for (i = base; i < end; i++) {
			if (util_av_set_contains(dst, src->ids[i]))
				continue;
			ret = util_av_set_append(dst, src->ids[i]);
			if (unlikely(ret))
				goto err_undo_appends;
		}
	}
	return 0;

err_undo_appends:
	/* the index may have changed form on the way: the removal uses the current one */
	while (dst->count > old_count)
		util_av_set_index_del(dst, dst->ids[--dst->count]);
	return ret;
}

/*
 * Keeps the members of set for which contains(other) == keep_if, in order. A hash index loses
 * the others one by one while they are few; past 1/32 of the members, refilling it from
 * the survivors at the end is cheaper than that many backward shifts.
 */
static void util_av_set_filter(struct util_av_set *set, const struct util_av_set *other,
			       bool keep_if)
{
	size_t base, end, i, kept = 0, dropped = 0;
	bool is_refill = false;
	uint64_t id;

	for (base = 0; base < set->count; base = end) {
		end = UTIL_MIN(base + UTIL_AV_SET_BATCH, set->count);
		for (i = base; i < end; i++) {
			util_av_set_prefetch(other, set->ids[i]);
			if (!is_refill)
				util_av_set_prefetch(set, set->ids[i]);
		}
		for (i = base; i < end; i++) {
			id = set->ids[i];
			if (util_av_set_contains(other, id) == keep_if) {
				set->ids[kept++] = id;
				continue;
			}
			if (set->hash && !is_refill && ++dropped > set->count / 32)
				is_refill = true;
			if (!is_refill)
				util_av_set_index_del(set, id);
		}
	}
	set->count = kept;
	/*
	 * A hash sized for the survivors keeps later work linear in them; without memory for
	 * it, the old one is refilled in place, so intersect and diff never fail.
	 */
	if (is_refill && util_av_set_rehash(set, kept))
		util_av_set_hash_fill(set->hash, set->hash_mask, set->ids, kept);
	if (!kept)
		set->max_id = 0;
}

void util_av_set_intersect(struct util_av_set *dst, const struct util_av_set *src)
{
	if (dst == src)
		return;
	if (!src->count)
		util_av_set_clear(dst);
	else
		util_av_set_filter(dst, src, true);
}

void util_av_set_diff(struct util_av_set *dst, const struct util_av_set *src)
{
	/* with itself, contains() would change under the filter: every member goes anyway */
	if (dst == src)
		util_av_set_clear(dst);
	else if (src->count)
		util_av_set_filter(dst, src, false);
}

size_t util_av_set_mem_size(const struct util_av_set *set)
{
	return set->capacity * sizeof(*set->ids) +
	       (set->hash ? (set->hash_mask + 1) * sizeof(*set->hash) : 0) +
	       set->bitmap_words * sizeof(*set->bitmap);
}
