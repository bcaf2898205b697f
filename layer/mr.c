/* Memory registration (mr.h). */
#include "config.h"

#include <stdlib.h>
#include <strings.h>

#include "layer/cntr.h"
#include "layer/domain.h"
#include "layer/nosys.h"

/* Keys of the provider's own registrations: the top half of the key space. */
#define LAYER_MR_KEY_BASE (1ULL << 62)

/* Cores whose registrations name addresses without pinning pages: the cache is right there. */
static const char *const layer_mr_cacheable_cores[] = { "tcp", "net", "sockets", "shm", "udp" };

struct layer_mr {
	struct fid_mr mr_fid;
	struct layer_domain *domain;
	struct fid_mr *core_mr;         /* NULL over a core without RMA: the map is all */
	struct util_mr_map_entry *entry; /* what peers' RMA requests find */
	struct layer_cntr *rem_write_cntr; /* fi_mr_bind FI_REMOTE_WRITE: peers' writes */
	struct layer_cntr *rem_read_cntr;  /* fi_mr_bind FI_REMOTE_READ: peers' reads */
	/* in each bound counter's progress set: reading it runs every endpoint of the domain,
	 * any of which may be where a peer's request arrives */
	struct util_progress_hook cntr_hooks[2]; /* [0] FI_REMOTE_WRITE, [1] FI_REMOTE_READ */
	bool is_granted;                 /* peers were told the core's key (rma/grant.h);
					  * under the domain's lock */
};

static int layer_mr_close(struct fid *fid)
{
	struct layer_mr *mr = container_of(fid, struct layer_mr, mr_fid.fid);
	bool is_granted;
	int ret;

	util_lock_acquire(&mr->domain->mr.lock);
	ret = mr->core_mr ? fi_close(&mr->core_mr->fid) : 0;
	/* gone for every later request; a transfer in progress keeps the entry until done,
	 * and finds no region to count for then */
	if (!ret) {
		mr->entry->context = NULL;
		util_mr_map_remove(&mr->domain->mr.map, mr->entry);
	}
	is_granted = mr->is_granted;
	util_lock_release(&mr->domain->mr.lock);
	if (ret)
		return ret;
	/* peers granted the region hear before anything the application sends next */
	if (is_granted)
		layer_domain_revoke(mr->domain, mr->mr_fid.key);
	if (mr->rem_write_cntr) {
		util_progress_set_del(&mr->rem_write_cntr->progress, &mr->cntr_hooks[0]);
		atomic_fetch_sub(&mr->rem_write_cntr->util.ref, 1);
	}
	if (mr->rem_read_cntr) {
		util_progress_set_del(&mr->rem_read_cntr->progress, &mr->cntr_hooks[1]);
		atomic_fetch_sub(&mr->rem_read_cntr->util.ref, 1);
	}
	atomic_fetch_sub(&mr->domain->ref, 1);
	free(mr);
	return 0;
}

/*
 * fi_mr_bind of a counter (fi_mr(3)): it counts peers' writes (FI_REMOTE_WRITE) or reads
 * (FI_REMOTE_READ) of this region. Nothing else binds: the provider asks for no
 * FI_MR_ENDPOINT.
 */
/* The endpoints' wait fds are not in the counter's wait set: a waiter polls, never sleeps. */
static int layer_mr_cntr_trywait(void *arg)
{
	(void) arg;
	return -FI_EAGAIN;
}

static int layer_mr_bind(struct fid *fid, struct fid *bfid, uint64_t flags)
{
	struct layer_mr *mr = container_of(fid, struct layer_mr, mr_fid.fid);
	struct layer_cntr *cntr = layer_cntr_of(bfid);
	bool is_granted;

	if (flags & ~(FI_REMOTE_WRITE | FI_REMOTE_READ))
		return -FI_EBADFLAGS;
	if (!cntr || !flags || cntr->domain != mr->domain)
		return -FI_EINVAL;
	if (((flags & FI_REMOTE_WRITE) && mr->rem_write_cntr) ||
	    ((flags & FI_REMOTE_READ) && mr->rem_read_cntr))
		return -FI_EINVAL;
	for (int i = 0; i < 2; i++) {
		if (!(flags & (i ? FI_REMOTE_READ : FI_REMOTE_WRITE)))
			continue;
		mr->cntr_hooks[i].progress = (struct util_progress) {
			.progress = util_progress_set_run,
			.trywait = layer_mr_cntr_trywait,
			.arg = &mr->domain->eps,
		};
		util_progress_set_add(&cntr->progress, &mr->cntr_hooks[i]);
		atomic_fetch_add(&cntr->util.ref, 1);
		util_lock_acquire(&mr->domain->mr.lock);
		if (i)
			mr->rem_read_cntr = cntr;
		else
			mr->rem_write_cntr = cntr;
		util_lock_release(&mr->domain->mr.lock);
	}
	/* the core's RMA counts nothing: peers granted the region go through us again */
	util_lock_acquire(&mr->domain->mr.lock);
	is_granted = mr->is_granted;
	util_lock_release(&mr->domain->mr.lock);
	if (is_granted)
		layer_domain_revoke(mr->domain, mr->mr_fid.key);
	return 0;
}

