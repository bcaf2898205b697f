/*
 * The endpoint over a connected (MSG) core: a passive endpoint listens for peers, an outgoing
 * connection is a core endpoint of its own, opened on the first send to a peer, with the
 * requester's listening address and authorization key in its connection request; bounce
 * buffers are posted per connection; a connection that fails or shuts down fails what waits
 * on it. A request whose key the endpoint does not accept is rejected with the reason, and
 * the requester fails the connection's sends with FI_EACCES.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "layer/ep.h"
#include "layer/av.h"

_Static_assert(sizeof(((struct layer_hello *) 0)->addr) >= sizeof(struct sockaddr_in6),
	       "the hello holds a listening address (MSG cores have sockaddr addresses only)");

/*
 * Direct receive, over libfabric 1.17's tcp: the core domain takes a callback of ours
 * through fi_set_ops("ofix_dynamic_rbuf_v2"), an extension of tcp's own that rxm uses
 * (DESIGN.md has the facts checked on this platform). tcp then reads the first bytes of each
 * message into the buffer posted for it, calls back with the message's length, and reads the
 * rest into the iov the callback returns: an expected payload goes straight into the user's
 * buffer (proto.c: layer_proto_place), one copy in all on this side.
 * - Buffers post the header only: tcp does not cut a posted buffer to its message, so a
 *   longer one would swallow the next message's first bytes. Every message of the protocol
 *   starts with the whole header; a shorter one (a peer that is not ofi_layer) leaves the
 *   connection's stream broken, and the connection with it.
 * - The callback runs inside fi_cq_read on the endpoint's core CQ, so with ep->lock held
 *   (progress), and with tcp's endpoint lock: nothing in it calls the core.
 * - A callback error makes tcp fail the buffer and close the connection.
 * The two structures are libfabric's internal ABI (include/ofi_cq.h, 1.17), declared here:
 * only runtime 1.17, whose tcp has been checked, gets the extension.
 */
struct layer_core_rbuf_entry {
	void *op_context;          /* the posted buffer's context: our struct layer_rx_buf */
	uint64_t flags;
	size_t len;                /* the whole message, header included */
	void *buf;                 /* the posted buffer, holding the header */
	uint64_t data;
	uint64_t tag;
	void *ep_context;          /* the core endpoint's context: our struct layer_conn */
};

struct layer_core_rbuf_ops {
	size_t size;
	ssize_t (*get_rbuf)(struct layer_core_rbuf_entry *entry, struct iovec *iov,
			    size_t *count);
};

static ssize_t layer_msg_get_rbuf(struct layer_core_rbuf_entry *entry, struct iovec *iov,
				  size_t *count)
{
	struct layer_rx_buf *buf = entry->op_context;

	/* a runt (not from ofi_layer): its stream is lost already, close the connection */
	if (unlikely(entry->len < LAYER_HDR_SIZE))
		return -FI_EIO;
	buf->len = entry->len;
	return layer_proto_place(buf->conn->ep, buf, iov, count);
}

/* tcp keeps a pointer to it for the domain's life. */
static struct layer_core_rbuf_ops layer_msg_rbuf_ops = {
	.size = sizeof(layer_msg_rbuf_ops),
	.get_rbuf = layer_msg_get_rbuf,
};

bool layer_msg_direct_recv_init(struct layer_domain *domain)
{
	uint32_t version = fi_version();
	int ret;

	if (!layer_settings.direct_recv || FI_MAJOR(version) != 1 || FI_MINOR(version) != 17 ||
	    strcasecmp(domain->core_info->fabric_attr->prov_name, "tcp"))
		return false;
	ret = fi_set_ops(&domain->core_domain->fid, "ofix_dynamic_rbuf_v2", 0,
			 &layer_msg_rbuf_ops, NULL);
	if (ret) {
		FI_INFO(&layer_prov, FI_LOG_DOMAIN, "no direct receive: %s\n", fi_strerror(-ret));
		return false;
	}
	return true;
}

