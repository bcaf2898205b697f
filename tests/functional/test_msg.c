/*
 * FI_MSG between endpoints of one process: every send and receive call, CQ data, source
 * addresses, message sizes from 0 to over 1 GiB, ordering and truncation (test_msg_ep.c:
 * selective completion, counters, endpoint names and options, sends to oneself, bursts).
 *
 * LAYER_TEST_BIG=0 leaves out the message of over 1 GiB (it runs when the machine has the
 * memory for it); LAYER_TEST_BIG=1 forces it.
 */
#include "msg_fixture.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* ---- the send and receive calls ---- */

static void test_send_recv(void)
{
	struct fi_context2 sctx, rctx;
	char sbuf[64], rbuf[64];
	struct lt_comp comp;

	lt_fill(sbuf, sizeof(sbuf), 1);
	memset(rbuf, 0, sizeof(rbuf));
	LT_CHECK_RET(lt_recv(&b, rbuf, sizeof(rbuf), FI_ADDR_UNSPEC, &rctx), 0, "fi_recv");
	LT_CHECK_RET(lt_send(&a, sbuf, sizeof(sbuf), a_to_b, &sctx), 0, "fi_send");
	if (next_comp(&b.rx, &comp, "fi_send")) {
		check_rx(&comp, &rctx, sizeof(sbuf), "fi_send");
		LT_CHECK(lt_verify(rbuf, sizeof(rbuf), 1) == sizeof(rbuf), "fi_send: data intact");
		LT_CHECK(comp.src == b_to_a,
			 "fi_send: fi_cq_readfrom gives the sender's fi_addr "
			 "(%llu, want %llu)",
			 (unsigned long long) comp.src, (unsigned long long) b_to_a);
		LT_CHECK(!(comp.flags & FI_REMOTE_CQ_DATA),
			 "fi_send: no FI_REMOTE_CQ_DATA on a plain send");
	}
	wait_tx(&a, &sctx, "fi_send");
	check_no_stray("fi_send");
}

static void test_sendv_recvv(void)
{
	size_t limit = info->tx_attr->iov_limit < info->rx_attr->iov_limit
			       ? info->tx_attr->iov_limit
			       : info->rx_attr->iov_limit;
	static const size_t slen[4] = {100, 1, 3000, 995};
	static const size_t rlen[4] = {1500, 7, 2000, 589};
	char sbuf[4096], rbuf[4096 + 64], flat[4096];
	struct iovec siov[4], riov[4];
	struct fi_context2 sctx, rctx;
	size_t n = limit < 4 ? limit : 4, total = 0, off = 0;
	struct lt_comp comp;
	ssize_t ret;

	for (size_t i = 0; i < n; i++)
		total += slen[i];
	lt_fill(flat, total, 2);
	/* Gather from the pieces of a buffer in reverse order, scatter to pieces with gaps. */
	for (size_t i = 0, soff = total; i < n; i++) {
		soff -= slen[i];
		memcpy(sbuf + soff, flat + off, slen[i]);
		siov[i] = (struct iovec){.iov_base = sbuf + soff, .iov_len = slen[i]};
		off += slen[i];
	}
	memset(rbuf, 0x5a, sizeof(rbuf));
	off = 0;
	for (size_t i = 0; i < n; i++) {
		riov[i] = (struct iovec){.iov_base = rbuf + off + 16 * i, .iov_len = rlen[i]};
		off += rlen[i];
	}
	ret = fi_recvv(b.ep, riov, NULL, n, FI_ADDR_UNSPEC, &rctx);
	LT_CHECK_RET(ret, 0, "fi_recvv with %zu iovs", n);
	ret = LT_RETRY(fi_sendv(a.ep, siov, NULL, n, a_to_b, &sctx));
	LT_CHECK_RET(ret, 0, "fi_sendv with %zu iovs", n);
	if (!ret && next_comp(&b.rx, &comp, "fi_sendv")) {
		bool ok = true;

		check_rx(&comp, &rctx, total, "fi_sendv/fi_recvv");
		off = 0;
		for (size_t i = 0; i < n && off < total; i++) {
			size_t take = total - off < rlen[i] ? total - off : rlen[i];

			ok &= !memcmp(riov[i].iov_base, flat + off, take);
			off += take;
		}
		for (size_t i = 1; i < n; i++)
			ok &= ((unsigned char *) riov[i].iov_base)[-1] == 0x5a;
		LT_CHECK(ok,
			 "fi_sendv/fi_recvv: gathered and scattered data intact, gaps untouched");
		wait_tx(&a, &sctx, "fi_sendv");
	}
	check_no_stray("fi_sendv");
}

