/*
 * The transmit path (tx.h): a send becomes one message on the connection to its
 * destination: inline (up to the inject size, copied with the header), eager (the header and
 * the application's buffers, up to what the peer's buffers take), or a rendezvous request
 * (rndv.c). A connection's sends go to the core in the order made; those the core has no
 * room for, or that wait for the connection, queue on it. An FI_FENCE send waits until every
 * earlier send to that peer has completed. A send completes when the core says it left, or,
 * for a rendezvous request and with FI_DELIVERY_COMPLETE or FI_MATCH_COMPLETE, when the
 * target's ACK comes; ACKs find their send by index (struct layer_tx_acks).
 */
#include "config.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "layer/cma/cma.h"
#include "layer/proto/proto.h"
#include "layer/proto/rndv.h"
#include "layer/proto/tx.h"

_Static_assert(offsetof(struct layer_tx, inline_data) ==
	       offsetof(struct layer_tx, hdr) + sizeof(struct layer_hdr),
	       "inline payload must follow the header");

/* The largest number of ACK slots: a msg_id keeps the slot in its low 32 bits. */
#define LAYER_TX_ACK_SLOTS_MAX UINT32_MAX

/* ---- ACKs by index ---- */

static int layer_tx_acks_grow(struct layer_tx_acks *acks)
{
	uint32_t cnt = acks->cnt ? acks->cnt * 2 : 64, i;
	struct layer_tx **slots;
	uint32_t *gens, *free_slots;

	slots = realloc(acks->slots, cnt * sizeof(*slots));
	if (!slots)
		return -FI_ENOMEM;
	acks->slots = slots;
	gens = realloc(acks->gens, cnt * sizeof(*gens));
	if (!gens)
		return -FI_ENOMEM;
	acks->gens = gens;
	free_slots = realloc(acks->free, cnt * sizeof(*free_slots));
	if (!free_slots)
		return -FI_ENOMEM;
	acks->free = free_slots;
	for (i = acks->cnt; i < cnt; i++) {
		slots[i] = NULL;
		gens[i] = 0;
		free_slots[acks->free_cnt++] = cnt - 1 - (i - acks->cnt);
	}
	acks->cnt = cnt;
	return 0;
}

/* An id for tx's ACK: its slot, and the slot's generation so that a stale ACK misses. */
static int layer_tx_acks_take(struct layer_tx_acks *acks, struct layer_tx *tx)
{
	uint32_t slot;

	if (!acks->free_cnt && (acks->cnt == LAYER_TX_ACK_SLOTS_MAX || layer_tx_acks_grow(acks)))
		return -FI_ENOMEM;
	slot = acks->free[--acks->free_cnt];
	acks->slots[slot] = tx;
	tx->hdr.msg_id = (uint64_t) ++acks->gens[slot] << 32 | slot;
	return 0;
}

int layer_tx_want_ack(struct layer_proto *proto, struct layer_tx *tx)
{
	int ret;

	if (tx->wants_ack)
		return 0;
	ret = layer_tx_acks_take(&proto->acks, tx);
	if (!ret)
		tx->wants_ack = true;
	return ret;
}

static void layer_tx_acks_put(struct layer_tx_acks *acks, struct layer_tx *tx)
{
	uint32_t slot = (uint32_t) tx->hdr.msg_id;

	acks->slots[slot] = NULL;
	acks->free[acks->free_cnt++] = slot;
}

static struct layer_tx *layer_tx_acks_find(const struct layer_tx_acks *acks, uint64_t msg_id)
{
	uint32_t slot = (uint32_t) msg_id;
	struct layer_tx *tx;

	if (slot >= acks->cnt)
		return NULL;
	tx = acks->slots[slot];
	return tx && tx->hdr.msg_id == msg_id ? tx : NULL;
}

/* ---- sends ---- */

/* A send entry: an application's counted against tx_size (NULL when the queue is full), the
 * provider's own (is_counted false: control messages, collective traffic) not. */
static struct layer_tx *layer_tx_alloc(struct layer_proto *proto, bool is_counted)
{
	struct layer_tx *tx;

