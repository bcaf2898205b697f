/*
 * Fabric: wraps the core's fabric, found again from the fabric attributes libfabric passes;
 * fi_trywait over the provider's CQs, counters and EQs.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "layer/fabric.h"
#include "layer/cntr.h"
#include "layer/cq.h"
#include "layer/domain.h"
#include "layer/eq.h"
#include "layer/nosys.h"

/*
 * fi_trywait: progress first (it may produce entries), then util's check, which also marks
 * the wait fd as handed out so that later writes signal it.
 */
int layer_trywait(struct fid_fabric *fabric, struct fid **fids, int count)
{
	struct layer_cntr *cntr;
	struct layer_cq *cq;
	struct util_eq *eq;
	int i, ret;

	if (!fids || count < 0)
		return -FI_EINVAL;
	for (i = 0; i < count; i++) {
		if (!fids[i])
			return -FI_EINVAL;
		switch (fids[i]->fclass) {
		case FI_CLASS_CQ:
			cq = container_of(fids[i], struct layer_cq, util.cq_fid.fid);
			util_progress_set_run(&cq->progress);
			ret = util_cq_trywait(&cq->util);
			break;
		case FI_CLASS_CNTR:
			cntr = container_of(fids[i], struct layer_cntr, util.cntr_fid.fid);
			util_progress_set_run(&cntr->progress);
			ret = util_cntr_trywait(&cntr->util);
			break;
		case FI_CLASS_EQ:
			eq = container_of(fids[i], struct util_eq, eq_fid.fid);
			util_progress_run(&eq->progress);
			ret = util_eq_trywait(eq);
			break;
		default:
			return -FI_EINVAL;
		}
		if (ret)
			return ret;
	}
	return 0;
}

static int layer_fabric_close(struct fid *fid)
{
	struct layer_fabric *fabric = container_of(fid, struct layer_fabric, fabric_fid.fid);
	int ret;

	if (atomic_load(&fabric->ref))
		return -FI_EBUSY;
	ret = fi_close(&fabric->core_fabric->fid);
	if (ret)
		return ret;
	free(fabric->core_prov_name);
	free(fabric);
	return 0;
}

static struct fi_ops layer_fabric_fi_ops = {
	.size = sizeof(struct fi_ops),
	.close = layer_fabric_close,
	.bind = layer_no_bind,
	.control = layer_no_control,
	.ops_open = layer_no_ops_open,
};

static struct fi_ops_fabric layer_fabric_ops = {
	.size = sizeof(struct fi_ops_fabric),
	.domain = layer_domain_open,
	.passive_ep = layer_no_passive_ep,
	.eq_open = layer_eq_open,
	.wait_open = layer_no_wait_open,
	.trywait = layer_trywait,
};

int layer_fabric_open(struct fi_fabric_attr *attr, struct fid_fabric **fabric_fid,
		      void *context)
{
	struct fi_info *hints, *core_info;
	struct layer_fabric *fabric;
	int ret;

	if (!attr || !fabric_fid)
		return -FI_EINVAL;

	hints = fi_allocinfo();
	if (!hints)
		return -FI_ENOMEM;
	hints->fabric_attr->prov_name = attr->prov_name ? strdup(attr->prov_name) : NULL;
	hints->fabric_attr->name = attr->name ? strdup(attr->name) : NULL;
	ret = layer_get_core_info(LAYER_FI_VERSION, hints, &core_info);
	fi_freeinfo(hints);
	if (ret)
		return ret;

	fabric = calloc(1, sizeof(*fabric));
	if (!fabric) {
		ret = -FI_ENOMEM;
		goto err_free_info;
	}
	fabric->core_prov_name = strdup(core_info->fabric_attr->prov_name);
	if (!fabric->core_prov_name) {
		ret = -FI_ENOMEM;
		goto err_free_fabric;
	}
	ret = fi_fabric(core_info->fabric_attr, &fabric->core_fabric, fabric);
	if (ret)
		goto err_free_fabric;
	fi_freeinfo(core_info);

	fabric->api_version = attr->api_version ? attr->api_version : LAYER_FI_VERSION;
	fabric->fabric_fid.fid.fclass = FI_CLASS_FABRIC;
	fabric->fabric_fid.fid.context = context;
	fabric->fabric_fid.fid.ops = &layer_fabric_fi_ops;
	fabric->fabric_fid.ops = &layer_fabric_ops;
	atomic_init(&fabric->ref, 0);
	*fabric_fid = &fabric->fabric_fid;
	return 0;

err_free_fabric:
	free(fabric->core_prov_name);
	free(fabric);
err_free_info:
	fi_freeinfo(core_info);
	return ret;
}
