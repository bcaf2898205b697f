/*
 * The datagram transport's endpoint (dgram.h): the core's datagram endpoint and AV, peers and
 * their sessions, datagrams in and out, acknowledgements owed, timers and liveness.
 *
 * Sessions: each end names its conversation with a peer by a random number, new whenever it
 * declares that peer lost. Every datagram carries the sender's session and the receiver's as
 * the sender knows it. A datagram naming a session we no longer have is answered by RST,
 * which ends the sender's session; a peer that shows up with a session other than the one
 * we knew (it restarted, or it declared us lost) ends ours: in both cases everything
 * outstanding with the peer fails (FI_ECONNRESET) and the RDM adapter above hears the peer
 * is lost, so that the next message starts over with a HELLO.
 *
 * Liveness: a peer that leaves a packet unacknowledged for FI_OFI_LAYER_PEER_TIMEOUT is lost
 * (FI_EHOSTUNREACH); a session with nothing outstanding is probed with a PING after
 * FI_OFI_LAYER_KEEPALIVE of silence from the peer, so that a peer that vanished is found
 * even by an endpoint that only waits for it.
 *
 * Acknowledgements owed ride on the next DATA packet to the peer; they go alone at once for a
 * hole or a duplicate, after LAYER_DG_ACK_EVERY packets, and whenever a progress call finds
 * nothing to read (or the caller is about to sleep): a ping-pong pays no packet for them.
 *
 * Close: a send up to the inject size completes once copied, and an application often sends
 * its last message and closes; so the close lingers until every peer has acknowledged what
 * was sent to it, or has been silent for layer_close_wait_ms(): it does not listen. Nothing goes up meanwhile: what peers send is acknowledged
 * and dropped (a peer closing too does not wait for it), our reads and completions are
 * dropped.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <netinet/in.h>

#include "layer/addr.h"
#include "layer/dgram/dgram_int.h"

/* Core fi_addr values past this are not table indices: the core ignored FI_AV_TABLE. */
#define LAYER_DG_MAX_PEERS (1u << 24)
/* Datagrams read per progress call at most (udp reads one per fi_cq_read). */
#define LAYER_DG_RX_BATCH 256
/* Datagram bytes between endpoints bound to a loopback address (lo carries 64 KiB). */
#define LAYER_DG_LOOPBACK_MTU 65000
/* What the kernel charges a socket buffer per datagram beyond its bytes, about. */
#define LAYER_DG_SKB_OVERHEAD 1024

struct layer_dgram_settings layer_dgram_settings = {
	.window = 256,
};

uint64_t layer_dg_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t) ts.tv_sec * 1000000 + (uint64_t) ts.tv_nsec / 1000;
}

struct layer_dg_pkt *layer_dg_pkt_get(struct layer_dgram *dg)
{
	return util_bufpool_get(&dg->pkt_pool);
}

void layer_dg_pkt_put(struct layer_dgram *dg, struct layer_dg_pkt *pkt)
{
	util_bufpool_put(&dg->pkt_pool, pkt);
}

size_t layer_dg_hdr_len(struct layer_dgram *dg, const struct layer_dg_peer *peer)
{
	return sizeof(struct layer_dg_hdr) + (peer->is_synced ? 0 : dg->core->addrlen);
}

/* xorshift64: cheap numbers, not secret ones. */
static uint64_t layer_dg_rand(uint64_t *state)
{
	*state ^= *state << 13;
	*state ^= *state >> 7;
	*state ^= *state << 17;
	return *state;
}

static uint32_t layer_dg_new_sess(struct layer_dgram *dg)
{
	uint32_t sess;

	/* sessions need only differ from the peer's last, not be secret */
	do {
		sess = (uint32_t) (layer_dg_rand(&dg->rand) >> 11);
	} while (!sess);
	return sess;
}

/* --- the fault switch (tests only) --- */

static void layer_dg_fault_init(struct layer_dgram *dg)
{
	struct layer_dg_fault *f = &dg->fault;
	const char *spec = layer_dgram_settings.fault;
	unsigned long long seed = 0;
	unsigned v;
	const char *p;

	if (!spec || !*spec)
		return;
	for (p = spec; p && *p; p = strchr(p, ',') ? strchr(p, ',') + 1 : NULL) {
		if (sscanf(p, "drop=%u", &v) == 1)
			f->drop = UTIL_MIN(v, 100u);
		else if (sscanf(p, "dup=%u", &v) == 1)
			f->dup = UTIL_MIN(v, 100u);
		else if (sscanf(p, "reorder=%u", &v) == 1)
			f->reorder = UTIL_MIN(v, 100u);
		else if (sscanf(p, "seed=%llu", &seed) == 1)
			f->rand = seed ? seed : 1;
	}
	f->is_on = f->drop || f->dup || f->reorder;
	if (f->is_on)
		FI_WARN(&layer_prov, FI_LOG_EP_DATA, "test fault switch on: drop %u%%, duplicate "
			"%u%%, reorder %u%% of datagrams sent (seed %llu)\n", f->drop, f->dup,
			f->reorder, seed);
}

