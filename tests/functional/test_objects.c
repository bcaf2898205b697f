/*
 * The objects around the data path: event queues, completion queues in every format with wait
 * objects, counters, memory registration, and closing objects that are still in use.
 */
#include "common.h"

#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Lower bound slack for timeouts: a wait may round, but never return much too early. */
#define SLACK_MS 15

static struct lt_dom dom;

/* An endpoint bound to CQs (and counters) the test opened itself. */
struct raw_ep {
	struct fid_av *av;
	struct fid_ep *ep;
	char addr[LT_ADDR_MAX];
	fi_addr_t peer;
};

static int raw_ep_open(struct fid_cq *txcq, struct fid_cq *rxcq, struct raw_ep *r)
{
	struct fi_av_attr av_attr = {.type = FI_AV_TABLE};
	size_t len = sizeof(r->addr);
	int ret;

	memset(r, 0, sizeof(*r));
	r->peer = FI_ADDR_NOTAVAIL;
	ret = fi_av_open(dom.domain, &av_attr, &r->av, NULL);
	if (ret)
		return ret;
	ret = fi_endpoint(dom.domain, dom.info, &r->ep, NULL);
	if (ret)
		return ret;
	ret = fi_ep_bind(r->ep, &r->av->fid, 0);
	if (!ret)
		ret = fi_ep_bind(r->ep, &txcq->fid, FI_TRANSMIT);
	if (!ret)
		ret = fi_ep_bind(r->ep, &rxcq->fid, FI_RECV);
	if (!ret)
		ret = fi_enable(r->ep);
	if (!ret)
		ret = fi_getname(&r->ep->fid, r->addr, &len);
	return ret;
}

static void raw_ep_close(struct raw_ep *r)
{
	if (r->ep)
		fi_close(&r->ep->fid);
	if (r->av)
		fi_close(&r->av->fid);
	memset(r, 0, sizeof(*r));
}

/* Each endpoint learns the other's address. */
static int raw_connect(struct raw_ep *a, struct raw_ep *b)
{
	if (fi_av_insert(a->av, b->addr, 1, &a->peer, 0, NULL) != 1)
		return -FI_EINVAL;
	if (fi_av_insert(b->av, a->addr, 1, &b->peer, 0, NULL) != 1)
		return -FI_EINVAL;
	return 0;
}

/*
 * Reads one entry (of any format) from cq, polling the other CQs given for progress, for up to
 * timeout_ms. Uses fi_cq_sread in short slices when the CQ has a wait object. Returns 1, or the
 * last negative return (-FI_EAVAIL stops at once).
 */
static ssize_t read_one(struct fid_cq *cq, bool can_sread, void *entry, struct fid_cq **others,
			int nothers, int timeout_ms)
{
	uint64_t deadline = lt_now_ms() + (uint64_t) timeout_ms;
	struct fi_cq_tagged_entry junk[8];
	ssize_t ret;

	do {
		if (can_sread)
			ret = fi_cq_sread(cq, entry, 1, NULL, 5);
		else
			ret = fi_cq_read(cq, entry, 1);
		if (ret != -FI_EAGAIN)
			return ret;
		for (int i = 0; i < nothers; i++)
			(void) fi_cq_read(others[i], junk, 0);
	} while (lt_now_ms() < deadline);
	return -FI_EAGAIN;
}

/*
 * Posts a send (with CQ data if asked), retrying -FI_EAGAIN for a bounded time while driving
 * progress on the CQs given (a count of 0 drives progress without taking entries).
 */
static ssize_t send_retry(struct fid_ep *ep, const void *buf, size_t len, void *desc,
			  const uint64_t *data, fi_addr_t dest, void *ctx, struct fid_cq **cqs,
			  int ncqs)
{
	uint64_t deadline = lt_now_ms() + LT_TIMEOUT_MS;
	struct fi_cq_tagged_entry junk;
	ssize_t ret;

	for (;;) {
		if (data)
			ret = fi_senddata(ep, buf, len, desc, *data, dest, ctx);
		else
			ret = fi_send(ep, buf, len, desc, dest, ctx);
		if (ret != -FI_EAGAIN || lt_now_ms() > deadline)
			return ret;
		for (int i = 0; i < ncqs; i++)
			(void) fi_cq_read(cqs[i], &junk, 0);
	}
}

/* ---- event queues ---- */

struct eq_writer {
	struct fid_eq *eq;
	unsigned delay_ms;
	struct fi_eq_entry entry;
};

static void *eq_writer_main(void *arg)
{
	struct eq_writer *w = arg;

	lt_sleep_ms(w->delay_ms);
	(void) fi_eq_write(w->eq, FI_NOTIFY, &w->entry, sizeof(w->entry), 0);
	return NULL;
}

