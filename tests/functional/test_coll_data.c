/*
 * The data path for test_coll.c: every collective call on the group of every rank, checked
 * against a serial reduction in rank order (its own arithmetic on every datatype, small
 * integers so that floating point is exact) or against patterns named by sender and receiver;
 * guards after every output; every root; several calls outstanding; the application's
 * receives untouched. And fi_query_collective's rules, which the matrix follows.
 */
#include "test_coll.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rdma/fi_tagged.h>

#define LARGE_COUNT 300000u /* uint32: 1.2 MB, above every eager size */
#define BURST 8

/* ---- values of every datatype ---- */

enum dt_kind { DT_SINT, DT_UINT, DT_REAL, DT_CPLX };

struct dt_desc {
	enum fi_datatype dt;
	const char *name;
	size_t size;
	enum dt_kind kind;
};

static const struct dt_desc dts[] = {
	{FI_INT8, "FI_INT8", 1, DT_SINT},
	{FI_UINT8, "FI_UINT8", 1, DT_UINT},
	{FI_INT16, "FI_INT16", 2, DT_SINT},
	{FI_UINT16, "FI_UINT16", 2, DT_UINT},
	{FI_INT32, "FI_INT32", 4, DT_SINT},
	{FI_UINT32, "FI_UINT32", 4, DT_UINT},
	{FI_INT64, "FI_INT64", 8, DT_SINT},
	{FI_UINT64, "FI_UINT64", 8, DT_UINT},
	{FI_FLOAT, "FI_FLOAT", sizeof(float), DT_REAL},
	{FI_DOUBLE, "FI_DOUBLE", sizeof(double), DT_REAL},
	{FI_FLOAT_COMPLEX, "FI_FLOAT_COMPLEX", 2 * sizeof(float), DT_CPLX},
	{FI_DOUBLE_COMPLEX, "FI_DOUBLE_COMPLEX", 2 * sizeof(double), DT_CPLX},
	{FI_LONG_DOUBLE, "FI_LONG_DOUBLE", sizeof(long double), DT_REAL},
	{FI_LONG_DOUBLE_COMPLEX, "FI_LONG_DOUBLE_COMPLEX", 2 * sizeof(long double), DT_CPLX},
	{FI_INT128, "FI_INT128", 16, DT_SINT},
	{FI_UINT128, "FI_UINT128", 16, DT_UINT},
};
#define NDTS (sizeof(dts) / sizeof(dts[0]))

static const enum fi_op ops[] = {FI_MIN, FI_MAX,  FI_SUM,  FI_PROD, FI_LOR,	    FI_LAND,
				 FI_BOR, FI_BAND, FI_LXOR, FI_BXOR, FI_ATOMIC_WRITE};
static const char *const op_names[] = {"FI_MIN",  "FI_MAX",  "FI_SUM",	       "FI_PROD",
				       "FI_LOR",  "FI_LAND", "FI_BOR",	       "FI_BAND",
				       "FI_LXOR", "FI_BXOR", "FI_ATOMIC_READ", "FI_ATOMIC_WRITE"};
#define NOPS (sizeof(ops) / sizeof(ops[0]))

static bool is_int(const struct dt_desc *d)
{
	return d->kind == DT_SINT || d->kind == DT_UINT;
}

static bool is_bitwise(enum fi_op op)
{
	return op == FI_BOR || op == FI_BAND || op == FI_BXOR;
}

static bool is_logical(enum fi_op op)
{
	return op == FI_LOR || op == FI_LAND || op == FI_LXOR;
}

/*
 * Whether the serial reference below defines op on d: what C gives a meaning, as fi_atomic(3)
 * writes the operations (no order on complex numbers, no bits of a real).
 */
static bool has_reference(enum fi_op op, const struct dt_desc *d)
{
	if (d->kind == DT_CPLX)
		return op != FI_MIN && op != FI_MAX && !is_bitwise(op);
	return is_int(d) || !is_bitwise(op);
}

/* Integers of up to 128 bits, little-endian, sign-extended for the signed types. */
static __int128 load_int(const struct dt_desc *d, const uint8_t *p)
{
	unsigned __int128 u = 0;
	unsigned shift = (unsigned) (128 - 8 * d->size);

	memcpy(&u, p, d->size);
	if (d->kind == DT_SINT && shift)
		return (__int128) (u << shift) >> shift;
	return (__int128) u;
}

/* Part i (0 real, 1 imaginary) of a real or complex element. */
static long double load_real(const struct dt_desc *d, const uint8_t *p, int i)
{
	size_t part = d->kind == DT_CPLX ? d->size / 2 : d->size;
	float f;
	double x;
	long double l;

	p += (size_t) i * part;
	if (part == sizeof(float)) {
		memcpy(&f, p, sizeof(f));
		return f;
	}
	if (part == sizeof(double)) {
		memcpy(&x, p, sizeof(x));
		return x;
	}
	memcpy(&l, p, sizeof(l));
	return l;
}

