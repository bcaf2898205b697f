/*
 * Software atomics (util/atomic.h). Each datatype family has one element loop, written once
 * as a template over the C type: integers take every operation, reals all but the bitwise
 * ones, complex numbers those without an order.
 */
#include "config.h"

#include <complex.h>
#include <string.h>

#include "util/atomic.h"
#include "util/util.h"

typedef __int128 util_int128;
typedef unsigned __int128 util_uint128;

size_t util_atomic_dt_size(enum fi_datatype dt)
{
	switch (dt) {
	case FI_INT8:
	case FI_UINT8:
		return 1;
	case FI_INT16:
	case FI_UINT16:
		return 2;
	case FI_INT32:
	case FI_UINT32:
	case FI_FLOAT:
		return 4;
	case FI_INT64:
	case FI_UINT64:
	case FI_DOUBLE:
	case FI_FLOAT_COMPLEX:
		return 8;
	case FI_DOUBLE_COMPLEX:
		return 16;
	case FI_LONG_DOUBLE:
		return sizeof(long double);
	case FI_LONG_DOUBLE_COMPLEX:
		return sizeof(long double complex);
	case FI_INT128:
	case FI_UINT128:
		return 16;
	default:
		return 0;
	}
}

static bool util_atomic_dt_is_int(enum fi_datatype dt)
{
	return dt <= FI_UINT64 || dt == FI_INT128 || dt == FI_UINT128;
}

static bool util_atomic_dt_is_complex(enum fi_datatype dt)
{
	return dt == FI_FLOAT_COMPLEX || dt == FI_DOUBLE_COMPLEX || dt == FI_LONG_DOUBLE_COMPLEX;
}

bool util_atomic_is_valid(enum util_atomic_kind kind, enum fi_op op, enum fi_datatype dt)
{
	if (!util_atomic_dt_size(dt))
		return false;
	switch (op) {
	case FI_MIN:
	case FI_MAX:
		return kind != UTIL_ATOMIC_COMPARE && !util_atomic_dt_is_complex(dt);
	case FI_SUM:
	case FI_PROD:
	case FI_LOR:
	case FI_LAND:
	case FI_LXOR:
	case FI_ATOMIC_WRITE:
		return kind != UTIL_ATOMIC_COMPARE;
	case FI_BOR:
	case FI_BAND:
	case FI_BXOR:
		return kind != UTIL_ATOMIC_COMPARE && util_atomic_dt_is_int(dt);
	case FI_ATOMIC_READ:
		return kind == UTIL_ATOMIC_FETCH;
	case FI_CSWAP:
	case FI_CSWAP_NE:
		return kind == UTIL_ATOMIC_COMPARE;
	case FI_CSWAP_LE:
	case FI_CSWAP_LT:
	case FI_CSWAP_GE:
	case FI_CSWAP_GT:
		return kind == UTIL_ATOMIC_COMPARE && !util_atomic_dt_is_complex(dt);
	case FI_MSWAP:
		return kind == UTIL_ATOMIC_COMPARE && util_atomic_dt_is_int(dt);
	default:
		return false;
	}
}

/*
 * The element loop of one type: load, keep the old value, compute the new one, store. The
 * family says which cases exist; anything else was refused by util_atomic_is_valid. Sums
 * and products compute in U: for integers an unsigned type at least as wide as int, so that
 * they wrap as the hardware's atomics do instead of overflowing (undefined in C).
 */
#define UTIL_ATOMIC_LOOP_BEGIN(T, U)                                                         \
	char *d8 = dst;                                                                      \
	const char *s8 = src, *c8 = cmp;                                                     \
	char *o8 = old;                                                                      \
	for (size_t i = 0; i < count; i++) {                                                 \
		T d, s = 0, c = 0;                                                           \
		memcpy(&d, d8 + i * sizeof(T), sizeof(T));                                   \
		if (s8)                                                                      \
			memcpy(&s, s8 + i * sizeof(T), sizeof(T));                           \
		if (c8)                                                                      \
			memcpy(&c, c8 + i * sizeof(T), sizeof(T));                           \
		if (o8)                                                                      \
			memcpy(o8 + i * sizeof(T), &d, sizeof(T));                           \
		switch (op) {                                                                \
		case FI_SUM: d = (T) ((U) d + (U) s); break;                                 \
		case FI_PROD: d = (T) ((U) d * (U) s); break;                                \
		case FI_LOR: d = (d != 0) || (s != 0); break;                                \
		case FI_LAND: d = (d != 0) && (s != 0); break;                               \
		case FI_LXOR: d = (d != 0) != (s != 0); break;                               \
		case FI_ATOMIC_WRITE: d = s; break;                                          \
		case FI_CSWAP: if (c == d) d = s; break;                                     \
		case FI_CSWAP_NE: if (c != d) d = s; break;

#define UTIL_ATOMIC_LOOP_ORDERED                                                            \
		case FI_MIN: if (s < d) d = s; break;                                        \
		case FI_MAX: if (s > d) d = s; break;                                        \
		case FI_CSWAP_LE: if (c <= d) d = s; break;                                  \
		case FI_CSWAP_LT: if (c < d) d = s; break;                                   \
		case FI_CSWAP_GE: if (c >= d) d = s; break;                                  \
		case FI_CSWAP_GT: if (c > d) d = s; break;

#define UTIL_ATOMIC_LOOP_BITWISE                                                            \
		case FI_BOR: d = d | s; break;                                               \
		case FI_BAND: d = d & s; break;                                              \
		case FI_BXOR: d = d ^ s; break;                                              \
		case FI_MSWAP: d = (s & c) | (d & ~c); break;

#define UTIL_ATOMIC_LOOP_END(T)                                                             \
		default: break; /* FI_ATOMIC_READ */                                         \
		}                                                                            \
		memcpy(d8 + i * sizeof(T), &d, sizeof(T));                                   \
	}

