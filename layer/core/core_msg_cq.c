/*
 * The MSG adapter's core CQs (core_msg.h): which CQ a channel's core endpoint reports to,
 * which CQs a progress call reads, and what a caller about to sleep waits on.
 *
 * libfabric 1.17's tcp progresses a CQ by walking every core endpoint bound to it (taking
 * its lock, looking at its buffered bytes, updating its epoll registration) and then polling
 * the CQ's wait set: with one CQ for all connections, each progress call costs
 * O(connections), idle or not (1024 idle peers: 100-230 us a call). So over such a core the
 * channels are spread over groups of FI_OFI_LAYER_CQ_GROUP, each with a core CQ of its own
 * whose wait fd (tcp's epoll set of the group's sockets and of the CQ's signal) sits in an
 * epoll set of the adapter. A progress call asks that set which groups have something and
 * reads only those, and the groups something was posted on since the last call (marked,
 * core.h: tcp registers a socket for writing only from its progress, once a send could not
 * finish at once), and a group again while reading it closed one of its channels (what the
 * core flushed for it). With one group there is nothing to ask: it is read on every call.
 * The set is the fd the application's waits sleep on (core->cq_fd). A group's CQ is opened
 * with its first connection and closed with its last, so that an endpoint whose peers left
 * holds what it held before they came.
 *
 * What a socket's readiness does not tell: tcp stops reading a connection when the shared
 * receive context has no buffer for its next message, and holds what it read of it. So when
 * the context runs dry, every group is read once buffers are posted again; and a group whose
 * read took about as many buffers as were posted, which the buffers given back at once kept
 * from looking dry, is read again on the next call (the held connection is one of its own).
 *
 * Over cores whose progress does not walk their endpoints (tcp from libfabric 1.18 on, with
 * one epoll set per domain) the channels share one CQ (group 0, core->cq), read every call:
 * as before groups existed, its wait fd is made only when a CQ or counter that can block is
 * bound.
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "layer/core/core_msg.h"

/* Entries of a group's CQ: it is read as soon as it has any, and holds more when needed
 * (tcp keeps what overflows); a CQ's queue is touched in full as it turns. */
#define LAYER_MSG_CQG_CQ_SIZE 256

/* The default FI_OFI_LAYER_CQ_GROUP over tcp 1.17: a group's CQ costs tcp a pool of 1024
 * transfer entries (448 KiB, 14 KiB per connection) and a read walks all its connections
 * (about 15 ns each, measured). */
#define LAYER_MSG_CQG_DEFAULT 32

/* Buffers tcp may hold, with direct receive, for messages not yet whole that it took
 * without asking us (those that fit the posted header). */
#define LAYER_MSG_SRX_SLACK 4

/* Groups whose wait fds one epoll_wait reports at once. */
#define LAYER_MSG_EVENTS 64

/* Whether the core's CQ progress walks its endpoints: tcp of libfabric 1.17 and older. */
static bool layer_msg_core_walks(const struct layer_core *core)
{
	uint32_t version = fi_version();

	return FI_VERSION_LT(version, FI_VERSION(1, 18)) &&
	       !strcasecmp(core->domain->core_info->fabric_attr->prov_name, "tcp");
}

void layer_msg_cqgs_init(struct layer_msg_core *mcore)
{
	mcore->epfd = -1;
	util_dlist_init(&mcore->marked);
	util_dlist_init(&mcore->again);
}

static int layer_msg_cqg_add(struct layer_msg_core *mcore, struct fid_cq *cq,
			     struct layer_msg_cqg **cqg_out)
{
	struct layer_msg_cqg *cqg, **cqgs;
	size_t cap;

	if (mcore->cqg_cnt == mcore->cqg_cap) {
		cap = mcore->cqg_cap ? mcore->cqg_cap * 2 : 8;
		cqgs = realloc(mcore->cqgs, cap * sizeof(*cqgs));
		if (!cqgs)
			return -FI_ENOMEM;
		mcore->cqgs = cqgs;
		mcore->cqg_cap = cap;
	}
	cqg = calloc(1, sizeof(*cqg));
	if (!cqg)
		return -FI_ENOMEM;
	cqg->cq = cq;
	cqg->fd = -1;
	cqg->idx = (uint32_t) mcore->cqg_cnt;
	util_dlist_init(&cqg->set.link);
	cqg->set.marked = &mcore->marked;
	mcore->cqgs[mcore->cqg_cnt++] = cqg;
	*cqg_out = cqg;
	return 0;
}

