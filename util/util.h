/*
 * Common definitions for util/: provider-independent building blocks of ofi_layer.
 * Nothing in util/ knows about layer/; the provider hands in what util needs.
 */
#ifndef UTIL_UTIL_H
#define UTIL_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>
#include <string.h>
#include <sys/uio.h>

#include <rdma/fabric.h>
#include <rdma/fi_errno.h>
#include <rdma/providers/fi_prov.h>
#include <rdma/providers/fi_log.h>

#ifndef container_of
#define container_of(ptr, type, field) ((type *) ((char *) (ptr) - offsetof(type, field)))
#endif

#define UTIL_ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
#define UTIL_MIN(a, b) ((a) < (b) ? (a) : (b))
#define UTIL_MAX(a, b) ((a) > (b) ? (a) : (b))

#define likely(x) __builtin_expect(!!(x), 1)
#define unlikely(x) __builtin_expect(!!(x), 0)

/* The provider util/ logs as; set once by the provider before any util object is used. */
extern struct fi_provider *util_prov;

/* Round up to a power of two (x >= 1). */
static inline size_t util_roundup_pow2(size_t x)
{
	size_t p = 1;

	while (p < x)
		p <<= 1;
	return p;
}

/*
 * Grows an array of *cnt elements of elem_size bytes so that index fits (doubling, at least
 * 64 elements), the new elements zeroed: the array, moved, with *cnt updated; NULL without
 * memory (the array and *cnt unchanged).
 */
void *util_array_grow(void *array, size_t *cnt, size_t elem_size, size_t index);

/* Milliseconds since an arbitrary start, from CLOCK_MONOTONIC. */
uint64_t util_now_ms(void);

/*
 * Nanoseconds since an arbitrary start, from CLOCK_MONOTONIC_COARSE: it moves once per
 * kernel tick (1 to 4 ms) and costs a few nanoseconds, for pacing work on a hot path.
 */
uint64_t util_coarse_ns(void);

/*
 * fi_cq_strerror / fi_eq_strerror: the fi_strerror text of prov_errno (either sign), copied
 * into buf when buf is not NULL and len > 0 (truncated, always terminated); returns buf then,
 * else the static string.
 */
const char *util_strerror(int prov_errno, char *buf, size_t len);

/* Remaining milliseconds of a timeout (-1: infinite) that started at start_ms. */
static inline int util_timeout_left(int timeout_ms, uint64_t start_ms)
{
	uint64_t spent;

	if (timeout_ms < 0)
		return -1;
	spent = util_now_ms() - start_ms;
	return spent >= (uint64_t) timeout_ms ? 0 : (int) (timeout_ms - spent);
}

/*
 * How an object that waits lets its owner make progress: util objects with manual progress
 * call progress() before looking for entries, and trywait() before sleeping in their wait
 * set (it returns 0 when sleeping is safe, -FI_EAGAIN when events are already pending).
 * Either may be NULL.
 */
struct util_progress {
	void (*progress)(void *arg);
	int (*trywait)(void *arg);
	void *arg;
};

/* Bytes in an iov array. */
static inline size_t util_iov_len(const struct iovec *iov, size_t cnt)
{
	size_t i, len = 0;

	for (i = 0; i < cnt; i++)
		len += iov[i].iov_len;
	return len;
}

/* Copies an iov array's bytes to dst, end to end (an empty entry may have no buffer). */
static inline void util_iov_gather(void *dst, const struct iovec *iov, size_t cnt)
{
	size_t i, off = 0;

	for (i = 0; i < cnt; i++) {
		if (!iov[i].iov_len)
			continue;
		memcpy((char *) dst + off, iov[i].iov_base, iov[i].iov_len);
		off += iov[i].iov_len;
	}
}

/* Copies src into an iov array's buffers, in order, filling them all. */
static inline void util_iov_scatter(const struct iovec *iov, size_t cnt, const void *src)
{
	size_t i, off = 0;

	for (i = 0; i < cnt; i++) {
		if (!iov[i].iov_len)
			continue;
		memcpy(iov[i].iov_base, (const char *) src + off, iov[i].iov_len);
		off += iov[i].iov_len;
	}
}

static inline void util_progress_run(const struct util_progress *p)
{
	if (p->progress)
		p->progress(p->arg);
}

#endif /* UTIL_UTIL_H */
