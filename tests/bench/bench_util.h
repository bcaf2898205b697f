/*
 * What every benchmark program here needs: a clock, whole reads and writes on the pipes between
 * its processes, a child's end in words, the CPUs to pin to, medians, option lists and numbers;
 * and the steps each process takes alike to reach a domain: hints, fi_getinfo, fabric, domain.
 */
#ifndef LAYER_BENCH_UTIL_H
#define LAYER_BENCH_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <rdma/fabric.h>
#include <rdma/fi_domain.h>

/* The libfabric API the benchmarks ask for, and the address their processes meet on. */
#define BENCH_API FI_VERSION(1, 17)
#define BENCH_NODE "127.0.0.1"

/* Monotonic time in microseconds. */
double now_us(void);
/* All of len bytes, across short transfers and EINTR: 0, or -1 when the peer is gone (end of
 * file) or on an error. */
int write_all(int fd, const void *buf, size_t len);
int read_all(int fd, void *buf, size_t len);
/* A child's wait status in words: "exit status 1", "killed by signal 9 (Killed)"; with
 * alarm_s, the child's alarm() of that many seconds, a SIGALRM is "timed out after alarm_s s". */
void bench_describe_status(int status, unsigned alarm_s, char *buf, size_t len);
/* In a forked child: die with the parent (PR_SET_PDEATHSIG), and at once when it is already
 * gone (the parent's pid given), so no benchmark process outlives the one that waits for it. */
void bench_die_with_parent(pid_t parent);
/* The first n of the CPUs this process may run on into cpus (the rest left alone): how many it
 * may run on in all, or -1 when that cannot be told. */
int bench_allowed_cpus(int *cpus, int n);
/* This process onto that CPU alone; -1 leaves it where it is. A failure is said on stderr,
 * prefixed with prog, and the process runs unpinned. */
void bench_pin(const char *prog, int cpu);
/* Column names of the providers: "tcp;ofi_layer" -> "layer" (the part after the last ';',
 * without "ofi_"), or the full names when the short ones would be ambiguous. */
#define BENCH_NAME_LEN 32
void bench_prov_names(const char *const *provs, int n, char names[][BENCH_NAME_LEN]);
/* The median of n samples (sorts them). */
double bench_median(double *v, int n);
/* A comma-separated list cut in place into its items (empty ones skipped, as strtok_r does):
 * their number, or -1 when there are more than max. */
int bench_split_list(char *list, const char **items, int max);
/* A decimal option value in [min, max]: false when it is not one. */
bool bench_parse_ulong(const char *s, unsigned long min, unsigned long max, unsigned long *out);
/* A size with an optional binary suffix (k, m, g) in [min, max]: false when it is not one. */
bool bench_parse_size(const char *s, size_t min, size_t max, size_t *out);

/*
 * Hints for the endpoint of a process that runs one thread: provider prov, caps, FI_CONTEXT,
 * ep_type (FI_AV_TABLE when FI_EP_RDM), the mr_mode bits accepted, FI_THREAD_DOMAIN, manual data
 * progress when asked. NULL when out of memory; fi_freeinfo() them.
 */
struct fi_info *bench_hints(const char *prov, uint64_t caps, enum fi_ep_type ep_type,
			    uint64_t mr_mode, bool manual);
/* fi_getinfo of hints at BENCH_API; on_loopback: bound to BENCH_NODE on an ephemeral port
 * (FI_SOURCE, no service: fi_getname tells it), otherwise where the provider chooses. */
int bench_getinfo(const struct fi_info *hints, bool on_loopback, struct fi_info **info);
/* The fabric and domain of info: 0, or the error, with *failed (unless NULL) naming the call
 * that failed. */
int bench_open_domain(struct fi_info *info, struct fid_fabric **fabric, struct fid_domain **domain,
		      const char **failed);
/* Last of a process's teardown: domain, fabric and info, those that are not NULL. */
void bench_close_domain(struct fid_domain *domain, struct fid_fabric *fabric, struct fi_info *info);
/* An IP address format: the only kind BENCH_NODE can name. */
bool bench_is_ip_format(uint32_t addr_format);

#endif /* LAYER_BENCH_UTIL_H */
