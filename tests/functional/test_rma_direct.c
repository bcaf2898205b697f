/*
 * Direct RMA (fi_layer(7) "Direct RMA"): over a connected core with RMA (tcp), a target that
 * has checked a peer's request grants the region, and the peer's later writes and reads of it
 * go on the core's own RMA. Through the public API, between endpoints of one process whose
 * target endpoints count no remote accesses:
 * - after a first write and read, a write completes while the target makes no progress at all
 *   (a write carried as a message completes only on the target's answer), and its data is
 *   there once the target progresses;
 * - writes and reads of every size (inject, eager, 1 MiB, 8 MiB), iov forms, fi_inject_write,
 *   fenced reads, and the requests that need the target (remote CQ data, delivery complete);
 * - what the grant does not cover fails at the initiator, the connection carrying on: a range
 *   past the region's end, a write to a region granted for reads only;
 * - atomics: the write form to a granted region completes with no target progress, and a read
 *   posted right after it sees it applied (it waits for the target's answer to something
 *   sent after the atomic before it goes on the core's RMA);
 * - revocation: a region that closes, once the target has sent the initiator a message after
 *   the close, refuses the initiator's writes and reads with FI_ENOKEY, through both target
 *   endpoints it was granted by; a region that gets a counter (fi_mr_bind) counts the
 *   initiator's next write. Without the REVOKE those writes would go on the core's RMA:
 *   the first would complete as if nothing were wrong, the second would not be counted.
 * And keys: the application's are never the core's (a FI_MR_BASIC domain's requested keys
 * may repeat; any requested key is taken elsewhere).
 * With FI_OFI_LAYER_DIRECT_RMA=0 (run_rma_paths.sh), or over an RDM core (run_over_net.sh),
 * the same checks hold with every request going as a message, except the first, which needs
 * the core's RMA and is skipped.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rdma/fi_atomic.h>
#include <rdma/fi_rma.h>

#include "tests/functional/common.h"

#define REGION (16u << 20)
#define MID (1u << 20)
#define BIG (8u << 20)

enum { KEY_RW = 21, KEY_RO, KEY_CLOSED, KEY_COUNTED };

#define MR_BASIC 1              /* FI_MR_BASIC */

static struct fi_info *info;
static struct lt_dom dom;
static struct lt_ep x, y, y2;   /* x: the initiator; y, y2: target endpoints of one domain */
static fi_addr_t x_to_y, x_to_y2, y_to_x, y2_to_x;
static char *x_buf, *y_buf, *y_closed, *y_counted;
static char y_ro[4096];
static struct fid_mr *mr_rw, *mr_ro, *mr_closed, *mr_counted;
static struct fid_cntr *cntr;
static bool is_direct;          /* grants are on (FI_OFI_LAYER_DIRECT_RMA not 0) */

/* x's next transmit completion, every endpoint progressing: 0, its error, or -1 (none). */
static int wait_tx(void *ctx)
{
	struct lt_comp comp;

	if (!lt_cq_next(&x.tx, &comp, LT_TIMEOUT_MS))
		return -1;
	return comp.op_context == ctx ? comp.err : -2;
}

/* As wait_tx, with only x progressing: the target's endpoints do nothing meanwhile. */
static int wait_tx_alone(void *ctx)
{
	struct fi_cq_tagged_entry entry;     /* the format lt_cq_open asks for */
	struct fi_cq_err_entry err;
	ssize_t ret;

	for (uint64_t end = lt_now_ms() + LT_TIMEOUT_MS; lt_now_ms() < end;) {
		ret = fi_cq_read(x.tx.cq, &entry, 1);
		if (ret == 1)
			return entry.op_context == ctx ? 0 : -2;
		if (ret == -FI_EAVAIL) {
			memset(&err, 0, sizeof(err));
			fi_cq_readerr(x.tx.cq, &err, 0);
			return err.err;
		}
	}
	return -1;
}

