/*
 * test_loss's silent mode (the top of test_loss.c says what it checks): the partition made
 * and lifted with nftables, the two sends into it, and talking again afterwards.
 */
#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <rdma/fi_tagged.h>

#include "tests/functional/test_loss.h"

/* Only the names run_loss.sh gives: the strings go to a shell. */
bool is_plain_name(const char *s)
{
	return s && *s && strspn(s, "abcdefghijklmnopqrstuvwxyz0123456789_ ") == strlen(s);
}

/*
 * True when this process runs in the network namespace run_loss.sh made (LT_NETNS, mounted at
 * /run/netns/NAME by ip netns add): the only place where dropping everything on loopback harms
 * nothing else.
 */
bool in_loss_netns(void)
{
	const char *name = getenv("LT_NETNS");
	char path[256];
	struct stat self, ns;

	if (!name || !*name || strchr(name, '/'))
		return false;
	snprintf(path, sizeof(path), "/run/netns/%s", name);
	return !stat("/proc/self/ns/net", &self) && !stat(path, &ns) && self.st_dev == ns.st_dev &&
	       self.st_ino == ns.st_ino;
}

/* Runs "nft VERB TABLE CHAIN REST"; returns its exit status (-1 if it did not run). */
static int nft(const char *verb, const char *rest)
{
	char cmd[256];
	int status;

	snprintf(cmd, sizeof(cmd), "nft %s %s %s %s", verb, cfg.table, cfg.chain, rest);
	status = system(cmd);
	return status != -1 && WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static bool is_peer_lost_err(int err)
{
	return err == FI_EHOSTUNREACH || err == FI_ECONNRESET || err == FI_ECONNABORTED ||
	       err == FI_ETIMEDOUT || err == FI_EIO || err == FI_ENOTCONN ||
	       err == FI_ECONNREFUSED;
}

/*
 * After the partition, each side first makes sure it talks to the peer again, as an
 * application that lost a peer would: a message sent with FI_DELIVERY_COMPLETE, sent again
 * while it fails because this side still held the conversation the peer ended (a send
 * posted before this side learned that can only fail; one that completed is there). Then it
 * has the peer's. Only after both does the new exchange start, and then nothing may fail.
 */
static bool reconnect(const char *who, struct lt_ep *ep, fi_addr_t peer, uint64_t deadline)
{
	struct fi_context2 sctx, rctx;
	char out[8] = "again", in[8 + SLACK];
	bool is_sent = false, is_received = false, is_posted = false;
	unsigned tries = 0;
	struct lt_comp c;
	ssize_t ret;

	ret = LT_RETRY(fi_trecv(ep->ep, in, sizeof(in), NULL, FI_ADDR_UNSPEC, TAG_AGAIN, 0,
				&rctx));
	if (!LT_CHECK_RET(ret, 0, "%s: post the receive for the peer's first message again",
			  who))
		return false;
	while (!(is_sent && is_received) && lt_now_ms() < deadline) {
		if (!is_sent && !is_posted) {
			ret = LT_RETRY(fi_tsendmsg(ep->ep, &(struct fi_msg_tagged) {
						   .msg_iov = &(struct iovec) {
							   .iov_base = out,
							   .iov_len = sizeof(out) },
						   .iov_count = 1,
						   .addr = peer,
						   .tag = TAG_AGAIN,
						   .context = &sctx },
					   FI_COMPLETION | FI_DELIVERY_COMPLETE));
			if (!LT_CHECK_RET(ret, 0, "%s: send the first message again", who))
				return false;
			is_posted = true;
			tries++;
		}
		lt_progress();
		while (lt_cq_take(&ep->tx, &c)) {
			if (c.op_context != &sctx)
				continue;
			is_posted = false;
			if (!c.err) {
				is_sent = true;
			} else if (is_peer_lost_err(c.err) && tries < 32) {
				lt_note("%s: the first message after the partition failed with %s "
					"(the old conversation): sent again", who,
					fi_strerror(c.err));
			} else {
				LT_CHECK(false, "%s: the first message after the partition: %s",
					 who, fi_strerror(c.err));
				return false;
			}
		}
		while (lt_cq_take(&ep->rx, &c)) {
			if (c.op_context == &rctx && !c.err && !strcmp(in, "again"))
				is_received = true;
		}
	}
	return LT_CHECK(is_sent && is_received,
			"%s: talks to the peer again after the partition (sent %s, received %s)",
			who, is_sent ? "yes" : "no", is_received ? "yes" : "no");
}

#define OUTCOME_FAILED 'f'
#define OUTCOME_SUCCEEDED 's'
#define OUTCOME_NONE 'n'

/* One of the parent's two sends into the partition. */
struct lost_send {
	const char *name;
	struct fi_context2 ctx;
	char *buf;
	size_t len;
	uint64_t tag;
	bool is_done;
	int err;
	uint64_t ms; /* from posting to its completion */
};

/*
 * The exchange after the partition is small: a peer that is talked to again gets it done in a
 * few peer timeouts (and tcp in its retransmission backoff), not in what is left of the run.
 */
static uint64_t after_deadline(uint64_t deadline)
{
	uint64_t after = lt_now_ms() + 4 * (uint64_t) cfg.peer_timeout_ms + AFTER_SLACK_MS;

	return after < deadline ? after : deadline;
}

/* How a send into the partition ended, for the child: failed, succeeded or never completed. */
static char outcome(const struct lost_send *ls)
{
	if (!ls->buf || !ls->is_done)
		return OUTCOME_NONE;
	return ls->err ? OUTCOME_FAILED : OUTCOME_SUCCEEDED;
}

/*
 * Parent, silent mode. The protocol over the pipe, after the addresses:
 *   both     an exchange of SILENT_COUNT messages each way, then sync_both;
 *   child    posts receives for the two messages to come, says "posted";
 *   parent   drops everything on loopback, sends 8 B and 1 MiB, waits for both to fail,
 *            lifts the partition, says "healed" and then how each send ended (outcome());
 *   child    checks that the receive of a message whose send failed got nothing, cancels
 *            both receives, says "ready";
 *   both     a new exchange of SILENT_COUNT messages each way, then sync_both.
 */
void silent_parent(struct lt_ep *ep, fi_addr_t peer, struct lt_child *child,
			  uint64_t deadline)
{
	uint64_t bound = 4 * (uint64_t) cfg.peer_timeout_ms + 5000, start;
	struct lost_send sends[2] = {
		{.name = "8-byte", .len = SMALL_LEN, .tag = TAG_SMALL},
		{.name = "1 MiB", .len = BIG_LEN, .tag = TAG_BIG},
	};
	struct stream s;
	struct lt_comp c;
	char outcomes[3] = "";
	bool is_dropping, ok;
	ssize_t ret;

	if (stream_init(&s, "parent, before the partition", ep, peer, 0, SILENT_COUNT)) {
		LT_CHECK(false, "allocate the buffers");
		return;
	}
	stream_run(&s, deadline);
	ok = LT_CHECK(
		sync_both(child->from_child, child->to_child, ms_left(deadline) + SYNC_SLACK_MS),
		"the child's checks before the partition passed");
	stream_fini(&s);
	if (!ok || lt_failed())
		return;
	if (!LT_CHECK(await(child->from_child, "posted", LT_TIMEOUT_MS),
		      "the child posted its receives for the partition"))
		return;

	is_dropping = LT_CHECK(!nft("add rule", "iif lo drop"),
			       "partition: drop everything on loopback input (nft add rule %s %s "
			       "iif lo drop)",
			       cfg.table, cfg.chain);
	start = lt_now_ms();
	for (int i = 0; is_dropping && i < 2; i++) {
		sends[i].buf = malloc(sends[i].len);
		if (!sends[i].buf)
			break;
		lt_fill(sends[i].buf, sends[i].len, sends[i].tag);
		/* completed once the child has it, not once it left: it cannot, so it fails */
		ret = LT_RETRY(fi_tsendmsg(ep->ep, &(struct fi_msg_tagged) {
						   .msg_iov = &(struct iovec) {
							   .iov_base = sends[i].buf,
							   .iov_len = sends[i].len },
						   .iov_count = 1,
						   .addr = peer,
						   .tag = sends[i].tag,
						   .context = &sends[i].ctx },
					   FI_COMPLETION | FI_DELIVERY_COMPLETE));
		if (!LT_CHECK_RET(ret, 0, "partition: post the %s send to the silent child",
				  sends[i].name))
			sends[i].is_done = true;
	}
	while (is_dropping && !(sends[0].is_done && sends[1].is_done) &&
	       lt_now_ms() - start < bound + 1000) {
		lt_progress();
		while (lt_cq_take(&ep->tx, &c)) {
			for (int i = 0; i < 2; i++) {
				if (c.op_context != &sends[i].ctx)
					continue;
				sends[i].is_done = true;
				sends[i].err = c.err;
				sends[i].ms = lt_now_ms() - start;
			}
		}
	}
	for (int i = 0; is_dropping && i < 2; i++) {
		struct lost_send *ls = &sends[i];

		if (!ls->buf)
			continue;
		if (!ls->is_done) {
			LT_CHECK(false,
				 "partition: the %s send to the silent child completes with an "
				 "error within %" PRIu64 " ms (4 peer timeouts of %u ms + 5 s): it "
				 "never completed",
				 ls->name, bound, cfg.peer_timeout_ms);
			continue;
		}
		LT_CHECK(ls->err && is_peer_lost_err(ls->err) && ls->ms <= bound,
			 "partition: the %s send to the silent child completes with an error "
			 "that says the peer is gone within %" PRIu64 " ms (4 peer timeouts of "
			 "%u ms + 5 s): %s %d (%s) after %" PRIu64 " ms",
			 ls->name, bound, cfg.peer_timeout_ms, ls->err ? "error" : "success",
			 ls->err, ls->err ? fi_strerror(ls->err) : "no error", ls->ms);
		lt_note("partition: the %s send completed after %" PRIu64 " ms with %d (%s)",
			ls->name, ls->ms, ls->err, ls->err ? fi_strerror(ls->err) : "success");
	}

	/* Always lift the partition, whatever happened: the child must be told either way. */
	LT_CHECK(!nft("flush chain", ""), "heal: lift the partition (nft flush chain %s %s)",
		 cfg.table, cfg.chain);
	outcomes[0] = outcome(&sends[0]);
	outcomes[1] = outcome(&sends[1]);
	if (!LT_CHECK(!say(child->to_child, "healed") && !say(child->to_child, outcomes) &&
			      await(child->from_child, "ready", LT_TIMEOUT_MS),
		      "heal: the child is ready for the exchange after the partition"))
		goto out;

	deadline = after_deadline(deadline);
	if (!reconnect("parent", ep, peer, deadline))
		goto out;
	if (stream_init(&s, "parent, after the partition", ep, peer, AFTER_BASE, SILENT_COUNT)) {
		LT_CHECK(false, "allocate the buffers");
		goto out;
	}
	stream_run(&s, deadline);
	LT_CHECK(sync_both(child->from_child, child->to_child, ms_left(deadline) + SYNC_SLACK_MS),
		 "the child's checks after the partition passed");
	stream_fini(&s);
out:
	/* Sends that never completed may still be posted: their buffers stay until exit. */
	if (sends[0].is_done && sends[1].is_done) {
		free(sends[0].buf);
		free(sends[1].buf);
	}
}

/* Child: sorts a completion of the receives for the two messages sent into the partition. */
static void child_lost_comp(const struct lt_comp *c, struct fi_context2 *ctx, bool *got_data,
			    size_t *got_len, bool *canceled, unsigned *other)
{
	for (int i = 0; i < 2; i++) {
		if (c->op_context != &ctx[i])
			continue;
		if (!c->err) {
			got_data[i] = true;
			got_len[i] = c->len;
		} else if (c->err == FI_ECANCELED) {
			canceled[i] = true;
		} else {
			break;
		}
		return;
	}
	(*other)++;
}

static const char *rx_state(bool got_data, bool canceled)
{
	if (got_data)
		return "got the message";
	return canceled ? "was canceled" : "never completed";
}

/* Child, silent mode: the other half of the protocol above silent_parent. */
void silent_child(struct lt_ep *ep, fi_addr_t peer, int rfd, int wfd, uint64_t deadline)
{
	static const char *const names[2] = {"8-byte", "1 MiB"};
	struct fi_context2 ctx[2];
	char *small = calloc(1, SMALL_LEN + SLACK), *big = calloc(1, BIG_LEN + SLACK);
	const size_t lens[2] = {SMALL_LEN, BIG_LEN};
	const uint64_t tags[2] = {TAG_SMALL, TAG_BIG};
	char *bufs[2] = {small, big};
	bool got_data[2] = {false, false}, canceled[2] = {false, false};
	size_t got_len[2] = {0, 0};
	unsigned other = 0;
	char outcomes[3];
	struct stream s;
	struct lt_comp c;
	ssize_t n, ret;
	bool ok, is_intact;

	if (!small || !big ||
	    stream_init(&s, "child, before the partition", ep, peer, 0, SILENT_COUNT)) {
		LT_CHECK(false, "child: allocate the buffers");
		return;
	}
	stream_run(&s, deadline);
	ok = sync_both(rfd, wfd, ms_left(deadline) + SYNC_SLACK_MS);
	stream_fini(&s);
	if (!ok || lt_failed())
		return;

	if (!LT_CHECK_RET(LT_RETRY(fi_trecv(ep->ep, small, SMALL_LEN + SLACK, NULL, FI_ADDR_UNSPEC,
					    TAG_SMALL, 0, &ctx[0])),
			  0, "child: post the receive for the 8-byte message") ||
	    !LT_CHECK_RET(LT_RETRY(fi_trecv(ep->ep, big, BIG_LEN + SLACK, NULL, FI_ADDR_UNSPEC,
					    TAG_BIG, 0, &ctx[1])),
			  0, "child: post the receive for the 1 MiB message") ||
	    say(wfd, "posted"))
		return;
	/* The parent's bound for its sends, and room to spare. */
	n = 0;
	if (await(rfd, "healed", 4 * (int) cfg.peer_timeout_ms + 5000 + LT_TIMEOUT_MS))
		n = recv_progressing(rfd, outcomes, sizeof(outcomes), LT_TIMEOUT_MS);
	if (!LT_CHECK(n == 3,
		      "child: the parent lifted the partition and said how its sends ended"))
		return;
	/* What arrived while the partition was there (or right after it), then the cancels. */
	for (int i = 0; i < 2; i++) {
		while (lt_cq_take(&ep->rx, &c))
			child_lost_comp(&c, ctx, got_data, got_len, canceled, &other);
		if (got_data[i] || canceled[i])
			continue;
		/* Where the send did not fail, the message may be arriving as we cancel. */
		ret = fi_cancel(&ep->ep->fid, &ctx[i]);
		if (outcomes[i] == OUTCOME_FAILED)
			LT_CHECK_RET(ret, 0, "child: cancel the receive for the %s message",
				     names[i]);
	}
	while (!(got_data[0] || canceled[0]) || !(got_data[1] || canceled[1])) {
		if (!lt_cq_next(&ep->rx, &c, LT_TIMEOUT_MS))
			break;
		child_lost_comp(&c, ctx, got_data, got_len, canceled, &other);
	}
	for (int i = 0; i < 2; i++) {
		const char *state = rx_state(got_data[i], canceled[i]);

		if (outcomes[i] == OUTCOME_FAILED)
			LT_CHECK(!got_data[i] && canceled[i],
				 "child: the %s message, whose send failed, never arrives: its "
				 "receive completes with FI_ECANCELED when canceled (it %s)",
				 names[i], state);
		else
			lt_note("child: the parent's %s send %s; the receive for it %s", names[i],
				outcomes[i] == OUTCOME_SUCCEEDED ? "succeeded" : "never completed",
				state);
		if (!got_data[i])
			continue;
		is_intact =
			got_len[i] == lens[i] && lt_verify(bufs[i], lens[i], tags[i]) == lens[i];
		LT_CHECK(is_intact, "child: the %s message that did arrive is intact (%zu bytes)",
			 names[i], got_len[i]);
	}
	LT_CHECK(!other, "child: nothing else completes (%u other completions)", other);
	if (say(wfd, "ready"))
		return;

	deadline = after_deadline(deadline);
	if (!reconnect("child", ep, peer, deadline))
		return;
	if (stream_init(&s, "child, after the partition", ep, peer, AFTER_BASE, SILENT_COUNT)) {
		LT_CHECK(false, "child: allocate the buffers");
		return;
	}
	stream_run(&s, deadline);
	sync_both(rfd, wfd, ms_left(deadline) + SYNC_SLACK_MS);
	stream_fini(&s);
	if ((got_data[0] || canceled[0]) && (got_data[1] || canceled[1])) {
		free(small);
		free(big);
	}
}
