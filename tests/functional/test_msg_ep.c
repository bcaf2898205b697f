/*
 * FI_MSG between endpoints of one process, around the data (test_msg.c has the calls and the
 * data): selective completion and counters, endpoint attributes, names and options, sends to
 * oneself, bursts that run into -FI_EAGAIN, and the reply path sharing one connection.
 */
#include "msg_fixture.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* ---- selective completion and counters ---- */

static int open_counted(struct lt_ep *ep, const struct lt_ep_opts *opts, uint64_t flags,
			struct fid_cntr **cntr)
{
	struct fi_cntr_attr attr = {.events = FI_CNTR_EVENTS_COMP, .wait_obj = FI_WAIT_UNSPEC};
	struct lt_ep_opts o = *opts;
	int ret;

	o.no_enable = true;
	ret = lt_ep_open(&dom, &o, ep);
	if (ret)
		return ret;
	ret = fi_cntr_open(dom.domain, &attr, cntr, NULL);
	if (!ret)
		ret = fi_ep_bind(ep->ep, &(*cntr)->fid, flags);
	if (!ret)
		ret = lt_ep_enable(ep);
	return ret;
}

/* Waits until the counter reaches value, progressing every CQ. */
static bool cntr_reach(struct fid_cntr *cntr, uint64_t value)
{
	uint64_t deadline = lt_now_ms() + LT_TIMEOUT_MS;

	while (fi_cntr_read(cntr) < value && lt_now_ms() < deadline)
		lt_progress();
	return fi_cntr_read(cntr) >= value;
}

