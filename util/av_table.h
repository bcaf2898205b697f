/*
 * Address table for address vectors: fixed-size keys (addresses) stored by index, the lowest
 * free index reused after a removal, a generation count per slot (bumped on every removal, so
 * a handle that carries it can be recognised as stale), and an open-addressing hash from key
 * bytes to index for O(1) reverse lookup.
 *
 * Layout, chosen so that each lookup costs one cache miss:
 * - entries: the key, then its 32-bit generation word, in one slot of `stride` bytes (a power
 *   of two up to 64, so a slot never straddles a cache line). Private tables keep them in
 *   chunks that never move (chunk k holds 2^k times the first chunk's entries), so readers
 *   need no lock to follow an index.
 * - hash: 16-byte slots holding the key's full 64-bit hash, the index and the generation,
 *   four to a cache line; a key's chain starts at the first slot of a line, so that nearly
 *   every key is found in the one line a lookup fetches. A key whose bytes past the eighth
 *   are all zero (a normalised sockaddr_in) is "exact": its hash is a bijection of its first
 *   eight bytes, so two exact keys with equal hashes are equal and a reverse lookup never
 *   touches the entry. A slot also says whether another live copy of its key may exist
 *   (duplicates are allowed; the lowest index wins), so a lookup can stop at the first match.
 * - reverse lookup of a 16-byte exact key found in its home line, the common case, is inline
 *   (util_av_table_find) and short, so that back-to-back lookups overlap their cache misses.
 *
 * Memory per entry: stride (32 for sockaddr_in and sockaddr_in6) + 4 (free-index heap) + 16
 * per hash slot at a load of 0.45..0.6 (27..36 bytes).
 *
 * Concurrency: one writer at a time (the owner locks around insert, remove, flush, reserve,
 * repair). util_av_table_read and util_av_table_find may run without that lock, concurrently
 * with the writer: entries are read under their generation word (a per-entry seqlock), the
 * hash under a table-wide sequence count; old hash arrays are retired, not freed, until fini
 * (their memory is given back to the system, their address range kept).
 *
 * A table may also live in memory the caller provides (util_av_table_attach: shared memory of
 * a named AV): fixed capacity, offsets instead of pointers in the shared part, so every
 * process maps it wherever it likes. The attached layout and the hash function are then a
 * format shared between processes: whoever changes them changes the sharer's format version
 * (layer/av_shm.c, LAYER_AV_SHM_VERSION).
 */
#ifndef UTIL_AV_TABLE_H
#define UTIL_AV_TABLE_H

#include <stdatomic.h>
#include <string.h>

#include "util/util.h"

/* Insertions reach the hash in batches of this many, their hash slots prefetched together. */
#define UTIL_AV_TABLE_PENDING 32
/* Private tables: chunk k holds 2^k times the first chunk (so 2^32 entries fit in 33). */
#define UTIL_AV_TABLE_MAX_CHUNKS 33
/* Bits of generation kept per slot; it wraps at 2^30. */
#define UTIL_AV_TABLE_GEN_BITS 30
#define UTIL_AV_TABLE_GEN_MASK ((1u << UTIL_AV_TABLE_GEN_BITS) - 1)
/* Generation word of an entry: live bit, claim bit (a removal in progress), generation. */
#define UTIL_AV_TABLE_GEN_LIVE 1u
#define UTIL_AV_TABLE_GEN_CLAIM 2u
#define UTIL_AV_TABLE_GEN_SHIFT 2
/* Largest number of entries (index + 1 must fit in 32 bits next to the tombstone value). */
#define UTIL_AV_TABLE_MAX_ENTRIES ((size_t) UINT32_MAX - 1)

/*
 * The part of a table that may be shared between processes: sizes and counters only, no
 * pointers. For an attached table the offsets locate the arrays in the attached region.
 */
