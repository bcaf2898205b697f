/* The FI_MSG tests' endpoints and checks (msg_fixture.h). */
#include "msg_fixture.h"

struct fi_info *info;
struct lt_dom dom;
struct lt_ep a, b, c;
fi_addr_t a_to_b, b_to_a, c_to_b;
static struct fi_info *hints;

int msg_fixture_open(const char *prog)
{
	int ret;

	lt_begin(prog);
	hints = lt_hints(FI_MSG | FI_SOURCE);
	hints->tx_attr->msg_order = FI_ORDER_SAS;
	hints->rx_attr->msg_order = FI_ORDER_SAS;
	info = lt_getinfo_or_skip(hints);
	LT_CHECK(info->caps & FI_SOURCE, "FI_SOURCE granted");
	LT_CHECK(info->tx_attr->msg_order & FI_ORDER_SAS, "FI_ORDER_SAS granted");

	ret = lt_dom_open(info, &dom);
	if (!ret)
		ret = lt_pair_open(&dom, NULL, NULL, &a, &b, &a_to_b, &b_to_a);
	if (!ret)
		ret = lt_ep_open(&dom, NULL, &c);
	if (!ret)
		ret = lt_av_insert(&c, b.addr, &c_to_b);
	return LT_CHECK_RET(ret, 0, "three endpoints opened, addresses inserted") ? 0 : -1;
}

void msg_fixture_close(void)
{
	lt_ep_close(&a);
	lt_ep_close(&b);
	lt_ep_close(&c);
	lt_dom_close(&dom);
	fi_freeinfo(info);
	fi_freeinfo(hints);
}

bool next_comp(struct lt_cq *cq, struct lt_comp *comp, const char *what)
{
	if (lt_cq_next(cq, comp, LT_TIMEOUT_MS))
		return true;
	LT_CHECK(false, "%s: completion within %d ms (last CQ error %d)", what, LT_TIMEOUT_MS,
		 cq->last_ret);
	return false;
}

bool check_rx(const struct lt_comp *comp, void *ctx, size_t len, const char *what)
{
	return LT_CHECK(!comp->err && comp->op_context == ctx && comp->len == len &&
				(comp->flags & (FI_RECV | FI_MSG)) == (FI_RECV | FI_MSG),
			"%s: receive completion (err %d, context %s, len %zu/%zu, flags %#llx)",
			what, comp->err, comp->op_context == ctx ? "ok" : "WRONG", comp->len, len,
			(unsigned long long) comp->flags);
}

bool wait_tx(struct lt_ep *ep, void *ctx, const char *what)
{
	struct lt_comp comp;

	if (!next_comp(&ep->tx, &comp, what))
		return false;
	return LT_CHECK(!comp.err && comp.op_context == ctx &&
				(comp.flags & (FI_SEND | FI_MSG)) == (FI_SEND | FI_MSG),
			"%s: send completion (err %d, context %s, flags %#llx)", what, comp.err,
			comp.op_context == ctx ? "ok" : "WRONG", (unsigned long long) comp.flags);
}

void check_no_stray(const char *section)
{
	struct lt_ep *eps[] = {&a, &b, &c};
	size_t n = 0;
	struct lt_comp comp;

	lt_cq_quiet(&a.tx, 50);
	for (size_t i = 0; i < 3; i++) {
		while (lt_cq_take(&eps[i]->tx, &comp))
			n++;
		while (lt_cq_take(&eps[i]->rx, &comp))
			n++;
	}
	LT_CHECK(n == 0, "%s: no stray completions left (%zu)", section, n);
}
