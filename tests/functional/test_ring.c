/*
 * Rings (fi_layer(7), "Rings"): over tcp's MSG endpoints the two sides of a busy connection
 * lend each other slots that the peer's core fills with its short messages by RMA writes, in
 * one stream with the messages that go as messages. A raw tcp MSG endpoint plays the peer,
 * with a ring of its own:
 * - once connected it offers 4 slots (RING_OFFER); the layer accepts, lending
 *   FI_OFI_LAYER_RING_SLOTS back (RING_ACCEPT, rounded down to a power of two; 0: it
 *   refuses with RING_RELEASE, and the test ends there);
 * - the layer joins a group of itself and the raw peer: the join's message is larger than a
 *   slot and comes as a message, which the raw peer sends back (it carries what the layer's
 *   own contribution does, so the join completes);
 * - ten barriers: each barrier's message lands in the raw peer's next slot (numbered from 1,
 *   one message before it, an eager collective message of this protocol version), and the
 *   raw peer writes it back into the layer's next slot, telling the layer how many it took:
 *   the layer's messages go round the raw peer's four slots, never past what was taken;
 * - order: a message, two slots, a message go into the layer's receives in the order sent
 *   (the last one, whose header says two slots went before it, is taken after them although
 *   they are in place when its header arrives: with direct receive it is not matched then);
 * - kept answers: the raw peer writes one slot holding two messages, a read of 8 bytes of the
 *   layer's memory and a message; the progress call that hands the message up keeps the
 *   read's answer (READ_RESP, the 8 bytes in its header), which leaves with the layer's next
 *   send in one slot of the raw ring (a GRANT of the region may come first, in a slot before;
 *   later, the REVOKE of the closed region). The raw peer waits without making the layer
 *   progress;
 * - a slot placed while the endpoint is asked whether its caller may sleep (fi_trywait reads
 *   the core's CQ, which reads the sockets): it says not to, or its fd wakes the caller;
 * - once the CQ's fd is handed out (a thread may sleep on it), nothing is kept: the answer
 *   to the same pair leaves at the end of the call that handed the message up, alone;
 * - the raw peer gives the ring back (RING_RELEASE): the layer answers in kind and holds no
 *   ring any more (FI_OPT_LAYER_RING_COUNT); the raw peer offers again, and the layer's new
 *   ring carries on where the first stopped;
 * - a slot no ofi_layer writes (its first message longer than the slot's bytes: a reader that
 *   believed it would read past the slot, past the region at its end) closes the connection
 *   with one warning; the group's next barrier fails with an error, and the endpoint closes.
 */
#include <arpa/inet.h>
#include <inttypes.h>
#include <poll.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>
#include <rdma/fi_collective.h>
#include <rdma/fi_rma.h>

#include "layer/core/ring.h"
#include "layer/core/wire.h"
#include "tests/functional/common.h"

#define RAW_SLOTS 4u
#define BARRIERS 10

struct layer_side {
	struct fi_info *info;
	struct fid_fabric *fabric;
	struct fid_domain *domain;
	struct fid_ep *ep;
	struct fid_cq *cq;
	struct fid_av *av;
	struct fid_eq *eq;
	struct sockaddr_in addr;
};

struct raw_side {
	struct fi_info *info;
	struct fid_fabric *fabric;
	struct fid_domain *domain;
	struct fid_ep *ep;
	struct fid_cq *cq;
	struct fid_eq *eq;
	struct fid_mr *mr;
	uint8_t *region;               /* struct layer_ring_ctl, then RAW_SLOTS slots */
	struct layer_ring_offer own;   /* lent to the layer */
	struct layer_ring_offer layer; /* the layer's, from its RING_ACCEPT */
	uint64_t tx_data;              /* the layer's id of the connection, sent as remote CQ
					* data when its acceptance asks for it */
	uint32_t taken;                /* the layer's messages taken from our slots */
	uint32_t written;              /* messages written into the layer's slots */
	uint32_t msgs_sent;            /* messages sent as messages */
	uint8_t rbuf[4096] __attribute__((aligned(8))); /* messages that do not fit a slot */
	uint8_t msg[4096] __attribute__((aligned(8)));  /* the last one, rbuf posted again */
};

