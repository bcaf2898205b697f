/*
 * Shared by the four files of test_coll (the ranks and passes in test_coll.c, the data path
 * in test_coll_data.c, the groups in test_coll_join.c, closes refused, AV removal, flags, the
 * msg entry and selective completion in test_coll_more.c): one process per rank (rank 0 is the
 * program itself, ranks 1..n-1 are children started with lt_child_spawn), every rank running the
 * same sections in the same order. Between sections the ranks meet through their pipes to rank 0
 * (coll_sync), never through the provider, so one rank's failure cannot leave the others
 * waiting for more than one bounded wait.
 */
#ifndef LAYER_TEST_COLL_H
#define LAYER_TEST_COLL_H

#include <stdbool.h>
#include <stdint.h>

#include <rdma/fi_collective.h>

#include "common.h"

#define COLL_MAX_RANKS 64
/* Bytes after every output buffer that no collective may touch. */
#define COLL_GUARD 64
#define COLL_GUARD_BYTE 0xa5
/* Failures shown one by one per section; the rest are only counted. */
#define COLL_SHOWN_MAX 10

/* Outcomes of coll_wait besides 0 and an error entry's positive err. */
#define COLL_TIMED_OUT -1000 /* no completion within LT_TIMEOUT_MS */
#define COLL_OTHER_CTX -1001 /* the next completion had another op_context */
#define COLL_NO_FLAG -1002   /* the completion's flags lack FI_COLLECTIVE */

struct coll_rank {
	uint32_t rank, n;	   /* this process's rank and the number of ranks of the pass */
	bool is_full;		   /* the whole matrix (n <= 4), not the short pass */
	int rfd, wfd;		   /* ranks 1..n-1: the pipes from and to rank 0 */
	struct lt_child *children; /* rank 0: ranks 1..n-1 at [rank - 1] */
	bool *is_alive;		   /* rank 0: which children still run */
	struct fi_info *info;
	struct lt_dom dom;
	struct lt_ep ep; /* its AV holds every rank: fi_addr i is rank i */
	struct fid_eq *eq;
	char names[COLL_MAX_RANKS][LT_ADDR_MAX];
	size_t namelen[COLL_MAX_RANKS];
	struct fid_av_set *world_set;
	struct fid_mc *world; /* the group of every rank, open through the data sections */
	fi_addr_t world_addr; /* fi_mc_addr(world) */
	bool is_desync;	      /* a post failed or a wait timed out: stop after this section */
	unsigned shown;	      /* failures shown one by one in this section */
	uint32_t seq;	      /* calls so far in this pass, the same count on every rank */
};

extern struct coll_rank me;
extern struct fi_info *coll_hints;

/*
 * Checks of a rank: the line names the pass and the rank. Rank 0 prints every check, the other
 * ranks only their failures (their count goes back to rank 0 at the end).
 */
bool coll_check_at(bool ok, const char *file, int line, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
bool coll_check_ret_at(long got, long want, const char *file, int line, const char *fmt, ...)
	__attribute__((format(printf, 5, 6)));
#define CHECK(ok, ...) coll_check_at(!!(ok), __FILE__, __LINE__, __VA_ARGS__)
#define CHECK_RET(got, want, ...)                                                                  \
	coll_check_ret_at((long) (got), (long) (want), __FILE__, __LINE__, __VA_ARGS__)
/* One wrong result among many: a failed check for the first few, counted in *bad always. */
void coll_mismatch_at(unsigned *bad, const char *file, int line, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
#define MISMATCH(bad, ...) coll_mismatch_at(bad, __FILE__, __LINE__, __VA_ARGS__)

/*
 * Waits for the completion of the collective posted with ctx on the transmit CQ: 0, the error
 * entry's err (positive), or one of COLL_TIMED_OUT, COLL_OTHER_CTX, COLL_NO_FLAG.
 */
int coll_wait(void *ctx);
/* coll_wait on another endpoint's transmit CQ. */
int coll_wait_cq(struct lt_cq *cq, void *ctx);
/* coll_wait after a post that returned posted (a failed post is returned as is). */
int coll_run(ssize_t posted, void *ctx);
/* What a coll_run/coll_wait outcome means, for a check line. */
const char *coll_str(int ret, char *buf, size_t len);

/* Joins a group, waiting for FI_JOIN_COMPLETE with every field checked: the group or NULL. */
struct fid_mc *coll_join(fi_addr_t coll_addr, const struct fid_av_set *set, const char *name);
/* coll_join on another endpoint, whose joins are reported on eq. */
struct fid_mc *coll_join_on(struct fid_ep *ep, struct fid_eq *eq, fi_addr_t coll_addr,
			    const struct fid_av_set *set, const char *name);
/* An AV set of the ranks start..end every stride-th (fi_av_set attributes), or NULL. */
struct fid_av_set *coll_range_set(uint32_t start, uint32_t end, uint32_t stride);
/* fi_av_set_addr, or FI_ADDR_NOTAVAIL. */
fi_addr_t coll_set_addr(struct fid_av_set *set);
void coll_close(struct fid *fid);
/* Allreduce FI_SUM of mine * (i + 1), i < 5, on group: true when every element is total * (i+1). */
bool coll_sum_ok(fi_addr_t group, uint32_t mine, uint32_t total, const char *name);
/* Allgather of the ranks on group: true when the members come in the order given. */
bool coll_members_ok(fi_addr_t group, const uint32_t *ranks, uint32_t cnt, const char *name);
/* Rank 0: waits for the child of rank r to report (progressing); the others: for rank 0. */
ssize_t coll_pipe_recv(int fd, void *buf, size_t max, int timeout_ms);

/* Sections of test_coll_data.c, and the checks of fi_query_collective (rank 0, no pass). */
void data_barrier(void);
void data_allreduce(void);
void data_reduce(void);
void data_reduce_scatter(void);
void data_movement(void);
void data_large(void);
void data_outstanding(void);
void data_tag_space(void);
void check_query(void);

/* Sections of test_coll_join.c */
void join_world(void);
void join_universe(void);
void join_self(void);
void join_subsets(void);
void join_from_parent(void);
void join_during_traffic(void);
void join_two_groups(void);
void join_cycles(void);
void bad_input(void);
void dead_member(void);

/* Sections of test_coll_more.c */
void more_close_busy(void);
void more_av_remove(void);
void more_flags_msg(void);
void more_selective(void);
void more_blocking(void);
void more_count_mismatch(void);

#endif /* LAYER_TEST_COLL_H */
