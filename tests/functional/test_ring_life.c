/*
 * Rings come and go (fi_layer(7), Rings): over a connected core that writes, a connection
 * earns a ring with its traffic (FI_OFI_LAYER_RING_EARN messages, 4 here), gives it back
 * once unused for FI_OFI_LAYER_RING_IDLE milliseconds (1000 here: a burst earns and keeps
 * its ring however slowly it runs, under valgrind too), and earns it again. Rounds
 * of traffic both ways at once, each side sending a burst of messages of every size (one a
 * slot takes, one it does not, eager, rendezvous) while the other does the same, each round
 * followed by a pause in which both give the ring back: every message arrives once, in the
 * receive posted for it in order, whole; each side holds one ring after a burst and none
 * after the pause (FI_OPT_LAYER_RING_COUNT). Over cores without rings (RDM cores,
 * FI_OFI_LAYER_RING_SLOTS=0) the same traffic, and never a ring.
 *
 * With FI_OFI_LAYER_RING_IDLE or _EARN set outside (run_ring.sh: rings given back after a
 * millisecond), rings come and go within the bursts, between any two messages: then only the
 * traffic is checked, the counts depending on how fast each side runs.
 */
#include "common.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <rdma/fi_ext_layer.h>

#define ROUNDS 4
#define BURST 48
#define IDLE_MS "1000"
#define EARN "4"

/* 8 and 60 bytes fit a slot (80 of payload), 100 does not; 4000 eager; 70000 rendezvous. */
static const size_t sizes[] = { 8, 60, 100, 8, 4000, 60, 70000, 8 };
#define SIZE_MAX_USED 70000

static size_t msg_len(int round, int i)
{
	return sizes[(size_t) (i + round) % (sizeof(sizes) / sizeof(sizes[0]))];
}

static uint64_t msg_seed(int from, int round, int i)
{
	return ((uint64_t) from << 32) | ((uint64_t) round << 16) | (uint64_t) i;
}

static uint64_t ring_count(struct lt_ep *ep)
{
	uint64_t cnt = UINT64_MAX;
	size_t len = sizeof(cnt);

	if (fi_getopt(&ep->ep->fid, FI_OPT_ENDPOINT, FI_OPT_LAYER_RING_COUNT, &cnt, &len))
		return UINT64_MAX;
	return cnt;
}

/* Progresses both until each holds want rings, for at most LT_TIMEOUT_MS: whether they do. */
static bool wait_rings(struct lt_ep *a, struct lt_ep *b, uint64_t want)
{
	uint64_t deadline = lt_now_ms() + LT_TIMEOUT_MS;

	while (lt_now_ms() < deadline) {
		lt_progress();
		if (ring_count(a) == want && ring_count(b) == want)
			return true;
	}
	return false;
}

struct side {
	struct lt_ep *ep;
	fi_addr_t peer;
	int id;
	uint8_t *rbuf[BURST];
	uint8_t *sbuf[BURST];
	struct fi_context2 rctx[BURST], sctx[BURST];
};

static void post_burst(struct side *s, int round)
{
	int i;

	for (i = 0; i < BURST; i++) {
		memset(s->rbuf[i], 0, SIZE_MAX_USED);
		LT_CHECK_RET(lt_recv(s->ep, s->rbuf[i], SIZE_MAX_USED, FI_ADDR_UNSPEC,
				     &s->rctx[i]), 0, "side %d round %d: receive %d", s->id, round,
			     i);
	}
}

static void send_burst(struct side *s, int round)
{
	size_t len;
	int i;

	for (i = 0; i < BURST; i++) {
		len = msg_len(round, i);
		lt_fill(s->sbuf[i], len, msg_seed(s->id, round, i));
		LT_CHECK_RET(lt_send(s->ep, s->sbuf[i], len, s->peer, &s->sctx[i]), 0,
			     "side %d round %d: send %d", s->id, round, i);
	}
}

/* Takes n completions of cq: how many came without an error. */
static int take(struct lt_cq *cq, int n)
{
	struct lt_comp comp;
	int ok = 0, i;

	if (lt_cq_wait(cq, (size_t) n, LT_TIMEOUT_MS))
		return -1;
	for (i = 0; i < n && lt_cq_take(cq, &comp); i++)
		ok += !comp.err;
	return ok;
}

