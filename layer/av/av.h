/*
 * Address vectors (fi_av(3) with the 1.20 additions) of ofi_layer. Addresses are the core's
 * endpoint addresses (struct sockaddr_in / sockaddr_in6 for tcp and net, an FI_ADDR_STR name
 * for shm), normalised so equal addresses compare equal bytewise (padding and flow info
 * zeroed; a name zero-padded to LAYER_ADDR_STR_LEN).
 *
 * fi_addr values:
 * - FI_AV_TABLE: the table index (insertion order, lowest free index reused).
 * - FI_AV_MAP: index | check << 32, where check is the slot's generation mixed with a
 *   per-AV salt (LAYER_AV_CHECK_BITS bits, fewer when rx_ctx_bits needs the top bits): a
 *   stale, removed or forged value is refused with -FI_EINVAL.
 * - Authorization-key handles: LAYER_AV_KEY_TAG in the top byte, then check and key index
 *   as for FI_AV_MAP, whatever the AV type.
 * The top byte of an address fi_addr is always clear (AV sets tag theirs there).
 *
 * Locking: av->lock guards the process-local state (and a private table's writers). A named
 * AV's table is guarded by its shared, robust mutex, taken inside av->lock. Lookups of either
 * direction take no lock (see util/av_table.h) unless a writer keeps the table busy.
 */
#ifndef LAYER_AV_H
#define LAYER_AV_H

#include <pthread.h>
#include <string.h>
#include <rdma/fi_domain.h>

#include "layer/layer.h"
#include "layer/addr.h"
#include "layer/domain.h"
#include "layer/eq.h"
#include "util/av_table.h"

/* Generation bits an FI_AV_MAP fi_addr carries (bits 32..55). */
#define LAYER_AV_CHECK_BITS 24
/* Top byte of authorization-key handles (AV sets use 0xa5 for theirs). */
#define LAYER_AV_KEY_TAG 0x4bULL
#define LAYER_AV_TAG_SHIFT 56
/* large enough for any normalised address (sockaddr_in6, a padded FI_ADDR_STR name) */
#define LAYER_AV_ADDR_MAX LAYER_ADDR_MAX

struct layer_av_keys;
struct layer_av_shm;

struct layer_av {
	struct fid_av av_fid;
	struct layer_domain *domain;
	enum fi_av_type type;      /* FI_AV_TABLE or FI_AV_MAP (UNSPEC resolved) */
	uint64_t flags;            /* open flags */
	size_t addrlen;            /* bytes of one (normalised) address */
	struct util_lock lock;     /* process-local state; a private table's writers */
	struct util_av_table table;
	atomic_int ref;            /* endpoints and AV sets bound; close refuses while > 0 */

	/* fi_addr encoding (shared by every process of a named AV) */
	uint32_t check_mask;       /* FI_AV_MAP: generation bits carried; 0 for FI_AV_TABLE */
	uint32_t salt;             /* mixed into the check so that small integers are refused */
	uint32_t index_limit;      /* indices must stay below it (rx_ctx_bits may need bits) */
	int rx_ctx_bits;

	bool is_read_only;         /* FI_READ: a named AV opened for lookups only */
	bool has_user_id_attr;     /* opened with FI_AV_USER_ID: fi_av_set_user_id */
	bool has_auth_keys;        /* domain opened with auth_key_size == FI_AV_AUTH_KEY */

	/* user IDs by index (FI_AV_USER_ID); NULL until first needed */
	fi_addr_t *user_ids;
	size_t user_ids_cap;
	/* authorization keys and, per entry, the key an address was inserted with */
	struct layer_av_keys *keys;
	uint32_t *entry_keys;      /* key index + 1 by entry index, 0: none; NULL until used */
	size_t entry_keys_cap;

	/* FI_EVENT */
	struct layer_eq *eq;
	struct util_progress_hook eq_hook; /* in eq->progress: its reads complete insertions */
	struct util_dlist reqs;     /* struct layer_av_req queued, oldest first */
	pthread_mutex_t req_lock;   /* reqs: insertion calls append, EQ progress completes */

	/* endpoints told of insertions and removals; called without av->lock */
	pthread_mutex_t listener_lock;
	struct util_dlist listeners;

