/*
 * Event queue: one list of variable-size events in the order written. An error event at
 * the head makes fi_eq_read return -FI_EAVAIL until fi_eq_readerr takes it, so events keep
 * their order (an AV's error entries come before its FI_AV_COMPLETE, as fi_av(3) requires).
 *
 * Locking: eq->lock covers the list and last_err. Progress hooks run without it, because
 * progress writes events into this EQ.
 */
#include "config.h"

#include <inttypes.h>
#include <stdalign.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "util/eq.h"

struct util_eq_event {
	struct util_dlist link;
	uint32_t event;
	bool is_error;          /* data holds a struct fi_eq_err_entry, then its err_data */
	size_t len;             /* bytes returned by a read: the caller's len, or the err entry */
	alignas(max_align_t) unsigned char data[];
};

/* fi_eq_err_entry before 1.5 ended after err_data: no err_data_size. */
#define UTIL_EQ_ERR_ENTRY_1_0_SIZE offsetof(struct fi_eq_err_entry, err_data_size)

static inline struct fi_eq_err_entry *util_eq_err_entry(struct util_eq_event *ev)
{
	return (struct fi_eq_err_entry *) ev->data;
}

static struct util_eq_event *util_eq_new_error(const struct fi_eq_err_entry *err, size_t len)
{
	struct fi_eq_err_entry *entry;
	struct util_eq_event *ev;
	size_t err_data_size = 0;

	/* A writer built against < 1.5 headers passes the short entry without err_data_size. */
	if (len >= sizeof(*err) && err->err_data)
		err_data_size = err->err_data_size;

	ev = malloc(sizeof(*ev) + sizeof(*entry) + err_data_size);
	if (!ev)
		return NULL;
	ev->is_error = true;
	ev->len = sizeof(*entry);
	entry = util_eq_err_entry(ev);
	memset(entry, 0, sizeof(*entry));
	memcpy(entry, err, UTIL_MIN(len, sizeof(*entry)));
	/* The writer's err_data may be gone by the time the event is read: keep a copy. */
	if (err_data_size) {
		entry->err_data = ev->data + sizeof(*entry);
		memcpy(entry->err_data, err->err_data, err_data_size);
	} else {
		entry->err_data = NULL;
	}
	entry->err_data_size = err_data_size;
	return ev;
}

ssize_t util_eq_write(struct util_eq *eq, uint32_t event, const void *buf, size_t len,
		      uint64_t flags)
{
	struct util_eq_event *ev;

	if (!buf || !len)
		return -FI_EINVAL;

	if (flags & UTIL_EQ_ERR) {
		if (len < UTIL_EQ_ERR_ENTRY_1_0_SIZE)
			return -FI_EINVAL;
		ev = util_eq_new_error(buf, len);
	} else {
		ev = malloc(sizeof(*ev) + len);
		if (ev) {
			ev->is_error = false;
			ev->len = len;
			memcpy(ev->data, buf, len);
		}
	}
	if (!ev) {
		FI_WARN(util_prov, FI_LOG_EQ, "no memory for an event\n");
		return -FI_ENOMEM;
	}
	ev->event = event;

	util_lock_acquire(&eq->lock);
	util_dlist_insert_tail(&ev->link, &eq->events);
	util_lock_release(&eq->lock);

	/* Events are rare: always signal rather than track who might be waiting. */
	if (eq->wait_obj != FI_WAIT_NONE)
		util_wait_signal(&eq->wait);
	return (ssize_t) len;
}

int util_eq_write_error(struct util_eq *eq, fid_t fid, void *context, uint64_t data, int err,
			int prov_errno)
{
	struct fi_eq_err_entry entry = {
		.fid = fid,
		.context = context,
		.data = data,
		.err = err,
		.prov_errno = prov_errno,
	};
	ssize_t ret;

	ret = util_eq_write(eq, 0, &entry, sizeof(entry), UTIL_EQ_ERR);
	return ret < 0 ? (int) ret : 0;
}

/* fi_eq(3): data lent by the previous readerr stays valid until the next read call. */
static void util_eq_drop_last_err(struct util_eq *eq)
{
	free(eq->last_err);
	eq->last_err = NULL;
}