static void test_sendmsg_recvmsg(void)
{
	struct fi_context2 sctx, rctx;
	char sbuf[300], rbuf[300];
	struct iovec siov = {.iov_base = sbuf, .iov_len = sizeof(sbuf)};
	struct iovec riov = {.iov_base = rbuf, .iov_len = sizeof(rbuf)};
	struct fi_msg smsg = {
		.msg_iov = &siov,
		.iov_count = 1,
		.addr = a_to_b,
		.context = &sctx,
		.data = 0x1122334455667788ULL,
	};
	struct fi_msg rmsg = {
		.msg_iov = &riov,
		.iov_count = 1,
		.addr = FI_ADDR_UNSPEC,
		.context = &rctx,
	};
	uint64_t mask = info->domain_attr->cq_data_size >= 8
				? UINT64_MAX
				: (1ULL << (8 * info->domain_attr->cq_data_size)) - 1;
	struct lt_comp comp;
	ssize_t ret;

	lt_fill(sbuf, sizeof(sbuf), 3);
	ret = fi_recvmsg(b.ep, &rmsg, FI_COMPLETION);
	LT_CHECK_RET(ret, 0, "fi_recvmsg");
	ret = LT_RETRY(fi_sendmsg(a.ep, &smsg, FI_REMOTE_CQ_DATA | FI_COMPLETION));
	LT_CHECK_RET(ret, 0, "fi_sendmsg with FI_REMOTE_CQ_DATA");
	if (!ret && next_comp(&b.rx, &comp, "fi_sendmsg")) {
		check_rx(&comp, &rctx, sizeof(sbuf), "fi_sendmsg/fi_recvmsg");
		LT_CHECK(lt_verify(rbuf, sizeof(rbuf), 3) == sizeof(rbuf),
			 "fi_sendmsg/fi_recvmsg: data intact");
		LT_CHECK((comp.flags & FI_REMOTE_CQ_DATA) && comp.data == (smsg.data & mask),
			 "fi_sendmsg: FI_REMOTE_CQ_DATA flag and data reach the receiver (%#llx)",
			 (unsigned long long) comp.data);
		LT_CHECK(comp.src == b_to_a, "fi_sendmsg: source fi_addr");
		wait_tx(&a, &sctx, "fi_sendmsg");
	}
	check_no_stray("fi_sendmsg");
}

static void test_senddata(void)
{
	uint64_t mask = info->domain_attr->cq_data_size >= 8
				? UINT64_MAX
				: (1ULL << (8 * info->domain_attr->cq_data_size)) - 1;
	struct fi_context2 sctx, rctx;
	char sbuf[50], rbuf[50];
	struct lt_comp comp;
	ssize_t ret;

	lt_fill(sbuf, sizeof(sbuf), 4);
	LT_CHECK_RET(lt_recv(&b, rbuf, sizeof(rbuf), FI_ADDR_UNSPEC, &rctx), 0,
		     "fi_recv for fi_senddata");
	ret = LT_RETRY(
		fi_senddata(a.ep, sbuf, sizeof(sbuf), NULL, 0xfeedbeefcafe0001ULL, a_to_b, &sctx));
	LT_CHECK_RET(ret, 0, "fi_senddata");
	if (!ret && next_comp(&b.rx, &comp, "fi_senddata")) {
		check_rx(&comp, &rctx, sizeof(sbuf), "fi_senddata");
		LT_CHECK((comp.flags & FI_REMOTE_CQ_DATA) &&
				 comp.data == (0xfeedbeefcafe0001ULL & mask),
			 "fi_senddata: FI_REMOTE_CQ_DATA flag and data (%#llx)",
			 (unsigned long long) comp.data);
		LT_CHECK(lt_verify(rbuf, sizeof(rbuf), 4) == sizeof(rbuf), "fi_senddata: data");
		wait_tx(&a, &sctx, "fi_senddata");
	}
	check_no_stray("fi_senddata");
}

