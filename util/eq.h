/*
 * Event queue object: implements struct fid_eq (read with FI_PEEK, readerr, write, sread,
 * strerror) over a list of events and a list of error entries, with an FI_WAIT_FD wait set.
 * Progress is manual: reads call the owner's progress hook first (asynchronous AV inserts
 * complete that way). The owner embeds struct util_eq first and sets eq_fid.fid.ops.
 */
#ifndef UTIL_EQ_H
#define UTIL_EQ_H

#include <stdatomic.h>
#include <rdma/fi_eq.h>

#include "util/util.h"
#include "util/list.h"
#include "util/lock.h"
#include "util/wait.h"

/*
 * util_eq_write flag marking an error event. libfabric 1.17 has no public name for it; the
 * bit is one no fi_eq_write flag uses.
 */
#define UTIL_EQ_ERR (1ULL << 60)
#ifndef FI_EQ_ERR
#define FI_EQ_ERR UTIL_EQ_ERR
#endif

struct util_eq {
	struct fid_eq eq_fid;
	enum fi_wait_obj wait_obj;  /* FI_WAIT_NONE or FI_WAIT_FD */
	struct util_wait wait;
	struct util_lock lock;
	struct util_dlist events;   /* struct util_eq_event, successes and errors in order */
	struct util_progress progress;
	atomic_int ref;             /* objects bound to this EQ; fini refuses while > 0 */

	void *last_err;             /* error event whose err_data readerr lent to the application
				     * (fi_eq(3) compatibility mode); freed at the next read */
	uint32_t api_version;       /* fabric's; below 1.5 fi_eq_err_entry is the short one.
				     * util_eq_init sets the header's version, the owner may
				     * overwrite it with fabric_attr->api_version */
};

/*
 * attr may be NULL (defaults). -FI_ENOSYS for FI_WAIT_SET / FI_WAIT_MUTEX_COND / FI_WAIT_YIELD
 * / FI_WAIT_POLLFD, -FI_EBADFLAGS for flags other than FI_WRITE and FI_AFFINITY, -FI_EINVAL
 * for other bad attributes. attr->size is not a limit: the queue grows as needed.
 */
int util_eq_init(struct util_eq *eq, const struct fi_eq_attr *attr,
		 const struct util_progress *progress, void *context);
int util_eq_fini(struct util_eq *eq);

/*
 * Queues an event (flags may hold FI_EQ_ERR, then buf is a struct fi_eq_err_entry whose
 * err_data is copied). Returns len on success, negative -FI_E* otherwise. This is also the
 * fi_eq_write entry point.
 */
ssize_t util_eq_write(struct util_eq *eq, uint32_t event, const void *buf, size_t len,
		      uint64_t flags);

/* Convenience for providers: queues an error entry. */
int util_eq_write_error(struct util_eq *eq, fid_t fid, void *context, uint64_t data, int err,
			int prov_errno);

int util_eq_control(struct fid *fid, int command, void *arg);

/*
 * For fi_trywait: clears the pending signal, then -FI_EAGAIN when events wait (or the owner's
 * trywait hook says so), 0 when sleeping on the fd is safe; -FI_ENODATA without a wait object.
 */
int util_eq_trywait(struct util_eq *eq);

extern struct fi_ops_eq util_eq_ops;

#endif /* UTIL_EQ_H */