static void open_layer(struct layer_side *l)
{
	struct fi_info *hints = lt_hints(FI_MSG | FI_COLLECTIVE | FI_RMA);
	struct fi_cq_attr cq_attr = { .format = FI_CQ_FORMAT_DATA, .wait_obj = FI_WAIT_FD };
	struct fi_av_attr av_attr = { .type = FI_AV_TABLE };
	struct fi_eq_attr eq_attr = { .wait_obj = FI_WAIT_UNSPEC };
	size_t addrlen = sizeof(l->addr);

	/* the layer side answers only when this program progresses it: the slots it keeps and
	 * writes are checked one by one */
	hints->domain_attr->data_progress = FI_PROGRESS_MANUAL;
	hints->domain_attr->control_progress = FI_PROGRESS_MANUAL;
	l->info = lt_getinfo_or_skip(hints);
	fi_freeinfo(hints);
	LT_CHECK_RET(fi_fabric(l->info->fabric_attr, &l->fabric, NULL), 0, "fabric");
	LT_CHECK_RET(fi_domain(l->fabric, l->info, &l->domain, NULL), 0, "domain");
	LT_CHECK_RET(fi_endpoint(l->domain, l->info, &l->ep, NULL), 0, "endpoint");
	LT_CHECK_RET(fi_cq_open(l->domain, &cq_attr, &l->cq, NULL), 0, "cq");
	LT_CHECK_RET(fi_av_open(l->domain, &av_attr, &l->av, NULL), 0, "av");
	LT_CHECK_RET(fi_eq_open(l->fabric, &eq_attr, &l->eq, NULL), 0, "eq");
	LT_CHECK_RET(fi_ep_bind(l->ep, &l->cq->fid, FI_TRANSMIT | FI_RECV), 0, "bind cq");
	LT_CHECK_RET(fi_ep_bind(l->ep, &l->av->fid, 0), 0, "bind av");
	LT_CHECK_RET(fi_ep_bind(l->ep, &l->eq->fid, 0), 0, "bind eq");
	LT_CHECK_RET(fi_enable(l->ep), 0, "enable");
	LT_CHECK_RET(fi_getname(&l->ep->fid, &l->addr, &addrlen), 0, "getname");
}

static void close_layer(struct layer_side *l)
{
	LT_CHECK_RET(fi_close(&l->ep->fid), 0, "the endpoint closes");
	fi_close(&l->av->fid);
	fi_close(&l->cq->fid);
	fi_close(&l->eq->fid);
	fi_close(&l->domain->fid);
	fi_close(&l->fabric->fid);
	fi_freeinfo(l->info);
}

/* A tcp MSG endpoint with RMA, and a registered region of RAW_SLOTS slots. */
static void open_raw(struct raw_side *r)
{
	struct fi_info *hints = fi_allocinfo();
	struct fi_cq_attr cq_attr = { .format = FI_CQ_FORMAT_MSG };
	struct fi_eq_attr eq_attr = { .wait_obj = FI_WAIT_UNSPEC };
	size_t len = sizeof(struct layer_ring_ctl) + RAW_SLOTS * LAYER_RING_SLOT;

	hints->ep_attr->type = FI_EP_MSG;
	hints->caps = FI_MSG | FI_RMA;
	hints->addr_format = FI_SOCKADDR_IN;
	hints->domain_attr->mr_mode = FI_MR_VIRT_ADDR | FI_MR_PROV_KEY | FI_MR_ALLOCATED;
	hints->fabric_attr->prov_name = strdup("tcp");
	LT_CHECK_RET(fi_getinfo(LT_FI_VERSION, LT_NODE, NULL, FI_SOURCE, hints, &r->info), 0,
		     "raw tcp getinfo");
	fi_freeinfo(hints);
	LT_CHECK_RET(fi_fabric(r->info->fabric_attr, &r->fabric, NULL), 0, "raw fabric");
	LT_CHECK_RET(fi_domain(r->fabric, r->info, &r->domain, NULL), 0, "raw domain");
	LT_CHECK_RET(fi_cq_open(r->domain, &cq_attr, &r->cq, NULL), 0, "raw cq");
	LT_CHECK_RET(fi_eq_open(r->fabric, &eq_attr, &r->eq, NULL), 0, "raw eq");
	r->region = aligned_alloc(4096, 4096);
	memset(r->region, 0, 4096);
	LT_CHECK_RET(fi_mr_reg(r->domain, r->region, len, FI_REMOTE_WRITE, 0, 0, 0, &r->mr, NULL),
		     0, "raw region registered");
	r->own.addr = r->info->domain_attr->mr_mode & FI_MR_VIRT_ADDR ?
		      (uint64_t) (uintptr_t) r->region : 0;
	r->own.key = fi_mr_key(r->mr);
	r->own.slots = RAW_SLOTS;
}

static void close_raw(struct raw_side *r)
{
	if (r->ep)
		fi_close(&r->ep->fid);
	fi_close(&r->mr->fid);
	fi_close(&r->cq->fid);
	fi_close(&r->eq->fid);
	fi_close(&r->domain->fid);
	fi_close(&r->fabric->fid);
	fi_freeinfo(r->info);
	free(r->region);
}

/* Reads the layer's CQ (its progress); the completion, if any, in comp. */
static ssize_t layer_poll(struct layer_side *l, struct fi_cq_data_entry *comp)
{
	struct fi_cq_err_entry err = { 0 };
	ssize_t ret;

	ret = fi_cq_read(l->cq, comp, 1);
	if (ret == -FI_EAVAIL && fi_cq_readerr(l->cq, &err, 0) == 1) {
		comp->op_context = err.op_context;
		comp->flags = err.flags;
		return -err.err;
	}
	return ret;
}

