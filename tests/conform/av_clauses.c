/*
 * The clauses of fi_av(3) (libfabric 1.17, with the 1.20 additions) that fi_av_conform
 * checks, one function each: types, insertion, FI_EVENT, lookup, removal here; user IDs,
 * authorization keys, named AVs and the ops layout in av_clauses_ext.c. The table of all of
 * them ends this file. A clause gets an opened fabric, domain and (if the provider has
 * one) EQ, returns PASS, FAIL or UNSUPPORTED, and says why in one line (conform_fail...).
 * Their one-line descriptions are the table in fi_av_conform(1).
 */
#include "config.h"

#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <rdma/fi_cm.h>
#include <rdma/fi_ext_layer.h>

#include "conform.h"

#define EVENT_MS 5000
#define FLAG_UNKNOWN (1ULL << 61)

int conform_insert_n(struct env *e, struct fid_av *av, unsigned first, size_t n, fi_addr_t *fi_addr,
		     uint64_t flags, void *context)
{
	void *a = conform_addrs(e, first, n);
	int ret = fi_av_insert(av, a, n, fi_addr, flags, context);

	free(a);
	return ret;
}

enum verdict conform_done(struct env *e, struct fid_av *av, enum verdict v)
{
	if (av)
		fi_close(&av->fid);
	return v;
}

/* ---- types ---- */

static enum verdict types_open(struct env *e, enum fi_av_type type)
{
	struct fi_av_attr attr = {.type = type};
	struct fid_av *av;
	int ret;

	ret = fi_av_open(e->domain, &attr, &av, NULL);
	if (ret)
		return conform_refused(e, "fi_av_open", ret);
	if (attr.type != type)
		return conform_done(e, av, FAIL("type changed to %d", attr.type));
	return conform_done(e, av, V_PASS);
}

static enum verdict types_table_open(struct env *e)
{
	return types_open(e, FI_AV_TABLE);
}

static enum verdict types_map_open(struct env *e)
{
	return types_open(e, FI_AV_MAP);
}

static enum verdict types_unspec(struct env *e)
{
	struct fi_av_attr attr = {.type = FI_AV_UNSPEC};
	struct fid_av *av;
	int ret;

	ret = fi_av_open(e->domain, &attr, &av, NULL);
	if (ret)
		return conform_refused(e, "fi_av_open(FI_AV_UNSPEC)", ret);
	if (attr.type != FI_AV_TABLE && attr.type != FI_AV_MAP)
		return conform_done(e, av, FAIL("type reported: %d", attr.type));
	return conform_done(e, av, V_PASS);
}

/* ---- FI_AV_TABLE ---- */

static enum verdict table_order(struct env *e)
{
	fi_addr_t fi_addr[8];
	struct fid_av *av;
	int ret, i;

	OPEN_AV(FI_AV_TABLE, 0, 0, &av);
	ret = conform_insert_n(e, av, 0, 8, fi_addr, 0, NULL);
	if (ret != 8)
		return conform_done(e, av, FAIL("insert of 8: %d", ret));
	for (i = 0; i < 8; i++) {
		if (fi_addr[i] != (fi_addr_t) i || !conform_holds(e, av, fi_addr[i], (unsigned) i))
			return conform_done(
				e, av,
				FAIL("entry %d at %llu", i, (unsigned long long) fi_addr[i]));
	}
	return conform_done(e, av, V_PASS);
}

static enum verdict table_across_calls(struct env *e)
{
	fi_addr_t fi_addr[3];
	struct fid_av *av;
	int i;

	OPEN_AV(FI_AV_TABLE, 0, 0, &av);
	for (i = 0; i < 3; i++) {
		if (conform_insert_n(e, av, (unsigned) i, 1, &fi_addr[i], 0, NULL) != 1)
			return conform_done(e, av, FAIL("insert %d failed", i));
	}
	if (fi_addr[0] != 0 || fi_addr[1] != 1 || fi_addr[2] != 2)
		return conform_done(e, av,
				    FAIL("indices %llu %llu %llu", (unsigned long long) fi_addr[0],
					 (unsigned long long) fi_addr[1],
					 (unsigned long long) fi_addr[2]));
	return conform_done(e, av, V_PASS);
}

static enum verdict table_null_fi_addr(struct env *e)
{
	fi_addr_t fi_addr;
	struct fid_av *av;
	int ret;

	OPEN_AV(FI_AV_TABLE, 0, 0, &av);
	conform_insert_n(e, av, 0, 1, &fi_addr, 0, NULL);
	ret = conform_insert_n(e, av, 1, 1, NULL, 0, NULL);
	if (ret != 1)
		return conform_done(e, av, FAIL("insert with a NULL fi_addr: %d", ret));
	if (!conform_holds(e, av, 1, 1))
		return conform_done(e, av, FAIL("the entry is not at index 1"));
	return conform_done(e, av, V_PASS);
}

