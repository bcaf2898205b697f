/*
 * Registration map: what a target checks before a peer's RMA or atomic touches its memory.
 * Each application registration is an entry under its key, with its ranges and access; a
 * peer's request names a key, an address and a length, and util_mr_map_get checks that the
 * whole range lies inside that registration, that the registration grants the access, and
 * gives the local memory the range covers. A request that fails any check touches nothing.
 *
 * Addresses as fi_mr(3) defines them: with FI_MR_VIRT_ADDR a peer names the target's virtual
 * addresses (the first iov's address plus the offset into the region), without it offsets
 * from 0. A registration of several iovs is one region, the iovs end to end.
 *
 * Keys: with FI_MR_PROV_KEY the map hands out keys (never reused while the map lives), else
 * the application's requested key, refused with -FI_ENOKEY while another entry holds it.
 *
 * An entry in use by a transfer is counted: removing it (fi_close of the MR) takes it out of
 * every later lookup at once, and frees it when the last user puts it back.
 *
 * Not thread safe: the owner holds its lock around every call.
 */
#ifndef UTIL_MR_MAP_H
#define UTIL_MR_MAP_H

#include <stdbool.h>
#include <sys/uio.h>
#include <uthash.h>

#include <rdma/fi_domain.h>

#include "util/util.h"

struct util_mr_map_entry {
	UT_hash_handle hh;  /* map->entries, by key */
	uint64_t key;
	uint64_t access;    /* the registration's access flags */
	uint64_t base;      /* the address a peer names the first byte by */
	size_t len;         /* bytes in all iovs */
	size_t iov_cnt;
	size_t ref;         /* transfers using it, plus one while it is in the map */
	void *context;      /* the owner's (its MR object) */
	struct iovec iov[]; /* the registered ranges, in order */
};

struct util_mr_map {
	struct util_mr_map_entry *entries; /* entries still in the map (uthash) */
	bool is_virt_addr;                 /* FI_MR_VIRT_ADDR */
	bool is_prov_key;                  /* FI_MR_PROV_KEY */
	uint64_t next_key;                 /* FI_MR_PROV_KEY: the next key handed out */
	size_t entry_cnt;
};

/* mr_mode: the domain's; only FI_MR_VIRT_ADDR and FI_MR_PROV_KEY matter here. */
void util_mr_map_init(struct util_mr_map *map, uint64_t mr_mode);
/* Frees the entries still in the map; none may be in use by a transfer. */
void util_mr_map_fini(struct util_mr_map *map);

/*
 * Enters a registration: 0 and *entry (holding the map's reference); -FI_EINVAL for a NULL
 * iov array with a count, a NULL base with a length, a range that wraps around, or a non-zero
 * offset (fi_mr(3): reserved); -FI_ENOKEY when the requested key is taken; -FI_ENOMEM.
 */
int util_mr_map_insert(struct util_mr_map *map, const struct fi_mr_attr *attr, void *context,
		       struct util_mr_map_entry **entry);
/* Takes the entry out of the map; it is freed now, or when its last user puts it. */
void util_mr_map_remove(struct util_mr_map *map, struct util_mr_map_entry *entry);

/*
 * A peer's request: len bytes at addr under key, for access (FI_REMOTE_READ, FI_REMOTE_WRITE,
 * or both for an atomic that fetches). On success (0) iov[0..*iov_cnt) is the local memory in
 * order (*iov_cnt in: the room, out: the segments used; 0 for len 0) and *entry is held until
 * util_mr_map_put. Errors: -FI_ENOKEY (no entry has the key: never registered, or closed),
 * -FI_EACCES (the registration lacks access, or the range is not wholly inside it),
 * -FI_ETOOSMALL (the range covers more iovs than *iov_cnt).
 */
int util_mr_map_get(struct util_mr_map *map, uint64_t key, uint64_t addr, size_t len,
		    uint64_t access, struct iovec *iov, size_t *iov_cnt,
		    struct util_mr_map_entry **entry);
void util_mr_map_put(struct util_mr_map *map, struct util_mr_map_entry *entry);

/* The entry under key, or NULL (no reference taken). */
struct util_mr_map_entry *util_mr_map_find(struct util_mr_map *map, uint64_t key);

#endif /* UTIL_MR_MAP_H */