	struct layer_av_shm *shm;   /* named AV; NULL otherwise */
	uint64_t coll_addr_seq;     /* the last collective address an AV set of it handed out */
};

int layer_av_open(struct fid_domain *domain, struct fi_av_attr *attr, struct fid_av **av,
		  void *context);

/* ---- for endpoints (ep/, conn/, proto/); all of them take no AV lock unless noted ---- */

/*
 * Copies the address of a live fi_addr into addr (av->addrlen bytes) and its table index into
 * *index (may be NULL): 0, or -FI_EINVAL when fi_addr is not a live entry (never inserted,
 * removed, stale, forged, an rx index other than 0, or a key handle). Lock-free.
 */
int layer_av_get_addr(struct layer_av *av, fi_addr_t fi_addr, void *addr, size_t *index);
/*
 * Reverse lookup of a (raw, not yet normalised) address: the fi_addr of the lowest live entry
 * holding it that was inserted without an authorization key, or FI_ADDR_NOTAVAIL.
 * Lock-free unless a writer keeps the table busy.
 */
fi_addr_t layer_av_find(struct layer_av *av, const void *addr, size_t addrlen);
/*
 * layer_av_find for count (raw) addresses, addrlen bytes apart, at once: fi_addr[i] is the
 * fi_addr of address i or FI_ADDR_NOTAVAIL. Their cache misses overlap, so a receive path
 * that has a batch of sources in hand pays about one miss for all of them. Lock-free unless
 * a writer keeps the table busy.
 */
void layer_av_find_many(struct layer_av *av, const void *addrs, size_t addrlen, size_t count,
			fi_addr_t *fi_addr);
/*
 * What a completion reports as the source for fi_addr (a live address fi_addr, or
 * FI_ADDR_NOTAVAIL): its user ID when the AV has one for it (FI_AV_USER_ID per insert, or
 * fi_av_set_user_id on an AV opened with FI_AV_USER_ID, where the default is
 * FI_ADDR_NOTAVAIL), otherwise fi_addr itself. Lock-free when the AV has no user IDs.
 */
fi_addr_t layer_av_report_addr(struct layer_av *av, fi_addr_t fi_addr);

/*
 * What an endpoint learns of changes to its AV. on_insert(arg) once entries were inserted (by
 * a call, or by an FI_EVENT AV's progress), on_remove(arg, index) once per removed entry, by
 * table index: each after the change, with no AV lock held, so that it may take its
 * endpoint's lock and call layer_av_* functions. Listeners run under the AV's listener
 * mutex, which add/del take too: do not call add or del while holding a lock a listener
 * takes (lock order: listener mutex, then the endpoint's locks). del returns once no call
 * for the listener is running. A named AV tells the listeners of this process about changes
 * made through this process only. The listener is the caller's memory.
 */
struct layer_av_listener {
	struct util_dlist link;        /* av->listeners */
	void (*on_insert)(void *arg);
	void (*on_remove)(void *arg, size_t index);
	void *arg;
};

void layer_av_add_listener(struct layer_av *av, struct layer_av_listener *listener);
void layer_av_del_listener(struct layer_av *av, struct layer_av_listener *listener);

/*
 * Authorization keys held by an enabled endpoint (fi_av(3): removal of a key an enabled
 * endpoint uses is -FI_EBUSY).
 * layer_av_keys_ref_all: references every key live now (the keys an endpoint is configured
 * with when enabled) and returns their handles in a malloc'd array (*keys NULL and *count 0
 * when there are none): 0 or -FI_ENOMEM. layer_av_keys_unref_all undoes it and frees keys.
 * Each takes av->lock.
 */
int layer_av_keys_ref_all(struct layer_av *av, fi_addr_t **keys, size_t *count);
void layer_av_keys_unref_all(struct layer_av *av, fi_addr_t *keys, size_t count);
/*
 * The key the entry at table index was inserted with: its handle and bytes, or
 * FI_ADDR_NOTAVAIL and len 0 when none. For a sender choosing the key of a connection.
 * Takes av->lock.
 */
void layer_av_index_key(struct layer_av *av, size_t index, fi_addr_t *handle,
			struct layer_key *key);
/*
 * The first of count key handles whose key equals key, or FI_ADDR_NOTAVAIL (a handle no
 * longer live never matches). For a receiver telling which of its keys a peer uses. Takes
 * av->lock.
 */
