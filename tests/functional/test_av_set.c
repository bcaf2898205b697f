/*
 * AV sets through the public API (fi_av_set(3)): creation attributes (empty, range with
 * stride, FI_UNIVERSE, count, comm_key, flags) and every refusal, the order after union,
 * intersect, diff, insert and remove (self operations included), sets of two AVs, collective
 * addresses, AV entries removed under a set, the AV kept open by its sets; a random run against
 * a plain model and sets used from several threads are in test_av_set_stress.c.
 *
 * Members are read through ofi_layer's fi_open_ops extension ("ofi_layer_av_set", declared
 * below as fi_layer(7) documents it), so the checks need ofi_layer: with another provider
 * the program skips. Calls with NULL pointers run in a forked child (lt_guarded).
 */
#include "test_av_set.h"
#include "rdma/fi_ext_layer.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <rdma/fi_collective.h>

const fi_addr_t none[1];

/* A distinct address of the domain's format per i (never contacted). */
static void make_addr(const struct ctx *c, unsigned i, void *out)
{
	struct sockaddr_in6 sin6;
	struct sockaddr_in sin;

	if (c->addr_format == FI_SOCKADDR_IN6) {
		memset(&sin6, 0, sizeof(sin6));
		sin6.sin6_family = AF_INET6;
		sin6.sin6_port = htons((uint16_t) (5000 + i % 1000));
		sin6.sin6_addr.s6_addr[0] = 0xfd;
		sin6.sin6_addr.s6_addr[14] = (uint8_t) (i >> 8);
		sin6.sin6_addr.s6_addr[15] = (uint8_t) i;
		memcpy(out, &sin6, sizeof(sin6));
	} else {
		memset(&sin, 0, sizeof(sin));
		sin.sin_family = AF_INET;
		sin.sin_port = htons((uint16_t) (5000 + i % 1000));
		sin.sin_addr.s_addr = htonl(0x0a020000u + i);
		memcpy(out, &sin, sizeof(sin));
	}
}

/* An AV of the given type holding n addresses; their fi_addrs in fi_addrs (if not NULL). */
struct fid_av *open_av(struct ctx *c, enum fi_av_type type, unsigned n, fi_addr_t *fi_addrs)
{
	struct fi_av_attr attr = {.type = type};
	uint8_t addr[LT_ADDR_MAX];
	struct fid_av *av;
	fi_addr_t fi_addr;
	unsigned i;

	if (!LT_CHECK_RET(fi_av_open(c->dom.domain, &attr, &av, NULL), 0, "open av"))
		return NULL;
	for (i = 0; i < n; i++) {
		make_addr(c, i, addr);
		if (fi_av_insert(av, addr, 1, &fi_addr, 0, NULL) != 1) {
			LT_CHECK(false, "insert address %u", i);
			fi_close(&av->fid);
			return NULL;
		}
		if (fi_addrs)
			fi_addrs[i] = fi_addr;
	}
	return av;
}

struct fi_av_set_attr empty_attr(void)
{
	return (struct fi_av_set_attr){
		.start_addr = FI_ADDR_NOTAVAIL,
		.end_addr = FI_ADDR_NOTAVAIL,
	};
}

static struct fi_av_set_attr range_attr(fi_addr_t start, fi_addr_t end, uint64_t stride)
{
	return (struct fi_av_set_attr){
		.start_addr = start,
		.end_addr = end,
		.stride = stride,
	};
}

static struct fi_layer_av_set_ops *ext_ops(struct fid_av_set *set)
{
	void *ops = NULL;

	if (fi_open_ops(&set->fid, FI_LAYER_AV_SET_OPS, 0, &ops, NULL))
		return NULL;
	return ops;
}

/* The members of set in order into out (room MAX_MEMBERS); returns their number or -1. */
long read_members(struct fid_av_set *set, fi_addr_t *out)
{
	struct fi_layer_av_set_ops *ops = ext_ops(set);
	size_t count = MAX_MEMBERS;

	if (!ops || ops->members(set, out, &count))
		return -1;
	return (long) count;
}

static void format_addrs(char *buf, size_t len, const fi_addr_t *a, long n)
{
	size_t used = 0;
	long i;

	buf[0] = '\0';
	for (i = 0; i < n && used + 24 < len; i++)
		used += (size_t) snprintf(buf + used, len - used, "%s%lu", i ? " " : "",
					  (unsigned long) a[i]);
	if (i < n)
		snprintf(buf + used, len - used, " ...");
}

/* One check: set holds exactly want[0..n-1] in this order. */
bool check_members_at(struct fid_av_set *set, const fi_addr_t *want, long n,
			     const char *file, int line, const char *fmt, ...)
{
	fi_addr_t got[MAX_MEMBERS];
	char what[200], gs[200], ws[200], detail[420];
	long count = read_members(set, got);
	va_list ap;
	bool ok;

	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	ok = count == n && (n == 0 || !memcmp(got, want, (size_t) n * sizeof(*want)));
	format_addrs(gs, sizeof(gs), got, count);
	format_addrs(ws, sizeof(ws), want, n);
	snprintf(detail, sizeof(detail), "got [%s], want [%s]", count < 0 ? "error" : gs, ws);
	return lt_check_at(ok, file, line, "%s%s%s", what, ok ? "" : ": ", ok ? "" : detail);
}

