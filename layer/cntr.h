/* Counter: util's counter, whose reads run the progress of the endpoints bound to it (as cq.h). */
#ifndef LAYER_CNTR_H
#define LAYER_CNTR_H

#include "layer/domain.h"
#include "util/cntr.h"
#include "util/progress.h"

struct layer_cntr {
	struct util_cntr util;
	struct layer_domain *domain;
	struct util_progress_set progress; /* the bound endpoints' hooks */
};

int layer_cntr_open(struct fid_domain *domain, struct fi_cntr_attr *attr,
		    struct fid_cntr **cntr, void *context);

/* The counter behind fid, or NULL when fid is not one of this provider's counters. */
struct layer_cntr *layer_cntr_of(struct fid *fid);

#endif /* LAYER_CNTR_H */
