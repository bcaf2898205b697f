/*
 * RMA (fi_rma(3)) through the public API, between two endpoints of one process and with the
 * memory of another process: writes and reads of every size class (carried with the request, and read by
 * the core's RMA beyond the eager size), iov forms, remote CQ data, inject, the four counters
 * and a counter bound to a region; then what the target refuses (unknown or closed key, range
 * outside the region, region without the access): an error completion at the initiator, and
 * both endpoints working after it. Over tcp and net (run_over_net.sh).
 */
#include "config.h"

#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <rdma/fi_rma.h>

#include "tests/functional/common.h"

#define BIG (8u << 20)          /* above every eager size: read with the core's RMA */
#define MID (1u << 20)          /* with direct receive, placed straight as it arrives
				 * (FI_OFI_LAYER_RMA_EAGER_SIZE), above the eager size */
#define REGION (2 * BIG)

static struct fi_info *info;
static struct lt_dom dom;
static struct lt_ep x, y;
static fi_addr_t x_to_y, y_to_x;
static char *x_buf, *y_buf;     /* x's local buffer, y's registered region */
static struct fid_mr *y_mr, *y_ro_mr;
static char y_ro[64];           /* registered for remote reads only */
static struct fid_cntr *cntr_w, *cntr_r, *cntr_rw, *cntr_rr, *cntr_mr;

static struct fid_cntr *cntr_open(void)
{
	struct fi_cntr_attr attr = { .events = FI_CNTR_EVENTS_COMP };
	struct fid_cntr *c = NULL;

	if (fi_cntr_open(dom.domain, &attr, &c, NULL))
		return NULL;
	return c;
}

/* Waits for op's completion on x's transmit CQ: 0, or its error (positive). */
static int wait_tx(void *ctx)
{
	struct lt_comp comp;

	if (!lt_cq_next(&x.tx, &comp, LT_TIMEOUT_MS))
		return -1;
	if (comp.op_context != ctx)
		return -2;
	return comp.err;
}

static bool check_getinfo(void)
{
	const uint64_t want = FI_RMA | FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE;

	LT_CHECK((info->caps & want) == want, "fi_getinfo: FI_RMA with its four directions");
	LT_CHECK((info->tx_attr->caps & (FI_READ | FI_WRITE)) == (FI_READ | FI_WRITE) &&
		 !(info->tx_attr->caps & (FI_REMOTE_READ | FI_REMOTE_WRITE)),
		 "tx_attr: FI_READ and FI_WRITE only");
	LT_CHECK((info->rx_attr->caps & (FI_REMOTE_READ | FI_REMOTE_WRITE)) ==
		 (FI_REMOTE_READ | FI_REMOTE_WRITE) && !(info->rx_attr->caps & FI_WRITE),
		 "rx_attr: FI_REMOTE_READ and FI_REMOTE_WRITE only");
	return LT_CHECK_RET(info->tx_attr->rma_iov_limit, 1, "rma_iov_limit 1");
}

