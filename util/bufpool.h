/*
 * Pool of fixed-size buffers: a free list first (hot), chunks allocated as it grows, up to
 * an optional limit. Not thread safe: the owner holds its own lock.
 */
#ifndef UTIL_BUFPOOL_H
#define UTIL_BUFPOOL_H

#include "util/util.h"

struct util_bufpool {
	void *free_list;        /* singly linked through the first word of each free buffer */
	size_t elem_size;       /* rounded up to the alignment */
	size_t chunk_cnt;       /* buffers added per growth */
	size_t max_cnt;         /* 0: unlimited */
	size_t total_cnt;       /* buffers allocated so far */
	size_t used_cnt;        /* buffers handed out */
	void *chunks;           /* list of allocated chunks, freed at fini */
	size_t alignment;
};

/* elem_size > 0; alignment a power of two (0: 16); chunk_cnt > 0. */
int util_bufpool_init(struct util_bufpool *pool, size_t elem_size, size_t alignment,
		      size_t chunk_cnt, size_t max_cnt);
/* Frees every chunk; buffers still handed out become invalid. */
void util_bufpool_fini(struct util_bufpool *pool);

/* Returns a buffer or NULL when the pool is at max_cnt or memory runs out. */
void *util_bufpool_get(struct util_bufpool *pool);
void util_bufpool_put(struct util_bufpool *pool, void *buf);

#endif /* UTIL_BUFPOOL_H */
