/*
 * One core connection per pair of endpoints (fi_layer(7), CONNECTIONS), counted with
 * FI_OPT_LAYER_CONN_COUNT, whatever the order of inserts, sends and connects:
 * - a server that learns its client from the client's first message, as libfabric's own
 *   test programs do, and answers over the connection the client opened;
 * - pairs of endpoints that send to each other before either has made progress (their
 *   connection requests cross), eager and rendezvous messages queued on both sides: every
 *   message arrives once and in order;
 * - 16 processes started at once, each sending to every other at once;
 * - a peer that restarts at the same address, above and below this endpoint's, speaking
 *   first or answering.
 * Over a reliable-datagram core the channels are one way and no loss is reported
 * (fi_layer(7) LIMITATIONS): the deliveries are checked there, not the counts or restarts.
 */
#include "common.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include <rdma/fi_ext_layer.h>

#define PAIRS 12             /* pairs whose requests cross */
#define CROSS_MSGS 24        /* messages each side of a pair queues at once */
#define BIG (96 * 1024)      /* above the eager size: rendezvous */
#define RANKS 16             /* processes of the all-to-all */
#define A2A_MSGS 12          /* messages from each rank to each other */
#define PINGS 10
#define PORT_TRIES 40

static struct fi_info *hints;
static bool is_msg;

static uint64_t conn_count(struct fid_ep *ep)
{
	uint64_t cnt = UINT64_MAX;
	size_t len = sizeof(cnt);

	if (fi_getopt(&ep->fid, FI_OPT_ENDPOINT, FI_OPT_LAYER_CONN_COUNT, &cnt, &len))
		return UINT64_MAX;
	return cnt;
}

/* Message i of a stream: its number, then a pattern of it; every fourth is rendezvous. */
static size_t msg_len(unsigned i)
{
	return i % 4 == 3 ? BIG : 64;
}

static void msg_fill(char *buf, unsigned i, uint64_t stream)
{
	size_t len = msg_len(i);

	lt_fill(buf, len, stream * 1000 + i);
	memcpy(buf, &i, sizeof(i));
}

static bool msg_ok(const char *buf, size_t len, unsigned i, uint64_t stream)
{
	char *want = malloc(BIG);
	bool ok;

	if (!want)
		return false;
	msg_fill(want, i, stream);
	ok = len == msg_len(i) && !memcmp(buf, want, len);
	free(want);
	return ok;
}

/* One message each way between from and to: 0 when it arrived intact. */
static int exchange(struct lt_ep *from, fi_addr_t dest, struct lt_ep *to, unsigned i)
{
	static char sbuf[BIG], rbuf[BIG];
	struct fi_context2 sctx, rctx;
	struct lt_comp comp;

	msg_fill(sbuf, i, 7);
	if (lt_recv(to, rbuf, sizeof(rbuf), FI_ADDR_UNSPEC, &rctx) ||
	    lt_send(from, sbuf, msg_len(i), dest, &sctx))
		return -1;
	if (!lt_cq_next(&to->rx, &comp, LT_TIMEOUT_MS) || comp.err ||
	    !msg_ok(rbuf, comp.len, i, 7))
		return -2;
	if (!lt_cq_next(&from->tx, &comp, LT_TIMEOUT_MS) || comp.err)
		return -3;
	return 0;
}

/* ---- a server learns its client from the client's first message ---- */

