/*
 * The datagram transport's wire protocol as fi_layer(7) describes it, spoken by hand from a
 * plain UDP socket to an endpoint of udp;ofi_layer: what the endpoint acknowledges and how
 * (cumulative point, selective bitmap; at once for a duplicate or a hole), how it answers a
 * read request for memory nobody registered (an error in the answer), that an RST ends its
 * session and a datagram for a session it does not have is answered by RST, and that a peer
 * with a new session starts over. Nothing malformed — garbage, another version, a packet of
 * no known sender, a runt, a message of an unknown kind or of the wrong length, a packet of
 * no message — crashes it, stops it acknowledging, or keeps it from talking to a real peer
 * afterwards. Runs over udp;ofi_layer only (skipped otherwise).
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include <rdma/fi_tagged.h>

#include "layer/dgram/dgram_wire.h"
#include "tests/functional/common.h"

#define SESS_A 0x1234abcdu
#define SESS_B 0x5678ef01u
#define SESS_C 0x0badcafeu
#define WAIT_MS 3000
/* After the first answer, how long later ones are still taken (the latest counts). */
#define SETTLE_MS 50

static struct {
	int fd;
	struct sockaddr_in addr;       /* the socket's own */
	struct sockaddr_in layer;      /* the endpoint under test */
} raw;

struct dgram {
	struct layer_dg_hdr hdr;
	uint8_t body[512];
	size_t len;                    /* header included */
};

static void raw_send(const void *buf, size_t len)
{
	if (sendto(raw.fd, buf, len, 0, (const struct sockaddr *) &raw.layer, sizeof(raw.layer)) !=
	    (ssize_t) len)
		LT_CHECK(false, "raw send of %zu bytes", len);
}

/* A DATA datagram: session sess, packet seq, flags, then (SYN) our address and stream. */
static void send_data(uint32_t sess, uint32_t dst_sess, uint32_t seq, uint8_t flags,
		      const void *stream, size_t len)
{
	struct dgram d = { 0 };
	size_t off = 0;

	d.hdr = (struct layer_dg_hdr) {
		.version = LAYER_DG_VERSION,
		.type = LAYER_DG_DATA,
		.flags = flags,
		.src_sess = sess,
		.dst_sess = dst_sess,
		.seq = seq,
		.wnd = 64,
		.mtu = 1472,
	};
	if (flags & LAYER_DG_SYN) {
		memcpy(d.body, &raw.addr, sizeof(raw.addr));
		off = sizeof(raw.addr);
	}
	memcpy(d.body + off, stream, len);
	raw_send(&d, sizeof(d.hdr) + off + len);
}

/* A whole message in one packet's stream bytes: its header, then body. */
static size_t msg(uint8_t *out, uint8_t kind, uint64_t len, const void *body, size_t body_len)
{
	struct layer_dg_msg m = { .kind = kind, .len = len };

	memcpy(out, &m, sizeof(m));
	if (body_len)
		memcpy(out + sizeof(m), body, body_len);
	return sizeof(m) + body_len;
}

/* A PING (an empty message) as packet seq of session sess. */
static void send_ping(uint32_t sess, uint32_t seq, uint8_t flags)
{
	uint8_t s[64];

	send_data(sess, 0, seq, LAYER_DG_FIRST | LAYER_DG_LAST | flags, s,
		  msg(s, LAYER_DG_PING, 0, NULL, 0));
}

/*
 * The endpoint's answers, progressing it meanwhile: the latest datagram that satisfies want()
 * within WAIT_MS (and SETTLE_MS after the first), in d; false if none came.
 */
static bool latest(bool (*want)(const struct dgram *d, uint32_t arg), uint32_t arg,
		   struct dgram *d)
{
	uint64_t end = lt_now_ms() + WAIT_MS;
	struct pollfd pfd = { .fd = raw.fd, .events = POLLIN };
	struct dgram got;
	bool found = false;
	ssize_t n;

	while (lt_now_ms() < end) {
		lt_progress();
		if (poll(&pfd, 1, 1) <= 0)
			continue;
		n = recv(raw.fd, &got.hdr, sizeof(got.hdr) + sizeof(got.body), 0);
		if (n < (ssize_t) sizeof(got.hdr))
			continue;
		got.len = (size_t) n;
		if (!want(&got, arg))
			continue;
		*d = got;
		if (!found)
			end = lt_now_ms() + SETTLE_MS;
		found = true;
	}
	return found;
}

