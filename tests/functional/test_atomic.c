/*
 * Atomics (fi_atomic(3)) through the public API: validity and fi_query_atomic; every
 * operation and datatype the provider reports valid, in all three forms, checked against the
 * same arithmetic applied locally (util/atomic.h, unit-tested on its own), so what this
 * checks is the transport: operands, compare values and old values where they belong;
 * vectors, remote CQ data, inject and the counters; counts far above one message (operands and
 * old values read with the core's RMA); what the target refuses (an error completion, the
 * target going on); bad arguments; and atomicity: two other processes adding to one counter
 * through two endpoints of this process, each progressed by its own thread. Over tcp and net
 * (run_over_net.sh).
 */
#include "config.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include <rdma/fi_atomic.h>

#include "tests/functional/common.h"
#include "util/atomic.h"

#define REGION (4u << 20)
#define BIG_COUNT 100000u       /* uint64 elements: 800 KB, above every eager size */
#define RACE_OPS 1000u          /* per process in the race */

static struct fi_info *info;
static struct lt_dom dom;
static struct lt_ep x, y;
static fi_addr_t x_to_y;
static uint8_t *x_buf, *x_res, *x_cmp, *y_buf;
static struct fid_mr *y_mr, *y_ro_mr;
static uint64_t y_ro[4];        /* registered for remote reads only */
static struct fid_cntr *cntr_w, *cntr_r, *cntr_rw, *cntr_rr;

static struct fid_cntr *cntr_open(void)
{
	struct fi_cntr_attr attr = { .events = FI_CNTR_EVENTS_COMP };
	struct fid_cntr *c = NULL;

	if (fi_cntr_open(dom.domain, &attr, &c, NULL))
		return NULL;
	return c;
}

/* Waits for ctx's completion on the initiator's transmit CQ: 0, or its error (positive). */
static struct lt_ep *initiator = &x;

static int wait_tx(void *ctx)
{
	struct lt_comp comp;

	if (!lt_cq_next(&initiator->tx, &comp, LT_TIMEOUT_MS))
		return -1;
	if (comp.op_context != ctx)
		return -2;
	return comp.err;
}

/* ---- values of every datatype ---- */

/* Element i of a pattern: a small number, so that every operation stays exact. */
static void put_value(enum fi_datatype dt, uint8_t *p, int v)
{
	size_t size = util_atomic_dt_size(dt);

	memset(p, 0, size);
	switch (dt) {
	case FI_FLOAT: { float f = (float) v; memcpy(p, &f, sizeof(f)); break; }
	case FI_DOUBLE: { double d = v; memcpy(p, &d, sizeof(d)); break; }
	case FI_LONG_DOUBLE: { long double d = v; memcpy(p, &d, 10); break; }
	case FI_FLOAT_COMPLEX: { float f[2] = { (float) v, (float) (v % 3) };
		memcpy(p, f, sizeof(f)); break; }
	case FI_DOUBLE_COMPLEX: { double d[2] = { v, v % 3 }; memcpy(p, d, sizeof(d)); break; }
	case FI_LONG_DOUBLE_COMPLEX: { long double re = v, im = v % 3;
		memcpy(p, &re, 10); memcpy(p + size / 2, &im, 10); break; }
	default:
		/* integers, little-endian: the low byte */
		p[0] = (uint8_t) v;
		break;
	}
}

static void fill(enum fi_datatype dt, uint8_t *buf, size_t count, int seed)
{
	size_t size = util_atomic_dt_size(dt);

	for (size_t i = 0; i < count; i++)
		put_value(dt, buf + i * size, (int) ((i * 7 + (size_t) seed) % 13) + 1);
}

/* Whether two arrays hold the same values (a long double's padding bytes left out). */
static bool same(enum fi_datatype dt, const uint8_t *a, const uint8_t *b, size_t count)
{
	size_t size = util_atomic_dt_size(dt);

	for (size_t i = 0; i < count; i++) {
		const uint8_t *p = a + i * size, *q = b + i * size;

		if (dt == FI_LONG_DOUBLE) {
			if (memcmp(p, q, 10))
				return false;
		} else if (dt == FI_LONG_DOUBLE_COMPLEX) {
			if (memcmp(p, q, 10) || memcmp(p + 16, q + 16, 10))
				return false;
		} else if (memcmp(p, q, size)) {
			return false;
		}
	}
	return true;
}

/* ---- validity ---- */

