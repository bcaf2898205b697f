/*
 * FI_COLLECTIVE entry points (fi_collective(3)): fi_join_collective (through fi_join) and the
 * ten calls, their arguments checked, in the endpoint's two threading variants; the calls
 * themselves run in coll/.
 */
#include "config.h"

#include "layer/coll/coll.h"
#include "layer/ep/ep.h"
#include "layer/nosys.h"
#include "util/atomic.h"

/* Operation flags a collective call takes. */
#define LAYER_COLL_OP_FLAGS FI_COMPLETION

int layer_ep_join(struct fid_ep *ep_fid, const void *addr, uint64_t flags, struct fid_mc **mc,
		  void *context)
{
	struct layer_ep *ep = container_of(ep_fid, struct layer_ep, ep_fid);
	int ret;

	/* multicast groups of a datagram endpoint are not the RDM endpoint's */
	if (!(flags & FI_COLLECTIVE))
		return layer_no_join(ep_fid, addr, flags, mc, context);
	if (!(ep->caps & FI_COLLECTIVE))
		return -FI_EOPNOTSUPP;
	layer_ep_lock(ep);
	ret = ep->is_enabled ? layer_coll_join(&ep->coll, addr, flags, mc, context) :
			       -FI_EOPBADSTATE;
	layer_ep_unlock(ep);
	if (!ret)
		layer_ep_progress(ep);
	return ret;
}

/* Whether the buffer a rank uses is there: needed when it holds bytes. */
static inline bool layer_coll_has(const void *buf, size_t bytes)
{
	return buf || !bytes;
}

/*
 * The buffers of the call at rank of n: what it reads and writes must be given, and the
 * largest of them must be a message the provider can carry. 0, -FI_EINVAL, -FI_EMSGSIZE.
 */
static int layer_coll_check_bufs(const struct layer_coll_args *args, uint32_t rank, uint32_t n)
{
	size_t esize = util_atomic_dt_size(args->datatype), bytes, first, len;
	bool is_root = rank == args->root;

	if (args->count > LAYER_MAX_MSG_SIZE / (esize ? esize : 1) / n)
		return -FI_EMSGSIZE;
	bytes = args->count * esize;
	switch (args->kind) {
	case FI_BROADCAST:
		return layer_coll_has(args->dst, bytes) ? 0 : -FI_EINVAL;
	case FI_REDUCE:
		return layer_coll_has(args->src, bytes) &&
		       (!is_root || layer_coll_has(args->dst, bytes)) ? 0 : -FI_EINVAL;
	case FI_REDUCE_SCATTER:
		util_coll_block(args->count, n, rank, &first, &len);
		return layer_coll_has(args->src, bytes) && layer_coll_has(args->dst, len * esize) ?
		       0 : -FI_EINVAL;
	case FI_SCATTER:
		return (!is_root || layer_coll_has(args->src, bytes)) &&
		       layer_coll_has(args->dst, bytes) ? 0 : -FI_EINVAL;
	case FI_GATHER:
		return layer_coll_has(args->src, bytes) &&
		       (!is_root || layer_coll_has(args->dst, bytes)) ? 0 : -FI_EINVAL;
	default: /* allreduce, allgather, alltoall read and write */
		return layer_coll_has(args->src, bytes) && layer_coll_has(args->dst, bytes) ?
		       0 : -FI_EINVAL;
	}
}

static bool layer_coll_has_root(enum fi_collective_op kind)
{
	return kind == FI_BROADCAST || kind == FI_REDUCE || kind == FI_SCATTER || kind == FI_GATHER;
}

/* Every call: its arguments checked, then started on its group. */
static inline __attribute__((always_inline)) ssize_t
layer_ep_coll(struct fid_ep *ep_fid, fi_addr_t coll_addr, fi_addr_t root_addr,
	      struct layer_coll_args *args, const bool is_locked)
{
	struct layer_ep *ep = container_of(ep_fid, struct layer_ep, ep_fid);
	struct layer_coll_group *group;
	ssize_t ret;
	int root;

	if (unlikely(args->flags & ~LAYER_COLL_OP_FLAGS))
		return -FI_EBADFLAGS;
	ret = layer_coll_check_type(args->kind, args->op, args->datatype);
	if (unlikely(ret))
		return ret;
	if (!layer_ep_enter(ep, is_locked)) {
		ret = -FI_EOPBADSTATE;
		goto leave;
	}
	group = layer_coll_group_find(&ep->coll, coll_addr);
	if (unlikely(!group)) {
		ret = -FI_EINVAL;
		goto leave;
	}
	root = layer_coll_has_root(args->kind) ? layer_coll_group_rank(group, root_addr) : 0;
	if (unlikely(root < 0)) {
		LAYER_WARN_ONCE(FI_LOG_EP_DATA, "collective: the root is not a member\n");
		ret = -FI_EINVAL;
		goto leave;
	}
	args->root = (uint32_t) root;
	ret = layer_coll_check_bufs(args, group->rank, group->size);
	if (likely(!ret))
		ret = layer_coll_start(group, args);
leave:
	return layer_ep_leave(ep, ret, is_locked);
}

