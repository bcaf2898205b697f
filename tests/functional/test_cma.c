/*
 * Cross-memory attach between processes of one host (fi_layer(7)): a parent and children
 * (this program again, fork + exec), the children driven by commands the parent sends them.
 *
 * - "peer": messages both ways of sizes around FI_OFI_LAYER_CMA_MSG_SIZE and above (each side
 *   copies the other's), RMA writes of sizes around FI_OFI_LAYER_CMA_SIZE and above, of
 *   several forms (iovs, delivery complete, remote CQ data), reads into several iovs, and requests the target refuses (unknown key,
 *   a range past the region): refused at the initiator, the connection carrying on. Each
 *   side's log says it reads the other's memory.
 * - "refused": the parent makes itself undumpable and the child gives up CAP_SYS_PTRACE, so
 *   the system lets the child read nothing of the parent: the child's log says the parent is
 *   not reachable, and the same traffic arrives intact (the parent's data through the core,
 *   the child's copied by the parent).
 * - "midway": the parent gives up CAP_SYS_PTRACE, checks the child, and then the child makes
 *   itself undumpable: the parent's next copy is refused by the system, and that message
 *   fails at both ends (FI_EIO); the parent says it no longer reads the child, whose next
 *   message goes through the core and arrives.
 * With FI_OFI_LAYER_CMA_SIZE=0 (run_without_cma.sh) the same traffic goes through the core,
 * nothing fails, and neither log says it reads the other.
 */
#include "common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#include <linux/capability.h>

#include <rdma/fi_rma.h>

#define REGION (4u << 20)
#define MAX_DATA ((2u << 20) + 64)
#define KEY 7

/* What each side's log says of a peer it checked (at info level). */
static const char *const check_lines[] = {
	"read by cross-memory attach",
	"not reachable by cross-memory attach",
};

/* What the parent asks of a child (a message: this, then len bytes of data for ECHO). */
struct cmd {
	char op;                       /* enum below */
	uint32_t len;
	uint64_t off;                  /* in the parent's region */
	uint64_t seed;
	uint64_t flags;                /* WRITE: FI_DELIVERY_COMPLETE or 0 */
};

enum {
	CMD_ECHO = 'E',                /* send the data back */
	CMD_WRITE = 'W',               /* write len bytes of seed at off (two iovs) */
	CMD_WRITEDATA = 'D',           /* the same with remote CQ data seed, one iov */
	CMD_READ = 'R',                /* read len bytes at off (three iovs), check seed */
	CMD_BAD = 'B',                 /* requests the parent refuses, then a good one */
	CMD_SEND = 'S',                /* send len bytes of seed */
	CMD_UNDUMP = 'U',              /* become undumpable */
	CMD_QUIT = 'Q',                /* answer the log's counts, exit */
};

/* A child's answer: the result, and for QUIT its log's counts. */
struct answer {
	int32_t err;
	int32_t reads;
	int32_t refused;
};

static struct fi_info *hints, *info;
static struct lt_dom dom;
static struct lt_ep ep;
static char *sbuf, *rbuf;

static bool cma_is_on(void)
{
	const char *env = getenv("FI_OFI_LAYER_CMA_SIZE");

	return !env || strtoull(env, NULL, 0) != 0;
}

/* Whether 1 MiB messages go by cross-memory attach too. */
static bool cma_carries_messages(void)
{
	const char *env = getenv("FI_OFI_LAYER_CMA_MSG_SIZE");

	return cma_is_on() && (!env || (strtoull(env, NULL, 0) != 0 &&
					strtoull(env, NULL, 0) <= (1u << 20)));
}

/*
 * Whether the midway child checks the parent: its traffic is messages, and over a connected
 * core a side says who it is only with its first transfer that could go by cross-memory
 * attach (over other cores, when the connection opens).
 */
static bool midway_checks(void)
{
	return cma_is_on() && (cma_carries_messages() || !lt_core_is_msg());
}

/* Drops CAP_SYS_PTRACE from this process's effective set (nothing to drop without it). */
static void drop_ptrace_cap(void)
{
	struct __user_cap_header_struct hdr = { .version = _LINUX_CAPABILITY_VERSION_3 };
	struct __user_cap_data_struct caps[2];

	if (!syscall(SYS_capget, &hdr, caps)) {
		caps[0].effective &= ~(1u << CAP_SYS_PTRACE);
		(void) syscall(SYS_capset, &hdr, caps);
	}
}