static enum verdict table_lowest_free(struct env *e)
{
	fi_addr_t fi_addr[6], list[2] = {4, 1}, got[2];
	struct fid_av *av;
	int ret;

	OPEN_AV(FI_AV_TABLE, 0, 0, &av);
	if (conform_insert_n(e, av, 0, 6, fi_addr, 0, NULL) != 6)
		return conform_done(e, av, FAIL("insert of 6 failed"));
	ret = fi_av_remove(av, list, 2, 0);
	if (ret)
		return conform_done(e, av, FAIL("remove of 4 and 1: %d", ret));
	ret = conform_insert_n(e, av, 10, 2, got, 0, NULL);
	if (ret != 2 || got[0] != 1 || got[1] != 4)
		return conform_done(e, av,
				    FAIL("reinserted at %llu, %llu (want 1, 4)",
					 (unsigned long long) got[0], (unsigned long long) got[1]));
	return conform_done(e, av, V_PASS);
}

static enum verdict table_grows(struct env *e)
{
	fi_addr_t *fi_addr = calloc(1000, sizeof(*fi_addr));
	struct fid_av *av;
	int ret;

	OPEN_AV(FI_AV_TABLE, 0, 4, &av);
	ret = conform_insert_n(e, av, 0, 1000, fi_addr, 0, NULL);
	if (ret != 1000 || !conform_holds(e, av, fi_addr[999], 999)) {
		free(fi_addr);
		return conform_done(e, av, FAIL("1000 insertions past a count of 4: %d", ret));
	}
	free(fi_addr);
	return conform_done(e, av, V_PASS);
}

/* ---- FI_AV_MAP ---- */

static enum verdict map_distinct(struct env *e)
{
	fi_addr_t fi_addr[4];
	struct fid_av *av;
	int i, j;

	OPEN_AV(FI_AV_MAP, 0, 0, &av);
	if (conform_insert_n(e, av, 0, 4, fi_addr, 0, NULL) != 4)
		return conform_done(e, av, FAIL("insert of 4 failed"));
	for (i = 0; i < 4; i++) {
		for (j = 0; j < i; j++) {
			if (fi_addr[i] == fi_addr[j])
				return conform_done(e, av, FAIL("handles %d and %d equal", i, j));
		}
		if (!conform_holds(e, av, fi_addr[i], (unsigned) i))
			return conform_done(e, av,
					    FAIL("handle %d does not look up its address", i));
	}
	return conform_done(e, av, V_PASS);
}

static enum verdict map_stale(struct env *e)
{
	fi_addr_t fi_addr[2], again;
	uint8_t buf[256];
	struct fid_av *av;
	size_t len = sizeof(buf);
	int ret;

	OPEN_AV(FI_AV_MAP, 0, 0, &av);
	if (conform_insert_n(e, av, 0, 2, fi_addr, 0, NULL) != 2 || fi_av_remove(av, fi_addr, 1, 0))
		return conform_done(e, av, FAIL("insert or remove failed"));
	ret = fi_av_lookup(av, fi_addr[0], buf, &len);
	if (ret != -FI_EINVAL)
		return conform_done(e, av, FAIL("lookup of the removed handle: %d", ret));
	/* the slot reused by another address: the old handle must not name it */
	conform_insert_n(e, av, 5, 1, &again, 0, NULL);
	len = sizeof(buf);
	ret = fi_av_lookup(av, fi_addr[0], buf, &len);
	if (again == fi_addr[0] || ret != -FI_EINVAL)
		return conform_done(e, av,
				    FAIL("stale handle after reuse: lookup %d%s", ret,
					 again == fi_addr[0] ? ", same value handed out" : ""));
	return conform_done(e, av, V_PASS);
}

/* ---- insertion ---- */

static enum verdict insert_count(struct env *e)
{
	fi_addr_t fi_addr[5];
	struct fid_av *av;
	int ret;

	OPEN_AV(FI_AV_TABLE, 0, 0, &av);
	ret = conform_insert_n(e, av, 0, 5, fi_addr, 0, NULL);
	return conform_done(e, av, ret == 5 ? V_PASS : FAIL("insert of 5 returned %d", ret));
}

static enum verdict insert_failed_slot(struct env *e)
{
	void *a = conform_addrs(e, 0, 3);
	fi_addr_t fi_addr[3] = {0, 0, 0};
	struct fid_av *av;
	int ret;