static unsigned layer_dg_fault_roll(struct layer_dg_fault *f)
{
	return (unsigned) (layer_dg_rand(&f->rand) % 100);
}

static void layer_dg_inject(struct layer_dgram *dg, const void *data, size_t len,
			    fi_addr_t dest)
{
	ssize_t ret;

	/* a datagram the core cannot take now is as good as lost: retransmission covers it */
	ret = fi_inject(dg->ep, data, len, dest);
	if (ret && ret != -FI_EAGAIN)
		LAYER_WARN_ONCE(FI_LOG_EP_DATA, "datagram send failed: %s\n",
			fi_strerror((int) -ret));
}

static void layer_dg_fault_flush(struct layer_dgram *dg)
{
	struct layer_dg_fault *f = &dg->fault;

	if (f->held_len) {
		layer_dg_inject(dg, f->held_data, f->held_len, f->held_dest);
		f->held_len = 0;
	}
}

/* Sends a datagram through the fault switch: dropped, held back or doubled. */
static void layer_dg_send_raw(struct layer_dgram *dg, const void *data, size_t len,
			      fi_addr_t dest)
{
	struct layer_dg_fault *f = &dg->fault;

	if (likely(!f->is_on)) {
		layer_dg_inject(dg, data, len, dest);
		return;
	}
	if (layer_dg_fault_roll(f) < f->drop)
		return;
	if (!f->held_len && len <= sizeof(f->held_data) && layer_dg_fault_roll(f) < f->reorder) {
		memcpy(f->held_data, data, len);
		f->held_len = len;
		f->held_dest = dest;
		return;
	}
	layer_dg_inject(dg, data, len, dest);
	if (layer_dg_fault_roll(f) < f->dup)
		layer_dg_inject(dg, data, len, dest);
	layer_dg_fault_flush(dg);
}

/* --- datagrams out --- */

void layer_dg_xmit(struct layer_dgram *dg, struct layer_dg_peer *peer, struct layer_dg_pkt *pkt)
{
	struct layer_dg_hdr *hdr = (struct layer_dg_hdr *) pkt->data;

	hdr->src_sess = peer->my_sess;
	hdr->dst_sess = peer->peer_sess;
	hdr->mtu = (uint32_t) dg->mtu;
	hdr->flags &= (uint8_t) ~LAYER_DG_HAS_ACK;
	layer_dg_rel_fill_ack(dg, peer, hdr);
	pkt->sent_us = dg->now_us;
	if (pkt->tries < UINT8_MAX)
		pkt->tries++;
	layer_dg_send_raw(dg, pkt->data, pkt->len, peer->core_addr);
}

void layer_dg_send_ack(struct layer_dgram *dg, struct layer_dg_peer *peer)
{
	struct layer_dg_hdr hdr = {
		.version = LAYER_DG_VERSION,
		.type = LAYER_DG_ACK,
		.src_sess = peer->my_sess,
		.mtu = (uint32_t) dg->mtu,
	};

	layer_dg_rel_fill_ack(dg, peer, &hdr);
	layer_dg_send_raw(dg, &hdr, sizeof(hdr), peer->core_addr);
}

static void layer_dg_send_rst(struct layer_dgram *dg, struct layer_dg_peer *peer,
			      uint32_t their_sess)
{
	struct layer_dg_hdr hdr = {
		.version = LAYER_DG_VERSION,
		.type = LAYER_DG_RST,
		.src_sess = peer->my_sess,
		.dst_sess = their_sess,
		.mtu = (uint32_t) dg->mtu,
	};

	layer_dg_send_raw(dg, &hdr, sizeof(hdr), peer->core_addr);
}

void layer_dg_busy(struct layer_dgram *dg, struct layer_dg_peer *peer)
{
	if (peer->is_busy_listed)
		return;
	util_dlist_insert_tail(&peer->busy_link, &dg->busy_peers);
	peer->is_busy_listed = true;
	dg->next_timer_us = 0;
}