static void check_valid(void)
{
	struct fi_atomic_attr attr;
	size_t count = 0;

	LT_CHECK(info->caps & FI_ATOMIC, "fi_getinfo offers FI_ATOMIC");
	LT_CHECK_RET(fi_atomicvalid(x.ep, FI_UINT64, FI_SUM, &count), 0, "FI_SUM on FI_UINT64");
	LT_CHECK(count >= BIG_COUNT, "takes at least %u elements (%zu)", BIG_COUNT, count);
	LT_CHECK_RET(fi_fetch_atomicvalid(x.ep, FI_DOUBLE_COMPLEX, FI_ATOMIC_READ, &count), 0,
		     "FI_ATOMIC_READ on FI_DOUBLE_COMPLEX, fetching");
	LT_CHECK_RET(fi_compare_atomicvalid(x.ep, FI_UINT128, FI_MSWAP, &count), 0,
		     "FI_MSWAP on FI_UINT128, comparing");
	LT_CHECK_RET(fi_atomicvalid(x.ep, FI_UINT64, FI_ATOMIC_READ, &count), -FI_EOPNOTSUPP,
		     "FI_ATOMIC_READ has no write form");
	LT_CHECK_RET(fi_atomicvalid(x.ep, FI_UINT64, FI_CSWAP, &count), -FI_EOPNOTSUPP,
		     "FI_CSWAP is a compare form only");
	LT_CHECK_RET(fi_fetch_atomicvalid(x.ep, FI_DOUBLE, FI_BOR, &count), -FI_EOPNOTSUPP,
		     "FI_BOR is not defined on reals");
	LT_CHECK_RET(fi_atomicvalid(x.ep, FI_FLOAT_COMPLEX, FI_MIN, &count), -FI_EOPNOTSUPP,
		     "FI_MIN is not defined on complex numbers");
	LT_CHECK_RET(fi_atomicvalid(x.ep, (enum fi_datatype) 99, FI_SUM, &count), -FI_EOPNOTSUPP,
		     "an unknown datatype");
	LT_CHECK_RET(fi_atomicvalid(x.ep, FI_UINT64, FI_SUM, NULL), -FI_EINVAL, "no count");

	LT_CHECK_RET(fi_query_atomic(dom.domain, FI_INT32, FI_MAX, &attr, 0), 0,
		     "fi_query_atomic FI_MAX on FI_INT32");
	LT_CHECK(attr.size == 4 && attr.count >= BIG_COUNT, "element size 4, count %zu",
		 attr.count);
	LT_CHECK_RET(fi_query_atomic(dom.domain, FI_INT32, FI_CSWAP_GE, &attr, FI_COMPARE_ATOMIC),
		     0, "fi_query_atomic FI_CSWAP_GE with FI_COMPARE_ATOMIC");
	LT_CHECK_RET(fi_query_atomic(dom.domain, FI_INT32, FI_CSWAP_GE, &attr, FI_FETCH_ATOMIC),
		     -FI_EOPNOTSUPP, "but not with FI_FETCH_ATOMIC");
	LT_CHECK_RET(fi_query_atomic(dom.domain, FI_INT32, FI_SUM, &attr,
				     FI_FETCH_ATOMIC | FI_COMPARE_ATOMIC), -FI_EBADFLAGS,
		     "fetch and compare together");
	LT_CHECK_RET(fi_query_atomic(dom.domain, FI_INT32, FI_SUM, &attr, FI_TAGGED),
		     -FI_EOPNOTSUPP, "tagged atomics are not offered");
	LT_CHECK_RET(fi_query_atomic(dom.domain, FI_INT32, FI_SUM, NULL, 0), -FI_EINVAL,
		     "no attributes");
}

/* ---- every operation and datatype ---- */

/* One operation of count elements at offset off of y's region, against the local result. */
static bool check_one(enum util_atomic_kind kind, enum fi_op op, enum fi_datatype dt,
		      size_t count, size_t off)
{
	size_t size = util_atomic_dt_size(dt), len = count * size;
	uint8_t *ref = malloc(len), *old = malloc(len);
	bool ok = false;
	ssize_t ret;

	if (!ref || !old)
		goto out;
	fill(dt, y_buf + off, count, 2);
	fill(dt, x_buf, count, 5);
	fill(dt, x_cmp, count, 2);
	/* every other compare value differs from the target's */
	for (size_t i = 1; i < count; i += 2)
		memcpy(x_cmp + i * size, x_buf + i * size, size);
	memset(x_res, 0xee, len);
	memcpy(ref, y_buf + off, len);
	util_atomic_apply(op, dt, ref, op == FI_ATOMIC_READ ? NULL : x_buf,
			  kind == UTIL_ATOMIC_COMPARE ? x_cmp : NULL, old, count);
	if (kind == UTIL_ATOMIC_WRITE)
		ret = fi_atomic(x.ep, x_buf, count, NULL, x_to_y, off, 1, dt, op, x_buf);
	else if (kind == UTIL_ATOMIC_FETCH)
		ret = fi_fetch_atomic(x.ep, x_buf, count, NULL, x_res, NULL, x_to_y, off, 1, dt,
				      op, x_buf);
	else
		ret = fi_compare_atomic(x.ep, x_buf, count, NULL, x_cmp, NULL, x_res, NULL, x_to_y,
					off, 1, dt, op, x_buf);
	if (ret || wait_tx(x_buf))
		goto out;
	ok = same(dt, y_buf + off, ref, count) &&
	     (kind == UTIL_ATOMIC_WRITE || same(dt, x_res, old, count));
out:
	free(ref);
	free(old);
	return ok;
}

