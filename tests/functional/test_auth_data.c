/*
 * Authorization keys on the data path, through the public API (fi_domain(3) and
 * fi_endpoint(3) auth_key, fi_av(3) 1.20 FI_AV_AUTH_KEY and FI_AUTH_KEY receives), each
 * endpoint in a domain of its own:
 * - domain keys: endpoints with different keys never deliver to each other; every send
 *   completes with FI_EACCES at the sender and the receiver counts each refusal
 *   (FI_OPT_LAYER_AUTH_DROPPED, which the checks wait on instead of time); a keyless
 *   endpoint and a keyed one refuse each other; the same key delivers, small and
 *   rendezvous messages alike; an endpoint's own key replaces its domain's;
 * - AV keys: a send carries the key its destination was inserted with; peers using keys the
 *   receiver was enabled with are delivered and reported as the address inserted with that
 *   key, replies too; one sender may use two keys with one receiver; a key the receiver
 *   does not hold, and no key, are refused; FI_AUTH_KEY directed receives (tagged and
 *   untagged, posted and unexpected, FI_PEEK) take only messages of their key;
 * - bad arguments: FI_AUTH_KEY with something that is not a key handle the endpoint holds,
 *   a key handle without FI_AUTH_KEY, keys outside 1..32 bytes, an endpoint key in an
 *   FI_AV_AUTH_KEY domain, the option's sizes and its read-only setopt.
 * Over tcp;ofi_layer and (run_over_net.sh) net;ofi_layer.
 */
#include "common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <rdma/fi_tagged.h>
#include <rdma/fi_ext_layer.h>

#define HANG_GUARD_S 240
#define SMALL 64
#define LARGE (256 * 1024) /* past the default eager size: a rendezvous */
#define TAG 0x5a
#define TAG_MARK 0x77 /* a message behind others on the same connection: they arrived */
#define CAPS (FI_MSG | FI_TAGGED | FI_DIRECTED_RECV | FI_SOURCE)

/* One endpoint in a fabric and domain of its own. */
struct node {
	struct lt_dom dom;
	struct lt_ep ep;
};

/* Infos for a domain with the given key (NULL: none), or with FI_AV_AUTH_KEY. */
static struct fi_info *key_info(const char *key, bool has_av_keys)
{
	struct fi_info *hints = lt_hints(CAPS), *info = NULL;
	int ret;

	if (has_av_keys) {
		hints->domain_attr->auth_key_size = FI_AV_AUTH_KEY;
	} else if (key) {
		hints->domain_attr->auth_key = (uint8_t *) strdup(key);
		hints->domain_attr->auth_key_size = strlen(key);
	}
	ret = lt_getinfo(hints, &info);
	fi_freeinfo(hints);
	if (ret == -FI_ENODATA && !key && !has_av_keys)
		lt_skip("provider not available");
	return ret ? NULL : info;
}

/* Opens a node; with enable false it waits for keys to be inserted first. */
static bool node_open(struct node *n, const char *key, bool has_av_keys, bool enable,
		      const char *what)
{
	struct lt_ep_opts opts = {.no_enable = !enable};
	struct fi_info *info = key_info(key, has_av_keys);

	memset(n, 0, sizeof(*n));
	if (!LT_CHECK(info, "%s: fi_getinfo with the key", what))
		return false;
	if (!LT_CHECK_RET(lt_dom_open(info, &n->dom), 0, "%s: domain", what)) {
		fi_freeinfo(info);
		return false;
	}
	if (!LT_CHECK_RET(lt_ep_open(&n->dom, &opts, &n->ep), 0, "%s: endpoint", what)) {
		lt_dom_close(&n->dom);
		fi_freeinfo(info);
		n->dom.info = NULL;
		return false;
	}
	return true;
}

static void node_close(struct node *n)
{
	lt_ep_close(&n->ep);
	lt_dom_close(&n->dom);
	fi_freeinfo(n->dom.info);
	n->dom.info = NULL;
}

static uint64_t dropped(struct node *n)
{
	uint64_t cnt = UINT64_MAX;
	size_t len = sizeof(cnt);

	if (fi_getopt(&n->ep.ep->fid, FI_OPT_ENDPOINT, FI_OPT_LAYER_AUTH_DROPPED, &cnt, &len))
		return UINT64_MAX;
	return cnt;
}

