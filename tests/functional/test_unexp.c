/*
 * The bound on unexpected messages (FI_OFI_LAYER_UNEXP_MAX) through the public API, with
 * FI_MSG and FI_TAGGED, between endpoints of one process: a receiver R that posts nothing
 * and senders A and B.
 *
 * - Flood: A sends far more than the bound while R posts no receive. A is pushed back (its
 *   sends return -FI_EAGAIN and some wait, none fails), and R's unexpected memory, read with
 *   fi_getopt(FI_OPT_LAYER_UNEXP_STATS), never went past what fi_layer(7) promises: the limit
 *   plus the receive buffers posted to the core. Then R posts its receives (tagged: in reverse
 *   order, each for one tag and from A) while A sends the rest, and every message arrives
 *   intact, in the order sent.
 * - Deadlock: A floods R as above, B sends a few messages behind it, and R then waits for B's
 *   last one only: it completes, then everything else does.
 * - Probe (FI_TAGGED): the same, but R looks for B's last message with FI_PEEK in a loop
 *   and takes it with FI_CLAIM.
 * - Window (FI_TAGGED): A sends many small messages keeping a window of sends outstanding
 *   (it waits for completions before it sends more), and R waits for A's last one first:
 *   small messages are not paced, so A's sends complete and the last one arrives; R kept
 *   the others as records.
 *
 * Nothing here waits for time to pass: the flood stops once the sender cannot send any more
 * and the receiver reports that it held buffers back; every other wait is for completions,
 * with LT_TIMEOUT_MS as a hang guard only.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <rdma/fi_tagged.h>
#include <rdma/fi_ext_layer.h>

#include "tests/functional/common.h"

/* Small enough that a few messages reach it, and few buffers posted per home. */
#define UNEXP_MAX 65536
#define RX_BUF_CNT 8
/* FI_OFI_LAYER_DIRECT_EAGER_SIZE's default */
#define DIRECT_EAGER_SIZE (256 * 1024)
#define TX_SIZE 32
/* A's messages: far more than UNEXP_MAX and the buffers posted, if it could send them all. */
#define A_CNT 512
/* B's: more than one connection's buffers (MSG), fewer than its transmit queue. */
#define B_CNT 20
/* Progress rounds without a send getting through before the flood counts as pushed back. */
#define PUSHBACK_ROUNDS 200
/* The window test: small messages, at most WINDOW sends outstanding. */
#define W_CNT 1024
#define WINDOW 16

#define A_TAG 0x10000
#define B_TAG 0x20000

struct peer {
	struct lt_ep ep;
	fi_addr_t to_r;          /* R in its AV */
	fi_addr_t at_r;          /* it in R's AV */
	uint64_t tag_base;
	size_t cnt;              /* messages it has to send */
	size_t sent;             /* posted so far */
	size_t done;             /* send completions seen */
	char **sbuf;
	char **rbuf;             /* R's receive buffers for its messages */
	struct fi_context2 *sctx;
	struct fi_context2 *rctx;
	bool *is_received;
};

static struct fi_info *info;
static struct lt_dom dom;
static struct lt_ep r;
static struct peer pa, pb;
static bool tagged;
static bool small_only;

/* Mostly eager sizes, some small, some rendezvous (header only); or only small ones. */
static size_t msg_len(size_t i)
{
	if (small_only)
		return (i * 37) % 257;
	if (i % 11 == 10)
		return 40000;
	if (i % 7 == 6)
		return 100;
	return 3000 + (i % 5) * 500;
}

static ssize_t post_send(struct peer *p, size_t i)
{
	uint64_t tag = p->tag_base + i;

	if (tagged)
		return fi_tsend(p->ep.ep, p->sbuf[i], msg_len(i), NULL, p->to_r, tag, &p->sctx[i]);
	return fi_send(p->ep.ep, p->sbuf[i], msg_len(i), NULL, p->to_r, &p->sctx[i]);
}

static ssize_t post_recv(struct peer *p, size_t i)
{
	uint64_t tag = p->tag_base + i;

	if (tagged)
		return LT_RETRY(fi_trecv(r.ep, p->rbuf[i], msg_len(i), NULL, p->at_r, tag, 0,
					 &p->rctx[i]));
	return LT_RETRY(fi_recv(r.ep, p->rbuf[i], msg_len(i), NULL, p->at_r, &p->rctx[i]));
}

