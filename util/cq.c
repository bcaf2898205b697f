/*
 * Completion queue: a power-of-two ring of entries kept in the richest format, an overflow
 * list behind it so a burst larger than the ring is queued rather than lost, and a separate
 * list of error entries that fi_cq_read reports with -FI_EAVAIL until fi_cq_readerr takes
 * them (the "out of band" errors of fi_cq(3)).
 *
 * Locking: cq->lock covers the ring, the lists and their counts. Progress hooks run without
 * it, because progress writes completions into this CQ (util_cq_write takes the lock).
 */
#include "config.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "util/cq.h"

/* fi_cq_attr.size 0 lets the provider choose. */
#define UTIL_CQ_DEFAULT_SIZE 1024

/* An entry written while the ring was full (or while older overflow entries wait). */
struct util_cq_overflow {
	struct util_dlist link;
	struct util_cq_entry entry;
};

struct util_cq_error {
	struct util_dlist link;
	struct fi_cq_err_entry err;
};

/* sread's wake-up condition. */
struct util_cq_sread_cond {
	struct util_cq *cq;
	size_t threshold; /* entries needed; FI_CQ_COND_THRESHOLD, else 1 */
};

/*
 * Every user format is a prefix of struct fi_cq_tagged_entry, so converting an entry is a
 * copy of the first entry_size bytes.
 */