static void test_eq(enum fi_wait_obj wait_obj, const char *wname)
{
	struct fi_eq_attr attr = {.size = 16, .wait_obj = wait_obj};
	struct fi_eq_entry in = {0}, out;
	struct fi_eq_err_entry err;
	struct eq_writer writer;
	struct fid_eq *eq = NULL;
	char ctx_a, ctx_b, buf[128];
	pthread_t thread;
	uint32_t event;
	uint64_t t0;
	ssize_t ret;

	ret = fi_eq_open(dom.fabric, &attr, &eq, NULL);
	if (!LT_CHECK_RET(ret, 0, "EQ %s: fi_eq_open", wname))
		return;

	ret = fi_eq_read(eq, &event, &out, sizeof(out), 0);
	LT_CHECK_RET(ret, -FI_EAGAIN, "EQ %s: read of an empty EQ", wname);
	memset(&err, 0, sizeof(err));
	ret = fi_eq_readerr(eq, &err, 0);
	LT_CHECK_RET(ret, -FI_EAGAIN, "EQ %s: readerr of an EQ without errors", wname);

	in.context = &ctx_a;
	in.data = 42;
	ret = fi_eq_write(eq, FI_NOTIFY, &in, sizeof(in), 0);
	LT_CHECK_RET(ret, sizeof(in), "EQ %s: fi_eq_write returns the length written", wname);
	in.context = &ctx_b;
	in.data = 43;
	ret = fi_eq_write(eq, FI_NOTIFY, &in, sizeof(in), 0);
	LT_CHECK_RET(ret, sizeof(in), "EQ %s: second fi_eq_write", wname);

	memset(&out, 0, sizeof(out));
	event = 0;
	ret = fi_eq_read(eq, &event, &out, sizeof(out), FI_PEEK);
	LT_CHECK(ret == sizeof(out) && event == FI_NOTIFY && out.context == &ctx_a &&
			 out.data == 42,
		 "EQ %s: FI_PEEK returns the first event (ret %zd)", wname, ret);
	memset(&out, 0, sizeof(out));
	ret = fi_eq_read(eq, &event, &out, sizeof(out), 0);
	LT_CHECK(ret == sizeof(out) && event == FI_NOTIFY && out.context == &ctx_a &&
			 out.data == 42,
		 "EQ %s: read after FI_PEEK returns the same event", wname);
	memset(&out, 0, sizeof(out));
	ret = fi_eq_read(eq, &event, &out, sizeof(out), 0);
	LT_CHECK(ret == sizeof(out) && out.context == &ctx_b && out.data == 43,
		 "EQ %s: events are read in the order written", wname);
	ret = fi_eq_read(eq, &event, &out, sizeof(out), 0);
	LT_CHECK_RET(ret, -FI_EAGAIN, "EQ %s: empty again after reading both", wname);

	t0 = lt_now_ms();
	ret = fi_eq_sread(eq, &event, &out, sizeof(out), 300, 0);
	LT_CHECK_RET(ret, -FI_EAGAIN, "EQ %s: fi_eq_sread on an empty EQ times out", wname);
	LT_CHECK(lt_now_ms() - t0 >= 300 - SLACK_MS,
		 "EQ %s: fi_eq_sread waited at least its 300 ms timeout (%llu ms)", wname,
		 (unsigned long long) (lt_now_ms() - t0));

	writer = (struct eq_writer){.eq = eq, .delay_ms = 200};
	writer.entry.context = &ctx_a;
	writer.entry.data = 7;
	if (pthread_create(&thread, NULL, eq_writer_main, &writer) == 0) {
		t0 = lt_now_ms();
		memset(&out, 0, sizeof(out));
		ret = fi_eq_sread(eq, &event, &out, sizeof(out), 5000, 0);
		LT_CHECK(
			ret == sizeof(out) && out.data == 7 && lt_now_ms() - t0 < 5000,
			"EQ %s: fi_eq_sread wakes for an event written by another thread (ret %zd)",
			wname, ret);
		pthread_join(thread, NULL);
	}

	if (wait_obj == FI_WAIT_FD) {
		int fd = -1;
		struct pollfd pfd;
		struct fid *fids[1] = {&eq->fid};

		ret = fi_control(&eq->fid, FI_GETWAIT, &fd);
		if (LT_CHECK(ret == 0 && fd >= 0, "EQ %s: FI_GETWAIT gives an fd (ret %zd fd %d)",
			     wname, ret, fd)) {
			in.data = 99;
			(void) fi_eq_write(eq, FI_NOTIFY, &in, sizeof(in), 0);
			ret = fi_trywait(dom.fabric, fids, 1);
			pfd = (struct pollfd){.fd = fd, .events = POLLIN};
			LT_CHECK(ret == -FI_EAGAIN || poll(&pfd, 1, 2000) == 1,
				 "EQ %s: with an event queued, trywait says -FI_EAGAIN or the fd "
				 "polls readable",
				 wname);
			ret = fi_eq_read(eq, &event, &out, sizeof(out), 0);
			LT_CHECK(ret == sizeof(out) && out.data == 99,
				 "EQ %s: the event is read after the wait", wname);
		}
	}

	LT_CHECK(fi_eq_strerror(eq, 0, NULL, buf, sizeof(buf)) != NULL,
		 "EQ %s: fi_eq_strerror gives a string", wname);
	ret = fi_close(&eq->fid);
	LT_CHECK_RET(ret, 0, "EQ %s: fi_close", wname);
}

/* ---- completion queues ---- */

static const char *format_name(enum fi_cq_format f)
{
	switch (f) {
	case FI_CQ_FORMAT_CONTEXT:
		return "CONTEXT";
	case FI_CQ_FORMAT_MSG:
		return "MSG";
	case FI_CQ_FORMAT_DATA:
		return "DATA";
	case FI_CQ_FORMAT_TAGGED:
		return "TAGGED";
	default:
		return "?";
	}
}

/* The fields a format carries, checked for a receive completion of a senddata. */
static bool check_rx_entry(enum fi_cq_format f, const void *entry, void *ctx, size_t len,
			   uint64_t data, char *why, size_t whylen)
{
	const struct fi_cq_tagged_entry *t = entry; /* all formats share the prefix */

	if (t->op_context != ctx) {
		snprintf(why, whylen, "op_context %p, want %p", t->op_context, ctx);
		return false;
	}
	if (f == FI_CQ_FORMAT_CONTEXT)
		return true;
	if ((t->flags & (FI_RECV | FI_MSG)) != (FI_RECV | FI_MSG) || t->len != len) {
		snprintf(why, whylen, "flags %#llx len %zu", (unsigned long long) t->flags, t->len);
		return false;
	}
	if (f == FI_CQ_FORMAT_MSG)
		return true;
	if (!(t->flags & FI_REMOTE_CQ_DATA) || t->data != data) {
		snprintf(why, whylen, "flags %#llx data %#llx", (unsigned long long) t->flags,
			 (unsigned long long) t->data);
		return false;
	}
	return true;
}

