/*
 * Collectives (fi_collective(3)) over the endpoint's own messages: groups joined over AV sets,
 * and the ten calls, each run as a schedule of util/coll_sched.h.
 *
 * - group.c: the endpoint's groups. A join is itself a collective among the set's members:
 *   an allreduce (bitwise and) of the group ids each member has free; the lowest id free at
 *   all of them names the new group in every message. The join's own messages are named by
 *   how many joins the two members of a link have made together, so processes that share
 *   groups must join them in the same order (as MPI asks of communicator creation). A member
 *   runs its joins one at a time. fi_close of the group's fid releases its id.
 * - coll.c: a call becomes a schedule (which algorithm: by size and group, see
 *   util_coll_*); its sends and receives go to the transmit and receive paths as collective
 *   traffic (LAYER_HDR_COLL): eager or rendezvous as any message, matched in the endpoint's
 *   own queue by (group, call, round) and sender, never in the application's tag space.
 *   Calls of one group run at once and complete in the order made, each with one transmit
 *   completion (FI_COLLECTIVE) or a send counter increment.
 * - failure: a call that fails at one member (a transfer failed, a member's connection was
 *   lost) tells the others with COLL_ABORT, so that none waits for a message that will not
 *   come; a group one of whose members was lost fails every later call.
 *
 * Everything runs under the endpoint's lock (when it has one), from its entry points and its
 * progress.
 */
#ifndef LAYER_COLL_COLL_H
#define LAYER_COLL_COLL_H

#include <pthread.h>
#include <rdma/fi_collective.h>

#include "layer/layer.h"
#include "util/coll_sched.h"
#include "util/list.h"

struct layer_av;
struct layer_av_set;
struct layer_eq;
struct layer_proto;

/* Groups open at once on one endpoint (ids 0 .. LAYER_COLL_GROUP_MAX - 1). */
#define LAYER_COLL_GROUP_MAX 1024
/* Members of a group at most: rounds are numbered in 16 bits, and a ring of n takes 2n. */
#define LAYER_COLL_MEMBERS_MAX 16384
/* The group field of a join's messages. */
#define LAYER_COLL_JOIN_ID 0xffffu
/* Top byte of a group's address (fi_mc_addr); AV fi_addrs keep it clear, as for AV sets. */
#define LAYER_COLL_ADDR_TAG 0xa7ULL
#define LAYER_COLL_ADDR_SHIFT 56

/* A collective message's tag: group id (16 bits), call number (32), round (16). */
static inline uint64_t layer_coll_tag(uint32_t id, uint32_t seq, uint32_t round)
{
	return (uint64_t) (id & 0xffff) << 48 | (uint64_t) seq << 16 | (round & 0xffff);
}

static inline uint32_t layer_coll_tag_id(uint64_t tag)
{
	return (uint32_t) (tag >> 48);
}

static inline uint32_t layer_coll_tag_seq(uint64_t tag)
{
	return (uint32_t) (tag >> 16);
}

struct layer_coll_group;

/* One call (or a join's allreduce) on its way. */
struct layer_coll_op {
	struct util_dlist link;        /* its group's calls in order, or the endpoint's joins */
	struct layer_coll_group *group;
	struct util_coll_sched sched;  /* its steps, in round order */
	enum util_coll_algo algo;
	size_t step;                   /* the first step of the round under way */
	size_t round_end;              /* one past its last step */
	size_t pending;                /* transfers of the round not completed */
	uint32_t seq;                  /* the call's number in its group */
	uint32_t *join_seq;            /* a join: the joins made with each member (by rank) */
	bool is_running;               /* inside layer_coll_op_run: callbacks only count */
	bool is_done;
	int err;                       /* positive: the call fails */
	enum fi_collective_op kind;
	enum fi_op op;
	enum fi_datatype datatype;
	const void *src;               /* the schedule's buffers: SRC, DST, TMP */
	void *dst;
	void *tmp;
	size_t tmp_cap;
	void *context;
	uint64_t flags;
};

/* A group: the members of the set it was joined on, in the set's order. */
struct layer_coll_group {
	struct fid_mc mc_fid;          /* fi_addr: its address once joined */
	struct layer_coll *coll;
	uint32_t id;                   /* valid once joined */
	bool is_joined;
	uint32_t rank;                 /* this endpoint's */
	uint32_t size;
	fi_addr_t *members;            /* by rank */
	bool is_paired;                /* barrier, small allreduce over pairs (FI_OFI_LAYER_COLL_PAIRED) */
	uint32_t next_seq;             /* the number of the next call */
	struct util_dlist ops;         /* calls outstanding, in the order made */
	int err;                       /* positive: a member was lost; every call fails */
	uint32_t *aborted;             /* calls a member aborted before they were made here */
	size_t aborted_cnt, aborted_cap;
	uint16_t noted[FI_GATHER + 1]; /* by call: the algorithms logged (bit per one) */
	struct layer_coll_op *join;    /* while joining */
	void *join_context;
};

/* The join counts of this endpoint with one peer. */
struct layer_coll_pair;