static fi_addr_t insert(struct node *n, const struct node *peer, fi_addr_t key)
{
	fi_addr_t fi_addr = key;
	int ret;

	ret = fi_av_insert(n->ep.av, peer->ep.addr, 1, &fi_addr,
			   key == FI_ADDR_NOTAVAIL ? 0 : FI_AUTH_KEY, NULL);
	return ret == 1 ? fi_addr : FI_ADDR_NOTAVAIL;
}

/* One message of len bytes a to b; b's receive posted first. True when it arrived whole. */
static bool delivers(struct node *a, fi_addr_t dest, struct node *b, size_t len, fi_addr_t *src)
{
	char *out = malloc(len), *in = calloc(1, len);
	struct lt_comp comp;
	int ctx_tx, ctx_rx;
	bool ok = false;

	lt_fill(out, len, len);
	if (lt_recv(&b->ep, in, len, FI_ADDR_UNSPEC, &ctx_rx) ||
	    lt_send(&a->ep, out, len, dest, &ctx_tx))
		goto out;
	if (!lt_cq_next(&a->ep.tx, &comp, LT_TIMEOUT_MS) || comp.err)
		goto out;
	if (!lt_cq_next(&b->ep.rx, &comp, LT_TIMEOUT_MS) || comp.err || comp.len != len)
		goto out;
	if (src)
		*src = comp.src;
	ok = lt_verify(in, len, len) == len;
out:
	free(out);
	free(in);
	return ok;
}

/*
 * a sends len bytes to b, which must refuse it: the send completes with FI_EACCES, b counts
 * one more refusal, and b's receive is left untouched (cancelled here).
 */
static void refused(struct node *a, fi_addr_t dest, struct node *b, size_t len,
		    const char *what)
{
	char *out = calloc(1, len), in[SMALL];
	uint64_t before = dropped(b);
	struct lt_comp comp = {0};
	int ctx_tx, ctx_rx;
	bool ok;

	if (!LT_CHECK_RET(lt_recv(&b->ep, in, sizeof(in), FI_ADDR_UNSPEC, &ctx_rx), 0,
			  "%s: receive", what) ||
	    !LT_CHECK_RET(lt_send(&a->ep, out, len, dest, &ctx_tx), 0, "%s: send", what)) {
		free(out);
		return;
	}
	ok = lt_cq_next(&a->ep.tx, &comp, LT_TIMEOUT_MS);
	LT_CHECK(ok && comp.op_context == &ctx_tx && comp.err == FI_EACCES,
		 "%s: the send completes with FI_EACCES (err %d)", what, comp.err);
	LT_CHECK(dropped(b) == before + 1, "%s: the receiver counted one refusal (%lu, was %lu)",
		 what, (unsigned long) dropped(b), (unsigned long) before);
	LT_CHECK_RET(fi_cancel(&b->ep.ep->fid, &ctx_rx), 0, "%s: the receive is still posted",
		     what);
	ok = lt_cq_next(&b->ep.rx, &comp, LT_TIMEOUT_MS);
	LT_CHECK(ok && comp.op_context == &ctx_rx && comp.err == FI_ECANCELED,
		 "%s: nothing was delivered (err %d)", what, comp.err);
	LT_CHECK(lt_cq_quiet(&b->ep.rx, 0) == 0, "%s: no other completion", what);
	free(out);
}

/* ---- domain and endpoint keys ---- */

