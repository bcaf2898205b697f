/*
 * Real packet loss between two processes: a parent and a child (this program again) on
 * 127.0.0.1 over LAYER_TEST_PROV, run by run_loss.sh inside a private network namespace whose
 * nftables rules drop packets on loopback input (so data and acknowledgements are both lost).
 * The loss is real, made by the kernel, not by the provider under test: what a datagram core's
 * reliability layer must survive, and what tcp survives by itself.
 *
 * LT_LOSS_MODE=data (the default) streams tagged messages both ways at once (sizes from 0 B to
 * 1 MiB, tag and pattern seed = the message's number, at most WINDOW outstanding each way):
 * every send must complete successfully, every receive with the right tag, length and data,
 * all within a hard deadline. Whatever loss the namespace makes, nothing may be lost,
 * duplicated, reordered into the wrong receive or corrupted.
 *
 * LT_LOSS_MODE=silent partitions the two processes mid-test: after a first exchange the parent
 * adds a rule that drops everything on loopback (the pipe between the processes is a pipe, not
 * a socket, so it still works), then sends 8 bytes and 1 MiB to the child. With
 * FI_OFI_LAYER_PEER_TIMEOUT (milliseconds; 2000 unless set) both sends must fail with an error
 * completion that says the peer is gone, within 4 timeouts + 5 s, and a message whose send
 * failed must never arrive (the child's receives for them are still there to be canceled).
 * Then the parent lifts the partition; each side sends a first message with
 * FI_DELIVERY_COMPLETE, again while it fails with the old conversation, and once both went
 * through a new exchange both ways must succeed: a lost peer that comes back is talked to
 * again. This mode runs only inside the
 * network namespace run_loss.sh made (LT_NETNS; it never touches the host's rules) and needs
 * the table and chain made there (LT_NFT_TABLE, LT_NFT_CHAIN). Over udp the datagram transport
 * finds the silent peer; over tcp and net the layer's own liveness does (PING, fi_layer(7)).
 *
 * Parameters (environment): LT_LOSS_COUNT messages each way (default 200), LT_LOSS_DEADLINE
 * seconds for the whole run (default 100); LT_LOSS_PCT and FI_OFI_LAYER_DGRAM_FAULT are only
 * reported, the loss itself is the namespace's.
 */
#include <inttypes.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <rdma/fi_tagged.h>

#include "tests/functional/test_loss.h"

static const size_t sizes[] = {0, 1, 8, 1000, 1400, 1500, 4000, 9000, 65536, 300000, 1048576};
#define NSIZES (sizeof(sizes) / sizeof(sizes[0]))

struct loss_cfg cfg;

static unsigned env_uint(const char *name, unsigned def)
{
	const char *s = getenv(name);
	char *end;
	unsigned long v;

	if (!s || !*s)
		return def;
	v = strtoul(s, &end, 10);
	return *end || !v || v > 1000000000 ? def : (unsigned) v;
}

static const char *env_str(const char *name, const char *def)
{
	const char *s = getenv(name);

	return s && *s ? s : def;
}

static void read_config(void)
{
	cfg.mode = env_str("LT_LOSS_MODE", "data");
	cfg.count = env_uint("LT_LOSS_COUNT", DEF_COUNT);
	cfg.deadline_s = env_uint("LT_LOSS_DEADLINE", DEF_DEADLINE_S);
	cfg.max_len = sizes[NSIZES - 1];
	cfg.peer_timeout_ms = env_uint("FI_OFI_LAYER_PEER_TIMEOUT", DEF_PEER_TIMEOUT_MS);
	cfg.table = env_str("LT_NFT_TABLE", NULL);
	cfg.chain = env_str("LT_NFT_CHAIN", "i");
}

/* The hang guard of common.c must not fire before our own deadline says what hung. */
static void arm_hang_guard(void)
{
	alarm(cfg.deadline_s + SYNC_SLACK_MS / 1000 + 20);
}

size_t msg_len(uint64_t seq)
{
	size_t len = sizes[seq % NSIZES];

	return len < cfg.max_len ? len : cfg.max_len;
}

/* ---- the pipe between the processes ---- */

/*
 * Reads one pipe message while progressing the endpoint: the other process may still need this
 * one's acknowledgements (and, with manual progress, its connection accepted) to finish. The
 * pipe is polled, not read, until data is there, so a read never stops inside a message.
 */