/* Yama's ptrace_scope, 0 without Yama. */
static int ptrace_scope(void)
{
	FILE *f = fopen("/proc/sys/kernel/yama/ptrace_scope", "r");
	int scope = 0;

	if (f) {
		if (fscanf(f, "%d", &scope) != 1)
			scope = 0;
		fclose(f);
	}
	return scope;
}

static int open_side(void)
{
	int ret;

	ret = lt_getinfo(hints, &info);
	if (!ret)
		ret = lt_dom_open(info, &dom);
	if (!ret)
		ret = lt_ep_open(&dom, NULL, &ep);
	sbuf = malloc(MAX_DATA + sizeof(struct cmd));
	rbuf = malloc(MAX_DATA + sizeof(struct cmd));
	return ret ? ret : !sbuf || !rbuf ? -FI_ENOMEM : 0;
}

/* Sends len bytes of sbuf to peer and waits for its completion: 0 or its error. */
static int send_wait(fi_addr_t peer, size_t len)
{
	struct fi_context2 ctx;
	struct lt_comp comp;

	if (LT_RETRY(lt_send(&ep, sbuf, len, peer, &ctx)))
		return -1;
	if (!lt_cq_next(&ep.tx, &comp, LT_TIMEOUT_MS))
		return -2;
	return comp.err;
}

/* The next completion on the receive queue (a receive of rbuf is posted first). */
static bool recv_wait(struct lt_comp *comp)
{
	static struct fi_context2 ctx;

	return !LT_RETRY(lt_recv(&ep, rbuf, MAX_DATA + sizeof(struct cmd), FI_ADDR_UNSPEC,
				 &ctx)) &&
	       lt_cq_next(&ep.rx, comp, LT_TIMEOUT_MS);
}

/* ---- the child ---- */

/* An RMA request of the child's, completed: 0 or its error. */
static int rma_wait(ssize_t ret)
{
	struct lt_comp comp;

	if (ret)
		return (int) ret;
	if (!lt_cq_next(&ep.tx, &comp, LT_TIMEOUT_MS))
		return -2;
	return comp.err;
}

static int child_write(fi_addr_t parent, const struct cmd *cmd, uint64_t key, uint64_t data)
{
	struct iovec iov[2] = {
		{ .iov_base = sbuf, .iov_len = cmd->len / 3 },
		{ .iov_base = sbuf + cmd->len / 3, .iov_len = cmd->len - cmd->len / 3 },
	};
	struct fi_rma_iov rma = { .addr = cmd->off, .len = cmd->len, .key = key };
	struct fi_msg_rma msg = {
		.msg_iov = iov, .iov_count = 2, .addr = parent, .rma_iov = &rma,
		.rma_iov_count = 1, .context = sbuf, .data = data,
	};

	lt_fill(sbuf, cmd->len, cmd->seed);
	if (cmd->op == CMD_WRITEDATA)
		return rma_wait(LT_RETRY(fi_writedata(ep.ep, sbuf, cmd->len, NULL, data, parent,
						      cmd->off, key, sbuf)));
	return rma_wait(LT_RETRY(fi_writemsg(ep.ep, &msg, FI_COMPLETION | cmd->flags)));
}

static int child_read(fi_addr_t parent, const struct cmd *cmd)
{
	size_t a = cmd->len / 4, b = cmd->len / 2;
	struct iovec iov[3] = {
		{ .iov_base = sbuf, .iov_len = a },
		{ .iov_base = sbuf + a, .iov_len = b },
		{ .iov_base = sbuf + a + b, .iov_len = cmd->len - a - b },
	};
	struct fi_rma_iov rma = { .addr = cmd->off, .len = cmd->len, .key = KEY };
	struct fi_msg_rma msg = {
		.msg_iov = iov, .iov_count = 3, .addr = parent, .rma_iov = &rma,
		.rma_iov_count = 1, .context = sbuf,
	};
	int ret;

	memset(sbuf, 0, cmd->len);
	ret = rma_wait(LT_RETRY(fi_readmsg(ep.ep, &msg, FI_COMPLETION)));
	if (!ret && lt_verify(sbuf, cmd->len, cmd->seed) != cmd->len)
		ret = -3;
	return ret;
}

