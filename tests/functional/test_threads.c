/*
 * FI_THREAD_SAFE: on one endpoint, two threads send and a third receives at the same time,
 * while the peer endpoint sends and receives from two more threads. Every message arrives
 * exactly once and, per sending thread, in order (FI_ORDER_SAS); every send completes once.
 * Each side's threads keep progressing it until both receivers have everything (manual
 * progress: over a datagram core, what the network lost is sent again from progress calls).
 */
#include "common.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PER_SENDER 4000
#define SMALL 64
#define LARGE (64 * 1024)
#define WINDOW 64
#define DEADLINE_MS 25000

struct header {
	uint32_t sender;
	uint32_t len;
	uint64_t seq;
};

/* One endpoint's traffic: its senders share its tx CQ, its receiver owns its rx CQ. */
struct side {
	struct lt_ep *ep;
	fi_addr_t peer;
	atomic_size_t tx_done; /* send completions read, by any sender thread of this side */
	atomic_size_t tx_errors;
	size_t tx_expected;
};

struct sender {
	struct side *side;
	uint32_t id;
	size_t posted;
	ssize_t fatal; /* a send error other than -FI_EAGAIN */
	struct fi_context2 ctx[PER_SENDER];
};

struct receiver {
	struct side *side;
	size_t expected; /* messages from all senders of the other side */
	uint32_t first_id, nsenders;
	size_t received, out_of_order, corrupt, errors;
	struct header *got; /* per posted receive, in posting order: what it got */
};

static uint64_t deadline;
/* Receiver threads that have all they expect. Until both have, the senders keep progressing
 * their endpoint after their sends completed: over a datagram core a send completes once
 * copied, and what the network lost is sent again only while its endpoint progresses. */
static atomic_int receivers_done;

static size_t msg_len(uint64_t seq)
{
	return seq % 50 == 7 ? LARGE : SMALL;
}

static void drain_tx(struct side *s)
{
	struct fi_cq_tagged_entry e[16];
	ssize_t ret = fi_cq_read(s->ep->tx.cq, e, 16);

	if (ret > 0) {
		atomic_fetch_add(&s->tx_done, (size_t) ret);
	} else if (ret == -FI_EAVAIL) {
		struct fi_cq_err_entry err = {0};

		if (fi_cq_readerr(s->ep->tx.cq, &err, 0) == 1) {
			atomic_fetch_add(&s->tx_done, 1);
			atomic_fetch_add(&s->tx_errors, 1);
		}
	}
}

static void *sender_main(void *arg)
{
	struct sender *snd = arg;
	struct side *s = snd->side;
	size_t total = 0, off = 0;
	char *area;

	/* Every message keeps its own buffer until the end: a send owns it until it completes. */
	for (uint64_t seq = 0; seq < PER_SENDER; seq++)
		total += msg_len(seq);
	area = malloc(total);
	if (!area) {
		snd->fatal = -FI_ENOMEM;
		return NULL;
	}
	while (snd->posted < PER_SENDER && lt_now_ms() < deadline) {
		uint64_t seq = snd->posted;
		struct header h = {.sender = snd->id, .len = (uint32_t) msg_len(seq), .seq = seq};
		char *buf = area + off;
		ssize_t ret;

		lt_fill(buf, h.len, ((uint64_t) snd->id << 32) | seq);
		memcpy(buf, &h, sizeof(h));
		ret = fi_send(s->ep->ep, buf, h.len, NULL, s->peer, &snd->ctx[seq]);
		if (ret == 0) {
			snd->posted++;
			off += h.len;
		} else if (ret != -FI_EAGAIN) {
			snd->fatal = ret;
			break;
		}
		drain_tx(s);
	}
	while ((atomic_load(&s->tx_done) < s->tx_expected || atomic_load(&receivers_done) < 2) &&
	       lt_now_ms() < deadline)
		drain_tx(s);
	free(area);
	return NULL;
}

/*
 * Checks a message's length and pattern, and records which sender and sequence number the
 * receive posted in position post got. Order is checked at the end, in posting order: with
 * FI_ORDER_SAS, receives are matched in the order posted, while their completions may be
 * reported in any order (a large message can finish after a small one matched later).
 */