static void test_server_learns_client(struct lt_dom *dom)
{
	struct lt_ep server, client;
	struct fi_context2 sctx, rctx;
	char rbuf[LT_ADDR_MAX];
	fi_addr_t to_server, to_client;
	struct lt_comp comp;
	unsigned i, ok = 0;

	if (!LT_CHECK_RET(lt_ep_open(dom, NULL, &server), 0, "learns: server endpoint") ||
	    !LT_CHECK_RET(lt_ep_open(dom, NULL, &client), 0, "learns: client endpoint"))
		return;
	LT_CHECK_RET(lt_av_insert(&client, server.addr, &to_server), 0,
		     "learns: the client inserts the server");
	/* the client's first message carries its address, the server's AV has none yet */
	LT_CHECK_RET(lt_recv(&server, rbuf, sizeof(rbuf), FI_ADDR_UNSPEC, &rctx), 0,
		     "learns: the server posts a receive");
	LT_CHECK_RET(lt_send(&client, client.addr, client.addrlen, to_server, &sctx), 0,
		     "learns: the client sends its address");
	LT_CHECK(lt_cq_next(&server.rx, &comp, LT_TIMEOUT_MS) && !comp.err &&
			 comp.len == client.addrlen,
		 "learns: the server has the client's address");
	LT_CHECK(lt_cq_next(&client.tx, &comp, LT_TIMEOUT_MS) && !comp.err,
		 "learns: the client's send completes");
	LT_CHECK_RET(lt_av_insert(&server, rbuf, &to_client), 0,
		     "learns: the server inserts the client");
	for (i = 0; i < PINGS; i++) {
		if (exchange(&server, to_client, &client, i) ||
		    exchange(&client, to_server, &server, i))
			break;
		ok++;
	}
	LT_CHECK(ok == PINGS, "learns: %u of %u round trips, eager and rendezvous", ok, PINGS);
	if (is_msg) {
		LT_CHECK(conn_count(server.ep) == 1, "learns: the server has one connection (%lu)",
			 (unsigned long) conn_count(server.ep));
		LT_CHECK(conn_count(client.ep) == 1, "learns: the client has one connection (%lu)",
			 (unsigned long) conn_count(client.ep));
	}
	lt_ep_close(&client);
	lt_ep_close(&server);
}

/* ---- requests that cross ---- */

/* Each side of a pair queues CROSS_MSGS sends to the other before any progress. */
static bool cross_pair(struct lt_dom *dom, unsigned pair)
{
	static char sbuf[2][CROSS_MSGS][BIG], rbuf[2][CROSS_MSGS][BIG];
	static struct fi_context2 sctx[2][CROSS_MSGS], rctx[2][CROSS_MSGS];
	struct lt_ep ep[2];
	fi_addr_t to[2];
	struct lt_comp comp;
	unsigned side, i, got[2] = { 0, 0 }, sent[2] = { 0, 0 }, bad = 0;
	unsigned char done[2][CROSS_MSGS] = { { 0 } };
	size_t j;
	bool ok = true;

	if (lt_pair_open(dom, NULL, NULL, &ep[0], &ep[1], &to[0], &to[1]))
		return LT_CHECK(false, "cross %u: two endpoints that know each other", pair);
	for (side = 0; side < 2; side++) {
		for (i = 0; i < CROSS_MSGS; i++) {
			msg_fill(sbuf[side][i], i, side);
			if (fi_recv(ep[side].ep, rbuf[side][i], BIG, NULL, FI_ADDR_UNSPEC,
				    &rctx[side][i]))
				ok = false;
		}
	}
	/* fi_send makes no progress: both requests are out before either is read */
	for (i = 0; i < CROSS_MSGS; i++) {
		for (side = 0; side < 2; side++) {
			if (fi_send(ep[side].ep, sbuf[side][i], msg_len(i), NULL, to[side],
				    &sctx[side][i]))
				ok = false;
		}
	}
	ok = LT_CHECK(ok, "cross %u: receives posted and sends queued on both sides", pair);
	for (side = 0; ok && side < 2; side++) {
		for (i = 0; i < CROSS_MSGS; i++) {
			if (!lt_cq_next(&ep[side].rx, &comp, LT_TIMEOUT_MS))
				break;
			/* receives match in the order posted: message j lands in buffer j (a
			 * rendezvous one completes after the eager ones behind it) */
			j = (struct fi_context2 *) comp.op_context - rctx[side];
			if (comp.err || j >= CROSS_MSGS || done[side][j]++ ||
			    !msg_ok(rbuf[side][j], comp.len, (unsigned) j, !side))
				bad++;
			got[side]++;
		}
		for (i = 0; i < CROSS_MSGS; i++) {
			if (!lt_cq_next(&ep[side].tx, &comp, LT_TIMEOUT_MS))
				break;
			if (comp.err)
				bad++;
			sent[side]++;
		}
	}
	ok &= LT_CHECK(got[0] == CROSS_MSGS && got[1] == CROSS_MSGS && sent[0] == CROSS_MSGS &&
			       sent[1] == CROSS_MSGS && !bad,
		       "cross %u: every message arrives once, in order, intact (%u+%u received, "
		       "%u+%u sent, %u bad)", pair, got[0], got[1], sent[0], sent[1], bad);
	/* nothing more arrives: no message was carried twice */
	ok &= LT_CHECK(lt_cq_quiet(&ep[0].rx, 20) == 0 && lt_cq_quiet(&ep[1].rx, 20) == 0,
		       "cross %u: nothing arrives twice", pair);
	if (is_msg)
		ok &= LT_CHECK(conn_count(ep[0].ep) == 1 && conn_count(ep[1].ep) == 1,
			       "cross %u: one connection on each side (%lu, %lu)", pair,
			       (unsigned long) conn_count(ep[0].ep),
			       (unsigned long) conn_count(ep[1].ep));
	lt_ep_close(&ep[0]);
	lt_ep_close(&ep[1]);
	return ok;
}