/* A set built with fi_av_set_insert in the order given. */
struct fid_av_set *set_of(struct fid_av *av, const fi_addr_t *ids, size_t n)
{
	struct fi_av_set_attr attr = empty_attr();
	struct fid_av_set *set;
	size_t i;

	if (fi_av_set(av, &attr, &set, NULL))
		return NULL;
	for (i = 0; i < n; i++) {
		if (fi_av_set_insert(set, ids[i])) {
			fi_close(&set->fid);
			return NULL;
		}
	}
	return set;
}

void close_set(struct fid_av_set *set)
{
	if (set)
		LT_CHECK_RET(fi_close(&set->fid), 0, "close set");
}

/* ---- calls run in a forked child ---- */

struct call {
	struct fid_av *av;
	struct fid_av_set *set;
	const struct fid_av_set *src;
	struct fi_av_set_attr *attr;
	bool null_set;
	int op; /* 0 union, 1 intersect, 2 diff */
};

static long call_av_set(void *arg)
{
	struct call *k = arg;
	struct fid_av_set *set;

	return fi_av_set(k->av, k->attr, k->null_set ? NULL : &set, NULL);
}

static long call_set_op(void *arg)
{
	struct call *k = arg;

	switch (k->op) {
	case 0:
		return fi_av_set_union(k->set, k->src);
	case 1:
		return fi_av_set_intersect(k->set, k->src);
	default:
		return fi_av_set_diff(k->set, k->src);
	}
}

static long call_addr_null(void *arg)
{
	struct call *k = arg;

	return fi_av_set_addr(k->set, NULL);
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
	lt_guarded_str(status, ret, got, sizeof(got));
	LT_CHECK(status == 0 && ret == want, "%s: want %ld (%s), got %s", what, want,
		 fi_strerror((int) -want), got);
}

/* fi_av_set with attr: want its return; on success the members too (want_n < 0: skip). */
static void check_create(struct fid_av *av, struct fi_av_set_attr attr, int want_ret,
			 const fi_addr_t *want, long want_n, const char *name)
{
	struct fid_av_set *set;
	int ret = fi_av_set(av, &attr, &set, NULL);

	if (!LT_CHECK_RET(ret, want_ret, "%s", name) || ret)
		return;
	if (want_n >= 0)
		CHECK_MEMBERS(set, want, want_n, "%s: members", name);
	fi_close(&set->fid);
}

/* ---- creation ---- */

static void test_advertised(struct ctx *c, struct fid_av *av)
{
	struct fi_info *hints = lt_hints(FI_MSG | FI_COLLECTIVE), *info = NULL;
	struct fi_collective_attr cattr = {.op = FI_NOOP, .datatype = FI_VOID};
	struct fi_av_set_attr attr = empty_attr();
	struct fid_av_set *set;
	int ret;

	/* AV sets work on every AV; collectives are offered (test_coll uses them) */
	ret = fi_av_set(av, &attr, &set, NULL);
	if (LT_CHECK_RET(ret, 0, "fi_av_set offered on the av"))
		fi_close(&set->fid);
	ret = lt_getinfo(hints, &info);
	LT_CHECK_RET(ret, 0, "FI_COLLECTIVE offered by fi_getinfo");
	if (!ret)
		fi_freeinfo(info);
	fi_freeinfo(hints);
	LT_CHECK_RET(fi_query_collective(c->dom.domain, FI_BARRIER, &cattr, 0), 0,
		     "fi_query_collective: barrier supported");
}