/*
 * The largest eager payload this endpoint's buffers take, as the handshake carries it (KiB,
 * rounded down); 0, from a peer that does not say, stands for the sender's own eager_size.
 */
static uint16_t layer_msg_rx_eager_kib(const struct layer_ep *ep)
{
	size_t bytes = ep->domain->has_direct_recv ? layer_settings.direct_eager_size :
						     layer_settings.eager_size;

	return (uint16_t) UTIL_MIN(bytes >> 10, UINT16_MAX);
}

/*
 * Buffers posted on a connection: incoming ones carry the peer's messages. On outgoing ones
 * control replies (rendezvous ACKs) arrive, and user data only once the peer has adopted
 * the connection (layer_conn_adopt): the rest of the buffers are posted then. The core
 * holds what finds no buffer.
 */
#define LAYER_CTRL_BUF_CNT 8

/*
 * Connection events are rare next to completions, and a core EQ read costs about as much as
 * a whole progress call that finds nothing (tcp: 0.7 us against 0.6 us, measured). The EQ
 * is read once ep->eq_period progress calls have passed since the last read, or once the
 * coarse clock has moved on (a kernel tick, 1 to 4 ms), whichever comes first. The period
 * is LAYER_EQ_PERIOD_MIN after an event and once this endpoint asks for a connection, and
 * doubles after each read that finds nothing, up to LAYER_EQ_PERIOD_MAX: an endpoint that
 * spins reads its EQ every few microseconds while connections are being made and a few
 * hundred times less often once they are, and one that makes progress seldom reads it on
 * each call. Blocking waits see the EQ's fd.
 */
#define LAYER_EQ_PERIOD_MIN 16
#define LAYER_EQ_PERIOD_MAX 256

/* Buffers a connection keeps posted: rx_buf_cnt, or a few while it carries control only. */
static inline size_t layer_msg_buf_target(const struct layer_conn *conn)
{
	return conn->is_ctrl_only ? UTIL_MIN(layer_settings.rx_buf_cnt, LAYER_CTRL_BUF_CNT) :
				    layer_settings.rx_buf_cnt;
}

static int layer_msg_post_buf_on(struct layer_conn *conn, struct layer_rx_buf *buf)
{
	struct layer_ep *ep = conn->ep;
	ssize_t ret;

	layer_buf_reset(buf, conn);
	/* Direct receive: the header only, the core asks for the rest (see above). */
	ret = fi_recv(conn->core_ep, buf->data,
		      ep->domain->has_direct_recv ? LAYER_HDR_SIZE : ep->buf_size, NULL,
		      FI_ADDR_UNSPEC, buf);
	if (ret)
		return (int) ret;
	util_dlist_insert_tail(&buf->link, &conn->posted_bufs);
	conn->posted_cnt++;
	return 0;
}

static int layer_msg_post_buf(struct layer_ep *ep, struct layer_conn *conn,
			      struct layer_rx_buf *buf)
{
	if (!conn || conn->state == LAYER_CONN_CLOSED || !conn->core_ep)
		return -FI_ENOTCONN;
	/* A buffer given back once a replacement went in goes to the pool. */
	if (conn->posted_cnt >= layer_msg_buf_target(conn))
		return -FI_EAGAIN;
	return layer_msg_post_buf_on(conn, buf);
}

static void layer_msg_refill(struct layer_ep *ep, size_t upto)
{
	struct layer_rx_buf *buf;
	struct util_dlist *item;
	struct layer_conn *conn;

	util_dlist_foreach(&ep->conns, item) {
		conn = container_of(item, struct layer_conn, link);
		if (conn->state == LAYER_CONN_CLOSED || !conn->core_ep)
			continue;
		while (conn->posted_cnt < UTIL_MIN(upto, layer_msg_buf_target(conn))) {
			buf = util_bufpool_get(&ep->buf_pool);
			if (!buf)
				return;
			if (layer_msg_post_buf_on(conn, buf)) {
				util_bufpool_put(&ep->buf_pool, buf);
				break;
			}
		}
	}
}

