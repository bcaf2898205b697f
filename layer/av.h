/*
 * Address vectors (fi_av(3)) of ofi_layer. Addresses are the core's endpoint addresses
 * (struct sockaddr_in / sockaddr_in6 for tcp), normalised so equal addresses compare equal
 * bytewise (padding and flow info zeroed).
 */
#ifndef LAYER_AV_H
#define LAYER_AV_H

#include <rdma/fi_domain.h>

#include "layer/layer.h"
#include "util/av_table.h"

struct layer_av {
	struct fid_av av_fid;
	struct layer_domain *domain;
	enum fi_av_type type;      /* FI_AV_TABLE or FI_AV_MAP (UNSPEC resolved) */
	uint64_t flags;            /* open flags */
	size_t addrlen;
	struct util_lock lock;
	struct util_av_table table;
	atomic_int ref;            /* endpoints bound; close refuses while > 0 */
};

int layer_av_open(struct fid_domain *domain, struct fi_av_attr *attr, struct fid_av **av,
		  void *context);

/*
 * For endpoints. layer_av_get_addr copies the address of a live fi_addr into addr
 * (av->addrlen bytes) and its table index into *index: 0, or -FI_EINVAL when fi_addr is not
 * a live entry (never inserted, removed, stale or forged).
 */
int layer_av_get_addr(struct layer_av *av, fi_addr_t fi_addr, void *addr, size_t *index);
/*
 * The fi_addr of a live table index (FI_AV_TABLE: the index; FI_AV_MAP: the handle with its
 * generation). For code that walks the table (AV sets), with the AV lock held.
 */
fi_addr_t layer_av_index_to_fi_addr(const struct layer_av *av, size_t index);
/* Reverse lookup of a (raw, not yet normalised) address: its fi_addr or FI_ADDR_NOTAVAIL. */
fi_addr_t layer_av_find(struct layer_av *av, const void *addr, size_t addrlen);
/* Normalises a sockaddr into out (addrlen bytes): 0 or -FI_EINVAL for a wrong family/size. */
int layer_av_normalize(uint32_t addr_format, const void *addr, size_t addrlen, void *out);

#endif /* LAYER_AV_H */