	if (is_counted && proto->tx_used >= proto->tx_size)
		return NULL;
	tx = util_bufpool_get(&proto->tx_pool);
	if (!tx)
		return NULL;
	if (is_counted)
		proto->tx_used++;
	tx->ctx.type = LAYER_CTX_SEND;
	tx->state = LAYER_TX_QUEUED;
	tx->is_ctrl = false;
	tx->may_keep = false;
	tx->is_counted = is_counted;
	tx->on_done = NULL;
	tx->is_acked = false;
	tx->ack_err = 0;
	tx->wants_ack = false;
	tx->is_active = false;
	tx->blind_before = 0;          /* entries posted without layer_tx_start order nothing */
	tx->is_direct = false;
	tx->reg_cnt = 0;
	tx->bounce = NULL;
	tx->rma_iov_cnt = 0;
	tx->mr_entry = NULL;
	util_dlist_init(&tx->link);
	return tx;
}

static void layer_tx_free(struct layer_proto *proto, struct layer_tx *tx)
{
	if (tx->wants_ack)
		layer_tx_acks_put(&proto->acks, tx);
	if (tx->reg_cnt)
		layer_rndv_release(proto, tx);
	if (tx->mr_entry)
		layer_mr_target_put(proto->domain, tx->mr_entry, 0);
	free(tx->bounce);
	if (tx->is_counted)
		proto->tx_used--;
	util_bufpool_put(&proto->tx_pool, tx);
}

/* The counter of a transmit operation: sends, or (FI_RMA, FI_ATOMIC) reads and writes. */
static struct layer_cntr *layer_tx_cntr(const struct layer_proto *proto, uint64_t cq_flags)
{
	if (likely(!(cq_flags & (FI_RMA | FI_ATOMIC))))
		return proto->send_cntr;
	return cq_flags & FI_READ ? proto->read_cntr : proto->write_cntr;
}

/* The user completion of a send (err 0 or positive); an overrun CQ records its own loss. */
static void layer_tx_write_comp(struct layer_proto *proto, const struct layer_tx *tx, int err)
{
	struct layer_cntr *cntr = layer_tx_cntr(proto, tx->cq_flags);
	struct fi_cq_err_entry entry;

	if (unlikely(err)) {
		entry = (struct fi_cq_err_entry) {
			.op_context = tx->context,
			.flags = tx->cq_flags,
			.len = tx->len,
			.err = err,
			.prov_errno = -err,
		};
		if (proto->tx_cq)
			(void) util_cq_write_error(&proto->tx_cq->util, &entry);
		if (cntr)
			util_cntr_inc_err(&cntr->util);
		return;
	}
	if ((tx->cq_flags & FI_COMPLETION) && proto->tx_cq)
		(void) util_cq_write(&proto->tx_cq->util, tx->context,
				     tx->cq_flags & ~FI_COMPLETION, tx->len, NULL, 0, 0,
				     FI_ADDR_NOTAVAIL);
	if (cntr)
		util_cntr_inc(&cntr->util);
}

static void layer_tx_post(struct layer_proto *proto, struct layer_conn *conn,
			  struct layer_tx *tx);

/* Starts the sends an FI_FENCE held once nothing sent before the fence is active. */
static void layer_tx_release_fenced(struct layer_proto *proto, struct layer_conn *conn)
{
	struct layer_tx *tx;

	while (!util_dlist_empty(&conn->fenced_tx)) {
		tx = container_of(conn->fenced_tx.next, struct layer_tx, link);
		if ((tx->flags & FI_FENCE) && conn->tx_active)
			return;
		util_dlist_remove(&tx->link);
		tx->is_active = true;
		conn->tx_active++;
		layer_tx_post(proto, conn, tx);
	}
}

static void layer_tx_complete(struct layer_proto *proto, struct layer_tx *tx, int err)
{
	struct layer_conn *conn = tx->conn;

	FI_DBG(&layer_prov, FI_LOG_EP_DATA, "send %p (%s, %zu bytes) done: %d\n", (void *) tx,
	       layer_op_str(tx->hdr.op), tx->len, err);
	/* the target handles what arrives in order: an answer (other than a WRITE's, which
	 * may come as its header is in) says it applied what was sent before the request */
	if (tx->wants_ack && tx->hdr.op != LAYER_OP_WRITE &&
	    tx->blind_before > conn->blind_applied)
		conn->blind_applied = tx->blind_before;
	if (unlikely(tx->on_done))
		tx->on_done(proto, tx->job, err);
	else if (!tx->is_ctrl)
		layer_tx_write_comp(proto, tx, err);
	if (tx->is_active) {
		conn->tx_active--;
		if (!conn->tx_active && conn->state != LAYER_CONN_CLOSED)
			layer_tx_release_fenced(proto, conn);
	}
	layer_tx_free(proto, tx);
}