/* ---- 16 processes, all to all ---- */

struct a2a_report {
	uint32_t received;
	uint32_t bad;       /* out of order, duplicated, damaged or failed */
	uint64_t conns;
};

/* Progresses until the parent writes something (its first byte is returned), or -1. */
static int child_wait_parent(int rfd)
{
	struct pollfd pfd = { .fd = rfd, .events = POLLIN };
	uint64_t deadline = lt_now_ms() + LT_TIMEOUT_MS;
	char cmd;

	while (lt_now_ms() < deadline) {
		lt_progress();
		if (poll(&pfd, 1, 1) == 1)
			return lt_pipe_recv(rfd, &cmd, 1, LT_TIMEOUT_MS) == 1 ? cmd : -1;
	}
	return -1;
}

static int a2a_child(int rfd, int wfd)
{
	static char addrs[RANKS][LT_ADDR_MAX], sbuf[A2A_MSGS][BIG], rbuf[BIG];
	static struct fi_context2 sctx[RANKS][A2A_MSGS];
	struct fi_context2 rctx;
	unsigned next[RANKS] = { 0 }, peer, i, rank;
	struct a2a_report rep = { 0 };
	fi_addr_t fi_addrs[RANKS];
	struct fi_info *info = NULL;
	struct lt_comp comp;
	struct lt_dom dom;
	struct lt_ep ep;
	uint32_t hdr[2];
	char msg[1 + RANKS * LT_ADDR_MAX];
	ssize_t n;

	if (lt_getinfo(hints, &info) || lt_dom_open(info, &dom) || lt_ep_open(&dom, NULL, &ep))
		return 2;
	if (lt_pipe_send(wfd, ep.addr, ep.addrlen))
		return 2;
	n = lt_pipe_recv(rfd, msg, sizeof(msg), LT_TIMEOUT_MS);
	if (n != (ssize_t) (1 + RANKS * ep.addrlen))
		return 2;
	rank = (unsigned char) msg[0];
	for (peer = 0; peer < RANKS; peer++)
		memcpy(addrs[peer], msg + 1 + peer * ep.addrlen, ep.addrlen);
	for (peer = 0; peer < RANKS; peer++) {
		if (fi_av_insert(ep.av, addrs[peer], 1, &fi_addrs[peer], 0, NULL) != 1)
			return 2;
	}
	/* at once to everyone, starting with the next rank: requests cross everywhere */
	for (i = 0; i < A2A_MSGS; i++) {
		msg_fill(sbuf[i], i, rank);
		for (peer = (rank + 1) % RANKS; peer != rank; peer = (peer + 1) % RANKS) {
			if (LT_RETRY(fi_send(ep.ep, sbuf[i], msg_len(i), NULL, fi_addrs[peer],
					     &sctx[peer][i])))
				rep.bad++;
		}
	}
	while (rep.received < (RANKS - 1) * A2A_MSGS) {
		if (lt_recv(&ep, rbuf, sizeof(rbuf), FI_ADDR_UNSPEC, &rctx) ||
		    !lt_cq_next(&ep.rx, &comp, LT_TIMEOUT_MS)) {
			rep.bad++;
			break;
		}
		rep.received++;
		/* the sender's rank is in the pattern's stream: find it by the number */
		memcpy(hdr, rbuf, sizeof(hdr[0]));
		for (peer = 0; peer < RANKS; peer++) {
			if (peer != rank && next[peer] == hdr[0] &&
			    msg_ok(rbuf, comp.len, hdr[0], peer))
				break;
		}
		if (comp.err || peer == RANKS)
			rep.bad++;
		else
			next[peer]++;
	}
	for (i = 0; i < (RANKS - 1) * A2A_MSGS; i++) {
		if (!lt_cq_next(&ep.tx, &comp, LT_TIMEOUT_MS) || comp.err)
			rep.bad++;
	}
	if (lt_pipe_send(wfd, &rep, sizeof(rep)))
		return 2;
	/* everyone is done: count, and go on serving until told to quit */
	if (child_wait_parent(rfd) != 'C')
		return 2;
	rep.conns = conn_count(ep.ep);
	if (lt_pipe_send(wfd, &rep, sizeof(rep)) || child_wait_parent(rfd) != 'Q')
		return 2;
	lt_ep_close(&ep);
	lt_dom_close(&dom);
	fi_freeinfo(info);
	return 0;
}

