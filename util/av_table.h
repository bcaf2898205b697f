/*
 * Address table for address vectors: fixed-size addresses stored by index, the lowest free
 * index reused after a removal, a generation count per slot (bumped on every removal, so a
 * handle that carries it can be recognised as stale), and an open-addressing hash from
 * address bytes to index for O(1) reverse lookup. Compact: addrlen + 8 bytes per entry
 * (address, generation, free-heap slot) plus the hash (5-byte slots at 1/4..1/2 load, so
 * 10..20 bytes per entry). No allocation per entry; removal never allocates.
 * Not thread safe: the owner locks.
 */
#ifndef UTIL_AV_TABLE_H
#define UTIL_AV_TABLE_H

#include "util/util.h"

#define UTIL_AV_TABLE_PENDING 32

struct util_av_table {
	size_t addrlen;        /* bytes per address */
	size_t capacity;       /* slots allocated (grows by doubling) */
	size_t end;            /* 1 + highest index ever used (high-water mark) */
	size_t count;          /* live entries */
	uint8_t *addrs;        /* capacity * addrlen */
	uint32_t *gen;         /* per slot: generation << 1 | is_live */
	/* free indices below end, smallest first: a binary min-heap */
	uint32_t *free_heap;
	size_t free_cnt;
	size_t free_cap;
	/* reverse lookup: open addressing, linear probing; holds index + 1, 0 = empty,
	 * UINT32_MAX = deleted */
	uint32_t *hash;
	uint8_t *hash_tag;     /* per hash slot: 8 more hash bits, to skip most compares */
	size_t hash_mask;
	size_t hash_used;      /* slots not empty (live + deleted) */
	/*
	 * Entries inserted but not yet in the hash, with their hashes: they are hashed
	 * UTIL_AV_TABLE_PENDING at a time so that the cache misses of single insertions
	 * overlap. find and remove look here too.
	 */
	size_t pending_cnt;
	uint32_t pending[UTIL_AV_TABLE_PENDING];
	uint64_t pending_hash[UTIL_AV_TABLE_PENDING];
};

/* initial_count sizes the first allocation (0: a small default); the table grows past it. */
int util_av_table_init(struct util_av_table *table, size_t addrlen, size_t initial_count);
void util_av_table_fini(struct util_av_table *table);

/*
 * Stores addr at the lowest free index and returns it in *index. The same address may be
 * stored more than once; reverse lookup finds the lowest live index holding it.
 * Returns 0 or -FI_ENOMEM (or -FI_EINVAL past UINT32_MAX - 1 entries).
 */
int util_av_table_insert(struct util_av_table *table, const void *addr, size_t *index);
/* Returns 0, or -FI_EINVAL when index is not live. Bumps the slot's generation. */
int util_av_table_remove(struct util_av_table *table, size_t index);
/*
 * Removes count entries, all or none: -FI_EINVAL (and nothing removed) when one index is not
 * live or is listed twice, 0 otherwise.
 */
int util_av_table_remove_list(struct util_av_table *table, const size_t *index, size_t count);
/* The address at a live index, NULL otherwise. */
const void *util_av_table_get(const struct util_av_table *table, size_t index);
/* Generation of a slot (live or not); 0 for indices never used. */
uint32_t util_av_table_gen(const struct util_av_table *table, size_t index);
/* Lowest live index holding addr in *index: 0, or -FI_ENODATA. */
int util_av_table_find(const struct util_av_table *table, const void *addr, size_t *index);
/* Bytes allocated by the table (for footprint measurements). */
size_t util_av_table_mem_size(const struct util_av_table *table);

static inline bool util_av_table_is_live(const struct util_av_table *table, size_t index)
{
	return index < table->end && (table->gen[index] & 1);
}

#endif /* UTIL_AV_TABLE_H */
