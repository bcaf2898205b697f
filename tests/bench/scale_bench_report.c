/*
 * fi_scale_bench: the tables, aligned or CSV. The measurement's: per N and provider the median
 * of the repeats, and the ratio of each provider to the first. Churn's: the baseline and every
 * cycle, and per provider the verdict: did the server get back to what it held before?
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "scale_bench.h"

static const char *const fig_head[NFIGS] = {"conn_s", "KiB/peer", "fds/peer", "lat_us"};
static const char *const fig_csv[NFIGS] = {"conn_s", "KiB_per_peer", "fds_per_peer", "lat_us"};
static const char *const ratio_head[NFIGS] = {"conn_x", "KiB_x", "fds_x", "lat_x"};

#define CELL_LEN 40
#define MAX_COLS 10 /* the measurement table's, the churn table's */

/* Columns aligned (those in left_cols to the left), or comma-separated with --csv. */
static void print_rows(char (*text)[MAX_COLS][CELL_LEN], int nrows, int ncols, unsigned left_cols)
{
	size_t width[MAX_COLS] = {0};

	for (int r = 0; r < nrows; r++)
		for (int c = 0; c < ncols; c++)
			if (strlen(text[r][c]) > width[c])
				width[c] = strlen(text[r][c]);
	for (int r = 0; r < nrows; r++) {
		for (int c = 0; c < ncols; c++) {
			if (opt.csv)
				printf("%s%s", text[r][c], c + 1 < ncols ? "," : "");
			else if (left_cols & (1u << c))
				printf("%s%-*s", c ? "  " : "", (int) width[c], text[r][c]);
			else
				printf("%s%*s", c ? "  " : "", (int) width[c], text[r][c]);
		}
		printf("\n");
	}
}

static void print_first_line(void)
{
	printf("# %s %s, libfabric %u.%u, %d CPUs", SCALE_NAME, PACKAGE_VERSION,
	       FI_MAJOR(fi_version()), FI_MINOR(fi_version()), ncpus);
	if (opt.churn)
		printf(": churn, %u cycles of %zu peers\n", opt.churn, opt.counts[0]);
	else
		printf(": median of %d repeat%s, providers alternating run by run\n", opt.repeats,
		       opt.repeats == 1 ? "" : "s");
}

static bool fig_median(int ni, int p, int f, double *out)
{
	const struct cell *c = &cells[ni][p];
	double v[SCALE_MAX_REPEATS];

	if (prov_unavail[p] || c->state != CELL_OK || !c->nsamples)
		return false;
	for (int i = 0; i < c->nsamples; i++)
		v[i] = c->v[i][f];
	*out = bench_median(v, c->nsamples);
	return true;
}

/*
 * Provider p over the first: the median of the ratios of the two runs of each repeat, which
 * ran one after the other, so that a slow phase of the machine shifts both sides alike.
 */
static bool fig_ratio(int ni, int p, int f, double *out)
{
	const struct cell *a = &cells[ni][0], *b = &cells[ni][p];
	double r[SCALE_MAX_REPEATS];
	int n = 0;
	double unused;

	if (!fig_median(ni, 0, f, &unused) || !fig_median(ni, p, f, &unused))
		return false;
	for (int i = 0; i < b->nsamples; i++)
		for (int j = 0; j < a->nsamples; j++)
			if (a->repeat[j] == b->repeat[i] && a->v[j][f] > 0)
				r[n++] = b->v[i][f] / a->v[j][f];
	if (!n)
		return false;
	*out = bench_median(r, n);
	return true;
}

static void format_fig(int ni, int p, int f, char *buf)
{
	static const char *const fmt[NFIGS] = {"%.4f", "%.1f", "%.2f", "%.2f"};
	const struct cell *c = &cells[ni][p];
	double m;

	if (fig_median(ni, p, f, &m))
		snprintf(buf, CELL_LEN, fmt[f], m);
	else if (prov_unavail[p])
		snprintf(buf, CELL_LEN, "n/a");
	else if (c->state == CELL_FD_LIMIT)
		snprintf(buf, CELL_LEN, f == FIG_CONN ? "fail (fd limit)" : "fail");
	else
		snprintf(buf, CELL_LEN, "fail");
}

