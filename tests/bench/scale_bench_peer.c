/*
 * fi_scale_bench: the server and the client processes of a run (fi_scale_bench.c forks them).
 *
 * The server holds one FI_EP_RDM endpoint. It keeps a window of tagged receives posted for
 * hellos, each carrying a peer's name; it inserts that name (one fi_av_insert per peer, as
 * fabtests' servers learn their clients) and answers with a tagged ack. The peer whose hello
 * says "awake" is the one it later answers pings from. Everything it does happens in one loop
 * that reads its CQ, posts what is owed, and looks at the main process's commands about once
 * a millisecond, so that the commands cost the measured paths nothing.
 *
 * A client process opens one fabric and domain, and per peer an AV, a CQ and an endpoint: a
 * CQ of its own per endpoint, so that reading one endpoint's CQ drives only that endpoint, as
 * if each peer were a process of its own. Once the main process says go, each endpoint posts
 * the receive of its ack and sends its hello; the process reads its endpoints' CQs until every
 * one has both completions. Then idle clients block reading the pipe, making no libfabric
 * call, until they are told to exit; the awake one runs the ping-pong when told.
 */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_tagged.h>

#include "scale_bench.h"

/* What the benchmark accepts: it registers one region per domain when asked for FI_MR_LOCAL. */
#define MR_MODE_ACCEPTED (FI_MR_LOCAL | FI_MR_ALLOCATED | FI_MR_VIRT_ADDR | FI_MR_PROV_KEY)
/* Hello receives the server keeps posted; more hellos wait in the provider as unexpected. */
#define SERVER_WINDOW 256
/* Pong sends outstanding at once; one is the rule, since the peer waits for each. */
#define PONG_OPS 4
#define CQ_BATCH 16
#define CLIENT_CQ_SIZE 16
/* The server looks at its command pipe this often (microseconds), between CQ reads. */
#define CMD_CHECK_US 1000
/* ...and, while its peers leave, counts its fds this often. */
#define SETTLE_CHECK_US 10000
/* A client whose CQs gave nothing this many sweeps in a row sleeps SWEEP_SLEEP_US, so that
 * with more processes than CPUs the busy clients leave the server its CPU. */
#define IDLE_SWEEPS 16
#define SWEEP_SLEEP_US 100
#define ACK_WORD 0x61636b61636b6163ULL

/* The kind of operation behind a completion. */
enum op_kind { OP_HELLO_RX, OP_ACK_TX, OP_PING_RX, OP_PONG_TX, OP_CLIENT_TX, OP_CLIENT_RX };

/* The provider's FI_CONTEXT space first: a completion's op_context is the op itself. */
struct op {
	struct fi_context ctx;
	enum op_kind kind;
	size_t idx; /* hello receives: the window slot */
	bool busy;  /* pong sends: posted, not completed */
};

/* A peer's first message: its name, so that the server can insert it. */
struct hello {
	uint32_t flags; /* HELLO_AWAKE: the peer that will ping */
	uint32_t addrlen;
	char addr[SCALE_ADDR_MAX];
};
#define HELLO_AWAKE 1u
#define HELLO_HDR offsetof(struct hello, addr)

/* One process's fabric and domain, and the one region all its buffers live in. */
struct proc_fab {
	const char *prov;
	const char *role; /* "server", "client 3", ... for messages */
	int rep_fd;
	struct fi_info *info;
	struct fid_fabric *fabric;
	struct fid_domain *domain;
	struct fid_mr *mr; /* FI_MR_LOCAL: the region */
	void *desc;
	char *region;
	size_t region_size;
};

static void fab_err(const struct proc_fab *f, const char *call, int ret)
{
	fprintf(stderr, "%s: %s %s: %s: %s (%d)\n", SCALE_NAME, f->prov, f->role, call,
		fi_strerror(ret < 0 ? -ret : ret), ret);
}

static void send_rec(const struct proc_fab *f, struct scale_rec *rec)
{
	/* with the main process gone there is nobody to report to, nor a reason to go on */
	if (write_all(f->rep_fd, rec, sizeof(*rec)))
		_exit(1);
}

static void report(const struct proc_fab *f, enum scale_rec_type type)
{
	struct scale_rec rec = {.type = type};

	send_rec(f, &rec);
}

