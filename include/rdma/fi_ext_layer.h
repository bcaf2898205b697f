/*
 * Public extensions of the ofi_layer provider (see fi_layer(7)).
 *
 * 1. The libfabric 1.20 address-vector calls on older headers: fi_av_insert_auth_key,
 *    fi_av_lookup_auth_key, fi_av_set_user_id, the flag FI_AUTH_KEY and the domain value
 *    FI_AV_AUTH_KEY. When <rdma/fi_domain.h> already has them (libfabric >= 1.20) this header
 *    adds nothing to them; otherwise it declares them with upstream's values and calling
 *    convention, over an ops table laid out as upstream's struct fi_ops_av (the three entries
 *    follow av_set). The inline wrappers check the table's size first and return -FI_ENOSYS
 *    from a provider whose table predates them.
 * 2. ofi_layer's authorization-key format, and the endpoint option that counts the peers
 *    and messages refused for their key (FI_OPT_LAYER_AUTH_DROPPED).
 * 3. Reverse lookup (address -> fi_addr) on an ofi_layer AV, through fi_open_ops.
 * 4. The members and key of an AV set, through fi_open_ops.
 * 5. An endpoint's unexpected-message memory, through fi_getopt.
 * 6. The messages an endpoint dropped, through fi_getopt (FI_OPT_LAYER_DROPPED).
 * 7. An endpoint's connections, through fi_getopt (FI_OPT_LAYER_CONN_COUNT).
 * 8. The connections that have rings now, through fi_getopt (FI_OPT_LAYER_RING_COUNT).
 *
 * This header does not depend on the project's config.h: it tests the macros themselves.
 */
#ifndef FI_EXT_LAYER_H
#define FI_EXT_LAYER_H

#include <stddef.h>
#include <stdint.h>

#include <rdma/fabric.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_errno.h>

