/*
 * FI_EVENT address vectors (fi_av(3)): insertions return 0 at once and complete later on the
 * bound EQ, with one error entry per failed address (err a positive errno, data the
 * address's position in the call, context the call's context), then exactly one
 * FI_AV_COMPLETE whose data is the number inserted.
 *
 * The addresses (and any user IDs or key handles) are copied when the call is made; the
 * caller's fi_addr array is written as they go in, so it must stay valid until the
 * FI_AV_COMPLETE is read, as fi_av(3) asks. Reading the EQ (fi_eq_read, _readerr, _sread)
 * drives the work through the EQ's progress hook, at most LAYER_AV_EVENT_BATCH addresses per
 * read, oldest call first: TABLE indices follow the order of the calls.
 *
 * Locking: progress runs under the EQ's av_lock (one progress at a time per EQ, and an AV
 * has one EQ); av->req_lock guards the queue between the callers appending to it and that
 * progress.
 */
#include "config.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include <rdma/fi_ext_layer.h>

#include "layer/av/av.h"

/* addresses inserted per progress call, so that an EQ read stays short */
#define LAYER_AV_EVENT_BATCH 65536

struct layer_av_req {
	struct util_dlist link;   /* av->reqs */
	void *context;            /* the call's */
	fi_addr_t *fi_addr;       /* the caller's array, written as addresses go in */
	uint64_t flags;
	size_t count;
	size_t next;              /* first address not processed yet */
	size_t inserted;
	int *errs;                /* failures known when the call was made, or NULL */
	fi_addr_t *ids_in;        /* copied user IDs or key handles, or NULL */
	uint8_t addrs[];          /* count addresses, copied */
};

int layer_av_bind(struct fid *fid, struct fid *bfid, uint64_t flags)
{
	struct layer_av *av = container_of(fid, struct layer_av, av_fid.fid);
	struct layer_eq *eq;

	/* fi_av(3): flags are reserved and must be 0 */
	if (flags) {
		FI_WARN(&layer_prov, FI_LOG_AV, "bind: flags 0x%" PRIx64 " must be 0\n", flags);
		return -FI_EINVAL;
	}
	if (!bfid || bfid->fclass != FI_CLASS_EQ ||
	    container_of(bfid, struct fid_eq, fid)->ops != &util_eq_ops) {
		FI_WARN(&layer_prov, FI_LOG_AV, "bind: not an event queue of this provider\n");
		return -FI_EINVAL;
	}
	eq = container_of(bfid, struct layer_eq, util.eq_fid.fid);

	util_lock_acquire(&av->lock);
	if (av->eq) {
		util_lock_release(&av->lock);
		FI_WARN(&layer_prov, FI_LOG_AV, "bind: an event queue is bound already\n");
		return -FI_EALREADY;
	}
	av->eq = eq;
	atomic_fetch_add(&eq->util.ref, 1);
	util_lock_release(&av->lock);

	/* reading the EQ completes the queued insertions */
	av->eq_hook.progress = (struct util_progress) {
		.progress = layer_av_progress,
		.trywait = layer_av_trywait,
		.arg = av,
	};
	util_progress_set_add(&eq->progress, &av->eq_hook);
	return 0;
}

int layer_av_event_queue(struct layer_av *av, const uint8_t *addrs, const int *errs,
			 size_t count, fi_addr_t *fi_addr, uint64_t flags, void *context)
{
	bool has_ids = flags & (FI_AV_USER_ID | FI_AUTH_KEY);
	struct layer_av_req *req;

	/* fi_av(3): insertions before an EQ is bound fail with -FI_ENOEQ */
	if (!av->eq) {
		FI_WARN(&layer_prov, FI_LOG_AV, "insert: FI_EVENT av without an event queue\n");
		return -FI_ENOEQ;
	}
	if (count > (SIZE_MAX - sizeof(*req)) / av->addrlen)
		return -FI_EINVAL;
	req = calloc(1, sizeof(*req) + count * av->addrlen);
	if (!req)
		return -FI_ENOMEM;
	if (errs) {
		req->errs = malloc(count * sizeof(*req->errs));
		if (!req->errs)
			goto err_free;
		memcpy(req->errs, errs, count * sizeof(*req->errs));
	}
	if (has_ids && count) {
		req->ids_in = malloc(count * sizeof(*req->ids_in));
		if (!req->ids_in)
			goto err_free;
		memcpy(req->ids_in, fi_addr, count * sizeof(*req->ids_in));
	}
	if (count)
		memcpy(req->addrs, addrs, count * av->addrlen);
	req->context = context;
	req->fi_addr = fi_addr;
	req->flags = flags;
	req->count = count;

	pthread_mutex_lock(&av->req_lock);
	util_dlist_insert_tail(&req->link, &av->reqs);
	pthread_mutex_unlock(&av->req_lock);

	/* an application sleeping on the EQ's fd has to come and read for this to progress */
	if (av->eq->util.wait_obj != FI_WAIT_NONE)
		util_wait_signal(&av->eq->util.wait);
	return 0;

err_free:
	free(req->errs);
	free(req);
	return -FI_ENOMEM;
}

