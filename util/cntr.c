/*
 * Counter: two atomics and a wait set. Updates need no lock; fi_cntr_wait sleeps in the
 * wait set until the value reaches the threshold or the error count moves.
 */
#include "config.h"

#include <inttypes.h>
#include <sched.h>
#include <string.h>

#include "util/cntr.h"

/* fi_cntr_wait's wake-up condition. */
struct util_cntr_wait_cond {
	struct util_cntr *cntr;
	uint64_t threshold;
	uint64_t err_start;     /* error count when the wait began */
	bool is_reached;        /* the last check saw cnt >= threshold */
};

/*
 * Updates signal only when someone can be waiting: a thread inside fi_cntr_wait, or an
 * application that took the fd with FI_GETWAIT. Counting completions then costs no syscall.
 */
static void util_cntr_wake(struct util_cntr *cntr)
{
	if (cntr->wait_obj == FI_WAIT_NONE)
		return;
	if (atomic_load(&cntr->sleepers) > 0 || atomic_load(&cntr->is_fd_exported))
		util_wait_signal(&cntr->wait);
}

void util_cntr_inc(struct util_cntr *cntr)
{
	atomic_fetch_add(&cntr->cnt, 1);
	util_cntr_wake(cntr);
}

void util_cntr_inc_err(struct util_cntr *cntr)
{
	atomic_fetch_add(&cntr->err, 1);
	util_cntr_wake(cntr);
}

static uint64_t util_cntr_read(struct fid_cntr *cntr_fid)
{
	struct util_cntr *cntr = container_of(cntr_fid, struct util_cntr, cntr_fid);
	uint64_t cnt;

	util_progress_run(&cntr->progress);
	cnt = atomic_load(&cntr->cnt);
	atomic_store(&cntr->seen_cnt, cnt);
	return cnt;
}

static uint64_t util_cntr_readerr(struct fid_cntr *cntr_fid)
{
	struct util_cntr *cntr = container_of(cntr_fid, struct util_cntr, cntr_fid);
	uint64_t err;

	util_progress_run(&cntr->progress);
	err = atomic_load(&cntr->err);
	atomic_store(&cntr->seen_err, err);
	return err;
}

/* fi_poll(3): the application's own updates are no event; they move the poll mark along. */
static int util_cntr_add(struct fid_cntr *cntr_fid, uint64_t value)
{
	struct util_cntr *cntr = container_of(cntr_fid, struct util_cntr, cntr_fid);

	atomic_store(&cntr->poll_cnt, atomic_fetch_add(&cntr->cnt, value) + value);
	util_cntr_wake(cntr);
	return 0;
}

static int util_cntr_set(struct fid_cntr *cntr_fid, uint64_t value)
{
	struct util_cntr *cntr = container_of(cntr_fid, struct util_cntr, cntr_fid);

	atomic_store(&cntr->cnt, value);
	atomic_store(&cntr->poll_cnt, value);
	util_cntr_wake(cntr);
	return 0;
}

static int util_cntr_adderr(struct fid_cntr *cntr_fid, uint64_t value)
{
	struct util_cntr *cntr = container_of(cntr_fid, struct util_cntr, cntr_fid);

	atomic_store(&cntr->poll_err, atomic_fetch_add(&cntr->err, value) + value);
	util_cntr_wake(cntr);
	return 0;
}

static int util_cntr_seterr(struct fid_cntr *cntr_fid, uint64_t value)
{
	struct util_cntr *cntr = container_of(cntr_fid, struct util_cntr, cntr_fid);

	atomic_store(&cntr->err, value);
	atomic_store(&cntr->poll_err, value);
	util_cntr_wake(cntr);
	return 0;
}

bool util_cntr_poll(struct util_cntr *cntr)
{
	uint64_t cnt = atomic_load(&cntr->cnt);
	uint64_t err = atomic_load(&cntr->err);

	if (cnt == atomic_load(&cntr->poll_cnt) && err == atomic_load(&cntr->poll_err))
		return false;
	atomic_store(&cntr->poll_cnt, cnt);
	atomic_store(&cntr->poll_err, err);
	return true;
}

static bool util_cntr_wait_done(void *arg)
{
	struct util_cntr_wait_cond *cond = arg;

	/* Record why, so a concurrent fi_cntr_set cannot turn success into -FI_EAVAIL. */
	cond->is_reached = atomic_load(&cond->cntr->cnt) >= cond->threshold;
	return cond->is_reached || atomic_load(&cond->cntr->err) != cond->err_start;
}

/*
 * fi_cntr(3) calls waiting on an FI_WAIT_NONE counter invalid; applications do it anyway
 * (fabtests' fi_multi_mr, and libfabric's own counters allow it), so it spins on progress,
 * yielding the CPU between turns, until the threshold, an error or the timeout.
 */
static int util_cntr_spin(struct util_cntr *cntr, uint64_t threshold, int timeout)
{
	uint64_t err_start = atomic_load(&cntr->err);
	uint64_t start = util_now_ms();

	for (;;) {
		util_progress_run(&cntr->progress);
		if (atomic_load(&cntr->cnt) >= threshold)
			return 0;
		if (atomic_load(&cntr->err) != err_start)
			return -FI_EAVAIL;
		if (timeout >= 0 && util_now_ms() - start >= (uint64_t) timeout)
			return -FI_ETIMEDOUT;
		sched_yield();
	}
}

