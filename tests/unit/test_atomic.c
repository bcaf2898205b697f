/* Unit tests of util/atomic.c: which operations are valid, and what each computes. */
#include "config.h"

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <string.h>
#include <complex.h>
#include <cmocka.h>

#include "util/util.h"

#include "util/atomic.h"

static struct fi_provider test_prov = { .name = "util_test" };
struct fi_provider *util_prov = &test_prov;

static int valid_cnt(enum util_atomic_kind kind)
{
	int n = 0;

	for (int op = 0; op < FI_ATOMIC_OP_LAST; op++) {
		for (int dt = 0; dt <= FI_UINT128; dt++)
			n += util_atomic_is_valid(kind, (enum fi_op) op, (enum fi_datatype) dt);
	}
	return n;
}

static void test_validity(void **state)
{
	(void) state;
	/* 16 datatypes: 10 integers, 3 reals, 3 complex */
	assert_int_equal(util_atomic_dt_size(FI_INT128), 16);
	assert_int_equal(util_atomic_dt_size(FI_FLOAT_COMPLEX), 8);
	assert_int_equal(util_atomic_dt_size((enum fi_datatype) 99), 0);
	/* write: MIN, MAX 13 each; SUM, PROD, LOR, LAND, LXOR, WRITE 16 each; BOR, BAND, BXOR 10 */
	assert_int_equal(valid_cnt(UTIL_ATOMIC_WRITE), 2 * 13 + 6 * 16 + 3 * 10);
	/* fetch: the same and FI_ATOMIC_READ */
	assert_int_equal(valid_cnt(UTIL_ATOMIC_FETCH), 2 * 13 + 6 * 16 + 3 * 10 + 16);
	/* compare: CSWAP, CSWAP_NE 16; the ordered four 13; MSWAP 10 */
	assert_int_equal(valid_cnt(UTIL_ATOMIC_COMPARE), 2 * 16 + 4 * 13 + 10);
	assert_false(util_atomic_is_valid(UTIL_ATOMIC_WRITE, FI_ATOMIC_READ, FI_INT32));
	assert_false(util_atomic_is_valid(UTIL_ATOMIC_WRITE, FI_CSWAP, FI_INT32));
	assert_false(util_atomic_is_valid(UTIL_ATOMIC_COMPARE, FI_SUM, FI_INT32));
	assert_false(util_atomic_is_valid(UTIL_ATOMIC_WRITE, FI_BOR, FI_DOUBLE));
	assert_false(util_atomic_is_valid(UTIL_ATOMIC_WRITE, FI_MIN, FI_DOUBLE_COMPLEX));
	assert_true(util_atomic_is_valid(UTIL_ATOMIC_WRITE, FI_PROD, FI_LONG_DOUBLE_COMPLEX));
	assert_false(util_atomic_is_valid(UTIL_ATOMIC_WRITE, FI_SUM, (enum fi_datatype) 99));
}

static void test_integer_ops(void **state)
{
	struct { enum fi_op op; int32_t d, s, want; } cases[] = {
		{ FI_MIN, 5, -3, -3 }, { FI_MAX, 5, -3, 5 }, { FI_SUM, 5, -3, 2 },
		{ FI_PROD, 5, -3, -15 }, { FI_LOR, 0, 7, 1 }, { FI_LAND, 4, 0, 0 },
		{ FI_BOR, 0x0c, 0x03, 0x0f }, { FI_BAND, 0x0c, 0x06, 0x04 },
		{ FI_LXOR, 3, 3, 0 }, { FI_BXOR, 0x0c, 0x06, 0x0a }, { FI_ATOMIC_WRITE, 1, 9, 9 },
		{ FI_SUM, INT32_MAX, 1, INT32_MIN }, /* wraps, as hardware atomics do */
	};
	int32_t d, old;

	(void) state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		d = cases[i].d;
		assert_int_equal(util_atomic_apply(cases[i].op, FI_INT32, &d, &cases[i].s, NULL,
						   &old, 1), 0);
		assert_int_equal(d, cases[i].want);
		assert_int_equal(old, cases[i].d);
	}
	d = 42;
	assert_int_equal(util_atomic_apply(FI_ATOMIC_READ, FI_INT32, &d, NULL, NULL, &old, 1), 0);
	assert_int_equal(d, 42);
	assert_int_equal(old, 42);
}

