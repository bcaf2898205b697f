/*
 * FI_PROGRESS_AUTO: a target that stops calling libfabric once set up still serves its peers,
 * through its domain's progress thread.
 *
 * Another process: a child opens a domain with automatic data progress, registers a region
 * (key 7), posts receives, says its address and stops calling libfabric: it computes in a
 * busy loop (role "busy") or sleeps in poll(2) on its pipe (role "sleep"). Meanwhile the
 * parent, with manual progress, runs against it
 * - 8-byte fetch atomics: each fetches the sum of those before it;
 * - writes of 64 KiB and 4 MiB, each read back;
 * - messages of 64 B, 1 MiB and 4 MiB, the large ones above every eager size: the child's
 *   side must fetch them (rendezvous) before the sends complete.
 * Then the child, told to look, finds the messages in its buffers. Last, it closes
 * everything at once while the parent's sends still arrive: each of those completes, with or
 * without an error (over cores that do not report a lost peer, once the peer timeout, set to
 * 2 s here, has passed), and the child ends well.
 *
 * In one process (what valgrind can follow): fi_getinfo offers FI_PROGRESS_AUTO when asked;
 * an endpoint of an automatic-progress domain that the program never progresses serves
 * another's atomics, reads and rendezvous; domains with a thread opened, used and closed
 * again and again, under FI_THREAD_DOMAIN too (the thread makes every object lock).
 */
#include "common.h"

#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <rdma/fi_atomic.h>
#include <rdma/fi_rma.h>

#define KEY 7
#define ATOMICS 100
#define OFF_RMA 4096
#define REGION (OFF_RMA + (4 << 20))
#define MSGS 3
#define CLOSING_SENDS 32
#define CLOSING_SIZE 65536

static const size_t rma_sizes[] = { 65536, 4 << 20 };
static const size_t msg_sizes[MSGS] = { 64, 1 << 20, 4 << 20 };

static struct fi_info *hints;

/* Hints of the provider under test for RMA, atomics and messages; auto: data progress. */
static struct fi_info *progress_hints(bool is_auto)
{
	struct fi_info *h = lt_hints(FI_MSG | FI_RMA | FI_ATOMIC);

	h->domain_attr->data_progress = is_auto ? FI_PROGRESS_AUTO : FI_PROGRESS_MANUAL;
	return h;
}

/* Waits for one completion on ep's transmit CQ: 0, its error (positive), or -1 on timeout. */
static int wait_tx(struct lt_ep *ep, void *ctx)
{
	struct lt_comp comp;

	if (!lt_cq_next(&ep->tx, &comp, LT_TIMEOUT_MS))
		return -1;
	return comp.op_context == ctx ? comp.err : -2;
}

/* ---- what a served target must do, whoever the target is ---- */

/* The target's side: a region under KEY and MSGS receives posted, buffers its own. */
struct target {
	struct lt_ep ep;
	struct fid_mr *mr;
	char *region;
	char *rbuf[MSGS];
	struct fi_context2 rctx[MSGS];
};

static int target_open(struct lt_dom *dom, struct target *t)
{
	int ret, i;

	t->region = calloc(1, REGION);
	if (!t->region)
		return -FI_ENOMEM;
	ret = lt_ep_open(dom, NULL, &t->ep);
	if (!ret)
		ret = fi_mr_reg(dom->domain, t->region, REGION, FI_REMOTE_READ | FI_REMOTE_WRITE,
				0, KEY, 0, &t->mr, NULL);
	for (i = 0; !ret && i < MSGS; i++) {
		t->rbuf[i] = malloc(msg_sizes[i]);
		ret = t->rbuf[i] ? fi_recv(t->ep.ep, t->rbuf[i], msg_sizes[i], NULL,
					   FI_ADDR_UNSPEC, &t->rctx[i]) : -FI_ENOMEM;
	}
	return ret;
}

static void target_close(struct target *t)
{
	if (t->mr)
		fi_close(&t->mr->fid);
	lt_ep_close(&t->ep);
	for (int i = 0; i < MSGS; i++)
		free(t->rbuf[i]);
	free(t->region);
}

