/* Registration cache (util/mr_cache.h). */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "util/mr_cache.h"

void util_mr_cache_init(struct util_mr_cache *cache, size_t capacity,
			int (*reg)(void *arg, const struct iovec *iov, uint64_t access,
				   void **handle),
			void (*dereg)(void *arg, void *handle), void *arg)
{
	memset(cache, 0, sizeof(*cache));
	util_dlist_init(&cache->lru);
	cache->capacity = capacity;
	cache->reg = reg;
	cache->dereg = dereg;
	cache->arg = arg;
}

static void util_mr_cache_release(struct util_mr_cache *cache, struct util_mr_cache_entry *entry)
{
	HASH_DEL(cache->entries, entry);
	cache->dereg(cache->arg, entry->handle);
	free(entry);
}

/* Releases unused entries, oldest first, until at most keep remain. */
static void util_mr_cache_trim(struct util_mr_cache *cache, size_t keep)
{
	struct util_mr_cache_entry *entry;
	struct util_dlist *item;

	while (cache->lru_cnt > keep && (item = util_dlist_pop_front(&cache->lru))) {
		cache->lru_cnt--;
		entry = container_of(item, struct util_mr_cache_entry, lru_link);
		util_mr_cache_release(cache, entry);
	}
}

void util_mr_cache_flush(struct util_mr_cache *cache)
{
	util_mr_cache_trim(cache, 0);
}

void util_mr_cache_fini(struct util_mr_cache *cache)
{
	struct util_mr_cache_entry *entry, *tmp;

	util_mr_cache_flush(cache);
	HASH_ITER(hh, cache->entries, entry, tmp) {
		FI_WARN(util_prov, FI_LOG_MR, "registration of %zu bytes still in use at close\n",
			entry->key.len);
		util_mr_cache_release(cache, entry);
	}
}

int util_mr_cache_get(struct util_mr_cache *cache, const struct iovec *iov, uint64_t access,
		      struct util_mr_cache_entry **entry_out)
{
	struct util_mr_cache_entry *entry;
	struct util_mr_cache_key key;
	int ret;

	if (!iov->iov_len)
		return -FI_EINVAL;
	memset(&key, 0, sizeof(key));
	key.addr = (uintptr_t) iov->iov_base;
	key.len = iov->iov_len;
	key.access = access;
	HASH_FIND(hh, cache->entries, &key, sizeof(key), entry);
	if (entry) {
		if (!entry->ref++) {
			util_dlist_remove(&entry->lru_link);
			cache->lru_cnt--;
		}
		cache->hit_cnt++;
		*entry_out = entry;
		return 0;
	}

	entry = calloc(1, sizeof(*entry));
	if (!entry)
		return -FI_ENOMEM;
	ret = cache->reg(cache->arg, iov, access, &entry->handle);
	if (ret) {
		free(entry);
		return ret;
	}
	entry->key = key;
	entry->ref = 1;
	util_dlist_init(&entry->lru_link);
	HASH_ADD(hh, cache->entries, key, sizeof(key), entry);
	cache->miss_cnt++;
	*entry_out = entry;
	return 0;
}

void util_mr_cache_put(struct util_mr_cache *cache, struct util_mr_cache_entry *entry)
{
	if (--entry->ref)
		return;
	util_dlist_insert_tail(&entry->lru_link, &cache->lru);
	cache->lru_cnt++;
	util_mr_cache_trim(cache, cache->capacity);
}