/* Connects the raw endpoint, its handshake naming addr as its listening address. */
static bool raw_connect(struct layer_side *l, struct raw_side *r, const struct sockaddr_in *addr)
{
	struct layer_hello hello = {
		.magic = LAYER_HELLO_MAGIC,
		.version = LAYER_PROTO_VERSION,
		.addrlen = sizeof(*addr),
	};
	struct {
		struct fi_eq_cm_entry entry;
		struct layer_accept accept;
	} ev;
	uint64_t deadline = lt_now_ms() + LT_TIMEOUT_MS;
	struct fi_cq_data_entry comp;
	uint32_t event;
	ssize_t ret;

	memcpy(hello.addr, addr, sizeof(*addr));
	LT_CHECK_RET(fi_endpoint(r->domain, r->info, &r->ep, NULL), 0, "raw endpoint");
	LT_CHECK_RET(fi_ep_bind(r->ep, &r->eq->fid, 0), 0, "raw bind eq");
	LT_CHECK_RET(fi_ep_bind(r->ep, &r->cq->fid, FI_TRANSMIT | FI_RECV), 0, "raw bind cq");
	LT_CHECK_RET(fi_enable(r->ep), 0, "raw enable");
	LT_CHECK_RET(fi_recv(r->ep, r->rbuf, sizeof(r->rbuf), NULL, 0, r->rbuf), 0, "raw recv");
	LT_CHECK_RET(fi_connect(r->ep, &l->addr, &hello, sizeof(hello)), 0, "raw connect");
	while (lt_now_ms() < deadline) {
		layer_poll(l, &comp);
		ret = fi_eq_read(r->eq, &event, &ev, sizeof(ev), 0);
		if (ret == -FI_EAGAIN)
			continue;
		if (!LT_CHECK(ret == sizeof(ev) && event == FI_CONNECTED,
			      "the layer accepts (%zd, event %u)", ret, event))
			return false;
		r->tx_data = ev.accept.rx_id;
		return true;
	}
	return LT_CHECK(false, "the layer answers the connection request");
}

/* Waits for the layer's next message in the raw ring; its slot then. */
static uint8_t *raw_wait_slot(struct layer_side *l, struct raw_side *r)
{
	uint8_t *slot = r->region + sizeof(struct layer_ring_ctl) +
			(r->taken % RAW_SLOTS) * LAYER_RING_SLOT;
	const volatile struct layer_ring_trailer *trailer =
		(const struct layer_ring_trailer *) (slot + LAYER_RING_MSG_MAX);
	uint64_t deadline = lt_now_ms() + LT_TIMEOUT_MS;
	struct fi_cq_data_entry comp;

	while (trailer->num != r->taken + 1 && lt_now_ms() < deadline) {
		layer_poll(l, &comp);
		fi_cq_read(r->cq, NULL, 0);
	}
	if (trailer->num != r->taken + 1)
		return NULL;
	r->taken++;
	return slot;
}

/* Writes slot (header, payload, trailer) into the layer's next slot, numbered, once the
 * layer said it took the slot's previous lap. */
static void raw_write_slot(struct layer_side *l, struct raw_side *r, uint8_t *slot,
			   uint32_t len)
{
	struct layer_ring_trailer *trailer = (struct layer_ring_trailer *) (slot +
									    LAYER_RING_MSG_MAX);
	const volatile struct layer_ring_ctl *ctl = (const struct layer_ring_ctl *) r->region;
	uint64_t off = sizeof(struct layer_ring_ctl) +
		       (uint64_t) (r->written % r->layer.slots) * LAYER_RING_SLOT;
	uint64_t deadline = lt_now_ms() + LT_TIMEOUT_MS;

	/* progress only: the completions are the caller's to read */
	while (r->written - ctl->taken >= r->layer.slots && lt_now_ms() < deadline) {
		fi_cq_read(l->cq, NULL, 0);
		fi_cq_read(r->cq, NULL, 0);
	}
	LT_CHECK(r->written - ctl->taken < r->layer.slots, "the layer frees its slot %u",
		 r->written % r->layer.slots);

	trailer->len = len;
	trailer->msgs = r->msgs_sent;
	trailer->num = ++r->written;
	LT_CHECK_RET(fi_inject_write(r->ep, slot, LAYER_RING_SLOT, 0, r->layer.addr + off,
				     r->layer.key), 0, "raw write of slot %u", r->written);
}

/* Waits for the layer's next message in the raw ring without making the layer progress. */
static uint8_t *raw_wait_slot_alone(struct raw_side *r)
{
	uint8_t *slot = r->region + sizeof(struct layer_ring_ctl) +
			(r->taken % RAW_SLOTS) * LAYER_RING_SLOT;
	const volatile struct layer_ring_trailer *trailer =
		(const struct layer_ring_trailer *) (slot + LAYER_RING_MSG_MAX);
	uint64_t deadline = lt_now_ms() + LT_TIMEOUT_MS;

	while (trailer->num != r->taken + 1 && lt_now_ms() < deadline)
		fi_cq_read(r->cq, NULL, 0);
	if (trailer->num != r->taken + 1)
		return NULL;
	r->taken++;
	return slot;
}