/* fi_msg_collective: one ioc of input (the broadcast's buffer), one of result. */
static bool layer_coll_msg_args(const struct fi_msg_collective *msg, struct fi_ioc *resultv,
				size_t result_count, uint64_t flags, struct layer_coll_args *args)
{
	if (msg->iov_count > 1 || result_count > 1 || (msg->iov_count && !msg->msg_iov) ||
	    (result_count && !resultv) || msg->coll > FI_GATHER)
		return false;
	*args = (struct layer_coll_args) {
		.kind = msg->coll,
		.src = msg->iov_count ? msg->msg_iov[0].addr : NULL,
		.dst = result_count ? resultv[0].addr : NULL,
		.count = msg->iov_count ? msg->msg_iov[0].count : 0,
		.datatype = msg->datatype,
		.op = msg->op,
		.flags = flags,
		.context = msg->context,
	};
	if (args->kind == FI_BROADCAST)
		args->dst = (void *) args->src;
	return true;
}

/* The ten calls of struct fi_ops_collective, for one variant (is_locked a constant). */
#define LAYER_COLL_ENTRIES(variant, is_locked)                                                 \
static ssize_t layer_barrier2_##variant(struct fid_ep *ep, fi_addr_t coll_addr,               \
					uint64_t flags, void *context)                        \
{                                                                                              \
	struct layer_coll_args args = { .kind = FI_BARRIER, .datatype = FI_VOID,              \
					.op = FI_NOOP, .flags = flags, .context = context };  \
	return layer_ep_coll(ep, coll_addr, FI_ADDR_NOTAVAIL, &args, is_locked);               \
}                                                                                              \
static ssize_t layer_barrier_##variant(struct fid_ep *ep, fi_addr_t coll_addr, void *context) \
{                                                                                              \
	return layer_barrier2_##variant(ep, coll_addr, 0, context);                           \
}                                                                                              \
static ssize_t layer_broadcast_##variant(struct fid_ep *ep, void *buf, size_t count,          \
					 void *desc, fi_addr_t coll_addr, fi_addr_t root_addr, \
					 enum fi_datatype datatype, uint64_t flags,           \
					 void *context)                                        \
{                                                                                              \
	struct layer_coll_args args = { .kind = FI_BROADCAST, .dst = buf, .count = count,     \
					.datatype = datatype, .op = FI_NOOP, .flags = flags,  \
					.context = context };                                 \
	(void) desc;                                                                           \
	return layer_ep_coll(ep, coll_addr, root_addr, &args, is_locked);                      \
}                                                                                              \
static ssize_t layer_allreduce_##variant(struct fid_ep *ep, const void *buf, size_t count,    \
					 void *desc, void *result, void *result_desc,          \
					 fi_addr_t coll_addr, enum fi_datatype datatype,       \
					 enum fi_op op, uint64_t flags, void *context)         \
{                                                                                              \
	struct layer_coll_args args = { .kind = FI_ALLREDUCE, .src = buf, .dst = result,      \
					.count = count, .datatype = datatype, .op = op,       \
					.flags = flags, .context = context };                 \
	(void) desc, (void) result_desc;                                                       \
	return layer_ep_coll(ep, coll_addr, FI_ADDR_NOTAVAIL, &args, is_locked);               \
}                                                                                              \
static ssize_t layer_reduce_scatter_##variant(struct fid_ep *ep, const void *buf,             \
					      size_t count, void *desc, void *result,          \
					      void *result_desc, fi_addr_t coll_addr,          \
					      enum fi_datatype datatype, enum fi_op op,        \
					      uint64_t flags, void *context)                   \
{                                                                                              \
	struct layer_coll_args args = { .kind = FI_REDUCE_SCATTER, .src = buf,                \
					.dst = result, .count = count, .datatype = datatype,  \
					.op = op, .flags = flags, .context = context };       \
	(void) desc, (void) result_desc;                                                       \
	return layer_ep_coll(ep, coll_addr, FI_ADDR_NOTAVAIL, &args, is_locked);               \
}                                                                                              \
static ssize_t layer_reduce_##variant(struct fid_ep *ep, const void *buf, size_t count,       \
				      void *desc, void *result, void *result_desc,             \
				      fi_addr_t coll_addr, fi_addr_t root_addr,                \
				      enum fi_datatype datatype, enum fi_op op,                \
				      uint64_t flags, void *context)                           \
{                                                                                              \
	struct layer_coll_args args = { .kind = FI_REDUCE, .src = buf, .dst = result,         \
					.count = count, .datatype = datatype, .op = op,       \
					.flags = flags, .context = context };                 \
	(void) desc, (void) result_desc;                                                       \
	return layer_ep_coll(ep, coll_addr, root_addr, &args, is_locked);                      \
}                                                                                              \
/* allgather, alltoall: data moved, no operation */                                           \
static ssize_t layer_allgather_##variant(struct fid_ep *ep, const void *buf, size_t count,    \
					 void *desc, void *result, void *result_desc,          \
					 fi_addr_t coll_addr, enum fi_datatype datatype,       \
					 uint64_t flags, void *context)                        \
{                                                                                              \
	struct layer_coll_args args = { .kind = FI_ALLGATHER, .src = buf, .dst = result,      \
					.count = count, .datatype = datatype, .op = FI_NOOP,  \
					.flags = flags, .context = context };                 \
	(void) desc, (void) result_desc;                                                       \
	return layer_ep_coll(ep, coll_addr, FI_ADDR_NOTAVAIL, &args, is_locked);               \
}                                                                                              \
static ssize_t layer_alltoall_##variant(struct fid_ep *ep, const void *buf, size_t count,     \
					void *desc, void *result, void *result_desc,           \
					fi_addr_t coll_addr, enum fi_datatype datatype,        \
					uint64_t flags, void *context)                         \
{                                                                                              \
	struct layer_coll_args args = { .kind = FI_ALLTOALL, .src = buf, .dst = result,       \
					.count = count, .datatype = datatype, .op = FI_NOOP,  \
					.flags = flags, .context = context };                 \
	(void) desc, (void) result_desc;                                                       \
	return layer_ep_coll(ep, coll_addr, FI_ADDR_NOTAVAIL, &args, is_locked);               \
}                                                                                              \
/* scatter, gather: data moved from or to a root */                                           \
static ssize_t layer_scatter_##variant(struct fid_ep *ep, const void *buf, size_t count,      \
				       void *desc, void *result, void *result_desc,            \
				       fi_addr_t coll_addr, fi_addr_t root_addr,               \
				       enum fi_datatype datatype, uint64_t flags,              \
				       void *context)                                          \
{                                                                                              \
	struct layer_coll_args args = { .kind = FI_SCATTER, .src = buf, .dst = result,        \
					.count = count, .datatype = datatype, .op = FI_NOOP,  \
					.flags = flags, .context = context };                 \
	(void) desc, (void) result_desc;                                                       \
	return layer_ep_coll(ep, coll_addr, root_addr, &args, is_locked);                      \
}                                                                                              \
static ssize_t layer_gather_##variant(struct fid_ep *ep, const void *buf, size_t count,       \
				      void *desc, void *result, void *result_desc,             \
				      fi_addr_t coll_addr, fi_addr_t root_addr,                \
				      enum fi_datatype datatype, uint64_t flags,               \
				      void *context)                                           \
{                                                                                              \
	struct layer_coll_args args = { .kind = FI_GATHER, .src = buf, .dst = result,         \
					.count = count, .datatype = datatype, .op = FI_NOOP,  \
					.flags = flags, .context = context };                 \
	(void) desc, (void) result_desc;                                                       \
	return layer_ep_coll(ep, coll_addr, root_addr, &args, is_locked);                      \
}                                                                                              \
static ssize_t layer_coll_msg_##variant(struct fid_ep *ep, const struct fi_msg_collective *msg, \
					struct fi_ioc *resultv, void **result_desc,            \
					size_t result_count, uint64_t flags)                   \
{                                                                                              \
	struct layer_coll_args args;                                                           \
	(void) result_desc;                                                                    \
	if (!msg || !layer_coll_msg_args(msg, resultv, result_count, flags, &args))           \
		return -FI_EINVAL;                                                             \
	return layer_ep_coll(ep, msg->coll_addr, layer_coll_has_root(args.kind) ?             \
			     msg->root_addr : FI_ADDR_NOTAVAIL, &args, is_locked);             \
}                                                                                              \
struct fi_ops_collective layer_coll_##variant##_ops = {                                       \
	.size = sizeof(struct fi_ops_collective),                                              \
	.barrier = layer_barrier_##variant,                                                    \
	.broadcast = layer_broadcast_##variant,                                                \
	.alltoall = layer_alltoall_##variant,                                                  \
	.allreduce = layer_allreduce_##variant,                                                \
	.allgather = layer_allgather_##variant,                                                \
	.reduce_scatter = layer_reduce_scatter_##variant,                                      \
	.reduce = layer_reduce_##variant,                                                      \
	.scatter = layer_scatter_##variant,                                                    \
	.gather = layer_gather_##variant,                                                      \
	.msg = layer_coll_msg_##variant,                                                       \
	.barrier2 = layer_barrier2_##variant,                                                  \
};

LAYER_COLL_ENTRIES(locked, true)
LAYER_COLL_ENTRIES(unlocked, false)