static void store_real(const struct dt_desc *d, uint8_t *p, int i, long double v)
{
	size_t part = d->kind == DT_CPLX ? d->size / 2 : d->size;
	float f = (float) v;
	double x = (double) v;

	p += (size_t) i * part;
	if (part == sizeof(float))
		memcpy(p, &f, sizeof(f));
	else if (part == sizeof(double))
		memcpy(p, &x, sizeof(x));
	else
		memcpy(p, &v, sizeof(v));
}

/* dst = dst op src, one element (has_reference(op, d) holds). */
static void apply(enum fi_op op, const struct dt_desc *d, uint8_t *dst, const uint8_t *src)
{
	if (is_int(d)) {
		__int128 a = load_int(d, dst), b = load_int(d, src), r = b;
		bool lt =
			d->kind == DT_UINT ? (unsigned __int128) a < (unsigned __int128) b : a < b;

		switch (op) {
		case FI_MIN:
			r = lt ? a : b;
			break;
		case FI_MAX:
			r = lt ? b : a;
			break;
		case FI_SUM:
			r = (__int128) ((unsigned __int128) a + (unsigned __int128) b);
			break;
		case FI_PROD:
			r = (__int128) ((unsigned __int128) a * (unsigned __int128) b);
			break;
		case FI_LOR:
			r = a || b;
			break;
		case FI_LAND:
			r = a && b;
			break;
		case FI_LXOR:
			r = !a != !b;
			break;
		case FI_BOR:
			r = a | b;
			break;
		case FI_BAND:
			r = a & b;
			break;
		case FI_BXOR:
			r = a ^ b;
			break;
		default:
			break; /* FI_ATOMIC_WRITE: src */
		}
		memcpy(dst, &r, d->size);
	} else if (d->kind == DT_REAL) {
		long double a = load_real(d, dst, 0), b = load_real(d, src, 0), r = b;

		switch (op) {
		case FI_MIN:
			r = a < b ? a : b;
			break;
		case FI_MAX:
			r = a < b ? b : a;
			break;
		case FI_SUM:
			r = a + b;
			break;
		case FI_PROD:
			r = a * b;
			break;
		case FI_LOR:
			r = a != 0 || b != 0;
			break;
		case FI_LAND:
			r = a != 0 && b != 0;
			break;
		case FI_LXOR:
			r = (a != 0) != (b != 0);
			break;
		default:
			break;
		}
		store_real(d, dst, 0, r);
	} else {
		long double a = load_real(d, dst, 0), ai = load_real(d, dst, 1);
		long double b = load_real(d, src, 0), bi = load_real(d, src, 1), r = b, ri = bi;

		/* C's || and && on complex numbers: the whole value against zero */
		bool is_a = a != 0 || ai != 0, is_b = b != 0 || bi != 0;

		if (op == FI_SUM) {
			r = a + b;
			ri = ai + bi;
		} else if (op == FI_PROD) {
			r = a * b - ai * bi;
			ri = a * bi + ai * b;
		} else if (is_logical(op)) {
			r = op == FI_LOR    ? is_a || is_b
			    : op == FI_LAND ? is_a && is_b
					    : is_a != is_b;
			ri = 0;
		}
		store_real(d, dst, 0, r);
		store_real(d, dst, 1, ri);
	}
}

static bool same_elem(const struct dt_desc *d, const uint8_t *a, const uint8_t *b)
{
	if (is_int(d))
		return !memcmp(a, b, d->size);
	if (load_real(d, a, 0) != load_real(d, b, 0))
		return false;
	return d->kind != DT_CPLX || load_real(d, a, 1) == load_real(d, b, 1);
}

static uint32_t mix(uint32_t a, uint32_t b, uint32_t c)
{
	uint64_t x = ((uint64_t) a << 40 ^ (uint64_t) b << 12 ^ c) * 0x9e3779b97f4a7c15ULL;

	return (uint32_t) (x >> 32 ^ x >> 7);
}

/*
 * Rank r's element i of call seq for op: small integers (exact in every real type, no
 * overflow in eight bits for 16 ranks), random bits for the bitwise operations, the same value
 * on every rank for FI_ATOMIC_WRITE.
 */
static void put_value(enum fi_op op, const struct dt_desc *d, uint32_t r, size_t i, uint32_t seq,
		      uint8_t *p)
{
	uint32_t h = mix(r, (uint32_t) i, seq);
	bool is_signed = d->kind != DT_UINT;
	bool is_big = (r + i + seq) % me.n < 2;
	int re = 0, im = 0;

	switch (op) {
	case FI_BOR:
	case FI_BAND:
	case FI_BXOR:
		for (size_t k = 0; k < d->size; k++)
			p[k] = (uint8_t) mix(r, (uint32_t) (i * 64 + k), seq);
		return;
	case FI_MIN:
	case FI_MAX:
		re = (int) (h % 15) - (is_signed ? 7 : 0);
		break;
	case FI_SUM:
		re = (int) (h % 13) - (is_signed ? 6 : 0);
		im = (int) (h / 13 % 5) - 2;
		break;
	case FI_PROD:
		/* at most two factors of magnitude 2 per element */
		re = is_big ? 2 : 1;
		if (is_signed && h % 3 == 0)
			re = -re;
		im = is_big ? 1 : 0;
		break;
	case FI_LOR:
	case FI_LAND:
	case FI_LXOR:
		re = h % 4 ? (int) (h % 3) + 1 : 0;
		im = !re && h & 16; /* a complex number true by its imaginary part alone */
		break;
	default:
		h = mix(0, (uint32_t) i, seq);
		re = (int) (h % 13);
		im = (int) (h % 7);
		break;
	}
	if (is_int(d)) {
		__int128 v = re;

		memcpy(p, &v, d->size);
		return;
	}
	memset(p, 0, d->size); /* long double padding */
	store_real(d, p, 0, re);
	if (d->kind == DT_CPLX)
		store_real(d, p, 1, im);
}

