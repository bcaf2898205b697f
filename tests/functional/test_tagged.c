/*
 * FI_TAGGED through the public API over two (or three) endpoints in one process: every call,
 * matching rules (ignore masks, post order between exact and wildcard receives, arrival
 * order of unexpected messages, directed receives), truncation, CQ data, FI_PEEK / FI_CLAIM /
 * FI_DISCARD for eager and rendezvous-size messages, cancel, FI_DELIVERY_COMPLETE and
 * FI_MATCH_COMPLETE (the send completes only once the target matched), and FI_FENCE.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <rdma/fi_tagged.h>

#include "tests/functional/common.h"

#define BIG (1024 * 1024) /* above any default eager size: rendezvous */

static struct lt_ep a, b, c;
static fi_addr_t a_to_b, b_from_a, b_from_c, c_to_b;

static bool next(struct lt_cq *cq, struct lt_comp *comp)
{
	memset(comp, 0, sizeof(*comp));
	return lt_cq_next(cq, comp, LT_TIMEOUT_MS);
}

static ssize_t tsend(struct lt_ep *ep, const void *buf, size_t len, fi_addr_t dest, uint64_t tag,
		     void *ctx)
{
	return LT_RETRY(fi_tsend(ep->ep, buf, len, NULL, dest, tag, ctx));
}

static ssize_t trecvmsg(struct lt_ep *ep, void *buf, size_t len, fi_addr_t src, uint64_t tag,
			uint64_t ignore, void *ctx, uint64_t flags)
{
	struct iovec iov = { .iov_base = buf, .iov_len = len };
	struct fi_msg_tagged msg = {
		.msg_iov = &iov,
		.iov_count = buf ? 1 : 0,
		.addr = src,
		.tag = tag,
		.ignore = ignore,
		.context = ctx,
	};

	return LT_RETRY(fi_trecvmsg(ep->ep, &msg, flags));
}

static void check_sizes(void)
{
	/* around the inject size, eager_size and direct_eager_size (fi_layer(7)) */
	static const size_t sizes[] = { 0, 1, 256, 257, 4096, 16384, 16385, 262144, 262145,
					BIG, 4 << 20 };
	struct lt_comp comp;
	size_t i;

	for (i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		size_t n = sizes[i];
		char *s = malloc(n + 1), *r = calloc(1, n + 1);
		uint64_t tag = 0x1000 + i;

		lt_fill(s, n, i);
		LT_CHECK_RET(LT_RETRY(fi_trecv(b.ep, r, n, NULL, FI_ADDR_UNSPEC, tag, 0, r)), 0,
			     "size %zu: trecv", n);
		LT_CHECK_RET(tsend(&a, s, n, a_to_b, tag, s), 0, "size %zu: tsend", n);
		LT_CHECK(next(&b.rx, &comp) && comp.op_context == r && !comp.err &&
			 comp.len == n && comp.tag == tag &&
			 (comp.flags & (FI_RECV | FI_TAGGED)) == (FI_RECV | FI_TAGGED) &&
			 lt_verify(r, n, i) == n && comp.src == b_from_a,
			 "size %zu: received intact with tag, flags and source", n);
		LT_CHECK(next(&a.tx, &comp) && comp.op_context == s && !comp.err &&
			 (comp.flags & (FI_SEND | FI_TAGGED)) == (FI_SEND | FI_TAGGED),
			 "size %zu: send completes with FI_SEND|FI_TAGGED", n);
		free(s);
		free(r);
	}
}