/* Tells the layer how many of its messages the raw peer took. */
static void raw_tell(struct raw_side *r)
{
	LT_CHECK_RET(fi_inject_write(r->ep, &r->taken, sizeof(r->taken), 0,
				     r->layer.addr + offsetof(struct layer_ring_ctl, taken),
				     r->layer.key), 0, "raw tells what it took");
}

/* The layer's next collective message, written back to it (it completes what it waits
 * for: the message carries what the layer's own contribution does). */
static bool raw_echo(struct layer_side *l, struct raw_side *r, const char *what)
{
	uint8_t copy[LAYER_RING_SLOT] __attribute__((aligned(8)));
	const struct layer_hdr *hdr = (const struct layer_hdr *) copy;
	const struct layer_ring_trailer *trailer;
	uint8_t *slot = raw_wait_slot(l, r);
	uint32_t len;

	if (!LT_CHECK(slot, "%s: the layer's message is in the raw peer's slot %u", what,
		      r->taken % RAW_SLOTS))
		return false;
	memcpy(copy, slot, sizeof(copy));
	trailer = (const struct layer_ring_trailer *) (copy + LAYER_RING_MSG_MAX);
	len = trailer->len;
	if (!LT_CHECK(len >= sizeof(*hdr) && len <= LAYER_RING_MSG_MAX &&
		      hdr->version == LAYER_PROTO_VERSION && hdr->op == LAYER_OP_EAGER &&
		      (hdr->flags & LAYER_HDR_COLL) && hdr->size == len - sizeof(*hdr) &&
		      trailer->msgs == 2, "%s: an eager collective message of this version, the "
		      "acceptance and the join's message before it (%u bytes, op %u, flags %#x, %u "
		      "messages before)",
		      what, len, hdr->op, hdr->flags, trailer->msgs))
		return false;
	raw_write_slot(l, r, copy, len);
	raw_tell(r);
	return true;
}

/* Waits for the layer's completion of context; its error (0, or a positive errno). */
static int layer_wait(struct layer_side *l, struct raw_side *r, void *context)
{
	uint64_t deadline = lt_now_ms() + LT_TIMEOUT_MS;
	struct fi_cq_data_entry comp;
	ssize_t ret;

	while (lt_now_ms() < deadline) {
		ret = layer_poll(l, &comp);
		fi_cq_read(r->cq, NULL, 0);
		if (ret == -FI_EAGAIN)
			continue;
		if (comp.op_context == context)
			return ret < 0 ? (int) -ret : 0;
	}
	return ETIMEDOUT;
}

/* An eager message of the application's, with text as its payload. */
static uint32_t raw_eager(struct raw_side *r, uint8_t *buf, const char *text)
{
	struct layer_hdr hdr = {
		.version = LAYER_PROTO_VERSION,
		.op = LAYER_OP_EAGER,
		.key_slot = (uint16_t) r->written, /* as a message: the slots before it */
		.size = strlen(text) + 1,
	};

	memcpy(buf, &hdr, sizeof(hdr));
	memcpy(buf + sizeof(hdr), text, hdr.size);
	return (uint32_t) (sizeof(hdr) + hdr.size);
}

/* A message as a message (with the layer's id when it asks for it). */
static void raw_inject(struct layer_side *l, struct raw_side *r, const void *buf, size_t len,
		       const char *what)
{
	ssize_t ret;

	while ((ret = fi_injectdata(r->ep, buf, len, r->tx_data, 0)) == -FI_EAGAIN) {
		fi_cq_read(l->cq, NULL, 0);
		fi_cq_read(r->cq, NULL, 0);
	}
	LT_CHECK_RET(ret, 0, "raw message \"%s\"", what);
	r->msgs_sent++;
}

/* The layer's next message as a message, copied into r->msg (rbuf posted again): its
 * length, or -1. */
static ssize_t raw_recv_msg(struct layer_side *l, struct raw_side *r)
{
	uint64_t deadline = lt_now_ms() + LT_TIMEOUT_MS;
	struct fi_cq_data_entry lcomp;
	struct fi_cq_msg_entry comp;

	while (lt_now_ms() < deadline) {
		layer_poll(l, &lcomp);
		if (fi_cq_read(r->cq, &comp, 1) != 1 || !(comp.flags & FI_RECV))
			continue;
		memcpy(r->msg, r->rbuf, comp.len);
		LT_CHECK_RET(fi_recv(r->ep, r->rbuf, sizeof(r->rbuf), NULL, 0, r->rbuf), 0,
			     "raw recv again");
		return (ssize_t) comp.len;
	}
	return -1;
}

