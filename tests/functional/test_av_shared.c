/*
 * Named address vectors through the public API (fi_av(3) `name`, `map_addr`, FI_READ), across
 * processes: the same fi_addr for the same entry in every process, map_addr holding each
 * entry's fi_addr (libfabric's shared-AV test reads ((fi_addr_t *) map_addr)[i]), map_addr
 * honoured when given, FI_READ opens existing AVs read-only and is refused for a name that
 * does not exist; a process killed while it changes the AV leaves it usable; the object is
 * gone once the last user closes, or once every user has died; FI_AV_TABLE and FI_AV_MAP;
 * the fixed capacity; FI_EVENT on a named AV.
 *
 * Other processes are this program again (exec'd children), each with its own fabric and
 * domain, driven by commands over pipes. Every shared-memory object the test creates is
 * unlinked at the end, whatever happened.
 */
#include "common.h"

#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#define HANG_GUARD_S 180
#define CMD_TIMEOUT_MS 20000
#define CHURN_BATCH 20000
#define KILL_ROUNDS 3
#define MAX_VALS 8

enum cmd_op {
	CMD_OPEN,       /* name, flags, type, map_addr: ret, map_addr */
	CMD_INSERT,     /* a (first address), b (count): ret, fi_addrs */
	CMD_LOOKUP,     /* fi_addr: ret, address value */
	CMD_MAP,        /* a: ((fi_addr_t *) map_addr)[a] */
	CMD_REMOVE,     /* fi_addr: ret */
	CMD_CLOSE,
	CMD_CHURN,      /* never answers: insert and remove batches until killed */
	CMD_EXIT,
};

struct cmd {
	int op;
	unsigned a, b;
	uint64_t fi_addr;
	uint64_t flags;
	int type;
	uint64_t map_addr;
	char name[96];
};

struct reply {
	long ret;
	uint64_t map_addr;
	uint64_t vals[MAX_VALS];
};

/* A distinct sockaddr_in per value; the value is read back from the address. */
static void make_addr(unsigned v, struct sockaddr_in *sin)
{
	memset(sin, 0, sizeof(*sin));
	sin->sin_family = AF_INET;
	sin->sin_port = htons(7000);
	sin->sin_addr.s_addr = htonl(0x0a400000u + v);
}

static unsigned addr_value(const struct sockaddr_in *sin)
{
	return ntohl(sin->sin_addr.s_addr) - 0x0a400000u;
}

/* ---- one process's view: fabric, domain, the named AV ---- */

struct proc {
	struct fi_info *hints, *info;
	struct lt_dom dom;
	struct fid_av *av;
	fi_addr_t *map;
};

static int proc_init(struct proc *p)
{
	memset(p, 0, sizeof(*p));
	p->hints = lt_hints(FI_MSG);
	if (lt_getinfo(p->hints, &p->info))
		return -FI_ENODATA;
	return lt_dom_open(p->info, &p->dom);
}

static void proc_fini(struct proc *p)
{
	if (p->av)
		fi_close(&p->av->fid);
	lt_dom_close(&p->dom);
	fi_freeinfo(p->info);
	fi_freeinfo(p->hints);
}

