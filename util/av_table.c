/*
 * Address table (see av_table.h). Three dense arrays indexed by table index (addresses,
 * generations, and the free-index heap, all of the same capacity so that a removal never has
 * to allocate), plus a separate open-addressing hash for address -> index.
 *
 * The hash holds index + 1 per slot (0 empty, UINT32_MAX a tombstone) and is probed
 * linearly. Duplicates are allowed, so a search cannot stop at the first match: it walks the
 * whole probe chain up to an empty slot and keeps the lowest live index. Insertions never
 * compare addresses (they take the first empty or tombstone slot), and they reach the hash
 * in batches (the pending list) with their slots prefetched, since one random cache miss per
 * insertion would otherwise cost more than everything else together. The hash is rebuilt
 * from the dense arrays (sequential reads) when live, pending and tombstone entries would
 * pass half the slots.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "util/av_table.h"

#define AV_TABLE_DEFAULT_COUNT 64
/* index + 1 must stay below the tombstone value */
#define AV_TABLE_MAX_ENTRIES ((size_t) UINT32_MAX - 1)
/* A hint larger than this is not preallocated: the table grows on demand past it. */
#define AV_TABLE_MAX_PREALLOC ((size_t) 1 << 22)
#define AV_HASH_MIN_SLOTS 16
#define AV_HASH_EMPTY 0u
#define AV_HASH_DELETED UINT32_MAX
#define AV_GEN_LIVE 1u
/* entries hashed ahead of their insertion during a rebuild (power of two) */
#define AV_PREFETCH_DIST 8

/* murmur3's 64-bit finaliser: a bijection with full avalanche. */
static inline uint64_t av_mix64(uint64_t h)
{
	h ^= h >> 33;
	h *= 0xff51afd7ed558ccdULL;
	h ^= h >> 33;
	h *= 0xc4ceb9fe1a85ec53ULL;
	h ^= h >> 33;
	return h;
}

/*
 * Each 8-byte word goes through an invertible step (xor, odd multiply, xor-shift), so two
 * addresses that differ in a single word never collide before the final mix; for a
 * sockaddr_in (family, port and IPv4 address all in the first word) the 64-bit hash is
 * collision-free.
 */
static inline uint64_t av_hash(const void *addr, size_t len)
{
	const uint8_t *p = addr;
	uint64_t h = 0x9e3779b97f4a7c15ULL ^ len;
	uint64_t w;

	for (; len >= 8; len -= 8, p += 8) {
		memcpy(&w, p, 8);
		h = (h ^ w) * 0x9e3779b97f4a7c15ULL;
		h ^= h >> 32;
	}
	if (len) {
		w = 0;
		memcpy(&w, p, len);
		h = (h ^ w) * 0x9e3779b97f4a7c15ULL;
		h ^= h >> 32;
	}
	return av_mix64(h);
}

static inline bool av_equal(const void *a, const void *b, size_t len)
{
	uint64_t a0, a1, b0, b1;

	/* sockaddr_in, the common case: two loads instead of a memcmp call */
	if (len == 16) {
		memcpy(&a0, a, 8);
		memcpy(&a1, (const uint8_t *) a + 8, 8);
		memcpy(&b0, b, 8);
		memcpy(&b1, (const uint8_t *) b + 8, 8);
		return ((a0 ^ b0) | (a1 ^ b1)) == 0;
	}
	return memcmp(a, b, len) == 0;
}

/* 8 hash bits kept per slot, independent of the bits that chose the slot */
static inline uint8_t av_tag(uint64_t hv)
{
	return (uint8_t) (hv >> 56);
}

static inline uint8_t *av_addr_at(const struct util_av_table *table, size_t index)
{
	return table->addrs + index * table->addrlen;
}

/* Free-index min-heap. free_cap == capacity >= end > free_cnt, so a push never allocates. */
static void av_heap_push(struct util_av_table *table, uint32_t index)
{
	uint32_t *heap = table->free_heap;
	size_t pos = table->free_cnt++;

	while (pos) {
		size_t parent = (pos - 1) / 2;

		if (heap[parent] <= index)
			break;
		heap[pos] = heap[parent];
		pos = parent;
	}
	heap[pos] = index;
}

