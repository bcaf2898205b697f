/*
 * tagm_bench: the tag-matching engine (util/tagm) alone, without a network, for N receives:
 *
 *   distinct  N exact any-source receives with distinct tags (fi_layer_bench's matching
 *             test), the messages in the reverse order of the receives;
 *   directed  N directed receives for one tag, one per sender (FI_DIRECTED_RECV with a tag
 *             that does not carry the sender), the messages in reverse order;
 *   wildcard  N any-source receives that ignore the low tag bits, the messages in the order
 *             of the receives (wildcard receives are one ordered queue: in reverse order each
 *             message would walk all of it, by definition).
 *
 * Each runs once with the receives posted first ("posted": util_tagm_recv_match per message)
 * and once with the messages waiting first ("unexp": util_tagm_msg_match per receive). A
 * figure is nanoseconds per message, the best of the repeats (on a machine others use, load
 * only slows a run down).
 */
#include "config.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "util/tagm_inl.h"

struct fi_provider *util_prov;

#define BENCH_NAME "tagm_bench"
/* messages matched per figure and repeat, whatever N */
#define MSG_BUDGET 2000000
#define MAX_COUNTS 16

enum scenario { SC_DISTINCT, SC_DIRECTED, SC_WILDCARD, SC_CNT };

static const char *const scenario_names[SC_CNT] = { "distinct", "directed", "wildcard" };

struct case_args {
	enum scenario sc;
	size_t n;
	struct util_tagm_recv *recvs;
	struct util_tagm_msg *msgs;
};

static double now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double) ts.tv_sec * 1e9 + (double) ts.tv_nsec;
}

/* Receive i of a scenario: its tag, ignore mask and source. */
static void recv_of(enum scenario sc, size_t i, uint64_t *tag, uint64_t *ignore, uint64_t *src)
{
	*tag = sc == SC_DIRECTED ? 7 : (uint64_t) i << 8;
	*ignore = sc == SC_WILDCARD ? 0xff : 0;
	*src = sc == SC_DIRECTED ? (uint64_t) i : UTIL_TAGM_ANY_SRC;
}

/* The j-th message to arrive (or receive to search) of n: reverse order but for wildcards. */
static size_t nth(enum scenario sc, size_t n, size_t j)
{
	return sc == SC_WILDCARD ? j : n - 1 - j;
}

/* Message i: what receive i takes (its sender is i in every scenario). */
static void msg_of(enum scenario sc, size_t i, uint64_t *tag, uint64_t *src)
{
	*tag = sc == SC_DIRECTED ? 7 : (uint64_t) i << 8;
	if (sc == SC_WILDCARD)
		*tag |= i & 0xff;
	*src = (uint64_t) i;
}

/* One round with the receives posted first; false on a wrong match. */
static bool round_posted(struct util_tagm *tagm, const struct case_args *c)
{
	uint64_t tag, ignore, src;
	size_t i, j;

	for (i = 0; i < c->n; i++) {
		recv_of(c->sc, i, &tag, &ignore, &src);
		util_tagm_recv_post(tagm, &c->recvs[i], tag, ignore, src);
	}
	for (j = 0; j < c->n; j++) {
		i = nth(c->sc, c->n, j);
		msg_of(c->sc, i, &tag, &src);
		if (util_tagm_recv_match(tagm, tag, src, UTIL_TAGM_NO_GROUP) != &c->recvs[i])
			return false;
	}
	return true;
}

/* One round with the messages waiting first. */
static bool round_unexp(struct util_tagm *tagm, const struct case_args *c)
{
	uint64_t tag, ignore, src;
	size_t i, j;

	for (i = 0; i < c->n; i++) {
		msg_of(c->sc, i, &tag, &src);
		util_tagm_msg_add(tagm, &c->msgs[i], tag, src, UTIL_TAGM_NO_GROUP);
	}
	for (j = 0; j < c->n; j++) {
		i = nth(c->sc, c->n, j);
		recv_of(c->sc, i, &tag, &ignore, &src);
		if (util_tagm_msg_match(tagm, tag, ignore, src) != &c->msgs[i])
			return false;
	}
	return true;
}