static bool setup(void)
{
	struct lt_ep_opts opts = { .no_enable = true };

	x_buf = malloc(REGION);
	y_buf = malloc(REGION);
	cntr_w = cntr_open();
	cntr_r = cntr_open();
	cntr_rw = cntr_open();
	cntr_rr = cntr_open();
	cntr_mr = cntr_open();
	if (!LT_CHECK(x_buf && y_buf && cntr_w && cntr_r && cntr_rw && cntr_rr && cntr_mr,
		      "buffers and counters"))
		return false;
	if (!LT_CHECK_RET(lt_ep_open(&dom, &opts, &x), 0, "open x") ||
	    !LT_CHECK_RET(lt_ep_open(&dom, &opts, &y), 0, "open y"))
		return false;
	if (!LT_CHECK_RET(fi_ep_bind(x.ep, &cntr_w->fid, FI_WRITE), 0, "bind FI_WRITE counter") ||
	    !LT_CHECK_RET(fi_ep_bind(x.ep, &cntr_r->fid, FI_READ), 0, "bind FI_READ counter") ||
	    !LT_CHECK_RET(fi_ep_bind(y.ep, &cntr_rw->fid, FI_REMOTE_WRITE), 0,
			  "bind FI_REMOTE_WRITE counter (FI_RMA_EVENT)") ||
	    !LT_CHECK_RET(fi_ep_bind(y.ep, &cntr_rr->fid, FI_REMOTE_READ), 0,
			  "bind FI_REMOTE_READ counter"))
		return false;
	LT_CHECK_RET(fi_ep_bind(y.ep, &cntr_rr->fid, FI_REMOTE_READ), -FI_EINVAL,
		     "a second FI_REMOTE_READ counter");
	if (!LT_CHECK_RET(lt_ep_enable(&x), 0, "enable x") ||
	    !LT_CHECK_RET(lt_ep_enable(&y), 0, "enable y") ||
	    !LT_CHECK_RET(lt_av_insert(&x, y.addr, &x_to_y), 0, "x knows y") ||
	    !LT_CHECK_RET(lt_av_insert(&y, x.addr, &y_to_x), 0, "y knows x"))
		return false;

	LT_CHECK_RET(fi_mr_reg(dom.domain, y_buf, REGION, FI_REMOTE_WRITE, 4, 1, 0, &y_mr, NULL),
		     -FI_EINVAL, "fi_mr_reg with a non-zero offset (reserved)");
	if (!LT_CHECK_RET(fi_mr_reg(dom.domain, y_buf, REGION, FI_REMOTE_WRITE | FI_REMOTE_READ,
				    0, 1, 0, &y_mr, NULL), 0, "register y's region, key 1") ||
	    !LT_CHECK_RET(fi_mr_reg(dom.domain, y_ro, sizeof(y_ro), FI_REMOTE_READ, 0, 2, 0,
				    &y_ro_mr, NULL), 0, "register a read-only region, key 2"))
		return false;
	LT_CHECK_RET(fi_mr_key(y_mr), 1, "the requested key is the key");
	{
		struct fid_mr *dup;

		LT_CHECK_RET(fi_mr_reg(dom.domain, y_ro, 8, FI_REMOTE_READ, 0, 1, 0, &dup, NULL),
			     -FI_ENOKEY, "a key in use is refused");
	}
	return LT_CHECK_RET(fi_mr_bind(y_mr, &cntr_mr->fid, FI_REMOTE_WRITE), 0,
			    "fi_mr_bind a counter to y's region");
}

/*
 * One write of len bytes to offset off of y's region, checked there. Without delivery
 * complete it may complete once the target has taken it (its data still arriving): the data
 * is then awaited. With FI_DELIVERY_COMPLETE it is there when the write completes.
 */
static void check_write_flags(size_t len, size_t off, uint64_t flags, const char *what)
{
	uint64_t before = fi_cntr_read(cntr_w), rbefore = fi_cntr_read(cntr_rw);
	struct iovec iov = { x_buf, len };
	struct fi_rma_iov rma = { .addr = off, .len = len, .key = 1 };
	struct fi_msg_rma msg = { .msg_iov = &iov, .iov_count = 1, .addr = x_to_y,
				  .rma_iov = &rma, .rma_iov_count = 1, .context = x_buf };
	size_t got;
	ssize_t ret;

	lt_fill(x_buf, len, len + off);
	memset(y_buf + off, 0, len);
	ret = LT_RETRY(fi_writemsg(x.ep, &msg, FI_COMPLETION | flags));
	if (!LT_CHECK_RET(ret, 0, "fi_write %s (%zu bytes)", what, len))
		return;
	LT_CHECK_RET(wait_tx(x_buf), 0, "fi_write %s completes", what);
	got = lt_verify(y_buf + off, len, len + off);
	if (flags & FI_DELIVERY_COMPLETE) {
		LT_CHECK_RET(got, len, "fi_write %s: the data is there at its completion", what);
	} else {
		for (uint64_t end = lt_now_ms() + LT_TIMEOUT_MS;
		     (got != len || fi_cntr_read(cntr_rw) == rbefore) && lt_now_ms() < end;
		     got = lt_verify(y_buf + off, len, len + off))
			lt_progress();
		LT_CHECK_RET(got, len, "fi_write %s: the data arrives", what);
	}
	LT_CHECK(fi_cntr_read(cntr_w) == before + 1 && fi_cntr_read(cntr_rw) == rbefore + 1,
		 "fi_write %s: FI_WRITE and FI_REMOTE_WRITE counted", what);
}

