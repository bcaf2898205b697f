/*
 * The endpoint side of fi_av(3), through the public API with endpoints over tcp;ofi_layer on
 * 127.0.0.1: every fi_addr an application passes is checked (send, directed receive: removed,
 * stale and forged values are -FI_EINVAL); a reinserted address works; closing an AV an
 * endpoint uses is -FI_EBUSY; completions report the source's user ID (FI_AV_USER_ID per
 * insertion, or fi_av_set_user_id with FI_ADDR_NOTAVAIL as the default); a removal while
 * messages to or from the peer are in flight completes them with errors; an authorization
 * key held by an enabled endpoint cannot be removed; a domain without FI_AV_AUTH_KEY has no
 * keys.
 *
 * Checks whose names start with "[hook]" are the ones that go through the endpoint's and the
 * domain's use of the AV's hooks (layer_av_report_addr, layer_av_add_listener,
 * layer_av_keys_ref_all, the domain's FI_AV_AUTH_KEY setting).
 */
#include "common.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <rdma/fi_ext_layer.h>

#define HANG_GUARD_S 150
#define SHORT_MS 3000
#define SMALL 64
#define LARGE (1 << 20)
#define INFLIGHT 4

/* An endpoint with an AV opened as asked, its CQs read with fi_cq_readfrom. */
static int node_open(struct lt_dom *dom, enum fi_av_type type, uint64_t av_flags,
		     struct lt_ep *n)
{
	struct fi_av_attr av_attr = {.type = type, .flags = av_flags};
	int ret;

	memset(n, 0, sizeof(*n));
	n->dom = dom;
	ret = fi_av_open(dom->domain, &av_attr, &n->av, NULL);
	if (!ret)
		ret = lt_cq_open(dom->domain, FI_WAIT_NONE, false, &n->tx);
	if (!ret)
		ret = lt_cq_open(dom->domain, FI_WAIT_NONE, true, &n->rx);
	if (!ret)
		ret = fi_endpoint(dom->domain, dom->info, &n->ep, NULL);
	if (!ret)
		ret = fi_ep_bind(n->ep, &n->av->fid, 0);
	if (!ret)
		ret = fi_ep_bind(n->ep, &n->tx.cq->fid, FI_TRANSMIT);
	if (!ret)
		ret = fi_ep_bind(n->ep, &n->rx.cq->fid, FI_RECV);
	if (!ret)
		ret = lt_ep_enable(n);
	if (ret)
		lt_ep_close(n);
	return ret;
}

/* One message from a to b (b's receive posted first); the completion on b's side. */
static bool deliver(struct lt_ep *a, fi_addr_t a_to_b, struct lt_ep *b, fi_addr_t b_src,
		    struct lt_comp *rx_comp)
{
	char out[SMALL], in[SMALL];
	struct lt_comp tx_comp;
	int ctx_tx, ctx_rx;

	lt_fill(out, sizeof(out), 7);
	if (lt_recv(b, in, sizeof(in), b_src, &ctx_rx) || lt_send(a, out, sizeof(out), a_to_b,
								    &ctx_tx))
		return false;
	if (!lt_cq_next(&a->tx, &tx_comp, LT_TIMEOUT_MS) || tx_comp.err)
		return false;
	if (!lt_cq_next(&b->rx, rx_comp, LT_TIMEOUT_MS) || rx_comp->err)
		return false;
	return lt_verify(in, sizeof(in), 7) == sizeof(in);
}

/* ---- fi_addr checks on the data path (no hook needed) ---- */

