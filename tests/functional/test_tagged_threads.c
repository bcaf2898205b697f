/*
 * FI_THREAD_SAFE stress for FI_TAGGED: on one domain, three threads send tagged messages from
 * endpoint a (each in a tag space of its own, one in eight of rendezvous size), two threads
 * post receives on endpoint b (one exact tags, one wildcards over the low bits), and three
 * threads read b's CQ while the senders read a's. Every message must be received exactly once,
 * intact, by a receive whose tag it matches; nothing may hang.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <rdma/fi_tagged.h>

#include "tests/functional/common.h"

#define SENDERS 3
#define PER_SENDER 3000
#define SMALL 64
#define LARGE (128 * 1024)
#define TAG(s, i) (((uint64_t) (s) + 1) << 32 | (uint64_t) (i))

static struct lt_ep a, b;
static fi_addr_t a_to_b;
static atomic_uint received[SENDERS][PER_SENDER];
static atomic_uint bad_data, bad_tag, errors, done_cnt;
static atomic_bool stop;

struct rbuf {
	uint64_t tag;                 /* tag posted (wildcards: the pattern) */
	char data[LARGE];
};

static size_t msg_len(int i)
{
	return i % 50 == 7 ? LARGE : SMALL;
}

/*
 * Send buffers carry their sender, so that whichever thread reads a send completion (the
 * senders share a's CQ) credits the right sender and frees the buffer.
 */
struct sbuf {
	int sender;
	char data[];
};

static atomic_int outstanding[SENDERS];

static void reap_sends(void)
{
	struct fi_cq_tagged_entry comp[16];
	struct fi_cq_err_entry err;
	struct sbuf *m;
	ssize_t ret, k;

	ret = fi_cq_read(a.tx.cq, comp, 16);
	if (ret == -FI_EAVAIL) {
		memset(&err, 0, sizeof(err));
		if (fi_cq_readerr(a.tx.cq, &err, 0) == 1) {
			atomic_fetch_add(&errors, 1);
			m = err.op_context;
			atomic_fetch_sub(&outstanding[m->sender], 1);
			free(m);
		}
		return;
	}
	for (k = 0; k < ret; k++) {
		m = comp[k].op_context;
		atomic_fetch_sub(&outstanding[m->sender], 1);
		free(m);
	}
}

static void *sender(void *arg)
{
	int s = (int) (intptr_t) arg, i;
	struct sbuf *m;
	ssize_t ret;

	for (i = 0; i < PER_SENDER && !atomic_load(&stop); i++) {
		while (atomic_load(&outstanding[s]) >= 8 && !atomic_load(&stop))
			reap_sends();
		m = malloc(sizeof(*m) + msg_len(i));
		m->sender = s;
		lt_fill(m->data, msg_len(i), TAG(s, i));
		atomic_fetch_add(&outstanding[s], 1);
		do {
			ret = fi_tsend(a.ep, m->data, msg_len(i), NULL, a_to_b, TAG(s, i), m);
			if (ret == -FI_EAGAIN)
				reap_sends();
		} while (ret == -FI_EAGAIN && !atomic_load(&stop));
		if (ret) {
			atomic_fetch_add(&errors, 1);
			atomic_fetch_sub(&outstanding[s], 1);
			free(m);
			break;
		}
	}
	/*
	 * Keep a progressing until every send of this sender completed and b has every message:
	 * over a datagram core a send completes once copied, and what the network lost is sent
	 * again only while a progresses (manual progress).
	 */
	while ((atomic_load(&outstanding[s]) ||
		atomic_load(&done_cnt) < SENDERS * PER_SENDER) && !atomic_load(&stop))
		reap_sends();
	return NULL;
}

/* Posts one receive per message of senders [first, last): exact tags, or wildcards. */
struct poster_arg {
	int first, last;
	bool wildcard;
};

static void *poster(void *arg)
{
	struct poster_arg *p = arg;
	struct rbuf *r;
	ssize_t ret;
	int s, i;

	for (s = p->first; s < p->last; s++) {
		for (i = 0; i < PER_SENDER; i++) {
			r = malloc(sizeof(*r));
			r->tag = p->wildcard ? TAG(s, 0) : TAG(s, i);
			do {
				ret = fi_trecv(b.ep, r->data, LARGE, NULL, FI_ADDR_UNSPEC, r->tag,
					       p->wildcard ? 0xffffffffULL : 0, r);
			} while (ret == -FI_EAGAIN && !atomic_load(&stop));
			if (ret) {
				atomic_fetch_add(&errors, 1);
				free(r);
				return NULL;
			}
		}
	}
	return NULL;
}

