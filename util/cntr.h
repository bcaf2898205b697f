/*
 * Counter object: implements struct fi_ops_cntr (read, readerr, add, set, wait, adderr,
 * seterr) with atomics, an FI_WAIT_FD wait set, and the owner's progress hook run by
 * read, readerr and wait. The owner embeds struct util_cntr first and sets cntr_fid.fid.ops.
 */
#ifndef UTIL_CNTR_H
#define UTIL_CNTR_H

#include <stdatomic.h>
#include <rdma/fi_domain.h>

#include "util/util.h"
#include "util/wait.h"

struct util_cntr {
	struct fid_cntr cntr_fid;
	enum fi_wait_obj wait_obj;  /* FI_WAIT_NONE or FI_WAIT_FD */
	struct util_wait wait;
	_Atomic uint64_t cnt;
	_Atomic uint64_t err;
	struct util_progress progress;
	atomic_int ref;
};

int util_cntr_init(struct util_cntr *cntr, const struct fi_cntr_attr *attr,
		   const struct util_progress *progress, void *context);
int util_cntr_fini(struct util_cntr *cntr);

/* Provider-side increments (wake up waiters). */
void util_cntr_inc(struct util_cntr *cntr);
void util_cntr_inc_err(struct util_cntr *cntr);

int util_cntr_control(struct fid *fid, int command, void *arg);

extern struct fi_ops_cntr util_cntr_ops;

#endif /* UTIL_CNTR_H */