static void test_create(struct ctx *c)
{
	const fi_addr_t all[] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9};
	const fi_addr_t stride3[] = {1, 4, 7};
	const fi_addr_t live[] = {0, 1, 2, 3, 6, 7, 8, 9};
	const fi_addr_t live_even[] = {0, 2, 6, 8};
	struct fi_av_set_attr attr;
	struct call k = {0};
	fi_addr_t removed[] = {4, 5};
	struct fid_av *av, *map;
	struct fid_av_set *set;
	fi_addr_t map_addrs[NADDR];

	av = open_av(c, FI_AV_TABLE, NADDR, NULL);
	if (!av)
		return;
	test_advertised(c, av);

	/* empty: start/end FI_ADDR_NOTAVAIL, stride 0 */
	check_create(av, empty_attr(), 0, none, 0, "create: empty");
	attr = empty_attr();
	attr.count = SIZE_MAX;
	check_create(av, attr, 0, none, 0, "create: empty with a huge count hint");

	/* ranges: inclusive, strides that do and do not divide the range */
	check_create(av, range_attr(0, 9, 1), 0, all, NADDR, "create: range 0..9");
	check_create(av, range_attr(1, 8, 3), 0, stride3, 3, "create: range 1..8 stride 3");
	check_create(av, range_attr(1, 7, 3), 0, stride3, 3, "create: range 1..7 stride 3");
	check_create(av, range_attr(2, 2, 1), 0, &all[2], 1, "create: range 2..2");
	check_create(av, range_attr(3, 9, 100), 0, &all[3], 1, "create: stride past the end");
	check_create(av, range_attr(0, 1000, 1), 0, all, NADDR, "create: end past the av");
	check_create(av, range_attr(50, 60, 1), 0, none, 0, "create: range past the av");
	check_create(av, range_attr(0, FI_ADDR_NOTAVAIL - 1, 1ULL << 63), 0, all, 1,
		     "create: huge end and stride");
	check_create(av, range_attr(9, FI_ADDR_NOTAVAIL - 1, 1), 0, &all[9], 1,
		     "create: range to the top of fi_addr_t");

	/* count: a bound on the range's members, 0 = none; a hint otherwise */
	attr = range_attr(0, 9, 1);
	attr.count = NADDR;
	check_create(av, attr, 0, all, NADDR, "create: range with count = members");
	attr.count = NADDR - 1;
	check_create(av, attr, -FI_EINVAL, NULL, -1, "create: range with more members than count");
	attr = range_attr(0, 9, 2);
	attr.count = 5;
	check_create(av, attr, 0, NULL, -1, "create: count counts stride members only");
	attr = empty_attr();
	attr.count = 1;
	if (LT_CHECK_RET(fi_av_set(av, &attr, &set, NULL), 0, "create: count 1")) {
		LT_CHECK(!fi_av_set_insert(set, 0) && !fi_av_set_insert(set, 1) &&
				 !fi_av_set_insert(set, 2),
			 "create: count 1 does not cap growth");
		close_set(set);
	}

	/* FI_UNIVERSE: every address, in index order */
	attr = empty_attr();
	attr.flags = FI_UNIVERSE;
	check_create(av, attr, 0, all, NADDR, "create: FI_UNIVERSE");
	attr.count = 2;
	check_create(av, attr, 0, all, NADDR, "create: FI_UNIVERSE, count is a hint");

	/* removed entries are not valid addresses: neither range nor universe takes them */
	if (LT_CHECK_RET(fi_av_remove(av, removed, 2, 0), 0,
			 "create: remove 4 and 5 from the av")) {
		check_create(av, range_attr(0, 9, 1), 0, live, 8, "create: range skips removed");
		check_create(av, range_attr(0, 9, 2), 0, live_even, 4,
			     "create: stride skips removed");
		attr = range_attr(0, 9, 1);
		attr.count = 8;
		check_create(av, attr, 0, live, 8, "create: count bounds the valid members");
		attr = empty_attr();
		attr.flags = FI_UNIVERSE;
		check_create(av, attr, 0, live, 8, "create: FI_UNIVERSE skips removed");
	}

	/* FI_UNIVERSE of an FI_AV_MAP av: the handles insert gave, in order */
	map = open_av(c, FI_AV_MAP, NADDR, map_addrs);
	if (map) {
		attr = empty_attr();
		attr.flags = FI_UNIVERSE;
		check_create(map, attr, 0, map_addrs, NADDR, "create: FI_UNIVERSE of a map av");
		check_create(map, range_attr(0, 3, 1), -FI_EINVAL, NULL, -1,
			     "create: range on a map av");
		if (LT_CHECK_RET(fi_av_set(map, &attr, &set, NULL), 0, "create: map universe")) {
			LT_CHECK_RET(fi_av_set_remove(set, map_addrs[3]), 0, "map: remove");
			LT_CHECK_RET(fi_av_set_insert(set, map_addrs[3]), 0, "map: insert");
			LT_CHECK_RET(fi_av_set_insert(set, map_addrs[3]), -FI_EINVAL,
				     "map: insert a member");
			close_set(set);
		}
		LT_CHECK_RET(fi_close(&map->fid), 0, "close map av");
	}

	/* refusals */
	attr = range_attr(0, 9, 0);
	check_create(av, attr, -FI_EINVAL, NULL, -1, "create: range with stride 0");
	check_create(av, range_attr(5, 4, 1), -FI_EINVAL, NULL, -1, "create: end below start");
	check_create(av, range_attr(0, FI_ADDR_NOTAVAIL, 1), -FI_EINVAL, NULL, -1,
		     "create: start without end");
	check_create(av, range_attr(FI_ADDR_NOTAVAIL, 3, 1), -FI_EINVAL, NULL, -1,
		     "create: end without start");
	attr = empty_attr();
	attr.stride = 1;
	check_create(av, attr, -FI_EINVAL, NULL, -1, "create: stride without a range");
	attr = range_attr(0, 9, 1);
	attr.flags = FI_UNIVERSE;
	check_create(av, attr, -FI_EINVAL, NULL, -1, "create: range with FI_UNIVERSE");
	attr = empty_attr();
	attr.flags = UNKNOWN_FLAG;
	check_create(av, attr, -FI_EINVAL, NULL, -1, "create: unknown flag");
	/* the collectives a set will be used for: all supported */
	attr.flags = FI_BARRIER_SET;
	check_create(av, attr, 0, NULL, 0, "create: FI_BARRIER_SET");
	attr.flags = FI_UNIVERSE | FI_ALLREDUCE_SET | FI_GATHER_SET;
	check_create(av, attr, 0, NULL, -1, "create: FI_ALLREDUCE_SET | FI_GATHER_SET");

	k.av = av;
	check_guarded(call_av_set, &k, -FI_EINVAL, "create: NULL attr");
	attr = empty_attr();
	k.attr = &attr;
	k.null_set = true;
	check_guarded(call_av_set, &k, -FI_EINVAL, "create: NULL set pointer");

	LT_CHECK_RET(fi_close(&av->fid), 0, "create: close av");
}

