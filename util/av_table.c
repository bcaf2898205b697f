/*
 * Address table (see av_table.h).
 *
 * Entries: key, then the generation word (bit 0 live, bit 1 claimed by a removal in
 * progress, bits 2..31 the generation), in slots of `stride` bytes. The word is the entry's
 * seqlock: a key is written while the entry is not live and published by the release store
 * that makes it live, so a reader that sees the same live word before and after copying the
 * key has a consistent copy.
 *
 * Hash: open addressing with linear probing over any number of cache lines of four slots, a
 * key's chain starting at the first slot of its home line (a 64x64 -> 128-bit multiply maps
 * the hash onto the lines, so their number need not be a power of two and the memory follows
 * the entry count closely). Insertions reach it in batches (the pending list) with
 * their slots prefetched, because one random cache miss per insertion would otherwise cost
 * more than everything else together. While hashing an entry the chain is walked to its end,
 * which finds any other live copy of the key: both are then marked, and only marked keys make
 * a lookup walk past its first match. Tombstones are cleared by rebuilding in place; only
 * growth allocates a new array. A sequence count, odd while the writer changes the hash or
 * the pending list, lets lookups run without the owner's lock.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "util/av_table_int.h"

#define AV_DEFAULT_COUNT 64
/* A hint larger than this is not preallocated: the table grows on demand past it. */
#define AV_MAX_PREALLOC ((size_t) 1 << 22)
#define AV_HASH_MIN_SLOTS 16

/*
 * Load factors, slots counted with tombstones and pending entries: the hash is rebuilt above
 * 3/5; a rebuild that has to grow aims at 9/20 so that a good share of insertions fit before
 * the next one.
 */
#define AV_LOAD_MAX_NUM 3
#define AV_LOAD_MAX_DEN 5
#define AV_GROW_SLOTS_NUM 20
#define AV_GROW_SLOTS_DEN 9

/* entries hashed ahead of their insertion while rebuilding or removing */
#define AV_PREFETCH_DIST 8
/* arrays this large are mapped directly, with transparent huge pages asked for */
#define AV_BIG_ALLOC ((size_t) 2 << 20)

struct util_av_retired {
	struct util_av_retired *next;
	void *mem;
	size_t size;
};

/* ---- memory ---- */

static size_t av_alloc_size(size_t size)
{
	return size >= AV_BIG_ALLOC ? (size + AV_BIG_ALLOC - 1) & ~(AV_BIG_ALLOC - 1) : size;
}

/*
 * Zeroed memory on a cache line. Large arrays are looked up at random: huge pages spare most
 * of their TLB misses, which in a virtual machine cost as much as the cache miss itself.
 */
static void *av_alloc(size_t size)
{
	void *mem;

	if (size < AV_BIG_ALLOC) {
		mem = aligned_alloc(64, (size + 63) & ~(size_t) 63);
		if (mem)
			memset(mem, 0, size);
		return mem;
	}
	mem = mmap(NULL, av_alloc_size(size), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
		   -1, 0);
	if (mem == MAP_FAILED)
		return NULL;
	(void) madvise(mem, av_alloc_size(size), MADV_HUGEPAGE);
	return mem;
}

static void av_free(void *mem, size_t size)
{
	if (!mem)
		return;
	if (size < AV_BIG_ALLOC)
		free(mem);
	else
		munmap(mem, av_alloc_size(size));
}

/* ---- hash slots (the hash function and comparisons are in av_table_int.h) ---- */

/* Slots for a hash array: at least min, whole cache lines. */
static inline size_t av_round_slots(size_t min)
{
	return (min + AV_LINE_SLOTS - 1) / AV_LINE_SLOTS * AV_LINE_SLOTS;
}

static inline size_t av_prev(size_t pos, uint64_t nslots)
{
	return pos ? pos - 1 : (size_t) nslots - 1;
}

/* ---- entries (the lock-free accessors are in av_table.h) ---- */

static inline uint32_t *av_gen_ptr(const struct util_av_table *table, uint8_t *entry)
{
	return (uint32_t *) (entry + av_gen_off(table->st->keylen));
}

