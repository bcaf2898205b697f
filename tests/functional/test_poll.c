/*
 * Poll sets (fi_poll(3)) through the public API: arguments and object lifetimes, then two
 * endpoints whose CQs and counters sit in one poll set, driven by fi_poll alone, as
 * fabtests' fi_poll does.
 */
#include "config.h"

/*
 * Poll sets are deprecated by libfabric 2.0 (its headers mark fi_poll_open, fi_poll,
 * fi_poll_add and fi_poll_del); ofi_layer still offers them, as rxm does, and this file
 * tests them.
 */
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

#include <string.h>

#include <rdma/fi_tagged.h>

#include "tests/functional/common.h"

/* An endpoint with its own CQs and counters; each object's context is its own address. */
struct poll_ep {
	struct fid_av *av;
	struct fid_ep *ep;
	struct fid_cq *tx_cq, *rx_cq;
	struct fid_cntr *send_cntr, *recv_cntr;
	char addr[LT_ADDR_MAX];
	fi_addr_t peer;
};

static struct fi_info *info;
static struct lt_dom dom;

static int poll_ep_open(struct poll_ep *pe)
{
	struct fi_av_attr av_attr = { .type = FI_AV_TABLE };
	struct fi_cq_attr cq_attr = { .format = FI_CQ_FORMAT_TAGGED };
	struct fi_cntr_attr cntr_attr = { .events = FI_CNTR_EVENTS_COMP };
	size_t addrlen = sizeof(pe->addr);
	int ret;

	memset(pe, 0, sizeof(*pe));
	ret = fi_av_open(dom.domain, &av_attr, &pe->av, NULL);
	if (!ret)
		ret = fi_cq_open(dom.domain, &cq_attr, &pe->tx_cq, &pe->tx_cq);
	if (!ret)
		ret = fi_cq_open(dom.domain, &cq_attr, &pe->rx_cq, &pe->rx_cq);
	if (!ret)
		ret = fi_cntr_open(dom.domain, &cntr_attr, &pe->send_cntr, &pe->send_cntr);
	if (!ret)
		ret = fi_cntr_open(dom.domain, &cntr_attr, &pe->recv_cntr, &pe->recv_cntr);
	if (!ret)
		ret = fi_endpoint(dom.domain, info, &pe->ep, NULL);
	if (!ret)
		ret = fi_ep_bind(pe->ep, &pe->av->fid, 0);
	if (!ret)
		ret = fi_ep_bind(pe->ep, &pe->tx_cq->fid, FI_TRANSMIT);
	if (!ret)
		ret = fi_ep_bind(pe->ep, &pe->rx_cq->fid, FI_RECV);
	if (!ret)
		ret = fi_ep_bind(pe->ep, &pe->send_cntr->fid, FI_SEND);
	if (!ret)
		ret = fi_ep_bind(pe->ep, &pe->recv_cntr->fid, FI_RECV);
	if (!ret)
		ret = fi_enable(pe->ep);
	if (!ret)
		ret = fi_getname(&pe->ep->fid, pe->addr, &addrlen);
	return ret;
}

static void poll_ep_close(struct poll_ep *pe)
{
	struct fid *fids[] = {
		pe->ep ? &pe->ep->fid : NULL,		    pe->av ? &pe->av->fid : NULL,
		pe->tx_cq ? &pe->tx_cq->fid : NULL,	    pe->rx_cq ? &pe->rx_cq->fid : NULL,
		pe->send_cntr ? &pe->send_cntr->fid : NULL, pe->recv_cntr ? &pe->recv_cntr->fid : NULL,
	};

	for (size_t i = 0; i < sizeof(fids) / sizeof(fids[0]); i++) {
		if (fids[i])
			fi_close(fids[i]);
	}
}

static struct fid *poll_ep_member(struct poll_ep *pe, int i)
{
	switch (i) {
	case 0: return &pe->tx_cq->fid;
	case 1: return &pe->rx_cq->fid;
	case 2: return &pe->send_cntr->fid;
	default: return &pe->recv_cntr->fid;
	}
}