/* Best ns per message over repeats, or a negative value on a wrong match. */
static double time_case(const struct case_args *c, bool is_unexp, int repeats)
{
	size_t rounds = MSG_BUDGET / c->n + 1, r;
	struct util_tagm tagm;
	double best = -1, t0, ns;
	bool ok = true;

	if (util_tagm_init(&tagm, 0))
		return -1;
	for (int rep = 0; rep < repeats && ok; rep++) {
		t0 = now_ns();
		for (r = 0; r < rounds && ok; r++)
			ok = is_unexp ? round_unexp(&tagm, c) : round_posted(&tagm, c);
		ns = (now_ns() - t0) / (double) (rounds * c->n);
		if (best < 0 || ns < best)
			best = ns;
	}
	util_tagm_fini(&tagm);
	return ok ? best : -1;
}

static void usage(FILE *out)
{
	fprintf(out,
		"usage: %s [-n LIST] [-r N]\n"
		"The tag-matching engine alone: ns per message for N receives, posted first and\n"
		"unexpected, in three scenarios (distinct tags, directed receives sharing a tag,\n"
		"wildcard receives).\n\n"
		"  -n LIST  values of N (default 1,64,1024,16384; each at most 1048576)\n"
		"  -r N     repeats, the best shown (default 3)\n",
		BENCH_NAME);
}

int main(int argc, char **argv)
{
	size_t counts[MAX_COUNTS] = { 1, 64, 1024, 16384 }, ncounts = 4, max_n = 0;
	struct case_args c;
	int repeats = 3, opt;
	char *list, *tok, *end;
	double v;

	while ((opt = getopt(argc, argv, "n:r:h")) != -1) {
		switch (opt) {
		case 'n':
			ncounts = 0;
			list = optarg;
			while ((tok = strtok(list, ",")) && ncounts < MAX_COUNTS) {
				list = NULL;
				counts[ncounts] = strtoul(tok, &end, 10);
				if (*end || !counts[ncounts] || counts[ncounts] > (1 << 20)) {
					usage(stderr);
					return 2;
				}
				ncounts++;
			}
			break;
		case 'r':
			repeats = atoi(optarg);
			if (repeats < 1) {
				usage(stderr);
				return 2;
			}
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (!ncounts) {
		usage(stderr);
		return 2;
	}
	for (size_t k = 0; k < ncounts; k++)
		max_n = counts[k] > max_n ? counts[k] : max_n;
	c.recvs = calloc(max_n, sizeof(*c.recvs));
	c.msgs = calloc(max_n, sizeof(*c.msgs));
	if (!c.recvs || !c.msgs) {
		perror(BENCH_NAME);
		return 1;
	}

	printf("# %s: ns per message, best of %d repeat%s; messages in the reverse order of the "
	       "receives (wildcard: in order)\n", BENCH_NAME, repeats, repeats == 1 ? "" : "s");
	printf("%-10s %8s %10s %10s\n", "scenario", "N", "posted", "unexp");
	for (int sc = 0; sc < SC_CNT; sc++) {
		for (size_t k = 0; k < ncounts; k++) {
			c.sc = (enum scenario) sc;
			c.n = counts[k];
			printf("%-10s %8zu", scenario_names[sc], c.n);
			for (int is_unexp = 0; is_unexp < 2; is_unexp++) {
				v = time_case(&c, is_unexp, repeats);
				if (v < 0)
					printf(" %10s", "WRONG");
				else
					printf(" %10.1f", v);
			}
			printf("\n");
			fflush(stdout);
		}
	}
	free(c.recvs);
	free(c.msgs);
	return 0;
}
