/*
 * Many peers on one endpoint (fi_layer(7), Scale): 520 peer endpoints (LAYER_TEST_PEERS),
 * spread over 4 processes, talk to one endpoint of this process, enough for the endpoint to
 * spread its connections over several core CQs (FI_OFI_LAYER_CQ_GROUP) and to hold fewer
 * rings than connections:
 * - every peer sends a hello carrying its address; the endpoint inserts it, as a server that
 *   learns its clients does, and answers each: every peer has its answer;
 * - the endpoint holds one connection per peer (FI_OPT_LAYER_CONN_COUNT) and at most
 *   FI_OFI_LAYER_RING_ACTIVE rings;
 * - the endpoint sends to every peer first, and each answers: both ways on every connection;
 * - one peer after another goes busy for a while (a ping-pong of 40 messages) while the rest
 *   idle: each exchange completes, in order;
 * - half the peers close their endpoints: the endpoint's connections go down to the other
 *   half (tcp reports their ends), which still answers everything;
 * - the processes exit: no connection is left.
 * Over a reliable-datagram core no loss is reported (fi_layer(7) LIMITATIONS): the messages
 * are checked there, not the counts. The test raises its fd limit to the hard limit and skips
 * when that is below what its peers take.
 */
#include "common.h"

#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include <rdma/fi_ext_layer.h>

#define PEERS_DEFAULT 520
#define PROCS 4
#define BUSY_PEERS 8          /* peers that go busy one after another */
#define PINGS 40              /* round trips of each busy peer */
#define FDS_PER_PEER 12       /* a peer endpoint and its connection at both ends, and more */
#define MSG_MAX 256

#define MIN_U32(a, b) ((uint32_t) (a) < (uint32_t) (b) ? (uint32_t) (a) : (uint32_t) (b))

enum msg_kind { HELLO = 1, ACK, CALL, ANSWER, PING, PONG };

/* What travels: a kind, the peer's index, a sequence number; a hello adds the address. */
struct msg {
	uint32_t kind;
	uint32_t index;
	uint32_t seq;
	uint32_t addrlen;
	char addr[MSG_MAX - 16];
};

/* What a peers' process is told first: its peers' indexes and the endpoint's address. */
struct start_msg {
	uint32_t first;
	uint32_t cnt;
	char addr[LT_ADDR_MAX];
};

static struct fi_info *hints;
static bool is_msg;

/* ---- the peers' processes ---- */

struct peer_ep {
	struct fid_ep *ep;
	struct msg rbuf, sbuf;
	struct fi_context2 rctx, sctx;
	uint32_t index;
	uint32_t next_seq;            /* PING: the next one expected */
	bool is_closed;
};

struct peers {
	struct fi_info *info;
	struct fid_fabric *fabric;
	struct fid_domain *domain;
	struct fid_av *av;
	struct fid_cq *cq;
	fi_addr_t server;
	struct peer_ep *eps;
	uint32_t cnt;
	uint32_t bad;
};

static int peer_post(struct peers *p, struct peer_ep *pe)
{
	return (int) LT_RETRY(fi_recv(pe->ep, &pe->rbuf, sizeof(pe->rbuf), NULL, FI_ADDR_UNSPEC,
				      &pe->rctx));
}

static int peer_send(struct peers *p, struct peer_ep *pe, uint32_t kind, uint32_t seq)
{
	size_t len = offsetof(struct msg, addr);

	pe->sbuf.kind = kind;
	pe->sbuf.index = pe->index;
	pe->sbuf.seq = seq;
	if (kind == HELLO) {
		len = sizeof(pe->sbuf.addr);
		if (fi_getname(&pe->ep->fid, pe->sbuf.addr, &len))
			return -FI_EINVAL;
		pe->sbuf.addrlen = (uint32_t) len;
		len += offsetof(struct msg, addr);
	}
	return (int) LT_RETRY(fi_send(pe->ep, &pe->sbuf, len, NULL, p->server, &pe->sctx));
}

/* Reads the processes' CQ until want receives came (answering each as on_recv says). */
static void peers_run(struct peers *p, uint32_t want, void (*on_recv)(struct peers *,
								      struct peer_ep *))
{
	struct fi_cq_tagged_entry comp[16];
	struct fi_cq_err_entry err;
	uint64_t deadline = lt_now_ms() + 4 * LT_TIMEOUT_MS;
	uint32_t got = 0;
	struct peer_ep *pe;
	ssize_t n, i;