static void *reader(void *arg)
{
	struct fi_cq_tagged_entry comp[8];
	struct fi_cq_err_entry err;
	ssize_t ret, k;

	while (!atomic_load(&stop) && atomic_load(&done_cnt) < SENDERS * PER_SENDER) {
		ret = fi_cq_read(b.rx.cq, comp, 8);
		if (ret == -FI_EAVAIL) {
			memset(&err, 0, sizeof(err));
			if (fi_cq_readerr(b.rx.cq, &err, 0) == 1)
				atomic_fetch_add(&errors, 1);
			continue;
		}
		for (k = 0; k < ret; k++) {
			struct rbuf *r = comp[k].op_context;
			uint64_t tag = comp[k].tag;
			unsigned s = (unsigned) (tag >> 32) - 1, i = (unsigned) tag;

			if (s >= SENDERS || i >= PER_SENDER || (r->tag & ~0xffffffffULL) !=
			    (tag & ~0xffffffffULL) || (r->tag != TAG(s, 0) && r->tag != tag)) {
				atomic_fetch_add(&bad_tag, 1);
			} else {
				if (comp[k].len != msg_len((int) i) ||
				    lt_verify(r->data, comp[k].len, tag) != comp[k].len)
					atomic_fetch_add(&bad_data, 1);
				atomic_fetch_add(&received[s][i], 1);
			}
			atomic_fetch_add(&done_cnt, 1);
			free(r);
		}
	}
	return NULL;
}

int main(void)
{
	struct poster_arg exact = { 0, SENDERS - 1, false }, wild = { SENDERS - 1, SENDERS, true };
	pthread_t send_t[SENDERS], post_t[2], read_t[3];
	struct fi_info *hints, *info;
	unsigned dup = 0, lost = 0;
	uint64_t deadline;
	struct lt_dom dom;
	int s, i;

	lt_begin("tagged_threads");
	hints = lt_hints(FI_TAGGED);
	hints->domain_attr->threading = FI_THREAD_SAFE;
	info = lt_getinfo_or_skip(hints);
	if (lt_dom_open(info, &dom) || lt_ep_open(&dom, NULL, &a) || lt_ep_open(&dom, NULL, &b) ||
	    lt_av_insert(&a, b.addr, &a_to_b)) {
		LT_CHECK(0, "open the endpoints");
		return lt_end();
	}
	for (i = 0; i < 3; i++)
		pthread_create(&read_t[i], NULL, reader, NULL);
	pthread_create(&post_t[0], NULL, poster, &exact);
	for (s = 0; s < SENDERS; s++)
		pthread_create(&send_t[s], NULL, sender, (void *) (intptr_t) s);
	/* The wildcard receives come late: many of their messages are unexpected by then. */
	pthread_create(&post_t[1], NULL, poster, &wild);

	deadline = lt_now_ms() + 60000;
	while (atomic_load(&done_cnt) < SENDERS * PER_SENDER && lt_now_ms() < deadline)
		lt_sleep_ms(10);
	LT_CHECK(atomic_load(&done_cnt) == SENDERS * PER_SENDER,
		 "all %d messages received in time (%u)", SENDERS * PER_SENDER,
		 atomic_load(&done_cnt));
	/* A rendezvous send completes on the receiver's ACK, after its receive did: the senders
	 * reap theirs before they are told to stop. */
	for (s = 0; s < SENDERS && lt_now_ms() < deadline; s++) {
		while (atomic_load(&outstanding[s]) && lt_now_ms() < deadline)
			lt_sleep_ms(1);
	}
	for (s = 0, i = 0; s < SENDERS; s++)
		i += atomic_load(&outstanding[s]);
	LT_CHECK(!i, "every send completed (%d outstanding)", i);
	atomic_store(&stop, true);
	for (s = 0; s < SENDERS; s++)
		pthread_join(send_t[s], NULL);
	for (i = 0; i < 2; i++)
		pthread_join(post_t[i], NULL);
	for (i = 0; i < 3; i++)
		pthread_join(read_t[i], NULL);

	for (s = 0; s < SENDERS; s++) {
		for (i = 0; i < PER_SENDER; i++) {
			unsigned n = atomic_load(&received[s][i]);

			dup += n > 1;
			lost += n == 0;
		}
	}
	LT_CHECK(!lost, "no message lost (%u missing)", lost);
	LT_CHECK(!dup, "no message received twice (%u)", dup);
	LT_CHECK(!atomic_load(&bad_tag), "every message matched a receive of its tag (%u not)",
		 atomic_load(&bad_tag));
	LT_CHECK(!atomic_load(&bad_data), "every message intact (%u not)",
		 atomic_load(&bad_data));
	LT_CHECK(!atomic_load(&errors), "no error completion or call error (%u)",
		 atomic_load(&errors));

	lt_ep_close(&a);
	lt_ep_close(&b);
	lt_dom_close(&dom);
	fi_freeinfo(info);
	fi_freeinfo(hints);
	return lt_end();
}