static void layer_av_req_free(struct layer_av_req *req)
{
	free(req->errs);
	free(req->ids_in);
	free(req);
}

struct layer_av_event_err {
	struct layer_av *av;
	struct layer_av_req *req;
};

/* One EQ error entry per failed address; data is its position in the call. */
static void layer_av_event_error(void *arg, size_t i, int err)
{
	struct layer_av_event_err *e = arg;
	int ret;

	ret = util_eq_write_error(&e->av->eq->util, &e->av->av_fid.fid, e->req->context, i, err,
				  err);
	if (ret)
		FI_WARN(&layer_prov, FI_LOG_AV, "no room for an insertion error event: %s\n",
			fi_strerror(-ret));
}

/* Processes up to budget addresses of req; returns how many it processed. */
static size_t layer_av_req_run(struct layer_av *av, struct layer_av_req *req, size_t budget)
{
	struct layer_av_event_err e = { .av = av, .req = req };
	struct layer_av_ins ins = {
		.addrs = req->addrs,
		.fi_addr = req->fi_addr,
		.ids_in = req->ids_in,
		.flags = req->flags,
		.on_error = layer_av_event_error,
		.arg = &e,
	};
	size_t end = req->next + UTIL_MIN(budget, req->count - req->next);
	size_t start = req->next, i;

	while (start < end) {
		for (i = start; i < end && !(req->errs && req->errs[i]); i++)
			;
		if (i > start)
			req->inserted += layer_av_insert_range(av, &ins, start, i - start);
		if (i < end) {
			if (req->fi_addr)
				req->fi_addr[i] = FI_ADDR_NOTAVAIL;
			layer_av_event_error(&e, i, req->errs[i]);
			i++;
		}
		start = i;
	}
	budget = end - req->next;
	req->next = end;
	return budget;
}

void layer_av_progress(void *arg)
{
	struct layer_av *av = arg;
	size_t budget = LAYER_AV_EVENT_BATCH;
	struct layer_av_req *req;
	struct fi_eq_entry entry;
	ssize_t ret;

	while (budget) {
		pthread_mutex_lock(&av->req_lock);
		req = util_dlist_empty(&av->reqs) ? NULL :
		      container_of(av->reqs.next, struct layer_av_req, link);
		pthread_mutex_unlock(&av->req_lock);
		if (!req)
			return;

		/* only this progress takes requests off the queue: req stays valid */
		budget -= layer_av_req_run(av, req, budget);
		if (req->next < req->count)
			return;

		pthread_mutex_lock(&av->req_lock);
		util_dlist_remove(&req->link);
		pthread_mutex_unlock(&av->req_lock);

		/* after every error entry of the call: exactly one completion */
		entry.fid = &av->av_fid.fid;
		entry.context = req->context;
		entry.data = req->inserted;
		ret = util_eq_write(&av->eq->util, FI_AV_COMPLETE, &entry, sizeof(entry), 0);
		if (ret < 0)
			FI_WARN(&layer_prov, FI_LOG_AV, "no room for an FI_AV_COMPLETE event: %s\n",
				fi_strerror((int) -ret));
		layer_av_req_free(req);
	}
}

int layer_av_trywait(void *arg)
{
	struct layer_av *av = arg;
	bool has_pending;

	pthread_mutex_lock(&av->req_lock);
	has_pending = !util_dlist_empty(&av->reqs);
	pthread_mutex_unlock(&av->req_lock);
	return has_pending ? -FI_EAGAIN : 0;
}

void layer_av_event_fini(struct layer_av *av)
{
	struct util_dlist *item;

	/* fi_av(3) leaves queued events alone; insertions not yet done are dropped */
	if (av->eq) {
		util_progress_set_del(&av->eq->progress, &av->eq_hook);
		atomic_fetch_sub(&av->eq->util.ref, 1);
		av->eq = NULL;
	}
	while ((item = util_dlist_pop_front(&av->reqs)))
		layer_av_req_free(container_of(item, struct layer_av_req, link));
}