static void test_checked(struct lt_dom *dom, enum fi_av_type type, const char *tag)
{
	struct lt_ep a, b;
	fi_addr_t to_b, to_b_again, to_a, stale;
	struct lt_comp comp;
	char buf[SMALL];
	int ctx;

	if (!LT_CHECK_RET(node_open(dom, type, 0, &a), 0, "%s: endpoint a", tag))
		return;
	if (!LT_CHECK_RET(node_open(dom, type, 0, &b), 0, "%s: endpoint b", tag)) {
		lt_ep_close(&a);
		return;
	}
	LT_CHECK_RET(lt_av_insert(&a, b.addr, &to_b), 0, "%s: a inserts b", tag);
	LT_CHECK_RET(lt_av_insert(&b, a.addr, &to_a), 0, "%s: b inserts a", tag);
	LT_CHECK(deliver(&a, to_b, &b, FI_ADDR_UNSPEC, &comp), "%s: a -> b delivered", tag);
	LT_CHECK(comp.src == to_a, "%s: FI_SOURCE gives b's fi_addr of a", tag);

	LT_CHECK_RET(fi_close(&a.av->fid), -FI_EBUSY, "%s: closing a's av in use: busy", tag);

	/* removed: sends and directed receives refuse it */
	LT_CHECK_RET(fi_av_remove(a.av, &to_b, 1, 0), 0, "%s: a removes b", tag);
	LT_CHECK_RET(fi_send(a.ep, buf, sizeof(buf), NULL, to_b, &ctx), -FI_EINVAL,
		     "%s: send to a removed fi_addr", tag);
	LT_CHECK_RET(fi_av_remove(b.av, &to_a, 1, 0), 0, "%s: b removes a", tag);
	LT_CHECK_RET(fi_recv(b.ep, buf, sizeof(buf), NULL, to_a, &ctx), -FI_EINVAL,
		     "%s: directed receive from a removed fi_addr", tag);

	/* reinserted: works again; for FI_AV_MAP the old handle stays refused */
	stale = to_b;
	LT_CHECK_RET(lt_av_insert(&a, b.addr, &to_b_again), 0, "%s: a reinserts b", tag);
	LT_CHECK_RET(lt_av_insert(&b, a.addr, &to_a), 0, "%s: b reinserts a", tag);
	LT_CHECK(deliver(&a, to_b_again, &b, to_a, &comp) && comp.src == to_a,
		 "%s: a -> b after reinsertion, directed receive", tag);
	if (type == FI_AV_MAP) {
		LT_CHECK_RET(fi_send(a.ep, buf, sizeof(buf), NULL, stale, &ctx), -FI_EINVAL,
			     "%s: send to the stale handle", tag);
		LT_CHECK_RET(fi_send(a.ep, buf, sizeof(buf), NULL, to_b_again ^ (1ULL << 35),
				     &ctx), -FI_EINVAL, "%s: send to a forged handle", tag);
		LT_CHECK_RET(fi_recv(b.ep, buf, sizeof(buf), NULL, to_a ^ (1ULL << 35), &ctx),
			     -FI_EINVAL, "%s: directed receive from a forged handle", tag);
	}
	LT_CHECK_RET(fi_send(a.ep, buf, sizeof(buf), NULL, 1ULL << 40, &ctx), -FI_EINVAL,
		     "%s: send to 1 << 40", tag);

	lt_ep_close(&a);
	lt_ep_close(&b);
}

/* ---- user IDs in completions ---- */

static void test_user_ids(struct lt_dom *dom)
{
	struct lt_ep a, b;
	fi_addr_t to_b, ids[1];
	struct lt_comp comp;
	int ret;

	/* per insertion: b knows a by the ID it gave */
	if (!LT_CHECK_RET(node_open(dom, FI_AV_TABLE, 0, &a), 0, "user id: endpoint a"))
		return;
	if (!LT_CHECK_RET(node_open(dom, FI_AV_TABLE, 0, &b), 0, "user id: endpoint b"))
		goto close_a;
	LT_CHECK_RET(lt_av_insert(&a, b.addr, &to_b), 0, "user id: a inserts b");
	ids[0] = 0xfeed;
	ret = fi_av_insert(b.av, a.addr, 1, ids, FI_AV_USER_ID, NULL);
	LT_CHECK(ret == 1 && ids[0] == 0, "user id: b inserts a with ID 0xfeed");
	LT_CHECK(deliver(&a, to_b, &b, FI_ADDR_UNSPEC, &comp), "user id: a -> b delivered");
	LT_CHECK(comp.src == 0xfeed, "[hook] user id: completion reports 0xfeed (got %#lx)",
		 (unsigned long) comp.src);
	lt_ep_close(&b);

	/* opened with FI_AV_USER_ID: FI_ADDR_NOTAVAIL until fi_av_set_user_id */
	if (!LT_CHECK_RET(node_open(dom, FI_AV_MAP, FI_AV_USER_ID, &b), 0,
			  "user id attr: endpoint b"))
		goto close_a;
	fi_av_remove(a.av, &to_b, 1, 0);
	LT_CHECK_RET(lt_av_insert(&a, b.addr, &to_b), 0, "user id attr: a inserts b");
	LT_CHECK_RET(fi_av_insert(b.av, a.addr, 1, ids, 0, NULL), 1, "user id attr: b inserts a");
	LT_CHECK(deliver(&a, to_b, &b, FI_ADDR_UNSPEC, &comp), "user id attr: delivered");
	LT_CHECK(comp.src == FI_ADDR_NOTAVAIL,
		 "[hook] user id attr: FI_ADDR_NOTAVAIL before set_user_id (got %#lx)",
		 (unsigned long) comp.src);
	LT_CHECK_RET(fi_av_set_user_id(b.av, ids[0], 0xbeef, 0), 0, "user id attr: set 0xbeef");
	LT_CHECK(deliver(&a, to_b, &b, ids[0], &comp), "user id attr: delivered, directed");
	LT_CHECK(comp.src == 0xbeef, "[hook] user id attr: completion reports 0xbeef (got %#lx)",
		 (unsigned long) comp.src);
	lt_ep_close(&b);
close_a:
	lt_ep_close(&a);
}

