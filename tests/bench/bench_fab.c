/*
 * fi_layer_bench: opening and closing one side's endpoint, and the address exchange.
 *
 * An RDM provider gets an AV: each side inserts the address the other one sent through the
 * pipe. A "-msg" name ("tcp-msg") gets a connected FI_EP_MSG endpoint of its core instead,
 * the reference for what the core itself can do: the server listens on a passive endpoint
 * and sends its address through the pipe, the client connects, and both wait for
 * FI_CONNECTED on an EQ. After that both kinds run the same tests through the same calls.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include <rdma/fi_errno.h>

#include "bench.h"

/* Sent through the pipe ahead of the address, so both sides agree on what they run. */
struct peer_hdr {
	int32_t status; /* 0, or the negative fi_errno that stopped this side */
	uint32_t addrlen;
	uint32_t window;
	uint32_t has_tagged;
	uint64_t max_msg_size;
	uint64_t rx_depth;
};

/* How long a side sleeps between EQ reads while a connection forms. */
#define EQ_POLL_US 100
/* Check that the server lives every this many EQ polls (about a tenth of a second). */
#define EQ_LIVENESS_POLLS 1024

bool prov_is_msg_ep(const char *prov)
{
	size_t len = strlen(prov), slen = strlen(MSG_EP_SUFFIX);

	return len > slen && !strcasecmp(prov + len - slen, MSG_EP_SUFFIX);
}

void fab_err(const struct fab *f, const char *call, int ret)
{
	fprintf(stderr, "%s: %s %s: %s: %s (%d)\n", BENCH_NAME, f->prov, f->role, call,
		fi_strerror(ret < 0 ? -ret : ret), ret);
}

static int fab_getinfo(const struct fab *f, bool tagged, bool manual, size_t rx_size,
		       bool on_loopback, struct fi_info **info)
{
	struct fi_info *hints;
	int ret;

	hints = bench_hints(f->core, FI_MSG | (tagged ? FI_TAGGED : 0),
			    f->is_msg_ep ? FI_EP_MSG : FI_EP_RDM, MR_MODE_ACCEPTED, manual);
	if (!hints)
		return -FI_ENOMEM;
	/* fabtests leaves threading to the provider: usually FI_THREAD_SAFE, with its locks */
	if (opt.fabtests)
		hints->domain_attr->threading = FI_THREAD_UNSPEC;
	hints->rx_attr->size = rx_size;
	/* on the loopback, a MSG endpoint's port is the passive endpoint's, or the client's own */
	ret = bench_getinfo(hints, on_loopback, info);
	fi_freeinfo(hints);
	return ret;
}

static int fab_reg(struct fab *f, void *buf, uint64_t key, struct fid_mr **mr, void **desc)
{
	int ret;

	ret = fi_mr_reg(f->domain, buf, f->buf_size, FI_SEND | FI_RECV, 0, key, 0, mr, NULL);
	if (ret) {
		fab_err(f, "fi_mr_reg", ret);
		return ret;
	}
	if (f->info->domain_attr->mr_mode & FI_MR_ENDPOINT) {
		ret = fi_mr_bind(*mr, &f->ep->fid, 0);
		if (ret) {
			fab_err(f, "fi_mr_bind", ret);
			return ret;
		}
		ret = fi_mr_enable(*mr);
		if (ret) {
			fab_err(f, "fi_mr_enable", ret);
			return ret;
		}
	}
	*desc = fi_mr_desc(*mr);
	return 0;
}

/* Once the endpoint exists: FI_MR_ENDPOINT binds regions to it. */
static int fab_reg_bufs(struct fab *f)
{
	int ret;

	if (!(f->info->domain_attr->mr_mode & FI_MR_LOCAL))
		return 0;
	ret = fab_reg(f, f->tx_buf, 1, &f->tx_mr, &f->tx_desc);
	if (ret)
		return ret;
	return fab_reg(f, f->rx_buf, 2, &f->rx_mr, &f->rx_desc);
}

