/*
 * AV sets under stress (test_av_set.c runs them): a random run of set operations against a
 * plain model, and sets of one AV used from several threads while the AV changes.
 */
#include "test_av_set.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

/* ---- random run against a model ---- */

struct model {
	fi_addr_t ids[RANDOM_ADDRS];
	long n;
};

static bool model_has(const struct model *m, fi_addr_t id)
{
	long i;

	for (i = 0; i < m->n; i++)
		if (m->ids[i] == id)
			return true;
	return false;
}

static void model_filter(struct model *m, const struct model *other, bool keep_if)
{
	long i, kept = 0;

	for (i = 0; i < m->n; i++)
		if (model_has(other, m->ids[i]) == keep_if)
			m->ids[kept++] = m->ids[i];
	m->n = kept;
}

void test_random(struct ctx *c)
{
	struct model *models = calloc(3, sizeof(*models));
	struct fid_av_set *sets[3] = {0};
	unsigned step, a, b, mismatches = 0, errors = 0;
	fi_addr_t got[MAX_MEMBERS], id;
	uint64_t rng = 0x9e3779b97f4a7c15ULL;
	struct fid_av *av;
	long i, n;
	int ret, want;

	av = open_av(c, FI_AV_TABLE, RANDOM_ADDRS, NULL);
	if (!av || !models)
		goto out;
	for (a = 0; a < 3; a++) {
		sets[a] = set_of(av, none, 0);
		if (!sets[a])
			goto close_sets;
	}
	for (step = 0; step < RANDOM_STEPS; step++) {
		rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
		a = (unsigned) (rng % 3);
		b = (unsigned) (rng >> 8) % 3;
		id = (rng >> 16) % (RANDOM_ADDRS + 10); /* some are not in the av */
		switch ((rng >> 32) % 10) {
		case 0:
			ret = fi_av_set_union(sets[a], sets[b]);
			for (i = 0; a != b && i < models[b].n; i++)
				if (!model_has(&models[a], models[b].ids[i]))
					models[a].ids[models[a].n++] = models[b].ids[i];
			want = 0;
			break;
		case 1:
			ret = fi_av_set_intersect(sets[a], sets[b]);
			if (a != b)
				model_filter(&models[a], &models[b], true);
			want = 0;
			break;
		case 2:
			ret = fi_av_set_diff(sets[a], sets[b]);
			if (a != b)
				model_filter(&models[a], &models[b], false);
			else
				models[a].n = 0;
			want = 0;
			break;
		case 3:
		case 4:
		case 5:
			if (models[a].n && rng % 2)
				id = models[a].ids[(rng >> 40) % (uint64_t) models[a].n];
			ret = fi_av_set_remove(sets[a], id);
			want = model_has(&models[a], id) ? 0 : -FI_EINVAL;
			if (!want)
				model_filter(&models[a], &(struct model){.ids = {id}, .n = 1},
					     false);
			break;
		default:
			ret = fi_av_set_insert(sets[a], id);
			want = id < RANDOM_ADDRS && !model_has(&models[a], id) ? 0 : -FI_EINVAL;
			if (!want)
				models[a].ids[models[a].n++] = id;
			break;
		}
		errors += ret != want;
		n = read_members(sets[a], got);
		mismatches += n != models[a].n ||
			      (n > 0 && memcmp(got, models[a].ids, (size_t) n * sizeof(*got)));
	}
	LT_CHECK(!errors, "random: %u calls of %u returned other than the model", errors,
		 RANDOM_STEPS);
	LT_CHECK(!mismatches, "random: %u member lists of %u differ from the model", mismatches,
		 RANDOM_STEPS);
close_sets:
	for (a = 0; a < 3; a++)
		close_set(sets[a]);
	LT_CHECK_RET(fi_close(&av->fid), 0, "random: close av");
out:
	free(models);
}

/* ---- threads: sets of one AV used concurrently, while the AV changes ---- */

struct thread_arg {
	struct fid_av *av;
	struct fid_av_set *shared; /* the universe of the first THREAD_ADDRS entries: read only */
	unsigned seed;
	uint32_t addr_format;
	atomic_uint *unexpected;
	atomic_bool *stop;
};