/* Progresses everything until buf holds the pattern of seed (bounded): what lt_verify says. */
static size_t await_data(const char *buf, size_t len, uint64_t seed)
{
	size_t got = lt_verify(buf, len, seed);

	for (uint64_t end = lt_now_ms() + LT_TIMEOUT_MS; got != len && lt_now_ms() < end;
	     got = lt_verify(buf, len, seed))
		lt_progress();
	return got;
}

static int do_write(const void *buf, size_t len, fi_addr_t dest, uint64_t addr, uint64_t key)
{
	if (LT_RETRY(fi_write(x.ep, buf, len, NULL, dest, addr, key, x_buf)))
		return -3;
	return wait_tx(x_buf);
}

static int do_read(void *buf, size_t len, fi_addr_t src, uint64_t addr, uint64_t key)
{
	if (LT_RETRY(fi_read(x.ep, buf, len, NULL, src, addr, key, x_buf)))
		return -3;
	return wait_tx(x_buf);
}

/* A message from y (or y2) to x, received: whatever y sent before it is in at x. */
static bool message_to_x(struct lt_ep *from, fi_addr_t from_to_x, const char *what)
{
	char out[16] = "after", in[16] = "";
	struct lt_comp comp;

	if (!LT_CHECK_RET(lt_recv(&x, in, sizeof(in), FI_ADDR_UNSPEC, in), 0,
			  "x posts a receive (%s)", what) ||
	    !LT_CHECK_RET(lt_send(from, out, sizeof(out), from_to_x, out), 0,
			  "the target sends x a message (%s)", what))
		return false;
	return LT_CHECK(lt_cq_next(&x.rx, &comp, LT_TIMEOUT_MS) && !comp.err &&
			lt_cq_next(&from->tx, &comp, LT_TIMEOUT_MS) && !strcmp(in, "after"),
			"x has it (%s)", what);
}

static bool setup(void)
{
	struct fi_cntr_attr attr = { .events = FI_CNTR_EVENTS_COMP };
	struct lt_ep_opts opts = { .no_enable = true };
	const char *env = getenv("FI_OFI_LAYER_DIRECT_RMA");

	is_direct = (!env || strcmp(env, "0")) && lt_core_is_msg();
	/* zeroed: a check reads the target's memory before the data it waits for is in */
	x_buf = calloc(1, REGION);
	y_buf = calloc(1, REGION);
	y_closed = calloc(1, MID);
	y_counted = calloc(1, MID);
	if (!LT_CHECK(x_buf && y_buf && y_closed && y_counted, "buffers") ||
	    !LT_CHECK_RET(lt_pair_open(&dom, NULL, NULL, &x, &y, &x_to_y, &y_to_x), 0,
			  "open x and y") ||
	    !LT_CHECK_RET(lt_ep_open(&dom, &opts, &y2), 0, "open y2") ||
	    !LT_CHECK_RET(lt_ep_enable(&y2), 0, "enable y2") ||
	    !LT_CHECK_RET(lt_av_insert(&x, y2.addr, &x_to_y2), 0, "x knows y2") ||
	    !LT_CHECK_RET(lt_av_insert(&y2, x.addr, &y2_to_x), 0, "y2 knows x"))
		return false;
	return LT_CHECK_RET(fi_mr_reg(dom.domain, y_buf, REGION, FI_REMOTE_WRITE | FI_REMOTE_READ,
				      0, KEY_RW, 0, &mr_rw, NULL), 0, "register y's region") &&
	       LT_CHECK_RET(fi_mr_reg(dom.domain, y_ro, sizeof(y_ro), FI_REMOTE_READ, 0, KEY_RO, 0,
				      &mr_ro, NULL), 0, "and a read-only one") &&
	       LT_CHECK_RET(fi_mr_reg(dom.domain, y_closed, MID, FI_REMOTE_WRITE | FI_REMOTE_READ,
				      0, KEY_CLOSED, 0, &mr_closed, NULL), 0,
			    "and one to close") &&
	       LT_CHECK_RET(fi_mr_reg(dom.domain, y_counted, MID, FI_REMOTE_WRITE, 0,
				      KEY_COUNTED, 0, &mr_counted, NULL), 0,
			    "and one to count") &&
	       LT_CHECK_RET(fi_cntr_open(dom.domain, &attr, &cntr, NULL), 0, "a counter");
}

