/*
 * The core side of an endpoint, whatever the kind (core.h): opening it with the adapter its
 * domain's core calls for, the core CQ and its wait fd, receive buffers, and the counts of
 * what the adapters refuse or drop.
 */
#include "config.h"

#include <inttypes.h>
#include <string.h>
#include <strings.h>

#include "layer/core/core.h"

/* Core CQ depth: enough for every posted buffer and send of a few connections. */
#define LAYER_CORE_CQ_SIZE 8192

/* Receive buffers added to the pool at a time: an endpoint posts few until traffic asks for
 * more (core_msg_rx.c), and a chunk's buffers are touched as it is carved. */
#define LAYER_CORE_BUF_CHUNK 16

/*
 * The core CQ gets a wait fd only once a CQ or counter that can block is bound: with
 * FI_WAIT_FD, tcp keeps an epoll set of every socket, and each message then costs an epoll
 * wakeup in the sender's kernel path, epoll_wait instead of poll on each progress call and
 * a signal write that wakes the set (measured: ~1 us of an 8-byte half round trip over
 * tcp). Without one, tcp polls its sockets with poll(), as under rxm. Binding comes before
 * fi_enable (the endpoint refuses it after), so the core CQ is replaced before any core
 * endpoint is bound to it.
 */
int layer_core_open_cq(struct layer_core *core, enum fi_wait_obj wait_obj, size_t size,
		       struct fid_cq **cq)
{
	struct fi_cq_attr cq_attr = {
		.size = size,
		.format = core->ops->cq_format,
		.wait_obj = wait_obj,
	};

	return fi_cq_open(core->domain->core_domain, &cq_attr, cq, core);
}

/* fresh, opened with a wait fd, replaces old (closed): its fd in *fd; else fresh is closed. */
static int layer_core_swap_waitable(struct fid *fresh, struct fid *old, int *fd)
{
	int ret = fi_control(fresh, FI_GETWAIT, fd);

	if (ret) {
		*fd = -1;
		fi_close(fresh);
		return ret;
	}
	fi_close(old);
	return 0;
}

/*
 * The core EQ gets a wait fd only when a caller may sleep, as the CQ does: from libfabric
 * 1.18 on, tcp puts its domain's epoll set in the wait set of every EQ that has one, and the
 * kernel refuses a set nested in more than 500 others (EINVAL): one process's 500th endpoint
 * could not connect. Nothing is bound to the EQ before fi_enable, so it is replaced whole.
 */
static int layer_core_eq_wait(struct layer_core *core)
{
	struct fi_eq_attr eq_attr = { .wait_obj = FI_WAIT_FD };
	struct fid_eq *eq;
	int ret;

	if (core->eq_fd >= 0)
		return 0;
	ret = fi_eq_open(core->domain->fabric->core_fabric, &eq_attr, &eq, core);
	if (ret)
		return ret;
	ret = layer_core_swap_waitable(&eq->fid, &core->eq->fid, &core->eq_fd);
	if (!ret)
		core->eq = eq;
	return ret;
}

int layer_core_cq_wait(struct layer_core *core)
{
	int ret;

	ret = layer_core_eq_wait(core);
	if (ret)
		return ret;
	return core->ops->cq_wait ? core->ops->cq_wait(core) : layer_core_cq_wait_fd(core);
}

int layer_core_cq_wait_fd(struct layer_core *core)
{
	struct fid_cq *cq;
	int ret;

	if (core->cq_fd >= 0)
		return 0;
	ret = layer_core_open_cq(core, FI_WAIT_FD, LAYER_CORE_CQ_SIZE, &cq);
	if (ret)
		/* a core without wait objects (shm): blocking reads poll it */
		return ret == -FI_ENOSYS ? 0 : ret;
	ret = layer_core_swap_waitable(&cq->fid, &core->cq->fid, &core->cq_fd);
	if (!ret)
		core->cq = cq;
	return ret;
}

/*
 * libfabric's xnet (net, and tcp from 1.18 on) progresses a domain's sockets in one epoll set
 * and nests it in the wait set of every CQ and EQ that has one. Watching one such fd is
 * watching them all; watching each costs the kernel a path per socket and fd, and it refuses
 * a socket past 100 paths of three levels ("Unable to add fd to epoll").
 */
static bool layer_core_has_domain_wait(const struct fi_info *info)
{
	const char *prov = info->fabric_attr->prov_name;

	if (info->ep_attr->type == FI_EP_DGRAM)
		return false;
	return !strcasecmp(prov, "net") ||
	       (!strcasecmp(prov, "tcp") && !FI_VERSION_LT(fi_version(), FI_VERSION(1, 18)));
}

