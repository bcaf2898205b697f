/*
 * Bad input through the public API: addresses that are not in the AV, endpoints that are not
 * enabled or not bound, too many iovs, injects that are too large, bad option lengths and
 * names, bad flags and attributes, NULL where the man pages allow or forbid it. Each call must
 * return a negative -FI_E* (the exact one where the man page names it) and never crash or hang:
 * every call runs in a forked child (lt_guarded) with endpoints of its own, so a crash is a failed
 * check, not the end, and a bad call that slipped through cannot disturb the next one. After
 * each bad call the child checks that its endpoints still carry a message.
 */
#include "common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define GUARD_MS 5000

static struct fi_info *info;
static struct lt_dom dom;
static struct lt_ep a, b, c;
static fi_addr_t a_to_b, a_removed;
/* Endpoints in the states under test: not enabled; no CQ; no AV; receive CQ only. */
static struct fid_ep *ep_not_enabled, *ep_no_cq, *ep_no_av, *ep_rx_only;
static struct fid_av *av_spare;
static struct fid_cq *cq_wait_none, *cq_spare;
static struct fid_cntr *cntr_wait_none;
static char buf[1 << 16];
static struct fi_context2 ctx;

static int setup(void);
static bool exchange(void);

#define SETUP_FAILED (1L << 40)

/*
 * In the child: a fabric, domain and endpoints of its own (the parent has none open when it
 * forks, so nothing is shared), connected by a first message; then the bad call; then another
 * message, to see that the bad call left the endpoints working. The result is the call's return
 * times two, plus one if the endpoints stopped working.
 */
static long run_case(void *arg)
{
	long (*const *fn)(void *) = arg;
	long ret;
	bool ok;

	if (setup() || !exchange())
		return SETUP_FAILED;
	ret = (*fn)(NULL);
	/* A bad call that was accepted may have sent a message of its own: nothing to compare. */
	ok = ret >= 0 || exchange();
	return ret * 2 + (ok ? 0 : 1);
}

/* Runs fn in a child; the result must be negative (and not -FI_EAGAIN), or exactly want. */
static void expect(const char *what, long (*fn)(void *), long want)
{
	char got[160];
	long value, ret = 0;
	int status = lt_guarded(run_case, &fn, GUARD_MS, &value);
	bool broke = false;

	if (status == 0 && value == SETUP_FAILED) {
		LT_CHECK(false, "%s: the child could not set up its endpoints", what);
		return;
	}
	if (status == 0) {
		broke = value & 1;
		ret = (value - (broke ? 1 : 0)) / 2;
	} else {
		ret = value;
	}
	lt_guarded_str(status, ret, got, sizeof(got));
	if (want)
		LT_CHECK(status == 0 && ret == want && !broke,
			 "%s: returns %ld (%s), endpoints still work (got %s%s)", what, want,
			 fi_strerror((int) -want), got, broke ? ", endpoints broken" : "");
	else
		LT_CHECK(status == 0 && ret < 0 && ret != -FI_EAGAIN && !broke,
			 "%s: returns a negative error, endpoints still work (got %s%s)", what, got,
			 broke ? ", endpoints broken" : "");
}

/* ---- addresses ---- */

static long send_unknown_addr(void *arg)
{
	return fi_send(a.ep, buf, 16, NULL, 1000, &ctx);
}

static long send_addr_notavail(void *arg)
{
	return fi_send(a.ep, buf, 16, NULL, FI_ADDR_NOTAVAIL, &ctx);
}

static long send_removed_addr(void *arg)
{
	return fi_send(a.ep, buf, 16, NULL, a_removed, &ctx);
}

static long inject_unknown_addr(void *arg)
{
	return fi_inject(a.ep, buf, 8, 1000);
}

static long senddata_unknown_addr(void *arg)
{
	return fi_senddata(a.ep, buf, 16, NULL, 1, 12345, &ctx);
}

/* ---- sizes and counts ---- */