/* Posts receives for p's messages first to last - 1 (reverse: last - 1 down to first). */
static bool post_recvs(struct peer *p, size_t first, size_t last, bool is_reverse,
		       const char *what)
{
	size_t i, k;
	ssize_t ret;

	for (i = first; i < last; i++) {
		k = is_reverse ? last - 1 - (i - first) : i;
		ret = post_recv(p, k);
		if (ret) {
			LT_CHECK_RET(ret, 0, "%s: receive %zu", what, k);
			return false;
		}
	}
	return true;
}

static bool unexp_stats(struct fi_layer_unexp_stats *stats)
{
	size_t len = sizeof(*stats);

	return !fi_getopt(&r.ep->fid, FI_OPT_ENDPOINT, FI_OPT_LAYER_UNEXP_STATS, stats, &len);
}

static int peer_open(struct peer *p, uint64_t tag_base, size_t cnt)
{
	size_t i;
	int ret;

	memset(p, 0, sizeof(*p));
	ret = lt_ep_open(&dom, NULL, &p->ep);
	if (ret)
		return ret;
	if (lt_av_insert(&p->ep, r.addr, &p->to_r) || lt_av_insert(&r, p->ep.addr, &p->at_r))
		return -FI_EOTHER;
	p->tag_base = tag_base;
	p->cnt = cnt;
	/* One more than needed: calloc(0) may be NULL. */
	p->sbuf = calloc(cnt + 1, sizeof(*p->sbuf));
	p->rbuf = calloc(cnt + 1, sizeof(*p->rbuf));
	p->sctx = calloc(cnt + 1, sizeof(*p->sctx));
	p->rctx = calloc(cnt + 1, sizeof(*p->rctx));
	p->is_received = calloc(cnt + 1, sizeof(*p->is_received));
	if (!p->sbuf || !p->rbuf || !p->sctx || !p->rctx || !p->is_received)
		return -FI_ENOMEM;
	for (i = 0; i < cnt; i++) {
		p->sbuf[i] = malloc(msg_len(i) + 1);
		p->rbuf[i] = calloc(1, msg_len(i) + 1);
		if (!p->sbuf[i] || !p->rbuf[i])
			return -FI_ENOMEM;
		lt_fill(p->sbuf[i], msg_len(i), tag_base + i);
	}
	return 0;
}

static void peer_close(struct peer *p)
{
	size_t i;

	lt_ep_close(&p->ep);
	for (i = 0; p->sbuf && i < p->cnt; i++) {
		free(p->sbuf[i]);
		free(p->rbuf[i]);
	}
	free(p->sbuf);
	free(p->rbuf);
	free(p->sctx);
	free(p->rctx);
	free(p->is_received);
	memset(p, 0, sizeof(*p));
}

/* Takes the send completions p has; false on an error completion. */
static bool peer_reap(struct peer *p)
{
	struct lt_comp comp;
	bool ok = true;

	while (lt_cq_take(&p->ep.tx, &comp)) {
		if (comp.err) {
			LT_CHECK(false, "send completion without error (got %d)", comp.err);
			ok = false;
		}
		p->done++;
	}
	return ok;
}

/*
 * Sends p's messages until the receiver pushes back for good: the send keeps returning
 * -FI_EAGAIN over PUSHBACK_ROUNDS progress rounds while R reports buffers held back. Returns
 * the number of -FI_EAGAIN returns seen.
 */
static size_t flood(struct peer *p)
{
	struct fi_layer_unexp_stats stats;
	size_t eagain = 0, round = 0;
	ssize_t ret;

	while (p->sent < p->cnt) {
		ret = post_send(p, p->sent);
		if (!ret) {
			p->sent++;
			round = 0;
			continue;
		}
		if (ret != -FI_EAGAIN) {
			LT_CHECK_RET(ret, -FI_EAGAIN, "flood: send %zu", p->sent);
			break;
		}
		eagain++;
		lt_progress();
		if (++round >= PUSHBACK_ROUNDS && unexp_stats(&stats) && stats.stall_cnt)
			break;
	}
	return eagain;
}

/* Sends what p has not sent yet, retrying while progressing. */
static void send_rest(struct peer *p)
{
	ssize_t ret;

	for (; p->sent < p->cnt; p->sent++) {
		ret = LT_RETRY(post_send(p, p->sent));
		if (ret) {
			LT_CHECK_RET(ret, 0, "send %zu", p->sent);
			return;
		}
	}
}

static struct peer *peer_of_ctx(void *ctx, size_t *i)
{
	struct peer *ps[2] = { &pa, &pb };