static void test_domain_keys(void)
{
	struct node a, b, a2, c;
	fi_addr_t a_b, a_a2, b_a, c_a, a_c, a2_a;
	fi_addr_t src;

	if (!node_open(&a, "alpha-key", false, true, "alpha"))
		return;
	if (!node_open(&b, "beta-key", false, true, "beta")) {
		node_close(&a);
		return;
	}
	a_b = insert(&a, &b, FI_ADDR_NOTAVAIL);
	b_a = insert(&b, &a, FI_ADDR_NOTAVAIL);
	LT_CHECK(dropped(&a) == 0 && dropped(&b) == 0, "domain keys: counts start at 0");

	refused(&a, a_b, &b, SMALL, "different keys, small");
	refused(&a, a_b, &b, LARGE, "different keys, rendezvous");
	refused(&b, b_a, &a, SMALL, "different keys, the other way");

	if (node_open(&a2, "alpha-key", false, true, "alpha too")) {
		a_a2 = insert(&a, &a2, FI_ADDR_NOTAVAIL);
		a2_a = insert(&a2, &a, FI_ADDR_NOTAVAIL);
		LT_CHECK(delivers(&a, a_a2, &a2, SMALL, &src) && src == a2_a,
			 "same key: delivered, from the sender's address");
		LT_CHECK(delivers(&a2, a2_a, &a, LARGE, NULL), "same key: rendezvous delivered");
		LT_CHECK(dropped(&a) == 1 && dropped(&a2) == 0,
			 "same key: nothing more refused (%lu, %lu)", (unsigned long) dropped(&a),
			 (unsigned long) dropped(&a2));
		node_close(&a2);
	}

	/* no key at all: refused by a keyed endpoint, and refusing a keyed one */
	if (node_open(&c, NULL, false, true, "no key")) {
		c_a = insert(&c, &a, FI_ADDR_NOTAVAIL);
		a_c = insert(&a, &c, FI_ADDR_NOTAVAIL);
		refused(&c, c_a, &a, SMALL, "keyless to keyed");
		refused(&a, a_c, &c, SMALL, "keyed to keyless");
		node_close(&c);
	}
	node_close(&b);
	node_close(&a);
}

/* fi_endpoint(3): an endpoint's own key replaces its domain's. */
static void test_endpoint_key(void)
{
	struct node a, b;
	struct fid_ep *ep;
	struct fi_info *info;
	fi_addr_t b_a, a_b;

	if (!node_open(&a, "alpha-key", false, true, "ep key: alpha"))
		return;
	if (!node_open(&b, "beta-key", false, false, "ep key: beta")) {
		node_close(&a);
		return;
	}
	/* b's endpoint again, with alpha's key of its own */
	fi_close(&b.ep.ep->fid);
	b.ep.ep = NULL;
	info = fi_dupinfo(b.dom.info);
	info->ep_attr->auth_key = (uint8_t *) strdup("alpha-key");
	info->ep_attr->auth_key_size = strlen("alpha-key");
	if (LT_CHECK_RET(fi_endpoint(b.dom.domain, info, &ep, NULL), 0, "ep key: endpoint")) {
		b.ep.ep = ep;
		LT_CHECK(!fi_ep_bind(ep, &b.ep.av->fid, 0) &&
			 !fi_ep_bind(ep, &b.ep.tx.cq->fid, FI_TRANSMIT) &&
			 !fi_ep_bind(ep, &b.ep.rx.cq->fid, FI_RECV) && !lt_ep_enable(&b.ep),
			 "ep key: bound and enabled");
		b_a = insert(&b, &a, FI_ADDR_NOTAVAIL);
		a_b = insert(&a, &b, FI_ADDR_NOTAVAIL);
		LT_CHECK(delivers(&b, b_a, &a, SMALL, NULL), "ep key: delivered to its key");
		LT_CHECK(delivers(&a, a_b, &b, SMALL, NULL), "ep key: accepted from its key");
		LT_CHECK(dropped(&a) == 0 && dropped(&b) == 0, "ep key: nothing refused");
	}
	fi_freeinfo(info);

	/* 33 bytes, or a size without a key: -FI_EINVAL */
	info = fi_dupinfo(b.dom.info);
	info->ep_attr->auth_key = calloc(1, 33);
	info->ep_attr->auth_key_size = 33;
	LT_CHECK_RET(fi_endpoint(b.dom.domain, info, &ep, NULL), -FI_EINVAL,
		     "ep key: 33 bytes refused");
	free(info->ep_attr->auth_key);
	info->ep_attr->auth_key = NULL;
	info->ep_attr->auth_key_size = 4;
	LT_CHECK_RET(fi_endpoint(b.dom.domain, info, &ep, NULL), -FI_EINVAL,
		     "ep key: a size without a key refused");
	info->ep_attr->auth_key_size = 0;
	fi_freeinfo(info);
	node_close(&b);
	node_close(&a);
}

