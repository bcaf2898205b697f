/*
 * An MPI program for Open MPI's ofi MTL over tcp;ofi_layer: ping-pong at small and large
 * sizes between ranks 0 and 1, MPI_Probe and MPI_ANY_SOURCE receives fed by every other
 * rank, MPI_Improbe + MPI_Mrecv (FI_PEEK | FI_CLAIM, then FI_CLAIM) of a large message, and
 * a collective. Prints one line per rank and exits non-zero on any mismatch.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BIG (4 << 20)

static int pingpong(int rank)
{
	static const int sizes[] = { 1, 1000, 65536, 8 << 20 };
	int fails = 0;

	for (int k = 0; k < 4; k++) {
		int n = sizes[k];
		char *b = malloc(n);

		for (int i = 0; i < 20; i++) {
			if (rank == 0) {
				memset(b, i, n);
				MPI_Send(b, n, MPI_CHAR, 1, k, MPI_COMM_WORLD);
				MPI_Recv(b, n, MPI_CHAR, 1, k, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
				fails += b[0] != (char) (i + 1) || b[n - 1] != (char) (i + 1);
			} else if (rank == 1) {
				MPI_Recv(b, n, MPI_CHAR, 0, k, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
				fails += b[0] != (char) i || b[n - 1] != (char) i;
				memset(b, i + 1, n);
				MPI_Send(b, n, MPI_CHAR, 0, k, MPI_COMM_WORLD);
			}
		}
		free(b);
	}
	return fails;
}

/* Every rank but 0 sends a small, a large and a final message; rank 0 probes for them. */
static int probes(int rank, int size)
{
	MPI_Message msg;
	MPI_Status st;
	int fails = 0, flag, cnt, v;
	char *big;

	if (rank) {
		big = malloc(BIG);
		memset(big, rank, BIG);
		v = rank;
		MPI_Send(&v, 1, MPI_INT, 0, 100, MPI_COMM_WORLD);
		MPI_Send(big, BIG, MPI_CHAR, 0, 101, MPI_COMM_WORLD);
		MPI_Send(&v, 1, MPI_INT, 0, 102, MPI_COMM_WORLD);
		free(big);
		return 0;
	}
	for (int i = 1; i < size; i++) {
		MPI_Probe(MPI_ANY_SOURCE, 100, MPI_COMM_WORLD, &st);
		MPI_Recv(&v, 1, MPI_INT, st.MPI_SOURCE, 100, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
		fails += v != st.MPI_SOURCE;
	}
	for (int i = 1; i < size; i++) {
		flag = 0;
		while (!flag)
			MPI_Improbe(MPI_ANY_SOURCE, 101, MPI_COMM_WORLD, &flag, &msg, &st);
		MPI_Get_count(&st, MPI_CHAR, &cnt);
		fails += cnt != BIG;
		big = malloc(BIG);
		MPI_Mrecv(big, BIG, MPI_CHAR, &msg, MPI_STATUS_IGNORE);
		fails += big[0] != (char) st.MPI_SOURCE || big[BIG - 1] != (char) st.MPI_SOURCE;
		free(big);
	}
	for (int i = 1; i < size; i++) {
		MPI_Recv(&v, 1, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &st);
		fails += st.MPI_TAG != 102 || v != st.MPI_SOURCE;
	}
	return fails;
}

int main(int argc, char **argv)
{
	int rank, size, fails, sum = 0, one;

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	fails = pingpong(rank);
	fails += probes(rank, size);
	one = rank + 1;
	MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
	fails += sum != size * (size + 1) / 2;
	MPI_Barrier(MPI_COMM_WORLD);
	printf("rank %d of %d: %s (%d mismatches)\n", rank, size, fails ? "FAIL" : "ok", fails);
	MPI_Finalize();
	return fails != 0;
}