static long sendv_too_many(void *arg)
{
	size_t n = info->tx_attr->iov_limit + 1;
	struct iovec *iov = calloc(n, sizeof(*iov));

	for (size_t i = 0; iov && i < n; i++)
		iov[i] = (struct iovec){.iov_base = buf + i, .iov_len = 1};
	return iov ? fi_sendv(a.ep, iov, NULL, n, a_to_b, &ctx) : -FI_ENOMEM;
}

static long recvv_too_many(void *arg)
{
	size_t n = info->rx_attr->iov_limit + 1;
	struct iovec *iov = calloc(n, sizeof(*iov));

	for (size_t i = 0; iov && i < n; i++)
		iov[i] = (struct iovec){.iov_base = buf + i, .iov_len = 1};
	return iov ? fi_recvv(b.ep, iov, NULL, n, FI_ADDR_UNSPEC, &ctx) : -FI_ENOMEM;
}

static long sendmsg_too_many(void *arg)
{
	size_t n = info->tx_attr->iov_limit + 1;
	struct iovec *iov = calloc(n, sizeof(*iov));
	struct fi_msg msg = {.msg_iov = iov, .iov_count = n, .addr = a_to_b, .context = &ctx};

	for (size_t i = 0; iov && i < n; i++)
		iov[i] = (struct iovec){.iov_base = buf + i, .iov_len = 1};
	return iov ? fi_sendmsg(a.ep, &msg, 0) : -FI_ENOMEM;
}

static long inject_too_big(void *arg)
{
	return fi_inject(a.ep, buf, info->tx_attr->inject_size + 1, a_to_b);
}

static long injectdata_too_big(void *arg)
{
	return fi_injectdata(a.ep, buf, info->tx_attr->inject_size + 1, 5, a_to_b);
}

static long sendmsg_inject_too_big(void *arg)
{
	struct iovec iov = {.iov_base = buf, .iov_len = info->tx_attr->inject_size + 1};
	struct fi_msg msg = {.msg_iov = &iov, .iov_count = 1, .addr = a_to_b, .context = &ctx};

	return fi_sendmsg(a.ep, &msg, FI_INJECT);
}

static long send_too_big(void *arg)
{
	return fi_send(a.ep, buf, info->ep_attr->max_msg_size + 1, NULL, a_to_b, &ctx);
}

/* ---- endpoint states ---- */

static long send_not_enabled(void *arg)
{
	return fi_send(ep_not_enabled, buf, 16, NULL, 0, &ctx);
}

static long recv_not_enabled(void *arg)
{
	return fi_recv(ep_not_enabled, buf, 16, NULL, FI_ADDR_UNSPEC, &ctx);
}

static long inject_not_enabled(void *arg)
{
	return fi_inject(ep_not_enabled, buf, 1, 0);
}

static long enable_no_cq(void *arg)
{
	return fi_enable(ep_no_cq);
}

static long enable_no_av(void *arg)
{
	return fi_enable(ep_no_av);
}

/* Enabled with only a receive CQ, or refused: a send must not crash either way. */
static long send_no_tx_cq(void *arg)
{
	struct fi_context2 rctx;
	long ret = fi_enable(ep_rx_only);

	if (ret)
		return ret;
	(void) fi_recv(ep_rx_only, buf, 16, NULL, FI_ADDR_UNSPEC, &rctx);
	return fi_send(ep_rx_only, buf, 16, NULL, 0, &ctx);
}

static long bind_after_enable(void *arg)
{
	return fi_ep_bind(a.ep, &cq_spare->fid, FI_TRANSMIT);
}

static long bind_av_after_enable(void *arg)
{
	return fi_ep_bind(a.ep, &av_spare->fid, 0);
}

/* ---- options, controls, names ---- */

static long getopt_unknown(void *arg)
{
	size_t v, len = sizeof(v);

	return fi_getopt(&a.ep->fid, FI_OPT_ENDPOINT, 12345, &v, &len);
}

static long setopt_unknown(void *arg)
{
	size_t v = 1;

	return fi_setopt(&a.ep->fid, FI_OPT_ENDPOINT, 12345, &v, sizeof(v));
}