static void check_matching(void)
{
	char r1[8], r2[8], r3[8], m[8] = "x";
	struct lt_comp comp;
	bool ok;

	/* Ignore mask: low byte free. */
	trecvmsg(&b, r1, sizeof(r1), FI_ADDR_UNSPEC, 0x1200, 0xff, r1, FI_COMPLETION);
	tsend(&a, m, sizeof(m), a_to_b, 0x1234, NULL);
	ok = next(&b.rx, &comp);
	LT_CHECK(ok && comp.op_context == r1 && comp.tag == 0x1234,
		 "ignore mask: 0x1200/0xff receives tag 0x1234 (reported)");
	next(&a.tx, &comp);

	/* A wildcard posted before an exact receive wins, and the other way round. */
	trecvmsg(&b, r1, sizeof(r1), FI_ADDR_UNSPEC, 0, ~0ULL, r1, FI_COMPLETION);
	trecvmsg(&b, r2, sizeof(r2), FI_ADDR_UNSPEC, 7, 0, r2, FI_COMPLETION);
	tsend(&a, m, sizeof(m), a_to_b, 7, NULL);
	ok = next(&b.rx, &comp);
	LT_CHECK(ok && comp.op_context == r1, "a wildcard posted first matches first");
	tsend(&a, m, sizeof(m), a_to_b, 7, NULL);
	ok = next(&b.rx, &comp);
	LT_CHECK(ok && comp.op_context == r2, "then the exact receive");
	trecvmsg(&b, r2, sizeof(r2), FI_ADDR_UNSPEC, 8, 0, r2, FI_COMPLETION);
	trecvmsg(&b, r1, sizeof(r1), FI_ADDR_UNSPEC, 0, ~0ULL, r1, FI_COMPLETION);
	tsend(&a, m, sizeof(m), a_to_b, 8, NULL);
	ok = next(&b.rx, &comp);
	LT_CHECK(ok && comp.op_context == r2, "an exact receive posted first matches first");
	tsend(&a, m, sizeof(m), a_to_b, 9, NULL);
	ok = next(&b.rx, &comp);
	LT_CHECK(ok && comp.op_context == r1 && comp.tag == 9, "then the wildcard");
	while (lt_cq_take(&a.tx, &comp))
		;
	lt_cq_quiet(&a.tx, 10);
	while (lt_cq_take(&a.tx, &comp))
		;

	/* Unexpected messages are found in arrival order. */
	memcpy(m, "first", 6);
	tsend(&a, m, sizeof(m), a_to_b, 20, NULL);
	memcpy(m, "other", 6);
	tsend(&a, m, sizeof(m), a_to_b, 21, NULL);
	memcpy(m, "second", 7);
	tsend(&a, m, sizeof(m), a_to_b, 20, NULL);
	lt_cq_quiet(&b.rx, 50);
	trecvmsg(&b, r1, sizeof(r1), FI_ADDR_UNSPEC, 20, 0, r1, FI_COMPLETION);
	ok = next(&b.rx, &comp);
	LT_CHECK(ok && !strcmp(r1, "first"), "unexpected: the earliest of a tag first");
	trecvmsg(&b, r2, sizeof(r2), FI_ADDR_UNSPEC, 0, ~0ULL, r2, FI_COMPLETION);
	ok = next(&b.rx, &comp);
	LT_CHECK(ok && !strcmp(r2, "other"), "unexpected: a wildcard takes the earliest of all");
	trecvmsg(&b, r3, sizeof(r3), FI_ADDR_UNSPEC, 20, 0, r3, FI_COMPLETION);
	ok = next(&b.rx, &comp);
	LT_CHECK(ok && !strcmp(r3, "second"), "unexpected: then the next");
	lt_cq_quiet(&a.tx, 10);
	while (lt_cq_take(&a.tx, &comp))
		;

	/* Directed: the same tag from two sources. */
	memcpy(m, "from a", 7);
	tsend(&a, m, sizeof(m), a_to_b, 30, NULL);
	lt_cq_quiet(&b.rx, 50);
	memcpy(m, "from c", 7);
	tsend(&c, m, sizeof(m), c_to_b, 30, NULL);
	lt_cq_quiet(&b.rx, 50);
	trecvmsg(&b, r1, sizeof(r1), b_from_c, 30, 0, r1, FI_COMPLETION);
	ok = next(&b.rx, &comp);
	LT_CHECK(ok && !strcmp(r1, "from c") && comp.src == b_from_c,
		 "a directed receive skips an earlier message from another source");
	trecvmsg(&b, r2, sizeof(r2), FI_ADDR_UNSPEC, 30, 0, r2, FI_COMPLETION);
	ok = next(&b.rx, &comp);
	LT_CHECK(ok && !strcmp(r2, "from a") && comp.src == b_from_a,
		 "an undirected one takes the other");

	/* Posted first: a receive for c, then one for anyone, the same tag. */
	memset(r1, 0, sizeof(r1));
	memset(r2, 0, sizeof(r2));
	trecvmsg(&b, r1, sizeof(r1), b_from_c, 31, 0, r1, FI_COMPLETION);
	trecvmsg(&b, r2, sizeof(r2), FI_ADDR_UNSPEC, 31, 0, r2, FI_COMPLETION);
	memcpy(m, "from a", 7);
	tsend(&a, m, sizeof(m), a_to_b, 31, NULL);
	ok = next(&b.rx, &comp);
	LT_CHECK(ok && comp.op_context == r2 && !strcmp(r2, "from a"),
		 "a message from a passes the receive posted for c");
	memcpy(m, "from c", 7);
	tsend(&c, m, sizeof(m), c_to_b, 31, NULL);
	ok = next(&b.rx, &comp);
	LT_CHECK(ok && comp.op_context == r1 && !strcmp(r1, "from c"),
		 "c's message takes the receive posted for it");
	lt_cq_quiet(&a.tx, 10);
	while (lt_cq_take(&a.tx, &comp) || lt_cq_take(&c.tx, &comp))
		;
}