/* A message larger than an inject, as a message; waits for its completion. */
static void raw_inject_big(struct layer_side *l, struct raw_side *r, const void *buf,
			   size_t len)
{
	uint64_t deadline = lt_now_ms() + LT_TIMEOUT_MS;
	struct fi_cq_data_entry lcomp;
	struct fi_cq_msg_entry comp;

	if (!LT_CHECK_RET(fi_senddata(r->ep, buf, len, NULL, r->tx_data, 0, NULL), 0,
			  "raw send back"))
		return;
	r->msgs_sent++;
	while (lt_now_ms() < deadline) {
		layer_poll(l, &lcomp);
		if (fi_cq_read(r->cq, &comp, 1) == 1 && (comp.flags & FI_SEND))
			return;
	}
	LT_CHECK(false, "the raw send completes");
}

/* The raw peer offers its ring (RING_OFFER, as a message after the slots it wrote): the op of
 * the layer's answer, its offer in r->layer when it accepts. */
static unsigned raw_offer(struct layer_side *l, struct raw_side *r)
{
	struct {
		struct layer_hdr hdr;
		struct layer_ring_offer offer;
	} msg = {
		.hdr = {
			.version = LAYER_PROTO_VERSION,
			.op = LAYER_OP_RING_OFFER,
			.key_slot = (uint16_t) r->written,
		},
		.offer = r->own,
	};
	const struct layer_hdr *hdr = (const struct layer_hdr *) r->msg;
	ssize_t len;

	raw_inject(l, r, &msg, sizeof(msg), "ring-offer");
	len = raw_recv_msg(l, r);
	if (!LT_CHECK(len >= (ssize_t) sizeof(*hdr), "the layer answers the offer (%zd)", len))
		return 0;
	if (hdr->op == LAYER_OP_RING_ACCEPT &&
	    LT_CHECK(len == sizeof(msg), "RING_ACCEPT carries the layer's ring (%zd bytes)", len))
		memcpy(&r->layer, r->msg + sizeof(*hdr), sizeof(r->layer));
	return hdr->op;
}

/* The join's message (larger than a slot), sent back as a message. */
static bool raw_echo_msg(struct layer_side *l, struct raw_side *r)
{
	const struct layer_hdr *hdr = (const struct layer_hdr *) r->msg;
	ssize_t len = raw_recv_msg(l, r);

	if (!LT_CHECK(len > (ssize_t) LAYER_RING_MSG_MAX && hdr->op == LAYER_OP_EAGER &&
		      (hdr->flags & LAYER_HDR_COLL), "the join's message (%zd bytes) comes "
		      "as a message, too large for a slot", len))
		return false;
	raw_inject_big(l, r, r->msg, (size_t) len);
	return true;
}

static const char *op_name(unsigned op)
{
	return op == LAYER_OP_RING_ACCEPT ? "ring-accept" :
	       op == LAYER_OP_RING_RELEASE ? "ring-release" : "another op";
}

static uint64_t ring_count(struct layer_side *l)
{
	uint64_t cnt = UINT64_MAX;
	size_t len = sizeof(cnt);

	LT_CHECK_RET(fi_getopt(&l->ep->fid, FI_OPT_ENDPOINT, FI_OPT_LAYER_RING_COUNT, &cnt,
			       &len), 0, "FI_OPT_LAYER_RING_COUNT");
	return cnt;
}

static void raw_send_msg(struct layer_side *l, struct raw_side *r, const char *text)
{
	uint8_t buf[LAYER_RING_SLOT] __attribute__((aligned(8)));
	uint32_t len = raw_eager(r, buf, text);

	raw_inject(l, r, buf, len, text);
}

static void raw_send_slot(struct layer_side *l, struct raw_side *r, const char *text)
{
	uint8_t slot[LAYER_RING_SLOT] __attribute__((aligned(8))) = { 0 };

	raw_write_slot(l, r, slot, raw_eager(r, slot, text));
}

/*
 * Four messages, two as messages and two in slots, go into the layer's receives in the order
 * sent: a slot after a message (it waits for the message), a message after a slot (taken
 * only after it, though its header comes in while the slot is there already).
 */
static void check_order(struct layer_side *l, struct raw_side *r, fi_addr_t peer)
{
	static const char *const texts[] = { "first", "second", "third", "fourth" };
	struct fi_cq_data_entry comp;
	char rbuf[4][64];
	size_t i, got = 0, right = 0;
	uint64_t deadline;
	ssize_t ret;

	for (i = 0; i < 4; i++)
		LT_CHECK_RET(fi_recv(l->ep, rbuf[i], sizeof(rbuf[i]), NULL, peer, rbuf[i]), 0,
			     "receive %zu posted", i);
	raw_send_msg(l, r, texts[0]);
	raw_send_slot(l, r, texts[1]);
	raw_send_slot(l, r, texts[2]);
	raw_send_msg(l, r, texts[3]);
	for (deadline = lt_now_ms() + LT_TIMEOUT_MS; got < 4 && lt_now_ms() < deadline;) {
		ret = layer_poll(l, &comp);
		fi_cq_read(r->cq, NULL, 0);
		if (ret != 1 || !(comp.flags & FI_RECV))
			continue;
		right += comp.op_context == rbuf[got] && !strcmp(rbuf[got], texts[got]);
		got++;
	}
	LT_CHECK(got == 4 && right == 4, "messages and slots in the receives in the order sent "
		 "(%zu of 4 in, %zu right)", got, right);
}

