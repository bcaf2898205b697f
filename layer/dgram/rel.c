/*
 * Reliability per peer (dgram.h): the sending window and the receiving one.
 *
 * Sending: ops are cut into packets only as the window lets (at most min(congestion window,
 * the peer's window) unacknowledged), each kept until acknowledged. The cumulative
 * acknowledgement frees packets and completes ops whose last packet it passes; the selective
 * one marks packets that arrived past a hole. A packet is resent
 * - when a packet sent after it was reported and half a round trip has passed since it went
 *   (a hole: windows are a few datagrams when they are large, so waiting for three reports
 *   as TCP does would wait for the timeout; the window halves, once per window);
 * - as a probe, the newest one, when nothing was acknowledged for two round trips (a loss at
 *   the tail of a burst has no later packet to reveal it: the probe's acknowledgement does);
 * - when the oldest unacknowledged has waited a retransmission timeout (measured round trip,
 *   RFC 6298, doubled on each expiry: the window drops to its floor), and then every packet
 *   not reported within the window that waited as long.
 * A peer that acknowledges nothing for FI_OFI_LAYER_PEER_TIMEOUT while packets wait is lost.
 *
 * Receiving: packets within the window past the next expected are held until the hole before
 * them fills; duplicates and packets beyond the window are dropped, and both, and holes,
 * make the acknowledgement go at once. Otherwise it rides on the next packet to the peer, or
 * goes alone after LAYER_DG_ACK_EVERY packets, or when the endpoint has nothing else to do.
 */
#include "config.h"

#include <stdlib.h>

#include "layer/dgram/dgram_int.h"

/* The least wait before a probe of the tail, microseconds. */
#define LAYER_DG_PROBE_MIN 100

int layer_dg_rel_init(struct layer_dgram *dg, struct layer_dg_peer *peer)
{
	peer->tx_win = calloc(dg->window, sizeof(*peer->tx_win));
	peer->rx_win = calloc(dg->window, sizeof(*peer->rx_win));
	if (!peer->tx_win || !peer->rx_win) {
		free(peer->tx_win);
		free(peer->rx_win);
		return -FI_ENOMEM;
	}
	util_dlist_init(&peer->txq);
	util_dlist_init(&peer->inflight);
	util_dlist_init(&peer->reads);
	layer_dg_rel_reset(dg, peer);
	return 0;
}

void layer_dg_rel_reset(struct layer_dgram *dg, struct layer_dg_peer *peer)
{
	size_t i;

	for (i = 0; i < dg->window; i++) {
		if (peer->tx_win[i])
			layer_dg_pkt_put(dg, peer->tx_win[i]);
		peer->tx_win[i] = NULL;
	}
	layer_dg_rel_rx_drop(dg, peer);
	peer->snd_una = peer->snd_nxt = peer->recover = 0;
	peer->is_probed = false;
	peer->rcv_nxt = 0;
	peer->ack_owed = 0;
	peer->is_ack_now = false;
	peer->is_ack_asked = false;
	peer->peer_wnd = (uint32_t) dg->window;
	peer->tx_mtu = dg->min_mtu;
	util_rtt_init(&peer->rtt, LAYER_DG_RTO_INITIAL, LAYER_DG_RTO_MIN,
		      UTIL_MIN((uint64_t) LAYER_DG_RTO_MAX,
			       UTIL_MAX(layer_settings.peer_timeout_ms * 1000 / 4,
					(uint64_t) LAYER_DG_RTO_MIN)));
	util_cwnd_init(&peer->cwnd, LAYER_DG_CWND_INITIAL, LAYER_DG_CWND_MIN,
		       (uint32_t) dg->window);
}

void layer_dg_rel_fini(struct layer_dgram *dg, struct layer_dg_peer *peer)
{
	if (peer->tx_win && peer->rx_win)
		layer_dg_rel_reset(dg, peer);
	free(peer->tx_win);
	free(peer->rx_win);
}

bool layer_dg_rel_is_idle(const struct layer_dg_peer *peer)
{
	return peer->snd_una == peer->snd_nxt && util_dlist_empty(&peer->txq) &&
	       util_dlist_empty(&peer->inflight) && util_dlist_empty(&peer->reads);
}

