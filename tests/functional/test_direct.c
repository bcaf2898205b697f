/*
 * Direct receive (fi_layer(7)): over libfabric 1.17's tcp the core places each payload itself,
 * straight into the receive matched while the message arrives. Through the public API, over
 * any core (the checks hold for bounce buffers too, which the bounce run of the suite uses):
 *
 * - FI_OPT_LAYER_DIRECT_RECV says whether it is on, as the rules of fi_layer(7) say.
 * - Unexpected eager messages larger than a bounce buffer are kept whole (and counted in full
 *   against the unexpected bound), then received in any order.
 * - Truncation of a large message, posted before or after it arrives: FI_ETRUNC, olen, and
 *   the data up to the buffer.
 * - Order: a stream of messages of every kind (small, eager, large eager, rendezvous) against
 *   receives posted a few at a time, so that some messages find their receive and others
 *   arrive first: the k-th receive posted gets the k-th message, untagged and tagged alike.
 * - A receive posted while its message is still arriving: a child process with a 16 MiB
 *   direct eager limit sends a 16 MiB message, more than the sockets of a connection hold,
 *   so that only its start is in (matching nothing) when the receive is posted; a small
 *   message with the same tag follows. The receive gets the large one, the next receive
 *   the small one. (Whether the small one's header is read in the same core call as the
 *   large one's end, where it could take the receive first, is the kernel's choice: the
 *   guard against that, ep->unmatched_cnt, is exercised but not forced here.)
 * - A peer that keeps small bounce buffers (a child process with FI_OFI_LAYER_DIRECT_RECV=0
 *   and FI_OFI_LAYER_EAGER_SIZE=4096) and this one exchange messages around every eager
 *   limit, the first one before the connection is up: each side sends eager only what the
 *   other's handshake said it takes (over an RDM core, the HELLO_ACK).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>
#include <rdma/fi_tagged.h>
#include <rdma/fi_ext_layer.h>

#include "tests/functional/common.h"

#define LARGE (200 * 1024)        /* above eager_size, at most direct_eager_size */
#define TRUNC_BUF (10 * 1024)
#define ORDER_CNT 120
#define ORDER_SLOTS 6             /* receives posted at most at once */
#define ORDER_MAX (1024 * 1024)
#define ECHO_MAX (512 * 1024)
#define RACE_LARGE (16 * 1024 * 1024) /* more than the sockets of a connection hold */

static struct fi_info *info;
static struct lt_dom dom;
static struct lt_ep x, y;
static fi_addr_t x_to_y, y_to_x;

/* What fi_layer(7) says: on over tcp on libfabric 1.17 unless turned off. */
static bool direct_expected(void)
{
	const char *env = getenv("FI_OFI_LAYER_DIRECT_RECV");
	uint32_t version = fi_version();

	return lt_core_is_msg() && !strcasecmp(lt_core_name(), "tcp") &&
	       FI_MAJOR(version) == 1 && FI_MINOR(version) == 17 && !(env && !strcmp(env, "0"));
}

/*
 * One small message each way: x's connection is up, and y's sends share it, so both know
 * what the other's buffers take (before that, what is above the inject size goes rendezvous).
 */
static void warm_up(void)
{
	struct fi_context2 sctx, rctx;
	char sbuf[8] = "hello", rbuf[8];
	struct lt_comp comp;

	LT_CHECK(!lt_recv(&y, rbuf, sizeof(rbuf), FI_ADDR_UNSPEC, &rctx) &&
		 !lt_send(&x, sbuf, sizeof(sbuf), x_to_y, &sctx) &&
		 lt_cq_next(&y.rx, &comp, LT_TIMEOUT_MS) && !comp.err &&
		 lt_cq_next(&x.tx, &comp, LT_TIMEOUT_MS) && !comp.err &&
		 !lt_recv(&x, rbuf, sizeof(rbuf), FI_ADDR_UNSPEC, &rctx) &&
		 !lt_send(&y, sbuf, sizeof(sbuf), y_to_x, &sctx) &&
		 lt_cq_next(&x.rx, &comp, LT_TIMEOUT_MS) && !comp.err &&
		 lt_cq_next(&y.tx, &comp, LT_TIMEOUT_MS) && !comp.err, "warm-up both ways");
}

