/* Receive queues (rxq.h): matching, plain and tagged, in one place. */
#include "config.h"

#include "layer/proto/rx.h"
#include "layer/proto/rxq.h"
#include "util/tagm_inl.h"

/* A message that came without an AV key is in no group of the engine. */
_Static_assert(UTIL_TAGM_NO_GROUP == FI_ADDR_NOTAVAIL, "no key, no group");

static inline struct layer_rx *layer_rx_of_recv(struct util_tagm_recv *recv)
{
	return recv ? container_of(recv, struct layer_rx, tagm) : NULL;
}

static inline struct layer_buf *layer_buf_of_msg(struct util_tagm_msg *msg)
{
	return msg ? container_of(msg, struct layer_buf, tagm) : NULL;
}

/* A plain receive takes a message from anyone, from its source, or with its key. */
static inline bool layer_rxq_src_matches(fi_addr_t src, const struct layer_buf *buf)
{
	return src == FI_ADDR_UNSPEC || src == buf->src_addr || src == buf->key;
}

int layer_rxq_init(struct layer_rxq *q, bool is_tagged)
{
	q->is_tagged = is_tagged;
	util_dlist_init(&q->posted);
	util_dlist_init(&q->unexp);
	return is_tagged ? util_tagm_init(&q->tagm, 0) : 0;
}

struct layer_rxq_fini_arg {
	void (*free_rx)(struct layer_rx *rx, void *arg);
	void (*free_buf)(struct layer_buf *buf, void *arg);
	void *arg;
};

static void layer_rxq_fini_recv(struct util_tagm_recv *recv, void *arg)
{
	struct layer_rxq_fini_arg *fini = arg;

	fini->free_rx(layer_rx_of_recv(recv), fini->arg);
}

static void layer_rxq_fini_msg(struct util_tagm_msg *msg, void *arg)
{
	struct layer_rxq_fini_arg *fini = arg;

	fini->free_buf(layer_buf_of_msg(msg), fini->arg);
}

size_t layer_rxq_fini(struct layer_rxq *q, void (*free_rx)(struct layer_rx *rx, void *arg),
		      void (*free_buf)(struct layer_buf *buf, void *arg), void *arg)
{
	struct layer_rxq_fini_arg fini = { free_rx, free_buf, arg };
	struct util_dlist *item;
	size_t cnt = 0;

	if (q->is_tagged) {
		util_tagm_recv_flush(&q->tagm, layer_rxq_fini_recv, &fini);
		cnt = util_tagm_msg_flush(&q->tagm, layer_rxq_fini_msg, &fini);
		util_tagm_fini(&q->tagm);
		return cnt;
	}
	while ((item = util_dlist_pop_front(&q->posted)))
		free_rx(container_of(item, struct layer_rx, link), arg);
	for (; (item = util_dlist_pop_front(&q->unexp)); cnt++)
		free_buf(container_of(item, struct layer_buf, link), arg);
	return cnt;
}

struct layer_rx *layer_rxq_match(struct layer_rxq *q, struct layer_buf *buf, bool may_multi)
{
	struct util_dlist *item;
	struct layer_rx *rx;

	/* An FI_AUTH_KEY receive names the key: the message's group (util/tagm.h). */
	if (q->is_tagged)
		return layer_rx_of_recv(util_tagm_recv_match(&q->tagm, layer_buf_hdr(buf)->tag,
							     buf->src_addr, buf->key));
	util_dlist_foreach(&q->posted, item) {
		rx = container_of(item, struct layer_rx, link);
		if (!layer_rxq_src_matches(rx->src_addr, buf))
			continue;
		/* a multi-receive buffer's slices complete in order: the message waits */
		if (rx->flags & FI_MULTI_RECV)
			return may_multi ? rx : NULL;
		util_dlist_remove(&rx->link);
		return rx;
	}
	return NULL;
}

void layer_rxq_add_unexp(struct layer_rxq *q, struct layer_buf *buf)
{
	if (q->is_tagged)
		util_tagm_msg_add(&q->tagm, &buf->tagm, layer_buf_hdr(buf)->tag, buf->src_addr,
				  buf->key);
	else
		util_dlist_insert_tail(&buf->link, &q->unexp);
}

