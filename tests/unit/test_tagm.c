/*
 * Unit tests of util/tagm.c: matching of posted receives and unexpected messages, the order
 * fi_tagged(3) requires across exact and wildcard receives, sources, FI_PEEK / FI_CLAIM /
 * FI_DISCARD, cancel, bucket collisions and growth, and a long random run checked against a
 * reference model made of plain lists.
 */
#include "config.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "util/tagm_inl.h"

static struct fi_provider test_prov = { .name = "util_test" };
struct fi_provider *util_prov = &test_prov;

#define ENTRY_CNT 512
#define OWNER_CNT 32
#define ANY UTIL_TAGM_ANY_SRC

/* What the provider embeds the engine's entries in. */
struct test_recv {
	struct util_tagm_recv entry;
	int ctx;        /* stands for the receive's fi_context, for cancel by context */
	bool is_in;     /* posted in the engine */
};

struct test_msg {
	struct util_tagm_msg entry;
	bool is_in;     /* in the engine, claimed or not */
};

struct fixture {
	struct util_tagm tagm;
	struct test_recv recvs[ENTRY_CNT];
	struct test_msg msgs[ENTRY_CNT];
	struct fi_context owners[OWNER_CNT]; /* what FI_CLAIM receives pass as their context */
};

static int setup_buckets(void **state, size_t bucket_cnt)
{
	struct fixture *f = test_calloc(1, sizeof(*f));
	int i;

	if (!f)
		return -1;
	if (util_tagm_init(&f->tagm, bucket_cnt)) {
		test_free(f);
		return -1;
	}
	for (i = 0; i < ENTRY_CNT; i++)
		f->recvs[i].ctx = 1000 + i;
	*state = f;
	return 0;
}

static int setup(void **state)
{
	return setup_buckets(state, 0);
}

/* Two buckets: every tag shares a bucket with others until the hash grows. */
static int setup_tiny(void **state)
{
	return setup_buckets(state, 2);
}

/* Every test takes out all it put in: the engine is empty and no entry is left inside. */
static int teardown(void **state)
{
	struct fixture *f = *state;
	int i;

	assert_int_equal(util_tagm_check(&f->tagm), 0);
	assert_true(util_tagm_is_empty(&f->tagm));
	assert_int_equal(util_tagm_recv_flush(&f->tagm, NULL, NULL), 0);
	assert_int_equal(util_tagm_msg_flush(&f->tagm, NULL, NULL), 0);
	for (i = 0; i < ENTRY_CNT; i++) {
		assert_false(f->recvs[i].is_in);
		assert_false(f->msgs[i].is_in);
	}
	util_tagm_fini(&f->tagm);
	test_free(f);
	return 0;
}

static int recv_id(struct fixture *f, struct util_tagm_recv *recv)
{
	struct test_recv *r;

	if (!recv)
		return -1;
	r = container_of(recv, struct test_recv, entry);
	assert_true(r >= f->recvs && r < f->recvs + ENTRY_CNT);
	return (int) (r - f->recvs);
}

static int msg_id(struct fixture *f, struct util_tagm_msg *msg)
{
	struct test_msg *m;

	if (!msg)
		return -1;
	m = container_of(msg, struct test_msg, entry);
	assert_true(m >= f->msgs && m < f->msgs + ENTRY_CNT);
	return (int) (m - f->msgs);
}

static void post(struct fixture *f, int id, uint64_t tag, uint64_t ignore, uint64_t src)
{
	assert_false(f->recvs[id].is_in);
	util_tagm_recv_post(&f->tagm, &f->recvs[id].entry, tag, ignore, src);
	f->recvs[id].is_in = true;
}

/* A message of a group arrives: the id of the receive it matched (now out), or -1. */
static int arrive_in(struct fixture *f, uint64_t tag, uint64_t src, uint64_t group)
{
	int id = recv_id(f, util_tagm_recv_match(&f->tagm, tag, src, group));

	if (id >= 0) {
		assert_true(f->recvs[id].is_in);
		f->recvs[id].is_in = false;
	}
	return id;
}

/* A message in no group arrives. */
static int arrive(struct fixture *f, uint64_t tag, uint64_t src)
{
	return arrive_in(f, tag, src, UTIL_TAGM_NO_GROUP);
}

static void add_in(struct fixture *f, int id, uint64_t tag, uint64_t src, uint64_t group)
{
	assert_false(f->msgs[id].is_in);
	util_tagm_msg_add(&f->tagm, &f->msgs[id].entry, tag, src, group);
	f->msgs[id].is_in = true;
}

static void add(struct fixture *f, int id, uint64_t tag, uint64_t src)
{
	add_in(f, id, tag, src, UTIL_TAGM_NO_GROUP);
}

/* A receive consumes the earliest matching unexpected message: its id, or -1. */
static int take(struct fixture *f, uint64_t tag, uint64_t ignore, uint64_t src)
{
	int id = msg_id(f, util_tagm_msg_match(&f->tagm, tag, ignore, src));

	if (id >= 0) {
		assert_true(f->msgs[id].is_in);
		assert_false(util_tagm_msg_is_claimed(&f->msgs[id].entry));
		f->msgs[id].is_in = false;
	}
	return id;
}

static int peek(struct fixture *f, uint64_t tag, uint64_t ignore, uint64_t src)
{
	return msg_id(f, util_tagm_msg_search(&f->tagm, tag, ignore, src));
}

/* FI_PEEK | FI_CLAIM: the id claimed by owner, or -1. */
static int peek_claim(struct fixture *f, uint64_t tag, uint64_t ignore, uint64_t src, int owner)
{
	struct util_tagm_msg *msg = util_tagm_msg_search(&f->tagm, tag, ignore, src);

	if (!msg)
		return -1;
	util_tagm_msg_claim(&f->tagm, msg, &f->owners[owner]);
	assert_true(util_tagm_msg_is_claimed(msg));
	return msg_id(f, msg);
}