	OPEN_AV(FI_AV_TABLE, 0, 0, &av);
	conform_spoil(e, a, 1);
	ret = fi_av_insert(av, a, 3, fi_addr, 0, NULL);
	free(a);
	if (ret != 2)
		return conform_done(e, av, FAIL("one bad address of 3: returned %d", ret));
	if (fi_addr[1] != FI_ADDR_NOTAVAIL)
		return conform_done(
			e, av, FAIL("the bad slot holds %llu", (unsigned long long) fi_addr[1]));
	return conform_done(e, av, V_PASS);
}

static enum verdict insert_sync_err(struct env *e)
{
	void *a = conform_addrs(e, 0, 3);
	int err[3] = {-1, -1, -1}, ret;
	fi_addr_t fi_addr[3];
	struct fid_av *av;

	OPEN_AV(FI_AV_TABLE, 0, 0, &av);
	conform_spoil(e, a, 2);
	ret = fi_av_insert(av, a, 3, fi_addr, FI_SYNC_ERR, err);
	free(a);
	if (ret < 0)
		return conform_done(e, av, conform_refused(e, "insert(FI_SYNC_ERR)", ret));
	if (ret != 2 || err[0] || err[1] || err[2] <= 0)
		return conform_done(
			e, av, FAIL("returned %d, statuses %d %d %d", ret, err[0], err[1], err[2]));
	return conform_done(e, av, V_PASS);
}

static enum verdict insert_more(struct env *e)
{
	fi_addr_t fi_addr[2];
	struct fid_av *av;
	int r1, r2;

	OPEN_AV(FI_AV_TABLE, 0, 0, &av);
	r1 = conform_insert_n(e, av, 0, 1, &fi_addr[0], FI_MORE, NULL);
	r2 = conform_insert_n(e, av, 1, 1, &fi_addr[1], 0, NULL);
	if (r1 != 1 || r2 != 1 || !conform_holds(e, av, fi_addr[0], 0) ||
	    !conform_holds(e, av, fi_addr[1], 1))
		return conform_done(e, av, FAIL("FI_MORE then a last call: %d, %d", r1, r2));
	return conform_done(e, av, V_PASS);
}

static enum verdict insertsvc_node(struct env *e)
{
	const char *node = e->addr_format == FI_SOCKADDR_IN6 ? "::1" : "127.0.0.1";
	struct sockaddr_in6 got;
	fi_addr_t fi_addr;
	struct fid_av *av;
	size_t len = sizeof(got);
	int ret;

	if (e->addr_format != FI_SOCKADDR_IN && e->addr_format != FI_SOCKADDR_IN6)
		return conform_unsupported(e, "not a socket address format");
	OPEN_AV(FI_AV_TABLE, 0, 0, &av);
	ret = fi_av_insertsvc(av, node, "4000", &fi_addr, 0, NULL);
	if (ret != 1)
		return conform_done(e, av,
				    ret < 0 ? conform_refused(e, "insertsvc", ret)
					    : FAIL("insertsvc returned %d", ret));
	if (fi_av_lookup(av, fi_addr, &got, &len) || ntohs(got.sin6_port) != 4000)
		return conform_done(e, av, FAIL("the entry is not %s:4000", node));
	return conform_done(e, av, V_PASS);
}

static enum verdict insertsvc_addr_str(struct env *e)
{
	struct sockaddr_in got;
	fi_addr_t fi_addr;
	struct fid_av *av;
	size_t len = sizeof(got);
	int ret;

	if (e->addr_format != FI_SOCKADDR_IN)
		return conform_unsupported(e, "checked with IPv4 addresses only");
	OPEN_AV(FI_AV_TABLE, 0, 0, &av);
	ret = fi_av_insertsvc(av, "fi_sockaddr_in://127.0.0.1:4321", NULL, &fi_addr, 0, NULL);
	if (ret != 1)
		return conform_done(e, av,
				    ret < 0 ? conform_refused(e, "insertsvc(FI_ADDR_STR)", ret)
					    : FAIL("insertsvc(FI_ADDR_STR) returned %d", ret));
	if (fi_av_lookup(av, fi_addr, &got, &len) || ntohs(got.sin_port) != 4321 ||
	    got.sin_addr.s_addr != htonl(INADDR_LOOPBACK))
		return conform_done(e, av, FAIL("the entry is not 127.0.0.1:4321"));
	return conform_done(e, av, V_PASS);
}

static enum verdict insertsym_range(struct env *e)
{
	static const uint32_t want_ip[4] = {0x0a010101, 0x0a010101, 0x0a010102, 0x0a010102};
	static const uint16_t want_port[4] = {5000, 5001, 5000, 5001};
	struct sockaddr_in got;
	fi_addr_t fi_addr[6];
	struct fid_av *av;
	size_t len;
	int ret, i;

