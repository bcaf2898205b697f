/*
 * Address vectors (fi_av(3)): open and close, lookup and straddr, the endpoints' hooks, and
 * the ops tables. Insertion and removal are in av_insert.c, FI_EVENT in av_event.c, user IDs
 * and authorization keys in av_auth.c, named AVs in av_shm.c.
 *
 * Every fi_addr from the application goes through layer_av_resolve(), so an fi_addr never
 * inserted, removed, stale or forged is refused with -FI_EINVAL instead of being followed.
 */
#include "config.h"

#include <arpa/inet.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/random.h>
#include <sys/socket.h>

#include <rdma/fi_ext_layer.h>

#include "layer/av/av.h"
#include "layer/nosys.h"
#include "layer/addr.h"
#include "layer/av/av_set.h"

/* Open flags the AV knows of. */
#define LAYER_AV_OPEN_FLAGS (FI_EVENT | FI_READ | FI_SYMMETRIC | FI_AV_USER_ID)
/* fi_rx_addr() shifts by 64 - rx_ctx_bits: larger values have no meaning */
#define LAYER_AV_MAX_RX_CTX_BITS 64

/*
 * Upstream (1.20+) struct fi_ops_av and ours must agree where both exist, so that programs
 * built against newer headers call the right entries.
 */
#if HAVE_DECL_FI_AUTH_KEY
_Static_assert(offsetof(struct fi_ops_av, insert_auth_key) ==
		       offsetof(struct fi_layer_ops_av, insert_auth_key),
	       "1.20 fi_ops_av layout");
_Static_assert(offsetof(struct fi_ops_av, set_user_id) ==
		       offsetof(struct fi_layer_ops_av, set_user_id),
	       "1.20 fi_ops_av layout");
#endif
_Static_assert(offsetof(struct fi_layer_ops_av, av_set) == offsetof(struct fi_ops_av, av_set),
	       "fi_ops_av prefix");

fi_addr_t layer_av_index_to_fi_addr(const struct layer_av *av, size_t index)
{
	return layer_av_encode(av, index, util_av_table_gen(&av->table, index));
}

void layer_av_write_lock(struct layer_av *av)
{
	util_lock_acquire(&av->lock);
	if (av->shm)
		layer_av_shm_lock(av);
}

void layer_av_write_unlock(struct layer_av *av)
{
	if (av->shm)
		layer_av_shm_unlock(av);
	util_lock_release(&av->lock);
}

/* ---- endpoint hooks ---- */

int layer_av_get_addr(struct layer_av *av, fi_addr_t fi_addr, void *addr, size_t *index)
{
	size_t idx;

	if (unlikely(layer_av_resolve(av, fi_addr, addr, &idx))) {
		FI_WARN(&layer_prov, FI_LOG_AV, "fi_addr %#" PRIx64 " is not in the av\n",
			(uint64_t) fi_addr);
		return -FI_EINVAL;
	}
	if (index)
		*index = idx;
	return 0;
}

/*
 * The lowest live entry holding norm with key index+1 want_key (0: none), from the lock-free
 * lookup, or under the writer lock when the table is too busy for it.
 */
static fi_addr_t layer_av_find_norm(struct layer_av *av, const void *norm, uint32_t want_key)
{
	fi_addr_t found = FI_ADDR_NOTAVAIL;
	size_t index, from = 0;
	uint32_t gen;
	int ret;

	/* the common case: no key ever used, the lowest copy is the answer, no lock */
	if (likely(!av->entry_keys && !want_key)) {
		ret = util_av_table_find(&av->table, norm, &index, &gen);
		if (likely(ret != -FI_EAGAIN))
			return ret ? FI_ADDR_NOTAVAIL : layer_av_encode(av, index, gen);
	}

	/* entry_keys may move under an insertion: walk the copies under the lock */
	layer_av_write_lock(av);
	while (!util_av_table_find_from(&av->table, norm, from, &index, &gen)) {
		if ((av->entry_keys && index < av->entry_keys_cap ? av->entry_keys[index] : 0) ==
		    want_key) {
			found = layer_av_encode(av, index, gen);
			break;
		}
		from = index + 1;
	}
	layer_av_write_unlock(av);
	return found;
}

