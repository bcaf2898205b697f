/*
 * Collective calls (coll.h): each becomes a schedule of util/coll_sched.h, which this file
 * runs round by round: a round's sends and receives go out at once as collective traffic,
 * its copies and reductions run once they are all done, then the next round starts. A call
 * completes when its last round has; the calls of a group complete in the order made.
 */
#include "config.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "layer/coll/coll.h"
#include "layer/cq.h"
#include "layer/cntr.h"
#include "layer/proto/proto.h"
#include "layer/proto/rx.h"
#include "layer/proto/tx.h"
#include "util/atomic.h"

/* Finished ops kept for reuse, with their schedules' and scratch memory. */
#define LAYER_COLL_FREE_OPS_MAX 64

/* ---- ops ---- */

struct layer_coll_op *layer_coll_op_get(struct layer_coll *coll)
{
	struct util_dlist *item = util_dlist_pop_front(&coll->free_ops);
	struct layer_coll_op *op;

	if (item) {
		coll->free_cnt--;
		op = container_of(item, struct layer_coll_op, link);
		util_coll_sched_reset(&op->sched);
	} else {
		op = calloc(1, sizeof(*op));
		if (!op)
			return NULL;
		util_coll_sched_init(&op->sched);
	}
	op->step = op->round_end = op->pending = 0;
	op->join_seq = NULL;
	op->is_running = op->is_done = false;
	op->err = 0;
	op->flags = 0;
	op->context = NULL;
	util_dlist_init(&op->link);
	return op;
}

static void layer_coll_op_free(struct layer_coll_op *op)
{
	util_coll_sched_fini(&op->sched);
	free(op->tmp);
	free(op);
}

void layer_coll_op_put(struct layer_coll *coll, struct layer_coll_op *op)
{
	free(op->join_seq);
	op->join_seq = NULL;
	if (coll->free_cnt >= LAYER_COLL_FREE_OPS_MAX) {
		layer_coll_op_free(op);
		return;
	}
	coll->free_cnt++;
	util_dlist_insert_head(&op->link, &coll->free_ops);
}

void layer_coll_init(struct layer_coll *coll, struct layer_proto *proto)
{
	long cpus;

	memset(coll, 0, sizeof(*coll));
	coll->proto = proto;
	coll->large_bytes = layer_settings.coll_large_size;
	coll->ring_allgather_bytes = layer_settings.coll_ring_allgather_size;
	coll->paired_mode = layer_settings.coll_paired;
	cpus = sysconf(_SC_NPROCESSORS_ONLN);
	coll->cpu_cnt = cpus > 0 ? (uint32_t) cpus : 1;
	coll->segment_bytes = layer_settings.coll_segment_size;
	util_dlist_init(&coll->joins);
	util_dlist_init(&coll->free_ops);
}

void layer_coll_fini(struct layer_coll *coll)
{
	struct util_dlist *item;

	layer_coll_pairs_free(coll);
	while ((item = util_dlist_pop_front(&coll->free_ops)))
		layer_coll_op_free(container_of(item, struct layer_coll_op, link));
	coll->free_cnt = 0;
}

/* ---- the executor ---- */

static void *layer_coll_buf(const struct layer_coll_op *op, unsigned buf)
{
	switch (buf) {
	case UTIL_COLL_SRC:
		return (void *) op->src;
	case UTIL_COLL_DST:
		return op->dst;
	default:
		return op->tmp;
	}
}

static uint64_t layer_coll_op_tag(const struct layer_coll_op *op, const struct util_coll_step *st)
{
	if (op->join_seq)
		return layer_coll_tag(LAYER_COLL_JOIN_ID, op->join_seq[st->peer], st->round);
	return layer_coll_tag(op->group->id, op->seq, st->round);
}

static void layer_coll_sent(struct layer_proto *proto, void *job, int err)
{
	struct layer_coll_op *op = job;

	(void) proto;
	if (unlikely(err) && !op->err)
		op->err = err;
	op->pending--;
	layer_coll_op_run(op);
}

static void layer_coll_received(struct layer_proto *proto, struct layer_rx *rx, size_t len,
				int err)
{
	struct layer_coll_op *op = rx->job;

	(void) proto;
	/* both ends build the same schedule: a message of another length is a defect */
	if (!err && len != rx->len)
		err = FI_EMSGSIZE;
	if (unlikely(err) && !op->err)
		op->err = err;
	op->pending--;
	layer_coll_op_run(op);
}

