/* Counters (cntr.h): util's counter, progress from the hooks of the bound endpoints. */
#include "config.h"

#include <stdlib.h>

#include "layer/cntr.h"
#include "layer/nosys.h"

static int layer_cntr_close(struct fid *fid)
{
	struct layer_cntr *cntr = container_of(fid, struct layer_cntr, util.cntr_fid.fid);
	int ret;

	ret = util_cntr_fini(&cntr->util);
	if (ret)
		return ret;
	util_progress_set_fini(&cntr->progress);
	atomic_fetch_sub(&cntr->domain->ref, 1);
	free(cntr);
	return 0;
}

static struct fi_ops layer_cntr_fi_ops = {
	.size = sizeof(struct fi_ops),
	.close = layer_cntr_close,
	.bind = layer_no_bind,
	.control = util_cntr_control,
	.ops_open = layer_no_ops_open,
};

struct layer_cntr *layer_cntr_of(struct fid *fid)
{
	if (!fid || fid->ops != &layer_cntr_fi_ops)
		return NULL;
	return container_of(fid, struct layer_cntr, util.cntr_fid.fid);
}

int layer_cntr_open(struct fid_domain *domain_fid, struct fi_cntr_attr *attr,
		    struct fid_cntr **cntr_fid, void *context)
{
	struct layer_domain *domain = container_of(domain_fid, struct layer_domain, domain_fid);
	struct util_progress progress;
	struct layer_cntr *cntr;
	int ret;

	if (!cntr_fid)
		return -FI_EINVAL;
	cntr = calloc(1, sizeof(*cntr));
	if (!cntr)
		return -FI_ENOMEM;
	progress = (struct util_progress) {
		.progress = util_progress_set_run,
		.trywait = util_progress_set_trywait,
		.arg = &cntr->progress,
	};
	ret = util_cntr_init(&cntr->util, attr, &progress, context);
	if (ret) {
		free(cntr);
		return ret;
	}
	cntr->domain = domain;
	util_progress_set_init(&cntr->progress, domain->is_thread_safe);
	cntr->util.cntr_fid.fid.ops = &layer_cntr_fi_ops;
	atomic_fetch_add(&domain->ref, 1);
	*cntr_fid = &cntr->util.cntr_fid;
	return 0;
}
