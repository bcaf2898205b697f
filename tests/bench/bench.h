/*
 * fi_layer_bench: what the main process, the client and the server share.
 *
 * fi_layer_bench.c  the main process: options, the list of tests, runs, medians, the table
 * bench_peer.c      the client and server processes of one run
 * bench_fab.c       opening endpoints (RDM through an AV, MSG through fi_connect/fi_accept),
 *                   the address exchange over pipes (--fabtests: the server learns the
 *                   client's from its first message, as fabtests' servers do)
 * bench_xfer.c      the data path and the tests: latency, bandwidth, matching under load
 */
#ifndef FI_LAYER_BENCH_H
#define FI_LAYER_BENCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>

#include "bench_util.h"

#define BENCH_NAME "fi_layer_bench"
#define DEFAULT_PROVS "tcp;ofi_layer,tcp;ofi_rxm"
/* "tcp-msg": not a provider but a connected FI_EP_MSG endpoint of the core before the dash */
#define MSG_EP_SUFFIX "-msg"

#define MAX_PROVS 8
#define MAX_SIZES 16
#define MAX_COUNTS 16
#define MAX_TESTS (2 * 2 * MAX_SIZES + 2 * MAX_COUNTS) /* api x kind x size + match rows */
#define MAX_REPEATS 100
#define MAX_MSG_SIZE (1UL << 30)
#define MAX_WINDOW 1024
#define MAX_MATCH_COUNT 65536
#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

#define DEFAULT_REPEATS 5
#define DEFAULT_WINDOW 64
#define DEFAULT_TIMEOUT 20
/* The server's alarm() outlasts the client's by this much, so that a hang is the client's to
 * report. */
#define SERVER_ALARM_EXTRA 5

/* Default iterations come from a byte budget so every size takes a similar, short time. */
#define LAT_BUDGET (64UL << 20)
#define LAT_MIN_ITERS 100UL
#define LAT_MAX_ITERS 10000UL
#define BW_BUDGET (512UL << 20)
#define BW_MAX_MSGS 100000UL
/* Matching tests: rounds of N messages until this many messages are timed. */
#define MATCH_BUDGET 16384UL

#define BENCH_TAG 0x4c41594552ULL /* any constant: every message of a run carries it */
#define ACK_SIZE 4
#define CQ_BATCH 16
/* A waitpid() every this many empty CQ polls notices a dead server without a measurable cost. */
#define LIVENESS_POLLS (1U << 16)

/*
 * Matching tests: receive i of a round has tag MATCH_TAG(i) and lands in slot i of the
 * receive buffer; every message carries its own tag as payload, so both the tag of each
 * completion and the data in each buffer are checked. Distinct from BENCH_TAG.
 */
#define MATCH_MSG_SIZE sizeof(uint64_t)
#define MATCH_TAG(i) ((uint64_t) 0x4d41 << 32 | (uint64_t) (i))
#define SIGNAL_TAG ((uint64_t) 0x5347 << 32)

/* What the benchmark accepts; it registers memory whenever the provider asks for FI_MR_LOCAL. */
#define MR_MODE_ACCEPTED                                                                           \
	(FI_MR_LOCAL | FI_MR_ALLOCATED | FI_MR_VIRT_ADDR | FI_MR_PROV_KEY | FI_MR_ENDPOINT)

enum test_api { API_MSG, API_TAGGED };
/* LAT and BW exist for both APIs; MATCH and UNEXP are tagged only. */
enum test_kind { KIND_LAT, KIND_BW, KIND_MATCH, KIND_UNEXP };

struct test {
	enum test_api api;
	enum test_kind kind;
	size_t size;   /* message size in bytes */
	size_t count;  /* matching: N, the receives of a round */
	size_t iters;  /* latency: timed round trips; bandwidth: timed messages; matching: rounds */
	size_t warmup; /* latency: round trips; bandwidth: windows; matching: rounds (untimed) */
};

struct options {
	const char *provs[MAX_PROVS];
	int nprovs;
	int repeats;
	size_t iters; /* 0: from the byte budget */
	size_t sizes[MAX_SIZES];
	int nsizes; /* 0: the default sizes */
	size_t counts[MAX_COUNTS];
	int ncounts; /* 0: the default counts */
	size_t window;
	unsigned timeout; /* seconds per test */
	bool quick;
	bool run_msg;	 /* rows msg_* */
	bool run_tagged; /* rows tag_lat, tag_bw */
	bool run_match;	 /* rows tag_match, tag_unexp */
	bool best;	 /* the best sample of the repeats instead of the median */
	bool csv;
	bool verbose;
	bool pin;
	bool fabtests;	 /* set endpoints up as fabtests does (--fabtests) */
};