static void test_cq_format(enum fi_cq_format format, enum fi_wait_obj wait_obj, const char *wname)
{
	struct fi_cq_attr attr = {.format = format, .wait_obj = wait_obj};
	struct fid_cq *txa = NULL, *rxa = NULL, *txb = NULL, *rxb = NULL, *others[2];
	struct fi_cq_tagged_entry entry;
	struct fi_context2 sctx, rctx;
	struct raw_ep a = {0}, b = {0};
	const char *fname = format_name(format);
	char sbuf[100], rbuf[100], why[128] = "context, flags, len, data";
	const uint64_t data = 0xc0de;
	ssize_t ret;

	ret = fi_cq_open(dom.domain, &attr, &txa, NULL);
	if (!ret)
		ret = fi_cq_open(dom.domain, &attr, &rxa, NULL);
	if (!ret)
		ret = fi_cq_open(dom.domain, &attr, &txb, NULL);
	if (!ret)
		ret = fi_cq_open(dom.domain, &attr, &rxb, NULL);
	if (!LT_CHECK_RET(ret, 0, "CQ %s/%s: fi_cq_open", fname, wname))
		goto out;
	if (wait_obj == FI_WAIT_FD) {
		int fd = -1;

		ret = fi_control(&rxb->fid, FI_GETWAIT, &fd);
		LT_CHECK(ret == 0 && fd >= 0, "CQ %s/%s: FI_GETWAIT gives an fd (ret %zd fd %d)",
			 fname, wname, ret, fd);
	}
	ret = raw_ep_open(txa, rxa, &a);
	if (!ret)
		ret = raw_ep_open(txb, rxb, &b);
	if (!ret)
		ret = raw_connect(&a, &b);
	if (!LT_CHECK_RET(ret, 0, "CQ %s/%s: two endpoints bound to such CQs", fname, wname))
		goto out;

	lt_fill(sbuf, sizeof(sbuf), 11);
	memset(rbuf, 0, sizeof(rbuf));
	ret = fi_recv(b.ep, rbuf, sizeof(rbuf), NULL, FI_ADDR_UNSPEC, &rctx);
	if (!LT_CHECK_RET(ret, 0, "CQ %s/%s: fi_recv", fname, wname))
		goto out;
	others[0] = txa;
	others[1] = rxb;
	ret = send_retry(a.ep, sbuf, sizeof(sbuf), NULL, &data, a.peer, &sctx, others, 2);
	if (!LT_CHECK_RET(ret, 0, "CQ %s/%s: fi_senddata", fname, wname))
		goto out;

	others[1] = rxa;
	memset(&entry, 0, sizeof(entry));
	ret = read_one(rxb, wait_obj != FI_WAIT_NONE, &entry, others, 2, LT_TIMEOUT_MS);
	if (LT_CHECK_RET(ret, 1, "CQ %s/%s: the receive completes", fname, wname)) {
		LT_CHECK(check_rx_entry(format, &entry, &rctx, sizeof(sbuf), 0xc0de, why,
					sizeof(why)),
			 "CQ %s/%s: receive entry has the fields of its format: %s", fname, wname,
			 why);
		LT_CHECK(lt_verify(rbuf, sizeof(rbuf), 11) == sizeof(rbuf),
			 "CQ %s/%s: received data intact", fname, wname);
	}
	others[0] = rxb;
	memset(&entry, 0, sizeof(entry));
	ret = read_one(txa, wait_obj != FI_WAIT_NONE, &entry, others, 1, LT_TIMEOUT_MS);
	if (LT_CHECK_RET(ret, 1, "CQ %s/%s: the send completes", fname, wname)) {
		bool ok = entry.op_context == &sctx;

		if (format != FI_CQ_FORMAT_CONTEXT)
			ok &= (entry.flags & (FI_SEND | FI_MSG)) == (FI_SEND | FI_MSG);
		LT_CHECK(ok, "CQ %s/%s: send entry has the context%s", fname, wname,
			 format == FI_CQ_FORMAT_CONTEXT ? "" : " and FI_SEND|FI_MSG");
	}
out:
	raw_ep_close(&a);
	raw_ep_close(&b);
	if (txa)
		fi_close(&txa->fid);
	if (rxa)
		fi_close(&rxa->fid);
	if (txb)
		fi_close(&txb->fid);
	if (rxb)
		fi_close(&rxb->fid);
}

/*
 * The wait fd protocol of fi_cq(3)/fi_eq(3): when fi_trywait says 0, poll() on the fd must
 * report readable once work is pending, so an application sleeping in poll gets its
 * completion. A poll that times out with a message on its way is an application hung forever.
 */
