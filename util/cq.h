/*
 * Completion queue object: implements struct fid_cq for all four formats (context, msg,
 * data, tagged) on top of a ring of entries stored in the tagged format plus the source
 * address, an overflow list so that no completion is ever lost when the ring is full, and
 * a list of error entries. Progress is manual: reads call the owner's progress hook first.
 *
 * A completion that cannot be stored (no memory for an overflow or error entry) is never
 * dropped silently: the CQ enters the overrun state of fi_cq(3). Reads still return what
 * was stored before; after that every read reports -FI_EAVAIL and fi_cq_readerr an entry
 * with err FI_EOVERRUN (its olen: the completions lost), and nothing more is stored.
 *
 * The owner (the provider) embeds struct util_cq first in its own CQ, points cq_fid.fid.ops
 * at its own fi_ops (close, bind, control) and may call util_cq_control for FI_GETWAIT.
 */
#ifndef UTIL_CQ_H
#define UTIL_CQ_H

#include <stdatomic.h>
#include <rdma/fi_eq.h>

#include "util/util.h"
#include "util/list.h"
#include "util/lock.h"
#include "util/wait.h"

/* One completion as stored: the richest format plus the source address. */
struct util_cq_entry {
	struct fi_cq_tagged_entry entry;
	fi_addr_t src_addr;
};

struct util_cq {
	struct fid_cq cq_fid;
	enum fi_cq_format format;
	size_t entry_size;              /* sizeof the user's entry format */
	enum fi_wait_obj wait_obj;      /* FI_WAIT_NONE or FI_WAIT_FD (UNSPEC resolved to FD) */
	struct util_wait wait;          /* valid when wait_obj != FI_WAIT_NONE */
	struct util_lock lock;

	struct util_cq_entry *ring;     /* circular, ring_mask + 1 entries */
	size_t ring_mask;
	size_t head;                    /* next entry to read */
	size_t tail;                    /* next free slot */
	struct util_dlist overflow;     /* struct util_cq_overflow, when the ring is full */
	struct util_dlist errors;       /* struct util_cq_error, in order of writing */
	atomic_bool is_signaled;        /* fi_cq_signal called: next blocking read returns */

	struct util_progress progress;
	atomic_int ref;                 /* objects bound to this CQ; fini refuses while > 0 */

	size_t overflow_cnt;            /* entries in overflow */
	size_t error_cnt;               /* entries in errors */
	enum fi_cq_wait_cond wait_cond; /* FI_CQ_COND_THRESHOLD: sread's cond is a size_t */
	atomic_int sleepers;            /* threads in sread: writes must signal the wait set */
	atomic_bool is_fd_exported;     /* FI_GETWAIT handed out the fd: every write signals */
	atomic_size_t write_cnt;        /* completions and errors written, ever */
	uint32_t api_version;           /* fabric's; below 1.5 fi_cq_err_entry is the short one.
					 * util_cq_init sets the header's version, the owner may
					 * overwrite it with fabric_attr->api_version */
	bool is_overrun;                /* a completion could not be stored: fatal (fi_cq(3)) */
	size_t lost_cnt;                /* completions not stored since (the first included) */
};

/*
 * Initialises cq from attr (format, size, wait_obj; FI_WAIT_SET and FI_WAIT_MUTEX_COND are
 * refused with -FI_ENOSYS, an unknown format or wait_obj with -FI_EINVAL). The fid's
 * context is set, its ops table to util_cq_ops; fid.ops is left to the owner.
 * Also: attr NULL means defaults (context format, no wait object, 1024 entries); size is
 * rounded up to a power of two; FI_WAIT_YIELD and FI_WAIT_POLLFD are -FI_ENOSYS too; flags
 * other than FI_AFFINITY are -FI_EBADFLAGS; wait_cond FI_CQ_COND_THRESHOLD is honoured.
 * On an FI_WAIT_NONE CQ, sread, sreadfrom and signal return -FI_ENOSYS (fi_cq(3): invalid).
 */
int util_cq_init(struct util_cq *cq, const struct fi_cq_attr *attr, bool is_thread_safe,
		 const struct util_progress *progress, void *context);
/* Returns -FI_EBUSY while ref > 0, else frees everything and returns 0. */
int util_cq_fini(struct util_cq *cq);

/*
 * Appends a completion (the ring overflows into a list). 0, or -FI_EOVERRUN when it could not
 * be stored: the CQ is overrun then, and says so to its reader (see the top); the caller has
 * nothing more to do about it.
 */
int util_cq_write(struct util_cq *cq, void *op_context, uint64_t flags, size_t len,
		  void *buf, uint64_t data, uint64_t tag, fi_addr_t src_addr);
/* Appends an error completion (err->err positive; err->err_data is not kept). As above. */
int util_cq_write_error(struct util_cq *cq, const struct fi_cq_err_entry *err);
/* Number of entries and errors waiting to be read (an overrun counts as one). */
size_t util_cq_count(struct util_cq *cq);

/* Completions and errors written since the CQ opened (the owner compares two readings). */
static inline size_t util_cq_write_count(const struct util_cq *cq)
{
	return atomic_load_explicit(&cq->write_cnt, memory_order_relaxed);
}

/* Whether a thread may be asleep on the CQ: in sread, or on the fd FI_GETWAIT handed out. */
static inline bool util_cq_may_sleep(const struct util_cq *cq)
{
	return atomic_load(&cq->sleepers) > 0 || atomic_load(&cq->is_fd_exported);
}

/* FI_GETWAIT: returns the wait fd in *(int *) arg; -FI_ENODATA without a wait object. */
int util_cq_control(struct fid *fid, int command, void *arg);

/*
 * For fi_trywait: clears the wait set's pending signal, then returns -FI_EAGAIN when entries
 * or errors are waiting (or the owner's trywait hook says so), 0 when sleeping on the fd is
 * safe. -FI_ENODATA without a wait object.
 */
int util_cq_trywait(struct util_cq *cq);

/* read, readfrom, readerr, sread, sreadfrom, signal, strerror. */
extern struct fi_ops_cq util_cq_ops;

#endif /* UTIL_CQ_H */