static void check_option(void)
{
	size_t len = 1;
	int on = 1;

	LT_CHECK(lt_direct_recv(x.ep) == direct_expected(),
		 "FI_OPT_LAYER_DIRECT_RECV is %d, fi_layer(7) says %d", lt_direct_recv(x.ep),
		 direct_expected());
	LT_CHECK_RET(fi_getopt(&x.ep->fid, FI_OPT_ENDPOINT, FI_OPT_LAYER_DIRECT_RECV, &on, &len),
		     -FI_ETOOSMALL, "option: a short optlen");
	LT_CHECK(len == sizeof(int), "option: the size needed is reported (%zu)", len);
	LT_CHECK_RET(fi_getopt(&x.ep->fid, FI_OPT_ENDPOINT, FI_OPT_LAYER_DIRECT_RECV, NULL, &len),
		     -FI_EINVAL, "option: NULL optval");
	LT_CHECK_RET(fi_setopt(&x.ep->fid, FI_OPT_ENDPOINT, FI_OPT_LAYER_DIRECT_RECV, &on,
			       sizeof(on)), -FI_EOPNOTSUPP, "option: read only");
}

static size_t unexp_cnt(struct lt_ep *ep, size_t *bytes)
{
	struct fi_layer_unexp_stats stats = { 0 };
	size_t len = sizeof(stats);

	fi_getopt(&ep->ep->fid, FI_OPT_ENDPOINT, FI_OPT_LAYER_UNEXP_STATS, &stats, &len);
	if (bytes)
		*bytes = stats.bytes;
	return stats.msg_cnt;
}

/* Progresses until ep holds cnt unexpected messages (bounded). */
static bool wait_unexp(struct lt_ep *ep, size_t cnt)
{
	uint64_t deadline = lt_now_ms() + LT_TIMEOUT_MS;

	while (unexp_cnt(ep, NULL) < cnt && lt_now_ms() < deadline)
		lt_progress();
	return unexp_cnt(ep, NULL) >= cnt;
}

static void check_unexpected_large(void)
{
	static struct fi_context2 sctx[3], rctx[3];
	char *sbuf[3], *rbuf[3];
	struct lt_comp comp;
	size_t bytes, i;
	int got = 0;

	for (i = 0; i < 3; i++) {
		sbuf[i] = malloc(LARGE);
		rbuf[i] = calloc(1, LARGE);
		lt_fill(sbuf[i], LARGE, 100 + i);
		LT_CHECK_RET(LT_RETRY(fi_tsend(x.ep, sbuf[i], LARGE, NULL, x_to_y, 100 + i,
					       &sctx[i])), 0, "unexpected: send %zu", i);
	}
	LT_CHECK(wait_unexp(&y, 3), "unexpected: the three messages are held");
	unexp_cnt(&y, &bytes);
	/* Direct receive keeps the payloads whole; bounce buffers make them rendezvous. */
	if (direct_expected())
		LT_CHECK(bytes >= 3 * LARGE, "unexpected: %zu bytes counted, the payloads are "
			 "%d", bytes, 3 * LARGE);
	for (i = 3; i-- > 0;)
		LT_CHECK_RET(LT_RETRY(fi_trecv(y.ep, rbuf[i], LARGE, NULL, y_to_x, 100 + i, 0,
					       &rctx[i])), 0, "unexpected: receive %zu", i);
	while (got < 3 && lt_cq_next(&y.rx, &comp, LT_TIMEOUT_MS)) {
		i = (size_t) ((struct fi_context2 *) comp.op_context - rctx);
		LT_CHECK(!comp.err && i < 3 && comp.len == LARGE && comp.tag == 100 + i &&
			 lt_verify(rbuf[i], LARGE, 100 + i) == LARGE,
			 "unexpected: message %zu intact (err %d, len %zu)", i, comp.err, comp.len);
		got++;
	}
	LT_CHECK(got == 3, "unexpected: %d of 3 received", got);
	for (i = 0; i < 3; i++)
		LT_CHECK(lt_cq_next(&x.tx, &comp, LT_TIMEOUT_MS) && !comp.err,
			 "unexpected: send %zu completes", i);
	LT_CHECK(unexp_cnt(&y, &bytes) == 0 && bytes == 0, "unexpected: nothing held after");
	for (i = 0; i < 3; i++) {
		free(sbuf[i]);
		free(rbuf[i]);
	}
}

