/*
 * fi_av_bench: address-vector speed of ofi_layer beside other providers, in one run.
 *
 * For each provider (each in its own forked process, so that one crashing or leaking does not
 * spoil the others' numbers): N IPv4 addresses inserted in one fi_av_insert call; each looked
 * up (fi_av_lookup) in insertion order and in random order; each reverse-looked-up (address ->
 * fi_addr) in both orders where the provider offers it (ofi_layer: FI_LAYER_AV_OPS through
 * fi_open_ops; fi_av(3) itself has no call for it), one address per call and 16 per call;
 * all removed in one fi_av_remove call.
 * Memory is the growth of the process's resident set from before fi_av_open to after the
 * first insertion, per entry. Every timing is the best of three runs (a shared machine only
 * ever adds time); each insertion run uses a fresh AV. Random order means the addresses (or
 * fi_addrs) are shuffled in a separate array beforehand and read sequentially, so only the
 * AV's own accesses are random.
 *
 * The results are printed as a table with ofi_layer's ratio to each other provider. A timing
 * here is never a pass/fail threshold.
 */
#include "config.h"

#include <arpa/inet.h>
#include <getopt.h>
#include <stdint.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <rdma/fabric.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_ext_layer.h>

#define MAX_PROVS 8
#define UTIL_BENCH_MIN(a, b) ((a) < (b) ? (a) : (b))
#define DEFAULT_COUNT 1000000
#define REPEATS 3
/* addresses per reverse_lookupv call */
#define BATCH 16

enum metric {
	M_INSERT,       /* ns per address, one call */
	M_LOOKUP_SEQ,   /* ns per fi_av_lookup, insertion order */
	M_LOOKUP_RAND,  /* ns per fi_av_lookup, random order */
	M_REVERSE_SEQ,  /* ns per reverse lookup, insertion order */
	M_REVERSE_RAND, /* ns per reverse lookup, random order */
	M_REVV_SEQ,     /* ns per address, reverse lookups in batches, insertion order */
	M_REVV_RAND,    /* ns per address, reverse lookups in batches, random order */
	M_REMOVE,       /* ns per address, one call */
	M_MEMORY,       /* resident bytes per entry */
	M_COUNT,
};

static const char *const metric_name[M_COUNT] = {
	"insert, one call (ns/addr)",
	"lookup, insertion order (ns)",
	"lookup, random order (ns)",
	"reverse lookup, insertion order (ns)",
	"reverse lookup, random order (ns)",
	"reverse, batches of 16, in order (ns)",
	"reverse, batches of 16, random (ns)",
	"remove, one call (ns/addr)",
	"memory (bytes/entry)",
};

struct result {
	int status;               /* 0, or a negative fabric errno at the step that failed */
	char failed_step[48];
	double value[M_COUNT];    /* < 0: not measured */
	double insert_rate;       /* Minserts/s */
};

struct opts {
	size_t count;
	size_t hint;
	enum fi_av_type type;
	enum fi_threading threading;
	const char *provs[MAX_PROVS];
	int prov_cnt;
};

static double now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double) ts.tv_sec * 1e9 + (double) ts.tv_nsec;
}

static size_t rss_bytes(void)
{
	unsigned long size = 0, resident = 0;
	FILE *f = fopen("/proc/self/statm", "r");

	if (f) {
		if (fscanf(f, "%lu %lu", &size, &resident) != 2)
			resident = 0;
		fclose(f);
	}
	return resident * (size_t) sysconf(_SC_PAGESIZE);
}

/* xorshift64*: the same shuffle in every run and every provider */
static uint64_t rnd(uint64_t *s)
{
	*s ^= *s >> 12;
	*s ^= *s << 25;
	*s ^= *s >> 27;
	return *s * 2685821657736338717ULL;
}

static void shuffle(size_t *perm, size_t n)
{
	uint64_t s = 0x9e3779b97f4a7c15ULL;
	size_t i, j, t;

	for (i = 0; i < n; i++)
		perm[i] = i;
	for (i = n - 1; i > 0; i--) {
		j = (size_t) (rnd(&s) % (i + 1));
		t = perm[i];
		perm[i] = perm[j];
		perm[j] = t;
	}
}

static void fail(struct result *r, const char *step, int ret)
{
	r->status = ret ? ret : -FI_EOTHER;
	snprintf(r->failed_step, sizeof(r->failed_step), "%s", step);
}