static void test_compare_ops(void **state)
{
	struct { enum fi_op op; uint64_t d, c, s, want; } cases[] = {
		{ FI_CSWAP, 7, 7, 1, 1 }, { FI_CSWAP, 7, 6, 1, 7 },
		{ FI_CSWAP_NE, 7, 6, 1, 1 }, { FI_CSWAP_NE, 7, 7, 1, 7 },
		{ FI_CSWAP_LE, 7, 7, 1, 1 }, { FI_CSWAP_LE, 7, 8, 1, 7 },
		{ FI_CSWAP_LT, 7, 6, 1, 1 }, { FI_CSWAP_LT, 7, 7, 1, 7 },
		{ FI_CSWAP_GE, 7, 7, 1, 1 }, { FI_CSWAP_GE, 7, 6, 1, 7 },
		{ FI_CSWAP_GT, 7, 8, 1, 1 }, { FI_CSWAP_GT, 7, 7, 1, 7 },
		{ FI_MSWAP, 0xff00, 0x0ff0, 0x1234, 0xf230 },
	};
	uint64_t d, old;

	(void) state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		d = cases[i].d;
		assert_int_equal(util_atomic_apply(cases[i].op, FI_UINT64, &d, &cases[i].s,
						   &cases[i].c, &old, 1), 0);
		assert_int_equal(d, cases[i].want);
		assert_int_equal(old, cases[i].d);
	}
}

static void test_small_and_wide_integers(void **state)
{
	uint8_t u8 = 200, s8 = 100;
	int16_t i16 = -2, m16 = 30000;
	__int128 w = (__int128) 1 << 100, one = 1;

	(void) state;
	assert_int_equal(util_atomic_apply(FI_SUM, FI_UINT8, &u8, &s8, NULL, NULL, 1), 0);
	assert_int_equal(u8, 44);
	assert_int_equal(util_atomic_apply(FI_PROD, FI_INT16, &i16, &m16, NULL, NULL, 1), 0);
	assert_int_equal(i16, (int16_t) -60000);
	assert_int_equal(util_atomic_apply(FI_SUM, FI_INT128, &w, &one, NULL, NULL, 1), 0);
	assert_true(w == ((__int128) 1 << 100) + 1);
}

static void test_reals_and_complex(void **state)
{
	double d[3] = { 1.5, -2.0, 4.0 }, s[3] = { 2.0, 0.5, -4.0 }, old[3];
	double complex z = 1.0 + 2.0 * I, w = 3.0 - 1.0 * I, c = z;
	float f = 2.5f, g = 1.0f;

	(void) state;
	assert_int_equal(util_atomic_apply(FI_PROD, FI_DOUBLE, d, s, NULL, old, 3), 0);
	assert_true(d[0] == 3.0 && d[1] == -1.0 && d[2] == -16.0);
	assert_true(old[0] == 1.5 && old[2] == 4.0);
	assert_int_equal(util_atomic_apply(FI_MIN, FI_FLOAT, &f, &g, NULL, NULL, 1), 0);
	assert_true(f == 1.0f);
	assert_int_equal(util_atomic_apply(FI_PROD, FI_DOUBLE_COMPLEX, &z, &w, NULL, NULL, 1), 0);
	assert_true(creal(z) == 5.0 && cimag(z) == 5.0);
	/* CSWAP on complex compares both parts */
	assert_int_equal(util_atomic_apply(FI_CSWAP, FI_DOUBLE_COMPLEX, &z, &w, &c, NULL, 1), 0);
	assert_true(creal(z) == 5.0);
	c = z;
	assert_int_equal(util_atomic_apply(FI_CSWAP, FI_DOUBLE_COMPLEX, &z, &w, &c, NULL, 1), 0);
	assert_true(creal(z) == 3.0 && cimag(z) == -1.0);
}

/* Elements anywhere in memory, several at once. */
static void test_unaligned_vectors(void **state)
{
	char mem[1 + 4 * sizeof(uint32_t)];
	uint32_t src[4] = { 1, 2, 3, 4 }, out[4], v;

	(void) state;
	for (int i = 0; i < 4; i++) {
		v = 10 * (uint32_t) i;
		memcpy(mem + 1 + i * sizeof(v), &v, sizeof(v));
	}
	assert_int_equal(util_atomic_apply(FI_SUM, FI_UINT32, mem + 1, src, NULL, out, 4), 0);
	for (int i = 0; i < 4; i++) {
		memcpy(&v, mem + 1 + i * sizeof(v), sizeof(v));
		assert_int_equal(v, 10 * (uint32_t) i + src[i]);
		assert_int_equal(out[i], 10 * (uint32_t) i);
	}
}

static void test_invalid_touches_nothing(void **state)
{
	double d = 1.0, s = 2.0;

	(void) state;
	assert_int_equal(util_atomic_apply(FI_BOR, FI_DOUBLE, &d, &s, NULL, NULL, 1), -FI_EINVAL);
	assert_int_equal(util_atomic_apply(FI_SUM, (enum fi_datatype) 99, &d, &s, NULL, NULL, 1),
			 -FI_EINVAL);
	assert_int_equal(util_atomic_apply((enum fi_op) 77, FI_DOUBLE, &d, &s, NULL, NULL, 1),
			 -FI_EINVAL);
	assert_true(d == 1.0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_validity),
		cmocka_unit_test(test_integer_ops),
		cmocka_unit_test(test_compare_ops),
		cmocka_unit_test(test_small_and_wide_integers),
		cmocka_unit_test(test_reals_and_complex),
		cmocka_unit_test(test_unaligned_vectors),
		cmocka_unit_test(test_invalid_touches_nothing),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