/* Waits for a side's BURST sends and receives; the receives' contents checked in order. */
static void finish_burst(struct side *s, int round)
{
	int sent, got, bad = 0, i;
	size_t len;

	sent = take(&s->ep->tx, BURST);
	got = take(&s->ep->rx, BURST);
	LT_CHECK(sent == BURST && got == BURST, "side %d round %d: %d sends and %d receives "
		 "complete without error", s->id, round, sent, got);
	/* the peer's i-th message is in the i-th receive posted: once, in order, whole */
	for (i = 0; i < BURST; i++) {
		len = msg_len(round, i);
		bad += lt_verify(s->rbuf[i], len, msg_seed(!s->id, round, i)) != len;
	}
	LT_CHECK(!bad, "side %d round %d: every message in order and whole (%d wrong)", s->id,
		 round, bad);
}

int main(void)
{
	struct lt_dom dom = { 0 };
	struct lt_ep a = { 0 }, b = { 0 };
	struct side sa = { .ep = &a, .id = 0 }, sb = { .ep = &b, .id = 1 };
	const char *slots = getenv("FI_OFI_LAYER_RING_SLOTS");
	bool is_counted, has_rings;
	struct fi_info *hints;
	int round, i;

	/* rings that come quickly and go after a short pause, unless the caller chose */
	is_counted = !getenv("FI_OFI_LAYER_RING_IDLE") && !getenv("FI_OFI_LAYER_RING_EARN");
	setenv("FI_OFI_LAYER_RING_IDLE", IDLE_MS, 0);
	setenv("FI_OFI_LAYER_RING_EARN", EARN, 0);
	/* rings on whatever libfabric (from 1.18 on they are off by default) */
	setenv("FI_OFI_LAYER_RING_ACTIVE", "64", 0);
	lt_begin("test_ring_life");
	hints = lt_hints(FI_MSG);
	dom.info = lt_getinfo_or_skip(hints);
	fi_freeinfo(hints);
	has_rings = lt_is_layer() && lt_core_is_msg() && !strcasecmp(lt_core_name(), "tcp") &&
		    !(slots && !strcmp(slots, "0")) &&
		    strcmp(getenv("FI_OFI_LAYER_RING_ACTIVE"), "0");
	if (!LT_CHECK_RET(lt_dom_open(dom.info, &dom), 0, "domain") ||
	    !LT_CHECK_RET(lt_pair_open(&dom, NULL, NULL, &a, &b, &sa.peer, &sb.peer), 0,
			  "two endpoints"))
		return lt_end();
	for (i = 0; i < BURST; i++) {
		sa.rbuf[i] = malloc(SIZE_MAX_USED);
		sa.sbuf[i] = malloc(SIZE_MAX_USED);
		sb.rbuf[i] = malloc(SIZE_MAX_USED);
		sb.sbuf[i] = malloc(SIZE_MAX_USED);
	}
	LT_CHECK(ring_count(&a) == 0 && ring_count(&b) == 0, "no ring before any traffic");

	for (round = 0; round < ROUNDS && !lt_failed(); round++) {
		post_burst(&sa, round);
		post_burst(&sb, round);
		send_burst(&sa, round);
		send_burst(&sb, round);
		finish_burst(&sa, round);
		finish_burst(&sb, round);
		if (!is_counted)
			continue;
		if (has_rings) {
			LT_CHECK(wait_rings(&a, &b, 1), "round %d: each side holds one ring after "
				 "the burst (%" PRIu64 ", %" PRIu64 ")", round,
				 ring_count(&a), ring_count(&b));
			LT_CHECK(wait_rings(&a, &b, 0), "round %d: and gives it back once idle "
				 "(%" PRIu64 ", %" PRIu64 ")", round, ring_count(&a),
				 ring_count(&b));
		} else {
			LT_CHECK(ring_count(&a) == 0 && ring_count(&b) == 0,
				 "round %d: no ring without rings", round);
		}
	}

	for (i = 0; i < BURST; i++) {
		free(sa.rbuf[i]);
		free(sa.sbuf[i]);
		free(sb.rbuf[i]);
		free(sb.sbuf[i]);
	}
	lt_ep_close(&a);
	lt_ep_close(&b);
	lt_dom_close(&dom);
	fi_freeinfo(dom.info);
	return lt_end();
}
