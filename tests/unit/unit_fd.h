/* File descriptor helpers shared by the unit tests of util/'s waitable objects. */
#ifndef TESTS_UNIT_UNIT_FD_H
#define TESTS_UNIT_UNIT_FD_H

#include <dirent.h>
#include <poll.h>
#include <stdbool.h>

/* Open fds of this process, to check that an object's fini closed what its init opened. */
static inline int count_fds(void)
{
	struct dirent *de;
	DIR *dir;
	int cnt = 0;

	dir = opendir("/proc/self/fd");
	if (!dir)
		return -1;
	while ((de = readdir(dir)))
		if (de->d_name[0] != '.')
			cnt++;
	closedir(dir);
	return cnt;
}

/* Whether fd polls readable right now (no waiting). */
static inline bool is_readable(int fd)
{
	struct pollfd pfd = { .fd = fd, .events = POLLIN };

	return poll(&pfd, 1, 0) == 1 && (pfd.revents & POLLIN);
}

#endif /* TESTS_UNIT_UNIT_FD_H */
