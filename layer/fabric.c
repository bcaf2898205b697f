/*
 * Fabric: wraps the core's fabric, found again from the fabric attributes libfabric passes.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "layer/layer.h"

int layer_no_bind(struct fid *fid, struct fid *bfid, uint64_t flags)
{
	return -FI_ENOSYS;
}

int layer_no_control(struct fid *fid, int command, void *arg)
{
	return -FI_ENOSYS;
}

int layer_no_ops_open(struct fid *fid, const char *name, uint64_t flags, void **ops,
		      void *context)
{
	return -FI_ENOSYS;
}

static int layer_no_passive_ep(struct fid_fabric *fabric, struct fi_info *info,
			       struct fid_pep **pep, void *context)
{
	return -FI_ENOSYS;
}

static int layer_no_wait_open(struct fid_fabric *fabric, struct fi_wait_attr *attr,
			      struct fid_wait **waitset)
{
	return -FI_ENOSYS;
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