/* The round's sends and receives: false once one could not be posted (op->err set). */
static bool layer_coll_post_round(struct layer_coll_op *op)
{
	struct layer_coll_group *group = op->group;
	struct layer_proto *proto = group->coll->proto;
	const struct util_coll_step *st;
	size_t i;
	int ret = 0;

	for (i = op->step; i < op->round_end; i++) {
		st = &op->sched.steps[i];
		if (st->kind == UTIL_COLL_SEND) {
			op->pending++;
			ret = layer_tx_coll_send(proto, (char *) layer_coll_buf(op, st->buf) + st->off,
						 st->len, group->members[st->peer],
						 layer_coll_op_tag(op, st), layer_coll_sent, op);
		} else if (st->kind == UTIL_COLL_RECV) {
			op->pending++;
			ret = layer_rx_coll_post(proto, (char *) layer_coll_buf(op, st->buf) + st->off,
						 st->len, group->members[st->peer],
						 layer_coll_op_tag(op, st), layer_coll_received, op);
		}
		if (unlikely(ret)) {
			op->pending--;
			if (!op->err)
				op->err = -ret;
			return false;
		}
	}
	return true;
}

/* The round's copies and reductions, in order, once its transfers are done. */
static void layer_coll_local_round(struct layer_coll_op *op)
{
	const struct util_coll_step *st;
	size_t i, esize;
	char *dst;
	const char *src;

	for (i = op->step; i < op->round_end; i++) {
		st = &op->sched.steps[i];
		if (st->kind == UTIL_COLL_SEND || st->kind == UTIL_COLL_RECV || !st->len)
			continue;
		dst = (char *) layer_coll_buf(op, st->buf) + st->off;
		src = (const char *) layer_coll_buf(op, st->src_buf) + st->src_off;
		if (st->kind == UTIL_COLL_COPY) {
			memmove(dst, src, st->len);
			continue;
		}
		esize = util_atomic_dt_size(op->datatype);
		(void) util_atomic_apply(op->op, op->datatype, dst, src, NULL, NULL,
					 st->len / esize);
	}
}

/* A failed call tells the group's other members, so that none waits for it. */
static void layer_coll_send_aborts(struct layer_coll_op *op)
{
	struct layer_coll_group *group = op->group;
	struct layer_proto *proto = group->coll->proto;
	struct layer_conn *conn;
	struct layer_tx *tx;
	uint32_t r;

	for (r = 0; r < group->size; r++) {
		if (r == group->rank || layer_conn_get(proto->conns, group->members[r], &conn))
			continue;
		tx = layer_tx_ctrl_new(proto, LAYER_OP_COLL_ABORT, 0, 0);
		if (!tx)
			return;
		tx->hdr.tag = layer_coll_tag(group->id, op->seq, 0);
		layer_tx_ctrl_send(proto, conn, tx);
	}
}

static void layer_coll_op_end(struct layer_coll_op *op)
{
	op->is_done = true;
	op->is_running = false;
	FI_DBG(&layer_prov, FI_LOG_EP_DATA, "collective %d (%s) of group %u, call %u: %d\n",
	       (int) op->kind, util_coll_algo_str(op->algo), op->group->id, op->seq, op->err);
	if (op->join_seq) {
		layer_coll_join_done(op);
		return;
	}
	/* the member where it failed tells the others; an abort is not passed on */
	if (op->err && op->err != FI_ECONNABORTED && op->group->size > 1)
		layer_coll_send_aborts(op);
	layer_coll_op_finished(op);
}

void layer_coll_op_run(struct layer_coll_op *op)
{
	const struct util_coll_step *steps = op->sched.steps;
	size_t end;

	if (op->is_running || op->is_done)
		return;
	op->is_running = true;
	while (!op->pending) {
		if (op->step < op->round_end) {
			/* the round's transfers are in */
			if (!op->err)
				layer_coll_local_round(op);
			op->step = op->round_end;
		}
		if (op->err || op->step == op->sched.cnt) {
			layer_coll_op_end(op);
			return;
		}
		for (end = op->step; end < op->sched.cnt && steps[end].round == steps[op->step].round;
		     end++)
			;
		op->round_end = end;
		if (!layer_coll_post_round(op)) {
			/* what it had posted: receives taken back, sends completing */
			op->pending -= layer_rx_coll_cancel(op->group->coll->proto, op);
		}
	}
	op->is_running = false;
}

void layer_coll_op_fail(struct layer_coll_op *op, int err)
{
	if (op->is_done)
		return;
	if (!op->err)
		op->err = err;
	op->pending -= layer_rx_coll_cancel(op->group->coll->proto, op);
	layer_coll_op_run(op);
}

/* ---- completions ---- */