/*
 * A slot the core places while the endpoint is asked whether its caller may sleep (fi_trywait
 * reads the core's CQ, and tcp reads its sockets then): the endpoint says not to, or its CQ's
 * fd wakes the caller; either way the message is there.
 */
static void check_sleep(struct layer_side *l, struct raw_side *r, fi_addr_t peer)
{
	struct fid *fids[1] = { &l->cq->fid };
	struct fi_cq_data_entry comp;
	struct pollfd pfd = { .events = POLLIN };
	char rbuf[64];
	int ret;

	LT_CHECK_RET(fi_control(&l->cq->fid, FI_GETWAIT, &pfd.fd), 0, "the CQ's wait fd");
	LT_CHECK_RET(fi_recv(l->ep, rbuf, sizeof(rbuf), NULL, peer, rbuf), 0, "receive posted");
	raw_send_slot(l, r, "wake up");
	ret = fi_trywait(l->fabric, fids, 1);
	if (!ret)
		ret = poll(&pfd, 1, 2000) == 1 ? -FI_EAGAIN : 0;
	LT_CHECK_RET(ret, -FI_EAGAIN, "a slot placed during fi_trywait: not to sleep, or the fd "
		     "wakes");
	ret = (int) fi_cq_sread(l->cq, &comp, 1, NULL, LT_TIMEOUT_MS);
	LT_CHECK(ret == 1 && comp.op_context == rbuf && !strcmp(rbuf, "wake up"),
		 "fi_cq_sread gives the message (%d)", ret);
}

#define KEPT_KEY 0x5eedu
#define KEPT_MSG_ID 77u
#define KEPT_VALUE 0x1122334455667788u

/* The raw peer's slot of two messages: a read of the region's 8 bytes, then "ping". */
static void raw_send_read_and_msg(struct layer_side *l, struct raw_side *r)
{
	uint8_t slot[LAYER_RING_SLOT] __attribute__((aligned(8))) = { 0 };
	struct layer_ring_trailer *trailer = (struct layer_ring_trailer *) (slot +
									    LAYER_RING_MSG_MAX);
	const struct layer_hdr req = {
		.version = LAYER_PROTO_VERSION,
		.op = LAYER_OP_READ_REQ,
		.seg_cnt = 1,
		.size = sizeof(uint64_t),
		.msg_id = KEPT_MSG_ID,
	};
	const struct layer_rts_seg range = { .addr = 0, .key = KEPT_KEY, .len = sizeof(uint64_t) };
	uint32_t first = sizeof(req) + sizeof(range);

	memcpy(slot, &req, sizeof(req));
	memcpy(slot + sizeof(req), &range, sizeof(range));
	trailer->first_len = (uint8_t) first;
	raw_write_slot(l, r, slot, first + raw_eager(r, slot + first, "ping"));
}

/* The layer's slot with the read's answer: the answer, and then (when with_msg) its message
 * "pong". A GRANT in a slot of its own may come first. */
static bool raw_check_answer(struct raw_side *r, bool with_msg)
{
	uint8_t copy[LAYER_RING_SLOT] __attribute__((aligned(8)));
	const struct layer_ring_trailer *trailer = (const void *) (copy + LAYER_RING_MSG_MAX);
	const struct layer_hdr *hdr = (const void *) copy, *next;
	uint8_t *slot = raw_wait_slot_alone(r);
	uint32_t len;

	/* a GRANT of the region, or the REVOKE of the last one, each in a slot of its own, may
	 * come first */
	while (slot && (((const struct layer_hdr *) slot)->op == LAYER_OP_GRANT ||
			((const struct layer_hdr *) slot)->op == LAYER_OP_REVOKE))
		slot = raw_wait_slot_alone(r);
	if (!LT_CHECK(slot, "the read's answer is in the raw peer's slot, the layer idle"))
		return false;
	memcpy(copy, slot, sizeof(copy));
	raw_tell(r);
	len = with_msg ? trailer->first_len : trailer->len;
	if (!LT_CHECK(len == sizeof(*hdr) && hdr->op == LAYER_OP_READ_RESP &&
		      hdr->flags == LAYER_HDR_INLINE && hdr->tag == KEPT_MSG_ID &&
		      hdr->size == sizeof(uint64_t) && hdr->data == KEPT_VALUE,
		      "the answer: READ_RESP, the 8 bytes in its header (%u bytes, op %u, flags "
		      "%#x, %#" PRIx64 ")", len, hdr->op, hdr->flags, hdr->data))
		return false;
	if (!with_msg)
		return LT_CHECK(!trailer->first_len && trailer->len == sizeof(*hdr),
				"it comes alone (%u bytes)", trailer->len);
	next = (const void *) (copy + len);
	return LT_CHECK(trailer->len == len + sizeof(*hdr) + 5 && next->op == LAYER_OP_EAGER &&
			next->size == 5 && !memcmp(next + 1, "pong", 5),
			"the layer's next send in the same slot (%u bytes in all)", trailer->len);
}