static void layer_msg_close_core_ep(struct layer_conn *conn)
{
	struct util_dlist *item;

	if (conn->core_ep) {
		fi_close(&conn->core_ep->fid);
		conn->core_ep = NULL;
	}
	while ((item = util_dlist_pop_front(&conn->posted_bufs)))
		layer_buf_put(conn->ep, container_of(item, struct layer_rx_buf, link));
	conn->posted_cnt = 0;
}

static int layer_msg_setup_core(struct layer_ep *ep, struct layer_conn *conn,
				struct fi_info *info)
{
	struct layer_rx_buf *buf;
	size_t i, buf_cnt;
	int ret;

	conn->is_ctrl_only = conn->is_outgoing;
	buf_cnt = layer_msg_buf_target(conn);

	ret = fi_endpoint(ep->domain->core_domain, info, &conn->core_ep, conn);
	if (ret)
		return ret;
	ret = fi_ep_bind(conn->core_ep, &ep->core_eq->fid, 0);
	if (ret)
		goto err_close_core_ep;
	ret = fi_ep_bind(conn->core_ep, &ep->core_cq->fid, FI_TRANSMIT | FI_RECV);
	if (ret)
		goto err_close_core_ep;
	ret = fi_enable(conn->core_ep);
	if (ret)
		goto err_close_core_ep;

	for (i = 0; i < buf_cnt; i++) {
		buf = util_bufpool_get(&ep->buf_pool);
		if (!buf) {
			ret = -FI_ENOMEM;
			goto err_close_core_ep;
		}
		ret = layer_msg_post_buf_on(conn, buf);
		if (ret) {
			util_bufpool_put(&ep->buf_pool, buf);
			goto err_close_core_ep;
		}
	}
	return 0;

err_close_core_ep:
	layer_msg_close_core_ep(conn);
	return ret;
}

/*
 * From here on ep->core_info is the template of outgoing connections: their sockets take
 * the listener's address but any port, or binding them to a port the listener holds (an
 * application that chose its port, fi_getinfo with a service) fails with EADDRINUSE.
 */
static void layer_msg_clear_src_port(struct fi_info *info)
{
	struct sockaddr *sa = info->src_addr;

	if (!sa)
		return;
	if (sa->sa_family == AF_INET && info->src_addrlen >= sizeof(struct sockaddr_in))
		((struct sockaddr_in *) sa)->sin_port = 0;
	else if (sa->sa_family == AF_INET6 && info->src_addrlen >= sizeof(struct sockaddr_in6))
		((struct sockaddr_in6 *) sa)->sin6_port = 0;
}

static int layer_msg_enable(struct layer_ep *ep)
{
	size_t addrlen = sizeof(ep->addr);
	uint8_t raw[LAYER_ADDR_MAX];
	int ret;

	ep->eq_period = LAYER_EQ_PERIOD_MIN;
	ret = fi_passive_ep(ep->domain->fabric->core_fabric, ep->core_info, &ep->core_pep, ep);
	if (ret)
		return ret;
	ret = fi_pep_bind(ep->core_pep, &ep->core_eq->fid, 0);
	if (ret)
		goto err_close_pep;
	ret = fi_listen(ep->core_pep);
	if (ret)
		goto err_close_pep;
	ret = fi_getname(&ep->core_pep->fid, raw, &addrlen);
	if (ret)
		goto err_close_pep;
	ret = layer_av_normalize(ep->domain->addr_format, raw, addrlen, ep->addr);
	if (ret)
		goto err_close_pep;
	ep->addrlen = ep->domain->addrlen;
	layer_msg_clear_src_port(ep->core_info);
	return 0;

err_close_pep:
	fi_close(&ep->core_pep->fid);
	ep->core_pep = NULL;
	return ret;
}