static void test_cq_wait_fd(void)
{
	struct fi_cq_attr fd_attr = {.format = FI_CQ_FORMAT_CONTEXT, .wait_obj = FI_WAIT_FD};
	struct fi_cq_attr none_attr = {.format = FI_CQ_FORMAT_CONTEXT, .wait_obj = FI_WAIT_NONE};
	struct fid_cq *txa = NULL, *rxa = NULL, *txb = NULL, *rxb = NULL;
	struct fi_cq_entry entry;
	struct fi_context2 sctx, rctx;
	struct raw_ep a = {0}, b = {0};
	unsigned polls = 0, poll_timeouts = 0;
	bool sent = false, received = false;
	char sbuf[64] = "wait fd", rbuf[64];
	struct fid *fids[1];
	struct fid_cq *cqs[2];
	uint64_t deadline;
	int fd = -1;
	ssize_t ret;

	ret = fi_cq_open(dom.domain, &none_attr, &txa, NULL);
	if (!ret)
		ret = fi_cq_open(dom.domain, &none_attr, &rxa, NULL);
	if (!ret)
		ret = fi_cq_open(dom.domain, &none_attr, &txb, NULL);
	if (!ret)
		ret = fi_cq_open(dom.domain, &fd_attr, &rxb, NULL);
	if (!ret)
		ret = raw_ep_open(txa, rxa, &a);
	if (!ret)
		ret = raw_ep_open(txb, rxb, &b);
	if (!ret)
		ret = raw_connect(&a, &b);
	if (!LT_CHECK_RET(ret, 0, "wait fd: endpoints with a FI_WAIT_FD receive CQ"))
		goto out;
	ret = fi_control(&rxb->fid, FI_GETWAIT, &fd);
	if (!LT_CHECK(ret == 0 && fd >= 0, "wait fd: FI_GETWAIT gives an fd"))
		goto out;
	fids[0] = &rxb->fid;

	/* A first message, fully delivered, so the connection is up before the real test. */
	cqs[0] = txa;
	cqs[1] = rxb;
	ret = fi_recv(b.ep, rbuf, sizeof(rbuf), NULL, FI_ADDR_UNSPEC, &rctx);
	if (!ret)
		ret = send_retry(a.ep, sbuf, sizeof(sbuf), NULL, NULL, a.peer, &sctx, cqs, 2);
	if (!ret)
		ret = read_one(rxb, true, &entry, cqs, 1, LT_TIMEOUT_MS) == 1 ? 0 : -FI_EIO;
	if (!ret)
		ret = read_one(txa, false, &entry, &cqs[1], 1, LT_TIMEOUT_MS) == 1 ? 0 : -FI_EIO;
	if (!LT_CHECK_RET(ret, 0, "wait fd: a first message goes through"))
		goto out;

	ret = fi_recv(b.ep, rbuf, sizeof(rbuf), NULL, FI_ADDR_UNSPEC, &rctx);
	if (!LT_CHECK_RET(ret, 0, "wait fd: fi_recv"))
		goto out;
	ret = send_retry(a.ep, sbuf, sizeof(sbuf), NULL, NULL, a.peer, &sctx, cqs, 1);
	if (!LT_CHECK_RET(ret, 0, "wait fd: fi_send"))
		goto out;

	/* Let the sender get its bytes out without touching the receiver. */
	deadline = lt_now_ms() + 500;
	while (!sent && lt_now_ms() < deadline) {
		if (fi_cq_read(txa, &entry, 1) == 1)
			sent = true;
	}

	/* The receiver sleeps in poll() the way fi_cq(3) tells applications to. */
	deadline = lt_now_ms() + LT_TIMEOUT_MS;
	while (!received && lt_now_ms() < deadline) {
		ret = fi_trywait(dom.fabric, fids, 1);
		if (ret == 0) {
			struct pollfd pfd = {.fd = fd, .events = POLLIN};

			polls++;
			if (poll(&pfd, 1, 3000) != 1)
				poll_timeouts++;
		} else if (ret != -FI_EAGAIN) {
			break;
		}
		ret = fi_cq_read(rxb, &entry, 1);
		if (ret == 1)
			received = entry.op_context == &rctx;
		else if (ret != -FI_EAGAIN)
			break;
		if (!sent && fi_cq_read(txa, &entry, 1) == 1)
			sent = true;
	}
	LT_CHECK(received,
		 "wait fd: the receive completes through the trywait/poll loop "
		 "(last ret %zd)",
		 ret);
	LT_CHECK(poll_timeouts == 0,
		 "wait fd: poll() reported the fd readable whenever trywait "
		 "allowed sleeping with a message pending (%u of %u polls timed out)",
		 poll_timeouts, polls);

	/* Idle and drained: trywait lets the application sleep, and poll stays quiet. */
	deadline = lt_now_ms() + 2000;
	while (!sent && lt_now_ms() < deadline) {
		(void) fi_cq_read(rxb, &entry, 0);
		if (fi_cq_read(txa, &entry, 1) == 1)
			sent = true;
	}
	LT_CHECK(sent, "wait fd: the send completes");
	deadline = lt_now_ms() + 2000;
	do {
		ret = fi_trywait(dom.fabric, fids, 1);
		if (ret == -FI_EAGAIN)
			(void) fi_cq_read(rxb, &entry, 1);
	} while (ret == -FI_EAGAIN && lt_now_ms() < deadline);
	if (!strcmp(lt_core_name(), "shm"))
		/* libfabric 1.17's shm CQ has no wait object: nothing to sleep on below */
		lt_note("wait fd: over shm fi_trywait never allows sleeping (%d)", (int) ret);
	else
		LT_CHECK_RET(ret, 0, "wait fd: fi_trywait returns 0 on a drained, idle CQ");
out:
	raw_ep_close(&a);
	raw_ep_close(&b);
	if (txa)
		fi_close(&txa->fid);
	if (rxa)
		fi_close(&rxa->fid);
	if (txb)
		fi_close(&txb->fid);
	if (rxb)
		fi_close(&rxb->fid);
}

struct sreader {
	struct fid_cq *cq;
	int timeout_ms;
	ssize_t ret;
	uint64_t elapsed_ms;
	struct fi_cq_entry entry;
};

static void *sreader_main(void *arg)
{
	struct sreader *s = arg;
	uint64_t t0 = lt_now_ms();

	s->ret = fi_cq_sread(s->cq, &s->entry, 1, NULL, s->timeout_ms);
	s->elapsed_ms = lt_now_ms() - t0;
	return NULL;
}

