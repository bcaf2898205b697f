/*
 * FI_MULTI_RECV: one posted buffer takes several messages; completions point into it at
 * increasing offsets, and the buffer is released (FI_MULTI_RECV flag, on the last message's
 * completion or on a completion of its own) once less than FI_OPT_MIN_MULTI_RECV is left.
 */
#include "common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MIN_MULTI_RECV 256

static struct lt_dom dom;
static struct lt_ep a, b;
static fi_addr_t a_to_b;

static ssize_t post_multi(void *buf, size_t len, void *ctx)
{
	struct iovec iov = {.iov_base = buf, .iov_len = len};
	struct fi_msg msg = {
		.msg_iov = &iov,
		.iov_count = 1,
		.addr = FI_ADDR_UNSPEC,
		.context = ctx,
	};

	return LT_RETRY(fi_recvmsg(b.ep, &msg, FI_MULTI_RECV));
}

struct landing {
	size_t count;	       /* message completions seen for the buffer */
	size_t released_after; /* message count when FI_MULTI_RECV was seen, or SIZE_MAX */
	bool in_bounds, increasing, data_ok, flags_ok, errors;
};

/*
 * Reads the completions of a multi-receive buffer (context ctx, base..base+size) for n messages
 * of len bytes with pattern seeds seed0..seed0+n-1, plus the release if want_release. Entries
 * for other contexts are left in `others` order for the caller.
 */
static void collect(void *ctx, char *base, size_t size, size_t n, const size_t *lens,
		    uint64_t seed0, bool want_release, struct landing *l, const char *what)
{
	char *next_min = base;
	struct lt_comp comp;

	*l = (struct landing){.released_after = SIZE_MAX,
			      .in_bounds = true,
			      .increasing = true,
			      .data_ok = true,
			      .flags_ok = true};
	while (l->count < n || (want_release && l->released_after == SIZE_MAX)) {
		if (!lt_cq_next(&b.rx, &comp, LT_TIMEOUT_MS)) {
			LT_CHECK(false, "%s: completions arrive (%zu of %zu messages%s)", what,
				 l->count, n, want_release ? " and the release" : "");
			return;
		}
		if (comp.err || comp.op_context != ctx) {
			l->errors = true;
			lt_note("%s: unexpected completion err %d context %p", what, comp.err,
				comp.op_context);
			continue;
		}
		if (comp.len == 0 && (comp.flags & FI_MULTI_RECV)) {
			/* The release reported on an entry of its own. */
			l->released_after = l->count;
			continue;
		}
		if (l->count < n) {
			char *p = comp.buf;
			size_t len = lens[l->count];

			l->flags_ok &= (comp.flags & (FI_RECV | FI_MSG)) == (FI_RECV | FI_MSG) &&
				       comp.len == len;
			if (!p || p < base || p + len > base + size) {
				l->in_bounds = false;
			} else {
				l->increasing &= p >= next_min;
				next_min = p + len;
				l->data_ok &= lt_verify(p, len, seed0 + l->count) == len;
			}
		} else {
			l->flags_ok = false;
		}
		l->count++;
		if ((comp.flags & FI_MULTI_RECV) && l->released_after == SIZE_MAX)
			l->released_after = l->count;
	}
}

static void report(const struct landing *l, size_t n, size_t release_at, const char *what)
{
	LT_CHECK(l->count == n && !l->errors, "%s: %zu message completions for the buffer (%zu)",
		 what, n, l->count);
	LT_CHECK(l->flags_ok, "%s: each has FI_RECV|FI_MSG and the message length", what);
	LT_CHECK(l->in_bounds, "%s: each completion's buf points inside the buffer", what);
	LT_CHECK(l->increasing, "%s: at increasing, non-overlapping offsets", what);
	LT_CHECK(l->data_ok, "%s: each message's data at its buf", what);
	if (release_at == SIZE_MAX)
		LT_CHECK(l->released_after == SIZE_MAX,
			 "%s: no FI_MULTI_RECV while space >= min_multi_recv is left", what);
	else
		LT_CHECK(l->released_after == release_at,
			 "%s: FI_MULTI_RECV comes with or right after message %zu, not before "
			 "(after %zu)",
			 what, release_at, l->released_after == SIZE_MAX ? 0 : l->released_after);
}