/* A group's wait fd joins the adapter's epoll set. */
static int layer_msg_cqg_watch(struct layer_msg_core *mcore, struct layer_msg_cqg *cqg)
{
	struct epoll_event ev = { .events = EPOLLIN, .data.ptr = cqg };
	int ret;

	ret = fi_control(&cqg->cq->fid, FI_GETWAIT, &cqg->fd);
	if (ret) {
		cqg->fd = -1;
		return ret;
	}
	if (epoll_ctl(mcore->epfd, EPOLL_CTL_ADD, cqg->fd, &ev))
		return -errno;
	return 0;
}

/*
 * Spread groups: the epoll set their wait fds go into, which is what a caller sleeps on.
 * Once, at enable or when a CQ that can block is bound, whichever comes first. The groups
 * come with the connections and go with them: the endpoint's own CQ (core->cq) is not used.
 */
static int layer_msg_cqgs_open_spread(struct layer_msg_core *mcore)
{
	if (mcore->epfd >= 0)
		return 0;
	mcore->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (mcore->epfd < 0)
		return -errno;
	mcore->core.cq_fd = mcore->epfd;
	return 0;
}

int layer_msg_cqgs_enable(struct layer_msg_core *mcore)
{
	struct layer_core *core = &mcore->core;
	struct layer_msg_cqg *cqg;

	mcore->cqg_size = layer_settings.cq_group == SIZE_MAX ?
			  (layer_msg_core_walks(core) ? LAYER_MSG_CQG_DEFAULT : 0) :
			  (uint32_t) layer_settings.cq_group;
	if (mcore->cqg_size)
		return layer_msg_cqgs_open_spread(mcore);
	/* one CQ: the endpoint's, whatever wait fd it has or gets */
	return layer_msg_cqg_add(mcore, core->cq, &cqg);
}

int layer_msg_cq_wait(struct layer_core *core)
{
	struct layer_msg_core *mcore = layer_msg_core_of(core);

	/* before enable, which decides: a bind comes first */
	if (layer_settings.cq_group == SIZE_MAX ? layer_msg_core_walks(core) :
						  layer_settings.cq_group != 0)
		return layer_msg_cqgs_open_spread(mcore);
	if (core->cq_fd >= 0)
		return 0;
	return layer_core_cq_wait_fd(core);
}

static void layer_msg_cqg_close(struct layer_msg_core *mcore, struct layer_msg_cqg *cqg)
{
	struct layer_msg_cqg *last;

	if (cqg->fd >= 0)
		epoll_ctl(mcore->epfd, EPOLL_CTL_DEL, cqg->fd, NULL);
	if (cqg->set.is_marked)
		util_dlist_remove(&cqg->set.link);
	/* with one CQ for all, it is core->cq, which the endpoint closes */
	if (cqg->cq != mcore->core.cq)
		fi_close(&cqg->cq->fid);
	last = mcore->cqgs[--mcore->cqg_cnt];
	mcore->cqgs[cqg->idx] = last;
	last->idx = cqg->idx;
	free(cqg);
}

void layer_msg_cqgs_close(struct layer_msg_core *mcore)
{
	while (mcore->cqg_cnt)
		layer_msg_cqg_close(mcore, mcore->cqgs[mcore->cqg_cnt - 1]);
	free(mcore->cqgs);
	mcore->cqgs = NULL;
	mcore->cqg_cap = 0;
	if (mcore->epfd >= 0) {
		close(mcore->epfd);
		mcore->epfd = -1;
		mcore->core.cq_fd = -1;
	}
}

struct layer_msg_cqg *layer_msg_cqg_take(struct layer_msg_core *mcore)
{
	struct layer_msg_cqg *cqg;
	struct fid_cq *cq;
	size_t i;

	/* the first with room: a group freed of channels takes the next ones */
	for (i = 0; i < mcore->cqg_cnt; i++) {
		cqg = mcore->cqgs[i];
		if (!mcore->cqg_size || cqg->chan_cnt < mcore->cqg_size)
			goto out;
	}
	if (layer_core_open_cq(&mcore->core, FI_WAIT_FD, LAYER_MSG_CQG_CQ_SIZE, &cq))
		return NULL;
	if (layer_msg_cqg_add(mcore, cq, &cqg)) {
		fi_close(&cq->fid);
		return NULL;
	}
	if (layer_msg_cqg_watch(mcore, cqg)) {
		layer_msg_cqg_close(mcore, cqg);
		return NULL;
	}
out:
	cqg->chan_cnt++;
	return cqg;
}

