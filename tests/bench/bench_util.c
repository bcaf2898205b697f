/*
 * Clock, pipes, wait statuses, CPUs, medians, options and the way to a domain for the benchmark
 * programs (bench_util.h).
 */
#include "config.h"

#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <stdbool.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench_util.h"

double now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

int write_all(int fd, const void *buf, size_t len)
{
	const char *p = buf;

	while (len) {
		ssize_t n = write(fd, p, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		p += n;
		len -= (size_t) n;
	}
	return 0;
}

int read_all(int fd, void *buf, size_t len)
{
	char *p = buf;

	while (len) {
		ssize_t n = read(fd, p, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		p += n;
		len -= (size_t) n;
	}
	return 0;
}

void bench_describe_status(int status, unsigned alarm_s, char *buf, size_t len)
{
	if (alarm_s && WIFSIGNALED(status) && WTERMSIG(status) == SIGALRM)
		snprintf(buf, len, "timed out after %u s", alarm_s);
	else if (WIFSIGNALED(status))
		snprintf(buf, len, "killed by signal %d (%s)", WTERMSIG(status),
			 strsignal(WTERMSIG(status)));
	else
		snprintf(buf, len, "exit status %d", WEXITSTATUS(status));
}

void bench_die_with_parent(pid_t parent)
{
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (getppid() != parent)
		_exit(1);
}

int bench_allowed_cpus(int *cpus, int n)
{
	cpu_set_t set;
	int found = 0;

	if (sched_getaffinity(0, sizeof(set), &set))
		return -1;
	for (int cpu = 0; cpu < CPU_SETSIZE && found < n; cpu++)
		if (CPU_ISSET(cpu, &set))
			cpus[found++] = cpu;
	return CPU_COUNT(&set);
}

void bench_pin(const char *prog, int cpu)
{
	cpu_set_t set;

	if (cpu < 0)
		return;
	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	if (sched_setaffinity(0, sizeof(set), &set))
		fprintf(stderr, "%s: sched_setaffinity(%d): %s (not pinned)\n", prog, cpu,
			strerror(errno));
}

static int bench_cmp_double(const void *a, const void *b)
{
	double x = *(const double *) a, y = *(const double *) b;

	return (x > y) - (x < y);
}

double bench_median(double *v, int n)
{
	qsort(v, (size_t) n, sizeof(v[0]), bench_cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

int bench_split_list(char *list, const char **items, int max)
{
	char *save = NULL;
	int n = 0;

	for (char *s = strtok_r(list, ",", &save); s; s = strtok_r(NULL, ",", &save)) {
		if (n == max)
			return -1;
		items[n++] = s;
	}
	return n;
}

bool bench_parse_ulong(const char *s, unsigned long min, unsigned long max, unsigned long *out)
{
	char *end;
	unsigned long v;

	errno = 0;
	v = strtoul(s, &end, 10);
	if (errno || end == s || *end || s[0] == '-' || v < min || v > max)
		return false;
	*out = v;
	return true;
}

bool bench_parse_size(const char *s, size_t min, size_t max, size_t *out)
{
	unsigned long long v;
	unsigned shift = 0;
	char *end;

	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || end == s || s[0] == '-')
		return false;
	switch (*end) {
	case 'k':
	case 'K':
		shift = 10;
		break;
	case 'm':
	case 'M':
		shift = 20;
		break;
	case 'g':
	case 'G':
		shift = 30;
		break;
	}
	if (shift)
		end++;
	if (*end || v > (unsigned long long) max >> shift || v << shift < min)
		return false;
	*out = (size_t) (v << shift);
	return true;
}

static void bench_short_name(const char *prov, char *buf, size_t len)
{
	const char *p = strrchr(prov, ';');

	p = p ? p + 1 : prov;
	if (!strncmp(p, "ofi_", 4) && p[4])
		p += 4;
	snprintf(buf, len, "%s", p);
}

void bench_prov_names(const char *const *provs, int n, char names[][BENCH_NAME_LEN])
{
	bool clash = false;

	for (int p = 0; p < n; p++)
		bench_short_name(provs[p], names[p], BENCH_NAME_LEN);
	for (int p = 0; p < n; p++)
		for (int q = p + 1; q < n; q++)
			clash = clash || !strcmp(names[p], names[q]);
	if (clash)
		for (int p = 0; p < n; p++)
			snprintf(names[p], BENCH_NAME_LEN, "%s", provs[p]);
}

struct fi_info *bench_hints(const char *prov, uint64_t caps, enum fi_ep_type ep_type,
			    uint64_t mr_mode, bool manual)
{
	struct fi_info *hints = fi_allocinfo();

	if (!hints)
		return NULL;
	hints->caps = caps;
	hints->mode = FI_CONTEXT;
	hints->ep_attr->type = ep_type;
	hints->domain_attr->mr_mode = mr_mode;
	/* one thread per process: the provider may take its lock-free path */
	hints->domain_attr->threading = FI_THREAD_DOMAIN;
	if (ep_type == FI_EP_RDM)
		hints->domain_attr->av_type = FI_AV_TABLE;
	if (manual)
		hints->domain_attr->data_progress = FI_PROGRESS_MANUAL;
	hints->fabric_attr->prov_name = strdup(prov);
	if (!hints->fabric_attr->prov_name) {
		fi_freeinfo(hints);
		return NULL;
	}
	return hints;
}

int bench_getinfo(const struct fi_info *hints, bool on_loopback, struct fi_info **info)
{
	if (on_loopback)
		return fi_getinfo(BENCH_API, BENCH_NODE, NULL, FI_SOURCE, hints, info);
	return fi_getinfo(BENCH_API, NULL, NULL, 0, hints, info);
}

int bench_open_domain(struct fi_info *info, struct fid_fabric **fabric, struct fid_domain **domain,
		      const char **failed)
{
	const char *call = "fi_fabric";
	int ret;

	ret = fi_fabric(info->fabric_attr, fabric, NULL);
	if (!ret) {
		call = "fi_domain";
		ret = fi_domain(*fabric, info, domain, NULL);
	}
	if (ret && failed)
		*failed = call;
	return ret;
}

void bench_close_domain(struct fid_domain *domain, struct fid_fabric *fabric, struct fi_info *info)
{
	if (domain)
		fi_close(&domain->fid);
	if (fabric)
		fi_close(&fabric->fid);
	if (info)
		fi_freeinfo(info);
}

bool bench_is_ip_format(uint32_t addr_format)
{
	return addr_format == FI_SOCKADDR || addr_format == FI_SOCKADDR_IN ||
	       addr_format == FI_SOCKADDR_IN6;
}