static void put_values(enum fi_op op, const struct dt_desc *d, uint32_t r, size_t first,
		       size_t count, uint32_t seq, uint8_t *buf)
{
	for (size_t i = 0; i < count; i++)
		put_value(op, d, r, first + i, seq, buf + i * d->size);
}

/* The reduction of elements first..first+count-1 over ranks 0..n-1, in rank order. */
static void reference(enum fi_op op, const struct dt_desc *d, size_t first, size_t count,
		      uint32_t seq, uint8_t *ref)
{
	uint8_t v[64];

	put_values(op, d, 0, first, count, seq, ref);
	for (uint32_t r = 1; r < me.n; r++) {
		for (size_t i = 0; i < count; i++) {
			put_value(op, d, r, first + i, seq, v);
			apply(op, d, ref + i * d->size, v);
		}
	}
}

/* Index of the first element of got that differs from want, or count. */
static size_t first_wrong(const struct dt_desc *d, const uint8_t *got, const uint8_t *want,
			  size_t count)
{
	for (size_t i = 0; i < count; i++) {
		if (!same_elem(d, got + i * d->size, want + i * d->size))
			return i;
	}
	return count;
}

static bool guard_ok(const uint8_t *p, size_t len)
{
	for (size_t i = 0; i < len; i++) {
		if (p[i] != COLL_GUARD_BYTE)
			return false;
	}
	return true;
}

/* Whether fi_query_collective accepts op on d for coll (the datatype's size checked too). */
static bool is_valid(enum fi_collective_op coll, enum fi_op op, const struct dt_desc *d)
{
	struct fi_collective_attr attr = {.op = op, .datatype = d->dt};

	if (fi_query_collective(me.dom.domain, coll, &attr, 0))
		return false;
	if (attr.datatype_attr.size != d->size)
		CHECK(false, "fi_query_collective %d %s %s: size %zu, want %zu", (int) coll,
		      op_names[op], d->name, attr.datatype_attr.size, d->size);
	return true;
}

/* ---- the reductions: allreduce, reduce, reduce-scatter ---- */

/* Output room for count elements of up to 32 bytes, and the guard. */
#define MAX_SMALL (3 * COLL_MAX_RANKS + 1)
static uint8_t in_buf[MAX_SMALL * 32], out_buf[MAX_SMALL * 32 + COLL_GUARD];
static uint8_t ref_buf[MAX_SMALL * 32];

enum red_kind { RED_ALLREDUCE, RED_ALLREDUCE_IN_PLACE, RED_REDUCE, RED_REDUCE_SCATTER };
static const char *const red_names[] = {"allreduce", "allreduce in place", "reduce",
					"reduce_scatter"};

/* Rank i's block of count shared out over n: the first count % n ranks get one more. */
static void block_of(size_t count, uint32_t i, size_t *first, size_t *len)
{
	size_t q = count / me.n, rem = count % me.n;

	*first = i * q + (i < rem ? i : rem);
	*len = q + (i < rem);
}

/* One reduction on the world group; wrong results are counted in *bad. */
static void reduce_one(enum red_kind kind, enum fi_op op, const struct dt_desc *d, size_t count,
		       uint32_t root, unsigned *bad)
{
	size_t first = 0, len = count, out_len;
	uint32_t seq = me.seq++;
	struct fi_context2 ctx;
	bool has_out = true;
	uint8_t *res = out_buf;
	char why[128], what[128];
	ssize_t posted;
	size_t wrong;
	int ret;

	put_values(op, d, me.rank, 0, count, seq, in_buf);
	memset(out_buf, COLL_GUARD_BYTE, sizeof(out_buf));
	if (kind == RED_REDUCE_SCATTER)
		block_of(count, me.rank, &first, &len);
	if (kind == RED_REDUCE && me.rank != root) {
		has_out = false;
		res = NULL; /* fi_collective(3): only the root has a result */
	}
	if (kind == RED_ALLREDUCE_IN_PLACE) {
		memcpy(out_buf, in_buf, count * d->size);
		posted = LT_RETRY(fi_allreduce(me.ep.ep, out_buf, count, NULL, out_buf, NULL,
					       me.world_addr, d->dt, op, 0, &ctx));
	} else if (kind == RED_ALLREDUCE) {
		posted = LT_RETRY(fi_allreduce(me.ep.ep, in_buf, count, NULL, res, NULL,
					       me.world_addr, d->dt, op, 0, &ctx));
	} else if (kind == RED_REDUCE) {
		posted = LT_RETRY(fi_reduce(me.ep.ep, in_buf, count, NULL, res, NULL, me.world_addr,
					    root, d->dt, op, 0, &ctx));
	} else {
		posted = LT_RETRY(fi_reduce_scatter(me.ep.ep, in_buf, count, NULL, res, NULL,
						    me.world_addr, d->dt, op, 0, &ctx));
	}
	snprintf(what, sizeof(what), "%s %s %s count %zu", red_names[kind], op_names[op], d->name,
		 count);
	if (kind == RED_REDUCE)
		snprintf(what + strlen(what), sizeof(what) - strlen(what), " root %u", root);
	ret = coll_run(posted, &ctx);
	if (ret) {
		MISMATCH(bad, "%s: %s", what, coll_str(ret, why, sizeof(why)));
		return;
	}
	if (!has_out)
		return;
	reference(op, d, first, len, seq, ref_buf);
	out_len = len * d->size;
	wrong = first_wrong(d, out_buf, ref_buf, len);
	if (wrong < len)
		MISMATCH(bad, "%s: element %zu wrong", what, first + wrong);
	else if (!guard_ok(out_buf + out_len, sizeof(out_buf) - out_len))
		MISMATCH(bad, "%s: written past the %zu bytes of the result", what, out_len);
}