	while (got < want && lt_now_ms() < deadline) {
		n = fi_cq_read(p->cq, comp, 16);
		if (n == -FI_EAVAIL) {
			memset(&err, 0, sizeof(err));
			fi_cq_readerr(p->cq, &err, 0);
			p->bad++;
			continue;
		}
		for (i = 0; i < n; i++) {
			if (!(comp[i].flags & FI_RECV))
				continue;
			pe = (struct peer_ep *) ((char *) comp[i].op_context -
						 offsetof(struct peer_ep, rctx));
			got++;
			on_recv(p, pe);
		}
	}
	if (got < want)
		p->bad += want - got;
}

static void on_ack(struct peers *p, struct peer_ep *pe)
{
	p->bad += pe->rbuf.kind != ACK || pe->rbuf.index != pe->index;
	p->bad += !!peer_post(p, pe);
}

static void on_call(struct peers *p, struct peer_ep *pe)
{
	uint32_t kind = pe->rbuf.kind, seq = pe->rbuf.seq;

	p->bad += (kind != CALL && kind != PING) || pe->rbuf.index != pe->index;
	if (kind == PING)
		p->bad += seq != pe->next_seq++;
	p->bad += !!peer_post(p, pe);
	p->bad += !!peer_send(p, pe, kind == PING ? PONG : ANSWER, seq);
}

/* Drains the sends' completions (each peer has at most one outstanding at a time here). */
static void peers_quiet(struct peers *p)
{
	struct fi_cq_tagged_entry comp[16];
	uint64_t end = lt_now_ms() + 50;

	while (lt_now_ms() < end)
		(void) fi_cq_read(p->cq, comp, 16);
}

static int peers_child(int rfd, int wfd)
{
	struct fi_cq_attr cq_attr = { .format = FI_CQ_FORMAT_TAGGED };
	struct fi_av_attr av_attr = { .type = FI_AV_TABLE };
	struct start_msg start;
	struct peers p = { 0 };
	struct peer_ep *pe;
	char cmd;
	uint32_t i, want;
	ssize_t n;

	n = lt_pipe_recv(rfd, &start, sizeof(start), LT_TIMEOUT_MS);
	if (n < (ssize_t) offsetof(struct start_msg, addr) || lt_getinfo(hints, &p.info) ||
	    fi_fabric(p.info->fabric_attr, &p.fabric, NULL) ||
	    fi_domain(p.fabric, p.info, &p.domain, NULL) ||
	    fi_av_open(p.domain, &av_attr, &p.av, NULL) ||
	    fi_cq_open(p.domain, &cq_attr, &p.cq, NULL) ||
	    fi_av_insert(p.av, start.addr, 1, &p.server, 0, NULL) != 1)
		return 2;
	p.cnt = start.cnt;
	p.eps = calloc(p.cnt, sizeof(*p.eps));
	for (i = 0; i < p.cnt; i++) {
		pe = &p.eps[i];
		pe->index = start.first + i;
		if (fi_endpoint(p.domain, p.info, &pe->ep, NULL) ||
		    fi_ep_bind(pe->ep, &p.av->fid, 0) ||
		    fi_ep_bind(pe->ep, &p.cq->fid, FI_TRANSMIT | FI_RECV) || fi_enable(pe->ep) ||
		    peer_post(&p, pe))
			return 3;
	}
	/* hellos, all at once */
	for (i = 0; i < p.cnt; i++)
		p.bad += !!peer_send(&p, &p.eps[i], HELLO, 0);
	peers_run(&p, p.cnt, on_ack);
	peers_quiet(&p);
	lt_pipe_send(wfd, &p.bad, sizeof(p.bad));
	/* then answer whatever comes, as the parent says how much */
	while (lt_pipe_recv(rfd, &cmd, 1, 8 * LT_TIMEOUT_MS) == 1) {
		switch (cmd) {
		case 'r': /* answer what the server sends: how many comes next */
			if (lt_pipe_recv(rfd, &want, sizeof(want), LT_TIMEOUT_MS) != sizeof(want))
				return 4;
			peers_run(&p, want, on_call);
			peers_quiet(&p);
			break;
		case 'h': /* close the endpoints of even index */
			for (i = 0; i < p.cnt; i++) {
				pe = &p.eps[i];
				if (pe->index % 2)
					continue;
				fi_close(&pe->ep->fid);
				pe->is_closed = true;
			}
			break;
		case 'x':
			goto out;
		}
		lt_pipe_send(wfd, &p.bad, sizeof(p.bad));
	}
out:
	for (i = 0; i < p.cnt; i++) {
		if (!p.eps[i].is_closed)
			fi_close(&p.eps[i].ep->fid);
	}
	fi_close(&p.cq->fid);
	fi_close(&p.av->fid);
	fi_close(&p.domain->fid);
	fi_close(&p.fabric->fid);
	fi_freeinfo(p.info);
	free(p.eps);
	return 0;
}

