/*
 * Address vectors (fi_av(3)) on util's address table: synchronous FI_AV_TABLE and FI_AV_MAP
 * AVs of the core's socket addresses, with insert, insertsvc, remove, lookup and straddr.
 *
 * Not yet (each refused with -FI_ENOSYS until its stage lands): FI_EVENT AVs and fi_av_bind,
 * named/shared AVs (so FI_READ), FI_AV_USER_ID, insertsym, AV sets, and the 1.20 entries.
 *
 * Every fi_addr from the application goes through layer_av_fi_addr_to_index(), so an fi_addr
 * never inserted, removed or forged is refused with -FI_EINVAL instead of being followed.
 */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "layer/av.h"
#include "layer/av_set.h"

/* Open flags the AV knows of; which of them are implemented is checked one by one. */
#define LAYER_AV_OPEN_FLAGS (FI_EVENT | FI_READ | FI_SYMMETRIC | FI_AV_USER_ID)
#define LAYER_AV_INSERT_FLAGS (FI_MORE | FI_SYNC_ERR)
/* fi_rx_addr() shifts by 64 - rx_ctx_bits: larger values have no meaning */
#define LAYER_AV_MAX_RX_CTX_BITS 64
/* fi_addr lists up to this long are decoded on the stack by remove */
#define LAYER_AV_REMOVE_STACK 64
/* large enough for any normalised address (sockaddr_in6) */
#define LAYER_AV_ADDR_MAX sizeof(struct sockaddr_in6)

/*
 * fi_addr <-> table index. For now both AV types hand out the table index itself; FI_AV_MAP
 * will carry the slot's generation too, so these two functions are the only ones to change.
 */
fi_addr_t layer_av_index_to_fi_addr(const struct layer_av *av, size_t index)
{
	return (fi_addr_t) index;
}

/*
 * The live table index fi_addr names: 0, or -FI_EINVAL. Called with the lock held; the
 * address is prefetched first so that its cache miss overlaps the one on the generation.
 */
static inline int layer_av_fi_addr_to_index(const struct layer_av *av, fi_addr_t fi_addr,
					    size_t *index)
{
	/* a prefetch never faults, even for an fi_addr far out of range */
	/* compared as fi_addr_t first, so a 64-bit value is never truncated into range */
	if (unlikely(fi_addr >= av->table.st->end || !util_av_table_is_live(&av->table, fi_addr)))
		return -FI_EINVAL;
	*index = (size_t) fi_addr;
	return 0;
}

static size_t layer_av_addrlen(uint32_t addr_format)
{
	switch (addr_format) {
	case FI_SOCKADDR_IN:
		return sizeof(struct sockaddr_in);
	case FI_SOCKADDR_IN6:
		return sizeof(struct sockaddr_in6);
	default:
		return 0;
	}
}

/*
 * addrlen is the number of bytes readable at addr; only the format's size is used. Fields
 * that do not name the endpoint (sin_zero, sin6_flowinfo) are zeroed so that equal addresses
 * are equal bytewise, for the reverse lookup.
 */
int layer_av_normalize(uint32_t addr_format, const void *addr, size_t addrlen, void *out)
{
	struct sockaddr_in6 sin6;
	struct sockaddr_in sin;

	if (!addr || addrlen < layer_av_addrlen(addr_format))
		return -FI_EINVAL;

	switch (addr_format) {
	case FI_SOCKADDR_IN:
		memcpy(&sin, addr, sizeof(sin));
		if (sin.sin_family != AF_INET)
			return -FI_EINVAL;
		memset(sin.sin_zero, 0, sizeof(sin.sin_zero));
		memcpy(out, &sin, sizeof(sin));
		return 0;
	case FI_SOCKADDR_IN6:
		memcpy(&sin6, addr, sizeof(sin6));
		if (sin6.sin6_family != AF_INET6)
			return -FI_EINVAL;
		sin6.sin6_flowinfo = 0;
		memcpy(out, &sin6, sizeof(sin6));
		return 0;
	default:
		return -FI_EINVAL;
	}
}

int layer_av_get_addr(struct layer_av *av, fi_addr_t fi_addr, void *addr, size_t *index)
{
	size_t idx;
	int ret;

	util_lock_acquire(&av->lock);
	ret = layer_av_fi_addr_to_index(av, fi_addr, &idx);
	/* copied under the lock: a concurrent insertion may move the table */
	if (likely(!ret))
		memcpy(addr, util_av_table_get(&av->table, idx), av->addrlen);
	util_lock_release(&av->lock);

	if (unlikely(ret)) {
		FI_WARN(&layer_prov, FI_LOG_AV, "fi_addr %" PRIu64 " is not in the av\n",
			(uint64_t) fi_addr);
		return ret;
	}
	if (index)
		*index = idx;
	return 0;
}