static long getopt_bad_level(void *arg)
{
	size_t v, len = sizeof(v);

	return fi_getopt(&a.ep->fid, 99, FI_OPT_MIN_MULTI_RECV, &v, &len);
}

static long setopt_short_len(void *arg)
{
	int v = 64;

	return fi_setopt(&a.ep->fid, FI_OPT_ENDPOINT, FI_OPT_MIN_MULTI_RECV, &v, sizeof(v));
}

static long getopt_short_len(void *arg)
{
	int v;
	size_t len = sizeof(v);

	return fi_getopt(&a.ep->fid, FI_OPT_ENDPOINT, FI_OPT_MIN_MULTI_RECV, &v, &len);
}

static long control_unknown(void *arg)
{
	int v = 0;

	return fi_control(&a.ep->fid, 9999, &v);
}

/* fi_cm(3): a buffer too small (here none at all) gives -FI_ETOOSMALL and the size needed. */
static long getname_null(void *arg)
{
	size_t len = 0;
	int ret = fi_getname(&a.ep->fid, NULL, &len);

	return ret == -FI_ETOOSMALL && len == 0 ? -FI_EOTHER : ret;
}

/* ---- opening objects with bad attributes ---- */

static long cq_bad_format(void *arg)
{
	struct fi_cq_attr attr = {.format = (enum fi_cq_format) 99};
	struct fid_cq *cq;

	return fi_cq_open(dom.domain, &attr, &cq, NULL);
}

static long cq_bad_wait(void *arg)
{
	struct fi_cq_attr attr = {.format = FI_CQ_FORMAT_CONTEXT,
				  .wait_obj = (enum fi_wait_obj) 99};
	struct fid_cq *cq;

	return fi_cq_open(dom.domain, &attr, &cq, NULL);
}

static long cq_bad_flags(void *arg)
{
	struct fi_cq_attr attr = {.format = FI_CQ_FORMAT_CONTEXT, .flags = FI_MULTI_RECV};
	struct fid_cq *cq;

	return fi_cq_open(dom.domain, &attr, &cq, NULL);
}

/* fi_cntr(3): flags "are reserved for future use, and must be set to 0". */
static long cntr_bad_flags(void *arg)
{
	struct fi_cntr_attr attr = {.events = FI_CNTR_EVENTS_COMP, .flags = 1ULL << 40};
	struct fid_cntr *cntr;

	return fi_cntr_open(dom.domain, &attr, &cntr, NULL);
}

static long cntr_bad_events(void *arg)
{
	struct fi_cntr_attr attr = {.events = (enum fi_cntr_events) 99};
	struct fid_cntr *cntr;

	return fi_cntr_open(dom.domain, &attr, &cntr, NULL);
}

static long ep_bind_bad_flags(void *arg)
{
	struct fid_ep *ep;
	long ret = fi_endpoint(dom.domain, info, &ep, NULL);

	/* Could not even open the endpoint: not what is under test, so report a non-error. */
	if (ret)
		return 1;
	return fi_ep_bind(ep, &cq_spare->fid, FI_TRANSMIT | FI_REMOTE_WRITE | FI_MULTICAST);
}

static long endpoint_null_info(void *arg)
{
	struct fid_ep *ep;

	return fi_endpoint(dom.domain, NULL, &ep, NULL);
}

static long endpoint_wrong_type(void *arg)
{
	struct fi_info *copy = fi_dupinfo(info);
	struct fid_ep *ep;

	if (!copy)
		return 1;
	copy->ep_attr->type = FI_EP_DGRAM;
	return fi_endpoint(dom.domain, copy, &ep, NULL);
}

static long domain_null_info(void *arg)
{
	struct fid_domain *domain;

	return fi_domain(dom.fabric, NULL, &domain, NULL);
}

/* fi_cq(3)/fi_cntr(3): blocking on an object without a wait object is invalid; never a hang. */
static long sread_wait_none(void *arg)
{
	struct fi_cq_entry e;

	return fi_cq_sread(cq_wait_none, &e, 1, NULL, 100);
}