/*
 * Direct RMA (rma/grant.h): the core's own write or read, which the target's core serves
 * with nothing above it. A write that fits the core's inject size goes as an inject and
 * completes now, as a message would.
 */
static int layer_tx_direct(struct layer_proto *proto, struct layer_conn *conn,
			   struct layer_tx *tx)
{
	struct layer_chan *chan = conn->chan;
	ssize_t ret;

	if (tx->hdr.op == LAYER_OP_WRITE && tx->iov_cnt == 1 &&
	    tx->len <= proto->core->inject_size) {
		ret = layer_core_inject_write(chan, tx->iov[0].iov_base, tx->len, tx->hdr.tag,
					      tx->hdr.data);
		if (!ret)
			layer_tx_complete(proto, tx, 0);
		return (int) ret;
	}
	tx->ctx.chan = chan;
	ret = tx->hdr.op == LAYER_OP_WRITE ?
	      layer_core_writev(chan, tx->iov, tx->iov_cnt, tx->hdr.tag, tx->hdr.data,
				&tx->ctx) :
	      layer_core_readv(chan, tx->iov, tx->iov_cnt, tx->hdr.tag, tx->hdr.data, &tx->ctx);
	if (ret)
		return (int) ret;
	tx->state = LAYER_TX_POSTED;
	util_dlist_insert_tail(&tx->link, &conn->posted_tx);
	return 0;
}

/* Gives tx to the core: 0, -FI_EAGAIN (the core is full) or another error. */
static int layer_tx_to_core(struct layer_proto *proto, struct layer_conn *conn,
			    struct layer_tx *tx)
{
	struct layer_chan *chan = conn->chan;
	ssize_t ret;

	if (tx->is_direct)
		return layer_tx_direct(proto, conn, tx);

	/*
	 * A message that fits the core's inject size goes as an inject, as rxm does: the core
	 * keeps the bytes and reports no completion, so the send completes here and neither
	 * side processes a core completion for it. A send that waits for an answer (an ACK, a
	 * READ_RESP) waits for it from now on, except over the datagram transport, where its
	 * completion is what fails it when the peer's session is lost.
	 */
	if (tx->iov_cnt == 1 && tx->iov[0].iov_len <= proto->core->inject_size &&
	    (!tx->wants_ack || !chan->dgram)) {
		ret = layer_core_inject(chan, tx->iov[0].iov_base, tx->iov[0].iov_len,
					tx->may_keep);
		if (ret)
			return (int) ret;
		if (!tx->wants_ack) {
			layer_tx_complete(proto, tx, 0);
			return 0;
		}
		tx->state = LAYER_TX_WAITING;
		util_dlist_insert_tail(&tx->link, &conn->acked_tx);
		return 0;
	}
	tx->ctx.chan = chan;
	ret = layer_core_sendv(chan, tx->iov, tx->iov_cnt, &tx->ctx);
	if (ret)
		return (int) ret;
	tx->state = LAYER_TX_POSTED;
	util_dlist_insert_tail(&tx->link, &conn->posted_tx);
	return 0;
}

static void layer_tx_post(struct layer_proto *proto, struct layer_conn *conn,
			  struct layer_tx *tx)
{
	int ret;

	tx->conn = conn;
	if (likely(conn->state == LAYER_CONN_CONNECTED && util_dlist_empty(&conn->queued_tx))) {
		ret = layer_tx_to_core(proto, conn, tx);
		if (likely(!ret))
			return;
		if (ret != -FI_EAGAIN) {
			FI_INFO(&layer_prov, FI_LOG_EP_DATA, "core send failed: %s\n",
				fi_strerror(-ret));
			layer_conn_fail(conn, -ret);
		}
	}
	/* Connecting, core queue full, or failing: progress retries it or the reap fails it. */
	layer_proto_pend(proto, conn);
	tx->state = LAYER_TX_QUEUED;
	util_dlist_insert_tail(&tx->link, &conn->queued_tx);
}

