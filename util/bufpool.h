/*
 * Pool of fixed-size buffers, carved from chunks of chunk_cnt as it grows, up to an optional
 * limit. A chunk whose buffers have all come back is given back to the system once the pool
 * keeps another such chunk, so a pool that grew for a burst (a flood of unexpected messages,
 * a thousand peers connecting at once) shrinks after it. Each chunk is a mapping of its own,
 * aligned to its size (a power of two), so a buffer finds its chunk from its address; each
 * chunk keeps its free buffers in a list of its own. Not thread safe: the owner holds its
 * own lock.
 */
#ifndef UTIL_BUFPOOL_H
#define UTIL_BUFPOOL_H

#include "util/list.h"
#include "util/util.h"

struct util_bufpool {
	struct util_dlist partial;     /* chunks with a free buffer: gets take the first */
	size_t elem_size;              /* rounded up to the alignment */
	size_t chunk_cnt;              /* buffers added per growth */
	size_t max_cnt;                /* 0: unlimited */
	size_t total_cnt;              /* buffers in the pool's chunks now */
	size_t used_cnt;               /* buffers handed out */
	size_t alignment;
	size_t hdr_size;               /* a chunk's header, padded to the alignment */
	size_t span;                   /* a chunk's mapping: a power of two, its alignment */
	size_t empty_cnt;              /* chunks with no buffer handed out (at most one kept) */
	struct util_dlist chunks;      /* every chunk, unmapped at fini */
};

/* elem_size > 0; alignment a power of two (0: 16); chunk_cnt > 0. */
int util_bufpool_init(struct util_bufpool *pool, size_t elem_size, size_t alignment,
		      size_t chunk_cnt, size_t max_cnt);
/* Unmaps every chunk; buffers still handed out become invalid. */
void util_bufpool_fini(struct util_bufpool *pool);

/* Returns a buffer or NULL when the pool is at max_cnt or memory runs out. */
void *util_bufpool_get(struct util_bufpool *pool);
/* Gives a buffer of the pool back (NULL: nothing). */
void util_bufpool_put(struct util_bufpool *pool, void *buf);

#endif /* UTIL_BUFPOOL_H */
