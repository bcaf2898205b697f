/*
 * fi_layer_bench: FI_MSG (and FI_TAGGED) latency and bandwidth of libfabric RDM providers,
 * side by side in one run, with the ratio of the first provider to the second.
 *
 * Process model. The main process never calls into libfabric: a provider under development
 * may crash or hang, and that must cost one measurement, not the whole table. For every
 * (repeat, provider) run it forks a client; the client forks the server, both open an RDM
 * endpoint on 127.0.0.1, swap addresses through pipes, run the tests and exit. The client
 * streams one record per test to the main process, so a run that dies half way still
 * delivers the tests it finished, and the test it died in is marked failed and skipped in
 * later repeats.
 *
 * Everything is bounded: both children re-arm alarm() for every test, die with their parent
 * (PR_SET_PDEATHSIG), the main process is the subreaper of orphaned servers and reaps every
 * descendant after each run, and it kills a client that stays silent too long.
 */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_tagged.h>

#define BENCH_NAME "fi_layer_bench"
#define DEFAULT_PROVS "tcp;ofi_layer,tcp;ofi_rxm"
#define BENCH_NODE "127.0.0.1"
#define BENCH_API FI_VERSION(1, 17)

#define MAX_PROVS 8
#define MAX_SIZES 16
#define MAX_TESTS (2 * 2 * MAX_SIZES) /* api x kind x size */
#define MAX_REPEATS 100
#define MAX_MSG_SIZE (1UL << 30)
#define MAX_WINDOW 1024
#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

#define DEFAULT_REPEATS 5
#define DEFAULT_WINDOW 64
#define DEFAULT_TIMEOUT 20

/* Default iterations come from a byte budget so every size takes a similar, short time. */
#define LAT_BUDGET (64UL << 20)
#define LAT_MIN_ITERS 100UL
#define LAT_MAX_ITERS 10000UL
#define BW_BUDGET (512UL << 20)
#define BW_MAX_MSGS 100000UL

#define BENCH_TAG 0x4c41594552ULL /* any constant: every message of a run carries it */
#define ACK_SIZE 4
#define CQ_BATCH 16
/* A waitpid() every this many empty CQ polls notices a dead server without a measurable cost. */
#define LIVENESS_POLLS (1U << 16)

/* What the benchmark accepts; it registers memory whenever the provider asks for FI_MR_LOCAL. */
#define MR_MODE_ACCEPTED                                                                           \
	(FI_MR_LOCAL | FI_MR_ALLOCATED | FI_MR_VIRT_ADDR | FI_MR_PROV_KEY | FI_MR_ENDPOINT)

enum test_api { API_MSG, API_TAGGED };
enum test_kind { KIND_LAT, KIND_BW };

struct test {
	enum test_api api;
	enum test_kind kind;
	size_t size;   /* message size in bytes */
	size_t iters;  /* latency: timed round trips; bandwidth: timed messages */
	size_t warmup; /* latency: untimed round trips; bandwidth: untimed windows */
};

/* Per provider and test, across repeats. */
enum cell_state { CELL_PENDING, CELL_NA, CELL_FAILED };

struct cell {
	enum cell_state state;
	int nsamples;
	double samples[MAX_REPEATS];
};

struct options {
	const char *provs[MAX_PROVS];
	int nprovs;
	int repeats;
	size_t iters; /* 0: from the byte budget */
	size_t sizes[MAX_SIZES];
	int nsizes; /* 0: the default sizes */
	size_t window;
	unsigned timeout; /* seconds per test */
	bool quick;
	bool tagged;
	bool csv;
	bool verbose;
	bool pin;
};

/* Records from a client to the main process: one write() each, atomic on a pipe. */
enum rec_type { REC_BEGIN, REC_RESULT, REC_NA, REC_UNAVAIL, REC_DONE };

struct record {
	int32_t type;
	int32_t test;
	double value;
};

/* Sent through the pipe ahead of the address, so both sides agree on what they run. */
struct peer_hdr {
	int32_t status; /* 0, or the negative fi_errno that stopped this side */
	uint32_t addrlen;
	uint32_t window;
	uint32_t has_tagged;
	uint64_t max_msg_size;
};

/* One side's fabric objects and completion counters. */
struct fab {
	const char *prov;
	const char *role; /* "client" or "server", for messages */
	struct fi_info *info;
	struct fid_fabric *fabric;
	struct fid_domain *domain;
	struct fid_av *av;
	struct fid_cq *cq;
	struct fid_ep *ep;
	struct fid_mr *tx_mr;
	struct fid_mr *rx_mr;
	void *tx_desc;
	void *rx_desc;
	char *tx_buf;
	char *rx_buf;
	size_t buf_size;
	struct fi_context *tx_ctx; /* window entries; a completion with one of these is a send */
	struct fi_context *rx_ctx; /* window entries; anything else is a receive */
	size_t window;		   /* effective: the smaller of both sides' */
	bool has_tagged;	   /* both sides opened the endpoint with FI_TAGGED */
	uint64_t max_msg_size;	   /* the smaller of both sides' */
	fi_addr_t peer;
	uint64_t tx_done; /* send completions so far */
	uint64_t rx_done; /* receive completions so far */
	pid_t watch_pid;  /* client: the server, checked while the CQ stays empty */
	unsigned empty_polls;
};

static struct options opt;
static struct test tests[MAX_TESTS];
static int ntests;
static struct cell cells[MAX_PROVS][MAX_TESTS];
static bool prov_unavail[MAX_PROVS];
static bool prov_failed[MAX_PROVS];
static bool prov_ran[MAX_PROVS];
static int cpus[2] = {-1, -1};
static int cur_repeat;	/* the repeat being run, as the children see it */
static bool yield_idle; /* one CPU for both processes: an idle poller hands it to the peer */

static const size_t default_lat_sizes[] = {8, 4096, 65536, 1048576};
static const size_t default_bw_sizes[] = {65536, 1048576};

static double now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static size_t clamp_size(size_t v, size_t lo, size_t hi)
{
	return v < lo ? lo : v > hi ? hi : v;
}