/* ---- removal with operations in flight ---- */

/* Waits for n completions on cq; counts those with errors. false on timeout. */
static bool wait_comps(struct lt_cq *cq, size_t n, int timeout_ms, size_t *errors)
{
	struct lt_comp comp;
	size_t i;

	*errors = 0;
	for (i = 0; i < n; i++) {
		if (!lt_cq_next(cq, &comp, timeout_ms))
			return false;
		if (comp.err)
			(*errors)++;
	}
	return true;
}

static void test_inflight(struct lt_dom *dom)
{
	char *big = malloc(LARGE), small[SMALL];
	fi_addr_t to_b, to_c, to_a, c_from_b;
	struct lt_ep a, b, c;
	struct lt_comp comp;
	int ctx[INFLIGHT], rctx, i;
	size_t errors = 0;
	bool done;

	if (!big || !LT_CHECK_RET(node_open(dom, FI_AV_TABLE, 0, &a), 0, "inflight: endpoint a"))
		goto out;
	if (!LT_CHECK_RET(node_open(dom, FI_AV_TABLE, 0, &b), 0, "inflight: endpoint b"))
		goto close_a;
	if (!LT_CHECK_RET(node_open(dom, FI_AV_TABLE, 0, &c), 0, "inflight: endpoint c"))
		goto close_b;
	lt_fill(big, LARGE, 3);
	LT_CHECK_RET(lt_av_insert(&a, b.addr, &to_b), 0, "inflight: a inserts b");
	LT_CHECK_RET(lt_av_insert(&a, c.addr, &to_c), 0, "inflight: a inserts c");
	LT_CHECK_RET(lt_av_insert(&b, a.addr, &to_a), 0, "inflight: b inserts a");

	/* large sends b never receives: they wait for b, in flight */
	for (i = 0; i < INFLIGHT; i++)
		LT_CHECK_RET(lt_send(&a, big, LARGE, to_b, &ctx[i]), 0, "inflight: send %d", i);
	lt_cq_quiet(&a.tx, 200);
	LT_CHECK_RET(fi_av_remove(a.av, &to_b, 1, 0), 0, "inflight: a removes b");
	done = wait_comps(&a.tx, INFLIGHT, SHORT_MS, &errors);
	LT_CHECK(done && errors == INFLIGHT,
		 "[hook] inflight: the %d sends complete with errors (%zu)", INFLIGHT, errors);

	/* a directed receive from a peer (c, which sends nothing) that is then removed */
	LT_CHECK_RET(lt_av_insert(&b, c.addr, &c_from_b), 0, "inflight: b inserts c");
	LT_CHECK_RET(lt_recv(&b, small, sizeof(small), c_from_b, &rctx), 0,
		     "inflight: b posts a receive from c");
	lt_cq_quiet(&b.rx, 100);
	while (lt_cq_take(&b.rx, &comp))
		;
	LT_CHECK_RET(fi_av_remove(b.av, &c_from_b, 1, 0), 0, "inflight: b removes c");
	LT_CHECK(lt_cq_next(&b.rx, &comp, SHORT_MS) && comp.err && comp.op_context == &rctx,
		 "[hook] inflight: the receive from the removed peer completes with an error");

	/* nothing else broken: a still talks to c */
	LT_CHECK(deliver(&a, to_c, &c, FI_ADDR_UNSPEC, &comp), "inflight: a -> c still works");

	lt_ep_close(&c);
close_b:
	lt_ep_close(&b);
close_a:
	lt_ep_close(&a);
out:
	free(big);
}