#define UTIL_CQ_SAME_FIELD(type, field) \
	_Static_assert(offsetof(type, field) == offsetof(struct fi_cq_tagged_entry, field), \
		       #type "." #field " is not a prefix of fi_cq_tagged_entry")
UTIL_CQ_SAME_FIELD(struct fi_cq_entry, op_context);
UTIL_CQ_SAME_FIELD(struct fi_cq_msg_entry, op_context);
UTIL_CQ_SAME_FIELD(struct fi_cq_msg_entry, flags);
UTIL_CQ_SAME_FIELD(struct fi_cq_msg_entry, len);
UTIL_CQ_SAME_FIELD(struct fi_cq_data_entry, op_context);
UTIL_CQ_SAME_FIELD(struct fi_cq_data_entry, flags);
UTIL_CQ_SAME_FIELD(struct fi_cq_data_entry, len);
UTIL_CQ_SAME_FIELD(struct fi_cq_data_entry, buf);
UTIL_CQ_SAME_FIELD(struct fi_cq_data_entry, data);

/*
 * How much of struct fi_cq_err_entry an application of api_version has: before 1.5 it ends
 * after err_data (no err_data_size), before 1.20 after err_data_size (1.20 appends src_addr,
 * which headers from 1.20 on have).
 */
static size_t util_cq_err_entry_size(uint32_t api_version)
{
	if (FI_VERSION_LT(api_version, FI_VERSION(1, 5)))
		return offsetof(struct fi_cq_err_entry, err_data_size);
#if HAVE_STRUCT_FI_CQ_ERR_ENTRY_SRC_ADDR
	if (FI_VERSION_LT(api_version, FI_VERSION(1, 20)))
		return offsetof(struct fi_cq_err_entry, src_addr);
#endif
	return sizeof(struct fi_cq_err_entry);
}

static size_t util_cq_format_size(enum fi_cq_format format)
{
	switch (format) {
	case FI_CQ_FORMAT_CONTEXT:
		return sizeof(struct fi_cq_entry);
	case FI_CQ_FORMAT_MSG:
		return sizeof(struct fi_cq_msg_entry);
	case FI_CQ_FORMAT_DATA:
		return sizeof(struct fi_cq_data_entry);
	case FI_CQ_FORMAT_TAGGED:
		return sizeof(struct fi_cq_tagged_entry);
	default:
		return 0;
	}
}

/* Successful entries waiting; caller holds the lock. */
static inline size_t util_cq_entry_cnt(const struct util_cq *cq)
{
	return cq->tail - cq->head + cq->overflow_cnt;
}

static inline bool util_cq_ring_is_full(const struct util_cq *cq)
{
	return cq->tail - cq->head > cq->ring_mask;
}

/*
 * Writes signal only when someone can be waiting: a thread inside sread, or an application
 * that took the fd with FI_GETWAIT. That keeps the eventfd syscall off the common path of
 * applications that only poll.
 */
static void util_cq_wake(struct util_cq *cq)
{
	if (cq->wait_obj == FI_WAIT_NONE)
		return;
	if (atomic_load(&cq->sleepers) > 0 || atomic_load(&cq->is_fd_exported))
		util_wait_signal(&cq->wait);
}

/*
 * A completion could not be stored (lock held): the CQ is overrun from now on. Warned once;
 * the reader learns it from the FI_EOVERRUN error entry.
 */
static int util_cq_overrun(struct util_cq *cq, const char *what)
{
	if (!cq->is_overrun)
		FI_WARN(util_prov, FI_LOG_CQ, "no memory for %s: the cq is overrun (fi_cq(3)), "
			"completions from now on are lost\n", what);
	cq->is_overrun = true;
	cq->lost_cnt++;
	return -FI_EOVERRUN;
}

/* Writers hold the CQ's lock (or the application serialises them): no locked add needed,
 * readers of the count only compare two readings. */
static inline void util_cq_count_write(struct util_cq *cq)
{
	atomic_store_explicit(&cq->write_cnt,
			      atomic_load_explicit(&cq->write_cnt, memory_order_relaxed) + 1,
			      memory_order_relaxed);
}

int util_cq_write(struct util_cq *cq, void *op_context, uint64_t flags, size_t len,
		  void *buf, uint64_t data, uint64_t tag, fi_addr_t src_addr)
{
	struct util_cq_overflow *over;
	struct util_cq_entry *entry;
	int ret;

	util_lock_acquire(&cq->lock);
	/* While overflow entries wait, new ones queue behind them to keep FIFO order. */
	if (likely(util_dlist_empty(&cq->overflow) && !util_cq_ring_is_full(cq) &&
		   !cq->is_overrun)) {
		entry = &cq->ring[cq->tail & cq->ring_mask];
		cq->tail++;
	} else {
		over = cq->is_overrun ? NULL : malloc(sizeof(*over));
		if (!over) {
			ret = util_cq_overrun(cq, "an overflow completion");
			util_lock_release(&cq->lock);
			util_cq_wake(cq);
			return ret;
		}
		util_dlist_insert_tail(&over->link, &cq->overflow);
		cq->overflow_cnt++;
		entry = &over->entry;
	}
	entry->entry.op_context = op_context;
	entry->entry.flags = flags;
	entry->entry.len = len;
	entry->entry.buf = buf;
	entry->entry.data = data;
	entry->entry.tag = tag;
	entry->src_addr = src_addr;
	util_cq_count_write(cq);
	util_lock_release(&cq->lock);

	util_cq_wake(cq);
	return 0;
}

int util_cq_write_error(struct util_cq *cq, const struct fi_cq_err_entry *err)
{
	struct util_cq_error *error;
	int ret;

	if (!err)
		return -FI_EINVAL;

	util_lock_acquire(&cq->lock);
	error = cq->is_overrun ? NULL : malloc(sizeof(*error));
	if (!error) {
		ret = util_cq_overrun(cq, "an error completion");
		util_lock_release(&cq->lock);
		util_cq_wake(cq);
		return ret;
	}
	error->err = *err;
	/* The caller's err_data may not outlive this call, and none is stored. */
	error->err.err_data = NULL;
	error->err.err_data_size = 0;
	util_dlist_insert_tail(&error->link, &cq->errors);
	cq->error_cnt++;
	util_cq_count_write(cq);
	util_lock_release(&cq->lock);

	util_cq_wake(cq);
	return 0;
}

size_t util_cq_count(struct util_cq *cq)
{
	size_t cnt;

	util_lock_acquire(&cq->lock);
	cnt = util_cq_entry_cnt(cq) + cq->error_cnt + cq->is_overrun;
	util_lock_release(&cq->lock);
	return cnt;
}

static inline void util_cq_copy_out(const struct util_cq *cq, const struct util_cq_entry *entry,
				    char *buf, fi_addr_t *src_addr, size_t i)
{
	memcpy(buf + i * cq->entry_size, &entry->entry, cq->entry_size);
	if (src_addr)
		src_addr[i] = entry->src_addr;
}

/* Moves overflow entries into ring slots freed by a read; they are older than any new write. */
static void util_cq_refill_ring(struct util_cq *cq)
{
	struct util_cq_overflow *over;
	struct util_dlist *item;

	while (!util_cq_ring_is_full(cq) && (item = util_dlist_pop_front(&cq->overflow))) {
		over = container_of(item, struct util_cq_overflow, link);
		cq->ring[cq->tail & cq->ring_mask] = over->entry;
		cq->tail++;
		cq->overflow_cnt--;
		free(over);
	}
}

/* The non-blocking read without progress: sread calls it after its own progress loop. */
static ssize_t util_cq_read_entries(struct util_cq *cq, void *buf, size_t count,
				    fi_addr_t *src_addr)
{
	struct util_cq_overflow *over;
	struct util_dlist *item;
	ssize_t ret;
	size_t i;

	util_lock_acquire(&cq->lock);
	if (cq->error_cnt) {
		ret = -FI_EAVAIL;
		goto unlock;
	}
	if (!util_cq_entry_cnt(cq)) {
		/* an overrun is reported once everything stored before it is read */
		ret = cq->is_overrun ? -FI_EAVAIL : -FI_EAGAIN;
		goto unlock;
	}

	/* The ring holds the oldest entries, overflow the newer ones. */
	for (i = 0; i < count; i++) {
		if (cq->head != cq->tail) {
			util_cq_copy_out(cq, &cq->ring[cq->head & cq->ring_mask], buf, src_addr, i);
			cq->head++;
		} else if ((item = util_dlist_pop_front(&cq->overflow))) {
			over = container_of(item, struct util_cq_overflow, link);
			util_cq_copy_out(cq, &over->entry, buf, src_addr, i);
			cq->overflow_cnt--;
			free(over);
		} else {
			break;
		}
	}
	util_cq_refill_ring(cq);
	/* count 0 only drives progress: report 0 read, not "empty", since entries wait. */
	ret = (ssize_t) i;
unlock:
	util_lock_release(&cq->lock);
	return ret;
}

static ssize_t util_cq_readfrom(struct fid_cq *cq_fid, void *buf, size_t count,
				fi_addr_t *src_addr)
{
	struct util_cq *cq = container_of(cq_fid, struct util_cq, cq_fid);

	if (count && !buf)
		return -FI_EINVAL;

	util_progress_run(&cq->progress);
	return util_cq_read_entries(cq, buf, count, src_addr);
}

static ssize_t util_cq_read(struct fid_cq *cq_fid, void *buf, size_t count)
{
	return util_cq_readfrom(cq_fid, buf, count, NULL);
}

static ssize_t util_cq_readerr(struct fid_cq *cq_fid, struct fi_cq_err_entry *buf,
			       uint64_t flags)
{
	struct util_cq *cq = container_of(cq_fid, struct util_cq, cq_fid);
	struct fi_cq_err_entry overrun = { 0 }, out, *err;
	struct util_cq_error *error;
	struct util_dlist *item;

	if (!buf)
		return -FI_EINVAL;

	util_progress_run(&cq->progress);

	util_lock_acquire(&cq->lock);
	item = util_dlist_pop_front(&cq->errors);
	if (item)
		cq->error_cnt--;
	else if (cq->is_overrun && !util_cq_entry_cnt(cq))
		overrun = (struct fi_cq_err_entry) {
			.err = FI_EOVERRUN,
			.prov_errno = -FI_EOVERRUN,
			.olen = cq->lost_cnt,
		};
	util_lock_release(&cq->lock);
	if (!item && !overrun.err)
		return -FI_EAGAIN;
	error = item ? container_of(item, struct util_cq_error, link) : NULL;
	err = error ? &error->err : &overrun;

	out = *err;
	if (!FI_VERSION_LT(cq->api_version, FI_VERSION(1, 5))) {
		/*
		 * With a buffer (err_data_size > 0) it is left alone and 0 bytes are reported
		 * copied; without one, err_data would point at provider data, and there is none.
		 */
		out.err_data = buf->err_data_size ? buf->err_data : NULL;
		out.err_data_size = 0;
	}
#if HAVE_STRUCT_FI_CQ_ERR_ENTRY_SRC_ADDR
	out.src_addr = FI_ADDR_NOTAVAIL; /* no error here names an address (FI_SOURCE_ERR) */
#endif
	memcpy(buf, &out, util_cq_err_entry_size(cq->api_version));
	free(error);
	return 1;
}

static bool util_cq_sread_done(void *arg)
{
	struct util_cq_sread_cond *cond = arg;
	struct util_cq *cq = cond->cq;
	bool is_done;

	if (atomic_load(&cq->is_signaled))
		return true;

	util_lock_acquire(&cq->lock);
	is_done = cq->error_cnt || cq->is_overrun || util_cq_entry_cnt(cq) >= cond->threshold;
	util_lock_release(&cq->lock);
	return is_done;
}

static ssize_t util_cq_sreadfrom(struct fid_cq *cq_fid, void *buf, size_t count,
				 fi_addr_t *src_addr, const void *cond, int timeout)
{
	struct util_cq *cq = container_of(cq_fid, struct util_cq, cq_fid);
	struct util_cq_sread_cond sread_cond = { .cq = cq, .threshold = 1 };
	uint64_t start_ms = util_now_ms();
	bool is_timed_out;
	ssize_t ret;

	/* fi_cq(3): sread is invalid on an FI_WAIT_NONE CQ; there is nothing to sleep on. */
	if (cq->wait_obj == FI_WAIT_NONE)
		return -FI_ENOSYS;
	if (count && !buf)
		return -FI_EINVAL;
	if (cq->wait_cond == FI_CQ_COND_THRESHOLD && cond)
		sread_cond.threshold = UTIL_MAX(*(const size_t *) cond, (size_t) 1);

	/* Announce the sleeper before the first check, so a racing write signals. */
	atomic_fetch_add(&cq->sleepers, 1);
	for (;;) {
		ret = util_wait_until(&cq->wait, &cq->progress,
				      util_timeout_left(timeout, start_ms), util_cq_sread_done,
				      &sread_cond);
		if (ret && ret != -FI_EAGAIN)
			break;
		is_timed_out = ret == -FI_EAGAIN;

		/* On timeout too: a threshold not reached still returns what is there. */
		ret = util_cq_read_entries(cq, buf, count, src_addr);
		if (ret != -FI_EAGAIN)
			break;
		/*
		 * The signal is consumed only when it makes a read return empty-handed, so one
		 * sent while entries were being returned still ends the next sread.
		 */
		if (atomic_exchange(&cq->is_signaled, false) || is_timed_out)
			break;
		/* Another reader took the entries first: wait out the rest of the timeout. */
	}
	atomic_fetch_sub(&cq->sleepers, 1);
	return ret;
}

static ssize_t util_cq_sread(struct fid_cq *cq_fid, void *buf, size_t count, const void *cond,
			     int timeout)
{
	return util_cq_sreadfrom(cq_fid, buf, count, NULL, cond, timeout);
}

static int util_cq_signal(struct fid_cq *cq_fid)
{
	struct util_cq *cq = container_of(cq_fid, struct util_cq, cq_fid);

	/* fi_cq(3): only available with a wait object. */
	if (cq->wait_obj == FI_WAIT_NONE)
		return -FI_ENOSYS;

	atomic_store(&cq->is_signaled, true);
	util_wait_signal(&cq->wait);
	return 0;
}

static const char *util_cq_strerror(struct fid_cq *cq_fid, int prov_errno, const void *err_data,
				    char *buf, size_t len)
{
	return util_strerror(prov_errno, buf, len);
}

struct fi_ops_cq util_cq_ops = {
	.size = sizeof(struct fi_ops_cq),
	.read = util_cq_read,
	.readfrom = util_cq_readfrom,
	.readerr = util_cq_readerr,
	.sread = util_cq_sread,
	.sreadfrom = util_cq_sreadfrom,
	.signal = util_cq_signal,
	.strerror = util_cq_strerror,
};

int util_cq_control(struct fid *fid, int command, void *arg)
{
	struct util_cq *cq = container_of(fid, struct util_cq, cq_fid.fid);

	return util_wait_control(&cq->wait, cq->wait_obj, command, arg, &cq->is_fd_exported);
}

int util_cq_trywait(struct util_cq *cq)
{
	if (cq->wait_obj == FI_WAIT_NONE)
		return -FI_ENODATA;

	/* Whoever calls fi_trywait sleeps on the fd next: writes must signal from now on. */
	atomic_store(&cq->is_fd_exported, true);
	/* Reset before looking: an entry written after the look signals again. */
	util_wait_reset(&cq->wait);
	if (cq->progress.trywait && cq->progress.trywait(cq->progress.arg))
		return -FI_EAGAIN;
	return util_cq_count(cq) ? -FI_EAGAIN : 0;
}

int util_cq_init(struct util_cq *cq, const struct fi_cq_attr *attr, bool is_thread_safe,
		 const struct util_progress *progress, void *context)
{
	struct fi_ops *fid_ops = cq->cq_fid.fid.ops;
	enum fi_cq_format format = FI_CQ_FORMAT_CONTEXT;
	enum fi_cq_wait_cond wait_cond = FI_CQ_COND_NONE;
	enum fi_wait_obj wait_obj = FI_WAIT_NONE;
	size_t size = UTIL_CQ_DEFAULT_SIZE;
	size_t entry_size, ring_size;
	struct util_cq_entry *ring;
	int ret;

	if (attr) {
		if (attr->flags & ~FI_AFFINITY) {
			FI_WARN(util_prov, FI_LOG_CQ, "unsupported cq flags 0x%" PRIx64 "\n",
				attr->flags);
			return -FI_EBADFLAGS;
		}
		if (attr->format != FI_CQ_FORMAT_UNSPEC)
			format = attr->format;
		if (attr->size)
			size = attr->size;
		wait_obj = attr->wait_obj;
		wait_cond = attr->wait_cond;
	}

	entry_size = util_cq_format_size(format);
	if (!entry_size) {
		FI_WARN(util_prov, FI_LOG_CQ, "unknown cq format %d\n", format);
		return -FI_EINVAL;
	}
	ret = util_wait_obj_resolve(wait_obj, &wait_obj);
	if (ret)
		return ret;
	/* fi_cq(3): wait_cond is ignored without a wait object. */
	if (wait_obj != FI_WAIT_NONE && wait_cond != FI_CQ_COND_NONE &&
	    wait_cond != FI_CQ_COND_THRESHOLD) {
		FI_WARN(util_prov, FI_LOG_CQ, "unknown cq wait condition %d\n", wait_cond);
		return -FI_EINVAL;
	}
	/* Keeps util_roundup_pow2 and the allocation size from overflowing. */
	if (size > (SIZE_MAX >> 1) / sizeof(*ring)) {
		FI_WARN(util_prov, FI_LOG_CQ, "cq size %zu too large\n", size);
		return -FI_EINVAL;
	}
	ring_size = util_roundup_pow2(size);

	ring = calloc(ring_size, sizeof(*ring));
	if (!ring)
		return -FI_ENOMEM;

	/* fid.ops belongs to the owner, who may have set it before calling us. */
	memset(cq, 0, sizeof(*cq));
	cq->cq_fid.fid.ops = fid_ops;
	cq->cq_fid.fid.fclass = FI_CLASS_CQ;
	cq->cq_fid.fid.context = context;
	cq->cq_fid.ops = &util_cq_ops;
	cq->format = format;
	cq->entry_size = entry_size;
	cq->wait_obj = wait_obj;
	cq->wait.epfd = -1;
	cq->wait.signal_fd = -1;
	cq->ring = ring;
	cq->ring_mask = ring_size - 1;
	util_dlist_init(&cq->overflow);
	util_dlist_init(&cq->errors);
	atomic_init(&cq->is_signaled, false);
	if (progress)
		cq->progress = *progress;
	atomic_init(&cq->ref, 0);
	cq->wait_cond = wait_obj == FI_WAIT_NONE ? FI_CQ_COND_NONE : wait_cond;
	atomic_init(&cq->sleepers, 0);
	atomic_init(&cq->is_fd_exported, false);
	cq->api_version = FI_VERSION(FI_MAJOR_VERSION, FI_MINOR_VERSION);

	if (wait_obj != FI_WAIT_NONE) {
		ret = util_wait_init(&cq->wait);
		if (ret)
			goto err_free_ring;
	}
	util_lock_init(&cq->lock, is_thread_safe);
	return 0;

err_free_ring:
	free(ring);
	cq->ring = NULL;
	return ret;
}

int util_cq_fini(struct util_cq *cq)
{
	struct util_dlist *item;

	if (atomic_load(&cq->ref) > 0)
		return -FI_EBUSY;

	/* fi_cq(3): completions still queued at close are lost. */
	while ((item = util_dlist_pop_front(&cq->overflow)))
		free(container_of(item, struct util_cq_overflow, link));
	while ((item = util_dlist_pop_front(&cq->errors)))
		free(container_of(item, struct util_cq_error, link));
	cq->overflow_cnt = 0;
	cq->error_cnt = 0;
	free(cq->ring);
	cq->ring = NULL;
	if (cq->wait_obj != FI_WAIT_NONE)
		util_wait_fini(&cq->wait);
	util_lock_fini(&cq->lock);
	return 0;
}