static void layer_dg_owe_ack(struct layer_dgram *dg, struct layer_dg_peer *peer)
{
	if (peer->is_ack_listed)
		return;
	util_dlist_insert_tail(&peer->ack_link, &dg->ack_peers);
	peer->is_ack_listed = true;
}

/*
 * Acknowledgements owed go: all of them (idle, or the caller is about to sleep), those
 * asked for (is_asked: the progress call ends, and its caller may not call again soon while
 * the peer's operation waits), or those that should not wait at all.
 */
static void layer_dg_flush_acks(struct layer_dgram *dg, bool is_all, bool is_asked)
{
	struct util_dlist *item, *tmp;
	struct layer_dg_peer *peer;

	util_dlist_foreach_safe(&dg->ack_peers, item, tmp) {
		peer = container_of(item, struct layer_dg_peer, ack_link);
		if (is_all || peer->is_ack_now || peer->ack_owed >= LAYER_DG_ACK_EVERY ||
		    (is_asked && peer->is_ack_asked))
			layer_dg_send_ack(dg, peer);
	}
}

/* --- peers --- */

/* Frees the peer's reads, without completions. */
static void layer_dg_reads_drop(struct layer_dg_peer *peer)
{
	struct util_dlist *item;

	while ((item = util_dlist_pop_front(&peer->reads)))
		free(container_of(item, struct layer_dg_read, link));
}

/* Frees the peer's ops and reads, without completions. */
static void layer_dg_peer_drop(struct layer_dgram *dg, struct layer_dg_peer *peer)
{
	struct util_dlist *item;

	while ((item = util_dlist_pop_front(&peer->txq)))
		layer_dg_op_free(dg, container_of(item, struct layer_dg_op, link));
	while ((item = util_dlist_pop_front(&peer->inflight)))
		layer_dg_op_free(dg, container_of(item, struct layer_dg_op, link));
	layer_dg_reads_drop(peer);
}

static void layer_dg_peer_free(struct layer_dgram *dg, struct layer_dg_peer *peer)
{
	layer_dg_peer_drop(dg, peer);
	layer_dg_rel_fini(dg, peer);
	free(peer);
}

int layer_dgram_av_insert(struct layer_dgram *dg, const void *addr, fi_addr_t *core_addr)
{
	fi_addr_t fi_addr = FI_ADDR_NOTAVAIL;
	struct layer_dg_peer *peer, **table;
	int ret;

	HASH_FIND(hh, dg->by_addr, addr, dg->core->addrlen, peer);
	if (peer) {
		*core_addr = peer->core_addr;
		return 0;
	}
	ret = fi_av_insert(dg->av, addr, 1, &fi_addr, 0, NULL);
	if (ret != 1)
		return ret < 0 ? ret : -FI_EADDRNOTAVAIL;
	if (fi_addr >= LAYER_DG_MAX_PEERS) {
		ret = -FI_EOPNOTSUPP;
		goto err_remove;
	}
	if (fi_addr >= dg->by_core_addr_cnt) {
		table = util_array_grow(dg->by_core_addr, &dg->by_core_addr_cnt, sizeof(*table),
					fi_addr);
		if (!table) {
			ret = -FI_ENOMEM;
			goto err_remove;
		}
		dg->by_core_addr = table;
	}
	peer = calloc(1, sizeof(*peer));
	if (!peer) {
		ret = -FI_ENOMEM;
		goto err_remove;
	}
	ret = layer_dg_rel_init(dg, peer);
	if (ret) {
		free(peer);
		goto err_remove;
	}
	peer->core_addr = fi_addr;
	peer->my_sess = layer_dg_new_sess(dg);
	memcpy(peer->addr, addr, dg->core->addrlen);
	HASH_ADD(hh, dg->by_addr, addr, dg->core->addrlen, peer);
	dg->by_core_addr[fi_addr] = peer;
	*core_addr = fi_addr;
	return 0;

err_remove:
	fi_av_remove(dg->av, &fi_addr, 1, 0);
	return ret;
}

static struct layer_dg_peer *layer_dg_peer_of(struct layer_dgram *dg, fi_addr_t core_addr)
{
	return core_addr < dg->by_core_addr_cnt ? dg->by_core_addr[core_addr] : NULL;
}

