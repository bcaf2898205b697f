/*
 * Two processes ping-pong small messages, each waiting for the other's in fi_cq_sread on a CQ
 * with a wait object: whatever carries the messages (over tcp, rings: RMA writes that make no
 * completion, which the core may take in while the endpoint decides whether to sleep), no
 * waiter sleeps through one. Each wait is bounded: a lost wake-up fails, never hangs.
 */
#include "common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ROUNDS 3000
#define WAIT_MS 10000

static struct fi_info *hints;

static int open_side(struct fi_info **info, struct lt_dom *dom, struct lt_ep *ep)
{
	struct lt_ep_opts opts = {.wait_obj = FI_WAIT_FD};
	int ret;

	*info = NULL;
	ret = lt_getinfo(hints, info);
	if (!ret)
		ret = lt_dom_open(*info, dom);
	if (!ret)
		ret = lt_ep_open(dom, &opts, ep);
	return ret;
}

/*
 * rounds round trips with the peer, the one that starts sending first: how many completed.
 * Every message is 8 bytes (its round's number), sent as an inject, received in sread.
 */
static unsigned ping_pong(struct lt_ep *ep, fi_addr_t peer, bool starts, unsigned *wrong)
{
	struct fi_cq_tagged_entry comp;
	struct fi_context2 rctx;
	uint64_t out, in;
	unsigned i;
	ssize_t ret;

	for (i = 0; i < ROUNDS; i++) {
		if (fi_recv(ep->ep, &in, sizeof(in), NULL, peer, &rctx))
			break;
		out = i;
		if (starts && LT_RETRY(fi_inject(ep->ep, &out, sizeof(out), peer)))
			break;
		ret = fi_cq_sread(ep->rx.cq, &comp, 1, NULL, WAIT_MS);
		if (ret != 1 || comp.op_context != &rctx)
			break;
		*wrong += in != i;
		if (!starts && LT_RETRY(fi_inject(ep->ep, &out, sizeof(out), peer)))
			break;
	}
	return i;
}

static int child_main(int rfd, int wfd)
{
	char addr[LT_ADDR_MAX];
	struct fi_info *info;
	struct lt_dom dom;
	struct lt_ep ep;
	fi_addr_t parent;
	unsigned wrong = 0, done;
	ssize_t n;

	if (open_side(&info, &dom, &ep) || lt_pipe_send(wfd, ep.addr, ep.addrlen))
		return 2;
	n = lt_pipe_recv(rfd, addr, sizeof(addr), LT_TIMEOUT_MS);
	if (n <= 0 || lt_av_insert(&ep, addr, &parent))
		return 2;
	done = ping_pong(&ep, parent, false, &wrong);
	lt_ep_close(&ep);
	lt_dom_close(&dom);
	fi_freeinfo(info);
	return done == ROUNDS && !wrong ? 0 : 3;
}

int main(int argc, char **argv)
{
	struct lt_child child = {.to_child = -1, .from_child = -1};
	char addr[LT_ADDR_MAX];
	struct fi_info *info;
	struct lt_dom dom;
	struct lt_ep ep;
	fi_addr_t peer;
	unsigned wrong = 0, done;
	const char *role;
	int rfd, wfd, status;
	ssize_t n;

	hints = lt_hints(FI_MSG);
	role = lt_child_role(argc, argv, &rfd, &wfd);
	if (role)
		return child_main(rfd, wfd);

	lt_begin(argv[0]);
	info = lt_getinfo_or_skip(hints);
	fi_freeinfo(info);
	if (!LT_CHECK_RET(open_side(&info, &dom, &ep), 0, "an endpoint whose CQs wait on an fd"))
		goto out;
	if (!LT_CHECK_RET(lt_child_spawn("echo", &child), 0, "child started"))
		goto out_close;
	n = lt_pipe_recv(child.from_child, addr, sizeof(addr), LT_TIMEOUT_MS);
	done = 0;
	if (LT_CHECK(n > 0 && !lt_pipe_send(child.to_child, ep.addr, ep.addrlen) &&
		     !lt_av_insert(&ep, addr, &peer), "addresses swapped over a pipe")) {
		done = ping_pong(&ep, peer, true, &wrong);
		LT_CHECK(done == ROUNDS && !wrong, "%u round trips of 8 bytes, each end waiting in "
			 "fi_cq_sread (%u, %u wrong)", ROUNDS, done, wrong);
	}
	status = lt_child_reap(&child, LT_TIMEOUT_MS, done != ROUNDS);
	LT_CHECK(status != -1 && WIFEXITED(status) && WEXITSTATUS(status) == 0,
		 "the child's round trips too (status %#x)", status);
out_close:
	lt_ep_close(&ep);
	lt_dom_close(&dom);
out:
	fi_freeinfo(info);
	fi_freeinfo(hints);
	return lt_end();
}
