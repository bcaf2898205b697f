/*
 * fi_layer_bench: the data path and the tests.
 *
 * Every test runs on both sides at once: the client is the initiator and measures, the
 * server answers. Completions only move two counters (sends, receives), so waiting is
 * "poll the CQ until the counters reach a target"; busy polling is what we measure.
 *
 * The matching tests also use the pipes between client and server: a signal there costs no
 * fabric traffic and so cannot disturb what is being matched. Both processes run on one
 * machine, so a CLOCK_MONOTONIC reading taken by the server means the same to the client.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <rdma/fi_errno.h>
#include <rdma/fi_tagged.h>

#include "bench.h"

/* While waiting on a pipe, look at it once every this many CQ polls. */
#define PIPE_POLLS 16

static bool is_tx_ctx(const struct fab *f, const void *ctx)
{
	const struct fi_context *c = ctx;

	return c >= f->tx_ctx && c < f->tx_ctx + f->nctx;
}

int check_peer_alive(struct fab *f)
{
	char how[96];
	int status;

	if (!f->watch_pid || waitpid(f->watch_pid, &status, WNOHANG) != f->watch_pid)
		return 0;
	f->watch_pid = 0;
	bench_describe_status(status, opt.timeout + SERVER_ALARM_EXTRA, how, sizeof(how));
	fprintf(stderr, "%s: %s client: server ended early (%s)\n", BENCH_NAME, f->prov, how);
	return -FI_EIO;
}

/*
 * Matching tests: receive i was posted with MATCH_TAG(i), so a completion with any other tag
 * or length is a matching error of the provider, reported as such rather than timed.
 */
static int check_match(const struct fab *f, const struct fi_cq_tagged_entry *comp)
{
	const struct fi_context *c = comp->op_context;
	size_t i;

	if (c == &f->sig_ctx)
		return 0;
	if (c < f->rx_ctx || c >= f->rx_ctx + f->nctx) {
		fprintf(stderr, "%s: %s %s: receive completion with a context never posted (%p)\n",
			BENCH_NAME, f->prov, f->role, comp->op_context);
		return -FI_EOTHER;
	}
	i = (size_t) (c - f->rx_ctx);
	if (comp->tag == MATCH_TAG(i) && comp->len == MATCH_MSG_SIZE)
		return 0;
	fprintf(stderr,
		"%s: %s %s: receive %zu (tag 0x%" PRIx64 ") completed with tag 0x%" PRIx64
		", length %zu\n",
		BENCH_NAME, f->prov, f->role, i, MATCH_TAG(i), comp->tag, comp->len);
	return -FI_EOTHER;
}

/* One fi_cq_read; completions only move the counters. Busy polling is what we measure. */
static int cq_poll_one(struct fab *f, struct fid_cq *cq)
{
	struct fi_cq_tagged_entry comp[CQ_BATCH];
	struct fi_cq_err_entry err;
	ssize_t ret;

	ret = fi_cq_read(cq, comp, CQ_BATCH);
	if (ret > 0) {
		f->empty_polls = 0;
		for (ssize_t i = 0; i < ret; i++) {
			if (is_tx_ctx(f, comp[i].op_context)) {
				f->tx_done++;
				continue;
			}
			f->rx_done++;
			if (f->check_tags && check_match(f, &comp[i]))
				return -FI_EOTHER;
		}
		return 0;
	}
	if (ret == -FI_EAGAIN) {
		if (bench_yield_idle)
			sched_yield();
		if (++f->empty_polls >= LIVENESS_POLLS) {
			f->empty_polls = 0;
			return check_peer_alive(f);
		}
		return 0;
	}
	if (ret == -FI_EAVAIL) {
		memset(&err, 0, sizeof(err));
		if (fi_cq_readerr(cq, &err, 0) > 0) {
			fprintf(stderr,
				"%s: %s %s: completion error: %s (prov_errno %d, len %zu)\n",
				BENCH_NAME, f->prov, f->role, fi_strerror(err.err), err.prov_errno,
				err.len);
			return err.err ? -err.err : -FI_EIO;
		}
	}
	fab_err(f, "fi_cq_read", (int) ret);
	return (int) ret;
}

