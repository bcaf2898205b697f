/*
 * fi_scale_bench: what the server and the client processes share. The fi_info of the provider
 * named, a process's fabric, domain and buffer region, an endpoint with its AV and CQ; errors
 * said on stderr, records sent to the main process.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>

#include "scale_bench.h"

/* What the benchmark accepts: it registers one region per domain when asked for FI_MR_LOCAL. */
#define MR_MODE_ACCEPTED (FI_MR_LOCAL | FI_MR_ALLOCATED | FI_MR_VIRT_ADDR | FI_MR_PROV_KEY)

void fab_err(const struct proc_fab *f, const char *call, int ret)
{
	fprintf(stderr, "%s: %s %s: %s: %s (%d)\n", SCALE_NAME, f->prov, f->role, call,
		fi_strerror(ret < 0 ? -ret : ret), ret);
}

void send_rec(const struct proc_fab *f, struct scale_rec *rec)
{
	/* with the main process gone there is nobody to report to, nor a reason to go on */
	if (write_all(f->rep_fd, rec, sizeof(*rec)))
		_exit(1);
}

void report(const struct proc_fab *f, enum scale_rec_type type)
{
	struct scale_rec rec = {.type = type};

	send_rec(f, &rec);
}

/* ---------------------------------------------------------------- fabric and domain */

/*
 * The first info fi_getinfo offers for the name. A name with ';' is a stack, taken as
 * libfabric gives it; a name without is a core provider used directly, so an answer from a
 * utility provider layered over it ("tcp" -> "tcp;ofi_rxm" on 1.17, whose tcp has no RDM
 * endpoint of its own) does not count: its name goes into *other for the message.
 */
static int getinfo_one(const char *prov, bool manual, bool on_loopback, struct fi_info **out,
		       char *other, size_t other_len)
{
	struct fi_info *hints, *list = NULL, *cur;
	int ret;

	hints = bench_hints(prov, FI_MSG | FI_TAGGED, FI_EP_RDM, MR_MODE_ACCEPTED, manual);
	if (!hints)
		return -FI_ENOMEM;
	ret = bench_getinfo(hints, on_loopback, &list);
	fi_freeinfo(hints);
	if (ret)
		return ret;
	for (cur = list; cur; cur = cur->next)
		if (strchr(prov, ';') || !strcasecmp(cur->fabric_attr->prov_name, prov))
			break;
	if (!cur) {
		snprintf(other, other_len, "%s", list->fabric_attr->prov_name);
		fi_freeinfo(list);
		return -FI_ENODATA;
	}
	*out = fi_dupinfo(cur);
	fi_freeinfo(list);
	return *out ? 0 : -FI_ENOMEM;
}

/*
 * Manual progress first: the processes read their CQs anyway, and idle peers are meant to
 * make no libfabric call at all; a provider that offers none runs with its own. Reports
 * REC_UNAVAIL and returns -FI_ENODATA when nothing fits.
 */
static int choose_info(struct proc_fab *f)
{
	char other[SCALE_PROV_LEN] = "";
	int ret = -FI_ENODATA;

	for (int i = 0; i < 2 && ret == -FI_ENODATA; i++)
		ret = getinfo_one(f->prov, i == 0, true, &f->info, other, sizeof(other));
	if (ret == -FI_ENODATA) {
		struct scale_rec rec = {.type = REC_UNAVAIL};

		if (other[0])
			snprintf(rec.text, sizeof(rec.text), "offered only as %s", other);
		else
			snprintf(rec.text, sizeof(rec.text), "no FI_EP_RDM with FI_TAGGED");
		send_rec(f, &rec);
		return ret;
	}
	if (ret) {
		fab_err(f, "fi_getinfo", ret);
		return ret;
	}
	/*
	 * 127.0.0.1 names an address only for IP formats; others (shm's FI_ADDR_STR) would give
	 * every process the same name: asked without a node, each picks its own.
	 */
	if (!bench_is_ip_format(f->info->addr_format)) {
		bool manual = f->info->domain_attr->data_progress == FI_PROGRESS_MANUAL;

		fi_freeinfo(f->info);
		f->info = NULL;
		ret = getinfo_one(f->prov, manual, false, &f->info, other, sizeof(other));
		if (ret) {
			fab_err(f, "fi_getinfo", ret);
			return ret == -FI_ENODATA ? -FI_EOTHER : ret;
		}
	}
	return 0;
}

