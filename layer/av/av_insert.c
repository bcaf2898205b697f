/*
 * Insertion and removal (fi_av(3)): fi_av_insert, fi_av_insertsvc (node/service as
 * getaddrinfo takes them, or an FI_ADDR_STR node), fi_av_insertsym (ranges of IPv4 or IPv6
 * addresses or of numbered host names, by ports), and fi_av_remove.
 *
 * Every insertion call goes through one engine, layer_av_insert_range: synchronous calls run
 * it at once, FI_EVENT calls queue their addresses for it (av_event.c). A failed address
 * leaves FI_ADDR_NOTAVAIL in its fi_addr slot and is reported through the caller's on_error:
 * the FI_SYNC_ERR array, or an EQ error entry.
 *
 * An index freed by a removal is not reused until the removal's listeners (endpoints) have
 * run: removals hold the listener mutex until then, and insertions take it too.
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

#include <rdma/fi_ext_layer.h>

#include "layer/av/av.h"

#define LAYER_AV_INSERT_FLAGS (FI_MORE | FI_SYNC_ERR | FI_AV_USER_ID | FI_AUTH_KEY)
/* fi_addr lists up to this long are decoded on the stack by remove */
#define LAYER_AV_REMOVE_STACK 64
/* longest host name insertsym builds (RFC 1035 limit) */
#define LAYER_AV_HOST_MAX 256

int layer_av_check_insert(struct layer_av *av, uint64_t flags, const fi_addr_t *fi_addr,
			  void *context, const char *call)
{
	if (flags & ~LAYER_AV_INSERT_FLAGS) {
		FI_WARN(&layer_prov, FI_LOG_AV, "%s: unknown flags 0x%" PRIx64 "\n", call,
			(uint64_t) (flags & ~LAYER_AV_INSERT_FLAGS));
		return -FI_EINVAL;
	}
	if (av->is_read_only) {
		FI_WARN(&layer_prov, FI_LOG_AV, "%s: the av was opened read-only\n", call);
		return -FI_EACCES;
	}
	if (flags & FI_SYNC_ERR) {
		/* fi_av(3): synchronous insertions only; context is the status array */
		if ((av->flags & FI_EVENT) || !context) {
			FI_WARN(&layer_prov, FI_LOG_AV, "%s: FI_SYNC_ERR %s\n", call,
				context ? "on an FI_EVENT av" : "without a status array");
			return -FI_EINVAL;
		}
	}
	if ((flags & FI_AV_USER_ID) && (flags & FI_AUTH_KEY)) {
		FI_WARN(&layer_prov, FI_LOG_AV, "%s: FI_AV_USER_ID with FI_AUTH_KEY\n", call);
		return -FI_EINVAL;
	}
	if (flags & FI_AV_USER_ID) {
		/*
		 * fi_av(3) 1.20: not per insertion when the AV was opened with FI_AV_USER_ID
		 * (fi_av_set_user_id is the way) or the domain has FI_AV_AUTH_KEY (fi_addr
		 * carries key handles in then).
		 */
		if (av->has_user_id_attr || av->has_auth_keys) {
			FI_WARN(&layer_prov, FI_LOG_AV,
				"%s: FI_AV_USER_ID per insertion is refused on this av "
				"(use fi_av_set_user_id)\n", call);
			return -FI_EINVAL;
		}
		if (!fi_addr) {
			FI_WARN(&layer_prov, FI_LOG_AV, "%s: FI_AV_USER_ID without ids\n", call);
			return -FI_EINVAL;
		}
	}
	if (flags & FI_AUTH_KEY) {
		if (!av->has_auth_keys || av->shm) {
			FI_WARN(&layer_prov, FI_LOG_AV, "%s: no authorization keys on this av\n",
				call);
			return -FI_EOPNOTSUPP;
		}
		if (!fi_addr) {
			FI_WARN(&layer_prov, FI_LOG_AV, "%s: FI_AUTH_KEY without key handles\n",
				call);
			return -FI_EINVAL;
		}
	}
	return 0;
}

