/*
 * What every benchmark program here needs besides a fabric: a clock, whole reads and writes on
 * the pipes between its processes, pinning a process to a CPU, medians, option numbers.
 */
#ifndef LAYER_BENCH_UTIL_H
#define LAYER_BENCH_UTIL_H

#include <stdbool.h>
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
/* Column names of the providers: "tcp;ofi_layer" -> "layer" (the part after the last ';',
 * without "ofi_"), or the full names when the short ones would be ambiguous. */
#define BENCH_NAME_LEN 32
void bench_prov_names(const char *const *provs, int n, char names[][BENCH_NAME_LEN]);
/* The median of n samples (sorts them). */
double bench_median(double *v, int n);
/* A decimal option value in [min, max]: false when it is not one. */
bool bench_parse_ulong(const char *s, unsigned long min, unsigned long max, unsigned long *out);
/* A size with an optional binary suffix (k, m, g) in [min, max]: false when it is not one. */
bool bench_parse_size(const char *s, size_t min, size_t max, size_t *out);

#endif /* LAYER_BENCH_UTIL_H */