static void check_write(size_t len, size_t off, const char *what)
{
	char dc[64];

	check_write_flags(len, off, 0, what);
	snprintf(dc, sizeof(dc), "%s, delivery complete", what);
	check_write_flags(len, off, FI_DELIVERY_COMPLETE, dc);
}

static void check_read(size_t len, size_t off, const char *what)
{
	uint64_t before = fi_cntr_read(cntr_r), rbefore = fi_cntr_read(cntr_rr);
	ssize_t ret;

	lt_fill(y_buf + off, len, 3 * len + off);
	memset(x_buf, 0, len);
	ret = LT_RETRY(fi_read(x.ep, x_buf, len, NULL, x_to_y, off, 1, x_buf));
	if (!LT_CHECK_RET(ret, 0, "fi_read %s (%zu bytes)", what, len))
		return;
	LT_CHECK_RET(wait_tx(x_buf), 0, "fi_read %s completes", what);
	LT_CHECK_RET(lt_verify(x_buf, len, 3 * len + off), len, "fi_read %s: the data is here",
		     what);
	LT_CHECK(fi_cntr_read(cntr_r) == before + 1 && fi_cntr_read(cntr_rr) == rbefore + 1,
		 "fi_read %s: FI_READ and FI_REMOTE_READ counted", what);
}

static void check_iov_forms(void)
{
	struct iovec iov[3] = { { x_buf, 100 }, { x_buf + 1000, 5000 }, { x_buf + 9000, 3 } };
	struct fi_rma_iov rma = { .addr = 64, .len = 5103, .key = 1 };
	struct fi_msg_rma msg = { .msg_iov = iov, .iov_count = 3, .addr = x_to_y,
				  .rma_iov = &rma, .rma_iov_count = 1, .context = x_buf,
				  .data = 0x1234 };
	struct lt_comp comp;
	size_t i, off = 0;

	lt_fill(x_buf, REGION / 2, 77);
	memset(y_buf, 0, 8192);
	LT_CHECK_RET(LT_RETRY(fi_writemsg(x.ep, &msg, FI_REMOTE_CQ_DATA | FI_COMPLETION |
					  FI_DELIVERY_COMPLETE)), 0,
		     "fi_writemsg of three iovs with remote CQ data, delivery complete");
	LT_CHECK_RET(wait_tx(x_buf), 0, "fi_writemsg completes");
	for (i = 0; i < 3; i++) {
		LT_CHECK(!memcmp(y_buf + 64 + off, iov[i].iov_base, iov[i].iov_len),
			 "fi_writemsg: iov %zu in place", i);
		off += iov[i].iov_len;
	}
	if (LT_CHECK(lt_cq_next(&y.rx, &comp, LT_TIMEOUT_MS), "the target's CQ has an entry"))
		LT_CHECK(comp.err == 0 && comp.data == 0x1234 && comp.len == 5103 &&
			 (comp.flags & (FI_RMA | FI_REMOTE_WRITE | FI_REMOTE_CQ_DATA)) ==
			 (FI_RMA | FI_REMOTE_WRITE | FI_REMOTE_CQ_DATA),
			 "with the data, the length and FI_RMA|FI_REMOTE_WRITE|FI_REMOTE_CQ_DATA");
	LT_CHECK_RET(lt_cq_quiet(&y.rx, 50), 0, "a write without data leaves no entry there");

	/* readv into three iovs */
	memset(x_buf, 0, 10000);
	LT_CHECK_RET(LT_RETRY(fi_readv(x.ep, iov, NULL, 3, x_to_y, 64, 1, x_buf)), 0,
		     "fi_readv into three iovs");
	LT_CHECK_RET(wait_tx(x_buf), 0, "fi_readv completes");
	off = 0;
	for (i = 0; i < 3; i++) {
		LT_CHECK(!memcmp(y_buf + 64 + off, iov[i].iov_base, iov[i].iov_len),
			 "fi_readv: iov %zu filled", i);
		off += iov[i].iov_len;
	}

	/* inject: no completion, counted; the buffer may change at once */
	{
		uint64_t before = fi_cntr_read(cntr_w);
		char small[40] = "injected";

		LT_CHECK_RET(LT_RETRY(fi_inject_write(x.ep, small, sizeof(small), x_to_y, 9000, 1)),
			     0, "fi_inject_write");
		memset(small, 'z', sizeof(small));
		for (uint64_t end = lt_now_ms() + LT_TIMEOUT_MS;
		     (fi_cntr_read(cntr_w) == before || strcmp(y_buf + 9000, "injected")) &&
		     lt_now_ms() < end;)
			lt_progress();
		LT_CHECK(!strcmp(y_buf + 9000, "injected"), "fi_inject_write: the data arrives");
		LT_CHECK_RET(lt_cq_quiet(&x.tx, 20), 0, "fi_inject_write: no completion");
	}
}

