/*
 * Cross-memory attach (process_vm_readv(2)): one process on a host copies bytes straight out
 * of another's memory, with one system call and one copy, where the system lets it (the same
 * user, or CAP_SYS_PTRACE, and Yama's ptrace_scope permitting).
 *
 * A process tells a peer who it is (struct util_cma_id: its pid, the host and pid namespace
 * it runs in, and where a random cookie of its own lies); the peer checks, with
 * util_cma_reaches, that it is on the same host and in the same pid namespace and that
 * reading the cookie at that pid gives the cookie back: that pid is that process, and this
 * process may read it. Only then may util_cma_read name the pid.
 *
 * Provider-independent; thread safe.
 */
#ifndef UTIL_CMA_H
#define UTIL_CMA_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

#include "util/util.h"

/* A process as peers on its host check it; fixed layout, it travels as it is. */
struct util_cma_id {
	uint64_t pid;
	uint64_t pid_ns;               /* the inode of its pid namespace */
	uint64_t cookie_addr;          /* where cookie lies in its memory */
	uint64_t cookie;               /* random, chosen once per process */
	uint8_t boot_id[16];           /* the host's boot (/proc/sys/kernel/random/boot_id) */
};

/* The most iovs util_cma_read takes on either side. */
#define UTIL_CMA_IOV_MAX 16

/* This process's identity: 0, or -FI_ENOSYS when the host cannot say who it is. */
int util_cma_self(struct util_cma_id *id);
/* Whether this process can read peer's memory (the checks above). */
bool util_cma_reaches(const struct util_cma_id *peer);
/*
 * Copies len bytes from remote (addresses in the process pid) into local, each list filled
 * in order up to len: 0; -FI_EINVAL (a list shorter than len or longer than
 * UTIL_CMA_IOV_MAX); -FI_EFAULT (an address outside either process's memory); -FI_EPERM (the
 * system does not let this process read pid's memory); -ESRCH (no such process); or
 * another negated errno.
 */
int util_cma_read(pid_t pid, const struct iovec *local, size_t local_cnt,
		  const struct iovec *remote, size_t remote_cnt, size_t len);

#endif /* UTIL_CMA_H */