/* The non-blocking read without progress: sread calls it after its own progress loop. */
static ssize_t util_eq_read_event(struct util_eq *eq, uint32_t *event, void *buf, size_t len,
				  uint64_t flags)
{
	struct util_eq_event *ev;
	ssize_t ret;

	util_lock_acquire(&eq->lock);
	util_eq_drop_last_err(eq);
	if (util_dlist_empty(&eq->events)) {
		ret = -FI_EAGAIN;
		goto unlock;
	}
	ev = container_of(eq->events.next, struct util_eq_event, link);
	if (ev->is_error) {
		ret = -FI_EAVAIL;
		goto unlock;
	}
	/* No buffer at all takes the event and says only which it was (libfabric's own EQs
	 * do the same; fabtests' fi_multinode_coll waits for FI_JOIN_COMPLETE so). */
	if (buf && len < ev->len) {
		ret = -FI_ETOOSMALL;
		goto unlock;
	}

	if (buf)
		memcpy(buf, ev->data, ev->len);
	if (event)
		*event = ev->event;
	ret = buf ? (ssize_t) ev->len : 0;
	if (!(flags & FI_PEEK)) {
		util_dlist_remove(&ev->link);
		free(ev);
	}
unlock:
	util_lock_release(&eq->lock);
	return ret;
}

static ssize_t util_eq_read(struct fid_eq *eq_fid, uint32_t *event, void *buf, size_t len,
			    uint64_t flags)
{
	struct util_eq *eq = container_of(eq_fid, struct util_eq, eq_fid);

	if (!buf && len)
		return -FI_EINVAL;

	util_progress_run(&eq->progress);
	return util_eq_read_event(eq, event, buf, len, flags);
}

static struct util_eq_event *util_eq_first_error(struct util_eq *eq)
{
	struct util_dlist *item;
	struct util_eq_event *ev;

	util_dlist_foreach(&eq->events, item) {
		ev = container_of(item, struct util_eq_event, link);
		if (ev->is_error)
			return ev;
	}
	return NULL;
}

static ssize_t util_eq_readerr(struct fid_eq *eq_fid, struct fi_eq_err_entry *buf,
			       uint64_t flags)
{
	struct util_eq *eq = container_of(eq_fid, struct util_eq, eq_fid);
	struct fi_eq_err_entry *entry;
	struct util_eq_event *ev;
	bool is_old_api, is_lent = false;
	size_t copy_size;
	ssize_t ret;

	if (!buf)
		return -FI_EINVAL;
	is_old_api = FI_VERSION_LT(eq->api_version, FI_VERSION(1, 5));
	/* Before 1.5 there is no err_data_size to read: err_data is always lent. */
	if (!is_old_api && buf->err_data_size && !buf->err_data)
		return -FI_EINVAL;

	util_progress_run(&eq->progress);

	util_lock_acquire(&eq->lock);
	util_eq_drop_last_err(eq);
	ev = util_eq_first_error(eq);
	if (!ev) {
		ret = -FI_EAGAIN;
		goto unlock;
	}
	entry = util_eq_err_entry(ev);

	if (is_old_api) {
		memcpy(buf, entry, UTIL_EQ_ERR_ENTRY_1_0_SIZE);
		is_lent = true;
		ret = UTIL_EQ_ERR_ENTRY_1_0_SIZE;
	} else if (buf->err_data_size) {
		/* Copy into the application's buffer, truncating, and say how much. */
		copy_size = UTIL_MIN(buf->err_data_size, entry->err_data_size);
		memcpy(buf->err_data, entry->err_data, copy_size);
		buf->fid = entry->fid;
		buf->context = entry->context;
		buf->data = entry->data;
		buf->err = entry->err;
		buf->prov_errno = entry->prov_errno;
		buf->err_data_size = copy_size;
		ret = sizeof(*buf);
	} else {
		/* Compatibility mode: lend our copy until the next read call. */
		*buf = *entry;
		is_lent = true;
		ret = sizeof(*buf);
	}

	if (!(flags & FI_PEEK)) {
		util_dlist_remove(&ev->link);
		if (is_lent && entry->err_data)
			eq->last_err = ev;
		else
			free(ev);
	}
unlock:
	util_lock_release(&eq->lock);
	return ret;
}

static bool util_eq_sread_done(void *arg)
{
	struct util_eq *eq = arg;
	bool is_done;

	util_lock_acquire(&eq->lock);
	is_done = !util_dlist_empty(&eq->events);
	util_lock_release(&eq->lock);
	return is_done;
}