/*
 * The read and the message in one slot: the call that hands up the message keeps the answer
 * unless a thread may sleep on the CQ (is_kept); the layer's next send, "pong", goes after.
 */
static void check_kept(struct layer_side *l, struct raw_side *r, fi_addr_t peer, bool is_kept)
{
	uint64_t value = KEPT_VALUE;
	struct fi_cq_data_entry comp;
	uint64_t deadline;
	struct fid_mr *mr;
	char rbuf[64];
	ssize_t ret = 0;

	if (!LT_CHECK_RET(fi_mr_reg(l->domain, &value, sizeof(value), FI_REMOTE_READ, 0, KEPT_KEY,
				    0, &mr, NULL), 0, "the read's region") ||
	    !LT_CHECK_RET(fi_recv(l->ep, rbuf, sizeof(rbuf), NULL, peer, rbuf), 0,
			  "receive posted"))
		return;
	raw_send_read_and_msg(l, r);
	for (deadline = lt_now_ms() + LT_TIMEOUT_MS; lt_now_ms() < deadline;) {
		ret = layer_poll(l, &comp);
		fi_cq_read(r->cq, NULL, 0);
		if (ret == 1 && (comp.flags & FI_RECV))
			break;
	}
	if (LT_CHECK(ret == 1 && comp.op_context == rbuf && !strcmp(rbuf, "ping"),
		     "the message of the slot is in the receive") &&
	    (!is_kept || LT_CHECK_RET(fi_inject(l->ep, "pong", 5, peer), 0, "the layer sends")))
		raw_check_answer(r, is_kept);
	/* what came after the answer (when it came alone): "pong" */
	if (!is_kept && LT_CHECK_RET(fi_inject(l->ep, "pong", 5, peer), 0, "the layer sends"))
		LT_CHECK(raw_wait_slot(l, r), "then its send");
	raw_tell(r);
	fi_close(&mr->fid);
}

static bool layer_join(struct layer_side *l, struct raw_side *r, fi_addr_t coll_addr,
		       struct fid_av_set *set, struct fid_mc **mc)
{
	struct fi_eq_entry entry;
	uint64_t deadline;
	uint32_t event;
	ssize_t ret;
	char ctx;

	if (!LT_CHECK_RET(fi_join_collective(l->ep, coll_addr, set, 0, mc, &ctx), 0, "join"))
		return false;
	if (!raw_echo_msg(l, r))
		return false;
	for (deadline = lt_now_ms() + LT_TIMEOUT_MS; lt_now_ms() < deadline;) {
		fi_cq_read(l->cq, NULL, 0);
		ret = fi_eq_read(l->eq, &event, &entry, sizeof(entry), 0);
		if (ret == -FI_EAGAIN)
			continue;
		return LT_CHECK(ret > 0 && event == FI_JOIN_COMPLETE && entry.fid == &(*mc)->fid,
				"FI_JOIN_COMPLETE, the raw peer's message taken from the ring "
				"(%zd, event %u)", ret, event);
	}
	return LT_CHECK(false, "the join completes");
}