/* A message of 10 times the buffer, with its receive posted first or last. */
static void check_truncation(bool is_posted_first)
{
	const char *when = is_posted_first ? "posted first" : "arrived first";
	struct fi_context2 sctx, rctx;
	char *sbuf = malloc(10 * TRUNC_BUF), *rbuf = calloc(1, TRUNC_BUF);
	uint64_t tag = is_posted_first ? 200 : 201;
	struct lt_comp comp;
	bool is_in;

	lt_fill(sbuf, 10 * TRUNC_BUF, tag);
	if (is_posted_first)
		LT_CHECK_RET(LT_RETRY(fi_trecv(y.ep, rbuf, TRUNC_BUF, NULL, y_to_x, tag, 0,
					       &rctx)), 0, "truncation (%s): receive", when);
	LT_CHECK_RET(LT_RETRY(fi_tsend(x.ep, sbuf, 10 * TRUNC_BUF, NULL, x_to_y, tag, &sctx)), 0,
		     "truncation (%s): send", when);
	if (!is_posted_first) {
		LT_CHECK(wait_unexp(&y, 1), "truncation (%s): the message is held", when);
		LT_CHECK_RET(LT_RETRY(fi_trecv(y.ep, rbuf, TRUNC_BUF, NULL, y_to_x, tag, 0,
					       &rctx)), 0, "truncation (%s): receive", when);
	}
	memset(&comp, 0, sizeof(comp));
	is_in = lt_cq_next(&y.rx, &comp, LT_TIMEOUT_MS);
	LT_CHECK(is_in && comp.op_context == &rctx && comp.err == FI_ETRUNC &&
		 comp.olen == 9 * TRUNC_BUF && comp.len == TRUNC_BUF,
		 "truncation (%s): FI_ETRUNC, olen %zu, len %zu (err %d)", when, comp.olen,
		 comp.len, comp.err);
	LT_CHECK(lt_verify(rbuf, TRUNC_BUF, tag) == TRUNC_BUF, "truncation (%s): the data up to "
		 "the buffer", when);
	LT_CHECK(lt_cq_next(&x.tx, &comp, LT_TIMEOUT_MS) && !comp.err,
		 "truncation (%s): the send completes", when);
	free(sbuf);
	free(rbuf);
}

/* Every kind of message: small, eager, above eager_size, at the direct limit, rendezvous. */
static size_t order_len(size_t i)
{
	static const size_t lens[] = { 8, 4096, 65536, 200 * 1024, 256 * 1024, 300 * 1024,
				       17000, 0, ORDER_MAX };

	return lens[i % (sizeof(lens) / sizeof(lens[0]))];
}

/*
 * x streams ORDER_CNT messages (at most ORDER_SLOTS sends outstanding); y posts a receive
 * every other round, at most ORDER_SLOTS at once, so some messages wait for theirs and some
 * find it: the receive posted k-th must get message k, whenever its completion comes.
 */