	if (e->addr_format != FI_SOCKADDR_IN)
		return conform_unsupported(e, "checked with IPv4 addresses only");
	OPEN_AV(FI_AV_TABLE, 0, 0, &av);
	ret = fi_av_insertsym(av, "10.1.1.1", 2, "5000", 2, fi_addr, 0, NULL);
	if (ret != 4)
		return conform_done(e, av,
				    ret < 0 ? conform_refused(e, "insertsym", ret)
					    : FAIL("2 nodes x 2 services: %d", ret));
	for (i = 0; i < 4; i++) {
		len = sizeof(got);
		if (fi_av_lookup(av, fi_addr[i], &got, &len) ||
		    ntohl(got.sin_addr.s_addr) != want_ip[i] || ntohs(got.sin_port) != want_port[i])
			return conform_done(e, av,
					    FAIL("entry %d is not node-major (10.1.1.%d:%d)", i,
						 want_ip[i] & 0xff, want_port[i]));
	}
	ret = fi_av_insertsym(av, "10.2.0.1", 3, "6000", 2, fi_addr, 0, NULL);
	if (ret != 6)
		return conform_done(e, av, FAIL("3 x 2 gave %d entries", ret));
	return conform_done(e, av, V_PASS);
}

/* ---- FI_EVENT ---- */

/*
 * fi_av_bind: libfabric 2.0 deprecates it with FI_EVENT AVs, which fi_av(3) up to 1.22
 * describes and applications of the 1.x API still use; the clauses keep testing them.
 */
static int event_bind(struct fid_av *av, struct fid_eq *eq, uint64_t flags)
{
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
	return fi_av_bind(av, &eq->fid, flags);
#pragma GCC diagnostic pop
}

static enum verdict event_av(struct env *e, struct fid_av **av, bool bind)
{
	int ret;

	if (!e->eq)
		return conform_unsupported(e, "no event queue");
	ret = conform_av_open(e, FI_AV_TABLE, FI_EVENT, 0, av);
	if (ret)
		return conform_refused(e, "fi_av_open(FI_EVENT)", ret);
	if (bind) {
		ret = event_bind(*av, e->eq, 0);
		if (ret)
			return conform_done(e, *av, FAIL("fi_av_bind: %d", ret));
	}
	return V_PASS;
}

static bool is_complete(const struct conform_event *ev, struct fid_av *av, void *context,
			uint64_t data)
{
	return !ev->is_err && ev->event == FI_AV_COMPLETE && ev->fid == &av->fid &&
	       ev->context == context && ev->data == data;
}

static enum verdict event_noeq(struct env *e)
{
	fi_addr_t fi_addr;
	struct fid_av *av;
	enum verdict v;
	int ret;

	v = event_av(e, &av, false);
	if (v != V_PASS)
		return v;
	ret = conform_insert_n(e, av, 0, 1, &fi_addr, 0, NULL);
	return conform_done(e, av, ret == -FI_ENOEQ ? V_PASS : FAIL("insert before bind: %d", ret));
}

static enum verdict event_bind_flags(struct env *e)
{
	struct fid_av *av;
	enum verdict v;
	int ret;

	v = event_av(e, &av, false);
	if (v != V_PASS)
		return v;
	ret = event_bind(av, e->eq, FI_MORE);
	return conform_done(e, av, ret == -FI_EINVAL ? V_PASS : FAIL("bind with flags: %d", ret));
}

static enum verdict event_complete(struct env *e)
{
	struct conform_event ev;
	fi_addr_t fi_addr[3];
	struct fid_av *av;
	enum verdict v;
	int ctx, ret;

	v = event_av(e, &av, true);
	if (v != V_PASS)
		return v;
	ret = conform_insert_n(e, av, 0, 3, fi_addr, 0, &ctx);
	if (ret)
		return conform_done(e, av, FAIL("insert returned %d, not 0", ret));
	ret = conform_next_event(e, &ev, EVENT_MS);
	if (ret || !is_complete(&ev, av, &ctx, 3))
		return conform_done(e, av,
				    FAIL("want FI_AV_COMPLETE, context, data 3: ret %d, error %d, "
					 "event %u, data %llu",
					 ret, ev.is_err, ev.event, (unsigned long long) ev.data));
	if (!conform_holds(e, av, fi_addr[2], 2))
		return conform_done(e, av, FAIL("fi_addr not written or entry missing"));
	if (conform_next_event(e, &ev, 200) != -FI_ETIMEDOUT)
		return conform_done(e, av, FAIL("more than one event"));
	return conform_done(e, av, V_PASS);
}

static enum verdict event_errors(struct env *e)
{
	void *a = conform_addrs(e, 0, 4);
	struct conform_event ev;
	fi_addr_t fi_addr[4];
	struct fid_av *av;
	enum verdict v;
	int ctx, ret, i;