fi_addr_t layer_av_find(struct layer_av *av, const void *addr, size_t addrlen)
{
	uint8_t norm[LAYER_AV_ADDR_MAX];

	if (layer_addr_normalize(av->domain->addr_format, addr, addrlen, norm))
		return FI_ADDR_NOTAVAIL;
	return layer_av_find_norm(av, norm, 0);
}

/* normalised addresses looked up together by layer_av_find_many */
#define LAYER_AV_FIND_BATCH 16

void layer_av_find_many(struct layer_av *av, const void *addrs, size_t addrlen, size_t count,
			fi_addr_t *fi_addr)
{
	uint8_t norm[LAYER_AV_FIND_BATCH][LAYER_AV_ADDR_MAX];
	size_t index[LAYER_AV_FIND_BATCH], done, n, i;
	uint32_t gen[LAYER_AV_FIND_BATCH];
	int ret[LAYER_AV_FIND_BATCH], bad[LAYER_AV_FIND_BATCH];
	const uint8_t *addr;

	for (done = 0; done < count; done += n) {
		n = UTIL_MIN((size_t) LAYER_AV_FIND_BATCH, count - done);
		for (i = 0; i < n; i++) {
			addr = (const uint8_t *) addrs + (done + i) * addrlen;
			bad[i] = layer_addr_normalize(av->domain->addr_format, addr, addrlen,
						    norm[i]);
			/* an address that is not one: looked up as zeros, reported absent */
			if (bad[i])
				memset(norm[i], 0, sizeof(norm[i]));
		}
		/* keyed entries need the per-entry key: the single lookup handles them */
		if (av->entry_keys ||
		    util_av_table_find_many(&av->table, norm, sizeof(norm[0]), n, index, gen,
					    ret)) {
			for (i = 0; i < n; i++)
				fi_addr[done + i] = bad[i] ? FI_ADDR_NOTAVAIL :
						    layer_av_find_norm(av, norm[i], 0);
			continue;
		}
		for (i = 0; i < n; i++)
			fi_addr[done + i] = bad[i] || ret[i] ? FI_ADDR_NOTAVAIL :
					    layer_av_encode(av, index[i], gen[i]);
	}
}

fi_addr_t layer_av_find_key(struct layer_av *av, const void *addr, size_t addrlen,
			    fi_addr_t key)
{
	uint8_t norm[LAYER_AV_ADDR_MAX];
	uint32_t key_index = 0;

	if (layer_addr_normalize(av->domain->addr_format, addr, addrlen, norm))
		return FI_ADDR_NOTAVAIL;
	if (key != FI_ADDR_NOTAVAIL) {
		util_lock_acquire(&av->lock);
		key_index = layer_av_key_index(av, key);
		util_lock_release(&av->lock);
		if (!key_index)
			return FI_ADDR_NOTAVAIL;
	}
	return layer_av_find_norm(av, norm, key_index);
}

fi_addr_t layer_av_report_addr(struct layer_av *av, fi_addr_t fi_addr)
{
	fi_addr_t report = fi_addr;
	size_t index;

	if (likely(!av->user_ids) && !av->has_user_id_attr)
		return fi_addr;
	if (fi_addr == FI_ADDR_NOTAVAIL || layer_av_resolve(av, fi_addr, NULL, &index))
		return fi_addr;

	util_lock_acquire(&av->lock);
	if (av->user_ids && index < av->user_ids_cap)
		report = av->user_ids[index];
	else if (av->has_user_id_attr)
		report = FI_ADDR_NOTAVAIL;
	util_lock_release(&av->lock);
	return report;
}

void layer_av_add_listener(struct layer_av *av, struct layer_av_listener *listener)
{
	pthread_mutex_lock(&av->listener_lock);
	util_dlist_insert_tail(&listener->link, &av->listeners);
	pthread_mutex_unlock(&av->listener_lock);
}