static void test_selective_and_counters(void)
{
	struct lt_ep_opts sel_tx = {.tx_bind_flags = FI_SELECTIVE_COMPLETION};
	struct lt_ep_opts sel_rx = {.rx_bind_flags = FI_SELECTIVE_COMPLETION};
	struct fid_cntr *scntr = NULL, *rcntr = NULL;
	struct lt_ep s = {0}, r = {0};
	struct fi_context2 sctx[3], rctx[4];
	char sbuf[3][32] = { { 0 } }, rbuf[4][32];
	fi_addr_t s_to_r, r_to_s;
	struct lt_comp comp;
	ssize_t ret;

	/* Without FI_RMA, the read, write and remote flags are taken and never count
	 * (fi_ubertest binds counters so). */
	ret = open_counted(&s, &sel_tx, FI_TRANSMIT | FI_READ | FI_WRITE, &scntr);
	if (!ret)
		ret = open_counted(&r, &sel_rx, FI_RECV | FI_REMOTE_WRITE | FI_REMOTE_READ, &rcntr);
	if (!ret)
		ret = lt_av_insert(&s, r.addr, &s_to_r);
	if (!ret)
		ret = lt_av_insert(&r, s.addr, &r_to_s);
	if (!LT_CHECK_RET(ret, 0, "selective: endpoints with FI_SELECTIVE_COMPLETION and counters"))
		goto out;

	/* Receives: only the one posted with FI_COMPLETION reports. */
	for (int i = 0; i < 3; i++) {
		struct iovec iov = {.iov_base = rbuf[i], .iov_len = sizeof(rbuf[i])};
		struct fi_msg msg = {
			.msg_iov = &iov,
			.iov_count = 1,
			.addr = FI_ADDR_UNSPEC,
			.context = &rctx[i],
		};

		if (i == 0)
			ret = fi_recv(r.ep, rbuf[i], sizeof(rbuf[i]), NULL, FI_ADDR_UNSPEC,
				      &rctx[i]);
		else
			ret = fi_recvmsg(r.ep, &msg, i == 1 ? FI_COMPLETION : 0);
		LT_CHECK_RET(ret, 0, "selective: receive %d posted", i);
	}
	/* Sends: fi_send (no flag), fi_sendmsg with FI_COMPLETION, fi_sendmsg without. */
	for (int i = 0; i < 3; i++) {
		struct iovec iov = {.iov_base = sbuf[i], .iov_len = sizeof(sbuf[i])};
		struct fi_msg msg = {
			.msg_iov = &iov,
			.iov_count = 1,
			.addr = s_to_r,
			.context = &sctx[i],
		};

		snprintf(sbuf[i], sizeof(sbuf[i]), "selective %d", i);
		if (i == 0)
			ret = LT_RETRY(
				fi_send(s.ep, sbuf[i], sizeof(sbuf[i]), NULL, s_to_r, &sctx[i]));
		else
			ret = LT_RETRY(fi_sendmsg(s.ep, &msg, i == 1 ? FI_COMPLETION : 0));
		LT_CHECK_RET(ret, 0, "selective: send %d posted", i);
	}
	LT_CHECK(cntr_reach(rcntr, 3), "selective: the receive counter reaches 3 (%llu)",
		 (unsigned long long) fi_cntr_read(rcntr));
	LT_CHECK(cntr_reach(scntr, 3), "selective: the send counter reaches 3 (%llu)",
		 (unsigned long long) fi_cntr_read(scntr));
	lt_cq_quiet(&s.tx, 200);
	LT_CHECK(s.tx.count == 1 && lt_cq_take(&s.tx, &comp) && comp.op_context == &sctx[1] &&
			 !comp.err,
		 "selective: exactly one send completion, for the FI_COMPLETION send");
	LT_CHECK(r.rx.count == 1 && lt_cq_take(&r.rx, &comp) && comp.op_context == &rctx[1] &&
			 !comp.err,
		 "selective: exactly one receive completion, for the FI_COMPLETION "
		 "receive");
	LT_CHECK(!strcmp(rbuf[0], "selective 0") && !strcmp(rbuf[1], "selective 1") &&
			 !strcmp(rbuf[2], "selective 2"),
		 "selective: all three messages delivered in "
		 "order");

	/* An error still reports and counts: a truncated receive posted with FI_COMPLETION. */
	{
		struct iovec iov = {.iov_base = rbuf[3], .iov_len = 4};
		struct fi_msg msg = {
			.msg_iov = &iov,
			.iov_count = 1,
			.addr = FI_ADDR_UNSPEC,
			.context = &rctx[3],
		};

		ret = fi_recvmsg(r.ep, &msg, FI_COMPLETION);
		if (!ret)
			ret = LT_RETRY(
				fi_send(s.ep, sbuf[0], sizeof(sbuf[0]), NULL, s_to_r, &sctx[0]));
		if (LT_CHECK_RET(ret, 0, "selective: truncated message posted")) {
			uint64_t deadline = lt_now_ms() + LT_TIMEOUT_MS;

			while (fi_cntr_readerr(rcntr) < 1 && lt_now_ms() < deadline)
				lt_progress();
			LT_CHECK(fi_cntr_readerr(rcntr) == 1 && fi_cntr_read(rcntr) == 3,
				 "selective: a truncated receive counts as an error (%llu errors, "
				 "%llu ok)",
				 (unsigned long long) fi_cntr_readerr(rcntr),
				 (unsigned long long) fi_cntr_read(rcntr));
			LT_CHECK(lt_cq_next(&r.rx, &comp, LT_TIMEOUT_MS) && comp.err == FI_ETRUNC,
				 "selective: and reports FI_ETRUNC on the CQ");
			LT_CHECK(cntr_reach(scntr, 4) && fi_cntr_read(scntr) == 4,
				 "selective: the send counts as a success, once");
		}
	}
out:
	lt_ep_close(&s);
	lt_ep_close(&r);
	if (scntr)
		fi_close(&scntr->fid);
	if (rcntr)
		fi_close(&rcntr->fid);
}

/* ---- endpoint attributes and names ---- */

static void test_size_left(void)
{
	struct fi_context2 ctx[64];
	char buf[64][8];
	size_t n, eagain = 0;
	ssize_t rx, tx;

	/* The brief asks for them; they are deprecated in the headers. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
	rx = fi_rx_size_left(b.ep);
	tx = fi_tx_size_left(a.ep);
#pragma GCC diagnostic pop
	/* Deprecated calls that a provider may leave out (-FI_ENOSYS); if given, a lower bound. */
	LT_CHECK(rx >= 0 || rx == -FI_ENOSYS, "fi_rx_size_left is a count or -FI_ENOSYS (%zd)", rx);
	LT_CHECK(tx >= 0 || tx == -FI_ENOSYS, "fi_tx_size_left is a count or -FI_ENOSYS (%zd)", tx);
	if (rx > 0) {
		n = (size_t) rx < 64 ? (size_t) rx : 64;
		for (size_t i = 0; i < n; i++)
			eagain += fi_recv(b.ep, buf[i], 8, NULL, FI_ADDR_UNSPEC, &ctx[i]) != 0;
		LT_CHECK(eagain == 0, "fi_rx_size_left: %zu receives post without -FI_EAGAIN", n);
		for (size_t i = 0; i < n; i++) {
			struct lt_comp comp;

			(void) fi_cancel(&b.ep->fid, &ctx[i]);
			(void) lt_cq_next(&b.rx, &comp, 1000);
		}
	}
	check_no_stray("size_left");
}