static void test_cq_sread(enum fi_wait_obj wait_obj, const char *wname)
{
	struct fi_cq_attr attr = {.format = FI_CQ_FORMAT_CONTEXT, .wait_obj = wait_obj};
	struct fi_cq_attr none_attr = {.format = FI_CQ_FORMAT_CONTEXT, .wait_obj = FI_WAIT_NONE};
	struct fid_cq *cq = NULL, *txa = NULL, *rxa = NULL, *txb = NULL;
	struct fi_context2 sctx, rctx;
	struct raw_ep a = {0}, b = {0};
	struct fi_cq_entry entry;
	struct sreader s;
	pthread_t thread;
	char buf[32] = "sread";
	uint64_t t0;
	ssize_t ret;

	ret = fi_cq_open(dom.domain, &attr, &cq, NULL);
	if (!LT_CHECK_RET(ret, 0, "sread %s: fi_cq_open", wname))
		return;

	t0 = lt_now_ms();
	ret = fi_cq_sread(cq, &entry, 1, NULL, 300);
	LT_CHECK_RET(ret, -FI_EAGAIN, "sread %s: times out on an empty CQ", wname);
	LT_CHECK(lt_now_ms() - t0 >= 300 - SLACK_MS,
		 "sread %s: waited at least its 300 ms timeout (%llu ms)", wname,
		 (unsigned long long) (lt_now_ms() - t0));

	/* fi_cq_signal wakes a thread blocked in sread. */
	s = (struct sreader){.cq = cq, .timeout_ms = 20000};
	if (pthread_create(&thread, NULL, sreader_main, &s) == 0) {
		lt_sleep_ms(300);
		ret = fi_cq_signal(cq);
		LT_CHECK_RET(ret, 0, "sread %s: fi_cq_signal", wname);
		pthread_join(thread, NULL);
		LT_CHECK(s.ret == -FI_EAGAIN && s.elapsed_ms < 10000,
			 "sread %s: fi_cq_signal wakes the blocked sread with -FI_EAGAIN (ret %zd "
			 "after %llu ms)",
			 wname, s.ret, (unsigned long long) s.elapsed_ms);
	}

	/* A blocked sread drives progress itself and returns the completion. */
	ret = fi_cq_open(dom.domain, &none_attr, &txa, NULL);
	if (!ret)
		ret = fi_cq_open(dom.domain, &none_attr, &rxa, NULL);
	if (!ret)
		ret = fi_cq_open(dom.domain, &none_attr, &txb, NULL);
	if (!ret)
		ret = raw_ep_open(txa, rxa, &a);
	if (!ret)
		ret = raw_ep_open(txb, cq, &b);
	if (!ret)
		ret = raw_connect(&a, &b);
	if (!ret)
		ret = fi_recv(b.ep, buf, sizeof(buf), NULL, FI_ADDR_UNSPEC, &rctx);
	if (!LT_CHECK_RET(ret, 0, "sread %s: endpoint with this CQ for receives", wname))
		goto out;
	s = (struct sreader){.cq = cq, .timeout_ms = LT_TIMEOUT_MS};
	if (pthread_create(&thread, NULL, sreader_main, &s) == 0) {
		uint64_t deadline = lt_now_ms() + LT_TIMEOUT_MS;
		bool sent = false;

		struct fid_cq *cqs[1] = {txa};

		lt_sleep_ms(100);
		ret = send_retry(a.ep, buf, sizeof(buf), NULL, NULL, a.peer, &sctx, cqs, 1);
		LT_CHECK_RET(ret, 0, "sread %s: fi_send to the blocked reader", wname);
		while (!ret && !sent && lt_now_ms() < deadline)
			sent = fi_cq_read(txa, &entry, 1) == 1;
		pthread_join(thread, NULL);
		LT_CHECK(s.ret == 1 && s.entry.op_context == &rctx,
			 "sread %s: a blocked sread returns the receive completion (ret %zd after "
			 "%llu ms)",
			 wname, s.ret, (unsigned long long) s.elapsed_ms);
	}
out:
	raw_ep_close(&a);
	raw_ep_close(&b);
	if (txa)
		fi_close(&txa->fid);
	if (rxa)
		fi_close(&rxa->fid);
	if (txb)
		fi_close(&txb->fid);
	ret = fi_close(&cq->fid);
	LT_CHECK_RET(ret, 0, "sread %s: fi_close", wname);
}

/* ---- counters ---- */

struct cntr_poker {
	struct fid_cntr *cntr;
	bool error;
};

static void *cntr_poker_main(void *arg)
{
	struct cntr_poker *p = arg;

	lt_sleep_ms(200);
	if (p->error)
		(void) fi_cntr_adderr(p->cntr, 1);
	else
		(void) fi_cntr_add(p->cntr, 10);
	return NULL;
}