	v = event_av(e, &av, true);
	if (v != V_PASS) {
		free(a);
		return v;
	}
	conform_spoil(e, a, 1);
	conform_spoil(e, a, 3);
	ret = fi_av_insert(av, a, 4, fi_addr, 0, &ctx);
	free(a);
	if (ret)
		return conform_done(e, av, FAIL("insert returned %d, not 0", ret));
	for (i = 1; i <= 3; i += 2) {
		ret = conform_next_event(e, &ev, EVENT_MS);
		if (ret || !ev.is_err || ev.err <= 0 || ev.data != (uint64_t) i ||
		    ev.context != &ctx || ev.fid != &av->fid)
			return conform_done(e, av,
					    FAIL("error entry for address %d: ret %d, error %d, "
						 "err %d, data %llu",
						 i, ret, ev.is_err, ev.err,
						 (unsigned long long) ev.data));
	}
	ret = conform_next_event(e, &ev, EVENT_MS);
	if (ret || !is_complete(&ev, av, &ctx, 2))
		return conform_done(e, av,
				    FAIL("then FI_AV_COMPLETE with data 2: ret %d, data %llu", ret,
					 (unsigned long long) ev.data));
	if (fi_addr[1] != FI_ADDR_NOTAVAIL || fi_addr[3] != FI_ADDR_NOTAVAIL)
		return conform_done(e, av, FAIL("failed slots not FI_ADDR_NOTAVAIL"));
	return conform_done(e, av, V_PASS);
}

static enum verdict event_all_fail(struct env *e)
{
	void *a = conform_addrs(e, 0, 2);
	struct conform_event ev;
	fi_addr_t fi_addr[2];
	struct fid_av *av;
	enum verdict v;
	int ctx, ret;

	v = event_av(e, &av, true);
	if (v != V_PASS) {
		free(a);
		return v;
	}
	conform_spoil(e, a, 0);
	conform_spoil(e, a, 1);
	ret = fi_av_insert(av, a, 2, fi_addr, 0, &ctx);
	free(a);
	if (ret)
		return conform_done(e, av, FAIL("insert returned %d, not 0", ret));
	if (conform_next_event(e, &ev, EVENT_MS) || !ev.is_err ||
	    conform_next_event(e, &ev, EVENT_MS) || !ev.is_err)
		return conform_done(e, av, FAIL("two error entries expected"));
	ret = conform_next_event(e, &ev, EVENT_MS);
	if (ret || !is_complete(&ev, av, &ctx, 0))
		return conform_done(e, av, FAIL("no FI_AV_COMPLETE with data 0 (ret %d)", ret));
	return conform_done(e, av, V_PASS);
}

static enum verdict event_zero(struct env *e)
{
	struct conform_event ev;
	struct fid_av *av;
	enum verdict v;
	int ctx, ret;

	v = event_av(e, &av, true);
	if (v != V_PASS)
		return v;
	ret = fi_av_insert(av, NULL, 0, NULL, 0, &ctx);
	if (ret)
		return conform_done(e, av, FAIL("insert of 0 returned %d", ret));
	ret = conform_next_event(e, &ev, EVENT_MS);
	if (ret || !is_complete(&ev, av, &ctx, 0))
		return conform_done(e, av, FAIL("no FI_AV_COMPLETE with data 0 (ret %d)", ret));
	return conform_done(e, av, V_PASS);
}

static enum verdict event_sync_err(struct env *e)
{
	fi_addr_t fi_addr;
	struct fid_av *av;
	enum verdict v;
	int err = 0, ret;

	v = event_av(e, &av, true);
	if (v != V_PASS)
		return v;
	ret = conform_insert_n(e, av, 0, 1, &fi_addr, FI_SYNC_ERR, &err);
	return conform_done(e, av, ret < 0 ? V_PASS : FAIL("FI_SYNC_ERR accepted: %d", ret));
}

static enum verdict event_outstanding(struct env *e)
{
	struct conform_event ev;
	fi_addr_t fi_addr[6];
	struct fid_av *av;
	enum verdict v;
	int ctx[3], seen = 0, i, ret;

	v = event_av(e, &av, true);
	if (v != V_PASS)
		return v;
	for (i = 0; i < 3; i++) {
		ret = conform_insert_n(e, av, (unsigned) (2 * i), 2, &fi_addr[2 * i], 0, &ctx[i]);
		if (ret)
			return conform_done(e, av, FAIL("insert %d returned %d", i, ret));
	}
	for (i = 0; i < 3; i++) {
		if (conform_next_event(e, &ev, EVENT_MS) || ev.is_err || ev.data != 2)
			return conform_done(e, av, FAIL("completion %d missing or wrong", i));
		seen |= ev.context == &ctx[0]	? 1
			: ev.context == &ctx[1] ? 2
			: ev.context == &ctx[2] ? 4
						: 8;
	}
	return conform_done(e, av, seen == 7 ? V_PASS : FAIL("contexts seen: %#x", seen));
}

