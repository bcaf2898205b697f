/*
 * Address vectors through the public API (fi_av(3)): open attributes, insertion order and the
 * lowest free index reused, FI_SYNC_ERR, lookup (truncation, size query), remove (all or
 * nothing), insertsvc, FI_AV_MAP handles, EBUSY on close, growth, thread safety, and every
 * error path, for the domain's IPv4 format and, when offered, IPv6 (straddr: test_av_sym).
 *
 * Calls that existing providers are known to crash on (lookups and removals of entries that
 * are not there, NULL arguments) run in a forked child (lt_guarded), so a crash is a failed
 * check. Checks of ofi_layer's own choices (duplicates allowed, NULL for a foreign straddr,
 * -FI_ENOENT for FI_READ of a name that does not exist) apply to ofi_layer only; with other
 * providers the result is noted. FI_EVENT, named AVs, user IDs and keys, insertsym and the
 * endpoint side have their own test programs (test_av_event, test_av_shared, test_av_auth,
 * test_av_sym, test_av_ep).
 */
#include "common.h"

#include <arpa/inet.h>
#include <limits.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define HANG_GUARD_S 60
#define GUARD_MS 10000
/* a flag no AV call knows */
#define UNKNOWN_FLAG (1ULL << 61)
#define MANY 10000
#define THREADS 4
#define THREAD_ITERS 2000

struct ctx {
	const char *tag; /* "ipv4" or "ipv6": prefixes every check name */
	struct lt_dom dom;
	struct fid_eq *eq; /* NULL if the provider has none */
	uint32_t addr_format;
	size_t addrlen;
};

/* A distinct address of the domain's format per i (never contacted). */
static void make_addr(const struct ctx *c, unsigned i, void *out)
{
	struct sockaddr_in6 sin6;
	struct sockaddr_in sin;

	if (c->addr_format == FI_SOCKADDR_IN6) {
		memset(&sin6, 0, sizeof(sin6));
		sin6.sin6_family = AF_INET6;
		sin6.sin6_port = htons((uint16_t) (4000 + i % 1000));
		sin6.sin6_addr.s6_addr[0] = 0xfd;
		sin6.sin6_addr.s6_addr[12] = (uint8_t) (i >> 24);
		sin6.sin6_addr.s6_addr[13] = (uint8_t) (i >> 16);
		sin6.sin6_addr.s6_addr[14] = (uint8_t) (i >> 8);
		sin6.sin6_addr.s6_addr[15] = (uint8_t) i;
		memcpy(out, &sin6, sizeof(sin6));
	} else {
		memset(&sin, 0, sizeof(sin));
		sin.sin_family = AF_INET;
		sin.sin_port = htons((uint16_t) (4000 + i % 1000));
		sin.sin_addr.s_addr = htonl(0x0a010000u + i);
		memcpy(out, &sin, sizeof(sin));
	}
}

/* n addresses make_addr(first .. first + n - 1) in one array (caller frees). */
static void *make_addrs(const struct ctx *c, unsigned first, size_t n)
{
	uint8_t *a = calloc(n ? n : 1, c->addrlen);
	size_t i;

	if (!a) {
		fprintf(stderr, "out of memory\n");
		exit(1);
	}
	for (i = 0; i < n; i++)
		make_addr(c, first + (unsigned) i, a + i * c->addrlen);
	return a;
}

static int open_av(struct ctx *c, enum fi_av_type type, size_t count, struct fid_av **av)
{
	struct fi_av_attr attr = {.type = type, .count = count};

	return fi_av_open(c->dom.domain, &attr, av, NULL);
}

/* True when fi_addr is live and holds the address make_addr(i) (normalised). */
static bool holds(const struct ctx *c, struct fid_av *av, fi_addr_t fi_addr, unsigned i)
{
	uint8_t want[LT_ADDR_MAX], got[LT_ADDR_MAX];
	size_t len = sizeof(got);

	make_addr(c, i, want);
	return fi_av_lookup(av, fi_addr, got, &len) == 0 && len == c->addrlen &&
	       !memcmp(got, want, c->addrlen);
}

/* ---- calls run in a forked child ---- */

struct call {
	struct ctx *c;
	struct fid_av *av;
	fi_addr_t fi_addr;
	fi_addr_t *fi_addrs;
	size_t count;
	uint64_t flags;
	struct fi_av_attr *attr;
	bool null_av;
	bool null_addrlen;
	bool null_buf;
	const char *node, *service;
	fi_addr_t keep;	 /* after a failed remove: must still be live */
	unsigned keep_i; /* ... holding make_addr(keep_i) */
};

static long call_lookup(void *arg)
{
	struct call *k = arg;
	uint8_t buf[LT_ADDR_MAX];
	size_t len = sizeof(buf);

	return fi_av_lookup(k->av, k->fi_addr, k->null_buf ? NULL : buf,
			    k->null_addrlen ? NULL : &len);
}

/* Returns the remove's result, or INT_MIN if it failed but changed the AV. */
static long call_remove(void *arg)
{
	struct call *k = arg;
	int ret = fi_av_remove(k->av, k->fi_addrs, k->count, k->flags);

	if (ret && k->keep != FI_ADDR_NOTAVAIL && !holds(k->c, k->av, k->keep, k->keep_i))
		return INT_MIN;
	return ret;
}

static long call_open(void *arg)
{
	struct call *k = arg;
	struct fid_av *av = NULL;
	long ret;

	ret = fi_av_open(k->c->dom.domain, k->attr, k->null_av ? NULL : &av, NULL);
	/* closed again, so that a named AV leaves nothing behind and valgrind sees no leak */
	if (!ret && av)
		fi_close(&av->fid);
	return ret;
}

