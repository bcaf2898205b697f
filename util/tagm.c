/*
 * Tag-matching engine, cold paths: init and fini, hash growth, the scans used by fi_cancel and
 * at close, and a consistency check for tests. The data path is in util/tagm_inl.h.
 */
#include "config.h"

#include <inttypes.h>
#include <stdlib.h>

#include "util/tagm_inl.h"

/* Claimed messages are few (one per outstanding FI_PEEK | FI_CLAIM): start small. */
#define UTIL_TAGM_CLAIM_BUCKETS 16

static uint64_t util_tagm_recv_key(const struct util_dlist *link)
{
	const struct util_tagm_recv *recv = container_of(link, struct util_tagm_recv, link);

	return util_tagm_pair_key(recv->tag, recv->src);
}

static uint64_t util_tagm_msg_key(const struct util_dlist *link)
{
	return container_of(link, struct util_tagm_msg, hash_link)->tag;
}

static uint64_t util_tagm_msg_pair_key(const struct util_dlist *link)
{
	const struct util_tagm_msg *msg = container_of(link, struct util_tagm_msg, src_link);

	return util_tagm_pair_key(msg->tag, msg->src);
}

static uint64_t util_tagm_owner_key(const struct util_dlist *link)
{
	return (uintptr_t) container_of(link, struct util_tagm_msg, hash_link)->owner;
}

static unsigned int util_tagm_log2(size_t pow2)
{
	return (unsigned int) __builtin_ctzll(pow2);
}

static struct util_dlist *util_tagm_buckets_alloc(size_t bucket_cnt)
{
	struct util_dlist *buckets;
	size_t i;

	/* Empty heads point at themselves, so zeroed memory is no use. */
	buckets = malloc(bucket_cnt * sizeof(*buckets));
	if (!buckets)
		return NULL;
	for (i = 0; i < bucket_cnt; i++)
		util_dlist_init(&buckets[i]);
	return buckets;
}

static int util_tagm_hash_init(struct util_tagm_hash *hash, size_t bucket_cnt,
			       uint64_t (*key_of)(const struct util_dlist *link))
{
	hash->buckets = util_tagm_buckets_alloc(bucket_cnt);
	if (!hash->buckets)
		return -FI_ENOMEM;
	hash->bucket_cnt = bucket_cnt;
	hash->shift = 64 - util_tagm_log2(bucket_cnt);
	/* One entry a bucket on average: chains of one or two whatever the tag count. */
	hash->grow_at = bucket_cnt;
	hash->cnt = 0;
	hash->key_of = key_of;
	return 0;
}

static void util_tagm_hash_fini(struct util_tagm_hash *hash)
{
	free(hash->buckets);
	hash->buckets = NULL;
	hash->bucket_cnt = 0;
}

void util_tagm_hash_grow(struct util_tagm_hash *hash)
{
	size_t bucket_cnt = hash->bucket_cnt * 2, i;
	struct util_dlist *buckets, *item, *tmp;
	unsigned int shift = hash->shift - 1;

	if (bucket_cnt > UTIL_TAGM_MAX_BUCKETS) {
		hash->grow_at = SIZE_MAX;
		return;
	}
	buckets = util_tagm_buckets_alloc(bucket_cnt);
	if (!buckets) {
		/* Matching stays correct with longer chains; try again at twice the load. */
		FI_INFO(util_prov, FI_LOG_EP_DATA,
			"no memory to grow a tag-matching hash past %zu buckets\n",
			hash->bucket_cnt);
		hash->grow_at = hash->grow_at > SIZE_MAX / 2 ? SIZE_MAX : hash->grow_at * 2;
		return;
	}

	/*
	 * With one more hash bit, old bucket i splits into new buckets 2i and 2i + 1 and no other
	 * old bucket feeds them: walking each old bucket in order and appending keeps every new
	 * bucket in insertion order.
	 */
	for (i = 0; i < hash->bucket_cnt; i++) {
		util_dlist_foreach_safe(&hash->buckets[i], item, tmp) {
			uint64_t key = hash->key_of(item);

			util_dlist_insert_tail(item, &buckets[(key * UTIL_TAGM_HASH_MUL) >> shift]);
		}
	}
	free(hash->buckets);
	hash->buckets = buckets;
	hash->bucket_cnt = bucket_cnt;
	hash->shift = shift;
	hash->grow_at = bucket_cnt;
}