/* ---- lookup and strings ---- */

static enum verdict lookup_exact(struct env *e)
{
	uint8_t got[256];
	fi_addr_t fi_addr;
	struct fid_av *av;
	size_t len = sizeof(got);
	int ret;

	OPEN_AV(FI_AV_TABLE, 0, 0, &av);
	conform_insert_n(e, av, 3, 1, &fi_addr, 0, NULL);
	ret = fi_av_lookup(av, fi_addr, got, &len);
	if (ret || !len || len > sizeof(got) || !conform_holds(e, av, fi_addr, 3))
		return conform_done(e, av, FAIL("lookup %d, addrlen %zu", ret, len));
	return conform_done(e, av, V_PASS);
}

static enum verdict lookup_truncate(struct env *e)
{
	uint8_t full[256], part[256];
	size_t len = sizeof(full), small = 4;
	fi_addr_t fi_addr;
	struct fid_av *av;
	int ret;

	OPEN_AV(FI_AV_TABLE, 0, 0, &av);
	conform_insert_n(e, av, 3, 1, &fi_addr, 0, NULL);
	fi_av_lookup(av, fi_addr, full, &len);
	memset(part, 0xee, sizeof(part));
	ret = fi_av_lookup(av, fi_addr, part, &small);
	if (ret || small != len || memcmp(part, full, 4) || part[4] != 0xee)
		return conform_done(e, av,
				    FAIL("4-byte buffer: ret %d, addrlen %zu (full %zu)%s", ret,
					 small, len, part[4] != 0xee ? ", wrote past it" : ""));
	return conform_done(e, av, V_PASS);
}

static enum verdict lookup_bad(struct env *e, bool removed)
{
	uint8_t got[256];
	fi_addr_t fi_addr[2];
	struct fid_av *av;
	size_t len = sizeof(got);
	int ret;

	OPEN_AV(FI_AV_TABLE, 0, 0, &av);
	conform_insert_n(e, av, 0, 2, fi_addr, 0, NULL);
	if (removed) {
		if (fi_av_remove(av, &fi_addr[0], 1, 0))
			return conform_done(e, av, FAIL("remove failed"));
		ret = fi_av_lookup(av, fi_addr[0], got, &len);
	} else {
		ret = fi_av_lookup(av, 1000, got, &len);
	}
	return conform_done(e, av, ret == -FI_EINVAL ? V_PASS : FAIL("lookup returned %d", ret));
}

static enum verdict lookup_unknown(struct env *e)
{
	return lookup_bad(e, false);
}

static enum verdict lookup_removed(struct env *e)
{
	return lookup_bad(e, true);
}

static enum verdict straddr_check(struct env *e, size_t room)
{
	void *a = conform_addrs(e, 1, 1);
	char full[256], buf[256];
	size_t need = sizeof(full), len = room;
	const char *s;
	struct fid_av *av;

	OPEN_AV(FI_AV_TABLE, 0, 0, &av);
	s = fi_av_straddr(av, a, full, &need);
	if (s != full || need != strlen(full) + 1) {
		free(a);
		return conform_done(e, av,
				    FAIL("full buffer: %s, len %zu for \"%s\"", s ? "buf" : "NULL",
					 need, s ? full : ""));
	}
	memset(buf, 'x', sizeof(buf));
	s = fi_av_straddr(av, a, buf, &len);
	free(a);
	/* the string as far as it fits, NUL-terminated within the room */
	if (s != buf || len != need || buf[(room < need ? room : need) - 1] != '\0' ||
	    strncmp(buf, full, (room < need ? room : need) - 1))
		return conform_done(e, av,
				    FAIL("%zu-byte buffer: %s, len %zu (need %zu)", room,
					 s == buf ? "buf" : "not buf", len, need));
	return conform_done(e, av, V_PASS);
}

static enum verdict straddr_full(struct env *e)
{
	return straddr_check(e, 256);
}

static enum verdict straddr_truncate(struct env *e)
{
	return straddr_check(e, 6);
}

static enum verdict rx_addr(struct env *e)
{
	fi_addr_t fi_addr[2];
	struct fi_av_attr attr = {.type = FI_AV_TABLE, .rx_ctx_bits = 8};
	struct fid_av *av;
	int ret;

	ret = fi_av_open(e->domain, &attr, &av, NULL);
	if (ret)
		return conform_refused(e, "fi_av_open(rx_ctx_bits 8)", ret);
	if (conform_insert_n(e, av, 0, 2, fi_addr, 0, NULL) != 2)
		return conform_done(e, av, FAIL("insert failed"));
	if ((fi_addr[1] >> 56) || !conform_holds(e, av, fi_rx_addr(fi_addr[1], 0, 8), 1))
		return conform_done(e, av,
				    FAIL("fi_rx_addr(fi_addr, 0, 8) does not name the entry"));
	return conform_done(e, av, V_PASS);
}