/* Refused requests, then a good one: a bit per outcome that went wrong (0: all right). */
static int child_bad(fi_addr_t parent)
{
	struct cmd cmd = { .op = CMD_WRITE, .len = 65536, .off = 0, .seed = 5 };
	int ret = 0;

	if (!child_write(parent, &cmd, KEY + 1, 0))
		ret |= 1;              /* no region of that key */
	cmd.off = REGION - 100;
	if (!child_write(parent, &cmd, KEY, 0))
		ret |= 2;              /* past the region's end */
	cmd.op = CMD_READ;
	if (!child_read(parent, &cmd))
		ret |= 4;
	cmd.op = CMD_WRITE;
	cmd.off = 0;
	if (child_write(parent, &cmd, KEY, 0))
		ret |= 8;              /* and the connection carries on */
	return ret;
}

static int child_main(const char *role, int rfd, int wfd)
{
	struct answer answer;
	struct lt_comp comp;
	struct cmd cmd;
	fi_addr_t parent;

	if (!strcmp(role, "refused"))
		drop_ptrace_cap();
	lt_log_capture_at("info");
	if (open_side())
		return 2;
	parent = lt_child_meet(&ep, rfd, wfd);
	if (parent == FI_ADDR_NOTAVAIL)
		return 2;
	for (;;) {
		if (!recv_wait(&comp) || comp.err || comp.len < sizeof(cmd))
			return 3;
		memcpy(&cmd, rbuf, sizeof(cmd));
		memset(&answer, 0, sizeof(answer));
		switch (cmd.op) {
		case CMD_ECHO:
			memcpy(sbuf, rbuf + sizeof(cmd), cmd.len);
			if (send_wait(parent, cmd.len))
				return 4;
			continue;
		case CMD_WRITE:
		case CMD_WRITEDATA:
			answer.err = child_write(parent, &cmd, KEY, cmd.seed);
			break;
		case CMD_READ:
			answer.err = child_read(parent, &cmd);
			break;
		case CMD_BAD:
			answer.err = child_bad(parent);
			break;
		case CMD_SEND:
			lt_fill(sbuf, cmd.len, cmd.seed);
			answer.err = send_wait(parent, cmd.len);
			break;
		case CMD_UNDUMP:
			answer.err = prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
			break;
		case CMD_QUIT:
			break;
		default:
			return 5;
		}
		if (cmd.op == CMD_QUIT) {
			int counts[2] = { -1, -1 };

			lt_log_count_each(check_lines, 2, counts);
			answer.reads = counts[0];
			answer.refused = counts[1];
		}
		memcpy(sbuf, &answer, sizeof(answer));
		if (send_wait(parent, sizeof(answer)))
			return 6;
		if (cmd.op == CMD_QUIT)
			break;
	}
	lt_ep_close(&ep);
	lt_dom_close(&dom);
	fi_freeinfo(info);
	free(sbuf);
	free(rbuf);
	return 0;
}

/* ---- the parent ---- */

static char *region;
static struct fid_mr *mr;

/* Sends cmd (with len bytes of seed after it for ECHO) to the child. */
static bool send_cmd(fi_addr_t child, const struct cmd *cmd)
{
	size_t len = sizeof(*cmd);

	memcpy(sbuf, cmd, sizeof(*cmd));
	if (cmd->op == CMD_ECHO) {
		lt_fill(sbuf + sizeof(*cmd), cmd->len, cmd->seed);
		len += cmd->len;
	}
	return LT_CHECK_RET(send_wait(child, len), 0, "command '%c' of %u bytes sent", cmd->op,
			    cmd->len);
}

/* The child's answer to cmd: its err, or -100 when none came. */
static int ask(fi_addr_t child, const struct cmd *cmd, struct answer *answer)
{
	struct lt_comp comp;

	if (!send_cmd(child, cmd))
		return -100;
	if (!recv_wait(&comp) || comp.err || comp.len != sizeof(*answer))
		return -100;
	memcpy(answer, rbuf, sizeof(*answer));
	return answer->err;
}


/* Messages both ways: the child echoes each (sizes around the CMA message size and above). */
static void check_echo(fi_addr_t child, const char *who)
{
	static const uint32_t sizes[] = { 1, 16384, 65535, 65536, 100001, 1u << 20,
					  (2u << 20) + 3 };
	struct lt_comp comp;
	struct cmd cmd = { .op = CMD_ECHO };
	size_t i;

	for (i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		cmd.len = sizes[i];
		cmd.seed = 100 + i;
		if (!send_cmd(child, &cmd))
			return;
		LT_CHECK(recv_wait(&comp) && !comp.err && comp.len == cmd.len &&
				 lt_verify(rbuf, cmd.len, cmd.seed) == cmd.len,
			 "%s: %u bytes there and back", who, cmd.len);
	}
}