void fab_close(struct fab *f)
{
	if (f->tx_mr)
		fi_close(&f->tx_mr->fid);
	if (f->rx_mr)
		fi_close(&f->rx_mr->fid);
	if (f->ep)
		fi_close(&f->ep->fid);
	if (f->pep)
		fi_close(&f->pep->fid);
	if (f->av)
		fi_close(&f->av->fid);
	if (f->cq)
		fi_close(&f->cq->fid);
	if (f->rx_cq)
		fi_close(&f->rx_cq->fid);
	if (f->eq)
		fi_close(&f->eq->fid);
	bench_close_domain(f->domain, f->fabric, f->info);
	free(f->tx_buf);
	free(f->rx_buf);
	free(f->tx_ctx);
	free(f->rx_ctx);
	f->tx_mr = f->rx_mr = NULL;
	f->ep = NULL;
	f->pep = NULL;
	f->av = NULL;
	f->cq = NULL;
	f->rx_cq = NULL;
	f->eq = NULL;
	f->domain = NULL;
	f->fabric = NULL;
	f->info = NULL;
	f->tx_buf = f->rx_buf = NULL;
	f->tx_ctx = f->rx_ctx = NULL;
}

/* fi_getinfo in order of preference; -FI_ENODATA when nothing fits. */
static int fab_choose_info(struct fab *f)
{
	/* the matching tests post N receives at once, and the unexpected one a signal too */
	size_t rx_want = bench_run.max_count ? bench_run.max_count + 1 : 0;
	int ret = -FI_ENODATA;

	/*
	 * Manual data progress first: we poll the CQ all the time anyway, and a provider's own
	 * progress thread (sockets) otherwise competes with the poller for the pinned CPU.
	 * Without FI_TAGGED the FI_MSG rows still run; the tagged ones print n/a. A provider that
	 * refuses a receive queue that deep shows n/a for the N it cannot hold.
	 */
	for (int i = 0; i < 8 && ret == -FI_ENODATA; i++) {
		bool tagged = !(i & 4), manual = !(i & 2), deep = !(i & 1);

		if (tagged && !opt.run_tagged && !opt.run_match)
			continue;
		if (deep && !rx_want)
			continue;
		ret = fab_getinfo(f, tagged, manual, deep ? rx_want : 0, true, &f->info);
	}
	if (ret) {
		if (ret != -FI_ENODATA)
			fab_err(f, "fi_getinfo", ret);
		return ret;
	}
	/*
	 * 127.0.0.1 names an address only for IP formats. Others (shm's FI_ADDR_STR) make it the
	 * same name for client and server; asked without a node, the provider picks a name of
	 * its own for each process.
	 */
	if (!f->is_msg_ep && !bench_is_ip_format(f->info->addr_format)) {
		bool tagged = f->info->caps & FI_TAGGED;
		bool manual = f->info->domain_attr->data_progress == FI_PROGRESS_MANUAL;
		size_t rx_size = f->info->rx_attr->size >= rx_want ? rx_want : 0;

		fi_freeinfo(f->info);
		f->info = NULL;
		ret = fab_getinfo(f, tagged, manual, rx_size, false, &f->info);
		if (ret) {
			fab_err(f, "fi_getinfo", ret);
			return ret == -FI_ENODATA ? -FI_EOTHER : ret;
		}
	}
	return 0;
}

/* One CQ for both directions, or (--fabtests) one for each. */
static int fab_bind_cqs(struct fab *f)
{
	int ret;

	ret = fi_ep_bind(f->ep, &f->cq->fid, f->rx_cq ? FI_TRANSMIT : FI_TRANSMIT | FI_RECV);
	if (!ret && f->rx_cq)
		ret = fi_ep_bind(f->ep, &f->rx_cq->fid, FI_RECV);
	if (ret)
		fab_err(f, "fi_ep_bind(cq)", ret);
	return ret;
}

/* The RDM side: an AV for the peer's address, and the endpoint enabled. */
static int fab_open_rdm(struct fab *f)
{
	struct fi_av_attr av_attr = {0};
	int ret;

	av_attr.type = FI_AV_TABLE;
	av_attr.count = 2;
	ret = fi_av_open(f->domain, &av_attr, &f->av, NULL);
	if (ret) {
		fab_err(f, "fi_av_open", ret);
		return ret;
	}
	ret = fi_endpoint(f->domain, f->info, &f->ep, NULL);
	if (ret) {
		fab_err(f, "fi_endpoint", ret);
		return ret;
	}
	ret = fi_ep_bind(f->ep, &f->av->fid, 0);
	if (ret) {
		fab_err(f, "fi_ep_bind(av)", ret);
		return ret;
	}
	ret = fab_bind_cqs(f);
	if (ret)
		return ret;
	ret = fi_enable(f->ep);
	if (ret)
		fab_err(f, "fi_enable", ret);
	return ret;
}