static int take_claimed(struct fixture *f, int owner)
{
	int id = msg_id(f, util_tagm_msg_take_claimed(&f->tagm, &f->owners[owner]));

	if (id >= 0) {
		assert_true(f->msgs[id].is_in);
		assert_false(util_tagm_msg_is_claimed(&f->msgs[id].entry));
		f->msgs[id].is_in = false;
	}
	return id;
}

static void discard(struct fixture *f, int id)
{
	assert_true(f->msgs[id].is_in);
	util_tagm_msg_remove(&f->tagm, &f->msgs[id].entry);
	assert_false(util_tagm_msg_is_claimed(&f->msgs[id].entry));
	f->msgs[id].is_in = false;
}

static bool recv_has_ctx(const struct util_tagm_recv *recv, void *arg)
{
	return container_of(recv, struct test_recv, entry)->ctx == *(int *) arg;
}

/* fi_cancel: finds the receive by its context; the id removed, or -1 when not posted. */
static int cancel_ctx(struct fixture *f, int ctx)
{
	int id = recv_id(f, util_tagm_recv_find(&f->tagm, recv_has_ctx, &ctx));

	if (id >= 0) {
		util_tagm_recv_remove(&f->tagm, &f->recvs[id].entry);
		assert_true(f->recvs[id].is_in);
		f->recvs[id].is_in = false;
	}
	return id;
}

static void assert_counts(struct fixture *f, size_t posted, size_t wild, size_t unexp,
			  size_t claimed)
{
	assert_int_equal(util_tagm_posted_cnt(&f->tagm), posted);
	assert_int_equal(util_tagm_wild_cnt(&f->tagm), wild);
	assert_int_equal(util_tagm_unexp_cnt(&f->tagm), unexp);
	assert_int_equal(util_tagm_claimed_cnt(&f->tagm), claimed);
	assert_int_equal(util_tagm_check(&f->tagm), 0);
}

static void test_init_bucket_counts(void **state)
{
	struct util_tagm tagm;

	assert_int_equal(util_tagm_init(&tagm, 0), 0);
	assert_int_equal(tagm.recv_hash.bucket_cnt, UTIL_TAGM_DEFAULT_BUCKETS);
	assert_int_equal(tagm.msg_hash.bucket_cnt, UTIL_TAGM_DEFAULT_BUCKETS);
	assert_true(util_tagm_is_empty(&tagm));
	assert_int_equal(util_tagm_check(&tagm), 0);
	util_tagm_fini(&tagm);

	assert_int_equal(util_tagm_init(&tagm, 1), 0);
	assert_int_equal(tagm.recv_hash.bucket_cnt, 2);
	util_tagm_fini(&tagm);

	assert_int_equal(util_tagm_init(&tagm, 1000), 0);
	assert_int_equal(tagm.recv_hash.bucket_cnt, 1024);
	util_tagm_fini(&tagm);

	assert_int_equal(util_tagm_init(&tagm, UTIL_TAGM_MAX_BUCKETS + 1), -FI_EINVAL);
}

static void test_exact_match(void **state)
{
	struct fixture *f = *state;

	post(f, 0, 1, 0, ANY);
	post(f, 1, 2, 0, ANY);
	post(f, 2, 3, 0, ANY);
	assert_counts(f, 3, 0, 0, 0);

	assert_int_equal(arrive(f, 2, 7), 1);
	assert_int_equal(arrive(f, 4, 7), -1);
	/* Matching removed it: the same tag again finds nothing. */
	assert_int_equal(arrive(f, 2, 7), -1);
	assert_int_equal(arrive(f, 3, 7), 2);
	assert_int_equal(arrive(f, 1, 7), 0);
	assert_counts(f, 0, 0, 0, 0);

	/* Nothing posted: the fast path finds nothing. */
	assert_int_equal(arrive(f, 1, 7), -1);
}

static void test_wildcard_match(void **state)
{
	struct fixture *f = *state;

	post(f, 0, 0x100, 0xff, ANY);
	assert_counts(f, 1, 1, 0, 0);

	assert_int_equal(arrive(f, 0x200, 1), -1);
	assert_int_equal(arrive(f, 0x1ab, 1), 0);
	assert_counts(f, 0, 0, 0, 0);

	/* The unexpected side: a wildcard receive finds a message the exact one would not. */
	add(f, 0, 0x1ab, 1);
	assert_int_equal(take(f, 0x100, 0, ANY), -1);
	assert_int_equal(take(f, 0x100, 0xff, ANY), 0);
	assert_counts(f, 0, 0, 0, 0);
}

static void test_ignore_masks(void **state)
{
	struct fixture *f = *state;

	/* Ignored bits of the receive's own tag do not matter either. */
	post(f, 0, 0x1ff, 0xf0, ANY);
	assert_int_equal(arrive(f, 0x1fe, 1), -1);
	assert_int_equal(arrive(f, 0x10f, 1), 0);

	/* All bits ignored: anything matches. */
	post(f, 1, 0, ~0ULL, ANY);
	assert_int_equal(arrive(f, 0xdeadbeefcafef00dULL, 1), 1);

	/* High bits ignored (a communicator id, say), low bits compared. */
	post(f, 2, 0x5, 0xffff000000000000ULL, ANY);
	assert_int_equal(arrive(f, 0x1234000000000006ULL, 1), -1);
	assert_int_equal(arrive(f, 0x1234000000000005ULL, 1), 2);

	/* A sparse mask. */
	post(f, 3, 0x0, 0x8000000000000001ULL, ANY);
	assert_int_equal(arrive(f, 0x2, 1), -1);
	assert_int_equal(arrive(f, 0x8000000000000001ULL, 1), 3);

	/* The same masks from the unexpected side. */
	add(f, 0, 0x1234000000000006ULL, 1);
	add(f, 1, 0x10f, 1);
	add(f, 2, 0x8000000000000001ULL, 1);
	assert_int_equal(take(f, 0x1ff, 0xf0, ANY), 1);
	assert_int_equal(take(f, 0x0, 0x8000000000000001ULL, ANY), 2);
	assert_int_equal(take(f, 0x5, 0xffff000000000000ULL, ANY), -1);
	assert_int_equal(take(f, 0x6, 0xffff000000000000ULL, ANY), 0);
	assert_counts(f, 0, 0, 0, 0);
}