static void check_arguments(struct poll_ep *a)
{
	struct fi_poll_attr attr = { .flags = 1 };
	struct fid_poll *poll;
	struct lt_dom other;
	struct fid_cq *other_cq;
	struct fi_cq_attr cq_attr = { .format = FI_CQ_FORMAT_CONTEXT };
	void *ctx[4];

	LT_CHECK_RET(fi_poll_open(dom.domain, &attr, &poll), -FI_EBADFLAGS,
		     "fi_poll_open: attr flags are reserved");
	LT_CHECK_RET(fi_poll_open(dom.domain, NULL, NULL), -FI_EINVAL,
		     "fi_poll_open: no place for the set");
	if (!LT_CHECK_RET(fi_poll_open(dom.domain, NULL, &poll), 0, "fi_poll_open: no attr"))
		return;
	LT_CHECK_RET(fi_poll_add(poll, &a->tx_cq->fid, 1), -FI_EBADFLAGS, "fi_poll_add: flags");
	LT_CHECK_RET(fi_poll_add(poll, &a->av->fid, 0), -FI_EINVAL, "fi_poll_add: an AV");
	LT_CHECK_RET(fi_poll_add(poll, &a->ep->fid, 0), -FI_EINVAL, "fi_poll_add: an endpoint");
	LT_CHECK_RET(fi_poll_add(poll, NULL, 0), -FI_EINVAL, "fi_poll_add: NULL");
	LT_CHECK_RET(fi_poll_add(poll, &poll->fid, 0), -FI_EINVAL, "fi_poll_add: the set itself");
	if (LT_CHECK_RET(lt_dom_open(info, &other), 0, "open a second domain")) {
		if (LT_CHECK_RET(fi_cq_open(other.domain, &cq_attr, &other_cq, NULL), 0,
				 "open a CQ there")) {
			LT_CHECK_RET(fi_poll_add(poll, &other_cq->fid, 0), -FI_EINVAL,
				     "fi_poll_add: a CQ of another domain");
			fi_close(&other_cq->fid);
		}
		lt_dom_close(&other);
	}
	LT_CHECK_RET(fi_poll_add(poll, &a->tx_cq->fid, 0), 0, "fi_poll_add: a CQ");
	LT_CHECK_RET(fi_poll_add(poll, &a->tx_cq->fid, 0), -FI_EALREADY,
		     "fi_poll_add: the same CQ again");
	LT_CHECK_RET(fi_poll_add(poll, &a->recv_cntr->fid, 0), 0, "fi_poll_add: a counter");
	LT_CHECK_RET(fi_poll_del(poll, &a->rx_cq->fid, 0), -FI_EINVAL,
		     "fi_poll_del: a CQ that is not a member");
	LT_CHECK_RET(fi_poll_del(poll, &a->tx_cq->fid, 2), -FI_EBADFLAGS, "fi_poll_del: flags");
	LT_CHECK_RET(fi_poll(poll, ctx, -1), -FI_EINVAL, "fi_poll: negative count");
	LT_CHECK_RET(fi_poll(poll, NULL, 4), -FI_EINVAL, "fi_poll: no context array");
	LT_CHECK_RET(fi_poll(poll, ctx, 4), 0, "fi_poll: nothing has happened");

	/* fi_poll(3): the set cannot close while associated; its members cannot either */
	LT_CHECK_RET(fi_close(&poll->fid), -FI_EBUSY, "fi_close of a set with members");
	LT_CHECK_RET(fi_close(&a->recv_cntr->fid), -FI_EBUSY, "fi_close of a member counter");
	LT_CHECK_RET(fi_close(&dom.domain->fid), -FI_EBUSY, "fi_close of the set's domain");
	LT_CHECK_RET(fi_poll_del(poll, &a->tx_cq->fid, 0), 0, "fi_poll_del: the CQ");
	LT_CHECK_RET(fi_poll_del(poll, &a->tx_cq->fid, 0), -FI_EINVAL, "fi_poll_del: again");
	LT_CHECK_RET(fi_poll_del(poll, &a->recv_cntr->fid, 0), 0, "fi_poll_del: the counter");
	LT_CHECK_RET(fi_close(&poll->fid), 0, "fi_close of the emptied set");
}

/* Calls fi_poll until it returns something: the contexts, their number (0 on timeout). */
static int poll_within(struct fid_poll *poll, void **ctx, int count, int timeout_ms)
{
	uint64_t deadline = lt_now_ms() + (uint64_t) timeout_ms;
	int ret;

	do {
		ret = fi_poll(poll, ctx, count);
	} while (ret == 0 && lt_now_ms() < deadline);
	return ret;
}

