/*
 * The fixture of util/tagm.c's unit tests (test_tagm.c, test_tagm_model.c): an engine over
 * arrays of receives and messages that stand for the provider's, and one-line helpers for
 * each operation, returning entry ids.
 */
#ifndef TESTS_UNIT_TAGM_FIXTURE_H
#define TESTS_UNIT_TAGM_FIXTURE_H

#include <inttypes.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "util/tagm_inl.h"

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

static inline int setup_buckets(void **state, size_t bucket_cnt)
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

static inline int setup(void **state)
{
	return setup_buckets(state, 0);
}

/* Two buckets: every tag shares a bucket with others until the hash grows. */
static inline int setup_tiny(void **state)
{
	return setup_buckets(state, 2);
}

/* Every test takes out all it put in: the engine is empty and no entry is left inside. */
static inline int teardown(void **state)
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

static inline int recv_id(struct fixture *f, struct util_tagm_recv *recv)
{
	struct test_recv *r;

	if (!recv)
		return -1;
	r = container_of(recv, struct test_recv, entry);
	assert_true(r >= f->recvs && r < f->recvs + ENTRY_CNT);
	return (int) (r - f->recvs);
}

static inline int msg_id(struct fixture *f, struct util_tagm_msg *msg)
{
	struct test_msg *m;

	if (!msg)
		return -1;
	m = container_of(msg, struct test_msg, entry);
	assert_true(m >= f->msgs && m < f->msgs + ENTRY_CNT);
	return (int) (m - f->msgs);
}

static inline void post(struct fixture *f, int id, uint64_t tag, uint64_t ignore, uint64_t src)
{
	assert_false(f->recvs[id].is_in);
	util_tagm_recv_post(&f->tagm, &f->recvs[id].entry, tag, ignore, src);
	f->recvs[id].is_in = true;
}

/* A message of a group arrives: the id of the receive it matched (now out), or -1. */
static inline int arrive_in(struct fixture *f, uint64_t tag, uint64_t src, uint64_t group)
{
	int id = recv_id(f, util_tagm_recv_match(&f->tagm, tag, src, group));

	if (id >= 0) {
		assert_true(f->recvs[id].is_in);
		f->recvs[id].is_in = false;
	}
	return id;
}

/* A message in no group arrives. */
static inline int arrive(struct fixture *f, uint64_t tag, uint64_t src)
{
	return arrive_in(f, tag, src, UTIL_TAGM_NO_GROUP);
}

static inline void add_in(struct fixture *f, int id, uint64_t tag, uint64_t src, uint64_t group)
{
	assert_false(f->msgs[id].is_in);
	util_tagm_msg_add(&f->tagm, &f->msgs[id].entry, tag, src, group);
	f->msgs[id].is_in = true;
}

static inline void add(struct fixture *f, int id, uint64_t tag, uint64_t src)
{
	add_in(f, id, tag, src, UTIL_TAGM_NO_GROUP);
}

/* A receive consumes the earliest matching unexpected message: its id, or -1. */
static inline int take(struct fixture *f, uint64_t tag, uint64_t ignore, uint64_t src)
{
	int id = msg_id(f, util_tagm_msg_match(&f->tagm, tag, ignore, src));

	if (id >= 0) {
		assert_true(f->msgs[id].is_in);
		assert_false(util_tagm_msg_is_claimed(&f->msgs[id].entry));
		f->msgs[id].is_in = false;
	}
	return id;
}

static inline int peek(struct fixture *f, uint64_t tag, uint64_t ignore, uint64_t src)
{
	return msg_id(f, util_tagm_msg_search(&f->tagm, tag, ignore, src));
}

/* FI_PEEK | FI_CLAIM: the id claimed by owner, or -1. */
static inline int peek_claim(struct fixture *f, uint64_t tag, uint64_t ignore, uint64_t src,
			     int owner)
{
	struct util_tagm_msg *msg = util_tagm_msg_search(&f->tagm, tag, ignore, src);

	if (!msg)
		return -1;
	util_tagm_msg_claim(&f->tagm, msg, &f->owners[owner]);
	assert_true(util_tagm_msg_is_claimed(msg));
	return msg_id(f, msg);
}

static inline int take_claimed(struct fixture *f, int owner)
{
	int id = msg_id(f, util_tagm_msg_take_claimed(&f->tagm, &f->owners[owner]));

	if (id >= 0) {
		assert_true(f->msgs[id].is_in);
		assert_false(util_tagm_msg_is_claimed(&f->msgs[id].entry));
		f->msgs[id].is_in = false;
	}
	return id;
}

static inline void discard(struct fixture *f, int id)
{
	assert_true(f->msgs[id].is_in);
	util_tagm_msg_remove(&f->tagm, &f->msgs[id].entry);
	assert_false(util_tagm_msg_is_claimed(&f->msgs[id].entry));
	f->msgs[id].is_in = false;
}

static inline bool recv_has_ctx(const struct util_tagm_recv *recv, void *arg)
{
	return container_of(recv, struct test_recv, entry)->ctx == *(int *) arg;
}

/* fi_cancel: finds the receive by its context; the id removed, or -1 when not posted. */
static inline int cancel_ctx(struct fixture *f, int ctx)
{
	int id = recv_id(f, util_tagm_recv_find(&f->tagm, recv_has_ctx, &ctx));

	if (id >= 0) {
		util_tagm_recv_remove(&f->tagm, &f->recvs[id].entry);
		assert_true(f->recvs[id].is_in);
		f->recvs[id].is_in = false;
	}
	return id;
}

static inline void assert_counts(struct fixture *f, size_t posted, size_t wild, size_t unexp,
			  size_t claimed)
{
	assert_int_equal(util_tagm_posted_cnt(&f->tagm), posted);
	assert_int_equal(util_tagm_wild_cnt(&f->tagm), wild);
	assert_int_equal(util_tagm_unexp_cnt(&f->tagm), unexp);
	assert_int_equal(util_tagm_claimed_cnt(&f->tagm), claimed);
	assert_int_equal(util_tagm_check(&f->tagm), 0);
}

#define TAGM_TEST(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
#define TAGM_TEST_TINY(name) cmocka_unit_test_setup_teardown(name, setup_tiny, teardown)

#endif /* TESTS_UNIT_TAGM_FIXTURE_H */
