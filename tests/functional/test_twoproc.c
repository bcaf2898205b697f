/*
 * Two processes: the parent and a child (this program again, fork + exec) swap addresses through
 * a pipe and ping-pong 1000 messages of a few sizes. Then the child exits abruptly, without
 * closing anything, while the parent has a receive posted and a large send pending: the send
 * fails (never a hang), more sends to the dead peer resolve within a bounded time and report the
 * loss, and a restarted child at a new address works with the same parent endpoint.
 *
 * Over a reliable-datagram core the abrupt exit is left out (the core reports no lost peer,
 * fi_layer(7) LIMITATIONS): the first child quits cleanly instead, and the restart follows.
 *
 * Last words (over a datagram core): a child injects a burst of messages (complete once copied)
 * to the parent, which does not progress meanwhile: its connection is not open yet, and most
 * would not be acknowledged. Then the child closes its endpoint and exits; the parent must
 * receive every one, in order (the close lingers until they are given to the core, and the
 * datagram transport's until they are acknowledged, while the parent is silent for less than
 * FI_OFI_LAYER_KEEPALIVE, set to a minute for the child).
 */
#include "common.h"

#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define MAX_MSG (256 * 1024)
#define BIG_PENDING (16 * 1024 * 1024)
#define PINGS 1000
#define DEAD_SENDS 20
#define LAST_WORDS 300

/* In-band commands to the child: an empty message makes it exit at once, "Q" cleanly. */
#define CMD_QUIT 'Q'
/* From the "burst" child through the pipe: its burst is sent, it closes now. */
#define PIPE_SENT 'S'

static struct fi_info *hints;

static int open_side(struct fi_info **info, struct lt_dom *dom, struct lt_ep *ep)
{
	int ret;

	*info = NULL;
	ret = lt_getinfo(hints, info);
	if (!ret)
		ret = lt_dom_open(*info, dom);
	if (!ret)
		ret = lt_ep_open(dom, NULL, ep);
	return ret;
}

/* ---- the child ---- */

static bool parent_gone(int rfd)
{
	struct pollfd pfd = {.fd = rfd, .events = POLLIN};

	return poll(&pfd, 1, 0) == 1 && (pfd.revents & (POLLHUP | POLLERR));
}

/* Last words: LAST_WORDS injects numbered 0, 1, ..., then close at once (see the top). */
static int child_burst(struct lt_ep *ep, fi_addr_t parent, int wfd)
{
	uint64_t deadline = lt_now_ms() + LT_TIMEOUT_MS;
	char sent = PIPE_SENT;
	uint32_t i;
	ssize_t ret;

	for (i = 0; i < LAST_WORDS; i++) {
		while ((ret = fi_inject(ep->ep, &i, sizeof(i), parent)) == -FI_EAGAIN &&
		       lt_now_ms() < deadline)
			lt_progress();
		if (ret)
			return 5;
	}
	return lt_pipe_send(wfd, &sent, 1) ? 2 : 0;
}

/* Echoes every message back until told to stop; says hello first when asked to; or (role
 * "burst") sends its last words. */
static int child_main(const char *role, int rfd, int wfd)
{
	struct fi_context2 rctx, sctx;
	char *rbuf = malloc(MAX_MSG), *sbuf = malloc(MAX_MSG);
	struct fi_info *info;
	struct lt_dom dom;
	struct lt_ep ep;
	struct lt_comp comp;
	fi_addr_t parent;
	uint64_t deadline = lt_now_ms() + 100000;
	ssize_t n;

	if (!rbuf || !sbuf || open_side(&info, &dom, &ep)) {
		fprintf(stderr, "child: setup failed\n");
		return 2;
	}
	parent = lt_child_meet(&ep, rfd, wfd);
	if (parent == FI_ADDR_NOTAVAIL)
		return 2;
	if (!strcmp(role, "hello")) {
		strcpy(sbuf, "hello");
		if (lt_send(&ep, sbuf, 6, parent, &sctx) ||
		    !lt_cq_next(&ep.tx, &comp, LT_TIMEOUT_MS))
			return 3;
	}
	if (lt_recv(&ep, rbuf, MAX_MSG, FI_ADDR_UNSPEC, &rctx))
		return 3;
	if (!strcmp(role, "burst")) {
		deadline = 0;
		n = child_burst(&ep, parent, wfd);
		if (n)
			return (int) n;
	}
	while (lt_now_ms() < deadline && !parent_gone(rfd)) {
		if (!lt_cq_next(&ep.rx, &comp, 100))
			continue;
		if (comp.err)
			return 4;
		if (comp.len == 0)
			_exit(0); /* abruptly: no fi_close, no goodbye */
		if (comp.len == 1 && rbuf[0] == CMD_QUIT)
			break;
		memcpy(sbuf, rbuf, comp.len);
		if (lt_recv(&ep, rbuf, MAX_MSG, FI_ADDR_UNSPEC, &rctx))
			return 3;
		if (lt_send(&ep, sbuf, comp.len, parent, &sctx) ||
		    !lt_cq_next(&ep.tx, &comp, LT_TIMEOUT_MS) || comp.err)
			return 3;
	}
	lt_ep_close(&ep);
	lt_dom_close(&dom);
	fi_freeinfo(info);
	free(rbuf);
	free(sbuf);
	return 0;
}

