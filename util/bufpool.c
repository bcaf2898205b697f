/*
 * Buffer pool (bufpool.h). A chunk is one anonymous mapping of pool->span bytes, aligned to
 * span: its header, padded to the alignment, then its buffers. A free buffer's first word
 * links its chunk's free list. The chunks with a free buffer are on pool->partial, a full
 * chunk going to its head when a buffer comes back to it, so that gets keep reusing warm
 * buffers and the chunks that are not needed empty out.
 */
#include "config.h"

#include <stdint.h>
#include <string.h>
#include <sys/mman.h>

#include "util/bufpool.h"

/* Default alignment: what malloc guarantees on x86-64, and enough for any scalar. */
#define UTIL_BUFPOOL_DEFAULT_ALIGN 16

struct util_bufpool_chunk {
	struct util_dlist link;        /* pool->partial while it has a free buffer */
	struct util_dlist all;         /* pool->chunks */
	void *free_list;
	size_t used_cnt;               /* its buffers handed out */
	size_t cnt;                    /* its buffers */
};

static inline size_t util_bufpool_align(size_t size, size_t alignment)
{
	return (size + alignment - 1) & ~(alignment - 1);
}

int util_bufpool_init(struct util_bufpool *pool, size_t elem_size, size_t alignment,
		      size_t chunk_cnt, size_t max_cnt)
{
	size_t page = 4096, bytes;

	if (!alignment)
		alignment = UTIL_BUFPOOL_DEFAULT_ALIGN;
	if (!elem_size || !chunk_cnt || (alignment & (alignment - 1)))
		return -FI_EINVAL;
	/* free buffers hold a pointer */
	alignment = UTIL_MAX(alignment, sizeof(void *));
	if (elem_size > SIZE_MAX / 4 - alignment || alignment > page)
		return -FI_EINVAL;

	memset(pool, 0, sizeof(*pool));
	util_dlist_init(&pool->partial);
	util_dlist_init(&pool->chunks);
	pool->elem_size = util_bufpool_align(UTIL_MAX(elem_size, sizeof(void *)), alignment);
	pool->chunk_cnt = chunk_cnt;
	pool->max_cnt = max_cnt;
	pool->alignment = alignment;
	pool->hdr_size = util_bufpool_align(sizeof(struct util_bufpool_chunk), alignment);
	if (chunk_cnt > (SIZE_MAX / 4 - pool->hdr_size) / pool->elem_size)
		return -FI_EINVAL;
	bytes = pool->hdr_size + chunk_cnt * pool->elem_size;
	for (pool->span = page; pool->span < bytes; pool->span <<= 1)
		;
	return 0;
}

static void util_bufpool_unmap(struct util_bufpool *pool, struct util_bufpool_chunk *chunk)
{
	util_dlist_remove(&chunk->all);
	pool->total_cnt -= chunk->cnt;
	munmap(chunk, pool->span);
}

void util_bufpool_fini(struct util_bufpool *pool)
{
	struct util_dlist *item;

	while ((item = util_dlist_pop_front(&pool->chunks)))
		util_bufpool_unmap(pool, container_of(item, struct util_bufpool_chunk, all));
	util_dlist_init(&pool->partial);
	pool->used_cnt = 0;
	pool->empty_cnt = 0;
}

/* A mapping of span bytes aligned to span: twice as much mapped, the rest unmapped. */
static void *util_bufpool_map(size_t span)
{
	uintptr_t base, start;
	void *map;

	map = mmap(NULL, 2 * span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (map == MAP_FAILED)
		return NULL;
	base = (uintptr_t) map;
	start = (base + span - 1) & ~(uintptr_t) (span - 1);
	if (start > base)
		munmap(map, start - base);
	munmap((void *) (start + span), base + span - start);
	return (void *) start;
}

static int util_bufpool_grow(struct util_bufpool *pool)
{
	struct util_bufpool_chunk *chunk;
	size_t cnt = pool->chunk_cnt, i;
	char *buf;

	if (pool->max_cnt) {
		if (pool->total_cnt >= pool->max_cnt)
			return -FI_ENOMEM;
		/* The last chunk is cut short so the pool stops exactly at max_cnt. */
		cnt = UTIL_MIN(cnt, pool->max_cnt - pool->total_cnt);
	}
	chunk = util_bufpool_map(pool->span);
	if (!chunk)
		return -FI_ENOMEM;
	chunk->cnt = cnt;
	chunk->used_cnt = 0;
	chunk->free_list = NULL;
	/* Pushed last to first so buffers are handed out in address order. */
	for (i = cnt; i > 0; i--) {
		buf = (char *) chunk + pool->hdr_size + (i - 1) * pool->elem_size;
		*(void **) buf = chunk->free_list;
		chunk->free_list = buf;
	}
	util_dlist_insert_tail(&chunk->all, &pool->chunks);
	util_dlist_insert_head(&chunk->link, &pool->partial);
	pool->total_cnt += cnt;
	pool->empty_cnt++;
	return 0;
}

void *util_bufpool_get(struct util_bufpool *pool)
{
	struct util_bufpool_chunk *chunk;
	void *buf;

	if (unlikely(util_dlist_empty(&pool->partial)) && util_bufpool_grow(pool))
		return NULL;
	chunk = container_of(pool->partial.next, struct util_bufpool_chunk, link);
	buf = chunk->free_list;
	chunk->free_list = *(void **) buf;
	if (!chunk->used_cnt++)
		pool->empty_cnt--;
	if (!chunk->free_list)
		util_dlist_remove(&chunk->link);
	pool->used_cnt++;
	return buf;
}

void util_bufpool_put(struct util_bufpool *pool, void *buf)
{
	struct util_bufpool_chunk *chunk;

	if (!buf)
		return;
	chunk = (struct util_bufpool_chunk *) ((uintptr_t) buf & ~(uintptr_t) (pool->span - 1));
	/* Last in, first out: the next get reuses the buffer most likely still in cache. */
	if (!chunk->free_list)
		util_dlist_insert_head(&chunk->link, &pool->partial);
	*(void **) buf = chunk->free_list;
	chunk->free_list = buf;
	pool->used_cnt--;
	if (--chunk->used_cnt)
		return;
	/* All of its buffers are back: one such chunk is kept, the next goes. */
	if (!pool->empty_cnt++)
		return;
	pool->empty_cnt--;
	util_dlist_remove(&chunk->link);
	util_bufpool_unmap(pool, chunk);
}
