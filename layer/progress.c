/* The domain's progress thread for FI_PROGRESS_AUTO (progress.h). */
#include "config.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>
#include <sys/resource.h>
#include <sys/syscall.h>

#include "layer/layer.h"
#include "layer/progress.h"

/* What a round found: how long the thread may sleep after it. */
struct layer_progress_round {
	struct layer_progress *lp;
	int timeout_ms;
	bool is_refused;
	bool is_away;    /* a member was left to its application */
	bool has_shared; /* the shared member watched was visited */
};

/* The member's fds in (or out of) the thread's epoll set. */
static void layer_progress_watch(struct layer_progress *lp, struct layer_progress_member *m,
				 bool is_watched)
{
	size_t i;

	if (m->is_watched == is_watched)
		return;
	for (i = 0; i < UTIL_ARRAY_SIZE(m->fds); i++) {
		if (m->fds[i] < 0)
			continue;
		if (is_watched)
			(void) util_wait_add_fd(&lp->wait, m->fds[i]);
		else
			(void) util_wait_del_fd(&lp->wait, m->fds[i]);
	}
	m->is_watched = is_watched;
}

/* One member in a round: left to its application if it called since the last round, else
 * watched, progressed, and asked whether the thread may sleep on its fds. */
static void layer_progress_visit(struct util_progress_hook *hook, void *arg)
{
	struct layer_progress_member *m = container_of(hook, struct layer_progress_member, hook);
	unsigned int calls = atomic_load_explicit(&m->calls, memory_order_relaxed);
	struct layer_progress_round *round = arg;
	bool is_watched;

	if (calls != m->seen) {
		/* its application progresses it: look again later */
		m->seen = calls;
		layer_progress_watch(round->lp, m, false);
		if (round->lp->shared == m)
			round->lp->shared = NULL;
		round->is_away = true;
		return;
	}
	/* of the members that share one wait set, one is watched */
	is_watched = !m->is_shared || !round->lp->shared || round->lp->shared == m;
	layer_progress_watch(round->lp, m, is_watched);
	if (m->is_shared && is_watched) {
		round->lp->shared = m;
		round->has_shared = true;
	}
	util_progress_run(&hook->progress);
	if (m->fds[0] < 0)
		round->timeout_ms = UTIL_MIN(round->timeout_ms,
					     (int) layer_settings.progress_idle_ms);
	else if (hook->progress.trywait && hook->progress.trywait(hook->progress.arg))
		round->is_refused = true;
}

/* A quarter of the shortest timer progress runs (liveness, rings), 1 ms to 1 s. */
static int layer_progress_tick_ms(void)
{
	size_t ms = UTIL_MIN(layer_settings.peer_timeout_ms, layer_settings.ring_idle_ms);

	if (layer_settings.keepalive_ms)
		ms = UTIL_MIN(ms, layer_settings.keepalive_ms);
	return (int) UTIL_MAX(UTIL_MIN(ms / 4, (size_t) 1000), (size_t) 1);
}

/* FI_OFI_LAYER_PROGRESS_NICE: the thread's own nice value, when the process may set it. */
static void layer_progress_set_nice(void)
{
	int nice = layer_settings.progress_nice;

	if (nice && setpriority(PRIO_PROCESS, (id_t) syscall(SYS_gettid), nice))
		LAYER_WARN_ONCE(FI_LOG_DOMAIN, "FI_OFI_LAYER_PROGRESS_NICE: nice %d refused "
			"(%s): the progress thread keeps the process's\n", nice, strerror(errno));
}

static void *layer_progress_main(void *arg)
{
	struct layer_progress *lp = arg;
	struct layer_progress_round round = { .lp = lp };
	const int tick_ms = layer_progress_tick_ms();

	layer_progress_set_nice();

	while (!atomic_load(&lp->is_stopping)) {
		round.timeout_ms = tick_ms;
		round.is_refused = false;
		round.is_away = false;
		round.has_shared = false;
		util_progress_set_each(lp->members, layer_progress_visit, &round);
		/* the shared member left the set: another takes its place next round */
		if (!round.has_shared)
			lp->shared = NULL;
		/* applications that keep calling are looked at less and less often */
		if (round.is_away) {
			round.timeout_ms = UTIL_MIN(round.timeout_ms, (int) lp->away_ms);
			lp->away_ms = UTIL_MIN(2 * lp->away_ms, (unsigned int)
					       (LAYER_PROGRESS_AWAY_MAX *
						layer_settings.progress_idle_ms));
		} else {
			lp->away_ms = (unsigned int) layer_settings.progress_idle_ms;
		}
		if (round.is_refused) {
			if (++lp->refused <= LAYER_PROGRESS_RETRIES)
				continue;
			round.timeout_ms = 1;
		}
		lp->refused = 0;
		(void) util_wait_wait(&lp->wait, round.timeout_ms);
	}
	return NULL;
}

int layer_progress_start(struct layer_progress *lp, struct util_progress_set *members)
{
	int ret;

	lp->members = members;
	lp->refused = 0;
	lp->away_ms = (unsigned int) layer_settings.progress_idle_ms;
	lp->shared = NULL;
	atomic_init(&lp->is_stopping, false);
	ret = util_wait_init(&lp->wait);
	if (ret)
		return ret;
	ret = pthread_create(&lp->thread, NULL, layer_progress_main, lp);
	if (ret) {
		FI_WARN(&layer_prov, FI_LOG_DOMAIN, "FI_PROGRESS_AUTO: no progress thread: %s\n",
			strerror(ret));
		util_wait_fini(&lp->wait);
		return -FI_ENOMEM;
	}
	return 0;
}

void layer_progress_stop(struct layer_progress *lp)
{
	atomic_store(&lp->is_stopping, true);
	util_wait_signal(&lp->wait);
	(void) pthread_join(lp->thread, NULL);
	util_wait_fini(&lp->wait);
}

void layer_progress_member_init(struct layer_progress_member *m, int cq_fd, int eq_fd,
				bool is_shared)
{
	atomic_init(&m->calls, 0);
	m->seen = 0;
	m->fds[0] = cq_fd;
	m->fds[1] = eq_fd;
	m->is_shared = is_shared;
	m->is_watched = false;
}

void layer_progress_member_fini(struct layer_progress *lp, struct layer_progress_member *m)
{
	if (lp)
		layer_progress_watch(lp, m, false);
}
