/* Cross-memory attach between processes of one host (cma.h). */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <string.h>

#include "layer/cma/cma.h"
#include "layer/proto/rx.h"
#include "layer/proto/tx.h"

/* What this side says on conn: who it is, and whether it reads the peer. */
static void layer_cma_say(struct layer_proto *proto, struct layer_conn *conn)
{
	struct layer_cma_hello hello = { .flags = conn->cma_pid ? LAYER_CMA_READS : 0 };
	enum layer_op op = conn->chan->is_outgoing ? LAYER_OP_CMA : LAYER_OP_CMA_BACK;
	struct layer_tx *tx;

	if (util_cma_self(&hello.id))
		return;
	tx = layer_tx_ctrl_new(proto, op, 0, 0);
	/* without memory the peer stays away: everything still goes the core's way */
	if (!tx)
		return;
	memcpy(tx->inline_data, &hello, sizeof(hello));
	tx->iov[0].iov_len += sizeof(hello);
	conn->cma_is_said = true;
	conn->cma_said_reads = conn->cma_pid != 0;
	layer_tx_ctrl_send(proto, conn, tx);
}

void layer_cma_begin(struct layer_proto *proto, struct layer_conn *conn)
{
	if (layer_settings.cma_size && !conn->cma_is_said)
		layer_cma_say(proto, conn);
}

void layer_cma_start(struct layer_proto *proto, struct layer_conn *conn)
{
	if (!conn->chan->is_two_way)
		layer_cma_begin(proto, conn);
}

void layer_cma_arrive(struct layer_proto *proto, struct layer_buf *buf)
{
	struct layer_conn *conn = buf->ctx.chan->conn;
	struct layer_cma_hello hello;

	if (!layer_settings.cma_size)
		return;
	memcpy(&hello, layer_buf_payload(buf), sizeof(hello));
	conn->cma_is_read = hello.flags & LAYER_CMA_READS;
	if (!conn->cma_is_checked) {
		conn->cma_is_checked = true;
		if (util_cma_reaches(&hello.id)) {
			conn->cma_pid = (uint32_t) hello.id.pid;
			conn->cma_cookie_addr = hello.id.cookie_addr;
			conn->cma_cookie = hello.id.cookie;
		}
		FI_INFO(&layer_prov, FI_LOG_EP_CTRL, "peer %#" PRIx64 " (pid %" PRIu64 "): %s\n",
			(uint64_t) buf->src_addr, hello.id.pid,
			conn->cma_pid ? "on this host, its memory read by cross-memory attach" :
					"not reachable by cross-memory attach");
	}
	if (!conn->cma_is_said || conn->cma_said_reads != (conn->cma_pid != 0))
		layer_cma_say(proto, conn);
}

void layer_cma_name(struct layer_tx *tx, const struct iovec *iov, size_t iov_cnt,
		    struct layer_rts_seg *segs)
{
	size_t i;

	for (i = 0; i < iov_cnt; i++) {
		if (!iov[i].iov_len)
			continue;
		tx->reg[tx->reg_cnt] = NULL;
		segs[tx->reg_cnt++] = (struct layer_rts_seg) {
			.addr = (uint64_t) (uintptr_t) iov[i].iov_base,
			.len = iov[i].iov_len,
		};
	}
	tx->hdr.flags |= LAYER_HDR_CMA;
}

/*
 * The connection whose check names conn's peer: conn, or (over an RDM core, whose answers
 * come on the peer's first connection) another live connection to the same peer. NULL: none.
 */
static const struct layer_conn *layer_cma_checked(const struct layer_conn *conn)
{
	const struct layer_conn *other;
	struct util_dlist *item;

	if (likely(conn->cma_pid))
		return conn;
	util_dlist_foreach(&conn->peer->conns, item) {
		other = container_of(item, struct layer_conn, peer_link);
		if (other->cma_pid && other->state != LAYER_CONN_CLOSED)
			return other;
	}
	return NULL;
}

void layer_cma_copy(struct layer_proto *proto, struct layer_rx *rx)
{
	struct iovec local[LAYER_IOV_LIMIT + 1], remote[LAYER_RTS_MAX_SEGS + 1];
	const struct layer_conn *checked = layer_cma_checked(rx->conn);
	struct layer_conn *conn = rx->conn;
	uint32_t pid = checked ? checked->cma_pid : 0;
	uint64_t cookie = 0;
	size_t i;
	int ret;

	/* the peer's cookie first, in the same call: a pid the system gave another process
	 * since (the peer died meanwhile) fails the copy instead of delivering its bytes */
	local[0] = (struct iovec) { .iov_base = &cookie, .iov_len = sizeof(cookie) };
	memcpy(&local[1], rx->iov, rx->iov_cnt * sizeof(rx->iov[0]));
	remote[0].iov_base = (void *) (uintptr_t) (checked ? checked->cma_cookie_addr : 0);
	remote[0].iov_len = sizeof(cookie);
	for (i = 0; i < rx->seg_cnt; i++) {
		remote[i + 1].iov_base = (void *) (uintptr_t) rx->segs[i].addr;
		remote[i + 1].iov_len = rx->segs[i].len;
	}
	ret = pid ? util_cma_read((pid_t) pid, local, rx->iov_cnt + 1, remote, rx->seg_cnt + 1,
				  sizeof(cookie) + rx->read_len) :
		    -FI_EPERM;
	if (!ret && cookie != checked->cma_cookie)
		ret = -ESRCH;
	if (likely(!ret)) {
		rx->read_done = rx->read_len;
		return;
	}
	LAYER_WARN_ONCE(FI_LOG_EP_DATA, "cross-memory attach from pid %" PRIu32 " failed: %s "
			"(further failures logged at info level)\n", pid, fi_strerror(-ret));
	FI_INFO(&layer_prov, FI_LOG_EP_DATA, "copy of %zu bytes from pid %" PRIu32 ": %s\n",
		rx->read_len, pid, fi_strerror(-ret));
	rx->read_err = FI_EIO;
	/* the system refuses, or the peer is not what it was: it hears to send as before */
	if (ret != -FI_EFAULT && ret != -FI_EINVAL && conn->cma_pid &&
	    conn->state != LAYER_CONN_CLOSED) {
		conn->cma_pid = 0;
		layer_cma_say(proto, conn);
	}
}
