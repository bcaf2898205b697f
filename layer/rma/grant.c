/* Direct RMA: grants of the core's keys (grant.h). */
#include "config.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "layer/proto/tx.h"
#include "layer/rma/grant.h"

static struct layer_grants *layer_grants_of(struct layer_conn *conn)
{
	if (!conn->grants)
		conn->grants = calloc(1, sizeof(*conn->grants));
	return conn->grants;
}

static bool layer_grant_was_given(const struct layer_grants *grants, uint64_t key)
{
	size_t i;

	for (i = 0; i < grants->given_cnt; i++) {
		if (grants->given[i] == key)
			return true;
	}
	return false;
}

void layer_grant_offer(struct layer_proto *proto, struct layer_conn *conn,
		       struct util_mr_map_entry *entry)
{
	struct layer_grant grant = {
		.key = entry->key,
		.base = entry->base,
		.len = entry->len,
		.access = entry->access & (FI_REMOTE_READ | FI_REMOTE_WRITE),
	};
	struct layer_grants *grants;
	struct layer_tx *tx;

	/* the core's RMA counts nothing at this end, and only a connection's own core
	 * endpoint carries it */
	if (!proto->core->has_direct_rma || proto->rem_write_cntr || proto->rem_read_cntr ||
	    conn->state != LAYER_CONN_CONNECTED || !conn->chan->core_ep)
		return;
	if (conn->grants && (layer_grant_was_given(conn->grants, entry->key) ||
			     conn->grants->given_cnt == LAYER_GRANT_MAX))
		return;
	/* a region that cannot be granted costs its requests no transmit entry */
	if (entry->iov_cnt != 1 ||
	    !layer_mr_core_name(proto->domain, entry, &grant.core_key, &grant.core_addr))
		return;
	grants = layer_grants_of(conn);
	tx = grants ? layer_tx_ctrl_new(proto, LAYER_OP_GRANT, 0, 0) : NULL;
	if (!tx)
		return;
	grants->given[grants->given_cnt++] = entry->key;
	memcpy(tx->inline_data, &grant, sizeof(grant));
	tx->iov[0].iov_len += sizeof(grant);
	FI_DBG(&layer_prov, FI_LOG_EP_DATA, "granting key %#" PRIx64 " on connection %p\n",
	       grant.key, (void *) conn);
	layer_tx_ctrl_send(proto, conn, tx);
}

/* The held grant of key on grants, or NULL. */
static struct layer_grant *layer_grant_held(struct layer_grants *grants, uint64_t key)
{
	size_t i;

	for (i = 0; i < grants->held_cnt; i++) {
		if (grants->held[i].key == key)
			return &grants->held[i];
	}
	return NULL;
}

void layer_grant_arrive(struct layer_proto *proto, struct layer_buf *buf)
{
	const struct layer_hdr *hdr = layer_buf_hdr(buf);
	struct layer_conn *conn = buf->ctx.chan->conn;
	struct layer_grants *grants = conn->grants;
	struct layer_grant grant, *held;

	if (hdr->op == LAYER_OP_REVOKE) {
		held = grants ? layer_grant_held(grants, hdr->data) : NULL;
		if (held)
			*held = grants->held[--grants->held_cnt];
		FI_DBG(&layer_prov, FI_LOG_EP_DATA, "key %#" PRIx64 " revoked\n", hdr->data);
		return;
	}
	/* this endpoint keeps its requests as messages (FI_OFI_LAYER_DIRECT_RMA=0) */
	if (!proto->core->has_direct_rma || !conn->chan->core_ep)
		return;
	memcpy(&grant, layer_buf_payload(buf), sizeof(grant));
	if ((grant.access & ~(uint64_t) (FI_REMOTE_READ | FI_REMOTE_WRITE)) ||
	    grant.base + grant.len < grant.base || grant.core_addr + grant.len < grant.core_addr) {
		layer_core_dropped(proto->core, buf, "a malformed grant");
		return;
	}
	grants = layer_grants_of(conn);
	if (!grants)
		return;
	held = layer_grant_held(grants, grant.key);
	if (!held) {
		if (grants->held_cnt == LAYER_GRANT_MAX) {
			layer_core_dropped(proto->core, buf, "a grant past the most a peer makes");
			return;
		}
		held = &grants->held[grants->held_cnt++];
	}
	*held = grant;
	FI_DBG(&layer_prov, FI_LOG_EP_DATA, "key %#" PRIx64 " granted: %" PRIu64 " bytes\n",
	       grant.key, grant.len);
}

void layer_grant_revoke(struct layer_proto *proto, uint64_t key)
{
	struct layer_grants *grants;
	struct layer_conn *conn;
	struct util_dlist *item;
	size_t i;

	util_dlist_foreach(&proto->conns->live, item) {
		conn = container_of(item, struct layer_conn, link);
		grants = conn->grants;
		if (!grants)
			continue;
		for (i = 0; i < grants->given_cnt; i++) {
			if (grants->given[i] != key)
				continue;
			grants->given[i] = grants->given[--grants->given_cnt];
			/* without memory, the peer's next write there ends the connection */
			if (layer_tx_ctrl_data(proto, conn, LAYER_OP_REVOKE, 0, 0, key))
				LAYER_WARN_ONCE(FI_LOG_EP_DATA, "no memory to revoke a grant\n");
			break;
		}
	}
}
