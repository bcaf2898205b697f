/*
 * Domain: wraps the core's domain. Memory registration is passed to the core; the provider
 * registers users' buffers itself (with its own keys) for rendezvous reads.
 *
 * Registrations are serialised here, whatever the core's threading says: the core domain is
 * shared by every endpoint of the domain, and each endpoint locks only itself. net (1.17)
 * grants FI_THREAD_SAFE but closes a registration without any lock, while it registers and,
 * in its progress, looks up the keys of incoming reads under its own: two endpoints
 * registering and releasing rendezvous buffers at once corrupt its key map (a registration
 * fails with -FI_ENOKEY, a peer's read of a live buffer fails with "unknown key"). So
 * core_mr_lock covers every core registration and close, and the core progress of RDM
 * endpoints (conn_rdm.c), where incoming reads are served.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>

#include "layer/layer.h"
#include "layer/av.h"
#include "layer/ep.h"

/* Keys of the provider's own registrations: the top half of the key space. */
#define LAYER_MR_KEY_BASE (1ULL << 62)

struct layer_mr {
	struct fid_mr mr_fid;
	struct layer_domain *domain;
	struct fid_mr *core_mr;
};

static int layer_mr_close(struct fid *fid)
{
	struct layer_mr *mr = container_of(fid, struct layer_mr, mr_fid.fid);
	int ret;

	util_lock_acquire(&mr->domain->core_mr_lock);
	ret = fi_close(&mr->core_mr->fid);
	util_lock_release(&mr->domain->core_mr_lock);
	if (ret)
		return ret;
	atomic_fetch_sub(&mr->domain->ref, 1);
	free(mr);
	return 0;
}

static struct fi_ops layer_mr_fi_ops = {
	.size = sizeof(struct fi_ops),
	.close = layer_mr_close,
	.bind = layer_no_bind,
	.control = layer_no_control,
	.ops_open = layer_no_ops_open,
};

#define LAYER_MR_ACCESS (FI_SEND | FI_RECV | FI_READ | FI_WRITE | FI_REMOTE_READ | \
			 FI_REMOTE_WRITE)

static int layer_mr_regattr(struct fid *fid, const struct fi_mr_attr *attr, uint64_t flags,
			    struct fid_mr **mr_fid)
{
	struct layer_domain *domain = container_of(fid, struct layer_domain, domain_fid.fid);
	struct layer_mr *mr;
	size_t i;
	int ret;

	if (!attr || !mr_fid || flags || (attr->access & ~LAYER_MR_ACCESS))
		return -FI_EINVAL;
	if (attr->iov_count && !attr->mr_iov)
		return -FI_EINVAL;
	for (i = 0; i < attr->iov_count; i++) {
		if (!attr->mr_iov[i].iov_base && attr->mr_iov[i].iov_len)
			return -FI_EINVAL;
	}
	/* Keys in the provider's range would collide with its rendezvous registrations. */
	if (!(domain->core_info->domain_attr->mr_mode & FI_MR_PROV_KEY) &&
	    attr->requested_key >= LAYER_MR_KEY_BASE)
		return -FI_EINVAL;

	mr = calloc(1, sizeof(*mr));
	if (!mr)
		return -FI_ENOMEM;
	util_lock_acquire(&domain->core_mr_lock);
	ret = fi_mr_regattr(domain->core_domain, attr, flags, &mr->core_mr);
	util_lock_release(&domain->core_mr_lock);
	if (ret) {
		free(mr);
		return ret;
	}
	mr->domain = domain;
	mr->mr_fid.fid.fclass = FI_CLASS_MR;
	mr->mr_fid.fid.context = attr->context;
	mr->mr_fid.fid.ops = &layer_mr_fi_ops;
	mr->mr_fid.mem_desc = fi_mr_desc(mr->core_mr);
	mr->mr_fid.key = fi_mr_key(mr->core_mr);
	atomic_fetch_add(&domain->ref, 1);
	*mr_fid = &mr->mr_fid;
	return 0;
}

static int layer_mr_regv(struct fid *fid, const struct iovec *iov, size_t count,
			 uint64_t access, uint64_t offset, uint64_t requested_key,
			 uint64_t flags, struct fid_mr **mr, void *context)
{
	struct fi_mr_attr attr = {
		.mr_iov = iov,
		.iov_count = count,
		.access = access,
		.offset = offset,
		.requested_key = requested_key,
		.context = context,
	};

	return layer_mr_regattr(fid, &attr, flags, mr);
}

static int layer_mr_reg(struct fid *fid, const void *buf, size_t len, uint64_t access,
			uint64_t offset, uint64_t requested_key, uint64_t flags,
			struct fid_mr **mr, void *context)
{
	struct iovec iov = { .iov_base = (void *) buf, .iov_len = len };

	return layer_mr_regv(fid, &iov, 1, access, offset, requested_key, flags, mr, context);
}

static struct fi_ops_mr layer_mr_ops = {
	.size = sizeof(struct fi_ops_mr),
	.reg = layer_mr_reg,
	.regv = layer_mr_regv,
	.regattr = layer_mr_regattr,
};