/* ---- the endpoint ---- */

struct server {
	struct lt_ep ep;
	fi_addr_t *peer;             /* by peer index */
	uint32_t cnt;
	struct msg rbuf[64], sbuf;
	struct fi_context2 rctx[64];
};

/*
 * A process's report (the count of what it saw wrong), the endpoint progressing meanwhile:
 * its sends may wait for it (over an RDM core, for the peer's answer to its HELLO).
 */
static bool child_report(struct lt_child *child, uint32_t *bad)
{
	uint64_t deadline = lt_now_ms() + 4 * LT_TIMEOUT_MS;
	struct pollfd pfd = { .fd = child->from_child, .events = POLLIN };

	while (lt_now_ms() < deadline) {
		lt_progress();
		if (poll(&pfd, 1, 1) == 1)
			return lt_pipe_recv(child->from_child, bad, sizeof(*bad), LT_TIMEOUT_MS) ==
			       sizeof(*bad);
	}
	return false;
}

static uint64_t ep_opt(struct lt_ep *ep, int opt)
{
	uint64_t cnt = UINT64_MAX;
	size_t len = sizeof(cnt);

	if (fi_getopt(&ep->ep->fid, FI_OPT_ENDPOINT, opt, &cnt, &len))
		return UINT64_MAX;
	return cnt;
}

/* The next message that came (its receive posted again), or NULL within the timeout. */
static struct msg *server_recv(struct server *s, size_t *len)
{
	struct lt_comp comp;
	struct msg *m;
	size_t i;

	if (!lt_cq_next(&s->ep.rx, &comp, 4 * LT_TIMEOUT_MS) || comp.err)
		return NULL;
	i = (size_t) ((struct fi_context2 *) comp.op_context - s->rctx);
	m = &s->rbuf[i];
	*len = comp.len;
	/* kept until the caller is done: it posts the receive again itself */
	return m;
}

static void server_repost(struct server *s, struct msg *m)
{
	size_t i = (size_t) (m - s->rbuf);

	LT_CHECK_RET(lt_recv(&s->ep, m, sizeof(*m), FI_ADDR_UNSPEC, &s->rctx[i]), 0, "repost");
}

static bool server_send(struct server *s, uint32_t index, uint32_t kind, uint32_t seq)
{
	struct msg m = { .kind = kind, .index = index, .seq = seq };

	return !LT_RETRY(fi_inject(s->ep.ep, &m, offsetof(struct msg, addr), s->peer[index]));
}

/* Waits (progressing) for the connection count to come to want; whether it did. */
static bool wait_conns(struct server *s, uint64_t want)
{
	uint64_t deadline = lt_now_ms() + 2 * LT_TIMEOUT_MS;

	while (ep_opt(&s->ep, FI_OPT_LAYER_CONN_COUNT) != want && lt_now_ms() < deadline)
		lt_progress();
	return ep_opt(&s->ep, FI_OPT_LAYER_CONN_COUNT) == want;
}