/* ---------------------------------------------------------------- what a process holds */

/* Resident bytes, read after malloc_trim(0): what the process holds, not what glibc keeps. */
static double rss_bytes(void)
{
	char buf[128];
	unsigned long size = 0, resident = 0;
	ssize_t n;
	int fd;

	malloc_trim(0);
	fd = open("/proc/self/statm", O_RDONLY);
	if (fd < 0)
		return 0;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = '\0';
	if (sscanf(buf, "%lu %lu", &size, &resident) != 2)
		return 0;
	return (double) resident * (double) sysconf(_SC_PAGESIZE);
}

/* Open descriptors, the one of the directory being read left out. */
static int count_fds(void)
{
	struct dirent *d;
	DIR *dir = opendir("/proc/self/fd");
	int n = 0;

	if (!dir)
		return -1;
	while ((d = readdir(dir)))
		n += d->d_name[0] != '.';
	closedir(dir);
	return n - 1;
}

/* ---------------------------------------------------------------- fabric and domain */

static bool is_ip_format(uint32_t addr_format)
{
	return addr_format == FI_SOCKADDR || addr_format == FI_SOCKADDR_IN ||
	       addr_format == FI_SOCKADDR_IN6;
}

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

	hints = fi_allocinfo();
	if (!hints)
		return -FI_ENOMEM;
	hints->caps = FI_MSG | FI_TAGGED;
	hints->mode = FI_CONTEXT;
	hints->ep_attr->type = FI_EP_RDM;
	hints->domain_attr->mr_mode = MR_MODE_ACCEPTED;
	/* one thread per process: the provider may take its lock-free path */
	hints->domain_attr->threading = FI_THREAD_DOMAIN;
	hints->domain_attr->av_type = FI_AV_TABLE;
	if (manual)
		hints->domain_attr->data_progress = FI_PROGRESS_MANUAL;
	hints->fabric_attr->prov_name = strdup(prov);
	if (!hints->fabric_attr->prov_name) {
		fi_freeinfo(hints);
		return -FI_ENOMEM;
	}
	/* FI_SOURCE with no service: 127.0.0.1 on an ephemeral port, fi_getname tells it */
	ret = fi_getinfo(SCALE_API, on_loopback ? SCALE_NODE : NULL, NULL,
			 on_loopback ? FI_SOURCE : 0, hints, &list);
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
	if (!is_ip_format(f->info->addr_format)) {
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
static int proc_fab_open(struct proc_fab *f, size_t region_size)
{
	int ret;

	ret = choose_info(f);
	if (ret)
		return ret;
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

static void proc_fab_close(struct proc_fab *f)
{
	if (f->mr)
		fi_close(&f->mr->fid);
	if (f->domain)
		fi_close(&f->domain->fid);
	if (f->fabric)
		fi_close(&f->fabric->fid);
	if (f->info)
		fi_freeinfo(f->info);
	free(f->region);
}

/* An endpoint with its AV and CQ, enabled. */
static int open_ep(struct proc_fab *f, size_t av_count, size_t cq_size, struct fid_av **av,
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
static void close_ep(struct fid_av *av, struct fid_cq *cq, struct fid_ep *ep)
{
	if (ep)
		fi_close(&ep->fid);
	if (av)
		fi_close(&av->fid);
	if (cq)
		fi_close(&cq->fid);
}

static int read_cq_error(const struct proc_fab *f, struct fid_cq *cq, struct fi_cq_err_entry *err)
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

/* ---------------------------------------------------------------- the server */

struct server {
	struct proc_fab f;
	const struct scale_run *run;
	int cmd_fd;
	struct fid_av *av;
	struct fid_cq *cq;
	struct fid_ep *ep;
	struct hello *hello_buf; /* the window's receive buffers, in the region */
	uint64_t *tx_word;	 /* the payload of every ack and pong */
	uint64_t *ping_buf;
	struct op *hello_ops; /* window */
	size_t window;
	size_t *free_slots; /* hello slots not posted */
	size_t nfree;
	uint64_t posted_total; /* hello receives posted in the server's life */
	uint64_t max_total;    /* ...and all it will ever need: N per cycle */
	struct op *ack_ops;    /* npeers: ack i goes to peers[i] */
	fi_addr_t *peers;      /* this cycle's peers, in the order their hellos came */
	size_t served;	       /* hellos inserted this cycle */
	size_t acks_posted;
	size_t acks_done;
	struct op ping_op;
	bool ping_posted;
	struct op pong_ops[PONG_OPS];
	size_t pongs_owed; /* pings received whose pong is not posted yet */
	fi_addr_t awake;   /* the peer that pings */
	uint64_t cq_errors;
	bool peers_leaving; /* CMD_LEAVING came: error completions are counted, not fatal */
	bool want_measure;
	bool settling; /* churn: the cycle's peers removed, waiting for the fds */
	double settle_start;
	double base_rss;
	int base_fds;
	char name[SCALE_ADDR_MAX]; /* fi_getname of the endpoint */
	size_t namelen;
	bool stop;
};

static int server_open(struct server *s)
{
	const struct scale_run *run = s->run;
	size_t addrlen = SCALE_ADDR_MAX;
	size_t hello_bytes;
	int ret;

	s->max_total = (uint64_t) run->npeers * (run->cycles ? run->cycles : 1);
	s->window = s->max_total < SERVER_WINDOW ? (size_t) s->max_total : SERVER_WINDOW;
	hello_bytes = s->window * sizeof(struct hello);
	ret = proc_fab_open(&s->f, hello_bytes + 2 * sizeof(uint64_t));
	if (ret)
		return ret;
	s->hello_buf = (struct hello *) s->f.region;
	s->tx_word = (uint64_t *) (s->f.region + hello_bytes);
	s->ping_buf = s->tx_word + 1;
	*s->tx_word = ACK_WORD;

	/* the CQ holds every completion that can be pending: receives, acks, pongs */
	ret = open_ep(&s->f, run->npeers, s->window + run->npeers + 2 * PONG_OPS + 16, &s->av,
		      &s->cq, &s->ep);
	if (ret)
		return ret;

	/*
	 * The benchmark's own bookkeeping is allocated and touched now, before the baseline, so
	 * that the per-peer figures are the provider's alone.
	 */
	s->hello_ops = calloc(s->window, sizeof(*s->hello_ops));
	s->free_slots = calloc(s->window, sizeof(*s->free_slots));
	s->ack_ops = calloc(run->npeers, sizeof(*s->ack_ops));
	s->peers = calloc(run->npeers, sizeof(*s->peers));
	if (!s->hello_ops || !s->free_slots || !s->ack_ops || !s->peers) {
		fab_err(&s->f, "allocating peer state", -FI_ENOMEM);
		return -FI_ENOMEM;
	}
	memset(s->peers, 0xff, run->npeers * sizeof(*s->peers));
	for (size_t i = 0; i < s->window; i++) {
		s->hello_ops[i].kind = OP_HELLO_RX;
		s->hello_ops[i].idx = i;
		s->free_slots[s->nfree++] = s->window - 1 - i;
	}
	for (size_t i = 0; i < run->npeers; i++)
		s->ack_ops[i].kind = OP_ACK_TX;
	s->ping_op.kind = OP_PING_RX;
	for (int i = 0; i < PONG_OPS; i++)
		s->pong_ops[i].kind = OP_PONG_TX;
	s->awake = FI_ADDR_UNSPEC;

	ret = fi_getname(&s->ep->fid, s->name, &addrlen);
	if (!ret && addrlen > SCALE_ADDR_MAX)
		ret = -FI_ETOOSMALL;
	if (ret) {
		fab_err(&s->f, "fi_getname", ret);
		return ret;
	}
	s->namelen = addrlen;
	return 0;
}

static void server_close(struct server *s)
{
	close_ep(s->av, s->cq, s->ep);
	proc_fab_close(&s->f);
	free(s->hello_ops);
	free(s->free_slots);
	free(s->ack_ops);
	free(s->peers);
}

/*
 * Everything owed, in the order that keeps the ping-pong quick: the ping receive before the
 * pong (the next ping then finds it posted), hello receives, acks. A full queue (-FI_EAGAIN)
 * leaves the rest for the next turn of the loop, after a CQ read.
 */
static int server_post(struct server *s)
{
	struct fid_ep *ep = s->ep;
	void *desc = s->f.desc;
	ssize_t ret;

	if (!s->ping_posted) {
		ret = fi_trecv(ep, s->ping_buf, sizeof(*s->ping_buf), desc, FI_ADDR_UNSPEC,
			       SCALE_TAG_PING, 0, &s->ping_op.ctx);
		if (ret == -FI_EAGAIN)
			return 0;
		if (ret) {
			fab_err(&s->f, "fi_trecv(ping)", (int) ret);
			return (int) ret;
		}
		s->ping_posted = true;
	}
	for (int i = 0; s->pongs_owed && i < PONG_OPS; i++) {
		struct op *op = &s->pong_ops[i];

		if (op->busy)
			continue;
		ret = fi_tsend(ep, s->tx_word, sizeof(*s->tx_word), desc, s->awake, SCALE_TAG_PONG,
			       &op->ctx);
		if (ret == -FI_EAGAIN)
			return 0;
		if (ret) {
			fab_err(&s->f, "fi_tsend(pong)", (int) ret);
			return (int) ret;
		}
		op->busy = true;
		s->pongs_owed--;
	}
	while (s->nfree && s->posted_total < s->max_total) {
		size_t slot = s->free_slots[s->nfree - 1];

		ret = fi_trecv(ep, &s->hello_buf[slot], sizeof(struct hello), desc, FI_ADDR_UNSPEC,
			       SCALE_TAG_HELLO, 0, &s->hello_ops[slot].ctx);
		if (ret == -FI_EAGAIN)
			return 0;
		if (ret) {
			fab_err(&s->f, "fi_trecv(hello)", (int) ret);
			return (int) ret;
		}
		s->nfree--;
		s->posted_total++;
	}
	while (s->acks_posted < s->served) {
		size_t i = s->acks_posted;

		ret = fi_tsend(ep, s->tx_word, sizeof(*s->tx_word), desc, s->peers[i],
			       SCALE_TAG_ACK, &s->ack_ops[i].ctx);
		if (ret == -FI_EAGAIN)
			return 0;
		if (ret) {
			fab_err(&s->f, "fi_tsend(ack)", (int) ret);
			return (int) ret;
		}
		s->acks_posted++;
	}
	return 0;
}

/* A hello: insert its sender (one call per peer) and owe it an ack. */
static int server_hello(struct server *s, struct op *op, size_t len)
{
	const struct hello *h = &s->hello_buf[op->idx];
	fi_addr_t addr;
	int ret;

	if (len < HELLO_HDR || !h->addrlen || h->addrlen > len - HELLO_HDR) {
		fprintf(stderr, "%s: %s server: a hello of %zu bytes naming %u bytes\n", SCALE_NAME,
			s->f.prov, len, h->addrlen);
		return -FI_EINVAL;
	}
	if (s->served == s->run->npeers) {
		fprintf(stderr, "%s: %s server: more hellos than the %zu peers\n", SCALE_NAME,
			s->f.prov, s->run->npeers);
		return -FI_EINVAL;
	}
	ret = fi_av_insert(s->av, h->addr, 1, &addr, 0, NULL);
	if (ret != 1) {
		fab_err(&s->f, "fi_av_insert", ret < 0 ? ret : -FI_EINVAL);
		return ret < 0 ? ret : -FI_EINVAL;
	}
	s->peers[s->served++] = addr;
	if (h->flags & HELLO_AWAKE)
		s->awake = addr;
	s->free_slots[s->nfree++] = op->idx;
	return 0;
}

static int server_complete(struct server *s, const struct fi_cq_msg_entry *c)
{
	struct op *op = c->op_context;

	switch (op->kind) {
	case OP_HELLO_RX:
		return server_hello(s, op, c->len);
	case OP_ACK_TX:
		s->acks_done++;
		return 0;
	case OP_PING_RX:
		s->ping_posted = false;
		if (s->awake == FI_ADDR_UNSPEC) {
			fprintf(stderr, "%s: %s server: a ping before the awake peer's hello\n",
				SCALE_NAME, s->f.prov);
			return -FI_EINVAL;
		}
		s->pongs_owed++;
		return 0;
	case OP_PONG_TX:
		op->busy = false;
		return 0;
	default:
		fprintf(stderr, "%s: %s server: a completion of unknown context\n", SCALE_NAME,
			s->f.prov);
		return -FI_EINVAL;
	}
}

/*
 * Until the peers leave, an error completion fails the run. After, it is what departing
 * peers leave behind (a connection reset, an operation to a removed address): counted, and
 * the operation it ends is given back as if it had completed.
 */
static int server_cq_error(struct server *s)
{
	struct fi_cq_err_entry err;
	struct op *op;
	int ret;

	ret = read_cq_error(&s->f, s->cq, &err);
	if (ret <= 0)
		return ret;
	s->cq_errors++;
	op = err.op_context;
	if (!s->peers_leaving) {
		fprintf(stderr, "%s: %s server: a completion with error: %s (prov_errno %d)\n",
			SCALE_NAME, s->f.prov, fi_strerror(err.err), err.prov_errno);
		return err.err ? -err.err : -FI_EIO;
	}
	if (!op)
		return 0;
	switch (op->kind) {
	case OP_HELLO_RX:
		s->free_slots[s->nfree++] = op->idx;
		s->posted_total--;
		break;
	case OP_ACK_TX:
		s->acks_done++;
		break;
	case OP_PING_RX:
		s->ping_posted = false;
		break;
	case OP_PONG_TX:
		op->busy = false;
		break;
	default:
		break;
	}
	return 0;
}

/* The departed peers' addresses go, one call each, as an application drops peers that left. */
static int server_remove(struct server *s)
{
	for (size_t i = 0; i < s->served; i++) {
		int ret = fi_av_remove(s->av, &s->peers[i], 1, 0);

		if (ret) {
			fab_err(&s->f, "fi_av_remove", ret);
			return ret;
		}
	}
	s->settling = true;
	s->settle_start = now_us();
	return 0;
}

/* Churn: back within 10% of the baseline's fds (or out of time): report, next cycle. */
static void server_settled(struct server *s, int fds)
{
	struct scale_rec rec = {.type = REC_CYCLE};

	rec.v[V_SETTLE_S] = (now_us() - s->settle_start) / 1e6;
	rec.v[V_RSS] = rss_bytes();
	rec.v[V_FDS] = fds;
	rec.v[V_CQ_ERRORS] = (double) s->cq_errors;
	send_rec(&s->f, &rec);
	s->settling = false;
	/* every ack completed (checked by the caller): their contexts serve the next cycle */
	s->served = s->acks_posted = s->acks_done = 0;
	s->awake = FI_ADDR_UNSPEC;
}

static int server_command(struct server *s, char cmd)
{
	struct scale_rec rec = {.type = REC_LEAVING};

	/* each step the main process asks for gets its own time */
	alarm(opt.timeout + SCALE_SETTLE_S);
	switch (cmd) {
	case CMD_MEASURE:
		s->want_measure = true;
		return 0;
	case CMD_LEAVING:
		s->peers_leaving = true;
		rec.v[V_FDS] = count_fds();
		send_rec(&s->f, &rec);
		return 0;
	case CMD_REMOVE:
		if (!s->run->cycles || s->served != s->run->npeers || s->settling) {
			fprintf(stderr, "%s: %s server: told to remove with %zu of %zu peers\n",
				SCALE_NAME, s->f.prov, s->served, s->run->npeers);
			return -FI_EINVAL;
		}
		return server_remove(s);
	case CMD_STOP:
		s->stop = true;
		return 0;
	default:
		fprintf(stderr, "%s: %s server: unknown command '%c'\n", SCALE_NAME, s->f.prov,
			cmd);
		return -FI_EINVAL;
	}
}

/* A command, if one is waiting; the pipe is only looked at every CMD_CHECK_US. */
static int server_check_cmd(struct server *s)
{
	struct pollfd pfd = {.fd = s->cmd_fd, .events = POLLIN};
	char cmd;

	if (poll(&pfd, 1, 0) <= 0)
		return 0;
	if (read(s->cmd_fd, &cmd, 1) != 1)
		return -FI_EIO; /* the main process is gone */
	return server_command(s, cmd);
}

/* What main asked for and that is due now: the measurement, the end of settling. */
static int server_due(struct server *s, double now, double *next_settle)
{
	size_t n = s->run->npeers;

	if (s->want_measure && s->served == n && s->acks_done == n) {
		struct scale_rec rec = {.type = REC_MEASURED};

		rec.v[V_RSS] = rss_bytes();
		rec.v[V_FDS] = count_fds();
		send_rec(&s->f, &rec);
		s->want_measure = false;
	}
	if (s->settling && now >= *next_settle) {
		int fds = count_fds();
		bool back = fds * 10 <= s->base_fds * 11;
		bool late = now - s->settle_start >= SCALE_SETTLE_S * 1e6;

		*next_settle = now + SETTLE_CHECK_US;
		if (s->acks_done != s->acks_posted && late) {
			fprintf(stderr, "%s: %s server: %zu acks never completed\n", SCALE_NAME,
				s->f.prov, s->acks_posted - s->acks_done);
			return -FI_EIO;
		}
		if ((back || late) && s->acks_done == s->acks_posted)
			server_settled(s, fds);
	}
	return 0;
}

static int server_loop(struct server *s)
{
	struct fi_cq_msg_entry comp[CQ_BATCH];
	double next_cmd = 0, next_settle = 0;
	int ret = 0;

	while (!s->stop) {
		ssize_t n = fi_cq_read(s->cq, comp, CQ_BATCH);
		double now;

		for (ssize_t i = 0; i < n && !ret; i++)
			ret = server_complete(s, &comp[i]);
		if (n == -FI_EAVAIL) {
			ret = server_cq_error(s);
		} else if (n < 0 && n != -FI_EAGAIN) {
			ret = (int) n;
			fab_err(&s->f, "fi_cq_read", ret);
		}
		if (!ret)
			ret = server_post(s);
		if (ret)
			return ret;
		if (n > 0)
			continue;
		/* a quiet CQ: the moment to look at the rest */
		now = now_us();
		if (now >= next_cmd) {
			next_cmd = now + CMD_CHECK_US;
			ret = server_check_cmd(s);
		}
		if (!ret)
			ret = server_due(s, now, &next_settle);
		if (ret)
			return ret;
	}
	return 0;
}

int scale_server_main(const struct scale_run *run, int cmd_fd, int rep_fd)
{
	struct server s = {
		.f = {.prov = run->prov, .role = "server", .rep_fd = rep_fd},
		.run = run,
		.cmd_fd = cmd_fd,
	};
	struct scale_rec rec = {.type = REC_ADDR};
	int ret;

	ret = server_open(&s);
	if (!ret)
		ret = server_post(&s);
	if (ret) {
		if (ret != -FI_ENODATA)
			report(&s.f, REC_FAIL);
		server_close(&s);
		return ret == -FI_ENODATA ? 0 : 1;
	}
	/* the baseline: the endpoint enabled, its receives posted, no peer */
	s.base_rss = rss_bytes();
	s.base_fds = count_fds();
	rec.v[V_RSS] = s.base_rss;
	rec.v[V_FDS] = s.base_fds;
	rec.addrlen = (uint32_t) s.namelen;
	memcpy(rec.addr, s.name, s.namelen);
	snprintf(rec.text, sizeof(rec.text), "%s", s.f.info->fabric_attr->prov_name);
	send_rec(&s.f, &rec);

	ret = server_loop(&s);
	if (ret)
		report(&s.f, REC_FAIL);
	server_close(&s);
	return ret ? 1 : 0;
}

/* ---------------------------------------------------------------- the clients */

/* One peer: an endpoint of its own, with its own AV and CQ. */
struct client_ep {
	struct fid_ep *ep;
	struct fid_av *av;
	struct fid_cq *cq;
	fi_addr_t server;
	struct op tx_op;
	struct op rx_op;
	struct hello *hello; /* in the region, then the two words */
	uint64_t *tx_word;   /* pings */
	uint64_t *rx_word;   /* the ack, then pongs */
	bool sent;	     /* the send posted last completed */
	bool received;	     /* the receive posted last completed */
};

/* A peer's slot in the region: its hello, a word to send, a word to receive. */
#define CLIENT_SLOT (sizeof(struct hello) + 2 * sizeof(uint64_t))

struct client {
	struct proc_fab f;
	const struct scale_run *run;
	int cmd_fd;
	bool awake;
	size_t nep;
	struct client_ep *eps;
};

static int client_open_ep(struct client *c, struct client_ep *e, size_t i)
{
	char *slot = c->f.region + i * CLIENT_SLOT;
	size_t addrlen = SCALE_ADDR_MAX;
	int ret;

	e->hello = (struct hello *) slot;
	e->tx_word = (uint64_t *) (slot + sizeof(struct hello));
	e->rx_word = e->tx_word + 1;
	e->tx_op.kind = OP_CLIENT_TX;
	e->rx_op.kind = OP_CLIENT_RX;
	ret = open_ep(&c->f, 1, CLIENT_CQ_SIZE, &e->av, &e->cq, &e->ep);
	if (ret)
		return ret;
	ret = fi_getname(&e->ep->fid, e->hello->addr, &addrlen);
	if (!ret && addrlen > SCALE_ADDR_MAX)
		ret = -FI_ETOOSMALL;
	if (ret) {
		fab_err(&c->f, "fi_getname", ret);
		return ret;
	}
	e->hello->addrlen = (uint32_t) addrlen;
	e->hello->flags = c->awake ? HELLO_AWAKE : 0;
	ret = fi_av_insert(e->av, c->run->server_addr, 1, &e->server, 0, NULL);
	if (ret != 1) {
		fab_err(&c->f, "fi_av_insert", ret < 0 ? ret : -FI_EINVAL);
		return ret < 0 ? ret : -FI_EINVAL;
	}
	return 0;
}

/* Reads one endpoint's CQ: the completions found (0 or more), or a negative error. */
static int client_poll(struct client *c, struct client_ep *e)
{
	struct fi_cq_msg_entry comp[4];
	struct fi_cq_err_entry err;
	ssize_t n = fi_cq_read(e->cq, comp, 4);

	if (n == -FI_EAGAIN)
		return 0;
	if (n == -FI_EAVAIL) {
		int ret = read_cq_error(&c->f, e->cq, &err);

		if (ret <= 0)
			return ret;
		fprintf(stderr, "%s: %s %s: a completion with error: %s (prov_errno %d)\n",
			SCALE_NAME, c->f.prov, c->f.role, fi_strerror(err.err), err.prov_errno);
		return err.err ? -err.err : -FI_EIO;
	}
	if (n < 0) {
		fab_err(&c->f, "fi_cq_read", (int) n);
		return (int) n;
	}
	for (ssize_t i = 0; i < n; i++) {
		if (comp[i].op_context == &e->tx_op)
			e->sent = true;
		else if (comp[i].op_context == &e->rx_op)
			e->received = true;
	}
	return (int) n;
}

/*
 * The receive of the answer, then the message; a full queue is retried after a CQ read. The
 * receive goes first so that the answer never arrives unexpected.
 */
static int client_exchange(struct client *c, struct client_ep *e, const void *buf, size_t len,
			   uint64_t tag, uint64_t answer_tag)
{
	ssize_t ret;

	e->sent = e->received = false;
	for (;;) {
		ret = fi_trecv(e->ep, e->rx_word, sizeof(*e->rx_word), c->f.desc, e->server,
			       answer_tag, 0, &e->rx_op.ctx);
		if (ret != -FI_EAGAIN)
			break;
		ret = client_poll(c, e);
		if (ret < 0)
			return (int) ret;
	}
	if (ret) {
		fab_err(&c->f, "fi_trecv", (int) ret);
		return (int) ret;
	}
	for (;;) {
		ret = fi_tsend(e->ep, buf, len, c->f.desc, e->server, tag, &e->tx_op.ctx);
		if (ret != -FI_EAGAIN)
			break;
		ret = client_poll(c, e);
		if (ret < 0)
			return (int) ret;
	}
	if (ret)
		fab_err(&c->f, "fi_tsend", (int) ret);
	return (int) ret;
}

/* Every endpoint's hello out, then CQs read until every endpoint has its send and its ack. */
static int client_connect(struct client *c)
{
	size_t pending = c->nep;
	unsigned empty = 0;
	int ret;

	for (size_t i = 0; i < c->nep; i++) {
		struct client_ep *e = &c->eps[i];

		ret = client_exchange(c, e, e->hello, HELLO_HDR + e->hello->addrlen,
				      SCALE_TAG_HELLO, SCALE_TAG_ACK);
		if (ret)
			return ret;
	}
	while (pending) {
		bool any = false;

		pending = 0;
		for (size_t i = 0; i < c->nep; i++) {
			struct client_ep *e = &c->eps[i];

			if (e->sent && e->received)
				continue;
			ret = client_poll(c, e);
			if (ret < 0)
				return ret;
			any |= ret > 0;
			pending += !(e->sent && e->received);
		}
		if (any)
			empty = 0;
		else if (++empty % IDLE_SWEEPS == 0)
			usleep(SWEEP_SLEEP_US);
	}
	return 0;
}

static int ping_round(struct client *c, struct client_ep *e)
{
	int ret;

	ret = client_exchange(c, e, e->tx_word, sizeof(*e->tx_word), SCALE_TAG_PING,
			      SCALE_TAG_PONG);
	while (!ret && !(e->sent && e->received)) {
		int n = client_poll(c, e);

		if (n < 0)
			ret = n;
	}
	return ret;
}

/* A warm-up, then SCALE_BATCHES timed batches; each batch's half round trip in microseconds. */
static int client_pingpong(struct client *c)
{
	struct scale_rec rec = {.type = REC_LATENCY};
	struct client_ep *e = &c->eps[0];
	size_t per_batch = opt.iters / SCALE_BATCHES;
	size_t warmup = opt.iters / 10;
	int ret = 0;

	if (warmup < 10)
		warmup = 10;
	if (warmup > 1000)
		warmup = 1000;
	for (size_t i = 0; i < warmup && !ret; i++)
		ret = ping_round(c, e);
	for (int b = 0; b < SCALE_BATCHES && !ret; b++) {
		double start = now_us();

		for (size_t i = 0; i < per_batch && !ret; i++)
			ret = ping_round(c, e);
		rec.v[b] = (now_us() - start) / (double) per_batch / 2;
	}
	if (!ret)
		send_rec(&c->f, &rec);
	return ret;
}

/* Idle: blocked in read(), no libfabric call, until the main process says what next. */
static int client_wait_cmd(struct client *c, char *cmd)
{
	if (read_all(c->cmd_fd, cmd, 1)) {
		fprintf(stderr, "%s: %s %s: the main process is gone\n", SCALE_NAME, c->f.prov,
			c->f.role);
		return -FI_EIO;
	}
	return 0;
}

static int client_run(struct client *c)
{
	char cmd;
	int ret;

	ret = proc_fab_open(&c->f, c->nep * CLIENT_SLOT);
	if (ret)
		return ret;
	c->eps = calloc(c->nep, sizeof(*c->eps));
	if (!c->eps) {
		fab_err(&c->f, "allocating endpoints", -FI_ENOMEM);
		return -FI_ENOMEM;
	}
	for (size_t i = 0; i < c->nep; i++) {
		ret = client_open_ep(c, &c->eps[i], i);
		if (ret)
			return ret;
	}
	report(&c->f, REC_READY);
	ret = client_wait_cmd(c, &cmd);
	if (ret)
		return ret;
	if (cmd != CMD_GO)
		return cmd == CMD_EXIT ? 0 : -FI_EINVAL;
	ret = client_connect(c);
	if (ret)
		return ret;
	report(&c->f, REC_CONNECTED);
	for (;;) {
		ret = client_wait_cmd(c, &cmd);
		if (ret || cmd == CMD_EXIT)
			return ret;
		if (cmd != CMD_PING || !c->awake) {
			fprintf(stderr, "%s: %s %s: unexpected command '%c'\n", SCALE_NAME,
				c->f.prov, c->f.role, cmd);
			return -FI_EINVAL;
		}
		ret = client_pingpong(c);
		if (ret)
			return ret;
	}
}

int scale_client_main(const struct scale_run *run, const char *role, size_t nep, bool awake,
		      int cmd_fd, int rep_fd)
{
	struct client c = {
		.f = {.prov = run->prov, .role = role, .rep_fd = rep_fd},
		.run = run,
		.cmd_fd = cmd_fd,
		.awake = awake,
		.nep = nep,
	};
	int ret;

	ret = client_run(&c);
	/* not available: choose_info reported it */
	if (ret && ret != -FI_ENODATA)
		report(&c.f, REC_FAIL);
	for (size_t i = 0; c.eps && i < c.nep; i++)
		close_ep(c.eps[i].av, c.eps[i].cq, c.eps[i].ep);
	free(c.eps);
	proc_fab_close(&c.f);
	return ret ? 1 : 0;
}