static void check_message(struct receiver *r, size_t post, const char *buf, size_t len)
{
	struct header h;
	char *copy;

	if (len < sizeof(h)) {
		r->corrupt++;
		return;
	}
	memcpy(&h, buf, sizeof(h));
	if (h.sender < r->first_id || h.sender >= r->first_id + r->nsenders || h.len != len) {
		r->corrupt++;
		return;
	}
	if (post < r->expected) {
		r->got[post].sender = h.sender;
		r->got[post].seq = h.seq;
		r->got[post].len = 1;
	}
	/* The header overwrote the start of the pattern; check the rest. */
	copy = malloc(len);
	if (!copy) {
		r->corrupt++;
		return;
	}
	lt_fill(copy, len, ((uint64_t) h.sender << 32) | h.seq);
	if (memcmp(copy + sizeof(h), buf + sizeof(h), len - sizeof(h)))
		r->corrupt++;
	free(copy);
}

/* Per sender, the sequence numbers in posting order are 0, 1, 2... with none missing. */
static void check_order(struct receiver *r)
{
	uint64_t next[4] = {0};

	for (size_t p = 0; p < r->expected; p++) {
		struct header *h = &r->got[p];

		if (!h->len)
			continue;
		if (h->seq != next[h->sender - r->first_id])
			r->out_of_order++;
		next[h->sender - r->first_id] = h->seq + 1;
	}
}

static void *receiver_main(void *arg)
{
	struct receiver *r = arg;
	struct fid_ep *ep = r->side->ep->ep;
	struct fid_cq *cq = r->side->ep->rx.cq;
	struct fi_context2 ctx[WINDOW];
	struct fi_cq_tagged_entry junk;
	char *bufs = malloc((size_t) WINDOW * LARGE);
	size_t posted = 0, post_of_slot[WINDOW];

	r->got = calloc(r->expected, sizeof(*r->got));
	if (!bufs || !r->got) {
		r->errors++;
		free(bufs);
		return NULL;
	}
	for (size_t i = 0; i < WINDOW && posted < r->expected; i++) {
		while (fi_recv(ep, bufs + i * LARGE, LARGE, NULL, FI_ADDR_UNSPEC, &ctx[i]) ==
			       -FI_EAGAIN &&
		       lt_now_ms() < deadline)
			(void) fi_cq_read(cq, &junk, 0);
		post_of_slot[i] = posted++;
	}
	while (r->received < r->expected && lt_now_ms() < deadline) {
		struct fi_cq_tagged_entry e[8];
		ssize_t ret = fi_cq_read(cq, e, 8);

		if (ret == -FI_EAVAIL) {
			struct fi_cq_err_entry err = {0};

			if (fi_cq_readerr(cq, &err, 0) == 1)
				r->errors++;
			continue;
		}
		for (ssize_t k = 0; k < ret; k++) {
			size_t slot = (size_t) ((struct fi_context2 *) e[k].op_context - ctx);

			if (slot >= WINDOW) {
				r->errors++;
				continue;
			}
			check_message(r, post_of_slot[slot], bufs + slot * LARGE, e[k].len);
			r->received++;
			if (posted < r->expected) {
				while (fi_recv(ep, bufs + slot * LARGE, LARGE, NULL, FI_ADDR_UNSPEC,
					       &ctx[slot]) == -FI_EAGAIN &&
				       lt_now_ms() < deadline)
					(void) fi_cq_read(cq, &junk, 0);
				post_of_slot[slot] = posted++;
			}
		}
	}
	atomic_fetch_add(&receivers_done, 1);
	/* Give back what is still posted before the buffers go. */
	for (size_t i = 0; i < WINDOW; i++)
		(void) fi_cancel(&ep->fid, &ctx[i]);
	{
		uint64_t until = lt_now_ms() + 200;
		struct fi_cq_err_entry err;
		struct fi_cq_tagged_entry e;

		while (lt_now_ms() < until) {
			if (fi_cq_read(cq, &e, 1) == -FI_EAVAIL)
				(void) fi_cq_readerr(cq, &err, 0);
		}
	}
	check_order(r);
	free(r->got);
	free(bufs);
	return NULL;
}