static void test_order_wildcard_posted_first(void **state)
{
	struct fixture *f = *state;

	post(f, 0, 0x10, 0xf, ANY);
	post(f, 1, 0x17, 0, ANY);
	assert_int_equal(arrive(f, 0x17, 1), 0);
	assert_int_equal(arrive(f, 0x17, 1), 1);
	assert_counts(f, 0, 0, 0, 0);
}

static void test_order_exact_posted_first(void **state)
{
	struct fixture *f = *state;

	post(f, 0, 0x17, 0, ANY);
	post(f, 1, 0x10, 0xf, ANY);
	assert_int_equal(arrive(f, 0x17, 1), 0);
	assert_int_equal(arrive(f, 0x17, 1), 1);
	assert_counts(f, 0, 0, 0, 0);
}

static void test_order_interleaved(void **state)
{
	struct fixture *f = *state;
	int i;

	/* Wildcards that do not match sit in front; each match takes the earliest posted. */
	post(f, 0, 0x20, 0xf, ANY);
	post(f, 1, 0x17, 0, ANY);
	post(f, 2, 0x10, 0xf, ANY);
	post(f, 3, 0x17, 0, ANY);
	post(f, 4, 0x00, 0xff, ANY);
	post(f, 5, 0x17, 0, ANY);
	post(f, 6, 0x10, 0xf, 9);
	assert_counts(f, 7, 4, 0, 0);

	for (i = 1; i <= 5; i++)
		assert_int_equal(arrive(f, 0x17, 1), i);
	assert_int_equal(arrive(f, 0x17, 1), -1);
	assert_int_equal(arrive(f, 0x17, 9), 6);
	assert_int_equal(arrive(f, 0x21, 1), 0);
	assert_counts(f, 0, 0, 0, 0);
}

static void test_sources_directed_and_any(void **state)
{
	struct fixture *f = *state;
	const uint64_t tag = 42;

	post(f, 0, tag, 0, 1);
	post(f, 1, tag, 0, ANY);
	post(f, 2, tag, 0, 2);
	post(f, 3, tag, 0, 1);
	post(f, 4, 40, 0x3, 2);

	/* Source 2: the directed receive 0 is for someone else; the any-source one is first. */
	assert_int_equal(arrive(f, tag, 2), 1);
	assert_int_equal(arrive(f, tag, 2), 2);
	assert_int_equal(arrive(f, tag, 2), 4);
	assert_int_equal(arrive(f, tag, 2), -1);
	assert_int_equal(arrive(f, tag, 3), -1);
	assert_int_equal(arrive(f, tag, 1), 0);
	assert_int_equal(arrive(f, tag, 1), 3);
	assert_counts(f, 0, 0, 0, 0);

	/* Unexpected side: the same tag from two sources. */
	add(f, 0, tag, 1);
	add(f, 1, tag, 2);
	add(f, 2, tag, 1);
	add(f, 3, tag, 2);
	assert_int_equal(take(f, tag, 0, 3), -1);
	assert_int_equal(take(f, tag, 0, 2), 1);
	assert_int_equal(take(f, tag, 0, ANY), 0);
	assert_int_equal(take(f, tag, 0x1, 2), 3);
	assert_int_equal(take(f, tag, 0, 2), -1);
	assert_int_equal(take(f, tag, 0, 1), 2);
	assert_counts(f, 0, 0, 0, 0);
}

/*
 * Groups: a directed receive may name a message's group instead of its sender (an
 * authorization key standing for the senders that use it); a message in no group matches
 * only by its sender; order rules are the same.
 */
static void test_groups(void **state)
{
	struct fixture *f = *state;
	const uint64_t tag = 7, g1 = 0x100, g2 = 0x200;

	post(f, 0, tag, 0, g1);
	post(f, 1, tag, 0, 5);
	post(f, 2, 4, 0x3, g2);
	post(f, 3, tag, 0, g1);

	/* sender 5 in group g2: its own receive, then the wildcard of g2 */
	assert_int_equal(arrive_in(f, tag, 5, g2), 1);
	assert_int_equal(arrive_in(f, tag, 5, g2), 2);
	assert_int_equal(arrive_in(f, tag, 5, g2), -1);
	/* no group: a group receive never takes it */
	assert_int_equal(arrive(f, tag, 6), -1);
	assert_int_equal(arrive_in(f, tag, 6, g1), 0);
	assert_int_equal(arrive_in(f, tag, 9, g1), 3);
	assert_counts(f, 0, 0, 0, 0);

	/* unexpected side, exact and wildcard searches, peek too */
	add_in(f, 0, tag, 5, g2);
	add(f, 1, tag, 6);
	add_in(f, 2, tag, 6, g1);
	add_in(f, 3, tag - 1, 5, g1);
	assert_int_equal(peek(f, tag, 0, g1), 2);
	assert_int_equal(take(f, tag, 0x1, g1), 2);
	assert_int_equal(take(f, tag, 0, g1), -1);
	assert_int_equal(take(f, tag, 0x1, g1), 3);
	assert_int_equal(take(f, tag, 0, 6), 1);
	assert_int_equal(take(f, tag, 0, g1), -1);
	assert_int_equal(take(f, tag, 0, g2), 0);
	assert_counts(f, 0, 0, 0, 0);
	assert_int_equal(util_tagm_check(&f->tagm), 0);
}

static size_t longest_chain(const struct util_tagm_hash *hash)
{
	size_t longest = 0, len, i;
	struct util_dlist *item;

	for (i = 0; i < hash->bucket_cnt; i++) {
		len = 0;
		util_dlist_foreach(&hash->buckets[i], item)
			len++;
		longest = UTIL_MAX(longest, len);
	}
	return longest;
}