static void check_order(bool tagged)
{
	static struct fi_context2 sctx[ORDER_SLOTS], rctx[ORDER_SLOTS];
	char *sbuf[ORDER_SLOTS], *rbuf[ORDER_SLOTS];
	size_t slot_msg[ORDER_SLOTS], sent = 0, posted = 0, received = 0;
	size_t s, bad = 0, round = 0;
	uint64_t deadline = lt_now_ms() + 4 * LT_TIMEOUT_MS;
	bool slot_busy[ORDER_SLOTS] = { false }, send_busy[ORDER_SLOTS] = { false };
	struct lt_comp comp;
	ssize_t ret;

	for (s = 0; s < ORDER_SLOTS; s++) {
		sbuf[s] = malloc(ORDER_MAX);
		rbuf[s] = malloc(ORDER_MAX);
	}
	while (received < ORDER_CNT && lt_now_ms() < deadline) {
		s = sent % ORDER_SLOTS;
		if (sent < ORDER_CNT && !send_busy[s]) {
			lt_fill(sbuf[s], order_len(sent), 300 + sent);
			ret = tagged ? fi_tsend(x.ep, sbuf[s], order_len(sent), NULL, x_to_y, 7,
						&sctx[s]) :
				       fi_send(x.ep, sbuf[s], order_len(sent), NULL, x_to_y,
					       &sctx[s]);
			if (!ret) {
				send_busy[s] = true;
				sent++;
			} else if (ret != -FI_EAGAIN) {
				LT_CHECK_RET(ret, 0, "order: send %zu", sent);
				break;
			}
		}
		s = posted % ORDER_SLOTS;
		if (round++ % 2 && posted < ORDER_CNT && !slot_busy[s]) {
			ret = tagged ? fi_trecv(y.ep, rbuf[s], ORDER_MAX, NULL, FI_ADDR_UNSPEC, 7,
						0, &rctx[s]) :
				       fi_recv(y.ep, rbuf[s], ORDER_MAX, NULL, FI_ADDR_UNSPEC,
					       &rctx[s]);
			if (!ret) {
				slot_busy[s] = true;
				slot_msg[s] = posted++;
			} else if (ret != -FI_EAGAIN) {
				LT_CHECK_RET(ret, 0, "order: receive %zu", posted);
				break;
			}
		}
		lt_progress();
		while (lt_cq_take(&y.rx, &comp)) {
			s = (size_t) ((struct fi_context2 *) comp.op_context - rctx);
			if (s >= ORDER_SLOTS || !slot_busy[s])
				continue;
			if (comp.err || comp.len != order_len(slot_msg[s]) ||
			    lt_verify(rbuf[s], comp.len, 300 + slot_msg[s]) != comp.len)
				bad++;
			slot_busy[s] = false;
			received++;
		}
		while (lt_cq_take(&x.tx, &comp)) {
			s = (size_t) ((struct fi_context2 *) comp.op_context - sctx);
			if (s < ORDER_SLOTS && !comp.err)
				send_busy[s] = false;
		}
	}
	LT_CHECK(received == ORDER_CNT && !bad, "order (%s): %zu of %d received, %zu not the "
		 "message their turn gave them", tagged ? "tagged" : "untagged", received,
		 ORDER_CNT, bad);
	lt_cq_quiet(&x.tx, 10);
	while (lt_cq_take(&x.tx, &comp))
		;
	for (s = 0; s < ORDER_SLOTS; s++) {
		free(sbuf[s]);
		free(rbuf[s]);
	}
}

/* ---- the race, in a child with a 16 MiB direct eager limit ---- */

/* Progresses y alone: x's core sends no more of what is queued. */
static void progress_y_only(void)
{
	for (int i = 0; i < 100; i++)
		fi_cq_read(y.rx.cq, NULL, 0);
}