static void test_cntr(enum fi_wait_obj wait_obj, const char *wname)
{
	struct fi_cntr_attr attr = {.events = FI_CNTR_EVENTS_COMP, .wait_obj = wait_obj};
	struct fid_cntr *cntr = NULL;
	struct cntr_poker poker;
	pthread_t thread;
	uint64_t t0;
	int ret;

	ret = fi_cntr_open(dom.domain, &attr, &cntr, NULL);
	if (!LT_CHECK_RET(ret, 0, "cntr %s: fi_cntr_open", wname))
		return;
	LT_CHECK(fi_cntr_read(cntr) == 0 && fi_cntr_readerr(cntr) == 0,
		 "cntr %s: starts at 0 with 0 errors", wname);
	ret = fi_cntr_add(cntr, 5);
	LT_CHECK(ret == 0 && fi_cntr_read(cntr) == 5, "cntr %s: add 5 reads 5", wname);
	ret = fi_cntr_add(cntr, 3);
	LT_CHECK(ret == 0 && fi_cntr_read(cntr) == 8, "cntr %s: add 3 more reads 8", wname);
	ret = fi_cntr_set(cntr, 2);
	LT_CHECK(ret == 0 && fi_cntr_read(cntr) == 2, "cntr %s: set 2 reads 2", wname);
	ret = fi_cntr_adderr(cntr, 3);
	LT_CHECK(ret == 0 && fi_cntr_readerr(cntr) == 3 && fi_cntr_read(cntr) == 2,
		 "cntr %s: adderr 3 reads 3 errors, value unchanged", wname);
	ret = fi_cntr_seterr(cntr, 1);
	LT_CHECK(ret == 0 && fi_cntr_readerr(cntr) == 1, "cntr %s: seterr 1 reads 1", wname);

	ret = fi_cntr_wait(cntr, 2, 100);
	LT_CHECK_RET(ret, 0, "cntr %s: wait for a threshold already reached", wname);
	t0 = lt_now_ms();
	ret = fi_cntr_wait(cntr, 10, 300);
	LT_CHECK_RET(ret, -FI_ETIMEDOUT, "cntr %s: wait for an unreached threshold times out",
		     wname);
	LT_CHECK(lt_now_ms() - t0 >= 300 - SLACK_MS,
		 "cntr %s: waited at least its 300 ms timeout (%llu ms)", wname,
		 (unsigned long long) (lt_now_ms() - t0));
	LT_CHECK(fi_cntr_readerr(cntr) == 1, "cntr %s: timeout leaves the error value alone",
		 wname);

	poker = (struct cntr_poker){.cntr = cntr};
	if (pthread_create(&thread, NULL, cntr_poker_main, &poker) == 0) {
		t0 = lt_now_ms();
		ret = fi_cntr_wait(cntr, 12, 10000);
		LT_CHECK(ret == 0 && fi_cntr_read(cntr) >= 12 && lt_now_ms() - t0 < 10000,
			 "cntr %s: wait returns when another thread adds past the threshold "
			 "(ret %d)",
			 wname, ret);
		pthread_join(thread, NULL);
	}
	poker = (struct cntr_poker){.cntr = cntr, .error = true};
	if (pthread_create(&thread, NULL, cntr_poker_main, &poker) == 0) {
		t0 = lt_now_ms();
		ret = fi_cntr_wait(cntr, 1000, 10000);
		LT_CHECK(
			ret < 0 && ret != -FI_ETIMEDOUT && lt_now_ms() - t0 < 10000,
			"cntr %s: an error increment unblocks the wait with an error (ret %d after "
			"%llu ms)",
			wname, ret, (unsigned long long) (lt_now_ms() - t0));
		pthread_join(thread, NULL);
	}
	if (wait_obj == FI_WAIT_FD) {
		int fd = -1;

		ret = fi_control(&cntr->fid, FI_GETWAIT, &fd);
		LT_CHECK(ret == 0 && fd >= 0, "cntr %s: FI_GETWAIT gives an fd (ret %d fd %d)",
			 wname, ret, fd);
	}
	ret = fi_close(&cntr->fid);
	LT_CHECK_RET(ret, 0, "cntr %s: fi_close", wname);
}

/* ---- memory registration ---- */

static void test_mr(void)
{
	struct fi_cq_attr attr = {.format = FI_CQ_FORMAT_CONTEXT, .wait_obj = FI_WAIT_NONE};
	struct fid_cq *txa = NULL, *rxa = NULL, *txb = NULL, *rxb = NULL, *others[2];
	struct fid_mr *smr = NULL, *rmr = NULL, *vmr = NULL;
	struct fi_context2 sctx, rctx;
	struct raw_ep a = {0}, b = {0};
	struct fi_cq_entry entry;
	char *sbuf = calloc(1, 65536), *rbuf = calloc(1, 65536);
	struct iovec iov;
	ssize_t ret;

	if (!sbuf || !rbuf)
		goto out;
	ret = fi_mr_reg(dom.domain, sbuf, 65536, FI_SEND, 0, 0, 0, &smr, NULL);
	LT_CHECK_RET(ret, 0, "MR: fi_mr_reg of a send buffer");
	ret = fi_mr_reg(dom.domain, rbuf, 65536, FI_RECV, 0, 1, 0, &rmr, NULL);
	LT_CHECK_RET(ret, 0, "MR: fi_mr_reg of a receive buffer");
	iov = (struct iovec){.iov_base = sbuf, .iov_len = 4096};
	ret = fi_mr_regv(dom.domain, &iov, 1, FI_SEND | FI_RECV, 0, 2, 0, &vmr, NULL);
	LT_CHECK_RET(ret, 0, "MR: fi_mr_regv with one iov");
	if (!smr || !rmr)
		goto out;

	/* A registered buffer's descriptor is accepted on the data path. */
	ret = fi_cq_open(dom.domain, &attr, &txa, NULL);
	if (!ret)
		ret = fi_cq_open(dom.domain, &attr, &rxa, NULL);
	if (!ret)
		ret = fi_cq_open(dom.domain, &attr, &txb, NULL);
	if (!ret)
		ret = fi_cq_open(dom.domain, &attr, &rxb, NULL);
	if (!ret)
		ret = raw_ep_open(txa, rxa, &a);
	if (!ret)
		ret = raw_ep_open(txb, rxb, &b);
	if (!ret)
		ret = raw_connect(&a, &b);
	if (!LT_CHECK_RET(ret, 0, "MR: endpoints for a transfer with descriptors"))
		goto out;
	lt_fill(sbuf, 65536, 5);
	others[0] = txa;
	others[1] = rxb;
	ret = fi_recv(b.ep, rbuf, 65536, fi_mr_desc(rmr), FI_ADDR_UNSPEC, &rctx);
	if (!ret)
		ret = send_retry(a.ep, sbuf, 65536, fi_mr_desc(smr), NULL, a.peer, &sctx, others,
				 2);
	if (!LT_CHECK_RET(ret, 0, "MR: fi_recv and fi_send with fi_mr_desc descriptors"))
		goto out;
	others[0] = txa;
	others[1] = rxa;
	ret = read_one(rxb, false, &entry, others, 2, LT_TIMEOUT_MS);
	LT_CHECK(ret == 1 && entry.op_context == &rctx && lt_verify(rbuf, 65536, 5) == 65536,
		 "MR: 64 KiB arrives intact through registered buffers (ret %zd)", ret);
	others[0] = rxb;
	ret = read_one(txa, false, &entry, others, 1, LT_TIMEOUT_MS);
	LT_CHECK(ret == 1 && entry.op_context == &sctx, "MR: the send completes (ret %zd)", ret);
out:
	raw_ep_close(&a);
	raw_ep_close(&b);
	if (txa)
		fi_close(&txa->fid);
	if (rxa)
		fi_close(&rxa->fid);
	if (txb)
		fi_close(&txb->fid);
	if (rxb)
		fi_close(&rxb->fid);
	if (smr)
		LT_CHECK_RET(fi_close(&smr->fid), 0, "MR: fi_close of the send MR");
	if (rmr)
		LT_CHECK_RET(fi_close(&rmr->fid), 0, "MR: fi_close of the receive MR");
	if (vmr)
		LT_CHECK_RET(fi_close(&vmr->fid), 0, "MR: fi_close of the regv MR");
	free(sbuf);
	free(rbuf);
}