static void test_inject(bool with_data)
{
	const char *what = with_data ? "fi_injectdata" : "fi_inject";
	size_t len = info->tx_attr->inject_size < 32 ? info->tx_attr->inject_size : 32;
	struct fi_context2 rctx;
	char sbuf[32], rbuf[32];
	struct lt_comp comp;
	ssize_t ret;

	if (!len) {
		lt_note("%s: inject_size is 0, not run", what);
		return;
	}
	lt_fill(sbuf, len, 5);
	memset(rbuf, 0, sizeof(rbuf));
	LT_CHECK_RET(lt_recv(&b, rbuf, sizeof(rbuf), FI_ADDR_UNSPEC, &rctx), 0, "%s: fi_recv",
		     what);
	if (with_data)
		ret = LT_RETRY(fi_injectdata(a.ep, sbuf, len, 77, a_to_b));
	else
		ret = LT_RETRY(fi_inject(a.ep, sbuf, len, a_to_b));
	/* The buffer is the application's again as soon as the call returns. */
	memset(sbuf, 0xee, sizeof(sbuf));
	LT_CHECK_RET(ret, 0, "%s of %zu bytes", what, len);
	if (!ret && next_comp(&b.rx, &comp, what)) {
		check_rx(&comp, &rctx, len, what);
		LT_CHECK(lt_verify(rbuf, len, 5) == len,
			 "%s: the data as it was when the call returned", what);
		if (with_data)
			LT_CHECK((comp.flags & FI_REMOTE_CQ_DATA) && comp.data == 77,
				 "%s: FI_REMOTE_CQ_DATA flag and data", what);
		else
			LT_CHECK(!(comp.flags & FI_REMOTE_CQ_DATA), "%s: no CQ data flag", what);
	}
	LT_CHECK(lt_cq_quiet(&a.tx, 200) == 0, "%s: no send completion for an inject", what);
	check_no_stray(what);
}

/*
 * FI_INJECT as the endpoint's default transmit flag (fi_control FI_SETOPSFLAG, or
 * tx_attr->op_flags at open): every fi_send is an inject that still completes, larger ones
 * are refused.
 */
static void test_default_inject(void)
{
	uint64_t flags = FI_TRANSMIT | FI_INJECT, old = FI_TRANSMIT;
	struct fi_context2 sctx, rctx, big_ctx;
	char sbuf[64], rbuf[64], big[1024];
	struct lt_comp comp;
	ssize_t ret;

	if (!LT_CHECK_RET(fi_control(&a.ep->fid, FI_GETOPSFLAG, &old), 0,
			  "default inject: FI_GETOPSFLAG") ||
	    !LT_CHECK_RET(fi_control(&a.ep->fid, FI_SETOPSFLAG, &flags), 0,
			  "default inject: FI_SETOPSFLAG FI_TRANSMIT | FI_INJECT"))
		return;
	lt_fill(sbuf, sizeof(sbuf), 9);
	memset(rbuf, 0, sizeof(rbuf));
	LT_CHECK_RET(lt_recv(&b, rbuf, sizeof(rbuf), FI_ADDR_UNSPEC, &rctx), 0,
		     "default inject: fi_recv");
	ret = LT_RETRY(fi_send(a.ep, sbuf, sizeof(sbuf), NULL, a_to_b, &sctx));
	/* the buffer is the application's again as soon as the call returns */
	memset(sbuf, 0xee, sizeof(sbuf));
	LT_CHECK_RET(ret, 0, "default inject: fi_send of %zu bytes", sizeof(sbuf));
	if (!ret && next_comp(&b.rx, &comp, "default inject")) {
		check_rx(&comp, &rctx, sizeof(sbuf), "default inject");
		LT_CHECK(lt_verify(rbuf, sizeof(sbuf), 9) == sizeof(sbuf),
			 "default inject: the data as it was when the call returned");
	}
	if (!ret)
		wait_tx(&a, &sctx, "default inject: the send completes (FI_COMPLETION as bound)");
	LT_CHECK_RET(fi_send(a.ep, big, sizeof(big), NULL, a_to_b, &big_ctx), -FI_EMSGSIZE,
		     "default inject: a send above inject_size is refused");
	old |= FI_TRANSMIT;
	LT_CHECK_RET(fi_control(&a.ep->fid, FI_SETOPSFLAG, &old), 0,
		     "default inject: the flags restored");
	check_no_stray("default inject");
}

