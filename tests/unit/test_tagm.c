/*
 * Unit tests of util/tagm.c: matching of posted receives and unexpected messages, the order
 * fi_tagged(3) requires across exact and wildcard receives, sources, FI_PEEK / FI_CLAIM /
 * FI_DISCARD, cancel, bucket collisions and growth (test_tagm_model.c: a long random run
 * against a reference model).
 */
#include "config.h"

#include "tests/unit/tagm_fixture.h"

static struct fi_provider test_prov = { .name = "util_test" };
struct fi_provider *util_prov = &test_prov;

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

/* A sender named after arrival: directed receives find its messages in arrival order. */
static void test_set_src(void **state)
{
	struct fixture *f = *state;
	const uint64_t tag = 4, unknown = 0xfffe, g = 0x300;

	/* without the source hash: only the field changes */
	add(f, 0, tag, unknown);
	util_tagm_msg_set_src(&f->tagm, &f->msgs[0].entry, 5, UTIL_TAGM_NO_GROUP);
	assert_int_equal(util_tagm_check(&f->tagm), 0);
	assert_int_equal(take(f, tag, 0, 5), 0);

	/* with it: messages of 5 that came before and after stay in arrival order */
	add(f, 1, tag, 5);
	add(f, 2, tag, unknown);
	add(f, 3, tag, 5);
	add(f, 4, tag, unknown);
	assert_int_equal(peek(f, tag, 0, 6), -1); /* builds the source hash */
	util_tagm_msg_set_src(&f->tagm, &f->msgs[4].entry, 5, UTIL_TAGM_NO_GROUP);
	util_tagm_msg_set_src(&f->tagm, &f->msgs[2].entry, 5, g);
	assert_int_equal(util_tagm_check(&f->tagm), 0);
	assert_int_equal(take(f, tag, 0, unknown), -1);
	assert_int_equal(take(f, tag, 0, g), 2);
	assert_int_equal(take(f, tag, 0, 5), 1);
	assert_int_equal(take(f, tag, 0, 5), 3);
	assert_int_equal(take(f, tag, 0, 5), 4);

	/* a claimed message keeps its owner's hold, and its new sender */
	add(f, 5, tag, unknown);
	assert_int_equal(peek_claim(f, tag, 0, ANY, 0), 5);
	util_tagm_msg_set_src(&f->tagm, &f->msgs[5].entry, 7, UTIL_TAGM_NO_GROUP);
	assert_int_equal(util_tagm_check(&f->tagm), 0);
	assert_int_equal(take(f, tag, 0, 7), -1);
	assert_int_equal(take_claimed(f, 0), 5);
	assert_int_equal(f->msgs[5].entry.src, 7);
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
		TAGM_TEST(test_set_src),
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
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
