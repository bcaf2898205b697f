/*
 * What test_av_set.c and test_av_set_stress.c share: the domain they run on, their sizes,
 * and the helpers that open AVs and sets and check a set's members.
 */
#ifndef LAYER_TEST_AV_SET_H
#define LAYER_TEST_AV_SET_H

#include "common.h"

#include <rdma/fi_collective.h>

#define HANG_GUARD_S 60
#define GUARD_MS 10000
#define UNKNOWN_FLAG (1ULL << 62)
#define NADDR 10
#define MAX_MEMBERS 1024
#define RANDOM_ADDRS 300
#define RANDOM_STEPS 3000
#define THREADS 4
#define THREAD_ADDRS 256
#define THREAD_ITERS 3000

struct ctx {
	struct lt_dom dom;
	uint32_t addr_format;
	size_t addrlen;
};

/* An empty fi_addr list. */
extern const fi_addr_t none[1];

/* An AV of n distinct addresses (never contacted), their fi_addrs in fi_addrs; NULL on error. */
struct fid_av *open_av(struct ctx *c, enum fi_av_type type, unsigned n, fi_addr_t *fi_addrs);
/* The attributes of an empty set. */
struct fi_av_set_attr empty_attr(void);
/* The members of set into out (MAX_MEMBERS at most): their number, or a negative error. */
long read_members(struct fid_av_set *set, fi_addr_t *out);
/* One check: set holds exactly want[0..n-1] in this order. */
bool check_members_at(struct fid_av_set *set, const fi_addr_t *want, long n, const char *file,
		      int line, const char *fmt, ...) __attribute__((format(printf, 6, 7)));
#define CHECK_MEMBERS(set, want, n, ...)                                                           \
	check_members_at(set, want, n, __FILE__, __LINE__, __VA_ARGS__)
/* A set built with fi_av_set_insert in the order given; NULL on error. */
struct fid_av_set *set_of(struct fid_av *av, const fi_addr_t *ids, size_t n);
void close_set(struct fid_av_set *set);

/* test_av_set_stress.c */
void test_random(struct ctx *c);
void test_threads(struct ctx *c);

#endif /* LAYER_TEST_AV_SET_H */