int cq_poll(struct fab *f)
{
	int ret;

	ret = cq_poll_one(f, f->cq);
	if (!ret && f->rx_cq)
		ret = cq_poll_one(f, f->rx_cq);
	return ret;
}

static int wait_done(struct fab *f, uint64_t tx_target, uint64_t rx_target)
{
	int ret;

	while (f->tx_done < tx_target || f->rx_done < rx_target) {
		ret = cq_poll(f);
		if (ret)
			return ret;
	}
	return 0;
}

/*
 * A full queue (-FI_EAGAIN) drains by reading the CQ, which also drives manual progress.
 * --fabtests: below the inject size a send is an fi_inject, complete once it returns.
 */
static int post_send_buf(struct fab *f, enum test_api api, const void *buf, size_t len,
			 uint64_t tag, struct fi_context *ctx)
{
	bool is_inject = len < f->inject_size;
	ssize_t ret;

	for (;;) {
		if (is_inject && api == API_TAGGED)
			ret = fi_tinject(f->ep, buf, len, f->peer, tag);
		else if (is_inject)
			ret = fi_inject(f->ep, buf, len, f->peer);
		else if (api == API_TAGGED)
			ret = fi_tsend(f->ep, buf, len, f->tx_desc, f->peer, tag, ctx);
		else
			ret = fi_send(f->ep, buf, len, f->tx_desc, f->peer, ctx);
		if (ret != -FI_EAGAIN)
			break;
		ret = cq_poll(f);
		if (ret)
			return (int) ret;
	}
	if (ret)
		fab_err(f, api == API_TAGGED ? "fi_tsend" : "fi_send", (int) ret);
	else if (is_inject)
		f->tx_done++;
	return (int) ret;
}

static int post_recv_buf(struct fab *f, enum test_api api, void *buf, size_t len, uint64_t tag,
			 struct fi_context *ctx)
{
	ssize_t ret;

	for (;;) {
		if (api == API_TAGGED)
			ret = fi_trecv(f->ep, buf, len, f->rx_desc, f->peer, tag, 0, ctx);
		else
			ret = fi_recv(f->ep, buf, len, f->rx_desc, f->peer, ctx);
		if (ret != -FI_EAGAIN)
			break;
		ret = cq_poll(f);
		if (ret)
			return (int) ret;
	}
	if (ret)
		fab_err(f, api == API_TAGGED ? "fi_trecv" : "fi_recv", (int) ret);
	return (int) ret;
}

/*
 * --fabtests, RDM: the names as fabtests' ft_init_av exchanges them. The client, which has
 * the server's address, sends its own in a message; the server inserts it from that message
 * and answers with one byte. Until then the server's AV is empty.
 */
int exchange_names(struct fab *f)
{
	uint64_t tx0 = f->tx_done, rx0 = f->rx_done;
	size_t addrlen = sizeof(f->peer_addr);
	int ret;

	if (!f->is_server) {
		ret = fi_getname(&f->ep->fid, f->tx_buf, &addrlen);
		if (ret) {
			fab_err(f, "fi_getname", ret);
			return ret;
		}
		ret = post_recv_buf(f, API_MSG, f->rx_buf, 1, 0, &f->rx_ctx[0]);
		if (!ret)
			ret = post_send_buf(f, API_MSG, f->tx_buf, addrlen, 0, &f->tx_ctx[0]);
		return ret ? ret : wait_done(f, tx0 + 1, rx0 + 1);
	}
	ret = post_recv_buf(f, API_MSG, f->rx_buf, sizeof(f->peer_addr), 0, &f->rx_ctx[0]);
	if (!ret)
		ret = wait_done(f, tx0, rx0 + 1);
	if (ret)
		return ret;
	ret = fi_av_insert(f->av, f->rx_buf, 1, &f->peer, 0, NULL);
	if (ret != 1) {
		fab_err(f, "fi_av_insert", ret < 0 ? ret : -FI_EINVAL);
		return ret < 0 ? ret : -FI_EINVAL;
	}
	ret = post_send_buf(f, API_MSG, f->tx_buf, 1, 0, &f->tx_ctx[0]);
	return ret ? ret : wait_done(f, tx0 + 1, rx0 + 1);
}

