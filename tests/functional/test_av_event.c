/*
 * FI_EVENT address vectors through the public API (fi_av(3)): insertions return 0 and
 * complete on the bound EQ, one error entry per failed address (err > 0, data = the address's
 * position in the call, context = the call's) before exactly one FI_AV_COMPLETE (data = the
 * number inserted), also when every address fails or count is 0; -FI_ENOEQ before a bind;
 * bind flags refused; FI_SYNC_ERR refused; several insertions outstanding; reading the EQ
 * (fi_eq_read, fi_eq_sread, a wait fd) makes progress; insertsvc and insertsym; FI_AV_MAP;
 * a large insertion over many reads; close with insertions queued.
 */
#include "common.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define HANG_GUARD_S 120
#define EV_TIMEOUT_MS 5000
#define LARGE 200000

struct ctx {
	struct lt_dom dom;
	struct fid_eq *eq;
	size_t addrlen;
};

/* One event as read from the EQ. */
struct ev {
	bool is_err;
	uint32_t event;
	fid_t fid;
	void *context;
	uint64_t data;
	int err;
};

static void make_addr(unsigned i, struct sockaddr_in *sin)
{
	memset(sin, 0, sizeof(*sin));
	sin->sin_family = AF_INET;
	sin->sin_port = htons((uint16_t) (5000 + i % 1000));
	sin->sin_addr.s_addr = htonl(0x0a020000u + i);
}

static struct sockaddr_in *make_addrs(unsigned first, size_t n)
{
	struct sockaddr_in *a = calloc(n ? n : 1, sizeof(*a));
	size_t i;

	if (!a)
		exit(1);
	for (i = 0; i < n; i++)
		make_addr(first + (unsigned) i, &a[i]);
	return a;
}

/* The next event, error or not, reading (and so progressing) until timeout_ms. */
static int next_event(struct fid_eq *eq, struct ev *ev, int timeout_ms)
{
	uint64_t deadline = lt_now_ms() + (uint64_t) timeout_ms;
	struct fi_eq_err_entry err;
	struct fi_eq_entry entry;
	uint32_t event;
	ssize_t ret;

	memset(ev, 0, sizeof(*ev));
	for (;;) {
		ret = fi_eq_read(eq, &event, &entry, sizeof(entry), 0);
		if (ret == (ssize_t) sizeof(entry)) {
			ev->event = event;
			ev->fid = entry.fid;
			ev->context = entry.context;
			ev->data = entry.data;
			return 0;
		}
		if (ret == -FI_EAVAIL) {
			memset(&err, 0, sizeof(err));
			ret = fi_eq_readerr(eq, &err, 0);
			if (ret < 0)
				return (int) ret;
			ev->is_err = true;
			ev->fid = err.fid;
			ev->context = err.context;
			ev->data = err.data;
			ev->err = err.err;
			return 0;
		}
		if (ret != -FI_EAGAIN)
			return (int) ret;
		if (lt_now_ms() > deadline)
			return -FI_ETIMEDOUT;
	}
}

/* Nothing more on the EQ for a short while (reads progress it meanwhile). */
static bool eq_is_quiet(struct fid_eq *eq)
{
	struct ev ev;

	return next_event(eq, &ev, 200) == -FI_ETIMEDOUT;
}

static bool is_complete(const struct ev *ev, struct fid_av *av, void *context, uint64_t data)
{
	return !ev->is_err && ev->event == FI_AV_COMPLETE && ev->fid == &av->fid &&
	       ev->context == context && ev->data == data;
}

static int open_event_av(struct ctx *c, enum fi_av_type type, struct fid_av **av)
{
	struct fi_av_attr attr = {.type = type, .flags = FI_EVENT};

	return fi_av_open(c->dom.domain, &attr, av, NULL);
}

static bool holds(struct fid_av *av, fi_addr_t fi_addr, unsigned i)
{
	struct sockaddr_in want, got;
	size_t len = sizeof(got);

	make_addr(i, &want);
	return fi_av_lookup(av, fi_addr, &got, &len) == 0 && len == sizeof(got) &&
	       !memcmp(&got, &want, sizeof(got));
}

/* ---- before and at bind ---- */