void layer_av_del_listener(struct layer_av *av, struct layer_av_listener *listener)
{
	pthread_mutex_lock(&av->listener_lock);
	util_dlist_remove(&listener->link);
	pthread_mutex_unlock(&av->listener_lock);
}

void layer_av_notify_removed(struct layer_av *av, const size_t *index, size_t count)
{
	struct layer_av_listener *listener;
	struct util_dlist *item;
	size_t i;

	util_dlist_foreach(&av->listeners, item) {
		listener = container_of(item, struct layer_av_listener, link);
		for (i = 0; i < count; i++)
			listener->on_remove(listener->arg, index[i]);
	}
}

void layer_av_notify_inserted(struct layer_av *av)
{
	struct util_dlist *item;

	util_dlist_foreach(&av->listeners, item)
		container_of(item, struct layer_av_listener, link)->on_insert(
			container_of(item, struct layer_av_listener, link)->arg);
}

/* ---- lookup, straddr ---- */

static int layer_av_lookup(struct fid_av *av_fid, fi_addr_t fi_addr, void *addr, size_t *addrlen)
{
	struct layer_av *av = container_of(av_fid, struct layer_av, av_fid);
	uint8_t buf[LAYER_AV_ADDR_MAX];
	size_t index;

	/* addr may be NULL only for a size query (*addrlen == 0) */
	if (unlikely(!addrlen || (*addrlen && !addr))) {
		FI_WARN(&layer_prov, FI_LOG_AV, "lookup: no %s\n", addrlen ? "buffer" : "addrlen");
		return -FI_EINVAL;
	}
	if (unlikely(layer_av_resolve(av, fi_addr, buf, &index))) {
		FI_WARN(&layer_prov, FI_LOG_AV, "lookup: fi_addr %#" PRIx64 " is not in the av\n",
			(uint64_t) fi_addr);
		return -FI_EINVAL;
	}
	/* a whole sockaddr_in, the common case, without a call */
	if (*addrlen >= sizeof(struct sockaddr_in) && av->addrlen == sizeof(struct sockaddr_in))
		memcpy(addr, buf, sizeof(struct sockaddr_in));
	else if (*addrlen)
		memcpy(addr, buf, UTIL_MIN(*addrlen, av->addrlen));
	*addrlen = av->addrlen;
	return 0;
}

/*
 * The format libfabric itself prints socket addresses in. The result is truncated to *len
 * (and NUL-terminated when *len > 0); *len becomes the size needed, NUL included. NULL when
 * the address is not of the AV's format.
 */
static const char *layer_av_straddr(struct fid_av *av_fid, const void *addr, char *buf, size_t *len)
{
	struct layer_av *av = container_of(av_fid, struct layer_av, av_fid);
	char host[INET6_ADDRSTRLEN];
	struct sockaddr_in6 sin6;
	struct sockaddr_in sin;
	int size;

	if (!addr || !len || (*len && !buf))
		return NULL;

	switch (av->domain->addr_format) {
	case FI_SOCKADDR_IN:
		memcpy(&sin, addr, sizeof(sin));
		if (sin.sin_family != AF_INET ||
		    !inet_ntop(AF_INET, &sin.sin_addr, host, sizeof(host)))
			goto err_format;
		size = snprintf(buf, *len, "fi_sockaddr_in://%s:%u", host, ntohs(sin.sin_port));
		break;
	case FI_SOCKADDR_IN6:
		memcpy(&sin6, addr, sizeof(sin6));
		if (sin6.sin6_family != AF_INET6 ||
		    !inet_ntop(AF_INET6, &sin6.sin6_addr, host, sizeof(host)))
			goto err_format;
		size = snprintf(buf, *len, "fi_sockaddr_in6://[%s]:%u", host,
				ntohs(sin6.sin6_port));
		break;
	case FI_ADDR_STR:
		/* the core's name is its own string form */
		if (!memchr(addr, '\0', LAYER_ADDR_STR_LEN))
			goto err_format;
		size = snprintf(buf, *len, "%s", (const char *) addr);
		break;
	default:
		goto err_format;
	}
	if (size < 0)
		return NULL;
	*len = (size_t) size + 1;
	return buf;

err_format:
	FI_WARN(&layer_prov, FI_LOG_AV, "straddr: address not of the av's format\n");
	return NULL;
}