size_t layer_av_insert_range(struct layer_av *av, const struct layer_av_ins *ins, size_t start,
			     size_t n)
{
	uint32_t addr_format = av->domain->addr_format;
	uint8_t norm[LAYER_AV_ADDR_MAX];
	bool has_entry_state;
	size_t i, index, inserted = 0;
	uint32_t key_index = 0, gen = 0;
	fi_addr_t fi_addr = 0;
	int ret;

	pthread_mutex_lock(&av->listener_lock);
	layer_av_write_lock(av);
	has_entry_state = ins->ids_in || av->user_ids || av->entry_keys;
	/* one rebuild and one allocation for the whole call; failures show per address */
	(void) util_av_table_reserve(&av->table, n);
	for (i = start; i < start + n; i++) {
		ret = layer_addr_normalize(addr_format, ins->addrs + i * av->addrlen, av->addrlen,
					 norm);
		if (!ret && (ins->flags & FI_AUTH_KEY)) {
			key_index = layer_av_key_index(av, ins->ids_in[i]);
			if (!key_index)
				ret = -FI_EINVAL;
		}
		if (!ret)
			ret = util_av_table_insert(&av->table, norm, &index, &gen);
		if (!ret && unlikely(index >= av->index_limit)) {
			util_av_table_remove(&av->table, index);
			ret = -FI_ENOSPC;
		}
		if (!ret) {
			fi_addr = layer_av_encode(av, index, gen);
			/* reads ids_in[i] before fi_addr[i], which may be the same slot */
			if (has_entry_state) {
				ret = layer_av_entry_added(av, index, fi_addr,
							   ins->ids_in ? &ins->ids_in[i] : NULL,
							   ins->flags, key_index);
				if (ret)
					util_av_table_remove(&av->table, index);
			}
		}
		if (unlikely(ret)) {
			if (ins->fi_addr)
				ins->fi_addr[i] = FI_ADDR_NOTAVAIL;
			ins->on_error(ins->arg, i, -ret);
			continue;
		}
		if (av->shm)
			layer_av_shm_set_map(av, index, fi_addr);
		if (ins->fi_addr)
			ins->fi_addr[i] = fi_addr;
		inserted++;
	}
	/* FI_MORE: more insertions follow, the last batch may wait for them */
	if (!(ins->flags & FI_MORE))
		util_av_table_flush(&av->table);
	layer_av_write_unlock(av);
	if (inserted)
		layer_av_notify_inserted(av);
	pthread_mutex_unlock(&av->listener_lock);
	return inserted;
}

/* Synchronous insertions: failures go to the FI_SYNC_ERR array and the log. */
struct layer_av_sync {
	int *status;       /* FI_SYNC_ERR array, or NULL */
	size_t failed;
	int first_err;
};

static void layer_av_sync_error(void *arg, size_t i, int err)
{
	struct layer_av_sync *sync = arg;

	if (!sync->failed++)
		sync->first_err = err;
	if (sync->status)
		sync->status[i] = err;
}

/*
 * Inserts count addresses now; errs (may be NULL) holds failures already known for some of
 * them (resolution), which are reported without trying the address. Returns the number
 * inserted.
 */
static int layer_av_insert_now(struct layer_av *av, const uint8_t *addrs, const int *errs,
			       size_t count, fi_addr_t *fi_addr, uint64_t flags, void *context,
			       const char *call)
{
	struct layer_av_sync sync = {
		.status = flags & FI_SYNC_ERR ? context : NULL,
	};
	struct layer_av_ins ins = {
		.addrs = addrs,
		.fi_addr = fi_addr,
		.ids_in = flags & (FI_AV_USER_ID | FI_AUTH_KEY) ? fi_addr : NULL,
		.flags = flags,
		.on_error = layer_av_sync_error,
		.arg = &sync,
	};
	size_t i, start, inserted = 0;

	if (sync.status)
		memset(sync.status, 0, count * sizeof(*sync.status));
	/* runs of addresses without a known failure go through the engine together */
	for (start = 0; start < count; start = i + 1) {
		for (i = start; i < count && !(errs && errs[i]); i++)
			;
		if (i > start)
			inserted += layer_av_insert_range(av, &ins, start, i - start);
		if (i < count) {
			if (fi_addr)
				fi_addr[i] = FI_ADDR_NOTAVAIL;
			layer_av_sync_error(&sync, i, errs[i]);
		}
	}
	if (sync.failed) {
		FI_WARN(&layer_prov, FI_LOG_AV, "%s: %zu of %zu addresses failed (first: %s)\n",
			call, sync.failed, count, fi_strerror(sync.first_err));
	}
	return (int) inserted;
}

/*
 * FI_ADDR_STR names (shm) into fixed slots of av->addrlen bytes. Several names may come
 * packed, each right after the previous one's NUL (as libfabric's shm reads them), or in
 * slots of av->addrlen bytes, as fi_getname gives them; skipping the NULs between names
 * reads both. A name too long for a slot fills it without a NUL: that address fails.
 */