void layer_dg_peer_reset(struct layer_dgram *dg, struct layer_dg_peer *peer, int err)
{
	struct util_dlist ops = UTIL_DLIST_INIT(ops);
	struct util_dlist *item;
	struct layer_dg_op *op;

	FI_INFO(&layer_prov, FI_LOG_EP_DATA, "datagram transport: session with a peer ends: "
		"%s (%" PRIu64 " retransmissions, %" PRIu64 " duplicates so far)\n",
		fi_strerror(err), dg->stats_retx, dg->stats_dup);
	if (unlikely(dg->is_closing)) {
		/* what was left for it is lost with it; nothing goes up any more */
		layer_dg_peer_drop(dg, peer);
		layer_dg_rel_reset(dg, peer);
		return;
	}
	/* What is outstanding is set apart first: whatever the upcalls send is the new
	 * session's. */
	while ((item = util_dlist_pop_front(&peer->inflight)))
		util_dlist_insert_tail(item, &ops);
	while ((item = util_dlist_pop_front(&peer->txq)))
		util_dlist_insert_tail(item, &ops);
	layer_dg_rel_reset(dg, peer);
	if (peer->is_ack_listed) {
		util_dlist_remove(&peer->ack_link);
		peer->is_ack_listed = false;
	}
	peer->my_sess = layer_dg_new_sess(dg);
	peer->peer_sess = 0;
	peer->is_synced = false;
	layer_dg_stream_reset(dg, peer, err);
	dg->up->peer_lost(dg->up_arg, peer->core_addr, err);
	while ((item = util_dlist_pop_front(&ops))) {
		op = container_of(item, struct layer_dg_op, link);
		if (op->ctx)
			dg->up->done(dg->up_arg, op->ctx, err);
		layer_dg_op_free(dg, op);
	}
}

/* --- datagrams in --- */

static int layer_dg_post_rx(struct layer_dgram *dg)
{
	struct layer_dg_pkt *pkt;
	ssize_t ret;

	pkt = layer_dg_pkt_get(dg);
	if (!pkt)
		return -FI_ENOMEM;
	pkt->ctx.type = LAYER_CTX_BUF;
	pkt->ctx.chan = NULL;
	ret = fi_recv(dg->ep, pkt->data, dg->mtu, NULL, FI_ADDR_UNSPEC, &pkt->ctx);
	if (ret) {
		layer_dg_pkt_put(dg, pkt);
		return (int) ret;
	}
	dg->rx_posted++;
	return 0;
}

static void layer_dg_refill_rx(struct layer_dgram *dg)
{
	while (dg->rx_posted < dg->rx_target && !layer_dg_post_rx(dg))
		;
}

/* The peer a datagram comes from: the core's source, or the address a SYN carries. */
static struct layer_dg_peer *layer_dg_src(struct layer_dgram *dg, const struct layer_dg_pkt *pkt,
					  fi_addr_t src)
{
	const struct layer_dg_hdr *hdr = (const struct layer_dg_hdr *) pkt->data;
	struct layer_dg_peer *peer = NULL;
	uint8_t addr[LAYER_ADDR_MAX];
	fi_addr_t core_addr;

	if (src != FI_ADDR_NOTAVAIL)
		peer = layer_dg_peer_of(dg, src);
	if (peer || dg->is_closing || !(hdr->flags & LAYER_DG_SYN) ||
	    pkt->len < sizeof(*hdr) + dg->core->addrlen)
		return peer;
	if (layer_addr_normalize(dg->core->domain->addr_format, hdr + 1, dg->core->addrlen,
				 addr) ||
	    layer_dgram_av_insert(dg, addr, &core_addr))
		return NULL;
	return layer_dg_peer_of(dg, core_addr);
}