static void test_comm_key(struct ctx *c)
{
	uint8_t key[16], got[16], big[300];
	struct fi_layer_av_set_ops *ops;
	struct fi_av_set_attr attr;
	struct fid_av_set *set;
	struct fid_av *av;
	size_t len;
	int ret;

	av = open_av(c, FI_AV_TABLE, NADDR, NULL);
	if (!av)
		return;
	memset(key, 0xab, sizeof(key));
	key[0] = 1;
	key[15] = 2;
	attr = empty_attr();
	attr.comm_key = key;
	attr.comm_key_size = sizeof(key);
	ret = fi_av_set(av, &attr, &set, NULL);
	if (LT_CHECK_RET(ret, 0, "comm_key: accepted") && (ops = ext_ops(set))) {
		memset(key, 0, sizeof(key)); /* the set keeps its own copy */
		len = 0;
		ret = ops->comm_key(set, NULL, &len);
		LT_CHECK(ret == -FI_ETOOSMALL && len == 16, "comm_key: size query (%d, %zu)", ret,
			 len);
		len = sizeof(got);
		ret = ops->comm_key(set, got, &len);
		LT_CHECK(ret == 0 && len == 16 && got[0] == 1 && got[1] == 0xab && got[15] == 2,
			 "comm_key: stored (%d, %zu)", ret, len);
		len = 4;
		memset(got, 0, sizeof(got));
		ret = ops->comm_key(set, got, &len);
		LT_CHECK(ret == -FI_ETOOSMALL && len == 16 && got[0] == 1 && got[4] == 0,
			 "comm_key: truncated (%d, %zu)", ret, len);
		LT_CHECK_RET(ops->comm_key(set, got, NULL), -FI_EINVAL, "comm_key: NULL size");
		fi_close(&set->fid);
	}

	/* a set without a key reports size 0; a key may come with FI_UNIVERSE */
	attr.comm_key_size = 0;
	attr.flags = FI_UNIVERSE;
	attr.comm_key = key;
	if (LT_CHECK_RET(fi_av_set(av, &attr, &set, NULL), 0, "comm_key: size 0 ignores the key") &&
	    (ops = ext_ops(set))) {
		len = sizeof(got);
		LT_CHECK(ops->comm_key(set, got, &len) == 0 && len == 0, "comm_key: none stored");
		fi_close(&set->fid);
	}

	memset(big, 7, sizeof(big));
	attr = empty_attr();
	attr.comm_key = big;
	attr.comm_key_size = 256;
	check_create(av, attr, 0, none, 0, "comm_key: 256 bytes");
	attr.comm_key_size = 257;
	check_create(av, attr, -FI_EINVAL, NULL, -1, "comm_key: 257 bytes refused");
	attr.comm_key_size = 4;
	attr.comm_key = NULL;
	check_create(av, attr, -FI_EINVAL, NULL, -1, "comm_key: size without a key");
	attr = range_attr(0, 3, 1);
	attr.comm_key = key;
	attr.comm_key_size = 16;
	check_create(av, attr, -FI_EINVAL, NULL, -1, "comm_key: with a range");
	LT_CHECK_RET(fi_close(&av->fid), 0, "comm_key: close av");
}

/* ---- operations ---- */