/* The collective state of an endpoint with FI_COLLECTIVE. */
struct layer_coll {
	struct layer_proto *proto;
	pthread_mutex_t *lock;         /* the endpoint's (fi_close of a group); NULL lock-free */
	struct layer_av *av;           /* the endpoint's, bound before any join */
	struct layer_eq *eq;           /* FI_JOIN_COMPLETE goes there */
	const void *self_addr;         /* the endpoint's address (normalised), addrlen bytes */
	size_t addrlen;
	size_t large_bytes;            /* FI_OFI_LAYER_COLL_LARGE_SIZE: bandwidth algorithms */
	size_t ring_allgather_bytes;   /* FI_OFI_LAYER_COLL_RING_ALLGATHER_SIZE */
	size_t paired_mode;            /* FI_OFI_LAYER_COLL_PAIRED: 0, 1, 2 (auto) */
	uint32_t cpu_cnt;              /* processors online on this host */
	size_t segment_bytes;          /* FI_OFI_LAYER_COLL_SEGMENT_SIZE: large broadcasts */
	struct layer_coll_group *groups[LAYER_COLL_GROUP_MAX]; /* by id, once joined */
	uint16_t gens[LAYER_COLL_GROUP_MAX]; /* of each id, in its address */
	size_t open_cnt;               /* groups not closed (joined or joining) */
	struct util_dlist joins;       /* join ops in call order; the first runs */
	struct layer_coll_pair *pairs; /* uthash by fi_addr */
	struct util_dlist free_ops;    /* finished ops kept for their schedules' memory */
	size_t free_cnt;
};

void layer_coll_init(struct layer_coll *coll, struct layer_proto *proto);
/* Endpoint close (every group closed first: layer_coll_busy). */
void layer_coll_fini(struct layer_coll *coll);
/* Whether groups are still open (the endpoint cannot close then). */
static inline bool layer_coll_busy(const struct layer_coll *coll)
{
	return coll->open_cnt != 0;
}

/* fi_join with FI_COLLECTIVE (group.c). */
int layer_coll_join(struct layer_coll *coll, const struct fi_collective_addr *addr,
		    uint64_t flags, struct fid_mc **mc, void *context);

/* The joined group at coll_addr, or NULL (logged). */
struct layer_coll_group *layer_coll_group_find(struct layer_coll *coll, fi_addr_t coll_addr);
/* The rank of fi_addr in group, or -1. */
int layer_coll_group_rank(const struct layer_coll_group *group, fi_addr_t fi_addr);

/*
 * A call (coll.c), its arguments checked by the entry point: buffers as for the schedule's
 * SRC and DST, root a rank. 0, -FI_EAGAIN, or -FI_E*.
 */
struct layer_coll_args {
	enum fi_collective_op kind;
	const void *src;
	void *dst;
	size_t count;
	uint32_t root;
	enum fi_datatype datatype;
	enum fi_op op;
	uint64_t flags;
	void *context;
};
ssize_t layer_coll_start(struct layer_coll_group *group, const struct layer_coll_args *args);

/* fi_query_collective (coll.c): whether the call takes op on datatype. */
int layer_query_collective(struct fid_domain *domain, enum fi_collective_op coll,
			   struct fi_collective_attr *attr, uint64_t flags);
/* Whether kind takes op on datatype: 0, or -FI_EOPNOTSUPP. */
int layer_coll_check_type(enum fi_collective_op kind, enum fi_op op, enum fi_datatype datatype);

/* ---- between group.c and coll.c ---- */

/* Builds op's schedule for args at rank of n, and its scratch: 0 or -FI_ENOMEM. */
int layer_coll_prepare(struct layer_coll_op *op, const struct layer_coll_args *args,
		       uint32_t rank, uint32_t n);
/* Runs an op built and linked until it waits (its first rounds, or what came in since). */
void layer_coll_op_run(struct layer_coll_op *op);
/* An op whose group failed or was aborted: fails (its receives taken back). */
void layer_coll_op_fail(struct layer_coll_op *op, int err);
struct layer_coll_op *layer_coll_op_get(struct layer_coll *coll);
void layer_coll_op_put(struct layer_coll *coll, struct layer_coll_op *op);
/* group.c: the join counts kept per peer, freed at endpoint close. */
void layer_coll_pairs_free(struct layer_coll *coll);
/* Whether a member aborted call seq before it was made here (forgotten once asked). */
bool layer_coll_take_abort(struct layer_coll_group *group, uint32_t seq);
/* An op is done (err in op->err): the group's finished calls complete in order. */
void layer_coll_op_finished(struct layer_coll_op *op);
/* group.c: a join's allreduce is over. */
void layer_coll_join_done(struct layer_coll_op *op);

/* ---- the receive path's and the connections' notices ---- */

/* COLL_ABORT from src: the call named by tag failed there. */
void layer_coll_abort_arrive(struct layer_coll *coll, uint64_t tag, fi_addr_t src);
/* An AV entry was removed: the groups it was a member of fail (FI_EADDRNOTAVAIL). */
void layer_coll_av_removed(struct layer_coll *coll);
/* The connection to the peer at fi_addr failed with err: its groups fail. */
void layer_coll_peer_lost(struct layer_coll *coll, fi_addr_t fi_addr, int err);

#endif /* LAYER_COLL_COLL_H */