/* 0 when the receive got the message that arrived first. */
static int race_main(void)
{
	char *large = malloc(RACE_LARGE), *rlarge = calloc(1, RACE_LARGE), small[100], rsmall[100];
	struct fi_context2 sctx[2], rctx[2];
	struct lt_comp comp;

	if (!large || !rlarge || lt_dom_open(info, &dom) ||
	    lt_pair_open(&dom, NULL, NULL, &x, &y, &x_to_y, &y_to_x))
		return 2;
	if (!lt_direct_recv(y.ep))
		return 77;
	warm_up();
	lt_fill(large, RACE_LARGE, 600);
	lt_fill(small, sizeof(small), 601);
	if (LT_RETRY(fi_tsend(x.ep, large, RACE_LARGE, NULL, x_to_y, 500, &sctx[0])))
		return 3;
	/* Its start is in (the callback found no receive), the rest waits for x's progress. */
	progress_y_only();
	if (LT_RETRY(fi_trecv(y.ep, rlarge, RACE_LARGE, NULL, FI_ADDR_UNSPEC, 500, 0, &rctx[0])) ||
	    LT_RETRY(fi_tsend(x.ep, small, sizeof(small), NULL, x_to_y, 500, &sctx[1])))
		return 3;
	/* The receive gets the large message; the small one waits for the next receive. */
	if (!lt_cq_next(&y.rx, &comp, LT_TIMEOUT_MS) || comp.op_context != &rctx[0])
		return 5;
	if (comp.err || comp.len != RACE_LARGE || lt_verify(rlarge, RACE_LARGE, 600) != RACE_LARGE)
		return 4;
	if (LT_RETRY(fi_trecv(y.ep, rsmall, sizeof(rsmall), NULL, FI_ADDR_UNSPEC, 500, 0,
			      &rctx[1])) ||
	    !lt_cq_next(&y.rx, &comp, LT_TIMEOUT_MS) || comp.op_context != &rctx[1] || comp.err ||
	    comp.len != sizeof(small) || lt_verify(rsmall, sizeof(rsmall), 601) != sizeof(small))
		return 5;
	lt_cq_quiet(&x.tx, 10);
	lt_ep_close(&x);
	lt_ep_close(&y);
	lt_dom_close(&dom);
	free(large);
	free(rlarge);
	return 0;
}

static void check_race(void)
{
	struct lt_child child;
	int status, ret;

	setenv("FI_OFI_LAYER_DIRECT_EAGER_SIZE", "16777216", 1);
	ret = lt_child_spawn("race", &child);
	unsetenv("FI_OFI_LAYER_DIRECT_EAGER_SIZE");
	if (!LT_CHECK_RET(ret, 0, "race: child started"))
		return;
	status = lt_child_reap(&child, 4 * LT_TIMEOUT_MS, false);
	if (WIFEXITED(status) && WEXITSTATUS(status) == 77) {
		lt_note("race: left out, no direct receive");
		return;
	}
	LT_CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0,
		 "race: the receive posted while a message arrived gets that message, not the "
		 "one behind it (child status %#x: 4 wrong message, 5 missing completions)",
		 status);
}

/* ---- a peer with bounce buffers ---- */

/* Echoes what comes until a one-byte message; 0 when all went well. */
static int child_main(int rfd, int wfd)
{
	char addr[LT_ADDR_MAX], *buf = malloc(ECHO_MAX);
	struct fi_context2 ctx;
	struct lt_comp comp;
	struct lt_dom cdom;
	struct lt_ep ep;
	fi_addr_t parent;
	ssize_t n;

	if (!buf || lt_dom_open(info, &cdom) || lt_ep_open(&cdom, NULL, &ep))
		return 2;
	if (lt_direct_recv(ep.ep))
		return 5; /* FI_OFI_LAYER_DIRECT_RECV=0 was not honoured */
	if (lt_pipe_send(wfd, ep.addr, ep.addrlen))
		return 2;
	n = lt_pipe_recv(rfd, addr, sizeof(addr), LT_TIMEOUT_MS);
	if (n <= 0 || lt_av_insert(&ep, addr, &parent))
		return 2;
	for (;;) {
		if (lt_recv(&ep, buf, ECHO_MAX, FI_ADDR_UNSPEC, &ctx) ||
		    !lt_cq_next(&ep.rx, &comp, LT_TIMEOUT_MS) || comp.err)
			return 3;
		if (comp.len == 1)
			break;
		if (lt_send(&ep, buf, comp.len, parent, &ctx) ||
		    !lt_cq_next(&ep.tx, &comp, LT_TIMEOUT_MS) || comp.err)
			return 4;
	}
	lt_ep_close(&ep);
	lt_dom_close(&cdom);
	free(buf);
	return 0;
}

