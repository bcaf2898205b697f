/*
 * Liveness of peers over cores that do not tell when a peer vanished: a tcp connection to a
 * host that lost power or whose cable was pulled retransmits for many minutes, and net's RDM
 * endpoint never reports a dead peer at all. (Over a datagram core the transport does this
 * itself, dgram/, and this stays off.)
 *
 * A peer is watched while something waits on it: a send queued, in the core or waiting for
 * its ACK, or a rendezvous read from it. Anything it sends says it is there. Once it has
 * been silent for FI_OFI_LAYER_KEEPALIVE it gets a PING, again each KEEPALIVE, which its
 * provider answers with a PONG whatever its application does, as long as it progresses; once
 * silent for FI_OFI_LAYER_PEER_TIMEOUT it is lost: every connection with it fails with
 * FI_EHOSTUNREACH, and what waits on them completes with that error. A peer nothing waits
 * on is never probed: the check costs nothing on an idle endpoint.
 */
#include "config.h"

#include "layer/conn/conn.h"

/* A connection of the peer something waits on, the connected one first; NULL if none. */
static struct layer_conn *layer_peer_busy_conn(struct layer_peer *peer)
{
	struct layer_conn *conn, *busy = NULL;
	struct util_dlist *item;

	util_dlist_foreach(&peer->conns, item) {
		conn = container_of(item, struct layer_conn, peer_link);
		if (conn->state == LAYER_CONN_CLOSED)
			continue;
		if (util_dlist_empty(&conn->queued_tx) && util_dlist_empty(&conn->posted_tx) &&
		    util_dlist_empty(&conn->acked_tx) && util_dlist_empty(&conn->reading_rx))
			continue;
		if (conn->state == LAYER_CONN_CONNECTED)
			return conn;
		busy = conn;
	}
	return busy;
}

/* A connection a PING can go on: the one sends to the peer go on, else any connected. */
static struct layer_conn *layer_peer_ping_conn(struct layer_peer *peer)
{
	struct layer_conn *conn, *any = NULL;
	struct util_dlist *item;

	util_dlist_foreach(&peer->conns, item) {
		conn = container_of(item, struct layer_conn, peer_link);
		if (conn->state != LAYER_CONN_CONNECTED)
			continue;
		if (conn->is_tx || conn->chan->is_two_way)
			return conn;
		any = conn;
	}
	return any;
}

static void layer_peer_lost(struct layer_peer *peer)
{
	struct util_dlist *item, *tmp;

	FI_INFO(&layer_prov, FI_LOG_EP_CTRL, "a peer silent for %zu ms is lost\n",
		layer_settings.peer_timeout_ms);
	util_dlist_foreach_safe(&peer->conns, item, tmp)
		layer_conn_fail(container_of(item, struct layer_conn, peer_link),
				FI_EHOSTUNREACH);
	peer->is_watched = false;
}

void layer_conns_watch_run(struct layer_conns *conns, uint64_t now_ms)
{
	uint64_t keepalive = layer_settings.keepalive_ms, timeout = layer_settings.peer_timeout_ms;
	struct layer_peer *peer, *tmp;
	struct layer_conn *conn;
	uint64_t silent;

	/* looked at four times per keepalive: a probe is at most a quarter late */
	conns->next_watch_ms = now_ms + UTIL_MAX(UTIL_MIN(keepalive, timeout) / 4, (uint64_t) 1);
	HASH_ITER(hh, conns->peers, peer, tmp) {
		if (!layer_peer_busy_conn(peer)) {
			peer->is_watched = false;
			continue;
		}
		if (!peer->is_watched) {
			/* silence counts from now: it may have had nothing to say */
			peer->is_watched = true;
			peer->watch_ms = now_ms;
			peer->last_rx_ms = now_ms;
			peer->ping_ms = 0;
			continue;
		}
		silent = now_ms - UTIL_MAX(peer->last_rx_ms, peer->watch_ms);
		if (silent >= timeout) {
			layer_peer_lost(peer);
			continue;
		}
		if (silent < keepalive || now_ms - peer->ping_ms < keepalive)
			continue;
		conn = layer_peer_ping_conn(peer);
		if (conn) {
			conns->up->probe(conns->up_arg, conn);
			peer->ping_ms = now_ms;
		}
	}
}