static int poll_some(struct fid_poll *poll, void **ctx, int count)
{
	return poll_within(poll, ctx, count, LT_TIMEOUT_MS);
}

static bool is_in(void *const *ctx, int cnt, const void *what)
{
	for (int i = 0; i < cnt; i++) {
		if (ctx[i] == what)
			return true;
	}
	return false;
}

/*
 * Sends n messages from a to b and back, driving everything with fi_poll: the set reports
 * each CQ until it is read and each counter once per change, and nothing once all is read.
 */
static void check_traffic(struct poll_ep *a, struct poll_ep *b, int n, bool use_inject)
{
	struct fi_cq_tagged_entry comp;
	struct fid_poll *poll;
	char out = 'x', in[2][8];
	void *ctx[8];
	int i, cnt, sent = 0, got_tx = 0, got_rx = 0, bad = 0, cntr_events = 0;

	if (!LT_CHECK_RET(fi_poll_open(dom.domain, NULL, &poll), 0, "open a poll set"))
		return;
	for (i = 0; i < 4; i++) {
		fi_poll_add(poll, poll_ep_member(a, i), 0);
		fi_poll_add(poll, poll_ep_member(b, i), 0);
	}
	/* b's receive is posted before each send, so no message waits unexpected */
	while (got_rx < n || (!use_inject && got_tx < n)) {
		if (sent == got_rx && sent < n) {
			ssize_t ret = fi_recv(b->ep, in[0], sizeof(in[0]), NULL, b->peer, NULL);

			if (ret == 0)
				ret = use_inject ? fi_inject(a->ep, &out, 1, a->peer) :
						   fi_send(a->ep, &out, 1, NULL, a->peer, &out);
			if (ret) {
				LT_CHECK_RET(ret, 0, "post message %d", sent);
				break;
			}
			sent++;
		}
		cnt = poll_some(poll, ctx, 8);
		if (cnt <= 0) {
			LT_CHECK(false, "fi_poll reports message %d's events (%d)", got_rx, cnt);
			break;
		}
		for (i = 0; i < cnt; i++) {
			struct fid_cq *cq = NULL;

			if (ctx[i] == &a->tx_cq)
				cq = a->tx_cq;
			else if (ctx[i] == &b->rx_cq)
				cq = b->rx_cq;
			else if (ctx[i] == &a->send_cntr || ctx[i] == &b->recv_cntr)
				cntr_events++;
			else
				bad++;
			if (cq && fi_cq_read(cq, &comp, 1) == 1) {
				if (cq == a->tx_cq)
					got_tx++;
				else
					got_rx++;
			}
		}
	}
	LT_CHECK(bad == 0, "fi_poll reports only members with events (%d others)", bad);
	LT_CHECK(got_rx == n && (use_inject || got_tx == n),
		 "%d messages%s, each completed through fi_poll", n, use_inject ? " injected" : "");
	LT_CHECK(cntr_events > 0, "the counters were reported (%d times)", cntr_events);
	/* whatever is left to report is there at once: a short look (nothing is fine) */
	cnt = poll_within(poll, ctx, 8, 500);
	if (cnt > 0)
		/* the counters' last change may not have been reported yet; then it is now */
		LT_CHECK(!is_in(ctx, cnt, &a->tx_cq) && !is_in(ctx, cnt, &b->rx_cq),
			 "read CQs are not reported");
	LT_CHECK_RET(fi_poll(poll, ctx, 8), 0, "once all is read, fi_poll reports nothing");
	LT_CHECK_RET(fi_cntr_read(a->send_cntr), n, "the send counter counted every message");
	LT_CHECK_RET(fi_cntr_read(b->recv_cntr), n, "the receive counter too");

	/* fi_cntr_set moves the mark: not an event; a completion after it is one */
	fi_cntr_set(a->send_cntr, 0);
	fi_cntr_set(b->recv_cntr, 0);
	LT_CHECK_RET(fi_poll(poll, ctx, 8), 0, "fi_cntr_set is not an event");
	if (LT_CHECK_RET(fi_recv(a->ep, in[1], sizeof(in[1]), NULL, a->peer, NULL), 0,
			 "post a receive at a") &&
	    LT_CHECK_RET(fi_send(b->ep, &out, 1, NULL, b->peer, &out), 0, "send from b to a")) {
		int seen = 0;

		while (seen != 3 && (cnt = poll_some(poll, ctx, 8)) > 0) {
			if (is_in(ctx, cnt, &a->rx_cq) && fi_cq_read(a->rx_cq, &comp, 1) == 1)
				seen |= 1;
			if (is_in(ctx, cnt, &b->tx_cq) && fi_cq_read(b->tx_cq, &comp, 1) == 1)
				seen |= 2;
		}
		LT_CHECK(seen == 3, "the other direction completes through fi_poll too");
	}
	for (i = 0; i < 4; i++) {
		fi_poll_del(poll, poll_ep_member(a, i), 0);
		fi_poll_del(poll, poll_ep_member(b, i), 0);
	}
	LT_CHECK_RET(fi_close(&poll->fid), 0, "close the poll set");
	fi_cntr_set(a->send_cntr, 0);
	fi_cntr_set(b->recv_cntr, 0);
	fi_cntr_set(a->recv_cntr, 0);
	fi_cntr_set(b->send_cntr, 0);
}

