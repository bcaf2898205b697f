/*
 * Counter object: implements struct fi_ops_cntr (read, readerr, add, set, wait, adderr,
 * seterr) with atomics, an FI_WAIT_FD wait set, and the owner's progress hook run by
 * read, readerr and wait. The owner embeds struct util_cntr first and sets cntr_fid.fid.ops.
 */
#ifndef UTIL_CNTR_H
#define UTIL_CNTR_H

#include <stdatomic.h>
#include <rdma/fi_domain.h>

#include "util/util.h"
#include "util/wait.h"

struct util_cntr {
	struct fid_cntr cntr_fid;
	enum fi_wait_obj wait_obj;  /* FI_WAIT_NONE or FI_WAIT_FD */
	struct util_wait wait;
	_Atomic uint64_t cnt;
	_Atomic uint64_t err;
	struct util_progress progress;
	atomic_int ref;

	atomic_int sleepers;        /* threads in fi_cntr_wait: updates must signal */
	atomic_bool is_fd_exported; /* FI_GETWAIT handed out the fd: every update signals */
	_Atomic uint64_t seen_cnt;  /* values last returned by read/readerr, for trywait */
	_Atomic uint64_t seen_err;
	_Atomic uint64_t poll_cnt;  /* values at the last fi_poll that reported the counter, */
	_Atomic uint64_t poll_err;  /* fi_cntr_set or fi_cntr_add (util/poll.h) */
};

/*
 * attr may be NULL (defaults). -FI_ENOSYS for FI_WAIT_SET / FI_WAIT_MUTEX_COND / FI_WAIT_YIELD
 * / FI_WAIT_POLLFD, -FI_EBADFLAGS for non-zero flags, -FI_EINVAL for other bad attributes.
 */
int util_cntr_init(struct util_cntr *cntr, const struct fi_cntr_attr *attr,
		   const struct util_progress *progress, void *context);
int util_cntr_fini(struct util_cntr *cntr);

/* Whether a thread may be asleep on the counter: in fi_cntr_wait, or on its exported fd. */
static inline bool util_cntr_may_sleep(const struct util_cntr *cntr)
{
	return atomic_load(&cntr->sleepers) > 0 || atomic_load(&cntr->is_fd_exported);
}

/* Provider-side increments (wake up waiters). */
void util_cntr_inc(struct util_cntr *cntr);
void util_cntr_inc_err(struct util_cntr *cntr);

int util_cntr_control(struct fid *fid, int command, void *arg);
/*
 * For fi_poll: true when the value or the error count moved since the last call that
 * returned true, fi_cntr_set / fi_cntr_add (and their error twins); both are then marked seen.
 */
bool util_cntr_poll(struct util_cntr *cntr);

/*
 * For fi_trywait: clears the pending signal, then -FI_EAGAIN when the counter or its error
 * count changed since the application last read them (or the owner's trywait hook says so),
 * 0 when sleeping on the fd is safe; -FI_ENODATA without a wait object.
 */
int util_cntr_trywait(struct util_cntr *cntr);

extern struct fi_ops_cntr util_cntr_ops;

#endif /* UTIL_CNTR_H */