	for (int k = 0; k < 2; k++) {
		struct peer *p = ps[k];

		if (p->rctx && (struct fi_context2 *) ctx >= p->rctx &&
		    (struct fi_context2 *) ctx < p->rctx + p->cnt) {
			*i = (size_t) ((struct fi_context2 *) ctx - p->rctx);
			return p;
		}
	}
	return NULL;
}

/* Takes one receive completion of R and checks it; the message it was for, or NULL. */
static struct peer *take_recv(size_t *index)
{
	struct lt_comp comp;
	struct peer *p;
	size_t i = 0, len;

	if (!lt_cq_next(&r.rx, &comp, LT_TIMEOUT_MS)) {
		LT_CHECK(false, "receive completion within %d ms", LT_TIMEOUT_MS);
		return NULL;
	}
	p = peer_of_ctx(comp.op_context, &i);
	if (!p || comp.err) {
		LT_CHECK(false, "receive completion of ours, without error (err %d)", comp.err);
		return NULL;
	}
	len = msg_len(i);
	if (comp.len != len || lt_verify(p->rbuf[i], len, p->tag_base + i) != len ||
	    comp.src != p->at_r || (tagged && comp.tag != p->tag_base + i) || p->is_received[i]) {
		LT_CHECK(false, "message %#lx: received once, intact, from its sender",
			 (unsigned long) (p->tag_base + i));
		return NULL;
	}
	p->is_received[i] = true;
	*index = i;
	return p;
}

static void check_drained(const char *what)
{
	struct fi_layer_unexp_stats stats;

	LT_CHECK(unexp_stats(&stats) && !stats.bytes && !stats.msg_cnt,
		 "%s: nothing left held as unexpected", what);
}

/*
 * Waits until every message of both peers was received and every send completed; then
 * nothing may be left held as unexpected.
 */
static void finish_all(const char *what)
{
	size_t i, want = pa.cnt + pb.cnt, got = 0;
	struct peer *p;
	bool ok = true;

	for (i = 0; i < pa.cnt; i++)
		got += pa.is_received[i];
	for (i = 0; i < pb.cnt; i++)
		got += pb.is_received[i];
	while (ok && got < want) {
		ok = take_recv(&i) != NULL;
		got += ok;
	}
	LT_CHECK(got == want, "%s: all %zu messages received", what, want);
	while (ok && (pa.done < pa.sent || pb.done < pb.sent)) {
		p = pa.done < pa.sent ? &pa : &pb;
		ok = lt_cq_wait(&p->ep.tx, 1, LT_TIMEOUT_MS) == 0;
		ok = peer_reap(&pa) && peer_reap(&pb) && ok;
	}
	LT_CHECK(ok && pa.done == pa.cnt && pb.done == pb.cnt, "%s: every send completed",
		 what);
	check_drained(what);
}

/* What fi_layer(7) promises while R waits for nothing: the limit plus its posted buffers. */
static size_t unexp_bound(const struct fi_layer_unexp_stats *stats, size_t peers)
{
	size_t bufs = lt_core_is_msg() ? peers * RX_BUF_CNT : 4 * RX_BUF_CNT;
	/* with direct receive, a buffer may hold an eager payload of up to the direct limit */
	size_t extra = lt_direct_recv(r.ep) ? DIRECT_EAGER_SIZE : 0;

	return stats->limit + bufs * (stats->buf_bytes + extra);
}

/* A floods R, which posts nothing: pushback and the bound. */
static void check_flood(const char *what)
{
	struct fi_layer_unexp_stats stats;
	size_t eagain;
	bool is_ok;

	eagain = flood(&pa);
	LT_CHECK(eagain > 0, "%s: the sender is pushed back with -FI_EAGAIN (%zu of %zu sent)",
		 what, pa.sent, pa.cnt);
	lt_progress();
	is_ok = peer_reap(&pa);
	LT_CHECK(is_ok && pa.done < pa.sent,
		 "%s: sends wait for the receiver, none fails (%zu of %zu completed)", what,
		 pa.done, pa.sent);
	if (!LT_CHECK(unexp_stats(&stats), "%s: fi_getopt(FI_OPT_LAYER_UNEXP_STATS)", what))
		return;
	lt_note("%s: %zu unexpected messages hold %zu bytes, at most %zu; limit %zu, buffer %zu,"
		" record %zu; %lu buffers held back, %lu paced", what, stats.msg_cnt, stats.bytes,
		stats.max_bytes, stats.limit, stats.buf_bytes, stats.record_bytes,
		(unsigned long) stats.stall_cnt, (unsigned long) stats.pace_cnt);
	LT_CHECK(stats.limit == UNEXP_MAX, "%s: the limit is FI_OFI_LAYER_UNEXP_MAX", what);
	LT_CHECK(stats.msg_cnt > 0 && stats.stall_cnt > 0 && stats.pace_cnt > 0,
		 "%s: the receiver held buffers back and paced its sender", what);
	LT_CHECK(stats.max_bytes > stats.limit && stats.max_bytes <= unexp_bound(&stats, 1),
		 "%s: unexpected memory went past the limit by no more than the posted buffers "
		 "(%zu <= %zu)", what, stats.max_bytes, unexp_bound(&stats, 1));
}