static void check_all_ops(void)
{
	static const char *kinds[] = { "fi_atomic", "fi_fetch_atomic", "fi_compare_atomic" };
	unsigned done = 0, failed = 0;
	size_t count;

	for (int kind = UTIL_ATOMIC_WRITE; kind <= UTIL_ATOMIC_COMPARE; kind++) {
		for (int op = 0; op < 32; op++) {
			for (int dt = 0; dt < 32; dt++) {
				int ret = kind == UTIL_ATOMIC_WRITE ?
					  fi_atomicvalid(x.ep, dt, op, &count) :
					  kind == UTIL_ATOMIC_FETCH ?
					  fi_fetch_atomicvalid(x.ep, dt, op, &count) :
					  fi_compare_atomicvalid(x.ep, dt, op, &count);

				if (ret)
					continue;
				done++;
				/* 5 elements, at an offset that is no multiple of the size */
				if (!check_one(kind, op, dt, 5, 4096 + 3)) {
					failed++;
					LT_CHECK(false, "%s op %d datatype %d", kinds[kind], op, dt);
				}
			}
		}
	}
	LT_CHECK(done > 300 && !failed, "%u operations of every form and datatype, as computed "
		 "locally (%u wrong)", done, failed);
}

/* ---- vectors, remote CQ data, inject, counters, large counts ---- */