/* The target's check once it calls again: the messages arrived whole, in order. */
static int target_received(struct target *t)
{
	struct lt_comp comp;
	int good = 0;

	for (int i = 0; i < MSGS; i++) {
		if (!lt_cq_next(&t->ep.rx, &comp, LT_TIMEOUT_MS))
			break;
		good += !comp.err && comp.op_context == &t->rctx[i] &&
			comp.len == msg_sizes[i] &&
			lt_verify(t->rbuf[i], msg_sizes[i], 30 + i) == msg_sizes[i];
	}
	return good;
}

/* The initiator's side against a target that does not call: everything checked. */
static void serve_checks(const char *who, struct lt_ep *x, fi_addr_t peer)
{
	static char buf[4 << 20];
	uint64_t one = 1, fetched;
	int i, bad = 0;

	for (i = 0; i < ATOMICS && !bad; i++) {
		fetched = ~0ULL;
		bad = LT_RETRY(fi_fetch_atomic(x->ep, &one, 1, NULL, &fetched, NULL, peer, 0, KEY,
					       FI_UINT64, FI_SUM, &fetched)) ||
		      wait_tx(x, &fetched) || fetched != (uint64_t) i;
	}
	LT_CHECK(!bad, "%s: %d 8-byte fetch atomics, each fetching the sum before it (%d: %llu)",
		 who, ATOMICS, i - 1, (unsigned long long) fetched);
	for (size_t k = 0; k < sizeof(rma_sizes) / sizeof(rma_sizes[0]); k++) {
		size_t len = rma_sizes[k];

		lt_fill(buf, len, 20 + k);
		LT_CHECK(!LT_RETRY(fi_write(x->ep, buf, len, NULL, peer, OFF_RMA, KEY, buf)) &&
			 !wait_tx(x, buf), "%s: a write of %zu bytes completes", who, len);
		memset(buf, 0, len);
		LT_CHECK(!LT_RETRY(fi_read(x->ep, buf, len, NULL, peer, OFF_RMA, KEY, buf)) &&
			 !wait_tx(x, buf) && lt_verify(buf, len, 20 + k) == len,
			 "%s: a read of %zu bytes brings the written data back", who, len);
	}
	for (i = 0; i < MSGS; i++) {
		lt_fill(buf, msg_sizes[i], 30 + i);
		LT_CHECK(!LT_RETRY(fi_send(x->ep, buf, msg_sizes[i], NULL, peer, buf)) &&
			 !wait_tx(x, buf), "%s: a message of %zu bytes is taken", who,
			 msg_sizes[i]);
	}
}

/* ---- another process ---- */

/* Until the pipe has something: computing, or asleep in poll(2). No libfabric call. */
static void stay_away(const char *role, int rfd)
{
	struct pollfd pfd = { .fd = rfd, .events = POLLIN };
	volatile uint64_t work = 0;

	if (!strcmp(role, "sleep")) {
		(void) poll(&pfd, 1, -1);
		return;
	}
	while (poll(&pfd, 1, 0) == 0) {
		for (int i = 0; i < (1 << 20); i++)
			work = work + 1;
	}
}

static int child_main(const char *role, int rfd, int wfd)
{
	struct fi_info *info = lt_getinfo_or_skip(hints);
	struct target t = { 0 };
	struct lt_dom dom;
	int good;
	char cmd;

	if (lt_dom_open(info, &dom) || target_open(&dom, &t) ||
	    lt_pipe_send(wfd, t.ep.addr, t.ep.addrlen))
		return 1;
	stay_away(role, rfd);
	if (lt_pipe_recv(rfd, &cmd, 1, LT_TIMEOUT_MS) != 1 || cmd != 'v')
		return 2;
	good = target_received(&t);
	if (lt_pipe_send(wfd, &good, sizeof(good)))
		return 3;
	stay_away(role, rfd);
	if (lt_pipe_recv(rfd, &cmd, 1, LT_TIMEOUT_MS) != 1 || cmd != 'c')
		return 4;
	/* everything at once, the parent's sends arriving */
	target_close(&t);
	lt_dom_close(&dom);
	fi_freeinfo(info);
	return 0;
}