static bool send_all(size_t n, const size_t *lens, uint64_t seed0, char **bufs,
		     struct fi_context2 *ctx)
{
	bool ok = true;

	for (size_t i = 0; i < n; i++) {
		bufs[i] = malloc(lens[i]);
		if (!bufs[i])
			return false;
		lt_fill(bufs[i], lens[i], seed0 + i);
		ok &= lt_send(&a, bufs[i], lens[i], a_to_b, &ctx[i]) == 0;
	}
	return ok;
}

static void finish_sends(size_t n, char **bufs, const char *what)
{
	struct lt_comp comp;
	size_t ok = 0;

	for (size_t i = 0; i < n; i++) {
		if (lt_cq_next(&a.tx, &comp, LT_TIMEOUT_MS))
			ok += comp.err == 0;
		free(bufs[i]);
	}
	LT_CHECK(ok == n, "%s: all %zu sends complete", what, n);
}

/* Nothing left over on any CQ; whatever is there is taken so the next section starts clean. */
static void check_no_stray(const char *what)
{
	struct lt_cq *cqs[] = {&a.tx, &a.rx, &b.tx, &b.rx};
	struct lt_comp comp;
	size_t n = 0;

	lt_cq_quiet(&b.rx, 50);
	for (size_t i = 0; i < 4; i++) {
		while (lt_cq_take(cqs[i], &comp))
			n++;
	}
	LT_CHECK(n == 0, "%s: no stray completions (%zu)", what, n);
}

/* Messages posted for first, filling the buffer down below min_multi_recv. */
static void test_expected(void)
{
	const char *what = "expected";
	static const size_t lens[5] = {1000, 1000, 1000, 1000, 1000};
	struct fi_context2 mctx, rctx, sctx[5];
	char *buf = malloc(4096), *next = calloc(1, 2000), *sbufs[5] = {0};
	struct landing l;
	struct lt_comp comp;

	if (!buf || !next)
		goto out;
	LT_CHECK_RET(post_multi(buf, 4096, &mctx), 0, "%s: FI_MULTI_RECV buffer of 4096 posted",
		     what);
	LT_CHECK_RET(lt_recv(&b, next, 2000, FI_ADDR_UNSPEC, &rctx), 0,
		     "%s: a plain receive posted after it", what);
	LT_CHECK(send_all(5, lens, 100, sbufs, sctx), "%s: five 1000-byte sends", what);
	/* 4 x 1000 leaves 96 < 256: released after the fourth; the fifth goes to the next. */
	collect(&mctx, buf, 4096, 4, lens, 100, true, &l, what);
	report(&l, 4, 4, what);
	if (lt_cq_next(&b.rx, &comp, LT_TIMEOUT_MS))
		LT_CHECK(!comp.err && comp.op_context == &rctx && comp.len == 1000 &&
				 lt_verify(next, 1000, 104) == 1000,
			 "%s: the fifth message goes to the receive posted next", what);
	else
		LT_CHECK(false, "%s: the fifth message arrives", what);
	finish_sends(5, sbufs, what);
out:
	check_no_stray(what);
	free(buf);
	free(next);
}