/* An acknowledgement to session arg (alone, or on a DATA packet). */
static bool is_ack_to(const struct dgram *d, uint32_t sess)
{
	return (d->hdr.type == LAYER_DG_ACK || d->hdr.type == LAYER_DG_DATA) &&
	       (d->hdr.flags & LAYER_DG_HAS_ACK) && d->hdr.dst_sess == sess;
}

static bool is_rst_to(const struct dgram *d, uint32_t sess)
{
	return d->hdr.type == LAYER_DG_RST && d->hdr.dst_sess == sess;
}

/* A DATA packet to session arg that starts a message. */
static bool is_data_to(const struct dgram *d, uint32_t sess)
{
	return d->hdr.type == LAYER_DG_DATA && d->hdr.dst_sess == sess &&
	       (d->hdr.flags & LAYER_DG_FIRST);
}

static bool is_anything(const struct dgram *d, uint32_t arg)
{
	(void) d;
	(void) arg;
	return true;
}

/* The latest acknowledgement to sess says ack and sack. */
static void check_ack(uint32_t sess, uint32_t ack, uint32_t sack, const char *what)
{
	struct dgram d;

	if (!LT_CHECK(latest(is_ack_to, sess, &d), "%s: acknowledged", what))
		return;
	LT_CHECK(d.hdr.ack == ack && d.hdr.sack == sack,
		 "%s: acknowledgement %u, bitmap %#x (got %u, %#x)", what, ack, sack, d.hdr.ack,
		 d.hdr.sack);
}

static void test_not_ours(void)
{
	struct layer_dg_hdr hdr = { .version = 99, .type = LAYER_DG_DATA };
	uint8_t s[64], short_syn[sizeof(hdr) + 2];
	struct dgram d;

	raw_send("junk!", 5);
	LT_CHECK(!latest(is_anything, 0, &d), "5 bytes of garbage: no answer");
	raw_send(&hdr, sizeof(hdr));
	LT_CHECK(!latest(is_anything, 0, &d), "another version: no answer");
	/* an unknown sender that does not say its address cannot be answered */
	send_data(SESS_A, 0, 0, LAYER_DG_FIRST | LAYER_DG_LAST, s,
		  msg(s, LAYER_DG_PING, 0, NULL, 0));
	LT_CHECK(!latest(is_anything, 0, &d), "a packet of no known sender: no answer");
	/* a SYN too short to hold the address */
	hdr = (struct layer_dg_hdr) { .version = LAYER_DG_VERSION, .type = LAYER_DG_DATA,
				      .flags = LAYER_DG_SYN, .src_sess = SESS_A };
	memset(short_syn, 0, sizeof(short_syn));
	memcpy(short_syn, &hdr, sizeof(hdr));
	raw_send(short_syn, sizeof(short_syn));
	LT_CHECK(!latest(is_anything, 0, &d), "a SYN without room for its address: no answer");
}

static uint32_t test_acks(void)
{
	struct dgram d;

	send_ping(SESS_A, 0, LAYER_DG_SYN);
	if (!LT_CHECK(latest(is_ack_to, SESS_A, &d), "a first packet (SYN) is acknowledged"))
		return 0;
	LT_CHECK(d.hdr.ack == 1 && !d.hdr.sack && d.hdr.version == LAYER_DG_VERSION &&
			 d.hdr.src_sess && d.hdr.wnd >= 2 && d.hdr.mtu >= 1472,
		 "its acknowledgement: 1, no bitmap, a session, a window (%u) and an mtu (%u)",
		 d.hdr.wnd, d.hdr.mtu);
	send_ping(SESS_A, 0, LAYER_DG_SYN);
	check_ack(SESS_A, 1, 0, "a duplicate");
	send_ping(SESS_A, 2, 0);
	check_ack(SESS_A, 1, 0x1, "packet 2 before 1 (a hole)");
	send_ping(SESS_A, 1, 0);
	check_ack(SESS_A, 3, 0, "packet 1 fills the hole");
	send_ping(SESS_A, 3 + 1000, 0);
	check_ack(SESS_A, 3, 0, "a packet far past the window");
	return d.hdr.src_sess;
}

