/*
 * fi_cancel: a posted receive completes with FI_ECANCELED and its context, exactly once, and its
 * buffer takes no message afterwards; cancelling what is not pending generates nothing (and,
 * ofi_layer's contract, returns -FI_ENOENT).
 */
#include "common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static struct lt_dom dom;
static struct lt_ep a, b;
static fi_addr_t a_to_b;

static size_t drain(struct lt_cq *cq, int ms)
{
	struct lt_comp comp;
	size_t n = 0;

	lt_cq_quiet(cq, ms);
	while (lt_cq_take(cq, &comp))
		n++;
	return n;
}

static void check_not_pending(void *ctx, const char *what)
{
	int ret = fi_cancel(&b.ep->fid, ctx);

	/* fi_endpoint(3): 0 means "submitted"; nothing is found, so nothing may complete. */
	LT_CHECK(ret == 0 || ret == -FI_ENOENT, "%s: fi_cancel returns 0 or -FI_ENOENT (%d)", what,
		 ret);
	if (lt_is_layer())
		LT_CHECK_RET(ret, -FI_ENOENT, "%s: ofi_layer returns -FI_ENOENT", what);
	else
		lt_note("%s: %s returned %d (ofi_layer must return -FI_ENOENT)", what, lt_prov(),
			ret);
	LT_CHECK(drain(&b.rx, 100) == 0, "%s: no completion is generated", what);
}

static void test_cancel_posted(void)
{
	struct fi_context2 rctx, rctx2, sctx;
	char buf[64], buf2[64], msg[64] = "not for the cancelled buffer";
	struct lt_comp comp;
	int ret;

	memset(buf, 0xcc, sizeof(buf));
	LT_CHECK_RET(lt_recv(&b, buf, sizeof(buf), FI_ADDR_UNSPEC, &rctx), 0, "posted: fi_recv");
	ret = fi_cancel(&b.ep->fid, &rctx);
	LT_CHECK_RET(ret, 0, "posted: fi_cancel of a posted receive");
	if (lt_cq_next(&b.rx, &comp, LT_TIMEOUT_MS)) {
		LT_CHECK(
			comp.err == FI_ECANCELED && comp.op_context == &rctx,
			"posted: error completion FI_ECANCELED with the receive's context (err %d)",
			comp.err);
		LT_CHECK(comp.flags & FI_RECV, "posted: the error entry has FI_RECV (flags %#llx)",
			 (unsigned long long) comp.flags);
	} else {
		LT_CHECK(false, "posted: the cancel completes within %d ms", LT_TIMEOUT_MS);
	}
	LT_CHECK(drain(&b.rx, 100) == 0, "posted: exactly one completion for the cancel");

	/* The cancelled buffer is out of the game: the next message goes to the next receive. */
	LT_CHECK_RET(lt_send(&a, msg, sizeof(msg), a_to_b, &sctx), 0, "posted: fi_send after");
	lt_cq_quiet(&b.rx, 100);
	LT_CHECK(b.rx.count == 0, "posted: the message does not complete the cancelled receive");
	LT_CHECK_RET(lt_recv(&b, buf2, sizeof(buf2), FI_ADDR_UNSPEC, &rctx2), 0,
		     "posted: a new fi_recv");
	if (lt_cq_next(&b.rx, &comp, LT_TIMEOUT_MS))
		LT_CHECK(!comp.err && comp.op_context == &rctx2 && !strcmp(buf2, msg),
			 "posted: the message lands in the new receive");
	else
		LT_CHECK(false, "posted: the message arrives");
	{
		bool untouched = true;

		for (size_t i = 0; i < sizeof(buf); i++)
			untouched &= (unsigned char) buf[i] == 0xcc;
		LT_CHECK(untouched, "posted: the cancelled buffer was not written");
	}
	LT_CHECK(lt_cq_next(&a.tx, &comp, LT_TIMEOUT_MS) && !comp.err, "posted: send completes");

	/* Again, now that the receive is done and gone. */
	check_not_pending(&rctx, "cancel of a cancelled receive");
	check_not_pending(&rctx2, "cancel of a completed receive");
}

static void test_cancel_unknown(void)
{
	struct fi_context2 never;

	check_not_pending(&never, "cancel of a context never posted");
}

/* One of three posted receives is cancelled; messages go to the other two, in order. */
static void test_cancel_middle(void)
{
	struct fi_context2 rctx[3], sctx[2];
	char rbuf[3][32], sbuf[2][32] = {"first", "second"};
	struct lt_comp comp;
	bool cancelled = false, got1 = false, got3 = false;

	memset(rbuf, 0, sizeof(rbuf));
	for (int i = 0; i < 3; i++)
		LT_CHECK_RET(lt_recv(&b, rbuf[i], sizeof(rbuf[i]), FI_ADDR_UNSPEC, &rctx[i]), 0,
			     "middle: receive %d posted", i);
	LT_CHECK_RET(fi_cancel(&b.ep->fid, &rctx[1]), 0, "middle: fi_cancel of the second");
	for (int i = 0; i < 2; i++)
		LT_CHECK_RET(lt_send(&a, sbuf[i], sizeof(sbuf[i]), a_to_b, &sctx[i]), 0,
			     "middle: send %d", i);
	for (int n = 0; n < 3 && lt_cq_next(&b.rx, &comp, LT_TIMEOUT_MS); n++) {
		if (comp.op_context == &rctx[1])
			cancelled = comp.err == FI_ECANCELED;
		else if (comp.op_context == &rctx[0])
			got1 = !comp.err && !strcmp(rbuf[0], "first");
		else if (comp.op_context == &rctx[2])
			got3 = !comp.err && !strcmp(rbuf[2], "second");
	}
	LT_CHECK(cancelled, "middle: the second receive completes with FI_ECANCELED");
	LT_CHECK(got1 && got3, "middle: the messages land in the first and third, in order");
	LT_CHECK(rbuf[1][0] == 0, "middle: the cancelled buffer was not written");
	LT_CHECK(drain(&a.tx, 50) == 2, "middle: both sends complete");
	LT_CHECK(drain(&b.rx, 50) == 0, "middle: no other completions");
}

