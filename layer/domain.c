/* Domain (domain.h): the core's domain, and the objects opened on it. */
#include "config.h"

#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>

#include "layer/coll/coll.h"
#include "layer/domain.h"
#include "layer/atomic/atomic.h"
#include "layer/addr.h"
#include "layer/av/av.h"
#include "layer/cntr.h"
#include "layer/core/core.h"
#include "layer/cq.h"
#include "layer/ep/ep.h"
#include "layer/nosys.h"
#include "layer/poll.h"
#include "layer/rma/grant.h"

static int layer_domain_close(struct fid *fid)
{
	struct layer_domain *domain = container_of(fid, struct layer_domain, domain_fid.fid);
	int ret;

	if (atomic_load(&domain->ref))
		return -FI_EBUSY;
	if (domain->progress_thread) {
		layer_progress_stop(domain->progress_thread);
		free(domain->progress_thread);
		domain->progress_thread = NULL;
	}
	/* the cached registrations go before the core domain, which refuses to close under them */
	layer_mr_domain_fini(domain);
	ret = fi_close(&domain->core_domain->fid);
	if (ret)
		return ret;
	util_progress_set_fini(&domain->eps);
	atomic_fetch_sub(&domain->fabric->ref, 1);
	fi_freeinfo(domain->core_info);
	free(domain);
	return 0;
}

static struct fi_ops layer_domain_fi_ops = {
	.size = sizeof(struct fi_ops),
	.close = layer_domain_close,
	.bind = layer_no_bind,
	.control = layer_no_control,
	.ops_open = layer_no_ops_open,
};

static struct fi_ops_domain layer_domain_ops = {
	.size = sizeof(struct fi_ops_domain),
	.av_open = layer_av_open,
	.cq_open = layer_cq_open,
	.endpoint = layer_ep_open,
	.scalable_ep = layer_no_scalable_ep,
	.cntr_open = layer_cntr_open,
	.poll_open = layer_poll_open,
	.stx_ctx = layer_no_stx_ctx,
	.srx_ctx = layer_no_srx_ctx,
	.query_atomic = layer_query_atomic,
	.query_collective = layer_query_collective,
};

static void layer_domain_revoke_ep(struct util_progress_hook *hook, void *arg)
{
	struct layer_ep *ep = container_of(hook, struct layer_ep, member.hook);

	layer_ep_lock(ep);
	layer_grant_revoke(&ep->proto, *(const uint64_t *) arg);
	layer_ep_unlock(ep);
}

void layer_domain_revoke(struct layer_domain *domain, uint64_t key)
{
	util_progress_set_each(&domain->eps, layer_domain_revoke_ep, &key);
}

/* FI_PROGRESS_AUTO asked for either kind of progress: the domain runs a thread. */
static bool layer_domain_wants_thread(const struct fi_domain_attr *attr)
{
	return attr->data_progress == FI_PROGRESS_AUTO ||
	       attr->control_progress == FI_PROGRESS_AUTO;
}

static int layer_domain_start_thread(struct layer_domain *domain)
{
	int ret;

	domain->progress_thread = calloc(1, sizeof(*domain->progress_thread));
	if (!domain->progress_thread)
		return -FI_ENOMEM;
	ret = layer_progress_start(domain->progress_thread, &domain->eps);
	if (ret) {
		free(domain->progress_thread);
		domain->progress_thread = NULL;
	}
	return ret;
}

int layer_domain_open(struct fid_fabric *fabric_fid, struct fi_info *info,
		      struct fid_domain **domain_fid, void *context)
{
	struct layer_fabric *fabric;
	struct layer_domain *domain;
	bool wants_thread;
	int ret;

	if (!fabric_fid || !info || !domain_fid || !info->domain_attr || !info->fabric_attr)
		return -FI_EINVAL;
	if (info->ep_attr && info->ep_attr->type != FI_EP_RDM &&
	    info->ep_attr->type != FI_EP_UNSPEC)
		return -FI_EINVAL;
	fabric = container_of(fabric_fid, struct layer_fabric, fabric_fid);
	/* A default key of 1 to 32 bytes, or FI_AV_AUTH_KEY without one (fi_av(3) 1.20). */
	if (!FI_VERSION_LT(fabric->api_version, FI_VERSION(1, 5)) &&
	    !layer_auth_key_attr_ok(info->domain_attr->auth_key,
				    info->domain_attr->auth_key_size, true)) {
		FI_WARN(&layer_prov, FI_LOG_DOMAIN, "domain auth_key: 1 to 32 bytes, or "
			"auth_key_size FI_AV_AUTH_KEY with no key\n");
		return -FI_EINVAL;
	}

	domain = calloc(1, sizeof(*domain));
	if (!domain)
		return -FI_ENOMEM;
	ret = layer_get_core_info(LAYER_FI_VERSION, info, &domain->core_info);
	if (ret)
		goto err_free_domain;
	ret = fi_domain(fabric->core_fabric, domain->core_info, &domain->core_domain, domain);
	if (ret)
		goto err_free_info;

	domain->fabric = fabric;
	domain->threading = info->domain_attr->threading;
	wants_thread = layer_domain_wants_thread(info->domain_attr);
	/* before any core endpoint exists: the core applies it domain-wide */
	if (domain->core_info->ep_attr->type == FI_EP_MSG)
		domain->has_direct_recv = layer_core_msg_direct_recv_init(domain);
	/* FI_THREAD_DOMAIN, _COMPLETION and _ENDPOINT: the application serialises access,
	 * unless a progress thread shares the objects with it. */
	domain->is_thread_safe = domain->threading == FI_THREAD_SAFE ||
				 domain->threading == FI_THREAD_FID ||
				 domain->threading == FI_THREAD_UNSPEC || wants_thread;
	domain->addr_format = domain->core_info->addr_format;
	/* names are zero-padded to a fixed size (addr.h); getinfo offers no other format */
	domain->addrlen = layer_addr_len(domain->addr_format);
	domain->mr_mode = info->domain_attr->mr_mode;
	/* fi_domain(3): the key fields count from API 1.5 on */
	if (!FI_VERSION_LT(fabric->api_version, FI_VERSION(1, 5))) {
		if (info->domain_attr->auth_key_size == FI_AV_AUTH_KEY) {
			domain->auth_key_size = FI_AV_AUTH_KEY;
		} else if (info->domain_attr->auth_key_size) {
			domain->auth_key.len = (uint8_t) info->domain_attr->auth_key_size;
			memcpy(domain->auth_key.bytes, info->domain_attr->auth_key,
			       domain->auth_key.len);
		}
	}
	layer_mr_domain_init(domain);
	util_progress_set_init(&domain->eps, domain->is_thread_safe);
	atomic_init(&domain->ref, 0);
	if (wants_thread) {
		ret = layer_domain_start_thread(domain);
		if (ret)
			goto err_close_domain;
	}

	domain->domain_fid.fid.fclass = FI_CLASS_DOMAIN;
	domain->domain_fid.fid.context = context;
	domain->domain_fid.fid.ops = &layer_domain_fi_ops;
	domain->domain_fid.ops = &layer_domain_ops;
	domain->domain_fid.mr = &layer_mr_ops;
	atomic_fetch_add(&fabric->ref, 1);
	*domain_fid = &domain->domain_fid;
	return 0;

err_close_domain:
	util_progress_set_fini(&domain->eps);
	layer_mr_domain_fini(domain);
	fi_close(&domain->core_domain->fid);
err_free_info:
	fi_freeinfo(domain->core_info);
err_free_domain:
	free(domain);
	return ret;
}