/* ---- removal, close ---- */

static enum verdict remove_flags(struct env *e)
{
	fi_addr_t fi_addr;
	struct fid_av *av;
	int ret;

	OPEN_AV(FI_AV_TABLE, 0, 0, &av);
	conform_insert_n(e, av, 0, 1, &fi_addr, 0, NULL);
	ret = fi_av_remove(av, &fi_addr, 1, FLAG_UNKNOWN);
	if (ret != -FI_EINVAL)
		return conform_done(e, av, FAIL("remove with flags: %d", ret));
	if (!conform_holds(e, av, fi_addr, 0))
		return conform_done(e, av, FAIL("the refused call removed the entry"));
	return conform_done(e, av, V_PASS);
}

static enum verdict remove_twice(struct env *e)
{
	fi_addr_t fi_addr;
	struct fid_av *av;
	int ret;

	OPEN_AV(FI_AV_TABLE, 0, 0, &av);
	conform_insert_n(e, av, 0, 1, &fi_addr, 0, NULL);
	if (fi_av_remove(av, &fi_addr, 1, 0))
		return conform_done(e, av, FAIL("first remove failed"));
	ret = fi_av_remove(av, &fi_addr, 1, 0);
	return conform_done(e, av, ret == -FI_EINVAL ? V_PASS : FAIL("second remove: %d", ret));
}

static enum verdict remove_unknown(struct env *e)
{
	fi_addr_t fi_addr = 1000;
	struct fid_av *av;
	int ret;

	OPEN_AV(FI_AV_TABLE, 0, 0, &av);
	ret = fi_av_remove(av, &fi_addr, 1, 0);
	return conform_done(e, av, ret == -FI_EINVAL ? V_PASS : FAIL("remove of 1000: %d", ret));
}

static enum verdict remove_reinsert(struct env *e)
{
	fi_addr_t fi_addr, again;
	struct fid_av *av;
	int ret;

	OPEN_AV(FI_AV_MAP, 0, 0, &av);
	conform_insert_n(e, av, 4, 1, &fi_addr, 0, NULL);
	if (fi_av_remove(av, &fi_addr, 1, 0))
		return conform_done(e, av, FAIL("remove failed"));
	ret = conform_insert_n(e, av, 4, 1, &again, 0, NULL);
	if (ret != 1 || !conform_holds(e, av, again, 4))
		return conform_done(e, av, FAIL("reinsertion: %d", ret));
	return conform_done(e, av, V_PASS);
}

static enum verdict close_busy(struct env *e)
{
	struct fid_ep *ep;
	struct fid_av *av;
	int ret;

	OPEN_AV(e->info->domain_attr->av_type == FI_AV_MAP ? FI_AV_MAP : FI_AV_TABLE, 0, 0, &av);
	ret = fi_endpoint(e->domain, e->info, &ep, NULL);
	if (ret)
		return conform_done(e, av,
				    conform_unsupported(e, "no endpoint: %s", fi_strerror(-ret)));
	ret = fi_ep_bind(ep, &av->fid, 0);
	if (ret) {
		fi_close(&ep->fid);
		return conform_done(e, av, FAIL("binding the av: %d", ret));
	}
	ret = fi_close(&av->fid);
	/* closed under the endpoint: the endpoint is left alone, closing it may crash */
	if (ret != -FI_EBUSY)
		return FAIL("close while an endpoint is bound: %d", ret);
	fi_close(&ep->fid);
	return conform_done(e, av, V_PASS);
}