static void test_names(void)
{
	struct sockaddr_in sin, *got = (struct sockaddr_in *) a.addr;
	char small[1], addr[LT_ADDR_MAX];
	struct lt_ep_opts no_enable = {.no_enable = true};
	struct lt_ep d = {0};
	socklen_t slen = sizeof(sin);
	size_t len = sizeof(small);
	fi_addr_t a_to_d;
	int ret, fd;

	ret = fi_getname(&a.ep->fid, small, &len);
	LT_CHECK_RET(ret, -FI_ETOOSMALL, "fi_getname into a 1-byte buffer");
	LT_CHECK(len == a.addrlen, "fi_getname: addrlen set to the size needed (%zu, want %zu)",
		 len, a.addrlen);
	LT_CHECK(memcmp(a.addr, b.addr, a.addrlen) != 0,
		 "fi_getname: two endpoints have different names");
	if (dom.info->addr_format != FI_SOCKADDR_IN) {
		/* shm: names, not IP addresses */
		lt_note("fi_getname/fi_setname: address format %u is not a sockaddr_in, the "
			"socket address checks not run", dom.info->addr_format);
		return;
	}
	LT_CHECK(a.addrlen == sizeof(struct sockaddr_in) && got->sin_family == AF_INET &&
			 got->sin_addr.s_addr == htonl(INADDR_LOOPBACK) && got->sin_port != 0,
		 "fi_getname: a sockaddr_in for 127.0.0.1 with a port");

	/* fi_setname on an endpoint not yet enabled: a port chosen by the test. */
	fd = socket(AF_INET, SOCK_STREAM, 0);
	memset(&sin, 0, sizeof(sin));
	sin.sin_family = AF_INET;
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (fd < 0 || bind(fd, (struct sockaddr *) &sin, sizeof(sin)) ||
	    getsockname(fd, (struct sockaddr *) &sin, &slen)) {
		lt_note("fi_setname: could not find a free port, not run");
		if (fd >= 0)
			close(fd);
		return;
	}
	close(fd);
	ret = lt_ep_open(&dom, &no_enable, &d);
	if (!LT_CHECK_RET(ret, 0, "fi_setname: endpoint opened, not enabled"))
		return;
	ret = fi_setname(&d.ep->fid, &sin, sizeof(sin));
	LT_CHECK_RET(ret, 0, "fi_setname to 127.0.0.1:%d", ntohs(sin.sin_port));
	if (!ret) {
		ret = lt_ep_enable(&d);
		LT_CHECK_RET(ret, 0, "fi_setname: enable afterwards");
		got = (struct sockaddr_in *) d.addr;
		LT_CHECK(!ret && got->sin_port == sin.sin_port,
			 "fi_setname: fi_getname gives the address set (port %d)",
			 ntohs(got->sin_port));
		memcpy(addr, d.addr, d.addrlen);
		if (!ret && lt_av_insert(&a, &sin, &a_to_d) == 0) {
			struct fi_context2 sctx, rctx;
			char buf[16] = "to setname", rbuf[16] = "";
			struct lt_comp comp;

			LT_CHECK_RET(lt_recv(&d, rbuf, sizeof(rbuf), FI_ADDR_UNSPEC, &rctx), 0,
				     "fi_setname: fi_recv");
			LT_CHECK_RET(lt_send(&a, buf, sizeof(buf), a_to_d, &sctx), 0,
				     "fi_setname: fi_send to the address set");
			if (next_comp(&d.rx, &comp, "fi_setname"))
				LT_CHECK(!comp.err && !strcmp(rbuf, "to setname"),
					 "fi_setname: the message arrives");
			wait_tx(&a, &sctx, "fi_setname");
		}
	}
	lt_ep_close(&d);
	check_no_stray("fi_setname");
}

static void test_opt_min_multi_recv(void)
{
	size_t value = 0, len = sizeof(value), set = 4096;
	int ret;

	ret = fi_getopt(&a.ep->fid, FI_OPT_ENDPOINT, FI_OPT_MIN_MULTI_RECV, &value, &len);
	LT_CHECK(ret == 0 && len == sizeof(size_t),
		 "fi_getopt FI_OPT_MIN_MULTI_RECV (ret %d, optlen %zu, value %zu)", ret, len,
		 value);
	ret = fi_setopt(&a.ep->fid, FI_OPT_ENDPOINT, FI_OPT_MIN_MULTI_RECV, &set, sizeof(set));
	LT_CHECK_RET(ret, 0, "fi_setopt FI_OPT_MIN_MULTI_RECV 4096");
	value = 0;
	len = sizeof(value);
	ret = fi_getopt(&a.ep->fid, FI_OPT_ENDPOINT, FI_OPT_MIN_MULTI_RECV, &value, &len);
	LT_CHECK(ret == 0 && value == 4096, "fi_getopt reads back 4096 (%zu)", value);
}