static uint32_t av_heap_pop(struct util_av_table *table)
{
	uint32_t *heap = table->free_heap;
	uint32_t top = heap[0];
	uint32_t last = heap[--table->free_cnt];
	size_t n = table->free_cnt;
	size_t pos = 0;

	for (;;) {
		size_t child = 2 * pos + 1;

		if (child >= n)
			break;
		if (child + 1 < n && heap[child + 1] < heap[child])
			child++;
		if (last <= heap[child])
			break;
		heap[pos] = heap[child];
		pos = child;
	}
	if (n)
		heap[pos] = last;
	return top;
}

static inline void av_prefetch_slot(const struct util_av_table *table, uint64_t hv)
{
	size_t pos = hv & table->hash_mask;

	__builtin_prefetch(&table->hash[pos], 1);
	__builtin_prefetch(&table->hash_tag[pos], 1);
}

/* Puts index into the first empty or tombstone slot of its chain (no address compared). */
static void av_hash_put(struct util_av_table *table, size_t index, uint64_t hv)
{
	size_t pos = hv & table->hash_mask;
	uint32_t slot;

	for (;;) {
		slot = table->hash[pos];
		if (slot == AV_HASH_EMPTY || slot == AV_HASH_DELETED)
			break;
		pos = (pos + 1) & table->hash_mask;
	}
	if (slot == AV_HASH_EMPTY)
		table->hash_used++;
	table->hash[pos] = (uint32_t) (index + 1);
	table->hash_tag[pos] = av_tag(hv);
}

static void av_hash_del(struct util_av_table *table, size_t index)
{
	size_t mask = table->hash_mask;
	size_t pos = av_hash(av_addr_at(table, index), table->addrlen) & mask;

	while (table->hash[pos] != index + 1)
		pos = (pos + 1) & mask;

	/*
	 * A slot followed by an empty one ends its chain: it can become empty too, and so can
	 * the tombstones just before it, which keeps chains short without a rebuild.
	 */
	if (table->hash[(pos + 1) & mask] != AV_HASH_EMPTY) {
		table->hash[pos] = AV_HASH_DELETED;
		return;
	}
	do {
		table->hash[pos] = AV_HASH_EMPTY;
		table->hash_used--;
		pos = (pos - 1) & mask;
	} while (table->hash[pos] == AV_HASH_DELETED);
}

/*
 * Slots for a rebuild holding live entries: load at most 3/8 afterwards, so at least 1/8 of
 * the slots are inserted before the next rebuild; and at least end / 2, because a rebuild
 * scans the dense arrays up to end: both keep rebuilds amortised O(1) per insertion.
 */
static size_t av_hash_slots(size_t live, size_t end)
{
	size_t slots = util_roundup_pow2(UTIL_MAX((live * 8 + 2) / 3, end / 2));

	return UTIL_MAX(slots, (size_t) AV_HASH_MIN_SLOTS);
}

static int av_hash_rebuild(struct util_av_table *table, size_t slots)
{
	uint64_t ahead[AV_PREFETCH_DIST];
	uint32_t *hash;
	uint8_t *tag;
	uint64_t hv;
	size_t i;

	hash = calloc(slots, sizeof(*hash));
	if (!hash)
		return -FI_ENOMEM;
	tag = malloc(slots);
	if (!tag) {
		free(hash);
		return -FI_ENOMEM;
	}
	free(table->hash);
	free(table->hash_tag);
	table->hash = hash;
	table->hash_tag = tag;
	table->hash_mask = slots - 1;
	table->hash_used = 0;
	/* every live entry is hashed below, the pending ones included */
	table->pending_cnt = 0;

	/*
	 * Slots are hashed AV_PREFETCH_DIST entries ahead and prefetched, so the random accesses
	 * into the new hash overlap instead of stalling one after another.
	 */
	for (i = 0; i < table->end + AV_PREFETCH_DIST; i++) {
		if (i >= AV_PREFETCH_DIST && (table->gen[i - AV_PREFETCH_DIST] & AV_GEN_LIVE))
			av_hash_put(table, i - AV_PREFETCH_DIST, ahead[i % AV_PREFETCH_DIST]);
		if (i < table->end && (table->gen[i] & AV_GEN_LIVE)) {
			hv = av_hash(av_addr_at(table, i), table->addrlen);
			av_prefetch_slot(table, hv);
			ahead[i % AV_PREFETCH_DIST] = hv;
		}
	}
	return 0;
}