/* ---- the parent ---- */

static struct lt_dom dom;
static struct lt_ep ep;

/* Starts a child and swaps addresses with it; returns its fi_addr or FI_ADDR_NOTAVAIL. */
static fi_addr_t start_child(const char *role, struct lt_child *child)
{
	return lt_child_start(role, &ep, child);
}

static size_t ping_size(unsigned i)
{
	if (i % 5 == 4)
		return 128 * 1024;
	return i % 2 ? 4096 : 8;
}

/* count round trips to the child; returns how many came back intact. */
static unsigned ping_pong(fi_addr_t peer, unsigned count, uint64_t seed0)
{
	char *sbuf = malloc(MAX_MSG), *rbuf = malloc(MAX_MSG);
	struct fi_context2 sctx, rctx;
	struct lt_comp comp;
	unsigned ok = 0;

	if (!sbuf || !rbuf)
		goto out;
	for (unsigned i = 0; i < count; i++) {
		size_t len = ping_size(i);

		lt_fill(sbuf, len, seed0 + i);
		memset(rbuf, 0, len);
		if (lt_recv(&ep, rbuf, MAX_MSG, FI_ADDR_UNSPEC, &rctx) ||
		    lt_send(&ep, sbuf, len, peer, &sctx))
			break;
		if (!lt_cq_next(&ep.rx, &comp, LT_TIMEOUT_MS) || comp.err || comp.len != len ||
		    lt_verify(rbuf, len, seed0 + i) != len)
			break;
		if (!lt_cq_next(&ep.tx, &comp, LT_TIMEOUT_MS) || comp.err)
			break;
		ok++;
	}
out:
	free(sbuf);
	free(rbuf);
	return ok;
}