static inline uint32_t av_gen_load(const struct util_av_table *table, uint8_t *entry)
{
	return __atomic_load_n(av_gen_ptr(table, entry), __ATOMIC_ACQUIRE);
}

static inline void av_gen_store(const struct util_av_table *table, uint8_t *entry, uint32_t word)
{
	__atomic_store_n(av_gen_ptr(table, entry), word, __ATOMIC_RELEASE);
}

/* The word a removal leaves: not live, next generation. */
static inline uint32_t av_gen_bump(uint32_t word)
{
	return (((word >> AV_GEN_SHIFT) + 1) & UTIL_AV_TABLE_GEN_MASK) << AV_GEN_SHIFT;
}

/* ---- sequence count (hash and pending list) ---- */

static inline void av_seq_begin(struct util_av_table_state *st)
{
	atomic_store_explicit(&st->seq, atomic_load_explicit(&st->seq, memory_order_relaxed) + 1,
			      memory_order_relaxed);
	atomic_thread_fence(memory_order_release);
}

static inline void av_seq_end(struct util_av_table_state *st)
{
	atomic_store_explicit(&st->seq, atomic_load_explicit(&st->seq, memory_order_relaxed) + 1,
			      memory_order_release);
}

/* ---- free-index heap; free_cap >= end > free_cnt, so a push never allocates ---- */