static struct fi_ops layer_mr_fi_ops = {
	.size = sizeof(struct fi_ops),
	.close = layer_mr_close,
	.bind = layer_mr_bind,
	.control = layer_no_control,
	.ops_open = layer_no_ops_open,
};

#define LAYER_MR_ACCESS (FI_SEND | FI_RECV | FI_READ | FI_WRITE | FI_REMOTE_READ | \
			 FI_REMOTE_WRITE)

/*
 * The application's struct fi_mr_attr as the core is told of it. The struct grows at its end
 * from release to release (device memory 1.11, hmem_data 1.19, page_size 1.22...) and the
 * core, opened with the API of this provider's headers, would read those fields past the end
 * of an older application's struct: only the fields every version has are passed on (the
 * provider offers no FI_HMEM, and the domain's auth key covers the application's).
 */
static struct fi_mr_attr layer_mr_core_attr(const struct fi_mr_attr *attr)
{
	return (struct fi_mr_attr) {
		.mr_iov = attr->mr_iov,
		.iov_count = attr->iov_count,
		.access = attr->access,
		.offset = attr->offset,
		.requested_key = attr->requested_key,
		.context = attr->context,
	};
}

/* A key of the provider's own, for a core registration over a core that takes requested keys. */
static uint64_t layer_mr_own_key(struct layer_domain *domain)
{
	return LAYER_MR_KEY_BASE + atomic_fetch_add(&domain->mr.next_key, 1);
}

/* Registers attr (fields every API version has) with the core and in the key map. */
static int layer_mr_register(struct fid *fid, const struct fi_mr_attr *attr, uint64_t flags,
			     struct fid_mr **mr_fid)
{
	struct layer_domain *domain = container_of(fid, struct layer_domain, domain_fid.fid);
	struct fi_mr_attr core_attr;
	struct layer_mr *mr;
	size_t i;
	int ret;

	if (!mr_fid || flags || (attr->access & ~LAYER_MR_ACCESS))
		return -FI_EINVAL;
	if (attr->iov_count && !attr->mr_iov)
		return -FI_EINVAL;
	for (i = 0; i < attr->iov_count; i++) {
		if (!attr->mr_iov[i].iov_base && attr->mr_iov[i].iov_len)
			return -FI_EINVAL;
	}
	/*
	 * The application's key is its key in the map; the core's registration takes a key of
	 * the provider's own (a core that takes requested keys, such as tcp): never reused, so
	 * a grant of it (rma/grant.h) never names another region, and keys the application
	 * asks for twice in FI_MR_BASIC mode do not collide at the core.
	 */
	core_attr = *attr;
	if (!(domain->core_info->domain_attr->mr_mode & FI_MR_PROV_KEY))
		core_attr.requested_key = layer_mr_own_key(domain);

	mr = calloc(1, sizeof(*mr));
	if (!mr)
		return -FI_ENOMEM;
	util_lock_acquire(&domain->mr.lock);
	/* a core without RMA never touches the application's memory: nothing to register */
	ret = domain->mr.is_soft ? 0 :
	      fi_mr_regattr(domain->core_domain, &core_attr, flags, &mr->core_mr);
	if (!ret) {
		/* peers' requests name it by its key in the map, the one the application sees */
		ret = util_mr_map_insert(&domain->mr.map, attr, mr, &mr->entry);
		if (ret && mr->core_mr)
			fi_close(&mr->core_mr->fid);
	}
	util_lock_release(&domain->mr.lock);
	if (ret) {
		free(mr);
		return ret;
	}
	mr->domain = domain;
	mr->mr_fid.fid.fclass = FI_CLASS_MR;
	mr->mr_fid.fid.context = attr->context;
	mr->mr_fid.fid.ops = &layer_mr_fi_ops;
	mr->mr_fid.mem_desc = mr->core_mr ? fi_mr_desc(mr->core_mr) : NULL;
	mr->mr_fid.key = mr->entry->key;
	atomic_fetch_add(&domain->ref, 1);
	*mr_fid = &mr->mr_fid;
	return 0;
}

static int layer_mr_regattr(struct fid *fid, const struct fi_mr_attr *attr, uint64_t flags,
			    struct fid_mr **mr_fid)
{
	struct fi_mr_attr core_attr;

	if (!attr)
		return -FI_EINVAL;
	core_attr = layer_mr_core_attr(attr);
	return layer_mr_register(fid, &core_attr, flags, mr_fid);
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