void layer_tx_flush(struct layer_proto *proto, struct layer_conn *conn)
{
	struct layer_tx *tx;
	int ret;

	while (conn->state == LAYER_CONN_CONNECTED && !util_dlist_empty(&conn->queued_tx)) {
		tx = container_of(conn->queued_tx.next, struct layer_tx, link);
		util_dlist_remove(&tx->link);
		ret = layer_tx_to_core(proto, conn, tx);
		if (!ret)
			continue;
		util_dlist_insert_head(&tx->link, &conn->queued_tx);
		if (ret != -FI_EAGAIN) {
			FI_INFO(&layer_prov, FI_LOG_EP_DATA, "core send failed: %s\n",
				fi_strerror(-ret));
			layer_conn_fail(conn, -ret);
		}
		return;
	}
}

/*
 * An eager user send above the inject size not yet handed to the core goes by rendezvous
 * instead (its buffers, or its copy, registered). Left as it is when registration fails:
 * pacing only keeps the peer's memory small.
 */
static void layer_tx_pace(struct layer_proto *proto, struct layer_tx *tx)
{
	struct iovec iov[LAYER_IOV_LIMIT];
	size_t cnt;

	if (tx->is_ctrl || tx->hdr.op != LAYER_OP_EAGER || tx->len <= LAYER_INJECT_SIZE)
		return;
	if (tx->bounce) {
		iov[0].iov_base = (char *) tx->bounce + sizeof(tx->hdr);
		iov[0].iov_len = tx->len;
		cnt = 1;
	} else {
		/* Zero copy: the header, then the user's iovs. */
		cnt = tx->iov_cnt - 1;
		memcpy(iov, &tx->iov[1], cnt * sizeof(*iov));
	}
	if (layer_rndv_prepare(proto, tx->conn, tx, iov, cnt))
		FI_INFO(&layer_prov, FI_LOG_EP_DATA, "a queued send stays eager\n");
}

static void layer_tx_pace_list(struct layer_proto *proto, struct util_dlist *list)
{
	struct util_dlist *item;

	util_dlist_foreach(list, item)
		layer_tx_pace(proto, container_of(item, struct layer_tx, link));
}

void layer_tx_set_paced(struct layer_proto *proto, struct layer_peer *peer, bool is_paced)
{
	struct layer_conn *conn;
	struct util_dlist *item;

	if (peer->is_paced == is_paced)
		return;
	peer->is_paced = is_paced;
	FI_DBG(&layer_prov, FI_LOG_EP_DATA, "peer %p %s\n", (void *) peer,
	       is_paced ? "paces us" : "no longer paces us");
	if (!is_paced)
		return;
	util_dlist_foreach(&peer->conns, item) {
		conn = container_of(item, struct layer_conn, peer_link);
		if (!conn->is_tx || conn->state == LAYER_CONN_CLOSED)
			continue;
		layer_tx_pace_list(proto, &conn->queued_tx);
		layer_tx_pace_list(proto, &conn->fenced_tx);
	}
}

/* Where the payload goes in the message: copied behind the header, sent from the
 * application's buffers, or (beyond what the peer takes eager) announced by rendezvous. */
static int layer_tx_build(struct layer_proto *proto, struct layer_conn *conn,
			  struct layer_tx *tx, const struct iovec *iov, size_t iov_cnt)
{
	size_t i, len = tx->len;