/* ---- closing objects still in use ---- */

enum busy_object { BUSY_CQ, BUSY_CNTR, BUSY_AV, BUSY_EQ, BUSY_DOMAIN, BUSY_FABRIC, BUSY_COUNT };

static const char *const busy_names[BUSY_COUNT] = {
	[BUSY_CQ] = "busy CQ", [BUSY_CNTR] = "busy counter",  [BUSY_AV] = "busy AV",
	[BUSY_EQ] = "busy EQ", [BUSY_DOMAIN] = "busy domain", [BUSY_FABRIC] = "busy fabric",
};

struct busy_arg {
	struct fi_info *info;
	enum busy_object which;
};

/*
 * Closing one object still in use (which) is refused, and the refusal leaves it working: a
 * transfer goes through it afterwards, and closing everything in order then succeeds.
 */
static void test_busy(void *arg)
{
	struct busy_arg *ba = arg;
	struct fi_info *info = ba->info;
	const char *name = busy_names[ba->which];
	struct fi_cq_attr cq_attr = {.format = FI_CQ_FORMAT_CONTEXT, .wait_obj = FI_WAIT_NONE};
	struct fi_cntr_attr cntr_attr = {.events = FI_CNTR_EVENTS_COMP, .wait_obj = FI_WAIT_NONE};
	struct fi_eq_attr eq_attr = {.wait_obj = FI_WAIT_NONE};
	struct fid_cq *txa = NULL, *rxa = NULL, *txb = NULL, *rxb = NULL, *others[2];
	struct fi_av_attr av_attr = {.type = FI_AV_TABLE};
	struct fid_fabric *fabric = NULL;
	struct fid_domain *domain = NULL;
	struct fid_cntr *cntr = NULL;
	struct fid_eq *eq = NULL;
	struct fi_context2 sctx, rctx;
	struct raw_ep a = {0}, b = {0};
	struct fi_cq_entry entry;
	char buf[32] = "still works";
	struct lt_dom saved = dom;
	ssize_t ret;

	/* A fabric and domain of their own, so that closing them is part of the test. */
	ret = fi_fabric(info->fabric_attr, &fabric, NULL);
	if (!ret)
		ret = fi_domain(fabric, info, &domain, NULL);
	if (!LT_CHECK_RET(ret, 0, "%s: fabric and domain", name))
		goto out;
	dom.fabric = fabric;
	dom.domain = domain;
	ret = fi_cq_open(domain, &cq_attr, &txa, NULL);
	if (!ret)
		ret = fi_cq_open(domain, &cq_attr, &rxa, NULL);
	if (!ret)
		ret = fi_cq_open(domain, &cq_attr, &txb, NULL);
	if (!ret)
		ret = fi_cq_open(domain, &cq_attr, &rxb, NULL);
	if (!ret)
		ret = fi_cntr_open(domain, &cntr_attr, &cntr, NULL);
	if (!ret)
		ret = fi_eq_open(fabric, &eq_attr, &eq, NULL);
	if (!ret)
		ret = fi_av_open(domain, &av_attr, &a.av, NULL);
	if (!ret)
		ret = fi_endpoint(domain, info, &a.ep, NULL);
	if (!ret)
		ret = fi_ep_bind(a.ep, &a.av->fid, 0);
	if (!ret)
		ret = fi_ep_bind(a.ep, &txa->fid, FI_TRANSMIT);
	if (!ret)
		ret = fi_ep_bind(a.ep, &rxa->fid, FI_RECV);
	if (!ret)
		ret = fi_ep_bind(a.ep, &cntr->fid, FI_SEND);
	if (!LT_CHECK_RET(ret, 0, "%s: endpoint with AV, CQs and a counter bound", name))
		goto out;
	ret = fi_ep_bind(a.ep, &eq->fid, 0);
	LT_CHECK_RET(ret, 0, "%s: an EQ binds to the endpoint", name);
	if (ret) {
		fi_close(&eq->fid);
		eq = NULL;
	}
	ret = fi_enable(a.ep);
	if (!ret) {
		size_t len = sizeof(a.addr);

		ret = fi_getname(&a.ep->fid, a.addr, &len);
	}
	if (!ret)
		ret = raw_ep_open(txb, rxb, &b);
	if (!ret)
		ret = raw_connect(&a, &b);
	if (!LT_CHECK_RET(ret, 0, "%s: endpoints enabled", name))
		goto out;

	switch (ba->which) {
	case BUSY_CQ:
		LT_CHECK_RET(fi_close(&txa->fid), -FI_EBUSY,
			     "%s: closing a CQ bound to an endpoint", name);
		break;
	case BUSY_CNTR:
		LT_CHECK_RET(fi_close(&cntr->fid), -FI_EBUSY,
			     "%s: closing a counter bound to an endpoint", name);
		break;
	case BUSY_AV:
		LT_CHECK_RET(fi_close(&a.av->fid), -FI_EBUSY,
			     "%s: closing an AV bound to an endpoint", name);
		break;
	case BUSY_EQ:
		if (eq)
			LT_CHECK_RET(fi_close(&eq->fid), -FI_EBUSY,
				     "%s: closing an EQ bound to an endpoint", name);
		break;
	case BUSY_DOMAIN:
		LT_CHECK_RET(fi_close(&domain->fid), -FI_EBUSY,
			     "%s: closing a domain with objects open", name);
		break;
	default:
		/* fi_fabric(3) only says everything must be closed first: refused, somehow. */
		ret = fi_close(&fabric->fid);
		LT_CHECK(ret < 0, "%s: closing a fabric with a domain open fails (ret %zd)", name,
			 ret);
		break;
	}

	/* The refused closes left everything working. */
	others[0] = txa;
	others[1] = rxb;
	ret = fi_recv(b.ep, buf, sizeof(buf), NULL, FI_ADDR_UNSPEC, &rctx);
	if (!ret)
		ret = send_retry(a.ep, buf, sizeof(buf), NULL, NULL, a.peer, &sctx, others, 2);
	if (LT_CHECK_RET(ret, 0, "%s: send and receive after the refused close", name)) {
		uint64_t deadline = lt_now_ms() + LT_TIMEOUT_MS;

		others[0] = rxa;
		others[1] = rxb;
		ret = read_one(txa, false, &entry, others, 2, LT_TIMEOUT_MS);
		LT_CHECK(ret == 1 && entry.op_context == &sctx,
			 "%s: the send completes afterwards (ret %zd)", name, ret);
		others[0] = txa;
		ret = read_one(rxb, false, &entry, others, 1, LT_TIMEOUT_MS);
		LT_CHECK(ret == 1 && entry.op_context == &rctx, "%s: the receive completes", name);
		while (fi_cntr_read(cntr) < 1 && lt_now_ms() < deadline)
			(void) fi_cq_read(txa, &entry, 0);
		LT_CHECK(fi_cntr_read(cntr) == 1, "%s: the counter counted the send", name);
	}

	/* In the right order, every close succeeds. */
	LT_CHECK_RET(fi_close(&a.ep->fid), 0, "%s: close the endpoint", name);
	a.ep = NULL;
	LT_CHECK_RET(fi_close(&a.av->fid), 0, "%s: close its AV after it", name);
	a.av = NULL;
	LT_CHECK_RET(fi_close(&txa->fid), 0, "%s: close its CQ after it", name);
	txa = NULL;
	LT_CHECK_RET(fi_close(&cntr->fid), 0, "%s: close its counter after it", name);
	cntr = NULL;
	if (eq)
		LT_CHECK_RET(fi_close(&eq->fid), 0, "%s: close its EQ after it", name);
	eq = NULL;
out:
	raw_ep_close(&a);
	raw_ep_close(&b);
	if (txa)
		fi_close(&txa->fid);
	if (rxa)
		fi_close(&rxa->fid);
	if (txb)
		fi_close(&txb->fid);
	if (rxb)
		fi_close(&rxb->fid);
	if (cntr)
		fi_close(&cntr->fid);
	if (eq)
		fi_close(&eq->fid);
	if (domain)
		LT_CHECK_RET(fi_close(&domain->fid), 0, "%s: close the domain when it is empty",
			     name);
	if (fabric)
		LT_CHECK_RET(fi_close(&fabric->fid), 0, "%s: close the fabric when it is empty",
			     name);
	dom = saved;
}