static int layer_msg_connect(struct layer_ep *ep, size_t index, const void *addr,
			     const struct layer_key *key, struct layer_conn **conn_out)
{
	struct layer_hello hello = {
		.magic = LAYER_HELLO_MAGIC,
		.version = LAYER_PROTO_VERSION,
		.addrlen = (uint8_t) ep->addrlen,
		.rx_eager_kib = layer_msg_rx_eager_kib(ep),
		.key_len = key->len,
	};
	struct layer_conn *conn;
	int ret;

	conn = layer_conn_alloc(ep, true);
	if (!conn)
		return -FI_ENOMEM;
	conn->peer_index = index;
	memcpy(conn->peer_addr, addr, ep->addrlen);
	memcpy(hello.addr, ep->addr, ep->addrlen);
	memcpy(hello.key, key->bytes, key->len);

	ret = layer_msg_setup_core(ep, conn, ep->core_info);
	if (ret)
		goto err_free_conn;
	/* without a key, the request is what it was before keys existed */
	ret = fi_connect(conn->core_ep, addr, &hello,
			 key->len ? sizeof(hello) : LAYER_HELLO_BASE_SIZE);
	/* its answer is an event: the EQ is watched closely again */
	ep->eq_period = LAYER_EQ_PERIOD_MIN;
	if (ret) {
		FI_WARN(&layer_prov, FI_LOG_EP_CTRL, "connect failed: %s\n", fi_strerror(-ret));
		layer_msg_close_core_ep(conn);
		goto err_free_conn;
	}
	*conn_out = conn;
	return 0;

err_free_conn:
	util_dlist_remove(&conn->link);
	free(conn);
	return ret;
}

/*
 * The key of a well-formed request: none when it ends after the address (a requester without
 * a key, or one from before keys) or has key_len 0; false when the key part is malformed.
 */
static bool layer_msg_hello_key(const struct layer_hello *hello, size_t len,
				struct layer_key *key)
{
	key->len = 0;
	if (len < sizeof(*hello))
		return len == LAYER_HELLO_BASE_SIZE;
	if (hello->key_len > LAYER_AUTH_KEY_MAX)
		return false;
	key->len = hello->key_len;
	memcpy(key->bytes, hello->key, key->len);
	return true;
}

static void layer_msg_handle_connreq(struct layer_ep *ep, struct fi_eq_cm_entry *entry,
				     size_t len)
{
	const struct layer_hello *hello = (const struct layer_hello *) entry->data;
	const struct layer_reject reject = {
		.magic = LAYER_HELLO_MAGIC,
		.version = LAYER_PROTO_VERSION,
		.reason = LAYER_REJECT_AUTH_KEY,
	};
	const struct layer_accept accept = {
		.magic = LAYER_HELLO_MAGIC,
		.version = LAYER_PROTO_VERSION,
		.rx_eager_kib = layer_msg_rx_eager_kib(ep),
	};
	struct layer_key key;
	struct layer_conn *conn;
	fi_addr_t key_handle;
	int ret;

	if (len < sizeof(*entry) + LAYER_HELLO_BASE_SIZE || hello->magic != LAYER_HELLO_MAGIC ||
	    hello->version != LAYER_PROTO_VERSION || hello->addrlen != ep->addrlen ||
	    !layer_msg_hello_key(hello, len - sizeof(*entry), &key)) {
		FI_WARN(&layer_prov, FI_LOG_EP_CTRL, "rejecting malformed connection request\n");
		fi_reject(ep->core_pep, entry->info->handle, NULL, 0);
		goto out;
	}
	/* Checked once here: everything on the connection is attributed to this key. */
	if (!layer_auth_accepts(ep, &key, &key_handle)) {
		layer_auth_refused(ep, "a connection request");
		fi_reject(ep->core_pep, entry->info->handle, &reject, sizeof(reject));
		goto out;
	}
	conn = layer_conn_alloc(ep, false);
	if (!conn) {
		fi_reject(ep->core_pep, entry->info->handle, NULL, 0);
		goto out;
	}
	memcpy(conn->peer_addr, hello->addr, ep->addrlen);
	conn->key = key_handle;
	conn->tx_eager = layer_conn_peer_eager((uint64_t) hello->rx_eager_kib << 10);
	ret = layer_msg_setup_core(ep, conn, entry->info);
	if (!ret)
		ret = fi_accept(conn->core_ep, &accept, sizeof(accept));
	if (!ret)
		layer_conn_adopt(ep, conn);
	if (ret) {
		FI_WARN(&layer_prov, FI_LOG_EP_CTRL, "accept failed: %s\n", fi_strerror(-ret));
		if (conn->core_ep)
			layer_msg_close_core_ep(conn);
		else
			fi_reject(ep->core_pep, entry->info->handle, NULL, 0);
		util_dlist_remove(&conn->link);
		free(conn);
	}
out:
	fi_freeinfo(entry->info);
}

