/*
 * Memory registration: the application's registrations (fi_mr_reg and friends, passed to the
 * core), and the provider's own of rendezvous send buffers, which peers read with the core's
 * RMA (proto/rndv.c). Those come from a registration cache (util/mr_cache.h): a buffer sent
 * again is registered once. The cache is used only over cores whose registrations name
 * addresses without pinning memory (tcp, net, sockets, shm, udp), where a registration kept
 * after its send stays right whatever the application does with the memory; over any other
 * core each rendezvous send registers and releases its buffer. FI_OFI_LAYER_MR_CACHE_SIZE
 * sets how many unused registrations are kept.
 *
 * Registrations are serialised here, whatever the core's threading says: the core domain is
 * shared by every endpoint of the domain, and each endpoint locks only itself. net (1.17)
 * grants FI_THREAD_SAFE but closes a registration without any lock, while it registers and,
 * in its progress, looks up the keys of incoming reads under its own: two endpoints
 * registering and releasing rendezvous buffers at once corrupt its key map (a registration
 * fails with -FI_ENOKEY, a peer's read of a live buffer fails with "unknown key"). So the
 * lock covers every core registration and close, and the core progress of RDM endpoints
 * (core/core_rdm.c), where incoming reads are served.
 */
#ifndef LAYER_MR_H
#define LAYER_MR_H

#include <stdatomic.h>
#include <rdma/fi_domain.h>

#include "layer/layer.h"
#include "util/mr_cache.h"
#include "util/mr_map.h"

struct layer_domain;

/* What a domain keeps of the core's registrations. */
struct layer_mr_domain {
	struct util_lock lock;         /* every core registration and close (see the top) */
	_Atomic uint64_t next_key;     /* keys of the provider's own registrations */
	struct util_mr_cache cache;    /* rendezvous registrations; under lock */
	struct util_mr_map map;        /* the application's registrations, as peers' RMA
					* requests name them (rma/); under lock */
	bool is_soft;                  /* the core has no RMA (datagram cores): rendezvous
					* registrations are entries of rndv_map, and the
					* datagram transport serves peers' reads from it */
	struct util_mr_map rndv_map;   /* is_soft: rendezvous registrations; under lock */
};

/* A rendezvous registration, from the cache: its core registration is entry->handle. */
typedef struct util_mr_cache_entry layer_rndv_reg_t;

void layer_mr_domain_init(struct layer_domain *domain);
void layer_mr_domain_fini(struct layer_domain *domain);

/* fi_mr_reg, fi_mr_regv, fi_mr_regattr. */
extern struct fi_ops_mr layer_mr_ops;

/*
 * A peer's RMA request for len bytes at addr under key, checked against the application's
 * registrations (util_mr_map_get under the lock): 0 with the local memory in iov and the entry
 * held (layer_mr_target_put), or -FI_ENOKEY / -FI_EACCES / -FI_ETOOSMALL.
 */
int layer_mr_target_get(struct layer_domain *domain, uint64_t key, uint64_t addr, size_t len,
			uint64_t access, struct iovec *iov, size_t *iov_cnt,
			struct util_mr_map_entry **entry);
/*
 * The transfer is done with entry. done: FI_REMOTE_WRITE or FI_REMOTE_READ when the peer's
 * access is over and succeeded, for the counter the application bound to that region
 * (fi_mr_bind) to count it; 0 otherwise.
 */
void layer_mr_target_put(struct layer_domain *domain, struct util_mr_map_entry *entry,
			 uint64_t done);
/*
 * Direct RMA (rma/grant.h): how the core names entry's region (held by the caller), when
 * peers may reach it with the core's own RMA: one range, registered with the core, open, no
 * counter bound. True with the core's key and the core's address of its first byte; the
 * region is marked granted (its close and fi_mr_bind revoke it: layer_domain_revoke).
 */
bool layer_mr_core_name(struct layer_domain *domain, struct util_mr_map_entry *entry,
			uint64_t *core_key, uint64_t *core_addr);
/* Counts a peer's access to entry's region now (a read, as its answer goes), as above. */
void layer_mr_target_count(struct layer_domain *domain, struct util_mr_map_entry *entry,
			   uint64_t access);

/* A registration of iov (one range) that the core lets peers read: 0 or -FI_E*. */
int layer_mr_rndv_get(struct layer_domain *domain, const struct iovec *iov,
		      layer_rndv_reg_t **reg);
/* The send is done with it (its peer has read it, or never will). */
void layer_mr_rndv_put(struct layer_domain *domain, layer_rndv_reg_t *reg);

/*
 * A registration of the provider's own with the core (core/ring.c's regions), under a key of
 * the provider's part of the key space: 0 or -FI_E*. Closed with layer_mr_core_close.
 */
int layer_mr_core_reg(struct layer_domain *domain, void *buf, size_t len, uint64_t access,
		      struct fid_mr **mr);
void layer_mr_core_close(struct layer_domain *domain, struct fid_mr *mr);
/*
 * Over a core without RMA: a peer's read of len bytes at addr under key, checked against the
 * rendezvous registrations: 0 with the memory in iov and the entry held, or -FI_ENOKEY /
 * -FI_EACCES / -FI_ETOOSMALL.
 */
int layer_mr_rndv_lookup(struct layer_domain *domain, uint64_t key, uint64_t addr, size_t len,
			 struct iovec *iov, size_t *iov_cnt, struct util_mr_map_entry **entry);
void layer_mr_rndv_release(struct layer_domain *domain, struct util_mr_map_entry *entry);

static inline uint64_t layer_mr_rndv_key(const layer_rndv_reg_t *reg)
{
	return fi_mr_key((struct fid_mr *) reg->handle);
}

#endif /* LAYER_MR_H */
