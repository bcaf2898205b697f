/*
 * A peer that goes away: a child process sends an eager and a rendezvous-size message that
 * the parent has not posted receives for, then dies without closing anything. The parent
 * must still receive the eager message (it arrived whole), must never complete the
 * rendezvous one with data it cannot have (its sender is gone), must fail a send to the
 * dead address with an error completion instead of hanging, and must work with a new peer.
 *
 * Over a reliable-datagram or datagram core, which reports no loss of a peer, the layer's
 * liveness finds it (FI_OFI_LAYER_PEER_TIMEOUT, shortened here): the rendezvous receive then
 * fails with the sender gone instead of waiting to be canceled.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <poll.h>

#include "tests/functional/common.h"

#define EAGER_LEN 100
#define RNDV_LEN (1 << 20)

/*
 * Reads one pipe message while progressing the endpoints: with manual progress the peer's
 * connection is only accepted while this process progresses. The pipe is polled, not read,
 * until data is there, so that a read never stops between a message's length and its body.
 */
static ssize_t recv_progressing(int fd, void *buf, size_t max)
{
	uint64_t deadline = lt_now_ms() + LT_TIMEOUT_MS;
	struct pollfd pfd = { .fd = fd, .events = POLLIN };

	while (lt_now_ms() < deadline) {
		lt_progress();
		if (poll(&pfd, 1, 10) > 0)
			return lt_pipe_recv(fd, buf, max, LT_TIMEOUT_MS);
	}
	return -1;
}

/* Child: sends both messages to the parent, waits for the eager one to complete, dies. */
static int child_sender(int rfd, int wfd)
{
	char paddr[LT_ADDR_MAX], *big;
	struct lt_comp comp;
	struct fi_info *info;
	struct lt_dom dom;
	struct lt_ep ep;
	fi_addr_t parent;
	char small[EAGER_LEN];
	ssize_t len;

	len = lt_pipe_recv(rfd, paddr, sizeof(paddr), LT_TIMEOUT_MS);
	info = lt_getinfo_or_skip(lt_hints(FI_MSG));
	if (len <= 0 || lt_dom_open(info, &dom) || lt_ep_open(&dom, NULL, &ep) ||
	    lt_av_insert(&ep, paddr, &parent))
		_exit(2);
	lt_pipe_send(wfd, ep.addr, ep.addrlen);
	big = malloc(RNDV_LEN);
	lt_fill(small, sizeof(small), 1);
	lt_fill(big, RNDV_LEN, 2);
	if (lt_send(&ep, small, sizeof(small), parent, small) ||
	    lt_send(&ep, big, RNDV_LEN, parent, big))
		_exit(3);
	/* The eager send completes on its own; the rendezvous one waits for the parent. */
	if (!lt_cq_next(&ep.tx, &comp, LT_TIMEOUT_MS) || comp.op_context != small || comp.err) {
		fprintf(stderr, "child: eager send completion: ctx %p/%p err %d\n",
			comp.op_context, (void *) small, comp.err);
		_exit(4);
	}
	lt_pipe_send(wfd, "sent", 5);
	_exit(0); /* abruptly: no close, the rendezvous send still pending */
}

/* Child: echoes one message back to the parent, then closes properly. */
static int child_echo(int rfd, int wfd)
{
	char paddr[LT_ADDR_MAX], buf[64];
	struct lt_comp comp;
	struct fi_info *info;
	struct lt_dom dom;
	struct lt_ep ep;
	fi_addr_t parent;
	ssize_t len;

	len = lt_pipe_recv(rfd, paddr, sizeof(paddr), LT_TIMEOUT_MS);
	info = lt_getinfo_or_skip(lt_hints(FI_MSG));
	if (len <= 0 || lt_dom_open(info, &dom) || lt_ep_open(&dom, NULL, &ep) ||
	    lt_av_insert(&ep, paddr, &parent))
		_exit(2);
	lt_pipe_send(wfd, ep.addr, ep.addrlen);
	if (lt_recv(&ep, buf, sizeof(buf), FI_ADDR_UNSPEC, buf) ||
	    !lt_cq_next(&ep.rx, &comp, LT_TIMEOUT_MS) || comp.err)
		_exit(3);
	if (lt_send(&ep, buf, comp.len, parent, buf) || !lt_cq_next(&ep.tx, &comp, LT_TIMEOUT_MS))
		_exit(4);
	lt_ep_close(&ep);
	lt_dom_close(&dom);
	_exit(0);
}