	if (len <= LAYER_INJECT_SIZE) {
		util_iov_gather(tx->inline_data, iov, iov_cnt);
		tx->iov[0].iov_base = &tx->hdr;
		tx->iov[0].iov_len = sizeof(tx->hdr) + len;
		tx->iov_cnt = 1;
		return 0;
	}
	/* above the inject size, to a peer past its unexpected bound (unexp.c), or from the
	 * CMA message size to a peer that reads this process (cma/cma.h): rendezvous */
	if (len > conn->chan->tx_eager || unlikely(conn->peer->is_paced) ||
	    layer_cma_msg_is_for(conn, len))
		return layer_rndv_prepare(proto, conn, tx, iov, iov_cnt);
	if (iov_cnt < proto->core->iov_limit) {
		/* Zero copy: the core sends the header and the user's buffers. */
		tx->iov[0].iov_base = &tx->hdr;
		tx->iov[0].iov_len = sizeof(tx->hdr);
		for (i = 0; i < iov_cnt; i++)
			tx->iov[i + 1] = iov[i];
		tx->iov_cnt = iov_cnt + 1;
		return 0;
	}
	tx->bounce = malloc(sizeof(tx->hdr) + len);
	if (!tx->bounce)
		return -FI_ENOMEM;
	memcpy(tx->bounce, &tx->hdr, sizeof(tx->hdr));
	util_iov_gather((char *) tx->bounce + sizeof(tx->hdr), iov, iov_cnt);
	tx->iov[0].iov_base = tx->bounce;
	tx->iov[0].iov_len = sizeof(tx->hdr) + len;
	tx->iov_cnt = 1;
	return 0;
}

static inline void layer_tx_hdr_init(struct layer_tx *tx, const struct layer_conn *conn,
				     uint16_t flags, uint64_t tag, uint64_t data)
{
	tx->hdr = (struct layer_hdr) {
		.version = LAYER_PROTO_VERSION,
		.op = LAYER_OP_EAGER,
		.flags = flags,
		.key_slot = conn->chan->key_slot,
		.size = tx->len,
		.tag = tag,
		.data = data,
	};
}

ssize_t layer_tx_send(struct layer_proto *proto, const struct iovec *iov, size_t iov_cnt,
		      fi_addr_t dest, uint64_t data, uint64_t tag, uint64_t flags,
		      void *context)
{
	struct layer_conn *conn;
	struct layer_tx *tx;
	size_t len;
	int ret;

	len = util_iov_len(iov, iov_cnt);
	if (unlikely(len > LAYER_MAX_MSG_SIZE))
		return -FI_EMSGSIZE;
	ret = layer_conn_get(proto->conns, dest, &conn);
	if (unlikely(ret))
		return ret;
	layer_cma_want(proto, conn, len, layer_settings.cma_msg_size);
	tx = layer_tx_alloc(proto, true);
	if (unlikely(!tx))
		return -FI_EAGAIN;

	tx->context = context;
	tx->flags = flags;
	tx->cq_flags = FI_SEND | (flags & FI_TAGGED ? FI_TAGGED : FI_MSG) |
		       (flags & FI_COMPLETION);
	tx->len = len;
	layer_tx_hdr_init(tx, conn, (flags & FI_REMOTE_CQ_DATA ? LAYER_HDR_CQ_DATA : 0) |
				    (flags & FI_TAGGED ? LAYER_HDR_TAGGED : 0), tag, data);
	/* The target acknowledges once the message is matched and placed (or discarded). */
	if (flags & (FI_DELIVERY_COMPLETE | FI_MATCH_COMPLETE)) {
		ret = layer_tx_want_ack(proto, tx);
		if (ret)
			goto err_free_tx;
		tx->hdr.flags |= LAYER_HDR_ACK_REQ;
	}
	ret = layer_tx_build(proto, conn, tx, iov, iov_cnt);
	if (unlikely(ret))
		goto err_free_tx;
	FI_DBG(&layer_prov, FI_LOG_EP_DATA, "send %p: %s, %zu bytes, tag %#" PRIx64
	       ", on connection %p\n", (void *) tx, layer_op_str(tx->hdr.op), len, tag,
	       (void *) conn);

	layer_tx_start(proto, conn, tx);
	return 0;

err_free_tx:
	layer_tx_free(proto, tx);
	return ret;
}

int layer_tx_coll_send(struct layer_proto *proto, const void *buf, size_t len, fi_addr_t dest,
		       uint64_t tag, void (*on_done)(struct layer_proto *proto, void *job, int err),
		       void *job)
{
	struct iovec iov = { .iov_base = (void *) buf, .iov_len = len };
	struct layer_conn *conn;
	struct layer_tx *tx;
	int ret;

	ret = layer_conn_get(proto->conns, dest, &conn);
	if (unlikely(ret))
		return ret;
	/* not the application's: neither counted against its queue nor behind its fences */
	tx = layer_tx_alloc(proto, false);
	if (unlikely(!tx))
		return -FI_ENOMEM;
	tx->on_done = on_done;
	tx->job = job;
	tx->context = NULL;
	tx->flags = 0;
	tx->cq_flags = 0;
	tx->len = len;
	layer_tx_hdr_init(tx, conn, LAYER_HDR_COLL, tag, 0);
	ret = layer_tx_build(proto, conn, tx, &iov, 1);
	if (unlikely(ret)) {
		layer_tx_free(proto, tx);
		return ret;
	}
	layer_tx_post(proto, conn, tx);
	return 0;
}