static void layer_coll_complete(struct layer_proto *proto, const struct layer_coll_op *op)
{
	struct fi_cq_err_entry entry;

	if (unlikely(op->err)) {
		entry = (struct fi_cq_err_entry) {
			.op_context = op->context,
			.flags = FI_COLLECTIVE,
			.err = op->err,
			.prov_errno = -op->err,
		};
		if (proto->tx_cq)
			(void) util_cq_write_error(&proto->tx_cq->util, &entry);
		if (proto->send_cntr)
			util_cntr_inc_err(&proto->send_cntr->util);
		return;
	}
	if (proto->tx_cq && layer_proto_tx_comp(proto, op->flags))
		(void) util_cq_write(&proto->tx_cq->util, op->context, FI_COLLECTIVE, 0, NULL, 0, 0,
				     FI_ADDR_NOTAVAIL);
	if (proto->send_cntr)
		util_cntr_inc(&proto->send_cntr->util);
}

void layer_coll_op_finished(struct layer_coll_op *op)
{
	struct layer_coll_group *group = op->group;
	struct layer_coll *coll = group->coll;
	struct layer_coll_op *head;

	/* in the order made: a call done early waits for those before it */
	while (!util_dlist_empty(&group->ops)) {
		head = container_of(group->ops.next, struct layer_coll_op, link);
		if (!head->is_done)
			return;
		util_dlist_remove(&head->link);
		layer_coll_complete(coll->proto, head);
		layer_coll_op_put(coll, head);
	}
}

/* ---- calls ---- */

/* Steps in round order (stable), as the executor takes them. */
static int layer_coll_sort(struct util_coll_sched *s)
{
	struct util_coll_step *sorted;
	size_t i, *first;

	for (i = 1; i < s->cnt && s->steps[i - 1].round <= s->steps[i].round; i++)
		;
	if (i >= s->cnt)
		return 0;
	sorted = malloc(s->cap * sizeof(*sorted));
	first = calloc((size_t) s->rounds + 1, sizeof(*first));
	if (!sorted || !first) {
		free(sorted);
		free(first);
		return -FI_ENOMEM;
	}
	for (i = 0; i < s->cnt; i++)
		first[s->steps[i].round + 1]++;
	for (i = 1; i <= s->rounds; i++)
		first[i] += first[i - 1];
	for (i = 0; i < s->cnt; i++)
		sorted[first[s->steps[i].round]++] = s->steps[i];
	free(s->steps);
	s->steps = sorted;
	free(first);
	return 0;
}

static enum util_coll_algo layer_coll_build(struct layer_coll_op *op,
					    const struct layer_coll_args *args, uint32_t rank,
					    uint32_t n)
{
	const struct layer_coll *coll = op->group->coll;
	/* a join's few hundred bytes: latency first */
	size_t large_bytes = op->join_seq ? SIZE_MAX : coll->large_bytes;
	struct util_coll_sched *s = &op->sched;
	size_t esize = util_atomic_dt_size(args->datatype), count = args->count;

	switch (args->kind) {
	case FI_BARRIER:
		return util_coll_barrier(s, rank, n, op->group->is_paired);
	case FI_BROADCAST:
		return util_coll_broadcast(s, rank, n, args->root, count, esize, large_bytes,
					   coll->segment_bytes);
	case FI_ALLREDUCE:
		return util_coll_allreduce(s, rank, n, count, esize, large_bytes,
					   args->src == args->dst, op->group->is_paired);
	case FI_REDUCE:
		return util_coll_reduce(s, rank, n, args->root, count, esize,
					args->src == args->dst);
	case FI_REDUCE_SCATTER:
		return util_coll_reduce_scatter(s, rank, n, count, esize);
	case FI_ALLGATHER:
		return util_coll_allgather(s, rank, n, count, esize, coll->ring_allgather_bytes);
	case FI_SCATTER:
		return util_coll_scatter(s, rank, n, args->root, count, esize);
	case FI_GATHER:
		return util_coll_gather(s, rank, n, args->root, count, esize);
	case FI_ALLTOALL:
	default:
		return util_coll_alltoall(s, rank, n, count, esize);
	}
}

/* Builds op's schedule for args, at rank of n, and its scratch: 0 or -FI_ENOMEM. */
int layer_coll_prepare(struct layer_coll_op *op, const struct layer_coll_args *args,
		       uint32_t rank, uint32_t n)
{
	void *tmp;

	op->kind = args->kind;
	op->op = args->op;
	op->datatype = args->datatype;
	op->src = args->src;
	op->dst = args->dst;
	op->context = args->context;
	op->flags = args->flags;
	op->algo = layer_coll_build(op, args, rank, n);
	if (op->sched.err || layer_coll_sort(&op->sched))
		return -FI_ENOMEM;
	if (op->sched.tmp_len > op->tmp_cap) {
		tmp = realloc(op->tmp, op->sched.tmp_len);
		if (!tmp)
			return -FI_ENOMEM;
		op->tmp = tmp;
		op->tmp_cap = op->sched.tmp_len;
	}
	return 0;
}