struct layer_buf *layer_rxq_take(struct layer_rxq *q, uint64_t tag, uint64_t ignore,
				 fi_addr_t src)
{
	struct util_dlist *item;
	struct layer_buf *buf;

	if (q->is_tagged)
		return layer_buf_of_msg(util_tagm_msg_match(&q->tagm, tag, ignore, src));
	util_dlist_foreach(&q->unexp, item) {
		buf = container_of(item, struct layer_buf, link);
		if (layer_rxq_src_matches(src, buf)) {
			util_dlist_remove(&buf->link);
			return buf;
		}
	}
	return NULL;
}

void layer_rxq_post(struct layer_rxq *q, struct layer_rx *rx, uint64_t tag, uint64_t ignore)
{
	if (q->is_tagged)
		util_tagm_recv_post(&q->tagm, &rx->tagm, tag, ignore, rx->src_addr);
	else
		util_dlist_insert_tail(&rx->link, &q->posted);
}

void layer_rxq_remove(struct layer_rxq *q, struct layer_rx *rx)
{
	if (q->is_tagged)
		util_tagm_recv_remove(&q->tagm, &rx->tagm);
	else
		util_dlist_remove(&rx->link);
}

struct layer_rxq_pred {
	bool (*is_rx)(const struct layer_rx *rx, void *arg);
	bool (*is_buf)(const struct layer_buf *buf, void *arg);
	void *arg;
};

static bool layer_rxq_recv_pred(const struct util_tagm_recv *recv, void *arg)
{
	struct layer_rxq_pred *pred = arg;

	return pred->is_rx(container_of(recv, struct layer_rx, tagm), pred->arg);
}

static bool layer_rxq_msg_pred(const struct util_tagm_msg *msg, void *arg)
{
	struct layer_rxq_pred *pred = arg;

	return pred->is_buf(container_of(msg, struct layer_buf, tagm), pred->arg);
}

struct layer_rx *layer_rxq_find(struct layer_rxq *q,
				bool (*is_match)(const struct layer_rx *rx, void *arg), void *arg)
{
	struct layer_rxq_pred pred = { .is_rx = is_match, .arg = arg };
	struct util_dlist *item;
	struct layer_rx *rx;

	if (q->is_tagged)
		return layer_rx_of_recv(util_tagm_recv_find(&q->tagm, layer_rxq_recv_pred, &pred));
	util_dlist_foreach(&q->posted, item) {
		rx = container_of(item, struct layer_rx, link);
		if (is_match(rx, arg))
			return rx;
	}
	return NULL;
}

struct layer_buf *layer_rxq_find_unexp(struct layer_rxq *q,
				       bool (*is_match)(const struct layer_buf *buf, void *arg),
				       void *arg)
{
	struct layer_rxq_pred pred = { .is_buf = is_match, .arg = arg };
	struct util_dlist *item;
	struct layer_buf *buf;

	if (q->is_tagged)
		return layer_buf_of_msg(util_tagm_msg_find(&q->tagm, layer_rxq_msg_pred, &pred));
	util_dlist_foreach(&q->unexp, item) {
		buf = container_of(item, struct layer_buf, link);
		if (is_match(buf, arg))
			return buf;
	}
	return NULL;
}

void layer_rxq_set_src(struct layer_rxq *q, struct layer_buf *buf, fi_addr_t src)
{
	buf->src_addr = src;
	if (q->is_tagged)
		util_tagm_msg_set_src(&q->tagm, &buf->tagm, src, buf->tagm.group);
}

void layer_rxq_remove_unexp(struct layer_rxq *q, struct layer_buf *buf)
{
	if (q->is_tagged)
		util_tagm_msg_remove(&q->tagm, &buf->tagm);
	else
		util_dlist_remove(&buf->link);
}

struct layer_buf *layer_rxq_peek(struct layer_rxq *q, uint64_t tag, uint64_t ignore,
				 fi_addr_t src)
{
	return layer_buf_of_msg(util_tagm_msg_search(&q->tagm, tag, ignore, src));
}

void layer_rxq_claim(struct layer_rxq *q, struct layer_buf *buf, void *context)
{
	util_tagm_msg_claim(&q->tagm, &buf->tagm, context);
}

struct layer_buf *layer_rxq_take_claimed(struct layer_rxq *q, void *context)
{
	return layer_buf_of_msg(util_tagm_msg_take_claimed(&q->tagm, context));
}