/* ---- keys from the AV ---- */

struct av_nodes {
	struct node r, s1, s2, s3, s0; /* receiver; senders with keys 1, 2, 3, and none */
	fi_addr_t r_k1, r_k2, r_late;  /* r's key handles (r_late: inserted after enable) */
	fi_addr_t r_s1, r_s2;          /* r's entries for s1 (key 1) and s2 (key 2) */
	fi_addr_t r_s1b;               /* r's entry for s1 with key 2 */
	fi_addr_t s1_r, s2_r, s3_r, s0_r;
	fi_addr_t s1_r2;               /* s1's entry for r with key 2 (s1 holds both) */
};

static bool av_key(struct node *n, const char *key, fi_addr_t *handle)
{
	return !fi_av_insert_auth_key(n->ep.av, key, strlen(key), handle, 0);
}

static bool av_nodes_open(struct av_nodes *t)
{
	fi_addr_t k, k2;
	bool ok;

	memset(t, 0, sizeof(*t));
	/* keys go in before enable: an endpoint is enabled with the AV's keys of the time */
	ok = node_open(&t->r, NULL, true, false, "av keys: receiver") &&
	     node_open(&t->s1, NULL, true, false, "av keys: sender 1") &&
	     node_open(&t->s2, NULL, true, false, "av keys: sender 2") &&
	     node_open(&t->s3, NULL, true, false, "av keys: sender 3") &&
	     node_open(&t->s0, NULL, true, false, "av keys: sender without a key");
	if (!ok)
		return false;
	ok = av_key(&t->r, "key-one", &t->r_k1) && av_key(&t->r, "key-two", &t->r_k2) &&
	     !lt_ep_enable(&t->r.ep) && av_key(&t->r, "key-late", &t->r_late) &&
	     av_key(&t->s1, "key-one", &k) && av_key(&t->s1, "key-two", &k2) &&
	     !lt_ep_enable(&t->s1.ep) &&
	     (t->s1_r = insert(&t->s1, &t->r, k)) != FI_ADDR_NOTAVAIL &&
	     (t->s1_r2 = insert(&t->s1, &t->r, k2)) != FI_ADDR_NOTAVAIL &&
	     av_key(&t->s2, "key-two", &k) && !lt_ep_enable(&t->s2.ep) &&
	     (t->s2_r = insert(&t->s2, &t->r, k)) != FI_ADDR_NOTAVAIL &&
	     av_key(&t->s3, "key-three", &k) && !lt_ep_enable(&t->s3.ep) &&
	     (t->s3_r = insert(&t->s3, &t->r, k)) != FI_ADDR_NOTAVAIL &&
	     !lt_ep_enable(&t->s0.ep) &&
	     (t->s0_r = insert(&t->s0, &t->r, FI_ADDR_NOTAVAIL)) != FI_ADDR_NOTAVAIL &&
	     (t->r_s1 = insert(&t->r, &t->s1, t->r_k1)) != FI_ADDR_NOTAVAIL &&
	     (t->r_s2 = insert(&t->r, &t->s2, t->r_k2)) != FI_ADDR_NOTAVAIL &&
	     (t->r_s1b = insert(&t->r, &t->s1, t->r_k2)) != FI_ADDR_NOTAVAIL;
	return LT_CHECK(ok, "av keys: keys inserted, endpoints enabled, addresses inserted");
}

static void av_nodes_close(struct av_nodes *t)
{
	node_close(&t->s0);
	node_close(&t->s3);
	node_close(&t->s2);
	node_close(&t->s1);
	node_close(&t->r);
}

static ssize_t trecv_key(struct node *n, void *buf, size_t len, fi_addr_t src, uint64_t tag,
			 uint64_t flags, void *ctx)
{
	struct iovec iov = {.iov_base = buf, .iov_len = len};
	struct fi_msg_tagged msg = {
		.msg_iov = &iov, .iov_count = 1, .addr = src, .tag = tag, .context = ctx,
	};

	return LT_RETRY(fi_trecvmsg(n->ep.ep, &msg, flags));
}

