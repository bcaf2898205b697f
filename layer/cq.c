/* Completion queues (cq.h): util's CQ, progress from the hooks of the bound endpoints. */
#include "config.h"

#include <stdlib.h>

#include "layer/cq.h"
#include "layer/nosys.h"

static int layer_cq_close(struct fid *fid)
{
	struct layer_cq *cq = container_of(fid, struct layer_cq, util.cq_fid.fid);
	int ret;

	ret = util_cq_fini(&cq->util);
	if (ret)
		return ret;
	util_progress_set_fini(&cq->progress);
	atomic_fetch_sub(&cq->domain->ref, 1);
	free(cq);
	return 0;
}

static struct fi_ops layer_cq_fi_ops = {
	.size = sizeof(struct fi_ops),
	.close = layer_cq_close,
	.bind = layer_no_bind,
	.control = util_cq_control,
	.ops_open = layer_no_ops_open,
};

struct layer_cq *layer_cq_of(struct fid *fid)
{
	if (!fid || fid->ops != &layer_cq_fi_ops)
		return NULL;
	return container_of(fid, struct layer_cq, util.cq_fid.fid);
}

int layer_cq_open(struct fid_domain *domain_fid, struct fi_cq_attr *attr,
		  struct fid_cq **cq_fid, void *context)
{
	struct layer_domain *domain = container_of(domain_fid, struct layer_domain, domain_fid);
	struct util_progress progress;
	struct layer_cq *cq;
	int ret;

	if (!attr || !cq_fid)
		return -FI_EINVAL;
	cq = calloc(1, sizeof(*cq));
	if (!cq)
		return -FI_ENOMEM;
	/* util checks its own entries; the hooks answer for the cores underneath */
	progress = (struct util_progress) {
		.progress = util_progress_set_run,
		.trywait = util_progress_set_trywait,
		.arg = &cq->progress,
	};
	ret = util_cq_init(&cq->util, attr, domain->is_thread_safe, &progress, context);
	if (ret) {
		free(cq);
		return ret;
	}
	cq->domain = domain;
	cq->util.api_version = domain->fabric->api_version;
	/* The endpoint list changes at bind and close only, which FI_THREAD_DOMAIN serialises. */
	util_progress_set_init(&cq->progress, domain->is_thread_safe);
	cq->util.cq_fid.fid.ops = &layer_cq_fi_ops;
	atomic_fetch_add(&domain->ref, 1);
	*cq_fid = &cq->util.cq_fid;
	return 0;
}
