/*
 * fi_av_conform: checks a provider's address vectors against fi_av(3), clause by clause.
 * Each clause runs in a process of its own (see fi_av_conform.c), so a provider that crashes
 * or hangs on one clause fails that clause only.
 */
#ifndef CONFORM_H
#define CONFORM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <rdma/fabric.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>

#define CONFORM_WHY 160

enum verdict {
	V_PASS,
	V_FAIL,
	V_UNSUPPORTED,
};

/* What a clause works with, opened in its own process before it runs. */
struct env {
	const char *prov;
	struct fi_info *info;
	struct fid_fabric *fabric;
	struct fid_domain *domain;
	struct fid_eq *eq;          /* NULL when the provider opens none */
	uint32_t addr_format;
	size_t addrlen;             /* of one address as fi_av_insert takes it */
	char *why;                  /* CONFORM_WHY bytes for the one-line reason */
	const char *self;           /* /proc/self/exe, to start another process */
};

struct clause {
	const char *id;
	const char *what;           /* one line: what is checked (also in the man page) */
	enum verdict (*run)(struct env *e);
	uint64_t domain_needs;      /* CONFORM_NEEDS_* */
};

/* The domain a clause needs: with FI_AV_AUTH_KEY, or with FI_SOURCE endpoints. */
#define CONFORM_NEEDS_AUTH_KEY (1ULL << 0)
#define CONFORM_NEEDS_SOURCE (1ULL << 1)

extern const struct clause conform_clauses[];
extern const size_t conform_clause_cnt;

/* ---- helpers for clauses (fi_av_conform.c) ---- */

enum verdict conform_fail(struct env *e, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
enum verdict conform_unsupported(struct env *e, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* UNSUPPORTED for -FI_ENOSYS / -FI_EOPNOTSUPP / -FI_EBADFLAGS, FAIL otherwise. */
enum verdict conform_refused(struct env *e, const char *call, int ret);

int conform_av_open(struct env *e, enum fi_av_type type, uint64_t flags, size_t count,
		    struct fid_av **av);
/* n synthetic addresses of the domain's format, numbered from first (free with free()). */
void *conform_addrs(struct env *e, unsigned first, size_t n);
/* The i-th address of an array from conform_addrs (for fi_av_insert of a single one). */
void *conform_addr_at(struct env *e, void *addrs, size_t i);
/* Makes address i of an array unusable (a family no provider takes). */
void conform_spoil(struct env *e, void *addrs, size_t i);
/* Whether fi_addr is live in av and holds synthetic address number v. */
bool conform_holds(struct env *e, struct fid_av *av, fi_addr_t fi_addr, unsigned v);
/* Reads the next EQ event (error entries too), up to timeout_ms. */
struct conform_event {
	bool is_err;
	uint32_t event;
	fid_t fid;
	void *context;
	uint64_t data;
	int err;
};
int conform_next_event(struct env *e, struct conform_event *ev, int timeout_ms);

/* ---- shared by the clause files (av_clauses.c) ---- */

#define FAIL(...) conform_fail(e, __VA_ARGS__)

/* Opens an AV or returns from the clause: UNSUPPORTED for a refusal, FAIL otherwise. */
#define OPEN_AV(type, flags, count, avp)                                             \
	do {                                                                         \
		int open_ret_ = conform_av_open(e, (type), (flags), (count), (avp)); \
		if (open_ret_)                                                       \
			return conform_refused(e, "fi_av_open", open_ret_);          \
	} while (0)

/* Inserts n synthetic addresses numbered from first: the number inserted. */
int conform_insert_n(struct env *e, struct fid_av *av, unsigned first, size_t n,
		     fi_addr_t *fi_addr, uint64_t flags, void *context);
/* Closes av (if not NULL) and returns v. */
enum verdict conform_done(struct env *e, struct fid_av *av, enum verdict v);

/* av_clauses_ext.c: user IDs, authorization keys, named AVs, the 1.20 ops layout */
enum verdict user_id_insert(struct env *e);
enum verdict user_id_attr(struct env *e);
enum verdict user_id_report(struct env *e);
enum verdict auth_domain(struct env *e);
enum verdict auth_insert_lookup(struct env *e);
enum verdict auth_size(struct env *e);
enum verdict auth_insert_keyed(struct env *e);
enum verdict auth_remove(struct env *e);
enum verdict named_open(struct env *e);
enum verdict named_read_noname(struct env *e);
enum verdict named_read_missing(struct env *e);
enum verdict named_shared(struct env *e);
enum verdict named_cleanup(struct env *e);
enum verdict ops_v120(struct env *e);
/* A second process of this program, for named AVs: see fi_av_conform.c. */
int conform_run_peer(struct env *e, const char *name, const fi_addr_t *fi_addr, size_t n,
		     char *why, size_t why_len);
int conform_peer_main(int argc, char **argv);

#endif /* CONFORM_H */
