/*
 * Hot calls of the tag-matching engine (util/tagm.h), always inlined into the provider's
 * receive path: post, match, add, search, claim, take, remove.
 *
 * How a provider uses them, under its own lock:
 * - a message arrives: util_tagm_recv_match(); if NULL, util_tagm_msg_add() it as unexpected;
 * - a receive is posted: util_tagm_msg_match(); if NULL, util_tagm_recv_post() it;
 * - FI_PEEK: util_tagm_msg_search(); with FI_CLAIM, then util_tagm_msg_claim(msg, context);
 *   with FI_DISCARD, util_tagm_msg_remove() instead;
 * - FI_CLAIM without FI_PEEK: util_tagm_msg_take_claimed(context);
 * - fi_cancel: util_tagm_recv_find() by context, then util_tagm_recv_remove().
 * The engine does not do the first half of each step itself: a receive posted without first
 * searching the unexpected messages is not matched against them.
 */
#ifndef UTIL_TAGM_INL_H
#define UTIL_TAGM_INL_H

#include "util/tagm.h"

#define UTIL_TAGM_INLINE static inline __attribute__((always_inline))

/* 2^64 / golden ratio, odd: Fibonacci hashing. */
#define UTIL_TAGM_HASH_MUL 0x9e3779b97f4a7c15ULL
/* An odd constant unrelated to the one above, to fold a receive's source into its key. */
#define UTIL_TAGM_SRC_MUL 0xc2b2ae3d27d4eb4fULL

UTIL_TAGM_INLINE struct util_dlist *util_tagm_bucket(const struct util_tagm_hash *hash,
						     uint64_t key)
{
	return &hash->buckets[(key * UTIL_TAGM_HASH_MUL) >> hash->shift];
}

/*
 * The key of a (tag, source) pair: of an exact receive, its tag and the one source it takes
 * (or any); of a message, its tag and sender.
 */
UTIL_TAGM_INLINE uint64_t util_tagm_pair_key(uint64_t tag, uint64_t src)
{
	return tag + src * UTIL_TAGM_SRC_MUL;
}

/* Appends to the key's bucket, so each bucket stays in insertion order. */
UTIL_TAGM_INLINE void util_tagm_hash_insert(struct util_tagm_hash *hash, struct util_dlist *link,
					    uint64_t key)
{
	util_dlist_insert_tail(link, util_tagm_bucket(hash, key));
	if (unlikely(++hash->cnt > hash->grow_at))
		util_tagm_hash_grow(hash);
}

UTIL_TAGM_INLINE void util_tagm_hash_remove(struct util_tagm_hash *hash, struct util_dlist *link)
{
	util_dlist_remove(link);
	hash->cnt--;
}

/* A receive's src names any sender, the message's sender, or the message's group. */
UTIL_TAGM_INLINE bool util_tagm_src_is_match(uint64_t recv_src, uint64_t msg_src,
					     uint64_t msg_group)
{
	return recv_src == UTIL_TAGM_ANY_SRC || recv_src == msg_src || recv_src == msg_group;
}

UTIL_TAGM_INLINE bool util_tagm_tag_is_match(uint64_t recv_tag, uint64_t ignore, uint64_t tag)
{
	return ((recv_tag ^ tag) & ~ignore) == 0;
}

UTIL_TAGM_INLINE struct util_tagm_recv *util_tagm_recv_of(struct util_dlist *link)
{
	return container_of(link, struct util_tagm_recv, link);
}

UTIL_TAGM_INLINE struct util_tagm_msg *util_tagm_msg_of_hash(struct util_dlist *link)
{
	return container_of(link, struct util_tagm_msg, hash_link);
}

UTIL_TAGM_INLINE struct util_tagm_msg *util_tagm_msg_of_arrival(struct util_dlist *link)
{
	return container_of(link, struct util_tagm_msg, arrival_link);
}

/*
 * Posts a receive: it will match messages whose tag equals tag outside the ignore bits, from
 * src or of the group src (or from anyone with UTIL_TAGM_ANY_SRC), after every receive posted
 * before it.
 */
UTIL_TAGM_INLINE void util_tagm_recv_post(struct util_tagm *tagm, struct util_tagm_recv *recv,
					  uint64_t tag, uint64_t ignore, uint64_t src)
{
	recv->tag = tag;
	recv->ignore = ignore;
	recv->src = src;
	recv->seq = tagm->recv_seq++;
	if (likely(!ignore)) {
		util_tagm_hash_insert(&tagm->recv_hash, &recv->link, util_tagm_pair_key(tag, src));
		tagm->directed_cnt += src != UTIL_TAGM_ANY_SRC;
	} else {
		util_dlist_insert_tail(&recv->link, &tagm->recv_wild);
		tagm->wild_cnt++;
	}
}