int main(int argc, char **argv)
{
	static const enum fi_cq_format formats[] = {
		FI_CQ_FORMAT_CONTEXT,
		FI_CQ_FORMAT_MSG,
		FI_CQ_FORMAT_DATA,
		FI_CQ_FORMAT_TAGGED,
	};
	struct fi_info *hints, *info;
	int ret;

	(void) argc;
	lt_begin(argv[0]);
	hints = lt_hints(FI_MSG);
	/* Threads touch different endpoints of one domain at once. */
	hints->domain_attr->threading = FI_THREAD_SAFE;
	info = lt_getinfo_or_skip(hints);
	ret = lt_dom_open(info, &dom);
	if (!LT_CHECK_RET(ret, 0, "fi_fabric and fi_domain"))
		return lt_end();

	test_eq(FI_WAIT_UNSPEC, "WAIT_UNSPEC");
	test_eq(FI_WAIT_FD, "WAIT_FD");
	for (size_t i = 0; i < sizeof(formats) / sizeof(formats[0]); i++) {
		test_cq_format(formats[i], FI_WAIT_FD, "WAIT_FD");
		test_cq_format(formats[i], FI_WAIT_UNSPEC, "WAIT_UNSPEC");
	}
	test_cq_format(FI_CQ_FORMAT_TAGGED, FI_WAIT_NONE, "WAIT_NONE");
	test_cq_wait_fd();
	test_cq_sread(FI_WAIT_FD, "WAIT_FD");
	test_cq_sread(FI_WAIT_UNSPEC, "WAIT_UNSPEC");
	test_cntr(FI_WAIT_UNSPEC, "WAIT_UNSPEC");
	test_cntr(FI_WAIT_FD, "WAIT_FD");
	test_mr();
	/* A provider that frees an object it refused to close would take the program down. */
	for (int which = 0; which < BUSY_COUNT; which++) {
		struct busy_arg ba = {.info = info, .which = which};

		lt_isolated(busy_names[which], test_busy, &ba, 30000);
	}

	lt_dom_close(&dom);
	fi_freeinfo(info);
	fi_freeinfo(hints);
	return lt_end();
}