/* The first write and read go as messages; a write after them needs no target progress. */
static void check_granted(void)
{
	lt_fill(x_buf, 4096, 1);
	LT_CHECK_RET(do_write(x_buf, 4096, x_to_y, 0, KEY_RW), 0, "a first write");
	LT_CHECK_RET(await_data(y_buf, 4096, 1), 4096, "its data is there");
	/* the target grants before it answers the read: the grant is in once the read is */
	LT_CHECK_RET(do_read(x_buf, 4096, x_to_y, 0, KEY_RW), 0, "a first read");
	if (!is_direct) {
		lt_note("no grants here (FI_OFI_LAYER_DIRECT_RMA=0, or not a connected core): "
			"every request goes as a message");
		return;
	}
	lt_fill(x_buf, 65536, 2);
	LT_CHECK_RET(LT_RETRY(fi_write(x.ep, x_buf, 65536, NULL, x_to_y, 4096, KEY_RW, x_buf)),
		     0, "a write of 64 KiB");
	LT_CHECK_RET(wait_tx_alone(x_buf), 0,
		     "completes while the target does nothing (the core's RMA write)");
	LT_CHECK_RET(await_data(y_buf + 4096, 65536, 2), 65536,
		     "its data is there once the target progresses");
}

static void check_sizes(void)
{
	static const size_t sizes[] = { 1, 8, 100, 128, 129, 256, 4096, 60000, MID, BIG };
	size_t i, len, off;

	for (i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		len = sizes[i];
		off = 3 * i + 1;
		lt_fill(x_buf, len, 10 + i);
		LT_CHECK_RET(do_write(x_buf, len, x_to_y, off, KEY_RW), 0, "write %zu bytes", len);
		LT_CHECK_RET(await_data(y_buf + off, len, 10 + i), len, "write %zu: in place",
			     len);
		lt_fill(y_buf + off + 7, len, 30 + i);
		memset(x_buf, 0, len);
		LT_CHECK_RET(do_read(x_buf, len, x_to_y, off + 7, KEY_RW), 0, "read %zu bytes",
			     len);
		LT_CHECK_RET(lt_verify(x_buf, len, 30 + i), len, "read %zu: the data is here",
			     len);
	}
}