fi_addr_t layer_av_find(struct layer_av *av, const void *addr, size_t addrlen)
{
	uint8_t norm[LAYER_AV_ADDR_MAX];
	fi_addr_t fi_addr = FI_ADDR_NOTAVAIL;
	size_t index;

	if (layer_av_normalize(av->domain->addr_format, addr, addrlen, norm))
		return FI_ADDR_NOTAVAIL;

	util_lock_acquire(&av->lock);
	if (!util_av_table_find(&av->table, norm, &index, NULL))
		fi_addr = layer_av_index_to_fi_addr(av, index);
	util_lock_release(&av->lock);
	return fi_addr;
}

/* Flags and context checks shared by the insertion calls. */
static int layer_av_check_insert(uint64_t flags, void *context, const char *call)
{
	if (flags & FI_AV_USER_ID) {
		FI_WARN(&layer_prov, FI_LOG_AV, "%s: FI_AV_USER_ID is not supported yet\n", call);
		return -FI_ENOSYS;
	}
	if (flags & ~LAYER_AV_INSERT_FLAGS) {
		FI_WARN(&layer_prov, FI_LOG_AV, "%s: unknown flags 0x%" PRIx64 "\n", call,
			(uint64_t) (flags & ~LAYER_AV_INSERT_FLAGS));
		return -FI_EINVAL;
	}
	/* FI_SYNC_ERR: context is the int array receiving the per-address status */
	if ((flags & FI_SYNC_ERR) && !context) {
		FI_WARN(&layer_prov, FI_LOG_AV, "%s: FI_SYNC_ERR without a status array\n", call);
		return -FI_EINVAL;
	}
	return 0;
}

static int layer_av_insert(struct fid_av *av_fid, const void *addr, size_t count,
			   fi_addr_t *fi_addr, uint64_t flags, void *context)
{
	struct layer_av *av = container_of(av_fid, struct layer_av, av_fid);
	const uint8_t *src = addr;
	uint8_t norm[LAYER_AV_ADDR_MAX];
	int *sync_err = context;
	size_t i, index, failed = 0;
	int ret, first_err = 0, inserted = 0;

	ret = layer_av_check_insert(flags, context, "insert");
	if (ret)
		return ret;
	if (!count)
		return 0;
	/* the return value is the number inserted: it has to fit */
	if (!addr || count > INT_MAX) {
		FI_WARN(&layer_prov, FI_LOG_AV, "insert: %s\n",
			addr ? "count too large" : "no addresses");
		return -FI_EINVAL;
	}

	/* FI_MORE is only a hint: every call completes before it returns */
	util_lock_acquire(&av->lock);
	for (i = 0; i < count; i++) {
		ret = layer_av_normalize(av->domain->addr_format, src + i * av->addrlen,
					 av->addrlen, norm);
		if (!ret)
			ret = util_av_table_insert(&av->table, norm, &index);

		if (ret) {
			failed++;
			if (!first_err)
				first_err = ret;
		} else {
			inserted++;
		}
		if (fi_addr)
			fi_addr[i] = ret ? FI_ADDR_NOTAVAIL : layer_av_index_to_fi_addr(av, index);
		if (flags & FI_SYNC_ERR)
			sync_err[i] = -ret;
	}
	util_lock_release(&av->lock);

	if (failed) {
		FI_WARN(&layer_prov, FI_LOG_AV, "insert: %zu of %zu addresses failed (first: %s)\n",
			failed, count, fi_strerror(-first_err));
	}
	return inserted;
}

/* A positive fabric errno for a getaddrinfo failure (FI_SYNC_ERR status). */
static int layer_av_gai_errno(int gai_ret)
{
	switch (gai_ret) {
	case EAI_MEMORY:
		return FI_ENOMEM;
	case EAI_AGAIN:
		return FI_EAGAIN;
	case EAI_SYSTEM:
		return errno ? errno : FI_EIO;
	default:
		return FI_EADDRNOTAVAIL;
	}
}

/*
 * Resolves node/service into the domain's address family and inserts the first address. A
 * name that does not resolve is a failed insertion (0 returned, FI_ADDR_NOTAVAIL and the
 * FI_SYNC_ERR status set), as fi_av_insert reports a bad address.
 */