static void check_data_and_trunc(void)
{
	char s[64] = "payload", r[8], *big = malloc(BIG), *rbig = malloc(BIG / 2);
	struct lt_comp comp;
	bool ok;

	trecvmsg(&b, r, sizeof(r), FI_ADDR_UNSPEC, 40, 0, r, FI_COMPLETION);
	LT_CHECK_RET(LT_RETRY(fi_tsenddata(a.ep, s, 5, NULL, 0xdada, a_to_b, 40, s)), 0,
		     "tsenddata");
	ok = next(&b.rx, &comp);
	LT_CHECK(ok && (comp.flags & FI_REMOTE_CQ_DATA) && comp.data == 0xdada,
		 "remote CQ data arrives with a tagged message");
	next(&a.tx, &comp);
	trecvmsg(&b, r, sizeof(r), FI_ADDR_UNSPEC, 41, 0, r, FI_COMPLETION);
	LT_CHECK_RET(LT_RETRY(fi_tinjectdata(a.ep, s, 3, 0xbeef, a_to_b, 41)), 0, "tinjectdata");
	ok = next(&b.rx, &comp);
	LT_CHECK(ok && comp.data == 0xbeef && comp.len == 3, "tinjectdata arrives");
	LT_CHECK(lt_cq_quiet(&a.tx, 20) == 0, "an inject generates no send completion");
	LT_CHECK_RET(fi_tinject(a.ep, s, 4096, a_to_b, 1), -FI_EMSGSIZE,
		     "tinject beyond inject_size is refused");

	trecvmsg(&b, r, sizeof(r), FI_ADDR_UNSPEC, 42, 0, r, FI_COMPLETION);
	tsend(&a, s, sizeof(s), a_to_b, 42, NULL);
	ok = next(&b.rx, &comp);
	LT_CHECK(ok && comp.err == FI_ETRUNC && comp.olen == sizeof(s) - sizeof(r) &&
		 !memcmp(r, s, sizeof(r)), "eager truncation: FI_ETRUNC, olen, data up to the "
		 "buffer (err %d olen %zu)", comp.err, comp.olen);
	next(&a.tx, &comp);
	lt_fill(big, BIG, 5);
	trecvmsg(&b, rbig, BIG / 2, FI_ADDR_UNSPEC, 43, 0, rbig, FI_COMPLETION);
	tsend(&a, big, BIG, a_to_b, 43, big);
	ok = next(&b.rx, &comp);
	LT_CHECK(ok && comp.err == FI_ETRUNC && comp.olen == BIG / 2 &&
		 lt_verify(rbig, BIG / 2, 5) == BIG / 2, "rendezvous truncation (err %d olen %zu)",
		 comp.err, comp.olen);
	ok = next(&a.tx, &comp);
	LT_CHECK(ok && !comp.err && comp.op_context == big,
		 "the truncated rendezvous send completes normally");
	free(big);
	free(rbig);
}