/* Cancelling a batch: every receive completes exactly once, cancelled. */
static void test_cancel_many(void)
{
	enum { N = 100 };
	struct fi_context2 rctx[N];
	static char rbuf[N][16];
	unsigned seen[N] = {0};
	struct lt_comp comp;
	size_t posted = 0, cancel_ok = 0, bad = 0;

	for (size_t i = 0; i < N; i++)
		posted += lt_recv(&b, rbuf[i], sizeof(rbuf[i]), FI_ADDR_UNSPEC, &rctx[i]) == 0;
	for (size_t i = 0; i < N; i++)
		cancel_ok += fi_cancel(&b.ep->fid, &rctx[N - 1 - i]) == 0;
	LT_CHECK(posted == N && cancel_ok == N, "many: %d receives posted and cancelled", N);
	lt_cq_wait(&b.rx, N, LT_TIMEOUT_MS);
	lt_cq_quiet(&b.rx, 50);
	while (lt_cq_take(&b.rx, &comp)) {
		size_t i = (size_t) ((struct fi_context2 *) comp.op_context - rctx);

		if (i >= N || comp.err != FI_ECANCELED)
			bad++;
		else
			seen[i]++;
	}
	for (size_t i = 0; i < N; i++)
		bad += seen[i] != 1;
	LT_CHECK(bad == 0, "many: each completes exactly once with FI_ECANCELED (%zu wrong)", bad);
}

/*
 * A send that cannot finish yet (large, nothing posted at the receiver) may be cancelled or
 * may complete; either way it completes exactly once, and nothing hangs.
 */
static void test_cancel_send(void)
{
	size_t len = 16 * 1024 * 1024;
	char *sbuf = malloc(len), *rbuf = malloc(len);
	struct fi_context2 sctx, rctx;
	struct lt_comp comp;
	int ret;

	if (!sbuf || !rbuf)
		goto out;
	lt_fill(sbuf, len, 9);
	LT_CHECK_RET(lt_send(&a, sbuf, len, a_to_b, &sctx), 0, "send: 16 MiB send, nothing posted");
	lt_cq_quiet(&a.tx, 50);
	ret = fi_cancel(&a.ep->fid, &sctx);
	LT_CHECK(ret == 0 || ret == -FI_ENOENT, "send: fi_cancel of the send (%d)", ret);
	/* Let the receiver take whatever is on its way, so the send can finish if it was not. */
	LT_CHECK_RET(lt_recv(&b, rbuf, len, FI_ADDR_UNSPEC, &rctx), 0, "send: fi_recv");
	if (lt_cq_next(&a.tx, &comp, LT_TIMEOUT_MS)) {
		LT_CHECK(comp.op_context == &sctx && (comp.err == 0 || comp.err == FI_ECANCELED),
			 "send: completes once, successfully or FI_ECANCELED (err %d)", comp.err);
		if (comp.err == 0) {
			LT_CHECK(lt_cq_next(&b.rx, &comp, LT_TIMEOUT_MS) && !comp.err &&
					 lt_verify(rbuf, len, 9) == len,
				 "send: not cancelled, so it is delivered intact");
		} else {
			lt_cq_quiet(&b.rx, 200);
			if (b.rx.count && lt_cq_take(&b.rx, &comp))
				LT_CHECK(comp.err || lt_verify(rbuf, len, 9) == len,
					 "send: cancelled, so no corrupt delivery");
			(void) fi_cancel(&b.ep->fid, &rctx);
		}
	} else {
		LT_CHECK(false, "send: the send completes within %d ms", LT_TIMEOUT_MS);
	}
	lt_cq_quiet(&a.tx, 100);
	LT_CHECK(a.tx.count == 0, "send: exactly one completion for the send");
out:
	free(sbuf);
	free(rbuf);
}

int main(int argc, char **argv)
{
	struct fi_info *hints, *info;
	fi_addr_t b_to_a;
	int ret;

	(void) argc;
	lt_begin(argv[0]);
	hints = lt_hints(FI_MSG);
	hints->tx_attr->msg_order = FI_ORDER_SAS;
	hints->rx_attr->msg_order = FI_ORDER_SAS;
	info = lt_getinfo_or_skip(hints);
	ret = lt_dom_open(info, &dom);
	if (!ret)
		ret = lt_pair_open(&dom, NULL, NULL, &a, &b, &a_to_b, &b_to_a);
	if (!LT_CHECK_RET(ret, 0, "two endpoints"))
		return lt_end();

	test_cancel_posted();
	test_cancel_unknown();
	test_cancel_middle();
	test_cancel_many();
	test_cancel_send();

	lt_ep_close(&a);
	lt_ep_close(&b);
	lt_dom_close(&dom);
	fi_freeinfo(info);
	fi_freeinfo(hints);
	return lt_end();
}