/* Everything for one provider, in the forked child. */
static void run_prov(const struct opts *o, const char *prov, struct result *r)
{
	struct fi_av_attr av_attr = {.type = o->type, .count = o->hint};
	struct fi_info *hints, *info = NULL;
	struct fi_layer_av_ops *ext = NULL;
	struct sockaddr_in *addrs, *shuffled, got;
	struct fid_fabric *fabric = NULL;
	struct fid_domain *domain = NULL;
	struct fid_av *av = NULL;
	fi_addr_t *fi_addr, *fi_shuffled, back;
	size_t n = o->count, i, *perm, len, rss0;
	volatile uint64_t sink = 0;
	double t0, best;
	int ret, rep;

	for (i = 0; i < M_COUNT; i++)
		r->value[i] = -1;
	addrs = calloc(n, sizeof(*addrs));
	shuffled = calloc(n, sizeof(*shuffled));
	fi_addr = calloc(n, sizeof(*fi_addr));
	fi_shuffled = calloc(n, sizeof(*fi_shuffled));
	perm = calloc(n, sizeof(*perm));
	hints = fi_allocinfo();
	if (!addrs || !shuffled || !fi_addr || !fi_shuffled || !perm || !hints) {
		fail(r, "memory", -FI_ENOMEM);
		goto out;
	}
	for (i = 0; i < n; i++) {
		addrs[i].sin_family = AF_INET;
		addrs[i].sin_port = htons(5000);
		addrs[i].sin_addr.s_addr = htonl(0x0a000001u + (uint32_t) i);
	}
	shuffle(perm, n);
	for (i = 0; i < n; i++)
		shuffled[i] = addrs[perm[i]];

	hints->ep_attr->type = FI_EP_RDM;
	hints->caps = FI_MSG;
	hints->mode = FI_CONTEXT | FI_CONTEXT2;
	hints->addr_format = FI_SOCKADDR_IN;
	hints->domain_attr->threading = o->threading;
	hints->fabric_attr->prov_name = strdup(prov);
	ret = fi_getinfo(FI_VERSION(1, 17), "127.0.0.1", NULL, FI_SOURCE, hints, &info);
	if (ret) {
		fail(r, "fi_getinfo", ret);
		goto out;
	}
	ret = fi_fabric(info->fabric_attr, &fabric, NULL);
	if (!ret)
		ret = fi_domain(fabric, info, &domain, NULL);
	if (ret) {
		fail(r, "fabric/domain", ret);
		goto out;
	}

	/*
	 * Best of REPEATS insertions, each into a fresh AV (first-touch page faults included,
	 * as an application pays them); the memory is the first one's growth.
	 */
	best = 1e30;
	for (rep = 0; rep < REPEATS; rep++) {
		rss0 = rss_bytes();
		ret = fi_av_open(domain, &av_attr, &av, NULL);
		if (ret) {
			av = NULL;
			fail(r, "fi_av_open", ret);
			goto out;
		}
		t0 = now_ns();
		ret = fi_av_insert(av, addrs, n, fi_addr, 0, NULL);
		best = UTIL_BENCH_MIN(best, (now_ns() - t0) / (double) n);
		if (ret != (int) n) {
			fail(r, "fi_av_insert", ret);
			goto out;
		}
		if (!rep)
			r->value[M_MEMORY] = (double) (rss_bytes() - rss0) / (double) n;
		if (rep + 1 < REPEATS) {
			fi_close(&av->fid);
			av = NULL;
		}
	}
	r->value[M_INSERT] = best;
	r->insert_rate = 1e3 / best;
	for (i = 0; i < n; i++)
		fi_shuffled[i] = fi_addr[perm[i]];

	/* correctness first, untimed: a fast wrong answer is no result */
	for (i = 0; i < n; i += 101) {
		len = sizeof(got);
		if (fi_av_lookup(av, fi_addr[i], &got, &len) ||
		    got.sin_addr.s_addr != addrs[i].sin_addr.s_addr) {
			fail(r, "fi_av_lookup check", -FI_EOTHER);
			goto out;
		}
	}

	/* best of REPEATS: the machine is shared, the best run is the AV's own cost */
	best = 1e30;
	for (rep = 0; rep < REPEATS; rep++) {
		t0 = now_ns();
		for (i = 0; i < n; i++) {
			len = sizeof(got);
			fi_av_lookup(av, fi_addr[i], &got, &len);
			sink += got.sin_port;
		}
		best = UTIL_BENCH_MIN(best, (now_ns() - t0) / (double) n);
	}
	r->value[M_LOOKUP_SEQ] = best;
	best = 1e30;
	for (rep = 0; rep < REPEATS; rep++) {
		t0 = now_ns();
		for (i = 0; i < n; i++) {
			len = sizeof(got);
			fi_av_lookup(av, fi_shuffled[i], &got, &len);
			sink += got.sin_port;
		}
		best = UTIL_BENCH_MIN(best, (now_ns() - t0) / (double) n);
	}
	r->value[M_LOOKUP_RAND] = best;

	if (!fi_open_ops(&av->fid, FI_LAYER_AV_OPS, 0, (void **) &ext, NULL) && ext) {
		for (i = 0; i < n; i += 101) {
			if (ext->reverse_lookup(av, &addrs[i], sizeof(addrs[i]), &back) ||
			    back != fi_addr[i]) {
				fail(r, "reverse lookup check", -FI_EOTHER);
				goto out;
			}
		}
		best = 1e30;
		for (rep = 0; rep < REPEATS; rep++) {
			t0 = now_ns();
			for (i = 0; i < n; i++) {
				ext->reverse_lookup(av, &addrs[i], sizeof(addrs[i]), &back);
				sink += back;
			}
			best = UTIL_BENCH_MIN(best, (now_ns() - t0) / (double) n);
		}
		r->value[M_REVERSE_SEQ] = best;
		best = 1e30;
		for (rep = 0; rep < REPEATS; rep++) {
			t0 = now_ns();
			for (i = 0; i < n; i++) {
				ext->reverse_lookup(av, &shuffled[i], sizeof(shuffled[i]), &back);
				sink += back;
			}
			best = UTIL_BENCH_MIN(best, (now_ns() - t0) / (double) n);
		}
		r->value[M_REVERSE_RAND] = best;
	}
	if (ext && ext->size >= sizeof(*ext) && ext->reverse_lookupv) {
		fi_addr_t batch[BATCH];
		const struct sockaddr_in *order[2] = {addrs, shuffled};
		int which;

		for (which = 0; which < 2; which++) {
			best = 1e30;
			for (rep = 0; rep < REPEATS; rep++) {
				t0 = now_ns();
				for (i = 0; i + BATCH <= n; i += BATCH) {
					ext->reverse_lookupv(av, &order[which][i], sizeof(*addrs),
							     BATCH, batch);
					sink += batch[BATCH - 1];
				}
				best = UTIL_BENCH_MIN(best, (now_ns() - t0) / (double) i);
			}
			r->value[which ? M_REVV_RAND : M_REVV_SEQ] = best;
		}
		ext->reverse_lookupv(av, shuffled, sizeof(*addrs), BATCH, batch);
		for (i = 0; i < BATCH; i++) {
			if (batch[i] != fi_shuffled[i]) {
				fail(r, "reverse_lookupv check", -FI_EOTHER);
				goto out;
			}
		}
	}

	t0 = now_ns();
	ret = fi_av_remove(av, fi_addr, n, 0);
	r->value[M_REMOVE] = (now_ns() - t0) / (double) n;
	if (ret) {
		fail(r, "fi_av_remove", ret);
		r->value[M_REMOVE] = -1;
	}
out:
	if (av)
		fi_close(&av->fid);
	if (domain)
		fi_close(&domain->fid);
	if (fabric)
		fi_close(&fabric->fid);
	fi_freeinfo(info);
	fi_freeinfo(hints);
	free(addrs);
	free(shuffled);
	free(fi_addr);
	free(fi_shuffled);
	free(perm);
	(void) sink;
}

