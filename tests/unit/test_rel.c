/*
 * Unit tests of util/rel.c and util/rel.h: sequence numbers across the 2^32 wrap, what an
 * acknowledgement's cumulative point and bitmap report, RFC 6298's estimator (first sample,
 * smoothing, the floor and ceiling, backoff), and the AIMD window (slow start, one packet per
 * window after it, halving on a loss, the floor on a timeout, never past its ceiling).
 */
#include "config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "util/rel.h"

static void test_seq_wrap(void **state)
{
	(void) state;
	assert_true(util_seq_before(1, 2));
	assert_false(util_seq_before(2, 2));
	assert_false(util_seq_before(3, 2));
	/* across the wrap: UINT32_MAX comes before 0, and 5 after it */
	assert_true(util_seq_before(UINT32_MAX, 0));
	assert_true(util_seq_before(UINT32_MAX - 10, 5));
	assert_false(util_seq_before(5, UINT32_MAX - 10));
}

static void test_ack_covers(void **state)
{
	/* 100 missing; 101 and 103 arrived */
	struct util_ack a = { .ack = 100, .sack = 0x5 };

	(void) state;
	assert_true(util_ack_covers(&a, 99));
	assert_true(util_ack_covers(&a, 0));
	assert_false(util_ack_covers(&a, 100));
	assert_true(util_ack_covers(&a, 101));
	assert_false(util_ack_covers(&a, 102));
	assert_true(util_ack_covers(&a, 103));
	assert_false(util_ack_covers(&a, 104));
	assert_false(util_ack_covers(&a, 100 + UTIL_SACK_BITS + 1));
	assert_int_equal(util_ack_sacked(&a), 2);
	assert_int_equal(util_ack_highest(&a), 103);

	/* the last bit of the map, and a cumulative point at the wrap */
	a = (struct util_ack) { .ack = UINT32_MAX, .sack = 1u << 31 };
	assert_true(util_ack_covers(&a, UINT32_MAX - 1));
	assert_false(util_ack_covers(&a, UINT32_MAX));
	assert_true(util_ack_covers(&a, UINT32_MAX + UTIL_SACK_BITS));
	assert_int_equal(util_ack_highest(&a), (uint32_t) (UINT32_MAX + UTIL_SACK_BITS));

	/* nothing past the point */
	a = (struct util_ack) { .ack = 7, .sack = 0 };
	assert_int_equal(util_ack_highest(&a), 6);
	assert_int_equal(util_ack_sacked(&a), 0);
}

static void test_rtt(void **state)
{
	struct util_rtt rtt;

	(void) state;
	util_rtt_init(&rtt, 20000, 2000, 500000);
	assert_int_equal(rtt.rto, 20000);
	/* first sample: srtt = R, rttvar = R / 2, rto = srtt + 4 rttvar, at least the floor */
	util_rtt_sample(&rtt, 1000);
	assert_int_equal(rtt.srtt, 1000);
	assert_int_equal(rtt.rttvar, 500);
	assert_int_equal(rtt.rto, 3000);
	/* steady samples pull the variance, and the timeout, down to the floor */
	for (int i = 0; i < 50; i++)
		util_rtt_sample(&rtt, 1000);
	assert_int_equal(rtt.srtt, 1000);
	assert_int_equal(rtt.rto, 2000);
	/* one sample moves srtt by an eighth of the difference */
	util_rtt_sample(&rtt, 9000);
	assert_int_equal(rtt.srtt, 2000);
	assert_true(rtt.rto > 2000);
	/* backoff doubles up to the ceiling */
	util_rtt_init(&rtt, 300000, 2000, 500000);
	util_rtt_backoff(&rtt);
	assert_int_equal(rtt.rto, 500000);
	util_rtt_backoff(&rtt);
	assert_int_equal(rtt.rto, 500000);
	/* a first value outside the bounds is clamped */
	util_rtt_init(&rtt, 1, 2000, 500000);
	assert_int_equal(rtt.rto, 2000);
	/* a zero sample still leaves a smoothed value (0 means "no sample yet") */
	util_rtt_init(&rtt, 20000, 1, 500000);
	util_rtt_sample(&rtt, 0);
	assert_int_not_equal(rtt.srtt, 0);
}

static void test_cwnd(void **state)
{
	struct util_cwnd cw;
	uint32_t before;

	(void) state;
	util_cwnd_init(&cw, 4, 2, 64);
	assert_int_equal(cw.cwnd, 4);
	/* slow start: one more per packet acknowledged, up to the ceiling */
	util_cwnd_acked(&cw, 4);
	assert_int_equal(cw.cwnd, 8);
	util_cwnd_acked(&cw, 100);
	assert_int_equal(cw.cwnd, 64);
	/* a loss halves, and the window then grows by one per window acknowledged */
	util_cwnd_loss(&cw);
	assert_int_equal(cw.cwnd, 32);
	assert_int_equal(cw.ssthresh, 32);
	util_cwnd_acked(&cw, 31);
	assert_int_equal(cw.cwnd, 32);
	util_cwnd_acked(&cw, 1);
	assert_int_equal(cw.cwnd, 33);
	/* a timeout drops to the floor, slow start up to half of before */
	before = cw.cwnd;
	util_cwnd_timeout(&cw);
	assert_int_equal(cw.cwnd, 2);
	assert_int_equal(cw.ssthresh, before / 2);
	util_cwnd_acked(&cw, 3);
	assert_int_equal(cw.cwnd, 5);
	/* losses never go below the floor */
	for (int i = 0; i < 10; i++)
		util_cwnd_loss(&cw);
	assert_int_equal(cw.cwnd, 2);
	/* an initial value outside the bounds is clamped */
	util_cwnd_init(&cw, 1000, 2, 64);
	assert_int_equal(cw.cwnd, 64);
	util_cwnd_init(&cw, 0, 0, 64);
	assert_int_equal(cw.cwnd, 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_seq_wrap),
		cmocka_unit_test(test_ack_covers),
		cmocka_unit_test(test_rtt),
		cmocka_unit_test(test_cwnd),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