#define UTIL_ATOMIC_INT(name, T, U)                                                         \
	static void util_atomic_##name(enum fi_op op, void *dst, const void *src,            \
				       const void *cmp, void *old, size_t count)             \
	{                                                                                    \
		UTIL_ATOMIC_LOOP_BEGIN(T, U)                                                  \
		UTIL_ATOMIC_LOOP_ORDERED                                                     \
		UTIL_ATOMIC_LOOP_BITWISE                                                     \
		UTIL_ATOMIC_LOOP_END(T)                                                      \
	}

#define UTIL_ATOMIC_REAL(name, T)                                                           \
	static void util_atomic_##name(enum fi_op op, void *dst, const void *src,            \
				       const void *cmp, void *old, size_t count)             \
	{                                                                                    \
		UTIL_ATOMIC_LOOP_BEGIN(T, T)                                                 \
		UTIL_ATOMIC_LOOP_ORDERED                                                     \
		UTIL_ATOMIC_LOOP_END(T)                                                      \
	}

#define UTIL_ATOMIC_COMPLEX(name, T)                                                        \
	static void util_atomic_##name(enum fi_op op, void *dst, const void *src,            \
				       const void *cmp, void *old, size_t count)             \
	{                                                                                    \
		UTIL_ATOMIC_LOOP_BEGIN(T, T)                                                 \
		UTIL_ATOMIC_LOOP_END(T)                                                      \
	}

UTIL_ATOMIC_INT(int8, int8_t, uint32_t)
UTIL_ATOMIC_INT(uint8, uint8_t, uint32_t)
UTIL_ATOMIC_INT(int16, int16_t, uint32_t)
UTIL_ATOMIC_INT(uint16, uint16_t, uint32_t)
UTIL_ATOMIC_INT(int32, int32_t, uint32_t)
UTIL_ATOMIC_INT(uint32, uint32_t, uint32_t)
UTIL_ATOMIC_INT(int64, int64_t, uint64_t)
UTIL_ATOMIC_INT(uint64, uint64_t, uint64_t)
UTIL_ATOMIC_INT(int128, util_int128, util_uint128)
UTIL_ATOMIC_INT(uint128, util_uint128, util_uint128)
UTIL_ATOMIC_REAL(float, float)
UTIL_ATOMIC_REAL(double, double)
UTIL_ATOMIC_REAL(long_double, long double)
UTIL_ATOMIC_COMPLEX(float_complex, float complex)
UTIL_ATOMIC_COMPLEX(double_complex, double complex)
UTIL_ATOMIC_COMPLEX(long_double_complex, long double complex)

int util_atomic_apply(enum fi_op op, enum fi_datatype dt, void *dst, const void *src,
		      const void *cmp, void *old, size_t count)
{
	void (*fn)(enum fi_op, void *, const void *, const void *, void *, size_t);

	switch (dt) {
	case FI_INT8: fn = util_atomic_int8; break;
	case FI_UINT8: fn = util_atomic_uint8; break;
	case FI_INT16: fn = util_atomic_int16; break;
	case FI_UINT16: fn = util_atomic_uint16; break;
	case FI_INT32: fn = util_atomic_int32; break;
	case FI_UINT32: fn = util_atomic_uint32; break;
	case FI_INT64: fn = util_atomic_int64; break;
	case FI_UINT64: fn = util_atomic_uint64; break;
	case FI_INT128: fn = util_atomic_int128; break;
	case FI_UINT128: fn = util_atomic_uint128; break;
	case FI_FLOAT: fn = util_atomic_float; break;
	case FI_DOUBLE: fn = util_atomic_double; break;
	case FI_LONG_DOUBLE: fn = util_atomic_long_double; break;
	case FI_FLOAT_COMPLEX: fn = util_atomic_float_complex; break;
	case FI_DOUBLE_COMPLEX: fn = util_atomic_double_complex; break;
	case FI_LONG_DOUBLE_COMPLEX: fn = util_atomic_long_double_complex; break;
	default: return -FI_EINVAL;
	}
	/* any form will do: the operation's own form was checked by the caller, or is this */
	if (!util_atomic_is_valid(UTIL_ATOMIC_WRITE, op, dt) &&
	    !util_atomic_is_valid(UTIL_ATOMIC_FETCH, op, dt) &&
	    !util_atomic_is_valid(UTIL_ATOMIC_COMPARE, op, dt))
		return -FI_EINVAL;
	fn(op, dst, src, cmp, old, count);
	return 0;
}
