/*
 * coll_bench_mpi: the rows of fi_coll_bench(1) with MPI's collectives, for a comparison with
 * a provider's fi_collective(3) under the same load: MPI_Barrier, MPI_Allreduce (8 B and
 * 1 MiB of uint64_t, MPI_SUM), MPI_Bcast (8 B and 1 MiB, root 0), MPI_Allgather (8 B and
 * 64 KiB per rank). Per test: a checked call (a wrong answer is reported, not timed), the
 * warm-up, a barrier, then the timed calls; the figure is the slowest rank's average in
 * microseconds per call, the median over the repeats, the tests taking turns within each
 * repeat as in fi_coll_bench.
 *
 * usage: coll_bench_mpi [-i ITERS] [-w WARMUP] [-r REPEATS] [-t TEST]... [-c]
 * Prints "test size us" lines (size in bytes, per rank for allgather, 0 for the barrier),
 * or with -c "test,size,us" after a header, which is how fi_coll_bench -c prints its rows.
 * Not built by make: tests/bench/run_coll_compare.sh builds it with mpicc and runs it.
 */
#include <mpi.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define DEFAULT_REPEATS 5
#define MAX_REPEATS 100
#define GUARD_LEN 4096
#define GUARD_BYTE 0xa5
#define ROOT 0

enum coll_op { OP_BARRIER, OP_ALLREDUCE, OP_BCAST, OP_ALLGATHER };

struct test {
	const char *name;
	enum coll_op op;
	size_t size;	     /* bytes: the vector, or each rank's part (allgather) */
	unsigned long iters; /* timed calls, unless -i */
};

/* The rows and default iterations of fi_coll_bench, in its order. */
#define NTESTS 7
static const struct test tests[NTESTS] = {
	{.name = "barrier", .op = OP_BARRIER, .size = 0, .iters = 1000},
	{.name = "allreduce", .op = OP_ALLREDUCE, .size = 8, .iters = 1000},
	{.name = "allreduce", .op = OP_ALLREDUCE, .size = 1 << 20, .iters = 50},
	{.name = "broadcast", .op = OP_BCAST, .size = 8, .iters = 1000},
	{.name = "broadcast", .op = OP_BCAST, .size = 1 << 20, .iters = 50},
	{.name = "allgather", .op = OP_ALLGATHER, .size = 8, .iters = 1000},
	{.name = "allgather", .op = OP_ALLGATHER, .size = 64 << 10, .iters = 200},
};

static int rank, nranks;
static uint64_t *send_buf, *recv_buf;
static unsigned long opt_iters; /* 0: each test's own */
static long opt_warmup = -1;	/* -1: a tenth of the timed calls, one at least */
static int opt_repeats = DEFAULT_REPEATS;
static bool opt_csv;
static bool selected[NTESTS];
static bool is_wrong[NTESTS];
static double samples[NTESTS][MAX_REPEATS];

static double now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

/* Element j of rank q's contribution, as in fi_coll_bench. */
static uint64_t value(int q, size_t j)
{
	return ((uint64_t) (q + 1) << 48) + (uint64_t) j * 0x9e3779b97f4a7c15ULL;
}

static size_t result_len(const struct test *t)
{
	return t->op == OP_ALLGATHER ? t->size * (size_t) nranks : t->size;
}