static void check_forms(void)
{
	struct iovec iov[3] = { { x_buf, 100 }, { x_buf + 1000, 5000 }, { x_buf + 9000, 3 } };
	char small[40] = "injected directly";
	static char want[5103];
	struct lt_comp comp;
	size_t i, off;

	lt_fill(x_buf, 10000, 40);
	memset(y_buf, 0, 8192);
	LT_CHECK_RET(LT_RETRY(fi_writev(x.ep, iov, NULL, 3, x_to_y, 64, KEY_RW, x_buf)), 0,
		     "fi_writev of three iovs");
	LT_CHECK_RET(wait_tx(x_buf), 0, "completes");
	for (i = 0, off = 0; i < 3; off += iov[i].iov_len, i++)
		memcpy(want + off, iov[i].iov_base, iov[i].iov_len);
	for (uint64_t end = lt_now_ms() + LT_TIMEOUT_MS;
	     memcmp(y_buf + 64, want, sizeof(want)) && lt_now_ms() < end;)
		lt_progress();
	LT_CHECK(!memcmp(y_buf + 64, want, sizeof(want)), "the three iovs in place, in order");
	memset(x_buf, 0, 10000);
	LT_CHECK_RET(LT_RETRY(fi_readv(x.ep, iov, NULL, 3, x_to_y, 64, KEY_RW, x_buf)), 0,
		     "fi_readv into three iovs");
	LT_CHECK_RET(wait_tx(x_buf), 0, "completes");
	for (i = 0, off = 0; i < 3; off += iov[i].iov_len, i++)
		LT_CHECK(!memcmp(y_buf + 64 + off, iov[i].iov_base, iov[i].iov_len),
			 "iov %zu filled", i);

	LT_CHECK_RET(LT_RETRY(fi_inject_write(x.ep, small, sizeof(small), x_to_y, 9000, KEY_RW)),
		     0, "fi_inject_write");
	memset(small, 'z', sizeof(small));
	for (uint64_t end = lt_now_ms() + LT_TIMEOUT_MS;
	     strcmp(y_buf + 9000, "injected directly") && lt_now_ms() < end;)
		lt_progress();
	LT_CHECK(!strcmp(y_buf + 9000, "injected directly"), "its data arrives, as it was");
	LT_CHECK_RET(lt_cq_quiet(&x.tx, 20), 0, "and it has no completion");

	/* a fenced read waits for the write before it */
	lt_fill(x_buf, 4096, 41);
	LT_CHECK_RET(LT_RETRY(fi_write(x.ep, x_buf, 4096, NULL, x_to_y, 20000, KEY_RW, NULL)), 0,
		     "a write");
	{
		struct iovec riov = { x_buf + 8192, 4096 };
		struct fi_rma_iov rma = { .addr = 20000, .len = 4096, .key = KEY_RW };
		struct fi_msg_rma msg = { .msg_iov = &riov, .iov_count = 1, .addr = x_to_y,
					  .rma_iov = &rma, .rma_iov_count = 1,
					  .context = x_buf + 8192 };

		LT_CHECK_RET(LT_RETRY(fi_readmsg(x.ep, &msg, FI_FENCE | FI_COMPLETION)), 0,
			     "then a read of it with FI_FENCE");
	}
	LT_CHECK(lt_cq_next(&x.tx, &comp, LT_TIMEOUT_MS) && !comp.err &&
		 lt_cq_next(&x.tx, &comp, LT_TIMEOUT_MS) && !comp.err &&
		 comp.op_context == x_buf + 8192, "both complete, the read last");
	LT_CHECK_RET(lt_verify(x_buf + 8192, 4096, 41), 4096, "the read has the write's data");

	/* what needs the target goes to it: remote CQ data, delivery complete */
	lt_fill(x_buf, 3000, 42);
	LT_CHECK_RET(LT_RETRY(fi_writedata(x.ep, x_buf, 3000, NULL, 0xabc, x_to_y, 30000, KEY_RW,
					   x_buf)), 0, "fi_writedata");
	LT_CHECK_RET(wait_tx(x_buf), 0, "completes");
	LT_CHECK(lt_cq_next(&y.rx, &comp, LT_TIMEOUT_MS) && !comp.err && comp.data == 0xabc &&
		 (comp.flags & FI_REMOTE_CQ_DATA), "the target has its remote CQ data");
	LT_CHECK_RET(lt_verify(y_buf + 30000, 3000, 42), 3000, "and its data");
	{
		struct iovec wiov = { x_buf, 5000 };
		struct fi_rma_iov rma = { .addr = 40000, .len = 5000, .key = KEY_RW };
		struct fi_msg_rma msg = { .msg_iov = &wiov, .iov_count = 1, .addr = x_to_y,
					  .rma_iov = &rma, .rma_iov_count = 1, .context = x_buf };

		lt_fill(x_buf, 5000, 43);
		LT_CHECK_RET(LT_RETRY(fi_writemsg(x.ep, &msg, FI_DELIVERY_COMPLETE |
						  FI_COMPLETION)), 0,
			     "a write with FI_DELIVERY_COMPLETE");
		LT_CHECK_RET(wait_tx(x_buf), 0, "completes");
		LT_CHECK_RET(lt_verify(y_buf + 40000, 5000, 43), 5000,
			     "its data was in place when it did");
	}
}

