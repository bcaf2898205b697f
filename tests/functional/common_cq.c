/*
 * The tests' completion queues (common.h): every CQ a test opens is polled by lt_progress, so
 * that waiting on one endpoint drives all of them, and its entries are kept in order until the
 * test takes them.
 */
#include "common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LT_MAX_CQS 64

static struct lt_cq *lt_cqs[LT_MAX_CQS];

static void lt_cq_push(struct lt_cq *cq, const struct lt_comp *comp)
{
	if (cq->count == cq->cap) {
		size_t cap = cq->cap ? cq->cap * 2 : 64;
		struct lt_comp *q = malloc(cap * sizeof(*q));

		if (!q) {
			fprintf(stderr, "out of memory\n");
			exit(1);
		}
		for (size_t i = 0; i < cq->count; i++)
			q[i] = cq->q[(cq->head + i) % cq->cap];
		free(cq->q);
		cq->q = q;
		cq->cap = cap;
		cq->head = 0;
	}
	cq->q[(cq->head + cq->count) % cq->cap] = *comp;
	cq->count++;
}

/* Reads what the CQ has now into the stash. */
static void lt_cq_poll(struct lt_cq *cq)
{
	struct fi_cq_tagged_entry e[16];
	fi_addr_t src[16];
	struct lt_comp c;
	ssize_t ret;

	for (int round = 0; round < 64; round++) {
		if (cq->use_from)
			ret = fi_cq_readfrom(cq->cq, e, 16, src);
		else
			ret = fi_cq_read(cq->cq, e, 16);
		if (ret > 0) {
			for (ssize_t i = 0; i < ret; i++) {
				c = (struct lt_comp){
					.op_context = e[i].op_context,
					.flags = e[i].flags,
					.len = e[i].len,
					.buf = e[i].buf,
					.data = e[i].data,
					.tag = e[i].tag,
					.src = cq->use_from ? src[i] : FI_ADDR_NOTAVAIL,
				};
				lt_cq_push(cq, &c);
			}
			if (ret < 16)
				return;
			continue;
		}
		if (ret == -FI_EAVAIL) {
			struct fi_cq_err_entry err = {0};

			ret = fi_cq_readerr(cq->cq, &err, 0);
			if (ret != 1) {
				cq->last_ret = (int) ret;
				return;
			}
			c = (struct lt_comp){
				.op_context = err.op_context,
				.flags = err.flags,
				.len = err.len,
				.buf = err.buf,
				.data = err.data,
				.tag = err.tag,
				.src = FI_ADDR_NOTAVAIL,
				.err = err.err ? err.err : -1,
				.prov_errno = err.prov_errno,
				.olen = err.olen,
			};
			lt_cq_push(cq, &c);
			continue;
		}
		if (ret != -FI_EAGAIN)
			cq->last_ret = (int) ret;
		return;
	}
}

void lt_cq_watch(struct lt_cq *cq, bool is_watched)
{
	for (int i = 0; i < LT_MAX_CQS; i++) {
		if (lt_cqs[i] == cq)
			lt_cqs[i] = NULL;
	}
	for (int i = 0; is_watched && i < LT_MAX_CQS; i++) {
		if (!lt_cqs[i]) {
			lt_cqs[i] = cq;
			return;
		}
	}
	if (is_watched) {
		fprintf(stderr, "too many CQs\n");
		exit(1);
	}
}

int lt_cq_open(struct fid_domain *domain, enum fi_wait_obj wait_obj, bool use_from,
	       struct lt_cq *cq)
{
	struct fi_cq_attr attr = {
		.format = FI_CQ_FORMAT_TAGGED,
		.wait_obj = wait_obj,
	};
	int ret;

	memset(cq, 0, sizeof(*cq));
	ret = fi_cq_open(domain, &attr, &cq->cq, NULL);
	if (ret)
		return ret;
	cq->use_from = use_from;
	lt_cq_watch(cq, true);
	return 0;
}

void lt_cq_close(struct lt_cq *cq)
{
	lt_cq_watch(cq, false);
	if (cq->cq)
		fi_close(&cq->cq->fid);
	free(cq->q);
	memset(cq, 0, sizeof(*cq));
}

void lt_progress(void)
{
	for (int i = 0; i < LT_MAX_CQS; i++) {
		if (lt_cqs[i])
			lt_cq_poll(lt_cqs[i]);
	}
}

int lt_cq_wait(struct lt_cq *cq, size_t n, int timeout_ms)
{
	uint64_t deadline = lt_now_ms() + (uint64_t) timeout_ms;

	for (;;) {
		if (cq->count >= n)
			return 0;
		lt_progress();
		if (cq->count >= n)
			return 0;
		if (lt_now_ms() > deadline)
			return -FI_ETIMEDOUT;
		sched_yield();
	}
}

bool lt_cq_take(struct lt_cq *cq, struct lt_comp *comp)
{
	if (!cq->count)
		return false;
	*comp = cq->q[cq->head];
	cq->head = (cq->head + 1) % cq->cap;
	cq->count--;
	return true;
}

bool lt_cq_next(struct lt_cq *cq, struct lt_comp *comp, int timeout_ms)
{
	if (lt_cq_wait(cq, 1, timeout_ms))
		return false;
	return lt_cq_take(cq, comp);
}

size_t lt_cq_quiet(struct lt_cq *cq, int ms)
{
	uint64_t deadline = lt_now_ms() + (uint64_t) ms;

	while (lt_now_ms() < deadline) {
		lt_progress();
		lt_sleep_ms(1);
	}
	return cq->count;
}

