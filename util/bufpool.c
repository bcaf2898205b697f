/*
 * Buffer pool: buffers are carved from chunks of chunk_cnt, a free buffer's first word links
 * the free list, so get and put are a pointer swap. Each chunk starts with a header (the
 * chunk list link) padded to the alignment so the buffers after it stay aligned.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "util/bufpool.h"

/* Default alignment: what malloc guarantees on x86-64, and enough for any scalar. */
#define UTIL_BUFPOOL_DEFAULT_ALIGN 16

static inline size_t util_bufpool_align(size_t size, size_t alignment)
{
	return (size + alignment - 1) & ~(alignment - 1);
}

int util_bufpool_init(struct util_bufpool *pool, size_t elem_size, size_t alignment,
		      size_t chunk_cnt, size_t max_cnt)
{
	if (!alignment)
		alignment = UTIL_BUFPOOL_DEFAULT_ALIGN;
	if (!elem_size || !chunk_cnt || (alignment & (alignment - 1)))
		return -FI_EINVAL;
	/* posix_memalign wants a multiple of sizeof(void *); free buffers hold a pointer. */
	alignment = UTIL_MAX(alignment, sizeof(void *));
	if (elem_size > SIZE_MAX - alignment)
		return -FI_EINVAL;

	memset(pool, 0, sizeof(*pool));
	pool->elem_size = util_bufpool_align(UTIL_MAX(elem_size, sizeof(void *)), alignment);
	pool->chunk_cnt = chunk_cnt;
	pool->max_cnt = max_cnt;
	pool->alignment = alignment;
	return 0;
}

void util_bufpool_fini(struct util_bufpool *pool)
{
	void *chunk;

	while ((chunk = pool->chunks)) {
		pool->chunks = *(void **) chunk;
		free(chunk);
	}
	pool->free_list = NULL;
	pool->total_cnt = 0;
	pool->used_cnt = 0;
}

static int util_bufpool_grow(struct util_bufpool *pool)
{
	size_t hdr_size = util_bufpool_align(sizeof(void *), pool->alignment);
	size_t cnt = pool->chunk_cnt;
	char *chunk, *buf;
	size_t i;

	if (pool->max_cnt) {
		if (pool->total_cnt >= pool->max_cnt)
			return -FI_ENOMEM;
		/* The last chunk is cut short so the pool stops exactly at max_cnt. */
		cnt = UTIL_MIN(cnt, pool->max_cnt - pool->total_cnt);
	}
	if (cnt > (SIZE_MAX - hdr_size) / pool->elem_size)
		return -FI_ENOMEM;
	if (posix_memalign((void **) &chunk, pool->alignment, hdr_size + cnt * pool->elem_size))
		return -FI_ENOMEM;

	*(void **) chunk = pool->chunks;
	pool->chunks = chunk;
	/* Pushed last to first so buffers are handed out in address order. */
	for (i = cnt; i > 0; i--) {
		buf = chunk + hdr_size + (i - 1) * pool->elem_size;
		*(void **) buf = pool->free_list;
		pool->free_list = buf;
	}
	pool->total_cnt += cnt;
	return 0;
}

void *util_bufpool_get(struct util_bufpool *pool)
{
	void *buf;

	if (unlikely(!pool->free_list) && util_bufpool_grow(pool))
		return NULL;

	buf = pool->free_list;
	pool->free_list = *(void **) buf;
	pool->used_cnt++;
	return buf;
}

void util_bufpool_put(struct util_bufpool *pool, void *buf)
{
	if (!buf)
		return;
	/* Last in, first out: the next get reuses the buffer most likely still in cache. */
	*(void **) buf = pool->free_list;
	pool->free_list = buf;
	pool->used_cnt--;
}