/* Runs one provider in a child; a crash becomes a failed result. */
static void run_isolated(const struct opts *o, const char *prov, struct result *r)
{
	int fds[2], status;
	ssize_t got;
	pid_t pid;

	memset(r, 0, sizeof(*r));
	if (pipe(fds)) {
		fail(r, "pipe", -FI_EOTHER);
		return;
	}
	fflush(NULL);
	pid = fork();
	if (pid == 0) {
		close(fds[0]);
		run_prov(o, prov, r);
		got = write(fds[1], r, sizeof(*r));
		_exit(got == (ssize_t) sizeof(*r) ? 0 : 1);
	}
	close(fds[1]);
	got = pid > 0 ? read(fds[0], r, sizeof(*r)) : -1;
	close(fds[0]);
	if (pid > 0)
		waitpid(pid, &status, 0);
	if (got != (ssize_t) sizeof(*r)) {
		memset(r, 0, sizeof(*r));
		fail(r, pid > 0 && WIFSIGNALED(status) ? "crashed" : "died", -FI_EOTHER);
	}
}

/* "tcp;ofi_rxm" -> "ofi_rxm": the part that tells providers over one core apart */
static const char *short_name(const char *prov)
{
	const char *semi = strchr(prov, ';');

	return semi ? semi + 1 : prov;
}

