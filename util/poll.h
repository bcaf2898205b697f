/*
 * Poll set (fi_poll(3)): a list of CQs and counters that fi_poll progresses and checks in
 * one call. A CQ is reported while it holds entries or errors; a counter when its value or
 * error count moved since the last fi_poll that reported it, fi_cntr_set or fi_cntr_add
 * (util_cntr keeps that mark, poll_cnt / poll_err). A member holds a reference on its CQ or
 * counter, which therefore refuses to close until it is removed; the set refuses to close
 * while it has members.
 *
 * The members must be util CQs and counters: the owner (the provider) checks the fid before
 * util_poll_add, embeds struct util_poll first in its own set and fills its fi_ops_poll with
 * util_poll_poll, its own checking add, and util_poll_del.
 */
#ifndef UTIL_POLL_H
#define UTIL_POLL_H

#include <rdma/fi_eq.h>

#include "util/util.h"
#include "util/lock.h"

struct util_poll {
	struct fid_poll poll_fid;
	struct util_lock lock;     /* members, member_cnt, next */
	struct fid **members;      /* FI_CLASS_CQ or FI_CLASS_CNTR fids, in the order added */
	size_t member_cnt;
	size_t member_max;         /* allocated slots */
	size_t next;               /* first member the next fi_poll reports: a short context
				    * array does not starve the members after it */
};

/* attr may be NULL; its flags are reserved (-FI_EBADFLAGS unless 0). fid.ops is the owner's. */
int util_poll_init(struct util_poll *poll, const struct fi_poll_attr *attr, bool is_thread_safe,
		   void *context);
/* -FI_EBUSY while the set has members, else releases it. */
int util_poll_fini(struct util_poll *poll);
/*
 * Adds a util CQ or counter (the caller checked its class and owner): -FI_EBADFLAGS for flags,
 * -FI_EALREADY when it is a member already, -FI_ENOMEM.
 */
int util_poll_add(struct util_poll *poll, struct fid *fid, uint64_t flags);
/* fi_poll_del: -FI_EBADFLAGS for flags, -FI_EINVAL when fid is not a member. */
int util_poll_del(struct fid_poll *poll_fid, struct fid *fid, uint64_t flags);
/*
 * fi_poll: runs every member's progress, then stores up to count contexts of members with
 * events; returns how many, or -FI_EINVAL for a negative count or a NULL array.
 */
int util_poll_poll(struct fid_poll *poll_fid, void **context, int count);

#endif /* UTIL_POLL_H */