static void call(const struct test *t)
{
	int count = (int) (t->size / sizeof(uint64_t));

	switch (t->op) {
	case OP_BARRIER:
		MPI_Barrier(MPI_COMM_WORLD);
		break;
	case OP_ALLREDUCE:
		MPI_Allreduce(send_buf, recv_buf, count, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
		break;
	case OP_BCAST:
		MPI_Bcast(recv_buf, count, MPI_UINT64_T, ROOT, MPI_COMM_WORLD);
		break;
	case OP_ALLGATHER:
		MPI_Allgather(send_buf, count, MPI_UINT64_T, recv_buf, count, MPI_UINT64_T,
			      MPI_COMM_WORLD);
		break;
	}
}

/* Distinct per rank: a read past one rank's buffer written past another's is caught. */
static int guard_byte(void)
{
	return GUARD_BYTE ^ (rank & 0x3f);
}

static void fill(const struct test *t)
{
	size_t count = t->size / sizeof(uint64_t), len = result_len(t);

	for (size_t j = 0; j < count; j++)
		send_buf[j] = value(rank, j);
	memset(recv_buf, guard_byte(), len + GUARD_LEN);
	if (t->op == OP_BCAST && rank == ROOT)
		memcpy(recv_buf, send_buf, len);
}

/* This rank's answer against a serial computation; NULL when right. */
static const char *check(const struct test *t)
{
	size_t count = t->size / sizeof(uint64_t), len = result_len(t);
	const unsigned char *guard = (const unsigned char *) recv_buf + len;

	switch (t->op) {
	case OP_BARRIER:
		break;
	case OP_ALLREDUCE:
		for (size_t j = 0; j < count; j++) {
			uint64_t want = 0;

			for (int q = 0; q < nranks; q++)
				want += value(q, j);
			if (recv_buf[j] != want)
				return "wrong sum";
		}
		break;
	case OP_BCAST:
		for (size_t j = 0; j < count; j++)
			if (recv_buf[j] != value(ROOT, j))
				return "wrong data";
		break;
	case OP_ALLGATHER:
		for (int q = 0; q < nranks; q++)
			for (size_t j = 0; j < count; j++)
				if (recv_buf[(size_t) q * count + j] != value(q, j))
					return "wrong data";
		break;
	}
	for (size_t i = 0; i < GUARD_LEN; i++)
		if (guard[i] != guard_byte())
			return "wrote past the result";
	return NULL;
}

/* The slowest rank's average per timed call; false when some rank got a wrong answer. */
static bool run_test(int ti, double *us)
{
	const struct test *t = &tests[ti];
	unsigned long iters = opt_iters ? opt_iters : t->iters;
	unsigned long warmup = opt_warmup >= 0 ? (unsigned long) opt_warmup : iters / 10;
	const char *wrong;
	int is_ok, all_ok;
	double start, mine;

	if (opt_warmup < 0 && !warmup)
		warmup = 1;
	fill(t);
	call(t);
	wrong = check(t);
	if (wrong)
		fprintf(stderr, "coll_bench_mpi: rank %d: %s %zu B: %s\n", rank, t->name, t->size,
			wrong);
	is_ok = !wrong;
	MPI_Allreduce(&is_ok, &all_ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
	if (!all_ok)
		return false;
	for (unsigned long i = 0; i < warmup; i++)
		call(t);
	MPI_Barrier(MPI_COMM_WORLD);
	start = now_us();
	for (unsigned long i = 0; i < iters; i++)
		call(t);
	mine = (now_us() - start) / (double) iters;
	MPI_Reduce(&mine, us, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
	return true;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *) a, y = *(const double *) b;

	return (x > y) - (x < y);
}

static double median(double *v, int n)
{
	qsort(v, (size_t) n, sizeof(v[0]), cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static bool select_test(const char *arg)
{
	const char *colon = strchr(arg, ':');
	size_t len = colon ? (size_t) (colon - arg) : strlen(arg), size = 0;
	bool found = false;

	if (colon) {
		char *end;

		size = strtoul(colon + 1, &end, 10);
		if (*end == 'k' || *end == 'K')
			size <<= 10, end++;
		else if (*end == 'm' || *end == 'M')
			size <<= 20, end++;
		if (*end || end == colon + 1)
			return false;
	}
	for (int t = 0; t < NTESTS; t++) {
		bool same = strlen(tests[t].name) == len && !strncmp(arg, tests[t].name, len);

		same = same || (len == 5 && !strncmp(arg, "bcast", 5) && tests[t].op == OP_BCAST);
		if (!same || (colon && size != tests[t].size))
			continue;
		selected[t] = true;
		found = true;
	}
	return found;
}

static void usage_exit(void)
{
	if (rank == 0)
		fprintf(stderr, "usage: coll_bench_mpi [-i ITERS] [-w WARMUP] [-r REPEATS] "
				"[-t TEST[:SIZE]]... [-c]\n");
	MPI_Finalize();
	exit(2);
}

static void parse_options(int argc, char **argv)
{
	bool any_test = false;
	int c;

	while ((c = getopt(argc, argv, "i:w:r:t:c")) != -1) {
		switch (c) {
		case 'i':
			opt_iters = strtoul(optarg, NULL, 10);
			if (!opt_iters)
				usage_exit();
			break;
		case 'w':
			opt_warmup = strtol(optarg, NULL, 10);
			if (opt_warmup < 0)
				usage_exit();
			break;
		case 'r':
			opt_repeats = atoi(optarg);
			if (opt_repeats < 1 || opt_repeats > MAX_REPEATS)
				usage_exit();
			break;
		case 't':
			if (!select_test(optarg))
				usage_exit();
			any_test = true;
			break;
		case 'c':
			opt_csv = true;
			break;
		default:
			usage_exit();
		}
	}
	for (int t = 0; !any_test && t < NTESTS; t++)
		selected[t] = true;
}

int main(int argc, char **argv)
{
	char version[MPI_MAX_LIBRARY_VERSION_STRING], *nl;
	size_t send_len = 0, recv_len = 0;
	int vlen;

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &nranks);
	parse_options(argc, argv);
	for (int t = 0; t < NTESTS; t++) {
		if (tests[t].size > send_len)
			send_len = tests[t].size;
		if (result_len(&tests[t]) > recv_len)
			recv_len = result_len(&tests[t]);
	}
	send_buf = malloc(send_len + GUARD_LEN);
	recv_buf = malloc(recv_len + GUARD_LEN);
	if (!send_buf || !recv_buf) {
		fprintf(stderr, "coll_bench_mpi: out of memory\n");
		MPI_Abort(MPI_COMM_WORLD, 1);
	}

	for (int r = 0; r < opt_repeats; r++)
		for (int t = 0; t < NTESTS; t++)
			if (selected[t] && !is_wrong[t] && !run_test(t, &samples[t][r]))
				is_wrong[t] = true;

	if (rank == 0) {
		MPI_Get_library_version(version, &vlen);
		nl = strchr(version, '\n');
		if (nl)
			*nl = '\0';
		nl = strchr(version, ',');
		if (nl)
			*nl = '\0';
		printf("# coll_bench_mpi, %s: %d ranks, median of %d repeat%s; us per call, the "
		       "slowest rank's average\n",
		       version, nranks, opt_repeats, opt_repeats == 1 ? "" : "s");
		printf(opt_csv ? "test,size,mpi\n" : "# test size us\n");
		for (int t = 0; t < NTESTS; t++) {
			if (!selected[t])
				continue;
			printf(opt_csv ? "%s,%zu," : "%-10s %8zu ", tests[t].name, tests[t].size);
			if (is_wrong[t])
				printf("n/a (wrong result)\n");
			else
				printf("%.2f\n", median(samples[t], opt_repeats));
		}
	}
	free(send_buf);
	free(recv_buf);
	MPI_Finalize();
	return 0;
}