static const char *layer_coll_kind_str(enum fi_collective_op kind)
{
	static const char *const names[] = {
		[FI_BARRIER] = "barrier", [FI_BROADCAST] = "broadcast", [FI_ALLTOALL] = "alltoall",
		[FI_ALLREDUCE] = "allreduce", [FI_ALLGATHER] = "allgather",
		[FI_REDUCE_SCATTER] = "reduce_scatter", [FI_REDUCE] = "reduce",
		[FI_SCATTER] = "scatter", [FI_GATHER] = "gather",
	};

	return (size_t) kind < UTIL_ARRAY_SIZE(names) && names[kind] ? names[kind] : "?";
}

/* The algorithm a group's call runs, at info level the first time for each call and algorithm
 * (FI_LOG_LEVEL=info): what FI_OFI_LAYER_COLL_* chose. */
static void layer_coll_note_algo(struct layer_coll_group *group, const struct layer_coll_op *op)
{
	uint32_t bit = 1u << op->algo;

	if ((size_t) op->kind >= UTIL_ARRAY_SIZE(group->noted) || (group->noted[op->kind] & bit))
		return;
	group->noted[op->kind] |= bit;
	FI_INFO(&layer_prov, FI_LOG_EP_DATA, "group %u of %u members: %s by %s\n", group->id,
		group->size, layer_coll_kind_str(op->kind), util_coll_algo_str(op->algo));
}

ssize_t layer_coll_start(struct layer_coll_group *group, const struct layer_coll_args *args)
{
	struct layer_coll *coll = group->coll;
	struct layer_coll_op *op;
	int ret;

	op = layer_coll_op_get(coll);
	if (!op)
		return -FI_ENOMEM;
	op->group = group;
	ret = layer_coll_prepare(op, args, group->rank, group->size);
	if (ret) {
		layer_coll_op_put(coll, op);
		return ret;
	}
	op->seq = group->next_seq++;
	util_dlist_insert_tail(&op->link, &group->ops);
	/* a group that lost a member, or a call a member aborted before it started here */
	if (group->err)
		op->err = group->err;
	else if (unlikely(group->aborted_cnt) && layer_coll_take_abort(group, op->seq))
		op->err = FI_ECONNABORTED;
	FI_DBG(&layer_prov, FI_LOG_EP_DATA, "collective %d of group %u, call %u: %s, %zu steps\n",
	       (int) args->kind, group->id, op->seq, util_coll_algo_str(op->algo), op->sched.cnt);
	layer_coll_note_algo(group, op);
	layer_coll_op_run(op);
	return 0;
}

/* ---- what each call takes ---- */

static bool layer_coll_is_reduction_op(enum fi_op op)
{
	return op >= FI_MIN && op <= FI_BXOR;
}

int layer_coll_check_type(enum fi_collective_op kind, enum fi_op op, enum fi_datatype datatype)
{
	switch (kind) {
	case FI_BARRIER:
		return op == FI_NOOP && datatype == FI_VOID ? 0 : -FI_EOPNOTSUPP;
	case FI_BROADCAST:
	case FI_ALLTOALL:
	case FI_ALLGATHER:
	case FI_SCATTER:
	case FI_GATHER:
		/* data moved as it is: any datatype, no operation (or an atomic write) */
		return (op == FI_NOOP || op == FI_ATOMIC_WRITE) && util_atomic_dt_size(datatype) ?
		       0 : -FI_EOPNOTSUPP;
	case FI_ALLREDUCE:
	case FI_REDUCE_SCATTER:
	case FI_REDUCE:
		return layer_coll_is_reduction_op(op) &&
		       util_atomic_is_valid(UTIL_ATOMIC_WRITE, op, datatype) ? 0 : -FI_EOPNOTSUPP;
	default:
		return -FI_EOPNOTSUPP;
	}
}

int layer_query_collective(struct fid_domain *domain, enum fi_collective_op coll,
			   struct fi_collective_attr *attr, uint64_t flags)
{
	size_t esize;
	int ret;

	if (!domain || !attr)
		return -FI_EINVAL;
	if (flags & ~FI_SCATTER)
		return -FI_EBADFLAGS;
	/* fi_collective(3): FI_SCATTER asks about the reduce-scatter */
	if (flags & FI_SCATTER) {
		if (coll != FI_REDUCE && coll != FI_REDUCE_SCATTER)
			return -FI_EINVAL;
		coll = FI_REDUCE_SCATTER;
	}
	ret = layer_coll_check_type(coll, attr->op, attr->datatype);
	if (ret)
		return ret;
	esize = coll == FI_BARRIER ? 0 : util_atomic_dt_size(attr->datatype);
	attr->datatype_attr.size = esize;
	attr->datatype_attr.count = esize ? LAYER_MAX_MSG_SIZE / esize : 0;
	attr->max_members = LAYER_COLL_MEMBERS_MAX;
	attr->mode = 0;
	return 0;
}