static ssize_t recv_key(struct node *n, void *buf, size_t len, fi_addr_t src, uint64_t flags,
			void *ctx)
{
	struct iovec iov = {.iov_base = buf, .iov_len = len};
	struct fi_msg msg = {.msg_iov = &iov, .iov_count = 1, .addr = src, .context = ctx};

	return LT_RETRY(fi_recvmsg(n->ep.ep, &msg, flags));
}

static bool tsend_done(struct node *n, const char *text, fi_addr_t dest, uint64_t tag)
{
	struct lt_comp comp;
	int ctx;

	return !LT_RETRY(fi_tsend(n->ep.ep, text, strlen(text) + 1, NULL, dest, tag, &ctx)) &&
	       lt_cq_next(&n->ep.tx, &comp, LT_TIMEOUT_MS) && !comp.err;
}

/*
 * s sends a message behind which nothing of s can still be on its way (one connection, in
 * order): once r has it, s's earlier messages have arrived and been matched or kept.
 */
static bool mark(struct av_nodes *t, struct node *s, fi_addr_t dest)
{
	struct lt_comp comp;
	char buf[SMALL];
	int ctx;

	return !LT_RETRY(fi_trecv(t->r.ep.ep, buf, sizeof(buf), NULL, FI_ADDR_UNSPEC, TAG_MARK,
				  0, &ctx)) &&
	       tsend_done(s, "mark", dest, TAG_MARK) &&
	       lt_cq_next(&t->r.ep.rx, &comp, LT_TIMEOUT_MS) && comp.op_context == &ctx &&
	       !comp.err;
}