/*
 * Every operation and datatype fi_query_collective accepts for the reduction's collective (the
 * short pass: FI_SUM on three types), at counts 0, 1, 7, 3n+1 (and n for reduce-scatter).
 */
static void reductions(enum red_kind kind)
{
	static const enum fi_collective_op colls[] = {FI_ALLREDUCE, FI_ALLREDUCE, FI_REDUCE,
						      FI_REDUCE_SCATTER};
	size_t counts[] = {0, 1, 7, 3 * me.n + 1, me.n};
	size_t ncounts = kind == RED_REDUCE_SCATTER ? 5 : 4;
	unsigned done = 0, bad = 0, combos = 0;

	for (size_t o = 0; o < NOPS && !me.is_desync; o++) {
		for (size_t t = 0; t < NDTS && !me.is_desync; t++) {
			const struct dt_desc *d = &dts[t];

			if (!me.is_full &&
			    (ops[o] != FI_SUM ||
			     (d->dt != FI_INT32 && d->dt != FI_UINT64 && d->dt != FI_DOUBLE)))
				continue;
			if (!is_valid(colls[kind], ops[o], d))
				continue;
			if (!has_reference(ops[o], d)) {
				CHECK(false, "%s: %s on %s accepted, which has no meaning",
				      red_names[kind], op_names[ops[o]], d->name);
				continue;
			}
			combos++;
			for (size_t c = 0; c < ncounts && !me.is_desync; c++, done++)
				reduce_one(kind, ops[o], d, counts[c],
					   (uint32_t) (combos + c) % me.n, &bad);
		}
	}
	CHECK(combos >= (me.is_full ? 40u : 3u) && !bad,
	      "%s: %u operation/datatype pairs, %u calls, results as the serial reduction "
	      "(%u wrong)",
	      red_names[kind], combos, done, bad);
}

void data_allreduce(void)
{
	reductions(RED_ALLREDUCE);
	if (me.is_full)
		reductions(RED_ALLREDUCE_IN_PLACE);
}

void data_reduce(void)
{
	unsigned bad = 0;

	reductions(RED_REDUCE);
	/* every rank as the root, small counts */
	for (uint32_t root = 0; root < me.n && !me.is_desync; root++) {
		reduce_one(RED_REDUCE, FI_SUM, &dts[4], 7, root, &bad);
		reduce_one(RED_REDUCE, FI_MAX, &dts[9], 1, root, &bad);
		reduce_one(RED_REDUCE, FI_SUM, &dts[4], 0, root, &bad);
	}
	CHECK(!bad, "reduce: every rank as the root (%u wrong)", bad);
}

void data_reduce_scatter(void)
{
	reductions(RED_REDUCE_SCATTER);
}

/* ---- moving data: broadcast, scatter, gather, allgather, alltoall ---- */

static uint64_t seed_of(uint32_t seq, uint32_t from, uint32_t to)
{
	return (uint64_t) seq << 16 | from << 8 | to;
}

enum move_kind { MOVE_BCAST, MOVE_SCATTER, MOVE_GATHER, MOVE_ALLGATHER, MOVE_ALLTOALL };
static const char *const move_names[] = {"broadcast", "scatter", "gather", "allgather", "alltoall"};

/* The pattern expected in output block j of a movement (seed_of names sender and receiver). */
static uint64_t expected_seed(enum move_kind kind, uint32_t seq, uint32_t root, uint32_t j)
{
	switch (kind) {
	case MOVE_BCAST:
		return seed_of(seq, root, 0);
	case MOVE_SCATTER:
		return seed_of(seq, root, me.rank);
	case MOVE_ALLTOALL:
		return seed_of(seq, j, me.rank);
	default:
		return seed_of(seq, j, 0); /* gather, allgather: block j is rank j's input */
	}
}

