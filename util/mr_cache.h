/*
 * Registration cache: a memory registration made for one transfer is kept after it, and the
 * next transfer from the same range (address, length and access) takes it again instead of
 * registering anew. Entries in use are shared and counted; unused ones are kept up to a
 * capacity and released least recently used first.
 *
 * Provider-independent: registering and releasing are the owner's callbacks, and the cache
 * keeps the owner's handle. It has no memory monitor: an entry stays valid for its range of
 * addresses whatever the application does with the memory there, which is right only for
 * registrations that name addresses without pinning pages (software cores). The owner decides
 * whether that holds; util_mr_cache_flush releases what is unused.
 *
 * Not thread safe: the owner holds its lock around every call, callbacks included.
 */
#ifndef UTIL_MR_CACHE_H
#define UTIL_MR_CACHE_H

#include <sys/uio.h>
#include <uthash.h>

#include "util/util.h"
#include "util/list.h"

struct util_mr_cache_key {
	uintptr_t addr;
	size_t len;
	uint64_t access;
};

struct util_mr_cache_entry {
	UT_hash_handle hh;             /* cache->entries, by key */
	struct util_mr_cache_key key;
	struct util_dlist lru_link;    /* cache->lru while unused */
	size_t ref;                    /* users holding it */
	void *handle;                  /* the owner's registration */
};

struct util_mr_cache {
	struct util_mr_cache_entry *entries; /* every entry, used or not (uthash) */
	struct util_dlist lru;         /* unused entries, least recently used first */
	size_t lru_cnt;
	size_t capacity;               /* unused entries kept; 0: none (no caching) */
	int (*reg)(void *arg, const struct iovec *iov, uint64_t access, void **handle);
	void (*dereg)(void *arg, void *handle);
	void *arg;
	uint64_t hit_cnt;              /* gets served by an entry already there */
	uint64_t miss_cnt;             /* gets that registered */
};

/*
 * reg registers iov (one range) with access and returns the owner's handle: 0 or a negative
 * -FI_E* code; dereg releases a handle. capacity: unused entries kept (0: each is released
 * once unused, so only concurrent users share one).
 */
void util_mr_cache_init(struct util_mr_cache *cache, size_t capacity,
			int (*reg)(void *arg, const struct iovec *iov, uint64_t access,
				   void **handle),
			void (*dereg)(void *arg, void *handle), void *arg);
/* Releases every entry; none may be in use. */
void util_mr_cache_fini(struct util_mr_cache *cache);

/*
 * An entry registered for exactly iov and access, taken for use: 0, or reg's error. A range
 * of length 0 is refused with -FI_EINVAL.
 */
int util_mr_cache_get(struct util_mr_cache *cache, const struct iovec *iov, uint64_t access,
		      struct util_mr_cache_entry **entry);
/* The caller is done with entry: it is kept unused, within the capacity. */
void util_mr_cache_put(struct util_mr_cache *cache, struct util_mr_cache_entry *entry);
/* Releases every unused entry. */
void util_mr_cache_flush(struct util_mr_cache *cache);

/* Entries held, in use or not. */
static inline size_t util_mr_cache_count(const struct util_mr_cache *cache)
{
	return HASH_COUNT(cache->entries);
}

#endif /* UTIL_MR_CACHE_H */