/* Hashes the pending entries, their slots prefetched first so the misses overlap. */
static void av_hash_flush(struct util_av_table *table)
{
	size_t i;

	for (i = 0; i < table->pending_cnt; i++)
		av_prefetch_slot(table, table->pending_hash[i]);
	for (i = 0; i < table->pending_cnt; i++)
		av_hash_put(table, table->pending[i], table->pending_hash[i]);
	table->pending_cnt = 0;
}

/* Grows the dense arrays to hold at least need entries; nothing changes on failure. */
static int av_table_grow(struct util_av_table *table, size_t need)
{
	size_t cap = table->capacity ? table->capacity : AV_TABLE_DEFAULT_COUNT;
	uint8_t *addrs;
	uint32_t *gen, *heap;

	while (cap < need)
		cap *= 2;
	cap = UTIL_MIN(cap, AV_TABLE_MAX_ENTRIES);
	if (cap < need || cap > SIZE_MAX / table->addrlen)
		return -FI_ENOMEM;

	/* Each array is stored back as soon as it is reallocated; capacity moves last. */
	addrs = realloc(table->addrs, cap * table->addrlen);
	if (!addrs)
		return -FI_ENOMEM;
	table->addrs = addrs;

	gen = realloc(table->gen, cap * sizeof(*gen));
	if (!gen)
		return -FI_ENOMEM;
	/* generation 0 for slots never used */
	memset(gen + table->capacity, 0, (cap - table->capacity) * sizeof(*gen));
	table->gen = gen;

	heap = realloc(table->free_heap, cap * sizeof(*heap));
	if (!heap)
		return -FI_ENOMEM;
	table->free_heap = heap;

	table->capacity = cap;
	table->free_cap = cap;
	return 0;
}

int util_av_table_init(struct util_av_table *table, size_t addrlen, size_t initial_count)
{
	size_t count;
	int ret;

	if (!addrlen)
		return -FI_EINVAL;

	memset(table, 0, sizeof(*table));
	table->addrlen = addrlen;

	count = initial_count ? UTIL_MIN(initial_count, AV_TABLE_MAX_PREALLOC)
			      : AV_TABLE_DEFAULT_COUNT;
	ret = av_table_grow(table, count);
	if (ret)
		goto err_free_arrays;

	/* initial_count entries fit without a rebuild: load stays <= 1/2 */
	ret = av_hash_rebuild(table,
			      UTIL_MAX(util_roundup_pow2(count * 2), (size_t) AV_HASH_MIN_SLOTS));
	if (ret)
		goto err_free_arrays;
	return 0;

err_free_arrays:
	util_av_table_fini(table);
	return ret;
}

void util_av_table_fini(struct util_av_table *table)
{
	free(table->hash_tag);
	free(table->hash);
	free(table->free_heap);
	free(table->gen);
	free(table->addrs);
	memset(table, 0, sizeof(*table));
}

int util_av_table_insert(struct util_av_table *table, const void *addr, size_t *index)
{
	uint64_t hv = av_hash(addr, table->addrlen);
	size_t idx;
	int ret;

	if (!table->free_cnt && table->end == table->capacity) {
		if (table->end >= AV_TABLE_MAX_ENTRIES)
			return -FI_EINVAL;
		ret = av_table_grow(table, table->end + 1);
		if (ret)
			return ret;
	}

	/*
	 * Counting tombstones (they lengthen chains as much as live entries do) and pending
	 * entries: checked here, before anything changes, so that a flush never needs room.
	 */
	if ((table->hash_used + table->pending_cnt + 1) * 2 > table->hash_mask + 1) {
		ret = av_hash_rebuild(table, av_hash_slots(table->count + 1, table->end + 1));
		if (ret)
			return ret;
	}

	idx = table->free_cnt ? av_heap_pop(table) : table->end++;
	memcpy(av_addr_at(table, idx), addr, table->addrlen);
	table->gen[idx] |= AV_GEN_LIVE;
	table->count++;

	table->pending[table->pending_cnt] = (uint32_t) idx;
	table->pending_hash[table->pending_cnt] = hv;
	if (++table->pending_cnt == UTIL_AV_TABLE_PENDING)
		av_hash_flush(table);
	*index = idx;
	return 0;
}