/*
 * One data movement on the world group of count elements: inputs are patterns named by sender
 * and receiver; outputs are checked, and the guard after them.
 */
static void move_one(enum move_kind kind, const struct dt_desc *d, size_t count, uint32_t root,
		     unsigned *bad)
{
	const bool is_root = me.rank == root;
	const bool is_many_in = kind == MOVE_SCATTER || kind == MOVE_ALLTOALL;
	const size_t len = count * d->size;
	size_t blocks =
		kind == MOVE_GATHER || kind == MOVE_ALLGATHER || kind == MOVE_ALLTOALL ? me.n : 1;
	uint8_t *in = malloc((is_many_in ? me.n : 1) * len + 1);
	uint8_t *out = malloc(blocks * len + COLL_GUARD);
	uint32_t seq = me.seq++;
	struct fi_context2 ctx;
	ssize_t posted = 0;
	char why[128], what[128];
	int ret;

	if (!in || !out) {
		CHECK(false, "%s: buffers", move_names[kind]);
		me.is_desync = true;
		goto out;
	}
	memset(out, COLL_GUARD_BYTE, blocks * len + COLL_GUARD);
	if (is_many_in) {
		for (uint32_t j = 0; j < me.n; j++)
			lt_fill(in + j * len, len, seed_of(seq, me.rank, j));
	} else {
		lt_fill(in, len, seed_of(seq, me.rank, 0));
	}

	switch (kind) {
	case MOVE_BCAST:
		/* one buffer: the root's input, everyone else's output */
		if (is_root)
			memcpy(out, in, len);
		posted = LT_RETRY(fi_broadcast(me.ep.ep, out, count, NULL, me.world_addr, root,
					       d->dt, 0, &ctx));
		break;
	case MOVE_SCATTER:
		/* fi_collective(3): only the root has an input */
		posted = LT_RETRY(fi_scatter(me.ep.ep, is_root ? in : NULL, count, NULL, out, NULL,
					     me.world_addr, root, d->dt, 0, &ctx));
		break;
	case MOVE_GATHER:
		posted = LT_RETRY(fi_gather(me.ep.ep, in, count, NULL, out, NULL, me.world_addr,
					    root, d->dt, 0, &ctx));
		break;
	case MOVE_ALLGATHER:
		posted = LT_RETRY(fi_allgather(me.ep.ep, in, count, NULL, out, NULL, me.world_addr,
					       d->dt, 0, &ctx));
		break;
	case MOVE_ALLTOALL:
		posted = LT_RETRY(fi_alltoall(me.ep.ep, in, count, NULL, out, NULL, me.world_addr,
					      d->dt, 0, &ctx));
		break;
	}
	snprintf(what, sizeof(what), "%s %s count %zu", move_names[kind], d->name, count);
	if (kind <= MOVE_GATHER)
		snprintf(what + strlen(what), sizeof(what) - strlen(what), " root %u", root);
	ret = coll_run(posted, &ctx);
	if (ret) {
		MISMATCH(bad, "%s: %s", what, coll_str(ret, why, sizeof(why)));
		goto out;
	}
	/* a gather's result is the root's only */
	if (kind == MOVE_GATHER && !is_root)
		goto out;
	for (uint32_t j = 0; len && j < blocks; j++) {
		if (lt_verify(out + j * len, len, expected_seed(kind, seq, root, j)) != len) {
			MISMATCH(bad, "%s: block %u wrong", what, j);
			goto out;
		}
	}
	if (!guard_ok(out + blocks * len, COLL_GUARD))
		MISMATCH(bad, "%s: written past the %zu bytes of the result", what, blocks * len);
out:
	free(in);
	free(out);
}

void data_movement(void)
{
	static const size_t types[] = {1, 2, 8, 7, 13}; /* UINT8 INT16 FLOAT UINT64 LD COMPLEX */
	size_t counts[] = {0, 1, 7, 3 * me.n + 1};

	for (int kind = MOVE_BCAST; kind <= MOVE_ALLTOALL && !me.is_desync; kind++) {
		bool has_root = kind <= MOVE_GATHER;
		unsigned bad = 0, done = 0;

		for (size_t t = 0; t < 5 && !me.is_desync; t++) {
			for (size_t c = 0; c < 4 && !me.is_desync; c++) {
				for (uint32_t root = 0; root < (has_root ? me.n : 1); root++) {
					/* short pass: three roots */
					if (!me.is_full && root && root != me.n / 2 &&
					    root != me.n - 1)
						continue;
					move_one(kind, &dts[types[t]], counts[c], root, &bad);
					done++;
				}
			}
		}
		CHECK(!bad,
		      "%s: %u calls (5 datatypes, counts 0 to %zu%s), data where it belongs "
		      "(%u wrong)",
		      move_names[kind], done, counts[3], has_root ? ", roots" : "", bad);
	}
}

/* ---- barrier ---- */

