/*
 * fi_scale_bench: the client processes of a run (scale_bench_procs.c forks them).
 *
 * A client process opens one fabric and domain, and per peer an AV, a CQ and an endpoint: a
 * CQ of its own per endpoint, so that reading one endpoint's CQ drives only that endpoint, as
 * if each peer were a process of its own. Once the main process says go, each endpoint posts
 * the receive of its ack and sends its hello; the process reads its endpoints' CQs until every
 * one has both completions. Then idle clients block reading the pipe, making no libfabric
 * call, until they are told to exit; the awake one runs the ping-pong when told.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_tagged.h>

#include "scale_bench.h"

#define CLIENT_CQ_SIZE 16
/* A client whose CQs gave nothing this many sweeps in a row sleeps SWEEP_SLEEP_US, so that
 * with more processes than CPUs the busy clients leave the server its CPU. */
#define IDLE_SWEEPS 16
#define SWEEP_SLEEP_US 100

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