static void test_peer_death(struct lt_child *child, fi_addr_t peer, struct fi_context2 *posted,
			    char *posted_buf, bool *posted_alive)
{
	static struct fi_context2 dctx[DEAD_SENDS];
	struct fi_context2 die_ctx, big_ctx;
	char *big = calloc(1, BIG_PENDING), *small = calloc(1, 1 << 20);
	size_t resolved = 0, failed = 0, hung = 0, rx_ok = 0, rx_err = 0;
	bool big_done = false, big_failed = false, die_done = false;
	struct lt_comp comp;
	uint64_t deadline;
	int status;
	ssize_t ret;

	if (!big || !small)
		goto out;
	/* The receive stays posted through all of this. */
	LT_CHECK_RET(lt_recv(&ep, posted_buf, 64, FI_ADDR_UNSPEC, posted), 0,
		     "death: a receive is posted");
	/* "Die" first, then a send far too large for any socket buffer: it cannot finish. */
	LT_CHECK_RET(lt_send(&ep, NULL, 0, peer, &die_ctx), 0, "death: exit command sent");
	LT_CHECK_RET(lt_send(&ep, big, BIG_PENDING, peer, &big_ctx), 0,
		     "death: a 16 MiB send is pending");
	/* Progress while waiting: the child has to get the command first. */
	deadline = lt_now_ms() + LT_TIMEOUT_MS;
	status = -1;
	while (lt_now_ms() < deadline) {
		lt_progress();
		if (waitpid(child->pid, &status, WNOHANG) == child->pid)
			break;
		status = -1;
	}
	(void) lt_child_reap(child, 1000, status == -1);
	LT_CHECK(status != -1 && WIFEXITED(status) && WEXITSTATUS(status) == 0,
		 "death: the child exited abruptly as told (status %#x)", status);

	/* Every send resolves: an error return, or a completion (success or error). */
	deadline = lt_now_ms() + LT_TIMEOUT_MS;
	for (int i = 0; i < DEAD_SENDS; i++) {
		do {
			ret = fi_send(ep.ep, small, i % 4 == 3 ? (1 << 20) : 100, NULL, peer,
				      &dctx[i]);
			lt_progress();
		} while (ret == -FI_EAGAIN && lt_now_ms() < deadline);
		if (ret == -FI_EAGAIN) {
			hung += DEAD_SENDS - i;
			break;
		}
		if (ret) {
			resolved++;
			failed++;
		}
	}
	deadline = lt_now_ms() + 15000;
	while (lt_now_ms() < deadline) {
		lt_progress();
		while (lt_cq_take(&ep.tx, &comp)) {
			if (comp.op_context == &big_ctx) {
				big_done = true;
				big_failed = comp.err != 0;
			} else if (comp.op_context == &die_ctx) {
				die_done = true;
			} else {
				resolved++;
				failed += comp.err != 0;
			}
		}
		while (lt_cq_take(&ep.rx, &comp)) {
			if (comp.op_context == posted && comp.err) {
				rx_err++;
				*posted_alive = false;
			} else {
				rx_ok++;
			}
		}
		if (big_done && die_done && resolved + hung >= DEAD_SENDS)
			break;
	}
	LT_CHECK(big_done && big_failed,
		 "death: the pending 16 MiB send completes with an error "
		 "(the peer never took it) within 15 s (%s)",
		 big_done ? (big_failed ? "error" : "success") : "never completed");
	LT_CHECK(hung == 0, "death: no send to the dead peer stays at -FI_EAGAIN for %d ms (%zu)",
		 LT_TIMEOUT_MS, hung);
	LT_CHECK(resolved == DEAD_SENDS,
		 "death: all %d later sends resolve within the time "
		 "allowed (%zu)",
		 DEAD_SENDS, resolved);
	LT_CHECK(failed > 0, "death: the loss of the peer is reported (%zu of %d sends failed)",
		 failed, DEAD_SENDS);
	LT_CHECK(rx_ok == 0, "death: no receive completes successfully with nothing sent");
	if (rx_err)
		lt_note("death: the posted receive was completed with an error (allowed)");
out:
	free(big);
	free(small);
}

/* Last words (see the top): every message of a child that closed right after sending them. */
static void test_last_words(void)
{
	struct lt_child child = {.to_child = -1, .from_child = -1};
	struct fi_context2 rctx;
	struct lt_comp comp;
	uint32_t got = 0, msg = UINT32_MAX;
	uint64_t deadline;
	fi_addr_t peer;
	char sent = 0;
	int status;

	/* the child's close waits for the parent as long as it stays silent for less than the
	 * keepalive period: long enough here for any scheduling delay of the parent */
	setenv("FI_OFI_LAYER_KEEPALIVE", "60000", 1);
	peer = start_child("burst", &child);
	unsetenv("FI_OFI_LAYER_KEEPALIVE");
	if (!LT_CHECK(peer != FI_ADDR_NOTAVAIL, "last words: a child started"))
		return;
	/* no progress here until the child has sent all and is closing */
	LT_CHECK(lt_pipe_recv(child.from_child, &sent, 1, LT_TIMEOUT_MS) == 1 && sent == PIPE_SENT,
		 "last words: the child injected %d messages", LAST_WORDS);
	for (; got < LAST_WORDS; got++) {
		msg = UINT32_MAX;
		if (lt_recv(&ep, &msg, sizeof(msg), FI_ADDR_UNSPEC, &rctx) ||
		    !lt_cq_next(&ep.rx, &comp, LT_TIMEOUT_MS) || comp.err || msg != got)
			break;
	}
	LT_CHECK(got == LAST_WORDS,
		 "last words: all %d messages of the child that closed arrive, in order (%u; the "
		 "next: %u)", LAST_WORDS, got, msg);
	/* its close waits for our acknowledgements, which go from our progress */
	deadline = lt_now_ms() + LT_TIMEOUT_MS;
	status = -1;
	while (lt_now_ms() < deadline) {
		lt_progress();
		if (waitpid(child.pid, &status, WNOHANG) == child.pid)
			break;
		status = -1;
	}
	(void) lt_child_reap(&child, 1000, status == -1);
	LT_CHECK(status != -1 && WIFEXITED(status) && WEXITSTATUS(status) == 0,
		 "last words: the child closed its endpoint and exited 0 (status %#x)", status);
}