/*
 * One tag shared by many senders (the way to use FI_DIRECTED_RECV when the tag does not carry
 * the sender). Posted receives and unexpected messages spread over their hashes by (tag,
 * source), so a message finds its sender's receive, and a directed receive its sender's
 * message, in a short chain; the order rules are those of fewer senders.
 */
static void test_directed_same_tag(void **state)
{
	struct fixture *f = *state;
	const uint64_t tag = 9, g = 0x300;
	const int n = 400;
	int k;

	for (k = 0; k < n; k++)
		post(f, k, tag, 0, (uint64_t) k);
	post(f, n, tag, 0, ANY);
	assert_in_range(longest_chain(&f->tagm.recv_hash), 1, 8);
	assert_int_equal(util_tagm_check(&f->tagm), 0);

	for (k = n - 1; k >= 0; k--)
		assert_int_equal(arrive(f, tag, (uint64_t) k), k);
	assert_int_equal(arrive(f, tag, 7), n);
	assert_int_equal(arrive(f, tag, 7), -1);
	assert_counts(f, 0, 0, 0, 0);

	/* post order decides between a sender's receives and any-source ones */
	post(f, 0, tag, 0, ANY);
	post(f, 1, tag, 0, 5);
	post(f, 2, tag, 0, 5);
	post(f, 3, tag, 0, ANY);
	assert_int_equal(arrive(f, tag, 5), 0);
	assert_int_equal(arrive(f, tag, 5), 1);
	assert_int_equal(arrive(f, tag, 6), 3);
	assert_int_equal(arrive(f, tag, 5), 2);
	assert_counts(f, 0, 0, 0, 0);

	/* the unexpected side: messages are hashed by sender from the first directed search on */
	for (k = 0; k < n; k++)
		add(f, k, tag, (uint64_t) k);
	assert_int_equal(longest_chain(&f->tagm.msg_src_hash), 0);
	assert_int_equal(peek(f, tag, 0, 7), 7);
	assert_in_range(longest_chain(&f->tagm.msg_src_hash), 1, 8);
	assert_int_equal(util_tagm_check(&f->tagm), 0);
	for (k = n - 1; k > 0; k--)
		assert_int_equal(take(f, tag, 0, (uint64_t) k), k);
	assert_int_equal(take(f, tag, 0, ANY), 0);
	assert_counts(f, 0, 0, 0, 0);

	/* a receive naming a group or a sender takes the earliest of theirs, whatever else */
	add_in(f, 0, tag, 5, g);
	add(f, 1, tag, 5);
	add_in(f, 2, tag, 6, g);
	add(f, 3, tag, 6);
	assert_int_equal(take(f, tag, 0, 6), 2);
	assert_int_equal(take(f, tag, 0, g), 0);
	assert_int_equal(take(f, tag, 0, g), -1);
	assert_int_equal(take(f, tag, 0, 5), 1);
	assert_int_equal(take(f, tag, 0, 6), 3);
	assert_counts(f, 0, 0, 0, 0);
}

static void test_unexpected_arrival_order(void **state)
{
	struct fixture *f = *state;
	static const uint64_t tags[] = { 5, 6, 5, 7, 5, 6 };
	int i;

	for (i = 0; i < (int) UTIL_ARRAY_SIZE(tags); i++)
		add(f, i, tags[i], 1);
	assert_counts(f, 0, 0, 6, 0);

	assert_int_equal(take(f, 5, 0, ANY), 0);
	/* A wildcard takes the earliest left, whatever its tag. */
	assert_int_equal(take(f, 0, ~0ULL, ANY), 1);
	assert_int_equal(take(f, 5, 0, 1), 2);
	assert_int_equal(take(f, 4, 0x3, ANY), 3);
	assert_int_equal(take(f, 4, 0x3, ANY), 4);
	assert_int_equal(take(f, 5, 0, ANY), -1);
	assert_int_equal(take(f, 6, 0, ANY), 5);
	assert_counts(f, 0, 0, 0, 0);
}

static void test_peek_does_not_remove(void **state)
{
	struct fixture *f = *state;

	add(f, 0, 9, 1);
	add(f, 1, 9, 2);
	assert_int_equal(peek(f, 9, 0, ANY), 0);
	assert_int_equal(peek(f, 9, 0, ANY), 0);
	assert_int_equal(peek(f, 9, 0, 2), 1);
	assert_int_equal(peek(f, 8, 0x1, ANY), 0);
	assert_int_equal(peek(f, 8, 0, ANY), -1);
	assert_counts(f, 0, 0, 2, 0);

	assert_int_equal(take(f, 9, 0, ANY), 0);
	assert_int_equal(peek(f, 9, 0, ANY), 1);
	assert_int_equal(take(f, 9, 0, ANY), 1);
	assert_int_equal(peek(f, 9, 0, ANY), -1);
	assert_counts(f, 0, 0, 0, 0);
}

static void test_claim_hides_message(void **state)
{
	struct fixture *f = *state;

	add(f, 0, 9, 1);
	add(f, 1, 9, 1);
	assert_int_equal(peek_claim(f, 9, 0, ANY, 0), 0);
	assert_counts(f, 0, 0, 1, 1);

	/* No search reaches it any more, exact or wildcard, peek or receive. */
	assert_int_equal(peek(f, 9, 0, ANY), 1);
	assert_int_equal(peek(f, 9, 0, 1), 1);
	assert_int_equal(peek(f, 0, ~0ULL, ANY), 1);
	assert_int_equal(peek_claim(f, 9, 0, ANY, 1), 1);
	assert_int_equal(peek(f, 0, ~0ULL, ANY), -1);
	assert_int_equal(take(f, 9, 0, ANY), -1);
	assert_counts(f, 0, 0, 0, 2);

	/* Only its owner takes it, once. */
	assert_int_equal(take_claimed(f, 2), -1);
	assert_int_equal(take_claimed(f, 1), 1);
	assert_int_equal(take_claimed(f, 1), -1);
	assert_int_equal(take_claimed(f, 0), 0);
	assert_int_equal(take_claimed(f, 0), -1);
	assert_counts(f, 0, 0, 0, 0);
}