fi_addr_t layer_av_keys_find(struct layer_av *av, const fi_addr_t *handles, size_t count,
			     const struct layer_key *key);
/*
 * The fi_addr of the lowest live entry holding the (raw) address with the given key handle
 * (FI_ADDR_NOTAVAIL: inserted without a key), or FI_ADDR_NOTAVAIL. For the data path that
 * checks a peer's key.
 */
fi_addr_t layer_av_find_key(struct layer_av *av, const void *addr, size_t addrlen,
			    fi_addr_t key);

/* ---- for AV sets and other code that walks the table (AV lock held) ---- */

/*
 * The fi_addr of a live table index (FI_AV_TABLE: the index; FI_AV_MAP: the handle with its
 * generation).
 */
fi_addr_t layer_av_index_to_fi_addr(const struct layer_av *av, size_t index);

/* ---- internal to layer/av*.c ---- */

static inline fi_addr_t layer_av_encode(const struct layer_av *av, size_t index, uint32_t gen)
{
	return (fi_addr_t) index | (fi_addr_t) ((gen ^ av->salt) & av->check_mask) << 32;
}

/* The index fi_addr names, and the check its generation must pass: false if malformed. */
static inline bool layer_av_decode(const struct layer_av *av, fi_addr_t fi_addr, size_t *index)
{
	/* bits past the check (rx index, tags, FI_ADDR_NOTAVAIL) are never part of an entry */
	if (unlikely(fi_addr >> 32 & ~(fi_addr_t) av->check_mask))
		return false;
	*index = (size_t) (fi_addr & UINT32_MAX);
	return *index < av->index_limit;
}

static inline bool layer_av_check_gen(const struct layer_av *av, fi_addr_t fi_addr, uint32_t gen)
{
	return ((gen ^ av->salt) & av->check_mask) == (uint32_t) (fi_addr >> 32);
}

/*
 * Lock-free: the live index fi_addr names (and its address, if addr): 0 or -FI_EINVAL.
 * Always inlined: it is the whole cost of a lookup and of a send's fi_addr check.
 */
static inline __attribute__((always_inline)) int
layer_av_resolve(const struct layer_av *av, fi_addr_t fi_addr, void *addr, size_t *index)
{
	uint8_t key[LAYER_AV_ADDR_MAX];
	uint32_t gen;
	size_t idx;

	if (unlikely(!layer_av_decode(av, fi_addr, &idx)))
		return -FI_EINVAL;
	if (unlikely(util_av_table_read(&av->table, idx, addr ? key : NULL, &gen)))
		return -FI_EINVAL;
	if (unlikely(!layer_av_check_gen(av, fi_addr, gen)))
		return -FI_EINVAL;
	if (addr)
		memcpy(addr, key, av->addrlen);
	*index = idx;
	return 0;
}

/* Sets the fi_addr layout for av->type, rx_ctx_bits reserved top bits and a salt. */
void layer_av_set_encoding(struct layer_av *av, int rx_ctx_bits, uint32_t salt);

/* The table's writer lock: av->lock, then a named AV's shared mutex. */
void layer_av_write_lock(struct layer_av *av);
void layer_av_write_unlock(struct layer_av *av);

/* Entries (table indices) were removed, or inserted: tells the listeners (listener_lock
 * held, av->lock not). */
void layer_av_notify_removed(struct layer_av *av, const size_t *index, size_t count);
void layer_av_notify_inserted(struct layer_av *av);

/* av_insert.c: the insertion engine shared by synchronous and FI_EVENT insertions. */
struct layer_av_ins {
	const uint8_t *addrs;      /* count raw addresses, av->addrlen bytes apart */
	size_t count;
	fi_addr_t *fi_addr;        /* out; may be NULL (in: user IDs or key handles) */
	const fi_addr_t *ids_in;   /* FI_AV_USER_ID / FI_AUTH_KEY input, or NULL */
	uint64_t flags;
	/* per-address failure (positive errno), i the address's position in the call */
	void (*on_error)(void *arg, size_t i, int err);
	void *arg;
};

/* Inserts addresses [start, start + n) of ins: returns how many went in. Takes the lock. */
size_t layer_av_insert_range(struct layer_av *av, const struct layer_av_ins *ins, size_t start,
			     size_t n);