/* The template of the core's endpoints: the domain's core info, the endpoint's address. */
static int layer_core_set_info(struct layer_core *core, const struct fi_info *info)
{
	struct layer_domain *domain = core->domain;

	core->info = fi_dupinfo(domain->core_info);
	if (!core->info)
		return -FI_ENOMEM;
	/* Peers are named per send; the core's endpoints take no destination from the info. */
	free(core->info->dest_addr);
	core->info->dest_addr = NULL;
	core->info->dest_addrlen = 0;
	if (info->src_addr && info->src_addrlen == domain->addrlen) {
		free(core->info->src_addr);
		core->info->src_addr = malloc(info->src_addrlen);
		if (!core->info->src_addr)
			return -FI_ENOMEM;
		memcpy(core->info->src_addr, info->src_addr, info->src_addrlen);
		core->info->src_addrlen = info->src_addrlen;
	}
	core->iov_limit = UTIL_MIN(core->info->tx_attr->iov_limit, LAYER_IOV_LIMIT + 1);
	core->inject_size = core->info->tx_attr->inject_size;
	core->has_virt_addr = core->info->domain_attr->mr_mode & FI_MR_VIRT_ADDR;
	core->has_domain_wait = layer_core_has_domain_wait(core->info);
	return 0;
}

int layer_core_open(struct layer_domain *domain, const struct fi_info *info,
		    const struct layer_core_upcalls *up, void *up_arg, struct layer_core **core_out)
{
	struct fi_eq_attr eq_attr = { .wait_obj = FI_WAIT_NONE };
	struct layer_core *core;
	int ret;

	core = domain->core_info->ep_attr->type == FI_EP_MSG ? layer_core_msg_alloc() :
							       layer_core_rdm_alloc();
	if (!core)
		return -FI_ENOMEM;
	core->domain = domain;
	core->up = up;
	core->up_arg = up_arg;
	core->cq_fd = -1;
	core->eq_fd = -1;
	/*
	 * Direct receive posts the header only, and a payload that waits for its completion
	 * gets an allocation of its size unless a record's room holds it: buffers are records.
	 */
	if (domain->has_direct_recv)
		core->buf_size = LAYER_RECORD_SIZE;
	else
		core->buf_size = LAYER_HDR_SIZE + UTIL_MAX(layer_settings.eager_size,
							   (size_t) LAYER_INJECT_SIZE);
	core->direct_max = UTIL_MAX(layer_settings.direct_eager_size, core->buf_size);
	core->rma_direct_max = domain->has_direct_recv ?
			       UTIL_MAX(layer_settings.rma_eager_size, core->direct_max) :
			       core->direct_max;

	ret = layer_core_set_info(core, info);
	if (ret)
		goto err_free_info;
	ret = util_bufpool_init(&core->buf_pool, sizeof(struct layer_buf) + core->buf_size, 64,
				LAYER_CORE_BUF_CHUNK, 0);
	if (ret)
		goto err_free_info;
	/* Without a wait fd until an object that blocks is bound (layer_core_cq_wait). */
	ret = layer_core_open_cq(core, FI_WAIT_NONE, LAYER_CORE_CQ_SIZE, &core->cq);
	if (ret)
		goto err_fini_pool;
	/* Likewise for the EQ (layer_core_eq_wait). */
	ret = fi_eq_open(domain->fabric->core_fabric, &eq_attr, &core->eq, core);
	if (ret)
		goto err_close_cq;
	*core_out = core;
	return 0;

err_close_cq:
	fi_close(&core->cq->fid);
err_fini_pool:
	util_bufpool_fini(&core->buf_pool);
err_free_info:
	fi_freeinfo(core->info);
	free(core);
	return ret;
}

void layer_core_free(struct layer_core *core)
{
	fi_close(&core->cq->fid);
	fi_close(&core->eq->fid);
	util_bufpool_fini(&core->buf_pool);
	fi_freeinfo(core->info);
	free(core);
}

void layer_core_refused(struct layer_core *core, const char *what)
{
	/* Warned once per endpoint, then counted: a peer with a wrong key cannot flood the log. */
	FI_LOG(&layer_prov, core->refused_cnt ? FI_LOG_INFO : FI_LOG_WARN, FI_LOG_EP_CTRL,
	       "refusing %s: its authorization key is not one the endpoint accepts (%" PRIu64
	       " refused before)\n", what, core->refused_cnt);
	core->refused_cnt++;
}

void layer_core_dropped(struct layer_core *core, const struct layer_buf *buf, const char *why)
{
	const struct layer_hdr *hdr = layer_buf_hdr(buf);

	/* Warned once per endpoint, then counted: a bad peer cannot flood the log. */
	FI_LOG(&layer_prov, core->dropped_cnt ? FI_LOG_INFO : FI_LOG_WARN, FI_LOG_EP_DATA,
	       "dropping a message (%zu bytes, version %u, op %s): %s; %" PRIu64
	       " dropped before\n", buf->len, buf->len >= 2 ? hdr->version : 0,
	       layer_op_str(buf->len >= 2 ? hdr->op : LAYER_OP_MAX), why, core->dropped_cnt);
	core->dropped_cnt++;
}