void util_tagm_msg_set_src(struct util_tagm *tagm, struct util_tagm_msg *msg, uint64_t src,
			   uint64_t group)
{
	struct util_dlist *bucket, *item;

	/* a claimed message is in no source bucket, and counts in no group */
	if (!util_tagm_msg_is_claimed(msg)) {
		tagm->msg_group_cnt += (size_t) (group != UTIL_TAGM_NO_GROUP) -
				       (size_t) (msg->group != UTIL_TAGM_NO_GROUP);
		if (tagm->has_src_hash) {
			util_dlist_remove(&msg->src_link);
			bucket = util_tagm_bucket(&tagm->msg_src_hash,
						  util_tagm_pair_key(msg->tag, src));
			/* before the first later arrival: buckets stay in arrival order */
			util_dlist_foreach(bucket, item) {
				if (container_of(item, struct util_tagm_msg, src_link)->seq > msg->seq)
					break;
			}
			util_dlist_insert_tail(&msg->src_link, item);
		}
	}
	msg->src = src;
	msg->group = group;
}

void util_tagm_msg_index_sources(struct util_tagm *tagm)
{
	struct util_tagm_msg *msg;
	struct util_dlist *item;

	tagm->has_src_hash = true;
	util_dlist_foreach(&tagm->msg_arrival, item) {
		msg = util_tagm_msg_of_arrival(item);
		util_tagm_hash_insert(&tagm->msg_src_hash, &msg->src_link,
				      util_tagm_pair_key(msg->tag, msg->src));
	}
}

int util_tagm_init(struct util_tagm *tagm, size_t bucket_cnt)
{
	int ret;

	if (!bucket_cnt)
		bucket_cnt = UTIL_TAGM_DEFAULT_BUCKETS;
	if (bucket_cnt > UTIL_TAGM_MAX_BUCKETS)
		return -FI_EINVAL;
	/* At least two buckets keeps the hash shift below 64. */
	bucket_cnt = util_roundup_pow2(UTIL_MAX(bucket_cnt, (size_t) 2));

	ret = util_tagm_hash_init(&tagm->recv_hash, bucket_cnt, util_tagm_recv_key);
	if (ret)
		return ret;
	ret = util_tagm_hash_init(&tagm->msg_hash, bucket_cnt, util_tagm_msg_key);
	if (ret)
		goto err_fini_recv_hash;
	ret = util_tagm_hash_init(&tagm->msg_src_hash, bucket_cnt, util_tagm_msg_pair_key);
	if (ret)
		goto err_fini_msg_hash;
	ret = util_tagm_hash_init(&tagm->claim_hash, UTIL_TAGM_CLAIM_BUCKETS, util_tagm_owner_key);
	if (ret)
		goto err_fini_msg_src_hash;

	tagm->directed_cnt = 0;
	util_dlist_init(&tagm->recv_wild);
	tagm->wild_cnt = 0;
	tagm->recv_seq = 0;
	tagm->msg_group_cnt = 0;
	tagm->has_src_hash = false;
	util_dlist_init(&tagm->msg_arrival);
	tagm->msg_seq = 0;
	return 0;

err_fini_msg_src_hash:
	util_tagm_hash_fini(&tagm->msg_src_hash);
err_fini_msg_hash:
	util_tagm_hash_fini(&tagm->msg_hash);
err_fini_recv_hash:
	util_tagm_hash_fini(&tagm->recv_hash);
	return ret;
}

