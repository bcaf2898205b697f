/*
 * FI_THREAD_SAFE across endpoints: two endpoints of one domain, each driven by a thread of its
 * own, send rendezvous-size messages to each other at the same time. Nothing serialises the two
 * threads but the domain, so the registrations each rendezvous makes and releases on the core
 * domain, and the core reading the other side's registered buffers, all run at once. Every
 * message must arrive intact and every send complete without an error.
 */
#include "common.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#define MSGS 3000
/* above the default eager_size: a rendezvous over an RDM core (eager with direct receive) */
#define LEN (32 * 1024)
#define WINDOW 16	/* sends and receives each thread keeps posted */
#define DEADLINE_MS 60000

struct side {
	struct lt_ep ep;
	fi_addr_t peer;
	uint32_t id;
	size_t sent, send_done, send_errors;
	size_t received, recv_errors, corrupt;
	ssize_t fatal; /* a posting error other than -FI_EAGAIN */
};

static uint64_t deadline;
static atomic_bool gave_up; /* one side cannot go on: the other stops waiting for it */

static uint64_t seed(uint32_t sender, size_t seq)
{
	return ((uint64_t) sender << 32) | seq;
}

static void drain_tx(struct side *s)
{
	struct fi_cq_tagged_entry e[WINDOW];
	struct fi_cq_err_entry err = {0};
	ssize_t ret = fi_cq_read(s->ep.tx.cq, e, WINDOW);

	if (ret > 0) {
		s->send_done += (size_t) ret;
	} else if (ret == -FI_EAVAIL && fi_cq_readerr(s->ep.tx.cq, &err, 0) == 1) {
		s->send_done++;
		s->send_errors++;
	}
}

/* Takes completed receives, checks them and posts their slot again while more are due. */
static void drain_rx(struct side *s, char *bufs, struct fi_context2 *ctx, size_t *posted)
{
	struct fi_cq_tagged_entry e[WINDOW];
	struct fi_cq_err_entry err = {0};
	ssize_t ret = fi_cq_read(s->ep.rx.cq, e, WINDOW);
	uint64_t seq;
	size_t slot;

	if (ret == -FI_EAVAIL) {
		if (fi_cq_readerr(s->ep.rx.cq, &err, 0) == 1) {
			s->recv_errors++;
			s->received++;
		}
		return;
	}
	for (ssize_t k = 0; k < ret; k++) {
		slot = (size_t) ((struct fi_context2 *) e[k].op_context - ctx);
		memcpy(&seq, bufs + slot * LEN, sizeof(seq));
		/* The first word names the message; the rest is its pattern. */
		if (e[k].len != LEN || seq >= MSGS ||
		    lt_verify(bufs + slot * LEN + sizeof(seq), LEN - sizeof(seq),
			      seed(s->id ^ 1, seq)) != LEN - sizeof(seq))
			s->corrupt++;
		s->received++;
		if (*posted < MSGS) {
			while (fi_recv(s->ep.ep, bufs + slot * LEN, LEN, NULL, FI_ADDR_UNSPEC,
				       &ctx[slot]) == -FI_EAGAIN &&
			       lt_now_ms() < deadline)
				drain_tx(s);
			(*posted)++;
		}
	}
}