static ssize_t util_eq_sread(struct fid_eq *eq_fid, uint32_t *event, void *buf, size_t len,
			     int timeout, uint64_t flags)
{
	struct util_eq *eq = container_of(eq_fid, struct util_eq, eq_fid);
	uint64_t start_ms = util_now_ms();
	bool is_timed_out;
	ssize_t ret;

	/* fi_eq(3): sread is invalid on an FI_WAIT_NONE EQ; there is nothing to sleep on. */
	if (eq->wait_obj == FI_WAIT_NONE)
		return -FI_ENOSYS;
	if (!buf && len)
		return -FI_EINVAL;

	for (;;) {
		ret = util_wait_until(&eq->wait, &eq->progress,
				      util_timeout_left(timeout, start_ms), util_eq_sread_done, eq);
		if (ret && ret != -FI_EAGAIN)
			return ret;
		is_timed_out = ret == -FI_EAGAIN;

		ret = util_eq_read_event(eq, event, buf, len, flags);
		/* -FI_EAGAIN before the timeout: another reader was faster, wait again. */
		if (ret != -FI_EAGAIN || is_timed_out)
			return ret;
	}
}

static ssize_t util_eq_app_write(struct fid_eq *eq_fid, uint32_t event, const void *buf,
				 size_t len, uint64_t flags)
{
	struct util_eq *eq = container_of(eq_fid, struct util_eq, eq_fid);

	return util_eq_write(eq, event, buf, len, flags);
}

static const char *util_eq_strerror(struct fid_eq *eq_fid, int prov_errno, const void *err_data,
				    char *buf, size_t len)
{
	return util_strerror(prov_errno, buf, len);
}

struct fi_ops_eq util_eq_ops = {
	.size = sizeof(struct fi_ops_eq),
	.read = util_eq_read,
	.readerr = util_eq_readerr,
	.write = util_eq_app_write,
	.sread = util_eq_sread,
	.strerror = util_eq_strerror,
};

int util_eq_control(struct fid *fid, int command, void *arg)
{
	struct util_eq *eq = container_of(fid, struct util_eq, eq_fid.fid);

	/* Every write signals already, so handing out the fd changes nothing. */
	return util_wait_control(&eq->wait, eq->wait_obj, command, arg, NULL);
}

int util_eq_trywait(struct util_eq *eq)
{
	if (eq->wait_obj == FI_WAIT_NONE)
		return -FI_ENODATA;

	/* Reset before looking: an event written after the look signals again. */
	util_wait_reset(&eq->wait);
	if (eq->progress.trywait && eq->progress.trywait(eq->progress.arg))
		return -FI_EAGAIN;
	return util_eq_sread_done(eq) ? -FI_EAGAIN : 0;
}

int util_eq_init(struct util_eq *eq, const struct fi_eq_attr *attr,
		 const struct util_progress *progress, void *context)
{
	struct fi_ops *fid_ops = eq->eq_fid.fid.ops;
	enum fi_wait_obj wait_obj = FI_WAIT_NONE;
	int ret;

	if (attr) {
		if (attr->flags & ~(FI_WRITE | FI_AFFINITY)) {
			FI_WARN(util_prov, FI_LOG_EQ, "unsupported eq flags 0x%" PRIx64 "\n",
				attr->flags);
			return -FI_EBADFLAGS;
		}
		wait_obj = attr->wait_obj;
	}
	ret = util_wait_obj_resolve(wait_obj, &wait_obj);
	if (ret)
		return ret;

	/* fid.ops belongs to the owner, who may have set it before calling us. */
	memset(eq, 0, sizeof(*eq));
	eq->eq_fid.fid.ops = fid_ops;
	eq->eq_fid.fid.fclass = FI_CLASS_EQ;
	eq->eq_fid.fid.context = context;
	eq->eq_fid.ops = &util_eq_ops;
	eq->wait_obj = wait_obj;
	eq->wait.epfd = -1;
	eq->wait.signal_fd = -1;
	util_dlist_init(&eq->events);
	if (progress)
		eq->progress = *progress;
	atomic_init(&eq->ref, 0);
	eq->api_version = FI_VERSION(FI_MAJOR_VERSION, FI_MINOR_VERSION);

	if (wait_obj != FI_WAIT_NONE) {
		ret = util_wait_init(&eq->wait);
		if (ret)
			return ret;
	}
	/* An EQ belongs to the fabric, which no threading level covers: always lock. */
	util_lock_init(&eq->lock, true);
	return 0;
}

int util_eq_fini(struct util_eq *eq)
{
	struct util_dlist *item;

	if (atomic_load(&eq->ref) > 0)
		return -FI_EBUSY;

	/* fi_eq(3): events still queued at close are lost. */
	while ((item = util_dlist_pop_front(&eq->events)))
		free(container_of(item, struct util_eq_event, link));
	util_eq_drop_last_err(eq);
	if (eq->wait_obj != FI_WAIT_NONE)
		util_wait_fini(&eq->wait);
	util_lock_fini(&eq->lock);
	return 0;
}