/* FI_SOURCE for a sender the receiver's AV does not hold: FI_ADDR_NOTAVAIL. */
static void test_source_unknown(void)
{
	struct fi_context2 sctx, rctx;
	char buf[40] = "from c";
	struct lt_comp comp;

	LT_CHECK_RET(lt_recv(&b, buf, sizeof(buf), FI_ADDR_UNSPEC, &rctx), 0,
		     "unknown source: fi_recv");
	LT_CHECK_RET(lt_send(&c, buf, sizeof(buf), c_to_b, &sctx), 0, "unknown source: fi_send");
	if (next_comp(&b.rx, &comp, "unknown source")) {
		check_rx(&comp, &rctx, sizeof(buf), "unknown source");
		LT_CHECK(comp.src == FI_ADDR_NOTAVAIL,
			 "unknown source: fi_cq_readfrom gives FI_ADDR_NOTAVAIL (got %llu)",
			 (unsigned long long) comp.src);
	}
	wait_tx(&c, &sctx, "unknown source");
	check_no_stray("unknown source");
}

/* ---- sizes ---- */

static bool big_allowed(size_t size)
{
	const char *env = getenv("LAYER_TEST_BIG");
	unsigned long long avail_kb = 0;
	char line[256];
	FILE *f;

	if (env && *env)
		return strcmp(env, "0") != 0;
	f = fopen("/proc/meminfo", "r");
	if (!f)
		return false;
	while (fgets(line, sizeof(line), f)) {
		if (sscanf(line, "MemAvailable: %llu kB", &avail_kb) == 1)
			break;
	}
	fclose(f);
	/* Two buffers plus whatever the provider stages, with room to spare. */
	return avail_kb * 1024 >= 4ULL * size;
}

/* One message of len bytes; expected (receive first) or unexpected (send first). */
static void transfer(size_t len, bool unexpected)
{
	char what[64];
	struct fi_context2 sctx, rctx;
	char *sbuf = malloc(len ? len : 1), *rbuf = malloc(len + 64);
	struct lt_comp comp;
	ssize_t ret;

	snprintf(what, sizeof(what), "%zu bytes%s", len, unexpected ? ", unexpected" : "");
	if (!LT_CHECK(sbuf && rbuf, "%s: buffers allocated", what))
		goto out;
	lt_fill(sbuf, len, len + 9);
	memset(rbuf + len, 0x3c, 64);
	if (!unexpected)
		LT_CHECK_RET(lt_recv(&b, rbuf, len + 64, FI_ADDR_UNSPEC, &rctx), 0, "%s: fi_recv",
			     what);
	ret = lt_send(&a, sbuf, len, a_to_b, &sctx);
	if (!LT_CHECK_RET(ret, 0, "%s: fi_send", what))
		goto out;
	if (unexpected) {
		/* Let it arrive with nothing posted, then post. */
		lt_cq_quiet(&b.rx, 100);
		LT_CHECK(b.rx.count == 0, "%s: no receive completion before a receive is posted",
			 what);
		LT_CHECK_RET(lt_recv(&b, rbuf, len + 64, FI_ADDR_UNSPEC, &rctx), 0, "%s: fi_recv",
			     what);
	}
	if (next_comp(&b.rx, &comp, what)) {
		size_t bad = lt_verify(rbuf, len, len + 9);
		bool guard = true;

		check_rx(&comp, &rctx, len, what);
		LT_CHECK(bad == len, "%s: data intact (%s%zu)", what,
			 bad == len ? "" : "first bad byte at ", bad == len ? len : bad);
		for (size_t i = 0; i < 64; i++)
			guard &= (unsigned char) rbuf[len + i] == 0x3c;
		LT_CHECK(guard, "%s: nothing written past the message", what);
	}
	wait_tx(&a, &sctx, what);
out:
	free(sbuf);
	free(rbuf);
}