static void test_bind(struct ctx *c)
{
	struct fi_cq_attr cq_attr = {.format = FI_CQ_FORMAT_CONTEXT};
	struct sockaddr_in a;
	fi_addr_t fi_addr;
	struct fid_cq *cq;
	struct fid_av *av;
	int ret;

	if (!LT_CHECK_RET(open_event_av(c, FI_AV_TABLE, &av), 0, "open FI_EVENT av"))
		return;
	make_addr(0, &a);
	LT_CHECK_RET(fi_av_insert(av, &a, 1, &fi_addr, 0, NULL), -FI_ENOEQ,
		     "insert before bind: -FI_ENOEQ");
	LT_CHECK_RET(fi_av_insertsvc(av, "127.0.0.1", "4000", &fi_addr, 0, NULL), -FI_ENOEQ,
		     "insertsvc before bind: -FI_ENOEQ");
	LT_CHECK_RET(fi_av_insertsym(av, "127.0.0.1", 1, "4000", 1, &fi_addr, 0, NULL),
		     -FI_ENOEQ, "insertsym before bind: -FI_ENOEQ");

	LT_CHECK_RET(lt_av_bind(av, &c->eq->fid, FI_EVENT), -FI_EINVAL,
		     "bind with flags: -FI_EINVAL");
	ret = fi_cq_open(c->dom.domain, &cq_attr, &cq, NULL);
	if (!ret) {
		LT_CHECK(lt_av_bind(av, &cq->fid, 0) < 0, "bind of a CQ refused");
		fi_close(&cq->fid);
	}
	LT_CHECK_RET(lt_av_bind(av, &c->eq->fid, 0), 0, "bind EQ");
	if (lt_is_layer())
		LT_CHECK(lt_av_bind(av, &c->eq->fid, 0) < 0, "second bind refused");
	/* the EQ is in use by the AV */
	LT_CHECK_RET(fi_close(&c->eq->fid), -FI_EBUSY, "EQ close while an AV is bound: busy");

	/* nothing was queued by the refused calls */
	LT_CHECK(eq_is_quiet(c->eq), "no event from refused insertions");
	LT_CHECK_RET(fi_close(&av->fid), 0, "close");
}

/* ---- the events of one insertion ---- */

static void test_good(struct ctx *c, enum fi_av_type type, const char *tag)
{
	struct sockaddr_in *a = make_addrs(0, 4);
	fi_addr_t fi_addr[4];
	struct fid_av *av;
	struct ev ev;
	int ctx, i, ret;

	if (!LT_CHECK_RET(open_event_av(c, type, &av), 0, "%s: open", tag) ||
	    !LT_CHECK_RET(lt_av_bind(av, &c->eq->fid, 0), 0, "%s: bind", tag))
		goto out;
	for (i = 0; i < 4; i++)
		fi_addr[i] = FI_ADDR_NOTAVAIL;
	ret = fi_av_insert(av, a, 4, fi_addr, 0, &ctx);
	LT_CHECK_RET(ret, 0, "%s: insert of 4 returns 0", tag);
	ret = next_event(c->eq, &ev, EV_TIMEOUT_MS);
	LT_CHECK(ret == 0 && is_complete(&ev, av, &ctx, 4),
		 "%s: FI_AV_COMPLETE, fid, context, data 4 (ret %d, err %d, event %u, data %lu)",
		 tag, ret, ev.is_err, ev.event, (unsigned long) ev.data);
	for (i = 0; i < 4; i++) {
		LT_CHECK(fi_addr[i] != FI_ADDR_NOTAVAIL && holds(av, fi_addr[i], (unsigned) i),
			 "%s: fi_addr[%d] written and holds its address", tag, i);
		if (type == FI_AV_TABLE)
			LT_CHECK(fi_addr[i] == (fi_addr_t) i, "%s: index %d", tag, i);
	}
	LT_CHECK(eq_is_quiet(c->eq), "%s: exactly one completion", tag);
	LT_CHECK_RET(fi_close(&av->fid), 0, "%s: close", tag);
out:
	free(a);
}