static void check_forms(void)
{
	uint64_t w = fi_cntr_read(cntr_w), r = fi_cntr_read(cntr_r);
	uint64_t rw = fi_cntr_read(cntr_rw), rr = fi_cntr_read(cntr_rr);
	uint64_t *tgt = (uint64_t *) (y_buf + 64), *op = (uint64_t *) x_buf;
	uint64_t *res = (uint64_t *) x_res, *cmp = (uint64_t *) x_cmp;
	struct fi_ioc iov[3] = { { op, 1 }, { op + 8, 2 }, { op + 16, 3 } };
	struct fi_ioc resv[2] = { { res, 4 }, { res + 10, 2 } };
	struct fi_ioc cmpv[1] = { { cmp, 6 } };
	struct fi_rma_ioc rma = { .addr = 64, .count = 6, .key = 1 };
	struct fi_msg_atomic msg = { .msg_iov = iov, .iov_count = 3, .addr = x_to_y,
				     .rma_iov = &rma, .rma_iov_count = 1, .datatype = FI_UINT64,
				     .op = FI_SUM, .context = x_buf, .data = 0xda7a };
	uint64_t vals[6] = { 1, 2, 3, 4, 5, 6 };
	struct lt_comp comp;

	for (int i = 0; i < 6; i++)
		tgt[i] = 100 * (uint64_t) i;
	op[0] = 1; op[8] = 2; op[9] = 3; op[16] = 4; op[17] = 5; op[18] = 6;
	LT_CHECK_RET(LT_RETRY(fi_atomicmsg(x.ep, &msg, FI_REMOTE_CQ_DATA | FI_COMPLETION)), 0,
		     "fi_atomicmsg of three ioc with remote CQ data");
	LT_CHECK_RET(wait_tx(x_buf), 0, "completes");
	LT_CHECK(tgt[0] == 1 && tgt[1] == 102 && tgt[2] == 203 && tgt[3] == 304 &&
		 tgt[4] == 405 && tgt[5] == 506, "every element added where it belongs");
	if (LT_CHECK(lt_cq_next(&y.rx, &comp, LT_TIMEOUT_MS), "the target's CQ has an entry"))
		LT_CHECK(comp.err == 0 && comp.data == 0xda7a &&
			 (comp.flags & (FI_ATOMIC | FI_REMOTE_WRITE | FI_REMOTE_CQ_DATA)) ==
			 (FI_ATOMIC | FI_REMOTE_WRITE | FI_REMOTE_CQ_DATA),
			 "with the data and FI_ATOMIC|FI_REMOTE_WRITE|FI_REMOTE_CQ_DATA");

	LT_CHECK_RET(LT_RETRY(fi_fetch_atomicv(x.ep, iov, NULL, 3, resv, NULL, 2, x_to_y, 64, 1,
					       FI_UINT64, FI_SUM, x_buf)), 0,
		     "fi_fetch_atomicv, results in two ioc");
	LT_CHECK_RET(wait_tx(x_buf), 0, "completes");
	LT_CHECK(res[0] == 1 && res[1] == 102 && res[2] == 203 && res[3] == 304 &&
		 res[10] == 405 && res[11] == 506 && tgt[5] == 512,
		 "the old values in the result vector, the new ones at the target");

	memcpy(cmp, tgt, sizeof(vals));
	cmp[1] = 7;                /* element 1 does not match: unchanged */
	LT_CHECK_RET(LT_RETRY(fi_compare_atomicv(x.ep, (struct fi_ioc[]) { { vals, 6 } }, NULL, 1,
						 cmpv, NULL, 1, resv, NULL, 2, x_to_y, 64, 1,
						 FI_UINT64, FI_CSWAP, x_buf)), 0,
		     "fi_compare_atomicv");
	LT_CHECK_RET(wait_tx(x_buf), 0, "completes");
	LT_CHECK(tgt[0] == 1 && tgt[1] == 104 && tgt[2] == 3 && tgt[5] == 6 && res[1] == 104,
		 "swapped where the compare value matched, and only there");

	LT_CHECK(fi_cntr_read(cntr_w) == w + 1 && fi_cntr_read(cntr_r) == r + 2 &&
		 fi_cntr_read(cntr_rw) == rw + 1 && fi_cntr_read(cntr_rr) == rr + 2,
		 "FI_WRITE, FI_READ, FI_REMOTE_WRITE and FI_REMOTE_READ counted (write form: "
		 "writes, the others: reads)");

	/* inject: no completion, counted; the buffer may change at once */
	{
		uint64_t before = fi_cntr_read(cntr_w), one = 1000;

		LT_CHECK_RET(LT_RETRY(fi_inject_atomic(x.ep, &one, 1, x_to_y, 64, 1, FI_UINT64,
						       FI_SUM)), 0, "fi_inject_atomic");
		one = 0;
		for (uint64_t end = lt_now_ms() + LT_TIMEOUT_MS;
		     fi_cntr_read(cntr_w) == before && lt_now_ms() < end;)
			lt_progress();
		LT_CHECK(tgt[0] == 1001, "fi_inject_atomic: added");
		LT_CHECK_RET(lt_cq_quiet(&x.tx, 20), 0, "fi_inject_atomic: no completion");
	}
}

/* Counts far above one message: operands and old values travel by the core's RMA. */
static void check_large(void)
{
	uint64_t *tgt = (uint64_t *) y_buf, *op = (uint64_t *) x_buf;
	uint64_t *res = (uint64_t *) x_res, *cmp = (uint64_t *) x_cmp;
	size_t i, bad = 0;

	for (i = 0; i < BIG_COUNT; i++) {
		tgt[i] = i;
		op[i] = 3 * i;
	}
	LT_CHECK_RET(LT_RETRY(fi_atomic(x.ep, op, BIG_COUNT, NULL, x_to_y, 0, 1, FI_UINT64, FI_SUM,
					x_buf)), 0, "fi_atomic of %u elements", BIG_COUNT);
	LT_CHECK_RET(wait_tx(x_buf), 0, "completes");
	for (i = 0; i < BIG_COUNT; i++)
		bad += tgt[i] != 4 * i;
	LT_CHECK_RET(bad, 0, "every element added");

	LT_CHECK_RET(LT_RETRY(fi_fetch_atomic(x.ep, NULL, BIG_COUNT, NULL, res, NULL, x_to_y, 0, 1,
					      FI_UINT64, FI_ATOMIC_READ, x_buf)), 0,
		     "FI_ATOMIC_READ of %u elements", BIG_COUNT);
	LT_CHECK_RET(wait_tx(x_buf), 0, "completes");
	for (i = 0, bad = 0; i < BIG_COUNT; i++)
		bad += res[i] != 4 * i;
	LT_CHECK_RET(bad, 0, "every element read");

	for (i = 0; i < BIG_COUNT; i++) {
		cmp[i] = i % 2 ? 4 * i : 1;
		op[i] = 7;
	}
	LT_CHECK_RET(LT_RETRY(fi_compare_atomic(x.ep, op, BIG_COUNT, NULL, cmp, NULL, res, NULL,
						x_to_y, 0, 1, FI_UINT64, FI_CSWAP, x_buf)), 0,
		     "FI_CSWAP of %u elements (1.6 MB of operands)", BIG_COUNT);
	LT_CHECK_RET(wait_tx(x_buf), 0, "completes");
	for (i = 0, bad = 0; i < BIG_COUNT; i++)
		bad += res[i] != 4 * i || tgt[i] != (i % 2 ? 7 : 4 * i);
	LT_CHECK_RET(bad, 0, "swapped where it matched, the old values returned");
}