static void test_sizes(void)
{
	static const size_t sizes[] = {0, 1, 4 * KIB, 64 * KIB, 1 * MIB, 64 * MIB};
	size_t big = GIB + 5;

	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++)
		transfer(sizes[i], false);
	transfer(0, true);
	transfer(100, true);
	transfer(64 * KIB, true);
	transfer(4 * MIB, true);
	if (info->ep_attr->max_msg_size < big)
		lt_note("message over 1 GiB: max_msg_size %zu is smaller, not run",
			info->ep_attr->max_msg_size);
	else if (!big_allowed(big))
		lt_note("message over 1 GiB: not enough memory (or LAYER_TEST_BIG=0), not run");
	else
		transfer(big, false);
	check_no_stray("sizes");
}

/* ---- ordering ---- */

/*
 * Messages from one sender are matched in the order sent (FI_ORDER_SAS, asked for in the
 * hints), whatever their sizes: a large message must not be overtaken by the small one behind it.
 */
static void test_order(void)
{
	enum { N = 200 };
	static const size_t small = 32, large = 256 * KIB;
	struct fi_context2 *rctx = calloc(N, sizeof(*rctx)), *sctx = calloc(N, sizeof(*sctx));
	char *rbuf = malloc(N * large), *sbuf = malloc(N * large);
	size_t got = 0, bad_place = 0, sent_ok = 0, posted = 0;
	struct lt_comp comp;

	if (!LT_CHECK(rctx && sctx && rbuf && sbuf, "order: buffers allocated"))
		goto out;
	for (size_t i = 0; i < N; i++)
		posted += lt_recv(&b, rbuf + i * large, large, FI_ADDR_UNSPEC, &rctx[i]) == 0;
	LT_CHECK(posted == N, "order: %d receives posted (%zu)", N, posted);
	for (size_t i = 0; i < N; i++) {
		size_t len = i % 3 == 1 ? large : small;

		lt_fill(sbuf + i * large, len, 1000 + i);
		if (lt_send(&a, sbuf + i * large, len, a_to_b, &sctx[i]) == 0)
			sent_ok++;
	}
	LT_CHECK(sent_ok == N, "order: %d sends of mixed sizes posted (%zu)", N, sent_ok);
	while (got < N && next_comp(&b.rx, &comp, "order")) {
		size_t i = (size_t) ((struct fi_context2 *) comp.op_context - rctx);
		size_t len = i % 3 == 1 ? large : small;

		if (comp.err || i >= N || comp.len != len ||
		    lt_verify(rbuf + i * large, len, 1000 + i) != len)
			bad_place++;
		got++;
	}
	LT_CHECK(got == N && bad_place == 0,
		 "order: receive i holds message i for all %d (%zu received, %zu misplaced)", N,
		 got, bad_place);
	for (size_t i = 0; i < N; i++) {
		if (!lt_cq_next(&a.tx, &comp, LT_TIMEOUT_MS))
			break;
		sent_ok -= comp.err == 0;
	}
	LT_CHECK(sent_ok == 0, "order: every send completed successfully");
out:
	check_no_stray("order");
	free(rctx);
	free(sctx);
	free(rbuf);
	free(sbuf);
}

/* ---- truncation ---- */

/*
 * A message larger than the receive buffer: FI_ETRUNC error entry, olen, the start of the data in
 * the buffer. On endpoints of its own, so a provider that gets this wrong does not take the
 * other checks down with it.
 */