static void test_malformed_stream(uint32_t layer_sess)
{
	uint8_t s[128], junk[16] = { 0 };
	struct layer_dg_rreq rreq = { .addr = 0x1000, .key = 12345, .len = 8 };
	struct layer_dg_msg m;
	struct dgram d;

	send_data(SESS_A, layer_sess, 3, LAYER_DG_FIRST | LAYER_DG_LAST, s,
		  msg(s, 99, 0, NULL, 0));
	check_ack(SESS_A, 4, 0, "a message of an unknown kind: taken (and dropped)");
	send_data(SESS_A, layer_sess, 4, LAYER_DG_LAST, junk, sizeof(junk));
	check_ack(SESS_A, 5, 0, "a packet of no message: taken (and dropped)");
	send_data(SESS_A, layer_sess, 5, LAYER_DG_FIRST | LAYER_DG_LAST, s,
		  msg(s, LAYER_DG_MSG, 1ull << 30, junk, sizeof(junk)));
	check_ack(SESS_A, 6, 0, "a message of the wrong length: taken (and dropped)");
	send_data(SESS_A, layer_sess, 6, LAYER_DG_FIRST | LAYER_DG_LAST, junk, 4);
	check_ack(SESS_A, 7, 0, "a runt message header: taken (and dropped)");
	send_data(SESS_A, layer_sess, 7, LAYER_DG_FIRST | LAYER_DG_LAST, s,
		  msg(s, LAYER_DG_RDATA, 0, NULL, 0));
	check_ack(SESS_A, 8, 0, "a read answer for no read: taken (and dropped)");
	send_data(SESS_A, layer_sess, 8, LAYER_DG_FIRST | LAYER_DG_LAST, s,
		  msg(s, LAYER_DG_RREQ, sizeof(rreq) - 1, &rreq, sizeof(rreq) - 1));
	check_ack(SESS_A, 9, 0, "a read request of the wrong size: taken (and dropped)");

	/* A read of memory nobody registered is answered, with an error and no data. */
	send_data(SESS_A, layer_sess, 9, LAYER_DG_FIRST | LAYER_DG_LAST, s,
		  msg(s, LAYER_DG_RREQ, sizeof(rreq), &rreq, sizeof(rreq)));
	if (!LT_CHECK(latest(is_data_to, SESS_A, &d), "a read of an unknown key is answered"))
		return;
	memcpy(&m, (uint8_t *) &d + sizeof(d.hdr), sizeof(m));
	LT_CHECK(d.len == sizeof(d.hdr) + sizeof(m) && (d.hdr.flags & LAYER_DG_LAST) &&
			 m.kind == LAYER_DG_RDATA && m.err && !m.len && d.hdr.ack == 10,
		 "the answer: one packet, RDATA, error %u (%s), no data, acknowledging the "
		 "request (%u)", m.err, fi_strerror((int) m.err), d.hdr.ack);
}

static void test_sessions(uint32_t layer_sess)
{
	struct layer_dg_hdr rst = { .version = LAYER_DG_VERSION, .type = LAYER_DG_RST };
	struct dgram d;
	uint8_t s[64];

	/* a packet for a session the endpoint never had */
	send_data(SESS_A, layer_sess ^ 0x5555, 10, LAYER_DG_FIRST | LAYER_DG_LAST, s,
		  msg(s, LAYER_DG_PING, 0, NULL, 0));
	if (LT_CHECK(latest(is_rst_to, SESS_A, &d),
		     "a packet for a session the endpoint does not have: answered by RST"))
		LT_CHECK(d.hdr.src_sess == layer_sess, "the RST names the endpoint's session");

	/* our RST ends its session: a new one of ours starts over from packet 0 */
	rst.src_sess = SESS_A;
	rst.dst_sess = layer_sess;
	raw_send(&rst, sizeof(rst));
	send_ping(SESS_B, 0, LAYER_DG_SYN);
	if (LT_CHECK(latest(is_ack_to, SESS_B, &d), "after an RST, a new session is taken"))
		LT_CHECK(d.hdr.ack == 1 && d.hdr.src_sess != layer_sess,
			 "from packet 0, with a new session of the endpoint's (%#x, was %#x)",
			 d.hdr.src_sess, layer_sess);

	/* a peer that shows up with another session (it restarted) starts over too */
	send_ping(SESS_C, 0, LAYER_DG_SYN);
	check_ack(SESS_C, 1, 0, "a peer back with a new session, no RST");
	/* and the old session's packets get an RST */
	send_data(SESS_B, d.hdr.src_sess, 1, LAYER_DG_FIRST | LAYER_DG_LAST, s,
		  msg(s, LAYER_DG_PING, 0, NULL, 0));
	LT_CHECK(!latest(is_ack_to, SESS_B, &d), "the old session's packets are not acknowledged");
}