/* ---- order ---- */

/*
 * FI_ORDER_ATOMIC_*: what fi_getinfo says, and atomics of one initiator applied in the order
 * issued: fetching additions posted without waiting see 0, 1, 2... in that order.
 */
static void check_order(void)
{
	const uint64_t order = FI_ORDER_ATOMIC_RAR | FI_ORDER_ATOMIC_RAW | FI_ORDER_ATOMIC_WAR |
			       FI_ORDER_ATOMIC_WAW;
	uint64_t *counter = (uint64_t *) (y_buf + 16384), *res = (uint64_t *) x_res, one = 1;
	struct fi_info *hints, *got = NULL;
	unsigned i, posted = 0, done = 0, wrong = 0;
	struct lt_comp comp;

	LT_CHECK((info->tx_attr->msg_order & order) == order &&
		 (info->rx_attr->msg_order & order) == order,
		 "fi_getinfo: FI_ORDER_ATOMIC_RAR, _RAW, _WAR and _WAW");
	LT_CHECK(info->ep_attr->max_order_raw_size >= 64 &&
		 info->ep_attr->max_order_war_size >= 64 &&
		 info->ep_attr->max_order_waw_size >= 64,
		 "for atomics of at least 64 bytes (max_order_raw_size %zu)",
		 info->ep_attr->max_order_raw_size);
	hints = lt_hints(FI_ATOMIC);
	hints->tx_attr->msg_order = FI_ORDER_SAS | FI_ORDER_ATOMIC_RAW;
	LT_CHECK_RET(lt_getinfo(hints, &got), 0, "hints asking for FI_ORDER_ATOMIC_RAW");
	fi_freeinfo(got);
	got = NULL;
	hints->tx_attr->msg_order = FI_ORDER_RMA_RAW;
	LT_CHECK_RET(lt_getinfo(hints, &got), -FI_ENODATA,
		     "hints asking for FI_ORDER_RMA_RAW (not kept)");
	fi_freeinfo(got);
	fi_freeinfo(hints);

	*counter = 0;
	for (i = 0; i < 200; i++) {
		if (LT_RETRY(fi_fetch_atomic(x.ep, &one, 1, NULL, &res[i], NULL, x_to_y, 16384, 1,
					     FI_UINT64, FI_SUM, &res[i])))
			break;
		posted++;
	}
	while (done < posted && lt_cq_next(&x.tx, &comp, LT_TIMEOUT_MS))
		done += !comp.err;
	for (i = 0; i < posted; i++)
		wrong += res[i] != i;
	LT_CHECK(posted == 200 && done == 200 && !wrong && *counter == 200,
		 "200 fetching additions posted at once applied in order (%u posted, %u done, "
		 "%u out of order)", posted, done, wrong);
}

/* ---- refusals and bad arguments ---- */

static void check_refused(void)
{
	uint64_t one = 1, old = 0;
	struct fid_mr *gone;
	char tmp[64];

	LT_CHECK_RET(LT_RETRY(fi_atomic(x.ep, &one, 1, NULL, x_to_y, 0, 99, FI_UINT64, FI_SUM,
					x_buf)), 0, "an atomic on an unknown key is posted");
	LT_CHECK_RET(wait_tx(x_buf), FI_ENOKEY, "and fails with FI_ENOKEY");
	LT_CHECK_RET(LT_RETRY(fi_fetch_atomic(x.ep, x_buf, 2, NULL, x_res, NULL, x_to_y,
					      REGION - 8, 1, FI_UINT64, FI_SUM, x_buf)), 0,
		     "a fetching atomic past the region's end is posted");
	LT_CHECK_RET(wait_tx(x_buf), FI_EACCES, "and fails with FI_EACCES");
	LT_CHECK_RET(LT_RETRY(fi_atomic(x.ep, &one, 1, NULL, x_to_y, 0, 2, FI_UINT64, FI_SUM,
					x_buf)), 0, "an atomic on a read-only region is posted");
	LT_CHECK_RET(wait_tx(x_buf), FI_EACCES, "and fails with FI_EACCES");
	y_ro[0] = 42;
	LT_CHECK_RET(LT_RETRY(fi_fetch_atomic(x.ep, NULL, 1, NULL, &old, NULL, x_to_y, 0, 2,
					      FI_UINT64, FI_ATOMIC_READ, x_buf)), 0,
		     "FI_ATOMIC_READ of the read-only region");
	LT_CHECK(wait_tx(x_buf) == 0 && old == 42, "reads it");
	if (LT_CHECK_RET(fi_mr_reg(dom.domain, tmp, sizeof(tmp), FI_REMOTE_WRITE, 0, 3, 0, &gone,
				   NULL), 0, "register key 3") &&
	    LT_CHECK_RET(fi_close(&gone->fid), 0, "and close it")) {
		LT_CHECK_RET(LT_RETRY(fi_atomic(x.ep, &one, 1, NULL, x_to_y, 0, 3, FI_UINT64,
						FI_SUM, x_buf)), 0,
			     "an atomic on the closed region is posted");
		LT_CHECK_RET(wait_tx(x_buf), FI_ENOKEY, "and fails with FI_ENOKEY");
	}
	LT_CHECK(check_one(UTIL_ATOMIC_FETCH, FI_SUM, FI_INT32, 3, 0),
		 "the target goes on after the refusals");
}

