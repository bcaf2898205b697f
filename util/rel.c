/*
 * Round-trip estimation and the congestion window (rel.h).
 */
#include "config.h"

#include "util/rel.h"
#include "util/util.h"

void util_rtt_init(struct util_rtt *rtt, uint64_t rto_initial, uint64_t rto_min,
		   uint64_t rto_max)
{
	rtt->srtt = 0;
	rtt->rttvar = 0;
	rtt->rto_min = rto_min;
	rtt->rto_max = UTIL_MAX(rto_max, rto_min);
	rtt->rto = UTIL_MIN(UTIL_MAX(rto_initial, rto_min), rtt->rto_max);
}

void util_rtt_sample(struct util_rtt *rtt, uint64_t sample)
{
	uint64_t dev;

	if (!rtt->srtt) {
		rtt->srtt = sample ? sample : 1;
		rtt->rttvar = sample / 2;
	} else {
		/* rttvar = 3/4 rttvar + 1/4 |srtt - sample|; srtt = 7/8 srtt + 1/8 sample */
		dev = rtt->srtt > sample ? rtt->srtt - sample : sample - rtt->srtt;
		rtt->rttvar = (3 * rtt->rttvar + dev) / 4;
		rtt->srtt = (7 * rtt->srtt + sample) / 8;
		if (!rtt->srtt)
			rtt->srtt = 1;
	}
	rtt->rto = UTIL_MIN(UTIL_MAX(rtt->srtt + 4 * rtt->rttvar, rtt->rto_min), rtt->rto_max);
}

void util_rtt_backoff(struct util_rtt *rtt)
{
	rtt->rto = UTIL_MIN(rtt->rto * 2, rtt->rto_max);
}

void util_cwnd_init(struct util_cwnd *cw, uint32_t initial, uint32_t min, uint32_t max)
{
	cw->min = min ? min : 1;
	cw->max = UTIL_MAX(max, cw->min);
	cw->cwnd = UTIL_MIN(UTIL_MAX(initial, cw->min), cw->max);
	cw->ssthresh = cw->max;
	cw->acked = 0;
}

void util_cwnd_acked(struct util_cwnd *cw, uint32_t n)
{
	if (cw->cwnd < cw->ssthresh) {
		/* slow start: one more per packet acknowledged */
		cw->cwnd = UTIL_MIN(cw->cwnd + n, cw->max);
		return;
	}
	/* congestion avoidance: one more per window acknowledged */
	cw->acked += n;
	while (cw->acked >= cw->cwnd && cw->cwnd < cw->max) {
		cw->acked -= cw->cwnd;
		cw->cwnd++;
	}
	if (cw->cwnd >= cw->max)
		cw->acked = 0;
}

void util_cwnd_loss(struct util_cwnd *cw)
{
	cw->cwnd = UTIL_MAX(cw->cwnd / 2, cw->min);
	cw->ssthresh = cw->cwnd;
	cw->acked = 0;
}

void util_cwnd_timeout(struct util_cwnd *cw)
{
	cw->ssthresh = UTIL_MAX(cw->cwnd / 2, cw->min);
	cw->cwnd = cw->min;
	cw->acked = 0;
}
