/*
 * Wait set for FI_WAIT_FD / FI_WAIT_UNSPEC objects: an epoll fd holding the object's own
 * eventfd (signalled when entries are added or fi_*_signal is called) plus any fds the owner
 * adds (a core provider's CQ or EQ wait fds). The epoll fd is what FI_GETWAIT hands out: it
 * becomes readable when any member is, so an application polling it wakes up both for new
 * entries and for core events that manual progress must turn into entries.
 */
#ifndef UTIL_WAIT_H
#define UTIL_WAIT_H

#include <stdatomic.h>
#include <rdma/fi_eq.h>

#include "util/util.h"

struct util_wait {
	int epfd;      /* epoll set: signal_fd plus the owner's fds */
	int signal_fd; /* eventfd, written by util_wait_signal */
};

/* Returns 0 or a negative -FI_E* code. */
int util_wait_init(struct util_wait *wait);
void util_wait_fini(struct util_wait *wait);

/* Adds/removes an fd watched for readability (EPOLLIN). Adding an fd twice is not an error. */
int util_wait_add_fd(struct util_wait *wait, int fd);
int util_wait_del_fd(struct util_wait *wait, int fd);

/* Wakes up a waiter (and makes epfd readable) until util_wait_wait consumes it. */
void util_wait_signal(struct util_wait *wait);

/*
 * Consumes a pending signal without sleeping, so that epfd stops being readable on its
 * account. For fi_trywait: reset first, then check for entries (a later signal stays).
 */
void util_wait_reset(struct util_wait *wait);

/*
 * Sleeps in the kernel until an fd of the set is readable or timeout_ms (-1: forever) passes.
 * Consumes a pending signal. Returns 0 when woken, -FI_ETIMEDOUT on timeout, -FI_EINTR
 * when interrupted by a signal, another negative -FI_E* code on failure.
 */
int util_wait_wait(struct util_wait *wait, int timeout_ms);

/*
 * Sleeps until done(arg) is true or timeout_ms (-1: forever) passes, calling the progress
 * hooks of p in between and sleeping in wait only when p->trywait allows. Returns 0 when
 * done, -FI_EAGAIN on timeout (as blocking reads report it), another -FI_E* code on failure.
 * A NULL wait means the object has no wait object: the loop polls (FI_WAIT_NONE callers
 * should reject blocking calls before getting here).
 */
int util_wait_until(struct util_wait *wait, const struct util_progress *p, int timeout_ms,
		    bool (*done)(void *arg), void *arg);

/*
 * The wait object an EQ, CQ or counter really uses for a requested one: FI_WAIT_NONE stays,
 * FI_WAIT_UNSPEC and FI_WAIT_FD become FI_WAIT_FD; FI_WAIT_SET, FI_WAIT_MUTEX_COND,
 * FI_WAIT_YIELD and FI_WAIT_POLLFD give -FI_ENOSYS, anything else -FI_EINVAL.
 */
int util_wait_obj_resolve(enum fi_wait_obj requested, enum fi_wait_obj *resolved);

/*
 * fi_control on an object with this wait set: FI_GETWAIT stores epfd in *(int *) arg
 * (-FI_ENODATA when wait_obj is FI_WAIT_NONE) and, when is_fd_exported is not NULL, sets it
 * (from then on every update must signal); FI_GETWAITOBJ stores wait_obj in
 * *(enum fi_wait_obj *) arg; anything else is -FI_ENOSYS.
 */
int util_wait_control(struct util_wait *wait, enum fi_wait_obj wait_obj, int command,
		      void *arg, atomic_bool *is_fd_exported);

#endif /* UTIL_WAIT_H */