static void check_peek_claim(size_t len)
{
	struct fi_context ctx_peek, ctx_claim, ctx_disc;
	char *s = malloc(len), *r = calloc(1, len), *p = calloc(1, len);
	const char *kind = len >= BIG ? "rendezvous" : "eager";
	struct lt_comp comp;
	bool ok;

	lt_fill(s, len, 7);
	/* Nothing there: an FI_ENOMSG error entry. */
	trecvmsg(&b, NULL, 0, FI_ADDR_UNSPEC, 50, 0, &ctx_peek, FI_PEEK);
	ok = next(&b.rx, &comp);
	LT_CHECK(ok && comp.err == FI_ENOMSG && comp.op_context == &ctx_peek,
		 "%s: peek without a message gives FI_ENOMSG", kind);

	/* Peek finds it without removing it. */
	LT_CHECK_RET(LT_RETRY(fi_tsenddata(a.ep, s, len, NULL, 77, a_to_b, 50, s)), 0,
		     "%s: send", kind);
	lt_cq_quiet(&b.rx, 50);
	trecvmsg(&b, p, len, FI_ADDR_UNSPEC, 50, 0, &ctx_peek, FI_PEEK);
	ok = next(&b.rx, &comp);
	LT_CHECK(ok && !comp.err && comp.len == len && comp.tag == 50 && comp.data == 77 &&
		 comp.src == b_from_a && (comp.flags & FI_TAGGED),
		 "%s: peek reports length, tag, data and source", kind);
	LT_CHECK(!comp.buf || (comp.buf == p && lt_verify(p, len, 7) == len),
		 "%s: peek data, when returned, is the message's", kind);

	/* Peek and claim; a receive posted afterwards must not get it. */
	trecvmsg(&b, NULL, 0, FI_ADDR_UNSPEC, 50, 0, &ctx_claim, FI_PEEK | FI_CLAIM);
	ok = next(&b.rx, &comp);
	LT_CHECK(ok && !comp.err && comp.len == len, "%s: peek|claim finds it", kind);
	trecvmsg(&b, NULL, 0, FI_ADDR_UNSPEC, 50, 0, &ctx_peek, FI_PEEK);
	ok = next(&b.rx, &comp);
	LT_CHECK(ok && comp.err == FI_ENOMSG, "%s: a claimed message is hidden from peeks", kind);
	trecvmsg(&b, r, len, FI_ADDR_UNSPEC, 50, 0, r, FI_COMPLETION);
	LT_CHECK(lt_cq_quiet(&b.rx, 50) == 0, "%s: and from receives", kind);
	/* The claimed message is named by the context alone: a source that is not even in the
	 * AV (Open MPI passes 0 with FI_AV_MAP) and another tag play no part. */
	LT_CHECK_RET(trecvmsg(&b, p, len, 12345, 99, 0, &ctx_claim, FI_CLAIM), 0,
		     "%s: FI_CLAIM ignores the receive's source and tag", kind);
	ok = next(&b.rx, &comp);
	LT_CHECK(ok && !comp.err && comp.op_context == &ctx_claim && comp.len == len &&
		 lt_verify(p, len, 7) == len, "%s: the FI_CLAIM receive gets it", kind);
	ok = next(&a.tx, &comp);
	LT_CHECK(ok && !comp.err, "%s: its send completes", kind);
	LT_CHECK_RET(fi_cancel(&b.ep->fid, r), 0, "%s: cancel the waiting receive", kind);
	ok = next(&b.rx, &comp);
	LT_CHECK(ok && comp.err == FI_ECANCELED && comp.op_context == r,
		 "%s: it completes with FI_ECANCELED", kind);

	/* Peek and discard; claim and discard. */
	tsend(&a, s, len, a_to_b, 51, s);
	lt_cq_quiet(&b.rx, 50);
	trecvmsg(&b, NULL, 0, FI_ADDR_UNSPEC, 51, 0, &ctx_disc, FI_PEEK | FI_DISCARD);
	ok = next(&b.rx, &comp);
	LT_CHECK(ok && !comp.err && comp.op_context == &ctx_disc, "%s: peek|discard completes",
		 kind);
	ok = next(&a.tx, &comp);
	LT_CHECK(ok && !comp.err, "%s: the discarded message's send completes", kind);
	trecvmsg(&b, NULL, 0, FI_ADDR_UNSPEC, 51, 0, &ctx_peek, FI_PEEK);
	ok = next(&b.rx, &comp);
	LT_CHECK(ok && comp.err == FI_ENOMSG, "%s: the discarded message is gone", kind);
	tsend(&a, s, len, a_to_b, 52, s);
	lt_cq_quiet(&b.rx, 50);
	trecvmsg(&b, NULL, 0, FI_ADDR_UNSPEC, 52, 0, &ctx_claim, FI_PEEK | FI_CLAIM);
	next(&b.rx, &comp);
	trecvmsg(&b, NULL, 0, FI_ADDR_UNSPEC, 0, 0, &ctx_claim, FI_CLAIM | FI_DISCARD);
	ok = next(&b.rx, &comp);
	LT_CHECK(ok && !comp.err && comp.op_context == &ctx_claim, "%s: claim|discard completes",
		 kind);
	ok = next(&a.tx, &comp);
	LT_CHECK(ok && !comp.err, "%s: and its send completes", kind);
	free(s);
	free(r);
	free(p);
}

