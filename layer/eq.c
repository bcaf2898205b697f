/* Event queues (eq.h). */
#include "config.h"

#include <stdlib.h>

#include "layer/eq.h"
#include "layer/nosys.h"

static int layer_eq_close(struct fid *fid)
{
	struct layer_eq *eq = container_of(fid, struct layer_eq, util.eq_fid.fid);
	int ret;

	ret = util_eq_fini(&eq->util);
	if (ret)
		return ret;
	util_progress_set_fini(&eq->progress);
	atomic_fetch_sub(&eq->fabric->ref, 1);
	free(eq);
	return 0;
}

static struct fi_ops layer_eq_fi_ops = {
	.size = sizeof(struct fi_ops),
	.close = layer_eq_close,
	.bind = layer_no_bind,
	.control = util_eq_control,
	.ops_open = layer_no_ops_open,
};

int layer_eq_open(struct fid_fabric *fabric_fid, struct fi_eq_attr *attr,
		  struct fid_eq **eq_fid, void *context)
{
	struct layer_fabric *fabric = container_of(fabric_fid, struct layer_fabric, fabric_fid);
	struct util_progress progress = {
		.progress = util_progress_set_run,
		.trywait = util_progress_set_trywait,
	};
	struct layer_eq *eq;
	int ret;

	if (!attr || !eq_fid)
		return -FI_EINVAL;
	eq = calloc(1, sizeof(*eq));
	if (!eq)
		return -FI_ENOMEM;
	progress.arg = &eq->progress;
	ret = util_eq_init(&eq->util, attr, &progress, context);
	if (ret) {
		free(eq);
		return ret;
	}
	eq->fabric = fabric;
	eq->util.api_version = fabric->api_version;
	util_progress_set_init(&eq->progress, true);
	eq->util.eq_fid.fid.ops = &layer_eq_fi_ops;
	atomic_fetch_add(&fabric->ref, 1);
	*eq_fid = &eq->util.eq_fid;
	return 0;
}