static void test_all_to_all(void)
{
	static char addrs[RANKS][LT_ADDR_MAX];
	struct lt_child child[RANKS];
	struct a2a_report rep;
	char msg[1 + RANKS * LT_ADDR_MAX];
	unsigned r, started = 0, good = 0, one_each = 0;
	size_t addrlen = 0;
	ssize_t n;

	for (r = 0; r < RANKS; r++) {
		if (lt_child_spawn("a2a", &child[r]))
			break;
		started++;
		n = lt_pipe_recv(child[r].from_child, addrs[r], LT_ADDR_MAX, LT_TIMEOUT_MS);
		if (n <= 0 || (addrlen && (size_t) n != addrlen))
			break;
		addrlen = (size_t) n;
	}
	if (!LT_CHECK(started == RANKS && r == RANKS, "a2a: %u processes with endpoints", RANKS))
		goto out;
	for (r = 0; r < RANKS; r++)
		memcpy(msg + 1 + r * addrlen, addrs[r], addrlen);
	/* the go: every rank gets the table within a few microseconds of the others */
	for (r = 0; r < RANKS; r++) {
		msg[0] = (char) r;
		lt_pipe_send(child[r].to_child, msg, 1 + RANKS * addrlen);
	}
	for (r = 0; r < RANKS; r++) {
		n = lt_pipe_recv(child[r].from_child, &rep, sizeof(rep), LT_TIMEOUT_MS);
		if (n == sizeof(rep) && rep.received == (RANKS - 1) * A2A_MSGS && !rep.bad)
			good++;
		else
			lt_note("rank %u: %zd, received %u, bad %u", r, n, rep.received, rep.bad);
	}
	LT_CHECK(good == RANKS, "a2a: %u of %u ranks got every message once and in order", good,
		 RANKS);
	for (r = 0; r < RANKS; r++)
		lt_pipe_send(child[r].to_child, "C", 1);
	for (r = 0; r < RANKS; r++) {
		n = lt_pipe_recv(child[r].from_child, &rep, sizeof(rep), LT_TIMEOUT_MS);
		if (n == sizeof(rep) && rep.conns == RANKS - 1)
			one_each++;
		else if (is_msg)
			lt_note("rank %u: %lu connections", r, (unsigned long) rep.conns);
	}
	if (is_msg)
		LT_CHECK(one_each == RANKS, "a2a: %u of %u ranks have one connection per peer (%u)",
			 one_each, RANKS, RANKS - 1);
	for (r = 0; r < RANKS; r++)
		lt_pipe_send(child[r].to_child, "Q", 1);
out:
	for (r = 0; r < started; r++) {
		int status = lt_child_reap(&child[r], LT_TIMEOUT_MS, false);

		LT_CHECK(status == 0, "a2a: rank %u exits cleanly (status %#x)", r, status);
	}
}

/* ---- a peer that restarts at the same address ---- */

/* An endpoint at 127.0.0.1:port: 0, -FI_EADDRINUSE, or another error. */
static int open_at_port(unsigned port, struct fi_info **info, struct lt_dom *dom,
			struct lt_ep *ep)
{
	char service[16];
	int ret;

	snprintf(service, sizeof(service), "%u", port);
	ret = fi_getinfo(LT_FI_VERSION, LT_NODE, service, FI_SOURCE, hints, info);
	if (ret)
		return ret;
	ret = lt_dom_open(*info, dom);
	if (ret) {
		fi_freeinfo(*info);
		return ret;
	}
	ret = lt_ep_open(dom, NULL, ep);
	if (ret) {
		lt_dom_close(dom);
		fi_freeinfo(*info);
	}
	return ret;
}

/*
 * The restarting peer: told the parent's address, a port, and whether to speak first. Echoes
 * what comes; answers "C" with its connection count (one byte).
 */