int main(int argc, char **argv)
{
	struct fi_context2 posted;
	char posted_buf[64];
	bool posted_alive = true;
	struct lt_child child = {.to_child = -1, .from_child = -1};
	struct fi_info *info;
	struct lt_comp comp;
	fi_addr_t peer;
	const char *role;
	char quit = CMD_QUIT;
	struct fi_context2 qctx;
	int rfd, wfd, ret, status;
	unsigned ok;

	hints = lt_hints(FI_MSG);
	hints->tx_attr->msg_order = FI_ORDER_SAS;
	hints->rx_attr->msg_order = FI_ORDER_SAS;
	role = lt_child_role(argc, argv, &rfd, &wfd);
	if (role)
		return child_main(role, rfd, wfd);

	lt_begin(argv[0]);
	info = lt_getinfo_or_skip(hints);
	fi_freeinfo(info);
	ret = open_side(&info, &dom, &ep);
	if (!LT_CHECK_RET(ret, 0, "parent endpoint"))
		return lt_end();

	peer = start_child("echo", &child);
	if (!LT_CHECK(peer != FI_ADDR_NOTAVAIL, "child started, addresses swapped over a pipe"))
		return lt_end();
	ok = ping_pong(peer, PINGS, 0);
	LT_CHECK(ok == PINGS, "%d round trips of 8 B, 4 KiB and 128 KiB, data intact (%u)", PINGS,
		 ok);

	if (lt_core_is_msg()) {
		test_peer_death(&child, peer, &posted, posted_buf, &posted_alive);
	} else {
		lt_note("death: not run, the core is not connected (MSG): it reports no lost peer");
		LT_CHECK_RET(lt_recv(&ep, posted_buf, 64, FI_ADDR_UNSPEC, &posted), 0,
			     "a receive is posted");
		LT_CHECK_RET(lt_send(&ep, &quit, 1, peer, &qctx), 0, "quit sent to the child");
		LT_CHECK(lt_cq_next(&ep.tx, &comp, LT_TIMEOUT_MS) && !comp.err,
			 "quit send completes");
		status = lt_child_reap(&child, LT_TIMEOUT_MS, false);
		LT_CHECK(status != -1 && WIFEXITED(status) && WEXITSTATUS(status) == 0,
			 "the child closed its objects and exited 0 (status %#x)", status);
	}

	/* A new process at a new address: same parent endpoint, new AV entry. */
	if (!posted_alive)
		LT_CHECK_RET(lt_recv(&ep, posted_buf, 64, FI_ADDR_UNSPEC, &posted), 0,
			     "restart: the receive posted again");
	peer = start_child("hello", &child);
	if (!LT_CHECK(peer != FI_ADDR_NOTAVAIL, "restart: a new child started, new address "
						"inserted"))
		return lt_end();
	LT_CHECK(lt_cq_next(&ep.rx, &comp, LT_TIMEOUT_MS) && !comp.err &&
			 comp.op_context == &posted && !strcmp(posted_buf, "hello"),
		 "restart: the new child's first message lands in the receive posted before the "
		 "old child died");
	ok = ping_pong(peer, 50, 5000);
	LT_CHECK(ok == 50, "restart: 50 round trips with the new child (%u)", ok);

	/* A clean end: the child closes everything and exits 0. */
	LT_CHECK_RET(lt_send(&ep, &quit, 1, peer, &qctx), 0, "quit sent to the new child");
	LT_CHECK(lt_cq_next(&ep.tx, &comp, LT_TIMEOUT_MS) && !comp.err, "quit send completes");
	status = lt_child_reap(&child, LT_TIMEOUT_MS, false);
	LT_CHECK(status != -1 && WIFEXITED(status) && WEXITSTATUS(status) == 0,
		 "the new child closed its objects and exited 0 (status %#x)", status);

	if (!strcmp(lt_core_name(), "udp"))
		test_last_words();
	else
		lt_note("last words: run over a datagram core only, whose transport is the layer's: "
			"over a connected core, a close with the peer's data unread resets the "
			"connection, and the peer's core drops what it had not read (fi_layer(7))");

	lt_ep_close(&ep);
	lt_dom_close(&dom);
	fi_freeinfo(info);
	fi_freeinfo(hints);
	return lt_end();
}