static void run_cmd(struct proc *p, const struct cmd *c, struct reply *r)
{
	struct fi_av_attr attr = {0};
	struct sockaddr_in *a, sin;
	fi_addr_t fi_addr[MAX_VALS];
	size_t len, i;

	memset(r, 0, sizeof(*r));
	switch (c->op) {
	case CMD_OPEN:
		attr.type = c->type;
		attr.name = c->name;
		attr.flags = c->flags;
		attr.map_addr = (void *) (uintptr_t) c->map_addr;
		r->ret = fi_av_open(p->dom.domain, &attr, &p->av, NULL);
		if (r->ret)
			p->av = NULL;
		p->map = attr.map_addr;
		r->map_addr = (uintptr_t) attr.map_addr;
		break;
	case CMD_INSERT:
		a = calloc(c->b ? c->b : 1, sizeof(*a));
		for (i = 0; i < c->b; i++)
			make_addr(c->a + (unsigned) i, &a[i]);
		r->ret = fi_av_insert(p->av, a, c->b, fi_addr, 0, NULL);
		for (i = 0; i < c->b && i < MAX_VALS; i++)
			r->vals[i] = fi_addr[i];
		free(a);
		break;
	case CMD_LOOKUP:
		len = sizeof(sin);
		r->ret = fi_av_lookup(p->av, c->fi_addr, &sin, &len);
		r->vals[0] = r->ret ? UINT64_MAX : addr_value(&sin);
		break;
	case CMD_MAP:
		r->ret = p->map ? 0 : -FI_EINVAL;
		r->vals[0] = p->map ? p->map[c->a] : 0;
		break;
	case CMD_REMOVE:
		fi_addr[0] = c->fi_addr;
		r->ret = fi_av_remove(p->av, fi_addr, 1, 0);
		break;
	case CMD_CLOSE:
		r->ret = p->av ? fi_close(&p->av->fid) : -FI_EINVAL;
		p->av = NULL;
		p->map = NULL;
		break;
	}
}

/* Inserts and removes big batches forever: most of its time is spent holding the AV. */
static void churn(struct proc *p, unsigned first)
{
	struct sockaddr_in *a = calloc(CHURN_BATCH, sizeof(*a));
	fi_addr_t *fi_addr = calloc(CHURN_BATCH, sizeof(*fi_addr));
	unsigned i;

	for (i = 0; i < CHURN_BATCH; i++)
		make_addr(first + i, &a[i]);
	for (;;) {
		fi_av_insert(p->av, a, CHURN_BATCH, fi_addr, 0, NULL);
		fi_av_remove(p->av, fi_addr, CHURN_BATCH, 0);
	}
}

static int child_main(int rfd, int wfd)
{
	struct reply r;
	struct proc p;
	struct cmd c;
	ssize_t n;
	int ret;

	ret = proc_init(&p);
	lt_pipe_send(wfd, &ret, sizeof(ret));
	for (;;) {
		n = lt_pipe_recv(rfd, &c, sizeof(c), CMD_TIMEOUT_MS * 5);
		if (n != (ssize_t) sizeof(c) || c.op == CMD_EXIT)
			break;
		if (c.op == CMD_CHURN) {
			ret = 0;
			lt_pipe_send(wfd, &ret, sizeof(ret));
			churn(&p, c.a);
		}
		run_cmd(&p, &c, &r);
		lt_pipe_send(wfd, &r, sizeof(r));
	}
	proc_fini(&p);
	return 0;
}

/* ---- the parent's side ---- */

static char names[16][96];
static unsigned name_cnt;

static const char *new_name(const char *what)
{
	char *name = names[name_cnt++];

	snprintf(name, sizeof(names[0]), "ofi_layer_test_%s.%d", what, (int) getpid());
	return name;
}

static bool shm_exists(const char *name)
{
	char path[160];

	snprintf(path, sizeof(path), "/dev/shm/ofi_layer_av.%s", name);
	return access(path, F_OK) == 0;
}

static bool child_start(struct lt_child *child)
{
	int ret = -1;

	if (lt_child_spawn("proc", child))
		return false;
	if (lt_pipe_recv(child->from_child, &ret, sizeof(ret), CMD_TIMEOUT_MS) != sizeof(ret) ||
	    ret) {
		lt_child_reap(child, 1000, true);
		return false;
	}
	return true;
}

static long child_cmd(struct lt_child *child, const struct cmd *c, struct reply *r)
{
	if (lt_pipe_send(child->to_child, c, sizeof(*c)) ||
	    lt_pipe_recv(child->from_child, r, sizeof(*r), CMD_TIMEOUT_MS) != sizeof(*r)) {
		memset(r, 0, sizeof(*r));
		r->ret = LONG_MIN;
	}
	return r->ret;
}

static void child_stop(struct lt_child *child)
{
	struct cmd c = {.op = CMD_EXIT};

	lt_pipe_send(child->to_child, &c, sizeof(c));
	lt_child_reap(child, CMD_TIMEOUT_MS, false);
}