/* The endpoint still talks to a real peer, both ways. */
static void test_still_works(struct lt_dom *dom, struct lt_ep *l)
{
	char sbuf[64] = "still here", rbuf[64] = "";
	struct fi_context2 sctx, rctx;
	fi_addr_t to_l, to_p;
	struct lt_comp comp;
	struct lt_ep p;

	if (!LT_CHECK_RET(lt_ep_open(dom, NULL, &p), 0, "a real peer") ||
	    !LT_CHECK_RET(lt_av_insert(&p, l->addr, &to_l), 0, "it inserts the endpoint") ||
	    !LT_CHECK_RET(lt_av_insert(l, p.addr, &to_p), 0, "the endpoint inserts it"))
		return;
	LT_CHECK_RET(LT_RETRY(fi_trecv(l->ep, rbuf, sizeof(rbuf), NULL, FI_ADDR_UNSPEC, 7, 0,
				       &rctx)), 0, "post a receive");
	LT_CHECK_RET(LT_RETRY(fi_tsend(p.ep, sbuf, sizeof(sbuf), NULL, to_l, 7, &sctx)), 0,
		     "the peer sends");
	LT_CHECK(lt_cq_next(&l->rx, &comp, LT_TIMEOUT_MS) && !comp.err &&
			 !strcmp(rbuf, "still here"), "the endpoint receives it");
	LT_CHECK(lt_cq_next(&p.tx, &comp, LT_TIMEOUT_MS) && !comp.err, "the send completes");
	LT_CHECK_RET(LT_RETRY(fi_trecv(p.ep, rbuf, sizeof(rbuf), NULL, FI_ADDR_UNSPEC, 8, 0,
				       &rctx)), 0, "the peer posts a receive");
	LT_CHECK_RET(LT_RETRY(fi_tsend(l->ep, sbuf, sizeof(sbuf), NULL, to_p, 8, &sctx)), 0,
		     "the endpoint answers");
	LT_CHECK(lt_cq_next(&p.rx, &comp, LT_TIMEOUT_MS) && !comp.err, "the peer receives it");
	LT_CHECK(lt_cq_next(&l->tx, &comp, LT_TIMEOUT_MS) && !comp.err, "the answer completes");
	lt_ep_close(&p);
}

int main(void)
{
	struct fi_info *hints, *info;
	struct lt_dom dom;
	struct lt_ep l;
	socklen_t len = sizeof(raw.addr);
	uint32_t layer_sess;

	lt_begin("test_dgram_wire");
	if (strcasecmp(lt_core_name(), "udp"))
		lt_skip("the datagram transport's wire protocol: over udp;ofi_layer only");
	hints = lt_hints(FI_MSG | FI_TAGGED);
	info = lt_getinfo_or_skip(hints);
	if (!LT_CHECK_RET(lt_dom_open(info, &dom), 0, "domain") ||
	    !LT_CHECK_RET(lt_ep_open(&dom, NULL, &l), 0, "the endpoint under test") ||
	    !LT_CHECK(l.addrlen == sizeof(raw.layer), "its address is a sockaddr_in"))
		return lt_end();
	memcpy(&raw.layer, l.addr, sizeof(raw.layer));
	raw.fd = socket(AF_INET, SOCK_DGRAM, 0);
	raw.addr = (struct sockaddr_in) { .sin_family = AF_INET,
					  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	if (!LT_CHECK(raw.fd >= 0 && !bind(raw.fd, (struct sockaddr *) &raw.addr,
					    sizeof(raw.addr)) &&
			      !getsockname(raw.fd, (struct sockaddr *) &raw.addr, &len),
		      "a plain UDP socket on 127.0.0.1"))
		return lt_end();

	test_not_ours();
	layer_sess = test_acks();
	if (layer_sess) {
		test_malformed_stream(layer_sess);
		test_sessions(layer_sess);
	}
	test_still_works(&dom, &l);

	close(raw.fd);
	lt_ep_close(&l);
	lt_dom_close(&dom);
	fi_freeinfo(info);
	fi_freeinfo(hints);
	return lt_end();
}