/* Fabric, domain, and the process's buffer region (registered when the provider asks). */
int proc_fab_open(struct proc_fab *f, size_t region_size)
{
	const char *failed;
	int ret;

	ret = choose_info(f);
	if (ret)
		return ret;
	ret = bench_open_domain(f->info, &f->fabric, &f->domain, &failed);
	if (ret) {
		fab_err(f, failed, ret);
		return ret;
	}
	f->region_size = region_size;
	if (posix_memalign((void **) &f->region, 4096, region_size)) {
		f->region = NULL;
		fab_err(f, "allocating buffers", -FI_ENOMEM);
		return -FI_ENOMEM;
	}
	memset(f->region, 0, region_size);
	if (!(f->info->domain_attr->mr_mode & FI_MR_LOCAL))
		return 0;
	ret = fi_mr_reg(f->domain, f->region, region_size, FI_SEND | FI_RECV, 0, 1, 0, &f->mr,
			NULL);
	if (ret) {
		fab_err(f, "fi_mr_reg", ret);
		return ret;
	}
	f->desc = fi_mr_desc(f->mr);
	return 0;
}

void proc_fab_close(struct proc_fab *f)
{
	if (f->mr)
		fi_close(&f->mr->fid);
	bench_close_domain(f->domain, f->fabric, f->info);
	free(f->region);
}

/* An endpoint with its AV and CQ, enabled. */
int open_ep(struct proc_fab *f, size_t av_count, size_t cq_size, struct fid_av **av,
	    struct fid_cq **cq, struct fid_ep **ep)
{
	struct fi_av_attr av_attr = {.type = FI_AV_TABLE, .count = av_count};
	struct fi_cq_attr cq_attr = {
		.format = FI_CQ_FORMAT_MSG, .wait_obj = FI_WAIT_NONE, .size = cq_size};
	int ret;

	ret = fi_av_open(f->domain, &av_attr, av, NULL);
	if (ret) {
		fab_err(f, "fi_av_open", ret);
		return ret;
	}
	ret = fi_cq_open(f->domain, &cq_attr, cq, NULL);
	if (ret) {
		fab_err(f, "fi_cq_open", ret);
		return ret;
	}
	ret = fi_endpoint(f->domain, f->info, ep, NULL);
	if (ret) {
		fab_err(f, "fi_endpoint", ret);
		return ret;
	}
	ret = fi_ep_bind(*ep, &(*av)->fid, 0);
	if (ret) {
		fab_err(f, "fi_ep_bind(av)", ret);
		return ret;
	}
	ret = fi_ep_bind(*ep, &(*cq)->fid, FI_TRANSMIT | FI_RECV);
	if (ret) {
		fab_err(f, "fi_ep_bind(cq)", ret);
		return ret;
	}
	ret = fi_enable(*ep);
	if (ret)
		fab_err(f, "fi_enable", ret);
	return ret;
}

/* In the order fi_endpoint(3) asks: the endpoint before what it is bound to. */
void close_ep(struct fid_av *av, struct fid_cq *cq, struct fid_ep *ep)
{
	if (ep)
		fi_close(&ep->fid);
	if (av)
		fi_close(&av->fid);
	if (cq)
		fi_close(&cq->fid);
}

int read_cq_error(const struct proc_fab *f, struct fid_cq *cq, struct fi_cq_err_entry *err)
{
	ssize_t ret;

	memset(err, 0, sizeof(*err));
	ret = fi_cq_readerr(cq, err, 0);
	if (ret == -FI_EAGAIN)
		return 0;
	if (ret < 0) {
		fab_err(f, "fi_cq_readerr", (int) ret);
		return (int) ret;
	}
	return 1;
}