/* ---- sends to oneself ---- */

static void test_self(void)
{
	struct fi_context2 sctx, rctx;
	size_t sizes[2] = {100, 2 * MIB};
	fi_addr_t self;
	int ret;

	ret = lt_av_insert(&a, a.addr, &self);
	if (!LT_CHECK_RET(ret, 0, "self: own address inserted into own AV"))
		return;
	for (int i = 0; i < 2; i++) {
		char *sbuf = malloc(sizes[i]), *rbuf = calloc(1, sizes[i]);
		struct lt_comp comp;
		char what[32];

		snprintf(what, sizeof(what), "self %zu bytes", sizes[i]);
		if (!sbuf || !rbuf) {
			free(sbuf);
			free(rbuf);
			continue;
		}
		lt_fill(sbuf, sizes[i], 31 + i);
		LT_CHECK_RET(lt_recv(&a, rbuf, sizes[i], FI_ADDR_UNSPEC, &rctx), 0, "%s: fi_recv",
			     what);
		LT_CHECK_RET(lt_send(&a, sbuf, sizes[i], self, &sctx), 0, "%s: fi_send", what);
		if (next_comp(&a.rx, &comp, what)) {
			check_rx(&comp, &rctx, sizes[i], what);
			LT_CHECK(lt_verify(rbuf, sizes[i], 31 + i) == sizes[i], "%s: data", what);
			LT_CHECK(comp.src == self, "%s: source is the endpoint's own fi_addr",
				 what);
		}
		wait_tx(&a, &sctx, what);
		free(sbuf);
		free(rbuf);
	}
	check_no_stray("self");
}

/* ---- bursts ---- */

/*
 * 10,000 small messages as fast as the sender can post them: each round posts until the provider
 * answers -FI_EAGAIN (or runs out of messages), then progresses. The receiver keeps a window of
 * receives posted. All arrive once, in order, and nothing hangs.
 */
static void test_burst(void)
{
	enum { N = 10000, WINDOW = 256, LEN = 64 };
	static char rbuf[WINDOW][LEN];
	static struct fi_context2 rctx[WINDOW];
	uint64_t deadline = lt_now_ms() + 25000;
	size_t posted = 0, received = 0, sent = 0, send_done = 0, eagain = 0, bad = 0, errs = 0;
	/* A send owns its buffer until it completes: one buffer per message. */
	static char sbuf[N][LEN];
	static struct fi_context2 sctx[N];
	struct lt_comp comp;
	ssize_t ret;

	while (posted < WINDOW) {
		ret = fi_recv(b.ep, rbuf[posted % WINDOW], LEN, NULL, FI_ADDR_UNSPEC,
			      &rctx[posted % WINDOW]);
		if (ret)
			break;
		posted++;
	}
	while ((received < N || send_done < N) && lt_now_ms() < deadline) {
		/* Post until the provider pushes back, without progressing in between. */
		ret = 0;
		while (sent < N && ret == 0) {
			memcpy(sbuf[sent], &sent, sizeof(sent));
			ret = fi_send(a.ep, sbuf[sent], LEN, NULL, a_to_b, &sctx[sent]);
			if (ret == 0)
				sent++;
			else if (ret == -FI_EAGAIN)
				eagain++;
		}
		if (ret && ret != -FI_EAGAIN)
			break;
		lt_progress();
		while (lt_cq_take(&a.tx, &comp)) {
			send_done++;
			errs += comp.err != 0;
		}
		while (lt_cq_take(&b.rx, &comp)) {
			size_t slot = (size_t) ((struct fi_context2 *) comp.op_context - rctx), seq;

			if (comp.err || slot >= WINDOW) {
				errs++;
				continue;
			}
			memcpy(&seq, rbuf[slot], sizeof(seq));
			bad += seq != received;
			received++;
			if (posted < N) {
				ret = fi_recv(b.ep, rbuf[slot], LEN, NULL, FI_ADDR_UNSPEC,
					      &rctx[slot]);
				posted += ret == 0;
				errs += ret != 0;
			}
		}
	}
	lt_note("burst: %zu -FI_EAGAIN returns retried", eagain);
	LT_CHECK(sent == N && send_done == N, "burst: %d sends posted and completed (%zu, %zu)", N,
		 sent, send_done);
	LT_CHECK(received == N && bad == 0 && errs == 0,
		 "burst: %d received exactly once, in order (%zu received, %zu out of order, %zu "
		 "errors)",
		 N, received, bad, errs);
	check_no_stray("burst");
}