static void *side_main(void *arg)
{
	struct side *s = arg;
	struct fi_context2 rx_ctx[WINDOW], tx_ctx[WINDOW];
	char *rx_bufs = malloc((size_t) WINDOW * LEN);
	char *tx_bufs = malloc((size_t) WINDOW * LEN);
	size_t posted = 0, slot;
	uint64_t seq;
	ssize_t ret;

	if (!rx_bufs || !tx_bufs) {
		s->fatal = -FI_ENOMEM;
		goto out;
	}
	for (slot = 0; slot < WINDOW; slot++, posted++) {
		ret = fi_recv(s->ep.ep, rx_bufs + slot * LEN, LEN, NULL, FI_ADDR_UNSPEC,
			      &rx_ctx[slot]);
		if (ret) {
			s->fatal = ret;
			goto out;
		}
	}
	while ((s->sent < MSGS || s->send_done < s->sent || s->received < MSGS) &&
	       lt_now_ms() < deadline && !atomic_load(&gave_up)) {
		/* A send slot is free again once as many sends completed as were posted before. */
		if (s->sent < MSGS && s->sent - s->send_done < WINDOW) {
			seq = s->sent;
			slot = seq % WINDOW;
			lt_fill(tx_bufs + slot * LEN + sizeof(seq), LEN - sizeof(seq),
				seed(s->id, seq));
			memcpy(tx_bufs + slot * LEN, &seq, sizeof(seq));
			ret = fi_send(s->ep.ep, tx_bufs + slot * LEN, LEN, NULL, s->peer,
				      &tx_ctx[slot]);
			if (!ret) {
				s->sent++;
			} else if (ret != -FI_EAGAIN) {
				s->fatal = ret;
				break;
			}
		}
		drain_tx(s);
		drain_rx(s, rx_bufs, rx_ctx, &posted);
	}
out:
	if (s->fatal)
		atomic_store(&gave_up, true);
	/* Whatever is still posted goes before its buffer does. */
	for (slot = 0; slot < WINDOW; slot++)
		(void) fi_cancel(&s->ep.ep->fid, &rx_ctx[slot]);
	for (uint64_t until = lt_now_ms() + 100; lt_now_ms() < until;) {
		struct fi_cq_tagged_entry e;
		struct fi_cq_err_entry err;

		if (fi_cq_read(s->ep.rx.cq, &e, 1) == -FI_EAVAIL)
			(void) fi_cq_readerr(s->ep.rx.cq, &err, 0);
	}
	free(rx_bufs);
	free(tx_bufs);
	return NULL;
}

int main(int argc, char **argv)
{
	static struct side a = {.id = 0}, b = {.id = 1};
	struct fi_info *hints, *info;
	struct lt_dom dom;
	pthread_t ta, tb;
	uint64_t t0;
	int ret;

	(void) argc;
	lt_begin(argv[0]);
	hints = lt_hints(FI_MSG);
	hints->domain_attr->threading = FI_THREAD_SAFE;
	info = lt_getinfo_or_skip(hints);
	LT_CHECK(info->domain_attr->threading == FI_THREAD_SAFE, "FI_THREAD_SAFE granted");
	ret = lt_dom_open(info, &dom);
	if (!ret)
		ret = lt_pair_open(&dom, NULL, NULL, &a.ep, &b.ep, &a.peer, &b.peer);
	if (!LT_CHECK_RET(ret, 0, "two endpoints on one domain"))
		return lt_end();

	t0 = lt_now_ms();
	deadline = t0 + DEADLINE_MS;
	ret = pthread_create(&ta, NULL, side_main, &a);
	if (!ret) {
		ret = pthread_create(&tb, NULL, side_main, &b);
		if (ret)
			pthread_join(ta, NULL);
	}
	if (!LT_CHECK_RET(ret, 0, "a thread per endpoint started"))
		return lt_end();
	pthread_join(ta, NULL);
	pthread_join(tb, NULL);
	lt_note("threads: %llu ms", (unsigned long long) (lt_now_ms() - t0));

	LT_CHECK(a.sent == MSGS && b.sent == MSGS && !a.fatal && !b.fatal,
		 "each endpoint posted its %d rendezvous sends (%zu, %zu; errors %zd %zd)", MSGS,
		 a.sent, b.sent, a.fatal, b.fatal);
	LT_CHECK(a.send_done == a.sent && b.send_done == b.sent && !a.send_errors && !b.send_errors,
		 "every send completes once, without an error (%zu and %zu done, %zu and %zu "
		 "errors)",
		 a.send_done, b.send_done, a.send_errors, b.send_errors);
	LT_CHECK(a.received == MSGS && b.received == MSGS && !a.recv_errors && !b.recv_errors,
		 "every message arrives, no receive fails (%zu and %zu, %zu and %zu errors)",
		 a.received, b.received, a.recv_errors, b.recv_errors);
	LT_CHECK(!a.corrupt && !b.corrupt, "... intact (%zu and %zu corrupt)", a.corrupt,
		 b.corrupt);

	lt_ep_close(&a.ep);
	lt_ep_close(&b.ep);
	lt_dom_close(&dom);
	fi_freeinfo(info);
	fi_freeinfo(hints);
	return lt_end();
}