static void test_claim_then_new_receive(void **state)
{
	struct fixture *f = *state;

	add(f, 0, 9, 1);
	assert_int_equal(peek_claim(f, 9, 0, ANY, 0), 0);

	/* Receives posted after the claim find nothing, so they are posted... */
	assert_int_equal(take(f, 9, 0, ANY), -1);
	post(f, 0, 9, 0, ANY);
	assert_int_equal(take(f, 0, ~0ULL, 1), -1);
	post(f, 1, 0, ~0ULL, 1);
	assert_counts(f, 2, 1, 0, 1);

	/* ...and the next messages go to them, in post order. */
	assert_int_equal(arrive(f, 9, 1), 0);
	assert_int_equal(arrive(f, 9, 1), 1);

	assert_int_equal(take_claimed(f, 0), 0);
	assert_counts(f, 0, 0, 0, 0);
}

static void test_discard(void **state)
{
	struct fixture *f = *state;

	add(f, 0, 3, 1);
	add(f, 1, 3, 1);
	add(f, 2, 4, 1);

	/* FI_PEEK | FI_DISCARD. */
	assert_int_equal(peek(f, 3, 0, ANY), 0);
	discard(f, 0);
	assert_int_equal(peek(f, 3, 0, ANY), 1);

	/* FI_CLAIM | FI_DISCARD of a claimed one, and a discard straight from claimed. */
	assert_int_equal(peek_claim(f, 3, 0, ANY, 5), 1);
	assert_int_equal(peek_claim(f, 4, 0, ANY, 6), 2);
	assert_counts(f, 0, 0, 0, 2);
	discard(f, 1);
	assert_int_equal(take_claimed(f, 5), -1);
	assert_int_equal(take_claimed(f, 6), 2);
	assert_counts(f, 0, 0, 0, 0);
}

static void test_cancel(void **state)
{
	struct fixture *f = *state;

	post(f, 0, 7, 0, ANY);
	post(f, 1, 7, 0xf, ANY);
	post(f, 2, 7, 0, ANY);
	post(f, 3, 7, 0xf, ANY);

	assert_int_equal(cancel_ctx(f, f->recvs[2].ctx), 2);
	assert_int_equal(cancel_ctx(f, f->recvs[2].ctx), -1);
	assert_int_equal(cancel_ctx(f, f->recvs[1].ctx), 1);
	assert_int_equal(cancel_ctx(f, 1), -1);
	assert_counts(f, 2, 1, 0, 0);

	assert_int_equal(arrive(f, 7, 1), 0);
	assert_int_equal(arrive(f, 7, 1), 3);
	assert_int_equal(arrive(f, 7, 1), -1);
	assert_counts(f, 0, 0, 0, 0);
}

/* x * y == 1 modulo 2^64 for odd x: Newton's iteration doubles the correct bits each step. */
static uint64_t inverse_mod_2_64(uint64_t x)
{
	uint64_t y = x;
	int i;

	for (i = 0; i < 6; i++)
		y *= 2 - x * y;
	return y;
}

/*
 * Tags whose hashes differ only in their low bits: they share one bucket at every table size
 * the test reaches, so the bucket chain is long and growth cannot split it.
 */
static uint64_t colliding_tag(int i)
{
	static const uint64_t hash_base = 0x123456789ab00000ULL;

	return (hash_base + (uint64_t) i) * inverse_mod_2_64(UTIL_TAGM_HASH_MUL);
}

static void test_bucket_collisions(void **state)
{
	struct fixture *f = *state;
	const int cnt = 200;
	struct util_dlist *bucket;
	int i;

	/* Two receives per tag, so each tag also checks post order inside the chain. */
	for (i = 0; i < cnt; i++)
		post(f, i, colliding_tag(i % (cnt / 2)), 0, ANY);
	bucket = util_tagm_bucket(&f->tagm.recv_hash, colliding_tag(0));
	for (i = 1; i < cnt / 2; i++)
		assert_ptr_equal(util_tagm_bucket(&f->tagm.recv_hash, colliding_tag(i)), bucket);
	assert_counts(f, cnt, 0, 0, 0);

	for (i = cnt / 2 - 1; i >= 0; i--) {
		assert_int_equal(arrive(f, colliding_tag(i), 1), i);
		assert_int_equal(arrive(f, colliding_tag(i), 1), i + cnt / 2);
	}
	assert_int_equal(arrive(f, colliding_tag(cnt), 1), -1);

	for (i = 0; i < cnt; i++)
		add(f, i, colliding_tag(i % (cnt / 2)), (uint64_t) i);
	assert_counts(f, 0, 0, cnt, 0);
	for (i = cnt / 2 - 1; i >= 0; i--) {
		assert_int_equal(peek(f, colliding_tag(i), 0, (uint64_t) i + cnt / 2), i + cnt / 2);
		assert_int_equal(take(f, colliding_tag(i), 0, ANY), i);
		assert_int_equal(take(f, colliding_tag(i), 0, ANY), i + cnt / 2);
	}
	assert_counts(f, 0, 0, 0, 0);
}