void util_tagm_fini(struct util_tagm *tagm)
{
	util_tagm_hash_fini(&tagm->claim_hash);
	util_tagm_hash_fini(&tagm->msg_src_hash);
	util_tagm_hash_fini(&tagm->msg_hash);
	util_tagm_hash_fini(&tagm->recv_hash);
}

struct util_tagm_recv *util_tagm_recv_find(const struct util_tagm *tagm,
					   bool (*is_match)(const struct util_tagm_recv *recv,
							    void *arg),
					   void *arg)
{
	const struct util_tagm_hash *hash = &tagm->recv_hash;
	struct util_tagm_recv *recv;
	struct util_dlist *item;
	size_t i, seen = 0;

	util_dlist_foreach(&tagm->recv_wild, item) {
		recv = util_tagm_recv_of(item);
		if (is_match(recv, arg))
			return recv;
	}
	/* Stop once every entry was seen rather than walk a mostly empty array to its end. */
	for (i = 0; i < hash->bucket_cnt && seen < hash->cnt; i++) {
		util_dlist_foreach(&hash->buckets[i], item) {
			recv = util_tagm_recv_of(item);
			if (is_match(recv, arg))
				return recv;
			seen++;
		}
	}
	return NULL;
}

struct util_tagm_msg *util_tagm_msg_find(const struct util_tagm *tagm,
					 bool (*is_match)(const struct util_tagm_msg *msg,
							  void *arg),
					 void *arg)
{
	const struct util_tagm_hash *hash = &tagm->claim_hash;
	struct util_tagm_msg *msg;
	struct util_dlist *item;
	size_t i, seen = 0;

	util_dlist_foreach(&tagm->msg_arrival, item) {
		msg = util_tagm_msg_of_arrival(item);
		if (is_match(msg, arg))
			return msg;
	}
	for (i = 0; i < hash->bucket_cnt && seen < hash->cnt; i++) {
		util_dlist_foreach(&hash->buckets[i], item) {
			msg = util_tagm_msg_of_hash(item);
			if (is_match(msg, arg))
				return msg;
			seen++;
		}
	}
	return NULL;
}

size_t util_tagm_recv_flush(struct util_tagm *tagm,
			    void (*removed)(struct util_tagm_recv *recv, void *arg), void *arg)
{
	struct util_tagm_hash *hash = &tagm->recv_hash;
	struct util_tagm_recv *recv;
	struct util_dlist *item;
	size_t i, cnt = 0;

	while ((item = util_dlist_pop_front(&tagm->recv_wild))) {
		tagm->wild_cnt--;
		cnt++;
		if (removed)
			removed(util_tagm_recv_of(item), arg);
	}
	for (i = 0; i < hash->bucket_cnt && hash->cnt; i++) {
		while ((item = util_dlist_pop_front(&hash->buckets[i]))) {
			hash->cnt--;
			cnt++;
			recv = util_tagm_recv_of(item);
			tagm->directed_cnt -= recv->src != UTIL_TAGM_ANY_SRC;
			if (removed)
				removed(recv, arg);
		}
	}
	return cnt;
}

size_t util_tagm_msg_flush(struct util_tagm *tagm,
			   void (*removed)(struct util_tagm_msg *msg, void *arg), void *arg)
{
	struct util_tagm_hash *hash = &tagm->claim_hash;
	struct util_tagm_msg *msg;
	struct util_dlist *item;
	size_t i, cnt = 0;

	while (!util_dlist_empty(&tagm->msg_arrival)) {
		msg = util_tagm_msg_of_arrival(tagm->msg_arrival.next);
		util_tagm_msg_unlink(tagm, msg);
		cnt++;
		if (removed)
			removed(msg, arg);
	}
	for (i = 0; i < hash->bucket_cnt && hash->cnt; i++) {
		while ((item = util_dlist_pop_front(&hash->buckets[i]))) {
			hash->cnt--;
			cnt++;
			msg = util_tagm_msg_of_hash(item);
			/* Out of the engine, so no longer claimed by anyone. */
			msg->owner = NULL;
			if (removed)
				removed(msg, arg);
		}
	}
	return cnt;
}