/* Latency and bandwidth: every message starts at the buffer and carries BENCH_TAG. */
static int post_send(struct fab *f, enum test_api api, size_t len, size_t slot)
{
	return post_send_buf(f, api, f->tx_buf, len, BENCH_TAG, &f->tx_ctx[slot]);
}

static int post_recv(struct fab *f, enum test_api api, size_t len, size_t slot)
{
	return post_recv_buf(f, api, f->rx_buf, len, BENCH_TAG, &f->rx_ctx[slot]);
}

/*
 * Ping-pong. Each side posts its next receive before it sends, so no message of the timed
 * loop arrives unexpected, and posts no receive past the last message, so nothing is left
 * to swallow the next test's traffic.
 */
static int run_lat(struct fab *f, const struct test *t, bool initiator, double *result)
{
	size_t total = t->warmup + t->iters;
	uint64_t tx0 = f->tx_done, rx0 = f->rx_done;
	double start = 0;
	int ret;

	if (initiator) {
		for (size_t i = 0; i < total; i++) {
			if (i == t->warmup)
				start = now_us();
			ret = post_recv(f, t->api, t->size, 0);
			if (ret)
				return ret;
			ret = post_send(f, t->api, t->size, 0);
			if (ret)
				return ret;
			ret = wait_done(f, tx0 + i + 1, rx0 + i + 1);
			if (ret)
				return ret;
		}
		*result = (now_us() - start) / (double) t->iters / 2;
		return 0;
	}

	ret = post_recv(f, t->api, t->size, 0);
	if (ret)
		return ret;
	for (size_t i = 0; i < total; i++) {
		/* the previous reply must be complete before its context is reused */
		ret = wait_done(f, tx0 + i, rx0 + i + 1);
		if (ret)
			return ret;
		if (i + 1 < total) {
			ret = post_recv(f, t->api, t->size, 0);
			if (ret)
				return ret;
		}
		ret = post_send(f, t->api, t->size, 0);
		if (ret)
			return ret;
	}
	return wait_done(f, tx0 + total, rx0 + total);
}

/*
 * Streaming, osu_bw style: the sender keeps a window of sends outstanding, then waits for
 * their completions and for a small ack. The receiver posts the next window of receives
 * before it acks, so data always lands in pre-posted buffers. The clock stops at the last
 * ack, i.e. when the receiver holds all data.
 */
static int run_bw(struct fab *f, const struct test *t, bool initiator, double *result)
{
	size_t w = f->window;
	size_t windows = (t->iters + w - 1) / w;
	size_t total = t->warmup + windows;
	uint64_t tx0 = f->tx_done, rx0 = f->rx_done;
	double start = 0;
	int ret;

	if (initiator) {
		ret = post_recv(f, t->api, ACK_SIZE, 0);
		if (ret)
			return ret;
		ret = wait_done(f, tx0, rx0 + 1);
		if (ret)
			return ret;
		for (size_t k = 0; k < total; k++) {
			if (k == t->warmup)
				start = now_us();
			ret = post_recv(f, t->api, ACK_SIZE, 0);
			if (ret)
				return ret;
			for (size_t j = 0; j < w; j++) {
				ret = post_send(f, t->api, t->size, j);
				if (ret)
					return ret;
			}
			ret = wait_done(f, tx0 + (k + 1) * w, rx0 + k + 2);
			if (ret)
				return ret;
		}
		*result = (double) windows * w * t->size / (now_us() - start); /* B/us = MB/s */
		return 0;
	}

	for (size_t k = 0; k <= total; k++) {
		if (k > 0) {
			/* window k-1 received, and the previous ack sent: its context is free */
			ret = wait_done(f, tx0 + k, rx0 + k * w);
			if (ret)
				return ret;
		}
		if (k < total) {
			for (size_t j = 0; j < w; j++) {
				ret = post_recv(f, t->api, t->size, j);
				if (ret)
					return ret;
			}
		}
		ret = post_send(f, t->api, ACK_SIZE, 0);
		if (ret)
			return ret;
	}
	return wait_done(f, tx0 + total + 1, rx0 + total * w);
}

/* ---------------------------------------------------------------- matching under load */