/* Messages that arrive before the buffer is posted land in it too. */
static void test_unexpected(void)
{
	const char *what = "unexpected";
	static const size_t lens[3] = {500, 1, 700};
	struct fi_context2 mctx, sctx[3];
	char *buf = malloc(2048), *sbufs[3] = {0};
	struct landing l;
	struct lt_comp comp;

	if (!buf)
		return;
	LT_CHECK(send_all(3, lens, 200, sbufs, sctx), "%s: three sends before any receive", what);
	lt_cq_quiet(&b.rx, 100);
	LT_CHECK(b.rx.count == 0, "%s: nothing completes with no receive posted", what);
	LT_CHECK_RET(post_multi(buf, 2048, &mctx), 0, "%s: FI_MULTI_RECV buffer of 2048 posted",
		     what);
	/* 1201 used, 847 left >= 256: the buffer stays posted. */
	collect(&mctx, buf, 2048, 3, lens, 200, false, &l, what);
	report(&l, 3, SIZE_MAX, what);
	finish_sends(3, sbufs, what);
	lt_cq_quiet(&b.rx, 100);
	LT_CHECK(b.rx.count == 0, "%s: the buffer is not released while 847 bytes are left", what);

	/* Cancelling the partly used buffer gives it back with FI_ECANCELED. */
	LT_CHECK_RET(fi_cancel(&b.ep->fid, &mctx), 0, "%s: fi_cancel of the partly used buffer",
		     what);
	if (lt_cq_next(&b.rx, &comp, LT_TIMEOUT_MS))
		LT_CHECK(comp.err == FI_ECANCELED && comp.op_context == &mctx,
			 "%s: cancel completes it with FI_ECANCELED (err %d)", what, comp.err);
	else
		LT_CHECK(false, "%s: the cancel completes", what);
	check_no_stray(what);
	free(buf);
}

/* Messages large enough for a provider's rendezvous path land in the buffer the same way. */
static void test_large(void)
{
	const char *what = "large";
	static const size_t lens[3] = {200 * 1024, 200 * 1024, 200 * 1024};
	size_t size = 3 * 200 * 1024 + 100;
	struct fi_context2 mctx, sctx[3];
	char *buf = malloc(size), *sbufs[3] = {0};
	struct landing l;

	if (!buf)
		return;
	LT_CHECK_RET(post_multi(buf, size, &mctx), 0, "%s: FI_MULTI_RECV buffer of 600 KiB + 100",
		     what);
	LT_CHECK(send_all(3, lens, 300, sbufs, sctx), "%s: three 200 KiB sends", what);
	collect(&mctx, buf, size, 3, lens, 300, true, &l, what);
	report(&l, 3, 3, what);
	finish_sends(3, sbufs, what);
	check_no_stray(what);
	free(buf);
}

int main(int argc, char **argv)
{
	struct lt_ep_opts opts = {.min_multi_recv = MIN_MULTI_RECV};
	struct fi_info *hints, *info;
	size_t value = 0, len = sizeof(value);
	fi_addr_t b_to_a;
	int ret;

	(void) argc;
	lt_begin(argv[0]);
	hints = lt_hints(FI_MSG | FI_MULTI_RECV);
	hints->tx_attr->msg_order = FI_ORDER_SAS;
	hints->rx_attr->msg_order = FI_ORDER_SAS;
	info = lt_getinfo_or_skip(hints);
	LT_CHECK(info->caps & FI_MULTI_RECV, "FI_MULTI_RECV granted");
	ret = lt_dom_open(info, &dom);
	if (!ret)
		ret = lt_pair_open(&dom, NULL, &opts, &a, &b, &a_to_b, &b_to_a);
	if (!LT_CHECK_RET(ret, 0, "endpoints, receiver with min_multi_recv %d", MIN_MULTI_RECV))
		return lt_end();
	ret = fi_getopt(&b.ep->fid, FI_OPT_ENDPOINT, FI_OPT_MIN_MULTI_RECV, &value, &len);
	LT_CHECK(ret == 0 && value == MIN_MULTI_RECV, "min_multi_recv reads back %d (%zu)",
		 MIN_MULTI_RECV, value);

	test_expected();
	test_unexpected();
	test_large();

	lt_ep_close(&a);
	lt_ep_close(&b);
	lt_dom_close(&dom);
	fi_freeinfo(info);
	fi_freeinfo(hints);
	return lt_end();
}