/* What the target refuses fails at the initiator with the reason; nothing else breaks. */
static void check_refused(void)
{
	struct fid_mr *gone;
	char tmp[64];

	LT_CHECK_RET(LT_RETRY(fi_write(x.ep, x_buf, 8, NULL, x_to_y, 0, 99, x_buf)), 0,
		     "a write to an unknown key is posted");
	LT_CHECK_RET(wait_tx(x_buf), FI_ENOKEY, "and fails with FI_ENOKEY");
	LT_CHECK_RET(LT_RETRY(fi_read(x.ep, x_buf, 64, NULL, x_to_y, REGION - 32, 1, x_buf)), 0,
		     "a read past the region's end is posted");
	LT_CHECK_RET(wait_tx(x_buf), FI_EACCES, "and fails with FI_EACCES");
	LT_CHECK_RET(LT_RETRY(fi_write(x.ep, x_buf, BIG, NULL, x_to_y, BIG + 1, 1, x_buf)), 0,
		     "a large write past the region's end is posted");
	LT_CHECK_RET(wait_tx(x_buf), FI_EACCES, "and fails with FI_EACCES");
	LT_CHECK_RET(LT_RETRY(fi_write(x.ep, x_buf, MID, NULL, x_to_y, REGION - MID + 1, 1,
				       x_buf)), 0,
		     "a write of 1 MiB past the region's end is posted");
	LT_CHECK_RET(wait_tx(x_buf), FI_EACCES, "and fails with FI_EACCES");
	LT_CHECK_RET(LT_RETRY(fi_read(x.ep, x_buf, MID, NULL, x_to_y, REGION - MID + 1, 1,
				      x_buf)), 0,
		     "a read of 1 MiB past the region's end is posted");
	LT_CHECK_RET(wait_tx(x_buf), FI_EACCES, "and fails with FI_EACCES");
	LT_CHECK_RET(LT_RETRY(fi_write(x.ep, x_buf, 8, NULL, x_to_y, 0, 2, x_buf)), 0,
		     "a write to a read-only region is posted");
	LT_CHECK_RET(wait_tx(x_buf), FI_EACCES, "and fails with FI_EACCES");
	if (LT_CHECK_RET(fi_mr_reg(dom.domain, tmp, sizeof(tmp), FI_REMOTE_READ, 0, 3, 0, &gone,
				   NULL), 0, "register key 3") &&
	    LT_CHECK_RET(fi_close(&gone->fid), 0, "and close it")) {
		LT_CHECK_RET(LT_RETRY(fi_read(x.ep, x_buf, 8, NULL, x_to_y, 0, 3, x_buf)), 0,
			     "a read of the closed region is posted");
		LT_CHECK_RET(wait_tx(x_buf), FI_ENOKEY, "and fails with FI_ENOKEY");
	}
	check_write(100, 0, "after the refusals");
}