static void test_ops(struct ctx *c)
{
	const fi_addr_t a_ids[] = {5, 1, 9};
	const fi_addr_t b_ids[] = {8, 9, 2, 5, 7};
	const fi_addr_t union_ab[] = {5, 1, 9, 8, 2, 7};
	const fi_addr_t d_ids[] = {4, 8, 1, 6, 3, 0};
	const fi_addr_t e_ids[] = {6, 0, 9, 8};
	const fi_addr_t inter_de[] = {8, 6, 0};
	const fi_addr_t diff_de[] = {4, 1, 3};
	const fi_addr_t after_remove[] = {4, 1, 6, 3, 0};
	const fi_addr_t after_insert[] = {4, 1, 6, 3, 0, 8};
	struct fid_av_set *a, *b, *d, *e, *empty;
	struct fid_av *av;

	av = open_av(c, FI_AV_TABLE, NADDR, NULL);
	if (!av)
		return;
	a = set_of(av, a_ids, 3);
	b = set_of(av, b_ids, 5);
	d = set_of(av, d_ids, 6);
	e = set_of(av, e_ids, 4);
	empty = set_of(av, none, 0);
	if (!LT_CHECK(a && b && d && e && empty, "ops: sets built by insert"))
		goto close_sets;
	CHECK_MEMBERS(d, d_ids, 6, "insert: members in insertion order");

	/* union: new members at the end in src's order, existing ones untouched */
	LT_CHECK_RET(fi_av_set_union(a, b), 0, "union");
	CHECK_MEMBERS(a, union_ab, 6, "union: order");
	CHECK_MEMBERS(b, b_ids, 5, "union: src unchanged");
	LT_CHECK_RET(fi_av_set_union(a, b), 0, "union again");
	CHECK_MEMBERS(a, union_ab, 6, "union again: unchanged");
	LT_CHECK_RET(fi_av_set_union(a, a), 0, "self union");
	CHECK_MEMBERS(a, union_ab, 6, "self union: unchanged");
	LT_CHECK_RET(fi_av_set_union(a, empty), 0, "union with empty");
	CHECK_MEMBERS(a, union_ab, 6, "union with empty: unchanged");
	LT_CHECK_RET(fi_av_set_union(empty, b), 0, "union into empty");
	CHECK_MEMBERS(empty, b_ids, 5, "union into empty: src's order");
	LT_CHECK_RET(fi_av_set_diff(empty, empty), 0, "self diff");
	CHECK_MEMBERS(empty, none, 0, "self diff: empty");

	/* intersect and diff keep dst's order */
	LT_CHECK_RET(fi_av_set_intersect(d, e), 0, "intersect");
	CHECK_MEMBERS(d, inter_de, 3, "intersect: dst's order");
	CHECK_MEMBERS(e, e_ids, 4, "intersect: src unchanged");
	LT_CHECK_RET(fi_av_set_intersect(d, d), 0, "self intersect");
	CHECK_MEMBERS(d, inter_de, 3, "self intersect: unchanged");
	LT_CHECK_RET(fi_av_set_intersect(d, empty), 0, "intersect with empty");
	CHECK_MEMBERS(d, none, 0, "intersect with empty: empty");

	LT_CHECK_RET(fi_av_set_union(d, b), 0, "union into emptied set");
	CHECK_MEMBERS(d, b_ids, 5, "union into emptied set: src's order");
	LT_CHECK_RET(fi_av_set_diff(d, b), 0, "diff all");
	CHECK_MEMBERS(d, none, 0, "diff all: empty");
	close_set(d);
	d = set_of(av, d_ids, 6);
	if (!LT_CHECK(d != NULL, "ops: rebuild d"))
		goto close_sets;
	LT_CHECK_RET(fi_av_set_diff(d, e), 0, "diff");
	CHECK_MEMBERS(d, diff_de, 3, "diff: dst's order");
	LT_CHECK_RET(fi_av_set_diff(d, empty), 0, "diff with empty");
	CHECK_MEMBERS(d, diff_de, 3, "diff with empty: unchanged");
	LT_CHECK_RET(fi_av_set_diff(d, d), 0, "self diff of a full set");
	CHECK_MEMBERS(d, none, 0, "self diff of a full set: empty");

	/* insert appends, refuses members; remove keeps order, refuses non-members */
	close_set(d);
	d = set_of(av, d_ids, 6);
	if (!LT_CHECK(d != NULL, "ops: rebuild d"))
		goto close_sets;
	LT_CHECK_RET(fi_av_set_remove(d, 8), 0, "remove");
	CHECK_MEMBERS(d, after_remove, 5, "remove: order kept");
	LT_CHECK_RET(fi_av_set_remove(d, 8), -FI_EINVAL, "remove: a non-member");
	LT_CHECK_RET(fi_av_set_remove(d, 77), -FI_EINVAL, "remove: not in the av");
	LT_CHECK_RET(fi_av_set_remove(d, FI_ADDR_NOTAVAIL), -FI_EINVAL, "remove: FI_ADDR_NOTAVAIL");
	LT_CHECK_RET(fi_av_set_insert(d, 8), 0, "insert");
	CHECK_MEMBERS(d, after_insert, 6, "insert: appended");
	LT_CHECK_RET(fi_av_set_insert(d, 4), -FI_EINVAL, "insert: the first member again");
	LT_CHECK_RET(fi_av_set_insert(d, 8), -FI_EINVAL, "insert: the last member again");
	LT_CHECK_RET(fi_av_set_insert(d, NADDR), -FI_EINVAL, "insert: an fi_addr not in the av");
	LT_CHECK_RET(fi_av_set_insert(d, FI_ADDR_NOTAVAIL), -FI_EINVAL, "insert: FI_ADDR_NOTAVAIL");
	LT_CHECK_RET(fi_av_set_insert(d, 1ULL << 40), -FI_EINVAL, "insert: a forged fi_addr");
	CHECK_MEMBERS(d, after_insert, 6, "refused calls changed nothing");

close_sets:
	close_set(a);
	close_set(b);
	close_set(d);
	close_set(e);
	close_set(empty);
	LT_CHECK_RET(fi_close(&av->fid), 0, "ops: close av");
}

