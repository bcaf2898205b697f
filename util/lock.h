/*
 * A mutex that an object takes only when its domain asked for thread safety: FI_THREAD_SAFE
 * objects lock, FI_THREAD_DOMAIN (and stricter) objects skip it. Chosen once at open.
 */
#ifndef UTIL_LOCK_H
#define UTIL_LOCK_H

#include <pthread.h>
#include <stdbool.h>

struct util_lock {
	pthread_mutex_t mutex;
	bool is_enabled;
};

static inline void util_lock_init(struct util_lock *lock, bool is_enabled)
{
	pthread_mutexattr_t attr;

	/* Recursive: user callbacks (progress inside a read) may re-enter an object. */
	pthread_mutexattr_init(&attr);
	pthread_mutexattr_settype(&attr, PTHREAD_MUTEX_RECURSIVE);
	pthread_mutex_init(&lock->mutex, &attr);
	pthread_mutexattr_destroy(&attr);
	lock->is_enabled = is_enabled;
}

static inline void util_lock_fini(struct util_lock *lock)
{
	pthread_mutex_destroy(&lock->mutex);
}

static inline void util_lock_acquire(struct util_lock *lock)
{
	if (lock->is_enabled)
		pthread_mutex_lock(&lock->mutex);
}

static inline void util_lock_release(struct util_lock *lock)
{
	if (lock->is_enabled)
		pthread_mutex_unlock(&lock->mutex);
}

#endif /* UTIL_LOCK_H */