static void check_bounce_peer(void)
{
	static const size_t lens[] = { 16384, 4096, 4097, 16385, 65536, 200 * 1024, 256 * 1024,
				       300 * 1024 };
	char addr[LT_ADDR_MAX], *sbuf = malloc(ECHO_MAX), *rbuf = malloc(ECHO_MAX);
	struct fi_context2 sctx, rctx;
	struct lt_child child;
	struct lt_comp comp;
	fi_addr_t peer;
	int status;
	size_t i;
	ssize_t n;

	setenv("FI_OFI_LAYER_DIRECT_RECV", "0", 1);
	setenv("FI_OFI_LAYER_EAGER_SIZE", "4096", 1);
	n = lt_child_spawn("bounce", &child);
	unsetenv("FI_OFI_LAYER_DIRECT_RECV");
	unsetenv("FI_OFI_LAYER_EAGER_SIZE");
	if (!LT_CHECK_RET(n, 0, "bounce peer: started"))
		goto out;
	n = lt_pipe_recv(child.from_child, addr, sizeof(addr), LT_TIMEOUT_MS);
	if (!LT_CHECK(n > 0 && !lt_pipe_send(child.to_child, x.addr, x.addrlen) &&
		      !lt_av_insert(&x, addr, &peer), "bounce peer: addresses swapped"))
		goto reap;
	for (i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
		lt_fill(sbuf, lens[i], 400 + i);
		memset(rbuf, 0, lens[i]);
		LT_CHECK(!lt_recv(&x, rbuf, ECHO_MAX, FI_ADDR_UNSPEC, &rctx) &&
			 !lt_send(&x, sbuf, lens[i], peer, &sctx) &&
			 lt_cq_next(&x.tx, &comp, LT_TIMEOUT_MS) && !comp.err &&
			 lt_cq_next(&x.rx, &comp, LT_TIMEOUT_MS) && !comp.err &&
			 comp.len == lens[i] && lt_verify(rbuf, lens[i], 400 + i) == lens[i],
			 "bounce peer: %zu bytes there and back", lens[i]);
	}
	LT_CHECK(!lt_send(&x, "Q", 1, peer, &sctx) && lt_cq_next(&x.tx, &comp, LT_TIMEOUT_MS),
		 "bounce peer: told to quit");
reap:
	status = lt_child_reap(&child, LT_TIMEOUT_MS, false);
	LT_CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0,
		 "bounce peer: exited cleanly (status %#x)", status);
out:
	free(sbuf);
	free(rbuf);
}

int main(int argc, char **argv)
{
	struct fi_info *hints;
	const char *role;
	int rfd, wfd;

	lt_cma_off();
	hints = lt_hints(FI_MSG | FI_TAGGED | FI_DIRECTED_RECV);
	role = lt_child_role(argc, argv, &rfd, &wfd);
	if (role) {
		int ret;

		info = lt_getinfo_or_skip(hints);
		ret = strcmp(role, "race") ? child_main(rfd, wfd) : race_main();
		fi_freeinfo(info);
		fi_freeinfo(hints);
		return ret;
	}
	lt_begin("direct");
	if (!lt_is_layer())
		lt_skip("direct receive is ofi_layer's");
	info = lt_getinfo_or_skip(hints);
	if (!LT_CHECK_RET(lt_dom_open(info, &dom), 0, "open the domain") ||
	    !LT_CHECK_RET(lt_pair_open(&dom, NULL, NULL, &x, &y, &x_to_y, &y_to_x), 0,
			  "open two endpoints"))
		return lt_end();

	warm_up();
	check_option();
	check_unexpected_large();
	check_truncation(true);
	check_truncation(false);
	check_order(false);
	check_order(true);
	if (lt_direct_recv(x.ep))
		check_race();
	check_bounce_peer();

	lt_ep_close(&x);
	lt_ep_close(&y);
	lt_dom_close(&dom);
	fi_freeinfo(info);
	fi_freeinfo(hints);
	return lt_end();
}
