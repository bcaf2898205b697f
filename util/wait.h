/*
 * Wait set for FI_WAIT_FD / FI_WAIT_UNSPEC objects: an epoll fd holding the object's own
 * eventfd (signalled when entries are added or fi_*_signal is called) plus any fds the owner
 * adds (a core provider's CQ or EQ wait fds). The epoll fd is what FI_GETWAIT hands out: it
 * becomes readable when any member is, so an application polling it wakes up both for new
 * entries and for core events that manual progress must turn into entries.
 */
#ifndef UTIL_WAIT_H
#define UTIL_WAIT_H

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

#endif /* UTIL_WAIT_H */
