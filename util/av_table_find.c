/*
 * Address table lookups (see av_table.h): reverse lookups by key, one or a batch at a time,
 * without the owner's lock. They read the hash under the table's sequence count and retry
 * while a writer changes it (av_table.c).
 */
#include "config.h"

#include "util/av_table_int.h"

/* lock-free lookups retried this often before the caller is told to lock */
#define AV_FIND_TRIES 8
/* keys looked up together by util_av_table_find_many */
#define AV_FIND_BATCH 16

/* av_find_in_line: the home line does not settle it, walk the chain */
#define AV_FIND_WALK 1

/*
 * The common lookup, from the key's home cache line alone (no entry pending): 0 (found), or
 * -FI_ENODATA, or AV_FIND_WALK. The line's slots are compared without branches, so that the
 * one branch on what memory returns is nearly always predicted right: the processor then goes
 * on to the caller's next lookup while this one waits, and back-to-back lookups overlap their
 * cache misses instead of paying one each in turn.
 */
static inline int av_find_in_line(const struct util_av_table *table,
				  const struct util_av_hash *hash, const void *key, uint64_t hv,
				  bool is_exact, size_t min_index, size_t *index, uint32_t *gen)
{
	const struct util_av_hash_slot *line = &hash->slot[av_home(hv, hash->nslots)];
	unsigned match = 0, empty = 0, i;
	const uint8_t *entry;
	uint32_t ref, meta;

	for (i = 0; i < AV_LINE_SLOTS; i++) {
		ref = line[i].ref;
		match |= (unsigned) ((line[i].hv == hv) & (ref - 1 < AV_HASH_DELETED - 1)) << i;
		empty |= (unsigned) (ref == AV_HASH_EMPTY) << i;
	}
	/* a chain ends at its first empty slot: no match before one, no key */
	if (unlikely(!match))
		return empty ? -FI_ENODATA : AV_FIND_WALK;

	i = (unsigned) __builtin_ctz(match);
	ref = line[i].ref;
	meta = line[i].meta;
	if (!(is_exact && (meta & AV_META_EXACT))) {
		/* another key with the same hash: it may be further on */
		entry = av_entry(table, ref - 1);
		if (!entry || !av_equal(entry, key, table->st->keylen))
			return AV_FIND_WALK;
	}
	/* other copies may lie anywhere in the chain */
	if (unlikely(meta & AV_META_DUP))
		return AV_FIND_WALK;
	if (ref - 1 < min_index)
		return -FI_ENODATA;
	*index = ref - 1;
	*gen = meta >> AV_GEN_SHIFT;
	return 0;
}

/*
 * Every slot of the key's chain and the pending list, for the lowest copy at or above
 * min_index: keys with copies, keys past their home line, entries not hashed yet.
 */
static int av_find_walk(const struct util_av_table *table, const struct util_av_hash *hash,
			const void *key, uint64_t hv, bool is_exact, size_t min_index,
			size_t *index, uint32_t *gen)
{
	const struct util_av_table_state *st = table->st;
	size_t keylen = st->keylen, best = SIZE_MAX;
	uint64_t n = hash->nslots, steps;
	size_t pos = av_home(hv, n), pending_cnt, i, idx;
	const struct util_av_hash_slot *slot;
	uint32_t best_gen = 0, word;
	const uint8_t *entry;

	for (steps = 0; steps < n; steps++, pos = av_next(pos, n)) {
		slot = &hash->slot[pos];
		if (slot->ref == AV_HASH_EMPTY)
			break;
		if (slot->hv != hv || slot->ref == AV_HASH_DELETED || slot->ref - 1 >= best)
			continue;
		idx = slot->ref - 1;
		if (!(is_exact && (slot->meta & AV_META_EXACT))) {
			entry = av_entry(table, idx);
			if (!entry || !av_equal(entry, key, keylen))
				continue;
		}
		/* a copy below the bound: the key's only copy unless it is marked */
		if (idx < min_index) {
			if (!(slot->meta & AV_META_DUP))
				break;
			continue;
		}
		best = idx;
		best_gen = slot->meta >> AV_GEN_SHIFT;
		if (!(slot->meta & AV_META_DUP))
			break;
	}

	/* Pending entries are not in the hash yet; one of them may hold a lower copy. */
	pending_cnt = UTIL_MIN(st->pending_cnt, (uint64_t) UTIL_AV_TABLE_PENDING);
	for (i = 0; i < pending_cnt; i++) {
		idx = st->pending[i];
		if (st->pending_hash[i] != hv || idx >= best || idx < min_index)
			continue;
		entry = av_entry(table, idx);
		if (!entry || !av_equal(entry, key, keylen))
			continue;
		word = __atomic_load_n((const uint32_t *) (entry + av_gen_off(keylen)),
				       __ATOMIC_ACQUIRE);
		best = idx;
		best_gen = word >> AV_GEN_SHIFT;
	}

	if (best == SIZE_MAX)
		return -FI_ENODATA;
	*index = best;
	*gen = best_gen;
	return 0;
}