/* A MSG endpoint bound to the EQ and the CQ, enabled: the client's, or one the server accepts. */
static int fab_enable_msg_ep(struct fab *f, struct fi_info *info)
{
	int ret;

	ret = fi_endpoint(f->domain, info, &f->ep, NULL);
	if (ret) {
		fab_err(f, "fi_endpoint", ret);
		return ret;
	}
	ret = fi_ep_bind(f->ep, &f->eq->fid, 0);
	if (ret) {
		fab_err(f, "fi_ep_bind(eq)", ret);
		return ret;
	}
	ret = fab_bind_cqs(f);
	if (ret)
		return ret;
	ret = fi_enable(f->ep);
	if (ret)
		fab_err(f, "fi_enable", ret);
	return ret;
}

/* The MSG side: an EQ; the server listens now, the client opens its endpoint. */
static int fab_open_msg(struct fab *f)
{
	struct fi_eq_attr eq_attr = {0};
	int ret;

	eq_attr.wait_obj = FI_WAIT_NONE;
	ret = fi_eq_open(f->fabric, &eq_attr, &f->eq, NULL);
	if (ret) {
		fab_err(f, "fi_eq_open", ret);
		return ret;
	}
	if (!f->is_server)
		return fab_enable_msg_ep(f, f->info);

	ret = fi_passive_ep(f->fabric, f->info, &f->pep, NULL);
	if (ret) {
		fab_err(f, "fi_passive_ep", ret);
		return ret;
	}
	ret = fi_pep_bind(f->pep, &f->eq->fid, 0);
	if (ret) {
		fab_err(f, "fi_pep_bind", ret);
		return ret;
	}
	ret = fi_listen(f->pep);
	if (ret)
		fab_err(f, "fi_listen", ret);
	return ret;
}

/* Returns -FI_ENODATA, quietly, when the provider is not available. fab_close() cleans up. */
int fab_open(struct fab *f, size_t buf_size)
{
	struct fi_cq_attr cq_attr = {0};
	size_t window = opt.window;
	const char *failed;
	size_t core_len;
	int ret;

	f->is_msg_ep = prov_is_msg_ep(f->prov);
	core_len = strlen(f->prov) - (f->is_msg_ep ? strlen(MSG_EP_SUFFIX) : 0);
	if (core_len >= sizeof(f->core)) {
		fprintf(stderr, "%s: provider name too long: %s\n", BENCH_NAME, f->prov);
		return -FI_EINVAL;
	}
	memcpy(f->core, f->prov, core_len);
	f->core[core_len] = '\0';

	ret = fab_choose_info(f);
	if (ret)
		return ret;
	f->has_tagged = f->info->caps & FI_TAGGED;
	f->max_msg_size = f->info->ep_attr->max_msg_size;
	f->rx_depth = f->info->rx_attr->size;
	if (f->info->tx_attr->size && f->info->tx_attr->size < window)
		window = f->info->tx_attr->size;
	if (f->info->rx_attr->size && f->info->rx_attr->size < window)
		window = f->info->rx_attr->size;
	f->window = window;

	ret = bench_open_domain(f->info, &f->fabric, &f->domain, &failed);
	if (ret) {
		fab_err(f, failed, ret);
		return ret;
	}
	cq_attr.format = FI_CQ_FORMAT_TAGGED;
	cq_attr.wait_obj = FI_WAIT_NONE;
	/* never more than 2 windows + 2 outstanding, or one round of a matching test */
	cq_attr.size = 4 * opt.window + 64 + bench_run.max_count;
	ret = fi_cq_open(f->domain, &cq_attr, &f->cq, NULL);
	if (!ret && opt.fabtests)
		ret = fi_cq_open(f->domain, &cq_attr, &f->rx_cq, NULL);
	if (ret) {
		fab_err(f, "fi_cq_open", ret);
		return ret;
	}
	f->inject_size = opt.fabtests ? f->info->tx_attr->inject_size : 0;
	/* --fabtests: the client's first message carries its address */
	if (opt.fabtests && buf_size < sizeof(f->peer_addr))
		buf_size = sizeof(f->peer_addr);
	ret = f->is_msg_ep ? fab_open_msg(f) : fab_open_rdm(f);
	if (ret)
		return ret;

	/*
	 * Contexts stay valid until their completion, as FI_CONTEXT requires: a window of them
	 * for the bandwidth test, one per message of a round for the matching tests.
	 */
	f->nctx = opt.window > bench_run.max_count + 1 ? opt.window : bench_run.max_count + 1;
	f->tx_ctx = calloc(f->nctx, sizeof(*f->tx_ctx));
	f->rx_ctx = calloc(f->nctx, sizeof(*f->rx_ctx));
	f->buf_size = buf_size;
	if (!f->tx_ctx || !f->rx_ctx || posix_memalign((void **) &f->tx_buf, 4096, buf_size) ||
	    posix_memalign((void **) &f->rx_buf, 4096, buf_size)) {
		fab_err(f, "allocating buffers", -FI_ENOMEM);
		return -FI_ENOMEM;
	}
	/* touch every page now, so no page fault lands in a timed loop */
	memset(f->tx_buf, 0xa5, buf_size);
	memset(f->rx_buf, 0, buf_size);
	/* the server's MSG endpoint comes with the connection */
	return f->ep ? fab_reg_bufs(f) : 0;
}