/* ---- extension: reverse lookup ---- */

/* Any address the common case below does not settle: normalised and looked up in full. */
static __attribute__((noinline)) int
layer_av_reverse_lookup_full(struct layer_av *av, const void *addr, size_t addrlen,
			     fi_addr_t *fi_addr)
{
	uint8_t norm[LAYER_AV_ADDR_MAX];
	fi_addr_t found;

	if (!fi_addr || layer_addr_normalize(av->domain->addr_format, addr, addrlen, norm))
		return -FI_EINVAL;
	found = layer_av_find_norm(av, norm, 0);
	if (found == FI_ADDR_NOTAVAIL)
		return -FI_ENODATA;
	*fi_addr = found;
	return 0;
}

/*
 * The common case, a sockaddr_in of an AV without keyed entries that the table's inline
 * lookup finds, calls nothing, so it saves no registers: back-to-back reverse lookups
 * (FI_SOURCE) overlap their cache misses only when each one's path is short.
 */
static int layer_av_reverse_lookup(struct fid_av *av_fid, const void *addr, size_t addrlen,
				   fi_addr_t *fi_addr)
{
	struct layer_av *av = container_of(av_fid, struct layer_av, av_fid);
	uint8_t norm[sizeof(struct sockaddr_in)];
	size_t index;
	uint32_t gen;

	if (likely(fi_addr && addr && addrlen >= sizeof(struct sockaddr_in) &&
		   av->domain->addr_format == FI_SOCKADDR_IN && !av->entry_keys &&
		   !layer_addr_normalize_in(addr, norm) &&
		   util_av_table_find_fast(&av->table, norm, &index, &gen))) {
		*fi_addr = layer_av_encode(av, index, gen);
		return 0;
	}
	return layer_av_reverse_lookup_full(av, addr, addrlen, fi_addr);
}

static int layer_av_reverse_lookupv(struct fid_av *av_fid, const void *addrs, size_t addrlen,
				    size_t count, fi_addr_t *fi_addr)
{
	struct layer_av *av = container_of(av_fid, struct layer_av, av_fid);

	if ((count && (!addrs || !fi_addr)) || addrlen < av->addrlen)
		return -FI_EINVAL;
	layer_av_find_many(av, addrs, addrlen, count, fi_addr);
	return 0;
}

static struct fi_layer_av_ops layer_av_ext_ops = {
	.size = sizeof(struct fi_layer_av_ops),
	.reverse_lookup = layer_av_reverse_lookup,
	.reverse_lookupv = layer_av_reverse_lookupv,
};

static int layer_av_ops_open(struct fid *fid, const char *name, uint64_t flags, void **ops,
			     void *context)
{
	if (!name || !ops || flags)
		return -FI_EINVAL;
	if (strcmp(name, FI_LAYER_AV_OPS))
		return -FI_ENOSYS;
	*ops = &layer_av_ext_ops;
	return 0;
}

/* ---- close, open ---- */

static void layer_av_free(struct layer_av *av)
{
	layer_av_keys_fini(av);
	if (av->shm)
		layer_av_shm_close(av);
	else
		util_av_table_fini(&av->table);
	free(av->user_ids);
	free(av->entry_keys);
	pthread_mutex_destroy(&av->req_lock);
	pthread_mutex_destroy(&av->listener_lock);
	util_lock_fini(&av->lock);
	free(av);
}

