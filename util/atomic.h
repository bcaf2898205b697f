/*
 * The arithmetic of fi_atomic(3), applied in software: what a target does with an atomic it
 * received, and what a collective's reduction does with its operands. Provider-independent;
 * the caller holds whatever lock makes the application atomic (one per process for an
 * atomic's target memory).
 *
 * Which operation applies to which datatype (util_atomic_is_valid), as libfabric's own
 * software atomics report it:
 * - FI_MIN, FI_MAX and the ordered compares (FI_CSWAP_LE, _LT, _GE, _GT): integers and reals;
 * - FI_SUM, FI_PROD, FI_LOR, FI_LAND, FI_LXOR, FI_ATOMIC_READ, FI_ATOMIC_WRITE, FI_CSWAP,
 *   FI_CSWAP_NE: every datatype, complex ones included;
 * - FI_BOR, FI_BAND, FI_BXOR, FI_MSWAP: integers (FI_INT8 .. FI_UINT64, FI_INT128, FI_UINT128).
 * FI_ATOMIC_READ is a fetch only (no write form); the compare operations are compare forms
 * only, and the others are not.
 *
 * Memory may be unaligned: elements are loaded and stored with memcpy.
 */
#ifndef UTIL_ATOMIC_H
#define UTIL_ATOMIC_H

#include <stdbool.h>
#include <stddef.h>
#include <rdma/fi_domain.h>

/* The three forms of fi_atomic(3): fi_atomic, fi_fetch_atomic, fi_compare_atomic. */
enum util_atomic_kind {
	UTIL_ATOMIC_WRITE,
	UTIL_ATOMIC_FETCH,
	UTIL_ATOMIC_COMPARE,
};

/* Bytes of one element of dt; 0 for a datatype atomics do not take. */
size_t util_atomic_dt_size(enum fi_datatype dt);

/* Whether op on dt is an operation of that form (see the top). */
bool util_atomic_is_valid(enum util_atomic_kind kind, enum fi_op op, enum fi_datatype dt);

/*
 * Applies op to count elements of dt at dst. src: the operands (NULL for FI_ATOMIC_READ);
 * cmp: the compare operands (compare form only, else NULL); old: when not NULL, receives the
 * values dst held before. 0, or -FI_EINVAL when op and dt make no operation (nothing done).
 */
int util_atomic_apply(enum fi_op op, enum fi_datatype dt, void *dst, const void *src,
		      const void *cmp, void *old, size_t count);

#endif /* UTIL_ATOMIC_H */