/* The server calls each peer of the given parity (2: all) and takes their answers. */
static void call_all(struct server *s, struct lt_child *child, int parity, const char *what)
{
	uint32_t i, calls = 0, good = 0, per[PROCS] = { 0 }, bad = 0, r;
	uint32_t per_proc = s->cnt / PROCS;
	struct msg *m;
	size_t len;
	char cmd = 'r';

	for (i = 0; i < s->cnt; i++) {
		if (parity < 2 && (int) (i % 2) != parity)
			continue;
		per[MIN_U32(i / per_proc, PROCS - 1)]++;
	}
	for (r = 0; r < PROCS; r++) {
		lt_pipe_send(child[r].to_child, &cmd, 1);
		lt_pipe_send(child[r].to_child, &per[r], sizeof(per[r]));
	}
	for (i = 0; i < s->cnt; i++) {
		if (parity < 2 && (int) (i % 2) != parity)
			continue;
		calls += server_send(s, i, CALL, i);
	}
	while (good + bad < calls && (m = server_recv(s, &len))) {
		if (m->kind == ANSWER && m->seq == m->index && m->index < s->cnt)
			good++;
		else
			bad++;
		server_repost(s, m);
	}
	LT_CHECK(good == calls, "%s: %u calls, %u answered", what, calls, good);
	for (r = 0; r < PROCS; r++) {
		LT_CHECK(child_report(&child[r], &bad) && !bad,
			 "%s: process %u saw everything right (%u wrong)", what, r, bad);
	}
}

/* One peer after another pings with the endpoint while the rest idle. */
static void busy_peers(struct server *s, struct lt_child *child)
{
	uint32_t k, n, index, ok = 0, want, bad, r, per_proc = s->cnt / PROCS;
	char cmd = 'r';
	struct msg *m;
	size_t len;

	for (k = 0; k < BUSY_PEERS; k++) {
		index = (uint32_t) ((uint64_t) k * s->cnt / BUSY_PEERS) | 1; /* odd: kept later */
		if (index >= s->cnt)
			index = s->cnt - 1;
		r = MIN_U32(index / per_proc, PROCS - 1);
		want = PINGS;
		lt_pipe_send(child[r].to_child, &cmd, 1);
		lt_pipe_send(child[r].to_child, &want, sizeof(want));
		for (n = 0; n < PINGS; n++) {
			if (!server_send(s, index, PING, n) || !(m = server_recv(s, &len)))
				break;
			ok += m->kind == PONG && m->index == index && m->seq == n;
			server_repost(s, m);
		}
		LT_CHECK(child_report(&child[r], &bad) && !bad,
			 "busy peer %u: its process saw every ping in order", index);
	}
	LT_CHECK(ok == BUSY_PEERS * PINGS, "%u busy peers one after another: %u of %u pongs in "
		 "order", BUSY_PEERS, ok, BUSY_PEERS * PINGS);
}