/* Sets of two AVs, foreign or NULL sources: refused, dst unchanged. */
static void test_two_avs(struct ctx *c)
{
	const fi_addr_t ids[] = {1, 2, 3};
	const fi_addr_t other_ids[] = {3, 4};
	struct fid_av_set *set, *other;
	struct fid_av *av, *av2;
	struct call k = {0};
	int op;

	av = open_av(c, FI_AV_TABLE, NADDR, NULL);
	av2 = open_av(c, FI_AV_TABLE, NADDR, NULL);
	if (!av || !av2)
		goto close_avs;
	set = set_of(av, ids, 3);
	other = set_of(av2, other_ids, 2);
	if (LT_CHECK(set && other, "two avs: sets")) {
		LT_CHECK_RET(fi_av_set_union(set, other), -FI_EINVAL, "two avs: union refused");
		LT_CHECK_RET(fi_av_set_intersect(set, other), -FI_EINVAL,
			     "two avs: intersect refused");
		LT_CHECK_RET(fi_av_set_diff(set, other), -FI_EINVAL, "two avs: diff refused");
		CHECK_MEMBERS(set, ids, 3, "two avs: dst unchanged");

		k.set = set;
		for (op = 0; op < 3; op++) {
			k.op = op;
			k.src = NULL;
			check_guarded(call_set_op, &k, -FI_EINVAL, "op %d: NULL src", op);
			/* not an AV set at all */
			k.src = (const struct fid_av_set *) av;
			check_guarded(call_set_op, &k, -FI_EINVAL, "op %d: src is an av", op);
		}
		CHECK_MEMBERS(set, ids, 3, "refused sources: dst unchanged");
	}
	close_set(set);
	close_set(other);
close_avs:
	if (av)
		LT_CHECK_RET(fi_close(&av->fid), 0, "two avs: close av");
	if (av2)
		LT_CHECK_RET(fi_close(&av2->fid), 0, "two avs: close av2");
}

/* ---- collective addresses ---- */

static void test_addr(struct ctx *c)
{
	const fi_addr_t ids[] = {2, 0, 7};
	struct fid_av_set *set, *set2;
	fi_addr_t addr, addr2, again, other;
	struct call k = {0};
	struct fid_av *av;
	size_t i;

	av = open_av(c, FI_AV_TABLE, NADDR, NULL);
	if (!av)
		return;
	set = set_of(av, ids, 3);
	set2 = set_of(av, ids, 3);
	if (!LT_CHECK(set && set2, "addr: sets"))
		goto close_sets;

	LT_CHECK_RET(fi_av_set_addr(set, &addr), 0, "addr");
	LT_CHECK(addr != FI_ADDR_NOTAVAIL, "addr: not FI_ADDR_NOTAVAIL");
	for (i = 0; i < NADDR; i++)
		if (addr == i)
			break;
	LT_CHECK(i == NADDR, "addr: not an av fi_addr (0x%llx)", (unsigned long long) addr);
	LT_CHECK_RET(fi_av_set_addr(set, &again), 0, "addr again");
	LT_CHECK(again == addr, "addr: stable while the set is unchanged");
	LT_CHECK_RET(fi_av_set_addr(set2, &other), 0, "addr of another set");
	LT_CHECK(other != addr, "addr: distinct per set, even with equal members");

	/* a collective address is not a member nor an AV entry */
	LT_CHECK_RET(fi_av_set_insert(set2, addr), -FI_EINVAL, "insert a collective address");
	LT_CHECK_RET(fi_av_set_remove(set2, addr), -FI_EINVAL, "remove a collective address");
	{
		uint8_t buf[LT_ADDR_MAX];
		size_t len = sizeof(buf);

		LT_CHECK_RET(fi_av_lookup(av, addr, buf, &len), -FI_EINVAL,
			     "fi_av_lookup of a collective address");
	}

	/* a change of membership makes a new address (the old one named the old members) */
	LT_CHECK_RET(fi_av_set_remove(set, 0), 0, "addr: change the set");
	LT_CHECK_RET(fi_av_set_addr(set, &addr2), 0, "addr after a change");
	LT_CHECK(addr2 != addr, "addr: new address after a change");
	LT_CHECK_RET(fi_av_set_union(set, set2), 0, "addr: union changes the set");
	LT_CHECK_RET(fi_av_set_addr(set, &again), 0, "addr after union");
	LT_CHECK(again != addr2 && again != addr, "addr: new address after union");
	LT_CHECK_RET(fi_av_set_union(set, set2), 0, "addr: union without change");
	LT_CHECK_RET(fi_av_set_addr(set, &addr2), 0, "addr after a no-op union");
	LT_CHECK(addr2 == again, "addr: same address when nothing changed");

	k.set = set;
	check_guarded(call_addr_null, &k, -FI_EINVAL, "addr: NULL coll_addr");

	/* an empty set has an address too */
	close_set(set2);
	set2 = set_of(av, none, 0);
	if (set2)
		LT_CHECK_RET(fi_av_set_addr(set2, &other), 0, "addr of an empty set");
close_sets:
	close_set(set);
	close_set(set2);
	LT_CHECK_RET(fi_close(&av->fid), 0, "addr: close av");
}

