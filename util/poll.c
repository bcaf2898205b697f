/* Poll sets (util/poll.h). */
#include "config.h"

#include <stdlib.h>

#include "util/poll.h"
#include "util/cntr.h"
#include "util/cq.h"

static atomic_int *util_poll_member_ref(struct fid *fid)
{
	if (fid->fclass == FI_CLASS_CQ)
		return &container_of(fid, struct util_cq, cq_fid.fid)->ref;
	return &container_of(fid, struct util_cntr, cntr_fid.fid)->ref;
}

static void util_poll_member_progress(struct fid *fid)
{
	if (fid->fclass == FI_CLASS_CQ)
		util_progress_run(&container_of(fid, struct util_cq, cq_fid.fid)->progress);
	else
		util_progress_run(&container_of(fid, struct util_cntr, cntr_fid.fid)->progress);
}

/* Has the member something to say? A counter's answer marks its values seen. */
static bool util_poll_member_has_event(struct fid *fid)
{
	if (fid->fclass == FI_CLASS_CQ)
		return util_cq_count(container_of(fid, struct util_cq, cq_fid.fid)) > 0;
	return util_cntr_poll(container_of(fid, struct util_cntr, cntr_fid.fid));
}

static ssize_t util_poll_find(const struct util_poll *poll, const struct fid *fid)
{
	for (size_t i = 0; i < poll->member_cnt; i++) {
		if (poll->members[i] == fid)
			return (ssize_t) i;
	}
	return -1;
}

int util_poll_init(struct util_poll *poll, const struct fi_poll_attr *attr, bool is_thread_safe,
		   void *context)
{
	struct fi_ops *fid_ops = poll->poll_fid.fid.ops;

	/* fi_poll(3): flags are reserved and must be 0. */
	if (attr && attr->flags) {
		FI_WARN(util_prov, FI_LOG_DOMAIN, "poll set flags are reserved, must be 0\n");
		return -FI_EBADFLAGS;
	}
	*poll = (struct util_poll) { 0 };
	poll->poll_fid.fid.fclass = FI_CLASS_POLL;
	poll->poll_fid.fid.context = context;
	poll->poll_fid.fid.ops = fid_ops;
	util_lock_init(&poll->lock, is_thread_safe);
	return 0;
}

int util_poll_fini(struct util_poll *poll)
{
	util_lock_acquire(&poll->lock);
	if (poll->member_cnt) {
		util_lock_release(&poll->lock);
		return -FI_EBUSY;
	}
	util_lock_release(&poll->lock);
	util_lock_fini(&poll->lock);
	free(poll->members);
	poll->members = NULL;
	return 0;
}

int util_poll_add(struct util_poll *poll, struct fid *fid, uint64_t flags)
{
	struct fid **members;
	int ret = 0;

	if (flags)
		return -FI_EBADFLAGS;
	util_lock_acquire(&poll->lock);
	if (util_poll_find(poll, fid) >= 0) {
		ret = -FI_EALREADY;
		goto out;
	}
	if (poll->member_cnt == poll->member_max) {
		members = util_array_grow(poll->members, &poll->member_max, sizeof(*members),
					  poll->member_cnt);
		if (!members) {
			ret = -FI_ENOMEM;
			goto out;
		}
		poll->members = members;
	}
	poll->members[poll->member_cnt++] = fid;
	atomic_fetch_add(util_poll_member_ref(fid), 1);
out:
	util_lock_release(&poll->lock);
	return ret;
}

int util_poll_del(struct fid_poll *poll_fid, struct fid *fid, uint64_t flags)
{
	struct util_poll *poll = container_of(poll_fid, struct util_poll, poll_fid);
	ssize_t i;

	if (flags)
		return -FI_EBADFLAGS;
	if (!fid)
		return -FI_EINVAL;
	util_lock_acquire(&poll->lock);
	i = util_poll_find(poll, fid);
	if (i < 0) {
		util_lock_release(&poll->lock);
		return -FI_EINVAL;
	}
	/* keep the order: the round robin of fi_poll goes through the members as added */
	poll->member_cnt--;
	for (size_t j = (size_t) i; j < poll->member_cnt; j++)
		poll->members[j] = poll->members[j + 1];
	if (poll->next > (size_t) i)
		poll->next--;
	atomic_fetch_sub(util_poll_member_ref(fid), 1);
	util_lock_release(&poll->lock);
	return 0;
}

int util_poll_poll(struct fid_poll *poll_fid, void **context, int count)
{
	struct util_poll *poll = container_of(poll_fid, struct util_poll, poll_fid);
	size_t i, n, found = 0;

	if (count < 0 || (count && !context))
		return -FI_EINVAL;
	util_lock_acquire(&poll->lock);
	for (i = 0; i < poll->member_cnt; i++)
		util_poll_member_progress(poll->members[i]);
	n = poll->member_cnt;
	for (i = 0; i < n && found < (size_t) count; i++) {
		struct fid *fid = poll->members[(poll->next + i) % n];

		if (util_poll_member_has_event(fid))
			context[found++] = fid->context;
	}
	if (n)
		poll->next = (poll->next + i) % n;
	util_lock_release(&poll->lock);
	return (int) found;
}