/* One datagram in: sessions checked, its acknowledgement taken, its data into the stream. */
static void layer_dg_handle(struct layer_dgram *dg, struct layer_dg_pkt *pkt, size_t len,
			    fi_addr_t src)
{
	const struct layer_dg_hdr *hdr = (const struct layer_dg_hdr *) pkt->data;
	struct layer_dg_peer *peer;

	pkt->len = (uint16_t) len;
	if (len < sizeof(*hdr) || hdr->version != LAYER_DG_VERSION ||
	    (hdr->type == LAYER_DG_DATA && (hdr->flags & LAYER_DG_SYN) &&
	     len < sizeof(*hdr) + dg->core->addrlen)) {
		LAYER_WARN_ONCE(FI_LOG_EP_DATA, "datagram transport: dropping a datagram that is "
			"not ours (%zu bytes)\n", len);
		dg->core->dropped_cnt++;
		goto put;
	}
	peer = layer_dg_src(dg, pkt, src);
	if (!peer) {
		dg->core->dropped_cnt++;
		goto put;
	}
	if (hdr->dst_sess && hdr->dst_sess != peer->my_sess) {
		/* for a session of ours that is over */
		if (hdr->type != LAYER_DG_RST)
			layer_dg_send_rst(dg, peer, hdr->src_sess);
		goto put;
	}
	if (hdr->type == LAYER_DG_RST) {
		if (hdr->dst_sess == peer->my_sess &&
		    (peer->peer_sess || !layer_dg_rel_is_idle(peer)))
			layer_dg_peer_reset(dg, peer, FI_ECONNRESET);
		goto put;
	}
	if (peer->peer_sess != hdr->src_sess) {
		/* the peer starts anew: whatever we had with it is over */
		if (peer->peer_sess)
			layer_dg_peer_reset(dg, peer, FI_ECONNRESET);
		peer->peer_sess = hdr->src_sess;
		if (hdr->dst_sess && hdr->dst_sess != peer->my_sess)
			goto put;
	}
	peer->last_rx_us = dg->now_us;
	peer->tx_mtu = UTIL_MAX(UTIL_MIN((size_t) hdr->mtu, dg->mtu), dg->min_mtu);
	if (hdr->dst_sess == peer->my_sess) {
		peer->is_synced = true;
		if (hdr->flags & LAYER_DG_HAS_ACK)
			layer_dg_rel_acked(dg, peer, hdr);
	}
	if (hdr->type != LAYER_DG_DATA)
		goto put;
	pkt->seq = hdr->seq;
	if (hdr->flags & LAYER_DG_ACK_REQ)
		peer->is_ack_asked = true;
	layer_dg_owe_ack(dg, peer);
	if (unlikely(dg->is_closing)) {
		layer_dg_rel_discard(dg, peer, pkt->seq);
		goto put;
	}
	layer_dg_rel_data(dg, peer, pkt);
	return;
put:
	layer_dg_pkt_put(dg, pkt);
}

/* --- timers --- */

static void layer_dg_keepalive(struct layer_dgram *dg)
{
	uint64_t idle = layer_settings.keepalive_ms * 1000;
	struct layer_dg_peer *peer, *tmp;
	struct layer_dg_op *op;

	HASH_ITER(hh, dg->by_addr, peer, tmp) {
		/* a session with nothing on its way to the peer, silent for too long */
		if (!peer->peer_sess || peer->snd_una != peer->snd_nxt ||
		    !util_dlist_empty(&peer->txq) || dg->now_us - peer->last_rx_us < idle)
			continue;
		op = layer_dg_op_new(dg, LAYER_DG_PING, NULL, 0, false, NULL);
		if (!op)
			return;
		util_dlist_insert_tail(&op->link, &peer->txq);
		layer_dg_rel_push(dg, peer);
	}
}

static void layer_dg_timers(struct layer_dgram *dg)
{
	struct util_dlist *item, *tmp;
	struct layer_dg_peer *peer;
	uint64_t next = UINT64_MAX, at;

	util_dlist_foreach_safe(&dg->busy_peers, item, tmp) {
		peer = container_of(item, struct layer_dg_peer, busy_link);
		at = layer_dg_rel_timers(dg, peer);
		if (layer_dg_rel_is_idle(peer)) {
			util_dlist_remove(&peer->busy_link);
			peer->is_busy_listed = false;
			continue;
		}
		next = UTIL_MIN(next, at);
	}
	if (layer_settings.keepalive_ms && !dg->is_closing) {
		layer_dg_keepalive(dg);
		next = UTIL_MIN(next, dg->now_us + layer_settings.keepalive_ms * 1000 / 4);
	}
	dg->next_timer_us = next;
}

/* --- the transport's calls --- */

void layer_dgram_progress(struct layer_dgram *dg)
{
	struct fi_cq_msg_entry comp;
	struct fi_cq_err_entry err;
	struct layer_dg_pkt *pkt;
	fi_addr_t src;
	ssize_t ret;
	size_t n;

	dg->now_us = layer_dg_now();
	for (n = 0; n < LAYER_DG_RX_BATCH; n++) {
		ret = fi_cq_readfrom(dg->core->cq, &comp, 1, &src);
		if (ret == -FI_EAVAIL) {
			memset(&err, 0, sizeof(err));
			if (fi_cq_readerr(dg->core->cq, &err, 0) == 1 && err.op_context) {
				pkt = container_of(err.op_context, struct layer_dg_pkt, ctx);
				dg->rx_posted--;
				layer_dg_pkt_put(dg, pkt);
			}
			continue;
		}
		if (ret <= 0)
			break;
		pkt = container_of(comp.op_context, struct layer_dg_pkt, ctx);
		dg->rx_posted--;
		layer_dg_handle(dg, pkt, comp.len, src);
		if (n % 16 == 15)
			layer_dg_flush_acks(dg, false, false);
	}
	layer_dg_refill_rx(dg);
	/*
	 * Nothing came: whatever is owed goes. Otherwise what the peer waits on goes before the
	 * caller has what came (it may not call again soon); the rest may ride on its answer.
	 */
	layer_dg_flush_acks(dg, !n, true);
	if (dg->now_us >= dg->next_timer_us)
		layer_dg_timers(dg);
	layer_dg_fault_flush(dg);
}