static inline struct layer_dg_pkt **layer_dg_tx_slot(struct layer_dgram *dg,
						     struct layer_dg_peer *peer, uint32_t seq)
{
	return &peer->tx_win[seq % dg->window];
}

void layer_dg_rel_push(struct layer_dgram *dg, struct layer_dg_peer *peer)
{
	struct layer_dg_hdr *hdr;
	struct layer_dg_pkt *pkt;
	struct layer_dg_op *op;
	size_t hdr_len, n;
	uint32_t limit;
	uint8_t flags;

	while (!util_dlist_empty(&peer->txq)) {
		limit = UTIL_MIN(peer->cwnd.cwnd, peer->peer_wnd);
		if (peer->snd_nxt - peer->snd_una >= UTIL_MAX(limit, 1u))
			break;
		pkt = layer_dg_pkt_get(dg);
		if (!pkt)
			break;
		op = container_of(peer->txq.next, struct layer_dg_op, link);
		hdr_len = layer_dg_hdr_len(dg, peer);
		flags = 0;
		n = layer_dg_op_cut(op, pkt->data + hdr_len, peer->tx_mtu - hdr_len, &flags);
		hdr = (struct layer_dg_hdr *) pkt->data;
		*hdr = (struct layer_dg_hdr) {
			.version = LAYER_DG_VERSION,
			.type = LAYER_DG_DATA,
			.flags = flags,
			.seq = peer->snd_nxt,
		};
		if (!peer->is_synced) {
			hdr->flags |= LAYER_DG_SYN;
			memcpy(hdr + 1, dg->core->addr, dg->core->addrlen);
		}
		pkt->len = (uint16_t) (hdr_len + n);
		pkt->seq = peer->snd_nxt;
		pkt->op = op;
		pkt->tries = 0;
		pkt->is_sacked = false;
		if (peer->snd_nxt == peer->snd_una) {
			peer->stall_us = dg->now_us;
			peer->is_probed = false;
		}
		*layer_dg_tx_slot(dg, peer, peer->snd_nxt) = pkt;
		peer->snd_nxt++;
		if (flags & LAYER_DG_LAST) {
			/* what completes on it, or proves the peer is there, is not left waiting */
			if (op->ctx || op->msg.kind == LAYER_DG_PING)
				hdr->flags |= LAYER_DG_ACK_REQ;
			op->last_seq = pkt->seq;
			util_dlist_remove(&op->link);
			util_dlist_insert_tail(&op->link, &peer->inflight);
		}
		layer_dg_busy(dg, peer);
		layer_dg_xmit(dg, peer, pkt);
	}
}

static void layer_dg_resend(struct layer_dgram *dg, struct layer_dg_peer *peer,
			    struct layer_dg_pkt *pkt)
{
	dg->stats_retx++;
	layer_dg_xmit(dg, peer, pkt);
}

/* Ops whose last packet the acknowledgement passed are done. */
static void layer_dg_complete_ops(struct layer_dgram *dg, struct layer_dg_peer *peer)
{
	struct layer_dg_op *op;

	while (!util_dlist_empty(&peer->inflight)) {
		op = container_of(peer->inflight.next, struct layer_dg_op, link);
		if (!util_seq_before(op->last_seq, peer->snd_una))
			return;
		util_dlist_remove(&op->link);
		if (op->ctx)
			dg->up->done(dg->up_arg, op->ctx, 0);
		layer_dg_op_free(dg, op);
	}
}

/*
 * Packets the peer reported past the hole at snd_una: marked, and a packet before the last
 * reported that went half a round trip ago is resent.
 */
static void layer_dg_rel_sacked(struct layer_dgram *dg, struct layer_dg_peer *peer,
				const struct util_ack *ack)
{
	uint32_t seq, highest = util_ack_highest(ack);
	uint64_t wait = UTIL_MAX(peer->rtt.srtt / 2, (uint64_t) 1);
	struct layer_dg_pkt *pkt;
	unsigned after = 0;

	if (!util_seq_before(highest, peer->snd_nxt))
		highest = peer->snd_nxt - 1;
	/* from the highest reported down: count reported ones, resend holes with enough after */
	for (seq = highest; !util_seq_before(seq, peer->snd_una); seq--) {
		pkt = *layer_dg_tx_slot(dg, peer, seq);
		if (!pkt)
			continue;
		if (util_ack_covers(ack, seq)) {
			pkt->is_sacked = true;
			after++;
			continue;
		}
		if (pkt->is_sacked || !after || dg->now_us - pkt->sent_us < wait)
			continue;
		if (!util_seq_before(seq, peer->recover)) {
			util_cwnd_loss(&peer->cwnd);
			peer->recover = peer->snd_nxt;
		}
		layer_dg_resend(dg, peer, pkt);
		if (seq == peer->snd_una)
			break;
	}
}

