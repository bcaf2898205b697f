/*
 * FI_PROGRESS_AUTO (fi_domain(3)): one thread per domain that progresses the domain's enabled
 * endpoints while their application does not, so that a target computing elsewhere still
 * answers its peers' reads, writes, atomics, rendezvous and acknowledgements.
 *
 * The application's own calls stay the fast path. Each endpoint is a member of the domain's
 * set (domain->eps) and counts the progress calls its application makes (reads of its CQs
 * and counters, blocking waits included). On each round the thread looks at every member:
 * - one whose count moved since the last round is left to its application: the thread
 *   neither takes its lock nor keeps its wait fds in its epoll set, so its traffic does not
 *   wake the thread;
 * - any other is progressed, by the thread, and its core's wait fds (CQ and EQ) join the
 *   thread's epoll set; over a core whose wait fds all hold one epoll set of its domain
 *   (is_shared), only one member's do.
 * Then the thread sleeps in that set (which also holds its stop signal) for at most:
 * - while a member is left to its application, the time to look again: the idle period
 *   (FI_OFI_LAYER_PROGRESS_IDLE, 1 ms), doubled each round the application still calls, up
 *   to LAYER_PROGRESS_AWAY_MAX times it, so that a busy application costs the thread a few
 *   dozen wake-ups a second (many processes share the processors);
 * - the idle period while a member's core has no wait fds (shm: polled so);
 * - 1 ms when a member's trywait refused sleep (work pending below the wait fds: data not yet
 *   acknowledged over a datagram core, a busy core), after LAYER_PROGRESS_RETRIES rounds that
 *   refused in a row without sleeping;
 * - a quarter of the shortest timer (keepalive, peer timeout, ring idle) otherwise.
 * It never spins, and an idle domain costs a few wake-ups per second.
 *
 * Locking: a round runs under the set's lock, each member's progress under its endpoint's
 * lock (the order every progress call takes them), so a domain with a thread runs every
 * object locked (domain.c), whatever its threading model.
 */
#ifndef LAYER_PROGRESS_H
#define LAYER_PROGRESS_H

#include <pthread.h>
#include <stdatomic.h>

#include "util/progress.h"
#include "util/wait.h"

/* Rounds right after a refusal that go again at once, before the thread sleeps 1 ms. */
#define LAYER_PROGRESS_RETRIES 4
/* The longest look-again period while applications keep calling, in idle periods. */
#define LAYER_PROGRESS_AWAY_MAX 32

/* One endpoint as the thread sees it, in the endpoint's memory, in the domain's set. */
struct layer_progress_member {
	struct util_progress_hook hook; /* the endpoint's progress (keeping nothing for a next
					 * call) and trywait */
	atomic_uint calls;              /* the application's progress calls */
	unsigned int seen;              /* calls at the thread's last look */
	int fds[2];                     /* the core CQ's and EQ's wait fds; -1: none */
	bool is_shared;                 /* its fds wake for every member's core events
					 * (core->has_domain_wait): one such member watched is
					 * enough */
	bool is_watched;                /* fds in the thread's epoll set */
};

struct layer_progress {
	struct util_progress_set *members; /* the domain's: struct layer_progress_member hooks */
	struct util_wait wait;          /* the watched members' fds and the stop signal */
	pthread_t thread;
	atomic_bool is_stopping;
	unsigned int refused;           /* rounds in a row a trywait refused, not slept since */
	unsigned int away_ms;           /* look-again period while a member is left to its
					 * application */
	struct layer_progress_member *shared; /* the one shared member watched, or NULL */
};

/* Starts the thread over members. 0 or -FI_E*. */
int layer_progress_start(struct layer_progress *lp, struct util_progress_set *members);
/* Stops it and waits for it; members must have left. */
void layer_progress_stop(struct layer_progress *lp);

/*
 * A member's fds, before it joins the set (util_progress_set_add of its hook). The thread
 * watches them from its next round; cq_fd -1: a core without one, polled.
 */
void layer_progress_member_init(struct layer_progress_member *m, int cq_fd, int eq_fd,
				bool is_shared);
/* After its hook left the set (util_progress_set_del): its fds leave the epoll set. */
void layer_progress_member_fini(struct layer_progress *lp, struct layer_progress_member *m);

/* The application progressed the member: the thread leaves it alone for a while. */
static inline void layer_progress_called(struct layer_progress_member *m)
{
	/* one writer matters at a time: any change is seen, a lost increment is harmless */
	atomic_store_explicit(&m->calls,
			      atomic_load_explicit(&m->calls, memory_order_relaxed) + 1,
			      memory_order_relaxed);
}

#endif /* LAYER_PROGRESS_H */