void data_barrier(void)
{
	struct fi_context2 ctx[4];
	char why[128];
	int ret;

	ret = coll_run(LT_RETRY(fi_barrier(me.ep.ep, me.world_addr, &ctx[0])), &ctx[0]);
	CHECK(!ret, "fi_barrier completes with its context and FI_COLLECTIVE (%s)",
	      coll_str(ret, why, sizeof(why)));
	ret = coll_run(LT_RETRY(fi_barrier2(me.ep.ep, me.world_addr, 0, &ctx[1])), &ctx[1]);
	CHECK(!ret, "fi_barrier2 with flags 0 completes (%s)", coll_str(ret, why, sizeof(why)));
	ret = coll_run(LT_RETRY(fi_barrier2(me.ep.ep, me.world_addr, FI_COMPLETION, &ctx[3])),
		       &ctx[3]);
	CHECK(!ret, "fi_barrier2 with FI_COMPLETION completes (%s)",
	      coll_str(ret, why, sizeof(why)));
	if (me.is_desync)
		return;
	ret = (int) fi_barrier2(me.ep.ep, me.world_addr, 1ULL << 62, &ctx[3]);
	CHECK(ret < 0, "fi_barrier2 with an unknown flag is refused (%d)", ret);
	if (!ret)
		(void) coll_wait(&ctx[3]);
	if (me.is_desync)
		return;

	/*
	 * The last rank enters only when rank 0 says so, after rank 0 has waited a while in its
	 * own barrier: rank 0's cannot have completed by then (no timing in the verdict).
	 */
	if (me.rank == me.n - 1) {
		char go;

		if (coll_pipe_recv(me.rfd, &go, 1, LT_TIMEOUT_MS) != 1) {
			me.is_desync = true;
			CHECK(false, "the word to enter the barrier came from rank 0");
			return;
		}
	}
	if (LT_RETRY(fi_barrier(me.ep.ep, me.world_addr, &ctx[2]))) {
		me.is_desync = true;
		CHECK(false, "a barrier is posted");
		return;
	}
	if (me.rank == 0) {
		CHECK(lt_cq_quiet(&me.ep.tx, 200) == 0,
		      "the barrier does not complete while rank %u has not entered it", me.n - 1);
		lt_pipe_send(me.children[me.n - 2].to_child, "g", 1);
	}
	ret = coll_wait(&ctx[2]);
	CHECK(!ret, "and completes once it has (%s)", coll_str(ret, why, sizeof(why)));
}

/* ---- large counts ---- */

void data_large(void)
{
	const size_t n = me.n, len = LARGE_COUNT * sizeof(uint32_t);
	uint32_t *in = malloc(len), *out = malloc(n * len + COLL_GUARD);
	struct fi_context2 ctx;
	size_t wrong = 0;
	uint32_t seq;
	char why[128];
	int ret;

	if (!CHECK(in && out, "%zu MB of buffers", (n + 1) * len >> 20))
		goto out;
	for (size_t i = 0; i < LARGE_COUNT; i++)
		in[i] = (uint32_t) (i * 3 + me.rank);
	ret = coll_run(LT_RETRY(fi_allreduce(me.ep.ep, in, LARGE_COUNT, NULL, out, NULL,
					     me.world_addr, FI_UINT32, FI_SUM, 0, &ctx)),
		       &ctx);
	for (size_t i = 0; i < LARGE_COUNT && !ret; i++)
		wrong += out[i] != (uint32_t) (n * i * 3 + n * (n - 1) / 2);
	CHECK(!ret && !wrong, "allreduce FI_SUM of %u FI_UINT32 (%s, %zu wrong)", LARGE_COUNT,
	      coll_str(ret, why, sizeof(why)), wrong);
	if (me.is_desync)
		goto out;

	seq = me.seq++;
	if (me.rank == n - 1)
		lt_fill(out, len, seed_of(seq, 0, 0));
	else
		memset(out, 0, len);
	ret = coll_run(LT_RETRY(fi_broadcast(me.ep.ep, out, LARGE_COUNT, NULL, me.world_addr, n - 1,
					     FI_UINT32, 0, &ctx)),
		       &ctx);
	CHECK(!ret && lt_verify(out, len, seed_of(seq, 0, 0)) == len,
	      "broadcast of %u FI_UINT32 from rank %zu (%s)", LARGE_COUNT, n - 1,
	      coll_str(ret, why, sizeof(why)));
	if (me.is_desync)
		goto out;

	seq = me.seq++;
	lt_fill(in, len, seed_of(seq, me.rank, 0));
	memset(out, COLL_GUARD_BYTE, n * len + COLL_GUARD);
	ret = coll_run(LT_RETRY(fi_allgather(me.ep.ep, in, LARGE_COUNT, NULL, out, NULL,
					     me.world_addr, FI_UINT32, 0, &ctx)),
		       &ctx);
	for (uint32_t j = 0; j < n && !ret; j++)
		wrong += lt_verify((uint8_t *) out + j * len, len, seed_of(seq, j, 0)) != len;
	CHECK(!ret && !wrong && guard_ok((uint8_t *) out + n * len, COLL_GUARD),
	      "allgather of %u FI_UINT32 per rank (%s, %zu blocks wrong)", LARGE_COUNT,
	      coll_str(ret, why, sizeof(why)), wrong);
out:
	free(in);
	free(out);
}