static void av_heap_push(struct util_av_table *table, uint32_t index)
{
	uint32_t *heap = table->free_heap;
	size_t pos = table->st->free_cnt++;

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
	size_t n = --table->st->free_cnt;
	uint32_t last = heap[n];
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

/* Every index below end that is not live, ascending: a sorted array is a valid min-heap. */
static void av_heap_refill(struct util_av_table *table)
{
	struct util_av_table_state *st = table->st;
	size_t i;

	st->free_cnt = 0;
	for (i = 0; i < st->end; i++) {
		if (!(av_gen_load(table, av_entry(table, i)) & AV_GEN_LIVE))
			table->free_heap[st->free_cnt++] = (uint32_t) i;
	}
}

/* ---- hash ---- */

/* Whether the slot holds the same key as entry index (hashes already equal). */
static bool av_slot_same_key(const struct util_av_table *table,
			     const struct util_av_hash_slot *slot, size_t index, bool is_exact)
{
	if (is_exact && (slot->meta & AV_META_EXACT))
		return true;
	return av_equal(av_entry(table, slot->ref - 1), av_entry(table, index),
			table->st->keylen);
}

/*
 * Puts entry index into the first free slot of its chain. The chain is walked to its end
 * either way, to mark other live copies of the key (a tombstone taken early could otherwise
 * hide one that lies further on).
 */
static void av_hash_put(struct util_av_table *table, struct util_av_hash *hash, size_t index,
			uint64_t hv)
{
	const void *key = av_entry(table, index);
	bool is_exact = av_is_exact(key, table->st->keylen);
	size_t pos = av_home(hv, hash->nslots);
	size_t place = SIZE_MAX;
	struct util_av_hash_slot *slot;
	uint32_t meta, gen;
	bool has_dup = false;

	for (;; pos = av_next(pos, hash->nslots)) {
		slot = &hash->slot[pos];
		if (slot->ref == AV_HASH_EMPTY)
			break;
		if (slot->ref == AV_HASH_DELETED) {
			if (place == SIZE_MAX)
				place = pos;
		} else if (slot->hv == hv && av_slot_same_key(table, slot, index, is_exact)) {
			slot->meta |= AV_META_DUP;
			has_dup = true;
		}
	}
	if (place == SIZE_MAX) {
		place = pos;
		table->st->hash_used++;
	}
	gen = av_gen_load(table, (uint8_t *) key) >> AV_GEN_SHIFT;
	meta = gen << AV_GEN_SHIFT | (has_dup ? AV_META_DUP : 0) | (is_exact ? AV_META_EXACT : 0);
	slot = &hash->slot[place];
	slot->hv = hv;
	slot->meta = meta;
	slot->ref = (uint32_t) (index + 1);
}

static void av_hash_del(struct util_av_table *table, size_t index, uint64_t hv)
{
	struct util_av_hash *hash = table->hash;
	uint64_t n = hash->nslots;
	size_t pos = av_home(hv, n);

	while (hash->slot[pos].ref != index + 1)
		pos = av_next(pos, n);

	/*
	 * A slot followed by an empty one ends its chain: it can become empty too, and so can
	 * the tombstones just before it, which keeps chains short without a rebuild. Only live
	 * slots have a meta (the inline lookup checks nothing else).
	 */
	hash->slot[pos].meta = 0;
	if (hash->slot[av_next(pos, n)].ref != AV_HASH_EMPTY) {
		hash->slot[pos].ref = AV_HASH_DELETED;
		return;
	}
	do {
		hash->slot[pos].ref = AV_HASH_EMPTY;
		table->st->hash_used--;
		pos = av_prev(pos, n);
	} while (hash->slot[pos].ref == AV_HASH_DELETED);
}

static inline void av_prefetch_slot(const struct util_av_hash *hash, uint64_t hv)
{
	__builtin_prefetch(&hash->slot[av_home(hv, hash->nslots)], 1);
}

/* Hashes every live entry into hash (empty), prefetching slots a few entries ahead. */
static void av_hash_fill(struct util_av_table *table, struct util_av_hash *hash)
{
	struct util_av_table_state *st = table->st;
	uint64_t ahead[AV_PREFETCH_DIST];
	bool is_live[AV_PREFETCH_DIST];
	size_t i, j;

	st->hash_used = 0;
	for (i = 0; i < st->end + AV_PREFETCH_DIST; i++) {
		if (i >= AV_PREFETCH_DIST) {
			j = i - AV_PREFETCH_DIST;
			if (is_live[j % AV_PREFETCH_DIST])
				av_hash_put(table, hash, j, ahead[j % AV_PREFETCH_DIST]);
		}
		if (i < st->end) {
			const uint8_t *entry = av_entry(table, i);

			is_live[i % AV_PREFETCH_DIST] = av_gen_load(table, (uint8_t *) entry) &
							AV_GEN_LIVE;
			if (is_live[i % AV_PREFETCH_DIST]) {
				ahead[i % AV_PREFETCH_DIST] = av_hash(entry, st->keylen);
				av_prefetch_slot(hash, ahead[i % AV_PREFETCH_DIST]);
			}
		}
	}
	/* every live entry is hashed now, the pending ones included */
	st->pending_cnt = 0;
}

static size_t av_hash_bytes(size_t nslots)
{
	return sizeof(struct util_av_hash) + nslots * sizeof(struct util_av_hash_slot);
}

/*
 * Makes room in the hash for live entries in all (tombstones dropped): in place when the
 * array is large enough, else into a larger one; the old array is retired, since lock-free
 * readers may still be walking it. Nothing changes on failure.
 */
static int av_hash_rebuild(struct util_av_table *table, size_t live)
{
	struct util_av_table_state *st = table->st;
	struct util_av_hash *hash = table->hash, *bigger;
	struct util_av_retired *retired;
	size_t nslots;

	if (live * AV_GROW_SLOTS_NUM <= hash->nslots * AV_GROW_SLOTS_DEN || table->is_attached) {
		av_seq_begin(st);
		memset(hash->slot, 0, hash->nslots * sizeof(hash->slot[0]));
		av_hash_fill(table, hash);
		av_seq_end(st);
		return 0;
	}

	/*
	 * At least end / 4 slots, because a rebuild scans the entries up to end: that keeps
	 * rebuilds amortised O(1) per operation after many removals.
	 */
	nslots = UTIL_MAX(live * AV_GROW_SLOTS_NUM / AV_GROW_SLOTS_DEN + 1, st->end / 4);
	/* at least doubling, so that growing one entry at a time rehashes O(1) times each */
	nslots = UTIL_MAX(nslots, 2 * hash->nslots);
	nslots = av_round_slots(UTIL_MAX(nslots, (size_t) AV_HASH_MIN_SLOTS));
	retired = malloc(sizeof(*retired));
	bigger = av_alloc(av_hash_bytes(nslots));
	if (!retired || !bigger) {
		free(retired);
		av_free(bigger, av_hash_bytes(nslots));
		return -FI_ENOMEM;
	}
	bigger->nslots = nslots;

	av_seq_begin(st);
	av_hash_fill(table, bigger);
	atomic_store_explicit(&table->hash, bigger, memory_order_release);
	av_seq_end(st);

	/* Mapped arrays give their pages back now; reading them again only finds zeros. */
	retired->mem = hash;
	retired->size = av_hash_bytes(hash->nslots);
	retired->next = table->retired;
	table->retired = retired;
	if (retired->size >= AV_BIG_ALLOC)
		(void) madvise(hash, av_alloc_size(retired->size), MADV_DONTNEED);
	return 0;
}

/* Hashes the pending entries, their slots prefetched first so the misses overlap. */
static void av_hash_flush(struct util_av_table *table)
{
	struct util_av_table_state *st = table->st;
	struct util_av_hash *hash = table->hash;
	size_t i;

	if (!st->pending_cnt)
		return;
	av_seq_begin(st);
	for (i = 0; i < st->pending_cnt; i++)
		av_prefetch_slot(hash, st->pending_hash[i]);
	for (i = 0; i < st->pending_cnt; i++)
		av_hash_put(table, hash, st->pending[i], st->pending_hash[i]);
	st->pending_cnt = 0;
	av_seq_end(st);
}

/* Rebuilds unless extra more insertions fit under the maximum load. */
static int av_hash_make_room(struct util_av_table *table, size_t extra)
{
	struct util_av_table_state *st = table->st;

	if ((st->hash_used + st->pending_cnt + extra) * AV_LOAD_MAX_DEN <=
	    table->hash->nslots * AV_LOAD_MAX_NUM)
		return 0;
	return av_hash_rebuild(table, st->count + extra);
}

/* ---- growth ---- */

/* Adds chunks until need entries fit; nothing changes on failure. */
static int av_grow_entries(struct util_av_table *table, size_t need)
{
	struct util_av_table_state *st = table->st;
	size_t cap = st->capacity, chunk_cnt, heap_cap;
	unsigned k;
	uint8_t *chunk;
	uint32_t *heap;

	if (table->is_attached || need > UTIL_AV_TABLE_MAX_ENTRIES)
		return -FI_ENOSPC;

	while (cap < need) {
		/* chunk k holds 2^k first chunks; capacity is (2^k - 1) first chunks */
		k = 63 - (unsigned) __builtin_clzll((cap >> table->chunk_shift) + 1);
		chunk_cnt = (size_t) 1 << (k + table->chunk_shift);

		/* The heap first: a removal must always find room in it. */
		heap_cap = cap + chunk_cnt;
		if (heap_cap > table->free_cap) {
			heap = realloc(table->free_heap, heap_cap * sizeof(*heap));
			if (!heap)
				return -FI_ENOMEM;
			table->free_heap = heap;
			table->free_cap = heap_cap;
		}
		chunk = av_alloc(chunk_cnt * st->stride);
		if (!chunk)
			return -FI_ENOMEM;
		atomic_store_explicit(&table->chunk[k], chunk, memory_order_release);
		cap += chunk_cnt;
		__atomic_store_n(&st->capacity, cap, __ATOMIC_RELEASE);
	}
	return 0;
}

/*
 * Key and generation word, nothing more: a dense array keeps a million sockaddr_in entries
 * (20 MB) inside a 32 MB L3 cache, which matters more than the few entries that straddle
 * two cache lines (both lines are then fetched at once).
 */
static size_t av_stride(size_t keylen)
{
	return av_gen_off(keylen) + sizeof(uint32_t);
}

/* ---- public ---- */

int util_av_table_init(struct util_av_table *table, size_t keylen, size_t initial_count)
{
	struct util_av_hash *hash;
	size_t count, nslots;
	int ret;

	if (!keylen)
		return -FI_EINVAL;

	memset(table, 0, sizeof(*table));
	table->st = &table->own;
	table->st->keylen = keylen;
	table->st->stride = av_stride(keylen);

	count = initial_count ? UTIL_MIN(initial_count, AV_MAX_PREALLOC) : AV_DEFAULT_COUNT;
	count = util_roundup_pow2(UTIL_MAX(count, (size_t) AV_DEFAULT_COUNT));
	table->chunk_shift = (unsigned) __builtin_ctzll(count);
	ret = av_grow_entries(table, count);
	if (ret)
		goto err_fini;

	/* initial_count entries fit without a rebuild */
	nslots = av_round_slots(UTIL_MAX(count * AV_LOAD_MAX_DEN / AV_LOAD_MAX_NUM + 1,
					 (size_t) AV_HASH_MIN_SLOTS));
	hash = av_alloc(av_hash_bytes(nslots));
	if (!hash) {
		ret = -FI_ENOMEM;
		goto err_fini;
	}
	hash->nslots = nslots;
	atomic_store_explicit(&table->hash, hash, memory_order_release);
	return 0;

err_fini:
	util_av_table_fini(table);
	return ret;
}

void util_av_table_fini(struct util_av_table *table)
{
	struct util_av_table_state *st = table->st;
	struct util_av_retired *retired;
	size_t chunk_cnt;
	unsigned k;

	if (!st)
		return;
	if (!table->is_attached) {
		while ((retired = table->retired)) {
			table->retired = retired->next;
			av_free(retired->mem, retired->size);
			free(retired);
		}
		if (table->hash)
			av_free(table->hash, av_hash_bytes(table->hash->nslots));
		for (k = 0; k < UTIL_AV_TABLE_MAX_CHUNKS; k++) {
			chunk_cnt = (size_t) 1 << (k + table->chunk_shift);
			av_free(table->chunk[k], chunk_cnt * st->stride);
		}
		free(table->free_heap);
	}
	memset(table, 0, sizeof(*table));
}

/* Attached layout: state, entries, heap, hash; each part 64-byte aligned. */
struct av_region_layout {
	size_t entries_off, heap_off, hash_off, size, nslots;
};

static void av_region_layout(size_t keylen, size_t capacity, struct av_region_layout *l)
{
	size_t off = (sizeof(struct util_av_table_state) + 63) & ~(size_t) 63;

	l->entries_off = off;
	off += capacity * av_stride(keylen);
	l->heap_off = (off + 63) & ~(size_t) 63;
	off = l->heap_off + capacity * sizeof(uint32_t);
	l->hash_off = (off + 63) & ~(size_t) 63;
	/* fixed: a full table stays at a load of 1/2 */
	l->nslots = av_round_slots(UTIL_MAX(2 * capacity + 1, (size_t) AV_HASH_MIN_SLOTS));
	l->size = l->hash_off + av_hash_bytes(l->nslots);
}

size_t util_av_table_region_size(size_t keylen, size_t capacity)
{
	struct av_region_layout l;

	av_region_layout(keylen, capacity, &l);
	return l.size;
}

int util_av_table_attach(struct util_av_table *table, void *region, size_t size, size_t keylen,
			 size_t capacity, bool is_new)
{
	struct util_av_table_state *st = region;
	struct av_region_layout l;
	uint8_t *base = region;
	struct util_av_hash *hash;

	if (!keylen || !capacity || capacity > UTIL_AV_TABLE_MAX_ENTRIES || !region)
		return -FI_EINVAL;
	av_region_layout(keylen, capacity, &l);
	if (size < l.size)
		return -FI_EINVAL;
	hash = (struct util_av_hash *) (base + l.hash_off);

	if (is_new) {
		st->keylen = keylen;
		st->stride = av_stride(keylen);
		st->capacity = capacity;
		st->entries_off = l.entries_off;
		st->heap_off = l.heap_off;
		st->hash_off = l.hash_off;
		hash->nslots = l.nslots;
	} else if (st->keylen != keylen || st->stride != av_stride(keylen) ||
		   st->capacity != capacity || st->entries_off != l.entries_off ||
		   st->heap_off != l.heap_off || st->hash_off != l.hash_off ||
		   hash->nslots != l.nslots || st->end > capacity) {
		return -FI_EINVAL;
	}

	memset(table, 0, sizeof(*table));
	table->st = st;
	table->is_attached = true;
	/* one chunk covering every index below capacity */
	table->chunk_shift = (unsigned) __builtin_ctzll(util_roundup_pow2(capacity));
	atomic_store_explicit(&table->chunk[0], base + l.entries_off, memory_order_release);
	table->free_heap = (uint32_t *) (base + l.heap_off);
	table->free_cap = capacity;
	atomic_store_explicit(&table->hash, hash, memory_order_release);
	util_av_table_refresh(table);
	return 0;
}

int util_av_table_reserve(struct util_av_table *table, size_t count)
{
	struct util_av_table_state *st = table->st;
	size_t need;
	int ret;

	if (count > UTIL_AV_TABLE_MAX_ENTRIES - st->count)
		return -FI_ENOSPC;
	/* holes are filled first; only what does not fit in them extends the table */
	need = st->end + (count > st->free_cnt ? count - st->free_cnt : 0);
	if (need > st->capacity && !table->is_attached) {
		ret = av_grow_entries(table, need);
		if (ret)
			return ret;
	}
	return av_hash_make_room(table, count);
}

void util_av_table_flush(struct util_av_table *table)
{
	av_hash_flush(table);
}

int util_av_table_insert(struct util_av_table *table, const void *key, size_t *index,
			 uint32_t *gen)
{
	struct util_av_table_state *st = table->st;
	uint8_t *entry;
	uint32_t word;
	uint64_t hv;
	size_t idx;
	int ret;

	if (!st->free_cnt && st->end == st->capacity) {
		ret = av_grow_entries(table, st->end + 1);
		if (ret)
			return ret;
	}
	/* checked before anything changes, so that a flush never needs room */
	ret = av_hash_make_room(table, 1);
	if (ret)
		return ret;

	hv = av_hash(key, st->keylen);
	idx = st->free_cnt ? av_heap_pop(table) : st->end++;
	entry = av_entry(table, idx);
	word = av_gen_load(table, entry);
	/* the key is written while the entry is not live, and published by the live bit */
	atomic_thread_fence(memory_order_release);
	memcpy(entry, key, st->keylen);
	av_gen_store(table, entry, (word & ~(AV_GEN_LIVE | AV_GEN_CLAIM)) | AV_GEN_LIVE);
	st->count++;

	av_seq_begin(st);
	st->pending[st->pending_cnt] = (uint32_t) idx;
	st->pending_hash[st->pending_cnt] = hv;
	st->pending_cnt++;
	av_seq_end(st);
	if (st->pending_cnt == UTIL_AV_TABLE_PENDING)
		av_hash_flush(table);
	util_av_table_refresh(table);
	*index = idx;
	if (gen)
		*gen = word >> AV_GEN_SHIFT;
	return 0;
}

/* Takes a live entry out of the pending list or the hash, bumps its generation, frees it. */
static void av_remove_live(struct util_av_table *table, size_t index, uint8_t *entry, uint64_t hv)
{
	struct util_av_table_state *st = table->st;
	size_t i, last;

	av_seq_begin(st);
	for (i = 0; i < st->pending_cnt && st->pending[i] != index; i++)
		;
	if (i < st->pending_cnt) {
		last = --st->pending_cnt;
		st->pending[i] = st->pending[last];
		st->pending_hash[i] = st->pending_hash[last];
	} else {
		av_hash_del(table, index, hv);
	}
	av_seq_end(st);
	av_gen_store(table, entry, av_gen_bump(av_gen_load(table, entry)));
	av_heap_push(table, (uint32_t) index);
	st->count--;
	util_av_table_refresh(table);
}

int util_av_table_remove(struct util_av_table *table, size_t index)
{
	uint8_t *entry = av_entry(table, index);

	if (!entry || !(av_gen_load(table, entry) & AV_GEN_LIVE))
		return -FI_EINVAL;
	av_remove_live(table, index, entry, av_hash(entry, table->st->keylen));
	return 0;
}

/* Removing every live entry: one pass over the entries, the hash cleared in one go. */
static void av_remove_all(struct util_av_table *table)
{
	struct util_av_table_state *st = table->st;
	struct util_av_hash *hash = table->hash;
	uint8_t *entry;
	uint32_t word;
	size_t i;

	av_seq_begin(st);
	memset(hash->slot, 0, hash->nslots * sizeof(hash->slot[0]));
	st->hash_used = 0;
	st->pending_cnt = 0;
	av_seq_end(st);
	for (i = 0; i < st->end; i++) {
		entry = av_entry(table, i);
		word = av_gen_load(table, entry);
		if (word & AV_GEN_LIVE)
			av_gen_store(table, entry, av_gen_bump(word));
		table->free_heap[i] = (uint32_t) i;
	}
	st->free_cnt = st->end;
	st->count = 0;
	util_av_table_refresh(table);
}

int util_av_table_remove_list(struct util_av_table *table, const size_t *index, size_t count)
{
	struct util_av_table_state *st = table->st;
	uint64_t ahead[AV_PREFETCH_DIST];
	uint8_t *entry;
	uint32_t word;
	size_t i, j;

	/*
	 * First pass: claim every entry (a bit readers ignore), so an index listed twice is
	 * seen as claimed the second time. On failure the claims are undone: nothing removed.
	 */
	for (i = 0; i < count; i++) {
		entry = av_entry(table, index[i]);
		word = entry ? av_gen_load(table, entry) : 0;
		if (!(word & AV_GEN_LIVE) || (word & AV_GEN_CLAIM)) {
			for (j = 0; j < i; j++) {
				entry = av_entry(table, index[j]);
				av_gen_store(table, entry,
					     av_gen_load(table, entry) & ~AV_GEN_CLAIM);
			}
			return -FI_EINVAL;
		}
		av_gen_store(table, entry, word | AV_GEN_CLAIM);
	}
	if (count && count == st->count) {
		av_remove_all(table);
		return 0;
	}

	/* Hash slots prefetched a few removals ahead, so that their misses overlap. */
	for (i = 0; i < count + AV_PREFETCH_DIST; i++) {
		if (i < count) {
			entry = av_entry(table, index[i]);
			ahead[i % AV_PREFETCH_DIST] = av_hash(entry, st->keylen);
			av_prefetch_slot(table->hash, ahead[i % AV_PREFETCH_DIST]);
		}
		if (i >= AV_PREFETCH_DIST) {
			j = i - AV_PREFETCH_DIST;
			av_remove_live(table, index[j], av_entry(table, index[j]),
				       ahead[j % AV_PREFETCH_DIST]);
		}
	}
	return 0;
}

void util_av_table_repair(struct util_av_table *table)
{
	struct util_av_table_state *st = table->st;
	uint8_t *entry;
	uint32_t word;
	size_t i;

	/* an odd count would send every lock-free reader to the lock forever */
	if (atomic_load_explicit(&st->seq, memory_order_relaxed) & 1)
		av_seq_end(st);
	st->end = UTIL_MIN(st->end, st->capacity);
	st->count = 0;
	for (i = 0; i < st->end; i++) {
		entry = av_entry(table, i);
		word = av_gen_load(table, entry) & ~AV_GEN_CLAIM;
		av_gen_store(table, entry, word);
		if (word & AV_GEN_LIVE)
			st->count++;
	}
	av_heap_refill(table);
	av_seq_begin(st);
	memset(table->hash->slot, 0, table->hash->nslots * sizeof(table->hash->slot[0]));
	av_hash_fill(table, table->hash);
	av_seq_end(st);
	util_av_table_refresh(table);
}

size_t util_av_table_mem_size(const struct util_av_table *table)
{
	const struct util_av_table_state *st = table->st;

	return st->capacity * st->stride + table->free_cap * sizeof(uint32_t) +
	       av_hash_bytes(table->hash->nslots);
}