void layer_msg_cqg_put(struct layer_msg_core *mcore, struct layer_msg_cqg *cqg)
{
	/* An empty group goes, its CQ with what tcp holds for it (a pool of 448 KiB): it
	 * holds nothing of its channels, all freed with what they had in the core. */
	if (--cqg->chan_cnt || !mcore->cqg_size || mcore->is_closed)
		return;
	layer_msg_cqg_close(mcore, cqg);
}

void layer_msg_cqgs_mark_all(struct layer_msg_core *mcore)
{
	size_t i;

	mcore->is_dry = false;
	for (i = 0; i < mcore->cqg_cnt; i++)
		layer_core_set_mark(&mcore->cqgs[i]->set);
}

/*
 * Whether tcp may have run out of shared buffers while a group was read: it took as many as
 * were posted when the read began, give or take those it holds for messages not yet whole
 * (counted only once they complete without direct receive; with it, only a message that
 * fits the posted header is). A connection of the group may then hold a message it had no
 * buffer for, which its socket no longer shows: the group is read again on the next call,
 * with the buffers given back meanwhile (the context running dry marks every group).
 */
static bool layer_msg_cqg_ran_low(const struct layer_msg_core *mcore, uint64_t takes,
				  size_t posted)
{
	size_t slack = mcore->has_rx_id ? mcore->buf_target / 2 : LAYER_MSG_SRX_SLACK;

	return takes && takes + slack >= posted;
}

void layer_msg_progress_cqs(struct layer_msg_core *mcore)
{
	struct epoll_event events[LAYER_MSG_EVENTS];
	struct layer_msg_cqg *cqg;
	struct util_dlist *item;
	uint64_t takes;
	size_t posted;
	int n, i;

	if (mcore->cqg_cnt > 1) {
		n = epoll_wait(mcore->epfd, events, LAYER_MSG_EVENTS, 0);
		for (i = 0; i < n; i++)
			layer_core_set_mark(events[i].data.ptr);
	} else if (mcore->cqg_cnt) {
		layer_core_set_mark(&mcore->cqgs[0]->set);
	}
	/* a group read may mark others (a channel closed), or itself again */
	while ((item = util_dlist_pop_front(&mcore->marked))) {
		cqg = container_of(item, struct layer_msg_cqg, set.link);
		cqg->set.is_marked = false;
		takes = mcore->srx_takes;
		posted = mcore->srx_cnt;
		layer_msg_read_cq(mcore, cqg->cq);
		if (mcore->cqg_cnt > 1 &&
		    layer_msg_cqg_ran_low(mcore, mcore->srx_takes - takes, posted) &&
		    !cqg->set.is_marked) {
			cqg->set.is_marked = true;
			util_dlist_insert_tail(&cqg->set.link, &mcore->again);
		}
	}
	while ((item = util_dlist_pop_front(&mcore->again)))
		util_dlist_insert_tail(item, &mcore->marked);
}

/*
 * fi_trywait on every group's CQ and the EQ, a few at a time: the caller sleeps on the
 * epoll set only when none has anything.
 */
int layer_msg_trywait(struct layer_core *core)
{
	struct layer_msg_core *mcore = layer_msg_core_of(core);
	struct fid *fids[16];
	size_t i, n = 0;
	int ret;

	/* Nothing to sleep on: the core CQ has no wait fd. */
	if (core->cq_fd < 0)
		return -FI_EAGAIN;
	fids[n++] = &core->eq->fid;
	for (i = 0; i < mcore->cqg_cnt; i++) {
		fids[n++] = &mcore->cqgs[i]->cq->fid;
		if (n < UTIL_ARRAY_SIZE(fids) && i + 1 < mcore->cqg_cnt)
			continue;
		ret = fi_trywait(core->domain->fabric->core_fabric, fids, (int) n);
		if (ret)
			return ret;
		n = 0;
	}
	if (!util_dlist_empty(&mcore->marked) || layer_msg_rings_ready(mcore))
		return -FI_EAGAIN;
	return 0;
}