/* Starts from two buckets: every hash grows many times with entries in it. */
static void test_growth_keeps_order(void **state)
{
	struct fixture *f = *state;
	const int cnt = ENTRY_CNT;
	int i;

	for (i = 0; i < cnt; i++)
		post(f, i, (uint64_t) (i % 37), 0, ANY);
	assert_true(f->tagm.recv_hash.bucket_cnt >= (size_t) cnt);
	assert_counts(f, cnt, 0, 0, 0);
	for (i = 0; i < cnt; i++)
		assert_int_equal(arrive(f, (uint64_t) (i % 37), 1), i);

	for (i = 0; i < cnt; i++)
		add(f, i, (uint64_t) (i % 37), 1);
	assert_true(f->tagm.msg_hash.bucket_cnt >= (size_t) cnt);
	assert_counts(f, 0, 0, cnt, 0);

	/* Claims by many owners grow the owners' hash too. */
	for (i = 0; i < OWNER_CNT; i++)
		assert_int_equal(peek_claim(f, (uint64_t) (i % 37), 0, ANY, i), i);
	assert_true(f->tagm.claim_hash.bucket_cnt >= OWNER_CNT);
	assert_counts(f, 0, 0, cnt - OWNER_CNT, OWNER_CNT);
	for (i = OWNER_CNT - 1; i >= 0; i--)
		assert_int_equal(take_claimed(f, i), i);

	for (i = OWNER_CNT; i < cnt; i++)
		assert_int_equal(take(f, (uint64_t) (i % 37), 0, 1), i);
	assert_counts(f, 0, 0, 0, 0);
}

static bool msg_is_claimed(const struct util_tagm_msg *msg, void *arg)
{
	return util_tagm_msg_is_claimed(msg);
}

struct flush_log {
	struct fixture *f;
	int ids[ENTRY_CNT];
	int cnt;
};

static void msg_flushed(struct util_tagm_msg *msg, void *arg)
{
	struct flush_log *log = arg;
	int id = msg_id(log->f, msg);

	assert_false(util_tagm_msg_is_claimed(msg));
	log->f->msgs[id].is_in = false;
	log->ids[log->cnt++] = id;
}

static void recv_flushed(struct util_tagm_recv *recv, void *arg)
{
	struct flush_log *log = arg;
	int id = recv_id(log->f, recv);

	log->f->recvs[id].is_in = false;
	log->ids[log->cnt++] = id;
}

/* What a provider does at close: count, warn, find, flush. */
static void test_find_and_flush(void **state)
{
	struct fixture *f = *state;
	struct flush_log log = { .f = f };
	bool seen[8] = { false };
	int i;

	for (i = 0; i < 6; i++)
		add(f, i, (uint64_t) i, 1);
	assert_int_equal(peek_claim(f, 4, 0, ANY, 0), 4);
	assert_int_equal(peek_claim(f, 1, 0, ANY, 1), 1);
	assert_int_equal(msg_id(f, util_tagm_msg_find(&f->tagm, msg_is_claimed, NULL)) % 3, 1);

	for (i = 0; i < 8; i++)
		post(f, i, (uint64_t) i, i % 2 ? 0x100 : 0, ANY);
	assert_int_equal(cancel_ctx(f, f->recvs[3].ctx), 3);
	assert_int_equal(cancel_ctx(f, f->recvs[6].ctx), 6);

	assert_int_equal(util_tagm_msg_flush(&f->tagm, msg_flushed, &log), 6);
	/* Unclaimed in arrival order, then the claimed ones. */
	assert_int_equal(log.ids[0], 0);
	assert_int_equal(log.ids[1], 2);
	assert_int_equal(log.ids[2], 3);
	assert_int_equal(log.ids[3], 5);
	assert_true((log.ids[4] == 1 && log.ids[5] == 4) || (log.ids[4] == 4 && log.ids[5] == 1));
	assert_int_equal(take_claimed(f, 0), -1);

	log.cnt = 0;
	assert_int_equal(util_tagm_recv_flush(&f->tagm, recv_flushed, &log), 6);
	for (i = 0; i < log.cnt; i++) {
		assert_false(seen[log.ids[i]]);
		seen[log.ids[i]] = true;
	}
	assert_false(seen[3] || seen[6]);
	assert_counts(f, 0, 0, 0, 0);
}

/*
 * The reference model: plain arrays in post and arrival order, searched linearly, against
 * which a long random sequence of every operation is checked, result by result.
 */
struct model {
	int posted[ENTRY_CNT];     /* receive ids in post order */
	int posted_cnt;
	int unexp[ENTRY_CNT];      /* message ids in arrival order, claimed ones included */
	int unexp_cnt;
	uint64_t recv_tag[ENTRY_CNT], recv_ignore[ENTRY_CNT], recv_src[ENTRY_CNT];
	uint64_t msg_tag[ENTRY_CNT], msg_src[ENTRY_CNT], msg_group[ENTRY_CNT];
	int owner[ENTRY_CNT];      /* -1: not claimed */
	uint64_t claim_seq[ENTRY_CNT];
	uint64_t next_claim_seq;
	size_t wild_cnt, claimed_cnt;
	int arrive_share;          /* percent of steps that are arrivals (receives: 44 - it) */
	uint64_t rng;
};

static uint64_t model_rand(struct model *m)
{
	/* xorshift64*: reproducible from the seed, the same on every libc. */
	m->rng ^= m->rng >> 12;
	m->rng ^= m->rng << 25;
	m->rng ^= m->rng >> 27;
	return m->rng * 0x2545f4914f6cdd1dULL;
}

static int model_pick(struct model *m, int n)
{
	return (int) (model_rand(m) % (uint64_t) n);
}

static bool model_is_match(uint64_t recv_tag, uint64_t ignore, uint64_t recv_src, uint64_t tag,
			   uint64_t src, uint64_t group)
{
	return (recv_tag & ~ignore) == (tag & ~ignore) &&
	       (recv_src == ANY || recv_src == src || recv_src == group);
}

static void model_remove_at(int *list, int *cnt, int pos)
{
	memmove(&list[pos], &list[pos + 1], (size_t) (*cnt - pos - 1) * sizeof(*list));
	(*cnt)--;
}

/* Position in posted of the first receive matching (tag, src, group), or -1. */
static int model_posted_match(struct model *m, uint64_t tag, uint64_t src, uint64_t group)
{
	int i, id;

	for (i = 0; i < m->posted_cnt; i++) {
		id = m->posted[i];
		if (model_is_match(m->recv_tag[id], m->recv_ignore[id], m->recv_src[id], tag, src,
				   group))
			return i;
	}
	return -1;
}