void layer_tx_start(struct layer_proto *proto, struct layer_conn *conn, struct layer_tx *tx)
{
	tx->conn = conn;
	tx->blind_before = conn->blind_sent;
	if (unlikely(!util_dlist_empty(&conn->fenced_tx) ||
		     ((tx->flags & FI_FENCE) && conn->tx_active))) {
		/* Behind a fence: starts when everything sent before it has completed. */
		tx->state = LAYER_TX_QUEUED;
		util_dlist_insert_tail(&tx->link, &conn->fenced_tx);
	} else {
		tx->is_active = true;
		conn->tx_active++;
		layer_tx_post(proto, conn, tx);
	}
	/* A send outstanding lifts a stall on receiving (its answer may be behind it). */
	layer_unexp_check(proto);
}

struct layer_tx *layer_tx_new(struct layer_proto *proto)
{
	return layer_tx_alloc(proto, true);
}

void layer_tx_discard(struct layer_proto *proto, struct layer_tx *tx)
{
	layer_tx_free(proto, tx);
}

struct layer_tx *layer_tx_ctrl_new(struct layer_proto *proto, enum layer_op op, uint16_t flags,
				   uint64_t msg_id)
{
	struct layer_tx *tx;

	tx = layer_tx_alloc(proto, false);
	if (!tx)
		return NULL;
	tx->is_ctrl = true;
	tx->context = NULL;
	tx->flags = 0;
	tx->cq_flags = 0;
	tx->len = 0;
	tx->hdr = (struct layer_hdr) {
		.version = LAYER_PROTO_VERSION,
		.op = (uint8_t) op,
		.flags = flags,
		.msg_id = msg_id,
	};
	tx->iov[0].iov_base = &tx->hdr;
	tx->iov[0].iov_len = sizeof(tx->hdr);
	tx->iov_cnt = 1;
	return tx;
}

void layer_tx_ctrl_send(struct layer_proto *proto, struct layer_conn *conn, struct layer_tx *tx)
{
	FI_DBG(&layer_prov, FI_LOG_EP_DATA, "control %s (%#" PRIx64 ") on connection %p\n",
	       layer_op_str(tx->hdr.op), tx->hdr.msg_id, (void *) conn);
	layer_tx_post(proto, conn, tx);
}

int layer_tx_ctrl_data(struct layer_proto *proto, struct layer_conn *conn, enum layer_op op,
		       uint16_t flags, uint64_t msg_id, uint64_t data)
{
	struct layer_tx *tx = layer_tx_ctrl_new(proto, op, flags, msg_id);

	if (!tx)
		return -FI_ENOMEM;
	tx->hdr.data = data;
	layer_tx_ctrl_send(proto, conn, tx);
	return 0;
}

int layer_tx_ctrl(struct layer_proto *proto, struct layer_conn *conn, enum layer_op op,
		  uint16_t flags, uint64_t msg_id)
{
	return layer_tx_ctrl_data(proto, conn, op, flags, msg_id, 0);
}

int layer_tx_ack_send_kept(struct layer_proto *proto, struct layer_conn *conn, uint64_t msg_id,
			   int err, bool may_keep)
{
	struct layer_tx *tx = layer_tx_ctrl_new(proto, LAYER_OP_ACK, err ? LAYER_HDR_FAILED : 0,
						msg_id);

	if (!tx)
		return -FI_ENOMEM;
	tx->hdr.data = (uint64_t) err;
	tx->may_keep = may_keep;
	layer_tx_ctrl_send(proto, conn, tx);
	return 0;
}

int layer_tx_ack_send(struct layer_proto *proto, struct layer_conn *conn, uint64_t msg_id,
		      int err)
{
	return layer_tx_ack_send_kept(proto, conn, msg_id, err, false);
}