static long cntr_wait_none_wait(void *arg)
{
	return fi_cntr_wait(cntr_wait_none, 1, 100);
}

/* ---- NULL where the API allows it: these must work ---- */

static void test_null_allowed(void)
{
	struct fi_context2 sctx, rctx;
	struct fi_msg smsg = {.msg_iov = NULL, .iov_count = 0, .addr = a_to_b, .context = &sctx};
	struct lt_comp comp;
	ssize_t ret;

	LT_CHECK_RET(lt_recv(&b, NULL, 0, FI_ADDR_UNSPEC, &rctx), 0,
		     "NULL buffer, length 0: fi_recv");
	LT_CHECK_RET(lt_send(&a, NULL, 0, a_to_b, &sctx), 0, "NULL buffer, length 0: fi_send");
	LT_CHECK(lt_cq_next(&b.rx, &comp, LT_TIMEOUT_MS) && !comp.err && comp.len == 0 &&
			 comp.op_context == &rctx,
		 "NULL buffer, length 0: the empty message arrives");
	LT_CHECK(lt_cq_next(&a.tx, &comp, LT_TIMEOUT_MS) && !comp.err,
		 "NULL buffer, length 0: the send completes");

	LT_CHECK_RET(lt_recv(&b, buf, 16, FI_ADDR_UNSPEC, &rctx), 0, "fi_sendmsg, no iov: fi_recv");
	ret = LT_RETRY(fi_sendmsg(a.ep, &smsg, 0));
	LT_CHECK_RET(ret, 0, "fi_sendmsg with no iov (iov_count 0)");
	LT_CHECK(lt_cq_next(&b.rx, &comp, LT_TIMEOUT_MS) && !comp.err && comp.len == 0,
		 "fi_sendmsg with no iov: an empty message arrives");
	LT_CHECK(lt_cq_next(&a.tx, &comp, LT_TIMEOUT_MS) && !comp.err,
		 "fi_sendmsg with no iov: the send completes");
}

/* One message from a to b, checked, without printing (runs in the children). */
static bool exchange(void)
{
	struct fi_context2 sctx, rctx;
	char msg[32] = "still works", rbuf[32] = "";
	struct lt_comp comp;
	bool ok;

	if (lt_recv(&b, rbuf, sizeof(rbuf), FI_ADDR_UNSPEC, &rctx) ||
	    lt_send(&a, msg, sizeof(msg), a_to_b, &sctx))
		return false;
	ok = lt_cq_next(&b.rx, &comp, LT_TIMEOUT_MS) && !comp.err && comp.op_context == &rctx &&
	     !strcmp(rbuf, msg);
	ok &= lt_cq_next(&a.tx, &comp, LT_TIMEOUT_MS) && !comp.err && comp.op_context == &sctx;
	return ok;
}

/* After all that, the good endpoints still work. */
static void test_still_works(void)
{
	struct fi_context2 sctx, rctx;
	char msg[32] = "still works", rbuf[32] = "";
	struct lt_comp comp;

	LT_CHECK_RET(lt_recv(&b, rbuf, sizeof(rbuf), FI_ADDR_UNSPEC, &rctx), 0, "after: fi_recv");
	LT_CHECK_RET(lt_send(&a, msg, sizeof(msg), a_to_b, &sctx), 0, "after: fi_send");
	LT_CHECK(lt_cq_next(&b.rx, &comp, LT_TIMEOUT_MS) && !comp.err && !strcmp(rbuf, msg),
		 "after: a message still goes through");
	LT_CHECK(lt_cq_next(&a.tx, &comp, LT_TIMEOUT_MS) && !comp.err, "after: send completes");
}

static long close_ep(void *arg)
{
	return fi_close(arg);
}

/* fi_close in a child first; the real close only if that went well (else it is left open). */
static void close_half_done(const char *what, struct fid_ep *ep)
{
	char got[160];
	long ret;
	int status = lt_guarded(close_ep, &ep->fid, GUARD_MS, &ret);

	LT_CHECK(status == 0 && ret == 0, "fi_close of %s returns 0 (got %s)", what,
		 lt_guarded_str(status, ret, got, sizeof(got)));
	if (status == 0 && ret == 0)
		fi_close(&ep->fid);
}