static struct cmd open_cmd(const char *name, uint64_t flags, enum fi_av_type type)
{
	struct cmd c = {.op = CMD_OPEN, .flags = flags, .type = type};

	snprintf(c.name, sizeof(c.name), "%s", name);
	return c;
}

static int open_named(struct proc *p, const char *name, enum fi_av_type type, uint64_t flags,
		      void *map_addr, size_t count, struct fid_av **av, fi_addr_t **map)
{
	struct fi_av_attr attr = {
		.type = type, .name = name, .flags = flags, .map_addr = map_addr, .count = count,
	};
	int ret;

	ret = fi_av_open(p->dom.domain, &attr, av, NULL);
	if (!ret && map)
		*map = attr.map_addr;
	return ret;
}

static bool holds(struct fid_av *av, fi_addr_t fi_addr, unsigned v)
{
	struct sockaddr_in sin;
	size_t len = sizeof(sin);

	return !fi_av_lookup(av, fi_addr, &sin, &len) && addr_value(&sin) == v;
}

/* Same entries, same fi_addrs in every process; FI_READ is read-only. */
static void test_sharing(struct proc *p, enum fi_av_type type, const char *tag)
{
	const char *name = new_name(tag);
	struct sockaddr_in a[3];
	struct lt_child w, r;
	fi_addr_t fi_addr[3], *map = NULL;
	struct reply rep;
	struct cmd c;
	struct fid_av *av;
	unsigned i;
	int ret;

	ret = open_named(p, name, type, 0, NULL, 16, &av, &map);
	if (!LT_CHECK_RET(ret, 0, "%s: create named av", tag))
		return;
	LT_CHECK(map != NULL, "%s: map_addr reported", tag);
	LT_CHECK(shm_exists(name), "%s: shared object exists while open", tag);
	for (i = 0; i < 3; i++)
		make_addr(i, &a[i]);
	ret = fi_av_insert(av, a, 3, fi_addr, 0, NULL);
	LT_CHECK_RET(ret, 3, "%s: insert 3", tag);
	if (map)
		LT_CHECK(map[0] == fi_addr[0] && map[1] == fi_addr[1] && map[2] == fi_addr[2],
			 "%s: map_addr[i] is entry i's fi_addr", tag);
	if (type == FI_AV_TABLE)
		LT_CHECK(fi_addr[0] == 0 && fi_addr[2] == 2, "%s: indices 0..2", tag);

	/* a writer process joins: its entries follow, and the parent sees them */
	if (LT_CHECK(child_start(&w), "%s: writer process", tag)) {
		c = open_cmd(name, 0, FI_AV_UNSPEC);
		LT_CHECK_RET(child_cmd(&w, &c, &rep), 0, "%s: writer opens the name", tag);
		c = (struct cmd){.op = CMD_INSERT, .a = 10, .b = 2};
		ret = (int) child_cmd(&w, &c, &rep);
		LT_CHECK(ret == 2 && holds(av, rep.vals[0], 10) && holds(av, rep.vals[1], 11),
			 "%s: writer's entries seen by the creator with the same fi_addr", tag);
		if (type == FI_AV_TABLE)
			LT_CHECK(rep.vals[0] == 3 && rep.vals[1] == 4,
				 "%s: writer's indices continue at 3", tag);
		c = (struct cmd){.op = CMD_LOOKUP, .fi_addr = fi_addr[1]};
		LT_CHECK(child_cmd(&w, &c, &rep) == 0 && rep.vals[0] == 1,
			 "%s: creator's entry seen by the writer", tag);
		child_stop(&w);
	}

	/* a reader process: FI_READ, the map, lookups, no changes */
	if (LT_CHECK(child_start(&r), "%s: reader process", tag)) {
		c = open_cmd(name, FI_READ, type);
		ret = (int) child_cmd(&r, &c, &rep);
		LT_CHECK(ret == 0 && rep.map_addr, "%s: FI_READ open, map_addr reported (%d)", tag,
			 ret);
		for (i = 0; i < 3; i++) {
			c = (struct cmd){.op = CMD_MAP, .a = i};
			LT_CHECK(child_cmd(&r, &c, &rep) == 0 && rep.vals[0] == fi_addr[i],
				 "%s: reader's map_addr[%u] is the creator's fi_addr", tag, i);
			c = (struct cmd){.op = CMD_LOOKUP, .fi_addr = fi_addr[i]};
			LT_CHECK(child_cmd(&r, &c, &rep) == 0 && rep.vals[0] == i,
				 "%s: reader looks up entry %u", tag, i);
		}
		c = (struct cmd){.op = CMD_INSERT, .a = 20, .b = 1};
		LT_CHECK(child_cmd(&r, &c, &rep) < 0, "%s: reader's insert refused (%ld)", tag,
			 rep.ret);
		c = (struct cmd){.op = CMD_REMOVE, .fi_addr = fi_addr[0]};
		LT_CHECK(child_cmd(&r, &c, &rep) < 0, "%s: reader's remove refused", tag);

		/* the creator removes: gone for the reader too, its map slot cleared */
		LT_CHECK_RET(fi_av_remove(av, &fi_addr[1], 1, 0), 0, "%s: creator removes 1", tag);
		c = (struct cmd){.op = CMD_LOOKUP, .fi_addr = fi_addr[1]};
		LT_CHECK_RET(child_cmd(&r, &c, &rep), -FI_EINVAL, "%s: removed for the reader",
			     tag);
		c = (struct cmd){.op = CMD_MAP, .a = 1};
		LT_CHECK(child_cmd(&r, &c, &rep) == 0 && rep.vals[0] == FI_ADDR_NOTAVAIL,
			 "%s: its map slot FI_ADDR_NOTAVAIL", tag);
		if (type == FI_AV_MAP) {
			/* reinserted in the same slot: the old handle stays refused everywhere */
			ret = fi_av_insert(av, &a[1], 1, &fi_addr[1], 0, NULL);
			c = (struct cmd){.op = CMD_LOOKUP, .fi_addr = fi_addr[1]};
			LT_CHECK(ret == 1 && child_cmd(&r, &c, &rep) == 0 && rep.vals[0] == 1,
				 "%s: reinserted, new handle seen by the reader", tag);
		}
		c = (struct cmd){.op = CMD_CLOSE};
		LT_CHECK_RET(child_cmd(&r, &c, &rep), 0, "%s: reader closes", tag);
		child_stop(&r);
	}

	LT_CHECK_RET(fi_close(&av->fid), 0, "%s: creator closes", tag);
	LT_CHECK(!shm_exists(name), "%s: shared object gone after the last close", tag);
}