/* ---- several outstanding on one group ---- */

void data_outstanding(void)
{
	static const size_t counts[BURST] = {7, 1000, 70000, 3, 1, 70000, 0, 300};
	struct fi_context2 ctx[BURST];
	uint32_t *in[BURST] = {0}, *out[BURST] = {0}, bar[4];
	size_t posted = 0, done = 0, in_order = 0, wrong = 0, k;
	struct lt_comp comp;
	uint32_t mixed_in[4], mixed_out[4 * COLL_MAX_RANKS];

	for (k = 0; k < BURST; k++) {
		in[k] = malloc(counts[k] * 4 + 4);
		out[k] = malloc(counts[k] * 4 + 4);
		if (!in[k] || !out[k])
			goto out;
		for (size_t i = 0; i < counts[k]; i++)
			in[k][i] = (uint32_t) ((k + 1) * (i % 5 + 1) + me.rank);
	}
	for (k = 0; k < BURST; k++, posted++) {
		if (LT_RETRY(fi_allreduce(me.ep.ep, in[k], counts[k], NULL, out[k], NULL,
					  me.world_addr, FI_UINT32, FI_SUM, 0, &ctx[k])))
			break;
	}
	for (k = 0; k < posted && lt_cq_next(&me.ep.tx, &comp, LT_TIMEOUT_MS); k++) {
		done += !comp.err;
		in_order += comp.op_context == &ctx[k];
	}
	for (k = 0; k < posted; k++) {
		for (size_t i = 0; i < counts[k]; i++)
			wrong += out[k][i] !=
				 (uint32_t) (me.n * (k + 1) * (i % 5 + 1) + me.n * (me.n - 1) / 2);
	}
	if (posted < BURST || done < BURST)
		me.is_desync = true;
	CHECK(posted == BURST && done == BURST && in_order == BURST && !wrong,
	      "%d allreduces posted back to back (up to 70000 elements): %zu posted, %zu "
	      "completed, %zu in posting order, %zu elements wrong",
	      BURST, posted, done, in_order, wrong);
	if (me.is_desync)
		goto out;

	/* different collectives outstanding at once */
	for (k = 0; k < 4; k++)
		mixed_in[k] = me.rank * 10 + (uint32_t) k;
	posted = done = in_order = 0;
	posted += !LT_RETRY(fi_allreduce(me.ep.ep, mixed_in, 4, NULL, bar, NULL, me.world_addr,
					 FI_UINT32, FI_MAX, 0, &ctx[0]));
	posted += !LT_RETRY(fi_barrier(me.ep.ep, me.world_addr, &ctx[1]));
	posted += !LT_RETRY(fi_allgather(me.ep.ep, mixed_in, 4, NULL, mixed_out, NULL,
					 me.world_addr, FI_UINT32, 0, &ctx[2]));
	posted += !LT_RETRY(fi_broadcast(me.ep.ep, in[2], 70000, NULL, me.world_addr, 0, FI_UINT32,
					 0, &ctx[3]));
	posted += !LT_RETRY(fi_barrier(me.ep.ep, me.world_addr, &ctx[4]));
	for (k = 0; k < posted && lt_cq_next(&me.ep.tx, &comp, LT_TIMEOUT_MS); k++) {
		done += !comp.err;
		in_order += comp.op_context == &ctx[k];
	}
	if (posted < 5 || done < 5)
		me.is_desync = true;
	wrong = 0;
	for (k = 0; k < 4; k++)
		wrong += bar[k] != (me.n - 1) * 10 + k;
	for (k = 0; k < 4 * me.n; k++)
		wrong += mixed_out[k] != (uint32_t) (k / 4 * 10 + k % 4);
	for (size_t i = 0; i < 70000; i++)
		wrong += in[2][i] != (uint32_t) (3 * (i % 5 + 1));
	CHECK(posted == 5 && done == 5 && !wrong,
	      "allreduce, barrier, allgather, broadcast, barrier outstanding together: %zu "
	      "completed, %zu elements wrong",
	      done, wrong);
	CHECK(in_order == 5, "and completed in posting order (%zu of 5)", in_order);
out:
	for (k = 0; k < BURST; k++) {
		free(in[k]);
		free(out[k]);
	}
}

/* ---- the application's receives see nothing of the collectives ---- */

void data_tag_space(void)
{
	struct fi_context2 tctx, mctx;
	char tbuf[64], mbuf[64];
	struct lt_comp comp;
	size_t cancelled = 0;

	if (!CHECK_RET(LT_RETRY(fi_trecv(me.ep.ep, tbuf, sizeof(tbuf), NULL, FI_ADDR_UNSPEC, 0,
					 ~0ULL, &tctx)),
		       0, "a tagged receive matching any tag") ||
	    !CHECK_RET(lt_recv(&me.ep, mbuf, sizeof(mbuf), FI_ADDR_UNSPEC, &mctx), 0,
		       "an untagged receive from anyone")) {
		me.is_desync = true;
		return;
	}
	coll_sum_ok(me.world_addr, me.rank + 1, me.n * (me.n + 1) / 2, "with both receives posted");
	lt_progress();
	CHECK_RET(me.ep.rx.count, 0, "no collective traffic lands in the application's receives");
	fi_cancel(&me.ep.ep->fid, &tctx);
	fi_cancel(&me.ep.ep->fid, &mctx);
	while (cancelled < 2 && lt_cq_next(&me.ep.rx, &comp, LT_TIMEOUT_MS))
		cancelled += comp.err == FI_ECANCELED;
	CHECK_RET(cancelled, 2, "both receives cancelled afterwards");
}