/* Reads the peer's signal while reading the CQ: the peer may need our progress meanwhile. */
static int wait_pipe(struct fab *f, void *buf, size_t len)
{
	struct pollfd pfd = {.fd = f->rfd, .events = POLLIN};
	int ret;

	for (unsigned i = 0;; i++) {
		ret = cq_poll(f);
		if (ret)
			return ret;
		if (i % PIPE_POLLS)
			continue;
		ret = poll(&pfd, 1, 0);
		if (ret > 0)
			break; /* data, or the peer closed it: read_all tells which */
		if (ret < 0 && errno != EINTR) {
			fprintf(stderr, "%s: %s %s: poll: %s\n", BENCH_NAME, f->prov, f->role,
				strerror(errno));
			return -FI_EIO;
		}
	}
	if (read_all(f->rfd, buf, len)) {
		fprintf(stderr, "%s: %s %s: the peer left during a matching test\n", BENCH_NAME,
			f->prov, f->role);
		return -FI_EIO;
	}
	return 0;
}

static int signal_peer(struct fab *f, const void *buf, size_t len)
{
	if (!write_all(f->wfd, buf, len))
		return 0;
	fprintf(stderr, "%s: %s %s: writing the signal pipe: %s\n", BENCH_NAME, f->prov, f->role,
		strerror(errno));
	return -FI_EIO;
}

/* Slot k of a round's messages: its own buffer and context, so no send waits on another's. */
static void set_payload(struct fab *f, size_t k, uint64_t tag)
{
	memcpy(f->tx_buf + k * MATCH_MSG_SIZE, &tag, sizeof(tag));
}

/*
 * Send k of a round goes out once fewer than a window of the round's sends is outstanding,
 * as in the bandwidth test; a full queue is retried while reading the CQ.
 */
static int send_windowed(struct fab *f, uint64_t tx0, size_t k, uint64_t tag)
{
	int ret;

	while (k - (f->tx_done - tx0) >= f->window) {
		ret = cq_poll(f);
		if (ret)
			return ret;
	}
	return post_send_buf(f, API_TAGGED, f->tx_buf + k * MATCH_MSG_SIZE, MATCH_MSG_SIZE, tag,
			     &f->tx_ctx[k]);
}

static int post_match_recv(struct fab *f, size_t i)
{
	return post_recv_buf(f, API_TAGGED, f->rx_buf + i * MATCH_MSG_SIZE, MATCH_MSG_SIZE,
			     MATCH_TAG(i), &f->rx_ctx[i]);
}

/* After a round, untimed: each receive's buffer holds the message of its own tag. */
static int check_payloads(struct fab *f, size_t n)
{
	uint64_t got;

	for (size_t i = 0; i < n; i++) {
		memcpy(&got, f->rx_buf + i * MATCH_MSG_SIZE, sizeof(got));
		if (got == MATCH_TAG(i))
			continue;
		fprintf(stderr,
			"%s: %s %s: receive %zu (tag 0x%" PRIx64 ") holds the payload 0x%" PRIx64
			"\n",
			BENCH_NAME, f->prov, f->role, i, MATCH_TAG(i), got);
		return -FI_EOTHER;
	}
	memset(f->rx_buf, 0, n * MATCH_MSG_SIZE);
	return 0;
}

/* The client's rounds end in a figure: thousands of messages per second. */
static void match_result(const struct test *t, double busy_us, double *result)
{
	*result = busy_us > 0 ? (double) t->iters * t->count / busy_us * 1e3 : 0;
}

/*
 * Expected path. The client posts N receives with distinct tags, then signals; the server
 * sends N messages whose tags come in the reverse order of posting, so the first one matches
 * the last receive posted: a list searched from its head walks all N. The time runs from the
 * server's first send to the client's last receive completion.
 */
