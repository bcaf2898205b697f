/*
 * What every benchmark program here needs besides a fabric: a clock, whole reads and writes on
 * the pipes between its processes, and pinning a process to a CPU.
 */
#ifndef LAYER_BENCH_UTIL_H
#define LAYER_BENCH_UTIL_H

#include <stddef.h>

/* Monotonic time in microseconds. */
double now_us(void);
/* All of len bytes, across short transfers and EINTR: 0, or -1 when the peer is gone (end of
 * file) or on an error. */
int write_all(int fd, const void *buf, size_t len);
int read_all(int fd, void *buf, size_t len);
/* This process onto that CPU alone; -1 leaves it where it is. A failure is said on stderr,
 * prefixed with prog, and the process runs unpinned. */
void bench_pin(const char *prog, int cpu);

#endif /* LAYER_BENCH_UTIL_H */