/* What the grants do not cover is refused as ever; the connection carries on. */
static void check_outside(void)
{
	LT_CHECK_RET(do_write(x_buf, 64, x_to_y, REGION - 32, KEY_RW), FI_EACCES,
		     "a write across the region's end fails with FI_EACCES");
	LT_CHECK_RET(do_read(x_buf, MID, x_to_y, REGION - MID + 1, KEY_RW), FI_EACCES,
		     "a read of 1 MiB across it too");
	LT_CHECK_RET(do_read(x_buf, 64, x_to_y, 0, KEY_RO), 0, "a read of the read-only region");
	LT_CHECK_RET(do_read(x_buf, 64, x_to_y, 64, KEY_RO), 0, "and another");
	LT_CHECK_RET(do_write(x_buf, 64, x_to_y, 0, KEY_RO), FI_EACCES,
		     "a write to it fails with FI_EACCES");
	lt_fill(x_buf, 4096, 50);
	LT_CHECK_RET(do_write(x_buf, 4096, x_to_y, 100, KEY_RW), 0, "a write after the refusals");
	LT_CHECK_RET(await_data(y_buf + 100, 4096, 50), 4096, "lands");
}

/* A region that closes: its grants end before the target's next message. */
static void check_closed(void)
{
	int i;

	/* granted through y and through y2 */
	for (i = 0; i < 2; i++) {
		fi_addr_t dest = i ? x_to_y2 : x_to_y;

		lt_fill(x_buf, 8192, 60 + i);
		LT_CHECK_RET(do_write(x_buf, 8192, dest, 0, KEY_CLOSED), 0,
			     "a write to the region to close, through y%s", i ? "2" : "");
		LT_CHECK_RET(do_read(x_buf, 8192, dest, 0, KEY_CLOSED), 0, "a read of it");
		LT_CHECK_RET(do_write(x_buf, 8192, dest, 0, KEY_CLOSED), 0, "another write");
		LT_CHECK_RET(await_data(y_closed, 8192, 60 + i), 8192, "in place");
	}
	if (!LT_CHECK_RET(fi_close(&mr_closed->fid), 0, "the target closes the region"))
		return;
	mr_closed = NULL;
	/* each connection in its own order: a message on each */
	if (!message_to_x(&y, y_to_x, "after the close") ||
	    !message_to_x(&y2, y2_to_x, "from y2 after the close"))
		return;
	LT_CHECK_RET(do_write(x_buf, 8192, x_to_y, 0, KEY_CLOSED), FI_ENOKEY,
		     "then x's write fails with FI_ENOKEY");
	LT_CHECK_RET(do_read(x_buf, 8, x_to_y, 0, KEY_CLOSED), FI_ENOKEY, "its read too");
	LT_CHECK_RET(do_write(x_buf, 128, x_to_y2, 0, KEY_CLOSED), FI_ENOKEY,
		     "and its write through y2 (whose endpoint revoked its grant too)");
	lt_fill(x_buf, 4096, 62);
	LT_CHECK_RET(do_write(x_buf, 4096, x_to_y, 200, KEY_RW), 0,
		     "a write to the other region still goes");
	LT_CHECK_RET(await_data(y_buf + 200, 4096, 62), 4096, "and lands");
}