static int layer_av_close(struct fid *fid)
{
	struct layer_av *av = container_of(fid, struct layer_av, av_fid.fid);
	int ref = atomic_load(&av->ref);

	if (ref) {
		FI_WARN(&layer_prov, FI_LOG_AV, "close: %d endpoints or sets still use it\n", ref);
		return -FI_EBUSY;
	}
	layer_av_event_fini(av);
	atomic_fetch_sub(&av->domain->ref, 1);
	layer_av_free(av);
	return 0;
}

static struct fi_ops layer_av_fi_ops = {
	.size = sizeof(struct fi_ops),
	.close = layer_av_close,
	.bind = layer_av_bind,
	.control = layer_no_control,
	.ops_open = layer_av_ops_open,
};

/*
 * The 1.20 layout (see fi_ext_layer.h): programs built against 1.20+ headers find
 * insert_auth_key, lookup_auth_key and set_user_id after av_set.
 */
static struct fi_layer_ops_av layer_av_ops = {
	.size = sizeof(struct fi_layer_ops_av),
	.insert = layer_av_insert,
	.insertsvc = layer_av_insertsvc,
	.insertsym = layer_av_insertsym,
	.remove = layer_av_remove,
	.lookup = layer_av_lookup,
	.straddr = layer_av_straddr,
	.av_set = layer_av_set_open,
	.insert_auth_key = layer_av_insert_auth_key,
	.lookup_auth_key = layer_av_lookup_auth_key,
	.set_user_id = layer_av_set_user_id,
};

/* Validates attr; the resolved type goes to *type. */
static int layer_av_check_attr(const struct fi_av_attr *attr, enum fi_av_type *type)
{
	switch (attr->type) {
	case FI_AV_UNSPEC:
		/* an index is as cheap as a handle here, and TABLE promises more */
		*type = FI_AV_TABLE;
		break;
	case FI_AV_TABLE:
	case FI_AV_MAP:
		*type = attr->type;
		break;
	default:
		FI_WARN(&layer_prov, FI_LOG_AV, "open: unknown av type %d\n", attr->type);
		return -FI_EINVAL;
	}

	if (attr->flags & ~LAYER_AV_OPEN_FLAGS) {
		FI_WARN(&layer_prov, FI_LOG_AV, "open: unknown flags 0x%" PRIx64 "\n",
			(uint64_t) (attr->flags & ~LAYER_AV_OPEN_FLAGS));
		return -FI_EINVAL;
	}
	/* fi_av(3): a read-only AV must be named (and exist) */
	if ((attr->flags & FI_READ) && !attr->name) {
		FI_WARN(&layer_prov, FI_LOG_AV, "open: FI_READ without a name\n");
		return -FI_EINVAL;
	}
	/*
	 * rx_ctx_bits only serves scalable endpoints (fi_av(3)); ours have one receive context,
	 * so the only valid rx_index is 0 and fi_rx_addr(fi_addr, 0, bits) == fi_addr. The top
	 * rx_ctx_bits bits of the fi_addrs handed out stay clear, as promised; an fi_addr built
	 * with another rx_index is refused like any forged one. FI_SYMMETRIC is a hint.
	 */
	if (attr->rx_ctx_bits < 0 || attr->rx_ctx_bits > LAYER_AV_MAX_RX_CTX_BITS) {
		FI_WARN(&layer_prov, FI_LOG_AV, "open: rx_ctx_bits %d out of range\n",
			attr->rx_ctx_bits);
		return -FI_EINVAL;
	}
	return 0;
}

/*
 * The fi_addr layout for rx_ctx_bits reserved bits: the check field shrinks to stay below
 * them (and below the top byte, which tags other kinds of fi_addr); past 32 bits the index
 * itself has fewer bits.
 */
void layer_av_set_encoding(struct layer_av *av, int rx_ctx_bits, uint32_t salt)
{
	int reserved = UTIL_MAX(rx_ctx_bits, 64 - LAYER_AV_TAG_SHIFT);
	int check_bits = UTIL_MIN(LAYER_AV_CHECK_BITS, 32 - reserved);

	av->rx_ctx_bits = rx_ctx_bits;
	av->check_mask = av->type == FI_AV_MAP && check_bits > 0 ?
			 (uint32_t) ((1ULL << check_bits) - 1) : 0;
	av->salt = salt & av->check_mask;
	av->index_limit = rx_ctx_bits > 32 ? (uint32_t) (1ULL << (64 - rx_ctx_bits)) :
			  (uint32_t) UTIL_AV_TABLE_MAX_ENTRIES;
}