/* ---- keys held by enabled endpoints ---- */

static void test_key_busy(struct lt_dom *dom)
{
	struct fi_av_attr av_attr = {.type = FI_AV_TABLE};
	struct fid_av *av;
	struct fid_ep *ep;
	fi_addr_t key;
	int ret;

	if (!LT_CHECK_RET(fi_av_open(dom->domain, &av_attr, &av, NULL), 0, "key busy: av"))
		return;
	LT_CHECK_RET(fi_av_insert_auth_key(av, "job-7", 5, &key, 0), 0, "key busy: key");
	ret = fi_endpoint(dom->domain, dom->info, &ep, NULL);
	if (LT_CHECK_RET(ret, 0, "key busy: endpoint")) {
		struct lt_cq tx, rx;

		lt_cq_open(dom->domain, FI_WAIT_NONE, false, &tx);
		lt_cq_open(dom->domain, FI_WAIT_NONE, false, &rx);
		fi_ep_bind(ep, &av->fid, 0);
		fi_ep_bind(ep, &tx.cq->fid, FI_TRANSMIT);
		fi_ep_bind(ep, &rx.cq->fid, FI_RECV);
		LT_CHECK_RET(fi_enable(ep), 0, "key busy: endpoint enabled");
		LT_CHECK_RET(fi_av_remove(av, &key, 1, FI_AUTH_KEY), -FI_EBUSY,
			     "[hook] key busy: key of an enabled endpoint cannot be removed");
		fi_close(&ep->fid);
		lt_cq_close(&tx);
		lt_cq_close(&rx);
	}
	/* the endpoint is gone (or never held it): the key goes */
	ret = fi_av_remove(av, &key, 1, FI_AUTH_KEY);
	LT_CHECK(ret == 0 || ret == -FI_EINVAL, "key busy: removable once the endpoint closed");
	fi_close(&av->fid);
}

/* fi_av(3): keys need a domain opened with FI_AV_AUTH_KEY. */
static void test_key_domain(struct lt_dom *dom)
{
	struct fi_av_attr av_attr = {.type = FI_AV_TABLE};
	struct fid_av *av;
	fi_addr_t key;
	int ret;

	if (!LT_CHECK_RET(fi_av_open(dom->domain, &av_attr, &av, NULL), 0, "key domain: av"))
		return;
	ret = fi_av_insert_auth_key(av, "job-7", 5, &key, 0);
	LT_CHECK(ret < 0, "[hook] key domain: no keys without FI_AV_AUTH_KEY (%d)", ret);
	fi_close(&av->fid);
}

int main(int argc, char **argv)
{
	struct fi_info *hints, *info;
	struct lt_dom dom;
	int ret;

	lt_begin(argv[0]);
	alarm(HANG_GUARD_S);
	hints = lt_hints(FI_MSG | FI_SOURCE | FI_DIRECTED_RECV);
	info = lt_getinfo_or_skip(hints);
	if (LT_CHECK_RET(lt_dom_open(info, &dom), 0, "fabric and domain")) {
		test_checked(&dom, FI_AV_TABLE, "table");
		test_checked(&dom, FI_AV_MAP, "map");
		test_user_ids(&dom);
		test_inflight(&dom);
		test_key_domain(&dom);
		lt_dom_close(&dom);
	}
	fi_freeinfo(info);

	hints->domain_attr->auth_key_size = FI_AV_AUTH_KEY;
	ret = lt_getinfo(hints, &info);
	if (LT_CHECK_RET(ret, 0, "getinfo with FI_AV_AUTH_KEY")) {
		if (LT_CHECK_RET(lt_dom_open(info, &dom), 0, "auth-key fabric and domain")) {
			test_key_busy(&dom);
			lt_dom_close(&dom);
		}
		fi_freeinfo(info);
	}
	fi_freeinfo(hints);
	return lt_end();
}