	return layer_mr_register(fid, &attr, flags, mr);
}

static int layer_mr_reg(struct fid *fid, const void *buf, size_t len, uint64_t access,
			uint64_t offset, uint64_t requested_key, uint64_t flags,
			struct fid_mr **mr, void *context)
{
	struct iovec iov = { .iov_base = (void *) buf, .iov_len = len };

	return layer_mr_regv(fid, &iov, 1, access, offset, requested_key, flags, mr, context);
}

struct fi_ops_mr layer_mr_ops = {
	.size = sizeof(struct fi_ops_mr),
	.reg = layer_mr_reg,
	.regv = layer_mr_regv,
	.regattr = layer_mr_regattr,
};

/* A rendezvous registration over a core without RMA: an entry of the domain's own map. */
struct layer_mr_soft {
	struct fid_mr mr_fid;          /* what the cache hands out: its key is read from it */
	struct util_mr_map_entry *entry;
};

static int layer_mr_soft_reg(struct layer_domain *domain, const struct iovec *iov,
			     uint64_t access, uint64_t key, void **handle)
{
	struct fi_mr_attr attr = {
		.mr_iov = iov,
		.iov_count = 1,
		.access = access,
		.requested_key = key,
	};
	struct layer_mr_soft *soft;
	int ret;

	soft = calloc(1, sizeof(*soft));
	if (!soft)
		return -FI_ENOMEM;
	ret = util_mr_map_insert(&domain->mr.rndv_map, &attr, NULL, &soft->entry);
	if (ret) {
		free(soft);
		return ret;
	}
	soft->mr_fid.fid.fclass = FI_CLASS_MR;
	soft->mr_fid.key = soft->entry->key;
	*handle = &soft->mr_fid;
	return 0;
}

int layer_mr_core_reg(struct layer_domain *domain, void *buf, size_t len, uint64_t access,
		      struct fid_mr **mr)
{
	uint64_t key = layer_mr_own_key(domain);
	int ret;

	util_lock_acquire(&domain->mr.lock);
	ret = fi_mr_reg(domain->core_domain, buf, len, access, 0, key, 0, mr, NULL);
	util_lock_release(&domain->mr.lock);
	return ret;
}

void layer_mr_core_close(struct layer_domain *domain, struct fid_mr *mr)
{
	util_lock_acquire(&domain->mr.lock);
	fi_close(&mr->fid);
	util_lock_release(&domain->mr.lock);
}

/* The cache's callbacks: a core registration with a provider-owned key (lock held). */
static int layer_mr_rndv_reg(void *arg, const struct iovec *iov, uint64_t access, void **handle)
{
	struct layer_domain *domain = arg;
	uint64_t key = layer_mr_own_key(domain);
	struct fid_mr *mr;
	int ret;

	if (domain->mr.is_soft)
		return layer_mr_soft_reg(domain, iov, access, key, handle);
	ret = fi_mr_regv(domain->core_domain, iov, 1, access, 0, key, 0, &mr, NULL);
	if (ret) {
		LAYER_WARN_ONCE(FI_LOG_MR, "rendezvous registration failed: %s\n",
			fi_strerror(-ret));
		return ret;
	}
	*handle = mr;
	return 0;
}

static void layer_mr_rndv_dereg(void *arg, void *handle)
{
	struct layer_domain *domain = arg;
	struct layer_mr_soft *soft;

	if (domain->mr.is_soft) {
		soft = container_of(handle, struct layer_mr_soft, mr_fid);
		util_mr_map_remove(&domain->mr.rndv_map, soft->entry);
		free(soft);
		return;
	}
	fi_close(&((struct fid_mr *) handle)->fid);
}

int layer_mr_rndv_lookup(struct layer_domain *domain, uint64_t key, uint64_t addr, size_t len,
			 struct iovec *iov, size_t *iov_cnt, struct util_mr_map_entry **entry)
{
	int ret;

	util_lock_acquire(&domain->mr.lock);
	ret = util_mr_map_get(&domain->mr.rndv_map, key, addr, len, FI_REMOTE_READ, iov, iov_cnt,
			      entry);
	util_lock_release(&domain->mr.lock);
	return ret;
}

void layer_mr_rndv_release(struct layer_domain *domain, struct util_mr_map_entry *entry)
{
	util_lock_acquire(&domain->mr.lock);
	util_mr_map_put(&domain->mr.rndv_map, entry);
	util_lock_release(&domain->mr.lock);
}

int layer_mr_rndv_get(struct layer_domain *domain, const struct iovec *iov,
		      layer_rndv_reg_t **reg)
{
	int ret;

	util_lock_acquire(&domain->mr.lock);
	ret = util_mr_cache_get(&domain->mr.cache, iov, FI_REMOTE_READ, reg);
	util_lock_release(&domain->mr.lock);
	return ret;
}