static void print_value(double v)
{
	if (v < 0)
		printf(" %14s", "-");
	else
		printf(" %14.1f", v);
}

static void usage(const char *prog)
{
	fprintf(stderr,
		"usage: %s [-n count] [-c count_hint] [-m] [-d] [-p prov]...\n"
		"  -n  addresses inserted in one call (default %d)\n"
		"  -c  fi_av_attr.count given to fi_av_open (default: the same as -n; 0: none)\n"
		"  -m  FI_AV_MAP instead of FI_AV_TABLE\n"
		"  -d  FI_THREAD_DOMAIN instead of FI_THREAD_SAFE\n"
		"  -p  a provider to run (repeatable; default tcp;ofi_layer, sockets,\n"
		"      tcp;ofi_rxm);\n"
		"      the first is the one the ratios compare against\n",
		prog, DEFAULT_COUNT);
}

int main(int argc, char **argv)
{
	struct opts o = {
		.count = DEFAULT_COUNT, .hint = SIZE_MAX, .type = FI_AV_TABLE,
		.threading = FI_THREAD_SAFE,
	};
	struct result res[MAX_PROVS];
	int opt, i, m;

	while ((opt = getopt(argc, argv, "n:c:mdp:h")) != -1) {
		switch (opt) {
		case 'n':
			o.count = strtoul(optarg, NULL, 0);
			break;
		case 'c':
			o.hint = strtoul(optarg, NULL, 0);
			break;
		case 'm':
			o.type = FI_AV_MAP;
			break;
		case 'd':
			o.threading = FI_THREAD_DOMAIN;
			break;
		case 'p':
			if (o.prov_cnt < MAX_PROVS)
				o.provs[o.prov_cnt++] = optarg;
			break;
		default:
			usage(argv[0]);
			return opt == 'h' ? 0 : 2;
		}
	}
	if (!o.count || o.count > INT32_MAX) {
		usage(argv[0]);
		return 2;
	}
	if (o.hint == SIZE_MAX)
		o.hint = o.count;
	if (!o.prov_cnt) {
		o.provs[o.prov_cnt++] = "tcp;ofi_layer";
		o.provs[o.prov_cnt++] = "sockets";
		o.provs[o.prov_cnt++] = "tcp;ofi_rxm";
	}

	printf("fi_av_bench: %zu IPv4 addresses, %s, %s, count hint %zu, best of %d\n",
	       o.count, o.type == FI_AV_MAP ? "FI_AV_MAP" : "FI_AV_TABLE",
	       o.threading == FI_THREAD_DOMAIN ? "FI_THREAD_DOMAIN" : "FI_THREAD_SAFE", o.hint,
	       REPEATS);
	for (i = 0; i < o.prov_cnt; i++)
		run_isolated(&o, o.provs[i], &res[i]);

	printf("%-38s", "metric");
	for (i = 0; i < o.prov_cnt; i++)
		printf(" %14.14s", o.provs[i]);
	for (i = 1; i < o.prov_cnt; i++) {
		char ratio[64];

		snprintf(ratio, sizeof(ratio), "%s/%s", short_name(o.provs[i]),
			 short_name(o.provs[0]));
		printf(" %17.17s", ratio);
	}
	printf("\n");
	for (m = 0; m < M_COUNT; m++) {
		printf("%-38s", metric_name[m]);
		for (i = 0; i < o.prov_cnt; i++)
			print_value(res[i].value[m]);
		/* how many times the first provider is faster (smaller): theirs / its */
		for (i = 1; i < o.prov_cnt; i++) {
			if (res[i].value[m] > 0 && res[0].value[m] > 0)
				printf(" %16.2fx", res[i].value[m] / res[0].value[m]);
			else
				printf(" %17s", "-");
		}
		printf("\n");
	}
	printf("%-38s", "insert rate (M addresses/s)");
	for (i = 0; i < o.prov_cnt; i++)
		print_value(res[i].insert_rate > 0 ? res[i].insert_rate : -1);
	printf("\n");
	for (i = 0; i < o.prov_cnt; i++) {
		if (res[i].status)
			printf("# %s: %s failed: %s\n", o.provs[i], res[i].failed_step,
			       fi_strerror(-res[i].status));
	}
	printf("# ratios: the other provider's figure over %s's (above 1: %s is faster or "
	       "smaller); '-': not measured (no reverse lookup call, or a failure)\n",
	       o.provs[0], o.provs[0]);
	return 0;
}