/* Failed addresses: one error each, in order, before the one completion. */
static void test_failures(struct ctx *c)
{
	struct sockaddr_in *a = make_addrs(10, 5);
	fi_addr_t fi_addr[5];
	struct fid_av *av;
	struct ev ev;
	int ctx, ret, i;
	bool ok;

	if (!LT_CHECK_RET(open_event_av(c, FI_AV_TABLE, &av), 0, "failures: open") ||
	    !LT_CHECK_RET(lt_av_bind(av, &c->eq->fid, 0), 0, "failures: bind"))
		goto out;
	a[1].sin_family = AF_UNIX;
	a[3].sin_family = AF_UNIX;
	ret = fi_av_insert(av, a, 5, fi_addr, 0, &ctx);
	LT_CHECK_RET(ret, 0, "failures: insert returns 0");
	for (i = 0; i < 2; i++) {
		ret = next_event(c->eq, &ev, EV_TIMEOUT_MS);
		ok = ret == 0 && ev.is_err && ev.err > 0 && ev.context == &ctx &&
		     ev.fid == &av->fid && ev.data == (uint64_t) (i ? 3 : 1);
		LT_CHECK(ok, "failures: error entry for address %d (ret %d, is_err %d, err %d, "
			 "data %lu)", i ? 3 : 1, ret, ev.is_err, ev.err, (unsigned long) ev.data);
	}
	ret = next_event(c->eq, &ev, EV_TIMEOUT_MS);
	LT_CHECK(ret == 0 && is_complete(&ev, av, &ctx, 3),
		 "failures: then FI_AV_COMPLETE with data 3 (data %lu)", (unsigned long) ev.data);
	LT_CHECK(fi_addr[1] == FI_ADDR_NOTAVAIL && fi_addr[3] == FI_ADDR_NOTAVAIL,
		 "failures: failed slots FI_ADDR_NOTAVAIL");
	LT_CHECK(fi_addr[0] == 0 && fi_addr[2] == 1 && fi_addr[4] == 2,
		 "failures: the others at 0, 1, 2");

	/* every address failing: the errors, then a completion with data 0 */
	a[0].sin_family = AF_UNIX;
	ret = fi_av_insert(av, a, 2, fi_addr, 0, &ctx);
	LT_CHECK_RET(ret, 0, "all fail: insert returns 0");
	ok = next_event(c->eq, &ev, EV_TIMEOUT_MS) == 0 && ev.is_err && ev.data == 0;
	ok = ok && next_event(c->eq, &ev, EV_TIMEOUT_MS) == 0 && ev.is_err && ev.data == 1;
	LT_CHECK(ok, "all fail: two error entries, data 0 and 1");
	ret = next_event(c->eq, &ev, EV_TIMEOUT_MS);
	LT_CHECK(ret == 0 && is_complete(&ev, av, &ctx, 0), "all fail: FI_AV_COMPLETE, data 0");

	/* count 0: a completion all the same */
	ret = fi_av_insert(av, NULL, 0, NULL, 0, &ctx);
	LT_CHECK_RET(ret, 0, "count 0: insert returns 0");
	ret = next_event(c->eq, &ev, EV_TIMEOUT_MS);
	LT_CHECK(ret == 0 && is_complete(&ev, av, &ctx, 0), "count 0: FI_AV_COMPLETE, data 0");

	/* refused calls: no event at all */
	LT_CHECK_RET(fi_av_insert(av, NULL, 1, fi_addr, 0, &ctx), -FI_EINVAL,
		     "NULL addresses: -FI_EINVAL");
	i = -1;
	ret = fi_av_insert(av, &a[2], 1, fi_addr, FI_SYNC_ERR, &i);
	LT_CHECK(ret < 0, "FI_SYNC_ERR refused on an FI_EVENT av (%d)", ret);
	if (lt_is_layer())
		LT_CHECK_RET(ret, -FI_EINVAL, "FI_SYNC_ERR on FI_EVENT: -FI_EINVAL");
	LT_CHECK(eq_is_quiet(c->eq), "refused calls: no event");
	LT_CHECK_RET(fi_close(&av->fid), 0, "failures: close");
out:
	free(a);
}