struct util_av_table_state {
	uint64_t keylen;            /* bytes per key */
	uint64_t stride;            /* bytes per entry: key, generation word, padding */
	uint64_t capacity;          /* entries allocated (attached: the fixed maximum) */
	uint64_t end;               /* 1 + highest index ever used (high-water mark) */
	uint64_t count;             /* live entries */
	uint64_t free_cnt;          /* entries in the free-index heap */
	uint64_t hash_used;         /* hash slots not empty (live + tombstones) */
	uint64_t pending_cnt;       /* inserted entries not in the hash yet */
	_Atomic uint64_t seq;       /* odd while the writer changes the hash or pending list */
	/* attached tables: where the arrays are, from the start of the region */
	uint64_t entries_off;
	uint64_t heap_off;
	uint64_t hash_off;
	uint32_t pending[UTIL_AV_TABLE_PENDING];
	uint64_t pending_hash[UTIL_AV_TABLE_PENDING];
};

struct util_av_hash_slot {
	uint64_t hv;                /* full hash of the key */
	uint32_t ref;               /* index + 1; 0 empty, UINT32_MAX tombstone */
	uint32_t meta;              /* gen << 2 | may_have_dup << 1 | is_exact; 0 if not live */
};

/* Hash slot ref: nothing there ever since the last rebuild, or an entry removed. */
#define UTIL_AV_HASH_EMPTY 0u
#define UTIL_AV_HASH_DELETED UINT32_MAX
/* Hash slot meta: the key is exact; another live copy of the key may exist. */
#define UTIL_AV_HASH_EXACT 1u
#define UTIL_AV_HASH_DUP 2u
/* Slots in a cache line: a key's chain starts at the first slot of a line. */
#define UTIL_AV_HASH_LINE_SLOTS (64 / sizeof(struct util_av_hash_slot))
_Static_assert(UTIL_AV_HASH_LINE_SLOTS == 4, "util_av_table_find reads four slots a line");

/*
 * A hash array: its size travels with it, so a lock-free reader sees a consistent pair. The
 * slots start on a cache line (the array is 64-byte aligned), so each line holds one bucket.
 */
struct util_av_hash {
	uint64_t nslots;            /* a multiple of the slots in a cache line */
	uint64_t reserved[7];
	struct util_av_hash_slot slot[];
};

struct util_av_retired;

struct util_av_table {
	struct util_av_table_state *st;   /* &own, or inside the attached region */
	uint8_t *_Atomic chunk[UTIL_AV_TABLE_MAX_CHUNKS];
	unsigned chunk_shift;             /* log2 of the first chunk's entries */
	struct util_av_hash *_Atomic hash;
	uint32_t *free_heap;              /* free indices below end, a binary min-heap */
	size_t free_cap;                  /* private: heap slots allocated */
	bool is_attached;                 /* caller's memory: fixed capacity, nothing freed */
	struct util_av_retired *retired;  /* private: hash arrays replaced by a rebuild */
	/*
	 * Copies of st->end and st->count for readers that hold the owner's lock, as of this
	 * view's last change (a shared table changed by another process: util_av_table_refresh).
	 * Prefer util_av_table_end / util_av_table_count.
	 */
	size_t end;
	size_t count;
	struct util_av_table_state own;
};

/* initial_count sizes the first allocation (0: a small default); the table grows past it. */
int util_av_table_init(struct util_av_table *table, size_t keylen, size_t initial_count);
void util_av_table_fini(struct util_av_table *table);

/* Bytes a table of capacity entries needs in a region given to util_av_table_attach. */
size_t util_av_table_region_size(size_t keylen, size_t capacity);
/*
 * Uses region (size bytes, 64-byte aligned) for a table of fixed capacity. is_new: the region
 * is zeroed memory to initialise; otherwise it holds a table set up with the same keylen and
 * capacity (checked: -FI_EINVAL if not). fini then only forgets the region.
 */
int util_av_table_attach(struct util_av_table *table, void *region, size_t size, size_t keylen,
			 size_t capacity, bool is_new);

/*
 * Stores key at the lowest free index and returns it in *index, its generation in *gen (may be
 * NULL). The same key may be stored
 * more than once; reverse lookup finds the lowest live index holding it. Returns 0, -FI_ENOMEM,
 * or -FI_ENOSPC when the table cannot hold more (attached and full, or past
 * UTIL_AV_TABLE_MAX_ENTRIES).
 */