void layer_dgram_buf_posted(struct layer_dgram *dg)
{
	struct layer_dg_peer *peer, *tmp;

	if (!dg->is_buf_short)
		return;
	dg->is_buf_short = false;
	HASH_ITER(hh, dg->by_addr, peer, tmp) {
		if (peer->rx_held)
			layer_dg_rel_drain(dg, peer);
	}
}

/* Peers with nothing left outstanding leave the busy list: true if none remains. */
static bool layer_dg_is_quiet(struct layer_dgram *dg)
{
	struct util_dlist *item, *tmp;
	struct layer_dg_peer *peer;

	util_dlist_foreach_safe(&dg->busy_peers, item, tmp) {
		peer = container_of(item, struct layer_dg_peer, busy_link);
		if (!layer_dg_rel_is_idle(peer))
			return false;
		util_dlist_remove(&peer->busy_link);
		peer->is_busy_listed = false;
	}
	return true;
}

int layer_dgram_trywait(struct layer_dgram *dg)
{
	struct fid *fids[1] = { &dg->core->cq->fid };

	layer_dg_flush_acks(dg, true, true);
	layer_dg_fault_flush(dg);
	/* retransmissions and the liveness of what waits are driven by progress calls */
	if (!layer_dg_is_quiet(dg) || dg->is_buf_short || dg->core->cq_fd < 0)
		return -FI_EAGAIN;
	return fi_trywait(dg->core->domain->fabric->core_fabric, fids, 1);
}

/* An op to dest, queued and pushed. */
static ssize_t layer_dg_queue(struct layer_dgram *dg, fi_addr_t dest, struct layer_dg_op *op)
{
	struct layer_dg_peer *peer = layer_dg_peer_of(dg, dest);

	if (!peer) {
		layer_dg_op_free(dg, op);
		return -FI_EINVAL;
	}
	dg->now_us = layer_dg_now();
	util_dlist_insert_tail(&op->link, &peer->txq);
	layer_dg_busy(dg, peer);
	layer_dg_rel_push(dg, peer);
	return 0;
}

ssize_t layer_dgram_sendv(struct layer_dgram *dg, const struct iovec *iov, size_t count,
			  fi_addr_t dest, struct layer_ctx *ctx)
{
	struct layer_dg_op *op;

	if (count > LAYER_IOV_LIMIT + 2)
		return -FI_EINVAL;
	op = layer_dg_op_new(dg, LAYER_DG_MSG, iov, count, false, ctx);
	if (!op)
		return -FI_ENOMEM;
	return layer_dg_queue(dg, dest, op);
}

ssize_t layer_dgram_inject(struct layer_dgram *dg, const void *buf, size_t len, fi_addr_t dest)
{
	struct iovec iov = { .iov_base = (void *) buf, .iov_len = len };
	struct layer_dg_op *op;

	op = layer_dg_op_new(dg, LAYER_DG_MSG, &iov, 1, true, NULL);
	if (!op)
		return -FI_ENOMEM;
	return layer_dg_queue(dg, dest, op);
}

ssize_t layer_dgram_read(struct layer_dgram *dg, void *buf, size_t len, fi_addr_t src,
			 uint64_t addr, uint64_t key, struct layer_ctx *ctx)
{
	struct layer_dg_peer *peer = layer_dg_peer_of(dg, src);
	struct layer_dg_rreq rreq = { .addr = addr, .key = key, .len = len };
	struct iovec iov = { .iov_base = &rreq, .iov_len = sizeof(rreq) };
	struct layer_dg_read *read;
	struct layer_dg_op *op;

	if (!peer)
		return -FI_EINVAL;
	read = malloc(sizeof(*read));
	op = layer_dg_op_new(dg, LAYER_DG_RREQ, &iov, 1, true, NULL);
	if (!read || !op) {
		free(read);
		if (op)
			layer_dg_op_free(dg, op);
		return -FI_ENOMEM;
	}
	*read = (struct layer_dg_read) { .ctx = ctx, .buf = buf, .len = len };
	util_dlist_insert_tail(&read->link, &peer->reads);
	return layer_dg_queue(dg, src, op);
}

