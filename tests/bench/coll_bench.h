/*
 * fi_coll_bench: what rank 0 and the other ranks share.
 *
 * fi_coll_bench.c    rank 0: starting and commanding the other ranks, runs and cells, the
 *                    table, options, main
 * coll_bench_rank.c  one rank, whichever: its fabric objects, waiting, the join, the tests and
 *                    their checks; the main loop of ranks 1..N-1
 */
#ifndef COLL_BENCH_H
#define COLL_BENCH_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <rdma/fabric.h>
#include <rdma/fi_collective.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>

#include "bench_util.h"

#define BENCH_NAME "fi_coll_bench"

#define MAX_RANKS 64
#define MAX_PROVS 8

#define ADDR_MAX 256
#define PROV_LEN 128
#define WHY_LEN 112
#define CHECK_POLLS 64 /* empty CQ reads between two looks at the clock */
#define FD_POLLS 16    /* CQ reads between two looks at the socketpairs */

#define EXIT_FAILED 1
#define EXIT_USAGE 2
#define EXIT_UNAVAIL 77

enum coll_op { OP_BARRIER, OP_ALLREDUCE, OP_BROADCAST, OP_ALLGATHER };

struct test {
	const char *name;
	enum coll_op op;
	size_t size;	     /* bytes: the vector, or each rank's part (allgather) */
	unsigned long iters; /* timed calls, unless -i */
};

#define NTESTS 7
/* The rows of the table, in order (coll_bench_rank.c). */
extern const struct test tests[NTESTS];

/* Rank 0 -> rank i, right after the exec. */
struct spec {
	int32_t rank;
	int32_t nranks;
	int32_t cpu;	  /* -1: not pinned */
	uint32_t timeout; /* seconds, every wait */
	uint64_t iters[NTESTS];
	uint64_t warmup[NTESTS];
	char prov[PROV_LEN];
};

/* Rank i -> rank 0, once its endpoint is open. */
struct hello {
	int32_t status; /* 0, or the negative fi_errno that stopped the rank */
	uint32_t addrlen;
	char addr[ADDR_MAX];
	char why[WHY_LEN];
};

/* Rank 0 -> every rank: the names of all ranks follow, addrlen bytes each, in rank order. */
struct names_hdr {
	int32_t status;
	uint32_t addrlen;
};

/* Rank 0 -> every rank: run this test, or quit. */
#define STEP_JOIN -1
#define STEP_QUIT -2
#define STEP_IDLE -3 /* a result only: failed while waiting for the next step */
struct cmd {
	int32_t test;
};

/* Rank i -> rank 0: the join (STEP_JOIN), then one per test. */
#define STATUS_SKIP 1 /* the provider says it does not do this operation */
struct result {
	int32_t test;
	int32_t status; /* 0, STATUS_SKIP, or a negative fi_errno */
	double us;	/* this rank's average per timed call */
	char why[WHY_LEN];
};

/* One rank's fabric objects and buffers. */
struct rank {
	int rank;
	int nranks;
	const char *prov;
	unsigned timeout;
	struct fi_info *info;
	struct fid_fabric *fabric;
	struct fid_domain *domain;
	struct fid_eq *eq;
	struct fid_av *av;
	struct fid_cq *cq;
	struct fid_ep *ep;
	struct fid_av_set *set;
	struct fid_mc *mc;
	struct fid_mr *send_mr;
	struct fid_mr *recv_mr;
	void *send_desc;
	void *recv_desc;
	fi_addr_t coll_addr; /* fi_mc_addr(mc): what every operation is addressed to */
	uint64_t *send_buf;  /* this rank's contribution */
	uint64_t *recv_buf;  /* the result; broadcast's buffer on every rank; a guard behind */
	size_t send_len;
	size_t recv_len;	  /* bytes before the guard */
	struct fi_context ctx[2]; /* alternate, so that a second completion of a call is caught */
	unsigned long nposted;
	bool is_manual; /* FI_PROGRESS_MANUAL was granted */
	char addr[ADDR_MAX];
	size_t addrlen;
	char why[WHY_LEN]; /* the first failure, for the table */
};

/* Rank 0's view of the other ranks of the current run, indexed by rank. */
struct child {
	pid_t pid;	   /* 0: not running (never started, or reaped) */
	int fd;		   /* rank 0's end of the socketpair, -1: none */
	int status;	   /* wait status once reaped */
	bool has_res;	   /* res arrived and was not yet taken by collect() */
	struct result res; /* at most one per step: the ranks move in lockstep */
};

/* ---------------------------------------------------------------- fi_coll_bench.c (rank 0) */

/* The other ranks of the current run; the watchdog kills them when it ends rank 0. */
extern struct child children[MAX_RANKS];
/* Takes the records that came and checks that every rank lives; rank 0's waits call it. */
int check_children(struct rank *r);

/* ---------------------------------------------------------------- coll_bench_rank.c */

/* Small things (the clock, pipes and pinning: bench_util.h). */
void copy_why(char *dst, const char *src);

/* The watchdog: every loop that waits turns the heartbeat. */
extern volatile sig_atomic_t heartbeat;
void watchdog_start(unsigned timeout);
void watchdog_stop(void);

/* One rank's fabric; rank_fail and rank_call_fail keep the first reason in r->why. */
int rank_fail(struct rank *r, int ret, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
int rank_call_fail(struct rank *r, const char *call, int ret);
void rank_init(struct rank *r, const char *prov, int rank, int nranks, unsigned timeout);
int rank_open(struct rank *r);
void rank_close(struct rank *r);

/* Waiting, the join and the tests. */
int check_deadline(struct rank *r, double *deadline, const char *what);
int cq_read_once(struct rank *r, const struct fi_context *ctx);
int rank_join(struct rank *r, const char *names);
int query(struct rank *r, const struct test *t, char *why);
int run_test(struct rank *r, const struct test *t, uint64_t iters, uint64_t warmup, double *us);

/* Ranks 1..N-1. */
int child_main(int fd);

#endif /* COLL_BENCH_H */