int util_av_table_insert(struct util_av_table *table, const void *key, size_t *index,
			 uint32_t *gen);
/* Makes room for count more insertions (entries and hash) at once: 0 or -FI_ENOMEM. */
int util_av_table_reserve(struct util_av_table *table, size_t count);
/* Hashes the pending insertions now (they are found either way; this only finishes work). */
void util_av_table_flush(struct util_av_table *table);
/* Returns 0, or -FI_EINVAL when index is not live. Bumps the slot's generation. */
int util_av_table_remove(struct util_av_table *table, size_t index);
/*
 * Removes count entries, all or none: -FI_EINVAL (and nothing removed) when one index is not
 * live or is listed twice, 0 otherwise.
 */
int util_av_table_remove_list(struct util_av_table *table, const size_t *index, size_t count);

/* Offset of the generation word in an entry. */
static inline size_t util_av_table_gen_off(size_t keylen)
{
	return (keylen + 3) & ~(size_t) 3;
}

/*
 * The entry of index, or NULL past the allocated entries. Safe without the lock: chunks are
 * published before the capacity that covers them and never move.
 */
static inline __attribute__((always_inline)) uint8_t *
util_av_table_entry(const struct util_av_table *table, size_t index)
{
	const struct util_av_table_state *st = table->st;
	size_t q, base;
	unsigned k;

	if (index >= __atomic_load_n(&st->capacity, __ATOMIC_ACQUIRE))
		return NULL;
	q = (index >> table->chunk_shift) + 1;
	k = 63 - (unsigned) __builtin_clzll(q);
	base = (((size_t) 1 << k) - 1) << table->chunk_shift;
	return atomic_load_explicit(&table->chunk[k], memory_order_acquire) +
	       (index - base) * st->stride;
}

/*
 * Lock-free read of one entry: copies its key into key (if not NULL) and its generation into
 * *gen (if not NULL) from one consistent snapshot. 0, or -FI_EINVAL when index is not live.
 * Inline: it is the data path's fi_addr check.
 */
static inline __attribute__((always_inline)) int
util_av_table_read(const struct util_av_table *table, size_t index, void *key, uint32_t *gen)
{
	uint8_t *entry = util_av_table_entry(table, index);
	size_t keylen = table->st->keylen;
	uint32_t first, second, *word;

	if (unlikely(!entry))
		return -FI_EINVAL;
	word = (uint32_t *) (entry + util_av_table_gen_off(keylen));
	first = __atomic_load_n(word, __ATOMIC_ACQUIRE);
	if (unlikely(!(first & UTIL_AV_TABLE_GEN_LIVE)))
		return -FI_EINVAL;
	if (key) {
		/* a sockaddr_in, the common case, without a call */
		if (keylen == 16)
			memcpy(key, entry, 16);
		else
			memcpy(key, entry, keylen);
	}
	atomic_thread_fence(memory_order_acquire);
	second = __atomic_load_n(word, __ATOMIC_RELAXED);
	/* removed (and maybe reused) while copying: it was not live at some point */
	if (unlikely((first ^ second) & ~UTIL_AV_TABLE_GEN_CLAIM))
		return -FI_EINVAL;
	if (gen)
		*gen = first >> UTIL_AV_TABLE_GEN_SHIFT;
	return 0;
}

/* Generation of a slot (live or not); 0 for indices never used. */
static inline uint32_t util_av_table_gen(const struct util_av_table *table, size_t index)
{
	uint8_t *entry = util_av_table_entry(table, index);
	uint32_t *word;

	if (!entry)
		return 0;
	word = (uint32_t *) (entry + util_av_table_gen_off(table->st->keylen));
	return __atomic_load_n(word, __ATOMIC_ACQUIRE) >> UTIL_AV_TABLE_GEN_SHIFT;
}

static inline bool util_av_table_is_live(const struct util_av_table *table, size_t index)
{
	return !util_av_table_read(table, index, NULL, NULL);
}