void layer_tx_done(struct layer_proto *proto, struct layer_tx *tx, int err)
{
	struct layer_conn *conn = tx->conn;

	util_dlist_remove(&tx->link);
	if (unlikely(err)) {
		layer_tx_complete(proto, tx, err);
		return;
	}
	if (!tx->wants_ack) {
		layer_tx_complete(proto, tx, 0);
		return;
	}
	/* Sent; what it waits for may have come already, or never will. */
	if (tx->is_acked || conn->state == LAYER_CONN_CLOSED) {
		layer_tx_complete(proto, tx, tx->is_acked ? tx->ack_err : conn->fail_err);
		return;
	}
	tx->state = LAYER_TX_WAITING;
	util_dlist_insert_tail(&tx->link, &conn->acked_tx);
}

struct layer_tx *layer_tx_find(struct layer_proto *proto, struct layer_conn *conn,
			       uint64_t msg_id)
{
	struct layer_tx *tx;

	/* the send of that id, to this peer (over an RDM core, on any of its connections) */
	tx = layer_tx_acks_find(&proto->acks, msg_id);
	return likely(tx && tx->conn->peer == conn->peer) ? tx : NULL;
}

void layer_tx_answered(struct layer_proto *proto, struct layer_tx *tx, int err)
{
	FI_DBG(&layer_prov, FI_LOG_EP_DATA, "answer for send %p: %d\n", (void *) tx, err);
	if (tx->state == LAYER_TX_POSTED) {
		/* The answer overtook the completion of the send itself. */
		tx->is_acked = true;
		tx->ack_err = err;
		return;
	}
	util_dlist_remove(&tx->link);
	layer_tx_complete(proto, tx, err);
}

int layer_tx_answer_err(const struct layer_hdr *hdr)
{
	if (!(hdr->flags & LAYER_HDR_FAILED))
		return 0;
	/* an errno of libfabric's range, else FI_EIO */
	return hdr->data && hdr->data < FI_ERRNO_OFFSET + 1000 ? (int) hdr->data : FI_EIO;
}

bool layer_tx_ack(struct layer_proto *proto, struct layer_conn *conn,
		  const struct layer_hdr *hdr)
{
	struct layer_tx *tx;

	tx = layer_tx_find(proto, conn, hdr->msg_id);
	if (unlikely(!tx))
		return false;
	layer_tx_answered(proto, tx, layer_tx_answer_err(hdr));
	return true;
}

static void layer_tx_fail_list(struct layer_proto *proto, struct util_dlist *list, int err)
{
	struct util_dlist *item;

	while ((item = util_dlist_pop_front(list)))
		layer_tx_complete(proto, container_of(item, struct layer_tx, link), err);
}

void layer_tx_conn_lost(struct layer_proto *proto, struct layer_conn *conn)
{
	layer_tx_fail_list(proto, &conn->fenced_tx, conn->fail_err);
	layer_tx_fail_list(proto, &conn->queued_tx, conn->fail_err);
	/* a connection of its own drops what the core held; a shared one completes it */
	if (!proto->core->ops->has_shared_ep)
		layer_tx_fail_list(proto, &conn->posted_tx, conn->fail_err);
	layer_tx_fail_list(proto, &conn->acked_tx, conn->fail_err);
}

void layer_tx_conn_discard(struct layer_proto *proto, struct layer_conn *conn)
{
	struct util_dlist *lists[] = { &conn->fenced_tx, &conn->queued_tx, &conn->posted_tx,
				       &conn->acked_tx };
	struct util_dlist *item;
	size_t i;

	for (i = 0; i < UTIL_ARRAY_SIZE(lists); i++) {
		while ((item = util_dlist_pop_front(lists[i])))
			layer_tx_free(proto, container_of(item, struct layer_tx, link));
	}
}

int layer_tx_init(struct layer_proto *proto)
{
	memset(&proto->acks, 0, sizeof(proto->acks));
	return util_bufpool_init(&proto->tx_pool, sizeof(struct layer_tx), 64, 64, 0);
}

void layer_tx_fini(struct layer_proto *proto)
{
	util_bufpool_fini(&proto->tx_pool);
	free(proto->acks.slots);
	free(proto->acks.gens);
	free(proto->acks.free);
}