static void test_av_keys(void)
{
	struct av_nodes t;
	struct lt_comp comp;
	char b1[SMALL], b2[SMALL], b3[SMALL];
	int c1, c2, c3;
	fi_addr_t src;
	bool ok;

	if (!av_nodes_open(&t)) {
		av_nodes_close(&t);
		return;
	}
	LT_CHECK(delivers(&t.s1, t.s1_r, &t.r, SMALL, &src) && src == t.r_s1,
		 "av keys: key 1 delivered, reported as the address inserted with key 1");
	/* the answer (over a MSG core, on the connection s1 opened) is of key 1 too */
	LT_CHECK(delivers(&t.r, t.r_s1, &t.s1, SMALL, &src) && src == t.s1_r,
		 "av keys: the reply delivered, reported as the address inserted with key 1");
	LT_CHECK(delivers(&t.s2, t.s2_r, &t.r, LARGE, &src) && src == t.r_s2,
		 "av keys: key 2 delivered (rendezvous), reported as the address of key 2");
	refused(&t.s3, t.s3_r, &t.r, SMALL, "av keys: a key the receiver does not hold");
	refused(&t.s0, t.s0_r, &t.r, SMALL, "av keys: no key, to an endpoint with av keys");

	/* tagged FI_AUTH_KEY receives: key 2's message passes key 1's receive by */
	memset(b1, 0, sizeof(b1));
	memset(b2, 0, sizeof(b2));
	LT_CHECK_RET(trecv_key(&t.r, b1, sizeof(b1), t.r_k1, TAG, FI_AUTH_KEY | FI_COMPLETION,
			       &c1), 0, "auth-key trecv: key 1 posted");
	LT_CHECK(tsend_done(&t.s2, "from two", t.s2_r, TAG) && mark(&t, &t.s2, t.s2_r),
		 "auth-key trecv: key 2's message arrived");
	LT_CHECK(lt_cq_quiet(&t.r.ep.rx, 0) == 0, "auth-key trecv: key 1's receive did not take "
		 "key 2's message");
	LT_CHECK(tsend_done(&t.s1, "from one", t.s1_r, TAG) &&
		 lt_cq_next(&t.r.ep.rx, &comp, LT_TIMEOUT_MS) && comp.op_context == &c1 &&
		 !comp.err && comp.src == t.r_s1 && !strcmp(b1, "from one"),
		 "auth-key trecv: key 1's message matched key 1's receive");
	/* key 2's message waits unexpected: a peek of key 1 misses it, one of key 2 finds it */
	LT_CHECK_RET(trecv_key(&t.r, NULL, 0, t.r_k1, TAG, FI_PEEK | FI_AUTH_KEY |
			       FI_COMPLETION, &c3), 0, "auth-key peek: key 1");
	memset(&comp, 0, sizeof(comp));
	ok = lt_cq_next(&t.r.ep.rx, &comp, LT_TIMEOUT_MS);
	LT_CHECK(ok && comp.op_context == &c3 && comp.err == FI_ENOMSG,
		 "auth-key peek: key 1 finds nothing (err %d)", comp.err);
	LT_CHECK_RET(trecv_key(&t.r, NULL, 0, t.r_k2, TAG, FI_PEEK | FI_AUTH_KEY |
			       FI_COMPLETION, &c3), 0, "auth-key peek: key 2");
	LT_CHECK(lt_cq_next(&t.r.ep.rx, &comp, LT_TIMEOUT_MS) && comp.op_context == &c3 &&
		 !comp.err && comp.src == t.r_s2, "auth-key peek: key 2 finds s2's message");
	LT_CHECK_RET(trecv_key(&t.r, b2, sizeof(b2), t.r_k2, TAG, FI_AUTH_KEY | FI_COMPLETION,
			       &c2), 0, "auth-key trecv: key 2 posted");
	LT_CHECK(lt_cq_next(&t.r.ep.rx, &comp, LT_TIMEOUT_MS) && comp.op_context == &c2 &&
		 !comp.err && comp.src == t.r_s2 && !strcmp(b2, "from two"),
		 "auth-key trecv: key 2's unexpected message taken by key 2's receive");

	/* untagged: the same, with fi_recvmsg */
	memset(b1, 0, sizeof(b1));
	memset(b3, 0, sizeof(b3));
	LT_CHECK_RET(recv_key(&t.r, b1, sizeof(b1), t.r_k1, FI_AUTH_KEY | FI_COMPLETION, &c1),
		     0, "auth-key recv: key 1 posted");
	LT_CHECK(!lt_send(&t.s2.ep, "untagged two", 13, t.s2_r, &c3) &&
		 lt_cq_next(&t.s2.ep.tx, &comp, LT_TIMEOUT_MS) && !comp.err &&
		 mark(&t, &t.s2, t.s2_r), "auth-key recv: key 2's message arrived");
	LT_CHECK(lt_cq_quiet(&t.r.ep.rx, 0) == 0, "auth-key recv: key 1's receive passed it by");
	LT_CHECK(!lt_send(&t.s1.ep, "untagged one", 13, t.s1_r, &c3) &&
		 lt_cq_next(&t.s1.ep.tx, &comp, LT_TIMEOUT_MS) && !comp.err &&
		 lt_cq_next(&t.r.ep.rx, &comp, LT_TIMEOUT_MS) && comp.op_context == &c1 &&
		 comp.src == t.r_s1 && !strcmp(b1, "untagged one"),
		 "auth-key recv: key 1's message taken by key 1's receive");
	LT_CHECK_RET(recv_key(&t.r, b3, sizeof(b3), t.r_k2, FI_AUTH_KEY | FI_COMPLETION, &c2),
		     0, "auth-key recv: key 2 posted");
	LT_CHECK(lt_cq_next(&t.r.ep.rx, &comp, LT_TIMEOUT_MS) && comp.op_context == &c2 &&
		 comp.src == t.r_s2 && !strcmp(b3, "untagged two"),
		 "auth-key recv: key 2's unexpected message taken by key 2's receive");

	/* one sender under two keys (over an RDM core, two key slots of one peer) */
	LT_CHECK(delivers(&t.s1, t.s1_r2, &t.r, SMALL, &src) && src == t.r_s1b,
		 "two keys, one sender: key 2 delivered, reported as s1 with key 2");
	memset(b1, 0, sizeof(b1));
	memset(b2, 0, sizeof(b2));
	LT_CHECK_RET(trecv_key(&t.r, b1, sizeof(b1), t.r_k1, TAG + 1, FI_AUTH_KEY |
			       FI_COMPLETION, &c1), 0, "two keys, one sender: key 1 posted");
	LT_CHECK(tsend_done(&t.s1, "s1 two", t.s1_r2, TAG + 1) && mark(&t, &t.s1, t.s1_r2) &&
		 lt_cq_quiet(&t.r.ep.rx, 0) == 0,
		 "two keys, one sender: its key 2 message passed key 1's receive by");
	LT_CHECK(tsend_done(&t.s1, "s1 one", t.s1_r, TAG + 1) &&
		 lt_cq_next(&t.r.ep.rx, &comp, LT_TIMEOUT_MS) && comp.op_context == &c1 &&
		 comp.src == t.r_s1 && !strcmp(b1, "s1 one"),
		 "two keys, one sender: its key 1 message taken by key 1's receive");
	LT_CHECK_RET(trecv_key(&t.r, b2, sizeof(b2), t.r_k2, TAG + 1, FI_AUTH_KEY |
			       FI_COMPLETION, &c2), 0, "two keys, one sender: key 2 posted");
	LT_CHECK(lt_cq_next(&t.r.ep.rx, &comp, LT_TIMEOUT_MS) && comp.op_context == &c2 &&
		 comp.src == t.r_s1b && !strcmp(b2, "s1 two"),
		 "two keys, one sender: its key 2 message taken by key 2's receive");

	/* bad arguments */
	LT_CHECK_RET(trecv_key(&t.r, b1, sizeof(b1), t.r_s1, TAG, FI_AUTH_KEY, &c1), -FI_EINVAL,
		     "FI_AUTH_KEY with an address fi_addr refused");
	LT_CHECK_RET(trecv_key(&t.r, b1, sizeof(b1), FI_ADDR_UNSPEC, TAG, FI_AUTH_KEY, &c1),
		     -FI_EINVAL, "FI_AUTH_KEY with FI_ADDR_UNSPEC refused");
	LT_CHECK_RET(trecv_key(&t.r, b1, sizeof(b1), t.r_late, TAG, FI_AUTH_KEY, &c1),
		     -FI_EINVAL, "FI_AUTH_KEY with a key inserted after enable refused");
	/* k1 + 1 may well be k2: another check value makes a handle that names no key */
	LT_CHECK_RET(trecv_key(&t.r, b1, sizeof(b1), t.r_k1 ^ (1ULL << 32), TAG, FI_AUTH_KEY,
			       &c1), -FI_EINVAL, "FI_AUTH_KEY with a forged key handle refused");
	LT_CHECK_RET(trecv_key(&t.r, b1, sizeof(b1), t.r_k1, TAG, 0, &c1), -FI_EINVAL,
		     "a key handle without FI_AUTH_KEY refused");
	LT_CHECK_RET(recv_key(&t.r, b1, sizeof(b1), t.r_s2, FI_AUTH_KEY, &c1), -FI_EINVAL,
		     "fi_recvmsg: FI_AUTH_KEY with an address fi_addr refused");
	LT_CHECK_RET(fi_av_remove(t.r.ep.av, &t.r_k1, 1, FI_AUTH_KEY), -FI_EBUSY,
		     "a key the enabled endpoint holds stays");
	/* s1 inserts r again with a key it was not enabled with: no send */
	{
		fi_addr_t late, dest;
		int ctx;

		if (LT_CHECK(av_key(&t.s1, "key-late", &late), "a late key at the sender")) {
			dest = insert(&t.s1, &t.r, late);
			LT_CHECK_RET(fi_send(t.s1.ep.ep, b1, 8, NULL, dest, &ctx), -FI_EACCES,
				     "send with a key the sender was not enabled with refused");
		}
	}
	LT_CHECK(lt_cq_quiet(&t.r.ep.rx, 0) == 0, "av keys: nothing left over");
	av_nodes_close(&t);
}