int util_av_table_remove(struct util_av_table *table, size_t index)
{
	size_t i, last;

	if (!util_av_table_is_live(table, index))
		return -FI_EINVAL;

	for (i = 0; i < table->pending_cnt && table->pending[i] != index; i++)
		;
	if (i < table->pending_cnt) {
		last = --table->pending_cnt;
		table->pending[i] = table->pending[last];
		table->pending_hash[i] = table->pending_hash[last];
	} else {
		av_hash_del(table, index);
	}
	/* clear the live bit and bump the generation (wrapping is fine: it only has to differ) */
	table->gen[index] = (table->gen[index] & ~AV_GEN_LIVE) + 2;
	av_heap_push(table, (uint32_t) index);
	table->count--;
	return 0;
}

int util_av_table_remove_list(struct util_av_table *table, const size_t *index, size_t count)
{
	size_t i, j;

	/*
	 * First pass: claim every entry by clearing its live bit, so an index listed twice is
	 * seen as not live the second time. On failure the claims are undone: nothing removed.
	 */
	for (i = 0; i < count; i++) {
		if (!util_av_table_is_live(table, index[i])) {
			for (j = 0; j < i; j++)
				table->gen[index[j]] |= AV_GEN_LIVE;
			return -FI_EINVAL;
		}
		table->gen[index[i]] &= ~AV_GEN_LIVE;
	}
	for (i = 0; i < count; i++) {
		table->gen[index[i]] |= AV_GEN_LIVE;
		util_av_table_remove(table, index[i]);
	}
	return 0;
}

const void *util_av_table_get(const struct util_av_table *table, size_t index)
{
	return util_av_table_is_live(table, index) ? av_addr_at(table, index) : NULL;
}

uint32_t util_av_table_gen(const struct util_av_table *table, size_t index)
{
	return index < table->capacity ? table->gen[index] >> 1 : 0;
}

int util_av_table_find(const struct util_av_table *table, const void *addr, size_t *index)
{
	size_t mask = table->hash_mask;
	uint64_t hv = av_hash(addr, table->addrlen);
	uint8_t tag = av_tag(hv);
	size_t pos = hv & mask;
	size_t best = SIZE_MAX;
	uint32_t slot;
	size_t i;

	/*
	 * The whole chain: with duplicates, the first match is not necessarily the lowest. The
	 * tag check avoids touching the addresses of all but about 1/256 of the other entries.
	 */
	while ((slot = table->hash[pos]) != AV_HASH_EMPTY) {
		if (table->hash_tag[pos] == tag && slot != AV_HASH_DELETED && slot - 1 < best &&
		    av_equal(av_addr_at(table, slot - 1), addr, table->addrlen))
			best = slot - 1;
		pos = (pos + 1) & mask;
	}
	for (i = 0; i < table->pending_cnt; i++) {
		if (table->pending_hash[i] == hv && table->pending[i] < best &&
		    av_equal(av_addr_at(table, table->pending[i]), addr, table->addrlen))
			best = table->pending[i];
	}
	if (best == SIZE_MAX)
		return -FI_ENODATA;
	*index = best;
	return 0;
}

size_t util_av_table_mem_size(const struct util_av_table *table)
{
	return table->capacity *
		       (table->addrlen + sizeof(*table->gen) + sizeof(*table->free_heap)) +
	       (table->hash_mask + 1) * (sizeof(*table->hash) + sizeof(*table->hash_tag));
}