/* A region that gets a counter: the initiator's next write is counted. */
static void check_counted(void)
{
	lt_fill(x_buf, 4096, 70);
	LT_CHECK_RET(do_write(x_buf, 4096, x_to_y, 0, KEY_COUNTED), 0, "a write to a region");
	LT_CHECK_RET(do_write(x_buf, 4096, x_to_y, 0, KEY_COUNTED), 0, "and another");
	LT_CHECK_RET(await_data(y_counted, 4096, 70), 4096, "in place");
	if (!LT_CHECK_RET(fi_mr_bind(mr_counted, &cntr->fid, FI_REMOTE_WRITE), 0,
			  "the target binds a counter to it") ||
	    !message_to_x(&y, y_to_x, "after the bind"))
		return;
	lt_fill(x_buf, 4096, 71);
	LT_CHECK_RET(do_write(x_buf, 4096, x_to_y, 0, KEY_COUNTED), 0, "x writes to it again");
	for (uint64_t end = lt_now_ms() + LT_TIMEOUT_MS;
	     fi_cntr_read(cntr) < 1 && lt_now_ms() < end;)
		lt_progress();
	LT_CHECK_RET(fi_cntr_read(cntr), 1, "the counter counts that write");
	LT_CHECK_RET(lt_verify(y_counted, 4096, 71), 4096, "its data is in place");
}

/* An 8-byte atomic of x at off of y's region: posted (fi_atomicmsg with flags). */
static ssize_t post_sum(uint64_t *operand, uint64_t *result, size_t off, uint64_t flags)
{
	struct fi_ioc ioc = { .addr = operand, .count = 1 };
	struct fi_ioc res = { .addr = result, .count = 1 };
	struct fi_rma_ioc rma = { .addr = off, .count = 1, .key = KEY_RW };
	struct fi_msg_atomic msg = { .msg_iov = &ioc, .iov_count = 1, .addr = x_to_y,
				     .rma_iov = &rma, .rma_iov_count = 1,
				     .datatype = FI_UINT64, .op = FI_SUM, .context = x_buf };

	if (result)
		return LT_RETRY(fi_fetch_atomicmsg(x.ep, &msg, &res, NULL, 1, flags | FI_COMPLETION));
	return LT_RETRY(fi_atomicmsg(x.ep, &msg, flags | FI_COMPLETION));
}

/*
 * Atomics to a granted region: the write form needs no answer (it completes as sent), and
 * the core's RMA after it waits until the target has surely applied it.
 */
static void check_atomics(void)
{
	const size_t off = 50000;
	uint64_t one = 1, five = 5, old = 0, got = 0;

	memset(y_buf + off, 0, 64);
	LT_CHECK_RET(post_sum(&one, &old, off, 0), 0, "a fetching sum");
	LT_CHECK(wait_tx(x_buf) == 0 && old == 0, "completes with the old value");
	if (is_direct) {
		LT_CHECK_RET(post_sum(&five, NULL, off, 0), 0, "a sum");
		LT_CHECK_RET(wait_tx_alone(x_buf), 0, "completes while the target does nothing");
		/* the target's core would serve the read before the sum is taken */
		LT_CHECK_RET(LT_RETRY(fi_read(x.ep, &got, 8, NULL, x_to_y, off, KEY_RW, &got)), 0,
			     "a read of it, at once");
		LT_CHECK_RET(wait_tx(&got), 0, "completes");
		LT_CHECK_RET(got, 6, "with the sum applied");
		lt_fill(x_buf, 4096, 80);
		LT_CHECK_RET(LT_RETRY(fi_write(x.ep, x_buf, 4096, NULL, x_to_y, off + 64, KEY_RW,
					       x_buf)), 0, "a write after that answer");
		LT_CHECK_RET(wait_tx_alone(x_buf), 0, "goes on the core's RMA again");
		LT_CHECK_RET(await_data(y_buf + off + 64, 4096, 80), 4096, "and lands");
	} else {
		LT_CHECK_RET(post_sum(&five, NULL, off, 0), 0, "a sum");
		LT_CHECK_RET(wait_tx(x_buf), 0, "completes");
	}
	LT_CHECK_RET(LT_RETRY(fi_inject_atomic(x.ep, &one, 1, x_to_y, off, KEY_RW, FI_UINT64,
					       FI_SUM)), 0, "fi_inject_atomic");
	LT_CHECK_RET(post_sum(&five, NULL, off, FI_DELIVERY_COMPLETE), 0,
		     "a sum with FI_DELIVERY_COMPLETE");
	LT_CHECK_RET(wait_tx(x_buf), 0, "completes");
	memcpy(&got, y_buf + off, 8);
	LT_CHECK_RET(got, 12, "every sum is in place when it does");
	LT_CHECK_RET(post_sum(&five, NULL, REGION - 4, 0), 0, "a sum across the region's end");
	LT_CHECK_RET(wait_tx(x_buf), FI_EACCES, "fails with FI_EACCES");
}

