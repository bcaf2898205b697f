/* Poll sets (poll.h): members are checked to be this domain's CQs and counters. */
#include "config.h"

#include <stdlib.h>

#include "layer/poll.h"
#include "layer/cntr.h"
#include "layer/cq.h"
#include "layer/nosys.h"

static int layer_poll_close(struct fid *fid)
{
	struct layer_poll *poll = container_of(fid, struct layer_poll, util.poll_fid.fid);
	int ret;

	ret = util_poll_fini(&poll->util);
	if (ret)
		return ret;
	atomic_fetch_sub(&poll->domain->ref, 1);
	free(poll);
	return 0;
}

/* The member's domain, or NULL when fid is neither a CQ nor a counter of this provider. */
static struct layer_domain *layer_poll_member_domain(struct fid *fid)
{
	struct layer_cntr *cntr;
	struct layer_cq *cq;

	cq = layer_cq_of(fid);
	if (cq)
		return cq->domain;
	cntr = layer_cntr_of(fid);
	return cntr ? cntr->domain : NULL;
}

static int layer_poll_add(struct fid_poll *poll_fid, struct fid *fid, uint64_t flags)
{
	struct layer_poll *poll = container_of(poll_fid, struct layer_poll, util.poll_fid);

	if (layer_poll_member_domain(fid) != poll->domain) {
		FI_WARN(&layer_prov, FI_LOG_DOMAIN,
			"fi_poll_add: not a CQ or counter of the poll set's domain\n");
		return -FI_EINVAL;
	}
	return util_poll_add(&poll->util, fid, flags);
}

static struct fi_ops layer_poll_fi_ops = {
	.size = sizeof(struct fi_ops),
	.close = layer_poll_close,
	.bind = layer_no_bind,
	.control = layer_no_control,
	.ops_open = layer_no_ops_open,
};

static struct fi_ops_poll layer_poll_ops = {
	.size = sizeof(struct fi_ops_poll),
	.poll = util_poll_poll,
	.poll_add = layer_poll_add,
	.poll_del = util_poll_del,
};

int layer_poll_open(struct fid_domain *domain_fid, struct fi_poll_attr *attr,
		    struct fid_poll **poll_fid)
{
	struct layer_domain *domain = container_of(domain_fid, struct layer_domain, domain_fid);
	struct layer_poll *poll;
	int ret;

	if (!poll_fid)
		return -FI_EINVAL;
	poll = calloc(1, sizeof(*poll));
	if (!poll)
		return -FI_ENOMEM;
	poll->util.poll_fid.fid.ops = &layer_poll_fi_ops;
	ret = util_poll_init(&poll->util, attr, domain->is_thread_safe, NULL);
	if (ret) {
		free(poll);
		return ret;
	}
	poll->util.poll_fid.ops = &layer_poll_ops;
	poll->domain = domain;
	atomic_fetch_add(&domain->ref, 1);
	*poll_fid = &poll->util.poll_fid;
	return 0;
}
