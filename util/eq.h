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

struct util_eq {
	struct fid_eq eq_fid;
	enum fi_wait_obj wait_obj;  /* FI_WAIT_NONE or FI_WAIT_FD */
	struct util_wait wait;
	struct util_lock lock;
	struct util_dlist events;   /* struct util_eq_event, successes and errors in order */
	struct util_progress progress;
	atomic_int ref;             /* objects bound to this EQ; fini refuses while > 0 */
};

/* -FI_ENOSYS for FI_WAIT_SET / FI_WAIT_MUTEX_COND, -FI_EINVAL for bad attributes. */
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

extern struct fi_ops_eq util_eq_ops;

#endif /* UTIL_EQ_H */