/*
 * Keys: the core registers each region under a key of the provider's own, so keys the
 * application asks for never reach it: two regions of a FI_MR_BASIC domain (provider keys:
 * requested keys are ignored) register, and any requested key is taken in the others.
 */
static void check_keys(void)
{
	struct fi_info *hints = lt_hints(FI_MSG | FI_RMA), *pinfo = NULL;
	struct fid_mr *a = NULL, *b = NULL, *high = NULL;
	struct lt_dom pdom;

	LT_CHECK_RET(fi_mr_reg(dom.domain, y_ro, 64, FI_REMOTE_READ, 0, 1ULL << 62, 0, &high,
			       NULL), 0, "a requested key of 2^62 is taken");
	LT_CHECK_RET(high ? fi_mr_key(high) : 0, 1ULL << 62, "as the region's key");
	if (high)
		fi_close(&high->fid);
	/* FI_MR_BASIC (fi_mr(3)'s value; 2.x headers deprecate the name with a warning) */
	hints->domain_attr->mr_mode = MR_BASIC;
	if (LT_CHECK_RET(lt_getinfo(hints, &pinfo), 0, "fi_getinfo with FI_MR_BASIC") &&
	    LT_CHECK_RET(pinfo->domain_attr->mr_mode, MR_BASIC, "granted") &&
	    LT_CHECK_RET(lt_dom_open(pinfo, &pdom), 0, "open such a domain")) {
		LT_CHECK_RET(fi_mr_reg(pdom.domain, y_ro, 64, FI_REMOTE_READ, 0, 0, 0, &a, NULL), 0,
			     "register a region (requested key 0)");
		LT_CHECK_RET(fi_mr_reg(pdom.domain, y_ro + 64, 64, FI_REMOTE_READ, 0, 0, 0, &b,
				       NULL), 0, "and another (requested key 0 too)");
		LT_CHECK(a && b && fi_mr_key(a) != fi_mr_key(b), "their keys differ");
		if (a)
			fi_close(&a->fid);
		if (b)
			fi_close(&b->fid);
		lt_dom_close(&pdom);
	}
	fi_freeinfo(pinfo);
	fi_freeinfo(hints);
}

int main(void)
{
	struct fi_info *hints;

	lt_cma_off();
	lt_begin("rma_direct");
	hints = lt_hints(FI_MSG | FI_RMA | FI_ATOMIC);
	info = lt_getinfo_or_skip(hints);
	if (LT_CHECK_RET(lt_dom_open(info, &dom), 0, "open the domain") && setup()) {
		check_granted();
		check_sizes();
		check_forms();
		check_outside();
		check_atomics();
		check_closed();
		check_counted();
		check_keys();
	}
	if (mr_rw)
		fi_close(&mr_rw->fid);
	if (mr_ro)
		fi_close(&mr_ro->fid);
	if (mr_closed)
		fi_close(&mr_closed->fid);
	if (mr_counted)
		fi_close(&mr_counted->fid);
	lt_ep_close(&x);
	lt_ep_close(&y);
	lt_ep_close(&y2);
	if (cntr)
		fi_close(&cntr->fid);
	if (dom.domain)
		lt_dom_close(&dom);
	free(x_buf);
	free(y_buf);
	free(y_closed);
	free(y_counted);
	fi_freeinfo(info);
	fi_freeinfo(hints);
	return lt_end();
}