static void check_bad_arguments(void)
{
	struct iovec iov = { x_buf, 8 };
	struct fi_rma_iov rma[2] = { { 0, 8, 1 }, { 8, 8, 1 } };
	struct fi_msg_rma msg = { .msg_iov = &iov, .iov_count = 1, .addr = x_to_y,
				  .rma_iov = rma, .rma_iov_count = 2 };

	LT_CHECK_RET(fi_writemsg(x.ep, &msg, 0), -FI_EINVAL, "two target ranges");
	msg.rma_iov_count = 1;
	rma[0].len = 9;
	LT_CHECK_RET(fi_writemsg(x.ep, &msg, 0), -FI_EINVAL, "lengths that differ");
	LT_CHECK_RET(fi_readmsg(x.ep, &msg, FI_INJECT), -FI_EINVAL, "a read with FI_INJECT");
	LT_CHECK_RET(fi_writemsg(x.ep, &msg, FI_MULTI_RECV), -FI_EBADFLAGS, "a receive flag");
	LT_CHECK_RET(fi_writemsg(x.ep, NULL, 0), -FI_EINVAL, "no message");
	LT_CHECK_RET(fi_inject_write(x.ep, x_buf, 4096, x_to_y, 0, 1), -FI_EMSGSIZE,
		     "an inject above inject_size");
	LT_CHECK_RET(fi_write(x.ep, x_buf, 8, NULL, 12345, 0, 1, NULL), -FI_EINVAL,
		     "an address outside the AV");
}

/*
 * Another process's memory: the child registers a region (key 7), says its address, and
 * makes progress until told to check its region ('v', answered with the offset of the first
 * wrong byte) or to go ('q').
 */
static int target_main(int rfd, int wfd)
{
	struct lt_ep t;
	struct fid_mr *mr;
	char *region = malloc(REGION);
	char cmd;

	if (!region || lt_dom_open(info, &dom) || lt_ep_open(&dom, NULL, &t) ||
	    fi_mr_reg(dom.domain, region, REGION, FI_REMOTE_READ | FI_REMOTE_WRITE, 0, 7, 0, &mr,
		      NULL))
		return 1;
	lt_fill(region, REGION, 5);
	if (lt_pipe_send(wfd, t.addr, t.addrlen))
		return 1;
	for (;;) {
		struct pollfd pfd = { .fd = rfd, .events = POLLIN };
		size_t bad;

		if (poll(&pfd, 1, 0) <= 0) {
			lt_progress();
			continue;
		}
		if (lt_pipe_recv(rfd, &cmd, 1, LT_TIMEOUT_MS) != 1 || cmd == 'q')
			break;
		bad = lt_verify(region, MID, 9);
		lt_pipe_send(wfd, &bad, sizeof(bad));
	}
	fi_close(&mr->fid);
	lt_ep_close(&t);
	lt_dom_close(&dom);
	free(region);
	return 0;
}