static long call_insert_null(void *arg)
{
	struct call *k = arg;
	fi_addr_t fi_addr;

	return fi_av_insert(k->av, NULL, k->count, &fi_addr, 0, NULL);
}

static long call_insertsvc(void *arg)
{
	struct call *k = arg;
	fi_addr_t fi_addr;

	return fi_av_insertsvc(k->av, k->node, k->service, &fi_addr, k->flags, NULL);
}

static long call_close_domain(void *arg)
{
	struct call *k = arg;

	return fi_close(&k->c->dom.domain->fid);
}

static void check_guarded(long (*fn)(void *), struct call *k, long want, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

static void check_guarded(long (*fn)(void *), struct call *k, long want, const char *fmt, ...)
{
	char what[160], got[128];
	va_list ap;
	long ret;
	int status;

	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	status = lt_guarded(fn, k, GUARD_MS, &ret);
	if (status == 0 && ret == INT_MIN)
		snprintf(got, sizeof(got), "failed but changed the av");
	else
		lt_guarded_str(status, ret, got, sizeof(got));
	LT_CHECK(status == 0 && ret == want, "%s: want %ld (%s), got %s", what, want,
		 fi_strerror((int) -want), got);
}

/* ---- open ---- */

static void test_open(struct ctx *c)
{
	struct fi_av_attr attr;
	struct call k = {.c = c};
	struct fid_av *av;
	char name[64];
	int ret;

	check_guarded(call_open, &k, -FI_EINVAL, "%s open: NULL attr", c->tag);
	memset(&attr, 0, sizeof(attr));
	attr.type = FI_AV_TABLE;
	k.attr = &attr;
	k.null_av = true;
	check_guarded(call_open, &k, -FI_EINVAL, "%s open: NULL av", c->tag);
	k.null_av = false;

	attr.type = (enum fi_av_type) 99;
	check_guarded(call_open, &k, -FI_EINVAL, "%s open: unknown type", c->tag);

	memset(&attr, 0, sizeof(attr));
	attr.type = FI_AV_UNSPEC;
	ret = fi_av_open(c->dom.domain, &attr, &av, NULL);
	if (LT_CHECK_RET(ret, 0, "%s open: FI_AV_UNSPEC", c->tag)) {
		if (lt_is_layer())
			LT_CHECK(attr.type == FI_AV_TABLE, "%s open: UNSPEC reported as TABLE (%d)",
				 c->tag, attr.type);
		else
			LT_CHECK(attr.type == FI_AV_TABLE || attr.type == FI_AV_MAP,
				 "%s open: UNSPEC resolved (%d)", c->tag, attr.type);
		LT_CHECK_RET(fi_close(&av->fid), 0, "%s close", c->tag);
	}

	memset(&attr, 0, sizeof(attr));
	attr.type = FI_AV_TABLE;
	attr.flags = FI_READ;
	check_guarded(call_open, &k, -FI_EINVAL, "%s open: FI_READ without a name", c->tag);
	attr.flags = UNKNOWN_FLAG;
	check_guarded(call_open, &k, -FI_EINVAL, "%s open: unknown flag", c->tag);
	attr.flags = 0;
	attr.rx_ctx_bits = -1;
	check_guarded(call_open, &k, -FI_EINVAL, "%s open: rx_ctx_bits -1", c->tag);
	attr.rx_ctx_bits = 65;
	check_guarded(call_open, &k, -FI_EINVAL, "%s open: rx_ctx_bits 65", c->tag);

	/* with one receive context, rx_ctx_bits cannot change an fi_addr: accepted */
	attr.rx_ctx_bits = 4;
	ret = fi_av_open(c->dom.domain, &attr, &av, NULL);
	if (LT_CHECK_RET(ret, 0, "%s open: rx_ctx_bits 4 accepted", c->tag))
		fi_close(&av->fid);
	attr.rx_ctx_bits = 0;

	/* FI_SYMMETRIC is a hint */
	attr.flags = FI_SYMMETRIC;
	ret = fi_av_open(c->dom.domain, &attr, &av, NULL);
	if (LT_CHECK_RET(ret, 0, "%s open: FI_SYMMETRIC accepted", c->tag))
		fi_close(&av->fid);
	attr.flags = 0;

	/* a count far beyond memory is only a hint (ofi_layer preallocates a bounded amount) */
	attr.count = SIZE_MAX / 2;
	k.attr = &attr;
	if (lt_is_layer())
		check_guarded(call_open, &k, 0, "%s open: huge count hint", c->tag);
	attr.count = 0;

	/* the flags this provider implements in full (their own tests go further) */
	attr.flags = FI_EVENT;
	ret = fi_av_open(c->dom.domain, &attr, &av, NULL);
	if (lt_is_layer())
		LT_CHECK_RET(ret, 0, "%s open: FI_EVENT", c->tag);
	else
		lt_note("%s open: FI_EVENT gives %d", c->tag, ret);
	if (!ret)
		fi_close(&av->fid);
	attr.flags = FI_AV_USER_ID;
	ret = fi_av_open(c->dom.domain, &attr, &av, NULL);
	if (lt_is_layer())
		LT_CHECK_RET(ret, 0, "%s open: FI_AV_USER_ID", c->tag);
	else
		lt_note("%s open: FI_AV_USER_ID gives %d", c->tag, ret);
	if (!ret)
		fi_close(&av->fid);

	/* a named AV: created, then gone once closed, so FI_READ finds nothing */
	snprintf(name, sizeof(name), "/ofi_layer_test_av.%d.%s", (int) getpid(), c->tag);
	attr.flags = 0;
	attr.name = name;
	ret = fi_av_open(c->dom.domain, &attr, &av, NULL);
	if (lt_is_layer())
		LT_CHECK_RET(ret, 0, "%s open: named av", c->tag);
	else
		lt_note("%s open: named av gives %d", c->tag, ret);
	if (!ret)
		LT_CHECK_RET(fi_close(&av->fid), 0, "%s open: named av closes", c->tag);
	attr.flags = FI_READ;
	attr.map_addr = NULL;
	k.attr = &attr;
	if (lt_is_layer())
		check_guarded(call_open, &k, -FI_ENOENT, "%s open: FI_READ of a name that is gone",
			      c->tag);
}

/* ---- insert ---- */

static void test_insert(struct ctx *c)
{
	fi_addr_t fi_addr[8];
	struct call k = {.c = c};
	struct fid_av *av;
	uint8_t *a, one[LT_ADDR_MAX];
	int ret, i;

	if (!LT_CHECK_RET(open_av(c, FI_AV_TABLE, 0, &av), 0, "%s insert: open", c->tag))
		return;
	k.av = av;
	a = make_addrs(c, 0, 8);

	/* indices in insertion order, across calls, fi_addr may be NULL */
	ret = fi_av_insert(av, a, 4, fi_addr, 0, NULL);
	LT_CHECK_RET(ret, 4, "%s insert: 4 in one call", c->tag);
	LT_CHECK(fi_addr[0] == 0 && fi_addr[1] == 1 && fi_addr[2] == 2 && fi_addr[3] == 3,
		 "%s insert: indices 0..3 (%lu %lu %lu %lu)", c->tag, (unsigned long) fi_addr[0],
		 (unsigned long) fi_addr[1], (unsigned long) fi_addr[2],
		 (unsigned long) fi_addr[3]);
	ret = fi_av_insert(av, a + 4 * c->addrlen, 1, NULL, 0, NULL);
	LT_CHECK_RET(ret, 1, "%s insert: NULL fi_addr", c->tag);
	LT_CHECK(holds(c, av, 4, 4), "%s insert: NULL fi_addr entry is index 4", c->tag);
	ret = fi_av_insert(av, a + 5 * c->addrlen, 2, fi_addr, FI_MORE, NULL);
	LT_CHECK_RET(ret, 2, "%s insert: FI_MORE", c->tag);
	LT_CHECK(fi_addr[0] == 5 && fi_addr[1] == 6, "%s insert: FI_MORE indices 5, 6", c->tag);
	ret = fi_av_insert(av, a + 7 * c->addrlen, 1, fi_addr, 0, NULL);
	LT_CHECK_RET(ret, 1, "%s insert: after FI_MORE", c->tag);
	LT_CHECK(fi_addr[0] == 7, "%s insert: index 7 after FI_MORE", c->tag);
	for (i = 0; i < 8; i++)
		LT_CHECK(holds(c, av, (fi_addr_t) i, (unsigned) i), "%s insert: lookup %d", c->tag,
			 i);

	k.count = 0;
	check_guarded(call_insert_null, &k, 0, "%s insert: count 0, NULL addr", c->tag);
	k.count = 1;
	check_guarded(call_insert_null, &k, -FI_EINVAL, "%s insert: NULL addr", c->tag);
	make_addr(c, 100, one);
	LT_CHECK_RET(fi_av_insert(av, one, 1, fi_addr, UNKNOWN_FLAG, NULL), -FI_EINVAL,
		     "%s insert: unknown flag", c->tag);
	/* nothing was taken by the refused calls */
	ret = fi_av_insert(av, one, 1, fi_addr, 0, NULL);
	LT_CHECK(ret == 1 && fi_addr[0] == 8, "%s insert: next index still 8 (%d, %lu)", c->tag,
		 ret, (unsigned long) fi_addr[0]);

	LT_CHECK_RET(fi_close(&av->fid), 0, "%s insert: close", c->tag);
	free(a);
}

/* A bad family in the middle of a call: the slot fails, the others go in, in order. */
static void test_sync_err(struct ctx *c)
{
	fi_addr_t fi_addr[3];
	struct fid_av *av;
	int err[3] = {-1, -1, -1};
	uint8_t *a;
	int ret;

	if (!LT_CHECK_RET(open_av(c, FI_AV_TABLE, 0, &av), 0, "%s sync_err: open", c->tag))
		return;
	a = make_addrs(c, 0, 3);
	((struct sockaddr *) (a + c->addrlen))->sa_family = AF_UNIX;

	ret = fi_av_insert(av, a, 3, fi_addr, 0, NULL);
	LT_CHECK_RET(ret, 2, "%s insert: one bad family of 3", c->tag);
	LT_CHECK(fi_addr[0] == 0 && fi_addr[1] == FI_ADDR_NOTAVAIL && fi_addr[2] == 1,
		 "%s insert: bad slot FI_ADDR_NOTAVAIL, others 0 and 1 (%lu %lu %lu)", c->tag,
		 (unsigned long) fi_addr[0], (unsigned long) fi_addr[1],
		 (unsigned long) fi_addr[2]);

	ret = fi_av_insert(av, a, 3, fi_addr, FI_SYNC_ERR, err);
	LT_CHECK_RET(ret, 2, "%s FI_SYNC_ERR: one bad family of 3", c->tag);
	LT_CHECK(err[0] == 0 && err[1] > 0 && err[2] == 0,
		 "%s FI_SYNC_ERR: statuses 0, errno, 0 (%d %d %d)", c->tag, err[0], err[1], err[2]);
	if (lt_is_layer())
		LT_CHECK(err[1] == FI_EINVAL, "%s FI_SYNC_ERR: bad family is FI_EINVAL", c->tag);
	LT_CHECK(fi_addr[0] == 2 && fi_addr[1] == FI_ADDR_NOTAVAIL && fi_addr[2] == 3,
		 "%s FI_SYNC_ERR: fi_addr 2, NOTAVAIL, 3", c->tag);
	LT_CHECK_RET(fi_av_insert(av, a, 1, fi_addr, FI_SYNC_ERR, NULL), -FI_EINVAL,
		     "%s FI_SYNC_ERR: no status array", c->tag);

	LT_CHECK_RET(fi_close(&av->fid), 0, "%s sync_err: close", c->tag);
	free(a);
}

/* Fields that do not name an endpoint come back zeroed. */
static void test_normalize(struct ctx *c)
{
	uint8_t a[LT_ADDR_MAX], got[LT_ADDR_MAX];
	fi_addr_t fi_addr;
	struct fid_av *av;
	size_t len = sizeof(got);
	bool zeroed;

	if (!LT_CHECK_RET(open_av(c, FI_AV_TABLE, 0, &av), 0, "%s normalize: open", c->tag))
		return;
	make_addr(c, 1, a);
	if (c->addr_format == FI_SOCKADDR_IN6)
		((struct sockaddr_in6 *) a)->sin6_flowinfo = htonl(0x12345);
	else
		memset(((struct sockaddr_in *) a)->sin_zero, 0xaa, 8);

	if (LT_CHECK_RET(fi_av_insert(av, a, 1, &fi_addr, 0, NULL), 1, "%s normalize: insert",
			 c->tag) &&
	    LT_CHECK_RET(fi_av_lookup(av, fi_addr, got, &len), 0, "%s normalize: lookup", c->tag)) {
		make_addr(c, 1, a);
		zeroed = !memcmp(got, a, c->addrlen);
		if (lt_is_layer())
			LT_CHECK(zeroed, "%s normalize: %s zeroed", c->tag,
				 c->addr_format == FI_SOCKADDR_IN6 ? "flowinfo" : "sin_zero");
		else
			lt_note("%s normalize: padding/flowinfo %s", c->tag,
				zeroed ? "zeroed" : "kept");
	}
	fi_close(&av->fid);
}

/* ---- lookup ---- */

static void test_lookup(struct ctx *c)
{
	uint8_t a[LT_ADDR_MAX], buf[LT_ADDR_MAX];
	struct call k = {.c = c};
	fi_addr_t fi_addr[2];
	struct fid_av *av;
	size_t len;
	int ret;

	if (!LT_CHECK_RET(open_av(c, FI_AV_TABLE, 0, &av), 0, "%s lookup: open", c->tag))
		return;
	k.av = av;
	make_addr(c, 0, a);
	make_addr(c, 1, a + c->addrlen);
	fi_av_insert(av, a, 2, fi_addr, 0, NULL);

	memset(buf, 0xee, sizeof(buf));
	len = c->addrlen;
	ret = fi_av_lookup(av, fi_addr[1], buf, &len);
	LT_CHECK(ret == 0 && len == c->addrlen && !memcmp(buf, a + c->addrlen, c->addrlen),
		 "%s lookup: exact buffer (ret %d, len %zu)", c->tag, ret, len);

	memset(buf, 0xee, sizeof(buf));
	len = sizeof(buf);
	ret = fi_av_lookup(av, fi_addr[0], buf, &len);
	LT_CHECK(ret == 0 && len == c->addrlen && !memcmp(buf, a, c->addrlen) &&
			 buf[c->addrlen] == 0xee,
		 "%s lookup: larger buffer, real size back (ret %d, len %zu)", c->tag, ret, len);

	memset(buf, 0xee, sizeof(buf));
	len = 4;
	ret = fi_av_lookup(av, fi_addr[0], buf, &len);
	LT_CHECK(ret == 0 && len == c->addrlen && !memcmp(buf, a, 4) && buf[4] == 0xee,
		 "%s lookup: truncated to 4 bytes, real size back (ret %d, len %zu)", c->tag, ret,
		 len);

	len = 0;
	ret = fi_av_lookup(av, fi_addr[0], NULL, &len);
	LT_CHECK(ret == 0 && len == c->addrlen, "%s lookup: size query (ret %d, len %zu)", c->tag,
		 ret, len);

	k.fi_addr = fi_addr[0];
	k.null_addrlen = true;
	check_guarded(call_lookup, &k, -FI_EINVAL, "%s lookup: NULL addrlen", c->tag);
	k.null_addrlen = false;
	k.null_buf = true;
	if (lt_is_layer())
		check_guarded(call_lookup, &k, -FI_EINVAL, "%s lookup: NULL buffer, len > 0",
			      c->tag);
	k.null_buf = false;

	k.fi_addr = 1000;
	check_guarded(call_lookup, &k, -FI_EINVAL, "%s lookup: never inserted", c->tag);
	k.fi_addr = FI_ADDR_NOTAVAIL;
	check_guarded(call_lookup, &k, -FI_EINVAL, "%s lookup: FI_ADDR_NOTAVAIL", c->tag);
	k.fi_addr = 1ULL << 40;
	check_guarded(call_lookup, &k, -FI_EINVAL, "%s lookup: 1 << 40", c->tag);

	if (LT_CHECK_RET(fi_av_remove(av, &fi_addr[0], 1, 0), 0, "%s lookup: remove", c->tag)) {
		k.fi_addr = fi_addr[0];
		check_guarded(call_lookup, &k, -FI_EINVAL, "%s lookup: removed", c->tag);
		LT_CHECK(holds(c, av, fi_addr[1], 1), "%s lookup: other entry kept", c->tag);
	}
	LT_CHECK_RET(fi_close(&av->fid), 0, "%s lookup: close", c->tag);
}

/* ---- remove ---- */

static void test_remove(struct ctx *c)
{
	struct call k = {.c = c, .keep = FI_ADDR_NOTAVAIL};
	fi_addr_t fi_addr[4], list[2];
	struct fid_av *av;
	uint8_t *a;

	if (!LT_CHECK_RET(open_av(c, FI_AV_TABLE, 0, &av), 0, "%s remove: open", c->tag))
		return;
	k.av = av;
	a = make_addrs(c, 0, 4);
	fi_av_insert(av, a, 4, fi_addr, 0, NULL);

	LT_CHECK_RET(fi_av_remove(av, fi_addr, 0, 0), 0, "%s remove: count 0", c->tag);
	k.fi_addrs = NULL;
	k.count = 1;
	check_guarded(call_remove, &k, -FI_EINVAL, "%s remove: NULL array", c->tag);

	k.fi_addrs = &fi_addr[0];
	k.flags = UNKNOWN_FLAG;
	k.keep = fi_addr[0];
	k.keep_i = 0;
	check_guarded(call_remove, &k, -FI_EINVAL, "%s remove: unknown flag", c->tag);
	k.flags = 0;

	list[0] = 1000;
	k.fi_addrs = list;
	check_guarded(call_remove, &k, -FI_EINVAL, "%s remove: never inserted", c->tag);
	list[0] = FI_ADDR_NOTAVAIL;
	check_guarded(call_remove, &k, -FI_EINVAL, "%s remove: FI_ADDR_NOTAVAIL", c->tag);

	/* all or nothing: one bad entry, or an entry listed twice, removes nothing */
	list[0] = fi_addr[1];
	list[1] = 1000;
	k.count = 2;
	k.keep = fi_addr[1];
	k.keep_i = 1;
	check_guarded(call_remove, &k, -FI_EINVAL, "%s remove: good + bad keeps the good", c->tag);
	list[1] = fi_addr[1];
	check_guarded(call_remove, &k, -FI_EINVAL, "%s remove: same fi_addr twice keeps it",
		      c->tag);

	LT_CHECK_RET(fi_av_remove(av, &fi_addr[2], 1, 0), 0, "%s remove: one", c->tag);
	k.fi_addrs = &fi_addr[2];
	k.count = 1;
	k.keep = FI_ADDR_NOTAVAIL;
	check_guarded(call_remove, &k, -FI_EINVAL, "%s remove: twice", c->tag);
	LT_CHECK(holds(c, av, fi_addr[1], 1) && holds(c, av, fi_addr[3], 3),
		 "%s remove: others kept", c->tag);
	list[0] = fi_addr[3];
	list[1] = fi_addr[0];
	LT_CHECK_RET(fi_av_remove(av, list, 2, 0), 0, "%s remove: two in one call", c->tag);
	LT_CHECK(holds(c, av, fi_addr[1], 1), "%s remove: last one kept", c->tag);

	LT_CHECK_RET(fi_close(&av->fid), 0, "%s remove: close", c->tag);
	free(a);
}

/* The lowest free index is reused, whatever order the removals came in. */
static void test_reuse(struct ctx *c)
{
	fi_addr_t fi_addr[8], list[2];
	struct fid_av *av;
	uint8_t *a;
	int ret;

	if (!LT_CHECK_RET(open_av(c, FI_AV_TABLE, 0, &av), 0, "%s reuse: open", c->tag))
		return;
	a = make_addrs(c, 0, 8);
	ret = fi_av_insert(av, a, 8, fi_addr, 0, NULL);
	LT_CHECK_RET(ret, 8, "%s reuse: insert 8", c->tag);
	free(a);

	list[0] = 5;
	LT_CHECK_RET(fi_av_remove(av, list, 1, 0), 0, "%s reuse: remove 5", c->tag);
	list[0] = 6;
	list[1] = 2;
	LT_CHECK_RET(fi_av_remove(av, list, 2, 0), 0, "%s reuse: remove 6, 2", c->tag);

	a = make_addrs(c, 100, 4);
	ret = fi_av_insert(av, a, 4, fi_addr, 0, NULL);
	LT_CHECK(ret == 4 && fi_addr[0] == 2 && fi_addr[1] == 5 && fi_addr[2] == 6 &&
			 fi_addr[3] == 8,
		 "%s reuse: new entries at 2, 5, 6, 8 (%lu %lu %lu %lu)", c->tag,
		 (unsigned long) fi_addr[0], (unsigned long) fi_addr[1], (unsigned long) fi_addr[2],
		 (unsigned long) fi_addr[3]);
	LT_CHECK(holds(c, av, 2, 100) && holds(c, av, 8, 103) && holds(c, av, 7, 7),
		 "%s reuse: contents", c->tag);
	LT_CHECK_RET(fi_close(&av->fid), 0, "%s reuse: close", c->tag);
	free(a);
}

/* ---- insertsvc, insertsym ---- */

static void test_insertsvc(struct ctx *c)
{
	bool v6 = c->addr_format == FI_SOCKADDR_IN6;
	const char *node = v6 ? "::1" : "127.0.0.1";
	uint8_t buf[LT_ADDR_MAX];
	struct call k = {.c = c};
	fi_addr_t fi_addr = 0;
	struct fid_av *av;
	size_t len = sizeof(buf);
	int err = -1, ret;

	if (!LT_CHECK_RET(open_av(c, FI_AV_TABLE, 0, &av), 0, "%s insertsvc: open", c->tag))
		return;
	k.av = av;

	ret = fi_av_insertsvc(av, node, "4000", &fi_addr, 0, NULL);
	if (LT_CHECK_RET(ret, 1, "%s insertsvc: %s 4000", c->tag, node) &&
	    LT_CHECK_RET(fi_av_lookup(av, fi_addr, buf, &len), 0, "%s insertsvc: lookup", c->tag)) {
		if (v6) {
			struct sockaddr_in6 *s = (struct sockaddr_in6 *) buf;

			LT_CHECK(s->sin6_family == AF_INET6 && ntohs(s->sin6_port) == 4000 &&
					 IN6_IS_ADDR_LOOPBACK(&s->sin6_addr),
				 "%s insertsvc: [::1]:4000 stored", c->tag);
		} else {
			struct sockaddr_in *s = (struct sockaddr_in *) buf;

			LT_CHECK(s->sin_family == AF_INET && ntohs(s->sin_port) == 4000 &&
					 s->sin_addr.s_addr == htonl(INADDR_LOOPBACK),
				 "%s insertsvc: 127.0.0.1:4000 stored", c->tag);
		}
	}
	if (!v6) {
		ret = fi_av_insertsvc(av, "localhost", "4001", &fi_addr, 0, NULL);
		LT_CHECK(ret == 1 && fi_addr == 1, "%s insertsvc: localhost 4001 at index 1 (%d)",
			 c->tag, ret);
	}

	/* a service name unknown to /etc/services: resolved locally, no network */
	fi_addr = 0;
	ret = fi_av_insertsvc(av, node, "no-such-service-zz", &fi_addr, 0, NULL);
	LT_CHECK(ret == 0 && fi_addr == FI_ADDR_NOTAVAIL,
		 "%s insertsvc: unresolvable is a failed insertion (ret %d)", c->tag, ret);
	ret = fi_av_insertsvc(av, node, "no-such-service-zz", &fi_addr, FI_SYNC_ERR, &err);
	LT_CHECK(ret == 0 && err > 0, "%s insertsvc: FI_SYNC_ERR status (ret %d, err %d)", c->tag,
		 ret, err);
	LT_CHECK_RET(fi_av_insertsvc(av, node, "4002", &fi_addr, UNKNOWN_FLAG, NULL), -FI_EINVAL,
		     "%s insertsvc: unknown flag", c->tag);
	k.node = k.service = NULL;
	check_guarded(call_insertsvc, &k, -FI_EINVAL, "%s insertsvc: no node, no service", c->tag);

	/* insertsym in full: test_av_sym */
	ret = fi_av_insertsym(av, node, 1, "5000", 2, NULL, 0, NULL);
	if (lt_is_layer())
		LT_CHECK_RET(ret, 2, "%s insertsym: one node, two ports", c->tag);
	else
		lt_note("%s insertsym: %d", c->tag, ret);

	LT_CHECK_RET(fi_close(&av->fid), 0, "%s insertsvc: close", c->tag);
}

/* ---- FI_AV_MAP ---- */

static void test_map(struct ctx *c)
{
	struct fi_av_attr attr = {.type = FI_AV_MAP, .count = 16};
	struct call k = {.c = c};
	fi_addr_t fi_addr[3], again;
	struct fid_av *av;
	uint8_t *a;
	int ret;

	ret = fi_av_open(c->dom.domain, &attr, &av, NULL);
	if (!LT_CHECK_RET(ret, 0, "%s map: open", c->tag))
		return;
	LT_CHECK(attr.type == FI_AV_MAP, "%s map: type kept", c->tag);
	k.av = av;
	a = make_addrs(c, 0, 3);
	ret = fi_av_insert(av, a, 3, fi_addr, 0, NULL);
	LT_CHECK(ret == 3 && fi_addr[0] != FI_ADDR_NOTAVAIL && fi_addr[1] != FI_ADDR_NOTAVAIL &&
			 fi_addr[2] != FI_ADDR_NOTAVAIL && fi_addr[0] != fi_addr[1] &&
			 fi_addr[1] != fi_addr[2] && fi_addr[0] != fi_addr[2],
		 "%s map: 3 distinct handles", c->tag);
	LT_CHECK(holds(c, av, fi_addr[0], 0) && holds(c, av, fi_addr[1], 1) &&
			 holds(c, av, fi_addr[2], 2),
		 "%s map: lookups", c->tag);
	LT_CHECK_RET(fi_av_remove(av, &fi_addr[1], 1, 0), 0, "%s map: remove", c->tag);
	k.fi_addr = fi_addr[1];
	check_guarded(call_lookup, &k, -FI_EINVAL, "%s map: removed handle refused", c->tag);
	ret = fi_av_insert(av, a + c->addrlen, 1, &again, 0, NULL);
	LT_CHECK(ret == 1 && holds(c, av, again, 1), "%s map: reinsert", c->tag);
	LT_CHECK(holds(c, av, fi_addr[0], 0) && holds(c, av, fi_addr[2], 2), "%s map: others kept",
		 c->tag);
	LT_CHECK_RET(fi_close(&av->fid), 0, "%s map: close", c->tag);
	free(a);
}

/* ---- duplicates (ofi_layer: allowed, each its own entry) ---- */

static void test_duplicates(struct ctx *c)
{
	fi_addr_t fi_addr[2];
	uint8_t a[2 * LT_ADDR_MAX];
	struct fid_av *av;
	int ret;

	if (!LT_CHECK_RET(open_av(c, FI_AV_TABLE, 0, &av), 0, "%s dup: open", c->tag))
		return;
	make_addr(c, 7, a);
	make_addr(c, 7, a + c->addrlen);
	ret = fi_av_insert(av, a, 2, fi_addr, 0, NULL);
	if (lt_is_layer()) {
		LT_CHECK(ret == 2 && fi_addr[0] == 0 && fi_addr[1] == 1,
			 "%s dup: same address twice, two entries", c->tag);
		LT_CHECK_RET(fi_av_remove(av, &fi_addr[0], 1, 0), 0, "%s dup: remove first",
			     c->tag);
		LT_CHECK(holds(c, av, fi_addr[1], 7), "%s dup: second kept", c->tag);
	} else {
		lt_note("%s dup: ret %d, fi_addr %lu %lu", c->tag, ret, (unsigned long) fi_addr[0],
			(unsigned long) fi_addr[1]);
	}
	LT_CHECK_RET(fi_close(&av->fid), 0, "%s dup: close", c->tag);
}

/* ---- many entries past the count hint ---- */

static void test_many(struct ctx *c)
{
	fi_addr_t *fi_addr = calloc(MANY, sizeof(*fi_addr));
	struct fid_av *av;
	bool ok = true;
	uint8_t *a;
	int ret;
	size_t i;

	if (!LT_CHECK_RET(open_av(c, FI_AV_TABLE, 4, &av), 0, "%s many: open", c->tag))
		return;
	a = make_addrs(c, 0, MANY);
	ret = fi_av_insert(av, a, MANY, fi_addr, 0, NULL);
	LT_CHECK_RET(ret, MANY, "%s many: %d past a count of 4", c->tag, MANY);
	for (i = 0; i < MANY && ok; i++)
		ok = fi_addr[i] == i && holds(c, av, fi_addr[i], (unsigned) i);
	LT_CHECK(ok, "%s many: indices and lookups (first bad %zu)", c->tag, i - 1);
	LT_CHECK_RET(fi_av_remove(av, fi_addr, MANY, 0), 0, "%s many: remove all at once", c->tag);
	ret = fi_av_insert(av, a + 5 * c->addrlen, 1, fi_addr, 0, NULL);
	LT_CHECK(ret == 1 && fi_addr[0] == 0, "%s many: index 0 again", c->tag);
	LT_CHECK_RET(fi_close(&av->fid), 0, "%s many: close", c->tag);
	free(a);
	free(fi_addr);
}

/* ---- bind, close with an endpoint, domain close with an AV ---- */

static void test_bind_close(struct ctx *c)
{
	struct call k = {.c = c};
	struct fid_ep *ep;
	struct fid_av *av;
	int ret;

	if (!LT_CHECK_RET(open_av(c, FI_AV_TABLE, 0, &av), 0, "%s close: open", c->tag))
		return;

	if (c->eq) {
		/* fi_av(3): flags are reserved and must be 0 */
		ret = lt_av_bind(av, &c->eq->fid, FI_MORE);
		if (lt_is_layer())
			LT_CHECK_RET(ret, -FI_EINVAL, "%s bind: flags refused", c->tag);
		else
			lt_note("%s bind EQ with flags: %d", c->tag, ret);
		ret = lt_av_bind(av, &c->eq->fid, 0);
		if (lt_is_layer())
			LT_CHECK_RET(ret, 0, "%s bind: EQ", c->tag);
		else
			lt_note("%s bind EQ: %d", c->tag, ret);
	} else {
		lt_note("%s bind: no EQ could be opened, not checked", c->tag);
	}

	/* the open AV holds the domain */
	check_guarded(call_close_domain, &k, -FI_EBUSY, "%s close: domain busy with an av", c->tag);

	ret = fi_endpoint(c->dom.domain, c->dom.info, &ep, NULL);
	if (!ret) {
		ret = fi_ep_bind(ep, &av->fid, 0);
		if (LT_CHECK_RET(ret, 0, "%s close: bind av to endpoint", c->tag))
			LT_CHECK_RET(fi_close(&av->fid), -FI_EBUSY,
				     "%s close: busy while an endpoint is bound", c->tag);
		LT_CHECK_RET(fi_close(&ep->fid), 0, "%s close: endpoint", c->tag);
	} else {
		lt_note("%s close: no endpoint (%s), EBUSY not checked", c->tag, fi_strerror(-ret));
	}
	LT_CHECK_RET(fi_close(&av->fid), 0, "%s close: av", c->tag);
}

/* ---- thread safety (FI_THREAD_SAFE domain) ---- */

struct thread_arg {
	struct ctx *c;
	struct fid_av *av;
	unsigned id;
	atomic_uint *errors;
	fi_addr_t kept[THREAD_ITERS / 2]; /* entries left in the AV, value thread_value(id, i) */
};

static unsigned thread_value(unsigned id, unsigned i)
{
	return 100000 * (id + 1) + i;
}

static void *thread_main(void *p)
{
	struct thread_arg *t = p;
	uint8_t a[LT_ADDR_MAX], got[LT_ADDR_MAX];
	fi_addr_t fi_addr;
	unsigned i;
	size_t len;

	for (i = 0; i < THREAD_ITERS; i++) {
		make_addr(t->c, thread_value(t->id, i), a);
		if (fi_av_insert(t->av, a, 1, &fi_addr, 0, NULL) != 1) {
			atomic_fetch_add(t->errors, 1);
			fi_addr = FI_ADDR_NOTAVAIL;
		}
		len = sizeof(got);
		if (fi_av_lookup(t->av, fi_addr, got, &len) || memcmp(got, a, t->c->addrlen))
			atomic_fetch_add(t->errors, 1);
		/* every other entry removed at once: holes appear and are refilled concurrently */
		if (i % 2 == 0) {
			if (fi_av_remove(t->av, &fi_addr, 1, 0))
				atomic_fetch_add(t->errors, 1);
		} else {
			t->kept[i / 2] = fi_addr;
		}
	}
	return NULL;
}

static int cmp_fi_addr(const void *a, const void *b)
{
	fi_addr_t x = *(const fi_addr_t *) a, y = *(const fi_addr_t *) b;

	return x < y ? -1 : x > y;
}

static void test_threads(struct ctx *c)
{
	const size_t nkept = THREADS * (THREAD_ITERS / 2);
	struct thread_arg *args = calloc(THREADS, sizeof(*args));
	fi_addr_t *all = calloc(nkept, sizeof(*all));
	pthread_t threads[THREADS];
	bool contents = true, distinct = true;
	atomic_uint errors = 0;
	uint8_t a[LT_ADDR_MAX];
	struct fid_av *av;
	fi_addr_t fi_addr;
	unsigned i, j;
	int ret;

	if (!args || !all ||
	    !LT_CHECK_RET(open_av(c, FI_AV_TABLE, 0, &av), 0, "%s threads: open", c->tag))
		goto free_arrays;
	for (i = 0; i < THREADS; i++) {
		args[i].c = c;
		args[i].av = av;
		args[i].id = i;
		args[i].errors = &errors;
		pthread_create(&threads[i], NULL, thread_main, &args[i]);
	}
	for (i = 0; i < THREADS; i++)
		pthread_join(threads[i], NULL);
	LT_CHECK(errors == 0, "%s threads: %d threads insert/lookup/remove (%u errors)", c->tag,
		 THREADS, (unsigned) errors);

	for (i = 0; i < THREADS; i++) {
		for (j = 0; j < THREAD_ITERS / 2; j++) {
			contents = contents &&
				   holds(c, av, args[i].kept[j], thread_value(i, 2 * j + 1));
			all[i * (THREAD_ITERS / 2) + j] = args[i].kept[j];
		}
	}
	LT_CHECK(contents, "%s threads: every kept entry holds its address", c->tag);
	qsort(all, nkept, sizeof(*all), cmp_fi_addr);
	for (i = 1; i < nkept; i++)
		distinct = distinct && all[i] != all[i - 1];
	LT_CHECK(distinct, "%s threads: kept entries distinct", c->tag);

	/* the table is still consistent: the lowest kept index, freed, is the next one used */
	if (LT_CHECK_RET(fi_av_remove(av, &all[0], 1, 0), 0, "%s threads: remove lowest", c->tag)) {
		make_addr(c, 1, a);
		ret = fi_av_insert(av, a, 1, &fi_addr, 0, NULL);
		LT_CHECK(ret == 1 && fi_addr == all[0], "%s threads: lowest hole reused (%lu, %lu)",
			 c->tag, (unsigned long) fi_addr, (unsigned long) all[0]);
	}
	LT_CHECK_RET(fi_av_remove(av, all, nkept, 0), 0, "%s threads: remove all", c->tag);
	ret = fi_av_insert(av, a, 1, &fi_addr, 0, NULL);
	LT_CHECK(ret == 1 && fi_addr == 0, "%s threads: index 0 after removing all (%lu)", c->tag,
		 (unsigned long) fi_addr);
	LT_CHECK_RET(fi_close(&av->fid), 0, "%s threads: close", c->tag);
free_arrays:
	free(all);
	free(args);
}

/* ---- driver ---- */

static void run_all(struct ctx *c)
{
	test_open(c);
	test_insert(c);
	test_sync_err(c);
	test_normalize(c);
	test_lookup(c);
	test_remove(c);
	test_reuse(c);
	test_insertsvc(c);
	test_map(c);
	test_duplicates(c);
	test_many(c);
	test_bind_close(c);
}

static bool ctx_open(struct ctx *c, const char *tag, struct fi_info *info)
{
	struct fi_eq_attr eq_attr = {.wait_obj = FI_WAIT_NONE};
	int ret;

	memset(c, 0, sizeof(*c));
	c->tag = tag;
	c->addr_format = info->addr_format;
	c->addrlen = info->addr_format == FI_SOCKADDR_IN6 ? sizeof(struct sockaddr_in6)
							  : sizeof(struct sockaddr_in);
	if (!LT_CHECK(info->addr_format == FI_SOCKADDR_IN || info->addr_format == FI_SOCKADDR_IN6,
		      "%s: socket address format (%u)", tag, info->addr_format))
		return false;
	ret = lt_dom_open(info, &c->dom);
	if (!LT_CHECK_RET(ret, 0, "%s: fabric and domain", tag))
		return false;
	if (fi_eq_open(c->dom.fabric, &eq_attr, &c->eq, NULL))
		c->eq = NULL;
	return true;
}

static void ctx_close(struct ctx *c)
{
	if (c->eq)
		fi_close(&c->eq->fid);
	/* all AVs closed: the domain closes */
	LT_CHECK_RET(fi_close(&c->dom.domain->fid), 0, "%s: domain closes after its avs", c->tag);
	c->dom.domain = NULL;
	lt_dom_close(&c->dom);
}

int main(int argc, char **argv)
{
	struct fi_info *hints, *info;
	struct ctx c;
	int ret;

	lt_begin(argv[0]);
	alarm(HANG_GUARD_S);

	hints = lt_hints(FI_MSG);
	info = lt_getinfo_or_skip(hints);
	if (ctx_open(&c, "ipv4", info)) {
		run_all(&c);
		ctx_close(&c);
	}
	fi_freeinfo(info);

	/* the same over IPv6, when the provider offers it on ::1 */
	hints->addr_format = FI_SOCKADDR_IN6;
	ret = fi_getinfo(LT_FI_VERSION, "::1", NULL, FI_SOURCE, hints, &info);
	if (!ret && info->addr_format == FI_SOCKADDR_IN6) {
		if (ctx_open(&c, "ipv6", info)) {
			run_all(&c);
			ctx_close(&c);
		}
		fi_freeinfo(info);
	} else {
		lt_note("no IPv6 info on ::1 (%s): IPv6 not checked", fi_strerror(-ret));
		if (!ret)
			fi_freeinfo(info);
	}

	/* FI_THREAD_SAFE domain: concurrent calls on one AV */
	hints->addr_format = FI_FORMAT_UNSPEC;
	hints->domain_attr->threading = FI_THREAD_SAFE;
	ret = lt_getinfo(hints, &info);
	if (!ret) {
		if (ctx_open(&c, "thread-safe", info)) {
			test_threads(&c);
			ctx_close(&c);
		}
		fi_freeinfo(info);
	} else {
		lt_note("no FI_THREAD_SAFE domain (%s): threads not checked", fi_strerror(-ret));
	}

	fi_freeinfo(hints);
	return lt_end();
}