static void check_bad_arguments(void)
{
	struct fi_ioc iov = { x_buf, 1 };
	struct fi_rma_ioc rma[2] = { { 0, 1, 1 }, { 8, 1, 1 } };
	struct fi_msg_atomic msg = { .msg_iov = &iov, .iov_count = 1, .addr = x_to_y,
				     .rma_iov = rma, .rma_iov_count = 2, .datatype = FI_UINT64,
				     .op = FI_SUM };
	size_t max = 0;

	fi_atomicvalid(x.ep, FI_UINT64, FI_SUM, &max);
	LT_CHECK_RET(fi_atomic(x.ep, x_buf, 0, NULL, x_to_y, 0, 1, FI_UINT64, FI_SUM, NULL),
		     -FI_EINVAL, "a count of zero");
	LT_CHECK_RET(fi_atomic(x.ep, x_buf, 1, NULL, x_to_y, 0, 1, FI_DOUBLE, FI_BXOR, NULL),
		     -FI_EOPNOTSUPP, "an operation the datatype has not");
	LT_CHECK_RET(fi_atomic(x.ep, x_buf, 1, NULL, x_to_y, 0, 1, FI_UINT64, FI_CSWAP, NULL),
		     -FI_EOPNOTSUPP, "a compare operation in the write form");
	LT_CHECK_RET(fi_atomic(x.ep, x_buf, 1, NULL, x_to_y, 0, 1, (enum fi_datatype) 77, FI_SUM,
			       NULL), -FI_EOPNOTSUPP, "an unknown datatype");
	LT_CHECK_RET(fi_atomic(x.ep, x_buf, max + 1, NULL, x_to_y, 0, 1, FI_UINT64, FI_SUM,
			       NULL), -FI_EMSGSIZE, "more than fi_atomicvalid's count");
	LT_CHECK_RET(fi_atomicmsg(x.ep, &msg, 0), -FI_EINVAL, "two target ranges");
	msg.rma_iov_count = 1;
	rma[0].count = 2;
	LT_CHECK_RET(fi_atomicmsg(x.ep, &msg, 0), -FI_EINVAL, "counts that differ");
	rma[0].count = 1;
	LT_CHECK_RET(fi_atomicmsg(x.ep, &msg, FI_MULTI_RECV), -FI_EBADFLAGS, "a receive flag");
	LT_CHECK_RET(fi_atomicmsg(x.ep, NULL, 0), -FI_EINVAL, "no message");
	LT_CHECK_RET(fi_fetch_atomic(x.ep, x_buf, 1, NULL, NULL, NULL, x_to_y, 0, 1, FI_UINT64,
				     FI_SUM, NULL), -FI_EINVAL, "no result buffer");
	LT_CHECK_RET(fi_compare_atomicv(x.ep, &iov, NULL, 1,
					(struct fi_ioc[]) { { x_cmp, 2 } }, NULL, 1,
					(struct fi_ioc[]) { { x_res, 1 } }, NULL, 1, x_to_y, 0, 1,
					FI_UINT64, FI_CSWAP, NULL),
		     -FI_EINVAL, "a compare vector of another count");
	LT_CHECK_RET(fi_atomic(x.ep, NULL, 1, NULL, x_to_y, 0, 1, FI_UINT64, FI_SUM, NULL),
		     -FI_EINVAL, "no operand");
	LT_CHECK_RET(fi_inject_atomic(x.ep, x_buf, 100, x_to_y, 0, 1, FI_UINT64, FI_SUM),
		     -FI_EMSGSIZE, "an inject above inject_size");
	LT_CHECK_RET(fi_atomic(x.ep, x_buf, 1, NULL, 12345, 0, 1, FI_UINT64, FI_SUM, NULL),
		     -FI_EINVAL, "an address outside the AV");
}