/* Several outstanding: each completes with its own context; TABLE indices in call order. */
static void test_outstanding(struct ctx *c)
{
	struct sockaddr_in *a = make_addrs(100, 9);
	fi_addr_t fi_addr[9];
	int ctx[3], seen = 0, ret, i;
	struct fid_av *av;
	struct ev ev;

	if (!LT_CHECK_RET(open_event_av(c, FI_AV_TABLE, &av), 0, "outstanding: open") ||
	    !LT_CHECK_RET(lt_av_bind(av, &c->eq->fid, 0), 0, "outstanding: bind"))
		goto out;
	LT_CHECK_RET(fi_av_insert(av, a, 2, fi_addr, FI_MORE, &ctx[0]), 0, "outstanding: 1st");
	LT_CHECK_RET(fi_av_insert(av, a + 2, 3, fi_addr + 2, FI_MORE, &ctx[1]), 0,
		     "outstanding: 2nd");
	LT_CHECK_RET(fi_av_insert(av, a + 5, 4, fi_addr + 5, 0, &ctx[2]), 0, "outstanding: 3rd");
	for (i = 0; i < 3; i++) {
		ret = next_event(c->eq, &ev, EV_TIMEOUT_MS);
		if (ret || ev.is_err || ev.event != FI_AV_COMPLETE)
			break;
		if (ev.context == &ctx[0] && ev.data == 2)
			seen |= 1;
		else if (ev.context == &ctx[1] && ev.data == 3)
			seen |= 2;
		else if (ev.context == &ctx[2] && ev.data == 4)
			seen |= 4;
	}
	LT_CHECK(seen == 7, "outstanding: three completions, each its context and count");
	for (i = 0; i < 9; i++)
		LT_CHECK(fi_addr[i] == (fi_addr_t) i && holds(av, fi_addr[i], 100 + (unsigned) i),
			 "outstanding: index %d in call order", i);
	LT_CHECK_RET(fi_close(&av->fid), 0, "outstanding: close");
out:
	free(a);
}

/* Reading is what completes: nothing is inserted until the EQ is read. */
static void test_progress(struct ctx *c)
{
	struct sockaddr_in a;
	struct fid_eq *eq = c->eq;
	fi_addr_t fi_addr = FI_ADDR_NOTAVAIL;
	struct fi_eq_entry entry;
	struct pollfd pfd;
	struct fid_av *av;
	uint32_t event;
	int ctx, fd = -1, ret;
	size_t len;

	if (!LT_CHECK_RET(open_event_av(c, FI_AV_TABLE, &av), 0, "progress: open") ||
	    !LT_CHECK_RET(lt_av_bind(av, &eq->fid, 0), 0, "progress: bind"))
		return;
	make_addr(7, &a);
	LT_CHECK_RET(fi_av_insert(av, &a, 1, &fi_addr, 0, &ctx), 0, "progress: insert");
	if (lt_is_layer()) {
		len = sizeof(a);
		LT_CHECK(fi_av_lookup(av, 0, &a, &len) == -FI_EINVAL && fi_addr == FI_ADDR_NOTAVAIL,
			 "progress: not inserted before the EQ is read");
	}
	/* the wait fd is readable: a sleeping application comes to read */
	ret = fi_control(&eq->fid, FI_GETWAIT, &fd);
	if (LT_CHECK_RET(ret, 0, "progress: FI_GETWAIT")) {
		pfd.fd = fd;
		pfd.events = POLLIN;
		LT_CHECK(poll(&pfd, 1, EV_TIMEOUT_MS) == 1, "progress: wait fd readable");
	}
	/* a blocking read completes it */
	ret = (int) fi_eq_sread(eq, &event, &entry, sizeof(entry), EV_TIMEOUT_MS, 0);
	LT_CHECK(ret == (int) sizeof(entry) && event == FI_AV_COMPLETE && entry.context == &ctx &&
			 entry.data == 1,
		 "progress: fi_eq_sread completes the insertion (%d)", ret);
	LT_CHECK(fi_addr == 0 && holds(av, 0, 7), "progress: inserted after the read");

	/* an error entry first: sread reports it, readerr takes it */
	a.sin_family = AF_UNIX;
	LT_CHECK_RET(fi_av_insert(av, &a, 1, &fi_addr, 0, &ctx), 0, "progress: bad insert");
	ret = (int) fi_eq_sread(eq, &event, &entry, sizeof(entry), EV_TIMEOUT_MS, 0);
	LT_CHECK_RET(ret, -FI_EAVAIL, "progress: sread sees the error entry");
	{
		struct fi_eq_err_entry err = {0};

		ret = (int) fi_eq_readerr(eq, &err, 0);
		LT_CHECK(ret == (int) sizeof(err) && err.err > 0 && err.data == 0 &&
				 err.context == &ctx && err.fid == &av->fid,
			 "progress: readerr (err %d)", err.err);
	}
	ret = (int) fi_eq_sread(eq, &event, &entry, sizeof(entry), EV_TIMEOUT_MS, 0);
	LT_CHECK(ret == (int) sizeof(entry) && event == FI_AV_COMPLETE && entry.data == 0,
		 "progress: then its completion");
	LT_CHECK_RET(fi_close(&av->fid), 0, "progress: close");
}