static void check_claim_errors(void)
{
	struct fi_context ctx;
	char r[8];

	LT_CHECK_RET(trecvmsg(&b, r, sizeof(r), FI_ADDR_UNSPEC, 0, 0, &ctx, FI_CLAIM),
		     -FI_EINVAL, "FI_CLAIM with a context that claimed nothing");
	LT_CHECK_RET(trecvmsg(&b, r, sizeof(r), FI_ADDR_UNSPEC, 0, 0, &ctx, FI_DISCARD),
		     -FI_EINVAL, "FI_DISCARD alone");
	LT_CHECK_RET(trecvmsg(&b, r, sizeof(r), FI_ADDR_UNSPEC, 0, 0, NULL, FI_PEEK | FI_CLAIM),
		     -FI_EINVAL, "FI_CLAIM without a context");
	LT_CHECK_RET(trecvmsg(&b, r, sizeof(r), 12345, 0, 0, r, FI_COMPLETION), -FI_EINVAL,
		     "a directed receive from an fi_addr not in the AV");
	LT_CHECK_RET(fi_tsend(a.ep, r, sizeof(r), NULL, 12345, 1, NULL), -FI_EINVAL,
		     "a tsend to an fi_addr not in the AV");
	LT_CHECK_RET(trecvmsg(&b, r, sizeof(r), FI_ADDR_UNSPEC, 0, 0, r, FI_MULTI_RECV),
		     -FI_EBADFLAGS, "FI_MULTI_RECV on a tagged receive");
}

static void check_completion_levels(uint64_t level, const char *name)
{
	struct iovec iov;
	struct fi_msg_tagged msg = { .msg_iov = &iov, .iov_count = 1, .addr = a_to_b };
	char s[32] = "acked", r[32];
	struct lt_comp comp;
	bool ok;

	iov.iov_base = s;
	iov.iov_len = sizeof(s);
	msg.tag = 60;
	msg.context = s;
	LT_CHECK_RET(LT_RETRY(fi_tsendmsg(a.ep, &msg, FI_COMPLETION | level)), 0, "%s: send",
		     name);
	LT_CHECK(lt_cq_quiet(&a.tx, 100) == 0, "%s: no completion before the target matches",
		 name);
	trecvmsg(&b, r, sizeof(r), FI_ADDR_UNSPEC, 60, 0, r, FI_COMPLETION);
	ok = next(&b.rx, &comp);
	LT_CHECK(ok && !comp.err, "%s: received", name);
	ok = next(&a.tx, &comp);
	LT_CHECK(ok && !comp.err && comp.op_context == s, "%s: then the send completes", name);
}

static void check_fence(void)
{
	struct iovec iov;
	struct fi_msg_tagged msg = { .msg_iov = &iov, .iov_count = 1, .addr = a_to_b };
	char *big = malloc(BIG), *rbig = malloc(BIG), s[8] = "fenced", r[8];
	struct lt_comp comp;
	bool ok;

	lt_fill(big, BIG, 70);
	tsend(&a, big, BIG, a_to_b, 70, big); /* waits for its receive */
	iov.iov_base = s;
	iov.iov_len = sizeof(s);
	msg.tag = 71;
	msg.context = s;
	LT_CHECK_RET(LT_RETRY(fi_tsendmsg(a.ep, &msg, FI_COMPLETION | FI_FENCE)), 0,
		     "fenced send behind an incomplete rendezvous");
	trecvmsg(&b, r, sizeof(r), FI_ADDR_UNSPEC, 71, 0, r, FI_COMPLETION);
	LT_CHECK(lt_cq_quiet(&b.rx, 100) == 0, "the fenced message waits for the earlier send");
	trecvmsg(&b, rbig, BIG, FI_ADDR_UNSPEC, 70, 0, rbig, FI_COMPLETION);
	ok = next(&b.rx, &comp);
	LT_CHECK(ok && comp.op_context == rbig, "the earlier message arrives");
	ok = next(&b.rx, &comp);
	LT_CHECK(ok && comp.op_context == r && !strcmp(r, "fenced"), "then the fenced one");
	lt_cq_quiet(&a.tx, 20);
	while (lt_cq_take(&a.tx, &comp))
		;
	free(big);
	free(rbig);
}

/*
 * A sender inserted after its messages arrived: they were from no AV entry (FI_PEEK says
 * FI_ADDR_NOTAVAIL); once it is inserted they are its, in arrival order, for a directed
 * receive as for FI_SOURCE.
 */