static void check_process(const char *role)
{
	static char sbuf[CLOSING_SENDS][CLOSING_SIZE];
	struct fi_info *info = lt_getinfo_or_skip(hints);
	char addr[LT_ADDR_MAX], cmd;
	struct lt_child child;
	struct lt_dom dom;
	struct lt_ep x;
	fi_addr_t peer;
	int good = -1, posted = 0, done = 0;
	char who[32];

	snprintf(who, sizeof(who), "a %s target", role);
	if (!LT_CHECK_RET(lt_dom_open(info, &dom), 0, "%s: the initiator's domain", who) ||
	    !LT_CHECK_RET(lt_ep_open(&dom, NULL, &x), 0, "%s: the initiator's endpoint", who))
		goto out_info;
	if (!LT_CHECK_RET(lt_child_spawn(role, &child), 0, "%s: started", who))
		goto out_ep;
	if (!LT_CHECK(lt_pipe_recv(child.from_child, addr, sizeof(addr), LT_TIMEOUT_MS) > 0 &&
		      !lt_av_insert(&x, addr, &peer), "%s: its address", who))
		goto out_child;
	serve_checks(who, &x, peer);
	cmd = 'v';
	if (!lt_pipe_send(child.to_child, &cmd, 1))
		(void) lt_pipe_recv(child.from_child, &good, sizeof(good), LT_TIMEOUT_MS);
	LT_CHECK_RET(good, MSGS, "%s: finds the %d messages in its buffers", who, MSGS);

	/* it closes while sends keep coming: each completes, well or not */
	cmd = 'c';
	if (lt_pipe_send(child.to_child, &cmd, 1))
		goto out_child;
	for (int i = 0; i < CLOSING_SENDS; i++) {
		if (LT_RETRY(fi_send(x.ep, sbuf[i], CLOSING_SIZE, NULL, peer, sbuf[i])))
			break;
		posted++;
	}
	for (; done < posted; done++) {
		struct lt_comp comp;

		if (!lt_cq_next(&x.tx, &comp, LT_TIMEOUT_MS))
			break;
	}
	LT_CHECK(posted > 0 && done == posted, "%s: closing while sends arrive, the %d sends "
		 "posted complete (%d did)", who, posted, done);
out_child:
	LT_CHECK_RET(lt_child_reap(&child, LT_TIMEOUT_MS, false), 0, "%s: ends well", who);
out_ep:
	lt_ep_close(&x);
	lt_dom_close(&dom);
out_info:
	fi_freeinfo(info);
}

/* ---- one process ---- */

static void check_getinfo(void)
{
	struct fi_info *h = progress_hints(true), *info = NULL;

	if (LT_CHECK_RET(lt_getinfo(h, &info), 0, "fi_getinfo with FI_PROGRESS_AUTO"))
		LT_CHECK(info->domain_attr->data_progress == FI_PROGRESS_AUTO,
			 "offers FI_PROGRESS_AUTO");
	fi_freeinfo(info);
	h->domain_attr->data_progress = FI_PROGRESS_MANUAL;
	h->domain_attr->control_progress = FI_PROGRESS_AUTO;
	info = NULL;
	if (LT_CHECK_RET(lt_getinfo(h, &info), 0, "fi_getinfo with automatic control progress"))
		LT_CHECK(info->domain_attr->control_progress == FI_PROGRESS_AUTO &&
			 info->domain_attr->data_progress == FI_PROGRESS_MANUAL,
			 "offers each model as asked");
	fi_freeinfo(info);
	fi_freeinfo(h);
}