static void print_measure_legend(void)
{
	printf("# one server endpoint (FI_EP_RDM, FI_MSG|FI_TAGGED, FI_AV_TABLE) and N peers, "
	       "each a client endpoint: one awake, N-1 idle in up to %zu processes\n",
	       opt.procs);
	printf("# conn_s: from \"go\" to the last peer's hello answered; KiB/peer, fds/peer: "
	       "the server's RSS (after malloc_trim(0)) and open fds, all N connected less none, "
	       "over N\n");
	printf("# lat_us: 8-byte tagged ping-pong with the awake peer beside the idle ones, half "
	       "the round trip, median of %d batches of %zu\n",
	       SCALE_BATCHES, opt.iters / SCALE_BATCHES);
	if (bench_cpus[0] >= 0)
		printf("# server on CPU %d, awake client on CPU %d, idle clients not pinned\n",
		       bench_cpus[0], bench_cpus[1]);
	else
		printf("# not pinned\n");
	if (opt.nprovs > 1)
		printf("# conn_x .. lat_x: the figure over %s's (median of the per-repeat "
		       "ratios); above 1: slower, or more per peer\n",
		       opt.provs[0]);
}

void print_measure_table(void)
{
	int ncols = 2 + NFIGS + (opt.nprovs > 1 ? NFIGS : 0);
	int nrows = 1 + opt.ncounts * opt.nprovs, row = 1;
	char(*text)[MAX_COLS][CELL_LEN] = calloc((size_t) nrows, sizeof(*text));

	if (!text) {
		perror(SCALE_NAME);
		exit(1);
	}
	snprintf(text[0][0], CELL_LEN, "N");
	snprintf(text[0][1], CELL_LEN, "provider");
	for (int f = 0; f < NFIGS; f++) {
		snprintf(text[0][2 + f], CELL_LEN, "%s", opt.csv ? fig_csv[f] : fig_head[f]);
		if (opt.nprovs > 1)
			snprintf(text[0][2 + NFIGS + f], CELL_LEN, "%s", ratio_head[f]);
	}
	for (int ni = 0; ni < opt.ncounts; ni++) {
		for (int p = 0; p < opt.nprovs; p++, row++) {
			snprintf(text[row][0], CELL_LEN, "%zu", opt.counts[ni]);
			snprintf(text[row][1], CELL_LEN, "%s", opt.provs[p]);
			for (int f = 0; f < NFIGS; f++) {
				char *cell = text[row][2 + NFIGS + f];
				double r;

				format_fig(ni, p, f, text[row][2 + f]);
				if (opt.nprovs == 1)
					continue;
				if (p == 0)
					snprintf(cell, CELL_LEN, "-");
				else if (fig_ratio(ni, p, f, &r))
					snprintf(cell, CELL_LEN, "%.2f", r);
				else
					snprintf(cell, CELL_LEN, "n/a");
			}
		}
	}
	print_first_line();
	if (!opt.csv)
		print_measure_legend();
	print_rows(text, nrows, ncols, 1u << 1);
	free(text);
}

