/*
 * Completion queue: util's CQ, whose reads run the progress of the endpoints bound to it.
 * The CQ knows its endpoints only as progress hooks (util/progress.h) and their core wait
 * fds as members of its wait set, both added by the endpoint when it binds.
 */
#ifndef LAYER_CQ_H
#define LAYER_CQ_H

#include "layer/domain.h"
#include "util/cq.h"
#include "util/progress.h"

struct layer_cq {
	struct util_cq util;
	struct layer_domain *domain;
	struct util_progress_set progress; /* the bound endpoints' hooks */
};

int layer_cq_open(struct fid_domain *domain, struct fi_cq_attr *attr, struct fid_cq **cq,
		  void *context);

/* The CQ behind fid, or NULL when fid is not one of this provider's CQs. */
struct layer_cq *layer_cq_of(struct fid *fid);

#endif /* LAYER_CQ_H */