static int layer_av_insertsvc(struct fid_av *av_fid, const char *node, const char *service,
			      fi_addr_t *fi_addr, uint64_t flags, void *context)
{
	struct layer_av *av = container_of(av_fid, struct layer_av, av_fid);
	struct addrinfo hints, *ai;
	int ret;

	ret = layer_av_check_insert(flags, context, "insertsvc");
	if (ret)
		return ret;
	if (!node && !service) {
		FI_WARN(&layer_prov, FI_LOG_AV, "insertsvc: neither node nor service\n");
		return -FI_EINVAL;
	}

	memset(&hints, 0, sizeof(hints));
	hints.ai_family = av->domain->addr_format == FI_SOCKADDR_IN6 ? AF_INET6 : AF_INET;
	/* one stream result per address rather than one per socket type */
	hints.ai_socktype = SOCK_STREAM;
	ret = getaddrinfo(node, service, &hints, &ai);
	if (ret) {
		FI_WARN(&layer_prov, FI_LOG_AV, "insertsvc: cannot resolve %s:%s: %s\n",
			node ? node : "", service ? service : "", gai_strerror(ret));
		if (fi_addr)
			*fi_addr = FI_ADDR_NOTAVAIL;
		if (flags & FI_SYNC_ERR)
			*(int *) context = layer_av_gai_errno(ret);
		return 0;
	}

	if (ai->ai_addrlen < av->addrlen) {
		FI_WARN(&layer_prov, FI_LOG_AV, "insertsvc: short address for %s:%s\n",
			node ? node : "", service ? service : "");
		if (fi_addr)
			*fi_addr = FI_ADDR_NOTAVAIL;
		if (flags & FI_SYNC_ERR)
			*(int *) context = FI_EADDRNOTAVAIL;
		ret = 0;
	} else {
		ret = layer_av_insert(av_fid, ai->ai_addr, 1, fi_addr, flags, context);
	}
	freeaddrinfo(ai);
	return ret;
}

static int layer_av_insertsym(struct fid_av *av_fid, const char *node, size_t nodecnt,
			      const char *service, size_t svccnt, fi_addr_t *fi_addr,
			      uint64_t flags, void *context)
{
	FI_WARN(&layer_prov, FI_LOG_AV, "insertsym is not supported yet\n");
	return -FI_ENOSYS;
}

/*
 * All or nothing: every fi_addr is validated (live, and listed once) before any is removed,
 * so a call that fails with -FI_EINVAL leaves the AV unchanged and the caller can tell which
 * entries are still there.
 */
static int layer_av_remove(struct fid_av *av_fid, fi_addr_t *fi_addr, size_t count, uint64_t flags)
{
	struct layer_av *av = container_of(av_fid, struct layer_av, av_fid);
	size_t stack_index[LAYER_AV_REMOVE_STACK];
	size_t *index = stack_index;
	size_t i;
	int ret;

	if (flags) {
		FI_WARN(&layer_prov, FI_LOG_AV, "remove: unknown flags 0x%" PRIx64 "\n", flags);
		return -FI_EINVAL;
	}
	if (!count)
		return 0;
	if (!fi_addr) {
		FI_WARN(&layer_prov, FI_LOG_AV, "remove: no fi_addr array\n");
		return -FI_EINVAL;
	}
	if (count > LAYER_AV_REMOVE_STACK) {
		index = count <= SIZE_MAX / sizeof(*index) ? malloc(count * sizeof(*index)) : NULL;
		if (!index)
			return -FI_ENOMEM;
	}

	util_lock_acquire(&av->lock);
	for (i = 0; i < count; i++) {
		ret = layer_av_fi_addr_to_index(av, fi_addr[i], &index[i]);
		if (ret) {
			FI_WARN(&layer_prov, FI_LOG_AV,
				"remove: fi_addr %" PRIu64 " (entry %zu) is not in the av\n",
				(uint64_t) fi_addr[i], i);
			goto unlock;
		}
	}
	ret = util_av_table_remove_list(&av->table, index, count);
	if (ret)
		FI_WARN(&layer_prov, FI_LOG_AV, "remove: an fi_addr is listed twice\n");
unlock:
	util_lock_release(&av->lock);
	if (index != stack_index)
		free(index);
	return ret;
}