static void churn_verdict(int p)
{
	const struct churn_row *base = &churn_rows[p][0], *last = &churn_rows[p][churn_done[p]];
	double fds_x = base->fds > 0 ? last->fds / base->fds : 0;
	double rss_x = base->rss > 0 ? last->rss / base->rss : 0;
	bool within = fds_x >= 0.9 && fds_x <= 1.1 && rss_x >= 0.9 && rss_x <= 1.1;

	if (prov_unavail[p]) {
		printf("# %s: not available\n", opt.provs[p]);
		return;
	}
	if (!churn_done[p]) {
		printf("# %s: no cycle completed\n", opt.provs[p]);
		return;
	}
	printf("# %s: after cycle %u%s, fds %.0f (%.2fx) and RSS %.0f KiB (%.2fx) of the "
	       "baseline: %s",
	       opt.provs[p], churn_done[p], churn_failed[p] ? " (the next failed)" : "", last->fds,
	       fds_x, last->rss / 1024, rss_x, within ? "both within 10%" : "NOT both within 10%");
	/* what the first cycle left may be kept for reuse; what later cycles add is a leak */
	if (churn_done[p] > 1)
		printf("; RSS %+.0f KiB from cycle 1 to %u",
		       (last->rss - churn_rows[p][1].rss) / 1024, churn_done[p]);
	printf("\n");
}

void print_churn_table(void)
{
	static const char *const head[] = {"provider",	"cycle",   "conn_s",  "fds_conn",
					   "fds",	"fds_x",   "RSS_KiB", "RSS_x",
					   "cq_errors", "settle_s"};
	int ncols = (int) (sizeof(head) / sizeof(head[0]));
	int nrows = 1 + opt.nprovs * (int) (opt.churn + 2), row = 1;
	char(*text)[MAX_COLS][CELL_LEN] = calloc((size_t) nrows, sizeof(*text));

	if (!text) {
		perror(SCALE_NAME);
		exit(1);
	}
	for (int c = 0; c < ncols; c++)
		snprintf(text[0][c], CELL_LEN, "%s", head[c]);
	for (int p = 0; p < opt.nprovs; p++) {
		const struct churn_row *base = &churn_rows[p][0];
		/* the baseline, the cycles done, and the one that failed, if one did */
		unsigned last = churn_done[p] + (churn_failed[p] && churn_done[p] < opt.churn);

		for (unsigned c = 0; c <= last; c++) {
			const struct churn_row *cr = &churn_rows[p][c];
			char(*t)[CELL_LEN] = text[row++];
			bool none = prov_unavail[p] || c > churn_done[p] || !churn_started[p];

			snprintf(t[0], CELL_LEN, "%s", opt.provs[p]);
			if (c == 0)
				snprintf(t[1], CELL_LEN, "base");
			else
				snprintf(t[1], CELL_LEN, "%u", c);
			for (int k = 2; k < ncols; k++)
				snprintf(t[k], CELL_LEN, "-");
			if (none) {
				snprintf(t[2], CELL_LEN, prov_unavail[p] ? "n/a" : "fail");
				break;
			}
			if (c) {
				snprintf(t[2], CELL_LEN, "%.4f", cr->conn_s);
				snprintf(t[3], CELL_LEN, "%.0f", cr->fds_conn);
				snprintf(t[8], CELL_LEN, "%.0f", cr->cq_errors);
				snprintf(t[9], CELL_LEN, "%.2f", cr->settle_s);
			}
			snprintf(t[4], CELL_LEN, "%.0f", cr->fds);
			snprintf(t[5], CELL_LEN, "%.2f", base->fds > 0 ? cr->fds / base->fds : 0);
			snprintf(t[6], CELL_LEN, "%.0f", cr->rss / 1024);
			snprintf(t[7], CELL_LEN, "%.2f", base->rss > 0 ? cr->rss / base->rss : 0);
		}
	}
	print_first_line();
	if (!opt.csv) {
		printf("# each cycle: N peers in up to %zu processes connect (hello, ack), close "
		       "and exit; the server fi_av_remove's them and reads its CQ until its fds "
		       "are within 10%% of the baseline (%d s at most)\n",
		       opt.procs, SCALE_SETTLE_S);
		printf("# fds_conn: the server's fds with the cycle's peers connected; fds, "
		       "RSS_KiB (after malloc_trim(0)): once they left and were removed; *_x: over "
		       "the baseline\n");
	}
	print_rows(text, row, ncols, 1u << 0);
	for (int p = 0; p < opt.nprovs; p++)
		churn_verdict(p);
	free(text);
}