/* One counter in two sets: whichever set polls first takes the change. */
static void check_shared_member(struct poll_ep *a, struct poll_ep *b)
{
	struct fid_poll *p1, *p2;
	struct fi_cq_tagged_entry comp;
	char buf[8], out = 'y';
	void *ctx[4];

	if (!LT_CHECK_RET(fi_poll_open(dom.domain, NULL, &p1), 0, "open set 1") ||
	    !LT_CHECK_RET(fi_poll_open(dom.domain, NULL, &p2), 0, "open set 2"))
		return;
	LT_CHECK_RET(fi_poll_add(p1, &b->recv_cntr->fid, 0), 0, "a counter in set 1");
	LT_CHECK_RET(fi_poll_add(p2, &b->recv_cntr->fid, 0), 0, "and in set 2");
	LT_CHECK_RET(fi_poll_add(p2, &a->tx_cq->fid, 0), 0, "a's CQ in set 2");
	fi_recv(b->ep, buf, sizeof(buf), NULL, b->peer, NULL);
	fi_send(a->ep, &out, 1, NULL, a->peer, &out);
	/* set 2 progresses a (its tx CQ) and b (its counter's endpoint) */
	for (uint64_t end = lt_now_ms() + LT_TIMEOUT_MS; lt_now_ms() < end;) {
		if (fi_cntr_read(b->recv_cntr) == 1 && fi_cq_read(a->tx_cq, &comp, 1) == 1)
			break;
	}
	fi_cq_read(b->rx_cq, &comp, 1);
	LT_CHECK_RET(poll_some(p1, ctx, 4), 1, "set 1 reports the counter's change");
	LT_CHECK_RET(fi_poll(p2, ctx, 4), 0, "set 2 does not report it again");
	fi_poll_del(p1, &b->recv_cntr->fid, 0);
	fi_poll_del(p2, &b->recv_cntr->fid, 0);
	fi_poll_del(p2, &a->tx_cq->fid, 0);
	LT_CHECK_RET(fi_close(&p1->fid), 0, "close set 1");
	LT_CHECK_RET(fi_close(&p2->fid), 0, "close set 2");
	fi_cntr_set(b->recv_cntr, 0);
}

int main(void)
{
	struct poll_ep a, b;
	struct fi_info *hints;

	lt_begin("poll");
	hints = lt_hints(FI_MSG | FI_TAGGED);
	info = lt_getinfo_or_skip(hints);
	if (!LT_CHECK_RET(lt_dom_open(info, &dom), 0, "open the domain"))
		return lt_end();
	if (LT_CHECK_RET(poll_ep_open(&a), 0, "open endpoint a") &&
	    LT_CHECK_RET(poll_ep_open(&b), 0, "open endpoint b") &&
	    LT_CHECK_RET(fi_av_insert(a.av, b.addr, 1, &a.peer, 0, NULL), 1, "a knows b") &&
	    LT_CHECK_RET(fi_av_insert(b.av, a.addr, 1, &b.peer, 0, NULL), 1, "b knows a")) {
		check_arguments(&a);
		check_traffic(&a, &b, 1, false);
		check_traffic(&a, &b, 200, false);
		check_traffic(&a, &b, 50, true);
		check_shared_member(&a, &b);
	}
	poll_ep_close(&a);
	poll_ep_close(&b);
	lt_dom_close(&dom);
	fi_freeinfo(info);
	fi_freeinfo(hints);
	return lt_end();
}