static void truncation(size_t buflen, size_t msglen)
{
	struct lt_ep a, b;
	fi_addr_t a_to_b, b_to_a;
	char what[64];
	struct fi_context2 sctx, sctx2, rctx, rctx2;
	char *sbuf = malloc(msglen), *rbuf = malloc(buflen + 4096), next[16] = "after";
	char nbuf[16];
	struct lt_comp comp;

	snprintf(what, sizeof(what), "truncation %zu into %zu", msglen, buflen);
	if (!LT_CHECK(sbuf && rbuf, "%s: buffers", what)) {
		free(sbuf);
		free(rbuf);
		return;
	}
	if (!LT_CHECK_RET(lt_pair_open(&dom, NULL, NULL, &a, &b, &a_to_b, &b_to_a), 0,
			  "%s: endpoints", what)) {
		free(sbuf);
		free(rbuf);
		return;
	}
	lt_fill(sbuf, msglen, 77);
	memset(rbuf, 0xa5, buflen + 4096);
	LT_CHECK_RET(lt_recv(&b, rbuf, buflen, FI_ADDR_UNSPEC, &rctx), 0, "%s: fi_recv", what);
	LT_CHECK_RET(lt_send(&a, sbuf, msglen, a_to_b, &sctx), 0, "%s: fi_send", what);
	if (next_comp(&b.rx, &comp, what)) {
		bool guard = true;

		LT_CHECK(comp.err == FI_ETRUNC && comp.op_context == &rctx,
			 "%s: error completion FI_ETRUNC with the receive's context (err %d)", what,
			 comp.err);
		LT_CHECK(comp.olen == msglen - buflen, "%s: olen is the excess (%zu, want %zu)",
			 what, comp.olen, msglen - buflen);
		LT_CHECK(comp.err != FI_ETRUNC || comp.len == buflen,
			 "%s: len is what was placed (%zu)", what, comp.len);
		LT_CHECK(lt_verify(rbuf, buflen, 77) == buflen,
			 "%s: the buffer holds the start "
			 "of the message",
			 what);
		for (size_t i = buflen; i < buflen + 4096; i++)
			guard &= (unsigned char) rbuf[i] == 0xa5;
		LT_CHECK(guard, "%s: nothing written past the receive buffer", what);
	}
	if (next_comp(&a.tx, &comp, what))
		LT_CHECK(!comp.err && comp.op_context == &sctx,
			 "%s: the sender's completion is a success (err %d)", what, comp.err);
	/* The endpoint (and its connection) is fine afterwards. */
	LT_CHECK_RET(lt_recv(&b, nbuf, sizeof(nbuf), FI_ADDR_UNSPEC, &rctx2), 0,
		     "%s: fi_recv after", what);
	LT_CHECK_RET(lt_send(&a, next, sizeof(next), a_to_b, &sctx2), 0, "%s: fi_send after", what);
	if (next_comp(&b.rx, &comp, what))
		LT_CHECK(!comp.err && comp.op_context == &rctx2 && !strcmp(nbuf, "after"),
			 "%s: the next message arrives intact", what);
	wait_tx(&a, &sctx2, what);
	lt_cq_quiet(&a.tx, 50);
	LT_CHECK(!a.tx.count && !a.rx.count && !b.tx.count && !b.rx.count,
		 "%s: no stray completions left", what);
	lt_ep_close(&a);
	lt_ep_close(&b);
	free(sbuf);
	free(rbuf);
}

int main(int argc, char **argv)
{
	(void) argc;
	if (msg_fixture_open(argv[0]))
		return lt_end();
	test_send_recv();
	test_sendv_recvv();
	test_sendmsg_recvmsg();
	test_senddata();
	test_inject(false);
	test_inject(true);
	test_default_inject();
	test_source_unknown();
	test_sizes();
	test_order();
	truncation(100, 300);
	truncation(64 * KIB, 1 * MIB);
	msg_fixture_close();
	return lt_end();
}