/* Position in unexp of the first unclaimed message a receive would match, or -1. */
static int model_unexp_match(struct model *m, uint64_t tag, uint64_t ignore, uint64_t src)
{
	int i, id;

	for (i = 0; i < m->unexp_cnt; i++) {
		id = m->unexp[i];
		if (m->owner[id] < 0 &&
		    model_is_match(tag, ignore, src, m->msg_tag[id], m->msg_src[id],
				   m->msg_group[id]))
			return i;
	}
	return -1;
}

static int model_free_id(struct model *m, bool *in_use)
{
	int id = model_pick(m, ENTRY_CNT), i;

	for (i = 0; i < ENTRY_CNT; i++, id = (id + 1) % ENTRY_CNT)
		if (!in_use[id])
			return id;
	return -1;
}

/* Few tags, so that matches happen, with high bits too, so masks have work to do. */
static uint64_t model_tag(struct model *m)
{
	static const uint64_t high[] = { 0, 1ULL << 40, 0xabcdULL << 48 };

	return (uint64_t) model_pick(m, 8) | high[model_pick(m, 3)];
}

static uint64_t model_ignore(struct model *m)
{
	static const uint64_t masks[] = { 0x1, 0x3, 0x7, ~0ULL, 0xffff000000000000ULL,
					  0xffffff0000000000ULL };
	int r = model_pick(m, 20);

	if (r < 12)
		return 0;
	if (r < 12 + (int) UTIL_ARRAY_SIZE(masks))
		return masks[r - 12];
	return model_rand(m) | 1;
}

/* Senders 0 to 3; a receive may also take any of them, or name group 0x100 or 0x101. */
static uint64_t model_src(struct model *m, bool is_recv)
{
	int r = model_pick(m, 6);

	if (is_recv && r < 2)
		return ANY;
	if (is_recv && r == 2)
		return 0x100 + (uint64_t) model_pick(m, 2);
	return (uint64_t) model_pick(m, 4);
}

/* A message's group: none mostly, else one of two. */
static uint64_t model_group(struct model *m)
{
	return model_pick(m, 3) ? UTIL_TAGM_NO_GROUP : 0x100 + (uint64_t) model_pick(m, 2);
}

static void model_post(struct fixture *f, struct model *m, int id, uint64_t tag,
		       uint64_t ignore, uint64_t src)
{
	post(f, id, tag, ignore, src);
	m->recv_tag[id] = tag;
	m->recv_ignore[id] = ignore;
	m->recv_src[id] = src;
	m->posted[m->posted_cnt++] = id;
	m->wild_cnt += ignore != 0;
}

static void model_unpost(struct model *m, int pos)
{
	m->wild_cnt -= m->recv_ignore[m->posted[pos]] != 0;
	model_remove_at(m->posted, &m->posted_cnt, pos);
}

static void model_add(struct fixture *f, struct model *m, int id, uint64_t tag, uint64_t src,
		      uint64_t group)
{
	add_in(f, id, tag, src, group);
	m->msg_tag[id] = tag;
	m->msg_src[id] = src;
	m->msg_group[id] = group;
	m->owner[id] = -1;
	m->unexp[m->unexp_cnt++] = id;
}

static void model_unadd(struct model *m, int pos)
{
	int id = m->unexp[pos];

	if (m->owner[id] >= 0)
		m->claimed_cnt--;
	m->owner[id] = -1;
	model_remove_at(m->unexp, &m->unexp_cnt, pos);
}

static bool recv_in_use(struct fixture *f, int id)
{
	return f->recvs[id].is_in;
}

static bool msg_is(const struct util_tagm_msg *msg, void *arg)
{
	return msg == arg;
}

