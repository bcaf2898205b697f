/*
 * A set of progress hooks behind one object: a CQ or counter that several owners (endpoints)
 * report to runs each of their hooks when it is read, and sleeps only when all of them say
 * it may. The object knows nothing of its owners: they add a hook when they bind to it and
 * remove it before they go.
 *
 * util_progress_set_run and util_progress_set_trywait have the signatures of struct
 * util_progress's entries, so the set plugs into util_cq_init / util_cntr_init as their hook
 * (arg: the set).
 *
 * Locking: the set's lock covers its list and is held while the hooks run, so a hook may
 * take its owner's lock (lock order: set, then owner); add and del must not be called with a
 * lock a hook takes. del returns once no hook of that entry is running.
 */
#ifndef UTIL_PROGRESS_H
#define UTIL_PROGRESS_H

#include "util/util.h"
#include "util/list.h"
#include "util/lock.h"

/* One owner's hooks, in the owner's memory. */
struct util_progress_hook {
	struct util_dlist link;        /* set->hooks */
	struct util_progress progress; /* progress, trywait and their arg */
};

struct util_progress_set {
	struct util_lock lock;
	struct util_dlist hooks;       /* struct util_progress_hook, in the order added */
};

void util_progress_set_init(struct util_progress_set *set, bool is_thread_safe);
/* The set must be empty (its owners removed their hooks). */
void util_progress_set_fini(struct util_progress_set *set);

void util_progress_set_add(struct util_progress_set *set, struct util_progress_hook *hook);
void util_progress_set_del(struct util_progress_set *set, struct util_progress_hook *hook);
bool util_progress_set_is_empty(struct util_progress_set *set);

/* Calls fn(hook, arg) for every hook, in the order added, under the set's lock (lock order as
 * for the hooks: fn may take its owner's lock). The owner finds itself with container_of. */
void util_progress_set_each(struct util_progress_set *set,
			    void (*fn)(struct util_progress_hook *hook, void *arg), void *arg);
/* Runs every hook's progress (arg: the set). */
void util_progress_set_run(void *set);
/* 0 when every hook's trywait allows sleeping, else the first refusal (arg: the set). */
int util_progress_set_trywait(void *set);

#endif /* UTIL_PROGRESS_H */