/*
 * Messages sent while the receiver has nothing posted: the sender may be held back with
 * -FI_EAGAIN (retried) but nothing is lost, and all arrive in order once receives are posted.
 */
static void test_unexpected_burst(void)
{
	enum { N = 1000, LEN = 200 };
	static char rbuf[N][LEN];
	static struct fi_context2 rctx[N];
	size_t sent = 0, send_done = 0, received = 0, bad = 0, errs = 0;
	uint64_t deadline = lt_now_ms() + 2000;
	static char sbuf[N][LEN];
	static struct fi_context2 sctx[N];
	struct lt_comp comp;
	ssize_t ret;

	/* Phase 1: send with nothing posted, for as long as the provider takes them. */
	while (sent < N && lt_now_ms() < deadline) {
		lt_fill(sbuf[sent], LEN, 5000 + sent);
		ret = fi_send(a.ep, sbuf[sent], LEN, NULL, a_to_b, &sctx[sent]);
		if (ret == 0)
			sent++;
		else if (ret != -FI_EAGAIN)
			break;
		lt_progress();
	}
	LT_CHECK(b.rx.count == 0, "unexpected burst: no receive completes with nothing posted");
	lt_note("unexpected burst: %zu of %d sends accepted before any receive was posted", sent,
		N);
	/* Phase 2: post everything, finish sending. */
	for (size_t i = 0; i < N; i++)
		errs += lt_recv(&b, rbuf[i], LEN, FI_ADDR_UNSPEC, &rctx[i]) != 0;
	deadline = lt_now_ms() + 20000;
	while ((received < N || send_done < N) && lt_now_ms() < deadline) {
		if (sent < N) {
			lt_fill(sbuf[sent], LEN, 5000 + sent);
			ret = fi_send(a.ep, sbuf[sent], LEN, NULL, a_to_b, &sctx[sent]);
			if (ret == 0)
				sent++;
			else if (ret != -FI_EAGAIN)
				break;
		}
		lt_progress();
		while (lt_cq_take(&a.tx, &comp)) {
			send_done++;
			errs += comp.err != 0;
		}
		while (lt_cq_take(&b.rx, &comp)) {
			size_t slot = (size_t) ((struct fi_context2 *) comp.op_context - rctx);

			if (comp.err || slot != received ||
			    lt_verify(rbuf[slot], LEN, 5000 + slot) != LEN)
				bad++;
			received++;
		}
	}
	LT_CHECK(sent == N && send_done == N && received == N && bad == 0 && errs == 0,
		 "unexpected burst: all %d delivered in order (%zu sent, %zu completed, %zu "
		 "received, %zu wrong, %zu errors)",
		 N, sent, send_done, received, bad, errs);
	check_no_stray("unexpected burst");
}

/*
 * TCP connections in ESTABLISHED state on 127.0.0.1 whose local port is port, from
 * /proc/net/tcp: a listener's accepted connections. -1 when the table cannot be read.
 */
static int established_on_port(unsigned port)
{
	unsigned local_addr, local_port, state;
	char line[256];
	int cnt = 0;
	FILE *f;

	f = fopen("/proc/net/tcp", "r");
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		if (sscanf(line, " %*u: %8X:%4X %*8X:%*4X %2X", &local_addr, &local_port,
			   &state) != 3)
			continue;
		/* 01: TCP_ESTABLISHED; addresses are in network order, as the kernel stores them */
		if (state == 1 && local_port == port && local_addr == htonl(INADDR_LOOPBACK))
			cnt++;
	}
	fclose(f);
	return cnt;
}

/*
 * One leg of the reply path: from sends len bytes (pattern seed) to its peer dest, to has a
 * receive posted for source recv_src; the message arrives intact and, unless want_src is
 * FI_ADDR_NOTAVAIL, its completion names want_src.
 */
