/*
 * AV sets (fi_av_set(3)) of ofi_layer: ordered subsets of an AV's fi_addrs, on util's id
 * sets. Members are the fi_addrs the application uses; an AV entry removed later stays a
 * member until it is removed from the set (layer_av_get_addr refuses it when a member is
 * used).
 *
 * fi_av_set_addr hands out a collective address: a tagged handle (LAYER_AV_SET_ADDR_TAG in
 * the top byte, never a valid AV fi_addr nor FI_ADDR_NOTAVAIL) naming the set and its
 * membership at the time of the call; a change of membership makes the next one new.
 */
#ifndef LAYER_AV_SET_H
#define LAYER_AV_SET_H

#include <rdma/fi_collective.h>

#include "layer/av/av.h"
#include "rdma/fi_ext_layer.h"
#include "util/av_set.h"

/* Top byte of every collective address; AV fi_addrs must keep it clear (see av.c). */
#define LAYER_AV_SET_ADDR_TAG 0xa5ULL
#define LAYER_AV_SET_ADDR_SHIFT 56
/* Longest communication key stored with a set. */
#define LAYER_AV_SET_COMM_KEY_MAX 256

struct layer_av_set {
	struct fid_av_set av_set_fid;
	struct layer_av *av;	    /* holds a reference: the AV cannot close under the set */
	struct util_av_set members; /* fi_addrs in order; under av->lock */
	uint64_t flags;		    /* creation flags */
	uint8_t *comm_key;	    /* copied from the attributes; NULL when none */
	size_t comm_key_size;
	fi_addr_t coll_addr;  /* the collective address handed out last */
	bool is_addr_current; /* coll_addr names the current membership */
};

int layer_av_set_open(struct fid_av *av, struct fi_av_set_attr *attr, struct fid_av_set **set,
		      void *context);

/* Whether fi_addr has the shape of a collective address (no lookup: cheap on data paths). */
static inline bool layer_av_set_is_coll_addr(fi_addr_t fi_addr)
{
	return fi_addr >> LAYER_AV_SET_ADDR_SHIFT == LAYER_AV_SET_ADDR_TAG;
}

/*
 * The members in order, copied under the AV's lock into addrs: *count in is the room, out
 * the number of members. 0, or -FI_ETOOSMALL when only the first *count (in) were copied.
 */
int layer_av_set_get_members(struct layer_av_set *set, fi_addr_t *addrs, size_t *count);

#endif /* LAYER_AV_SET_H */