static int restart_child(int rfd, int wfd)
{
	struct { uint16_t port; char first; char addr[LT_ADDR_MAX]; } cmd;
	static char rbuf[BIG], sbuf[BIG];
	struct fi_context2 rctx, sctx;
	struct fi_info *info = NULL;
	struct lt_comp comp;
	struct lt_dom dom;
	struct lt_ep ep;
	fi_addr_t parent;
	uint64_t cnt;
	ssize_t n;

	n = lt_pipe_recv(rfd, &cmd, sizeof(cmd), LT_TIMEOUT_MS);
	if (n <= (ssize_t) offsetof(__typeof__(cmd), addr))
		return 2;
	if (open_at_port(cmd.port, &info, &dom, &ep)) {
		lt_pipe_send(wfd, "", 0);
		return 0;
	}
	if (lt_pipe_send(wfd, ep.addr, ep.addrlen) || lt_av_insert(&ep, cmd.addr, &parent))
		return 2;
	if (lt_recv(&ep, rbuf, sizeof(rbuf), FI_ADDR_UNSPEC, &rctx))
		return 3;
	if (cmd.first && (lt_send(&ep, "hello", 6, parent, &sctx) ||
			  !lt_cq_next(&ep.tx, &comp, LT_TIMEOUT_MS) || comp.err))
		return 3;
	for (;;) {
		if (!lt_cq_next(&ep.rx, &comp, LT_TIMEOUT_MS) || comp.err)
			return 4;
		n = (ssize_t) comp.len;
		if (n == 1 && rbuf[0] == 'C') {
			cnt = conn_count(ep.ep);
			sbuf[0] = (char) (cnt > 127 ? 127 : cnt);
		} else {
			memcpy(sbuf, rbuf, (size_t) n);
		}
		if (lt_recv(&ep, rbuf, sizeof(rbuf), FI_ADDR_UNSPEC, &rctx) ||
		    lt_send(&ep, sbuf, (size_t) n, parent, &sctx) ||
		    !lt_cq_next(&ep.tx, &comp, LT_TIMEOUT_MS) || comp.err)
			return 3;
	}
}

/*
 * One message to the child and its echo back. A send can fail while this endpoint still
 * holds a connection to the child's previous process: it is sent again, a few times at most.
 */
static bool echo(struct lt_ep *ep, fi_addr_t peer, const void *buf, size_t len, void *reply,
		 unsigned *failed)
{
	struct fi_context2 sctx, rctx;
	struct lt_comp comp;
	unsigned tries;

	if (lt_recv(ep, reply, BIG, FI_ADDR_UNSPEC, &rctx))
		return false;
	for (tries = 0; tries < 4; tries++) {
		if (lt_send(ep, buf, len, peer, &sctx) || !lt_cq_next(&ep->tx, &comp, LT_TIMEOUT_MS))
			return false;
		if (!comp.err)
			break;
		(*failed)++;
	}
	return tries < 4 && lt_cq_next(&ep->rx, &comp, LT_TIMEOUT_MS) && !comp.err &&
	       comp.len == len;
}

/* Starts a restarting child at port (0: any, then *port says which); first: it speaks first. */
static int start_restart_child(struct lt_ep *ep, unsigned *port, bool first,
			       struct lt_child *child, char *addr)
{
	struct { uint16_t port; char first; char addr[LT_ADDR_MAX]; } cmd = {
		.port = (uint16_t) *port,
		.first = first,
	};
	ssize_t n;

	memcpy(cmd.addr, ep->addr, ep->addrlen);
	if (lt_child_spawn("restart", child))
		return -1;
	if (lt_pipe_send(child->to_child, &cmd, offsetof(__typeof__(cmd), addr) + ep->addrlen))
		return -1;
	n = lt_pipe_recv(child->from_child, addr, LT_ADDR_MAX, LT_TIMEOUT_MS);
	if (n <= 0) {
		lt_child_reap(child, LT_TIMEOUT_MS, false);
		return n == 0 ? -FI_EADDRINUSE : -1;
	}
	*port = ntohs(((struct sockaddr_in *) addr)->sin_port);
	return 0;
}

/* Progresses until ep has cnt connections (bounded). */
static bool wait_conns(struct lt_ep *ep, uint64_t cnt)
{
	uint64_t deadline = lt_now_ms() + LT_TIMEOUT_MS;

	while (conn_count(ep->ep) != cnt && lt_now_ms() < deadline)
		lt_progress();
	return conn_count(ep->ep) == cnt;
}

/* The child's first message, "hello". */
static void hello(struct lt_ep *ep, const char *side)
{
	struct fi_context2 rctx;
	struct lt_comp comp;
	char buf[8] = "";

	LT_CHECK(!lt_recv(ep, buf, sizeof(buf), FI_ADDR_UNSPEC, &rctx) &&
			 lt_cq_next(&ep->rx, &comp, LT_TIMEOUT_MS) && !comp.err &&
			 !strcmp(buf, "hello"),
		 "restart %s: the new life speaks first", side);
}

