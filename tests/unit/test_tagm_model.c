/*
 * Unit test of util/tagm.c against a reference model made of plain lists: a long random run
 * of every operation (posts, arrivals, takes, peeks, claims, discards, cancels), checked
 * result by result, with the default buckets and with tiny ones that grow.
 */
#include "config.h"

#include "tests/unit/tagm_fixture.h"

static struct fi_provider test_prov = { .name = "util_test" };
struct fi_provider *util_prov = &test_prov;

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

int main(void)
{
	const struct CMUnitTest tests[] = {
		TAGM_TEST(test_random_vs_model),
		TAGM_TEST_TINY(test_random_vs_model),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