/* ---- atomicity across processes, endpoints and threads ---- */

struct progress_arg {
	struct lt_ep *ep;
	atomic_bool stop;
};

/* Progresses one endpoint (reading its CQs directly: no stash shared between threads). */
static void *progress_thread(void *p)
{
	struct progress_arg *arg = p;
	struct fi_cq_tagged_entry e;

	while (!atomic_load(&arg->stop)) {
		(void) fi_cq_read(arg->ep->tx.cq, &e, 1);
		(void) fi_cq_read(arg->ep->rx.cq, &e, 1);
	}
	return NULL;
}

/*
 * A racer: gets a target's address and key, adds 1 to its counter RACE_OPS times, half of
 * them fetching, and sends back the values it fetched.
 */
static int racer_main(int rfd, int wfd)
{
	uint64_t one = 1, fetched[RACE_OPS / 2];
	char addr[LT_ADDR_MAX];
	struct lt_ep r;
	fi_addr_t peer;
	size_t n = 0;

	if (lt_dom_open(info, &dom) || lt_ep_open(&dom, NULL, &r) ||
	    lt_pipe_recv(rfd, addr, sizeof(addr), LT_TIMEOUT_MS) <= 0 ||
	    lt_av_insert(&r, addr, &peer))
		return 1;
	initiator = &r;
	for (unsigned i = 0; i < RACE_OPS; i++) {
		ssize_t ret = i % 2 ?
			LT_RETRY(fi_fetch_atomic(r.ep, &one, 1, NULL, &fetched[n], NULL, peer, 0,
						 5, FI_UINT64, FI_SUM, &one)) :
			LT_RETRY(fi_atomic(r.ep, &one, 1, NULL, peer, 0, 5, FI_UINT64, FI_SUM,
					   &one));

		if (ret || wait_tx(&one))
			return 2;
		n += i % 2;
	}
	if (lt_pipe_send(wfd, fetched, sizeof(fetched)))
		return 3;
	lt_ep_close(&r);
	lt_dom_close(&dom);
	return 0;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *) a, y = *(const uint64_t *) b;

	return x < y ? -1 : x > y;
}

static void check_race(void)
{
	static uint64_t fetched[2 * (RACE_OPS / 2)];
	struct progress_arg arg[2] = { { .ep = &y }, { .ep = NULL } };
	struct lt_child child[2];
	pthread_t thr[2];
	struct lt_ep y2;
	uint64_t *counter = (uint64_t *) (y_buf + 8192);
	size_t dup = 0;
	int i, started = 0;

	if (!LT_CHECK_RET(lt_ep_open(&dom, NULL, &y2), 0, "a second target endpoint"))
		return;
	arg[1].ep = &y2;
	*counter = 0;
	/* the counter is at offset 8192 of key 1: the racers address it as offset 0 of key 5 */
	{
		struct fid_mr *mr;

		if (!LT_CHECK_RET(fi_mr_reg(dom.domain, counter, 8, FI_REMOTE_READ |
					    FI_REMOTE_WRITE, 0, 5, 0, &mr, NULL), 0,
				  "register the counter, key 5"))
			goto out_ep;
		for (i = 0; i < 2; i++) {
			if (!LT_CHECK_RET(lt_child_spawn("racer", &child[i]), 0, "start racer %d",
					  i))
				break;
			lt_pipe_send(child[i].to_child, i ? y2.addr : y.addr,
				     i ? y2.addrlen : y.addrlen);
			started++;
		}
		for (i = 0; i < 2; i++)
			pthread_create(&thr[i], NULL, progress_thread, &arg[i]);
		for (i = 0; i < started; i++)
			LT_CHECK_RET(lt_pipe_recv(child[i].from_child,
						  fetched + i * (RACE_OPS / 2),
						  (RACE_OPS / 2) * sizeof(uint64_t),
						  LT_TIMEOUT_MS),
				     (RACE_OPS / 2) * sizeof(uint64_t),
				     "racer %d's fetched values", i);
		for (i = 0; i < 2; i++) {
			atomic_store(&arg[i].stop, true);
			pthread_join(thr[i], NULL);
		}
		for (i = 0; i < started; i++)
			LT_CHECK_RET(lt_child_reap(&child[i], LT_TIMEOUT_MS, false), 0,
				     "racer %d ends well", i);
		fi_close(&mr->fid);
	}
	LT_CHECK_RET(*counter, started * RACE_OPS, "no addition lost: the counter is %u",
		     started * RACE_OPS);
	qsort(fetched, 2 * (RACE_OPS / 2), sizeof(uint64_t), cmp_u64);
	for (size_t k = 1; k < 2 * (RACE_OPS / 2); k++)
		dup += fetched[k] == fetched[k - 1];
	if (started == 2)
		LT_CHECK_RET(dup, 0, "no two fetches saw the same value");
out_ep:
	lt_ep_close(&y2);
}