/* ---- what fi_query_collective accepts ---- */

static int query(enum fi_collective_op coll, enum fi_op op, enum fi_datatype dt,
		 struct fi_collective_attr *attr)
{
	*attr = (struct fi_collective_attr){.op = op, .datatype = dt};
	return fi_query_collective(me.dom.domain, coll, attr, 0);
}

void check_query(void)
{
	static const enum fi_collective_op reductions_of[] = {FI_ALLREDUCE, FI_REDUCE,
							      FI_REDUCE_SCATTER};
	struct fi_collective_attr attr;
	unsigned wrong = 0;

	LT_CHECK_RET(query(FI_BARRIER, FI_NOOP, FI_VOID, &attr), 0, "query: FI_BARRIER");
	LT_CHECK(attr.max_members >= 64, "max_members %zu >= 64", attr.max_members);
	LT_CHECK_RET(query(FI_BARRIER, FI_SUM, FI_INT32, &attr), -FI_EOPNOTSUPP,
		     "query: FI_BARRIER with FI_SUM");
	LT_CHECK_RET(query(FI_ALLREDUCE, FI_SUM, FI_INT32, &attr), 0,
		     "query: FI_ALLREDUCE FI_SUM FI_INT32");
	LT_CHECK(attr.datatype_attr.size == 4 && attr.max_members >= 64,
		 "size 4 (%zu), max_members >= 64 (%zu)", attr.datatype_attr.size,
		 attr.max_members);
	LT_CHECK_RET(query(FI_ALLREDUCE, FI_BOR, FI_UINT64, &attr), 0,
		     "query: FI_ALLREDUCE FI_BOR FI_UINT64");
	LT_CHECK(attr.datatype_attr.size == 8, "size 8 (%zu)", attr.datatype_attr.size);
	LT_CHECK_RET(query(FI_ALLREDUCE, FI_BAND, FI_FLOAT, &attr), -FI_EOPNOTSUPP,
		     "query: FI_BAND on FI_FLOAT");
	LT_CHECK_RET(query(FI_ALLREDUCE, FI_SUM, FI_VOID, &attr), -FI_EOPNOTSUPP,
		     "query: FI_SUM on FI_VOID");
	LT_CHECK_RET(query(FI_ALLREDUCE, FI_MIN, FI_DOUBLE_COMPLEX, &attr), -FI_EOPNOTSUPP,
		     "query: FI_MIN on FI_DOUBLE_COMPLEX");
	LT_CHECK_RET(query(FI_REDUCE_SCATTER, FI_SUM, FI_INT32, &attr), 0,
		     "query: FI_REDUCE_SCATTER FI_SUM FI_INT32");
	LT_CHECK_RET(query(FI_REDUCE, FI_MAX, FI_DOUBLE, &attr), 0,
		     "query: FI_REDUCE FI_MAX "
		     "FI_DOUBLE");

	/* the rules every reduction follows (fi_collective(3), fi_atomic(3)) */
	for (size_t c = 0; c < 3; c++) {
		for (size_t o = 0; o < NOPS; o++) {
			for (size_t t = 0; t < 14; t++) {
				const struct dt_desc *d = &dts[t];
				enum fi_op op = ops[o];
				int want = 1; /* 1: either */
				int ret = query(reductions_of[c], op, d->dt, &attr);

				if (op <= FI_PROD && d->kind != DT_CPLX)
					want = 0;
				else if ((op == FI_SUM || op == FI_PROD) && d->kind == DT_CPLX)
					want = 0;
				else if ((op == FI_MIN || op == FI_MAX) && d->kind == DT_CPLX)
					want = -FI_EOPNOTSUPP;
				else if (is_bitwise(op))
					want = is_int(d) ? 0 : -FI_EOPNOTSUPP;
				else if (is_logical(op) && is_int(d))
					want = 0;
				if (want != 1 && ret != want) {
					wrong++;
					LT_CHECK(false,
						 "query: collective %d %s on %s: %d, want %d",
						 (int) reductions_of[c], op_names[op], d->name, ret,
						 want);
				} else if (!ret && attr.datatype_attr.size != d->size) {
					wrong++;
					LT_CHECK(false, "query: %s on %s: size %zu, want %zu",
						 op_names[op], d->name, attr.datatype_attr.size,
						 d->size);
				}
			}
		}
	}
	LT_CHECK(!wrong,
		 "query: MIN, MAX, SUM, PROD on every integer and real type, SUM and PROD "
		 "on complex, bitwise and logical operations on integers, bitwise never on reals "
		 "(%u wrong)",
		 wrong);
}
