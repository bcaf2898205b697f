/*
 * fi_scale_bench: the server process of a run (scale_bench_procs.c forks it).
 *
 * The server holds one FI_EP_RDM endpoint. It keeps a window of tagged receives posted for
 * hellos, each carrying a peer's name; it inserts that name (one fi_av_insert per peer, as
 * fabtests' servers learn their clients) and answers with a tagged ack. The peer whose hello
 * says "awake" is the one it later answers pings from. Everything it does happens in one loop
 * that reads its CQ, posts what is owed, and looks at the main process's commands about once
 * a millisecond, so that the commands cost the measured paths nothing.
 */
#include "config.h"

#include <dirent.h>
#include <fcntl.h>
#include <malloc.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_tagged.h>

#include "scale_bench.h"

/* Hello receives the server keeps posted; more hellos wait in the provider as unexpected. */
#define SERVER_WINDOW 256
/* Pong sends outstanding at once; one is the rule, since the peer waits for each. */
#define PONG_OPS 4
#define CQ_BATCH 16
/* The server looks at its command pipe this often (microseconds), between CQ reads. */
#define CMD_CHECK_US 1000
/* ...and, while its peers leave, counts its fds this often. */
#define SETTLE_CHECK_US 10000
#define ACK_WORD 0x61636b61636b6163ULL

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
 * What server_post makes of a post that failed: a full queue (-FI_EAGAIN) is 0, the rest left
 * for the next turn of the loop, after a CQ read; any other error is said and returned.
 */
static int post_error(const struct server *s, ssize_t ret, const char *call)
{
	if (ret == -FI_EAGAIN)
		return 0;
	fab_err(&s->f, call, (int) ret);
	return (int) ret;
}

/*
 * Everything owed, in the order that keeps the ping-pong quick: the ping receive before the
 * pong (the next ping then finds it posted), hello receives, acks.
 */
static int server_post(struct server *s)
{
	struct fid_ep *ep = s->ep;
	void *desc = s->f.desc;
	ssize_t ret;

	if (!s->ping_posted) {
		ret = fi_trecv(ep, s->ping_buf, sizeof(*s->ping_buf), desc, FI_ADDR_UNSPEC,
			       SCALE_TAG_PING, 0, &s->ping_op.ctx);
		if (ret)
			return post_error(s, ret, "fi_trecv(ping)");
		s->ping_posted = true;
	}
	for (int i = 0; s->pongs_owed && i < PONG_OPS; i++) {
		struct op *op = &s->pong_ops[i];

		if (op->busy)
			continue;
		ret = fi_tsend(ep, s->tx_word, sizeof(*s->tx_word), desc, s->awake, SCALE_TAG_PONG,
			       &op->ctx);
		if (ret)
			return post_error(s, ret, "fi_tsend(pong)");
		op->busy = true;
		s->pongs_owed--;
	}
	while (s->nfree && s->posted_total < s->max_total) {
		size_t slot = s->free_slots[s->nfree - 1];

		ret = fi_trecv(ep, &s->hello_buf[slot], sizeof(struct hello), desc, FI_ADDR_UNSPEC,
			       SCALE_TAG_HELLO, 0, &s->hello_ops[slot].ctx);
		if (ret)
			return post_error(s, ret, "fi_trecv(hello)");
		s->nfree--;
		s->posted_total++;
	}
	while (s->acks_posted < s->served) {
		size_t i = s->acks_posted;

		ret = fi_tsend(ep, s->tx_word, sizeof(*s->tx_word), desc, s->peers[i],
			       SCALE_TAG_ACK, &s->ack_ops[i].ctx);
		if (ret)
			return post_error(s, ret, "fi_tsend(ack)");
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