/* ---- arguments ---- */

static void test_arguments(void)
{
	struct fi_info *hints, *info = NULL;
	uint64_t cnt = 0;
	size_t len;
	struct node n;
	char buf[8];
	int ctx, ret;

	if (!node_open(&n, NULL, false, true, "args"))
		return;
	len = 4;
	LT_CHECK_RET(fi_getopt(&n.ep.ep->fid, FI_OPT_ENDPOINT, FI_OPT_LAYER_AUTH_DROPPED, &cnt,
			       &len), -FI_ETOOSMALL, "getopt: a short buffer is -FI_ETOOSMALL");
	LT_CHECK(len == sizeof(uint64_t), "getopt: the size needed is reported");
	LT_CHECK_RET(fi_getopt(&n.ep.ep->fid, FI_OPT_ENDPOINT, FI_OPT_LAYER_AUTH_DROPPED, NULL,
			       &len), -FI_EINVAL, "getopt: NULL value refused");
	LT_CHECK_RET(fi_setopt(&n.ep.ep->fid, FI_OPT_ENDPOINT, FI_OPT_LAYER_AUTH_DROPPED, &cnt,
			       sizeof(cnt)), -FI_EOPNOTSUPP, "setopt: the count is read only");
	/* no AV keys in this domain: FI_AUTH_KEY names nothing */
	LT_CHECK_RET(trecv_key(&n, buf, sizeof(buf), 0, TAG, FI_AUTH_KEY, &ctx), -FI_EINVAL,
		     "FI_AUTH_KEY without FI_AV_AUTH_KEY refused");
	node_close(&n);

	hints = lt_hints(CAPS);
	hints->domain_attr->auth_key = calloc(1, 33);
	hints->domain_attr->auth_key_size = 33;
	ret = lt_getinfo(hints, &info);
	LT_CHECK(ret == -FI_ENODATA, "getinfo: a 33-byte domain key matches nothing (%d)", ret);
	fi_freeinfo(info);
	info = NULL;
	hints->domain_attr->auth_key_size = FI_AV_AUTH_KEY;
	ret = lt_getinfo(hints, &info);
	LT_CHECK(ret == -FI_ENODATA, "getinfo: FI_AV_AUTH_KEY with a key matches nothing (%d)",
		 ret);
	fi_freeinfo(info);
	info = NULL;
	free(hints->domain_attr->auth_key);
	hints->domain_attr->auth_key = NULL;
	hints->ep_attr->auth_key = (uint8_t *) strdup("k");
	hints->ep_attr->auth_key_size = 1;
	ret = lt_getinfo(hints, &info);
	LT_CHECK(ret == -FI_ENODATA, "getinfo: an endpoint key with FI_AV_AUTH_KEY matches "
		 "nothing (%d)", ret);
	fi_freeinfo(info);
	info = NULL;
	hints->domain_attr->auth_key_size = 0;
	ret = lt_getinfo(hints, &info);
	LT_CHECK(!ret && info && info->ep_attr->auth_key_size == 1 &&
		 info->ep_attr->auth_key && info->ep_attr->auth_key[0] == 'k',
		 "getinfo: an endpoint key is reported as asked (%d)", ret);
	fi_freeinfo(info);
	fi_freeinfo(hints);

	/* fi_domain checks what it is given too */
	info = key_info("alpha-key", false);
	if (LT_CHECK(info && info->domain_attr->auth_key_size == 9 &&
		     !memcmp(info->domain_attr->auth_key, "alpha-key", 9),
		     "getinfo: a domain key is reported as asked")) {
		struct fid_fabric *fabric;
		struct fid_domain *domain;

		if (!fi_fabric(info->fabric_attr, &fabric, NULL)) {
			info->domain_attr->auth_key_size = 40;
			LT_CHECK_RET(fi_domain(fabric, info, &domain, NULL), -FI_EINVAL,
				     "fi_domain: a 40-byte key refused");
			info->domain_attr->auth_key_size = 9;
			fi_close(&fabric->fid);
		}
	}
	fi_freeinfo(info);

	/* an endpoint key in a domain whose keys come from the AV */
	if (node_open(&n, NULL, true, false, "args: av keys")) {
		struct fid_ep *ep;

		info = fi_dupinfo(n.dom.info);
		info->ep_attr->auth_key = (uint8_t *) strdup("k");
		info->ep_attr->auth_key_size = 1;
		LT_CHECK_RET(fi_endpoint(n.dom.domain, info, &ep, NULL), -FI_EINVAL,
			     "fi_endpoint: an endpoint key with FI_AV_AUTH_KEY refused");
		fi_freeinfo(info);
		node_close(&n);
	}
}

int main(int argc, char **argv)
{
	(void) argc;
	lt_begin(argv[0]);
	alarm(HANG_GUARD_S);
	if (!lt_is_layer())
		lt_skip("checks ofi_layer's own keys");
	test_arguments();
	test_domain_keys();
	test_endpoint_key();
	test_av_keys();
	return lt_end();
}