/* The key at a live index, NULL otherwise (writer side: the owner's lock held). */
static inline const void *util_av_table_get(const struct util_av_table *table, size_t index)
{
	return util_av_table_is_live(table, index) ? util_av_table_entry(table, index) : NULL;
}
/*
 * Lowest live index >= min_index holding key (walks a key's copies), and its generation (gen
 * may be NULL): 0, or -FI_ENODATA. Safe without the owner's lock; then -FI_EAGAIN when a
 * writer kept changing the table (the caller takes the lock and asks again: with the lock
 * held this never happens).
 */
int util_av_table_find_from(const struct util_av_table *table, const void *key,
			    size_t min_index, size_t *index, uint32_t *gen);

/* murmur3's 64-bit finaliser: a bijection with full avalanche. */
static inline uint64_t util_av_table_mix64(uint64_t h)
{
	h ^= h >> 33;
	h *= 0xff51afd7ed558ccdULL;
	h ^= h >> 33;
	h *= 0xc4ceb9fe1a85ec53ULL;
	h ^= h >> 33;
	return h;
}

/* Odd multiplier and seed of the key hash. */
#define UTIL_AV_TABLE_HASH_MUL 0x9e3779b97f4a7c15ULL
#define UTIL_AV_TABLE_HASH16_SEED 0x6a09e667f3bcc909ULL

/* The hash of a 16-byte key, as two words (see util_av_table_hash). */
static inline uint64_t util_av_table_hash16(uint64_t w0, uint64_t w1)
{
	uint64_t h = w0 ^ w1 * UTIL_AV_TABLE_HASH_MUL ^ UTIL_AV_TABLE_HASH16_SEED;

	h *= 0xff51afd7ed558ccdULL;
	h ^= h >> 32;
	return h * 0xc4ceb9fe1a85ec53ULL;
}

/*
 * The hash of a key, kept whole in its slot. With every byte past the eighth zero (an exact
 * key) it is a bijection of the first eight bytes, which is what lets exact keys be compared
 * by their hash alone. 16-byte keys (sockaddr_in, the common case) take a short way: the
 * second word through an odd multiply, folded into the first, then two odd multiplies around
 * a xor-shift (the table's home line comes from the top bits, which the last multiply mixes
 * from every bit), so that an exact key costs two multiplies on the lookup's path. Other
 * lengths put each 8-byte word through an invertible step (xor, odd multiply, xor-shift) and
 * end with murmur3's finaliser.
 */
static inline uint64_t util_av_table_hash(const void *key, size_t len)
{
	const uint8_t *p = key;
	uint64_t h = UTIL_AV_TABLE_HASH_MUL ^ len;
	uint64_t w, w1;

	if (len == 16) {
		memcpy(&w, p, 8);
		memcpy(&w1, p + 8, 8);
		return util_av_table_hash16(w, w1);
	}
	for (; len >= 8; len -= 8, p += 8) {
		memcpy(&w, p, 8);
		h = (h ^ w) * UTIL_AV_TABLE_HASH_MUL;
		h ^= h >> 32;
	}
	if (len) {
		w = 0;
		memcpy(&w, p, len);
		h = (h ^ w) * UTIL_AV_TABLE_HASH_MUL;
		h ^= h >> 32;
	}
	return util_av_table_mix64(h);
}

/*
 * The first slot of the key's chain: the first of a cache line, so that a key near its home
 * is found in the one line a lookup fetches (a linear probe from anywhere in a line would
 * spill into the next one a third of the time).
 */
static inline size_t util_av_table_home(uint64_t hv, uint64_t nslots)
{
	return (size_t) (((unsigned __int128) hv * (nslots / UTIL_AV_HASH_LINE_SLOTS)) >> 64) *
	       UTIL_AV_HASH_LINE_SLOTS;
}

/*
 * The common case of util_av_table_find, with no call: a 16-byte exact key (a normalised
 * sockaddr_in) found in its home cache line, the only copy, nothing pending, no writer at
 * work. true: found, *index and *gen set; false: not settled here (absent keys included),
 * util_av_table_find_from settles it. For callers that keep their own common path free of
 * calls, so that it saves no registers.
 */