static int util_cntr_wait(struct fid_cntr *cntr_fid, uint64_t threshold, int timeout)
{
	struct util_cntr *cntr = container_of(cntr_fid, struct util_cntr, cntr_fid);
	struct util_cntr_wait_cond cond = { .cntr = cntr, .threshold = threshold };
	int ret;

	if (cntr->wait_obj == FI_WAIT_NONE)
		return util_cntr_spin(cntr, threshold, timeout);

	/* Announce the sleeper before the first check, so a racing update signals. */
	atomic_fetch_add(&cntr->sleepers, 1);
	cond.err_start = atomic_load(&cntr->err);
	ret = util_wait_until(&cntr->wait, &cntr->progress, timeout, util_cntr_wait_done, &cond);
	atomic_fetch_sub(&cntr->sleepers, 1);

	/* fi_cntr(3): a timeout is -FI_ETIMEDOUT here, not the -FI_EAGAIN of blocking reads. */
	if (ret == -FI_EAGAIN)
		return -FI_ETIMEDOUT;
	if (ret)
		return ret;
	return cond.is_reached ? 0 : -FI_EAVAIL;
}

struct fi_ops_cntr util_cntr_ops = {
	.size = sizeof(struct fi_ops_cntr),
	.read = util_cntr_read,
	.readerr = util_cntr_readerr,
	.add = util_cntr_add,
	.set = util_cntr_set,
	.wait = util_cntr_wait,
	.adderr = util_cntr_adderr,
	.seterr = util_cntr_seterr,
};

int util_cntr_control(struct fid *fid, int command, void *arg)
{
	struct util_cntr *cntr = container_of(fid, struct util_cntr, cntr_fid.fid);

	return util_wait_control(&cntr->wait, cntr->wait_obj, command, arg,
				 &cntr->is_fd_exported);
}

int util_cntr_trywait(struct util_cntr *cntr)
{
	if (cntr->wait_obj == FI_WAIT_NONE)
		return -FI_ENODATA;

	/* Whoever calls fi_trywait sleeps on the fd next: updates must signal from now on. */
	atomic_store(&cntr->is_fd_exported, true);
	/* Reset before looking: an update after the look signals again. */
	util_wait_reset(&cntr->wait);
	if (cntr->progress.trywait && cntr->progress.trywait(cntr->progress.arg))
		return -FI_EAGAIN;
	if (atomic_load(&cntr->cnt) != atomic_load(&cntr->seen_cnt) ||
	    atomic_load(&cntr->err) != atomic_load(&cntr->seen_err))
		return -FI_EAGAIN;
	return 0;
}

int util_cntr_init(struct util_cntr *cntr, const struct fi_cntr_attr *attr,
		   const struct util_progress *progress, void *context)
{
	struct fi_ops *fid_ops = cntr->cntr_fid.fid.ops;
	enum fi_wait_obj wait_obj = FI_WAIT_NONE;
	int ret;

	if (attr) {
		if (attr->events != FI_CNTR_EVENTS_COMP) {
			FI_WARN(util_prov, FI_LOG_CNTR, "unknown counter events %d\n",
				attr->events);
			return -FI_EINVAL;
		}
		/* fi_cntr(3): flags are reserved and must be 0. */
		if (attr->flags) {
			FI_WARN(util_prov, FI_LOG_CNTR, "unsupported counter flags 0x%" PRIx64 "\n",
				attr->flags);
			return -FI_EBADFLAGS;
		}
		wait_obj = attr->wait_obj;
	}
	ret = util_wait_obj_resolve(wait_obj, &wait_obj);
	if (ret)
		return ret;

	/* fid.ops belongs to the owner, who may have set it before calling us. */
	memset(cntr, 0, sizeof(*cntr));
	cntr->cntr_fid.fid.ops = fid_ops;
	cntr->cntr_fid.fid.fclass = FI_CLASS_CNTR;
	cntr->cntr_fid.fid.context = context;
	cntr->cntr_fid.ops = &util_cntr_ops;
	cntr->wait_obj = wait_obj;
	cntr->wait.epfd = -1;
	cntr->wait.signal_fd = -1;
	atomic_init(&cntr->cnt, 0);
	atomic_init(&cntr->err, 0);
	if (progress)
		cntr->progress = *progress;
	atomic_init(&cntr->ref, 0);
	atomic_init(&cntr->sleepers, 0);
	atomic_init(&cntr->is_fd_exported, false);
	atomic_init(&cntr->seen_cnt, 0);
	atomic_init(&cntr->seen_err, 0);
	atomic_init(&cntr->poll_cnt, 0);
	atomic_init(&cntr->poll_err, 0);

	if (wait_obj != FI_WAIT_NONE)
		return util_wait_init(&cntr->wait);
	return 0;
}

int util_cntr_fini(struct util_cntr *cntr)
{
	if (atomic_load(&cntr->ref) > 0)
		return -FI_EBUSY;

	if (cntr->wait_obj != FI_WAIT_NONE)
		util_wait_fini(&cntr->wait);
	return 0;
}