static void test_open_rules(struct proc *p)
{
	const char *name = new_name("rules");
	struct fid_av *av, *av2;
	fi_addr_t *map = NULL;
	void *want;
	int ret;

	ret = open_named(p, new_name("missing"), FI_AV_TABLE, FI_READ, NULL, 0, &av, NULL);
	LT_CHECK(ret < 0, "FI_READ of a name that does not exist refused (%d)", ret);
	if (lt_is_layer())
		LT_CHECK_RET(ret, -FI_ENOENT, "FI_READ of a missing name: -FI_ENOENT");

	if (!LT_CHECK_RET(open_named(p, name, FI_AV_TABLE, 0, NULL, 0, &av, NULL), 0,
			  "rules: create"))
		return;
	ret = open_named(p, name, FI_AV_MAP, 0, NULL, 0, &av2, NULL);
	LT_CHECK(ret < 0, "rules: reopening with another type refused (%d)", ret);
	/* the same process may open the name again (a second handle on it) */
	ret = open_named(p, name, FI_AV_UNSPEC, FI_READ, NULL, 0, &av2, NULL);
	if (LT_CHECK_RET(ret, 0, "rules: FI_READ in the creating process"))
		fi_close(&av2->fid);
	fi_close(&av->fid);

	/* map_addr given: the map appears exactly there; misaligned is refused */
	want = mmap(NULL, 1 << 22, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (want != MAP_FAILED) {
		munmap(want, 1 << 22);
		ret = open_named(p, new_name("mapaddr"), FI_AV_MAP, 0, (uint8_t *) want + 1, 0,
				 &av, NULL);
		LT_CHECK(ret < 0, "map_addr: misaligned refused (%d)", ret);
		ret = open_named(p, names[name_cnt - 1], FI_AV_MAP, 0, want, 0, &av, &map);
		if (LT_CHECK_RET(ret, 0, "map_addr: honoured")) {
			struct sockaddr_in sin;
			fi_addr_t fi_addr;

			make_addr(5, &sin);
			LT_CHECK(map == want, "map_addr: kept as given");
			LT_CHECK(fi_av_insert(av, &sin, 1, &fi_addr, 0, NULL) == 1 &&
					 ((fi_addr_t *) want)[0] == fi_addr,
				 "map_addr: ((fi_addr_t *) map_addr)[0] is the fi_addr");
			fi_close(&av->fid);
		}
	}
}

/* count sizes the object once and for all: past it, insertions fail with FI_ENOSPC. */
static void test_capacity(struct proc *p)
{
	const size_t n = 1025;
	struct sockaddr_in *a = calloc(n, sizeof(*a));
	fi_addr_t *fi_addr = calloc(n, sizeof(*fi_addr));
	int *err = calloc(n, sizeof(*err));
	struct fid_av *av;
	size_t i;
	int ret;

	if (!a || !fi_addr || !err ||
	    !LT_CHECK_RET(open_named(p, new_name("cap"), FI_AV_TABLE, 0, NULL, 10, &av, NULL), 0,
			  "capacity: open with count 10"))
		goto out;
	for (i = 0; i < n; i++)
		make_addr((unsigned) i, &a[i]);
	ret = fi_av_insert(av, a, n, fi_addr, FI_SYNC_ERR, err);
	if (lt_is_layer())
		LT_CHECK(ret == 1024 && err[1023] == 0 && err[1024] == FI_ENOSPC &&
				 fi_addr[1024] == FI_ADDR_NOTAVAIL,
			 "capacity: 1024 entries, the next FI_ENOSPC (%d, %d)", ret, err[1024]);
	fi_close(&av->fid);
out:
	free(a);
	free(fi_addr);
	free(err);
}

/* Killed while holding the AV: the survivors repair it and go on. */
static void test_kill(struct proc *p)
{
	const char *name = new_name("kill");
	struct sockaddr_in a[4], sin;
	fi_addr_t fi_addr[4], more;
	struct lt_child victim;
	struct reply rep;
	struct fid_av *av;
	struct cmd c;
	int round, ret;
	unsigned i;

	if (!LT_CHECK_RET(open_named(p, name, FI_AV_TABLE, 0, NULL, 100000, &av, NULL), 0,
			  "kill: create"))
		return;
	for (i = 0; i < 4; i++)
		make_addr(900000 + i, &a[i]);
	LT_CHECK_RET(fi_av_insert(av, a, 4, fi_addr, 0, NULL), 4, "kill: insert 4");

	for (round = 0; round < KILL_ROUNDS; round++) {
		if (!LT_CHECK(child_start(&victim), "kill %d: victim process", round))
			break;
		c = open_cmd(name, 0, FI_AV_UNSPEC);
		LT_CHECK_RET(child_cmd(&victim, &c, &rep), 0, "kill %d: victim opens", round);
		c = (struct cmd){.op = CMD_CHURN, .a = 100000 * (unsigned) (round + 1)};
		lt_pipe_send(victim.to_child, &c, sizeof(c));
		lt_pipe_recv(victim.from_child, &ret, sizeof(ret), CMD_TIMEOUT_MS);
		lt_sleep_ms(150 + 37 * (unsigned) round);
		kill(victim.pid, SIGKILL);
		lt_child_reap(&victim, CMD_TIMEOUT_MS, false);

		/* the survivor: every call works, its entries are intact */
		LT_CHECK(holds(av, fi_addr[0], 900000) && holds(av, fi_addr[3], 900003),
			 "kill %d: survivor's entries intact", round);
		make_addr(800000 + (unsigned) round, &sin);
		ret = fi_av_insert(av, &sin, 1, &more, 0, NULL);
		LT_CHECK(ret == 1 && holds(av, more, 800000 + (unsigned) round),
			 "kill %d: insert after the death works", round);
		LT_CHECK_RET(fi_av_remove(av, &more, 1, 0), 0, "kill %d: remove works", round);
	}
	LT_CHECK_RET(fi_close(&av->fid), 0, "kill: close");
	LT_CHECK(!shm_exists(name), "kill: gone after the last live user closed");

	/* every user dead: the next opener finds the name stale and gone */
	name = new_name("orphan");
	if (LT_CHECK(child_start(&victim), "orphan: process")) {
		c = open_cmd(name, 0, FI_AV_TABLE);
		LT_CHECK_RET(child_cmd(&victim, &c, &rep), 0, "orphan: opens");
		c = (struct cmd){.op = CMD_INSERT, .a = 1, .b = 1};
		child_cmd(&victim, &c, &rep);
		lt_child_reap(&victim, CMD_TIMEOUT_MS, true);
		LT_CHECK(shm_exists(name), "orphan: object left by the dead process");
		ret = open_named(p, name, FI_AV_TABLE, FI_READ, NULL, 0, &av, NULL);
		LT_CHECK(ret < 0, "orphan: FI_READ finds no live AV (%d)", ret);
		LT_CHECK(!shm_exists(name), "orphan: the stale object is cleaned up");
	}
}

/* FI_EVENT works on a named AV too. */
static void test_event(struct proc *p)
{
	struct fi_eq_attr eq_attr = {.wait_obj = FI_WAIT_UNSPEC};
	struct fi_eq_entry entry;
	struct sockaddr_in sin;
	struct fid_eq *eq;
	struct fid_av *av;
	fi_addr_t fi_addr;
	uint32_t event;
	int ctx, ret;

	if (fi_eq_open(p->dom.fabric, &eq_attr, &eq, NULL))
		return;
	if (LT_CHECK_RET(open_named(p, new_name("event"), FI_AV_MAP, FI_EVENT, NULL, 0, &av,
				    NULL), 0, "event: open") &&
	    LT_CHECK_RET(lt_av_bind(av, &eq->fid, 0), 0, "event: bind")) {
		make_addr(77, &sin);
		LT_CHECK_RET(fi_av_insert(av, &sin, 1, &fi_addr, 0, &ctx), 0, "event: insert");
		ret = (int) fi_eq_sread(eq, &event, &entry, sizeof(entry), CMD_TIMEOUT_MS, 0);
		LT_CHECK(ret == (int) sizeof(entry) && event == FI_AV_COMPLETE && entry.data == 1 &&
				 holds(av, fi_addr, 77),
			 "event: completes on the named av");
		fi_close(&av->fid);
	}
	fi_close(&eq->fid);
}

int main(int argc, char **argv)
{
	char path[160];
	const char *role;
	struct proc p;
	unsigned i;
	int rfd, wfd;

	role = lt_child_role(argc, argv, &rfd, &wfd);
	if (role)
		return child_main(rfd, wfd);

	lt_begin(argv[0]);
	alarm(HANG_GUARD_S);
	if (proc_init(&p) == -FI_ENODATA)
		lt_skip("provider not available");
	if (LT_CHECK_RET(p.dom.domain ? 0 : -1, 0, "fabric and domain")) {
		test_sharing(&p, FI_AV_TABLE, "table");
		test_sharing(&p, FI_AV_MAP, "map");
		test_open_rules(&p);
		test_capacity(&p);
		test_kill(&p);
		test_event(&p);
	}
	proc_fini(&p);

	/* whatever failed above, no shared object outlives the test */
	for (i = 0; i < name_cnt; i++) {
		snprintf(path, sizeof(path), "/ofi_layer_av.%s", names[i]);
		shm_unlink(path);
	}
	return lt_end();
}