int main(int argc, char **argv)
{
	const char *env = getenv("LAYER_TEST_PEERS");
	struct lt_child child[PROCS];
	struct server s = { 0 };
	struct lt_dom dom = { 0 };
	struct rlimit lim;
	uint32_t hellos = 0, bad, i, r, per_proc, first;
	const char *active = getenv("FI_OFI_LAYER_RING_ACTIVE");
	uint64_t ring_max = active ? strtoull(active, NULL, 0) : 64;
	uint64_t rings, need;
	int rfd, wfd;
	const char *role;
	struct msg *m;
	size_t len;
	char cmd;

	hints = lt_hints(FI_MSG);
	role = lt_child_role(argc, argv, &rfd, &wfd);
	getrlimit(RLIMIT_NOFILE, &lim);
	lim.rlim_cur = lim.rlim_max;
	setrlimit(RLIMIT_NOFILE, &lim);
	if (role)
		return peers_child(rfd, wfd);

	lt_begin("test_many_peers");
	s.cnt = env ? (uint32_t) atoi(env) : PEERS_DEFAULT;
	if (s.cnt < PROCS * 2)
		s.cnt = PROCS * 2;
	need = (uint64_t) s.cnt * FDS_PER_PEER / PROCS + 256;
	if (lim.rlim_max != RLIM_INFINITY && lim.rlim_max < need) {
		char why[160];

		snprintf(why, sizeof(why), "the fd limit (%" PRIu64 ") is below the %" PRIu64
			 " fds a process of %u peers takes", (uint64_t) lim.rlim_max, need,
			 s.cnt / PROCS);
		lt_skip(why);
	}
	dom.info = lt_getinfo_or_skip(hints);
	is_msg = lt_core_is_msg();
	if (!LT_CHECK_RET(lt_dom_open(dom.info, &dom), 0, "domain") ||
	    !LT_CHECK_RET(lt_ep_open(&dom, NULL, &s.ep), 0, "the endpoint"))
		return lt_end();
	s.peer = calloc(s.cnt, sizeof(*s.peer));
	for (i = 0; i < 64; i++)
		server_repost(&s, &s.rbuf[i]);

	per_proc = s.cnt / PROCS;
	for (r = 0; r < PROCS; r++) {
		struct start_msg start;

		first = r * per_proc;
		start.first = first;
		start.cnt = r + 1 < PROCS ? per_proc : s.cnt - first;
		memcpy(start.addr, s.ep.addr, s.ep.addrlen);
		if (!LT_CHECK_RET(lt_child_spawn("peers", &child[r]), 0, "process %u", r))
			return lt_end();
		lt_pipe_send(child[r].to_child, &start,
			     offsetof(struct start_msg, addr) + s.ep.addrlen);
	}

	/* hellos: insert each peer, answer it */
	while (hellos < s.cnt && (m = server_recv(&s, &len))) {
		if (!LT_CHECK(m->kind == HELLO && m->index < s.cnt && m->addrlen <= sizeof(m->addr),
			      "a hello (kind %u, index %u)", m->kind, m->index))
			break;
		if (!LT_CHECK_RET(fi_av_insert(s.ep.av, m->addr, 1, &s.peer[m->index], 0, NULL), 1,
				  "insert peer %u", m->index) ||
		    !LT_CHECK(server_send(&s, m->index, ACK, 0), "answer peer %u", m->index))
			break;
		hellos++;
		server_repost(&s, m);
	}
	LT_CHECK(hellos == s.cnt, "%u peers said hello, each inserted and answered", hellos);
	for (r = 0; r < PROCS; r++)
		LT_CHECK(child_report(&child[r], &bad) && !bad,
			 "process %u: every peer has its answer (%u wrong)", r, bad);
	if (is_msg)
		LT_CHECK(wait_conns(&s, s.cnt), "one connection per peer (%" PRIu64 ")",
			 ep_opt(&s.ep, FI_OPT_LAYER_CONN_COUNT));
	rings = ep_opt(&s.ep, FI_OPT_LAYER_RING_COUNT);
	LT_CHECK(rings <= ring_max, "at most FI_OFI_LAYER_RING_ACTIVE rings (%" PRIu64 " of %"
		 PRIu64 ")", rings, ring_max);

	call_all(&s, child, 2, "the endpoint calls every peer first");
	busy_peers(&s, child);
	rings = ep_opt(&s.ep, FI_OPT_LAYER_RING_COUNT);
	LT_CHECK(rings <= ring_max, "still at most FI_OFI_LAYER_RING_ACTIVE rings (%" PRIu64 ")",
		 rings);

	/* half the peers go */
	cmd = 'h';
	for (r = 0; r < PROCS; r++) {
		lt_pipe_send(child[r].to_child, &cmd, 1);
		child_report(&child[r], &bad);
	}
	if (is_msg)
		LT_CHECK(wait_conns(&s, s.cnt - (s.cnt + 1) / 2), "the closed half's connections "
			 "end (%" PRIu64 " left)", ep_opt(&s.ep, FI_OPT_LAYER_CONN_COUNT));
	call_all(&s, child, 1, "the other half still answers");

	cmd = 'x';
	for (r = 0; r < PROCS; r++) {
		lt_pipe_send(child[r].to_child, &cmd, 1);
		LT_CHECK(lt_child_reap(&child[r], LT_TIMEOUT_MS, false) == 0,
			 "process %u exits cleanly", r);
	}
	if (is_msg)
		LT_CHECK(wait_conns(&s, 0), "no connection left once they exited (%" PRIu64 ")",
			 ep_opt(&s.ep, FI_OPT_LAYER_CONN_COUNT));
	lt_ep_close(&s.ep);
	lt_dom_close(&dom);
	free(s.peer);
	fi_freeinfo(dom.info);
	fi_freeinfo(hints);
	return lt_end();
}