#ifdef __cplusplus
extern "C" {
#endif

/*
 * struct fi_ops_av as libfabric 1.20 lays it out. ofi_layer's AVs carry this table; on 1.20+
 * headers it is the same layout as struct fi_ops_av.
 */
struct fi_layer_ops_av {
	size_t size;
	int (*insert)(struct fid_av *av, const void *addr, size_t count, fi_addr_t *fi_addr,
		      uint64_t flags, void *context);
	int (*insertsvc)(struct fid_av *av, const char *node, const char *service,
			 fi_addr_t *fi_addr, uint64_t flags, void *context);
	int (*insertsym)(struct fid_av *av, const char *node, size_t nodecnt, const char *service,
			 size_t svccnt, fi_addr_t *fi_addr, uint64_t flags, void *context);
	int (*remove)(struct fid_av *av, fi_addr_t *fi_addr, size_t count, uint64_t flags);
	int (*lookup)(struct fid_av *av, fi_addr_t fi_addr, void *addr, size_t *addrlen);
	const char *(*straddr)(struct fid_av *av, const void *addr, char *buf, size_t *len);
	int (*av_set)(struct fid_av *av, struct fi_av_set_attr *attr, struct fid_av_set **av_set,
		      void *context);
	int (*insert_auth_key)(struct fid_av *av, const void *auth_key, size_t auth_key_size,
			       fi_addr_t *fi_addr, uint64_t flags);
	int (*lookup_auth_key)(struct fid_av *av, fi_addr_t addr, void *auth_key,
			       size_t *auth_key_size);
	int (*set_user_id)(struct fid_av *av, fi_addr_t fi_addr, fi_addr_t user_id,
			   uint64_t flags);
};

/* Domain attribute auth_key_size value that turns AV authorization keys on (1.20). */
#ifndef FI_AV_AUTH_KEY
#define FI_AV_AUTH_KEY SIZE_MAX
#endif

#ifndef FI_AUTH_KEY
/* Flag: the fi_addr is an authorization-key handle from fi_av_insert_auth_key (1.20). */
#define FI_AUTH_KEY (1ULL << 57)

/* Whether the AV's ops table is long enough to hold the entry at offset off. */
static inline int fi_layer_av_has_op(const struct fid_av *av, size_t off)
{
	return av && av->ops && av->ops->size >= off + sizeof(void (*)(void));
}

#define FI_LAYER_AV_OPS_OF(av) ((struct fi_layer_ops_av *) (av)->ops)

/*
 * Inserts an authorization key (the provider's format: for ofi_layer, see below) and returns
 * its handle in *fi_addr. Needs a domain opened with auth_key_size == FI_AV_AUTH_KEY.
 * 0 on success; -FI_EINVAL for a NULL key or fi_addr, a size the provider's format refuses,
 * or flags other than 0; -FI_ENOSYS when the provider does not implement it.
 */
static inline int fi_av_insert_auth_key(struct fid_av *av, const void *auth_key,
					size_t auth_key_size, fi_addr_t *fi_addr, uint64_t flags)
{
	if (!fi_layer_av_has_op(av, offsetof(struct fi_layer_ops_av, insert_auth_key)) ||
	    !FI_LAYER_AV_OPS_OF(av)->insert_auth_key)
		return -FI_ENOSYS;
	return FI_LAYER_AV_OPS_OF(av)->insert_auth_key(av, auth_key, auth_key_size, fi_addr,
						       flags);
}

/*
 * The authorization key of addr (a key handle, or an address inserted with FI_AUTH_KEY),
 * truncated to *auth_key_size bytes; *auth_key_size becomes the full size. 0, -FI_EINVAL
 * for an unknown or removed addr, -FI_ENOSYS when the provider does not implement it.
 */
static inline int fi_av_lookup_auth_key(struct fid_av *av, fi_addr_t addr, void *auth_key,
					size_t *auth_key_size)
{
	if (!fi_layer_av_has_op(av, offsetof(struct fi_layer_ops_av, lookup_auth_key)) ||
	    !FI_LAYER_AV_OPS_OF(av)->lookup_auth_key)
		return -FI_ENOSYS;
	return FI_LAYER_AV_OPS_OF(av)->lookup_auth_key(av, addr, auth_key, auth_key_size);
}

/*
 * On an AV opened with FI_AV_USER_ID: the value completions report as the source of fi_addr
 * (flags 0) or of the key handle fi_addr (flags FI_AUTH_KEY). 0, -FI_EINVAL for an unknown
 * fi_addr, other flags, or an AV opened without FI_AV_USER_ID; -FI_ENOSYS when the provider
 * does not implement it.
 */
static inline int fi_av_set_user_id(struct fid_av *av, fi_addr_t fi_addr, fi_addr_t user_id,
				    uint64_t flags)
{
	if (!fi_layer_av_has_op(av, offsetof(struct fi_layer_ops_av, set_user_id)) ||
	    !FI_LAYER_AV_OPS_OF(av)->set_user_id)
		return -FI_ENOSYS;
	return FI_LAYER_AV_OPS_OF(av)->set_user_id(av, fi_addr, user_id, flags);
}

#endif /* FI_AUTH_KEY */

/*
 * ofi_layer's authorization keys: an opaque byte string of FI_LAYER_AUTH_KEY_MIN_SIZE to
 * FI_LAYER_AUTH_KEY_MAX_SIZE bytes, compared byte for byte, its length included ("ab" and
 * "ab\0" are different keys). fi_av_insert_auth_key refuses any other size with -FI_EINVAL.
 * Each insertion is its own entry with its own handle, as for addresses. Key handles are
 * FI_AV_MAP-like values whatever the AV type, told apart from address fi_addrs by their top
 * byte. fi_av_lookup_auth_key of an address inserted without a key reports a size of 0.
 * A domain opened without auth_key_size == FI_AV_AUTH_KEY, and a named AV, have no keys:
 * fi_av_insert_auth_key and FI_AUTH_KEY insertions there are -FI_EOPNOTSUPP.
 */
#define FI_LAYER_AUTH_KEY_MIN_SIZE 1
#define FI_LAYER_AUTH_KEY_MAX_SIZE 32

/*
 * Endpoint option (fi_getopt, level FI_OPT_ENDPOINT, a uint64_t): how many times the
 * endpoint refused a peer for its authorization key since it was opened: connection
 * requests rejected (MSG cores), HELLOs answered with a refusal and messages dropped (RDM
 * cores). What a refused peer sends is never delivered nor matched. Read only: fi_setopt
 * returns -FI_EOPNOTSUPP. A value well away from libfabric's own options (providers' are
 * negative).
 */
#define FI_OPT_LAYER_AUTH_DROPPED (-0x4c01)

/*
 * Reverse lookup on an ofi_layer AV (fi_av(3) has no call for it):
 *	struct fi_layer_av_ops *ops;
 *	fi_open_ops(&av->fid, FI_LAYER_AV_OPS, 0, (void **) &ops, NULL);
 *	ops->reverse_lookup(av, &sin, sizeof(sin), &fi_addr);
 * reverse_lookup returns 0 and the fi_addr of the lowest entry holding addr (inserted without
 * an authorization key), -FI_ENODATA when no entry holds it, -FI_EINVAL when addr is not an
 * address of the AV's format or addrlen is too short for one.
 * reverse_lookupv does the same for count addresses, addrlen bytes apart, at once (their
 * cache misses overlap): fi_addr[i] is FI_ADDR_NOTAVAIL for an address not in the AV or not
 * of its format. It returns 0, or -FI_EINVAL for NULL arrays or an addrlen too short.
 */
#define FI_LAYER_AV_OPS "ofi_layer_av"

struct fi_layer_av_ops {
	size_t size;
	int (*reverse_lookup)(struct fid_av *av, const void *addr, size_t addrlen,
			      fi_addr_t *fi_addr);
	int (*reverse_lookupv)(struct fid_av *av, const void *addrs, size_t addrlen,
			       size_t count, fi_addr_t *fi_addr);
};

/*
 * The members of an ofi_layer AV set in order, and its communication key (fi_av_set(3) has
 * no call to read them):
 *	struct fi_layer_av_set_ops *ops;
 *	fi_open_ops(&set->fid, FI_LAYER_AV_SET_OPS, 0, (void **) &ops, NULL);
 *	ops->members(set, addrs, &count);
 * Both calls follow fi_av_lookup's buffer convention: *count (*key_size) is the room in the
 * buffer on input and the full size on output; they return 0 when everything fitted,
 * -FI_ETOOSMALL when the buffer held only the first part (a size query passes 0 and may pass
 * NULL), -FI_EINVAL for a NULL count or size, or a set that is not ofi_layer's.
 */
#define FI_LAYER_AV_SET_OPS "ofi_layer_av_set"

struct fi_layer_av_set_ops {
	size_t size;
	int (*members)(struct fid_av_set *set, fi_addr_t *addrs, size_t *count);
	int (*comm_key)(struct fid_av_set *set, void *key, size_t *key_size);
};

/*
 * Endpoint option (fi_getopt, level FI_OPT_ENDPOINT, a struct fi_layer_unexp_stats): what the
 * unexpected messages of the endpoint hold, against the bound FI_OFI_LAYER_UNEXP_MAX
 * (fi_layer(7) says how it is kept):
 *	struct fi_layer_unexp_stats stats;
 *	size_t len = sizeof(stats);
 *	fi_getopt(&ep->fid, FI_OPT_ENDPOINT, FI_OPT_LAYER_UNEXP_STATS, &stats, &len);
 * Returns 0 and fills stats; -FI_ETOOSMALL with *optlen set to the size needed when *optlen
 * is smaller; -FI_EINVAL for a NULL optval or optlen. Read only: fi_setopt returns
 * -FI_EOPNOTSUPP.
 */
#define FI_OPT_LAYER_UNEXP_STATS (-0x4c02)

struct fi_layer_unexp_stats {
	size_t bytes;        /* held now by unexpected messages, claimed ones included */
	size_t max_bytes;    /* the most held at once since the endpoint was opened */
	size_t msg_cnt;      /* unexpected messages held now */
	size_t limit;        /* the bound: FI_OFI_LAYER_UNEXP_MAX */
	size_t buf_bytes;    /* what a message kept in its receive buffer counts */
	size_t record_bytes; /* what a message kept as a header record counts */
	uint64_t stall_cnt;  /* receive buffers held back from the core past the bound */
	uint64_t pace_cnt;   /* requests to pace sent to senders */
};

/*
 * Endpoint option (fi_getopt, level FI_OPT_ENDPOINT, an int): 1 when the core places each
 * message's payload straight into the matching receive's buffer (direct receive: libfabric
 * 1.17's tcp, FI_OFI_LAYER_DIRECT_RECV), 0 when messages land in bounce buffers first.
 * -FI_ETOOSMALL with *optlen set when *optlen is smaller than an int; -FI_EINVAL for a NULL
 * optval or optlen. Read only: fi_setopt returns -FI_EOPNOTSUPP.
 */
#define FI_OPT_LAYER_DIRECT_RECV (-0x4c03)

/*
 * The messages an endpoint dropped, as a uint64_t: malformed ones (fi_layer(7), PROTOCOL),
 * ones from a source its core cannot name, and acknowledgements of no send. Each kind is
 * logged as a warning the first time, at info level after that; this says how many:
 *	uint64_t cnt;
 *	size_t len = sizeof(cnt);
 *	fi_getopt(&ep->fid, FI_OPT_ENDPOINT, FI_OPT_LAYER_DROPPED, &cnt, &len);
 * Errors and read-only as FI_OPT_LAYER_AUTH_DROPPED.
 */
#define FI_OPT_LAYER_DROPPED (-0x4c04)

/*
 * The endpoint's connections, as a uint64_t: over a MSG core the core endpoints it holds
 * connected or connecting, one per peer endpoint it talks with (both ways) and one more to
 * itself when it sends to itself; over an RDM core the (peer, key) channels it uses.
 *	uint64_t cnt;
 *	size_t len = sizeof(cnt);
 *	fi_getopt(&ep->fid, FI_OPT_ENDPOINT, FI_OPT_LAYER_CONN_COUNT, &cnt, &len);
 * Errors and read-only as FI_OPT_LAYER_AUTH_DROPPED.
 */
#define FI_OPT_LAYER_CONN_COUNT (-0x4c05)

/*
 * The endpoint's connections that hold a ring now (fi_layer(7), Rings: over a connected core
 * that writes, busy connections earn them and idle ones give them back), as a uint64_t: the
 * regions the endpoint lends, offered or in use; 0 over other cores.
 *	uint64_t cnt;
 *	size_t len = sizeof(cnt);
 *	fi_getopt(&ep->fid, FI_OPT_ENDPOINT, FI_OPT_LAYER_RING_COUNT, &cnt, &len);
 * Errors and read-only as FI_OPT_LAYER_AUTH_DROPPED.
 */
#define FI_OPT_LAYER_RING_COUNT (-0x4c06)

#ifdef __cplusplus
}
#endif

#endif /* FI_EXT_LAYER_H */
