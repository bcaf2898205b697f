/*
 * Event queue: util's EQ. Connection events stay inside the provider, so it carries what
 * the application writes and the insertion events of the FI_EVENT AVs bound to it, whose
 * queued insertions its reads complete: each such AV adds a progress hook (util/progress.h).
 */
#ifndef LAYER_EQ_H
#define LAYER_EQ_H

#include "layer/fabric.h"
#include "util/eq.h"
#include "util/progress.h"

struct layer_eq {
	struct util_eq util;
	struct layer_fabric *fabric;
	struct util_progress_set progress; /* the bound FI_EVENT AVs' hooks */
};

int layer_eq_open(struct fid_fabric *fabric, struct fi_eq_attr *attr, struct fid_eq **eq,
		  void *context);

/* fi_trywait for the provider's CQs, counters and EQs (fabric.c). */
int layer_trywait(struct fid_fabric *fabric, struct fid **fids, int count);

#endif /* LAYER_EQ_H */
