/* Clock, pipes, pinning, medians and option numbers for the benchmark programs (bench_util.h). */
#include "config.h"

#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <stdbool.h>
#include <time.h>
#include <unistd.h>

#include "bench_util.h"

double now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

int write_all(int fd, const void *buf, size_t len)
{
	const char *p = buf;

	while (len) {
		ssize_t n = write(fd, p, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		p += n;
		len -= (size_t) n;
	}
	return 0;
}

int read_all(int fd, void *buf, size_t len)
{
	char *p = buf;

	while (len) {
		ssize_t n = read(fd, p, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		p += n;
		len -= (size_t) n;
	}
	return 0;
}

void bench_pin(const char *prog, int cpu)
{
	cpu_set_t set;

	if (cpu < 0)
		return;
	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	if (sched_setaffinity(0, sizeof(set), &set))
		fprintf(stderr, "%s: sched_setaffinity(%d): %s (not pinned)\n", prog, cpu,
			strerror(errno));
}

static int bench_cmp_double(const void *a, const void *b)
{
	double x = *(const double *) a, y = *(const double *) b;

	return (x > y) - (x < y);
}

double bench_median(double *v, int n)
{
	qsort(v, (size_t) n, sizeof(v[0]), bench_cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

bool bench_parse_ulong(const char *s, unsigned long min, unsigned long max, unsigned long *out)
{
	char *end;
	unsigned long v;

	errno = 0;
	v = strtoul(s, &end, 10);
	if (errno || end == s || *end || s[0] == '-' || v < min || v > max)
		return false;
	*out = v;
	return true;
}

bool bench_parse_size(const char *s, size_t min, size_t max, size_t *out)
{
	unsigned long long v;
	unsigned shift = 0;
	char *end;

	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || end == s || s[0] == '-')
		return false;
	switch (*end) {
	case 'k':
	case 'K':
		shift = 10;
		break;
	case 'm':
	case 'M':
		shift = 20;
		break;
	case 'g':
	case 'G':
		shift = 30;
		break;
	}
	if (shift)
		end++;
	if (*end || v > (unsigned long long) max >> shift || v << shift < min)
		return false;
	*out = (size_t) (v << shift);
	return true;
}

static void bench_short_name(const char *prov, char *buf, size_t len)
{
	const char *p = strrchr(prov, ';');

	p = p ? p + 1 : prov;
	if (!strncmp(p, "ofi_", 4) && p[4])
		p += 4;
	snprintf(buf, len, "%s", p);
}

void bench_prov_names(const char *const *provs, int n, char names[][BENCH_NAME_LEN])
{
	bool clash = false;

	for (int p = 0; p < n; p++)
		bench_short_name(provs[p], names[p], BENCH_NAME_LEN);
	for (int p = 0; p < n; p++)
		for (int q = p + 1; q < n; q++)
			clash = clash || !strcmp(names[p], names[q]);
	if (clash)
		for (int p = 0; p < n; p++)
			snprintf(names[p], BENCH_NAME_LEN, "%s", provs[p]);
}