/* A large insertion spans many reads and still completes once. */
static void test_large(struct ctx *c)
{
	struct sockaddr_in *a = make_addrs(1000, LARGE);
	fi_addr_t *fi_addr = calloc(LARGE, sizeof(*fi_addr));
	struct fid_av *av;
	struct ev ev;
	bool ok = true;
	size_t i;
	int ctx, ret;

	if (!fi_addr || !LT_CHECK_RET(open_event_av(c, FI_AV_MAP, &av), 0, "large: open") ||
	    !LT_CHECK_RET(lt_av_bind(av, &c->eq->fid, 0), 0, "large: bind"))
		goto out;
	LT_CHECK_RET(fi_av_insert(av, a, LARGE, fi_addr, 0, &ctx), 0, "large: insert %d", LARGE);
	ret = next_event(c->eq, &ev, 4 * EV_TIMEOUT_MS);
	LT_CHECK(ret == 0 && is_complete(&ev, av, &ctx, LARGE), "large: FI_AV_COMPLETE, data %d",
		 LARGE);
	for (i = 0; i < LARGE && ok; i += 997)
		ok = holds(av, fi_addr[i], 1000 + (unsigned) i);
	LT_CHECK(ok, "large: handles valid");
	LT_CHECK(eq_is_quiet(c->eq), "large: one completion only");
	LT_CHECK_RET(fi_close(&av->fid), 0, "large: close");
out:
	free(fi_addr);
	free(a);
}

/* insertsvc and insertsym complete the same way; resolution failures are error entries. */
static void test_svc_sym(struct ctx *c)
{
	fi_addr_t fi_addr[4];
	struct fid_av *av;
	struct ev ev;
	int ctx, ret;

	if (!LT_CHECK_RET(open_event_av(c, FI_AV_TABLE, &av), 0, "svc: open") ||
	    !LT_CHECK_RET(lt_av_bind(av, &c->eq->fid, 0), 0, "svc: bind"))
		return;
	LT_CHECK_RET(fi_av_insertsvc(av, "127.0.0.1", "4000", fi_addr, 0, &ctx), 0,
		     "svc: insertsvc returns 0");
	ret = next_event(c->eq, &ev, EV_TIMEOUT_MS);
	LT_CHECK(ret == 0 && is_complete(&ev, av, &ctx, 1) && fi_addr[0] == 0,
		 "svc: FI_AV_COMPLETE, data 1, index 0");

	LT_CHECK_RET(fi_av_insertsvc(av, "127.0.0.1", "no-such-service-zz", fi_addr, 0, &ctx), 0,
		     "svc: unresolvable returns 0");
	ret = next_event(c->eq, &ev, EV_TIMEOUT_MS);
	LT_CHECK(ret == 0 && ev.is_err && ev.err > 0 && ev.data == 0 && ev.context == &ctx,
		 "svc: unresolvable is an error entry");
	ret = next_event(c->eq, &ev, EV_TIMEOUT_MS);
	LT_CHECK(ret == 0 && is_complete(&ev, av, &ctx, 0) && fi_addr[0] == FI_ADDR_NOTAVAIL,
		 "svc: then FI_AV_COMPLETE with data 0");

	LT_CHECK_RET(fi_av_insertsym(av, "10.3.0.1", 2, "6000", 2, fi_addr, 0, &ctx), 0,
		     "sym: 2 nodes x 2 ports returns 0");
	ret = next_event(c->eq, &ev, EV_TIMEOUT_MS);
	LT_CHECK(ret == 0 && is_complete(&ev, av, &ctx, 4), "sym: FI_AV_COMPLETE, data 4");
	LT_CHECK(fi_addr[0] == 1 && fi_addr[1] == 2 && fi_addr[2] == 3 && fi_addr[3] == 4,
		 "sym: indices 1..4");
	LT_CHECK_RET(fi_close(&av->fid), 0, "svc: close");
}