/* The collective address is checked where fi_addrs are used: a send to it is refused. */
static void test_addr_send(struct ctx *c)
{
	struct fi_av_set_attr attr = empty_attr();
	struct fid_av_set *set;
	struct fid_mc *mc;
	struct lt_ep ep;
	fi_addr_t coll, self;
	char buf[8] = "x";
	int ret;

	if (!LT_CHECK_RET(lt_ep_open(&c->dom, NULL, &ep), 0, "addr send: endpoint"))
		return;
	ret = lt_av_insert(&ep, ep.addr, &self);
	attr.flags = FI_UNIVERSE;
	if (LT_CHECK_RET(ret, 0, "addr send: insert self") &&
	    LT_CHECK_RET(fi_av_set(ep.av, &attr, &set, NULL), 0, "addr send: universe set")) {
		if (LT_CHECK_RET(fi_av_set_addr(set, &coll), 0, "addr send: address")) {
			LT_CHECK_RET(fi_send(ep.ep, buf, 1, NULL, coll, NULL), -FI_EINVAL,
				     "addr send: fi_send to a collective address refused");
			/* an endpoint opened without FI_COLLECTIVE joins nothing */
			LT_CHECK_RET(fi_join_collective(ep.ep, coll, set, 0, &mc, NULL),
				     -FI_EOPNOTSUPP, "addr send: no join without FI_COLLECTIVE");
		}
		close_set(set);
	}
	lt_ep_close(&ep);
}

/* ---- the AV under its sets ---- */

static void test_map_stale(struct ctx *c)
{
	struct fi_av_set_attr attr = empty_attr();
	fi_addr_t handles[4], fresh, want[5];
	uint8_t addr[LT_ADDR_MAX];
	struct fid_av_set *set;
	struct fid_av *map;

	map = open_av(c, FI_AV_MAP, 4, handles);
	if (!map)
		return;
	attr.flags = FI_UNIVERSE;
	if (!LT_CHECK_RET(fi_av_set(map, &attr, &set, NULL), 0, "map stale: universe"))
		goto close_av;
	make_addr(c, 2, addr);
	if (LT_CHECK_RET(fi_av_remove(map, &handles[2], 1, 0), 0, "map stale: remove entry 2") &&
	    LT_CHECK(fi_av_insert(map, addr, 1, &fresh, 0, NULL) == 1, "map stale: reinsert")) {
		LT_CHECK(fresh != handles[2], "map stale: a new handle (%#llx, %#llx)",
			 (unsigned long long) fresh, (unsigned long long) handles[2]);
		CHECK_MEMBERS(set, handles, 4, "map stale: the old handle stays a member");
		LT_CHECK_RET(fi_av_set_insert(set, fresh), 0, "map stale: the new handle joins");
		memcpy(want, handles, sizeof(handles));
		want[4] = fresh;
		CHECK_MEMBERS(set, want, 5, "map stale: both, new one last");
		LT_CHECK_RET(fi_av_set_remove(set, handles[2]), 0, "map stale: old one removed");
		want[2] = handles[3];
		want[3] = fresh;
		CHECK_MEMBERS(set, want, 4, "map stale: order kept");
		LT_CHECK_RET(fi_av_set_insert(set, handles[2]), -FI_EINVAL,
			     "map stale: the stale handle cannot join again");
	}
	close_set(set);
close_av:
	LT_CHECK_RET(fi_close(&map->fid), 0, "map stale: close av");
}

static void test_av_changes(struct ctx *c)
{
	const fi_addr_t ids[] = {1, 3, 5};
	const fi_addr_t without3[] = {1, 5};
	const fi_addr_t back[] = {1, 5, 3};
	uint8_t addr[LT_ADDR_MAX];
	struct fid_av_set *set, *other;
	fi_addr_t gone = 3, again;
	struct fid_av *av;

	av = open_av(c, FI_AV_TABLE, NADDR, NULL);
	if (!av)
		return;
	set = set_of(av, ids, 3);
	other = set_of(av, &ids[1], 2);
	if (!LT_CHECK(set && other, "av changes: sets"))
		goto close_sets;

	/* an AV entry removed under a set: the set keeps the fi_addr and keeps working */
	LT_CHECK_RET(fi_av_remove(av, &gone, 1, 0), 0, "av changes: remove entry 3 from the av");
	CHECK_MEMBERS(set, ids, 3, "av changes: member 3 stays");
	LT_CHECK_RET(fi_av_set_union(other, set), 0, "av changes: union");
	LT_CHECK_RET(fi_av_set_intersect(other, set), 0, "av changes: intersect");
	LT_CHECK_RET(fi_av_set_diff(other, set), 0, "av changes: diff");
	LT_CHECK_RET(fi_av_set_insert(other, 3), -FI_EINVAL, "av changes: insert a removed entry");
	LT_CHECK_RET(fi_av_set_remove(set, 3), 0, "av changes: remove the stale member");
	CHECK_MEMBERS(set, without3, 2, "av changes: order kept");

	/* the entry comes back at the same index (lowest free): it can join again */
	make_addr(c, 3, addr);
	if (LT_CHECK(fi_av_insert(av, addr, 1, &again, 0, NULL) == 1 && again == 3,
		     "av changes: reinsert at index 3")) {
		LT_CHECK_RET(fi_av_set_insert(set, 3), 0, "av changes: insert it again");
		CHECK_MEMBERS(set, back, 3, "av changes: appended");
	}

	/* FI_AV_MAP: a reinserted entry has a new handle; the stale one stays a member */
	test_map_stale(c);

	/* the AV stays open while sets refer to it */
	LT_CHECK_RET(fi_close(&av->fid), -FI_EBUSY, "av changes: av busy while sets are open");
close_sets:
	close_set(set);
	close_set(other);
	LT_CHECK_RET(fi_close(&av->fid), 0, "av changes: av closes after its sets");
}