void layer_dg_rel_acked(struct layer_dgram *dg, struct layer_dg_peer *peer,
			const struct layer_dg_hdr *hdr)
{
	struct util_ack ack = { .ack = hdr->ack, .sack = hdr->sack };
	struct layer_dg_pkt *pkt, **slot;
	uint32_t newly = 0;

	peer->peer_wnd = UTIL_MIN(UTIL_MAX(hdr->wnd, 1u), (uint32_t) dg->window);
	/* an acknowledgement of what was never sent is not ours to believe */
	if (util_seq_before(peer->snd_nxt, ack.ack))
		return;
	while (util_seq_before(peer->snd_una, ack.ack)) {
		slot = layer_dg_tx_slot(dg, peer, peer->snd_una);
		pkt = *slot;
		*slot = NULL;
		/* Karn: a packet sent more than once gives no round trip */
		if (pkt->tries == 1 && !pkt->is_sacked)
			util_rtt_sample(&peer->rtt, dg->now_us - pkt->sent_us);
		layer_dg_pkt_put(dg, pkt);
		peer->snd_una++;
		newly++;
	}
	if (newly) {
		peer->stall_us = dg->now_us;
		peer->is_probed = false;
		util_cwnd_acked(&peer->cwnd, newly);
		/* a timeout's backoff ends with the acknowledgement */
		if (peer->rtt.srtt)
			util_rtt_sample(&peer->rtt, peer->rtt.srtt);
		layer_dg_complete_ops(dg, peer);
	}
	if (ack.sack && peer->snd_una != peer->snd_nxt)
		layer_dg_rel_sacked(dg, peer, &ack);
	layer_dg_rel_push(dg, peer);
}

void layer_dg_rel_drain(struct layer_dgram *dg, struct layer_dg_peer *peer)
{
	uint32_t sess = peer->my_sess;
	struct layer_dg_pkt **slot, *pkt;

	/* what goes up may post a buffer, which drains again: the outer loop goes on */
	if (peer->is_draining)
		return;
	peer->is_draining = true;
	while ((pkt = *(slot = &peer->rx_win[peer->rcv_nxt % dg->window]))) {
		/* taken before it goes up: an answer sent from there acknowledges it */
		*slot = NULL;
		peer->rx_held--;
		peer->rcv_nxt++;
		if (!layer_dg_stream_take(dg, peer, pkt)) {
			/* nothing went up: it waits for a buffer where it was */
			peer->rcv_nxt--;
			peer->rx_held++;
			*slot = pkt;
			dg->is_buf_short = true;
			break;
		}
		layer_dg_pkt_put(dg, pkt);
		/* what went up may have ended the session, and the held packets with it */
		if (peer->my_sess != sess)
			break;
	}
	peer->is_draining = false;
}

void layer_dg_rel_data(struct layer_dgram *dg, struct layer_dg_peer *peer,
		       struct layer_dg_pkt *pkt)
{
	struct layer_dg_pkt **slot;
	uint32_t seq = pkt->seq;

	peer->ack_owed++;
	if (util_seq_before(seq, peer->rcv_nxt) || seq - peer->rcv_nxt >= dg->window) {
		/* a duplicate, or past the window: the sender learns where we are */
		dg->stats_dup++;
		peer->is_ack_now = true;
		layer_dg_pkt_put(dg, pkt);
		return;
	}
	slot = &peer->rx_win[seq % dg->window];
	if (*slot) {
		dg->stats_dup++;
		peer->is_ack_now = true;
		layer_dg_pkt_put(dg, pkt);
		return;
	}
	*slot = pkt;
	peer->rx_held++;
	if (seq != peer->rcv_nxt)
		peer->is_ack_now = true;
	else
		layer_dg_rel_drain(dg, peer);
}