/*
 * The run being forked: one test of one provider, so that the providers alternate test by
 * test and a burst of load on the machine hits them alike. Endpoints are opened the same way
 * for every test of a kind: the matching tests need a receive queue of N and a CQ that holds
 * a round, which the latency and bandwidth tests should not pay for.
 */
struct run_cfg {
	int test;	  /* the index in tests[] */
	bool matching;	  /* a matching test, or a latency or bandwidth one */
	bool is_first;	  /* the first run of its kind: say what the endpoints are */
	size_t max_count; /* receives posted at once: the largest N, 0 outside matching */
	size_t buf_size;  /* each side's send and receive buffer */
};

/* Records from a client to the main process: one write() each, atomic on a pipe. */
enum rec_type { REC_BEGIN, REC_RESULT, REC_NA, REC_UNAVAIL, REC_DONE };

struct record {
	int32_t type;
	int32_t test;
	double value;
};

/* One side's fabric objects and completion counters. */
struct fab {
	const char *prov;
	const char *role; /* "client" or "server", for messages */
	bool is_server;	  /* the side that listens (MSG) and answers (every test) */
	bool is_msg_ep;	  /* a "-msg" name: FI_EP_MSG of the core, connected */
	char core[64];	  /* the provider fi_getinfo is asked for */
	struct fi_info *info;
	struct fid_fabric *fabric;
	struct fid_domain *domain;
	struct fid_av *av;   /* RDM only */
	struct fid_eq *eq;   /* MSG only: connection events */
	struct fid_pep *pep; /* MSG server only: the listening endpoint */
	struct fid_cq *cq;    /* both directions; transmit only with --fabtests */
	struct fid_cq *rx_cq; /* --fabtests: the receive CQ */
	struct fid_ep *ep;
	struct fid_mr *tx_mr;
	struct fid_mr *rx_mr;
	void *tx_desc;
	void *rx_desc;
	char *tx_buf;
	char *rx_buf;
	size_t buf_size;
	size_t nctx;		   /* entries in each of tx_ctx and rx_ctx */
	struct fi_context *tx_ctx; /* a completion with one of these is a send */
	struct fi_context *rx_ctx; /* anything else is a receive */
	struct fi_context sig_ctx; /* the receive of the unexpected test's signal */
	size_t window;		   /* outstanding sends: the smaller of both sides' */
	size_t rx_depth;	   /* receives that may be posted at once, both sides; 0: any */
	bool has_tagged;	   /* both sides opened the endpoint with FI_TAGGED */
	bool check_tags;	   /* matching tests: every receive completion is checked */
	uint64_t max_msg_size;	   /* the smaller of both sides' */
	size_t inject_size;	   /* --fabtests: smaller sends go out with fi_inject */
	fi_addr_t peer;
	char peer_addr[256]; /* MSG client: the server's listening address */
	size_t peer_addrlen;
	int rfd;	  /* pipe from the peer: the matching tests' signals */
	int wfd;	  /* pipe to the peer */
	uint64_t tx_done; /* send completions so far */
	uint64_t rx_done; /* receive completions so far */
	pid_t watch_pid;  /* client: the server, checked while the CQ stays empty */
	unsigned empty_polls;
};

/* fi_layer_bench.c: the run as the main process set it up, inherited by the children. */
extern struct options opt;
extern struct test tests[MAX_TESTS];
extern int ntests;
extern struct run_cfg bench_run;
extern int bench_cpus[2];     /* client's and server's CPU, -1: not pinned */
extern bool bench_yield_idle; /* one CPU for both processes: an idle poller hands it over */
/* Not this run's test, or failed in an earlier repeat: both children leave it out. */
bool test_skipped(int prov, int test);

/* bench_fab.c */
bool prov_is_msg_ep(const char *prov);
void fab_err(const struct fab *f, const char *call, int ret);
int fab_open(struct fab *f, size_t buf_size);
void fab_close(struct fab *f);
int fab_send_hdr(const struct fab *f, int fd, int status);
int fab_recv_hdr(struct fab *f, int fd);
int fab_connect(struct fab *f);
void fab_describe(const struct fab *f);

/* bench_xfer.c */
int check_peer_alive(struct fab *f);
int cq_poll(struct fab *f);
bool test_possible(const struct fab *f, const struct test *t);
int run_test(struct fab *f, const struct test *t, bool initiator, double *result);
int exchange_names(struct fab *f);

/* bench_peer.c */
int client_main(int prov, int res_fd);

#endif /* FI_LAYER_BENCH_H */