/* --- open and close --- */

/* Whether the endpoint's address is a loopback one: every peer is on this host then. */
static bool layer_dg_is_loopback(const struct layer_core *core)
{
	const struct sockaddr_in6 *sin6 = (const struct sockaddr_in6 *) core->addr;
	const struct sockaddr_in *sin = (const struct sockaddr_in *) core->addr;

	if (sin->sin_family == AF_INET)
		return (ntohl(sin->sin_addr.s_addr) >> 24) == 127;
	return sin6->sin6_family == AF_INET6 && IN6_IS_ADDR_LOOPBACK(&sin6->sin6_addr);
}

/* The datagram size: the setting, else 64 KiB on loopback, else the core's. */
static size_t layer_dg_mtu(const struct layer_dgram *dg)
{
	if (layer_dgram_settings.mtu)
		return UTIL_MAX(layer_dgram_settings.mtu, dg->min_mtu);
	return layer_dg_is_loopback(dg->core) ? UTIL_MAX((size_t) LAYER_DG_LOOPBACK_MTU,
							 dg->min_mtu) : dg->min_mtu;
}

/*
 * What a peer may send ahead of our acknowledgement: as many datagrams as the core socket's
 * receive buffer (the system's default size: the core sets none) holds, so that one sender
 * alone never overflows it; the congestion window shares it among several.
 */
static uint32_t layer_dg_rx_wnd(const struct layer_dgram *dg)
{
	unsigned long rmem = 212992;
	FILE *f;

	f = fopen("/proc/sys/net/core/rmem_default", "r");
	if (f) {
		if (fscanf(f, "%lu", &rmem) != 1)
			rmem = 212992;
		fclose(f);
	}
	return (uint32_t) UTIL_MIN(UTIL_MAX(rmem / (dg->mtu + LAYER_DG_SKB_OVERHEAD), 2ul),
				   (unsigned long) dg->window);
}

int layer_dgram_open(struct layer_core *core, const struct layer_dgram_upcalls *up, void *arg,
		     struct layer_dgram **dg_out)
{
	struct fi_av_attr av_attr = { .type = FI_AV_TABLE };
	struct layer_domain *domain = core->domain;
	uint8_t raw[LAYER_ADDR_MAX];
	size_t addrlen = sizeof(raw);
	struct layer_dgram *dg;
	int ret;

	dg = calloc(1, sizeof(*dg));
	if (!dg)
		return -FI_ENOMEM;
	dg->core = core;
	dg->up = up;
	dg->up_arg = arg;
	util_dlist_init(&dg->ack_peers);
	util_dlist_init(&dg->busy_peers);
	dg->min_mtu = UTIL_MIN(core->info->ep_attr->max_msg_size, (size_t) LAYER_DG_LOOPBACK_MTU);
	dg->window = UTIL_MAX(layer_dgram_settings.window, (size_t) UTIL_SACK_BITS + 1);
	if (dg->min_mtu < sizeof(struct layer_dg_hdr) + LAYER_ADDR_MAX +
			  sizeof(struct layer_dg_msg) + 64) {
		FI_WARN(&layer_prov, FI_LOG_EP_CTRL, "the core's datagrams of %zu bytes are too "
			"small\n", dg->min_mtu);
		ret = -FI_EINVAL;
		goto err_free;
	}
	dg->rand = (uint64_t) layer_dg_now() ^ ((uint64_t) getpid() << 32) ^
		   (uint64_t) (uintptr_t) dg;
	dg->fault.rand = dg->rand;
	layer_dg_fault_init(dg);
	/* every receive datagram the core keeps, and sends that never wait */
	if (core->info->rx_attr->size < LAYER_DG_RX_POSTED)
		core->info->rx_attr->size = LAYER_DG_RX_POSTED;
	ret = fi_av_open(domain->core_domain, &av_attr, &dg->av, dg);
	if (ret)
		goto err_free;
	ret = fi_endpoint(domain->core_domain, core->info, &dg->ep, dg);
	if (ret)
		goto err_close_av;
	ret = fi_ep_bind(dg->ep, &dg->av->fid, 0);
	if (!ret)
		ret = fi_ep_bind(dg->ep, &core->cq->fid, FI_TRANSMIT | FI_RECV);
	if (!ret)
		ret = fi_enable(dg->ep);
	if (!ret)
		ret = fi_getname(&dg->ep->fid, raw, &addrlen);
	if (!ret)
		ret = layer_addr_normalize(domain->addr_format, raw, addrlen, core->addr);
	if (ret)
		goto err_close_ep;
	core->addrlen = domain->addrlen;
	dg->mtu = layer_dg_mtu(dg);
	dg->rx_wnd = layer_dg_rx_wnd(dg);
	dg->rx_target = UTIL_MIN(2 * (size_t) dg->rx_wnd + 8, (size_t) LAYER_DG_RX_POSTED);
	ret = util_bufpool_init(&dg->pkt_pool, sizeof(struct layer_dg_pkt) + dg->mtu, 64, 16, 0);
	if (ret)
		goto err_close_ep;
	ret = util_bufpool_init(&dg->op_pool, sizeof(struct layer_dg_op) + LAYER_DG_OP_COPY_MAX,
				0, 64, 0);
	if (ret) {
		util_bufpool_fini(&dg->pkt_pool);
		goto err_close_ep;
	}
	layer_dg_refill_rx(dg);
	if (!dg->rx_posted) {
		ret = -FI_ENOMEM;
		goto err_fini_pool;
	}
	FI_INFO(&layer_prov, FI_LOG_EP_CTRL, "datagram transport: datagrams up to %zu bytes, "
		"%u ahead of an acknowledgement\n", dg->mtu, dg->rx_wnd);
	*dg_out = dg;
	return 0;

err_fini_pool:
	/* the core endpoint holds posted datagrams of the pool: closed first */
	fi_close(&dg->ep->fid);
	util_bufpool_fini(&dg->op_pool);
	util_bufpool_fini(&dg->pkt_pool);
	goto err_close_av;
err_close_ep:
	fi_close(&dg->ep->fid);
err_close_av:
	fi_close(&dg->av->fid);
err_free:
	free(dg);
	return ret;
}