int main(void)
{
	static const char *const ring_warnings[] = { "ring slot" };
	struct fi_av_set_attr set_attr = {
		.count = 2,
		.start_addr = FI_ADDR_NOTAVAIL,
		.end_addr = FI_ADDR_NOTAVAIL,
	};
	const char *env = getenv("FI_OFI_LAYER_RING_SLOTS");
	struct layer_side l = { 0 };
	struct raw_side r = { 0 };
	struct sockaddr_in raw_addr;
	fi_addr_t self, peer, coll_addr;
	struct fid_av_set *set;
	struct fid_mc *mc;
	uint8_t bad[LAYER_RING_SLOT] __attribute__((aligned(8))) = { 0 };
	struct layer_hdr *bad_hdr = (struct layer_hdr *) bad;
	uint64_t deadline;
	uint32_t event = 0;
	struct fi_eq_cm_entry entry;
	uint32_t expect_slots = 64;
	struct layer_hdr release;
	int i, err, warned;
	unsigned op;
	ssize_t len;
	char ctx;

	lt_cma_off(); /* the raw peer speaks no CMA */
	/* rings on whatever libfabric (from 1.18 on they are off by default) */
	setenv("FI_OFI_LAYER_RING_ACTIVE", "64", 0);
	lt_log_capture();
	lt_begin("test_ring");
	if (!lt_is_layer() || !lt_core_is_msg() || strcasecmp(lt_core_name(), "tcp"))
		lt_skip("rings are lent over tcp's MSG endpoints only");
	if (env)
		expect_slots = atoi(env) < 1 ? 0 : 1u << (31 - __builtin_clz((unsigned) atoi(env)));
	if (!strcmp(getenv("FI_OFI_LAYER_RING_ACTIVE"), "0"))
		expect_slots = 0;
	open_layer(&l);
	open_raw(&r);

	/* The raw peer's listening address: one nobody listens on. */
	raw_addr = l.addr;
	raw_addr.sin_port = htons(9);
	LT_CHECK_RET(fi_av_insert(l.av, &l.addr, 1, &self, 0, NULL), 1, "insert self");
	LT_CHECK_RET(fi_av_insert(l.av, &raw_addr, 1, &peer, 0, NULL), 1, "insert raw peer");
	if (!raw_connect(&l, &r, &raw_addr))
		goto out;
	op = raw_offer(&l, &r);
	if (!expect_slots) {
		LT_CHECK(op == LAYER_OP_RING_RELEASE && ring_count(&l) == 0,
			 "without slots the layer refuses the offer (%s)", op_name(op));
		goto out;
	}
	LT_CHECK(op == LAYER_OP_RING_ACCEPT && r.layer.slots == expect_slots,
		 "the layer accepts, lending FI_OFI_LAYER_RING_SLOTS slots, a power of two "
		 "(%s, %u)", op_name(op), r.layer.slots);
	LT_CHECK(ring_count(&l) == 1, "the layer holds one ring");

	LT_CHECK_RET(fi_av_set(l.av, &set_attr, &set, NULL), 0, "av set");
	LT_CHECK_RET(fi_av_set_insert(set, self), 0, "set: self");
	LT_CHECK_RET(fi_av_set_insert(set, peer), 0, "set: raw peer");
	LT_CHECK_RET(fi_av_set_addr(set, &coll_addr), 0, "set address");
	if (!layer_join(&l, &r, coll_addr, set, &mc))
		goto out;

	for (i = 0; i < BARRIERS; i++) {
		if (!LT_CHECK_RET(fi_barrier(l.ep, mc->fi_addr, &ctx), 0,
				  "barrier %d", i) ||
		    !raw_echo(&l, &r, "barrier"))
			break;
		err = layer_wait(&l, &r, &ctx);
		if (!LT_CHECK(!err, "barrier %d completes (%s)", i, fi_strerror(err)))
			break;
	}
	LT_CHECK(i == BARRIERS && r.taken == BARRIERS,
		 "%d barriers, the layer's %u messages all in the raw ring (%u slots)", i,
		 r.taken, RAW_SLOTS);

	check_order(&l, &r, peer);
	check_kept(&l, &r, peer, true);
	check_sleep(&l, &r, peer);
	check_kept(&l, &r, peer, false);

	/* The raw peer gives its ring back: the layer answers in kind and holds none; offered
	 * again, its new ring goes on from where the first stopped. */
	release = (struct layer_hdr) { .version = LAYER_PROTO_VERSION,
				       .op = LAYER_OP_RING_RELEASE,
				       .key_slot = (uint16_t) r.written };
	raw_inject(&l, &r, &release, sizeof(release), "ring-release");
	len = raw_recv_msg(&l, &r);
	LT_CHECK(len == sizeof(release) && ((struct layer_hdr *) r.msg)->op ==
		 LAYER_OP_RING_RELEASE, "the layer answers the release with its own (%zd)", len);
	LT_CHECK(ring_count(&l) == 0, "and holds no ring");
	op = raw_offer(&l, &r);
	LT_CHECK(op == LAYER_OP_RING_ACCEPT && ring_count(&l) == 1,
		 "offered again, the layer lends a ring again (%s)", op_name(op));
	check_order(&l, &r, peer);

	/* A slot no ofi_layer writes: a header of 40 bytes, its first message said to be 200. */
	*bad_hdr = (struct layer_hdr) { .version = LAYER_PROTO_VERSION, .op = LAYER_OP_EAGER };
	((struct layer_ring_trailer *) (bad + LAYER_RING_MSG_MAX))->first_len = 200;
	raw_write_slot(&l, &r, bad, sizeof(*bad_hdr));
	for (deadline = lt_now_ms() + LT_TIMEOUT_MS; lt_now_ms() < deadline;) {
		fi_cq_read(l.cq, NULL, 0);
		fi_cq_read(r.cq, NULL, 0);
		if (fi_eq_read(r.eq, &event, &entry, sizeof(entry), 0) != -FI_EAGAIN)
			break;
	}
	LT_CHECK(lt_now_ms() < deadline && event == FI_SHUTDOWN,
		 "a slot whose first message is longer than the slot ends the connection");
	LT_CHECK_RET(fi_barrier(l.ep, mc->fi_addr, &ctx), 0,
		     "a barrier after the loss is taken");
	err = layer_wait(&l, &r, &ctx);
	LT_CHECK(err && err != ETIMEDOUT, "and fails (%s)", fi_strerror(err));
	LT_CHECK_RET(fi_close(&mc->fid), 0, "the group closes");
	fi_close(&set->fid);
out:
	close_raw(&r);
	close_layer(&l);
	warned = lt_log_count(ring_warnings, 1);
	LT_CHECK(warned == !!expect_slots, "one warning for the bad slot (%d)", warned);
	return lt_end();
}