/*
 * Tell the peer our state and address; status != 0 just tells it to give up. An RDM side
 * sends its endpoint's name, a MSG server its listening address, a MSG client none.
 */
int fab_send_hdr(const struct fab *f, int fd, int status)
{
	char addr[256];
	size_t addrlen = sizeof(addr);
	struct peer_hdr hdr = {.status = status};
	int ret = 0;

	if (!status && f->pep)
		ret = fi_getname(&f->pep->fid, addr, &addrlen);
	else if (!status && !f->is_msg_ep)
		ret = fi_getname(&f->ep->fid, addr, &addrlen);
	else
		addrlen = 0;
	if (ret) {
		fab_err(f, "fi_getname", ret);
		hdr.status = ret;
	}
	if (!hdr.status) {
		hdr.addrlen = (uint32_t) addrlen;
		hdr.window = (uint32_t) f->window;
		hdr.has_tagged = f->has_tagged;
		hdr.max_msg_size = f->max_msg_size;
		hdr.rx_depth = f->rx_depth;
	}
	if (write_all(fd, &hdr, sizeof(hdr)) || write_all(fd, addr, hdr.addrlen)) {
		/* a peer that gave up too (provider not available) is no news */
		if (!hdr.status)
			fprintf(stderr, "%s: %s %s: writing the address pipe: %s\n", BENCH_NAME,
				f->prov, f->role, strerror(errno));
		return hdr.status ? hdr.status : -FI_EIO;
	}
	return hdr.status;
}

/* 0 counts as unlimited */
static size_t min_depth(size_t a, size_t b)
{
	if (!a || !b)
		return a ? a : b;
	return a < b ? a : b;
}

/* Read the peer's header and address, insert or keep it, agree on the common parameters. */
int fab_recv_hdr(struct fab *f, int fd)
{
	char addr[256];
	struct peer_hdr hdr;
	int ret;

	if (read_all(fd, &hdr, sizeof(hdr)))
		return -FI_EIO; /* the peer died or gave up; it said why */
	if (hdr.status)
		return hdr.status;
	if (hdr.addrlen > sizeof(addr) || read_all(fd, addr, hdr.addrlen))
		return -FI_EIO;
	/* --fabtests: the server learns the client's address from its first message */
	if (!f->is_msg_ep && !(opt.fabtests && f->is_server)) {
		ret = fi_av_insert(f->av, addr, 1, &f->peer, 0, NULL);
		if (ret != 1) {
			fab_err(f, "fi_av_insert", ret < 0 ? ret : -FI_EINVAL);
			return ret < 0 ? ret : -FI_EINVAL;
		}
	} else if (!f->is_server) {
		if (!hdr.addrlen) {
			fab_err(f, "reading the server's address", -FI_EINVAL);
			return -FI_EINVAL;
		}
		memcpy(f->peer_addr, addr, hdr.addrlen);
		f->peer_addrlen = hdr.addrlen;
	}
	if (hdr.window < f->window)
		f->window = hdr.window;
	f->has_tagged = f->has_tagged && hdr.has_tagged;
	if (hdr.max_msg_size < f->max_msg_size)
		f->max_msg_size = hdr.max_msg_size;
	f->rx_depth = min_depth(f->rx_depth, (size_t) hdr.rx_depth);
	return 0;
}