/* x (manual) against t (automatic), in one process that never progresses t. */
static void check_in_process(void)
{
	struct fi_info *manual_info = NULL, *h = progress_hints(false);
	struct fi_info *auto_info = lt_getinfo_or_skip(hints);
	struct lt_dom xdom, tdom = { 0 };
	struct target t = { 0 };
	struct lt_ep x;
	fi_addr_t peer;

	if (!LT_CHECK_RET(lt_getinfo(h, &manual_info), 0, "manual progress for the initiator") ||
	    !LT_CHECK_RET(lt_dom_open(manual_info, &xdom), 0, "its domain"))
		goto out_info;
	if (LT_CHECK_RET(lt_ep_open(&xdom, NULL, &x), 0, "its endpoint")) {
		if (LT_CHECK_RET(lt_dom_open(auto_info, &tdom), 0,
				 "a domain with automatic progress") &&
		    LT_CHECK_RET(target_open(&tdom, &t), 0, "its endpoint, region and receives") &&
		    LT_CHECK_RET(lt_av_insert(&x, t.ep.addr, &peer), 0, "the initiator knows it")) {
			/* the initiator's waits progress only its own CQs */
			lt_cq_watch(&t.ep.tx, false);
			lt_cq_watch(&t.ep.rx, false);
			serve_checks("an endpoint never progressed", &x, peer);
			lt_cq_watch(&t.ep.tx, true);
			lt_cq_watch(&t.ep.rx, true);
			LT_CHECK_RET(target_received(&t), MSGS, "which then finds the messages");
		}
		target_close(&t);
		lt_dom_close(&tdom);
		lt_ep_close(&x);
	}
	lt_dom_close(&xdom);
out_info:
	fi_freeinfo(auto_info);
	fi_freeinfo(manual_info);
	fi_freeinfo(h);
}

/* Threads started and stopped with their domains, endpoints with traffic between. */
static void check_open_close(void)
{
	struct fi_info *info = lt_getinfo_or_skip(hints);
	int round, bad = 0;

	for (round = 0; round < 20 && !bad; round++) {
		struct lt_ep x, y;
		struct lt_dom dom;
		fi_addr_t x_to_y, y_to_x;
		char msg[16] = "ping", got[16] = "";

		info->domain_attr->threading = round % 2 ? FI_THREAD_DOMAIN : FI_THREAD_SAFE;
		bad = lt_dom_open(info, &dom) ? 1 : 0;
		if (bad)
			break;
		if (round % 4 == 3) {
			lt_dom_close(&dom); /* a thread that never had an endpoint */
			continue;
		}
		bad = lt_pair_open(&dom, NULL, NULL, &x, &y, &x_to_y, &y_to_x) ? 2 : 0;
		if (!bad) {
			bad = lt_recv(&y, got, sizeof(got), FI_ADDR_UNSPEC, got) ||
			      lt_send(&x, msg, sizeof(msg), x_to_y, msg) ||
			      lt_cq_wait(&y.rx, 1, LT_TIMEOUT_MS) || strcmp(got, msg) ? 3 : 0;
			lt_ep_close(&x);
			lt_ep_close(&y);
		}
		lt_dom_close(&dom);
	}
	LT_CHECK(!bad, "domains with a progress thread opened, used and closed 20 times, "
		 "FI_THREAD_DOMAIN every other (round %d: step %d)", round, bad);
	fi_freeinfo(info);
}

int main(int argc, char **argv)
{
	const char *role;
	int rfd, wfd;

	/* the sends to a target that closed fail once it is found lost: soon (fi_layer(7)) */
	setenv("FI_OFI_LAYER_PEER_TIMEOUT", "2000", 0);
	hints = progress_hints(true);
	role = lt_child_role(argc, argv, &rfd, &wfd);
	if (role) {
		int ret = child_main(role, rfd, wfd);

		fi_freeinfo(hints);
		return ret;
	}
	lt_begin("progress_auto");
	fi_freeinfo(lt_getinfo_or_skip(hints));
	check_getinfo();
	check_in_process();
	check_open_close();
	check_process("busy");
	check_process("sleep");
	fi_freeinfo(hints);
	return lt_end();
}
