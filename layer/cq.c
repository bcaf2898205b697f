/*
 * Completion queues and counters of the provider: util's objects, whose reads drive the
 * progress of the endpoints bound to them and whose wait sets hold those endpoints' core
 * fds, so that a blocked read wakes up for core events as well as for new entries.
 */
#include "config.h"

#include <stdlib.h>

#include "layer/layer.h"
#include "layer/ep.h"

struct layer_ep_ref {
	struct util_dlist link;
	struct layer_ep *ep;
};

static void layer_eps_progress(struct util_lock *lock, struct util_dlist *eps)
{
	struct util_dlist *item;

	util_lock_acquire(lock);
	util_dlist_foreach(eps, item)
		layer_ep_progress(container_of(item, struct layer_ep_ref, link)->ep);
	util_lock_release(lock);
}

static int layer_eps_trywait(struct util_lock *lock, struct util_dlist *eps)
{
	struct util_dlist *item;
	int ret = 0;

	util_lock_acquire(lock);
	util_dlist_foreach(eps, item) {
		ret = layer_ep_trywait(container_of(item, struct layer_ep_ref, link)->ep);
		if (ret)
			break;
	}
	util_lock_release(lock);
	return ret;
}

static int layer_eps_attach(struct util_lock *lock, struct util_dlist *eps,
			    struct util_wait *wait, bool has_wait, struct layer_ep *ep)
{
	struct layer_ep_ref *ref;
	int ret;

	ref = calloc(1, sizeof(*ref));
	if (!ref)
		return -FI_ENOMEM;
	ref->ep = ep;
	if (has_wait) {
		ret = layer_ep_core_cq_wait(ep);
		if (ret) {
			free(ref);
			return ret;
		}
		/* a core CQ without a wait fd (shm) is polled: its trywait never says sleep */
		ret = ep->core_cq_fd >= 0 ? util_wait_add_fd(wait, ep->core_cq_fd) : 0;
		if (!ret)
			ret = util_wait_add_fd(wait, ep->core_eq_fd);
		if (ret) {
			if (ep->core_cq_fd >= 0)
				util_wait_del_fd(wait, ep->core_cq_fd);
			free(ref);
			return ret;
		}
	}
	util_lock_acquire(lock);
	util_dlist_insert_tail(&ref->link, eps);
	util_lock_release(lock);
	return 0;
}

static void layer_eps_detach(struct util_lock *lock, struct util_dlist *eps,
			     struct util_wait *wait, bool has_wait, struct layer_ep *ep)
{
	struct util_dlist *item;
	struct layer_ep_ref *ref;

	util_lock_acquire(lock);
	util_dlist_foreach(eps, item) {
		ref = container_of(item, struct layer_ep_ref, link);
		if (ref->ep != ep)
			continue;
		util_dlist_remove(&ref->link);
		free(ref);
		break;
	}
	util_lock_release(lock);
	if (has_wait) {
		if (ep->core_cq_fd >= 0)
			util_wait_del_fd(wait, ep->core_cq_fd);
		util_wait_del_fd(wait, ep->core_eq_fd);
	}
}

/* CQ */

static void layer_cq_progress(void *arg)
{
	struct layer_cq *cq = arg;

	layer_eps_progress(&cq->ep_lock, &cq->eps);
}

/* util checks its own entries; the hook answers for the cores underneath. */
static int layer_cq_trywait(void *arg)
{
	struct layer_cq *cq = arg;

	return layer_eps_trywait(&cq->ep_lock, &cq->eps);
}

int layer_cq_attach_ep(struct layer_cq *cq, struct layer_ep *ep)
{
	int ret;

	ret = layer_eps_attach(&cq->ep_lock, &cq->eps, &cq->util.wait,
			       cq->util.wait_obj != FI_WAIT_NONE, ep);
	if (!ret)
		atomic_fetch_add(&cq->util.ref, 1);
	return ret;
}

void layer_cq_detach_ep(struct layer_cq *cq, struct layer_ep *ep)
{
	layer_eps_detach(&cq->ep_lock, &cq->eps, &cq->util.wait,
			 cq->util.wait_obj != FI_WAIT_NONE, ep);
	atomic_fetch_sub(&cq->util.ref, 1);
}

static int layer_cq_close(struct fid *fid)
{
	struct layer_cq *cq = container_of(fid, struct layer_cq, util.cq_fid.fid);
	int ret;

	ret = util_cq_fini(&cq->util);
	if (ret)
		return ret;
	util_lock_fini(&cq->ep_lock);
	atomic_fetch_sub(&cq->domain->ref, 1);
	free(cq);
	return 0;
}

static struct fi_ops layer_cq_fi_ops = {
	.size = sizeof(struct fi_ops),
	.close = layer_cq_close,
	.bind = layer_no_bind,
	.control = util_cq_control,
	.ops_open = layer_no_ops_open,
};

int layer_cq_open(struct fid_domain *domain_fid, struct fi_cq_attr *attr,
		  struct fid_cq **cq_fid, void *context)
{
	struct layer_domain *domain = container_of(domain_fid, struct layer_domain, domain_fid);
	struct util_progress progress;
	struct layer_cq *cq;
	int ret;

