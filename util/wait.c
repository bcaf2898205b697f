/*
 * Wait set: an epoll fd over the object's eventfd and the owner's fds. Sleeping happens in
 * epoll_wait only; the loop in util_wait_until alternates progress and sleep so that an
 * idle blocking call costs no CPU.
 */
#include "config.h"

#include <errno.h>
#include <sched.h>
#include <stdint.h>
#include <unistd.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>

#include "util/wait.h"

int util_wait_init(struct util_wait *wait)
{
	struct epoll_event ev = { .events = EPOLLIN };
	int ret;

	wait->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (wait->epfd < 0) {
		ret = -errno;
		FI_WARN(util_prov, FI_LOG_CORE, "epoll_create1 failed: %s\n", fi_strerror(-ret));
		return ret;
	}

	wait->signal_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (wait->signal_fd < 0) {
		ret = -errno;
		FI_WARN(util_prov, FI_LOG_CORE, "eventfd failed: %s\n", fi_strerror(-ret));
		goto err_close_epfd;
	}

	ev.data.fd = wait->signal_fd;
	if (epoll_ctl(wait->epfd, EPOLL_CTL_ADD, wait->signal_fd, &ev)) {
		ret = -errno;
		FI_WARN(util_prov, FI_LOG_CORE, "epoll_ctl failed: %s\n", fi_strerror(-ret));
		goto err_close_signal_fd;
	}
	return 0;

err_close_signal_fd:
	close(wait->signal_fd);
	wait->signal_fd = -1;
err_close_epfd:
	close(wait->epfd);
	wait->epfd = -1;
	return ret;
}

void util_wait_fini(struct util_wait *wait)
{
	if (wait->signal_fd >= 0)
		close(wait->signal_fd);
	if (wait->epfd >= 0)
		close(wait->epfd);
	wait->signal_fd = -1;
	wait->epfd = -1;
}

int util_wait_add_fd(struct util_wait *wait, int fd)
{
	struct epoll_event ev = { .events = EPOLLIN, .data.fd = fd };

	if (!epoll_ctl(wait->epfd, EPOLL_CTL_ADD, fd, &ev))
		return 0;
	/* Owners add a core fd per bound endpoint; several may share one core CQ. */
	if (errno == EEXIST)
		return 0;
	return -errno;
}

int util_wait_del_fd(struct util_wait *wait, int fd)
{
	if (epoll_ctl(wait->epfd, EPOLL_CTL_DEL, fd, NULL))
		return -errno;
	return 0;
}

void util_wait_signal(struct util_wait *wait)
{
	uint64_t one = 1;
	ssize_t ret;

	/*
	 * EAGAIN means the counter is at its maximum: the fd is readable already, which is
	 * all a signal has to achieve.
	 */
	do {
		ret = write(wait->signal_fd, &one, sizeof(one));
	} while (ret < 0 && errno == EINTR);
}

void util_wait_reset(struct util_wait *wait)
{
	uint64_t cnt;
	ssize_t ret;

	/* One read returns and clears the whole eventfd counter; EAGAIN means none pending. */
	do {
		ret = read(wait->signal_fd, &cnt, sizeof(cnt));
	} while (ret < 0 && errno == EINTR);
}

int util_wait_wait(struct util_wait *wait, int timeout_ms)
{
	struct epoll_event ev;
	int ret;

	ret = epoll_wait(wait->epfd, &ev, 1, timeout_ms);
	if (ret < 0) {
		ret = -errno;
		if (ret == -FI_EINTR)
			return ret;
		FI_WARN(util_prov, FI_LOG_CORE, "epoll_wait failed: %s\n", fi_strerror(-ret));
		return ret;
	}
	if (ret == 0)
		return -FI_ETIMEDOUT;

	/*
	 * Drain whatever woke us: the signal has done its job, and leaving it set would make
	 * the next sleep return at once. Readiness of the owner's fds is theirs to clear
	 * (their progress reads the core queues).
	 */
	util_wait_reset(wait);
	return 0;
}

int util_wait_until(struct util_wait *wait, const struct util_progress *p, int timeout_ms,
		    bool (*done)(void *arg), void *arg)
{
	uint64_t start_ms = util_now_ms();
	int left, ret;

	for (;;) {
		util_progress_run(p);
		if (done(arg))
			return 0;

		left = util_timeout_left(timeout_ms, start_ms);
		if (left == 0)
			return -FI_EAGAIN;

		if (!wait) {
			sched_yield();
			continue;
		}

		/* Events already pending below us: progress again instead of sleeping. */
		if (p->trywait && p->trywait(p->arg))
			continue;

		ret = util_wait_wait(wait, left);
		/*
		 * A timeout or an interrupting signal goes round once more: progress and the
		 * done check get a last chance, and the remaining time decides.
		 */
		if (ret && ret != -FI_ETIMEDOUT && ret != -FI_EINTR)
			return ret;
	}
}

int util_wait_obj_resolve(enum fi_wait_obj requested, enum fi_wait_obj *resolved)
{
	switch (requested) {
	case FI_WAIT_NONE:
		*resolved = FI_WAIT_NONE;
		return 0;
	case FI_WAIT_UNSPEC:
	case FI_WAIT_FD:
		/* An fd is also what sread sleeps on best, so UNSPEC costs nothing extra. */
		*resolved = FI_WAIT_FD;
		return 0;
	case FI_WAIT_SET:
	case FI_WAIT_MUTEX_COND:
	case FI_WAIT_YIELD:
	case FI_WAIT_POLLFD:
		FI_INFO(util_prov, FI_LOG_CORE, "wait object %d not supported\n", requested);
		return -FI_ENOSYS;
	default:
		FI_WARN(util_prov, FI_LOG_CORE, "unknown wait object %d\n", requested);
		return -FI_EINVAL;
	}
}

int util_wait_control(struct util_wait *wait, enum fi_wait_obj wait_obj, int command,
		      void *arg, atomic_bool *is_fd_exported)
{
	switch (command) {
	case FI_GETWAIT:
		if (wait_obj == FI_WAIT_NONE)
			return -FI_ENODATA;
		if (!arg)
			return -FI_EINVAL;
		/* Set before handing the fd out, so no update made after this goes unsignalled. */
		if (is_fd_exported)
			atomic_store(is_fd_exported, true);
		*(int *) arg = wait->epfd;
		return 0;
	case FI_GETWAITOBJ:
		if (!arg)
			return -FI_EINVAL;
		*(enum fi_wait_obj *) arg = wait_obj;
		return 0;
	default:
		return -FI_ENOSYS;
	}
}