/* Logs a broken invariant of util_tagm_check and fails it. */
#define UTIL_TAGM_CHECK(cond, ...) \
	do { \
		if (!(cond)) { \
			FI_WARN(util_prov, FI_LOG_EP_DATA, "tagm: " __VA_ARGS__); \
			return -FI_EOTHER; \
		} \
	} while (0)

static int util_tagm_check_hash(const struct util_tagm_hash *hash, const char *name)
{
	const struct util_dlist *head;
	struct util_dlist *item;
	size_t i, cnt = 0;

	UTIL_TAGM_CHECK(hash->bucket_cnt >= 2 && !(hash->bucket_cnt & (hash->bucket_cnt - 1)),
			"%s: %zu buckets is not a power of two\n", name, hash->bucket_cnt);
	UTIL_TAGM_CHECK(hash->shift == 64 - util_tagm_log2(hash->bucket_cnt),
			"%s: shift %u for %zu buckets\n", name, hash->shift, hash->bucket_cnt);
	for (i = 0; i < hash->bucket_cnt; i++) {
		head = &hash->buckets[i];
		util_dlist_foreach(head, item) {
			UTIL_TAGM_CHECK(item->next->prev == item && item->prev->next == item,
					"%s: bucket %zu has broken links\n", name, i);
			UTIL_TAGM_CHECK(util_tagm_bucket(hash, hash->key_of(item)) == head,
					"%s: entry in bucket %zu hashes elsewhere\n", name, i);
			cnt++;
		}
	}
	UTIL_TAGM_CHECK(cnt == hash->cnt, "%s: holds %zu entries, counts %zu\n", name, cnt,
			hash->cnt);
	return 0;
}

static int util_tagm_check_recvs(const struct util_tagm *tagm)
{
	const struct util_tagm_hash *hash = &tagm->recv_hash;
	struct util_tagm_recv *recv;
	struct util_dlist *item;
	uint64_t min_seq; /* each entry must be at least this, its predecessor + 1 */
	size_t i, cnt = 0, directed = 0;
	int ret;

	ret = util_tagm_check_hash(hash, "posted receives");
	if (ret)
		return ret;
	for (i = 0; i < hash->bucket_cnt; i++) {
		min_seq = 0;
		util_dlist_foreach(&hash->buckets[i], item) {
			recv = util_tagm_recv_of(item);
			UTIL_TAGM_CHECK(!recv->ignore, "wildcard receive %" PRIu64 " in the hash\n",
					recv->seq);
			UTIL_TAGM_CHECK(recv->seq < tagm->recv_seq && recv->seq >= min_seq,
					"receive %" PRIu64 " out of post order\n", recv->seq);
			min_seq = recv->seq + 1;
			directed += recv->src != UTIL_TAGM_ANY_SRC;
		}
	}
	UTIL_TAGM_CHECK(directed == tagm->directed_cnt, "%zu directed receives, counts %zu\n",
			directed, tagm->directed_cnt);

	min_seq = 0;
	util_dlist_foreach(&tagm->recv_wild, item) {
		recv = util_tagm_recv_of(item);
		UTIL_TAGM_CHECK(item->next->prev == item && item->prev->next == item,
				"wildcard list has broken links\n");
		UTIL_TAGM_CHECK(recv->ignore, "exact receive %" PRIu64 " in the wildcard list\n",
				recv->seq);
		UTIL_TAGM_CHECK(recv->seq < tagm->recv_seq && recv->seq >= min_seq,
				"wildcard receive %" PRIu64 " out of post order\n", recv->seq);
		min_seq = recv->seq + 1;
		cnt++;
	}
	UTIL_TAGM_CHECK(cnt == tagm->wild_cnt, "wildcard list holds %zu, counts %zu\n", cnt,
			tagm->wild_cnt);
	return 0;
}

