/* Fabric: the core's fabric, wrapped. */
#ifndef LAYER_FABRIC_H
#define LAYER_FABRIC_H

#include <stdatomic.h>

#include "layer/layer.h"

struct layer_fabric {
	struct fid_fabric fabric_fid;
	struct fid_fabric *core_fabric;
	char *core_prov_name;          /* e.g. "tcp" */
	uint32_t api_version;          /* the application's, from the fabric attributes */
	atomic_int ref;                /* domains and EQs open on this fabric */
};

int layer_fabric_open(struct fi_fabric_attr *attr, struct fid_fabric **fabric, void *context);

#endif /* LAYER_FABRIC_H */