/* Takes a posted receive out (fi_cancel, or the caller matched it some other way). */
UTIL_TAGM_INLINE void util_tagm_recv_remove(struct util_tagm *tagm, struct util_tagm_recv *recv)
{
	if (likely(!recv->ignore)) {
		util_tagm_hash_remove(&tagm->recv_hash, &recv->link);
		tagm->directed_cnt -= recv->src != UTIL_TAGM_ANY_SRC;
	} else {
		util_dlist_remove(&recv->link);
		tagm->wild_cnt--;
	}
}

/*
 * The earliest-posted exact receive for (tag, src), src a source, a group or any; NULL when
 * none. Its bucket is in post order and every receive for the pair matches alike, so the
 * first one for the pair is the answer: the rest of the walk is hash collisions only.
 */
UTIL_TAGM_INLINE struct util_tagm_recv *util_tagm_recv_first(const struct util_tagm *tagm,
							     uint64_t tag, uint64_t src)
{
	struct util_dlist *head, *item;
	struct util_tagm_recv *recv;

	head = util_tagm_bucket(&tagm->recv_hash, util_tagm_pair_key(tag, src));
	util_dlist_foreach(head, item) {
		recv = util_tagm_recv_of(item);
		if (recv->tag == tag && recv->src == src)
			return recv;
	}
	return NULL;
}

/* Of two candidates (either may be NULL), the one posted first. */
UTIL_TAGM_INLINE struct util_tagm_recv *util_tagm_recv_earlier(struct util_tagm_recv *a,
							       struct util_tagm_recv *b)
{
	if (!a || (b && b->seq < a->seq))
		return b;
	return a;
}

/*
 * A message (tag, src, group) arrives: returns the earliest-posted receive that matches it,
 * removed, or NULL (then the caller keeps the message with util_tagm_msg_add). group is
 * UTIL_TAGM_NO_GROUP for a sender in none.
 */
UTIL_TAGM_INLINE struct util_tagm_recv *util_tagm_recv_match(struct util_tagm *tagm,
							     uint64_t tag, uint64_t src,
							     uint64_t group)
{
	struct util_tagm_recv *exact = NULL, *recv;
	struct util_dlist *item;

	if (likely(tagm->recv_hash.cnt)) {
		/* Each kind of exact receive is looked for only while some is posted. */
		if (tagm->recv_hash.cnt > tagm->directed_cnt)
			exact = util_tagm_recv_first(tagm, tag, UTIL_TAGM_ANY_SRC);
		if (unlikely(tagm->directed_cnt)) {
			if (src != UTIL_TAGM_ANY_SRC)
				exact = util_tagm_recv_earlier(exact,
							       util_tagm_recv_first(tagm, tag, src));
			if (group != UTIL_TAGM_NO_GROUP)
				exact = util_tagm_recv_earlier(exact,
							       util_tagm_recv_first(tagm, tag, group));
		}
	}

	if (unlikely(tagm->wild_cnt)) {
		util_dlist_foreach(&tagm->recv_wild, item) {
			recv = util_tagm_recv_of(item);
			/* The list is in post order: nothing further on was posted before exact. */
			if (exact && recv->seq > exact->seq)
				break;
			if (util_tagm_tag_is_match(recv->tag, recv->ignore, tag) &&
			    util_tagm_src_is_match(recv->src, src, group)) {
				util_dlist_remove(&recv->link);
				tagm->wild_cnt--;
				return recv;
			}
		}
	}

	if (exact)
		util_tagm_recv_remove(tagm, exact);
	return exact;
}

/*
 * Keeps a message (tag, src, group) that matched no posted receive, behind every earlier
 * arrival.
 */
UTIL_TAGM_INLINE void util_tagm_msg_add(struct util_tagm *tagm, struct util_tagm_msg *msg,
					uint64_t tag, uint64_t src, uint64_t group)
{
	msg->tag = tag;
	msg->src = src;
	msg->group = group;
	msg->seq = tagm->msg_seq++;
	msg->owner = NULL;
	util_tagm_hash_insert(&tagm->msg_hash, &msg->hash_link, tag);
	if (tagm->has_src_hash)
		util_tagm_hash_insert(&tagm->msg_src_hash, &msg->src_link,
				      util_tagm_pair_key(tag, src));
	tagm->msg_group_cnt += group != UTIL_TAGM_NO_GROUP;
	util_dlist_insert_tail(&msg->arrival_link, &tagm->msg_arrival);
}

/* An unclaimed message leaves the hashes and the arrival list. */
UTIL_TAGM_INLINE void util_tagm_msg_unlink(struct util_tagm *tagm, struct util_tagm_msg *msg)
{
	util_tagm_hash_remove(&tagm->msg_hash, &msg->hash_link);
	if (tagm->has_src_hash)
		util_tagm_hash_remove(&tagm->msg_src_hash, &msg->src_link);
	tagm->msg_group_cnt -= msg->group != UTIL_TAGM_NO_GROUP;
	util_dlist_remove(&msg->arrival_link);
}

/*
 * The earliest unclaimed message an exact receive (tag, src) takes, src a sender or a group
 * (not any). A sender's messages are in its (tag, src) bucket. A group value is never a
 * sender's, so when that bucket has nothing, src may name a group: while messages in a group
 * wait, the tag's bucket is walked for the first of group src.
 */