static void check_late_sender(struct lt_dom *dom)
{
	static char early[2][16] = { "early 0", "early 1" };
	char got[2][16] = { "", "" };
	struct fi_context2 ctx[3];
	uint64_t deadline = lt_now_ms() + LT_TIMEOUT_MS;
	struct lt_comp comp = { 0 };
	fi_addr_t d_to_b, b_from_d;
	struct lt_ep d;

	if (!LT_CHECK_RET(lt_ep_open(dom, NULL, &d), 0, "late sender: an endpoint b does not know"))
		return;
	lt_av_insert(&d, b.addr, &d_to_b);
	for (int i = 0; i < 2; i++)
		LT_CHECK_RET(tsend(&d, early[i], sizeof(early[i]), d_to_b, 60, NULL), 0,
			     "late sender: send %d", i);
	do {
		trecvmsg(&b, NULL, 0, FI_ADDR_UNSPEC, 60, 0, &ctx[0], FI_PEEK);
	} while (next(&b.rx, &comp) && comp.err == FI_ENOMSG && lt_now_ms() < deadline);
	LT_CHECK(!comp.err && comp.src == FI_ADDR_NOTAVAIL,
		 "late sender: its message is there, from no AV entry (%d, %#llx)", comp.err,
		 (unsigned long long) comp.src);
	if (!LT_CHECK_RET(lt_av_insert(&b, d.addr, &b_from_d), 0, "late sender: inserted"))
		goto out;
	trecvmsg(&b, got[0], sizeof(got[0]), b_from_a, 60, 0, &ctx[0], 0);
	trecvmsg(&b, got[0], sizeof(got[0]), b_from_d, 60, 0, &ctx[1], 0);
	LT_CHECK(next(&b.rx, &comp) && !comp.err && comp.op_context == &ctx[1] &&
		 comp.src == b_from_d && !strcmp(got[0], early[0]),
		 "late sender: a receive directed at it takes its first message, from it");
	trecvmsg(&b, got[1], sizeof(got[1]), FI_ADDR_UNSPEC, 60, 0, &ctx[2], 0);
	LT_CHECK(next(&b.rx, &comp) && !comp.err && comp.op_context == &ctx[2] &&
		 comp.src == b_from_d && !strcmp(got[1], early[1]),
		 "late sender: then any source takes the second, from it too");
	/* the receive directed at a is still posted: a's message completes it */
	LT_CHECK_RET(tsend(&a, early[0], sizeof(early[0]), a_to_b, 60, NULL), 0,
		     "late sender: a sends");
	LT_CHECK(next(&b.rx, &comp) && comp.op_context == &ctx[0] && comp.src == b_from_a,
		 "late sender: the receive directed at a took nothing else");
	fi_av_remove(b.av, &b_from_d, 1, 0);
out:
	lt_cq_quiet(&d.tx, 100);
	lt_ep_close(&d);
}

int main(void)
{
	struct fi_info *hints, *info;
	struct lt_dom dom;

	lt_begin("tagged");
	hints = lt_hints(FI_TAGGED | FI_DIRECTED_RECV | FI_SOURCE);
	info = lt_getinfo_or_skip(hints);
	LT_CHECK(info->ep_attr->mem_tag_format != 0, "mem_tag_format reported");
	if (lt_dom_open(info, &dom) || lt_ep_open(&dom, NULL, &a) || lt_ep_open(&dom, NULL, &b) ||
	    lt_ep_open(&dom, NULL, &c)) {
		LT_CHECK(0, "open three endpoints");
		return lt_end();
	}
	lt_av_insert(&a, b.addr, &a_to_b);
	lt_av_insert(&c, b.addr, &c_to_b);
	lt_av_insert(&b, a.addr, &b_from_a);
	lt_av_insert(&b, c.addr, &b_from_c);

	check_sizes();
	check_matching();
	check_data_and_trunc();
	check_peek_claim(100);
	check_peek_claim(BIG);
	check_claim_errors();
	check_completion_levels(FI_DELIVERY_COMPLETE, "FI_DELIVERY_COMPLETE");
	check_completion_levels(FI_MATCH_COMPLETE, "FI_MATCH_COMPLETE");
	check_fence();
	check_late_sender(&dom);

	lt_ep_close(&a);
	lt_ep_close(&b);
	lt_ep_close(&c);
	lt_dom_close(&dom);
	fi_freeinfo(info);
	fi_freeinfo(hints);
	return lt_end();
}