/* RMA writes and reads of the child's into the parent's region. */
static void check_rma(fi_addr_t child, const char *who)
{
	static const struct { uint32_t len; uint64_t off; uint64_t flags; } writes[] = {
		{ 16383, 0, 0 },
		{ 16384, 0, 0 },
		{ 300001, 12345, 0 },
		{ 1u << 20, (2u << 20) + 7, 0 },
		{ 65536, 1u << 20, FI_DELIVERY_COMPLETE },
	};
	struct answer answer;
	struct lt_comp comp;
	struct cmd cmd;
	size_t i;

	for (i = 0; i < sizeof(writes) / sizeof(writes[0]); i++) {
		cmd = (struct cmd) { .op = CMD_WRITE, .len = writes[i].len, .off = writes[i].off,
				     .seed = 200 + i, .flags = writes[i].flags };
		LT_CHECK(ask(child, &cmd, &answer) == 0 &&
				 lt_verify(region + cmd.off, cmd.len, cmd.seed) == cmd.len,
			 "%s: a write of %u bytes%s is in place", who, cmd.len,
			 cmd.flags ? " (delivery complete)" : "");
	}

	/* remote CQ data: its completion comes before the child's answer */
	cmd = (struct cmd) { .op = CMD_WRITEDATA, .len = 70000, .off = 100, .seed = 0x5eed };
	if (send_cmd(child, &cmd)) {
		LT_CHECK(lt_cq_next(&ep.rx, &comp, LT_TIMEOUT_MS) && !comp.err &&
				 (comp.flags & FI_REMOTE_CQ_DATA) && comp.data == cmd.seed,
			 "%s: a write's remote CQ data", who);
		LT_CHECK(recv_wait(&comp) && !comp.err && !((struct answer *) rbuf)->err &&
				 lt_verify(region + cmd.off, cmd.len, cmd.seed) == cmd.len,
			 "%s: its data in place", who);
	}

	for (i = 0; i < 2; i++) {
		cmd = (struct cmd) { .op = CMD_READ, .len = i ? (1u << 20) + 5 : 16384,
				     .off = i ? (3u << 20) - 64 : 64, .seed = 300 + i };
		lt_fill(region + cmd.off, cmd.len, cmd.seed);
		LT_CHECK_RET(ask(child, &cmd, &answer), 0, "%s: a read of %u bytes into three "
			     "iovs", who, cmd.len);
	}
	cmd = (struct cmd) { .op = CMD_BAD };
	LT_CHECK_RET(ask(child, &cmd, &answer), 0, "%s: an unknown key and a range past the "
		     "region refused, a write after them done", who);
}

/* Ends the child, checks its log; its exit status. */
static void stop_child(struct lt_child *child, fi_addr_t fi_addr, const char *who,
		       bool reads, bool refused)
{
	struct cmd cmd = { .op = CMD_QUIT };
	struct answer answer = { .reads = -1, .refused = -1 };
	int status;

	LT_CHECK_RET(ask(fi_addr, &cmd, &answer), 0, "%s: quits", who);
	LT_CHECK(reads ? answer.reads > 0 : answer.reads == 0,
		 "%s: its log says it reads the parent's memory: %d times", who, answer.reads);
	LT_CHECK(refused ? answer.refused > 0 : answer.refused == 0,
		 "%s: its log says the parent is not reachable: %d times", who, answer.refused);
	status = lt_child_reap(child, LT_TIMEOUT_MS, false);
	LT_CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "%s: exits with 0 (status %#x)",
		 who, status);
}

static void run_peer(void)
{
	struct lt_child child;
	fi_addr_t fi_addr = lt_child_start("peer", &ep, &child);

	if (!LT_CHECK(fi_addr != FI_ADDR_NOTAVAIL, "peer: started"))
		return;
	check_echo(fi_addr, "peer");
	check_rma(fi_addr, "peer");
	stop_child(&child, fi_addr, "peer", cma_is_on(), false);
}

static void run_refused(void)
{
	struct lt_child child;
	fi_addr_t fi_addr;

	prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
	fi_addr = lt_child_start("refused", &ep, &child);
	if (LT_CHECK(fi_addr != FI_ADDR_NOTAVAIL, "refused: started")) {
		check_echo(fi_addr, "refused");
		check_rma(fi_addr, "refused");
		stop_child(&child, fi_addr, "refused", false, cma_is_on());
	}
	prctl(PR_SET_DUMPABLE, 1, 0, 0, 0);
}

