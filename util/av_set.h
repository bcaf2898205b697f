/*
 * Ordered sets of 64-bit ids, the engine behind AV sets (fi_av_set(3)): the members in order
 * in an array, plus a membership index so that every test is O(1) and every operation is
 * linear in the sizes of the sets involved, never a nested scan.
 *
 * The index is a bitmap while the ids are dense enough for it: one bit per possible id of a
 * window, at most 8 bytes per member of capacity (the size of the array itself). The window
 * starts at 0 for small ids (FI_AV_TABLE indices) and near the lowest id otherwise (FI_AV_MAP
 * handles of an AV whose entries share a generation). Sparse ids get an open-addressing hash
 * sized by the members (built half full, doubled at 3/4), which turns back into a bitmap when
 * the array grows and the members fit one again.
 *
 * Ordering rules, from fi_av_set(3): insert and union append at the end (union in the
 * source's order); remove, intersect and diff keep the order of the remaining members.
 * UTIL_AV_SET_NO_ID (FI_ADDR_NOTAVAIL) is never a member.
 * Not thread safe: the owner locks.
 */
#ifndef UTIL_AV_SET_H
#define UTIL_AV_SET_H

#include "util/util.h"

#define UTIL_AV_SET_NO_ID UINT64_MAX

struct util_av_set {
	uint64_t *ids;	 /* members, in order */
	size_t count;	 /* members */
	size_t capacity; /* ids allocated */
	uint64_t max_id; /* >= every member (exact after growth), 0 when empty */
	/* hash index when hash != NULL: linear probing, UTIL_AV_SET_NO_ID marks an empty slot */
	uint64_t *hash;
	size_t hash_mask;
	/* bitmap index otherwise: bit (id - bitmap_base) set for each member */
	uint64_t *bitmap;
	size_t bitmap_words;  /* may be 0 */
	uint64_t bitmap_base; /* a multiple of 64: 0 for small ids, else near the lowest */
};

/*
 * count_hint sizes the first allocation (capped, so a huge hint costs nothing); the set grows
 * past it. Returns 0 or -FI_ENOMEM.
 */
int util_av_set_init(struct util_av_set *set, size_t count_hint);
void util_av_set_fini(struct util_av_set *set);

/*
 * Makes room for count members (array, and hash when the index is one) so that growth does not
 * happen one doubling at a time. 0 or -FI_ENOMEM.
 */
int util_av_set_reserve(struct util_av_set *set, size_t count);

/* Appends id. 0, -FI_EALREADY (a member: nothing changes), -FI_EINVAL (NO_ID), -FI_ENOMEM. */
int util_av_set_insert(struct util_av_set *set, uint64_t id);
/*
 * Appends id without the membership test, for callers that know it is not a member (ids
 * walked in increasing order). Not NO_ID. 0 or -FI_ENOMEM (set unchanged).
 */
int util_av_set_push(struct util_av_set *set, uint64_t id);
/* Removes id, keeping the order of the others. 0, or -FI_ENOENT when id is not a member. */
int util_av_set_remove(struct util_av_set *set, uint64_t id);
/* Removes every member. */
void util_av_set_clear(struct util_av_set *set);

/*
 * dst |= src: the members of src that dst lacks are appended in src's order. 0, or -FI_ENOMEM
 * with dst unchanged. dst == src is allowed (nothing to do).
 */
int util_av_set_union(struct util_av_set *dst, const struct util_av_set *src);
/* dst &= src, keeping dst's order. dst == src is allowed (nothing to do). */
void util_av_set_intersect(struct util_av_set *dst, const struct util_av_set *src);
/* dst -= src, keeping dst's order. dst == src is allowed (dst becomes empty). */
void util_av_set_diff(struct util_av_set *dst, const struct util_av_set *src);

/* Bytes allocated by the set (for footprint measurements). */
size_t util_av_set_mem_size(const struct util_av_set *set);
/* Whether the index is the bitmap (for tests and measurements). */
static inline bool util_av_set_is_bitmap(const struct util_av_set *set)
{
	return !set->hash;
}

static inline size_t util_av_set_count(const struct util_av_set *set)
{
	return set->count;
}

/* The members in order; valid until the set changes. */
static inline const uint64_t *util_av_set_ids(const struct util_av_set *set)
{
	return set->ids;
}

/* The slot a hash search for id starts at: a 64-bit mix, so that strided ids spread. */
static inline size_t util_av_set_hash_home(uint64_t id, size_t mask)
{
	id ^= id >> 33;
	id *= 0xff51afd7ed558ccdULL;
	id ^= id >> 33;
	return (size_t) id & mask;
}

static inline bool util_av_set_contains(const struct util_av_set *set, uint64_t id)
{
	/* below the base, the difference wraps to a huge value: outside too */
	uint64_t rel = id - set->bitmap_base;
	size_t slot;

	if (!set->hash)
		return rel / 64 < set->bitmap_words && (set->bitmap[rel / 64] >> (rel % 64) & 1);
	/* NO_ID marks the empty slots: looking it up would stop at the first one */
	if (id == UTIL_AV_SET_NO_ID)
		return false;
	for (slot = util_av_set_hash_home(id, set->hash_mask); set->hash[slot] != UTIL_AV_SET_NO_ID;
	     slot = (slot + 1) & set->hash_mask) {
		if (set->hash[slot] == id)
			return true;
	}
	return false;
}

#endif /* UTIL_AV_SET_H */