static int run_match(struct fab *f, const struct test *t, bool initiator, double *result)
{
	size_t n = t->count, total = t->warmup + t->iters;
	double busy = 0, start, end;
	char go = 'g';
	int ret = 0;

	if (!initiator) {
		for (size_t k = 0; k < n; k++)
			set_payload(f, k, MATCH_TAG(n - 1 - k));
		for (size_t r = 0; r < total; r++) {
			uint64_t tx0 = f->tx_done;

			ret = wait_pipe(f, &go, 1);
			if (ret)
				return ret;
			start = now_us();
			for (size_t k = 0; k < n; k++) {
				ret = send_windowed(f, tx0, k, MATCH_TAG(n - 1 - k));
				if (ret)
					return ret;
			}
			ret = wait_done(f, tx0 + n, 0);
			if (ret)
				return ret;
			ret = signal_peer(f, &start, sizeof(start));
			if (ret)
				return ret;
		}
		return 0;
	}

	f->check_tags = true;
	for (size_t r = 0; r < total && !ret; r++) {
		uint64_t rx0 = f->rx_done;

		for (size_t i = 0; i < n && !ret; i++)
			ret = post_match_recv(f, i);
		if (!ret)
			ret = signal_peer(f, &go, 1);
		if (!ret)
			ret = wait_done(f, 0, rx0 + n);
		end = now_us();
		if (!ret)
			ret = wait_pipe(f, &start, sizeof(start));
		if (!ret && r >= t->warmup)
			busy += end - start;
		if (!ret)
			ret = check_payloads(f, n);
	}
	f->check_tags = false;
	match_result(t, busy, result);
	return ret;
}

/*
 * Unexpected path. The server sends N messages with distinct tags and then a signal message
 * with a tag of its own. Messages from one peer are matched in the order sent, so when the
 * client's signal receive completes, all N wait in the provider as unexpected messages. The
 * client then posts the N receives in the reverse order of arrival (each one's match is the
 * last of an arrival-ordered list) and times until all have completed.
 */
static int run_unexp(struct fab *f, const struct test *t, bool initiator, double *result)
{
	size_t n = t->count, total = t->warmup + t->iters;
	double busy = 0, start;
	char go = 'g';
	int ret = 0;

	if (!initiator) {
		for (size_t k = 0; k < n; k++)
			set_payload(f, k, MATCH_TAG(k));
		set_payload(f, n, SIGNAL_TAG);
		for (size_t r = 0; r < total; r++) {
			uint64_t tx0 = f->tx_done;

			ret = wait_pipe(f, &go, 1);
			if (ret)
				return ret;
			for (size_t k = 0; k < n; k++) {
				ret = send_windowed(f, tx0, k, MATCH_TAG(k));
				if (ret)
					return ret;
			}
			ret = send_windowed(f, tx0, n, SIGNAL_TAG);
			if (!ret)
				ret = wait_done(f, tx0 + n + 1, 0);
			if (ret)
				return ret;
		}
		return 0;
	}

	f->check_tags = true;
	for (size_t r = 0; r < total && !ret; r++) {
		uint64_t rx0 = f->rx_done;

		ret = post_recv_buf(f, API_TAGGED, f->rx_buf + n * MATCH_MSG_SIZE, MATCH_MSG_SIZE,
				    SIGNAL_TAG, &f->sig_ctx);
		if (!ret)
			ret = signal_peer(f, &go, 1);
		if (!ret)
			ret = wait_done(f, 0, rx0 + 1);
		start = now_us();
		for (size_t i = n; i-- > 0 && !ret;)
			ret = post_match_recv(f, i);
		if (!ret)
			ret = wait_done(f, 0, rx0 + 1 + n);
		if (!ret && r >= t->warmup)
			busy += now_us() - start;
		if (!ret)
			ret = check_payloads(f, n);
	}
	f->check_tags = false;
	match_result(t, busy, result);
	return ret;
}

/* ---------------------------------------------------------------- choosing and running */

/* Both sides decide this from the same agreed parameters, so they run the same sequence. */
bool test_possible(const struct fab *f, const struct test *t)
{
	if (t->api == API_TAGGED && !f->has_tagged)
		return false;
	if (t->kind == KIND_MATCH || t->kind == KIND_UNEXP)
		return (!f->rx_depth || t->count + 1 <= f->rx_depth) &&
		       MATCH_MSG_SIZE <= f->max_msg_size;
	return t->size <= f->max_msg_size;
}

int run_test(struct fab *f, const struct test *t, bool initiator, double *result)
{
	switch (t->kind) {
	case KIND_LAT:
		return run_lat(f, t, initiator, result);
	case KIND_BW:
		return run_bw(f, t, initiator, result);
	case KIND_MATCH:
		return run_match(f, t, initiator, result);
	case KIND_UNEXP:
		return run_unexp(f, t, initiator, result);
	}
	return -FI_EINVAL;
}