static inline __attribute__((always_inline)) bool
util_av_table_find_fast(const struct util_av_table *table, const void *key, size_t *index,
			uint32_t *gen)
{
	const struct util_av_table_state *st = table->st;
	const struct util_av_hash_slot *line, *slot;
	const struct util_av_hash *hash;
	uint64_t w[2], hv, seq;
	uint32_t meta, ref;
	unsigned is_at[4];

	if (st->keylen != 16)
		return false;
	memcpy(w, key, sizeof(w));
	if (w[1])
		return false;
	hv = util_av_table_hash16(w[0], 0);
	seq = atomic_load_explicit(&st->seq, memory_order_acquire);
	hash = atomic_load_explicit(&table->hash, memory_order_acquire);
	line = &hash->slot[util_av_table_home(hv, hash->nslots)];
	/*
	 * The slot with the hash, by arithmetic rather than a branch per slot: the one branch
	 * below is then nearly always predicted right. Any live slot with the hash will do (its
	 * key has no other copy unless marked); two or more with it give some slot, checked next.
	 */
	is_at[1] = line[1].hv == hv;
	is_at[2] = line[2].hv == hv;
	is_at[3] = line[3].hv == hv;
	slot = line + ((is_at[1] | is_at[3]) | (is_at[2] | is_at[3]) << 1);
	meta = slot->meta;
	ref = slot->ref;
	/*
	 * Not there, or dead (meta 0), or a copy of a key that may have others, or a key with a
	 * tail; a pending entry; a writer at work: not settled here. One branch for all.
	 */
	if (unlikely((slot->hv ^ hv) |
		     ((meta & (UTIL_AV_HASH_EXACT | UTIL_AV_HASH_DUP)) ^ UTIL_AV_HASH_EXACT) |
		     (seq & 1) | st->pending_cnt))
		return false;
	atomic_thread_fence(memory_order_acquire);
	if (unlikely(atomic_load_explicit(&st->seq, memory_order_relaxed) != seq))
		return false;
	*index = ref - 1;
	*gen = meta >> UTIL_AV_TABLE_GEN_SHIFT;
	return true;
}

/*
 * util_av_table_find_from from index 0, its common case inline (util_av_table_find_fast), as
 * util_av_table_read is. Looked up back to back (FI_SOURCE on a busy endpoint), the cache
 * misses overlap only when the path from one lookup's miss to the next one's is short: out of
 * line, with its calls and their register saves, one lookup was twice as slow as here.
 */
static inline __attribute__((always_inline)) int
util_av_table_find(const struct util_av_table *table, const void *key, size_t *index,
		   uint32_t *gen)
{
	uint32_t found_gen;

	if (likely(util_av_table_find_fast(table, key, index, &found_gen))) {
		if (gen)
			*gen = found_gen;
		return 0;
	}
	return util_av_table_find_from(table, key, 0, index, gen);
}

/*
 * util_av_table_find for count keys at once (key i at keys + i * stride): their hash slots are
 * fetched together, so the cache misses overlap. ret[i] is 0 (index[i] and, if gen is not
 * NULL, gen[i] set) or -FI_ENODATA. Returns 0, or -FI_EAGAIN as util_av_table_find does (a
 * writer kept the table busy: the caller takes the lock and asks again).
 */
int util_av_table_find_many(const struct util_av_table *table, const void *keys, size_t stride,
			    size_t count, size_t *index, uint32_t *gen, int *ret);

/*
 * After a writer died in the middle of a change (attached tables in shared memory): rebuilds
 * the free-index heap, the counts and the hash from the entries, which are always valid (an
 * entry becomes live only once its key is written).
 */
void util_av_table_repair(struct util_av_table *table);

/* 1 + the highest index ever used, and the number of live entries (owner's lock held). */
static inline size_t util_av_table_end(const struct util_av_table *table)
{
	return table->st->end;
}

static inline size_t util_av_table_count(const struct util_av_table *table)
{
	return table->st->count;
}

/* Re-reads end and count of a shared table into the view's copies (owner's lock held). */
static inline void util_av_table_refresh(struct util_av_table *table)
{
	table->end = table->st->end;
	table->count = table->st->count;
}

/* Bytes held by the table (retired hash arrays excluded: their pages are given back). */
size_t util_av_table_mem_size(const struct util_av_table *table);

#endif /* UTIL_AV_TABLE_H */
