/*
 * Software tag matching, as fi_tagged(3) needs it: posted receives are matched against
 * arriving messages in the order they were posted, and messages that arrive before any
 * receive matches them wait as "unexpected" until a receive or an FI_PEEK / FI_CLAIM probe
 * finds them, in the order they arrived.
 *
 * Posted receives: exact ones (ignore == 0) in a hash by tag and source whose buckets keep
 * post order, so the receives for one (tag, source) pair are found in constant time however
 * many others share the tag; wildcard ones (ignore != 0) in one list in post order. Each gets
 * a post sequence number. A message looks at its (tag, any source) bucket, and at its (tag,
 * sender) and (tag, group) buckets while directed receives are posted, then at the wildcard
 * list up to the earliest of those candidates, and takes the one posted first.
 * Unexpected messages: a hash by tag for exact any-source receives, a hash by (tag, sender)
 * for exact directed ones (buckets in arrival order; kept from the first directed search on,
 * so that an engine whose receives never name a source does not pay for it), and one list in
 * arrival order for wildcard receives. An exact receive naming a group (below) looks through
 * its tag's bucket, and only while messages in a group wait. A claimed message leaves all
 * three and waits in a hash by owner, where nothing but util_tagm_msg_take_claimed() can
 * reach it.
 *
 * Sources: a receive accepts any sender (UTIL_TAGM_ANY_SRC), or names one value that a
 * message matches by its sender or by its group: a second value the caller gives a message
 * when it arrives (the set of senders it belongs to, such as an authorization key), which
 * costs nothing to messages and receives that have none.
 *
 * Entries are intrusive: the caller embeds struct util_tagm_recv / struct util_tagm_msg in
 * its own receive and message structs and gets back with container_of. The engine never
 * allocates per entry; its only allocations are bucket arrays, at init and when a hash grows
 * (it doubles when it holds more entries than buckets, so chains stay short whatever the
 * number of distinct tags; a failed growth only leaves chains longer, so inserts never fail).
 *
 * Not thread safe: the owner holds its lock around every call.
 * Hot calls (post, match, search, claim...) are always-inline in util/tagm_inl.h; this header
 * has the types, the counts and the cold calls.
 */
#ifndef UTIL_TAGM_H
#define UTIL_TAGM_H

#include "util/util.h"
#include "util/list.h"

/* A receive's source when any source may match. Same value as FI_ADDR_UNSPEC. */
#define UTIL_TAGM_ANY_SRC UINT64_MAX
_Static_assert(UTIL_TAGM_ANY_SRC == FI_ADDR_UNSPEC, "UTIL_TAGM_ANY_SRC is FI_ADDR_UNSPEC");
/*
 * A message's group when it belongs to none. A group is a second name a directed receive may
 * give instead of the sender's (a provider's sets of senders: an authorization key, say); it
 * must never equal a source value. UTIL_TAGM_ANY_SRC, so no directed receive names it.
 */
#define UTIL_TAGM_NO_GROUP UTIL_TAGM_ANY_SRC

/* Buckets per hash when util_tagm_init() is given 0. */
#define UTIL_TAGM_DEFAULT_BUCKETS 1024
/* Hashes stop growing here (16 bytes a bucket: 64 MiB); chains get longer past it. */
#define UTIL_TAGM_MAX_BUCKETS ((size_t) 1 << 22)

/* A posted receive, embedded in the caller's receive. Fields are set by util_tagm_recv_post. */
struct util_tagm_recv {
	struct util_dlist link; /* in its tag's bucket (exact) or in the wildcard list */
	uint64_t tag;
	uint64_t ignore;        /* tag bits that do not take part; 0: an exact receive */
	uint64_t src;           /* the only source (or group) accepted, or UTIL_TAGM_ANY_SRC */
	uint64_t seq;           /* post order, unique per engine */
};

/* An unexpected message, embedded in the caller's message. Set by util_tagm_msg_add. */
struct util_tagm_msg {
	struct util_dlist hash_link;    /* in its tag's bucket, or in its owner's when claimed */
	struct util_dlist src_link;     /* in its (tag, src) bucket; detached while claimed */
	struct util_dlist arrival_link; /* in the arrival list; detached while claimed */
	uint64_t tag;
	uint64_t src;                   /* the sender; compared as is with receives' src */
	uint64_t group;                 /* the sender's group, or UTIL_TAGM_NO_GROUP */
	uint64_t seq;                   /* arrival order, unique per engine */
	void *owner;                    /* NULL, or the context that claimed the message */
};

/*
 * A chained hash whose buckets keep insertion order. Fibonacci hashing (multiply, keep the
 * top bits) spreads tags that differ in any bits, low ones (a counter) or high ones (a
 * communicator id), without a modulo.
 */
struct util_tagm_hash {
	struct util_dlist *buckets;
	unsigned int shift;     /* 64 - log2(bucket_cnt) */
	size_t cnt;             /* entries held */
	size_t grow_at;         /* cnt above which the bucket array doubles */
	size_t bucket_cnt;      /* a power of two, at least 2 */
	/* the key an entry was hashed by, to rehash it when growing */
	uint64_t (*key_of)(const struct util_dlist *link);
};

