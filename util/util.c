/* Small helpers shared by every util/ object. */
#include "config.h"

#include <stdio.h>
#include <time.h>

#include "util/util.h"

uint64_t util_now_ms(void)
{
	struct timespec ts;

	/* CLOCK_MONOTONIC cannot fail on Linux and never jumps with wall-clock changes. */
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t) ts.tv_sec * 1000 + (uint64_t) ts.tv_nsec / 1000000;
}

uint64_t util_coarse_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
	return (uint64_t) ts.tv_sec * 1000000000 + (uint64_t) ts.tv_nsec;
}

const char *util_strerror(int prov_errno, char *buf, size_t len)
{
	const char *str;

	/* Providers disagree on the sign of prov_errno; the text is the same either way. */
	str = fi_strerror(prov_errno < 0 ? -prov_errno : prov_errno);
	if (!buf || !len)
		return str;
	snprintf(buf, len, "%s", str);
	return buf;
}