static int util_tagm_check_msgs(const struct util_tagm *tagm)
{
	const struct util_tagm_hash *hash = &tagm->msg_hash;
	struct util_tagm_msg *msg;
	struct util_dlist *item;
	uint64_t min_seq; /* each entry must be at least this, its predecessor + 1 */
	size_t i, cnt = 0, grouped = 0;
	int ret;

	ret = util_tagm_check_hash(hash, "unexpected messages");
	if (ret)
		return ret;
	for (i = 0; i < hash->bucket_cnt; i++) {
		min_seq = 0;
		util_dlist_foreach(&hash->buckets[i], item) {
			msg = util_tagm_msg_of_hash(item);
			UTIL_TAGM_CHECK(!msg->owner,
					"claimed message %" PRIu64 " in the tag hash\n", msg->seq);
			UTIL_TAGM_CHECK(msg->seq < tagm->msg_seq && msg->seq >= min_seq,
					"message %" PRIu64 " out of arrival order\n", msg->seq);
			min_seq = msg->seq + 1;
		}
	}

	min_seq = 0;
	util_dlist_foreach(&tagm->msg_arrival, item) {
		msg = util_tagm_msg_of_arrival(item);
		UTIL_TAGM_CHECK(item->next->prev == item && item->prev->next == item,
				"arrival list has broken links\n");
		UTIL_TAGM_CHECK(!msg->owner, "claimed message %" PRIu64 " in the arrival list\n",
				msg->seq);
		UTIL_TAGM_CHECK(msg->seq < tagm->msg_seq && msg->seq >= min_seq,
				"message %" PRIu64 " out of arrival order\n", msg->seq);
		min_seq = msg->seq + 1;
		grouped += msg->group != UTIL_TAGM_NO_GROUP;
		cnt++;
	}
	UTIL_TAGM_CHECK(grouped == tagm->msg_group_cnt, "%zu messages in a group, counts %zu\n",
			grouped, tagm->msg_group_cnt);
	UTIL_TAGM_CHECK(cnt == hash->cnt, "arrival list holds %zu, tag hash %zu\n", cnt,
			hash->cnt);

	hash = &tagm->msg_src_hash;
	ret = util_tagm_check_hash(hash, "unexpected messages by source");
	if (ret)
		return ret;
	for (i = 0; i < hash->bucket_cnt; i++) {
		min_seq = 0;
		util_dlist_foreach(&hash->buckets[i], item) {
			msg = container_of(item, struct util_tagm_msg, src_link);
			UTIL_TAGM_CHECK(!msg->owner, "claimed message %" PRIu64 " in the source hash\n",
					msg->seq);
			UTIL_TAGM_CHECK(msg->seq >= min_seq,
					"message %" PRIu64 " out of arrival order by source\n",
					msg->seq);
			min_seq = msg->seq + 1;
		}
	}
	UTIL_TAGM_CHECK(hash->cnt == (tagm->has_src_hash ? cnt : 0),
			"source hash holds %zu, arrival list %zu\n", hash->cnt, cnt);

	hash = &tagm->claim_hash;
	ret = util_tagm_check_hash(hash, "claimed messages");
	if (ret)
		return ret;
	for (i = 0; i < hash->bucket_cnt; i++) {
		util_dlist_foreach(&hash->buckets[i], item) {
			msg = util_tagm_msg_of_hash(item);
			UTIL_TAGM_CHECK(msg->owner, "unclaimed message %" PRIu64 " in the claims\n",
					msg->seq);
			UTIL_TAGM_CHECK(util_dlist_empty(&msg->arrival_link),
					"claimed message %" PRIu64 " still in arrival order\n",
					msg->seq);
		}
	}
	return 0;
}

int util_tagm_check(const struct util_tagm *tagm)
{
	int ret;

	ret = util_tagm_check_recvs(tagm);
	if (ret)
		return ret;
	return util_tagm_check_msgs(tagm);
}