/*
 * Checks what every insertion call checks (flags, read-only, user IDs, keys); count is the
 * number of addresses the call will insert. 0 or a negative fabric errno.
 */
int layer_av_check_insert(struct layer_av *av, uint64_t flags, const fi_addr_t *fi_addr,
			  void *context, const char *call);
/* Resolves node/service (or an FI_ADDR_STR node) into one address of the AV's format. */
int layer_av_resolve_svc(struct layer_av *av, const char *node, const char *service, void *addr);
/* insertsym's addresses, node-major, into a malloc'd array (*errs: per-address status). */
int layer_av_expand_sym(struct layer_av *av, const char *node, size_t nodecnt,
			const char *service, size_t svccnt, uint8_t **addrs, int **errs);

int layer_av_insert(struct fid_av *av, const void *addr, size_t count, fi_addr_t *fi_addr,
		    uint64_t flags, void *context);
int layer_av_insertsvc(struct fid_av *av, const char *node, const char *service,
		       fi_addr_t *fi_addr, uint64_t flags, void *context);
int layer_av_insertsym(struct fid_av *av, const char *node, size_t nodecnt,
		       const char *service, size_t svccnt, fi_addr_t *fi_addr, uint64_t flags,
		       void *context);
int layer_av_remove(struct fid_av *av, fi_addr_t *fi_addr, size_t count, uint64_t flags);

/* av_event.c: FI_EVENT AVs. */
int layer_av_bind(struct fid *fid, struct fid *bfid, uint64_t flags);
/*
 * Queues an insertion of count addresses (copied; errs, if not NULL, holds per-address
 * failures already known, which are reported and skipped): 0 or a negative fabric errno.
 */
int layer_av_event_queue(struct layer_av *av, const uint8_t *addrs, const int *errs,
			 size_t count, fi_addr_t *fi_addr, uint64_t flags, void *context);
/* The AV's hooks in its EQ's progress set (arg: the AV): completes queued insertions, a
 * bounded amount per call; -FI_EAGAIN while insertions wait (not the time to sleep). */
void layer_av_progress(void *arg);
int layer_av_trywait(void *arg);
/* At close: drops queued insertions and leaves the EQ. */
void layer_av_event_fini(struct layer_av *av);

/* av_auth.c: user IDs and authorization keys. */
int layer_av_keys_init(struct layer_av *av);
void layer_av_keys_fini(struct layer_av *av);
/* Per-entry state of a new entry (user ID, key); lock held. 0 or -FI_ENOMEM. */
int layer_av_entry_added(struct layer_av *av, size_t index, fi_addr_t fi_addr,
			 const fi_addr_t *id_in, uint64_t flags, uint32_t key_index);
/* Per-entry state of removed entries (key use counts); lock held. */
void layer_av_entries_removed(struct layer_av *av, const size_t *index, size_t count);
/* The key index (+1) a key handle names, 0 when it is not a live key: lock held. */
uint32_t layer_av_key_index(struct layer_av *av, fi_addr_t key);
int layer_av_insert_auth_key(struct fid_av *av, const void *auth_key, size_t auth_key_size,
			     fi_addr_t *fi_addr, uint64_t flags);
int layer_av_lookup_auth_key(struct fid_av *av, fi_addr_t addr, void *auth_key,
			     size_t *auth_key_size);
int layer_av_set_user_id(struct fid_av *av, fi_addr_t fi_addr, fi_addr_t user_id,
			 uint64_t flags);
/* fi_av_remove with FI_AUTH_KEY. */
int layer_av_remove_keys(struct layer_av *av, const fi_addr_t *fi_addr, size_t count);

/* av_shm.c: named AVs shared by the processes of a node. */
int layer_av_shm_open(struct layer_av *av, struct fi_av_attr *attr);
void layer_av_shm_close(struct layer_av *av);
void layer_av_shm_lock(struct layer_av *av);
void layer_av_shm_unlock(struct layer_av *av);
/* The fi_addr array every process sees at map_addr: entry index's fi_addr (lock held). */
void layer_av_shm_set_map(struct layer_av *av, size_t index, fi_addr_t fi_addr);

#endif /* LAYER_AV_H */