/* One random operation, its result compared with the model's. */
static void model_step(struct fixture *f, struct model *m)
{
	bool in_use[ENTRY_CNT];
	uint64_t tag, ignore, src, group;
	int op = model_pick(m, 100), pos, id, owner, i;

	tag = model_tag(m);
	ignore = model_ignore(m);
	if (op < m->arrive_share) {
		/* A message arrives: matched, else kept as unexpected. */
		src = model_src(m, false);
		group = model_group(m);
		pos = model_posted_match(m, tag, src, group);
		id = arrive_in(f, tag, src, group);
		assert_int_equal(id, pos < 0 ? -1 : m->posted[pos]);
		if (pos >= 0) {
			model_unpost(m, pos);
			return;
		}
		for (i = 0; i < ENTRY_CNT; i++)
			in_use[i] = f->msgs[i].is_in;
		id = model_free_id(m, in_use);
		if (id >= 0)
			model_add(f, m, id, tag, src, group);
	} else if (op < 44) {
		/* A receive is posted: takes an unexpected message, else waits. */
		src = model_src(m, true);
		pos = model_unexp_match(m, tag, ignore, src);
		id = take(f, tag, ignore, src);
		assert_int_equal(id, pos < 0 ? -1 : m->unexp[pos]);
		if (pos >= 0) {
			model_unadd(m, pos);
			return;
		}
		for (i = 0; i < ENTRY_CNT; i++)
			in_use[i] = recv_in_use(f, i);
		id = model_free_id(m, in_use);
		if (id >= 0)
			model_post(f, m, id, tag, ignore, src);
	} else if (op < 52) {
		/* Posted without a search first: receives and messages that could match coexist. */
		for (i = 0; i < ENTRY_CNT; i++)
			in_use[i] = recv_in_use(f, i);
		id = model_free_id(m, in_use);
		if (id >= 0)
			model_post(f, m, id, tag, ignore, model_src(m, true));
	} else if (op < 60) {
		for (i = 0; i < ENTRY_CNT; i++)
			in_use[i] = f->msgs[i].is_in;
		id = model_free_id(m, in_use);
		if (id >= 0)
			model_add(f, m, id, tag, model_src(m, false), model_group(m));
	} else if (op < 68) {
		src = model_src(m, true);
		pos = model_unexp_match(m, tag, ignore, src);
		assert_int_equal(peek(f, tag, ignore, src), pos < 0 ? -1 : m->unexp[pos]);
	} else if (op < 76) {
		src = model_src(m, true);
		owner = model_pick(m, OWNER_CNT);
		pos = model_unexp_match(m, tag, ignore, src);
		id = peek_claim(f, tag, ignore, src, owner);
		assert_int_equal(id, pos < 0 ? -1 : m->unexp[pos]);
		if (pos >= 0) {
			m->owner[id] = owner;
			m->claim_seq[id] = m->next_claim_seq++;
			m->claimed_cnt++;
		}
	} else if (op < 84) {
		/* The earliest claim of this owner, if it has any. */
		owner = model_pick(m, OWNER_CNT);
		pos = -1;
		for (i = 0; i < m->unexp_cnt; i++) {
			id = m->unexp[i];
			if (m->owner[id] == owner &&
			    (pos < 0 || m->claim_seq[id] < m->claim_seq[m->unexp[pos]]))
				pos = i;
		}
		id = take_claimed(f, owner);
		assert_int_equal(id, pos < 0 ? -1 : m->unexp[pos]);
		if (pos >= 0)
			model_unadd(m, pos);
	} else if (op < 90) {
		/* Discard any message, claimed or not. */
		if (!m->unexp_cnt)
			return;
		pos = model_pick(m, m->unexp_cnt);
		discard(f, m->unexp[pos]);
		model_unadd(m, pos);
	} else if (op < 96) {
		if (!m->posted_cnt)
			return;
		pos = model_pick(m, m->posted_cnt);
		assert_int_equal(cancel_ctx(f, f->recvs[m->posted[pos]].ctx), m->posted[pos]);
		model_unpost(m, pos);
	} else if (op < 98) {
		/* Cancel of a receive that is not posted. */
		id = model_pick(m, ENTRY_CNT);
		if (!recv_in_use(f, id))
			assert_int_equal(cancel_ctx(f, f->recvs[id].ctx), -1);
	} else {
		/* Any message, claimed or not, is found by a predicate (the close-time walk). */
		if (!m->unexp_cnt)
			return;
		id = m->unexp[model_pick(m, m->unexp_cnt)];
		assert_int_equal(msg_id(f, util_tagm_msg_find(&f->tagm, msg_is,
							      &f->msgs[id].entry)), id);
	}
}

static void run_random(struct fixture *f, uint64_t seed, int steps)
{
	struct model *m = test_calloc(1, sizeof(*m));
	const char *env = getenv("TAGM_SEED");
	uint64_t src;
	int i;

	assert_non_null(m);
	if (env)
		seed = strtoull(env, NULL, 0);
	print_message("tagm random run: seed 0x%" PRIx64 ", %d steps\n", seed, steps);
	m->rng = seed ? seed : 1;
	for (i = 0; i < ENTRY_CNT; i++)
		m->owner[i] = -1;

	for (i = 0; i < steps; i++) {
		/*
		 * Phases where messages outrun receives and the reverse, so that both the posted
		 * and the unexpected side fill up to hundreds of entries in turn.
		 */
		if (i % 4000 == 0)
			m->arrive_share = (i / 4000) % 2 ? 16 : 28;
		model_step(f, m);
		assert_int_equal(util_tagm_posted_cnt(&f->tagm), m->posted_cnt);
		assert_int_equal(util_tagm_wild_cnt(&f->tagm), m->wild_cnt);
		assert_int_equal(util_tagm_unexp_cnt(&f->tagm), m->unexp_cnt - m->claimed_cnt);
		assert_int_equal(util_tagm_claimed_cnt(&f->tagm), m->claimed_cnt);
		if (i % 251 == 0)
			assert_int_equal(util_tagm_check(&f->tagm), 0);
	}
	assert_int_equal(util_tagm_check(&f->tagm), 0);

	/*
	 * Drain through the data path: the earliest posted receive matches a message carrying
	 * its own tag and a source it accepts, and nothing posted before it can.
	 */
	while (m->posted_cnt) {
		i = m->posted[0];
		src = m->recv_src[i] == ANY ? 0 : m->recv_src[i];
		assert_int_equal(arrive(f, m->recv_tag[i], src), i);
		model_unpost(m, 0);
	}
	while (m->unexp_cnt) {
		i = m->unexp[0];
		if (m->owner[i] >= 0)
			discard(f, i);
		else
			assert_int_equal(take(f, m->msg_tag[i], 0, m->msg_src[i]), i);
		model_unadd(m, 0);
	}
	test_free(m);
}

static void test_random_vs_model(void **state)
{
	run_random(*state, 0x7a93c0ffee15baddULL, 100000);
}

#define TAGM_TEST(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
#define TAGM_TEST_TINY(name) cmocka_unit_test_setup_teardown(name, setup_tiny, teardown)

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_init_bucket_counts),
		TAGM_TEST(test_exact_match),
		TAGM_TEST(test_wildcard_match),
		TAGM_TEST(test_ignore_masks),
		TAGM_TEST(test_order_wildcard_posted_first),
		TAGM_TEST(test_order_exact_posted_first),
		TAGM_TEST(test_order_interleaved),
		TAGM_TEST(test_sources_directed_and_any),
		TAGM_TEST(test_groups),
		TAGM_TEST(test_directed_same_tag),
		TAGM_TEST(test_unexpected_arrival_order),
		TAGM_TEST(test_peek_does_not_remove),
		TAGM_TEST(test_claim_hides_message),
		TAGM_TEST(test_claim_then_new_receive),
		TAGM_TEST(test_discard),
		TAGM_TEST(test_cancel),
		TAGM_TEST(test_bucket_collisions),
		TAGM_TEST_TINY(test_bucket_collisions),
		TAGM_TEST_TINY(test_growth_keeps_order),
		TAGM_TEST(test_find_and_flush),
		TAGM_TEST(test_random_vs_model),
		TAGM_TEST_TINY(test_random_vs_model),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
