/* Sets of progress hooks (util/progress.h). */
#include "config.h"

#include "util/progress.h"

void util_progress_set_init(struct util_progress_set *set, bool is_thread_safe)
{
	util_lock_init(&set->lock, is_thread_safe);
	util_dlist_init(&set->hooks);
}

void util_progress_set_fini(struct util_progress_set *set)
{
	util_lock_fini(&set->lock);
}

void util_progress_set_add(struct util_progress_set *set, struct util_progress_hook *hook)
{
	util_lock_acquire(&set->lock);
	util_dlist_insert_tail(&hook->link, &set->hooks);
	util_lock_release(&set->lock);
}

void util_progress_set_del(struct util_progress_set *set, struct util_progress_hook *hook)
{
	util_lock_acquire(&set->lock);
	util_dlist_remove(&hook->link);
	util_lock_release(&set->lock);
}

bool util_progress_set_is_empty(struct util_progress_set *set)
{
	bool is_empty;

	util_lock_acquire(&set->lock);
	is_empty = util_dlist_empty(&set->hooks);
	util_lock_release(&set->lock);
	return is_empty;
}

void util_progress_set_each(struct util_progress_set *set,
			    void (*fn)(struct util_progress_hook *hook, void *arg), void *arg)
{
	struct util_dlist *item;

	util_lock_acquire(&set->lock);
	util_dlist_foreach(&set->hooks, item)
		fn(container_of(item, struct util_progress_hook, link), arg);
	util_lock_release(&set->lock);
}

void util_progress_set_run(void *arg)
{
	struct util_progress_set *set = arg;
	struct util_dlist *item;

	util_lock_acquire(&set->lock);
	util_dlist_foreach(&set->hooks, item)
		util_progress_run(&container_of(item, struct util_progress_hook, link)->progress);
	util_lock_release(&set->lock);
}

int util_progress_set_trywait(void *arg)
{
	struct util_progress_set *set = arg;
	struct util_progress_hook *hook;
	struct util_dlist *item;
	int ret = 0;

	util_lock_acquire(&set->lock);
	util_dlist_foreach(&set->hooks, item) {
		hook = container_of(item, struct util_progress_hook, link);
		if (hook->progress.trywait) {
			ret = hook->progress.trywait(hook->progress.arg);
			if (ret)
				break;
		}
	}
	util_lock_release(&set->lock);
	return ret;
}