int main(int argc, char **argv)
{
	struct fi_info *hints, *info;
	struct lt_dom dom;
	struct lt_ep a, b;
	struct side sa = {.ep = &a, .tx_expected = 2 * PER_SENDER};
	struct side sb = {.ep = &b, .tx_expected = PER_SENDER};
	static struct sender s0 = {.id = 0}, s1 = {.id = 1}, s2 = {.id = 2};
	struct receiver ra = {.side = &sa, .expected = PER_SENDER, .first_id = 2, .nsenders = 1};
	struct receiver rb = {
		.side = &sb, .expected = 2 * PER_SENDER, .first_id = 0, .nsenders = 2};
	pthread_t t[5];
	uint64_t t0;
	int ret;

	(void) argc;
	lt_begin(argv[0]);
	hints = lt_hints(FI_MSG);
	hints->domain_attr->threading = FI_THREAD_SAFE;
	hints->tx_attr->msg_order = FI_ORDER_SAS;
	hints->rx_attr->msg_order = FI_ORDER_SAS;
	info = lt_getinfo_or_skip(hints);
	LT_CHECK(info->domain_attr->threading == FI_THREAD_SAFE, "FI_THREAD_SAFE granted");
	ret = lt_dom_open(info, &dom);
	if (!ret)
		ret = lt_pair_open(&dom, NULL, NULL, &a, &b, &sa.peer, &sb.peer);
	if (!LT_CHECK_RET(ret, 0, "two endpoints"))
		return lt_end();

	s0.side = &sa;
	s1.side = &sa;
	s2.side = &sb;
	t0 = lt_now_ms();
	deadline = t0 + DEADLINE_MS;
	ret = pthread_create(&t[0], NULL, receiver_main, &ra);
	ret |= pthread_create(&t[1], NULL, receiver_main, &rb);
	ret |= pthread_create(&t[2], NULL, sender_main, &s0);
	ret |= pthread_create(&t[3], NULL, sender_main, &s1);
	ret |= pthread_create(&t[4], NULL, sender_main, &s2);
	if (!LT_CHECK_RET(ret, 0, "five threads started"))
		return lt_end();
	for (int i = 0; i < 5; i++)
		pthread_join(t[i], NULL);
	lt_note("threads: %llu ms", (unsigned long long) (lt_now_ms() - t0));

	LT_CHECK(s0.posted == PER_SENDER && s1.posted == PER_SENDER && s2.posted == PER_SENDER &&
			 !s0.fatal && !s1.fatal && !s2.fatal,
		 "every sender posted its %d messages (%zu, %zu, %zu; errors %zd %zd %zd)",
		 PER_SENDER, s0.posted, s1.posted, s2.posted, s0.fatal, s1.fatal, s2.fatal);
	LT_CHECK(atomic_load(&sa.tx_done) == sa.tx_expected && !atomic_load(&sa.tx_errors),
		 "two threads sending on one endpoint: every send completes once (%zu of %zu)",
		 atomic_load(&sa.tx_done), sa.tx_expected);
	LT_CHECK(atomic_load(&sb.tx_done) == sb.tx_expected && !atomic_load(&sb.tx_errors),
		 "peer's sends complete once (%zu of %zu)", atomic_load(&sb.tx_done),
		 sb.tx_expected);
	LT_CHECK(
		rb.received == rb.expected && !rb.errors,
		"receiver thread gets all %zu messages of two concurrent senders (%zu, %zu errors)",
		rb.expected, rb.received, rb.errors);
	LT_CHECK(!rb.out_of_order && !rb.corrupt,
		 "... once each, in order per sender, intact (%zu out of order, %zu corrupt)",
		 rb.out_of_order, rb.corrupt);
	LT_CHECK(ra.received == ra.expected && !ra.errors,
		 "receiving while the same endpoint sends: all %zu arrive (%zu, %zu errors)",
		 ra.expected, ra.received, ra.errors);
	LT_CHECK(!ra.out_of_order && !ra.corrupt,
		 "... once each, matched in order, intact (%zu out of order, %zu corrupt)",
		 ra.out_of_order, ra.corrupt);

	lt_ep_close(&a);
	lt_ep_close(&b);
	lt_dom_close(&dom);
	fi_freeinfo(info);
	fi_freeinfo(hints);
	return lt_end();
}