struct util_tagm {
	/* posted receives: what every arriving message looks at */
	struct util_tagm_hash recv_hash; /* exact receives by (tag, src), buckets in post order */
	size_t directed_cnt;             /* receives in recv_hash that name a source */
	struct util_dlist recv_wild;     /* wildcard receives in post order */
	size_t wild_cnt;                 /* receives in recv_wild */
	uint64_t recv_seq;               /* sequence number of the next post */

	/* unexpected messages: what every new receive looks at */
	struct util_tagm_hash msg_hash;  /* unclaimed messages by tag, buckets in arrival order */
	struct util_tagm_hash msg_src_hash; /* the same by (tag, src), buckets in arrival order,
					     * once has_src_hash */
	bool has_src_hash;               /* a directed search came: msg_src_hash is kept */
	size_t msg_group_cnt;            /* of them, those in a group */
	struct util_dlist msg_arrival;   /* the same messages, all in arrival order */
	uint64_t msg_seq;                /* sequence number of the next arrival */

	/* claimed messages by owner, each bucket in claim order */
	struct util_tagm_hash claim_hash;
};

/*
 * Initialises an empty engine whose tag hashes start with bucket_cnt buckets (0: default;
 * rounded up to a power of two, at least 2). Returns 0, -FI_EINVAL when bucket_cnt is above
 * UTIL_TAGM_MAX_BUCKETS, or -FI_ENOMEM.
 */
int util_tagm_init(struct util_tagm *tagm, size_t bucket_cnt);
/*
 * Frees the bucket arrays. Entries still inside belong to the caller and are not touched:
 * flush them first (util_tagm_recv_flush, util_tagm_msg_flush) to release their memory.
 */
void util_tagm_fini(struct util_tagm *tagm);

/* Receives posted and not matched nor removed; of them, the wildcard ones. */
static inline size_t util_tagm_posted_cnt(const struct util_tagm *tagm)
{
	return tagm->recv_hash.cnt + tagm->wild_cnt;
}

static inline size_t util_tagm_wild_cnt(const struct util_tagm *tagm)
{
	return tagm->wild_cnt;
}

/* Unexpected messages waiting, claimed ones excluded; claimed ones not yet taken. */
static inline size_t util_tagm_unexp_cnt(const struct util_tagm *tagm)
{
	return tagm->msg_hash.cnt;
}

static inline size_t util_tagm_claimed_cnt(const struct util_tagm *tagm)
{
	return tagm->claim_hash.cnt;
}

static inline bool util_tagm_is_empty(const struct util_tagm *tagm)
{
	return !util_tagm_posted_cnt(tagm) && !util_tagm_unexp_cnt(tagm) &&
	       !util_tagm_claimed_cnt(tagm);
}

static inline bool util_tagm_msg_is_claimed(const struct util_tagm_msg *msg)
{
	return msg->owner != NULL;
}

/*
 * An unexpected message's sender (and group) became known after it arrived: receives
 * directed at src find it from now on, at its arrival place among that sender's messages.
 * Cold: walks src's bucket.
 */
void util_tagm_msg_set_src(struct util_tagm *tagm, struct util_tagm_msg *msg, uint64_t src,
			   uint64_t group);

/* Doubles a hash's bucket array (called by the inline inserts past grow_at). */
void util_tagm_hash_grow(struct util_tagm_hash *hash);
/* Fills msg_src_hash with the unclaimed messages and keeps it from now on. */
void util_tagm_msg_index_sources(struct util_tagm *tagm);

/*
 * Posted receive for which is_match(recv, arg) is true, not removed; NULL when none. For
 * fi_cancel (find by context, then util_tagm_recv_remove). Which one is returned when several
 * match is unspecified: the predicate should single one out. Cost: the whole bucket array in
 * the worst case, it is not a data-path call. is_match must not change the engine.
 */
struct util_tagm_recv *util_tagm_recv_find(const struct util_tagm *tagm,
					   bool (*is_match)(const struct util_tagm_recv *recv,
							    void *arg),
					   void *arg);
/* The same over unexpected messages, claimed ones included (unclaimed ones are seen first). */
struct util_tagm_msg *util_tagm_msg_find(const struct util_tagm *tagm,
					 bool (*is_match)(const struct util_tagm_msg *msg,
							  void *arg),
					 void *arg);

/*
 * Removes every posted receive, in no particular order, calling removed(recv, arg) on each
 * once it is out (so removed may free it; it must not call into the engine). For close, after
 * reading util_tagm_posted_cnt(). Returns the number removed; removed may be NULL.
 */
size_t util_tagm_recv_flush(struct util_tagm *tagm,
			    void (*removed)(struct util_tagm_recv *recv, void *arg), void *arg);
/*
 * The same for unexpected messages: unclaimed ones first, in arrival order, then claimed ones.
 * For the close-time warning ("N unexpected messages never matched") and to free them.
 */
size_t util_tagm_msg_flush(struct util_tagm *tagm,
			   void (*removed)(struct util_tagm_msg *msg, void *arg), void *arg);

/*
 * Checks every invariant (counts, each entry in the right bucket and list, orders by sequence
 * number, claimed state). Returns 0, or -FI_EOTHER after logging what is wrong. For tests and
 * debugging: it walks everything.
 */
int util_tagm_check(const struct util_tagm *tagm);

#endif /* UTIL_TAGM_H */