static int setup(void)
{
	struct fi_cq_attr none = {.format = FI_CQ_FORMAT_CONTEXT, .wait_obj = FI_WAIT_NONE};
	struct fi_cntr_attr cnone = {.events = FI_CNTR_EVENTS_COMP, .wait_obj = FI_WAIT_NONE};
	struct fi_av_attr av_attr = {.type = FI_AV_TABLE};
	fi_addr_t b_to_a;
	int ret;

	ret = lt_dom_open(info, &dom);
	if (!ret)
		ret = lt_pair_open(&dom, NULL, NULL, &a, &b, &a_to_b, &b_to_a);
	if (!ret)
		ret = lt_ep_open(&dom, NULL, &c);
	/* An address that was inserted and removed again. */
	if (!ret)
		ret = lt_av_insert(&a, c.addr, &a_removed);
	if (!ret)
		ret = fi_av_remove(a.av, &a_removed, 1, 0);
	if (!ret)
		ret = fi_cq_open(dom.domain, &none, &cq_wait_none, NULL);
	if (!ret)
		ret = fi_cq_open(dom.domain, &none, &cq_spare, NULL);
	if (!ret)
		ret = fi_cntr_open(dom.domain, &cnone, &cntr_wait_none, NULL);
	if (!ret)
		ret = fi_av_open(dom.domain, &av_attr, &av_spare, NULL);
	if (ret)
		return ret;

	/* Not enabled: everything bound. */
	ret = fi_endpoint(dom.domain, info, &ep_not_enabled, NULL);
	if (!ret)
		ret = fi_ep_bind(ep_not_enabled, &c.av->fid, 0);
	if (!ret)
		ret = fi_ep_bind(ep_not_enabled, &cq_spare->fid, FI_TRANSMIT | FI_RECV);
	/* No CQ bound. */
	if (!ret)
		ret = fi_endpoint(dom.domain, info, &ep_no_cq, NULL);
	if (!ret)
		ret = fi_ep_bind(ep_no_cq, &c.av->fid, 0);
	/* No AV bound. */
	if (!ret)
		ret = fi_endpoint(dom.domain, info, &ep_no_av, NULL);
	if (!ret)
		ret = fi_ep_bind(ep_no_av, &cq_spare->fid, FI_TRANSMIT | FI_RECV);
	/* A receive CQ only. */
	if (!ret)
		ret = fi_endpoint(dom.domain, info, &ep_rx_only, NULL);
	if (!ret)
		ret = fi_ep_bind(ep_rx_only, &c.av->fid, 0);
	if (!ret)
		ret = fi_ep_bind(ep_rx_only, &cq_spare->fid, FI_RECV);
	return ret;
}