static void check_two_processes(void)
{
	struct lt_child child;
	char addr[LT_ADDR_MAX], cmd;
	fi_addr_t peer;
	ssize_t len;
	size_t bad = 0;

	if (!LT_CHECK_RET(lt_child_spawn("target", &child), 0, "start a target process"))
		return;
	len = lt_pipe_recv(child.from_child, addr, sizeof(addr), LT_TIMEOUT_MS);
	if (!LT_CHECK(len > 0, "its address") ||
	    !LT_CHECK_RET(lt_av_insert(&x, addr, &peer), 0, "inserted"))
		goto out;
	memset(x_buf, 0, BIG);
	LT_CHECK_RET(LT_RETRY(fi_read(x.ep, x_buf, BIG, NULL, peer, 0, 7, x_buf)), 0,
		     "read 1 MiB of the other process's region");
	LT_CHECK_RET(wait_tx(x_buf), 0, "the read completes");
	LT_CHECK_RET(lt_verify(x_buf, BIG, 5), BIG, "with the other process's data");
	lt_fill(x_buf, MID, 9);
	{
		struct iovec iov = { x_buf, MID };
		struct fi_rma_iov rma = { .addr = 0, .len = MID, .key = 7 };
		struct fi_msg_rma msg = { .msg_iov = &iov, .iov_count = 1, .addr = peer,
					  .rma_iov = &rma, .rma_iov_count = 1, .context = x_buf };

		LT_CHECK_RET(LT_RETRY(fi_writemsg(x.ep, &msg, FI_COMPLETION |
						  FI_DELIVERY_COMPLETE)), 0,
			     "write 1 MiB into it, delivery complete");
	}
	LT_CHECK_RET(wait_tx(x_buf), 0, "the write completes");
	cmd = 'v';
	if (!lt_pipe_send(child.to_child, &cmd, 1) &&
	    lt_pipe_recv(child.from_child, &bad, sizeof(bad), LT_TIMEOUT_MS) == sizeof(bad))
		LT_CHECK_RET(bad, MID, "the other process finds the data in its region");
	LT_CHECK_RET(LT_RETRY(fi_write(x.ep, x_buf, 8, NULL, peer, 0, 8, x_buf)), 0,
		     "a write to a key the other process never registered");
	LT_CHECK_RET(wait_tx(x_buf), FI_ENOKEY, "fails with FI_ENOKEY");
out:
	cmd = 'q';
	lt_pipe_send(child.to_child, &cmd, 1);
	LT_CHECK_RET(lt_child_reap(&child, LT_TIMEOUT_MS, false), 0,
		     "the target process ends well");
}

int main(int argc, char **argv)
{
	struct fi_info *hints;
	const char *role;
	int rfd, wfd;

	hints = lt_hints(FI_MSG | FI_RMA | FI_RMA_EVENT);
	role = lt_child_role(argc, argv, &rfd, &wfd);
	if (role) {
		int ret;

		info = lt_getinfo_or_skip(hints);
		ret = target_main(rfd, wfd);
		fi_freeinfo(info);
		fi_freeinfo(hints);
		return ret;
	}
	lt_begin("rma");
	info = lt_getinfo_or_skip(hints);
	if (!check_getinfo() || !LT_CHECK_RET(lt_dom_open(info, &dom), 0, "open the domain"))
		return lt_end();
	if (setup()) {
		check_write(8, 0, "inline");
		check_write(200, 4000, "inline, offset");
		check_write(4096, 123, "eager");
		check_write(60000, 7, "eager, large");
		check_write(MID, 3, "of 1 MiB");
		check_write(BIG, 1, "by the core's RMA");
		check_write(0, 0, "of nothing");
		check_read(8, 0, "small");
		check_read(4096, 99, "eager");
		check_read(MID, 3, "of 1 MiB");
		check_read(BIG, 5, "by the core's RMA");
		LT_CHECK(fi_cntr_read(cntr_mr) >= 6, "the counter bound to the region counted "
			 "its writes (%lu)", (unsigned long) fi_cntr_read(cntr_mr));
		check_iov_forms();
		check_refused();
		check_bad_arguments();
		check_two_processes();
	}
	if (y_mr)
		LT_CHECK_RET(fi_close(&cntr_mr->fid), -FI_EBUSY, "a counter bound to a region "
			     "cannot close");
	if (y_mr)
		fi_close(&y_mr->fid);
	if (y_ro_mr)
		fi_close(&y_ro_mr->fid);
	lt_ep_close(&x);
	lt_ep_close(&y);
	for (struct fid_cntr **c = (struct fid_cntr *[]) { cntr_w, cntr_r, cntr_rw, cntr_rr,
							    cntr_mr, NULL }; *c; c++)
		fi_close(&(*c)->fid);
	lt_dom_close(&dom);
	free(x_buf);
	free(y_buf);
	fi_freeinfo(info);
	fi_freeinfo(hints);
	return lt_end();
}