	if (!attr || !cq_fid)
		return -FI_EINVAL;
	cq = calloc(1, sizeof(*cq));
	if (!cq)
		return -FI_ENOMEM;
	progress = (struct util_progress) {
		.progress = layer_cq_progress,
		.trywait = layer_cq_trywait,
		.arg = cq,
	};
	ret = util_cq_init(&cq->util, attr, domain->is_thread_safe, &progress, context);
	if (ret) {
		free(cq);
		return ret;
	}
	cq->domain = domain;
	cq->util.api_version = domain->fabric->api_version;
	/* The endpoint list changes at bind and close only, which FI_THREAD_DOMAIN serialises. */
	util_lock_init(&cq->ep_lock, domain->is_thread_safe);
	util_dlist_init(&cq->eps);
	cq->util.cq_fid.fid.ops = &layer_cq_fi_ops;
	atomic_fetch_add(&domain->ref, 1);
	*cq_fid = &cq->util.cq_fid;
	return 0;
}

/* Counter */

static void layer_cntr_progress(void *arg)
{
	struct layer_cntr *cntr = arg;

	layer_eps_progress(&cntr->ep_lock, &cntr->eps);
}

static int layer_cntr_trywait(void *arg)
{
	struct layer_cntr *cntr = arg;

	return layer_eps_trywait(&cntr->ep_lock, &cntr->eps);
}

int layer_cntr_attach_ep(struct layer_cntr *cntr, struct layer_ep *ep)
{
	int ret;

	ret = layer_eps_attach(&cntr->ep_lock, &cntr->eps, &cntr->util.wait,
			       cntr->util.wait_obj != FI_WAIT_NONE, ep);
	if (!ret)
		atomic_fetch_add(&cntr->util.ref, 1);
	return ret;
}

void layer_cntr_detach_ep(struct layer_cntr *cntr, struct layer_ep *ep)
{
	layer_eps_detach(&cntr->ep_lock, &cntr->eps, &cntr->util.wait,
			 cntr->util.wait_obj != FI_WAIT_NONE, ep);
	atomic_fetch_sub(&cntr->util.ref, 1);
}

static int layer_cntr_close(struct fid *fid)
{
	struct layer_cntr *cntr = container_of(fid, struct layer_cntr, util.cntr_fid.fid);
	int ret;

	ret = util_cntr_fini(&cntr->util);
	if (ret)
		return ret;
	util_lock_fini(&cntr->ep_lock);
	atomic_fetch_sub(&cntr->domain->ref, 1);
	free(cntr);
	return 0;
}

static struct fi_ops layer_cntr_fi_ops = {
	.size = sizeof(struct fi_ops),
	.close = layer_cntr_close,
	.bind = layer_no_bind,
	.control = util_cntr_control,
	.ops_open = layer_no_ops_open,
};

int layer_cntr_open(struct fid_domain *domain_fid, struct fi_cntr_attr *attr,
		    struct fid_cntr **cntr_fid, void *context)
{
	struct layer_domain *domain = container_of(domain_fid, struct layer_domain, domain_fid);
	struct util_progress progress;
	struct layer_cntr *cntr;
	int ret;

	if (!cntr_fid)
		return -FI_EINVAL;
	cntr = calloc(1, sizeof(*cntr));
	if (!cntr)
		return -FI_ENOMEM;
	progress = (struct util_progress) {
		.progress = layer_cntr_progress,
		.trywait = layer_cntr_trywait,
		.arg = cntr,
	};
	ret = util_cntr_init(&cntr->util, attr, &progress, context);
	if (ret) {
		free(cntr);
		return ret;
	}
	cntr->domain = domain;
	util_lock_init(&cntr->ep_lock, domain->is_thread_safe);
	util_dlist_init(&cntr->eps);
	cntr->util.cntr_fid.fid.ops = &layer_cntr_fi_ops;
	atomic_fetch_add(&domain->ref, 1);
	*cntr_fid = &cntr->util.cntr_fid;
	return 0;
}

/*
 * fi_trywait on the fabric: progress first (it may produce entries), then util's check,
 * which also marks the wait fd as handed out so that later writes signal it.
 */
int layer_trywait(struct fid_fabric *fabric, struct fid **fids, int count)
{
	struct layer_cntr *cntr;
	struct layer_cq *cq;
	struct util_eq *eq;
	int i, ret;

	if (!fids || count < 0)
		return -FI_EINVAL;
	for (i = 0; i < count; i++) {
		if (!fids[i])
			return -FI_EINVAL;
		switch (fids[i]->fclass) {
		case FI_CLASS_CQ:
			cq = container_of(fids[i], struct layer_cq, util.cq_fid.fid);
			layer_cq_progress(cq);
			ret = util_cq_trywait(&cq->util);
			break;
		case FI_CLASS_CNTR:
			cntr = container_of(fids[i], struct layer_cntr, util.cntr_fid.fid);
			layer_cntr_progress(cntr);
			ret = util_cntr_trywait(&cntr->util);
			break;
		case FI_CLASS_EQ:
			eq = container_of(fids[i], struct util_eq, eq_fid.fid);
			util_progress_run(&eq->progress);
			ret = util_eq_trywait(eq);
			break;
		default:
			return -FI_EINVAL;
		}
		if (ret)
			return ret;
	}
	return 0;
}