static int layer_av_lookup(struct fid_av *av_fid, fi_addr_t fi_addr, void *addr, size_t *addrlen)
{
	struct layer_av *av = container_of(av_fid, struct layer_av, av_fid);
	size_t index;
	int ret;

	/* addr may be NULL only for a size query (*addrlen == 0) */
	if (!addrlen || (*addrlen && !addr)) {
		FI_WARN(&layer_prov, FI_LOG_AV, "lookup: no %s\n", addrlen ? "buffer" : "addrlen");
		return -FI_EINVAL;
	}

	util_lock_acquire(&av->lock);
	ret = layer_av_fi_addr_to_index(av, fi_addr, &index);
	if (!ret && *addrlen)
		memcpy(addr, util_av_table_get(&av->table, index), UTIL_MIN(*addrlen, av->addrlen));
	util_lock_release(&av->lock);

	if (ret) {
		FI_WARN(&layer_prov, FI_LOG_AV, "lookup: fi_addr %" PRIu64 " is not in the av\n",
			(uint64_t) fi_addr);
		return ret;
	}
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

static int layer_av_bind(struct fid *fid, struct fid *bfid, uint64_t flags)
{
	/* an EQ only matters to FI_EVENT AVs, which cannot be opened yet */
	FI_WARN(&layer_prov, FI_LOG_AV, "bind: event queues are not supported yet\n");
	return -FI_ENOSYS;
}

static int layer_av_close(struct fid *fid)
{
	struct layer_av *av = container_of(fid, struct layer_av, av_fid.fid);
	int ref = atomic_load(&av->ref);

	if (ref) {
		FI_WARN(&layer_prov, FI_LOG_AV, "close: %d endpoints still bound\n", ref);
		return -FI_EBUSY;
	}
	util_av_table_fini(&av->table);
	util_lock_fini(&av->lock);
	atomic_fetch_sub(&av->domain->ref, 1);
	free(av);
	return 0;
}

static struct fi_ops layer_av_fi_ops = {
	.size = sizeof(struct fi_ops),
	.close = layer_av_close,
	.bind = layer_av_bind,
	.control = layer_no_control,
	.ops_open = layer_no_ops_open,
};

static struct fi_ops_av layer_av_ops = {
	.size = sizeof(struct fi_ops_av),
	.insert = layer_av_insert,
	.insertsvc = layer_av_insertsvc,
	.insertsym = layer_av_insertsym,
	.remove = layer_av_remove,
	.lookup = layer_av_lookup,
	.straddr = layer_av_straddr,
	.av_set = layer_av_set_open,
};

/* Validates attr against what this stage implements; the resolved type goes to *type. */
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
	if (attr->name) {
		FI_WARN(&layer_prov, FI_LOG_AV, "open: named (shared) avs are not supported yet\n");
		return -FI_ENOSYS;
	}
	if (attr->flags & FI_EVENT) {
		FI_WARN(&layer_prov, FI_LOG_AV, "open: FI_EVENT is not supported yet\n");
		return -FI_ENOSYS;
	}
	if (attr->flags & FI_AV_USER_ID) {
		FI_WARN(&layer_prov, FI_LOG_AV, "open: FI_AV_USER_ID is not supported yet\n");
		return -FI_ENOSYS;
	}

	/*
	 * rx_ctx_bits only serves scalable endpoints (fi_av(3)); ours have one receive context,
	 * so the only valid rx_index is 0 and fi_rx_addr(fi_addr, 0, bits) == fi_addr for any
	 * bits: accepted and ignored. An address built with another rx_index is refused like
	 * any forged fi_addr. FI_SYMMETRIC is an optimisation hint, ignored as allowed.
	 */
	if (attr->rx_ctx_bits < 0 || attr->rx_ctx_bits > LAYER_AV_MAX_RX_CTX_BITS) {
		FI_WARN(&layer_prov, FI_LOG_AV, "open: rx_ctx_bits %d out of range\n",
			attr->rx_ctx_bits);
		return -FI_EINVAL;
	}
	return 0;
}

int layer_av_open(struct fid_domain *domain_fid, struct fi_av_attr *attr, struct fid_av **av_fid,
		  void *context)
{
	struct layer_domain *domain;
	enum fi_av_type type;
	struct layer_av *av;
	int ret;

	if (!domain_fid || !attr || !av_fid) {
		FI_WARN(&layer_prov, FI_LOG_AV, "open: missing domain, attributes or av pointer\n");
		return -FI_EINVAL;
	}
	domain = container_of(domain_fid, struct layer_domain, domain_fid);
	if (!domain->addrlen || domain->addrlen != layer_av_addrlen(domain->addr_format)) {
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

	ret = util_av_table_init(&av->table, domain->addrlen, attr->count);
	if (ret) {
		FI_WARN(&layer_prov, FI_LOG_AV, "open: no memory for %zu addresses\n", attr->count);
		goto err_free_av;
	}
	util_lock_init(&av->lock, domain->is_thread_safe);
	atomic_init(&av->ref, 0);
	av->domain = domain;
	av->type = type;
	av->flags = attr->flags;
	av->addrlen = domain->addrlen;

	av->av_fid.fid.fclass = FI_CLASS_AV;
	av->av_fid.fid.context = context;
	av->av_fid.fid.ops = &layer_av_fi_ops;
	av->av_fid.ops = &layer_av_ops;

	atomic_fetch_add(&domain->ref, 1);
	attr->type = type;
	*av_fid = &av->av_fid;
	return 0;

err_free_av:
	free(av);
	return ret;
}