int main(int argc, char **argv)
{
	char small[EAGER_LEN], *big, caddr[LT_ADDR_MAX], msg[64] = "echo me", reply[64];
	const char *role;
	struct lt_child child;
	struct lt_comp comp;
	struct fi_info *hints, *info;
	struct lt_dom dom;
	struct lt_ep ep;
	fi_addr_t dead, echo;
	int rfd, wfd, status;
	bool ok;
	ssize_t len;

	role = lt_child_role(argc, argv, &rfd, &wfd);
	if (role && !strcmp(role, "sender"))
		return child_sender(rfd, wfd);
	if (role && !strcmp(role, "echo"))
		return child_echo(rfd, wfd);

	lt_begin("peer_loss");
	/* Over cores that report no lost peer, the layer's liveness finds it: soon, here. */
	setenv("FI_OFI_LAYER_PEER_TIMEOUT", "1500", 0);
	hints = lt_hints(FI_MSG | FI_SOURCE);
	info = lt_getinfo_or_skip(hints);
	if (lt_dom_open(info, &dom) || lt_ep_open(&dom, NULL, &ep)) {
		LT_CHECK(0, "open the parent endpoint");
		return lt_end();
	}

	/* An endpoint quiet for a while reads its core EQ seldom (core/core_msg.c): the child's
	 * connection request must still be taken, here by calls 10 ms apart. */
	for (int i = 0; i < 5000; i++)
		lt_progress();

	/* 1. Messages that arrived unexpected outlive their sender. */
	LT_CHECK(!lt_child_spawn("sender", &child), "spawn the sending child");
	lt_pipe_send(child.to_child, ep.addr, ep.addrlen);
	len = lt_pipe_recv(child.from_child, caddr, sizeof(caddr), LT_TIMEOUT_MS);
	LT_CHECK(len > 0, "the child sent its address");
	LT_CHECK(recv_progressing(child.from_child, msg, sizeof(msg)) == 5,
		 "the child sent both messages");
	strcpy(msg, "echo me");
	status = lt_child_reap(&child, LT_TIMEOUT_MS, false);
	LT_CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the child exited (status %d)",
		 status);
	/* Let the endpoint notice the lost connection before the receives come. */
	LT_CHECK(lt_cq_quiet(&ep.rx, 500) == 0, "nothing completes without a receive");

	memset(small, 0, sizeof(small));
	LT_CHECK_RET(lt_recv(&ep, small, sizeof(small), FI_ADDR_UNSPEC, small), 0,
		     "post the eager receive");
	memset(&comp, 0, sizeof(comp));
	LT_CHECK(lt_cq_next(&ep.rx, &comp, LT_TIMEOUT_MS), "the eager message is received");
	LT_CHECK(comp.op_context == small && !comp.err && comp.len == EAGER_LEN &&
		 lt_verify(small, EAGER_LEN, 1) == EAGER_LEN,
		 "it is intact (err %d, len %zu)", comp.err, comp.len);
	LT_CHECK(comp.src == FI_ADDR_NOTAVAIL, "its source is not in the AV: FI_ADDR_NOTAVAIL");

	big = calloc(1, RNDV_LEN);
	LT_CHECK_RET(lt_recv(&ep, big, RNDV_LEN, FI_ADDR_UNSPEC, big), 0,
		     "post the rendezvous receive");
	if (lt_core_is_msg()) {
		/* the connection's loss took the request with it: the receive waits */
		LT_CHECK(lt_cq_quiet(&ep.rx, 300) == 0,
			 "the rendezvous message of a dead sender never completes the receive");
		LT_CHECK_RET(fi_cancel(&ep.ep->fid, big), 0, "cancel that receive");
		memset(&comp, 0, sizeof(comp));
		ok = lt_cq_next(&ep.rx, &comp, LT_TIMEOUT_MS);
		LT_CHECK(ok && comp.op_context == big && comp.err == FI_ECANCELED,
			 "it completes with FI_ECANCELED (err %d)", comp.err);
	} else {
		/* no core tells: the request is matched, and its read from the dead sender
		 * fails once the liveness gives up on it */
		memset(&comp, 0, sizeof(comp));
		ok = lt_cq_next(&ep.rx, &comp, LT_TIMEOUT_MS);
		LT_CHECK(ok && comp.op_context == big &&
				 (comp.err == FI_EHOSTUNREACH || comp.err == FI_ECONNRESET),
			 "the receive of a dead sender's rendezvous message fails: the sender is "
			 "gone (err %d: %s)", comp.err, fi_strerror(comp.err));
	}

	/* 2. A send to the dead address fails with an error completion, never hangs. */
	LT_CHECK_RET(lt_av_insert(&ep, caddr, &dead), 0, "insert the dead child's address");
	LT_CHECK_RET(lt_send(&ep, msg, sizeof(msg), dead, msg), 0, "send to the dead address");
	memset(&comp, 0, sizeof(comp));
	ok = lt_cq_next(&ep.tx, &comp, LT_TIMEOUT_MS);
	LT_CHECK(ok && comp.op_context == msg && comp.err != 0,
		 "the send completes with an error (err %d: %s)", comp.err, fi_strerror(comp.err));

	/* 3. A new peer works. */
	LT_CHECK(!lt_child_spawn("echo", &child), "spawn the echoing child");
	lt_pipe_send(child.to_child, ep.addr, ep.addrlen);
	len = lt_pipe_recv(child.from_child, caddr, sizeof(caddr), LT_TIMEOUT_MS);
	LT_CHECK(len > 0 && !lt_av_insert(&ep, caddr, &echo), "insert the new child's address");
	LT_CHECK_RET(lt_recv(&ep, reply, sizeof(reply), FI_ADDR_UNSPEC, reply), 0,
		     "post the reply receive");
	LT_CHECK_RET(lt_send(&ep, msg, sizeof(msg), echo, msg), 0, "send to the new child");
	memset(&comp, 0, sizeof(comp));
	ok = lt_cq_next(&ep.tx, &comp, LT_TIMEOUT_MS);
	LT_CHECK(ok && !comp.err, "the send completes (err %d)", comp.err);
	memset(&comp, 0, sizeof(comp));
	ok = lt_cq_next(&ep.rx, &comp, LT_TIMEOUT_MS);
	LT_CHECK(ok && !comp.err && !strcmp(reply, "echo me") && comp.src == echo,
		 "the echo comes back from the new child's fi_addr (ok %d, err %d, src %lu/%lu, "
		 "'%s')", ok, comp.err, (unsigned long) comp.src, (unsigned long) echo, reply);
	status = lt_child_reap(&child, LT_TIMEOUT_MS, false);
	LT_CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the echoing child exited cleanly");

	free(big);
	lt_ep_close(&ep);
	lt_dom_close(&dom);
	fi_freeinfo(info);
	fi_freeinfo(hints);
	return lt_end();
}
