/* Registration map (util/mr_map.h). */
#include "config.h"

#include <stdlib.h>

#include "util/mr_map.h"

void util_mr_map_init(struct util_mr_map *map, uint64_t mr_mode)
{
	*map = (struct util_mr_map) {
		.is_virt_addr = mr_mode & FI_MR_VIRT_ADDR,
		.is_prov_key = mr_mode & FI_MR_PROV_KEY,
	};
}

static void util_mr_map_free(struct util_mr_map_entry *entry)
{
	free(entry);
}

void util_mr_map_fini(struct util_mr_map *map)
{
	struct util_mr_map_entry *entry, *tmp;

	HASH_ITER(hh, map->entries, entry, tmp) {
		HASH_DEL(map->entries, entry);
		util_mr_map_free(entry);
	}
	map->entry_cnt = 0;
}

struct util_mr_map_entry *util_mr_map_find(struct util_mr_map *map, uint64_t key)
{
	struct util_mr_map_entry *entry;

	HASH_FIND(hh, map->entries, &key, sizeof(key), entry);
	return entry;
}

int util_mr_map_insert(struct util_mr_map *map, const struct fi_mr_attr *attr, void *context,
		       struct util_mr_map_entry **entry_out)
{
	struct util_mr_map_entry *entry;
	size_t i, len = 0;
	uint64_t key;

	if ((attr->iov_count && !attr->mr_iov) || attr->offset)
		return -FI_EINVAL;
	for (i = 0; i < attr->iov_count; i++) {
		const struct iovec *iov = &attr->mr_iov[i];

		if ((!iov->iov_base && iov->iov_len) ||
		    (uintptr_t) iov->iov_base + iov->iov_len < (uintptr_t) iov->iov_base ||
		    len + iov->iov_len < len)
			return -FI_EINVAL;
		len += iov->iov_len;
	}
	if (map->is_prov_key) {
		/* skip keys an entry still holds: the counter may come round in a long run */
		do
			key = map->next_key++;
		while (util_mr_map_find(map, key));
	} else {
		key = attr->requested_key;
		if (util_mr_map_find(map, key))
			return -FI_ENOKEY;
	}

	entry = calloc(1, sizeof(*entry) + attr->iov_count * sizeof(entry->iov[0]));
	if (!entry)
		return -FI_ENOMEM;
	entry->key = key;
	entry->access = attr->access;
	entry->len = len;
	entry->iov_cnt = attr->iov_count;
	for (i = 0; i < attr->iov_count; i++)
		entry->iov[i] = attr->mr_iov[i];
	entry->base = map->is_virt_addr && attr->iov_count ?
		      (uint64_t) (uintptr_t) attr->mr_iov[0].iov_base : 0;
	entry->context = context;
	entry->ref = 1;
	HASH_ADD(hh, map->entries, key, sizeof(entry->key), entry);
	map->entry_cnt++;
	*entry_out = entry;
	return 0;
}

void util_mr_map_remove(struct util_mr_map *map, struct util_mr_map_entry *entry)
{
	HASH_DEL(map->entries, entry);
	map->entry_cnt--;
	util_mr_map_put(map, entry);
}

void util_mr_map_put(struct util_mr_map *map, struct util_mr_map_entry *entry)
{
	(void) map;
	if (--entry->ref == 0)
		util_mr_map_free(entry);
}

int util_mr_map_get(struct util_mr_map *map, uint64_t key, uint64_t addr, size_t len,
		    uint64_t access, struct iovec *iov, size_t *iov_cnt,
		    struct util_mr_map_entry **entry_out)
{
	struct util_mr_map_entry *entry;
	size_t i, cnt = 0, offset;

	entry = util_mr_map_find(map, key);
	if (!entry)
		return -FI_ENOKEY;
	if ((entry->access & access) != access)
		return -FI_EACCES;
	/* the whole range inside the region, with no wrap-around on the way */
	if (addr < entry->base || addr - entry->base > entry->len ||
	    len > entry->len - (addr - entry->base))
		return -FI_EACCES;

	offset = (size_t) (addr - entry->base);
	for (i = 0; i < entry->iov_cnt && len; i++) {
		size_t seg;

		if (offset >= entry->iov[i].iov_len) {
			offset -= entry->iov[i].iov_len;
			continue;
		}
		if (cnt == *iov_cnt)
			return -FI_ETOOSMALL;
		seg = entry->iov[i].iov_len - offset;
		if (seg > len)
			seg = len;
		iov[cnt].iov_base = (char *) entry->iov[i].iov_base + offset;
		iov[cnt].iov_len = seg;
		cnt++;
		len -= seg;
		offset = 0;
	}
	*iov_cnt = cnt;
	entry->ref++;
	*entry_out = entry;
	return 0;
}