static int open_all(size_t a_cnt, size_t b_cnt)
{
	int ret;

	ret = lt_ep_open(&dom, NULL, &r);
	if (!ret)
		ret = peer_open(&pa, A_TAG, a_cnt);
	if (!ret)
		ret = peer_open(&pb, B_TAG, b_cnt);
	return ret;
}

static void close_all(void)
{
	peer_close(&pa);
	peer_close(&pb);
	lt_ep_close(&r);
}

/* The flood, then R receives A's messages: in reverse order when tagged. */
static void run_flood(void)
{
	const char *what = tagged ? "tagged flood" : "msg flood";

	if (!LT_CHECK_RET(open_all(A_CNT, 0), 0, "%s: open endpoints", what))
		goto out;
	check_flood(what);
	if (!post_recvs(&pa, 0, pa.cnt, tagged, what))
		goto out;
	send_rest(&pa);
	finish_all(what);
out:
	close_all();
}

/* B's messages sent behind A's flood, which holds the bound. */
static void send_behind(struct peer *p, const char *what)
{
	send_rest(p);
	LT_CHECK(p->sent == p->cnt, "%s: B posted its %zu sends", what, p->cnt);
}

/* R waits for B's last message first, while A's flood holds the bound. */
static void run_deadlock(void)
{
	const char *what = tagged ? "tagged wait behind the bound" : "msg wait behind the bound";
	struct peer *p;
	size_t k;

	if (!LT_CHECK_RET(open_all(A_CNT, B_CNT), 0, "%s: open endpoints", what))
		goto out;
	check_flood(what);
	send_behind(&pb, what);
	/* Untagged: B's messages come in order, so its last is the last of its receives. */
	if (!post_recvs(&pb, tagged ? pb.cnt - 1 : 0, pb.cnt, false, what))
		goto out;
	do {
		p = take_recv(&k);
	} while (p && !(p == &pb && k == pb.cnt - 1));
	LT_CHECK(p == &pb && k == pb.cnt - 1, "%s: B's last message is received %s", what,
		 tagged ? "first" : "with its predecessors only");
	if ((tagged && !post_recvs(&pb, 0, pb.cnt - 1, true, what)) ||
	    !post_recvs(&pa, 0, pa.cnt, tagged, what))
		goto out;
	send_rest(&pa);
	finish_all(what);
out:
	close_all();
}

/* R probes for B's last message with FI_PEEK until it is there, then claims it. */
static void run_probe(void)
{
	const char *what = "peek behind the bound";
	uint64_t tag = B_TAG + B_CNT - 1;
	struct fi_context2 peek_ctx;
	struct fi_msg_tagged msg = {
		.tag = tag,
		.context = &peek_ctx,
	};
	struct lt_comp comp;
	size_t misses = 0, k = B_CNT - 1;
	bool is_found = false;
	ssize_t ret;

	if (!LT_CHECK_RET(open_all(A_CNT, B_CNT), 0, "%s: open endpoints", what))
		goto out;
	check_flood(what);
	send_behind(&pb, what);
	msg.addr = pb.at_r;
	while (!is_found) {
		ret = LT_RETRY(fi_trecvmsg(r.ep, &msg, FI_PEEK | FI_CLAIM));
		if (ret) {
			LT_CHECK_RET(ret, 0, "%s: peek", what);
			goto out;
		}
		if (!lt_cq_next(&r.rx, &comp, LT_TIMEOUT_MS)) {
			LT_CHECK(false, "%s: peek completes", what);
			goto out;
		}
		is_found = !comp.err;
		if (!is_found && comp.err != FI_ENOMSG) {
			LT_CHECK(false, "%s: a miss is FI_ENOMSG (%d)", what, comp.err);
			goto out;
		}
		misses += !is_found;
	}
	LT_CHECK(true, "%s: peeks that find nothing let the message in (%zu misses)", what,
		 misses);
	LT_CHECK(comp.op_context == &peek_ctx && comp.len == msg_len(k) && comp.tag == tag,
		 "%s: the peek finds B's last message", what);
	{
		struct iovec iov = { .iov_base = pb.rbuf[k], .iov_len = msg_len(k) };
		struct fi_msg_tagged claim = {
			.msg_iov = &iov,
			.iov_count = 1,
			.context = &peek_ctx,
		};

		LT_CHECK_RET(LT_RETRY(fi_trecvmsg(r.ep, &claim, FI_CLAIM)), 0, "%s: claim", what);
	}
	if (LT_CHECK(lt_cq_next(&r.rx, &comp, LT_TIMEOUT_MS), "%s: claim completes", what)) {
		LT_CHECK(comp.op_context == &peek_ctx && !comp.err && comp.len == msg_len(k) &&
			 lt_verify(pb.rbuf[k], msg_len(k), tag) == msg_len(k),
			 "%s: the claimed message is intact", what);
		pb.is_received[k] = true;
	}
	if (!post_recvs(&pb, 0, pb.cnt - 1, false, what) || !post_recvs(&pa, 0, pa.cnt, true, what))
		goto out;
	send_rest(&pa);
	finish_all(what);
out:
	close_all();
}

