/*
 * Helpers shared by the functional tests. Every test goes through the public fi_* API only, on
 * 127.0.0.1, against the provider named by LAYER_TEST_PROV (default "tcp;ofi_layer").
 *
 * Reporting: one line per check ("ok   name" or "FAIL name: detail (file:line)") and a closing
 * line "N passed, N failed". Exit status 0 when every check passed, 1 otherwise, 77 when the
 * provider is not offered at all (fi_getinfo gives -FI_ENODATA for the base hints).
 */
#ifndef LAYER_TEST_COMMON_H
#define LAYER_TEST_COMMON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_eq.h>

#define LT_NODE "127.0.0.1"
#define LT_FI_VERSION FI_VERSION(1, 17)
#define LT_EXIT_SKIP 77
/*
 * Default bound for any wait on the data path: a hang guard, never a speed check, so it is
 * generous enough for a 1 GiB message on a loaded two-core machine.
 */
#define LT_TIMEOUT_MS 30000
/* Big enough for any provider's endpoint name we expect (sockaddr_in6 and more). */
#define LT_ADDR_MAX 256

/* ---- check/report framework ---- */

/* Starts a test program: arms the hang guard (alarm), makes stdout line buffered. */
void lt_begin(const char *prog);
/* Records one check; prints one line. Returns ok so callers can skip dependent checks. */
bool lt_check_at(bool ok, const char *file, int line, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
#define LT_CHECK(ok, ...) lt_check_at(!!(ok), __FILE__, __LINE__, __VA_ARGS__)
/*
 * Checks that an fi_* return value equals the expected one; on failure the line shows both
 * values with fi_strerror.
 */
bool lt_check_ret_at(long got, long want, const char *file, int line, const char *fmt, ...)
	__attribute__((format(printf, 5, 6)));
#define LT_CHECK_RET(got, want, ...)                                                               \
	lt_check_ret_at((long) (got), (long) (want), __FILE__, __LINE__, __VA_ARGS__)
/* A detail for the reader, not a check ("# ..."). */
void lt_note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Prints the closing line and returns the exit status (0 all passed, 1 otherwise). */
int lt_end(void);
/* Prints the reason and the closing line, and exits with 77. */
void lt_skip(const char *why) __attribute__((noreturn));
/* Number of failed checks so far. */
unsigned lt_failed(void);

/* ---- the provider's log ---- */

/*
 * The provider's warnings go to stderr: from this call on (before libfabric first reads
 * FI_LOG_LEVEL, so first thing in main) they are kept in a file at level warn, so that the
 * test can count them.
 */
void lt_log_capture(void);
/* The same at another level ("info"): its lines are the ones lt_log_count counts. */
void lt_log_capture_at(const char *level);
/* Restores stderr; the number of ofi_layer's warnings (lines of the captured level) whose
 * text holds one of what[], or -1 when nothing was captured. */
int lt_log_count(const char *const *what, size_t what_cnt);
/* The same counted apart: counts[i] for what[i] (at most 16). 0, or -1 as above. */
int lt_log_count_each(const char *const *what, size_t what_cnt, int *counts);

/* ---- time ---- */

uint64_t lt_now_ms(void);
void lt_sleep_ms(unsigned ms);

/* ---- provider selection and fi_info ---- */

/* The provider under test, core first ("tcp;ofi_layer"); from LAYER_TEST_PROV. */
const char *lt_prov(void);
/* True when the provider under test is ofi_layer (for checks of its own promises). */
bool lt_is_layer(void);
/*
 * True when ofi_layer runs over a connected (MSG) core for the provider under test (tcp, and
 * sockets unless FI_OFI_LAYER_CORE_EP_TYPE=rdm), false over a reliable-datagram core (net,
 * shm, or any core with FI_OFI_LAYER_CORE_EP_TYPE=rdm): the rules of fi_layer(7).
 */
bool lt_core_is_msg(void);
/* Whether ep's core places payloads in receive buffers itself (FI_OPT_LAYER_DIRECT_RECV). */
bool lt_direct_recv(struct fid_ep *ep);
/*
 * For tests of the paths through the core: endpoints of one process reach each other by
 * cross-memory attach, which carries large data instead (fi_layer(7)); this turns it off
 * (FI_OFI_LAYER_CMA_SIZE=0) unless the environment says otherwise. First thing in main.
 */
void lt_cma_off(void);
/* The core's name in the provider under test ("tcp" for "tcp;ofi_layer"). */
const char *lt_core_name(void);
/* The same two names in the other order ("ofi_layer;tcp"). */
const char *lt_prov_reversed(void);
/*
 * Fresh hints for the provider under test: FI_EP_RDM, the given caps, FI_CONTEXT | FI_CONTEXT2
 * mode (every test passes struct fi_context2), no MR mode bits, prov_name set.
 */
struct fi_info *lt_hints(uint64_t caps);
/* fi_getinfo for a source address on 127.0.0.1 (port chosen by the provider); over shm,
 * whose addresses are names, without a node. */
int lt_getinfo(struct fi_info *hints, struct fi_info **info);
/* lt_getinfo, but exits with 77 when the provider is not offered at all. */
struct fi_info *lt_getinfo_or_skip(struct fi_info *hints);

/* ---- completion queues with a stash, so several CQs can be progressed while waiting ---- */

/* One completion as the tests see it, whatever CQ format it was read with. */
struct lt_comp {
	void *op_context;
	uint64_t flags;
	size_t len;
	void *buf;
	uint64_t data;
	uint64_t tag;
	fi_addr_t src; /* from fi_cq_readfrom; FI_ADDR_NOTAVAIL when not read with it */
	int err;       /* 0 for a successful completion, else the error entry's positive err */
	int prov_errno;
	size_t olen;
};

struct lt_cq {
	struct fid_cq *cq;
	bool use_from;	   /* read with fi_cq_readfrom (endpoint has FI_SOURCE) */
	int last_ret;	   /* last unexpected negative return of a read (0 if none) */
	struct lt_comp *q; /* completions read but not yet taken */
	size_t head, count, cap;
};

/* Opens a FI_CQ_FORMAT_TAGGED CQ with the wait object given and registers it for progress. */
int lt_cq_open(struct fid_domain *domain, enum fi_wait_obj wait_obj, bool use_from,
	       struct lt_cq *cq);
void lt_cq_close(struct lt_cq *cq);
/* Puts cq back among the registered CQs, or takes it out: lt_progress then leaves its
 * endpoints alone (a test of automatic progress). */
void lt_cq_watch(struct lt_cq *cq, bool is_watched);
/* Reads everything available on every registered CQ into their stashes (drives progress). */
void lt_progress(void);
/*
 * Waits until cq holds at least n completions, progressing all registered CQs; bounded by
 * timeout_ms. Returns 0, or -FI_ETIMEDOUT.
 */
int lt_cq_wait(struct lt_cq *cq, size_t n, int timeout_ms);
/* Takes the oldest stashed completion. Returns false when none. */
bool lt_cq_take(struct lt_cq *cq, struct lt_comp *comp);
/* Waits for one completion and takes it. Returns false on timeout. */
bool lt_cq_next(struct lt_cq *cq, struct lt_comp *comp, int timeout_ms);
/* Progresses for ms milliseconds, then returns how many completions cq holds. */
size_t lt_cq_quiet(struct lt_cq *cq, int ms);

/* ---- endpoints ---- */

/* Options for lt_ep_open; zero means the default. */
struct lt_ep_opts {
	uint64_t tx_bind_flags; /* added to FI_TRANSMIT when binding the tx CQ */
	uint64_t rx_bind_flags; /* added to FI_RECV when binding the rx CQ */
	bool no_enable;		/* leave the endpoint not enabled */
	size_t min_multi_recv;	/* if set, FI_OPT_MIN_MULTI_RECV before enabling */
	uint64_t av_flags;	/* fi_av_attr flags of the endpoint's AV (FI_AV_USER_ID...) */
	enum fi_wait_obj wait_obj; /* of both CQs (FI_WAIT_NONE, 0, by default) */
};

/* A fabric and domain shared by the endpoints of one test. */
struct lt_dom {
	struct fi_info *info;
	struct fid_fabric *fabric;
	struct fid_domain *domain;
};

/* One RDM endpoint with its own AV and its own tx and rx CQs. */
struct lt_ep {
	struct lt_dom *dom;
	struct fid_av *av;
	struct fid_ep *ep;
	struct lt_cq tx, rx;
	char addr[LT_ADDR_MAX];
	size_t addrlen;
};

int lt_dom_open(struct fi_info *info, struct lt_dom *dom);
void lt_dom_close(struct lt_dom *dom);
/* Opens, binds and (unless opts say not) enables an endpoint; fills addr. */
int lt_ep_open(struct lt_dom *dom, const struct lt_ep_opts *opts, struct lt_ep *ep);
/* Enables an endpoint opened with no_enable and fills its address. */
int lt_ep_enable(struct lt_ep *ep);
void lt_ep_close(struct lt_ep *ep);
/* Inserts addr into ep's AV; returns 0 and the fi_addr, or a negative error. */
int lt_av_insert(struct lt_ep *ep, const void *addr, fi_addr_t *fi_addr);
/* fi_av_bind, which libfabric 2.0 deprecates with FI_EVENT AVs (still served and tested). */
int lt_av_bind(struct fid_av *av, struct fid *fid, uint64_t flags);
/*
 * Opens two endpoints that know each other (x_opts, y_opts may be NULL): 0, or the first
 * error, with neither left open.
 */
int lt_pair_open(struct lt_dom *dom, const struct lt_ep_opts *x_opts,
		 const struct lt_ep_opts *y_opts, struct lt_ep *x, struct lt_ep *y,
		 fi_addr_t *x_to_y, fi_addr_t *y_to_x);

/*
 * Sends one message, retrying -FI_EAGAIN while progressing every CQ (bounded). Waits for nothing
 * else. Returns 0 or the error.
 */
ssize_t lt_send(struct lt_ep *ep, const void *buf, size_t len, fi_addr_t dest, void *ctx);
/*
 * Evaluates a posting call (fi_sendmsg, fi_inject...) again while it returns -FI_EAGAIN,
 * progressing every registered CQ in between, for at most LT_TIMEOUT_MS. Gives the last return.
 */
#define LT_RETRY(call)                                                                             \
	({                                                                                         \
		uint64_t lt_deadline_ = lt_now_ms() + LT_TIMEOUT_MS;                               \
		ssize_t lt_ret_;                                                                   \
		for (;;) {                                                                         \
			lt_ret_ = (call);                                                          \
			if (lt_ret_ != -FI_EAGAIN || lt_now_ms() > lt_deadline_)                   \
				break;                                                             \
			lt_progress();                                                             \
		}                                                                                  \
		lt_ret_;                                                                           \
	})
/* Posts one receive, retrying -FI_EAGAIN while progressing (bounded). */
ssize_t lt_recv(struct lt_ep *ep, void *buf, size_t len, fi_addr_t src, void *ctx);

/* ---- data patterns ---- */

/* Fills buf with a pattern that depends on seed and on the byte's offset. */
void lt_fill(void *buf, size_t len, uint64_t seed);
/* Returns the offset of the first byte that differs from the pattern, or len if none. */
size_t lt_verify(const void *buf, size_t len, uint64_t seed);

/* ---- two processes ---- */

/*
 * A child process running this same program (fork + exec of /proc/self/exe) with the role
 * given, connected by two pipes. The child is killed when the parent dies, and every child
 * still alive is killed at exit or when the hang guard fires.
 */
struct lt_child {
	pid_t pid;
	int to_child;	/* parent writes */
	int from_child; /* parent reads */
};

/* Starts a child; its main sees argv[1] == "--lt-child", argv[2] == role. */
int lt_child_spawn(const char *role, struct lt_child *child);
/* In main: returns the role (and the pipe fds) if this process is such a child, else NULL. */
const char *lt_child_role(int argc, char **argv, int *rfd, int *wfd);
/*
 * Starts a child that opens an endpoint and meets ep (lt_child_meet): the child sends its
 * address, takes ep's; the child's fi_addr in ep's AV, or FI_ADDR_NOTAVAIL.
 */
fi_addr_t lt_child_start(const char *role, struct lt_ep *ep, struct lt_child *child);
/* The child's half, over its pipes: the parent's fi_addr in ep's AV, or FI_ADDR_NOTAVAIL. */
fi_addr_t lt_child_meet(struct lt_ep *ep, int rfd, int wfd);
/* Waits (bounded) for the child to exit; kills it first if kill_first. Returns wait status. */
int lt_child_reap(struct lt_child *child, int timeout_ms, bool kill_first);
/* Length-prefixed messages over a pipe, bounded by timeout_ms. */
int lt_pipe_send(int fd, const void *buf, size_t len);
ssize_t lt_pipe_recv(int fd, void *buf, size_t max, int timeout_ms);

/*
 * Runs fn(arg) in a forked child (no exec) so that a crash or hang of the provider becomes a
 * failed check instead of killing the test program. The child's return value (usually an fi_*
 * return) comes back through *ret. Returns 0 if the child returned a value, a positive signal
 * number if it died of one, -1 if it hung (killed after timeout_ms), -2 if it exited without a
 * value (libfabric's SIGSEGV handler exits; *ret is then the exit status).
 */
int lt_guarded(long (*fn)(void *), void *arg, int timeout_ms, long *ret);
/* Describes an lt_guarded outcome for a check line ("-22 (Invalid argument)", "crashed..."). */
const char *lt_guarded_str(int status, long ret, char *buf, size_t len);
/*
 * Runs a group of checks, fn(arg), in a forked child (no exec): its check lines are printed as
 * usual and its counts are added to this process's, but a crash or hang inside it (a provider
 * that frees an object it refused to close, say) becomes one failed check named after the
 * section and the program goes on. Nothing fn changes survives it. Returns 0 if fn ran to its
 * end.
 */
int lt_isolated(const char *name, void (*fn)(void *), void *arg, int timeout_ms);

#endif /* LAYER_TEST_COMMON_H */
