/*
 * Event queues: util's EQ. Connection events stay inside the provider (it manages its own
 * connections), so the EQ carries what the application writes and the insertion events of
 * the FI_EVENT AVs bound to it, which reading it completes.
 */
#include "config.h"

#include <stdlib.h>

#include "layer/layer.h"
#include "layer/av.h"

/* Reading the EQ completes the queued insertions of the FI_EVENT AVs bound to it. */
static void layer_eq_progress(void *arg)
{
	struct layer_eq *eq = arg;
	struct util_dlist *item;

	util_lock_acquire(&eq->av_lock);
	util_dlist_foreach(&eq->avs, item)
		layer_av_progress(container_of(item, struct layer_av, eq_link));
	util_lock_release(&eq->av_lock);
}

/* Not the time to sleep while an AV bound to the EQ has insertions queued. */
static int layer_eq_trywait(void *arg)
{
	struct layer_eq *eq = arg;
	struct util_dlist *item;
	int ret = 0;

	util_lock_acquire(&eq->av_lock);
	util_dlist_foreach(&eq->avs, item) {
		if (layer_av_has_pending(container_of(item, struct layer_av, eq_link))) {
			ret = -FI_EAGAIN;
			break;
		}
	}
	util_lock_release(&eq->av_lock);
	return ret;
}

static int layer_eq_close(struct fid *fid)
{
	struct layer_eq *eq = container_of(fid, struct layer_eq, util.eq_fid.fid);
	int ret;

	ret = util_eq_fini(&eq->util);
	if (ret)
		return ret;
	util_lock_fini(&eq->av_lock);
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
		.progress = layer_eq_progress,
		.trywait = layer_eq_trywait,
	};
	struct layer_eq *eq;
	int ret;

	if (!attr || !eq_fid)
		return -FI_EINVAL;
	eq = calloc(1, sizeof(*eq));
	if (!eq)
		return -FI_ENOMEM;
	progress.arg = eq;
	ret = util_eq_init(&eq->util, attr, &progress, context);
	if (ret) {
		free(eq);
		return ret;
	}
	eq->fabric = fabric;
	eq->util.api_version = fabric->api_version;
	util_lock_init(&eq->av_lock, true);
	util_dlist_init(&eq->avs);
	eq->util.eq_fid.fid.ops = &layer_eq_fi_ops;
	atomic_fetch_add(&fabric->ref, 1);
	*eq_fid = &eq->util.eq_fid;
	return 0;
}