static void fab_err(const struct fab *f, const char *call, int ret)
{
	fprintf(stderr, "%s: %s %s: %s: %s (%d)\n", BENCH_NAME, f->prov, f->role, call,
		fi_strerror(ret < 0 ? -ret : ret), ret);
}

/* ---------------------------------------------------------------- data path */

static bool is_tx_ctx(const struct fab *f, const void *ctx)
{
	const struct fi_context *c = ctx;

	return c >= f->tx_ctx && c < f->tx_ctx + f->window;
}

static int check_peer_alive(struct fab *f)
{
	int status;

	if (!f->watch_pid || waitpid(f->watch_pid, &status, WNOHANG) != f->watch_pid)
		return 0;
	f->watch_pid = 0;
	fprintf(stderr, "%s: %s client: server exited early (%s %d)\n", BENCH_NAME, f->prov,
		WIFSIGNALED(status) ? "signal" : "status",
		WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
	return -FI_EIO;
}

/* One fi_cq_read; completions only move the counters. Busy polling is what we measure. */
static int cq_poll(struct fab *f)
{
	struct fi_cq_tagged_entry comp[CQ_BATCH];
	struct fi_cq_err_entry err;
	ssize_t ret;

	ret = fi_cq_read(f->cq, comp, CQ_BATCH);
	if (ret > 0) {
		f->empty_polls = 0;
		for (ssize_t i = 0; i < ret; i++) {
			if (is_tx_ctx(f, comp[i].op_context))
				f->tx_done++;
			else
				f->rx_done++;
		}
		return 0;
	}
	if (ret == -FI_EAGAIN) {
		if (yield_idle)
			sched_yield();
		if (++f->empty_polls >= LIVENESS_POLLS) {
			f->empty_polls = 0;
			return check_peer_alive(f);
		}
		return 0;
	}
	if (ret == -FI_EAVAIL) {
		memset(&err, 0, sizeof(err));
		if (fi_cq_readerr(f->cq, &err, 0) > 0) {
			fprintf(stderr,
				"%s: %s %s: completion error: %s (prov_errno %d, len %zu)\n",
				BENCH_NAME, f->prov, f->role, fi_strerror(err.err), err.prov_errno,
				err.len);
			return err.err ? -err.err : -FI_EIO;
		}
	}
	fab_err(f, "fi_cq_read", (int) ret);
	return (int) ret;
}

static int wait_done(struct fab *f, uint64_t tx_target, uint64_t rx_target)
{
	int ret;

	while (f->tx_done < tx_target || f->rx_done < rx_target) {
		ret = cq_poll(f);
		if (ret)
			return ret;
	}
	return 0;
}

/* A full queue (-FI_EAGAIN) drains by reading the CQ, which also drives manual progress. */
static int post_send(struct fab *f, enum test_api api, size_t len, size_t slot)
{
	ssize_t ret;

	for (;;) {
		if (api == API_TAGGED)
			ret = fi_tsend(f->ep, f->tx_buf, len, f->tx_desc, f->peer, BENCH_TAG,
				       &f->tx_ctx[slot]);
		else
			ret = fi_send(f->ep, f->tx_buf, len, f->tx_desc, f->peer, &f->tx_ctx[slot]);
		if (ret != -FI_EAGAIN)
			break;
		ret = cq_poll(f);
		if (ret)
			return (int) ret;
	}
	if (ret)
		fab_err(f, api == API_TAGGED ? "fi_tsend" : "fi_send", (int) ret);
	return (int) ret;
}

static int post_recv(struct fab *f, enum test_api api, size_t len, size_t slot)
{
	ssize_t ret;

	for (;;) {
		if (api == API_TAGGED)
			ret = fi_trecv(f->ep, f->rx_buf, len, f->rx_desc, f->peer, BENCH_TAG, 0,
				       &f->rx_ctx[slot]);
		else
			ret = fi_recv(f->ep, f->rx_buf, len, f->rx_desc, f->peer, &f->rx_ctx[slot]);
		if (ret != -FI_EAGAIN)
			break;
		ret = cq_poll(f);
		if (ret)
			return (int) ret;
	}
	if (ret)
		fab_err(f, api == API_TAGGED ? "fi_trecv" : "fi_recv", (int) ret);
	return (int) ret;
}

/*
 * Ping-pong. Each side posts its next receive before it sends, so no message of the timed
 * loop arrives unexpected, and posts no receive past the last message, so nothing is left
 * to swallow the next test's traffic.
 */
static int run_lat(struct fab *f, const struct test *t, bool initiator, double *result)
{
	size_t total = t->warmup + t->iters;
	uint64_t tx0 = f->tx_done, rx0 = f->rx_done;
	double start = 0;
	int ret;

	if (initiator) {
		for (size_t i = 0; i < total; i++) {
			if (i == t->warmup)
				start = now_us();
			ret = post_recv(f, t->api, t->size, 0);
			if (ret)
				return ret;
			ret = post_send(f, t->api, t->size, 0);
			if (ret)
				return ret;
			ret = wait_done(f, tx0 + i + 1, rx0 + i + 1);
			if (ret)
				return ret;
		}
		*result = (now_us() - start) / (double) t->iters / 2;
		return 0;
	}

	ret = post_recv(f, t->api, t->size, 0);
	if (ret)
		return ret;
	for (size_t i = 0; i < total; i++) {
		/* the previous reply must be complete before its context is reused */
		ret = wait_done(f, tx0 + i, rx0 + i + 1);
		if (ret)
			return ret;
		if (i + 1 < total) {
			ret = post_recv(f, t->api, t->size, 0);
			if (ret)
				return ret;
		}
		ret = post_send(f, t->api, t->size, 0);
		if (ret)
			return ret;
	}
	return wait_done(f, tx0 + total, rx0 + total);
}

/*
 * Streaming, osu_bw style: the sender keeps a window of sends outstanding, then waits for
 * their completions and for a small ack. The receiver posts the next window of receives
 * before it acks, so data always lands in pre-posted buffers. The clock stops at the last
 * ack, i.e. when the receiver holds all data.
 */
static int run_bw(struct fab *f, const struct test *t, bool initiator, double *result)
{
	size_t w = f->window;
	size_t windows = (t->iters + w - 1) / w;
	size_t total = t->warmup + windows;
	uint64_t tx0 = f->tx_done, rx0 = f->rx_done;
	double start = 0;
	int ret;

	if (initiator) {
		ret = post_recv(f, t->api, ACK_SIZE, 0);
		if (ret)
			return ret;
		ret = wait_done(f, tx0, rx0 + 1);
		if (ret)
			return ret;
		for (size_t k = 0; k < total; k++) {
			if (k == t->warmup)
				start = now_us();
			ret = post_recv(f, t->api, ACK_SIZE, 0);
			if (ret)
				return ret;
			for (size_t j = 0; j < w; j++) {
				ret = post_send(f, t->api, t->size, j);
				if (ret)
					return ret;
			}
			ret = wait_done(f, tx0 + (k + 1) * w, rx0 + k + 2);
			if (ret)
				return ret;
		}
		*result = (double) windows * w * t->size / (now_us() - start); /* B/us = MB/s */
		return 0;
	}

	for (size_t k = 0; k <= total; k++) {
		if (k > 0) {
			/* window k-1 received, and the previous ack sent: its context is free */
			ret = wait_done(f, tx0 + k, rx0 + k * w);
			if (ret)
				return ret;
		}
		if (k < total) {
			for (size_t j = 0; j < w; j++) {
				ret = post_recv(f, t->api, t->size, j);
				if (ret)
					return ret;
			}
		}
		ret = post_send(f, t->api, ACK_SIZE, 0);
		if (ret)
			return ret;
	}
	return wait_done(f, tx0 + total + 1, rx0 + total * w);
}

/* ---------------------------------------------------------------- setup and teardown */

static int fab_getinfo(const char *prov, bool tagged, bool manual, bool on_loopback,
		       struct fi_info **info)
{
	struct fi_info *hints;
	int ret;

	hints = fi_allocinfo();
	if (!hints)
		return -FI_ENOMEM;
	hints->caps = FI_MSG | (tagged ? FI_TAGGED : 0);
	hints->mode = FI_CONTEXT;
	hints->ep_attr->type = FI_EP_RDM;
	hints->domain_attr->mr_mode = MR_MODE_ACCEPTED;
	/* one thread per process: let the provider take its lock-free path */
	hints->domain_attr->threading = FI_THREAD_DOMAIN;
	hints->domain_attr->av_type = FI_AV_TABLE;
	if (manual)
		hints->domain_attr->data_progress = FI_PROGRESS_MANUAL;
	hints->fabric_attr->prov_name = strdup(prov);
	if (!hints->fabric_attr->prov_name) {
		fi_freeinfo(hints);
		return -FI_ENOMEM;
	}
	/* FI_SOURCE with no service: bind 127.0.0.1 on an ephemeral port, fi_getname tells it */
	if (on_loopback)
		ret = fi_getinfo(BENCH_API, BENCH_NODE, NULL, FI_SOURCE, hints, info);
	else
		ret = fi_getinfo(BENCH_API, NULL, NULL, 0, hints, info);
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

static void fab_close(struct fab *f)
{
	if (f->tx_mr)
		fi_close(&f->tx_mr->fid);
	if (f->rx_mr)
		fi_close(&f->rx_mr->fid);
	if (f->ep)
		fi_close(&f->ep->fid);
	if (f->av)
		fi_close(&f->av->fid);
	if (f->cq)
		fi_close(&f->cq->fid);
	if (f->domain)
		fi_close(&f->domain->fid);
	if (f->fabric)
		fi_close(&f->fabric->fid);
	if (f->info)
		fi_freeinfo(f->info);
	free(f->tx_buf);
	free(f->rx_buf);
	free(f->tx_ctx);
	free(f->rx_ctx);
	f->tx_mr = f->rx_mr = NULL;
	f->ep = NULL;
	f->av = NULL;
	f->cq = NULL;
	f->domain = NULL;
	f->fabric = NULL;
	f->info = NULL;
	f->tx_buf = f->rx_buf = NULL;
	f->tx_ctx = f->rx_ctx = NULL;
}

static bool is_ip_format(uint32_t addr_format)
{
	return addr_format == FI_SOCKADDR || addr_format == FI_SOCKADDR_IN ||
	       addr_format == FI_SOCKADDR_IN6;
}

/* Returns -FI_ENODATA, quietly, when the provider is not available. fab_close() cleans up. */
static int fab_open(struct fab *f, size_t buf_size)
{
	struct fi_cq_attr cq_attr = {0};
	struct fi_av_attr av_attr = {0};
	size_t window = opt.window;
	int ret;

	/*
	 * Manual data progress first: we poll the CQ all the time anyway, and a provider's own
	 * progress thread (sockets) otherwise competes with the poller for the pinned CPU.
	 * Without FI_TAGGED the FI_MSG rows still run; the tagged ones print n/a.
	 */
	ret = -FI_ENODATA;
	for (int i = 0; i < 4 && ret == -FI_ENODATA; i++) {
		bool tagged = i < 2, manual = !(i & 1);

		if (tagged && !opt.tagged)
			continue;
		ret = fab_getinfo(f->prov, tagged, manual, true, &f->info);
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
	if (!is_ip_format(f->info->addr_format)) {
		bool tagged = f->info->caps & FI_TAGGED;
		bool manual = f->info->domain_attr->data_progress == FI_PROGRESS_MANUAL;

		fi_freeinfo(f->info);
		f->info = NULL;
		ret = fab_getinfo(f->prov, tagged, manual, false, &f->info);
		if (ret) {
			fab_err(f, "fi_getinfo", ret);
			return ret == -FI_ENODATA ? -FI_EOTHER : ret;
		}
	}
	f->has_tagged = f->info->caps & FI_TAGGED;
	f->max_msg_size = f->info->ep_attr->max_msg_size;
	if (f->info->tx_attr->size && f->info->tx_attr->size < window)
		window = f->info->tx_attr->size;
	if (f->info->rx_attr->size && f->info->rx_attr->size < window)
		window = f->info->rx_attr->size;
	f->window = window;

	ret = fi_fabric(f->info->fabric_attr, &f->fabric, NULL);
	if (ret) {
		fab_err(f, "fi_fabric", ret);
		return ret;
	}
	ret = fi_domain(f->fabric, f->info, &f->domain, NULL);
	if (ret) {
		fab_err(f, "fi_domain", ret);
		return ret;
	}
	cq_attr.format = FI_CQ_FORMAT_TAGGED;
	cq_attr.wait_obj = FI_WAIT_NONE;
	cq_attr.size = 4 * opt.window + 64; /* never more than 2 windows + 2 outstanding */
	ret = fi_cq_open(f->domain, &cq_attr, &f->cq, NULL);
	if (ret) {
		fab_err(f, "fi_cq_open", ret);
		return ret;
	}
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
	ret = fi_ep_bind(f->ep, &f->cq->fid, FI_TRANSMIT | FI_RECV);
	if (ret) {
		fab_err(f, "fi_ep_bind(cq)", ret);
		return ret;
	}
	ret = fi_enable(f->ep);
	if (ret) {
		fab_err(f, "fi_enable", ret);
		return ret;
	}

	/* contexts stay valid until their completion, as FI_CONTEXT requires */
	f->tx_ctx = calloc(opt.window, sizeof(*f->tx_ctx));
	f->rx_ctx = calloc(opt.window, sizeof(*f->rx_ctx));
	f->buf_size = buf_size;
	if (!f->tx_ctx || !f->rx_ctx || posix_memalign((void **) &f->tx_buf, 4096, buf_size) ||
	    posix_memalign((void **) &f->rx_buf, 4096, buf_size)) {
		fab_err(f, "allocating buffers", -FI_ENOMEM);
		return -FI_ENOMEM;
	}
	/* touch every page now, so no page fault lands in a timed loop */
	memset(f->tx_buf, 0xa5, buf_size);
	memset(f->rx_buf, 0, buf_size);

	if (f->info->domain_attr->mr_mode & FI_MR_LOCAL) {
		ret = fab_reg(f, f->tx_buf, 1, &f->tx_mr, &f->tx_desc);
		if (ret)
			return ret;
		ret = fab_reg(f, f->rx_buf, 2, &f->rx_mr, &f->rx_desc);
		if (ret)
			return ret;
	}
	return 0;
}

static int write_all(int fd, const void *buf, size_t len)
{
	const char *p = buf;

	while (len) {
		ssize_t n = write(fd, p, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		p += n;
		len -= (size_t) n;
	}
	return 0;
}

/* 0, or -1 on error or end of file (the peer is gone) */
static int read_all(int fd, void *buf, size_t len)
{
	char *p = buf;

	while (len) {
		ssize_t n = read(fd, p, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		p += n;
		len -= (size_t) n;
	}
	return 0;
}

/* Tell the peer our state and address; status != 0 just tells it to give up. */
static int send_hdr(const struct fab *f, int fd, int status)
{
	char addr[256];
	size_t addrlen = sizeof(addr);
	struct peer_hdr hdr = {.status = status};
	int ret;

	if (!status) {
		ret = fi_getname(&f->ep->fid, addr, &addrlen);
		if (ret) {
			fab_err(f, "fi_getname", ret);
			hdr.status = ret;
		}
	}
	if (!hdr.status) {
		hdr.addrlen = (uint32_t) addrlen;
		hdr.window = (uint32_t) f->window;
		hdr.has_tagged = f->has_tagged;
		hdr.max_msg_size = f->max_msg_size;
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

/* Read the peer's header and address, insert it, agree on the common parameters. */
static int recv_hdr(struct fab *f, int fd)
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
	ret = fi_av_insert(f->av, addr, 1, &f->peer, 0, NULL);
	if (ret != 1) {
		fab_err(f, "fi_av_insert", ret < 0 ? ret : -FI_EINVAL);
		return ret < 0 ? ret : -FI_EINVAL;
	}
	if (hdr.window < f->window)
		f->window = hdr.window;
	f->has_tagged = f->has_tagged && hdr.has_tagged;
	if (hdr.max_msg_size < f->max_msg_size)
		f->max_msg_size = hdr.max_msg_size;
	return 0;
}

static size_t max_test_size(void)
{
	size_t max = ACK_SIZE;

	for (int i = 0; i < ntests; i++)
		if (tests[i].size > max)
			max = tests[i].size;
	return max;
}

/* Both sides decide this from the same agreed parameters, so they run the same sequence. */
static bool test_possible(const struct fab *f, const struct test *t)
{
	return (t->api != API_TAGGED || f->has_tagged) && t->size <= f->max_msg_size;
}

static int run_test(struct fab *f, const struct test *t, bool initiator, double *result)
{
	return t->kind == KIND_LAT ? run_lat(f, t, initiator, result)
				   : run_bw(f, t, initiator, result);
}

/* ---------------------------------------------------------------- the two benchmark processes */

static void pin_to(int cpu)
{
	cpu_set_t set;

	if (cpu < 0)
		return;
	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	if (sched_setaffinity(0, sizeof(set), &set))
		fprintf(stderr, "%s: sched_setaffinity(%d): %s (not pinned)\n", BENCH_NAME, cpu,
			strerror(errno));
}

/* Die with the parent, so no benchmark process outlives the one that waits for it. */
static void die_with_parent(pid_t parent)
{
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (getppid() != parent)
		_exit(1);
}

static int server_main(int prov, int rfd, int wfd)
{
	struct fab f = {.prov = opt.provs[prov], .role = "server", .peer = FI_ADDR_UNSPEC};
	double unused;
	int ret;

	/* outlive the client's alarm a little, so a hang is reported by the client */
	alarm(opt.timeout + 5);
	ret = fab_open(&f, max_test_size());
	ret = send_hdr(&f, wfd, ret);
	if (!ret)
		ret = recv_hdr(&f, rfd);
	for (int i = 0; !ret && i < ntests; i++) {
		if (cells[prov][i].state != CELL_PENDING || !test_possible(&f, &tests[i]))
			continue;
		alarm(opt.timeout + 5);
		ret = run_test(&f, &tests[i], false, &unused);
	}
	alarm(opt.timeout + 5);
	if (!ret && write_all(wfd, "d", 1))
		ret = -FI_EIO;
	fab_close(&f);
	return ret == -FI_ENODATA ? 0 : ret ? 1 : 0;
}

static void send_record(int fd, enum rec_type type, int test, double value)
{
	struct record rec = {.type = type, .test = test, .value = value};

	/* if the main process is gone there is nobody left to report to */
	if (write_all(fd, &rec, sizeof(rec)))
		_exit(1);
}

/* Reap the server; kill it if it lingers (it would have died of its alarm anyway). */
static int reap_server(pid_t pid)
{
	int status;

	for (int i = 0; i < 500; i++) {
		pid_t r = waitpid(pid, &status, WNOHANG);

		if (r == pid)
			return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : -1;
		if (r < 0)
			return -1;
		usleep(10000);
	}
	fprintf(stderr, "%s: server did not exit, killing it\n", BENCH_NAME);
	kill(pid, SIGKILL);
	waitpid(pid, &status, 0);
	return -1;
}

/*
 * Close only once the server is through: its last completions may still need our provider
 * (an acknowledgement, a rendezvous read), and with manual progress only our CQ reads move it.
 */
static int wait_server_done(struct fab *f, int fd)
{
	struct pollfd pfd = {.fd = fd, .events = POLLIN};
	pid_t server = f->watch_pid;
	char done;
	int ret;

	/* the server exits right after it says done: the pipe, not waitpid, tells how it ended */
	f->watch_pid = 0;
	for (unsigned i = 1;; i++) {
		ret = cq_poll(f);
		if (ret)
			break;
		if (i % 1024 || poll(&pfd, 1, 0) <= 0)
			continue;
		if (read(fd, &done, 1) != 1) {
			fprintf(stderr, "%s: %s client: server failed after the last test\n",
				BENCH_NAME, f->prov);
			ret = -FI_EIO;
		}
		break;
	}
	f->watch_pid = server;
	return ret;
}

/* What fi_getinfo chose and both sides agreed on: the first thing to check on odd numbers. */
static void describe_fab(const struct fab *f)
{
	const struct fi_info *i = f->info;

	fprintf(stderr,
		"%s: %s: provider %s, fabric %s, domain %s, %s, data progress %s, "
		"mr_mode 0x%x, window %zu\n",
		BENCH_NAME, f->prov, i->fabric_attr->prov_name, i->fabric_attr->name,
		i->domain_attr->name, f->has_tagged ? "FI_MSG|FI_TAGGED" : "FI_MSG",
		i->domain_attr->data_progress == FI_PROGRESS_MANUAL ? "manual" : "auto",
		(unsigned) i->domain_attr->mr_mode, f->window);
}

static int client_main(int prov, int res_fd)
{
	struct fab f = {.prov = opt.provs[prov], .role = "client", .peer = FI_ADDR_UNSPEC};
	int c2s[2], s2c[2];
	double value;
	pid_t server, self = getpid();
	int ret;

	alarm(opt.timeout);
	if (pipe(c2s) || pipe(s2c)) {
		perror(BENCH_NAME ": pipe");
		return 1;
	}
	fflush(NULL);
	server = fork();
	if (server < 0) {
		perror(BENCH_NAME ": fork");
		return 1;
	}
	if (server == 0) {
		close(res_fd);
		close(c2s[1]);
		close(s2c[0]);
		die_with_parent(self);
		pin_to(cpus[1]);
		_exit(server_main(prov, c2s[0], s2c[1]));
	}
	close(c2s[0]);
	close(s2c[1]);
	pin_to(cpus[0]);
	f.watch_pid = server;

	ret = fab_open(&f, max_test_size());
	if (ret == -FI_ENODATA)
		send_record(res_fd, REC_UNAVAIL, -1, 0);
	ret = send_hdr(&f, c2s[1], ret);
	if (!ret)
		ret = recv_hdr(&f, s2c[0]);
	if (!ret && cur_repeat == 0) {
		/* "udp" silently becomes "udp;ofi_rxd": say what the column measures */
		if (strcasecmp(f.info->fabric_attr->prov_name, f.prov))
			fprintf(stderr, "%s: note: \"%s\" runs as \"%s\"\n", BENCH_NAME, f.prov,
				f.info->fabric_attr->prov_name);
		if (opt.verbose)
			describe_fab(&f);
	}
	for (int i = 0; !ret && i < ntests; i++) {
		if (cells[prov][i].state != CELL_PENDING)
			continue;
		if (!test_possible(&f, &tests[i])) {
			send_record(res_fd, REC_NA, i, 0);
			continue;
		}
		send_record(res_fd, REC_BEGIN, i, 0);
		alarm(opt.timeout);
		ret = run_test(&f, &tests[i], true, &value);
		if (!ret)
			send_record(res_fd, REC_RESULT, i, value);
	}
	alarm(opt.timeout);
	if (!ret)
		ret = wait_server_done(&f, s2c[0]);
	if (ret) {
		/* the server may be blocked on a message that will never come */
		if (f.watch_pid)
			kill(f.watch_pid, SIGKILL);
	}
	fab_close(&f);
	close(c2s[1]);
	close(s2c[0]);
	if (f.watch_pid && reap_server(f.watch_pid) && !ret)
		ret = -FI_EIO;
	if (!ret)
		send_record(res_fd, REC_DONE, -1, 0);
	return ret == -FI_ENODATA ? 0 : ret ? 1 : 0;
}

/* ---------------------------------------------------------------- the main process */

static void describe_status(int status, char *buf, size_t len)
{
	if (WIFSIGNALED(status) && WTERMSIG(status) == SIGALRM)
		snprintf(buf, len, "timed out after %u s", opt.timeout);
	else if (WIFSIGNALED(status))
		snprintf(buf, len, "killed by signal %d (%s)", WTERMSIG(status),
			 strsignal(WTERMSIG(status)));
	else
		snprintf(buf, len, "exit status %d", WEXITSTATUS(status));
}

static const char *test_name(const struct test *t)
{
	if (t->kind == KIND_LAT)
		return t->api == API_TAGGED ? "tag_lat_us" : "msg_lat_us";
	return t->api == API_TAGGED ? "tag_bw_MBps" : "msg_bw_MBps";
}

static void format_size(size_t size, bool human, char *buf, size_t len)
{
	if (human && size >= (1UL << 20) && !(size % (1UL << 20)))
		snprintf(buf, len, "%zuM", size >> 20);
	else if (human && size >= 1024 && !(size % 1024))
		snprintf(buf, len, "%zuK", size >> 10);
	else
		snprintf(buf, len, "%zu", size);
}

/* One client (and through it one server) for one provider; collects what it reports. */
static void run_once(int prov, int repeat)
{
	struct record rec;
	char why[128];
	int res[2], status, current = -1;
	bool done = false, unavail = false, timed_out = false, began = false;
	pid_t client, self = getpid();

	if (pipe(res)) {
		perror(BENCH_NAME ": pipe");
		exit(1);
	}
	fflush(NULL);
	client = fork();
	if (client < 0) {
		perror(BENCH_NAME ": fork");
		exit(1);
	}
	if (client == 0) {
		close(res[0]);
		die_with_parent(self);
		signal(SIGPIPE, SIG_IGN);
		_exit(client_main(prov, res[1]));
	}
	close(res[1]);

	for (;;) {
		struct pollfd pfd = {.fd = res[0], .events = POLLIN};
		/* the client re-arms its own alarm per test; this only catches a broken client */
		int n = poll(&pfd, 1, (int) (opt.timeout + 15) * 1000);

		if (n < 0 && errno == EINTR)
			continue;
		if (n == 0) {
			timed_out = true;
			kill(client, SIGKILL);
			break;
		}
		if (n < 0 || read_all(res[0], &rec, sizeof(rec)))
			break;
		if (rec.type == REC_UNAVAIL) {
			unavail = true;
		} else if (rec.type == REC_DONE) {
			done = true;
		} else if (rec.test >= 0 && rec.test < ntests) {
			struct cell *c = &cells[prov][rec.test];

			if (rec.type == REC_BEGIN) {
				current = rec.test;
				began = true;
			} else if (rec.type == REC_NA) {
				c->state = CELL_NA;
			} else if (rec.type == REC_RESULT && c->nsamples < MAX_REPEATS) {
				c->samples[c->nsamples++] = rec.value;
				prov_ran[prov] = true;
				current = -1;
				if (opt.verbose)
					fprintf(stderr, "%s: repeat %d %s %s %zu: %.2f\n",
						BENCH_NAME, repeat + 1, opt.provs[prov],
						test_name(&tests[rec.test]), tests[rec.test].size,
						rec.value);
			}
		}
	}
	close(res[0]);
	waitpid(client, &status, 0);
	/* orphaned servers come to us (we are their subreaper) and die with their client */
	while (waitpid(-1, NULL, 0) > 0)
		;

	if (unavail) {
		prov_unavail[prov] = true;
		fprintf(stderr,
			"%s: %s: not available: fi_getinfo offers no FI_EP_RDM endpoint "
			"with FI_MSG on " BENCH_NODE " (FI_PROVIDER_PATH=%s)\n",
			BENCH_NAME, opt.provs[prov],
			getenv("FI_PROVIDER_PATH") ? getenv("FI_PROVIDER_PATH") : "unset");
		return;
	}
	if (done && WIFEXITED(status) && WEXITSTATUS(status) == 0)
		return;
	if (timed_out)
		snprintf(why, sizeof(why), "stopped reporting, killed");
	else
		describe_status(status, why, sizeof(why));
	if (current >= 0) {
		char size[32];

		cells[prov][current].state = CELL_FAILED;
		format_size(tests[current].size, true, size, sizeof(size));
		fprintf(stderr, "%s: %s repeat %d: %s %s failed (%s); skipped from now on\n",
			BENCH_NAME, opt.provs[prov], repeat + 1, test_name(&tests[current]), size,
			why);
	} else if (began) {
		/* every result arrived; the teardown failed, which the next repeat may not */
		fprintf(stderr, "%s: %s repeat %d: run failed after its tests (%s)\n", BENCH_NAME,
			opt.provs[prov], repeat + 1, why);
	} else {
		/* setup itself failed: it would fail the same way in every repeat */
		prov_failed[prov] = true;
		fprintf(stderr, "%s: %s repeat %d: run failed before any test (%s)\n", BENCH_NAME,
			opt.provs[prov], repeat + 1, why);
	}
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *) a, y = *(const double *) b;

	return (x > y) - (x < y);
}

/* The median, or false when the cell has no number to show. */
static bool cell_median(int prov, int test, double *median)
{
	struct cell *c = &cells[prov][test];
	double v[MAX_REPEATS];
	int n = c->nsamples;

	if (prov_unavail[prov] || c->state != CELL_PENDING || n == 0)
		return false;
	memcpy(v, c->samples, n * sizeof(v[0]));
	qsort(v, n, sizeof(v[0]), cmp_double);
	*median = n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
	return true;
}

static void format_cell(int prov, int test, char *buf, size_t len)
{
	double m;

	if (cell_median(prov, test, &m))
		/* two decimals for microseconds and for slow bandwidths, none for the rest */
		snprintf(buf, len, tests[test].kind == KIND_LAT || m < 100 ? "%.2f" : "%.0f", m);
	else if (prov_unavail[prov] || cells[prov][test].state == CELL_NA)
		snprintf(buf, len, "n/a");
	else if (cells[prov][test].state == CELL_FAILED || prov_failed[prov])
		snprintf(buf, len, "fail");
	else
		snprintf(buf, len, "-"); /* never reached: earlier tests failed in every repeat */
}

#define CELL_LEN 48

static void print_table(void)
{
	int ncols = 2 + opt.nprovs + (opt.nprovs >= 2);
	char(*text)[MAX_PROVS + 3][CELL_LEN];
	size_t width[MAX_PROVS + 3] = {0};
	int nrows = ntests + 1;

	text = calloc((size_t) nrows, sizeof(*text));
	if (!text) {
		perror(BENCH_NAME);
		exit(1);
	}
	snprintf(text[0][0], CELL_LEN, "test");
	snprintf(text[0][1], CELL_LEN, "size");
	for (int p = 0; p < opt.nprovs; p++)
		snprintf(text[0][2 + p], CELL_LEN, "%s", opt.provs[p]);
	if (opt.nprovs >= 2)
		snprintf(text[0][ncols - 1], CELL_LEN, "ratio");
	for (int t = 0; t < ntests; t++) {
		char(*row)[CELL_LEN] = text[t + 1];
		double a, b;

		snprintf(row[0], CELL_LEN, "%s", test_name(&tests[t]));
		format_size(tests[t].size, !opt.csv, row[1], CELL_LEN);
		for (int p = 0; p < opt.nprovs; p++)
			format_cell(p, t, row[2 + p], CELL_LEN);
		if (opt.nprovs < 2)
			continue;
		if (cell_median(0, t, &a) && cell_median(1, t, &b) && b > 0)
			snprintf(row[ncols - 1], CELL_LEN, "%.2f", a / b);
		else
			snprintf(row[ncols - 1], CELL_LEN, "n/a");
	}

	if (opt.csv) {
		for (int r = 0; r < nrows; r++)
			for (int c = 0; c < ncols; c++)
				printf("%s%s", text[r][c], c + 1 < ncols ? "," : "\n");
		free(text);
		return;
	}

	for (int r = 0; r < nrows; r++)
		for (int c = 0; c < ncols; c++)
			if (strlen(text[r][c]) > width[c])
				width[c] = strlen(text[r][c]);
	printf("# %s %s, libfabric %u.%u: median of %d repeat%s, providers alternating\n",
	       BENCH_NAME, PACKAGE_VERSION, FI_MAJOR(fi_version()), FI_MINOR(fi_version()),
	       opt.repeats, opt.repeats == 1 ? "" : "s");
	printf("# lat: half round trip in us; bw: MB/s (10^6 B/s), window %zu; ", opt.window);
	if (cpus[0] >= 0)
		printf("client on CPU %d, server on CPU %d\n", cpus[0], cpus[1]);
	else if (yield_idle)
		printf("one CPU, the processes yield it while waiting\n");
	else
		printf("not pinned\n");
	if (opt.nprovs >= 2)
		printf("# ratio = %s / %s (lat: > 1 means slower; bw: > 1 means faster)\n",
		       opt.provs[0], opt.provs[1]);
	for (int r = 0; r < nrows; r++) {
		for (int c = 0; c < ncols; c++) {
			/* names left-aligned, numbers right-aligned */
			if (c == 0)
				printf("%-*s", (int) width[c], text[r][c]);
			else
				printf("  %*s", (int) width[c], text[r][c]);
		}
		printf("\n");
	}
	free(text);
}

/* ---------------------------------------------------------------- options */

static void usage(FILE *out)
{
	fprintf(out,
		"usage: %s [options]\n"
		"FI_MSG latency and bandwidth of libfabric RDM providers over 127.0.0.1,\n"
		"side by side, with the ratio of the first provider to the second.\n"
		"\n"
		"  -p, --providers LIST  comma-separated providers (default \"%s\")\n"
		"  -r, --repeats N       runs per provider, alternating providers (default %d)\n"
		"  -i, --iters N         latency round trips / bandwidth messages per size\n"
		"                        (default: from a byte budget per size)\n"
		"  -s, --sizes LIST      message sizes for all tests, e.g. 8,4k,64k,1m\n"
		"                        (default: latency 8,4k,64k,1m; bandwidth 64k,1m)\n"
		"  -w, --window N        outstanding sends in the bandwidth test (default %d)\n"
		"  -t, --timeout SEC     give up on a test after SEC seconds (default %d)\n"
		"  -q, --quick           1 repeat and a tenth of the iterations (a smoke test)\n"
		"  -T, --tagged          also run the tests with fi_tsend/fi_trecv\n"
		"  -c, --csv             print the table as CSV\n"
		"      --no-pin          do not pin the two processes to their own CPUs\n"
		"  -v, --verbose         print every measurement on stderr\n"
		"  -h, --help            this text\n",
		BENCH_NAME, DEFAULT_PROVS, DEFAULT_REPEATS, DEFAULT_WINDOW, DEFAULT_TIMEOUT);
}

static bool parse_ulong(const char *s, unsigned long min, unsigned long max, unsigned long *out)
{
	char *end;
	unsigned long v;

	errno = 0;
	v = strtoul(s, &end, 10);
	if (errno || end == s || *end || s[0] == '-' || v < min || v > max)
		return false;
	*out = v;
	return true;
}

/* A size with an optional binary k/m/g suffix. */
static bool parse_size(const char *s, size_t *out)
{
	char *end;
	unsigned long long v;

	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || end == s || s[0] == '-')
		return false;
	switch (*end) {
	case 'k':
	case 'K':
		v <<= 10, end++;
		break;
	case 'm':
	case 'M':
		v <<= 20, end++;
		break;
	case 'g':
	case 'G':
		v <<= 30, end++;
		break;
	}
	if (*end || v == 0 || v > MAX_MSG_SIZE)
		return false;
	*out = (size_t) v;
	return true;
}

static void parse_providers(char *list)
{
	char *save = NULL;

	for (char *p = strtok_r(list, ",", &save); p; p = strtok_r(NULL, ",", &save)) {
		if (opt.nprovs == MAX_PROVS) {
			fprintf(stderr, "%s: at most %d providers\n", BENCH_NAME, MAX_PROVS);
			exit(2);
		}
		opt.provs[opt.nprovs++] = p;
	}
	if (!opt.nprovs) {
		fprintf(stderr, "%s: empty provider list\n", BENCH_NAME);
		exit(2);
	}
}

static void parse_sizes(char *list)
{
	char *save = NULL;

	opt.nsizes = 0;
	for (char *s = strtok_r(list, ",", &save); s; s = strtok_r(NULL, ",", &save)) {
		if (opt.nsizes == MAX_SIZES || !parse_size(s, &opt.sizes[opt.nsizes])) {
			fprintf(stderr, "%s: bad size list (at most %d sizes, 1 B to 1 GiB)\n",
				BENCH_NAME, MAX_SIZES);
			exit(2);
		}
		opt.nsizes++;
	}
	if (!opt.nsizes) {
		fprintf(stderr, "%s: empty size list\n", BENCH_NAME);
		exit(2);
	}
}

static void parse_options(int argc, char **argv)
{
	static const struct option longopts[] = {
		{"providers", required_argument, NULL, 'p'},
		{"repeats", required_argument, NULL, 'r'},
		{"iters", required_argument, NULL, 'i'},
		{"sizes", required_argument, NULL, 's'},
		{"window", required_argument, NULL, 'w'},
		{"timeout", required_argument, NULL, 't'},
		{"quick", no_argument, NULL, 'q'},
		{"tagged", no_argument, NULL, 'T'},
		{"csv", no_argument, NULL, 'c'},
		{"no-pin", no_argument, NULL, 'P'},
		{"verbose", no_argument, NULL, 'v'},
		{"help", no_argument, NULL, 'h'},
		{0},
	};
	static char default_provs[] = DEFAULT_PROVS;
	unsigned long v;
	bool repeats_set = false;
	int c;

	opt.window = DEFAULT_WINDOW;
	opt.timeout = DEFAULT_TIMEOUT;
	opt.repeats = DEFAULT_REPEATS;
	opt.pin = true;
	while ((c = getopt_long(argc, argv, "p:r:i:s:w:t:qTcvh", longopts, NULL)) != -1) {
		switch (c) {
		case 'p':
			parse_providers(optarg);
			break;
		case 'r':
			if (!parse_ulong(optarg, 1, MAX_REPEATS, &v))
				goto bad;
			opt.repeats = (int) v;
			repeats_set = true;
			break;
		case 'i':
			if (!parse_ulong(optarg, 1, 100000000, &v))
				goto bad;
			opt.iters = v;
			break;
		case 's':
			parse_sizes(optarg);
			break;
		case 'w':
			if (!parse_ulong(optarg, 1, MAX_WINDOW, &v))
				goto bad;
			opt.window = v;
			break;
		case 't':
			if (!parse_ulong(optarg, 1, 3600, &v))
				goto bad;
			opt.timeout = (unsigned) v;
			break;
		case 'q':
			opt.quick = true;
			break;
		case 'T':
			opt.tagged = true;
			break;
		case 'c':
			opt.csv = true;
			break;
		case 'P':
			opt.pin = false;
			break;
		case 'v':
			opt.verbose = true;
			break;
		case 'h':
			usage(stdout);
			exit(0);
		default:
			usage(stderr);
			exit(2);
		}
	}
	if (optind < argc) {
		fprintf(stderr, "%s: unexpected argument '%s'\n", BENCH_NAME, argv[optind]);
		usage(stderr);
		exit(2);
	}
	if (!opt.nprovs)
		parse_providers(default_provs);
	if (opt.quick && !repeats_set)
		opt.repeats = 1;
	return;
bad:
	fprintf(stderr, "%s: bad value '%s' for -%c\n", BENCH_NAME, optarg, c);
	usage(stderr);
	exit(2);
}

static void add_test(enum test_api api, enum test_kind kind, size_t size)
{
	struct test *t = &tests[ntests++];
	size_t div = opt.quick ? 10 : 1;

	t->api = api;
	t->kind = kind;
	t->size = size;
	if (kind == KIND_LAT) {
		t->iters = clamp_size(LAT_BUDGET / size, LAT_MIN_ITERS, LAT_MAX_ITERS) / div;
		if (opt.iters)
			t->iters = opt.iters;
		t->warmup = clamp_size(t->iters / 10, 2, 1000);
	} else {
		size_t min = 4 * opt.window;

		t->iters = clamp_size(BW_BUDGET / div / size, min, BW_MAX_MSGS / div);
		if (opt.iters)
			t->iters = opt.iters;
		/* warmup is counted in windows */
		t->warmup = clamp_size(t->iters / opt.window / 10, 1, 100);
	}
	if (!t->iters)
		t->iters = 1;
}

static void build_tests(void)
{
	int napis = opt.tagged ? 2 : 1;

	for (int a = 0; a < napis; a++) {
		enum test_api api = a ? API_TAGGED : API_MSG;

		if (opt.nsizes) {
			for (int i = 0; i < opt.nsizes; i++)
				add_test(api, KIND_LAT, opt.sizes[i]);
			for (int i = 0; i < opt.nsizes; i++)
				add_test(api, KIND_BW, opt.sizes[i]);
			continue;
		}
		for (size_t i = 0; i < ARRAY_SIZE(default_lat_sizes); i++)
			add_test(api, KIND_LAT, default_lat_sizes[i]);
		for (size_t i = 0; i < ARRAY_SIZE(default_bw_sizes); i++)
			add_test(api, KIND_BW, default_bw_sizes[i]);
	}
}

/* The first two CPUs we may run on; with fewer, nobody is pinned. */
static void choose_cpus(void)
{
	cpu_set_t set;
	int found = 0;

	if (sched_getaffinity(0, sizeof(set), &set))
		return;
	for (int cpu = 0; cpu < CPU_SETSIZE && found < 2; cpu++)
		if (CPU_ISSET(cpu, &set))
			cpus[found++] = cpu;
	if (found < 2) {
		yield_idle = true;
		fprintf(stderr,
			"%s: only one CPU available: processes not pinned, and they yield "
			"the CPU while waiting\n",
			BENCH_NAME);
	}
	if (found < 2 || !opt.pin)
		cpus[0] = cpus[1] = -1;
}

int main(int argc, char **argv)
{
	int nran = 0;

	parse_options(argc, argv);
	build_tests();
	choose_cpus();
	/* a client killed mid-run leaves its server to us, so we can reap it */
	if (prctl(PR_SET_CHILD_SUBREAPER, 1))
		perror(BENCH_NAME ": PR_SET_CHILD_SUBREAPER");

	/* providers alternate within every repeat, so slow drifts hit all of them alike */
	for (int r = 0; r < opt.repeats; r++) {
		cur_repeat = r;
		for (int p = 0; p < opt.nprovs; p++)
			if (!prov_unavail[p] && !prov_failed[p])
				run_once(p, r);
	}

	print_table();
	for (int p = 0; p < opt.nprovs; p++)
		nran += prov_ran[p];
	if (!nran)
		fprintf(stderr, "%s: no provider ran\n", BENCH_NAME);
	return nran ? 0 : 1;
}
