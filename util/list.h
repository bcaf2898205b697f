/* Intrusive doubly linked list (circular, with a head node). */
#ifndef UTIL_LIST_H
#define UTIL_LIST_H

#include <stdbool.h>
#include <stddef.h>

struct util_dlist {
	struct util_dlist *next;
	struct util_dlist *prev;
};

#define UTIL_DLIST_INIT(head) { &(head), &(head) }

static inline void util_dlist_init(struct util_dlist *head)
{
	head->next = head;
	head->prev = head;
}

static inline bool util_dlist_empty(const struct util_dlist *head)
{
	return head->next == head;
}

static inline void util_dlist_insert_after(struct util_dlist *item, struct util_dlist *pos)
{
	item->next = pos->next;
	item->prev = pos;
	pos->next->prev = item;
	pos->next = item;
}

static inline void util_dlist_insert_tail(struct util_dlist *item, struct util_dlist *head)
{
	util_dlist_insert_after(item, head->prev);
}

static inline void util_dlist_insert_head(struct util_dlist *item, struct util_dlist *head)
{
	util_dlist_insert_after(item, head);
}

static inline void util_dlist_remove(struct util_dlist *item)
{
	item->prev->next = item->next;
	item->next->prev = item->prev;
	item->next = item->prev = item;
}

/* Removes and returns the first item, or NULL when the list is empty. */
static inline struct util_dlist *util_dlist_pop_front(struct util_dlist *head)
{
	struct util_dlist *item = head->next;

	if (item == head)
		return NULL;
	util_dlist_remove(item);
	return item;
}

#define util_dlist_foreach(head, item) \
	for ((item) = (head)->next; (item) != (head); (item) = (item)->next)

/* Safe against removal of the current item. */
#define util_dlist_foreach_safe(head, item, tmp) \
	for ((item) = (head)->next, (tmp) = (item)->next; (item) != (head); \
	     (item) = (tmp), (tmp) = (item)->next)

#endif /* UTIL_LIST_H */