const struct clause conform_clauses[] = {
	{"types.table", "FI_AV_TABLE opens and keeps its type", types_table_open},
	{"types.map", "FI_AV_MAP opens and keeps its type", types_map_open},
	{"types.unspec", "FI_AV_UNSPEC reports the type chosen", types_unspec},
	{"table.order", "indices 0..n-1 in insertion order", table_order},
	{"table.across_calls", "indices continue across insertion calls", table_across_calls},
	{"table.null_fi_addr", "fi_addr may be NULL; the entry takes the next index",
	 table_null_fi_addr},
	{"table.lowest_free", "after fi_av_remove the lowest free index is reused",
	 table_lowest_free},
	{"table.grows", "count is a hint: 1000 insertions past a count of 4", table_grows},
	{"map.distinct", "FI_AV_MAP handles are distinct and look up their address", map_distinct},
	{"map.stale", "a removed handle is -FI_EINVAL, also once its slot is reused", map_stale},
	{"insert.count", "a synchronous insert returns the number inserted", insert_count},
	{"insert.failed_slot", "a bad address: FI_ADDR_NOTAVAIL in its slot, the others count",
	 insert_failed_slot},
	{"insert.sync_err", "FI_SYNC_ERR: 0 per inserted address, errno > 0 per failed one",
	 insert_sync_err},
	{"insert.more", "FI_MORE accepted; the next call ends the list", insert_more},
	{"insertsvc.node", "insertsvc(node, service) inserts the resolved address", insertsvc_node},
	{"insertsvc.addr_str", "insertsvc with an FI_ADDR_STR node and no service",
	 insertsvc_addr_str},
	{"insertsym.range", "insertsym: nodecnt x svccnt entries, node-major", insertsym_range},
	{"event.noeq", "FI_EVENT: insertion before fi_av_bind is -FI_ENOEQ", event_noeq},
	{"event.bind_flags", "fi_av_bind with flags other than 0 is -FI_EINVAL", event_bind_flags},
	{"event.complete", "insert returns 0; one FI_AV_COMPLETE: fid, context, data = count",
	 event_complete},
	{"event.errors",
	 "one error entry per failed address (err, data = index, context), "
	 "then FI_AV_COMPLETE",
	 event_errors},
	{"event.all_fail", "every address failing: errors, then FI_AV_COMPLETE, data 0",
	 event_all_fail},
	{"event.zero", "count 0: FI_AV_COMPLETE with data 0", event_zero},
	{"event.sync_err", "FI_SYNC_ERR is refused on an FI_EVENT AV", event_sync_err},
	{"event.outstanding", "several insertions outstanding, each completes with its context",
	 event_outstanding},
	{"lookup.exact", "lookup returns the address and its size", lookup_exact},
	{"lookup.truncate", "a short buffer: truncated, *addrlen the full size", lookup_truncate},
	{"lookup.unknown", "lookup of a never-inserted fi_addr is -FI_EINVAL", lookup_unknown},
	{"lookup.removed", "lookup of a removed fi_addr is -FI_EINVAL", lookup_removed},
	{"straddr.full", "straddr returns buf, NUL-terminated, *len the size needed", straddr_full},
	{"straddr.truncate", "a short buffer: truncated and NUL-terminated, *len the size needed",
	 straddr_truncate},
	{"rx_addr", "rx_ctx_bits 8: fi_rx_addr(fi_addr, 0, 8) names the entry", rx_addr},
	{"remove.flags", "fi_av_remove with flags other than 0 is -FI_EINVAL", remove_flags},
	{"remove.twice", "removing an entry twice is -FI_EINVAL", remove_twice},
	{"remove.unknown", "removing a never-inserted fi_addr is -FI_EINVAL", remove_unknown},
	{"remove.reinsert", "a removed address can be inserted again", remove_reinsert},
	{"close.busy", "closing an AV bound to an endpoint is -FI_EBUSY", close_busy},
	{"user_id.insert", "FI_AV_USER_ID per insertion: ids in, fi_addrs out", user_id_insert},
	{"user_id.attr", "FI_AV_USER_ID AV: no per-insertion flag; fi_av_set_user_id",
	 user_id_attr},
	{"user_id.report", "a completion reports the sender's user ID", user_id_report,
	 CONFORM_NEEDS_SOURCE},
	{"auth.domain", "auth_key_size FI_AV_AUTH_KEY accepted and reported", auth_domain,
	 CONFORM_NEEDS_AUTH_KEY},
	{"auth.insert_lookup", "fi_av_insert_auth_key, fi_av_lookup_auth_key with truncation",
	 auth_insert_lookup, CONFORM_NEEDS_AUTH_KEY},
	{"auth.size", "a key of size 0 is -FI_EINVAL", auth_size, CONFORM_NEEDS_AUTH_KEY},
	{"auth.insert_keyed", "insert with FI_AUTH_KEY: key handles in, fi_addrs out",
	 auth_insert_keyed, CONFORM_NEEDS_AUTH_KEY},
	{"auth.remove", "fi_av_remove with FI_AUTH_KEY removes a key", auth_remove,
	 CONFORM_NEEDS_AUTH_KEY},
	{"named.open", "a named AV opens and reports map_addr", named_open},
	{"named.read_noname", "FI_READ without a name is refused", named_read_noname},
	{"named.read_missing", "FI_READ of a name that does not exist is refused",
	 named_read_missing},
	{"named.shared", "another process's FI_READ view: same map_addr[i], lookups; no insert",
	 named_shared},
	{"named.cleanup", "after the last close the name is gone", named_cleanup},
	{"ops.v120", "fi_ops_av has insert_auth_key, lookup_auth_key, set_user_id", ops_v120},
};

const size_t conform_clause_cnt = sizeof(conform_clauses) / sizeof(conform_clauses[0]);