int layer_av_open(struct fid_domain *domain_fid, struct fi_av_attr *attr, struct fid_av **av_fid,
		  void *context)
{
	struct layer_domain *domain;
	enum fi_av_type type;
	struct layer_av *av;
	uint32_t salt = 0;
	int ret;

	if (!domain_fid || !attr || !av_fid) {
		FI_WARN(&layer_prov, FI_LOG_AV, "open: missing domain, attributes or av pointer\n");
		return -FI_EINVAL;
	}
	domain = container_of(domain_fid, struct layer_domain, domain_fid);
	if (!domain->addrlen || domain->addrlen != layer_addr_len(domain->addr_format)) {
		FI_WARN(&layer_prov, FI_LOG_AV, "open: unsupported address format %u (len %zu)\n",
			domain->addr_format, domain->addrlen);
		return -FI_EINVAL;
	}
	ret = layer_av_check_attr(attr, &type);
	if (ret)
		return ret;

	av = calloc(1, sizeof(*av));
	if (!av)
		return -FI_ENOMEM;
	util_lock_init(&av->lock, domain->is_thread_safe);
	pthread_mutex_init(&av->listener_lock, NULL);
	pthread_mutex_init(&av->req_lock, NULL);
	util_dlist_init(&av->listeners);
	util_dlist_init(&av->reqs);
	atomic_init(&av->ref, 0);
	av->domain = domain;
	av->type = type;
	av->flags = attr->flags;
	av->addrlen = domain->addrlen;
	av->has_user_id_attr = attr->flags & FI_AV_USER_ID;
	/* fi_av(3): authorization keys belong to domains opened with FI_AV_AUTH_KEY */
	av->has_auth_keys = domain->auth_key_size == FI_AV_AUTH_KEY;

	/* a salt per AV: a handle of one AV is refused by another, small integers by all */
	if (getrandom(&salt, sizeof(salt), 0) != sizeof(salt))
		salt = (uint32_t) (uintptr_t) av ^ (uint32_t) util_now_ms();
	salt |= 1;
	layer_av_set_encoding(av, attr->rx_ctx_bits, salt);

	if (attr->name) {
		/* sets type, encoding and table from the shared AV (and checks they agree) */
		ret = layer_av_shm_open(av, attr);
		if (ret)
			goto err_free;
		type = av->type;
	} else {
		ret = util_av_table_init(&av->table, av->addrlen, attr->count);
		if (ret) {
			FI_WARN(&layer_prov, FI_LOG_AV, "open: no memory for %zu addresses\n",
				attr->count);
			goto err_free;
		}
	}
	ret = layer_av_keys_init(av);
	if (ret)
		goto err_free;
	if (av->has_user_id_attr) {
		av->user_ids_cap = av->table.st->capacity;
		av->user_ids = malloc(av->user_ids_cap * sizeof(*av->user_ids));
		if (!av->user_ids) {
			ret = -FI_ENOMEM;
			goto err_free;
		}
		/* fi_av(3): FI_ADDR_NOTAVAIL until fi_av_set_user_id says otherwise */
		memset(av->user_ids, 0xff, av->user_ids_cap * sizeof(*av->user_ids));
	}

	av->av_fid.fid.fclass = FI_CLASS_AV;
	av->av_fid.fid.context = context;
	av->av_fid.fid.ops = &layer_av_fi_ops;
	av->av_fid.ops = (struct fi_ops_av *) &layer_av_ops;

	atomic_fetch_add(&domain->ref, 1);
	attr->type = type;
	*av_fid = &av->av_fid;
	return 0;

err_free:
	layer_av_free(av);
	return ret;
}
