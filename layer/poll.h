/*
 * Poll set (fi_poll(3)): util's poll set over this domain's CQs and counters. fi_poll runs
 * the progress of the endpoints bound to each member, as a read of the member would.
 */
#ifndef LAYER_POLL_H
#define LAYER_POLL_H

#include "layer/domain.h"
#include "util/poll.h"

struct layer_poll {
	struct util_poll util;
	struct layer_domain *domain;
};

int layer_poll_open(struct fid_domain *domain, struct fi_poll_attr *attr,
		    struct fid_poll **pollset);

#endif /* LAYER_POLL_H */