static void test_restart(struct lt_dom *dom, bool above)
{
	const char *side = above ? "above" : "below";
	static char buf[BIG], reply[BIG];
	char addr[LT_ADDR_MAX], again[LT_ADDR_MAX];
	struct lt_child child;
	struct lt_ep ep;
	fi_addr_t peer;
	unsigned port, my_port, i, life, failed = 0, ok;
	uint64_t cnt;
	int ret = -1;

	if (!LT_CHECK_RET(lt_ep_open(dom, NULL, &ep), 0, "restart %s: endpoint", side))
		return;
	my_port = ntohs(((struct sockaddr_in *) ep.addr)->sin_port);
	for (i = 1; i <= PORT_TRIES && ret; i++) {
		port = above ? my_port + i : my_port - i;
		ret = start_restart_child(&ep, &port, false, &child, addr);
	}
	if (!LT_CHECK_RET(ret, 0, "restart %s: a peer at port %u", side, port))
		goto out;
	LT_CHECK_RET(lt_av_insert(&ep, addr, &peer), 0, "restart %s: insert the peer", side);
	/* three lives at one address: we speak first, it speaks first, we speak first */
	for (life = 0; life < 3; life++) {
		if (life) {
			lt_child_reap(&child, LT_TIMEOUT_MS, true);
			/*
			 * Life 2: a message written to a connection whose peer is gone can
			 * complete before the loss shows (as over tcp itself), so the endpoint
			 * first sees it; life 1 speaks first while it may not have.
			 */
			if (life == 2)
				LT_CHECK(wait_conns(&ep, 0), "restart %s: the loss of life 1 is "
					 "seen", side);
			ret = start_restart_child(&ep, &port, life == 1, &child, again);
			if (!LT_CHECK(!ret && !memcmp(addr, again, ep.addrlen),
				      "restart %s: life %u at the same address", side, life))
				goto out;
			if (life == 1)
				hello(&ep, side);
		}
		for (i = 0, ok = 0; i < PINGS; i++) {
			msg_fill(buf, i, life);
			if (!echo(&ep, peer, buf, msg_len(i), reply, &failed) ||
			    !msg_ok(reply, msg_len(i), i, life))
				break;
			ok++;
		}
		LT_CHECK(ok == PINGS, "restart %s: life %u, %u of %u echoes", side, life, ok,
			 PINGS);
		if (!LT_CHECK(echo(&ep, peer, "C", 1, reply, &failed),
			      "restart %s: life %u counts its connections", side, life))
			continue;
		cnt = (unsigned char) reply[0];
		LT_CHECK(cnt == 1 && conn_count(ep.ep) == 1,
			 "restart %s: life %u, one connection on each side (%lu, %lu)", side, life,
			 (unsigned long) conn_count(ep.ep), (unsigned long) cnt);
	}
	lt_note("restart %s: %u sends failed on connections to earlier lives", side, failed);
	lt_child_reap(&child, LT_TIMEOUT_MS, true);
out:
	lt_ep_close(&ep);
}

int main(int argc, char **argv)
{
	struct fi_info *info = NULL;
	struct lt_dom dom;
	const char *role;
	unsigned pair, ok = 0;
	int rfd, wfd;

	hints = lt_hints(FI_MSG);
	if (strcasecmp(lt_core_name(), "shm"))
		hints->addr_format = FI_SOCKADDR_IN;
	role = lt_child_role(argc, argv, &rfd, &wfd);
	if (role)
		return !strcmp(role, "a2a") ? a2a_child(rfd, wfd) : restart_child(rfd, wfd);
	lt_begin(argv[0]);
	is_msg = lt_core_is_msg();
	info = lt_getinfo_or_skip(hints);
	if (!LT_CHECK_RET(lt_dom_open(info, &dom), 0, "domain"))
		return lt_end();
	test_server_learns_client(&dom);
	for (pair = 0; pair < PAIRS; pair++)
		ok += cross_pair(&dom, pair);
	LT_CHECK(ok == PAIRS, "cross: %u of %u pairs", ok, PAIRS);
	test_all_to_all();
	if (is_msg) {
		test_restart(&dom, true);
		test_restart(&dom, false);
	} else {
		lt_note("restart: left out over a reliable-datagram core (no lost peer reported)");
	}
	lt_dom_close(&dom);
	fi_freeinfo(info);
	fi_freeinfo(hints);
	return lt_end();
}