/* Waits for one connection event; the alarm bounds the wait. */
static int eq_wait(struct fab *f, uint32_t want, struct fi_eq_cm_entry *entry)
{
	struct fi_eq_err_entry err;
	uint32_t event;
	ssize_t ret;

	for (unsigned i = 1;; i++) {
		ret = fi_eq_read(f->eq, &event, entry, sizeof(*entry), 0);
		if (ret == -FI_EAGAIN) {
			if (i % EQ_LIVENESS_POLLS == 0 && check_peer_alive(f))
				return -FI_EIO;
			usleep(EQ_POLL_US);
			continue;
		}
		if (ret == -FI_EAVAIL) {
			memset(&err, 0, sizeof(err));
			if (fi_eq_readerr(f->eq, &err, 0) > 0) {
				fprintf(stderr, "%s: %s %s: connection error: %s (prov_errno %d)\n",
					BENCH_NAME, f->prov, f->role, fi_strerror(err.err),
					err.prov_errno);
				return err.err ? -err.err : -FI_EIO;
			}
		}
		if (ret < 0) {
			fab_err(f, "fi_eq_read", (int) ret);
			return (int) ret;
		}
		if (event != want) {
			fprintf(stderr, "%s: %s %s: got %s while waiting for %s\n", BENCH_NAME,
				f->prov, f->role, fi_tostr(&event, FI_TYPE_EQ_EVENT),
				want == FI_CONNREQ ? "FI_CONNREQ" : "FI_CONNECTED");
			if (event == FI_CONNREQ)
				fi_freeinfo(entry->info);
			return -FI_EOTHER;
		}
		return 0;
	}
}

/* MSG endpoints only: the client connects to the address it read, the server accepts. */
int fab_connect(struct fab *f)
{
	struct fi_eq_cm_entry entry;
	int ret;

	if (!f->is_msg_ep)
		return opt.fabtests ? exchange_names(f) : 0;
	if (!f->is_server) {
		ret = fi_connect(f->ep, f->peer_addr, NULL, 0);
		if (ret) {
			fab_err(f, "fi_connect", ret);
			return ret;
		}
		return eq_wait(f, FI_CONNECTED, &entry);
	}

	ret = eq_wait(f, FI_CONNREQ, &entry);
	if (ret)
		return ret;
	ret = fab_enable_msg_ep(f, entry.info);
	if (!ret)
		ret = fab_reg_bufs(f);
	if (!ret) {
		ret = fi_accept(f->ep, NULL, 0);
		if (ret)
			fab_err(f, "fi_accept", ret);
	}
	/* a refused client hears so at once instead of waiting for its alarm */
	if (ret)
		fi_reject(f->pep, entry.info->handle, NULL, 0);
	fi_freeinfo(entry.info);
	if (ret)
		return ret;
	return eq_wait(f, FI_CONNECTED, &entry);
}

/* What fi_getinfo chose and both sides agreed on: the first thing to check on odd numbers. */
void fab_describe(const struct fab *f)
{
	const struct fi_info *i = f->info;

	fprintf(stderr,
		"%s: %s: provider %s, %s, fabric %s, domain %s, %s, data progress %s, "
		"mr_mode 0x%x, window %zu, receive queue %zu%s\n",
		BENCH_NAME, f->prov, i->fabric_attr->prov_name,
		f->is_msg_ep ? "FI_EP_MSG" : "FI_EP_RDM", i->fabric_attr->name,
		i->domain_attr->name, f->has_tagged ? "FI_MSG|FI_TAGGED" : "FI_MSG",
		i->domain_attr->data_progress == FI_PROGRESS_MANUAL ? "manual" : "auto",
		(unsigned) i->domain_attr->mr_mode, f->window, f->rx_depth,
		opt.fabtests ? ", fabtests set-up (tx and rx CQs, fi_inject, names in messages)" :
			       "");
}
