/*
 * Unit tests of util/av_table under churn: lock-free reads and lookups against a concurrent
 * writer, and long random runs checked against a plain reference model (IPv4, IPv6 and odd
 * address sizes, exact and zero-tailed keys).
 */
#include "config.h"

#include "tests/unit/av_table_fixture.h"

/* ---- lock-free readers against a writer ---- */

#define RACE_STABLE 1000
#define RACE_ROUNDS 200000

struct race {
	struct util_av_table table;
	pthread_mutex_t lock;      /* the owner's lock: the writer holds it, readers may not */
	atomic_bool is_done;
	atomic_ulong errors;
	atomic_ulong locked_finds;
};

/* Churn keys carry their value twice, so a torn copy shows. */
static struct addr16 churn_key(uint32_t value)
{
	struct addr16 a = make_addr(value | 0x80000000u);
	uint32_t inv = ~value;

	memcpy(&a.bytes[12], &inv, sizeof(inv));
	return a;
}

static void *race_writer(void *arg)
{
	struct race *r = arg;
	size_t live[64], index;
	struct addr16 key;
	uint32_t i;

	for (i = 0; i < 64; i++) {
		key = churn_key(i);
		pthread_mutex_lock(&r->lock);
		util_av_table_insert(&r->table, &key, &live[i], NULL);
		pthread_mutex_unlock(&r->lock);
	}
	for (i = 64; i < RACE_ROUNDS; i++) {
		key = churn_key(i);
		pthread_mutex_lock(&r->lock);
		util_av_table_remove(&r->table, live[i % 64]);
		if (util_av_table_insert(&r->table, &key, &index, NULL))
			atomic_fetch_add(&r->errors, 1);
		live[i % 64] = index;
		pthread_mutex_unlock(&r->lock);
	}
	atomic_store(&r->is_done, true);
	return NULL;
}

static void *race_reader(void *arg)
{
	struct race *r = arg;
	uint32_t i = 0, value, inv;
	struct addr16 key, got;
	size_t index;
	int ret;

	while (!atomic_load(&r->is_done)) {
		i = (i + 7) % RACE_STABLE;
		key = make_addr(i);
		ret = util_av_table_find(&r->table, &key, &index, NULL);
		if (ret == -FI_EAGAIN) {
			atomic_fetch_add(&r->locked_finds, 1);
			pthread_mutex_lock(&r->lock);
			ret = util_av_table_find(&r->table, &key, &index, NULL);
			pthread_mutex_unlock(&r->lock);
		}
		if (ret || index != i)
			atomic_fetch_add(&r->errors, 1);

		/* a churned entry: gone, or a key whose two copies of its value agree */
		if (!util_av_table_read(&r->table, RACE_STABLE + i % 64, &got, NULL)) {
			memcpy(&value, &got.bytes[4], sizeof(value));
			memcpy(&inv, &got.bytes[12], sizeof(inv));
			if (!(value & 0x80000000u) || (value & 0x7fffffffu) != ~inv)
				atomic_fetch_add(&r->errors, 1);
		}
		if (util_av_table_read(&r->table, i, &got, NULL) ||
		    memcmp(&got, &key, ADDRLEN))
			atomic_fetch_add(&r->errors, 1);
	}
	return NULL;
}

static void test_lockfree_readers(void **state)
{
	struct race *r = calloc(1, sizeof(*r));
	pthread_t writer, readers[2];
	uint32_t i;

	assert_non_null(r);
	/* small at first, so that the writer's hash grows and is rebuilt under the readers */
	assert_int_equal(util_av_table_init(&r->table, ADDRLEN, 0), 0);
	pthread_mutex_init(&r->lock, NULL);
	for (i = 0; i < RACE_STABLE; i++)
		insert_value(&r->table, i);

	assert_int_equal(pthread_create(&readers[0], NULL, race_reader, r), 0);
	assert_int_equal(pthread_create(&readers[1], NULL, race_reader, r), 0);
	assert_int_equal(pthread_create(&writer, NULL, race_writer, r), 0);
	pthread_join(writer, NULL);
	pthread_join(readers[0], NULL);
	pthread_join(readers[1], NULL);
	assert_int_equal(atomic_load(&r->errors), 0);
	print_message("lock-free race: %lu lookups fell back to the lock\n",
		      (unsigned long) atomic_load(&r->locked_finds));
	util_av_table_fini(&r->table);
	pthread_mutex_destroy(&r->lock);
	free(r);
}

/*
 * The reference model: a plain array of (is_live, value, generation) per index; the lowest
 * free index and the lowest index holding a value are found by scanning it.
 */
struct model_slot {
	bool is_live;
	uint32_t value;
	uint32_t gen;
};

struct model {
	struct model_slot *slot;
	size_t end;
	size_t count;
};

static size_t model_next_index(const struct model *m)
{
	size_t i;

	for (i = 0; i < m->end; i++) {
		if (!m->slot[i].is_live)
			return i;
	}
	return m->end;
}

static size_t model_find(const struct model *m, uint32_t value)
{
	size_t i;

	for (i = 0; i < m->end; i++) {
		if (m->slot[i].is_live && m->slot[i].value == value)
			return i;
	}
	return SIZE_MAX;
}

/* xorshift64*: deterministic, so a failure reproduces */
static uint64_t rand_next(uint64_t *s)
{
	*s ^= *s >> 12;
	*s ^= *s << 25;
	*s ^= *s >> 27;
	return *s * 2685821657736338717ULL;
}