/*
 * Whether the close still waits on a peer: it has something unacknowledged, and it was heard
 * within the last quiet_us (or since the close began): a peer silent that long is taken as not
 * listening (gone, or not progressing: in the same thread, say), and left behind.
 */
static bool layer_dg_is_lingering(struct layer_dgram *dg, uint64_t start_us, uint64_t quiet_us)
{
	struct layer_dg_peer *peer, *tmp;

	HASH_ITER(hh, dg->by_addr, peer, tmp) {
		if (!layer_dg_rel_is_idle(peer) &&
		    dg->now_us - UTIL_MAX(start_us, peer->last_rx_us) < quiet_us)
			return true;
	}
	return false;
}

/* Close: what peers have not acknowledged still goes, while they listen (above). */
static void layer_dg_linger(struct layer_dgram *dg)
{
	const struct timespec pause = { .tv_nsec = 20000 };
	struct layer_dg_peer *peer, *tmp;
	struct util_dlist *item;
	uint64_t start_us;

	dg->is_closing = true;
	HASH_ITER(hh, dg->by_addr, peer, tmp) {
		/* the sends go; no completion does */
		util_dlist_foreach(&peer->txq, item)
			container_of(item, struct layer_dg_op, link)->ctx = NULL;
		util_dlist_foreach(&peer->inflight, item)
			container_of(item, struct layer_dg_op, link)->ctx = NULL;
		layer_dg_reads_drop(peer);
		layer_dg_rel_rx_drop(dg, peer);
	}
	dg->now_us = start_us = layer_dg_now();
	while (layer_dg_is_lingering(dg, start_us, (uint64_t) layer_close_wait_ms() * 1000)) {
		(void) nanosleep(&pause, NULL);
		layer_dgram_progress(dg);
	}
}

void layer_dgram_close(struct layer_dgram *dg)
{
	struct layer_dg_peer *peer, *tmp;

	/* what peers sent us is acknowledged: their sends complete (a process that receives its
	 * last message and closes is common) */
	layer_dg_flush_acks(dg, true, true);
	layer_dg_linger(dg);
	layer_dg_flush_acks(dg, true, true);
	layer_dg_fault_flush(dg);
	/* closing the core endpoint drops its posted datagrams: no completion follows */
	fi_close(&dg->ep->fid);
	HASH_ITER(hh, dg->by_addr, peer, tmp) {
		HASH_DEL(dg->by_addr, peer);
		layer_dg_peer_free(dg, peer);
	}
	free(dg->by_core_addr);
	fi_close(&dg->av->fid);
	util_bufpool_fini(&dg->op_pool);
	util_bufpool_fini(&dg->pkt_pool);
	free(dg);
}