/*
 * One lookup over whatever the hash holds right now. Without the lock the arrays may be
 * changing under it: every index is checked before use and the walk is bounded, and the
 * caller throws the result away unless the sequence count says nothing changed.
 */
static inline int av_find_once(const struct util_av_table *table, const void *key, uint64_t hv,
			       bool is_exact, size_t min_index, size_t *index, uint32_t *gen)
{
	const struct util_av_hash *hash = atomic_load_explicit(&table->hash, memory_order_acquire);
	int ret;

	if (likely(!table->st->pending_cnt)) {
		ret = av_find_in_line(table, hash, key, hv, is_exact, min_index, index, gen);
		if (likely(ret != AV_FIND_WALK))
			return ret;
	}
	return av_find_walk(table, hash, key, hv, is_exact, min_index, index, gen);
}

/*
 * Looks up n <= AV_FIND_BATCH keys under one sequence count, their slots prefetched together:
 * 0 with ret[i] set, or -FI_EAGAIN when a writer kept changing the table.
 */
static int av_find_group(const struct util_av_table *table, const uint8_t *keys, size_t stride,
			 size_t n, size_t min_index, size_t *index, uint32_t *gen, int *ret)
{
	struct util_av_table_state *st = table->st;
	const struct util_av_hash *hash;
	uint64_t hv[AV_FIND_BATCH], before;
	bool is_exact[AV_FIND_BATCH];
	uint32_t found_gen[AV_FIND_BATCH];
	size_t i;
	int tries;

	for (i = 0; i < n; i++) {
		hv[i] = av_hash(keys + i * stride, st->keylen);
		is_exact[i] = av_is_exact(keys + i * stride, st->keylen);
	}
	for (tries = 0; tries < AV_FIND_TRIES; tries++) {
		before = atomic_load_explicit(&st->seq, memory_order_acquire);
		if (before & 1)
			continue;
		hash = atomic_load_explicit(&table->hash, memory_order_acquire);
		for (i = 0; n > 1 && i < n; i++)
			__builtin_prefetch(&hash->slot[av_home(hv[i], hash->nslots)]);
		for (i = 0; i < n; i++)
			ret[i] = av_find_once(table, keys + i * stride, hv[i], is_exact[i],
					      min_index, &index[i], &found_gen[i]);
		atomic_thread_fence(memory_order_acquire);
		if (atomic_load_explicit(&st->seq, memory_order_relaxed) != before)
			continue;
		for (i = 0; gen && i < n; i++)
			gen[i] = found_gen[i];
		return 0;
	}
	return -FI_EAGAIN;
}

/* One key: kept apart from av_find_group, whose batch bookkeeping would double its work. */
int util_av_table_find_from(const struct util_av_table *table, const void *key,
			    size_t min_index, size_t *index, uint32_t *gen)
{
	const struct util_av_table_state *st = table->st;
	uint64_t hv = av_hash(key, st->keylen), before;
	bool is_exact = av_is_exact(key, st->keylen);
	uint32_t found_gen;
	size_t found;
	int ret, tries;

	for (tries = 0; tries < AV_FIND_TRIES; tries++) {
		before = atomic_load_explicit(&st->seq, memory_order_acquire);
		if (before & 1)
			continue;
		ret = av_find_once(table, key, hv, is_exact, min_index, &found, &found_gen);
		atomic_thread_fence(memory_order_acquire);
		if (atomic_load_explicit(&st->seq, memory_order_relaxed) != before)
			continue;
		if (!ret) {
			*index = found;
			if (gen)
				*gen = found_gen;
		}
		return ret;
	}
	return -FI_EAGAIN;
}

int util_av_table_find_many(const struct util_av_table *table, const void *keys, size_t stride,
			    size_t count, size_t *index, uint32_t *gen, int *ret)
{
	size_t done, n;

	for (done = 0; done < count; done += n) {
		n = UTIL_MIN((size_t) AV_FIND_BATCH, count - done);
		if (av_find_group(table, (const uint8_t *) keys + done * stride, stride, n, 0,
				  &index[done], gen ? &gen[done] : NULL, &ret[done]))
			return -FI_EAGAIN;
	}
	return 0;
}
