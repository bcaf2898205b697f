/* Small helpers shared by every util/ object. */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "util/util.h"

void *util_array_grow(void *array, size_t *cnt, size_t elem_size, size_t index)
{
	size_t new_cnt = UTIL_MAX(*cnt * 2, 64);
	void *grown;

	while (new_cnt <= index)
		new_cnt *= 2;
	if (new_cnt > SIZE_MAX / elem_size)
		return NULL;
	grown = realloc(array, new_cnt * elem_size);
	if (!grown)
		return NULL;
	memset((char *) grown + *cnt * elem_size, 0, (new_cnt - *cnt) * elem_size);
	*cnt = new_cnt;
	return grown;
}

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