static void *set_thread(void *p)
{
	struct thread_arg *t = p;
	struct fid_av_set *own = set_of(t->av, none, 0);
	uint64_t rng = 0x9e3779b97f4a7c15ULL * (t->seed + 1);
	fi_addr_t got[MAX_MEMBERS];
	unsigned i;
	long n, j, k;
	int ret;

	if (!own) {
		atomic_fetch_add(t->unexpected, 1);
		return NULL;
	}
	for (i = 0; i < THREAD_ITERS; i++) {
		rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
		switch (rng % 5) {
		case 0:
			ret = fi_av_set_union(own, t->shared);
			break;
		case 1:
			ret = fi_av_set_diff(own, t->shared);
			break;
		case 2:
			ret = fi_av_set_intersect(own, t->shared);
			break;
		case 3:
			ret = fi_av_set_remove(own, (rng >> 8) % THREAD_ADDRS);
			ret = ret == -FI_EINVAL ? 0 : ret;
			break;
		default:
			ret = fi_av_set_insert(own, (rng >> 8) % THREAD_ADDRS);
			ret = ret == -FI_EINVAL ? 0 : ret;
			break;
		}
		if (ret)
			atomic_fetch_add(t->unexpected, 1);
	}
	/* still a set: no member twice, every member one of the shared ones */
	n = read_members(own, got);
	for (j = 0; j < n; j++)
		for (k = j + 1; k < n; k++)
			if (got[j] == got[k] || got[j] >= THREAD_ADDRS)
				atomic_fetch_add(t->unexpected, 1);
	if (n < 0 || fi_close(&own->fid))
		atomic_fetch_add(t->unexpected, 1);
	return NULL;
}

/* Inserts and removes entries past the shared ones, and opens and closes universe sets. */
static void *av_thread(void *p)
{
	struct thread_arg *t = p;
	struct fi_av_set_attr attr = empty_attr();
	struct sockaddr_in6 addr[2];
	struct fid_av_set *set;
	fi_addr_t fi_addr;
	unsigned i = 0;

	attr.flags = FI_UNIVERSE;
	while (!atomic_load(t->stop)) {
		memset(addr, 0, sizeof(addr));
		if (t->addr_format == FI_SOCKADDR_IN6) {
			addr[0].sin6_family = AF_INET6;
			addr[0].sin6_port = htons((uint16_t) (9000 + i % 1000));
		} else {
			((struct sockaddr_in *) addr)->sin_family = AF_INET;
			((struct sockaddr_in *) addr)->sin_port =
				htons((uint16_t) (9000 + i % 1000));
		}
		if (fi_av_insert(t->av, addr, 1, &fi_addr, 0, NULL) != 1 ||
		    fi_av_remove(t->av, &fi_addr, 1, 0))
			atomic_fetch_add(t->unexpected, 1);
		if (i++ % 16 == 0) {
			if (fi_av_set(t->av, &attr, &set, NULL) || fi_close(&set->fid))
				atomic_fetch_add(t->unexpected, 1);
		}
	}
	return NULL;
}

void test_threads(struct ctx *c)
{
	struct thread_arg args[THREADS + 1];
	pthread_t tids[THREADS + 1];
	atomic_uint unexpected = 0;
	atomic_bool stop = false;
	struct fi_av_set_attr attr = empty_attr();
	fi_addr_t all[THREAD_ADDRS];
	struct fid_av_set *shared;
	struct fid_av *av;
	unsigned i, started = 0;

	av = open_av(c, FI_AV_TABLE, THREAD_ADDRS, all);
	if (!av)
		return;
	attr.flags = FI_UNIVERSE;
	if (!LT_CHECK_RET(fi_av_set(av, &attr, &shared, NULL), 0, "threads: shared set"))
		goto close_av;
	for (i = 0; i <= THREADS; i++) {
		args[i] = (struct thread_arg){
			.av = av,
			.shared = shared,
			.seed = i,
			.addr_format = c->addr_format,
			.unexpected = &unexpected,
			.stop = &stop,
		};
		if (pthread_create(&tids[i], NULL, i == THREADS ? av_thread : set_thread, &args[i]))
			break;
		started++;
	}
	for (i = 0; i < started && i < THREADS; i++)
		pthread_join(tids[i], NULL);
	atomic_store(&stop, true);
	if (started == THREADS + 1)
		pthread_join(tids[THREADS], NULL);
	LT_CHECK(started == THREADS + 1, "threads: %u threads started", started);
	LT_CHECK(!atomic_load(&unexpected), "threads: %u unexpected results",
		 atomic_load(&unexpected));
	CHECK_MEMBERS(shared, all, THREAD_ADDRS, "threads: the shared set unchanged");
	close_set(shared);
close_av:
	LT_CHECK_RET(fi_close(&av->fid), 0, "threads: close av");
}