/* A sends small messages with a window of sends outstanding; R waits for the last first. */
static void run_window(void)
{
	const char *what = "window of small sends";
	struct fi_layer_unexp_stats stats;
	uint64_t deadline = lt_now_ms() + LT_TIMEOUT_MS;
	struct peer *p;
	size_t k = 0;
	ssize_t ret;

	small_only = true;
	if (!LT_CHECK_RET(open_all(W_CNT, 0), 0, "%s: open endpoints", what) ||
	    !post_recvs(&pa, pa.cnt - 1, pa.cnt, false, what))
		goto out;
	while (pa.sent < pa.cnt && lt_now_ms() < deadline) {
		if (!peer_reap(&pa))
			goto out;
		if (pa.sent - pa.done >= WINDOW) {
			lt_progress();
			continue;
		}
		ret = post_send(&pa, pa.sent);
		if (ret && ret != -FI_EAGAIN) {
			LT_CHECK_RET(ret, 0, "%s: send %zu", what, pa.sent);
			goto out;
		}
		pa.sent += !ret;
	}
	LT_CHECK(pa.sent == pa.cnt, "%s: the sender's sends complete, its window moves on (%zu "
		 "of %zu sent)", what, pa.sent, pa.cnt);
	p = take_recv(&k);
	LT_CHECK(p == &pa && k == pa.cnt - 1, "%s: the last message is received first", what);
	if (LT_CHECK(unexp_stats(&stats), "%s: fi_getopt(FI_LAYER_OPT_UNEXP_STATS)", what)) {
		lt_note("%s: %zu unexpected messages hold %zu bytes, at most %zu; %lu paced", what,
			stats.msg_cnt, stats.bytes, stats.max_bytes,
			(unsigned long) stats.pace_cnt);
		LT_CHECK(stats.msg_cnt == pa.cnt - 1 && !stats.pace_cnt &&
			 stats.max_bytes <= unexp_bound(&stats, 1) +
					    pa.cnt * stats.record_bytes,
			 "%s: small messages are not paced; past the limit they are records", what);
	}
	if (!post_recvs(&pa, 0, pa.cnt - 1, true, what))
		goto out;
	finish_all(what);
out:
	small_only = false;
	close_all();
}

int main(void)
{
	struct fi_info *hints;
	char value[32];

	/* Read once when the provider loads: before the first fi_getinfo. */
	snprintf(value, sizeof(value), "%d", UNEXP_MAX);
	setenv("FI_OFI_LAYER_UNEXP_MAX", value, 1);
	snprintf(value, sizeof(value), "%d", RX_BUF_CNT);
	setenv("FI_OFI_LAYER_RX_BUF_CNT", value, 1);

	lt_begin("unexp");
	if (!lt_is_layer())
		lt_skip("the bound is ofi_layer's");
	hints = lt_hints(FI_MSG | FI_TAGGED | FI_DIRECTED_RECV | FI_SOURCE);
	hints->tx_attr->size = TX_SIZE;
	info = lt_getinfo_or_skip(hints);
	if (!LT_CHECK_RET(lt_dom_open(info, &dom), 0, "open the domain"))
		return lt_end();

	for (int mode = 0; mode < 2; mode++) {
		tagged = mode;
		run_flood();
		run_deadlock();
		if (tagged) {
			run_probe();
			run_window();
		}
	}

	lt_dom_close(&dom);
	fi_freeinfo(info);
	fi_freeinfo(hints);
	return lt_end();
}