int main(int argc, char **argv)
{
	struct fi_info *hints;
	int ret;

	(void) argc;
	lt_begin(argv[0]);
	hints = lt_hints(FI_MSG);
	info = lt_getinfo_or_skip(hints);
	lt_fill(buf, sizeof(buf), 1);

	/* Each of these runs in a child of its own, which sets up its own objects. */
	expect("fi_send to an fi_addr never inserted", send_unknown_addr, 0);
	expect("fi_send to FI_ADDR_NOTAVAIL", send_addr_notavail, 0);
	expect("fi_send to an fi_addr removed from the AV", send_removed_addr, 0);
	expect("fi_inject to an fi_addr never inserted", inject_unknown_addr, 0);
	expect("fi_senddata to an fi_addr never inserted", senddata_unknown_addr, 0);

	expect("fi_sendv with iov_limit + 1 iovs", sendv_too_many, 0);
	expect("fi_recvv with iov_limit + 1 iovs", recvv_too_many, 0);
	expect("fi_sendmsg with iov_limit + 1 iovs", sendmsg_too_many, 0);
	expect("fi_inject of inject_size + 1 bytes", inject_too_big, 0);
	expect("fi_injectdata of inject_size + 1 bytes", injectdata_too_big, 0);
	expect("fi_sendmsg FI_INJECT of inject_size + 1 bytes", sendmsg_inject_too_big, 0);
	if (info->ep_attr->max_msg_size < SIZE_MAX)
		expect("fi_send of max_msg_size + 1 bytes", send_too_big, 0);
	else
		lt_note("max_msg_size is SIZE_MAX: no send can be too large");

	expect("fi_send on an endpoint not enabled", send_not_enabled, -FI_EOPBADSTATE);
	expect("fi_recv on an endpoint not enabled", recv_not_enabled, -FI_EOPBADSTATE);
	expect("fi_inject on an endpoint not enabled", inject_not_enabled, -FI_EOPBADSTATE);
	expect("fi_enable without a CQ bound", enable_no_cq, -FI_ENOCQ);
	/* fi_endpoint(3) names no code for this one (-FI_ENOAV would be the precise one). */
	expect("fi_enable without an AV bound", enable_no_av, 0);
	expect("send on an endpoint without a transmit CQ: refused at fi_enable or at fi_send",
	       send_no_tx_cq, 0);
	expect("fi_ep_bind of a CQ after fi_enable", bind_after_enable, 0);
	expect("fi_ep_bind of an AV after fi_enable", bind_av_after_enable, 0);

	expect("fi_getopt of an unknown option", getopt_unknown, -FI_ENOPROTOOPT);
	expect("fi_setopt of an unknown option", setopt_unknown, -FI_ENOPROTOOPT);
	expect("fi_getopt at an unknown level", getopt_bad_level, -FI_ENOPROTOOPT);
	expect("fi_setopt FI_OPT_MIN_MULTI_RECV with optlen sizeof(int)", setopt_short_len, 0);
	expect("fi_getopt FI_OPT_MIN_MULTI_RECV with optlen sizeof(int)", getopt_short_len, 0);
	expect("fi_control with an unknown command", control_unknown, 0);
	expect("fi_getname with a NULL buffer of length 0", getname_null, -FI_ETOOSMALL);

	expect("fi_cq_open with format 99", cq_bad_format, 0);
	expect("fi_cq_open with wait_obj 99", cq_bad_wait, 0);
	expect("fi_cq_open with flags FI_MULTI_RECV", cq_bad_flags, 0);
	expect("fi_cntr_open with reserved flags set", cntr_bad_flags, 0);
	expect("fi_cntr_open with events 99", cntr_bad_events, 0);
	expect("fi_ep_bind of a CQ with flags FI_REMOTE_WRITE|FI_MULTICAST", ep_bind_bad_flags, 0);
	expect("fi_endpoint with a NULL info", endpoint_null_info, 0);
	expect("fi_endpoint with an info for FI_EP_DGRAM", endpoint_wrong_type, 0);
	expect("fi_domain with a NULL info", domain_null_info, 0);
	expect("fi_cq_sread on a CQ with FI_WAIT_NONE", sread_wait_none, 0);
	expect("fi_cntr_wait on a counter with FI_WAIT_NONE", cntr_wait_none_wait, 0);

	/* Valid uses, in this process. */
	ret = setup();
	if (!LT_CHECK_RET(ret, 0, "endpoints for the valid NULL uses"))
		return lt_end();
	test_still_works();
	test_null_allowed();
	test_still_works();

	/* Endpoints opened but never completed or enabled close cleanly too. */
	close_half_done("an endpoint bound but never enabled", ep_not_enabled);
	close_half_done("an endpoint with no CQ bound", ep_no_cq);
	close_half_done("an endpoint with no AV bound", ep_no_av);
	close_half_done("an endpoint with only a receive CQ", ep_rx_only);
	lt_ep_close(&a);
	lt_ep_close(&b);
	lt_ep_close(&c);
	fi_close(&av_spare->fid);
	fi_close(&cq_wait_none->fid);
	fi_close(&cq_spare->fid);
	fi_close(&cntr_wait_none->fid);
	lt_dom_close(&dom);
	fi_freeinfo(info);
	fi_freeinfo(hints);
	return lt_end();
}
