/*
 * What the address table's writer (av_table.c) and its lock-free lookups (av_table_find.c)
 * share: slot and generation-word constants, the hash, and key comparisons. Private to util/.
 */
#ifndef UTIL_AV_TABLE_INT_H
#define UTIL_AV_TABLE_INT_H

#include <string.h>

#include "util/av_table.h"

#define AV_HASH_EMPTY UTIL_AV_HASH_EMPTY
#define AV_HASH_DELETED UTIL_AV_HASH_DELETED
#define AV_LINE_SLOTS UTIL_AV_HASH_LINE_SLOTS

/* generation word (see av_table.h) */
#define AV_GEN_LIVE UTIL_AV_TABLE_GEN_LIVE
#define AV_GEN_CLAIM UTIL_AV_TABLE_GEN_CLAIM
#define AV_GEN_SHIFT UTIL_AV_TABLE_GEN_SHIFT

/* hash slot meta */
#define AV_META_EXACT UTIL_AV_HASH_EXACT
#define AV_META_DUP UTIL_AV_HASH_DUP

#define av_entry util_av_table_entry
#define av_gen_off util_av_table_gen_off

#define av_hash util_av_table_hash

/* A key whose bytes past the first eight are zero: its hash identifies it. */
static inline bool av_is_exact(const void *key, size_t len)
{
	const uint8_t *p = key;
	uint64_t w, acc = 0;
	size_t off;

	if (len == 16) {
		memcpy(&w, p + 8, 8);
		return w == 0;
	}
	for (off = 8; off + 8 <= len; off += 8) {
		memcpy(&w, p + off, 8);
		acc |= w;
	}
	for (; off < len; off++)
		acc |= p[off];
	return acc == 0;
}

static inline bool av_equal(const void *a, const void *b, size_t len)
{
	uint64_t a0, a1, b0, b1;

	/* sockaddr_in, the common case: two loads instead of a memcmp call */
	if (len == 16) {
		memcpy(&a0, a, 8);
		memcpy(&a1, (const uint8_t *) a + 8, 8);
		memcpy(&b0, b, 8);
		memcpy(&b1, (const uint8_t *) b + 8, 8);
		return ((a0 ^ b0) | (a1 ^ b1)) == 0;
	}
	return memcmp(a, b, len) == 0;
}

#define av_home util_av_table_home

static inline size_t av_next(size_t pos, uint64_t nslots)
{
	return pos + 1 == nslots ? 0 : pos + 1;
}

#endif /* UTIL_AV_TABLE_INT_H */