int layer_mr_target_get(struct layer_domain *domain, uint64_t key, uint64_t addr, size_t len,
			uint64_t access, struct iovec *iov, size_t *iov_cnt,
			struct util_mr_map_entry **entry)
{
	int ret;

	util_lock_acquire(&domain->mr.lock);
	ret = util_mr_map_get(&domain->mr.map, key, addr, len, access, iov, iov_cnt, entry);
	util_lock_release(&domain->mr.lock);
	return ret;
}

bool layer_mr_core_name(struct layer_domain *domain, struct util_mr_map_entry *entry,
			uint64_t *core_key, uint64_t *core_addr)
{
	struct layer_mr *mr;
	bool ok;

	util_lock_acquire(&domain->mr.lock);
	mr = entry->context;
	ok = mr && mr->core_mr && entry->iov_cnt == 1 && !mr->rem_write_cntr &&
	     !mr->rem_read_cntr;
	if (ok) {
		*core_key = fi_mr_key(mr->core_mr);
		*core_addr = domain->core_info->domain_attr->mr_mode & FI_MR_VIRT_ADDR ?
			     (uint64_t) (uintptr_t) entry->iov[0].iov_base : 0;
		mr->is_granted = true;
	}
	util_lock_release(&domain->mr.lock);
	return ok;
}

/* The counter the application bound to entry's region for access, if the region is open
 * (lock held). */
static void layer_mr_target_count_locked(struct util_mr_map_entry *entry, uint64_t access)
{
	struct layer_mr *mr = entry->context;
	struct layer_cntr *cntr;

	if (!mr || !access)
		return;
	cntr = access == FI_REMOTE_WRITE ? mr->rem_write_cntr : mr->rem_read_cntr;
	if (cntr)
		util_cntr_inc(&cntr->util);
}

void layer_mr_target_count(struct layer_domain *domain, struct util_mr_map_entry *entry,
			   uint64_t access)
{
	util_lock_acquire(&domain->mr.lock);
	layer_mr_target_count_locked(entry, access);
	util_lock_release(&domain->mr.lock);
}

void layer_mr_target_put(struct layer_domain *domain, struct util_mr_map_entry *entry,
			 uint64_t done)
{
	util_lock_acquire(&domain->mr.lock);
	layer_mr_target_count_locked(entry, done);
	util_mr_map_put(&domain->mr.map, entry);
	util_lock_release(&domain->mr.lock);
}

void layer_mr_rndv_put(struct layer_domain *domain, layer_rndv_reg_t *reg)
{
	util_lock_acquire(&domain->mr.lock);
	util_mr_cache_put(&domain->mr.cache, reg);
	util_lock_release(&domain->mr.lock);
}

static bool layer_mr_is_cacheable(const char *core)
{
	size_t i;

	for (i = 0; i < UTIL_ARRAY_SIZE(layer_mr_cacheable_cores); i++) {
		if (!strcasecmp(core, layer_mr_cacheable_cores[i]))
			return true;
	}
	return false;
}

void layer_mr_domain_init(struct layer_domain *domain)
{
	struct layer_mr_domain *mr = &domain->mr;
	size_t capacity = 0;

	if (layer_mr_is_cacheable(domain->core_info->fabric_attr->prov_name))
		capacity = layer_settings.mr_cache_size;
	/* Only FI_THREAD_DOMAIN without a progress thread keeps two endpoints of the domain
	 * from running at once. */
	util_lock_init(&mr->lock, domain->threading != FI_THREAD_DOMAIN || domain->is_thread_safe);
	atomic_init(&mr->next_key, 0);
	/* addresses the rendezvous requests name: virtual, as the datagram transport says */
	mr->is_soft = domain->core_info->ep_attr->type == FI_EP_DGRAM;
	util_mr_map_init(&mr->rndv_map, FI_MR_VIRT_ADDR);
	util_mr_cache_init(&mr->cache, capacity, layer_mr_rndv_reg, layer_mr_rndv_dereg, domain);
	/* addresses and keys as the application's mr_mode says (FI_MR_BASIC: both bits) */
	util_mr_map_init(&mr->map, domain->mr_mode == LAYER_MR_BASIC ?
				   FI_MR_VIRT_ADDR | FI_MR_PROV_KEY : domain->mr_mode);
}

void layer_mr_domain_fini(struct layer_domain *domain)
{
	util_lock_acquire(&domain->mr.lock);
	util_mr_cache_fini(&domain->mr.cache);
	util_mr_map_fini(&domain->mr.rndv_map);
	util_mr_map_fini(&domain->mr.map);
	util_lock_release(&domain->mr.lock);
	util_lock_fini(&domain->mr.lock);
}