ssize_t recv_progressing(int fd, void *buf, size_t max, int timeout_ms)
{
	uint64_t deadline = lt_now_ms() + (uint64_t) timeout_ms;
	struct pollfd pfd = {.fd = fd, .events = POLLIN};

	while (lt_now_ms() < deadline) {
		lt_progress();
		if (poll(&pfd, 1, 1) > 0)
			return lt_pipe_recv(fd, buf, max, LT_TIMEOUT_MS);
	}
	return -FI_ETIMEDOUT;
}

/* Tells the other process one word (a step of the protocols below). */
int say(int fd, const char *word)
{
	return lt_pipe_send(fd, word, strlen(word) + 1);
}

/* Waits, progressing, for the other process's next word; true if it is the one expected. */
bool await(int fd, const char *word, int timeout_ms)
{
	char got[32];
	ssize_t n = recv_progressing(fd, got, sizeof(got), timeout_ms);

	return n > 0 && got[n - 1] == '\0' && !strcmp(got, word);
}

/*
 * Both processes at the end of a step: each says whether its own checks all passed so far and
 * learns the same of the other, progressing meanwhile. True when the other's passed.
 */
bool sync_both(int rfd, int wfd, int timeout_ms)
{
	if (say(wfd, lt_failed() ? "failed" : "passed"))
		return false;
	return await(rfd, "passed", timeout_ms);
}

int ms_left(uint64_t deadline)
{
	uint64_t now = lt_now_ms();

	return now < deadline ? (int) (deadline - now) : 0;
}

/* ---- a stream of tagged messages both ways ---- */