static uint8_t *layer_av_unpack_names(const struct layer_av *av, const char *names,
				      size_t count)
{
	uint8_t *slots;
	size_t i, len, skip;

	if (count > SIZE_MAX / av->addrlen)
		return NULL;
	slots = calloc(count, av->addrlen);
	if (!slots)
		return NULL;
	for (i = 0; i < count; i++) {
		for (skip = 0; i && skip < av->addrlen && !*names; skip++)
			names++;
		len = strnlen(names, av->addrlen);
		memcpy(slots + i * av->addrlen, names, len);
		names += len < av->addrlen ? len + 1 : strlen(names) + 1;
	}
	return slots;
}

int layer_av_insert(struct fid_av *av_fid, const void *addr, size_t count, fi_addr_t *fi_addr,
		    uint64_t flags, void *context)
{
	struct layer_av *av = container_of(av_fid, struct layer_av, av_fid);
	uint8_t *names;
	int ret;

	ret = layer_av_check_insert(av, flags, fi_addr, context, "insert");
	if (ret)
		return ret;
	/* the return value is the number inserted: it has to fit */
	if ((count && !addr) || count > INT_MAX) {
		FI_WARN(&layer_prov, FI_LOG_AV, "insert: %s\n",
			addr ? "count too large" : "no addresses");
		return -FI_EINVAL;
	}
	if (count && av->domain->addr_format == FI_ADDR_STR) {
		names = layer_av_unpack_names(av, addr, count);
		if (!names)
			return -FI_ENOMEM;
		if (av->flags & FI_EVENT)
			ret = layer_av_event_queue(av, names, NULL, count, fi_addr, flags,
						   context);
		else
			ret = layer_av_insert_now(av, names, NULL, count, fi_addr, flags, context,
						  "insert");
		free(names);
		return ret;
	}
	if (av->flags & FI_EVENT)
		return layer_av_event_queue(av, addr, NULL, count, fi_addr, flags, context);
	if (!count)
		return 0;
	return layer_av_insert_now(av, addr, NULL, count, fi_addr, flags, context, "insert");
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

/* The first address of the AV's family for node/service: 0 or a positive errno. */
static int layer_av_getaddrinfo(struct layer_av *av, const char *node, const char *service,
				void *addr)
{
	struct addrinfo hints, *ai;
	int ret;

	memset(&hints, 0, sizeof(hints));
	hints.ai_family = av->domain->addr_format == FI_SOCKADDR_IN6 ? AF_INET6 : AF_INET;
	/* one stream result per address rather than one per socket type */
	hints.ai_socktype = SOCK_STREAM;
	ret = getaddrinfo(node, service, &hints, &ai);
	if (ret) {
		FI_WARN(&layer_prov, FI_LOG_AV, "cannot resolve %s:%s: %s\n", node ? node : "",
			service ? service : "", gai_strerror(ret));
		return layer_av_gai_errno(ret);
	}
	ret = ai->ai_addrlen >= av->addrlen ? 0 : FI_EADDRNOTAVAIL;
	if (!ret)
		memcpy(addr, ai->ai_addr, av->addrlen);
	freeaddrinfo(ai);
	return ret;
}

/*
 * An FI_ADDR_STR address (fi_getinfo(3)): "fi_sockaddr_in://A.B.C.D[:port]",
 * "fi_sockaddr_in6://[addr][:port]" or "fi_sockaddr://" with either. 0, or a positive errno:
 * FI_EINVAL when it is malformed, FI_EADDRNOTAVAIL when it is of the other family.
 */
static int layer_av_parse_str(struct layer_av *av, const char *str, void *addr)
{
	bool want6 = av->domain->addr_format == FI_SOCKADDR_IN6;
	char host[INET6_ADDRSTRLEN + 2];
	const char *rest, *port_str = NULL, *end;
	struct sockaddr_in6 sin6 = { .sin6_family = AF_INET6 };
	struct sockaddr_in sin = { .sin_family = AF_INET };
	unsigned long port = 0;
	bool is6;
	char *stop;

	if (!strncmp(str, "fi_sockaddr_in6://", 18)) {
		rest = str + 18;
		is6 = true;
	} else if (!strncmp(str, "fi_sockaddr_in://", 17)) {
		rest = str + 17;
		is6 = false;
	} else if (!strncmp(str, "fi_sockaddr://", 14)) {
		rest = str + 14;
		is6 = rest[0] == '[';
	} else {
		return FI_EINVAL;
	}

	if (is6) {
		if (rest[0] != '[' || !(end = strchr(rest, ']')))
			return FI_EINVAL;
		rest++;
		if (*(end + 1) == ':')
			port_str = end + 2;
		else if (*(end + 1))
			return FI_EINVAL;
	} else {
		end = strchr(rest, ':');
		if (end)
			port_str = end + 1;
		else
			end = rest + strlen(rest);
	}
	if ((size_t) (end - rest) >= sizeof(host))
		return FI_EINVAL;
	memcpy(host, rest, (size_t) (end - rest));
	host[end - rest] = '\0';
	if (port_str) {
		errno = 0;
		port = strtoul(port_str, &stop, 10);
		if (!*port_str || *stop || errno || port > UINT16_MAX)
			return FI_EINVAL;
	}

	if (is6) {
		if (inet_pton(AF_INET6, host, &sin6.sin6_addr) != 1)
			return FI_EINVAL;
		if (!want6)
			return FI_EADDRNOTAVAIL;
		sin6.sin6_port = htons((uint16_t) port);
		memcpy(addr, &sin6, sizeof(sin6));
	} else {
		if (inet_pton(AF_INET, host, &sin.sin_addr) != 1)
			return FI_EINVAL;
		if (want6)
			return FI_EADDRNOTAVAIL;
		sin.sin_port = htons((uint16_t) port);
		memcpy(addr, &sin, sizeof(sin));
	}
	return 0;
}

int layer_av_resolve_svc(struct layer_av *av, const char *node, const char *service, void *addr)
{
	/* names of an FI_ADDR_STR core resolve to nothing but themselves */
	if (av->domain->addr_format == FI_ADDR_STR) {
		if (!node || service)
			return -FI_EINVAL;
		return layer_addr_normalize(FI_ADDR_STR, node, strlen(node) + 1, addr) ?
		       FI_EINVAL : 0;
	}
	if (node && strstr(node, "://")) {
		/* fi_av(3): with an FI_ADDR_STR node, service must be NULL */
		if (service)
			return -FI_EINVAL;
		return layer_av_parse_str(av, node, addr);
	}
	return layer_av_getaddrinfo(av, node, service, addr);
}

int layer_av_insertsvc(struct fid_av *av_fid, const char *node, const char *service,
		       fi_addr_t *fi_addr, uint64_t flags, void *context)
{
	struct layer_av *av = container_of(av_fid, struct layer_av, av_fid);
	uint8_t addr[LAYER_AV_ADDR_MAX];
	int ret, err;

	ret = layer_av_check_insert(av, flags, fi_addr, context, "insertsvc");
	if (ret)
		return ret;
	if (!node && !service) {
		FI_WARN(&layer_prov, FI_LOG_AV, "insertsvc: neither node nor service\n");
		return -FI_EINVAL;
	}
	/* a name that does not resolve is a failed insertion, as a bad address is for insert */
	err = layer_av_resolve_svc(av, node, service, addr);
	if (err < 0) {
		FI_WARN(&layer_prov, FI_LOG_AV, "insertsvc: service with an FI_ADDR_STR node\n");
		return err;
	}
	if (av->flags & FI_EVENT)
		return layer_av_event_queue(av, addr, &err, 1, fi_addr, flags, context);
	return layer_av_insert_now(av, addr, &err, 1, fi_addr, flags, context, "insertsvc");
}

/* ---- insertsym ---- */

/* The numeric suffix of a host name: prefix length, value and digit count (0: none). */
static size_t layer_av_host_suffix(const char *host, unsigned long long *value, int *digits)
{
	size_t len = strlen(host), start = len;

	while (start && host[start - 1] >= '0' && host[start - 1] <= '9')
		start--;
	*digits = (int) (len - start);
	/* more digits than an unsigned long long holds: treated as no usable suffix */
	if (!*digits || *digits > 18)
		return *digits = 0, len;
	*value = strtoull(host + start, NULL, 10);
	return start;
}

/* Adds k to a 128-bit big-endian IPv6 address: false on overflow. */
static bool layer_av_in6_add(struct in6_addr *a, uint64_t k)
{
	int i;

	for (i = 15; i >= 0 && k; i--) {
		k += a->s6_addr[i];
		a->s6_addr[i] = (uint8_t) k;
		k >>= 8;
	}
	return !k;
}

/*
 * The node-th node address (numeric or resolved) into addr: 0 or a positive errno for that
 * node's addresses; a negative errno makes the whole call invalid.
 */
static int layer_av_sym_node(struct layer_av *av, const char *node, size_t k, void *addr)
{
	bool want6 = av->domain->addr_format == FI_SOCKADDR_IN6;
	struct sockaddr_in6 sin6 = { .sin6_family = AF_INET6 };
	struct sockaddr_in sin = { .sin_family = AF_INET };
	char host[LAYER_AV_HOST_MAX];
	unsigned long long value = 0;
	size_t prefix;
	uint32_t v4;
	int digits;

	if (inet_pton(AF_INET, node, &sin.sin_addr) == 1) {
		v4 = ntohl(sin.sin_addr.s_addr);
		if (k > UINT32_MAX - v4)
			return -FI_EINVAL;
		if (want6)
			return FI_EADDRNOTAVAIL;
		sin.sin_addr.s_addr = htonl(v4 + (uint32_t) k);
		memcpy(addr, &sin, sizeof(sin));
		return 0;
	}
	if (inet_pton(AF_INET6, node, &sin6.sin6_addr) == 1) {
		if (!layer_av_in6_add(&sin6.sin6_addr, k))
			return -FI_EINVAL;
		if (!want6)
			return FI_EADDRNOTAVAIL;
		memcpy(addr, &sin6, sizeof(sin6));
		return 0;
	}

	/* a host name: host10, host11, ... keeping the suffix's width (node001, node002) */
	if (k) {
		prefix = layer_av_host_suffix(node, &value, &digits);
		if (!digits || value + k < value)
			return -FI_EINVAL;
		if (snprintf(host, sizeof(host), "%.*s%0*llu", (int) prefix, node, digits,
			     value + k) >= (int) sizeof(host))
			return -FI_EINVAL;
		node = host;
	}
	return layer_av_getaddrinfo(av, node, NULL, addr);
}

int layer_av_expand_sym(struct layer_av *av, const char *node, size_t nodecnt,
			const char *service, size_t svccnt, uint8_t **addrs, int **errs)
{
	unsigned long long value;
	unsigned long port;
	size_t total, n, s, i;
	uint8_t *out, base[sizeof(struct sockaddr_in6)];
	int *status, err, digits;
	char *stop;

	*addrs = NULL;
	*errs = NULL;
	if (!node || !service) {
		FI_WARN(&layer_prov, FI_LOG_AV, "insertsym: no node or no service\n");
		return -FI_EINVAL;
	}
	if (av->domain->addr_format == FI_ADDR_STR) {
		FI_WARN(&layer_prov, FI_LOG_AV, "insertsym: the core's names have no numbers\n");
		return -FI_EINVAL;
	}
	if (nodecnt && svccnt > INT_MAX / nodecnt) {
		FI_WARN(&layer_prov, FI_LOG_AV, "insertsym: %zu x %zu addresses\n", nodecnt,
			svccnt);
		return -FI_EINVAL;
	}
	total = nodecnt * svccnt;
	errno = 0;
	port = strtoul(service, &stop, 10);
	if (!*service || *stop || errno || port > UINT16_MAX || svccnt > UINT16_MAX + 1 - port) {
		FI_WARN(&layer_prov, FI_LOG_AV, "insertsym: service %s + %zu is not a port range\n",
			service, svccnt);
		return -FI_EINVAL;
	}
	/* "If node is a non-numeric string ... it must contain a numeric suffix if nodecnt > 1" */
	if (nodecnt > 1 && !strchr(node, ':') && !strchr(node, '.')) {
		layer_av_host_suffix(node, &value, &digits);
		if (!digits) {
			FI_WARN(&layer_prov, FI_LOG_AV,
				"insertsym: host %s has no numeric suffix\n", node);
			return -FI_EINVAL;
		}
	}
	if (!total)
		return 0;

	out = malloc(total * av->addrlen);
	status = calloc(total, sizeof(*status));
	if (!out || !status) {
		free(out);
		free(status);
		return -FI_ENOMEM;
	}
	for (n = 0; n < nodecnt; n++) {
		memset(base, 0, sizeof(base));
		err = layer_av_sym_node(av, node, n, base);
		if (err < 0) {
			FI_WARN(&layer_prov, FI_LOG_AV, "insertsym: %s + %zu is out of range\n",
				node, n);
			free(out);
			free(status);
			return err;
		}
		/* all service addresses of a node before the next node */
		for (s = 0; s < svccnt; s++) {
			i = n * svccnt + s;
			status[i] = err;
			if (av->addrlen == sizeof(struct sockaddr_in6))
				((struct sockaddr_in6 *) base)->sin6_port =
					htons((uint16_t) (port + s));
			else
				((struct sockaddr_in *) base)->sin_port =
					htons((uint16_t) (port + s));
			memcpy(out + i * av->addrlen, base, av->addrlen);
		}
	}
	*addrs = out;
	*errs = status;
	return (int) total;
}

int layer_av_insertsym(struct fid_av *av_fid, const char *node, size_t nodecnt,
		       const char *service, size_t svccnt, fi_addr_t *fi_addr, uint64_t flags,
		       void *context)
{
	struct layer_av *av = container_of(av_fid, struct layer_av, av_fid);
	uint8_t *addrs;
	int *errs;
	int ret, total;

	ret = layer_av_check_insert(av, flags, fi_addr, context, "insertsym");
	if (ret)
		return ret;
	total = layer_av_expand_sym(av, node, nodecnt, service, svccnt, &addrs, &errs);
	if (total < 0)
		return total;
	if (av->flags & FI_EVENT)
		ret = layer_av_event_queue(av, addrs, errs, (size_t) total, fi_addr, flags,
					   context);
	else
		ret = total ? layer_av_insert_now(av, addrs, errs, (size_t) total, fi_addr, flags,
						  context, "insertsym") : 0;
	free(addrs);
	free(errs);
	return ret;
}

/* ---- remove ---- */

/*
 * All or nothing: every fi_addr is validated (live, and listed once) before any is removed,
 * so a call that fails with -FI_EINVAL leaves the AV unchanged and the caller can tell which
 * entries are still there.
 */
int layer_av_remove(struct fid_av *av_fid, fi_addr_t *fi_addr, size_t count, uint64_t flags)
{
	struct layer_av *av = container_of(av_fid, struct layer_av, av_fid);
	size_t stack_index[LAYER_AV_REMOVE_STACK];
	size_t *index = stack_index;
	size_t i;
	int ret;

	if (flags & ~FI_AUTH_KEY) {
		FI_WARN(&layer_prov, FI_LOG_AV, "remove: unknown flags 0x%" PRIx64 "\n", flags);
		return -FI_EINVAL;
	}
	if (count && !fi_addr) {
		FI_WARN(&layer_prov, FI_LOG_AV, "remove: no fi_addr array\n");
		return -FI_EINVAL;
	}
	if (av->is_read_only) {
		FI_WARN(&layer_prov, FI_LOG_AV, "remove: the av was opened read-only\n");
		return -FI_EACCES;
	}
	if (flags & FI_AUTH_KEY)
		return layer_av_remove_keys(av, fi_addr, count);
	if (!count)
		return 0;
	if (count > LAYER_AV_REMOVE_STACK) {
		index = count <= SIZE_MAX / sizeof(*index) ? malloc(count * sizeof(*index)) : NULL;
		if (!index)
			return -FI_ENOMEM;
	}

	/* held until the listeners have run: nobody reuses the freed indices before that */
	pthread_mutex_lock(&av->listener_lock);
	layer_av_write_lock(av);
	for (i = 0; i < count; i++) {
		ret = layer_av_resolve(av, fi_addr[i], NULL, &index[i]);
		if (ret) {
			FI_WARN(&layer_prov, FI_LOG_AV,
				"remove: fi_addr %#" PRIx64 " (entry %zu) is not in the av\n",
				(uint64_t) fi_addr[i], i);
			break;
		}
	}
	if (!ret) {
		ret = util_av_table_remove_list(&av->table, index, count);
		if (ret)
			FI_WARN(&layer_prov, FI_LOG_AV, "remove: an fi_addr is listed twice\n");
	}
	if (!ret) {
		layer_av_entries_removed(av, index, count);
		for (i = 0; av->shm && i < count; i++)
			layer_av_shm_set_map(av, index[i], FI_ADDR_NOTAVAIL);
	}
	layer_av_write_unlock(av);
	if (!ret)
		layer_av_notify_removed(av, index, count);
	pthread_mutex_unlock(&av->listener_lock);

	if (index != stack_index)
		free(index);
	return ret;
}