int layer_domain_reg_rma(struct layer_domain *domain, const struct iovec *iov, size_t count,
			 struct fid_mr **mr)
{
	uint64_t key = LAYER_MR_KEY_BASE + atomic_fetch_add(&domain->next_mr_key, 1);
	int ret;

	util_lock_acquire(&domain->core_mr_lock);
	ret = fi_mr_regv(domain->core_domain, iov, count, FI_REMOTE_READ, 0, key, 0, mr, NULL);
	util_lock_release(&domain->core_mr_lock);
	return ret;
}

void layer_domain_dereg_rma(struct layer_domain *domain, struct fid_mr *mr)
{
	util_lock_acquire(&domain->core_mr_lock);
	fi_close(&mr->fid);
	util_lock_release(&domain->core_mr_lock);
}

static int layer_domain_close(struct fid *fid)
{
	struct layer_domain *domain = container_of(fid, struct layer_domain, domain_fid.fid);
	int ret;

	if (atomic_load(&domain->ref))
		return -FI_EBUSY;
	ret = fi_close(&domain->core_domain->fid);
	if (ret)
		return ret;
	atomic_fetch_sub(&domain->fabric->ref, 1);
	fi_freeinfo(domain->core_info);
	util_lock_fini(&domain->core_mr_lock);
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

static int layer_no_scalable_ep(struct fid_domain *domain, struct fi_info *info,
				struct fid_ep **sep, void *context)
{
	return -FI_ENOSYS;
}

static int layer_no_poll_open(struct fid_domain *domain, struct fi_poll_attr *attr,
			      struct fid_poll **pollset)
{
	return -FI_ENOSYS;
}

static int layer_no_stx_ctx(struct fid_domain *domain, struct fi_tx_attr *attr,
			    struct fid_stx **stx, void *context)
{
	return -FI_ENOSYS;
}

static int layer_no_srx_ctx(struct fid_domain *domain, struct fi_rx_attr *attr,
			    struct fid_ep **rx_ep, void *context)
{
	return -FI_ENOSYS;
}

static int layer_no_query_atomic(struct fid_domain *domain, enum fi_datatype datatype,
				 enum fi_op op, struct fi_atomic_attr *attr, uint64_t flags)
{
	return -FI_ENOSYS;
}

static int layer_no_query_collective(struct fid_domain *domain, enum fi_collective_op coll,
				     struct fi_collective_attr *attr, uint64_t flags)
{
	return -FI_ENOSYS;
}

static struct fi_ops_domain layer_domain_ops = {
	.size = sizeof(struct fi_ops_domain),
	.av_open = layer_av_open,
	.cq_open = layer_cq_open,
	.endpoint = layer_ep_open,
	.scalable_ep = layer_no_scalable_ep,
	.cntr_open = layer_cntr_open,
	.poll_open = layer_no_poll_open,
	.stx_ctx = layer_no_stx_ctx,
	.srx_ctx = layer_no_srx_ctx,
	.query_atomic = layer_no_query_atomic,
	.query_collective = layer_no_query_collective,
};

int layer_domain_open(struct fid_fabric *fabric_fid, struct fi_info *info,
		      struct fid_domain **domain_fid, void *context)
{
	struct layer_fabric *fabric;
	struct layer_domain *domain;
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
	/* before any core endpoint exists: the core applies it domain-wide */
	if (domain->core_info->ep_attr->type == FI_EP_MSG)
		domain->has_direct_recv = layer_msg_direct_recv_init(domain);
	/* FI_THREAD_DOMAIN, _COMPLETION and _ENDPOINT: the application serialises access. */
	domain->is_thread_safe = domain->threading == FI_THREAD_SAFE ||
				 domain->threading == FI_THREAD_FID ||
				 domain->threading == FI_THREAD_UNSPEC;
	domain->addr_format = domain->core_info->addr_format;
	switch (domain->addr_format) {
	case FI_SOCKADDR_IN6:
		domain->addrlen = sizeof(struct sockaddr_in6);
		break;
	case FI_ADDR_STR:
		/* names are zero-padded to a fixed size (see layer_av_normalize) */
		domain->addrlen = LAYER_ADDR_STR_LEN;
		break;
	default:
		domain->addrlen = sizeof(struct sockaddr_in);
		break;
	}
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
	atomic_init(&domain->next_mr_key, 0);
	/* Only FI_THREAD_DOMAIN keeps two endpoints of the domain from running at once. */
	util_lock_init(&domain->core_mr_lock, domain->threading != FI_THREAD_DOMAIN);
	atomic_init(&domain->ref, 0);

	domain->domain_fid.fid.fclass = FI_CLASS_DOMAIN;
	domain->domain_fid.fid.context = context;
	domain->domain_fid.fid.ops = &layer_domain_fi_ops;
	domain->domain_fid.ops = &layer_domain_ops;
	domain->domain_fid.mr = &layer_mr_ops;
	atomic_fetch_add(&fabric->ref, 1);
	*domain_fid = &domain->domain_fid;
	return 0;

err_free_info:
	fi_freeinfo(domain->core_info);
err_free_domain:
	free(domain);
	return ret;
}