static void stream_fail(struct stream *s, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void stream_fail(struct stream *s, const char *fmt, ...)
{
	char what[256];
	va_list ap;

	if (s->reports++ >= MAX_REPORTS)
		return;
	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	LT_CHECK(false, "%s: %s", s->who, what);
}

int stream_init(struct stream *s, const char *who, struct lt_ep *ep, fi_addr_t peer,
		       uint64_t base, unsigned count)
{
	memset(s, 0, sizeof(*s));
	s->who = who;
	s->ep = ep;
	s->peer = peer;
	s->base = base;
	s->count = count;
	for (int i = 0; i < WINDOW; i++) {
		s->tx[i].buf = malloc(cfg.max_len);
		s->rx[i].buf = malloc(cfg.max_len + SLACK);
		if (!s->tx[i].buf || !s->rx[i].buf)
			goto err;
	}
	return 0;
err:
	for (int i = 0; i < WINDOW; i++) {
		free(s->tx[i].buf);
		free(s->rx[i].buf);
	}
	memset(s, 0, sizeof(*s));
	return -FI_ENOMEM;
}

/*
 * Frees the buffers, unless an operation is still posted: after a failed exchange the provider
 * may still write them, so they stay until the process exits.
 */
void stream_fini(struct stream *s)
{
	for (int i = 0; i < WINDOW; i++) {
		if (s->tx[i].is_busy || s->rx[i].is_busy)
			return;
	}
	for (int i = 0; i < WINDOW; i++) {
		free(s->tx[i].buf);
		free(s->rx[i].buf);
		s->tx[i].buf = s->rx[i].buf = NULL;
	}
}

static bool stream_is_done(const struct stream *s)
{
	return s->tx_done == s->count && s->rx_done == s->count;
}

static struct op *op_free(struct op *ops)
{
	for (int i = 0; i < WINDOW; i++) {
		if (!ops[i].is_busy)
			return &ops[i];
	}
	return NULL;
}

static struct op *op_find(struct op *ops, void *context)
{
	for (int i = 0; i < WINDOW; i++) {
		if (ops[i].is_busy && context == &ops[i].ctx)
			return &ops[i];
	}
	return NULL;
}

/* Posts sends while the window has room; a -FI_EAGAIN keeps the prepared one for later. */
static void stream_post_tx(struct stream *s)
{
	while (s->tx_next < s->count && s->tx_next - s->tx_done < WINDOW) {
		uint64_t seq = s->tx_next, tag = s->base + seq;
		size_t len = msg_len(seq);
		struct op *op = s->tx_staged;
		ssize_t ret;

		if (!op) {
			op = op_free(s->tx);
			op->seq = seq;
			lt_fill(op->buf, len, tag);
			s->tx_staged = op;
		}
		ret = fi_tsend(s->ep->ep, op->buf, len, NULL, s->peer, tag, &op->ctx);
		if (ret == -FI_EAGAIN)
			return;
		s->tx_staged = NULL;
		s->tx_next++;
		if (ret) {
			stream_fail(s, "post send %" PRIu64 " (%zu bytes): %zd (%s)", seq, len, ret,
				    fi_strerror((int) -ret));
			s->tx_done++;
			continue;
		}
		op->is_busy = true;
	}
}

/* Posts receives, each for its own tag, while the window has room. */
static void stream_post_rx(struct stream *s)
{
	while (s->rx_next < s->count && s->rx_next - s->rx_done < WINDOW) {
		uint64_t seq = s->rx_next, tag = s->base + seq;
		size_t len = msg_len(seq);
		struct op *op = s->rx_staged;
		ssize_t ret;

		if (!op) {
			op = op_free(s->rx);
			op->seq = seq;
			/* Zeros never match the pattern: stale data cannot pass. */
			memset(op->buf, 0, len + SLACK);
			s->rx_staged = op;
		}
		ret = fi_trecv(s->ep->ep, op->buf, len + SLACK, NULL, FI_ADDR_UNSPEC, tag, 0,
			       &op->ctx);
		if (ret == -FI_EAGAIN)
			return;
		s->rx_staged = NULL;
		s->rx_next++;
		if (ret) {
			stream_fail(s, "post receive %" PRIu64 ": %zd (%s)", seq, ret,
				    fi_strerror((int) -ret));
			s->rx_done++;
			continue;
		}
		op->is_busy = true;
	}
}

static void stream_take_tx(struct stream *s, const struct lt_comp *c)
{
	struct op *op = op_find(s->tx, c->op_context);
	size_t len;

	if (!op) {
		stream_fail(s, "send completion of no send of this exchange (context %p, err %d)",
			    c->op_context, c->err);
		return;
	}
	op->is_busy = false;
	s->tx_done++;
	len = msg_len(op->seq);
	if (c->err)
		stream_fail(s,
			    "send %" PRIu64 " (%zu bytes) completed with error %d (%s), "
			    "prov_errno %d",
			    op->seq, len, c->err, fi_strerror(c->err), c->prov_errno);
	else if (!(c->flags & FI_SEND))
		stream_fail(s, "send %" PRIu64 " completed without FI_SEND (flags %#" PRIx64 ")",
			    op->seq, c->flags);
	else
		s->tx_ok++;
}

static void stream_take_rx(struct stream *s, const struct lt_comp *c)
{
	struct op *op = op_find(s->rx, c->op_context);
	uint64_t tag;
	size_t len, off;

	if (!op) {
		stream_fail(s,
			    "receive completion of no receive of this exchange (context %p, "
			    "err %d, tag %#" PRIx64 ", %zu bytes)",
			    c->op_context, c->err, c->tag, c->len);
		return;
	}
	op->is_busy = false;
	s->rx_done++;
	tag = s->base + op->seq;
	len = msg_len(op->seq);
	if (c->err) {
		stream_fail(s, "receive %" PRIu64 " completed with error %d (%s), prov_errno %d",
			    op->seq, c->err, fi_strerror(c->err), c->prov_errno);
		return;
	}
	if (c->tag != tag) {
		stream_fail(s,
			    "receive %" PRIu64 " completed with tag %#" PRIx64 ", want %#" PRIx64,
			    op->seq, c->tag, tag);
		return;
	}
	if (c->len != len) {
		stream_fail(s, "receive %" PRIu64 " completed with %zu bytes, want %zu", op->seq,
			    c->len, len);
		return;
	}
	off = lt_verify(op->buf, len, tag);
	if (off != len) {
		stream_fail(
			s, "message %" PRIu64 " (%zu bytes) differs from what was sent at byte %zu",
			op->seq, len, off);
		return;
	}
	s->rx_ok++;
}

/* Bytes sent (and received) by the whole exchange. */
static uint64_t stream_bytes(const struct stream *s)
{
	uint64_t bytes = 0;

	for (unsigned seq = 0; seq < s->count; seq++)
		bytes += msg_len(seq);
	return bytes;
}

/* Runs the exchange to its end or to the deadline; the checks say what went wrong. */
bool stream_run(struct stream *s, uint64_t deadline)
{
	uint64_t start = lt_now_ms(), elapsed;
	struct lt_comp c;

	while (!stream_is_done(s) && lt_now_ms() < deadline) {
		stream_post_rx(s);
		stream_post_tx(s);
		lt_progress();
		while (lt_cq_take(&s->ep->tx, &c))
			stream_take_tx(s, &c);
		while (lt_cq_take(&s->ep->rx, &c))
			stream_take_rx(s, &c);
	}
	elapsed = lt_now_ms() - start;
	LT_CHECK(stream_is_done(s),
		 "%s: the exchange of %u messages each way ended before the deadline (after "
		 "%" PRIu64 " ms: %u sends and %u receives outstanding, %u and %u not yet posted)",
		 s->who, s->count, elapsed, s->tx_next - s->tx_done, s->rx_next - s->rx_done,
		 s->count - s->tx_next, s->count - s->rx_next);
	LT_CHECK(s->tx_ok == s->count, "%s: all %u sends completed successfully (%u did)", s->who,
		 s->count, s->tx_ok);
	LT_CHECK(s->rx_ok == s->count,
		 "%s: all %u messages arrived once each, with the right tag, length and data "
		 "(%u did)",
		 s->who, s->count, s->rx_ok);
	LT_CHECK(!s->ep->tx.last_ret && !s->ep->rx.last_ret, "%s: no CQ read failed (tx %d, rx %d)",
		 s->who, s->ep->tx.last_ret, s->ep->rx.last_ret);
	lt_note("%s: %u messages (%.1f MiB) each way in %" PRIu64 " ms", s->who, s->count,
		(double) stream_bytes(s) / (1 << 20), elapsed);
	return stream_is_done(s) && s->tx_ok == s->count && s->rx_ok == s->count;
}

/* ---- the two processes ---- */

static int open_side(struct fi_info **info, struct lt_dom *dom, struct lt_ep *ep)
{
	struct fi_info *hints = lt_hints(FI_TAGGED);
	int ret;

	*info = NULL;
	ret = lt_getinfo(hints, info);
	fi_freeinfo(hints);
	if (!ret)
		ret = lt_dom_open(*info, dom);
	if (!ret)
		ret = lt_ep_open(dom, NULL, ep);
	return ret;
}

/*
 * Child: sends its address first, learns the parent's, then runs its half of the mode. Its
 * check lines go to the same output; its exit status says whether all passed.
 */
static int child_main(const char *role, int rfd, int wfd)
{
	uint64_t deadline = lt_now_ms() + (uint64_t) cfg.deadline_s * 1000;
	char addr[LT_ADDR_MAX];
	struct fi_info *info;
	struct lt_dom dom;
	struct lt_ep ep;
	struct stream s;
	fi_addr_t parent;
	ssize_t n;

	if (open_side(&info, &dom, &ep)) {
		fprintf(stderr, "child: cannot open an endpoint over %s\n", lt_prov());
		return 2;
	}
	if (info->ep_attr->max_msg_size < cfg.max_len)
		cfg.max_len = info->ep_attr->max_msg_size;
	if (lt_pipe_send(wfd, ep.addr, ep.addrlen))
		return 2;
	n = lt_pipe_recv(rfd, addr, sizeof(addr), LT_TIMEOUT_MS);
	if (n <= 0 || lt_av_insert(&ep, addr, &parent))
		return 2;
	if (!strcmp(role, "silent")) {
		silent_child(&ep, parent, rfd, wfd, deadline);
	} else {
		if (stream_init(&s, "child", &ep, parent, 0, cfg.count))
			return 2;
		stream_run(&s, deadline);
		/* Stay until the parent is done too: it may still need our acknowledgements. */
		sync_both(rfd, wfd, ms_left(deadline) + SYNC_SLACK_MS);
		stream_fini(&s);
	}
	lt_ep_close(&ep);
	lt_dom_close(&dom);
	fi_freeinfo(info);
	return lt_failed() ? 1 : 0;
}

int main(int argc, char **argv)
{
	uint64_t start, deadline;
	char addr[LT_ADDR_MAX], why[256];
	struct lt_child child;
	struct fi_info *hints, *info;
	struct lt_dom dom;
	struct lt_ep ep;
	struct stream s;
	fi_addr_t peer;
	const char *role;
	bool is_silent;
	int rfd, wfd, status;
	ssize_t n;

	read_config();
	role = lt_child_role(argc, argv, &rfd, &wfd);
	if (role) {
		arm_hang_guard();
		return child_main(role, rfd, wfd);
	}

	lt_begin("loss");
	arm_hang_guard();
	is_silent = !strcmp(cfg.mode, "silent");
	if (!is_silent && strcmp(cfg.mode, "data")) {
		LT_CHECK(false, "LT_LOSS_MODE is data or silent (it is '%s')", cfg.mode);
		return lt_end();
	}
	/* Before fi_getinfo loads the provider, which reads its parameters then. */
	if (is_silent && !getenv("FI_OFI_LAYER_PEER_TIMEOUT")) {
		snprintf(why, sizeof(why), "%u", cfg.peer_timeout_ms);
		setenv("FI_OFI_LAYER_PEER_TIMEOUT", why, 1);
	}
	hints = lt_hints(FI_TAGGED);
	info = lt_getinfo_or_skip(hints);
	if (is_silent) {
		if (!is_plain_name(cfg.table) || !is_plain_name(cfg.chain))
			lt_skip("silent mode needs the nftables table and chain of run_loss.sh "
				"(LT_NFT_TABLE, LT_NFT_CHAIN)");
		if (!in_loss_netns())
			lt_skip("silent mode drops everything on loopback: it runs only in the "
				"network namespace of run_loss.sh (LT_NETNS)");
	}
	if (info->ep_attr->max_msg_size < cfg.max_len) {
		lt_note("the provider's max_msg_size is %zu: larger messages are cut to it",
			info->ep_attr->max_msg_size);
		cfg.max_len = info->ep_attr->max_msg_size;
	}
	if (!LT_CHECK(!lt_dom_open(info, &dom) && !lt_ep_open(&dom, NULL, &ep),
		      "open the parent's endpoint over %s", lt_prov()))
		return lt_end();

	start = lt_now_ms();
	deadline = start + (uint64_t) cfg.deadline_s * 1000;
	if (!LT_CHECK(!lt_child_spawn(is_silent ? "silent" : "data", &child), "spawn the child"))
		return lt_end();
	n = lt_pipe_recv(child.from_child, addr, sizeof(addr), LT_TIMEOUT_MS);
	if (!LT_CHECK(n > 0 && !lt_av_insert(&ep, addr, &peer) &&
			      !lt_pipe_send(child.to_child, ep.addr, ep.addrlen),
		      "swap addresses with the child")) {
		lt_child_reap(&child, 1000, true);
		return lt_end();
	}

	if (is_silent) {
		silent_parent(&ep, peer, &child, deadline);
	} else if (!stream_init(&s, "parent", &ep, peer, 0, cfg.count)) {
		stream_run(&s, deadline);
		LT_CHECK(sync_both(child.from_child, child.to_child,
				   ms_left(deadline) + SYNC_SLACK_MS),
			 "the child's checks passed too");
	} else {
		LT_CHECK(false, "allocate the buffers");
	}

	status = lt_child_reap(&child, LT_TIMEOUT_MS, false);
	LT_CHECK(status != -1 && WIFEXITED(status) && WEXITSTATUS(status) == 0,
		 "the child exited with status 0 (wait status %#x)", (unsigned) status);
	lt_ep_close(&ep);
	lt_dom_close(&dom);
	if (!is_silent)
		stream_fini(&s);
	fi_freeinfo(info);
	fi_freeinfo(hints);
	lt_note("ran: mode %s, provider %s, loss %s%s, fault '%s', %u messages each way, %" PRIu64
		" ms",
		cfg.mode, lt_prov(), env_str("LT_LOSS_PCT", "none made"),
		getenv("LT_LOSS_PCT") ? "%" : "", env_str("FI_OFI_LAYER_DGRAM_FAULT", ""),
		is_silent ? SILENT_COUNT : cfg.count, lt_now_ms() - start);
	return lt_end();
}