/* Whether a failed connect was rejected for its key (struct layer_reject). */
static bool layer_msg_is_key_reject(const struct fi_eq_err_entry *err)
{
	struct layer_reject reject;

	if (err->err != FI_ECONNREFUSED || !err->err_data ||
	    err->err_data_size < sizeof(reject))
		return false;
	memcpy(&reject, err->err_data, sizeof(reject));
	return reject.magic == LAYER_HELLO_MAGIC && reject.reason == LAYER_REJECT_AUTH_KEY;
}

static void layer_msg_handle_eq_error(struct layer_ep *ep)
{
	struct fi_eq_err_entry err = { 0 };
	struct layer_conn *conn;

	if (fi_eq_readerr(ep->core_eq, &err, 0) != sizeof(err))
		return;
	if (!err.fid || err.fid == &ep->core_pep->fid) {
		FI_WARN(&layer_prov, FI_LOG_EP_CTRL, "listener error: %s\n",
			fi_strerror(err.err));
		return;
	}
	conn = err.fid->context;
	if (layer_msg_is_key_reject(&err)) {
		/* reported by the sends' error completions */
		FI_INFO(&layer_prov, FI_LOG_EP_CTRL, "connection refused: the peer does not "
			"accept this endpoint's authorization key\n");
		layer_conn_fail(conn, FI_EACCES);
		return;
	}
	FI_WARN(&layer_prov, FI_LOG_EP_CTRL, "connection failed: %s\n", fi_strerror(err.err));
	layer_conn_fail(conn, err.err ? err.err : FI_ECONNABORTED);
}

/* The acceptor says what its buffers take (a peer from before says nothing). */
static void layer_msg_handle_connected(struct layer_conn *conn,
				       const struct fi_eq_cm_entry *entry, size_t len)
{
	struct layer_accept accept;

	if (len >= sizeof(*entry) + sizeof(accept)) {
		memcpy(&accept, entry->data, sizeof(accept));
		if (accept.magic == LAYER_HELLO_MAGIC && accept.version == LAYER_PROTO_VERSION)
			conn->tx_eager = layer_conn_peer_eager((uint64_t) accept.rx_eager_kib << 10);
	}
	layer_conn_connected(conn);
}

/* Reads the core's connection events; whether there was any. */
static bool layer_msg_progress_events(struct layer_ep *ep)
{
	struct {
		struct fi_eq_cm_entry entry;
		uint8_t data[256];
	} ev;
	bool has_event = false;
	uint32_t event;
	ssize_t ret;

	for (;; has_event = true) {
		ret = fi_eq_read(ep->core_eq, &event, &ev, sizeof(ev), 0);
		if (ret == -FI_EAVAIL) {
			layer_msg_handle_eq_error(ep);
			continue;
		}
		if (ret < 0)
			return has_event;
		switch (event) {
		case FI_CONNREQ:
			layer_msg_handle_connreq(ep, &ev.entry, (size_t) ret);
			break;
		case FI_CONNECTED:
			layer_msg_handle_connected(ev.entry.fid->context, &ev.entry, (size_t) ret);
			break;
		case FI_SHUTDOWN:
			layer_conn_fail(ev.entry.fid->context, FI_ECONNRESET);
			break;
		default:
			FI_WARN(&layer_prov, FI_LOG_EP_CTRL, "unexpected core event %u\n", event);
			break;
		}
	}
}