/* Closing with insertions still queued drops them; the EQ can close after. */
static void test_close_queued(struct ctx *c)
{
	struct sockaddr_in *a = make_addrs(0, 3);
	fi_addr_t fi_addr[3];
	struct fid_av *av;
	int ctx;

	if (!LT_CHECK_RET(open_event_av(c, FI_AV_TABLE, &av), 0, "close queued: open") ||
	    !LT_CHECK_RET(lt_av_bind(av, &c->eq->fid, 0), 0, "close queued: bind"))
		goto out;
	LT_CHECK_RET(fi_av_insert(av, a, 3, fi_addr, 0, &ctx), 0, "close queued: insert");
	LT_CHECK_RET(fi_close(&av->fid), 0, "close queued: close with an insertion queued");
	if (lt_is_layer())
		LT_CHECK(eq_is_quiet(c->eq), "close queued: the dropped insertion has no event");
out:
	free(a);
}

/* FI_AV_USER_ID per insertion on an FI_EVENT AV: the ids go in, the fi_addrs come out. */
static void test_user_id(struct ctx *c)
{
	struct sockaddr_in *a = make_addrs(300, 2);
	fi_addr_t fi_addr[2] = {0x1234, 0x5678};
	struct fid_av *av;
	struct ev ev;
	int ctx, ret;

	if (!LT_CHECK_RET(open_event_av(c, FI_AV_TABLE, &av), 0, "user id: open") ||
	    !LT_CHECK_RET(lt_av_bind(av, &c->eq->fid, 0), 0, "user id: bind"))
		goto out;
	ret = fi_av_insert(av, a, 2, fi_addr, FI_AV_USER_ID, &ctx);
	if (!lt_is_layer() && ret) {
		lt_note("user id: FI_AV_USER_ID insert gives %d", ret);
	} else if (LT_CHECK_RET(ret, 0, "user id: insert with FI_AV_USER_ID")) {
		ret = next_event(c->eq, &ev, EV_TIMEOUT_MS);
		LT_CHECK(ret == 0 && is_complete(&ev, av, &ctx, 2) && fi_addr[0] == 0 &&
				 fi_addr[1] == 1,
			 "user id: completes; the array holds the fi_addrs now");
	}
	LT_CHECK_RET(fi_close(&av->fid), 0, "user id: close");
out:
	free(a);
}

int main(int argc, char **argv)
{
	struct fi_eq_attr eq_attr = {.wait_obj = FI_WAIT_UNSPEC};
	struct fi_info *hints, *info;
	struct ctx c;

	lt_begin(argv[0]);
	alarm(HANG_GUARD_S);
	hints = lt_hints(FI_MSG);
	info = lt_getinfo_or_skip(hints);
	memset(&c, 0, sizeof(c));
	if (!LT_CHECK(info->addr_format == FI_SOCKADDR_IN, "IPv4 addresses (%u)",
		      info->addr_format) ||
	    !LT_CHECK_RET(lt_dom_open(info, &c.dom), 0, "fabric and domain") ||
	    !LT_CHECK_RET(fi_eq_open(c.dom.fabric, &eq_attr, &c.eq, NULL), 0, "EQ"))
		goto out;

	test_bind(&c);
	test_good(&c, FI_AV_TABLE, "table");
	test_good(&c, FI_AV_MAP, "map");
	test_failures(&c);
	test_outstanding(&c);
	test_progress(&c);
	test_large(&c);
	test_svc_sym(&c);
	test_close_queued(&c);
	test_user_id(&c);

	LT_CHECK_RET(fi_close(&c.eq->fid), 0, "EQ closes once no AV is bound");
	c.eq = NULL;
out:
	if (c.eq)
		fi_close(&c.eq->fid);
	lt_dom_close(&c.dom);
	fi_freeinfo(info);
	fi_freeinfo(hints);
	return lt_end();
}