static bool setup(void)
{
	struct lt_ep_opts opts = { .no_enable = true };
	fi_addr_t y_to_x;

	x_buf = calloc(1, REGION);
	x_res = calloc(1, REGION);
	x_cmp = calloc(1, REGION);
	y_buf = calloc(1, REGION);
	cntr_w = cntr_open();
	cntr_r = cntr_open();
	cntr_rw = cntr_open();
	cntr_rr = cntr_open();
	if (!LT_CHECK(x_buf && x_res && x_cmp && y_buf && cntr_w && cntr_r && cntr_rw && cntr_rr,
		      "buffers and counters"))
		return false;
	if (!LT_CHECK_RET(lt_ep_open(&dom, &opts, &x), 0, "open x") ||
	    !LT_CHECK_RET(lt_ep_open(&dom, &opts, &y), 0, "open y"))
		return false;
	if (!LT_CHECK_RET(fi_ep_bind(x.ep, &cntr_w->fid, FI_WRITE), 0, "bind FI_WRITE counter") ||
	    !LT_CHECK_RET(fi_ep_bind(x.ep, &cntr_r->fid, FI_READ), 0, "bind FI_READ counter") ||
	    !LT_CHECK_RET(fi_ep_bind(y.ep, &cntr_rw->fid, FI_REMOTE_WRITE), 0,
			  "bind FI_REMOTE_WRITE counter") ||
	    !LT_CHECK_RET(fi_ep_bind(y.ep, &cntr_rr->fid, FI_REMOTE_READ), 0,
			  "bind FI_REMOTE_READ counter"))
		return false;
	if (!LT_CHECK_RET(lt_ep_enable(&x), 0, "enable x") ||
	    !LT_CHECK_RET(lt_ep_enable(&y), 0, "enable y") ||
	    !LT_CHECK_RET(lt_av_insert(&x, y.addr, &x_to_y), 0, "x knows y") ||
	    !LT_CHECK_RET(lt_av_insert(&y, x.addr, &y_to_x), 0, "y knows x"))
		return false;
	return LT_CHECK_RET(fi_mr_reg(dom.domain, y_buf, REGION, FI_REMOTE_WRITE | FI_REMOTE_READ,
				      0, 1, 0, &y_mr, NULL), 0, "register y's region, key 1") &&
	       LT_CHECK_RET(fi_mr_reg(dom.domain, y_ro, sizeof(y_ro), FI_REMOTE_READ, 0, 2, 0,
				      &y_ro_mr, NULL), 0, "register a read-only region, key 2");
}

int main(int argc, char **argv)
{
	struct fi_info *hints;
	const char *role;
	int rfd, wfd;

	hints = lt_hints(FI_MSG | FI_ATOMIC | FI_RMA_EVENT);
	role = lt_child_role(argc, argv, &rfd, &wfd);
	if (role) {
		int ret;

		info = lt_getinfo_or_skip(hints);
		ret = racer_main(rfd, wfd);
		fi_freeinfo(info);
		fi_freeinfo(hints);
		return ret;
	}
	lt_begin("atomic");
	info = lt_getinfo_or_skip(hints);
	if (!LT_CHECK_RET(lt_dom_open(info, &dom), 0, "open the domain"))
		return lt_end();
	if (setup()) {
		check_valid();
		check_all_ops();
		check_forms();
		check_large();
		check_order();
		check_refused();
		check_bad_arguments();
		check_race();
	}
	if (y_mr)
		fi_close(&y_mr->fid);
	if (y_ro_mr)
		fi_close(&y_ro_mr->fid);
	lt_ep_close(&x);
	lt_ep_close(&y);
	for (struct fid_cntr **c = (struct fid_cntr *[]) { cntr_w, cntr_r, cntr_rw, cntr_rr,
							    NULL }; *c; c++)
		fi_close(&(*c)->fid);
	lt_dom_close(&dom);
	free(x_buf);
	free(x_res);
	free(x_cmp);
	free(y_buf);
	fi_freeinfo(info);
	fi_freeinfo(hints);
	return lt_end();
}