/* ---- extension ---- */

static void test_ext(struct ctx *c)
{
	const fi_addr_t ids[] = {9, 8, 7, 6};
	struct fi_layer_av_set_ops *ops;
	struct fid_av_set *set;
	fi_addr_t out[4];
	struct fid_av *av;
	void *any = NULL;
	size_t count;
	int ret;

	av = open_av(c, FI_AV_TABLE, NADDR, NULL);
	if (!av)
		return;
	set = set_of(av, ids, 4);
	if (!LT_CHECK(set != NULL, "ext: set"))
		goto close_av;
	LT_CHECK_RET(fi_open_ops(&set->fid, "no_such_ops", 0, &any, NULL), -FI_ENOSYS,
		     "ext: unknown ops name");
	LT_CHECK_RET(fi_open_ops(&set->fid, FI_LAYER_AV_SET_OPS, 1, &any, NULL), -FI_EINVAL,
		     "ext: flags refused");
	ops = ext_ops(set);
	if (!LT_CHECK(ops && ops->size >= sizeof(*ops), "ext: ops"))
		goto close_set;
	count = 0;
	ret = ops->members(set, NULL, &count);
	LT_CHECK(ret == -FI_ETOOSMALL && count == 4, "ext: size query (%d, %zu)", ret, count);
	count = 2;
	memset(out, 0, sizeof(out));
	ret = ops->members(set, out, &count);
	LT_CHECK(ret == -FI_ETOOSMALL && count == 4 && out[0] == 9 && out[1] == 8 && out[2] == 0,
		 "ext: first part copied (%d, %zu)", ret, count);
	count = 4;
	ret = ops->members(set, out, &count);
	LT_CHECK(ret == 0 && count == 4 && out[3] == 6, "ext: all copied (%d, %zu)", ret, count);
	LT_CHECK_RET(ops->members(set, out, NULL), -FI_EINVAL, "ext: NULL count");
	count = 4;
	LT_CHECK_RET(ops->members(set, NULL, &count), -FI_EINVAL, "ext: NULL buffer with room");
	count = 4;
	LT_CHECK_RET(ops->members((struct fid_av_set *) av, out, &count), -FI_EINVAL,
		     "ext: not an av set");
close_set:
	close_set(set);
close_av:
	LT_CHECK_RET(fi_close(&av->fid), 0, "ext: close av");
}

int main(int argc, char **argv)
{
	struct fi_info *hints, *info;
	struct ctx c;
	int ret;

	lt_begin(argv[0]);
	alarm(HANG_GUARD_S);
	if (!lt_is_layer())
		lt_skip("members are read through ofi_layer's av set extension");

	hints = lt_hints(FI_MSG);
	info = lt_getinfo_or_skip(hints);
	memset(&c, 0, sizeof(c));
	c.addr_format = info->addr_format;
	c.addrlen = info->addr_format == FI_SOCKADDR_IN6 ? sizeof(struct sockaddr_in6)
							 : sizeof(struct sockaddr_in);
	ret = lt_dom_open(info, &c.dom);
	if (LT_CHECK_RET(ret, 0, "fabric and domain")) {
		test_create(&c);
		test_comm_key(&c);
		test_ops(&c);
		test_two_avs(&c);
		test_addr(&c);
		test_addr_send(&c);
		test_av_changes(&c);
		test_ext(&c);
		test_random(&c);
		lt_dom_close(&c.dom);
	}
	fi_freeinfo(info);

	/* a thread-safe domain: sets of one AV from several threads */
	hints->domain_attr->threading = FI_THREAD_SAFE;
	ret = lt_getinfo(hints, &info);
	if (!ret) {
		ret = lt_dom_open(info, &c.dom);
		if (LT_CHECK_RET(ret, 0, "thread-safe fabric and domain")) {
			test_threads(&c);
			lt_dom_close(&c.dom);
		}
		fi_freeinfo(info);
	} else {
		lt_note("no FI_THREAD_SAFE domain (%s): threads not checked", fi_strerror(-ret));
	}
	fi_freeinfo(hints);
	return lt_end();
}