static void run_midway(void)
{
	struct cmd cmd = { .op = CMD_ECHO, .len = 1u << 20, .seed = 400 };
	struct answer answer;
	struct lt_child child;
	struct lt_comp comp;
	fi_addr_t fi_addr;
	int want = cma_carries_messages() ? FI_EIO : 0;

	drop_ptrace_cap();
	fi_addr = lt_child_start("midway", &ep, &child);
	if (!LT_CHECK(fi_addr != FI_ADDR_NOTAVAIL, "midway: started"))
		return;
	/* the parent has checked the child: the 1 MiB echo, its first large message, said who it
	 * is first, and the child answered with who it is */
	if (send_cmd(fi_addr, &cmd))
		LT_CHECK(recv_wait(&comp) && !comp.err &&
			 lt_verify(rbuf, cmd.len, cmd.seed) == cmd.len, "midway: 1 MiB echoed");
	cmd = (struct cmd) { .op = CMD_UNDUMP };
	LT_CHECK_RET(ask(fi_addr, &cmd, &answer), 0, "midway: the child is undumpable now");

	cmd = (struct cmd) { .op = CMD_SEND, .len = 1u << 20, .seed = 401 };
	if (send_cmd(fi_addr, &cmd)) {
		LT_CHECK(recv_wait(&comp) && comp.err == want,
			 "midway: the copy the system refuses fails the receive (%d)", comp.err);
		LT_CHECK(recv_wait(&comp) && !comp.err &&
				 ((struct answer *) rbuf)->err == want,
			 "midway: and the send (%d)", ((struct answer *) rbuf)->err);
	}
	cmd.seed = 402;
	if (send_cmd(fi_addr, &cmd)) {
		LT_CHECK(recv_wait(&comp) && !comp.err && comp.len == cmd.len &&
				 lt_verify(rbuf, cmd.len, cmd.seed) == cmd.len,
			 "midway: the next message goes through the core and arrives");
		LT_CHECK(recv_wait(&comp) && !comp.err && !((struct answer *) rbuf)->err,
			 "midway: its send is done");
	}
	stop_child(&child, fi_addr, "midway", midway_checks(), false);
}

int main(int argc, char **argv)
{
	const char *role;
	int rfd, wfd, reads;

	hints = lt_hints(FI_MSG | FI_RMA);
	/* capabilities are a thread's: the copies must be made by the thread that gives up
	 * CAP_SYS_PTRACE, not by a progress thread that kept it (fi_layer(7)) */
	hints->domain_attr->data_progress = FI_PROGRESS_MANUAL;
	hints->domain_attr->control_progress = FI_PROGRESS_MANUAL;
	role = lt_child_role(argc, argv, &rfd, &wfd);
	if (role)
		return child_main(role, rfd, wfd);
	lt_log_capture_at("info");
	lt_begin("cma");
	if (!lt_is_layer())
		lt_skip("cross-memory attach is ofi_layer's");
	if (getuid() && ptrace_scope() > 0)
		lt_skip("Yama's ptrace_scope lets a process read only its descendants: as root, or "
			"with ptrace_scope 0");
	info = lt_getinfo_or_skip(hints);
	if (!LT_CHECK_RET(lt_dom_open(info, &dom), 0, "open the domain") ||
	    !LT_CHECK_RET(lt_ep_open(&dom, NULL, &ep), 0, "open the endpoint"))
		return lt_end();
	sbuf = malloc(MAX_DATA + sizeof(struct cmd));
	rbuf = malloc(MAX_DATA + sizeof(struct cmd));
	region = calloc(1, REGION);
	if (!LT_CHECK(sbuf && rbuf && region, "memory") ||
	    !LT_CHECK_RET(fi_mr_reg(dom.domain, region, REGION, FI_REMOTE_READ | FI_REMOTE_WRITE,
				    0, KEY, 0, &mr, NULL), 0, "register the region"))
		return lt_end();
	run_peer();
	run_refused();
	run_midway();
	fi_close(&mr->fid);
	lt_ep_close(&ep);
	lt_dom_close(&dom);
	reads = lt_log_count(check_lines, 1);
	LT_CHECK(cma_is_on() ? reads >= (midway_checks() ? 3 : 2) : reads == 0,
		 "the parent's log says it reads each child's memory: %d times", reads);
	fi_freeinfo(info);
	free(sbuf);
	free(rbuf);
	free(region);
	return lt_end();
}