void layer_dg_rel_rx_drop(struct layer_dgram *dg, struct layer_dg_peer *peer)
{
	size_t i;

	for (i = 0; i < dg->window; i++) {
		if (peer->rx_win[i])
			layer_dg_pkt_put(dg, peer->rx_win[i]);
		peer->rx_win[i] = NULL;
	}
	peer->rx_held = 0;
}

void layer_dg_rel_discard(struct layer_dgram *dg, struct layer_dg_peer *peer, uint32_t seq)
{
	/* nothing is held: whatever came before it is taken as dropped too */
	if (!util_seq_before(seq, peer->rcv_nxt) && seq - peer->rcv_nxt < dg->window)
		peer->rcv_nxt = seq + 1;
	peer->ack_owed++;
	peer->is_ack_now = true;
}

void layer_dg_rel_fill_ack(struct layer_dgram *dg, struct layer_dg_peer *peer,
			   struct layer_dg_hdr *hdr)
{
	uint32_t sack = 0, i;

	if (!peer->peer_sess)
		return;
	if (peer->rx_held) {
		for (i = 0; i < UTIL_SACK_BITS && i + 1 < dg->window; i++) {
			if (peer->rx_win[(peer->rcv_nxt + 1 + i) % dg->window])
				sack |= 1u << i;
		}
	}
	hdr->flags |= LAYER_DG_HAS_ACK;
	hdr->dst_sess = peer->peer_sess;
	hdr->ack = peer->rcv_nxt;
	hdr->sack = sack;
	hdr->wnd = dg->rx_wnd;
	peer->ack_owed = 0;
	peer->is_ack_now = false;
	peer->is_ack_asked = false;
	if (peer->is_ack_listed) {
		util_dlist_remove(&peer->ack_link);
		peer->is_ack_listed = false;
	}
}

uint64_t layer_dg_rel_timers(struct layer_dgram *dg, struct layer_dg_peer *peer)
{
	uint64_t timeout = layer_settings.peer_timeout_ms * 1000, probe_at;
	struct layer_dg_pkt *pkt, *tail;
	uint32_t seq, end;

	if (peer->snd_una == peer->snd_nxt)
		return UINT64_MAX;
	if (dg->now_us - peer->stall_us >= timeout) {
		layer_dg_peer_reset(dg, peer, FI_EHOSTUNREACH);
		return UINT64_MAX;
	}
	pkt = *layer_dg_tx_slot(dg, peer, peer->snd_una);
	probe_at = peer->stall_us + UTIL_MAX(2 * peer->rtt.srtt, (uint64_t) LAYER_DG_PROBE_MIN);
	if (!peer->is_probed && peer->rtt.srtt && dg->now_us >= probe_at &&
	    dg->now_us - pkt->sent_us < peer->rtt.rto) {
		/* a probe of the tail: its acknowledgement says which holes there are */
		peer->is_probed = true;
		tail = *layer_dg_tx_slot(dg, peer, peer->snd_nxt - 1);
		if (!tail->is_sacked)
			layer_dg_resend(dg, peer, tail);
	}
	if (dg->now_us - pkt->sent_us < peer->rtt.rto)
		return peer->is_probed || !peer->rtt.srtt ? pkt->sent_us + peer->rtt.rto :
			UTIL_MIN(pkt->sent_us + peer->rtt.rto, probe_at);
	/* a timeout: the oldest goes again, and whatever in the window waited as long */
	util_rtt_backoff(&peer->rtt);
	util_cwnd_timeout(&peer->cwnd);
	peer->recover = peer->snd_nxt;
	layer_dg_resend(dg, peer, pkt);
	end = peer->snd_una + UTIL_MAX(peer->cwnd.ssthresh, 1u);
	for (seq = peer->snd_una + 1; util_seq_before(seq, peer->snd_nxt) &&
	     util_seq_before(seq, end); seq++) {
		pkt = *layer_dg_tx_slot(dg, peer, seq);
		if (pkt && !pkt->is_sacked && dg->now_us - pkt->sent_us >= peer->rtt.rto / 2)
			layer_dg_resend(dg, peer, pkt);
	}
	return dg->now_us + peer->rtt.rto;
}