static void layer_msg_progress_cq(struct layer_ep *ep)
{
	struct fi_cq_msg_entry comp[64];
	struct fi_cq_err_entry err;
	size_t batch = UTIL_MIN(layer_settings.cq_batch, UTIL_ARRAY_SIZE(comp));
	ssize_t ret, i;

	for (;;) {
		ret = fi_cq_read(ep->core_cq, comp, batch);
		if (ret == -FI_EAVAIL) {
			memset(&err, 0, sizeof(err));
			if (fi_cq_readerr(ep->core_cq, &err, 0) == 1)
				layer_proto_handle_error(ep, &err);
			continue;
		}
		if (ret <= 0)
			return;
		for (i = 0; i < ret; i++)
			layer_proto_handle_comp(ep, &comp[i]);
		if ((size_t) ret < batch)
			return;
	}
}

static void layer_msg_progress(struct layer_ep *ep)
{
	uint64_t now = util_coarse_ns();

	if (++ep->eq_calls >= ep->eq_period || now != ep->eq_read_ns) {
		ep->eq_calls = 0;
		ep->eq_read_ns = now;
		if (layer_msg_progress_events(ep))
			ep->eq_period = LAYER_EQ_PERIOD_MIN;
		else if (ep->eq_period < LAYER_EQ_PERIOD_MAX)
			ep->eq_period <<= 1;
	}
	layer_msg_progress_cq(ep);
}

static int layer_msg_trywait(struct layer_ep *ep)
{
	struct fid *fids[2] = { &ep->core_cq->fid, &ep->core_eq->fid };

	/* Nothing to sleep on: the core CQ has no wait fd. */
	if (ep->core_cq_fd < 0)
		return -FI_EAGAIN;
	return fi_trywait(ep->domain->fabric->core_fabric, fids, 2);
}

static void layer_msg_conn_closing(struct layer_conn *conn)
{
	if (conn->core_ep) {
		fi_close(&conn->core_ep->fid);
		conn->core_ep = NULL;
	}
}

/* A connected core's errors are the connection's: it is closed, its operations fail. */
static void layer_msg_op_failed(struct layer_conn *conn, const struct layer_tx *tx, int err)
{
	if (tx && conn->state != LAYER_CONN_CLOSED)
		layer_conn_fail(conn, err);
}

/* A PACE applies to the connection it came on, the one sends to that peer take. */
static void layer_msg_handle_pace(struct layer_conn *conn, bool is_paced)
{
	layer_proto_set_paced(conn, is_paced);
}

/* ACKs come back on the connection the message went out on. */
static void layer_msg_handle_ack(struct layer_conn *conn, const struct layer_hdr *hdr)
{
	if (layer_rndv_take_ack(conn, hdr))
		return;
	FI_WARN(&layer_prov, FI_LOG_EP_DATA, "dropping ack for unknown message %lu\n",
		(unsigned long) hdr->msg_id);
	conn->ep->dropped_cnt++;
}

static void layer_msg_close(struct layer_ep *ep)
{
	struct util_dlist *item;

	util_dlist_foreach(&ep->conns, item)
		layer_msg_close_core_ep(container_of(item, struct layer_conn, link));
	if (ep->core_pep) {
		fi_close(&ep->core_pep->fid);
		ep->core_pep = NULL;
	}
}

const struct layer_core_ops layer_core_msg_ops = {
	.has_shared_ep = false,
	.enable = layer_msg_enable,
	.close = layer_msg_close,
	.connect = layer_msg_connect,
	.progress = layer_msg_progress,
	.trywait = layer_msg_trywait,
	.post_buf = layer_msg_post_buf,
	.refill = layer_msg_refill,
	.conn_closing = layer_msg_conn_closing,
	.op_failed = layer_msg_op_failed,
	.handle_ack = layer_msg_handle_ack,
	.handle_pace = layer_msg_handle_pace,
};