/*
 * Exact keys hold the value in their first bytes and zeros after (as a normalised
 * sockaddr_in does); the others a value at the end behind non-zero filler.
 */
static void make_addr_len(uint8_t *out, size_t addrlen, uint32_t value, bool is_exact)
{
	if (is_exact) {
		memset(out, 0, addrlen);
		memcpy(out, &value, UTIL_MIN(sizeof(value), addrlen));
	} else {
		memset(out, 0xa5, addrlen);
		memcpy(out + addrlen - sizeof(value), &value, sizeof(value));
	}
}

static void check_model(const struct util_av_table *table, const struct model *m, size_t addrlen,
			bool is_exact)
{
	uint8_t a[64];
	size_t i;

	assert_int_equal(table->st->count, m->count);
	for (i = 0; i < m->end + 2; i++) {
		bool is_live = i < m->end && m->slot[i].is_live;

		assert_int_equal(util_av_table_is_live(table, i), is_live);
		assert_int_equal(util_av_table_gen(table, i), i < m->end ? m->slot[i].gen : 0);
		if (is_live) {
			uint8_t got[64];
			uint32_t gen = UINT32_MAX;

			make_addr_len(a, addrlen, m->slot[i].value, is_exact);
			assert_memory_equal(util_av_table_get(table, i), a, addrlen);
			assert_int_equal(util_av_table_read(table, i, got, &gen), 0);
			assert_memory_equal(got, a, addrlen);
			assert_int_equal(gen, m->slot[i].gen);
		} else {
			assert_null(util_av_table_get(table, i));
			assert_int_equal(util_av_table_read(table, i, NULL, NULL), -FI_EINVAL);
		}
	}
}

/*
 * 100,000 random insertions and removals over a small set of values (so duplicates are
 * common and chains are full of tombstones), each checked against the model.
 */
static void run_random(size_t addrlen, uint64_t seed, bool is_exact)
{
	const size_t ops = 100000, values = 400, max_live = 1500;
	struct util_av_table table;
	struct model m = {0};
	uint64_t rs = seed;
	uint8_t a[64];
	size_t op, index, want, fast_cnt = 0;
	uint32_t value, gen;

	m.slot = calloc(max_live + 1, sizeof(*m.slot));
	assert_non_null(m.slot);
	assert_int_equal(util_av_table_init(&table, addrlen, 0), 0);

	for (op = 0; op < ops; op++) {
		uint64_t r = rand_next(&rs);
		bool do_insert = m.count < max_live && (m.count < 10 || r % 100 < 52);

		if (do_insert) {
			value = (uint32_t) (rand_next(&rs) % values);
			make_addr_len(a, addrlen, value, is_exact);
			want = model_next_index(&m);
			gen = UINT32_MAX;
			assert_int_equal(util_av_table_insert(&table, a, &index, &gen), 0);
			assert_int_equal(index, want);
			assert_int_equal(gen, m.slot[want].gen);
			if (want == m.end)
				m.end++;
			m.slot[want].is_live = true;
			m.slot[want].value = value;
			m.count++;
		} else {
			/* anywhere up to end + 1: also hits holes and never-used indices */
			index = (size_t) (rand_next(&rs) % (m.end + 2));
			if (index < m.end && m.slot[index].is_live) {
				assert_int_equal(util_av_table_remove(&table, index), 0);
				m.slot[index].is_live = false;
				m.slot[index].gen++;
				m.count--;
			} else {
				assert_int_equal(util_av_table_remove(&table, index), -FI_EINVAL);
			}
		}

		value = (uint32_t) (rand_next(&rs) % values);
		make_addr_len(a, addrlen, value, is_exact);
		want = model_find(&m, value);
		/* what the inline path settles, it settles as the full lookup does */
		if (util_av_table_find_fast(&table, a, &index, &gen)) {
			assert_int_equal(index, want);
			assert_int_equal(gen, m.slot[want].gen);
			fast_cnt++;
		}
		if (want == SIZE_MAX) {
			assert_int_equal(util_av_table_find(&table, a, &index, NULL), -FI_ENODATA);
		} else {
			uint32_t gen = UINT32_MAX;

			assert_int_equal(util_av_table_find(&table, a, &index, &gen), 0);
			assert_int_equal(index, want);
			assert_int_equal(gen, m.slot[want].gen);
		}

		if (op % 5000 == 0)
			check_model(&table, &m, addrlen, is_exact);
	}
	check_model(&table, &m, addrlen, is_exact);
	/* sockaddr_in-like keys: the inline path settles some lookups, not all go the long way */
	if (addrlen == 16 && is_exact)
		assert_true(fast_cnt > 0);

	util_av_table_fini(&table);
	free(m.slot);
}

static void test_random_ipv4(void **state)
{
	run_random(16, 0x1234567887654321ULL, false);
	run_random(16, 0x1234567887654321ULL, true);
}

static void test_random_ipv6(void **state)
{
	/* sockaddr_in6 size: 3 words and a 4-byte tail through the hash and memcmp */
	run_random(28, 0xfeedfacecafebeefULL, false);
	run_random(28, 0xfeedfacecafebeefULL, true);
}

static void test_random_odd_size(void **state)
{
	run_random(5, 42, false);
	run_random(13, 43, true);
	run_random(13, 44, false);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_lockfree_readers),
		cmocka_unit_test(test_random_ipv4),
		cmocka_unit_test(test_random_ipv6),
		cmocka_unit_test(test_random_odd_size),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