UTIL_TAGM_INLINE struct util_tagm_msg *util_tagm_msg_search_directed(struct util_tagm *tagm,
								     uint64_t tag, uint64_t src)
{
	const struct util_dlist *head;
	struct util_tagm_msg *msg;
	struct util_dlist *item;

	if (unlikely(!tagm->has_src_hash))
		util_tagm_msg_index_sources(tagm);
	head = util_tagm_bucket(&tagm->msg_src_hash, util_tagm_pair_key(tag, src));
	util_dlist_foreach(head, item) {
		msg = container_of(item, struct util_tagm_msg, src_link);
		if (msg->tag == tag && msg->src == src)
			return msg;
	}
	if (likely(!tagm->msg_group_cnt))
		return NULL;
	head = util_tagm_bucket(&tagm->msg_hash, tag);
	util_dlist_foreach(head, item) {
		msg = util_tagm_msg_of_hash(item);
		if (msg->tag == tag && msg->group == src)
			return msg;
	}
	return NULL;
}

/*
 * The earliest-arrived unclaimed message that a receive (tag, ignore, src) would match, left
 * in place (FI_PEEK); NULL when none. src names a sender or a group. An exact receive looks
 * at one bucket (two while messages in a group wait and it names a source); a wildcard one
 * walks the arrivals.
 */
UTIL_TAGM_INLINE struct util_tagm_msg *util_tagm_msg_search(struct util_tagm *tagm,
							    uint64_t tag, uint64_t ignore,
							    uint64_t src)
{
	const struct util_dlist *head;
	struct util_tagm_msg *msg;
	struct util_dlist *item;

	if (likely(!ignore)) {
		if (!tagm->msg_hash.cnt)
			return NULL;
		if (src != UTIL_TAGM_ANY_SRC)
			return util_tagm_msg_search_directed(tagm, tag, src);
		head = util_tagm_bucket(&tagm->msg_hash, tag);
		util_dlist_foreach(head, item) {
			msg = util_tagm_msg_of_hash(item);
			if (msg->tag == tag)
				return msg;
		}
		return NULL;
	}

	util_dlist_foreach(&tagm->msg_arrival, item) {
		msg = util_tagm_msg_of_arrival(item);
		if (util_tagm_tag_is_match(tag, ignore, msg->tag) &&
		    util_tagm_src_is_match(src, msg->src, msg->group))
			return msg;
	}
	return NULL;
}

/* Takes an unexpected message out, claimed or not (a receive consumed it, or FI_DISCARD). */
UTIL_TAGM_INLINE void util_tagm_msg_remove(struct util_tagm *tagm, struct util_tagm_msg *msg)
{
	if (unlikely(util_tagm_msg_is_claimed(msg))) {
		util_tagm_hash_remove(&tagm->claim_hash, &msg->hash_link);
		msg->owner = NULL;
		return;
	}
	util_tagm_msg_unlink(tagm, msg);
}

/* A receive (tag, ignore, src) is posted: util_tagm_msg_search, then removes what it found. */
UTIL_TAGM_INLINE struct util_tagm_msg *util_tagm_msg_match(struct util_tagm *tagm, uint64_t tag,
							   uint64_t ignore, uint64_t src)
{
	struct util_tagm_msg *msg = util_tagm_msg_search(tagm, tag, ignore, src);

	if (msg)
		util_tagm_msg_remove(tagm, msg);
	return msg;
}

/*
 * FI_PEEK | FI_CLAIM found msg (unclaimed): hides it from every search and ties it to owner
 * (the receive's struct fi_context, not NULL) until util_tagm_msg_take_claimed(owner) or
 * util_tagm_msg_remove. An owner should claim one message at a time; if it claims several,
 * they are taken in claim order.
 */
UTIL_TAGM_INLINE void util_tagm_msg_claim(struct util_tagm *tagm, struct util_tagm_msg *msg,
					  void *owner)
{
	util_tagm_msg_unlink(tagm, msg);
	msg->owner = owner;
	util_tagm_hash_insert(&tagm->claim_hash, &msg->hash_link, (uintptr_t) owner);
}

/*
 * FI_CLAIM without FI_PEEK: the message owner claimed, removed (and no longer claimed), or NULL
 * when owner holds none (an application error the caller reports).
 */
UTIL_TAGM_INLINE struct util_tagm_msg *util_tagm_msg_take_claimed(struct util_tagm *tagm,
								  const void *owner)
{
	struct util_dlist *head, *item;
	struct util_tagm_msg *msg;

	if (!tagm->claim_hash.cnt)
		return NULL;
	head = util_tagm_bucket(&tagm->claim_hash, (uintptr_t) owner);
	util_dlist_foreach(head, item) {
		msg = util_tagm_msg_of_hash(item);
		if (msg->owner == owner) {
			util_tagm_msg_remove(tagm, msg);
			return msg;
		}
	}
	return NULL;
}

#endif /* UTIL_TAGM_INL_H */