static bool reply_leg(struct lt_ep *from, struct lt_ep *to, fi_addr_t dest, fi_addr_t recv_src,
		      fi_addr_t want_src, size_t len, uint64_t seed, const char *leg)
{
	static char sbuf[256 * KIB], rbuf[256 * KIB];
	struct fi_context2 sctx, rctx;
	struct lt_comp comp;
	bool ok = true;

	lt_fill(sbuf, len, seed);
	memset(rbuf, 0, len);
	ok &= LT_CHECK_RET(lt_recv(to, rbuf, len, recv_src, &rctx), 0, "reply path: %s: "
			   "receive posted", leg);
	ok &= LT_CHECK_RET(lt_send(from, sbuf, len, dest, &sctx), 0, "reply path: %s: %zu bytes "
			   "sent", leg, len);
	ok &= wait_tx(from, &sctx, "reply path: the send completes") &&
	      next_comp(&to->rx, &comp, "reply path: the message is received") &&
	      (want_src == FI_ADDR_NOTAVAIL ||
	       LT_CHECK(comp.src == want_src, "reply path: %s: its source is the sender", leg)) &&
	      LT_CHECK(lt_verify(rbuf, len, seed) == len, "reply path: %s of %zu bytes intact",
		       leg, len);
	return ok;
}

/*
 * Two fresh endpoints that know each other: x sends first, y answers. y has x in its AV when
 * x connects, so y's answers, eager and rendezvous, and a burst of unexpected ones go back on
 * x's connection (fi_layer(7), PROTOCOL): x's listener never accepts anything.
 */
static void test_reply_shares_connection(void)
{
	const size_t sizes[] = {8, 256 * KIB};
	struct fi_context2 rctx, ctx[100];
	size_t vals[100];
	struct sockaddr_in *sin;
	struct lt_comp comp;
	fi_addr_t x_to_y, y_to_x;
	struct lt_ep x, y;
	size_t i, n, got, bad;
	bool ok = true;

	if (!lt_is_layer() || !lt_core_is_msg() || info->addr_format != FI_SOCKADDR_IN) {
		lt_note("reply on the requester's connection: needs ofi_layer over a MSG core "
			"with IPv4 addresses, not run");
		return;
	}
	if (!LT_CHECK_RET(lt_pair_open(&dom, NULL, NULL, &x, &y, &x_to_y, &y_to_x), 0,
			  "reply path: two endpoints"))
		return;
	for (i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		ok &= reply_leg(&x, &y, x_to_y, FI_ADDR_UNSPEC, FI_ADDR_NOTAVAIL, sizes[i], 40 + i,
				"request");
		ok &= reply_leg(&y, &x, y_to_x, y_to_x, x_to_y, sizes[i], 50 + i, "answer");
	}
	/* more than the few buffers a connection starts with before it carries user data */
	n = sizeof(ctx) / sizeof(ctx[0]);
	for (i = 0, bad = 0; i < n && ok; i++) {
		vals[i] = i;
		if (lt_send(&y, &vals[i], sizeof(vals[i]), y_to_x, &ctx[i]))
			bad++;
	}
	for (i = 0; i < n && ok && !bad; i++) {
		if (lt_recv(&x, &got, sizeof(got), y_to_x, &rctx) ||
		    !lt_cq_next(&x.rx, &comp, LT_TIMEOUT_MS) || comp.err || got != i)
			bad++;
	}
	for (i = 0; i < n && ok && !bad; i++) {
		if (!lt_cq_next(&y.tx, &comp, LT_TIMEOUT_MS) || comp.err)
			bad++;
	}
	LT_CHECK(ok && !bad, "reply path: a burst of %zu answers arrives in order", n);

	sin = (struct sockaddr_in *) x.addr;
	LT_CHECK(established_on_port(ntohs(sin->sin_port)) == 0,
		 "reply path: y answered on x's connection (x accepted %d)",
		 established_on_port(ntohs(sin->sin_port)));
	sin = (struct sockaddr_in *) y.addr;
	LT_CHECK(established_on_port(ntohs(sin->sin_port)) == 1,
		 "reply path: one connection between x and y (y accepted %d)",
		 established_on_port(ntohs(sin->sin_port)));
	lt_ep_close(&x);
	lt_ep_close(&y);
}

int main(int argc, char **argv)
{
	(void) argc;
	if (msg_fixture_open(argv[0]))
		return lt_end();
	test_selective_and_counters();
	test_size_left();
	test_names();
	test_opt_min_multi_recv();
	test_self();
	test_burst();
	test_unexpected_burst();
	test_reply_shares_connection();
	msg_fixture_close();
	return lt_end();
}
